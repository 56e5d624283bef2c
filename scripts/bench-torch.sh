#!/usr/bin/env bash
# make bench, PyTorch part (Debian's python3-torch, CPU; CKPT_BENCH_TORCH=0
# skips it): the first checkpoint of real training processes.
#   mlp         tests/torch/dataloader.py inline: one process, `import torch`
#               and an MLP trained without DataLoader workers. Bytes stored
#               next to the anonymous memory it wrote (Private_Dirty of its
#               mappings that are no file, from smaps just before the
#               request), completion time; once more with every page of
#               the file mappings saved (CKPT_NO_FILEPAGES=1), as before
#               ckrun left the files' pages out.
#   dataloader  the same training fed by 2 persistent workers: bytes stored
#               next to what the main process alone stores (its distinct
#               chunks, from the manifest: tests/bench/mfstat.py; the
#               workers are forks of it, so dedup takes what they share),
#               time frozen, rounds that fell back to a forked snapshot
#               (ckrun -v says each), over 3 checkpoints.
#   ddp         DistributedDataParallel over gloo, 2 ranks
#               (torch.multiprocessing.spawn): time frozen, then kill -9 of
#               the tree, a resume, and its output against a bare run's.
# Prints a Markdown table, appended to the file $1 if given.
set -u
cd "$(dirname "$0")/.." || exit 1
top=$PWD
B=$top/build
out=${1:-}
PY=$(command -v /usr/bin/python3 || command -v python3)
W=$(mktemp -d "$B/bench-torch.XXXXXX")
pid=

CKPT_DEPS_EXTRA=torch "$top/scripts/deps.sh" || exit 1

