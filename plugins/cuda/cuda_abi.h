/* The part of the CUDA Driver API (libcuda.so.1) that this project uses:
 * types, constants, structures and prototypes, declared here so that the
 * CUDA plugin, the simulated driver (sim/) and the CUDA tests build without
 * NVIDIA's toolkit. The driver itself is still loaded at run time
 * (cu_drv.c); nothing here links against it.
 *
 * Written for Linux x86-64 from NVIDIA's Driver API reference, as of CUDA
 * 13.0 (the ABI the plugin interposes: cuCtxCreate is cuCtxCreate_v4 there).
 * Only what the project uses is declared; add an entry to the right list
 * below when a new call, constant or field is needed.
 *
 * Everything is declared from X-macro lists, so one list drives both the
 * declarations and the check: a translation unit that includes NVIDIA's
 * cuda.h first and then this file with CK_CUDA_ABI_CHECK defined gets no
 * declarations, only static assertions that each value, type, structure
 * layout, versioned symbol name and prototype here equals cuda.h's
 * (tests/cuda/abi-check.sh, run by tests/suite/50-cuda.sh where a toolkit
 * is installed). */
#ifndef CK_CUDA_ABI_H
#define CK_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

#define CK_CU_PASTE2(a, b) a##b
#define CK_CU_PASTE(a, b) CK_CU_PASTE2(a, b)
#define CK_CU_STR2(x) #x
#define CK_CU_STR(x) CK_CU_STR2(x)

/* ---- Scalar types and handles: X(NAME, TYPE) -------------------------- */
/* Handles are pointers to structures the driver never shows; the tags are
 * the documented ones. */
#define CK_CU_TYPEDEFS(X)                                                 \
	X(cuuint32_t, uint32_t)                                           \
	X(cuuint64_t, uint64_t)                                           \
	X(CUdevice, int)                                                  \
	X(CUdeviceptr, unsigned long long)                                \
	X(CUmemGenericAllocationHandle, unsigned long long)               \
	X(CUcontext, struct CUctx_st *)                                   \
	X(CUmodule, struct CUmod_st *)                                    \
	X(CUfunction, struct CUfunc_st *)                                 \
	X(CUstream, struct CUstream_st *)                                 \
	X(CUevent, struct CUevent_st *)                                   \
	X(CUgraph, struct CUgraph_st *)                                   \
	/* only ever pointed to by the project */                         \
	X(CUexecAffinityParam, struct CUexecAffinityParam_st)             \
	X(CUctxCigParam, struct CUctxCigParam_st)                         \
	X(CUcheckpointGpuPair, struct CUcheckpointGpuPair_st)

/* ---- Enumerations: X(TYPE, VALUES), VALUES(E) lists E(NAME, VALUE) ----- */
#define CK_CU_RESULT_VALUES(E)                            \
	E(CUDA_SUCCESS, 0)                                \
	E(CUDA_ERROR_INVALID_VALUE, 1)                    \
	E(CUDA_ERROR_OUT_OF_MEMORY, 2)                    \
	E(CUDA_ERROR_NOT_INITIALIZED, 3)                  \
	E(CUDA_ERROR_DEINITIALIZED, 4)                    \
	E(CUDA_ERROR_STUB_LIBRARY, 34)                    \
	E(CUDA_ERROR_NO_DEVICE, 100)                      \
	E(CUDA_ERROR_INVALID_DEVICE, 101)                 \
	E(CUDA_ERROR_INVALID_IMAGE, 200)                  \
	E(CUDA_ERROR_INVALID_CONTEXT, 201)                \
	E(CUDA_ERROR_MAP_FAILED, 205)                     \
	E(CUDA_ERROR_UNMAP_FAILED, 206)                   \
	E(CUDA_ERROR_ALREADY_MAPPED, 208)                 \
	E(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)              \
	E(CUDA_ERROR_NOT_MAPPED, 211)                     \
	E(CUDA_ERROR_INVALID_PTX, 218)                    \
	E(CUDA_ERROR_INVALID_SOURCE, 300)                 \
	E(CUDA_ERROR_FILE_NOT_FOUND, 301)                 \
	E(CUDA_ERROR_OPERATING_SYSTEM, 304)               \
	E(CUDA_ERROR_INVALID_HANDLE, 400)                 \
	E(CUDA_ERROR_ILLEGAL_STATE, 401)                  \
	E(CUDA_ERROR_NOT_FOUND, 500)                      \
	E(CUDA_ERROR_NOT_READY, 600)                      \
	E(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                \
	E(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, 708)         \
	E(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709)           \
	E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712) \
	E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713)     \
	E(CUDA_ERROR_LAUNCH_FAILED, 719)                  \
	E(CUDA_ERROR_NOT_PERMITTED, 800)                  \
	E(CUDA_ERROR_NOT_SUPPORTED, 801)                  \
	E(CUDA_ERROR_UNKNOWN, 999)

