/* Workload "vmm": the virtual memory management API. One reservation asked
 * for at a fixed address, three physical allocations mapped into it (one
 * array spans two of them), handles released while still mapped, and a
 * part unmapped and replaced during the loop. */
#include "cutest.h"

#include <stdio.h>

#define MB (1ull << 20)
#define WANT 0x500800000000ull /* inside the simulated device's range */

static CUmodule mod;
static CUfunction f_fill, f_lcg;
static CUdeviceptr base;
static size_t gran, resv = 16 * MB;
static CUmemAllocationProp prop;
static int fixed_ok;

static int map_new(size_t off, size_t size)
{
	CUmemGenericAllocationHandle h;
	CUmemAccessDesc acc = { 0 };

	acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	acc.location.id = 0;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	CK(cuMemCreate(&h, size, &prop, 0));
	CK(cuMemMap(base + off, size, 0, h, 0));
	CK(cuMemRelease(h)); /* the mapping keeps the memory */
	CK(cuMemSetAccess(base + off, size, &acc, 1));
	return 0;
}

static int setup(void)
{
	static const char *const k[] = { "fill_u32", "lcg_u32", NULL };
	uint32_t seed = 77;
	size_t n = 8 * MB / 4;
	void *args[] = { &base, &seed, &n };

	if (cutest_load(&mod, "ptx", k, NULL) < 0)
		return -1;
	CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
	CK(cuModuleGetFunction(&f_lcg, mod, "lcg_u32"));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = 0;
	CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
	if (4 * MB % gran)
		return -1;
	CK(cuMemAddressReserve(&base, resv, 0, WANT, 0));
	fixed_ok = base == WANT;
	if (map_new(0, 4 * MB) < 0 || map_new(4 * MB, 4 * MB) < 0 || map_new(8 * MB, 8 * MB) < 0)
		return -1;
	CK(cuLaunchKernel(f_fill, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	return 0;
}

static int step(long i)
{
	size_t n = 8 * MB / 4;
	CUdeviceptr hi = base + 8 * MB;
	void *args[] = { &base, &n };

	CK(cuLaunchKernel(f_lcg, 64, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	if (i % 50 == 25) {
		CK(cuMemUnmap(hi, 8 * MB));
		if (map_new(8 * MB, 8 * MB) < 0)
			return -1;
		CK(cuMemcpyDtoD(hi, base, 8 * MB));
	}
	return 0;
}

static int report(void)
{
	uint64_t lo, hi;

	if (cutest_dev_sum(base, 8 * MB, &lo) < 0 || cutest_dev_sum(base + 8 * MB, 8 * MB, &hi) < 0)
		return -1;
	printf("vmm: fixed=%s lo=%016llx hi=%016llx\n", fixed_ok ? "yes" : "no", (unsigned long long)lo,
	       (unsigned long long)hi);
	return 0;
}

static int teardown(void)
{
	CK(cuMemUnmap(base, 4 * MB));
	CK(cuMemUnmap(base + 4 * MB, 4 * MB));
	CK(cuMemUnmap(base + 8 * MB, 8 * MB));
	CK(cuMemAddressFree(base, resv));
	CK(cuModuleUnload(mod));
	return 0;
}

const struct workload wl_vmm = { "vmm", 1000, setup, step, report, teardown };
