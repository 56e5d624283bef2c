/* ckrun contract: the job half of a plugin (libckpt's event interface).
 *
 * Version: CK_PLUGIN_ABI below; a plugin states the ABI it was written
 * for in struct ck_plugin.abi.
 *
 * The plugin event interface of libckpt.
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

#endif
