#!/usr/bin/env bash
# make bench, S3 part: a 2 GiB job checkpointed to and restored from a local
# single-host Ceph gateway, next to awscli moving the same bytes to and
# from the same gateway in the same run; requests per checkpoint.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=${BUILD:-$top/build}
case $B in /*) ;; *) B=$top/$B ;; esac
MIB=${CKPT_BENCH_S3_MIB:-2048}
W=$(mktemp -d "$B/bench-s3.XXXXXX")
CEPH=$W/ceph
AWS=${CKPT_TEST_AWS:-aws} # Debian's awscli, installed with Ceph by make bench
trap 'pkill -9 -f "$W/" 2>/dev/null; "$top/scripts/ceph-stop.sh" "$CEPH" >/dev/null 2>&1; rm -rf "$W"' EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
mbps() { awk -v bytes="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", bytes / 1e6 / s; else print "-" }'; }
. "$top/scripts/waitline.sh"

"$top/scripts/ceph-start.sh" "$CEPH" > "$W/ceph.log" 2>&1 || { echo "bench-s3: Ceph did not start"; tail "$W/ceph.log"; exit 1; }
# shellcheck disable=SC1091
. "$CEPH/s3.env"
U=s3://$CKPT_S3_BUCKET/bench
# A fresh single-OSD cluster is slow to take its first gigabyte (space on
# its sparse backing file is allocated on first write): whatever is
# measured first pays for it. Both ckrun and awscli are measured on a
# warmed gateway.
head -c $((MIB / 2))M /dev/urandom > "$W/warm"
"$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3 cp --only-show-errors "$W/warm" "s3://$CKPT_S3_BUCKET/warmup/w"
"$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3 rm --only-show-errors "s3://$CKPT_S3_BUCKET/warmup/w"
rm -f "$W/warm"

"$B/ckrun" -v --store "$U" --job big -- "$B/tests/bench/membench" "$MIB" 100000 > "$W/job.out" 2> "$W/job.err" &
pid=$!
wait_line "$W/job.out" '^pass 0$'
kill -USR2 $pid
wait_line "$W/job.err" 'checkpoint 1 committed'
line=$(grep 'checkpoint 1 committed' "$W/job.err")
up_s=$(sed -E 's/.* stored, ([0-9.]+) s .*/\1/' <<<"$line")
stored=$(sed -E 's/.*memory, ([0-9]+) stored.*/\1/' <<<"$line")
reqs=$(sed -nE 's/.*, ([0-9]+) S3 requests.*/\1/p' <<<"$line")
npacks=$("$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3 ls "$U/big/packs/" | grep -c pack)

# the same bytes with awscli: the packs, up and down. The upload runs
# while the job still computes, as ckrun's checkpoint did: both share the
# 2 cores with the job and the gateway.
t0=$(now); "$B/ckpt" cp "$U" "$W/local" big > /dev/null 2>&1; t1=$(now)
cp_down1=$(secs "$t0" "$t1")
t0=$(now); "$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3 cp --recursive --only-show-errors "$W/local/big/packs" "s3://$CKPT_S3_BUCKET/awsbench/"; t1=$(now)
aws_up=$(secs "$t0" "$t1")
kill -9 $pid; wait $pid 2>/dev/null

# To a running job from the gateway: ckrun's restore, against awscli's way
# to the same end (download the job's store, its manifest and packs, to
# files, then ckrun --resume from them, still in the page cache); twice
# each, in turns.
ck_restore() { # ck_restore: seconds from the command to the job running
	local t0 t1 pid
	rm -f "$W/r.err" # a line of the last run must not count
	t0=$(now)
	"$B/ckrun" -v --resume --store "$U" --job big -- "$B/tests/bench/membench" "$MIB" 100000 > "$W/r.out" 2> "$W/r.err" &
	pid=$!
	wait_line "$W/r.err" 'restored from checkpoint'
	t1=$(now)
	kill -9 $pid; wait $pid 2>/dev/null
	secs "$t0" "$t1"
}
aws_restore() { # aws_restore: "download-seconds total-seconds"
	local t0 t1 t2 pid
	rm -rf "$W/awsstore" "$W/r2.err"
	t0=$(now); "$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3 cp --recursive --only-show-errors "$U/big/" "$W/awsstore/big/"; t1=$(now)
	"$B/ckrun" -v --resume --store "$W/awsstore" --job big -- "$B/tests/bench/membench" "$MIB" 100000 > "$W/r2.out" 2> "$W/r2.err" &
	pid=$!
	wait_line "$W/r2.err" 'restored from checkpoint'
	t2=$(now)
	kill -9 $pid; wait $pid 2>/dev/null
	rm -rf "$W/awsstore"
	echo "$(secs "$t0" "$t1") $(secs "$t0" "$t2")"
}
down1=$(ck_restore)
read -r aws_dl1 aws_run1 <<<"$(aws_restore)"
read -r aws_dl2 aws_run2 <<<"$(aws_restore)"
down2=$(ck_restore)
bytes=$(du -sb "$W/local/big/packs" | cut -f1)

# Moving a checkpoint between stores, nothing else running: ckpt cp (every
# chunk decompressed and checked against its SHA-256, files fsync'd)
# against awscli moving the same packs, twice each, in turns.
aws_cp() { local t0 t1; t0=$(now); "$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3 cp --recursive --only-show-errors "$1" "$2"; t1=$(now); secs "$t0" "$t1"; }
ck_cp() { local t0 t1; t0=$(now); "$B/ckpt" cp "$1" "$2" big > /dev/null || echo "bench-s3: ckpt cp $1 $2 failed" >&2; t1=$(now); secs "$t0" "$t1"; }
cp_up1=$(ck_cp "$W/local" "s3://$CKPT_S3_BUCKET/cp1")
aws_up1=$(aws_cp "$W/local/big/packs" "s3://$CKPT_S3_BUCKET/awscp1/")
aws_up2=$(aws_cp "$W/local/big/packs" "s3://$CKPT_S3_BUCKET/awscp2/")
cp_up2=$(ck_cp "$W/local" "s3://$CKPT_S3_BUCKET/cp2")
rm -rf "$W/awsdown" "$W/cpdown"
aws_down1=$(aws_cp "s3://$CKPT_S3_BUCKET/awscp1/" "$W/awsdown")
cp_down2=$(ck_cp "s3://$CKPT_S3_BUCKET/cp1" "$W/cpdown")
rm -rf "$W/awsdown" "$W/cpdown"
cp_down3=$(ck_cp "s3://$CKPT_S3_BUCKET/cp2" "$W/cpdown")
aws_down2=$(aws_cp "s3://$CKPT_S3_BUCKET/awscp2/" "$W/awsdown")

{
echo
echo "| S3 (local Ceph gateway) | ckrun | awscli, same bytes |"
echo "|---|---|---|"
echo "| upload: checkpoint of a ${MIB} MiB job (${stored} bytes stored) | ${up_s} s, $(mbps "$stored" "$up_s") MB/s | ${aws_up} s, $(mbps "$bytes" "$aws_up") MB/s |"
echo "| download: restore to running; twice each, in turns | ${down1} s, ${down2} s ($(mbps "$stored" "$down1"), $(mbps "$stored" "$down2") MB/s) | download ${aws_dl1} s, ${aws_dl2} s ($(mbps "$bytes" "$aws_dl1"), $(mbps "$bytes" "$aws_dl2") MB/s), then ckrun --resume from those files: ${aws_run1} s, ${aws_run2} s to running |"
echo "| requests for the checkpoint | ${reqs:-?} HTTP requests, ${npacks} packs | |"
echo "| copy up: \`ckpt cp\` file store to gateway, then awscli; twice, in turns | ${cp_up1} s, ${cp_up2} s ($(mbps "$bytes" "$cp_up1"), $(mbps "$bytes" "$cp_up2") MB/s) | ${aws_up1} s, ${aws_up2} s ($(mbps "$bytes" "$aws_up1"), $(mbps "$bytes" "$aws_up2") MB/s) |"
echo "| copy down: gateway to file store (ckpt cp while the job ran, then quiet) | ${cp_down1} s while the job ran; ${cp_down2} s, ${cp_down3} s ($(mbps "$bytes" "$cp_down2"), $(mbps "$bytes" "$cp_down3") MB/s) | ${aws_down1} s, ${aws_down2} s ($(mbps "$bytes" "$aws_down1"), $(mbps "$bytes" "$aws_down2") MB/s) |"
} | tee -a "$B/bench.md"
