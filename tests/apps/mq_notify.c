/* mq_notify: a POSIX message queue's notification registration (mq_notify)
 * comes back: the same process registered, with the same event, and the
 * signal it sends carries the same value.
 *
 * State exercised: two queues. In each period of 10 steps (100 ms each)
 * the process registers for queue A's notification with SIGUSR1 and the
 * period's value (SIGEV_SIGNAL, sival_int), through A's descriptor in
 * even periods and through a duplicate of it (dup) in odd ones (the
 * kernel holds one registration per queue, whichever descriptor made it),
 * and for queue B's with SIGEV_NONE. At every step a vfork child closes
 * the duplicate and exits (a close by another process leaves the
 * registration). At every step a second registration must fail with EBUSY
 * (the registration is there) and no signal has come. At the period's end
 * a message sent to each queue sends the notifications: exactly one
 * SIGUSR1, with si_code SI_MESGQ and the period's value; queue B's is
 * gone too (registering again succeeds). A restore that lost a
 * registration fails at the next step (EBUSY expected), one with the
 * wrong value at the period's end. Prints only deterministic lines; exits
 * 1 after a FAIL line.
 * Usage: mq_notify [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PERIOD 10

static volatile sig_atomic_t got, got_code, got_value;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *what, int step, long r)
{
	printf("FAIL %s at step %d (%ld, errno %d)\n", what, step, r, errno);
	return 1;
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	got_code = si->si_code;
	got_value = si->si_value.sival_int;
	got++;
}

int main(int argc, char **argv)
{
	int periods = (int)(3 * app_scale(argc, argv) + 0.5), bad = 0;
	struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART};
	struct mq_attr at = {.mq_maxmsg = 4, .mq_msgsize = 16};
	struct timespec nap = {0, 100 * 1000000L};
	char na[64], nb[64], buf[16];
	mqd_t a, b, a2;

	snprintf(na, sizeof(na), "/mq_notify-a-%d", (int)getpid());
	snprintf(nb, sizeof(nb), "/mq_notify-b-%d", (int)getpid());
	if (sigaction(SIGUSR1, &sa, NULL) < 0 || (a = mq_open(na, O_RDWR | O_CREAT | O_EXCL, 0600, &at)) == (mqd_t)-1 ||
	    (b = mq_open(nb, O_RDWR | O_CREAT | O_EXCL, 0600, &at)) == (mqd_t)-1 || (a2 = dup(a)) < 0)
		return fail("mq_open", 0, -1);
	for (int p = 0; p < periods && !bad; p++) {
		struct sigevent sig = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
		struct sigevent none = {.sigev_notify = SIGEV_NONE};
		int value = 7000 + p;
		long r;

		sig.sigev_value.sival_int = value;
		if ((r = mq_notify(p % 2 ? a2 : a, &sig)) != 0)
			bad = fail("registering for queue A", p * PERIOD, r);
		else if ((r = mq_notify(b, &none)) != 0)
			bad = fail("registering for queue B", p * PERIOD, r);
		for (int s = 0; s < PERIOD && !bad; s++) {
			int step = p * PERIOD + s, st = 0;
			pid_t kid = vfork();
			if (kid == 0) {
				close(a2);
				_exit(0);
			}
			if (kid < 0 || waitpid(kid, &st, 0) != kid || st != 0)
				bad = fail("a vfork child closing the duplicate", step, kid);
			else if (mq_notify(a, &sig) != -1 || errno != EBUSY)
				bad = fail("queue A's registration still there (EBUSY)", step, 0);
			else if (mq_notify(b, &none) != -1 || errno != EBUSY)
				bad = fail("queue B's registration still there (EBUSY)", step, 0);
			else if (got != p)
				bad = fail("no notification before a message", step, got);
			nanosleep(&nap, NULL);
		}
		if (bad)
			break;
		if (mq_send(a, "a", 1, 0) < 0 || mq_send(b, "b", 1, 0) < 0)
			bad = fail("mq_send", p * PERIOD + PERIOD, -1);
		for (int i = 0; i < 200 && got != p + 1 && !bad; i++)
			nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
		if (bad)
			break;
		if (got != p + 1 || got_code != SI_MESGQ || got_value != value)
			bad = fail("the notification's signal (count, SI_MESGQ, the period's value)", p * PERIOD + PERIOD,
				   got_value);
		else if (mq_receive(a, buf, sizeof(buf), NULL) != 1 || mq_receive(b, buf, sizeof(buf), NULL) != 1)
			bad = fail("the messages", p * PERIOD + PERIOD, -1);
		else if (mq_notify(b, &none) != 0 || mq_notify(b, NULL) != 0)
			bad = fail("queue B's registration gone with its notification", p * PERIOD + PERIOD, -1);
	}
	mq_unlink(na);
	mq_unlink(nb);
	printf("%s\n", bad ? "FAIL mq_notify" : "mq_notify: every registration and its signal, as bare");
	return bad;
}
