#!/usr/bin/env python3
"""mfstat: bytes a checkpoint stores per process, from its manifest.

Reads a manifest of a file store (STORE/JOB/manifests/SEQ; format in
include/ckrun/FORMAT.md) and prints one line per process:

    PID EXE UNIQUE_STORED

UNIQUE_STORED: the stored (compressed) bytes of the distinct chunks the
process's regions name, i.e. what a checkpoint of that process alone would
store (chunks are content-addressed: the same bytes are stored once). A
forked worker's chunks stored as the pages that differ from its parent's
(DELTA) count with those bytes only: its figure is what it adds to its
parent's, not what it would store alone. Then
a line "job STORED": the distinct chunks of every process. For a first
checkpoint (nothing from an earlier one), the ratio of the two is what the
other processes add.

Usage: mfstat.py MANIFEST
"""
import struct
import sys

ZERO = 0x1


def main():
    b = open(sys.argv[1], "rb").read()
    if b[:8] != b"CKPTMAN\n":
        sys.exit("mfstat: %s is not a manifest" % sys.argv[1])
    nsections = struct.unpack_from("<I", b, 8 + 64)[0]
    at = 8 + 72
    chunks, procs = [], []
    for _ in range(nsections):
        tag, _flags, ln = struct.unpack_from("<4sIQ", b, at)
        p = at + 16
        if tag == b"CHNK":
            n = struct.unpack_from("<Q", b, p)[0]
            p += 8
            for i in range(n):
                h, ln_, clen, _pack, fl, _off = struct.unpack_from("<32sIIIIQ", b, p + 56 * i)
                chunks.append((h, ln_, 0 if fl & ZERO else clen))
        elif tag == b"PROC":
            n = struct.unpack_from("<I", b, p)[0]
            p += 4
            for _ in range(n):
                pid, _ppid, _e, _a, _s, nreg, desc_len = struct.unpack_from("<iiQQQQQ", b, p)
                p += 48
                sl = struct.unpack_from("<I", b, p)[0]
                p += 4
                exe = b[p:p + sl].decode(errors="replace") if sl != 0xFFFFFFFF else "-"
                p += 0 if sl == 0xFFFFFFFF else sl
                p += desc_len
                refs = []
                for _ in range(nreg):
                    first, nch = struct.unpack_from("<QI", b, p + 48)
                    refs.append((first, nch))
                    p += 64
                    sl = struct.unpack_from("<I", b, p)[0]
                    p += 4 + (0 if sl == 0xFFFFFFFF else sl)
                procs.append((pid, exe, refs))
        at += 16 + ln
    every = {}
    for pid, exe, refs in procs:
        mine = {}
        for first, nch in refs:
            for c in chunks[first:first + nch]:
                mine[c[:2]] = c[2]
        every.update(mine)
        print(pid, exe, sum(mine.values()))
    print("job", sum(every.values()))


main()
