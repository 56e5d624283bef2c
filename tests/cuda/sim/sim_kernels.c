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
 *              one gradient step of w*x ~ t per element
 *   verify_u32(u32 *p, u32 seed, size_t n, u32 a, u32 c, u64 *errors)
 *              *errors += count of p[i] != a * fill_u32's value + c
 *   noop      ()                              nothing (launch-rate loops)
 *   spin_ms   (u32 ms)                        busy for ms milliseconds (a long
 *                                             kernel, for quiesce timeouts) */
#include "sim.h"

#include <string.h>
#include <time.h>

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

static CUresult k_verify_u32(void **params)
{
	CUdeviceptr d = ARG(0, CUdeviceptr), de = ARG(5, CUdeviceptr);
	uint32_t seed = ARG(1, uint32_t), a = ARG(3, uint32_t), c = ARG(4, uint32_t);
	size_t n = ARG(2, size_t), i;
	const uint32_t *p = (const uint32_t *)d;
	uint64_t bad = 0, *errors = (uint64_t *)de;

	if (!dev(d, n * 4) || !dev(de, 8))
		return CUDA_ERROR_ILLEGAL_ADDRESS;
	for (i = 0; i < n; i++)
		bad += p[i] != a * (((uint32_t)i * 2654435761u) ^ seed) + c;
	__atomic_fetch_add(errors, bad, __ATOMIC_SEQ_CST);
	return CUDA_SUCCESS;
}

static CUresult k_spin_ms(void **params)
{
	uint32_t ms = ARG(0, uint32_t);
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
	return CUDA_SUCCESS;
}

static CUresult k_noop(void **params)
{
	(void)params;
	return CUDA_SUCCESS;
}

static const struct sim_kernel kernels[] = {
	{ "fill_u32", k_fill_u32, 3 },     { "lcg_u32", k_lcg_u32, 2 },       { "saxpy", k_saxpy, 4 },
	{ "vadd_f32", k_vadd_f32, 4 },     { "reduce_u32", k_reduce_u32, 3 }, { "train_step", k_train_step, 5 },
	{ "verify_u32", k_verify_u32, 6 }, { "noop", k_noop, 0 },         { "spin_ms", k_spin_ms, 1 },
};

const struct sim_kernel *sim_kernel_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++)
		if (!strcmp(kernels[i].name, name))
			return &kernels[i];
	return NULL;
}
