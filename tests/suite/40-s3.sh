#!/usr/bin/env bash
# S3 store against a real Ceph gateway on 127.0.0.1: store operations,
# a 200 MiB multipart object, >1000 keys, threads, faults injected by
# tests/tools/faultproxy (reset mid-part, 503 SlowDown, stall), credential
# errors, and a cross-check with Debian's awscli. Starts Ceph first and
# always stops it at the end. Prints PASS/FAIL/SKIP lines.
# Every resume must prove it restored (h_proof, tests/lib/harness.sh).
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$PWD
B=${BUILD:-build}
# shellcheck source=tests/lib/harness.sh
. "$top/tests/lib/harness.sh"
W=$top/$B/s3-suite
CEPH=$W/ceph
# Debian's awscli (scripts/ceph-start.sh installs it); CKPT_TEST_AWS names
# another, e.g. where a pip-installed aws comes first in PATH.
AWS=${CKPT_TEST_AWS:-aws}
fail=0
proxy_pid=

say_pass() { echo "PASS s3/$1"; }
say_fail() { echo "FAIL s3/$1"; fail=1; }

cleanup() {
    [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
    "$top/scripts/ceph-stop.sh" "$CEPH" >"$W/ceph-stop.log" 2>&1
}

# run NAME CMD...: PASS if it exits 0, else FAIL with the tail of its log.
run() {
    local name=$1; shift
    if "$@" >"$W/$name.log" 2>&1; then
        say_pass "$name"
        grep -E 'MB/s|up in|retries|->|applied' "$W/$name.log" | sed 's/^ */    /'
    else
        say_fail "$name"; tail -15 "$W/$name.log" | sed 's/^/    /'
    fi
}

rm -rf "$W"; mkdir -p "$W"
if ! make -s "$B/tests/s3/s3check" "$B/tests/tools/faultproxy" >"$W/build.log" 2>&1; then
    say_fail build; tail -20 "$W/build.log"; exit 1
fi
S3CHECK=$top/$B/tests/s3/s3check
PROXY=$top/$B/tests/tools/faultproxy

trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$(id -u)" -ne 0 ] && ! command -v radosgw >/dev/null; then
    echo "SKIP s3: Ceph is not installed and we are not root to install it"; exit 0
fi
t0=$(date +%s.%N)
# one more try from scratch if the first start fails (daemon start-up races)
if ! "$top/scripts/ceph-start.sh" "$CEPH" >"$W/ceph-start.log" 2>&1 &&
   ! "$top/scripts/ceph-start.sh" "$CEPH" >>"$W/ceph-start.log" 2>&1; then
    say_fail ceph-start; tail -20 "$W/ceph-start.log" | sed 's/^/    /'; exit 1
fi
t1=$(date +%s.%N)
say_pass ceph-start
echo "    Ceph up in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s"
# only the test cluster's settings count, not the caller's
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_ENDPOINT_URL AWS_DEFAULT_REGION \
      CKPT_S3_TRIES CKPT_S3_PARALLEL CKPT_S3_CONNECT_TIMEOUT CKPT_S3_STALL_TIMEOUT CKPT_S3_DEBUG
# shellcheck disable=SC1091
. "$CEPH/s3.env"
ENDPOINT=$CKPT_S3_ENDPOINT
U=s3://$CKPT_S3_BUCKET/suite
# failures should come quickly in the tests
export CKPT_S3_BACKOFF_MS=100

run basic "$S3CHECK" "$U" basic
run list-1200-keys "$S3CHECK" "$U" many 1200
run threads "$S3CHECK" "$U" threads 8
run noreplace-race "$S3CHECK" "$U" race 10
run multipart-200MiB "$S3CHECK" "$U" big 200
# virtual-host addressing: BUCKET.localhost (curl resolves *.localhost to
# loopback itself; the gateway's DNS name is localhost)
run virtual-host env S3CHECK_VHOST=1 CKPT_S3_ENDPOINT="http://localhost:${ENDPOINT##*:}" "$S3CHECK" "$U" basic

# ---- faults through the proxy ----
echo pass >"$W/fault.ctl"
"$PROXY" -l 0 -t "${ENDPOINT#http://}" -c "$W/fault.ctl" -p "$W/proxy.port" >/dev/null 2>"$W/proxy.log" &
proxy_pid=$!
for _ in $(seq 1 50); do [ -s "$W/proxy.port" ] && break; sleep 0.1; done
PURL=http://127.0.0.1:$(cat "$W/proxy.port")
via_proxy() { CKPT_S3_ENDPOINT=$PURL CKPT_S3_STALL_TIMEOUT=2 "$@"; }

# retried to success: content read back directly from the gateway
fault_ok() { # name, control line, command through the proxy..., then verify args
    local name=$1 ctl=$2; shift 2
    echo "$ctl" >"$W/fault.ctl"
    if via_proxy "$@" >"$W/$name.log" 2>&1 && grep -qE '[1-9][0-9]* retries' "$W/$name.log"; then
        say_pass "$name"; sed 's/^ */    /' "$W/$name.log"
    else
        say_fail "$name"; tail -15 "$W/$name.log" | sed 's/^/    /'
    fi
    echo pass >"$W/fault.ctl"
}
fault_ok fault-reset-mid-part "reset 2 3000000" "$S3CHECK" "$U" putgen fault/reset 41000000 11
run fault-reset-content "$S3CHECK" "$U" verify fault/reset 41000000 11
fault_ok fault-slowdown-put "slowdown 3" "$S3CHECK" "$U" putgen fault/slow 1000000 12
run fault-slowdown-content "$S3CHECK" "$U" verify fault/slow 1000000 12
"$S3CHECK" "$U" putgen fault/stall 3000000 13 >/dev/null 2>&1
fault_ok fault-stall-get "stall 1 100" "$S3CHECK" "$U" verify fault/stall 3000000 13
fault_ok fault-stall-put "stall 2 0" "$S3CHECK" "$U" putgen fault/stallput 41000000 16
run fault-stall-put-content "$S3CHECK" "$U" verify fault/stallput 41000000 16

# failing cleanly: bounded time, one error line naming endpoint and key
fault_fail() { # name, control line, expected text, command...
    local name=$1 ctl=$2 want=$3; shift 3
    local s e
    echo "$ctl" >"$W/fault.ctl"
    s=$(date +%s)
    if via_proxy env CKPT_S3_TRIES=3 "$@" >"$W/$name.log" 2>&1; then
        say_fail "$name"; echo "    succeeded although every connection was broken"
    elif [ "$(grep -c 'error:' "$W/$name.log")" -eq 1 ] && grep -q "$want" "$W/$name.log" &&
         grep -q "$PURL" "$W/$name.log" && grep -q "fault/" "$W/$name.log"; then
        e=$(date +%s)
        say_pass "$name"; echo "    after $((e - s)) s: $(grep 'error:' "$W/$name.log")"
    else
        say_fail "$name"; tail -15 "$W/$name.log" | sed 's/^/    /'
    fi
    echo pass >"$W/fault.ctl"
}
fault_fail fault-stall-gives-up "stall 0" "too slow" "$S3CHECK" "$U" verify fault/stall 3000000 13
fault_fail fault-reset-gives-up "reset 0 2000000" "after 3 tries" "$S3CHECK" "$U" putgen fault/dead 41000000 14
fault_fail fault-slowdown-gives-up "slowdown 0" "SlowDown" "$S3CHECK" "$U" putgen fault/slow2 1000 15
# the failed multipart upload was aborted: no parts left behind
if uploads=$("$AWS" --endpoint-url "$ENDPOINT" s3api list-multipart-uploads --bucket "$CKPT_S3_BUCKET" \
                  --prefix suite/fault/dead --output text 2>"$W/uploads.err") &&
   ! grep -q UPLOADS <<<"$uploads"; then
    say_pass fault-upload-aborted
else
    say_fail fault-upload-aborted; echo "$uploads" "$(cat "$W/uploads.err")" | head -5 | sed 's/^/    /'
fi
# ckrun through the faults: a checkpoint either commits and verifies, or
# fails cleanly with the job running on; the newest committed checkpoint
# always restores (after a kill -9) to an identical result.
# the jobs of the fault and gateway tests must outlive a stalled or
# restarted gateway (several seconds)
"$top/$B/tests/apps/sgd" 2 >"$W/sgd2.bare" &
sgd2_pid=$!
# ck_fault NAME CONTROL OUTCOME: a clean first checkpoint, then a second
# one through the fault. OUTCOME "commit": fewer faults than tries, so it
# must commit and the resume restore from it; "fail": every connection
# broken, so it must fail cleanly with the job running on and the resume
# restore from the first.
ck_fault() {
    local name=$1 ctl=$2 outcome=$3 store=$U/faultjobs job pid rc why want f0 f1
    job=f-$name
    wait "$sgd2_pid" 2>/dev/null # its bare output
    echo pass >"$W/fault.ctl"
    : >"$W/$job.err"
    h_run_mark "$W/$job.err" new 0
    CKPT_TEST_ORIGIN=1 setsid env CKPT_S3_ENDPOINT="$PURL" CKPT_S3_STALL_TIMEOUT=2 CKPT_S3_TRIES=3 \
        "$CKRUN" -v --store "$store" --job "$job" -- "$top/$B/tests/apps/sgd" 2 \
        >"$W/$job.out" 2>>"$W/$job.err" &
    pid=$!
    h_wait_origin "$pid" "$W/$job.err" 10000
    kill -USR2 "$pid"                         # a clean first checkpoint
    h_wait_line "$W/$job.err" "checkpoint 1 committed" 30000 "$pid"
    f0=$(grep -c '^faultproxy: conn' "$W/proxy.log")
    echo "$ctl" >"$W/fault.ctl"
    kill -USR2 "$pid"                         # the second one meets the fault
    h_wait_line "$W/$job.err" "checkpoint 2 (committed|of job .* failed)" 60000 "$pid"
    echo pass >"$W/fault.ctl"
    f1=$(grep -c '^faultproxy: conn' "$W/proxy.log")
    echo "faults applied during checkpoint 2: $(( f1 - f0 ))"
    if (( f1 == f0 )); then
        echo "no fault was applied to checkpoint 2: the case proves nothing"
        kill -9 -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
        return 1
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"; echo "    ckrun ended (status $?) before the test was done with it:"
        tail -3 "$W/$job.err" | sed 's/^/    | /'; return 1
    fi
    kill -9 -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    h_run_mark "$W/$job.err" resume 1
    CKPT_TEST_ORIGIN=1 timeout -s KILL 300 "$CKRUN" -v --resume --store "$store" --job "$job" -- "$top/$B/tests/apps/sgd" 2 \
        1<>"$W/$job.out" 2>>"$W/$job.err"
    rc=$?
    echo "outcome -> $(grep -Eo "checkpoint 2 (committed|of job [^ ]* failed: .{0,90})" "$W/$job.err" | head -1)"
    case $outcome in
    commit) want=2; grep -q "checkpoint 2 committed" "$W/$job.err" ||
                { echo "checkpoint 2 did not commit although there were fewer faults than tries"; return 1; } ;;
    fail) want=1; grep -q "checkpoint 2 of job .* failed" "$W/$job.err" ||
                { echo "checkpoint 2 did not fail although every connection was broken"; return 1; } ;;
    esac
    grep -q "restored from checkpoint $want " "$W/$job.err" ||
        { echo "the resume did not restore from checkpoint $want"; return 1; }
    why=$(h_proof "$W/$job.err") || { echo "$why"; return 1; }
    [ $rc = 0 ] && cmp -s "$W/sgd2.bare" "$W/$job.out" && timeout -s KILL 120 "$CKPT" verify --store "$store" "$job" >/dev/null
}
run ckrun-fault-reset ck_fault reset "reset 2 1000" commit
run ckrun-fault-slowdown ck_fault slowdown "slowdown 2" commit
run ckrun-fault-stall ck_fault stall "stall 1 0" commit
run ckrun-fault-dead ck_fault dead "reset 0 1" fail
# The gateway killed during a checkpoint and started again: the round
# commits (if the gateway is back within the retries) or fails cleanly;
# either way the newest committed checkpoint restores identically.
gw_restart() {
    local store=$U/gwjobs job=gw pid rgw rc why want
    wait "$sgd2_pid" 2>/dev/null
    : >"$W/$job.err"
    h_run_mark "$W/$job.err" new 0
    CKPT_TEST_ORIGIN=1 setsid env CKPT_S3_TRIES=8 "$CKRUN" -v --store "$store" --job "$job" -- "$top/$B/tests/apps/sgd" 2 \
        >"$W/$job.out" 2>>"$W/$job.err" &
    pid=$!
    h_wait_origin "$pid" "$W/$job.err" 10000
    kill -USR2 "$pid"
    h_wait_line "$W/$job.err" "checkpoint 1 committed" 30000 "$pid"
    rgw=$(cat "$CEPH/run/client.rgw.a.pid")
    kill -USR2 "$pid"
    sleep 0.05 # (into the round: not a pass/fail decision, either outcome is checked)
    kill -9 "$rgw"
    for _ in $(seq 1 100); do kill -0 "$rgw" 2>/dev/null || break; sleep 0.02; done
    radosgw -c "$CEPH_CONF" -n client.rgw.a 2>>"$W/$job.rgw.log"
    for _ in $(seq 1 100); do curl -s -o /dev/null --max-time 2 "$ENDPOINT/" && break; sleep 0.3; done
    h_wait_line "$W/$job.err" "checkpoint 2 (committed|of job .* failed)" 60000 "$pid"
    if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"; echo "    ckrun ended (status $?) before the test was done with it:"
        tail -3 "$W/$job.err" | sed 's/^/    | /'; return 1
    fi
    kill -9 -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    h_run_mark "$W/$job.err" resume 1
    CKPT_TEST_ORIGIN=1 timeout -s KILL 300 "$CKRUN" -v --resume --store "$store" --job "$job" -- "$top/$B/tests/apps/sgd" 2 \
        1<>"$W/$job.out" 2>>"$W/$job.err"
    rc=$?
    echo "outcome -> $(grep -Eo "checkpoint 2 (committed|of job [^ ]* failed: .{0,90})" "$W/$job.err" | head -1)"
    # Either outcome is right; the resume must come from the newest commit.
    if grep -q "checkpoint 2 committed" "$W/$job.err"; then want=2; else want=1; fi
    grep -q "restored from checkpoint $want " "$W/$job.err" ||
        { echo "the resume did not restore from checkpoint $want, the newest committed"; return 1; }
    why=$(h_proof "$W/$job.err") || { echo "$why"; return 1; }
    [ $rc = 0 ] && cmp -s "$W/sgd2.bare" "$W/$job.out" && timeout -s KILL 120 "$CKPT" verify --store "$store" "$job" >/dev/null
}
run ckrun-gateway-restart gw_restart
kill "$proxy_pid" 2>/dev/null; proxy_pid=

