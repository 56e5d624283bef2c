#!/usr/bin/env bash
# One checkpoint / kill -9 / resume cycle of a CUDA workload under ckrun,
# against the simulated driver; prints "PASS cuda/ckrun-NAME" or "FAIL ..."
# and exits non-zero on failure. For the core's suites:
#
#   tests/cuda/ckrun-cycle.sh NAME [STEPS]
#
# The workload runs STEPS steps (default 6000, a few seconds); the round is
# asked for after DELAY seconds (default 1.2), the job and ckrun are killed
# once it is committed, and `ckrun --resume` must finish the run with the
# output of an uninterrupted one. The restored job writes to the standard
# output it had, so both runs write into one file.
set -u
cd "$(dirname "$0")/../.." || exit 1
name=$1
export CUTEST_STEPS=${2:-6000}
delay=${DELAY:-1.2}
bin=${BUILD:-build}
prog=$bin/tests/cuda/cuda-$name
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL cuda/ckrun-$name: $*"; sed 's/^/    /' "$dir"/*.err 2>/dev/null | tail -8; exit 1; }
descendants() {
    local p c
    for p in "$@"; do
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do descendants "$c"; echo "$c"; done
    done
}

[ -x "$bin/ckrun" ] || { echo "SKIP cuda/ckrun-$name: $bin/ckrun not built"; exit 0; }
ref=$("$prog") || fail "bare run failed"
# A job that ended before the round was asked for (a quiet moment on a
# machine whose load varies) proves nothing: once more with twice the steps.
for attempt in 1 2; do
    rm -rf "$dir/store"
    setsid "$bin/ckrun" --store "$dir/store" --job "$name" -- "$prog" >"$dir/out" 2>"$dir/run.err" &
    ck=$!
    sleep "$delay"
    kill -USR2 $ck 2>/dev/null || { wait $ck; CUTEST_STEPS=$((CUTEST_STEPS * 2)); export CUTEST_STEPS
        ref=$("$prog") || fail "bare run failed"; continue; }
    for _ in $(seq 1 600); do
        find "$dir/store" -path '*/manifests/*' -type f 2>/dev/null | grep -q . && break
        kill -0 $ck 2>/dev/null || break
        sleep 0.05
    done
    break
done
find "$dir/store" -path '*/manifests/*' -type f 2>/dev/null | grep -q . ||
    fail "no checkpoint committed ($CUTEST_STEPS steps; ckrun $(kill -0 $ck 2>/dev/null && echo running || echo ended))"
pids="$(descendants $ck) $ck"
kill -9 $pids 2>/dev/null
wait $ck 2>/dev/null
grep -q "done" "$dir/out" && fail "the job finished before it was killed: raise STEPS"
timeout 300 "$bin/ckrun" --store "$dir/store" --job "$name" --resume -- "$prog" >>"$dir/out" 2>"$dir/resume.err" ||
    fail "resume failed"
[ "$(cat "$dir/out")" = "$ref" ] || fail "output differs from the uninterrupted run"
echo "PASS cuda/ckrun-$name"
