#!/usr/bin/env bash
# Containers, as Kubernetes runs them: Debian's podman runs an image made
# from a minimal Debian 12 root (scripts/podman-image.sh: no registry) whose
# entry point is ckrun, storing to the local Ceph gateway
# (scripts/ceph-start.sh). The S3 credentials reach ckrun as a file (a
# podman secret, as a Kubernetes Secret volume does), never in the job's
# environment.
#
#   stop-resume-*  `podman stop -t 30` (SIGTERM, SIGKILL after the grace, as
#                  the kubelet does): ckrun checkpoints to S3 and exits 75; the
#                  container is removed and a new one resumes from S3 and ends
#                  with the bare output. Once with the capabilities a
#                  container running as the host's root needs, once in a
#                  user namespace (Kubernetes' hostUsers: false).
#   kill-mid-checkpoint  `podman kill` (SIGKILL) while a second checkpoint of
#                  a big incompressible memgrow is being written (a kill after
#                  that commit, or before the first, is not counted): a new
#                  container restores the first.
#   k8s-manifests  scripts/k8s/*.yaml parse and hold the settings the README
#                  there explains (no Kubernetes here: syntax and content only).
#
# Every resume proves it restored (h_proof, tests/lib/harness.sh); with a
# CKRUN other than the build's (tests/lib/noresume-ckrun.sh, 90-mutant.sh)
# the image's entry point is that program, the build's ckrun behind it.
#   CKPT_TEST_PODMAN  which parts: root userns kill (default all)
# Needs root
# (podman, Ceph); installs podman, runc and python3-yaml (scripts/deps.sh).
# Podman keeps its images in /var/tmp/ckrun-podman-* (CKPT_PODMAN_DIR; the
# image is reused while the build and the Debian root tarball are unchanged).
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$PWD
# shellcheck source=tests/lib/harness.sh
. "$top/tests/lib/harness.sh"

IMAGE=localhost/ckrun-job:test
PARTS=" ${CKPT_TEST_PODMAN:-root userns kill} "
# A mutant ckrun goes into the image and is the entry point there.
EXTRA=() ENTRY=()
if [ "$CKRUN" != "$H_BUILD/ckrun" ]; then
	IMAGE=localhost/ckrun-job:mutant
	EXTRA=("$CKRUN")
	ENTRY=(--entrypoint "/opt/ckrun-job/${CKRUN##*/}" -e CKPT_MUTANT_REAL=/usr/local/bin/ckrun)
fi
# Podman's storage: outside the build directory (make reads every *.d it
# finds there, and an image holds /etc/rc2.d), one per checkout.
PR=${CKPT_PODMAN_DIR:-/var/tmp/ckrun-podman-$(printf %s "$top" | cksum | cut -d' ' -f1)}
W=
CEPH=
NAME=ck47-$$
SECRET=ck47-s3-$$

# pm ARGS...: podman with this suite's own storage. runc, not crun: crun
# 1.8 refuses a host whose cgroup v2 hierarchy holds a controller while v1
# holds the others ("hybrid mode"), which some hosts (this test machine)
# have; runc runs there, and is what most Kubernetes nodes run.
pm() { podman --root "$PR/storage" --runroot "$PR/run" --runtime runc "$@"; }

# Resource limits: podman asks the runtime for its defaults (a million open
# files), which fails where podman lacks CAP_SYS_RESOURCE (a CI sandbox):
# the container gets the limits this shell has instead.
ulimits() {
	local n p
	n=$(ulimit -Hn) p=$(ulimit -Hu)
	[ "$n" = unlimited ] || (( n > 1048576 )) && n=1048576
	# the runtime ran with at most 32768 processes here (podman's own limit)
	[ "$p" = unlimited ] || (( p > 32768 )) && p=32768
	echo "--ulimit nofile=$n:$n --ulimit nproc=$p:$p"
}

# shellcheck disable=SC2317 # run by h_cleanup
cleanup() {
	local c
	for c in $(pm ps -a --format '{{.Names}}' 2>/dev/null | grep "^$NAME-"); do
		pm rm -f -t 0 "$c" >/dev/null 2>&1
	done
	pm secret rm "$SECRET" >/dev/null 2>&1
	[ -n "$CEPH" ] && "$top/scripts/ceph-stop.sh" "$CEPH" >"$W/ceph-stop.log" 2>&1
}

h_init podman
W=$H_WORK
H_CLEANUPS+=(cleanup)

