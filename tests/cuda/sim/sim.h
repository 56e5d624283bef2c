/* cksim: a TEST DOUBLE of the CUDA Driver API (libcuda.so.1), for machines
 * without a GPU. It is not a driver and runs nothing on a GPU.
 *
 * Host memory stands in for device memory, placed the way real device
 * memory is: outside the process's ordinary memory, in shared mappings of a
 * memfd named "cksim-device" inside one large reserved address range (so a
 * checkpointer must skip it, as it skips /dev/nvidia* mappings, and so
 * fixed-address reservations can be recreated). All driver state lives in
 * this library and is dropped by cksimReset(), which tests use to play "a
 * new process after restore"; cuInit also drops state it finds orphaned
 * (its device range no longer mapped), which is what a restored image
 * looks like.
 *
 * Work is executed synchronously at enqueue time (a legal schedule for
 * streams); kernels are a fixed table of CPU functions looked up by name
 * from a tiny text module format (see sim_module.c).
 *
 * Environment: CKSIM_DEVICE_NAME, CKSIM_CC=major.minor, CKSIM_MEM_MB
 * (device memory size), CKSIM_DEVICES (device count, default 1). */
#ifndef CKSIM_SIM_H
#define CKSIM_SIM_H

#include "plugins/cuda/cuda_abi.h"
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_API __attribute__((visibility("default")))
#define SIM_GRAN ((size_t)2 << 20)             /* allocation granularity */
#define SIM_VA_BASE 0x500000000000ULL          /* device VA range start: above the
                                                * sanitizers' shadow, below PIE */
#define SIM_VA_SIZE ((size_t)1 << 40)          /* 1 TiB of device VA */
#define SIM_MAX_DEV 8

struct sim_ctx {
	uint32_t magic;
	CUdevice dev;
	int primary;
	struct sim_ctx *next;
};

/* A reserved device VA range; maps are kept per reservation. */
struct sim_resv {
	uint64_t base, size;
	int from_alloc;      /* made by cuMemAlloc: freed by cuMemFree */
	uint64_t alloc_phys; /* its physical handle when from_alloc */
	struct sim_resv *next;
};

/* Physical device memory: a range of the memfd. */
struct sim_phys {
	uint32_t magic;
	uint64_t off, size;
	int refs; /* 1 for the handle + 1 per mapping */
	int released;
	void *ckpt_copy; /* contents while checkpointed (sim_ckpt.c) */
	struct sim_phys *next;
};

struct sim_map {
	uint64_t va, size;
	struct sim_phys *phys;
	uint64_t phys_off;
	int access; /* set by cuMemSetAccess */
	struct sim_map *next;
};

struct sim_state {
	int inited;
	int memfd;
	uint64_t mem_size, mem_used;
	int ndev;
	int cc_major, cc_minor;
	char name[128];
	struct sim_ctx *ctxs;
	struct sim_ctx *primary[SIM_MAX_DEV];
	int primary_refs[SIM_MAX_DEV];
	struct sim_resv *resvs;
	struct sim_phys *phys;
	struct sim_map *maps;
	struct sim_free { uint64_t off, size; struct sim_free *next; } *free_list;
	int managed_live;
	CUprocessState ckstate; /* the checkpoint API model (sim_ckpt.c) */
	int ck_cc;              /* 10 * major + minor at checkpoint */
};

extern struct sim_state sim;
extern pthread_mutex_t sim_lock;
extern __thread struct sim_ctx *sim_cur;

#define SIM_CTX_MAGIC 0x43544b53u
#define SIM_PHYS_MAGIC 0x50484b53u

/* Every entry point except the error-name ones starts with this. */
CUresult sim_check(void);
CUresult sim_need_ctx(void);
void sim_drop_state(void);
/* CKSIM_CC, default 9.0. */
void sim_read_cc(int *major, int *minor);
void sim_host_forget(int unmap);
void sim_stream_forget(void);
void sim_module_forget(void);

/* Device memory (sim_devmem.c); callers hold sim_lock. */
int sim_devmem_open(void);
/* A new device file and range for existing records (checkpoint API). */
int sim_devmem_reopen(void);
void sim_devmem_release(void);
/* Page-locked blocks: unmapped at checkpoint, mapped again at restore. */
void sim_host_unmap_all(void);
int sim_host_remap_all(void);
void sim_devmem_close(void);
CUresult sim_phys_alloc(uint64_t size, struct sim_phys **out);
void sim_phys_put(struct sim_phys *p);
CUresult sim_va_reserve(uint64_t size, uint64_t align, uint64_t want, uint64_t *out);
CUresult sim_va_release(uint64_t base, uint64_t size);
CUresult sim_map(uint64_t va, uint64_t size, struct sim_phys *p, uint64_t off);
CUresult sim_unmap(uint64_t va, uint64_t size);
CUresult sim_set_access(uint64_t va, uint64_t size, int rw);
/* cuMemAlloc's work, for the sim's own device memory (module globals). */
CUresult sim_alloc_dev(uint64_t bytes, uint64_t *out);
CUresult sim_free_dev(uint64_t ptr);
/* Non-zero if [p, p+n) is device memory mapped for access. */
int sim_dev_ok(uint64_t p, uint64_t n);
/* Whether [p, p+n) is accessible as a source/destination: device memory, or
 * host memory (anything else; the sim cannot tell bad host pointers). */
int sim_is_dev(uint64_t p);

/* Streams and events. */
struct sim_stream {
	uint32_t magic;
	struct sim_ctx *ctx;
	unsigned flags;
};
#define SIM_STREAM_MAGIC 0x53544b53u
CUresult sim_stream_ok(CUstream s);

/* Kernels (sim_kernels.c). */
typedef CUresult (*sim_kernel_fn)(void **params);
struct sim_kernel {
	const char *name;
	sim_kernel_fn fn;
	int nargs;
};
const struct sim_kernel *sim_kernel_find(const char *name);

#endif
