/* inotify instances. The kernel names a watch by its inode only
 * (fdinfo's "inotify wd: ino: sdev: mask:"), and making it again needs a
 * path, so libckpt notes the path of every watch the job adds through the
 * C library (the calls are interposed), in its own memory, which the image
 * holds. At the round (threads parked) each watch of fdinfo must have a
 * noted path that still leads to its inode, and the instance no unread
 * event (reading would take it from the job): else the round is refused
 * naming the descriptor. The restored process adds the watches again
 * itself, before any of its threads runs, with the same watch numbers:
 * the kernel gives the number after the last one given (idr_alloc_cyclic),
 * so numbers skipped are taken and given back on a memfd of ours, and so
 * is every number up to the last the job was given. An instance several
 * processes share (a fork) gets its watches from the process that made
 * it. The round's half uses system calls and string functions only, the
 * restart's system calls only. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__MAX_WATCHES 1024
#define CK__MAX_INSTANCES 64
/* watch flags fdinfo leaves out before Linux 5.19 */
#define CK__XMASK (IN_ONESHOT | IN_EXCL_UNLINK)

/* A watch the job added: valid is written last (a fork's child may find
 * one half filled). */
struct ck__watch {
	volatile int32_t valid;
	int32_t fd, wd;
	uint32_t dontfollow, xmask;
	uint64_t dev, ino;
	char path[CK_PD_PATH];
};
/* An instance the job made, by its descriptor (+ 1; 0: free): the process
 * that made it and the last watch number the kernel gave it (unknown after
 * an add that failed once the kernel had given it a number). At the round,
 * restorer: the watches are this process's to add again (it made the
 * instance; a child that shares it by fork leaves them to it: ckrun checks
 * that one holder made it). */
struct ck__instance {
	int32_t fd, lastwd;
	int32_t creator, restorer;
	int32_t unknown;
};
/* One watch to make again, found at the round. */
struct ck__rewatch {
	int32_t fd, wd;
	uint32_t mask;
	uint32_t watch; /* index into ck__watches */
};

static struct ck__watch ck__watches[CK__MAX_WATCHES];
static struct ck__instance ck__instances[CK__MAX_INSTANCES];
static volatile int ck__ninstances; /* close() looks only when some exist */
static volatile int ck__watch_lock;
static struct ck__rewatch ck__rewatches[CK__MAX_WATCHES];
static uint32_t ck__nrewatches;
/* per instance found at the round */
static struct ck__instance ck__round_instances[CK__MAX_INSTANCES];
static uint32_t ck__nround_instances;

/* Every signal blocked for the whole call, the kernel's part included: a
 * thread is never parked between the kernel's answer and its note (a
 * round would find a watch, or a new instance at an old number, that the
 * notes do not tell), and a handler of the thread cannot find the lock
 * held. */
static void ck__block(uint64_t *old)
{
	uint64_t all = ~0ull;

	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &all, old, 8);
}

static void ck__unblock(const uint64_t *old)
{
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, 8);
}

static void ck__lock(void)
{
	while (__atomic_exchange_n(&ck__watch_lock, 1, __ATOMIC_ACQUIRE))
		ck_sys0(SYS_sched_yield);
}

static void ck__unlock(void)
{
	__atomic_store_n(&ck__watch_lock, 0, __ATOMIC_RELEASE);
}

/* A fork's child: a thread of the parent may have held it (an entry it
 * was filling stays not valid). */
void ck__inotify_atfork_child(void)
{
	ck__watch_lock = 0;
}

static struct ck__instance *ck__instance_of(int fd)
{
	for (int i = 0; i < CK__MAX_INSTANCES; i++)
		if (ck__instances[i].fd == fd + 1)
			return &ck__instances[i];
	return NULL;
}

/* Descriptors [first, last] closed or replaced (fdhide.c's close, dup2,
 * dup3, close_range): their instance records go. The watches' notes stay:
 * a duplicate may still hold the instance, and a round finds them by
 * number and inode. */
void ck__inotify_closed(unsigned first, unsigned last)
{
	uint64_t old;

	if (!ck__ninstances)
		return;
	ck__block(&old);
	ck__lock();
	for (int i = 0; i < CK__MAX_INSTANCES; i++)
		if (ck__instances[i].fd && (unsigned)(ck__instances[i].fd - 1) >= first &&
		    (unsigned)(ck__instances[i].fd - 1) <= last) {
			ck__instances[i].fd = 0;
			ck__ninstances--;
		}
	ck__unlock();
	ck__unblock(&old);
}

