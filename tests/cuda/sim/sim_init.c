/* cksim: initialisation, the reset hook, and device queries. */
#include "sim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct sim_state sim = { .memfd = -1 };
pthread_mutex_t sim_lock = PTHREAD_MUTEX_INITIALIZER;
__thread struct sim_ctx *sim_cur;

static void free_lists(void)
{
	while (sim.ctxs) {
		struct sim_ctx *c = sim.ctxs;
		sim.ctxs = c->next;
		c->magic = 0;
		free(c);
	}
	while (sim.resvs) {
		struct sim_resv *r = sim.resvs;
		sim.resvs = r->next;
		free(r);
	}
	while (sim.maps) {
		struct sim_map *m = sim.maps;
		sim.maps = m->next;
		free(m);
	}
	while (sim.phys) {
		struct sim_phys *p = sim.phys;
		sim.phys = p->next;
		p->magic = 0;
		free(p->ckpt_copy);
		free(p);
	}
	while (sim.free_list) {
		struct sim_free *f = sim.free_list;
		sim.free_list = f->next;
		free(f);
	}
}

/* Drops every piece of driver state; what a process restored from a memory
 * image has of a driver. `orphaned`: the state came back from an image, so
 * its descriptor number may now belong to someone else and is not closed. */
static void drop(int orphaned)
{
	sim_host_forget(!orphaned);
	sim_stream_forget();
	sim_module_forget();
	if (!orphaned)
		sim_devmem_close();
	free_lists();
	memset(&sim, 0, sizeof(sim));
	sim.memfd = -1;
	sim_cur = NULL;
}

void sim_drop_state(void)
{
	drop(0);
}

/* Exported test hook (not a CUDA name): "the process was restored". */
SIM_API void cksimReset(void)
{
	pthread_mutex_lock(&sim_lock);
	if (sim.inited)
		drop(0);
	pthread_mutex_unlock(&sim_lock);
}

static int range_mapped(void)
{
	unsigned char v;

	return mincore((void *)SIM_VA_BASE, (size_t)sysconf(_SC_PAGESIZE), &v) == 0 || errno != ENOMEM;
}

void sim_read_cc(int *major, int *minor)
{
	const char *e = getenv("CKSIM_CC");

	*major = 9;
	*minor = 0;
	if (e && *e)
		sscanf(e, "%d.%d", major, minor);
}

static void read_env(void)
{
	const char *e;

	snprintf(sim.name, sizeof(sim.name), "%s",
		 (e = getenv("CKSIM_DEVICE_NAME")) && *e ? e : "cksim Simulated GPU");
	sim_read_cc(&sim.cc_major, &sim.cc_minor);
	sim.mem_size = (uint64_t)1024 << 20;
	if ((e = getenv("CKSIM_MEM_MB")) && *e)
		sim.mem_size = strtoull(e, NULL, 10) << 20;
	sim.mem_size = sim.mem_size / SIM_GRAN * SIM_GRAN;
	sim.ndev = 1;
	if ((e = getenv("CKSIM_DEVICES")) && *e)
		sim.ndev = atoi(e);
	if (sim.ndev < 1 || sim.ndev > SIM_MAX_DEV)
		sim.ndev = 1;
}

SIM_API CUresult CUDAAPI cuInit(unsigned int Flags)
{
	CUresult ret = CUDA_SUCCESS;

	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	if (sim.inited && !range_mapped())
		drop(1);
	if (sim.inited)
		goto out;
	read_env();
	if (sim_devmem_open() < 0) {
		ret = CUDA_ERROR_OPERATING_SYSTEM;
		goto out;
	}
	sim.inited = 1;
out:
	pthread_mutex_unlock(&sim_lock);
	return ret;
}

CUresult sim_check(void)
{
	if (!sim.inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	/* Checkpointed: the process holds no device until it is restored. */
	return sim.ckstate == CU_PROCESS_STATE_CHECKPOINTED ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = CUDA_VERSION;
	return CUDA_SUCCESS;
}

static CUresult dev_ok(CUdevice dev)
{
	CUresult r = sim_check();

	if (r)
		return r;
	return dev >= 0 && dev < sim.ndev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

SIM_API CUresult CUDAAPI cuDeviceGetCount(int *count)
{
	CUresult r = sim_check();

	if (r)
		return r;
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = sim.ndev;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
	CUresult r = dev_ok(ordinal);

	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = ordinal;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
	CUresult r = dev_ok(dev);

	if (r)
		return r;
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	snprintf(name, (size_t)len, "%s", sim.name);
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuDeviceTotalMem(size_t *bytes, CUdevice dev)
{
	CUresult r = dev_ok(dev);

	if (r)
		return r;
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	*bytes = sim.mem_size;
	return CUDA_SUCCESS;
}

/* Derived from name, compute capability and ordinal: another simulated
 * GPU model has another UUID, the same one keeps it. */
SIM_API CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
	CUresult r = dev_ok(dev);
	uint64_t h = 1469598103934665603ULL;
	const char *s;
	int i;

	if (r)
		return r;
	if (!uuid)
		return CUDA_ERROR_INVALID_VALUE;
	for (s = sim.name; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	h = (h ^ (uint64_t)(sim.cc_major * 100 + sim.cc_minor)) * 1099511628211ULL;
	h = (h ^ (uint64_t)dev) * 1099511628211ULL;
	for (i = 0; i < 16; i++) {
		uuid->bytes[i] = (char)(h >> ((i % 8) * 8));
		if (i == 7)
			h = h * 1099511628211ULL + 0x9e3779b97f4a7c15ULL;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	CUresult r = dev_ok(dev);

	if (r)
		return r;
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = sim.cc_major; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = sim.cc_minor; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *pi = 1; break;
	default: *pi = 0; break;
	}
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuMemGetInfo(size_t *free_b, size_t *total)
{
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!free_b || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	*free_b = sim.mem_size - sim.mem_used;
	*total = sim.mem_size;
	pthread_mutex_unlock(&sim_lock);
	return CUDA_SUCCESS;
}
