#!/usr/bin/env python3
"""py_scm: descriptors passed between Python processes with multiprocessing's
own helpers (multiprocessing.reduction.send_handle / sendfds over a
multiprocessing.Pipe, a UNIX stream socketpair), as torch.multiprocessing
and DataLoader workers do.

State exercised: the parent queues, toward a forked child that reads
nothing for a while: a pickled object, a regular file at offset 1000 (the
parent keeps it), another pickled object, a pipe's read end with unread
bytes (the parent closes its copy) together with a memfd at offset 77 (the
parent keeps it), and a last object. The child then reads them in order
(a pickled object's bytes must not take the descriptors of the next
message: Python would drop them) and checks contents, offsets and that
each is the parent's own open file description (the parent sees the
child's offset and its write; the child reads what the parent writes into
the pipe after).

Usage: python3 py_scm.py [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s)
"""
import os
import sys
import multiprocessing as mp
import multiprocessing.reduction as red
import socket
import time


def scale():
    s = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CKPT_APP_SCALE", "1")
    try:
        v = float(s)
    except ValueError:
        v = 1.0
    return v if v > 0 else 1.0


def pat(n):
    return bytes((97 + (i * 7 + i // 13) % 26) for i in range(n))


def child(conn, secs):
    for _ in range(int(secs * 100)):
        time.sleep(0.01)  # the messages wait, unread
    try:
        assert conn.recv() == {"first": 1}, "message 1"
        f = red.recv_handle(conn)
        assert os.lseek(f, 0, os.SEEK_CUR) == 1000, "file offset"
        assert os.read(f, 10) == pat(1010)[1000:], "file bytes"
        assert conn.recv() == "mid", "message 3"
        with socket.fromfd(conn.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as s:
            r, m = red.recvfds(s, 2)
        assert os.get_blocking(r) is False, "pipe O_NONBLOCK"
        assert os.read(r, 64) == b"pipe-unread!", "pipe bytes"
        assert os.lseek(m, 0, os.SEEK_CUR) == 77, "memfd offset"
        assert os.pread(m, 4, 4096) == b"MEMF", "memfd contents"
        assert conn.recv() == ["end"], "message 5"
        os.pwrite(m, b"CHLD", 8192)
        conn.send("read")
        assert conn.recv() == "written"
        time.sleep(0.05)
        assert os.read(r, 64) == b"later", "pipe: the parent's later write"
    except AssertionError as e:
        print("child: FAILED:", e, flush=True)
        os._exit(1)
    except Exception as e:  # noqa: BLE001
        print("child: FAILED:", type(e).__name__, e, flush=True)
        os._exit(1)
    os._exit(0)


def main():
    secs = 3.0 * scale()
    ctx = mp.get_context("fork")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    path = os.path.join(tmp, "py_scm.%d" % os.getpid())
    with open(path, "wb") as w:
        w.write(pat(16384))
    f = os.open(path, os.O_RDWR)
    os.lseek(f, 1000, os.SEEK_SET)
    r, wp = os.pipe()
    os.set_blocking(r, False)
    os.write(wp, b"pipe-unread!")
    m = os.memfd_create("py-scm")
    os.ftruncate(m, 16384)
    os.pwrite(m, b"MEMF", 4096)
    os.lseek(m, 77, os.SEEK_SET)
    a, b = ctx.Pipe()
    print("py_scm: 5 messages, 3 descriptors in flight for %d ms" % int(secs * 1000), flush=True)
    p = ctx.Process(target=child, args=(b, secs))
    p.start()
    b.close()
    a.send({"first": 1})
    red.send_handle(a, f, p.pid)
    a.send("mid")
    with socket.fromfd(a.fileno(), socket.AF_UNIX, socket.SOCK_STREAM) as s:
        red.sendfds(s, [r, m])
    os.close(r)  # the read end: in flight only
    a.send(["end"])
    # Only now the suites' proof of a restore (tests/apps/origin; silent in
    # a bare run): the suites ask the first round as soon as it is drawn,
    # and that round must find the descriptors in flight (drawn first, it
    # found Python still starting, and proved nothing about them).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "origin"))
    import origin  # noqa: F401
    try:
        assert a.recv() == "read"
        print("parent: file offset after the child read: %d" % os.lseek(f, 0, os.SEEK_CUR))
        print("parent: memfd holds the child's write: %s" % (os.pread(m, 4, 8192) == b"CHLD"))
        os.write(wp, b"later")
        a.send("written")
    except EOFError:
        print("parent: the child went away")
    p.join()
    os.unlink(path)
    print("child %s" % ("ok" if p.exitcode == 0 else "FAILED"))
    return 0 if p.exitcode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
