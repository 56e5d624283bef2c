/* System V shared memory of the job. The job has an IPC namespace of its
 * own (ns.c), so its segments are its alone and their ids can be made
 * again: at a checkpoint every segment is read once (attached read-only);
 * at a restore each is created with its id (shm_next_id), key, mode, owner
 * and bytes before any process maps it, and the ones the job had marked for
 * removal are removed once every process has attached them again.
 * Message queues likewise: their messages copied at the checkpoint
 * (msgrcv MSG_COPY, which leaves them queued), each queue made again with
 * its id (msg_next_id), key, size limit, owner and mode, and its messages
 * sent again in order. Semaphore sets: sem_sysv.c. POSIX message queues:
 * mq_posix.c, through the same helper.
 *
 * Entering the job's IPC namespace takes CAP_SYS_ADMIN over it and in
 * one's own user namespace: root has both; a user has them only inside
 * the job's user namespace, which a multithreaded process cannot join.
 * So a helper does it: a child sharing ckrun's memory and descriptors
 * (CLONE_VM, CLONE_FILES; ckrun's thread waits, CLONE_VFORK) joins the job's user namespace where the job
 * has one, then its IPC namespace, makes or attaches the segments and
 * exits. Attachments belong to the memory, not the task: ckrun's thread
 * then reads or fills them and detaches them itself. The helper makes
 * only system calls (no allocation, no stdio, no strerror): the rest of
 * ckrun runs meanwhile. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/image/chunkio.h"
#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/ipcns.h"

int ck_ipc_failed(struct ck_ipc_visit *v, int what, int32_t id)
{
	v->fail = what;
	v->err = errno;
	v->id = id;
	return 1;
}

struct ck_ipc_obj *ck_ipc_slot(struct ck_ipc_visit *v, int32_t id, const struct ipc_perm *perm, uint32_t flags)
{
	struct ck_ipc_obj *s;

	if (v->total++ >= v->cap)
		return NULL;
	s = &v->seg[v->n];
	memset(s, 0, sizeof(*s));
	s->x.id = id;
	s->x.key = perm->__key;
	s->x.mode = perm->mode & 0777;
	s->x.flags = flags;
	s->x.uid = perm->uid;
	s->x.gid = perm->gid;
	return s;
}

static int ck__list(struct ck_ipc_visit *v)
{
	struct msginfo mi;
	struct shm_info inf;
	int max;

	if (ck_sem_list(v))
		return 1;
	max = shmctl(0, SHM_INFO, (struct shmid_ds *)(void *)&inf);
	for (int idx = 0; idx <= max; idx++) {
		struct shmid_ds ds;
		struct ck_ipc_obj *s;
		int id = shmctl(idx, SHM_STAT, &ds); /* an index in, the id out */
		if (id < 0)
			continue;
		s = ck_ipc_slot(v, id, &ds.shm_perm, (ds.shm_perm.mode & SHM_DEST) ? CK_SYSV_DEST : 0);
		if (!s)
			continue;
		s->x.size = ds.shm_segsz;
		s->addr = shmat(id, NULL, SHM_RDONLY);
		if (s->addr == (void *)-1)
			return ck_ipc_failed(v, CK_IPC_E_READ, id);
		v->n++;
	}
	max = msgctl(0, MSG_INFO, (struct msqid_ds *)(void *)&mi);
	for (int idx = 0; idx <= max; idx++) {
		struct msqid_ds ds;
		struct ck_ipc_obj *s;
		size_t used = 0;
		char *p;
		int id = msgctl(idx, MSG_STAT, &ds);
		if (id < 0)
			continue;
		s = ck_ipc_slot(v, id, &ds.msg_perm, CK_SYSV_MSG);
		if (!s)
			continue;
		if (ds.msg_qbytes > UINT32_MAX) { /* root's: the record holds 32 bits */
			errno = EOVERFLOW;
			return ck_ipc_failed(v, CK_IPC_E_MSGBIG, id);
		}
		s->x.pad = (uint32_t)ds.msg_qbytes;
		s->maplen = ds.__msg_cbytes + (ds.msg_qnum + 1) * 16;
		s->addr = mmap(NULL, s->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s->addr == MAP_FAILED) {
			s->addr = NULL;
			return ck_ipc_failed(v, CK_IPC_E_MSGREAD, id);
		}
		v->n++;
		/* each: its length, then its type and bytes as msgrcv gives them */
		p = s->addr;
		for (msgqnum_t k = 0; k < ds.msg_qnum; k++) {
			ssize_t n = msgrcv(id, p + used + 8, s->maplen - used - 16, (long)k, IPC_NOWAIT | MSG_COPY);
			uint64_t len = (uint64_t)n;
			if (n < 0)
				return ck_ipc_failed(v, CK_IPC_E_MSGREAD, id);
			memcpy(p + used, &len, 8);
			used += 16 + (size_t)n;
		}
		s->x.size = used;
	}
	return ck_pmq_list(v);
}

