/* Manifest encoding: the on-disk form of struct ck_manifest, whose records
 * are ckrun/manifest_format.h (include/ckrun/FORMAT.md has the full table).
 * Decoding trusts nothing: every length and count is checked against the
 * bytes left before anything is allocated or read, so arbitrary input gives
 * -EBADMSG and one line naming what is wrong, never a crash. */
#include "launcher/image/manifest.h"

#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

static const char ck__mf_magic[8] = CK_MF_MAGIC;
static const char ck__sect_names[CK_MF_NSECT][5] = CK_MF_SECT_TAGS;

#define CK__CHUNK_FLAGS (CK_CHUNK_ZERO | CK_CHUNK_RAW | CK_CHUNK_DELTA)

/* ---- encoding ---- */

struct ck__buf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void *buf_grow(struct ck__buf *b, size_t n)
{
	void *at;

	if (b->err)
		return NULL;
	if (n > SIZE_MAX - b->len) {
		b->err = -EOVERFLOW;
		return NULL;
	}
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return NULL;
		}
		b->p = p;
		b->cap = cap;
	}
	at = b->p + b->len;
	b->len += n;
	return at;
}

static void put_bytes(struct ck__buf *b, const void *src, size_t n)
{
	void *at = buf_grow(b, n);

	if (at && n)
		memcpy(at, src, n);
}

static void put_u32(struct ck__buf *b, uint32_t v)
{
	v = htole32(v);
	put_bytes(b, &v, 4);
}

static void put_str(struct ck__buf *b, const char *s)
{
	size_t n;

	if (!s) {
		put_u32(b, CK_MF_STR_NULL);
		return;
	}
	n = strlen(s);
	if (n >= CK_MF_STR_NULL) {
		b->err = b->err ? b->err : -EOVERFLOW;
		return;
	}
	put_u32(b, (uint32_t)n);
	put_bytes(b, s, n);
}

/* Starts a section; returns the offset of its header for sect_end. */
static size_t sect_begin(struct ck__buf *b, int which)
{
	struct ck_mf_sect h = {0};
	size_t at = b->len;

	memcpy(h.magic, ck__sect_names[which], 4);
	put_bytes(b, &h, sizeof(h));
	return at;
}

static void sect_end(struct ck__buf *b, size_t at)
{
	uint64_t len;

	if (b->err)
		return;
	len = htole64((uint64_t)(b->len - at - sizeof(struct ck_mf_sect)));
	memcpy(b->p + at + offsetof(struct ck_mf_sect, len), &len, 8);
}

static void encode_chunk(struct ck__buf *b, const struct ck_chunk *c)
{
	struct ck_mf_chunk w;

	memcpy(w.hash, c->hash, CK_HASH_LEN);
	w.len = htole32(c->len);
	w.clen = htole32(c->clen);
	w.pack = htole32(c->pack);
	w.flags = htole32(c->flags);
	w.off = htole64(c->off);
	put_bytes(b, &w, sizeof(w));
}

static void encode_proc(struct ck__buf *b, const struct ck_proc *p)
{
	struct ck_mf_proc w;
	size_t i;

	w.pid = (int32_t)htole32((uint32_t)p->pid);
	w.ppid = (int32_t)htole32((uint32_t)p->ppid);
	w.restart_entry = htole64(p->restart_entry);
	w.restart_arg = htole64(p->restart_arg);
	w.restart_stack = htole64(p->restart_stack);
	w.nregions = htole64((uint64_t)p->nregions);
	w.desc_len = htole64((uint64_t)p->desc_len);
	put_bytes(b, &w, sizeof(w));
	put_str(b, p->exe);
	put_bytes(b, p->desc, p->desc_len);
	for (i = 0; i < p->nregions; i++) {
		const struct ck_region *r = &p->regions[i];
		struct ck_mf_region rw;

		rw.start = htole64(r->start);
		rw.end = htole64(r->end);
		rw.prot = htole32(r->prot);
		rw.flags = htole32(r->flags);
		rw.file_off = htole64(r->file_off);
		rw.dev = htole64(r->dev);
		rw.ino = htole64(r->ino);
		rw.first_chunk = htole64(r->first_chunk);
		rw.nchunks = htole32(r->nchunks);
		rw.pad = 0;
		put_bytes(b, &rw, sizeof(rw));
		put_str(b, r->path);
	}
}

