/* Interposed: contexts. The plugin keeps, per thread, the context the
 * program made current (and a push/pop stack of the ones before it), because the driver of
 * a restored process knows none of them. A primary context is retained
 * from the driver once per record, whatever the program's count, so that
 * the count can be rebuilt exactly. */
#include "cu_internal.h"

#include <stdlib.h>

#define STACK_MAX 16
static __thread struct ck_cu_ctx *stack[STACK_MAX];
static __thread int depth;

static CUresult make_current(struct ck_cu_ctx *c)
{
	CUresult r = ck_cu_d.cuCtxSetCurrent(c ? c->real : NULL);

	if (r == CUDA_SUCCESS)
		ck_cu_set_current(c);
	return r;
}

static struct ck_cu_ctx *ctx_new(CUcontext real, CUdevice dev, int primary, unsigned flags)
{
	struct ck_cu_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->magic = CK_CU_CTX_MAGIC;
	c->real = real;
	c->dev = dev;
	c->primary = primary;
	c->refs = 1;
	c->flags = flags;
	pthread_mutex_lock(&ck_cu_lock);
	c->next = ck_cu.ctxs;
	ck_cu.ctxs = c;
	pthread_mutex_unlock(&ck_cu_lock);
	return c;
}

/* Forgets a context and what the driver destroyed with it. */
static void ctx_forget(struct ck_cu_ctx *c)
{
	struct ck_cu_ctx **cp;
	struct ck_cu_stream **sp, *s;
	struct ck_cu_event **ep, *e;
	struct ck_cu_mod **mp, *m;

	pthread_mutex_lock(&ck_cu_lock);
	for (cp = &ck_cu.ctxs; *cp; cp = &(*cp)->next)
		if (*cp == c) {
			*cp = c->next;
			break;
		}
	for (sp = &ck_cu.streams; (s = *sp);)
		if (s->ctx == c) {
			*sp = s->next;
			s->magic = 0;
			free(s);
		} else {
			sp = &s->next;
		}
	for (ep = &ck_cu.events; (e = *ep);)
		if (e->ctx == c) {
			*ep = e->next;
			e->magic = 0;
			free(e);
		} else {
			ep = &e->next;
		}
	/* Module records stay allocated (function handles may still be held
	 * by the program and are checked by magic); they only leave the list. */
	for (mp = &ck_cu.mods; (m = *mp);)
		if (m->ctx == c) {
			*mp = m->next;
			m->magic = 0;
		} else {
			mp = &m->next;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	if (ck_cu_current() == c)
		ck_cu_set_current(NULL);
	c->magic = 0;
	free(c);
}

CK_CU_API CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	struct ck_cu_ctx *c;
	CUcontext real;

	CK_ENTER;
	if (!pctx)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	pthread_mutex_lock(&ck_cu_lock);
	for (c = ck_cu.ctxs; c; c = c->next)
		if (c->primary && c->dev == dev) {
			c->refs++;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	if (!c) {
		if ((r = ck_cu_d.cuDevicePrimaryCtxRetain(&real, dev)) != CUDA_SUCCESS)
			CK_LEAVE(r);
		if (!(c = ctx_new(real, dev, 1, 0))) {
			ck_cu_d.cuDevicePrimaryCtxRelease(dev);
			CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
		}
	}
	*pctx = (CUcontext)c;
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
	struct ck_cu_ctx *c;
	int last = 0;

	CK_ENTER;
	pthread_mutex_lock(&ck_cu_lock);
	for (c = ck_cu.ctxs; c; c = c->next)
		if (c->primary && c->dev == dev) {
			last = --c->refs == 0;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	if (!c)
		CK_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	if (last) {
		r = ck_cu_d.cuDevicePrimaryCtxRelease(dev);
		ctx_forget(c);
	}
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
				       CUdevice dev)
{
	struct ck_cu_ctx *c;
	CUcontext real;

	CK_ENTER;
	if (!pctx)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	/* Creation parameters (execution affinity, CIG) are not recorded, so
	 * a rebuilt context would differ: refuse them rather than drift. */
	if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_d.cuCtxCreate(&real, NULL, flags, dev)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	if (!(c = ctx_new(real, dev, 0, flags))) {
		ck_cu_d.cuCtxDestroy(real);
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	ck_cu_set_current(c);
	*pctx = (CUcontext)c;
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
	struct ck_cu_ctx *c;

	CK_ENTER;
	c = ck_cu_ctx_of(ctx);
	if (!c || c->primary)
		CK_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	if ((r = ck_cu_d.cuCtxDestroy(c->real)) == CUDA_SUCCESS)
		ctx_forget(c);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
	struct ck_cu_ctx *c = NULL;

	CK_ENTER;
	if (ctx && !(c = ck_cu_ctx_of(ctx)))
		CK_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	CK_LEAVE(make_current(c));
}

CK_CU_API CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
	CK_ENTER;
	if (!pctx)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	*pctx = (CUcontext)ck_cu_current();
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
	struct ck_cu_ctx *c;

	CK_ENTER;
	if (!(c = ck_cu_ctx_of(ctx)))
		CK_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	if (depth == STACK_MAX)
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	stack[depth] = ck_cu_current();
	if ((r = make_current(c)) == CUDA_SUCCESS)
		depth++;
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
	struct ck_cu_ctx *c = ck_cu_current();

	CK_ENTER;
	if (!c)
		CK_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	if ((r = make_current(depth > 0 ? stack[depth - 1] : NULL)) == CUDA_SUCCESS) {
		if (depth > 0)
			depth--;
		if (pctx)
			*pctx = (CUcontext)c;
	}
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuCtxGetDevice(device));
}

CK_CU_API CUresult CUDAAPI cuCtxSynchronize(void)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuCtxSynchronize());
}

CK_CU_API CUresult CUDAAPI cuMemGetInfo(size_t *free_b, size_t *total)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemGetInfo(free_b, total));
}