/* The next System V object of its kind made in this namespace gets id. */
int ck_ipc_write_num(const char *file, uint32_t u)
{
	char num[16];
	int fd, k = 0, r = 0;

	do /* decimal, backwards */
		num[sizeof(num) - 1 - ++k] = (char)('0' + u % 10);
	while ((u /= 10) && k < 12);
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, num + sizeof(num) - 1 - k, (size_t)k) < 0)
		r = -1;
	if (fd >= 0)
		close(fd);
	return r;
}

static int ck__next_id(const char *file, int32_t id)
{
	return ck_ipc_write_num(file, (uint32_t)id);
}

/* A size limit above the namespace's msgmnb takes CAP_SYS_RESOURCE in the
 * initial namespace (every IPC_SET checks it, a mode-only one too), a
 * message above its msgmax is refused: where the job had raised them in
 * its namespace (their values are not saved), the new one's are raised as
 * far as its queues need, and stay so for the job. */
int64_t ck_ipc_read_num(const char *file)
{
	char b[24];
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
	int64_t v = 0;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	for (ssize_t i = 0; i < n && b[i] >= '0' && b[i] <= '9'; i++)
		v = v * 10 + (b[i] - '0');
	return v;
}

static int ck__msg_fit(int id, struct msqid_ds *ds, uint64_t qbytes)
{
	ds->msg_qbytes = (msglen_t)qbytes;
	if (msgctl(id, IPC_SET, ds) == 0)
		return 0;
	if (errno != EPERM || ck_ipc_write_num("/proc/sys/kernel/msgmnb", (uint32_t)qbytes) < 0)
		return -1;
	return msgctl(id, IPC_SET, ds);
}

/* A message queue with its id and messages, then its size limit, owner
 * and mode (a limit the job lowered below what it holds, or a mode, would
 * forbid our sending). */
static int ck__make_queue(struct ck_ipc_visit *v, struct ck_ipc_obj *s)
{
	struct msqid_ds ds;
	const char *p = s->addr;
	size_t used = 0;
	int64_t msgmax = -1;
	int id;

	if (ck__next_id("/proc/sys/kernel/msg_next_id", s->x.id) < 0)
		return ck_ipc_failed(v, CK_IPC_E_NEXTID, s->x.id);
	id = msgget(s->x.key, IPC_CREAT | IPC_EXCL | 0600);
	if (id != s->x.id) {
		if (id >= 0)
			errno = EEXIST;
		v->got = id;
		return ck_ipc_failed(v, CK_IPC_E_MAKE, s->x.id);
	}
	memset(&ds, 0, sizeof(ds));
	if (msgctl(id, IPC_STAT, &ds) < 0)
		return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	{ /* room to send them all: their bytes and their count (msg_fits) */
		uint64_t room = s->x.pad, biggest = 0, bytes = 0, n = 0;
		for (size_t at = 0; at + 16 <= s->x.size; n++) {
			uint64_t len;
			memcpy(&len, p + at, 8);
			biggest = len > biggest ? len : biggest;
			bytes += len;
			at += 16 + (len < s->x.size ? len : s->x.size);
		}
		room = bytes > room ? bytes : room;
		room = n > room ? n : room;
		msgmax = ck_ipc_read_num("/proc/sys/kernel/msgmax");
		if ((int64_t)biggest > msgmax && biggest > 8192)
			ck_ipc_write_num("/proc/sys/kernel/msgmax", (uint32_t)biggest);
		if (room > ds.msg_qbytes && ck__msg_fit(id, &ds, room) < 0)
			return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	}
	while (used < s->x.size) {
		uint64_t len = 0;
		if (s->x.size - used < 16 || (memcpy(&len, p + used, 8), len > s->x.size - used - 16)) {
			errno = EBADMSG;
			ck_ipc_failed(v, CK_IPC_E_MSGSEND, id);
			break;
		}
		if (msgsnd(id, p + used + 8, len, IPC_NOWAIT) < 0) {
			ck_ipc_failed(v, CK_IPC_E_MSGSEND, id);
			break;
		}
		used += 16 + len;
	}
	if (v->fail != CK_IPC_OK)
		return 1;
	if (msgctl(id, IPC_STAT, &ds) < 0)
		return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	ds.msg_perm.uid = s->x.uid;
	ds.msg_perm.gid = s->x.gid;
	ds.msg_perm.mode = (unsigned short)s->x.mode;
	if (ck__msg_fit(id, &ds, s->x.pad) < 0)
		return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	return 0;
}

