#!/usr/bin/env bash
# MPI jobs under `ckrun --np N` (issue 20, second step): checkpointed at a
# consistent cut across the ranks and resumed on this host, with output
# identical to a bare mpirun (exact integer arithmetic).
#
# - stops: SIGTERM at random moments, each after the run committed a
#   checkpoint of its own, then `--resume`, until the job ends: the C SGD
#   (allreduce), a point-to-point ring with MPI_ANY_SOURCE and random sleeps
#   (receives interrupted and messages in flight drained at the cut), a
#   program of split, duplicated and freed communicators (made again at each
#   restart), a ring of nonblocking requests (a receive always posted,
#   Isend, Wait/Waitall/Test/Waitany, Iallreduce: carried across cuts,
#   receives cancelled and posted again), a program that makes and frees
#   about 14000 communicators (the log a restart replays, 4096 entries,
#   must be compacted at cuts: every member's freed ones dropped), and the
#   mpi4py trainer. The
#   output, appended over all runs,
#   must equal the bare run's: a resume that started afresh would print its
#   first lines again; every run after the first must say it restored.
# - kill9: every process on the host killed mid-run (ckrun, mpirun, the
#   agents, the job) after checkpoints committed; the resume's output
#   (stdio buffers travel with the job) completes the bare run's.
# - user: the SGD stopped and resumed as an ordinary user (the job in a user
#   namespace, the agents outside it).
# - catchup: a stop while the rank that prints is behind; it prints as it
#   catches up, its parent long parked; stdout a file without O_APPEND: the
#   resume writes on after that line.
# - profile-mismatch: a resume whose agents would run the collectives with
#   another algorithm (Open MPI's version and the pinned settings are in
#   the checkpoint's command line): one line naming both, exit 99.
# - refused: a rank that does not reach the others' collective within the
#   cut's limit: the checkpoint is refused in one line naming it, the job
#   goes on and ends as a bare run does.
# - np-mismatch: a resume with another --np, or without --np, is refused in
#   one line naming the --np the checkpoint holds (exit 64, the store kept);
#   np-not-mpi: --np for a checkpoint of a job that is not an MPI one.
# - nested: `ckrun -- mpirun ...` and `mpirun ... ckrun -- ...` are refused
#   in one line pointing to --np, exit 64.
# - agents-gone: mpirun that exits at once: one line, exit 99, no hang.
# - no-leak: no channel left in /dev/shm, no agent or program left running.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

# shellcheck source=tests/lib/mpi.sh
. "$(dirname "$0")/../lib/mpi.sh"

# ref NAME CMD...: the bare mpirun's output, $H_WORK/NAME/ref.
ref() {
	local d=$H_WORK/$1
	shift
	mkdir -p "$d"
	timeout -s KILL 300 "${MPIRUN[@]}" "$@" >"$d/ref" 2>"$d/ref.err"
	echo $? >"$d/ref.rc"
}

