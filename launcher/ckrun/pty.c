/* Pseudo-terminal pairs the job made (posix_openpt, /dev/ptmx; the slave
 * opened by path or TIOCGPTPEER).
 *
 * Round, every process parked: for each master, ckrun takes a duplicate of
 * it (pidfd_getfd) and reads the pair's state without changing it: the
 * slave's termios (TCGETS2: flags, c_cc, both speeds), its window size, the
 * lock (TIOCGPTLCK) and packet mode (TIOCGPKT); saved as a data chunk on
 * the first descriptor of the master. Bytes one side wrote that the other
 * has not read are taken and put back (pty_queue.c) and saved with the
 * state; where that cannot be done exactly (packet mode, termios locked,
 * EXTPROC, the slave's output stopped, more than half the line
 * discipline's buffer of input) a pair holding any refuses the round, as
 * does a status packet not read yet (POLLPRI in packet mode), and a master
 * whose slave no process of the job holds (what waits for that slave
 * cannot be seen). A slave whose master is not the job's (a terminal
 * outside, other than ckrun's stdio) is reopened by path, as any device.
 *
 * Restore: one new pair per saved master (/dev/ptmx, unlocked, the slave
 * through TIOCGPTPEER), given the saved state and its unread bytes, and
 * packet mode and the lock put back last;
 * every holder of the master gets that description, each slave
 * description a new open of the new slave with its flags. The pts number
 * is the kernel's choice: ptsname() names the new one. */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <asm/termbits.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/pty_queue.h"
#include "launcher/common/ck_err.h"

#define CK__PTY_MAGIC 0x50545931u /* "PTY1" */

/* The saved state of one pair (a data chunk of its master's descriptor),
 * followed by the bytes waiting: in[nin] (as pty_queue.h says, with its
 * escape characters), out[nout]. */
struct ck__ptystate {
	uint32_t magic;
	uint32_t size; /* of this struct: a later layout is refused, not misread */
	struct termios2 t;
	struct winsize ws;
	int32_t lock, pkt;
	/* images before 2026-12-07 end here (no bytes waiting) */
	uint32_t nin, nout;
	uint8_t lnext, eofc, erase, pad8;
	uint32_t pad;
};
#define CK__PTY_SIZE_V1 ((uint32_t)offsetof(struct ck__ptystate, nin))

/* ---- round ---- */

static int ck__getfd(pid_t pid, int fd)
{
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0), r;

	if (pfd < 0)
		return -1;
	r = (int)syscall(SYS_pidfd_getfd, pfd, fd, 0);
	close(pfd);
	if (r >= 0)
		fcntl(r, F_SETFD, FD_CLOEXEC);
	return r;
}

/* Bytes waiting to be read through fd (a duplicate of the job's). */
static int ck__unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) < 0 ? -1 : n;
}

/* The job's slave descriptions of pts n: how many there are (or -errno
 * with the message set); *unread: bytes waiting for the slave, and where
 * (one tty: every description sees the same). */
static int ck__slaves(struct ckrun *c, uint64_t n, int *unread, size_t *upi, uint32_t *uk)
{
	int found = 0;

	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			struct ck_pd_fd *f = &pd->fds[k];
			int d, q;

			if (f->kind != CK_FD_PTS || f->u64[0] != n)
				continue;
			found++;
			if ((d = ck__getfd(c->procs[i].pid, f->fd)) < 0) {
				ck_err_set("process %d: descriptor %d (%s): cannot look at it: %s", c->procs[i].jpid,
					   f->fd, f->path, strerror(errno));
				return -errno;
			}
			q = ck__unread(d);
			close(d);
			if (q != 0 && *unread == 0) {
				*unread = q;
				*upi = i;
				*uk = k;
			}
		}
	}
	return found;
}

/* Termios bits the job locked (TIOCSLCKTRMIOS): a temporary termios
 * would not take. */
static int ck__locked_termios(int d)
{
	struct termios lk;
	unsigned char any = 0;

	if (ioctl(d, TIOCGLCKTRMIOS, &lk) < 0)
		return 1;
	for (size_t i = 0; i < sizeof(lk.c_cc); i++)
		any |= lk.c_cc[i];
	return lk.c_iflag || lk.c_oflag || lk.c_cflag || lk.c_lflag || any;
}

/* An open of the slave of ckrun's own (the lock, if the job set it, is
 * lifted for it and put back). */
