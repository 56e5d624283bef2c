#!/usr/bin/env bash
# The whole test suite (make test): unit tests, then unit tests under
# ASan/UBSan, then every tests/suite/*.sh in order. Each suite prints
# "PASS name" / "FAIL name: why" / "SKIP name: why" lines and exits non-zero
# on a failure; services a suite needs are started and stopped by it.
#
# The runner itself fails loudly: a build of the tests that fails, a suite
# that exits non-zero (or is killed) without having said FAIL, and a suite
# that outlives its time limit are FAIL lines. Under CI=true a SKIP is a
# FAIL unless tests/skips-allowed lists it (what the machine cannot have).
#   CKPT_SUITE_TIMEOUT  seconds a suite may run (default 1800; the
#                       conformance suite 3600)
#   CKPT_SUITES         only these suites (file names, e.g. "24-stdio.sh")
set -u
cd "$(dirname "$0")/.." || exit 1
export CKPT_TOP=$PWD
log=build/test-logs; mkdir -p "$log"
pass=0 fail=0 skip=0
ci=0
case ${CI:-} in true | 1 | yes) ci=1 ;; esac

allowed_skip() { # NAME: listed in tests/skips-allowed
    local re
    while read -r re _; do
        case $re in '' | '#'*) continue ;; esac
        [[ $1 =~ $re ]] && return 0
    done <tests/skips-allowed
    return 1
}

# count: reads a step's lines, echoes them, counts; a SKIP under CI that
# is not allowed counts as a FAIL. Sets STEP_FAILS.
count() {
    local line name f=0
    while IFS= read -r line; do
        case $line in
        PASS\ *) pass=$((pass + 1)); echo "$line" ;;
        FAIL\ *) fail=$((fail + 1)); f=$((f + 1)); echo "$line" ;;
        SKIP\ *)
            name=${line#SKIP }; name=${name%%:*}
            if (( ci )) && ! allowed_skip "$name"; then
                fail=$((fail + 1)); f=$((f + 1))
                echo "FAIL $name: skipped on CI, where it must run (${line#*: })"
            else
                skip=$((skip + 1)); echo "$line"
            fi ;;
        *) echo "$line" ;;
        esac
    done
    STEP_FAILS=$f
}

# run_step NAME LIMIT CMD...: runs CMD under a time limit, its lines shown
# as they come and counted (and kept in build/test-logs); a non-zero exit
# without a FAIL line, or the time limit, is a FAIL of its own.
run_step() {
    local name=$1 limit=$2 out rc
    shift 2
    echo "== $name"
    out=$log/$(echo "$name" | tr '/ ' '__').out
    count < <(timeout -k 10 -s TERM "$limit" "$@" 2>&1 | tee "$out"; echo "${PIPESTATUS[0]}" >"$out.rc")
    rc=$(cat "$out.rc" 2>/dev/null || echo 99)
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        fail=$((fail + 1))
        echo "FAIL $name: killed after its time limit of $limit s (a hang; log in $out)"
    elif [ "$rc" != 0 ] && (( STEP_FAILS == 0 )); then
        fail=$((fail + 1))
        echo "FAIL $name: exited with status $rc without naming a failed check (log in $out)"
        tail -n 15 "$out" | sed 's/^/    | /'
    fi
}

# The unit tests, plain and under the sanitizers; a failed build is a FAIL.
run_step unit-build 1800 make -s --no-print-directory build-all
run_step unit 900 make -s --no-print-directory test-unit
run_step asan-unit 2400 bash -c 'make -s --no-print-directory test-unit ASAN=1 UBSAN=1 BUILD=build/asan 2>&1 |
    sed "s/^PASS unit/PASS asan-unit/;s/^FAIL unit/FAIL asan-unit/"; exit "${PIPESTATUS[0]}"'
for s in tests/suite/*.sh; do
    [ -e "$s" ] || continue
    n=${s##*/}
    if [ -n "${CKPT_SUITES:-}" ] && [[ " $CKPT_SUITES " != *" $n "* ]]; then
        continue
    fi
    lim=${CKPT_SUITE_TIMEOUT:-1800}
    [ "$n" = 20-conformance.sh ] && lim=${CKPT_SUITE_TIMEOUT:-3600}
    run_step "$s" "$lim" bash "$s"
done
echo
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