#define CK_CU_DEVICE_ATTRIBUTE_VALUES(E)                         \
	E(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1)          \
	E(CU_DEVICE_ATTRIBUTE_WARP_SIZE, 10)                     \
	E(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)          \
	E(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 41)            \
	E(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)      \
	E(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)      \
	E(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102)

#define CK_CU_EVENT_FLAG_VALUES(E) \
	E(CU_EVENT_DEFAULT, 0x0)   \
	E(CU_EVENT_DISABLE_TIMING, 0x2) \
	E(CU_EVENT_INTERPROCESS, 0x4)

#define CK_CU_STREAM_FLAG_VALUES(E) \
	E(CU_STREAM_DEFAULT, 0x0)   \
	E(CU_STREAM_NON_BLOCKING, 0x1)

#define CK_CU_PROC_ADDRESS_FLAG_VALUES(E) E(CU_GET_PROC_ADDRESS_DEFAULT, 0)

#define CK_CU_PROC_ADDRESS_RESULT_VALUES(E)  \
	E(CU_GET_PROC_ADDRESS_SUCCESS, 0)    \
	E(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)

#define CK_CU_MEM_ATTACH_VALUES(E) E(CU_MEM_ATTACH_GLOBAL, 0x1)

#define CK_CU_MEM_ACCESS_VALUES(E)           \
	E(CU_MEM_ACCESS_FLAGS_PROT_READ, 0x1) \
	E(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 0x3)

#define CK_CU_MEM_LOCATION_TYPE_VALUES(E) E(CU_MEM_LOCATION_TYPE_DEVICE, 0x1)
#define CK_CU_MEM_ALLOCATION_TYPE_VALUES(E) E(CU_MEM_ALLOCATION_TYPE_PINNED, 0x1)
#define CK_CU_MEM_HANDLE_TYPE_VALUES(E) E(CU_MEM_HANDLE_TYPE_NONE, 0x0)
#define CK_CU_MEM_GRANULARITY_VALUES(E) E(CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0x0)

#define CK_CU_PROCESS_STATE_VALUES(E)         \
	E(CU_PROCESS_STATE_RUNNING, 0)        \
	E(CU_PROCESS_STATE_LOCKED, 1)         \
	E(CU_PROCESS_STATE_CHECKPOINTED, 2)

#define CK_CU_ENUMS(X)                                                   \
	X(CUresult, CK_CU_RESULT_VALUES)                                 \
	X(CUdevice_attribute, CK_CU_DEVICE_ATTRIBUTE_VALUES)             \
	X(CUevent_flags, CK_CU_EVENT_FLAG_VALUES)                        \
	X(CUstream_flags, CK_CU_STREAM_FLAG_VALUES)                      \
	X(CUdriverProcAddress_flags, CK_CU_PROC_ADDRESS_FLAG_VALUES)     \
	X(CUdriverProcAddressQueryResult, CK_CU_PROC_ADDRESS_RESULT_VALUES) \
	X(CUmemAttach_flags, CK_CU_MEM_ATTACH_VALUES)                    \
	X(CUmemAccess_flags, CK_CU_MEM_ACCESS_VALUES)                    \
	X(CUmemLocationType, CK_CU_MEM_LOCATION_TYPE_VALUES)             \
	X(CUmemAllocationType, CK_CU_MEM_ALLOCATION_TYPE_VALUES)         \
	X(CUmemAllocationHandleType, CK_CU_MEM_HANDLE_TYPE_VALUES)       \
	X(CUmemAllocationGranularity_flags, CK_CU_MEM_GRANULARITY_VALUES) \
	X(CUprocessState, CK_CU_PROCESS_STATE_VALUES)

