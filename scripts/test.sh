#!/usr/bin/env bash
# The whole test suite (make test): unit tests, then unit tests under
# ASan/UBSan, then every tests/suite/*.sh in order. Each suite script prints
# "PASS name" / "FAIL name" / "SKIP name: why" lines and exits non-zero on a
# failure. Services a suite needs are started and stopped by that suite.
set -u
cd "$(dirname "$0")/.."
export CKPT_TOP=$PWD
log=build/test-logs; mkdir -p "$log"
pass=0; fail=0; skip=0
count() {
    while IFS= read -r line; do
        echo "$line"
        case "$line" in
            PASS\ *) pass=$((pass+1)) ;;
            FAIL\ *) fail=$((fail+1)) ;;
            SKIP\ *) skip=$((skip+1)) ;;
        esac
    done
}
run_step() { # name, command...
    local name=$1; shift
    echo "== $name"
    "$@" > >(count) 2>"$log/$name.err" || true
}
count < <(make -s test-unit 2>&1; echo "")
count < <(make -s test-unit ASAN=1 UBSAN=1 BUILD=build/asan 2>&1 | sed 's/^PASS unit/PASS asan-unit/;s/^FAIL unit/FAIL asan-unit/')
for s in tests/suite/*.sh; do
    [ -e "$s" ] || continue
    echo "== $s"
    count < <(bash "$s" 2>&1)
done
echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
