#!/usr/bin/env bash
# 45-slurm: a stop that must fit a scheduler's grace (ckrun --grace), and
# ckrun under a real Slurm.
#
# grace: memgrow (256 MiB of random data, then 768 MiB more) commits a
#   first checkpoint, grows, and gets SIGTERM. With --grace 100ms the stop's
#   round cannot be written in time: ckrun must abandon it (exit 76, a line
#   saying so), leave checkpoint 1 the only one, verifying, with no pack of
#   the abandoned round, and a resume must restore checkpoint 1 and end with
#   the bare output. With --grace 120 the round commits (exit 75, "within
#   its grace") and the resume restores it.
# slurm: Debian's munge, slurmctld and slurmd, configured and started here
#   as a single-node cluster (munge key, state and spool in the suite's work
#   directory, ports chosen free on 127.0.0.1, proctrack/pgid: no cgroups),
#   with the settings of scripts/slurm/slurm.conf.ckrun included as shipped.
#   scripts/slurm/ckrun-job.sbatch, as shipped (only CKRUN and CKPT_STORE
#   set in its environment), runs sgd; `scontrol requeue` (case requeue)
#   and a job of the high-priority partition needing every CPU (case
#   preempt: PreemptMode=REQUEUE) must stop it through SIGTERM ->
#   checkpoint -> exit 75 (slurmd's log), and so must `ckpt checkpoint
#   --stop` (case selfstop: the job ends by itself with 75, and
#   RequeueExit=75 requeues it); the requeued job, started again,
#   must restore (ckrun's restore line, the job's origin token) and end with
#   the bare run's output. Everything started is stopped at the end, and no
#   process of it may be left.
#
#   CKPT_TEST_SLURM  the cases to run (default: grace requeue preempt selfstop)
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/lib/harness.sh

CASES=" ${CKPT_TEST_SLURM:-grace requeue preempt selfstop} "
SBATCH_SCRIPT=$H_TOP/scripts/slurm/ckrun-job.sbatch
SLURM_FRAGMENT=$H_TOP/scripts/slurm/slurm.conf.ckrun
GROW_ARGS=(2 256 768)

h_init slurm
h_seed_init
if ! h_have_ckrun || ! h_have_ckpt || [ ! -x "$H_APPS_BIN/memgrow" ] || [ ! -x "$H_APPS_BIN/sgd" ]; then
	h_fail slurm "ckrun, ckpt, memgrow or sgd is not built; run make"
	exit 1
fi

# ---- --grace ---------------------------------------------------------------

# grace_run NAME GRACE: the first run of memgrow under ckrun --grace GRACE,
# a committed checkpoint in phase 1, SIGTERM in phase 2. Echoes ckrun's
# exit status.
grace_run() {
	local d=$H_WORK/$1
	h_start new "$d/ck.out" "$d/ck.err" --store "$d/store" --job mg --grace "$2"
	h_wait_origin "$H_PID" "$d/ck.err" 20000
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/ck.err" "checkpoint 1 committed" 120000 "$H_PID"; then
		echo "no first checkpoint"
		return
	fi
	# Phase 2 holds 1 GiB: the stop's round reads all of it, writes 768 MiB.
	h_wait_line "$d/ck.out" "^phase 1 done" 60000 "$H_PID" && h_sleep_alive "$H_PID" 1500
	kill -TERM "$H_PID"
	h_wait "$H_PID" 300000
	echo $?
}

# grace_resume NAME WANT_SEQ: resumes the job to its end; output, status
# and proof of the restore of checkpoint WANT_SEQ.
grace_resume() {
	local name=$1 d=$H_WORK/$1 rc why
	h_start resume "$d/ck.out" "$d/ck.err" --store "$d/store" --job mg --resume
	h_wait "$H_PID" 300000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail "slurm/$name" "the resume exited with $rc" "$d/ck.err"
		return 1
	fi
	if ! grep -q "restored from checkpoint $2 " "$d/ck.err"; then
		h_fail "slurm/$name" "the resume did not restore checkpoint $2" "$d/ck.err"
		return 1
	fi
	if ! why=$(h_proof "$d/ck.err"); then
		h_fail "slurm/$name" "not a proven restore: $why" "$d/ck.err"
		return 1
	fi
	if ! cmp -s "$d/ck.out" "$H_WORK/grace.bare.out"; then
		h_diff_excerpt "$H_WORK/grace.bare.out" "$d/ck.out" "$d/diff"
		h_fail "slurm/$name" "output differs from the bare run's" "$d/diff"
		return 1
	fi
}