# ---- credentials ----
BAD=WrongSecret$RANDOM$RANDOM
if AWS_SECRET_ACCESS_KEY=$BAD "$S3CHECK" "$U" putgen cred/x 100 1 >"$W/wrong-secret.log" 2>&1; then
    say_fail wrong-secret; echo "    put with a wrong secret succeeded"
elif grep -q SignatureDoesNotMatch "$W/wrong-secret.log" && grep -q "$ENDPOINT" "$W/wrong-secret.log" &&
     grep -q "cred/x" "$W/wrong-secret.log" && ! grep -qF "$BAD" "$W/wrong-secret.log" &&
     ! grep -qF "$AWS_SECRET_ACCESS_KEY" "$W/wrong-secret.log"; then
    say_pass wrong-secret; sed 's/^/    /' "$W/wrong-secret.log"
else
    say_fail wrong-secret; sed 's/^/    /' "$W/wrong-secret.log"
fi
if env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
       -u AWS_SHARED_CREDENTIALS_FILE HOME="$W/nohome" "$S3CHECK" "$U" putgen cred/x 100 1 \
       >"$W/no-credentials.log" 2>&1; then
    say_fail no-credentials
elif [ "$(wc -l <"$W/no-credentials.log")" -eq 1 ] && grep -q "no credentials" "$W/no-credentials.log"; then
    say_pass no-credentials; sed 's/^/    /' "$W/no-credentials.log"
