#!/usr/bin/env bash
# Who the job is: an ordinary user checkpoints and restores, and root's job
# keeps root's privileges (NOTES.md, Processes).
#
# As root, the suite creates a user (with a home, and a supplementary group
# /etc/subgid delegates to it) and runs the programs already built, from a
# world-readable copy, as that user:
#   user/groups-*   `id -G` under ckrun: the supplementary group reads as
#                   65534 with one -v line saying why while /etc/subgid does
#                   not list it, and as in a bare run once it does (newgidmap);
#   user/APP        privs (one process: ids, capability sets, privileged
#                   probes, TIDs per thread), tls (threads check their TIDs
#                   and TLS), recmutex (TIDs recorded in mutexes held across
#                   a checkpoint), forktree (a process tree), mp_sysvshm (System V
#                   shared memory between processes), sysv_msgq (System V
#                   message queues, one filled to the default limit: a
#                   user's restore may not raise it), mp_sysvsem (System V
#                   semaphore sets and SEM_UNDO adjustments), mp_mqueue (POSIX
#                   message queues), file_lease (read and
#                   write leases on files the user owns), seccomp_filters (the
#                   job's filters installed again), pty_queued (bytes waiting
#                   in pseudo-terminal pairs), fd_high (descriptors above
#                   1100), mp_orphan_session (sessions rebuilt through
#                   helpers the leaders make and reap), mp_orphan_pgrp (a
#                   group whose leader exited, led again by a helper a
#                   member makes and reaps), mp_orphan_setsid (parents made
#                   by a session's helper): checkpoint, kill -9,
#                   resume, checkpoint again, kill -9, resume to the end; the
#                   output and status of a bare run, every resume proven a
#                   restore (h_proof), and every round forked, saying why (a
#                   user has no userfaultfd);
# and as root:
#   root/privs      privs, the same cycle: a raw socket, SO_MARK, raising its
#                   priority and /proc/self/map_files work as in a bare run
#                   (a user namespace forbids them all, even to its root);
#   root/no-sys-admin  root without CAP_SYS_ADMIN (capsh): ckrun says it falls
#                   back to a user namespace, and tls goes through the cycle.
# The user, its group and their /etc/subuid, /etc/subgid lines are removed at
# the end. Needs root, useradd, runuser and (for groups-mapped) newgidmap
# (Debian: uidmap, scripts/deps.sh); capsh for no-sys-admin.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

