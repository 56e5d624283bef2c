#!/usr/bin/env bash
# Faults: what must hold when things go wrong.
#  (a) kill -9 of ckrun, of the job, or of both, at random moments while a
#      large checkpoint is being written (30 trials by default): the newest
#      committed checkpoint must still verify, ckrun --resume must go on
#      from it, and the run must end with the bare run's output.
#  (b) corruption of a committed checkpoint (a flipped byte in a pack or in
#      the manifest, a truncated pack, a deleted pack): ckpt verify exits 2
#      naming the checkpoint, ckrun --resume exits 2 and runs nothing.
#  (c) a store on a small tmpfs that fills up on the second checkpoint: the
#      job goes on and finishes correctly, ckrun reports the error, the first
#      checkpoint still verifies.
#  (d) bad command lines: one clear error line and the documented status
#      (64 usage, 69 store).
#  (e) lifecycle: SIGINT to ckrun's whole process group (Ctrl-C, GNU
#      timeout) checkpoints and stops the job (75) instead of killing it; a
#      stop whose checkpoint cannot be taken exits 76 and the job never runs
#      on; a second SIGTERM during the stop's checkpoint stops without it
#      (76, saying so) and keeps the previous one; a stop that meets the job
#      ending by itself exits with the job's own status; the longest job
#      name works with ckpt checkpoint; SIGUSR2 right at start never
#      ends a running job.
# Replay: CKPT_TEST_SEED=N bash tests/suite/30-faults.sh; a single part with
# CKPT_TEST_FAULTS="kill treekill corrupt diskfull badinput lifecycle signed lockheld" (any subset).
# CKPT_TEST_KILL_TRIALS sets the number of kill trials (default 30).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

PARTS=${CKPT_TEST_FAULTS:-kill treekill corrupt diskfull badinput lifecycle signed lockheld}
TRIALS=${CKPT_TEST_KILL_TRIALS:-30}
PER_RUN=5
JOB=faultjob
# memgrow: SCALE, MiB held from the start, MiB added half-way.
KILL_ARGS=(1.2 192 16)     # big, incompressible: checkpoints take a while
CORRUPT_ARGS=(1 8 8)
DISKFULL_ARGS=(1.5 16 96)  # first checkpoint fits in 64 MiB, the second not

# bare NAME ARGS...: reference output in $H_WORK/NAME.bare.out.
bare() {
	local name=$1 res
	shift
	h_app_cmd memgrow "$@"
	res=$(h_run_bare memgrow "$H_WORK/$name.bare.out" "$H_WORK/$name.bare.err" 120)
	if [ "${res% *}" != 0 ]; then
		h_fail "faults/$name" "bare run of memgrow failed (${res% *})" "$H_WORK/$name.bare.out"
		return 1
	fi
}

# verify_newest STORE LOG: ckpt verify of the newest checkpoint; false
# when there is none.
verify_newest() {
	if [ -z "$(h_manifests "$1" "$JOB")" ]; then
		echo "no committed checkpoint in $1" >"$2"
		return 1
	fi
	timeout -s KILL 120 "$CKPT" verify --store "$1" "$JOB" >"$2" 2>&1
}

# ---- (a) kills during checkpoint writes -------------------------------------------

