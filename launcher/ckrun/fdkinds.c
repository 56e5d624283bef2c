/* The kinds of descriptor ckrun knows, and what it does with each (see
 * struct ck_fd_ops in kinds.h). libckpt names each descriptor's kind in
 * the process descriptor; a kind ckrun does nothing with (a duplicate,
 * made from its original; a descriptor a plugin inside the job rebuilds)
 * has no entry; a kind a plugin's ckrun half owns goes to the plugin.
 * A new kind: its file, and one line here. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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
	[CK_FD_INOTIFY] = {"inotify", NULL, NULL, NULL, ck_inotify_remake},
	[CK_FD_PTMX] = {"pseudo-terminal master", NULL, NULL, ck_ptys_prepare, ck_pty_remake},
	[CK_FD_PTS] = {"pseudo-terminal slave", NULL, NULL, NULL, ck_pty_remake},
	[CK_FD_MQUEUE] = {"POSIX message queue", NULL, NULL, NULL, ck_mqueue_remake},
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

/* A /proc file of a process of the job: the restored process opens it
 * itself (libckpt/fdstate.c), inside the job's pid namespace. */
int ck_fd_is_proc_file(const struct ck_pd_fd *f)
{
	const char *p = f->path + 6;

	if (f->kind != CK_FD_FILE || strncmp(f->path, "/proc/", 6) || *p < '0' || *p > '9')
		return 0;
	p += strspn(p, "0123456789");
	return *p == '/' || *p == 0;
}

int ck_fd_reopened_by_process(const struct ck_pd_fd *f)
{
	return ck_fd_is_proc_file(f) || f->kind == CK_FD_PIDFD;
}

/* Kinds a restore makes one description of, shared by every process that
 * held it (a pipe's ends are shared objects already). */
static int ck__shareable(const struct ck_pd_fd *f)
{
	if (ck_fd_is_proc_file(f))
		return 0;
	return f->kind == CK_FD_FILE || f->kind == CK_FD_DEV || f->kind == CK_FD_DELETED || f->kind == CK_FD_MEMFD ||
	       f->kind == CK_FD_PTS || f->kind == CK_FD_EVENTFD || f->kind == CK_FD_TIMERFD || f->kind == CK_FD_MQUEUE ||
	       f->kind == CK_FD_INOTIFY || /* its maker adds the watches (libckpt/inotify.c) */
	       f->kind == CK_FD_EPOLL;     /* each holder adds the registrations it holds */
}

/* Whether ckrun's stdio file rule keeps f and g apart: ckrun's stdio file
 * (a log both a parent and the child it forked write to) is shared by
 * number only: one open file that is stdin in one process and stdout in
 * another becomes the new ckrun's stdin and stdout (stdio.c). */
static int ck__stdio_apart(const struct ck_pd_fd *f, const struct ck_pd_fd *g)
{
	return ((f->xflags | g->xflags) & CK_PD_FD_STDIO_FILE) &&
	       (!(f->xflags & g->xflags & CK_PD_FD_STDIO_FILE) || f->fd != g->fd);
}

static void ck__share(const struct ckrun *c, size_t j, struct ck_pd_fd *g, struct ck_pd_fd *f)
{
	if (!(g->xflags & CK_PD_FD_SHARED)) {
		g->xflags |= CK_PD_FD_SHARED;
		g->pipe_off = (uint64_t)(uint32_t)c->procs[j].jpid << 32 | (uint32_t)g->fd;
	}
	f->xflags |= CK_PD_FD_SHARED;
	f->pipe_off = g->pipe_off;
}

/* One by one: every earlier process's descriptors of the same file. */
static void ck__mark_shared_slow(struct ckrun *c, size_t i, struct ck_pd_fd *f)
{
	for (size_t j = 0; j < i && !(f->xflags & CK_PD_FD_SHARED); j++) {
		struct ck_procdesc *po = c->procs[j].pd;
		for (uint32_t m = 0; m < po->nfds; m++) {
			struct ck_pd_fd *g = &po->fds[m];
			if (g->kind != f->kind || g->dev != f->dev || g->ino != f->ino || !ck__shareable(g) ||
			    ck__stdio_apart(f, g) ||
			    syscall(SYS_kcmp, c->procs[i].pid, c->procs[j].pid, 0 /* KCMP_FILE */, f->fd, g->fd))
				continue;
			ck__share(c, j, g, f);
			break;
		}
	}
}

/* Descriptions held by more than one process: kcmp, every process parked.
 * Each holder gets the key of the first one (its job pid and descriptor).
 * The first holder of each description is kept in kcmp's order of
 * descriptions, so finding one takes log2(n) calls (one per earlier
 * descriptor of the same file made two processes holding 4000 opens of
 * /dev/null take seconds, every process parked); ckrun's stdio files, and
 * every descriptor once kcmp gives no order, are compared one by one. */
