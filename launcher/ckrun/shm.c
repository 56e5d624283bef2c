/* Shared memory: MAP_SHARED anonymous memory, files in /dev/shm, and
 * shared mappings of deleted files and memfds (System V segments:
 * shm_sysv.c).
 *
 * Round: a range mapped by several processes is saved once; the first
 * process's chunks serve every mapping of the same object and range.
 * Restore, before any process exists: one memfd per object (or the
 * deleted file or memfd a descriptor of the job re-creates), as large as
 * its largest mapping and filled once per saved range, and /dev/shm files
 * made again where this host lacks them; each restorer then maps the
 * object's descriptor, which ckrun hands it at CK_RST_SHARED_FD + k. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"

/* A region's map_fd until the objects are numbered: -1000 - k. */
#define CK__SHM_PENDING (-1000)
#include "launcher/common/ck_err.h"

struct ck_round_shared *ck_shm_saved_find(struct ck_round *rc, const struct ck_region *rg)
{
	for (size_t i = 0; i < rc->nshared; i++) {
		struct ck_round_shared *x = &rc->shared[i];
		if (x->dev == rg->dev && x->ino == rg->ino && x->off == rg->file_off && x->len == rg->end - rg->start)
			return x;
	}
	return NULL;
}

int ck_shm_saved_add(struct ck_round *rc, const struct ck_region *rg)
{
	struct ck_round_shared *ns = realloc(rc->shared, (rc->nshared + 1) * sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	rc->shared = ns;
	ns[rc->nshared++] = (struct ck_round_shared){rg->dev, rg->ino, rg->file_off, rg->end - rg->start,
						     rg->first_chunk, rg->nchunks};
	return 0;
}

/* ---- restore ---- */

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

int ck_shm_region(const struct ck_region *r)
{
	return (r->flags & CK_REG_SHARED) && (r->flags & CK_REG_DELETED) && !(r->flags & CK_REG_NODATA);
}

/* Shared memory objects (MAP_SHARED anonymous memory, deleted shm files):
 * one memfd each, as large as its largest mapping, filled once per saved
 * range, before any process exists. */
int ck_shm_make_objects(struct ck_reader *rd, const struct ck_manifest *m, struct ck_objs *o)
{
	for (size_t i = 0; i < m->nprocs; i++)
		for (size_t k = 0; k < m->procs[i].nregions; k++) {
			const struct ck_region *r = &m->procs[i].regions[k];
			struct ck_obj *ob;
			if (!ck_shm_region(r))
				continue;
			ob = ck_obj_file(o, r->dev, r->ino);
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
					int fd = ck_content_file_make(rd, fdof);
					if (fd < 0)
						return fd;
					ob = ck_obj_add(o, fdof->kind, r->dev, r->ino);
					if (!ob) {
						close(fd);
						return -ENOMEM;
					}
					ob->fd[0] = ck_rdwr_again(fd);
					close(fd);
					continue;
				}
				ob = ck_obj_add(o, CK_OBJ_SHM, r->dev, r->ino);
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
			if (!ck_shm_region(r) || !r->nchunks || ck_obj_file(o, r->dev, r->ino)->kind != CK_OBJ_SHM)
				continue;
			/* saved once per range: the first process's bytes */
			for (size_t j = 0; j <= i && !dup; j++)
				for (size_t q = 0; q < m->procs[j].nregions && !dup; q++) {
					const struct ck_region *x = &m->procs[j].regions[q];
					if (x == r)
						break;
					dup = ck_shm_region(x) && x->dev == r->dev && x->ino == r->ino &&
					      x->first_chunk == r->first_chunk && x->nchunks == r->nchunks;
				}
			if (!dup) {
				struct ck__shmsink ss = {ck_obj_file(o, r->dev, r->ino)->fd[0], r->file_off};
				if ((rc = ck_reader_read(rd, r->first_chunk, r->nchunks, ck__shm_sink, &ss)) < 0)
					return rc;
			}
		}
	return 0;
}

/* Shared mappings of files in /dev/shm are memory: their saved bytes go
 * back into the file (re-created if this host lacks it). */
