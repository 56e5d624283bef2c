/* Storage backends: one key/value interface for every kind of store.
 *
 * Keys are relative paths with '/' separators ("JOB/manifests/00000007",
 * "JOB/packs/00000007-0003.pack"). Every backend keeps the same layout, so a
 * job can be copied between stores key by key (ckpt cp) and resumed there.
 *
 * All operations return 0 or a negative errno value and, on failure, record
 * one line naming the store and the key (ck_err_set). Every operation must be
 * safe to call from several threads at once on the same store handle: the
 * chunk writer and reader run parallel transfers. */
#ifndef CK_STORE_H
#define CK_STORE_H

#include <stddef.h>
#include <stdint.h>

struct ck_store;

/* put flags */
#define CK_PUT_NOREPLACE 0x1 /* fail with -EEXIST if the key exists (commit) */
/* The key is a name no other writer produces (a pack): refuse to replace an
 * existing object where that costs nothing (the file store's rename); a
 * backend where it would cost more (S3 multipart) relies on the name. */
#define CK_PUT_NEW 0x2

typedef int (*ck_store_list_cb)(void *arg, const char *key, uint64_t size);

struct ck_store_ops {
	const char *scheme; /* "file", "s3" */
	/* Stores len bytes under key, atomically: a reader sees the old object,
	 * no object, or all of the new one, never a part. Durable on return. */
	int (*put)(struct ck_store *s, const char *key, const void *buf, size_t len, unsigned flags);
	/* Reads len bytes at off; -ENOENT if the key is missing, -EIO (with a
	 * message) if the object is shorter than off+len. */
	int (*get_range)(struct ck_store *s, const char *key, uint64_t off, void *buf, size_t len);
	/* Reads a whole object into a malloc'd buffer. */
	int (*get)(struct ck_store *s, const char *key, void **buf, size_t *len);
	/* Size of an object; -ENOENT if missing. */
	int (*stat)(struct ck_store *s, const char *key, uint64_t *size);
	/* Calls cb for every key starting with prefix, in byte order of keys.
	 * A non-zero return from cb stops the walk and is returned. */
	int (*list)(struct ck_store *s, const char *prefix, ck_store_list_cb cb, void *arg);
	/* Removes a key; a missing key is not an error. */
	int (*del)(struct ck_store *s, const char *key);
	void (*close)(struct ck_store *s);
	/* Optional. Opens (creating it, 0600) the object of key as a file that
	 * can hold an fcntl lock: stores on a file system have one, and their
	 * job lock is that (launcher/store/joblock.c); NULL elsewhere, where the lock
	 * is a leased object. Returns the descriptor or -errno. */
	int (*open_lock)(struct ck_store *s, const char *key);
	/* Optional. Removes the temporaries a killed writer left in the folder
	 * dir ("JOB/packs": the file store's hidden .NAME.tmp-* files, S3's
	 * unfinished multipart uploads); counts them. Only for a caller that
	 * holds the job's lock. */
	int (*sweep)(struct ck_store *s, const char *dir, unsigned *n);
	/* Optional. 0 if the store exists (a reader's check: a writer creates
	 * it), else -ENXIO with a message naming it. */
	int (*probe)(struct ck_store *s);
};

struct ck_store {
	const struct ck_store_ops *ops;
	char *uri; /* as given, for messages (never holds credentials) */
	unsigned puts_in_flight; /* large puts that pay off at once (0: 1) */
	/* Ranged reads whose offset and buffer are multiples of this skip the
	 * page cache (0: no such gain); readers may start a read early to get
	 * there. */
	unsigned read_align;
};

/* Options that only some backends use. Zeroed means defaults. */
struct ck_store_opts {
	const char *s3_endpoint; /* --s3-endpoint */
	const char *s3_ca;       /* --s3-ca */
	/* --s3-profile: credentials, and the endpoint_url, ca_bundle and
	 * region it holds, from this section of the shared credentials file
	 * alone (before the environment; --s3-endpoint/--s3-ca before it) */
	const char *s3_profile;
	int s3_virtual_host;     /* virtual-host addressing instead of path-style */
};

/* "file:///abs/dir", a plain path, or "s3://bucket/prefix". */
int ck_store_open(const char *uri, const struct ck_store_opts *opts, struct ck_store **out);
void ck_store_close(struct ck_store *s);

/* Backend constructors. The S3 one is weak so builds without it still link.
 * A weak reference does not pull a member out of a static library: when the
 * S3 code is in libcklaunch.a, the programs must be linked with
 * -Wl,-u,ck_store_s3_open (or reference it strongly) to get it. */
int ck_store_file_open(const char *dir, struct ck_store **out);
/* Same, but messages name the store by uri (e.g. "file:///dir"). */
int ck_store_file_open_uri(const char *dir, const char *uri, struct ck_store **out);
/* Checks a key: relative, '/'-separated, no empty, "." or ".." parts. */
int ck_store_key_valid(const char *key);
int ck_store_s3_open(const char *uri, const struct ck_store_opts *opts, struct ck_store **out) __attribute__((weak));

/* HTTP requests the S3 backend has sent in this process (retries
 * included); weak: absent without the backend. */
uint64_t ck_s3_request_count(void) __attribute__((weak));

/* Convenience wrappers over ops. */
static inline int ck_store_put(struct ck_store *s, const char *key, const void *buf, size_t len, unsigned flags)
{
	return s->ops->put(s, key, buf, len, flags);
}
static inline int ck_store_get(struct ck_store *s, const char *key, void **buf, size_t *len)
{
	return s->ops->get(s, key, buf, len);
}
static inline int ck_store_get_range(struct ck_store *s, const char *key, uint64_t off, void *buf, size_t len)
{
	return s->ops->get_range(s, key, off, buf, len);
}
static inline int ck_store_stat(struct ck_store *s, const char *key, uint64_t *size)
{
	return s->ops->stat(s, key, size);
}
static inline int ck_store_list(struct ck_store *s, const char *prefix, ck_store_list_cb cb, void *arg)
{
	return s->ops->list(s, prefix, cb, arg);
}
static inline int ck_store_del(struct ck_store *s, const char *key)
{
	return s->ops->del(s, key);
}
static inline int ck_store_sweep(struct ck_store *s, const char *dir, unsigned *n)
{
	*n = 0;
	return s->ops->sweep ? s->ops->sweep(s, dir, n) : 0;
}
static inline int ck_store_probe(struct ck_store *s)
{
	return s->ops->probe ? s->ops->probe(s) : 0;
}

#endif
