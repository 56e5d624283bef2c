/* Chunk reader: packs -> verified region data.
 *
 * Neighbouring chunks of one pack are fetched with a single ranged read of
 * up to span_max bytes (and CK__OUT_MAX bytes once decoded); a few such
 * groups are fetched, decompressed and checked (length, SHA-256) by worker
 * threads at once, so decoding runs beside the consumer, which is always
 * called on the caller's thread, in order, and sees only verified bytes. */
#include "launcher/image/chunkio.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "launcher/image/chunk.h"
#include "launcher/common/ck_err.h"
#include "launcher/common/progress.h"

#define CK__SPAN_MAX (4u << 20) /* one ranged read */
#define CK__OUT_MAX (8u << 20) /* the decoded chunks of one group */
#define CK__GAP_MAX (64u << 10) /* bytes of other chunks worth reading over */
#define CK__FETCH_DEFAULT 3      /* groups fetched and decoded at once */
#define CK__FETCH_MAX 16
/* A remote store (S3) answers each read after a round trip through the
 * gateway: reads of up to one S3 part (8 MiB), a dozen at once. Restoring
 * a 2 GiB image (1 GiB stored) from a local Ceph to running: 4 MiB reads,
 * 3 at once: 9-10 s (528 requests); 8 MiB, 8: 5.0-5.1 s; 8 MiB, 12:
 * 4.4-4.6 s (400 requests); 4 MiB, 16: 4.1-4.6 s. */
#define CK__SPAN_REMOTE (8u << 20)
#define CK__FETCH_REMOTE 12

enum { CK__FREE, CK__QUEUED, CK__BUSY, CK__DONE };

/* One group of chunks: a span of one pack fetched with one read, or a
 * single zero chunk that needs no read. */
struct ck__fslot {
	uint64_t first, end; /* chunks [first, end) */
	uint64_t span_start, span_end;
	uint64_t order; /* planning order: fetches start oldest first */
	uint32_t pack;
	int zero;
	int state;
	int rc;
	char err[1024];
	uint8_t *buf; /* span_max + one largest chunk */
	uint8_t *out; /* CK__OUT_MAX: the group's compressed chunks, decoded */
};

struct ck__hidx {
	uint8_t hash[CK_HASH_LEN];
	uint32_t len;
	uint64_t idx;
};

struct ck_reader {
	struct ck_store *s;
	char *job;
	const struct ck_manifest *m;
	uint8_t *zero; /* CK_CHUNK_SIZE zero bytes */
	uint8_t zero_hash[CK_HASH_LEN];

	/* fetch threads fill a ring of slots that the caller drains in order */
	unsigned nthreads, nring;
	uint32_t span_max; /* bytes of one ranged read */
	pthread_t *threads;
	struct ck__fslot *ring;
	pthread_mutex_t lock;
	pthread_cond_t work_cv, done_cv;
	uint64_t order;
	int quit;
	struct ck_progress *prog; /* optional: bytes handed on */

	/* deltas' bases: chunks that can be one, sorted by hash (made on the
	 * first delta) */
	pthread_mutex_t base_lock;
	struct ck__hidx *by_hash;
	size_t nby_hash;
	int by_hash_made;
};

/* A fetch thread's buffers for a delta's base (made on its first delta). */
struct ck__dbuf {
	uint8_t *stored; /* the base's stored bytes, at the store's alignment */
	uint8_t *base;   /* decoded */
	uint8_t *pages;  /* the delta's pages */
};

