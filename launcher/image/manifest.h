/* The checkpoint manifest: what one committed checkpoint holds.
 *
 * In memory it is the model below; on storage it is a versioned binary file
 * (ckrun/manifest_format.h, include/ckrun/FORMAT.md) with a SHA-256 over all of
 * its bytes. A manifest is written last, with CK_PUT_NOREPLACE, after every
 * pack it references is durable: no manifest, no checkpoint.
 *
 * Storage layout of a job:
 *   JOB/manifests/SEQ           SEQ = %08llu, increasing from 1
 *   JOB/packs/SEQ-NNNN.pack     compressed chunks written by round SEQ
 */
#ifndef CK_MANIFEST_H
#define CK_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "ckrun/manifest_format.h"
#include "launcher/store/store.h"

struct ck_chunk {
	uint8_t hash[CK_HASH_LEN]; /* SHA-256 of the uncompressed bytes */
	uint32_t len;              /* uncompressed length, <= CK_CHUNK_SIZE */
	uint32_t clen;             /* stored length in the pack (0 if ZERO) */
	uint32_t pack;             /* index into manifest.packs */
	uint32_t flags;
	uint64_t off; /* offset of the stored bytes in the pack */
};

struct ck_region {
	uint64_t start, end; /* [start, end) */
	uint32_t prot;       /* PROT_* */
	uint32_t flags;      /* CK_REG_* (ckrun/regions.h) */
	uint64_t file_off;
	uint64_t dev, ino;
	char *path;           /* NULL for anonymous; "[heap]" etc. for special */
	uint64_t first_chunk; /* index into manifest.chunks */
	uint32_t nchunks;     /* 0 with CK_REG_NODATA */
	uint32_t pad;
};

/* One process of the job. The restart state that libckpt keeps for itself
 * (thread contexts, descriptors, signal state) travels in the process's own
 * memory; `desc` is libckpt's description of it (ckrun/procdesc.h),
 * stored verbatim for restore-time checks and `ckpt inspect`. */
struct ck_proc {
	int32_t pid, ppid;
	char *exe;
	uint64_t restart_entry; /* address of libckpt's restart entry */
	uint64_t restart_arg;   /* its argument */
	uint64_t restart_stack; /* top of the stack it runs on */
	struct ck_region *regions;
	size_t nregions;
	uint8_t *desc;
	size_t desc_len;
};

/* The job's process tree: every process (those in procs[] and zombies),
 * with pids as the job's pid namespace numbers them. pgid/sid 0: the group
 * or session of ckrun, outside the job. */
struct ck_task {
	int32_t pid, ppid, pgid, sid;
	uint32_t flags; /* CK_TASK_* */
	int32_t status; /* zombies: the wait status their parent will collect */
};

/* A System V shared memory segment of the job's IPC namespace. */
struct ck_sysv_shm {
	int32_t id, key;
	uint32_t mode;  /* permission bits */
	uint32_t flags; /* CK_SYSV_DEST: marked for removal; CK_SYSV_MSG: a message queue;
			 * CK_SYSV_PMQ: a POSIX message queue; CK_SYSV_SEM: a semaphore set */
	uint32_t uid, gid;
	uint64_t size;
	uint64_t first_chunk;
	uint32_t nchunks;
	uint32_t pad; /* CK_SYSV_MSG: the queue's msg_qbytes; CK_SYSV_SEM: its number of semaphores */
};

/* A file the checkpoint relies on for content it did not save
 * (CK_REG_FILEPAGES regions map it): its identity at the cut. */
struct ck_mfile {
	char *path;
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
	uint8_t digest[CK_HASH_LEN]; /* SHA-256 of the contents (section FDIG) */
	int has_digest;
};

/* Something left out of the checkpoint, and why (shown by ckpt inspect). */
struct ck_skip {
	int32_t pid;
	char *what;
	char *why;
};

#define CK_LINEAGE_LEN 16

