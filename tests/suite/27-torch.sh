#!/usr/bin/env bash
# PyTorch (Debian's python3-torch, CPU) under ckrun: a training loop fed by
# a DataLoader with 2 worker processes, default settings and with
# persistent workers; DistributedDataParallel over gloo with 2 and 4 ranks
# started by torch.multiprocessing.spawn and by torchrun's code (its agent,
# TCPStore, the ranks and their loopback TCP are all part of the job);
# numpy on OpenBLAS's thread pool; a job that writes its own torch.save
# checkpoints every epoch (its files are its business: they are not rolled
# back, and must end loadable and equal to the bare run's). Each case: a checkpoint after
# the origin and a few epochs, kill -9 of the whole tree, the job's
# temporary directory removed (the pool's listener lived there; another
# host would not have it), a resume that must restore (proof) and end with
# the bare run's bytes, epoch losses and the final parameters' digest alike.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
h_init torch
EPOCHS=${CKPT_TEST_TORCH_EPOCHS:-40}
DDP_EPOCHS=${CKPT_TEST_TORCH_DDP_EPOCHS:-60}
DDP4_EPOCHS=${CKPT_TEST_TORCH_DDP4_EPOCHS:-40}
NP_EPOCHS=${CKPT_TEST_TORCH_NP_EPOCHS:-40}
APP=$H_TOP/tests/torch/dataloader.py

# one_case NAME ARGS...: python3 ARGS under ckrun. Hooks, when set (each
# called with the case's directory; a non-empty answer on stdout fails the
# case with it): CASE_LIVE once checkpoint 1 has committed and the job is
# still running, CASE_CHECK after a resume that passed; either may leave
# a line in $d/note for the PASS line. TORCH_SAVES is
# $d/bare-saves in the bare run and $d/saves under ckrun (selfsave.py).
# Each PASS line ends with the case's wall time (bare run included).
# CKPT_TEST_TORCH: only these cases (names, spaces or commas).
one_case() {
	local name=$1 d=$H_WORK/$1 rc why res t0 tb note
	shift
	if [ -n "${CKPT_TEST_TORCH:-}" ] && [[ " ${CKPT_TEST_TORCH//,/ } " != *" $name "* ]]; then
		return
	fi
	t0=$(h_now_ms)
	mkdir -p "$d/tmp"
	# shellcheck disable=SC2034 # read by the harness
	H_CMD=("$PYTHON" "$@")
	res=$(TORCH_SAVES=$d/bare-saves h_run_bare x "$d/bare.out" "$d/bare.err" 600)
	if [ "${res% *}" != 0 ]; then
		h_fail "torch/$name" "bare run failed (${res% *})" "$d/bare.err"
		return
	fi
	: >"$d/err"
	TORCH_SAVES=$d/saves TMPDIR=$d/tmp h_start new "$d/out" "$d/err" --store "$d/s" --job "$name"
	if ! h_wait_origin "$H_PID" "$d/err" 60000 || ! h_wait_line "$d/out" "^epoch 1 " 120000 "$H_PID"; then
		h_fail "torch/$name" "the job did not start its epochs" "$d/err" "$d/out"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	# A round refused while the job runs on is asked again (up to 5 times):
	# a worker's resource sharer closes its end of a connection that still
	# carries the descriptor it sent, which no round can save until the
	# main process has read it (NOTES, "Descriptors in flight"). The PASS
	# line says so.
	local tries=0
	kill -USR2 "$H_PID"
	while :; do
		h_wait_line_count "$d/err" "checkpoint [0-9]+ (committed|of job $name failed)" $((tries + 1)) 180000 "$H_PID"
		grep -Eq "checkpoint [0-9]+ committed" "$d/err" && break
		if (( ++tries >= 5 )) || ! grep -q "keeps running" "$d/err" || ! h_alive "$H_PID"; then
			h_fail "torch/$name" "no checkpoint committed after $tries request(s) (or the job ended first)" "$d/err"
			{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
			return
		fi
		sleep 0.3
		kill -USR2 "$H_PID"
	done
	(( tries )) && printf 'committed at request %d, after: %s' $((tries + 1)) \
		"$(grep -m1 -o 'failed: .*' "$d/err" | cut -c9-120)" >>"$d/note"
	grep -c '^epoch ' "$d/out" >"$d/epochs-at-commit"
	h_sleep_alive "$H_PID" 1500
	if ! h_alive "$H_PID"; then
		h_fail "torch/$name" "the job ended before the kill: nothing to prove (raise CKPT_TEST_TORCH_EPOCHS)" "$d/err"
		return
	fi
	if [ -n "${CASE_LIVE:-}" ] && why=$("$CASE_LIVE" "$d") && [ -n "$why" ]; then
		h_fail "torch/$name" "$why" "$d/err"
		{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 10000; } >/dev/null 2>&1
	if ! h_group_gone "$H_PID"; then
		h_fail "torch/$name" "processes survived kill -9" "$d/err"
		return
	fi
	rm -rf "${d:?}/tmp" && mkdir -p "$d/tmp"
	TORCH_SAVES=$d/saves TMPDIR=$d/tmp h_start resume "$d/out" "$d/err" --store "$d/s" --job "$name" --resume
	h_wait "$H_PID" 600000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$d/bare.out" "$d/out"; then
		h_fail "torch/$name" "resume: status $rc, or the output differs from the bare run's" "$d/err" "$d/out"
	elif ! why=$(h_proof "$d/err"); then
		h_fail "torch/$name" "$why" "$d/err"
	elif tb=$(after_resume "$d/err" | grep -m1 'Traceback'); then
		h_fail "torch/$name" "the resumed job printed a traceback: $tb" "$d/err"
	elif [ -n "${CASE_CHECK:-}" ] && why=$("$CASE_CHECK" "$d") && [ -n "$why" ]; then
		h_fail "torch/$name" "$why" "$d/err" "$d/out"
	else
		note=$(cat "$d/note" 2>/dev/null)
		h_pass "torch/$name: $(grep -m1 -E 'checkpoint [0-9]+ committed' "$d/err" | sed 's/.*committed: //; s/, (frozen.*//; s/ (frozen.*//')${note:+; $note}; $(( ($(h_now_ms) - t0) / 1000 )) s"
	fi
}

# after_resume ERR: the part of ERR the last run (the resume) wrote.
after_resume() {
	local off
	off=$(tail -n 1 "$1.runs")
	tail -c "+$(( ${off%% *} + 1 ))" "$1"
}

# npblas_live DIR: the numpy job really runs OpenBLAS's thread pool:
# OpenBLAS mapped, and a thread besides the main one has used at least a
# quarter of the main thread's CPU time (it computes its share of every
# product; ckrun's own thread in the job uses next to none).
npblas_live() {
	local p pid='' t ticks main=0 best=0 n=0
	local -a f
	for p in $(h_tree_members "$H_PID"); do
		# the interpreter itself (ckrun's command line names the script too)
		[[ $(readlink "/proc/$p/exe" 2>/dev/null) == */python3* ]] || continue
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q 'npblas\.py' && pid=$p
	done
	if [ -z "$pid" ]; then
		echo "no process of the job runs npblas.py"
		return
	fi
	if ! grep -q 'libopenblas' "/proc/$pid/maps"; then
		echo "numpy does not use OpenBLAS (libblas.so.3 is $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3))"
		return
	fi
	for t in /proc/"$pid"/task/*; do
		n=$(( n + 1 ))
		# utime + stime: fields 14 and 15, 12 and 13 after "pid (comm) "
		read -r -a f <<<"$(sed 's/.*) //' "$t/stat")"
		ticks=$(( f[11] + f[12] ))
		if [ "${t##*/}" = "$pid" ]; then
			main=$ticks
		elif (( ticks > best )); then
			best=$ticks
		fi
	done
	if (( best == 0 || best * 4 < main )); then
		echo "OpenBLAS ran no thread pool: $n threads, the busiest besides the main one used $best ticks, the main one $main"
		return
	fi
	echo "$n threads, $best ticks in an OpenBLAS thread, $main in the main one" >"$1/note"
}

