/* Restore, agent side: check the checkpoint against this machine (files
 * changed since?), prepare every descriptor, start the restorer in fresh
 * namespaces with the saved pid, hand it the layout and descriptors, and
 * fill its memory with verified bytes. The job runs again only after every
 * byte has been verified and written; any error kills the restorer first. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "launcher/chunkio.h"
#include "launcher/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/vdso.h"
#include "libckpt/proto.h"

struct ck__fdplan {
	int *fds;    /* prepared objects, in ckrun */
	int32_t *targets;
	uint32_t n;
};

struct ck__sink {
	pid_t pid;
	uint64_t base;
	int fd; /* >= 0: write to a file instead */
};

/* Into a buffer of ckrun's (the old vDSO). */
static int ck__buf_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	memcpy((char *)arg + off, buf, len);
	return 0;
}

static int ck__write_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct ck__sink *s = arg;

	if (s->fd >= 0) {
		size_t done = 0;
		while (done < len) {
			ssize_t n = pwrite(s->fd, (const char *)buf + done, len - done, (off_t)(off + done));
			if (n < 0) {
				ck_err_set("cannot write restored file contents: %s", strerror(errno));
				return -errno;
			}
			done += (size_t)n;
		}
		return 0;
	}
	return ck_mem_write(s->pid, s->base + off, buf, len);
}

static int ck__fill_fd(struct ck_reader *rd, const struct ck_pd_fd *f, int fd)
{
	struct ck__sink s = {0, 0, fd};

	if (!f->data_nchunks)
		return 0;
	return ck_reader_read(rd, f->data_chunk, f->data_nchunks, ck__write_sink, &s);
}

static void ck__strip_deleted(char *path)
{
	size_t n = strlen(path);
	if (n > 10 && !strcmp(path + n - 10, " (deleted)"))
		path[n - 10] = 0;
}

/* Opens a regular file again and reports if it changed since. */
static int ck__open_file(const struct ck_pd_fd *f)
{
	int flags = f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY);
	struct stat st;
	int fd = open(f->path, flags | O_CLOEXEC);

	if (fd < 0) {
		ck_err_set("descriptor %d: cannot open %s again: %s", f->fd, f->path, strerror(errno));
		return -errno;
	}
	/* Data the job reads changed under it: say so. (Files it writes change
	 * by its own hand after the checkpoint; that is expected.) */
	if (S_ISREG(f->mode) && (f->flags & O_ACCMODE) == O_RDONLY && fstat(fd, &st) == 0) {
		int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
		if ((uint64_t)st.st_size != f->size || mt != f->mtime_ns)
			fprintf(stderr, "ckrun: warning: %s changed since the checkpoint (size %" PRIu64 " -> %lld)\n",
				f->path, f->size, (long long)st.st_size);
	}
	/* Devices and other unseekable files have no offset to restore. */
	(void)lseek(fd, (off_t)f->offset, SEEK_SET);
	return fd;
}

static int ck__make_content_file(struct ck_reader *rd, const struct ck_pd_fd *f)
{
	char path[CK_PD_PATH], dir[CK_PD_PATH];
	int fd = -1, r;

	snprintf(path, sizeof(path), "%s", f->path);
	ck__strip_deleted(path);
	if (f->kind == CK_FD_MEMFD) {
		const char *name = path + strlen("/memfd:");
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	} else {
		snprintf(dir, sizeof(dir), "%s", path);
		fd = open(dirname(dir), O_TMPFILE | O_RDWR | O_CLOEXEC, f->mode & 07777);
		if (fd < 0)
			fd = memfd_create("ckpt-deleted", MFD_CLOEXEC);
	}
	if (fd < 0) {
		ck_err_set("descriptor %d: cannot re-create %s: %s", f->fd, f->path, strerror(errno));
		return -errno;
	}
	if (ftruncate(fd, (off_t)f->size) < 0 || (r = ck__fill_fd(rd, f, fd)) < 0) {
		r = -errno;
		close(fd);
		return r ? r : -EIO;
	}
	if (f->kind == CK_FD_MEMFD && f->u64[0])
		fcntl(fd, F_ADD_SEALS, (int)f->u64[0]);
	lseek(fd, (off_t)f->offset, SEEK_SET);
	/* Same access mode as before (a memfd/tmpfile is opened read-write). */
	if ((f->flags & O_ACCMODE) != O_RDWR) {
		char p[64];
		int again;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		again = open(p, (f->flags & O_ACCMODE) | O_CLOEXEC);
		if (again >= 0) {
			lseek(again, (off_t)f->offset, SEEK_SET);
			close(fd);
			fd = again;
		}
	}
	return fd;
}

