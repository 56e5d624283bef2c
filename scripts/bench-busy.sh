#!/usr/bin/env bash
# make bench, a job that keeps every core busy (CKPT_BENCH_BUSY=0 skips it):
# tests/bench/membench of CKPT_BENCH_BUSY_MIB (default 1024) MiB, once quiet
# (its one working thread) and once with as many threads as cores (the
# others spinning), the usual shape of a training job. For each: the work
# phase under ckrun without a checkpoint and with one (asked at pass 1);
# the checkpoint's completion, frozen time and snapshot kind (a fallback to
# a fork shows there), and the progress lost (the difference of the two
# work phases). The two shapes' runs alternate, so that the VM's drift
# falls on both. CKPT_BENCH_BUSY_NICE="default 10 0" also measures the
# writer at fixed nice values (CKPT_WRITER_NICE); "default" is ckrun's own
# policy: nice 10 rising to ckrun's own while the round lasts (pace.c).
# Prints a Markdown table, appended to the file $1 if given.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=$top/build
out=${1:-}
MIB=${CKPT_BENCH_BUSY_MIB:-1024}
PASSES=${CKPT_BENCH_BUSY_PASSES:-250}
NICES=${CKPT_BENCH_BUSY_NICE:-default}
NCPU=$(nproc)
W=$(mktemp -d "$B/bench-busy.XXXXXX") || { echo "$0: cannot make a work directory" >&2; exit 1; }
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT
. "$top/scripts/waitline.sh"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
jfield() { # jfield JSON KEY SEQ
	python3 -c 'import json,sys; d=[x for x in json.load(sys.stdin) if x["seq"]==int(sys.argv[2])][0]; print(d[sys.argv[1]])' "$2" "$3" <<<"$1"
}
fail() { echo "bench-busy: $*" >&2; exit 1; }

# run SPIN CKPT NICE TAG: the work phase's seconds (ready -> checksum);
# with CKPT=1 one checkpoint at pass 1, its commit line in $W/TAG.line
run() {
	local spin=$1 ck=$2 nice=$3 tag=$4 pid t0 t1
	local -a env=()
	[ "$nice" != default ] && env=(CKPT_WRITER_NICE="$nice")
	rm -rf "$W/st"
	: >"$W/$tag.out"
	env "${env[@]}" "$B/ckrun" -v --store "$W/st" --job busy -- "$B/tests/bench/membench" "$MIB" "$PASSES" "$spin" \
		>"$W/$tag.out" 2>"$W/$tag.err" &
	pid=$!
	wait_line "$W/$tag.out" '^ready' 300 "$pid" || fail "$tag: the job did not start"
	t0=$(now)
	if [ "$ck" = 1 ]; then
		wait_line "$W/$tag.out" '^pass 1$' 300 "$pid" || fail "$tag: no pass 1"
		kill -USR2 "$pid"
		wait_line "$W/$tag.err" 'checkpoint 1 (committed|of job .* failed)' 900 "$pid" || fail "$tag: no checkpoint"
		grep -q 'checkpoint 1 committed' "$W/$tag.err" || fail "$tag: $(grep failed "$W/$tag.err")"
		grep 'checkpoint 1 committed' "$W/$tag.err" >"$W/$tag.line"
		"$B/ckpt" ls --json --store "$W/st" busy >"$W/$tag.json"
	fi
	wait_line "$W/$tag.out" '^checksum' 900 "$pid" || fail "$tag: the job did not end"
	t1=$(now)
	wait "$pid"
	secs "$t0" "$t1"
}

echo "bench-busy: ${MIB} MiB, ${PASSES} passes, quiet (1 thread) and busy (${NCPU} threads); work directory $W" >&2
rows=''
for nice in $NICES; do
	declare -A under=() ckpt=()
	for shape in quiet busy; do
		spin=0
		[ "$shape" = busy ] && spin=$((NCPU - 1))
		under[$shape]=$(run "$spin" 0 "$nice" "u-$shape") || exit 1
		ckpt[$shape]=$(run "$spin" 1 "$nice" "c-$shape") || exit 1
		cmp -s <(grep checksum "$W/u-$shape.out") <(grep checksum "$W/c-$shape.out") || fail "$shape: checksums differ"
	done
	for shape in quiet busy; do
		json=$(cat "$W/c-$shape.json")
		dur=$(awk -v n="$(jfield "$json" duration_ns 1)" 'BEGIN { printf "%.2f", n / 1e9 }')
		frozen=$(awk -v n="$(jfield "$json" frozen_ns 1)" 'BEGIN { printf "%.0f", n / 1e6 }')
		snap=$(sed -n 's/.*committed.*, \(write-protect snapshot\|forked snapshot\).*/\1/p' "$W/c-$shape.line" | head -1)
		cpu=$(sed -n 's/.*committed.*), CPU \([0-9.]*\) s.*/\1/p' "$W/c-$shape.line" | head -1)
		lost=$(awk -v a="${ckpt[$shape]}" -v b="${under[$shape]}" 'BEGIN { printf "%.2f", a - b }')
		eval "dur_$shape=$dur lost_$shape=$lost"
		rows+="| $shape ($([ "$shape" = busy ] && echo "$NCPU threads" || echo "1 thread")) | writer nice ${nice} | ${dur} s | ${cpu:-?} s | ${frozen} ms | ${lost} s (${ckpt[$shape]} s, ${under[$shape]} s) | ${snap:-?} |"$'\n'
	done
	# shellcheck disable=SC2154 # (set by the eval above)
	rows+="| busy / quiet | writer nice ${nice} | $(awk -v a="$dur_busy" -v b="$dur_quiet" 'BEGIN { printf "%.2fx", a / b }') (target <= 2x) | | | $(awk -v a="$lost_busy" -v b="$lost_quiet" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }') (target <= 1.5x) | target: no fork |"$'\n'
	unset under ckpt
done
table=$(
	echo
	echo "A job keeping every core busy (${MIB} MiB, $(date -u '+%Y-%m-%d %H:%M') UTC, ${NCPU} cores):"
	echo
	echo "| job | setting | checkpoint completion | ckrun CPU | frozen | progress lost (work with one checkpoint, without) | snapshot |"
	echo "|---|---|---|---|---|---|---|"
	printf '%s' "$rows"
)
echo "$table"
[ -n "$out" ] && echo "$table" >>"$out"
exit 0
