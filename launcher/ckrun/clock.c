/* ckrun's clocks: monotonic for durations, real time for the manifest.
 * Their own file, so that the round, the write-protect reader and the
 * pre-arming need not include each other for them. */
#include <stdint.h>
#include <sys/resource.h>
#include <time.h>

#include "launcher/ckrun/ckrun.h"

uint64_t ck_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ck_wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of ckrun's own threads (writer, handlers, the round), user and
 * system: what a round costs a machine whose cores the job keeps busy. */
uint64_t ck_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}
