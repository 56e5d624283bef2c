#!/usr/bin/env bash
# PyTorch (Debian's python3-torch, CPU) under ckrun: a training loop fed by
# a DataLoader with 2 worker processes, default settings and with
# persistent workers; DistributedDataParallel over gloo with 2 ranks
# started by torch.multiprocessing.spawn and by torchrun's code (its agent,
# TCPStore, the ranks and their loopback TCP are all part of the job). Each case: a checkpoint after
# the origin and a few epochs, kill -9 of the whole tree, the job's
# temporary directory removed (the pool's listener lived there; another
# host would not have it), a resume that must restore (proof) and end with
# the bare run's bytes, epoch losses and the final parameters' digest alike.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
h_init torch
EPOCHS=${CKPT_TEST_TORCH_EPOCHS:-40}
DDP_EPOCHS=${CKPT_TEST_TORCH_DDP_EPOCHS:-60}
APP=$H_TOP/tests/torch/dataloader.py

one_case() { # one_case NAME ARGS...: python3 ARGS under ckrun
	local name=$1 d=$H_WORK/$1 rc why res
	shift
	mkdir -p "$d/tmp"
	# shellcheck disable=SC2034 # read by the harness
	H_CMD=("$PYTHON" "$@")
	res=$(h_run_bare x "$d/bare.out" "$d/bare.err" 600)
	if [ "${res% *}" != 0 ]; then
		h_fail "torch/$name" "bare run failed (${res% *})" "$d/bare.err"
		return
	fi
	: >"$d/err"
	TMPDIR=$d/tmp h_start new "$d/out" "$d/err" --store "$d/s" --job "$name"
	if ! h_wait_origin "$H_PID" "$d/err" 60000 || ! h_wait_line "$d/out" "^epoch 1 " 120000 "$H_PID"; then
		h_fail "torch/$name" "the job did not start its epochs" "$d/err" "$d/out"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/err" "checkpoint 1 committed" 180000 "$H_PID"; then
		h_fail "torch/$name" "checkpoint 1 did not commit (or the job ended first)" "$d/err"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	h_sleep_alive "$H_PID" 1500
	if ! h_alive "$H_PID"; then
		h_fail "torch/$name" "the job ended before the kill: nothing to prove (raise CKPT_TEST_TORCH_EPOCHS)" "$d/err"
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 10000; } >/dev/null 2>&1
	if ! h_group_gone "$H_PID"; then
		h_fail "torch/$name" "processes survived kill -9" "$d/err"
		return
	fi
	rm -rf "${d:?}/tmp" && mkdir -p "$d/tmp"
	TMPDIR=$d/tmp h_start resume "$d/out" "$d/err" --store "$d/s" --job "$name" --resume
	h_wait "$H_PID" 600000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare.out" "$d/out"; then
		h_fail "torch/$name" "resume: status $rc, or the output differs from the bare run's" "$d/err" "$d/out"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "torch/$name" "$why" "$d/err"
	else
		h_pass "torch/$name: $(grep -m1 'checkpoint 1 committed' "$d/err" | sed 's/.*committed: //; s/, (frozen.*//; s/ (frozen.*//')"
	fi
}

main() {
	if ! h_have_ckrun; then
		h_fail torch "ckrun is not built ($CKRUN); run make"
		return
	fi
	if ! CKPT_DEPS_EXTRA="torch" "$H_TOP/scripts/deps.sh" >"$H_WORK/deps.log" 2>&1; then
		h_fail torch "python3-torch cannot be installed (scripts/deps.sh)" "$H_WORK/deps.log"
		return
	fi
	one_case dataloader "$APP" "$EPOCHS" default
	one_case dataloader-persistent "$APP" "$EPOCHS" persistent
	one_case ddp-spawn "$H_TOP/tests/torch/ddp.py" "$DDP_EPOCHS" spawn 2
	one_case ddp-torchrun "$H_TOP/tests/torch/ddp.py" "$DDP_EPOCHS" torchrun 2
}

main
