/* cpu_clocks: CPU time goes on across a checkpoint and a restore.
 *
 * State exercised: the kernel's CPU-time accounting of the job's processes
 * and threads. The parent and a second thread of it, and a child, burn CPU
 * in steps; at every step each checks that none of its readings went
 * back: CLOCK_PROCESS_CPUTIME_ID (also through clock_getcpuclockid),
 * CLOCK_THREAD_CPUTIME_ID (also through pthread_getcpuclockid), clock(),
 * getrusage (RUSAGE_SELF, RUSAGE_THREAD: user and system time, minor
 * faults) and times(). A restore that counted from the new process's 0
 * goes back by what was used before. At the end the child sends what its
 * getrusage counted and exits; the parent's wait4 of it, its
 * RUSAGE_CHILDREN and times()' children's time must hold at least that.
 * Then a new child must start near 0 (not from its parent's count), and
 * the parent execs itself ("exec NS US": its CPU clock and getrusage
 * before the exec, which the kernel keeps across it): the new program
 * must read at least as much, and again after an execveat ("exec2").
 * Usage: cpu_clocks [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int steps;
static volatile uint64_t sink;

static int64_t ns_of(clockid_t c)
{
	struct timespec t;

	if (clock_gettime(c, &t) != 0)
		return -1;
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t us_of(const struct timeval *tv)
{
	return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
}

static void burn(double ms)
{
	int64_t end = ns_of(CLOCK_THREAD_CPUTIME_ID) + (int64_t)(ms * 1e6);

	while (ns_of(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 1000; i++)
			sink = sink * 6364136223846793005ull + 1442695040888963407ull;
}

enum { R_PROC, R_PROC_ID, R_THREAD, R_THREAD_ID, R_CLOCK, R_SELF_U, R_SELF_S, R_SELF_FLT, R_THR_U, R_TIMES, R_N };
static const char *const rname[R_N] = {"CLOCK_PROCESS_CPUTIME_ID", "clock_getcpuclockid's clock",
				       "CLOCK_THREAD_CPUTIME_ID", "pthread_getcpuclockid's clock", "clock()",
				       "getrusage(RUSAGE_SELF) user time", "getrusage(RUSAGE_SELF) system time",
				       "getrusage(RUSAGE_SELF) minor faults", "getrusage(RUSAGE_THREAD) user time",
				       "times() user time"};

/* One thread's readings; 0: none went back. */
static int check(const char *who, int64_t last[R_N], int step)
{
	int64_t v[R_N];
	struct rusage ru, rt;
	struct tms tm;
	clockid_t pc, tc;
	int bad = 0;

	if (clock_getcpuclockid(0, &pc) != 0 || pthread_getcpuclockid(pthread_self(), &tc) != 0 ||
	    getrusage(RUSAGE_SELF, &ru) != 0 || getrusage(RUSAGE_THREAD, &rt) != 0 || times(&tm) == (clock_t)-1) {
		printf("FAIL %s: a clock could not be read: %s\n", who, strerror(errno));
		return 1;
	}
	v[R_PROC] = ns_of(CLOCK_PROCESS_CPUTIME_ID);
	v[R_PROC_ID] = ns_of(pc);
	v[R_THREAD] = ns_of(CLOCK_THREAD_CPUTIME_ID);
	v[R_THREAD_ID] = ns_of(tc);
	v[R_CLOCK] = (int64_t)clock();
	v[R_SELF_U] = us_of(&ru.ru_utime);
	v[R_SELF_S] = us_of(&ru.ru_stime);
	v[R_SELF_FLT] = ru.ru_minflt;
	v[R_THR_U] = us_of(&rt.ru_utime);
	v[R_TIMES] = (int64_t)tm.tms_utime;
	for (int i = 0; i < R_N; i++) {
		if (v[i] < last[i] && !bad) {
			printf("FAIL %s, step %d: %s went back (%lld, then %lld)\n", who, step, rname[i],
			       (long long)last[i], (long long)v[i]);
			bad = 1;
		}
		if (v[i] > last[i])
			last[i] = v[i];
	}
	return bad;
}

static void *second(void *arg)
{
	int64_t last[R_N] = {0};
	int *bad = arg;

	for (int i = 0; i < steps && !*bad; i++) {
		burn(5);
		*bad |= check("second thread", last, i);
		usleep(10000);
	}
	return NULL;
}

static int child_main(int wfd)
{
	int64_t last[R_N] = {0}, used;
	struct rusage ru;
	int bad = 0;

	for (int i = 0; i < steps && !bad; i++) {
		burn(6);
		bad |= check("child", last, i);
		usleep(10000);
	}
	getrusage(RUSAGE_SELF, &ru);
	used = us_of(&ru.ru_utime) + us_of(&ru.ru_stime);
	if (write(wfd, &used, sizeof(used)) != sizeof(used))
		return 3;
	return bad ? 2 : 0;
}

static int64_t self_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return us_of(&ru.ru_utime) + us_of(&ru.ru_stime);
}

