#!/usr/bin/env bash
# Sockets, beyond what the conformance apps show (root: network namespaces).
#  (a) outside peer: a job connected to an echo server outside it is
#      checkpointed, killed and resumed: `ckpt inspect` lists the
#      connection, and the job's next use of it fails with ECONNRESET.
#  (b) another host: the TCP ring runs in network namespace A with its
#      listeners on A's address, is checkpointed and killed, and resumes in
#      namespace B, where that address does not exist: same output as a
#      bare run, and ckrun says where the listeners went.
#  (c) same ports: a parent and child joined by three TCP connections
#      (127.0.0.1 with the listener kept open, 127.0.0.1 with it closed,
#      ::1) are checkpointed, killed at a random moment after the commit
#      and resumed at once: the restored connections have the addresses
#      and ports they had (tests/sockets/tcpnames checks getsockname and
#      getpeername at every step; the killed job's connections in
#      TIME_WAIT hold those ports: root ends them). Output as bare.
#  (d) the sender: in a namespace with 10.88.0.1, a datagram sent by a
#      socket bound to 10.88.0.1:P, beside one bound to 0.0.0.0:P, waits
#      unread at the cut: after the resume it comes from 10.88.0.1:P, as
#      bare (sent again through the wildcard socket it would come from
#      127.0.0.1:P; tests/sockets/udpsender).
#  (e) peer credentials: tests/apps/mp_peercred checkpointed: `ckpt
#      inspect` names, on each of its 20 connected UNIX descriptors and
#      its listener, the process its SO_PEERCRED named; killed and resumed, the app (which checks every
#      end's pid at every step) ends as bare.
#      Again with a ckrun without CAP_SYS_PTRACE (a container given only
#      SYS_ADMIN): the restorer that makes a pair as other ids (the app's
#      child D, as root) must stay writable to ckrun (dumpable).
#  (f) backlog: a TCP listener of backlog 5 (python) checkpointed, killed
#      and resumed: `ss` shows backlog 5 again (ckrun listened with 511
#      before; a UNIX listener's is conformance listen_backlog). The
#      resume proves itself by its port: a fresh start binds another.
#  Every resume must prove it restored (h_proof).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
B=$H_BUILD
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-sock.XXXXXX") || { echo "$0: cannot make a work directory" >&2; exit 1; }
NSA=ckA$$ NSB=ckB$$
PY=${PYTHON:-python3}
FAILED=0
cleanup() {
	pkill -9 -f "$W" 2>/dev/null
	[ -n "${SRV:-}" ] && kill "$SRV" 2>/dev/null
	ip netns del "$NSA" 2>/dev/null
	ip netns del "$NSB" 2>/dev/null
	ip netns del "ckU$$" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
fail() {
	echo "FAIL sockets/$1: $2"
	shift 2
	for f in "$@"; do [ -f "$f" ] && sed 's/^/    | /' "$f" | head -20; done
	FAILED=1
}

# checkpoint_kill CASE ERR PID WHY [MS]: checkpoint 1 asked (SIGUSR2) and
# committed, else CASE fails with WHY and the job is ended (status 1); then,
# MS milliseconds later, the job killed (-9, its whole group) and the run to
# come marked in ERR as a resume.
checkpoint_kill() {
	local name=$1 err=$2 pid=$3 why=$4 ms=${5:-0}
	kill -USR2 "$pid"
	if ! h_wait_line "$err" "checkpoint 1 committed" 10000 "$pid"; then
		fail "$name" "$why" "$err"
		kill -9 -- -"$pid" 2>/dev/null
		return 1
	fi
	if (( ms > 0 )); then
		h_sleep_alive "$pid" "$ms"
	fi
	{ kill -9 -- -"$pid"; wait "$pid"; } 2>/dev/null
	h_run_mark "$err" resume 1
}

# ---- (a) a peer outside the job ----
outside() {
	local port=$(( 20000 + $$ % 20000 )) pid rc i why
	"$PY" -c '
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
def echo(c):
    while True:
        d = c.recv(4096)
        if not d: return
        c.sendall(d)
while True:
    c, _ = s.accept(); threading.Thread(target=echo, args=(c,), daemon=True).start()
' "$port" &
	SRV=$!
	for (( i = 0; i < 100; i++ )); do # until it listens
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
		sleep 0.05
	done
	: >"$W/ext.err"
	h_run_mark "$W/ext.err" new 0
	CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v --store "$W/s1" --job ext -- "$B/tests/sockets/extpeer" "$port" >"$W/ext.out" 2>>"$W/ext.err" &
	pid=$!
	h_wait_origin "$pid" "$W/ext.err" 10000 # (it connects at once, then pings every 100 ms)
	h_sleep_alive "$pid" 200
	checkpoint_kill outside-peer "$W/ext.err" "$pid" "no checkpoint" || return
	timeout -s KILL 60 "$CKPT" inspect --store "$W/s1" ext >"$W/inspect" 2>&1
	# (the restored job writes to its own ext.out, at its saved offset)
	CKPT_TEST_ORIGIN=1 timeout -s KILL 30 "$CKRUN" -v --store "$W/s1" --job ext --resume -- "$B/tests/sockets/extpeer" "$port" \
		1<>"$W/ext.out" 2>>"$W/ext.err"
	rc=$?
	if ! why=$(h_proof "$W/ext.err" 0); then
		fail outside-peer "$why" "$W/ext.err"
	elif ! grep -q "outside the job" "$W/inspect"; then
		fail outside-peer "ckpt inspect does not list the outside connection" "$W/inspect"
	elif [ "$rc" != 3 ] || ! tail -1 "$W/ext.out" | grep -q "ECONNRESET"; then
		fail outside-peer "after restore: status $rc (want 3) and no ECONNRESET" "$W/ext.out" "$W/ext.err"
	else
		echo "PASS sockets/outside-peer: $(grep -m1 'outside the job' "$W/inspect" | sed 's/^ *//'); after restore: $(tail -1 "$W/ext.out")"
	fi
	kill "$SRV" 2>/dev/null
	SRV=
}

# ---- (b) resume in another network namespace ----
netns() {
	local pid rc why
	if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
		echo "SKIP sockets/netns-move: needs root and ip"
		return
	fi
	if ! { ip netns add "$NSA" && ip netns add "$NSB" && ip -n "$NSA" link set lo up &&
		ip -n "$NSB" link set lo up && ip link add "v$NSA" type veth peer name "v$NSB" &&
		ip link set "v$NSA" netns "$NSA" && ip link set "v$NSB" netns "$NSB" &&
		ip -n "$NSA" addr add 10.77.0.1/24 dev "v$NSA" && ip -n "$NSB" addr add 10.77.0.2/24 dev "v$NSB" &&
		ip -n "$NSA" link set "v$NSA" up && ip -n "$NSB" link set "v$NSB" up; } 2>"$W/ns.err"; then
		fail netns-move "cannot set up the namespaces" "$W/ns.err"
		return
	fi
	export MP_RING_HOST=10.77.0.1
	ip netns exec "$NSA" "$B/tests/apps/mp_tcp_ring" 1 >"$W/ring.bare" 2>&1
	: >"$W/ring.err"
	h_run_mark "$W/ring.err" new 0
	CKPT_TEST_ORIGIN=1 setsid ip netns exec "$NSA" "$CKRUN" -v --store "$W/s2" --job ring -- "$B/tests/apps/mp_tcp_ring" 1 \
		>"$W/ring.out" 2>>"$W/ring.err" &
	pid=$!
	# its first line comes once its listeners are up; the nodes fork next
	h_wait_line "$W/ring.out" "^mp_tcp_ring:" 10000 "$pid"
	h_sleep_alive "$pid" 300
	checkpoint_kill netns-move "$W/ring.err" "$pid" "no checkpoint in namespace A" || return
	CKPT_TEST_ORIGIN=1 timeout -s KILL 60 ip netns exec "$NSB" "$CKRUN" -v --store "$W/s2" --job ring --resume -- \
		"$B/tests/apps/mp_tcp_ring" 1 1<>"$W/ring.out" 2>>"$W/ring.err"
	rc=$?
	unset MP_RING_HOST
	if ! why=$(h_proof "$W/ring.err"); then
		fail netns-move "$why" "$W/ring.err"
	elif [ "$rc" != 0 ] || ! cmp -s "$W/ring.bare" "$W/ring.out"; then
		diff "$W/ring.bare" "$W/ring.out" >"$W/ring.diff" 2>&1
		fail netns-move "resumed in namespace B: status $rc or output differs" "$W/ring.diff" "$W/ring.err"
	elif ! grep -q "not free on this host" "$W/ring.err"; then
		fail netns-move "the listeners did not have to move: the test proves nothing" "$W/ring.err"
	else
		echo "PASS sockets/netns-move: 10.77.0.1 in A -> B (10.77.0.2): $(grep -c 'not free on this host' "$W/ring.err") listener(s) re-bound elsewhere, output identical"
	fi
}

# ---- (c) a restored TCP connection keeps its ports ----
samports() {
	local pid rc why
	if [ "$(id -u)" != 0 ]; then
		echo "SKIP sockets/tcp-names: needs root (CAP_NET_ADMIN ends the killed job's TIME_WAIT connections)"
		return
	fi
	"$B/tests/sockets/tcpnames" 30 >"$W/tn.bare" 2>&1
	: >"$W/tn.err"
	h_run_mark "$W/tn.err" new 0
	CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v --store "$W/s3" --job tn -- "$B/tests/sockets/tcpnames" 30 \
		>"$W/tn.out" 2>>"$W/tn.err" &
	pid=$!
	h_wait_line "$W/tn.out" "^step 3:" 10000 "$pid"
	checkpoint_kill tcp-names "$W/tn.err" "$pid" "no checkpoint" $(( RANDOM % 800 )) || return
	CKPT_TEST_ORIGIN=1 timeout -s KILL 60 "$CKRUN" -v --store "$W/s3" --job tn --resume -- \
		"$B/tests/sockets/tcpnames" 30 1<>"$W/tn.out" 2>>"$W/tn.err"
	rc=$?
	if ! why=$(h_proof "$W/tn.err"); then
		fail tcp-names "$why" "$W/tn.err"
	elif [ "$rc" != 0 ] || ! cmp -s "$W/tn.bare" "$W/tn.out"; then
		diff "$W/tn.bare" "$W/tn.out" >"$W/tn.diff" 2>&1
		fail tcp-names "status $rc (want 0) or output differs from bare" "$W/tn.diff" "$W/tn.err"
	else
		echo "PASS sockets/tcp-names: three connections restored at their own addresses and ports, output identical"
	fi
}

# ---- (d) a queued datagram's sender: the exact address before the wildcard ----
sender() {
	local pid rc why ns=ckU$$
	if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
		echo "SKIP sockets/udp-sender: needs root and ip"
		return
	fi
	if ! { ip netns add "$ns" && ip -n "$ns" link set lo up && ip -n "$ns" link add va type veth peer name vb &&
		ip -n "$ns" addr add 10.88.0.1/24 dev va && ip -n "$ns" link set va up && ip -n "$ns" link set vb up; } \
		2>"$W/us.ns"; then
		fail udp-sender "cannot set up the namespace" "$W/us.ns"
		ip netns del "$ns" 2>/dev/null
		return
	fi
	ip netns exec "$ns" "$B/tests/sockets/udpsender" 30 >"$W/us.bare" 2>&1
	: >"$W/us.err"
	h_run_mark "$W/us.err" new 0
	CKPT_TEST_ORIGIN=1 setsid ip netns exec "$ns" "$CKRUN" -v --store "$W/s4" --job us -- \
		"$B/tests/sockets/udpsender" 30 >"$W/us.out" 2>>"$W/us.err" &
	pid=$!
	h_wait_line "$W/us.out" "^udpsender: sent" 10000 "$pid"
	if ! checkpoint_kill udp-sender "$W/us.err" "$pid" "no checkpoint"; then
		ip netns del "$ns"
		return
	fi
	CKPT_TEST_ORIGIN=1 timeout -s KILL 60 ip netns exec "$ns" "$CKRUN" -v --store "$W/s4" --job us --resume -- \
		"$B/tests/sockets/udpsender" 30 1<>"$W/us.out" 2>>"$W/us.err"
	rc=$?
	ip netns del "$ns"
	if ! why=$(h_proof "$W/us.err"); then
		fail udp-sender "$why" "$W/us.err"
	elif ! grep -q "^step 20: hello from 10.88.0.1, the sender's port" "$W/us.bare"; then
		fail udp-sender "the bare run did not read its datagram from 10.88.0.1" "$W/us.bare"
	elif [ "$rc" != 0 ] || ! cmp -s "$W/us.bare" "$W/us.out"; then
		diff "$W/us.bare" "$W/us.out" >"$W/us.diff" 2>&1
		fail udp-sender "status $rc (want 0) or output differs from bare" "$W/us.diff" "$W/us.err"
	else
		echo "PASS sockets/udp-sender: the queued datagram came back from 10.88.0.1, its sender, not the wildcard socket of its port"
	fi
}

# ---- (e) SO_PEERCRED: the processes named in the image, and after a restore ----
# peercred_cycle CASE TAG [PREFIX...]: mp_peercred under PREFIX ckrun,
# checkpointed once it runs, killed, `ckpt inspect`ed into $W/TAG.inspect
# and resumed; sets RC (the resume's status). 1 if no checkpoint came.
peercred_cycle() {
	local name=$1 tag=$2 pid
	shift 2
	: >"$W/$tag.err"
	h_run_mark "$W/$tag.err" new 0
	CKPT_TEST_ORIGIN=1 setsid "$@" "$CKRUN" -v --store "$W/$tag.s" --job "$tag" -- "$H_APPS_BIN/mp_peercred" 1.5 \
		>"$W/$tag.out" 2>>"$W/$tag.err" &
	pid=$!
	h_wait_line "$W/$tag.out" "steps" 10000 "$pid"
	h_sleep_alive "$pid" 300
	checkpoint_kill "$name" "$W/$tag.err" "$pid" "no checkpoint" || return 1
	timeout -s KILL 60 "$CKPT" inspect --store "$W/$tag.s" "$tag" >"$W/$tag.inspect" 2>&1
	CKPT_TEST_ORIGIN=1 timeout -s KILL 60 "$@" "$CKRUN" -v --store "$W/$tag.s" --job "$tag" --resume -- \
		"$H_APPS_BIN/mp_peercred" 1.5 1<>"$W/$tag.out" 2>>"$W/$tag.err"
	RC=$?
}

# peercred_result CASE TAG PASS-LINE: the resume proved itself and ended as
# bare (why not, else PASS-LINE). 0 when it did.
peercred_result() {
	local name=$1 tag=$2 why
	if ! why=$(h_proof "$W/$tag.err"); then
		fail "$name" "$why" "$W/$tag.err"
	elif [ "$RC" != 0 ] || ! cmp -s "$W/pc.bare" "$W/$tag.out"; then
		diff "$W/pc.bare" "$W/$tag.out" >"$W/$tag.diff" 2>&1
		fail "$name" "status $RC (want 0) or output differs from bare" "$W/$tag.diff" "$W/$tag.err"
	else
		echo "PASS sockets/$name: $3"
	fi
}

peercred() {
	local n why
	"$H_APPS_BIN/mp_peercred" 1.5 >"$W/pc.bare" 2>&1
	peercred_cycle peercred pc || return
	# (20 connected descriptors: the children hold copies of P's pairs;
	# and the listener, named by whoever called listen())
	n=$(grep -c "connected in the job.*peer credentials of process" "$W/pc.inspect")
	if ! why=$(h_proof "$W/pc.err"); then
		fail peercred "$why" "$W/pc.err"
	elif [ "$n" != 20 ] || [ "$(grep -c "connected in the job" "$W/pc.inspect")" != 20 ] ||
		! grep -q "(listening) (peer credentials of process" "$W/pc.inspect"; then
		fail peercred "ckpt inspect names the peer's process on $n of the 20 connected descriptors, or not on the listener" "$W/pc.inspect"
	else
		peercred_result peercred pc "ckpt inspect names the process on all 20 connected descriptors and the listener; restored, every end names it again"
	fi
}

# peercred_noptrace: mp_peercred's cycle, ckrun without CAP_SYS_PTRACE.
peercred_noptrace() {
	if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
		echo "SKIP sockets/peercred-noptrace: needs root and setpriv"
		return
	fi
	peercred_cycle peercred-noptrace pn setpriv --bounding-set -sys_ptrace --inh-caps -sys_ptrace -- || return
	peercred_result peercred-noptrace pn "without CAP_SYS_PTRACE too, every end names its process and ids again"
}

# ---- (f) a TCP listener's backlog ----
backlog() {
	local pid port before after why
	if ! command -v ss >/dev/null; then
		fail backlog "ss (iproute2) is not installed"
		return
	fi
	cat >"$W/bl.py" <<'PYEOF'
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(5)
print(s.getsockname()[1], flush=True)
for i in range(100):
    time.sleep(0.1)
print("done", flush=True)
PYEOF
	: >"$W/bl.err"
	h_run_mark "$W/bl.err" new 0
	CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v --store "$W/s6" --job bl -- "$PY" "$W/bl.py" >"$W/bl.out" 2>>"$W/bl.err" &
	pid=$!
	h_wait_line "$W/bl.out" "^[0-9]" 10000 "$pid"
	port=$(head -1 "$W/bl.out")
	before=$(ss -Hltn "sport = :$port" | awk '{print $3}')
	checkpoint_kill backlog "$W/bl.err" "$pid" "no checkpoint" || return
	CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v --store "$W/s6" --job bl --resume -- "$PY" "$W/bl.py" 1<>"$W/bl.out" \
		2>>"$W/bl.err" &
	pid=$!
	h_wait_line "$W/bl.err" "restored from checkpoint" 20000 "$pid"
	after=$(ss -Hltn "sport = :$port" | awk '{print $3}')
	{ kill -9 -- -"$pid"; wait "$pid"; } 2>/dev/null
	if ! grep -q "restored from checkpoint" "$W/bl.err"; then
		fail backlog "the job was not restored" "$W/bl.err"
	elif [ "$before" != 5 ] || [ "$after" != 5 ]; then
		fail backlog "backlog $before before the checkpoint, $after after the restore (want 5 and 5)" "$W/bl.err"
	else
		echo "PASS sockets/backlog: the TCP listener listens with backlog 5 again after the restore"
	fi
}

outside
netns
samports
sender
peercred
peercred_noptrace
backlog
exit "$FAILED"
