#!/usr/bin/env bash
# Runs unit-test programs; prints one PASS/FAIL line each. Each has a time
# limit (CKPT_UNIT_TIMEOUT seconds, default 300): a hang is a FAIL.
set -u
fail=0
limit=${CKPT_UNIT_TIMEOUT:-300}
for t in "$@"; do
    timeout -s KILL "$limit" "$t" >"$t.log" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
        echo "PASS unit/$(basename "$t")"
    else
        [ "$rc" = 137 ] && echo "(killed after $limit s)" >>"$t.log"
        echo "FAIL unit/$(basename "$t"): exit status $rc"; sed 's/^/    /' "$t.log" | tail -20; fail=1
    fi
done
exit $fail
