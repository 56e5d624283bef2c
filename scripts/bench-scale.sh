#!/usr/bin/env bash
# make bench, the job whose shape is large (CKPT_BENCH_SCALE=0 skips it):
# tests/bench/scalejob with a sparse anonymous region of 64 GiB (MAP_NORESERVE,
# one page written every 64 MiB), 1000 threads and 60000 small mappings
# (CKPT_BENCH_SCALE_ARGS="GIB THREADS MAPS" to change). One checkpoint, kill
# -9, resume: ckrun's own peak memory (VmHWM) in each, the times, and the
# job's digest of every written page before and after.
# Prints a Markdown table, appended to the file $1 if given.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=$top/build
out=${1:-}
args=${CKPT_BENCH_SCALE_ARGS:-64 1000 60000}
W=$(mktemp -d "$B/bench-scale.XXXXXX")
P=
# shellcheck disable=SC2317 # (called from the trap)
cleanup() {
	[ -n "$P" ] && { kill -9 -- -"$P"; wait "$P"; } 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
. "$top/scripts/waitline.sh"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
hwm() { awk '/VmHWM/ { printf "%d", $2 / 1024 }' "/proc/$1/status" 2>/dev/null; }
fail() { echo "bench-scale: $*" >&2; exit 1; }
job_pid() { pgrep -n -x scalejob; }

echo "bench-scale: scalejob $args; work directory $W" >&2
# shellcheck disable=SC2086 # the arguments are a list
setsid "$B/ckrun" -v --store "$W/st" --job scale -- "$B/tests/bench/scalejob" $args >"$W/out" 2>"$W/err" &
P=$!
wait_line "$W/out" '^ready' 300 "$P" || fail "the job did not start"
kill -USR1 "$(job_pid)"
wait_line "$W/out" '^digest' 60 "$P" || fail "no digest"
t0=$(now)
kill -USR2 "$P"
wait_line "$W/err" 'checkpoint 1 (committed|of job .* failed)' 900 "$P" || fail "no checkpoint"
t1=$(now)
grep -q 'checkpoint 1 committed' "$W/err" || fail "$(grep 'failed' "$W/err")"
ck_hwm=$(hwm "$P")
line=$(grep 'checkpoint 1 committed' "$W/err")
frozen=$(sed -n 's/.*(frozen \([0-9.]*\) s.*/\1/p' <<<"$line")
snap=$(sed -n 's/.*), \(.*\)$/\1/p' <<<"$line" | cut -c1-80)
kill -9 -- -"$P" 2>/dev/null
wait "$P" 2>/dev/null
t2=$(now)
# shellcheck disable=SC2086
setsid "$B/ckrun" -v --resume --store "$W/st" --job scale -- "$B/tests/bench/scalejob" $args >>"$W/out" 2>>"$W/err" &
P=$!
wait_line "$W/err" 'restored from checkpoint|cannot restore' 900 "$P" || fail "no restore"
t3=$(now)
grep -q 'restored from checkpoint' "$W/err" || fail "$(grep 'cannot restore' "$W/err")"
kill -USR1 "$(job_pid)"
wait_line "$W/out" '^digest' 120 "$P" || true
sleep 1
rs_hwm=$(hwm "$P")
same=no
[ "$(grep -c '^digest' "$W/out")" = 2 ] && [ "$(grep '^digest' "$W/out" | sort -u | wc -l)" = 1 ] && same=yes
read -r gib threads maps <<<"$args"
{
	echo
	echo "| job of large shape: ${gib} GiB sparse, ${threads} threads, ${maps} mappings | ckrun | target |"
	echo "|---|---|---|"
	echo "| ckrun peak memory (VmHWM), checkpoint | ${ck_hwm} MiB | < 256 MiB |"
	echo "| ckrun peak memory (VmHWM), restore | ${rs_hwm} MiB | < 256 MiB |"
	echo "| checkpoint: completion, frozen | $(secs "$t0" "$t1") s, ${frozen} s (${snap}) | |"
	echo "| restore to running (from the kill) | $(secs "$t2" "$t3") s | |"
	echo "| every written page as before | ${same} | yes |"
} | tee -a "${out:-/dev/null}"
