/* ckrun's registry of the plugins' ckrun halves (struct ck_agent_plugin,
 * include/ckrun/plugin.h): ckrun's round and restore call every
 * registered plugin at their points and know none by name. */
#ifndef CK_AGENT_PLUGIN_H
#define CK_AGENT_PLUGIN_H

#include <stddef.h>
#include <sys/types.h>

#include "launcher/image/chunkio.h"
#include "launcher/image/manifest.h"
#include "ckrun/plugin.h"
#include "ckrun/procdesc.h"

/* For ckrun's round and restore. */
int ck_agent_plugins_checkpoint(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
				struct ck_manifest *m);
struct ck_agent_states;
int ck_agent_plugins_prepare(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n,
			     struct ck_agent_states **out);
/* Whether a registered plugin owns this kind of descriptor. */
int ck_agent_plugins_owns(uint32_t kind);
/* The name of the plugins' step in the round's timings: the one plugin's
 * own, or "plugins". */
const char *ck_agent_plugins_phase(void);
/* -ENOENT if no plugin owns this kind of descriptor. */
int ck_agent_plugins_fd(struct ck_agent_states *s, const struct ck_pd_fd *f);
/* Restore, every process made and parked: the plugins' late step. */
int ck_agent_plugins_late(struct ck_agent_states *s, struct ck_reader *rd, pid_t (*host_pid)(void *arg, int32_t jpid),
			  void *arg);
/* Restore, every process made, none given its descriptors: the plugins'
 * made step. */
int ck_agent_plugins_made(struct ck_agent_states *s, struct ck_reader *rd, const struct ck_agent_procs *procs);
void ck_agent_plugins_release(struct ck_agent_states *s);
/* Restore, during a plugin's prepare: a new close-on-exec descriptor
 * made from a saved description as ckrun makes the job's own (a file in
 * flight in a socket's queue); one description for every holder with the
 * same CK_PD_FD_SHARED key. -errno if none can be made. */
int ck_agent_fd_make(const struct ck_pd_fd *f);
/* The job's CLOCK_MONOTONIC now (its time namespace's), from what the
 * round's cut found: when a plugin read a timer. */
uint64_t ck_agent_job_now(void);
/* --map-path: the owning plugin's map_paths for f (0 when none). */
int ck_agent_plugins_map_paths(struct ck_pd_fd *f, int (*map)(void *arg, const char *in, char *out, size_t cap),
			       void *arg);

#endif
