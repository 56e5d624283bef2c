/* mp_tstp: children stopped by job-control signals across a restore.
 *
 * State exercised: two forked children, each in a process group of its
 * own (so that the job-control stop signals stop them: their groups are
 * not orphaned, the parent's is another of the same session), count in
 * shared memory, one step a millisecond. The parent stops the first with
 * SIGTSTP and takes that stop's report (waitpid WUNTRACED), and stops the
 * second with SIGTTIN and leaves its report to be taken. For most of the
 * run it checks, every 50 ms, that both children stay stopped (state T,
 * counters unchanged), that the first stop is not reported again, and
 * that the second is still to be reported, by SIGTTIN (waitid WNOWAIT).
 * Then it takes the second report (exactly one, SIGTTIN), continues both
 * and sees each continue once and both count on. A restore that stopped
 * the second child with SIGSTOP would report SIGSTOP.
 * Usage: mp_tstp [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
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

static volatile uint64_t *counts;

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

/* The stop of kid still to be reported, by which signal (0: none). */
static int pending_stop(pid_t kid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)kid, &si, WSTOPPED | WNOWAIT | WNOHANG) < 0 || si.si_pid != kid ||
	    si.si_code != CLD_STOPPED)
		return 0;
	return si.si_status;
}

/* kid stopped by sig, its report posted (the kernel posts it a moment
 * after the threads show T). */
static int wait_stop(pid_t kid, int sig)
{
	for (int i = 0; i < 2000; i++) {
		if (state_of(kid) == 'T' && pending_stop(kid) == sig)
			return 0;
		nap_ms(1);
	}
	return -1;
}

int main(int argc, char **argv)
{
	long hold_ms = (long)(2400 * app_scale(argc, argv));
	pid_t kid[2];
	uint64_t at_stop[2];
	int bad = 0, st;

	setvbuf(stdout, NULL, _IOLBF, 0);
	counts = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counts == MAP_FAILED)
		return 1;
	for (int w = 0; w < 2; w++) {
		if ((kid[w] = fork()) < 0)
			return 1;
		if (kid[w] == 0) {
			setpgid(0, 0);
			for (;;) {
				counts[w]++;
				nap_ms(1);
			}
		}
		setpgid(kid[w], kid[w]); /* (whichever of the two comes first) */
	}
	nap_ms(150);
	kill(kid[0], SIGTSTP);
	if (waitpid(kid[0], &st, WUNTRACED) != kid[0] || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGTSTP) {
		printf("mp_tstp: child 0's stop by SIGTSTP not reported (status %#x)\n", st);
		return 1;
	}
	kill(kid[1], SIGTTIN);
	if (wait_stop(kid[1], SIGTTIN) < 0) {
		printf("mp_tstp: child 1 did not stop by SIGTTIN (state %c)\n", state_of(kid[1]));
		return 1;
	}
	nap_ms(20);
	for (int w = 0; w < 2; w++)
		at_stop[w] = counts[w];
	for (long t = 0; t < hold_ms && !bad; t += 50) {
		int sig;
		nap_ms(50);
		for (int w = 0; w < 2; w++) {
			char s = state_of(kid[w]);
			if (s != 'T' || counts[w] != at_stop[w]) {
				printf("mp_tstp: child %d ran while stopped (state %c, count %+lld)\n", w, s ? s : '?',
				       (long long)(counts[w] - at_stop[w]));
				bad = 1;
			}
		}
		if (waitpid(kid[0], &st, WUNTRACED | WNOHANG) != 0) {
			printf("mp_tstp: child 0's stop reported again\n");
			bad = 1;
		}
		if ((sig = pending_stop(kid[1])) != SIGTTIN) {
			printf("mp_tstp: child 1's stop to be reported names signal %d, not SIGTTIN (%d)\n", sig, SIGTTIN);
			bad = 1;
		}
	}
	if (bad)
		return 1;
	if (waitpid(kid[1], &st, WUNTRACED | WNOHANG) != kid[1] || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGTTIN ||
	    waitpid(kid[1], &st, WUNTRACED | WNOHANG) != 0) {
		printf("mp_tstp: child 1's stop by SIGTTIN not reported exactly once\n");
		return 1;
	}
	for (int w = 0; w < 2; w++) {
		kill(kid[w], SIGCONT);
		if (waitpid(kid[w], &st, WCONTINUED) != kid[w] || !WIFCONTINUED(st)) {
			printf("mp_tstp: child %d's continue not reported\n", w);
			return 1;
		}
	}
	nap_ms(150);
	for (int w = 0; w < 2; w++)
		if (counts[w] <= at_stop[w]) {
			printf("mp_tstp: child %d did not run on after SIGCONT\n", w);
			bad = 1;
		}
	for (int w = 0; w < 2; w++) {
		kill(kid[w], SIGKILL);
		waitpid(kid[w], &st, 0);
	}
	if (bad)
		return 1;
	printf("mp_tstp: 2 children stopped by SIGTSTP and SIGTTIN and continued; stop reports as expected\n");
	return 0;
}
