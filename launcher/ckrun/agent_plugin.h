/* The agent half of a plugin (the .c files of plugins/NAME/agent, linked into ckrun):
 * what must be done from outside the job, seeing all of its processes at
 * once. It registers itself from a constructor; ckrun's round and restore
 * call every registered plugin at their points and know none by name. A
 * plugin owns the descriptors of one kind (libckpt labels them). */
#ifndef CK_AGENT_PLUGIN_H
#define CK_AGENT_PLUGIN_H

#include <stddef.h>
#include <sys/types.h>

#include "launcher/image/chunkio.h"
#include "launcher/image/manifest.h"
#include "ckrun/procdesc.h"

struct ck_agent_plugin {
	const char *name;
	uint32_t fd_kind; /* enum ck_pd_fd_kind it owns */
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
};

void ck_agent_plugin_register(const struct ck_agent_plugin *p);

/* For ckrun's round and restore. */
int ck_agent_plugins_checkpoint(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
				struct ck_manifest *m);
struct ck_agent_states;
int ck_agent_plugins_prepare(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n,
			     struct ck_agent_states **out);
/* -ENOENT if no plugin owns this kind of descriptor. */
int ck_agent_plugins_fd(struct ck_agent_states *s, const struct ck_pd_fd *f);
void ck_agent_plugins_release(struct ck_agent_states *s);

#endif