struct ck__rep {
	uint32_t proc, fd; /* index in c->procs, in its pd->fds */
};

static void ck__mark_shared(struct ckrun *c)
{
	size_t total = 0, n = 0;
	struct ck__rep *rep;
	int unordered = 0;

	for (size_t i = 0; i < c->nprocs; i++)
		total += c->procs[i].pd->nfds;
	rep = calloc(total + 1, sizeof(*rep));
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			struct ck_pd_fd *f = &pd->fds[k];
			size_t lo = 0, hi = n;

			if (!ck__shareable(f))
				continue;
			if (!rep || unordered || (f->xflags & CK_PD_FD_STDIO_FILE)) {
				ck__mark_shared_slow(c, i, f);
				continue;
			}
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				struct ck_pd_fd *g = &c->procs[rep[mid].proc].pd->fds[rep[mid].fd];
				long r = syscall(SYS_kcmp, c->procs[rep[mid].proc].pid, c->procs[i].pid, 0 /* KCMP_FILE */,
						 g->fd, f->fd);
				/* (the same file too: a kcmp answered falsely, by a
				 * sandbox, must not merge different files) */
				if (r == 0 && g->kind == f->kind && g->dev == f->dev && g->ino == f->ino &&
				    rep[mid].proc != i) {
					ck__share(c, rep[mid].proc, g, f);
					break;
				}
				if (r == 1) /* g's before f's */
					lo = mid + 1;
				else if (r == 2)
					hi = mid;
				else { /* no order, or the same description of another kind */
					unordered = 1;
					break;
				}
			}
			if (unordered)
				ck__mark_shared_slow(c, i, f);
			else if (!(f->xflags & CK_PD_FD_SHARED)) {
				memmove(&rep[lo + 1], &rep[lo], (n - lo) * sizeof(*rep));
				rep[lo].proc = (uint32_t)i;
				rep[lo].fd = k;
				n++;
			}
		}
	}
	free(rep);
}

/* The offset of a shared description as it stands now, every holder
 * parked. Each process recorded it as it parked, and one parks later than
 * another (an MPI rank finishing its cut, a child busy writing): the
 * restart made the description from one holder's record, and a line
 * written after that record was written over. */
static void ck__shared_offsets_now(const struct ckrun *c)
{
	char path[64], buf[256];
	ssize_t n;
	int fd;

	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			struct ck_pd_fd *f = &pd->fds[k];

			if (!(f->xflags & CK_PD_FD_SHARED) || (f->kind != CK_FD_FILE && f->kind != CK_FD_DEV &&
							       f->kind != CK_FD_DELETED && f->kind != CK_FD_MEMFD))
				continue;
			snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)c->procs[i].pid, f->fd);
			if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
				continue; /* the recorded one, as before */
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			if (n <= 4 || strncmp(buf, "pos:", 4))
				continue;
			buf[n] = 0;
			f->offset = strtoull(buf + 4, NULL, 10);
		}
	}
}

