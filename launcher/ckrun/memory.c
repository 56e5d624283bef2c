/* Memory regions of a process: what a round records of each mapping and
 * saves of its bytes, and what a restore hands the restorer to map and
 * fills.
 *
 * Round: the snapshot's maps become regions (flags from their kind and
 * path, System V attachments from the parked process, mappings a plugin
 * leaves out), read in two passes: pass 0 takes what the snapshot does not
 * freeze before RELEASE, pass 1 the rest while the job runs. Shared ranges
 * are saved once (shm.c). Restore: the layout (header, regions, strings),
 * the vDSO's plan (vdso.c), and the fill of each region with verified
 * bytes, fresh anonymous memory sparsely and through huge pages where the
 * region was dense. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/stash.h"
#include "launcher/ckrun/vdso.h"
#include "launcher/common/ck_err.h"

static int ck__endswith(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

static uint32_t ck__region_flags(const struct ck_map *mp)
{
	uint32_t f = mp->shared ? CK_REG_SHARED : 0;
	const char *p = mp->path;

	if (!p)
		return f;
	if (!strcmp(p, "[heap]"))
		return f | CK_REG_HEAP;
	if (!strcmp(p, "[stack]"))
		return f | CK_REG_STACK | CK_REG_GROWSDOWN;
	if (!strcmp(p, "[vdso]")) /* saved: a restore on another kernel needs its symbols */
		return f | CK_REG_VDSO;
	if (!strcmp(p, "[vvar]") || !strcmp(p, "[vvar_vclock]"))
		return f | CK_REG_VVAR | CK_REG_NODATA;
	if (!strcmp(p, "[vsyscall]"))
		return f | CK_REG_VSYSCALL | CK_REG_NODATA;
	if (p[0] == '/') {
		f |= CK_REG_FILE;
		if (ck__endswith(p, " (deleted)"))
			f |= CK_REG_DELETED;
	}
	return f;
}

