/* mmap_file: MAP_PRIVATE and MAP_SHARED mappings of regular files.
 *
 * State exercised: a private copy-on-write mapping of a file that is never
 * modified on disk (some pages written privately, the rest must still show
 * the file), and a shared mapping whose writes reach the file. The files live
 * in a temporary directory the program creates and removes.
 *
 * Rollback safety: a restore goes back to the checkpoint while the files on
 * disk keep later writes (no checkpointer rolls a regular file back). The
 * program therefore only reads shared pages it has just written in the same
 * step; a step whose check fails is written and checked once more, because
 * a checkpoint may have stopped it half-way through its page, which a later
 * step of a run killed afterwards rewrote. Before the whole-file check at the
 * end, every written page is written again with its last content, for the
 * same reason. The private file is read-only.
 * Usage: mmap_file [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096
#define NPAGES 1024 /* 4 MiB per file */
#define FSIZE ((size_t)PAGE * NPAGES)

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

static int check_page(const uint64_t *p, uint64_t seed)
{
	for (size_t i = 0; i < PAGE / 8; i++)
		if (p[i] != mix(seed * 4096 + i))
			return 0;
	return 1;
}

static int all_zero(const uint64_t *p)
{
	for (size_t i = 0; i < PAGE / 8; i++)
		if (p[i])
			return 0;
	return 1;
}

static uint64_t hash(const void *p, size_t n)
{
	const uint64_t *w = p;
	uint64_t h = 0;

	for (size_t i = 0; i < n / 8; i++)
		h = mix(h ^ w[i]);
	return h;
}

#define FAIL(...) do { printf("FAIL " __VA_ARGS__); printf("\n"); rc = 1; goto out; } while (0)

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char dir[4096], ppath[4200], spath[4200];
	long steps = (long)(900000 * app_scale(argc, argv));
	static uint64_t page[PAGE / 8], last_seed[NPAGES];
	uint64_t *priv = MAP_FAILED, *shr = MAP_FAILED;
	int pfd = -1, sfd = -1, rc = 0;

	snprintf(dir, sizeof(dir), "%s/mmap_file.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp in %s\n", tmp);
		return 1;
	}
	snprintf(ppath, sizeof(ppath), "%s/private.dat", dir);
	snprintf(spath, sizeof(spath), "%s/shared.dat", dir);
	printf("mmap_file: 2 files of %zu KiB, %ld steps\n", FSIZE / 1024, steps);

	pfd = open(ppath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	sfd = open(spath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (pfd < 0 || sfd < 0)
		FAIL("open");
	for (int i = 0; i < NPAGES; i++) {
		fill(page, (uint64_t)i);
		if (pwrite(pfd, page, PAGE, (off_t)i * PAGE) != PAGE)
			FAIL("pwrite");
	}
	if (ftruncate(sfd, FSIZE) != 0)
		FAIL("ftruncate");
	priv = mmap(NULL, FSIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE, pfd, 0);
	shr = mmap(NULL, FSIZE, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	if (priv == MAP_FAILED || shr == MAP_FAILED)
		FAIL("mmap");

	/* Private: every third page gets its own content (COW copies). */
	for (int i = 0; i < NPAGES; i += 3)
		fill(priv + (size_t)i * PAGE / 8, 1000000 + (uint64_t)i);

	for (long s = 0; s < steps; s++) {
		int pg = (int)(mix((uint64_t)s) % NPAGES);
		uint64_t seed = 2000000 + (uint64_t)s;

		fill(shr + (size_t)pg * PAGE / 8, seed);
		last_seed[pg] = seed + 1; /* 0 = never written */
		if (pread(sfd, page, PAGE, (off_t)pg * PAGE) != PAGE || !check_page(page, seed)) {
			fill(shr + (size_t)pg * PAGE / 8, seed); /* see "Rollback safety" */
			if (pread(sfd, page, PAGE, (off_t)pg * PAGE) != PAGE || !check_page(page, seed))
				FAIL("step %ld: shared page %d not visible through read()", s, pg);
		}
		if (s % 7 == 0) { /* the private mapping keeps its state meanwhile */
			int q = (int)(mix((uint64_t)s + 77) % NPAGES);
			uint64_t want = q % 3 == 0 ? 1000000 + (uint64_t)q : (uint64_t)q;
			if (!check_page(priv + (size_t)q * PAGE / 8, want))
				FAIL("step %ld: private page %d changed", s, q);
		}
		if ((s + 1) % (steps / 10 > 0 ? steps / 10 : 1) == 0)
			printf("step %ld: shared page %d ok\n", s + 1, pg);
	}
	for (int i = 0; i < NPAGES; i++)
		if (last_seed[i])
			fill(shr + (size_t)i * PAGE / 8, last_seed[i] - 1);
	if (msync(shr, FSIZE, MS_SYNC) != 0)
		FAIL("msync");

	/* Whole-file checks: the file on disk never saw the private writes and
	 * the shared file holds the last write to every page. */
	for (int i = 0; i < NPAGES; i++) {
		if (pread(pfd, page, PAGE, (off_t)i * PAGE) != PAGE || !check_page(page, (uint64_t)i))
			FAIL("private file page %d modified on disk", i);
		if (pread(sfd, page, PAGE, (off_t)i * PAGE) != PAGE)
			FAIL("pread shared");
		if (last_seed[i] ? !check_page(page, last_seed[i] - 1) : !all_zero(page))
			FAIL("shared file page %d wrong", i);
	}
	printf("private mapping hash %016llx\n", (unsigned long long)hash(priv, FSIZE));
	printf("shared mapping hash %016llx\n", (unsigned long long)hash(shr, FSIZE));
out:
	if (priv != MAP_FAILED)
		munmap(priv, FSIZE);
	if (shr != MAP_FAILED)
		munmap(shr, FSIZE);
	if (pfd >= 0)
		close(pfd);
	if (sfd >= 0)
		close(sfd);
	unlink(ppath);
	unlink(spath);
	rmdir(dir);
	printf("mmap_file: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