int ck_manifest_encode(const struct ck_manifest *m, void **out, size_t *outlen)
{
	struct ck__buf b = {0};
	struct ck_mf_head h = {0};
	unsigned char md[CK_HASH_LEN];
	size_t at, i, nfdig;
	uint64_t n;

	*out = NULL;
	*outlen = 0;
	if (m->argc > UINT32_MAX || m->npacks > UINT32_MAX || m->nprocs > UINT32_MAX || m->nskips > UINT32_MAX ||
	    m->nfiles > UINT32_MAX) {
		ck_err_set("manifest %s@%llu: too many entries to encode", m->job ? m->job : "?",
			   (unsigned long long)m->seq);
		return -EOVERFLOW;
	}
	put_bytes(&b, ck__mf_magic, sizeof(ck__mf_magic));
	put_bytes(&b, &h, sizeof(h)); /* filled in below */

	at = sect_begin(&b, CK_MF_JOBI);
	put_str(&b, m->job);
	put_str(&b, m->cwd);
	put_u32(&b, (uint32_t)m->argc);
	for (i = 0; i < m->argc; i++)
		put_str(&b, m->argv[i]);
	sect_end(&b, at);

	at = sect_begin(&b, CK_MF_PACK);
	put_u32(&b, (uint32_t)m->npacks);
	for (i = 0; i < m->npacks; i++)
		put_str(&b, m->packs[i]);
	sect_end(&b, at);

	at = sect_begin(&b, CK_MF_CHNK);
	n = htole64((uint64_t)m->nchunks);
	put_bytes(&b, &n, 8);
	for (i = 0; i < m->nchunks; i++)
		encode_chunk(&b, &m->chunks[i]);
	sect_end(&b, at);

	at = sect_begin(&b, CK_MF_PROC);
	put_u32(&b, (uint32_t)m->nprocs);
	for (i = 0; i < m->nprocs; i++)
		encode_proc(&b, &m->procs[i]);
	sect_end(&b, at);

	at = sect_begin(&b, CK_MF_SKIP);
	put_u32(&b, (uint32_t)m->nskips);
	for (i = 0; i < m->nskips; i++) {
		put_u32(&b, (uint32_t)m->skips[i].pid);
		put_str(&b, m->skips[i].what);
		put_str(&b, m->skips[i].why);
	}
	sect_end(&b, at);

	if (m->ntasks) {
		at = sect_begin(&b, CK_MF_TREE);
		put_u32(&b, (uint32_t)m->ntasks);
		for (i = 0; i < m->ntasks; i++) {
			const struct ck_task *t = &m->tasks[i];
			struct ck_mf_task w = {(int32_t)htole32((uint32_t)t->pid), (int32_t)htole32((uint32_t)t->ppid),
						(int32_t)htole32((uint32_t)t->pgid), (int32_t)htole32((uint32_t)t->sid),
						htole32(t->flags), (int32_t)htole32((uint32_t)t->status)};
			put_bytes(&b, &w, sizeof(w));
		}
		sect_end(&b, at);
	}

	if (m->nshms) {
		at = sect_begin(&b, CK_MF_SYSV);
		put_u32(&b, (uint32_t)m->nshms);
		for (i = 0; i < m->nshms; i++) {
			const struct ck_sysv_shm *x = &m->shms[i];
			struct ck_mf_shm w = {(int32_t)htole32((uint32_t)x->id), (int32_t)htole32((uint32_t)x->key),
					       htole32(x->mode), htole32(x->flags), htole32(x->uid), htole32(x->gid),
					       htole64(x->size), htole64(x->first_chunk), htole32(x->nchunks),
					       htole32(x->pad)};
			put_bytes(&b, &w, sizeof(w));
		}
		sect_end(&b, at);
	}

	if (m->nfiles) {
		at = sect_begin(&b, CK_MF_FILE);
		put_u32(&b, (uint32_t)m->nfiles);
		for (i = 0; i < m->nfiles; i++) {
			const struct ck_mfile *f = &m->files[i];
			struct ck_mf_file w = {htole64(f->dev), htole64(f->ino), htole64(f->size),
					       (int64_t)htole64((uint64_t)f->mtime_ns), (int64_t)htole64((uint64_t)f->ctime_ns)};
			put_bytes(&b, &w, sizeof(w));
			put_str(&b, f->path);
		}
		sect_end(&b, at);
	}
	nfdig = 0;
	for (i = 0; i < m->nfiles; i++)
		nfdig += m->files[i].has_digest;
	if (nfdig) {
		static const uint8_t none[CK_HASH_LEN];
		at = sect_begin(&b, CK_MF_FDIG);
		put_u32(&b, (uint32_t)m->nfiles);
		for (i = 0; i < m->nfiles; i++)
			put_bytes(&b, m->files[i].has_digest ? m->files[i].digest : none, CK_HASH_LEN);
		sect_end(&b, at);
	}
	if (m->has_clocks) {
		uint64_t clk[2] = {htole64(m->mono_ns), htole64(m->boot_ns)};
		at = sect_begin(&b, CK_MF_CLCK);
		put_bytes(&b, clk, sizeof(clk));
		sect_end(&b, at);
	}
	if (m->has_lineage) {
		at = sect_begin(&b, CK_MF_LINE);
		put_bytes(&b, m->lineage, sizeof(m->lineage));
		sect_end(&b, at);
	}
	if (m->has_last_pid) {
		at = sect_begin(&b, CK_MF_LPID);
		put_u32(&b, (uint32_t)m->last_pid);
		put_u32(&b, 0);
		sect_end(&b, at);
	}

	buf_grow(&b, 0);
	if (b.err) {
		free(b.p);
		ck_err_set("manifest %s@%llu: encoding failed: %s", m->job ? m->job : "?",
			   (unsigned long long)m->seq, strerror(-b.err));
		return b.err;
	}
	h.version = htole32(CK_MANIFEST_VERSION);
	h.head_len = htole32((uint32_t)sizeof(h));
	h.total_len = htole64((uint64_t)b.len + CK_HASH_LEN * (ck_manifest_signing() ? 2 : 1));
	h.flags = htole32(ck_manifest_signing() ? CK_MF_SIGNED : 0);
	h.seq = htole64(m->seq);
	h.time_ns = htole64(m->time_ns);
	h.duration_ns = htole64(m->duration_ns);
	h.frozen_ns = htole64(m->frozen_ns);
	h.logical_bytes = htole64(m->logical_bytes);
	h.stored_bytes = htole64(m->stored_bytes);
	h.nsections = htole32(CK_MF_NSECT_REQUIRED + (m->ntasks ? 1 : 0) + (m->nshms ? 1 : 0) + (m->nfiles ? 1 : 0) +
			     (nfdig ? 1 : 0) + (m->has_clocks ? 1 : 0) + (m->has_lineage ? 1 : 0) +
			     (m->has_last_pid ? 1 : 0));
	memcpy(b.p + sizeof(ck__mf_magic), &h, sizeof(h));

	if (ck_manifest_signing()) {
		unsigned char mac[CK_HASH_LEN];
		int rc = ck_manifest_mac(b.p, b.len, mac);

		if (rc < 0) {
			free(b.p);
			return rc;
		}
		put_bytes(&b, mac, sizeof(mac));
	}
	if (!EVP_Digest(b.p, b.len, md, NULL, EVP_sha256(), NULL)) {
		free(b.p);
		ck_err_set("manifest: SHA-256 failed");
		return -EIO;
	}
	put_bytes(&b, md, sizeof(md));
	if (b.err) {
		free(b.p);
		ck_err_set("manifest: out of memory");
		return b.err;
	}
	*out = b.p;
	*outlen = b.len;
	return 0;
}

