/* mp_stopped: children the job stopped (SIGSTOP) across a restore.
 *
 * State exercised: two forked children count in shared memory, one step
 * a millisecond. The parent stops both with SIGSTOP; it waits for the
 * first one's stop (waitpid WUNTRACED) and leaves the second one's stop
 * unreported, and sends the first a SIGUSR1, which stays pending while it
 * is stopped. The parent counts its SIGCHLDs by kind. For most of the run
 * it checks, every 50 ms, that both children are still stopped (state T,
 * their counters unchanged: no code of theirs ran), that the first one's
 * stop is not reported again and the second one's still is (waitid
 * WNOWAIT). Then it takes the second one's report (exactly one, SIGSTOP),
 * continues both (SIGCONT): the first runs its SIGUSR1 handler, both
 * count on, and the parent sees each continue once (waitpid WCONTINUED,
 * SIGCHLD) and two stops in all, as a bare run does.
 * Usage: mp_stopped [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct shared {
	volatile uint64_t count[2];
	volatile int usr1[2];
};

static struct shared *sh;
static volatile sig_atomic_t chld_stopped, chld_continued, chld_other;

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

static int me;

static void on_usr1(int sig)
{
	(void)sig;
	sh->usr1[me] = 1;
}

static void on_chld(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (si->si_code == CLD_STOPPED)
		chld_stopped++;
	else if (si->si_code == CLD_CONTINUED)
		chld_continued++;
	else if (si->si_code != CLD_EXITED && si->si_code != CLD_KILLED)
		chld_other++;
}

static char state_of(pid_t pid)
{
	char path[64], buf[512];
	const char *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

static void child(int who)
{
	struct sigaction sa;

	me = who;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	for (;;) {
		sh->count[who]++;
		nap_ms(1);
	}
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	long hold_ms = (long)(2400 * scale);
	struct sigaction sa;
	pid_t kid[2];
	uint64_t at_stop[2];
	int bad = 0, st;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_chld;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	for (int w = 0; w < 2; w++) {
		if ((kid[w] = fork()) < 0)
			return 1;
		if (kid[w] == 0)
			child(w);
	}
	nap_ms(150);
	/* one at a time, each SIGCHLD handled before the next (two pending
	 * would be one) */
	kill(kid[0], SIGSTOP);
	/* the first one's stop taken now; the second one's left to report */
	if (waitpid(kid[0], &st, WUNTRACED) != kid[0] || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		printf("mp_stopped: child 0's stop not reported (status %#x)\n", st);
		return 1;
	}
	for (int i = 0; i < 2000 && chld_stopped < 1; i++)
		nap_ms(1);
	kill(kid[1], SIGSTOP);
	for (int i = 0; i < 2000 && (state_of(kid[1]) != 'T' || chld_stopped < 2); i++)
		nap_ms(1);
	kill(kid[0], SIGUSR1); /* pending while it is stopped */
	nap_ms(20);
	for (int w = 0; w < 2; w++)
		at_stop[w] = sh->count[w];
	for (long t = 0; t < hold_ms && !bad; t += 50) {
		siginfo_t si;
		nap_ms(50);
		for (int w = 0; w < 2; w++) {
			char s = state_of(kid[w]);
			if (s != 'T' || sh->count[w] != at_stop[w] || sh->usr1[w]) {
				printf("mp_stopped: child %d ran while stopped (state %c, count %+lld, SIGUSR1 %s)\n", w,
				       s ? s : '?', (long long)(sh->count[w] - at_stop[w]), sh->usr1[w] ? "handled" : "not");
				bad = 1;
			}
		}
		if (waitpid(kid[0], &st, WUNTRACED | WNOHANG) != 0) {
			printf("mp_stopped: child 0's stop reported again\n");
			bad = 1;
		}
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)kid[1], &si, WSTOPPED | WNOWAIT | WNOHANG) < 0 || si.si_pid != kid[1] ||
		    si.si_code != CLD_STOPPED || si.si_status != SIGSTOP) {
			printf("mp_stopped: child 1's stop no longer waits to be reported\n");
			bad = 1;
		}
	}
	if (bad)
		return 1;
	if (waitpid(kid[1], &st, WUNTRACED | WNOHANG) != kid[1] || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP ||
	    waitpid(kid[1], &st, WUNTRACED | WNOHANG) != 0) {
		printf("mp_stopped: child 1's stop not reported exactly once\n");
		return 1;
	}
	for (int w = 0; w < 2; w++) {
		kill(kid[w], SIGCONT);
		if (waitpid(kid[w], &st, WCONTINUED) != kid[w] || !WIFCONTINUED(st)) {
			printf("mp_stopped: child %d's continue not reported\n", w);
			return 1;
		}
		for (int i = 0; i < 2000 && chld_continued < w + 1; i++)
			nap_ms(1);
	}
	nap_ms(150);
	for (int w = 0; w < 2; w++)
		if (sh->count[w] <= at_stop[w]) {
			printf("mp_stopped: child %d did not run on after SIGCONT\n", w);
			bad = 1;
		}
	if (!sh->usr1[0] || sh->usr1[1]) {
		printf("mp_stopped: SIGUSR1 handled by child 0 %s, by child 1 %s\n", sh->usr1[0] ? "yes" : "no",
		       sh->usr1[1] ? "yes" : "no");
		bad = 1;
	}
	for (int w = 0; w < 2; w++) {
		kill(kid[w], SIGTERM);
		waitpid(kid[w], &st, 0);
	}
	if (chld_stopped != 2 || chld_continued != 2 || chld_other != 0) {
		printf("mp_stopped: SIGCHLD: %d stops, %d continues, %d others (2, 2, 0 expected)\n", (int)chld_stopped,
		       (int)chld_continued, (int)chld_other);
		bad = 1;
	}
	if (bad)
		return 1;
	printf("mp_stopped: 2 children stopped and continued; stop reports, SIGCHLD and a pending SIGUSR1 as "
	       "expected\n");
	return 0;
}
