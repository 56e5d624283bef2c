/* Private file mappings: pages that are still the file's are not saved.
 *
 * Round: a private mapping of a file (text, rodata, RELRO, and writable
 * ones: a library's .data) whose path names the very file mapped (stat's
 * device and inode are the mapping's) is cut into runs by the snapshot's
 * pagemap. Both the pagemap and the job's runs are read from something that
 * does not move: the forked snapshot, or the parked process (write
 * protection covers only anonymous memory, so file mappings are read in
 * pass 0, before the release). A page is the job's own when it is present and not a
 * file page (a copy-on-write copy: bit 63 set, bit 61 clear) or swapped
 * (bit 62; only anonymous pages swap): such runs stay regions saved as
 * before. Every other page (absent, or present as the file's page cache
 * page) reads as the file's bytes at its offset: such runs become
 * CK_REG_FILEPAGES regions, not saved, and the file's identity (device,
 * inode, size, mtime, ctime) goes into the manifest's FILE table.
 *
 * Why the pagemap is exact for both snapshots: a forked snapshot copies the
 * page table of a private file mapping only if it has an anon_vma, which
 * it has as soon as one page was copied on write; then every entry is
 * copied and bit 61 tells. Without an anon_vma no page is the job's own,
 * and the child's table is empty: all the file's. A write-protect snapshot
 * reads the pagemap of the parked process (pass 0), where nothing moves.
 *
 * Restore: ckrun checks every file of the table before any process is made
 * (ck_fp_check); the restorer maps CK_REG_FILEPAGES regions from the file
 * and has no fallback. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/wpread.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/mfile.h"

#define CK__PAGE 4096u
#define CK__PM_PRESENT (1ull << 63)
#define CK__PM_SWAP (1ull << 62)
#define CK__PM_FILE (1ull << 61)

static int64_t ck__ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int ck__eligible(const struct ck_jproc *jp, const struct ck_region *rg)
{
	if ((rg->flags & (CK_REG_FILE | CK_REG_SHARED | CK_REG_DELETED | CK_REG_NODATA | CK_REG_SYSV |
			  CK_REG_PLUGIN | CK_REG_VDSO)) != CK_REG_FILE)
		return 0;
	if (!rg->path || rg->path[0] != '/')
		return 0;
	return !jp->round.wp || !ck_wp_covers(jp->round.wp, rg->start, rg->end);
}

/* The manifest's record of the file (added once per path and identity). */
static int ck__file_add(struct ck_manifest *m, const char *path, const struct stat *st)
{
	struct ck_mfile *v;

	for (size_t i = 0; i < m->nfiles; i++) {
		const struct ck_mfile *f = &m->files[i];
		if (!strcmp(f->path, path)) {
			/* another process mapped another file by this name: only one
			 * can be checked at a restore, so the other one is saved */
			return f->dev == (uint64_t)st->st_dev && f->ino == (uint64_t)st->st_ino &&
					       f->size == (uint64_t)st->st_size && f->mtime_ns == ck__ns(st->st_mtim) &&
					       f->ctime_ns == ck__ns(st->st_ctim)
				       ? 0
				       : 1;
		}
	}
	v = realloc(m->files, (m->nfiles + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	m->files = v;
	v += m->nfiles;
	memset(v, 0, sizeof(*v));
	if (!(v->path = strdup(path)))
		return -ENOMEM;
	v->dev = (uint64_t)st->st_dev;
	v->ino = (uint64_t)st->st_ino;
	v->size = (uint64_t)st->st_size;
	v->mtime_ns = ck__ns(st->st_mtim);
	v->ctime_ns = ck__ns(st->st_ctim);
	m->nfiles++;
	return 0;
}

/* own[k] = 1: page k of the region is the job's (saved). Returns the
 * number of the file's pages. */
static int64_t ck__classify(int pm, const struct ck_region *rg, uint8_t *own)
{
	static uint64_t e[4096];
	uint64_t n = (rg->end - rg->start) / CK__PAGE, file = 0;

	for (uint64_t k = 0; k < n;) {
		uint64_t take = n - k < 4096 ? n - k : 4096;
		ssize_t got = pread(pm, e, take * 8, (off_t)((rg->start / CK__PAGE + k) * 8));
		if (got != (ssize_t)(take * 8))
			return got < 0 ? -errno : -EIO;
		for (uint64_t j = 0; j < take; j++) {
			/* a swapped file page (a migration entry) is kept too: in doubt, save */
			own[k + j] = ((e[j] & CK__PM_PRESENT) && !(e[j] & CK__PM_FILE)) || (e[j] & CK__PM_SWAP);
			file += !own[k + j];
		}
		k += take;
	}
	return (int64_t)file;
}

/* Splits region i of p into runs; *added: regions it became, less one. */
static int ck__split(struct ck_proc *p, size_t i, const uint8_t *own, size_t *added)
{
	const struct ck_region orig = p->regions[i];
	uint64_t n = (orig.end - orig.start) / CK__PAGE;
	size_t runs = 0, at;
	struct ck_region *v;

	for (uint64_t k = 0; k < n; k++)
		runs += k == 0 || own[k] != own[k - 1];
	v = realloc(p->regions, (p->nregions + runs - 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	p->regions = v;
	memmove(&v[i + runs], &v[i + 1], (p->nregions - i - 1) * sizeof(*v));
	at = i;
	for (uint64_t k = 0; k < n;) {
		uint64_t e = k;
		struct ck_region *r = &v[at];
		while (e < n && own[e] == own[k])
			e++;
		*r = orig;
		r->start = orig.start + k * CK__PAGE;
		r->end = orig.start + e * CK__PAGE;
		r->file_off = orig.file_off + k * CK__PAGE;
		if (!own[k])
			r->flags |= CK_REG_FILEPAGES | CK_REG_NODATA;
		r->path = at == i ? orig.path : strdup(orig.path);
		if (!r->path) {
			/* keep the array consistent: the rest stays one saved region */
			r->start = orig.start + k * CK__PAGE;
			r->end = orig.end;
			r->flags = orig.flags;
			r->path = NULL;
			memmove(&v[at + 1], &v[i + runs], (p->nregions - i - 1) * sizeof(*v));
			p->nregions += at - i;
			return -ENOMEM;
		}
		at++;
		k = e;
	}
	p->nregions += runs - 1;
	*added = runs - 1;
	return 0;
}

int ck_fp_split(struct ck_manifest *m, const struct ck_jproc *jp)
{
	struct ck_proc *p = jp->round.mp;
	uint8_t *own = NULL;
	size_t cap = 0;
	char pmpath[64];
	int pm, r = 0;

	if (getenv("CKPT_NO_FILEPAGES")) /* every page saved, as before (measurements) */
		return 0;
	snprintf(pmpath, sizeof(pmpath), "/proc/%d/pagemap", jp->round.snap);
	pm = open(pmpath, O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return 0; /* no pagemap: everything is saved */
	for (size_t i = 0; i < p->nregions; i++) {
		struct ck_region *rg = &p->regions[i];
		uint64_t n = (rg->end - rg->start) / CK__PAGE;
		size_t added = 0;
		struct stat st;
		int64_t file;

		/* The program itself stays saved: ckpt inspect names its frames
		 * from the image even once the file is replaced (28-inspect). */
		if (!ck__eligible(jp, rg) || !strcmp(rg->path, jp->pd->exe) || stat(rg->path, &st) < 0 ||
		    !S_ISREG(st.st_mode) ||
		    ((uint64_t)major(st.st_dev) << 8 | minor(st.st_dev)) != rg->dev || (uint64_t)st.st_ino != rg->ino)
			continue;
		if (n > cap) {
			uint8_t *o = realloc(own, n);
			if (!o) {
				r = -ENOMEM;
				goto out;
			}
			own = o;
			cap = n;
		}
		file = ck__classify(pm, rg, own);
		if (file < 0) {
			if (ck_proc_gone(jp->round.snap))
				break; /* reported by the read that follows */
			ck_err_set("process %d: cannot read the pagemap of %s: %s", jp->jpid, rg->path,
				   strerror((int)-file));
			r = (int)file;
			goto out;
		}
		if (file == 0)
			continue;
		r = ck__file_add(m, rg->path, &st);
		if (r < 0)
			goto out;
		if (r > 0) {
			r = 0;
			continue;
		}
		if ((r = ck__split(p, i, own, &added)) < 0)
			goto out;
		i += added;
	}
out:
	if (r == -ENOMEM)
		ck_err_set("out of memory");
	free(own);
	close(pm);
	return r;
}

/* After the cut, while the job runs: each file's content digest, from
 * the previous checkpoint where it is the same file, else read once. */
int ck_fp_digests(struct ck_manifest *m, const struct ck_manifest *prev, int reuse_only, const int *cancel,
		  uint64_t *read_bytes)
{
	*read_bytes = 0;
	for (size_t i = 0; i < m->nfiles; i++) {
		struct ck_mfile *f = &m->files[i];
		int r;

		if (f->has_digest || ck_mfile_reuse(f, prev) || reuse_only)
			continue;
		if ((r = ck_mfile_digest(f, cancel)) < 0)
			return r;
		if (f->has_digest)
			*read_bytes += f->size;
	}
	return 0;
}

/* ---- restore ---- */

static const struct ck_mfile *ck__file_find(const struct ck_manifest *m, const char *path)
{
	for (size_t i = 0; i < m->nfiles; i++)
		if (!strcmp(m->files[i].path, path))
			return &m->files[i];
	return NULL;
}

int ck_fp_check(const struct ck_manifest *m)
{
	/* per FILE record: checked already (a copy is read whole, once) */
	uint8_t *done = calloc(m->nfiles + 1, 1);
	int r = 0;

	if (!done)
		return -ENOMEM;
	for (size_t i = 0; i < m->nprocs && r == 0; i++) {
		const struct ck_proc *p = &m->procs[i];

		for (size_t k = 0; k < p->nregions && r == 0; k++) {
			const struct ck_region *rg = &p->regions[k];
			const struct ck_mfile *f;

			if (!(rg->flags & CK_REG_FILEPAGES))
				continue;
			if (!rg->path || !(f = ck__file_find(m, rg->path))) {
				ck_err_set("process %d: region 0x%" PRIx64 "-0x%" PRIx64
					   " maps pages of a file the checkpoint does not describe (damaged manifest)",
					   p->pid, rg->start, rg->end);
				r = -EBADMSG;
				break;
			}
			if (done[f - m->files])
				continue;
			r = ck_mfile_check(p->pid, f, rg->path);
			done[f - m->files] = 1;
		}
	}
	free(done);
	return r;
}
