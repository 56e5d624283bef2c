#!/usr/bin/env bash
# Pages of private file mappings that are the file's are not saved: the
# restore maps the file again, and refuses a file that is not the one saved.
#
# filemap_cow (tests/apps) maps TMPDIR/filemap_cow.X/lib.dat read-only
# twice, some pages copied on write. One checkpoint, kill -9 of the tree.
# The checkpoint must hold lib.dat's untouched pages as filepages regions
# (ckpt inspect), and the file's content digest (SHA-256), read once: a
# second checkpoint takes it from the first (one "content digests" line in
# ckrun -v's output for the two). Then, each refused with exit 99 and one
# line naming the process, the file and what changed, the store as it was:
#   rewrite  lib.dat rewritten in place with other bytes, its size and
#            mtime set back (touch -d): its contents differ
#   forged   another file of the same size and mtime (touch -r) put in its
#            place: its contents differ (the identity alone would pass it)
#   size     one page more
#   gone     removed
# copy: lib.dat replaced by a plain copy of the original (cp: another inode
# and another mtime, as after a transfer that keeps neither): accepted by
# its digest, the resume is a proven restore (h_proof) that passes the
# job's own checks of every page.
#
# cowpages: neither are a forked worker's pages that are its parent's.
# mp_cowpages (tests/apps: 16 MiB of bytes that do not compress, two
# forked workers flipping bytes in a few pages each step) checkpointed
# once: ckpt inspect counts chunks stored as the pages that differ from
# the parent's, and the round stores less than 1.5 times the buffer (each
# worker stored whole would make it 3); kill -9, resume: a proven restore
# with the bare run's output (every process's digest of its whole buffer at
# every step).
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

APP=$H_APPS_BIN/filemap_cow

store_state() { find "$1" -name lock -prune -o -printf '%P %s %T@\n' 2>/dev/null | sort; }

# refused NAME D F WHAT: a resume exits 99 with one line naming F and WHAT,
# and changes nothing in the store.
refused() {
	local name=$1 d=$2 f=$3 what=$4 rc before
	before=$(store_state "$d/store")
	TMPDIR=$d/tmp timeout -s KILL 60 "$CKRUN" --resume --store "$d/store" --job fp -- "${H_CMD[@]}" \
		</dev/null >"$d/$name.out" 2>"$d/$name.err"
	rc=$?
	if [ "$rc" != 99 ]; then
		h_fail "filepages/$name" "exit status $rc, want 99" "$d/$name.err" "$d/$name.out"
	elif [ "$(grep -c . "$d/$name.err")" != 1 ] || ! grep -qF "$f" "$d/$name.err" ||
		! grep -q "^ckrun: .*process [0-9]*: .*$what" "$d/$name.err"; then
		h_fail "filepages/$name" "not one line naming the process, $f and '$what'" "$d/$name.err"
	elif [ "$(store_state "$d/store")" != "$before" ]; then
		h_fail "filepages/$name" "the refused resume changed the store"
	else
		h_pass "filepages/$name"
	fi
}

# wait_file DIR MS PID: until DIR holds filemap_cow.X/lib.dat
wait_file() {
	local end=$(( $(h_now_ms) + $2 ))
	until compgen -G "$1/filemap_cow.*/lib.dat" >/dev/null; do
		(( $(h_now_ms) < end )) && h_alive "$3" || return 1
		sleep 0.02
	done
}

cowpages() {
	local d=$H_WORK/cow err out rc why stored n
	mkdir -p "$d"
	err=$d/ckrun.err out=$d/out
	h_app_cmd mp_cowpages 3
	why=$(h_run_bare mp_cowpages "$d/bare" "$d/bare.err" 120)
	if [ "${why% *}" != 0 ]; then
		h_fail filepages/cowpages "bare run failed" "$d/bare.err"
		return
	fi
	: >"$err"
	h_start new "$out" "$err" --store "$d/store" --job cow
	if ! h_wait_origin "$H_PID" "$err" 10000 || ! h_wait_line "$out" '^process 2 step 10 ' 20000 "$H_PID"; then
		h_fail filepages/cowpages "the job did not start" "$err" "$out"
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" 'checkpoint 1 committed' 30000 "$H_PID"; then
		h_fail filepages/cowpages "the checkpoint did not commit" "$err"
		return
	fi
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
	"$CKPT" inspect --store "$d/store" cow >"$d/inspect" 2>&1
	n=$(sed -n 's/.* \([0-9]*\) as pages differing from a parent.s$/\1/p' "$d/inspect")
	stored=$(sed -n 's/.*committed: 3 process(es), [0-9]* bytes of memory, \([0-9]*\) stored.*/\1/p' "$err")
	if [ -z "$n" ] || [ "$n" -lt 64 ]; then
		h_fail filepages/cowpages "want 64 or more chunks stored as differing pages, found '$n'" "$d/inspect"
		return
	fi
	if [ -z "$stored" ] || (( stored > 16 * 1024 * 1024 * 3 / 2 )); then
		h_fail filepages/cowpages "3 processes sharing 16 MiB stored '$stored' bytes (want < 1.5 x 16 MiB)" "$err"
		return
	fi
	h_start resume "$out" "$err" --resume --store "$d/store" --job cow
	h_wait "$H_PID" 120000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail filepages/cowpages "the resumed job exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail filepages/cowpages "$why" "$err"
	elif ! cmp -s "$out" "$d/bare"; then
		h_diff_excerpt "$d/bare" "$out" "$d/diff"
		h_fail filepages/cowpages "output differs from the bare run's" "$d/diff"
	else
		h_pass filepages/cowpages
	fi
}

