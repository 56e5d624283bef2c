/* deleted_file: files that are open but no longer have a name.
 *
 * State exercised: a regular file unlinked right after it was opened
 * (its content exists only through the descriptors, so a checkpoint must
 * carry it), two independent open file descriptions of it with different
 * offsets (the second from /proc/self/fd before the unlink) and O_APPEND on
 * one of them, plus a shared mapping of its first pages. The file keeps
 * growing during the run; it is re-read and checked in full at every round.
 * A second unlinked file is sparse (4 bytes at 0 and at 8 MiB): its hole
 * must stay a hole (SEEK_HOLE, blocks), not come back as 8 MiB of zeros.
 * A file made with O_TMPFILE must stay linkable: at the end linkat gives
 * it a name (a restore that made it on ckrun's own mount got EXDEV).
 * Usage: deleted_file [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536
#define MAPPED 16384

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static unsigned char byte_at(uint64_t off)
{
	uint64_t x = off * 0x9e3779b97f4a7c15ULL;
	return (unsigned char)(x >> 56);
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long rounds = (long)(150 * app_scale(argc, argv));
	static unsigned char buf[CHUNK];
	char path[4200], fdpath[64];
	unsigned char *map;
	int fa, fb, fs, ft, rc = 0;
	off_t size = 0;
	uint64_t digest = 0;
	struct stat st;

	if (rounds < 1)
		rounds = 1;
	snprintf(path, sizeof(path), "%s/deleted_file.XXXXXX", tmp);
	fa = mkstemp(path);
	if (fa < 0)
		return 1;
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fa);
	fb = open(fdpath, O_RDWR | O_APPEND);
	if (fb < 0 || unlink(path) != 0)
		return 1;
	snprintf(path, sizeof(path), "%s/deleted_file.XXXXXX", tmp);
	if ((fs = mkstemp(path)) < 0 || unlink(path) != 0 || pwrite(fs, "head", 4, 0) != 4 ||
	    pwrite(fs, "tail", 4, 8 << 20) != 4)
		return 1;
	if ((ft = open(tmp, O_TMPFILE | O_RDWR, 0640)) < 0 || write(ft, "unnamed", 7) != 7)
		return 1;
	printf("deleted_file: %ld rounds of %d KiB appended to an unlinked file\n", rounds, CHUNK / 1024);

	/* The first pages exist before the mapping is made. */
	for (off_t o = 0; o < MAPPED; o++)
		buf[o] = byte_at((uint64_t)o);
	if (write(fb, buf, MAPPED) != MAPPED)
		return 1;
	size = MAPPED;
	map = mmap(NULL, MAPPED, PROT_READ | PROT_WRITE, MAP_SHARED, fa, 0);
	if (map == MAP_FAILED)
		return 1;

	for (long r = 0; r < rounds; r++) {
		/* Append through fb (O_APPEND), then re-read everything through
		 * fa, whose own offset is rewound only to the start. */
		for (int k = 0; k < CHUNK; k++)
			buf[k] = byte_at((uint64_t)size + (uint64_t)k);
		if (write(fb, buf, CHUNK) != CHUNK) {
			printf("FAIL append\n");
			return 1;
		}
		size += CHUNK;
		if (lseek(fa, 0, SEEK_SET) != 0)
			return 1;
		digest = 0;
		for (off_t o = 0; o < size;) {
			ssize_t n = read(fa, buf, CHUNK);
			if (n <= 0) {
				printf("FAIL short read at %lld\n", (long long)o);
				return 1;
			}
			for (ssize_t k = 0; k < n; k++) {
				if (buf[k] != byte_at((uint64_t)(o + k))) {
					printf("FAIL round %ld: byte %lld wrong\n", r, (long long)(o + k));
					return 1;
				}
				digest = (digest ^ buf[k]) * 0x100000001b3ULL;
			}
			o += n;
		}
		if (map[r % MAPPED] != byte_at((uint64_t)(r % MAPPED))) {
			printf("FAIL mapping differs from the file\n");
			rc = 1;
		}
		if (r % 15 == 14)
			printf("round %ld: %lld bytes, digest %016llx\n", r + 1, (long long)size,
			       (unsigned long long)digest);
		sleep_ms(10);
	}
	fstat(fa, &st);
	printf("links %ld, size %lld, offset a %lld, offset b %lld\n", (long)st.st_nlink, (long long)st.st_size,
	       (long long)lseek(fa, 0, SEEK_CUR), (long long)lseek(fb, 0, SEEK_CUR));
	if (st.st_nlink != 0 || st.st_size != size || (fcntl(fb, F_GETFL) & O_APPEND) == 0)
		rc = 1;
	{
		char h[5] = {0}, t[5] = {0};
		off_t hole = lseek(fs, 0, SEEK_HOLE);
		fstat(fs, &st);
		if (pread(fs, h, 4, 0) != 4 || pread(fs, t, 4, 8 << 20) != 4 || strcmp(h, "head") || strcmp(t, "tail") ||
		    hole >= (8 << 20) || st.st_blocks >= 4096) {
			printf("FAIL the sparse file: '%s' '%s', first hole at %lld, %lld blocks\n", h, t, (long long)hole,
			       (long long)st.st_blocks);
			rc = 1;
		} else {
			printf("sparse file: bytes and hole kept\n");
		}
	}
	{
		char from[64], got[8] = {0};
		int named;
		snprintf(from, sizeof(from), "/proc/self/fd/%d", ft);
		snprintf(path, sizeof(path), "%s/deleted_file.linked.%d", tmp, (int)getpid());
		unlink(path);
		if (linkat(AT_FDCWD, from, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 || (named = open(path, O_RDONLY)) < 0 ||
		    read(named, got, 7) != 7 || strcmp(got, "unnamed")) {
			printf("FAIL the O_TMPFILE file could not be given a name: %s\n", strerror(errno));
			rc = 1;
		} else {
			printf("O_TMPFILE file: linked with its bytes\n");
			close(named);
		}
		unlink(path);
	}
	printf("deleted_file: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
