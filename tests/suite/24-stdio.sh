#!/usr/bin/env bash
# After a restart the job's stdin/stdout/stderr are the new ckrun's. A
# stdout that was a regular file (`ckrun ... > log`) is the one exception
# kept: when the new ckrun's stdout is that same file, still holding the
# bytes up to the saved offset (`1<> log`, `>> log`), the job goes on
# writing at its offset, so the lines it wrote after the checkpoint are
# written over rather than twice. Cases, each with memgrow (which flushes
# its first lines, then checkpoints after them):
#   elsewhere  resumed with stdout to another file: that file gets the rest
#   same       resumed with 1<> the same file, whose bytes before the saved
#              offset were replaced by '#': they stay (a fresh start would
#              write over them), the rest equals the bare run's
#   truncated  resumed with > the same file (emptied): the rest, from 0
#   pipe       resumed into a pipe: the pipe gets the rest
#   chain-pipe, chain-file  a job writing to stdout and stderr is stopped
#              (SIGTERM: checkpoint and exit 75) and resumed five times in
#              a row, stdout through a new pipe each time (or appended to
#              one file), stderr appended to one file: every byte of both,
#              once and in order, and the job never blocks
#   shared     the first run's stdin, stdout and stderr are one open file
#              (as a login shell hands down its terminal; here a FIFO
#              opened once), the resume's are /dev/null, a file and a
#              file: the job's stdout and stderr go to the new files, not
#              with its stdin to /dev/null
#   inherited  descriptors the caller of ckrun holds beyond stdio (7, and
#              5000 where the hard limit allows: above what ckrun's init
#              once closed) do not reach the job (its checkpoint could not
#              hold them): the job lists only 0, 1, 2 and its own
#   inherited-old-kernel  the same with close_range failing ENOSYS (a
#              kernel before 5.9), the caller's descriptor above 65535
#              where the hard limit allows
# "the rest" is the bare run's output after the saved offset, which
# `ckpt inspect` prints for descriptor 1. Every resume must also prove it
# restored (h_proof: no fresh start of the job, ckrun's restore line, the
# first run's origin at the end).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

ARGS=(3 16 32) # two phases of 6 s: the second outlasts a checkpoint on a loaded machine

# run1 CASE: first run into $W/CASE/o1, one checkpoint after the first
# flushed lines, then kill -9 of the group. Sets OFF to the saved offset.
run1() {
	local d=$H_WORK/$1
	mkdir -p "$d"
	: >"$d/err"
	OFF=none
	h_start new "$d/o1" "$d/err" --store "$d/s" --job mg
	if ! h_wait_line "$d/o1" 'phase 1 done' 20000 "$H_PID"; then
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" 'checkpoint 1 committed' 30000 "$H_PID"
	if ! h_alive "$H_PID"; then
		h_fail "stdio/$1" "the job ended before the kill: nothing to prove" "$d/err"
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	OFF=$(timeout -s KILL 60 "$CKPT" inspect --store "$d/s" mg 2>/dev/null |
		awk '$1 == 1 && $2 == "file" { sub(/^@/, "", $5); print $5; exit }')
	OFF=${OFF:-none}
}

# resume CASE MODE FILE: resumes into FILE (h_start MODE) and waits.
resume() {
	local d=$H_WORK/$1
	h_start "$2" "$3" "$d/err" --store "$d/s" --job mg --resume
	h_wait "$H_PID" 120000
	RC=$?
	wait # the pipe's reader, if any
}

# check CASE GOT WANT: GOT must equal WANT, the job must have restored.
check() {
	local c=$1 got=$2 want=$3 d=$H_WORK/$1 why
	if [ "$OFF" = none ] || [ "$OFF" = 0 ]; then
		h_fail "stdio/$c" "no checkpoint with a saved stdout offset (got '$OFF')" "$d/err"
	elif [ "$RC" != 0 ]; then
		h_fail "stdio/$c" "the resumed job exited $RC" "$d/err"
	elif ! cmp -s "$want" "$got"; then
		diff "$want" "$got" >"$d/diff" 2>&1
		h_fail "stdio/$c" "output after the restore differs from the bare run's after byte $OFF" "$d/diff" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "stdio/$c" "$why" "$d/err"
	else
		h_pass "stdio/$c: the rest after byte $OFF went to the new ckrun's stdout"
	fi
}

