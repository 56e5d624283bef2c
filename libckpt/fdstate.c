/* State of open file descriptions that the descriptor table of the process
 * descriptor does not hold: the status flags open() cannot set again
 * (O_ASYNC), the owner and signal of O_ASYNC (F_SETOWN_EX, F_SETSIG), and
 * the record and flock locks held through each description. Recorded at
 * the round with the job parked, into this file's own memory (which the
 * checkpoint saves with the rest of the process), and put back by the
 * restored process itself: a POSIX lock belongs to the process that takes
 * it, so nobody else can take it for us. /proc files of the job are opened
 * here too, inside the job's pid namespace, where their pids mean what
 * they meant. A lease (F_SETLEASE) is taken again by the restored process
 * too, before the owner: taking one makes the taker the file's owner. One
 * being broken cannot be taken back as it was (its breaker waits, the
 * holder was told): the round is refused. Only system calls at restart. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__MAX_LOCKS 256
/* Flags F_SETFL changes; open() is given the others. */
#define CK__SETFL (O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK)

enum { CK__LK_POSIX = 1, CK__LK_OFD, CK__LK_FLOCK };

struct ck__fdx {
	int32_t owner_type, owner_pid, sig;
	int32_t lease; /* F_RDLCK + 1 or F_WRLCK + 1 held through it, 0 none */
};
struct ck__lock {
	int32_t fd;
	uint8_t kind, write;
	int64_t start, len; /* len 0: to the end of the file */
};
static struct ck__fdx ck__fdx[CK_PD_MAX_FDS];
static struct ck__lock ck__locks[CK__MAX_LOCKS];
static uint32_t ck__nlocks;

void ck__fdstate_reset(void)
{
	ck__nlocks = 0;
}

/* A /proc file of a process (/proc/PID/..., /proc/self/... reads as a pid):
 * opened by the restored process itself. */
