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
 * it. Only system calls in the collect and restart halves. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
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

/* A watch the job added: valid is written last, so that an entry a parked
 * thread was filling is not believed. */
struct ck__watch {
	volatile int32_t valid;
	int32_t fd, wd;
	uint32_t dontfollow;
	uint64_t dev, ino;
	char path[CK_PD_PATH];
};
/* The last watch number the kernel gave an instance, and the process that
 * made it, by its descriptor at inotify_init. At the round, restorer: the
 * watches are this process's to add again (it made the instance; a child
 * that shares it by fork leaves them to it: ckrun checks that one holder
 * made it). */
struct ck__instance {
	int32_t fd, lastwd;
	int32_t creator, restorer;
};
/* One watch to make again, found at the round. */
struct ck__rewatch {
	int32_t fd, wd;
	uint32_t mask;
	uint32_t watch; /* index into ck__watches */
};

static struct ck__watch ck__watches[CK__MAX_WATCHES];
static struct ck__instance ck__instances[CK__MAX_INSTANCES];
static volatile int ck__watch_lock;
static struct ck__rewatch ck__rewatches[CK__MAX_WATCHES];
static uint32_t ck__nrewatches;
/* per instance found at the round: its descriptor and last number given */
static struct ck__instance ck__round_instances[CK__MAX_INSTANCES];
static uint32_t ck__nround_instances;

/* Taken with every signal blocked: the calls are async-signal-safe bare,
 * so a handler may make one while its thread holds the lock. */
static void ck__lock(uint64_t *old)
{
	uint64_t all = ~0ull;

	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &all, old, 8);
	while (__atomic_exchange_n(&ck__watch_lock, 1, __ATOMIC_ACQUIRE))
		ck_sys0(SYS_sched_yield);
}

static void ck__unlock(const uint64_t *old)
{
	__atomic_store_n(&ck__watch_lock, 0, __ATOMIC_RELEASE);
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, 8);
}

/* A fork's child: a thread of the parent may have held it (an entry it
 * was filling stays not valid). */
void ck__inotify_atfork_child(void)
{
	ck__watch_lock = 0;
}

static void ck__instance_new(int fd)
{
	struct ck__instance *free_slot = NULL;
	uint64_t old;

	if (fd < 0)
		return;
	ck__lock(&old);
	for (int i = 0; i < CK__MAX_WATCHES; i++) /* a closed instance's watches */
		if (ck__watches[i].valid && ck__watches[i].fd == fd)
			ck__watches[i].valid = 0;
	for (int i = 0; i < CK__MAX_INSTANCES; i++) {
		if (ck__instances[i].fd == fd + 1 || (!free_slot && !ck__instances[i].fd))
			free_slot = &ck__instances[i];
		if (ck__instances[i].fd == fd + 1)
			break;
	}
	if (free_slot) {
		free_slot->fd = fd + 1; /* 0: free */
		free_slot->lastwd = 0;
		free_slot->creator = (int32_t)ck_getpid();
	}
	ck__unlock(&old);
}

int inotify_init(void)
{
	CK_REAL(inotify_init);
	int fd = real();

	ck__instance_new(fd);
	return fd;
}

int inotify_init1(int flags)
{
	CK_REAL(inotify_init1);
	int fd = real(flags);

	ck__instance_new(fd);
	return fd;
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

int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
	CK_REAL(inotify_add_watch);
	int wd = real(fd, path, mask), e = errno;
	struct ck__watch *w = NULL;
	struct stat st;
	uint64_t old;

	if (wd < 0)
		return wd;
	ck__lock(&old);
	for (int i = 0; i < CK__MAX_WATCHES; i++) {
		struct ck__watch *c = &ck__watches[i];
		if (c->valid && c->fd == fd && c->wd == wd) { /* the same inode again: a new mask */
			w = c;
			break;
		}
		if (!w && !c->valid)
			w = c;
	}
	if (w) {
		w->valid = 0;
		w->fd = fd;
		w->wd = wd;
		w->dontfollow = !!(mask & IN_DONT_FOLLOW);
		if (ck__note_path(w->path, path) == 0 &&
		    ((mask & IN_DONT_FOLLOW) ? lstat(path, &st) : stat(path, &st)) == 0) {
			w->dev = st.st_dev;
			w->ino = st.st_ino;
			__atomic_store_n(&w->valid, 1, __ATOMIC_RELEASE);
		}
	}
	/* (a full table: the round names the watch it has no path for) */
	for (int i = 0; i < CK__MAX_INSTANCES; i++)
		if (ck__instances[i].fd == fd + 1 && ck__instances[i].lastwd < wd)
			ck__instances[i].lastwd = wd;
	ck__unlock(&old);
	errno = e;
	return wd;
}

