/* Shared helpers of the CUDA test workloads. A workload is written against
 * the real Driver API; its state lives in its own globals so a harness can
 * run its steps in two halves with a checkpoint between them. Output is
 * deterministic: checksums of device memory read back, never addresses or
 * timings. */
#ifndef CUTEST_H
#define CUTEST_H

#include "plugins/cuda/cuda_abi.h"
#include <stddef.h>
#include <stdint.h>

struct workload {
	const char *name;
	long steps;                /* default step count (a few seconds on the sim) */
	int (*setup)(void);        /* after a context is current */
	int (*step)(long i);
	int (*report)(void);       /* prints "name: key=checksum" lines */
	int (*teardown)(void);
};

/* Fails the program with the call, the error name and where. */
#define CK(call)                                                      \
	do {                                                          \
		CUresult ck_r_ = (call);                              \
		if (ck_r_ != CUDA_SUCCESS)                            \
			return cutest_fail(#call, ck_r_, __FILE__, __LINE__); \
	} while (0)

int cutest_fail(const char *what, CUresult r, const char *file, int line);
uint64_t cutest_fnv(const void *p, size_t n, uint64_t h);
/* Checksum of n bytes of device memory (read back with cuMemcpyDtoH). */
int cutest_dev_sum(CUdeviceptr d, size_t n, uint64_t *out);
/* Loads a module of the simulated driver's text format: target "ptx" or
 * "sm_XY", with the given kernel names. */
int cutest_load(CUmodule *m, const char *target, const char *const *kernels, CUresult *why);
long cutest_steps(const struct workload *w);

/* Creates the context the workloads run in (cuInit, device 0). */
int cutest_init(CUcontext *ctx);
/* Steps completed so far by cutest_steps_run (read by other threads). */
extern volatile long cutest_progress;
/* Runs steps [from, to). */
int cutest_steps_run(const struct workload *w, long from, long to);

extern const struct workload wl_alloc, wl_streams, wl_vmm, wl_pinned, wl_modules;

#endif
