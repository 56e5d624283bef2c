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
