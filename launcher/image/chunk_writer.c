/* Chunk writer: region data -> deduplicated, compressed chunks in packs.
 *
 * ck_writer_add cuts its input into batches of chunks. Worker threads read,
 * hash and compress the chunks of a batch in parallel while the calling
 * thread appends those of the batch before, in order, to the pack being
 * filled (two sets of slots take turns). A full pack goes
 * to an upload thread while the next one fills; the filler waits if every
 * upload thread is busy, so at most (upload threads + 1) packs and two
 * batches are in memory whatever the size of the data. The store says how
 * many uploads pay off at once (a disk: one; S3: a few). */
#include "launcher/image/chunkio.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "launcher/image/chunk.h"
#include "launcher/common/bigbuf.h"
#include "launcher/common/ck_err.h"

#define CK__MAX_SLOTS 64
#define CK__PAGES (CK_CHUNK_SIZE / CK_DELTA_PAGE)
#define CK__PDIG 16 /* bytes of a page's SHA-256 kept as its digest */

/* Where an already stored chunk lives; pack is an index into the previous
 * manifest's packs (from_prev) or into the new one's. */
struct ck__ent {
	uint8_t hash[CK_HASH_LEN];
	uint32_t len, clen, flags, pack;
	uint64_t off;
	uint8_t used, from_prev;
};

struct ck__slot {
	uint64_t src_off;
	uint32_t len;
	uint32_t clen;
	uint32_t flags;
	int found; /* already stored: ent is where */
	struct ck__ent ent;
	uint8_t hash[CK_HASH_LEN];
	uint8_t *data;  /* CK_CHUNK_SIZE */
	uint8_t *cdata; /* compressed, ZSTD_compressBound(CK_CHUNK_SIZE) */
	int rc;
	char err[512];
	ck_read_fn fn; /* where its bytes come from */
	void *fn_arg;
	uint64_t vaddr; /* its address in the process (with how) */
	unsigned how;   /* CK_WADD_* */
	int has_pdig;
	uint8_t (*pdig)[CK__PDIG]; /* CK__PAGES page digests */
	uint8_t *pages;            /* CK_CHUNK_SIZE: a delta's pages, back to back */
};

/* A chunk of a CK_WADD_BASE region: what a later chunk at its address is
 * compared with, page by page. */
struct ck__base {
	uint64_t vaddr;
	uint8_t hash[CK_HASH_LEN];
	uint32_t len;
	uint8_t pdig[CK__PAGES][CK__PDIG];
};

struct ck_writer;

/* One upload thread and the pack it holds. */
struct ck__upl {
	struct ck_writer *w;
	pthread_t th;
	int started, busy;
	uint8_t *buf;
	size_t len;
	char key[512];
};

struct ck_writer {
	struct ck_store *s;
	char *job;
	uint64_t seq;
	const struct ck_manifest *prev;
	int level;
	size_t pack_size, pack_cap;
	size_t buf_len; /* of each pack buffer: pack_cap in whole 2 MiB */

	/* tables being built */
	struct ck_chunk *chunks;
	size_t nchunks, chunks_cap;
	char **packs;
	size_t npacks, packs_cap;
	uint32_t *prev_map; /* prev pack index -> new index, or UINT32_MAX */
	uint64_t logical, stored;
	void (*pace)(void *arg, int first); /* ck_writer_opts' */
	void *pace_arg;

	/* dedup table: open addressing, power-of-two size */
	struct ck__ent *tab;
	size_t tab_cap, tab_n;
	pthread_mutex_t tab_lock;
	uint8_t zero_hash[CK_HASH_LEN]; /* of CK_CHUNK_SIZE zero bytes */

	/* bases by address: entries, and an open-addressing index (i + 1) */
	struct ck__base *bases;
	size_t nbases, bases_cap;
	uint32_t *bidx;
	size_t bidx_cap;
	pthread_mutex_t base_lock;

	/* pack being filled */
	uint8_t *cur;
	size_t cur_len;
	uint32_t cur_idx; /* its index in packs */
	unsigned pack_no;
	int cur_open;
	/* in every pack name: no other writer, even of the same sequence
	 * (a killed one, or one that lost the job's lock), produces it */
	char wid[17];

	/* upload threads */
	struct ck__upl *upl;
	unsigned nupl;
	pthread_mutex_t up_lock;
	pthread_cond_t up_cv;
	int up_quit, up_rc;
	char up_err[1024];

	/* workers */
	unsigned nthreads;
	pthread_t *workers;
	ZSTD_CCtx **cctx; /* one per worker, then the caller's */
	struct ck__slot *slots; /* 2 * nslots: batches take turns */
	unsigned nslots;        /* per batch */
	unsigned wk_base;       /* first slot of the current batch */
	pthread_mutex_t wk_lock;
	pthread_cond_t wk_cv, wk_done_cv;
	uint64_t wk_gen;
	int wk_quit;
	unsigned wk_active;          /* slots in the current batch */
	unsigned wk_next;            /* next slot to take */
	unsigned wk_done;            /* slots finished */

	int failed; /* an earlier error: refuse more work */
};

/* ---- dedup table ---- */

static uint64_t ent_key(const uint8_t *hash)
{
	uint64_t k;

	memcpy(&k, hash, sizeof(k));
	return k;
}

static struct ck__ent *tab_find(struct ck_writer *w, const uint8_t *hash, uint32_t len)
{
	size_t i;