# cycle NAME APP [ARGS...]: APP bare, then under ckrun: a checkpoint (once
# the job drew its origin), kill -9 of the group, --resume, a checkpoint of
# the restored job, kill -9, --resume to the end. Same status and output as
# bare, h_proof. With WANT_LINE set, every commit line must match it.
cycle() {
	local name=$1 app=$2 job=${1//\//-} d res bare_rc rc st out err k n why
	shift 2
	d=$H_WORK/$name
	mkdir -p "$d/tmp"
	export TMPDIR=$d/tmp
	h_app_cmd "$app" "$@"
	res=$(CKPT_TEST_ORIGIN=1 h_run_bare "$app" "$d/bare.out" "$d/bare.err" 120)
	bare_rc=${res% *}
	st=$d/store out=$d/ck.out err=$d/ckrun.err
	: >"$err"
	h_start new "$out" "$err" --store "$st" --job "$job"
	if ! h_wait_origin "$H_PID" "$err" 20000; then
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		h_fail "$name" "the job drew no origin within 20 s" "$err"
		return
	fi
	for k in 1 2; do
		# the k-th commit: the first run's, then the restored job's
		if (( k == 2 )) && ! h_wait_line "$err" 'restored from checkpoint' 60000 "$H_PID"; then
			{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
			h_fail "$name" "resume $(( k - 1 )) did not restore" "$err"
			return
		fi
		kill -USR2 "$H_PID" 2>/dev/null
		n=0
		while (( $(h_manifests "$st" "$job" | wc -l) < k )) && (( n++ < 600 )) && h_alive "$H_PID"; do
			sleep 0.05
		done
		if (( $(h_manifests "$st" "$job" | wc -l) < k )); then
			{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
			h_fail "$name" "checkpoint $k was not committed (the app ended first, or the round failed)" "$err"
			return
		fi
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 10000; } >/dev/null 2>&1
		if ! h_group_gone "$H_PID"; then
			h_fail "$name" "processes survived kill -9 of the process group"
			return
		fi
		h_start resume "$out" "$err" --store "$st" --job "$job" --resume
	done
	h_wait "$H_PID" 180000
	rc=$?
	if [ "$rc" != "$bare_rc" ]; then
		h_diff_excerpt "$d/bare.out" "$out" "$d/diff"
		h_fail "$name" "exit status $rc, bare run $bare_rc" "$d/diff" "$err"
	elif ! cmp -s "$d/bare.out" "$out"; then
		h_diff_excerpt "$d/bare.out" "$out" "$d/diff"
		h_fail "$name" "output differs from the bare run" "$d/diff" "$err"
	elif ! why=$(h_proof "$err" "$(grep -c '^ck-origin END' "$d/bare.err")"); then
		h_fail "$name" "$why" "$err"
	elif [ -n "${WANT_LINE:-}" ] && grep 'committed' "$err" | grep -Evq "$WANT_LINE"; then
		h_fail "$name" "a commit line does not match /$WANT_LINE/" "$err"
	elif [ -n "${WANT_LINE:-}" ] && ! grep -q 'committed' "$err"; then
		h_fail "$name" "no commit line" "$err"
	else
		h_pass "$name"
	fi
}

# groups NAME WANT: `id -G` under ckrun (as the user) against a bare run;
# WANT "same", or "lost": the supplementary group reads as 65534 and -v
# says which group and why.
groups_check() {
	local name=$1 want=$2 d=$H_WORK/$1 rc
	mkdir -p "$d"
	id -G >"$d/bare"
	timeout -s KILL 60 "$CKRUN" -v --store "$d/store" --job g -- id -G >"$d/out" 2>"$d/err"
	rc=$?
	if [ $rc != 0 ]; then
		h_fail "$name" "ckrun exited $rc" "$d/err"
	elif [ "$want" = same ] && ! cmp -s "$d/bare" "$d/out"; then
		h_diff_excerpt "$d/bare" "$d/out" "$d/diff"
		h_fail "$name" "the job's groups differ from a bare run's" "$d/diff" "$d/err"
	elif [ "$want" = lost ] && ! { [ "$(cat "$d/out")" = "$(id -g) 65534" ] &&
		grep -q "supplementary groups $LOST_GID read as 65534" "$d/err"; }; then
		h_fail "$name" "wanted '$(id -g) 65534' and a -v line naming group $LOST_GID" "$d/out" "$d/err"
	else
		h_pass "$name"
	fi
}

# The part run as the user: the checks of one kind, in the work
# directory given (the user's own).
as_user() {
	local part=$1
	H_WORK=$2
	H_FAILED=0
	trap h_cleanup EXIT
	h_seed_init >/dev/null
	case $part in
	groups-unmapped) groups_check user/groups-unmapped lost ;;
	groups-mapped) groups_check user/groups-mapped same ;;
	apps)
		# a user has no userfaultfd: every round forks, saying why
		WANT_LINE='forked snapshot \(write protection: no userfaultfd for this user'
		cycle user/privs privs 1
		cycle user/tls tls 1
		cycle user/recmutex recmutex 0.6
		cycle user/forktree forktree 0.6
		cycle user/mp_sysvshm mp_sysvshm 1
		cycle user/sysv_msgq sysv_msgq 1
		# semaphore sets made again with their ids (sem_next_id) and each
		# process's SEM_UNDO adjustments, inside the job's namespaces
		cycle user/mp_sysvsem mp_sysvsem 0.6
		# POSIX message queues made again, owned and opened by name, from
		# inside the job's user and IPC namespaces
		cycle user/mp_mqueue mp_mqueue 0.6
		# leases: a user takes them again on files it owns
		cycle user/file_lease file_lease 0.5
		# descriptors in flight and unconnected datagram queues: ckrun
		# reads them (pidfd_getfd, kcmp) in the job's user namespace
		cycle user/mp_scm_stream mp_scm_stream 1
		# UNIX connections made again by the processes SO_PEERCRED names
		cycle user/mp_peercred mp_peercred 1
		cycle user/dgram_queue dgram_queue 1
		# bytes waiting in pseudo-terminal pairs: taken and put back
		# through the user's own opens of the slaves
		cycle user/pty_queued pty_queued 1
		# descriptors above 1100: the restorer raises its soft limit
		cycle user/fd_high fd_high 1
		# sessions' orphans made by a helper of the leader's, reaped by it
		cycle user/mp_orphan_session mp_orphan_session 1
		# a group whose leader has exited, led again by a member's helper
		cycle user/mp_orphan_pgrp mp_orphan_pgrp 1
		# children left in a session by parents whose parents exited
		cycle user/mp_orphan_setsid mp_orphan_setsid 1
		# the job's seccomp filters installed again in a user namespace
		cycle user/seccomp_filters seccomp_filters 1 ;;
	esac
	return "$H_FAILED"
}