/* The caller holds the lock. */
static void ck__instance_new(int fd)
{
	struct ck__instance *x = ck__instance_of(fd);

	for (int i = 0; !x && i < CK__MAX_INSTANCES; i++)
		if (!ck__instances[i].fd) {
			x = &ck__instances[i];
			ck__ninstances++;
		}
	/* (a full table: the round names the instance as one it does not know) */
	if (x)
		*x = (struct ck__instance){.fd = fd + 1, .creator = (int32_t)ck_getpid()};
}

/* inotify_init1(flags) made noted, all signals blocked (see ck__block) */
static int ck__init_noted(int (*real)(int), int flags)
{
	uint64_t old;
	int fd, e;

	ck__block(&old);
	fd = real(flags);
	e = errno;
	if (fd >= 0) {
		ck__lock();
		ck__instance_new(fd);
		ck__unlock();
	}
	ck__unblock(&old);
	errno = e;
	return fd;
}

int inotify_init(void)
{
	return inotify_init1(0); /* (the same call with no flags) */
}

int inotify_init1(int flags)
{
	CK_REAL(inotify_init1);
	return ck__init_noted(real, flags);
}

/* path as the kernel resolved it: relative ones from the working directory */
static int ck__note_path(char *out, const char *path)
{
	size_t n = 0, len = strlen(path);

	if (path[0] != '/') {
		if (!getcwd(out, CK_PD_PATH))
			return -1;
		n = strlen(out);
		if (n > 1)
			out[n++] = '/';
	}
	if (n + len >= CK_PD_PATH)
		return -1;
	memcpy(out + n, path, len + 1);
	return 0;
}

/* A free note, after dropping those of descriptors that are no longer
 * inotify instances when none is free. The caller holds the lock. */
static struct ck__watch *ck__free_note(void)
{
	char link[32], target[32];

	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < CK__MAX_WATCHES; i++)
			if (!ck__watches[i].valid)
				return &ck__watches[i];
		for (int i = 0; pass == 0 && i < CK__MAX_WATCHES; i++) {
			long n;

			snprintf(link, sizeof(link), "/proc/self/fd/%d", ck__watches[i].fd);
			n = ck_sys4(SYS_readlinkat, AT_FDCWD, link, target, sizeof(target) - 1);
			if (n < 0 || (size_t)n != sizeof("anon_inode:inotify") - 1 ||
			    ck_strncmp(target, "anon_inode:inotify", (size_t)n))
				ck__watches[i].valid = 0;
		}
	}
	return NULL;
}

int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
	CK_REAL(inotify_add_watch);
	struct ck__watch *w = NULL;
	struct ck__instance *x;
	struct stat st;
	uint64_t old;
	int wd, e;

	ck__block(&old);
	wd = real(fd, path, mask);
	e = errno;
	ck__lock();
	x = ck__instance_of(fd);
	if (wd < 0) {
		/* the kernel gives the number before it counts the watch
		 * (ENOSPC) or adds its mark: the next number is not known */
		if (x && e != EBADF && e != EINVAL && e != ENOENT && e != EACCES && e != EEXIST && e != EFAULT &&
		    e != ENAMETOOLONG && e != ENOTDIR && e != ELOOP)
			x->unknown = 1;
		goto out;
	}
	for (int i = 0; i < CK__MAX_WATCHES && !w; i++)
		if (ck__watches[i].valid && ck__watches[i].fd == fd && ck__watches[i].wd == wd)
			w = &ck__watches[i]; /* the same inode again: a new mask */
	if (w && (mask & IN_MASK_ADD)) {
		w->xmask |= mask & CK__XMASK;
	} else {
		if (!w)
			w = ck__free_note();
		/* (none free: the round names the watch it has no path for) */
		if (w) {
			w->valid = 0;
			w->fd = fd;
			w->wd = wd;
			w->dontfollow = !!(mask & IN_DONT_FOLLOW);
			w->xmask = mask & CK__XMASK;
			if (ck__note_path(w->path, path) == 0 &&
			    ((mask & IN_DONT_FOLLOW) ? lstat(path, &st) : stat(path, &st)) == 0) {
				w->dev = st.st_dev;
				w->ino = st.st_ino;
				__atomic_store_n(&w->valid, 1, __ATOMIC_RELEASE);
			}
		}
	}
	if (x && x->lastwd < wd)
		x->lastwd = wd;