# stops NAME WANT CMD...: CMD under ckrun --np, stopped WANT times (SIGTERM
# at a random moment after the run's own first commit and, in the first
# run, once a cut held: every rank is in MPI then) and resumed until it
# ends; its output appended to NAME/out over all runs. A stop whose round is
# refused (exit 76: a rank finalizing as the stop came) sends the resume
# back to the run's own earlier checkpoints, and whatever the job printed
# since them would be printed again: such a run is undone (its checkpoints
# removed, its output cut off) and the resume starts from the previous
# stop's checkpoint, exactly where the output stands.
stops_once() {
	local name=$1 want=$2 last=$3 d=$H_WORK/$1 run rc stopped=0 pid ms restored=0 drained carried base_out base_seq=0
	local fresh=0 seq undone=0 sent=0
	shift 3
	ref "$name" "$@"
	if [ "$(cat "$d/ref.rc")" != 0 ] || [ ! -s "$d/ref" ]; then
		h_fail "mpi-ckpt/$name" "the bare run exited $(cat "$d/ref.rc")" "$d/ref.err"
		return
	fi
	: >"$d/out"
	h_rng_seed "mpi-$name"
	for run in $(seq 1 $(( want + 8 ))); do
		local -a res=()
		(( run > 1 )) && res=(--resume)
		base_out=$(h_size "$d/out")
		CKPT_MPI_CUT_LOG=1 setsid "$CKRUN" -v --store "$d/store" --job "$name" --keep 1000 --interval 300ms \
			--np "$NP" "${res[@]}" -- "$@" </dev/null >>"$d/out" 2>"$d/err.$run" &
		pid=$!
		H_PGIDS+=("$pid")
		if (( stopped < want )) && h_wait_line "$d/err.$run" 'checkpoint [0-9]+ committed' 60000 "$pid" &&
		   { (( run > 1 )) || h_wait_line "$d/err.$run" 'cut held' 60000 "$pid"; }; then
			h_rand ms 0 900
			h_sleep_ms "$ms"
			kill -TERM "$pid" 2>/dev/null && sent=1
		fi
		h_wait "$pid" 300000
		rc=$?
		(( run > 1 )) && grep -q 'restored from checkpoint' "$d/err.$run" && restored=$(( restored + 1 ))
		case $rc in
		0) break ;;
		75)
			stopped=$(( stopped + 1 ))
			base_seq=$(sed -n 's/.*checkpointed (\([0-9]*\)) and stopped.*/\1/p' "$d/err.$run" | tail -n 1)
			;;
		76)
			undone=$(( undone + 1 ))
			for seq in $("$CKPT" ls --store "$d/store" "$name" 2>/dev/null | awk '/^ *[0-9]+ / { print $1 }'); do
				(( seq > base_seq )) && "$CKPT" rm --store "$d/store" --force "$name@$seq" >/dev/null 2>&1
			done
			truncate -s "$base_out" "$d/out"
			(( base_seq == 0 )) && fresh=$(( fresh + 1 )) # nothing left: the next run starts afresh
			;;
		*)
			h_fail "mpi-ckpt/$name" "run $run exited $rc" "$d/err.$run"
			return
			;;
		esac
	done
	drained=$(cat "$d"/err.* | grep -c 'cut held.*, [1-9][0-9]* message(s) in its drain area')
	carried=$(cat "$d"/err.* | grep -c 'cut held.*([1-9][0-9]* receive(s) to post again)')
	if [ "$rc" != 0 ]; then
		h_fail "mpi-ckpt/$name" "not done after $run runs (last exit $rc)" "$d/err.$run"
	elif (( stopped < want )) && (( ! last )) && { (( ! sent )) || grep -q 'has finalized MPI or ended' "$d/err.$run"; }; then
		return 3 # the job ended first: too short for this machine now
	elif (( stopped < want )); then
		h_fail "mpi-ckpt/$name" "stopped with a checkpoint $stopped times, wanted $want" "$d/err.$run"
	elif (( restored != run - 1 - fresh )); then
		h_fail "mpi-ckpt/$name" "$restored of $(( run - 1 )) resumed runs said they restored" "$d/err.$run"
	elif ! cmp -s "$d/ref" "$d/out"; then
		diff "$d/ref" "$d/out" >"$d/diff"
		h_fail "mpi-ckpt/$name" "the output over $run runs differs from the bare mpirun's" "$d/diff"
	elif [ -n "${MUST_CARRY:-}" ] && (( carried == 0 )); then
		h_fail "mpi-ckpt/$name" "no cut carried a receive to post again (the program always has one posted)" "$d/err.1"
	elif [ -n "${MUST_COMPACT:-}" ] && ! cat "$d"/err.* | grep -q 'cut held.*, [1-9][0-9]* of the log of communicators dropped'; then
		h_fail "mpi-ckpt/$name" "no cut compacted the log of communicators" "$d/err.1"
	else
		h_pass "mpi-ckpt/$name: -np $NP stopped $stopped times and resumed, output over $run runs identical to bare mpirun ($(wc -l <"$d/ref") lines; $drained cut(s) drained messages, $carried carried receives to post again; $undone refused stop(s) undone)"
	fi
}

# stops NAME WANT CMD... (CMD's last argument its steps): stops_once, and
# where the job ended before its stops (no stop sent, or the stop's round
# found a rank finalized: a loaded machine ran it faster than the stops
# came, as the mpi4py trainer's 1500 and 4000 steps did in CI runs) again
# with twice the steps, at most twice. A stop that was sent and did not
# stop the job still fails.
stops() {
	local name=$1 want=$2 try rc
	shift 2
	local -a cmd=("$@")
	for try in 1 2 3; do
		stops_once "$name" "$want" $(( try == 3 )) "${cmd[@]}"
		rc=$?
		(( rc == 3 )) || return 0
		echo "# mpi-ckpt/$name: the job ended before its stops with ${cmd[-1]} steps; again with $(( cmd[-1] * 2 ))"
		cmd[-1]=$(( cmd[-1] * 2 ))
		rm -rf "${H_WORK:?}/$name"
	done
}

