/* Virtual handles. The program holds pointers to the plugin's records;
 * each record holds the driver's current handle, which a restart replaces
 * while the program's pointer stays the same. Lookups check the record's
 * magic and membership, so a handle the plugin did not hand out is
 * refused instead of dereferenced blindly. */
#include "cu_internal.h"

#include <stdlib.h>

pthread_mutex_t ck_cu_lock = PTHREAD_MUTEX_INITIALIZER;
struct ck_cu_state ck_cu;

#define FIND(list, v, magic_)                                        \
	do {                                                         \
		__typeof__(list) i_;                                 \
		pthread_mutex_lock(&ck_cu_lock);                     \
		for (i_ = (list); i_; i_ = i_->next)                 \
			if ((void *)i_ == (void *)(v) && i_->magic == (magic_)) \
				break;                               \
		pthread_mutex_unlock(&ck_cu_lock);                   \
		return i_;                                           \
	} while (0)

struct ck_cu_ctx *ck_cu_ctx_of(CUcontext v)
{
	FIND(ck_cu.ctxs, v, CK_CU_CTX_MAGIC);
}

struct ck_cu_stream *ck_cu_stream_of(CUstream v)
{
	FIND(ck_cu.streams, v, CK_CU_STREAM_MAGIC);
}

struct ck_cu_event *ck_cu_event_of(CUevent v)
{
	FIND(ck_cu.events, v, CK_CU_EVENT_MAGIC);
}

struct ck_cu_mod *ck_cu_mod_of(CUmodule v)
{
	FIND(ck_cu.mods, v, CK_CU_MOD_MAGIC);
}

struct ck_cu_phys *ck_cu_phys_of(CUmemGenericAllocationHandle v)
{
	FIND(ck_cu.phys, (void *)(uintptr_t)v, CK_CU_PHYS_MAGIC);
}

/* Functions are looked up on the hot path (every launch): the magic check
 * alone, since a function record lives as long as its module's record and
 * is never freed before the module is unloaded. */
struct ck_cu_fn *ck_cu_fn_of(CUfunction v)
{
	struct ck_cu_fn *f = (struct ck_cu_fn *)v;

	return f && f->magic == CK_CU_FN_MAGIC ? f : NULL;
}

CUresult ck_cu_stream_real(CUstream v, CUstream *out)
{
	struct ck_cu_stream *s;

	if (!v || v == CU_STREAM_LEGACY || v == CU_STREAM_PER_THREAD) {
		*out = v;
		return CUDA_SUCCESS;
	}
	/* Same reasoning as functions: streams are used on every launch. */
	s = (struct ck_cu_stream *)v;
	if (s->magic != CK_CU_STREAM_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	*out = s->real;
	return CUDA_SUCCESS;
}

/* Drops one mapping record; the physical record goes when neither the
 * program's handle nor a mapping refers to it. Caller holds ck_cu_lock. */
void ck_cu_phys_put(struct ck_cu_phys *p)
{
	struct ck_cu_phys **pp;

	if (!p->released || p->maps > 0)
		return;
	for (pp = &ck_cu.phys; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	p->magic = 0;
	free(p);
}

void ck_cu_map_drop(struct ck_cu_map *m)
{
	struct ck_cu_map **mp;

	for (mp = &ck_cu.maps; *mp; mp = &(*mp)->next)
		if (*mp == m) {
			*mp = m->next;
			break;
		}
	m->phys->maps--;
	ck_cu_phys_put(m->phys);
	free(m);
}

/* The plugin's own copies need a context on the device: the program's
 * first one there, or the primary context. */
int ck_cu_borrow_ctx(CUdevice dev, CUcontext *prev)
{
	struct ck_cu_ctx *c;
	CUcontext real = NULL;

	if (ck_cu_d.cuCtxGetCurrent(prev) != CUDA_SUCCESS)
		*prev = NULL;
	for (c = ck_cu.ctxs; c; c = c->next)
		if (c->dev == dev && c->real) {
			real = c->real;
			break;
		}
	if (!real && ck_cu_d.cuDevicePrimaryCtxRetain(&real, dev) != CUDA_SUCCESS)
		return -1;
	return ck_cu_d.cuCtxSetCurrent(real) == CUDA_SUCCESS ? 0 : -1;
}

void ck_cu_restore_ctx(CUcontext prev)
{
	ck_cu_d.cuCtxSetCurrent(prev);
}
