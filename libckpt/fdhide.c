/* The job's own descriptor table, without libckpt's control channel in it
 * (ck__core.ctl_fd, CK_CTL_FD unless the job took that number): a job that
 * lists, closes or numbers its descriptors sees what it would see bare.
 *
 * - listings of an fd directory of this process (/proc/self/fd, /dev/fd,
 *   /proc/PID/fd, their task/TID and fdinfo forms) through readdir,
 *   readdir64 and getdents64 skip the channel's entry, and listings of
 *   its threads (/proc/self/task) those of libckpt's own threads;
 * - close, close_range and closefrom leave the channel open (close of its
 *   number alone: EBADF, as bare); fcntl and dup on it: EBADF;
 * - dup2/dup3 onto its number, and a dup, F_DUPFD or open whose answer
 *   passed over the channel (every lower number taken: bare, the job got
 *   the channel's number), first move the channel to another number and
 *   give the job the one it asked for.
 * A move is atomic for the manager thread (ck__ctl_vacate). Raw system
 * calls and libc's internal calls (scandir, fopen...) are not seen. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"


static int ck__ctl(void)
{
	return __atomic_load_n(&ck__core.ctl_fd, __ATOMIC_SEQ_CST);
}

long ck__open_priv(const char *path, int flags)
{
	long fd = ck_openat(AT_FDCWD, path, flags | O_CLOEXEC, 0);

	for (int i = 0; fd >= 0 && i < 8; i++) {
		int none = 0;
		if (__atomic_compare_exchange_n(&ck__core.priv_fd[i], &none, (int)fd + 1, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			break;
	}
	return fd;
}

/* unmarked first: a number the job gets next is never hidden */
void ck__close_priv(int fd)
{
	for (int i = 0; i < 8; i++) {
		int mine = fd + 1;
		if (__atomic_compare_exchange_n(&ck__core.priv_fd[i], &mine, 0, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
	}
	ck_close(fd);
}

void ck__priv_forget(void)
{
	for (int i = 0; i < 8; i++)
		ck__core.priv_fd[i] = 0;
}

/* Whether fd is libckpt's: the channel, a round's /dev/userfaultfd or
 * userfaultfd, a /proc file being read. */
static int ck__ours(int fd)
{
	if (fd == ck__ctl() || fd == ck__core.devfd || fd == ck__core.fork_fd[0] || fd == ck__core.fork_fd[1])
		return 1;
	for (int i = 0; i < 8; i++)
		if (__atomic_load_n(&ck__core.priv_fd[i], __ATOMIC_SEQ_CST) == fd + 1)
			return 1;
	return 0;
}

static long ck__seterr(long r)
{
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* Whether the manager is blocked in recvmsg (/proc/self/task/TID/syscall
 * names it only while the thread is inside it): the kernel then holds the
 * socket itself, whatever number the manager had read, even one of an
 * earlier move. */
static int ck__manager_in_recv(void)
{
	char path[64] = "/proc/self/task/", buf[128];
	const char *p = buf;
	long n;
	int tid = ck__core.manager_tid, k = 16;
	char num[12];
	int m = 0;

	if (tid <= 0)
		return 0;
	do
		num[m++] = (char)('0' + tid % 10);
	while ((tid /= 10) && m < 11);
	while (m)
		path[k++] = num[--m];
	ck_memcpy(path + k, "/syscall", 9);
	n = ck__proc_read(path, buf, sizeof(buf), 0);
	if (n <= 0)
		return 0;
	return strtol(p, (char **)&p, 10) == SYS_recvmsg && *p == ' ';
}

/* Moves the channel off its number (a close-on-exec number above it): the
 * job takes that number next. Every signal blocked and forks held off
 * meanwhile. ck__core.ctl_fd changes before the old number is closed; a
 * send or receive of the manager's that loaded the old number is waited
 * for (the ctl_send and ctl_recv marks, ctlchan.c), unless it is a receive already
 * blocked in the kernel, which holds the socket, not the number. Returns
 * the number freed, or -errno. */
static int ck__ctl_vacate(void)
{
	struct timespec ts = {0, 200000};
	sigset_t all, old;
	int oldfd, nfd;

	sigfillset(&all);
	ck__real_sigprocmask(SIG_SETMASK, &all, &old);
	ck__fork_lock();
	oldfd = ck__ctl();
	/* well above: a job that keeps opening would cross it again at once */
	nfd = (int)ck_sys3(SYS_fcntl, oldfd, F_DUPFD_CLOEXEC, oldfd + 1024);
	if (nfd < 0)
		nfd = (int)ck_sys3(SYS_fcntl, oldfd, F_DUPFD_CLOEXEC, oldfd + 1);
	if (nfd >= 0) {
		__atomic_store_n(&ck__core.ctl_fd, nfd, __ATOMIC_SEQ_CST);
		/* 2 s at most: a manager that never comes out is stuck anyway */
		for (int i = 0; i < 10000; i++) {
			int recv = __atomic_load_n(&ck__core.ctl_recv, __ATOMIC_SEQ_CST);
			int send = __atomic_load_n(&ck__core.ctl_send, __ATOMIC_SEQ_CST);
			if (!send && (!recv || ck__manager_in_recv()))
				break;
			ck_sys2(SYS_nanosleep, &ts, NULL);
		}
		/* oldfd stays open: the caller puts the job's descriptor there in
		 * one step (dup2/dup3 replace it), so no other thread's open can
		 * take the number in between */
	}
	ck__fork_unlock();
	ck__real_sigprocmask(SIG_SETMASK, &old, NULL);
	return nfd < 0 ? nfd : oldfd;
}

long ck__ctl_aside(int fd, int threads)
{
	long nfd;

	if (fd < 0 || fd != ck__ctl())
		return 0;
	if (threads)
		return ck__ctl_vacate() < 0 ? -EMFILE : 0;
	/* alone in the process (a restore, before its threads): no one to wait for */
	nfd = ck_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, fd + 1024);
	if (nfd < 0)
		nfd = ck_sys3(SYS_fcntl, fd, F_DUPFD_CLOEXEC, fd + 1);
	if (nfd < 0)
		return nfd;
	__atomic_store_n(&ck__core.ctl_fd, (int)nfd, __ATOMIC_SEQ_CST);
	return 0;
}

/* r: a descriptor the job just got. If the channel's number lies below it
 * and at or above min, a bare run got the channel's number: r moves there. */
static int ck__claim(int r, int min)
{
	int ctl = ck__ctl(), to, fl;

	if (r < 0 || ctl < 0 || r < ctl || min > ctl)
		return r;
	fl = (int)ck_sys2(SYS_fcntl, r, F_GETFD);
	to = ck__ctl_vacate();
	if (to < 0)
		return r; /* the next number, as before */
	if (ck_sys3(SYS_dup3, r, to, fl > 0 && (fl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
		ck_close(to);
		return r;
	}
	ck_close(r);
	return to;
}

int close(int fd)
{
	CK_REAL(close);
	int ctl = ck__ctl();

	if (ctl >= 0 && fd == ctl) {
		errno = EBADF;
		return -1;
	}
	ck__inotify_closed((unsigned)fd, (unsigned)fd);
	return real(fd);
}

/* [first, last] without the channel: at most two ranges. */
static long ck__close_range2(unsigned first, unsigned last, int flags)
{
	unsigned ctl = (unsigned)ck__ctl();
	long r = 0;

	if (ck__ctl() < 0 || first > last || ctl < first || ctl > last)
		return ck_sys3(SYS_close_range, first, last, flags);
	if (ctl > first)
		r = ck_sys3(SYS_close_range, first, ctl - 1, flags);
	if (r == 0 && ctl < last)
		r = ck_sys3(SYS_close_range, ctl + 1, last, flags);
	return r;
}

int close_range(unsigned first, unsigned last, int flags)
{
	if (!(flags & 4 /* CLOSE_RANGE_CLOEXEC */))
		ck__inotify_closed(first, last);
	return (int)ck__seterr(ck__close_range2(first, last, flags));
}

void closefrom(int lowfd)
{
	CK_REAL(closefrom);
	int ctl = ck__ctl();

	if (ctl < 0 || lowfd > ctl || lowfd < 0 || ck__close_range2((unsigned)lowfd, ~0u, 0) < 0)
		real(lowfd); /* libc's own way, or the kernel has no close_range */
}

/* dup2/dup3 onto the channel's number: the channel moves first (1), and
 * the job's call replaces its old entry. */
static int ck__onto(int oldfd, int newfd)
{
	int ctl = ck__ctl();

	if (ctl < 0 || newfd != ctl || oldfd == ctl)
		return 0;
	if (ck_sys2(SYS_fcntl, oldfd, F_GETFD) < 0)
		return 0; /* EBADF from the call itself */
	return ck__ctl_vacate() < 0 ? -1 : 1;
}

int dup2(int oldfd, int newfd)
{
	CK_REAL(dup2);
	int ctl = ck__ctl(), moved, r;

	if (ctl >= 0 && oldfd == ctl) {
		errno = EBADF;
		return -1;
	}
	moved = ck__onto(oldfd, newfd);
	if (moved < 0) {
		errno = EBUSY;
		return -1;
	}
	r = real(oldfd, newfd);
	if (r >= 0 && oldfd != newfd)
		ck__inotify_closed((unsigned)newfd, (unsigned)newfd); /* what it held went */
	if (r < 0 && moved)
		ck_close(newfd); /* the channel's old entry */
	return r;
}

int dup3(int oldfd, int newfd, int flags)
{
	CK_REAL(dup3);
	int ctl = ck__ctl(), moved, r;

	if (ctl >= 0 && oldfd == ctl && newfd != oldfd) {
		errno = EBADF;
		return -1;
	}
	moved = ck__onto(oldfd, newfd);
	if (moved < 0) {
		errno = EBUSY;
		return -1;
	}
	r = real(oldfd, newfd, flags);
	if (r >= 0 && oldfd != newfd)
		ck__inotify_closed((unsigned)newfd, (unsigned)newfd); /* what it held went */
	if (r < 0 && moved)
		ck_close(newfd); /* the channel's old entry */
	return r;
}

int dup(int fd)
{
	CK_REAL(dup);
	int ctl = ck__ctl();

	if (ctl >= 0 && fd == ctl) {
		errno = EBADF;
		return -1;
	}
	return ck__claim(real(fd), 0);
}

typedef int (*ck__fcntl_fn)(int, int, ...);

static int ck__fcntl(ck__fcntl_fn real, int fd, int cmd, void *arg)
{
	int ctl = ck__ctl();

	if (ctl >= 0 && fd == ctl) {
		errno = EBADF;
		return -1;
	}
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return ck__claim(real(fd, cmd, arg), (int)(long)arg);
	return real(fd, cmd, arg);
}

/* The argument, whatever its type, is one register's worth. */
int fcntl(int fd, int cmd, ...)
{
	CK_REAL(fcntl);
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return ck__fcntl(real, fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
	CK_REAL(fcntl64);
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return ck__fcntl(real, fd, cmd, arg);
}

/* open and openat: the answer is the lowest free number. */
#define CK_OPEN(...)                                                                                          \
	mode_t mode = 0;                                                                                      \
	if ((flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE) {                                      \
		va_list ap;                                                                                   \
		va_start(ap, flags);                                                                          \
		mode = va_arg(ap, mode_t);                                                                    \
		va_end(ap);                                                                                   \
	}                                                                                                     \
	return ck__claim(real(__VA_ARGS__, flags, mode), 0)

int open(const char *path, int flags, ...)
{
	CK_REAL(open);
	CK_OPEN(path);
}

int open64(const char *path, int flags, ...)
{
	CK_REAL(open64);
	CK_OPEN(path);
}

int openat(int dfd, const char *path, int flags, ...)
{
	CK_REAL(openat);
	CK_OPEN(dfd, path);
}

int openat64(int dfd, const char *path, int flags, ...)
{
	CK_REAL(openat64);
	CK_OPEN(dfd, path);
}

/* Writes n's decimal digits at s; returns the end. */
static char *ck__digits(char *s, long n)
{
	char num[20];
	int m = 0;

	do
		num[m++] = (char)('0' + n % 10);
	while ((n /= 10) && m < 19);
	while (m)
		*s++ = num[--m];
	*s = 0;
	return s;
}

/* Where dfd is /proc/N/... with N this process or one of its threads
 * (/proc/self, /proc/thread-self and /dev/fd resolve to these): what
 * follows /proc/N in path, else NULL. */
static const char *ck__own_proc_dir(int dfd, char *path, size_t len)
{
	char link[40] = "/proc/self/fd/", task[48] = "/proc/self/task/";
	char *end;
	long n, pid;

	if (dfd < 0)
		return NULL;
	ck__digits(link + 14, dfd);
	n = ck_sys4(SYS_readlinkat, AT_FDCWD, link, path, len - 1);
	if (n <= 6)
		return NULL;
	path[n] = 0;
	if (strncmp(path, "/proc/", 6))
		return NULL;
	pid = strtol(path + 6, &end, 10);
	if (end == path + 6 || pid <= 0)
		return NULL;
	if (pid == ck_getpid())
		return end;
	/* a thread of ours, named by its tid */
	ck__digits(task + 16, pid);
	return ck_sys4(SYS_faccessat, AT_FDCWD, task, F_OK, 0) == 0 ? end : NULL;
}

/* Whether dfd is a descriptor directory of this process: /proc/N/fd,
 * /proc/N/fdinfo, /proc/N/task/T/fd(info). */
static int ck__is_own_fd_dir(int dfd)
{
	char path[96], *end;
	const char *p = ck__own_proc_dir(dfd, path, sizeof(path));

	if (p && !strncmp(p, "/task/", 6)) {
		strtol(p + 6, &end, 10);
		p = end == p + 6 ? NULL : end;
	}
	return p && (!strcmp(p, "/fd") || !strcmp(p, "/fdinfo"));
}

/* Whether dfd is this process's thread list: /proc/N/task. */
static int ck__is_own_task_dir(int dfd)
{
	char path[96];
	const char *p = ck__own_proc_dir(dfd, path, sizeof(path));

	return p && !strcmp(p, "/task");
}

/* Whether name is the entry of one of libckpt's descriptors (ck__ours) in
 * a listing of dfd, or of one of its threads (the manager, the reader) in
 * a listing of the process's threads: a job that counts its threads
 * finds as many as bare, before and after a round or a restore. */
static int ck__hidden(int dfd, const char *name)
{
	long v = 0;

	if (dfd < 0 || name[0] < '0' || name[0] > '9')
		return 0;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9' || v > (1L << 31))
			return 0;
		v = v * 10 + (*p - '0');
	}
	if ((v == ck__core.manager_tid || v == ck__reader_tid()) && ck__is_own_task_dir(dfd))
		return 1;
	return ck__ctl() >= 0 && ck__ours((int)v) && ck__is_own_fd_dir(dfd);
}

struct dirent *readdir(DIR *d)
{
	CK_REAL(readdir);
	struct dirent *e;

	while ((e = real(d)) && ck__hidden(dirfd(d), e->d_name))
		;
	return e;
}

struct dirent64 *readdir64(DIR *d)
{
	CK_REAL(readdir64);
	struct dirent64 *e;

	while ((e = real(d)) && ck__hidden(dirfd(d), e->d_name))
		;
	return e;
}

ssize_t getdents64(int fd, void *buf, size_t len)
{
	CK_REAL(getdents64);
	ssize_t n;

	for (;;) {
		n = real(fd, buf, len);
		if (n <= 0)
			return n;
		for (ssize_t at = 0; at < n;) {
			struct dirent64 *e = (struct dirent64 *)((char *)buf + at);
			size_t rl = e->d_reclen;
			if (ck__hidden(fd, e->d_name)) {
				memmove(e, (char *)e + rl, (size_t)(n - at) - rl);
				n -= (ssize_t)rl;
				continue;
			}
			at += (ssize_t)rl;
		}
		if (n > 0)
			return n; /* else only the channel came: 0 would read as the end */
	}
}
