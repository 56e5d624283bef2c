#!/usr/bin/env bash
# Operators' views of a job's history: `ckpt report` (a picture, SVG or
# PNG) and the progress lines of long transfers on a terminal.
# memgrow runs with two checkpoints and a stop (3), is resumed on a
# terminal (a pty from script(1)), checkpointed (4) and stopped (5), then
# resumed with stderr on a pipe and left to finish:
#   - every resume is a restore (h_proof), and each left a restore record;
#   - the resume on the terminal drew "restore JOB@3: X of Y (P%), R/s,
#     ETA/done" lines; the one on a pipe drew nothing (no line, no "\r");
#     `ckpt verify` and `ckpt cp` likewise, each run on a pty and on a pipe;
#   - `ckpt report -o F.svg`: XML that python's parser reads, one mark
#     (class checkpoint, data-seq) per checkpoint `ckpt ls` lists and one
#     per restore (class restore, data-seq 3 and 5), the bars' heights
#     what `ckpt ls --json` says (value * 130 / the panel's largest,
#     rounded, at least 1 px);
#   - `-o F.png`: read by PIL, the size the SVG says, and in its pixels
#     every size and time bar is the bar's colour from the plot's baseline
#     up to the height the data gives and no further, and each restore
#     line is there;
#   - `ckpt cp` copies the restore records: the copy's picture has both;
#   - bad input: an unknown extension and a missing -o are 64, a job the
#     store lacks 2, a store that does not exist 69, an output that cannot
#     be written 73; one line each, and no file left.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

PY=${PYTHON:-/usr/bin/python3}
APP=$H_BUILD/tests/apps/memgrow
ckpt() { timeout -s KILL 120 "$CKPT" "$@"; }

# on_pty OUT CMD...: runs CMD with stdin, stdout and stderr on a new
# terminal; what it wrote there goes to OUT.
on_pty() {
	local out=$1 cmd
	shift
	cmd=$(printf '%q ' "$@")
	timeout -s KILL 120 script -qfec "$cmd" /dev/null </dev/null >"$out" 2>&1
}

# progress_ok FILE WHAT: FILE holds a progress line for WHAT ("verify J@5").
progress_ok() {
	tr '\r' '\n' <"$1" | grep -Eq "^$2: [0-9.]+ ([KMGTP]i)?B of [0-9.]+ ([KMGTP]i)?B \([0-9]+%\), ([0-9.]+ ([KMGTP]i)?B|-)/s, (ETA [0-9hms-]+|done)"
}

# no_progress FILE WHAT: no trace of a progress line in FILE.
no_progress() { ! grep -q "$2:" "$1" && ! grep -q $'\r' "$1"; }

