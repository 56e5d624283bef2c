#!/usr/bin/env bash
# CUDA, without a GPU: the Driver API workloads (tests/cuda/wl_*.c) run bare
# against the simulated driver and are checked against expected checksums;
# then the CUDA plugin, standalone (cuda-plugin-test: plugin sources + a fake
# plugin registry), runs each workload through a round in every mode and
# must print exactly what a bare run of the same length prints. Checkpoint,
# kill and resume under ckrun are added by the core's suites.
set -u
cd "$(dirname "$0")/../.." || exit 1
bin=${BUILD:-build}/tests/cuda
exp=tests/cuda/expected
log=${BUILD:-build}/test-logs/cuda; mkdir -p "$log"
workloads="alloc streams vmm pinned modules"
steps=240
fail=0

ok() { echo "PASS cuda/$1"; }
bad() { echo "FAIL cuda/$1${2:+: $2}"; sed 's/^/    /' "$log/$1.err" 2>/dev/null | tail -5; fail=1; }
unset CKSIM_CC CKSIM_DEVICE_NAME CKSIM_MEM_MB CUTEST_STEPS

if [ ! -x "$bin/cuda-plugin-test" ]; then
    echo "FAIL cuda/build: $bin/cuda-plugin-test missing (run make)"; exit 1
fi

# Bare, default length (a few seconds each), against the expected output.
for w in $workloads; do
    name=bare-$w
    if out=$(timeout 120 "$bin/cuda-$w" 2>"$log/$name.err") && [ "$out" = "$(cat "$exp/$w.out")" ]; then
        ok "$name"
    else
        bad "$name" "output differs from $exp/$w.out"
    fi
done

# A binary-only module on another GPU model fails, by name.
name=bare-modules-other-gpu
out=$(CKSIM_CC=8.0 timeout 60 "$bin/cuda-modules" 2>"$log/$name.err"); rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q CUDA_ERROR_NO_BINARY_FOR_GPU; then ok "$name"; else bad "$name" "rc=$rc"; fi

# Through the plugin: every mode must print what a bare run prints.
export CUTEST_STEPS=$steps
for w in $workloads; do
    ref=$(timeout 60 "$bin/cuda-$w" 2>/dev/null)
    for m in plain resume restart async refuse quiesce driver-resume driver-restart; do
        name=plugin-$w-$m
        if out=$(timeout 60 "$bin/cuda-plugin-test" "$w" "$m" 2>"$log/$name.err") && [ -n "$ref" ] && [ "$out" = "$ref" ]; then
            ok "$name"
        else
            bad "$name" "differs from the uninterrupted run"
        fi
    done
    # Restart on another GPU model: PTX is loaded again; a cubin-only
    # module fails the restart with the plugin's message.
    name=plugin-$w-other-gpu
    out=$(timeout 60 "$bin/cuda-plugin-test" "$w" other-gpu 2>"$log/$name.err"); rc=$?
    if [ "$w" = modules ]; then
        if [ $rc -eq 3 ] && grep -q "cannot be loaded on .*CUDA_ERROR_NO_BINARY_FOR_GPU" "$log/$name.err"; then
            ok "$name"
        else
            bad "$name" "expected a clear NO_BINARY_FOR_GPU failure, rc=$rc"
        fi
    elif [ $rc -eq 0 ] && [ "$out" = "$ref" ]; then
        ok "$name"
    else
        bad "$name" "rc=$rc"
    fi
    # Through the driver's checkpoint API (the sim's model of it): same
    # chip type only, and the failure says which mode moves between models.
    name=plugin-$w-driver-other-gpu
    timeout 60 "$bin/cuda-plugin-test" "$w" driver-other-gpu >/dev/null 2>"$log/$name.err"; rc=$?
    if [ $rc -eq 3 ] && grep -q "CKRUN_CUDA_CHECKPOINT=capture" "$log/$name.err"; then ok "$name"; else bad "$name" "rc=$rc"; fi
