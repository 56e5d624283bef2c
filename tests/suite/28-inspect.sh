#!/usr/bin/env bash
# Looking into an image: `ckpt inspect --backtrace` and `ckpt export-core`.
# tests/inspect/deepstack (built without frame pointers) parks three
# threads in known call chains; after one checkpoint:
#   - inspect --backtrace must show each job thread's chain in order,
#     starting where the thread was (frame 0: libc's poll and read, and
#     spin_inner itself for the thread that made no system call), never in
#     libckpt's handler, each stack ending cleanly, and exactly three job
#     threads plus libckpt's manager;
#   - gdb on the exported core (gdb PROGRAM core -batch -ex 'thread apply
#     all bt') must show the same chains in the same order, four threads,
#     the value the spinning thread holds in xmm7 (NT_FPREGSET), and the
#     core must carry the notes gdb reads;
#   - the program's file replaced after the checkpoint: the same chains,
#     named from the .dynsym the image holds (the chains are exported);
#   - bad input: a missing job, checkpoint or process is one line and exit
#     2, a missing -o is 64, and no file is left behind.
# A wrong unwinder (no .eh_frame: a frame-pointer walk) breaks the chains;
# one that starts from libckpt's saved context has the handler on top.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

APP=$H_BUILD/tests/inspect/deepstack
ckpt() { timeout -s KILL 120 "$CKPT" "$@"; }

# chains FILE: one line per thread, "TID KIND f0 f1 f2 ..." from ckpt's
# backtrace (KIND main, thread or manager; a frame without a name is ??;
# STOP when the unwinding stopped early).
chains() {
	awk '
	function flush() { if (tid != "") print tid, kind fr; tid = "" }
	/^  thread / { flush(); tid = $2; kind = /\(main\)/ ? "main" : /manager\)/ ? "manager" : "thread"; fr = ""; next }
	/^    #/ { n = $4; sub(/\+0x[0-9a-f]+$/, "", n); fr = fr " " n; next }
	/unwinding stopped/ { fr = fr " STOP" }
	END { flush() }' "$1"
}

# gdb_chains FILE: one line per thread of gdb'"'"'s "thread apply all bt".
gdb_chains() {
	awk '
	function flush() { if (t != "") print t fr; t = "" }
	/^Thread [0-9]+ / { flush(); t = $2; fr = ""; next }
	/^#[0-9]+ / {
		s = $0; sub(/^#[0-9]+ +/, "", s); sub(/^0x[0-9a-f]+ in /, "", s); sub(/ .*/, "", s)
		fr = fr " " s; next }
	END { flush() }' "$1"
}

# has_seq LINE WORDS...: LINE holds WORDS consecutively.
has_seq() { [[ " $1 " == *" ${*:2} "* ]]; }

# check_bt FILE MODE: the backtrace in FILE shows the three chains in
# order (MODE full; MODE dynsym: only exported functions have names, the
# static deep_main and spin_main do not), each from where its thread was,
# three job threads and the manager, no early stop. Prints what is wrong.
check_bt() {
	local f=$1 mode=$2 lines why='' dm=deep_main sm=spin_main
	[ "$mode" = dynsym ] && dm='??' && sm='??'
	chains "$f" >"$f.chains"
	if [ "$(awk '$2 == "main" || $2 == "thread"' "$f.chains" | wc -l)" != 3 ] ||
	   [ "$(grep -c '^[0-9]* manager ' "$f.chains")" != 1 ] || ! grep -q ': 4 threads$' "$f"; then
		echo "expected 3 job threads and libckpt's manager"
		return 1
	fi
	lines=$(grep -v ' manager ' "$f.chains")
	while read -r _ _ f0 rest; do
		if has_seq "$f0 $rest" STOP; then why="a job thread's unwinding stopped early"; fi
		case "$f0 $rest" in
		*outer_z*) [[ $f0 == *poll* ]] && has_seq "$rest" outer_z outer_y outer_x main ||
			why="main thread: '$f0 $rest'" ;;
		*deep_c*) [[ $f0 == *read* ]] && has_seq "$rest" deep_c deep_b deep_a "$dm" ||
			why="deep thread: '$f0 $rest'" ;;
		*spin_inner*) [ "$f0" = spin_inner ] && has_seq "$f0 $rest" spin_inner spin_outer "$sm" ||
			why="spin thread: '$f0 $rest'" ;;
		*) why="a thread in no known chain: '$f0 $rest'" ;;
		esac
	done <<<"$lines"
	for w in outer_z deep_c spin_inner; do
		grep -q " $w " <<<"$lines " || why="no thread in $w"
	done
	grep -q 'ck__on_suspend' <<<"$lines" && why="a job thread starts in libckpt's handler"
	[ -z "$why" ] || { echo "$why"; return 1; }
}