static int ck__open_slave(int m, int flags)
{
	int lock = 0, unlock = 0, s;

	ioctl(m, TIOCGPTLCK, &lock);
	if (lock)
		ioctl(m, TIOCSPTLCK, &unlock);
	s = ioctl(m, TIOCGPTPEER, flags | O_NOCTTY | O_CLOEXEC);
	if (lock) {
		int e = errno;
		ioctl(m, TIOCSPTLCK, &lock);
		errno = e;
	}
	return s;
}

/* A description of pair n in the job with O_ASYNC: a put-back's wakeups
 * would raise its SIGIO. */
static int ck__async(struct ckrun *c, uint64_t n)
{
	for (size_t i = 0; i < c->nprocs; i++)
		for (uint32_t k = 0; k < c->procs[i].pd->nfds; k++) {
			const struct ck_pd_fd *f = &c->procs[i].pd->fds[k];
			if ((f->kind == CK_FD_PTS || f->kind == CK_FD_PTMX) && f->u64[0] == n && (f->flags & O_ASYNC))
				return 1;
		}
	return 0;
}

/* What waits in the pair, taken and put back (pty_queue.c) where that
 * is exact; else a pair holding any refuses the round. */
static int ck__take_queues(struct ckrun *c, size_t pi, struct ck_pd_fd *f, int d, const struct ck__ptystate *st,
			   int qm, int qs, size_t spi, uint32_t sk, struct ck_ptyq *q)
{
	const char *why = NULL;
	struct pollfd p = {.fd = -1, .events = POLLOUT};
	int r;

	/* nothing counted, and no line not ended yet can hide (non-canonical
	 * input is all counted): nothing to take, no slave to open */
	if (!qm && !qs && !(st->t.c_lflag & ICANON))
		return 0;
	if (st->pkt)
		why = "in packet mode";
	else if (ck__locked_termios(d))
		why = "with termios locked (TIOCSLCKTRMIOS)";
	else if (st->t.c_lflag & EXTPROC)
		why = "in EXTPROC mode";
	else if (ck__async(c, f->u64[0]))
		why = "with O_ASYNC set (putting them back would signal the job)";
	else if (qs >= (int)CK_PTYQ_IN_MAX / 2)
		why = "more than half its line discipline's buffer";
	else if ((p.fd = ck__open_slave(d, O_RDWR | O_NONBLOCK)) < 0) {
		ck_err_set("process %d: descriptor %d (pseudo-terminal master of /dev/pts/%llu): cannot open its "
			   "slave: %s",
			   c->procs[pi].jpid, f->fd, (unsigned long long)f->u64[0], strerror(errno));
		return -errno;
	} else if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
		why = "its slave's output stopped (flow control)";
	if (why) {
		if (p.fd >= 0)
			close(p.fd);
		if (qs > 0) {
			ck_err_set("process %d: descriptor %d (%s, pseudo-terminal slave): %d bytes written to its "
				   "master not read yet, %s: not restored",
				   c->procs[spi].jpid, c->procs[spi].pd->fds[sk].fd, c->procs[spi].pd->fds[sk].path,
				   qs, why);
			return -ENOTSUP;
		}
		if (qm > 0) {
			ck_err_set("process %d: descriptor %d (pseudo-terminal master of /dev/pts/%llu): %d bytes "
				   "written to its slave not read yet, %s: not restored",
				   c->procs[pi].jpid, f->fd, (unsigned long long)f->u64[0], qm, why);
			return -ENOTSUP;
		}
		return 0; /* a canonical line not ended yet is not seen (NOTES) */
	}
	if ((r = ck_ptyq_alloc(q)) < 0) {
		close(p.fd);
		return r;
	}
	r = ck_ptyq_read(d, p.fd, &st->t, q);
	close(p.fd);
	if (r < 0)
		ck_err_wrap("process %d: descriptor %d (pseudo-terminal master of /dev/pts/%llu)", c->procs[pi].jpid,
			    f->fd, (unsigned long long)f->u64[0]);
	return r;
}

