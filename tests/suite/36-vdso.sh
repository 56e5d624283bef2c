#!/usr/bin/env bash
# vDSO handling at restore: the same kernel (the kernel's vDSO moved to the
# saved addresses), and the path taken when the restoring kernel's vDSO
# differs (old vDSO bytes restored, each function patched to jump to the
# new one), forced here with CKPT_TEST_VDSO_TRAMPOLINES=1. The restored
# process's maps must show the kernel's vDSO elsewhere and the old range as
# plain memory, and the clock calls must keep working.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$top/${BUILD:-build}
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-vdso.XXXXXX")
trap 'pkill -9 -f "$W" 2>/dev/null; rm -rf "$W"' EXIT
app=$B/tests/vdso/clockcheck

job_pid() { pgrep -P "$(pgrep -P "$1" | head -1)" | head -1; }

cycle() { # NAME [env...]
	local name=$1 pid old new rc
	shift
	rm -rf "$W/st"
	"$app" >"$W/bare"
	"$B/ckrun" --store "$W/st" --job v -- "$app" >"$W/out" 2>"$W/err" &
	pid=$!
	sleep 0.5
	old=$(grep '\[vdso\]' "/proc/$(job_pid $pid)/maps" | cut -d' ' -f1)
	kill -USR2 $pid
	for _ in $(seq 100); do [ -e "$W/st/v/manifests/00000001" ] && break; sleep 0.05; done
	kill -9 $pid; wait $pid 2>/dev/null
	env "$@" "$B/ckrun" -v --resume --store "$W/st" --job v -- "$app" 1<>"$W/out" 2>>"$W/err" &
	pid=$!
	sleep 0.8
	new=$(grep '\[vdso\]' "/proc/$(job_pid $pid)/maps" 2>/dev/null | cut -d' ' -f1)
	wait $pid
	rc=$?
	if [ $rc = 0 ] && grep -q "restored from" "$W/err" && cmp -s "$W/bare" "$W/out" &&
		{ { [ "$name" = same-kernel ] && [ "$new" = "$old" ]; } ||
		  { [ "$name" = trampolines ] && [ "$new" != "$old" ]; }; }; then
		echo "PASS vdso/$name: vDSO at ${old%%-*} before, ${new%%-*} after"
	else
		echo "FAIL vdso/$name (rc $rc, vDSO $old -> $new)"
		sed 's/^/    /' "$W/err"
	fi
}
cycle same-kernel
cycle trampolines CKPT_TEST_VDSO_TRAMPOLINES=1