# kill_uid UID: kills, one by one, the processes of the test user (ours).
kill_uid() {
	local f k v pid
	for f in /proc/[0-9]*/status; do
		while read -r k v _; do
			if [ "$k" = Uid: ]; then
				pid=${f#/proc/}
				[ "$v" = "$1" ] && kill -9 "${pid%/status}" 2>/dev/null
				break
			fi
		done <"$f" 2>/dev/null
	done
}

main() {
	local u g gid top bin uw rc f ckrun_u
	h_seed_init
	if ! h_have_ckrun; then
		h_skip user "ckrun is not built ($CKRUN); run make"
		return 0
	fi
	if [ "$(id -u)" != 0 ] || ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
		h_skip user "needs root, useradd and runuser (it creates a user)"
		return 0
	fi
	h_init user
	chmod 755 "$H_WORK"
	# The programs, where the user can read them (the checkout may not be).
	top=$H_WORK/top bin=$H_WORK/build
	mkdir -p "$top/tests/lib" "$top/tests/suite" "$top/tests/apps" "$bin/tests/apps"
	cp "$H_TOP/tests/lib/harness.sh" "$top/tests/lib/"
	cp "$0" "$top/tests/suite/26-user.sh"
	cp "$H_TOP"/tests/apps/*.desc "$top/tests/apps/"
	cp "$H_BUILD/ckrun" "$H_BUILD/ckpt" "$H_BUILD/libckpt.so" "$H_BUILD/ckpt-restore" "$bin/"
	ckrun_u=$bin/ckrun
	if [ "$CKRUN" != "$H_BUILD/ckrun" ]; then # another ckrun under test (90-mutant's)
		cp "$CKRUN" "$bin/ckrun-under-test"
		ckrun_u=$bin/ckrun-under-test
	fi
	for f in privs tls recmutex forktree mp_sysvshm sysv_msgq mp_sysvsem mp_mqueue file_lease mp_scm_stream mp_peercred dgram_queue pty_queued fd_high mp_orphan_session mp_orphan_pgrp mp_orphan_setsid seccomp_filters; do
		cp "$H_APPS_BIN/$f" "$bin/tests/apps/"
	done
	chmod -R a+rX "$H_WORK"
	# The user, with a supplementary group of its own.
	u=ckrt$$ g=ckrg$$
	H_CLEANUPS+=("groupdel $g; sed -i '/^$u:/d' /etc/subuid /etc/subgid")
	if ! groupadd "$g" || ! useradd -m -G "$g" -s /bin/bash "$u"; then
		h_fail user "cannot create user $u"
		return 1
	fi
	H_CLEANUPS=("kill_uid $(id -u "$u"); userdel -r $u >/dev/null 2>&1" "${H_CLEANUPS[@]}")
	gid=$(getent group "$g" | cut -d: -f3)
	uw=$H_WORK/u
	mkdir -p "$uw/run" # its control sockets there, not in /tmp/ckrun-UID
	chown -R "$u:" "$uw"
	chmod 700 "$uw" "$uw/run"
	run_user() { # PART: the checks of PART as the user, their lines on our stdout
		timeout -s KILL 900 runuser -u "$u" -- env -i PATH="$PATH" HOME="/home/$u" TMPDIR="$uw" XDG_RUNTIME_DIR="$uw/run" \
			CKPT_TOP="$top" BUILD="$bin" CKRUN="$ckrun_u" CKPT_MUTANT_REAL="$bin/ckrun" \
			CKPT_TEST_SEED="$H_SEED" LOST_GID="$gid" \
			bash "$top/tests/suite/26-user.sh" --as-user "$1" "$uw/$1" >"$H_WORK/$1.log" 2>&1
		rc=$?
		cat "$H_WORK/$1.log"
		if [ $rc != 0 ] && ! grep -q '^FAIL ' "$H_WORK/$1.log"; then
			h_fail "user/$1" "the user's part exited $rc"
		fi
		grep -q '^FAIL ' "$H_WORK/$1.log" && H_FAILED=1
	}
	sed -i "/^$u:/d" /etc/subgid # useradd may have given it a range; none covers $gid
	run_user groups-unmapped
	if command -v newgidmap >/dev/null; then
		echo "$u:$gid:1" >>/etc/subgid
		run_user groups-mapped
	else
		h_fail user/groups-mapped "newgidmap is not installed (Debian: uidmap; scripts/deps.sh)"
	fi
	run_user apps
	# Root's job: root's privileges, before and after a restore.
	WANT_LINE='' cycle root/privs privs 1
	if command -v capsh >/dev/null; then
		capsh --drop=cap_sys_admin -- -c "CKPT_TOP='$H_TOP' BUILD='$H_BUILD' CKRUN='$CKRUN' \
			CKPT_MUTANT_REAL='${CKPT_MUTANT_REAL:-}' CKPT_TEST_SEED='$H_SEED' \
			bash '$H_TOP/tests/suite/26-user.sh' --as-root-no-sys-admin '$H_WORK/nsa'" >"$H_WORK/nsa.log" 2>&1
		cat "$H_WORK/nsa.log"
		if ! grep -q '^PASS root/no-sys-admin' "$H_WORK/nsa.log" || grep -q '^FAIL ' "$H_WORK/nsa.log"; then
			H_FAILED=1
		fi
	else
		h_fail root/no-sys-admin "capsh is not installed (Debian: libcap2-bin)"
	fi
	return "$H_FAILED"
}

no_sys_admin() {
	H_WORK=$1
	H_FAILED=0
	mkdir -p "$H_WORK"
	trap h_cleanup EXIT
	h_seed_init >/dev/null
	WANT_LINE='' cycle root/no-sys-admin tls 1
	if ! grep -q 'no CAP_SYS_ADMIN: the job runs in a user namespace' "$H_WORK/root/no-sys-admin/ckrun.err"; then
		echo "FAIL root/no-sys-admin-line: ckrun did not say it fell back to a user namespace"
		H_FAILED=1
	fi
	return "$H_FAILED"
}

case ${1:-} in
--as-user) mkdir -p "$3" && as_user "$2" "$3" ;;
--as-root-no-sys-admin) no_sys_admin "$2" ;;
*) main "$@" ;;
esac