/* The state and the bytes waiting, as one data chunk. */
static int ck__save_state(struct ck_writer *w, struct ck_pd_fd *f, struct ck__ptystate *st,
			  const struct ck_ptyq *q)
{
	size_t n;
	uint8_t *buf;
	int r;

	st->nin = q->nin;
	st->nout = q->nout;
	st->lnext = q->lnext;
	st->eofc = q->eofc;
	st->erase = q->erase;
	n = sizeof(*st) + q->nin + q->nout;
	if (!(buf = malloc(n))) {
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	memcpy(buf, st, sizeof(*st));
	if (q->nin)
		memcpy(buf + sizeof(*st), q->in, q->nin);
	if (q->nout)
		memcpy(buf + sizeof(*st) + q->nin, q->out, q->nout);
	r = ck_writer_add(w, n, ck_mem_src, buf, &f->data_chunk, &f->data_nchunks);
	free(buf);
	return r;
}

static int ck__record_master(struct ckrun *c, struct ck_writer *w, size_t pi, struct ck_pd_fd *f)
{
	struct ck__ptystate st;
	struct ck_ptyq *pq = NULL;
	int d, q, r, qs = 0;
	size_t spi = 0;
	uint32_t sk = 0;

	if ((r = ck__slaves(c, f->u64[0], &qs, &spi, &sk)) < 0)
		return r;
	if (r == 0) {
		ck_err_set("process %d: descriptor %d (pseudo-terminal master of /dev/pts/%llu): no process of "
			   "the job holds its slave, so what waits for the slave cannot be seen: not restored",
			   c->procs[pi].jpid, f->fd, (unsigned long long)f->u64[0]);
		return -ENOTSUP;
	}
	if ((d = ck__getfd(c->procs[pi].pid, f->fd)) < 0) {
		ck_err_set("process %d: descriptor %d (%s): cannot look at it: %s", c->procs[pi].jpid, f->fd,
			   f->path, strerror(errno));
		return -errno;
	}
	memset(&st, 0, sizeof(st));
	st.magic = CK__PTY_MAGIC;
	st.size = sizeof(st);
	q = ck__unread(d);
	if (ioctl(d, TCGETS2, &st.t) < 0 || ioctl(d, TIOCGWINSZ, &st.ws) < 0 || ioctl(d, TIOCGPTLCK, &st.lock) < 0 ||
	    ioctl(d, TIOCGPKT, &st.pkt) < 0 || q < 0) {
		r = -errno;
		ck_err_set("process %d: descriptor %d (pseudo-terminal master of /dev/pts/%llu): cannot read its "
			   "state: %s",
			   c->procs[pi].jpid, f->fd, (unsigned long long)f->u64[0], strerror(errno));
		goto out;
	}
	/* In packet mode, a status packet (flow control, a flush) not read
	 * yet is POLLPRI, and cannot be made again: refused as bytes are. */
	if (st.pkt) {
		struct pollfd p = {.fd = d, .events = POLLPRI};
		if (poll(&p, 1, 0) == 1 && (p.revents & POLLPRI)) {
			r = -ENOTSUP;
			ck_err_set("process %d: descriptor %d (pseudo-terminal master of /dev/pts/%llu): a packet-mode "
				   "status not read yet: not restored",
				   c->procs[pi].jpid, f->fd, (unsigned long long)f->u64[0]);
			goto out;
		}
	}
	if (!(pq = calloc(1, sizeof(*pq)))) {
		r = -ENOMEM;
		ck_err_set("out of memory");
		goto out;
	}
	if ((r = ck__take_queues(c, pi, f, d, &st, q, qs, spi, sk, pq)) < 0)
		goto out;
	r = ck__save_state(w, f, &st, pq);
out:
	if (pq)
		ck_ptyq_free(pq);
	free(pq);
	close(d);
	return r;
}

/* /proc/PID/stat's pgrp, session, tty_nr and tpgid (ckrun's pid
 * namespace numbers them). */
static int ck__stat_tty(pid_t pid, int32_t v[4])
{
	char path[64], buf[1024], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	if (!(p = strrchr(buf, ')')) || sscanf(p + 2, "%*c %*d %d %d %d %d", &v[0], &v[1], &v[2], &v[3]) != 4)
		return -EIO;
	return 0;
}

/* A process's controlling terminal: a slave of one of the job's pairs.
 * Its session leader's slave descriptor is marked (u64[1]: CK_PTS_CTTY;
 * u64[2]: the foreground group as the job numbers it, 0: none), so that
 * the restore makes it the session's terminal again before the leader's
 * children exist (they inherit it, as they did). */
#define CK_PTS_CTTY 0x1

static int ck__ctty(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		int32_t v[4], lv[4], jp = 0, jg = 0, js = 0;
		unsigned maj, n;
		struct ck_pd_fd *mine = NULL;
		size_t lead = c->nprocs;
		int r;

		if ((r = ck__stat_tty(c->procs[i].pid, v)) < 0) {
			ck_err_set("process %d: cannot read its /proc stat: %s", c->procs[i].jpid, strerror(-r));
			return r;
		}
		for (size_t j = 0; j < c->nprocs; j++)
			if (c->procs[j].pid == v[1])
				lead = j;
		if (!v[2]) {
			/* no terminal, while its session has one: it gave it up
			 * (TIOCNOTTY), which a restore cannot repeat for it alone */
			if (lead < c->nprocs && lead != i && ck__stat_tty(c->procs[lead].pid, lv) == 0 && lv[2]) {
				ck_err_set("process %d: no controlling terminal while its session's leader (process %d) "
					   "has one: not restored",
					   c->procs[i].jpid, c->procs[lead].jpid);
				return -ENOTSUP;
			}
			continue;
		}
		maj = ((unsigned)v[2] >> 8) & 0xfff;
		n = ((unsigned)v[2] & 0xff) | (((unsigned)v[2] >> 12) & 0xfff00);
		if (maj >= 136 && maj <= 143)
			n += (maj - 136) * 256;
		for (size_t j = 0; j < c->nprocs && !mine; j++)
			for (uint32_t k = 0; k < c->procs[j].pd->nfds && !mine; k++)
				if (c->procs[j].pd->fds[k].kind == CK_FD_PTMX && c->procs[j].pd->fds[k].u64[0] == n)
					mine = &c->procs[j].pd->fds[k];
		if (maj < 136 || maj > 143 || !mine) {
			ck_err_set("process %d: its controlling terminal (device %u:%u) is not a pseudo-terminal of "
				   "the job's: not restored",
				   c->procs[i].jpid, maj, ((unsigned)v[2] & 0xff) | (((unsigned)v[2] >> 12) & 0xfff00));
			return -ENOTSUP;
		}
		if (lead == c->nprocs) {
			ck_err_set("process %d: the leader of the session of its controlling terminal /dev/pts/%u has "
				   "exited: not restored",
				   c->procs[i].jpid, n);
			return -ENOTSUP;
		}
		if (lead != i)
			continue; /* inherits it from the leader's restore */
		mine = NULL;
		for (uint32_t k = 0; k < pd->nfds && !mine; k++)
			if (pd->fds[k].kind == CK_FD_PTS && pd->fds[k].u64[0] == n)
				mine = &pd->fds[k];
		if (!mine) {
			ck_err_set("process %d: leads the session of its controlling terminal /dev/pts/%u but holds no "
				   "descriptor of it: not restored",
				   c->procs[i].jpid, n);
			return -ENOTSUP;
		}
		/* the foreground group: a group of the job's, numbered as the job sees it */
		for (size_t j = 0; j < c->nprocs && v[3] > 0 && !jg; j++) {
			if (ck__stat_tty(c->procs[j].pid, lv) == 0 && lv[0] == v[3] &&
			    ck_proc_ids(c->procs[j].pid, &jp, &jg, &js, NULL) < 0)
				jg = 0;
		}
		if (v[3] > 0 && !jg) {
			ck_err_set("process %d: the foreground process group of its controlling terminal /dev/pts/%u "
				   "has no process in the job: not restored",
				   c->procs[i].jpid, n);
			return -ENOTSUP;
		}
		mine->u64[1] = CK_PTS_CTTY;
		mine->u64[2] = (uint64_t)(uint32_t)jg;
	}
	return 0;
}

