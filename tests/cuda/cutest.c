/* Shared helpers of the CUDA test workloads. */
#include "cutest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cutest_fail(const char *what, CUresult r, const char *file, int line)
{
	const char *name = NULL;

	if (cuGetErrorName(r, &name) != CUDA_SUCCESS)
		name = "?";
	fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what, name, (int)r);
	return -1;
}

uint64_t cutest_fnv(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;
	size_t i;

	if (!h)
		h = 1469598103934665603ULL;
	for (i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ULL;
	return h;
}

int cutest_dev_sum(CUdeviceptr d, size_t n, uint64_t *out)
{
	void *buf = malloc(n);
	int ret = -1;

	if (!buf)
		return -1;
	if (cuMemcpyDtoH(buf, d, n) == CUDA_SUCCESS) {
		*out = cutest_fnv(buf, n, 0);
		ret = 0;
	} else {
		fprintf(stderr, "cuMemcpyDtoH of %zu bytes failed\n", n);
	}
	free(buf);
	return ret;
}

int cutest_load(CUmodule *m, const char *target, const char *const *kernels, CUresult *why)
{
	char img[1024];
	size_t len;
	CUresult r;

	len = (size_t)snprintf(img, sizeof(img), "cksim-module 1\ntarget %s\n", target);
	for (; *kernels && len < sizeof(img); kernels++)
		len += (size_t)snprintf(img + len, sizeof(img) - len, "kernel %s\n", *kernels);
	r = cuModuleLoadData(m, img);
	if (why)
		*why = r;
	return r == CUDA_SUCCESS ? 0 : -1;
}

long cutest_steps(const struct workload *w)
{
	const char *e = getenv("CUTEST_STEPS");

	return e && *e ? atol(e) : w->steps;
}

int cutest_init(CUcontext *ctx)
{
	CUdevice dev;

	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuCtxCreate(ctx, NULL, 0, dev));
	return 0;
}

volatile long cutest_progress;

int cutest_steps_run(const struct workload *w, long from, long to)
{
	long i;

	for (i = from; i < to; i++) {
		if (w->step(i) < 0) {
			fprintf(stderr, "%s: step %ld failed\n", w->name, i);
			return -1;
		}
		cutest_progress = i + 1;
	}
	return 0;
}
