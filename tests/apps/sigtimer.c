/* sigtimer: signal handlers driven by interval timers.
 *
 * State exercised: an ITIMER_REAL interval timer (SIGALRM), a POSIX timer
 * (timer_create, SIGEV_SIGNAL with a real-time signal and a payload), a
 * one-shot alarm() armed for later, installed handlers with SA_SIGINFO and
 * SA_RESTART, and the main thread waiting in sigsuspend or pause. All timers
 * must keep firing after a restore. Only timing-independent facts are
 * printed: that each count reached its target and that every siginfo was
 * what the timer promised.
 * Usage: sigtimer [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t alrm_ticks, rt_ticks, rt_bad, alarm_fired;
static volatile sig_atomic_t alarm_mode; /* 0: SIGALRM is the itimer, 1: the one-shot alarm */

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void on_alrm(int sig)
{
	(void)sig;
	if (alarm_mode)
		alarm_fired++;
	else
		alrm_ticks++;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (sig != SIGRTMIN + 1 || si->si_code != SI_TIMER || si->si_value.sival_int != 4242)
		rt_bad++;
	rt_ticks++;
}

/* Busy work between ticks, so that a checkpoint also finds the thread
 * running user code with a signal about to arrive. */
static uint64_t spin(uint64_t x)
{
	for (int i = 0; i < 20000; i++)
		x = x * 6364136223846793005ULL + 1;
	return x;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	int want_alrm = (int)(300 * scale), want_rt = (int)(250 * scale);
	struct sigaction sa;
	struct itimerval itv;
	struct sigevent sev;
	struct itimerspec its;
	timer_t tid;
	sigset_t block, old;
	uint64_t x = 1;
	int rc = 0;

	if (want_alrm < 1)
		want_alrm = 1;
	if (want_rt < 1)
		want_rt = 1;
	printf("sigtimer: itimer target %d ticks, posix timer target %d ticks\n", want_alrm, want_rt);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alrm;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_sigaction = on_rt;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGRTMIN + 1, &sa, NULL);

	/* Phase 1: itimer every 5 ms; half the time busy, half in sigsuspend. */
	itv.it_interval = (struct timeval){ 0, 5000 };
	itv.it_value = itv.it_interval;
	setitimer(ITIMER_REAL, &itv, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGALRM);
	while (alrm_ticks < want_alrm / 2)
		x = spin(x);
	sigprocmask(SIG_BLOCK, &block, &old);
	while (alrm_ticks < want_alrm)
		sigsuspend(&old);
	sigprocmask(SIG_SETMASK, &old, NULL);
	itv = (struct itimerval){ { 0, 0 }, { 0, 0 } };
	setitimer(ITIMER_REAL, &itv, NULL);
	getitimer(ITIMER_REAL, &itv);
	printf("itimer: reached %d ticks, disarmed %s\n", want_alrm,
	       itv.it_value.tv_sec == 0 && itv.it_value.tv_usec == 0 ? "yes" : "no");

	/* Phase 2: POSIX timer with a payload, plus a one-shot alarm in 1 s
	 * that must fire while the POSIX timer is ticking. */
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = SIGRTMIN + 1;
	sev.sigev_value.sival_int = 4242;
	if (timer_create(CLOCK_MONOTONIC, &sev, &tid) != 0) {
		printf("FAIL timer_create\n");
		return 1;
	}
	its.it_interval = (struct timespec){ 0, 5000000 };
	its.it_value = its.it_interval;
	timer_settime(tid, 0, &its, NULL);
	alarm_mode = 1;
	alarm(1);
	while (rt_ticks < want_rt || !alarm_fired) {
		if (rt_ticks % 2)
			x = spin(x);
		else
			pause();
	}
	its = (struct itimerspec){ { 0, 0 }, { 0, 0 } };
	timer_settime(tid, 0, &its, NULL);
	timer_gettime(tid, &its);
	timer_delete(tid);
	printf("posix timer: reached %d ticks, bad siginfo %d, disarmed %s\n", want_rt, (int)rt_bad,
	       its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0 ? "yes" : "no");
	printf("alarm: fired %s\n", alarm_fired == 1 ? "once" : "wrong number of times");
	if (rt_bad || alarm_fired != 1)
		rc = 1;
	printf("sigtimer: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
