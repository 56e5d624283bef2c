#!/usr/bin/env bash
# Metrics and events (ckrun --metrics, --metrics-file, --events):
#   scrape    a real Prometheus (Debian's, started here on loopback) scrapes
#             ckrun's /metrics; a query through its HTTP API returns the
#             job's checkpoint count and the last checkpoint's sequence
#   file      --metrics-file holds the same series after every round;
#             --events has one JSON object per line for each checkpoint
#             and the end
#   refusal   a refused round counts as refused and writes a "refusal" event
#   restore   a resume counts a restore, with a "restore" event
#   bad-addr  a --metrics address that cannot be used: exit 64, one line
#   interval  --interval counts from the end of the previous round: with
#             rounds longer than the interval (each asks the job 150 ms
#             late: CKPT_TEST_ASK_DELAY_MS),
#             no round starts (its event's time less its seconds) within
#             the interval of the previous one's end
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
h_init metrics
JOB=metricjob

free_port() {
	"$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# value FILE SERIES-REGEX: the value of the first sample line matching.
value() { awk -v re="^$2" '$0 ~ re { print $NF; exit }' "$1"; }

# promql QUERY: the first result's value through Prometheus' HTTP API.
promql() {
	curl -fsS --max-time 5 "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
		"$PYTHON" -c 'import json,sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "")' 2>/dev/null
}

start_prometheus() {
	local d=$H_WORK/prom i
	mkdir -p "$d/data"
	PPORT=$(free_port)
	cat >"$d/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ckrun
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
	prometheus --config.file="$d/prometheus.yml" --storage.tsdb.path="$d/data" \
		--web.listen-address="127.0.0.1:$PPORT" >"$d/log" 2>&1 &
	PROM_PID=$!
	disown "$PROM_PID" # no "Killed" notice at the cleanup
	H_CLEANUPS+=("kill -9 $PROM_PID")
	for (( i = 0; i < 300; i++ )); do
		curl -fsS --max-time 2 "http://127.0.0.1:$PPORT/-/ready" >/dev/null 2>&1 && return 0
		h_alive "$PROM_PID" || break
		sleep 0.1
	done
	return 1
}

case_scrape_file() {
	local d=$H_WORK/scrape i v seq ok=0 rc
	mkdir -p "$d"
	: >"$d/err"
	MPORT=$(free_port)
	h_app_cmd sgd 4
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB" --metrics "$MPORT" \
		--metrics-file "$d/m.prom" --events "$d/ev.json"
	h_wait_origin "$H_PID" "$d/err" 10000
	for i in 1 2; do
		kill -USR2 "$H_PID"
		if ! h_wait_line "$d/err" "checkpoint $i committed" 30000 "$H_PID"; then
			h_fail metrics/scrape "checkpoint $i did not commit" "$d/err"
			{ h_kill_group "$H_PID"; h_wait "$H_PID" 5000; } >/dev/null 2>&1
			return
		fi
	done
	if ! start_prometheus; then
		h_fail metrics/scrape "Prometheus did not start" "$H_WORK/prom/log"
	else
		# the scrape every second; wait for a sample of ours
		for (( i = 0; i < 200 && ok == 0; i++ )); do
			v=$(promql "ckrun_checkpoints_total{ckrun_job=\"$JOB\"}")
			seq=$(promql "ckrun_last_checkpoint_sequence{ckrun_job=\"$JOB\"}")
			[ "$v" = 2 ] && [ "$seq" = 2 ] && ok=1
			(( ok )) || sleep 0.1
		done
		if (( ok )); then
			h_pass metrics/scrape
		else
			h_fail metrics/scrape "Prometheus query: checkpoints_total '$v', last sequence '$seq' (want 2, 2)" \
				"$H_WORK/prom/log"
		fi
	fi
	kill -TERM "$H_PID"
	h_wait "$H_PID" 60000
	rc=$?
	v=$(value "$d/m.prom" "ckrun_checkpoints_total[{]ckrun_job=\"$JOB\"[}]")
	if [ "$rc" != 75 ]; then
		h_fail metrics/file "ckrun exited $rc after SIGTERM, want 75" "$d/err"
	elif [ "$v" != 3 ]; then
		h_fail metrics/file "metrics file: checkpoints_total '$v', want 3 (2 asked, 1 at the stop)" "$d/m.prom"
	elif ! "$PYTHON" - "$d/ev.json" "$d/m.prom" >"$d/ev.check" 2>&1 <<'EOF'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [e["event"] for e in ev]
assert kinds == ["checkpoint"] * 3 + ["end"], kinds
assert [e["seq"] for e in ev[:3]] == [1, 2, 3], ev
assert ev[2]["stop"] is True and ev[3]["status"] == 75, ev
assert all(e["job"] == "metricjob" and e["stored_bytes"] > 0 for e in ev[:3]), ev
# ckrun's own CPU time in each round: read, hash, compress cost some
assert all(0 < e["cpu_seconds"] < 60 for e in ev[:3]), ev
cpu = sum(e["cpu_seconds"] for e in ev[:3])
m = [l.split()[-1] for l in open(sys.argv[2]) if l.startswith("ckrun_checkpoint_cpu_seconds_total{")]
assert m and abs(float(m[0]) - cpu) < 1e-3, (m, cpu)
EOF
	then
		h_fail metrics/file "events file" "$d/ev.check" "$d/ev.json"
	else
		h_pass metrics/file
	fi
	# the restore: counted, and an event
	: >"$d/m.prom"
	h_start resume "$d/out" "$d/err" --store "$d/s" --job "$JOB" --resume --metrics-file "$d/m.prom" \
		--events "$d/ev.json"
	h_wait "$H_PID" 120000
	rc=$?
	v=$(value "$d/m.prom" "ckrun_restores_total[{]ckrun_job=\"$JOB\"[}]")
	if [ "$rc" != 0 ] || ! h_proof "$d/err" >/dev/null; then
		h_fail metrics/restore "resume: status $rc or no restore proven" "$d/err"
	elif [ "$v" != 1 ] || ! grep -q '"event":"restore".*"seq":3' "$d/ev.json"; then
		h_fail metrics/restore "restores_total '$v' (want 1), or no restore event of checkpoint 3" \
			"$d/m.prom" "$d/ev.json"
	else
		h_pass metrics/restore
	fi
}

case_refusal() {
	local d=$H_WORK/refusal v
	mkdir -p "$d"
	: >"$d/err"
	H_CMD=("$H_BUILD/tests/unsupported/uring")
	h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB" --metrics-file "$d/m.prom" --events "$d/ev.json"
	h_wait_origin "$H_PID" "$d/err" 10000
	h_sleep_alive "$H_PID" 200
	kill -USR2 "$H_PID"
	h_wait_line "$d/err" "keeps running" 15000 "$H_PID"
	h_wait "$H_PID" 60000
	v=$(value "$d/m.prom" "ckrun_checkpoint_failures_total[{]ckrun_job=\"$JOB\",reason=\"refused\"[}]")
	if [ "$v" != 1 ] || ! grep -q '"event":"refusal".*io_uring' "$d/ev.json"; then
		h_fail metrics/refusal "refused count '$v' (want 1) or no refusal event naming io_uring" "$d/m.prom" \
			"$d/ev.json" "$d/err"
	else
		h_pass metrics/refusal
	fi
}

case_bad_addr() {
	local d=$H_WORK/bad rc
	mkdir -p "$d"
	timeout -s KILL 30 "$CKRUN" --store "$d/s" --job "$JOB" --metrics 127.0.0.1:99999 -- true >"$d/out" 2>"$d/err"
	rc=$?
	if [ "$rc" != 64 ] || [ "$(wc -l <"$d/err")" != 1 ] || ! grep -q -- "--metrics" "$d/err"; then
		h_fail metrics/bad-addr "exit $rc (want 64) or not one line naming --metrics" "$d/err"
	else
		h_pass metrics/bad-addr
	fi
}

case_interval() {
	local d=$H_WORK/interval why rc
	mkdir -p "$d"
	: >"$d/err"
	h_app_cmd sgd 2
	CKPT_TEST_ASK_DELAY_MS=150 h_start new "$d/out" "$d/err" --store "$d/s" --job "$JOB-iv" --interval 100ms \
		--keep 2 --events "$d/ev.json"
	h_wait "$H_PID" 120000
	rc=$?
	# pairs of checkpoints in a row: the second's start (its time less
	# its seconds, request to commit) at least 100 ms after the first's
	# event (written before the interval starts again; 2 ms for rounding)
	why=$("$PYTHON" - "$d/ev.json" <<'PY'
import datetime, json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def t(e):
    return datetime.datetime.strptime(e["time"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
ck = [e for e in ev if e["event"] in ("checkpoint", "refusal", "checkpoint-failed")]
pairs = [(a, b) for a, b in zip(ck, ck[1:]) if a["event"] == "checkpoint" and b["event"] == "checkpoint"]
longer = sum(1 for e in ck if e.get("seconds", 0) > 0.1)
gaps = [t(b) - b["seconds"] - t(a) for a, b in pairs]
if len(pairs) < 3:
    print(f"{len(pairs)} pairs of checkpoints in a row, wanted 3")
elif longer < 2:
    print(f"{longer} round(s) longer than the 100 ms interval: nothing to show")
elif min(gaps) < 0.098:
    print(f"a round started {min(gaps) * 1000:.0f} ms after the previous one ended (interval 100 ms)")
else:
    print(f"OK {len(pairs)} pairs, {longer} rounds longer than the interval, gaps from {min(gaps) * 1000:.0f} ms")
PY
)
	if [ "$rc" != 0 ]; then
		h_fail metrics/interval "the job under --interval 100ms exited $rc" "$d/err"
	elif [[ $why != OK* ]]; then
		h_fail metrics/interval "$why" "$d/ev.json" "$d/err"
	else
		h_pass "metrics/interval: ${why#OK }"
	fi
}

main() {
	if ! h_have_ckrun; then
		h_fail metrics "ckrun is not built ($CKRUN); run make"
		return
	fi
	if ! CKPT_DEPS_EXTRA="prometheus curl" "$H_TOP/scripts/deps.sh"; then
		h_fail metrics "Prometheus and curl cannot be installed (scripts/deps.sh)"
		return
	fi
	case_scrape_file
	case_refusal
	case_bad_addr
	case_interval
}

main