int ck_ptys_record(struct ckrun *c, struct ck_writer *w)
{
	int r;

	for (size_t i = 0; i < c->nprocs; i++)
		for (uint32_t k = 0; k < c->procs[i].pd->nfds; k++)
			if (c->procs[i].pd->fds[k].kind == CK_FD_PTS)
				c->procs[i].pd->fds[k].u64[1] = c->procs[i].pd->fds[k].u64[2] = 0;
	if ((r = ck__ctty(c)) < 0)
		return r;
	/* Slaves of a master the job does not hold: devices by path. */
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			struct ck_pd_fd *f = &pd->fds[k];
			int paired = 0;

			if (f->kind != CK_FD_PTS)
				continue;
			for (size_t j = 0; j < c->nprocs && !paired; j++)
				for (uint32_t m = 0; m < c->procs[j].pd->nfds && !paired; m++)
					paired = c->procs[j].pd->fds[m].kind == CK_FD_PTMX &&
						 c->procs[j].pd->fds[m].u64[0] == f->u64[0];
			if (!paired)
				f->kind = CK_FD_DEV;
		}
	}
	/* Each pair once, from the first descriptor of its master. */
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			struct ck_pd_fd *f = &pd->fds[k];
			int seen = 0;

			if (f->kind != CK_FD_PTMX)
				continue;
			f->data_chunk = 0;
			f->data_nchunks = 0;
			for (size_t j = 0; j <= i && !seen; j++)
				for (uint32_t m = 0; m < c->procs[j].pd->nfds && !seen; m++) {
					const struct ck_pd_fd *g = &c->procs[j].pd->fds[m];
					if (j == i && m == k)
						break;
					seen = g->kind == CK_FD_PTMX && g->u64[0] == f->u64[0];
				}
			if (!seen && (r = ck__record_master(c, w, i, f)) < 0)
				return r;
		}
	}
	return 0;
}