case_grace() {
	local d rc res
	h_app_cmd memgrow "${GROW_ARGS[@]}"
	res=$(h_run_bare memgrow "$H_WORK/grace.bare.out" "$H_WORK/grace.bare.err" 300)
	if [ "${res% *}" != 0 ]; then
		h_fail slurm/grace "bare run of memgrow failed (${res% *})" "$H_WORK/grace.bare.out"
		return
	fi
	# Too short: abandoned, checkpoint 1 kept.
	d=$H_WORK/grace-short
	mkdir -p "$d"
	rc=$(grace_run grace-short 100ms)
	if [ "$rc" != 76 ]; then
		h_fail slurm/grace-short "ckrun exited with '$rc', not 76 (stopped without a new checkpoint)" "$d/ck.err"
	elif ! grep -q "grace of 0.100 s ran out.*abandoned, nothing of it committed" "$d/ck.err" ||
		! grep -q "stopped without a new checkpoint; a resume goes back to checkpoint 1" "$d/ck.err"; then
		h_fail slurm/grace-short "no line saying the round was abandoned and checkpoint 1 kept" "$d/ck.err"
	elif [ "$(h_manifests "$d/store" mg | tr '\n' ' ')" != "00000001 " ]; then
		h_fail slurm/grace-short "the store holds checkpoints '$(h_manifests "$d/store" mg | tr '\n' ' ')', not 1 alone"
	elif compgen -G "$d/store/mg/packs/00000002-*" >/dev/null; then
		h_fail slurm/grace-short "packs of the abandoned round are left: $(ls "$d/store/mg/packs")"
	elif ! timeout 300 "$CKPT" verify --store "$d/store" mg >"$d/verify.out" 2>&1; then
		h_fail slurm/grace-short "ckpt verify of the kept checkpoint failed" "$d/verify.out"
	elif grace_resume grace-short 1; then
		h_pass slurm/grace-short
	fi
	# Long enough: committed.
	d=$H_WORK/grace-enough
	mkdir -p "$d"
	rc=$(grace_run grace-enough 120)
	if [ "$rc" != 75 ]; then
		h_fail slurm/grace-enough "ckrun exited with '$rc', not 75 (checkpointed and stopped)" "$d/ck.err"
	elif ! grep -q "checkpointed (2) within its grace (.* of 120.000 s) and stopped" "$d/ck.err"; then
		h_fail slurm/grace-enough "no line saying checkpoint 2 committed within the grace" "$d/ck.err"
	elif ! timeout 300 "$CKPT" verify --store "$d/store" mg@2 >"$d/verify.out" 2>&1; then
		h_fail slurm/grace-enough "ckpt verify of checkpoint 2 failed" "$d/verify.out"
	elif grace_resume grace-enough 2; then
		h_pass slurm/grace-enough
	fi
}

# ---- Slurm -----------------------------------------------------------------

SL=$H_WORK/slurm

# Every process the cluster started (daemons, slurmstepd, the jobs) has
# this suite's SLURM_CONF in its environment.
sl_procs() {
	local f p
	for f in /proc/[0-9]*/environ; do
		p=${f#/proc/}
		p=${p%/environ}
		[ "$p" = "$$" ] || [ "$p" = "$BASHPID" ] && continue
		{ tr '\0' '\n' <"$f"; } 2>/dev/null | grep -qxF "SLURM_CONF=$SL/slurm.conf" && echo "$p"
	done
}

sl_stop() {
	local p i left
	[ -d "$SL" ] || return 0
	scancel --quiet --full --signal=KILL -u root >/dev/null 2>&1
	for p in slurmd slurmctld munged; do
		[ -s "$SL/run/$p.pid" ] && kill -TERM "$(cat "$SL/run/$p.pid")" 2>/dev/null
	done
	for (( i = 0; i < 100; i++ )); do
		left=$(sl_procs)
		[ -z "$left" ] && return 0
		# shellcheck disable=SC2086 # pids
		(( i == 60 )) && kill -9 $left 2>/dev/null
		sleep 0.1
	done
	return 1
}

free_ports() { # two free TCP ports on 127.0.0.1
	python3 -c 'import socket
ss=[socket.socket() for _ in range(2)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))'
}

