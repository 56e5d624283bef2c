/* Rounds on a timer, for the preload test: the plugin and the fake
 * registry are built into a library that is preloaded into an unmodified
 * workload (which links the simulated libcuda.so.1), as libckpt.so will
 * be. A thread fires a round every FAKE_CKPT_EVERY_MS milliseconds (default
 * 40), at most FAKE_CKPT_ROUNDS times (default 5); FAKE_CKPT_KIND=resume
 * resumes the same process, otherwise (restart) the simulated driver is
 * reset between PRECHECKPOINT and RESTART. A failed round ends the process
 * with status 99. */
#include "fake_ckpt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long env_long(const char *name, long dflt)
{
	const char *e = getenv(name);

	return e && *e ? atol(e) : dflt;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "fake-ckpt: %s failed: %s\n", what, fake_fail_msg);
	_exit(99);
}

static void *rounds(void *arg)
{
	long n = env_long("FAKE_CKPT_ROUNDS", 5), ms = env_long("FAKE_CKPT_EVERY_MS", 40), i;
	const char *kind = getenv("FAKE_CKPT_KIND");
	int restart = !kind || strcmp(kind, "resume");
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	(void)arg;
	for (i = 0; i < n; i++) {
		double t0, t1, t2;

		nanosleep(&ts, NULL);
		t0 = now();
		if (fake_fire(CK_EV_PRESUSPEND))
			die("PRESUSPEND");
		t1 = now();
		if (fake_fire(CK_EV_PRECHECKPOINT))
			die("PRECHECKPOINT");
		if (restart) {
			/* The driver the plugin opened: by its path when one is given
			 * (the name may lead to the preload library, see rt_style.c). */
			const char *drv = getenv("CKRUN_CUDA_DRIVER");
			void *h = dlopen(drv && *drv ? drv : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
			void (*reset)(void) = h ? (void (*)(void))dlsym(h, "cksimReset") : NULL;

			if (reset)
				reset();
			fake_restarted = 1;
			if (fake_fire(CK_EV_RESTART))
				die("RESTART");
		} else if (fake_fire(CK_EV_RESUME)) {
			die("RESUME");
		}
		t2 = now();
		/* presuspend_s: quiesce + device-to-host copy; end_s: RESTART
		 * (rebuild + host-to-device copy) or RESUME (freeing the copy). */
		fprintf(stderr, "fake-ckpt: round %ld done presuspend_s=%.3f end_s=%.3f\n", i + 1, t1 - t0, t2 - t1);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	pthread_t t;

	if (getenv("FAKE_CKPT_ROUNDS") && !pthread_create(&t, NULL, rounds, NULL))
		pthread_detach(t);
}
