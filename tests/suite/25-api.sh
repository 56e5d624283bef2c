#!/usr/bin/env bash
# The job API (include/ckpt.h): bare, under ckrun, and after a restore
# from the checkpoint the job asked for.
# Only a restored process can print "restarted 1 callbacks 1": a fresh start
# (a ckrun that ignored --resume) fails every check after the first two.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"
B=$H_BUILD
W=$(mktemp -d "${TMPDIR:-/tmp}/ckrun-api.XXXXXX")
trap 'rm -rf "$W"' EXIT
ck() { timeout -s KILL 120 "$CKRUN" "$@"; } # a hang is a failure, not a stuck suite
app=$B/tests/api/api_request

check() { # NAME FILE EXPECTED-FILE
	if cmp -s "$2" "$3"; then echo "PASS api/$1"; else echo "FAIL api/$1"; diff "$3" "$2" | sed 's/^/    /'; fi
}

"$app" 2 >"$W/bare.out"
printf 'present 0 version -1000 register -1000\nstep 0: request -1000 restarted -1000 callbacks 0\nstep 1: request -1000 restarted -1000 callbacks 0\n' >"$W/bare.exp"
check bare "$W/bare.out" "$W/bare.exp"

ck --store "$W/store" --job api -- "$app" 2 >"$W/ck.out" 2>"$W/ck.err"
printf 'present 1 version 1 register 0\nstep 0: request 0 restarted 0 callbacks 0\nstep 1: request 0 restarted 0 callbacks 0\n' >"$W/ck.exp"
check under-ckrun "$W/ck.out" "$W/ck.exp"

# Resuming from the newest checkpoint (taken at step 1's request): the
# restored process sees request 0, restarted 1, the callback run once.
# Its stdout is the new ckrun's: into another file, only what it prints
# after the checkpoint; into the same file opened 1<> (still holding the
# bytes up to the saved offset), it writes over the first run's last line.
ck --resume --store "$W/store" --job api -- "$app" 2 >"$W/ck2.out" 2>>"$W/ck.err"
printf 'step 1: request 0 restarted 1 callbacks 1\n' >"$W/ck2.exp"
check after-restore "$W/ck2.out" "$W/ck2.exp"

ck --resume --store "$W/store" --job api -- "$app" 2 1<>"$W/ck.out" 2>>"$W/ck.err"
printf 'present 1 version 1 register 0\nstep 0: request 0 restarted 0 callbacks 0\nstep 1: request 0 restarted 1 callbacks 1\n' >"$W/ck3.exp"
check after-restore-same-file "$W/ck.out" "$W/ck3.exp"