static int ck__make(struct ck_ipc_visit *v)
{
	for (; v->n < v->cap; v->n++) {
		struct ck_ipc_obj *s = &v->seg[v->n];
		struct shmid_ds ds;
		int id;

		if (s->x.flags & CK_SYSV_MSG) {
			if (ck__make_queue(v, s))
				return 1;
			continue;
		}
		if (s->x.flags & CK_SYSV_PMQ) {
			if (ck_pmq_make(v, s))
				return 1;
			continue;
		}
		if (s->x.flags & CK_SYSV_SEM) {
			if (ck_sem_make(v, s))
				return 1;
			continue;
		}
		if (ck__next_id("/proc/sys/kernel/shm_next_id", s->x.id) < 0)
			return ck_ipc_failed(v, CK_IPC_E_NEXTID, s->x.id);
		id = shmget((s->x.flags & CK_SYSV_DEST) ? IPC_PRIVATE : s->x.key, s->x.size, IPC_CREAT | IPC_EXCL | 0600);
		if (id != s->x.id) {
			if (id >= 0)
				errno = EEXIST;
			v->got = id;
			return ck_ipc_failed(v, CK_IPC_E_MAKE, s->x.id);
		}
		s->addr = shmat(id, NULL, 0);
		if (s->addr == (void *)-1)
			return ck_ipc_failed(v, CK_IPC_E_FILL, id);
		memset(&ds, 0, sizeof(ds));
		if (shmctl(id, IPC_STAT, &ds) == 0) {
			ds.shm_perm.uid = s->x.uid;
			ds.shm_perm.gid = s->x.gid;
			ds.shm_perm.mode = (unsigned short)s->x.mode;
			shmctl(id, IPC_SET, &ds);
		}
	}
	return 0;
}

static int ck__helper(void *arg)
{
	struct ck_ipc_visit *v = arg;

	if (v->userfd >= 0 && setns(v->userfd, CLONE_NEWUSER) < 0)
		return ck_ipc_failed(v, CK_IPC_E_USERNS, 0);
	if (setns(v->ipcfd, CLONE_NEWIPC) < 0)
		return ck_ipc_failed(v, CK_IPC_E_IPCNS, 0);
	if (v->what == CK_IPC_LIST)
		return ck__list(v);
	if (v->what == CK_IPC_MAKE)
		return ck__make(v);
	if (v->what == CK_IPC_OPENMQ)
		return ck_pmq_open(v);
	for (size_t i = 0; i < v->cap; i++)
		if (v->seg[i].x.flags & CK_SYSV_DEST)
			shmctl(v->seg[i].x.id, IPC_RMID, NULL);
	return 0;
}

static void ck__say(const struct ck_ipc_visit *v)
{
	const char *e = strerror(v->err);

	if (ck_pmq_say(v))
		return;
	switch (v->fail) {
	case CK_IPC_E_USERNS: ck_err_set("cannot enter the job's user namespace (for its IPC namespace): %s", e); break;
	case CK_IPC_E_IPCNS: ck_err_set("cannot enter the job's IPC namespace: %s", e); break;
	case CK_IPC_E_SEMREAD: ck_err_set("cannot read System V semaphore set %d: %s", v->id, e); break;
	case CK_IPC_E_READ: ck_err_set("cannot read System V shared memory segment %d: %s", v->id, e); break;
	case CK_IPC_E_MSGREAD: ck_err_set("cannot copy the messages of System V message queue %d: %s", v->id, e); break;
	case CK_IPC_E_MSGBIG:
		ck_err_set("System V message queue %d has a size limit (msg_qbytes) above 4 GiB: not supported", v->id);
		break;
	case CK_IPC_E_NEXTID: ck_err_set("cannot ask for System V object id %d (shm_next_id, msg_next_id): %s", v->id, e); break;
	case CK_IPC_E_MAKE:
		ck_err_set("cannot re-create System V object %d (got %d): %s", v->id, v->got,
			   v->got >= 0 ? "another id" : e);
		break;
	case CK_IPC_E_FILL: ck_err_set("cannot fill or set System V object %d: %s", v->id, e); break;
	case CK_IPC_E_MSGSEND: ck_err_set("cannot put the messages back into System V message queue %d: %s", v->id, e); break;
	}
}

