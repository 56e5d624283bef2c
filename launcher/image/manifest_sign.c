/* Signed manifests (--sign-key): an HMAC-SHA-256 over the manifest, with a
 * key that lives outside the store, so that a store that others can write
 * (a shared bucket, a site an operator moves jobs through) cannot hand a
 * resume a checkpoint the key's holder did not commit.
 *
 * One key per process (ckrun and ckpt work for one job at a time). When a
 * key is set, every manifest encoded is signed, and every manifest decoded
 * must carry a signature made with it. The format is in FORMAT.md
 * ("Signed manifests"). */
#include "launcher/image/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"

#define CK__KEY_MIN 16
#define CK__KEY_MAX 4096

static unsigned char ck__key[CK__KEY_MAX];
static size_t ck__key_len;

int ck_manifest_sign_key_load(const char *path)
{
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		ck_err_set("signing key %s: %s", path, strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		ck_err_set("signing key %s: not a regular file", path);
		rc = -EINVAL;
		goto out;
	}
	/* A key others can read signs nothing: refuse it, as ssh does. */
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		ck_err_set("signing key %s: must be owned by you and readable by you alone (chmod 600)", path);
		rc = -EPERM;
		goto out;
	}
	n = read(fd, ck__key, sizeof(ck__key));
	if (n < CK__KEY_MIN || (size_t)n >= sizeof(ck__key)) {
		ck_err_set("signing key %s: %zd bytes; want %d to %d (e.g. head -c 32 /dev/urandom)", path, n,
			   CK__KEY_MIN, CK__KEY_MAX - 1);
		OPENSSL_cleanse(ck__key, sizeof(ck__key));
		rc = -EINVAL;
		goto out;
	}
	ck__key_len = (size_t)n;
out:
	close(fd);
	return rc;
}

int ck_manifest_signing(void)
{
	return ck__key_len > 0;
}

int ck_manifest_mac(const void *buf, size_t len, unsigned char mac[CK_HASH_LEN])
{
	unsigned int maclen = CK_HASH_LEN;

	if (!HMAC(EVP_sha256(), ck__key, (int)ck__key_len, buf, len, mac, &maclen) || maclen != CK_HASH_LEN) {
		ck_err_set("manifest: HMAC-SHA-256 failed");
		return -EIO;
	}
	return 0;
}

int ck_manifest_mac_check(const void *buf, size_t len, const unsigned char mac[CK_HASH_LEN])
{
	unsigned char want[CK_HASH_LEN];
	int rc = ck_manifest_mac(buf, len, want);

	if (rc < 0)
		return rc;
	return CRYPTO_memcmp(want, mac, CK_HASH_LEN) ? -EBADMSG : 0;
}
