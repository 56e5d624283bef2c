/* POSIX message queue notifications (mq_notify). The kernel holds one
 * registration per queue and shows who made it and how (the queue file's
 * "NOTIFY: SIGNO: NOTIFY_PID:"), but not the value the signal carries
 * (sigev_value), so libckpt notes each registration the job makes through
 * the C library (mq_notify is interposed), by queue, in its own memory,
 * which the image holds. At the round ckrun keeps the note that
 * matches the kernel's registration (launcher/ckrun/mq_posix.c; a queue
 * with one is saved only while empty: taking its messages would send the
 * notification), and the restored process registers again, with the same
 * event, before any of its threads runs. SIGEV_THREAD (the C library's
 * netlink socket and thread) is left to the C library: ckrun refuses it. */
#include <dlfcn.h>
#include <errno.h>
#include <mqueue.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__MAX_NOTES 64

/* A registration the job made, by queue (its file's device and inode: the
 * kernel holds one per queue, whichever descriptor made it); seq (written
 * last, 0: none) orders them. */
struct ck__mqnote {
	uint64_t dev, ino;
	int32_t notify, signo;
	uint64_t value;
	volatile uint64_t seq;
};

static struct ck__mqnote ck__mqnotes[CK__MAX_NOTES];
static uint64_t ck__mqseq;
static volatile int ck__mqlock;
/* the C library's notification thread may run (SIGEV_THREAD asked for):
 * it blocks every signal, for good, so no round can park it */
static volatile int ck__mqthread;

/* Every signal blocked for the whole call, the kernel's part included: a
 * round never finds a registration made and not noted. */
static void ck__block(uint64_t *old)
{
	uint64_t all = ~0ull;

	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, &all, old, 8);
	while (__atomic_exchange_n(&ck__mqlock, 1, __ATOMIC_ACQUIRE))
		ck_sys0(SYS_sched_yield);
}

static void ck__unblock(const uint64_t *old)
{
	__atomic_store_n(&ck__mqlock, 0, __ATOMIC_RELEASE);
	ck_sys4(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, 8);
}

/* The queue's note; else, with any_free, a free one, else the oldest: a
 * note outlives its registration (one sent, or dropped by a close, is not
 * seen), and ckrun uses one only where the kernel shows a registration
 * that matches it. */
static struct ck__mqnote *ck__note_of(uint64_t dev, uint64_t ino, int any_free)
{
	struct ck__mqnote *spare = NULL;

	for (int i = 0; i < CK__MAX_NOTES; i++) {
		struct ck__mqnote *n = &ck__mqnotes[i];
		if (n->seq && n->dev == dev && n->ino == ino)
			return n;
		if (!spare || (spare->seq && (!n->seq || n->seq < spare->seq)))
			spare = n;
	}
	return any_free ? spare : NULL;
}

int mq_notify(mqd_t q, const struct sigevent *sev)
{
	CK_REAL(mq_notify);
	struct ck__mqnote *n;
	struct stat st;
	uint64_t old;
	long r;

	if (sev && sev->sigev_notify == SIGEV_THREAD) {
		ck__mqthread = 1; /* (made before the system call, if at all) */
		return real(q, sev);
	}
	ck__block(&old);
	r = ck_sys2(SYS_mq_notify, q, sev);
	/* a vfork child's registration is its own, and gone with it */
	if (r == 0 && ck_sys0(SYS_getpid) == ck__core.pid && ck__seccomp_allows(SYS_fstat) &&
	    ck_sys2(SYS_fstat, q, &st) == 0 &&
	    (n = ck__note_of(st.st_dev, st.st_ino, sev != NULL))) {
		n->seq = 0;
		if (sev) {
			n->dev = st.st_dev;
			n->ino = st.st_ino;
			n->notify = sev->sigev_notify;
			n->signo = sev->sigev_signo;
			n->value = (uint64_t)(uintptr_t)sev->sigev_value.sival_ptr;
			__atomic_store_n(&n->seq, ++ck__mqseq, __ATOMIC_RELEASE);
		}
	}
	ck__unblock(&old);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

/* A fork's child: a registration is its maker's, never the child's, and
 * the C library's thread is not in it. */
void ck__mqnotify_atfork_child(void)
{
	memset(ck__mqnotes, 0, sizeof(ck__mqnotes));
	ck__mqlock = 0;
	ck__mqthread = 0;
}

/* Before a round parks anything: a thread it could never park refuses it
 * at once, rather than at the round's bound. */
int ck__mqnotify_parkable(void)
{
	if (!ck__mqthread)
		return 0;
	ck__failf("it asked for a POSIX message queue notification as a thread (mq_notify, SIGEV_THREAD): the C "
		  "library's thread for it blocks every signal and cannot be parked: not supported");
	return -ENOTSUP;
}

/* The round (threads parked): the note of a queue's descriptor's queue,
 * for ckrun to match with the kernel's registration. */
void ck__mqnotify_collect(struct ck_pd_fd *f)
{
	const struct ck__mqnote *n = ck__note_of(f->dev, f->ino, 0);

	if (!n)
		return;
	f->xflags |= CK_PD_FD_MQ_NOTE;
	f->u64[0] = n->value;
	f->u64[1] = (uint64_t)(uint32_t)n->notify | (uint64_t)(uint32_t)n->signo << 32;
	f->u64[2] = n->seq;
}

/* Restart (system calls only): the registration ckrun kept, made again
 * on the queue's descriptor. */
long ck__mqnotify_restore(const struct ck_procdesc *pd, const char **why, const char **path)
{
	for (uint32_t i = 0; i < pd->nfds && i < CK_PD_MAX_FDS; i++) {
		const struct ck_pd_fd *f = &pd->fds[i];
		struct sigevent sev;
		long r;

		if (f->kind != CK_FD_MQUEUE || !(f->xflags & CK_PD_FD_MQ_NOTIFY))
			continue;
		memset(&sev, 0, sizeof(sev));
		sev.sigev_notify = (int)(uint32_t)f->u64[1];
		sev.sigev_signo = (int)(uint32_t)(f->u64[1] >> 32);
		sev.sigev_value.sival_ptr = (void *)(uintptr_t)f->u64[0];
		if ((r = ck_sys2(SYS_mq_notify, f->fd, &sev)) < 0) {
			*why = "cannot register the notification (mq_notify) of POSIX message queue";
			*path = f->path;
			return r;
		}
	}
	return 0;
}
