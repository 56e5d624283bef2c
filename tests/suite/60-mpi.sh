#!/usr/bin/env bash
# MPI through the stand-in libmpi.so.40 and per-rank agents (issue 20, first
# step: no checkpoint yet). Unmodified programs built with Debian's mpicc
# and an mpi4py trainer run under `mpirun -np 4` bare and as
# `mpirun -np 4 ckmpi-agent -- PROGRAM`: exit 0 and byte-identical output
# (their arithmetic is exact), also with an arena so small that
# reductions go in segments, and with pipelined segments. An unsupported call ends the job with one
# line per rank naming it and status 70; the stand-in without an agent
# likewise; a rank's program killed ends the job with 128+9. The stand-in
# exports every symbol of the real library, each
# object at the real size. Allreduce latency (8 bytes) and throughput
# (8 MiB) through the agents against bare are printed, not asserted.
# Open MPI comes from scripts/deps.sh, set "mpi" (installed when root).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

# shellcheck source=tests/lib/mpi.sh
. "$(dirname "$0")/../lib/mpi.sh"
AGENT=$H_BUILD/mpi/ckmpi-agent
STANDIN=$H_BUILD/mpi/lib/libmpi.so.40

# run NAME OUT -- CMD...: CMD under a time limit, status in $NAME.rc.
run() {
	local out=$1
	shift
	timeout -s KILL 120 "$@" >"$out" 2>"$out.err"
	echo $? >"$out.rc"
}

# same NAME CMD...: bare mpirun and through the agents, compared.
same() {
	local name=$1 d=$H_WORK/$1 served
	shift
	mkdir -p "$d"
	run "$d/bare" "${MPIRUN[@]}" "$@"
	CKPT_MPI_STATS=1 run "$d/agent" "${MPIRUN[@]}" "$AGENT" -- "$@"
	served=$(grep -c '^ckmpi-agent: rank [0-9]*: [1-9][0-9]* requests served$' "$d/agent.err")
	if [ "$(cat "$d/bare.rc")" != 0 ] || [ ! -s "$d/bare" ]; then
		h_fail "mpi/$name" "the bare run exited $(cat "$d/bare.rc")" "$d/bare" "$d/bare.err"
	elif [ "$(cat "$d/agent.rc")" != 0 ]; then
		h_fail "mpi/$name" "the run through the agents exited $(cat "$d/agent.rc")" "$d/agent" "$d/agent.err"
	elif [ "$served" != "$NP" ]; then
		h_fail "mpi/$name" "$served of $NP agents served requests: the program did not go through them" "$d/agent.err"
	elif ! cmp -s "$d/bare" "$d/agent"; then
		diff "$d/bare" "$d/agent" >"$d/diff"
		h_fail "mpi/$name" "output through the agents differs from bare mpirun" "$d/diff"
	else
		h_pass "mpi/$name: $(wc -l <"$d/bare") lines identical to bare mpirun -np $NP ($(tail -n 1 "$d/bare" | cut -c1-60)...)"
	fi
}

# Every symbol of the real library exported, each object at its size.
abi_sizes() {
	local real d=$H_WORK/abi
	mkdir -p "$d"
	real=$(realpath "$(pkg-config --variable=libdir ompi-c)/libmpi.so")
	syms() { readelf --dyn-syms -W "$1" | awk '$7 != "UND" && ($4 == "OBJECT" || $4 == "FUNC") { sub(/@.*/, "", $8); print $8, $4, ($4 == "OBJECT" ? $3 : "-") }' | sort -u; }
	syms "$real" >"$d/real"
	syms "$STANDIN" >"$d/ours"
	join -a 1 "$d/real" "$d/ours" | awk '$2 != $4 || $3 != $5 { print "real:", $1, $2, $3, " stand-in:", $4, $5 }' >"$d/diff"
	if [ ! -s "$d/real" ]; then
		h_fail mpi/abi-sizes "no symbols read from $real"
	elif [ -s "$d/diff" ]; then
		h_fail mpi/abi-sizes "$(wc -l <"$d/diff") symbols of $real missing or of another size in the stand-in" "$d/diff"
	elif ! readelf -d "$STANDIN" | grep -q 'Library soname: \[libmpi.so.40\]' || readelf -d "$STANDIN" | grep -q 'NEEDED.*libmpi\|NEEDED.*libopen'; then
		h_fail mpi/abi-sizes "the stand-in's SONAME is not libmpi.so.40 or it needs Open MPI itself"
	else
		h_pass "mpi/abi-sizes: $(grep -c ' OBJECT ' "$d/real") objects at the real sizes, $(grep -c ' FUNC ' "$d/real") functions"
	fi
}