/* ---- restore ---- */

/* A sink that refuses to run past its buffer (a damaged image). */
struct ck__bounded {
	uint8_t *p;
	size_t cap, len;
};

static int ck__bounded_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct ck__bounded *b = arg;

	if (off > b->cap || len > b->cap - off)
		return -EFBIG;
	memcpy(b->p + off, buf, len);
	if (off + len > b->len)
		b->len = off + len;
	return 0;
}

/* The state and the bytes waiting of a saved pair from its chunk. */
static int ck__parse(const struct ck__bounded *b, struct ck__ptystate *st, struct ck_ptyq *q)
{
	const uint8_t *p = b->p + sizeof(*st);
	size_t rest;

	memset(st, 0, sizeof(*st));
	memcpy(st, b->p, b->len < sizeof(*st) ? b->len : sizeof(*st));
	if (st->magic != CK__PTY_MAGIC || (st->size != sizeof(*st) && st->size != CK__PTY_SIZE_V1) ||
	    b->len < st->size)
		return -EINVAL;
	if (st->size == CK__PTY_SIZE_V1) {
		st->nin = st->nout = 0;
		st->lnext = st->eofc = st->erase = 0;
		return 0;
	}
	rest = b->len - sizeof(*st);
	if (st->nin > 2 * CK_PTYQ_IN_FIT || st->nout > CK_PTYQ_OUT_MAX || rest != (size_t)st->nin + st->nout)
		return -EINVAL;
	q->nin = st->nin;
	q->nout = st->nout;
	q->lnext = st->lnext;
	q->eofc = st->eofc;
	q->erase = st->erase;
	q->in = (uint8_t *)p;
	q->out = (uint8_t *)p + q->nin;
	return 0;
}

/* The saved state of pair n; q->out points into *buf (the caller frees it). */
static int ck__state(struct ck_reader *rd, struct ck_objs *o, uint64_t n, struct ck__ptystate *st,
		     struct ck_ptyq *q, uint8_t **buf)
{
	for (size_t i = 0; i < o->npds; i++)
		for (uint32_t k = 0; k < o->pds[i]->nfds; k++) {
			const struct ck_pd_fd *x = &o->pds[i]->fds[k];
			struct ck__bounded b = {.cap = sizeof(*st) + 2 * CK_PTYQ_IN_FIT + CK_PTYQ_OUT_MAX};
			int r;

			if (x->kind != CK_FD_PTMX || x->u64[0] != n || !x->data_nchunks)
				continue;
			if (!(b.p = *buf = calloc(1, b.cap))) {
				ck_err_set("out of memory");
				return -ENOMEM;
			}
			if ((r = ck_reader_read(rd, x->data_chunk, x->data_nchunks, ck__bounded_sink, &b)) < 0 &&
			    r != -EFBIG)
				return r;
			if (r == -EFBIG || ck__parse(&b, st, q) < 0) {
				ck_err_set("process %d: descriptor %d (pseudo-terminal master): its saved state is not "
					   "one this ckrun reads",
					   o->pds[i]->pid, x->fd);
				return -EINVAL;
			}
			return 0;
		}
	ck_err_set("pseudo-terminal /dev/pts/%llu: the checkpoint holds no state for it", (unsigned long long)n);
	return -EINVAL;
}

