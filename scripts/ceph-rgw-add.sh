#!/usr/bin/env bash
# Adds one more RADOS gateway, a "site", to a cluster that
# scripts/ceph-start.sh runs from DIR: its own radosgw listening on
# ADDR:PORT only, its own S3 user (generated keys) and its own bucket.
#
#   scripts/ceph-rgw-add.sh DIR NAME ADDR [PORT]
#
# ADDR must already be an address of this host (e.g. the host end of a veth
# pair whose other end is in a network namespace: then that namespace
# reaches this gateway and no other). PORT defaults to the first free one
# from 7580. Writes, mode 0600:
#   DIR/site-NAME.env      CKPT_S3_ENDPOINT, AWS_* keys, CKPT_S3_BUCKET
#   DIR/site-NAME.profile  a section [NAME] for a shared credentials file
#                          (keys and endpoint_url: ckrun/ckpt --s3-profile)
# and prints the env file's path. A gateway NAME already answering is
# reused. scripts/ceph-stop.sh DIR stops it with the rest of the cluster.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DIR NAME ADDR [PORT]" >&2; exit 64; }
D=$(cd "$1" && pwd)
NAME=$2
ADDR=$3
CONF=$D/ceph.conf
ENV=$D/site-$NAME.env
PROFILE=$D/site-$NAME.profile
log() { echo "ceph-rgw-add: $*" >&2; }

case $NAME in
    *[!a-z0-9-]* | "" | -*) log "site name '$NAME': lower-case letters, digits and '-' only"; exit 64 ;;
esac
[ -f "$CONF" ] && [ -f "$D/run/client.rgw.a.pid" ] || { log "no cluster of scripts/ceph-start.sh at $D"; exit 69; }
# (the whole listing first: grep -q ending the pipe early would fail it
# under pipefail)
addrs=$(ip -o -4 addr show)
grep -qF "inet $ADDR/" <<<"$addrs" ||
    { log "$ADDR is not an address of this host (make it first, e.g. the host end of a veth pair)"; exit 69; }
export CEPH_CONF="$CONF"
radosgw-admin() { timeout 120 radosgw-admin "$@"; }

port_busy() { (exec 3<>"/dev/tcp/$ADDR/$1") 2>/dev/null; }
up() { curl -s -o /dev/null --max-time 2 "http://$ADDR:$1/"; }
alive() { [ -f "$D/run/client.rgw.$NAME.pid" ] && kill -0 "$(cat "$D/run/client.rgw.$NAME.pid")" 2>/dev/null; }

if [ -f "$ENV" ] && alive; then
    # shellcheck disable=SC1090
    if (. "$ENV" && curl -s -o /dev/null --max-time 5 "$CKPT_S3_ENDPOINT/"); then
        log "site $NAME already running"
        echo "$ENV"
        exit 0
    fi
fi

PORT=${4:-7580}
if [ $# -lt 4 ]; then
    while port_busy "$PORT"; do PORT=$((PORT + 1)); done
fi
mkdir -p "$D/rgw-$NAME"
# The section is read by the new daemon only; the running ones keep theirs.
if ! grep -q "^\[client.rgw.$NAME\]" "$CONF"; then
    cat >>"$CONF" <<CONF
[client.rgw.$NAME]
rgw frontends = beast endpoint=$ADDR:$PORT
rgw data = $D/rgw-$NAME
CONF
else
    sed -i "/^\[client.rgw.$NAME\]/,/^\[/ s|^rgw frontends = .*|rgw frontends = beast endpoint=$ADDR:$PORT|" "$CONF"
fi
radosgw -c "$CONF" -n "client.rgw.$NAME" 2>>"$D/log/setup.log"
for i in $(seq 1 200); do
    up "$PORT" && break
    if [ "$i" -gt 20 ] && ! alive; then log "gateway $NAME exited (log: $D/log/client.rgw.$NAME.log)"; exit 69; fi
    sleep 0.3
done
up "$PORT" || { log "gateway $NAME did not answer on $ADDR:$PORT"; exit 69; }

# Generated per start: nothing secret in the repository.
ACCESS=CK$(od -An -tx1 -N9 /dev/urandom | tr -d ' \n' | tr a-f A-F)
SECRET=$(od -An -tx1 -N20 /dev/urandom | tr -d ' \n')
BUCKET=ckpt-$NAME
radosgw-admin user rm --uid="site-$NAME" --purge-data >/dev/null 2>&1 || true
radosgw-admin user create --uid="site-$NAME" --display-name="site $NAME" \
    --access-key="$ACCESS" --secret-key="$SECRET" >/dev/null 2>>"$D/log/setup.log"
mkbucket() {
    AWS_ACCESS_KEY_ID=$ACCESS AWS_SECRET_ACCESS_KEY=$SECRET AWS_DEFAULT_REGION=us-east-1 \
        /usr/bin/aws --endpoint-url "http://$ADDR:$PORT" s3api create-bucket --bucket "$BUCKET" >/dev/null 2>&1
}
ok=0
for _ in $(seq 1 30); do mkbucket && { ok=1; break; }; sleep 1; done
[ $ok = 1 ] || { log "cannot create bucket $BUCKET at http://$ADDR:$PORT"; exit 69; }
umask 077
cat >"$ENV" <<ENVF
export CKPT_S3_ENDPOINT=http://$ADDR:$PORT
export AWS_ACCESS_KEY_ID=$ACCESS
export AWS_SECRET_ACCESS_KEY=$SECRET
export AWS_REGION=us-east-1
export CKPT_S3_BUCKET=$BUCKET
ENVF
cat >"$PROFILE" <<PROF
[$NAME]
aws_access_key_id = $ACCESS
aws_secret_access_key = $SECRET
endpoint_url = http://$ADDR:$PORT
PROF
log "site $NAME: http://$ADDR:$PORT, bucket $BUCKET, user site-$NAME"
echo "$ENV"
