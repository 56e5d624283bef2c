#!/usr/bin/env python3
"""py_mpool: Python's multiprocessing (fork start method): a Pool, a Queue, a Lock.

State exercised: a Python parent with a multiprocessing.Pool of four forked
worker processes (the pool's task and result queues are pipes guarded by
semaphores in shared memory; the parent runs the pool's helper threads), a
Lock and a shared Value (a named POSIX semaphore, unlinked at once, and an
unlinked file of /dev/shm mapped shared) inherited by the workers, and a
separate Process that consumes a multiprocessing.Queue (a pipe fed by a
feeder thread in the parent) and answers through a Pipe. The parent maps a
deterministic function over batches, sleeping between batches, so a
checkpoint finds workers busy or idle, tasks and results in the pipes, and
the consumer blocked on its queue. Results are printed in a fixed order; the
last line is a digest of all.

Usage: python3 py_mpool.py [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s)
"""
import os
import sys

# First of all: the suites' proof of a restore (tests/apps/origin; silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "origin"))
import origin  # noqa: E402,F401

import hashlib
import multiprocessing as mp
import time

NWORKERS = 4
BATCH = 16

_lock = None
_count = None


def scale():
    s = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CKPT_APP_SCALE")
    try:
        v = float(s) if s else 1.0
    except ValueError:
        v = 1.0
    return v if v > 0 else 1.0


def init_worker(lock, count):
    global _lock, _count
    _lock = lock
    _count = count


def work(item):
    """Deterministic: an iterated hash and a bit of arithmetic."""
    h = hashlib.sha256(b"item-%d" % item).digest()
    for _ in range(300):
        h = hashlib.sha256(h).digest()
    acc = 0
    for k in range(2000):
        acc = (acc * 31 + k * item) % 1_000_000_007
    with _lock:
        _count.value += 1
    return item, h.hex()[:16], acc


def consumer(q, conn):
    """Reads (batch, digest) pairs until None; answers with a rolling hash."""
    h = hashlib.sha1()
    n = 0
    while True:
        msg = q.get()
        if msg is None:
            break
        batch, digest = msg
        h.update(b"%d:%s;" % (batch, digest.encode()))
        n += 1
    conn.send((n, h.hexdigest()))
    conn.close()


def main():
    sc = scale()
    nbatches = max(3, int(30 * sc))
    ctx = mp.get_context("fork")
    lock = ctx.Lock()
    count = ctx.Value("q", 0, lock=False)  # guarded by our own lock
    q = ctx.Queue()
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    print("py_mpool: %d workers, %d batches of %d items" % (NWORKERS, nbatches, BATCH))
    sys.stdout.flush()

    cons = ctx.Process(target=consumer, args=(q, child_conn))
    cons.start()
    child_conn.close()
    total = hashlib.sha256()
    want = hashlib.sha1()
    rc = 0
    with ctx.Pool(NWORKERS, initializer=init_worker, initargs=(lock, count)) as pool:
        for b in range(nbatches):
            items = list(range(b * BATCH, (b + 1) * BATCH))
            res = pool.map(work, items, chunksize=2)
            if [r[0] for r in res] != items:
                print("FAIL batch %d: results out of order" % b)
                rc = 1
            digest = hashlib.sha256(repr(res).encode()).hexdigest()[:16]
            total.update(digest.encode())
            q.put((b, digest))
            want.update(b"%d:%s;" % (b, digest.encode()))
            if b % 5 == 4 or b == nbatches - 1:
                print("batch %d: digest %s, acc sum %d" % (b, digest, sum(r[2] for r in res) % 1_000_000_007))
            time.sleep(0.1)
        pool.close()
        pool.join()
    q.put(None)
    n, h = parent_conn.recv()
    cons.join()
    q.close()
    q.join_thread()
    with lock:
        done = count.value
    print("consumer: %d messages, sha1 %s, exit code %d" % (n, h, cons.exitcode))
    print("work items counted under the lock: %d" % done)
    if n != nbatches or h != want.hexdigest() or cons.exitcode != 0:
        print("FAIL consumer")
        rc = 1
    if done != nbatches * BATCH:
        print("FAIL counter %d, expected %d" % (done, nbatches * BATCH))
        rc = 1
    print("py_mpool: digest %s" % total.hexdigest())
    print("py_mpool: %s" % ("FAIL" if rc else "ok"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
