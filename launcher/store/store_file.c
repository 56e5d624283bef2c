/* File store: key K of store DIR is the file DIR/K.
 *
 * Objects appear atomically: a put writes a hidden temporary file in the
 * target's directory, fsyncs it, renames it over the key and fsyncs the
 * directory, so a crash leaves the old object, no object, or the whole new
 * one. Directories are created 0700 and files 0600: images hold job memory.
 * The store's directory and the directories of its keys must be real
 * directories of this user: a symbolic link or another user's directory
 * is refused before anything is read or written there (a manifest another
 * user could write is an image that user chooses).
 * Handles hold no mutable state, so every operation is thread-safe. */
#include "launcher/store/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"

struct ck__fstore {
	struct ck_store base;
	char *dir; /* without trailing '/' (except for "/") */
};

static atomic_uint ck__tmp_counter;

static struct ck__fstore *fs_of(struct ck_store *s)
{
	return (struct ck__fstore *)s;
}

int ck_store_key_valid(const char *key)
{
	const char *p = key;

	if (!key || !*key || strlen(key) >= PATH_MAX / 2)
		return 0;
	/* Every component non-empty and not starting with '.': this rules out
	 * ".", ".." and our own hidden temporary files. */
	for (;;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n == 0 || p[0] == '.')
			return 0;
		if (!e)
			return 1;
		p = e + 1;
	}
}

/* A directory of the store (path) must be a directory, not a symbolic
 * link, and this user's. A missing one is fine: a writer creates it. 1 if
 * it exists, 0 if not, else -errno with a message. */
static int check_dir(struct ck__fstore *fs, const char *path, const char *op, const char *key)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR) {
			ck_err_set("store %s: %s %s: %s: a part of it is not a directory", fs->base.uri, op, key, path);
			return -ENOTDIR;
		}
		ck_err_set("store %s: %s %s: %s: %s", fs->base.uri, op, key, path, strerror(errno));
		return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		ck_err_set("store %s: %s %s: %s is a symbolic link: refusing it (give the real directory)",
			   fs->base.uri, op, key, path);
		return -EPERM;
	}
	if (!S_ISDIR(st.st_mode)) {
		ck_err_set("store %s: %s %s: %s is not a directory", fs->base.uri, op, key, path);
		return -ENOTDIR;
	}
	if (st.st_uid != geteuid()) {
		ck_err_set("store %s: %s %s: %s is owned by uid %u, not by this user (uid %u): refusing it",
			   fs->base.uri, op, key, path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	return 1;
}

/* Checks the store's directory and every directory on the way to key (or,
 * for a listing, to the prefix: up to its last '/'). */
static int check_dirs(struct ck__fstore *fs, const char *op, const char *key)
{
	char path[PATH_MAX];
	size_t base = strlen(fs->dir);
	const char *p;
	int rc;

	if (strcmp(fs->dir, "/") && (rc = check_dir(fs, fs->dir, op, key)) <= 0)
		return rc;
	if (base + strlen(key) + 2 > sizeof(path))
		return 0; /* fs_path reports it */
	memcpy(path, fs->dir, base);
	path[base] = '/';
	for (p = strchr(key, '/'); p; p = strchr(p + 1, '/')) {
		memcpy(path + base + 1, key, (size_t)(p - key));
		path[base + 1 + (p - key)] = 0;
		if ((rc = check_dir(fs, path, op, key)) <= 0)
			return rc;
	}
	return 0;
}

static int fs_path(struct ck__fstore *fs, const char *op, const char *key, char *buf, size_t len)
{
	int n;

	if (!ck_store_key_valid(key)) {
		ck_err_set("store %s: %s: invalid key \"%s\"", fs->base.uri, op, key ? key : "");
		return -EINVAL;
	}
	n = snprintf(buf, len, "%s/%s", strcmp(fs->dir, "/") ? fs->dir : "", key);
	if (n < 0 || (size_t)n >= len) {
		ck_err_set("store %s: %s %s: path too long", fs->base.uri, op, key);
		return -ENAMETOOLONG;
	}
	n = check_dirs(fs, op, key);
	return n < 0 ? n : 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0 && errno != EINVAL)
		rc = -errno;
	close(fd);
	return rc;
}

/* Creates every missing directory of path up to (not including) its last
 * component, 0700, and makes each new entry durable in its parent. */
