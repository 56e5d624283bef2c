/* Chunk reader: packs -> verified region data.
 *
 * Neighbouring chunks of one pack are fetched with a single ranged read of
 * up to CK__SPAN_MAX bytes. Every chunk is decompressed into its own buffer
 * and its length and SHA-256 are checked before the consumer sees a byte. */
#include "launcher/chunkio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "launcher/chunkio_int.h"
#include "launcher/ck_err.h"

#define CK__SPAN_MAX (4u << 20) /* one ranged read */
#define CK__GAP_MAX (64u << 10) /* bytes of other chunks worth reading over */

struct ck_reader {
	struct ck_store *s;
	char *job;
	const struct ck_manifest *m;
	ZSTD_DCtx *dctx;
	uint8_t *span; /* CK__SPAN_MAX + one largest chunk */
	uint8_t *out;  /* CK_CHUNK_SIZE */
	uint8_t *zero; /* CK_CHUNK_SIZE zero bytes */
	uint8_t zero_hash[CK_HASH_LEN];
};

int ck_reader_open(struct ck_store *s, const char *job, const struct ck_manifest *m, struct ck_reader **out)
{
	struct ck_reader *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r)
		goto nomem;
	r->s = s;
	r->m = m;
	r->job = strdup(job);
	r->dctx = ZSTD_createDCtx();
	r->span = malloc(CK__SPAN_MAX + 2 * CK_CHUNK_SIZE);
	r->out = malloc(CK_CHUNK_SIZE);
	r->zero = calloc(1, CK_CHUNK_SIZE);
	if (!r->job || !r->dctx || !r->span || !r->out || !r->zero)
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
	ZSTD_freeDCtx(r->dctx);
	free(r->span);
	free(r->out);
	free(r->zero);
	free(r->job);
	free(r);
}

static int chunk_err(struct ck_reader *r, uint64_t idx, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
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

/* Turns the stored bytes of chunk idx into verified data in *data. */
static int decode_chunk(struct ck_reader *r, uint64_t idx, const uint8_t *stored, const uint8_t **data)
{
	const struct ck_chunk *c = &r->m->chunks[idx];
	uint8_t hash[CK_HASH_LEN];

	if (c->flags & CK_CHUNK_RAW) {
		*data = stored;
	} else {
		size_t n = ZSTD_decompressDCtx(r->dctx, r->out, c->len, stored, c->clen);

		if (ZSTD_isError(n))
			return chunk_err(r, idx, -EBADMSG, "cannot decompress: %s", ZSTD_getErrorName(n));
		if (n != c->len)
			return chunk_err(r, idx, -EBADMSG, "length mismatch (%zu bytes, expected %u)", n, c->len);
		*data = r->out;
	}
	if (ck_sha256(*data, c->len, hash) < 0)
		return chunk_err(r, idx, -EIO, "SHA-256 failed");
	if (memcmp(hash, c->hash, CK_HASH_LEN))
		return chunk_err(r, idx, -EBADMSG, "hash mismatch");
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

int ck_reader_read(struct ck_reader *r, uint64_t first, uint32_t n, ck_write_fn fn, void *arg)
{
	const struct ck_manifest *m = r->m;
	uint64_t i = first, end = first + n, out_off = 0;
	int rc;

	if (first > m->nchunks || n > m->nchunks - first) {
		ck_err_set("checkpoint %s@%llu: chunks %llu..%llu out of range (%zu chunks)", r->job,
			   (unsigned long long)m->seq, (unsigned long long)first, (unsigned long long)end,
			   m->nchunks);
		return -EBADMSG;
	}
	while (i < end) {
		const struct ck_chunk *c = &m->chunks[i];
		uint64_t j, span_start, span_end;
		const uint8_t *data = NULL;
		char key[512];

		/* Manifests built in memory did not pass the decoder's checks. */
		if (c->len > CK_CHUNK_SIZE ||
		    (!(c->flags & CK_CHUNK_ZERO) && (c->pack >= m->npacks || c->clen > 2 * CK_CHUNK_SIZE))) {
			ck_err_set("checkpoint %s@%llu: chunk %llu: bad chunk table entry (store %s)", r->job,
				   (unsigned long long)m->seq, (unsigned long long)i, r->s->uri);
			return -EBADMSG;
		}
		if (c->flags & CK_CHUNK_ZERO) {
			uint8_t hash[CK_HASH_LEN];

			if (c->len == CK_CHUNK_SIZE)
				memcpy(hash, r->zero_hash, CK_HASH_LEN);
			else
				ck_sha256(r->zero, c->len, hash);
			if (memcmp(hash, c->hash, CK_HASH_LEN))
				return chunk_err(r, i, -EBADMSG, "hash mismatch");
			rc = fn(arg, out_off, r->zero, c->len);
			if (rc < 0)
				return rc;
			out_off += c->len;
			i++;
			continue;
		}
		/* Group the following chunks that sit close behind in the same
		 * pack, up to one span. */
		span_start = c->off;
		span_end = c->off + c->clen;
		for (j = i + 1; j < end; j++) {
			const struct ck_chunk *d = &m->chunks[j];

			if ((d->flags & CK_CHUNK_ZERO) || d->pack != c->pack || d->clen > 2 * CK_CHUNK_SIZE || d->off < span_end ||
			    d->off - span_end > CK__GAP_MAX || d->off + d->clen - span_start > CK__SPAN_MAX)
				break;
			span_end = d->off + d->clen;
		}
		snprintf(key, sizeof(key), "%s/%s", r->job, m->packs[c->pack]);
		rc = ck_store_get_range(r->s, key, span_start, r->span, (size_t)(span_end - span_start));
		if (rc < 0)
			return fetch_err(r, i, span_end, rc);
		for (; i < j; i++) {
			c = &m->chunks[i];
			rc = decode_chunk(r, i, r->span + (c->off - span_start), &data);
			if (rc < 0)
				return rc;
			rc = fn(arg, out_off, data, c->len);
			if (rc < 0)
				return rc;
			out_off += c->len;
		}
	}
	return 0;
}

int ck_chunk_verify(const struct ck_chunk *c, const void *stored, void *scratch, const char **why)
{
	uint8_t hash[CK_HASH_LEN];
	const void *data = stored;

	*why = NULL;
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
