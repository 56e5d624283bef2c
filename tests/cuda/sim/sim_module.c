/* cksim: modules and launches.
 *
 * A module image is NUL-terminated text in a format of this sim's own:
 *
 *     cksim-module 1
 *     target ptx          (portable: loads on any device)
 *     target sm_90        (binary for one architecture only)
 *     kernel NAME         (one line per kernel; NAME must be in the sim's
 *                          kernel table, sim_kernels.c)
 *     global NAME SIZE    (a zeroed module global of SIZE bytes, in device
 *                          memory allocated at load, for cuModuleGetGlobal)
 *
 * Real PTX text is accepted as far as its entry points (".entry NAME(")
 * are kernels the sim has: it is portable, and the sim runs its own CPU
 * version of each by name. A cubin or fatbin is refused with
 * CUDA_ERROR_INVALID_IMAGE: the sim cannot run device code. */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MOD_MAGIC 0x444f4d53u
#define FN_MAGIC 0x434e4653u
#define MAX_KERNELS 32

struct sim_fn {
	uint32_t magic;
	struct sim_mod *mod;
	const struct sim_kernel *k;
	char name[128];
};

#define MAX_GLOBALS 8

struct sim_global {
	char name[64];
	uint64_t va, size;
};

struct sim_mod {
	uint32_t magic;
	int nfn, nglob;
	struct sim_fn fns[MAX_KERNELS];
	struct sim_global globs[MAX_GLOBALS];
	struct sim_mod *next;
};

static struct sim_mod *mods;

/* Real PTX: every ".entry NAME(" must be a kernel of the sim's table. */
static CUresult parse_ptx(const char *img, struct sim_mod *m)
{
	const char *p = img, *e;
	size_t len;

	while ((p = strstr(p, ".entry "))) {
		struct sim_fn *f;

		p += 7;
		for (e = p; *e && *e != '(' && *e != ' ' && *e != '\n'; e++)
			;
		len = (size_t)(e - p);
		if (m->nfn == MAX_KERNELS || len >= sizeof(m->fns[0].name))
			return CUDA_ERROR_INVALID_PTX;
		f = &m->fns[m->nfn++];
		f->magic = FN_MAGIC;
		f->mod = m;
		memcpy(f->name, p, len);
		f->name[len] = 0;
		if (!(f->k = sim_kernel_find(f->name)))
			return CUDA_ERROR_INVALID_PTX;
	}
	return m->nfn ? CUDA_SUCCESS : CUDA_ERROR_INVALID_PTX;
}

static CUresult parse(const char *img, struct sim_mod *m)
{
	char line[128], target[128] = "";
	const char *p = img, *nl;
	int lineno = 0, is_ptx = 0, want;
	size_t len;

	for (; *p; p = *nl ? nl + 1 : nl, lineno++) {
		nl = strchr(p, '\n');
		if (!nl)
			nl = p + strlen(p);
		len = (size_t)(nl - p);
		if (len >= sizeof(line))
			return CUDA_ERROR_INVALID_IMAGE;
		memcpy(line, p, len);
		line[len] = 0;
		if (lineno == 0) {
			if (strcmp(line, "cksim-module 1"))
				return CUDA_ERROR_INVALID_IMAGE;
		} else if (!strncmp(line, "target ", 7)) {
			snprintf(target, sizeof(target), "%s", line + 7);
		} else if (!strncmp(line, "kernel ", 7)) {
			struct sim_fn *f;

			if (m->nfn == MAX_KERNELS)
				return CUDA_ERROR_INVALID_IMAGE;
			f = &m->fns[m->nfn++];
			f->magic = FN_MAGIC;
			f->mod = m;
			snprintf(f->name, sizeof(f->name), "%s", line + 7);
			f->k = sim_kernel_find(f->name);
		} else if (!strncmp(line, "global ", 7)) {
			struct sim_global *g;
			unsigned long long size;

			if (m->nglob == MAX_GLOBALS)
				return CUDA_ERROR_INVALID_IMAGE;
			g = &m->globs[m->nglob];
			if (sscanf(line + 7, "%63s %llu", g->name, &size) != 2 || !size)
				return CUDA_ERROR_INVALID_IMAGE;
			g->size = size;
			m->nglob++;
		} else if (len) {
			return CUDA_ERROR_INVALID_IMAGE;
		}
	}
	if (lineno == 0)
		return CUDA_ERROR_INVALID_IMAGE;
	if (!strcmp(target, "ptx")) {
		is_ptx = 1;
	} else if (sscanf(target, "sm_%d", &want) == 1) {
		if (want != sim.cc_major * 10 + sim.cc_minor)
			return CUDA_ERROR_NO_BINARY_FOR_GPU;
	} else {
		return CUDA_ERROR_INVALID_IMAGE;
	}
	for (int i = 0; i < m->nfn; i++)
		if (!m->fns[i].k)
			return is_ptx ? CUDA_ERROR_INVALID_PTX : CUDA_ERROR_INVALID_IMAGE;
	return CUDA_SUCCESS;
}