else
    say_fail no-credentials; sed 's/^/    /' "$W/no-credentials.log"
fi
# the shared credentials file, with a named profile
umask 077
printf '[default]\naws_access_key_id = nobody\naws_secret_access_key = nothing\n\n[ck]\naws_access_key_id = %s\naws_secret_access_key = %s\n' \
    "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$W/credentials"
run credentials-file env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY AWS_PROFILE=ck \
    AWS_SHARED_CREDENTIALS_FILE="$W/credentials" "$S3CHECK" "$U" putgen cred/profile 1000 3
"$S3CHECK" "$U" del cred/profile >/dev/null 2>&1

# ---- https with a private CA ----
tls() {
    S3CHECK_CA=$CKPT_TEST_TLS_CA CKPT_S3_ENDPOINT=$CKPT_TEST_TLS_ENDPOINT \
        "$S3CHECK" "$U" putgen tls/obj 20000000 21 &&
    S3CHECK_CA=$CKPT_TEST_TLS_CA CKPT_S3_ENDPOINT=$CKPT_TEST_TLS_ENDPOINT \
        "$S3CHECK" "$U" verify tls/obj 20000000 21
}
run https-private-ca tls
# without the CA the system store does not trust the gateway: one clean
# error, no retries
if CKPT_S3_ENDPOINT=$CKPT_TEST_TLS_ENDPOINT "$S3CHECK" "$U" verify tls/obj 20000000 21 >"$W/tls-untrusted.log" 2>&1; then
    say_fail https-untrusted; echo "    an untrusted certificate was accepted"
