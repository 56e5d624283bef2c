/* Descriptor capture: classifies every open descriptor of the process into
 * struct ck_pd_fd entries (ckrun re-creates them at restore, and reads the
 * unread bytes of pipes itself), and records epoll registrations.
 * Runs with the job's threads parked: system calls and fixed buffers only. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"


static int ck__startswith(const char *s, const char *pre)
{
	return ck_strncmp(s, pre, ck_strlen(pre)) == 0;
}

static int ck__endswith(const char *s, const char *suf)
{
	size_t a = ck_strlen(s), b = ck_strlen(suf);
	return a >= b && memcmp(s + a - b, suf, b) == 0;
}

/* The whole of a descriptor's fdinfo (an epoll or inotify instance lists
 * an item per line): -E2BIG when it does not fit, since a part of it
 * would be a silently partial restore. */
static long ck__fdinfo(int fd, char *buf, size_t len)
{
	char path[64];
	long f, n = 0, got = 0;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = ck_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (f < 0)
		return f;
	while ((size_t)got < len - 1 && (n = ck_read((int)f, buf + got, len - 1 - (size_t)got)) > 0)
		got += n;
	if (n < 0) /* not an empty list */
		got = n;
	if ((size_t)got == len - 1 && ck_read((int)f, path, 1) > 0)
		got = -E2BIG;
	ck_close((int)f);
	buf[got > 0 ? got : 0] = 0;
	return got;
}

