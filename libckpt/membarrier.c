/* The job's membarrier(2) registrations: per process (its memory), lost
 * by a restored process, where MEMBARRIER_CMD_PRIVATE_EXPEDITED and the
 * like then fail with EPERM. Read at the round (GET_REGISTRATIONS, Linux
 * 6.3; before it, what the job registered through syscall(3), which
 * syscall.S hands to ck__syscall_record) into this file's own memory,
 * saved with the process, and registered again by the manager at restart
 * before any thread runs job code. Only system calls. */
#include <errno.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__MB_GET_REGISTRATIONS (1 << 9)
#define CK__MB_REGISTER                                                                                  \
	(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED |          \
	 MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ)

static volatile unsigned ck__mb_seen; /* registrations made through syscall(3) */
static unsigned ck__mb_saved;         /* the round's: what a restart registers again */

void ck__membarrier_note(long cmd, long r)
{
	if (r == 0 && (cmd & CK__MB_REGISTER) && !(cmd & (cmd - 1)))
		__atomic_or_fetch(&ck__mb_seen, (unsigned)cmd, __ATOMIC_SEQ_CST);
}

void ck__membarrier_collect(void)
{
	/* not through a seccomp filter of the job's that forbids it: then
	 * what syscall(3) registered */
	long r = ck__seccomp_allows(SYS_membarrier) ? ck_sys3(SYS_membarrier, CK__MB_GET_REGISTRATIONS, 0, 0) : -EPERM;
	/* each kind the kernel reports is one the job registered itself (a
	 * SYNC_CORE or RSEQ registration does not make the plain kind ready:
	 * conformance membarrier failed with EPERM when it was left out) */
	ck__mb_saved = (r >= 0 ? (unsigned)r : __atomic_load_n(&ck__mb_seen, __ATOMIC_SEQ_CST)) & CK__MB_REGISTER;
}

int ck__membarrier_restore(unsigned *failed)
{
	for (unsigned bit = 1; bit && bit <= ck__mb_saved; bit <<= 1) {
		long r;
		if (!(ck__mb_saved & bit))
			continue;
		if ((r = ck_sys3(SYS_membarrier, bit, 0, 0)) < 0) {
			*failed = bit;
			return (int)r;
		}
	}
	return 0;
}
