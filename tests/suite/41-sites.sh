#!/usr/bin/env bash
# 41-sites: a job moved between two sites. One Ceph cluster
# (scripts/ceph-start.sh) with two more RADOS gateways
# (scripts/ceph-rgw-add.sh), site A and site B, each with its own user,
# keys and bucket, each listening on the host end of a veth pair whose
# other end is in a network namespace this suite creates: a process in
# site A's namespace reaches gateway A and nothing else, and the same for
# B. Each site's ckrun gets its own credentials file (--s3-profile); the
# operator's `ckpt cp`, on the host, holds both (--from-profile,
# --to-profile).
#
# isolation: each namespace reaches its own gateway only, and B's keys do
#   not open A's bucket.
# move-delta: memgrow (48 MiB of random data, rewrites confined to its first
#   2 MiB) runs under ckrun in site A, signed (--sign-key), and commits two
#   checkpoints; `ckpt cp` A -> B while it runs; SIGTERM at A (exit 75,
#   checkpoint 3); `ckpt cp` again, which must send only what B lacks
#   (checkpoint 3's new packs and its manifest: less than half of what
#   checkpoint 3 stores, and no more than what its round wrote plus 256 KiB
#   for the manifest) and reads nothing back of what B's checkpoints name;
#   a third `ckpt cp` sends 0 bytes; checkpoint 3 verifies at B with the
#   key.
# refuse-other-key: a resume at B with another key is refused in one line
#   (exit 2) without running anything.
# resume-at-b: the resume at B, in B's namespace with B's credentials and
#   the key, restores checkpoint 3 (proof: restore line and origin token,
#   tests/README.md) and ends with the bare run's output.
#
# Needs root (network namespaces, Ceph). Starts and stops everything itself.
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$PWD
B=${BUILD:-build}
# shellcheck source=tests/lib/harness.sh
. "$top/tests/lib/harness.sh"
W=$top/$B/sites-suite
CEPH=$W/ceph
fail=0
NSA=ck-site-a-$$
NSB=ck-site-b-$$
job_pid=
bare_pid=

say_pass() { echo "PASS sites/$1"; }
say_fail() { echo "FAIL sites/$1"; fail=1; }