part_kill() {
	local trial=0 run=0 dir out err sched store target t1 t2 rc p n i why tree
	local -a targets=(ckrun job both) order=()
	h_rng_seed kill
	bare kill "${KILL_ARGS[@]}" || return
	h_app_cmd memgrow "${KILL_ARGS[@]}"
	# A trial whose kill landed before any checkpoint committed would prove
	# nothing: it is not counted (it cannot happen: each run commits one
	# before its trials), and more runs are made (up to 3x).
	while (( trial < TRIALS && run < 3 * TRIALS )); do
		run=$((run + 1))
		dir=$H_WORK/kill-$run
		store=$dir/store out=$dir/ck.out err=$dir/ckrun.err sched=$dir/schedule
		mkdir -p "$dir"
		: >"$err"
		echo "seed $H_SEED, run $run" >"$sched"
		h_start new "$out" "$err" --store "$store" --job "$JOB"
		# A first checkpoint, committed before the trials: each trial's
		# kill then has a checkpoint to fall back on and its resume is a
		# restore, whatever moment the kill hits.
		h_wait_origin "$H_PID" "$err" 10000
		kill -USR2 "$H_PID"
		if ! h_wait_line "$err" "checkpoint 1 committed" 60000 "$H_PID"; then
			h_fail "faults/kill-run-$run" "the first checkpoint did not commit" "$err" "$sched"
			{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
			continue
		fi
		n=0
		while (( n < PER_RUN && trial < TRIALS )); do
			# One trial: checkpoint request, then a kill while it is written.
			h_rand t1 300 900
			h_rand t2 0 1500
			(( trial % 2 )) && h_rand t2 0 300 # half of them early in the write
			if (( ${#order[@]} == 0 )); then # each target equally often
				order=("${targets[@]}")
				for (( i = 2; i > 0; i-- )); do # shuffle
					h_rand p 0 "$i"
					target=${order[$i]}
					order[i]=${order[$p]}
					order[p]=$target
				done
			fi
			target=${order[0]}
			h_sleep_alive "$H_PID" "$t1" || break
			kill -USR2 "$H_PID"
			h_sleep_alive "$H_PID" "$t2" || break
			n=$((n + 1))
			echo "kill $n: SIGUSR2, $t2 ms later kill -9 of $target" >>"$sched"
			tree=$(h_tree_members "$H_PID")
			{ case $target in
			ckrun)
				kill -9 "$H_PID"
				h_wait "$H_PID" 5000 >/dev/null
				sleep 0.3 # whatever ckrun left behind goes too
				h_kill_group "$H_PID"
				;;
			job)
				for p in $tree; do
					[ "$p" = "$H_PID" ] || kill -9 "$p" 2>/dev/null
				done
				h_wait "$H_PID" 15000
				rc=$?
				echo "kill $n: ckrun exited with $rc" >>"$sched"
				if [ "$rc" = 124 ]; then
					h_fail "faults/kill-$((trial + 1))" "ckrun hung after its job was killed" "$err" "$sched"
				fi
				;;
			both)
				h_kill_group "$H_PID"
				h_wait "$H_PID" 5000 >/dev/null
				;;
			esac; } 2>/dev/null # no "Killed" notices
			# shellcheck disable=SC2086 # pids
			if ! h_group_gone "$H_PID" $tree; then
				h_fail "faults/kill-$((trial + 1))" "processes survived kill -9 of the process group" "$sched"
				{ h_kill_group "$H_PID"; sleep 0.2; } 2>/dev/null
			fi
			if [ -z "$(h_manifests "$store" "$JOB")" ]; then
				echo "kill $n: landed before any commit: not counted" >>"$sched"
			else
				trial=$((trial + 1))
				order=("${order[@]:1}")
				echo "kill $n is trial $trial" >>"$sched"
				if verify_newest "$store" "$dir/verify.log"; then
					h_pass "faults/kill-$trial"
				else
					h_fail "faults/kill-$trial" "newest checkpoint does not verify after killing $target" \
						"$dir/verify.log" "$err" "$sched"
				fi
			fi
			h_start resume "$out" "$err" --store "$store" --job "$JOB" --resume
		done
		h_wait "$H_PID" 120000
		rc=$?
		echo "end of run: status $rc" >>"$sched"
		why=$(h_proof "$err")
		case $? in
		2)	echo "run $run: no kill landed after a commit: not counted" >>"$sched"
			continue ;;
		esac
		if [ "$rc" != 0 ]; then
			h_fail "faults/kill-run-$run" "exit status $rc after resume" "$out" "$err" "$sched"
		elif ! cmp -s "$H_WORK/kill.bare.out" "$out"; then
			h_diff_excerpt "$H_WORK/kill.bare.out" "$out" "$dir/diff"
			h_fail "faults/kill-run-$run" "output differs from the bare run" "$dir/diff" "$err" "$sched"
		elif [ -n "$why" ]; then
			h_fail "faults/kill-run-$run" "$why" "$err" "$sched"
		else
			h_pass "faults/kill-run-$run"
		fi
	done
	if (( trial < TRIALS )); then
		h_fail faults/kill "only $trial of $TRIALS kills landed after a commit in $run runs"
	fi
}

# ---- (a2) one process of a tree killed in the middle of a round ------------------

# A worker of mp_forkpool is killed while every process is parked (ckrun
# holds the round open with CKPT_TEST_HOLD_MS): the round must fail with a
# line, ckrun must not hang, checkpoint 1 must stay the newest and verify,
# and a resume from it must print what a bare run prints.
part_treekill() {
	local dir=$H_WORK/treekill store out err sched res rc p victim='' why
	store=$dir/store out=$dir/ck.out err=$dir/ckrun.err sched=$dir/schedule
	mkdir -p "$dir"
	: >"$err"
	h_app_cmd mp_forkpool 2
	res=$(h_run_bare mp_forkpool "$dir/bare.out" "$dir/bare.err" 120)
	if [ "${res% *}" != 0 ]; then
		h_fail faults/treekill "bare run of mp_forkpool failed" "$dir/bare.out"
		return
	fi
	CKPT_TEST_HOLD_MS=1500 h_start new "$out" "$err" --store "$store" --job "$JOB"
	if ! h_wait_origin "$H_PID" "$err" 10000 || ! h_wait_line "$out" "^mp_forkpool:" 10000; then
		h_fail faults/treekill "the job did not start" "$err"
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" "checkpoint 1 committed" 15000; then
		h_fail faults/treekill "the first checkpoint did not commit" "$err"
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" "holding the parked job" 15000; then
		h_fail faults/treekill "the second round did not park the job" "$err"
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		return
	fi
	# a worker: pid 3 or more in the job's namespace
	for p in $(h_tree_members "$H_PID"); do
		if awk '/^NSpid:/ { exit !(NF == 3 && $3 > 2) }' "/proc/$p/status" 2>/dev/null; then
			victim=$p
			break
		fi
	done
	echo "killing worker $victim during checkpoint 2" >"$sched"
	[ -n "$victim" ] && kill -9 "$victim"
	if [ -z "$victim" ]; then
		h_fail faults/treekill "no worker process found to kill" "$err"
	# (ckrun takes a round that a process left by ending again: "taking
	# it again"; then checkpoint 2 may commit, from the job without it)
	elif ! h_wait_line "$err" "checkpoint 2 of job $JOB(:| failed:) .*exited" 15000; then
		h_fail faults/treekill "the round did not fail naming the process that exited" "$err" "$sched"
	else
		h_wait "$H_PID" 60000
		rc=$?
		echo "ckrun ended with $rc" >>"$sched"
		if [ "$rc" = 124 ]; then
			h_fail faults/treekill "ckrun hung after a worker was killed" "$err" "$sched"
		elif [ "$(h_manifests "$store" "$JOB" | head -n 1)" != 00000001 ]; then
			h_fail faults/treekill "checkpoint 1 is gone" "$err" "$sched"
		elif ! verify_newest "$store" "$dir/verify.log"; then
			h_fail faults/treekill "the newest checkpoint does not verify" "$dir/verify.log"
		elif [ "$(h_manifests "$store" "$JOB" | wc -l)" -gt 1 ] &&
			! timeout -s KILL 60 "$CKPT" rm --store "$store" "$JOB@2" >"$dir/rm.log" 2>&1; then
			# a retried checkpoint 2 holds the job as the kill left it (a
			# worker short): the resume below is from checkpoint 1
			h_fail faults/treekill "ckpt rm of the retried checkpoint 2 failed" "$dir/rm.log"
		else
			h_start resume "$out" "$err" --store "$store" --job "$JOB" --resume
			h_wait "$H_PID" 120000
			rc=$?
			if [ "$rc" != 0 ] || ! cmp -s "$dir/bare.out" "$out"; then
				h_diff_excerpt "$dir/bare.out" "$out" "$dir/diff"
				h_fail faults/treekill "resume from checkpoint 1: status $rc or output differs" "$dir/diff" "$err"
			elif ! why=$(h_proof "$err"); then
				h_fail faults/treekill "$why" "$err" "$sched"
			else
				h_pass faults/treekill
			fi
		fi
	fi
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
}

