#!/usr/bin/env bash
# Starts a single-host Ceph (one monitor, one BlueStore OSD on a sparse file,
# no manager) and a RADOS gateway, all on 127.0.0.1, for the S3 tests.
#
#   scripts/ceph-start.sh [DIR]     (default build/ceph)
#
# Writes DIR/s3.env (endpoint, generated credentials, test bucket) and prints
# it. Idempotent: a cluster already running from DIR is reused; leftovers of
# a broken one are stopped and removed first. Stop with scripts/ceph-stop.sh.
# Ports: CKPT_RGW_PORT / CKPT_MON_PORT, else the first free ones from
# 7480 / 6789 (so two checkouts on one host do not collide).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
D=${1:-$top/build/ceph}
mkdir -p "$D"
D=$(cd "$D" && pwd)
ENV="$D/s3.env"
t0=$(date +%s.%N)

log() { echo "ceph-start: $*" >&2; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() { # first port from $1 nobody listens on
    local p=$1
    while port_busy "$p"; do p=$((p + 1)); done
    echo "$p"
}

running() {
    [ -f "$ENV" ] || return 1
    for n in mon.a osd.0 client.rgw.a; do
        [ -f "$D/run/$n.pid" ] && kill -0 "$(cat "$D/run/$n.pid")" 2>/dev/null || return 1
    done
    # shellcheck disable=SC1090
    (. "$ENV" && curl -s -o /dev/null --max-time 5 "$CKPT_S3_ENDPOINT/")
}

if running; then
    log "already running from $D"
    cat "$ENV"
    exit 0
fi
# Something half-started: clean it away before a fresh start.
"$top/scripts/ceph-stop.sh" "$D" >/dev/null 2>&1 || true
mkdir -p "$D"

CKPT_DEPS_EXTRA="ceph awscli uuid-runtime curl openssl" "$top/scripts/deps.sh"
for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph-authtool monmaptool uuidgen curl openssl; do
    command -v "$tool" >/dev/null || { log "missing $tool (install ceph-mon ceph-osd ceph-common radosgw uuid-runtime curl)"; exit 1; }
done

# On any failure from here on, leave nothing running.
# shellcheck disable=SC2154 # rc is set inside the trap
trap 'rc=$?; if [ $rc -ne 0 ]; then log "start failed (logs in $D/log), stopping"; KEEP=1 "$top/scripts/ceph-stop.sh" "$D" >/dev/null 2>&1 || true; fi' EXIT

RGW_PORT=${CKPT_RGW_PORT:-$(free_port 7480)}
TLS_PORT=${CKPT_RGW_TLS_PORT:-$(free_port $((RGW_PORT + 1)))}
MON_PORT=${CKPT_MON_PORT:-$(free_port 6789)}
mkdir -p "$D"/{mon,osd0,run,log,rgw,tls}

# A throw-away private CA and a certificate for 127.0.0.1, so https with a
# private CA (--s3-ca) is tested too.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ckrun test CA" \
    -keyout "$D/tls/ca.key" -out "$D/tls/ca.pem" 2>>"$D/log/setup.log"
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$D/tls/server.key" -out "$D/tls/server.csr" 2>>"$D/log/setup.log"
printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >"$D/tls/ext.cnf"
openssl x509 -req -in "$D/tls/server.csr" -CA "$D/tls/ca.pem" -CAkey "$D/tls/ca.key" -CAcreateserial \
    -days 2 -extfile "$D/tls/ext.cnf" -out "$D/tls/server.pem" 2>>"$D/log/setup.log"
FSID=$(uuidgen)
CONF="$D/ceph.conf"
# Small memory and cache targets: the test machine has 2 cores. Auth is off
# inside the cluster (loopback only); the gateway still checks S3 signatures.
cat > "$CONF" <<CONF
[global]
fsid = $FSID
mon host = v1:127.0.0.1:$MON_PORT
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
run dir = $D/run
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
pid file = $D/run/\$name.pid
keyring = $D/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon max pg per osd = 1000
mon warn on pool no redundancy = false
ms bind msgr2 = false
[mon]
mon data = $D/mon
[osd]
osd data = $D/osd0
osd objectstore = bluestore
bluestore block path = $D/osd0/block.file
bluestore block create = true
bluestore block size = 21474836480
bluestore block db create = false
bluestore block wal create = false
osd memory target = 1073741824
bluestore cache autotune = false
bluestore cache size = 268435456
osd max object size = 134217728
# The OSD's own CRUSH updates at start are mon commands sent before it has
# the cluster's fsid (refused as "wrong fsid" with auth off, and the OSD
# exits); we place it in the CRUSH map ourselves below.
osd crush update on start = false
osd class update on start = false
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT ssl_endpoint=127.0.0.1:$TLS_PORT ssl_certificate=$D/tls/server.pem ssl_private_key=$D/tls/server.key
rgw dns name = localhost
rgw data = $D/rgw
CONF
export CEPH_CONF="$CONF"
# No monitor answer must ever hang the start: each command gives up.
ceph() { timeout 60 ceph --connect-timeout 15 "$@"; }
radosgw-admin() { timeout 120 radosgw-admin "$@"; }

ceph-authtool --create-keyring "$D/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$D/keyring" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
# v1 spelled out: monmaptool takes any port but 6789 for a msgr2 one, which
# a client told "v1:" (msgr2 is off) never reaches: a second cluster on
# this host (port 6790) then hung in its first `ceph -s`.
monmaptool --create --fsid "$FSID" --addv a "[v1:127.0.0.1:$MON_PORT]" "$D/monmap" >/dev/null
ceph-mon -c "$CONF" --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring" 2>>"$D/log/setup.log"
# -c on every daemon: its command line then names this cluster, which is
# how ceph-stop.sh finds daemons whose pid file never got written
ceph-mon -c "$CONF" -i a
wait_for() { # tries, delay, command...
    local n=$1 d=$2; shift 2
    for _ in $(seq 1 "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep "$d"; done
    return 1
}
wait_for 100 0.2 ceph -s || { log "monitor did not answer"; exit 1; }

OSD_UUID=$(uuidgen)
# A monitor that just answered "status" can still refuse other commands
# for a moment (seen as EPERM here): ask again. Same uuid, same id.
OSD_ID=
for _ in $(seq 1 30); do
    OSD_ID=$(ceph osd new "$OSD_UUID" 2>>"$D/log/setup.log") && [ -n "$OSD_ID" ] && break
    OSD_ID=; sleep 0.5
done
[ -n "$OSD_ID" ] || { log "monitor refused to create the OSD"; exit 1; }
crush_add() { ceph osd crush add "osd.$OSD_ID" 1.0 root=default host=localhost; }
wait_for 30 0.5 crush_add || { log "cannot place the OSD in the CRUSH map"; exit 1; }
ceph-osd -c "$CONF" -i "$OSD_ID" --mkfs --osd-uuid "$OSD_UUID" >>"$D/log/setup.log" 2>&1
# Start a daemon and wait until `ready` holds; if the daemon dies first,
# start it again (up to 3 times): a daemon that dies at start-up for a
# passing reason (monitor still settling) is not a failed cluster.
alive() { [ -f "$D/run/$1.pid" ] && kill -0 "$(cat "$D/run/$1.pid")" 2>/dev/null; }
start_daemon() { # name, tries of 0.3 s, ready-command, daemon command...
    local name=$1 n=$2 ready=$3 attempt i
    shift 3
    for attempt in 1 2 3; do
        "$@" 2>>"$D/log/setup.log" || true
        for i in $(seq 1 "$n"); do
            $ready >/dev/null 2>&1 && return 0
            # the pid file appears a moment after the fork
            [ "$i" -gt 10 ] && ! alive "$name" && break
            sleep 0.3
        done
        alive "$name" && { log "$name did not become ready"; return 1; }
        log "$name exited during start-up (try $attempt), starting it again"
    done
    return 1
}
osd_up() { ceph osd stat 2>/dev/null | grep -q "1 up"; }
start_daemon "osd.$OSD_ID" 200 osd_up ceph-osd -c "$CONF" -i "$OSD_ID" || { log "OSD did not come up"; exit 1; }

rgw_up() { curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$RGW_PORT/"; }
start_daemon client.rgw.a 300 rgw_up radosgw -c "$CONF" -n client.rgw.a || { log "gateway did not answer"; exit 1; }

# Generated per start, so nothing secret is kept in the repository.
ACCESS=CK$(od -An -tx1 -N9 /dev/urandom | tr -d ' \n' | tr a-f A-F)
SECRET=$(od -An -tx1 -N20 /dev/urandom | tr -d ' \n')
radosgw-admin user create --uid=cktest --display-name=cktest \
    --access-key="$ACCESS" --secret-key="$SECRET" >/dev/null 2>>"$D/log/setup.log"
BUCKET=ckpt-test
umask 077
cat > "$ENV" <<ENVF
export CKPT_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$ACCESS
export AWS_SECRET_ACCESS_KEY=$SECRET
export AWS_REGION=us-east-1
export CKPT_S3_BUCKET=$BUCKET
export CKPT_TEST_TLS_ENDPOINT=https://127.0.0.1:$TLS_PORT
export CKPT_TEST_TLS_CA=$D/tls/ca.pem
export CEPH_CONF=$CONF
ENVF
# The first requests after the gateway starts can still fail while it
# creates its pools: retry the bucket creation.
mkbucket() {
    AWS_ACCESS_KEY_ID=$ACCESS AWS_SECRET_ACCESS_KEY=$SECRET AWS_DEFAULT_REGION=us-east-1 \
        /usr/bin/aws --endpoint-url "http://127.0.0.1:$RGW_PORT" s3api create-bucket --bucket "$BUCKET"
}
wait_for 30 1 mkbucket || { log "cannot create bucket $BUCKET"; exit 1; }
t1=$(date +%s.%N)
log "up in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s: endpoint http://127.0.0.1:$RGW_PORT, env in $ENV"
cat "$ENV"
