/* cksim: the virtual memory management API (reserve, create, map, access). */
#include "sim.h"

static struct sim_phys *phys_of(CUmemGenericAllocationHandle h)
{
	struct sim_phys *p;

	for (p = sim.phys; p; p = p->next)
		if ((CUmemGenericAllocationHandle)(uintptr_t)p == h && !p->released)
			return p;
	return NULL;
}

static CUresult prop_ok(const CUmemAllocationProp *prop)
{
	if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
	    prop->location.id >= sim.ndev)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
						       CUmemAllocationGranularity_flags option)
{
	CUresult r = sim_check();

	(void)option;
	if (r)
		return r;
	if (!granularity || (r = prop_ok(prop)))
		return r ? r : CUDA_ERROR_INVALID_VALUE;
	*granularity = SIM_GRAN;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
					     unsigned long long flags)
{
	uint64_t got = 0;
	CUresult r = sim_check();

	if (r)
		return r;
	if (!ptr || flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	r = sim_va_reserve(size, alignment, addr, &got);
	pthread_mutex_unlock(&sim_lock);
	if (!r)
		*ptr = got;
	return r;
}

SIM_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = sim_va_release(ptr, size);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				     const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct sim_phys *p = NULL;
	CUresult r = sim_check();

	if (r)
		return r;
	if (!handle || flags || !size || size % SIM_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = prop_ok(prop)))
		return r;
	pthread_mutex_lock(&sim_lock);
	r = sim_phys_alloc(size, &p);
	pthread_mutex_unlock(&sim_lock);
	if (!r)
		*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	return r;
}

/* The memory lives on while mapped, as with the real driver. */
SIM_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct sim_phys *p;
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	p = phys_of(handle);
	if (!p) {
		r = CUDA_ERROR_INVALID_VALUE;
	} else {
		p->released = 1;
		sim_phys_put(p);
	}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
				  unsigned long long flags)
{
	struct sim_phys *p;
	CUresult r = sim_check();

	if (r)
		return r;
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	p = phys_of(handle);
	r = p ? sim_map(ptr, size, p, offset) : CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = sim_unmap(ptr, size);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	CUresult r = sim_check();
	int rw = 0;
	size_t i;

	if (r)
		return r;
	if (!desc || !count)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < count; i++) {
		if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
		    desc[i].location.id >= sim.ndev)
			return CUDA_ERROR_INVALID_DEVICE;
		if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE || desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
			rw = 1;
	}
	pthread_mutex_lock(&sim_lock);
	r = sim_set_access(ptr, size, rw);
	pthread_mutex_unlock(&sim_lock);
	return r;
}
