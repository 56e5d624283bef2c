/* cksim: the kernels the sim can "run", on the CPU, by name. Each takes the
 * cuLaunchKernel parameter array (pointers to the argument values) and
 * checks every device buffer it touches, as a GPU would fault on a bad
 * address. Signatures (C view of the device function):
 *
 *   fill_u32  (u32 *p, u32 seed, size_t n)   p[i] = (u32)i * 2654435761 ^ seed
 *   lcg_u32   (u32 *p, size_t n)             p[i] = p[i] * 1664525 + 1013904223
 *   saxpy     (float a, float *x, float *y, size_t n)   y = a*x + y
 *   vadd_f32  (float *a, float *b, float *c, size_t n)  c = a + b
 *   reduce_u32(u32 *in, u64 *out, size_t n)  *out = sum(in)
 *   train_step(float *w, float *x, float *t, float lr, size_t n)
 *              one gradient step of w*x ~ t per element */
#include "sim.h"

#include <string.h>

#define ARG(i, T) (*(T *)params[i])

static int dev(CUdeviceptr p, size_t bytes)
{
	int ok;

	pthread_mutex_lock(&sim_lock);
	ok = sim_dev_ok(p, bytes);
	pthread_mutex_unlock(&sim_lock);
	return ok;
}

static CUresult k_fill_u32(void **params)
{
	CUdeviceptr d = ARG(0, CUdeviceptr);
	uint32_t seed = ARG(1, uint32_t), *p = (uint32_t *)d;
	size_t n = ARG(2, size_t), i;

	if (!dev(d, n * 4))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++)
		p[i] = ((uint32_t)i * 2654435761u) ^ seed;
	return CUDA_SUCCESS;
}

static CUresult k_lcg_u32(void **params)
{
	CUdeviceptr d = ARG(0, CUdeviceptr);
	uint32_t *p = (uint32_t *)d;
	size_t n = ARG(1, size_t), i;

	if (!dev(d, n * 4))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++)
		p[i] = p[i] * 1664525u + 1013904223u;
	return CUDA_SUCCESS;
}

static CUresult k_saxpy(void **params)
{
	float a = ARG(0, float);
	CUdeviceptr dx = ARG(1, CUdeviceptr), dy = ARG(2, CUdeviceptr);
	size_t n = ARG(3, size_t), i;
	const float *x = (const float *)dx;
	float *y = (float *)dy;

	if (!dev(dx, n * 4) || !dev(dy, n * 4))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++)
		y[i] = a * x[i] + y[i];
	return CUDA_SUCCESS;
}

static CUresult k_vadd_f32(void **params)
{
	CUdeviceptr da = ARG(0, CUdeviceptr), db = ARG(1, CUdeviceptr), dc = ARG(2, CUdeviceptr);
	size_t n = ARG(3, size_t), i;
	const float *a = (const float *)da, *b = (const float *)db;
	float *c = (float *)dc;

	if (!dev(da, n * 4) || !dev(db, n * 4) || !dev(dc, n * 4))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++)
		c[i] = a[i] + b[i];
	return CUDA_SUCCESS;
}

static CUresult k_reduce_u32(void **params)
{
	CUdeviceptr din = ARG(0, CUdeviceptr), dout = ARG(1, CUdeviceptr);
	size_t n = ARG(2, size_t), i;
	const uint32_t *in = (const uint32_t *)din;
	uint64_t s = 0;

	if (!dev(din, n * 4) || !dev(dout, 8))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++)
		s += in[i];
	memcpy((void *)dout, &s, 8);
	return CUDA_SUCCESS;
}

static CUresult k_train_step(void **params)
{
	CUdeviceptr dw = ARG(0, CUdeviceptr), dx = ARG(1, CUdeviceptr), dt = ARG(2, CUdeviceptr);
	float lr = ARG(3, float);
	size_t n = ARG(4, size_t), i;
	float *w = (float *)dw;
	const float *x = (const float *)dx, *t = (const float *)dt;

	if (!dev(dw, n * 4) || !dev(dx, n * 4) || !dev(dt, n * 4))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++) {
		float g = (w[i] * x[i] - t[i]) * x[i];
		w[i] -= lr * g;
	}
	return CUDA_SUCCESS;
}

static const struct {
	const char *name;
	sim_kernel_fn fn;
} kernels[] = {
	{ "fill_u32", k_fill_u32 },   { "lcg_u32", k_lcg_u32 },       { "saxpy", k_saxpy },
	{ "vadd_f32", k_vadd_f32 },   { "reduce_u32", k_reduce_u32 }, { "train_step", k_train_step },
};

sim_kernel_fn sim_kernel_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (!strcmp(kernels[i].name, name))
			return kernels[i].fn;
	return NULL;
}
