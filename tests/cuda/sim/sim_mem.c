/* cksim: classic allocations (cuMemAlloc), pinned host memory, copies and
 * memsets, and the features a checkpointer must refuse (managed memory,
 * IPC handles, graphs) so that refusal can be tested. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* cuMemAlloc is reserve + create + map + access, one reservation each. */
CUresult sim_alloc_dev(uint64_t bytes, uint64_t *out)
{
	struct sim_phys *p = NULL;
	struct sim_resv *rv;
	uint64_t size = (bytes + SIM_GRAN - 1) / SIM_GRAN * SIM_GRAN, va = 0;
	CUresult r;

	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_phys_alloc(size, &p)))
		return r;
	if ((r = sim_va_reserve(size, SIM_GRAN, 0, &va)))
		goto out_phys;
	if ((r = sim_map(va, size, p, 0)))
		goto out_va;
	if ((r = sim_set_access(va, size, 1)))
		goto out_map;
	for (rv = sim.resvs; rv; rv = rv->next)
		if (rv->base == va) {
			rv->from_alloc = 1;
			rv->alloc_phys = (uint64_t)(uintptr_t)p;
		}
	p->released = 1; /* only the mapping holds it now */
	sim_phys_put(p);
	*out = va;
	return CUDA_SUCCESS;
out_map:
	sim_unmap(va, size);
out_va:
	sim_va_release(va, size);
out_phys:
	sim_phys_put(p);
	return r;
}

CUresult sim_free_dev(uint64_t ptr)
{
	struct sim_resv *rv;
	CUresult r;

	for (rv = sim.resvs; rv; rv = rv->next)
		if (rv->base == ptr && rv->from_alloc)
			break;
	if (!rv)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = sim_unmap(rv->base, rv->size)))
		return r;
	return sim_va_release(rv->base, rv->size);
}

SIM_API CUresult CUDAAPI cuMemAlloc(CUdeviceptr *dptr, size_t bytesize)
{
	uint64_t va = 0;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = sim_alloc_dev(bytesize, &va);
	pthread_mutex_unlock(&sim_lock);
	if (!r)
		*dptr = va;
	return r;
}

SIM_API CUresult CUDAAPI cuMemFree(CUdeviceptr dptr)
{
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = sim_free_dev(dptr);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
	struct sim_resv *rv;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = CUDA_ERROR_NOT_FOUND;
	for (rv = sim.resvs; rv; rv = rv->next)
		if (dptr >= rv->base && dptr < rv->base + rv->size) {
			if (pbase)
				*pbase = rv->base;
			if (psize)
				*psize = rv->size;
			r = CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* Managed memory: device memory with a live count, so a checkpointer's
 * refusal of it can be exercised. */
SIM_API CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	(void)flags;
	return cuMemAlloc(dptr, bytesize);
}

SIM_API CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!pHandle || !sim_dev_ok(dptr, 1))
		return CUDA_ERROR_INVALID_VALUE;
	memset(pHandle, 0, sizeof(*pHandle));
	memcpy(pHandle->reserved, &dptr, sizeof(dptr));
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraph = calloc(1, 64);
	return *phGraph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIM_API CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	free(hGraph);
	return CUDA_SUCCESS;
}

/* Pinned host memory, like the real driver's, is a driver mapping: it is
 * carved from the device file, so it is not part of an ordinary memory
 * image either. */
struct host_blk {
	void *p;
	size_t size;
	int registered; /* cuMemHostRegister'ed user memory, not ours */
	struct sim_phys *phys;
	struct host_blk *next;
};
static struct host_blk *host_blks;

static struct host_blk *host_find(const void *p, size_t n)
{
	struct host_blk *b;

	for (b = host_blks; b; b = b->next)
		if ((const char *)p < (char *)b->p + b->size && (char *)b->p < (const char *)p + n)
			return b;
	return NULL;
}

SIM_API CUresult CUDAAPI cuMemAllocHost(void **pp, size_t bytesize)
{
	struct sim_phys *phys = NULL;
	struct host_blk *b;
	void *p;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!pp || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	b = calloc(1, sizeof(*b));
	if (!b)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&sim_lock);
	if ((r = sim_phys_alloc(bytesize, &phys)))
		goto out;
	p = mmap(NULL, phys->size, PROT_READ | PROT_WRITE, MAP_SHARED, sim.memfd, (off_t)phys->off);
	if (p == MAP_FAILED) {
		sim_phys_put(phys);
		r = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	b->p = p;
	b->size = phys->size;
	b->phys = phys;
	b->next = host_blks;
	host_blks = b;
	b = NULL;
	*pp = p;
out:
	pthread_mutex_unlock(&sim_lock);
	free(b);
	return r;
}

