/* Workload "pinned": page-locked host buffers from cuMemAllocHost as the
 * source and destination of asynchronous copies; the host side carries
 * state between steps, so pinned contents must survive a restart too. */
#include "cutest.h"

#include <stdio.h>
#include <string.h>

#define N (1u << 18)

static CUmodule mod;
static CUfunction f_lcg;
static CUstream s;
static CUdeviceptr d;
static uint32_t *pin_in, *pin_out;

static int setup(void)
{
	static const char *const k[] = { "lcg_u32", NULL };
	size_t i;

	if (cutest_load(&mod, "ptx", k, NULL) < 0)
		return -1;
	CK(cuModuleGetFunction(&f_lcg, mod, "lcg_u32"));
	CK(cuStreamCreate(&s, 0));
	CK(cuMemAlloc(&d, N * 4));
	CK(cuMemAllocHost((void **)&pin_in, N * 4));
	CK(cuMemAllocHost((void **)&pin_out, N * 4));
	for (i = 0; i < N; i++)
		pin_in[i] = (uint32_t)i;
	memset(pin_out, 0, N * 4);
	return 0;
}

static int step(long i)
{
	size_t n = N, j;
	void *args[] = { &d, &n };

	CK(cuMemcpyHtoDAsync(d, pin_in, N * 4, s));
	CK(cuLaunchKernel(f_lcg, N / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
	CK(cuMemcpyDtoHAsync(pin_out, d, N * 4, s));
	CK(cuStreamSynchronize(s));
	/* The host half of the loop: the next input depends on this output. */
	for (j = 0; j < N; j++)
		pin_in[j] = pin_out[j] ^ (uint32_t)i;
	return 0;
}

static int report(void)
{
	uint64_t hd;

	if (cutest_dev_sum(d, N * 4, &hd) < 0)
		return -1;
	printf("pinned: dev=%016llx in=%016llx out=%016llx\n", (unsigned long long)hd,
	       (unsigned long long)cutest_fnv(pin_in, N * 4, 0), (unsigned long long)cutest_fnv(pin_out, N * 4, 0));
	return 0;
}

static int teardown(void)
{
	CK(cuMemFreeHost(pin_in));
	CK(cuMemFreeHost(pin_out));
	CK(cuMemFree(d));
	CK(cuStreamDestroy(s));
	CK(cuModuleUnload(mod));
	return 0;
}

const struct workload wl_pinned = { "pinned", 3500, setup, step, report, teardown };
