#!/usr/bin/env bash
# ckrun under the descriptor limits it may be given (NOTES.md, "Shared-memory
# objects" under Processes):
#   nofile/soft  with a soft RLIMIT_NOFILE of 1024 below its hard limit
#       (common), ckrun raises its own to the hard limit: the job must
#       still see 1024 (Python prints getrlimit, bare and under ckrun).
#   nofile/hard-1024-shm  with a hard limit of 1024 (some containers),
#       shm_many's 220 shared memory objects: a checkpoint, kill -9 and
#       --resume (proven) must give the bare output (the restorer's
#       numbers for the objects, 1001 and up, passed the hard limit and
#       the restore failed).
#   nofile/hard-1024-shm-420  the same with 400 shared anonymous mappings
#       and the 20 files: 420 objects in each of two processes, which the
#       round refused when it counted three numbers per descriptor and
#       object (about 1340 where 914 are used).
#   nofile/hard-1024-refused  the same limit and 600 shared mappings: the
#       round refuses in one line naming the limit (a restore would need
#       more descriptors), the job runs on to the bare output.
#   nofile/hard-1024-fds  the same limit and fd_many holding about 650
#       descriptors, 300 of them pipe ends: checkpoint, kill -9, --resume
#       (the restorer parked each descriptor at a third number, and the
#       restore failed: "above the restorer's RLIMIT_NOFILE").
#   nofile/hard-1024-fds-refused  about 1000 descriptors: the round refuses
#       (a restore's ckrun would hold them, the pipes' objects and its
#       own, past 1024).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

PY=${PYTHON:-python3}

soft() {
	local d=$H_WORK/soft bare got
	mkdir -p "$d"
	if (( $(ulimit -Hn) <= 1024 )) && [ "$(ulimit -Hn)" != unlimited ]; then
		h_skip nofile/soft "the hard RLIMIT_NOFILE is not above 1024 here"
		return
	fi
	bare=$(ulimit -Sn 1024 && "$PY" -c 'import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])')
	got=$(ulimit -Sn 1024 && "$CKRUN" --store "$d/st" --job soft -- "$PY" -c \
		'import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])' 2>"$d/err")
	if [ "$bare" = 1024 ] && [ "$got" = "$bare" ]; then
		h_pass "nofile/soft: the job's soft limit $got, as bare"
	else
		h_fail nofile/soft "the job's soft limit '$got', bare '$bare'" "$d/err"
	fi
}

# hard_cycle NAME JOB APP ARGS...: APP under a hard limit of 1024,
# checkpointed, killed, resumed (proven) to the bare output.
hard_cycle() {
	local name=$1 job=$2 d=$H_WORK/$1 rc why
	shift 2
	mkdir -p "$d"
	(ulimit -n 1024 && "$@") >"$d/bare"
	: >"$d/err"
	H_CMD=("$@")
	ulimit -n 1024 # this function's subshell only (called with ( ))
	h_start new "$d/out" "$d/err" --store "$d/st" --job "$job"
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 1000
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/err" "checkpoint 1 (committed|of job $job failed)" 30000 "$H_PID" ||
	   ! grep -q "checkpoint 1 committed" "$d/err"; then
		h_fail "nofile/$name" "no checkpoint was committed" "$d/err"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	h_start resume "$d/out" "$d/err" --store "$d/st" --job "$job" --resume
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail "nofile/$name" "the resumed job exited $rc" "$d/out" "$d/err"
	elif ! cmp -s "$d/bare" "$d/out"; then
		h_fail "nofile/$name" "output differs from a bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "nofile/$name" "$why" "$d/err"
	else
		h_pass "nofile/$name: $(grep -m1 'restored from' "$d/err" | cut -c1-80)"
	fi
}

# hard_refused NAME REGEX APP ARGS...: APP under a hard limit of 1024; the
# round refuses in one line matching REGEX and the job runs on to the bare
# output.
hard_refused() {
	local name=$1 re=$2 d=$H_WORK/$1
	shift 2
	mkdir -p "$d"
	(ulimit -n 1024 && "$@") >"$d/bare"
	: >"$d/err"
	ulimit -n 1024
	H_CMD=("$@")
	h_start new "$d/out" "$d/err" --store "$d/st" --job "$name"
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 300
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" "keeps running" 15000 "$H_PID"
	h_wait "$H_PID" 30000
	if ! grep -Eq "$re; the job keeps running" "$d/err"; then
		h_fail "nofile/$name" "no refusal naming the limit" "$d/err"
	elif ! cmp -s "$d/bare" "$d/out"; then
		h_fail "nofile/$name" "output differs from a bare run" "$d/out" "$d/err"
	else
		h_pass "nofile/$name: $(grep -Eo "$re" "$d/err" | head -1)"
	fi
}

main() {
	h_init nofile
	if ! h_have_ckrun; then
		h_skip nofile "ckrun is not built ($CKRUN); run make"
		return 0
	fi
	soft
	(hard_cycle hard-1024-shm hs "$H_BUILD/tests/apps/shm_many" 2; exit "$H_FAILED") || H_FAILED=1
	(hard_cycle hard-1024-shm-420 hs "$H_BUILD/tests/apps/shm_many" 2 400; exit "$H_FAILED") || H_FAILED=1
	(hard_refused hard-1024-refused "needs about [0-9]* descriptors at once, more than ckrun's hard RLIMIT_NOFILE \\(1024\\)" \
		"$H_BUILD/tests/unsupported/manyshm" 600; exit "$H_FAILED") || H_FAILED=1
	(hard_cycle hard-1024-fds hf "$H_BUILD/tests/apps/fd_many" 1 250; exit "$H_FAILED") || H_FAILED=1
	(hard_refused hard-1024-fds-refused "process [0-9]+ holds [0-9]+ descriptors \\(with the shared memory objects it maps\\) and the job's processes share [0-9]+ objects \\(pipe ends, FIFOs, deleted files, memfds, terminals, shared descriptions, shared memory\\): a restore needs about [0-9]+ descriptors at once, more than ckrun's hard RLIMIT_NOFILE \\(1024\\)" \
		"$H_BUILD/tests/apps/fd_many" 1 600; exit "$H_FAILED") || H_FAILED=1
	return "$H_FAILED"
}

main "$@"
