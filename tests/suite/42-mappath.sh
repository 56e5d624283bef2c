#!/usr/bin/env bash
# A restore at another site: ckrun --resume --map-path and --env.
#
# move: movedir (tests/apps) runs from a copy of itself in directory A, its
# working directory, with A/journal open for append and its first page
# mapped shared, CK_TEST_LR=0.1 in its environment. One checkpoint, more
# steps, kill -9 of the tree; `mv A B`. A resume without --map-path must
# exit 99 with one line naming A and the --map-path that finds it, and
# leave the job's checkpoints as they were. A resume with --map-path A=B
# --env CK_TEST_LR=0.5 (ckrun itself still has 0.1) must be a proven
# restore (h_proof) that prints 0.1 up to the checkpoint's step and 0.5
# from there, whose program and journal mapping are B's (the job checks
# /proc/self/exe and /proc/self/maps at every step), and that appends to
# B/journal after everything the killed run had written (the right offset:
# the file's end), the mapped page holding its last step.
# copy: the same with A copied to B (cp -a, new inodes, A removed) and the
# job's stdout a file in A, resumed into B's copy at its saved offset (the
# stdio file is the job's own again when ckrun's descriptor is the file at
# the mapped path, whatever inode was recorded).
# paths: mp_fifo and mp_unixsrv with their FIFO and listening socket in a
# directory under A (TMPDIR), checkpoint, kill -9, `mv A B`, resume with
# --map-path A=B (and an --env for every process): a proven restore with
# the bare run's output, and A not
# made again (a FIFO or socket re-made at its saved path makes its
# directories: only a mapped path leaves A alone).
# shmnames: mp_namedsem's named semaphores (/dev/shm/sem.NAME, which glibc
# maps through a temporary name it removes) are gone at the restore site:
# checkpoint, kill -9, remove the job's /dev/shm/sem.* names, resume: a
# proven restore whose job finds its names again (its sem_unlink at the
# end fails otherwise) with the bare run's output.
# gone: atomic_save (tests/api) cuts a checkpoint while its temporary is
# open, then renames the temporary over its result and is killed: that
# checkpoint can never come back (files are not rolled back). The resume
# goes back to the checkpoint before, with one warning line naming both
# and the temporary, and is a proven restore that saves again and prints
# the value its first run drew. With no checkpoint before it the resume
# exits 99 with one line naming the temporary, and changes nothing; so
# too when the checkpoints before it are an earlier run's (a fresh start
# of the same job, which numbers on from them).
# env: --env NAME= removes NAME in a restored job; a --resume with nothing
# stored starts the job with --env's value.
# badinput: malformed --map-path/--env, and either without --resume: exit
# 64 with one line naming the flag; the store is not touched.
#   CKPT_TEST_MAPPATH  parts to run (move copy paths shmnames gone env badinput)
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

PARTS=${CKPT_TEST_MAPPATH:-move copy paths shmnames gone env badinput}
APP=$H_APPS_BIN/movedir

# the store's checkpoints (files, sizes, times; not the job's lock, which
# every ckrun takes), to see that nothing changed them
store_state() { find "$1" -name lock -prune -o -printf '%P %s %T@\n' 2>/dev/null | sort; }

# expect_steps N K OLD NEW: "step i lr=OLD" for i < K, "step i lr=NEW"
# for K <= i < N, then "done N".
expect_steps() {
	local i
	for (( i = 0; i < $1; i++ )); do
		if (( i < $2 )); then echo "step $i lr=$3"; else echo "step $i lr=$4"; fi
	done
	echo "done $1"
}

# at DIR CMD...: CMD run in DIR (h_start too: its job is still our child)
at() {
	local dir=$1 r
	shift
	pushd "$dir" >/dev/null || return
	"$@"
	r=$?
	popd >/dev/null || return
	return "$r"
}

