/* Interposed: cuMemAlloc/cuMemFree, page-locked host memory, copies and
 * memsets.
 *
 * cuMemAlloc is served through the VMM API (reserve + create + map + set
 * access) so that a restart can ask for the same device address again; the
 * driver's own cuMemAlloc cannot be told where to allocate. The cost: each
 * allocation is rounded up to the allocation granularity (2 MiB on current
 * GPUs), which programs that make many small allocations notice.
 *
 * Page-locked host memory is ordinary anonymous memory registered with the
 * driver (cuMemHostRegister), not the driver's own mapping: it is then part
 * of the process image at the same address, and a restart only registers
 * it again. */
#include "cu_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* Undoes what is set in the three handles, in reverse. */
static void undo(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h, int mapped)
{
	if (mapped)
		ck_cu_d.cuMemUnmap(va, size);
	if (h)
		ck_cu_d.cuMemRelease(h);
	if (va)
		ck_cu_d.cuMemAddressFree(va, size);
}

CK_CU_API CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	struct ck_cu_ctx *c = ck_cu_current();
	struct ck_cu_resv *v = NULL;
	struct ck_cu_phys *p = NULL;
	struct ck_cu_map *m = NULL;
	CUmemAllocationProp prop = { 0 };
	CUmemAccessDesc acc = { 0 };
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;
	size_t gran = 0, size = 0;
	int mapped = 0;

	CK_ENTER;
	if (!dptr || !bytesize)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (!c)
		CK_LEAVE(CUDA_ERROR_INVALID_CONTEXT);
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = c->dev;
	acc.location = prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	v = calloc(1, sizeof(*v));
	p = calloc(1, sizeof(*p));
	m = calloc(1, sizeof(*m));
	r = CUDA_ERROR_OUT_OF_MEMORY;
	if (!v || !p || !m)
		goto fail;
	if ((r = ck_cu_d.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)))
		goto fail;
	size = round_up(bytesize, gran);
	if ((r = ck_cu_d.cuMemAddressReserve(&va, size, 0, 0, 0)))
		goto fail;
	if ((r = ck_cu_d.cuMemCreate(&h, size, &prop, 0)))
		goto fail;
	if ((r = ck_cu_d.cuMemMap(va, size, 0, h, 0)))
		goto fail;
	mapped = 1;
	if ((r = ck_cu_d.cuMemSetAccess(va, size, &acc, 1)))
		goto fail;
	/* The mapping keeps the memory; the handle is not needed again. */
	ck_cu_d.cuMemRelease(h);
	p->magic = CK_CU_PHYS_MAGIC;
	p->size = size;
	p->prop = prop;
	p->released = 1;
	p->maps = 1;
	m->va = va;
	m->size = size;
	m->phys = p;
	m->access[0] = acc;
	m->naccess = 1;
	v->base = va;
	v->size = size;
	v->from_alloc = 1;
	v->phys = p;
	pthread_mutex_lock(&ck_cu_lock);
	p->next = ck_cu.phys;
	ck_cu.phys = p;
	m->next = ck_cu.maps;
	ck_cu.maps = m;
	v->next = ck_cu.resvs;
	ck_cu.resvs = v;
	pthread_mutex_unlock(&ck_cu_lock);
	*dptr = va;
	CK_LEAVE(CUDA_SUCCESS);
