#!/usr/bin/env bash
# A stand-in for ckrun that never checkpoints, used only to test the test
# harness itself where ckrun is not built yet:
#   CKRUN=tests/lib/fake-ckrun.sh bash tests/suite/20-conformance.sh
# It follows the command-line contract as far as that is possible without
# checkpoints: --resume with no checkpoint starts the job afresh (which is
# what ckrun does on an empty store), SIGUSR2 is accepted and ignored,
# SIGTERM/SIGINT stop the job and exit 75, and otherwise the job's own exit
# status is returned. The job stays in ckrun's process group.
set -u
usage() { echo "fake-ckrun: $1" >&2; exit 64; }
while [ $# -gt 0 ]; do
	case $1 in
	--store | --job | --interval | --keep) [ $# -ge 2 ] || usage "$1 needs a value"; shift 2 ;;
	--resume | --no-fork) shift ;;
	--) shift; break ;;
	*) usage "unknown option $1" ;;
	esac
done
[ $# -gt 0 ] || usage "no program given"
stop=0
trap ':' USR2
trap 'stop=1' TERM INT
"$@" &
job=$!
while :; do
	wait "$job"
	if (( stop )); then
		kill -9 "$job" 2>/dev/null
		wait "$job" 2>/dev/null
		exit 75
	fi
	# wait returns >128 when a trapped signal interrupted it; once the job
	# is gone, wait again for its real status.
	if ! kill -0 "$job" 2>/dev/null; then
		wait "$job"
		exit $?
	fi
done