# ---- (b) corruption ------------------------------------------------------------------

# flip FILE: xor one random byte of FILE with a random non-zero value; says
# what it did in WHAT.
flip() {
	local f=$1 size off old x new
	size=$(stat -c %s "$f")
	(( size > 0 )) || return 1
	h_rand off 0 $((size - 1))
	h_rand x 1 255
	old=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
	new=$(( old ^ x ))
	printf '%b' "\\0$(printf %03o "$new")" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
	WHAT="byte $off of $(basename "$f"): $old -> $new"
}

# random_pack STORE: sets PACK to one of the job's pack files.
random_pack() {
	local -a packs
	local i
	mapfile -t packs < <(ls "$1/$JOB/packs/"*.pack 2>/dev/null)
	(( ${#packs[@]} )) || return 1
	h_rand i 0 $((${#packs[@]} - 1))
	PACK=${packs[$i]}
}

corrupt_case() {
	local name=$1 how=$2 pristine=$3 seq=$4 dir store what rc size cut
	dir=$H_WORK/corrupt/$name
	store=$dir/store
	mkdir -p "$dir"
	cp -a "$pristine" "$store"
	case $how in
	pack-*)
		random_pack "$store" || { h_fail "faults/$name" "no pack files in the store"; return; } ;;
	esac
	case $how in
	pack-flip)
		flip "$PACK"
		what=$WHAT ;;
	manifest-flip)
		flip "$store/$JOB/manifests/$seq"
		what=$WHAT ;;
	pack-truncate)
		size=$(stat -c %s "$PACK")
		h_rand cut 0 $((size - 1))
		truncate -s "$cut" "$PACK"
		what="$(basename "$PACK") truncated from $size to $cut bytes" ;;
	pack-delete)
		rm -f "$PACK"
		what="$(basename "$PACK") deleted" ;;
	esac
	echo "$what" >"$dir/what"
	timeout -s KILL 120 "$CKPT" verify --store "$store" "$JOB" >"$dir/verify.log" 2>&1
	rc=$?
	# The checkpoint is named: the job and its sequence number on one line.
	if [ "$rc" != 2 ]; then
		h_fail "faults/$name" "ckpt verify exited $rc, want 2 ($what)" "$dir/verify.log"
		return
	fi
	if ! grep -E "(^|[^0-9])0*$((10#$seq))([^0-9]|$)" "$dir/verify.log" | grep -qF "$JOB"; then
		h_fail "faults/$name" "ckpt verify does not name $JOB and checkpoint $seq ($what)" "$dir/verify.log"
		return
	fi
	h_app_cmd memgrow "${CORRUPT_ARGS[@]}"
	: >"$dir/resume.err"
	h_start new "$dir/resume.out" "$dir/resume.err" --store "$store" --job "$JOB" --resume
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 2 ]; then
		h_fail "faults/$name" "ckrun --resume exited $rc, want 2 ($what)" "$dir/resume.err"
	elif [ -s "$dir/resume.out" ]; then
		h_fail "faults/$name" "the job ran although its checkpoint is corrupt ($what)" "$dir/resume.out"
	elif [ ! -s "$dir/resume.err" ]; then
		h_fail "faults/$name" "ckrun --resume refused silently ($what)"
	else
		h_pass "faults/$name"
	fi
}