out:
	ck__unlock();
	ck__unblock(&old);
	errno = e;
	return wd;
}

int inotify_rm_watch(int fd, int wd)
{
	CK_REAL(inotify_rm_watch);
	uint64_t old;
	int r, e;

	ck__block(&old);
	r = real(fd, wd);
	e = errno;
	if (r == 0) {
		ck__lock();
		for (int i = 0; i < CK__MAX_WATCHES; i++)
			if (ck__watches[i].valid && ck__watches[i].fd == fd && ck__watches[i].wd == wd)
				ck__watches[i].valid = 0;
		ck__unlock();
	}
	ck__unblock(&old);
	errno = e;
	return r;
}

/* ---- the round (threads parked, none inside the calls above: they
 * block the parking signal) ---- */

void ck__inotify_reset(void)
{
	ck__nrewatches = 0;
	ck__nround_instances = 0;
}

static uint64_t ck__hex(const char **pp, const char *key)
{
	const char *p = strstr(*pp, key);
	uint64_t v = 0;

	if (!p)
		return 0;
	for (p += ck_strlen(key);; p++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v * 16 + (uint64_t)d;
	}
	*pp = p;
	return v;
}

/* One watch as fdinfo lists it ("inotify wd:W ino:I sdev:D mask:M
 * ignored_mask:0 fhandle-bytes:N fhandle-type:T f_handle:HEX"). */
struct ck__listed {
	int wd;
	uint32_t mask;
	uint64_t ino, dev;
	uint32_t hbytes;
	int htype;
	unsigned char handle[MAX_HANDLE_SZ];
};

static const char *ck__parse_listed(const char *p, struct ck__listed *l)
{
	const char *eol = strchr(p, '\n'), *h;
	uint64_t sdev;

	ck_memset(l, 0, sizeof(*l));
	l->wd = (int)ck__hex(&p, "wd:");
	l->ino = ck__hex(&p, "ino:");
	sdev = ck__hex(&p, "sdev:"); /* the kernel's dev_t: major << 20 | minor */
	l->dev = makedev((unsigned)(sdev >> 20), (unsigned)(sdev & 0xfffff));
	l->mask = (uint32_t)ck__hex(&p, "mask:");
	h = strstr(p, "fhandle-bytes:");
	if (h && (!eol || h < eol)) {
		l->hbytes = (uint32_t)ck__hex(&h, "fhandle-bytes:");
		l->htype = (int)ck__hex(&h, "fhandle-type:");
		h = strstr(h, "f_handle:");
		if (l->hbytes > MAX_HANDLE_SZ || !h)
			l->hbytes = 0;
		for (uint32_t i = 0; h && i < l->hbytes; i++) {
			const char *x = h + 9 + 2 * i;
			int hi = x[0] <= '9' ? x[0] - '0' : x[0] - 'a' + 10, lo = x[1] <= '9' ? x[1] - '0' : x[1] - 'a' + 10;
			if (hi < 0 || hi > 15 || lo < 0 || lo > 15) {
				l->hbytes = 0;
				break;
			}
			l->handle[i] = (unsigned char)(hi << 4 | lo);
		}
	}
	return eol ? eol : p + ck_strlen(p);
}

/* Whether path (as the watch resolved it) leads to the listed inode: its
 * file handle where the kernel lists one (device numbers differ between
 * stat and the superblock on btrfs subvolumes), else device and inode. */
static int ck__leads_to(const struct ck__watch *w, const struct ck__listed *l)
{
	struct stat st;

	if (ck_sys4(SYS_newfstatat, AT_FDCWD, w->path, &st, w->dontfollow ? AT_SYMLINK_NOFOLLOW : 0) < 0 ||
	    st.st_ino != l->ino)
		return 0;
	if (l->hbytes && ck__seccomp_allows(SYS_name_to_handle_at)) {
		struct {
			struct file_handle fh;
			unsigned char bytes[MAX_HANDLE_SZ];
		} h;
		int mnt;

		h.fh.handle_bytes = MAX_HANDLE_SZ;
		if (ck_sys5(SYS_name_to_handle_at, AT_FDCWD, w->path, &h.fh, &mnt,
			    w->dontfollow ? 0 : AT_SYMLINK_FOLLOW) == 0)
			return h.fh.handle_type == l->htype && h.fh.handle_bytes == l->hbytes &&
			       !memcmp(h.fh.f_handle, l->handle, l->hbytes);
	}
	return st.st_dev == l->dev;
}

