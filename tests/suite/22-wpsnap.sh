#!/usr/bin/env bash
# The write-protect snapshot (launcher/ckrun/wpread.c, libckpt/wpsnap.c):
#   used      with --snapshot wp, the job's writes during a round are served
#             (faults > 0), and a restore from it gives the bare output;
#   late-events  the same with the kernel's layout events taking effect
#             late (CKPT_TEST_WP_EVENT_DELAY_MS): rounds must be repeated;
#   shared-anon  a job of five processes sharing anonymous memory: its
#             rounds write-protect too;
#   churn     a job that unmaps, discards and moves memory all the time: a
#             round that meets such a change is repeated with a fork, and
#             the restored output is still the bare one;
#   own-uffd  without /dev/userfaultfd (CKPT_TEST_NO_UFFD_DEV) root's job,
#             which has no user namespace, arms its own userfaultfd(2):
#             rounds still write-protect (a user's job cannot: every round
#             forks, saying why; tests/suite/26-user.sh);
#   default   without --snapshot, rounds write-protect (the default);
#   spill     with no memory for blocks the job rewrites first
#             (--snapshot-memory 0) they go through the spill file, or,
#             where it cannot be created, the job's writes wait;
#   fork      with --snapshot fork no round write-protects;
#   prearm-*  the pre-armed cut (libckpt/wpprearm.c): every write-protect
#             commit was protected while the job ran and only what it wrote
#             meanwhile was protected again at the cut; with the job held
#             running, pre-armed, for 150 ms before each cut (its writes and
#             layout changes of that window must not reach the image), and
#             with the pre-armed cut off (CKPT_TEST_NO_PREARM: all at the
#             cut, as on kernels without PAGEMAP_SCAN); and a job forking
#             children all the time while the pre-armed userfaultfd is open
#             (CKPT_TEST_PREARM_OPEN_MS holds it 300 ms): a child forked
#             then must not keep it (its next round would refuse it).
#   refused-remap  every round refused by a child (an AIO context made by a bare system call) while
#             the pre-armed parent maps pages anew inside its protected
#             memory and takes its request late (CKPT_TEST_TAKE_DELAY_MS):
#             the round's end must leave nothing of it protected; the
#             job ends as the bare run does (it hung for good before).
# The conformance suite runs a set of apps with --snapshot fork too (their
# .desc: variants=fork); this suite checks that each path is the one taken.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
B=$H_BUILD
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-wpsnap.XXXXXX") || { echo "$0: cannot make a work directory" >&2; exit 1; }
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT
APPS=$B/tests/apps

