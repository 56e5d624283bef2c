#!/usr/bin/env bash
# Parking a thread must not change what its system calls return.
#   parking/eintr-race  eintr_race (tests/apps): three threads alternate
#       0.3 ms of work with 2 ms waits (poll, epoll_wait, nanosleep,
#       usleep, clock_nanosleep). Rounds every 100 ms, with a pause of 3 ms
#       between the round reading what a thread is blocked in
#       (/proc/TID/syscall) and signalling it (CKPT_TEST_SIGNAL_GAP_US):
#       threads read as running enter a wait before the signal, which the
#       kernel ends with EINTR. Every wait must still time out as bare (a
#       libckpt that issues again only the calls /proc showed fails within
#       a few rounds). Checkpoint, kill -9, then resumed with the same
#       rounds: a proven restore, the bare output, exit 0.
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
		h_fail parking/eintr-race "exit status $rc, or output differs from the bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail parking/eintr-race "$why" "$d/err"
	elif (( n1 < 6 || n2 < 6 )); then
		h_fail parking/eintr-race "only $n1 round(s) before the kill and $n2 after the restore committed (6 each wanted)" "$d/err"
	else
		h_pass "parking/eintr-race: $n1 rounds, kill -9, restore, $n2 rounds; every wait timed out as bare"
	fi
}

main() {
	h_init parking
	if [ ! -x "$APP" ]; then
		h_fail parking "$APP is not built; run make"
		return 1
	fi
	eintr_race
	return "$H_FAILED"
}

main "$@"
