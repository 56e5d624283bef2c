#!/usr/bin/env bash
# The test applications themselves, without ckrun: each runs twice, bare, at
# a reduced scale; both runs must exit 0 and print the same bytes. A
# non-deterministic app would make every ckrun comparison meaningless, so
# this runs first and needs nothing but the apps.
#   CKPT_TEST_BARE_SCALE (default 0.2), CKPT_TEST_APPS, CKPT_TEST_JOBS.
# shellcheck source=tests/lib/harness.sh
. "$(dirname "$0")/../lib/harness.sh"

SCALE=${CKPT_TEST_BARE_SCALE:-0.2}

twice() {
	local app=$1 d=$H_WORK/$1 r1 r2 limit args
	mkdir -p "$d"
	# Apps with an args= line keep their extra arguments; the scale is first.
	args=$(h_desc "$app" args "")
	# shellcheck disable=SC2086 # a list of arguments
	set -- $args
	[ $# -gt 0 ] && shift
	h_app_cmd "$app" "$SCALE" "$@"
	limit=$(h_desc "$app" timeout 60)
	r1=$(h_run_bare "$app" "$d/1.out" "$d/1.err" "$limit")
	r2=$(h_run_bare "$app" "$d/2.out" "$d/2.err" "$limit")
	if [ "${r1% *}" != 0 ] || [ "${r2% *}" != 0 ]; then
		h_fail "apps/$app" "exit status ${r1% *} and ${r2% *} (want 0)" "$d/1.out" "$d/1.err"
	elif ! cmp -s "$d/1.out" "$d/2.out"; then
		h_diff_excerpt "$d/1.out" "$d/2.out" "$d/diff"
		h_fail "apps/$app" "two bare runs printed different output" "$d/diff"
	elif [ ! -s "$d/1.out" ] || [ -s "$d/1.err" ]; then
		h_fail "apps/$app" "no output, or output on stderr" "$d/1.err"
	else
		h_pass "apps/$app"
	fi
}

main() {
	local app apps=()
	h_init apps
	for app in $(h_app_list); do
		if h_app_built "$app"; then
			apps+=("$app")
		else
			h_fail "apps/$app" "not built; run make"
		fi
	done
	h_parallel twice "${apps[@]}"
	return "$H_FAILED"
}

main "$@"
