#!/usr/bin/env bash
# Programs that lose libckpt's inherited channel still belong to the job:
# a Python program's subprocess.run children (close_fds: every inherited
# descriptor closed before exec) attach through ckrun's attach socket, so
# a checkpoint taken while a child runs holds both processes, and a
# process of another pid namespace is not heard on that socket.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
top=$H_TOP
B=$H_BUILD
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-attach.XXXXXX") || { echo "$0: cannot make a work directory" >&2; exit 1; }
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT
PY=${PYTHON:-/usr/bin/python3}
FAILED=0

CKPT_TEST_ORIGIN=1 "$CKRUN" -v --store "$W/s" --job sub -- "$PY" "$top/tests/apps/py_subproc.py" 1 \
	>"$W/out" 2>"$W/err" &
pid=$!
# From its first line on, a child is running nearly all the time; three
# rounds 0.4 s apart (each waited for) must catch one at least once.
h_wait_line "$W/out" "^py_subproc:" 15000 "$pid"
for n in 1 2 3; do
	h_sleep_alive "$pid" 400 || break
	kill -USR2 "$pid" 2>/dev/null
	h_wait_line "$W/err" "checkpoint $n (committed|of job .* failed)" 30000 "$pid" || break
done
h_wait "$pid" 120000
rc=$?
if [ "$rc" != 0 ]; then
	echo "FAIL attach/subprocess: ckrun exited $rc"
	FAILED=1
elif grep -q "without libckpt" "$W/err" || ! grep -q "committed: 2 process(es)" "$W/err"; then
	echo "FAIL attach/subprocess: no checkpoint held the Python child"
	sed 's/^/    | /' "$W/err"
	FAILED=1
else
	echo "PASS attach/subprocess: $(grep -c 'committed: 2 process(es)' "$W/err") checkpoint(s) held parent and child"
fi

# A stranger (this shell's pid namespace) connecting to the attach socket
# is refused and does not disturb the job.
CKPT_TEST_ORIGIN=1 "$CKRUN" -v --store "$W/s2" --job stranger -- "$B/tests/apps/sleeper" 1 \
	>"$W/out2" 2>"$W/err2" &
pid=$!
h_wait_line "$W/err2" "^ck-origin START" 10000 "$pid" # the job runs
att=$(tr '\0' '\n' < "/proc/$(pgrep -f "^$B/tests/apps/sleeper" | head -1)/environ" 2>/dev/null |
	sed -n 's/^CKPT_ATTACH=//p')
if [ -z "$att" ]; then
	echo "FAIL attach/stranger: the job has no CKPT_ATTACH"
	FAILED=1
else
	"$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect("\0" + sys.argv[1])
s.settimeout(3)
try:
    s.send(b"\3\0\0\0" + bytes(60))
    print("answer" if s.recv(16) else "closed")
except (BrokenPipeError, ConnectionResetError):
    print("closed")
except Exception as e:
    print("error", e)
' "$att" >"$W/stranger" 2>&1
	kill -USR2 "$pid"
	h_wait "$pid" 120000
	rc=$?
	if [ "$rc" = 0 ] && grep -q closed "$W/stranger" && grep -q "checkpoint 1 committed: 1 process" "$W/err2"; then
		echo "PASS attach/stranger: refused ($(cat "$W/stranger")), the job checkpointed and ended normally"
	else
		echo "FAIL attach/stranger: rc $rc, stranger: $(cat "$W/stranger")"
		sed 's/^/    | /' "$W/err2"
		FAILED=1
	fi
fi
exit "$FAILED"