/* ---- decoding ---- */

struct ck__rd {
	const uint8_t *base; /* start of the file, for byte offsets in messages */
	const uint8_t *p, *end;
	const char *sect; /* section being read, for messages */
};

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ck_err_set("manifest: %s", msg);
	return -EBADMSG;
}

static int take(struct ck__rd *r, void *dst, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return bad("section %s truncated at byte %zu", r->sect, (size_t)(r->end - r->base));
	memcpy(dst, r->p, n);
	r->p += n;
	return 0;
}

static int take_u32(struct ck__rd *r, uint32_t *v)
{
	uint32_t w = 0;
	int rc = take(r, &w, 4);

	*v = le32toh(w);
	return rc;
}

static int take_str(struct ck__rd *r, char **out)
{
	uint32_t n;
	int rc;

	*out = NULL;
	rc = take_u32(r, &n);
	if (rc < 0 || n == CK_MF_STR_NULL)
		return rc;
	if ((size_t)(r->end - r->p) < n)
		return bad("section %s: string of %u bytes at byte %zu runs past the section end", r->sect, n,
			   (size_t)(r->p - r->base));
	if (memchr(r->p, 0, n))
		return bad("section %s: string at byte %zu contains a NUL byte", r->sect, (size_t)(r->p - r->base));
	*out = malloc((size_t)n + 1);
	if (!*out) {
		ck_err_set("manifest: out of memory");
		return -ENOMEM;
	}
	memcpy(*out, r->p, n);
	(*out)[n] = 0;
	r->p += n;
	return 0;
}

/* Refuses counts that the remaining bytes cannot possibly hold, before
 * anything is allocated for them. */
static int check_count(struct ck__rd *r, uint64_t n, size_t min_each, const char *what)
{
	if (n > (uint64_t)(r->end - r->p) / min_each)
		return bad("section %s: %llu %s cannot fit in the %zu bytes left", r->sect, (unsigned long long)n,
			   what, (size_t)(r->end - r->p));
	return 0;
}

