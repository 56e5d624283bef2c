#!/usr/bin/env bash
# Makes (or reuses) the cached tarball of a minimal Debian 12 root, shared by
# scripts/fresh-check.sh (the README's commands on a pristine system) and
# tests/suite/47-podman.sh (the container image).
#
#   scripts/debian-root.sh [TARBALL]    (default build/fresh-check/debian12-minbase.tar)
#
# mmdebstrap --variant=minbase from the Debian mirrors this machine's apt is
# configured with (installed when missing). The tarball is made again after
# 30 days or when CKPT_FRESH_REFRESH=1. Prints the tarball's path on stdout;
# exits 2 when it cannot be made (the reason on stderr). Needs root.
# Environment:
#   CKPT_FRESH_CACHE    the tarball, when no argument names it
#   CKPT_FRESH_REFRESH  1: build the tarball again
#   CKPT_FRESH_MIRRORS  mmdebstrap mirror lines ("deb URI SUITE COMPONENTS",
#                       separated by |) instead of this machine's apt sources
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
top=$PWD
cache=${1:-${CKPT_FRESH_CACHE:-$top/build/fresh-check/debian12-minbase.tar}}
case $cache in /*) ;; *) cache=$top/$cache ;; esac
out=$(dirname "$cache")
suite=bookworm

say() { echo "debian-root: $*" >&2; }
die() { echo "debian-root: $*" >&2; exit 2; }

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap --mode=root)"
mkdir -p "$out" || die "cannot make $out"

# The Debian mirrors apt uses here, as mmdebstrap mirror lines: the bookworm
# suites of each deb entry (one-line and deb822 sources), main only.
host_mirrors() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk -v s="$suite" '$1 == "deb" {
            i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
            if ($(i + 1) ~ ("^" s "(-updates|-security)?$")) print "deb " $i " " $(i + 1) " main" }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v s="$suite" '
            function flush(   n, m, u, t, i, j) {
                if (types ~ /(^| )deb( |$)/ && enabled != "no") {
                    n = split(uris, u, " "); m = split(suites, t, " ")
                    for (i = 1; i <= n; i++) for (j = 1; j <= m; j++)
                        if (t[j] ~ ("^" s "(-updates|-security)?$")) print "deb " u[i] " " t[j] " main"
                }
                types = uris = suites = enabled = ""
            }
            /^[ \t]*$/ { flush(); next }
            /^#/ { next }
            tolower($1) == "types:"   { $1 = ""; types = $0 }
            tolower($1) == "uris:"    { $1 = ""; uris = $0 }
            tolower($1) == "suites:"  { $1 = ""; suites = $0 }
            tolower($1) == "enabled:" { enabled = tolower($2) }
            END { flush() }' "$f"
    done
}

make_tarball() {
    local -a mirrors
    if [ -n "${CKPT_FRESH_MIRRORS:-}" ]; then
        IFS='|' read -r -a mirrors <<<"$CKPT_FRESH_MIRRORS"
    else
        mapfile -t mirrors < <(host_mirrors | awk '!seen[$0]++')
    fi
    [ ${#mirrors[@]} -gt 0 ] ||
        die "no $suite entry in this machine's apt sources; set CKPT_FRESH_MIRRORS"
    if ! command -v mmdebstrap >/dev/null; then
        say "installing mmdebstrap"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap; } \
            >"$out/mmdebstrap-install.log" 2>&1 || die "apt-get install mmdebstrap failed (see $out/mmdebstrap-install.log)"
    fi
    say "building a minimal Debian 12 root (mmdebstrap, ${mirrors[*]})"
    # --format: mmdebstrap takes the format from the name otherwise (".part"
    # made a directory).
    [ -d "$cache.part" ] && rm -rf --one-file-system "$cache.part"
    if ! mmdebstrap --variant=minbase --mode=root --format=tar "$suite" "$cache.part" "${mirrors[@]}" \
        >"$out/mmdebstrap.log" 2>&1; then
        rm -f "$cache.part"
        die "mmdebstrap failed (see $out/mmdebstrap.log)"
    fi
    [ -d "$cache" ] && rm -rf --one-file-system "$cache"
    mv "$cache.part" "$cache"
}

# A month-old tarball is made again: "fresh" means this point release.
if [ ! -f "$cache" ] || [ ! -s "$cache" ] || [ "${CKPT_FRESH_REFRESH:-0}" = 1 ] || [ -n "$(find "$cache" -mtime +30)" ]; then
    make_tarball
else
    say "using the cached root tarball $cache"
fi
echo "$cache"