/* ---- Preprocessor constants: X(NAME, VALUE) ----------------------------
 * cuda.h makes these macros, so they are macros here too (defined below);
 * the list exists so that both definitions can be checked. CUDA_VERSION is
 * the version these declarations follow (the check accepts a newer 13.x
 * header). */
#define CK_CU_MACROS(X)                         \
	X(CU_MEMHOSTALLOC_PORTABLE, 0x01)       \
	X(CU_MEMHOSTALLOC_DEVICEMAP, 0x02)      \
	X(CU_MEMHOSTREGISTER_PORTABLE, 0x01)    \
	X(CU_MEMHOSTREGISTER_DEVICEMAP, 0x02)   \
	X(CU_IPC_HANDLE_SIZE, 64)               \
	X(CU_STREAM_LEGACY, 0x1)                \
	X(CU_STREAM_PER_THREAD, 0x2)

#define CK_CU_ABI_VERSION 13000

/* ---- Structures: X(NAME, FIELDS), FIELDS(F, S) lists F(S, TYPE, NAME, DIMS)
 * in order. ck_cu_alloc_flags is the type cuda.h leaves unnamed (the
 * allocFlags member of CUmemAllocationProp). */
#define CK_CU_UUID_FIELDS(F, S) F(S, char, bytes, [16])

#define CK_CU_IPC_MEM_HANDLE_FIELDS(F, S) F(S, char, reserved, [CU_IPC_HANDLE_SIZE])

#define CK_CU_MEM_LOCATION_FIELDS(F, S) \
	F(S, CUmemLocationType, type, ) \
	F(S, int, id, )

#define CK_CU_ALLOC_FLAGS_FIELDS(F, S)                   \
	F(S, unsigned char, compressionType, )           \
	F(S, unsigned char, gpuDirectRDMACapable, )      \
	F(S, unsigned short, usage, )                    \
	F(S, unsigned char, reserved, [4])

#define CK_CU_MEM_ALLOCATION_PROP_FIELDS(F, S)              \
	F(S, CUmemAllocationType, type, )                   \
	F(S, CUmemAllocationHandleType, requestedHandleTypes, ) \
	F(S, CUmemLocation, location, )                     \
	F(S, void *, win32HandleMetaData, )                 \
	F(S, ck_cu_alloc_flags, allocFlags, )

#define CK_CU_MEM_ACCESS_DESC_FIELDS(F, S) \
	F(S, CUmemLocation, location, )    \
	F(S, CUmemAccess_flags, flags, )

#define CK_CU_CTX_CREATE_PARAMS_FIELDS(F, S)              \
	F(S, CUexecAffinityParam *, execAffinityParams, ) \
	F(S, int, numExecAffinityParams, )                \
	F(S, CUctxCigParam *, cigParams, )

/* The driver's checkpoint API (r570+): argument blocks whose reserved
 * parts must be zero. */
#define CK_CU_CKPT_LOCK_ARGS_FIELDS(F, S) \
	F(S, unsigned int, timeoutMs, )   \
	F(S, unsigned int, reserved0, )   \
	F(S, cuuint64_t, reserved1, [7])

#define CK_CU_CKPT_CHECKPOINT_ARGS_FIELDS(F, S) F(S, cuuint64_t, reserved, [8])

#define CK_CU_CKPT_RESTORE_ARGS_FIELDS(F, S)          \
	F(S, CUcheckpointGpuPair *, gpuPairs, )       \
	F(S, unsigned int, gpuPairsCount, )           \
	F(S, char, reserved, [52 - sizeof(void *)])   \
	F(S, cuuint64_t, reserved1, )

#define CK_CU_CKPT_UNLOCK_ARGS_FIELDS(F, S) F(S, cuuint64_t, reserved, [8])