int ck_fds_record(struct ckrun *c, struct ck_round *rc, struct ck_writer *w)
{
	int r0;

	/* A round's descriptors are filled afresh by each cut; keys too. */
	for (size_t i = 0; i < c->nprocs; i++)
		for (uint32_t k = 0; k < c->procs[i].pd->nfds; k++) {
			c->procs[i].pd->fds[k].xflags &= ~CK_PD_FD_SHARED;
			c->procs[i].pd->fds[k].pipe_off = 0;
		}
	ck__mark_shared(c);
	rc->jprocs = c->procs;
	rc->njprocs = c->nprocs;
	if ((r0 = ck_inotify_check(c)) < 0 || (r0 = ck_epoll_check(c)) < 0)
		return r0;
	ck__shared_offsets_now(c);
	/* pairs first: a refusal there comes before any pipe is drained */
	if ((r0 = ck_ptys_record(c, w)) < 0)
		return r0;
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

/* One description made (or, held by several, found): *fd, or -1. */
static int ck__make_one(struct ck_reader *rd, struct ck_objs *objs, const struct ck_pd_fd *f, int *fd)
{
	const struct ck_fd_ops *ops = ck_fd_ops_of(f->kind);
	struct ck_obj *sh;
	int r;

	*fd = -1;
	if ((f->xflags & CK_PD_FD_SHARED) && (sh = ck_obj_find(objs, CK_OBJ_DESC, f->pipe_off, 0))) {
		if ((*fd = fcntl(sh->fd[0], F_DUPFD_CLOEXEC, 3)) < 0)
			return -errno;
		return 0;
	}
	if ((r = ops->remake(rd, objs, f, fd)) < 0)
		return r;
	if (*fd >= 0 && (f->xflags & CK_PD_FD_SHARED)) {
		if (!(sh = ck_obj_add(objs, CK_OBJ_DESC, f->pipe_off, 0)))
			return -ENOMEM;
		sh->fd[0] = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	}
	return 0;
}

/* What ck_agent_fd_make makes with: set while the plugins prepare. */
static struct ck_reader *ck__mk_rd;
static struct ck_objs *ck__mk_objs;

int ck_agent_fd_make(const struct ck_pd_fd *f)
{
	const struct ck_fd_ops *ops = ck_fd_ops_of(f->kind);
	int fd = -1, r;

	if (!ck__mk_objs || !ops || !ops->remake || f->kind == CK_FD_STDIO || ck_agent_plugins_owns(f->kind))
		return -ENOTSUP;
	if ((r = ck__make_one(ck__mk_rd, ck__mk_objs, f, &fd)) < 0)
		return r;
	return fd < 0 ? -(errno ? errno : EIO) : fd;
}

int ck_plugin_fds_prepare(struct ck_reader *rd, struct ck_objs *o)
{
	int r;

	ck__mk_rd = rd;
	ck__mk_objs = o;
	r = ck_agent_plugins_prepare(rd, o->pds, o->npds, &o->plugins);
	ck__mk_rd = NULL;
	ck__mk_objs = NULL;
	return r;
}

int ck_plugin_fds_made(struct ck_reader *rd, struct ck_objs *o, const struct ck_agent_procs *procs)
{
	int r;

	/* files in flight on what the plugins make now are made as above */
	ck__mk_rd = rd;
	ck__mk_objs = o;
	r = ck_agent_plugins_made(o->plugins, rd, procs);
	ck__mk_rd = NULL;
	ck__mk_objs = NULL;
	return r;
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

		if (!ops || !ops->remake || ck_fd_reopened_by_process(f))
			continue;
		/* A description another process (or a message in flight) holds
		 * too: the one made first. */
		if ((r = ck__make_one(rd, objs, f, &fd)) < 0)
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

/* At the round, what a restore needs of the hard RLIMIT_NOFILE, which
 * ckrun and the restorers run under. ckrun holds at once one process's
 * descriptors (its plan), every object the job's processes share (both
 * ends of each pipe, FIFOs, deleted files and memfds, both sides of each
 * terminal pair, shared descriptions) and its own (the store's packs,
 * channels: 64 is what a job of 990 descriptors left, restored under a
 * hard limit of 1024; one of 1010 failed with EMFILE). A restorer holds
 * its arrivals (the lowest free numbers) and the targets together, and
 * needs a free number more. Past the limit the round is refused, not the
 * restore. Shared memory objects the job maps without a descriptor count
 * as objects, and in each process's plan and restorer (ck_shm_layout_map). */
#define CK__RST_OWN_FDS 64
static int ck__key_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	for (int i = 0; i < 3; i++)
		if (x[i] != y[i])
			return x[i] < y[i] ? -1 : 1;
	return 0;
}

/* Numbers a restorer of pd holds at once: arrivals at [0, nfds + nshm + 4)
 * (its standard descriptors and channel below them), the targets above
 * that (the saved numbers, and nshm shared memory objects at
 * CK_RST_SHARED_FD and up, or among the low numbers where that range would
 * pass the limit: ck_shm_layout_resolve), and one free number to move an
 * arrival to. */
static uint64_t ck__restorer_need(const struct ck_procdesc *pd, uint32_t nshm, uint64_t limit)
{
	uint64_t low = (uint64_t)pd->nfds + nshm + 4, all = low + 2, top = 0;

	for (uint32_t j = 0; j < pd->nfds && j < CK_PD_MAX_FDS; j++) {
		all += (uint64_t)pd->fds[j].fd >= low;
		if ((uint64_t)pd->fds[j].fd + 1 > top)
			top = (uint64_t)pd->fds[j].fd + 1;
	}
	if (nshm) { /* the objects' range: past the saved numbers in it (ck__shared_range) */
		uint64_t base = CK_RST_SHARED_FD;
		for (int again = 1; again;) {
			again = 0;
			for (uint32_t j = 0; j < pd->nfds && j < CK_PD_MAX_FDS; j++)
				if ((uint64_t)pd->fds[j].fd >= base && (uint64_t)pd->fds[j].fd < base + nshm) {
					base = (uint64_t)pd->fds[j].fd + 1;
					again = 1;
				}
		}
		if (base + nshm + 64 <= limit) {
			all += nshm;
			top = base + nshm > top ? base + nshm : top;
		} /* else from 3 up past the saved numbers: among the arrivals' */
	}
	return all > top ? all : top;
}

int ck_fds_restore_fits(const struct ckrun *c, int with_shm)
{
	uint64_t (*k)[3] = NULL, need, most = 0;
	size_t n = 0, total = 0, objects = 0, nkeys = 0;
	int32_t who = 0;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max == RLIM_INFINITY)
		return 0;
	for (size_t i = 0; i < c->nprocs; i++) {
		const struct ck_procdesc *pd = c->procs[i].pd;
		uint32_t nshm = with_shm ? c->procs[i].round.nshm : 0;
		if (!pd)
			continue;
		/* ckrun holds a process's plan at once: its descriptors and a
		 * copy of each object it maps */
		total += (size_t)pd->nfds + nshm;
		if ((uint64_t)pd->nfds + nshm > most) {
			most = (uint64_t)pd->nfds + nshm;
			who = c->procs[i].jpid;
		}
		if (with_shm && c->procs[i].round.mp)
			nkeys += c->procs[i].round.mp->nregions;
		if ((need = ck__restorer_need(pd, nshm, rl.rlim_max)) > rl.rlim_max) {
			ck_err_set("process %d holds %u descriptors and maps %u shared memory objects it holds none of: "
				   "its restorer needs about %llu numbers at once (the saved ones, the objects' and as "
				   "many arrivals), more than the hard RLIMIT_NOFILE (%llu)",
				   c->procs[i].jpid, pd->nfds, nshm, (unsigned long long)need,
				   (unsigned long long)rl.rlim_max);
			return -ENOTSUP;
		}
	}
	if (most + 2 * (uint64_t)total + CK__RST_OWN_FDS <= rl.rlim_max)
		return 0; /* however many are objects (two per pipe or terminal at most) */
	if (!(k = calloc(2 * total + nkeys + 1, sizeof(*k))))
		return -ENOMEM;
	for (size_t i = 0; i < c->nprocs; i++) {
		const struct ck_procdesc *pd = c->procs[i].pd;
		const struct ck_proc *mp = c->procs[i].round.mp;
		for (uint32_t j = 0; pd && j < pd->nfds && j < CK_PD_MAX_FDS; j++) {
			const struct ck_pd_fd *f = &pd->fds[j];
			switch (f->kind) {
			case CK_FD_PIPE:
			case CK_FD_FIFO:
			case CK_FD_DELETED:
			case CK_FD_MEMFD:
				k[n][0] = f->kind;
				k[n][1] = f->dev;
				k[n++][2] = f->ino;
				break;
			case CK_FD_PTMX:
			case CK_FD_PTS: /* a pair of the job's: by its number */
				k[n][0] = CK_FD_PTMX;
				k[n][1] = f->u64[0];
				k[n++][2] = 0;
				break;
			default:
				break;
			}
			/* a shared description: ckrun keeps one more of it, whatever
			 * its kind */
			if (f->xflags & CK_PD_FD_SHARED) {
				k[n][0] = UINT64_MAX;
				k[n][1] = f->pipe_off;
				k[n++][2] = 0;
			}
		}
		/* shared memory: one object each (ck_shm_make_objects; counted
		 * apart from a descriptor of the same file, one too many at
		 * most) */
		for (size_t j = 0; with_shm && mp && j < mp->nregions; j++)
			if (ck_shm_region(&mp->regions[j])) {
				k[n][0] = UINT64_MAX - 1;
				k[n][1] = mp->regions[j].dev;
				k[n++][2] = mp->regions[j].ino;
			}
	}
	qsort(k, n, sizeof(*k), ck__key_cmp);
	for (size_t i = 0; i < n; i++)
		if (!i || ck__key_cmp(k[i], k[i - 1]))
			objects += k[i][0] == CK_FD_PIPE || k[i][0] == CK_FD_PTMX ? 2 : 1; /* both ends or sides */
	free(k);
	need = most + objects + CK__RST_OWN_FDS;
	if (need <= rl.rlim_max)
		return 0;
	ck_err_set("process %d holds %llu descriptors (with the shared memory objects it maps) and the job's processes "
		   "share %zu objects (pipe ends, FIFOs, deleted files, memfds, terminals, shared descriptions, shared "
		   "memory): a restore needs about %llu descriptors at once, more than ckrun's hard RLIMIT_NOFILE (%llu)",
		   who, (unsigned long long)most, objects, (unsigned long long)need, (unsigned long long)rl.rlim_max);
	return -ENOTSUP;
}
