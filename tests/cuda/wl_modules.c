/* Workload "modules": a portable (PTX) module and a binary-only module for
 * compute capability 9.0 (CKSIM's default device), functions from both
 * used in the loop; a third module is loaded and unloaded on the way. Run
 * on a device of another architecture, the binary-only module cannot load:
 * the program reports CUDA_ERROR_NO_BINARY_FOR_GPU and exits 2. */
#include "cutest.h"

#include <stdio.h>

#define N (1u << 18)

static CUmodule ptx, cubin;
static CUfunction f_train, f_fill, f_lcg;
static CUdeviceptr w, x, t, tag;

static int setup(void)
{
	static const char *const kp[] = { "train_step", "saxpy", NULL };
	static const char *const kc[] = { "fill_u32", "lcg_u32", NULL };
	static float hx[N], ht[N];
	uint32_t seed = 5;
	size_t n = N, i;
	void *fa[] = { &tag, &seed, &n };
	CUresult why;

	if (cutest_load(&ptx, "ptx", kp, NULL) < 0)
		return -1;
	if (cutest_load(&cubin, "sm_90", kc, &why) < 0) {
		const char *name = "?";
		cuGetErrorName(why, &name);
		printf("modules: sm_90 module: %s\n", name);
		return -2;
	}
	CK(cuModuleGetFunction(&f_train, ptx, "train_step"));
	CK(cuModuleGetFunction(&f_fill, cubin, "fill_u32"));
	CK(cuModuleGetFunction(&f_lcg, cubin, "lcg_u32"));
	CK(cuMemAlloc(&w, N * 4));
	CK(cuMemAlloc(&x, N * 4));
	CK(cuMemAlloc(&t, N * 4));
	CK(cuMemAlloc(&tag, N * 4));
	for (i = 0; i < N; i++) {
		hx[i] = 0.5f + (float)(i % 97) / 97.0f;
		ht[i] = 2.0f * (float)(i % 89) / 89.0f;
	}
	CK(cuMemcpyHtoD(x, hx, sizeof(hx)));
	CK(cuMemcpyHtoD(t, ht, sizeof(ht)));
	CK(cuMemsetD32(w, 0, N));
	CK(cuLaunchKernel(f_fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
	return 0;
}

static int step(long i)
{
	float lr = 0.01f;
	size_t n = N;
	void *ta[] = { &w, &x, &t, &lr, &n };
	void *la[] = { &tag, &n };

	CK(cuLaunchKernel(f_train, N / 256, 1, 1, 256, 1, 1, 0, NULL, ta, NULL));
	CK(cuLaunchKernel(f_lcg, N / 256, 1, 1, 256, 1, 1, 0, NULL, la, NULL));
	if (i % 100 == 50) {
		static const char *const k[] = { "vadd_f32", NULL };
		CUmodule tmp;
		CUfunction f;

		if (cutest_load(&tmp, "ptx", k, NULL) < 0)
			return -1;
		CK(cuModuleGetFunction(&f, tmp, "vadd_f32"));
		CK(cuModuleUnload(tmp));
	}
	return 0;
}

static int report(void)
{
	uint64_t hw, ht;

	if (cutest_dev_sum(w, N * 4, &hw) < 0 || cutest_dev_sum(tag, N * 4, &ht) < 0)
		return -1;
	printf("modules: w=%016llx tag=%016llx\n", (unsigned long long)hw, (unsigned long long)ht);
	return 0;
}

static int teardown(void)
{
	CK(cuMemFree(w));
	CK(cuMemFree(x));
	CK(cuMemFree(t));
	CK(cuMemFree(tag));
	CK(cuModuleUnload(ptx));
	CK(cuModuleUnload(cubin));
	return 0;
}

const struct workload wl_modules = { "modules", 6000, setup, step, report, teardown };
