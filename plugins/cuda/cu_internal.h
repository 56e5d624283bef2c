/* The CUDA plugin's internals: the real driver's entry points, the gate
 * every interposed call passes, and the records of everything that must be
 * rebuilt in a restored process. */
#ifndef CK_CU_INTERNAL_H
#define CK_CU_INTERNAL_H

#include "cuda_abi.h"
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Interposed entry points must stay visible from libckpt.so; everything
 * declared below (after cuda_abi.h has declared the entry points) is internal. */
#define CK_CU_API __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)

/* Every driver function the plugin forwards to. The member of struct
 * ck_cu_drv and the symbol looked up are the versioned names cuda_abi.h maps
 * each API name to (cuMemAlloc -> cuMemAlloc_v2). */
#define CK_CU_DRV_FNS(X)                                                                              \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)         \
	X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetUuid) X(cuGetErrorName)              \
	X(cuGetErrorString) X(cuGetProcAddress) X(cuDevicePrimaryCtxRetain)                           \
	X(cuDevicePrimaryCtxRelease) X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxSetCurrent)                \
	X(cuCtxGetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuMemGetInfo) X(cuMemHostRegister) \
	X(cuMemHostUnregister) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync)   \
	X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD32) X(cuMemsetD8Async)     \
	X(cuMemsetD32Async) X(cuMemcpy) X(cuMemcpyAsync) X(cuMemsetD16) X(cuMemsetD16Async)               \
	X(cuStreamCreateWithPriority) X(cuStreamGetPriority) X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) \
	X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess) X(cuMemGetAllocationGranularity)                  \
	X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuStreamQuery)                  \
	X(cuStreamWaitEvent) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)                      \
	X(cuEventSynchronize) X(cuEventQuery) X(cuEventElapsedTime) X(cuModuleLoadData)               \
	X(cuModuleUnload) X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuLaunchKernel) X(cuMemAllocManaged)               \
	X(cuMemFree) X(cuIpcGetMemHandle) X(cuGraphCreate) X(cuGraphDestroy)

struct ck_cu_drv {
#define CK_CU_MEMBER(n) __typeof__(n) *n;
	CK_CU_DRV_FNS(CK_CU_MEMBER)
#undef CK_CU_MEMBER
	/* The driver's own checkpoint API, when it offers one (r570+). */
	__typeof__(cuCheckpointProcessLock) *ckLock;
	__typeof__(cuCheckpointProcessCheckpoint) *ckCheckpoint;
	__typeof__(cuCheckpointProcessRestore) *ckRestore;
	__typeof__(cuCheckpointProcessUnlock) *ckUnlock;
};

extern struct ck_cu_drv ck_cu_d;

/* Loads the real driver once; 0 or -errno. */
int ck_cu_drv_load(void);
/* Looks the checkpoint API up through the driver's cuGetProcAddress. */
void ck_cu_drv_probe_ckpt(void);
/* The driver's name for an error, for messages. */
const char *ck_cu_err_name(CUresult r);

/* The gate (cu_gate.c). Every interposed call is inside it; a round closes
 * it, waiting for calls in flight, and new calls wait until it reopens. */
CUresult ck_cu_enter(void);
void ck_cu_leave(void);
/* 0, or -ETIMEDOUT if calls were still inside after timeout_ms (the gate
 * stays closed: the round's RESUME opens it). */
int ck_cu_gate_close(long timeout_ms);
void ck_cu_gate_open(void);

#define CK_ENTER                          \
	CUresult r = ck_cu_enter();       \
	if (r != CUDA_SUCCESS)            \
		return r
#define CK_LEAVE(x)                       \
	do {                              \
		CUresult ck_x_ = (x);     \
		ck_cu_leave();            \
		return ck_x_;             \
	} while (0)

/* ---- Records (cu_handles.c). Lists are guarded by ck_cu_lock. ---- */
extern pthread_mutex_t ck_cu_lock;

#define CK_CU_CTX_MAGIC 0x7863756bu
#define CK_CU_MOD_MAGIC 0x6d63756bu
#define CK_CU_FN_MAGIC 0x6663756bu
#define CK_CU_STREAM_MAGIC 0x7363756bu
#define CK_CU_EVENT_MAGIC 0x6563756bu
#define CK_CU_PHYS_MAGIC 0x7063756bu

/* A context as the program sees it. */
struct ck_cu_ctx {
	uint32_t magic;
	CUcontext real;
	CUdevice dev;
	int primary;         /* from cuDevicePrimaryCtxRetain */
	int refs;            /* primary retains */
	unsigned flags;
	struct ck_cu_ctx *next;
};

struct ck_cu_fn {
	uint32_t magic;
	CUfunction real;
	struct ck_cu_mod *mod;
	char *name;
	struct ck_cu_fn *next;
};

struct ck_cu_mod {
	uint32_t magic;
	CUmodule real;
	struct ck_cu_ctx *ctx;
	void *image; /* our copy of what was passed to cuModuleLoadData */
	size_t image_len;
	struct ck_cu_fn *fns;
	int globals; /* cuModuleGetGlobal was used on it */
	struct ck_cu_mod *next;
};

