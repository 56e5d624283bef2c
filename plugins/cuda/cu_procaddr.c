/* cuGetProcAddress: how the CUDA runtime (and careful programs) find the
 * driver's entry points. Names the plugin interposes are answered with the
 * plugin's functions, whatever version or default-stream flavour is asked
 * for (the per-thread-default-stream variants are served by the legacy
 * ones: stricter ordering, same results); other names go to the driver. */
#include "cu_internal.h"

#include <string.h>

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname);

/* #n: the name a caller asks for; n: the versioned symbol cuda_abi.h maps it
 * to, which is what the plugin defines. */
#define P(n) { #n, (void *)n }
static const struct {
	const char *name;
	void *fn;
} ours[] = {
	P(cuInit), P(cuDriverGetVersion), P(cuDeviceGet), P(cuDeviceGetCount), P(cuDeviceGetName),
	P(cuDeviceGetAttribute), P(cuDeviceTotalMem), P(cuDeviceGetUuid), P(cuGetErrorName), P(cuGetErrorString),
	P(cuGetProcAddress), P(cuDevicePrimaryCtxRetain), P(cuDevicePrimaryCtxRelease), P(cuCtxCreate),
	P(cuCtxDestroy), P(cuCtxSetCurrent), P(cuCtxGetCurrent), P(cuCtxPushCurrent), P(cuCtxPopCurrent),
	P(cuCtxGetDevice), P(cuCtxSynchronize), P(cuMemGetInfo), P(cuMemAlloc), P(cuMemFree), P(cuMemAllocHost),
	P(cuMemHostAlloc), P(cuMemFreeHost), P(cuMemHostRegister), P(cuMemHostUnregister), P(cuMemcpyHtoD),
	P(cuMemcpyDtoH), P(cuMemcpyDtoD), P(cuMemcpyHtoDAsync), P(cuMemcpyDtoHAsync), P(cuMemcpyDtoDAsync),
	P(cuMemsetD8), P(cuMemsetD32), P(cuMemsetD8Async), P(cuMemsetD32Async), P(cuMemcpy), P(cuMemcpyAsync),
	P(cuMemsetD16), P(cuMemsetD16Async), P(cuStreamCreateWithPriority), P(cuStreamGetPriority), P(cuMemAddressReserve),
	P(cuMemAddressFree), P(cuMemCreate), P(cuMemRelease), P(cuMemMap), P(cuMemUnmap), P(cuMemSetAccess),
	P(cuMemGetAllocationGranularity), P(cuStreamCreate), P(cuStreamDestroy), P(cuStreamSynchronize),
	P(cuStreamQuery), P(cuStreamWaitEvent), P(cuEventCreate), P(cuEventDestroy), P(cuEventRecord),
	P(cuEventSynchronize), P(cuEventQuery), P(cuEventElapsedTime), P(cuModuleLoadData), P(cuModuleLoad),
	P(cuModuleUnload), P(cuModuleGetFunction), P(cuModuleGetGlobal), P(cuLaunchKernel), P(cuMemAllocManaged), P(cuIpcGetMemHandle),
	P(cuGraphCreate), P(cuGraphDestroy),
};
#undef P

CK_CU_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
					    CUdriverProcAddressQueryResult *symbolStatus)
{
	size_t i;

	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++)
		if (!strcmp(ours[i].name, symbol)) {
			*pfn = ours[i].fn;
			if (symbolStatus)
				*symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	if (ck_cu_drv_load() < 0 || !ck_cu_d.cuGetProcAddress)
		return CUDA_ERROR_STUB_LIBRARY;
	return ck_cu_d.cuGetProcAddress(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* The entry point older runtimes call. */
#undef cuGetProcAddress
CK_CU_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CK_CU_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