static int chunk_err(struct ck_reader *r, uint64_t idx, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fetch_err(struct ck_reader *r, uint64_t idx, uint64_t span_end, int rc);
static int decode_group(struct ck_reader *r, struct ck__fslot *sl, ZSTD_DCtx *dctx, struct ck__dbuf *db);

static void *fetcher(void *arg)
{
	struct ck_reader *r = arg;
	ZSTD_DCtx *dctx = ZSTD_createDCtx();
	struct ck__dbuf db = {NULL, NULL, NULL};

	pthread_mutex_lock(&r->lock);
	for (;;) {
		struct ck__fslot *sl = NULL;
		char key[512];
		unsigned i;
		int rc;

		for (i = 0; i < r->nring; i++)
			if (r->ring[i].state == CK__QUEUED && (!sl || r->ring[i].order < sl->order))
				sl = &r->ring[i];
		if (!sl) {
			if (r->quit)
				break;
			pthread_cond_wait(&r->work_cv, &r->lock);
			continue;
		}
		sl->state = CK__BUSY;
		pthread_mutex_unlock(&r->lock);
		snprintf(key, sizeof(key), "%s/%s", r->job, r->m->packs[sl->pack]);
		rc = ck_store_get_range(r->s, key, sl->span_start, sl->buf, (size_t)(sl->span_end - sl->span_start));
		if (rc < 0)
			rc = fetch_err(r, sl->first, sl->span_end, rc);
		else if (!dctx)
			rc = chunk_err(r, sl->first, -ENOMEM, "out of memory for a decoder");
		else
			rc = decode_group(r, sl, dctx, &db);
		if (rc < 0)
			snprintf(sl->err, sizeof(sl->err), "%s", ck_err_msg());
		pthread_mutex_lock(&r->lock);
		sl->rc = rc;
		sl->state = CK__DONE;
		pthread_cond_broadcast(&r->done_cv);
	}
	pthread_mutex_unlock(&r->lock);
	ZSTD_freeDCtx(dctx);
	free(db.stored);
	free(db.base);
	free(db.pages);
	return NULL;
}

static void stop_threads(struct ck_reader *r)
{
	unsigned i;

	if (!r->threads)
		return;
	pthread_mutex_lock(&r->lock);
	r->quit = 1;
	pthread_cond_broadcast(&r->work_cv);
	pthread_mutex_unlock(&r->lock);
	for (i = 0; i < r->nthreads; i++)
		if (r->threads[i])
			pthread_join(r->threads[i], NULL);
	free(r->threads);
	r->threads = NULL;
	r->quit = 0;
}

static void free_ring(struct ck_reader *r)
{
	unsigned i;

	for (i = 0; r->ring && i < r->nring; i++) {
		free(r->ring[i].buf);
		free(r->ring[i].out);
	}
	free(r->ring);
	r->ring = NULL;
}

/* Threads and buffers are made on the first read, so that the number of
 * fetches in flight can still be chosen after open. */
static int start_threads(struct ck_reader *r)
{
	unsigned i;
	int rc;

	r->nring = r->nthreads + 1;
	r->ring = calloc(r->nring, sizeof(*r->ring));
	r->threads = calloc(r->nthreads, sizeof(*r->threads));
	if (!r->ring || !r->threads)
		goto nomem;
	for (i = 0; i < r->nring; i++) {
		void *buf = NULL;

		/* at the store's read alignment: its reads skip the page cache */
		if (posix_memalign(&buf, r->s->read_align > 64 ? r->s->read_align : 64,
				   r->span_max + 2 * CK_CHUNK_SIZE))
			buf = NULL;
		r->ring[i].buf = buf;
		r->ring[i].out = malloc(CK__OUT_MAX);
		if (!r->ring[i].buf || !r->ring[i].out)
			goto nomem;
	}
	for (i = 0; i < r->nthreads; i++) {
		rc = pthread_create(&r->threads[i], NULL, fetcher, r);
		if (rc) {
			r->threads[i] = 0;
			stop_threads(r);
			free_ring(r);
			ck_err_set("chunk reader %s: cannot start threads: %s", r->job, strerror(rc));
			return -rc;
		}
	}
	return 0;
nomem:
	free(r->threads);
	r->threads = NULL;
	free_ring(r);
	ck_err_set("chunk reader %s: out of memory", r->job);
	return -ENOMEM;
}

void ck_reader_set_parallel(struct ck_reader *r, unsigned n)
{
	if (r->threads)
		return; /* already reading */
	r->nthreads = n < 1 ? 1 : n > CK__FETCH_MAX ? CK__FETCH_MAX : n;
}

int ck_reader_open(struct ck_store *s, const char *job, const struct ck_manifest *m, struct ck_reader **out)
{
	struct ck_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		goto nomem;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->work_cv, NULL);
	pthread_cond_init(&r->done_cv, NULL);
	pthread_mutex_init(&r->base_lock, NULL);
	r->s = s;
	r->m = m;
	r->nthreads = CK__FETCH_DEFAULT;
	r->span_max = CK__SPAN_MAX;
	if (strcmp(s->ops->scheme, "file")) {
		r->nthreads = CK__FETCH_REMOTE;
		r->span_max = CK__SPAN_REMOTE;
	}
	{
		/* tuning: groups fetched and decoded at once */
		const char *e = getenv("CKPT_READ_PARALLEL");
		if (e && atoi(e) > 0)
			ck_reader_set_parallel(r, (unsigned)atoi(e));
	}
	r->job = strdup(job);
	r->zero = calloc(1, CK_CHUNK_SIZE);
	if (!r->job || !r->zero)
		goto nomem;
	ck_sha256(r->zero, CK_CHUNK_SIZE, r->zero_hash);
	*out = r;
	return 0;
nomem:
	ck_reader_close(r);
	ck_err_set("chunk reader %s: out of memory", job);
	return -ENOMEM;
}

