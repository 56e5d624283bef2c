#!/usr/bin/env bash
# vDSO handling at restore: the same kernel (the kernel's vDSO moved to the
# saved addresses), and the path taken when the restoring kernel's vDSO
# differs (old vDSO bytes restored, each function patched to jump to the
# new one), forced here with CKPT_TEST_VDSO_TRAMPOLINES=1. The restored
# process's maps must show the kernel's vDSO elsewhere and the old range as
# plain memory, and the clock calls must keep working; the resume must be a
# restore (h_proof), and both vDSO addresses must have been read.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

APP=$H_BUILD/tests/vdso/clockcheck

# job_pid CKRUN-PID: the job's process (ckrun -> the namespace's init -> job).
job_pid() {
	local init
	init=$(pgrep -P "$1" | head -n 1)
	[ -n "$init" ] && pgrep -P "$init" | head -n 1
}

# vdso_of CKRUN-PID MS: the job's [vdso] range, read once the job is up.
vdso_of() {
	local end=$(( $(h_now_ms) + $2 )) p r
	while (( $(h_now_ms) < end )); do
		p=$(job_pid "$1")
		r=$([ -n "$p" ] && grep '\[vdso\]' "/proc/$p/maps" 2>/dev/null | cut -d' ' -f1)
		[ -n "$r" ] && { echo "$r"; return 0; }
		sleep 0.02
	done
	return 1
}

cycle() { # NAME (same-kernel, or trampolines: CKPT_TEST_VDSO_TRAMPOLINES=1)
	local name=$1 d=$H_WORK/$1 old new rc why
	mkdir -p "$d"
	: >"$d/err"
	H_CMD=("$APP")
	h_start new "$d/out" "$d/err" --store "$d/st" --job v
	h_wait_origin "$H_PID" "$d/err" 10000
	old=$(vdso_of "$H_PID" 5000)
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" "checkpoint 1 committed" 30000 "$H_PID"
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	if [ "$name" = trampolines ]; then
		CKPT_TEST_VDSO_TRAMPOLINES=1 h_start resume "$d/out" "$d/err" --store "$d/st" --job v --resume
	else
		h_start resume "$d/out" "$d/err" --store "$d/st" --job v --resume
	fi
	h_wait_line "$d/err" "restored from" 60000 "$H_PID"
	new=$(vdso_of "$H_PID" 5000)
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail "vdso/$name" "the resumed job exited $rc" "$d/out" "$d/err"
	elif [ -z "$old" ] || [ -z "$new" ]; then
		h_fail "vdso/$name" "could not read the job's vDSO before ('$old') or after ('$new') the restore" "$d/err"
	elif ! cmp -s "$H_WORK/bare" "$d/out"; then
		h_fail "vdso/$name" "output differs from a bare run" "$d/out" "$d/err"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "vdso/$name" "$why" "$d/err"
	elif { [ "$name" = same-kernel ] && [ "$new" != "$old" ]; } ||
	     { [ "$name" = trampolines ] && [ "$new" = "$old" ]; }; then
		h_fail "vdso/$name" "vDSO at $old before, $new after" "$d/err"
	else
		h_pass "vdso/$name: vDSO at ${old%%-*} before, ${new%%-*} after"
	fi
}

main() {
	h_init vdso
	"$APP" >"$H_WORK/bare"
	cycle same-kernel
	cycle trampolines
	return "$H_FAILED"
}

main "$@"
