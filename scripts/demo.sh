#!/usr/bin/env bash
# make demo: a training job is preempted and resumed without losing work.
#  1. run tests/apps/sgd bare and note its final checksum;
#  2. run it under ckrun in a temporary store, send SIGTERM half-way (what a
#     scheduler does before preemption): ckrun checkpoints, stops the job and
#     exits 75;
#  3. run the very same command again with --resume: the job continues from
#     the checkpoint and finishes;
#  4. the two checksums must match.
# Builds nothing itself: `make demo` builds first.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
CKRUN=${CKRUN:-$BUILD/ckrun}
SGD=$BUILD/tests/apps/sgd
STOP_AFTER_MS=${CKPT_DEMO_STOP_MS:-2000}

say() { printf 'demo: %s\n' "$*"; }
die() { say "FAILED: $*"; exit 1; }

tmp=
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 -- "-$pid" 2>/dev/null
	[ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

checksum() { sed -n 's/^sgd: final checksum //p' "$1"; }

main() {
	local t0 rc bare ck
	[ -x "$SGD" ] || die "$SGD is missing; run make"
	[ -x "$CKRUN" ] || die "$CKRUN is missing; run make"
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-demo.XXXXXX") || die "mktemp"
	local store=$tmp/store out=$tmp/sgd.out err=$tmp/ckrun.err
	local -a cmd=("$CKRUN" --store "$store" --job sgd-demo)

	say "1. bare run: $SGD"
	t0=$(date +%s%N)
	"$SGD" >"$tmp/bare.out" </dev/null || die "bare run exited $?"
	bare=$(checksum "$tmp/bare.out")
	say "   took $(( ($(date +%s%N) - t0) / 1000000 )) ms, final checksum $bare"

	say "2. under ckrun: ${cmd[*]} -- $SGD"
	setsid "${cmd[@]}" -- "$SGD" </dev/null >"$out" 2>"$err" &
	pid=$!
	sleep "$(( STOP_AFTER_MS / 1000 )).$(printf %03d $(( STOP_AFTER_MS % 1000 )))"
	say "   after ${STOP_AFTER_MS} ms: SIGTERM to ckrun (preemption)"
	kill -TERM "$pid" 2>/dev/null || die "the job ended before the SIGTERM; try CKPT_DEMO_STOP_MS=1000"
	wait "$pid"
	rc=$?
	pid=
	[ "$rc" = 75 ] || { cat "$err" >&2; die "ckrun exited $rc after SIGTERM, expected 75"; }
	say "   ckrun exited 75 (checkpointed, stopped); $(stat -c %s "$out") bytes of output so far"
	say "   (the rest sits in the job's stdio buffer, which is saved with the job)"

	say "3. the same command with --resume"
	setsid "${cmd[@]}" --resume -- "$SGD" </dev/null 1<>"$out" 2>>"$err" &
	pid=$!
	wait "$pid"
	rc=$?
	pid=
	[ "$rc" = 0 ] || { cat "$err" >&2; die "resumed run exited $rc"; }
	ck=$(checksum "$out")
	say "   finished, final checksum $ck"

	say "4. bare $bare, checkpointed+resumed $ck"
	if [ -z "$bare" ] || [ "$bare" != "$ck" ]; then
		die "checksums differ"
	fi
	cmp -s "$tmp/bare.out" "$out" || die "checksums match but the outputs differ"
	say "checksums match"
}

main "$@"