# shellcheck disable=SC2317 # (called from the trap)
tree_of() { # tree_of PID: every descendant of PID
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		echo "$c"
		tree_of "$c"
	done
}
# shellcheck disable=SC2317
stop_job() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		local kids
		kids=$(tree_of "$pid")
		# shellcheck disable=SC2086
		kill -STOP "$pid" $kids 2>/dev/null
		# shellcheck disable=SC2086
		kill -9 "$pid" $kids 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	pid=
}
# shellcheck disable=SC2317
cleanup() { stop_job; rm -rf "$W"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. "$top/scripts/waitline.sh"
fail() {
	echo "bench-torch: $*; ckrun's stderr:" >&2
	cat "$W"/*.err >&2 2>/dev/null
	exit 1
}
field() { sed -nE "s/$1/\\1/p" <<<"$2"; } # field REGEX-WITH-ONE-GROUP LINE
ms() { awk -v s="$1" 'BEGIN { printf "%.0f", s * 1000 }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
join() { local s; s=$(printf '%s, ' "$@"); echo "${s%, }"; }

# anon_dirty PID: bytes of Private_Dirty in PID's mappings that are no file
anon_dirty() {
	awk '/^[0-9a-f]+-[0-9a-f]+ / { anon = ($6 == "" || $6 ~ /^\[(heap|stack|anon:.*)\]$/) }
	     anon && /^Private_Dirty:/ { kb += $2 }
	     END { print kb * 1024 }' "/proc/$1/smaps"
}
# main_python: the job's first python process (workers are its children)
main_python() {
	local p
	for p in $(tree_of "$pid"); do
		[ "$(cat "/proc/$p/comm" 2>/dev/null)" = python3 ] && { echo "$p"; return; }
	done
}

# start NAME ARGS...: the job under ckrun -v, once its second epoch began
start() {
	local name=$1
	shift
	"$B/ckrun" -v --store "$W/$name.store" --job "$name" -- "$PY" "$@" >"$W/$name.out" 2>"$W/$name.err" &
	pid=$!
	wait_line "$W/$name.out" '^epoch 1 ' 600 "$pid" || fail "$name: the job did not start its epochs"
}
# checkpoint NAME I: asks for checkpoint I, sets $line to its commit line
checkpoint() {
	kill -USR2 "$pid"
	wait_line "$W/$1.err" "checkpoint $2 (committed|of job .* failed)" 600 "$pid" || fail "$1: no checkpoint $2"
	line=$(grep -m1 -E "checkpoint $2 (committed|of job .* failed)" "$W/$1.err")
	[[ $line == *committed* ]] || fail "$1: checkpoint $2 failed"
}
stored_of() { field '.*memory, ([0-9]+) stored.*' "$1"; }
memory_of() { field '.*, ([0-9]+) bytes of memory.*' "$1"; }
secs_of() { field '.* stored, ([0-9.]+) s \(.*' "$1"; }
frozen_of() { field '.*\(frozen ([0-9.]+) s.*' "$1"; }

echo "bench-torch: work directory $W" >&2

# --- mlp: one process
mlp() { # mlp NAME: sets m_stored m_mem m_secs m_dirty m_frozen
	start "$1" tests/torch/dataloader.py 100000 inline
	m_dirty=$(anon_dirty "$(main_python)")
	checkpoint "$1" 1
	m_stored=$(stored_of "$line") m_mem=$(memory_of "$line") m_secs=$(secs_of "$line") m_frozen=$(frozen_of "$line")
	stop_job
}
mlp mlp
mlp_stored=$m_stored mlp_mem=$m_mem mlp_secs=$m_secs mlp_dirty=$m_dirty mlp_frozen=$m_frozen
CKPT_NO_FILEPAGES=1 mlp mlp-allpages
all_stored=$m_stored all_mem=$m_mem all_secs=$m_secs

# --- dataloader: main + 2 persistent workers, 3 checkpoints
start dl tests/torch/dataloader.py 100000 persistent
dl_frozen=() dl_secs=() dl_stored=()
for i in 1 2 3; do
	checkpoint dl $i
	[ "$i" = 1 ] && dl_n=$(field '.*committed: ([0-9]+) process.*' "$line") dl_mem=$(memory_of "$line")
	dl_frozen+=("$(ms "$(frozen_of "$line")")")
	dl_secs+=("$(secs_of "$line")")
	dl_stored+=("$(stored_of "$line")")
	e=$(grep -c '^epoch' "$W/dl.out")
	wait_line "$W/dl.out" "^epoch $e " 300 "$pid" || fail "dl: no progress after checkpoint $i"
done
dl_fallbacks=$(grep -c 'repeating the checkpoint with a forked snapshot' "$W/dl.err")
# per process: what a checkpoint of it alone stores (first line: the main)
mapfile -t dl_alone < <("$PY" tests/bench/mfstat.py "$W/dl.store/dl/manifests/00000001" | awk '{ print $NF }')
stop_job

# --- ddp: 2 ranks, checkpoint, kill -9, resume, against a bare run
DDP_EPOCHS=${CKPT_BENCH_TORCH_DDP_EPOCHS:-60}
"$PY" tests/torch/ddp.py "$DDP_EPOCHS" spawn 2 >"$W/ddp.bare" 2>/dev/null || fail "ddp: the bare run failed"
start ddp tests/torch/ddp.py "$DDP_EPOCHS" spawn 2
checkpoint ddp 1
ddp_frozen=$(ms "$(frozen_of "$line")") ddp_n=$(field '.*committed: ([0-9]+) process.*' "$line")
ddp_secs=$(secs_of "$line") ddp_stored=$(stored_of "$line")
grep -q '^final' "$W/ddp.out" && fail "ddp: the job ended before the kill (raise CKPT_BENCH_TORCH_DDP_EPOCHS)"
stop_job
"$B/ckrun" -v --store "$W/ddp.store" --job ddp --resume -- "$PY" tests/torch/ddp.py "$DDP_EPOCHS" spawn 2 \
	1<>"$W/ddp.out" 2>>"$W/ddp.err" &
pid=$!
wait "$pid"
rc=$?
pid=
if [ "$rc" = 0 ] && grep -q 'restored from checkpoint' "$W/ddp.err" && cmp -s "$W/ddp.bare" "$W/ddp.out"; then
	ddp_same="yes (restored, output equal to the bare run's)"
else
	ddp_same="NO (exit $rc; see the work directory)"
	trap - EXIT
fi

{
echo
echo "| PyTorch (python3-torch $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null), CPU): first checkpoint | ckrun | target |"
echo "|---|---|---|"
echo "| MLP, one process: bytes stored | $(mb "$mlp_stored") MB of $(mb "$mlp_mem") MB of memory: $(ratio "$mlp_stored" "$mlp_dirty")x the $(mb "$mlp_dirty") MB of anonymous memory it wrote (Private_Dirty); every file page saved: $(mb "$all_stored") MB of $(mb "$all_mem") MB ($(ratio "$all_stored" "$mlp_dirty")x) | <= 1.2x |"
echo "| MLP: completion, frozen | ${mlp_secs} s (every file page saved: ${all_secs} s), frozen $(ms "$mlp_frozen") ms | <= 3 s |"
echo "| DataLoader, main + 2 persistent workers (${dl_n} processes, $(mb "$dl_mem") MB of memory): bytes stored | $(mb "${dl_stored[0]}") MB: $(ratio "${dl_stored[0]}" "${dl_alone[0]}")x the $(mb "${dl_alone[0]}") MB its main process alone stores (each worker's chunks, its deltas counted as stored: $(mb "${dl_alone[1]}"), $(mb "${dl_alone[2]}") MB), $(ratio "${dl_stored[0]}" "$mlp_stored")x the MLP's; then $(mb "${dl_stored[1]}"), $(mb "${dl_stored[2]}") MB | <= 1.5x |"
echo "| DataLoader: frozen, completion | $(join "${dl_frozen[@]}") ms; $(join "${dl_secs[@]}") s | < 200 ms |"
echo "| DataLoader: rounds that fell back to a forked snapshot | ${dl_fallbacks} of 3 | 0 |"
echo "| DDP over gloo, 2 ranks (${ddp_n} processes): frozen, completion, stored | ${ddp_frozen} ms, ${ddp_secs} s, $(mb "$ddp_stored") MB | < 200 ms |"
echo "| DDP: kill -9, resume | ${ddp_same} | identical |"
} | if [ -n "$out" ]; then tee -a "$out"; else cat; fi
[[ $ddp_same == yes* ]]