main() {
	h_init report
	local d=$H_WORK st job rc why n
	st=$d/st
	job=report-$$
	if [ ! -x "$APP" ] || ! h_have_ckpt || ! h_have_ckrun; then
		h_fail report/build "missing $APP, $CKRUN or $CKPT (run make)"
		return 1
	fi
	if ! command -v script >/dev/null || ! "$PY" -c 'import PIL' 2>/dev/null; then
		h_fail report/deps "needs script (bsdutils) and $PY with PIL (python3-pil): scripts/deps.sh"
		return 1
	fi
	H_CMD=("$APP" 1 8 24)

	# ---- run 1: checkpoints 1 and 2, then a stop (3)
	h_start new "$d/out" "$d/err" --store "$st" --job "$job"
	if ! h_wait_origin "$H_PID" "$d/err" 20000; then
		h_fail report/start "the job did not start" "$d/err"
		return 1
	fi
	for n in 1 2; do
		kill -USR2 "$H_PID"
		if ! h_wait_line "$d/err" "checkpoint $n committed" 30000 "$H_PID"; then
			h_fail report/checkpoint "checkpoint $n not committed" "$d/err"
			return 1
		fi
	done
	kill -TERM "$H_PID"
	h_wait "$H_PID" 30000
	rc=$?
	if [ "$rc" != 75 ]; then
		h_fail report/stop "run 1 exit $rc, want 75" "$d/err"
		return 1
	fi

	# ---- run 2, on a terminal: the restore draws its progress; 4, stop (5)
	h_run_mark "$d/err" resume 1
	# stdin from /dev/null: with 0 and 2 one open terminal, ckrun saves 2
	# as a duplicate of 0, and a resume would make it the new stdin
	CKPT_TEST_ORIGIN=1 on_pty "$d/pty2" bash -c 'exec "$@" </dev/null 1<>"'"$d/out"'"' _ \
		"$CKRUN" -v --store "$st" --job "$job" --resume -- "${H_CMD[@]}" &
	local spid=$!
	if ! h_wait_line "$d/pty2" "restored from checkpoint 3" 30000 "$spid"; then
		h_fail report/resume-pty "no restore on the terminal" "$d/pty2"
		return 1
	fi
	ckpt checkpoint "$job" >"$d/ck4" 2>&1 && ckpt checkpoint --stop "$job" >"$d/ck5" 2>&1
	rc=$?
	wait "$spid"
	tr -d '\r' <"$d/pty2" >>"$d/err" # h_proof reads the run's lines
	if [ "$rc" != 0 ]; then
		h_fail report/resume-pty "ckpt checkpoint failed" "$d/ck4" "$d/ck5" "$d/pty2"
		return 1
	fi
	if progress_ok "$d/pty2" "restore $job@3"; then
		h_pass "report/progress-restore-tty: $(tr '\r' '\n' <"$d/pty2" | sed 's/\x1b\[K//g' | grep -m1 "^restore $job@3: .*done")"
	else
		h_fail report/progress-restore-tty "no progress line of the restore on the terminal" "$d/pty2"
	fi

	# ---- run 3, stderr on a pipe: no progress; the job ends
	h_run_mark "$d/err" resume 1
	CKPT_TEST_ORIGIN=1 setsid "$CKRUN" -v --store "$st" --job "$job" --resume -- "${H_CMD[@]}" \
		</dev/null 1<>"$d/out" 2> >(cat >"$d/err3") &
	H_PID=$!
	h_wait "$H_PID" 60000
	rc=$?
	sleep 0.2 # the pipe's reader writes its last bytes
	cat "$d/err3" >>"$d/err"
	if [ "$rc" != 0 ]; then
		h_fail report/resume-pipe "run 3 exit $rc, want 0" "$d/err3"
		return 1
	fi
	if ! grep -q "restored from checkpoint 5" "$d/err3"; then
		h_fail report/resume-pipe "run 3 did not restore checkpoint 5" "$d/err3"
	elif ! no_progress "$d/err3" "restore $job@"; then
		h_fail report/progress-restore-pipe "a progress line went to a pipe" "$d/err3"
	else
		h_pass "report/progress-restore-pipe: none on a pipe"
	fi
	if why=$(h_proof "$d/err"); then
		h_pass "report/proof: both resumes restored"
	else
		h_fail report/proof "$why" "$d/err"
	fi

	# ---- verify and cp: a line on a terminal, none on a pipe
	local first last # ckrun keeps the newest 3
	first=$(ckpt ls --store "$st" "$job" | awk 'NR == 2 { print $1 }')
	last=$(ckpt ls --store "$st" "$job" | awk 'NR > 1 { s = $1 } END { print s }')
	on_pty "$d/v.pty" "$CKPT" verify --store "$st" "$job"
	ckpt verify --store "$st" "$job" 2>&1 | cat >"$d/v.pipe"
	if progress_ok "$d/v.pty" "verify $job@$last" && no_progress "$d/v.pipe" "verify $job@"; then
		h_pass "report/progress-verify: on a terminal, not on a pipe"
	else
		h_fail report/progress-verify "want a progress line on the terminal only" "$d/v.pty" "$d/v.pipe"
	fi
	on_pty "$d/cp.pty" "$CKPT" cp "$st" "$d/st2" "$job"
	ckpt cp "$st" "$d/st3" "$job" 2>&1 | cat >"$d/cp.pipe"
	if progress_ok "$d/cp.pty" "copy $job@$first" && no_progress "$d/cp.pipe" "copy $job@" &&
		grep -q "copied to" "$d/cp.pipe"; then
		h_pass "report/progress-cp: on a terminal, not on a pipe"
	else
		h_fail report/progress-cp "want a progress line on the terminal only" "$d/cp.pty" "$d/cp.pipe"
	fi

	# ---- the pictures
	ckpt ls --store "$st" --json "$job" >"$d/ls.json"
	if ! ckpt report --store "$st" "$job" -o "$d/r.svg" >"$d/svg.out" 2>&1 ||
		! ckpt report --store "$st" "$job" -o "$d/r.png" >"$d/png.out" 2>&1; then
		h_fail report/render "ckpt report failed" "$d/svg.out" "$d/png.out"
	elif why=$("$PY" - "$d/r.svg" "$d/r.png" "$d/ls.json" 2>&1 <<'PYEOF'
import json, sys
import xml.etree.ElementTree as ET
from PIL import Image

svg, png, lsj = sys.argv[1:4]
NS = '{http://www.w3.org/2000/svg}'
root = ET.parse(svg).getroot()
W, H = int(root.get('width')), int(root.get('height'))
cks = [c for c in json.load(open(lsj)) if c['ok']]
seqs = [c['seq'] for c in cks]
groups = list(root.iter(NS + 'g'))
marks = [int(g.get('data-seq')) for g in groups if g.get('class') == 'checkpoint']
restores = sorted(int(g.get('data-seq')) for g in groups if g.get('class') == 'restore')
bad = []
if marks != seqs:
    bad.append('checkpoint marks %s, ckpt ls has %s' % (marks, seqs))
if restores != [3, 5]:
    bad.append('restore marks %s, want [3, 5]' % restores)
plots = {r.get('data-panel'): r for r in root.iter(NS + 'rect') if r.get('class') == 'plot'}
base = {k: int(r.get('y')) + int(r.get('height')) for k, r in plots.items()}
PH = 130
def height(v, mx):
    if v == 0 or mx == 0:
        return 0
    return min(PH, max(1, int(v * PH / mx + 0.5)))
maxb = max(max(c['logical_bytes'], c['stored_bytes']) for c in cks)
maxt = max(max(c['duration_ns'], c['frozen_ns']) for c in cks)
want = {'logical': ('size', 'logical_bytes', maxb), 'stored': ('size', 'stored_bytes', maxb),
        'duration': ('time', 'duration_ns', maxt), 'frozen': ('time', 'frozen_ns', maxt)}
pal = {}
im = Image.open(png)
if im.size != (W, H):
    bad.append('PNG %s, SVG %dx%d' % (im.size, W, H))
px = im.convert('RGB').load()
def rgb(fill):
    return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
nbars = 0
for g in groups:
    if g.get('class') != 'checkpoint':
        continue
    ck = cks[seqs.index(int(g.get('data-seq')))]
    for r in g.iter(NS + 'rect'):
        cls = r.get('class')
        if cls not in want:
            continue
        panel, field, mx = want[cls]
        x, y, w, h = (int(r.get(a)) for a in ('x', 'y', 'width', 'height'))
        exp = height(ck[field], mx)
        if h != exp or y + h != base[panel]:
            bad.append('seq %d %s: SVG bar %d px high ending at %d, data says %d ending at %d'
                       % (ck['seq'], cls, h, y + h, exp, base[panel]))
        col, cx = rgb(r.get('fill')), x + w // 2
        run = 0
        while run < PH and px[cx, base[panel] - 1 - run] == col:
            run += 1
        if run != exp:
            bad.append('seq %d %s: PNG bar %d px high at x %d, data says %d' % (ck['seq'], cls, run, cx, exp))
        nbars += 1
for r in root.iter(NS + 'rect'):
    if r.get('class') == 'restore-line':
        x, y, w, h = (int(r.get(a)) for a in ('x', 'y', 'width', 'height'))
        if px[x, y + h // 2] != rgb(r.get('fill')):
            bad.append('restore line missing in the PNG at x %d' % x)
if nbars != 4 * len(cks):
    bad.append('%d size/time bars for %d checkpoints' % (nbars, len(cks)))
if bad:
    print('; '.join(bad[:6]))
    sys.exit(1)
print('%d checkpoint marks, restores %s, %d bars checked in both, PNG %dx%d' % (len(marks), restores, nbars, W, H))
PYEOF
	); then
		h_pass "report/render: $why"
	else
		h_fail report/render "$why" "$d/r.svg"
	fi

	# ---- ckpt cp took the restore records along
	if ckpt report --store "$d/st2" "$job" -o "$d/r2.svg" >"$d/r2.out" 2>&1 &&
		[ "$(grep -o '<g class="restore" data-seq="[0-9]*"' "$d/r2.svg" | grep -o '[0-9]*' | tr '\n' ' ')" = "3 5 " ]; then
		h_pass "report/cp-history: the copy's picture shows the restores of 3 and 5"
	else
		h_fail report/cp-history "the copy's picture lacks the restores" "$d/r2.out" "$d/r2.svg"
	fi

	# ---- bad input: one line, the documented status, no file
	bad() { # NAME WANT-STATUS OUTPUT ARGS...
		local name=$1 want=$2 out=$3 got
		shift 3
		ckpt "$@" >"$d/bad.out" 2>"$d/bad.err"
		got=$?
		if [ "$got" != "$want" ] || [ "$(wc -l <"$d/bad.err")" != 1 ] || [ -e "$out" ] ||
			compgen -G "$out.tmp-*" >/dev/null; then
			h_fail "report/bad-$name" "exit $got (want $want), $(wc -l <"$d/bad.err") lines on stderr" "$d/bad.err"
		else
			h_pass "report/bad-$name: exit $got: $(cat "$d/bad.err")"
		fi
	}
	mkdir -p "$d/dir.svg"
	bad extension 64 "$d/x.jpg" report --store "$st" "$job" -o "$d/x.jpg"
	bad no-output 64 "$d/none" report --store "$st" "$job"
	bad no-job 2 "$d/x.svg" report --store "$st" nosuchjob -o "$d/x.svg"
	bad no-store 69 "$d/x.svg" report --store "$d/nostore" "$job" -o "$d/x.svg"
	bad unwritable 73 "$d/nodir/x.png" report --store "$st" "$job" -o "$d/nodir/x.png"
	bad output-dir 73 "$d/dir.svg/x" report --store "$st" "$job" -o "$d/dir.svg"
	return "$H_FAILED"
}

main "$@"
