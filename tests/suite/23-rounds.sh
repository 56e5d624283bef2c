#!/usr/bin/env bash
# What rounds must leave unchanged in a running job.
#   rounds/eintr-race  eintr_race (tests/apps): three threads alternate
#       0.3 ms of work with 2 ms waits (poll, epoll_wait, nanosleep,
#       usleep, clock_nanosleep). Rounds every 100 ms, with a pause of 3 ms
#       between the round reading what a thread is blocked in
#       (/proc/TID/syscall) and signalling it (CKPT_TEST_SIGNAL_GAP_US):
#       threads read as running enter a wait before the signal, which the
#       kernel ends with EINTR. Every wait must still time out as bare (a
#       libckpt that issues again only the calls /proc showed fails within
#       a few rounds). Checkpoint, kill -9, then resumed with the same
#       rounds: a proven restore, the bare output, exit 0.
#   rounds/exec  mp_exec (tests/apps: fork+exec chains, vfork, posix_spawn)
#       under rounds every 30 ms, 16 runs, each with the bare output. A
#       round meeting an exec lost the job two ways: the parking signal,
#       pending across the exec, ended the new program before its libckpt
#       had a handler (status 0x3f; libckpt now ignores the signal over
#       the exec); and ckrun read ECONNRESET on the old
#       channel before the new program's HELLO queued there, dropped the
#       process, whose libckpt attached again through a socket that took
#       the lowest free descriptor number while the job ran ("O_CLOEXEC fd
#       closed no"). Either failed 3 of 16 runs.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

APP=$H_BUILD/tests/apps/eintr_race

eintr_race() {
	local d=$H_WORK/eintr rc why n1 n2
	mkdir -p "$d"
	: >"$d/err"
	"$APP" 1 >"$d/bare" 2>/dev/null
	H_CMD=("$APP" 1)
	export CKPT_TEST_SIGNAL_GAP_US=3000
	h_start new "$d/out" "$d/err" --store "$d/st" --job e --interval 100ms --no-fork
	h_wait_line_count "$d/err" "checkpoint [0-9]+ committed" 6 30000 "$H_PID"
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	n1=$(grep -Ec "checkpoint [0-9]+ committed" "$d/err")
	h_start resume "$d/out" "$d/err" --store "$d/st" --job e --interval 100ms --no-fork --resume
	h_wait "$H_PID" 60000
	rc=$?
	unset CKPT_TEST_SIGNAL_GAP_US
	n2=$(( $(grep -Ec "checkpoint [0-9]+ committed" "$d/err") - n1 ))
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare" "$d/out"; then
		h_fail rounds/eintr-race "exit status $rc, or output differs from the bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail rounds/eintr-race "$why" "$d/err"
	elif (( n1 < 6 || n2 < 6 )); then
		h_fail rounds/eintr-race "only $n1 round(s) before the kill and $n2 after the restore committed (6 each wanted)" "$d/err"
	else
		h_pass "rounds/eintr-race: $n1 rounds, kill -9, restore, $n2 rounds; every wait timed out as bare"
	fi
}

exec_rounds() {
	local d=$H_WORK/exec i rc bad=0 app=$H_BUILD/tests/apps/mp_exec
	mkdir -p "$d"
	"$app" 0.25 >"$d/bare" 2>/dev/null
	for (( i = 1; i <= 16; i++ )); do
		rm -rf "$d/st"
		timeout -s KILL 60 "$CKRUN" -v --interval 30ms --store "$d/st" --job x -- "$app" 0.25 >"$d/out" 2>"$d/err"
		rc=$?
		if [ "$rc" != 0 ] || ! cmp -s "$d/bare" "$d/out"; then
			bad=$i
			break
		fi
	done
	if (( bad )); then
		h_fail rounds/exec "run $bad of 16: exit status $rc (137: killed after 60 s), or output differs from the bare run" "$d/out" "$d/err"
	elif ! grep -q "checkpoint [0-9]* committed" "$d/err"; then
		h_fail rounds/exec "no round committed in the last run: the test proved nothing" "$d/err"
	else
		h_pass "rounds/exec: 16 runs under rounds every 30 ms ($(grep -c "checkpoint [0-9]* committed" "$d/err") rounds in the last), each as bare"
	fi
}

main() {
	h_init rounds
	if [ ! -x "$APP" ]; then
		h_fail rounds "$APP is not built; run make"
		return 1
	fi
	eintr_race
	exec_rounds
	return "$H_FAILED"
}

main "$@"
