#!/usr/bin/env python3
"""npblas: a numpy job whose matrix products run on OpenBLAS's thread pool
(Debian's libopenblas0-pthread behind libblas.so.3; OPENBLAS_NUM_THREADS=2
unless the caller set it: the pool's threads live from numpy's import on,
parked between products).

Prints a line per epoch (a digest of the state matrix) and a final digest:
bit-identical to a bare run's only if every product ran once, in order,
from the state it had (OpenBLAS splits a product the same way for the same
thread count, so a run is repeatable).

Usage: python3 npblas.py EPOCHS
"""
import os
import sys

# First of all: the suites' proof of a restore (silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "origin"))
import origin  # noqa: E402,F401

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")  # before numpy loads OpenBLAS

import hashlib  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

N = 384  # 384^3 multiply-adds: far above OpenBLAS's one-thread threshold (64^3)
STEPS = 12  # per epoch

rng = np.random.default_rng(7)
A = rng.standard_normal((N, N)) / np.sqrt(N)
W = rng.standard_normal((N, N))
for epoch in range(int(sys.argv[1])):
    for _ in range(STEPS):
        W = np.tanh(W @ A + 0.1 * (A.T @ W))
        W /= np.abs(W).max()
        time.sleep(0.01)  # a step of a real job takes a while: room for a checkpoint
    print("epoch", epoch, hashlib.sha256(W.tobytes()).hexdigest()[:16], flush=True)
print("final", hashlib.sha256(W.tobytes()).hexdigest()[:16], flush=True)
