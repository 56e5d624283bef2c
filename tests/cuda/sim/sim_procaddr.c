/* cksim: cuGetProcAddress, the way the CUDA runtime finds driver entry
 * points. Names are the unversioned API names; the sim has one version of
 * each and no separate per-thread-stream variants (its streams all run at
 * enqueue time, so the two default-stream semantics coincide). */
#include "sim.h"

#include <string.h>

CUresult CUDAAPI cuMemHostUnregister(void *p);
void cksimReset(void);

/* #n is the name as the program spells it; n expands to the versioned
 * symbol cuda_abi.h maps it to. */
#define P(n) { #n, (void *)n }
static const struct {
	const char *name;
	void *fn;
} table[] = {
	P(cuInit), P(cuDriverGetVersion), P(cuDeviceGet), P(cuDeviceGetCount), P(cuDeviceGetName),
	P(cuDeviceGetAttribute), P(cuDeviceTotalMem), P(cuDeviceGetUuid), P(cuDevicePrimaryCtxRetain),
	P(cuDevicePrimaryCtxRelease), P(cuCtxCreate), P(cuCtxDestroy), P(cuCtxSetCurrent), P(cuCtxGetCurrent),
	P(cuCtxPushCurrent), P(cuCtxPopCurrent), P(cuCtxGetDevice), P(cuCtxSynchronize), P(cuMemGetInfo),
	P(cuMemAlloc), P(cuMemFree), P(cuMemGetAddressRange), P(cuMemAllocHost), P(cuMemFreeHost),
	P(cuMemHostRegister), P(cuMemHostUnregister), P(cuMemAllocManaged), P(cuIpcGetMemHandle),
	P(cuGraphCreate), P(cuGraphDestroy), P(cuMemcpyHtoD), P(cuMemcpyDtoH), P(cuMemcpyDtoD),
	P(cuMemcpyHtoDAsync), P(cuMemcpyDtoHAsync), P(cuMemcpyDtoDAsync), P(cuMemsetD8), P(cuMemsetD32),
	P(cuMemsetD8Async), P(cuMemsetD32Async), P(cuMemcpy), P(cuMemcpyAsync), P(cuMemsetD16),
	P(cuMemsetD16Async), P(cuStreamCreateWithPriority), P(cuStreamGetPriority), P(cuStreamCreate), P(cuStreamDestroy), P(cuStreamSynchronize),
	P(cuStreamQuery), P(cuStreamWaitEvent), P(cuEventCreate), P(cuEventDestroy), P(cuEventRecord),
	P(cuEventSynchronize), P(cuEventQuery), P(cuEventElapsedTime), P(cuModuleLoadData), P(cuModuleUnload),
	P(cuModuleGetFunction), P(cuModuleGetGlobal), P(cuLaunchKernel), P(cuGetErrorName), P(cuGetErrorString),
	P(cuMemAddressReserve), P(cuMemAddressFree), P(cuMemCreate), P(cuMemRelease), P(cuMemMap),
	P(cuMemUnmap), P(cuMemSetAccess), P(cuMemGetAllocationGranularity), P(cuGetProcAddress), P(cuCheckpointProcessGetState),
	P(cuCheckpointProcessLock), P(cuCheckpointProcessCheckpoint), P(cuCheckpointProcessRestore),
	P(cuCheckpointProcessUnlock),
};
#undef P

SIM_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
					  CUdriverProcAddressQueryResult *symbolStatus)
{
	size_t i;

	(void)cudaVersion;
	(void)flags;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(table[i].name, symbol)) {
			*pfn = table[i].fn;
			if (symbolStatus)
				*symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
			return CUDA_SUCCESS;
		}
	*pfn = NULL;
	if (symbolStatus)
		*symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

/* The pre-12.5 entry point, still called by older runtimes. */
#undef cuGetProcAddress
SIM_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
SIM_API CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}