main() {
	local d err out f rc why
	h_seed_init
	if ! h_have_ckrun || ! h_have_ckpt || [ ! -x "$APP" ] || [ ! -x "$H_APPS_BIN/mp_cowpages" ]; then
		h_fail filepages "ckrun, ckpt, filemap_cow or mp_cowpages is not built; run make"
		return 1
	fi
	h_init filepages
	d=$H_WORK/fp
	mkdir -p "$d/tmp"
	err=$d/ckrun.err out=$d/out
	: >"$err"
	H_CMD=("$APP" 4)
	TMPDIR=$d/tmp h_start new "$out" "$err" --store "$d/store" --job fp
	# (its stdout is a file, written at its end: lib.dat says it runs)
	if ! h_wait_origin "$H_PID" "$err" 10000 || ! wait_file "$d/tmp" 10000 "$H_PID"; then
		h_fail filepages "the job did not start" "$err" "$out"
		return 1
	fi
	h_sleep_alive "$H_PID" 500
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" 'checkpoint 1 committed' 30000 "$H_PID"; then
		h_fail filepages "the checkpoint did not commit" "$err"
		return 1
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$err" 'checkpoint 2 committed' 30000 "$H_PID"; then
		h_fail filepages "checkpoint 2 did not commit" "$err"
		return 1
	fi
	{ h_kill_group "$H_PID"; wait "$H_PID"; } 2>/dev/null
	f=$(echo "$d"/tmp/filemap_cow.*/lib.dat)
	if ! h_group_gone "$H_PID" || [ ! -f "$f" ]; then
		h_fail filepages "the job survived kill -9, or left no lib.dat"
		return 1
	fi
	"$CKPT" inspect --store "$d/store" fp >"$d/inspect" 2>&1
	if grep -E "filepages +$f" "$d/inspect" >/dev/null; then
		h_pass filepages/inspect
	else
		h_fail filepages/inspect "no filepages region of $f in the checkpoint" "$d/inspect"
	fi
	if [ "$(grep -c 'content digests of mapped files' "$err")" = 1 ]; then
		h_pass filepages/digest-once
	else
		h_fail filepages/digest-once "want one 'content digests' line for two checkpoints" "$err"
	fi
	cp -a "$f" "$d/orig"

	head -c "$(stat -c %s "$f")" /dev/urandom | dd of="$f" conv=notrunc status=none
	touch -d "@$(stat -c %.9Y "$d/orig")" "$f"
	refused rewrite "$d" "$f" "changed since the checkpoint: its contents differ"
	head -c "$(stat -c %s "$d/orig")" /dev/urandom >"$f.new"
	touch -r "$d/orig" "$f.new" && mv "$f.new" "$f"
	refused forged "$d" "$f" "changed since the checkpoint: its contents differ"
	head -c 4096 /dev/zero >>"$f"
	touch -d "@$(stat -c %.9Y "$d/orig")" "$f"
	refused size "$d" "$f" "changed since the checkpoint: [0-9]* bytes"
	rm -f "$f"
	refused gone "$d" "$f" "is not here"

	cp "$d/orig" "$f.new" && touch -d @1000000000 "$f.new" && mv "$f.new" "$f"
	TMPDIR=$d/tmp h_start resume "$out" "$err" --resume --store "$d/store" --job fp
	h_wait "$H_PID" 120000
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail filepages/copy "the resumed job exited $rc" "$err" "$out"
	elif ! why=$(h_proof "$err"); then
		h_fail filepages/copy "$why" "$err"
	elif ! grep -q '^filemap_cow: ok' "$out"; then
		h_fail filepages/copy "the job's checks failed" "$out"
	else
		h_pass filepages/copy
	fi
	cowpages
	return "$H_FAILED"
}

main "$@"