static int mkdir_parents(char *path)
{
	char *p = path + 1;
	int rc;

	for (;;) {
		char *slash = strchr(p, '/');

		if (!slash)
			return 0;
		*slash = 0;
		if (mkdir(path, 0700) == 0) {
			char *up = strrchr(path, '/');

			if (up == path) {
				rc = fsync_dir("/");
			} else {
				*up = 0;
				rc = fsync_dir(path);
				*up = '/';
			}
			if (rc < 0) {
				*slash = '/';
				return rc;
			}
		} else if (errno != EEXIST) {
			rc = -errno;
			*slash = '/';
			return rc;
		}
		*slash = '/';
		p = slash + 1;
	}
}

static int write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Large aligned buffers (the chunk writer's packs) are written with
 * O_DIRECT: no page cache pages to allocate and copy into (the writer's
 * main CPU cost after compression), and a checkpoint does not push the
 * job's own files out of the cache. The unaligned tail, and any file
 * system that refuses O_DIRECT, go through the cache as usual. */
#define CK__DIRECT_MIN (1u << 20)
#define CK__DIRECT_ALIGN 4096u

static int write_object(int fd, const void *buf, size_t len)
{
	size_t head = len & ~(size_t)(CK__DIRECT_ALIGN - 1);
	int fl, rc;

	if (len < CK__DIRECT_MIN || ((uintptr_t)buf & (CK__DIRECT_ALIGN - 1)))
		return write_all(fd, buf, len);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0)
		return write_all(fd, buf, len);
	rc = write_all(fd, buf, head);
	fcntl(fd, F_SETFL, fl);
	if (rc == -EINVAL) { /* O_DIRECT not for this file system after all */
		if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		return write_all(fd, buf, len);
	}
	if (rc < 0)
		return rc;
	return write_all(fd, (const char *)buf + head, len - head);
}

/* Temporary names no other writer produces, on this host or another
 * sharing the file system (a pid is neither). */
static uint64_t tmp_id(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^ ((uint64_t)atomic_fetch_add(&ck__tmp_counter, 1) << 48);
	return v;
}

static int fs_put(struct ck_store *s, const char *key, const void *buf, size_t len, unsigned flags)
{
	struct ck__fstore *fs = fs_of(s);
	char path[PATH_MAX], tmp[PATH_MAX], dir[PATH_MAX];
	const char *what = "create";
	char *slash;
	int fd = -1, rc;

	rc = fs_path(fs, "put", key, path, sizeof(path));
	if (rc < 0)
		return rc;
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	*slash = 0;
	if (snprintf(tmp, sizeof(tmp), "%s/.%s.tmp-%016llx", dir, slash + 1, (unsigned long long)tmp_id()) >=
	    (int)sizeof(tmp)) {
		ck_err_set("store %s: put %s: path too long", s->uri, key);
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		/* First object in this directory: create the missing ones. */
		rc = mkdir_parents(path);
		if (rc < 0) {
			what = "create directory";
			goto out;
		}
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	what = "write";
	rc = write_object(fd, buf, len);
	if (rc < 0)
		goto out;
	what = "sync";
	if (fsync(fd) < 0) {
		rc = -errno;
		goto out;
	}
	what = "close";
	rc = close(fd);
	fd = -1;
	if (rc < 0) {
		rc = -errno;
		goto out;
	}
	what = "rename";
	if (flags & CK_PUT_NOREPLACE) {
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0) {
			rc = -errno;
			/* Some file systems lack RENAME_NOREPLACE; link() also
			 * refuses to replace an existing name. */
			if (rc == -EINVAL || rc == -ENOSYS) {
				rc = link(tmp, path) < 0 ? -errno : 0;
				unlink(tmp);
			}
			if (rc < 0)
				goto out;
		}
	} else if (flags & CK_PUT_NEW) {
		/* A pack's name is its writer's own: never replace one. */
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) < 0) {
			rc = -errno;
			if (rc == -EINVAL || rc == -ENOSYS)
				rc = rename(tmp, path) < 0 ? -errno : 0;
			if (rc < 0)
				goto out;
		}
	} else if (rename(tmp, path) < 0) {
		rc = -errno;
		goto out;
	}
	what = "sync directory";
	rc = fsync_dir(dir);
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0) {
		unlink(tmp);
		if (rc == -EEXIST)
			ck_err_set("store %s: put %s: object already exists", s->uri, key);
		else
			ck_err_set("store %s: put %s: %s: %s", s->uri, key, what, strerror(-rc));
	}
	return rc;
}

