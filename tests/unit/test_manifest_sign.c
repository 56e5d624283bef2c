/* Signed manifests (--sign-key): a key's manifests decode with it; an
 * unsigned one, one signed with another key, or one altered and re-
 * checksummed is refused; without a key both kinds decode; keys others
 * may read are refused. Its own program: the key is per process. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/manifest.h"
#include "tests/unit/sample_manifest.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

static char *key_file(const char *dir, const char *name, const char *bytes, mode_t mode)
{
	char *path;
	int fd;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		exit(1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, bytes, strlen(bytes)) != (ssize_t)strlen(bytes))
		exit(1);
	close(fd);
	chmod(path, mode);
	return path;
}

/* Re-seals buf's SHA-256 trailer after a change: what a forger can do. */
static void reseal(unsigned char *buf, size_t len)
{
	EVP_Digest(buf, len - 32, buf + len - 32, NULL, EVP_sha256(), NULL);
}

void ck_unit_run(void)
{
	char *dir = ck_unit_tmpdir();
	char *k1 = key_file(dir, "k1", "0123456789abcdef-first-key", 0600);
	char *k2 = key_file(dir, "k2", "0123456789abcdef-other-key", 0600);
	char *kopen = key_file(dir, "kopen", "0123456789abcdef-world-read", 0644);
	char *kshort = key_file(dir, "kshort", "short", 0600);
	struct ck_manifest *m = ck_unit_sample_manifest(), *d = NULL;
	void *plain = NULL, *sig1 = NULL;
	size_t plainlen = 0, sig1len = 0;

	CHECK_EQ_INT(ck_manifest_encode(m, &plain, &plainlen), 0);
	/* keys others may read, or too short, are refused */
	CHECK_EQ_INT(ck_manifest_sign_key_load(kopen), -EPERM);
	CHECK(strstr(ck_err_msg(), "chmod 600") != NULL);
	CHECK_EQ_INT(ck_manifest_sign_key_load(kshort), -EINVAL);
	CHECK(!ck_manifest_signing());

	CHECK_EQ_INT(ck_manifest_sign_key_load(k1), 0);
	CHECK(ck_manifest_signing());
	CHECK_EQ_INT(ck_manifest_encode(m, &sig1, &sig1len), 0);
	CHECK_EQ_INT(sig1len, plainlen + 32);
	CHECK_EQ_INT(ck_manifest_decode(sig1, sig1len, &d), 0);
	CHECK(d && d->seq == m->seq && d->nchunks == m->nchunks);
	ck_manifest_free(d);
	d = NULL;
	/* unsigned, with a key: refused */
	CHECK_EQ_INT(ck_manifest_decode(plain, plainlen, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "not signed") != NULL);
	/* altered and re-sealed: refused */
	{
		unsigned char *x = malloc(sig1len);
		memcpy(x, sig1, sig1len);
		x[8 + 16] ^= 1; /* seq */
		reseal(x, sig1len);
		CHECK_EQ_INT(ck_manifest_decode(x, sig1len, &d), -EBADMSG);
		CHECK(strstr(ck_err_msg(), "signature does not match") != NULL);
		free(x);
	}
	/* another key: refused */
	CHECK_EQ_INT(ck_manifest_sign_key_load(k2), 0);
	CHECK_EQ_INT(ck_manifest_decode(sig1, sig1len, &d), -EBADMSG);
	CHECK(strstr(ck_err_msg(), "signature does not match") != NULL);
	/* a signed one stripped of its flag is caught by the checksum, and
	 * stripped and re-sealed is just unsigned: refused with a key */
	{
		unsigned char *x = malloc(sig1len);
		memcpy(x, sig1, sig1len);
		x[8 + 68] = 0; /* flags */
		CHECK_EQ_INT(ck_manifest_decode(x, sig1len, &d), -EBADMSG);
		free(x);
	}
	CHECK(d == NULL);
	ck_manifest_free(m);
	free(plain);
	free(sig1);
	free(k1);
	free(k2);
	free(kopen);
	free(kshort);
	ck_unit_rmtree(dir);
}
