/* Interposed: initialisation, device queries and error names. These hold
 * no handles; they pass through the gate so none runs while the driver is
 * being rebuilt. */
#include "cu_internal.h"

CK_CU_API CUresult CUDAAPI cuInit(unsigned int Flags)
{
	CK_ENTER;
	r = ck_cu_d.cuInit(Flags);
	if (r == CUDA_SUCCESS)
		ck_cu.inited = 1;
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDriverGetVersion(driverVersion));
}

CK_CU_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDeviceGet(device, ordinal));
}

CK_CU_API CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDeviceGetCount(count));
}

CK_CU_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDeviceGetName(name, len, dev));
}

CK_CU_API CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDeviceGetAttribute(pi, attrib, dev));
}

CK_CU_API CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDeviceTotalMem(bytes, dev));
}

CK_CU_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	CK_ENTER;
	CK_LEAVE(ck_cu_d.cuDeviceGetUuid(uuid, dev));
}

/* Error names need no gate: they touch no driver state, and a program
 * reporting an error must not wait for a round. */
CK_CU_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	if (ck_cu_drv_load() < 0 || !ck_cu_d.cuGetErrorName)
		return CUDA_ERROR_STUB_LIBRARY;
	return ck_cu_d.cuGetErrorName(error, pStr);
}

CK_CU_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	if (ck_cu_drv_load() < 0 || !ck_cu_d.cuGetErrorString)
		return CUDA_ERROR_STUB_LIBRARY;
	return ck_cu_d.cuGetErrorString(error, pStr);
}
