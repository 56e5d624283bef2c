/* procstate: process and thread state the kernel keeps outside memory,
 * set once and checked at every round.
 *
 * State exercised: each thread's personality (two threads, two different
 * ones), name (PR_SET_NAME) and timer slack; the process's oom_score_adj,
 * PR_SET_THP_DISABLE, the child subreaper flag, PR_SET_DUMPABLE (0), the
 * parent-death signal and PR_SET_KEEPCAPS; memory locks: a region locked
 * with mlock (every page resident), one locked with mlock2(MLOCK_ONFAULT)
 * of which one page only was touched (the others must stay absent), and
 * mlockall(MCL_FUTURE | MCL_ONFAULT): a mapping made at any later round is
 * locked on fault. Everything is read back from the kernel (prctl,
 * personality, /proc/self/oom_score_adj, /proc/self/smaps VmFlags, mincore),
 * never from the program's own variables.
 * Usage: procstate [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <unistd.h>

#define LOCKED_LEN (256 << 10)
#define ONFAULT_LEN (512 << 10)
#define MAIN_PERS (PER_LINUX | ADDR_NO_RANDOMIZE)
#define WORKER_PERS (PER_LINUX | UNAME26 | SHORT_INODE)
#define MAIN_SLACK 123457UL
#define WORKER_SLACK 77777UL

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void fail(const char *what, long got, long want)
{
	printf("FAIL %s: %ld, expected %ld\n", what, got, want);
	fflush(stdout);
	exit(1);
}

/* The VmFlags of the mapping starting at addr: 1 when it has word w. */
static int vmflag(const void *addr, const char *w)
{
	char line[512], head[32];
	int found = 0, in = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		fail("open /proc/self/smaps", 0, 1);
	snprintf(head, sizeof(head), "%lx-", (unsigned long)addr);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, head, strlen(head)))
			in = 1;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			char pat[8];
			snprintf(pat, sizeof(pat), " %s ", w);
			found = strstr(line + 7, pat) != NULL;
			break;
		}
	}
	fclose(f);
	if (!in)
		fail("mapping in /proc/self/smaps", 0, 1);
	return found;
}

static long resident(const void *p, size_t len)
{
	unsigned char vec[ONFAULT_LEN / 4096];
	long n = 0;

	if (mincore((void *)p, len, vec) != 0)
		fail("mincore", -1, 0);
	for (size_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	return n;
}

static void check_thread(unsigned long pers, unsigned long slack, const char *name)
{
	char got[17] = {0};

	if ((unsigned long)personality(0xffffffff) != pers)
		fail(name, personality(0xffffffff), (long)pers);
	if ((unsigned long)prctl(PR_GET_TIMERSLACK) != slack)
		fail("timer slack", prctl(PR_GET_TIMERSLACK), (long)slack);
	prctl(PR_GET_NAME, got);
	if (strcmp(got, name))
		fail("thread name", 0, 1);
}

static volatile int stop;
static volatile long worker_rounds;

static void *worker(void *arg)
{
	(void)arg;
	personality(WORKER_PERS);
	prctl(PR_SET_TIMERSLACK, WORKER_SLACK);
	prctl(PR_SET_NAME, "ps-worker");
	while (!stop) {
		check_thread(WORKER_PERS, WORKER_SLACK, "ps-worker");
		worker_rounds++;
		usleep(20000);
	}
	check_thread(WORKER_PERS, WORKER_SLACK, "ps-worker");
	return NULL;
}

static void check_process(const unsigned char *locked, const unsigned char *onfault)
{
	char b[32] = {0};
	int sig = 0, reaper = 0;
	FILE *f = fopen("/proc/self/oom_score_adj", "re");

	if (!f || !fgets(b, sizeof(b), f))
		fail("read oom_score_adj", 0, 1);
	fclose(f);
	if (atoi(b) != 345)
		fail("oom_score_adj", atoi(b), 345);
	if (prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) != 1)
		fail("PR_GET_THP_DISABLE", prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0), 1);
	prctl(PR_GET_CHILD_SUBREAPER, &reaper);
	if (reaper != 1)
		fail("PR_GET_CHILD_SUBREAPER", reaper, 1);
	if (prctl(PR_GET_DUMPABLE) != 0)
		fail("PR_GET_DUMPABLE", prctl(PR_GET_DUMPABLE), 0);
	prctl(PR_GET_PDEATHSIG, &sig);
	if (sig != SIGWINCH)
		fail("PR_GET_PDEATHSIG", sig, SIGWINCH);
	if (prctl(PR_GET_KEEPCAPS) != 1)
		fail("PR_GET_KEEPCAPS", prctl(PR_GET_KEEPCAPS), 1);
	if (!vmflag(locked, "lo") || vmflag(locked, "lf"))
		fail("mlock'd region locked (lo, not lf)", 0, 1);
	if (resident(locked, LOCKED_LEN) != LOCKED_LEN / 4096)
		fail("mlock'd region resident pages", resident(locked, LOCKED_LEN), LOCKED_LEN / 4096);
	if (!vmflag(onfault, "lo") || !vmflag(onfault, "lf"))
		fail("mlock2(MLOCK_ONFAULT) region locked on fault (lo lf)", 0, 1);
	if (resident(onfault, ONFAULT_LEN) != 1)
		fail("mlock2(MLOCK_ONFAULT) region resident pages", resident(onfault, ONFAULT_LEN), 1);
	/* MCL_FUTURE | MCL_ONFAULT: a new mapping is locked, nothing faulted in */
	{
		void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			fail("mmap", -1, 0);
		if (!vmflag(p, "lo") || !vmflag(p, "lf"))
			fail("a new mapping under mlockall(MCL_FUTURE|MCL_ONFAULT) (lo lf)", 0, 1);
		if (resident(p, 65536) != 0)
			fail("a new mapping's resident pages", resident(p, 65536), 0);
		munmap(p, 65536);
	}
}