static void free_globals(struct sim_mod *m)
{
	for (int i = 0; i < m->nglob; i++)
		if (m->globs[i].va)
			sim_free_dev(m->globs[i].va);
}

SIM_API CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	struct sim_mod *m;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->magic = MOD_MAGIC;
	if (!memcmp(image, "\177ELF", 4))
		r = CUDA_ERROR_INVALID_IMAGE;
	else if (strstr(image, ".target") && strstr(image, ".entry"))
		r = parse_ptx(image, m);
	else
		r = parse(image, m);
	pthread_mutex_lock(&sim_lock);
	for (int i = 0; !r && i < m->nglob; i++)
		if ((r = sim_alloc_dev(m->globs[i].size, &m->globs[i].va)) == CUDA_SUCCESS)
			memset((void *)m->globs[i].va, 0, m->globs[i].size);
	if (r) {
		free_globals(m);
		pthread_mutex_unlock(&sim_lock);
		free(m);
		return r;
	}
	m->next = mods;
	mods = m;
	pthread_mutex_unlock(&sim_lock);
	*module = (CUmodule)m;
	return CUDA_SUCCESS;
}

static struct sim_mod *mod_find(CUmodule h)
{
	struct sim_mod *m;

	for (m = mods; m; m = m->next)
		if ((CUmodule)m == h)
			return m;
	return NULL;
}

SIM_API CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
	struct sim_mod **mp, *m;
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	for (mp = &mods; (m = *mp); mp = &m->next)
		if ((CUmodule)m == hmod)
			break;
	if (m) {
		*mp = m->next;
		free_globals(m);
	}
	pthread_mutex_unlock(&sim_lock);
	if (!m)
		return CUDA_ERROR_INVALID_HANDLE;
	m->magic = 0;
	free(m);
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
	struct sim_mod *m;
	CUresult r = sim_need_ctx();
	int i;

	if (r)
		return r;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	m = mod_find(hmod);
	r = m ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
	for (i = 0; m && i < m->nglob; i++)
		if (!strcmp(m->globs[i].name, name)) {
			if (dptr)
				*dptr = m->globs[i].va;
			if (bytes)
				*bytes = m->globs[i].size;
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct sim_mod *m;
	CUresult r = sim_need_ctx();
	int i;

	if (r)
		return r;
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	m = mod_find(hmod);
	r = m ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_HANDLE;
	for (i = 0; m && i < m->nfn; i++)
		if (!strcmp(m->fns[i].name, name)) {
			*hfunc = (CUfunction)&m->fns[i];
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&sim_lock);
	return r;
}

static int fn_live(struct sim_fn *f)
{
	struct sim_mod *m;

	for (m = mods; m; m = m->next)
		if (f >= m->fns && f < m->fns + m->nfn)
			return 1;
	return 0;
}

SIM_API CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
					unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
					unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
					void **kernelParams, void **extra)
{
	struct sim_fn *fn = (struct sim_fn *)f;
	CUresult r = sim_stream_ok(hStream);
	int live;

	(void)sharedMemBytes;
	if (r)
		return r;
	if (!gridDimX || !gridDimY || !gridDimZ || !blockDimX || !blockDimY || !blockDimZ ||
	    (uint64_t)blockDimX * blockDimY * blockDimZ > 1024)
		return CUDA_ERROR_INVALID_VALUE;
	if (extra)
		return CUDA_ERROR_NOT_SUPPORTED;
	pthread_mutex_lock(&sim_lock);
	live = fn_live(fn);
	pthread_mutex_unlock(&sim_lock);
	if (!live)
		return CUDA_ERROR_INVALID_HANDLE;
	if (fn->k->nargs && !kernelParams)
		return CUDA_ERROR_INVALID_VALUE;
	return fn->k->fn(kernelParams);
}

void sim_module_forget(void)
{
	while (mods) {
		struct sim_mod *m = mods;
		mods = m->next;
		free(m);
	}
}
