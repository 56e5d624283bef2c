#!/usr/bin/env bash
# make bench: checkpoint performance next to this machine's own limits,
# measured in the same run. Prints a Markdown table (also written to
# build/bench.md). Sizes: CKPT_BENCH_MIB (default 4096), CKPT_BENCH_PASSES,
# CKPT_BENCH_LOST_PASSES.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=$top/build
MIB=${CKPT_BENCH_MIB:-4096}
PASSES=${CKPT_BENCH_PASSES:-500}
LOST_PASSES=${CKPT_BENCH_LOST_PASSES:-150} # the short pairs of progress lost
work=$(mktemp -d "${CKPT_BENCH_DIR:-$top/build}/bench.XXXXXX") || { echo "$0: cannot make a work directory" >&2; exit 1; }
store=$work/store
job=bench
trap 'pkill -9 -f "$work" 2>/dev/null; rm -rf "$work"' EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
mbps() { awk -v bytes="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f", bytes / 1e6 / s; else print "-" }'; }
drop_caches() { sync; [ "$(id -u)" = 0 ] && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; true; }
jfield() { # jfield JSON KEY SEQ
	python3 -c 'import json,sys; d=[x for x in json.load(sys.stdin) if x["seq"]==int(sys.argv[2])][0]; print(d[sys.argv[1]])' "$2" "$3" <<<"$1"
}
. "$top/scripts/waitline.sh"

echo "bench: ${MIB} MiB job, ${PASSES} passes; work directory $work" >&2

# --- the machine's limits --------------------------------------------------
"$B/tests/bench/membench" 64 0 >/dev/null
head -c $((MIB / 2))M /dev/urandom > "$work/sample"
yes 'compressible text-like data repeats 0123456789' | head -c $((MIB / 2))M >> "$work/sample"
drop_caches
t0=$(now); dd if=/dev/zero of="$work/dd" bs=8M count=$((MIB / 8)) conv=fsync status=none; t1=$(now)
disk_w=$(mbps $((MIB << 20)) "$(secs "$t0" "$t1")")
drop_caches
t0=$(now); dd if="$work/dd" of=/dev/null bs=8M status=none; t1=$(now)
disk_r=$(mbps $((MIB << 20)) "$(secs "$t0" "$t1")")
rm -f "$work/dd"
t0=$(now); zstd -1 -T2 -q -c "$work/sample" > /dev/null; t1=$(now)
zstd_bw=$(mbps $((MIB << 20)) "$(secs "$t0" "$t1")")
rm -f "$work/sample"
limit=$(( disk_w < zstd_bw ? disk_w : zstd_bw ))
# what a written page costs here (µs per 4 KiB page, 256 MiB each way):
# sets the floor of the progress a forked snapshot costs the job
pc=$("$B/tests/bench/pagecost" 256)
pcv() { awk -v k="$1" '$1 == k { print $2 }' <<<"$pc"; }