done
# Preloaded, as libckpt.so will be: the plugin (with a fake registry firing
# rounds on a timer) interposes the unmodified workloads' calls to the
# simulated libcuda.so.1; the simulated driver is reset in every round.
pre=$PWD/$bin/libcuda-plugin-preload.so
for w in $workloads; do
    ref=$(timeout 60 "$bin/cuda-$w" 2>/dev/null)
    for k in restart resume; do
        name=preload-$w-$k
        if out=$(LD_PRELOAD=$pre FAKE_CKPT_ROUNDS=4 FAKE_CKPT_EVERY_MS=30 FAKE_CKPT_KIND=$k \
                 timeout 60 "$bin/cuda-$w" 2>"$log/$name.err") && [ "$out" = "$ref" ] &&
           grep -q "round 1 done" "$log/$name.err"; then
            ok "$name"
        else
            bad "$name" "differs from the uninterrupted run, or no round happened"
        fi
    done
done

# Runtime-style lookups (dlopen libcuda.so.1, dlsym cuGetProcAddress on
# that handle) reach the plugin through a directory whose libcuda.so.1 is
# the preloaded library; the plugin opens the real driver by path.
name=preload-rt-style
ref=$(LD_LIBRARY_PATH=${BUILD:-build}/sim CUTEST_STEPS=1500 timeout 60 "$bin/cuda-rt-style" 2>/dev/null)
if out=$(LD_PRELOAD=$pre LD_LIBRARY_PATH=$PWD/$bin/shim CKRUN_CUDA_DRIVER=$PWD/${BUILD:-build}/sim/libcuda.so.1 \
         FAKE_CKPT_ROUNDS=4 FAKE_CKPT_EVERY_MS=30 CUTEST_STEPS=1500 timeout 60 "$bin/cuda-rt-style" \
         2>"$log/$name.err") && [ -n "$ref" ] && [ "$out" = "$ref" ] && grep -q "round 1 done" "$log/$name.err"; then
    ok "$name"
else
    bad "$name" "differs from the bare run, or no round happened"
fi

# The project's Driver API declarations (plugins/cuda/cuda_abi.h) against
# NVIDIA's cuda.h, where a toolkit is installed (else two SKIP lines).
bash tests/cuda/abi-check.sh || fail=1

# The GPU check's program builds (with the project's cuda_abi.h) and its
# embedded PTX assembles for sm_90 (the full check needs a GPU: scripts/gpu-check.sh).
name=gpu-check-compile
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" ]; then
    if bash scripts/gpu-check.sh --compile-only >"$log/$name.err" 2>&1; then ok "$name"; else bad "$name"; fi
else
    echo "SKIP cuda/$name: no ptxas"
fi

# The same harness built with ASan/UBSan (scripts/test.sh builds
# build/asan for the unit tests): memory errors in the plugin or the sim.
asan=build/asan/tests/cuda/cuda-plugin-test
if [ -x "$asan" ]; then
    export CUTEST_STEPS=60
    for w in $workloads; do
        ref=$(timeout 60 "$bin/cuda-$w" 2>/dev/null)
        for m in restart async refuse driver-restart; do
            name=asan-plugin-$w-$m
            if out=$(timeout 120 "$asan" "$w" "$m" 2>"$log/$name.err") && [ "$out" = "$ref" ]; then
                ok "$name"
            else
                bad "$name" "sanitizer report or different output"
            fi
        done
    done
else
    echo "SKIP cuda/asan-plugin: $asan not built (make ASAN=1 UBSAN=1 BUILD=build/asan)"
fi

# Under ckrun: checkpoint, kill -9 of ckrun and the job, resume in a new
# process whose driver state is gone; device memory comes back at the same
# addresses and the output equals an uninterrupted run's.
for w in $workloads; do
    if out=$(bash tests/cuda/ckrun-cycle.sh "$w" 2>&1); then
        echo "$out" | grep -E '^(PASS|SKIP)'
    else
        echo "$out" | sed -n '/^FAIL/,$p'
        fail=1
    fi
done
exit $fail
