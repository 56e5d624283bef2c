/* Workload "streams": two streams ordered by events (one with a priority),
 * asynchronous copies in and out (one through unified addressing), event
 * timing. */
#include "cutest.h"

#include <stdio.h>
#include <stdlib.h>

#define N (1u << 18)

static CUmodule mod;
static CUfunction f_saxpy, f_vadd;
static CUstream s1, s2;
static CUevent e_start, e_mid, e_end;
static CUdeviceptr x, y, z;
static float *hx, *hz;
static uint64_t acc;

static int setup(void)
{
	static const char *const k[] = { "saxpy", "vadd_f32", NULL };
	size_t i;

	if (cutest_load(&mod, "ptx", k, NULL) < 0)
		return -1;
	CK(cuModuleGetFunction(&f_saxpy, mod, "saxpy"));
	CK(cuModuleGetFunction(&f_vadd, mod, "vadd_f32"));
	CK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	CK(cuStreamCreateWithPriority(&s2, CU_STREAM_DEFAULT, -1));
	CK(cuEventCreate(&e_start, CU_EVENT_DEFAULT));
	CK(cuEventCreate(&e_mid, CU_EVENT_DISABLE_TIMING));
	CK(cuEventCreate(&e_end, CU_EVENT_DEFAULT));
	CK(cuMemAlloc(&x, N * 4));
	CK(cuMemAlloc(&y, N * 4));
	CK(cuMemAlloc(&z, N * 4));
	hx = malloc(N * 4);
	hz = malloc(N * 4);
	if (!hx || !hz)
		return -1;
	for (i = 0; i < N; i++)
		hx[i] = (float)(i % 1000) * 0.001f;
	CK(cuMemsetD32(y, 0, N));
	return 0;
}

static int step(long i)
{
	float a = 0.5f + (float)(i % 7) * 0.125f, ms = -1;
	size_t n = N;
	void *sa[] = { &a, &x, &y, &n };
	void *va[] = { &x, &y, &z, &n };

	hx[i % N] += 1.0f;
	CK(cuEventRecord(e_start, s1));
	CK(cuMemcpyHtoDAsync(x, hx, N * 4, s1));
	CK(cuLaunchKernel(f_saxpy, N / 256, 1, 1, 256, 1, 1, 0, s1, sa, NULL));
	CK(cuEventRecord(e_mid, s1));
	CK(cuStreamWaitEvent(s2, e_mid, 0));
	CK(cuLaunchKernel(f_vadd, N / 256, 1, 1, 256, 1, 1, 0, s2, va, NULL));
	CK(cuMemcpyAsync((CUdeviceptr)hz, z, N * 4, s2));
	CK(cuEventRecord(e_end, s2));
	CK(cuStreamSynchronize(s2));
	CK(cuEventSynchronize(e_end));
	CK(cuEventElapsedTime(&ms, e_start, e_end));
	if (ms < 0) {
		fprintf(stderr, "streams: negative elapsed time\n");
		return -1;
	}
	acc = cutest_fnv(hz, 64, acc);
	/* Keep y bounded so the floats stay exact-ish and well defined. */
	if (i % 8 == 7)
		CK(cuMemsetD16Async(y, 0, 2 * N, s1));
	CK(cuStreamSynchronize(s1));
	return 0;
}

static int report(void)
{
	uint64_t hy, hzs;
	int prio = 0;

	if (cutest_dev_sum(y, N * 4, &hy) < 0 || cutest_dev_sum(z, N * 4, &hzs) < 0)
		return -1;
	CK(cuStreamGetPriority(s2, &prio));
	printf("streams: y=%016llx z=%016llx acc=%016llx prio=%d\n", (unsigned long long)hy,
	       (unsigned long long)hzs, (unsigned long long)acc, prio);
	return 0;
}

static int teardown(void)
{
	CK(cuEventDestroy(e_start));
	CK(cuEventDestroy(e_mid));
	CK(cuEventDestroy(e_end));
	CK(cuStreamDestroy(s1));
	CK(cuStreamDestroy(s2));
	CK(cuMemFree(x));
	CK(cuMemFree(y));
	CK(cuMemFree(z));
	CK(cuModuleUnload(mod));
	free(hx);
	free(hz);
	return 0;
}

const struct workload wl_streams = { "streams", 5000, setup, step, report, teardown };