# chain CASE MODE: the stop-and-resume chain of the job chatter, its stdout
# through h_start MODE (pipe: a new pipe into OUT each run; resume: the
# same file, appended to, `1<>`), stderr appended to ERR.
chain() {
	local c=$1 mode=$2 d=$H_WORK/$1 i n rc why
	mkdir -p "$d"
	: >"$d/out"
	: >"$d/err"
	H_CMD=("$H_BUILD/tests/stdio/chatter" 3000)
	"${H_CMD[@]}" >"$d/bare.out" 2>"$d/bare.err"
	for (( i = 0; i <= 6; i++ )); do
		if (( i == 0 )); then
			h_start "$mode" "$d/out" "$d/err" --store "$d/s" --job chat
			h_wait_origin "$H_PID" "$d/err" 10000
		else
			h_start "$mode" "$d/out" "$d/err" --store "$d/s" --job chat --resume
		fi
		(( i == 6 )) && break
		# some progress in this run, then a stop
		n=$(grep -c '^err ' "$d/err")
		h_wait_line_count "$d/err" '^err ' $(( n + 150 )) 20000 "$H_PID"
		kill -TERM "$H_PID"
		h_wait "$H_PID" 60000
		rc=$?
		wait # the pipe's reader
		if [ "$rc" != 75 ]; then
			h_fail "stdio/$c" "stop $(( i + 1 )): ckrun exited $rc, want 75" "$d/err"
			return
		fi
	done
	h_wait "$H_PID" 120000
	rc=$?
	wait
	grep '^err ' "$d/err" >"$d/job.err"
	if [ "$rc" != 0 ]; then
		h_fail "stdio/$c" "the last run exited $rc (a job blocked on a pipe nobody reads times out)" "$d/err"
	elif ! cmp -s "$d/bare.out" "$d/out"; then
		diff "$d/bare.out" "$d/out" >"$d/diff" 2>&1
		h_fail "stdio/$c" "stdout after six runs differs from a bare run's" "$d/diff"
	elif ! cmp -s "$d/bare.err" "$d/job.err"; then
		diff "$d/bare.err" "$d/job.err" >"$d/diff" 2>&1
		h_fail "stdio/$c" "the job's stderr after six runs differs from a bare run's" "$d/diff"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "stdio/$c" "$why" "$d/err"
	else
		h_pass "stdio/$c: five stops and resumes, stdout ($(wc -c <"$d/out") bytes) and stderr complete and in order"
	fi
}

# shared: chatter's 0, 1 and 2 one open file (a FIFO read by cat) in the
# first run, killed after a checkpoint; resumed with three separate ones.
shared() {
	local c=shared d=$H_WORK/shared rc why n catpid
	mkdir -p "$d"
	: >"$d/err"
	H_CMD=("$H_BUILD/tests/stdio/chatter" 3000)
	"${H_CMD[@]}" >"$d/bare.out" 2>"$d/bare.err"
	mkfifo "$d/fifo"
	cat "$d/fifo" >"$d/first" &
	catpid=$!
	h_run_mark "$d/err" new 0
	CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v --store "$d/s" --job sh -- "${H_CMD[@]}" <>"$d/fifo" >&0 2>&0 &
	H_PID=$!
	H_PGIDS+=("$H_PID")
	if ! h_wait_line "$d/first" '^ck-origin START' 10000 "$H_PID" ||
		! h_wait_line_count "$d/first" '^err ' 100 20000 "$H_PID"; then
		h_fail "stdio/$c" "the first run did not start writing" "$d/first"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; kill "$catpid"; } >/dev/null 2>&1
		return
	fi
	kill -USR2 "$H_PID"
	h_wait_line "$d/first" 'checkpoint 1 committed' 30000 "$H_PID"
	if ! h_alive "$H_PID"; then
		h_fail "stdio/$c" "the job ended before the kill: nothing to prove" "$d/first"
		kill "$catpid" 2>/dev/null
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	wait "$catpid"
	cat "$d/first" >>"$d/err" # the first run's stderr, for h_proof
	if ! grep -q 'checkpoint 1 committed' "$d/first"; then
		h_fail "stdio/$c" "checkpoint 1 did not commit" "$d/first"
		return
	fi
	: >"$d/out"
	n=$(h_size "$d/err")
	h_start new "$d/out" "$d/err" --store "$d/s" --job sh --resume
	h_wait "$H_PID" 120000
	rc=$?
	tail -c "+$(( n + 1 ))" "$d/err" | grep '^err ' >"$d/job.err"
	if [ "$rc" != 0 ]; then
		h_fail "stdio/$c" "the resumed job exited $rc" "$d/err"
	elif ! [ -s "$d/out" ] || ! tail -n 1 "$d/out" | grep -qx 'out end'; then
		h_fail "stdio/$c" "the job's stdout did not reach the new ckrun's stdout (it went with stdin)" "$d/out" "$d/err"
	elif [ "$(tail -n 1 "$d/job.err")" != "err end" ] || [ "$(wc -l <"$d/job.err")" -lt 2 ]; then
		h_fail "stdio/$c" "the job's stderr did not reach the new ckrun's stderr" "$d/err"
	elif ! cmp -s <(tail -n "$(wc -l <"$d/out")" "$d/bare.out") "$d/out"; then
		h_fail "stdio/$c" "stdout after the restore is not the end of the bare run's" "$d/out"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "stdio/$c" "$why" "$d/err"
	else
		h_pass "stdio/$c: stdin, stdout and stderr one open file at the checkpoint; after the restore each the new ckrun's"
	fi
}