static int fs_open_read(struct ck_store *s, const char *key, const char *op, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	rc = fs_path(fs_of(s), op, key, path, sizeof(path));
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ELOOP) {
			ck_err_set("store %s: %s %s: a symbolic link, not an object: refusing it", s->uri, op, key);
			return -EPERM;
		}
		ck_err_set("store %s: %s %s: %s", s->uri, op, key, rc == -ENOENT ? "no such object" : strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0)
		st.st_mode = 0;
	if (!S_ISREG(st.st_mode)) {
		rc = S_ISDIR(st.st_mode) ? -ENOENT : -EIO;
		ck_err_set("store %s: %s %s: not an object", s->uri, op, key);
		close(fd);
		return rc;
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

static int read_at(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
	char *p = buf;

	*got = 0;
	while (*got < len) {
		ssize_t n = pread(fd, p + *got, len - *got, (off_t)(off + *got));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return 0;
}

/* Whether the page cache holds every page of [off, off+len) (cachestat,
 * Linux 6.5; no side effects, unlike a RWF_NOWAIT read, which starts
 * readahead). Such pages are warm and cheap to copy, and a direct read
 * would write back dirty ones first: a store just written by another tool
 * (aws s3 cp, rsync) reads from the cache. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
static int all_cached(int fd, uint64_t off, size_t len)
{
	struct {
		uint64_t off, len;
	} range = {off, len};
	struct {
		uint64_t cache, dirty, writeback, evicted, recently_evicted;
	} cs;
	uint64_t pages = (off % 4096 + len + 4095) / 4096;

	if (syscall(__NR_cachestat, fd, &range, &cs, 0) < 0)
		return 0; /* older kernel: read direct */
	return cs.cache >= pages;
}

/* Aligned ranged reads (the chunk reader's spans) go past the page cache
 * like the writer's packs: on a VM each fresh cache page is a trip to the
 * host, and copying 2 GiB out of a cold cache took 3.2 s of a 4 GiB
 * restore's CPU here; with O_DIRECT the device writes into the reader's
 * buffers, which stay mapped. The unaligned tail, and a file system that
 * refuses O_DIRECT, read through the cache. */
static int read_direct(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
	size_t head = len & ~(size_t)(CK__DIRECT_ALIGN - 1), tail;
	int fl, rc;

	*got = 0;
	if (head < CK__DIRECT_ALIGN || ((uintptr_t)buf | off) & (CK__DIRECT_ALIGN - 1) || all_cached(fd, off, len))
		return read_at(fd, buf, len, off, got);
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0)
		return read_at(fd, buf, len, off, got);
	rc = read_at(fd, buf, head, off, got);
	fcntl(fd, F_SETFL, fl);
	if (rc == -EINVAL) /* O_DIRECT not for this file system after all */
		return read_at(fd, buf, len, off, got);
	if (rc < 0 || *got < head)
		return rc;
	rc = read_at(fd, (char *)buf + head, len - head, off + head, &tail);
	*got += tail;
	return rc;
}

static int fs_get_range(struct ck_store *s, const char *key, uint64_t off, void *buf, size_t len)
{
	uint64_t size;
	size_t got;
	int fd, rc;

	fd = fs_open_read(s, key, "read", &size);
	if (fd < 0)
		return fd;
	if (off > (uint64_t)INT64_MAX - len) { /* no file reaches there: past its end, as any other */
		close(fd);
		ck_err_set("store %s: read %s: object is %llu bytes, range %llu+%zu goes past its end", s->uri, key,
			   (unsigned long long)size, (unsigned long long)off, len);
		return -EIO;
	}
	rc = read_direct(fd, buf, len, off, &got);
	close(fd);
	if (rc < 0) {
		ck_err_set("store %s: read %s: %s", s->uri, key, strerror(-rc));
		return rc;
	}
	if (got < len) {
		ck_err_set("store %s: read %s: object is %llu bytes, range %llu+%zu goes past its end", s->uri, key,
			   (unsigned long long)size, (unsigned long long)off, len);
		return -EIO;
	}
	return 0;
}

