/* The fast path for a restart on the same GPU model: the driver's own
 * checkpoint API (cuCheckpointProcessLock / Checkpoint / Restore / Unlock,
 * r570 and later). The driver then moves device memory into its own host
 * memory, which the image carries, and restores it onto the same chip type
 * only. Chosen with CKRUN_CUDA_CHECKPOINT=driver when the driver offers it;
 * otherwise the plugin's own capture (portable across GPU models) is used.
 * The plugin calls the API on its own process; the design's agent would
 * call it from outside on the job's pid. This path has run only against
 * the simulated driver's model of the API, never on a GPU. */
#include "cu_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cu_ckpt.h"

#define LOCK_TIMEOUT_MS 10000

int ck_cu_drvckpt_wanted(void)
{
	const char *m = getenv("CKRUN_CUDA_CHECKPOINT");

	if (!m || strcmp(m, "driver"))
		return 0;
	ck_cu_drv_probe_ckpt();
	return ck_cu_d.ckLock && ck_cu_d.ckCheckpoint && ck_cu_d.ckRestore && ck_cu_d.ckUnlock;
}

int ck_cu_drvckpt_suspend(void)
{
	CUcheckpointLockArgs la;
	CUcheckpointCheckpointArgs ca;
	CUcheckpointUnlockArgs ua;
	CUresult r;

	memset(&la, 0, sizeof(la));
	memset(&ca, 0, sizeof(ca));
	memset(&ua, 0, sizeof(ua));
	la.timeoutMs = LOCK_TIMEOUT_MS;
	if ((r = ck_cu_d.ckLock(getpid(), &la))) {
		ck_plugin_fail("CUDA driver checkpoint: lock failed: %s", ck_cu_err_name(r));
		return -EIO;
	}
	if ((r = ck_cu_d.ckCheckpoint(getpid(), &ca))) {
		/* Give the GPU back to the job, as a failed round must. */
		ck_cu_d.ckUnlock(getpid(), &ua);
		ck_plugin_fail("CUDA driver checkpoint: checkpoint failed: %s", ck_cu_err_name(r));
		return -EIO;
	}
	return 0;
}

/* After a round in the same process, or in a restored one (same chip type;
 * the GPU UUIDs are left to the driver). */
int ck_cu_drvckpt_resume(void)
{
	CUcheckpointRestoreArgs ra;
	CUcheckpointUnlockArgs ua;
	CUresult r;

	memset(&ra, 0, sizeof(ra));
	memset(&ua, 0, sizeof(ua));
	if ((r = ck_cu_d.ckRestore(getpid(), &ra))) {
		ck_plugin_fail("CUDA driver restore failed: %s (another GPU model needs "
			       "CKRUN_CUDA_CHECKPOINT=capture)",
			       ck_cu_err_name(r));
		return -EIO;
	}
	if ((r = ck_cu_d.ckUnlock(getpid(), &ua))) {
		ck_plugin_fail("CUDA driver unlock failed: %s", ck_cu_err_name(r));
		return -EIO;
	}
	return 0;
}
