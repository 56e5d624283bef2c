#!/usr/bin/env bash
# A mutant ckrun, to test the test suites themselves: the real ckrun in
# every respect but one, --resume starts the job afresh. It even claims to
# have restored (a "restored from checkpoint" line on stderr), so only a
# check that looks at what the job itself holds can tell. Every check of a
# restore must FAIL when run with it:
#   CKRUN=$PWD/tests/lib/noresume-ckrun.sh bash tests/suite/24-stdio.sh
# tests/suite/90-mutant.sh runs a sample of the suites this way.
# CKPT_MUTANT_REAL names the real ckrun (default build/ckrun of this tree).
set -u
here=$(cd "$(dirname "$0")" && pwd)
real=${CKPT_MUTANT_REAL:-$here/../../${BUILD:-build}/ckrun}
# --map-path and --env belong to a resume (the real ckrun refuses them
# without one): a fresh start has nothing to map and starts the job with
# --env's values, as the real ckrun does when the store holds nothing.
args=() resume=0 job='' seen_dd=0 maps=() envs=()
while [ $# -gt 0 ]; do
	if (( !seen_dd )); then
		case $1 in
		--) seen_dd=1 ;;
		--resume) resume=1; shift; continue ;;
		--job) job=${2:-} ;;
		--map-path) maps+=("${2:-}"); shift 2; continue ;;
		--map-path=*) maps+=("${1#*=}"); shift; continue ;;
		--env) envs+=("${2:-}"); shift 2; continue ;;
		--env=*) envs+=("${1#*=}"); shift; continue ;;
		esac
	fi
	args+=("$1")
	shift
done
if (( !resume )); then
	for m in "${maps[@]}"; do args=(--map-path "$m" "${args[@]}"); done
	for e in "${envs[@]}"; do args=(--env "$e" "${args[@]}"); done
fi
for e in "${envs[@]}"; do
	if (( resume )) && [[ $e == *=?* ]]; then
		export "${e%%=*}=${e#*=}"
	elif (( resume )) && [[ $e == *= ]]; then
		unset "${e%%=*}"
	fi
done
if (( resume )); then
	echo "ckrun: job ${job:-?} restored from checkpoint 1 in 0.001 s (mutant: started afresh)" >&2
fi
exec "$real" "${args[@]}"
