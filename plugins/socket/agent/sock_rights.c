/* Descriptors in flight over UNIX sockets (SCM_RIGHTS): the files a
 * message carries that its receiver has not read yet.
 *
 * Round (every process parked): the socket code hands each in-flight file
 * here as ckrun's own duplicate (from a peek or from a message it took and
 * puts back). It is described like a descriptor of the job (kind, path,
 * flags, offset, contents of a memfd or deleted file, unread bytes of a
 * pipe no process holds), and tied to the job's own descriptor of the same
 * open file description (kcmp): both get one CK_PD_FD_SHARED key, so a
 * restore makes that description once and the receiver gets what the
 * sender still holds (shared offset, flags). The socket's saved queue then
 * says which message (datagram, record, or stream segment) carries which
 * files: CK_SOCK_RIGHTS_MAGIC block, see sock.h.
 * Restore: the files are made with ckrun's own descriptor machinery
 * (ck_agent_fd_make), sent again with the bytes they rode on, and closed.
 * Kinds that cannot be described in flight (a socket: its own queue could
 * carry descriptors again; epoll, inotify...) refuse the round; eventfds,
 * timerfds and signalfds are described from fdinfo (ck__anon). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "launcher/ckrun/agent_plugin.h"
#include "launcher/common/ck_err.h"
#include "launcher/common/pipe_peek.h"
#include "plugins/socket/agent/sock.h"

static int ck__same_desc(pid_t a, int fa, pid_t b, int fb)
{
	return syscall(SYS_kcmp, a, b, 0 /* KCMP_FILE */, fa, fb) == 0;
}

/* The job's own descriptor of the same description: its key (marked
 * shared if it was not). 0 if none. */
static uint64_t ck__job_key(struct ck_rights *R, int fd, const struct ck_pd_fd *d)
{
	for (size_t i = 0; i < R->n; i++)
		for (uint32_t k = 0; k < R->pds[i]->nfds; k++) {
			struct ck_pd_fd *g = &R->pds[i]->fds[k];
			if (g->kind != d->kind || g->dev != d->dev || g->ino != d->ino ||
			    (g->xflags & CK_PD_FD_STDIO_FILE) || !ck__same_desc(getpid(), fd, R->pids[i], g->fd))
				continue;
			if (!(g->xflags & CK_PD_FD_SHARED)) {
				g->xflags |= CK_PD_FD_SHARED;
				g->pipe_off = (uint64_t)(uint32_t)R->pds[i]->pid << 32 | (uint32_t)g->fd;
			}
			return g->pipe_off;
		}
	return 0;
}

/* Whether a process of the job holds an end of this pipe (its bytes are
 * saved with that descriptor, ckrun/pipes.c). */
static int ck__job_holds_pipe(struct ck_rights *R, const struct ck_pd_fd *d)
{
	for (size_t i = 0; i < R->n; i++)
		for (uint32_t k = 0; k < R->pds[i]->nfds; k++) {
			const struct ck_pd_fd *g = &R->pds[i]->fds[k];
			if (g->kind == d->kind && g->dev == d->dev && g->ino == d->ino)
				return 1;
		}
	return 0;
}