part_corrupt() {
	local dir=$H_WORK/corrupt pristine rc seq i
	h_rng_seed corrupt
	mkdir -p "$dir"
	pristine=$dir/pristine
	h_app_cmd memgrow "${CORRUPT_ARGS[@]}"
	: >"$dir/setup.err"
	h_start new "$dir/setup.out" "$dir/setup.err" --store "$pristine" --job "$JOB"
	h_wait_origin "$H_PID" "$dir/setup.err" 10000
	h_sleep_alive "$H_PID" 300
	kill -TERM "$H_PID" 2>/dev/null
	h_wait "$H_PID" 60000
	rc=$?
	seq=$(h_manifests "$pristine" "$JOB" | tail -n 1)
	if [ "$rc" != 75 ] || [ -z "$seq" ]; then
		h_fail "faults/corrupt" "setup: SIGTERM gave status $rc (want 75), newest checkpoint '${seq}'" \
			"$dir/setup.err"
		return
	fi
	if ! verify_newest "$pristine" "$dir/setup.verify"; then
		h_fail "faults/corrupt" "setup: the untouched checkpoint does not verify" "$dir/setup.verify"
		return
	fi
	for i in 1 2 3; do corrupt_case "corrupt-pack-flip-$i" pack-flip "$pristine" "$seq"; done
	for i in 1 2; do corrupt_case "corrupt-manifest-flip-$i" manifest-flip "$pristine" "$seq"; done
	corrupt_case corrupt-pack-truncate pack-truncate "$pristine" "$seq"
	corrupt_case corrupt-pack-delete pack-delete "$pristine" "$seq"
}

# ---- (c) disk full -----------------------------------------------------------------------

part_diskfull() {
	local dir=$H_WORK/diskfull mnt rc i n
	h_rng_seed diskfull
	mkdir -p "$dir"
	mnt=$dir/mnt
	mkdir -p "$mnt"
	if [ "$(id -u)" != 0 ]; then
		h_skip faults/diskfull "not root, cannot mount a small tmpfs"
		return
	fi
	if ! mount -t tmpfs -o size=64m,mode=0700 ckrun-test "$mnt" 2>"$dir/mount.err"; then
		h_skip faults/diskfull "mount -t tmpfs failed: $(head -n 1 "$dir/mount.err")"
		return
	fi
	H_CLEANUPS+=("umount '$mnt'")
	bare diskfull "${DISKFULL_ARGS[@]}" || return
	h_app_cmd memgrow "${DISKFULL_ARGS[@]}"
	: >"$dir/ckrun.err"
	h_start new "$dir/ck.out" "$dir/ckrun.err" --store "$mnt" --job "$JOB"
	h_wait_origin "$H_PID" "$dir/ckrun.err" 10000
	kill -USR2 "$H_PID"
	for (( i = 0; i < 400; i++ )); do # the first checkpoint commits
		[ -n "$(h_manifests "$mnt" "$JOB")" ] && break
		h_sleep_alive "$H_PID" 50 || break
	done
	for (( i = 0; i < 600; i++ )); do # memgrow has grown
		grep -q '^phase 1 done' "$dir/ck.out" 2>/dev/null && break
		h_sleep_alive "$H_PID" 50 || break
	done
	h_sleep_alive "$H_PID" 500
	kill -USR2 "$H_PID" 2>/dev/null
	h_wait "$H_PID" 120000
	rc=$?
	n=$(h_manifests "$mnt" "$JOB" | wc -l)
	if [ "$rc" != 0 ]; then
		h_fail faults/diskfull "job status $rc, want 0 (the job must survive a full store)" "$dir/ckrun.err"
	elif ! cmp -s "$H_WORK/diskfull.bare.out" "$dir/ck.out"; then
		h_diff_excerpt "$H_WORK/diskfull.bare.out" "$dir/ck.out" "$dir/diff"
		h_fail faults/diskfull "output differs from the bare run" "$dir/diff" "$dir/ckrun.err"
	elif [ "$n" != 1 ]; then
		h_fail faults/diskfull "$n committed checkpoints, want exactly 1 (the first)" "$dir/ckrun.err"
	elif ! grep -qiE 'space|ENOSPC|full' "$dir/ckrun.err"; then
		h_fail faults/diskfull "ckrun did not report the full store on stderr" "$dir/ckrun.err"
	elif ! verify_newest "$mnt" "$dir/verify.log"; then
		h_fail faults/diskfull "the first checkpoint no longer verifies" "$dir/verify.log"
	else
		h_pass faults/diskfull
	fi
	umount "$mnt" 2>/dev/null
}

# ---- (d) bad command lines ------------------------------------------------------------

# bad NAME WANT-STATUS WORD CKRUN-ARGS...: WORD must appear in the first line
# of stderr (the error names what is wrong); the job must not run.
bad() {
	local name=$1 want=$2 word=$3 dir=$H_WORK/badinput/$1 rc first
	shift 3
	mkdir -p "$dir"
	timeout -s KILL 30 "$CKRUN" "$@" -- sh -c "echo ran >'$dir/marker'" </dev/null >"$dir/out" 2>"$dir/err"
	rc=$?
	first=$(grep -m1 -v '^[[:space:]]*$' "$dir/err")
	if [ "$rc" != "$want" ]; then
		h_fail "faults/badinput-$name" "exit status $rc, want $want" "$dir/err"
	elif [ -e "$dir/marker" ]; then
		h_fail "faults/badinput-$name" "the job ran"
	elif [ -z "$first" ]; then
		h_fail "faults/badinput-$name" "no error message"
	elif [[ ${first,,} != *"${word,,}"* ]]; then
		h_fail "faults/badinput-$name" "first error line does not mention '$word'" "$dir/err"
	else
		h_pass "faults/badinput-$name"
	fi
}