kill9() {
	local d=$H_WORK/kill9 pid left n k
	mkdir -p "$d"
	# 20000 steps: with 6000 the job ended before two commits after its
	# first line in a run here (2026-12-07)
	ref kill9 "$T/sgd_mpi" 20000
	setsid "$CKRUN" -v --store "$d/store" --interval 300ms --np "$NP" -- "$T/sgd_mpi" 20000 </dev/null \
		>"$d/out.1" 2>"$d/err.1" &
	pid=$!
	H_PGIDS+=("$pid")
	# two commits after the job printed (lines only the first run can
	# have printed before the restored checkpoint)
	if ! h_wait_line "$d/out.1" '^step' 60000 "$pid" ||
	   ! h_wait_line_count "$d/err.1" 'checkpoint [0-9]+ committed' $(( $(grep -c committed "$d/err.1") + 2 )) 60000 "$pid"; then
		{ h_kill_group "$pid"; wait "$pid"; } 2>/dev/null
		h_fail mpi-ckpt/kill9 "no two checkpoints committed after the job's first line" "$d/err.1" "$d/out.1"
		return
	fi
	h_sleep_ms 300
	{ h_kill_group "$pid"; wait "$pid"; } 2>/dev/null
	for _ in $(seq 50); do
		left=$(pgrep -f 'ckmpi-agent|sgd_mpi') || break
		sleep 0.1
	done
	if [ -n "$left" ]; then
		h_fail mpi-ckpt/kill9 "processes left after the kill: $(ps -o pid,comm -p "${left//$'\n'/,}" | tail -n +2 | tr '\n' ' ')"
		return
	fi
	timeout -s KILL 300 "$CKRUN" -v --store "$d/store" --np "$NP" --resume -- "$T/sgd_mpi" 20000 </dev/null \
		>"$d/out.2" 2>"$d/err.2"
	n=$?
	if [ "$n" != 0 ]; then
		h_fail mpi-ckpt/kill9 "the resume exited $n" "$d/err.2"
	elif ! grep -q 'restored from checkpoint' "$d/err.2"; then
		h_fail mpi-ckpt/kill9 "the resume did not restore" "$d/err.2"
	else
		# The resume prints the bare run's last lines from where the
		# checkpoint was (past the first line); the first run printed
		# the lines before it (and maybe more: its work after the last
		# commit is lost to the kill and done again).
		k=$(( $(wc -l <"$d/ref") - $(wc -l <"$d/out.2") ))
		if (( k < 1 )); then
			h_fail mpi-ckpt/kill9 "the resume printed the job's output from its first line: a fresh start" "$d/out.2"
		elif ! tail -n "$(wc -l <"$d/out.2")" "$d/ref" | cmp -s - "$d/out.2" ||
		     ! head -n "$k" "$d/ref" | cmp -s - <(head -n "$k" "$d/out.1"); then
			cat "$d/out.1" "$d/out.2" | diff "$d/ref" - >"$d/diff"
			h_fail mpi-ckpt/kill9 "the first run's lines up to the checkpoint and the resume's do not make the bare run's output" "$d/diff"
		else
			h_pass "mpi-ckpt/kill9: every process killed after $(grep -c committed "$d/err.1") checkpoints; $(grep -o 'restored from checkpoint [0-9]*' "$d/err.2"): the resume printed the bare run's last $(wc -l <"$d/out.2") lines, the first run its first $k"
		fi
	fi
}

# A resume with another --np (the kill9 store holds NP ranks): each rank
# that finds an agent of another world says so and the restore fails.
np_mismatch() {
	local d=$H_WORK/kill9 n m seq line
	seq=$("$CKPT" ls --store "$d/store" sgd_mpi 2>/dev/null | awk '/^ *[0-9]+ / { s = $1 } END { print s }')
	line="ckrun: checkpoint sgd_mpi@$seq holds an MPI job of $NP ranks: resume it with ckrun --np $NP"
	if [ -z "$seq" ]; then
		h_fail mpi-ckpt/np-mismatch "kill9 left no checkpoint to resume"
		return
	fi
	timeout -s KILL 120 "$CKRUN" --store "$d/store" --np 2 --resume -- "$T/sgd_mpi" 20000 </dev/null \
		>"$d/out.np" 2>"$d/err.np"
	n=$?
	timeout -s KILL 120 "$CKRUN" --store "$d/store" --resume -- "$T/sgd_mpi" 20000 </dev/null \
		>"$d/out.nonp" 2>"$d/err.nonp"
	m=$?
	if [ "$n $m" != "64 64" ]; then
		h_fail mpi-ckpt/np-mismatch "a resume with --np 2, and one without --np, of $NP ranks exited $n and $m (wanted 64)" \
			"$d/err.np" "$d/err.nonp"
	elif [ "$(cat "$d/err.np")" != "$line" ] || [ "$(cat "$d/err.nonp")" != "$line" ]; then
		h_fail mpi-ckpt/np-mismatch "not the one line naming --np $NP (checkpoint $seq)" "$d/err.np" "$d/err.nonp"
	elif [ -s "$d/out.np" ] || [ -s "$d/out.nonp" ]; then
		h_fail mpi-ckpt/np-mismatch "the job printed something" "$d/out.np" "$d/out.nonp"
	elif [ "$("$CKPT" ls --store "$d/store" sgd_mpi 2>/dev/null | awk '/^ *[0-9]+ / { s = $1 } END { print s }')" != "$seq" ]; then
		h_fail mpi-ckpt/np-mismatch "the refused resumes changed the store's checkpoints"
	else
		h_pass "mpi-ckpt/np-mismatch: --np 2, and no --np, for $NP ranks: one line each, exit 64, checkpoint $seq kept: ${line#ckrun: }"
	fi
}

# --np for a job that is not an MPI one: refused in one line; the plain
# resume then restores it.
np_not_mpi() {
	local d=$H_WORK/notmpi pid n rc
	mkdir -p "$d"
	setsid "$CKRUN" -v --store "$d/store" --job plain --interval 200ms -- "$H_BUILD/tests/apps/sleeper" 5 \
		</dev/null >"$d/out" 2>"$d/err.1" &
	pid=$!
	H_PGIDS+=("$pid")
	h_wait_line "$d/err.1" 'checkpoint [0-9]+ committed' 60000 "$pid"
	kill -TERM "$pid"
	h_wait "$pid" 60000
	rc=$?
	timeout -s KILL 60 "$CKRUN" --store "$d/store" --job plain --np "$NP" --resume -- "$H_BUILD/tests/apps/sleeper" 5 \
		</dev/null >>"$d/out" 2>"$d/err.2"
	n=$?
	timeout -s KILL 120 "$CKRUN" -v --store "$d/store" --job plain --resume -- "$H_BUILD/tests/apps/sleeper" 5 \
		</dev/null >>"$d/out" 2>"$d/err.3"
	if [ "$rc" != 75 ]; then
		h_fail mpi-ckpt/np-not-mpi "the plain job exited $rc at its stop, wanted 75" "$d/err.1"
	elif [ "$n" != 64 ] || [ "$(wc -l <"$d/err.2")" != 1 ] ||
	     ! grep -q '^ckrun: checkpoint plain@[0-9]* is not an MPI job.s: resume it without --np$' "$d/err.2"; then
		h_fail mpi-ckpt/np-not-mpi "--np resume of a plain job: exit $n, wanted 64 and one line" "$d/err.2"
	elif ! grep -q 'restored from checkpoint' "$d/err.3"; then
		h_fail mpi-ckpt/np-not-mpi "the plain resume after the refused one did not restore" "$d/err.3"
	else
		h_pass "mpi-ckpt/np-not-mpi: $(sed 's/^ckrun: //' "$d/err.2"), exit 64; the plain resume then restored it"
	fi
}

# mpirun that ends at once (the agents never come): ckrun says so in one
# line and ends the job rather than leaving the ranks waiting.
agents_gone() {
	local d=$H_WORK/gone n t0
	mkdir -p "$d"
	t0=$(h_now_ms)
	CKPT_MPIRUN=false timeout -s KILL 120 "$CKRUN" --store "$d/store" --np "$NP" -- "$T/sgd_mpi" 100 </dev/null \
		>"$d/out" 2>"$d/err"
	n=$?
	if [ "$n" != 99 ] || ! grep -q '^ckrun: the MPI agents (mpirun) exited with status 1; job sgd_mpi cannot go on$' "$d/err"; then
		h_fail mpi-ckpt/agents-gone "exit $n, expected 99 and one line saying mpirun exited" "$d/err"
	elif [ "$(wc -l <"$d/err")" != 1 ]; then
		h_fail mpi-ckpt/agents-gone "more than one line" "$d/err"
	else
		h_pass "mpi-ckpt/agents-gone: mpirun exited at once: one line, exit 99 after $(( $(h_now_ms) - t0 )) ms"
	fi
}

# The SGD stopped and resumed as an ordinary user.
as_user() {
	local u=ckmpi$$ d=$H_WORK/user rc
	if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
		h_skip mpi-ckpt/user "needs root, useradd and runuser (it creates a user)"
		return
	fi
	if ! useradd -M -s /bin/sh "$u"; then
		h_fail mpi-ckpt/user "useradd $u failed"
		return
	fi
	H_CLEANUPS+=("userdel $u")
	mkdir -p "$d"
	chown "$u" "$d"
	chmod 755 "$H_WORK"
	ref user "$T/sgd_mpi" 8000
	runuser -u "$u" -- env -i PATH="$PATH" HOME="$d" TMPDIR="$d" bash -c '
		ckrun=$1 np=$2 prog=$3 d=$4
		"$ckrun" -v --store "$d/store" --interval 300ms --np "$np" -- "$prog" 8000 >"$d/out" 2>"$d/err.1" </dev/null &
		pid=$!
		# a commit after the job printed: a fresh start would print it again
		for _ in $(seq 600); do [ -s "$d/out" ] && break; sleep 0.05; done
		n=$(grep -c committed "$d/err.1")
		for _ in $(seq 600); do [ "$(grep -c committed "$d/err.1")" -gt "$n" ] && break; sleep 0.05; done
		kill -TERM $pid
		wait $pid; echo "first $?" >"$d/rc"
		"$ckrun" -v --store "$d/store" --np "$np" --resume -- "$prog" 8000 >>"$d/out" 2>"$d/err.2" </dev/null
		echo "second $?" >>"$d/rc"' _ "$CKRUN" "$NP" "$T/sgd_mpi" "$d" >/dev/null 2>&1
	rc=$(tr '\n' ' ' <"$d/rc" 2>/dev/null)
	if [ "$(cat "$d/ref.rc")" != 0 ] || [ ! -s "$d/ref" ]; then
		h_fail mpi-ckpt/user "the bare run exited $(cat "$d/ref.rc")" "$d/ref.err"
	elif [ "$rc" != "first 75 second 0 " ]; then
		h_fail mpi-ckpt/user "exit statuses: ${rc:-none} (wanted first 75 second 0)" "$d/err.1" "$d/err.2"
	elif ! grep -q 'restored from checkpoint' "$d/err.2"; then
		h_fail mpi-ckpt/user "the resume did not restore" "$d/err.2"
	elif ! cmp -s "$d/out" "$d/ref"; then
		diff "$d/ref" "$d/out" >"$d/diff"
		h_fail mpi-ckpt/user "the output differs from the bare mpirun's" "$d/diff" "$d/err.1" "$d/err.2"
	else
		h_pass "mpi-ckpt/user: as $u (the job in a user namespace, agents outside), stopped and resumed, output identical to bare mpirun"
	fi
}

# A stop asked while the rank that prints is behind the others: it prints a
# line as it catches up to the cut, after its parent (ckmpi-ranks, no MPI)
# parked. stdout is a file opened without O_APPEND, one description shared
# by every process: the restart must write on after that line, not over it
# (the offset is the description's with every process parked).
catchup() {
	local d=$H_WORK/catchup pid rc1 rc2
	ref catchup "$T/slowrank_mpi" 6 800 0
	setsid "$CKRUN" -v --store "$d/store" --np "$NP" -- "$T/slowrank_mpi" 6 800 0 </dev/null >"$d/out" 2>"$d/err.1" &
	pid=$!
	H_PGIDS+=("$pid")
	h_wait_line "$d/out" '^step 1 ' 60000 "$pid"
	kill -TERM "$pid"
	h_wait "$pid" 120000
	rc1=$?
	timeout -s KILL 120 "$CKRUN" -v --store "$d/store" --np "$NP" --resume -- "$T/slowrank_mpi" 6 800 0 </dev/null \
		>>"$d/out" 2>"$d/err.2"
	rc2=$?
	if [ "$rc1 $rc2" != "75 0" ]; then
		h_fail mpi-ckpt/catchup "exit statuses $rc1 $rc2, wanted 75 0" "$d/err.1" "$d/err.2"
	elif ! grep -q 'restored from checkpoint' "$d/err.2"; then
		h_fail mpi-ckpt/catchup "the resume did not restore" "$d/err.2"
	elif ! cmp -s "$d/ref" "$d/out"; then
		diff "$d/ref" "$d/out" >"$d/diff"
		h_fail mpi-ckpt/catchup "the output differs from the bare mpirun's" "$d/diff" "$d/err.1"
	else
		h_pass "mpi-ckpt/catchup: stopped while rank 0 was behind, stdout a file without O_APPEND: the resume wrote on after the line it printed catching up ($(wc -l <"$d/out") lines, as bare mpirun)"
	fi
}

# A resume whose agents would run the collectives otherwise (here another
# allreduce algorithm in the environment; another Open MPI alike): refused
# in one line naming both, exit 99, before any agent starts; the store kept.
profile_mismatch() {
	local d=$H_WORK/catchup n seq after
	seq=$("$CKPT" ls --store "$d/store" slowrank_mpi 2>/dev/null | awk '/^ *[0-9]+ / { s = $1 } END { print s }')
	OMPI_MCA_coll_tuned_allreduce_algorithm=2 timeout -s KILL 120 "$CKRUN" --store "$d/store" --np "$NP" --resume -- \
		"$T/slowrank_mpi" 6 800 0 </dev/null >"$d/out.prof" 2>"$d/err.prof"
	n=$?
	after=$("$CKPT" ls --store "$d/store" slowrank_mpi 2>/dev/null | awk '/^ *[0-9]+ / { s = $1 } END { print s }')
	if [ -z "$seq" ]; then
		h_fail mpi-ckpt/profile-mismatch "no checkpoint of catchup to resume"
	elif [ "$n" != 99 ] || [ "$(wc -l <"$d/err.prof")" != 1 ] ||
	     ! grep -q "^ckrun: checkpoint slowrank_mpi@$seq ran its collectives with Open MPI .*allreduce_algorithm=4 .*; the agents here would run them with .*allreduce_algorithm=2 " "$d/err.prof"; then
		h_fail mpi-ckpt/profile-mismatch "exit $n, wanted 99 and one line naming both settings" "$d/err.prof"
	elif [ -s "$d/out.prof" ] || [ "$after" != "$seq" ]; then
		h_fail mpi-ckpt/profile-mismatch "the refused resume ran the job or changed the store (newest $seq, now $after)" "$d/out.prof"
	elif ! "$CKPT" inspect --store "$d/store" "slowrank_mpi@$seq" >"$d/inspect" 2>&1 ||
	     ! grep -q "^  command .*ckmpi-ranks $NP [0-9a-f-]* 'Open MPI v[^']*allreduce_algorithm=4[^']*' -- " "$d/inspect"; then
		h_fail mpi-ckpt/profile-mismatch "ckpt inspect does not show the recorded profile as one quoted argument" "$d/inspect"
	else
		h_pass "mpi-ckpt/profile-mismatch: another allreduce algorithm at the resume: one line naming both, exit 99, checkpoint $seq kept"
	fi
}

refused() {
	local d=$H_WORK/refused pid n
	ref refused "$T/slowrank_mpi" 5 1500
	CKPT_MPI_CUT_MS=400 setsid "$CKRUN" -v --store "$d/store" --np "$NP" -- "$T/slowrank_mpi" 5 1500 </dev/null \
		>"$d/out" 2>"$d/err" &
	pid=$!
	H_PGIDS+=("$pid")
	h_wait_line "$d/out" '^step 0 ' 60000 "$pid"
	kill -USR2 "$pid"
	h_wait "$pid" 120000
	n=$?
	if [ "$n" != 0 ]; then
		h_fail mpi-ckpt/refused "the job exited $n" "$d/err"
	elif ! grep -q 'checkpoint .* failed: .*MPI: rank 1 did not reach the collective the others are in' "$d/err"; then
		h_fail mpi-ckpt/refused "no refusal naming rank 1" "$d/err"
	elif [ "$(grep -c 'failed: ' "$d/err")" != 1 ]; then
		h_fail mpi-ckpt/refused "more than one line for one refused checkpoint" "$d/err"
	elif ! cmp -s "$d/out" "$d/ref"; then
		h_fail mpi-ckpt/refused "the job's output after the refusal differs from the bare mpirun's" "$d/out"
	else
		h_pass "mpi-ckpt/refused: $(grep -o 'MPI: rank 1 did not reach[^;]*' "$d/err" | head -n 1); the job ended as the bare run does"
	fi
}

nested() {
	local d=$H_WORK/nested n1 n2
	mkdir -p "$d"
	timeout -s KILL 60 "$CKRUN" --store "$d/store" -- "${MPIRUN[@]}" "$T/sgd_mpi" 2 >"$d/out1" 2>"$d/err1"
	n1=$?
	timeout -s KILL 60 "${MPIRUN[@]}" "$CKRUN" --store "$d/store" -- "$T/sgd_mpi" 2 >"$d/out2" 2>"$d/err2"
	n2=$?
	if [ "$n1" != 64 ] || [ "$(wc -l <"$d/err1")" != 1 ] || ! grep -q -- '--np' "$d/err1"; then
		h_fail mpi-ckpt/nested "ckrun -- mpirun: exit $n1, expected 64 and one line pointing to --np" "$d/err1"
	elif [ "$n2" != 64 ] || ! grep -q '^ckrun: ckrun runs under mpirun.*--np' "$d/err2" ||
	     grep '^ckrun' "$d/err2" | grep -qv 'ckrun runs under mpirun' || [ -s "$d/out2" ]; then
		# (mpirun ends the other ranks once one failed: a line from each that got that far)
		h_fail mpi-ckpt/nested "mpirun ckrun: exit $n2, expected 64 and only lines pointing to --np" "$d/err2"
	else
		h_pass "mpi-ckpt/nested: ckrun -- mpirun and mpirun ckrun refused in one line each, pointing to --np"
	fi
}

no_leak() {
	local left procs
	left=$(comm -13 "$H_WORK/shm.before" <(shm_names))
	procs=$(pgrep -f 'ckmpi-agent --serve|ckmpi-ranks') || true
	if [ -n "$left" ]; then
		h_fail mpi-ckpt/no-leak "channels left in /dev/shm: $left"
	elif [ -n "$procs" ]; then
		h_fail mpi-ckpt/no-leak "agents or rank launchers left running: $procs"
	else
		h_pass "mpi-ckpt/no-leak: no channel left in /dev/shm, no agent left running"
	fi
}

main() {
	h_init mpi-ckpt
	h_seed_init
	mpi_setup mpi-ckpt || return 1
	shm_names >"$H_WORK/shm.before"
	# sgd, ring and comms long enough that the second run's stop lands
	# before the end (ring's 1500 rounds, about 2.7 s under ckrun, ended
	# first in a CI run; sgd's 6000 steps in another, 2026-12-07)
	stops sgd 2 "$T/sgd_mpi" 20000
	stops ring 2 "$T/ring_mpi" 6000
	stops comms 2 "$T/comms_mpi" 5000
	MUST_CARRY=1 stops nbring 2 "$T/nbring_mpi" 1500
	# about 14000 communicators made and freed: the log a restart replays
	# holds 4096 (every cut failed past it before cuts compacted it)
	MUST_COMPACT=1 stops commloop 2 "$T/commloop_mpi" 3000
	# long enough that the stop lands before the end on a loaded machine (1500
	# steps ended first in a CI run: "rank 2 has finalized MPI"; 4000 steps,
	# about 1.1 s bare, in another, 2026-12-07)
	PYTHONUNBUFFERED=1 stops mpi4py 1 "$PYTHON" "$H_TOP/tests/mpi/trainer_mpi4py.py" 20000
	kill9
	np_mismatch
	np_not_mpi
	as_user
	catchup
	profile_mismatch
	refused
	nested
	agents_gone
	no_leak
	return "$H_FAILED"
}

main "$@"
