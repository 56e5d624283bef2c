/* A CUDA test workload run bare: init, all steps, report. Built once per
 * workload with -DCUTEST_WL=wl_NAME. */
#include "cutest.h"

#include <stdio.h>

int main(void)
{
	const struct workload *w = &CUTEST_WL;
	CUcontext ctx;
	int r;

	if (cutest_init(&ctx) < 0)
		return 1;
	/* -2: the workload cannot run on this device (reported already). */
	if ((r = w->setup()) < 0)
		return r == -2 ? 2 : 1;
	if (cutest_steps_run(w, 0, cutest_steps(w)) < 0 || w->report() < 0)
		return 1;
	if (w->teardown && w->teardown() < 0)
		return 1;
	if (cuCtxDestroy(ctx) != CUDA_SUCCESS)
		return 1;
	printf("%s: done\n", w->name);
	return 0;
}
