/* Chunk writer and reader: region data <-> packs of compressed chunks.
 *
 * Writer: cuts data into CK_CHUNK_SIZE chunks, hashes each (SHA-256), skips
 * all-zero chunks and chunks the previous manifest already stored (dedup
 * across rounds), compresses the rest with zstd and appends them to packs of
 * bounded size that are uploaded while the next is filled. Memory use is
 * bounded whatever the job's size.
 *
 * Reader: fetches the stored bytes, decompresses and checks the hash of every
 * chunk before handing it on: no unverified byte leaves the reader. */
#ifndef CK_CHUNKIO_H
#define CK_CHUNKIO_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/image/manifest.h"
#include "launcher/store/store.h"

/* Fills buf with len bytes of the source at offset off. 0 or -errno. Called
 * from the writer's worker threads, possibly concurrently. */
typedef int (*ck_read_fn)(void *arg, uint64_t off, void *buf, size_t len);
/* A read function's answer where all len bytes are zeros and buf was left
 * as it was: a sparse source skips both filling and scanning them. */
#define CK_READ_ZEROS 1
/* Receives len verified bytes of the target at offset off. */
typedef int (*ck_write_fn)(void *arg, uint64_t off, const void *buf, size_t len);

/* A buffer in our memory as source (arg: its start) and as target. */
int ck_mem_src(void *arg, uint64_t off, void *buf, size_t len);
int ck_mem_sink(void *arg, uint64_t off, const void *buf, size_t len);

struct ck_writer_opts {
	int level;          /* zstd level, default 1 */
	unsigned threads;   /* hashing/compression workers, default 1 */
	size_t pack_size;   /* default 32 MiB */
	/* The caller's policy of priorities: called by each of the writer's
	 * own threads as it starts (first 1) and by every thread between
	 * pieces of work (a chunk, a batch, a pack; first 0). */
	void (*pace)(void *arg, int first);
	void *pace_arg;
};

struct ck_writer;
int ck_writer_open(struct ck_store *s, const char *job, uint64_t seq, const struct ck_manifest *prev,
		   const struct ck_writer_opts *opts, struct ck_writer **out);
/* Stores len bytes from fn as consecutive chunks; returns where they are in
 * the chunk table being built. One caller thread at a time. After a failure
 * the writer only accepts ck_writer_abort (finish fails too). */
int ck_writer_add(struct ck_writer *w, uint64_t len, ck_read_fn fn, void *arg, uint64_t *first_chunk,
		  uint32_t *nchunks);
/* The same for len bytes that live at address vaddr of a process (vaddr
 * page-aligned), where how (CK_WADD_*) lets a chunk be stored as the pages
 * that differ from the chunk an earlier region stored at the same address:
 * a forked process shares most of its parent's pages, and the few it wrote
 * (reference counts, allocator headers) would otherwise store whole 256 KiB
 * chunks again. */
#define CK_WADD_BASE 0x1  /* its chunks' page digests are kept: later ones may be stored against them */
#define CK_WADD_DELTA 0x2 /* its chunks may be stored against a BASE chunk at the same address */
/* fn answers a probe: called with buf NULL for a span of whole chunks, it
 * returns CK_READ_ZEROS when the span holds only zeros (and the writer
 * will not read it), else 0 (nothing consumed). Runs of a sparse region
 * are then stored as zero chunks without being read or handed to a
 * worker. */
#define CK_WADD_PROBE 0x4
int ck_writer_add_at(struct ck_writer *w, uint64_t vaddr, unsigned how, uint64_t len, ck_read_fn fn, void *arg,
		     uint64_t *first_chunk, uint32_t *nchunks);
/* Flushes the last pack, waits for every upload, and moves the chunk and pack
 * tables and byte counts into m. After this, commit m. The writer is freed
 * whether this succeeds or not. */
int ck_writer_finish(struct ck_writer *w, struct ck_manifest *m);
/* Stops and frees a writer; packs already written stay for gc. */
void ck_writer_abort(struct ck_writer *w);

struct ck_reader;
int ck_reader_open(struct ck_store *s, const char *job, const struct ck_manifest *m, struct ck_reader **out);
/* Reads chunks [first, first+n) of m in order, verifying each; fn sees the
 * data at offsets relative to the first chunk. A bad chunk fails with
 * -EBADMSG and a message naming the checkpoint, the chunk and the store. */
int ck_reader_read(struct ck_reader *r, uint64_t first, uint32_t n, ck_write_fn fn, void *arg);
/* The same, but zero chunks (still checked) reach fn with buf NULL: for
 * destinations that already read as zeros (fresh anonymous memory), so
 * that the restore neither writes nor faults in pages that held nothing. */
int ck_reader_read_sparse(struct ck_reader *r, uint64_t first, uint32_t n, ck_write_fn fn, void *arg);
void ck_reader_close(struct ck_reader *r);
/* Number of ranged reads kept in flight (1..16, default 3); call before the
 * first ck_reader_read. Each costs buffers of about 12.5 MiB (4.5 MiB stored,
 * up to 8 MiB decoded). */
void ck_reader_set_parallel(struct ck_reader *r, unsigned n);
const struct ck_manifest *ck_reader_manifest(const struct ck_reader *r);
/* Counts every verified byte handed on (zero chunks included) into p, which
 * draws the progress line on a terminal (launcher/common/progress.h); NULL
 * stops counting. */
struct ck_progress;
void ck_reader_set_progress(struct ck_reader *r, struct ck_progress *p);

#endif
