/* Reading a process's memory out of a checkpoint by address (imgmem.h).
 * Region data is a run of chunks of CK_CHUNK_SIZE bytes from the region's
 * start, so the chunk holding an address is found by division; each is
 * read alone (hash checked by the reader) and kept in a small cache, since
 * an unwinder reads a few words here and there, mostly on the stacks. */
#include "launcher/ckpt/imgmem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/mfile.h"

#define IMG_CACHE 64 /* chunks: 16 MiB */

struct img_slot {
	uint64_t chunk; /* UINT64_MAX: empty */
	uint32_t len;
	uint8_t *data;
};

struct ckpt_img {
	struct ck_reader *rd;
	const struct ck_manifest *m;
	const struct ck_proc *p;
	size_t *order; /* region indexes by start address */
	signed char *file_ok; /* per FILE record: 0 not checked, 1 the file, -1 not */
	struct img_slot cache[IMG_CACHE];
	unsigned next; /* round-robin victim */
};

static int by_start(const void *a, const void *b, void *arg)
{
	const struct ck_proc *p = arg;
	uint64_t x = p->regions[*(const size_t *)a].start, y = p->regions[*(const size_t *)b].start;

	return x < y ? -1 : x > y;
}

int ckpt_img_open(struct ck_reader *rd, const struct ck_manifest *m, const struct ck_proc *p, struct ckpt_img **out)
{
	struct ckpt_img *im = calloc(1, sizeof(*im));

	if (!im)
		return -ENOMEM;
	im->rd = rd;
	im->m = m;
	im->p = p;
	im->order = calloc(p->nregions + 1, sizeof(size_t));
	im->file_ok = calloc(m->nfiles + 1, 1);
	if (!im->order || !im->file_ok) {
		free(im->order);
		free(im->file_ok);
		free(im);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->nregions; i++)
		im->order[i] = i;
	qsort_r(im->order, p->nregions, sizeof(size_t), by_start, (void *)p);
	for (unsigned i = 0; i < IMG_CACHE; i++)
		im->cache[i].chunk = UINT64_MAX;
	*out = im;
	return 0;
}

void ckpt_img_close(struct ckpt_img *im)
{
	if (!im)
		return;
	for (unsigned i = 0; i < IMG_CACHE; i++)
		free(im->cache[i].data);
	free(im->order);
	free(im->file_ok);
	free(im);
}

const struct ck_region *ckpt_img_region(const struct ckpt_img *im, uint64_t addr)
{
	size_t lo = 0, hi = im->p->nregions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct ck_region *g = &im->p->regions[im->order[mid]];

		if (addr < g->start)
			hi = mid;
		else if (addr >= g->end)
			lo = mid + 1;
		else
			return g;
	}
	return NULL;
}

/* A System V attachment's bytes are the segment's chunks (manifest SYSV). */
static const struct ck_sysv_shm *sysv_of(const struct ck_manifest *m, const struct ck_region *g)
{
	for (size_t i = 0; i < m->nshms; i++)
		if ((uint64_t)m->shms[i].id == g->ino)
			return &m->shms[i];
	return NULL;
}

/* Bytes the file holds: a shared mapping, or a private one's pages that
 * were the file's own at the cut (CK_REG_FILEPAGES). */
static int file_backed_shared(const struct ck_region *g)
{
	return ((g->flags & CK_REG_SHARED) || (g->flags & CK_REG_FILEPAGES)) && (g->flags & CK_REG_FILE) &&
	       !(g->flags & CK_REG_DELETED) && g->path && g->path[0] == '/' && !g->nchunks;
}

int ckpt_img_readable(const struct ck_region *g)
{
	if (g->flags & (CK_REG_VVAR | CK_REG_PLUGIN | CK_REG_VSYSCALL))
		return 0;
	return g->nchunks > 0 || (g->flags & CK_REG_SYSV) || file_backed_shared(g);
}

static int sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct img_slot *s = arg;

	if (off + len > CK_CHUNK_SIZE)
		return -EBADMSG;
	memcpy(s->data + off, buf, len);
	s->len = (uint32_t)(off + len);
	return 0;
}

