/* Writes the golden manifest file of format version 1 to stdout. Run once
 * when the format version changes; the result is checked in and the unit
 * test compares against it:
 *   cc -D_GNU_SOURCE -I. tests/golden/mkgolden.c build/libcklaunch.a -lcrypto \
 *      -o build/mkgolden && build/mkgolden > tests/golden/manifest-v1.bin */
#include <stdio.h>

#include "launcher/ck_err.h"
#include "tests/unit/sample_manifest.h"

int main(void)
{
	struct ck_manifest *m = ck_unit_sample_manifest();
	void *buf;
	size_t len;

	if (ck_manifest_encode(m, &buf, &len) < 0) {
		fprintf(stderr, "mkgolden: %s\n", ck_err_msg());
		return 1;
	}
	fwrite(buf, 1, len, stdout);
	free(buf);
	ck_manifest_free(m);
	return 0;
}