static int decode_jobi(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t argc, i;
	int rc;

	if ((rc = take_str(r, &m->job)) < 0 || (rc = take_str(r, &m->cwd)) < 0 || (rc = take_u32(r, &argc)) < 0)
		return rc;
	if (!m->job)
		return bad("no job name");
	if ((rc = check_count(r, argc, 4, "arguments")) < 0)
		return rc;
	m->argv = calloc((size_t)argc + 1, sizeof(char *));
	if (!m->argv)
		return -ENOMEM;
	m->argc = argc;
	for (i = 0; i < argc; i++) {
		if ((rc = take_str(r, &m->argv[i])) < 0)
			return rc;
		if (!m->argv[i])
			return bad("argument %u missing", i);
	}
	return 0;
}

static int decode_pack(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0 || (rc = check_count(r, n, 4, "packs")) < 0)
		return rc;
	m->packs = calloc((size_t)n + 1, sizeof(char *));
	if (!m->packs)
		return -ENOMEM;
	m->npacks = n;
	for (i = 0; i < n; i++) {
		if ((rc = take_str(r, &m->packs[i])) < 0)
			return rc;
		if (!m->packs[i] || !ck_store_key_valid(m->packs[i]))
			return bad("pack %u: invalid name", i);
	}
	return 0;
}

static int decode_chnk(struct ck__rd *r, struct ck_manifest *m)
{
	uint64_t n = 0, i;
	int rc;

	if ((rc = take(r, &n, 8)) < 0)
		return rc;
	n = le64toh(n);
	if ((rc = check_count(r, n, sizeof(struct ck_mf_chunk), "chunks")) < 0)
		return rc;
	m->chunks = calloc((size_t)n + 1, sizeof(*m->chunks));
	if (!m->chunks)
		return -ENOMEM;
	m->nchunks = (size_t)n;
	for (i = 0; i < n; i++) {
		struct ck_mf_chunk w;
		struct ck_chunk *c = &m->chunks[i];

		take(r, &w, sizeof(w)); /* cannot fail: count checked above */
		memcpy(c->hash, w.hash, CK_HASH_LEN);
		c->len = le32toh(w.len);
		c->clen = le32toh(w.clen);
		c->pack = le32toh(w.pack);
		c->flags = le32toh(w.flags);
		c->off = le64toh(w.off);
	}
	return 0;
}

static int decode_region(struct ck__rd *r, struct ck_region *g)
{
	struct ck_mf_region w;
	int rc;

	if ((rc = take(r, &w, sizeof(w))) < 0)
		return rc;
	g->start = le64toh(w.start);
	g->end = le64toh(w.end);
	g->prot = le32toh(w.prot);
	g->flags = le32toh(w.flags);
	g->file_off = le64toh(w.file_off);
	g->dev = le64toh(w.dev);
	g->ino = le64toh(w.ino);
	g->first_chunk = le64toh(w.first_chunk);
	g->nchunks = le32toh(w.nchunks);
	g->pad = le32toh(w.pad);
	if (g->pad)
		return bad("region %#llx: reserved field not zero", (unsigned long long)g->start);
	return take_str(r, &g->path);
}

static int decode_proc(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0 || (rc = check_count(r, n, sizeof(struct ck_mf_proc) + 4, "processes")) < 0)
		return rc;
	m->procs = calloc((size_t)n + 1, sizeof(*m->procs));
	if (!m->procs)
		return -ENOMEM;
	m->nprocs = n;
	for (i = 0; i < n; i++) {
		struct ck_proc *p = &m->procs[i];
		struct ck_mf_proc w;
		uint64_t j;

		if ((rc = take(r, &w, sizeof(w))) < 0)
			return rc;
		p->pid = (int32_t)le32toh((uint32_t)w.pid);
		p->ppid = (int32_t)le32toh((uint32_t)w.ppid);
		p->restart_entry = le64toh(w.restart_entry);
		p->restart_arg = le64toh(w.restart_arg);
		p->restart_stack = le64toh(w.restart_stack);
		w.nregions = le64toh(w.nregions);
		w.desc_len = le64toh(w.desc_len);
		if ((rc = take_str(r, &p->exe)) < 0)
			return rc;
		if ((rc = check_count(r, w.desc_len, 1, "descriptor bytes")) < 0)
			return rc;
		p->desc = malloc((size_t)w.desc_len + 1);
		if (!p->desc)
			return -ENOMEM;
		p->desc_len = (size_t)w.desc_len;
		take(r, p->desc, p->desc_len);
		if ((rc = check_count(r, w.nregions, sizeof(struct ck_mf_region) + 4, "regions")) < 0)
			return rc;
		p->regions = calloc((size_t)w.nregions + 1, sizeof(*p->regions));
		if (!p->regions)
			return -ENOMEM;
		p->nregions = (size_t)w.nregions;
		for (j = 0; j < w.nregions; j++)
			if ((rc = decode_region(r, &p->regions[j])) < 0)
				return rc;
	}
	return 0;
}

