/* System V semaphore sets of the job (its own IPC namespace, shm_sysv.c).
 *
 * Checkpoint: the helper lists every set (SEM_STAT) and reads its values
 * (GETALL) into a mapping it makes (it may not allocate); the record holds
 * id, key, owner, mode, the number of semaphores (pad) and the values
 * (u16 each). Restore: the set made with its id (sem_next_id), its values
 * set (SETALL), then its owner and mode.
 *
 * What each process's exit adds back (SEM_UNDO) is the process's own
 * account, kept by libckpt in its memory (libckpt/semundo.c) and set again
 * by the restored process. ckrun reads every account at the cut and
 * refuses the round where it may be wrong: another process reset the
 * semaphore (SETVAL, SETALL, IPC_RMID: the kernel clears every process's
 * adjustment of it) after the adjustment began, or the set's change time
 * (sem_ctime, in seconds) is not older than the adjustment (a reset by a
 * process gone since, whose account went with it), or setting it again
 * could not keep the value in range. Not saved: the sets' times and last pids
 * (those of the restore). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/sem.h>

#include "ckrun/semundo.h"
#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/ipcns.h"

#define CK__SEMVMX 32767 /* the kernel's largest semaphore value */

union ck__semun {
	int val;
	struct semid_ds *buf;
	unsigned short *array;
	struct seminfo *__buf;
};

int ck_sem_list(struct ck_ipc_visit *v)
{
	struct seminfo si;
	union ck__semun su = {.__buf = &si};
	int max = semctl(0, 0, SEM_INFO, su);

	for (int idx = 0; idx <= max; idx++) {
		struct semid_ds ds;
		struct ck_ipc_obj *s;
		int id;

		su.buf = &ds;
		if ((id = semctl(idx, 0, SEM_STAT, su)) < 0)
			continue;
		if (!(s = ck_ipc_slot(v, id, &ds.sem_perm, CK_SYSV_SEM)))
			continue;
		s->x.pad = (uint32_t)ds.sem_nsems;
		s->x.size = ds.sem_nsems * sizeof(unsigned short);
		s->ctime = (int64_t)ds.sem_ctime;
		s->maplen = s->x.size ? s->x.size : 1;
		s->addr = mmap(NULL, s->maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s->addr == MAP_FAILED) {
			s->addr = NULL;
			return ck_ipc_failed(v, CK_IPC_E_SEMREAD, id);
		}
		v->n++;
		su.array = s->addr;
		if (semctl(id, 0, GETALL, su) < 0)
			return ck_ipc_failed(v, CK_IPC_E_SEMREAD, id);
	}
	return 0;
}

int ck_sem_make(struct ck_ipc_visit *v, struct ck_ipc_obj *s)
{
	union ck__semun su;
	struct semid_ds ds;
	int id;

	if (ck_ipc_write_num("/proc/sys/kernel/sem_next_id", (uint32_t)s->x.id) < 0)
		return ck_ipc_failed(v, CK_IPC_E_NEXTID, s->x.id);
	id = semget(s->x.key, (int)s->x.pad, IPC_CREAT | IPC_EXCL | 0600);
	if (id != s->x.id) {
		if (id >= 0)
			errno = EEXIST;
		v->got = id;
		return ck_ipc_failed(v, CK_IPC_E_MAKE, s->x.id);
	}
	su.array = s->addr;
	if (s->x.pad && semctl(id, 0, SETALL, su) < 0)
		return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	memset(&ds, 0, sizeof(ds));
	su.buf = &ds;
	if (semctl(id, 0, IPC_STAT, su) < 0)
		return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	ds.sem_perm.uid = s->x.uid;
	ds.sem_perm.gid = s->x.gid;
	ds.sem_perm.mode = (unsigned short)s->x.mode;
	if (semctl(id, 0, IPC_SET, su) < 0)
		return ck_ipc_failed(v, CK_IPC_E_FILL, id);
	return 0;
}

/* The account of process p at the cut; 0 when it has none of its own (a
 * fork's copy of its parent's, or a libckpt without one). */
static int ck__account(struct ck_jproc *p, struct ck_semundo *t)
{
	int r;

	if (!p->semundo_addr)
		return 0;
	if ((r = ck_mem_read(p->round.snap, p->semundo_addr, t, sizeof(*t))) < 0) {
		ck_err_set("process %d: cannot read its System V semaphore adjustments: %s", p->jpid, strerror(-r));
		return r;
	}
	return t->magic == CK_SEMUNDO_MAGIC && t->owner == p->jpid && t->nadj <= CK_SEMUNDO_MAX &&
	       t->nclear <= CK_SEMUNDO_CLEARS;
}