#define CK_CU_STRUCTS(X)                                                \
	X(CUuuid, CK_CU_UUID_FIELDS)                                    \
	X(CUipcMemHandle, CK_CU_IPC_MEM_HANDLE_FIELDS)                  \
	X(CUmemLocation, CK_CU_MEM_LOCATION_FIELDS)                     \
	X(ck_cu_alloc_flags, CK_CU_ALLOC_FLAGS_FIELDS)                  \
	X(CUmemAllocationProp, CK_CU_MEM_ALLOCATION_PROP_FIELDS)        \
	X(CUmemAccessDesc, CK_CU_MEM_ACCESS_DESC_FIELDS)                \
	X(CUctxCreateParams, CK_CU_CTX_CREATE_PARAMS_FIELDS)            \
	X(CUcheckpointLockArgs, CK_CU_CKPT_LOCK_ARGS_FIELDS)            \
	X(CUcheckpointCheckpointArgs, CK_CU_CKPT_CHECKPOINT_ARGS_FIELDS) \
	X(CUcheckpointRestoreArgs, CK_CU_CKPT_RESTORE_ARGS_FIELDS)      \
	X(CUcheckpointUnlockArgs, CK_CU_CKPT_UNLOCK_ARGS_FIELDS)

/* ---- Functions: X(NAME, SYMBOL, PARAMETERS) ----------------------------
 * Every one returns CUresult. SYMBOL is what libcuda.so.1 exports for NAME
 * (the versioned name where the ABI has several); NAME is #defined to it
 * below, as cuda.h does, so code written with NAME calls, and defines,
 * SYMBOL. Default-stream variants are the legacy ones (no _ptds/_ptsz). */
