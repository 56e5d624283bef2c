/* The GPU check program, run by scripts/gpu-check.sh on a machine with an
 * NVIDIA GPU (it also runs against the simulated driver only as far as
 * loading PTX, which the simulator refuses). Driver API only; the kernels
 * are PTX text built in (kernels_ptx.h), loaded with cuModuleLoadData.
 *
 *   gpu_check info                  device, memory, compute capability
 *   gpu_check bandwidth [MIB]       bare cuMemcpy HtoD/DtoH, pinned and pageable
 *   gpu_check launches [N]          launches/s of an empty kernel
 *   gpu_check run GIB STOPFILE      fill GIB GiB with a pattern, run a kernel
 *                                   loop until STOPFILE exists, then check
 *                                   every element on the device and samples
 *                                   on the host
 *
 * Output is "key: value" lines, one "iter N" line per loop iteration. */
#include "plugins/cuda/cuda_abi.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels_ptx.h"

#define GIB ((size_t)1 << 30)
#define MIB ((size_t)1 << 20)
#define THREADS 256

static CUfunction f_fill, f_lcg, f_verify, f_noop;
static unsigned grid;

#define CK(call)                                                                       \
	do {                                                                           \
		CUresult r_ = (call);                                                  \
		if (r_ != CUDA_SUCCESS) {                                              \
			const char *n_ = "?";                                          \
			cuGetErrorName(r_, &n_);                                       \
			fprintf(stderr, "gpu_check: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, n_); \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void init(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	int sms = 0;

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuCtxCreate(&ctx, NULL, 0, dev));
	CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
	grid = (unsigned)(sms > 0 ? sms : 1) * 8;
	CK(cuModuleLoadData(&mod, kernels_ptx));
	CK(cuModuleGetFunction(&f_fill, mod, "fill_u32"));
	CK(cuModuleGetFunction(&f_lcg, mod, "lcg_u32"));
	CK(cuModuleGetFunction(&f_verify, mod, "verify_u32"));
	CK(cuModuleGetFunction(&f_noop, mod, "noop"));
}

static int info(void)
{
	char name[256];
	size_t total;
	int maj, min, drv;

	CK(cuInit(0));
	CK(cuDeviceGetName(name, sizeof(name), 0));
	CK(cuDeviceTotalMem(&total, 0));
	CK(cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
	CK(cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0));
	CK(cuDriverGetVersion(&drv));
	printf("device: %s\ncompute: %d.%d\ndevice_mem_bytes: %zu\ndriver_version: %d\n", name, maj, min, total, drv);
	return 0;
}

/* Best of three, in GB/s (1e9 bytes). */
static double copy_rate(CUdeviceptr d, void *h, size_t n, int to_dev)
{
	double best = 0, t;
	int i;

	for (i = 0; i < 3; i++) {
		t = now();
		if (to_dev)
			CK(cuMemcpyHtoD(d, h, n));
		else
			CK(cuMemcpyDtoH(h, d, n));
		t = now() - t;
		if ((double)n / t / 1e9 > best)
			best = (double)n / t / 1e9;
	}
	return best;
}

static int bandwidth(size_t mib)
{
	size_t n = mib * MIB;
	CUdeviceptr d;
	void *pinned, *pageable;

	init();
	CK(cuMemAlloc(&d, n));
	CK(cuMemAllocHost(&pinned, n));
	if (!(pageable = malloc(n)))
		return 1;
	memset(pageable, 1, n);
	memset(pinned, 1, n);
	printf("copy_bytes: %zu\n", n);
	printf("htod_pinned_gbs: %.2f\n", copy_rate(d, pinned, n, 1));
	printf("dtoh_pinned_gbs: %.2f\n", copy_rate(d, pinned, n, 0));
	printf("htod_pageable_gbs: %.2f\n", copy_rate(d, pageable, n, 1));
	printf("dtoh_pageable_gbs: %.2f\n", copy_rate(d, pageable, n, 0));
	CK(cuMemFreeHost(pinned));
	CK(cuMemFree(d));
	free(pageable);
	return 0;
}

static int launches(long n)
{
	CUstream s;
	double t;
	long i;

	init();
	CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	for (i = 0; i < 1000; i++) /* warm-up */
		CK(cuLaunchKernel(f_noop, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	CK(cuStreamSynchronize(s));
	t = now();
	for (i = 0; i < n; i++)
		CK(cuLaunchKernel(f_noop, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	CK(cuStreamSynchronize(s));
	t = now() - t;
	printf("launches: %ld\nlaunches_per_s: %.0f\n", n, (double)n / t);
	return 0;
}

static uint32_t seed_of(size_t chunk)
{
	return (uint32_t)(chunk * 0x9e3779b9u + 1);
}

static int run(size_t gib, const char *stop)
{
	size_t nchunks = gib, c, n = GIB / 4, i;
	CUdeviceptr *chunk = calloc(nchunks, sizeof(*chunk)), errs;
	uint32_t a = 1, cc = 0, *sample = malloc(MIB);
	unsigned long long bad = 0, e;
	long iter = 0;
	double t;

	if (!chunk || !sample || !gib)
		return 1;
	init();
	printf("pid: %d\n", (int)getpid());
	t = now();
	for (c = 0; c < nchunks; c++) {
		uint32_t seed = seed_of(c);
		void *args[] = { &chunk[c], &seed, &n };

		CK(cuMemAlloc(&chunk[c], GIB));
		CK(cuLaunchKernel(f_fill, grid, 1, 1, THREADS, 1, 1, 0, NULL, args, NULL));
	}
	CK(cuMemAlloc(&errs, sizeof(unsigned long long)));
	CK(cuCtxSynchronize());
	printf("fill_s: %.3f\nready bytes=%zu\n", now() - t, nchunks * GIB);
	fflush(stdout);
	/* The loop the checkpoint lands in. It stops only when told, so a
	 * restored process goes on as long as the check needs. */
	for (;;) {
		for (c = 0; c < nchunks; c++) {
			void *args[] = { &chunk[c], &n };

			CK(cuLaunchKernel(f_lcg, grid, 1, 1, THREADS, 1, 1, 0, NULL, args, NULL));
		}
		CK(cuCtxSynchronize());
		iter++;
		a *= 1664525u; /* compose x -> 1664525 x + 1013904223 onto (a, cc) */
		cc = cc * 1664525u + 1013904223u;
		printf("iter %ld\n", iter);
		fflush(stdout);
		if (iter >= 10 && access(stop, F_OK) == 0)
			break;
	}
	/* Every element, on the device. */
	t = now();
	for (c = 0; c < nchunks; c++) {
		uint32_t seed = seed_of(c);
		void *args[] = { &chunk[c], &seed, &n, &a, &cc, &errs };

		CK(cuMemsetD8(errs, 0, sizeof(e)));
		CK(cuLaunchKernel(f_verify, grid, 1, 1, THREADS, 1, 1, 0, NULL, args, NULL));
		CK(cuMemcpyDtoH(&e, errs, sizeof(e)));
		bad += e;
		/* And the first MiB of each GiB on the host, as a check of the check. */
		CK(cuMemcpyDtoH(sample, chunk[c], MIB));
		for (i = 0; i < MIB / 4; i++)
			bad += sample[i] != a * (((uint32_t)i * 2654435761u) ^ seed) + cc;
	}
	printf("verify_s: %.3f\niterations: %ld\n", now() - t, iter);
	if (bad) {
		printf("verify: FAILED errors=%llu\n", bad);
		return 1;
	}
	printf("verify: OK bytes=%zu\n", nchunks * GIB);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "info"))
		return info();
	if (argc >= 2 && !strcmp(argv[1], "bandwidth"))
		return bandwidth(argc > 2 ? strtoul(argv[2], NULL, 10) : 1024);
	if (argc >= 2 && !strcmp(argv[1], "launches"))
		return launches(argc > 2 ? atol(argv[2]) : 200000);
	if (argc == 4 && !strcmp(argv[1], "run"))
		return run(strtoul(argv[2], NULL, 10), argv[3]);
	fprintf(stderr, "usage: gpu_check info | bandwidth [MIB] | launches [N] | run GIB STOPFILE\n");
	return 2;
}
