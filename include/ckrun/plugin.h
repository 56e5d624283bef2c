/* ckrun contract: the plugin interface, both halves.
 *
 * A plugin (plugins/NAME) has up to two halves, each registered from a
 * constructor, each stating the ABI it was written for:
 *   the job half (struct ck_plugin, CK_PLUGIN_ABI): the .c files of
 *     plugins/NAME, compiled into libckpt.so, runs inside every process of the job;
 *   the ckrun half (struct ck_agent_plugin, CK_AGENT_PLUGIN_ABI): those
 *     of plugins/NAME/agent, linked into ckrun, sees every process of the
 *     job at once from outside and owns one kind of descriptor.
 * The core names no plugin. A registration refused (another ABI, a full
 * registry) is loud: libckpt says so on the job's stderr and fails every
 * round with that reason (a checkpoint without the plugin's state would
 * restore wrongly); ckrun says so and exits 99 before it starts a job.
 *
 * The job half: libckpt's event interface.
 *
 * A plugin is compiled into libckpt.so (the .c files of plugins/NAME) and registers
 * itself from a constructor with ck_plugin_register(); the core knows no
 * plugin by name. Checkpoint-side events run in registration order,
 * resume/restart events in reverse (like pthread_atfork).
 *
 * Rules: events run on libckpt's manager thread. During PRECHECKPOINT the
 * job's other threads are parked and may hold any lock (malloc's too):
 * allocate before (PRESUSPEND) or up front, never there. */
#ifndef CK_CONTRACT_PLUGIN_H
#define CK_CONTRACT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ckrun/procdesc.h"

#define CK_PLUGIN_ABI 1

enum ck_event {
	CK_EV_INIT = 1,        /* libckpt initialised in a new process (after exec) */
	CK_EV_PRESUSPEND,      /* a round starts; job threads still run: reach a clean point */
	CK_EV_PRECHECKPOINT,   /* every job thread parked; last chance to put state in memory */
	CK_EV_RESUME,          /* the round ended (saved or failed); same process continues */
	CK_EV_RESTART,         /* in a restored process, before job threads are released */
	CK_EV_ATFORK_CHILD,    /* in the child of a job fork() */
};

struct ck_plugin {
	uint32_t abi; /* CK_PLUGIN_ABI */
	const char *name;
	/* 0 to go on; a negative errno aborts the round (checkpoint-side events)
	 * after ck_plugin_fail() said why. Plugins that saw PRESUSPEND get RESUME. */
	int (*event)(enum ck_event ev);
	/* Return non-zero to leave the mapping [start,end) out of the image
	 * (device mappings the plugin rebuilds itself); `why` names the reason
	 * for `ckpt inspect`. May be NULL. */
	int (*skip_region)(uint64_t start, uint64_t end, const char *path, const char **why);
};

void ck_plugin_register(const struct ck_plugin *p);

/* Records why the current round cannot proceed ("CUDA IPC handle in use"),
 * for the one error line ckrun prints. */
void ck_plugin_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Non-zero in a process that was restored from a checkpoint. */
int ck_plugin_restarted(void);

/* ---- the ckrun half ---- */

#define CK_AGENT_PLUGIN_ABI 4 /* 2: map_paths, 3: late, 4: made */
#define CK_AGENT_MAX_PLUGINS 8 /* ckrun's registry */

struct ck_writer;   /* launcher/image/chunkio.h */
struct ck_reader;
struct ck_manifest; /* launcher/image/manifest.h */

#define CK_AGENT_IDS(uid, gid) ((uint64_t)(uint32_t)(uid) | (uint64_t)(uint32_t)(gid) << 32)
#define CK_AGENT_IDS_NONE UINT64_MAX

/* What a plugin may ask of the restored processes before they get their
 * descriptors (the made step). */
struct sockaddr_un;
struct ck_agent_procs {
	void *arg;
	/* a process's pid in ckrun's namespace, 0 if none */
	pid_t (*host_pid)(void *arg, int32_t jpid);
	/* A connected UNIX pair of this type made by the job's processes, so
	 * that each end's SO_PEERCRED names the process it named before: the
	 * end sv[0] connected by `connector` to a listener of `listener` (it
	 * names listener), sv[1] the accepted end (it names connector); one
	 * process for both: its socketpair. -errno (nothing made) where the
	 * processes said they cannot; with *lost set as well, the exchange
	 * with them broke (message set): the restore cannot go on. lids,
	 * cids: CK_AGENT_IDS(uid, gid), the effective ids each process is to
	 * make its part with (the kernel notes them with the pid), or
	 * CK_AGENT_IDS_NONE: its own. */
	int (*unix_pair)(void *arg, int32_t listener, uint64_t lids, int32_t connector, uint64_t cids, int type,
			 int sv[2], int *lost);
	/* listen(fd, backlog) called again by process jpid on a UNIX listener
	 * ckrun made: connections to it then name that process. Returns as
	 * unix_pair. */
	int (*unix_listen)(void *arg, int32_t jpid, uint64_t ids, int fd, int backlog, int *lost);
	/* A new UNIX socket of this type connected by process jpid to the
	 * address a (al bytes), without waiting: its descriptor, or as
	 * unix_pair. */
	int (*unix_connect)(void *arg, int32_t jpid, uint64_t ids, int type, const struct sockaddr_un *a, uint32_t al,
			    int *lost);
};

struct ck_agent_plugin {
	uint32_t abi; /* CK_AGENT_PLUGIN_ABI */
	const char *name;
	uint32_t fd_kind;  /* enum ck_pd_fd_kind it owns (libckpt labels them) */
	const char *phase; /* its step of the round in -v -v timings ("sockets") */
	/* Every process parked (pids: in ckrun's namespace): record, save
	 * data with the writer, add skipped items to m. A negative errno fails
	 * the round (after ck_err_set). */
	int (*checkpoint)(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
			  struct ck_manifest *m);
	/* Restore, before any process exists: make the objects. */
	int (*prepare)(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n, void **state);
	/* A new close-on-exec descriptor for one of its descriptors, or -errno. */
	int (*fd)(void *state, const struct ck_pd_fd *f);
	void (*release)(void *state);
	/* Restore, before prepare (ckrun --map-path): rewrite the paths one
	 * of its descriptors names (a UNIX socket's address) with map, which
	 * returns 1 and the new path in out, 0 (out = in: no rule applies) or
	 * -errno. Returns 1 if f changed, 0, or -errno with the message set.
	 * May be NULL: its descriptors name no path. */
	int (*map_paths)(struct ck_pd_fd *f, int (*map)(void *arg, const char *in, char *out, size_t cap), void *arg);
	/* Restore, once every process exists (none runs job code yet): what
	 * needs them (a message's sender named by its pid; host_pid gives a
	 * process's pid in ckrun's namespace, 0 if none). May be NULL. */
	int (*late)(void *state, struct ck_reader *rd, pid_t (*host_pid)(void *arg, int32_t jpid), void *arg);
	/* Restore, every process made and none given its descriptors yet:
	 * objects that the job's processes must make themselves. May be NULL. */
	int (*made)(void *state, struct ck_reader *rd, const struct ck_agent_procs *procs);
};

void ck_agent_plugin_register(const struct ck_agent_plugin *p);

#endif
