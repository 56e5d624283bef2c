#!/usr/bin/env bash
# Builds a container image holding ckrun from a minimal Debian 12 root, with
# no registry: the cached minbase tarball (scripts/debian-root.sh), `make
# install` of this build, the shared libraries ckrun, ckpt and the given
# programs need, then `podman import`.
#
#   scripts/podman-image.sh TAG [FILE...]
#
# FILEs (the training job's programs) go to /opt/ckrun-job/ in the image.
# The libraries are the host's own files (this host is Debian 12 too, the
# build's); a library the root already has is kept as the root has it; so is
# the host's CA bundle (/etc/ssl/certs/ca-certificates.crt). The
# entry point is ckrun (installed under /usr/local). An image TAG that was
# made from the same tarball and the same files is reused (label
# ckrun.key); else it is made again. Needs root and podman. Environment:
#   PODMAN   the podman command (default podman; the suite passes its own
#            storage with --root/--runroot)
#   BUILD    the build directory (default build)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
B=${BUILD:-build}
read -r -a podman <<<"${PODMAN:-podman}"
die() { echo "podman-image: $*" >&2; exit 2; }

[ $# -ge 1 ] || { echo "usage: $0 TAG [FILE...]" >&2; exit 64; }
tag=$1; shift
for f in "$@"; do [ -f "$f" ] || die "no such file: $f"; done
tarball=$(scripts/debian-root.sh) || die "no Debian root tarball"

work=$(mktemp -d "${TMPDIR:-/var/tmp}/ckrun-image.XXXXXX") || die "mktemp"
trap 'rm -rf --one-file-system "$work"' EXIT
stage=$work/stage
make -s --no-print-directory install BUILD="$B" DESTDIR="$stage" PREFIX=/usr/local >"$work/install.log" 2>&1 ||
    { cat "$work/install.log" >&2; die "make install failed"; }
mkdir -p "$stage/opt/ckrun-job"
for f in "$@"; do install -m 0755 "$f" "$stage/opt/ckrun-job/" || die "cannot copy $f"; done

# Key: the tarball (name, size, time), every file added, the CA bundle.
key=$( { stat -c '%n %s %Y' "$tarball"; (cd "$stage" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
         sha256sum /etc/ssl/certs/ca-certificates.crt 2>/dev/null; } |
      sha256sum | cut -c1-32)
have=$("${podman[@]}" image inspect --format '{{index .Labels "ckrun.key"}}' "$tag" 2>/dev/null)
old=$("${podman[@]}" image inspect --format '{{.Id}}' "$tag" 2>/dev/null)
if [ "$have" = "$key" ]; then
    echo "podman-image: $tag is up to date ($key)" >&2
    exit 0
fi

root=$work/root
mkdir -p "$root" && tar -C "$root" --numeric-owner -xpf "$tarball" || die "cannot unpack $tarball"
cp -a "$stage/." "$root/" || die "cannot copy the installed files"
# The libraries every dynamic object added needs, at their own paths in the
# root (merged /usr: /lib is a link to usr/lib there too).
find "$stage" -type f \( -perm -u+x -o -name '*.so*' \) -exec ldd {} \; 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $2 == "=>" && $3 == "not" { print "missing:" $1 }' |
    sort -u >"$work/libs"
grep '^missing:' "$work/libs" >&2 && die "libraries missing on this host"
while read -r lib; do
    real=$(readlink -f "$lib")
    [ -e "$root$real" ] && continue
    mkdir -p "$root$(dirname "$real")" && cp -a "$real" "$root$real" || die "cannot copy $real"
    # the name the loader asks for, when it is a link to the file
    [ "$lib" != "$real" ] && [ ! -e "$root$lib" ] && ln -s "$(basename "$real")" "$root$lib"
done <"$work/libs"
# Nothing may be missing inside the root: ldd as the root sees it.
out=$(chroot "$root" /bin/sh -c 'for f in /usr/local/bin/* /usr/local/lib/ckrun/* /opt/ckrun-job/*; do ldd "$f"; done' 2>&1)
if grep -q 'not found' <<<"$out"; then
    grep 'not found' <<<"$out" | sort -u >&2
    die "libraries missing in the image"
fi
# The host's CA bundle, for https endpoints signed by a public CA (minbase
# has no ca-certificates; a private CA goes with --s3-ca).
if [ -f /etc/ssl/certs/ca-certificates.crt ] && [ ! -e "$root/etc/ssl/certs/ca-certificates.crt" ]; then
    mkdir -p "$root/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/" ||
        die "cannot copy the CA bundle"
fi
# Name resolution as an installer leaves it (the gateway may be named).
[ -e "$root/etc/hosts" ] || printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
tar -C "$root" --numeric-owner -cf "$work/image.tar" . || die "cannot pack the root"
"${podman[@]}" import --quiet \
    --change 'ENTRYPOINT ["/usr/local/bin/ckrun"]' \
    --change "LABEL ckrun.key=$key" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$work/image.tar" "$tag" >"$work/import.log" 2>&1 || { cat "$work/import.log" >&2; die "podman import failed"; }
# The image this tag named before, now nameless: removed unless in use.
[ -n "$old" ] && "${podman[@]}" rmi "$old" >/dev/null 2>&1
echo "podman-image: made $tag ($key)" >&2
