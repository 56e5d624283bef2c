/* pipes_fifo: pipes and a FIFO used inside one process.
 *
 * State exercised: bytes sitting unread in a pipe buffer and in a FIFO
 * buffer for long stretches (the kernel holds them, a checkpoint must drain
 * and refill them), a pipe enlarged with F_SETPIPE_SZ, O_NONBLOCK on one end,
 * and a named FIFO in a temporary directory opened O_RDWR and also through a
 * separate read-only and write-only pair. Each round fills the buffers,
 * computes for a while with them full, then drains and checks them.
 * Usage: pipes_fifo [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BIGPIPE (1 << 20)

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static unsigned char pat(long round, int chan, size_t k)
{
	return (unsigned char)((uint64_t)(round * 131 + chan * 7) + k * 13 + (k >> 8));
}

static int fill(int fd, long round, int chan, size_t n)
{
	static unsigned char buf[65536];

	for (size_t done = 0; done < n;) {
		size_t m = n - done < sizeof(buf) ? n - done : sizeof(buf);
		for (size_t k = 0; k < m; k++)
			buf[k] = pat(round, chan, done + k);
		ssize_t w = write(fd, buf, m);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

static int drain(int fd, long round, int chan, size_t n)
{
	static unsigned char buf[65536];

	for (size_t done = 0; done < n;) {
		size_t m = n - done < sizeof(buf) ? n - done : sizeof(buf);
		ssize_t r = read(fd, buf, m);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		for (ssize_t k = 0; k < r; k++)
			if (buf[k] != pat(round, chan, done + (size_t)k))
				return -2;
		done += (size_t)r;
	}
	return 0;
}

static uint64_t busy(uint64_t x, long n)
{
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long rounds = (long)(100 * app_scale(argc, argv));
	char dir[4096], fifo[4200];
	int small[2], big[2], frw, frd, fwr, rc = 0;
	uint64_t x = 1;

	if (rounds < 1)
		rounds = 1;
	snprintf(dir, sizeof(dir), "%s/pipes_fifo.XXXXXX", tmp);
	if (!mkdtemp(dir))
		return 1;
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (mkfifo(fifo, 0600) != 0)
		return 1;
	frw = open(fifo, O_RDWR);            /* never blocks, keeps the FIFO alive */
	frd = open(fifo, O_RDONLY | O_NONBLOCK);
	fwr = open(fifo, O_WRONLY);
	if (pipe(small) != 0 || pipe2(big, O_NONBLOCK) != 0 || frw < 0 || frd < 0 || fwr < 0)
		return 1;
	if (fcntl(big[1], F_SETPIPE_SZ, BIGPIPE) < BIGPIPE)
		return 1;
	fcntl(frd, F_SETFL, 0); /* the reader blocks from now on */
	printf("pipes_fifo: %ld rounds, pipe of %d KiB\n", rounds, BIGPIPE / 1024);

	for (long r = 0; r < rounds; r++) {
		size_t n_small = 1000 + (size_t)(r * 977 % 60000);
		size_t n_big = 300000 + (size_t)(r * 7919 % 700000);
		size_t n_fifo = 500 + (size_t)(r * 331 % 30000);
		int e;

		if (fill(small[1], r, 0, n_small) || fill(big[1], r, 1, n_big) || fill(fwr, r, 2, n_fifo) ||
		    fill(frw, r, 3, 1000)) {
			printf("FAIL round %ld: write\n", r);
			rc = 1;
			break;
		}
		x = busy(x, 25000000); /* buffers are full for a while */
		/* The big pipe is O_NONBLOCK on both ends. */
		fcntl(big[0], F_SETFL, 0);
		if ((e = drain(small[0], r, 0, n_small)) || (e = drain(big[0], r, 1, n_big)) ||
		    (e = drain(frd, r, 2, n_fifo)) || (e = drain(frw, r, 3, 1000))) {
			printf("FAIL round %ld: %s\n", r, e == -2 ? "data corrupted" : "read");
			rc = 1;
			break;
		}
		fcntl(big[0], F_SETFL, O_NONBLOCK);
		if (r % 10 == 9)
			printf("round %ld: %zu + %zu + %zu bytes through\n", r + 1, n_small, n_big, n_fifo);
	}
	printf("big pipe size %d KiB, nonblocking write end %s\n", fcntl(big[1], F_GETPIPE_SZ) / 1024,
	       (fcntl(big[1], F_GETFL) & O_NONBLOCK) ? "yes" : "NO");
	if (fcntl(big[1], F_GETPIPE_SZ) < BIGPIPE || !(fcntl(big[1], F_GETFL) & O_NONBLOCK))
		rc = 1;
	printf("busy result %016llx\n", (unsigned long long)x);
	unlink(fifo);
	rmdir(dir);
	printf("pipes_fifo: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