static int decode_skip(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0 || (rc = check_count(r, n, 12, "skipped items")) < 0)
		return rc;
	m->skips = calloc((size_t)n + 1, sizeof(*m->skips));
	if (!m->skips)
		return -ENOMEM;
	m->nskips = n;
	for (i = 0; i < n; i++) {
		uint32_t pid;

		if ((rc = take_u32(r, &pid)) < 0 || (rc = take_str(r, &m->skips[i].what)) < 0 ||
		    (rc = take_str(r, &m->skips[i].why)) < 0)
			return rc;
		m->skips[i].pid = (int32_t)pid;
	}
	return 0;
}

static int decode_tree(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0 || (rc = check_count(r, n, sizeof(struct ck_mf_task), "tasks")) < 0)
		return rc;
	m->tasks = calloc((size_t)n + 1, sizeof(*m->tasks));
	if (!m->tasks)
		return -ENOMEM;
	m->ntasks = n;
	for (i = 0; i < n; i++) {
		struct ck_mf_task w;
		struct ck_task *t = &m->tasks[i];
		if ((rc = take(r, &w, sizeof(w))) < 0)
			return rc;
		t->pid = (int32_t)le32toh((uint32_t)w.pid);
		t->ppid = (int32_t)le32toh((uint32_t)w.ppid);
		t->pgid = (int32_t)le32toh((uint32_t)w.pgid);
		t->sid = (int32_t)le32toh((uint32_t)w.sid);
		t->flags = le32toh(w.flags);
		t->status = (int32_t)le32toh((uint32_t)w.status);
		if (t->pid <= 1 || (t->flags & ~(uint32_t)(CK_TASK_ZOMBIE | CK_TASK_MAKER)))
			return bad("task %u: bad pid %d or flags %#x", i, t->pid, t->flags);
	}
	return 0;
}

static int decode_sysv(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0 || (rc = check_count(r, n, sizeof(struct ck_mf_shm), "SysV segments")) < 0)
		return rc;
	m->shms = calloc((size_t)n + 1, sizeof(*m->shms));
	if (!m->shms)
		return -ENOMEM;
	m->nshms = n;
	for (i = 0; i < n; i++) {
		struct ck_mf_shm w;
		struct ck_sysv_shm *x = &m->shms[i];
		if ((rc = take(r, &w, sizeof(w))) < 0)
			return rc;
		x->id = (int32_t)le32toh((uint32_t)w.id);
		x->key = (int32_t)le32toh((uint32_t)w.key);
		x->mode = le32toh(w.mode);
		x->flags = le32toh(w.flags);
		x->uid = le32toh(w.uid);
		x->gid = le32toh(w.gid);
		x->size = le64toh(w.size);
		x->first_chunk = le64toh(w.first_chunk);
		x->nchunks = le32toh(w.nchunks);
		x->pad = le32toh(w.pad);
		if (x->id < 0 || (x->flags & ~(uint32_t)(CK_SYSV_DEST | CK_SYSV_MSG | CK_SYSV_PMQ | CK_SYSV_SEM)) ||
		    ((x->flags & CK_SYSV_SEM) && (x->flags != CK_SYSV_SEM || !x->pad || x->pad > 32000 ||
						  x->size != (uint64_t)x->pad * 2)) ||
		    ((x->flags & CK_SYSV_MSG) && (x->flags & CK_SYSV_DEST)) ||
		    ((x->flags & CK_SYSV_PMQ) && x->flags != CK_SYSV_PMQ) || x->first_chunk + x->nchunks > m->nchunks ||
		    x->first_chunk + x->nchunks < x->first_chunk)
			return bad("SysV segment %u: bad id, flags or chunk range", i);
	}
	return 0;
}

static int decode_file(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0 ||
	    (rc = check_count(r, n, sizeof(struct ck_mf_file) + 4, "mapped files")) < 0)
		return rc;
	m->files = calloc((size_t)n + 1, sizeof(*m->files));
	if (!m->files)
		return -ENOMEM;
	m->nfiles = n;
	for (i = 0; i < n; i++) {
		struct ck_mf_file w;
		struct ck_mfile *f = &m->files[i];
		if ((rc = take(r, &w, sizeof(w))) < 0 || (rc = take_str(r, &f->path)) < 0)
			return rc;
		f->dev = le64toh(w.dev);
		f->ino = le64toh(w.ino);
		f->size = le64toh(w.size);
		f->mtime_ns = (int64_t)le64toh((uint64_t)w.mtime_ns);
		f->ctime_ns = (int64_t)le64toh((uint64_t)w.ctime_ns);
		if (!f->path || f->path[0] != '/')
			return bad("mapped file %u: no absolute path", i);
	}
	return 0;
}

