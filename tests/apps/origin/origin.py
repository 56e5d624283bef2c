"""The run's origin for Python test applications (see origin.c beside it).

With CKPT_TEST_ORIGIN=1 in the environment, the first process draws a
random value, keeps it in memory and in the environment, prints
"ck-origin START <hex>" on stderr, and "ck-origin END <hex>" at a normal
exit. A restored job prints no START line and ends with the first run's
value; a fresh start prints a START line of its own. Without the variable
(a bare run) nothing is printed. Descendants stay quiet."""
import atexit
import os
import sys

_ENV = "CKPT_TEST_ORIGIN"


def _say(what, value):
    os.write(2, ("ck-origin %s %016x\n" % (what, value)).encode())


def _start():
    e = os.environ.get(_ENV)
    if e is None:
        return
    pid = os.getpid()
    if e != "1":
        try:
            p, v = e.split(":")
            if int(p) == pid:
                atexit.register(_end, pid, int(v, 16))
        except ValueError:
            pass
        return
    value = int.from_bytes(os.urandom(8), "little")
    os.environ[_ENV] = "%d:%x" % (pid, value)
    _say("START", value)
    atexit.register(_end, pid, value)


def _end(pid, value):
    if os.getpid() == pid:
        sys.stdout.flush()
        _say("END", value)


_start()
