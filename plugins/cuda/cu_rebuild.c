/* The restart side: in a restored process the driver knows nothing of the
 * program. Make everything again from the records, in an order that keeps
 * device addresses: address ranges first (before contexts, whose creation
 * may take device address space of its own), then contexts, physical
 * memory, mappings and access, contents, page-locked host memory, modules
 * and their functions, streams, events. Every real handle in the records
 * is replaced; the program's handles (the records) stay the same. */
#include "cu_internal.h"

#include <errno.h>
#include <sys/mman.h>

#include "cu_ckpt.h"

#define FAIL(ret_, ...)                             \
	do {                                        \
		ck_plugin_fail(__VA_ARGS__);        \
		return (ret_);                      \
	} while (0)

static int reserve_all(void)
{
	struct ck_cu_resv *v;
	CUdeviceptr got;
	CUresult r;

	for (v = ck_cu.resvs; v; v = v->next) {
		got = 0;
		r = ck_cu_d.cuMemAddressReserve(&got, v->size, v->align, v->base, 0);
		if (r)
			FAIL(-ENOMEM, "CUDA restart: reserving device addresses 0x%llx+%zu failed: %s",
			     (unsigned long long)v->base, v->size, ck_cu_err_name(r));
		if (got != v->base) {
			ck_cu_d.cuMemAddressFree(got, v->size);
			FAIL(-EADDRINUSE, "CUDA restart: device addresses 0x%llx+%zu are not free on this GPU",
			     (unsigned long long)v->base, v->size);
		}
	}
	return 0;
}

static int contexts(void)
{
	struct ck_cu_ctx *c;
	int count = 0;
	CUresult r;

	if ((r = ck_cu_d.cuDeviceGetCount(&count)))
		FAIL(-ENODEV, "CUDA restart: no usable GPU: %s", ck_cu_err_name(r));
	for (c = ck_cu.ctxs; c; c = c->next) {
		if (c->dev >= count)
			FAIL(-ENODEV, "CUDA restart: the job used GPU %d, this host has %d", c->dev, count);
		r = c->primary ? ck_cu_d.cuDevicePrimaryCtxRetain(&c->real, c->dev)
			       : ck_cu_d.cuCtxCreate(&c->real, NULL, c->flags, c->dev);
		if (r)
			FAIL(-EIO, "CUDA restart: creating a context on GPU %d failed: %s", c->dev, ck_cu_err_name(r));
	}
	return 0;
}

static int memory(void)
{
	struct ck_cu_phys *p;
	struct ck_cu_map *m;
	CUcontext ignored;
	CUresult r;

	for (p = ck_cu.phys; p; p = p->next)
		if ((r = ck_cu_d.cuMemCreate(&p->real, p->size, &p->prop, 0)))
			FAIL(-ENOMEM, "CUDA restart: allocating %zu MiB of device memory failed: %s", p->size >> 20,
			     ck_cu_err_name(r));
	for (m = ck_cu.maps; m; m = m->next) {
		if ((r = ck_cu_d.cuMemMap(m->va, m->size, m->off, m->phys->real, 0)))
			FAIL(-EIO, "CUDA restart: mapping device memory at 0x%llx failed: %s",
			     (unsigned long long)m->va, ck_cu_err_name(r));
		if (m->naccess && (r = ck_cu_d.cuMemSetAccess(m->va, m->size, m->access, m->naccess)))
			FAIL(-EIO, "CUDA restart: setting access at 0x%llx failed: %s", (unsigned long long)m->va,
			     ck_cu_err_name(r));
	}
	for (p = ck_cu.phys; p; p = p->next) {
		if (!p->saved)
			continue;
		if (ck_cu_borrow_ctx(p->prop.location.id, &ignored) < 0 || ck_cu_phys_copy(p, 1) < 0)
			FAIL(-EIO, "CUDA restart: copying %zu MiB back to the device failed", p->size >> 20);
		munmap(p->saved, p->size);
		p->saved = NULL;
	}
	/* Handles the program had released are released again: their
	 * mappings keep the memory, as before. */
	for (p = ck_cu.phys; p; p = p->next)
		if (p->released)
			ck_cu_d.cuMemRelease(p->real);
	return 0;
}

