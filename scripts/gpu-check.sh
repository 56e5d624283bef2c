#!/usr/bin/env bash
# The one check for a machine with an NVIDIA GPU. Builds everything, then:
#   1. bare cuMemcpy HtoD/DtoH bandwidth (pinned and pageable)
#   2. launches/s of an empty kernel: bare, and through the CUDA plugin
#      (preloaded; libckpt.so when it is built, else the plugin test library)
#   3. one plugin round in the same process (preloaded plugin, fake registry):
#      time to quiesce and copy GIB GiB of device memory to the host
#   4. with ckrun: a job filling GIB GiB (default 16) and running a kernel
#      loop is checkpointed (SIGUSR2 to ckrun), killed (kill -9), resumed
#      (ckrun --resume), and checks every byte; for the plugin's own capture
#      and for the driver's checkpoint API (CKRUN_CUDA_CHECKPOINT=driver)
# and prints one summary.
#
#   scripts/gpu-check.sh                 on the GPU
#   scripts/gpu-check.sh --sim           the same flow against the simulated
#                                        driver (GIB defaults to 1)
#   scripts/gpu-check.sh --compile-only  build the GPU program (with the
#                                        project's cuda_abi.h) and check its
#                                        PTX with the toolkit's ptxas; needs
#                                        no GPU
#
# Environment: GIB, CUDA_HOME (default /usr/local/cuda), CKRUN_TIMEOUT
# (seconds a checkpoint or restore may take, default 900).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
CUDA=${CUDA_HOME:-/usr/local/cuda}
out=$top/build/gpu
mode=gpu
case "${1:-}" in
    --sim) mode=sim ;;
    --compile-only) mode=compile ;;
    "") ;;
    *) echo "usage: $0 [--sim|--compile-only]" >&2; exit 2 ;;
esac
if [ "$mode" = sim ]; then GIB=${GIB:-1}; else GIB=${GIB:-16}; fi
limit=${CKRUN_TIMEOUT:-900}
mkdir -p "$out"
fail=0
declare -A R

say() { echo "gpu-check: $*"; }
now() { date +%s.%N; }
# rate BYTES SECONDS -> GB/s (1e9 bytes)
rate() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2f", b / s / 1e9; else print "-" }'; }
field() { sed -n "s/^$1: //p" "$2" | head -1; }

# ---- build ----------------------------------------------------------------
build() {
    local ptxas=$CUDA/bin/ptxas
    say "building"
    make -s >/dev/null || { say "make failed"; exit 1; }
    # The embedded PTX must assemble for Hopper GPUs (sm_90).
    printf '#include <stdio.h>\n#include "kernels_ptx.h"\nint main(void) { fputs(kernels_ptx, stdout); return 0; }\n' |
        cc -x c - -Itests/cuda/gpu -o "$out/print-ptx"
    "$out/print-ptx" >"$out/kernels.ptx"
    if [ -x "$ptxas" ]; then
        "$ptxas" -arch=sm_90 "$out/kernels.ptx" -o "$out/kernels.cubin"
        say "embedded PTX assembles for sm_90"
    else
        say "no ptxas at $ptxas: PTX not checked"
    fi
    # Declared by the project's plugins/cuda/cuda_abi.h (no toolkit header);
    # linked against the toolkit's link-time libcuda where there is one, else
    # the simulated driver's; at run time the loader finds the installed
    # driver (or, with --sim, the simulated one).
    cc -O2 -g -Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -D_GNU_SOURCE -I"$top" \
        tests/cuda/gpu/gpu_check.c -o "$out/gpu_check" -L"$CUDA/lib64/stubs" -L"$top/build/sim" -lcuda
}

build
if [ "$mode" = compile ]; then
    say "compile-only: OK"
    exit 0
fi
if [ "$mode" = sim ]; then
    export LD_LIBRARY_PATH=$top/build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export CKSIM_MEM_MB=$(( (GIB + 1) * 1024 ))
fi
prog=$out/gpu_check
bytes=$(( GIB << 30 ))