static int chunk_get(struct ckpt_img *im, uint64_t chunk, struct img_slot **out)
{
	struct img_slot *s;
	int rc;

	for (unsigned i = 0; i < IMG_CACHE; i++)
		if (im->cache[i].chunk == chunk) {
			*out = &im->cache[i];
			return 0;
		}
	s = &im->cache[im->next++ % IMG_CACHE];
	if (!s->data && !(s->data = malloc(CK_CHUNK_SIZE)))
		return -ENOMEM;
	s->chunk = UINT64_MAX;
	s->len = 0;
	rc = ck_reader_read(im->rd, chunk, 1, sink, s);
	if (rc < 0)
		return rc;
	s->chunk = chunk;
	*out = s;
	return 0;
}

/* Bytes [off, off+len) of a run of chunks starting at first (n of them);
 * what lies past the last chunk reads as zeros. */
static int read_chunks(struct ckpt_img *im, uint64_t first, uint32_t n, uint64_t off, uint8_t *buf, size_t len)
{
	while (len) {
		uint64_t k = off / CK_CHUNK_SIZE, in = off % CK_CHUNK_SIZE;
		size_t take = CK_CHUNK_SIZE - in < len ? CK_CHUNK_SIZE - in : len;
		struct img_slot *s;
		int rc;

		if (k >= n) {
			memset(buf, 0, len);
			return 0;
		}
		rc = chunk_get(im, first + k, &s);
		if (rc < 0)
			return rc;
		if (in + take > s->len) {
			size_t have = in < s->len ? s->len - in : 0;
			memcpy(buf, s->data + in, have);
			memset(buf + have, 0, take - have);
		} else {
			memcpy(buf, s->data + in, take);
		}
		buf += take;
		off += take;
		len -= take;
	}
	return 0;
}

static int read_file(const struct ck_region *g, uint64_t off, void *buf, size_t len)
{
	int fd = open(g->path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -EFAULT;
	n = pread(fd, buf, len, (off_t)(g->file_off + off));
	close(fd);
	if (n < 0)
		return -EFAULT;
	if ((size_t)n < len) /* past the file's end: a mapping reads zeros */
		memset((uint8_t *)buf + n, 0, len - (size_t)n);
	return 0;
}

/* A private mapping's pages that were the file's: only from that file (as
 * a restore checks it), never from one that replaced it. */
static int filepages_ok(struct ckpt_img *im, const struct ck_region *g)
{
	const struct ck_manifest *m = im->m;

	if (!(g->flags & CK_REG_FILEPAGES))
		return 1;
	for (size_t i = 0; i < m->nfiles; i++) {
		if (strcmp(m->files[i].path, g->path))
			continue;
		if (!im->file_ok[i]) /* once: a copy is read whole to be checked */
			im->file_ok[i] = ck_mfile_check(im->p->pid, &m->files[i], g->path) == 0 ? 1 : -1;
		return im->file_ok[i] > 0;
	}
	return 0;
}

int ckpt_img_read(struct ckpt_img *im, uint64_t addr, void *buf, size_t len)
{
	uint8_t *b = buf;

	while (len) {
		const struct ck_region *g = ckpt_img_region(im, addr);
		uint64_t off;
		size_t take;
		int rc;

		if (!g || !ckpt_img_readable(g) || !filepages_ok(im, g))
			return -EFAULT;
		off = addr - g->start;
		take = g->end - addr < len ? (size_t)(g->end - addr) : len;
		if (g->nchunks)
			rc = read_chunks(im, g->first_chunk, g->nchunks, off, b, take);
		else if (g->flags & CK_REG_SYSV) {
			const struct ck_sysv_shm *s = sysv_of(im->m, g);
			rc = s ? read_chunks(im, s->first_chunk, s->nchunks, off, b, take) : -EFAULT;
		} else
			rc = read_file(g, off, b, take);
		if (rc < 0)
			return rc;
		b += take;
		addr += take;
		len -= take;
	}
	return 0;
}