inherited() {
	local d=$H_WORK/inherited out high=5000
	mkdir -p "$d"
	(( $(ulimit -Hn) > high )) || high=1000
	# shellcheck disable=SC2016 # (expanded by the inner shell)
	out=$(bash -c 'ulimit -n "$(ulimit -Hn)"; exec 7>"$1/f7"; eval "exec $3>\"\$1/fhigh\""
		exec "$2" --store "$1/s" --job inh -- ls /proc/self/fd' _ "$d" "$CKRUN" "$high" 2>"$d/err")
	out=$(echo $out) # (one line)
	if [ "$out" = "0 1 2 3" ]; then
		h_pass "stdio/inherited: descriptors 7 and $high of ckrun's caller are not the job's (it lists $out)"
	else
		h_fail stdio/inherited "the job lists descriptors '$out' (want 0 1 2 3: ls's own directory)" "$d/err"
	fi
}

# inherited-old-kernel: the same where close_range fails ENOSYS (a kernel
# before 5.9; tests/tools/nosyscall), with the caller's descriptor as high
# as the hard limit lets it be: above 65535 where it allows (the fallback
# once stopped there). 436 is close_range's number on x86-64.
inherited_old_kernel() {
	local d=$H_WORK/inherited-old out high nsc=$H_BUILD/tests/tools/nosyscall
	mkdir -p "$d"
	high=$(( $(ulimit -Hn) - 1 ))
	(( high > 70000 )) && high=70000
	# shellcheck disable=SC2016 # (expanded by the inner shell)
	out=$(bash -c 'ulimit -n "$(ulimit -Hn)"; exec 7>"$1/f7"; eval "exec $3>\"\$1/fhigh\""
		exec "$4" 436 "$2" --store "$1/s" --job inh -- ls /proc/self/fd' _ "$d" "$CKRUN" "$high" "$nsc" 2>"$d/err")
	out=$(echo $out) # (one line)
	if [ "$out" = "0 1 2 3" ]; then
		h_pass "stdio/inherited-old-kernel: without close_range, descriptors 7 and $high of ckrun's caller are not the job's (it lists $out)"
	else
		h_fail stdio/inherited-old-kernel "without close_range, the job lists descriptors '$out' (want 0 1 2 3)" "$d/err"
	fi
}

main() {
	local d
	h_seed_init >/dev/null
	h_init stdio
	h_app_cmd memgrow "${ARGS[@]}"
	h_run_bare memgrow "$H_WORK/bare" "$H_WORK/bare.err" 120 >/dev/null
	[ -s "$H_WORK/bare" ] || { h_fail stdio "bare run of memgrow printed nothing"; return 1; }

	run1 elsewhere
	d=$H_WORK/elsewhere
	resume elsewhere new "$d/o2"
	tail -c "+$(( ${OFF/none/0} + 1 ))" "$H_WORK/bare" >"$d/want"
	if grep -q 'phase 2 done' "$d/o1"; then
		h_fail stdio/elsewhere "the restored job wrote into the first run's file" "$d/o1"
	else
		check elsewhere "$d/o2" "$d/want"
	fi

	run1 same
	d=$H_WORK/same
	if [ "$OFF" != none ]; then
		# What precedes the offset is the first run's: mark it. The
		# restored job writes at its offset and leaves the marks.
		head -c "$OFF" /dev/zero | tr '\0' '#' | dd of="$d/o1" conv=notrunc status=none
		{ head -c "$OFF" /dev/zero | tr '\0' '#'; tail -c "+$(( OFF + 1 ))" "$H_WORK/bare"; } >"$d/want"
	fi
	resume same resume "$d/o1"
	check same "$d/o1" "$d/want"

	run1 truncated
	d=$H_WORK/truncated
	resume truncated new "$d/o1"
	tail -c "+$(( ${OFF/none/0} + 1 ))" "$H_WORK/bare" >"$d/want"
	check truncated "$d/o1" "$d/want"

	run1 pipe
	d=$H_WORK/pipe
	: >"$d/o2"
	resume pipe pipe "$d/o2"
	tail -c "+$(( ${OFF/none/0} + 1 ))" "$H_WORK/bare" >"$d/want"
	check pipe "$d/o2" "$d/want"

	chain chain-pipe pipe
	chain chain-file resume
	shared
	inherited
	inherited_old_kernel
	return "$H_FAILED"
}

main "$@"