if [ "$(id -u)" -ne 0 ]; then
	h_skip podman "needs root (podman's rootful containers, Ceph)"
	exit 0
fi
if ! CKPT_DEPS_EXTRA="podman runc python3-yaml" "$top/scripts/deps.sh" >"$W/deps.log" 2>&1; then
	h_fail podman/deps "cannot install podman, runc, python3-yaml" "$W/deps.log"
	exit 1
fi
for a in sgd memgrow; do
	h_app_built "$a" || { h_fail podman "$a is not built; run make"; exit 1; }
done

# ---- the Kubernetes manifests (no cluster needed) ---------------------------------------

if "$PYTHON" "$top/tests/tools/k8s-check.py" "$top/scripts/k8s" >"$W/k8s.log" 2>&1; then
	h_pass podman/k8s-manifests
	sed 's/^/    /' "$W/k8s.log"
else
	h_fail podman/k8s-manifests "scripts/k8s does not hold what its README says" "$W/k8s.log"
fi

# ---- the image, and whether podman runs containers here at all -----------------------------

mkdir -p "$PR"
if ! PODMAN="podman --root $PR/storage --runroot $PR/run --runtime runc" \
	"$top/scripts/podman-image.sh" "$IMAGE" "$H_APPS_BIN/sgd" "$H_APPS_BIN/memgrow" "${EXTRA[@]}" >"$W/image.log" 2>&1; then
	h_fail podman/image "cannot make the image" "$W/image.log"
	exit 1
fi
read -r -a UL <<<"$(ulimits)"
# The privileges (README "Containers"): CAP_SYS_ADMIN for the job's pid and
# mount namespaces, its /proc and restoring thread ids (clone3 set_tid), no
# other capability; /dev/userfaultfd gives write-protect snapshots (podman's
# seccomp profile refuses the userfaultfd system call, not the device).
# shellcheck disable=SC2034 # used by name (container)
PRIV_ROOT=(--cap-drop ALL --cap-add SYS_ADMIN)
[ -c /dev/userfaultfd ] && PRIV_ROOT+=(--device /dev/userfaultfd) # Linux 6.1 and later
# In a user namespace (root there is an unprivileged uid outside) the same
# capability counts only inside; a host device stays closed to it, so
# snapshots fork.
# shellcheck disable=SC2034
PRIV_USERNS=(--uidmap 0:200000:65536 --gidmap 0:200000:65536 --cap-drop ALL --cap-add SYS_ADMIN)
if pm run --rm "${UL[@]}" --network none "${PRIV_ROOT[@]}" --entrypoint /bin/sh "$IMAGE" \
	-c 'cd /tmp && ckrun -- /bin/echo ckrun runs in the container' >"$W/run.log" 2>&1 &&
	grep -q 'ckrun runs in the container' "$W/run.log"; then
	h_pass podman/run
	grep -h 'podman-image:' "$W/image.log" | sed 's/^/    /'
else
	h_fail podman/run "podman cannot run ckrun in a container here" "$W/run.log"
	exit 1
fi

# Nothing less works: without CAP_SYS_ADMIN (podman's default set, or no
# capability at all) ckrun cannot make the job's namespaces and says so.
less_fails() {
	local set out
	local -a caps
	for set in default none; do
		out=$W/priv-$set.log caps=()
		[ $set = none ] && caps=(--cap-drop ALL)
		if pm run --rm "${UL[@]}" --network none "${caps[@]}" \
			--entrypoint /bin/sh "$IMAGE" -c 'cd /tmp && exec ckrun -- /bin/echo ran' >"$out" 2>&1; then
			echo "ckrun ran with capabilities: $set"; cat "$out"; return 1
		fi
		grep -q '^ckrun: ' "$out" || { echo "no line from ckrun with capabilities: $set"; cat "$out"; return 1; }
		echo "capabilities $set: $(grep '^ckrun: ' "$out" | sed 's/^ckrun: //' | paste -sd '|' | sed 's/|/; /g')"
	done
}
if less_fails >"$W/priv.log" 2>&1; then
	h_pass podman/privileges-minimal
	sed 's/^/    /' "$W/priv.log"
else
	h_fail podman/privileges-minimal "ckrun ran with less than CAP_SYS_ADMIN" "$W/priv.log"
fi

# ---- Ceph and the credentials, as a file --------------------------------------------------