# ---- 1. device and bare copies ---------------------------------------------
"$prog" info | tee "$out/info.txt"
R[device]=$(field device "$out/info.txt")
R[devmem]=$(field device_mem_bytes "$out/info.txt")
if [ "$mode" = sim ]; then copy_mib=256; else copy_mib=4096; fi
"$prog" bandwidth $copy_mib | tee "$out/bandwidth.txt"
for k in htod_pinned_gbs dtoh_pinned_gbs htod_pageable_gbs dtoh_pageable_gbs; do
    R[$k]=$(field $k "$out/bandwidth.txt")
done

# ---- 2. launch rate, bare and interposed -------------------------------------
n=200000
"$prog" launches $n >"$out/launch-bare.txt"
R[launch_bare]=$(field launches_per_s "$out/launch-bare.txt")
preload=$top/build/tests/cuda/libcuda-plugin-preload.so
if [ -e "$top/build/libckpt.so" ]; then preload=$top/build/libckpt.so; fi
LD_PRELOAD=$preload "$prog" launches $n >"$out/launch-plugin.txt"
R[launch_plugin]=$(field launches_per_s "$out/launch-plugin.txt")
R[launch_lib]=$(basename "$preload")

# ---- 3. one plugin round in the same process --------------------------------
# The test library's timer fires one round after 5 s (the fill is done by
# then); RESUME on a GPU, RESTART (driver reset) on the simulated driver.
stop=$out/stop
rm -f "$stop"
kind=resume; [ "$mode" = sim ] && kind=restart
( sleep 12; touch "$stop" ) &
if LD_PRELOAD=$top/build/tests/cuda/libcuda-plugin-preload.so FAKE_CKPT_ROUNDS=1 FAKE_CKPT_EVERY_MS=5000 \
   FAKE_CKPT_KIND=$kind "$prog" run "$GIB" "$stop" >"$out/round.txt" 2>"$out/round.err" &&
   grep -q "^verify: OK" "$out/round.txt" && grep -q "round 1 done" "$out/round.err"; then
    line=$(grep "round 1 done" "$out/round.err")
    R[round_d2h_s]=$(echo "$line" | sed 's/.*presuspend_s=\([0-9.]*\).*/\1/')
    R[round_end_s]=$(echo "$line" | sed 's/.*end_s=\([0-9.]*\).*/\1/')
    R[round]="OK ($kind)"
else
    R[round]="FAILED (see $out/round.err)"; fail=1
fi
wait

# ---- 4. checkpoint, kill -9, resume under ckrun ------------------------------
descendants() { # PID -> all its descendants, deepest last
    local p c
    for p in "$@"; do
        for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do echo "$c"; descendants "$c"; done
    done
}
wait_for() { # PATTERN FILE SECONDS
    local t=0
    until grep -q "$1" "$2" 2>/dev/null; do
        sleep 0.05; t=$((t + 1))
        [ $t -lt $(( $3 * 20 )) ] || return 1
    done
}
manifests() { find "$1" -path '*/manifests/*' -type f 2>/dev/null | wc -l; }

