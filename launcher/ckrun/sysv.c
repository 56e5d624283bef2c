/* System V shared memory of the job. The job has an IPC namespace of its
 * own (ns.c), so its segments are its alone and their ids can be made
 * again: at a checkpoint every segment is read once (a thread of ckrun
 * joins the job's IPC namespace and attaches it read-only); at a restore
 * each is created with its id (shm_next_id), key, mode, owner and bytes
 * before any process maps it, and the ones the job had marked for removal
 * are removed once every process has attached them again. Semaphores and
 * message queues are refused. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <unistd.h>

#include "launcher/chunkio.h"
#include "launcher/ck_err.h"
#include "launcher/ckrun/ckrun.h"

enum { CK__SAVE, CK__MAKE, CK__REMOVE };

struct ck__sysv_job {
	int what;
	pid_t ns_of;
	struct ck_writer *w;
	struct ck_reader *rd;
	struct ck_manifest *m;
	int r;
	char err[512];
};

static int ck__rows(const char *path)
{
	char line[512];
	int n = -1; /* the header */
	FILE *f = fopen(path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n++;
	fclose(f);
	return n > 0 ? n : 0;
}

static int ck__save(struct ck__sysv_job *j)
{
	char line[512];
	FILE *f;
	int r = 0;

	if (ck__rows("/proc/sysvipc/sem") || ck__rows("/proc/sysvipc/msg")) {
		snprintf(j->err, sizeof(j->err), "the job has System V semaphores or message queues: not supported yet");
		return -ENOTSUP;
	}
	if (!(f = fopen("/proc/sysvipc/shm", "re")))
		return 0;
	if (!fgets(line, sizeof(line), f)) { /* header */
		fclose(f);
		return 0;
	}
	while (r == 0 && fgets(line, sizeof(line), f)) {
		struct shmid_ds ds;
		struct ck_sysv_shm *x;
		int key, id;
		void *p;
		if (sscanf(line, "%d %d", &key, &id) != 2 || shmctl(id, IPC_STAT, &ds) < 0)
			continue;
		x = realloc(j->m->shms, (j->m->nshms + 1) * sizeof(*x));
		if (!x) {
			r = -ENOMEM;
			break;
		}
		j->m->shms = x;
		x += j->m->nshms;
		memset(x, 0, sizeof(*x));
		x->id = id;
		x->key = ds.shm_perm.__key;
		x->mode = ds.shm_perm.mode & 0777;
		x->flags = (ds.shm_perm.mode & SHM_DEST) ? CK_SYSV_DEST : 0;
		x->uid = ds.shm_perm.uid;
		x->gid = ds.shm_perm.gid;
		x->size = ds.shm_segsz;
		p = shmat(id, NULL, SHM_RDONLY);
		if (p == (void *)-1) {
			snprintf(j->err, sizeof(j->err), "cannot read System V shared memory segment %d: %s", id,
				 strerror(errno));
			r = -errno;
			break;
		}
		r = ck_writer_add(j->w, x->size, ck_mem_src, p, &x->first_chunk, &x->nchunks);
		shmdt(p);
		j->m->nshms++;
	}
	fclose(f);
	return r;
}

static int ck__make(struct ck__sysv_job *j)
{
	for (size_t i = 0; i < j->m->nshms; i++) {
		const struct ck_sysv_shm *x = &j->m->shms[i];
		struct shmid_ds ds;
		char v[32];
		int fd = open("/proc/sys/kernel/shm_next_id", O_WRONLY | O_CLOEXEC), id, r;
		void *p;
		snprintf(v, sizeof(v), "%d", x->id);
		if (fd < 0 || write(fd, v, strlen(v)) < 0) {
			snprintf(j->err, sizeof(j->err), "cannot ask for System V segment id %d (shm_next_id): %s", x->id,
				 strerror(errno));
			if (fd >= 0)
				close(fd);
			return -errno;
		}
		close(fd);
		id = shmget((x->flags & CK_SYSV_DEST) ? IPC_PRIVATE : x->key, x->size, IPC_CREAT | IPC_EXCL | 0600);
		if (id != x->id) {
			snprintf(j->err, sizeof(j->err), "cannot re-create System V segment %d (got %d): %s", x->id, id,
				 id < 0 ? strerror(errno) : "another id");
			return id < 0 ? -errno : -EEXIST;
		}
		p = shmat(id, NULL, 0);
		if (p == (void *)-1) {
			snprintf(j->err, sizeof(j->err), "cannot fill System V segment %d: %s", id, strerror(errno));
			return -errno;
		}
		r = x->nchunks ? ck_reader_read(j->rd, x->first_chunk, x->nchunks, ck_mem_sink, p) : 0;
		shmdt(p);
		if (r < 0)
			return r;
		memset(&ds, 0, sizeof(ds));
		if (shmctl(id, IPC_STAT, &ds) == 0) {
			ds.shm_perm.uid = x->uid;
			ds.shm_perm.gid = x->gid;
			ds.shm_perm.mode = (unsigned short)x->mode;
			shmctl(id, IPC_SET, &ds);
		}
	}
	return 0;
}

static void *ck__thread(void *arg)
{
	struct ck__sysv_job *j = arg;
	char path[64];
	int fd;

	/* setns changes this thread only: the rest of ckrun stays outside */
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", j->ns_of);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWIPC) < 0) {
		snprintf(j->err, sizeof(j->err), "cannot enter the job's IPC namespace: %s", strerror(errno));
		j->r = -errno;
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	close(fd);
	if (j->what == CK__SAVE)
		j->r = ck__save(j);
	else if (j->what == CK__MAKE)
		j->r = ck__make(j);
	else
		for (size_t i = 0; i < j->m->nshms; i++)
			if (j->m->shms[i].flags & CK_SYSV_DEST)
				shmctl(j->m->shms[i].id, IPC_RMID, NULL);
	return NULL;
}

static int ck__run(struct ckrun *c, int what, struct ck_writer *w, struct ck_reader *rd, struct ck_manifest *m)
{
	struct ck__sysv_job j = {what, c->init_pid, w, rd, m, 0, ""};
	pthread_t t;

	if (pthread_create(&t, NULL, ck__thread, &j) != 0)
		return -EAGAIN;
	pthread_join(t, NULL);
	if (j.r < 0 && j.err[0])
		ck_err_set("%s", j.err);
	return j.r;
}

int ck_sysv_save(struct ckrun *c, struct ck_writer *w, struct ck_manifest *m)
{
	return ck__run(c, CK__SAVE, w, NULL, m);
}

int ck_sysv_make(struct ckrun *c, struct ck_reader *rd, struct ck_manifest *m)
{
	return m->nshms ? ck__run(c, CK__MAKE, NULL, rd, m) : 0;
}

int ck_sysv_remove_marked(struct ckrun *c, struct ck_manifest *m)
{
	return m->nshms ? ck__run(c, CK__REMOVE, NULL, NULL, m) : 0;
}