elif grep -qi "certificate" "$W/tls-untrusted.log" && grep -q "after 1 try" "$W/tls-untrusted.log"; then
    say_pass https-untrusted; sed 's/^/    /' "$W/tls-untrusted.log"
else
    say_fail https-untrusted; sed 's/^/    /' "$W/tls-untrusted.log"
fi
"$S3CHECK" "$U" del tls/obj >/dev/null 2>&1

# ---- cross-check with awscli ----
head -c 30000000 /dev/urandom >"$W/ours.bin"
head -c 12345 /dev/urandom >"$W/ours-small.bin"
head -c 25000000 /dev/urandom >"$W/theirs.bin"
cross() {
    "$S3CHECK" "$U" putfile cross/ours.bin "$W/ours.bin" &&
    "$S3CHECK" "$U" putfile cross/ours-small.bin "$W/ours-small.bin" &&
    "$AWS" --endpoint-url "$ENDPOINT" s3 ls "s3://$CKPT_S3_BUCKET/suite/cross/" | tee "$W/aws-ls.txt" &&
    grep -q " 30000000 ours.bin" "$W/aws-ls.txt" && grep -q " 12345 ours-small.bin" "$W/aws-ls.txt" &&
    "$AWS" --endpoint-url "$ENDPOINT" s3 cp "s3://$CKPT_S3_BUCKET/suite/cross/ours.bin" "$W/ours.aws" &&
    "$AWS" --endpoint-url "$ENDPOINT" s3 cp "s3://$CKPT_S3_BUCKET/suite/cross/ours-small.bin" "$W/ours-small.aws" &&
    cmp "$W/ours.bin" "$W/ours.aws" && cmp "$W/ours-small.bin" "$W/ours-small.aws" &&
    "$AWS" --endpoint-url "$ENDPOINT" s3 cp "$W/theirs.bin" "s3://$CKPT_S3_BUCKET/suite/cross/theirs.bin" &&
    "$S3CHECK" "$U" getfile cross/theirs.bin "$W/theirs.ours" &&
    cmp "$W/theirs.bin" "$W/theirs.ours" &&
    echo "aws lists and reads what we wrote; we read what aws wrote (multipart), bytes equal"
}
run awscli-cross-check cross
for k in ours.bin ours-small.bin theirs.bin; do "$S3CHECK" "$U" del "cross/$k" >/dev/null 2>&1; done
rm -f "$W"/*.bin "$W"/*.aws "$W"/*.ours

# ---- ckrun and ckpt with an S3 store ----
APPS=$top/$B/tests/apps
APP=prodcons
"$APPS/$APP" 0.5 >"$W/bare.out"

# wait_commit STORE JOB: until ckpt ls shows a checkpoint (at most 60 s)
wait_commit() {
    local i
    for i in $(seq 1 600); do
        "$CKPT" ls --store "$1" "$2" 2>/dev/null | grep -Eq '^[0-9]+ ' && return 0
        sleep 0.1
    done
    return 1
}

# checkpoint to the gateway, kill -9 the whole group, resume from it
s3_cycle() { # STORE JOB
    local store=$1 job=$2 pid why
    : >"$W/$job.err"
    h_run_mark "$W/$job.err" new 0
    CKPT_TEST_ORIGIN=1 setsid "$CKRUN" --store "$store" --job "$job" -- "$APPS/$APP" 0.5 >"$W/$job.out" 2>>"$W/$job.err" &
    pid=$!
    h_wait_origin "$pid" "$W/$job.err" 10000
    kill -USR2 "$pid"
    wait_commit "$store" "$job" || { echo "no commit"; cat "$W/$job.err"; return 1; }
    kill -9 -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    h_run_mark "$W/$job.err" resume 1
    CKPT_TEST_ORIGIN=1 timeout -s KILL 300 "$CKRUN" -v --resume --store "$store" --job "$job" -- "$APPS/$APP" 0.5 \
        1<>"$W/$job.out" 2>>"$W/$job.err" &&
        { why=$(h_proof "$W/$job.err") || { echo "$why"; false; }; } &&
        cmp "$W/bare.out" "$W/$job.out" &&
        timeout -s KILL 120 "$CKPT" verify --store "$store" "$job" &&
        echo "checkpointed to $store, killed, resumed from it: output identical"
}
run ckrun-checkpoint-kill-resume s3_cycle "$U/jobs" s3cycle

# the job never sees the credentials ckrun uses
no_creds() {
    timeout -s KILL 120 "$CKRUN" --store "$U/jobs" --job envcheck -- /usr/bin/env >"$W/env.txt" 2>"$W/env.err" || return 1
    if grep -E '^AWS_(ACCESS_KEY_ID|SECRET_ACCESS_KEY|SESSION_TOKEN)=' "$W/env.txt"; then return 1; fi
    ! grep -rqF "$AWS_SECRET_ACCESS_KEY" "$W/env.txt" "$W/env.err" &&
        echo "no AWS credential in the job's environment or ckrun's output"
}
run credentials-not-in-job no_creds

# a job stored by awscli from a file store resumes from the gateway
aws_upload_resume() {
    local fs=$W/filestore job=awsjob pid why
    rm -rf "$fs"
    : >"$W/$job.err"
    h_run_mark "$W/$job.err" new 0
    CKPT_TEST_ORIGIN=1 setsid "$CKRUN" --store "$fs" --job "$job" -- "$APPS/$APP" 0.5 >"$W/$job.out" 2>>"$W/$job.err" &
    pid=$!
    h_wait_origin "$pid" "$W/$job.err" 10000
    kill -USR2 "$pid"
    wait_commit "$fs" "$job" || return 1
    kill -9 -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    "$AWS" --endpoint-url "$ENDPOINT" s3 cp --recursive --only-show-errors "$fs/$job" \
        "s3://$CKPT_S3_BUCKET/suite/awsjobs/$job" || return 1
    h_run_mark "$W/$job.err" resume 1
    CKPT_TEST_ORIGIN=1 timeout -s KILL 300 "$CKRUN" -v --resume --store "$U/awsjobs" --job "$job" -- "$APPS/$APP" 0.5 \
        1<>"$W/$job.out" 2>>"$W/$job.err" &&
        { why=$(h_proof "$W/$job.err") || { echo "$why"; false; }; } &&
        cmp "$W/bare.out" "$W/$job.out" &&
        echo "file store uploaded with aws s3 cp --recursive resumed from the gateway"
}
run awscli-upload-resume aws_upload_resume

# ckpt cp between a file store and the gateway, both ways, verified
cp_both_ways() {
    local fs=$W/filestore2
    rm -rf "$fs"
    "$CKPT" cp "$U/jobs" "$fs" s3cycle && "$CKPT" verify --store "$fs" s3cycle &&
        "$CKPT" cp "$fs" "$U/moved" s3cycle && "$CKPT" verify --store "$U/moved" s3cycle &&
        "$CKPT" cp "$fs" "$U/moved" s3cycle &&
        echo "ckpt cp s3 -> file -> s3 verified; a second copy skips what is there"
}
run ckpt-cp-between-stores cp_both_ways

exit $fail
