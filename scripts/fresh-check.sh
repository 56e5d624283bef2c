#!/usr/bin/env bash
# make fresh-check: the README's commands on a pristine Debian 12.
#
#   scripts/fresh-check.sh [STEP...]     STEP: demo, unit, test (default: demo test)
#
# Takes a minimal Debian 12 root (scripts/debian-root.sh: mmdebstrap
# --variant=minbase from this machine's Debian mirrors, the tarball cached),
# unpacks it in a temporary directory, clones the committed HEAD of this
# repository into it (/root/ckrun), and runs there as root, with /proc, /dev,
# /sys and a tmpfs /tmp mounted (see enter below), what the README tells a
# new user to:
#   setup   apt-get update; apt-get install -y make git   (minbase has neither)
#   demo    make demo
#   unit    make test-unit
#   test    make test
# Every step after setup starts from what the one before left (the build,
# the packages make installed). Prints PASS/FAIL lines, "fresh/STEP" for each
# step and "fresh/NAME" for each line of the suites inside; exits 1 if any
# failed, 2 when the root cannot be made. Whatever happens, the processes a
# step leaves are ended with it and the root is removed.
#
# Needs root (namespaces, mounts) and the Debian package mirrors. Environment:
#   CKPT_FRESH_CACHE    the cached root tarball
#                       (default build/fresh-check/debian12-minbase.tar)
#   CKPT_FRESH_REFRESH  1: build the tarball again (done anyway after 30 days)
#   CKPT_FRESH_MIRRORS  mmdebstrap mirror lines ("deb URI SUITE COMPONENTS",
#                       separated by |) instead of this machine's apt sources
#   CKPT_FRESH_KEEP     1: keep the root directory
# Logs: build/fresh-check/STEP.log and the suites' logs in
# build/fresh-check/test-logs/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
top=$PWD
out=$top/build/fresh-check
cache=${CKPT_FRESH_CACHE:-$out/debian12-minbase.tar}
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(demo test)

say() { echo "fresh-check: $*"; }
die() { echo "FAIL fresh/setup: $*"; exit 2; }

for s in "${steps[@]}"; do
    case "$s" in demo|unit|test) ;; *) echo "usage: $0 [demo|unit|test]..." >&2; exit 2 ;; esac
done
[ "$(id -u)" -eq 0 ] || die "needs root (namespaces and mounts)"
head=$(git rev-parse HEAD 2>/dev/null) || die "$top is not a git checkout"
[ -z "$(git status --porcelain --untracked-files=no)" ] ||
    say "note: uncommitted changes are not checked; the root gets the committed HEAD"
mkdir -p "$out"

root=
# Mount points under the root, deepest first.
mounts_under() {
    awk -v r="$1" '{ m = $5; gsub(/\\040/, " ", m); if (m == r || index(m, r "/") == 1) print m }' \
        /proc/self/mountinfo | sort -r
}
cleanup() {
    local m
    [ -n "$root" ] && [ -d "$root" ] || return 0
    # Nothing is mounted here from outside the namespaces; undo anything
    # that is anyway before removing, and never remove through a mount.
    for _ in 1 2 3; do
        while read -r m; do
            [ -n "$m" ] && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; }
        done < <(mounts_under "$root")
        [ -z "$(mounts_under "$root")" ] && break
        sleep 1
    done
    if [ -n "$(mounts_under "$root")" ]; then
        echo "fresh-check: still mounted under $root, not removed:" >&2
        mounts_under "$root" >&2
    elif [ "${CKPT_FRESH_KEEP:-0}" = 1 ]; then
        say "kept the root at $root"
    else
        rm -rf --one-file-system "$root"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The cached minbase tarball (made again after 30 days: "fresh" means this
# point release); scripts/debian-root.sh says why when it cannot.
scripts/debian-root.sh "$cache" >/dev/null || die "no Debian root tarball (scripts/debian-root.sh)"

root=$(mktemp -d "${TMPDIR:-/var/tmp}/ckrun-fresh.XXXXXX") || die "mktemp"
tar -C "$root" --numeric-owner -xpf "$cache" || die "cannot unpack $cache"
# What a machine's installer leaves and mmdebstrap does not: name resolution.
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
[ -e "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' \
    >"$root/etc/hosts"
git clone -q --no-checkout "$top" "$root/root/ckrun" &&
    git -C "$root/root/ckrun" checkout -q --detach "$head" || die "cannot clone $top into the root"
say "root $root, checkout $(git log -1 --format='%h %s' "$head" | cut -c1-70)"

# enter COMMAND: runs COMMAND as root in the fresh root, in new mount and PID
# namespaces: /proc, /dev, /sys and a tmpfs /tmp are mounted there, and
# pivot_root (not chroot: the kernel refuses user namespaces, which ckrun
# makes, to a chrooted process) makes the root the namespace's own. The
# mounts never appear outside, and when the command ends the kernel ends
# every process it left (daemons of a failed suite) with the namespace.
enter() {
    unshare --mount --pid --fork --propagation private /bin/bash -c '
        set -e
        r=$1 cmd=$2
        mount --bind "$r" "$r"
        mount -t proc proc "$r/proc"
        mount --rbind /dev "$r/dev"
        mount --rbind /sys "$r/sys"
        mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
        cd "$r"
        pivot_root . mnt
        cd /
        umount -l /mnt
        exec env -i HOME=/root TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            /bin/bash -c "cd /root/ckrun && $cmd"' fresh-root "$root" "$1"
}

pass=0 fail=0 skip=0
shopt -s lastpipe # the loop reading a step's output counts in this shell
# step NAME COMMAND: runs COMMAND in the root as a fresh root login would.
step() {
    local name=$1 cmd=$2 t0 rc line
    t0=$(date +%s)
    enter "$cmd" </dev/null 2>&1 | tee "$out/$name.log" |
    while IFS= read -r line; do
        case "$line" in
            PASS\ *) echo "PASS fresh/${line#PASS }"; pass=$((pass + 1)) ;;
            FAIL\ *) echo "FAIL fresh/${line#FAIL }"; fail=$((fail + 1)) ;;
            SKIP\ *) echo "SKIP fresh/${line#SKIP }"; skip=$((skip + 1)) ;;
            demo:\ *) echo "    $line" ;;
        esac
    done
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 0 ]; then
        echo "PASS fresh/$name ($(( $(date +%s) - t0 )) s)"; pass=$((pass + 1))
    else
        echo "FAIL fresh/$name: exit $rc after $(( $(date +%s) - t0 )) s (log: $out/$name.log)"
        tail -25 "$out/$name.log" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
    [ "$rc" = 0 ]
}

T0=$(date +%s)
if step setup "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make git >/dev/null"; then
    for s in "${steps[@]}"; do
        case "$s" in
            demo) step demo "make demo" ;;
            unit) step unit "make test-unit" ;;
            test) step test "make test" ;;
        esac
    done
fi
rm -rf "$out/test-logs"
cp -r "$root/root/ckrun/build/test-logs" "$out/test-logs" 2>/dev/null
say "$pass passed, $fail failed, $skip skipped in the fresh root ($(( $(date +%s) - T0 )) s after unpacking)"
[ "$fail" -eq 0 ]
