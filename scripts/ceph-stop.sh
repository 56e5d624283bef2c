#!/usr/bin/env bash
# Stops what scripts/ceph-start.sh started from DIR (default build/ceph):
# every daemon by its pid file, SIGKILL for those that do not leave within
# 30 s, then removes DIR (KEEP=1 keeps it, for the logs). Safe to run twice,
# and after a failed or partial start.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
D=${1:-$top/build/ceph}
[ -d "$D" ] || { echo "ceph-stop: nothing at $D"; exit 0; }
D=$(cd "$D" && pwd)
pids=()
add() { # a pid of ours, once
    local p=$1 q
    for q in "${pids[@]}"; do [ "$q" = "$p" ] && return; done
    kill "$p" 2>/dev/null && pids+=("$p")
}
for f in "$D"/run/*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f" 2>/dev/null)
    [ -n "$p" ] || continue
    # only a Ceph daemon: a reused pid of something else is left alone
    if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qE 'ceph-mon|ceph-osd|radosgw'; then
        add "$p"
    fi
done
# daemons without a pid file (a start that failed half-way): their command
# line names this cluster's config file
for c in /proc/[0-9]*/cmdline; do
    line=$( { tr '\0' ' ' <"$c"; } 2>/dev/null) || continue
    case "$line" in
        *ceph-mon*"$D/ceph.conf"*|*ceph-osd*"$D/ceph.conf"*|*radosgw*"$D/ceph.conf"*)
            p=${c#/proc/}; add "${p%/cmdline}" ;;
    esac
done
for _ in $(seq 1 60); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.5
done
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null; done
if [ "${KEEP:-0}" != 1 ]; then
    rm -rf "$D"
fi
echo "ceph-stop: stopped ${#pids[@]} daemon(s) from $D"