	if (!w->tab_cap)
		return NULL;
	for (i = ent_key(hash) & (w->tab_cap - 1);; i = (i + 1) & (w->tab_cap - 1)) {
		struct ck__ent *e = &w->tab[i];

		if (!e->used)
			return NULL;
		if (e->len == len && !memcmp(e->hash, hash, CK_HASH_LEN))
			return e;
	}
}

static int tab_insert(struct ck_writer *w, const struct ck__ent *ne)
{
	size_t i;

	if ((w->tab_n + 1) * 2 > w->tab_cap) {
		size_t cap = w->tab_cap ? w->tab_cap * 2 : 1024, j;
		struct ck__ent *old = w->tab, *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (j = 0; j < w->tab_cap; j++) {
			if (!old[j].used)
				continue;
			for (i = ent_key(old[j].hash) & (cap - 1); t[i].used; i = (i + 1) & (cap - 1))
				;
			t[i] = old[j];
		}
		free(old);
		w->tab = t;
		w->tab_cap = cap;
	}
	for (i = ent_key(ne->hash) & (w->tab_cap - 1);; i = (i + 1) & (w->tab_cap - 1)) {
		struct ck__ent *e = &w->tab[i];

		if (!e->used) {
			*e = *ne;
			e->used = 1;
			w->tab_n++;
			return 0;
		}
		if (e->len == ne->len && !memcmp(e->hash, ne->hash, CK_HASH_LEN))
			return 0; /* first location wins */
	}
}

/* ---- bases for deltas ---- */

static size_t base_slot(uint64_t vaddr, size_t cap)
{
	return (size_t)((vaddr / CK_DELTA_PAGE) * 0x9e3779b97f4a7c15ull >> 17) & (cap - 1);
}

static const struct ck__base *base_find(struct ck_writer *w, uint64_t vaddr)
{
	size_t i;

	if (!w->bidx_cap)
		return NULL;
	for (i = base_slot(vaddr, w->bidx_cap); w->bidx[i]; i = (i + 1) & (w->bidx_cap - 1))
		if (w->bases[w->bidx[i] - 1].vaddr == vaddr)
			return &w->bases[w->bidx[i] - 1];
	return NULL;
}

/* Records a BASE chunk (the first at an address wins). Caller holds
 * base_lock. */
static int base_add(struct ck_writer *w, const struct ck__slot *sl)
{
	size_t i;

	if (base_find(w, sl->vaddr))
		return 0;
	if (w->nbases == w->bases_cap) {
		size_t cap = w->bases_cap ? w->bases_cap * 2 : 256;
		struct ck__base *v = realloc(w->bases, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->bases = v;
		w->bases_cap = cap;
	}
	if ((w->nbases + 1) * 2 > w->bidx_cap) {
		size_t cap = w->bidx_cap ? w->bidx_cap * 2 : 512, j;
		uint32_t *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (j = 0; j < w->nbases; j++) {
			for (i = base_slot(w->bases[j].vaddr, cap); t[i]; i = (i + 1) & (cap - 1))
				;
			t[i] = (uint32_t)j + 1;
		}
		free(w->bidx);
		w->bidx = t;
		w->bidx_cap = cap;
	}
	struct ck__base *b = &w->bases[w->nbases];

	b->vaddr = sl->vaddr;
	memcpy(b->hash, sl->hash, CK_HASH_LEN);
	b->len = sl->len;
	memcpy(b->pdig, sl->pdig, sizeof(b->pdig));
	for (i = base_slot(b->vaddr, w->bidx_cap); w->bidx[i]; i = (i + 1) & (w->bidx_cap - 1))
		;
	w->bidx[i] = (uint32_t)++w->nbases;
	return 0;
}

static uint32_t page_len(uint32_t len, unsigned i)
{
	uint32_t off = i * CK_DELTA_PAGE;

	return len - off < CK_DELTA_PAGE ? len - off : CK_DELTA_PAGE;
}

/* Digest of every page: the leading bytes of its SHA-256, so that two
 * pages compare equal only when their bytes are. */
static int page_digests(struct ck__slot *sl)
{
	uint8_t h[CK_HASH_LEN];
	unsigned i, n = (sl->len + CK_DELTA_PAGE - 1) / CK_DELTA_PAGE;

	for (i = 0; i < n; i++) {
		if (ck_sha256(sl->data + i * CK_DELTA_PAGE, page_len(sl->len, i), h) < 0)
			return -EIO;
		memcpy(sl->pdig[i], h, CK__PDIG);
	}
	sl->has_pdig = 1;
	return 0;
}

/* Stores the chunk as the pages that differ from the BASE chunk at its
 * address, when there is one and at most three quarters of the pages
 * differ. 1 if done (cdata, clen, flags set), 0 if not worth it. */
static int delta_try(struct ck_writer *w, struct ck__slot *sl, ZSTD_CCtx *cctx)
{
	uint8_t bhash[CK_HASH_LEN], bdig[CK__PAGES][CK__PDIG];
	unsigned i, n = 0, npages = (sl->len + CK_DELTA_PAGE - 1) / CK_DELTA_PAGE;
	uint64_t map = 0;
	size_t pos = 0, z;
	const struct ck__base *b;
	int have;

	pthread_mutex_lock(&w->base_lock);
	b = base_find(w, sl->vaddr);
	have = b && b->len == sl->len;
	if (have) {
		memcpy(bhash, b->hash, CK_HASH_LEN);
		memcpy(bdig, b->pdig, sizeof(bdig));
	}
	pthread_mutex_unlock(&w->base_lock);
	if (!have)
		return 0;
	if (!sl->has_pdig && page_digests(sl) < 0)
		return 0;
	for (i = 0; i < npages; i++) {
		if (!memcmp(sl->pdig[i], bdig[i], CK__PDIG))
			continue;
		map |= 1ull << i;
		memcpy(sl->pages + pos, sl->data + i * CK_DELTA_PAGE, page_len(sl->len, i));
		pos += page_len(sl->len, i);
		n++;
	}
	if (n == 0 || n * 4 > npages * 3)
		return 0;
	/* the frame checks itself: a copy (ckpt cp) can verify it without
	 * the base; a restore checks the whole chunk's SHA-256 as always */
	ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, w->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1)))
		return 0;
	z = ZSTD_compress2(cctx, sl->cdata + CK_DELTA_HDR, ZSTD_compressBound(CK_CHUNK_SIZE), sl->pages, pos);
	if (ZSTD_isError(z) || CK_DELTA_HDR + z >= sl->len)
		return 0;
	memcpy(sl->cdata, bhash, CK_HASH_LEN);
	for (i = 0; i < 8; i++)
		sl->cdata[CK_HASH_LEN + i] = (uint8_t)(map >> (8 * i));
	sl->flags = CK_CHUNK_DELTA;
	sl->clen = (uint32_t)(CK_DELTA_HDR + z);
	return 1;
}