/* The noted watch for one of fdinfo's, whose path still leads to it. */
static int ck__find_watch(const struct ck__listed *l)
{
	for (int i = 0; i < CK__MAX_WATCHES; i++) {
		const struct ck__watch *w = &ck__watches[i];

		if (__atomic_load_n(&w->valid, __ATOMIC_ACQUIRE) && w->wd == l->wd && w->ino == l->ino &&
		    ck__leads_to(w, l))
			return i;
	}
	return -1;
}

/* Notes of descriptor fd for watches fdinfo no longer lists (a one-shot
 * that fired, a file deleted, an unmount: the kernel removed them). */
static void ck__prune(int fd, const char *info)
{
	for (int i = 0; i < CK__MAX_WATCHES; i++) {
		struct ck__watch *w = &ck__watches[i];
		int listed = 0;

		if (!w->valid || w->fd != fd)
			continue;
		for (const char *p = info; !listed && (p = strstr(p, "inotify wd:"));) {
			const char *q = p + 11;
			listed = (int)ck__hex(&q, "") == w->wd;
			p = q;
		}
		if (!listed)
			w->valid = 0;
	}
}

int ck__inotify_collect(struct ck_pd_fd *f, const char *info)
{
	const struct ck__instance *x = ck__instance_of(f->fd);
	const char *p = info;
	int lastwd = 0, n = 0, pending = 0;
	struct ck__instance *ri;

	if (ck_sys3(SYS_ioctl, f->fd, FIONREAD, &pending) == 0 && pending > 0) {
		ck__failf("descriptor %d is an inotify instance with %d byte(s) of events the job has not read: "
			  "they cannot be put back",
			  f->fd, pending);
		return -EBUSY;
	}
	if (x && x->unknown) {
		ck__failf("descriptor %d is an inotify instance whose next watch number is not known (an "
			  "inotify_add_watch failed after the kernel had given it one): not restored",
			  f->fd);
		return -ENOTSUP;
	}
	if (ck__nround_instances >= CK__MAX_INSTANCES) {
		ck__failf("descriptor %d: more than %d inotify instances: a checkpoint holds at most %d per process",
			  f->fd, CK__MAX_INSTANCES, CK__MAX_INSTANCES);
		return -E2BIG;
	}
	ri = &ck__round_instances[ck__nround_instances];
	ck_memset(ri, 0, sizeof(*ri));
	ri->fd = f->fd;
	if (x) {
		ri->creator = x->creator;
		ri->restorer = x->creator == ck__core.pid;
		lastwd = x->lastwd;
	}
	ck__prune(f->fd, info);
	while ((p = strstr(p, "inotify wd:"))) {
		struct ck__listed l;
		int i;

		p = ck__parse_listed(p + 8, &l);
		if (l.wd > lastwd)
			lastwd = l.wd;
		n++;
		if (!ri->restorer)
			continue; /* its maker, another holder, adds them again */
		if ((i = ck__find_watch(&l)) < 0) {
			ck__failf("descriptor %d is an inotify instance whose watch %d (inode %llu) was added where "
				  "libckpt could not note its path (a bare system call, before an exec), or whose "
				  "path no longer leads to it: not restored",
				  f->fd, l.wd, (unsigned long long)l.ino);
			return -ENOTSUP;
		}
		if (ck__nrewatches >= CK__MAX_WATCHES) {
			ck__failf("descriptor %d: more than %d inotify watches: a checkpoint holds at most %d per process",
				  f->fd, CK__MAX_WATCHES, CK__MAX_WATCHES);
			return -E2BIG;
		}
		/* in the order of their numbers (fdinfo lists the newest first) */
		uint32_t at = ck__nrewatches++;
		for (; at > 0 && ck__rewatches[at - 1].fd == f->fd && ck__rewatches[at - 1].wd > l.wd; at--)
			ck__rewatches[at] = ck__rewatches[at - 1];
		ck__rewatches[at] = (struct ck__rewatch){f->fd, l.wd, l.mask | ck__watches[i].xmask, (uint32_t)i};
	}
	ri->lastwd = lastwd;
	ck__nround_instances++;
	f->kind = CK_FD_INOTIFY;
	f->u64[0] = (uint64_t)n;
	f->u64[1] = (uint64_t)lastwd;
	f->u64[2] = (uint64_t)(uint32_t)ri->creator; /* ckrun: one holder made it */
	return 0;
}

/* ---- restart: system calls only, before the threads are made again ---- */

static char ck__drain_buf[16384];