void ck_reader_close(struct ck_reader *r)
{
	if (!r)
		return;
	stop_threads(r);
	free_ring(r);
	free(r->zero);
	free(r->job);
	free(r->by_hash);
	pthread_mutex_destroy(&r->base_lock);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->work_cv);
	pthread_cond_destroy(&r->done_cv);
	free(r);
}

static int chunk_err(struct ck_reader *r, uint64_t idx, int rc, const char *fmt, ...)
{
	const struct ck_chunk *c = &r->m->chunks[idx];
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (c->flags & CK_CHUNK_ZERO)
		ck_err_set("checkpoint %s@%llu: chunk %llu (zero chunk): %s (store %s)", r->job,
			   (unsigned long long)r->m->seq, (unsigned long long)idx, what, r->s->uri);
	else
		ck_err_set("checkpoint %s@%llu: chunk %llu (pack %s, offset %llu): %s (store %s)", r->job,
			   (unsigned long long)r->m->seq, (unsigned long long)idx, r->m->packs[c->pack],
			   (unsigned long long)c->off, what, r->s->uri);
	return rc;
}

/* Where the verified data of chunk idx of a decoded group lies: raw
 * chunks in the fetched bytes, compressed ones in the group's output,
 * which holds them back to back from *out_pos on. */
static const uint8_t *chunk_data(const struct ck_reader *r, const struct ck__fslot *sl, uint64_t idx,
				 size_t *out_pos)
{
	const struct ck_chunk *c = &r->m->chunks[idx];
	const uint8_t *p;

	if (c->flags & CK_CHUNK_RAW)
		return sl->buf + (c->off - sl->span_start);
	p = sl->out + *out_pos;
	*out_pos += c->len;
	return p;
}

/* ---- deltas ---- */

static int by_hash_cmp(const void *a, const void *b)
{
	return memcmp(((const struct ck__hidx *)a)->hash, ((const struct ck__hidx *)b)->hash, CK_HASH_LEN);
}

/* The index of a chunk that can serve as a delta's base: stored, not a
 * delta, of the hash and length given; -1 if the manifest has none, -2
 * out of memory. */
