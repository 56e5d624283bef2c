/* Interposed: the virtual memory management API. Reservations, physical
 * allocations, mappings and access rights are recorded as they are made,
 * so a restart can make them again at the same device addresses. */
#include "cu_internal.h"

#include <stdlib.h>
#include <string.h>

CK_CU_API CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
							 CUmemAllocationGranularity_flags option)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuMemGetAllocationGranularity(granularity, prop, option));
}

CK_CU_API CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
					       unsigned long long flags)
{
	struct ck_cu_resv *v;

	CK_ENTER;
	if (!(v = calloc(1, sizeof(*v))))
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	if ((r = ck_cu_d.cuMemAddressReserve(ptr, size, alignment, addr, flags)) != CUDA_SUCCESS) {
		free(v);
		CK_LEAVE(r);
	}
	v->base = *ptr;
	v->size = size;
	v->align = alignment;
	pthread_mutex_lock(&ck_cu_lock);
	v->next = ck_cu.resvs;
	ck_cu.resvs = v;
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
	struct ck_cu_resv **vp, *v;

	CK_ENTER;
	if ((r = ck_cu_d.cuMemAddressFree(ptr, size)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (vp = &ck_cu.resvs; (v = *vp); vp = &v->next)
		if (v->base == ptr && !v->from_alloc) {
			*vp = v->next;
			free(v);
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				       const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct ck_cu_phys *p;

	CK_ENTER;
	if (!handle || !prop)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (!(p = calloc(1, sizeof(*p))))
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	if ((r = ck_cu_d.cuMemCreate(&p->real, size, prop, flags)) != CUDA_SUCCESS) {
		free(p);
		CK_LEAVE(r);
	}
	p->magic = CK_CU_PHYS_MAGIC;
	p->size = size;
	p->prop = *prop;
	pthread_mutex_lock(&ck_cu_lock);
	p->next = ck_cu.phys;
	ck_cu.phys = p;
	pthread_mutex_unlock(&ck_cu_lock);
	*handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct ck_cu_phys *p;

	CK_ENTER;
	if (!(p = ck_cu_phys_of(handle)) || p->released)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	if ((r = ck_cu_d.cuMemRelease(p->real)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	p->released = 1;
	ck_cu_phys_put(p);
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
				    unsigned long long flags)
{
	struct ck_cu_phys *p;
	struct ck_cu_map *m;

	CK_ENTER;
	if (!(p = ck_cu_phys_of(handle)) || p->released)
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if (!(m = calloc(1, sizeof(*m))))
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	if ((r = ck_cu_d.cuMemMap(ptr, size, offset, p->real, flags)) != CUDA_SUCCESS) {
		free(m);
		CK_LEAVE(r);
	}
	m->va = ptr;
	m->size = size;
	m->off = offset;
	m->phys = p;
	pthread_mutex_lock(&ck_cu_lock);
	p->maps++;
	m->next = ck_cu.maps;
	ck_cu.maps = m;
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	struct ck_cu_map *m, *n;

	CK_ENTER;
	if ((r = ck_cu_d.cuMemUnmap(ptr, size)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (m = ck_cu.maps; m; m = n) {
		n = m->next;
		if (m->va >= ptr && m->va + m->size <= ptr + size)
			ck_cu_map_drop(m);
	}
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
	struct ck_cu_map *m;

	CK_ENTER;
	if (count > CK_CU_MAX_ACCESS)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_d.cuMemSetAccess(ptr, size, desc, count)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (m = ck_cu.maps; m; m = m->next)
		if (m->va >= ptr && m->va + m->size <= ptr + size) {
			memcpy(m->access, desc, count * sizeof(*desc));
			m->naccess = count;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	CK_LEAVE(CUDA_SUCCESS);
}
