/* Standalone test of the CUDA plugin, without libckpt: the plugin's
 * sources are linked into this program with a fake plugin registry, so the
 * workload's cu* calls go through the plugin to the simulated driver. The
 * harness fires the events of a round itself and plays "restored process"
 * by calling the simulator's reset hook (all driver state dropped, device
 * memory unmapped) between PRECHECKPOINT and RESTART. Standard output is
 * the workload's report only, to be compared with a bare run.
 *
 *   cuda-plugin-test WORKLOAD MODE
 *     plain      no round
 *     resume     a round at half-way, then RESUME (same process goes on)
 *     restart    a round at half-way, device state dropped, RESTART
 *     async      the workload runs in its own thread; the round comes at
 *                an arbitrary moment and the gate holds the thread's calls
 *     other-gpu  like restart, but the device is another model (CKSIM_CC
 *                8.0): exit 3 with the plugin's message if RESTART fails
 *     refuse     rounds refused while managed memory, an IPC handle or event,
 *                a graph or a module global is live (the job runs on), then a restart
 *     quiesce    a round refused because a call (a 3 s kernel) is still
 *                running after CKRUN_CUDA_QUIESCE_S=1; the job runs on
 *     driver-resume, driver-restart, driver-other-gpu
 *                rounds through the driver's checkpoint API
 *                (CKRUN_CUDA_CHECKPOINT=driver; the simulated driver has a
 *                model of it): the device is given back during the round;
 *                RESTART on another GPU model fails (exit 3), naming the
 *                capture mode as the way there */
#include "cutest.h"
#include "fake_ckpt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct workload *const all[] = { &wl_alloc, &wl_streams, &wl_vmm, &wl_pinned, &wl_modules };

#define DIE(...)                                      \
	do {                                          \
		fprintf(stderr, "plugin-test: " __VA_ARGS__); \
		fputc('\n', stderr);                  \
		exit(1);                              \
	} while (0)

/* Every device mapping must be left out of the image, and nothing else. */
static int check_skips(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], path[256];
	unsigned long long s, e;
	int dev = 0;

	if (!f)
		DIE("cannot read maps");
	while (fgets(line, sizeof(line), f)) {
		const char *why = NULL;
		int skip, is_dev;

		path[0] = 0;
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %255[^\n]", &s, &e, path) < 2)
			continue;
		skip = fake_plugin->skip_region(s, e, path, &why);
		is_dev = strstr(path, "cksim-device") != NULL;
		/* The core asks about descriptors with no place for a reason. */
		if (fake_plugin->skip_region(0, 0, path, NULL) != skip)
			DIE("skip_region without a reason differs for %s", line);
		if (skip != is_dev)
			DIE("skip_region(%s) = %d", line, skip);
		if (skip && (!why || !*why))
			DIE("skip_region gave no reason for %s", line);
		dev += is_dev;
	}
	fclose(f);
	return dev;
}

static void reset_driver(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void (*reset)(void) = h ? (void (*)(void))dlsym(h, "cksimReset") : NULL;

	if (!reset)
		DIE("the simulated driver's reset hook is missing");
	reset();
	if (check_skips())
		DIE("device memory still mapped after the reset");
	fake_restarted = 1;
}

static void round_restart(int other_gpu)
{
	if (fake_fire(CK_EV_PRESUSPEND))
		DIE("PRESUSPEND failed: %s", fake_fail_msg);
	if (fake_fire(CK_EV_PRECHECKPOINT))
		DIE("PRECHECKPOINT failed: %s", fake_fail_msg);
	if (check_skips() == 0)
		DIE("no device mapping seen before the reset");
	reset_driver();
	if (other_gpu) {
		setenv("CKSIM_CC", "8.0", 1);
		setenv("CKSIM_DEVICE_NAME", "cksim Other GPU", 1);
	}
	if (fake_fire(CK_EV_RESTART)) {
		fprintf(stderr, "plugin-test: RESTART failed: %s\n", fake_fail_msg);
		exit(other_gpu ? 3 : 1);
	}
}

/* Events recorded before a restart are recorded again at it; two recorded
 * in turn must still read a non-negative elapsed time (recorded again
 * newest first, they read about -1 us: ckrun-streams failed once so). */
