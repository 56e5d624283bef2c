#!/usr/bin/env bash
# The project's Driver API declarations (plugins/cuda/cuda_abi.h) against
# NVIDIA's cuda.h, where a CUDA toolkit is installed ($CUDA_HOME, default
# /usr/local/cuda; elsewhere one SKIP line):
#   cuda/abi-header     tests/cuda/abi_check.c, which includes cuda.h and then
#                       cuda_abi.h in its check mode (static assertions on
#                       every value, type, structure layout, symbol name and
#                       prototype), builds with -Werror and runs;
#   cuda/abi-mutations  the same with one deliberate error at a time in a copy
#                       of the header (a value, a macro, a field, a prototype,
#                       a symbol name): each must fail to build, or the check
#                       checks nothing.
# Prints PASS/FAIL/SKIP lines; exits 1 on a failure.
set -u
cd "$(dirname "$0")/../.." || exit 1
inc=${CUDA_HOME:-/usr/local/cuda}/include
cc=${CC:-cc}
flags=(-Wall -Wextra -Wshadow -Wstrict-prototypes -Werror -D_GNU_SOURCE)
log=${BUILD:-build}/test-logs/cuda; mkdir -p "$log"
work=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-abi.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
fail=0

if [ ! -e "$inc/cuda.h" ]; then
    echo "SKIP cuda/abi-header: no CUDA toolkit header at $inc/cuda.h"
    echo "SKIP cuda/abi-mutations: no CUDA toolkit header at $inc/cuda.h"
    exit 0
fi

if "$cc" "${flags[@]}" -I. -I"$inc" tests/cuda/abi_check.c -o "$work/abi_check" >"$log/abi-header.err" 2>&1 &&
   "$work/abi_check" >>"$log/abi-header.err" 2>&1; then
    echo "PASS cuda/abi-header: $(tail -1 "$log/abi-header.err")"
else
    echo "FAIL cuda/abi-header: plugins/cuda/cuda_abi.h differs from $inc/cuda.h"
    grep -m5 'error' "$log/abi-header.err" | sed 's/^/    /'
    fail=1
fi

# Each edit must change the copy, and the copy must then fail to build.
mutations=(
    's/E(CUDA_ERROR_NOT_READY, 600)/E(CUDA_ERROR_NOT_READY, 601)/'
    's/X(CU_STREAM_PER_THREAD, 0x2)/X(CU_STREAM_PER_THREAD, 0x3)/'
    's/X(CUdeviceptr, unsigned long long)/X(CUdeviceptr, unsigned long)/'
    's/F(S, unsigned short, usage, )/F(S, short, usage, )/'
    's/F(S, cuuint64_t, reserved1, \[7\])/F(S, cuuint64_t, reserved1, [6])/'
    's/(CUdeviceptr dstDevice, unsigned short us, size_t N))/(CUdeviceptr dstDevice, unsigned int us, size_t N))/'
    's/X(cuMemFree, cuMemFree_v2,/X(cuMemFree, cuMemFree,/'
)
mkdir -p "$work/m/plugins/cuda"
bad=()
: >"$log/abi-mutations.err"
for m in "${mutations[@]}"; do
    sed "$m" plugins/cuda/cuda_abi.h >"$work/m/plugins/cuda/cuda_abi.h"
    if cmp -s plugins/cuda/cuda_abi.h "$work/m/plugins/cuda/cuda_abi.h"; then
        bad+=("$m (did not apply)"); continue
    fi
    if "$cc" "${flags[@]}" -I"$work/m" -I"$inc" tests/cuda/abi_check.c -o "$work/m/abi_check" \
        >>"$log/abi-mutations.err" 2>&1; then
        bad+=("$m (still builds)")
    fi
done
if [ ${#bad[@]} -eq 0 ]; then
    echo "PASS cuda/abi-mutations: ${#mutations[@]} deliberate errors, each refused"
else
    echo "FAIL cuda/abi-mutations: ${#bad[@]} of ${#mutations[@]} not caught"
    printf '    %s\n' "${bad[@]}"
    fail=1
fi
exit $fail