#define CK_CU_FUNCTIONS(X)                                                                                    \
	X(cuInit, cuInit, (unsigned int Flags))                                                               \
	X(cuDriverGetVersion, cuDriverGetVersion, (int *driverVersion))                                       \
	X(cuGetErrorName, cuGetErrorName, (CUresult error, const char **pStr))                                \
	X(cuGetErrorString, cuGetErrorString, (CUresult error, const char **pStr))                            \
	X(cuGetProcAddress, cuGetProcAddress_v2,                                                              \
	  (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                                 \
	   CUdriverProcAddressQueryResult *symbolStatus))                                                     \
	X(cuDeviceGet, cuDeviceGet, (CUdevice *device, int ordinal))                                          \
	X(cuDeviceGetCount, cuDeviceGetCount, (int *count))                                                   \
	X(cuDeviceGetName, cuDeviceGetName, (char *name, int len, CUdevice dev))                              \
	X(cuDeviceGetAttribute, cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev))     \
	X(cuDeviceTotalMem, cuDeviceTotalMem_v2, (size_t *bytes, CUdevice dev))                               \
	X(cuDeviceGetUuid, cuDeviceGetUuid_v2, (CUuuid *uuid, CUdevice dev))                                  \
	X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, (CUcontext *pctx, CUdevice dev))                \
	X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                            \
	X(cuCtxCreate, cuCtxCreate_v4,                                                                        \
	  (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags, CUdevice dev))            \
	X(cuCtxDestroy, cuCtxDestroy_v2, (CUcontext ctx))                                                     \
	X(cuCtxSetCurrent, cuCtxSetCurrent, (CUcontext ctx))                                                  \
	X(cuCtxGetCurrent, cuCtxGetCurrent, (CUcontext *pctx))                                                \
	X(cuCtxPushCurrent, cuCtxPushCurrent_v2, (CUcontext ctx))                                             \
	X(cuCtxPopCurrent, cuCtxPopCurrent_v2, (CUcontext *pctx))                                             \
	X(cuCtxGetDevice, cuCtxGetDevice, (CUdevice *device))                                                 \
	X(cuCtxSynchronize, cuCtxSynchronize, (void))                                                         \
	X(cuMemGetInfo, cuMemGetInfo_v2, (size_t *freeBytes, size_t *totalBytes))                                       \
	X(cuMemAlloc, cuMemAlloc_v2, (CUdeviceptr *dptr, size_t bytesize))                                    \
	X(cuMemFree, cuMemFree_v2, (CUdeviceptr dptr))                                                        \
	X(cuMemGetAddressRange, cuMemGetAddressRange_v2, (CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)) \
	X(cuMemAllocManaged, cuMemAllocManaged, (CUdeviceptr *dptr, size_t bytesize, unsigned int flags))     \
	X(cuMemAllocHost, cuMemAllocHost_v2, (void **pp, size_t bytesize))                                    \
	X(cuMemHostAlloc, cuMemHostAlloc, (void **pp, size_t bytesize, unsigned int Flags))                   \
	X(cuMemFreeHost, cuMemFreeHost, (void *p))                                                            \
	X(cuMemHostRegister, cuMemHostRegister_v2, (void *p, size_t bytesize, unsigned int Flags))            \
	X(cuMemHostUnregister, cuMemHostUnregister, (void *p))                                                \
	X(cuMemcpy, cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount))                           \
	X(cuMemcpyAsync, cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)) \
	X(cuMemcpyHtoD, cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))      \
	X(cuMemcpyDtoH, cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))            \
	X(cuMemcpyDtoD, cuMemcpyDtoD_v2, (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount))    \
	X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync_v2,                                                            \
	  (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream))                   \
	X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync_v2,                                                            \
	  (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))                         \
	X(cuMemcpyDtoDAsync, cuMemcpyDtoDAsync_v2,                                                            \
	  (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))                 \
	X(cuMemsetD8, cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N))                     \
	X(cuMemsetD16, cuMemsetD16_v2, (CUdeviceptr dstDevice, unsigned short us, size_t N))                  \
	X(cuMemsetD32, cuMemsetD32_v2, (CUdeviceptr dstDevice, unsigned int ui, size_t N))                    \
	X(cuMemsetD8Async, cuMemsetD8Async, (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)) \
	X(cuMemsetD16Async, cuMemsetD16Async,                                                                 \
	  (CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream))                             \
	X(cuMemsetD32Async, cuMemsetD32Async, (CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)) \
	X(cuMemAddressReserve, cuMemAddressReserve,                                                           \
	  (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags))      \
	X(cuMemAddressFree, cuMemAddressFree, (CUdeviceptr ptr, size_t size))                                 \
	X(cuMemCreate, cuMemCreate,                                                                           \
	  (CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,                \
	   unsigned long long flags))                                                                         \
	X(cuMemRelease, cuMemRelease, (CUmemGenericAllocationHandle handle))                                  \
	X(cuMemMap, cuMemMap,                                                                                 \
	  (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,                  \
	   unsigned long long flags))                                                                         \
	X(cuMemUnmap, cuMemUnmap, (CUdeviceptr ptr, size_t size))                                             \
	X(cuMemSetAccess, cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)) \
	X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity,                                       \
	  (size_t *granularity, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags option))    \
	X(cuIpcGetMemHandle, cuIpcGetMemHandle, (CUipcMemHandle *pHandle, CUdeviceptr dptr))                  \
	X(cuStreamCreate, cuStreamCreate, (CUstream *phStream, unsigned int Flags))                           \
	X(cuStreamCreateWithPriority, cuStreamCreateWithPriority,                                             \
	  (CUstream *phStream, unsigned int flags, int priority))                                             \
	X(cuStreamGetPriority, cuStreamGetPriority, (CUstream hStream, int *priority))                        \
	X(cuStreamDestroy, cuStreamDestroy_v2, (CUstream hStream))                                            \
	X(cuStreamSynchronize, cuStreamSynchronize, (CUstream hStream))                                       \
	X(cuStreamQuery, cuStreamQuery, (CUstream hStream))                                                   \
	X(cuStreamWaitEvent, cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags))       \
	X(cuEventCreate, cuEventCreate, (CUevent *phEvent, unsigned int Flags))                               \
	X(cuEventDestroy, cuEventDestroy_v2, (CUevent hEvent))                                                \
	X(cuEventRecord, cuEventRecord, (CUevent hEvent, CUstream hStream))                                   \
	X(cuEventSynchronize, cuEventSynchronize, (CUevent hEvent))                                           \
	X(cuEventQuery, cuEventQuery, (CUevent hEvent))                                                       \
	X(cuEventElapsedTime, cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd))    \
	X(cuModuleLoad, cuModuleLoad, (CUmodule *module, const char *fname))                                  \
	X(cuModuleLoadData, cuModuleLoadData, (CUmodule *module, const void *image))                          \
	X(cuModuleUnload, cuModuleUnload, (CUmodule hmod))                                                    \
	X(cuModuleGetFunction, cuModuleGetFunction, (CUfunction *hfunc, CUmodule hmod, const char *name))     \
	X(cuModuleGetGlobal, cuModuleGetGlobal_v2,                                                            \
	  (CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name))                                \
	X(cuLaunchKernel, cuLaunchKernel,                                                                     \
	  (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,                 \
	   unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, \
	   CUstream hStream, void **kernelParams, void **extra))                                              \
	X(cuGraphCreate, cuGraphCreate, (CUgraph *phGraph, unsigned int flags))                               \
	X(cuGraphDestroy, cuGraphDestroy, (CUgraph hGraph))                                                   \
	X(cuCheckpointProcessGetState, cuCheckpointProcessGetState, (int pid, CUprocessState *state))         \
	X(cuCheckpointProcessLock, cuCheckpointProcessLock, (int pid, CUcheckpointLockArgs *args))            \
	X(cuCheckpointProcessCheckpoint, cuCheckpointProcessCheckpoint, (int pid, CUcheckpointCheckpointArgs *args)) \
	X(cuCheckpointProcessRestore, cuCheckpointProcessRestore, (int pid, CUcheckpointRestoreArgs *args))   \
	X(cuCheckpointProcessUnlock, cuCheckpointProcessUnlock, (int pid, CUcheckpointUnlockArgs *args))