static void round_restart_events(void)
{
	CUevent a, b;
	float ms = -1;

	if (cuEventCreate(&a, CU_EVENT_DEFAULT) || cuEventCreate(&b, CU_EVENT_DEFAULT) || cuEventRecord(a, NULL) ||
	    cuEventRecord(b, NULL))
		DIE("events before the restart");
	round_restart(0);
	if (cuEventElapsedTime(&ms, a, b))
		DIE("cuEventElapsedTime after the restart");
	if (ms < 0)
		DIE("events recorded before the restart read %f ms apart", (double)ms);
	if (cuEventDestroy(a) || cuEventDestroy(b))
		DIE("cuEventDestroy");
}

static void round_resume(void)
{
	if (fake_fire(CK_EV_PRESUSPEND) || fake_fire(CK_EV_PRECHECKPOINT))
		DIE("round failed: %s", fake_fail_msg);
	check_skips();
	if (fake_fire(CK_EV_RESUME))
		DIE("RESUME failed: %s", fake_fail_msg);
}

/* A round that must be refused naming `what`; the job then goes on. */
static void round_refused(const char *what)
{
	if (fake_fire(CK_EV_PRESUSPEND) == 0)
		DIE("a round with %s in use was not refused", what);
	if (!strstr(fake_fail_msg, what))
		DIE("refusal message \"%s\" does not name %s", fake_fail_msg, what);
	fprintf(stderr, "plugin-test: refused as expected: %s\n", fake_fail_msg);
	if (fake_fire(CK_EV_RESUME))
		DIE("RESUME after a refused round failed");
}

