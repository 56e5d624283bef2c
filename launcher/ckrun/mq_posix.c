/* POSIX message queues (mq_open) of the job. The job has an IPC
 * namespace of its own (ns.c), so its queues live exactly as long as the
 * job: a restore must make them again, with their messages.
 *
 * No system call lists the queues of a namespace or reads a message
 * without taking it. The helper that visits the job's IPC namespace
 * (shm_sysv.c) mounts the namespace's mqueue file system once, in a
 * mount namespace of its own, and keeps the directory open in ckrun's
 * table; at every round (every process of the job parked) it lists it,
 * opens each queue, takes its messages and puts them back at once in the
 * order they came: the queue's own order (priority, then age), so the
 * queue is as it was. Taking and putting back would send a notification
 * a process registered (mq_notify: sent when a message arrives in an
 * empty queue): such a queue is saved only empty, and its registration
 * is made again by its process (libckpt/mqnotify.c). The helper shares ckrun's memory
 * and is not killed with it, so the messages go back even if ckrun dies
 * between.
 *
 * At a restore each queue is made again before any process exists, with
 * its attributes, messages, owner and mode; a descriptor of one is opened
 * again by name by the helper (inside the namespace) into ckrun's table,
 * with its access mode and O_NONBLOCK, and handed to its process as any
 * other. A descriptor must name a queue of the job's namespace that the
 * round saved (a queue removed while open has no name: libckpt refuses
 * it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ipcns.h"
#include "launcher/ckrun/kinds.h"

#define CK__PMQ_HEAD 24 /* u64 maxmsg, msgsize, name length */

static void ck__name(struct ck_ipc_visit *v, const char *name, size_t len)
{
	if (len >= sizeof(v->name))
		len = sizeof(v->name) - 1;
	memcpy(v->name, name, len);
	v->name[len] = 0;
}

/* ---- in the helper ---- */

