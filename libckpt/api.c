/* The optional job API of include/ckpt.h. */
#include <errno.h>
#include <linux/futex.h>
#include <string.h>

#include "include/ckpt.h"
#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK_MAX_RESTART_CBS 16

static struct {
	void (*fn)(void *);
	void *arg;
} ck__cbs[CK_MAX_RESTART_CBS];
static int ck__ncbs;

volatile int ck__rounds_done;
int ck__last_result;

/* Called by the manager when a round ends (in this process or, for the
 * round that was saved, in a restored one). */
void ck__round_finished(int result)
{
	ck__last_result = result;
	__atomic_add_fetch(&ck__rounds_done, 1, __ATOMIC_SEQ_CST);
	ck_futex(&ck__rounds_done, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
}

void ck__run_restart_callbacks(void)
{
	for (int i = 0; i < ck__ncbs; i++)
		ck__cbs[i].fn(ck__cbs[i].arg);
}

int ck_api_request(void)
{
	struct ck_msg m;
	int seen;

	if (ck__core.ctl_fd < 0)
		return CKPT_NOT_PRESENT;
	seen = __atomic_load_n(&ck__rounds_done, __ATOMIC_SEQ_CST);
	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = CK_MSG_REQUEST;
	if (ck__send(&m) < 0)
		return -EPIPE;
	/* A round that was already running may end first; ckrun starts ours
	 * right after it, so wait for the next one too if needed. */
	while (__atomic_load_n(&ck__rounds_done, __ATOMIC_SEQ_CST) == seen)
		ck_futex(&ck__rounds_done, FUTEX_WAIT_PRIVATE, seen, NULL);
	return ck__last_result;
}

int ck_api_version(void)
{
	return CKPT_API_VERSION;
}

int ck_api_is_restarted(void)
{
	if (ck__core.ctl_fd < 0)
		return CKPT_NOT_PRESENT;
	return ck__core.restarted;
}

int ck_api_on_restart(void (*fn)(void *arg), void *arg)
{
	if (ck__core.ctl_fd < 0)
		return CKPT_NOT_PRESENT;
	if (!fn)
		return -EINVAL;
	if (ck__ncbs >= CK_MAX_RESTART_CBS)
		return -ENOSPC;
	ck__cbs[ck__ncbs].fn = fn;
	ck__cbs[ck__ncbs].arg = arg;
	ck__ncbs++;
	return 0;
}