struct ck_cu_stream {
	uint32_t magic;
	CUstream real;
	struct ck_cu_ctx *ctx;
	unsigned flags;
	int priority, has_priority;
	struct ck_cu_stream *next;
};

struct ck_cu_event {
	uint32_t magic;
	CUevent real;
	struct ck_cu_ctx *ctx;
	unsigned flags;
	uint64_t recorded; /* 0: never; else when it was last recorded (ck_cu.records) */
	struct ck_cu_event *next;
};

/* A device address range reserved with cuMemAddressReserve, or made by the
 * plugin for a cuMemAlloc. */
struct ck_cu_resv {
	CUdeviceptr base;
	size_t size, align;
	int from_alloc;           /* cuMemAlloc: cuMemFree undoes all of it */
	struct ck_cu_phys *phys;  /* its physical memory when from_alloc */
	struct ck_cu_resv *next;
};

/* Physical device memory (cuMemCreate). The program's
 * CUmemGenericAllocationHandle is the address of this record. */
struct ck_cu_phys {
	uint32_t magic;
	CUmemGenericAllocationHandle real;
	size_t size;
	CUmemAllocationProp prop;
	int released;   /* the program called cuMemRelease */
	int maps;       /* live mappings */
	void *saved;    /* host copy during a round */
	struct ck_cu_phys *next;
};

#define CK_CU_MAX_ACCESS 8
struct ck_cu_map {
	CUdeviceptr va;
	size_t size, off;
	struct ck_cu_phys *phys;
	CUmemAccessDesc access[CK_CU_MAX_ACCESS];
	size_t naccess;
	struct ck_cu_map *next;
};

/* Page-locked host memory. It is ordinary anonymous memory (so it is in the
 * image) registered with the driver; `ours`: allocated by cuMemAllocHost. */
struct ck_cu_host {
	void *p;
	size_t size;
	unsigned flags;
	int ours;
	struct ck_cu_host *next;
};

struct ck_cu_state {
	struct ck_cu_ctx *ctxs;
	struct ck_cu_mod *mods;
	struct ck_cu_stream *streams;
	struct ck_cu_event *events;
	struct ck_cu_resv *resvs;
	struct ck_cu_phys *phys;
	struct ck_cu_map *maps;
	struct ck_cu_host *hosts;
	int inited;          /* the program called cuInit successfully */
	uint64_t records;    /* cuEventRecord calls so far: events are recorded again in this order */
	/* Uses a checkpoint cannot carry (cu_api_unsup.c). */
	int managed, ipc_exports, ipc_events, graphs;
};

extern struct ck_cu_state ck_cu;

/* Handle translation: the real handle, or NULL if `v` is not ours. The
 * default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) map to
 * themselves. */
struct ck_cu_ctx *ck_cu_ctx_of(CUcontext v);
struct ck_cu_stream *ck_cu_stream_of(CUstream v);
struct ck_cu_event *ck_cu_event_of(CUevent v);
struct ck_cu_mod *ck_cu_mod_of(CUmodule v);
struct ck_cu_fn *ck_cu_fn_of(CUfunction v);
struct ck_cu_phys *ck_cu_phys_of(CUmemGenericAllocationHandle v);
/* 0 and *out set, or CUDA_ERROR_INVALID_HANDLE. */
CUresult ck_cu_stream_real(CUstream v, CUstream *out);

/* The calling thread's current context, as the program set it. */
struct ck_cu_ctx *ck_cu_current(void);
void ck_cu_set_current(struct ck_cu_ctx *c);
/* After a restart, each thread makes its context current again on its
 * next call; bumping the generation asks for that. */
void ck_cu_new_generation(void);

void ck_cu_map_drop(struct ck_cu_map *m);
void ck_cu_phys_put(struct ck_cu_phys *p);

/* Size of a module image as passed to cuModuleLoadData (ELF cubin, fatbin
 * or NUL-terminated text). */
size_t ck_cu_image_size(const void *image);

/* Round handlers (cu_capture.c, cu_rebuild.c, cu_drvckpt.c). */
int ck_cu_capture(void);
void ck_cu_capture_free(void);
int ck_cu_rebuild(void);
/* Copies a physical allocation to (to_dev) or from its host copy. */
int ck_cu_phys_copy(struct ck_cu_phys *p, int to_dev);
int ck_cu_drvckpt_wanted(void);
int ck_cu_drvckpt_suspend(void);
int ck_cu_drvckpt_resume(void);
int ck_cu_unsupported_check(void);
/* cuMemFree of managed memory (1 and *r set if p was that), and the end of
 * an exported allocation (cu_api_unsup.c). */
int ck_cu_unsup_free(CUdeviceptr p, CUresult *r);
void ck_cu_unsup_forget(CUdeviceptr p);

/* A context to run the plugin's own copies in, made current on the
 * calling thread; the previous real context is given back by restore. */
int ck_cu_borrow_ctx(CUdevice dev, CUcontext *prev);
void ck_cu_restore_ctx(CUcontext prev);

#pragma GCC visibility pop

#endif
