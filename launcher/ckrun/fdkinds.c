/* The kinds of descriptor ckrun knows, and what it does with each (see
 * struct ck_fd_ops in kinds.h). libckpt names each descriptor's kind in
 * the process descriptor; a kind ckrun does nothing with (a duplicate,
 * made from its original; a descriptor a plugin inside the job rebuilds)
 * has no entry; a kind a plugin's ckrun half owns goes to the plugin.
 * A new kind: its file, and one line here. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/ckrun/agent_plugin.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"

static const struct ck_fd_ops ck__fd_ops[] = {
	[CK_FD_STDIO] = {"ckrun's stdio", NULL, NULL, NULL, ck_stdio_remake},
	[CK_FD_FILE] = {"file", NULL, NULL, NULL, ck_file_remake},
	[CK_FD_DEV] = {"device", NULL, NULL, NULL, ck_dev_remake},
	[CK_FD_DELETED] = {"deleted file", NULL, ck_files_save_data, NULL, ck_content_file_remake},
	[CK_FD_MEMFD] = {"memfd", NULL, ck_files_save_data, NULL, ck_content_file_remake},
	[CK_FD_PIPE] = {"pipe", ck_pipe_record, NULL, NULL, ck_pipe_remake},
	[CK_FD_FIFO] = {"FIFO", ck_pipe_record, NULL, NULL, ck_fifo_remake},
	[CK_FD_EVENTFD] = {"eventfd", NULL, NULL, NULL, ck_eventfd_remake},
	[CK_FD_TIMERFD] = {"timerfd", NULL, NULL, NULL, ck_timerfd_remake},
	[CK_FD_SIGNALFD] = {"signalfd", NULL, NULL, NULL, ck_signalfd_remake},
	[CK_FD_EPOLL] = {"epoll", NULL, NULL, NULL, ck_epoll_remake},
};

/* A kind the table lacks and a plugin's ckrun half owns (sockets): the
 * plugin saves them with every process parked and makes them at restore. */
static const struct ck_fd_ops ck__plugin_kind = {"owned by a plugin", NULL, NULL, NULL, ck_plugin_fd_remake};

const struct ck_fd_ops *ck_fd_ops_of(uint32_t kind)
{
	if (kind < sizeof(ck__fd_ops) / sizeof(ck__fd_ops[0]) && ck__fd_ops[kind].name)
		return &ck__fd_ops[kind];
	return ck_agent_plugins_owns(kind) ? &ck__plugin_kind : NULL;
}

int ck_fds_record(struct ckrun *c, struct ck_round *rc, struct ck_writer *w)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			const struct ck_fd_ops *ops = ck_fd_ops_of(pd->fds[k].kind);
			int r;

			if (ops && ops->record && (r = ops->record(rc, w, &c->procs[i], &pd->fds[k])) < 0)
				return r;
		}
	}
	return 0;
}

int ck_fds_save_data(struct ck_writer *w, pid_t snap, struct ck_procdesc *pd, unsigned flags)
{
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_fd_ops *ops = ck_fd_ops_of(pd->fds[i].kind);
		int r;

		if (ops && ops->save_data && (r = ops->save_data(w, snap, &pd->fds[i], flags)) < 0)
			return r;
	}
	return 0;
}

int ck_fds_prepare_all(struct ck_reader *rd, struct ck_objs *o)
{
	for (size_t k = 0; k < sizeof(ck__fd_ops) / sizeof(ck__fd_ops[0]); k++) {
		int r;

		if (ck__fd_ops[k].prepare && (r = ck__fd_ops[k].prepare(rd, o)) < 0)
			return r;
	}
	return ck_plugin_fds_prepare(rd, o);
}

int ck_plugin_fds_prepare(struct ck_reader *rd, struct ck_objs *o)
{
	return ck_agent_plugins_prepare(rd, o->pds, o->npds, &o->plugins);
}

int ck_plugin_fd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	int r = ck_agent_plugins_fd(o->plugins, f);

	(void)rd;
	if (r < 0)
		return r;
	*fd = r;
	return 0;
}

static int ck__find_target(const struct ck_fdplan *pl, const struct ck_procdesc *pd, int fdnum)
{
	for (uint32_t i = 0; i < pd->nfds; i++)
		if (pd->fds[i].fd == fdnum)
			return pl->fds[i];
	return -1;
}

int ck_fds_plan(struct ck_reader *rd, const struct ck_procdesc *pd, struct ck_fdplan *pl, struct ck_objs *objs)
{
	pl->fds = calloc(pd->nfds + CK_RST_MAX_SHARED + 2, sizeof(int));
	pl->targets = calloc(pd->nfds + CK_RST_MAX_SHARED + 2, sizeof(int32_t));
	if (!pl->fds || !pl->targets)
		return -ENOMEM;
	for (uint32_t i = 0; i < pd->nfds; i++)
		pl->fds[i] = -1;
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		const struct ck_fd_ops *ops = ck_fd_ops_of(f->kind);
		int fd = -1, r;

		if (!ops || !ops->remake)
			continue;
		if ((r = ops->remake(rd, objs, f, &fd)) < 0)
			return r;
		if (fd < 0) {
			if (!strstr(ck_err_msg(), "descriptor"))
				ck_err_set("descriptor %d (%s): cannot re-create it: %s", f->fd, f->path, strerror(errno));
			return fd < -1 ? fd : -errno;
		}
		pl->fds[i] = fd;
	}
	/* Duplicates share their original's object. */
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		if (f->kind == CK_FD_DUP) {
			int orig = ck__find_target(pl, pd, f->peer);
			if (orig >= 0)
				pl->fds[i] = fcntl(orig, F_DUPFD_CLOEXEC, 3);
		}
	}
	pl->n = 0;
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		if (pl->fds[i] < 0)
			continue;
		pl->fds[pl->n] = pl->fds[i];
		pl->targets[pl->n] = (f->fdflags & FD_CLOEXEC) ? -f->fd - 1 : f->fd;
		pl->n++;
	}
	return 0;
}