static int fs_get(struct ck_store *s, const char *key, void **out, size_t *outlen)
{
	uint64_t size;
	size_t got;
	char *buf;
	int fd, rc;

	*out = NULL;
	*outlen = 0;
	fd = fs_open_read(s, key, "read", &size);
	if (fd < 0)
		return fd;
	if (size > SIZE_MAX - 1) {
		close(fd);
		ck_err_set("store %s: read %s: object too large", s->uri, key);
		return -EFBIG;
	}
	buf = malloc((size_t)size + 1);
	if (!buf) {
		close(fd);
		ck_err_set("store %s: read %s: out of memory for %llu bytes", s->uri, key, (unsigned long long)size);
		return -ENOMEM;
	}
	rc = read_at(fd, buf, (size_t)size, 0, &got);
	close(fd);
	if (rc == 0 && got != size)
		rc = -EIO;
	if (rc < 0) {
		free(buf);
		ck_err_set("store %s: read %s: %s", s->uri, key,
			   rc == -EIO ? "object changed size while being read" : strerror(-rc));
		return rc;
	}
	*out = buf;
	*outlen = got;
	return 0;
}

static int fs_stat(struct ck_store *s, const char *key, uint64_t *size)
{
	char path[PATH_MAX];
	struct stat st;
	int rc;

	rc = fs_path(fs_of(s), "stat", key, path, sizeof(path));
	if (rc < 0)
		return rc;
	if (stat(path, &st) < 0)
		rc = (errno == ENOENT || errno == ENOTDIR) ? -ENOENT : -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -ENOENT; /* a directory is no object */
	if (rc < 0) {
		ck_err_set("store %s: stat %s: %s", s->uri, key, rc == -ENOENT ? "no such object" : strerror(-rc));
		return rc;
	}
	*size = (uint64_t)st.st_size;
	return 0;
}

struct ck__keyent {
	char *key;
	uint64_t size;
};

struct ck__keyvec {
	struct ck__keyent *v;
	size_t n, cap;
};

static int keyvec_push(struct ck__keyvec *kv, const char *key, uint64_t size)
{
	if (kv->n == kv->cap) {
		size_t cap = kv->cap ? kv->cap * 2 : 64;
		struct ck__keyent *v = realloc(kv->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		kv->v = v;
		kv->cap = cap;
	}
	kv->v[kv->n].key = strdup(key);
	if (!kv->v[kv->n].key)
		return -ENOMEM;
	kv->v[kv->n++].size = size;
	return 0;
}

/* Collects the regular files under dirfd whose key (rel/name) starts with
 * prefix. rel is the key of the directory ("" for the root). */
static int walk(int dfd, char *rel, size_t rellen, const char *prefix, struct ck__keyvec *kv)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	while ((de = readdir(d))) {
		size_t nlen = strlen(de->d_name), cmp;
		struct stat st;

		if (de->d_name[0] == '.')
			continue; /* ".", "..", temporary files */
		if (rellen + nlen + 2 > PATH_MAX)
			continue;
		memcpy(rel + rellen, de->d_name, nlen + 1);
		/* Prune subtrees that cannot hold a matching key. */
		cmp = rellen + nlen < strlen(prefix) ? rellen + nlen : strlen(prefix);
		if (strncmp(rel, prefix, cmp))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed while we walk */
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

			if (sub < 0)
				continue;
			rel[rellen + nlen] = '/';
			rel[rellen + nlen + 1] = 0;
			rc = walk(sub, rel, rellen + nlen + 1, prefix, kv);
			if (rc < 0)
				break;
		} else if (S_ISREG(st.st_mode) && !strncmp(rel, prefix, strlen(prefix))) {
			rc = keyvec_push(kv, rel, (uint64_t)st.st_size);
			if (rc < 0)
				break;
		}
	}
	rel[rellen] = 0;
	closedir(d);
	return rc;
}

static int keyent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ck__keyent *)a)->key, ((const struct ck__keyent *)b)->key);
}

static int fs_list(struct ck_store *s, const char *prefix, ck_store_list_cb cb, void *arg)
{
	struct ck__fstore *fs = fs_of(s);
	struct ck__keyvec kv = {0};
	char rel[PATH_MAX] = "";
	size_t i;
	int fd, rc = 0;

	if (!prefix)
		prefix = "";
	if ((rc = check_dirs(fs, "list", prefix)) < 0)
		return rc;
	fd = open(fs->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0; /* a store nobody wrote to yet is empty */
		rc = -errno;
		ck_err_set("store %s: list %s: %s", s->uri, prefix, strerror(-rc));
		return rc;
	}
	rc = walk(fd, rel, 0, prefix, &kv);
	if (rc < 0) {
		ck_err_set("store %s: list %s: %s", s->uri, prefix, strerror(-rc));
		goto out;
	}
	if (kv.n)
		qsort(kv.v, kv.n, sizeof(*kv.v), keyent_cmp);
	for (i = 0; i < kv.n && rc == 0; i++)
		rc = cb(arg, kv.v[i].key, kv.v[i].size);
out:
	for (i = 0; i < kv.n; i++)
		free(kv.v[i].key);
	free(kv.v);
	return rc;
}