# selfsave_live DIR: the job's own files as the kill finds them.
selfsave_live() {
	cp -a "$1/saves" "$1/saves-at-kill"
}

# selfsave_check DIR: after the resume, the job's own files are what it
# wrote last (a resumed run writes again the epochs past its checkpoint);
# each loads (model and optimizer) and holds the bare run's parameters for
# its epoch; last.pt holds the final ones. Files written after the
# checkpoint were there at the restore (else the rule was not tried).
selfsave_check() {
	local d=$1 cut killed final
	"$PYTHON" "$H_TOP/tests/torch/selfsave.py" check "$d/bare-saves" >"$d/bare-saves.txt" 2>&1
	if ! "$PYTHON" "$H_TOP/tests/torch/selfsave.py" check "$d/saves" >"$d/saves.txt" 2>&1; then
		echo "the job's own torch.save files do not load: $(tail -n 1 "$d/saves.txt")"
		return
	fi
	if ! cmp -s "$d/bare-saves.txt" "$d/saves.txt"; then
		echo "the job's own files differ from the bare run's: $(diff "$d/bare-saves.txt" "$d/saves.txt" | head -n 3 | tr '\n' ' ')"
		return
	fi
	final=$(sed -n 's/^final //p' "$d/out")
	if ! grep -q "^last.pt epoch $(( EPOCHS - 1 )) $final\$" "$d/saves.txt"; then
		echo "last.pt does not hold the final parameters ($final)"
		return
	fi
	cut=$(cat "$d/epochs-at-commit")
	killed=$(find "$d/saves-at-kill" -name 'epoch-*.pt' | wc -l)
	if (( killed <= cut )); then
		echo "no file written after checkpoint 1 was there at the restore ($killed files, $cut epochs at the commit)"
		return
	fi
	echo "$(( killed - cut )) epoch files newer than the checkpoint kept, rewritten by the resumed job" >"$d/note"
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
	one_case ddp-spawn4 "$H_TOP/tests/torch/ddp.py" "$DDP4_EPOCHS" spawn 4
	one_case ddp-torchrun4 "$H_TOP/tests/torch/ddp.py" "$DDP4_EPOCHS" torchrun 4
	CASE_LIVE=npblas_live one_case numpy-openblas "$H_TOP/tests/torch/npblas.py" "$NP_EPOCHS"
	CASE_LIVE=selfsave_live CASE_CHECK=selfsave_check one_case selfsave "$H_TOP/tests/torch/selfsave.py" "$EPOCHS"
}

main
