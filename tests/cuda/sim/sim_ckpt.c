/* cksim: a model of the driver's checkpoint API (cuCheckpointProcess*),
 * for testing the code that drives it; how the real driver behaves was not
 * observed. Own process only. Lock marks the process; Checkpoint copies
 * every physical allocation into the driver's own host memory (ordinary
 * heap, so a memory image carries it) and gives the device back (device
 * file and mappings gone); Restore makes a new device file, maps everything
 * back at the same addresses and copies the contents in, and refuses a
 * device of another compute capability (the real API restores onto the
 * same chip type only); Unlock ends it. */
#include "sim.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static CUresult state_is(int pid, CUprocessState want)
{
	if (!sim.inited)
		return CUDA_ERROR_NOT_INITIALIZED;
	if (pid != getpid())
		return CUDA_ERROR_INVALID_VALUE;
	return sim.ckstate == want ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_STATE;
}

SIM_API CUresult CUDAAPI cuCheckpointProcessGetState(int pid, CUprocessState *state)
{
	if (!state || pid != getpid())
		return CUDA_ERROR_INVALID_VALUE;
	*state = sim.ckstate;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuCheckpointProcessLock(int pid, CUcheckpointLockArgs *args)
{
	CUresult r;

	(void)args;
	pthread_mutex_lock(&sim_lock);
	if (!(r = state_is(pid, CU_PROCESS_STATE_RUNNING)))
		sim.ckstate = CU_PROCESS_STATE_LOCKED;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs *args)
{
	struct sim_phys *p;
	CUresult r;

	(void)args;
	pthread_mutex_lock(&sim_lock);
	if ((r = state_is(pid, CU_PROCESS_STATE_LOCKED)))
		goto out;
	for (p = sim.phys; p; p = p->next) {
		if (!(p->ckpt_copy = malloc(p->size)) ||
		    pread(sim.memfd, p->ckpt_copy, p->size, (off_t)p->off) != (ssize_t)p->size) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
			goto undo;
		}
	}
	sim_host_unmap_all();
	sim_devmem_release();
	sim.ck_cc = sim.cc_major * 10 + sim.cc_minor;
	sim.ckstate = CU_PROCESS_STATE_CHECKPOINTED;
	goto out;
undo:
	for (p = sim.phys; p; p = p->next) {
		free(p->ckpt_copy);
		p->ckpt_copy = NULL;
	}
out:
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs *args)
{
	struct sim_phys *p;
	struct sim_map *m;
	int maj, min;
	CUresult r;

	(void)args;
	pthread_mutex_lock(&sim_lock);
	if ((r = state_is(pid, CU_PROCESS_STATE_CHECKPOINTED)))
		goto out;
	sim_read_cc(&maj, &min);
	if (maj * 10 + min != sim.ck_cc) {
		r = CUDA_ERROR_NOT_SUPPORTED;
		goto out;
	}
	r = CUDA_ERROR_OPERATING_SYSTEM;
	if (sim_devmem_reopen() < 0)
		goto out;
	for (p = sim.phys; p; p = p->next)
		if (pwrite(sim.memfd, p->ckpt_copy, p->size, (off_t)p->off) != (ssize_t)p->size)
			goto out;
	for (m = sim.maps; m; m = m->next)
		if (mmap((void *)m->va, m->size, m->access ? PROT_READ | PROT_WRITE : PROT_NONE,
			 MAP_SHARED | MAP_FIXED, sim.memfd, (off_t)(m->phys->off + m->phys_off)) == MAP_FAILED)
			goto out;
	if (sim_host_remap_all() < 0)
		goto out;
	for (p = sim.phys; p; p = p->next) {
		free(p->ckpt_copy);
		p->ckpt_copy = NULL;
	}
	sim.ckstate = CU_PROCESS_STATE_LOCKED;
	r = CUDA_SUCCESS;
out:
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs *args)
{
	CUresult r;

	(void)args;
	pthread_mutex_lock(&sim_lock);
	if (!(r = state_is(pid, CU_PROCESS_STATE_LOCKED)))
		sim.ckstate = CU_PROCESS_STATE_RUNNING;
	pthread_mutex_unlock(&sim_lock);
	return r;
}
