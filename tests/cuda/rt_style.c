/* A program that finds the driver the way the CUDA runtime does: it opens
 * libcuda.so.1 itself, looks cuGetProcAddress up on that handle, and takes
 * every other entry point from it. Symbol preloading alone does not catch
 * this; a directory first on the library path whose libcuda.so.1 is the
 * preloaded library does (the loader finds it already loaded). Not linked
 * with the driver. Prints a checksum of device memory after STEPS (env
 * CUTEST_STEPS, default 2000) kernel steps. */
#include "plugins/cuda/cuda_abi.h"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define N (1u << 18)

static __typeof__(cuGetProcAddress) *gpa;

static void *get(const char *name)
{
	CUdriverProcAddressQueryResult st;
	void *fn = NULL;

	if (gpa(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) || st != CU_GET_PROC_ADDRESS_SUCCESS) {
		fprintf(stderr, "rt_style: no %s\n", name);
		exit(1);
	}
	return fn;
}

#define FN(n) __typeof__(n) *p_##n = (__typeof__(n) *)get(#n)
#define CK(call)                                                          \
	do {                                                              \
		if ((call) != CUDA_SUCCESS) {                             \
			fprintf(stderr, "rt_style: %s failed\n", #call);  \
			return 1;                                         \
		}                                                         \
	} while (0)

int main(void)
{
	static const char img[] = "cksim-module 1\ntarget ptx\nkernel fill_u32\nkernel lcg_u32\n";
	static uint32_t host[N];
	const char *e = getenv("CUTEST_STEPS");
	long steps = e && *e ? atol(e) : 2000, i;
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	uint64_t sum = 1469598103934665603ULL;
	uint32_t seed = 3;
	size_t n = N, j;
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction fill, lcg;
	CUdeviceptr d;

	if (!h || !(gpa = (__typeof__(gpa))dlsym(h, "cuGetProcAddress_v2")))
		return 1;
	FN(cuInit);
	FN(cuDeviceGet);
	FN(cuCtxCreate);
	FN(cuCtxDestroy);
	FN(cuMemAlloc);
	FN(cuMemFree);
	FN(cuMemcpyDtoH);
	FN(cuModuleLoadData);
	FN(cuModuleGetFunction);
	FN(cuLaunchKernel);
	void *fa[] = { &d, &seed, &n };
	void *la[] = { &d, &n };

	CK(p_cuInit(0));
	CK(p_cuDeviceGet(&dev, 0));
	CK(p_cuCtxCreate(&ctx, NULL, 0, dev));
	CK(p_cuModuleLoadData(&mod, img));
	CK(p_cuModuleGetFunction(&fill, mod, "fill_u32"));
	CK(p_cuModuleGetFunction(&lcg, mod, "lcg_u32"));
	CK(p_cuMemAlloc(&d, N * 4));
	CK(p_cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, NULL, fa, NULL));
	for (i = 0; i < steps; i++)
		CK(p_cuLaunchKernel(lcg, N / 256, 1, 1, 256, 1, 1, 0, NULL, la, NULL));
	CK(p_cuMemcpyDtoH(host, d, sizeof(host)));
	for (j = 0; j < sizeof(host); j++)
		sum = (sum ^ ((unsigned char *)host)[j]) * 1099511628211ULL;
	printf("rt_style: steps=%ld sum=%016llx\n", steps, (unsigned long long)sum);
	CK(p_cuMemFree(d));
	CK(p_cuCtxDestroy(ctx));
	return 0;
}
