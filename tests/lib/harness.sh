# shellcheck shell=bash
# Functions shared by the test suites (tests/suite/*.sh). Source it; it
# defines functions and a few variables and runs nothing else.
#
# Model: each test application (tests/apps/) is an ordinary program that
# checks its own state and prints deterministic results. A suite runs it bare
# once for the reference output, then under ckrun with checkpoints, kills and
# restores at random moments, and compares output and exit status.
#
# Environment (all optional):
#   CKPT_TEST_SEED   master random seed; printed at the start so that a
#                    failure can be replayed with the same schedule
#   CKPT_TEST_APPS   only these apps (names, separated by spaces or commas)
#   CKPT_TEST_JOBS   apps tested in parallel (default 2)
#   CKPT_TEST_SCALE  scale argument given to apps without an args= line in
#                    their .desc file (default 0.5)
#   CKPT_TEST_KEEP=1 keep the work directory even when everything passed
#   CKRUN, CKPT      the programs under test (default $BUILD/ckrun, $BUILD/ckpt)
#   PYTHON           interpreter for tests/apps/*.py (default python3)
set -u
set +m # background jobs stay in our process group; setsid makes its own

H_TOP=${CKPT_TOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
H_BUILD=${BUILD:-build}
case $H_BUILD in /*) ;; *) H_BUILD=$H_TOP/$H_BUILD ;; esac
CKRUN=${CKRUN:-$H_BUILD/ckrun}
CKPT=${CKPT:-$H_BUILD/ckpt}
# Debian's interpreter: a wrapper script (pyenv shims, say) would make the
# job a process tree.
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
H_APPS_SRC=$H_TOP/tests/apps
H_APPS_BIN=$H_BUILD/tests/apps
H_JOBS=${CKPT_TEST_JOBS:-2}
H_SCALE=${CKPT_TEST_SCALE:-0.5}
H_WORK=
H_FAILED=0
H_RNG=1
H_PGIDS=()      # process groups started by this shell (killed on exit)
H_SUBS=()       # parallel workers (h_parallel)
H_CLEANUPS=()   # extra commands run on exit (umount, ...)

# ---- output -----------------------------------------------------------------

h_pass() { echo "PASS $1"; }
h_skip() { echo "SKIP $1: $2"; }
# h_fail NAME REASON [DETAIL-FILE...]: DETAIL-FILEs are shown indented.
h_fail() {
	local name=$1 reason=$2 f
	shift 2
	H_FAILED=1
	echo "FAIL $name: $reason"
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "    --- $(basename "$f")"
		sed 's/^/    | /' "$f" | tail -n 25
	done
}
h_note() { echo "# $*" >&2; }

# ---- random schedule ----------------------------------------------------------

# Picks the master seed and prints it (stdout, so it lands in the log).
h_seed_init() {
	H_SEED=${CKPT_TEST_SEED:-$(( ($(date +%s%N) / 1000 + $$) % 2147483647 ))}
	echo "# seed $H_SEED (replay: CKPT_TEST_SEED=$H_SEED)"
}

# h_rng_seed KEY: seeds the generator from the master seed and KEY, so that
# an app's schedule does not depend on which other apps ran before it.
# (bash's own RANDOM is re-seeded in every subshell, hence this generator,
# whose state is a plain variable. Call h_rand directly, never in $(...).)
h_rng_seed() {
	local sum
	sum=$(printf '%s:%s' "$H_SEED" "$1" | cksum)
	H_RNG=$(( ${sum%% *} % 2147483648 ))
}

# h_rand VAR MIN MAX: sets VAR to a uniform integer in [MIN, MAX].
h_rand() {
	local lo=$2 hi=$3 r
	H_RNG=$(( (H_RNG * 1103515245 + 12345) % 2147483648 ))
	r=$(( H_RNG >> 8 ))
	H_RNG=$(( (H_RNG * 1103515245 + 12345) % 2147483648 ))
	r=$(( (r << 15) ^ (H_RNG >> 16) ))
	if (( hi <= lo )); then
		printf -v "$1" '%d' "$lo"
	else
		printf -v "$1" '%d' $(( lo + r % (hi - lo + 1) ))
	fi
}

h_sleep_ms() { sleep "$(printf '%d.%03d' $(( $1 / 1000 )) $(( $1 % 1000 )))"; }
h_now_ms() { local t=${EPOCHREALTIME/./}; echo $(( t / 1000 )); }

# ---- work directory and cleanup -------------------------------------------------

h_cleanup() {
	local p c
	for p in "${H_SUBS[@]}"; do # parallel workers clean up their own jobs
		kill -TERM "$p" 2>/dev/null
	done
	for p in "${H_SUBS[@]}"; do
		wait "$p" 2>/dev/null
	done
	h_kill_pgids
	for c in "${H_CLEANUPS[@]}"; do
		eval "$c" 2>/dev/null
	done
	if [ -n "$H_WORK" ] && [ -d "$H_WORK" ]; then
		if [ "$H_FAILED" = 0 ] && [ "${CKPT_TEST_KEEP:-0}" != 1 ]; then
			rm -rf "$H_WORK"
		else
			echo "# work directory kept: $H_WORK"
		fi
	fi
}

# h_init NAME: work directory, traps. Call once per suite.
h_init() {
	H_WORK=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-$1.XXXXXX") || exit 1
	trap h_cleanup EXIT
	# shellcheck disable=SC2064 # expand the name now
	trap "H_FAILED=1; echo 'FAIL $1: interrupted'; exit 130" INT TERM
}

h_have_ckrun() { [ -x "$CKRUN" ]; }
h_have_ckpt() { [ -x "$CKPT" ]; }

# ---- applications ---------------------------------------------------------------

# All app names, or those named in CKPT_TEST_APPS.
h_app_list() {
	local f n want=" ${CKPT_TEST_APPS:-} "
	want=${want//,/ }
	for f in "$H_APPS_SRC"/*.c "$H_APPS_SRC"/*.py; do
		[ -e "$f" ] || continue
		n=$(basename "$f")
		n=${n%.*}
		if [ -n "${CKPT_TEST_APPS:-}" ] && [[ $want != *" $n "* ]]; then
			continue
		fi
		echo "$n"
	done
}

# h_desc APP KEY DEFAULT: a value from tests/apps/APP.desc (lines KEY=VALUE,
# '#' comments). The file is read, never sourced.
h_desc() {
	local file=$H_APPS_SRC/$1.desc key=$2 def=$3 line
	if [ -r "$file" ]; then
		while IFS= read -r line; do
			case $line in
			"$key="*) echo "${line#*=}"; return ;;
			esac
		done <"$file"
	fi
	echo "$def"
}

# h_app_cmd APP [ARGS...]: sets the array H_CMD to the command line that runs
# APP with ARGS, or with its .desc args, or with the default scale.
h_app_cmd() {
	local app=$1 args
	shift
	if [ $# -eq 0 ]; then
		args=$(h_desc "$app" args "$H_SCALE")
		# shellcheck disable=SC2086 # word splitting wanted: args= is a list
		set -- $args
	fi
	if [ -e "$H_APPS_SRC/$app.py" ]; then
		H_CMD=("$PYTHON" "$H_APPS_SRC/$app.py" "$@")
	else
		H_CMD=("$H_APPS_BIN/$app" "$@")
	fi
}

h_app_built() {
	[ -e "$H_APPS_SRC/$1.py" ] || [ -x "$H_APPS_BIN/$1" ]
}

# ---- processes ---------------------------------------------------------------------

# h_alive PID: true while PID exists and is not a zombie.
h_alive() {
	local s
	read -r s 2>/dev/null <"/proc/$1/stat" || return 1
	s=${s##*) }
	[ "${s%% *}" != Z ]
}

# h_group_members PGID: every process in that process group.
h_group_members() {
	local pg=$1 f s pid
	local -a fld
	for f in /proc/[0-9]*/stat; do
		read -r s 2>/dev/null <"$f" || continue
		s=${s##*) } # fields after the name: state ppid pgrp ...
		read -r -a fld <<<"$s"
		[ "${fld[2]:-}" = "$pg" ] || continue
		pid=${f#/proc/}
		echo "${pid%/stat}"
	done
}

# Kills every process group this shell started.
h_kill_pgids() {
	local pg
	for pg in "${H_PGIDS[@]}"; do
		kill -9 -- "-$pg" 2>/dev/null
	done
}

# h_kill_group PGID: kill -9 of the group and of every process below its
# leader (the job's own session), remembered for h_group_gone.
# All at once, as a node's death: the tree is stopped first (and scanned
# again until no new member shows), then killed. kill(1) signals one pid
# after another; killed one by one, a pipeline's writer could die while
# its reader lived on, read end-of-file and finish on partial input,
# writing results no run of the job would write.
h_kill_group() {
	local i more
	H_KILLED_PG=$1
	H_KILLED_TREE=$(h_tree_members "$1")
	for (( i = 0; i < 10; i++ )); do
		# shellcheck disable=SC2086 # pids
		kill -STOP -- "-$1" $H_KILLED_TREE 2>/dev/null
		more=$(h_tree_members "$1" | grep -vxF -f <(echo "$H_KILLED_TREE"))
		[ -n "$more" ] || break
		H_KILLED_TREE+=$'\n'$more
	done
	# shellcheck disable=SC2086 # pids
	kill -9 -- "-$1" $H_KILLED_TREE 2>/dev/null
}

# h_tree_members PID: PID and every process below it. The job runs in a
# session of its own (ckrun's init calls setsid), so ckrun's process group
# does not hold it.
h_tree_members() {
	local f s pid
	local -a fld
	local -A kids=()
	for f in /proc/[0-9]*/stat; do
		read -r s 2>/dev/null <"$f" || continue
		s=${s##*) }
		read -r -a fld <<<"$s"
		pid=${f#/proc/}
		kids[${fld[1]}]+=" ${pid%/stat}"
	done
	local -a todo=("$1")
	while (( ${#todo[@]} )); do
		pid=${todo[0]}
		todo=("${todo[@]:1}")
		echo "$pid"
		# shellcheck disable=SC2206 # pids, split on purpose
		todo+=(${kids[$pid]:-})
	done
}

# h_group_gone PGID [PID...]: waits (up to 5 s) until no live process is left
# in the group nor among the PIDs (a job's tree, taken before a kill);
# false if some survive.
h_group_gone() {
	local i p alive pg=$1
	shift
	for (( i = 0; i < 100; i++ )); do
		alive=0
		# shellcheck disable=SC2086 # pids
		for p in $(h_group_members "$pg") "$@" \
			$([ "$pg" = "${H_KILLED_PG:-}" ] && echo "$H_KILLED_TREE"); do
			h_alive "$p" && alive=1
		done
		(( alive )) || return 0
		sleep 0.05
	done
	return 1
}

# h_start MODE OUT ERR [CKRUN-OPTIONS...] -- starts ckrun in its own session
# in the background, with H_CMD as the job. MODE "new" truncates OUT, MODE
# "resume" opens it read-write without truncating (a restored job writes at
# its saved offset), MODE "pipe" gives the job a pipe whose bytes are
# appended to OUT. Sets H_PID (= the process group id).
# Every run gets -v (the restore line) and CKPT_TEST_ORIGIN=1 (the job's
# origin lines, tests/apps/origin/), appends its stderr to ERR, and records
# in ERR.runs where its part of ERR begins, its mode and whether it was
# asked to --resume a job of which the store held a checkpoint: h_proof
# reads them.
h_start() {
	local mode=$1 out=$2 err=$3 had=0
	shift 3
	[[ " $* " == *" --resume "* ]] && h_has_checkpoint "$@" && had=1
	h_run_mark "$err" "$mode" "$had"
	case $mode in
	new) CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v "$@" -- "${H_CMD[@]}" </dev/null >"$out" 2>>"$err" & ;;
	pipe) CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v "$@" -- "${H_CMD[@]}" </dev/null 2>>"$err" > >(cat >>"$out") & ;;
	*) CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v "$@" -- "${H_CMD[@]}" </dev/null 1<>"$out" 2>>"$err" & ;;
	esac
	H_PID=$!
	H_PGIDS+=("$H_PID")
	[ -n "${H_NO_WAIT_HANDLERS:-}" ] || h_wait_handlers "$H_PID"
}

# h_wait_handlers PID: until ckrun (PID) catches SIGUSR2 and SIGTERM, or has
# ended, 10 s at most (then a line on stderr). Until its constructor runs
# (while the dynamic loader maps its libraries: 160 ms once on a loaded
# machine) a signal ends it with the default action, before any job exists
# (NOTES: Signals); a schedule that signals a run soon after its start must
# not land there. A CKRUN that is a script (a mutant) is not waited for;
# H_NO_WAIT_HANDLERS=1 h_start: not at all (a test of those moments).
h_wait_handlers() {
	local pid=$1 exe cgt want end
	want=$(readlink -f "$CKRUN")
	[ "$(head -c 4 "$want" 2>/dev/null | od -An -c | tr -d ' ')" = 177ELF ] || return 0
	end=$(( $(h_now_ms) + 10000 ))
	while (( $(h_now_ms) < end )); do
		exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 0
		cgt=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 0
		[ -n "$cgt" ] || return 0
		# SIGUSR2 is bit 11, SIGTERM bit 14
		[ "$exe" = "$want" ] && (( (16#$cgt >> 11 & 1) && (16#$cgt >> 14 & 1) )) && return 0
		sleep 0.01
	done
	echo "# h_wait_handlers: ckrun $pid did not catch SIGUSR2 and SIGTERM within 10 s" >&2
}

h_size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# h_run_mark ERR MODE HAD: records that a run of ckrun starts appending its
# stderr to ERR (HAD 1: it resumes a job the store holds a checkpoint of),
# for h_proof; h_start calls it, suites that start ckrun themselves too.
h_run_mark() { echo "$(h_size "$1") $2 $3" >>"$1.runs"; }

# h_has_checkpoint CKRUN-OPTIONS...: true if the store named by --store
# holds a committed checkpoint of the job named by --job (by default, as
# ckrun names it, the base name of the program H_CMD runs). ckpt ls reads
# the store, so names that the store holds encoded are found too.
h_has_checkpoint() {
	local store='' job=${H_CMD[0]##*/}
	while [ $# -gt 0 ]; do
		case $1 in
		--store) store=${2:-}; shift ;;
		--job) job=${2:-}; shift ;;
		esac
		shift
	done
	[ -n "$store" ] && [ -n "$job" ] || return 1
	timeout -s KILL 60 "$CKPT" ls --store "$store" "$job" 2>/dev/null | grep -Eq '^ *[0-9]+ '
}

# h_wait_origin PID ERR MS: in a fresh run (the last h_start of ERR), waits
# until the job has drawn its origin (its START line), so that no
# checkpoint is asked for before it: a checkpoint taken earlier would make
# a restored job draw one of its own and look like a fresh start. False if
# PID ended or MS passed first.
h_wait_origin() {
	local pid=$1 err=$2 off end
	off=$(tail -n 1 "$err.runs" 2>/dev/null)
	off=${off%% *}
	end=$(( $(h_now_ms) + $3 ))
	until tail -c "+$(( ${off:-0} + 1 ))" "$err" 2>/dev/null | grep -q '^ck-origin START'; do
		h_alive "$pid" && (( $(h_now_ms) < end )) || return 1
		sleep 0.01
	done
}

# h_proof ERR [WANT_END]: proof that every resumed run of ERR (runs started
# by h_start) came back from its checkpoint rather than starting again.
# Each run that started with a checkpoint in the store must not print the
# job's "ck-origin START" line (a fresh start does, restored memory runs no
# start-up code), and the last one must print ckrun's "restored from
# checkpoint" line; with WANT_END 1 (the default) the job's final
# "ck-origin END" value must be the one its first run drew. Prints the
# reason and returns 1 when something is off, 2 when no run started with a
# checkpoint to restore (the runs prove nothing either way).
h_proof() {
	local err=$1 want_end=${2:-1} n i from to seg origin='' v restored=0
	local -a offs=() modes=() hads=()
	if [ ! -s "$err.runs" ]; then
		echo "no run was recorded"
		return 1
	fi
	while read -r from v i; do
		offs+=("$from") modes+=("$v") hads+=("$i")
	done <"$err.runs"
	n=${#offs[@]}
	for (( i = 0; i < n; i++ )); do
		from=${offs[$i]}
		if (( i + 1 < n )); then to=${offs[$((i + 1))]}; else to=$(h_size "$err"); fi
		seg=$(tail -c "+$(( from + 1 ))" "$err" | head -c "$(( to - from ))")
		if [ "${hads[$i]}" = 1 ]; then
			restored=1
			if grep -q '^ck-origin START' <<<"$seg"; then
				echo "run $(( i + 1 )) started the job afresh although the store held a checkpoint"
				return 1
			fi
			if (( i == n - 1 )) && ! grep -q 'restored from checkpoint' <<<"$seg"; then
				echo "the last run (a resume) did not say it restored from a checkpoint"
				return 1
			fi
		else
			v=$(sed -n 's/^ck-origin START //p' <<<"$seg" | tail -n 1)
			[ -n "$v" ] && origin=$v
		fi
	done
	if (( !restored )); then
		echo "no run restored from a checkpoint: the test proves nothing"
		return 2
	fi
	(( want_end )) || return 0
	v=$(sed -n 's/^ck-origin END //p' <<<"$seg" | tail -n 1)
	if [ -z "$origin" ]; then
		echo "no run printed the job's origin (tests/apps/origin)"
		return 1
	fi
	if [ "$v" != "$origin" ]; then
		echo "the job ended with origin '${v:-none}', its first run drew $origin: it did not come back from that run"
		return 1
	fi
}

# h_wait PID LIMIT_MS: waits for a child started by h_start. Returns its exit
# status, or 124 after killing its whole group when LIMIT_MS runs out.
# (Kill and wait go in one { } 2>/dev/null block wherever a job is killed:
# bash reports a killed background job on its stderr after the next command.)
h_wait() {
	local pid=$1 limit=$2 t0
	t0=$(h_now_ms)
	while h_alive "$pid"; do
		if (( $(h_now_ms) - t0 > limit )); then
			{ h_kill_group "$pid"; wait "$pid"; } 2>/dev/null
			return 124
		fi
		sleep 0.05
	done
	wait "$pid" 2>/dev/null # no "Killed" notices in the logs
}

# h_wait_line FILE REGEX MS [PID]: waits until FILE has a line matching the
# extended REGEX; false after MS, or once PID (if given) has ended.
h_wait_line() {
	local end=$(( $(h_now_ms) + $3 ))
	until grep -Eq "$2" "$1" 2>/dev/null; do
		if (( $(h_now_ms) >= end )) || { [ -n "${4:-}" ] && ! h_alive "$4"; }; then
			grep -Eq "$2" "$1" 2>/dev/null
			return
		fi
		sleep 0.02
	done
}

# h_wait_line_count FILE REGEX N MS [PID]: waits until FILE has N lines
# matching REGEX; false after MS, or once PID (if given) has ended.
h_wait_line_count() {
	local end=$(( $(h_now_ms) + $4 ))
	until (( $(grep -Ec "$2" "$1" 2>/dev/null) >= $3 )); do
		if (( $(h_now_ms) >= end )) || { [ -n "${5:-}" ] && ! h_alive "$5"; }; then
			(( $(grep -Ec "$2" "$1" 2>/dev/null) >= $3 ))
			return
		fi
		sleep 0.02
	done
}

# h_sleep_until PID T_MS: sleeps until the clock of h_now_ms reads T_MS,
# unless PID ends first; false if it ended.
h_sleep_until() {
	local pid=$1 end=$2
	while (( $(h_now_ms) < end )); do
		h_alive "$pid" || return 1
		sleep 0.02
	done
	h_alive "$pid"
}

# h_sleep_alive PID MS: sleeps MS unless PID ends first; false if it ended.
h_sleep_alive() {
	local pid=$1 end
	end=$(( $(h_now_ms) + $2 ))
	while (( $(h_now_ms) < end )); do
		h_alive "$pid" || return 1
		sleep 0.02
	done
	h_alive "$pid"
}

# h_run_bare APP OUT ERR LIMIT_S: runs H_CMD without ckrun in a private
# TMPDIR; prints "RC MS" (exit status and wall time).
h_run_bare() {
	local dir=$2.tmp rc t0 t1
	mkdir -p "$dir"
	t0=$(h_now_ms)
	TMPDIR=$dir timeout -s KILL "$4" "${H_CMD[@]}" </dev/null >"$2" 2>"$3"
	rc=$?
	t1=$(h_now_ms)
	rm -rf "$dir"
	echo "$rc $(( t1 - t0 ))"
}

# h_manifests STORE JOB: committed checkpoint sequence numbers, oldest first.
h_manifests() {
	local d=$1/$2/manifests f
	[ -d "$d" ] || return 0
	for f in "$d"/*; do
		[ -f "$f" ] || continue
		f=${f##*/}
		[[ $f =~ ^[0-9]{8}$ ]] && echo "$f"
	done
}

# h_diff_excerpt A B OUT: the first lines of a diff, for failure reports.
h_diff_excerpt() {
	diff "$1" "$2" 2>&1 | head -n 20 >"$3"
	if [ ! -s "$3" ]; then
		echo "(no textual difference; sizes $(stat -c %s "$1") and $(stat -c %s "$2"))" >"$3"
	fi
}

# ---- parallel driver -----------------------------------------------------------------

# h_parallel FUNC ITEM...: runs "FUNC ITEM" for every item, H_JOBS at a time,
# each in a subshell with its output collected in a file and printed whole
# when it ends, so lines of different items never interleave.
h_parallel() {
	local fn=$1 item n=0 running=0 i
	shift
	mkdir -p "$H_WORK/logs"
	local -a pids=() logs=()
	H_PRINTED=0
	for item in "$@"; do
		n=$((n + 1))
		(
			H_PGIDS=()
			trap h_kill_pgids EXIT
			trap 'exit 143' TERM INT
			"$fn" "$item"
		) >"$H_WORK/logs/$n.log" 2>&1 &
		pids+=($!)
		H_SUBS+=($!)
		logs+=("$H_WORK/logs/$n.log")
		running=$((running + 1))
		while (( running >= H_JOBS )); do
			wait -n 2>/dev/null
			running=0
			for i in "${!pids[@]}"; do
				if h_alive "${pids[$i]}"; then
					running=$((running + 1))
				fi
			done
		done
		h_flush_logs
	done
	wait
	h_flush_logs
}

# Prints the logs of finished items, once each, in start order as far as
# they are done.
H_PRINTED=0
h_flush_logs() {
	local i
	for (( i = H_PRINTED; i < ${#pids[@]}; i++ )); do
		h_alive "${pids[$i]}" && break
		wait "${pids[$i]}" 2>/dev/null
		cat "${logs[$i]}"
		grep -q '^FAIL ' "${logs[$i]}" && H_FAILED=1
		H_PRINTED=$((i + 1))
	done
}
