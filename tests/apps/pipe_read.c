/* pipe_read: the main thread blocked in read() on a pipe.
 *
 * State exercised: a pipe whose reader spends its life blocked in read()
 * while a writer thread sends framed messages of varying size every few
 * milliseconds, sometimes two at once so that unread bytes sit in the pipe
 * buffer when a checkpoint comes. The reader handles short reads, checks
 * every frame (sequence number and content) and prints a running digest.
 * Usage: pipe_read [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];
static long nmsg;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

static size_t msg_len(long i)
{
	return 16 + (size_t)((i * 7919) % 3000);
}

static unsigned char msg_byte(long i, size_t k)
{
	return (unsigned char)((i * 31 + (long)k * 17) & 0xff);
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static void *writer(void *arg)
{
	static unsigned char buf[4096];

	(void)arg;
	for (long i = 0; i < nmsg; i++) {
		uint32_t hdr[2] = { (uint32_t)i, (uint32_t)msg_len(i) };

		for (size_t k = 0; k < hdr[1]; k++)
			buf[k] = msg_byte(i, k);
		if (write_all(pfd[1], hdr, sizeof(hdr)) || write_all(pfd[1], buf, hdr[1]))
			return (void *)1;
		if (i % 3 != 2) /* every third message follows at once */
			sleep_ms(12);
	}
	close(pfd[1]);
	return NULL;
}

int main(int argc, char **argv)
{
	static unsigned char buf[4096];
	pthread_t t;
	uint64_t digest = 0;
	long got = 0;
	int rc = 0;

	nmsg = (long)(360 * app_scale(argc, argv));
	if (nmsg < 1)
		nmsg = 1;
	printf("pipe_read: %ld messages\n", nmsg);
	if (pipe(pfd) != 0)
		return 1;
	pthread_create(&t, NULL, writer, NULL);
	for (;;) {
		uint32_t hdr[2];
		ssize_t r;

		r = read(pfd[0], hdr, 1); /* blocked here most of the time */
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			break;
		if (r != 1 || read_all(pfd[0], (char *)hdr + 1, sizeof(hdr) - 1) || hdr[0] != (uint32_t)got ||
		    hdr[1] != msg_len(got) || read_all(pfd[0], buf, hdr[1])) {
			printf("FAIL bad frame header at message %ld\n", got);
			rc = 1;
			break;
		}
		for (size_t k = 0; k < hdr[1]; k++) {
			if (buf[k] != msg_byte(got, k)) {
				printf("FAIL message %ld byte %zu\n", got, k);
				rc = 1;
				goto out;
			}
			digest = (digest ^ buf[k]) * 0x100000001b3ULL;
		}
		got++;
		if (got % 40 == 0)
			printf("received %ld messages, digest %016llx\n", got, (unsigned long long)digest);
	}
out:
	pthread_join(t, NULL);
	if (got != nmsg) {
		printf("FAIL received %ld of %ld messages\n", got, nmsg);
		rc = 1;
	}
	printf("pipe_read: %ld messages, digest %016llx, %s\n", got, (unsigned long long)digest, rc ? "FAIL" : "ok");
	return rc;
}