static int refuse_checks(void)
{
	CUdeviceptr m, d;
	CUipcMemHandle ih;
	CUgraph g;

	CK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
	round_refused("managed memory");
	CK(cuMemFree(m));
	CK(cuMemAlloc(&d, 4096));
	CK(cuIpcGetMemHandle(&ih, d));
	round_refused("IPC");
	CK(cuMemFree(d));
	{
		CUevent ev;

		CK(cuEventCreate(&ev, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
		round_refused("IPC event");
		CK(cuEventDestroy(ev));
	}
	CK(cuGraphCreate(&g, 0));
	round_refused("graph");
	CK(cuGraphDestroy(g));
	{
		static const char img[] = "cksim-module 1\ntarget ptx\nkernel noop\nglobal counter 64\n";
		CUmodule mg;
		CUdeviceptr gp;
		size_t gs;

		CK(cuModuleLoadData(&mg, img));
		CK(cuModuleGetGlobal(&gp, &gs, mg, "counter"));
		if (gs != 64)
			DIE("module global size %zu", gs);
		CK(cuMemsetD32(gp, 7, 16));
		round_refused("module global");
		CK(cuModuleUnload(mg));
	}
	return 0;
}

static void *spin(void *arg)
{
	static const char *const k[] = { "spin_ms", NULL };
	CUmodule m;
	CUfunction f;
	uint32_t ms = 3000;
	void *args[] = { &ms };

	if (cuCtxSetCurrent(*(CUcontext *)arg) || cutest_load(&m, "ptx", k, NULL) < 0 ||
	    cuModuleGetFunction(&f, m, "spin_ms") || cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) ||
	    cuModuleUnload(m))
		DIE("the long kernel failed");
	return NULL;
}

/* The long kernel's thread is inside cuLaunchKernel (the sim runs kernels
 * there) when the round starts. */
static void quiesce_check(CUcontext ctx)
{
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	pthread_t t;

	setenv("CKRUN_CUDA_QUIESCE_S", "1", 1);
	if (pthread_create(&t, NULL, spin, &ctx))
		DIE("pthread_create");
	nanosleep(&ts, NULL);
	round_refused("still running");
	pthread_join(t, NULL);
	unsetenv("CKRUN_CUDA_QUIESCE_S");
}

/* The driver keeps its own state through the image here, so there is no
 * reset: RESTART in the same process stands for the restored one. */
static void round_driver(const char *how)
{
	setenv("CKRUN_CUDA_CHECKPOINT", "driver", 1);
	if (fake_fire(CK_EV_PRESUSPEND) || fake_fire(CK_EV_PRECHECKPOINT))
		DIE("driver round failed: %s", fake_fail_msg);
	if (check_skips())
		DIE("device memory still mapped after the driver's checkpoint");
	if (!strcmp(how, "resume")) {
		if (fake_fire(CK_EV_RESUME))
			DIE("RESUME failed: %s", fake_fail_msg);
	} else {
		if (!strcmp(how, "other-gpu"))
			setenv("CKSIM_CC", "8.0", 1);
		fake_restarted = 1;
		if (fake_fire(CK_EV_RESTART)) {
			fprintf(stderr, "plugin-test: RESTART failed: %s\n", fake_fail_msg);
			exit(3);
		}
	}
	unsetenv("CKRUN_CUDA_CHECKPOINT");
}

struct worker {
	const struct workload *w;
	CUcontext ctx;
	long steps;
	int rc;
};

static void *work(void *arg)
{
	struct worker *k = arg;

	k->rc = -1;
	if (cuCtxSetCurrent(k->ctx) == CUDA_SUCCESS)
		k->rc = cutest_steps_run(k->w, 0, k->steps);
	return NULL;
}

/* The round comes once a third of the steps are done, wherever the worker
 * then is (inside a call, between calls, in host code); it must come
 * before the last step, or it tested nothing. */
static void run_async(const struct workload *w, CUcontext ctx, long steps)
{
	struct worker k = { w, ctx, steps, 0 };
	struct timespec ts = { 0, 100 * 1000 };
	pthread_t t;
	long at;

	if (pthread_create(&t, NULL, work, &k))
		DIE("pthread_create");
	while (cutest_progress < steps / 3)
		nanosleep(&ts, NULL);
	if (fake_fire(CK_EV_PRESUSPEND))
		DIE("PRESUSPEND failed: %s", fake_fail_msg);
	at = cutest_progress;
	if (at >= steps)
		DIE("the round came after the last step");
	fprintf(stderr, "plugin-test: round at step %ld of %ld\n", at, steps);
	if (fake_fire(CK_EV_PRECHECKPOINT))
		DIE("PRECHECKPOINT failed: %s", fake_fail_msg);
	reset_driver();
	if (fake_fire(CK_EV_RESTART))
		DIE("RESTART failed: %s", fake_fail_msg);
	pthread_join(t, NULL);
	if (k.rc < 0)
		DIE("the workload failed across the round");
}

/* The plugin finds the driver by name through this program's run path;
 * under the sanitizers dlopen runs from their runtime, which has no run
 * path, so name the file outright. */
static void driver_path(void)
{
	char exe[4096], *slash;
	ssize_t n;

	if (getenv("CKRUN_CUDA_DRIVER") || (n = readlink("/proc/self/exe", exe, sizeof(exe) - 64)) <= 0)
		return;
	exe[n] = 0;
	if ((slash = strrchr(exe, '/'))) {
		strcpy(slash, "/../../sim/libcuda.so.1");
		setenv("CKRUN_CUDA_DRIVER", exe, 1);
	}
}

int main(int argc, char **argv)
{
	const struct workload *w = NULL;
	const char *mode;
	CUcontext ctx;
	long steps, half;
	size_t i;
	int r;

	if (argc != 3)
		DIE("usage: cuda-plugin-test WORKLOAD plain|resume|restart|async|other-gpu|refuse");
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, argv[1]))
			w = all[i];
	if (!w)
		DIE("no workload %s", argv[1]);
	mode = argv[2];
	driver_path();
	if (!fake_plugin)
		DIE("the plugin did not register");
	steps = cutest_steps(w);
	half = steps / 2;
	if (cutest_init(&ctx) < 0)
		return 1;
	if ((r = w->setup()) < 0)
		return r == -2 ? 2 : 1;
	if (!strcmp(mode, "async")) {
		run_async(w, ctx, steps);
	} else {
		if (cutest_steps_run(w, 0, half) < 0)
			return 1;
		if (!strcmp(mode, "resume"))
			round_resume();
		else if (!strcmp(mode, "restart"))
			round_restart_events();
		else if (!strcmp(mode, "other-gpu"))
			round_restart(1);
		else if (!strcmp(mode, "refuse")) {
			if (refuse_checks() < 0)
				return 1;
			round_restart(0);
		} else if (!strncmp(mode, "driver-", 7)) {
			round_driver(mode + 7);
		} else if (!strcmp(mode, "quiesce")) {
			quiesce_check(ctx);
		} else if (strcmp(mode, "plain"))
			DIE("unknown mode %s", mode);
		if (cutest_steps_run(w, half, steps) < 0)
			return 1;
	}
	if (w->report() < 0 || (w->teardown && w->teardown() < 0))
		return 1;
	if (cuCtxDestroy(ctx) != CUDA_SUCCESS)
		return 1;
	printf("%s: done\n", w->name);
	return 0;
}