static int host_memory(void)
{
	struct ck_cu_host *h;
	CUresult r;

	for (h = ck_cu.hosts; h; h = h->next)
		if ((r = ck_cu_d.cuMemHostRegister(h->p, h->size, h->flags)))
			FAIL(-EIO, "CUDA restart: page-locking %zu bytes of host memory failed: %s", h->size,
			     ck_cu_err_name(r));
	return 0;
}

static void set_ctx(struct ck_cu_ctx *c)
{
	CUcontext ignored;

	if (c)
		ck_cu_d.cuCtxSetCurrent(c->real);
	else if (ck_cu.ctxs)
		ck_cu_borrow_ctx(ck_cu.ctxs->dev, &ignored);
}

/* Oldest first, as the program loaded them (the list is newest first):
 * a driver placing module memory deterministically then places it as
 * before. */
static int module_load(struct ck_cu_mod *m)
{
	struct ck_cu_fn *f;
	char name[128] = "?";
	int maj = 0, min = 0, ret;
	CUresult r;

	if (!m)
		return 0;
	if ((ret = module_load(m->next)))
		return ret;
	set_ctx(m->ctx);
	if ((r = ck_cu_d.cuModuleLoadData(&m->real, m->image))) {
		CUdevice dev = m->ctx ? m->ctx->dev : 0;

		ck_cu_d.cuDeviceGetName(name, sizeof(name), dev);
		ck_cu_d.cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
		ck_cu_d.cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
		FAIL(-ENOEXEC,
		     "CUDA restart: a module (%zu bytes) cannot be loaded on %s (compute capability %d.%d): "
		     "%s%s",
		     m->image_len, name, maj, min, ck_cu_err_name(r),
		     r == CUDA_ERROR_NO_BINARY_FOR_GPU
			     ? " (it has code for other GPUs only and no PTX; rebuild the job with PTX "
			       "or restart on the original GPU model)"
			     : "");
	}
	for (f = m->fns; f; f = f->next)
		if ((r = ck_cu_d.cuModuleGetFunction(&f->real, m->real, f->name)))
			FAIL(-ENOEXEC, "CUDA restart: function %s not found again: %s", f->name, ck_cu_err_name(r));
	return 0;
}

static int modules(void)
{
	return module_load(ck_cu.mods);
}

static int streams_events(void)
{
	struct ck_cu_stream *s;
	struct ck_cu_event *e;
	CUresult r;

	for (s = ck_cu.streams; s; s = s->next) {
		set_ctx(s->ctx);
		r = s->has_priority ? ck_cu_d.cuStreamCreateWithPriority(&s->real, s->flags, s->priority)
				    : ck_cu_d.cuStreamCreate(&s->real, s->flags);
		if (r)
			FAIL(-EIO, "CUDA restart: creating a stream failed: %s", ck_cu_err_name(r));
	}
	for (e = ck_cu.events; e; e = e->next) {
		set_ctx(e->ctx);
		if ((r = ck_cu_d.cuEventCreate(&e->real, e->flags)))
			FAIL(-EIO, "CUDA restart: creating an event failed: %s", ck_cu_err_name(r));
	}
	/* A recorded event had completed (the round synchronised): record it
	 * again so waits on it return at once, as they would have, and in the
	 * order they were recorded, so that the elapsed time between two of
	 * them is not negative (the list is newest first: a round between a
	 * step's last record and its cuEventElapsedTime made it so). */
	for (uint64_t after = 0;;) {
		struct ck_cu_event *next = NULL;
		for (e = ck_cu.events; e; e = e->next)
			if (e->recorded > after && (!next || e->recorded < next->recorded))
				next = e;
		if (!next)
			break;
		set_ctx(next->ctx);
		ck_cu_d.cuEventRecord(next->real, NULL);
		after = next->recorded;
	}
	return 0;
}

int ck_cu_rebuild(void)
{
	CUresult r;
	int ret;

	if ((r = ck_cu_d.cuInit(0)))
		FAIL(-ENODEV, "CUDA restart: cuInit failed: %s", ck_cu_err_name(r));
	if ((ret = reserve_all()) || (ret = contexts()) || (ret = memory()) || (ret = host_memory()) ||
	    (ret = modules()) || (ret = streams_events()))
		return ret;
	/* The manager thread holds no context; every job thread makes its own
	 * current again on its next call. */
	ck_cu_d.cuCtxSetCurrent(NULL);
	ck_cu_new_generation();
	return 0;
}
