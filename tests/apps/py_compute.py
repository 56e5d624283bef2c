#!/usr/bin/env python3
"""py_compute: a Python 3 interpreter running a deterministic computation.

State exercised: a whole interpreter (its heap of objects, the garbage
collector, the dictionaries of interned strings, imported extension modules
such as hashlib and the random generator's Mersenne Twister state) rather than
a hand-written C program. Several stages run one after another; each prints a
result that does not depend on timing, and the last line is a digest of all.

Usage: python3 py_compute.py [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s)
"""
import os
import sys

# First of all: the suites' proof of a restore (tests/apps/origin; silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "origin"))
import origin  # noqa: E402,F401

import hashlib
import random


def scale():
    s = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CKPT_APP_SCALE")
    try:
        v = float(s) if s else 1.0
    except ValueError:
        v = 1.0
    return v if v > 0 else 1.0


def primes(limit):
    sieve = bytearray([1]) * (limit + 1)
    sieve[0:2] = b"\x00\x00"
    for i in range(2, int(limit ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, limit + 1, i)))
    return [i for i, v in enumerate(sieve) if v]


def random_walks(rng, n, steps):
    ends = {}
    for _ in range(n):
        x = 0
        for _ in range(steps):
            x += 1 if rng.random() < 0.5 else -1
        ends[x] = ends.get(x, 0) + 1
    return ends


def collatz_longest(limit):
    cache = {1: 1}
    best = (1, 1)
    for start in range(2, limit):
        n, path = start, []
        while n not in cache:
            path.append(n)
            n = n // 2 if n % 2 == 0 else 3 * n + 1
        length = cache[n]
        for m in reversed(path):
            length += 1
            cache[m] = length
        if length > best[1]:
            best = (start, length)
    return best


def matrix_power(n, k):
    mod = 1_000_000_007
    a = [[(i * n + j) % 17 for j in range(n)] for i in range(n)]
    r = [[int(i == j) for j in range(n)] for i in range(n)]
    while k:
        if k & 1:
            r = [[sum(r[i][t] * a[t][j] for t in range(n)) % mod for j in range(n)] for i in range(n)]
        a = [[sum(a[i][t] * a[t][j] for t in range(n)) % mod for j in range(n)] for i in range(n)]
        k >>= 1
    return r


def main():
    sc = scale()
    digest = hashlib.sha256()
    rng = random.Random(20240601)
    print("py_compute: scale %g" % sc)

    ps = primes(int(3_000_000 * sc))
    print("primes: %d found, last %d, sum %d" % (len(ps), ps[-1], sum(ps)))
    digest.update(repr(ps[-100:]).encode())

    ends = random_walks(rng, int(8000 * sc), 200)
    top = sorted(ends.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    print("random walks: most common ends %s" % top)
    digest.update(repr(sorted(ends.items())).encode())

    best = collatz_longest(int(1_000_000 * sc))
    print("collatz: longest chain below %d starts at %d, length %d" % (int(1_000_000 * sc), best[0], best[1]))
    digest.update(repr(best).encode())

    m = matrix_power(40, int(5000 * sc))
    trace = sum(m[i][i] for i in range(40)) % 1_000_000_007
    print("matrix power: trace %d" % trace)
    digest.update(repr(m).encode())

    words = {}
    for i in range(int(600_000 * sc)):
        w = "w%x" % (rng.getrandbits(12))
        words[w] = words.get(w, 0) + i % 7
    h = hashlib.sha1("".join("%s=%d;" % kv for kv in sorted(words.items())).encode()).hexdigest()
    print("dictionary: %d keys, sha1 %s" % (len(words), h))
    digest.update(h.encode())

    print("py_compute: digest %s" % digest.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