/* The new pair for saved pts n: fd[0] the master, fd[1] a slave. */
static int ck__pair(struct ck_reader *rd, struct ck_objs *o, uint64_t n, struct ck_obj **out)
{
	struct ck_obj *ob = ck_obj_find(o, CK_FD_PTMX, n, 0);
	struct ck__ptystate st;
	struct ck_ptyq *q = NULL;
	uint8_t *buf = NULL;
	int m = -1, s = -1, unlock = 0, r;

	if (ob) {
		*out = ob;
		return 0;
	}
	if (!(q = calloc(1, sizeof(*q)))) {
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	if ((r = ck__state(rd, o, n, &st, q, &buf)) < 0)
		goto fail;
	if ((m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0 || ioctl(m, TIOCSPTLCK, &unlock) < 0 ||
	    (s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)) < 0 ||
	    ioctl(s, TCSETS2, &st.t) < 0 || ioctl(s, TIOCSWINSZ, &st.ws) < 0) {
		r = -errno;
		ck_err_set("pseudo-terminal /dev/pts/%llu: cannot make it again: %s", (unsigned long long)n,
			   strerror(errno));
		goto fail;
	}
	/* the bytes before packet mode: a master in it would read them as packets */
	if ((r = ck_ptyq_put(m, s, &st.t, q)) < 0) {
		ck_err_wrap("pseudo-terminal /dev/pts/%llu: cannot put back its unread bytes", (unsigned long long)n);
		goto fail;
	}
	if (fcntl(s, F_SETFL, O_RDWR) < 0 || ioctl(m, TIOCPKT, &st.pkt) < 0 || ioctl(m, TIOCSPTLCK, &st.lock) < 0) {
		r = -errno;
		ck_err_set("pseudo-terminal /dev/pts/%llu: cannot make it again: %s", (unsigned long long)n,
			   strerror(errno));
		goto fail;
	}
	if (!(ob = ck_obj_add(o, CK_FD_PTMX, n, 0))) {
		r = -ENOMEM;
		goto fail;
	}
	ob->fd[0] = m;
	ob->fd[1] = s;
	*out = ob;
	free(q);
	free(buf);
	return 0;
fail:
	if (s >= 0)
		close(s);
	if (m >= 0)
		close(m);
	free(q);
	free(buf);
	return r;
}

/* Flags a new open of the slave takes from the saved description; the
 * rest (O_ASYNC) libckpt puts back itself (fdstate.c). */
#define CK__PTS_FLAGS (O_ACCMODE | O_NONBLOCK | O_APPEND)

int ck_pty_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	struct ck_obj *ob = NULL;
	int r = ck__pair(rd, o, f->u64[0], &ob);

	if (r < 0)
		return r;
	if (f->kind == CK_FD_PTMX) {
		/* every descriptor of a master is one description: its flags */
		*fd = fcntl(ob->fd[0], F_DUPFD_CLOEXEC, 3);
		if (*fd >= 0)
			fcntl(*fd, F_SETFL, f->flags & (O_NONBLOCK | O_APPEND));
		return 0;
	}
	/* A slave: the lock (if the job set it again) does not keep our own
	 * open out. */
	*fd = ck__open_slave(ob->fd[0], (int)(f->flags & CK__PTS_FLAGS));
	return 0;
}

/* Before any process exists: every pair, so that the tree can hand a
 * session leader its terminal. */
int ck_ptys_prepare(struct ck_reader *rd, struct ck_objs *o)
{
	for (size_t i = 0; i < o->npds; i++)
		for (uint32_t k = 0; k < o->pds[i]->nfds; k++) {
			const struct ck_pd_fd *f = &o->pds[i]->fds[k];
			struct ck_obj *ob;
			int r;

			if (f->kind == CK_FD_PTMX && f->data_nchunks && (r = ck__pair(rd, o, f->u64[0], &ob)) < 0)
				return r;
		}
	return 0;
}

int ck_pty_ctty(struct ck_objs *o, int32_t jpid, int *fd, int32_t *fg)
{
	for (size_t i = 0; i < o->npds; i++) {
		if (o->pds[i]->pid != jpid)
			continue;
		for (uint32_t k = 0; k < o->pds[i]->nfds; k++) {
			const struct ck_pd_fd *f = &o->pds[i]->fds[k];
			struct ck_obj *ob;

			if (f->kind != CK_FD_PTS || !(f->u64[1] & CK_PTS_CTTY))
				continue;
			if (!(ob = ck_obj_find(o, CK_FD_PTMX, f->u64[0], 0))) {
				ck_err_set("process %d: its controlling terminal /dev/pts/%llu was not made again", jpid,
					   (unsigned long long)f->u64[0]);
				return -ENOENT;
			}
			*fd = ob->fd[1];
			*fg = (int32_t)f->u64[2];
			return 1;
		}
	}
	return 0;
}