/* Each SYMBOL gets an enumerator; an assertion then names the enumerator
 * that NAME expands to, so a NAME that is not #defined to its SYMBOL (here,
 * or in cuda.h under the check) does not compile. */
#define CK_CU_SYMBOL_TAG(name, sym, params) ck_cu_symbol_##sym = 1,
#define CK_CU_SYMBOL_CHECK(name, sym, params) \
	_Static_assert(CK_CU_PASTE(ck_cu_symbol_, name), #name " is the symbol " #sym);

#ifndef CK_CUDA_ABI_CHECK
/* ======================= The declarations ============================== */

#define CUDAAPI
#define CUDA_VERSION CK_CU_ABI_VERSION
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_IPC_HANDLE_SIZE 64
/* The two default streams' special handle values. */
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

#define cuGetProcAddress cuGetProcAddress_v2
#define cuDeviceTotalMem cuDeviceTotalMem_v2
#define cuDeviceGetUuid cuDeviceGetUuid_v2
#define cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease_v2
#define cuCtxCreate cuCtxCreate_v4
#define cuCtxDestroy cuCtxDestroy_v2
#define cuCtxPushCurrent cuCtxPushCurrent_v2
#define cuCtxPopCurrent cuCtxPopCurrent_v2
#define cuMemGetInfo cuMemGetInfo_v2
#define cuMemAlloc cuMemAlloc_v2
#define cuMemFree cuMemFree_v2
#define cuMemGetAddressRange cuMemGetAddressRange_v2
#define cuMemAllocHost cuMemAllocHost_v2
#define cuMemHostRegister cuMemHostRegister_v2
#define cuMemcpyHtoD cuMemcpyHtoD_v2
#define cuMemcpyDtoH cuMemcpyDtoH_v2
#define cuMemcpyDtoD cuMemcpyDtoD_v2
#define cuMemcpyHtoDAsync cuMemcpyHtoDAsync_v2
#define cuMemcpyDtoHAsync cuMemcpyDtoHAsync_v2
#define cuMemcpyDtoDAsync cuMemcpyDtoDAsync_v2
#define cuMemsetD8 cuMemsetD8_v2
#define cuMemsetD16 cuMemsetD16_v2
#define cuMemsetD32 cuMemsetD32_v2
#define cuStreamDestroy cuStreamDestroy_v2
#define cuEventDestroy cuEventDestroy_v2
#define cuEventElapsedTime cuEventElapsedTime_v2
#define cuModuleGetGlobal cuModuleGetGlobal_v2

#define CK_CU_DECLARE_TYPEDEF(name, type) typedef type name;
CK_CU_TYPEDEFS(CK_CU_DECLARE_TYPEDEF)

#define CK_CU_ENUMERATOR(name, value) name = value,
#define CK_CU_DECLARE_ENUM(type, values)                           \
	typedef enum type##_enum { values(CK_CU_ENUMERATOR) } type; \
	_Static_assert(sizeof(type) == sizeof(int), #type " is an int-sized enum");
CK_CU_ENUMS(CK_CU_DECLARE_ENUM)

#define CK_CU_FIELD(s, type, name, dims) type name dims;
#define CK_CU_DECLARE_STRUCT(name, fields) typedef struct name##_st { fields(CK_CU_FIELD, name) } name;
CK_CU_STRUCTS(CK_CU_DECLARE_STRUCT)

#define CK_CU_DECLARE_FUNCTION(name, sym, params) CUresult CUDAAPI sym params;
CK_CU_FUNCTIONS(CK_CU_DECLARE_FUNCTION)

/* The lists and the macros above say the same. */
#define CK_CU_MACRO_SELF_CHECK(name, value) \
	_Static_assert((unsigned long long)(uintptr_t)(name) == (value), #name " is " #value);
CK_CU_MACROS(CK_CU_MACRO_SELF_CHECK)
enum { CK_CU_FUNCTIONS(CK_CU_SYMBOL_TAG) };
CK_CU_FUNCTIONS(CK_CU_SYMBOL_CHECK)

#else
/* ==== The check: included after NVIDIA's cuda.h, declares nothing ====== */

#ifndef CUDA_VERSION
#error "CK_CUDA_ABI_CHECK: include NVIDIA's cuda.h first"
#endif
_Static_assert(CUDA_VERSION / 1000 == CK_CU_ABI_VERSION / 1000 && CUDA_VERSION >= CK_CU_ABI_VERSION,
	       "cuda.h is a CUDA 13.x header at least as new as these declarations");
_Static_assert(sizeof(CK_CU_STR(CUDAAPI)) == 1, "CUDAAPI is empty on Linux");

#define CK_CU_CHECK_TYPEDEF(name, type) \
	_Static_assert(__builtin_types_compatible_p(name, type), #name " is " #type);
CK_CU_TYPEDEFS(CK_CU_CHECK_TYPEDEF)

#define CK_CU_CHECK_VALUE(name, value) _Static_assert((name) == (value), #name " is " #value);
#define CK_CU_CHECK_ENUM(type, values)                                     \
	_Static_assert(sizeof(type) == sizeof(int), #type " is an int-sized enum"); \
	values(CK_CU_CHECK_VALUE)
CK_CU_ENUMS(CK_CU_CHECK_ENUM)

#define CK_CU_CHECK_MACRO(name, value) \
	_Static_assert((unsigned long long)(uintptr_t)(name) == (value), #name " is " #value);
CK_CU_MACROS(CK_CU_CHECK_MACRO)

/* Each structure is declared again under another tag from its field list
 * (member types resolve to cuda.h's, each checked on its own) and compared
 * with cuda.h's: size, alignment, and each member's offset and type. */
typedef __typeof__(((CUmemAllocationProp *)0)->allocFlags) ck_cu_alloc_flags;
#define CK_CU_FIELD(s, type, name, dims) type name dims;
#define CK_CU_CHECK_FIELD(s, type, name, dims)                                                        \
	_Static_assert(offsetof(s, name) == offsetof(struct ck_cu_mine_##s, name), #s "." #name " offset"); \
	_Static_assert(__builtin_types_compatible_p(__typeof__(((s *)0)->name),                        \
						    __typeof__(((struct ck_cu_mine_##s *)0)->name)),   \
		       #s "." #name " type");
#define CK_CU_CHECK_STRUCT(name, fields)                                                       \
	struct ck_cu_mine_##name { fields(CK_CU_FIELD, name) };                                 \
	_Static_assert(sizeof(name) == sizeof(struct ck_cu_mine_##name), #name " size");         \
	_Static_assert(_Alignof(name) == _Alignof(struct ck_cu_mine_##name), #name " alignment"); \
	fields(CK_CU_CHECK_FIELD, name)
CK_CU_STRUCTS(CK_CU_CHECK_STRUCT)

#define CK_CU_CHECK_FUNCTION(name, sym, params) \
	_Static_assert(__builtin_types_compatible_p(__typeof__(sym), CUresult params), #sym " prototype");
CK_CU_FUNCTIONS(CK_CU_CHECK_FUNCTION)

enum { CK_CU_FUNCTIONS(CK_CU_SYMBOL_TAG) };
CK_CU_FUNCTIONS(CK_CU_SYMBOL_CHECK)

#endif /* CK_CUDA_ABI_CHECK */
#endif /* CK_CUDA_ABI_H */