sl_start() {
	local host ncpu ports i
	mkdir -p "$SL/munge" "$SL/run" "$SL/state" "$SL/spool" "$SL/log"
	chmod 0700 "$SL/munge"
	host=$(hostname -s)
	ncpu=$(nproc)
	read -r -a ports < <(free_ports)
	# The key: random bytes, private to this cluster.
	head -c 1024 /dev/urandom >"$SL/munge/munge.key"
	chmod 0600 "$SL/munge/munge.key"
	cat >"$SL/slurm.conf" <<-EOF
	# A single-node cluster for tests/suite/45-slurm.sh (made by it).
	ClusterName=ckrun-test
	SlurmctldHost=$host(127.0.0.1)
	SlurmctldPort=${ports[0]}
	SlurmdPort=${ports[1]}
	AuthType=auth/munge
	CredType=cred/munge
	AuthInfo=socket=$SL/run/munge.sock
	SlurmUser=root
	SlurmdUser=root
	StateSaveLocation=$SL/state
	SlurmdSpoolDir=$SL/spool
	SlurmctldPidFile=$SL/run/slurmctld.pid
	SlurmdPidFile=$SL/run/slurmd.pid
	SlurmctldLogFile=$SL/log/slurmctld.log
	SlurmdLogFile=$SL/log/slurmd.log
	SlurmdDebug=debug
	ProctrackType=proctrack/pgid
	TaskPlugin=task/none
	JobAcctGatherType=jobacct_gather/none
	AccountingStorageType=accounting_storage/none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_CPU
	SwitchType=switch/none
	MpiDefault=none
	ReturnToService=2
	MinJobAge=600
	# the test's cluster looks at its queue every second or two (the
	# defaults, 60 s and 30 s, let a short job end before a preemption)
	SchedulerParameters=sched_interval=2,bf_interval=1
	NodeName=$host NodeAddr=127.0.0.1 CPUs=$ncpu State=UNKNOWN
	Include $SLURM_FRAGMENT
	EOF
	export SLURM_CONF=$SL/slurm.conf
	# --force: the key's directory lies below the world-writable /tmp.
	munged --force --socket="$SL/run/munge.sock" --key-file="$SL/munge/munge.key" \
		--log-file="$SL/log/munged.log" --pid-file="$SL/run/munged.pid" \
		--seed-file="$SL/munge/munged.seed" >"$SL/log/munged.out" 2>&1 || return 1
	slurmctld -f "$SL/slurm.conf" >"$SL/log/slurmctld.out" 2>&1 || return 1
	slurmd -f "$SL/slurm.conf" -N "$host" >"$SL/log/slurmd.out" 2>&1 || return 1
	for (( i = 0; i < 600; i++ )); do
		[ "$(sinfo -h -N -o %T 2>/dev/null | sort -u)" = idle ] && return 0
		sleep 0.1
	done
	return 1
}

sl_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }

# sl_wait_state JOBID STATE MS
sl_wait_state() {
	local end=$(( $(h_now_ms) + $3 )) st
	until [ "$(sl_state "$1")" = "$2" ]; do
		st=$(sl_state "$1")
		# an end that is not the one waited for: no point in waiting on
		case $st in FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE)
			[ "$st" != "$2" ] && return 1 ;;
		esac
		(( $(h_now_ms) < end )) || return 1
		sleep 0.2
	done
}

# sl_exits JOBID STATUS: how many runs of the job's batch script exited
# with STATUS (slurmd's log).
sl_exits() { grep -c "\[$1\.batch\] task 0 ([0-9]*) exited with exit code $2\.$" "$SL/log/slurmd.log"; }