# missing_path D: after the move, a resume without --map-path is refused
# with one line, changing nothing.
missing_path() {
	local d=$1 rc before
	before=$(store_state "$d/store")
	: >"$d/nomap.err"
	at "$d" timeout -s KILL 60 "$CKRUN" --resume --store "$d/store" --job movedir -- "${H_CMD[@]}" \
		</dev/null >"$d/nomap.out" 2>"$d/nomap.err"
	rc=$?
	if [ "$rc" != 99 ]; then
		h_fail mappath/missing-path "exit status $rc without --map-path, want 99" "$d/nomap.err" "$d/nomap.out"
	elif [ "$(grep -c . "$d/nomap.err")" != 1 ] ||
		! grep -qF "$d/A is not here" "$d/nomap.err" || ! grep -qF -- "--map-path $d/A=NEW" "$d/nomap.err"; then
		h_fail mappath/missing-path "not one line naming $d/A and --map-path $d/A=NEW" "$d/nomap.err"
	elif [ "$(store_state "$d/store")" != "$before" ] || ! cmp -s "$d/B/journal" "$d/journal.killed"; then
		h_fail mappath/missing-path "the refused resume changed the store or the journal"
	else
		h_pass mappath/missing-path
	fi
}

# move_case NAME HOW: HOW mv (the directory renamed, stdout outside it) or
# copy (copied with cp -a, the original removed: new inodes, as at another
# site; stdout is a file in it, appended to by the resume through 1<>).
move_case() {
	local name=$1 how=$2 d=$H_WORK/$1 err out rc why k m n=80 steps i
	mkdir -p "$d/A"
	err=$d/ckrun.err out=$d/out
	[ "$how" = copy ] && out=$d/A/out
	: >"$err"
	cp "$APP" "$d/A/movedir"
	H_CMD=("$d/A/movedir" 2 here)
	export CK_TEST_LR=0.1 # ckrun's environment, and the first run's job's
	at "$d/A" h_start new "$out" "$err" --store "$d/store" --job movedir
	if ! h_wait_origin "$H_PID" "$err" 10000 || ! h_wait_line_count "$out" '^step ' 5 10000 "$H_PID"; then
		h_fail mappath/$name "the job did not start" "$err" "$out"
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" 'checkpoint 1 committed' 30000 "$H_PID"; then
		h_fail mappath/$name "the checkpoint did not commit" "$err"
		return
	fi
	# more steps after the cut: the journal holds them, the restore must
	# append after them
	steps=$(grep -c '^step ' "$out")
	h_wait_line_count "$out" '^step ' $((steps + 3)) 10000 "$H_PID"
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
	if ! h_group_gone "$H_PID"; then
		h_fail mappath/$name "the job survived kill -9"
		return
	fi
	if [ "$how" = copy ]; then
		cp -a "$d/A" "$d/B" && rm -rf "$d/A"
		out=$d/B/out
	else
		mv "$d/A" "$d/B"
	fi
	cp "$d/B/journal" "$d/journal.killed"
	H_CMD=("$d/B/movedir" 2 here)
	[ "$how" = mv ] && missing_path "$d"

	# with --map-path A=B and --env: restored, in B, appending to B/journal
	at "$d/B" h_start resume "$out" "$err" --resume --store "$d/store" --job movedir \
		--map-path "$d/A=$d/B" --env CK_TEST_LR=0.5
	h_wait "$H_PID" 60000
	rc=$?
	unset CK_TEST_LR
	k=$(grep -m1 -n 'lr=0.5' "$out" | cut -d: -f1)
	k=$(( ${k:-1} - 1 ))
	expect_steps "$n" "$k" 0.1 0.5 >"$d/expected"
	if [ "$rc" != 0 ]; then
		h_fail mappath/$name "the resumed job exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail mappath/$name "$why" "$err"
	elif (( k < 1 || k >= n )) || ! cmp -s "$out" "$d/expected"; then
		h_diff_excerpt "$d/expected" "$out" "$d/diff"
		h_fail mappath/$name "stdout is not 0.1 up to the checkpoint, then 0.5 (--env)" "$d/diff"
	else
		# the journal: what the killed run left, then steps k..n-1
		m=$(stat -c %s "$d/journal.killed")
		{ cat "$d/journal.killed"; for (( i = k; i < n; i++ )); do echo "step $i"; done; } >"$d/journal.want"
		# the mapped page holds the last step (written through the mapping)
		printf 'step %d\n' $((n - 1)) >"$d/page.want"
		head -c 4096 "$d/journal.want" | tail -c +"$(( $(stat -c %s "$d/page.want") + 1 ))" >>"$d/page.want"
		if ! cmp -s <(tail -c +4097 "$d/B/journal") <(tail -c +4097 "$d/journal.want"); then
			tail -c +4097 "$d/B/journal" | tail -n 5 >"$d/diff"
			h_fail mappath/$name "B/journal is not the killed run's $m bytes followed by steps $k..$((n - 1))" "$d/diff"
		elif ! cmp -s <(head -c 4096 "$d/B/journal") <(head -c 4096 "$d/page.want"); then
			h_fail mappath/$name "the journal's mapped page does not hold the last step"
		elif [ -e "$d/A" ]; then
			h_fail mappath/$name "the restore made $d/A again"
		else
			h_pass "mappath/$name"
		fi
	fi
}