static CUresult host_drop(void *p, int registered)
{
	struct host_blk **bp, *b;

	for (bp = &host_blks; (b = *bp); bp = &b->next)
		if (b->p == p && b->registered == registered)
			break;
	if (!b)
		return registered ? CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED : CUDA_ERROR_INVALID_VALUE;
	*bp = b->next;
	if (!registered) {
		munmap(b->p, b->size);
		sim_phys_put(b->phys);
	}
	free(b);
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuMemFreeHost(void *p)
{
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = host_drop(p, 0);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
	struct host_blk *b;
	CUresult r = sim_need_ctx();

	(void)Flags;
	if (r)
		return r;
	if (!p || !bytesize)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (host_find(p, bytesize)) {
		r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	} else if (!(b = calloc(1, sizeof(*b)))) {
		r = CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		b->p = p;
		b->size = bytesize;
		b->registered = 1;
		b->next = host_blks;
		host_blks = b;
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemHostUnregister(void *p)
{
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = host_drop(p, 1);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

void sim_host_unmap_all(void)
{
	struct host_blk *b;

	for (b = host_blks; b; b = b->next)
		if (!b->registered)
			munmap(b->p, b->size);
}

int sim_host_remap_all(void)
{
	struct host_blk *b;

	for (b = host_blks; b; b = b->next)
		if (!b->registered && mmap(b->p, b->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, sim.memfd,
					   (off_t)b->phys->off) == MAP_FAILED)
			return -1;
	return 0;
}

/* Called by the reset hook: pinned blocks die with the driver. */
void sim_host_forget(int unmap)
{
	while (host_blks) {
		struct host_blk *b = host_blks;
		host_blks = b->next;
		if (unmap && !b->registered)
			munmap(b->p, b->size);
		free(b);
	}
}

/* A pointer on the device side must be mapped device memory; one on the
 * host side may be anything outside the device range. */
static CUresult side_ok(uint64_t p, uint64_t n, int device)
{
	if (device || sim_is_dev(p))
		return sim_dev_ok(p, n) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult copy(uint64_t dst, int ddev, uint64_t src, int sdev, size_t n)
{
	CUresult r = sim_need_ctx();

	if (r || !n)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = side_ok(dst, n, ddev);
	if (!r)
		r = side_ok(src, n, sdev);
	pthread_mutex_unlock(&sim_lock);
	if (!r)
		memmove((void *)dst, (const void *)src, n);
	return r;
}

SIM_API CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	return copy(dstDevice, 1, (uint64_t)srcHost, 0, ByteCount);
}

SIM_API CUresult CUDAAPI cuMemcpyDtoH(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy((uint64_t)dstHost, 0, srcDevice, 1, ByteCount);
}

SIM_API CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	return copy(dstDevice, 1, srcDevice, 1, ByteCount);
}

SIM_API CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
					   CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : cuMemcpyHtoD(dstDevice, srcHost, ByteCount);
}

SIM_API CUresult CUDAAPI cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : cuMemcpyDtoH(dstHost, srcDevice, ByteCount);
}

SIM_API CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
					   CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : cuMemcpyDtoD(dstDevice, srcDevice, ByteCount);
}

/* Unified addressing: either side may be device or host memory. */
SIM_API CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	return copy(dst, sim_is_dev(dst), src, sim_is_dev(src), ByteCount);
}

SIM_API CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : cuMemcpy(dst, src, ByteCount);
}

static CUresult memset_n(uint64_t dst, const void *val, size_t w, size_t n)
{
	CUresult r = sim_need_ctx();
	size_t i;

	if (r || !n)
		return r;
	if (dst % w)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = sim_dev_ok(dst, (uint64_t)n * w) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_unlock(&sim_lock);
	if (r)
		return r;
	if (w == 1)
		memset((void *)dst, *(const unsigned char *)val, n);
	else
		for (i = 0; i < n; i++)
			memcpy((char *)dst + i * w, val, w);
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuMemsetD8(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	return memset_n(dstDevice, &uc, 1, N);
}

SIM_API CUresult CUDAAPI cuMemsetD32(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	return memset_n(dstDevice, &ui, 4, N);
}

SIM_API CUresult CUDAAPI cuMemsetD16(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	return memset_n(dstDevice, &us, 2, N);
}

SIM_API CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : memset_n(dstDevice, &us, 2, N);
}

SIM_API CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : memset_n(dstDevice, &uc, 1, N);
}

SIM_API CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
	CUresult r = sim_stream_ok(hStream);

	return r ? r : memset_n(dstDevice, &ui, 4, N);
}
