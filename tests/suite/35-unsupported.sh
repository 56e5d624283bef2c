#!/usr/bin/env bash
# State this version cannot checkpoint: the round fails with one line
# naming it, ckrun says the job keeps running, and the job's output is
# what a bare run prints.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
B=$H_BUILD
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-unsup.XXXXXX")
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT

# refused NAME REGEX PROGRAM... [with a hook run after start: HOOK env var]
refused() {
	local name=$1 re=$2 pid job
	shift 2
	"$@" >"$W/$name.bare"
	: >"$W/$name.err"
	h_run_mark "$W/$name.err" new 0
	CKPT_TEST_ORIGIN=1 "$CKRUN" --store "$W/store" --job "$name" -- "$@" >"$W/$name.out" 2>>"$W/$name.err" &
	pid=$!
	h_wait_origin "$pid" "$W/$name.err" 10000 # the job runs its main
	h_sleep_alive "$pid" 200                  # and sets up its state
	[ -n "${HOOK:-}" ] && $HOOK "$pid"
	kill -USR2 "$pid"
	h_wait_line "$W/$name.err" "keeps running" 15000 "$pid"
	[ -n "${UNHOOK:-}" ] && $UNHOOK
	local t=0
	while kill -0 "$pid" 2>/dev/null && (( t < 600 )); do # a hang fails, never blocks
		sleep 0.1
		t=$((t + 1))
	done
	kill -0 "$pid" 2>/dev/null && { echo "ckrun: test: the job hung; killed" >>"$W/$name.err"; pkill -9 -P "$pid"; kill -9 "$pid"; }
	wait "$pid"
	local rc=$?
	if [ $rc -eq 0 ] && grep -Eq "$re" "$W/$name.err" && grep -q "keeps running" "$W/$name.err" &&
		cmp -s "$W/$name.bare" "$W/$name.out" && [ "$(grep -c . "$W/$name.err")" -ge 1 ]; then
		echo "PASS unsupported/$name: $(grep -Em1 "$re" "$W/$name.err")"
	else
		echo "FAIL unsupported/$name (rc $rc)"
		sed 's/^/    /' "$W/$name.err"
	fi
}

refused io_uring 'io_uring' "$B/tests/unsupported/uring"
refused fdpass 'descriptors in flight' "$B/tests/unsupported/fdpass"
refused sysvsem 'System V semaphores' "$B/tests/unsupported/sysvsem"
refused inotify 'process [0-9]+: descriptor [0-9]+ is an inotify instance: its watches are not restored' "$B/tests/unsupported/fdwatch" inotify
refused lease 'process [0-9]+: descriptor [0-9]+ \(.*/f\) holds a lease \(F_SETLEASE\): leases are not restored' "$B/tests/unsupported/fdwatch" lease
refused many-fds 'more than 1024 open descriptors: a checkpoint holds at most 1024' "$B/tests/unsupported/manyfds"
refused many-threads 'more than 512 threads: a checkpoint holds at most 512' "$B/tests/unsupported/manythreads"
# Pseudo-terminal pairs of the job's own: what waits unread cannot be taken
# without consuming it (FIONREAD tells how much), nor a master's status.
refused pty-toslave 'process [0-9]+: descriptor [0-9]+ \(/dev/pts/[0-9]+, pseudo-terminal slave\): 8 bytes written to its master not read yet' \
	"$B/tests/unsupported/ptyunread" toslave
refused pty-tomaster 'process [0-9]+: descriptor [0-9]+ \(pseudo-terminal master of /dev/pts/[0-9]+\): 8 bytes written to its slave not read yet' \
	"$B/tests/unsupported/ptyunread" tomaster
refused pty-noslave 'process [0-9]+: descriptor [0-9]+ \(pseudo-terminal master of /dev/pts/[0-9]+\): no process of the job holds its slave' \
	"$B/tests/unsupported/ptyunread" noslave
refused pty-pktstatus 'process [0-9]+: descriptor [0-9]+ \(pseudo-terminal master of /dev/pts/[0-9]+\): a packet-mode status not read yet' \
	"$B/tests/unsupported/ptyunread" pktstatus
# A controlling terminal a restore could not make again as it was.
refused pty-ctty-nofd 'process [0-9]+: leads the session of its controlling terminal /dev/pts/[0-9]+ but holds no descriptor of it' \
	"$B/tests/unsupported/ptyctty" nofd
refused pty-ctty-notty 'process [0-9]+: no controlling terminal while its session.s leader \(process [0-9]+\) has one' \
	"$B/tests/unsupported/ptyctty" notty
# seccomp: a filter's rules cannot be read back to be installed again; a
# strict-mode thread cannot even park. Refused before anything is asked.
refused seccomp-filter 'process [0-9]+ of the job \(thread [0-9]+ here\) is in seccomp filter mode' \
	"$B/tests/unsupported/seccomp_filter"
refused seccomp-strict 'process [0-9]+ of the job \(thread [0-9]+ here\) is in seccomp strict mode' \
	"$B/tests/unsupported/seccomp_strict"

# A debugger attached from outside: the job is traced.
attach() { # ckrun pid -> strace on the job's main process
	local init job
	init=$(pgrep -P "$1" | head -1)
	job=$(pgrep -P "$init" | head -1)
	strace -p "$job" -o /dev/null 2>/dev/null &
	STRACE=$!
	local t=0 # until the job is traced
	while (( t++ < 250 )) && ! awk '/^TracerPid:/ { exit $2 == 0 }' "/proc/$job/status" 2>/dev/null; do
		sleep 0.02
	done
}
detach() { kill "$STRACE" 2>/dev/null; wait "$STRACE" 2>/dev/null; }
# A process of the job stopped (SIGSTOP) cannot park: named, not waited for.
stop_one() { # a process of the job other than its main one
	local p
	for p in $(pgrep -f "$B/tests/apps/forktree"); do
		if awk '/^NSpid:/ { exit !(NF == 3 && $3 > 2) }' "/proc/$p/status" 2>/dev/null; then
			STOPPED=$p
			kill -STOP "$p"
			return
		fi
	done
}
cont_one() { [ -n "${STOPPED:-}" ] && kill -CONT "$STOPPED"; }
HOOK=stop_one UNHOOK=cont_one refused stopped 'is stopped' "$B/tests/apps/forktree" 0.7

if command -v strace >/dev/null; then
	HOOK=attach UNHOOK=detach refused traced 'traced \(ptrace\)' "$B/tests/apps/sleeper" 0.6
else
	echo "SKIP unsupported/traced: strace is not installed"
fi