part_badinput() {
	local d=$H_WORK/badinput
	mkdir -p "$d/store"
	: >"$d/plainfile"
	bad scheme 64 ftp --store ftp://example.invalid/ck --job j
	bad store-is-file 69 plainfile --store "$d/plainfile" --job j --resume
	bad job-slash 64 a/b --store "$d/store" --job a/b
	bad unknown-option 64 --frobnicate --store "$d/store" --job j --frobnicate
}

# ---- (e) lifecycle ---------------------------------------------------------------------

# life_sigint: SIGINT to the whole process group ckrun leads, as a terminal's
# Ctrl-C or GNU timeout sends it: ckrun must checkpoint and stop (75); the
# resume must restore and finish as a bare run does.
life_sigint() {
	local d=$H_WORK/life/sigint rc why
	mkdir -p "$d"
	: >"$d/err"
	h_app_cmd sgd 0.5
	h_run_bare sgd "$d/bare" "$d/bare.err" 60 >/dev/null
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB"
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 300
	kill -INT -- "-$H_PID"
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 75 ]; then
		h_fail faults/sigint-group "ckrun exited $rc after SIGINT to its process group, want 75" "$d/err"
		return
	fi
	h_start resume "$d/out" "$d/err" --store "$d/s" --job "$JOB" --resume
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare" "$d/out"; then
		h_fail faults/sigint-group "resume: status $rc or output differs from a bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail faults/sigint-group "$why" "$d/err"
	else
		h_pass faults/sigint-group
	fi
}

# life_unsaved: a stop whose checkpoint is refused (io_uring) exits 76,
# says so, and the job is gone.
life_unsaved() {
	local d=$H_WORK/life/unsaved rc tree
	mkdir -p "$d"
	: >"$d/err"
	H_CMD=("$H_BUILD/tests/unsupported/uring")
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB"
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 200
	tree=$(h_tree_members "$H_PID")
	kill -TERM "$H_PID"
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 76 ]; then
		h_fail faults/stop-unsaved "ckrun exited $rc after a refused stop, want 76" "$d/err"
	elif ! grep -q "stopped without a checkpoint" "$d/err"; then
		h_fail faults/stop-unsaved "ckrun did not say the job was stopped unsaved" "$d/err"
	elif ! h_group_gone "$H_PID" ${tree}; then
		h_fail faults/stop-unsaved "the job still runs after the stop" "$d/err"
	else
		h_pass faults/stop-unsaved
	fi
}

# life_second_term: SIGTERM, then a second one while the stop's large
# checkpoint is being written: 76, a line saying why, checkpoint 1 intact.
life_second_term() {
	local d=$H_WORK/life/second rc
	mkdir -p "$d"
	: >"$d/err"
	h_app_cmd memgrow "${KILL_ARGS[@]}"
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB"
	h_wait_origin "$H_PID" "$d/err" 10000
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" "checkpoint 1 committed" 60000 "$H_PID"
	h_wait_line "$d/out" "phase 1 done" 60000 "$H_PID" # its heap has grown: checkpoint 2 is large
	kill -TERM "$H_PID"
	h_sleep_alive "$H_PID" 150
	kill -TERM "$H_PID"
	h_wait "$H_PID" 60000
	rc=$?
	if grep -q "checkpoint 2 committed" "$d/err"; then
		h_note "second-sigterm: checkpoint 2 committed within 150 ms; not counted"
	elif [ "$rc" != 76 ]; then
		h_fail faults/second-sigterm "ckrun exited $rc, want 76" "$d/err"
	elif ! grep -q "a second SIGTERM or SIGINT" "$d/err" || grep -q "unknown error" "$d/err"; then
		h_fail faults/second-sigterm "ckrun did not say what the second signal did" "$d/err"
	elif [ "$(h_manifests "$d/s" "$JOB")" != 00000001 ] || ! verify_newest "$d/s" "$d/verify.log"; then
		h_fail faults/second-sigterm "checkpoint 1 is not the intact newest" "$d/err" "$d/verify.log"
	else
		h_pass faults/second-sigterm
	fi
}

# life_ending: SIGTERM sent as the job ends by itself (ender exits 7 once
# its file exists): ckrun exits 75 (checkpoint first; a resume then ends
# with 7) or 7 (the job had ended: it is done), never anything else. In
# trials 7 and 8 the round asks the job 300 ms late (CKPT_TEST_ASK_DELAY_MS)
# and the job ends right after the stop: always in the middle of the round,
# where it must be 7.
life_ending() {
	local d=$H_WORK/life/ending rc i t own=0 saved=0 bad=0
	mkdir -p "$d"
	for (( i = 1; i <= 8; i++ )); do
		rm -rf "$d/s" "$d/go"
		: >"$d/err.$i"
		H_CMD=("$H_BUILD/tests/lifecycle/ender" "$d/go")
		if (( i > 6 )); then
			CKPT_TEST_ASK_DELAY_MS=300 h_start new "$d/out" "$d/err.$i" --store "$d/s" --job "$JOB"
		else
			h_start new "$d/out" "$d/err.$i" --store "$d/s" --job "$JOB"
		fi
		h_wait_origin "$H_PID" "$d/err.$i" 10000
		h_sleep_alive "$H_PID" 100
		h_rand t 0 40 # the job's end 0-20 ms before or after the stop
		(( i > 6 )) && t=20
		if (( t < 20 )); then
			: >"$d/go"
			h_sleep_ms "$t"
			kill -TERM "$H_PID" 2>/dev/null # ckrun may have ended with its job
		else
			kill -TERM "$H_PID"
			h_sleep_ms $(( t - 20 ))
			: >"$d/go"
		fi
		h_wait "$H_PID" 60000
		rc=$?
		case $rc in
		7) own=$((own + 1)) ;;
		75)
			if (( i > 6 )); then
				h_fail faults/stop-ending "trial $i: the job ended during the stop's round, yet ckrun exited 75 (want 7)" \
					"$d/err.$i"
				return
			fi
			h_start resume "$d/out" "$d/err.$i" --store "$d/s" --job "$JOB" --resume
			h_wait "$H_PID" 60000
			rc=$?
			if [ "$rc" = 7 ]; then saved=$((saved + 1)); else bad=1; fi ;;
		*) bad=1 ;;
		esac
		if (( bad )); then
			h_fail faults/stop-ending "trial $i: ckrun exited $rc (want 7, or 75 and a resume ending with 7)" "$d/err.$i"
			return
		fi
	done
	h_pass "faults/stop-ending: $own of 8 stops met the job ended (its status 7), $saved checkpointed first"
}