# path_app APP: the FIFO or UNIX socket of APP under A, moved to B.
path_app() {
	local app=$1 d=$H_WORK/paths/$1 err out rc why res
	mkdir -p "$d/A"
	err=$d/ckrun.err out=$d/out
	: >"$err"
	h_app_cmd "$app" 1
	res=$(h_run_bare "$app" "$d/bare" "$d/bare.err" 60)
	if [ "${res% *}" != 0 ]; then
		h_fail "mappath/paths-$app" "the bare run failed" "$d/bare"
		return
	fi
	TMPDIR=$d/A h_start new "$out" "$err" --store "$d/store" --job "$app"
	h_wait_origin "$H_PID" "$err" 10000
	h_sleep_alive "$H_PID" 600
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" 'checkpoint 1 committed' 30000 "$H_PID"; then
		h_fail "mappath/paths-$app" "the checkpoint did not commit before the job ended" "$err"
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		return
	fi
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
	h_group_gone "$H_PID"
	mv "$d/A" "$d/B"
	# (--env too: each process of the job takes it before any resumes)
	TMPDIR=$d/B h_start resume "$out" "$err" --resume --store "$d/store" --job "$app" --map-path "$d/A=$d/B" \
		--env CK_TEST_LR=0.5
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail "mappath/paths-$app" "the resumed job exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail "mappath/paths-$app" "$why" "$err"
	elif ! cmp -s "$out" "$d/bare"; then
		h_diff_excerpt "$d/bare" "$out" "$d/diff"
		h_fail "mappath/paths-$app" "output differs from the bare run" "$d/diff"
	elif [ -e "$d/A" ]; then
		h_fail "mappath/paths-$app" "the restore made $d/A again: the path was not mapped" "$err"
	else
		h_pass "mappath/paths-$app"
	fi
}

part_shmnames() {
	local app=mp_namedsem d=$H_WORK/shmnames err out rc why res before names
	mkdir -p "$d/tmp"
	err=$d/ckrun.err out=$d/out
	: >"$err"
	h_app_cmd "$app" 1
	res=$(TMPDIR=$d/tmp h_run_bare "$app" "$d/bare" "$d/bare.err" 60)
	if [ "${res% *}" != 0 ]; then
		h_fail "mappath/shmnames" "the bare run failed" "$d/bare"
		return
	fi
	before=$(ls /dev/shm | grep '^sem\.ckt-namedsem-' | sort)
	TMPDIR=$d/tmp h_start new "$out" "$err" --store "$d/store" --job "$app"
	h_wait_origin "$H_PID" "$err" 10000
	h_sleep_alive "$H_PID" 600
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" 'checkpoint 1 committed' 30000 "$H_PID"; then
		h_fail "mappath/shmnames" "the checkpoint did not commit before the job ended" "$err"
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		return
	fi
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
	h_group_gone "$H_PID"
	names=$(ls /dev/shm | grep '^sem\.ckt-namedsem-' | sort | comm -13 <(echo "$before") -)
	if [ "$(echo "$names" | grep -c .)" != 3 ]; then
		h_fail "mappath/shmnames" "the job's three semaphore names were not in /dev/shm: '$names'" "$err"
		return
	fi
	(cd /dev/shm && rm -f $names) # another site: not there
	TMPDIR=$d/tmp h_start resume "$out" "$err" --resume --store "$d/store" --job "$app"
	h_wait "$H_PID" 60000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail "mappath/shmnames" "the resumed job exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail "mappath/shmnames" "$why" "$err"
	elif ! cmp -s "$out" "$d/bare"; then
		h_diff_excerpt "$d/bare" "$out" "$d/diff"
		h_fail "mappath/shmnames" "output differs from the bare run" "$d/diff"
	else
		h_pass "mappath/shmnames"
	fi
}

