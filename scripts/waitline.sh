# shellcheck shell=bash
# Sourced by the bench scripts: wait for a line in a growing log without
# starting a process per poll. On this project's VM a fork and exec costs
# enough that the old loop (grep and sleep every 50 ms) took 10-15% of a
# core beside the job being measured; here bash's own read does the
# polling and a read with a timeout on a private FIFO does the sleeping.

# bench_nap: sleeps 50 ms without a process.
bench_nap() {
	if [ -z "${bench_nap_fd:-}" ]; then
		local f
		f=$(mktemp -u "${TMPDIR:-/tmp}/bench-nap.XXXXXX")
		mkfifo -m 600 "$f" || { sleep 0.05; return; }
		exec {bench_nap_fd}<>"$f"
		rm -f "$f"
	fi
	read -r -t 0.05 -u "$bench_nap_fd" _ || true
}

# wait_line FILE REGEX [TIMEOUT_S [PID]]: 0 once a line of FILE matches
# REGEX (extended), 1 on timeout, 2 if PID has ended without such a line.
wait_line() {
	local file=$1 re=$2 lim=$(( ${3:-600} * 20 )) pid=${4:-} i=0 part='' line fd gone=0
	until [ -e "$file" ]; do
		bench_nap; i=$((i + 1)); (( i > lim )) && return 1
	done
	exec {fd}<"$file"
	while :; do
		# once PID has ended, a last line without its newline counts too
		if IFS= read -r line <&"$fd" || { [ "$gone" = 1 ] && [ -n "$part$line" ]; }; then
			line=$part$line
			part=''
			[[ $line =~ $re ]] && { exec {fd}<&-; return 0; }
			continue
		fi
		part+=$line # a line still being written
		[ "$gone" = 1 ] && { exec {fd}<&-; return 2; }
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			gone=1 # one more pass: the line may have come just before the end
			continue
		fi
		bench_nap; i=$((i + 1))
		(( i > lim )) && { exec {fd}<&-; return 1; }
	done
}