/* The unread bytes of a pipe only messages hold, copied and left in it. */
static int ck__pipe_bytes(struct ck_rights *R, int fd, struct ck_pd_fd *d)
{
	char path[64], *buf = NULL;
	int rfd, avail = 0, r = 0;

	for (size_t j = 0; j < R->nd; j++)
		if (R->d[j].kind == d->kind && R->d[j].dev == d->dev && R->d[j].ino == d->ino) {
			d->data_chunk = R->d[j].data_chunk;
			d->data_nchunks = R->d[j].data_nchunks;
			return 0;
		}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* a read end: itself (a second open, closed, may be a last reader
	 * going, which raises the O_ASYNC signal of the pipe's other side) */
	rfd = (d->flags & O_ACCMODE) == O_RDONLY ? fcntl(fd, F_DUPFD_CLOEXEC, 0)
						  : open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (rfd < 0)
		return -errno;
	if (ioctl(rfd, FIONREAD, &avail) < 0 || avail <= 0)
		goto out;
	if (!(buf = malloc((size_t)avail))) {
		r = -ENOMEM;
		goto out;
	}
	if ((r = ck_pipe_peek(path, rfd, (uint32_t)fcntl(rfd, F_GETPIPE_SZ), buf, (size_t)avail)) == 0)
		r = ck_writer_add(R->w, (size_t)avail, ck_mem_src, buf, &d->data_chunk, &d->data_nchunks);
out:
	free(buf);
	close(rfd);
	return r;
}

/* A memfd's or deleted file's contents (the job is parked). */
static int ck__contents(struct ck_rights *R, int fd, struct ck_pd_fd *d)
{
	char *buf;
	size_t got = 0;
	int r;

	if (!d->size)
		return 0;
	if (!(buf = malloc(d->size)))
		return -ENOMEM;
	while (got < d->size) {
		ssize_t n = pread(fd, buf + got, d->size - got, (off_t)got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	memset(buf + got, 0, d->size - got);
	r = ck_writer_add(R->w, d->size, ck_mem_src, buf, &d->data_chunk, &d->data_nchunks);
	free(buf);
	return r;
}

/* Our duplicate's fdinfo, NUL-terminated (the job is parked: nobody
 * changes what it says meanwhile). */
static int ck__fdinfo(int fd, char *text, size_t len)
{
	char path[64];
	ssize_t n;
	int f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if ((f = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(f, text, len - 1);
	close(f);
	if (n <= 0)
		return -EIO;
	text[n] = 0;
	return 0;
}

/* The value after key in fdinfo text; -1 (all ones) if absent. */
static uint64_t ck__info(const char *text, const char *key, int base, int *missing)
{
	const char *p = strstr(text, key);

	if (!p) {
		*missing = 1;
		return ~0ull;
	}
	return strtoull(p + strlen(key), NULL, base);
}

/* A timerfd's time left and interval, when they were read (on the job's
 * clock: after the cut), and then its expirations not read yet: the
 * gettime forwards an expired periodic timer over the periods since, and
 * fdinfo counted one tick till then. */
static int ck__timerfd_read(int fd, struct ck_pd_fd *d, char *text, size_t len, int *missing)
{
	struct itimerspec its;
	int r;

	if (timerfd_gettime(fd, &its) < 0)
		return -errno;
	d->mtime_ns = (int64_t)ck_agent_job_now();
	if ((r = ck__fdinfo(fd, text, len)) < 0)
		return r;
	d->size = ck__info(text, "ticks:", 10, missing);
	d->u64[2] = (uint64_t)its.it_value.tv_sec * 1000000000ull + (uint64_t)its.it_value.tv_nsec;
	d->u64[3] = (uint64_t)its.it_interval.tv_sec * 1000000000ull + (uint64_t)its.it_interval.tv_nsec;
	return 0;
}

/* The anonymous-inode files a message can carry, described as libckpt
 * describes the job's own (libckpt/fds.c) so that one remake serves both:
 * an eventfd's count and semaphore mode; a timerfd's clock, settime flags,
 * time left and interval (timerfd_gettime, which forwards an expired
 * periodic timer) and expirations not read yet; a signalfd's mask. */
static int ck__anon(int fd, struct ck_pd_fd *d)
{
	char text[1024];
	int r, missing = 0;

	if ((r = ck__fdinfo(fd, text, sizeof(text))) < 0)
		return r;
	if (!strcmp(d->path, "anon_inode:[eventfd]")) {
		d->kind = CK_FD_EVENTFD;
		d->u64[0] = ck__info(text, "eventfd-count:", 16, &missing);
		d->u64[1] = ck__info(text, "eventfd-semaphore:", 10, &missing) != 0;
	} else if (!strcmp(d->path, "anon_inode:[timerfd]")) {
		d->kind = CK_FD_TIMERFD;
		d->u64[0] = ck__info(text, "clockid:", 10, &missing);
		d->u64[1] = ck__info(text, "settime flags:", 8, &missing);
		if ((r = ck__timerfd_read(fd, d, text, sizeof(text), &missing)) < 0)
			return r;
		/* 0 left: disarmed, or past its expiry with the interrupt not
		 * run yet (the kernel clamps the remainder at 0; as for the
		 * job's own, libckpt/fds.c): read again once it has had time
		 * to run; an armed one counted an expiration since (periodic
		 * and due again: 1 ns left, due now) */
		if (!d->u64[2] && (d->u64[3] || !d->size)) {
			uint64_t before = d->size;

			usleep(2000);
			if ((r = ck__timerfd_read(fd, d, text, sizeof(text), &missing)) < 0)
				return r;
			if (!d->u64[2] && d->u64[3] && d->size > before)
				d->u64[2] = 1;
		}
	} else {
		d->kind = CK_FD_SIGNALFD;
		d->u64[0] = ck__info(text, "sigmask:", 16, &missing);
	}
	return missing ? -ENOTSUP : 0; /* (a kernel that does not say it) */
}

static int ck__describe(struct ck_rights *R, int fd, struct ck_pd_fd *d)
{
	char link[64];
	struct statfs sf;
	struct stat st;
	ssize_t n;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	d->peer = -1;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, d->path, sizeof(d->path) - 1);
	if (n < 0 || fstat(fd, &st) < 0)
		return -errno;
	d->path[n] = 0;
	d->flags = fcntl(fd, F_GETFL);
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	d->size = (uint64_t)st.st_size;
	d->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
	d->mode = st.st_mode;
	n = lseek(fd, 0, SEEK_CUR);
	d->offset = n > 0 ? (uint64_t)n : 0;
	if (!strcmp(d->path, "anon_inode:[eventfd]") || !strcmp(d->path, "anon_inode:[timerfd]") ||
	    !strcmp(d->path, "anon_inode:[signalfd]"))
		return ck__anon(fd, d);
	switch (st.st_mode & S_IFMT) {
	case S_IFREG:
		if (!strncmp(d->path, "/memfd:", 7)) {
			d->kind = CK_FD_MEMFD;
			d->u64[0] = (uint64_t)fcntl(fd, F_GET_SEALS);
			return ck__contents(R, fd, d);
		}
		n = (ssize_t)strlen(d->path);
		if (n > 10 && !strcmp(d->path + n - 10, " (deleted)")) {
			d->kind = CK_FD_DELETED;
			return ck__contents(R, fd, d);
		}
		if (!strncmp(d->path, "/proc/", 6))
			return -ENOTSUP; /* a /proc file is opened by its process, inside the job */
		/* a POSIX message queue: opened again inside the job's IPC
		 * namespace, which does not exist yet when descriptors in
		 * flight are made (before, it was taken for a file "/q") */
		if (fstatfs(fd, &sf) == 0 && sf.f_type == 0x19800202 /* MQUEUE_MAGIC */)
			return -ENOTSUP;
		d->kind = CK_FD_FILE;
		return 0;
	case S_IFDIR:
		d->kind = CK_FD_FILE;
		return 0;
	case S_IFCHR:
		d->kind = CK_FD_DEV;
		return 0;
	case S_IFIFO:
		d->kind = strncmp(d->path, "pipe:[", 6) ? CK_FD_FIFO : CK_FD_PIPE;
		d->pipe_cap = (uint32_t)fcntl(fd, F_GETPIPE_SZ);
		return ck__job_holds_pipe(R, d) ? 0 : ck__pipe_bytes(R, fd, d);
	default:
		return -ENOTSUP;
	}
}

int ck_rights_add(struct ck_rights *R, int fd, int32_t jpid, int sockfd, uint32_t *idx)
{
	struct ck_pd_fd *d;
	int r;

	/* the same description in flight twice: one entry */
	for (size_t j = 0; j < R->nd; j++)
		if (ck__same_desc(getpid(), fd, getpid(), R->fd[j])) {
			*idx = (uint32_t)j;
			return 0;
		}
	if (R->nd >= CK_SOCK_RIGHTS_MAX) {
		ck_err_set("process %d: more than %d descriptors in flight on UNIX sockets: not supported", jpid,
			   CK_SOCK_RIGHTS_MAX);
		return -E2BIG;
	}
	if (!R->d && (!(R->d = calloc(CK_SOCK_RIGHTS_MAX, sizeof(*R->d))) ||
		      !(R->fd = calloc(CK_SOCK_RIGHTS_MAX, sizeof(*R->fd)))))
		return -ENOMEM;
	d = &R->d[R->nd];
	if ((r = ck__describe(R, fd, d)) < 0) {
		if (r == -ENOTSUP)
			ck_err_set("process %d: socket (descriptor %d) has a descriptor in flight (SCM_RIGHTS) that "
				   "cannot be saved: %s (%.200s)",
				   jpid, sockfd,
				   (d->mode & S_IFMT) == S_IFSOCK ? "a socket" : !strncmp(d->path, "anon_inode:", 11) ?
				   "an anonymous inode" : "a kind not supported in flight", d->path);
		else if (!strstr(ck_err_msg(), "flight"))
			ck_err_set("process %d: socket (descriptor %d): cannot save a descriptor in flight (%.200s): %s",
				   jpid, sockfd, d->path, strerror(-r));
		return r;
	}
	if (d->kind != CK_FD_PIPE && d->kind != CK_FD_FIFO) {
		uint64_t key = ck__job_key(R, fd, d);
		d->xflags |= CK_PD_FD_SHARED;
		/* held by no process: a key no descriptor of the job has */
		d->pipe_off = key ? key : (1ull << 63) | (uint64_t)R->nd;
	}
	if ((R->fd[R->nd] = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return -errno;
	*idx = (uint32_t)R->nd++;
	return 0;
}

void ck_rights_close(struct ck_rights *R)
{
	for (size_t j = 0; j < R->nd; j++)
		close(R->fd[j]);
	free(R->d);
	free(R->fd);
	memset(R, 0, sizeof(*R));
}

/* ---- restore ---- */

struct ck__rhdr {
	uint32_t magic, ndesc, nmark, nidx;
};

int ck_rights_send(int via, const char *p, size_t len, const int *fds, uint32_t nfd, const struct sockaddr *to,
		   socklen_t tl)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr a;
	} u;
	size_t put = 0;

	for (;;) {
		struct iovec iov = {(void *)(p + put), len - put};
		struct msghdr mh;
		ssize_t n;

		memset(&mh, 0, sizeof(mh));
		mh.msg_name = (void *)to;
		mh.msg_namelen = to ? tl : 0;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		if (nfd) {
			struct cmsghdr *c;
			memset(&u, 0, sizeof(u));
			mh.msg_control = u.b;
			mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfd);
			c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfd);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfd);
		}
		n = sendmsg(via, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EAGAIN) {
			struct pollfd pf = {via, POLLOUT, 0};
			if (poll(&pf, 1, 5000) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return -errno;
		put += (size_t)n;
		nfd = 0; /* the files went with the first part */
		if (put >= len)
			return 0;
	}
}

int ck_rights_deliver(const char *buf, size_t n, int dgram, int via, const struct sockaddr *to, socklen_t tl)
{
	struct ck__rhdr h;
	const struct ck_pd_fd *d;
	const struct ck_sock_mark *mk;
	const uint32_t *ix;
	const char *q;
	size_t qn, at = 0, rec = 0, mi = 0;
	int *made = NULL, r = 0;

	if (n < sizeof(h))
		return -EBADMSG;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != CK_SOCK_RIGHTS_MAGIC || h.nidx > 65536 * 253 || h.ndesc > CK_SOCK_RIGHTS_MAX ||
	    h.nmark > h.nidx + 1 ||
	    n < sizeof(h) + h.ndesc * sizeof(*d) + h.nmark * sizeof(*mk) + h.nidx * sizeof(*ix))
		return -EBADMSG;
	d = (const void *)(buf + sizeof(h));
	mk = (const void *)((const char *)d + h.ndesc * sizeof(*d));
	ix = (const void *)((const char *)mk + h.nmark * sizeof(*mk));
	q = (const char *)(ix + h.nidx);
	qn = n - (size_t)(q - buf);
	if (!(made = malloc((h.ndesc + 1) * sizeof(int))))
		return -ENOMEM;
	for (uint32_t i = 0; i < h.ndesc; i++)
		made[i] = -1;
	while (at < qn && r == 0) {
		/* the next record: one datagram, or the stream up to the next mark */
		size_t len, start = at;
		int fds[253];
		uint32_t nfd = 0;
		if (dgram) {
			uint32_t l32;
			if (qn - at < 4)
				break;
			memcpy(&l32, q + at, 4);
			start = at + 4;
			len = l32;
			if (mi < h.nmark && mk[mi].at == rec)
				nfd = mk[mi].nfd;
		} else if (mi < h.nmark && mk[mi].at == at) {
			len = mk[mi].len;
			nfd = mk[mi].nfd;
		} else {
			len = (mi < h.nmark ? (size_t)mk[mi].at : qn) - at;
		}
		if (start + len > qn || nfd > 253 || (nfd && mk[mi].first + nfd > h.nidx)) {
			r = -EBADMSG;
			break;
		}
		for (uint32_t k = 0; k < nfd && r == 0; k++) {
			uint32_t j = ix[mk[mi].first + k];
			if (j >= h.ndesc) {
				r = -EBADMSG;
				break;
			}
			if (made[j] < 0 && (made[j] = ck_agent_fd_make(&d[j])) < 0) {
				r = made[j];
				made[j] = -1;
				if (!strstr(ck_err_msg(), "flight"))
					ck_err_set("a descriptor in flight (%.200s): cannot re-create it: %s", d[j].path,
						   strerror(-r));
				break;
			}
			fds[k] = made[j];
		}
		if (r == 0)
			r = ck_rights_send(via, q + start, len, fds, nfd, to, tl);
		if (nfd)
			mi++;
		at = start + len;
		rec++;
	}
	for (uint32_t i = 0; i < h.ndesc; i++)
		if (made[i] >= 0)
			close(made[i]);
	free(made);
	return r;
}
