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

#include "launcher/image/chunkio.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/chunk.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/vdso.h"
#include "launcher/ckrun/agent_plugin.h"
#include "ckrun/proto.h"

struct ck__fdplan {
	int *fds;    /* prepared objects, in ckrun */
	int32_t *targets;
	uint32_t n;
};

struct ck__sink {
	pid_t pid;
	uint64_t base;
	int fd;     /* >= 0: write to a file instead */
	int sparse; /* fresh anonymous memory: zero pages are left untouched */
};

/* Into a shared memory object at the region's offset. */
struct ck__shmsink {
	int fd;
	uint64_t base;
};
static int ck__shm_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct ck__shmsink *s = arg;
	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(s->fd, (const char *)buf + done, len - done, (off_t)(s->base + off + done));
		if (n <= 0) {
			ck_err_set("cannot write restored shared memory: %s", strerror(errno));
			return -EIO;
		}
		done += (size_t)n;
	}
	return 0;
}

static int ck__write_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct ck__sink *s = arg;

	if (!buf)
		return 0; /* a zero chunk of fresh anonymous memory (sparse read) */
	if (s->sparse) {
		/* Only the runs of pages holding data: a page never written
		 * stays absent, as it was in the job (a sparse heap stays
		 * small), and costs no fault. */
		size_t start = 0; /* of the current run of data pages */
		for (size_t at = 0; at < len + CK_PAGE_SIZE; at += CK_PAGE_SIZE) { /* one step past the end: the last run */
			size_t pg = at < len && len - at < CK_PAGE_SIZE ? len - at : CK_PAGE_SIZE;
			if (at < len && !ck_chunk_is_zero((const char *)buf + at, pg))
				continue; /* the run goes on */
			if (at > start) {
				size_t end = at < len ? at : len;
				int r = ck_mem_write(s->pid, s->base + off + start, (const char *)buf + start, end - start);
				if (r < 0)
					return r;
			}
			start = at + pg;
		}
		return 0;
	}
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
	struct ck__sink s = {0, 0, fd, 0};

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

/* A deleted file made again under its own name and unlinked at once, so
 * /proc shows "PATH (deleted)" as before (CRIU's ghost files). Its
 * directory too, if the job removed it, and removed again. -1 if the name
 * is taken or cannot be made. */
static int ck__ghost_file(const char *path, mode_t mode)
{
	char dir[CK_PD_PATH], *made[64];
	int nmade = 0, fd;

	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdir(dir, 0700) == 0 && nmade < 64)
			made[nmade++] = strdup(dir);
		*p = '/';
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd >= 0)
		unlink(path);
	while (nmade > 0) {
		char *d = made[--nmade];
		if (d)
			rmdir(d);
		free(d);
	}
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
		fd = ck__ghost_file(path, f->mode & 07777);
		snprintf(dir, sizeof(dir), "%s", path);
		if (fd < 0)
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
		again = open(p, (f->flags & O_ACCMODE) | O_CLOEXEC); /* no O_NOFOLLOW: a /proc link */
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

/* Objects that several processes share: one pipe per saved pipe, one file
 * per deleted file or memfd, one anchor per FIFO, one memfd per shared
 * memory object. Keyed by the saved (dev, ino). */
struct ck__obj {
	uint32_t kind;
	uint64_t dev, ino;
	int fd[2]; /* pipe: read, write; others: fd[0] */
	uint64_t size;
};
struct ck__objs {
	struct ck__obj *v;
	size_t n;
	struct ck_procdesc **pds; /* every process's descriptor, to find saved pipe bytes */
	size_t npds;
	struct ck_agent_states *plugins; /* the plugins' agent halves (sockets) */
};

static struct ck__obj *ck__obj_find(struct ck__objs *o, uint32_t kind, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].kind == kind && o->v[i].dev == dev && o->v[i].ino == ino)
			return &o->v[i];
	return NULL;
}

/* The file behind shared memory or a deleted/memfd descriptor, whichever
 * made it first: one file for every mapping and descriptor of it. */
#define CK__OBJ_SHM 0x100 /* shared memory without a descriptor of the job's */
static struct ck__obj *ck__file_obj(struct ck__objs *o, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < o->n; i++)
		if ((o->v[i].kind == CK__OBJ_SHM || o->v[i].kind == CK_FD_MEMFD || o->v[i].kind == CK_FD_DELETED) &&
		    o->v[i].dev == dev && o->v[i].ino == ino)
			return &o->v[i];
	return NULL;
}

