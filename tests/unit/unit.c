#include "tests/unit/unit.h"

int ck_unit_failures;

int main(void)
{
	ck_unit_run();
	if (ck_unit_failures) {
		fprintf(stderr, "%d check(s) failed\n", ck_unit_failures);
		return 1;
	}
	return 0;
}

void *ck_unit_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}
