/* cksim: contexts, primary contexts and the per-thread current context. */
#include "sim.h"

#include <stdlib.h>

static int ctx_live(struct sim_ctx *c)
{
	struct sim_ctx *i;

	for (i = sim.ctxs; i; i = i->next)
		if (i == c)
			return 1;
	return 0;
}

CUresult sim_need_ctx(void)
{
	CUresult r = sim_check();

	if (r)
		return r;
	if (!sim_cur || !ctx_live(sim_cur))
		return CUDA_ERROR_INVALID_CONTEXT;
	return CUDA_SUCCESS;
}

static CUresult ctx_new(CUdevice dev, int primary, struct sim_ctx **out)
{
	struct sim_ctx *c;

	if (dev < 0 || dev >= sim.ndev)
		return CUDA_ERROR_INVALID_DEVICE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->magic = SIM_CTX_MAGIC;
	c->dev = dev;
	c->primary = primary;
	c->next = sim.ctxs;
	sim.ctxs = c;
	*out = c;
	return CUDA_SUCCESS;
}

static void ctx_free(struct sim_ctx *c)
{
	struct sim_ctx **cp;

	for (cp = &sim.ctxs; *cp; cp = &(*cp)->next)
		if (*cp == c) {
			*cp = c->next;
			break;
		}
	if (sim_cur == c)
		sim_cur = NULL;
	c->magic = 0;
	free(c);
}

SIM_API CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
				     CUdevice dev)
{
	struct sim_ctx *c = NULL;
	CUresult r = sim_check();

	(void)ctxCreateParams;
	(void)flags;
	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = ctx_new(dev, 0, &c);
	pthread_mutex_unlock(&sim_lock);
	if (r)
		return r;
	sim_cur = c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
	struct sim_ctx *c = (struct sim_ctx *)ctx;
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	if (!c || !ctx_live(c) || c->primary)
		r = CUDA_ERROR_INVALID_CONTEXT;
	else
		ctx_free(c);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	CUresult r = sim_check();

	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (dev < 0 || dev >= sim.ndev)
		r = CUDA_ERROR_INVALID_DEVICE;
	else if (!sim.primary[dev])
		r = ctx_new(dev, 1, &sim.primary[dev]);
	if (!r) {
		sim.primary_refs[dev]++;
		*pctx = (CUcontext)sim.primary[dev];
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	if (dev < 0 || dev >= sim.ndev)
		r = CUDA_ERROR_INVALID_DEVICE;
	else if (!sim.primary[dev])
		r = CUDA_ERROR_INVALID_CONTEXT;
	else if (--sim.primary_refs[dev] == 0) {
		ctx_free(sim.primary[dev]);
		sim.primary[dev] = NULL;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	struct sim_ctx *c = (struct sim_ctx *)ctx;
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	if (c && !ctx_live(c))
		r = CUDA_ERROR_INVALID_CONTEXT;
	else
		sim_cur = c;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	CUresult r = sim_check();

	if (r)
		return r;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)sim_cur;
	return CUDA_SUCCESS;
}

/* One level is all the sim keeps: push makes current, pop clears. */
SIM_API CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
	return cuCtxSetCurrent(ctx);
}

SIM_API CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (pctx)
		*pctx = (CUcontext)sim_cur;
	sim_cur = NULL;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = sim_cur->dev;
	return CUDA_SUCCESS;
}

/* Work runs at enqueue time, so there is never anything to wait for. */
SIM_API CUresult CUDAAPI cuCtxSynchronize(void)
{
	return sim_need_ctx();
}
