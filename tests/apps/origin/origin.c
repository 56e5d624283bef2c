/* The run's origin: a proof, for the suites, that a job came back from a
 * checkpoint rather than starting again.
 *
 * Linked into every test application. Only when CKPT_TEST_ORIGIN=1 is in
 * the environment (the suites set it; a bare run prints nothing extra), the
 * program's first process draws a random 64-bit value at start-up, keeps
 * it in memory and in its environment, prints "ck-origin START <hex>" on
 * stderr, and prints "ck-origin END <hex>" when it exits normally. A job
 * restored from a checkpoint holds the value of the run that started it
 * and runs no start-up code again: it prints no START line and ends with
 * the first run's value. A job that started afresh prints a START line of
 * its own and ends with a value no earlier run printed.
 *
 * Descendants (forked or exec'd) find "PID:HEX" in the environment and keep
 * quiet; a first process that exec's itself finds its own pid there and
 * takes the value over, so its END line still carries the first value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define ORIGIN_ENV "CKPT_TEST_ORIGIN"

static unsigned long long origin_value;
static pid_t origin_pid;

static void origin_say(const char *what)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "ck-origin %s %016llx\n", what, origin_value);

	if (n > 0 && write(2, line, (size_t)n) < 0) {
		/* stderr closed: nothing to prove with */
	}
}

__attribute__((constructor)) static void origin_start(void)
{
	const char *e = getenv(ORIGIN_ENV);
	char val[64];
	long pid;
	unsigned long long v;

	if (!e)
		return;
	if (strcmp(e, "1") != 0) {
		if (sscanf(e, "%ld:%llx", &pid, &v) == 2 && pid == (long)getpid()) {
			origin_pid = getpid(); /* the first process, after an exec */
			origin_value = v;
		}
		return;
	}
	if (getrandom(&origin_value, sizeof(origin_value), 0) != sizeof(origin_value))
		origin_value = ((unsigned long long)getpid() << 32) ^ (unsigned long long)(size_t)&val;
	origin_pid = getpid();
	snprintf(val, sizeof(val), "%ld:%llx", (long)origin_pid, origin_value);
	setenv(ORIGIN_ENV, val, 1);
	origin_say("START");
}

__attribute__((destructor)) static void origin_end(void)
{
	if (origin_pid && origin_pid == getpid())
		origin_say("END");
}
