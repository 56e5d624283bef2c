# py_fdhide: a Python program that looks at and closes its own descriptors
# must see what it sees without ckrun (libckpt's control channel, fd 1000,
# is not the job's).
#
# State exercised: os.listdir of /proc/self/fd and /dev/fd, checked against
# what the program holds; os.closerange over a range covering 1000; a file
# of its own at 1000 (os.dup2), written and read back every step;
# subprocess.run with close_fds=True (the child closes its inherited
# descriptors with close_range before exec) whose child lists its own
# descriptors. Checkpoints land between the steps, before and after the
# dup2, so a restore must give the job its own 1000 back.
# Prints FAIL and exits 1 when a listing differs from what it expects.
# Usage: py_fdhide.py [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s)
import os
import sys

# First of all: the suites' proof of a restore (tests/apps/origin; silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "origin"))
import origin  # noqa: E402,F401

import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

scale = float(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CKPT_APP_SCALE", "1"))
steps = max(12, int(20 * scale))
bad = 0
held = set()
child = r'''
import os
fds = sorted(int(n) for n in os.listdir("/proc/self/fd"))
# the listing's own descriptor is closed by now
print("child fds:", " ".join(str(f) for f in fds if os.path.lexists("/proc/self/fd/%d" % f)))
'''


def listing(step, path, low=0):
    global bad
    fds = sorted(int(n) for n in os.listdir(path))
    # the listing's own descriptor is closed by now
    fds = [f for f in fds if f >= low and os.path.lexists("/proc/self/fd/%d" % f)]
    print("step %d %s: %s" % (step, path, " ".join(map(str, fds))))
    want = sorted(f for f in ({0, 1, 2} | held) if f >= low)
    if fds != want:
        print("FAIL step %d %s: %s, expected %s" % (step, path, fds, want))
        bad = 1


d = tempfile.mkdtemp(prefix="py_fdhide.")
own = os.path.join(d, "own1000")
acc = 1469598103934665603
print("py_fdhide: %d steps" % steps, flush=True)
for i in range(steps):
    for k in range(20000):
        acc = (acc * 1099511628211 + k) % (1 << 64)
    if i == 0:
        listing(i, "/proc/self/fd", 900)
    elif i == 1:
        os.closerange(3, 1 << 20)
        held.clear()
        listing(i, "/proc/self/fd")
        listing(i, "/dev/fd")
    elif i == 3:
        fd = os.open(own, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(fd, 1000, inheritable=False)
        os.close(fd)
        held.add(1000)
        listing(i, "/proc/self/fd")
    elif i == 5 or i == steps - 2:
        r = subprocess.run([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, check=True)
        print("step %d %s" % (i, r.stdout.strip()))
        if r.stdout.strip() != "child fds: 0 1 2":
            print("FAIL step %d: the child holds more than 0-2" % i)
            bad = 1
    elif i == steps - 3:
        # done with the file: a checkpoint that holds it lies 0.3 s back
        # when the file goes at the end (a kill after that cannot resume)
        os.close(1000)
        held.discard(1000)
        listing(i, "/proc/self/fd")
    elif i % 4 == 0:
        listing(i, "/proc/self/fd")
    if 1000 in held:
        line = ("line %04d %016x\n" % (i, acc)).encode()
        os.write(1000, line)
        end = os.lseek(1000, 0, os.SEEK_END)
        if os.pread(1000, len(line), end - len(line)) != line:
            print("FAIL step %d: read back through 1000" % i)
            bad = 1
        # (not the file's length: a restore does not roll files back)
        acc = (acc * 31 + sum(line)) % (1 << 64)
    print("step %d: %016x" % (i, acc), flush=True)
    time.sleep(0.1)
os.unlink(own)
os.rmdir(d)
print("final %016x%s" % (acc, " (FAIL above)" if bad else ""))
sys.exit(bad)