static int ck__find_target(const struct ck__fdplan *pl, const struct ck_procdesc *pd, int fdnum)
{
	for (uint32_t i = 0; i < pd->nfds; i++)
		if (pd->fds[i].fd == fdnum)
			return pl->fds[i];
	return -1;
}

static int ck__prepare_fds(struct ck_reader *rd, const struct ck_procdesc *pd, struct ck__fdplan *pl)
{
	pl->fds = calloc(pd->nfds ? pd->nfds : 1, sizeof(int));
	pl->targets = calloc(pd->nfds ? pd->nfds : 1, sizeof(int32_t));
	if (!pl->fds || !pl->targets)
		return -ENOMEM;
	for (uint32_t i = 0; i < pd->nfds; i++)
		pl->fds[i] = -1;
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		int fd = -1, nb = (f->flags & O_NONBLOCK) ? 1 : 0;

		switch (f->kind) {
		case CK_FD_STDIO:
			fd = fcntl(f->fd, F_DUPFD_CLOEXEC, 3);
			if (fd < 0)
				fd = open("/dev/null", O_RDWR | O_CLOEXEC);
			break;
		case CK_FD_FILE:
		case CK_FD_DEV:
			fd = ck__open_file(f);
			break;
		case CK_FD_DELETED:
		case CK_FD_MEMFD:
			fd = -1;
			/* A second open() of the same file: same inode, own offset. */
			for (uint32_t j = 0; j < i && fd < 0; j++) {
				const struct ck_pd_fd *o = &pd->fds[j];
				char p[64];
				if (o->kind != f->kind || o->ino != f->ino || o->dev != f->dev || pl->fds[j] < 0)
					continue;
				snprintf(p, sizeof(p), "/proc/self/fd/%d", pl->fds[j]);
				fd = open(p, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL)) | O_CLOEXEC);
				if (fd >= 0)
					lseek(fd, (off_t)f->offset, SEEK_SET);
			}
			if (fd < 0)
				fd = ck__make_content_file(rd, f);
			break;
		case CK_FD_FIFO: {
			int anchor = open(f->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
			fd = open(f->path, (f->flags & ~O_NONBLOCK) | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0 && !nb)
				fcntl(fd, F_SETFL, f->flags & ~O_NONBLOCK);
			if (anchor >= 0)
				close(anchor);
			break;
		}
		case CK_FD_PIPE: {
			int p[2], have = 0;
			/* One pipe per saved pipe: an earlier end made it already. */
			for (uint32_t j = 0; j < i; j++) {
				const struct ck_pd_fd *o = &pd->fds[j];
				if (o->kind == CK_FD_PIPE && o->ino == f->ino && o->dev == f->dev && pl->fds[j] >= 0) {
					have = 1;
					break;
				}
			}
			if (have)
				continue; /* filled in below */
			if (pipe2(p, O_CLOEXEC) < 0)
				break;
			if (f->pipe_cap)
				fcntl(p[0], F_SETPIPE_SZ, (int)f->pipe_cap);
			for (uint32_t j = i; j < pd->nfds; j++) {
				const struct ck_pd_fd *o = &pd->fds[j];
				if (o->kind != CK_FD_PIPE || o->ino != f->ino || o->dev != f->dev)
					continue;
				pl->fds[j] = fcntl((o->flags & O_ACCMODE) == O_RDONLY ? p[0] : p[1], F_DUPFD_CLOEXEC, 3);
				if (o->flags & O_NONBLOCK)
					fcntl(pl->fds[j], F_SETFL, O_NONBLOCK);
			}
			close(p[0]);
			close(p[1]);
			continue;
		}
		case CK_FD_EVENTFD:
			fd = eventfd((unsigned)f->u64[0], EFD_CLOEXEC | (nb ? EFD_NONBLOCK : 0) |
								  (f->u64[1] ? EFD_SEMAPHORE : 0));
			break;
		case CK_FD_TIMERFD: {
			struct itimerspec its;
			fd = timerfd_create((int)f->u64[0], TFD_CLOEXEC | (nb ? TFD_NONBLOCK : 0));
			its.it_value.tv_sec = (time_t)(f->u64[2] / 1000000000ull);
			its.it_value.tv_nsec = (long)(f->u64[2] % 1000000000ull);
			its.it_interval.tv_sec = (time_t)(f->u64[3] / 1000000000ull);
			its.it_interval.tv_nsec = (long)(f->u64[3] % 1000000000ull);
			if (fd >= 0 && f->u64[2])
				timerfd_settime(fd, 0, &its, NULL);
			break;
		}
		case CK_FD_SIGNALFD: {
			sigset_t set;
			sigemptyset(&set);
			for (int s = 1; s <= 64; s++)
				if (f->u64[0] & (1ull << (s - 1)))
					sigaddset(&set, s);
			fd = signalfd(-1, &set, SFD_CLOEXEC | (nb ? SFD_NONBLOCK : 0));
			break;
		}
		case CK_FD_EPOLL:
			fd = epoll_create1(EPOLL_CLOEXEC);
			break;
		case CK_FD_DUP:
		case CK_FD_PLUGIN:
		default:
			continue;
		}
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