unsupported() {
	local d=$H_WORK/unsup lines
	mkdir -p "$d"
	run "$d/bare" "${MPIRUN[@]}" "$T/unsup_mpi"
	run "$d/agent" "${MPIRUN[@]}" "$AGENT" -- "$T/unsup_mpi"
	lines=$(grep -c '^ckrun-mpi: ' "$d/agent.err")
	if [ "$(cat "$d/bare.rc")" != 0 ]; then
		h_fail mpi/unsupported "the bare run (MPI_Win_create) exited $(cat "$d/bare.rc")" "$d/bare.err"
	elif [ "$(cat "$d/agent.rc")" != 70 ]; then
		h_fail mpi/unsupported "exit status $(cat "$d/agent.rc"), expected 70" "$d/agent" "$d/agent.err"
	elif [ "$lines" -lt 1 ] || [ "$lines" -gt "$NP" ] ||
	     grep '^ckrun-mpi: ' "$d/agent.err" | grep -qv '^ckrun-mpi: rank [0-9]*: MPI_Win_create: not supported'; then
		h_fail mpi/unsupported "expected one line per rank naming MPI_Win_create" "$d/agent.err"
	elif [ -s "$d/agent" ]; then
		h_fail mpi/unsupported "the job went on after the unsupported call" "$d/agent"
	else
		h_pass "mpi/unsupported: MPI_Win_create named in $lines line(s), exit 70"
	fi
	# The stand-in loaded without an agent: one line, 70.
	LD_LIBRARY_PATH=$(dirname "$STANDIN") timeout -s KILL 30 "$T/sgd_mpi" 2 >"$d/alone" 2>"$d/alone.err"
	echo $? >"$d/alone.rc"
	if [ "$(cat "$d/alone.rc")" = 70 ] && [ "$(wc -l <"$d/alone.err")" = 1 ] &&
	   grep -q '^ckrun-mpi: MPI_Init: no agent' "$d/alone.err"; then
		h_pass "mpi/no-agent: $(cut -c1-60 "$d/alone.err")..., exit 70"
	else
		h_fail mpi/no-agent "exit $(cat "$d/alone.rc"), expected 70 and one line" "$d/alone.err"
	fi
}

# One rank's program killed (SIGKILL) while the others wait for it in a
# collective: its agent aborts the job with 128+9, nothing hangs or stays.
rank_killed() {
	local d=$H_WORK/killed left
	mkdir -p "$d"
	# shellcheck disable=SC2016 # expanded by the rank's shell
	run "$d/agent" "${MPIRUN[@]}" "$AGENT" -- /bin/sh -c \
		'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 0.5; kill -KILL $$; fi; exec "$0" 1000000' "$T/sgd_mpi"
	for _ in $(seq 50); do # the programs die with their agents (a signal each)
		left=$(pgrep -x sgd_mpi) || break
		sleep 0.1
	done
	if [ "$(cat "$d/agent.rc")" != 137 ]; then
		h_fail mpi/rank-killed "exit status $(cat "$d/agent.rc"), expected 137" "$d/agent.err"
	elif [ -n "$left" ]; then
		h_fail mpi/rank-killed "programs left running: $left"
	else
		h_pass "mpi/rank-killed: rank 1's program killed mid-run, the job ended with 137"
	fi
}

# The agents' channels in /dev/shm, sorted.
# No channel left in /dev/shm by the agents of this suite.
no_leak() {
	local left
	left=$(comm -13 "$H_WORK/shm.before" <(shm_names))
	if [ -n "$left" ]; then
		h_fail mpi/no-leak "channels left in /dev/shm: $left"
	else
		h_pass "mpi/no-leak: no channel left in /dev/shm"
	fi
}

# bench BYTES ITERS [SEGMENT]: bare and through the agents (report only).
bench() {
	local d=$H_WORK/bench.$1.${3:-0} b a
	mkdir -p "$d"
	run "$d/bare" "${MPIRUN[@]}" "$T/bench_mpi" "$1" "$2"
	CKPT_MPI_SEGMENT=${3:-} run "$d/agent" "${MPIRUN[@]}" "$AGENT" -- "$T/bench_mpi" "$1" "$2"
	b=$(awk '/^allreduce/ { print $(NF - 1) }' "$d/bare")
	a=$(awk '/^allreduce/ { print $(NF - 1) }' "$d/agent")
	if [ -z "$b" ] || [ -z "$a" ]; then
		h_fail "mpi/bench-$1${3:+-seg$3}" "no timing" "$d/bare.err" "$d/agent.err"
		return
	fi
	h_pass "mpi/bench-$1${3:+-seg$3}: allreduce of $1 bytes, -np $NP: bare $b us, through the agents${3:+ (segments of $3 bytes)} $a us (x$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", a / b }'))"
}

main() {
	h_init mpi
	mpi_setup mpi || return 1
	shm_names >"$H_WORK/shm.before"
	abi_sizes
	same sgd "$T/sgd_mpi" 300 16
	# A 4 KiB arena (2 KiB for blocking calls): the 2400-byte gradient
	# allreduce and the model's broadcast can only go in segments.
	CKPT_MPI_ARENA=4096 same sgd-segmented "$T/sgd_mpi" 60 300
	# Pipelined: segments of 256 bytes, two in flight.
	CKPT_MPI_SEGMENT=256 same sgd-pipelined "$T/sgd_mpi" 60 300
	same ring "$T/ring_mpi" 60
	same split "$T/split_mpi"
	same nonblocking "$T/nonblock_mpi" 40
	same mpi4py "$PYTHON" "$H_TOP/tests/mpi/trainer_mpi4py.py" 60
	unsupported
	rank_killed
	no_leak
	bench 8 2000
	bench $((8 << 20)) 20
	bench $((8 << 20)) 20 $((1 << 20))
	return "$H_FAILED"
}

main "$@"
