# py_subproc: a Python program that runs Python subprocesses.
#
# State exercised: subprocess.run with its defaults (close_fds=True: the
# child closes every inherited descriptor before exec, libckpt's channel
# too, so the new program attaches through ckrun's attach socket), stdout
# captured through a pipe, one child at a time for the whole run, each
# doing paced work; a checkpoint lands while a child runs.
# Usage: py_subproc.py [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s)
import os
import sys

# First of all: the suites' proof of a restore (tests/apps/origin; silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "origin"))
import origin  # noqa: E402,F401

import subprocess

scale = float(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CKPT_APP_SCALE", "1"))
n = max(2, int(8 * scale))
child = r'''
import sys, time
k = int(sys.argv[1]); acc = k
for i in range(8):
    for j in range(20000):
        acc = (acc * 1103515245 + 12345 + j) % 2147483648
    time.sleep(0.04)
print(k, acc)
'''
total = 0
print("py_subproc: %d children" % n, flush=True)
for k in range(n):
    r = subprocess.run([sys.executable, "-c", child, str(k)], stdout=subprocess.PIPE, check=True, text=True)
    kk, acc = r.stdout.split()
    total = (total * 31 + int(acc)) % (1 << 61)
    print("child %s: %s" % (kk, acc), flush=True)
print("total %d" % total)