# --- the job bare, under ckrun without checkpoints, with one checkpoint ----
run_job() { # run_job MODE OUT: prints wall seconds of the work phase (ready -> checksum)
	local mode=$1 out=$2 pid t0 t1
	: > "$out"
	case $mode in
	bare) "$B/tests/bench/membench" "$MIB" "${RUN_PASSES:-$PASSES}" > "$out" & pid=$! ;;
	ckptfork) "$B/ckrun" -v --snapshot fork --store "$store" --job "$job" -- "$B/tests/bench/membench" "$MIB" \
		"${RUN_PASSES:-$PASSES}" > "$out" 2> "$out.err" & pid=$! ;;
	ckpt) "$B/ckrun" -v --snapshot wp --store "$store" --job "$job" -- "$B/tests/bench/membench" "$MIB" \
		"${RUN_PASSES:-$PASSES}" > "$out" 2> "$out.err" & pid=$! ;;
	*) "$B/ckrun" -v --store "$store" --job "$job" -- "$B/tests/bench/membench" "$MIB" "${RUN_PASSES:-$PASSES}" \
		> "$out" 2> "$out.err" & pid=$! ;;
	esac
	wait_line "$out" '^ready' || return 1
	t0=$(now)
	if [ "$mode" = ckpt ] || [ "$mode" = ckptfork ]; then
		wait_line "$out" '^pass 1$'
		kill -USR2 $pid
		wait_line "$out.err" 'checkpoint 1 committed'
		awk '/VmHWM/ { print $2 }' /proc/$pid/status > "$work/peak" # ckrun's high-water mark
	fi
	wait_line "$out" '^checksum' || return 1
	t1=$(now)
	wait $pid
	secs "$t0" "$t1"
}
t_bare=$(run_job bare "$work/bare.out")
rm -rf "$store"
t_under=$(run_job under "$work/under.out")
rm -rf "$store"
# with a forked snapshot (the default) first, for comparison; then with
# --snapshot wp, whose store the measures below read
t_ckpt_fork=$(run_job ckptfork "$work/ckptfork.out")
lost_fork=$(awk -v a="$t_ckpt_fork" -v b="$t_under" 'BEGIN { printf "%.2f", a - b }')
rm -rf "$store"
t_ckpt=$(run_job ckpt "$work/ckpt.out")
peak=$(cat "$work/peak" 2>/dev/null || echo 0)
[ -n "$(grep committed "$work/ckpt.out.err")" ] || { echo "bench: the checkpoint did not commit while the job ran:" >&2; cat "$work/ckpt.out.err" >&2; exit 1; }
lost=$(awk -v a="$t_ckpt" -v b="$t_under" 'BEGIN { printf "%.2f", a - b }')
json=$("$B/ckpt" ls --json --store "$store" "$job")
logical=$(jfield "$json" logical_bytes 1)
stored1=$(jfield "$json" stored_bytes 1)
dur1=$(awk -v n="$(jfield "$json" duration_ns 1)" 'BEGIN { printf "%.2f", n / 1e9 }')
frozen1=$(awk -v n="$(jfield "$json" frozen_ns 1)" 'BEGIN { printf "%.0f", n / 1e6 }')
# which snapshot the round took, as ckrun -v says on its commit line
snapkind=$(sed -n 's/.*committed.*, \(write-protect snapshot\|forked snapshot\).*/\1/p' "$work/ckpt.out.err" | head -1)
# the pre-armed cut: protected while the job ran, before the request
prearm=$(sed -n 's/.*committed.*; pre-armed: [0-9]* of [0-9]* process(es) in \([0-9.]*\) s, \([0-9]*\) faults before the cut.*/pre-armed in \1 s while the job ran, \2 faults then/p' "$work/ckpt.out.err" | head -1)

# --- a second checkpoint after exactly one pass (1% of memory rewritten):
# --no-fork keeps the job still while the first is written, so the change
# between the two snapshots is one pass.
dstore=$work/dstore
out=$work/dedup.out
"$B/ckrun" -v --no-fork --store "$dstore" --job "$job" -- "$B/tests/bench/membench" "$MIB" 1000 \
	> "$out" 2> "$out.err" & pid=$!
wait_line "$out" '^pass 0$'
kill -USR2 $pid
wait_line "$out.err" 'checkpoint 1 committed'
n=$(grep -c '^pass' "$out")
wait_line "$out" "^pass $n\$"
kill -USR2 $pid
wait_line "$out.err" 'checkpoint 2 committed'
kill -9 $pid; wait $pid 2>/dev/null
djson=$("$B/ckpt" ls --json --store "$dstore" "$job")
d1=$(jfield "$djson" stored_bytes 1)
stored2=$(jfield "$djson" stored_bytes 2)
frozen_nofork=$(awk -v n="$(jfield "$djson" frozen_ns 1)" 'BEGIN { printf "%.2f", n / 1e9 }')
rm -rf "$dstore"
ck_bw=$(mbps "$logical" "$dur1")
second_pct=$(awk -v a="$stored2" -v b="$d1" 'BEGIN { printf "%.2f", 100 * a / b }')
overhead=$(awk -v a="$t_under" -v b="$t_bare" 'BEGIN { printf "%.2f", 100 * (a - b) / b }')

# --- overhead of a CPU-bound job under ckrun without checkpoints: one
# pair of 60-second runs is at the mercy of this VM's noise (a few %), so
# a small job (64 MiB, about 6 s) runs bare and under ckrun in turn, five
# times each, and the medians are compared.
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
small_run() { # small_run bare|under: wall seconds of the whole run
	local t0 t1
	t0=$(now)
	if [ "$1" = bare ]; then
		"$B/tests/bench/membench" 64 60 > /dev/null
	else
		"$B/ckrun" --store "$work/ostore" --job small -- "$B/tests/bench/membench" 64 60 > /dev/null
	fi
	t1=$(now)
	secs "$t0" "$t1"
}
st=()
for _ in 1 2 3; do # ckrun's own start and end, around a job that does nothing
	t0=$(now); "$B/ckrun" --store "$work/ostore" --job nothing -- /bin/true; t1=$(now)
	st+=("$(secs "$t0" "$t1")")
