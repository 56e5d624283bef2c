/* ckrun contract: the manifest's on-disk format.
 *
 * Version: CK_MANIFEST_VERSION below (1). tests/golden/manifest-v1.bin
 * holds version 1's bytes; FORMAT.md beside this header describes the
 * store's keys, the packs and the rules for deleting. The in-memory model
 * and the encoder are launcher/image/manifest.h and manifest.c.
 *
 * Layout (little endian):
 *   CK_MF_MAGIC  8 bytes
 *   head         struct ck_mf_head
 *   sections     each: struct ck_mf_sect, then its payload
 *   SHA-256      over every byte before it
 * Strings in payloads: 32-bit length, then the bytes (CK_MF_STR_NULL: no
 * string). */
#ifndef CK_CONTRACT_MANIFEST_FORMAT_H
#define CK_CONTRACT_MANIFEST_FORMAT_H

#include <assert.h>
#include <stdint.h>

#include "ckrun/regions.h"

#define CK_MANIFEST_VERSION 1
#define CK_CHUNK_SIZE (256u * 1024u) /* page-aligned chunk of region data */
#define CK_HASH_LEN 32               /* SHA-256 */

/* chunk flags */
#define CK_CHUNK_ZERO 0x1 /* all zero bytes: nothing stored */
#define CK_CHUNK_RAW 0x2  /* stored uncompressed (zstd did not help) */
#define CK_CHUNK_DELTA 0x4 /* stored as the pages that differ from a base chunk */

/* A DELTA chunk's stored bytes: the base's SHA-256 (a chunk of the same
 * manifest, of the same length, itself neither ZERO nor DELTA), a u64
 * (little endian) whose bit i says page i (4 KiB; the last may be short)
 * follows, then one zstd frame, with its content checksum, of those pages
 * back to back. Every other page is the base's. */
#define CK_DELTA_HDR (CK_HASH_LEN + 8)
#define CK_DELTA_PAGE 4096u
static_assert(CK_CHUNK_SIZE / CK_DELTA_PAGE <= 64, "a delta's page map is 64 bits");

/* task flags (TREE section) */
#define CK_TASK_ZOMBIE 0x1
/* a process that had exited and that SO_PEERCRED of a connection still
 * names: a restore makes it (or, with ZOMBIE, has the zombie live on) to
 * make the connection again, then ends it; ppid: the process that makes
 * it, sid: that one's session */
#define CK_TASK_MAKER 0x2

/* System V segment flags (SYSV section) */
#define CK_SYSV_DEST 0x1
/* the record is a message queue: its chunks hold the messages in order,
 * each a u64 length, a u64 type and its bytes; pad is its msg_qbytes */
#define CK_SYSV_MSG 0x2
/* the record is a POSIX message queue (mq_open) of the job's IPC
 * namespace: its chunks hold a u64 mq_maxmsg, a u64 mq_msgsize, a u64
 * name length, the name (no '/', no NUL), then the messages in queue
 * order, each a u64 length, a u64 priority and its bytes; id, key and pad
 * are 0 */
#define CK_SYSV_PMQ 0x4
/* the record is a System V semaphore set: pad is its number of
 * semaphores, its chunks hold their values (u16 each) */
#define CK_SYSV_SEM 0x8

#define CK_MF_MAGIC {'C', 'K', 'P', 'T', 'M', 'A', 'N', '\n'}


struct ck_mf_head {
	uint32_t version;
	uint32_t head_len; /* sizeof(struct ck_mf_head) */
	uint64_t total_len; /* whole file, checksum included */
	uint64_t seq;
	uint64_t time_ns;
	uint64_t duration_ns;
	uint64_t frozen_ns;
	uint64_t logical_bytes;
	uint64_t stored_bytes;
	uint32_t nsections;
	uint32_t flags; /* CK_MF_SIGNED, or 0 */
};
static_assert(sizeof(struct ck_mf_head) == 72, "manifest head layout");
/* Header flag: an HMAC-SHA-256 of everything before it precedes the
 * checksum (--sign-key; launcher/image/manifest_sign.c). */
#define CK_MF_SIGNED 0x1u

struct ck_mf_sect {
	char magic[4];
	uint32_t flags; /* none defined; must be 0 */
	uint64_t len;   /* payload bytes after this header */
};
static_assert(sizeof(struct ck_mf_sect) == 16, "manifest section header layout");

struct ck_mf_chunk {
	uint8_t hash[CK_HASH_LEN];
	uint32_t len;
	uint32_t clen;
	uint32_t pack;
	uint32_t flags;
	uint64_t off;
};
static_assert(sizeof(struct ck_mf_chunk) == 56, "manifest chunk record layout");

struct ck_mf_proc {
	int32_t pid;
	int32_t ppid;
	uint64_t restart_entry;
	uint64_t restart_arg;
	uint64_t restart_stack;
	uint64_t nregions;
	uint64_t desc_len;
};
static_assert(sizeof(struct ck_mf_proc) == 48, "manifest process record layout");

struct ck_mf_region {
	uint64_t start;
	uint64_t end;
	uint32_t prot;
	uint32_t flags;
	uint64_t file_off;
	uint64_t dev;
	uint64_t ino;
	uint64_t first_chunk;
	uint32_t nchunks;
	uint32_t pad;
};
static_assert(sizeof(struct ck_mf_region) == 64, "manifest region record layout");

#define CK_MF_STR_NULL 0xffffffffu /* string length meaning "no string" */
#define CK_MF_NSECT 12
#define CK_MF_NSECT_REQUIRED 5 /* TREE, SYSV, FILE, FDIG, CLCK, LINE and LPID are optional */
/* Sections, in this order; each tag is its 4-byte magic. */
#define CK_MF_SECT_TAGS {"JOBI", "PACK", "CHNK", "PROC", "SKIP", "TREE", "SYSV", "FILE", "FDIG", "CLCK", "LINE", "LPID"}
enum ck_mf_section {
	CK_MF_JOBI,
	CK_MF_PACK,
	CK_MF_CHNK,
	CK_MF_PROC,
	CK_MF_SKIP,
	CK_MF_TREE,
	CK_MF_SYSV,
	CK_MF_FILE,
	CK_MF_FDIG,
	CK_MF_CLCK, /* the job's CLOCK_MONOTONIC and CLOCK_BOOTTIME at the cut: two u64 (ns) */
	CK_MF_LINE, /* the run's lineage: 16 random bytes drawn at a fresh start, kept by resumes */
	CK_MF_LPID  /* the last pid the job's pid namespace gave at the cut: one i32, one u32 0 */
};

struct ck_mf_shm {
	int32_t id, key;
	uint32_t mode, flags, uid, gid;
	uint64_t size, first_chunk;
	uint32_t nchunks, pad;
};
static_assert(sizeof(struct ck_mf_shm) == 48, "manifest SysV record layout");

struct ck_mf_task {
	int32_t pid, ppid, pgid, sid;
	uint32_t flags;
	int32_t status;
};
static_assert(sizeof(struct ck_mf_task) == 24, "manifest task record layout");

/* FILE section: a file that CK_REG_FILEPAGES regions map, as it was at
 * the cut; each record is followed by its path (a string). */
struct ck_mf_file {
	uint64_t dev, ino; /* st_dev, st_ino */
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
};
static_assert(sizeof(struct ck_mf_file) == 40, "manifest file record layout");

/* FDIG section (after FILE, added later; readers that predate it skip it):
 * a 32-bit count equal to FILE's, then per file its content's SHA-256, all
 * zero where it is not known (the file changed while it was read). */

#endif
