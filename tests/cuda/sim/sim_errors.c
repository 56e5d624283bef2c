/* cksim: error names and strings. Work without cuInit, like the driver's. */
#include "sim.h"

#include <stddef.h>

struct err {
	CUresult code;
	const char *name, *text;
};

#define E(c, t) { c, #c, t }
static const struct err errs[] = {
	E(CUDA_SUCCESS, "no error"),
	E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
	E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
	E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
	E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
	E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
	E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
	E(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid"),
	E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
	E(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed"),
	E(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed"),
	E(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped"),
	E(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device"),
	E(CUDA_ERROR_NOT_MAPPED, "resource not mapped"),
	E(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed"),
	E(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid"),
	E(CUDA_ERROR_FILE_NOT_FOUND, "file not found"),
	E(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS"),
	E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
	E(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state"),
	E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
	E(CUDA_ERROR_NOT_READY, "device not ready"),
	E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
	E(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure"),
	E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped"),
	E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region"),
	E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context active"),
	E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
	E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
	E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
	E(CUDA_ERROR_UNKNOWN, "unknown error"),
};
#undef E

static const struct err *find(CUresult c)
{
	size_t i;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i].code == c)
			return &errs[i];
	return NULL;
}

SIM_API CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
	const struct err *e = find(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = e ? e->name : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_API CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
	const struct err *e = find(error);

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	*pStr = e ? e->text : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
