#!/usr/bin/env bash
# make bench, MPI jobs under `ckrun --np` (CKPT_BENCH_MPI=0 skips it; needs
# `make mpi`): next to a bare mpirun with the same pinned algorithms,
# measured in the same run, on this host (CKPT_BENCH_MPI_NP ranks, 4):
#  - MPI_Allreduce of 8 bytes and of 8 MiB (tests/mpi/bench_mpi), bare and
#    through the stand-in and agents (no checkpoint);
#  - a training step of tests/mpi/sgd_mpi (wall time of its steps), bare
#    and under ckrun --np, medians of 3 runs each, in turn;
#  - replicas: tests/mpi/replica_mpi holding CKPT_BENCH_MPI_MIB (64) MiB
#    of identical, incompressible weights per rank, one checkpoint with 1
#    rank and with N: the bytes stored for N against one replica;
#  - the same job stopped (SIGTERM): how long the cut took (the agents'
#    CKPT_MPI_CUT_LOG), the frozen time, and the resume's restore time.
# Prints a Markdown table, appended to the file $1 if given.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=$top/build
out=${1:-}
NP=${CKPT_BENCH_MPI_NP:-4}
MIB=${CKPT_BENCH_MPI_MIB:-64}
T=$B/tests/mpi
W=$(mktemp -d "$B/bench-mpi.XXXXXX") || { echo "$0: cannot make a work directory" >&2; exit 1; }
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT
. "$top/scripts/waitline.sh"
fail() { echo "bench-mpi: $*" >&2; exit 1; }
[ -x "$B/mpi/ckmpi-agent" ] && [ -x "$T/replica_mpi" ] || fail "build it first: make mpi"
MPIRUN=(mpirun --oversubscribe --bind-to none -np "$NP")
[ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root)
# the agents pin these; the bare runs get the same
export OMPI_MCA_coll='^sm,han,adapt' OMPI_MCA_coll_tuned_use_dynamic_rules=1 \
	OMPI_MCA_coll_tuned_allreduce_algorithm=4 OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize=0 \
	OMPI_MCA_coll_tuned_reduce_algorithm=6 OMPI_MCA_coll_tuned_bcast_algorithm=6
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# allreduce BYTES ITERS: "bare ckrun" microseconds per call
allreduce() {
	local b c
	b=$("${MPIRUN[@]}" "$T/bench_mpi" "$1" "$2" 2>/dev/null | awk '/^allreduce/ { print $(NF - 1) }')
	c=$("$B/ckrun" --store "$W/st-ar" --job ar --np "$NP" -- "$T/bench_mpi" "$1" "$2" 2>/dev/null |
		awk '/^allreduce/ { print $(NF - 1) }')
	rm -rf "$W/st-ar"
	[ -n "$b" ] && [ -n "$c" ] || fail "no allreduce timing for $1 bytes"
	echo "$b $c"
}

# sgd MODE: wall seconds of sgd_mpi 4000 steps (MPI_Init to the end)
sgd() {
	local t0 t1
	t0=$(now)
	if [ "$1" = bare ]; then
		"${MPIRUN[@]}" "$T/sgd_mpi" 4000 >"$W/sgd.$1" 2>/dev/null || fail "bare sgd_mpi failed"
	else
		"$B/ckrun" --store "$W/st-sgd" --job sgd --np "$NP" -- "$T/sgd_mpi" 4000 >"$W/sgd.$1" 2>/dev/null ||
			fail "sgd_mpi under ckrun failed"
		rm -rf "$W/st-sgd"
	fi
	t1=$(now)
	secs "$t0" "$t1"
}

# replicas NP: bytes stored by the first checkpoint of replica_mpi
replicas() {
	local pid st
	rm -rf "$W/st-rep$1"
	CKPT_MPI_CUT_LOG=1 "$B/ckrun" -v --store "$W/st-rep$1" --job rep --np "$1" -- "$T/replica_mpi" "$MIB" 100000 >"$W/rep$1.out" \
		2>"$W/rep$1.err" &
	pid=$!
	wait_line "$W/rep$1.out" '^ready' 300 || fail "replica_mpi -np $1 did not start"
	kill -USR2 "$pid"
	wait_line "$W/rep$1.err" 'checkpoint 1 committed' 300 || fail "replica_mpi -np $1: no checkpoint"
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null
	st=$(sed -n 's/.*checkpoint 1 committed: .* bytes of memory, \([0-9]*\) stored.*/\1/p' "$W/rep$1.err")
	[ -n "$st" ] || fail "replica_mpi -np $1: no stored bytes in $W/rep$1.err"
	echo "$st"
}

ar8=$(allreduce 8 2000)
ar8m=$(allreduce $((8 << 20)) 20)
sb=() sc=()
for _ in 1 2 3; do
	sb+=("$(sgd bare)")
	sc+=("$(sgd ckrun)")
done
cmp -s "$W/sgd.bare" "$W/sgd.ckrun" || fail "sgd_mpi under ckrun printed something else than bare"
sgd_b=$(printf '%s\n' "${sb[@]}" | median)
sgd_c=$(printf '%s\n' "${sc[@]}" | median)
s1=$(replicas 1)
sn=$(replicas "$NP")
# the stop of the N-rank job above, and its resume
cut=$(grep -o 'cut held after [0-9]* ms' "$W/rep$NP.err" | awk '{ print $4 }' | sort -n | tail -n 1)
frozen=$(grep -o 'frozen [0-9.]* s' "$W/rep$NP.err" | tail -n 1 | awk '{ print $2 }')
"$B/ckrun" -v --store "$W/st-rep$NP" --job rep --np "$NP" --resume -- "$T/replica_mpi" "$MIB" 100000 \
	>"$W/res.out" 2>"$W/res.err" &
pid=$!
wait_line "$W/res.err" 'restored from checkpoint' 300 || fail "the resume did not restore"
kill -9 "$pid"
wait "$pid" 2>/dev/null
restore=$(sed -n 's/.*restored from checkpoint [0-9]* in \([0-9.]*\) s.*/\1/p' "$W/res.err")

{
	echo
	echo "MPI jobs (ckrun --np $NP, one host, $(nproc) cores; bare: mpirun with the same pinned algorithms)"
	echo
	echo "| measure | bare | under ckrun | ratio |"
	echo "|---|---|---|---|"
	read -r b c <<<"$ar8"
	echo "| MPI_Allreduce 8 bytes, µs per call | $b | $c | +$(awk -v a="$c" -v b="$b" 'BEGIN { printf "%.1f µs", a - b }') |"
	read -r b c <<<"$ar8m"
	echo "| MPI_Allreduce 8 MiB, µs per call | $b | $c | $(ratio "$c" "$b")x |"
	echo "| sgd_mpi, 4000 steps, s (median of 3; output identical) | $sgd_b | $sgd_c | $(ratio "$sgd_c" "$sgd_b")x |"
	echo "| replicas of $MIB MiB: first checkpoint stored, bytes | 1 rank: $s1 | $NP ranks: $sn | $(ratio "$sn" "$s1")x |"
	echo "| stop of $NP ranks: cut held after (slowest agent), ms | | ${cut:-?} | |"
	echo "| stop of $NP ranks: frozen, s | | ${frozen:-?} | |"
	echo "| resume of $NP ranks: restore (new agents, adoption, replay), s | | ${restore:-?} | |"
} | tee -a "${out:-/dev/null}"
