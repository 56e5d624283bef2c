#!/usr/bin/env bash
# The audit login uid (/proc/self/loginuid) is the job's own: a job started
# from a shell whose login uid is 4242 and resumed from one whose login uid
# is 5151 reads 4242 after the restore (loginuid/restored), and a restore
# that cannot set it (the resuming ckrun lacks CAP_AUDIT_CONTROL: setpriv
# drops it from the bounding set) fails with exit 99 and one line naming
# the process and both login uids (loginuid/refused). The proof of each
# restore: the job's origin (tests/apps/origin) drawn once, in the first run.
# Needs root and a kernel that lets root write /proc/self/loginuid (audit);
# else SKIP. setpriv (util-linux) for the refusal.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
APP=$H_APPS_BIN/loginuid
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-loginuid.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT
export TMPDIR=$W

if [ "$(id -u)" != 0 ] || ! bash -c 'echo 4242 >/proc/self/loginuid && [ "$(cat /proc/self/loginuid)" = 4242 ]' 2>/dev/null; then
	h_skip loginuid "needs root and a kernel that lets root set /proc/self/loginuid"
	exit 0
fi

# CMD in a new session (setsid: its pid is the session's and the process
# group's), with audit login uid $0
AS='echo "$0" >/proc/self/loginuid && exec "$@"'

# first_run NAME: the job under ckrun with login uid 4242, one checkpoint
# committed after a few steps, then kill -9 of its group.
first_run() {
	local d=$W/$1 pid
	mkdir -p "$d"
	CKPT_TEST_ORIGIN=1 setsid bash -c "$AS" 4242 "$CKRUN" -v --store "$d/s" --job "lu-$1" -- "$APP" 4 \
		>"$d/out" 2>"$d/err" &
	pid=$!
	h_wait_line "$d/out" "^step 3:" 20000 "$pid" || return 1
	kill -USR2 "$pid"
	h_wait_line "$d/err" "checkpoint 1 committed" 30000 "$pid" || return 1
	kill -9 -- "-$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# the origin drawn once (a fresh start draws another)
proof() {
	local starts
	starts=$(grep -c '^ck-origin START' "$1")
	[ "$starts" = 1 ] && grep -q "restored from checkpoint" "$1"
}

if ! first_run restored; then
	h_fail loginuid/restored "the first run did not commit a checkpoint" "$W/restored/err"
else
	d=$W/restored
	n=$(wc -l <"$d/out")
	CKPT_TEST_ORIGIN=1 setsid bash -c "$AS" 5151 "$CKRUN" -v --store "$d/s" --job lu-restored --resume -- "$APP" 4 \
		>>"$d/out" 2>>"$d/err"
	rc=$?
	after=$(tail -n +"$((n + 1))" "$d/out" | sed -n 's/^step [0-9]*: loginuid \([0-9]*\) .*/\1/p' | sort -u | tr '\n' ' ')
	if [ "$rc" != 0 ]; then
		h_fail loginuid/restored "the resume exited $rc" "$d/err"
	elif [ "$after" != "4242 " ]; then
		h_fail loginuid/restored "after the resume from login uid 5151 the job read login uid(s) '$after', wanted 4242" "$d/out" "$d/err"
	elif ! proof "$d/err"; then
		h_fail loginuid/restored "the resume was not a restore (origin drawn again)" "$d/err"
	else
		h_pass "loginuid/restored: $(tail -n +"$((n + 1))" "$d/out" | grep -c '^step') steps after the resume from login uid 5151 read 4242"
	fi
fi

if ! command -v setpriv >/dev/null; then
	h_skip loginuid/refused "no setpriv"
elif ! first_run refused; then
	h_fail loginuid/refused "the first run did not commit a checkpoint" "$W/refused/err"
else
	d=$W/refused
	CKPT_TEST_ORIGIN=1 setsid bash -c "$AS" 5151 setpriv --bounding-set -audit_control \
		"$CKRUN" -v --store "$d/s" --job lu-refused --resume -- "$APP" 4 \
		>>"$d/out" 2>>"$d/err"
	rc=$?
	if [ "$rc" = 99 ] && grep -q "process .*loginuid 4242 (the restoring process has 5151)" "$d/err" &&
		[ "$(grep -c '^ck-origin START' "$d/err")" = 1 ]; then
		h_pass "loginuid/refused: exit 99, $(grep -o 'process [0-9]*: .*loginuid 4242.*' "$d/err" | head -1)"
	else
		h_fail loginuid/refused "exit $rc (wanted 99 and a line naming loginuid 4242 and 5151)" "$d/err"
	fi
fi
exit "${H_FAILED:-0}"