int inotify_rm_watch(int fd, int wd)
{
	CK_REAL(inotify_rm_watch);
	int r = real(fd, wd), e = errno;

	if (r == 0) {
		uint64_t old;

		ck__lock(&old);
		for (int i = 0; i < CK__MAX_WATCHES; i++)
			if (ck__watches[i].valid && ck__watches[i].fd == fd && ck__watches[i].wd == wd)
				ck__watches[i].valid = 0;
		ck__unlock(&old);
	}
	errno = e;
	return r;
}

/* ---- the round (threads parked: the lock may be held by one of them) ---- */

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

/* The noted watch for one of fdinfo's, whose path still leads to it. */
static int ck__find_watch(int wd, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < CK__MAX_WATCHES; i++) {
		const struct ck__watch *w = &ck__watches[i];
		struct stat st;

		if (!__atomic_load_n(&w->valid, __ATOMIC_ACQUIRE) || w->wd != wd || w->dev != dev || w->ino != ino)
			continue;
		if (ck_sys4(SYS_newfstatat, AT_FDCWD, w->path, &st, w->dontfollow ? AT_SYMLINK_NOFOLLOW : 0) == 0 &&
		    st.st_dev == dev && st.st_ino == ino)
			return i;
	}
	return -1;
}

int ck__inotify_collect(struct ck_pd_fd *f, const char *info)
{
	const char *p = info;
	int lastwd = 0, n = 0, pending = 0;
	struct ck__instance *ri;

	if (ck_sys3(SYS_ioctl, f->fd, FIONREAD, &pending) == 0 && pending > 0) {
		ck__failf("descriptor %d is an inotify instance with %d byte(s) of events the job has not read: "
			  "they cannot be put back",
			  f->fd, pending);
		return -EBUSY;
	}
	while ((p = strstr(p, "inotify wd:"))) {
		int wd = (int)ck__hex(&p, "wd:");
		uint64_t ino = ck__hex(&p, "ino:");
		uint64_t sdev = ck__hex(&p, "sdev:"); /* the kernel's dev_t: major << 20 | minor */
		uint32_t mask = (uint32_t)ck__hex(&p, "mask:");
		uint64_t dev = makedev((unsigned)(sdev >> 20), (unsigned)(sdev & 0xfffff));
		int i = ck__find_watch(wd, dev, ino);

		if (i < 0) {
			ck__failf("descriptor %d is an inotify instance whose watch %d (inode %llu) was added where "
				  "libckpt could not note its path (a bare system call, before an exec), or whose "
				  "path no longer leads to it: not restored",
				  f->fd, wd, (unsigned long long)ino);
			return -ENOTSUP;
		}
		if (ck__nrewatches >= CK__MAX_WATCHES) {
			ck__failf("descriptor %d: more than %d inotify watches: a checkpoint holds at most %d per process",
				  f->fd, CK__MAX_WATCHES, CK__MAX_WATCHES);
			return -E2BIG;
		}
		/* in the order of their numbers (fdinfo lists the newest first) */
		uint32_t at = ck__nrewatches++;
		for (; at > 0 && ck__rewatches[at - 1].fd == f->fd && ck__rewatches[at - 1].wd > wd; at--)
			ck__rewatches[at] = ck__rewatches[at - 1];
		ck__rewatches[at] = (struct ck__rewatch){f->fd, wd, mask, (uint32_t)i};
		if (wd > lastwd)
			lastwd = wd;
		n++;
	}
	if (ck__nround_instances >= CK__MAX_INSTANCES) {
		ck__failf("descriptor %d: more than %d inotify instances: a checkpoint holds at most %d per process",
			  f->fd, CK__MAX_INSTANCES, CK__MAX_INSTANCES);
		return -E2BIG;
	}
	ri = &ck__round_instances[ck__nround_instances++];
	ck_memset(ri, 0, sizeof(*ri));
	for (int i = 0; i < CK__MAX_INSTANCES; i++)
		if (ck__instances[i].fd == f->fd + 1) {
			if (ck__instances[i].lastwd > lastwd)
				lastwd = ck__instances[i].lastwd;
			ri->creator = ck__instances[i].creator;
		}
	ri->fd = f->fd;
	ri->lastwd = lastwd;
	ri->restorer = ri->creator == ck__core.pid;
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
			const struct ck__watch *w = &ck__watches[rw->watch];
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