# life_mainexit: a job whose main thread leaves (pthread_exit) while a
# worker runs on ends when the worker returns, with status 0, as bare (the
# manager thread libckpt adds must not keep the process alive); so does a
# forked child doing the same. Rounds while the main thread is gone are
# refused in one line naming it, and the job runs on to the same output.
life_mainexit() {
	local d=$H_WORK/life/mainexit rc how
	mkdir -p "$d"
	for how in plain fork; do
		rm -rf "$d/s"
		: >"$d/err.$how"
		H_CMD=("$H_BUILD/tests/lifecycle/mainexit" 1500)
		[ "$how" = fork ] && H_CMD+=(fork)
		"${H_CMD[@]}" >"$d/bare.$how" 2>/dev/null
		rc=$?
		if [ "$rc" != 0 ]; then
			h_fail "faults/main-exit-$how" "the bare run exited $rc (want 0)"
			return
		fi
		h_start new "$d/out.$how" "$d/err.$how" --store "$d/s" --job "$JOB" --interval 200ms
		h_wait "$H_PID" 30000
		rc=$?
		if [ "$rc" != 0 ]; then
			h_fail "faults/main-exit-$how" "ckrun exited $rc (want 0; 124: the job never ended)" "$d/err.$how"
			return
		fi
		if ! cmp -s "$d/bare.$how" "$d/out.$how"; then
			h_fail "faults/main-exit-$how" "output differs from the bare run's" "$d/err.$how"
			diff "$d/bare.$how" "$d/out.$how" | head -5
			return
		fi
		if ! grep -q 'main thread has ended (pthread_exit)' "$d/err.$how"; then
			h_fail "faults/main-exit-$how" "no round was refused while the main thread was gone" "$d/err.$how"
			return
		fi
		h_pass "faults/main-exit-$how: ended with status 0 and the bare run's output; $(grep -c 'main thread has ended' "$d/err.$how") round(s) refused meanwhile"
	done
}

# life_longname: a job name of the longest length works with ckpt checkpoint.
life_longname() {
	local d=$H_WORK/life/long rc rc2 name
	name=$(printf 'j%.0s' $(seq 1 128))
	mkdir -p "$d"
	: >"$d/err"
	h_app_cmd sgd 0.5
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$name"
	h_wait_origin "$H_PID" "$d/err" 10000
	timeout -s KILL 60 "$CKPT" checkpoint --stop "$name" >"$d/ctl" 2>&1
	rc=$?
	h_wait "$H_PID" 60000
	rc2=$?
	if [ "$rc" != 0 ] || [ "$rc2" != 75 ] || [ -z "$(h_manifests "$d/s" "$name")" ]; then
		h_fail faults/long-job-name "ckpt checkpoint --stop of a 128-character job name: status $rc, ckrun $rc2" \
			"$d/ctl" "$d/err"
	else
		h_pass faults/long-job-name
	fi
}

# life_oddname: a program whose name holds characters beyond [A-Za-z0-9._-]
# ("a+b c@1", the default job name) is checkpointed with ckpt checkpoint
# --stop under that name, listed by ckpt ls under it, and resumed; a second
# job whose name is the first one's store form ("a%2Bb%20c%401") is another
# job in the same store.
life_oddname() {
	local d=$H_WORK/life/odd rc rc2 prog why name='a+b c@1'
	mkdir -p "$d/bin"
	: >"$d/err"
	h_app_cmd sgd 0.5
	h_run_bare sgd "$d/bare" "$d/bare.err" 60 >/dev/null
	prog=$d/bin/$name
	cp "${H_CMD[0]}" "$prog"
	H_CMD=("$prog" "${H_CMD[@]:1}")
	h_start new "$d/out" "$d/err" --store "$d/s"
	h_wait_origin "$H_PID" "$d/err" 10000
	timeout -s KILL 60 "$CKPT" checkpoint --stop "$name" >"$d/ctl" 2>&1
	rc=$?
	h_wait "$H_PID" 60000
	rc2=$?
	if [ "$rc" != 0 ] || [ "$rc2" != 75 ]; then
		h_fail faults/odd-job-name "ckpt checkpoint --stop '$name': status $rc, ckrun $rc2" "$d/ctl" "$d/err"
		return
	fi
	"$CKPT" ls --store "$d/s" >"$d/ls" 2>&1
	if ! grep -q "^$name  *1 " "$d/ls"; then
		h_fail faults/odd-job-name "ckpt ls does not list '$name' with 1 checkpoint" "$d/ls"
		return
	fi
	# the store form, given as a name, is a job of its own: no checkpoint
	h_start new "$d/out2" "$d/err2" --store "$d/s" --job 'a%2Bb%20c%401' --resume
	h_wait "$H_PID" 60000
	if grep -q "restored from" "$d/err2"; then
		h_fail faults/odd-job-name "job 'a%2Bb%20c%401' restored the checkpoint of '$name'" "$d/err2"
		return
	fi
	h_start resume "$d/out" "$d/err" --store "$d/s" --resume
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare" "$d/out"; then
		h_fail faults/odd-job-name "resume: status $rc or output differs from a bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail faults/odd-job-name "$why" "$d/err"
	else
		h_pass faults/odd-job-name
	fi
}