/* ---- helpers ---- */

int ck_chunk_is_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	return len == 0 || (p[0] == 0 && !memcmp(p, p + 1, len - 1));
}

uint64_t ck_data_pages(const void *buf, size_t len)
{
	uint64_t n = 0;

	for (size_t off = 0; off < len; off += CK_PAGE_SIZE)
		n += !ck_chunk_is_zero((const char *)buf + off, len - off < CK_PAGE_SIZE ? len - off : CK_PAGE_SIZE);
	return n;
}

int ck_sha256(const void *buf, size_t len, uint8_t out[CK_HASH_LEN])
{
	return EVP_Digest(buf, len, out, NULL, EVP_sha256(), NULL) ? 0 : -EIO;
}

static void fail(struct ck_writer *w, int rc)
{
	w->failed = rc;
}

/* ---- upload thread ---- */

static void pace(const struct ck_writer *w, int first)
{
	if (w->pace)
		w->pace(w->pace_arg, first);
}

static void *uploader(void *arg)
{
	struct ck__upl *u = arg;
	struct ck_writer *w = u->w;
	int rc;

	pace(w, 1);
	pthread_mutex_lock(&w->up_lock);
	for (;;) {
		while (!u->busy && !w->up_quit)
			pthread_cond_wait(&w->up_cv, &w->up_lock);
		if (!u->busy)
			break;
		pthread_mutex_unlock(&w->up_lock);
		pace(w, 0);
		/* The upload runs unlocked: the filler may check on us. */
		rc = ck_store_put(w->s, u->key, u->buf, u->len, CK_PUT_NEW);
		pthread_mutex_lock(&w->up_lock);
		if (rc < 0 && !w->up_rc) {
			w->up_rc = rc;
			snprintf(w->up_err, sizeof(w->up_err), "%s", ck_err_msg());
		}
		u->busy = 0;
		pthread_cond_broadcast(&w->up_cv);
	}
	pthread_mutex_unlock(&w->up_lock);
	return NULL;
}

static int upl_busy(const struct ck_writer *w)
{
	for (unsigned i = 0; i < w->nupl; i++)
		if (w->upl[i].busy)
			return 1;
	return 0;
}

/* Waits until no upload runs; reports a failed one. */
static int upload_wait(struct ck_writer *w)
{
	int rc;

	pthread_mutex_lock(&w->up_lock);
	while (upl_busy(w))
		pthread_cond_wait(&w->up_cv, &w->up_lock);
	rc = w->up_rc;
	if (rc < 0)
		ck_err_set("checkpoint %s@%llu: %s", w->job, (unsigned long long)w->seq, w->up_err);
	pthread_mutex_unlock(&w->up_lock);
	return rc;
}

/* Hands the filled pack to an idle upload thread and takes the buffer it
 * is done with as the next pack. */
static int seal_pack(struct ck_writer *w)
{
	struct ck__upl *u = NULL;
	uint8_t *free_buf;
	int rc;

	if (!w->cur_open)
		return 0;
	pthread_mutex_lock(&w->up_lock);
	for (;;) {
		for (unsigned i = 0; i < w->nupl && !u; i++)
			if (!w->upl[i].busy)
				u = &w->upl[i];
		if (u || w->up_rc)
			break;
		pthread_cond_wait(&w->up_cv, &w->up_lock);
	}
	rc = w->up_rc;
	if (rc < 0) {
		ck_err_set("checkpoint %s@%llu: %s", w->job, (unsigned long long)w->seq, w->up_err);
		pthread_mutex_unlock(&w->up_lock);
		return rc;
	}
	free_buf = u->buf;
	u->buf = w->cur;
	u->len = w->cur_len;
	snprintf(u->key, sizeof(u->key), "%s/%s", w->job, w->packs[w->cur_idx]);
	u->busy = 1;
	pthread_cond_broadcast(&w->up_cv);
	pthread_mutex_unlock(&w->up_lock);
	w->cur = free_buf;
	w->cur_len = 0;
	w->cur_open = 0;
	return 0;
}

