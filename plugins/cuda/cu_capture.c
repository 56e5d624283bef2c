/* The checkpoint side of a round (PRESUSPEND): with the gate closed, wait
 * for the device to finish its queued work, then copy every physical
 * allocation into ordinary anonymous host memory, which the memory image
 * carries. The copies are made here, not at PRECHECKPOINT, because they
 * allocate (see ckrun/plugin.h). */
#include "cu_internal.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "cu_ckpt.h"

static int sync_all(void)
{
	struct ck_cu_ctx *c;
	struct ck_cu_stream *s;
	CUresult r;

	for (c = ck_cu.ctxs; c; c = c->next) {
		if ((r = ck_cu_d.cuCtxSetCurrent(c->real)) || (r = ck_cu_d.cuCtxSynchronize()))
			goto fail;
		for (s = ck_cu.streams; s; s = s->next)
			if (s->ctx == c && (r = ck_cu_d.cuStreamSynchronize(s->real)))
				goto fail;
	}
	return 0;
fail:
	ck_plugin_fail("CUDA synchronisation before checkpoint failed: %s (the job's device work faulted?)",
		       ck_cu_err_name(r));
	return -EIO;
}

/* Maps a physical allocation nobody maps whole at a scratch address, for
 * the plugin's own copy; *va = 0 if that cannot be done. */
static CUresult scratch_map(struct ck_cu_phys *p, CUdeviceptr *va)
{
	CUmemAccessDesc acc = { 0 };
	CUresult r;

	*va = 0;
	acc.location = p->prop.location;
	acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
	if ((r = ck_cu_d.cuMemAddressReserve(va, p->size, 0, 0, 0)))
		return r;
	if ((r = ck_cu_d.cuMemMap(*va, p->size, 0, p->real, 0)))
		goto out_free;
	if ((r = ck_cu_d.cuMemSetAccess(*va, p->size, &acc, 1)))
		goto out_unmap;
	return CUDA_SUCCESS;
out_unmap:
	ck_cu_d.cuMemUnmap(*va, p->size);
out_free:
	ck_cu_d.cuMemAddressFree(*va, p->size);
	*va = 0;
	return r;
}

static void scratch_unmap(struct ck_cu_phys *p, CUdeviceptr va)
{
	ck_cu_d.cuMemUnmap(va, p->size);
	ck_cu_d.cuMemAddressFree(va, p->size);
}

/* Copies between a physical allocation and its host copy, through a
 * whole-allocation mapping when there is one (the cuMemAlloc case), else
 * a scratch mapping (the handle is still held), else piece by piece
 * through the program's mappings (released handle: only mapped bytes are
 * reachable, so only they matter). `to_dev`: direction. */
int ck_cu_phys_copy(struct ck_cu_phys *p, int to_dev)
{
	struct ck_cu_map *m;
	CUdeviceptr va = 0;
	CUresult r = CUDA_SUCCESS;

	for (m = ck_cu.maps; m; m = m->next)
		if (m->phys == p && !m->off && m->size == p->size && m->naccess)
			break;
	if (m || !p->released) {
		if (m)
			va = m->va;
		else if ((r = scratch_map(p, &va)))
			return -EIO;
		r = to_dev ? ck_cu_d.cuMemcpyHtoD(va, p->saved, p->size) : ck_cu_d.cuMemcpyDtoH(p->saved, va, p->size);
		if (!m)
			scratch_unmap(p, va);
		return r ? -EIO : 0;
	}
	for (m = ck_cu.maps; m && !r; m = m->next)
		if (m->phys == p && m->naccess)
			r = to_dev ? ck_cu_d.cuMemcpyHtoD(m->va, (char *)p->saved + m->off, m->size)
				   : ck_cu_d.cuMemcpyDtoH((char *)p->saved + m->off, m->va, m->size);
	return r ? -EIO : 0;
}

void ck_cu_capture_free(void)
{
	struct ck_cu_phys *p;

	for (p = ck_cu.phys; p; p = p->next)
		if (p->saved) {
			munmap(p->saved, p->size);
			p->saved = NULL;
		}
}

int ck_cu_capture(void)
{
	struct ck_cu_phys *p;
	CUcontext prev = NULL;
	int ret;

	ck_cu_d.cuCtxGetCurrent(&prev);
	if ((ret = sync_all()))
		goto out;
	for (p = ck_cu.phys; p; p = p->next) {
		CUcontext ignored;

		p->saved = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p->saved == MAP_FAILED) {
			p->saved = NULL;
			ck_plugin_fail("no host memory for a %zu MiB copy of CUDA device memory", p->size >> 20);
			ret = -ENOMEM;
			goto out;
		}
		/* Gigabytes are filled at once: fewer, larger page faults. */
		madvise(p->saved, p->size, MADV_HUGEPAGE);
		if (ck_cu_borrow_ctx(p->prop.location.id, &ignored) < 0 || ck_cu_phys_copy(p, 0) < 0) {
			ck_plugin_fail("copying %zu MiB of CUDA device memory to the host failed", p->size >> 20);
			ret = -EIO;
			goto out;
		}
	}
out:
	if (ret)
		ck_cu_capture_free();
	ck_cu_restore_ctx(prev);
	return ret;
}
