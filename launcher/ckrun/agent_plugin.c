/* Registry of the plugins' agent halves. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/agent_plugin.h"

#define CK__MAX_AGENT_PLUGINS CK_AGENT_MAX_PLUGINS
static const struct ck_agent_plugin *ck__plugins[CK__MAX_AGENT_PLUGINS];
static size_t ck__nplugins;

struct ck_agent_states {
	void *state[CK__MAX_AGENT_PLUGINS];
};

/* A refusal is a build that cannot checkpoint its jobs right: it says
 * so and ends (exit status 99) before any job starts. */
void ck_agent_plugin_register(const struct ck_agent_plugin *p)
{
	const char *name = p && p->name ? p->name : "(unnamed)";

	if (!p || p->abi != CK_AGENT_PLUGIN_ABI) {
		fprintf(stderr, "ckrun: plugin %s: written for agent plugin ABI %u, this ckrun has ABI %u\n", name,
			p ? p->abi : 0, (unsigned)CK_AGENT_PLUGIN_ABI);
		exit(99);
	}
	if (ck__nplugins >= CK__MAX_AGENT_PLUGINS) {
		fprintf(stderr, "ckrun: plugin %s: the registry holds %d plugins at most\n", name,
			CK__MAX_AGENT_PLUGINS);
		exit(99);
	}
	ck__plugins[ck__nplugins++] = p;
}

int ck_agent_plugins_owns(uint32_t kind)
{
	for (size_t i = 0; i < ck__nplugins; i++)
		if (ck__plugins[i]->fd_kind == kind && ck__plugins[i]->fd)
			return 1;
	return 0;
}

const char *ck_agent_plugins_phase(void)
{
	const char *name = NULL;
	size_t n = 0;

	for (size_t i = 0; i < ck__nplugins; i++)
		if (ck__plugins[i]->checkpoint) {
			name = ck__plugins[i]->phase;
			n++;
		}
	return n == 1 && name ? name : "plugins";
}

int ck_agent_plugins_checkpoint(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
				struct ck_manifest *m)
{
	for (size_t i = 0; i < ck__nplugins; i++) {
		int r = ck__plugins[i]->checkpoint ? ck__plugins[i]->checkpoint(pds, pids, n, w, m) : 0;
		if (r < 0)
			return r;
	}
	return 0;
}

int ck_agent_plugins_prepare(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n,
			     struct ck_agent_states **out)
{
	struct ck_agent_states *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < ck__nplugins; i++) {
		int r = ck__plugins[i]->prepare ? ck__plugins[i]->prepare(rd, pds, n, &s->state[i]) : 0;
		if (r < 0) {
			ck_agent_plugins_release(s);
			return r;
		}
	}
	*out = s;
	return 0;
}

int ck_agent_plugins_fd(struct ck_agent_states *s, const struct ck_pd_fd *f)
{
	for (size_t i = 0; s && i < ck__nplugins; i++)
		if (ck__plugins[i]->fd_kind == f->kind && ck__plugins[i]->fd)
			return ck__plugins[i]->fd(s->state[i], f);
	ck_err_set("descriptor %d (%s): no plugin re-creates it", f->fd, f->path);
	return -ENOENT;
}

int ck_agent_plugins_map_paths(struct ck_pd_fd *f, int (*map)(void *arg, const char *in, char *out, size_t cap),
			       void *arg)
{
	for (size_t i = 0; i < ck__nplugins; i++)
		if (ck__plugins[i]->fd_kind == f->kind && ck__plugins[i]->map_paths)
			return ck__plugins[i]->map_paths(f, map, arg);
	return 0;
}

int ck_agent_plugins_late(struct ck_agent_states *s, struct ck_reader *rd, pid_t (*host_pid)(void *arg, int32_t jpid),
			  void *arg)
{
	for (size_t i = 0; s && i < ck__nplugins; i++) {
		int r = ck__plugins[i]->late ? ck__plugins[i]->late(s->state[i], rd, host_pid, arg) : 0;
		if (r < 0)
			return r;
	}
	return 0;
}

int ck_agent_plugins_made(struct ck_agent_states *s, struct ck_reader *rd, const struct ck_agent_procs *procs)
{
	for (size_t i = 0; s && i < ck__nplugins; i++) {
		int r = ck__plugins[i]->made ? ck__plugins[i]->made(s->state[i], rd, procs) : 0;
		if (r < 0)
			return r;
	}
	return 0;
}

void ck_agent_plugins_release(struct ck_agent_states *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < ck__nplugins; i++)
		if (ck__plugins[i]->release)
			ck__plugins[i]->release(s->state[i]);
	free(s);
}
