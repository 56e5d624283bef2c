/* A file whose pages a checkpoint maps instead of storing them (the
 * manifest's FILE table): its content digest, taken once, and the check a
 * restore (and ckpt, before it reads such pages) makes of the file found
 * under the recorded path.
 *
 * The digest is what makes a copy trustworthy: the same inode, size,
 * mtime and ctime are taken as the file itself without reading it (the
 * fast path, every local restore); anything else (a copy at another site,
 * a file touched or rewritten in place) is read and must hash to the
 * recorded SHA-256. Manifests without digests (older, or a file that
 * changed while it was read) keep the identity rules: the recorded size
 * and mtime, and the ctime where it is the same inode. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/mfile.h"

#define CK__READ (1u << 20)
/* Larger files (a mapped dataset) get no digest: reading them whole at a
 * checkpoint would cost more than it protects; the identity rules stay. */
#define CK__DIGEST_MAX (4ull << 30)

static int64_t ck__ns(struct timespec t)
{
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int ck__same_id(const struct ck_mfile *f, const struct stat *st)
{
	return (uint64_t)st->st_dev == f->dev && (uint64_t)st->st_ino == f->ino && (uint64_t)st->st_size == f->size &&
	       ck__ns(st->st_mtim) == f->mtime_ns && ck__ns(st->st_ctim) == f->ctime_ns;
}

/* SHA-256 of everything fd holds from offset 0; -ECANCELED once *cancel
 * is set. */
static int ck__sha256_fd(int fd, uint8_t out[CK_HASH_LEN], const int *cancel)
{
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	uint8_t *buf = malloc(CK__READ);
	off_t off = 0;
	int r = -ENOMEM;

	if (!x || !buf)
		goto out;
	r = -EIO;
	if (!EVP_DigestInit_ex(x, EVP_sha256(), NULL))
		goto out;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (;;) {
		ssize_t n;
		if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
			r = -ECANCELED;
			goto out;
		}
		n = pread(fd, buf, CK__READ, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		if (!EVP_DigestUpdate(x, buf, (size_t)n))
			goto out;
		off += n;
	}
	r = EVP_DigestFinal_ex(x, out, NULL) ? 0 : -EIO;
out:
	free(buf);
	EVP_MD_CTX_free(x);
	return r;
}

int ck_mfile_digest(struct ck_mfile *f, const int *cancel)
{
	struct stat a, b;
	uint8_t d[CK_HASH_LEN];
	int fd, r;

	f->has_digest = 0;
	if (f->size > CK__DIGEST_MAX)
		return 0;
	/* O_NONBLOCK: a FIFO put at the path since must not block the open */
	fd = open(f->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return 0; /* gone since the cut: the identity rules stay */
	r = 0;
	if (fstat(fd, &a) < 0 || !S_ISREG(a.st_mode) || !ck__same_id(f, &a))
		goto out;
	if ((r = ck__sha256_fd(fd, d, cancel)) < 0)
		goto out;
	/* a write while it was read: no digest rather than a wrong one */
	if (fstat(fd, &b) == 0 && ck__same_id(f, &b)) {
		memcpy(f->digest, d, CK_HASH_LEN);
		f->has_digest = 1;
	}
out:
	close(fd);
	return r == -ENOMEM ? r : 0;
}

int ck_mfile_reuse(struct ck_mfile *f, const struct ck_manifest *prev)
{
	for (size_t i = 0; prev && i < prev->nfiles; i++) {
		const struct ck_mfile *p = &prev->files[i];
		if (p->has_digest && p->dev == f->dev && p->ino == f->ino && p->size == f->size &&
		    p->mtime_ns == f->mtime_ns && p->ctime_ns == f->ctime_ns && !strcmp(p->path, f->path)) {
			memcpy(f->digest, p->digest, CK_HASH_LEN);
			f->has_digest = 1;
			return 1;
		}
	}
	return 0;
}

static void ck__when(char *s, size_t n, int64_t ns)
{
	snprintf(s, n, "%" PRId64 ".%09" PRId64, ns / 1000000000, ns % 1000000000);
}

/* Without a digest: the recorded size and mtime, and the ctime where it
 * is the same inode (touch -d cannot set a ctime back). */
static int ck__check_identity(int32_t pid, const struct ck_mfile *f, const char *path, const struct stat *st)
{
	char now[40], then[40];

	if (ck__ns(st->st_mtim) != f->mtime_ns) {
		ck__when(now, sizeof(now), ck__ns(st->st_mtim));
		ck__when(then, sizeof(then), f->mtime_ns);
		ck_err_set("process %d: %s, whose pages it maps privately, changed since the checkpoint: modified "
			   "at %s, %s then",
			   pid, path, now, then);
		return -ENXIO;
	}
	if ((uint64_t)st->st_dev == f->dev && (uint64_t)st->st_ino == f->ino && ck__ns(st->st_ctim) != f->ctime_ns) {
		ck__when(now, sizeof(now), ck__ns(st->st_ctim));
		ck_err_set("process %d: %s, whose pages it maps privately, changed since the checkpoint: its inode "
			   "changed at %s (its size and modification time are as they were)",
			   pid, path, now);
		return -ENXIO;
	}
	return 0;
}

int ck_mfile_check(int32_t pid, const struct ck_mfile *f, const char *path)
{
	uint8_t d[CK_HASH_LEN];
	struct stat st;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0) {
		ck_err_set("process %d: %s, whose pages it maps privately, is not here (%s)", pid, path,
			   strerror(errno));
		r = -ENXIO;
		goto out;
	}
	r = -ENXIO;
	if (!S_ISREG(st.st_mode)) {
		ck_err_set("process %d: %s, whose pages it maps privately, is no longer a regular file", pid, path);
		goto out;
	}
	if ((uint64_t)st.st_size != f->size) {
		ck_err_set("process %d: %s, whose pages it maps privately, changed since the checkpoint: %" PRIu64
			   " bytes, %" PRIu64 " then",
			   pid, path, (uint64_t)st.st_size, f->size);
		goto out;
	}
	if (ck__same_id(f, &st)) {
		r = 0;
		goto out;
	}
	if (!f->has_digest) {
		r = ck__check_identity(pid, f, path, &st);
		goto out;
	}
	if ((r = ck__sha256_fd(fd, d, NULL)) < 0) {
		ck_err_set("process %d: %s, whose pages it maps privately, cannot be read (%s)", pid, path,
			   strerror(-r));
		r = -ENXIO;
		goto out;
	}
	r = 0;
	if (memcmp(d, f->digest, CK_HASH_LEN)) {
		ck_err_set("process %d: %s, whose pages it maps privately, changed since the checkpoint: its "
			   "contents differ (SHA-256), though it has the size it had",
			   pid, path);
		r = -ENXIO;
	}
out:
	if (fd >= 0)
		close(fd);
	return r;
}