static int push_pack(struct ck_writer *w, const char *name, uint32_t *idx)
{
	if (w->npacks >= UINT32_MAX - 1)
		return -EOVERFLOW;
	if (w->npacks == w->packs_cap) {
		size_t cap = w->packs_cap ? w->packs_cap * 2 : 16;
		char **v = realloc(w->packs, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		w->packs = v;
		w->packs_cap = cap;
	}
	w->packs[w->npacks] = strdup(name);
	if (!w->packs[w->npacks])
		return -ENOMEM;
	*idx = (uint32_t)w->npacks++;
	return 0;
}

static int open_pack(struct ck_writer *w)
{
	char name[64];
	int rc;

	if (!w->cur) {
		/* Aligned for O_DIRECT (the file store) and to 2 MiB, and backed
		 * by huge pages where the kernel has them: on a VM each first touch
		 * of a 4 KiB page is a trip to the hypervisor. Kept for the next
		 * round (bigbuf.c). */
		w->cur = ck_bigbuf_get(w->buf_len);
		if (!w->cur)
			return -ENOMEM;
	}
	snprintf(name, sizeof(name), "packs/%08llu-%04u-%s.pack", (unsigned long long)w->seq, ++w->pack_no, w->wid);
	rc = push_pack(w, name, &w->cur_idx);
	if (rc < 0)
		return rc;
	w->cur_open = 1;
	w->cur_len = 0;
	return 0;
}

/* A chunk of zeros to hash (never written: its pages stay the kernel's
 * shared zero page). */
static uint8_t ck__zeros[CK_CHUNK_SIZE];

/* ---- workers ---- */

static void process_slot(struct ck_writer *w, struct ck__slot *sl, ZSTD_CCtx *cctx)
{
	struct ck__ent *e;
	size_t n;
	int rc;

	sl->found = 0;
	sl->flags = 0;
	sl->clen = 0;
	sl->has_pdig = 0;
	rc = sl->fn(sl->fn_arg, sl->src_off, sl->data, sl->len);
	if (rc < 0) {
		sl->rc = rc;
		snprintf(sl->err, sizeof(sl->err), "reading data at offset %llu: %s",
			 (unsigned long long)sl->src_off, ck_err_msg());
		return;
	}
	if (rc == CK_READ_ZEROS && sl->len != CK_CHUNK_SIZE)
		memset(sl->data, 0, sl->len); /* hashed below */
	if (rc == CK_READ_ZEROS || ck_chunk_is_zero(sl->data, sl->len)) {
		sl->flags = CK_CHUNK_ZERO;
		if (sl->len == CK_CHUNK_SIZE)
			memcpy(sl->hash, w->zero_hash, CK_HASH_LEN);
		else
			ck_sha256(sl->data, sl->len, sl->hash);
		return;
	}
	if (ck_sha256(sl->data, sl->len, sl->hash) < 0) {
		sl->rc = -EIO;
		snprintf(sl->err, sizeof(sl->err), "SHA-256 failed");
		return;
	}
	if ((sl->how & CK_WADD_BASE) && page_digests(sl) < 0) {
		sl->rc = -EIO;
		snprintf(sl->err, sizeof(sl->err), "SHA-256 failed");
		return;
	}
	pthread_mutex_lock(&w->tab_lock);
	e = tab_find(w, sl->hash, sl->len);
	if (e) {
		sl->ent = *e;
		sl->found = 1;
	}
	pthread_mutex_unlock(&w->tab_lock);
	if (sl->found)
		return; /* stored before: no need to compress */
	if ((sl->how & CK_WADD_DELTA) && delta_try(w, sl, cctx))
		return;
	n = ZSTD_compressCCtx(cctx, sl->cdata, ZSTD_compressBound(CK_CHUNK_SIZE), sl->data, sl->len, w->level);
	if (ZSTD_isError(n) || n >= sl->len) {
		sl->flags = CK_CHUNK_RAW;
		sl->clen = sl->len;
	} else {
		sl->clen = (uint32_t)n;
	}
}

/* Takes slots of the current batch until none is left. Slots are handed
 * out under the lock, so a thread that wakes late cannot take a slot of a
 * batch that has since been refilled. */
static void run_slots(struct ck_writer *w, ZSTD_CCtx *cctx)
{
	pthread_mutex_lock(&w->wk_lock);
	while (w->wk_next < w->wk_active) {
		struct ck__slot *sl = &w->slots[w->wk_base + w->wk_next++];

		pthread_mutex_unlock(&w->wk_lock);
		pace(w, 0);
		process_slot(w, sl, cctx);
		pthread_mutex_lock(&w->wk_lock);
		if (++w->wk_done == w->wk_active)
			pthread_cond_broadcast(&w->wk_done_cv);
	}
	pthread_mutex_unlock(&w->wk_lock);
}

struct ck__wkarg {
	struct ck_writer *w;
	unsigned idx;
};

static void *worker(void *arg)
{
	struct ck_writer *w = ((struct ck__wkarg *)arg)->w;
	unsigned idx = ((struct ck__wkarg *)arg)->idx;
	uint64_t seen = 0;

	free(arg);
	pace(w, 1);
	pthread_mutex_lock(&w->wk_lock);
	for (;;) {
		while (w->wk_gen == seen && !w->wk_quit)
			pthread_cond_wait(&w->wk_cv, &w->wk_lock);
		if (w->wk_quit)
			break;
		seen = w->wk_gen;
		pthread_mutex_unlock(&w->wk_lock);
		run_slots(w, w->cctx[idx]);
		pthread_mutex_lock(&w->wk_lock);
	}
	pthread_mutex_unlock(&w->wk_lock);
	return NULL;
}

/* Hands slots [base, base + n) to the workers (none is busy). */
static void batch_start(struct ck_writer *w, unsigned base, unsigned n)
{
	pthread_mutex_lock(&w->wk_lock);
	w->wk_base = base;
	w->wk_active = n;
	w->wk_done = 0;
	w->wk_next = 0;
	w->wk_gen++;
	pthread_cond_broadcast(&w->wk_cv);
	pthread_mutex_unlock(&w->wk_lock);
}

static void batch_wait(struct ck_writer *w)
{
	pthread_mutex_lock(&w->wk_lock);
	while (w->wk_done < w->wk_active)
		pthread_cond_wait(&w->wk_done_cv, &w->wk_lock);
	pthread_mutex_unlock(&w->wk_lock);
}

/* ---- chunk table ---- */

static struct ck_chunk *new_chunk(struct ck_writer *w)
{
	if (w->nchunks == w->chunks_cap) {
		size_t cap = w->chunks_cap ? w->chunks_cap * 2 : 1024;
		struct ck_chunk *v = realloc(w->chunks, cap * sizeof(*v));

		if (!v)
			return NULL;
		w->chunks = v;
		w->chunks_cap = cap;
	}
	memset(&w->chunks[w->nchunks], 0, sizeof(struct ck_chunk));
	return &w->chunks[w->nchunks++];
}

/* Index in the new packs list of a location found in the table. */
static int ent_pack(struct ck_writer *w, const struct ck__ent *e, uint32_t *idx)
{
	int rc;

	if (!e->from_prev) {
		*idx = e->pack;
		return 0;
	}
	if (w->prev_map[e->pack] == UINT32_MAX) {
		rc = push_pack(w, w->prev->packs[e->pack], &w->prev_map[e->pack]);
		if (rc < 0)
			return rc;
	}
	*idx = w->prev_map[e->pack];
	return 0;
}

/* A BASE region's chunk, now in the table, becomes the base for its
 * address (a delta's base is never a delta itself: one read restores it). */
static int keep_base(struct ck_writer *w, const struct ck__slot *sl, const struct ck_chunk *c)
{
	int rc;

	if (!(sl->how & CK_WADD_BASE) || !sl->has_pdig || (c->flags & (CK_CHUNK_DELTA | CK_CHUNK_ZERO)))
		return 0;
	pthread_mutex_lock(&w->base_lock);
	rc = base_add(w, sl);
	pthread_mutex_unlock(&w->base_lock);
	return rc;
}

/* Appends one processed chunk, in order, to the table and the pack. */
static int commit_slot(struct ck_writer *w, struct ck__slot *sl)
{
	struct ck__ent ne, *e;
	struct ck_chunk *c;
	int rc;

	if (sl->rc < 0) {
		ck_err_set("checkpoint %s@%llu: %s", w->job, (unsigned long long)w->seq, sl->err);
		return sl->rc;
	}
	c = new_chunk(w);
	if (!c)
		return -ENOMEM;
	memcpy(c->hash, sl->hash, CK_HASH_LEN);
	c->len = sl->len;
	w->logical += sl->len;
	if (sl->flags & CK_CHUNK_ZERO) {
		c->flags = CK_CHUNK_ZERO;
		return 0;
	}
	/* An identical chunk earlier in this batch may have been stored since
	 * the worker looked. */
	if (!sl->found) {
		e = tab_find(w, sl->hash, sl->len);
		if (e) {
			sl->ent = *e;
			sl->found = 1;
		}
	}
	if (sl->found) {
		rc = ent_pack(w, &sl->ent, &c->pack);
		if (rc < 0)
			return rc;
		c->clen = sl->ent.clen;
		c->flags = sl->ent.flags;
		c->off = sl->ent.off;
		return keep_base(w, sl, c);
	}
	if (w->cur_open && w->cur_len + sl->clen > w->pack_size) {
		rc = seal_pack(w);
		if (rc < 0)
			return rc;
	}
	if (!w->cur_open) {
		rc = open_pack(w);
		if (rc < 0)
			return rc;
	}
	memcpy(w->cur + w->cur_len, (sl->flags & CK_CHUNK_RAW) ? sl->data : sl->cdata, sl->clen);
	c->pack = w->cur_idx;
	c->clen = sl->clen;
	c->flags = sl->flags;
	c->off = w->cur_len;
	w->cur_len += sl->clen;
	w->stored += sl->clen;

	memset(&ne, 0, sizeof(ne));
	memcpy(ne.hash, sl->hash, CK_HASH_LEN);
	ne.len = c->len;
	ne.clen = c->clen;
	ne.flags = c->flags;
	ne.pack = c->pack;
	ne.off = c->off;
	pthread_mutex_lock(&w->tab_lock);
	rc = tab_insert(w, &ne);
	pthread_mutex_unlock(&w->tab_lock);
	return rc < 0 ? rc : keep_base(w, sl, c);
}

/* ---- public ---- */

static void writer_free(struct ck_writer *w)
{
	unsigned i;
	size_t j;

	if (!w)
		return;
	if (w->workers) {
		pthread_mutex_lock(&w->wk_lock);
		w->wk_quit = 1;
		pthread_cond_broadcast(&w->wk_cv);
		pthread_mutex_unlock(&w->wk_lock);
		for (i = 0; i < w->nthreads; i++)
			if (w->workers[i])
				pthread_join(w->workers[i], NULL);
		free(w->workers);
	}
	if (w->upl) {
		pthread_mutex_lock(&w->up_lock);
		w->up_quit = 1;
		pthread_cond_broadcast(&w->up_cv);
		pthread_mutex_unlock(&w->up_lock);
		for (i = 0; i < w->nupl; i++) {
			if (w->upl[i].started)
				pthread_join(w->upl[i].th, NULL);
			ck_bigbuf_put(w->upl[i].buf, w->buf_len);
		}
		free(w->upl);
	}
	for (i = 0; w->cctx && i <= w->nthreads; i++)
		ZSTD_freeCCtx(w->cctx[i]);
	free(w->cctx);
	for (i = 0; w->slots && i < 2 * w->nslots; i++) {
		free(w->slots[i].data);
		free(w->slots[i].cdata);
		free(w->slots[i].pdig);
		free(w->slots[i].pages);
	}
	free(w->bases);
	free(w->bidx);
	pthread_mutex_destroy(&w->base_lock);
	free(w->slots);
	for (j = 0; j < w->npacks; j++)
		free(w->packs[j]);
	free(w->packs);
	free(w->chunks);
	free(w->prev_map);
	free(w->tab);
	ck_bigbuf_put(w->cur, w->buf_len);
	free(w->job);
	pthread_mutex_destroy(&w->tab_lock);
	pthread_mutex_destroy(&w->up_lock);
	pthread_cond_destroy(&w->up_cv);
	pthread_mutex_destroy(&w->wk_lock);
	pthread_cond_destroy(&w->wk_cv);
	pthread_cond_destroy(&w->wk_done_cv);
	free(w);
}

int ck_writer_open(struct ck_store *s, const char *job, uint64_t seq, const struct ck_manifest *prev,
		   const struct ck_writer_opts *opts, struct ck_writer **out)
{
	struct ck_writer *w;
	size_t i;
	int rc = -ENOMEM;

	*out = NULL;
	if (!ck_job_name_valid(job) || seq == 0) {
		ck_err_set("chunk writer: invalid checkpoint %s@%llu", job ? job : "", (unsigned long long)seq);
		return -EINVAL;
	}
	if (prev && (!prev->job || strcmp(prev->job, job) || prev->seq >= seq)) {
		ck_err_set("chunk writer: previous checkpoint %s@%llu cannot serve %s@%llu",
			   prev->job ? prev->job : "?", (unsigned long long)prev->seq, job, (unsigned long long)seq);
		return -EINVAL;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		goto nomem;
	pthread_mutex_init(&w->tab_lock, NULL);
	pthread_mutex_init(&w->base_lock, NULL);
	pthread_mutex_init(&w->up_lock, NULL);
	pthread_cond_init(&w->up_cv, NULL);
	pthread_mutex_init(&w->wk_lock, NULL);
	pthread_cond_init(&w->wk_cv, NULL);
	pthread_cond_init(&w->wk_done_cv, NULL);
	w->s = s;
	w->seq = seq;
	w->prev = prev;
	{
		unsigned char r[8];

		if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
			uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 24) ^ (uint64_t)(uintptr_t)w;

			memcpy(r, &t, sizeof(r));
		}
		for (i = 0; i < sizeof(r); i++)
			snprintf(w->wid + 2 * i, 3, "%02x", r[i]);
	}
	w->job = strdup(job);
	w->level = opts && opts->level ? opts->level : 1;
	w->pace = opts ? opts->pace : NULL;
	w->pace_arg = opts ? opts->pace_arg : NULL;
	w->nthreads = opts && opts->threads ? opts->threads : 1;
	if (w->nthreads > 256)
		w->nthreads = 256;
	w->pack_size = opts && opts->pack_size ? opts->pack_size : 32u << 20;
	w->pack_cap = w->pack_size > CK_CHUNK_SIZE ? w->pack_size : CK_CHUNK_SIZE;
	w->buf_len = (w->pack_cap + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	if (!w->job)
		goto nomem;
	ck_sha256(ck__zeros, CK_CHUNK_SIZE, w->zero_hash);

	/* Everything the previous checkpoint stored can be referenced. */
	if (prev && prev->npacks) {
		w->prev_map = malloc(prev->npacks * sizeof(*w->prev_map));
		if (!w->prev_map)
			goto nomem;
		memset(w->prev_map, 0xff, prev->npacks * sizeof(*w->prev_map));
		for (i = 0; i < prev->nchunks; i++) {
			const struct ck_chunk *c = &prev->chunks[i];
			struct ck__ent e;

			/* (a delta is reused only in the round that has its base) */
			if ((c->flags & (CK_CHUNK_ZERO | CK_CHUNK_DELTA)) || c->pack >= prev->npacks)
				continue;
			memset(&e, 0, sizeof(e));
			memcpy(e.hash, c->hash, CK_HASH_LEN);
			e.len = c->len;
			e.clen = c->clen;
			e.flags = c->flags;
			e.pack = c->pack;
			e.off = c->off;
			e.from_prev = 1;
			if (tab_insert(w, &e) < 0)
				goto nomem;
		}
	}

	w->nslots = w->nthreads * 4 < CK__MAX_SLOTS ? w->nthreads * 4 : CK__MAX_SLOTS;
	w->slots = calloc(2 * w->nslots, sizeof(*w->slots));
	w->cctx = calloc(w->nthreads + 1, sizeof(*w->cctx)); /* the last: the caller's */
	w->workers = calloc(w->nthreads, sizeof(*w->workers));
	if (!w->slots || !w->cctx || !w->workers)
		goto nomem;
	for (i = 0; i < 2 * w->nslots; i++) {
		w->slots[i].data = malloc(CK_CHUNK_SIZE);
		w->slots[i].cdata = malloc(CK_DELTA_HDR + ZSTD_compressBound(CK_CHUNK_SIZE));
		w->slots[i].pdig = malloc(CK__PAGES * CK__PDIG);
		w->slots[i].pages = malloc(CK_CHUNK_SIZE);
		if (!w->slots[i].data || !w->slots[i].cdata || !w->slots[i].pdig || !w->slots[i].pages)
			goto nomem;
	}
	for (i = 0; i <= w->nthreads; i++) {
		w->cctx[i] = ZSTD_createCCtx();
		if (!w->cctx[i])
			goto nomem;
	}
	w->nupl = s->puts_in_flight ? s->puts_in_flight : 1;
	if (w->nupl > 8)
		w->nupl = 8;
	w->upl = calloc(w->nupl, sizeof(*w->upl));
	if (!w->upl)
		goto nomem;
	for (i = 0; i < w->nupl; i++) {
		w->upl[i].w = w;
		rc = pthread_create(&w->upl[i].th, NULL, uploader, &w->upl[i]);
		if (rc) {
			rc = -rc;
			goto thread_fail;
		}
		w->upl[i].started = 1;
	}
	for (i = 0; i < w->nthreads; i++) {
		struct ck__wkarg *a = malloc(sizeof(*a));

		if (!a)
			goto nomem;
		a->w = w;
		a->idx = (unsigned)i;
		rc = pthread_create(&w->workers[i], NULL, worker, a);
		if (rc) {
			free(a);
			w->workers[i] = 0;
			rc = -rc;
			goto thread_fail;
		}
	}
	*out = w;
	return 0;
thread_fail:
	ck_err_set("chunk writer %s@%llu: cannot start threads: %s", job, (unsigned long long)seq, strerror(-rc));
	writer_free(w);
	return rc;
nomem:
	ck_err_set("chunk writer %s@%llu: out of memory", job, (unsigned long long)seq);
	writer_free(w);
	return -ENOMEM;
}

/* Appends zero chunks for len bytes (whole chunks but the last), as
 * commit_slot does for a zero chunk a worker found. */
static int commit_zeros(struct ck_writer *w, uint64_t len)
{
	while (len) {
		uint32_t n = len < CK_CHUNK_SIZE ? (uint32_t)len : CK_CHUNK_SIZE;
		struct ck_chunk *c = new_chunk(w);

		if (!c)
			return -ENOMEM;
		if (n == CK_CHUNK_SIZE)
			memcpy(c->hash, w->zero_hash, CK_HASH_LEN);
		else if (ck_sha256(ck__zeros, n, c->hash) < 0)
			return -EIO;
		c->len = n;
		c->flags = CK_CHUNK_ZERO;
		w->logical += n;
		len -= n;
	}
	return 0;
}

/* How many bytes from off on the source says hold only zeros: a batch's
 * span first (a dense region pays one probe per batch), then spans that
 * double while they are empty. Everything counted is consumed. */
static uint64_t zero_span(const struct ck_writer *w, ck_read_fn fn, void *arg, uint64_t off, uint64_t left)
{
	uint64_t step = (uint64_t)w->nslots * CK_CHUNK_SIZE, got = 0;

	while (got < left) {
		uint64_t n = left - got < step ? left - got : step;
		if (fn(arg, off + got, NULL, (size_t)n) != CK_READ_ZEROS)
			break;
		got += n;
		if (step < (256ull << 20))
			step *= 2;
	}
	return got;
}

int ck_writer_add(struct ck_writer *w, uint64_t len, ck_read_fn fn, void *arg, uint64_t *first_chunk,
		  uint32_t *nchunks)
{
	return ck_writer_add_at(w, 0, 0, len, fn, arg, first_chunk, nchunks);
}

int ck_writer_add_at(struct ck_writer *w, uint64_t vaddr, unsigned how, uint64_t len, ck_read_fn fn, void *arg,
		     uint64_t *first_chunk, uint32_t *nchunks)
{
	uint64_t total = (len + CK_CHUNK_SIZE - 1) / CK_CHUNK_SIZE, done = 0, off = 0;
	unsigned turn = 0, pend_base = 0, pend_n = 0;
	int rc = 0, probe = (how & CK_WADD_PROBE) != 0;

	how &= ~(unsigned)CK_WADD_PROBE;
	pace(w, 0);
	*first_chunk = w->nchunks;
	*nchunks = 0;
	if (w->failed) {
		ck_err_set("checkpoint %s@%llu: writer failed earlier", w->job, (unsigned long long)w->seq);
		return w->failed;
	}
	if (total > UINT32_MAX) {
		ck_err_set("checkpoint %s@%llu: region of %llu bytes is too large", w->job,
			   (unsigned long long)w->seq, (unsigned long long)len);
		return -EOVERFLOW;
	}
	if (total == 1) {
		/* One chunk (most mappings of a library: a process has hundreds,
		 * read while it is parked): done on this thread, since handing it
		 * to a worker and waiting costs two wake-ups, more than the work
		 * on a busy machine. */
		struct ck__slot *sl = &w->slots[0];

		sl->src_off = 0;
		sl->len = (uint32_t)len;
		sl->rc = 0;
		sl->fn = fn;
		sl->fn_arg = arg;
		sl->vaddr = vaddr;
		sl->how = vaddr % CK_DELTA_PAGE ? 0 : how;
		process_slot(w, sl, w->cctx[w->nthreads]);
		if ((rc = commit_slot(w, sl)) < 0)
			goto out;
		*nchunks = 1;
		goto out;
	}
	/* Batch k+1 is read, hashed and compressed while batch k is committed. */
	while (done < total || pend_n) {
		unsigned n = 0, base = turn * w->nslots, i;
		uint64_t zeros = probe && done < total ? zero_span(w, fn, arg, off, len - off) : 0;

		if (zeros) {
			/* in order: the batch being read is committed first */
			if (pend_n)
				batch_wait(w);
			for (i = 0; i < pend_n && rc == 0; i++)
				rc = commit_slot(w, &w->slots[pend_base + i]);
			if (rc < 0 || (rc = commit_zeros(w, zeros)) < 0)
				goto out;
			pend_n = 0;
			off += zeros;
			done += (zeros + CK_CHUNK_SIZE - 1) / CK_CHUNK_SIZE;
			continue;
		}
		if (done < total)
			n = total - done < w->nslots ? (unsigned)(total - done) : w->nslots;
		for (i = 0; i < n; i++) {
			struct ck__slot *sl = &w->slots[base + i];

			sl->src_off = off;
			sl->len = (uint32_t)(len - off < CK_CHUNK_SIZE ? len - off : CK_CHUNK_SIZE);
			sl->rc = 0;
			sl->fn = fn;
			sl->fn_arg = arg;
			sl->vaddr = vaddr + off;
			sl->how = vaddr % CK_DELTA_PAGE ? 0 : how;
			off += sl->len;
		}
		if (pend_n)
			batch_wait(w);
		if (n)
			batch_start(w, base, n);
		pace(w, 0);
		for (i = 0; i < pend_n && rc == 0; i++)
			rc = commit_slot(w, &w->slots[pend_base + i]);
		if (rc < 0) {
			if (n)
				batch_wait(w); /* its slots are still being filled */
			goto out;
		}
		pend_base = base;
		pend_n = n;
		done += n;
		turn ^= 1;
	}
	*nchunks = (uint32_t)total;
out:
	if (rc == -ENOMEM)
		ck_err_set("checkpoint %s@%llu: out of memory", w->job, (unsigned long long)w->seq);
	if (rc < 0)
		fail(w, rc);
	return rc;
}

int ck_writer_finish(struct ck_writer *w, struct ck_manifest *m)
{
	size_t i;
	int rc = w->failed;

	if (rc < 0) {
		ck_err_set("checkpoint %s@%llu: writer failed earlier", w->job, (unsigned long long)w->seq);
		goto out;
	}
	rc = seal_pack(w);
	if (rc == 0)
		rc = upload_wait(w);
	if (rc < 0)
		goto out;
	if (!m->job) {
		m->job = strdup(w->job);
		if (!m->job) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if (!m->seq)
		m->seq = w->seq;
	free(m->chunks);
	for (i = 0; m->packs && i < m->npacks; i++)
		free(m->packs[i]);
	free(m->packs);
	m->chunks = w->chunks;
	m->nchunks = w->nchunks;
	m->packs = w->packs;
	m->npacks = w->npacks;
	m->logical_bytes = w->logical;
	m->stored_bytes = w->stored;
	w->chunks = NULL;
	w->nchunks = 0;
	w->packs = NULL;
	w->npacks = 0;
out:
	writer_free(w);
	return rc;
}

/* An abandoned round (refused, failed, out of grace) takes its packs away:
 * the store is as it was before the round, not left for the next ckrun's
 * sweep. Its own packs are those whose name holds its writer id; packs of
 * the previous checkpoint it reuses are not touched. */
void ck_writer_abort(struct ck_writer *w)
{
	char **keys = NULL;
	struct ck_store *s;
	size_t i, n = 0;

	if (!w)
		return;
	s = w->s;
	keys = calloc(w->npacks ? w->npacks : 1, sizeof(*keys));
	for (i = 0; keys && i < w->npacks; i++)
		if (strstr(w->packs[i], w->wid) && asprintf(&keys[n], "%s/%s", w->job, w->packs[i]) >= 0)
			n++;
	char why[1024];

	/* the round's own error is what its caller reports */
	snprintf(why, sizeof(why), "%s", ck_err_msg());
	writer_free(w); /* uploads end first */
	for (i = 0; i < n; i++) {
		ck_store_del(s, keys[i]); /* one not written yet: nothing to do */
		free(keys[i]);
	}
	free(keys);
	ck_err_set("%s", why);
}

int ck_mem_src(void *arg, uint64_t off, void *buf, size_t len)
{
	memcpy(buf, (const char *)arg + off, len);
	return 0;
}

int ck_mem_sink(void *arg, uint64_t off, const void *buf, size_t len)
{
	memcpy((char *)arg + off, buf, len);
	return 0;
}