# run NAME APP SCALE KIND [ckrun options...]: the app bare, then under
# ckrun with checkpoints every 200 ms until it ends, then a restore from
# its newest checkpoint but one (run to the end). Checks both outputs.
# KIND: wp (every commit by write protection, some faults served), spill and
# nospill (as wp, with and without blocks through the spill file), fork
# (every commit forked), churn (write protection, output only; reports
# how many rounds were repeated with a fork), forks (write protection, and
# no round refused a userfaultfd of libckpt's in a forked child).
run() {
	local name=$1 app=$2 scale=$3 kind=$4 rc nwp nfork nrep nfaults nspill=0 seq npre why=
	shift 4
	rm -rf "$W/st" "$W/out" "$W/err" "$W/err.runs" "$W/out2"
	"$APPS/$app" "$scale" >"$W/bare" 2>/dev/null
	h_run_mark "$W/err" new 0
	CKPT_TEST_ORIGIN=1 timeout -s KILL 300 "$CKRUN" -v --interval 200ms --keep 100 --store "$W/st" --job j "$@" -- \
		"$APPS/$app" "$scale" >"$W/out" 2>>"$W/err"
	rc=$?
	nwp=$(grep -c 'committed.*write-protect snapshot' "$W/err")
	nfork=$(grep -c 'committed.*forked snapshot' "$W/err")
	nrep=$(grep -c 'repeating the checkpoint with a forked snapshot' "$W/err")
	nfaults=$(sed -n 's/.*write-protect snapshot: \([0-9]*\) faults.*/\1/p' "$W/err" | awk '{s += $1} END {print s + 0}')
	if [ $rc != 0 ] || ! cmp -s "$W/bare" "$W/out"; then
		echo "FAIL wpsnap/$name: exit status $rc or output differs from the bare run"
		diff "$W/bare" "$W/out" | head -5 | sed 's/^/    | /'
		grep -v committed "$W/err" | head -5 | sed 's/^/    | /'
		return
	fi
	case $kind in
	wp | spill | nospill)
	    if [ "$nwp" -lt 2 ] || [ "$nfork" != 0 ] || [ "$nfaults" -lt 1 ]; then
		echo "FAIL wpsnap/$name: $nwp write-protect and $nfork forked commits, $nfaults faults served"
		return
	    fi
	    nspill=$(sed -n 's/.*(\([0-9]*\) through the spill file).*/\1/p' "$W/err" | awk '{s += $1} END {print s + 0}')
	    if { [ "$kind" = spill ] && [ "$nspill" -lt 1 ]; } || { [ "$kind" = nospill ] && [ "$nspill" != 0 ]; }; then
		echo "FAIL wpsnap/$name: $nspill blocks went through the spill file"
		return
	    fi ;;
	fork) if [ "$nfork" -lt 2 ] || [ "$nwp" != 0 ]; then
		echo "FAIL wpsnap/$name: $nwp write-protect and $nfork forked commits (all should fork)"
		return
	      fi ;;
	churn) if [ "$nwp" -lt 1 ]; then
		echo "FAIL wpsnap/$name: no commit by write protection ($nfork forked)"
		return
	       fi ;;
	forks) if [ "$nwp" -lt 2 ] || grep -q 'userfaultfd.*not supported' "$W/err"; then
		echo "FAIL wpsnap/$name: $nwp write-protect commits; a child kept libckpt's userfaultfd:"
		grep -m 2 'userfaultfd' "$W/err" | sed 's/^/    | /'
		return
	       fi ;;
	repeat) if [ "$nrep" -lt 1 ]; then
		echo "FAIL wpsnap/$name: no round was repeated with a fork ($nwp write-protect commits)"
		return
	       fi ;;
	esac
	# PRE=all: every write-protect commit was pre-armed; PRE=none: none.
	npre=$(grep -c 'committed.*write-protect snapshot.*pre-armed: ' "$W/err")
	if { [ "${PRE:-}" = all ] && [ "$npre" != "$nwp" ]; } || { [ "${PRE:-}" = none ] && [ "$npre" != 0 ]; }; then
		echo "FAIL wpsnap/$name: $npre of $nwp write-protect commits pre-armed (want ${PRE:-})"
		grep committed "$W/err" | head -2 | sed 's/^/    | /'
		return
	fi
	# A restore from the second newest checkpoint (the newest may be
	# one taken at the very end), run to its end. Its stdout is the new
	# ckrun's: it must get what the bare run printed after the offset
	# saved in that checkpoint.
	seq=$(ls "$W/st/j/manifests" | sort | tail -2 | head -1)
	timeout -s KILL 60 "$CKPT" rm --store "$W/st" "j@$((10#$(ls "$W/st/j/manifests" | sort | tail -1)))" >/dev/null
	off=$(timeout -s KILL 60 "$CKPT" inspect --store "$W/st" "j@$((10#$seq))" 2>/dev/null |
		awk '$1 == 1 && $2 == "file" { sub(/^@/, "", $5); print $5; exit }')
	tail -c +$(( ${off:-0} + 1 )) "$W/bare" >"$W/want2"
	rm -f "$W/out2"
	h_run_mark "$W/err" resume 1
	CKPT_TEST_ORIGIN=1 timeout -s KILL 300 "$CKRUN" -v --resume --store "$W/st" --job j -- "$APPS/$app" "$scale" \
		>"$W/out2" 2>>"$W/err"
	rc=$?
	# The job's origin proves the restore (h_proof: no fresh start, the
	# first run's value at the end), the line which checkpoint it came from.
	if [ -z "$off" ] || [ $rc != 0 ] || ! cmp -s "$W/want2" "$W/out2" || ! why=$(h_proof "$W/err") ||
	   ! grep -q "restored from checkpoint $((10#$seq)) " "$W/err"; then
		echo "FAIL wpsnap/$name: restore from checkpoint $((10#$seq)) (stdout offset '${off}'): exit status $rc, output differs, or ${why:-no restore line}"
		diff "$W/want2" "$W/out2" | head -5 | sed 's/^/    | /'
		tail -3 "$W/err" | sed 's/^/    | /'
		return
	fi
	echo "PASS wpsnap/$name: $nwp commits by write protection ($nfaults faults served, $nspill blocks spilled), $nfork forked," \
		"$nrep repeated with a fork; restore from checkpoint $((10#$seq)) matches"
}

