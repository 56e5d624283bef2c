/* mp_mqueue: POSIX message queues (mq_open) across a restore.
 *
 * State exercised: queue A (8 messages of at most 128 bytes, mode 0640)
 * is held by the parent through two descriptors, one opened for reading
 * and writing and one for writing only with O_NONBLOCK, and inherited by
 * a forked child (the same open descriptions). The child sends messages
 * through the blocking descriptor, each carrying its number, a priority
 * (0-2) and a token the child drew at its start; it blocks while the
 * queue is full, as the parent takes them more slowly. The parent checks
 * each message it takes: the child's token, the priority it was sent
 * with, and within one priority the order of sending. Queue B (4 x 64
 * bytes) holds three messages of two priorities and no descriptor: the
 * parent closed it, and opens it again by name at the end. At the end
 * the parent checks that every message came exactly once, the attributes
 * of both queues (sizes, the count, O_NONBLOCK of the second
 * descriptor, which must fail with EAGAIN once 8 are queued), the mode of
 * A and the order of B (its priority-5 message first, then the two of
 * priority 1 in the order sent), and removes both.
 * Usage: mp_mqueue [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXN 4096

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static uint64_t draw(void)
{
	uint64_t v = 0;
	FILE *f = fopen("/dev/urandom", "rb");

	if (!f || fread(&v, sizeof(v), 1, f) != 1)
		v = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	if (f)
		fclose(f);
	return v | 1;
}

static int child(mqd_t q, long n)
{
	uint64_t token = draw();
	char msg[128];

	for (long i = 0; i < n; i++) {
		unsigned prio = (unsigned)(i % 3);
		int len = snprintf(msg, sizeof(msg), "%ld %u %016llx", i, prio, (unsigned long long)token);
		while (mq_send(q, msg, (size_t)len, prio) < 0)
			if (errno != EINTR)
				return 1;
		nap_ms(i % 7 == 0 ? 25 : 8);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static unsigned char seen[MAXN];
	struct mq_attr aa = {.mq_maxmsg = 8, .mq_msgsize = 128}, ab = {.mq_maxmsg = 4, .mq_msgsize = 64}, got;
	char na[64], nb[64], buf[129];
	long n = (long)(180 * app_scale(argc, argv)), last[3] = {-1, -1, -1}, taken = 0;
	unsigned long long token = 0;
	struct stat st;
	mqd_t qa, qw, qb;
	int rc = 0, status;
	pid_t kid;

	if (n > MAXN)
		n = MAXN;
	snprintf(na, sizeof(na), "/mp_mqueue-%d-a", (int)getpid());
	snprintf(nb, sizeof(nb), "/mp_mqueue-%d-b", (int)getpid());
	mq_unlink(na);
	mq_unlink(nb);
	if ((qa = mq_open(na, O_RDWR | O_CREAT | O_EXCL, 0600, &aa)) == (mqd_t)-1 || fchmod(qa, 0640) < 0 ||
	    (qw = mq_open(na, O_WRONLY | O_NONBLOCK)) == (mqd_t)-1 ||
	    (qb = mq_open(nb, O_RDWR | O_CREAT | O_EXCL, 0600, &ab)) == (mqd_t)-1 || mq_send(qb, "b0", 2, 1) < 0 ||
	    mq_send(qb, "b1", 2, 5) < 0 || mq_send(qb, "b2", 2, 1) < 0 || mq_close(qb) < 0) {
		perror("mp_mqueue: setup");
		return 2;
	}
	if ((kid = fork()) == 0)
		_exit(child(qa, n));
	while (taken < n && !rc) {
		unsigned prio;
		long i;
		unsigned p;
		unsigned long long t;
		ssize_t len = mq_receive(qa, buf, sizeof(buf) - 1, &prio);

		if (len < 0) {
			if (errno == EINTR)
				continue;
			printf("FAIL mq_receive: %s\n", strerror(errno));
			rc = 1;
			break;
		}
		buf[len] = 0;
		if (sscanf(buf, "%ld %u %llx", &i, &p, &t) != 3 || i < 0 || i >= n || p != prio || p > 2 ||
		    (token && t != token) || seen[i] || i <= last[p]) {
			printf("FAIL message %ld of priority %u: \"%s\" (priority %u, last of it %ld)\n", taken, prio, buf,
			       prio, p <= 2 ? last[p] : -1);
			rc = 1;
			break;
		}
		token = t;
		seen[i] = 1;
		last[p] = i;
		taken++;
		nap_ms(taken % 5 == 0 ? 40 : 10);
	}
	if (rc)
		kill(kid, SIGKILL); /* it may wait on a full queue */
	if (waitpid(kid, &status, 0) != kid || (!rc && (!WIFEXITED(status) || WEXITSTATUS(status)))) {
		printf("FAIL the child ended with status %#x\n", status);
		rc = 1;
	}
	/* A: its attributes, mode, and the non-blocking descriptor */
	if (mq_getattr(qa, &got) < 0 || got.mq_maxmsg != 8 || got.mq_msgsize != 128 || got.mq_curmsgs != 0 ||
	    (got.mq_flags & O_NONBLOCK)) {
		printf("FAIL queue A's attributes: %ld x %ld, %ld queued, flags %#lx\n", got.mq_maxmsg, got.mq_msgsize,
		       got.mq_curmsgs, got.mq_flags);
		rc = 1;
	}
	if (fstat(qa, &st) < 0 || (st.st_mode & 0777) != 0640) {
		printf("FAIL queue A's mode %o\n", (unsigned)(st.st_mode & 0777));
		rc = 1;
	}
	if (mq_getattr(qw, &got) < 0 || !(got.mq_flags & O_NONBLOCK)) {
		printf("FAIL the second descriptor of A is not O_NONBLOCK\n");
		rc = 1;
	} else {
		int k = 0;
		while (k < 20 && mq_send(qw, "x", 1, 0) == 0)
			k++;
		if (k != 8 || errno != EAGAIN) {
			printf("FAIL the non-blocking descriptor sent %d into a queue of 8 (%s)\n", k, strerror(errno));
			rc = 1;
		}
	}
	/* B: opened again by name, priority order */
	if ((qb = mq_open(nb, O_RDONLY | O_NONBLOCK)) == (mqd_t)-1 || mq_getattr(qb, &got) < 0 || got.mq_maxmsg != 4 ||
	    got.mq_msgsize != 64 || got.mq_curmsgs != 3) {
		printf("FAIL queue B is not as it was left (%s)\n", qb == (mqd_t)-1 ? strerror(errno) : "attributes");
		rc = 1;
	} else {
		const char *want[3] = {"b1", "b0", "b2"};
		for (int k = 0; k < 3; k++) {
			ssize_t len = mq_receive(qb, buf, sizeof(buf), NULL);
			if (len != 2 || memcmp(buf, want[k], 2)) {
				printf("FAIL queue B's message %d is not %s\n", k, want[k]);
				rc = 1;
				break;
			}
		}
	}
	mq_unlink(na);
	mq_unlink(nb);
	if (!rc)
		printf("mp_mqueue: %ld messages, each once and in order; both queues kept their attributes\n", n);
	return rc;
}
