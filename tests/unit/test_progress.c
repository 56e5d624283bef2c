/* The progress line's text (launcher/common/progress.c): bytes, share,
 * rate and ETA; no rate or ETA from the first instants; "done" at the end;
 * no total; long ETAs. */
#include <string.h>

#include "launcher/common/progress.h"
#include "tests/unit/unit.h"

#define MIB (1024ull * 1024)
#define SEC 1000000000ull

static const char *line(uint64_t total, uint64_t done, uint64_t ns)
{
	static char buf[256];
	struct ck_progress p;

	memset(&p, 0, sizeof(p));
	strcpy(p.what, "restore j@3");
	p.total = total;
	p.done = done;
	p.t0_ns = 5 * SEC; /* any start: only the difference counts */
	ck_progress_format(&p, 5 * SEC + ns, buf, sizeof(buf));
	return buf;
}

void ck_unit_run(void)
{
	struct ck_progress p;

	CHECK_EQ_STR(line(100 * MIB, 50 * MIB, SEC), "restore j@3: 50.0 MiB of 100.0 MiB (50%), 50.0 MiB/s, ETA 1s");
	CHECK_EQ_STR(line(100 * MIB, 8192, SEC / 10), "restore j@3: 8.0 KiB of 100.0 MiB (0%), - B/s, ETA -");
	CHECK_EQ_STR(line(100 * MIB, 100 * MIB, SEC / 10), "restore j@3: 100.0 MiB of 100.0 MiB (100%), 1000.0 MiB/s, done");
	CHECK_EQ_STR(line(0, 1024, SEC), "restore j@3: 1.0 KiB, 1.0 KiB/s");
	CHECK_EQ_STR(line(1000 * MIB, 8 * MIB, 8 * SEC), "restore j@3: 8.0 MiB of 1000.0 MiB (0%), 1.0 MiB/s, ETA 16m32s");
	CHECK_EQ_STR(line(10000 * MIB, MIB, SEC), "restore j@3: 1.0 MiB of 9.8 GiB (0%), 1.0 MiB/s, ETA 2h46m");
	CHECK_EQ_STR(line(500, 499, SEC), "restore j@3: 499 B of 500 B (99%), 499 B/s, ETA 0s");

	/* stderr is not a terminal here (run-unit.sh logs it): nothing drawn */
	ck_progress_start(&p, "x", 10);
	if (!p.on) {
		ck_progress_set(&p, 10);
		CHECK_EQ_INT(p.shown, 0);
	}
	ck_progress_add(NULL, 1); /* a reader without a progress line */
	ck_progress_end(&p);
}
