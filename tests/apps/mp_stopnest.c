/* mp_stopnest: a stopped process whose child is stopped too, across a
 * restore.
 *
 * State exercised: the main process forks a child C, C forks a grandchild
 * G; C and G count in shared memory, one step a millisecond. C stops G
 * (SIGSTOP) and takes that stop's report; then the main process stops C
 * (SIGSTOP) and leaves its report to be taken. For most of the run the
 * main process checks, every 50 ms, that both stay stopped with their
 * counters unchanged and that C's stop is still to be reported. Then it
 * takes C's report (exactly one, SIGSTOP) and continues C, which must
 * find G still stopped and its stop not reported again (a restore stops
 * G anew, which reports to C: C's record of what it had taken must come
 * back, though C was stopped itself when it made it), continue G and see
 * it continue; both count on.
 * Usage: mp_stopnest [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
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
	volatile uint64_t count[2]; /* C, G */
	volatile int go_stop_g;     /* main -> C: stop G now */
	volatile int g_stopped;     /* C -> main: G is stopped, its report left */
	volatile int verdict;       /* C, after its continue: 1 good, -1 bad */
	char why[200];
};

static struct shared *sh;

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

static int pending_stop(pid_t kid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)kid, &si, WSTOPPED | WNOWAIT | WNOHANG) < 0 || si.si_pid != kid ||
	    si.si_code != CLD_STOPPED)
		return 0;
	return si.si_status;
}

static void bad(const char *what)
{
	snprintf(sh->why, sizeof(sh->why), "%s", what);
	sh->verdict = -1;
}

/* C: counts; stops G when told; once continued, takes G's stop report. */
static void middle(void)
{
	pid_t g = fork();
	uint64_t at;
	int st;

	if (g < 0)
		_exit(1);
	if (g == 0) {
		for (;;) {
			sh->count[1]++;
			nap_ms(1);
		}
	}
	while (!sh->go_stop_g) {
		sh->count[0]++;
		nap_ms(1);
	}
	kill(g, SIGSTOP);
	if (waitpid(g, &st, WUNTRACED) != g || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP)
		bad("G's stop was not reported to C");
	sh->g_stopped = 1;
	/* stopped here by the main process; what follows runs after its SIGCONT */
	for (;;) {
		sh->count[0]++;
		nap_ms(1);
		if (sh->go_stop_g == 2)
			break;
	}
	if (sh->verdict)
		; /* (said already) */
	else if (state_of(g) != 'T')
		bad("G was not stopped when C went on");
	else if (waitpid(g, &st, WUNTRACED | WNOHANG) != 0)
		bad("G's stop, which C had taken, was reported to C again");
	at = sh->count[1];
	kill(g, SIGCONT);
	if (!sh->verdict && (waitpid(g, &st, WCONTINUED) != g || !WIFCONTINUED(st)))
		bad("G's continue was not reported to C");
	nap_ms(100);
	if (!sh->verdict && sh->count[1] <= at)
		bad("G did not run on after its SIGCONT");
	kill(g, SIGKILL);
	waitpid(g, &st, 0);
	if (!sh->verdict)
		sh->verdict = 1;
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	long hold_ms = (long)(2400 * app_scale(argc, argv));
	uint64_t at_stop[2];
	int failed = 0, st;
	pid_t c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	if ((c = fork()) < 0)
		return 1;
	if (c == 0)
		middle();
	nap_ms(150);
	sh->go_stop_g = 1;
	for (int i = 0; i < 2000 && !sh->g_stopped; i++)
		nap_ms(1);
	kill(c, SIGSTOP);
	/* (the kernel posts the report a moment after the threads show T) */
	for (int i = 0; i < 2000 && (state_of(c) != 'T' || pending_stop(c) != SIGSTOP); i++)
		nap_ms(1);
	if (!sh->g_stopped || state_of(c) != 'T') {
		printf("mp_stopnest: C or G did not stop\n");
		return 1;
	}
	nap_ms(20);
	for (int w = 0; w < 2; w++)
		at_stop[w] = sh->count[w];
	for (long t = 0; t < hold_ms && !failed; t += 50) {
		nap_ms(50);
		if (state_of(c) != 'T' || sh->count[0] != at_stop[0] || sh->count[1] != at_stop[1]) {
			printf("mp_stopnest: C or G ran while stopped (C state %c, counts %+lld %+lld)\n", state_of(c),
			       (long long)(sh->count[0] - at_stop[0]), (long long)(sh->count[1] - at_stop[1]));
			failed = 1;
		} else if (pending_stop(c) != SIGSTOP) {
			printf("mp_stopnest: C's stop no longer waits to be reported\n");
			failed = 1;
		}
	}
	if (!failed && (waitpid(c, &st, WUNTRACED | WNOHANG) != c || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP ||
			waitpid(c, &st, WUNTRACED | WNOHANG) != 0)) {
		printf("mp_stopnest: C's stop not reported exactly once\n");
		failed = 1;
	}
	sh->go_stop_g = 2;
	kill(c, SIGCONT);
	for (int i = 0; i < 5000 && !sh->verdict; i++)
		nap_ms(1);
	if (!failed && sh->verdict != 1) {
		printf("mp_stopnest: %s\n", sh->verdict ? sh->why : "C gave no verdict");
		failed = 1;
	}
	kill(c, SIGKILL);
	waitpid(c, &st, 0);
	if (failed)
		return 1;
	printf("mp_stopnest: a stopped child of a stopped process: stops reported once each, both continued\n");
	return 0;
}