cleanup() {
    [ -n "$job_pid" ] && kill -9 -- "-$job_pid" 2>/dev/null
    [ -n "$bare_pid" ] && kill -9 "$bare_pid" 2>/dev/null
    # the veth pairs go with their namespace ends
    ip netns del "$NSA" 2>/dev/null
    ip netns del "$NSB" 2>/dev/null
    "$top/scripts/ceph-stop.sh" "$CEPH" >"$W/ceph-stop.log" 2>&1
    rm -f "$W"/*.credentials "$W"/*.key
}

# run NAME CMD...: PASS if it exits 0 (with the lines of its log that say
# what was measured), else FAIL with the tail of its log.
run() {
    local name=$1; shift
    if "$@" >"$W/$name.log" 2>&1; then
        say_pass "$name"
        grep -E '^(delta|sent|refused|restored|isolated)' "$W/$name.log" | sed 's/^/    /'
    else
        say_fail "$name"; tail -20 "$W/$name.log" | sed 's/^/    /'
    fi
}

rm -rf "$W"; mkdir -p "$W"
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP sites: needs root (network namespaces, Ceph)"; exit 0
fi
APP=$top/$B/tests/apps/memgrow
if [ ! -x "$CKRUN" ] || [ ! -x "$CKPT" ] || [ ! -x "$APP" ]; then
    echo "FAIL sites/build: ckrun, ckpt or memgrow is not built; run make"; exit 1
fi
command -v ip >/dev/null || { echo "FAIL sites/ip: iproute2's ip is missing (scripts/deps.sh)"; exit 1; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! "$top/scripts/ceph-start.sh" "$CEPH" >"$W/ceph-start.log" 2>&1 &&
   ! "$top/scripts/ceph-start.sh" "$CEPH" >>"$W/ceph-start.log" 2>&1; then
    say_fail ceph-start; tail -20 "$W/ceph-start.log" | sed 's/^/    /'; exit 1
fi
# Only each site's own settings count: nothing from the caller or the
# cluster's first gateway.
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE \
      AWS_ENDPOINT_URL AWS_REGION AWS_DEFAULT_REGION CKPT_S3_ENDPOINT CKPT_STORE
export CKPT_S3_BACKOFF_MS=100

# Private addresses, two /30 networks per run (the pid picks them, so that
# two checkouts on one host do not collide): host end .1, namespace end .2.
K=$(( 10 + ($$ % 100) * 2 ))
A_HOST=10.231.$K.1 A_NS=10.231.$K.2
B_HOST=10.231.$((K + 1)).1 B_NS=10.231.$((K + 1)).2
mk_site() { # NS HOST-IF HOST-ADDR NS-ADDR
    ip netns add "$1" &&
        ip link add "$2" type veth peer name eth0 netns "$1" &&
        ip addr add "$3/30" dev "$2" && ip link set "$2" up &&
        ip -n "$1" addr add "$4/30" dev eth0 && ip -n "$1" link set eth0 up &&
        ip -n "$1" link set lo up
}
sites() {
    mk_site "$NSA" "cksa$$" "$A_HOST" "$A_NS" && mk_site "$NSB" "cksb$$" "$B_HOST" "$B_NS" &&
        "$top/scripts/ceph-rgw-add.sh" "$CEPH" sitea "$A_HOST" &&
        "$top/scripts/ceph-rgw-add.sh" "$CEPH" siteb "$B_HOST"
}
if ! sites >"$W/sites.log" 2>&1; then
    say_fail sites-start; tail -20 "$W/sites.log" | sed 's/^/    /'; exit 1
fi
say_pass sites-start
A_EP=$(. "$CEPH/site-sitea.env" && echo "$CKPT_S3_ENDPOINT")
B_EP=$(. "$CEPH/site-siteb.env" && echo "$CKPT_S3_ENDPOINT")
BASE_EP=$(. "$CEPH/s3.env" && echo "$CKPT_S3_ENDPOINT")
echo "    site A: $A_EP from namespace $NSA ($A_NS); site B: $B_EP from $NSB ($B_NS)"
SA=s3://ckpt-sitea/jobs
SB=s3://ckpt-siteb/jobs
# Each site's credentials file holds its own section only; the operator's
# holds both. Signing keys: the job's, and another.
umask 077
cp "$CEPH/site-sitea.profile" "$W/a.credentials"
cp "$CEPH/site-siteb.profile" "$W/b.credentials"
cat "$CEPH/site-sitea.profile" "$CEPH/site-siteb.profile" >"$W/operator.credentials"
head -c 32 /dev/urandom >"$W/sign.key"
head -c 32 /dev/urandom >"$W/other.key"
umask 022

# at NS CREDENTIALS CMD...: CMD in a site's namespace with that site's
# credentials file (ckrun reads it; the job never sees the keys).
at() {
    local ns=$1 cred=$2
    shift 2
    ip netns exec "$ns" env AWS_SHARED_CREDENTIALS_FILE="$cred" "$@"
}
reach() { ip netns exec "$1" curl -s -o /dev/null --max-time 3 "$2/"; }
isolation() {
    reach "$NSA" "$A_EP" || { echo "site A's namespace does not reach gateway A"; return 1; }
    reach "$NSB" "$B_EP" || { echo "site B's namespace does not reach gateway B"; return 1; }
    ! reach "$NSA" "$B_EP" || { echo "site A's namespace reaches gateway B"; return 1; }
    ! reach "$NSB" "$A_EP" || { echo "site B's namespace reaches gateway A"; return 1; }
    ! reach "$NSA" "$BASE_EP" || { echo "site A's namespace reaches the host's gateway"; return 1; }
    local rc=0
    AWS_SHARED_CREDENTIALS_FILE=$W/b.credentials "$CKPT" ls --s3-profile siteb --store "$SA" >"$W/cross.out" 2>&1 || rc=$?
    cat "$W/cross.out"
    [ $rc = 69 ] && [ "$(wc -l <"$W/cross.out")" = 1 ] && grep -q AccessDenied "$W/cross.out" ||
        { echo "B's keys on A's bucket: status $rc, not one AccessDenied line (69)"; return 1; }
    echo "isolated: each namespace reaches its own gateway only; B's keys are refused by A's bucket"
}
run isolation isolation

# ---- moving a running job from A to B ----
ARGS=(8 48 1 2) # 48 MiB, rewrites in its first 2 MiB; about 2 x 16 s
JOB=mover
"$APP" "${ARGS[@]}" >"$W/bare.out" 2>/dev/null &
bare_pid=$!

# the third field of "JOB@SEQ: copied to URI: SENT of its STORED bytes sent"
cp_sent() { sed -n "s/^$JOB@$2: copied to [^ ]*: \([0-9]*\) of its \([0-9]*\) bytes sent.*/\1 \2/p" "$1"; }
total_sent() { sed -n "s/^$JOB: .* already present; \([0-9]*\) bytes sent$/\1/p" "$1"; }
copy() { # OUT [--sign-key K]: the operator's copy A -> B of every checkpoint of the job
    local out=$1
    shift
    AWS_SHARED_CREDENTIALS_FILE=$W/operator.credentials timeout -s KILL 300 \
        "$CKPT" cp --from-profile sitea --to-profile siteb "$@" "$SA" "$SB" "$JOB" >"$out" 2>&1
}

move() {
    local err=$W/move.err out=$W/move.out rc s1 s3 st3 w3 s4
    : >"$err"
    h_run_mark "$err" new 0
    CKPT_TEST_ORIGIN=1 setsid ip netns exec "$NSA" env AWS_SHARED_CREDENTIALS_FILE="$W/a.credentials" \
        "$CKRUN" -v --s3-profile sitea --sign-key "$W/sign.key" --store "$SA" --job "$JOB" -- "$APP" "${ARGS[@]}" \
        >"$out" 2>>"$err" </dev/null &
    job_pid=$!
    h_wait_origin "$job_pid" "$err" 30000 || { echo "the job did not start"; cat "$err"; return 1; }
    kill -USR2 "$job_pid"
    h_wait_line "$err" "checkpoint 1 committed" 120000 "$job_pid" || { echo "no checkpoint 1"; cat "$err"; return 1; }
    kill -USR2 "$job_pid"
    h_wait_line "$err" "checkpoint 2 committed" 60000 "$job_pid" || { echo "no checkpoint 2"; cat "$err"; return 1; }
    # The copy while it runs: everything so far.
    copy "$W/cp1.out" --sign-key "$W/sign.key" || { echo "ckpt cp while the job runs failed:"; cat "$W/cp1.out"; return 1; }
    cat "$W/cp1.out"
    s1=$(total_sent "$W/cp1.out")
    h_alive "$job_pid" || { echo "the job ended before the stop (too slow a machine?)"; tail -5 "$err"; return 1; }
    # The stop at A.
    kill -TERM "$job_pid"
    wait "$job_pid"
    rc=$?
    job_pid=
    [ $rc = 75 ] || { echo "ckrun at A ended with $rc after SIGTERM, not 75"; tail -5 "$err"; return 1; }
    h_wait_line "$err" "checkpoint 3 committed" 1000 || { echo "the stop did not commit checkpoint 3"; return 1; }
    # The final copy: what B lacks of checkpoint 3, no more.
    copy "$W/cp2.out" || { echo "the final ckpt cp failed:"; cat "$W/cp2.out"; return 1; }
    cat "$W/cp2.out"
    read -r s3 st3 < <(cp_sent "$W/cp2.out" 3)
    [ -n "$s3" ] && [ "$s3" = "$(total_sent "$W/cp2.out")" ] ||
        { echo "the final copy did not copy checkpoint 3 alone"; return 1; }
    grep -q "^$JOB@2: already in $SB" "$W/cp2.out" || { echo "checkpoint 2 was not left as it was at B"; return 1; }
    # what B holds, named by its checkpoints 1 and 2, is not even read
    grep -q "^$JOB@3: .* already there, 0 B read back" "$W/cp2.out" ||
        { echo "the final copy read back packs B's checkpoints name"; return 1; }
    # what ckrun's round 3 wrote (new packs): the delta as the writer saw it
    w3=$(AWS_SHARED_CREDENTIALS_FILE=$W/a.credentials "$CKPT" ls --json --s3-profile sitea --sign-key "$W/sign.key" \
             --store "$SA" "$JOB" | grep -o '"seq":3,[^}]*' | sed -n 's/.*"stored_bytes":\([0-9]*\).*/\1/p')
    echo "delta: checkpoint 3 stores $st3 bytes; the final copy sent $s3 (its round wrote $w3 new bytes);" \
        "the copy while the job ran sent $s1"
    (( s3 * 2 < st3 )) || { echo "the final copy sent more than half the image: not a delta"; return 1; }
    # (a manifest of this job: about 70 KB)
    [ -n "$w3" ] && (( s3 <= w3 + 262144 )) ||
        { echo "the final copy sent more than checkpoint 3's new packs and a manifest"; return 1; }
    copy "$W/cp3.out" || { echo "a third ckpt cp failed:"; cat "$W/cp3.out"; return 1; }
    s4=$(total_sent "$W/cp3.out")
    echo "sent by a third copy: $s4 bytes"
    [ "$s4" = 0 ] || { echo "a copy of what B holds sent $s4 bytes"; cat "$W/cp3.out"; return 1; }
    AWS_SHARED_CREDENTIALS_FILE=$W/b.credentials timeout -s KILL 120 \
        "$CKPT" verify --s3-profile siteb --sign-key "$W/sign.key" --store "$SB" "$JOB@3" >"$W/verify.out" 2>&1 ||
        { echo "checkpoint 3 at B does not verify"; cat "$W/verify.out"; return 1; }
    echo "checkpoint 3 verifies at B with the key"
}
run move-delta move

# At B with another key: one line, exit 2, nothing run, the output untouched.
refuse() {
    local out=$W/move.out rc=0
    cp "$out" "$W/before-refusal.out"
    CKPT_TEST_ORIGIN=1 at "$NSB" "$W/b.credentials" timeout -s KILL 120 "$CKRUN" --resume --s3-profile siteb \
        --sign-key "$W/other.key" --store "$SB" --job "$JOB" -- "$APP" "${ARGS[@]}" \
        1<>"$out" 2>"$W/refused.err" </dev/null || rc=$?
    cat "$W/refused.err"
    [ $rc = 2 ] && [ "$(wc -l <"$W/refused.err")" = 1 ] && grep -qi "sign" "$W/refused.err" ||
        { echo "a resume with the wrong key: status $rc, not one line and 2"; return 1; }
    cmp -s "$out" "$W/before-refusal.out" || { echo "the refused resume changed the job's output"; return 1; }
    echo "refused at B with another key: $(cat "$W/refused.err")"
}
run refuse-other-key refuse

# At B with the key: restores checkpoint 3 and ends as the bare run.
resume_b() {
    local err=$W/move.err out=$W/move.out rc why
    h_run_mark "$err" resume 1
    CKPT_TEST_ORIGIN=1 at "$NSB" "$W/b.credentials" timeout -s KILL 300 "$CKRUN" -v --resume --s3-profile siteb \
        --sign-key "$W/sign.key" --store "$SB" --job "$JOB" -- "$APP" "${ARGS[@]}" \
        1<>"$out" 2>>"$err" </dev/null
    rc=$?
    [ $rc = 0 ] || { echo "the resume at B ended with $rc"; tail -5 "$err"; return 1; }
    why=$(h_proof "$err") || { echo "$why"; return 1; }
    grep -q "restored from checkpoint 3 " "$err" || { echo "the resume at B did not restore checkpoint 3"; return 1; }
    wait "$bare_pid"
    bare_pid=
    cmp "$W/bare.out" "$out" || { echo "output differs from the bare run's"; return 1; }
    echo "restored at B from checkpoint 3 (signed at A), output identical to the bare run"
}
run resume-at-b resume_b

exit $fail