/* A read-write descriptor of the same file (mappings need one). */
static int ck__rdwr_again(int fd)
{
	char p[64];
	int again;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	again = open(p, O_RDWR | O_CLOEXEC);
	return again >= 0 ? again : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static struct ck__obj *ck__obj_add(struct ck__objs *o, uint32_t kind, uint64_t dev, uint64_t ino)
{
	struct ck__obj *n = realloc(o->v, (o->n + 1) * sizeof(*n));

	if (!n)
		return NULL;
	o->v = n;
	n += o->n++;
	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->dev = dev;
	n->ino = ino;
	n->fd[0] = n->fd[1] = -1;
	return n;
}

static void ck__objs_free(struct ck__objs *o)
{
	for (size_t i = 0; i < o->n; i++)
		for (int k = 0; k < 2; k++)
			if (o->v[i].fd[k] >= 0)
				close(o->v[i].fd[k]);
	free(o->v);
	o->v = NULL;
	o->n = 0;
}

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
static int ck__refill_pipe(struct ck_reader *rd, struct ck__objs *o, const struct ck_pd_fd *f, int wfd)
{
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

static int ck__pipe_obj(struct ck_reader *rd, struct ck__objs *o, const struct ck_pd_fd *f, struct ck__obj **out)
{
	struct ck__obj *ob = ck__obj_find(o, CK_FD_PIPE, f->dev, f->ino);
	int p[2], r;

	if (ob) {
		*out = ob;
		return 0;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if (f->pipe_cap)
		fcntl(p[0], F_SETPIPE_SZ, (int)f->pipe_cap);
	ob = ck__obj_add(o, CK_FD_PIPE, f->dev, f->ino);
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

/* Whether ckrun's own descriptor f->fd is the file f was, still as long
 * as the offset the job had reached in it. */
static int ck__same_file_holding(const struct ck_pd_fd *f)
{
	struct stat st;

	return fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_dev == f->dev &&
	       (uint64_t)st.st_ino == f->ino && (uint64_t)st.st_size >= f->offset;
}

static int ck__prepare_fds(struct ck_reader *rd, const struct ck_procdesc *pd, struct ck__fdplan *pl,
			   struct ck__objs *objs)
{
	pl->fds = calloc(pd->nfds + CK_RST_MAX_SHARED + 2, sizeof(int));
	pl->targets = calloc(pd->nfds + CK_RST_MAX_SHARED + 2, sizeof(int32_t));
	if (!pl->fds || !pl->targets)
		return -ENOMEM;
	for (uint32_t i = 0; i < pd->nfds; i++)
		pl->fds[i] = -1;
	for (uint32_t i = 0; i < pd->nfds; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		int fd = -1, nb = (f->flags & O_NONBLOCK) ? 1 : 0;

		switch (f->kind) {
		case CK_FD_STDIO:
		stdio:
			/* the new ckrun's descriptor of the same number, or the one
			 * the round found it was (u64[0] - 1: a dup of stdout at 5) */
			fd = fcntl(f->kind == CK_FD_STDIO && f->u64[0] >= 1 && f->u64[0] <= 3 ? (int)f->u64[0] - 1
											    : f->fd,
				   F_DUPFD_CLOEXEC, 3);
			if (fd < 0)
				fd = open("/dev/null", O_RDWR | O_CLOEXEC);
			break;
		case CK_FD_FILE:
			if ((f->xflags & CK_PD_FD_STDIO_FILE) && f->fd <= 2 && !ck__same_file_holding(f))
				goto stdio;
			/* fall through */
		case CK_FD_DEV:
			fd = ck__open_file(f);
			break;
		case CK_FD_DELETED:
		case CK_FD_MEMFD: {
			/* One file for every descriptor of it in the job; a second
			 * open() of it has its own offset. */
			struct ck__obj *ob = ck__file_obj(objs, f->dev, f->ino);
			char p[64];
			if (!ob) {
				fd = ck__make_content_file(rd, f);
				if (fd < 0)
					break;
				ob = ck__obj_add(objs, f->kind, f->dev, f->ino);
				if (!ob) {
					close(fd);
					return -ENOMEM;
				}
				ob->fd[0] = ck__rdwr_again(fd);
				break;
			}
			snprintf(p, sizeof(p), "/proc/self/fd/%d", ob->fd[0]);
			fd = open(p, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC);
			if (fd >= 0)
				lseek(fd, (off_t)f->offset, SEEK_SET);
			break;
		}
		case CK_FD_FIFO: {
			/* An anchor keeps the FIFO and its refilled bytes until every
			 * process holds its ends. */
			struct ck__obj *ob = ck__obj_find(objs, CK_FD_FIFO, f->dev, f->ino);
			if (!ob) {
				int anchor = open(f->path, O_RDWR | O_NONBLOCK | O_CLOEXEC), r;
				if (anchor < 0 && errno == ENOENT && ck__remake_fifo(f) == 0)
					anchor = open(f->path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
				if (anchor < 0)
					break;
				ob = ck__obj_add(objs, CK_FD_FIFO, f->dev, f->ino);
				if (!ob) {
					close(anchor);
					return -ENOMEM;
				}
				ob->fd[0] = anchor;
				if ((r = ck__refill_pipe(rd, objs, f, anchor)) < 0)
					return r;
			}
			fd = open(f->path, (f->flags & ~O_NONBLOCK) | O_NONBLOCK | O_CLOEXEC);
			if (fd >= 0 && !nb)
				fcntl(fd, F_SETFL, f->flags & ~O_NONBLOCK);
			break;
		}
		case CK_FD_PIPE: {
			struct ck__obj *ob = NULL;
			int r = ck__pipe_obj(rd, objs, f, &ob);
			if (r < 0) {
				if (!strstr(ck_err_msg(), "pipe"))
					ck_err_set("descriptor %d: cannot re-create its pipe: %s", f->fd, strerror(-r));
				return r;
			}
			fd = fcntl((f->flags & O_ACCMODE) == O_RDONLY ? ob->fd[0] : ob->fd[1], F_DUPFD_CLOEXEC, 3);
			if (fd >= 0 && nb)
				fcntl(fd, F_SETFL, O_NONBLOCK);
			break;
		}
		case CK_FD_SOCKET: {
			int r = ck_agent_plugins_fd(objs->plugins, f);
			if (r < 0)
				return r;
			fd = r;
			break;
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

static int ck__shm_region(const struct ck_region *r)
{
	return (r->flags & CK_REG_SHARED) && (r->flags & CK_REG_DELETED) && !(r->flags & CK_REG_NODATA);
}

/* Shared memory objects (MAP_SHARED anonymous memory, deleted shm files):
 * one memfd each, as large as its largest mapping, filled once per saved
 * range, before any process exists. */
static int ck__make_shm_objects(struct ck_reader *rd, const struct ck_manifest *m, struct ck__objs *o)
{
	for (size_t i = 0; i < m->nprocs; i++)
		for (size_t k = 0; k < m->procs[i].nregions; k++) {
			const struct ck_region *r = &m->procs[i].regions[k];
			struct ck__obj *ob;
			if (!ck__shm_region(r))
				continue;
			ob = ck__file_obj(o, r->dev, r->ino);
			if (!ob) {
				/* a descriptor of it somewhere in the job: its saved
				 * contents make the file, whole */
				const struct ck_pd_fd *fdof = NULL;
				for (size_t j = 0; j < o->npds && !fdof; j++)
					for (uint32_t q = 0; q < o->pds[j]->nfds && !fdof; q++) {
						const struct ck_pd_fd *x = &o->pds[j]->fds[q];
						if ((x->kind == CK_FD_MEMFD || x->kind == CK_FD_DELETED) && x->dev == r->dev &&
						    x->ino == r->ino)
							fdof = x;
					}
				if (fdof) {
					int fd = ck__make_content_file(rd, fdof);
					if (fd < 0)
						return fd;
					ob = ck__obj_add(o, fdof->kind, r->dev, r->ino);
					if (!ob) {
						close(fd);
						return -ENOMEM;
					}
					ob->fd[0] = ck__rdwr_again(fd);
					close(fd);
					continue;
				}
				ob = ck__obj_add(o, CK__OBJ_SHM, r->dev, r->ino);
				if (!ob)
					return -ENOMEM;
				ob->fd[0] = memfd_create("ckpt-shared", MFD_CLOEXEC);
				if (ob->fd[0] < 0) {
					ck_err_set("cannot re-create shared memory %s: %s", r->path ? r->path : "",
						   strerror(errno));
					return -errno;
				}
			}
			if (r->file_off + (r->end - r->start) > ob->size) {
				ob->size = r->file_off + (r->end - r->start);
				if (ftruncate(ob->fd[0], (off_t)ob->size) < 0)
					return -errno;
			}
		}
	for (size_t i = 0; i < m->nprocs; i++)
		for (size_t k = 0; k < m->procs[i].nregions; k++) {
			const struct ck_region *r = &m->procs[i].regions[k];
			int dup = 0, rc;
			if (!ck__shm_region(r) || !r->nchunks || ck__file_obj(o, r->dev, r->ino)->kind != CK__OBJ_SHM)
				continue;
			/* saved once per range: the first process's bytes */
			for (size_t j = 0; j <= i && !dup; j++)
				for (size_t q = 0; q < m->procs[j].nregions && !dup; q++) {
					const struct ck_region *x = &m->procs[j].regions[q];
					if (x == r)
						break;
					dup = ck__shm_region(x) && x->dev == r->dev && x->ino == r->ino &&
					      x->first_chunk == r->first_chunk && x->nchunks == r->nchunks;
				}
			if (!dup) {
				struct ck__shmsink ss = {ck__file_obj(o, r->dev, r->ino)->fd[0], r->file_off};
				if ((rc = ck_reader_read(rd, r->first_chunk, r->nchunks, ck__shm_sink, &ss)) < 0)
					return rc;
			}
		}
	return 0;
}

/* Shared mappings of files in /dev/shm are memory: their saved bytes go
 * back into the file (re-created if this host lacks it). */
static int ck__prepare_shm_files(const struct ck_manifest *m)
{
	for (size_t i = 0; i < m->nprocs; i++)
		for (size_t k = 0; k < m->procs[i].nregions; k++) {
			const struct ck_region *r = &m->procs[i].regions[k];
			struct stat st;
			int fd;
			if (!(r->flags & CK_REG_SHARED) || (r->flags & CK_REG_DELETED) || !(r->flags & CK_REG_FILE) ||
			    !r->path || strncmp(r->path, "/dev/shm/", 9) || !r->nchunks)
				continue;
			fd = open(r->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
			if (fd < 0) {
				ck_err_set("cannot re-create shared memory file %s: %s", r->path, strerror(errno));
				return -errno;
			}
			if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < r->file_off + (r->end - r->start) &&
			    ftruncate(fd, (off_t)(r->file_off + (r->end - r->start))) < 0) {
				ck_err_set("cannot size shared memory file %s: %s", r->path, strerror(errno));
				close(fd);
				return -errno;
			}
			close(fd);
		}
	return 0;
}

/* Memory the restorer maps fresh and anonymous: it reads as zeros before
 * it is filled, so zero chunks need not be written (nor faulted in). */
static int ck__fresh_anon(const struct ck_region *r)
{
	return !(r->flags & (CK_REG_SHARED | CK_REG_FILE | CK_REG_DELETED | CK_REG_VDSO | CK_REG_VVAR |
			     CK_REG_VSYSCALL | CK_REG_SYSV | CK_REG_PLUGIN | CK_REG_NODATA));
}

/* Whether the kernel gives huge pages only where asked (THP "madvise"),
 * the case where asking for them while filling helps. With "always" the
 * fill gets them anyway; with "never" not at all. */
static int ck__thp_on_request(void)
{
	static int mode = -1;
	char buf[128] = "";
	FILE *f;

	if (mode >= 0)
		return mode;
	mode = 0;
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (f) {
		if (fgets(buf, sizeof(buf), f))
			mode = strstr(buf, "[madvise]") != NULL;
		fclose(f);
	}
	return mode;
}

/* A large, dense region of fresh anonymous memory is filled through huge
 * pages: on a VM each 4 KiB first touch costs a trip to the hypervisor, a
 * 2 MiB page one trip for 512. Only when 90% or more of its pages held
 * data at the cut (CK_REG_DENSE, counted page by page: a chunk with one
 * word of data says nothing): a huge page is allocated whole, so a sparse
 * region would become resident. */
static uint32_t ck__thp_fill(const struct ck_region *r)
{
	/* The job's own advice first: its huge pages were whole wherever it
	 * touched, so filling through them makes nothing more resident. */
	if (!ck__fresh_anon(r) || !r->nchunks || (r->flags & CK_REG_ADV_NOHUGE) || !ck__thp_on_request())
		return 0;
	return (r->flags & CK_REG_ADV_HUGE) || ((r->flags & CK_REG_DENSE) && r->end - r->start >= (4u << 20));
}

/* The layout the restorer maps: header, regions, strings. Regions backed
 * by a shared memory object get its descriptor (appended to the plan) and
 * are not filled through the process (shmfill[i] = 1). */
static int ck__build_layout(const struct ck_proc *p, const struct ck_procdesc *pd,
			    struct ck__fdplan *pl, struct ck__objs *objs, uint8_t *shmfill, void **out, size_t *len)
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
	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *r = &p->regions[i];
		rg[i].start = r->start;
		rg[i].end = r->end;
		rg[i].prot = r->prot;
		rg[i].flags = r->flags;
		rg[i].file_off = r->file_off;
		rg[i].fill = r->nchunks > 0;
		rg[i].map_fd = -1;
		if (r->flags & CK_REG_SYSV) {
			rg[i].map_fd = (int32_t)r->ino; /* the segment id: the restorer attaches it */
		} else if ((r->flags & CK_REG_SHARED) && (r->flags & CK_REG_DELETED)) {
			for (uint32_t k = 0; k < pd->nfds; k++) {
				const struct ck_pd_fd *f = &pd->fds[k];
				if ((f->kind == CK_FD_DELETED || f->kind == CK_FD_MEMFD) && f->ino == r->ino &&
				    (f->flags & O_ACCMODE) == O_RDWR) {
					rg[i].map_fd = f->fd;
					break;
				}
			}
		}
		if (rg[i].map_fd < 0 && ck__shm_region(r)) {
			struct ck__obj *ob = ck__file_obj(objs, r->dev, r->ino);
			uint32_t k;
			int32_t target = -1;
			if (!ob) {
				free(l);
				ck_err_set("shared memory %s has no object", r->path ? r->path : "");
				return -EPROTO;
			}
			/* one descriptor per object in this process */
			for (k = 0; k < l->nshared; k++)
				if (pl->fds[pl->n - l->nshared + k] == -2 - (int)(ob - objs->v))
					break;
			if (k == l->nshared) {
				if (l->nshared == CK_RST_MAX_SHARED) {
					free(l);
					ck_err_set("process %d maps more than %d shared memory objects", p->pid,
						   CK_RST_MAX_SHARED);
					return -E2BIG;
				}
				pl->fds[pl->n] = -2 - (int)(ob - objs->v); /* placeholder, resolved below */
				pl->targets[pl->n] = -(CK_RST_SHARED_FD + (int32_t)k) - 1;
				pl->n++;
				l->nshared++;
			}
			target = CK_RST_SHARED_FD + (int32_t)k;
			rg[i].map_fd = target;
			rg[i].fill = 0;
			shmfill[i] = 1;
		}
		rg[i].thp = shmfill[i] ? 0 : ck__thp_fill(r);
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
	/* placeholders -> our own duplicates of the objects */
	for (uint32_t k = pl->n - l->nshared; k < pl->n; k++) {
		int idx = -2 - pl->fds[k];
		pl->fds[k] = fcntl(objs->v[idx].fd[0], F_DUPFD_CLOEXEC, 3);
		if (pl->fds[k] < 0) {
			free(l);
			return -errno;
		}
	}
	l->nfds = pl->n;
	*out = l;
	*len = size;
	return 0;
}

static int ck__expect(int fd, uint32_t type, struct ck_msg *m)
{
	int r = ck_chan_recv(fd, m, NULL, 120000);

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

/* The tree to re-create: saved processes, zombies, and helpers that stand
 * in for session leaders that had exited (they start the session, create
 * its members, and exit, so the members end up init's children, as saved). */
struct ck__node {
	int32_t pid, ppid, pgid, sid;
	int creator; /* node index, -1: init */
	int helper, zombie, proc; /* proc: index in m->procs, -1 if none */
	int32_t status;
	int attached, treedone;
};

static int ck__plan_tree(const struct ck_manifest *m, struct ck__node **out, size_t *nout)
{
	size_t nt = m->ntasks ? m->ntasks : 1, n = 0;
	struct ck__node *v = calloc(2 * nt + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < nt; i++) {
		struct ck__node *x = &v[n++];
		if (m->ntasks) {
			const struct ck_task *t = &m->tasks[i];
			x->pid = t->pid;
			x->ppid = t->ppid;
			x->pgid = t->pgid;
			x->sid = t->sid;
			x->zombie = !!(t->flags & CK_TASK_ZOMBIE);
			x->status = t->status;
		} else {
			x->pid = m->procs[0].pid;
			x->ppid = 1;
		}
		x->proc = -1;
		for (size_t k = 0; k < m->nprocs; k++)
			if (m->procs[k].pid == x->pid)
				x->proc = (int)k;
		if (!x->zombie && x->proc < 0) {
			free(v);
			ck_err_set("process %d of the tree has no saved image", x->pid);
			return -EBADMSG;
		}
	}
	for (size_t i = 0; i < nt; i++) {
		struct ck__node *x = &v[i];
		int parent = -1, leader = -1;
		for (size_t k = 0; k < nt; k++) {
			if (v[k].pid == x->ppid && !v[k].zombie)
				parent = (int)k;
			if (v[k].pid == x->sid)
				leader = (int)k;
		}
		x->creator = parent;
		if (parent >= 0) {
			if (x->sid != v[parent].sid && x->sid != x->pid) {
				free(v);
				ck_err_set("process %d: its session %d cannot be rebuilt under its parent %d", x->pid, x->sid,
					   x->ppid);
				return -ENOTSUP;
			}
			continue;
		}
		/* init's child */
		if (!x->sid || x->sid == x->pid)
			continue;
		if (leader >= 0) {
			free(v);
			ck_err_set("process %d: its session leader %d is alive but not its parent: not supported", x->pid,
				   x->sid);
			return -ENOTSUP;
		}
		{
			int h = -1;
			for (size_t k = nt; k < n; k++)
				if (v[k].pid == x->sid)
					h = (int)k;
			if (h < 0) {
				h = (int)n++;
				v[h].pid = v[h].sid = v[h].pgid = x->sid;
				v[h].ppid = 1;
				v[h].creator = -1;
				v[h].helper = 1;
				v[h].proc = -1;
			}
			x->creator = h;
		}
	}
	*out = v;
	*nout = n;
	return 0;
}

static struct ck__node *ck__node_of(struct ck__node *v, size_t n, int32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].pid == pid)
			return &v[i];
	return NULL;
}

static struct ck_jproc *ck__jproc_of(struct ckrun *c, int32_t jpid)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].jpid == jpid)
			return &c->procs[i];
	return NULL;
}

/* Build the tree: every node's restorer attaches; each is told which
 * children to create (and to start its session first). */
static int ck__build_tree(struct ckrun *c, struct ck__node *v, size_t n)
{
	uint64_t start = ck_now_ns();
	size_t pending = n;

	while (pending) {
		struct ck_jproc *from;
		struct ck_msg msg;
		pid_t sender;
		int r = ck_procs_wait(c, NULL, 0, 1000, &msg, &from, &sender);

		if (r < 0)
			return r;
		if (ck_now_ns() - start > 60000000000ull) {
			ck_err_set("the restored processes did not all start within 60 s");
			return -ETIMEDOUT;
		}
		if (r == 0)
			continue;
		if (msg.type == CK_MSG_GONE) {
			ck_err_set("a restorer exited while the tree was built");
			return -EIO;
		}
		if (!from)
			continue;
		if (msg.type == CK_MSG_RST_ERROR) {
			ck_err_set("%s", msg.text);
			return -EIO;
		}
		if (msg.type == CK_MSG_RST_HELLO) {
			struct ck__node *x = ck__node_of(v, n, from->jpid);
			struct ck_msg t;
			uint32_t k = 0;
			if (!x || x->attached) {
				ck_err_set("an unexpected process %d started in the job's namespace", from->jpid);
				return -EPROTO;
			}
			x->attached = 1;
			memset(&t, 0, sizeof(t));
			t.type = CK_MSG_RST_TREE;
			for (size_t i = 0; i < n; i++) {
				struct ck_rst_child ch = {v[i].pid, 0};
				if (v[i].creator != (int)(x - v))
					continue;
				if (k == CK_RST_MAX_CHILDREN) {
					ck_err_set("process %d has more than %d children", x->pid, CK_RST_MAX_CHILDREN);
					return -E2BIG;
				}
				memcpy(t.text + k * sizeof(ch), &ch, sizeof(ch));
				k++;
			}
			t.arg[0] = k;
			t.arg[1] = (x->sid && x->sid == x->pid) ? CK_RST_SETSID : 0;
			t.len = k * (uint32_t)sizeof(struct ck_rst_child);
			if ((r = ck_chan_send(from->fd, &t, NULL, 0)) < 0)
				return r;
			continue;
		}
		if (msg.type == CK_MSG_RST_TREE_DONE) {
			struct ck__node *x = ck__node_of(v, n, from->jpid);
			if (x && !x->treedone) {
				x->treedone = 1;
				pending--;
			}
		}
	}
	return 0;
}

static int ck__ask(struct ck_jproc *p, uint32_t type, uint64_t arg, uint32_t reply)
{
	struct ck_msg m;
	int r = ck_procs_send(p, type, arg);

	if (r < 0) {
		ck_err_set("a restorer stopped answering: %s", strerror(-r));
		return r;
	}
	return reply ? ck__expect(p->fd, reply, &m) : 0;
}

/* Process groups: leaders first, then members; then zombies and helpers end. */
static int ck__finish_tree(struct ckrun *c, struct ck__node *v, size_t n)
{
	int r;

	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			struct ck__node *x = &v[i];
			int lead = x->pgid == x->pid;
			if (!x->pgid || x->sid == x->pid || lead != (pass == 0))
				continue;
			if ((r = ck__ask(ck__jproc_of(c, x->pid), CK_MSG_RST_PGID, (uint64_t)x->pgid,
					 CK_MSG_RST_PGID_DONE)) < 0) {
				ck_err_wrap("process %d, group %d", x->pid, x->pgid);
				return r;
			}
		}
	for (size_t i = 0; i < n; i++) {
		struct ck__node *x = &v[i];
		struct ck_jproc *p = ck__jproc_of(c, x->pid);
		struct ck_msg m;
		if (!x->zombie && !x->helper)
			continue;
		if ((r = ck__ask(p, CK_MSG_RST_EXIT, (uint64_t)(uint32_t)x->status, 0)) < 0)
			return r;
		/* its channel closes when it has ended */
		while ((r = ck_chan_recv(p->fd, &m, NULL, 30000)) == 0)
			;
		if (r != -EPIPE && r != -ECONNRESET) {
			ck_err_set("restored zombie or helper %d did not end: %s", x->pid, strerror(-r));
			return r;
		}
		ck_procs_drop(c, p);
	}
	return 0;
}

/* One process: layout, descriptors, memory; it then runs its restart code
 * and waits (RESTARTED) for the others. */
static int ck__restore_one(struct ck_reader *rd, struct ck_jproc *jp, const struct ck_proc *p,
			   const struct ck_procdesc *pd, struct ck__objs *objs)
{
	struct ck__fdplan plan = {0};
	struct ck_msg msg;
	void *layout = NULL;
	size_t layout_len = 0;
	uint8_t *shmfill = calloc(p->nregions + 1, 1);
	uint32_t vdso_mode = 0;
	int r;

	if (!shmfill)
		return -ENOMEM;
	r = ck__prepare_fds(rd, pd, &plan, objs);
	if (r < 0)
		goto out;
	r = ck__build_layout(p, pd, &plan, objs, shmfill, &layout, &layout_len);
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
			if (!old || (r = ck_reader_read(rd, rg->first_chunk, rg->nchunks, ck_mem_sink, old)) < 0) {
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
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_LAYOUT;
	msg.arg[0] = layout_len;
	if ((r = ck_chan_send(jp->fd, &msg, NULL, 0)) < 0 || (r = ck__expect(jp->fd, CK_MSG_RST_MAPPED, &msg)) < 0)
		goto out;
	if ((r = ck_mem_write(jp->pid, CK_RST_SCRATCH, layout, layout_len)) < 0)
		goto out;
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_FILLED;
	if ((r = ck_chan_send(jp->fd, &msg, NULL, 0)) < 0)
		goto out;
	for (uint32_t i = 0; i < plan.n; i += 200) {
		uint32_t k = plan.n - i < 200 ? plan.n - i : 200;
		memset(&msg, 0, sizeof(msg));
		msg.type = CK_MSG_RST_FDS;
		msg.len = k * 4;
		memcpy(msg.text, &plan.targets[i], k * 4);
		if ((r = ck_chan_send(jp->fd, &msg, &plan.fds[i], (int)k)) < 0)
			goto out;
	}
	if ((r = ck__expect(jp->fd, CK_MSG_RST_MAPPED, &msg)) < 0)
		goto out;
	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *rg = &p->regions[i];
		struct ck__sink s = {jp->pid, rg->start, -1, ck__fresh_anon(rg)};
		if (!rg->nchunks || shmfill[i] || ((rg->flags & CK_REG_VDSO) && vdso_mode == 0))
			continue; /* the kernel's own vDSO sits there */
		r = ck__fresh_anon(rg) ? ck_reader_read_sparse(rd, rg->first_chunk, rg->nchunks, ck__write_sink, &s)
				       : ck_reader_read(rd, rg->first_chunk, rg->nchunks, ck__write_sink, &s);
		if (r < 0)
			goto out;
	}
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_FILLED;
	r = ck_chan_send(jp->fd, &msg, NULL, 0);
out:
	if (r < 0 && !strstr(ck_err_msg(), "process"))
		ck_err_wrap("process %d", p->pid);
	ck__plan_free(&plan);
	free(layout);
	free(shmfill);
	return r;
}

int ck_restore(struct ckrun *c, struct ck_manifest *m)
{
	struct ck__objs objs = {0};
	struct ck_procdesc **pds = NULL;
	struct ck_reader *rd = NULL;
	struct ck__node *nodes = NULL;
	size_t nnodes = 0, ntop = 0, restarted = 0;
	pid_t *top = NULL;
	int r;

	if (!m->nprocs) {
		ck_err_set("checkpoint %s@%" PRIu64 " holds no process", m->job, m->seq);
		return -EBADMSG;
	}
	pds = calloc(m->nprocs, sizeof(*pds));
	if (!pds)
		return -ENOMEM;
	for (size_t i = 0; i < m->nprocs; i++) {
		r = ck_desc_unpack(m->procs[i].desc, m->procs[i].desc_len, &pds[i]);
		if (r < 0) {
			ck_err_wrap("checkpoint %s@%" PRIu64, m->job, m->seq);
			goto out;
		}
	}
	objs.pds = pds;
	objs.npds = m->nprocs;
	if ((r = ck__plan_tree(m, &nodes, &nnodes)) < 0)
		goto out;
	r = ck_reader_open(c->store, c->job, m, &rd);
	if (r < 0)
		goto out;
	if ((r = ck__prepare_shm_files(m)) < 0 || (r = ck__make_shm_objects(rd, m, &objs)) < 0 ||
	    (r = ck_agent_plugins_prepare(rd, pds, m->nprocs, &objs.plugins)) < 0)
		goto out;
	/* init's children: the main process first */
	top = calloc(nnodes + 1, sizeof(*top));
	if (!top) {
		r = -ENOMEM;
		goto out;
	}
	top[ntop++] = m->procs[0].pid;
	for (size_t i = 0; i < nnodes; i++)
		if (nodes[i].creator < 0 && nodes[i].pid != m->procs[0].pid)
			top[ntop++] = nodes[i].pid;
	c->root_jpid = m->procs[0].pid;
	r = ck_spawn(c, CK_SPAWN_RESTORE, top, ntop);
	if (r < 0)
		goto out;
	if ((r = ck__build_tree(c, nodes, nnodes)) < 0 || (r = ck__finish_tree(c, nodes, nnodes)) < 0 ||
	    (r = ck_sysv_make(c, rd, m)) < 0)
		goto out;
	for (size_t i = 0; i < m->nprocs; i++) {
		struct ck_jproc *jp = ck__jproc_of(c, m->procs[i].pid);
		if (!jp) {
			ck_err_set("restored process %d is missing", m->procs[i].pid);
			r = -EPROTO;
			goto out;
		}
		if ((r = ck__restore_one(rd, jp, &m->procs[i], pds[i], &objs)) < 0)
			goto out;
	}
	/* Every process runs its restart code, then all go at once. */
	for (uint64_t until = ck_now_ns() + 60000000000ull; restarted < m->nprocs;) {
		struct ck_jproc *from;
		struct ck_msg msg;
		pid_t sender;
		r = ck_procs_wait(c, NULL, 0, 1000, &msg, &from, &sender);
		if (r < 0 || (r == 0 && ck_now_ns() > until)) {
			ck_err_set("the restored job did not come back: %s", r ? strerror(-r) : "timed out");
			r = r ? r : -ETIMEDOUT;
			goto out;
		}
		if (r == 0)
			continue; /* a signal to ckrun (handled once the job runs), or a second gone by */
		if (msg.type == CK_MSG_GONE) {
			ck_err_set("a restored process exited before the job resumed");
			r = -EIO;
			goto out;
		}
		if (from && msg.type == CK_MSG_RST_ERROR) {
			ck_err_set("%s", msg.text);
			r = -EIO;
			goto out;
		}
		if (from && msg.type == CK_MSG_RESTARTED && from->state != CK_JP_SNAPSHOT) {
			from->state = CK_JP_SNAPSHOT; /* marks "restarted" here */
			restarted++;
		}
	}
	ck_sysv_remove_marked(c, m); /* attached again by now */
	for (size_t i = 0; i < c->nprocs; i++) {
		c->procs[i].state = CK_JP_IDLE;
		ck_procs_send(&c->procs[i], CK_MSG_DONE, 0);
	}
	c->job_pid = ck__jproc_of(c, m->procs[0].pid)->pid;
	c->job_ready = c->job_started = 1;
	c->last_seq = m->seq;
	r = 0;
out:
	if (r < 0) {
		ck_kill_job(c);
		ck_procs_clear(c);
	}
	ck__objs_free(&objs);
	ck_agent_plugins_release(objs.plugins);
	if (rd)
		ck_reader_close(rd);
	for (size_t i = 0; pds && i < m->nprocs; i++)
		free(pds[i]);
	free(pds);
	free(nodes);
	free(top);
	return r;
}
