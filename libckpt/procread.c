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
 * copies it got at once, but a message queue's). Same process, so /proc/self is ours and needs no
 * ptrace permission.
 *
 * The reader is made at the first park of a process (again after a fork
 * or a restore: it is not in the image) from the manager, whose signals
 * are all blocked, so it takes no job signal either. It runs system calls
 * only: it shares the manager's TLS. It is not made when a seccomp filter
 * of the job's forbids one of its calls. One request at a time; a reader
 * that does not answer within a second is given up (parks still skip
 * it), and reads are done here again. While nothing else runs (threads
 * parked) a direct read is as good: callers use ck__read_file then. */

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
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
	int ready;	    /* futex: it closed its copies of the job's descriptors */
	int tid;	    /* the reader's, 0: none */
	int pid;	    /* the process image it serves (a fork's child and */
	int restart;	    /* ... a restored process, ck__core.restart_count, have none) */
	int lost;	    /* it did not answer in time, or a filter since forbids its calls: not asked
			     * again (parks still skip it) */
	uint32_t gated;	    /* the job's seccomp filters its calls were checked against */
	int dir;	    /* the request: a directory listing (getdents64) */
	char path[64];
	long result;
	char buf[CK__READER_BUF];
} ck__rd;

static char ck__reader_stack[CK__READER_STACK] __attribute__((aligned(64)));

/* The system calls the reader makes: a job's seccomp filter that forbids
 * one would kill or trap it (a trap would run the job's handler on a
 * thread without TLS of its own). */
static const int ck__reader_calls[] = {SYS_close_range, SYS_close, SYS_openat, SYS_read, SYS_getdents64, SYS_futex,
					SYS_fstatfs};

static int ck__reader_calls_allowed(void)
{
	for (size_t i = 0; i < sizeof(ck__reader_calls) / sizeof(ck__reader_calls[0]); i++)
		if (!ck__seccomp_allows(ck__reader_calls[i]))
			return 0;
	return 1;
}

static uint64_t ck__rd_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

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
	if (got >= CK__READER_BUF - 1)
		return -E2BIG; /* not all of it: the caller reads it itself */
	ck__rd.buf[got] = 0;
	return got;
}

/* A POSIX message queue (the file system's magic number). */
static int ck__reader_is_mqueue(long fd)
{
	struct statfs sf;

	return ck_sys2(SYS_fstatfs, fd, &sf) == 0 && sf.f_type == 0x19800202;
}

/* The copies of the job's descriptors clone gave us, closed, one by one
 * from our own table's listing, but a POSIX message queue's: its close by
 * a thread of the process would remove the process's notification on it
 * (mq_notify; every round took it away when close_range closed them all).
 * The copy kept holds nothing back from the job: the queue lives on by its
 * name or the job's descriptors anyway, and is gone with the process. A
 * table with no room for the listing: close_range, as before. */
static void ck__reader_close_copies(void)
{
	long fd, n;

	fd = ck_openat(AT_FDCWD, "/proc/thread-self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0) {
		ck_sys3(SYS_close_range, 0, ~0U, 0);
		return;
	}
	while ((n = ck_sys3(SYS_getdents64, fd, ck__rd.buf, CK__READER_BUF)) > 0)
		for (long off = 0; off < n;) {
			struct ck__dirent64 *d = (struct ck__dirent64 *)(ck__rd.buf + off);
			long k = 0;
			off += d->reclen;
			if (d->name[0] < '0' || d->name[0] > '9')
				continue;
			for (const char *p = d->name; *p >= '0' && *p <= '9'; p++)
				k = k * 10 + (*p - '0');
			if (k != fd && !ck__reader_is_mqueue(k))
				ck_close((int)k);
		}
	ck_close((int)fd);
}

