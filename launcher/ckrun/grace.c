/* The grace of a stop (--grace D): the time a scheduler leaves between
 * its SIGTERM and its SIGKILL. The stop's round must commit within it or
 * give up before it runs out: a round still being written then is
 * abandoned (nothing of it is committed, the previous checkpoint stays
 * the newest), so that ckrun says which and stops the job itself rather
 * than being killed in the middle of a write. */
#include <errno.h>
#include <time.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"

volatile uint64_t ck_sig_term_ns;
static uint64_t ck__grace_ms;

void ck_grace_set(uint64_t ms)
{
	ck__grace_ms = ms;
}

uint64_t ck_grace_ms(void)
{
	return ck__grace_ms;
}

/* The round's own deadline keeps a tenth of the grace (at most a second)
 * for what follows the commit: retention, stopping the job, exiting. */
static uint64_t ck__round_ms(void)
{
	uint64_t keep = ck__grace_ms / 10 < 1000 ? ck__grace_ms / 10 : 1000;

	return ck__grace_ms - keep;
}

uint64_t ck_grace_used_ms(void)
{
	return ck_sig_term_ns ? (ck_now_ns() - ck_sig_term_ns) / 1000000 : 0;
}

int ck_grace_check(void)
{
	uint64_t used;

	if (!ck__grace_ms || !ck_sig_term_ns)
		return 0;
	used = ck_grace_used_ms();
	if (used < ck__round_ms())
		return 0;
	ck_err_set("its grace of %.3f s ran out (%.3f s after the stop; the last %.3f s are kept to stop the job): "
		   "abandoned, nothing of it committed",
		   (double)ck__grace_ms / 1e3, (double)used / 1e3, (double)(ck__grace_ms - ck__round_ms()) / 1e3);
	return -ETIME;
}
