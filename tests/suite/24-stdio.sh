#!/usr/bin/env bash
# After a restart the job's stdin/stdout/stderr are the new ckrun's. A
# stdout that was a regular file (`ckrun ... > log`) is the one exception
# kept: when the new ckrun's stdout is that same file, still holding the
# bytes up to the saved offset (`1<> log`, `>> log`), the job goes on
# writing at its offset, so the lines it wrote after the checkpoint are
# written over rather than twice. Cases, each with memgrow (which flushes
# its first lines, then checkpoints after them):
#   elsewhere  resumed with stdout to another file: that file gets the rest
#   same       resumed with 1<> the same file: the file equals a bare run
#   truncated  resumed with > the same file (emptied): the rest, from 0
#   pipe       resumed into a pipe: the pipe gets the rest
# "the rest" is the bare run's output after the saved offset, which
# `ckpt inspect` prints for descriptor 1.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$top/${BUILD:-build}
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-stdio.XXXXXX")
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT
APP=("$B/tests/apps/memgrow" 0.5 16 32)
FAILED=0

fail() {
	echo "FAIL stdio/$1: $2"
	for f in "${@:3}"; do
		[ -e "$f" ] && sed 's/^/    | /' "$f" | head -n 20
	done
	FAILED=1
}

"${APP[@]}" >"$W/bare" 2>/dev/null

# run1 CASE: first run into $W/CASE/o1, one checkpoint after the first
# flushed lines, then kill -9 of the group. Prints the saved offset.
run1() {
	local d=$W/$1 i pid off
	mkdir -p "$d"
	setsid "$B/ckrun" --store "$d/s" --job mg -- "${APP[@]}" </dev/null >"$d/o1" 2>"$d/e1" &
	pid=$!
	for (( i = 0; i < 100; i++ )); do
		grep -q 'phase 1 done' "$d/o1" 2>/dev/null && break
		sleep 0.05
	done
	kill -USR2 "$pid"
	for (( i = 0; i < 100; i++ )); do
		[ -n "$(ls "$d/s/mg/manifests" 2>/dev/null)" ] && break
		sleep 0.05
	done
	{ kill -9 -- "-$pid"; wait "$pid"; } 2>/dev/null
	off=$("$B/ckpt" inspect --store "$d/s" mg 2>/dev/null | awk '$1 == 1 && $2 == "file" { sub(/^@/, "", $5); print $5; exit }')
	echo "${off:-none}"
}

# check CASE GOT OFF: GOT must equal the bare output after offset OFF.
check() {
	local c=$1 got=$2 off=$3
	if [ "$off" = none ] || [ "$off" = 0 ]; then
		fail "$c" "no checkpoint with a saved stdout offset (got '$off')" "$W/$c/e1"
		return
	fi
	tail -c +$(( off + 1 )) "$W/bare" >"$W/$c/want"
	if cmp -s "$W/$c/want" "$got"; then
		echo "PASS stdio/$c: the rest after byte $off went to the new ckrun's stdout"
	else
		diff "$W/$c/want" "$got" >"$W/$c/diff" 2>&1
		fail "$c" "output after the restore differs from the bare run's after byte $off" "$W/$c/diff" "$W/$c/e2"
	fi
}

off=$(run1 elsewhere)
"$B/ckrun" --store "$W/elsewhere/s" --job mg --resume -- "${APP[@]}" </dev/null >"$W/elsewhere/o2" 2>"$W/elsewhere/e2"
if grep -q 'phase 2 done' "$W/elsewhere/o1"; then
	fail elsewhere "the restored job wrote into the first run's file" "$W/elsewhere/o1"
else
	check elsewhere "$W/elsewhere/o2" "$off"
fi

off=$(run1 same)
"$B/ckrun" --store "$W/same/s" --job mg --resume -- "${APP[@]}" </dev/null 1<>"$W/same/o1" 2>"$W/same/e2"
if cmp -s "$W/bare" "$W/same/o1"; then
	echo "PASS stdio/same: resumed into the same file, which equals a bare run's output"
else
	diff "$W/bare" "$W/same/o1" >"$W/same/diff" 2>&1
	fail same "the file differs from a bare run's output" "$W/same/diff" "$W/same/e2"
fi

off=$(run1 truncated)
"$B/ckrun" --store "$W/truncated/s" --job mg --resume -- "${APP[@]}" </dev/null >"$W/truncated/o1" 2>"$W/truncated/e2"
check truncated "$W/truncated/o1" "$off"

off=$(run1 pipe)
"$B/ckrun" --store "$W/pipe/s" --job mg --resume -- "${APP[@]}" </dev/null 2>"$W/pipe/e2" | cat >"$W/pipe/o2"
check pipe "$W/pipe/o2" "$off"

exit "$FAILED"
