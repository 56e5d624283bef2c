/* Calls every vDSO function glibc uses (clock_gettime, gettimeofday, time,
 * getcpu) in a loop across checkpoints: after a restore through vDSO
 * trampolines (another kernel's vDSO), they must still work and time must
 * still move forward. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

int main(void)
{
	long ok = 0;

	for (int i = 0; i < 60; i++) {
		struct timespec a, b, ts = {0, 40 * 1000 * 1000};
		struct timeval tv;
		clock_gettime(CLOCK_MONOTONIC, &a);
		gettimeofday(&tv, NULL);
		ok += time(NULL) > 1000000000 && tv.tv_sec > 1000000000 && sched_getcpu() >= 0;
		nanosleep(&ts, NULL);
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (b.tv_sec * 1000000000L + b.tv_nsec <= a.tv_sec * 1000000000L + a.tv_nsec)
			ok -= 1000;
	}
	printf("vdso calls ok %ld of 60\n", ok);
	return ok == 60 ? 0 : 1;
}
