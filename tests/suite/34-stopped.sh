#!/usr/bin/env bash
# Processes the job stopped (SIGSTOP), held by ckrun through a round and
# stopped again by a restore (NOTES.md, "Processes the job stopped"):
#   stopped/hold-restore  mp_stopped's parent stops its two children (it
#       waits for the first one's stop, leaves the second one's to be
#       reported). With both stopped, a checkpoint must commit (the
#       previous build refused it), both must still be stopped after it
#       with their counters where they were, then kill -9 of the group and
#       --resume: both stopped again right after the restore, and the job
#       ends with a bare run's output, its resume proven a restore
#       (h_proof). mp_stopped itself checks what the parent sees: no stop
#       reported twice, the unreported one still reported once, SIGCHLDs,
#       the pending SIGUSR1 handled after SIGCONT.
#   stopped/tstp-restore  the same with mp_tstp: its children in process
#       groups of their own, stopped by SIGTSTP (reported) and SIGTTIN (left
#       to be reported): the restore stops each by its own signal, and the
#       parent takes a report naming SIGTTIN (the previous build refused the
#       round: "a restore can stop it only with SIGSTOP").
#   stopped/nested-restore  the same with mp_stopnest: a stopped child C
#       whose own child G is stopped too, both stops left to be reported
#       (C's to the main process, G's to C, which checks it once
#       continued; the previous build refused the round: "are both
#       stopped").
#   stopped/refused  a stopped process whose own round refuses (io_uring):
#       the refusal line, the process still stopped after the round and no
#       longer traced, its output a bare run's once the test continues it
#       (its threads never left the parking handler for the job's code).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

SCALE=2

# below PID: its descendants.
below() {
	local k
	for k in $(pgrep -P "$1"); do
		echo "$k"
		below "$k"
	done
}

# kids CKRUN-PID: the job's main process's descendants (ckrun -> init -> main).
kids() {
	local init main
	init=$(pgrep -P "$1" | head -n 1)
	main=$([ -n "$init" ] && pgrep -P "$init" | head -n 1)
	[ -n "$main" ] && below "$main"
}

# all_stopped CKRUN-PID MS: two descendants in state T within MS.
all_stopped() {
	local end=$(( $(h_now_ms) + $2 )) k n s
	while (( $(h_now_ms) < end )); do
		n=0
		for k in $(kids "$1"); do
			read -r s 2>/dev/null <"/proc/$k/stat" || continue
			s=${s##*) }
			[ "${s%% *}" = T ] && n=$(( n + 1 ))
		done
		(( n == 2 )) && return 0
		sleep 0.02
	done
	return 1
}

# refused: the job stopped by the test, a round its libckpt refuses.
refused() {
	local d=$H_WORK/refused app=$H_BUILD/tests/unsupported/uring job st tr
	mkdir -p "$d"
	"$app" >"$d/bare"
	: >"$d/err"
	H_CMD=("$app")
	h_start new "$d/out" "$d/err" --store "$d/st" --job ur
	h_wait_origin "$H_PID" "$d/err" 10000
	job=$(pgrep -P "$(pgrep -P "$H_PID" | head -n 1)" | head -n 1)
	kill -STOP "$job"
	sleep 0.2
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" "keeps running" 15000 "$H_PID"
	sleep 0.3
	read -r st 2>/dev/null <"/proc/$job/stat"
	st=${st##*) }
	st=${st%% *}
	tr=$(awk '/^TracerPid:/ { print $2 }' "/proc/$job/status" 2>/dev/null)
	kill -CONT "$job"
	h_wait "$H_PID" 30000
	if ! grep -q "io_uring.*keeps running" "$d/err"; then
		h_fail stopped/refused "no refusal naming io_uring" "$d/err"
	elif [ "$st" != T ] || [ "$tr" != 0 ]; then
		h_fail stopped/refused "after the refused round: state $st, tracer $tr (T and 0 expected)" "$d/err"
	elif ! cmp -s "$d/bare" "$d/out"; then
		h_fail stopped/refused "output differs from a bare run" "$d/out" "$d/err"
	else
		h_pass "stopped/refused: still stopped, untraced; $(grep -m1 -o 'descriptor.*' "$d/err" | cut -c1-60)"
	fi
}

# hold_restore NAME APP: APP stops its two children (test stopped/NAME).
hold_restore() {
	local name=$1 app=$2 d=$H_WORK/$1 rc why
	mkdir -p "$d"
	"$app" "$SCALE" >"$d/bare"
	: >"$d/err"
	H_CMD=("$app" "$SCALE")
	h_start new "$d/out" "$d/err" --store "$d/st" --job stp
	h_wait_origin "$H_PID" "$d/err" 10000
	if ! all_stopped "$H_PID" 5000; then
		h_fail stopped/$name "the job's children did not stop" "$d/err"
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/err" "checkpoint 1 (committed|of job stp failed)" 30000 "$H_PID" ||
	   ! grep -q "checkpoint 1 committed" "$d/err"; then
		h_fail stopped/$name "no checkpoint of the stopped children was committed" "$d/err"
		return
	fi
	if ! all_stopped "$H_PID" 100; then
		h_fail stopped/$name "the children are not stopped after the checkpoint" "$d/err"
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	h_start resume "$d/out" "$d/err" --store "$d/st" --job stp --resume
	h_wait_line "$d/err" "restored from" 60000 "$H_PID"
	if ! all_stopped "$H_PID" 2000; then
		h_fail stopped/$name "the restored children are not stopped" "$d/err"
		return
	fi
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail stopped/$name "the resumed job exited $rc" "$d/out" "$d/err"
	elif ! cmp -s "$d/bare" "$d/out"; then
		h_fail stopped/$name "output differs from a bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail stopped/$name "$why" "$d/err"
	else
		h_pass "stopped/$name: $(grep -m1 'checkpoint 1 committed' "$d/err" | cut -c1-90)"
	fi
}

main() {
	h_init stopped
	if ! h_have_ckrun; then
		h_skip stopped "ckrun is not built ($CKRUN); run make"
		return 0
	fi
	hold_restore hold-restore "$H_BUILD/tests/apps/mp_stopped"
	hold_restore tstp-restore "$H_BUILD/tests/apps/mp_tstp"
	hold_restore nested-restore "$H_BUILD/tests/apps/mp_stopnest"
	refused
	return "$H_FAILED"
}

main "$@"