# life_early_usr2: SIGUSR2 at random moments in ckrun's first 60 ms: ckrun
# either ends before the job started (no origin line: nothing lost), or the
# job runs to its end.
life_early_usr2() {
	local d=$H_WORK/life/early rc i t died=0 ran=0
	mkdir -p "$d"
	h_app_cmd sleeper 0.2
	for (( i = 1; i <= 10; i++ )); do
		: >"$d/err.$i"
		rm -rf "$d/s"
		h_rand t 0 60
		# (this test is about the moments before the handlers exist)
		H_NO_WAIT_HANDLERS=1 h_start new "$d/out" "$d/err.$i" --store "$d/s" --job "$JOB"
		h_sleep_ms "$t"
		kill -USR2 "$H_PID" 2>/dev/null
		{ h_wait "$H_PID" 60000; } 2>/dev/null
		rc=$?
		if [ "$rc" = 0 ] && grep -q '^ck-origin END' "$d/err.$i"; then
			ran=$((ran + 1))
		elif ! grep -q '^ck-origin START' "$d/err.$i"; then
			died=$((died + 1)) # ended while loading, before any job existed
		else
			h_fail faults/early-usr2 "trial $i (SIGUSR2 after $t ms): status $rc with the job started" "$d/err.$i"
			return
		fi
	done
	h_pass "faults/early-usr2: $ran of 10 jobs ran to their end, $died ckrun ended while loading (before any job)"
}

part_lifecycle() {
	h_rng_seed lifecycle
	life_sigint
	life_unsaved
	life_second_term
	life_ending
	life_mainexit
	life_longname
	life_oddname
	life_early_usr2
}

# ---- (f) signed checkpoints ------------------------------------------------------

# part_signed: ckrun --sign-key signs each checkpoint; a resume with the key
# restores it (proven); with another key, or of a checkpoint not signed,
# the resume is refused (exit 2, one line, the job not run, the store as
# it was); ckpt verify without a key still reads a signed checkpoint; a
# key others may read is refused (64).
part_signed() {
	local d=$H_WORK/signed rc why
	mkdir -p "$d"
	head -c 32 /dev/urandom >"$d/key"
	head -c 32 /dev/urandom >"$d/other"
	chmod 600 "$d/key" "$d/other"
	cp "$d/key" "$d/open"
	chmod 644 "$d/open"
	h_app_cmd sgd 0.5
	h_run_bare sgd "$d/bare" "$d/bare.err" 60 >/dev/null
	: >"$d/err"
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB" --sign-key "$d/key"
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 300
	kill -TERM "$H_PID"
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 75 ]; then
		h_fail faults/signed "a signed stop exited $rc, want 75" "$d/err"
		return
	fi
	cp -a "$d/s" "$d/s.before"
	# another key: refused, nothing run, nothing changed
	timeout -s KILL 60 "$CKRUN" --store "$d/s" --job "$JOB" --resume --sign-key "$d/other" -- "${H_CMD[@]}" \
		>"$d/out.other" 2>"$d/err.other"
	rc=$?
	if [ "$rc" != 2 ] || [ "$(grep -c '' "$d/err.other")" != 1 ] || ! grep -q "signature" "$d/err.other" ||
		[ -s "$d/out.other" ] || ! diff -r "$d/s.before" "$d/s" >/dev/null; then
		h_fail faults/signed-other-key "resume with another key: exit $rc (want 2), not one line naming the" \
			"signature, output, or the store changed" "$d/err.other"
	else
		h_pass faults/signed-other-key
	fi
	if ! timeout -s KILL 60 "$CKPT" verify --store "$d/s" "$JOB" >"$d/verify" 2>&1; then
		h_fail faults/signed-verify "ckpt verify without a key does not read a signed checkpoint" "$d/verify"
	elif ! timeout -s KILL 60 "$CKPT" verify --sign-key "$d/key" --store "$d/s" "$JOB" >"$d/verify" 2>&1; then
		h_fail faults/signed-verify "ckpt verify --sign-key refused the right key" "$d/verify"
	elif timeout -s KILL 60 "$CKPT" verify --sign-key "$d/other" --store "$d/s" "$JOB" >"$d/verify" 2>&1; then
		h_fail faults/signed-verify "ckpt verify --sign-key accepted another key" "$d/verify"
	else
		h_pass faults/signed-verify
	fi
	timeout -s KILL 60 "$CKRUN" --store "$d/s" --job "$JOB" --resume --sign-key "$d/open" -- "${H_CMD[@]}" \
		>"$d/out.open" 2>"$d/err.open"
	rc=$?
	if [ "$rc" != 64 ] || ! grep -q "chmod 600" "$d/err.open" || [ -s "$d/out.open" ]; then
		h_fail faults/signed-open-key "a key others may read: exit $rc, want 64 and a line saying so" "$d/err.open"
	else
		h_pass faults/signed-open-key
	fi
	h_start resume "$d/out" "$d/err" --store "$d/s" --job "$JOB" --resume --sign-key "$d/key"
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare" "$d/out"; then
		h_fail faults/signed "resume with the key: status $rc or output differs from a bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail faults/signed "$why" "$d/err"
	else
		h_pass faults/signed
	fi
	# a checkpoint not signed, resumed with a key: refused
	: >"$d/err2"
	h_start new "$d/out2" "$d/err2" --store "$d/s2" --job "$JOB"
	h_wait_origin "$H_PID" "$d/err2" 10000
	kill -TERM "$H_PID"
	h_wait "$H_PID" 60000
	timeout -s KILL 60 "$CKRUN" --store "$d/s2" --job "$JOB" --resume --sign-key "$d/key" -- "${H_CMD[@]}" \
		>"$d/out.unsigned" 2>"$d/err.unsigned"
	rc=$?
	if [ "$rc" != 2 ] || ! grep -q "not signed" "$d/err.unsigned" || [ -s "$d/out.unsigned" ]; then
		h_fail faults/signed-unsigned "resume of an unsigned checkpoint with a key: exit $rc, want 2 naming it" \
			"$d/err.unsigned"
	else
		h_pass faults/signed-unsigned
	fi
}

