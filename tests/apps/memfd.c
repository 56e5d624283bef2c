/* memfd: anonymous files from memfd_create.
 *
 * State exercised: a sealed memfd (grow/shrink forbidden) mapped shared
 * twice at different addresses, so that both mappings must come back
 * aliasing the same pages, plus the file offset and size of the descriptor.
 * Writes go through one mapping and are checked through the other and
 * through pread(); the seals are checked by trying to resize. A second
 * memfd, sealed against writes (F_SEAL_WRITE), mapped read-only and shared:
 * its bytes, its seal and its mapping come back (a restore that mapped it
 * writable was refused by the kernel: exit 99).
 * Usage: memfd [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIZE (16UL << 20)
#define WORDS (SIZE / 8)

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

int main(int argc, char **argv)
{
	long rounds = (long)(1000 * app_scale(argc, argv));
	uint64_t *a, *b, sum = 0;
	const char *ro;
	struct stat st;
	int fd, wfd, seals, rc = 0;

	if (rounds < 1)
		rounds = 1;
	printf("memfd: %lu MiB, two shared mappings, %ld rounds\n", SIZE >> 20, rounds);
	fd = memfd_create("ckapp-memfd", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, SIZE) != 0)
		return 1;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK) != 0)
		return 1;
	a = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	b = mmap(NULL, SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (a == MAP_FAILED || b == MAP_FAILED)
		return 1;
	if (lseek(fd, 12345, SEEK_SET) != 12345)
		return 1;
	wfd = memfd_create("ckapp-memfd-ro", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if (wfd < 0 || write(wfd, "written once", 12) != 12 || ftruncate(wfd, 65536) != 0 ||
	    fcntl(wfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW) != 0 ||
	    (ro = mmap(NULL, 65536, PROT_READ, MAP_SHARED, wfd, 0)) == MAP_FAILED)
		return 1;

	for (long r = 0; r < rounds; r++) {
		uint64_t s = 0;
		for (size_t i = 0; i < WORDS; i++)
			a[i] = mix(a[i] + i + (uint64_t)r);
		for (size_t i = 0; i < WORDS; i += 97) /* the other mapping sees it */
			if (b[i] != a[i]) {
				printf("FAIL round %ld: mappings differ at word %zu\n", r, i);
				rc = 1;
				goto out;
			}
		for (size_t i = 0; i < WORDS; i++)
			s += b[i];
		if (r % 100 == 99)
			printf("round %ld: sum %016llx\n", r + 1, (unsigned long long)s);
		sum = s;
	}
	uint64_t w;
	if (pread(fd, &w, 8, 8 * 1000) != 8 || w != a[1000]) {
		printf("FAIL pread does not see the mapping\n");
		rc = 1;
	}
	seals = fcntl(fd, F_GET_SEALS);
	errno = 0;
	if (ftruncate(fd, SIZE * 2) == 0 || errno != EPERM || seals != (F_SEAL_GROW | F_SEAL_SHRINK)) {
		printf("FAIL seals lost: %#x\n", seals);
		rc = 1;
	}
	errno = 0;
	if (memcmp(ro, "written once", 12) || write(wfd, "x", 1) >= 0 || errno != EPERM ||
	    fcntl(wfd, F_GET_SEALS) != (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)) {
		printf("FAIL the write-sealed memfd: mapping '%.12s', seals %#x\n", ro, fcntl(wfd, F_GET_SEALS));
		rc = 1;
	} else {
		printf("write-sealed memfd: bytes, seals and read-only mapping kept\n");
	}
	fstat(fd, &st);
	printf("size %lld, offset %lld, seals grow+shrink %s\n", (long long)st.st_size,
	       (long long)lseek(fd, 0, SEEK_CUR), seals == (F_SEAL_GROW | F_SEAL_SHRINK) ? "kept" : "LOST");
	if (st.st_size != (off_t)SIZE || lseek(fd, 0, SEEK_CUR) != 12345)
		rc = 1;
	printf("final sum %016llx\n", (unsigned long long)sum);
out:
	printf("memfd: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
