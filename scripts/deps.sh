#!/usr/bin/env bash
# Makes sure the Debian packages the build and the tests need are present.
# As root: installs the missing ones with apt-get. Otherwise: prints the exact
# apt-get line and fails.
#
# The base set is what `make` and every suite but the S3 one use, starting
# from a minimal Debian 12 (mmdebstrap --variant=minbase: no compiler, no
# procps); the S3 suite's and `make bench`'s Ceph and awscli come as an extra
# set that scripts/ceph-start.sh asks for itself, the Slurm suite's
# daemons as the set "slurm" that it asks for, and 47-podman asks for
# podman, runc and python3-yaml the same way, 60-mpi the set "mpi". Tools by package:
#   build-essential pkg-config lib*-dev   the build
#   zstd                                  stores compressed by the tests
#   python3                               the *.py apps, 37-sockets, 38-attach
#   iproute2                              ip netns (37-sockets, 41-sites)
#   util-linux                            setsid, mount (demo, every suite)
#   procps                                pgrep, pkill (the suites)
#   strace                                a traced job is refused (35-unsupported)
#   gdb                                   reads the cores ckpt export-core writes (28-inspect)
#   python3-pil                           decodes the PNG of ckpt report (28-inspect)
#   bsdutils                              script: a terminal for the progress lines (28-inspect)
set -euo pipefail
need=(build-essential pkg-config libzstd-dev libcurl4-openssl-dev libssl-dev
      libelf-dev libunwind-dev libcap-dev zstd python3 iproute2 util-linux
      procps strace uidmap libcap2-bin passwd gdb python3-pil bsdutils)
# Extra package sets, named by the caller: CKPT_DEPS_EXTRA="ceph awscli".
for extra in ${CKPT_DEPS_EXTRA:-}; do
    case "$extra" in
        ceph)   need+=(ceph-mon ceph-osd ceph-common radosgw) ;;
        awscli) need+=(awscli) ;;
        slurm)  need+=(slurmctld slurmd slurm-client munge) ;;
        torch)  need+=(python3-torch python3-numpy libopenblas0-pthread) ;;
        mpi)    need+=(libopenmpi-dev openmpi-bin python3-mpi4py python3-numpy) ;;
        *)      need+=("$extra") ;;
    esac
done
missing=()
for p in "${need[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    stamp=/var/lib/apt/periodic/ckrun-update-stamp
    if [ ! -e "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ]; then
        apt-get update -qq >&2 && mkdir -p "$(dirname "$stamp")" && touch "$stamp"
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
else
    echo "deps: missing Debian packages; run as root:" >&2
    echo "  apt-get install -y ${missing[*]}" >&2
    exit 1
fi
