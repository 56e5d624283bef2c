/* sigpending: signal masks, dispositions and signals left pending.
 *
 * State exercised: per-thread blocked masks, process-directed pending
 * signals (a standard one and a queue of real-time ones with payloads),
 * thread-directed pending signals (pthread_sigqueue to a thread that blocks
 * them), ignored SIGPIPE (a write to a pipe without readers must return
 * EPIPE, not kill), and a one-shot handler (SA_RESETHAND) already used once.
 * The signals stay pending through a long computation, so every checkpoint
 * sees them; at the end they are unblocked and must arrive once, in order,
 * with their payloads.
 * Usage: sigpending [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NQ 5

static volatile sig_atomic_t usr1_count, hup_count, rt_count, rt_bad, thr_count, thr_bad;
static long rounds;
static pthread_barrier_t bar;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1_count++;
}

static void on_hup(int sig)
{
	(void)sig;
	hup_count++;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig == SIGRTMIN + 3) {
		if (si->si_value.sival_int != 100 + rt_count || si->si_code != SI_QUEUE)
			rt_bad++;
		rt_count++;
	} else {
		if (si->si_value.sival_int != 555)
			thr_bad++;
		thr_count++;
	}
}

static uint64_t compute(uint64_t x)
{
	for (long i = 0; i < 250000000; i++)
		x = x * 2862933555777941757ULL + 3037000493ULL;
	return x;
}

static int pending(int sig)
{
	sigset_t s;

	sigpending(&s);
	return sigismember(&s, sig);
}

static void *thread_main(void *arg)
{
	sigset_t s;
	uint64_t x = 11;

	(void)arg;
	sigemptyset(&s);
	sigaddset(&s, SIGRTMIN + 4);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	pthread_barrier_wait(&bar); /* mask in place: main may queue now */
	pthread_barrier_wait(&bar); /* queued */
	for (long r = 0; r < rounds; r++) {
		x = compute(x);
		if (!pending(SIGRTMIN + 4))
			thr_bad++;
	}
	pthread_sigmask(SIG_UNBLOCK, &s, NULL); /* delivered here, to this thread */
	return (void *)(uintptr_t)(x & 1);
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	sigset_t s;
	pthread_t t;
	int p[2], rc = 0, lost = 0;
	uint64_t x = 3;

	rounds = (long)(5 * app_scale(argc, argv));
	if (rounds < 1)
		rounds = 1;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_hup;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_sigaction = on_rt;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGRTMIN + 3, &sa, NULL);
	sigaction(SIGRTMIN + 4, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	raise(SIGHUP); /* the one-shot handler is used up now */

	sigemptyset(&s);
	sigaddset(&s, SIGUSR1);
	sigaddset(&s, SIGRTMIN + 3);
	pthread_sigmask(SIG_BLOCK, &s, NULL); /* inherited by the thread */
	pthread_barrier_init(&bar, NULL, 2);
	pthread_create(&t, NULL, thread_main, NULL);
	pthread_barrier_wait(&bar);
	kill(getpid(), SIGUSR1);
	kill(getpid(), SIGUSR1); /* coalesces with the first */
	for (int i = 0; i < NQ; i++)
		sigqueue(getpid(), SIGRTMIN + 3, (union sigval){ .sival_int = 100 + i });
	pthread_sigqueue(t, SIGRTMIN + 4, (union sigval){ .sival_int = 555 });
	pthread_barrier_wait(&bar);
	if (pipe(p) != 0)
		return 1;
	close(p[0]);
	printf("sigpending: 1 + %d pending signals in the process, 1 in a thread, %ld rounds\n", NQ, rounds);

	for (long r = 0; r < rounds; r++) {
		x = compute(x);
		errno = 0;
		int epipe = write(p[1], "x", 1) == -1 && errno == EPIPE;
		struct sigaction cur;
		sigaction(SIGHUP, NULL, &cur);
		int ok = pending(SIGUSR1) && pending(SIGRTMIN + 3) && epipe && cur.sa_handler == SIG_DFL &&
			 usr1_count == 0 && rt_count == 0;
		printf("round %ld: pending signals, ignored SIGPIPE and reset SIGHUP %s\n", r + 1,
		       ok ? "as expected" : "CHANGED");
		if (!ok)
			lost++;
	}
	pthread_join(t, NULL);
	pthread_sigmask(SIG_UNBLOCK, &s, NULL);
	printf("delivered: SIGUSR1 %d, queued %d of %d (bad %d), thread-directed %d (bad %d), SIGHUP %d\n",
	       (int)usr1_count, (int)rt_count, NQ, (int)rt_bad, (int)thr_count, (int)thr_bad, (int)hup_count);
	if (lost || usr1_count != 1 || rt_count != NQ || rt_bad || thr_count != 1 || thr_bad || hup_count != 1)
		rc = 1;
	printf("compute %016llx\n", (unsigned long long)x);
	printf("sigpending: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