int ck_ipc_run(struct ckrun *c, struct ck_ipc_visit *v)
{
	const size_t stack_len = 256 << 10;
	char path[64];
	struct stat job_ns, our_ns;
	void *stack = MAP_FAILED;
	int st, r = 0;
	pid_t kid;

	v->userfd = v->ipcfd = -1;
	v->fail = CK_IPC_OK;
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", c->init_pid);
	if ((v->ipcfd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		r = -errno;
		ck_err_set("cannot open the job's IPC namespace (%s): %s", path, strerror(errno));
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", c->init_pid);
	if (c->userns) {
		if ((v->userfd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(v->userfd, &job_ns) < 0 ||
		    stat("/proc/self/ns/user", &our_ns) < 0) {
			r = -errno;
			ck_err_set("cannot open the job's user namespace (%s): %s", path, strerror(errno));
			goto out;
		}
		if (job_ns.st_ino == our_ns.st_ino && job_ns.st_dev == our_ns.st_dev) {
			close(v->userfd); /* ours already */
			v->userfd = -1;
		}
	}
	stack = mmap(NULL, stack_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED) {
		r = -errno;
		goto out;
	}
	/* no exit signal: ckrun's SIGCHLD means the job; reaped right here */
	kid = clone(ck__helper, (char *)stack + stack_len, CLONE_VM | CLONE_VFORK | CLONE_FILES, v);
	if (kid < 0) {
		r = -errno;
		ck_err_set("cannot start the helper for the job's IPC namespace: %s", strerror(errno));
		goto out;
	}
	while (waitpid(kid, &st, __WALL) < 0)
		if (errno != EINTR) {
			r = -errno;
			goto out;
		}
	if (v->fail != CK_IPC_OK) {
		ck__say(v);
		r = v->err ? -v->err : -ENOTSUP;
		if (v->fail == CK_IPC_E_MSGBIG)
			r = -ENOTSUP;
	} else if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		ck_err_set("the helper for the job's IPC namespace failed (status %d)", st);
		r = -EIO;
	}
out:
	if (stack != MAP_FAILED)
		munmap(stack, stack_len);
	if (v->ipcfd >= 0)
		close(v->ipcfd);
	if (v->userfd >= 0)
		close(v->userfd);
	return r;
}

/* Segments detached, queues' copies unmapped (checkpoint) or freed
 * (restore). */
static void ck__detach(struct ck_ipc_obj *seg, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!seg[i].addr || seg[i].addr == (void *)-1)
			continue;
		if (!(seg[i].x.flags & (CK_SYSV_MSG | CK_SYSV_PMQ | CK_SYSV_SEM)))
			shmdt(seg[i].addr);
		else if (seg[i].maplen)
			munmap(seg[i].addr, seg[i].maplen);
		else
			free(seg[i].addr);
		seg[i].addr = NULL;
	}
}

