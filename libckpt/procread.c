/* Reading /proc while the job's threads may run, without taking a number
 * in the job's descriptor table.
 *
 * The kernel gives every new descriptor the lowest free number. An open
 * of ours while a job thread opens too gives the job the next number, not
 * the one a bare run gets (a job that numbers its descriptors sees it).
 * Parking must read /proc before its threads are parked (the thread list,
 * the system call each is blocked in, their pending signals), so these
 * reads are done by the reader: a thread of this process with a
 * descriptor table of its own (clone without CLONE_FILES; it closes the
 * copies it got at once). Same process, so /proc/self is ours and needs no
 * ptrace permission.
 *
 * The reader is made at the first park of a process (again after a fork
 * or a restore: it is not in the image) from the manager, whose signals
 * are all blocked, so it takes no job signal either. It runs system calls
 * only: it shares the manager's TLS. One request at a time; a reader that
 * does not answer within a second is given up, and reads are done here
 * again. While nothing else runs (threads parked) a direct read is as good:
 * callers use ck__read_file then. */

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__READER_STACK (64 << 10)
#define CK__READER_BUF (160 << 10) /* /proc/self/task of CK_PD_MAX_THREADS threads */

enum { CK__RD_IDLE, CK__RD_ASKED, CK__RD_ANSWERED };

static struct {
	int lock;	    /* futex: a requester holds it */
	int state;	    /* futex: CK__RD_* */
	int tid;	    /* the reader's, 0: none */
	int pid;	    /* the process it serves (a fork's child has none) */
	int restart;	    /* ck__core.restart_count when made (a restore has none) */
	int lost;	    /* did not answer: never asked again in this process */
	int dir;	    /* the request: a directory listing (getdents64) */
	char path[64];
	long result;
	char buf[CK__READER_BUF];
} ck__rd;

static char ck__reader_stack[CK__READER_STACK] __attribute__((aligned(64)));

static long ck__reader_serve(void)
{
	long fd = ck_openat(AT_FDCWD, ck__rd.path, O_RDONLY | O_CLOEXEC | (ck__rd.dir ? O_DIRECTORY : 0), 0), got = 0,
	     n = 0;

	if (fd < 0)
		return fd;
	while (got < CK__READER_BUF - 1) {
		if (ck__rd.dir)
			n = ck_sys3(SYS_getdents64, fd, ck__rd.buf + got, CK__READER_BUF - 1 - got);
		else
			n = ck_read((int)fd, ck__rd.buf + got, CK__READER_BUF - 1 - got);
		if (n <= 0)
			break;
		got += n;
	}
	ck_close((int)fd);
	if (n < 0)
		return n == -EINVAL && ck__rd.dir ? -E2BIG : n;
	if (ck__rd.dir && got >= CK__READER_BUF - 1)
		return -E2BIG;
	ck__rd.buf[got] = 0;
	return got;
}

static int ck__reader_main(void *arg)
{
	(void)arg;
	/* the job's descriptors, copied by clone: none is ours to hold */
	ck_sys3(SYS_close_range, 0, ~0U, 0);
	for (;;) {
		while (__atomic_load_n(&ck__rd.state, __ATOMIC_SEQ_CST) != CK__RD_ASKED)
			ck_futex(&ck__rd.state, FUTEX_WAIT_PRIVATE, CK__RD_IDLE, NULL);
		ck__rd.result = ck__reader_serve();
		__atomic_store_n(&ck__rd.state, CK__RD_ANSWERED, __ATOMIC_SEQ_CST);
		ck_futex(&ck__rd.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	}
	return 0;
}

static int ck__reader_here(void)
{
	return ck__rd.tid > 0 && !ck__rd.lost && ck__rd.pid == ck__core.pid && ck__rd.restart == ck__core.restart_count;
}

int ck__reader_tid(void)
{
	return ck__reader_here() ? ck__rd.tid : 0;
}

/* From the manager (every signal blocked: the reader inherits the mask). */
void ck__reader_start(void)
{
	long tid;

	if (ck__reader_here() || ck__rd.lost)
		return;
	ck__rd.lock = 0;
	ck__rd.state = CK__RD_IDLE;
	ck__rd.tid = 0;
	tid = clone(ck__reader_main, ck__reader_stack + CK__READER_STACK,
		    CLONE_VM | CLONE_FS | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM, NULL);
	if (tid <= 0)
		return; /* reads are done here, as before */
	ck__rd.pid = ck__core.pid;
	ck__rd.restart = ck__core.restart_count;
	ck__rd.tid = (int)tid;
}

/* The file (or directory listing, dir) at path into buf, NUL-ended; its
 * length, or -errno. Through the reader where there is one. */
long ck__proc_read(const char *path, char *buf, size_t len, int dir)
{
	struct timespec tick = {0, 50 * 1000 * 1000};
	long r;
	int waited = 0;

	if (!ck__reader_here() || ck_gettid() == ck__rd.tid || ck_strlen(path) >= sizeof(ck__rd.path)) {
		long fd = ck__open_priv(path, O_RDONLY | (dir ? O_DIRECTORY : 0)), got = 0, n = 0;
		if (fd < 0)
			return fd;
		while ((size_t)got < len - 1 &&
		       (n = dir ? ck_sys3(SYS_getdents64, fd, buf + got, len - 1 - got)
				: ck_read((int)fd, buf + got, len - 1 - got)) > 0)
			got += n;
		ck__close_priv((int)fd);
		buf[got] = 0;
		return n < 0 && !got ? n : got;
	}
	for (;;) {
		int free_ = 0;
		if (__atomic_compare_exchange_n(&ck__rd.lock, &free_, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
		ck_futex(&ck__rd.lock, FUTEX_WAIT_PRIVATE, 1, &tick);
	}
	if (ck__rd.lost) {
		r = -EIO;
		goto out;
	}
	ck_memcpy(ck__rd.path, path, ck_strlen(path) + 1);
	ck__rd.dir = dir;
	__atomic_store_n(&ck__rd.state, CK__RD_ASKED, __ATOMIC_SEQ_CST);
	ck_futex(&ck__rd.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	while (__atomic_load_n(&ck__rd.state, __ATOMIC_SEQ_CST) != CK__RD_ANSWERED) {
		if (waited++ == 20) { /* 1 s: its buffer is never read again */
			__atomic_store_n(&ck__rd.lost, 1, __ATOMIC_SEQ_CST);
			r = -ETIMEDOUT;
			goto out;
		}
		ck_futex(&ck__rd.state, FUTEX_WAIT_PRIVATE, CK__RD_ASKED, &tick);
	}
	r = ck__rd.result;
	if (r >= 0) {
		if ((size_t)r >= len)
			r = dir ? -E2BIG : (long)len - 1;
		if (r >= 0) {
			ck_memcpy(buf, ck__rd.buf, (size_t)r);
			buf[r] = 0;
		}
	}
	__atomic_store_n(&ck__rd.state, CK__RD_IDLE, __ATOMIC_SEQ_CST);
out:
	__atomic_store_n(&ck__rd.lock, 0, __ATOMIC_SEQ_CST);
	ck_futex(&ck__rd.lock, FUTEX_WAKE_PRIVATE, 1, NULL);
	if (r == -EIO || r == -ETIMEDOUT)
		return ck__proc_read(path, buf, len, dir); /* given up: here */
	return r;
}