static const struct ck_ipc_obj *ck__set(const struct ck_ipc_obj *seg, size_t n, int32_t id)
{
	for (size_t i = 0; i < n; i++)
		if ((seg[i].x.flags & CK_SYSV_SEM) && seg[i].x.id == id)
			return &seg[i];
	return NULL;
}

/* A reset in q's account that may have cleared part of adjustment a:
 * its process's pid, or 0. */
static int32_t ck__reset_since(const struct ck_semundo *q, const struct ck_semundo_adj *a)
{
	if (q->t_forgot >= a->t_first)
		return q->owner;
	for (uint32_t k = 0; k < q->nclear; k++) {
		const struct ck_semundo_clear *c = &q->clear[k];
		if (c->semid == a->semid && (c->num == CK_SEMUNDO_ALL || c->num == a->num) && c->t_end >= a->t_first)
			return q->owner;
	}
	return 0;
}

int ck_semundo_check(struct ckrun *c, const struct ck_ipc_obj *seg, size_t n)
{
	struct ck_semundo *acc = NULL;
	int *has = NULL, r = 0;
	int any = 0;

	for (size_t i = 0; i < n && !any; i++)
		any = (seg[i].x.flags & CK_SYSV_SEM) != 0;
	if (!any || !c->nprocs)
		return 0;
	if (!(acc = calloc(c->nprocs, sizeof(*acc))) || !(has = calloc(c->nprocs, sizeof(*has)))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->nprocs; i++)
		if ((has[i] = ck__account(&c->procs[i], &acc[i])) < 0) {
			r = has[i];
			goto out;
		}
	for (size_t i = 0; i < c->nprocs; i++) {
		if (!has[i])
			continue;
		if (acc[i].overflow) {
			ck_err_set("process %d holds SEM_UNDO adjustments of more than %d System V semaphores: not supported",
				   c->procs[i].jpid, CK_SEMUNDO_MAX);
			r = -ENOTSUP;
			goto out;
		}
		for (uint32_t k = 0; k < acc[i].nadj; k++) {
			const struct ck_semundo_adj *a = &acc[i].adj[k];
			const struct ck_ipc_obj *s = ck__set(seg, n, a->semid);
			int32_t by = 0;
			unsigned v, need;

			if (!s || a->num >= s->x.pad || !a->adj)
				continue; /* of a set removed since: the kernel dropped it too */
			for (size_t j = 0; j < c->nprocs && !by; j++)
				if (has[j])
					by = ck__reset_since(&acc[j], a);
			if (by) {
				ck_err_set("process %d: its SEM_UNDO adjustment of System V semaphore %d[%u] cannot be known: "
					   "process %d reset that semaphore (semctl SETVAL, SETALL or IPC_RMID) after it began",
					   c->procs[i].jpid, a->semid, a->num, by);
				r = -ENOTSUP;
				goto out;
			}
			/* a reset by a process whose account is gone (it exited,
			 * or reset through a raw system call) shows only here, to
			 * the second; so does a mode change (IPC_SET) */
			if (s->ctime >= a->rt_first && s->ctime != a->ctime_ok) {
				ck_err_set("process %d: its SEM_UNDO adjustment of System V semaphore %d[%u] cannot be known: "
					   "the set was changed (semctl SETVAL, SETALL or IPC_SET) in or after the second "
					   "the adjustment began",
					   c->procs[i].jpid, a->semid, a->num);
				r = -ENOTSUP;
				goto out;
			}
			/* set again by a pair of operations, one of which takes
			 * |adj| from the value or adds it */
			v = ((const unsigned short *)s->addr)[a->num];
			need = (unsigned)(a->adj < 0 ? -a->adj : a->adj);
			if (v < need && v + need > CK__SEMVMX) {
				ck_err_set("process %d: its SEM_UNDO adjustment %d of System V semaphore %d[%u] (value %u) "
					   "cannot be set again within the semaphore's range",
					   c->procs[i].jpid, a->adj, a->semid, a->num, v);
				r = -ENOTSUP;
				goto out;
			}
		}
	}
out:
	free(acc);
	free(has);
	return r;
}
