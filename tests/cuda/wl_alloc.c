/* Workload "alloc": cuMemAlloc'ed buffers, synchronous copies, memsets and
 * launches in a loop; one buffer is freed and allocated again on the way. */
#include "cutest.h"

#include <stdio.h>
#include <stdlib.h>

#define N (1u << 20)

static CUmodule mod;
static CUfunction f_fill, f_lcg, f_reduce;
static CUdeviceptr a, b, sum;
static uint64_t host_acc; /* host state fed from the device each step */

static int launch(CUfunction f, void **args)
{
	CK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	return 0;
}

static int setup(void)
{
	static const char *const k[] = { "fill_u32", "lcg_u32", "reduce_u32", NULL };
	uint32_t seed = 0x1234;
	size_t n = N;
	void *args[] = { &a, &seed, &n };

	if (cutest_load(&mod, "ptx", k, NULL) < 0)
		return -1;
	CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
	CK(cuModuleGetFunction(&f_lcg, mod, "lcg_u32"));
	CK(cuModuleGetFunction(&f_reduce, mod, "reduce_u32"));
	CK(cuMemAlloc(&a, N * 4));
	CK(cuMemAlloc(&b, N * 4));
	CK(cuMemAlloc(&sum, 8));
	CK(cuMemsetD32(b, 0, N));
	return launch(f_fill, args);
}

static int step(long i)
{
	size_t n = N;
	uint64_t s;
	void *lcg[] = { &a, &n };
	void *red[] = { &a, &sum, &n };

	if (launch(f_lcg, lcg) < 0 || launch(f_reduce, red) < 0)
		return -1;
	CK(cuMemcpyDtoH(&s, sum, 8));
	host_acc = cutest_fnv(&s, 8, host_acc);
	if (i % 16 == 0)
		CK(cuMemcpyDtoD(b, a, N * 4));
	if (i % 64 == 32) {
		/* Churn: drop a buffer and make it again (contents restored from a). */
		CK(cuMemFree(b));
		CK(cuMemAlloc(&b, N * 4));
		CK(cuMemcpyDtoD(b, a, N * 4));
		CK(cuMemsetD8(b, (unsigned char)i, 4096));
	}
	return 0;
}

static int report(void)
{
	uint64_t ha, hb;

	if (cutest_dev_sum(a, N * 4, &ha) < 0 || cutest_dev_sum(b, N * 4, &hb) < 0)
		return -1;
	printf("alloc: a=%016llx b=%016llx acc=%016llx\n", (unsigned long long)ha, (unsigned long long)hb,
	       (unsigned long long)host_acc);
	return 0;
}

static int teardown(void)
{
	CK(cuMemFree(a));
	CK(cuMemFree(b));
	CK(cuMemFree(sum));
	CK(cuModuleUnload(mod));
	return 0;
}

const struct workload wl_alloc = { "alloc", 1500, setup, step, report, teardown };
