/* Writes the golden manifest file of format version 1 (no argument), or
 * with the argument "procdesc" the golden process descriptor of version 4
 * in its compact form, to stdout. Run once when a format version changes;
 * the result is checked in and the unit tests compare against it:
 *   cc -D_GNU_SOURCE -I. -Iinclude tests/golden/mkgolden.c build/libcklaunch.a -lcrypto \
 *      -o build/mkgolden && build/mkgolden > tests/golden/manifest-v1.bin
 *   build/mkgolden procdesc > tests/golden/procdesc-v4.bin */
#include <stdio.h>

#include "launcher/common/ck_err.h"
#include "tests/unit/sample_manifest.h"
#include "tests/unit/sample_procdesc.h"

static int procdesc(void)
{
	struct ck_procdesc *pd = ck_unit_sample_procdesc();
	uint8_t *buf;
	size_t len;

	if (!pd || ck_desc_pack(pd, &buf, &len) < 0) {
		fprintf(stderr, "mkgolden: cannot pack the process descriptor\n");
		return 1;
	}
	fwrite(buf, 1, len, stdout);
	free(buf);
	free(pd);
	return 0;
}

int main(int argc, char **argv)
{
	struct ck_manifest *m;
	void *buf;
	size_t len;

	if (argc > 1 && !strcmp(argv[1], "procdesc"))
		return procdesc();
	m = ck_unit_sample_manifest();

	if (ck_manifest_encode(m, &buf, &len) < 0) {
		fprintf(stderr, "mkgolden: %s\n", ck_err_msg());
		return 1;
	}
	fwrite(buf, 1, len, stdout);
	free(buf);
	ck_manifest_free(m);
	return 0;
}