static void ck__plan_free(struct ck__fdplan *pl)
{
	for (uint32_t i = 0; i < pl->n; i++)
		close(pl->fds[i]);
	free(pl->fds);
	free(pl->targets);
}

/* The layout the restorer maps: header, regions, strings. */
static int ck__build_layout(const struct ck_proc *p, const struct ck_procdesc *pd, uint32_t nfds, void **out,
			    size_t *len)
{
	size_t strings = 1, off = 1, size;
	struct ck_rst_layout *l;
	struct ck_rst_region *rg;
	char *s;

	for (size_t i = 0; i < p->nregions; i++)
		if (p->regions[i].path)
			strings += strlen(p->regions[i].path) + 1;
	size = sizeof(*l) + p->nregions * sizeof(*rg) + strings;
	l = calloc(1, size);
	if (!l)
		return -ENOMEM;
	rg = (struct ck_rst_region *)(l + 1);
	s = (char *)(rg + p->nregions);
	l->magic = CK_RST_MAGIC;
	l->nregions = (uint32_t)p->nregions;
	l->strings_len = (uint32_t)strings;
	l->exe_fd = -1;
	l->restart_entry = p->restart_entry;
	l->restart_arg = p->restart_arg;
	l->restart_stack = p->restart_stack;
	l->start_code = pd->start_code;
	l->end_code = pd->end_code;
	l->start_data = pd->start_data;
	l->end_data = pd->end_data;
	l->start_brk = pd->start_brk;
	l->brk = pd->brk;
	l->start_stack = pd->start_stack;
	l->arg_start = pd->arg_start;
	l->arg_end = pd->arg_end;
	l->env_start = pd->env_start;
	l->env_end = pd->env_end;
	memcpy(l->auxv, pd->auxv, sizeof(l->auxv));
	l->auxv_size = pd->auxv_size;
	l->nfds = nfds;
	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *r = &p->regions[i];
		rg[i].start = r->start;
		rg[i].end = r->end;
		rg[i].prot = r->prot;
		rg[i].flags = r->flags;
		rg[i].file_off = r->file_off;
		rg[i].fill = r->nchunks > 0;
		rg[i].map_fd = -1;
		if ((r->flags & CK_REG_SHARED) && (r->flags & CK_REG_DELETED)) {
			for (uint32_t k = 0; k < pd->nfds; k++) {
				const struct ck_pd_fd *f = &pd->fds[k];
				if ((f->kind == CK_FD_DELETED || f->kind == CK_FD_MEMFD) && f->ino == r->ino &&
				    (f->flags & O_ACCMODE) == O_RDWR) {
					rg[i].map_fd = f->fd;
					break;
				}
			}
		}
		if (r->path) {
			rg[i].path_off = (uint32_t)off;
			memcpy(s + off, r->path, strlen(r->path) + 1);
			off += strlen(r->path) + 1;
		}
		if (r->flags & CK_REG_VDSO) {
			l->vdso_start = r->start;
			l->vdso_end = r->end;
		} else if ((r->flags & CK_REG_VVAR) && r->path && !strcmp(r->path, "[vvar]")) {
			l->vvar_start = r->start;
			l->vvar_end = r->end;
		} else if (r->flags & CK_REG_VVAR) {
			l->vclock_start = r->start;
			l->vclock_end = r->end;
		}
	}
	*out = l;
	*len = size;
	return 0;
}

static int ck__expect(struct ckrun *c, uint32_t type, struct ck_msg *m)
{
	int r = ck_chan_recv(c->agent_fd, m, NULL, 120000);

	if (r < 0) {
		ck_err_set("the restorer stopped answering: %s", strerror(-r));
		return r;
	}
	if (m->type == CK_MSG_RST_ERROR) {
		ck_err_set("%s", m->text);
		return -EIO;
	}
	if (m->type != type) {
		ck_err_set("the restorer sent message %u, expected %u", m->type, type);
		return -EPROTO;
	}
	return 0;
}