PRE=all run used memgrow 0.5 wp --snapshot wp
run churn mmchurn 0.5 churn --snapshot wp
# Shared anonymous memory (named "/dev/zero (deleted)" in maps) is read
# while the threads are parked, as any unprotected mapping: it does not
# make the round fork (every round forked before, "write protection:
# Operation not supported").
run shared-anon mp_shmcount 1 wp
# Pre-armed and held running 150 ms before each cut: what it wrote then
# was lifted and must be protected again at the cut (else its blocks
# read as absent: zeros, and memgrow's check fails after the restore).
CKPT_TEST_PREARM_HOLD_MS=150 PRE=all run prearm-window memgrow 0.5 wp
CKPT_TEST_PREARM_HOLD_MS=150 run prearm-churn mmchurn 0.5 churn
CKPT_TEST_PREARM_HOLD_MS=150 run prearm-unmap wpunmap 0.5 repeat
CKPT_TEST_NO_PREARM=1 PRE=none run prearm-off memgrow 0.5 wp
CKPT_TEST_PREARM_OPEN_MS=300 run prearm-fork mp_churn 1 forks
# Layout events late (as the kernel queues them after the pages are
# gone): the writer meets memory the job unmapped before ckrun knows of
# it. Such rounds must be repeated with a fork, never save zeros for what
# the cut held (before the fix nearly every checkpoint of this run
# restored a region of zeros).
CKPT_TEST_WP_EVENT_DELAY_MS=50 run late-events wpunmap 0.5 repeat --snapshot wp
# The same where the kernel lacks PAGEMAP_SCAN (the cut is read from pagemap).
CKPT_TEST_NO_PAGEMAP_SCAN=1 CKPT_TEST_WP_EVENT_DELAY_MS=50 run late-events-pagemap wpunmap 0.5 repeat --snapshot wp
CKPT_TEST_NO_UFFD_DEV=1 run own-uffd memgrow 0.5 wp --snapshot wp
run default memgrow 0.5 wp
# No memory for blocks aside: those the job writes first go to the spill
# file; without a directory for it, the job's writes wait for the writer.
run spill memgrow 0.5 spill --snapshot-memory 0
TMPDIR=$W/no-such-dir run spill-unavailable memgrow 0.5 nospill --snapshot-memory 0
run fork memgrow 0.5 fork --snapshot fork

# The kernel stops unprotecting a run at the first mapping in it that is
# not registered (one the job made since its scan), and a pre-armed
# process holds its own reference to the descriptor: a page of it left
# protected made its manager wait in a fault for a handler that was gone,
# and the job with it (an MPI rank importing its modules, in CI).
refused_remap() {
	local rc n split
	rm -rf "$W/st"
	"$B/tests/unsupported/remap_refused" 40 >"$W/bare" 2>/dev/null
	CKPT_TEST_TAKE_DELAY_MS=300 CKPT_TEST_TAKE_DELAY_COMM=remap_refused timeout -s KILL 60 "$CKRUN" -v \
		--interval 200ms --store "$W/st" --job j -- "$B/tests/unsupported/remap_refused" 40 >"$W/out" 2>"$W/err"
	rc=$?
	n=$(grep -c 'failed: process [0-9]*: a Linux AIO context' "$W/err")
	split=$(grep -c 'protected run(s) lifted in parts' "$W/err")
	if [ $rc != 0 ] || ! cmp -s "$W/bare" "$W/out"; then
		echo "FAIL wpsnap/refused-remap: exit status $rc (137: killed after 60 s), or output differs from the bare run"
		tail -3 "$W/err" | sed 's/^/    | /'
	elif [ "$n" -lt 2 ]; then
		echo "FAIL wpsnap/refused-remap: $n round(s) refused by the child's AIO context, wanted at least 2"
		tail -3 "$W/err" | sed 's/^/    | /'
	elif [ "$split" -lt 1 ]; then
		# (no pre-armed round met a mapping made since: the test proved nothing)
		echo "FAIL wpsnap/refused-remap: no round's end lifted a run in parts ($n rounds refused)"
		tail -3 "$W/err" | sed 's/^/    | /'
	else
		echo "PASS wpsnap/refused-remap: $n rounds refused, $split of them ended lifting runs in parts (the parent remapped inside its protected memory); output as bare"
	fi
}
refused_remap