int ck__fdstate_is_proc(const char *path)
{
	const char *p = path + 6;

	if (ck_strncmp(path, "/proc/", 6) != 0 || *p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return *p == '/' || *p == 0;
}

static const char *ck__skip(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static const char *ck__word(const char *p)
{
	while (*p && *p != ' ' && *p != '\t' && *p != '\n')
		p++;
	return ck__skip(p);
}

static int64_t ck__num(const char **pp)
{
	const char *p = *pp;
	int64_t v = 0;

	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	*pp = p;
	return v;
}

/* A lease's line: "LEASE  ACTIVE    READ|WRITE ..." ("BREAKING" while a
 * conflicting open waits for the holder to give it up). */
static int ck__parse_lease(const struct ck_pd_fd *f, struct ck__fdx *x, const char *p)
{
	if (!ck_strncmp(p, "DELEG", 5)) {
		ck__failf("descriptor %d (%s) holds a delegation: not restored", f->fd, f->path);
		return -ENOTSUP;
	}
	p = ck__word(p);
	if (ck_strncmp(p, "ACTIVE", 6)) {
		ck__failf("descriptor %d (%s) holds a lease (F_SETLEASE) being broken: a process waits for "
			  "the job to give it up, which a restore cannot make again; try again once it is given up",
			  f->fd, f->path);
		return -ENOTSUP;
	}
	p = ck__word(p);
	x->lease = !ck_strncmp(p, "WRITE", 5) ? F_WRLCK + 1 : F_RDLCK + 1;
	/* ckrun holds a writable copy of such a file while it restores, and
	 * a restorer maps a file through an open of its own: either is an
	 * open the lease conflicts with, and the restore could not take it */
	if (f->kind != CK_FD_FILE) {
		ck__failf("descriptor %d (%s) holds a lease (F_SETLEASE) on a deleted file or memfd: not restored",
			  f->fd, f->path);
		return -ENOTSUP;
	}
	if (x->lease == F_WRLCK + 1 && ck__maps_has_file(f->dev, f->ino)) {
		ck__failf("descriptor %d (%s) holds a write lease (F_SETLEASE) on a file the process maps: a restore "
			  "maps it through an open of its own, which the lease forbids: not restored", f->fd, f->path);
		return -ENOTSUP;
	}
	return 0;
}

/* One "lock:" line of fdinfo: "lock:\tN: KIND ADVISORY TYPE PID MAJ:MIN:INO START END|EOF" */
static int ck__parse_lock(const struct ck_pd_fd *f, struct ck__fdx *x, const char *l)
{
	struct ck__lock *k;
	const char *p = strchr(l, ':');
	int64_t end;

	p = ck__word(ck__skip(p + 1)); /* the lock's number */
	if (p[0] == '-' && p[1] == '>')
		return 0; /* a request waiting for it: a parked thread asks again */
	if (!ck_strncmp(p, "LEASE", 5) || !ck_strncmp(p, "DELEG", 5))
		return ck__parse_lease(f, x, p);
	if (ck__nlocks >= CK__MAX_LOCKS) {
		ck__failf("descriptor %d (%s): more than %d locks: a checkpoint holds at most %d per process", f->fd,
			  f->path, CK__MAX_LOCKS, CK__MAX_LOCKS);
		return -E2BIG;
	}
	k = &ck__locks[ck__nlocks];
	ck_memset(k, 0, sizeof(*k));
	k->fd = f->fd;
	if (!ck_strncmp(p, "POSIX", 5))
		k->kind = CK__LK_POSIX;
	else if (!ck_strncmp(p, "OFDLCK", 6))
		k->kind = CK__LK_OFD;
	else if (!ck_strncmp(p, "FLOCK", 5))
		k->kind = CK__LK_FLOCK;
	else {
		ck__failf("descriptor %d (%s) holds a lock of a kind not restored (%.16s)", f->fd, f->path, p);
		return -ENOTSUP;
	}
	p = ck__word(ck__word(p)); /* kind, ADVISORY/MANDATORY */
	k->write = !ck_strncmp(p, "WRITE", 5);
	p = ck__word(ck__word(ck__word(p))); /* type, pid, dev:ino */
	k->start = ck__num(&p);
	p = ck__skip(p);
	if (!ck_strncmp(p, "EOF", 3)) {
		k->len = 0;
	} else {
		end = ck__num(&p);
		k->len = end - k->start + 1;
	}
	ck__nlocks++;
	return 0;
}

/* Round: what ck_pd_fd fds[idx] (not a duplicate) lacks. */
int ck__fdstate_collect(uint32_t idx)
{
	static char info[8192];
	struct ck_pd_fd *f = &ck__pd.fds[idx];
	struct ck__fdx *x = &ck__fdx[idx];
	struct f_owner_ex own;
	char path[64];
	long fd, n;

	ck_memset(x, 0, sizeof(*x));
	/* (a socket's too: its plugin re-makes the socket, not its O_ASYNC
	 * owner and signal) */
	if (f->kind == CK_FD_PLUGIN || (f->flags & O_PATH))
		return 0;
	ck_memset(&own, 0, sizeof(own));
	if (ck_sys3(SYS_fcntl, f->fd, F_GETOWN_EX, &own) == 0) {
		x->owner_type = own.type;
		x->owner_pid = own.pid;
	}
	x->sig = (int32_t)ck_sys2(SYS_fcntl, f->fd, F_GETSIG);
	if (x->sig < 0)
		x->sig = 0;
	if (f->kind != CK_FD_FILE && f->kind != CK_FD_DELETED && f->kind != CK_FD_MEMFD)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", f->fd);
	fd = ck_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	n = ck_read((int)fd, info, sizeof(info) - 1);
	ck_close((int)fd);
	info[n > 0 ? n : 0] = 0;
	for (char *l = strstr(info, "lock:"); l; l = strstr(l + 1, "lock:")) {
		char *e = strchr(l, '\n');
		int r;

		if (e)
			*e = 0;
		r = ck__parse_lock(f, x, l);
		if (e)
			*e = '\n';
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- restart: system calls only ---- */

static char ck__why[160];

#define ck__put(at, s) ck__msg_put(ck__why, sizeof(ck__why), (at), (s))
#define ck__putnum(at, v) ck__msg_putnum(ck__why, sizeof(ck__why), (at), (v))

static long ck__fd_fail(const char *what, const struct ck_pd_fd *f, long r, const char **why, const char **path)
{
	size_t n = ck__put(0, "descriptor ");

	n = ck__putnum(n, f->fd);
	n = ck__put(n, ": ");
	ck__put(n, what);
	*why = ck__why;
	*path = f->path;
	return r;
}

static long ck__lock_fail(const struct ck__lock *k, const struct ck_pd_fd *f, long r, const char **why, const char **path)
{
	static const char *const kinds[] = {"", "POSIX", "OFD", "flock"};
	size_t n = ck__put(0, "descriptor ");

	n = ck__putnum(n, f->fd);
	n = ck__put(n, ": cannot take again its ");
	n = ck__put(n, kinds[k->kind]);
	n = ck__put(n, k->write ? " write lock" : " read lock");
	if (k->kind != CK__LK_FLOCK) {
		n = ck__put(n, " on bytes ");
		n = ck__putnum(n, k->start);
		n = ck__put(n, k->len ? "-" : "-EOF");
		if (k->len)
			n = ck__putnum(n, k->start + k->len - 1);
	}
	ck__put(n, " (another process holds it) of");
	*why = ck__why;
	*path = f->path;
	return r;
}

static const struct ck_pd_fd *ck__fd_of(const struct ck_procdesc *pd, int fd)
{
	for (uint32_t i = 0; i < pd->nfds; i++)
		if (pd->fds[i].fd == fd)
			return &pd->fds[i];
	return NULL;
}

/* Opened here, in the job's pid namespace: a /proc file of a process of
 * the job, a pidfd of a process that had not been reaped (one that had:
 * ck__fdstate_late, later). */
static int ck__reopened_here(const struct ck_pd_fd *f)
{
	return f->kind == CK_FD_PIDFD || (f->kind == CK_FD_FILE && ck__fdstate_is_proc(f->path));
}

/* A thread's /proc file (/proc/PID/task/TID/..., what /proc/thread-self
 * reads as): the thread, this process's or another's, is made again
 * later in the restore, so the file is opened once every thread of the
 * job exists (ckrun's go, ck__fdstate_late), a placeholder holding its
 * number until then. (Opened here, it failed with ENOENT and the whole
 * restore with it: a committed checkpoint that could not come back.) */
static int ck__task_file(const struct ck_pd_fd *f)
{
	const char *p = f->path + 6;

	if (f->kind != CK_FD_FILE || !ck__fdstate_is_proc(f->path))
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return !ck_strncmp(p, "/task/", 6);
}

/* Before the threads exist: /proc files and pidfds opened again, and
 * their duplicates. */
long ck__fdstate_reopen(const struct ck_procdesc *pd, const char **why, const char **path)
{
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		int cloexec = (f->fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0;
		long fd;

		if (!ck__reopened_here(f))
			continue;
		if (f->kind == CK_FD_PIDFD && f->u64[0]) /* every process of the job exists, zombies too */
			fd = ck_sys2(SYS_pidfd_open, (long)f->u64[0], f->flags & O_NONBLOCK);
		else if (f->kind == CK_FD_PIDFD || ck__task_file(f)) /* its number held until ck__fdstate_late */
			fd = ck_openat(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC, 0);
		else
			fd = ck_openat(AT_FDCWD, f->path, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY)) | O_CLOEXEC, 0);
		if (fd < 0)
			return ck__fd_fail("cannot open again", f, fd, why, path);
		if (fd != f->fd) {
			long r = ck__ctl_aside(f->fd, 0);
			if (r < 0) {
				ck_close((int)fd);
				return ck__fd_fail("cannot move libckpt's channel off", f, r, why, path);
			}
			r = ck_sys3(SYS_dup3, fd, f->fd, cloexec);
			ck_close((int)fd);
			if (r < 0)
				return ck__fd_fail("cannot open again", f, r, why, path);
		} else if (!cloexec) {
			ck_sys3(SYS_fcntl, fd, F_SETFD, 0);
		}
		if (f->offset && f->kind == CK_FD_FILE && !ck__task_file(f))
			ck_sys3(SYS_lseek, f->fd, f->offset, SEEK_SET);
	}
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i], *o;

		if (f->kind != CK_FD_DUP || !(o = ck__fd_of(pd, f->peer)) || !ck__reopened_here(o) ||
		    (o->kind == CK_FD_PIDFD && !o->u64[0]) || ck__task_file(o))
			continue; /* (a dead pidfd's or a thread's file's: with it, ck__fdstate_late) */
		long r = ck__ctl_aside(f->fd, 0);
		if (r < 0 || (r = ck_sys3(SYS_dup3, f->peer, f->fd, (f->fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0)) < 0)
			return ck__fd_fail("cannot duplicate again", f, r, why, path);
	}
	return 0;
}

/* Once every process of the job has all its threads again (ckrun's go):
 * threads' /proc files (ck__task_file), and pidfds whose process had
 * been reaped: of a child of ours that ends at
 * once and is reaped here (no exit signal: the job's wait() never sees
 * it). In the job's namespace, since a pidfd of a process of an ancestor
 * namespace refuses signals with EINVAL, not ESRCH. Called once every
 * process of the job has all its threads again (ckrun's go): before, the
 * child's pid could be one a restored thread is about to claim. A fork of
 * the process, once per such pidfd. */
long ck__fdstate_late(const struct ck_procdesc *pd, const char **why, const char **path)
{
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		long kid, fd, r;

		if (ck__task_file(f)) {
			fd = ck_openat(AT_FDCWD, f->path, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY)) | O_CLOEXEC, 0);
			if (fd < 0)
				return ck__fd_fail("cannot open again", f, fd, why, path);
			if (f->offset)
				ck_sys3(SYS_lseek, fd, f->offset, SEEK_SET);
			goto onto;
		}
		if (f->kind != CK_FD_PIDFD || f->u64[0])
			continue;
		kid = ck_sys5(SYS_clone, 0, 0, 0, 0, 0);
		if (kid == 0)
			ck_sys1(SYS_exit, 0);
		if (kid < 0)
			return ck__fd_fail("cannot make again", f, kid, why, path);
		fd = ck_sys2(SYS_pidfd_open, kid, f->flags & O_NONBLOCK);
		while (ck_sys4(SYS_wait4, kid, 0, 0x40000000 /* __WALL */, 0) == -EINTR)
			;
		if (fd < 0)
			return ck__fd_fail("cannot make again", f, fd, why, path);
