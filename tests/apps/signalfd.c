/* signalfd: signals consumed through a signalfd.
 *
 * State exercised: a blocked signal mask inherited by every thread, a
 * signalfd for a real-time signal (queued, with payloads) and SIGUSR1
 * (coalesced), and signals that are queued but not yet read when a
 * checkpoint comes: the sender queues bursts faster than the reader, which
 * sleeps between reads. After a restore the queued signals must still be
 * there, in order, with their payloads.
 * Usage: signalfd [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

static long nsig;

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

static void *sender(void *arg)
{
	pid_t pid = getpid();

	(void)arg;
	for (long i = 0; i < nsig; i++) {
		union sigval v = { .sival_int = (int)(i * 3 + 1) };
		while (sigqueue(pid, SIGRTMIN + 2, v) != 0 && errno == EAGAIN)
			sleep_ms(1);
		if (i % 25 == 24)
			kill(pid, SIGUSR1);
		if (i % 8 == 7) /* bursts of eight */
			sleep_ms(60);
	}
	kill(pid, SIGUSR1); /* SIGUSR1 after the last RT signal ends the reader */
	return NULL;
}

int main(int argc, char **argv)
{
	sigset_t set;
	pthread_t t;
	long got = 0, usr1 = 0;
	int sfd, rc = 0, order_bad = 0;

	nsig = (long)(360 * app_scale(argc, argv));
	if (nsig < 1)
		nsig = 1;
	printf("signalfd: %ld queued signals\n", nsig);
	sigemptyset(&set);
	sigaddset(&set, SIGRTMIN + 2);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread exists */
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		return 1;
	pthread_create(&t, NULL, sender, NULL);
	while (got < nsig || usr1 == 0) {
		struct signalfd_siginfo si[4];
		ssize_t r = read(sfd, si, sizeof(si));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || r % (ssize_t)sizeof(si[0])) {
			printf("FAIL read signalfd\n");
			return 1;
		}
		for (int i = 0; i < r / (ssize_t)sizeof(si[0]); i++) {
			if ((int)si[i].ssi_signo == SIGUSR1) {
				usr1++; /* coalesced: how many arrive depends on timing */
				continue;
			}
			if ((int)si[i].ssi_signo != SIGRTMIN + 2 || si[i].ssi_int != (int32_t)(got * 3 + 1) ||
			    si[i].ssi_code != SI_QUEUE)
				order_bad++;
			got++;
			if (got % 40 == 0)
				printf("received %ld signals\n", got);
		}
		sleep_ms(3); /* slower than a burst: signals queue up */
	}
	pthread_join(t, NULL);
	sigpending(&set);
	printf("signalfd: %ld signals in order, SIGUSR1 seen, pending left: %s\n", got,
	       sigismember(&set, SIGRTMIN + 2) ? "yes" : "none");
	if (order_bad) {
		printf("FAIL %d signals out of order or with a wrong payload\n", order_bad);
		rc = 1;
	}
	printf("signalfd: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