void ck_pmq_mount(struct ck_ipc_visit *v)
{
	static const char *const over[] = {"/tmp", "/dev", "/mnt", "/var"};

	/* private: the mount reaches nobody else's namespace */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
		v->mq_unseen = errno;
		return;
	}
	for (size_t i = 0; i < sizeof(over) / sizeof(over[0]) && v->mq_dir < 0; i++)
		if (mount("mqueue", over[i], "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) == 0)
			v->mq_dir = open(over[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->mq_dir < 0)
		v->mq_unseen = errno;
}

/* The queue's notification: the process registered (0 if none), how
 * (sigev_notify) and its signal; the queue file reads "QSIZE:...
 * NOTIFY:... SIGNO:... NOTIFY_PID:...". */
static int ck__notify_of(int dir, const char *name, struct ck_ipc_obj *s)
{
	char b[256];
	int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
	const char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	b[n] = 0;
	if (!(p = strstr(b, "NOTIFY:")) || sscanf(p, "NOTIFY:%d SIGNO:%d NOTIFY_PID:%d", &s->notify, &s->signo,
						 &s->notify_pid) != 3)
		return -1;
	return 0;
}

/* Sends the messages of a record (from offset at) into q, in order. */
static int ck__send_all(int q, const char *p, size_t at, size_t size)
{
	while (at < size) {
		uint64_t len, prio;

		if (size - at < 16) {
			errno = EBADMSG;
			return -1;
		}
		memcpy(&len, p + at, 8);
		memcpy(&prio, p + at + 8, 8);
		if (len > size - at - 16 || prio > UINT32_MAX) {
			errno = EBADMSG;
			return -1;
		}
		if (syscall(SYS_mq_timedsend, q, p + at + 16, (size_t)len, (unsigned)prio, NULL) < 0)
			return -1;
		at += 16 + len;
	}
	return 0;
}

/* One queue into v->seg[v->n]: its attributes and name, then its
 * messages, taken and put back. */
static int ck__take(struct ck_ipc_visit *v, const char *name)
{
	struct ck_ipc_obj *s = &v->seg[v->n];
	size_t len = strlen(name), used;
	uint64_t head[3];
	struct mq_attr a;
	struct stat st;
	int q, r = 0, err = 0;
	char *p;

	memset(s, 0, sizeof(*s));
	ck__name(v, name, len);
	if (ck__notify_of(v->mq_dir, name, s) < 0) {
		errno = EBADMSG;
		return ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
	}
	if (s->notify_pid && s->notify == SIGEV_THREAD) {
		errno = 0;
		return ck_ipc_failed(v, CK_IPC_E_PMQTHREAD, 0);
	}
	if (fstatat(v->mq_dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
	q = (int)syscall(SYS_mq_open, name, O_RDWR | O_NONBLOCK | O_CLOEXEC, 0, NULL);
	if (q < 0)
		return ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
	if (syscall(SYS_mq_getsetattr, q, NULL, &a) < 0) {
		r = ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
		goto out;
	}
	/* the first message put back would send the notification: a queue
	 * with one is saved only empty (its process registers again) */
	if (s->notify_pid && a.mq_curmsgs) {
		errno = 0;
		r = ck_ipc_failed(v, CK_IPC_E_PMQNOTIFY, 0);
		goto out;
	}
	s->maplen = CK__PMQ_HEAD + len + (size_t)a.mq_curmsgs * (16 + (size_t)a.mq_msgsize);
	s->addr = mmap(NULL, s->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (s->addr == MAP_FAILED) {
		s->addr = NULL;
		r = ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
		goto out;
	}
	s->x.flags = CK_SYSV_PMQ; /* unmapped as a queue's copy, whatever follows */
	v->n++;
	p = s->addr;
	head[0] = (uint64_t)a.mq_maxmsg;
	head[1] = (uint64_t)a.mq_msgsize;
	head[2] = len;
	memcpy(p, head, sizeof(head));
	memcpy(p + CK__PMQ_HEAD, name, len);
	used = CK__PMQ_HEAD + len;
	for (long k = 0; k < a.mq_curmsgs; k++) {
		unsigned prio = 0;
		long got = syscall(SYS_mq_timedreceive, q, p + used + 16, (size_t)a.mq_msgsize, &prio, NULL);
		uint64_t l = (uint64_t)got, pr = prio;

		if (got < 0) {
			err = errno; /* the ones taken go back first */
			break;
		}
		memcpy(p + used, &l, 8);
		memcpy(p + used + 8, &pr, 8);
		used += 16 + (size_t)got;
	}
	if (ck__send_all(q, p, CK__PMQ_HEAD + len, used) < 0) {
		r = ck_ipc_failed(v, CK_IPC_E_PMQSEND, 0);
		goto out;
	}
	if (err) {
		errno = err;
		r = ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
		goto out;
	}
	s->x.mode = st.st_mode & 0777;
	s->x.uid = st.st_uid;
	s->x.gid = st.st_gid;
	s->x.size = used;
	s->dev = st.st_dev;
out:
	close(q);
	return r;
}

int ck_pmq_list(struct ck_ipc_visit *v)
{
	char buf[4096];
	long n;

	if (v->mq_dir == -1)
		ck_pmq_mount(v);
	if (v->mq_dir < 0)
		return 0;
	if (lseek(v->mq_dir, 0, SEEK_SET) < 0)
		return ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
	while ((n = syscall(SYS_getdents64, v->mq_dir, buf, sizeof(buf))) > 0)
		for (long at = 0; at < n;) {
			struct dirent64 *e = (struct dirent64 *)(void *)(buf + at);

			at += e->d_reclen;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (v->total++ >= v->cap)
				continue; /* counted: ckrun comes again with room */
			if (ck__take(v, e->d_name))
				return 1;
		}
	if (n < 0)
		return ck_ipc_failed(v, CK_IPC_E_PMQREAD, 0);
	return 0;
}

/* A queue beyond the namespace's limits (the job, root in it, may have
 * raised them; they are not saved) takes them raised as far as it needs. */
static void ck__raise(const char *file, uint64_t need)
{
	int64_t now = ck_ipc_read_num(file);

	if (now >= 0 && need > (uint64_t)now && need <= UINT32_MAX)
		ck_ipc_write_num(file, (uint32_t)need);
}

int ck_pmq_make(struct ck_ipc_visit *v, struct ck_ipc_obj *s)
{
	const char *p = s->addr;
	uint64_t head[3];
	struct mq_attr a;
	int q;

	memset(&a, 0, sizeof(a));
	v->name[0] = 0;
	if (s->x.size < CK__PMQ_HEAD || (memcpy(head, p, sizeof(head)), head[2] == 0) ||
	    head[2] >= sizeof(v->name) || head[2] > s->x.size - CK__PMQ_HEAD || head[0] > INT32_MAX ||
	    head[1] > INT32_MAX || memchr(p + CK__PMQ_HEAD, '/', head[2]) || memchr(p + CK__PMQ_HEAD, 0, head[2])) {
		errno = EBADMSG;
		return ck_ipc_failed(v, CK_IPC_E_PMQMAKE, 0);
	}
	ck__name(v, p + CK__PMQ_HEAD, head[2]);
	a.mq_maxmsg = (long)head[0];
	a.mq_msgsize = (long)head[1];
	q = (int)syscall(SYS_mq_open, v->name, O_CREAT | O_EXCL | O_RDWR | O_NONBLOCK | O_CLOEXEC, 0600, &a);
	if (q < 0 && errno == EINVAL) {
		ck__raise("/proc/sys/fs/mqueue/msg_max", head[0]);
		ck__raise("/proc/sys/fs/mqueue/msgsize_max", head[1]);
		q = (int)syscall(SYS_mq_open, v->name, O_CREAT | O_EXCL | O_RDWR | O_NONBLOCK | O_CLOEXEC, 0600, &a);
	}
	if (q < 0)
		return ck_ipc_failed(v, CK_IPC_E_PMQMAKE, 0);
	if (ck__send_all(q, p, CK__PMQ_HEAD + head[2], s->x.size) < 0) {
		ck_ipc_failed(v, CK_IPC_E_PMQSEND, 0);
		close(q);
		return 1;
	}
	/* the mode after the owner: a mode without write for its owner would
	 * not stop us, but chown clears nothing here either way */
	if (fchown(q, s->x.uid, s->x.gid) < 0 || fchmod(q, s->x.mode & 0777) < 0) {
		ck_ipc_failed(v, CK_IPC_E_PMQMAKE, 0);
		close(q);
		return 1;
	}
	close(q);
	return 0;
}

int ck_pmq_open(struct ck_ipc_visit *v)
{
	v->got = (int32_t)syscall(SYS_mq_open, v->name, v->mq_flags | O_CLOEXEC, 0, NULL);
	if (v->got < 0)
		return ck_ipc_failed(v, CK_IPC_E_PMQOPEN, 0);
	return 0;
}

/* ---- in ckrun ---- */

int ck_pmq_say(const struct ck_ipc_visit *v)
{
	const char *e = strerror(v->err);

	switch (v->fail) {
	case CK_IPC_E_PMQNOTIFY:
		ck_err_set("POSIX message queue /%s of the job has a notification registered (mq_notify) and messages "
			   "queued, which a checkpoint would send by taking them: not supported (try again once the job "
			   "has read them)",
			   v->name);
		return 1;
	case CK_IPC_E_PMQTHREAD:
		ck_err_set("POSIX message queue /%s of the job has a notification registered to start a thread "
			   "(mq_notify, SIGEV_THREAD: the C library's own socket and thread): not supported",
			   v->name);
		return 1;
	case CK_IPC_E_PMQREAD: ck_err_set("cannot read POSIX message queue /%s of the job: %s", v->name, e); return 1;
	case CK_IPC_E_PMQSEND:
		ck_err_set("cannot put the messages back into POSIX message queue /%s: %s", v->name, e);
		return 1;
	case CK_IPC_E_PMQMAKE: ck_err_set("cannot make POSIX message queue /%s again: %s", v->name, e); return 1;
	case CK_IPC_E_PMQOPEN: ck_err_set("cannot open POSIX message queue /%s again: %s", v->name, e); return 1;
	}
	return 0;
}

/* The saved queue a descriptor names, or NULL. */
static const struct ck_ipc_obj *ck__queue_of(const struct ck_ipc_obj *seg, size_t n, const struct ck_pd_fd *f)
{
	size_t len = strlen(f->path + 1);

	for (size_t j = 0; j < n; j++) {
		const char *p = seg[j].addr;
		uint64_t head[3];

		if (!(seg[j].x.flags & CK_SYSV_PMQ) || !p || seg[j].dev != f->dev)
			continue;
		memcpy(head, p, sizeof(head));
		if (head[2] == len && !memcmp(p + CK__PMQ_HEAD, f->path + 1, len))
			return &seg[j];
	}
	return NULL;
}

/* A queue's notification: the registering process's latest note of it
 * (libckpt/mqnotify.c) that says what the kernel says is marked for its
 * restore to register again. */
static int ck__notify_keep(struct ckrun *c, const struct ck_ipc_obj *seg, size_t n, const struct ck_ipc_obj *q)
{
	const char *name = (const char *)q->addr + CK__PMQ_HEAD;
	uint64_t len;
	struct ck_pd_fd *best = NULL;
	size_t i;

	memcpy(&len, (const char *)q->addr + 16, 8);
	for (i = 0; i < c->nprocs && c->procs[i].pid != q->notify_pid; i++)
		;
	if (i == c->nprocs) {
		ck_err_set("POSIX message queue /%.*s of the job has a notification registered (mq_notify) by process %d, "
			   "which is not one of the job's: not supported",
			   (int)len, name, q->notify_pid);
		return -ENOTSUP;
	}
	for (uint32_t k = 0; k < c->procs[i].pd->nfds; k++) {
		struct ck_pd_fd *f = &c->procs[i].pd->fds[k];
		uint32_t how = (uint32_t)f->u64[1], sig = (uint32_t)(f->u64[1] >> 32);

		if (f->kind != CK_FD_MQUEUE || !(f->xflags & CK_PD_FD_MQ_NOTE) || ck__queue_of(seg, n, f) != q ||
		    how != (uint32_t)q->notify || (how == SIGEV_SIGNAL && sig != (uint32_t)q->signo))
			continue;
		if (!best || f->u64[2] > best->u64[2])
			best = f;
	}
	if (!best) {
		ck_err_set("process %d: POSIX message queue /%.*s has a notification (mq_notify) it registered through a "
			   "call libckpt did not see (a bare system call, or before an exec): it could not be made again: "
			   "not supported",
			   (int)c->procs[i].pd->pid, (int)len, name);
		return -ENOTSUP;
	}
	best->xflags |= CK_PD_FD_MQ_NOTIFY;
	return 0;
}

int ck_pmq_check_fds(struct ckrun *c, const struct ck_ipc_obj *seg, size_t n, int listed)
{
	int r;

	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;

		for (uint32_t k = 0; k < pd->nfds; k++) {
			struct ck_pd_fd *f = &pd->fds[k];

			f->xflags &= ~CK_PD_FD_MQ_NOTIFY;
			if (f->kind != CK_FD_MQUEUE || ck__queue_of(seg, n, f))
				continue;
			if (!listed)
				ck_err_set("process %d: descriptor %d: POSIX message queue %s cannot be saved: the job's "
					   "mqueue file system could not be mounted to read it", (int)pd->pid, f->fd, f->path);
			else
				ck_err_set("process %d: descriptor %d: POSIX message queue %s is not one of the job's IPC "
					   "namespace: not supported", (int)pd->pid, f->fd, f->path);
			return -ENOTSUP;
		}
	}
	for (size_t j = 0; j < n; j++)
		if ((seg[j].x.flags & CK_SYSV_PMQ) && seg[j].addr && seg[j].notify_pid &&
		    (r = ck__notify_keep(c, seg, n, &seg[j])) < 0)
			return r;
	return 0;
}

int ck_mqueue_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	struct ck_ipc_visit v;
	int r;

	(void)rd;
	*fd = -1;
	memset(&v, 0, sizeof(v));
	v.what = CK_IPC_OPENMQ;
	v.mq_dir = -2;
	if (f->path[0] != '/' || strchr(f->path + 1, '/') || strlen(f->path + 1) >= sizeof(v.name)) {
		ck_err_set("descriptor %d: %s is not the name of a POSIX message queue", f->fd, f->path);
		return -EBADMSG;
	}
	ck__name(&v, f->path + 1, strlen(f->path + 1));
	v.mq_flags = f->flags & (O_ACCMODE | O_NONBLOCK);
	if (!o->c)
		return -EINVAL;
	if ((r = ck_ipc_run(o->c, &v)) < 0) {
		ck_err_wrap("descriptor %d", f->fd);
		return r;
	}
	*fd = v.got;
	return 0;
}

int ck_mqueue_notify_give(pid_t pid, const struct ck_proc *p, const struct ck_procdesc *pd)
{
	for (uint32_t k = 0; k < pd->nfds; k++) {
		const struct ck_pd_fd *f = &pd->fds[k];
		uint64_t at = p->restart_arg + offsetof(struct ck_procdesc, fds) + k * sizeof(*f) +
			      offsetof(struct ck_pd_fd, xflags);
		int r;

		if (f->kind != CK_FD_MQUEUE || !(f->xflags & CK_PD_FD_MQ_NOTIFY))
			continue;
		if ((r = ck_mem_write(pid, at, &f->xflags, sizeof(f->xflags))) < 0) {
			ck_err_set("cannot give process %d its notification of POSIX message queue %s: %s", p->pid,
				   f->path, strerror(-r));
			return r;
		}
	}
	return 0;
}
