#!/usr/bin/env bash
# make bench, multi-process part: a job of CKPT_BENCH_MP_NPROC processes
# (default 16) of CKPT_BENCH_MP_MIB MiB each (default 256, so 4 GiB in all)
# checkpointed three times while it runs, each checkpoint asked for once the
# previous one has committed; then stopped with SIGTERM (a last checkpoint,
# exit 75). Reports, from ckrun -v, the stall (time frozen), the time from
# the request to every process parked, and the checkpoint completion.
# Prints a Markdown table, appended to the file $1 if given.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=$top/build
NPROC=${CKPT_BENCH_MP_NPROC:-16}
MIB=${CKPT_BENCH_MP_MIB:-256}
# Passes of ~100 ms: the job only has to outlive its checkpoints (it is
# stopped with SIGTERM), and a 4 GiB checkpoint on a 2-core machine can take
# minutes.
PASSES=${CKPT_BENCH_MP_PASSES:-100000}
NCK=3
out=${1:-}
W=$(mktemp -d "$B/bench-mp.XXXXXX")
store=$W/store
job=mpbench
pid=

# shellcheck disable=SC2317 # (called from the trap)
tree_of() { # tree_of PID: every descendant of PID, host pids
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		echo "$c"
		tree_of "$c"
	done
}
# shellcheck disable=SC2317
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		local kids
		kids=$(tree_of "$pid")
		# shellcheck disable=SC2086
		kill -9 "$pid" $kids 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. "$top/scripts/waitline.sh"
wait_job() { # wait_job FILE REGEX [TIMEOUT_S]: 1 on timeout, 2 if ckrun has gone
	wait_line "$1" "$2" "${3:-600}" "$pid"
}
fail() {
	echo "bench-mp: $*; ckrun's stderr:" >&2
	cat "$W/job.err" >&2
	exit 1
}
field() { sed -nE "s/$1/\\1/p" <<<"$2"; } # field REGEX-WITH-ONE-GROUP LINE
ms() { awk -v s="$1" 'BEGIN { printf "%.0f", s * 1000 }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
mbps() { awk -v bytes="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", bytes / 1e6 / s; else print "-" }'; }
join() { local s; s=$(printf '%s, ' "$@"); echo "${s%, }"; }

echo "bench-mp: ${NPROC} processes x ${MIB} MiB, up to ${PASSES} passes; work directory $W" >&2

"$B/ckrun" -v --store "$store" --job "$job" -- "$B/tests/bench/mpbench" "$NPROC" "$MIB" "$PASSES" \
	> "$W/job.out" 2> "$W/job.err" &
pid=$!
wait_job "$W/job.out" '^ready$' 900 || fail "the job did not get ready"
wait_job "$W/job.out" '^pass 1$' 300 || fail "the job did not start its passes"

frozen=() parked=() total=() logical=() stored=()
for i in $(seq 1 $NCK); do
	kill -USR2 "$pid"
	wait_job "$W/job.err" "checkpoint $i (committed|of job .* failed)" 1800 || fail "no checkpoint $i"
	line=$(grep -m1 -E "checkpoint $i (committed|of job .* failed)" "$W/job.err")
	[[ $line == *committed* ]] || fail "checkpoint $i failed"
	grep -q '^checksum' "$W/job.out" && fail "the job ended during checkpoint $i (raise CKPT_BENCH_MP_PASSES)"
	n=$(field '.*committed: ([0-9]+) process.*' "$line")
	[ "$n" = "$NPROC" ] || fail "checkpoint $i holds $n process(es), not $NPROC"
	frozen+=("$(field '.*\(frozen ([0-9.]+) s.*' "$line")")
	parked+=("$(field '.*all parked after ([0-9.]+) s.*' "$line")")
	total+=("$(field '.* stored, ([0-9.]+) s \(.*' "$line")")
	logical+=("$(field '.*, ([0-9]+) bytes of memory.*' "$line")")
	stored+=("$(field '.*memory, ([0-9]+) stored.*' "$line")")
	if [ "$i" -lt $NCK ]; then # let the job run a pass before the next one
		p=$(grep -c '^pass' "$W/job.out")
		wait_job "$W/job.out" "^pass $p\$" 300 || fail "the job made no progress after checkpoint $i"
	fi
done

kill -TERM "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && (( i < 1800 * 20 )); do bench_nap; i=$((i + 1)); done
kill -0 "$pid" 2>/dev/null && fail "ckrun did not stop after SIGTERM"
wait "$pid"
rc=$?
pid=
rm -rf "$store"

ms_frozen=() ms_parked=()
for i in $(seq 0 $((NCK - 1))); do
	ms_frozen+=("$(ms "${frozen[$i]}")")
	ms_parked+=("$(ms "${parked[$i]}")")
done
t_med=$(median "${total[@]}")
{
echo
echo "| multi-process job (${NPROC} x ${MIB} MiB, ${NCK} checkpoints while it runs) | ckrun | target |"
echo "|---|---|---|"
echo "| ${NPROC} processes x ${MIB} MiB: time frozen (stall) | $(median "${ms_frozen[@]}") ms (median of ${NCK}: $(join "${ms_frozen[@]}") ms) | target < 100 ms |"
echo "| ${NPROC} processes: request to all parked | $(median "${ms_parked[@]}") ms (median of ${NCK}: $(join "${ms_parked[@]}") ms) | reported |"
echo "| ${NPROC} processes: checkpoint completion | ${t_med} s, $(mbps "$(median "${logical[@]}")" "$t_med") MB/s of memory (median of ${NCK}: $(join "${total[@]}") s) | reported |"
echo "| ${NPROC} processes: bytes stored per checkpoint | $(join "${stored[@]}") (of ${logical[0]} bytes of memory) | reported |"
} | if [ -n "$out" ]; then tee -a "$out"; else cat; fi
[ "$rc" = 75 ] || { echo "bench-mp: ckrun exited $rc after SIGTERM, not 75:" >&2; tail -5 "$W/job.err" >&2; exit 1; }
exit 0