# sl_case NAME: sgd through the shipped batch script, stopped once by
# NAME's trigger (requeue or preempt), started again, run to its end.
sl_case() {
	local name=$1 d=$SL/$1 id why hi stopped scale=8
	mkdir -p "$d"
	# A preemption's grace ends at slurmctld's next time-limit pass, which
	# comes every 30 s: the job must outlast preemption + grace + 30 s
	# (sgd 8 ran 27 s here; half the runs ended before the pass).
	[ "$name" = preempt ] && scale=20
	h_app_cmd sgd "$scale"
	if [ ! -s "$SL/bare.$scale.out" ]; then
		why=$(h_run_bare sgd "$SL/bare.$scale.out" "$SL/bare.$scale.err" 300)
		if [ "${why% *}" != 0 ]; then
			h_fail "slurm/$name" "bare run of sgd failed" "$SL/bare.$scale.err"
			return
		fi
	fi
	: >"$d/err"
	h_run_mark "$d/err" new 0
	# As shipped: only the ckrun and the store come from the environment.
	id=$(cd "$d" && CKRUN=$CKRUN CKPT_STORE=$d/store CKPT_TEST_ORIGIN=1 \
		sbatch --parsable -J "ck-$name" -o "$d/out" -e "$d/err" "$SBATCH_SCRIPT" "${H_CMD[@]}" 2>"$d/sbatch.err")
	if [ -z "$id" ]; then
		h_fail "slurm/$name" "sbatch failed" "$d/sbatch.err"
		return
	fi
	echo "$name: job $id" >>"$d/schedule"
	if ! sl_wait_state "$id" RUNNING 60000 || ! h_wait_line "$d/err" '^ck-origin START' 60000; then
		h_fail "slurm/$name" "job $id did not start ($(sl_state "$id"))" "$d/err" "$SL/log/slurmctld.log"
		return
	fi
	sleep 2
	case $name in
	requeue) scontrol requeue "$id" 2>>"$d/schedule" ;;
	preempt)
		hi=$(sbatch --parsable -p high -c "$(nproc)" -J ck-preemptor -o /dev/null --wrap true 2>>"$d/schedule")
		echo "preemptor: job $hi" >>"$d/schedule"
		;;
	selfstop) timeout 120 "$CKPT" checkpoint --stop "slurm-$id" >>"$d/schedule" 2>&1 ;;
	esac
	# (a stop through the control socket says so to ckpt, not on stderr)
	stopped="checkpointed \(1\) .*and stopped"
	[ "$name" = selfstop ] && stopped="checkpoint 1 committed"
	# slurmctld 22.05 sometimes tests the preemptor once, before the
	# running job can be preempted, and not again while nothing changes
	# (2 of 3 runs on a loaded 2-core VM: the job ran to its end, the
	# preemptor pending): a reconfigure makes it look at its queue again.
	for (( k = 0; k < 2; k++ )); do
		[ -n "${hi:-}" ] || break
		h_wait_line "$d/err" "$stopped" 6000 && break
		# (PreemptTime: when its grace began)
		scontrol show job "$id" 2>/dev/null | grep -q 'PreemptTime=None' || break
		[ "$(sl_state "$hi")" = PENDING ] || break
		echo "preemptor still pending, no preemption: scontrol reconfigure" >>"$d/schedule"
		scontrol reconfigure >>"$d/schedule" 2>&1
	done
	if ! h_wait_line "$d/err" "$stopped" 120000; then
		h_fail "slurm/$name" "job $id was not checkpointed and stopped ($(sl_state "$id"))" "$d/err" "$d/schedule"
		return
	fi
	if ! sl_wait_state "$id" PENDING 60000; then
		h_fail "slurm/$name" "job $id was not requeued (state $(sl_state "$id"))" "$d/err" "$SL/log/slurmctld.log"
		return
	fi
	if [ "$(sl_exits "$id" 75)" != 1 ]; then
		h_fail "slurm/$name" "the stopped run did not exit 75 (slurmd's log)" "$SL/log/slurmd.log"
		return
	fi
	if [ -n "${hi:-}" ] && ! sl_wait_state "$hi" COMPLETED 60000; then
		h_fail "slurm/$name" "the preemptor did not run" "$SL/log/slurmctld.log"
		return
	fi
	# Slurm holds a requeued job back for a while (its BeginTime): now,
	# but in a later second than the requeue (slurmd refuses a credential
	# issued in the second it revoked the job's last one: "Job credential
	# revoked").
	sleep 2
	h_run_mark "$d/err" resume "$([ -n "$(h_manifests "$d/store" "slurm-$id")" ] && echo 1 || echo 0)"
	scontrol update JobId="$id" StartTime=now 2>>"$d/schedule"
	if ! sl_wait_state "$id" COMPLETED 300000; then
		h_fail "slurm/$name" "the requeued job $id did not complete (state $(sl_state "$id"))" "$d/err"
		return
	fi
	if [ "$(sl_exits "$id" 0)" != 1 ]; then
		h_fail "slurm/$name" "the requeued run did not exit 0 (slurmd's log)" "$d/err" "$SL/log/slurmd.log"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "slurm/$name" "not a proven restore: $why" "$d/err"
	elif ! cmp -s "$d/out" "$SL/bare.$scale.out"; then
		h_diff_excerpt "$SL/bare.$scale.out" "$d/out" "$d/diff"
		h_fail "slurm/$name" "output differs from the bare run's" "$d/diff"
	else
		h_pass "slurm/$name"
	fi
}

case_slurm() {
	local c
	if [ "$(id -u)" -ne 0 ]; then
		h_skip slurm "needs root (slurmd runs the jobs as their users)"
		return
	fi
	if ! CKPT_DEPS_EXTRA=slurm "$H_TOP/scripts/deps.sh" >"$H_WORK/deps.log" 2>&1; then
		h_fail slurm "the Slurm packages could not be installed" "$H_WORK/deps.log"
		return
	fi
	H_CLEANUPS+=("sl_stop")
	if ! sl_start; then
		h_fail slurm/start "the cluster did not come up" "$SL/log/slurmctld.out" "$SL/log/slurmd.out" \
			"$SL/log/munged.log" "$SL/log/slurmctld.log" "$SL/log/slurmd.log"
		return
	fi
	h_pass slurm/start
	for c in requeue preempt selfstop; do
		[[ $CASES == *" $c "* ]] && sl_case "$c"
	done
	if sl_stop; then
		h_pass slurm/stop
	else
		h_fail slurm/stop "processes left after the cluster was stopped: $(sl_procs | tr '\n' ' ')"
	fi
}

[[ $CASES == *" grace "* ]] && case_grace
[[ $CASES =~ \ (requeue|preempt|selfstop)\  ]] && case_slurm
exit "$H_FAILED"