cycle() { # NAME [ENV=VALUE...]
    local name=$1; shift
    local store=$out/store-$name log1=$out/$name-run.log log2=$out/$name-resume.log
    local ck ck2 m0 t0 t1 t2 t3 pids
    rm -rf "$store" "$stop"; mkdir -p "$store"
    env "$@" setsid "$top/build/ckrun" --store "$store" --job gpucheck -- "$prog" run "$GIB" "$stop" >"$log1" 2>&1 &
    ck=$!
    if ! wait_for "^iter 20$" "$log1" "$limit"; then
        R[$name]="FAILED: the job did not start (see $log1)"; kill -9 $ck 2>/dev/null; return 1
    fi
    m0=$(manifests "$store"); t0=$(now)
    kill -USR2 $ck
    local t=0
    until [ "$(manifests "$store")" -gt "$m0" ]; do
        sleep 0.05; t=$((t + 1))
        if [ $t -ge $(( limit * 20 )) ]; then R[$name]="FAILED: no checkpoint committed"; return 1; fi
    done
    t1=$(now)
    R[${name}_iter_ckpt]=$(grep -c '^iter' "$log1")
    pids="$(descendants $ck) $ck"
    kill -9 $pids 2>/dev/null || true
    wait $ck 2>/dev/null || true
    t2=$(now)
    env "$@" setsid "$top/build/ckrun" --store "$store" --job gpucheck --resume -- "$prog" run "$GIB" "$stop" \
        >"$log2" 2>&1 &
    ck2=$!
    if ! wait_for "^iter" "$log2" "$limit"; then
        R[$name]="FAILED: the job did not resume (see $log2)"
        # shellcheck disable=SC2046 # pids
        kill -9 $(descendants "$ck2") "$ck2" 2>/dev/null
        return 1
    fi
    t3=$(now)
    R[${name}_iter_resume]=$(grep -m1 '^iter' "$log2" | cut -d' ' -f2)
    sleep 3; touch "$stop"
    wait $ck2 || true
    R[${name}_ckpt_s]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    R[${name}_restore_s]=$(awk -v a="$t2" -v b="$t3" 'BEGIN { printf "%.2f", b - a }')
    if grep -q "^verify: OK" "$log2"; then R[$name]=OK; else R[$name]="FAILED: verify (see $log2)"; return 1; fi
}

if [ -x "$top/build/ckrun" ] && [ -e "$top/build/libckpt.so" ]; then
    cycle capture CKRUN_CUDA_CHECKPOINT=capture || fail=1
    if [ "$mode" = gpu ]; then cycle driver CKRUN_CUDA_CHECKPOINT=driver || fail=1; fi
else
    R[capture]="SKIPPED: build/ckrun or build/libckpt.so not built"
fi

# ---- summary -------------------------------------------------------------------
echo
echo "== gpu-check summary ($mode)"
printf '%-34s %s\n' "device" "${R[device]}"
printf '%-34s %s GiB\n' "device memory" "$(awk -v b="${R[devmem]}" 'BEGIN { printf "%.1f", b / 2^30 }')"
printf '%-34s %s GiB\n' "filled and checked" "$GIB"
printf '%-34s HtoD %s GB/s, DtoH %s GB/s\n' "bare cuMemcpy, pinned" "${R[htod_pinned_gbs]}" "${R[dtoh_pinned_gbs]}"
printf '%-34s HtoD %s GB/s, DtoH %s GB/s\n' "bare cuMemcpy, pageable" "${R[htod_pageable_gbs]}" "${R[dtoh_pageable_gbs]}"
printf '%-34s bare %s, interposed %s (%s)\n' "launches/s" "${R[launch_bare]}" "${R[launch_plugin]}" "${R[launch_lib]}"
printf '%-34s %s\n' "plugin round in process" "${R[round]}"
if [ -n "${R[round_d2h_s]:-}" ]; then
    printf '%-34s %s s (%s GB/s)\n' "  quiesce + copy to host" "${R[round_d2h_s]}" "$(rate $bytes "${R[round_d2h_s]}")"
    printf '%-34s %s s (%s GB/s)\n' "  $kind" "${R[round_end_s]}" "$(rate $bytes "${R[round_end_s]}")"
fi
for name in capture driver; do
    [ -n "${R[$name]:-}" ] || continue
    printf '%-34s %s\n' "ckrun cycle ($name)" "${R[$name]}"
    if [ -n "${R[${name}_ckpt_s]:-}" ]; then
        printf '%-34s %s s (%s GB/s of device memory)\n' "  checkpoint (SIGUSR2 to commit)" \
            "${R[${name}_ckpt_s]}" "$(rate $bytes "${R[${name}_ckpt_s]}")"
        printf '%-34s %s s (%s GB/s of device memory)\n' "  restore (resume to first iter)" \
            "${R[${name}_restore_s]}" "$(rate $bytes "${R[${name}_restore_s]}")"
        printf '%-34s %s / %s\n' "  iterations at kill / on resume" "${R[${name}_iter_ckpt]}" \
            "${R[${name}_iter_resume]}"
    fi
done
exit $fail