fail:
	undo(va, size, h, mapped);
	free(v);
	free(p);
	free(m);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
	struct ck_cu_resv **vp, *v;
	struct ck_cu_map *m;

	CK_ENTER;
	if (ck_cu_unsup_free(dptr, &r))
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (vp = &ck_cu.resvs; (v = *vp); vp = &v->next)
		if (v->base == dptr && v->from_alloc)
			break;
	if (v)
		*vp = v->next;
	pthread_mutex_unlock(&ck_cu_lock);
	if (!v)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	ck_cu_unsup_forget(dptr);
	r = ck_cu_d.cuMemUnmap(v->base, v->size);
	if (r == CUDA_SUCCESS)
		r = ck_cu_d.cuMemAddressFree(v->base, v->size);
	pthread_mutex_lock(&ck_cu_lock);
	for (m = ck_cu.maps; m; m = m->next)
		if (m->phys == v->phys) {
			ck_cu_map_drop(m);
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	free(v);
	CK_LEAVE(r);
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
	struct ck_cu_host *h;
	size_t size;
	void *p;
	CUresult r;

	if (!pp || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	size = round_up(bytesize, (size_t)sysconf(_SC_PAGESIZE));
	if (!(h = calloc(1, sizeof(*h))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		free(h);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if ((r = ck_cu_d.cuMemHostRegister(p, size, flags)) != CUDA_SUCCESS) {
		munmap(p, size);
		free(h);
		return r;
	}
	h->p = p;
	h->size = size;
	h->flags = flags;
	h->ours = 1;
	pthread_mutex_lock(&ck_cu_lock);
	h->next = ck_cu.hosts;
	ck_cu.hosts = h;
	pthread_mutex_unlock(&ck_cu_lock);
	*pp = p;
	return CUDA_SUCCESS;
}

CK_CU_API CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize)
{
	CK_ENTER;
	CK_LEAVE(host_alloc(pp, bytesize, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
}

/* Write-combining has no registered-memory equivalent; it is a speed hint
 * and is dropped. Portable and device-mapped carry over bit for bit. */
CK_CU_API CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	CK_ENTER;
	CK_LEAVE(host_alloc(pp, bytesize, Flags & (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)));
}

static struct ck_cu_host *host_take(void *p, int ours)
{
	struct ck_cu_host **hp, *h;

	pthread_mutex_lock(&ck_cu_lock);
	for (hp = &ck_cu.hosts; (h = *hp); hp = &h->next)
		if (h->p == p && h->ours == ours) {
			*hp = h->next;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	return h;
}

CK_CU_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
	struct ck_cu_host *h;

	CK_ENTER;
	if (!(h = host_take(p, 1)))
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	r = ck_cu_d.cuMemHostUnregister(h->p);
	munmap(h->p, h->size);
	free(h);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	struct ck_cu_host *h;

	CK_ENTER;
	if (!(h = calloc(1, sizeof(*h))))
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	if ((r = ck_cu_d.cuMemHostRegister(p, bytesize, Flags)) != CUDA_SUCCESS) {
		free(h);
		CK_LEAVE(r);
	}
	h->p = p;
	h->size = bytesize;
	h->flags = Flags;
	pthread_mutex_lock(&ck_cu_lock);
	h->next = ck_cu.hosts;
	ck_cu.hosts = h;
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	struct ck_cu_host *h;

	CK_ENTER;
	if ((r = ck_cu_d.cuMemHostUnregister(p)) == CUDA_SUCCESS && (h = host_take(p, 0)))
		free(h);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemcpyHtoD(dstDevice, srcHost, ByteCount));
}

CK_CU_API CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemcpyDtoH(dstHost, srcDevice, ByteCount));
}

CK_CU_API CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemcpyDtoD(dstDevice, srcDevice, ByteCount));
}

CK_CU_API CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
					     CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemcpyHtoDAsync(dstDevice, srcHost, ByteCount, s));
}

CK_CU_API CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
					     CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemcpyDtoHAsync(dstHost, srcDevice, ByteCount, s));
}

CK_CU_API CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
					     CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemcpyDtoDAsync(dstDevice, srcDevice, ByteCount, s));
}

CK_CU_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	CK_ENTER;
	if (!ck_cu_d.cuMemcpy)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	CK_LEAVE(ck_cu_d.cuMemcpy(dst, src, ByteCount));
}

CK_CU_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if (!ck_cu_d.cuMemcpyAsync)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemcpyAsync(dst, src, ByteCount, s));
}

CK_CU_API CUresult CUDAAPI cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	CK_ENTER;
	if (!ck_cu_d.cuMemsetD16)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	CK_LEAVE(ck_cu_d.cuMemsetD16(dstDevice, us, N));
}

CK_CU_API CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if (!ck_cu_d.cuMemsetD16Async)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemsetD16Async(dstDevice, us, N, s));
}

CK_CU_API CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemsetD8(dstDevice, uc, N));
}

CK_CU_API CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemsetD32(dstDevice, ui, N));
}

CK_CU_API CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemsetD8Async(dstDevice, uc, N, s));
}

CK_CU_API CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuMemsetD32Async(dstDevice, ui, N, s));
}
