#!/usr/bin/env bash
# The suites tested against a broken ckrun (mutation testing of the tests):
# tests/lib/noresume-ckrun.sh is the real ckrun except that --resume starts
# the job afresh, while claiming to have restored. A sample of the checks
# that test a restore is run with it, and every one of them must FAIL: a
# check that passes proves nothing about restores. Prints
# "PASS mutant/CHECK" for each check that failed as it must, "FAIL
# mutant/CHECK" for one that passed against the mutant.
#   CKPT_MUTANT_SUITES  which samples (default: all of those below)
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

MUTANT=$H_TOP/tests/lib/noresume-ckrun.sh
REAL=$CKRUN
SUITES=${CKPT_MUTANT_SUITES:-conformance faults stdio pty nofile api mappath filepages vdso sockets user podman report sites loginuid}

# sample NAME REGEX ENV... -- SUITE: runs SUITE with the mutant; every check
# whose name matches REGEX must fail, and at least one must have run.
sample() {
	local name=$1 re=$2 line check n=0 out=$H_WORK/$1.log
	local -a envs=()
	shift 2
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]}" CKRUN="$MUTANT" CKPT_MUTANT_REAL="$REAL" CKPT_TEST_KEEP=0 \
		timeout -k 10 1200 bash "$H_TOP/tests/suite/$1" >"$out" 2>&1
	while IFS= read -r line; do
		case $line in
		PASS\ * | FAIL\ *) ;;
		*) continue ;;
		esac
		check=${line#* }
		check=${check%%:*}
		[[ $check =~ $re ]] || continue
		n=$((n + 1))
		case $line in
		FAIL\ *) h_pass "mutant/$check" ;;
		PASS\ *) h_fail "mutant/$check" "passed although ckrun started the job afresh on --resume" ;;
		esac
	done <"$out"
	if (( n == 0 )); then
		h_fail "mutant/$name" "no check of a restore ran" "$out"
	fi
}

main() {
	local s
	h_seed_init
	if ! h_have_ckrun; then
		h_fail mutant "ckrun is not built ($CKRUN); run make"
		return 1
	fi
	h_init mutant
	for s in $SUITES; do
		case $s in
		conformance) sample conformance '^conformance' \
			CKPT_TEST_APPS="sgd forktree py_compute mp_pipeline memfd" CKPT_TEST_VARIANTS="default fork" \
			-- 20-conformance.sh ;;
		loginuid) sample loginuid '^loginuid/' -- 39-loginuid.sh ;;
		faults) sample faults '^faults/(kill-run-|treekill|corrupt-pack)' \
			CKPT_TEST_FAULTS="kill treekill corrupt" CKPT_TEST_KILL_TRIALS=3 -- 30-faults.sh ;;
		# (stdio/inherited checks no restore)
		stdio) sample stdio '^stdio/(elsewhere|same|truncated|pipe|chain-pipe|chain-file|shared)$' -- 24-stdio.sh ;;
		# (pty/checkpoint-only checks no restore)
		pty) sample pty '^pty/waiting$' -- 33-pty.sh ;;
		nofile) sample nofile '^nofile/hard-1024-shm$' -- 31-nofile.sh ;;
		api) sample api '^api/after-restore' -- 25-api.sh ;;
		mappath) sample mappath '^mappath/(missing-path|move|copy|paths-.*|env-unset)$' CKPT_TEST_MAPPATH="move copy paths env" -- 42-mappath.sh ;;
		filepages) sample filepages '^filepages/(copy|rewrite|size|gone)$' -- 43-filepages.sh ;;
		vdso) sample vdso '^vdso/' -- 36-vdso.sh ;;
		sockets)
			if [ "$(id -u)" = 0 ]; then
				sample sockets '^sockets/' -- 37-sockets.sh
			else
				h_skip mutant/sockets "needs root (network namespaces)"
			fi ;;
		user)
			if [ "$(id -u)" = 0 ]; then
				sample user '^(user|root)/(privs|tls|recmutex|forktree|mp_sysvshm|no-sys-admin)$' -- 26-user.sh
			else
				h_skip mutant/user "needs root (creates a user)"
			fi ;;
		podman)
			if [ "$(id -u)" = 0 ]; then
				sample podman '^podman/(stop-resume-root|kill-mid-checkpoint)$' CKPT_TEST_PODMAN="root kill" -- 47-podman.sh
			else
				h_skip mutant/podman "needs root (podman, Ceph)"
			fi ;;
		report) sample report '^report/(resume-pty|resume-pipe|proof)$' -- 29-report.sh ;;
		sites)
			if [ "$(id -u)" = 0 ]; then
				sample sites '^sites/resume-at-b$' -- 41-sites.sh
			else
				h_skip mutant/sites "needs root (network namespaces, Ceph)"
			fi ;;
		*) h_fail mutant "unknown sample '$s'" ;;
		esac
	done
	return "$H_FAILED"
}

main "$@"
