/* The real driver: loaded on first use, entry points looked up by their
 * versioned names. The job's own calls reach the plugin's functions of the
 * same names (the preload comes first); lookups on the driver's handle find
 * the driver's. */
#include "cu_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

struct ck_cu_drv ck_cu_d;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_ret = -ENOENT;

#define CK_STR2(x) #x
#define CK_STR(x) CK_STR2(x)

static void load(void)
{
	/* CKRUN_CUDA_DRIVER names the driver library by path: tests use it,
	 * and so must a launcher that puts a directory first on the library
	 * path where "libcuda.so.1" is libckpt.so itself (so that a runtime
	 * opening libcuda.so.1 and looking symbols up on that handle gets the
	 * interposed ones). */
	const char *path = getenv("CKRUN_CUDA_DRIVER");
	void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		load_ret = -ENOENT;
		return;
	}
	/* That directory without CKRUN_CUDA_DRIVER: the name led back here. */
	if (dlsym(h, "cuInit") == (void *)cuInit) {
		dlclose(h);
		load_ret = -ELOOP;
		return;
	}
	/* A driver without one of these returns CUDA_ERROR_NOT_SUPPORTED from
	 * the wrapper rather than failing every call. */
#define CK_CU_LOOKUP(n) ck_cu_d.n = (__typeof__(n) *)dlsym(h, CK_STR(n));
	CK_CU_DRV_FNS(CK_CU_LOOKUP)
#undef CK_CU_LOOKUP
	load_ret = ck_cu_d.cuInit ? 0 : -ENOENT;
}

int ck_cu_drv_load(void)
{
	pthread_once(&once, load);
	return load_ret;
}

static void *proc(const char *name)
{
	CUdriverProcAddressQueryResult st;
	void *fn = NULL;

	if (!ck_cu_d.cuGetProcAddress ||
	    ck_cu_d.cuGetProcAddress(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS ||
	    st != CU_GET_PROC_ADDRESS_SUCCESS)
		return NULL;
	return fn;
}

void ck_cu_drv_probe_ckpt(void)
{
	ck_cu_d.ckLock = (__typeof__(ck_cu_d.ckLock))proc("cuCheckpointProcessLock");
	ck_cu_d.ckCheckpoint = (__typeof__(ck_cu_d.ckCheckpoint))proc("cuCheckpointProcessCheckpoint");
	ck_cu_d.ckRestore = (__typeof__(ck_cu_d.ckRestore))proc("cuCheckpointProcessRestore");
	ck_cu_d.ckUnlock = (__typeof__(ck_cu_d.ckUnlock))proc("cuCheckpointProcessUnlock");
}

const char *ck_cu_err_name(CUresult r)
{
	const char *n = NULL;

	if (!ck_cu_d.cuGetErrorName || ck_cu_d.cuGetErrorName(r, &n) != CUDA_SUCCESS || !n)
		return "unknown CUDA error";
	return n;
}
