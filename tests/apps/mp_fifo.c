/* mp_fifo: a named FIFO between a parent and two writer children.
 *
 * State exercised: a FIFO made with mkfifo in a temporary directory, opened
 * by path in three processes (the parent's non-blocking read end, and for a
 * while a write end the parent holds so that EOF cannot come too early; each
 * child's own write end). The children write variable-length records (each
 * one written atomically, so records of the two children interleave but
 * never mix) with small pauses; the parent reads only in bursts every 200 ms,
 * and every fifth time pauses longer, so the FIFO holds tens of kilobytes at
 * most moments and is sometimes full, with writers blocked in write(). After
 * a restore no byte may be lost, duplicated or reordered. The parent checks
 * each record's sequence number and content and each child's final checksum,
 * and finishes at EOF. Only the parent prints.
 * Usage: mp_fifo [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCH 2
#define MAXPAY 400
#define MAGIC 0xf1f0

enum { HELLO = 1, DATA = 2, END = 3 };

struct hdr {
	uint16_t magic;
	uint8_t child, type;
	uint32_t seq;
	uint32_t len; /* payload bytes */
	uint32_t pad;
	uint64_t sum; /* END: the writer's checksum */
};

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

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static uint32_t pay_len(int c, uint32_t seq)
{
	return (uint32_t)(mix(((uint64_t)c << 32) | seq) % (MAXPAY + 1));
}

static uint8_t pay_byte(int c, uint32_t seq, uint32_t k)
{
	return (uint8_t)(seq * 31 + k * 7 + (uint32_t)c * 101 + (k >> 3));
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

static uint64_t roll(uint64_t h, const uint8_t *p, size_t n)
{
	for (size_t k = 0; k < n; k++)
		h = (h ^ p[k]) * 0x100000001b3ULL;
	return h;
}

static void writer(int c, const char *fifo, long count)
{
	uint8_t rec[sizeof(struct hdr) + MAXPAY];
	struct hdr *h = (struct hdr *)rec;
	uint64_t sum = 0xcbf29ce484222325ULL;
	int fd = open(fifo, O_WRONLY); /* the parent's read end is open */

	if (fd < 0)
		_exit(2);
	*h = (struct hdr){ MAGIC, (uint8_t)c, HELLO, 0, 0, 0, 0 };
	if (write_all(fd, rec, sizeof(*h)))
		_exit(3);
	for (uint32_t s = 0; s < (uint32_t)count; s++) {
		uint32_t n = pay_len(c, s);
		*h = (struct hdr){ MAGIC, (uint8_t)c, DATA, s, n, 0, 0 };
		for (uint32_t k = 0; k < n; k++)
			rec[sizeof(*h) + k] = pay_byte(c, s, k);
		sum = roll(sum, rec + sizeof(*h), n);
		/* One write per record: atomic (below PIPE_BUF). */
		if (write_all(fd, rec, sizeof(*h) + n))
			_exit(4);
		if (s % 2 == 1)
			sleep_ms(5);
	}
	*h = (struct hdr){ MAGIC, (uint8_t)c, END, (uint32_t)count, 0, 0, sum };
	if (write_all(fd, rec, sizeof(*h)))
		_exit(5);
	close(fd);
	_exit(50 + c);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long count = (long)(1100 * app_scale(argc, argv));
	char dir[4096], fifo[4200];
	static uint8_t buf[1 << 18];
	size_t have = 0;
	int rd, hold, rc = 0, hellos = 0, ended[NCH] = { 0 }, eof = 0;
	uint32_t next[NCH] = { 0 };
	uint64_t sum[NCH], bytes[NCH] = { 0 };
	pid_t pid[NCH];

	if (count < 10)
		count = 10;
	for (int c = 0; c < NCH; c++)
		sum[c] = 0xcbf29ce484222325ULL;
	snprintf(dir, sizeof(dir), "%s/mp_fifo.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp\n");
		return 1;
	}
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	if (mkfifo(fifo, 0600) != 0) {
		printf("FAIL mkfifo\n");
		return 1;
	}
	rd = open(fifo, O_RDONLY | O_NONBLOCK);
	hold = open(fifo, O_WRONLY);
	if (rd < 0 || hold < 0) {
		printf("FAIL open fifo\n");
		return 1;
	}
	printf("mp_fifo: %d writers, %ld records each, read in bursts\n", NCH, count);
	fflush(stdout);
	for (int c = 0; c < NCH; c++) {
		pid[c] = fork();
		if (pid[c] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[c] == 0) {
			close(rd);
			close(hold);
			writer(c, fifo, count);
		}
	}

	for (long burst = 0; !eof && !rc; burst++) {
		sleep_ms(burst % 5 == 4 ? 700 : 200);
		for (;;) { /* everything there is now */
			ssize_t r = read(rd, buf + have, sizeof(buf) - have);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN)
				break;
			if (r < 0) {
				printf("FAIL read: %s\n", strerror(errno));
				rc = 1;
				break;
			}
			if (r == 0) {
				eof = 1;
				break;
			}
			have += (size_t)r;
			/* Whole records, in order. */
			size_t off = 0;
			while (have - off >= sizeof(struct hdr)) {
				struct hdr h;
				memcpy(&h, buf + off, sizeof(h));
				if (h.magic != MAGIC || h.child >= NCH || h.len > MAXPAY) {
					printf("FAIL garbage in the FIFO\n");
					rc = 1;
					break;
				}
				if (have - off < sizeof(h) + h.len)
					break;
				const uint8_t *p = buf + off + sizeof(h);
				int c = h.child;
				if (h.type == HELLO) {
					if (++hellos == NCH)
						close(hold); /* EOF once both writers are done */
				} else if (h.type == DATA) {
					int bad = ended[c] || h.seq != next[c] || h.len != pay_len(c, h.seq);
					for (uint32_t k = 0; !bad && k < h.len; k++)
						bad = p[k] != pay_byte(c, h.seq, k);
					if (bad) {
						printf("FAIL writer %d record %u: wrong\n", c, next[c]);
						rc = 1;
						break;
					}
					next[c]++;
					bytes[c] += h.len;
					sum[c] = roll(sum[c], p, h.len);
				} else if (h.type == END) {
					ended[c] = 1;
					if (h.seq != next[c] || h.sum != sum[c]) {
						printf("FAIL writer %d: end record says %u/%016llx, read %u/%016llx\n", c,
						       h.seq, (unsigned long long)h.sum, next[c], (unsigned long long)sum[c]);
						rc = 1;
					}
				}
				off += sizeof(h) + h.len;
			}
			memmove(buf, buf + off, have - off);
			have -= off;
			if (rc)
				break;
		}
	}
	if (have) {
		printf("FAIL %zu bytes of a partial record at EOF\n", have);
		rc = 1;
	}
	for (int c = 0; c < NCH; c++) {
		int st;
		if (rc)
			kill(pid[c], SIGKILL);
		while (waitpid(pid[c], &st, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		printf("writer %d: %u records, %llu payload bytes, checksum %016llx, ", c, next[c],
		       (unsigned long long)bytes[c], (unsigned long long)sum[c]);
		if (WIFEXITED(st))
			printf("exited %d\n", WEXITSTATUS(st));
		else
			printf("status %#x\n", st);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 50 + c || !ended[c] || next[c] != (uint32_t)count)
			rc = 1;
	}
	close(rd);
	unlink(fifo);
	rmdir(dir);
	printf("mp_fifo: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
