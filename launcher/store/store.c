/* Store URI dispatch: picks the backend for a URI. */
#include "launcher/store/store.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

int ck_store_open(const char *uri, const struct ck_store_opts *opts, struct ck_store **out)
{
	static const struct ck_store_opts none;

	*out = NULL;
	if (!opts)
		opts = &none;
	if (!uri || !*uri) {
		ck_err_set("store: empty store URI");
		return -EINVAL;
	}
	if (!strncmp(uri, "file://", 7)) {
		const char *dir = uri + 7;

		/* Only the empty authority is meaningful: file:///abs/dir. */
		if (dir[0] != '/') {
			ck_err_set("store %s: a file URI needs an absolute path (file:///abs/dir)", uri);
			return -EINVAL;
		}
		return ck_store_file_open_uri(dir, uri, out);
	}
	if (!strncmp(uri, "s3://", 5)) {
		if (!ck_store_s3_open) {
			ck_err_set("store %s: this build has no S3 support", uri);
			return -ENOTSUP;
		}
		return ck_store_s3_open(uri, opts, out);
	}
	/* A scheme we do not know is an error, not a relative directory. */
	if (strstr(uri, "://")) {
		ck_err_set("store %s: unknown store scheme (use file:///DIR, a path, or s3://BUCKET/PREFIX)", uri);
		return -EINVAL;
	}
	return ck_store_file_open_uri(uri, uri, out);
}

void ck_store_close(struct ck_store *s)
{
	if (s)
		s->ops->close(s);
}