CEPH=$W/ceph
if ! "$top/scripts/ceph-start.sh" "$CEPH" >"$W/ceph-start.log" 2>&1 &&
	! "$top/scripts/ceph-start.sh" "$CEPH" >>"$W/ceph-start.log" 2>&1; then
	h_fail podman/ceph-start "the Ceph gateway did not start" "$W/ceph-start.log"
	exit 1
fi
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_ENDPOINT_URL AWS_DEFAULT_REGION
# shellcheck disable=SC1091
. "$CEPH/s3.env"
STORE=s3://$CKPT_S3_BUCKET/podman-$$
(umask 077 && printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$W/credentials")
pm secret create "$SECRET" "$W/credentials" >/dev/null 2>"$W/secret.log" ||
	{ h_fail podman/secret "podman secret create failed" "$W/secret.log"; exit 1; }
rm -f "$W/credentials"
CRED=/var/run/secrets/ckrun/credentials
# What the Job in scripts/k8s gives the container: the endpoint and region
# (not secret) in the environment, the credentials as a read-only file.
RUNOPTS=("${UL[@]}" --network host --secret "$SECRET,type=mount,target=$CRED,mode=0400"
	-e AWS_SHARED_CREDENTIALS_FILE="$CRED" -e CKPT_S3_ENDPOINT="$CKPT_S3_ENDPOINT"
	-e AWS_REGION="$AWS_REGION" -e CKPT_TEST_ORIGIN=1 "${ENTRY[@]}")

# newest JOB: the newest committed checkpoint's sequence (0: none).
newest() {
	timeout -s KILL 60 "$CKPT" ls --store "$STORE" "$1" 2>/dev/null |
		awk '$1 ~ /^[0-9]+$/ && $1 + 0 > n { n = $1 + 0 } END { print n + 0 }'
}

# container NAME JOB OUT ERR PRIV-ARRAY-NAME ARGS...: starts `ckrun -v
# --resume` of ARGS in a new container in the background (stdout appended
# to OUT, stderr to ERR, recorded for h_proof); sets CPID to podman's pid.
container() {
	local name=$1 job=$2 out=$3 err=$4 had=0
	local -n priv=$5
	shift 5
	(( $(newest "$job") > 0 )) && had=1
	h_run_mark "$err" "$([ $had = 1 ] && echo resume || echo new)" "$had"
	pm run --name "$name" "${RUNOPTS[@]}" "${priv[@]}" "$IMAGE" \
		-v --resume --store "$STORE" --job "$job" -- "$@" </dev/null >>"$out" 2>>"$err" &
	CPID=$!
}

# no_secret NAME: no process of the container holds the secret key in its
# environment, and podman's record of the container does not hold it.
no_secret() {
	local p n=0
	for p in $(pm top "$1" hpid 2>/dev/null | tail -n +2); do
		[ -r "/proc/$p/environ" ] || continue
		n=$((n + 1))
		if tr '\0' '\n' <"/proc/$p/environ" | grep -qF -e "$AWS_SECRET_ACCESS_KEY" -e AWS_SECRET_ACCESS_KEY; then
			echo "process $p of the container holds the secret key in its environment"
			return 1
		fi
	done
	(( n >= 2 )) || { echo "found $n processes of the container (want ckrun and the job)"; return 1; }
	if pm inspect "$1" | grep -qF "$AWS_SECRET_ACCESS_KEY"; then
		echo "podman inspect shows the secret key"
		return 1
	fi
	echo "secret absent from the environment of the container's $n processes and from its configuration"
}

# gone NAME: the container is removed, nothing of it is left.
gone() { ! pm container exists "$1"; }

BARE_SGD=$W/sgd.bare.out
h_app_cmd sgd 0.5
res=$(h_run_bare sgd "$BARE_SGD" "$W/sgd.bare.err" 120)
[ "${res% *}" = 0 ] || { h_fail podman "bare run of sgd failed (${res% *})" "$W/sgd.bare.err"; exit 1; }
h_seed_init
h_rng_seed podman

# stop_resume TAG PRIV-ARRAY-NAME: podman stop -t 30, then a new container.
stop_resume() {
	local tag=$1 privname=$2 job=sgd-$1 try rc why d t0 t1
	local d_out=$W/$tag.out d_err=$W/$tag.err
	for try in 1 2 3; do
		job=sgd-$tag-$try
		: >"$d_out"; : >"$d_err"; rm -f "$d_err.runs"
		container "$NAME-$tag-a$try" "$job" "$d_out" "$d_err" "$privname" /opt/ckrun-job/sgd 0.5
		if ! h_wait_origin "$CPID" "$d_err" 60000; then
			wait "$CPID"
			h_fail "podman/stop-resume-$tag" "the job did not start in the container" "$d_err"
			return
		fi
		if ! no_secret "$NAME-$tag-a$try" >"$W/$tag.secret"; then
			h_fail "podman/stop-resume-$tag" "credentials visible" "$W/$tag.secret"
		fi
		h_rand d 200 1500
		h_sleep_ms "$d"
		t0=$(h_now_ms)
		pm stop -t 30 "$NAME-$tag-a$try" >"$W/$tag.stop" 2>&1
		wait "$CPID"; rc=$?
		t1=$(h_now_ms)
		# the job ended before the stop came: nothing to test, again
		[ "$rc" = 0 ] && { h_note "$tag: the job ended before podman stop, again"; pm rm "$NAME-$tag-a$try" >/dev/null; continue; }
		break
	done
	if [ "$rc" != 75 ]; then
		h_fail "podman/stop-resume-$tag" "the stopped container exited $rc, not 75" "$d_err" "$W/$tag.stop"
		return
	fi
	pm rm "$NAME-$tag-a$try" >/dev/null 2>&1
	if ! gone "$NAME-$tag-a$try"; then
		h_fail "podman/stop-resume-$tag" "the first container is still there"
		return
	fi
	if (( $(newest "$job") < 1 )); then
		h_fail "podman/stop-resume-$tag" "exit 75 but no checkpoint in $STORE" "$d_err"
		return
	fi
	container "$NAME-$tag-b" "$job" "$d_out" "$d_err" "$privname" /opt/ckrun-job/sgd 0.5
	wait "$CPID"; rc=$?
	pm rm "$NAME-$tag-b" >/dev/null 2>&1
	if [ "$rc" != 0 ]; then
		h_fail "podman/stop-resume-$tag" "the new container exited $rc" "$d_err"
	elif ! why=$(h_proof "$d_err"); then
		h_fail "podman/stop-resume-$tag" "$why" "$d_err"
	elif ! cmp -s "$BARE_SGD" "$d_out"; then
		h_diff_excerpt "$BARE_SGD" "$d_out" "$W/$tag.diff"
		h_fail "podman/stop-resume-$tag" "output differs from the bare run" "$W/$tag.diff"
	elif ! timeout -s KILL 120 "$CKPT" verify --store "$STORE" "$job" >"$W/$tag.verify" 2>&1; then
		h_fail "podman/stop-resume-$tag" "ckpt verify failed" "$W/$tag.verify"
	else
		h_pass "podman/stop-resume-$tag"
		echo "    stopped $d ms after the job began (podman stop took $(( t1 - t0 )) ms, exit 75);" \
			"$(grep -o 'restored from checkpoint [0-9]* in [0-9.]* s' "$d_err" | tail -n 1) in a new container"
		sed 's/^/    /' "$W/$tag.secret"
	fi
}

[[ $PARTS == *" root "* ]] && stop_resume root PRIV_ROOT
[[ $PARTS == *" userns "* ]] && stop_resume userns PRIV_USERNS
[[ $PARTS == *" kill "* ]] || exit "$H_FAILED"

# ---- podman kill while a checkpoint is written --------------------------------------------

KILL_ARGS=(4 192 16) # 192 MiB of random data from the start; about 16 s
BARE_MG=$W/memgrow.bare.out
h_app_cmd memgrow "${KILL_ARGS[@]}"
res=$(h_run_bare memgrow "$BARE_MG" "$W/memgrow.bare.err" 240)
[ "${res% *}" = 0 ] || { h_fail podman "bare run of memgrow failed (${res% *})" "$W/memgrow.bare.err"; exit 1; }

# wait_seq JOB SEQ PID: until checkpoint SEQ is committed (at most 120 s,
# while PID lives).
wait_seq() {
	local i
	for (( i = 0; i < 1200; i++ )); do
		(( $(newest "$1") >= $2 )) && return 0
		h_alive "$3" || return 1
		sleep 0.1
	done
	return 1
}

kill_mid() {
	local try job out=$W/kill.out err=$W/kill.err rc d=0 why n counted=0 name
	local lo=100 hi=1500
	for try in 1 2 3 4 5 6; do
		job=memgrow-kill-$try name=$NAME-kill-$try
		: >"$out"; : >"$err"; rm -f "$err.runs"
		container "$name" "$job" "$out" "$err" PRIV_ROOT /opt/ckrun-job/memgrow "${KILL_ARGS[@]}"
		h_wait_origin "$CPID" "$err" 60000 || { wait "$CPID"; h_fail podman/kill-mid-checkpoint "the job did not start" "$err"; return; }
		# the first checkpoint, committed: what the kill must fall back on
		pm kill -s USR2 "$name" >/dev/null
		if ! wait_seq "$job" 1 "$CPID"; then
			pm rm -f -t 0 "$name" >/dev/null 2>&1; wait "$CPID"
			h_fail podman/kill-mid-checkpoint "no first checkpoint" "$err"
			return
		fi
		# the second, and SIGKILL while it is written
		h_rand d "$lo" "$hi"
		pm kill -s USR2 "$name" >/dev/null
		h_sleep_ms "$d"
		pm kill "$name" >/dev/null 2>&1
		wait "$CPID"; rc=$?
		pm rm "$name" >/dev/null 2>&1
		n=$(newest "$job")
		if [ "$rc" = 0 ]; then
			h_note "kill: the job ended before the kill ($d ms), again"
			continue
		fi
		if [ "$n" != 1 ]; then
			# the kill came after the second commit: not a kill mid-checkpoint
			h_note "kill: $d ms was after checkpoint $n committed, again sooner"
			hi=$(( d > lo ? d : lo + 1 ))
			continue
		fi
		counted=1
		break
	done
	if (( !counted )); then
		h_fail podman/kill-mid-checkpoint "no kill landed while the second checkpoint was written (6 tries)" "$err"
		return
	fi
	if [ "$rc" != 137 ]; then
		h_fail podman/kill-mid-checkpoint "the killed container exited $rc, not 137 (SIGKILL)" "$err"
		return
	fi
	gone "$name" || { h_fail podman/kill-mid-checkpoint "the killed container is still there"; return; }
	# The killed ckrun's S3 lease stays until it runs out (60 s): from a new
	# container (another pid namespace) its holder cannot be seen dead. A
	# new container meanwhile exits 69 naming the holder, and is started
	# again, as the Job controller does (every 10 s here, 3 minutes at most).
	local t0 held=0 size
	t0=$(h_now_ms)
	while :; do
		size=$(h_size "$err")
		container "$NAME-kill-resume-$held" "$job" "$out" "$err" PRIV_ROOT /opt/ckrun-job/memgrow "${KILL_ARGS[@]}"
		wait "$CPID"; rc=$?
		pm rm "$NAME-kill-resume-$held" >/dev/null 2>&1
		if [ "$rc" != 69 ] || (( $(h_now_ms) - t0 >= 180000 )) ||
			! tail -c "+$(( size + 1 ))" "$err" | grep -q 'is held by ckrun pid'; then
			break
		fi
		held=$((held + 1))
		sleep 10
	done
	if [ "$rc" != 0 ]; then
		h_fail podman/kill-mid-checkpoint "the new container exited $rc" "$err"
	elif ! grep -q "restored from checkpoint 1 " "$err"; then
		h_fail podman/kill-mid-checkpoint "the new container did not restore checkpoint 1" "$err"
	elif ! why=$(h_proof "$err"); then
		h_fail podman/kill-mid-checkpoint "$why" "$err"
	elif ! cmp -s "$BARE_MG" "$out"; then
		h_diff_excerpt "$BARE_MG" "$out" "$W/kill.diff"
		h_fail podman/kill-mid-checkpoint "output differs from the bare run" "$W/kill.diff"
	elif ! timeout -s KILL 120 "$CKPT" verify --store "$STORE" "$job" >"$W/kill.verify" 2>&1; then
		h_fail podman/kill-mid-checkpoint "ckpt verify failed" "$W/kill.verify"
	else
		h_pass podman/kill-mid-checkpoint
		echo "    first checkpoint: $(grep -o 'checkpoint 1 committed.*' "$err" | head -n 1 | cut -c1-160)"
		echo "    SIGKILL $d ms after the second checkpoint's request (try $try), before its commit;" \
			"$(grep -o 'restored from checkpoint [0-9]* in [0-9.]* s' "$err" | tail -n 1) in a new container"
		grep -o 'removed [0-9]* pack(s) no checkpoint references.*' "$err" | head -n 1 | sed 's/^/    what the killed round had written: /'
		echo "    before that, $held new container(s) exited 69 on the killed ckrun's S3 lease;" \
			"the resumed job ended $(( ($(h_now_ms) - t0) / 1000 )) s after the kill"
	fi
}
kill_mid

exit "$H_FAILED"