/* Value after "key" in fdinfo text, in the given base. */
uint64_t ck__field(const char *text, const char *key, int base)
{
	const char *p = strstr(text, key);
	uint64_t v = 0;

	if (!p)
		return 0;
	p += ck_strlen(key);
	while (*p == ' ' || *p == '\t' || *p == '(')
		p++;
	if (base == 16 && p[0] == '0' && p[1] == 'x')
		p += 2;
	for (;; p++) {
		int c = *p, d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (base == 16 && c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else
			break;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	return v;
}

/* A timerfd's time left and interval, read by timerfd_gettime, when they
 * were read, and the expirations not read yet from fdinfo read after it:
 * a periodic timer that expired counts one tick until a read or
 * timerfd_gettime forwards it over the periods that passed since (a
 * restore had lost 11 of 12). */
static int ck__timerfd_read(struct ck_pd_fd *f)
{
	struct itimerspec its;
	char info[512];

	memset(&its, 0, sizeof(its));
	ck_sys2(SYS_timerfd_gettime, f->fd, &its);
	f->mtime_ns = (int64_t)(ck__now_us() * 1000u); /* when: the cut comes later */
	f->u64[2] = (uint64_t)its.it_value.tv_sec * 1000000000ull + (uint64_t)its.it_value.tv_nsec;
	f->u64[3] = (uint64_t)its.it_interval.tv_sec * 1000000000ull + (uint64_t)its.it_interval.tv_nsec;
	if (ck__fdinfo(f->fd, info, sizeof(info)) < 0)
		return -EIO;
	f->size = ck__field(info, "ticks:", 10);
	return 0;
}

/* timerfd_gettime says 0 left both for a disarmed timer and for one past
 * its expiry whose interrupt has not run yet (the kernel clamps the
 * remainder at 0): taken for disarmed, such a periodic timer came back
 * stopped for good and the job waited on it forever. Read again once the
 * interrupt has had time to run: an armed timer has counted an expiration
 * since, a disarmed one has not. One wait (2 ms) for all of a process's
 * timers, only where one could be either. A guess: an interrupt later
 * than that (a loaded virtual machine, PREEMPT_RT's threaded timers)
 * still reads as disarmed. */
static int ck__timerfd_ambiguous(const struct ck_pd_fd *f)
{
	/* a one-shot's unread tick: it fired and was not set again */
	return f->kind == CK_FD_TIMERFD && !f->u64[2] && (f->u64[3] || !f->size);
}

static int ck__timerfds_settle(void)
{
	struct timespec wait = {0, 2000000};
	uint32_t i, any = 0;
	int r = 0;

	for (i = 0; i < ck__pd.nfds; i++)
		any |= (uint32_t)ck__timerfd_ambiguous(&ck__pd.fds[i]);
	if (!any)
		return 0;
	ck_sys2(SYS_nanosleep, &wait, NULL);
	for (i = 0; i < ck__pd.nfds && r == 0; i++) {
		struct ck_pd_fd *f = &ck__pd.fds[i];
		uint64_t before = f->size;

		if (!ck__timerfd_ambiguous(f))
			continue;
		if ((r = ck__timerfd_read(f)) < 0)
			ck__failf("descriptor %d (timerfd): cannot read its state again", f->fd);
		/* periodic and short: due again as it was read; 1 ns left
		 * tells the restore it is armed and the expiration comes now */
		if (r == 0 && !f->u64[2] && f->u64[3] && f->size > before)
			f->u64[2] = 1;
	}
	return r;
}

static int ck__classify_anon(struct ck_pd_fd *f, const char *target)
{
	static char info[262144];
	long n = ck__fdinfo(f->fd, info, sizeof(info));

	if (n == -E2BIG) {
		ck__failf("descriptor %d (%s): its fdinfo is longer than %zu bytes: too many items to record", f->fd,
			  target, sizeof(info) - 1);
		return -E2BIG;
	}
	if (n < 0)
		return -EIO;
	if (!strcmp(target, "anon_inode:[eventfd]")) {
		f->kind = CK_FD_EVENTFD;
		f->u64[0] = ck__field(info, "eventfd-count:", 16);
		f->u64[1] = ck__field(info, "eventfd-semaphore:", 10);
	} else if (!strcmp(target, "anon_inode:[timerfd]")) {
		f->kind = CK_FD_TIMERFD;
		f->u64[0] = ck__field(info, "clockid:", 10);
		f->u64[1] = ck__field(info, "settime flags:", 8);
		return ck__timerfd_read(f);
	} else if (!strcmp(target, "anon_inode:[signalfd]")) {
		f->kind = CK_FD_SIGNALFD;
		f->u64[0] = ck__field(info, "sigmask:", 16);
	} else if (!strcmp(target, "anon_inode:[pidfd]")) {
		/* Pid: in the job's namespace (its own /proc); -1 once the
		 * process is gone (reaped), 0 for one outside the namespace */
		const char *p = strstr(info, "Pid:");
		f->kind = CK_FD_PIDFD;
		if (!p) {
			ck__failf("descriptor %d is a pidfd whose process the kernel does not name: not restored", f->fd);
			return -ENOTSUP;
		}
		for (p += 4; *p == ' ' || *p == '\t'; p++)
			;
		if (f->flags & O_EXCL) { /* PIDFD_THREAD: its thread is made again after the descriptors */
			ck__failf("descriptor %d is a pidfd of a thread (PIDFD_THREAD): not restored", f->fd);
			return -ENOTSUP;
		}
		f->u64[0] = *p == '-' ? 0 : ck__field(info, "Pid:", 10);
		if (*p != '-' && !f->u64[0]) {
			ck__failf("descriptor %d is a pidfd of a process outside the job: not restored", f->fd);
			return -ENOTSUP;
		}
	} else if (!strcmp(target, "anon_inode:[eventpoll]")) {
		f->kind = CK_FD_EPOLL;
		return ck__epoll_collect(f->fd, info);
	} else if (!strcmp(target, "anon_inode:inotify")) {
		return ck__inotify_collect(f, info);
	} else if (!strcmp(target, "anon_inode:[fanotify]")) {
		ck__failf("descriptor %d is a fanotify instance: its marks are not restored", f->fd);
		return -ENOTSUP;
	} else {
		ck__failf("descriptor %d (%s) is not supported yet", f->fd, target);
		return -ENOTSUP;
	}
	return 0;
}

/* A pseudo-terminal's master (5:2, /dev/ptmx or /dev/pts/ptmx) or slave
 * (majors 136-143): labelled with the pts number that pairs them, the
 * pair's state is ckrun's to read (launcher/ckrun/pty.c). Other devices
 * are reopened by path. */
static int ck__classify_chr(struct ck_pd_fd *f, const struct stat *st)
{
	unsigned maj = major(st->st_rdev), min = minor(st->st_rdev);
	int n = -1;

	if (maj == 5 && min == 2) {
		if (ck_sys3(SYS_ioctl, f->fd, TIOCGPTN, &n) < 0 || n < 0) {
			ck__failf("descriptor %d (%s): a pseudo-terminal master without a pts number", f->fd, f->path);
			return -ENOTSUP;
		}
		f->kind = CK_FD_PTMX;
		f->u64[0] = (uint64_t)n;
	} else if (maj >= 136 && maj <= 143) {
		f->kind = CK_FD_PTS;
		f->u64[0] = (uint64_t)(maj - 136) * 256 + min;
	} else {
		f->kind = CK_FD_DEV;
	}
	return 0;
}

/* A POSIX message queue (mq_open): a file of the mqueue file system. */
static int ck__is_mqueue(int fd)
{
	struct statfs sf;

	return ck__seccomp_allows(SYS_fstatfs) && ck_sys2(SYS_fstatfs, fd, &sf) == 0 &&
	       sf.f_type == 0x19800202 /* MQUEUE_MAGIC */;
}

/* The open file descriptions seen so far in this collection: the index in
 * ck__pd.fds of the first descriptor of each, sorted in the order kcmp
 * gives descriptions, so that finding a duplicate takes log2(n) calls, not
 * one per earlier descriptor of the same file (4000 opens of /dev/null
 * froze a process for 5.6 s, comparing each with all before it). */
static uint32_t ck__descs[CK_PD_MAX_FDS], ck__ndescs;
static int ck__descs_unordered; /* kcmp gave no order: one by one */

/* f, the newest entry: a duplicate (dup, fork-inherited) shares an open
 * file description with an earlier one, its offset and flags; kcmp tells
 * it apart from a second open(). 1: made a CK_FD_DUP of it. */
static int ck__dup_of(struct ck_pd_fd *f)
{
	uint32_t self = ck__pd.nfds - 1, lo = 0, hi;

	if (self == 0) {
		ck__ndescs = 0;
		ck__descs_unordered = 0;
	}
	hi = ck__ndescs;
	while (!ck__descs_unordered && lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct ck_pd_fd *o = &ck__pd.fds[ck__descs[mid]];
		long c = ck_sys5(SYS_kcmp, ck__core.pid, ck__core.pid, 0 /* KCMP_FILE */, o->fd, f->fd);
		/* (the same file too: a kcmp answered falsely by the job's
		 * seccomp filter must not merge different files) */
		if (c == 0 && (o->dev != f->dev || o->ino != f->ino))
			c = 3;
		if (c == 0) {
			f->kind = CK_FD_DUP;
			f->peer = o->fd;
			return 1;
		}
		if (c == 1) /* o's before f's */
			lo = mid + 1;
		else if (c == 2)
			hi = mid;
		else
			ck__descs_unordered = 1;
	}
	if (!ck__descs_unordered) {
		memmove(&ck__descs[lo + 1], &ck__descs[lo], (ck__ndescs - lo) * sizeof(ck__descs[0]));
		ck__descs[lo] = self;
		ck__ndescs++;
		return 0;
	}
	for (uint32_t i = 0; i < self; i++) {
		const struct ck_pd_fd *o = &ck__pd.fds[i];
		if (o->dev == f->dev && o->ino == f->ino &&
		    ck_sys5(SYS_kcmp, ck__core.pid, ck__core.pid, 0 /* KCMP_FILE */, o->fd, f->fd) == 0) {
			f->kind = CK_FD_DUP;
			f->peer = o->kind == CK_FD_DUP ? o->peer : o->fd;
			return 1;
		}
	}
	return 0;
}

static int ck__classify(int fd, int dirfd)
{
	struct ck_pd_fd *f;
	char link[64];
	struct stat st;
	long n;
	int r;

	if (fd == ck__core.ctl_fd || fd == dirfd || fd == ck__core.devfd)
		return 0;
	if (ck__pd.nfds >= CK_PD_MAX_FDS) {
		ck__failf("more than %d open descriptors: a checkpoint holds at most %d per process", CK_PD_MAX_FDS,
			  CK_PD_MAX_FDS);
		return -E2BIG;
	}
	f = &ck__pd.fds[ck__pd.nfds];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->peer = -1;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = ck_sys4(SYS_readlinkat, AT_FDCWD, link, f->path, sizeof(f->path) - 1);
	if (n < 0)
		return 0; /* closed meanwhile */
	f->path[n] = 0;
	if (ck_sys2(SYS_fstat, fd, &st) < 0)
		return 0;
	f->flags = (int32_t)ck_sys2(SYS_fcntl, fd, F_GETFL);
	f->fdflags = (int32_t)ck_sys2(SYS_fcntl, fd, F_GETFD);
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = (uint64_t)st.st_size;
	f->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
	f->mode = st.st_mode;
	n = ck_sys3(SYS_lseek, fd, 0, SEEK_CUR);
	f->offset = n > 0 ? (uint64_t)n : 0;
	ck__pd.nfds++;

	if (ck__dup_of(f))
		return 0;
	/* ckrun's own stdio among them is ckrun's to tell (launcher/ckrun/stdio.c) */
	if (ck__startswith(f->path, "anon_inode:"))
		return ck__classify_anon(f, f->path);
	if (ck__plugins_skip(0, 0, f->path, NULL)) {
		f->kind = CK_FD_PLUGIN;
		return 0;
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		if (ck__is_mqueue(fd)) {
			/* the queue itself is ckrun's to save, with the job's IPC
			 * namespace (launcher/ckrun/mq_posix.c): by its name */
			if (ck__endswith(f->path, " (deleted)")) {
				ck__failf("descriptor %d is a POSIX message queue removed from its namespace while "
					  "open (%s): it cannot be found to save: not supported", fd, f->path);
				return -ENOTSUP;
			}
			f->kind = CK_FD_MQUEUE;
			ck__mqnotify_collect(f);
			return 0;
		}
		if (ck__startswith(f->path, "/memfd:") || ck__endswith(f->path, " (deleted)"))
			ck__core.hold = 1; /* contents read through /proc: not copy-on-write */
		if (ck__startswith(f->path, "/memfd:")) {
			f->kind = CK_FD_MEMFD;
			f->u64[0] = (uint64_t)ck_sys2(SYS_fcntl, fd, F_GET_SEALS);
		} else if (ck__endswith(f->path, " (deleted)")) {
			f->kind = CK_FD_DELETED;
		} else {
			f->kind = CK_FD_FILE;
		}
		return 0;
	case S_IFDIR:
		f->kind = CK_FD_FILE;
		return 0;
	case S_IFLNK: /* the link itself, opened O_PATH|O_NOFOLLOW */
		f->kind = CK_FD_FILE;
		return 0;
	case S_IFCHR:
		return ck__classify_chr(f, &st);
	case S_IFIFO:
		f->kind = ck__startswith(f->path, "pipe:[") ? CK_FD_PIPE : CK_FD_FIFO;
		f->pipe_cap = (uint32_t)ck_sys2(SYS_fcntl, fd, F_GETPIPE_SZ);
		/* Pair pipe ends. Their unread bytes are ckrun's to read, once per
		 * pipe for the whole job, while every process is parked. */
		for (uint32_t i = 0; i + 1 < ck__pd.nfds; i++) {
			struct ck_pd_fd *o = &ck__pd.fds[i];
			if (o->dev == f->dev && o->ino == f->ino) {
				f->peer = o->fd;
				return 0;
			}
		}
		return 0;
	case S_IFSOCK: {
		/* Read, drained and re-created from outside, by ckrun's socket
		 * plugin, which sees both ends of a connection. A UNIX one's
		 * SO_PEERCRED pid as this namespace numbers it, in peer: ckrun
		 * reads the pid in its own, and cannot number there a maker
		 * that has exited. */
		struct ucred uc = {0, 0, 0};
		socklen_t ul = sizeof(uc);
		int dom = 0;
		socklen_t dl = sizeof(dom);

		f->kind = CK_FD_SOCKET;
		if (ck_sys5(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, &dom, &dl) == 0 && dom == AF_UNIX &&
		    ck_sys5(SYS_getsockopt, fd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0 && uc.pid > 0)
			f->peer = uc.pid;
		return 0;
	}
	default:
		r = -ENOTSUP;
		ck__failf("descriptor %d (%s) is not supported yet", fd, f->path);
		return r;
	}
}

/* One descriptor, then what its description holds beyond the table
 * (fdstate.c). */
static int ck__collect_one(int fd, int dirfd)
{
	uint32_t n = ck__pd.nfds;
	int r = ck__classify(fd, dirfd);

	if (r < 0 || ck__pd.nfds == n || ck__pd.fds[n].kind == CK_FD_DUP)
		return r;
	return ck__fdstate_collect(n);
}

int ck__collect_fds(void)
{
	static char buf[16384];
	long dfd, n;
	int r = 0;

	ck__pd.nfds = 0;
	ck__pd.nepitems = 0;
	ck__pd.rst_mono = 0;
	ck__fdstate_reset();
	ck__inotify_reset();
	dfd = ck_openat(AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (dfd < 0) {
		ck__failf("cannot list /proc/self/fd");
		return (int)dfd;
	}
	while (r == 0 && (n = ck_sys3(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n && r == 0;) {
			struct ck__dirent64 *d = (struct ck__dirent64 *)(buf + off);
			off += d->reclen;
			if (d->name[0] >= '0' && d->name[0] <= '9')
				r = ck__collect_one(atoi(d->name), (int)dfd);
		}
	}
	ck_close((int)dfd);
	if (r < 0)
		return r;
	return ck__timerfds_settle();
}