done
st_med=$(median "${st[@]}")
sb=() su=()
for _ in 1 2 3 4 5; do
	sb+=("$(small_run bare)")
	su+=("$(small_run under)")
done
rm -rf "$work/ostore"
sb_med=$(median "${sb[@]}")
su_med=$(median "${su[@]}")
overhead_small=$(awk -v a="$su_med" -v b="$sb_med" 'BEGIN { printf "%.2f", 100 * (a - b) / b }')

# --- restart --------------------------------------------------------------
# Twice, each after dropping caches (one run swings by a second or more on
# this VM); the table gives the mean and both runs.
# Before each, what fresh memory costs now: the job's size touched through
# huge pages by a plain program, in the same state (caches dropped, the
# freed memory given back to the host, which the VM does 2 s after a free).
# It swings from 1.7 s to 9.7 s for 4 GiB from one minute to the next here.
fresh_cost() {
	drop_caches
	sleep 3
	"$B/tests/bench/pagecost" "$MIB" thp | awk -v p=$((MIB * 256)) '$1 == "first_touch_thp" { printf "%.3f", $2 * p / 1e6 }'
}
restart_once() {
	local t0 t1 pid
	drop_caches
	sleep 3
	rm -f "$work/restore.err" # the last run's line must not count
	t0=$(now)
	"$B/ckrun" -v --resume --store "$store" --job "$job" -- "$B/tests/bench/membench" "$MIB" "$PASSES" \
		> "$work/restore.out" 2> "$work/restore.err" & pid=$!
	wait_line "$work/restore.err" 'restored from checkpoint' 900 "$pid" || { kill -9 $pid; wait $pid 2>/dev/null; echo "bench: the restore did not come back:" >&2; cat "$work/restore.err" >&2; exit 1; }
	t1=$(now)
	kill -9 $pid; wait $pid 2>/dev/null
	secs "$t0" "$t1"
}
fresh1=$(fresh_cost)
t_restore1=$(restart_once) || exit 1
fresh2=$(fresh_cost)
t_restore2=$(restart_once) || exit 1
t_restore=$(awk -v a="$t_restore1" -v b="$t_restore2" 'BEGIN { printf "%.3f", (a + b) / 2 }')
stored_total=$(du -sb "$store/$job/packs" | cut -f1)
rs_bw=$(mbps "$stored_total" "$t_restore")
rs_mem_bw=$(mbps "$logical" "$t_restore")
pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f", 100 * a / b; else print "-" }'; }

cmp -s <(grep checksum "$work/bare.out") <(grep checksum "$work/ckpt.out") && same=yes || same=NO

# --- progress lost, measured again in three short pairs: the noise of a
# run on this VM grows with its length (a 50 s run swings by 1-2 s, 4%),
# while a checkpoint's cost to the job lies within its round (5-6 s here)
# and the lifting of write protection after it. So three pairs of runs of
# LOST_PASSES passes (about 15 s of work), without then with one
# checkpoint, in turn, each in a store of its own; the table gives their
# mean and every pair, and the long pair above beside it.
store_main=$store
store=$work/store2
lost_short=() pairs=''
for k in 1 2 3; do
	tu=$(RUN_PASSES=$LOST_PASSES run_job under "$work/under_s$k.out")
	rm -rf "$store"
	tc=$(RUN_PASSES=$LOST_PASSES run_job ckpt "$work/ckpt_s$k.out")
	rm -rf "$store"
	[ -n "$(grep committed "$work/ckpt_s$k.out.err")" ] || { echo "bench: a short run's checkpoint did not commit while the job ran:" >&2; cat "$work/ckpt_s$k.out.err" >&2; exit 1; }
	cmp -s <(grep checksum "$work/under_s$k.out") <(grep checksum "$work/ckpt_s$k.out") || same=NO
	pk=$(cat "$work/peak" 2>/dev/null || echo 0)
	(( pk > peak )) && peak=$pk
	l=$(awk -v a="$tc" -v b="$tu" 'BEGIN { printf "%.2f", a - b }')
	lost_short+=("$l")
	pairs+="${pairs:+, }$l s ($tc s, $tu s)"
