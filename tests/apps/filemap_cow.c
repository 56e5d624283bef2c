/* filemap_cow: a read-only private file mapping some of whose pages are
 * the program's own, the way ld.so leaves a library's RELRO.
 *
 * State exercised: pages of a private mapping that are still the file's
 * (read, or never touched) beside copy-on-write copies made through a
 * brief mprotect(PROT_READ | PROT_WRITE): one rewritten with zeros, one
 * with the very bytes the file holds there (still the program's copy),
 * others with new bytes. A second mapping of the same file at another
 * offset is only read (its page table may be empty in a forked snapshot).
 * The descriptor is closed: the mappings alone hold the file. A restore
 * that took the file's pages for the program's (or lost a copy) fails the
 * checks: every page is compared with what it must hold.
 *
 * The file is never written after it is made, so a restore after any
 * later step finds it as it was.
 * Usage: filemap_cow [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define NPAGES 512 /* 2 MiB file */
#define FSIZE ((size_t)PAGE * NPAGES)
#define WRITABLE 64 /* pages [0, WRITABLE) of A may get copies */
#define READ_UPTO 448 /* pages at or past it stay untouched until the end */
#define B_OFF 128     /* mapping B: file pages [B_OFF, B_OFF + B_PAGES) */
#define B_PAGES 256

enum { ST_FILE, ST_ZERO, ST_SAME, ST_OWN };

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static void fill(uint64_t *p, uint64_t seed)
{
	for (size_t i = 0; i < PAGE / 8; i++)
		p[i] = mix(seed * 4096 + i);
}

static int check_fill(const volatile uint64_t *p, uint64_t seed)
{
	for (size_t i = 0; i < PAGE / 8; i++)
		if (p[i] != mix(seed * 4096 + i))
			return 0;
	return 1;
}

static int check_zero(const volatile uint64_t *p)
{
	for (size_t i = 0; i < PAGE / 8; i++)
		if (p[i])
			return 0;
	return 1;
}

/* state[k], seed[k]: what page k of mapping A holds */
static uint8_t state[NPAGES];
static uint64_t seed[NPAGES];

static int check_a(const uint64_t *a, int k)
{
	const uint64_t *p = a + (size_t)k * PAGE / 8;

	switch (state[k]) {
	case ST_ZERO: return check_zero(p);
	case ST_OWN: return check_fill(p, seed[k]);
	default: return check_fill(p, (uint64_t)k); /* the file's bytes (ST_SAME too) */
	}
}

/* A copy-on-write write to page k of A, as RELRO processing does it. */
static int write_a(uint64_t *a, int k, int kind, uint64_t s)
{
	uint64_t *p = a + (size_t)k * PAGE / 8;

	if (mprotect(p, PAGE, PROT_READ | PROT_WRITE) != 0)
		return -1;
	if (kind == ST_ZERO)
		memset(p, 0, PAGE);
	else if (kind == ST_SAME)
		fill(p, (uint64_t)k);
	else
		fill(p, s);
	state[k] = (uint8_t)kind;
	seed[k] = s;
	return mprotect(p, PAGE, PROT_READ);
}

#define FAIL(...) do { printf("FAIL " __VA_ARGS__); printf("\n"); rc = 1; goto out; } while (0)

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[4096], path[4200];
	long steps = (long)(1500000 * app_scale(argc, argv));
	static uint64_t page[PAGE / 8];
	uint64_t *a = MAP_FAILED, *b = MAP_FAILED, h = 0;
	int fd = -1, rc = 0;

	snprintf(dir, sizeof(dir), "%s/filemap_cow.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp in %s\n", tmp);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/lib.dat", dir);
	printf("filemap_cow: a file of %zu KiB mapped read-only twice, %ld steps\n", FSIZE / 1024, steps);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		FAIL("open");
	for (int i = 0; i < NPAGES; i++) {
		fill(page, (uint64_t)i);
		if (pwrite(fd, page, PAGE, (off_t)i * PAGE) != PAGE)
			FAIL("pwrite");
	}
	a = mmap(NULL, FSIZE, PROT_READ, MAP_PRIVATE, fd, 0);
	b = mmap(NULL, (size_t)B_PAGES * PAGE, PROT_READ, MAP_PRIVATE, fd, (off_t)B_OFF * PAGE);
	if (a == MAP_FAILED || b == MAP_FAILED)
		FAIL("mmap");
	close(fd);
	fd = -1;
	if (write_a(a, 5, ST_ZERO, 0) || write_a(a, 6, ST_SAME, 0) || write_a(a, 7, ST_OWN, 7000000))
		FAIL("mprotect");

	for (long s = 0; s < steps; s++) {
		int k = (int)(mix((uint64_t)s) % READ_UPTO);

		if (s % 397 == 0 && k < WRITABLE && write_a(a, k, ST_ZERO + (int)(mix((uint64_t)s + 1) % 3),
							    1000000 + (uint64_t)s))
			FAIL("step %ld: mprotect", s);
		if (!check_a(a, k))
			FAIL("step %ld: page %d of A (state %d) wrong", s, k, state[k]);
		if (s % 3 == 0) {
			int q = (int)(mix((uint64_t)s + 5) % (B_PAGES / 2)); /* B's first half only */
			if (!check_fill(b + (size_t)q * PAGE / 8, (uint64_t)(B_OFF + q)))
				FAIL("step %ld: page %d of B wrong", s, q);
		}
		if (s % 20000 == 0)
			for (int i = 0; i < READ_UPTO; i++)
				if (!check_a(a, i))
					FAIL("step %ld: page %d of A (state %d) wrong", s, i, state[i]);
		if ((s + 1) % (steps / 10 > 0 ? steps / 10 : 1) == 0)
			printf("step %ld: ok\n", s + 1);
	}
	for (int i = 0; i < NPAGES; i++) {
		if (!check_a(a, i))
			FAIL("end: page %d of A (state %d) wrong", i, state[i]);
		h = mix(h ^ a[(size_t)i * PAGE / 8 + 3]);
	}
	for (int i = 0; i < B_PAGES; i++)
		if (!check_fill(b + (size_t)i * PAGE / 8, (uint64_t)(B_OFF + i)))
			FAIL("end: page %d of B wrong", i);
	printf("mapping hash %016llx\n", (unsigned long long)h);
out:
	if (a != MAP_FAILED)
		munmap(a, FSIZE);
	if (b != MAP_FAILED)
		munmap(b, (size_t)B_PAGES * PAGE);
	if (fd >= 0)
		close(fd);
	unlink(path);
	rmdir(dir);
	printf("filemap_cow: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