int ck_shm_prepare_files(const struct ck_manifest *m)
{
	for (size_t i = 0; i < m->nprocs; i++)
		for (size_t k = 0; k < m->procs[i].nregions; k++) {
			const struct ck_region *r = &m->procs[i].regions[k];
			struct stat st;
			int fd;
			if (!(r->flags & CK_REG_SHARED) || (r->flags & CK_REG_DELETED) || !(r->flags & CK_REG_FILE) ||
			    !r->path || strncmp(r->path, "/dev/shm/", 9))
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

/* The process's own read-write descriptor of a deleted file or memfd it
 * maps shared: the mapping is made again through it. */
static const struct ck_pd_fd *ck__shm_held(const struct ck_procdesc *pd, const struct ck_region *r)
{
	for (uint32_t k = 0; k < pd->nfds; k++) {
		const struct ck_pd_fd *f = &pd->fds[k];
		if ((f->kind == CK_FD_DELETED || f->kind == CK_FD_MEMFD) && f->ino == r->ino &&
		    ((uint64_t)major(f->dev) << 8 | minor(f->dev)) == r->dev && /* maps' maj << 8 | min */
		    (f->flags & O_ACCMODE) == O_RDWR)
			return f;
	}
	return NULL;
}

/* At the round: the objects a restore would hand the process's restorer
 * (ck_shm_layout_map) fit its limit, or the round is refused, not the
 * restore. */
static int ck__devino_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

int ck_shm_count_check(const struct ck_proc *p, const struct ck_procdesc *pd, int32_t jpid, uint32_t *nshm)
{
	uint64_t (*v)[2] = NULL;
	size_t n = 0, distinct = 0;

	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *r = &p->regions[i];
		if (!ck_shm_region(r) || ck__shm_held(pd, r))
			continue;
		if (!(n & (n + 1))) { /* 0, 1, 3, 7...: grow */
			uint64_t (*nv)[2] = realloc(v, (2 * n + 2) * sizeof(*v));
			if (!nv) {
				free(v);
				ck_err_set("out of memory");
				return -ENOMEM;
			}
			v = nv;
		}
		v[n][0] = r->dev;
		v[n++][1] = r->ino;
	}
	if (n) {
		qsort(v, n, sizeof(*v), ck__devino_cmp);
		for (size_t i = 0; i < n; i++)
			distinct += !i || ck__devino_cmp(v[i], v[i - 1]);
	}
	free(v);
	if (distinct > CK_RST_MAX_SHARED) {
		ck_err_set("process %d maps %zu shared memory objects it holds no descriptor of (shared anonymous "
			   "memory, deleted files): a restore takes at most %d",
			   jpid, distinct, CK_RST_MAX_SHARED);
		return -ENOTSUP;
	}
	if (pd->nfds + distinct > CK_RST_MAX_FDS) {
		ck_err_set("process %d holds %u descriptors and maps %zu shared memory objects it holds no descriptor "
			   "of: a restore places at most %d in all",
			   jpid, pd->nfds, distinct, CK_RST_MAX_FDS);
		return -ENOTSUP;
	}
	*nshm = (uint32_t)distinct; /* the descriptor bounds with the others: ck_fds_restore_fits */
	return 0;
}

int ck_shm_layout_map(const struct ck_proc *p, const struct ck_procdesc *pd, const struct ck_region *r,
		      struct ck_rst_layout *l, struct ck_rst_region *rg, struct ck_fdplan *pl, struct ck_objs *objs,
		      uint8_t *shmfill)
{
	rg->map_fd = -1;
	if (r->flags & CK_REG_SYSV) {
		rg->map_fd = (int32_t)r->ino; /* the segment id: the restorer attaches it */
	} else if ((r->flags & CK_REG_SHARED) && (r->flags & CK_REG_DELETED)) {
		const struct ck_pd_fd *f = ck__shm_held(pd, r);
		if (f) {
			/* the file's contents come back through the descriptor:
			 * the mapping shows them, and may be read-only (a memfd
			 * sealed against writes) */
			rg->map_fd = f->fd;
			rg->fill = 0;
			*shmfill = 1;
		}
	}
	if (rg->map_fd < 0 && ck_shm_region(r)) {
		struct ck_obj *ob = ck_obj_file(objs, r->dev, r->ino);
		uint32_t k;
		if (!ob) {
			ck_err_set("shared memory %s has no object", r->path ? r->path : "");
			return -EPROTO;
		}
		/* one descriptor per object in this process */
		for (k = 0; k < l->nshared; k++)
			if (pl->fds[pl->n - l->nshared + k] == -2 - (int)(ob - objs->v))
				break;
		if (k == l->nshared) {
			if (l->nshared == CK_RST_MAX_SHARED) {
				ck_err_set("process %d maps more than %d shared memory objects", p->pid,
					   CK_RST_MAX_SHARED);
				return -E2BIG;
			}
			pl->fds[pl->n] = -2 - (int)(ob - objs->v); /* placeholder, resolved by ck_shm_layout_resolve */
			pl->targets[pl->n] = 0; /* numbered by ck_shm_layout_resolve */
			pl->n++;
			l->nshared++;
		}
		rg->map_fd = CK__SHM_PENDING - (int32_t)k; /* numbered by ck_shm_layout_resolve */
		rg->fill = 0;
		*shmfill = 1;
	}
	return 0;
}

/* The first n numbers from base up that no job descriptor's target is. */
static int32_t ck__shared_range(const struct ck_fdplan *pl, uint32_t njob, uint32_t n, int32_t base)
{
	for (int again = 1; again;) {
		again = 0;
		for (uint32_t k = 0; k < njob; k++) {
			int32_t t = pl->targets[k] < 0 ? -pl->targets[k] - 1 : pl->targets[k];
			if (t >= base && t < base + (int32_t)n) {
				base = t + 1;
				again = 1;
			}
		}
	}
	return base;
}

int ck_shm_layout_resolve(struct ck_rst_layout *l, struct ck_fdplan *pl, struct ck_objs *objs)
{
	struct ck_rst_region *rg = (struct ck_rst_region *)(l + 1);
	uint32_t njob = pl->n - l->nshared;
	int32_t base = ck__shared_range(pl, njob, l->nshared, CK_RST_SHARED_FD);
	struct rlimit rl;

	/* The objects' numbers: a range none of the job's descriptors takes
	 * (a job's own descriptor at 1001 was replaced by an object's and
	 * closed with it), 1001 and up, or low numbers where that range would
	 * pass the hard limit the restorer inherits from ckrun (1024 in some
	 * containers) */
	if (l->nshared && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY &&
	    (uint64_t)base + l->nshared + 64 > rl.rlim_max)
		base = ck__shared_range(pl, njob, l->nshared, 3);
	l->shared_fd = base;
	for (uint32_t k = 0; k < l->nshared; k++)
		pl->targets[njob + k] = -(base + (int32_t)k) - 1;
	for (uint32_t i = 0; i < l->nregions; i++)
		if (rg[i].map_fd <= CK__SHM_PENDING && rg[i].map_fd > CK__SHM_PENDING - CK_RST_MAX_SHARED)
			rg[i].map_fd = base + (CK__SHM_PENDING - rg[i].map_fd);
	for (uint32_t k = pl->n - l->nshared; k < pl->n; k++) {
		int idx = -2 - pl->fds[k];
		pl->fds[k] = fcntl(objs->v[idx].fd[0], F_DUPFD_CLOEXEC, 3);
		if (pl->fds[k] < 0) {
			ck_err_set("a shared memory object for the restorer: %s", strerror(errno));
			return -errno;
		}
	}
	return 0;
}

struct ck_shm_names {
	size_t n;
	struct {
		uint64_t ino;
		char *name;
	} *v;
};

void ck_shm_names_free(struct ck_shm_names *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->v[i].name);
	free(c->v);
	free(c);
}

/* /dev/shm listed once per process and round: a job with hundreds of
 * shared tensors (unlinked at once: no name) asks for each. */
static struct ck_shm_names *ck__shm_list(void)
{
	struct ck_shm_names *c = calloc(1, sizeof(*c));
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	size_t cap = 0;

	if (!c || !d)
		goto out;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (c->n == cap) {
			size_t nc = cap ? cap * 2 : 32;
			void *nv = realloc(c->v, nc * sizeof(*c->v));
			if (!nv)
				break;
			c->v = nv;
			cap = nc;
		}
		if (!(c->v[c->n].name = strdup(e->d_name)))
			break;
		c->v[c->n++].ino = st.st_ino;
	}
out:
	if (d)
		closedir(d);
	return c;
}

char *ck_shm_live_name(struct ck_shm_names **cache, uint64_t ino)
{
	char *path;

	if (!*cache && !(*cache = ck__shm_list()))
		return NULL;
	for (size_t i = 0; i < (*cache)->n; i++)
		if ((*cache)->v[i].ino == ino && asprintf(&path, "/dev/shm/%s", (*cache)->v[i].name) >= 0)
			return path;
	return NULL;
}