int ck_skip_add(struct ck_manifest *m, int pid, const char *what, const char *why)
{
	struct ck_skip *n = realloc(m->skips, (m->nskips + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	m->skips = n;
	n[m->nskips].pid = pid;
	n[m->nskips].what = strdup(what);
	n[m->nskips].why = strdup(why);
	m->nskips++;
	return 0;
}

static int ck__map_cmp(const void *a, const void *b)
{
	const struct ck_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The snapshot lacks the System V attachments (libckpt: ck__sysv_maps);
 * the parked process still has them, unchanged. */
static int ck__add_sysv_maps(pid_t pid, struct ck_map **maps, size_t *n)
{
	struct ck_map *live = NULL, *v;
	size_t nlive = 0, add = 0, k;
	int r;

	r = ck_maps_read(pid, &live, &nlive);
	if (r < 0)
		return r;
	for (size_t i = 0; i < nlive; i++)
		if (live[i].path && !strncmp(live[i].path, "/SYSV", 5))
			add++;
	v = realloc(*maps, (*n + add) * sizeof(*v));
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	*maps = v;
	k = *n;
	for (size_t i = 0; i < nlive; i++) {
		int have = 0;

		if (!live[i].path || strncmp(live[i].path, "/SYSV", 5))
			continue;
		for (size_t j = 0; j < *n && !have; j++)
			have = v[j].start == live[i].start;
		if (have)
			continue;
		v[k++] = live[i];
		live[i].path = NULL; /* moved */
	}
	*n = k;
	qsort(v, k, sizeof(*v), ck__map_cmp);
out:
	ck_maps_free(live, nlive);
	return r;
}

/* Which pass reads a region. Pass 0 takes what the snapshot does not
 * freeze: for a fork, shared mappings; for a write-protect snapshot, all
 * but the protected memory and the vDSO. With a fork, pass 0 runs after
 * RELEASE unless the process holds its threads; with write protection,
 * always before. Read-only private mappings of files are not protected:
 * what they still hold of the file is not saved (filepages.c), and the
 * pages the job copied on write are read while it is parked, since an
 * mprotect, a write and an mprotect back after the release would leave
 * the same mapping with other bytes (read live, the image once held a
 * page newer than the rest of the process: filemap_cow caught it). */
static int ck__region_pass(const struct ck_jproc *jp, const struct ck_region *rg)
{
	if (!jp->round.wp)
		return rg->flags & CK_REG_SHARED ? 0 : 1;
	if (ck_wp_covers(jp->round.wp, rg->start, rg->end))
		return 1;
	if (rg->flags & CK_REG_VDSO)
		return 1;
	return 0;
}

/* The regions' madvise() advice (advice.c). A forked snapshot sees
 * wipe-on-fork memory as zeros: such a round fails with -EXDEV, and is
 * repeated without a fork. */
int ck_mem_advice(const struct ck_jproc *jp)
{
	struct ck_proc *p = jp->round.mp;
	int r = ck_maps_advice(jp->round.snap, p->regions, p->nregions);

	if (r < 0)
		return ck_proc_gone(jp->round.snap) ? 0 : r; /* its end is reported by the checks that follow */
	if (jp->round.snap != jp->pid) {
		/* a don't-fork mapping is not in the forked snapshot at all:
		 * its region would be missing from the image */
		uint64_t s, e;
		if (ck_maps_first_advised(jp->pid, CK_REG_ADV_DONTFORK, &s, &e) > 0) {
			ck_err_set("process %d: memory %" PRIx64 "-%" PRIx64
				   " is don't-fork (MADV_DONTFORK), which a forked snapshot does not have",
				   jp->jpid, s, e);
			return -EXDEV;
		}
	}
	for (size_t i = 0; jp->round.snap != jp->pid && i < p->nregions; i++) {
		const struct ck_region *rg = &p->regions[i];
		if ((rg->flags & CK_REG_ADV_WIPEONFORK) && !(rg->flags & CK_REG_NODATA)) {
			ck_err_set("process %d: memory %" PRIx64 "-%" PRIx64
				   " is wipe-on-fork (MADV_WIPEONFORK), which a forked snapshot reads as zeros",
				   jp->jpid, rg->start, rg->end);
			return -EXDEV;
		}
	}
	return 0;
}

int ck_mem_kids_overlap(const struct ck_jproc *jp, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = jp->round.nkids;

	/* the first merged range that ends after start */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (jp->round.kids[2 * mid + 1] <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < jp->round.nkids && jp->round.kids[2 * lo] < end;
}

/* Whether any page of [start, end) of process pid is present or swapped
 * out (a PROT_NONE region that holds data). */
static int ck__holds_pages(pid_t pid, uint64_t start, uint64_t end)
{
	char path[64];
	int fd, any;

	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 1; /* unknown: read it, absent pages cost nothing */
	any = ck_pagemap_any(fd, start, end) != 0;
	close(fd);
	return any;
}

/* A writable shared mapping of a memfd the process holds sealed with
 * F_SEAL_FUTURE_WRITE: the mapping was made before the seal, and a restore
 * (the memfd made and sealed again, then mapped) could not make it. */
static int ck__sealed_writable(const struct ck_procdesc *pd, const struct ck_map *mp, const struct ck_region *rg)
{
	if (!(rg->flags & CK_REG_SHARED) || !(mp->prot & PROT_WRITE) || !mp->path || strncmp(mp->path, "/memfd:", 7))
		return 0;
	for (uint32_t k = 0; k < pd->nfds; k++) {
		const struct ck_pd_fd *f = &pd->fds[k];
		if (f->kind == CK_FD_MEMFD && f->ino == rg->ino && (f->u64[0] & F_SEAL_FUTURE_WRITE)) {
			ck_err_set("process %d: memory %" PRIx64 "-%" PRIx64 " is a writable shared mapping of %s, "
				   "which descriptor %d holds sealed with F_SEAL_FUTURE_WRITE: a restore could not map "
				   "it again: not supported",
				   pd->pid, rg->start, rg->end, mp->path, f->fd);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* Memory regions of the snapshot into the writer, those of one pass. */
int ck_mem_save_regions(struct ck_round *rc, struct ck_writer *w, struct ck_jproc *jp,
			    struct ck_manifest *m, unsigned flags, int pass)
{
	pid_t snap = jp->round.snap;
	struct ck_proc *p = jp->round.mp;
	struct ck_procdesc *pd = jp->pd;
	struct ck_map *maps = NULL;
	size_t n = 0;
	char pm[64];
	int pagemap = -1, r;
	struct ck_shm_names *shm_names = NULL;

	if (pass == 1)
		goto data;
	r = ck_maps_read(snap, &maps, &n);
	if (r == 0 && pd->nsysv)
		r = ck__add_sysv_maps(jp->pid, &maps, &n);
	if (r < 0)
		goto out;
	p->regions = calloc(n, sizeof(*p->regions));
	if (!p->regions) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct ck_region *rg = &p->regions[p->nregions++];
		const struct ck_map *mp = &maps[i];

		rg->start = mp->start;
		rg->end = mp->end;
		rg->prot = mp->prot;
		rg->flags = ck__region_flags(mp);
		rg->file_off = mp->off;
		rg->dev = mp->dev;
		rg->ino = mp->ino;
		rg->path = mp->path ? strdup(mp->path) : NULL;
		if ((rg->flags & (CK_REG_FILE | CK_REG_SHARED | CK_REG_DELETED)) ==
			    (CK_REG_FILE | CK_REG_SHARED | CK_REG_DELETED) &&
		    rg->path && !strncmp(rg->path, "/dev/shm/", 9)) {
			/* a named semaphore: mapped through a temporary name, kept
			 * under its own (shm.c); restored as that file */
			char *live = ck_shm_live_name(&shm_names, rg->ino);
			if (live) {
				free(rg->path);
				rg->path = live;
				rg->flags &= ~CK_REG_DELETED;
			}
		}
		if (mp->path && !strncmp(mp->path, "/SYSV", 5))
			rg->flags |= CK_REG_SYSV | CK_REG_NODATA; /* its bytes: once, in the SYSV section */
		if ((r = ck__sealed_writable(pd, mp, rg)) < 0)
			goto out;
		/* guard pages and address-space reservations hold nothing;
		 * memory made PROT_NONE after it was written keeps its bytes
		 * (read through /proc/PID/mem, memio.c). Shared memory is read
		 * whatever its pages: a fork does not copy its page tables. */
		if (mp->prot == 0 && !(rg->flags & CK_REG_SHARED) && !ck__holds_pages(snap, rg->start, rg->end))
			rg->flags |= CK_REG_NODATA;
		if ((rg->flags & CK_REG_FILE) && (rg->flags & CK_REG_SHARED) && !(rg->flags & CK_REG_DELETED) &&
		    strncmp(rg->path, "/dev/shm/", 9))
			rg->flags |= CK_REG_NODATA; /* the file itself holds the data */
		for (uint32_t k = 0; k < pd->nskips && k < CK_PD_MAX_SKIPS; k++) {
			if (pd->skips[k].start < rg->end && rg->start < pd->skips[k].end) {
				char what[320];
				rg->flags |= CK_REG_NODATA | CK_REG_PLUGIN;
				snprintf(what, sizeof(what), "mapping %" PRIx64 "-%" PRIx64 " %s", rg->start, rg->end,
					 rg->path ? rg->path : "");
				pd->skips[k].why[sizeof(pd->skips[k].why) - 1] = 0;
				ck_skip_add(m, pd->pid, what, pd->skips[k].why);
				break;
			}
		}
	}
	if ((r = ck_shm_count_check(p, pd, jp->jpid, &jp->round.nshm)) < 0)
		goto out;
	if (snap != jp->pid && (r = ck_mem_advice(jp)) < 0)
		goto out;
	if ((r = ck_fp_split(m, jp)) < 0)
		goto out;
data:
	snprintf(pm, sizeof(pm), "/proc/%d/pagemap", snap);
	pagemap = open(pm, O_RDONLY | O_CLOEXEC);
	for (size_t i = 0; i < p->nregions; i++) {
		struct ck_region *rg = &p->regions[i];
		struct ck_src src = {snap, rg->start, -1, -1, flags, NULL, 0, 0, 0};

		if ((rg->flags & CK_REG_NODATA) || ck__region_pass(jp, rg) != pass)
			continue;
		/* a parked process's private file mapping: copied aside now,
		 * written after the release */
		if (pass == 0 && jp->round.wp && (rg->flags & (CK_REG_FILE | CK_REG_SHARED)) == CK_REG_FILE &&
		    ck_stash_take(&rc->stash, snap, p, i) == 1)
			continue;
		/* Only anonymous private memory: fork copies its page table, so a
		 * page absent there was never touched. (The vDSO's pages are not
		 * copied by fork, file pages fault in lazily.) */
		src.live = jp->round.wp && pass == 1;
		if (jp->round.wp && ck_wp_covers(jp->round.wp, rg->start, rg->end))
			src.wp = jp->round.wp;
		else if (!(rg->flags & (CK_REG_FILE | CK_REG_SHARED | CK_REG_VDSO)))
			src.pagemap_fd = pagemap;
		/* Whether a restore may fill it through huge pages: only where
		 * that does not turn a sparse region into a resident one. */
		src.count = !(rg->flags & (CK_REG_FILE | CK_REG_SHARED | CK_REG_VDSO | CK_REG_SYSV)) &&
			    rg->end - rg->start >= (4u << 20);
		if (rg->flags & CK_REG_SHARED) {
			struct ck_round_shared *x = ck_shm_saved_find(rc, rg);
			if (x) {
				rg->first_chunk = x->first_chunk;
				rg->nchunks = x->nchunks;
				continue;
			}
		}
		/* a parent's page digests (1 KiB a chunk) only where a child
		 * has memory to compare */
		unsigned how = jp->round.wadd;
		if (pass != 1 || !ck_mem_kids_overlap(jp, rg->start, rg->end))
			how &= ~CK_WADD_BASE;
		if (src.wp || src.pagemap_fd >= 0)
			how |= CK_WADD_PROBE;
		r = ck_writer_add_at(w, rg->start, how, rg->end - rg->start, ck_src_read, &src, &rg->first_chunk,
				     &rg->nchunks);
		if (r < 0) {
			if (r == -ESRCH && ck_proc_gone(jp->pid)) {
				ck_err_set("process %d of the job exited during the checkpoint", jp->jpid);
				goto out;
			}
			if (r == -ESRCH && snap != jp->pid && ck_proc_gone(snap)) {
				ck_err_set("the snapshot of process %d of the job was killed during the checkpoint",
					   jp->jpid);
				goto out;
			}
			ck_err_wrap("region %" PRIx64 "-%" PRIx64 " %s", rg->start, rg->end, rg->path ? rg->path : "");
			goto out;
		}
		if (src.count && src.data_pages * 10 >= (rg->end - rg->start) / 4096 * 9)
			rg->flags |= CK_REG_DENSE;
		if ((rg->flags & CK_REG_SHARED) && (r = ck_shm_saved_add(rc, rg)) < 0)
			goto out;
		m->logical_bytes += rg->end - rg->start;
	}
	r = 0;
out:
	if (pagemap >= 0)
		close(pagemap);
	ck_maps_free(maps, n);
	ck_shm_names_free(shm_names);
	return r;
}

/* Mappings a write-protect snapshot read live without protection (the
 * vDSO) must still be there as they were: a job that unmapped or replaced
 * one meanwhile may have been read wrong. */
int ck_mem_wp_verify(const struct ck_jproc *jp)
{
	struct ck_map *maps = NULL;
	size_t n = 0, j = 0;
	int r = ck_maps_read(jp->pid, &maps, &n);

	if (r < 0) {
		ck_err_wrap("process %d: after its write-protect snapshot", jp->jpid);
		return -ESTALE;
	}
	for (size_t i = 0; i < jp->round.mp->nregions && r == 0; i++) {
		const struct ck_region *rg = &jp->round.mp->regions[i];

		if ((rg->flags & CK_REG_NODATA) || ck__region_pass(jp, rg) != 1 || ck_wp_covers(jp->round.wp, rg->start, rg->end))
			continue;
		/* the mapping that held it (a region may be one run of a mapping
		 * filepages.c cut) must hold it still, at the same file offset */
		while (j < n && maps[j].end <= rg->start)
			j++;
		if (j == n || maps[j].start > rg->start || maps[j].end < rg->end || maps[j].prot != rg->prot ||
		    maps[j].ino != rg->ino || maps[j].off + (rg->start - maps[j].start) != rg->file_off) {
			ck_err_set("process %d changed its mapping 0x%" PRIx64 "-0x%" PRIx64 " %s during the write-protect "
				   "snapshot", jp->jpid, rg->start, rg->end, rg->path ? rg->path : "");
			r = -ESTALE;
		}
	}
	ck_maps_free(maps, n);
	return r;
}

/* ---- restore ---- */

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
int ck_mem_layout(const struct ck_proc *p, const struct ck_procdesc *pd,
		  struct ck_fdplan *pl, struct ck_objs *objs, uint8_t *shmfill, void **out, size_t *len)
{
	size_t strings = 1, off = 1, size;
	struct ck_rst_layout *l;
	struct ck_rst_region *rg;
	char *s;
	int rc;

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
		if ((rc = ck_shm_layout_map(p, pd, r, l, &rg[i], pl, objs, &shmfill[i])) < 0) {
			free(l);
			return rc;
		}
		/* a job that disabled THP for itself gets no huge page from us */
		rg[i].thp = shmfill[i] || (pd->pflags & CK_PD_P_THP_DISABLE) ? 0 : ck__thp_fill(r);
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
	if ((rc = ck_shm_layout_resolve(l, pl, objs)) < 0) {
		free(l);
		return rc;
	}
	l->nfds = pl->n;
	*out = l;
	*len = size;
	return 0;
}

int ck_mem_vdso(struct ck_reader *rd, const struct ck_proc *p, void *layout, uint32_t *vdso_mode)
{
	void *old = NULL;
	size_t old_len = 0;
	int r = 0;

	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *rg = &p->regions[i];
		if (!(rg->flags & CK_REG_VDSO) || !rg->nchunks)
			continue;
		old_len = rg->end - rg->start;
		old = calloc(1, old_len);
		if (!old || (r = ck_reader_read(rd, rg->first_chunk, rg->nchunks, ck_mem_sink, old)) < 0) {
			free(old);
			return r < 0 ? r : -ENOMEM;
		}
	}
	r = ck_vdso_plan(p, old, old_len, layout);
	free(old);
	if (r < 0)
		return r;
	*vdso_mode = ((struct ck_rst_layout *)layout)->vdso_mode;
	return 0;
}

int ck_mem_fill(struct ck_reader *rd, const struct ck_jproc *jp, const struct ck_proc *p, const uint8_t *shmfill,
		uint32_t vdso_mode)
{
	int r;

	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *rg = &p->regions[i];
		struct ck_sink s = {jp->pid, rg->start, -1, ck__fresh_anon(rg)};
		if (!rg->nchunks || shmfill[i] || ((rg->flags & CK_REG_VDSO) && vdso_mode == 0))
			continue; /* the kernel's own vDSO sits there */
		r = ck__fresh_anon(rg) ? ck_reader_read_sparse(rd, rg->first_chunk, rg->nchunks, ck_sink_write, &s)
				       : ck_reader_read(rd, rg->first_chunk, rg->nchunks, ck_sink_write, &s);
		if (r < 0)
			return r;
	}
	return 0;
}