int ck_restore(struct ckrun *c, struct ck_manifest *m)
{
	struct ck__fdplan plan = {0};
	struct ck_procdesc *pd = NULL;
	struct ck_reader *rd = NULL;
	struct ck_msg msg;
	void *layout = NULL;
	size_t layout_len = 0;
	pid_t rst = 0;
	struct ck_proc *p;
	uint32_t vdso_mode = 0;
	int r;

	if (m->nprocs != 1) {
		ck_err_set("checkpoint %s@%" PRIu64 " holds %zu processes; this ckrun restores single-process jobs",
			   m->job, m->seq, m->nprocs);
		return -ENOTSUP;
	}
	p = &m->procs[0];
	r = ck_desc_unpack(p->desc, p->desc_len, &pd);
	if (r < 0) {
		ck_err_wrap("checkpoint %s@%" PRIu64, m->job, m->seq);
		return r;
	}
	r = ck_reader_open(c->store, c->job, m, &rd);
	if (r < 0)
		goto out;
	r = ck__prepare_fds(rd, pd, &plan);
	if (r < 0)
		goto out;
	r = ck__build_layout(p, pd, plan.n, &layout, &layout_len);
	if (r < 0)
		goto out;
	{
		void *old = NULL;
		size_t old_len = 0;
		for (size_t i = 0; i < p->nregions; i++) {
			const struct ck_region *rg = &p->regions[i];
			if (!(rg->flags & CK_REG_VDSO) || !rg->nchunks)
				continue;
			old_len = rg->end - rg->start;
			old = calloc(1, old_len);
			if (!old || (r = ck_reader_read(rd, rg->first_chunk, rg->nchunks, ck__buf_sink, old)) < 0) {
				free(old);
				r = r < 0 ? r : -ENOMEM;
				goto out;
			}
		}
		r = ck_vdso_plan(p, old, old_len, layout);
		free(old);
		if (r < 0)
			goto out;
		vdso_mode = ((struct ck_rst_layout *)layout)->vdso_mode;
	}
	r = ck_spawn(c, CK_SPAWN_RESTORE, p->pid);
	if (r < 0)
		goto out;
	r = ck_chan_recv(c->agent_fd, &msg, &rst, 30000);
	if (r < 0 || msg.type != CK_MSG_RST_HELLO || rst <= 0) {
		ck_err_set("the restorer did not start (pid %d in the job's namespace taken?)", p->pid);
		r = r < 0 ? r : -EPROTO;
		goto out;
	}
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_LAYOUT;
	msg.arg[0] = layout_len;
	if ((r = ck_chan_send(c->agent_fd, &msg, NULL, 0)) < 0 || (r = ck__expect(c, CK_MSG_RST_MAPPED, &msg)) < 0)
		goto out;
	if ((r = ck_mem_write(rst, CK_RST_SCRATCH, layout, layout_len)) < 0)
		goto out;
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_FILLED;
	if ((r = ck_chan_send(c->agent_fd, &msg, NULL, 0)) < 0)
		goto out;
	for (uint32_t i = 0; i < plan.n; i += 200) {
		uint32_t k = plan.n - i < 200 ? plan.n - i : 200;
		memset(&msg, 0, sizeof(msg));
		msg.type = CK_MSG_RST_FDS;
		msg.len = k * 4;
		memcpy(msg.text, &plan.targets[i], k * 4);
		if ((r = ck_chan_send(c->agent_fd, &msg, &plan.fds[i], (int)k)) < 0)
			goto out;
	}
	if ((r = ck__expect(c, CK_MSG_RST_MAPPED, &msg)) < 0)
		goto out;
	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *rg = &p->regions[i];
		struct ck__sink s = {rst, rg->start, -1};
		if (!rg->nchunks || ((rg->flags & CK_REG_VDSO) && vdso_mode == 0))
			continue; /* the kernel's own vDSO sits there */
		r = ck_reader_read(rd, rg->first_chunk, rg->nchunks, ck__write_sink, &s);
		if (r < 0)
			goto out;
	}
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_FILLED;
	if ((r = ck_chan_send(c->agent_fd, &msg, NULL, 0)) < 0)
		goto out;
	for (;;) {
		r = ck_chan_recv(c->agent_fd, &msg, NULL, 60000);
		if (r < 0) {
			ck_err_set("the restored job did not come back: %s", strerror(-r));
			goto out;
		}
		if (msg.type == CK_MSG_RST_ERROR) {
			ck_err_set("%s", msg.text);
			r = -EIO;
			goto out;
		}
		if (msg.type == CK_MSG_RESTARTED)
			break;
	}
	c->job_pid = rst;
	c->job_ready = 1;
	c->last_seq = m->seq;
	r = 0;
out:
	if (r < 0)
		ck_kill_job(c);
	ck__plan_free(&plan);
	if (rd)
		ck_reader_close(rd);
	free(layout);
	free(pd);
	return r;
}
