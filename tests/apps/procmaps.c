/* procmaps: what /proc/self/maps shows about the process itself.
 *
 * State exercised: the memory map as the kernel reports it. The program
 * makes mappings with known properties (an anonymous region split into three
 * by mprotect, a shared read-only file mapping, a brk heap) and checks
 * repeatedly, while it computes, that /proc/self/maps lists them at the
 * same addresses with the same permissions, together with its executable,
 * [stack] and [vdso]. Only these stable facts are printed, never addresses.
 * Usage: procmaps [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

struct want {
	const char *what;
	uintptr_t start, end; /* 0: match by name only */
	const char *perms;    /* NULL: any */
	const char *name;     /* NULL: anonymous; suffix match otherwise */
	int found;
};

static int check_maps(struct want *w, int n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4608];
	int missing = 0;

	if (!f)
		return -1;
	for (int i = 0; i < n; i++)
		w[i].found = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char perms[8] = "", path[4096] = "";
		size_t len;

		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095[^\n]", &s, &e, perms, path) < 3)
			continue;
		len = strlen(path);
		for (int i = 0; i < n; i++) {
			if (w[i].start && (w[i].start != s || w[i].end != e))
				continue;
			if (w[i].perms && strcmp(w[i].perms, perms) != 0)
				continue;
			if (w[i].name) {
				size_t l = strlen(w[i].name);
				if (len < l || strcmp(path + len - l, w[i].name) != 0)
					continue;
			} else if (len) {
				continue;
			}
			w[i].found = 1;
		}
	}
	fclose(f);
	for (int i = 0; i < n; i++)
		missing += !w[i].found;
	return missing;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long rounds = (long)(10 * app_scale(argc, argv));
	char exe[4096], dir[4096], path[4200];
	unsigned char *anon, *fmap;
	volatile char *heap;
	uint64_t x = 3;
	ssize_t n;
	int fd, rc = 0;

	if (rounds < 1)
		rounds = 1;
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 1;
	exe[n] = 0;
	snprintf(dir, sizeof(dir), "%s/procmaps.XXXXXX", tmp);
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/mapped.dat", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 8 * PAGE) != 0)
		return 1;
	fmap = mmap(NULL, 8 * PAGE, PROT_READ, MAP_SHARED, fd, 0);
	/* PROT_NONE pages on both sides keep the kernel from merging the
	 * region with a neighbour, so its three entries are exact. */
	anon = mmap(NULL, 5 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (fmap == MAP_FAILED || anon == MAP_FAILED)
		return 1;
	/* Nothing left to remove at the end: a run killed between a removal
	 * and its exit would leave a checkpoint whose file is gone. The
	 * mapping keeps the file ("... (deleted)" in the maps). */
	unlink(path);
	rmdir(dir);
	anon += PAGE;
	mprotect(anon, 3 * PAGE, PROT_READ | PROT_WRITE);
	memset(anon, 0x5a, 3 * PAGE);
	mprotect(anon + PAGE, PAGE, PROT_READ);
	heap = malloc(1000); /* small: comes from brk */
	heap[0] = 1;

	struct want w[] = {
		{ "executable text", 0, 0, "r-xp", exe, 0 },
		{ "anonymous region, first page rw", (uintptr_t)anon, (uintptr_t)anon + PAGE, "rw-p", NULL, 0 },
		{ "anonymous region, middle page read-only", (uintptr_t)anon + PAGE, (uintptr_t)anon + 2 * PAGE,
		  "r--p", NULL, 0 },
		{ "anonymous region, last page rw", (uintptr_t)anon + 2 * PAGE, (uintptr_t)anon + 3 * PAGE, "rw-p",
		  NULL, 0 },
		{ "shared file mapping", (uintptr_t)fmap, (uintptr_t)fmap + 8 * PAGE, "r--s", "/mapped.dat (deleted)", 0 },
		{ "[heap]", 0, 0, "rw-p", "[heap]", 0 },
		{ "[stack]", 0, 0, "rw-p", "[stack]", 0 },
		{ "[vdso]", 0, 0, "r-xp", "[vdso]", 0 },
	};
	const int nw = (int)(sizeof(w) / sizeof(w[0]));

	printf("procmaps: %d expected mappings, %ld checks\n", nw, rounds);
	for (long r = 0; r < rounds; r++) {
		int missing;

		for (long i = 0; i < 250000000; i++)
			x = x * 2862933555777941757ULL + 3037000493ULL;
		missing = check_maps(w, nw);
		printf("check %ld: %s\n", r + 1, missing == 0 ? "all present" : "MISSING");
		if (missing) {
			for (int i = 0; i < nw; i++)
				if (!w[i].found)
					printf("FAIL missing: %s\n", w[i].what);
			rc = 1;
			break;
		}
	}
	for (int i = 0; i < nw; i++)
		printf("%s: %s\n", w[i].what, w[i].found ? "present" : "absent");
	if (anon[PAGE] != 0x5a || anon[3 * PAGE - 1] != 0x5a)
		rc = 1;
	munmap(fmap, 8 * PAGE);
	close(fd);
	printf("compute %016llx\n", (unsigned long long)x);
	printf("procmaps: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