int main(int argc, char **argv)
{
	int rounds = (int)(30 * app_scale(argc, argv));
	unsigned char *locked, *onfault;
	uint64_t sum = 0, want = 0;
	pthread_t th;
	FILE *f;

	if (rounds < 2)
		rounds = 2;
	prctl(PR_SET_NAME, "ps-main");
	prctl(PR_SET_TIMERSLACK, MAIN_SLACK);
	if (personality(MAIN_PERS) < 0)
		fail("personality", -1, 0);
	if (!(f = fopen("/proc/self/oom_score_adj", "we")) || fprintf(f, "345\n") < 0 || fclose(f) != 0)
		fail("write oom_score_adj", -1, 0);
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0 || prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 ||
	    prctl(PR_SET_PDEATHSIG, SIGWINCH) != 0 || prctl(PR_SET_KEEPCAPS, 1) != 0)
		fail("prctl", -1, 0);
	locked = mmap(NULL, LOCKED_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	onfault = mmap(NULL, ONFAULT_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (locked == MAP_FAILED || onfault == MAP_FAILED)
		fail("mmap", -1, 0);
	for (size_t i = 0; i < LOCKED_LEN; i++) {
		locked[i] = (unsigned char)(i * 7 + 3);
		want += locked[i];
	}
	if (mlock(locked, LOCKED_LEN) != 0 || mlock2(onfault, ONFAULT_LEN, MLOCK_ONFAULT) != 0)
		fail("mlock", -1, 0);
	onfault[0] = 42;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		fail("pthread_create", -1, 0);
	/* after the thread: its stack need not be locked */
	if (mlockall(MCL_FUTURE | MCL_ONFAULT) != 0)
		fail("mlockall", -1, 0);
	prctl(PR_SET_DUMPABLE, 0);
	for (int r = 0; r < rounds; r++) {
		check_thread(MAIN_PERS, MAIN_SLACK, "ps-main");
		check_process(locked, onfault);
		usleep(100000);
	}
	stop = 1;
	pthread_join(th, NULL);
	for (size_t i = 0; i < LOCKED_LEN; i++)
		sum += locked[i];
	if (sum != want || onfault[0] != 42)
		fail("locked memory contents", (long)sum, (long)want);
	printf("procstate: %d rounds: personality, names, timer slack per thread; oom_score_adj, THP disabled, "
	       "subreaper, not dumpable, pdeathsig, keepcaps; mlock, mlock2 on fault, mlockall future on fault: ok\n",
	       rounds);
	printf("procstate: worker ran: %s\n", worker_rounds > 0 ? "yes" : "no");
	return 0;
}