# The program replaced on disk after the checkpoint: its frames still
# unwind (its .eh_frame is in the image) and the exported names come from
# the .dynsym that the image holds, which the output says.
replaced() {
	local d=$H_WORK/replaced copy bt rc why
	mkdir -p "$d"
	copy=$d/deepstack
	cp "$APP" "$copy"
	H_CMD=("$copy")
	h_start new "$d/out" "$d/err" --store "$d/st" --job deep
	if ! h_wait_line "$d/out" '^ready$' 20000 "$H_PID"; then
		h_fail inspect/replaced "the job did not get ready" "$d/out" "$d/err"
		return
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/err" "checkpoint 1 committed" 30000 "$H_PID"; then
		h_fail inspect/replaced "no checkpoint committed" "$d/err"
		return
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
	rm -f "$copy" && cp /bin/true "$copy" # another file, another inode
	bt=$d/bt
	ckpt inspect --backtrace --store "$d/st" deep >"$bt" 2>"$bt.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail inspect/replaced "exit $rc" "$bt.err"
	elif ! why=$(check_bt "$bt" dynsym); then
		h_fail inspect/replaced "$why" "$bt"
	elif ! grep -q "deep_c+0x[0-9a-f]* ($copy: file replaced since the checkpoint, names from the image's .dynsym)" "$bt"; then
		h_fail inspect/replaced "the output does not say where the names come from" "$bt"
	else
		h_pass "inspect/replaced: program replaced on disk, chains named from the image's .dynsym"
	fi
}

