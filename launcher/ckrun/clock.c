/* ckrun's clocks: monotonic for durations, real time for the manifest.
 * Their own file, so that the round, the write-protect reader and the
 * pre-arming need not include each other for them. */
#include <stdint.h>
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