# A lock the job held is taken by another process while the job is down:
# the resume fails in one line naming the lock and the file (exit 99), the
# store untouched; once the other holder is gone, the same resume restores.
part_lockheld() {
	local d=$H_WORK/lockheld rc why f holder
	mkdir -p "$d/tmp"
	h_app_cmd fd_locks 3
	TMPDIR=$d/tmp h_run_bare fd_locks "$d/bare" "$d/bare.err" 120 >/dev/null
	rm -rf "${d:?}/tmp" && mkdir -p "$d/tmp"
	: >"$d/err"
	TMPDIR=$d/tmp h_start new "$d/out" "$d/err" --store "$d/s" --job lk
	if ! h_wait_origin "$H_PID" "$d/err" 10000; then
		h_fail faults/lockheld "the job did not start" "$d/err"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	h_sleep_alive "$H_PID" 500
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" 'checkpoint 1 committed' 30000 "$H_PID"
	if ! h_alive "$H_PID" || ! grep -q 'checkpoint 1 committed' "$d/err"; then
		h_fail faults/lockheld "no checkpoint while the job ran" "$d/err"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	f=$(find "$d/tmp" -name locked | head -n 1)
	if [ -z "$f" ]; then
		h_fail faults/lockheld "the job's locked file is not there" "$d/err"
		return
	fi
	# another process holds an exclusive flock of the file meanwhile (-o:
	# flock itself holds it, not the sleep it runs)
	flock -x -o "$f" sleep 300 &
	holder=$!
	h_sleep_alive "$holder" 300
	cp -a "$d/s" "$d/s.before"
	timeout -s KILL 60 "$CKRUN" --store "$d/s" --job lk --resume -- "${H_CMD[@]}" >"$d/out.held" 2>"$d/err.held"
	rc=$?
	if [ "$rc" != 99 ] || [ "$(grep -c '' "$d/err.held")" != 1 ] || ! grep -q "lock" "$d/err.held" ||
		! grep -qF "$f" "$d/err.held" || [ -s "$d/out.held" ] ||
		! diff -r -x lock "$d/s.before" "$d/s" >/dev/null; then
		h_fail faults/lockheld-refused "a lock held by another: exit $rc (want 99), not one line naming the lock \
and $f, output, or the store's checkpoints changed" "$d/err.held"
	else
		h_pass "faults/lockheld-refused: $(cat "$d/err.held")"
	fi
	pkill -P "$holder" sleep 2>/dev/null
	kill "$holder" 2>/dev/null
	wait "$holder" 2>/dev/null
	TMPDIR=$d/tmp h_start resume "$d/out" "$d/err" --store "$d/s" --job lk --resume
	h_wait "$H_PID" 120000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare" "$d/out"; then
		h_fail faults/lockheld "the resume once the lock was free: status $rc, or the output differs from a bare run's" \
			"$d/err" "$d/out"
	elif ! why=$(h_proof "$d/err"); then
		h_fail faults/lockheld "$why" "$d/err"
	else
		h_pass "faults/lockheld: restored once the other holder was gone, its locks held again"
	fi
}

main() {
	local p
	h_seed_init
	if ! h_have_ckrun || ! h_have_ckpt; then
		h_skip faults "ckrun or ckpt is not built ($CKRUN, $CKPT); run make"
		return 0
	fi
	if [ ! -x "$H_APPS_BIN/memgrow" ]; then
		h_fail faults "memgrow is not built; run make"
		return 1
	fi
	h_init faults
	for p in $PARTS; do
		case $p in
		kill | treekill | corrupt | diskfull | badinput | lifecycle | signed | lockheld) "part_$p" ;;
		*) h_fail faults "unknown part '$p'" ;;
		esac
	done
	return "$H_FAILED"
}

main "$@"
