#!/usr/bin/env bash
# The store's safety (NOTES.md, "One writer per job"):
#  - two-writers: a second ckrun of a job that a ckrun is writing exits 69
#    with one line naming the holder; the first goes on, is killed, resumes
#    with the bare run's output, and every checkpoint verifies.
#  - rm-gc-running: ckpt rm and gc of a running job (a long name: no control
#    socket for it) are refused naming the holder; with --force they go on,
#    and the job's later checkpoints all verify (no commit references a
#    deleted pack).
#  - leftovers-gc, leftovers-ckrun: packs of a round that a kill -9 of ckrun
#    cut short, and temporaries, are removed by ckpt gc and by the next
#    ckrun of the job, which takes the dead one's lock at once.
#  - gc-damaged-newest: ckpt gc --keep 1 with a corrupt newest checkpoint
#    (manifest, then pack) keeps the newest good one and says what it did.
#  - refused-dirs: a store, job or manifest directory that is a symbolic
#    link or another user's is refused (69, one line naming it).
#  - missing-store: ckpt ls of a store that does not exist exits 69.
#  - s3-error-fields: an S3 error answer is reduced to its Code and Message,
#    without what looks like a request header (a local fake gateway).
#  - s3-*: against a local Ceph (scripts/ceph-start.sh): a second writer
#    refused, a dead writer's lease taken over on the same host at once and
#    from another host (CKPT_TEST_LOCK_HOST) when its short lease
#    (CKPT_TEST_LEASE_MS) runs out, ckpt unlock --force taking a live lease,
#    ckpt gc aborting a killed writer's multipart upload.
# Prints PASS/FAIL/SKIP lines; exits non-zero on a failure.
set -u
set +m
cd "$(dirname "$0")/../.." || exit 1
top=$PWD
B=${BUILD:-build}
case $B in /*) ;; *) B=$top/$B ;; esac
CKRUN=${CKRUN:-$B/ckrun}
CKPT=${CKPT:-$B/ckpt}
APPS=$B/tests/apps
AWS=/usr/bin/aws
fail=0
PGIDS=()
CLEANUPS=()
W=

pass() { echo "PASS store/$1"; }
skip() { echo "SKIP store/$1: $2"; }
# failx NAME REASON [FILE...]: the files' tails are shown indented.
failx() {
	local name=$1 why=$2 f
	shift 2
	fail=1
	echo "FAIL store/$name: $why"
	for f in "$@"; do
		[ -s "$f" ] || continue
		echo "    --- ${f##*/}"
		tail -n 20 "$f" | sed 's/^/    | /'
	done
}

# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	local p c
	for p in "${PGIDS[@]}"; do kill -9 -- "-$p" 2>/dev/null; done
	for c in "${CLEANUPS[@]}"; do eval "$c" >/dev/null 2>&1; done
	if [ -n "$W" ] && [ -d "$W" ]; then
		if [ "$fail" = 0 ] && [ "${CKPT_TEST_KEEP:-0}" != 1 ]; then
			rm -rf "$W"
		else
			echo "# work directory kept: $W"
		fi
	fi
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# start OUT ERR CKRUN-ARGS... -- CMD...: ckrun in its own session; PID.
start() {
	local out=$1 err=$2
	shift 2
	setsid "$CKRUN" "$@" </dev/null >"$out" 2>>"$err" &
	PID=$!
	PGIDS+=("$PID")
}
# resume OUT ERR CKRUN-ARGS... -- CMD...: same, writing on at OUT's offset.
resume() {
	local out=$1 err=$2
	shift 2
	setsid "$CKRUN" "$@" </dev/null 1<>"$out" 2>>"$err" &
	PID=$!
	PGIDS+=("$PID")
}
# wait_line FILE REGEX LIMIT_MS
wait_line() {
	local end=$(( $(now_ms) + $3 ))
	while (( $(now_ms) < end )); do
		grep -Eq "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
# finish PID LIMIT_MS: its exit status, or 124 after killing its group.
finish() {
	local end=$(( $(now_ms) + $2 ))
	while kill -0 "$1" 2>/dev/null; do
		if (( $(now_ms) > end )); then
			{ kill -9 -- "-$1"; wait "$1"; } 2>/dev/null
			return 124
		fi
		sleep 0.05
	done
	wait "$1" 2>/dev/null
}
# kill9 PID: kill -9 of ckrun alone, then whatever is left of its group.
kill9() {
	{ kill -9 "$1"; wait "$1"; } 2>/dev/null
	local end=$(( $(now_ms) + 5000 ))
	while pgrep -g "$1" >/dev/null 2>&1 && (( $(now_ms) < end )); do sleep 0.05; done
	{ kill -9 -- "-$1"; } 2>/dev/null
	return 0
}
# seqs STORE JOB: committed sequences of a file store, oldest first.
seqs() {
	local f
	for f in "$1/$2"/manifests/*; do
		[ -f "$f" ] || continue
		f=${f##*/}
		[[ $f =~ ^[0-9]{8}$ ]] && echo "$((10#$f))"
	done
}
# verify_all STORE JOB LOG [SEQ...]: every listed (or given) checkpoint
# verifies; at least one.
verify_all() {
	local store=$1 job=$2 log=$3 s n=0
	shift 3
	local -a list=("$@")
	: >"$log"
	if (( ${#list[@]} == 0 )); then
		mapfile -t list < <("$CKPT" ls --store "$store" --json "$job" 2>>"$log" | grep -Eo '"seq":[0-9]+' | cut -d: -f2)
	fi
	for s in "${list[@]}"; do
		timeout -s KILL 120 "$CKPT" verify --store "$store" "$job@$s" >>"$log" 2>&1 || return 1
		n=$((n + 1))
	done
	(( n > 0 ))
}
one_line() { [ "$(grep -c '' "$1")" = 1 ]; }

# bare APP ARGS...: the reference output in $W/APP-ARGS.bare
bare() {
	local f
	f=$W/$(echo "$*" | tr ' /' '__').bare
	[ -f "$f" ] || timeout -s KILL 300 "$APPS/$1" "${@:2}" >"$f" 2>/dev/null
	BARE=$f
}

# ---- two ckrun on one job --------------------------------------------------------

t_two_writers() {
	local d=$W/two store job=twojob a b rc
	store=$d/store
	mkdir -p "$d"
	bare sgd 1.2
	start "$d/a.out" "$d/a.err" -v --store "$store" --job "$job" --interval 400ms -- "$APPS/sgd" 1.2
	a=$PID
	if ! wait_line "$d/a.err" "checkpoint 1 committed" 60000; then
		failx two-writers "the first ckrun committed nothing" "$d/a.err"
		kill9 "$a"
		return
	fi
	timeout -s KILL 60 "$CKRUN" --store "$store" --job "$job" -- "$APPS/sgd" 1.2 </dev/null >"$d/b.out" 2>"$d/b.err"
	rc=$?
	if [ "$rc" != 69 ] || [ -s "$d/b.out" ] || ! one_line "$d/b.err" ||
		! grep -q "job $job in store $store is held by ckrun pid $a on host .*, since " "$d/b.err"; then
		failx two-writers "the second ckrun exited $rc (want 69, one line naming pid $a, the job not run)" \
			"$d/b.err" "$d/b.out"
		kill9 "$a"
		return
	fi
	wait_line "$d/a.err" "checkpoint 4 committed" 60000
	kill9 "$a"
	b=$(seqs "$store" "$job" | tail -n 1)
	resume "$d/a.out" "$d/a.err" -v --resume --store "$store" --job "$job" -- "$APPS/sgd" 1.2
	finish "$PID" 180000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$BARE" "$d/a.out"; then
		failx two-writers "the first job's resume: status $rc or output differs from the bare run" "$d/a.err"
	elif ! grep -q "restored from checkpoint $b" "$d/a.err"; then
		failx two-writers "the resume did not start from checkpoint $b" "$d/a.err"
	elif ! verify_all "$store" "$job" "$d/verify.log"; then
		failx two-writers "a checkpoint does not verify" "$d/verify.log"
	else
		pass two-writers
		echo "    second ckrun: $(cat "$d/b.err")"
	fi
}

# ---- ckpt rm / gc of a running job ---------------------------------------------

t_rm_gc_running() {
	local d=$W/rmgc store job a rc n before
	store=$d/store
	# longer than a control socket's path allows: ckpt finds no socket
	job=$(printf 'a-job-with-a-long-name-%.0s' 1 2 3 4)x
	mkdir -p "$d"
	bare sgd 1.5
	start "$d/a.out" "$d/a.err" -v --store "$store" --job "$job" --interval 300ms -- "$APPS/sgd" 1.5
	a=$PID
	if ! wait_line "$d/a.err" "checkpoint 2 committed" 60000; then
		failx rm-gc-running "no second checkpoint" "$d/a.err"
		kill9 "$a"
		return
	fi
	"$CKPT" rm --store "$store" "$job" >"$d/rm.out" 2>"$d/rm.err"
	rc=$?
	"$CKPT" gc --store "$store" --keep 1 "$job" >"$d/gc.out" 2>"$d/gc.err"
	if [ "$rc" != 69 ] || ! one_line "$d/rm.err" || ! grep -q "rm refused: .*held by ckrun pid $a " "$d/rm.err"; then
		failx rm-gc-running "ckpt rm of the running job exited $rc (want 69, one line naming pid $a)" \
			"$d/rm.err" "$d/rm.out"
	elif ! one_line "$d/gc.err" || ! grep -q "gc refused: .*held by ckrun pid $a " "$d/gc.err"; then
		failx rm-gc-running "ckpt gc of the running job was not refused naming pid $a" "$d/gc.err" "$d/gc.out"
	fi
	[ -z "$(seqs "$store" "$job")" ] && failx rm-gc-running "the refused rm removed checkpoints"
	# forced: the newest, then all, each while checkpoints keep coming
	n=$(seqs "$store" "$job" | tail -n 1)
	"$CKPT" rm --force --store "$store" "$job@$n" >>"$d/force.out" 2>>"$d/force.err"
	wait_line "$d/a.err" "checkpoint $((n + 2)) committed" 60000
	"$CKPT" rm --force --store "$store" "$job" >>"$d/force.out" 2>>"$d/force.err"
	before=$(grep -c committed "$d/a.err")
	finish "$a" 180000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$BARE" "$d/a.out"; then
		failx rm-gc-running "the job: status $rc or output differs from the bare run" "$d/a.err"
	elif grep -q "failed" "$d/a.err"; then
		failx rm-gc-running "a checkpoint failed" "$d/a.err"
	elif (( $(grep -c committed "$d/a.err") <= before )); then
		failx rm-gc-running "no checkpoint committed after ckpt rm --force of the whole job" "$d/a.err"
	elif ! verify_all "$store" "$job" "$d/verify.log"; then
		failx rm-gc-running "a checkpoint committed after ckpt rm --force does not verify" "$d/verify.log" \
			"$d/a.err" "$d/force.out"
	else
		pass rm-gc-running
		grep -m1 "repeating" "$d/a.err" | cut -c1-200 | sed 's/^/    /'
	fi
}

# ---- a killed writer's leftovers ---------------------------------------------

# cut_short STORE JOB ERR OUT: runs memgrow (8 MiB, then 192 MiB more of
# random data), commits a small checkpoint in its first phase, and kills
# ckrun -9 while the large one of its second phase is being written (its
# first pack is there). From scratch again where that round committed
# first. Sets SEQ to the round cut short.
cut_short() {
	local store=$1 job=$2 err=$3 out=$4 try p next
	SEQ=
	for try in 1 2 3; do
		rm -rf "$store"
		: >"$err"
		start "$out" "$err" -v --store "$store" --job "$job" -- "$APPS/memgrow" 1.5 8 192
		p=$PID
		sleep 0.3
		kill -USR2 "$p"
		wait_line "$err" "checkpoint 1 committed" 60000 || { kill9 "$p"; return 1; }
		wait_line "$out" "^phase 1 done" 60000 || { kill9 "$p"; return 1; }
		sleep 0.5 # phase 2's data is written
		next=$(printf %08d 2)
		kill -USR2 "$p"
		for _ in $(seq 1 1000); do
			compgen -G "$store/$job/packs/$next-*" >/dev/null && break
			sleep 0.02
		done
		kill9 "$p"
		if [ ! -e "$store/$job/manifests/$next" ] && compgen -G "$store/$job/packs/$next-*" >/dev/null; then
			SEQ=2
			return 0
		fi
		echo "# try $try: checkpoint 2 committed before the kill" >>"$err"
	done
	return 1
}

# plant STORE JOB SEQ: what a writer killed in the middle of a put leaves.
plant() {
	local p
	p=$(printf %08d "$3")
	: >"$1/$2/packs/.$p-0007-0123456789abcdef.pack.tmp-fedcba9876543210"
	: >"$1/$2/manifests/.$p.tmp-fedcba9876543210"
}
# left STORE JOB SEQ: leftovers still there (packs of SEQ, temporaries).
left() {
	compgen -G "$1/$2/packs/$(printf %08d "$3")-*" >/dev/null ||
		compgen -G "$1/$2/packs/.*.tmp-*" >/dev/null || compgen -G "$1/$2/manifests/.*.tmp-*" >/dev/null
}

t_leftovers() {
	local d=$W/left store job=leftjob rc out
	store=$d/store
	mkdir -p "$d"
	bare memgrow 1.5 8 192
	if ! cut_short "$store" "$job" "$d/a.err" "$d/a.out"; then
		failx leftovers-gc "could not kill ckrun while it wrote a checkpoint" "$d/a.err"
		return
	fi
	plant "$store" "$job" "$SEQ"
	ls -a "$store/$job/packs" "$store/$job/manifests" >"$d/before.ls"
	"$CKPT" gc --store "$store" "$job" >"$d/gc.out" 2>"$d/gc.err"
	rc=$?
	if [ "$rc" != 0 ] || left "$store" "$job" "$SEQ" || ! grep -Eq "([2-9]|[1-9][0-9]+) temporaries of a killed writer" "$d/gc.out"; then
		ls -a "$store/$job/packs" "$store/$job/manifests" >"$d/after.ls"
		failx leftovers-gc "ckpt gc exited $rc; packs of round $SEQ or temporaries left" "$d/gc.out" \
			"$d/gc.err" "$d/before.ls" "$d/after.ls"
	elif ! verify_all "$store" "$job" "$d/verify.log"; then
		failx leftovers-gc "a checkpoint does not verify after gc" "$d/verify.log"
	else
		pass leftovers-gc
		sed 's/^/    /' "$d/gc.out"
	fi

	# again, and this time the next ckrun cleans up, at once (the lock
	# died with its holder)
	store=$d/store2
	if ! cut_short "$store" "$job" "$d/b.err" "$d/b.out"; then
		failx leftovers-ckrun "could not kill ckrun while it wrote a checkpoint" "$d/b.err"
		return
	fi
	plant "$store" "$job" "$SEQ"
	: >"$d/c.err"
	resume "$d/b.out" "$d/c.err" -v --resume --store "$store" --job "$job" -- "$APPS/memgrow" 1.5 8 192
	finish "$PID" 180000
	rc=$?
	out=$(grep "an earlier writer left" "$d/c.err")
	if [ "$rc" != 0 ] || ! cmp -s "$BARE" "$d/b.out"; then
		failx leftovers-ckrun "resume after kill -9: status $rc or output differs" "$d/c.err"
	elif left "$store" "$job" "$SEQ" || ! [[ $out =~ and\ ([2-9]|[1-9][0-9]+)\ temporary\ object ]]; then
		failx leftovers-ckrun "the next ckrun left round $SEQ's packs or the temporaries" "$d/c.err"
	else
		pass leftovers-ckrun
		echo "    $out"
	fi
}

# ---- retention with a damaged newest checkpoint ---------------------------------

# flip FILE OFFSET: xors one byte.
flip() {
	local b
	b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	printf '%b' "\\0$(printf %03o $(( b ^ 0x5a )))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

t_gc_damaged() {
	local d=$W/damaged store job=dmg p i rc how case_store last pk
	store=$d/store
	mkdir -p "$d"
	start "$d/a.out" "$d/a.err" -v --keep 10 --store "$store" --job "$job" -- "$APPS/sgd" 3
	p=$PID
	for i in 1 2 3; do
		sleep 0.5
		kill -USR2 "$p"
		wait_line "$d/a.err" "checkpoint $i committed" 60000 || break
	done
	sleep 0.3
	kill -TERM "$p"
	finish "$p" 60000
	rc=$?
	if [ "$rc" != 75 ] || [ "$(seqs "$store" "$job" | tr '\n' ' ')" != "1 2 3 4 " ]; then
		failx gc-damaged-newest "setup: status $rc, checkpoints $(seqs "$store" "$job" | tr '\n' ' ')" "$d/a.err"
		return
	fi
	for how in manifest pack; do
		case_store=$d/$how
		cp -a "$store" "$case_store"
		if [ "$how" = manifest ]; then
			flip "$case_store/$job/manifests/00000004" 200
		else
			pk=$(compgen -G "$case_store/$job/packs/00000004-0001-*.pack" | head -n 1)
			[ -n "$pk" ] && flip "$pk" 100
		fi
		"$CKPT" gc --store "$case_store" --keep 1 "$job" >"$d/$how.out" 2>"$d/$how.err"
		rc=$?
		last=$(seqs "$case_store" "$job" | tr '\n' ' ')
		if [ "$rc" != 2 ] || [ "$last" != "3 4 " ]; then
			failx "gc-damaged-newest-$how" "ckpt gc --keep 1 exited $rc (want 2) and left checkpoints $last(want 3 4)" \
				"$d/$how.out" "$d/$how.err"
		elif ! grep -q "removed 2 checkpoints (1, 2)" "$d/$how.out" ||
			! grep -q "damaged checkpoint 4 kept and not counted" "$d/$how.err"; then
			failx "gc-damaged-newest-$how" "ckpt gc's messages do not say what it did" "$d/$how.out" "$d/$how.err"
		elif ! verify_all "$case_store" "$job" "$d/$how.verify" 3; then
			failx "gc-damaged-newest-$how" "the kept good checkpoint 3 does not verify" "$d/$how.verify"
		else
			pass "gc-damaged-newest-$how"
			sed 's/^/    /' "$d/$how.out"
			cut -c1-200 "$d/$how.err" | sed 's/^/    /'
		fi
	done
}

# ---- directories another user could have written --------------------------------

t_refused_dirs() {
	local d=$W/dirs good=$W/damaged/store job=dmg who uid made='' rc name
	mkdir -p "$d"
	if [ ! -d "$good/$job" ]; then
		failx refused-dirs "no store to copy from (gc-damaged-newest's setup failed)"
		return
	fi
	# refused CASE STORE: ckpt ls, ckrun --resume and ckpt verify all exit 69
	# with one line naming WANT; the job never runs
	refused() {
		local name=$1 store=$2 want=$3 r1 r2 r3
		"$CKPT" ls --store "$store" "$job" >"$d/$name.ls" 2>&1
		r1=$?
		timeout -s KILL 60 "$CKRUN" --resume --store "$store" --job "$job" -- sh -c "echo ran" \
			</dev/null >"$d/$name.out" 2>"$d/$name.err"
		r2=$?
		"$CKPT" verify --store "$store" "$job" >"$d/$name.verify" 2>&1
		r3=$?
		if [ "$r1/$r2/$r3" != 69/69/69 ] || [ -s "$d/$name.out" ] || ! one_line "$d/$name.err" ||
			! grep -qF "$want" "$d/$name.err" || ! grep -qF "$want" "$d/$name.ls"; then
			failx "refused-dirs-$name" "ls/ckrun/verify exited $r1/$r2/$r3 (want 69 with one line naming $want)" \
				"$d/$name.ls" "$d/$name.err" "$d/$name.out"
		else
			pass "refused-dirs-$name"
			sed 's/^/    /' "$d/$name.err"
		fi
	}
	cp -a "$good" "$d/real"
	ln -s "$d/real" "$d/link"
	refused store-link "$d/link" "$d/link is a symbolic link"
	cp -a "$good" "$d/s2"
	mv "$d/s2/$job" "$d/s2/elsewhere"
	ln -s "$d/s2/elsewhere" "$d/s2/$job"
	refused job-link "$d/s2" "$d/s2/$job is a symbolic link"
	cp -a "$good" "$d/s3"
	mv "$d/s3/$job/manifests" "$d/s3/m"
	ln -s "$d/s3/m" "$d/s3/$job/manifests"
	refused manifests-link "$d/s3" "$d/s3/$job/manifests is a symbolic link"
	if [ "$(id -u)" != 0 ]; then
		skip refused-dirs-foreign "not root: cannot give a directory to another user"
		return
	fi
	# an ordinary user of our own, removed at the end
	name=ckstore$$
	if useradd -M -r -s /usr/sbin/nologin "$name" 2>"$d/useradd.err"; then
		made=$name
		CLEANUPS+=("userdel '$name'")
		uid=$(id -u "$name")
	else
		uid=65534 # nobody, where useradd is not available
	fi
	who="owned by uid $uid, not by this user (uid 0)"
	cp -a "$good" "$d/s4"
	chown -R "$uid" "$d/s4/$job"
	refused job-foreign "$d/s4" "$d/s4/$job is $who"
	cp -a "$good" "$d/s5"
	chown -R "$uid" "$d/s5/$job/manifests"
	refused manifests-foreign "$d/s5" "$d/s5/$job/manifests is $who"
	cp -a "$good" "$d/s6"
	chown "$uid" "$d/s6"
	refused store-foreign "$d/s6" "$d/s6 is $who"
	if [ -n "$made" ]; then
		chown -R 0 "$d/s4" "$d/s5" "$d/s6"
		userdel "$made" 2>/dev/null
		CLEANUPS=()
	fi
}

t_missing_store() {
	local rc
	"$CKPT" ls --store "$W/no-such-store" >"$W/missing.out" 2>"$W/missing.err"
	rc=$?
	if [ "$rc" != 69 ] || ! one_line "$W/missing.err" || ! grep -q "no such directory" "$W/missing.err"; then
		failx missing-store "ckpt ls of a store that does not exist exited $rc (want 69, one line)" \
			"$W/missing.err" "$W/missing.out"
	else
		pass missing-store
	fi
}

# ---- S3 error answers ---------------------------------------------------------------

t_s3_error_fields() {
	local d=$W/errsrv port srv rc py
	py=$(command -v /usr/bin/python3 || command -v python3)
	if [ -z "$py" ]; then
		skip s3-error-fields "no python3 for the fake gateway"
		return
	fi
	mkdir -p "$d"
	# A gateway that refuses everything with an error body echoing the
	# request: its Authorization header and a session token.
	cat >"$d/srv.py" <<-'EOF'
		import http.server, sys
		BODY = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
		        b'<Message>Access Denied&#10;Authorization: AWS4-HMAC-SHA256 '
		        b'Credential=AKIDLEAKEDKEYID/20261202/us-east-1/s3/aws4_request</Message>'
		        b'<CanonicalRequest>GET /b&#10;x-amz-security-token:TOKENLEAK</CanonicalRequest>'
		        b'<RequestId>r1</RequestId></Error>')
		class H(http.server.BaseHTTPRequestHandler):
		    def go(self):
		        n = int(self.headers.get('content-length') or 0)
		        if n:
		            self.rfile.read(n)
		        self.send_response(403)
		        self.send_header('Content-Type', 'application/xml')
		        self.send_header('Content-Length', str(len(BODY)))
		        self.end_headers()
		        if self.command != 'HEAD':
		            self.wfile.write(BODY)
		    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = go
		    def log_message(self, *a):
		        pass
		s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
		open(sys.argv[1] + '.tmp', 'w').write(str(s.server_address[1]))
		__import__('os').rename(sys.argv[1] + '.tmp', sys.argv[1])
		s.serve_forever()
	EOF
	"$py" "$d/srv.py" "$d/port" &
	srv=$!
	CLEANUPS+=("kill $srv")
	for _ in $(seq 1 100); do [ -s "$d/port" ] && break; sleep 0.05; done
	port=$(cat "$d/port" 2>/dev/null)
	env AWS_ACCESS_KEY_ID=AKIDTEST AWS_SECRET_ACCESS_KEY=secret CKPT_S3_TRIES=1 \
		"$CKPT" ls --store s3://bucket/p --s3-endpoint "http://127.0.0.1:$port" >"$d/out" 2>"$d/err"
	rc=$?
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	if [ -z "$port" ]; then
		failx s3-error-fields "the fake gateway did not start"
	elif [ "$rc" != 69 ] || ! one_line "$d/err" || ! grep -q "HTTP 403 AccessDenied: Access Denied" "$d/err"; then
		failx s3-error-fields "exit $rc (want 69, one line with the Code and Message)" "$d/err"
	elif grep -qiE "AKIDLEAKEDKEYID|TOKENLEAK|Authorization|Credential=" "$d/err"; then
		failx s3-error-fields "the error line carries what the gateway echoed of the request" "$d/err"
	else
		pass s3-error-fields
		sed 's/^/    /' "$d/err"
	fi
}

# ---- S3 (a local Ceph) -----------------------------------------------------------

ceph_up() {
	CEPH=$W/ceph
	if [ "$(id -u)" -ne 0 ] && ! command -v radosgw >/dev/null; then
		return 2
	fi
	CLEANUPS+=("'$top/scripts/ceph-stop.sh' '$CEPH'")
	# one more try from scratch if the first start fails (start-up races)
	"$top/scripts/ceph-start.sh" "$CEPH" >"$W/ceph-start.log" 2>&1 ||
		"$top/scripts/ceph-start.sh" "$CEPH" >>"$W/ceph-start.log" 2>&1 || return 1
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_SHARED_CREDENTIALS_FILE AWS_ENDPOINT_URL AWS_DEFAULT_REGION \
		CKPT_S3_TRIES CKPT_S3_PARALLEL CKPT_S3_CONNECT_TIMEOUT CKPT_S3_STALL_TIMEOUT CKPT_S3_DEBUG
	# shellcheck disable=SC1091
	. "$CEPH/s3.env"
	export CKPT_S3_BACKOFF_MS=100
	U=s3://$CKPT_S3_BUCKET/store-suite-$$
}

t_s3() {
	local d=$W/s3 a rc i first job
	mkdir -p "$d"
	ceph_up
	rc=$?
	if [ "$rc" = 2 ]; then
		skip s3 "Ceph is not installed and we are not root to install it"
		return
	elif [ "$rc" != 0 ]; then
		failx s3-ceph-start "Ceph did not start" "$W/ceph-start.log"
		return
	fi
	bare sgd 1.2

	# a second writer refused, naming the first
	job=s3two
	start "$d/$job.out" "$d/$job.err" -v --store "$U" --job "$job" --interval 500ms -- "$APPS/sgd" 1.2
	a=$PID
	if ! wait_line "$d/$job.err" "checkpoint 1 committed" 60000; then
		failx s3-two-writers "no checkpoint committed" "$d/$job.err"
	else
		timeout -s KILL 60 "$CKRUN" --store "$U" --job "$job" -- "$APPS/sgd" 1.2 </dev/null >"$d/b.out" 2>"$d/b.err"
		rc=$?
		if [ "$rc" != 69 ] || [ -s "$d/b.out" ] || ! one_line "$d/b.err" ||
			! grep -q "held by ckrun pid $a on host .*lease until" "$d/b.err"; then
			failx s3-two-writers "the second ckrun exited $rc (want 69, one line naming pid $a)" "$d/b.err"
		else
			pass s3-two-writers
			sed 's/^/    /' "$d/b.err"
		fi
	fi
	# killed: its lease is taken over at once on the same host
	wait_line "$d/$job.err" "checkpoint 2 committed" 60000
	kill9 "$a"
	resume "$d/$job.out" "$d/$job.err" -v --resume --store "$U" --job "$job" -- "$APPS/sgd" 1.2
	finish "$PID" 180000
	rc=$?
	if [ "$rc" != 0 ] || ! cmp -s "$BARE" "$d/$job.out" || ! grep -q "restored from checkpoint" "$d/$job.err"; then
		failx s3-takeover-same-host "resume after kill -9: status $rc, or not restored, or output differs" \
			"$d/$job.err"
	elif ! verify_all "$U" "$job" "$d/$job.verify"; then
		failx s3-takeover-same-host "a checkpoint does not verify" "$d/$job.verify"
	else
		pass s3-takeover-same-host
	fi

	# a writer of another host (as far as the lease says), killed: refused
	# until its 3 s lease runs out, then taken over
	job=s3lease
	CKPT_TEST_LOCK_HOST=otherhost CKPT_TEST_LEASE_MS=3000 \
		start "$d/$job.out" "$d/$job.err" -v --store "$U" --job "$job" --interval 500ms -- "$APPS/sgd" 1.2
	a=$PID
	if ! wait_line "$d/$job.err" "checkpoint 2 committed" 60000; then
		failx s3-lease-takeover "no checkpoint committed" "$d/$job.err"
		kill9 "$a"
	else
		kill9 "$a"
		first=
		for i in $(seq 1 240); do
			: >"$d/try.err"
			resume "$d/$job.out" "$d/try.err" -v --resume --store "$U" --job "$job" -- "$APPS/sgd" 1.2
			finish "$PID" 180000
			rc=$?
			[ -z "$first" ] && { first=$rc; cp "$d/try.err" "$d/first.err"; }
			[ "$rc" != 69 ] && break
			grep -q "held by ckrun pid $a on host otherhost" "$d/try.err" || break
			sleep 0.25
		done
		cat "$d/try.err" >>"$d/$job.err"
		if [ "$first" != 69 ] || ! one_line "$d/first.err" ||
			! grep -q "held by ckrun pid $a on host otherhost.*lease until" "$d/first.err"; then
			failx s3-lease-takeover "the first resume exited $first (want 69 naming pid $a on otherhost)" \
				"$d/first.err"
		elif [ "$rc" != 0 ] || ! cmp -s "$BARE" "$d/$job.out" || ! grep -q "restored from checkpoint" "$d/try.err"; then
			failx s3-lease-takeover "after the lease ran out: status $rc, not restored, or output differs" \
				"$d/try.err"
		elif ! verify_all "$U" "$job" "$d/$job.verify"; then
			failx s3-lease-takeover "a checkpoint does not verify" "$d/$job.verify"
		else
			pass s3-lease-takeover
			echo "    refused $((i - 1)) times, then resumed: $(sed 's/^/    /' "$d/first.err")"
		fi
	fi

	# ckpt unlock: a live lease only with --force; its holder then commits
	# nothing more, and a new writer can start
	job=s3unlock
	CKPT_TEST_LOCK_HOST=otherhost start "$d/$job.out" "$d/$job.err" -v --store "$U" --job "$job" -- "$APPS/sgd" 3
	a=$PID
	sleep 0.5
	kill -USR2 "$a"
	if ! wait_line "$d/$job.err" "checkpoint 1 committed" 60000; then
		failx s3-unlock "no checkpoint committed" "$d/$job.err"
	else
		"$CKPT" unlock --store "$U" "$job" >"$d/u1.out" 2>"$d/u1.err"
		rc=$?
		"$CKPT" unlock --force --store "$U" "$job" >"$d/u2.out" 2>"$d/u2.err"
		i=$?
		kill -USR2 "$a"
		if [ "$rc" != 69 ] || ! grep -q "unlock --force" "$d/u1.err" || [ "$i" != 0 ] ||
			! grep -q "lock of ckrun pid $a on host otherhost.* removed" "$d/u2.out"; then
			failx s3-unlock "ckpt unlock exited $rc (want 69), with --force $i (want 0)" "$d/u1.err" "$d/u2.err" \
				"$d/u2.out"
		elif ! wait_line "$d/$job.err" "checkpoint 2 of job $job failed: .*lost the lock" 60000; then
			failx s3-unlock "the holder did not notice it lost the lock" "$d/$job.err"
		else
			timeout -s KILL 120 "$CKRUN" --store "$U" --job "$job" -- /bin/true >"$d/u3.out" 2>"$d/u3.err"
			rc=$?
			if [ "$rc" != 0 ]; then
				failx s3-unlock "a new writer after the unlock exited $rc" "$d/u3.err"
			else
				pass s3-unlock
				grep -o "checkpoint 2 of job .*" "$d/$job.err" | cut -c1-200 | sed 's/^/    /'
			fi
		fi
	fi
	kill9 "$a"

	# a killed writer's multipart upload: aborted by ckpt gc
	job=s3two
	if [ ! -x "$AWS" ]; then
		skip s3-gc-uploads "no awscli to start a multipart upload"
	elif ! "$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3api create-multipart-upload --bucket "$CKPT_S3_BUCKET" \
		--key "${U#s3://"$CKPT_S3_BUCKET"/}/$job/packs/00000099-0001-00000000deadbeef.pack" \
		>"$d/mpu.out" 2>&1; then
		failx s3-gc-uploads "could not start a multipart upload" "$d/mpu.out"
	else
		"$CKPT" gc --store "$U" "$job" >"$d/gc.out" 2>"$d/gc.err"
		rc=$?
		"$AWS" --endpoint-url "$CKPT_S3_ENDPOINT" s3api list-multipart-uploads --bucket "$CKPT_S3_BUCKET" \
			--prefix "${U#s3://"$CKPT_S3_BUCKET"/}/$job/" --output text >"$d/mpu.ls" 2>&1
		if [ "$rc" != 0 ] || ! grep -q "1 temporary of a killed writer" "$d/gc.out" || grep -q UPLOADS "$d/mpu.ls"; then
			failx s3-gc-uploads "ckpt gc exited $rc; the upload is left" "$d/gc.out" "$d/gc.err" "$d/mpu.ls"
		elif ! verify_all "$U" "$job" "$d/gc.verify"; then
			failx s3-gc-uploads "a checkpoint does not verify after gc" "$d/gc.verify"
		else
			pass s3-gc-uploads
			sed 's/^/    /' "$d/gc.out"
		fi
	fi
}

main() {
	local t
	if [ ! -x "$CKRUN" ] || [ ! -x "$CKPT" ]; then
		skip store "ckrun or ckpt is not built ($CKRUN, $CKPT); run make"
		return 0
	fi
	for t in sgd memgrow; do
		if [ ! -x "$APPS/$t" ]; then
			failx store "$APPS/$t is not built; run make"
			return 1
		fi
	done
	W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-store.XXXXXX") || return 1
	trap cleanup EXIT
	trap 'fail=1; echo "FAIL store: interrupted"; exit 130' INT TERM
	# CKPT_TEST_STORE: a subset of the parts, by name
	for t in ${CKPT_TEST_STORE:-two_writers rm_gc_running leftovers gc_damaged refused_dirs missing_store \
		s3_error_fields s3}; do
		case $t in
		two_writers) t_two_writers ;;
		rm_gc_running) t_rm_gc_running ;;
		leftovers) t_leftovers ;;
		gc_damaged) t_gc_damaged ;;
		refused_dirs) t_refused_dirs ;;
		missing_store) t_missing_store ;;
		s3_error_fields) t_s3_error_fields ;;
		s3) t_s3 ;;
		*) failx store "no part named $t" ;;
		esac
	done
	return "$fail"
}

main
exit $?