struct ck_manifest {
	uint32_t version;
	uint64_t seq;
	uint64_t time_ns;     /* CLOCK_REALTIME at commit */
	uint64_t duration_ns; /* request to commit */
	uint64_t frozen_ns;   /* time the job was stopped */
	uint64_t logical_bytes; /* bytes of region data covered */
	uint64_t stored_bytes;  /* new bytes this round wrote to packs */
	char *job;
	char *cwd;
	char **argv;
	size_t argc;
	char **packs; /* pack keys, relative to JOB/ ("packs/00000003-0001.pack") */
	size_t npacks;
	struct ck_chunk *chunks;
	size_t nchunks;
	struct ck_proc *procs;
	size_t nprocs;
	struct ck_skip *skips;
	size_t nskips;
	struct ck_task *tasks; /* optional section TREE; none in older images */
	size_t ntasks;
	struct ck_sysv_shm *shms; /* optional section SYSV */
	size_t nshms;
	struct ck_mfile *files; /* optional section FILE */
	size_t nfiles;
	/* optional section CLCK: the job's clocks at the cut as it read them
	 * (its time namespace's); has_clocks 0 in older images */
	int has_clocks;
	uint64_t mono_ns, boot_ns;
	/* optional section LINE: which run of the job this is (drawn at a
	 * fresh start, kept by its resumes); has_lineage 0 in older images */
	int has_lineage;
	uint8_t lineage[CK_LINEAGE_LEN];
	/* optional section LPID: the last pid the job's pid namespace gave
	 * (its ns_last_pid), for the restored one to go on after it;
	 * has_last_pid 0 in older images */
	int has_last_pid;
	int32_t last_pid;
};

/* Encoding. encode allocates *buf; decode checks magic, version, bounds and
 * checksum and fails with -EBADMSG and a message naming what is wrong. */
int ck_manifest_encode(const struct ck_manifest *m, void **buf, size_t *len);
int ck_manifest_decode(const void *buf, size_t len, struct ck_manifest **out);
void ck_manifest_free(struct ck_manifest *m);

/* Committed sequences of a job, ascending (malloc'd). */
int ck_manifest_list(struct ck_store *s, const char *job, uint64_t **seqs, size_t *n);
/* Loads and verifies JOB/manifests/SEQ. */
int ck_manifest_load(struct ck_store *s, const char *job, uint64_t seq, struct ck_manifest **out);
/* Newest manifest that loads and verifies; -ENOENT if the job has none. A
 * newer manifest that fails to verify is an error (-EBADMSG), not skipped. */
int ck_manifest_load_latest(struct ck_store *s, const char *job, struct ck_manifest **out);
/* Encodes and stores m as JOB/manifests/SEQ with CK_PUT_NOREPLACE. */
int ck_manifest_commit(struct ck_store *s, const struct ck_manifest *m);

/* Retention: keeps the newest `keep` good checkpoints of job (a good one
 * loads, and every pack it references is there with the bytes its chunks
 * need; with opts->verify, also passes that check), deletes every older
 * one, good or damaged, oldest first; damaged ones newer than the last
 * kept are kept and not counted, and with fewer than `keep` good ones
 * nothing is deleted. Then packs: those of a sequence <= the newest
 * committed one that no remaining manifest references (none while a
 * remaining manifest does not load: rep->packs_held), never those of a
 * later (in-flight) sequence unless CK_RETAIN_OWNER. keep 0: no
 * checkpoint is deleted, only packs. A store error leaves everything. */
#define CK_RETAIN_OWNER 0x1 /* the caller holds the job's lock: a round in flight does not exist, so packs of
			     * sequences above the newest commit are a killed writer's leftovers */
