/* Pipes and FIFOs: the same pipe seen by any number of processes, and
 * the bytes in it that nobody has read yet.
 *
 * Round: with every process parked, each pipe's bytes are copied once
 * with tee(2), which leaves them unread (ck_pipe_record). Restore: one
 * pipe per saved pipe (its capacity as it was), one anchor per FIFO
 * (reopened by path, made again if the job removed it), each refilled with
 * the saved bytes before any process runs; every process then gets its
 * ends. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"
#include "launcher/common/pipe_peek.h"

/* A readable descriptor of the job's pipe: a read end the job holds, in
 * any of its processes (pidfd_getfd: closing a duplicate releases
 * nothing), else a second open through /proc. A second open, closed, of a
 * pipe with no writer left (or no reader) is a last end going, and raised
 * the O_ASYNC signal of the job's other end. */
static int ck__pipe_reader(const struct ck_round *rc, const struct ck_pd_fd *f, const char *path)
{
	for (size_t i = 0; i < rc->njprocs; i++) {
		const struct ck_procdesc *pd = rc->jprocs[i].pd;
		for (uint32_t k = 0; pd && k < pd->nfds; k++) {
			const struct ck_pd_fd *g = &pd->fds[k];
			int pidfd, fd;
			if (g->kind != f->kind || g->dev != f->dev || g->ino != f->ino ||
			    (g->flags & O_ACCMODE) != O_RDONLY)
				continue;
			if ((pidfd = (int)syscall(SYS_pidfd_open, rc->jprocs[i].pid, 0)) < 0)
				continue;
			fd = (int)syscall(SYS_pidfd_getfd, pidfd, g->fd, 0);
			close(pidfd);
			if (fd >= 0)
				return fd;
		}
	}
	return open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

/* Round, every process parked: the unread bytes of a pipe or FIFO, once
 * per pipe: copied (tee) from a readable descriptor of it, left where they
 * are, and saved with the first descriptor that holds an end of it.
 * Restore fills the new pipe before anyone runs. */
int ck_pipe_record(struct ck_round *rc, struct ck_writer *w, const struct ck_jproc *jp, struct ck_pd_fd *f)
{
	const struct ck_procdesc *pd = jp->pd;
	char path[64], *buf = NULL;
	int rfd, avail = 0, r = 0;
	size_t seen = 0;

	for (size_t j = 0; j < rc->npipes && !seen; j++)
		seen = rc->pipes[j][0] == f->dev && rc->pipes[j][1] == f->ino;
	if (seen)
		return 0;
	{
		uint64_t(*n)[2] = realloc(rc->pipes, (rc->npipes + 1) * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rc->pipes = n;
		n[rc->npipes][0] = f->dev;
		n[rc->npipes][1] = f->ino;
		rc->npipes++;
	}
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", jp->pid, f->fd);
	rfd = ck__pipe_reader(rc, f, path);
	if (rfd < 0) {
		ck_err_set("process %d: cannot open its pipe (descriptor %d) to read it: %s", pd->pid, f->fd,
			   strerror(errno));
		return -errno;
	}
	f->pipe_cap = (uint32_t)fcntl(rfd, F_GETPIPE_SZ);
	if (ioctl(rfd, FIONREAD, &avail) < 0 || avail <= 0)
		goto out;
	if (!(buf = malloc((size_t)avail))) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = ck_pipe_peek(path, rfd, f->pipe_cap, buf, (size_t)avail)) < 0) {
		ck_err_set("process %d: cannot copy the %d unread bytes of its pipe (descriptor %d): %s", pd->pid,
			   avail, f->fd, strerror(-r));
		goto out;
	}
	r = ck_writer_add(w, (size_t)avail, ck_mem_src, buf, &f->data_chunk, &f->data_nchunks);
out:
	free(buf);
	close(rfd);
	return r;
}

/* ---- restore ---- */

static void ck__drop_unheld(struct ck_objs *o, struct ck_obj *ob);

/* Sequential writes (pipes, FIFOs). */
static int ck__pipe_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	int fd = *(int *)arg;

	(void)off;
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);
		if (n <= 0) {
			ck_err_set("cannot refill a pipe with its saved bytes: %s", n < 0 ? strerror(errno) : "full");
			return n < 0 ? -errno : -ENOSPC;
		}
		done += (size_t)n;
	}
	return 0;
}

/* The saved unread bytes of a pipe (whichever process's descriptor holds
 * them) into the new pipe through wfd. */
static int ck__refill_pipe(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int wfd)
{
	/* a pipe only a message in flight holds carries its own bytes */
	if (f->data_nchunks) {
		int fl = fcntl(wfd, F_GETFL), r;
		fcntl(wfd, F_SETFL, fl | O_NONBLOCK);
		r = ck_reader_read(rd, f->data_chunk, f->data_nchunks, ck__pipe_sink, &wfd);
		fcntl(wfd, F_SETFL, fl);
		return r;
	}
	for (size_t i = 0; i < o->npds; i++)
		for (uint32_t k = 0; k < o->pds[i]->nfds; k++) {
			const struct ck_pd_fd *x = &o->pds[i]->fds[k];
			if (x->kind == f->kind && x->dev == f->dev && x->ino == f->ino && x->data_nchunks) {
				int fl = fcntl(wfd, F_GETFL), r;
				fcntl(wfd, F_SETFL, fl | O_NONBLOCK);
				r = ck_reader_read(rd, x->data_chunk, x->data_nchunks, ck__pipe_sink, &wfd);
				fcntl(wfd, F_SETFL, fl);
				return r;
			}
		}
	return 0;
}