done
store=$store_main
lost_mean=$(printf '%s\n' "${lost_short[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')

# The floor of the progress a snapshot costs a job that rewrites all of its
# memory after the cut (this one does): each of its 4 KiB pages is made
# writable again once, which here stalls every thread of the job (a
# paravirtual MMU), or copied on write with a fork.
floor() { awk -v us="$1" -v p=$((MIB * 256)) 'BEGIN { if (us == "" || us == "-") print "-"; else printf "%.1f", us * p / 1e6 }'; }
floor_wp=$(floor "$(pcv uffd_wp_lifted)")
floor_fork=$(floor "$(pcv after_fork)")
{
echo "| measure | ckrun | this machine / target |"
echo "|---|---|---|"
echo "| job size | ${MIB} MiB (half random, half compressible) | |"
echo "| time frozen per checkpoint | ${frozen1} ms (${snapkind:-snapshot}, the default --snapshot wp${prearm:+; $prearm}); ${frozen_nofork} s with --no-fork | target < 100 ms |"
echo "| progress lost per checkpoint | ${lost_mean} s, mean of three pairs of ${LOST_PASSES}-pass runs in turn: ${pairs} (work with one checkpoint, without); the ${PASSES}-pass pair: ${lost} s (${t_ckpt} s, ${t_under} s); with --snapshot fork ${lost_fork} s (${t_ckpt_fork} s) | target < 3 s; floor here for a job rewriting all its pages: ${floor_wp} s with write protection, ${floor_fork} s with a fork (µs per page below × $((MIB * 256)) pages) |"
echo "| checkpoint completion | ${dur1} s, ${ck_bw} MB/s of memory | disk write ${disk_w} MB/s, zstd -1 -T2 ${zstd_bw} MB/s (target >= 70% of ${limit}) |"
echo "| bytes stored, 1st checkpoint | ${stored1} | |"
echo "| bytes stored, 2nd (after 1% of memory rewritten) | ${stored2} (${second_pct}% of the 1st) | target < 5% |"
echo "| restart (to running) | ${t_restore} s (mean of ${t_restore1} s and ${t_restore2} s, caches dropped before each): ${rs_mem_bw} MB/s of memory restored ($(pct "$rs_mem_bw" "$disk_r")% of disk read), ${rs_bw} MB/s of stored data read ($(pct "$rs_bw" "$disk_r")%) | disk read ${disk_r} MB/s (target >= 70%); this machine just before each restore: ${fresh1} s, ${fresh2} s to touch ${MIB} MiB of fresh memory through huge pages |"
echo "| overhead without checkpoints | ${overhead_small}% (64 MiB CPU-bound job, medians of 5 runs each in turn: ${su_med} s under ckrun vs ${sb_med} s bare; runs ${su[*]} vs ${sb[*]}; ckrun's start and end around /bin/true: ${st_med} s); the ${MIB} MiB job once: ${overhead}% (${t_under} s vs ${t_bare} s) | target < 1% |"
echo "| ckrun peak memory (VmHWM) | $(( peak / 1024 )) MiB | target < 256 MiB |"
echo "| result with checkpoints equals bare | ${same} | |"
echo "| this machine: µs per 4 KiB page written | fresh memory $(pcv first_touch) (through huge pages $(pcv first_touch_thp)); copy-on-write while a forked snapshot lives $(pcv after_fork), first write after it $(pcv after_fork_exit); userfaultfd write-protect lifted 2 MiB per fault $(pcv uffd_wp_2m), lifted ahead $(pcv uffd_wp_lifted) | |"
} | tee "$B/bench.md"

# the multi-process job (appends its own table); CKPT_BENCH_MP=0 skips it
if [ "${CKPT_BENCH_MP:-1}" != 0 ]; then
	"$top/scripts/bench-mp.sh" "$B/bench.md" || exit 1
fi

# PyTorch training processes' first checkpoints (appends its own table);
# CKPT_BENCH_TORCH=0 skips it
if [ "${CKPT_BENCH_TORCH:-1}" != 0 ]; then
	"$top/scripts/bench-torch.sh" "$B/bench.md" || exit 1
fi

# a job keeping every core busy (appends its own table);
# CKPT_BENCH_BUSY=0 skips it
if [ "${CKPT_BENCH_BUSY:-1}" != 0 ]; then
	"$top/scripts/bench-busy.sh" "$B/bench.md" || exit 1
fi

# MPI jobs under ckrun --np (appends its own table; needs make mpi);
# CKPT_BENCH_MPI=0 skips it
if [ "${CKPT_BENCH_MPI:-1}" != 0 ]; then
	make --no-print-directory -C "$top" mpi >/dev/null || exit 1
	"$top/scripts/bench-mpi.sh" "$B/bench.md" || exit 1
fi

# the job of large shape: ckrun's own memory (appends its own table);
# CKPT_BENCH_SCALE=0 skips it
if [ "${CKPT_BENCH_SCALE:-1}" != 0 ]; then
	"$top/scripts/bench-scale.sh" "$B/bench.md" || exit 1
fi