/* A child made now: its CPU time starts near 0, as a new process's does. */
static int new_child_starts_at_0(void)
{
	int p[2];
	int64_t v[2] = {-1, -1};
	pid_t k;

	if (pipe(p) != 0 || (k = fork()) < 0)
		return 0;
	if (k == 0) {
		int64_t w[2] = {ns_of(CLOCK_PROCESS_CPUTIME_ID), self_us()};
		_exit(write(p[1], w, sizeof(w)) == sizeof(w) ? 0 : 1);
	}
	close(p[1]);
	if (read(p[0], v, sizeof(v)) != sizeof(v))
		v[0] = -1;
	close(p[0]);
	waitpid(k, NULL, 0);
	if (v[0] < 0 || v[0] > 50000000 || v[1] > 50000) {
		printf("FAIL a child made now starts at %lld ns of CPU (getrusage %lld us), not near 0\n",
		       (long long)v[0], (long long)v[1]);
		return 0;
	}
	return 1;
}

/* The program again after the parent's exec: CPU time the kernel kept. */
static int after_exec(char **argv)
{
	int64_t ns = strtoll(argv[2], NULL, 10), us = strtoll(argv[3], NULL, 10), now_ns, now_us;

	setvbuf(stdout, NULL, _IOLBF, 0);
	now_ns = ns_of(CLOCK_PROCESS_CPUTIME_ID);
	now_us = self_us();
	if (now_ns < ns || now_us < us) {
		printf("FAIL after the exec: CPU clock %lld ns, getrusage %lld us; before it %lld ns, %lld us\n",
		       (long long)now_ns, (long long)now_us, (long long)ns, (long long)us);
		printf("cpu_clocks: FAIL\n");
		return 1;
	}
	if (!strcmp(argv[1], "exec")) {
		/* once more, through execveat (not routed through execve) */
		char a[32], b[32], *nargv[] = {"cpu_clocks", "exec2", a, b, NULL};
		snprintf(a, sizeof(a), "%lld", (long long)now_ns);
		snprintf(b, sizeof(b), "%lld", (long long)now_us);
		execveat(AT_FDCWD, "/proc/self/exe", nargv, environ, 0);
		printf("FAIL execveat: %s\n", strerror(errno));
		return 1;
	}
	printf("cpu_clocks: no clock went back, through two execs too; the child's CPU time reached its parent\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && (!strcmp(argv[1], "exec") || !strcmp(argv[1], "exec2")))
		return after_exec(argv);
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double scale = s && atof(s) > 0 ? atof(s) : 1.0;
	int64_t last[R_N] = {0}, child_used = 0, waited, kids, kids_ticks;
	int p[2], bad = 0, bad2 = 0, st = 0;
	long hz = sysconf(_SC_CLK_TCK);
	struct rusage ru, rc;
	struct tms tm;
	pthread_t th;
	pid_t kid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	steps = (int)(150 * scale) > 4 ? (int)(150 * scale) : 4;
	if (pipe(p) != 0)
		return 1;
	if ((kid = fork()) == 0) {
		close(p[0]);
		_exit(child_main(p[1]));
	}
	close(p[1]);
	if (kid < 0 || pthread_create(&th, NULL, second, &bad2) != 0) {
		printf("FAIL setup\n");
		return 1;
	}
	printf("cpu_clocks: two threads and a child burning CPU, %d steps\n", steps);
	for (int i = 0; i < steps && !bad; i++) {
		burn(5);
		bad |= check("main thread", last, i);
		usleep(10000);
	}
	pthread_join(th, NULL);
	if (read(p[0], &child_used, sizeof(child_used)) != sizeof(child_used))
		child_used = -1;
	if (wait4(kid, &st, 0, &ru) != kid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("FAIL the child: status %#x\n", st);
		bad = 1;
	}
	getrusage(RUSAGE_CHILDREN, &rc);
	times(&tm);
	waited = us_of(&ru.ru_utime) + us_of(&ru.ru_stime);
	kids = us_of(&rc.ru_utime) + us_of(&rc.ru_stime);
	kids_ticks = (int64_t)(tm.tms_cutime + tm.tms_cstime) * 1000000 / hz;
	/* the child's own count, read just before it exited, is at most what
	 * the kernel hands its parent (times(): rounded to ticks) */
	if (child_used < 0 || waited < child_used || kids < child_used || kids_ticks + 2000000 / hz < child_used) {
		printf("FAIL the child counted %lld us of CPU; its parent's wait4 says %lld, RUSAGE_CHILDREN %lld, "
		       "times() %lld\n",
		       (long long)child_used, (long long)waited, (long long)kids, (long long)kids_ticks);
		bad = 1;
	}
	if (!bad && !bad2 && !new_child_starts_at_0())
		bad = 1;
	if (bad || bad2) {
		printf("cpu_clocks: FAIL\n");
		return 1;
	}
	{
		char self[4096], a[32], b[32];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n <= 0)
			return 1;
		self[n] = 0;
		snprintf(a, sizeof(a), "%lld", (long long)ns_of(CLOCK_PROCESS_CPUTIME_ID));
		snprintf(b, sizeof(b), "%lld", (long long)self_us());
		execl(self, "cpu_clocks", "exec", a, b, (char *)NULL);
		printf("FAIL exec: %s\n", strerror(errno));
		return 1;
	}
}