/* The IN_IGNORED events our own removals queued. */
static void ck__drain(int fd)
{
	int pending = 0;

	while (ck_sys3(SYS_ioctl, fd, FIONREAD, &pending) == 0 && pending > 0)
		if (ck_read(fd, ck__drain_buf, sizeof(ck__drain_buf)) <= 0)
			break;
}

/* Numbers up to `upto` (excluded) taken and given back. */
static long ck__skip_to(int fd, int scratch_path_fd, int *next, int upto)
{
	char path[32];
	int removed = 0;

	ck__msg_putnum(path, sizeof(path), ck__msg_put(path, sizeof(path), 0, "/proc/self/fd/"), scratch_path_fd);
	while (*next < upto) {
		long wd = ck_sys3(SYS_inotify_add_watch, fd, path, IN_DELETE_SELF);
		if (wd < 0)
			return wd;
		ck_sys2(SYS_inotify_rm_watch, fd, wd);
		*next = (int)wd + 1;
		if (++removed % 4096 == 0) /* below max_queued_events */
			ck__drain(fd);
	}
	return 0;
}

static const struct ck_pd_fd *ck__pd_fd(const struct ck_procdesc *pd, int fd)
{
	for (uint32_t i = 0; i < pd->nfds; i++)
		if (pd->fds[i].fd == fd)
			return &pd->fds[i];
	return NULL;
}

/* "descriptor FD: inotify watch WD" + what */
static void ck__watch_msg(char *m, size_t cap, int fd, int wd, const char *what)
{
	size_t n = ck__msg_put(m, cap, 0, "descriptor ");

	n = ck__msg_putnum(m, cap, n, fd);
	n = ck__msg_put(m, cap, n, ": inotify watch ");
	n = ck__msg_putnum(m, cap, n, wd);
	ck__msg_put(m, cap, n, what);
}

long ck__inotify_restore(const struct ck_procdesc *pd, const char **why, const char **path)
{
	static char msg[160];
	long scratch = -1, r = 0;

	for (uint32_t k = 0; k < ck__nround_instances; k++) {
		const struct ck__instance *ri = &ck__round_instances[k];
		const struct ck_pd_fd *f = ck__pd_fd(pd, ri->fd);
		int next = 1;

		if (!f || f->kind != CK_FD_INOTIFY || !ri->restorer)
			continue;
		if (scratch < 0 && (scratch = ck_sys2(SYS_memfd_create, "ckpt-inotify", MFD_CLOEXEC)) < 0) {
			*why = "cannot make again the watches of an inotify instance (memfd_create)";
			*path = f->path;
			return scratch;
		}
		for (uint32_t i = 0; i < ck__nrewatches; i++) {
			const struct ck__rewatch *rw = &ck__rewatches[i];
			struct ck__watch *w = &ck__watches[rw->watch];
			struct stat st;
			long wd;

			if (rw->fd != ri->fd)
				continue;
			if ((r = ck__skip_to(ri->fd, (int)scratch, &next, rw->wd)) < 0)
				goto fail;
			wd = ck_sys3(SYS_inotify_add_watch, ri->fd, w->path,
				     rw->mask | (w->dontfollow ? IN_DONT_FOLLOW : 0));
			if (wd < 0) {
				ck__watch_msg(msg, sizeof(msg), ri->fd, rw->wd, ": cannot watch again");
				*why = msg;
				*path = w->path;
				r = wd;
				goto out;
			}
			if (wd != rw->wd) {
				ck__watch_msg(msg, sizeof(msg), ri->fd, rw->wd, ": the kernel gave it another number, on");
				*why = msg;
				*path = w->path;
				r = -EINVAL;
				goto out;
			}
			next = (int)wd + 1;
			/* what the path leads to here (another host, a file
			 * replaced): the next round checks against it */
			if (ck_sys4(SYS_newfstatat, AT_FDCWD, w->path, &st, w->dontfollow ? AT_SYMLINK_NOFOLLOW : 0) == 0) {
				w->dev = st.st_dev;
				w->ino = st.st_ino;
			}
		}
		if ((r = ck__skip_to(ri->fd, (int)scratch, &next, ri->lastwd + 1)) < 0)
			goto fail;
		ck__drain(ri->fd);
	}
	goto out;
fail:
	*why = "cannot make again the watch numbers of an inotify instance";
	*path = "(a memfd of libckpt's)";
out:
	if (scratch >= 0)
		ck_close((int)scratch);
	return r;
}