onto:
		/* onto the placeholder ck__fdstate_reopen left at its number */
		r = ck_sys3(SYS_dup3, fd, f->fd, (f->fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0);
		ck_close((int)fd);
		if (r < 0)
			return ck__fd_fail("cannot make again", f, r, why, path);
		for (uint32_t k = 0; k < pd->nfds; k++) /* its duplicates */
			if (pd->fds[k].kind == CK_FD_DUP && pd->fds[k].peer == f->fd &&
			    ((r = ck__ctl_aside(pd->fds[k].fd, 1)) < 0 ||
			     (r = ck_sys3(SYS_dup3, f->fd, pd->fds[k].fd, (pd->fds[k].fdflags & FD_CLOEXEC) ? O_CLOEXEC : 0)) < 0))
				return ck__fd_fail("cannot duplicate again", &pd->fds[k], r, why, path);
	}
	return 0;
}

/* Every thread exists (an owner may be one): flags, owners, signals, locks. */
long ck__fdstate_restore(const struct ck_procdesc *pd, const char **why, const char **path)
{
	for (uint32_t i = 0; i < pd->nfds && i < CK_PD_MAX_FDS; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		const struct ck__fdx *x = &ck__fdx[i];
		long fl, r;

		/* 0-2 may be the new ckrun's stdio */
		if (f->fd <= 2 || f->kind == CK_FD_DUP || f->kind == CK_FD_PLUGIN ||
		    (f->flags & O_PATH))
			continue;
		fl = ck_sys2(SYS_fcntl, f->fd, F_GETFL);
		if (fl >= 0 && (fl & CK__SETFL) != (f->flags & CK__SETFL)) {
			r = ck_sys3(SYS_fcntl, f->fd, F_SETFL, (fl & ~CK__SETFL) | (f->flags & CK__SETFL));
			if (r < 0)
				return ck__fd_fail("cannot set its status flags again", f, r, why, path);
		}
		/* before the owner: taking a lease makes the taker the owner */
		if (x->lease && (r = ck_sys3(SYS_fcntl, f->fd, F_SETLEASE, x->lease - 1)) < 0)
			return ck__fd_fail(r == -EAGAIN ? (x->lease - 1 == F_WRLCK
								   ? "cannot take its write lease again (F_SETLEASE: "
								     "the file is open elsewhere) of"
								   : "cannot take its read lease again (F_SETLEASE: "
								     "the file is open for writing elsewhere) of")
					   : r == -EACCES || r == -EPERM
						   ? "cannot take its lease again (F_SETLEASE: this user does not own "
						     "the file, and has no CAP_LEASE) of"
						   : "cannot take its lease again (F_SETLEASE: leases are disabled, "
						     "fs.leases-enable, or this file system has none) of",
					   f, r, why, path);
		if (x->owner_pid || x->lease) {
			struct f_owner_ex own = {x->owner_type, x->owner_pid};
			if ((r = ck_sys3(SYS_fcntl, f->fd, F_SETOWN_EX, &own)) < 0)
				return ck__fd_fail("cannot give it its owner again (F_SETOWN_EX)", f, r, why, path);
		}
		if (x->sig && (r = ck_sys3(SYS_fcntl, f->fd, F_SETSIG, x->sig)) < 0)
			return ck__fd_fail("cannot give it its signal again (F_SETSIG)", f, r, why, path);
	}
	for (uint32_t i = 0; i < ck__nlocks; i++) {
		const struct ck__lock *k = &ck__locks[i];
		const struct ck_pd_fd *f = ck__fd_of(pd, k->fd);
		struct flock l;
		long r;

		if (!f)
			continue;
		if (k->kind == CK__LK_FLOCK) {
			r = ck_sys2(SYS_flock, k->fd, (k->write ? LOCK_EX : LOCK_SH) | LOCK_NB);
		} else {
			ck_memset(&l, 0, sizeof(l));
			l.l_type = k->write ? F_WRLCK : F_RDLCK;
			l.l_whence = SEEK_SET;
			l.l_start = k->start;
			l.l_len = k->len;
			r = ck_sys3(SYS_fcntl, k->fd, k->kind == CK__LK_OFD ? F_OFD_SETLK : F_SETLK, &l);
		}
		if (r < 0)
			return ck__lock_fail(k, f, r, why, path);
	}
	return 0;
}
