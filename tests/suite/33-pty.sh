#!/usr/bin/env bash
# Bytes waiting in a pseudo-terminal pair the job made (NOTES.md,
# "Pseudo-terminals"):
#   pty/waiting  pty_queued hold: two pairs hold, for 3 s, input the slave
#       has not read (canonical: two lines, a line ended by EOF, an EOF
#       alone, a line not ended yet; raw: NUL, 0xff, control bytes) and
#       output the master has not read (the input's echo, the slave's own
#       line; raw bytes). A checkpoint in that window must commit (the
#       previous build refused it: "bytes written to its master not read
#       yet"), then kill -9 and --resume: the job reads every byte where it
#       was (pty_queued checks each read and the termios) and ends with a
#       bare run's output, its resume proven a restore (h_proof).
#   pty/checkpoint-only  the same checkpoint without a kill: the bytes a
#       round takes and puts back are where they were for the running job.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

# waiting NAME KILL: a checkpoint in the window; KILL=1 kills and resumes.
waiting() {
	local name=$1 kill=$2 d=$H_WORK/$1 app=$H_BUILD/tests/apps/pty_queued rc why
	mkdir -p "$d"
	"$app" hold >"$d/bare"
	: >"$d/err"
	H_CMD=("$app" hold)
	h_start new "$d/out" "$d/err" --store "$d/st" --job pq
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 500 # the bytes are written and wait
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/err" "checkpoint 1 (committed|of job pq failed)|keeps running" 15000 "$H_PID" ||
	   ! grep -q "checkpoint 1 committed" "$d/err"; then
		h_fail pty/$name "no checkpoint was committed with bytes waiting" "$d/err"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	if (( kill )); then
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		h_start resume "$d/out" "$d/err" --store "$d/st" --job pq --resume
	fi
	h_wait "$H_PID" 30000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail pty/$name "the job exited $rc" "$d/out" "$d/err"
	elif ! cmp -s "$d/bare" "$d/out"; then
		h_fail pty/$name "output differs from a bare run" "$d/out" "$d/err"
	elif (( kill )) && ! why=$(h_proof "$d/err"); then
		h_fail pty/$name "$why" "$d/err"
	else
		h_pass "pty/$name: $(grep -m1 'checkpoint 1 committed' "$d/err" | cut -c1-90)"
	fi
}

main() {
	h_init pty
	if ! h_have_ckrun; then
		h_skip pty "ckrun is not built ($CKRUN); run make"
		return 0
	fi
	waiting waiting 1
	waiting checkpoint-only 0
	return "$H_FAILED"
}

main "$@"