main() {
	h_init inspect
	local d=$H_WORK st bt core gdbout rc pid n why
	st=$d/st
	if [ ! -x "$APP" ] || ! h_have_ckpt; then
		h_fail inspect/build "missing $APP or $CKPT (run make)"
		return 1
	fi
	H_CMD=("$APP")
	h_start new "$d/out" "$d/err" --store "$st" --job deep
	if ! h_wait_line "$d/out" '^ready$' 20000 "$H_PID"; then
		h_fail inspect/start "the job did not get ready" "$d/out" "$d/err"
		return 1
	fi
	kill -USR2 "$H_PID"
	if ! h_wait_line "$d/err" "checkpoint 1 committed" 30000 "$H_PID"; then
		h_fail inspect/checkpoint "no checkpoint committed" "$d/err"
		return 1
	fi
	{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1

	# ---- ckpt inspect --backtrace
	bt=$d/bt
	ckpt inspect --backtrace --store "$st" deep@1 >"$bt" 2>"$bt.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		h_fail inspect/backtrace "exit $rc" "$bt.err"
	elif why=$(check_bt "$bt" full); then
		h_pass "inspect/backtrace: main, deepthr, spinthr chains in order, from their signal frames"
	else
		h_fail inspect/backtrace "$why" "$bt" "$bt.err"
	fi

	# ---- ckpt export-core, then gdb
	core=$d/core
	pid=$(awk '/^process /{print $2; exit}' "$bt")
	ckpt export-core --store "$st" --pid "$pid" -o "$core" deep@1 >"$core.out" 2>"$core.err"
	rc=$?
	why=
	if [ "$rc" != 0 ] || [ ! -s "$core" ]; then
		why="export-core exit $rc"
	elif [ "$(stat -c %a "$core")" != 600 ]; then
		why="core file mode $(stat -c %a "$core"), not 600"
	elif ! command -v gdb >/dev/null; then
		why="gdb not installed (scripts/deps.sh installs it)"
	else
		readelf -n "$core" >"$core.notes" 2>&1
		n=$(grep -c NT_PRSTATUS "$core.notes")
		for t in NT_PRPSINFO NT_FPREGSET NT_AUXV NT_FILE; do
			grep -q "$t" "$core.notes" || why="no $t note"
		done
		if grep -qw xsave /proc/cpuinfo && ! grep -q NT_X86_XSTATE "$core.notes"; then
			why="no NT_X86_XSTATE note (the CPU has XSAVE)"
		fi
		[ "$n" = 4 ] || why="$n NT_PRSTATUS notes, expected 4"
		gdbout=$d/gdb
		timeout -s KILL 120 gdb -nx -batch -iex 'set debuginfod enabled off' -ex 'thread apply all bt' \
			-ex 'thread apply all -q p/x $xmm7.v2_int64[0]' "$APP" "$core" >"$gdbout" 2>&1
		gdb_chains "$gdbout" >"$gdbout.chains"
		[ "$(wc -l <"$gdbout.chains")" = 4 ] || why="gdb shows $(wc -l <"$gdbout.chains") threads, expected 4"
		grep -Eq "^[0-9]+ .* outer_z outer_y outer_x main( |$)" "$gdbout.chains" || why="gdb: no main chain"
		grep -Eq "^[0-9]+ .* deep_c deep_b deep_a deep_main( |$)" "$gdbout.chains" || why="gdb: no deep chain"
		grep -Eq "^[0-9]+ spin_inner spin_outer spin_main( |$)" "$gdbout.chains" || why="gdb: no spin chain"
		grep -q '^\$[0-9]* = 0x5eedfeedc0ffee77$' "$gdbout" || why="gdb: no thread has spin_inner's xmm7"
		grep -q 'ck__on_suspend' <(grep -v 'ck__round\|ck__manager' "$gdbout.chains") &&
			why="gdb: a job thread starts in libckpt's handler"
	fi
	if [ -n "$why" ]; then
		h_fail inspect/export-core "$why" "$core.err" "${gdbout:-/dev/null}"
	else
		h_pass "inspect/export-core: gdb shows 4 threads, the three chains in order"
	fi

	# ---- bad input
	bad() { # NAME WANT-STATUS ARGS...
		local name=$1 want=$2 got
		shift 2
		ckpt "$@" >"$d/bad.out" 2>"$d/bad.err"
		got=$?
		if [ "$got" != "$want" ] || [ "$(wc -l <"$d/bad.err")" != 1 ] || [ -e "$d/nocore" ]; then
			h_fail "inspect/bad-$name" "exit $got (want $want), $(wc -l <"$d/bad.err") lines on stderr" "$d/bad.err"
		else
			h_pass "inspect/bad-$name: exit $got: $(cat "$d/bad.err")"
		fi
	}
	replaced
	bad no-job 2 inspect --backtrace --store "$st" nosuchjob
	bad no-seq 2 inspect --backtrace --store "$st" deep@9
	bad no-pid 2 export-core --store "$st" --pid 4242 -o "$d/nocore" deep@1
	bad no-seq-core 2 export-core --store "$st" -o "$d/nocore" deep@9
	bad no-output 64 export-core --store "$st" deep@1
	bad bad-pid 64 export-core --store "$st" --pid x -o "$d/nocore" deep@1
	bad no-dir 73 export-core --store "$st" -o "$d/nodir/core" deep@1
	return "$H_FAILED"
}

main "$@"
