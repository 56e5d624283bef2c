#!/usr/bin/env bash
# Runs unit-test programs; prints one PASS/FAIL line each.
set -u
fail=0
for t in "$@"; do
    if "$t" >"$t.log" 2>&1; then
        echo "PASS unit/$(basename "$t")"
    else
        echo "FAIL unit/$(basename "$t")"; sed 's/^/    /' "$t.log" | tail -20; fail=1
    fi
done
exit $fail