static int fs_del(struct ck_store *s, const char *key)
{
	char path[PATH_MAX];
	int rc;

	rc = fs_path(fs_of(s), "delete", key, path, sizeof(path));
	if (rc < 0)
		return rc;
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = -errno;
		ck_err_set("store %s: delete %s: %s", s->uri, key, strerror(-rc));
		return rc;
	}
	return 0;
}

static int fs_open_lock(struct ck_store *s, const char *key)
{
	char path[PATH_MAX];
	struct stat st;
	int fd, rc;

	rc = fs_path(fs_of(s), "lock", key, path, sizeof(path));
	if (rc < 0)
		return rc;
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		rc = mkdir_parents(path);
		if (rc < 0) {
			ck_err_set("store %s: lock %s: create directory: %s", s->uri, key, strerror(-rc));
			return rc;
		}
		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		rc = errno == ELOOP ? -EPERM : -errno;
		ck_err_set("store %s: lock %s: %s", s->uri, key,
			   rc == -EPERM ? "a symbolic link: refusing it" : strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		ck_err_set("store %s: lock %s: not a file of this user (uid %u): refusing it", s->uri, key,
			   (unsigned)geteuid());
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Temporaries are hidden files ".NAME.tmp-ID" beside their target. */
static int fs_sweep(struct ck_store *s, const char *prefix, unsigned *n)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int fd, rc;

	*n = 0;
	rc = fs_path(fs_of(s), "sweep", prefix, path, sizeof(path));
	if (rc < 0)
		return rc;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] != '.' || !strstr(de->d_name, ".tmp-"))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) == 0)
			++*n;
		else if (errno != ENOENT) {
			rc = -errno;
			ck_err_set("store %s: sweep %s%s: %s", s->uri, prefix, de->d_name, strerror(errno));
			break;
		}
	}
	closedir(d);
	return rc;
}

static int fs_probe(struct ck_store *s)
{
	struct ck__fstore *fs = fs_of(s);
	int rc = check_dir(fs, fs->dir, "open", "store");

	if (rc == 0) {
		ck_err_set("store %s: no such directory", s->uri);
		return -ENXIO;
	}
	return rc < 0 ? rc : 0;
}

static void fs_close(struct ck_store *s)
{
	struct ck__fstore *fs = fs_of(s);

	free(fs->dir);
	free(fs->base.uri);
	free(fs);
}

static const struct ck_store_ops ck__file_ops = {
	.scheme = "file",
	.put = fs_put,
	.get_range = fs_get_range,
	.get = fs_get,
	.stat = fs_stat,
	.list = fs_list,
	.del = fs_del,
	.close = fs_close,
	.open_lock = fs_open_lock,
	.sweep = fs_sweep,
	.probe = fs_probe,
};

int ck_store_file_open_uri(const char *dir, const char *uri, struct ck_store **out)
{
	struct ck__fstore *fs;
	size_t n;

	*out = NULL;
	if (!dir || !*dir) {
		ck_err_set("store %s: empty directory", uri ? uri : "");
		return -EINVAL;
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		goto nomem;
	fs->base.ops = &ck__file_ops;
	fs->base.read_align = CK__DIRECT_ALIGN;
	fs->base.uri = strdup(uri ? uri : dir);
	if (dir[0] == '/') {
		fs->dir = strdup(dir);
	} else {
		/* Relative paths are resolved now, so a later chdir does not
		 * move the store. */
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof(cwd))) {
			int rc = -errno;

			ck_err_set("store %s: cannot resolve relative path: %s", uri ? uri : dir, strerror(-rc));
			fs_close(&fs->base);
			return rc;
		}
		if (asprintf(&fs->dir, "%s/%s", cwd, dir) < 0)
			fs->dir = NULL;
	}
	if (!fs->base.uri || !fs->dir)
		goto nomem;
	n = strlen(fs->dir);
	while (n > 1 && fs->dir[n - 1] == '/')
		fs->dir[--n] = 0;
	*out = &fs->base;
	return 0;
nomem:
	if (fs)
		fs_close(&fs->base);
	ck_err_set("store %s: out of memory", uri ? uri : dir);
	return -ENOMEM;
}

int ck_store_file_open(const char *dir, struct ck_store **out)
{
	return ck_store_file_open_uri(dir, dir, out);
}
