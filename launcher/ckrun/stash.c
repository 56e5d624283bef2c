/* The parked part of a write-protect round, made short: write protection
 * covers only anonymous memory, so a process's private file mappings (the
 * pages it copied on write: RELRO, a library's .data, the program) are
 * read in pass 0, while it is parked. A Python process has hundreds of
 * them, 20-30 MB; hashed and compressed there they kept a PyTorch job
 * frozen for 100-300 ms. Instead their bytes are copied aside, into an
 * unlinked file (page cache, not ckrun's memory), at the speed of two
 * copies, and go through the writer after the release.
 *
 * Bounded (CK__STASH_MAX): beyond it, or without a file, the caller reads
 * the region while the process is parked, as before. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/round.h"
#include "launcher/ckrun/stash.h"
#include "launcher/common/ck_err.h"

#define CK__STASH_MAX (256ull << 20)
#define CK__STASH_BUF (1u << 20)

struct ck__stash_ent {
	struct ck_proc *p;
	size_t region;
	uint64_t off, len;
};

struct ck_stash {
	int fd; /* -1: none to be had */
	uint64_t used;
	uint8_t *buf;
	struct ck__stash_ent *v;
	size_t n, cap;
};

struct ck__stash_src {
	int fd;
	uint64_t base;
};

static int ck__stash_open(struct ck_stash **sp)
{
	struct ck_stash *s = calloc(1, sizeof(*s));
	const char *dir = getenv("TMPDIR");

	if (!s)
		return -ENOMEM;
	s->buf = malloc(CK__STASH_BUF);
	/* /var/tmp: on disk where /tmp may be memory (tmpfs) */
	s->fd = open(dir && *dir ? dir : "/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (s->fd < 0 && dir && *dir) /* a TMPDIR without O_TMPFILE */
		s->fd = open("/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	*sp = s;
	return s->buf ? 0 : -ENOMEM;
}

int ck_stash_take(struct ck_stash **sp, pid_t pid, struct ck_proc *p, size_t region)
{
	const struct ck_region *rg = &p->regions[region];
	uint64_t len = rg->end - rg->start, done = 0;
	struct ck_stash *s;

	if (!*sp && ck__stash_open(sp) < 0)
		return 0;
	s = *sp;
	if (s->fd < 0 || !s->buf || s->used + len > CK__STASH_MAX)
		return 0;
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 256;
		struct ck__stash_ent *v = realloc(s->v, nc * sizeof(*v));
		if (!v)
			return 0;
		s->v = v;
		s->cap = nc;
	}
	while (done < len) {
		size_t n = len - done < CK__STASH_BUF ? (size_t)(len - done) : CK__STASH_BUF;
		if (ck_mem_read(pid, rg->start + done, s->buf, n) < 0 ||
		    pwrite(s->fd, s->buf, n, (off_t)(s->used + done)) != (ssize_t)n)
			return 0; /* read the usual way: it says what went wrong */
		done += n;
	}
	s->v[s->n++] = (struct ck__stash_ent){p, region, s->used, len};
	s->used += len;
	return 1;
}

static int ck__stash_read(void *arg, uint64_t off, void *buf, size_t len)
{
	const struct ck__stash_src *src = arg;
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(src->fd, (char *)buf + done, len - done, (off_t)(src->base + off + done));
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			ck_err_set("cannot read memory copied aside during the checkpoint: %s", strerror(e));
			return -e;
		}
		done += (size_t)n;
	}
	return 0;
}

int ck_stash_write(struct ck_stash *s, struct ck_writer *w, struct ck_manifest *m)
{
	for (size_t i = 0; s && i < s->n; i++) {
		struct ck__stash_ent *e = &s->v[i];
		struct ck_region *rg = &e->p->regions[e->region];
		struct ck__stash_src src = {s->fd, e->off};
		int r = ck_writer_add(w, e->len, ck__stash_read, &src, &rg->first_chunk, &rg->nchunks);

		if (r < 0)
			return r;
		m->logical_bytes += e->len;
	}
	return 0;
}

uint64_t ck_stash_bytes(const struct ck_stash *s)
{
	return s ? s->used : 0;
}

void ck_stash_free(struct ck_stash *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->buf);
	free(s->v);
	free(s);
}