static int64_t base_lookup(struct ck_reader *r, const uint8_t *hash, uint32_t len)
{
	const struct ck_manifest *m = r->m;
	size_t lo = 0, hi, i;

	pthread_mutex_lock(&r->base_lock);
	if (!r->by_hash_made) {
		r->by_hash = malloc((m->nchunks + 1) * sizeof(*r->by_hash));
		if (!r->by_hash) {
			pthread_mutex_unlock(&r->base_lock);
			return -2;
		}
		for (i = 0; i < m->nchunks; i++) {
			const struct ck_chunk *c = &m->chunks[i];

			if (c->flags & (CK_CHUNK_ZERO | CK_CHUNK_DELTA))
				continue;
			memcpy(r->by_hash[r->nby_hash].hash, c->hash, CK_HASH_LEN);
			r->by_hash[r->nby_hash].len = c->len;
			r->by_hash[r->nby_hash++].idx = i;
		}
		if (r->nby_hash)
			qsort(r->by_hash, r->nby_hash, sizeof(*r->by_hash), by_hash_cmp);
		r->by_hash_made = 1;
	}
	pthread_mutex_unlock(&r->base_lock);
	hi = r->nby_hash;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (memcmp(r->by_hash[mid].hash, hash, CK_HASH_LEN) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (i = lo; i < r->nby_hash && !memcmp(r->by_hash[i].hash, hash, CK_HASH_LEN); i++)
		if (r->by_hash[i].len == len)
			return (int64_t)r->by_hash[i].idx;
	return -1;
}

/* Reads, decodes and checks chunk idx into db->base. */
static int base_load(struct ck_reader *r, uint64_t idx, ZSTD_DCtx *dctx, struct ck__dbuf *db, const uint8_t **data)
{
	const struct ck_chunk *c = &r->m->chunks[idx];
	uint64_t start = r->s->read_align ? c->off - c->off % r->s->read_align : c->off;
	uint8_t hash[CK_HASH_LEN];
	char key[512];
	int rc;

	snprintf(key, sizeof(key), "%s/%s", r->job, r->m->packs[c->pack]);
	rc = ck_store_get_range(r->s, key, start, db->stored, (size_t)(c->off + c->clen - start));
	if (rc < 0)
		return fetch_err(r, idx, c->off + c->clen, rc);
	*data = db->stored + (c->off - start);
	if (!(c->flags & CK_CHUNK_RAW)) {
		size_t n = ZSTD_decompressDCtx(dctx, db->base, c->len, *data, c->clen);

		if (ZSTD_isError(n) || n != c->len)
			return chunk_err(r, idx, -EBADMSG, "cannot decompress (the base of a delta)");
		*data = db->base;
	}
	if (ck_sha256(*data, c->len, hash) < 0)
		return chunk_err(r, idx, -EIO, "SHA-256 failed");
	if (memcmp(hash, c->hash, CK_HASH_LEN))
		return chunk_err(r, idx, -EBADMSG, "hash mismatch (the base of a delta)");
	return 0;
}

/* Unpacks a delta's stored bytes: its base's hash, its page map and its
 * pages (decoded into pages, which holds CK_CHUNK_SIZE bytes). 0, or
 * -EBADMSG with *why. */
static int delta_unpack(const struct ck_chunk *c, const uint8_t *stored, ZSTD_DCtx *dctx, uint8_t *pages,
			uint64_t *map, const char **why)
{
	unsigned i, npages = (c->len + CK_DELTA_PAGE - 1) / CK_DELTA_PAGE;
	size_t want = 0, n;

	const uint8_t *f;

	*map = 0;
	if (c->clen <= CK_DELTA_HDR) {
		*why = "bad delta header";
		return -EBADMSG;
	}
	for (i = 0; i < 8; i++)
		*map |= (uint64_t)stored[CK_HASH_LEN + i] << (8 * i);
	if ((npages < 64 && (*map >> npages)) || !*map) {
		*why = "bad delta header";
		return -EBADMSG;
	}
	/* its frame must check itself (a copy verifies it without the base):
	 * RFC 8878, the descriptor byte after the magic, bit 2 */
	f = stored + CK_DELTA_HDR;
	if (c->clen < CK_DELTA_HDR + 5 || f[0] != 0x28 || f[1] != 0xb5 || f[2] != 0x2f || f[3] != 0xfd ||
	    !(f[4] & 0x04)) {
		*why = "delta frame without its checksum";
		return -EBADMSG;
	}
	for (i = 0; i < npages; i++)
		if (*map & (1ull << i))
			want += i + 1 < npages ? CK_DELTA_PAGE : c->len - i * CK_DELTA_PAGE;
	n = dctx ? ZSTD_decompressDCtx(dctx, pages, CK_CHUNK_SIZE, stored + CK_DELTA_HDR, c->clen - CK_DELTA_HDR)
		 : ZSTD_decompress(pages, CK_CHUNK_SIZE, stored + CK_DELTA_HDR, c->clen - CK_DELTA_HDR);
	if (ZSTD_isError(n)) {
		*why = "cannot decompress";
		return -EBADMSG;
	}
	if (n != want) {
		*why = "length mismatch";
		return -EBADMSG;
	}
	return 0;
}

/* Chunk idx, a delta: its base read and its pages laid over it, into out. */
static int delta_decode(struct ck_reader *r, uint64_t idx, const uint8_t *stored, uint8_t *out, ZSTD_DCtx *dctx,
			struct ck__dbuf *db)
{
	const struct ck_chunk *c = &r->m->chunks[idx];
	unsigned i, npages = (c->len + CK_DELTA_PAGE - 1) / CK_DELTA_PAGE;
	const uint8_t *base = NULL;
	const char *why;
	uint64_t map;
	size_t pos = 0;
	int64_t b;
	int rc;

	if (!db->stored || !db->base || !db->pages) {
		size_t align = r->s->read_align > 64 ? r->s->read_align : 64;
		void *p = NULL;

		if (!db->stored && posix_memalign(&p, align, 2 * CK_CHUNK_SIZE + 2 * align) == 0)
			db->stored = p;
		if (!db->base)
			db->base = malloc(CK_CHUNK_SIZE);
		if (!db->pages)
			db->pages = malloc(CK_CHUNK_SIZE);
		if (!db->stored || !db->base || !db->pages)
			return chunk_err(r, idx, -ENOMEM, "out of memory for a delta");
	}
	rc = delta_unpack(c, stored, dctx, db->pages, &map, &why);
	if (rc < 0)
		return chunk_err(r, idx, rc, "%s", why);
	b = base_lookup(r, stored, c->len);
	if (b == -2)
		return chunk_err(r, idx, -ENOMEM, "out of memory for the index of deltas' bases");
	if (b < 0)
		return chunk_err(r, idx, -EBADMSG, "its base chunk (%02x%02x%02x%02x...) is not in the checkpoint",
				 stored[0], stored[1], stored[2], stored[3]);
	rc = base_load(r, (uint64_t)b, dctx, db, &base);
	if (rc < 0)
		return rc;
	for (i = 0; i < npages; i++) {
		size_t off = (size_t)i * CK_DELTA_PAGE, n = c->len - off < CK_DELTA_PAGE ? c->len - off : CK_DELTA_PAGE;

		if (map & (1ull << i)) {
			memcpy(out + off, db->pages + pos, n);
			pos += n;
		} else {
			memcpy(out + off, base + off, n);
		}
	}
	return 0;
}

/* Decompresses and checks every chunk of a fetched group (worker thread). */
static int decode_group(struct ck_reader *r, struct ck__fslot *sl, ZSTD_DCtx *dctx, struct ck__dbuf *db)
{
	size_t pos = 0;
	uint64_t idx;

	for (idx = sl->first; idx < sl->end; idx++) {
		const struct ck_chunk *c = &r->m->chunks[idx];
		const uint8_t *stored = sl->buf + (c->off - sl->span_start);
		uint8_t hash[CK_HASH_LEN];
		const uint8_t *data = chunk_data(r, sl, idx, &pos);

		if (c->flags & CK_CHUNK_DELTA) {
			int rc = delta_decode(r, idx, stored, (uint8_t *)data, dctx, db);

			if (rc < 0)
				return rc;
		} else if (!(c->flags & CK_CHUNK_RAW)) {
			size_t n = ZSTD_decompressDCtx(dctx, (uint8_t *)data, c->len, stored, c->clen);

			if (ZSTD_isError(n))
				return chunk_err(r, idx, -EBADMSG, "cannot decompress: %s", ZSTD_getErrorName(n));
			if (n != c->len)
				return chunk_err(r, idx, -EBADMSG, "length mismatch (%zu bytes, expected %u)", n,
						 c->len);
		}
		if (ck_sha256(data, c->len, hash) < 0)
			return chunk_err(r, idx, -EIO, "SHA-256 failed");
		if (memcmp(hash, c->hash, CK_HASH_LEN))
			return chunk_err(r, idx, -EBADMSG, "hash mismatch");
	}
	return 0;
}

/* Explains a failed ranged read of chunk idx: missing or short pack. */
static int fetch_err(struct ck_reader *r, uint64_t idx, uint64_t span_end, int rc)
{
	const struct ck_chunk *c = &r->m->chunks[idx];
	char key[512];
	uint64_t size;

	if (rc == -ENOENT)
		return chunk_err(r, idx, -ENOENT, "pack missing");
	snprintf(key, sizeof(key), "%s/%s", r->job, r->m->packs[c->pack]);
	if (rc == -EIO && ck_store_stat(r->s, key, &size) == 0 && size < span_end) {
		/* Name the first chunk that lies past the end. */
		while (idx + 1 < r->m->nchunks && c->off + c->clen <= size && r->m->chunks[idx + 1].pack == c->pack &&
		       !(r->m->chunks[idx + 1].flags & CK_CHUNK_ZERO)) {
			idx++;
			c++;
		}
		return chunk_err(r, idx, -EBADMSG, "pack truncated (%llu bytes, chunk ends at %llu)",
				 (unsigned long long)size, (unsigned long long)(c->off + c->clen));
	}
	ck_err_wrap("checkpoint %s@%llu: chunk %llu", r->job, (unsigned long long)r->m->seq, (unsigned long long)idx);
	return rc;
}

/* Plans the group of chunks that starts at chunk i into sl. */
static void plan(struct ck_reader *r, struct ck__fslot *sl, uint64_t i, uint64_t end)
{
	const struct ck_chunk *c = &r->m->chunks[i];
	uint64_t j, out;

	sl->first = i;
	sl->rc = 0;
	sl->err[0] = 0;
	sl->order = r->order++;
	if (c->flags & CK_CHUNK_ZERO) {
		sl->zero = 1;
		sl->end = i + 1;
		sl->state = CK__DONE;
		return;
	}
	/* The following chunks that sit close behind in the same pack come
	 * along in the same read, up to one span. */
	sl->zero = 0;
	sl->pack = c->pack;
	/* Starts at the store's alignment, if it has one, reading up to a
	 * block of the chunk before: chunk_data() counts from span_start. */
	sl->span_start = r->s->read_align ? c->off - c->off % r->s->read_align : c->off;
	sl->span_end = c->off + c->clen;
	out = (c->flags & CK_CHUNK_RAW) ? 0 : c->len;
	for (j = i + 1; j < end; j++) {
		const struct ck_chunk *d = &r->m->chunks[j];
		uint64_t dout = (d->flags & CK_CHUNK_RAW) ? 0 : d->len;

		if ((d->flags & CK_CHUNK_ZERO) || d->pack != c->pack || d->off < sl->span_end ||
		    d->off - sl->span_end > CK__GAP_MAX || d->off + d->clen - sl->span_start > r->span_max ||
		    out + dout > CK__OUT_MAX)
			break;
		sl->span_end = d->off + d->clen;
		out += dout;
	}
	sl->end = j;
	sl->state = CK__QUEUED;
}

/* Hands on the chunks of a fetched and verified group. */
static int consume(struct ck_reader *r, struct ck__fslot *sl, ck_write_fn fn, void *arg, uint64_t *out_off,
		   int sparse)
{
	size_t pos = 0;
	uint64_t i;
	int rc;

	if (sl->zero) {
		const struct ck_chunk *c = &r->m->chunks[sl->first];
		uint8_t hash[CK_HASH_LEN];

		if (c->len == CK_CHUNK_SIZE)
			memcpy(hash, r->zero_hash, CK_HASH_LEN);
		else
			ck_sha256(r->zero, c->len, hash);
		if (memcmp(hash, c->hash, CK_HASH_LEN))
			return chunk_err(r, sl->first, -EBADMSG, "hash mismatch");
		rc = fn(arg, *out_off, sparse ? NULL : r->zero, c->len);
		*out_off += c->len;
		return rc;
	}
	for (i = sl->first; i < sl->end; i++) {
		const struct ck_chunk *c = &r->m->chunks[i];
		const uint8_t *data = chunk_data(r, sl, i, &pos);

		rc = fn(arg, *out_off, data, c->len);
		if (rc < 0)
			return rc;
		*out_off += c->len;
	}
	return 0;
}

static int read_chunks(struct ck_reader *r, uint64_t first, uint32_t n, ck_write_fn fn, void *arg, int sparse)
{
	const struct ck_manifest *m = r->m;
	uint64_t i, end = first + n, next = first, head = 0, tail = 0, out_off = 0;
	int rc = 0;

	if (first > m->nchunks || n > m->nchunks - first) {
		ck_err_set("checkpoint %s@%llu: chunks %llu..%llu out of range (%zu chunks)", r->job,
			   (unsigned long long)m->seq, (unsigned long long)first, (unsigned long long)end,
			   m->nchunks);
		return -EBADMSG;
	}
	/* Manifests built in memory did not pass the decoder's checks. */
	for (i = first; i < end; i++) {
		const struct ck_chunk *c = &m->chunks[i];

		if (c->len > CK_CHUNK_SIZE ||
		    (!(c->flags & CK_CHUNK_ZERO) && (c->pack >= m->npacks || c->clen > 2 * CK_CHUNK_SIZE ||
						     c->off > UINT64_MAX - c->clen))) {
			ck_err_set("checkpoint %s@%llu: chunk %llu: bad chunk table entry (store %s)", r->job,
				   (unsigned long long)m->seq, (unsigned long long)i, r->s->uri);
			return -EBADMSG;
		}
	}
	if (!r->threads) {
		rc = start_threads(r);
		if (rc < 0)
			return rc;
	}
	for (;;) {
		struct ck__fslot *sl;

		pthread_mutex_lock(&r->lock);
		while (tail - head < r->nring && next < end) {
			sl = &r->ring[tail++ % r->nring];
			plan(r, sl, next, end);
			next = sl->end;
		}
		pthread_cond_broadcast(&r->work_cv);
		if (head == tail) {
			pthread_mutex_unlock(&r->lock);
			break;
		}
		sl = &r->ring[head % r->nring];
		while (sl->state != CK__DONE)
			pthread_cond_wait(&r->done_cv, &r->lock);
		pthread_mutex_unlock(&r->lock);
		if (sl->rc < 0) {
			ck_err_set("%s", sl->err);
			rc = sl->rc;
			break;
		}
		uint64_t before = out_off;
		rc = consume(r, sl, fn, arg, &out_off, sparse);
		if (rc < 0)
			break;
		ck_progress_add(r->prog, out_off - before);
		pthread_mutex_lock(&r->lock);
		sl->state = CK__FREE;
		pthread_mutex_unlock(&r->lock);
		head++;
	}
	/* On an early stop, drop the reads not started and wait for the
	 * running ones: their buffers are reused by the next call. */
	pthread_mutex_lock(&r->lock);
	for (i = 0; i < r->nring; i++) {
		while (r->ring[i].state == CK__BUSY)
			pthread_cond_wait(&r->done_cv, &r->lock);
		r->ring[i].state = CK__FREE;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}

int ck_reader_read(struct ck_reader *r, uint64_t first, uint32_t n, ck_write_fn fn, void *arg)
{
	return read_chunks(r, first, n, fn, arg, 0);
}

int ck_reader_read_sparse(struct ck_reader *r, uint64_t first, uint32_t n, ck_write_fn fn, void *arg)
{
	return read_chunks(r, first, n, fn, arg, 1);
}

void ck_reader_set_progress(struct ck_reader *r, struct ck_progress *p)
{
	r->prog = p;
}

const struct ck_manifest *ck_reader_manifest(const struct ck_reader *r)
{
	return r->m;
}

int ck_chunk_verify(const struct ck_chunk *c, const void *stored, void *scratch, const char **why)
{
	uint8_t hash[CK_HASH_LEN];
	const void *data = stored;

	*why = NULL;
	if (c->flags & CK_CHUNK_DELTA) {
		uint64_t map;

		/* Without its base only the stored bytes can be checked: the
		 * frame's own checksum; its base is checked as a chunk of its
		 * own, and a restore checks the whole. */
		return delta_unpack(c, stored, NULL, scratch, &map, why);
	}
	if (c->flags & CK_CHUNK_ZERO) {
		memset(scratch, 0, c->len);
		data = scratch;
	} else if (!(c->flags & CK_CHUNK_RAW)) {
		size_t n = ZSTD_decompress(scratch, c->len, stored, c->clen);

		if (ZSTD_isError(n)) {
			*why = "cannot decompress";
			return -EBADMSG;
		}
		if (n != c->len) {
			*why = "length mismatch";
			return -EBADMSG;
		}
		data = scratch;
	}
	if (ck_sha256(data, c->len, hash) < 0) {
		*why = "SHA-256 failed";
		return -EIO;
	}
	if (memcmp(hash, c->hash, CK_HASH_LEN)) {
		*why = "hash mismatch";
		return -EBADMSG;
	}
	return 0;
}