/* Digests of the FILE section's files, in its order (so after it). */
static int decode_fdig(struct ck__rd *r, struct ck_manifest *m)
{
	static const uint8_t none[CK_HASH_LEN];
	uint32_t n, i;
	int rc;

	if ((rc = take_u32(r, &n)) < 0)
		return rc;
	if (!m->files || n != m->nfiles)
		return bad("%u file digests for %zu mapped files", n, m->nfiles);
	for (i = 0; i < n; i++) {
		struct ck_mfile *f = &m->files[i];
		if ((rc = take(r, f->digest, CK_HASH_LEN)) < 0)
			return rc;
		f->has_digest = memcmp(f->digest, none, CK_HASH_LEN) != 0;
	}
	return 0;
}

static int decode_clck(struct ck__rd *r, struct ck_manifest *m)
{
	uint64_t clk[2];
	int rc;

	if ((rc = take(r, clk, sizeof(clk))) < 0)
		return rc;
	m->mono_ns = le64toh(clk[0]);
	m->boot_ns = le64toh(clk[1]);
	m->has_clocks = 1;
	return 0;
}

static int decode_lpid(struct ck__rd *r, struct ck_manifest *m)
{
	uint32_t v, zero;
	int rc;

	if ((rc = take_u32(r, &v)) < 0 || (rc = take_u32(r, &zero)) < 0)
		return rc;
	if ((int32_t)v < 1 || zero)
		return bad("last pid %d", (int32_t)v);
	m->last_pid = (int32_t)v;
	m->has_last_pid = 1;
	return 0;
}

static int decode_line(struct ck__rd *r, struct ck_manifest *m)
{
	int rc = take(r, m->lineage, sizeof(m->lineage));

	m->has_lineage = rc == 0;
	return rc;
}

/* Cross-checks that later readers rely on: chunk flags and pack indices,
 * region bounds and chunk ranges. */
static int validate(const struct ck_manifest *m)
{
	uint64_t *upto = NULL; /* upto[i]: bytes in chunks [0, i) */
	size_t i, j;
	int rc = 0;

	upto = malloc((m->nchunks + 1) * sizeof(*upto));
	if (!upto) {
		ck_err_set("manifest: out of memory");
		return -ENOMEM;
	}
	upto[0] = 0;
	for (i = 0; i < m->nchunks; i++) {
		const struct ck_chunk *c = &m->chunks[i];

		upto[i + 1] = upto[i] + c->len;
		if (c->flags & ~(uint32_t)CK__CHUNK_FLAGS) {
			rc = bad("chunk %zu: unknown flags %#x", i, c->flags);
			goto out;
		}
		if (c->len == 0 || c->len > CK_CHUNK_SIZE) {
			rc = bad("chunk %zu: bad length %u", i, c->len);
			goto out;
		}
		if (c->flags & CK_CHUNK_ZERO) {
			if (c->clen || (c->flags & (CK_CHUNK_RAW | CK_CHUNK_DELTA))) {
				rc = bad("chunk %zu: zero chunk with stored bytes", i);
				goto out;
			}
			continue;
		}
		if (c->pack >= m->npacks) {
			rc = bad("chunk %zu: pack index %u out of range (%zu packs)", i, c->pack, m->npacks);
			goto out;
		}
		if (c->clen == 0 || c->clen > 2 * CK_CHUNK_SIZE || ((c->flags & CK_CHUNK_RAW) && c->clen != c->len) ||
		    ((c->flags & CK_CHUNK_DELTA) && ((c->flags & CK_CHUNK_RAW) || c->clen <= CK_DELTA_HDR))) {
			rc = bad("chunk %zu: bad stored length %u", i, c->clen);
			goto out;
		}
		if (c->off > UINT64_MAX - c->clen) {
			rc = bad("chunk %zu: offset out of range", i);
			goto out;
		}
	}
	for (i = 0; i < m->nprocs; i++) {
		const struct ck_proc *p = &m->procs[i];

		for (j = 0; j < p->nregions; j++) {
			const struct ck_region *g = &p->regions[j];
			uint64_t bytes;

			if (g->start >= g->end) {
				rc = bad("process %d: region %zu: empty or inverted range", p->pid, j);
				goto out;
			}
			if (g->first_chunk > m->nchunks || g->nchunks > m->nchunks - g->first_chunk) {
				rc = bad("process %d: region %#llx: chunk range out of bounds", p->pid,
					 (unsigned long long)g->start);
				goto out;
			}
			/* A restore fills the region from its chunks: they must fit. */
			bytes = upto[g->first_chunk + g->nchunks] - upto[g->first_chunk];
			if (bytes > g->end - g->start) {
				rc = bad("process %d: region %#llx: %llu bytes of chunks exceed its size %llu", p->pid,
					 (unsigned long long)g->start, (unsigned long long)bytes,
					 (unsigned long long)(g->end - g->start));
				goto out;
			}
		}
	}
	/* A segment is filled from its chunks, a queue's messages are read
	 * into a buffer of its size: they must fit, and a queue's fill it. */
	for (i = 0; i < m->nshms; i++) {
		const struct ck_sysv_shm *x = &m->shms[i];
		uint64_t bytes = upto[x->first_chunk + x->nchunks] - upto[x->first_chunk];
		int msg = (x->flags & (CK_SYSV_MSG | CK_SYSV_PMQ | CK_SYSV_SEM)) != 0;

		if (msg ? (bytes != x->size || x->size > INT32_MAX) : bytes > x->size) {
			rc = bad("SysV %s %d: %llu bytes of chunks for a size of %llu", msg ? "queue or set" : "segment", x->id,
				 (unsigned long long)bytes, (unsigned long long)x->size);
			goto out;
		}
	}
out:
	free(upto);
	return rc;
}