/* A FIFO the job removed after the checkpoint (its temporary directory
 * too, as likely as not): a FIFO holds no data on disk, so making it again
 * loses nothing. */
static int ck__remake_fifo(const struct ck_pd_fd *f)
{
	char dir[CK_PD_PATH];

	for (char *p = memcpy(dir, f->path, sizeof(dir)) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkfifo(f->path, (mode_t)(f->mode & 07777)) < 0 && errno != EEXIST ? -errno : 0;
}

static int ck__pipe_obj(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, struct ck_obj **out)
{
	struct ck_obj *ob = ck_obj_find(o, CK_FD_PIPE, f->dev, f->ino);
	int p[2], r;

	if (ob) {
		*out = ob;
		return 0;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (f->pipe_cap)
		fcntl(p[0], F_SETPIPE_SZ, (int)f->pipe_cap);
	ob = ck_obj_add(o, CK_FD_PIPE, f->dev, f->ino);
	if (!ob) {
		close(p[0]);
		close(p[1]);
		return -ENOMEM;
	}
	ob->fd[0] = p[0];
	ob->fd[1] = p[1];
	if ((r = ck__refill_pipe(rd, o, f, p[1])) < 0)
		return r;
	*out = ob;
	return 0;
}

int ck_pipe_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	struct ck_obj *ob = NULL;
	int r = ck__pipe_obj(rd, o, f, &ob);

	if (r < 0) {
		if (!strstr(ck_err_msg(), "pipe"))
			ck_err_set("descriptor %d: cannot re-create its pipe: %s", f->fd, strerror(-r));
		return r;
	}
	*fd = fcntl((f->flags & O_ACCMODE) == O_RDONLY ? ob->fd[0] : ob->fd[1], F_DUPFD_CLOEXEC, 3);
	if (*fd >= 0 && (f->flags & O_NONBLOCK))
		fcntl(*fd, F_SETFL, O_NONBLOCK);
	if (o->pipes_settled) /* made by a process's descriptor: the same now */
		ck__drop_unheld(o, ob);
	return 0;
}

/* An anchor keeps the FIFO and its refilled bytes until every process
 * holds its ends. */
int ck_fifo_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	struct ck_obj *ob = ck_obj_find(o, CK_FD_FIFO, f->dev, f->ino);

	if (!ob) {
		int anchor = open(f->path, O_RDWR | O_NONBLOCK | O_CLOEXEC), r;
		if (anchor < 0 && errno == ENOENT && ck__remake_fifo(f) == 0)
			anchor = open(f->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
		if (anchor < 0) {
			*fd = -1;
			return 0;
		}
		ob = ck_obj_add(o, CK_FD_FIFO, f->dev, f->ino);
		if (!ob) {
			close(anchor);
			return -ENOMEM;
		}
		ob->fd[0] = anchor;
		if ((r = ck__refill_pipe(rd, o, f, anchor)) < 0)
			return r;
	}
	*fd = open(f->path, (f->flags & ~O_NONBLOCK) | O_NONBLOCK | O_CLOEXEC);
	if (*fd >= 0 && !(f->flags & O_NONBLOCK))
		fcntl(*fd, F_SETFL, f->flags & ~O_NONBLOCK);
	return 0;
}

/* Once the pipes are made and filled, and the descriptors in flight hold
 * theirs: the ends of a pipe no process of the job holds are closed now,
 * before any process sets O_ASYNC on the others. Closed at the end of the
 * restore, such an end was a last reader or writer going, which raised
 * the job's O_ASYNC signal on the other end (a pipe whose writers had all
 * closed, its bytes unread). */
static void ck__drop_unheld(struct ck_objs *o, struct ck_obj *ob)
{
	int held[2] = {0, 0};

	for (size_t p = 0; p < o->npds; p++)
		for (uint32_t k = 0; k < o->pds[p]->nfds; k++) {
			const struct ck_pd_fd *f = &o->pds[p]->fds[k];
			if (f->kind == CK_FD_PIPE && f->dev == ob->dev && f->ino == ob->ino)
				held[(f->flags & O_ACCMODE) != O_RDONLY] = 1;
		}
	for (int e = 0; e < 2; e++)
		if (!held[e] && ob->fd[e] >= 0) {
			close(ob->fd[e]);
			ob->fd[e] = -1;
		}
}

void ck_pipes_drop_unheld(struct ck_objs *o)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].kind == CK_FD_PIPE)
			ck__drop_unheld(o, &o->v[i]);
	o->pipes_settled = 1; /* no descriptor in flight asks for one any more */
}
