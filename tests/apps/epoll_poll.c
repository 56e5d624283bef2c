/* epoll_poll: event loops on pipes and eventfds.
 *
 * State exercised: an epoll instance with a mixed interest list (level- and
 * edge-triggered pipes, a one-shot entry that must be re-armed, an eventfd
 * in counter mode and one in semaphore mode, each with its own user data),
 * plus plain poll() on the same descriptors every other round. A feeder
 * thread writes deterministic data at a steady pace; the loop is blocked in
 * epoll_wait or poll most of the time. The interest list, the data still in
 * the pipes and the eventfd counters must all survive a restore. Only totals
 * are printed: which descriptor fires first depends on timing.
 * Usage: epoll_poll [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define NPIPE 3
static int pipes[NPIPE][2];
static int efd_count, efd_sem;
static long rounds;

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

static unsigned char pbyte(int p, uint64_t k)
{
	return (unsigned char)((k * (uint64_t)(p + 3) + (uint64_t)p) & 0xff);
}

/* Expected totals, computed by the feeder's own arithmetic. */
static uint64_t sent_bytes[NPIPE], sent_count, sent_sem;

static void *feeder(void *arg)
{
	uint64_t pos[NPIPE] = { 0 };

	(void)arg;
	for (long r = 0; r < rounds; r++) {
		int p = (int)(r % NPIPE);
		unsigned char buf[512];
		size_t n = 1 + (size_t)(r * 37 % 500);
		uint64_t v = 1 + (uint64_t)(r % 5);

		for (size_t k = 0; k < n; k++)
			buf[k] = pbyte(p, pos[p] + k);
		pos[p] += n;
		if (write(pipes[p][1], buf, n) != (ssize_t)n)
			return (void *)1;
		sent_bytes[p] += n;
		if (write(efd_count, &v, 8) != 8)
			return (void *)1;
		sent_count += v;
		if (r % 2 == 0) {
			uint64_t one = 2;
			if (write(efd_sem, &one, 8) != 8)
				return (void *)1;
			sent_sem += 2;
		}
		sleep_ms(8);
	}
	for (int p = 0; p < NPIPE; p++)
		close(pipes[p][1]);
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t got_bytes[NPIPE] = { 0 }, got_count = 0, got_sem = 0, rpos[NPIPE] = { 0 };
	int open_pipes = NPIPE, ep, rc = 0, use_poll = 0, bad = 0;
	long loops = 0;
	pthread_t t;

	rounds = (long)(350 * app_scale(argc, argv));
	if (rounds < 1)
		rounds = 1;
	printf("epoll_poll: %ld feeder rounds on %d pipes and 2 eventfds\n", rounds, NPIPE);
	for (int p = 0; p < NPIPE; p++)
		if (pipe2(pipes[p], O_NONBLOCK) != 0)
			return 1;
	efd_count = eventfd(0, EFD_NONBLOCK);
	efd_sem = eventfd(0, EFD_NONBLOCK | EFD_SEMAPHORE);
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int p = 0; p < NPIPE; p++) {
		struct epoll_event ev = { .data.u64 = 100 + (uint64_t)p };
		ev.events = EPOLLIN | (p == 1 ? EPOLLET : 0) | (p == 2 ? EPOLLONESHOT : 0);
		epoll_ctl(ep, EPOLL_CTL_ADD, pipes[p][0], &ev);
	}
	struct epoll_event ev1 = { .events = EPOLLIN, .data.u64 = 200 };
	struct epoll_event ev2 = { .events = EPOLLIN, .data.u64 = 300 };
	epoll_ctl(ep, EPOLL_CTL_ADD, efd_count, &ev1);
	epoll_ctl(ep, EPOLL_CTL_ADD, efd_sem, &ev2);
	pthread_create(&t, NULL, feeder, NULL);

	while (open_pipes > 0 || got_count < sent_count || got_sem < sent_sem) {
		uint64_t ready[8];
		int n = 0;

		if (use_poll) {
			struct pollfd pf[NPIPE + 2];
			for (int p = 0; p < NPIPE; p++)
				pf[p] = (struct pollfd){ .fd = pipes[p][0] < 0 ? -1 : pipes[p][0], .events = POLLIN };
			pf[NPIPE] = (struct pollfd){ .fd = efd_count, .events = POLLIN };
			pf[NPIPE + 1] = (struct pollfd){ .fd = efd_sem, .events = POLLIN };
			int k = poll(pf, NPIPE + 2, 200);
			for (int i = 0; k > 0 && i < NPIPE + 2; i++)
				if (pf[i].revents)
					ready[n++] = i < NPIPE ? 100 + (uint64_t)i : i == NPIPE ? 200 : 300;
		} else {
			struct epoll_event evs[8];
			int k = epoll_wait(ep, evs, 8, 200);
			for (int i = 0; i < k; i++)
				ready[n++] = evs[i].data.u64;
		}
		use_poll = !use_poll;
		loops++;
		for (int i = 0; i < n; i++) {
			if (ready[i] >= 100 && ready[i] < 100 + NPIPE) {
				int p = (int)(ready[i] - 100);
				unsigned char buf[4096];
				ssize_t r;
				if (pipes[p][0] < 0)
					continue;
				/* Drain completely: needed for the edge-triggered one. */
				while ((r = read(pipes[p][0], buf, sizeof(buf))) > 0) {
					for (ssize_t k = 0; k < r; k++)
						if (buf[k] != pbyte(p, rpos[p] + (uint64_t)k))
							bad++;
					rpos[p] += (uint64_t)r;
					got_bytes[p] += (uint64_t)r;
				}
				if (r == 0) {
					epoll_ctl(ep, EPOLL_CTL_DEL, pipes[p][0], NULL);
					close(pipes[p][0]);
					pipes[p][0] = -1;
					open_pipes--;
				} else if (p == 2) {
					struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.u64 = 102 };
					epoll_ctl(ep, EPOLL_CTL_MOD, pipes[p][0], &ev);
				}
			} else if (ready[i] == 200) {
				uint64_t v;
				if (read(efd_count, &v, 8) == 8)
					got_count += v;
			} else if (ready[i] == 300) {
				uint64_t v;
				while (read(efd_sem, &v, 8) == 8)
					got_sem += v;
			} else {
				bad++;
			}
		}
	}
	pthread_join(t, NULL);
	for (int p = 0; p < NPIPE; p++) {
		printf("pipe %d: %llu bytes\n", p, (unsigned long long)got_bytes[p]);
		if (got_bytes[p] != sent_bytes[p])
			rc = 1;
	}
	printf("eventfd counter: %llu, semaphore: %llu\n", (unsigned long long)got_count,
	       (unsigned long long)got_sem);
	if (got_count != sent_count || got_sem != sent_sem || bad) {
		printf("FAIL eventfd %llu/%llu sem %llu/%llu bad %d\n", (unsigned long long)got_count,
		       (unsigned long long)sent_count, (unsigned long long)got_sem, (unsigned long long)sent_sem,
		       bad);
		rc = 1;
	}
	printf("epoll_poll: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
