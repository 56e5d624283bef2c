/* The helper that works inside the job's IPC namespace (shm_sysv.c runs
 * it) and what it does there: System V objects (shm_sysv.c) and POSIX
 * message queues (mq_posix.c). The helper shares ckrun's memory and
 * descriptors: code it runs makes system calls only (no allocation, no
 * stdio, no strerror). */
#ifndef CK_CKRUN_IPCNS_H
#define CK_CKRUN_IPCNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ipc.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/image/manifest.h"

/* One object of the namespace. */
struct ck_ipc_obj {
	struct ck_sysv_shm x;
	/* a segment: attached in ckrun's memory by the helper; a queue: its
	 * messages (a POSIX one's: its attributes and name first), mapped by
	 * the helper at a checkpoint (maplen), allocated by ckrun at a
	 * restore */
	void *addr;
	size_t maplen;
	uint64_t dev; /* a POSIX queue at a checkpoint: its file's device */
	int64_t ctime; /* a semaphore set at a checkpoint: sem_ctime */
	/* a POSIX queue at a checkpoint: the process registered for its
	 * notification (in ckrun's pid namespace; 0: none), and how */
	int32_t notify_pid, notify, signo;
};

enum { CK_IPC_LIST, CK_IPC_MAKE, CK_IPC_REMOVE, CK_IPC_OPENMQ };
enum {
	CK_IPC_OK,
	CK_IPC_E_USERNS,
	CK_IPC_E_IPCNS,
	CK_IPC_E_SEMREAD,
	CK_IPC_E_READ,
	CK_IPC_E_MSGREAD,
	CK_IPC_E_MSGBIG,
	CK_IPC_E_NEXTID,
	CK_IPC_E_MAKE,
	CK_IPC_E_FILL,
	CK_IPC_E_MSGSEND,
	/* POSIX message queues, named by visit.name */
	CK_IPC_E_PMQNOTIFY,
	CK_IPC_E_PMQTHREAD,
	CK_IPC_E_PMQREAD,
	CK_IPC_E_PMQSEND,
	CK_IPC_E_PMQMAKE,
	CK_IPC_E_PMQOPEN,
};

/* One visit of the helper to the job's namespaces. */
struct ck_ipc_visit {
	int what;
	int userfd, ipcfd; /* the job's namespaces (userfd -1: the job has no user namespace) */
	struct ck_ipc_obj *seg;
	size_t n, cap; /* LIST: objects read (at most cap), of total found */
	size_t total;
	int fail, err; /* CK_IPC_E_*, errno */
	int32_t id, got;
	int mq_dir; /* LIST: the namespace's mqueue file system; -1: mount it, -2: not */
	int mq_unseen; /* LIST: errno of why POSIX queues could not be looked for */
	char name[256]; /* a POSIX queue: the one failed; OPENMQ: the one to open */
	int mq_flags;   /* OPENMQ: the descriptor's access mode and O_NONBLOCK */
};

/* Records a failure in v (errno its cause); 1. */
int ck_ipc_failed(struct ck_ipc_visit *v, int what, int32_t id);
/* The next record for object ID (owner and mode from PERM, FLAGS), zeroed;
 * NULL when the list is full: the object is counted, ckrun comes again
 * with room. */
struct ck_ipc_obj *ck_ipc_slot(struct ck_ipc_visit *v, int32_t id, const struct ipc_perm *perm, uint32_t flags);
/* Reads or writes a number in a /proc/sys file (-1: cannot). */
int64_t ck_ipc_read_num(const char *file);
int ck_ipc_write_num(const char *file, uint32_t u);
/* Runs the helper for v; 0, or -errno with the reason set. */
int ck_ipc_run(struct ckrun *c, struct ck_ipc_visit *v);

/* sem_sysv.c: LIST reads every semaphore set into v->seg; MAKE makes
 * one again (run by the helper). ckrun's side: every process's SEM_UNDO
 * adjustments can be set again at a restore, given the n objects listed;
 * else one line, -ENOTSUP. */
int ck_sem_list(struct ck_ipc_visit *v);
int ck_sem_make(struct ck_ipc_visit *v, struct ck_ipc_obj *s);
int ck_semundo_check(struct ckrun *c, const struct ck_ipc_obj *seg, size_t n);

/* mq_posix.c, run by the helper: LIST mounts the mqueue file system
 * (once) and reads every queue into v->seg after the System V objects;
 * MAKE makes one queue again; OPENMQ opens v->name into v->got. */
void ck_pmq_mount(struct ck_ipc_visit *v);
int ck_pmq_list(struct ck_ipc_visit *v);
int ck_pmq_make(struct ck_ipc_visit *v, struct ck_ipc_obj *s);
int ck_pmq_open(struct ck_ipc_visit *v);
/* ckrun's side: the reason of a POSIX queue's failure (0: not one). */
int ck_pmq_say(const struct ck_ipc_visit *v);
/* Every descriptor of a POSIX queue in the job names one of the n
 * objects saved (listed: the queues could be looked for); else one line
 * naming it, -ENOTSUP. */
int ck_pmq_check_fds(struct ckrun *c, const struct ck_ipc_obj *seg, size_t n, int listed);

#endif
