/* Interposed: modules, functions and launches. The plugin keeps a copy of
 * every module image (the caller may free its own) and the names of the
 * functions taken from it, to load and resolve them again on restart,
 * possibly on another GPU: a PTX image is compiled again for it, a cubin
 * for another architecture fails there, by name. */
#include "cu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname);

static CUresult load(CUmodule *module, const void *image, size_t len)
{
	struct ck_cu_mod *m;
	CUresult r;

	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(m = calloc(1, sizeof(*m))) || !(m->image = malloc(len))) {
		free(m);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(m->image, image, len);
	m->image_len = len;
	if ((r = ck_cu_d.cuModuleLoadData(&m->real, m->image)) != CUDA_SUCCESS) {
		free(m->image);
		free(m);
		return r;
	}
	m->magic = CK_CU_MOD_MAGIC;
	m->ctx = ck_cu_current();
	pthread_mutex_lock(&ck_cu_lock);
	m->next = ck_cu.mods;
	ck_cu.mods = m;
	pthread_mutex_unlock(&ck_cu_lock);
	*module = (CUmodule)m;
	return CUDA_SUCCESS;
}

CK_CU_API CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	CK_ENTER;
	CK_LEAVE(load(module, image, image ? ck_cu_image_size(image) : 0));
}

/* Served from the file's bytes, so the image is recorded like any other. */
CK_CU_API CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	struct stat st;
	char *buf = NULL;
	ssize_t n;
	size_t got = 0;
	int fd;

	CK_ENTER;
	if (!fname)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	if ((fd = open(fname, O_RDONLY | O_CLOEXEC)) < 0)
		CK_LEAVE(CUDA_ERROR_FILE_NOT_FOUND);
	r = CUDA_ERROR_FILE_NOT_FOUND;
	if (fstat(fd, &st) < 0 || !(buf = calloc(1, (size_t)st.st_size + 1)))
		goto out;
	while (got < (size_t)st.st_size && (n = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	if (got != (size_t)st.st_size)
		goto out;
	/* The trailing NUL makes a PTX file a valid text image. */
	r = load(module, buf, got + 1);
out:
	close(fd);
	free(buf);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	struct ck_cu_mod **mp, *m;
	struct ck_cu_fn *f;

	CK_ENTER;
	if (!(m = ck_cu_mod_of(hmod)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if ((r = ck_cu_d.cuModuleUnload(m->real)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (mp = &ck_cu.mods; *mp; mp = &(*mp)->next)
		if (*mp == m) {
			*mp = m->next;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	while ((f = m->fns)) {
		m->fns = f->next;
		f->magic = 0;
		free(f->name);
		free(f);
	}
	m->magic = 0;
	free(m->image);
	free(m);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct ck_cu_mod *m;
	struct ck_cu_fn *f;
	CUfunction real;

	CK_ENTER;
	if (!hfunc || !name)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (!(m = ck_cu_mod_of(hmod)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	/* One record per name: repeated lookups return the same handle. */
	pthread_mutex_lock(&ck_cu_lock);
	for (f = m->fns; f; f = f->next)
		if (!strcmp(f->name, name))
			break;
	pthread_mutex_unlock(&ck_cu_lock);
	if (f) {
		*hfunc = (CUfunction)f;
		CK_LEAVE(CUDA_SUCCESS);
	}
	if ((r = ck_cu_d.cuModuleGetFunction(&real, m->real, name)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	if (!(f = calloc(1, sizeof(*f))) || !(f->name = strdup(name))) {
		free(f);
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	}
	f->magic = CK_CU_FN_MAGIC;
	f->real = real;
	f->mod = m;
	pthread_mutex_lock(&ck_cu_lock);
	f->next = m->fns;
	m->fns = f;
	pthread_mutex_unlock(&ck_cu_lock);
	*hfunc = (CUfunction)f;
	CK_LEAVE(CUDA_SUCCESS);
}

/* A module global lives in memory the driver places when the module is
 * loaded; after a restart it may be elsewhere, while the program holds the
 * old address. Allowed, and marked: a round with such a module loaded is
 * refused rather than restored wrong (cu_api_unsup.c). */
CK_CU_API CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	struct ck_cu_mod *m;

	CK_ENTER;
	if (!ck_cu_d.cuModuleGetGlobal)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if (!(m = ck_cu_mod_of(hmod)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if ((r = ck_cu_d.cuModuleGetGlobal(dptr, bytes, m->real, name)) == CUDA_SUCCESS)
		m->globals = 1;
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					  unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
					  unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
					  void **kernelParams, void **extra)
{
	struct ck_cu_fn *fn;
	CUstream s;

	CK_ENTER;
	if (!(fn = ck_cu_fn_of(f)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuLaunchKernel(fn->real, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
					sharedMemBytes, s, kernelParams, extra));
}
