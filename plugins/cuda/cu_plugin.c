/* The CUDA plugin: what it does at each event of a round, and which
 * mappings it keeps out of the image. */
#include "cu_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cu_ckpt.h"

enum round_kind { ROUND_NONE, ROUND_CAPTURE, ROUND_DRIVER };

/* Part of the image: a restored process knows how its last round saved. */
static enum round_kind kind;

/* How long a round waits for CUDA calls in flight: CKRUN_CUDA_QUIESCE_S
 * seconds, default 120. */
static long quiesce_ms(void)
{
	const char *e = getenv("CKRUN_CUDA_QUIESCE_S");
	long s = e && *e ? atol(e) : 120;

	return (s > 0 ? s : 120) * 1000;
}

static int presuspend(void)
{
	long ms = quiesce_ms();
	int ret;

	kind = ROUND_NONE;
	/* Closed even when CUDA is unused, so no first call starts mid-round. */
	if (ck_cu_gate_close(ms) < 0) {
		ck_plugin_fail("a CUDA call was still running after %ld s (CKRUN_CUDA_QUIESCE_S)", ms / 1000);
		return -ETIMEDOUT;
	}
	if (!ck_cu.inited)
		return 0;
	if ((ret = ck_cu_unsupported_check()))
		return ret;
	if (ck_cu_drvckpt_wanted()) {
		kind = ROUND_DRIVER;
		return ck_cu_drvckpt_suspend();
	}
	kind = ROUND_CAPTURE;
	return ck_cu_capture();
}

static int resume(void)
{
	int ret = 0;

	if (kind == ROUND_DRIVER)
		ret = ck_cu_drvckpt_resume();
	else if (kind == ROUND_CAPTURE)
		ck_cu_capture_free();
	kind = ROUND_NONE;
	ck_cu_gate_open();
	return ret;
}

static int restart(void)
{
	int ret = 0;

	if (kind == ROUND_DRIVER)
		ret = ck_cu_drvckpt_resume();
	else if (kind == ROUND_CAPTURE)
		ret = ck_cu_rebuild();
	kind = ROUND_NONE;
	/* Opened even on failure: calls then fail with driver errors rather
	 * than hang the job. */
	ck_cu_gate_open();
	return ret;
}

static int event(enum ck_event ev)
{
	switch (ev) {
	case CK_EV_PRESUSPEND:
		return presuspend();
	case CK_EV_RESUME:
		return resume();
	case CK_EV_RESTART:
		return restart();
	case CK_EV_INIT:
	case CK_EV_PRECHECKPOINT: /* all done at PRESUSPEND, where allocating is allowed */
	case CK_EV_ATFORK_CHILD:  /* CUDA is not usable in a forked child anyway */
		return 0;
	}
	return 0;
}

/* Device memory (the NVIDIA device files, and the simulated driver's
 * memory file) is never in the image: its contents travel as the host
 * copies made at PRESUSPEND, and the mappings are made again on restart.
 * The core asks the same for descriptors (start = end = 0, why = NULL):
 * the driver's descriptors are not saved either. */
static int skip_region(uint64_t start, uint64_t end, const char *path, const char **why)
{
	(void)start;
	(void)end;
	if (path && (strstr(path, "/dev/nvidia") || strstr(path, "cksim-device"))) {
		if (why)
			*why = "CUDA device memory (rebuilt by the cuda plugin)";
		return 1;
	}
	return 0;
}

static const struct ck_plugin plugin = {
	.abi = CK_PLUGIN_ABI,
	.name = "cuda",
	.event = event,
	.skip_region = skip_region,
};

__attribute__((constructor)) static void ck_cu_register(void)
{
	ck_plugin_register(&plugin);
}