int ck_sysv_save(struct ckrun *c, struct ck_writer *w, struct ck_manifest *m)
{
	/* the mqueue file system mounted for the job's IPC namespace (-1:
	 * none yet, -2: it could not be), and which namespace it is for (a
	 * restore makes another) */
	static int mq_dir = -1, mq_said;
	static ino_t mq_ns;
	struct ck_ipc_obj *seg = NULL;
	struct ck_ipc_visit v;
	char path[64];
	struct stat ns;
	size_t cap = 16;
	int r;

	memset(&v, 0, sizeof(v));
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", c->init_pid);
	if (stat(path, &ns) < 0)
		ns.st_ino = 0;
	if (mq_dir != -1 && ns.st_ino != mq_ns) {
		if (mq_dir >= 0)
			close(mq_dir);
		mq_dir = -1;
	}
	for (;;) {
		struct ck_ipc_obj *more = realloc(seg, cap * sizeof(*seg));
		if (!more) {
			r = -ENOMEM;
			goto out;
		}
		seg = more;
		memset(&v, 0, sizeof(v));
		v.what = CK_IPC_LIST;
		v.seg = seg;
		v.cap = cap;
		v.mq_dir = mq_dir;
		r = ck_ipc_run(c, &v);
		if (mq_dir == -1 && (v.mq_dir >= 0 || v.mq_unseen)) { /* mounted now, or it cannot be */
			mq_dir = v.mq_dir >= 0 ? v.mq_dir : -2;
			mq_ns = ns.st_ino;
			if (v.mq_unseen && c->verbose && !mq_said) {
				fprintf(stderr, "ckrun: cannot look for POSIX message queues in the job's IPC namespace "
					"(a mount of its mqueue file system: %s): a queue it makes is not refused, and "
					"missing after a restore\n", strerror(v.mq_unseen));
				mq_said = 1;
			}
		}
		if (r < 0 || v.total <= cap)
			break;
		ck__detach(seg, v.n); /* more than there was room for */
		cap = v.total + 16;
	}
	if (r < 0)
		goto out;
	if ((r = ck_pmq_check_fds(c, seg, v.n, mq_dir >= 0)) < 0 || (r = ck_semundo_check(c, seg, v.n)) < 0)
		goto out;
	if (v.n && !(m->shms = calloc(v.n, sizeof(*m->shms)))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < v.n && r == 0; i++) {
		struct ck_sysv_shm *x = &m->shms[m->nshms++];
		*x = seg[i].x;
		r = ck_writer_add(w, x->size, ck_mem_src, seg[i].addr, &x->first_chunk, &x->nchunks);
	}
out:
	if (seg)
		ck__detach(seg, v.n);
	free(seg);
	return r;
}

int ck_sysv_make(struct ckrun *c, struct ck_reader *rd, struct ck_manifest *m)
{
	struct ck_ipc_visit v;
	struct ck_ipc_obj *seg;
	int r;

	if (!m->nshms)
		return 0;
	if (!(seg = calloc(m->nshms, sizeof(*seg))))
		return -ENOMEM;
	r = 0;
	for (size_t i = 0; i < m->nshms; i++) {
		seg[i].x = m->shms[i];
		/* a queue's messages, for the helper to send; a set's values */
		if (r == 0 && (seg[i].x.flags & (CK_SYSV_MSG | CK_SYSV_PMQ | CK_SYSV_SEM))) {
			if (!(seg[i].addr = malloc(seg[i].x.size + 1)))
				r = -ENOMEM;
			else if (seg[i].x.nchunks)
				r = ck_reader_read(rd, seg[i].x.first_chunk, seg[i].x.nchunks, ck_mem_sink, seg[i].addr);
		}
	}
	memset(&v, 0, sizeof(v));
	v.what = CK_IPC_MAKE;
	v.seg = seg;
	v.cap = m->nshms;
	if (r == 0)
		r = ck_ipc_run(c, &v);
	for (size_t i = 0; r == 0 && i < v.n; i++)
		if (seg[i].x.nchunks && !(seg[i].x.flags & (CK_SYSV_MSG | CK_SYSV_PMQ | CK_SYSV_SEM)))
			r = ck_reader_read(rd, seg[i].x.first_chunk, seg[i].x.nchunks, ck_mem_sink, seg[i].addr);
	ck__detach(seg, m->nshms);
	free(seg);
	return r;
}

int ck_sysv_remove_marked(struct ckrun *c, struct ck_manifest *m)
{
	struct ck_ipc_visit v;
	struct ck_ipc_obj *seg;
	int r;

	if (!m->nshms)
		return 0;
	if (!(seg = calloc(m->nshms, sizeof(*seg))))
		return -ENOMEM;
	for (size_t i = 0; i < m->nshms; i++)
		seg[i].x = m->shms[i];
	memset(&v, 0, sizeof(v));
	v.what = CK_IPC_REMOVE;
	v.seg = seg;
	v.cap = m->nshms;
	r = ck_ipc_run(c, &v);
	free(seg);
	return r;
}