int ck_manifest_decode(const void *buf, size_t len, struct ck_manifest **out)
{
	const uint8_t *b = buf;
	struct ck_mf_head h;
	struct ck_manifest *m = NULL;
	unsigned char md[CK_HASH_LEN];
	unsigned seen = 0;
	struct ck__rd r;
	uint32_t i;
	int rc;

	*out = NULL;
	if (len < sizeof(ck__mf_magic))
		return bad("truncated at byte %zu (no magic)", len);
	if (memcmp(b, ck__mf_magic, sizeof(ck__mf_magic)))
		return bad("bad magic (not a checkpoint manifest)");
	/* The version comes first, so a newer file gets a clear message. */
	if (len < sizeof(ck__mf_magic) + 8)
		return bad("truncated at byte %zu (in header)", len);
	memcpy(&h, b + sizeof(ck__mf_magic), 8);
	h.version = le32toh(h.version);
	h.head_len = le32toh(h.head_len);
	if (h.version != CK_MANIFEST_VERSION)
		return bad("unsupported version %u (this build reads version %d)", h.version, CK_MANIFEST_VERSION);
	if (h.head_len != sizeof(h))
		return bad("bad header length %u", h.head_len);
	if (len < sizeof(ck__mf_magic) + sizeof(h) + CK_HASH_LEN)
		return bad("truncated at byte %zu (in header)", len);
	memcpy(&h, b + sizeof(ck__mf_magic), sizeof(h));
	h.total_len = le64toh(h.total_len);
	if (h.total_len > len)
		return bad("truncated at byte %zu (expected %llu bytes)", len, (unsigned long long)h.total_len);
	if (h.total_len < len)
		return bad("%zu bytes of trailing garbage after byte %llu", len - (size_t)h.total_len,
			   (unsigned long long)h.total_len);
	if (!EVP_Digest(b, len - CK_HASH_LEN, md, NULL, EVP_sha256(), NULL)) {
		ck_err_set("manifest: SHA-256 failed");
		return -EIO;
	}
	if (memcmp(md, b + len - CK_HASH_LEN, CK_HASH_LEN))
		return bad("checksum mismatch");
	h.flags = le32toh(h.flags);
	if (h.flags & ~CK_MF_SIGNED)
		return bad("unknown header flags %#x", h.flags);
	if (h.flags & CK_MF_SIGNED) {
		if (len < sizeof(ck__mf_magic) + sizeof(h) + 2 * CK_HASH_LEN)
			return bad("truncated at byte %zu (in its signature)", len);
		if (ck_manifest_signing()) {
			/* [0, len-64): signed; then the MAC; then the checksum */
			rc = ck_manifest_mac_check(b, len - 2 * CK_HASH_LEN, b + len - 2 * CK_HASH_LEN);
			if (rc == -EBADMSG)
				return bad("signature does not match the signing key (not committed with this key, or "
					   "altered)");
			if (rc < 0)
				return rc;
		}
		len -= CK_HASH_LEN; /* the sections end where the MAC begins */
	} else if (ck_manifest_signing()) {
		return bad("not signed, and a signing key was given (--sign-key): refused");
	}

	m = calloc(1, sizeof(*m));
	if (!m) {
		ck_err_set("manifest: out of memory");
		return -ENOMEM;
	}
	m->version = h.version;
	m->seq = le64toh(h.seq);
	m->time_ns = le64toh(h.time_ns);
	m->duration_ns = le64toh(h.duration_ns);
	m->frozen_ns = le64toh(h.frozen_ns);
	m->logical_bytes = le64toh(h.logical_bytes);
	m->stored_bytes = le64toh(h.stored_bytes);
	h.nsections = le32toh(h.nsections);

	r.base = b;
	r.p = b + sizeof(ck__mf_magic) + sizeof(h);
	r.end = b + len - CK_HASH_LEN;
	for (i = 0; i < h.nsections; i++) {
		struct ck_mf_sect sh;
		struct ck__rd sr;
		int which;

		r.sect = "header";
		if ((rc = take(&r, &sh, sizeof(sh))) < 0)
			goto fail;
		sh.len = le64toh(sh.len);
		if (sh.len > (uint64_t)(r.end - r.p)) {
			rc = bad("section %u truncated at byte %zu", i, (size_t)(r.end - b));
			goto fail;
		}
		sr.base = b;
		sr.p = r.p;
		sr.end = r.p + sh.len;
		r.p = sr.end;
		for (which = 0; which < CK_MF_NSECT; which++)
			if (!memcmp(sh.magic, ck__sect_names[which], 4))
				break;
		if (which == CK_MF_NSECT)
			continue; /* unknown section: a later addition we may ignore */
		if (le32toh(sh.flags)) {
			rc = bad("section %s: unknown flags", ck__sect_names[which]);
			goto fail;
		}
		if (seen & (1u << which)) {
			rc = bad("section %s appears twice", ck__sect_names[which]);
			goto fail;
		}
		seen |= 1u << which;
		sr.sect = ck__sect_names[which];
		switch (which) {
		case CK_MF_JOBI: rc = decode_jobi(&sr, m); break;
		case CK_MF_PACK: rc = decode_pack(&sr, m); break;
		case CK_MF_CHNK: rc = decode_chnk(&sr, m); break;
		case CK_MF_PROC: rc = decode_proc(&sr, m); break;
		case CK_MF_TREE: rc = decode_tree(&sr, m); break;
		case CK_MF_SYSV: rc = decode_sysv(&sr, m); break;
		case CK_MF_FILE: rc = decode_file(&sr, m); break;
		case CK_MF_FDIG: rc = decode_fdig(&sr, m); break;
		case CK_MF_CLCK: rc = decode_clck(&sr, m); break;
		case CK_MF_LINE: rc = decode_line(&sr, m); break;
		case CK_MF_LPID: rc = decode_lpid(&sr, m); break;
		default: rc = decode_skip(&sr, m); break;
		}
		if (rc == -ENOMEM)
			ck_err_set("manifest: out of memory");
		if (rc < 0)
			goto fail;
		if (sr.p != sr.end) {
			rc = bad("section %s: %zu unexpected bytes at byte %zu", sr.sect, (size_t)(sr.end - sr.p),
				 (size_t)(sr.p - b));
			goto fail;
		}
	}
	if (r.p != r.end) {
		rc = bad("%zu bytes after the last section", (size_t)(r.end - r.p));
		goto fail;
	}
	for (i = 0; i < CK_MF_NSECT_REQUIRED; i++) {
		if (!(seen & (1u << i))) {
			rc = bad("section %s missing", ck__sect_names[i]);
			goto fail;
		}
	}
	rc = validate(m);
	if (rc < 0)
		goto fail;
	*out = m;
	return 0;
fail:
	ck_manifest_free(m);
	return rc;
}

static void free_strv(char **v, size_t n)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void ck_manifest_free(struct ck_manifest *m)
{
	size_t i, j;

	if (!m)
		return;
	free(m->job);
	free(m->cwd);
	free_strv(m->argv, m->argc);
	free_strv(m->packs, m->npacks);
	free(m->chunks);
	for (i = 0; m->procs && i < m->nprocs; i++) {
		struct ck_proc *p = &m->procs[i];

		free(p->exe);
		free(p->desc);
		for (j = 0; p->regions && j < p->nregions; j++)
			free(p->regions[j].path);
		free(p->regions);
	}
	free(m->procs);
	free(m->tasks);
	free(m->shms);
	for (i = 0; m->files && i < m->nfiles; i++)
		free(m->files[i].path);
	free(m->files);
	for (i = 0; m->skips && i < m->nskips; i++) {
		free(m->skips[i].what);
		free(m->skips[i].why);
	}
	free(m->skips);
	free(m);
}