# gone_run D EARLY NAME: a run of atomic_save in D (a fresh start, the
# job's earlier checkpoints kept) killed once it renamed its temporary.
gone_run() {
	local d=$1 early=$2 name=$3
	H_CMD=("$H_BUILD/tests/api/atomic_save" "$d/dir" "$early")
	h_start new "$d/out" "$d/ckrun.err" --store "$d/store" --job gone
	if ! h_wait_line "$d/out" '^renamed$' 30000 "$H_PID"; then
		h_fail "$name" "the run did not save" "$d/ckrun.err" "$d/out"
		{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
		return 1
	fi
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
	return 0
}

# gone_case back|none|other: atomic_save with a checkpoint before its
# temporary is opened (back), without one (none), or without one but
# after an earlier run of the same job that left two (other: a fresh
# start numbers on from them; going back would restore that other run).
gone_case() {
	local how=$1 d=$H_WORK/gone-$1 err out rc why first before name=mappath/gone-$1
	mkdir -p "$d/dir"
	err=$d/ckrun.err out=$d/out
	: >"$err"
	if [ "$how" = other ]; then
		gone_run "$d" 1 "$name" || return
	fi
	gone_run "$d" "$([ "$how" = back ] && echo 1 || echo 0)" "$name" || return
	first=$(sed -n 's/^start //p' "$out")
	if [ "$how" != back ]; then
		before=$(store_state "$d/store")
		timeout -s KILL 60 "$CKRUN" --resume --store "$d/store" --job gone -- "${H_CMD[@]}" \
			</dev/null >"$d/none.out" 2>"$d/none.err"
		rc=$?
		if [ "$rc" != 99 ]; then
			h_fail "$name" "exit status $rc with no checkpoint of the run to go back to, want 99" "$d/none.err"
		elif [ "$(grep -c . "$d/none.err")" != 1 ] ||
			! grep -qF "$d/dir/model.tmp, a file it had open for writing, is gone" "$d/none.err"; then
			h_fail "$name" "not one line naming $d/dir/model.tmp" "$d/none.err"
		elif [ -s "$d/none.out" ] || [ "$(store_state "$d/store")" != "$before" ]; then
			h_fail "$name" "the job ran or the store changed" "$d/none.out"
		else
			h_pass "$name"
		fi
		return
	fi
	h_start resume "$out" "$err" --resume --store "$d/store" --job gone
	h_wait "$H_PID" 60000
	rc=$?
	printf 'start %s\nrenamed\nsaved, first drew %s\n' "$first" "$first" >"$d/expected"
	if [ "$rc" != 0 ]; then
		h_fail "$name" "the resume exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail "$name" "$why" "$err"
	elif [ "$(grep -F 'warning: checkpoint 2 of job gone cannot be restored: ' "$err" |
		grep -F "$d/dir/model.tmp, a file it had open for writing, is gone" |
		grep -cF 'going back to checkpoint 1')" != 1 ] || ! grep -q 'restored from checkpoint 1 in' "$err"; then
		h_fail "$name" "no line going back from checkpoint 2 (naming $d/dir/model.tmp) to 1" "$err"
	elif [ -z "$first" ] || ! cmp -s "$out" "$d/expected"; then
		h_diff_excerpt "$d/expected" "$out" "$d/diff"
		h_fail "$name" "the resumed job did not save again as its first run" "$d/diff"
	else
		h_pass "$name"
	fi
}

part_env() {
	local d=$H_WORK/env err out rc why k k0 n=20
	mkdir -p "$d"
	err=$d/ckrun.err out=$d/out
	: >"$err"
	export CK_TEST_LR=0.1
	# a --resume with nothing stored: a fresh start with --env's value
	H_CMD=("$APP" 0.5)
	h_start new "$out" "$err" --resume --store "$d/store" --job envjob --env CK_TEST_LR=0.7
	if ! h_wait_origin "$H_PID" "$err" 10000 || ! h_wait_line_count "$out" '^step ' 5 10000 "$H_PID"; then
		h_fail mappath/env-fresh "the job did not start" "$err" "$out"
		unset CK_TEST_LR
		return
	fi
	# stop: checkpoint and exit 75; the job runs no step after the cut
	kill -TERM "$H_PID"
	h_wait "$H_PID" 30000
	rc=$?
	k0=$(grep -c '^step ' "$out")
	if [ "$rc" != 75 ]; then
		h_fail mappath/env-fresh "the stop exited $rc, want 75" "$err"
		unset CK_TEST_LR
		return
	elif grep -v 'lr=0.7$' "$out" | grep -q .; then
		h_fail mappath/env-fresh "a fresh start under --resume --env did not see CK_TEST_LR=0.7" "$out"
	else
		h_pass mappath/env-fresh
	fi
	# NAME= removes NAME in the restored job (whose step k0 may have read
	# the environment before the cut and print it after)
	h_start resume "$out" "$err" --resume --store "$d/store" --job envjob --env CK_TEST_LR=
	h_wait "$H_PID" 60000
	rc=$?
	unset CK_TEST_LR
	k=$(grep -m1 -n 'lr=unset' "$out" | cut -d: -f1)
	k=$(( ${k:-1} - 1 ))
	expect_steps "$n" "$k" 0.7 unset >"$d/expected"
	if [ "$rc" != 0 ]; then
		h_fail mappath/env-unset "the resumed job exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail mappath/env-unset "$why" "$err"
	elif (( k < k0 || k > k0 + 1 )) || ! cmp -s "$out" "$d/expected"; then
		h_diff_excerpt "$d/expected" "$out" "$d/diff"
		h_fail mappath/env-unset "CK_TEST_LR is not unset from step $k0 after --env CK_TEST_LR=" "$d/diff"
	else
		h_pass mappath/env-unset
	fi
}

# bad NAME WORD ARGS...: exit 64, first line naming WORD, the job not run,
# the store not made.
bad() {
	local name=$1 word=$2 dir=$H_WORK/badinput/$1 rc first
	shift 2
	mkdir -p "$dir"
	timeout -s KILL 30 "$CKRUN" --store "$dir/store" --job j "$@" -- sh -c "echo ran >'$dir/marker'" \
		</dev/null >"$dir/out" 2>"$dir/err"
	rc=$?
	first=$(grep -m1 -v '^[[:space:]]*$' "$dir/err")
	if [ "$rc" != 64 ]; then
		h_fail "mappath/badinput-$name" "exit status $rc, want 64" "$dir/err"
	elif [ -e "$dir/marker" ] || [ -e "$dir/store" ]; then
		h_fail "mappath/badinput-$name" "the job ran or the store was made"
	elif [ "$(grep -c . "$dir/err")" != 1 ] || [[ $first != *"$word"* ]]; then
		h_fail "mappath/badinput-$name" "not one line naming '$word'" "$dir/err"
	else
		h_pass "mappath/badinput-$name"
	fi
}

part_badinput() {
	bad map-no-eq "--map-path '/a'" --resume --map-path /a
	bad map-relative-old "OLD must be an absolute path" --resume --map-path a=/b
	bad map-relative-new "NEW must be an absolute path" --resume --map-path /a=b
	bad map-dotdot "'..' component" --resume --map-path /a/../b=/c
	bad map-root "OLD is '/'" --resume --map-path /=/x
	bad map-twice "mapped twice" --resume --map-path /a=/b --map-path /a/=/c
	bad map-no-resume "--map-path is for a resume" --map-path /a=/b
	bad env-no-eq "--env 'LR'" --resume --env LR
	bad env-bad-name "bad name" --resume --env 1LR=2
	bad env-own-name "ckrun sets or removes LD_PRELOAD" --resume --env LD_PRELOAD=/x.so
	bad env-no-resume "--env is for a resume" --env LR=1
}

main() {
	local p
	h_seed_init
	if ! h_have_ckrun || [ ! -x "$APP" ]; then
		h_fail mappath "ckrun or movedir is not built; run make"
		return 1
	fi
	h_init mappath
	for p in $PARTS; do
		case $p in
		move) move_case move mv ;;
		copy) move_case copy copy ;;
		paths) path_app mp_fifo; path_app mp_unixsrv ;;
		shmnames) part_shmnames ;;
		gone) gone_case back; gone_case none; gone_case other ;;
		env) part_env ;;
		badinput) part_badinput ;;
		*) h_fail mappath "unknown part '$p'" ;;
		esac
	done
	return "$H_FAILED"
}

main "$@"