#define CK_RETAIN_SWEEP 0x2 /* also remove temporaries (ck_store_sweep); needs the lock */
struct ck_retain_opts {
	unsigned flags;
	/* Optional: reads and checks the data of a checkpoint that would be
	 * kept in place of older ones (ckpt gc). 0 good; -EBADMSG/-ENOENT
	 * damaged; other errors stop the retention. */
	int (*verify)(void *arg, struct ck_store *s, const struct ck_manifest *m);
	void *arg;
	/* Packs of sequences up to this one may go (0: up to the newest
	 * committed one, as listed before anything is deleted). */
	uint64_t upto;
};
struct ck_retain_report {
	uint64_t *removed;  /* checkpoints deleted, oldest first */
	size_t nremoved;
	uint64_t *kept;     /* good ones counted, newest first */
	size_t nkept;
	uint64_t *damaged;  /* damaged ones looked at (kept when newer than the last counted), newest first */
	size_t ndamaged;
	char damaged_why[1024]; /* the newest damaged one's reason */
	unsigned npacks;        /* packs deleted */
	uint64_t pack_bytes;
	int packs_held;         /* packs not collected: a remaining manifest does not load (ck_err_msg) */
	unsigned ntemp;         /* temporaries removed (CK_RETAIN_SWEEP) */
};
int ck_store_retain_ex(struct ck_store *s, const char *job, unsigned keep, const struct ck_retain_opts *opts,
		       struct ck_retain_report *rep);
void ck_retain_report_free(struct ck_retain_report *rep);
/* The same without options and report; packs held back are an error. */
int ck_store_retain(struct ck_store *s, const char *job, unsigned keep);
/* Every pack m references exists with the bytes its chunks need (one
 * listing): 0, or -ENOENT/-EBADMSG naming the pack. ckrun's check before a
 * commit: a pack deleted under a running job (ckpt rm --force) is found
 * there, not at a restore. */
int ck_manifest_check_packs(struct ck_store *s, const struct ck_manifest *m);

/* Signed manifests (manifest_sign.c). With a key loaded, encoding signs
 * and decoding refuses (-EBADMSG, one line) a manifest that is unsigned or
 * signed with another key. The key file must be the caller's, mode 0600,
 * 16 bytes or more. */
int ck_manifest_sign_key_load(const char *path);
int ck_manifest_signing(void);
int ck_manifest_mac(const void *buf, size_t len, unsigned char mac[32]);
int ck_manifest_mac_check(const void *buf, size_t len, const unsigned char mac[32]);

/* Job names in the store (their encoded form, below): [A-Za-z0-9._-] and
 * "%XX" for other bytes, 1 to 128 bytes, not starting with '.'. */
#define CK_JOB_NAME_MAX 128
int ck_job_name_valid(const char *name);
/* A user's job name (any bytes but '/', not "." or "..") to its store
 * form: bytes outside [A-Za-z0-9_-] (and a leading '.') become "%XX". out
 * needs CK_JOB_NAME_MAX + 1 bytes. 0, -EINVAL or -ENAMETOOLONG (message in
 * ck_err). */
int ck_job_name_encode(const char *name, char *out, size_t len);
/* The store form back to the user's name (for listings). */
int ck_job_name_decode(const char *enc, char *out, size_t len);

/* Store key of a manifest: "JOB/manifests/%08llu". */
int ck_manifest_key(const char *job, uint64_t seq, char *buf, size_t len);
/* Deletes every pack of job with a sequence <= upto_seq that no remaining
 * manifest references. Counts what went (either pointer may be NULL). A
 * manifest that fails to load stops the collection before anything is
 * deleted. */
int ck_store_gc_packs(struct ck_store *s, const char *job, uint64_t upto_seq, unsigned *ndeleted,
		      uint64_t *bytes);
/* Sequence of a pack key ("packs/00000003-0001.pack", with or without the
 * "JOB/" in front); 0 if the name is not a pack's. */
uint64_t ck_pack_seq(const char *key);
/* Jobs of a store (names with a manifests/ folder), sorted, malloc'd array
 * of malloc'd names. */
int ck_store_list_jobs(struct ck_store *s, char ***jobs, size_t *n);

#endif