static int ck__reader_main(void *arg)
{
	(void)arg;
	ck_sys2(SYS_prctl, PR_SET_NAME, (long)CK_READER_COMM); /* (checkpoint.c's manager) */
	ck__reader_close_copies(); /* none is ours to hold */
	__atomic_store_n(&ck__rd.ready, 1, __ATOMIC_SEQ_CST);
	ck_futex(&ck__rd.ready, FUTEX_WAKE_PRIVATE, 1, NULL);
	for (;;) {
		int st = __atomic_load_n(&ck__rd.state, __ATOMIC_SEQ_CST);
		if (st != CK__RD_ASKED) {
			ck_futex(&ck__rd.state, FUTEX_WAIT_PRIVATE, st, NULL);
			continue;
		}
		ck__rd.result = ck__reader_serve();
		__atomic_store_n(&ck__rd.state, CK__RD_ANSWERED, __ATOMIC_SEQ_CST);
		ck_futex(&ck__rd.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	}
	return 0;
}

/* The reader of this process image exists (lost or not). */
static int ck__reader_mine(void)
{
	return ck__rd.tid > 0 && ck__rd.pid == ck__core.pid && ck__rd.restart == ck__core.restart_count;
}

int ck__reader_tid(void)
{
	return ck__reader_mine() ? ck__rd.tid : 0;
}

static int ck__reader_usable(void)
{
	uint32_t nsf;

	if (!ck__reader_mine() || !__atomic_load_n(&ck__rd.ready, __ATOMIC_SEQ_CST) ||
	    __atomic_load_n(&ck__rd.lost, __ATOMIC_SEQ_CST))
		return 0;
	/* a filter the job installed since (TSYNC reaches the reader too) */
	if ((nsf = ck__seccomp_count()) != ck__rd.gated) {
		if (!ck__reader_calls_allowed()) {
			__atomic_store_n(&ck__rd.lost, 1, __ATOMIC_SEQ_CST);
			return 0;
		}
		ck__rd.gated = nsf;
	}
	return 1;
}

/* From the manager (every signal blocked: the reader inherits the mask). */
void ck__reader_start(void)
{
	struct timespec tick = {0, 50 * 1000 * 1000};
	uint64_t until;
	long tid;

	if (ck__reader_mine())
		return;
	if (!ck__reader_calls_allowed())
		return; /* reads are done here, as before */
	ck__rd.gated = ck__seccomp_count();
	ck__rd.lock = 0;
	ck__rd.state = CK__RD_IDLE;
	ck__rd.ready = 0;
	ck__rd.lost = 0;
	ck__rd.tid = 0;
	ck__rd.pid = ck__core.pid;
	ck__rd.restart = ck__core.restart_count;
	/* the kernel clears tid when it ends: a number reused by a job
	 * thread is never taken for it */
	tid = clone(ck__reader_main, ck__reader_stack + CK__READER_STACK,
		    CLONE_VM | CLONE_FS | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM | CLONE_PARENT_SETTID |
			    CLONE_CHILD_CLEARTID,
		    NULL, &ck__rd.tid, NULL, &ck__rd.tid);
	if (tid <= 0) {
		ck__rd.tid = 0;
		return;
	}
	/* closing its copies may flush files (NFS, FUSE): a second at most */
	until = ck__rd_ms() + 1000;
	while (!__atomic_load_n(&ck__rd.ready, __ATOMIC_SEQ_CST) && ck__rd_ms() < until)
		ck_futex(&ck__rd.ready, FUTEX_WAIT_PRIVATE, 0, &tick);
	if (!__atomic_load_n(&ck__rd.ready, __ATOMIC_SEQ_CST))
		__atomic_store_n(&ck__rd.lost, 1, __ATOMIC_SEQ_CST);
}

static long ck__proc_read_here(const char *path, char *buf, size_t len, int dir)
{
	long fd = ck__open_priv(path, O_RDONLY | (dir ? O_DIRECTORY : 0)), got = 0, n = 0;

	if (fd < 0)
		return fd;
	while ((size_t)got < len - 1 &&
	       (n = dir ? ck_sys3(SYS_getdents64, fd, buf + got, len - 1 - got) : ck_read((int)fd, buf + got, len - 1 - got)) >
		       0)
		got += n;
	ck__close_priv((int)fd);
	buf[got] = 0;
	return n < 0 && !got ? n : got;
}

/* The file (or directory listing, dir) at path into buf, NUL-ended; its
 * length, or -errno. Through the reader where there is one. */
long ck__proc_read(const char *path, char *buf, size_t len, int dir)
{
	struct timespec tick = {0, 50 * 1000 * 1000};
	uint64_t until = ck__rd_ms() + 2000;
	long r;

	if (!ck__reader_usable() || ck_gettid() == ck__rd.tid || ck_strlen(path) >= sizeof(ck__rd.path))
		return ck__proc_read_here(path, buf, len, dir);
	for (;;) {
		int free_ = 0;
		if (__atomic_compare_exchange_n(&ck__rd.lock, &free_, 1, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
		if (ck__rd_ms() > until) /* a holder that never lets go */
			return ck__proc_read_here(path, buf, len, dir);
		ck_futex(&ck__rd.lock, FUTEX_WAIT_PRIVATE, 1, &tick);
	}
	until = ck__rd_ms() + 1000;
	if (__atomic_load_n(&ck__rd.lost, __ATOMIC_SEQ_CST)) {
		r = -ETIMEDOUT;
		goto out;
	}
	ck_memcpy(ck__rd.path, path, ck_strlen(path) + 1);
	ck__rd.dir = dir;
	__atomic_store_n(&ck__rd.state, CK__RD_ASKED, __ATOMIC_SEQ_CST);
	ck_futex(&ck__rd.state, FUTEX_WAKE_PRIVATE, 1, NULL);
	while (__atomic_load_n(&ck__rd.state, __ATOMIC_SEQ_CST) != CK__RD_ANSWERED) {
		if (ck__rd_ms() > until) { /* its buffer is never read again */
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
	if (r == -ETIMEDOUT || (r == -E2BIG && !dir))
		return ck__proc_read_here(path, buf, len, dir); /* given up, or more than it holds: here */
	return r;
}
