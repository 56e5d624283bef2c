/* Relative waits keep their deadline across a park.
 *
 * Parking a thread blocked in nanosleep, poll or epoll_wait makes the
 * kernel return EINTR; the handler issues the call again (suspend.c,
 * ck__fix_eintr). With only the call's arguments that means the full
 * timeout once more: a 300 ms nanosleep without a remaining-time pointer
 * under rounds every 200 ms never ended. So the C library's entry points
 * for these waits note, per thread, which call it is and when it is due,
 * and as the parking handler returns it gives the call what is left
 * (rounded up to the millisecond for poll and epoll). A restored thread
 * counts what was left at the park from its restore (the image's clock is
 * another machine's).
 *
 * Not seen: raw system calls and the C library's own internal waits
 * (sleep(3) passes a remaining-time pointer, which the kernel fills:
 * ck__fix_eintr uses that); CPU-time clocks; sleeps of more than 30 years
 * (`sleep infinity`). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

struct ck__wait {
	int active;
	int kind;		/* CK__W_* */
	long nr;		/* the system call the C library issues for it (glibc, x86-64) */
	uint64_t what;		/* the call's request (sleeps) or its event array: which call it is */
	uint64_t tsp;		/* epoll_pwait2's timeout argument */
	uint64_t due_ns;	/* CLOCK_MONOTONIC */
	uint64_t left_ns;	/* what was left at the last park */
	struct timespec left;	/* a sleep (or epoll_pwait2) issued again reads its time here */
};

enum { CK__W_SLEEP = 1, CK__W_POLL };

static __thread struct ck__wait ck__w __attribute__((tls_model("initial-exec")));

/* libc's own, looked up at load (not in a signal handler) */
static int (*ck__real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
static int (*ck__real_poll)(struct pollfd *, nfds_t, int);
static int (*ck__real_poll_chk)(struct pollfd *, nfds_t, int, size_t);
static int (*ck__real_epoll_wait)(int, struct epoll_event *, int, int);
static int (*ck__real_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
static int (*ck__real_epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);

void ck__waits_init(void)
{
	ck__real_clock_nanosleep = dlsym(RTLD_NEXT, "clock_nanosleep");
	ck__real_poll = dlsym(RTLD_NEXT, "poll");
	ck__real_poll_chk = dlsym(RTLD_NEXT, "__poll_chk");
	ck__real_epoll_wait = dlsym(RTLD_NEXT, "epoll_wait");
	ck__real_epoll_pwait = dlsym(RTLD_NEXT, "epoll_pwait");
	ck__real_epoll_pwait2 = dlsym(RTLD_NEXT, "epoll_pwait2");
}

/* the C library's clock (the vDSO: no system call a filter could forbid) */
static uint64_t ck__mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* a wait without a timeout: noted only to be issued again (ck__wait_unseen) */
#define CK__FOREVER UINT64_MAX

static struct ck__wait ck__wait_begin(int kind, long nr, const void *what, uint64_t ns)
{
	struct ck__wait saved = ck__w; /* a wait in a handler, inside another */

	ck__w.kind = kind;
	ck__w.nr = nr;
	ck__w.what = (uint64_t)(uintptr_t)what;
	ck__w.tsp = 0;
	ck__w.due_ns = ns == CK__FOREVER ? CK__FOREVER : ck__mono_ns() + ns;
	ck__w.left_ns = ns;
	__atomic_store_n(&ck__w.active, 1, __ATOMIC_SEQ_CST);
	return saved;
}

static void ck__wait_end(const struct ck__wait *saved)
{
	__atomic_store_n(&ck__w.active, 0, __ATOMIC_SEQ_CST);
	ck__w = *saved;
}

/* A relative time to note: readable (the kernel says so: a futex wait
 * whose word differs copies the timeout in, then returns EAGAIN without
 * waiting; a bad pointer is EFAULT, a bad value EINVAL, which the C
 * library's call then returns as bare) and under 30 years. Its length. */
static int ck__relative_ns(const struct timespec *t, uint64_t *ns)
{
	int word = 1;

	if (!t || ck_sys4(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, t) != -EAGAIN)
		return 0;
	if (t->tv_sec >= 946080000L) /* 30 years */
		return 0;
	*ns = (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec;
	return 1;
}

static int ck__wall_clock(clockid_t clk)
{
	return clk == CLOCK_REALTIME || clk == CLOCK_MONOTONIC || clk == CLOCK_BOOTTIME || clk == CLOCK_TAI ||
	       clk == CLOCK_REALTIME_ALARM || clk == CLOCK_BOOTTIME_ALARM;
}

static int ck__sleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	struct ck__wait saved;
	uint64_t ns;
	int r;

	if (!ck__real_clock_nanosleep)
		ck__waits_init();
	if (rem || (flags & TIMER_ABSTIME) || !ck__wall_clock(clk) || !ck__relative_ns(req, &ns))
		return ck__real_clock_nanosleep(clk, flags, req, rem); /* the kernel writes what is left */
	saved = ck__wait_begin(CK__W_SLEEP, SYS_clock_nanosleep, req, ns);
	r = ck__real_clock_nanosleep(clk, flags, req, rem);
	ck__wait_end(&saved);
	return r;
}

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	return ck__sleep(clk, flags, req, rem);
}

/* as glibc's: CLOCK_REALTIME, its error in errno */
int nanosleep(const struct timespec *req, struct timespec *rem)
{
	int r = ck__sleep(CLOCK_REALTIME, 0, req, rem);

	if (r == 0)
		return 0;
	errno = r;
	return -1;
}

/* glibc's usleep calls its own nanosleep, which is not interposed. */
int usleep(useconds_t us)
{
	struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

	return nanosleep(&t, NULL);
}

#define CK__WAIT_MS(call, nr, what)                                                                            \
	do {                                                                                                   \
		struct ck__wait saved;                                                                         \
		int r;                                                                                         \
		if (timeout == 0)                                                                              \
			return call;                                                                           \
		saved = ck__wait_begin(CK__W_POLL, nr, what,                                                  \
				       timeout < 0 ? CK__FOREVER : (uint64_t)timeout * 1000000ull);             \
		r = call;                                                                                      \
		ck__wait_end(&saved);                                                                          \
		return r;                                                                                      \
	} while (0)

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (!ck__real_poll)
		ck__waits_init();
	CK__WAIT_MS(ck__real_poll(fds, n, timeout), SYS_poll, fds);
}

/* _FORTIFY_SOURCE's poll: glibc's check, then ours */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
	if (!ck__real_poll_chk)
		ck__waits_init();
	if (fdslen / sizeof(*fds) < n)
		return ck__real_poll_chk(fds, n, timeout, fdslen); /* it fails as bare */
	return poll(fds, n, timeout);
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
	if (!ck__real_epoll_wait)
		ck__waits_init();
	CK__WAIT_MS(ck__real_epoll_wait(ep, ev, max, timeout), SYS_epoll_wait, ev);
}

int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	if (!ck__real_epoll_pwait)
		ck__waits_init();
	CK__WAIT_MS(ck__real_epoll_pwait(ep, ev, max, timeout, mask), SYS_epoll_pwait, ev);
}

int epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *t, const sigset_t *mask)
{
	struct ck__wait saved;
	uint64_t ns;
	int r;

	if (!ck__real_epoll_pwait2)
		ck__waits_init();
	if (!ck__real_epoll_pwait2) {
		errno = ENOSYS;
		return -1;
	}
	if (t && (!ck__relative_ns(t, &ns) || !ns))
		return ck__real_epoll_pwait2(ep, ev, max, t, mask);
	saved = ck__wait_begin(CK__W_POLL, SYS_epoll_pwait2, ev, t ? ns : CK__FOREVER);
	ck__w.tsp = (uint64_t)(uintptr_t)t;
	r = ck__real_epoll_pwait2(ep, ev, max, t, mask);
	ck__wait_end(&saved);
	return r;
}

/* In the parking handler, at the park: what is left of this thread's
 * wait (a restored thread is due that much after its restore). */
void ck__wait_parked(void)
{
	uint64_t now;

	if (!__atomic_load_n(&ck__w.active, __ATOMIC_SEQ_CST))
		return;
	now = ck__mono_ns();
	ck__w.left_ns = ck__w.due_ns == CK__FOREVER ? CK__FOREVER : ck__w.due_ns > now ? ck__w.due_ns - now : 0;
}

static void ck__left_ts(uint64_t left)
{
	ck__w.left = (struct timespec){(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
}

/* In the parking handler, as it returns to the call nr it issues again:
 * gives it what is left of this thread's wait, if nr is the wait noted
 * (its own request or event array: not a raw call made meanwhile). */
void ck__wait_left(void *ucv, long nr)
{
	greg_t *g = ((ucontext_t *)ucv)->uc_mcontext.gregs;
	uint64_t left, now, mine = (uint64_t)(uintptr_t)&ck__w.left;

	if (!__atomic_load_n(&ck__w.active, __ATOMIC_SEQ_CST))
		return;
	now = ck__mono_ns();
	left = ck__w.due_ns > now ? ck__w.due_ns - now : 0;
	if (ck__w.kind == CK__W_SLEEP && nr == SYS_clock_nanosleep && !(g[REG_RSI] & TIMER_ABSTIME) && !g[REG_R10] &&
	    ((uint64_t)g[REG_RDX] == ck__w.what || (uint64_t)g[REG_RDX] == mine)) {
		ck__left_ts(left);
		g[REG_RDX] = (greg_t)mine;
	} else if (ck__w.kind == CK__W_SLEEP && nr == SYS_nanosleep && !g[REG_RSI] &&
		   ((uint64_t)g[REG_RDI] == ck__w.what || (uint64_t)g[REG_RDI] == mine)) {
		ck__left_ts(left);
		g[REG_RDI] = (greg_t)mine;
	} else if (ck__w.kind == CK__W_POLL && nr == SYS_poll && (uint64_t)g[REG_RDI] == ck__w.what &&
		   (int)g[REG_RDX] > 0) {
		g[REG_RDX] = (greg_t)((left + 999999) / 1000000);
	} else if (ck__w.kind == CK__W_POLL && (nr == SYS_epoll_wait || nr == SYS_epoll_pwait) &&
		   (uint64_t)g[REG_RSI] == ck__w.what && (int)g[REG_R10] > 0) {
		g[REG_R10] = (greg_t)((left + 999999) / 1000000);
	} else if (ck__w.kind == CK__W_POLL && nr == SYS_epoll_pwait2 && (uint64_t)g[REG_RSI] == ck__w.what &&
		   g[REG_R10]) {
		ck__left_ts(left);
		g[REG_R10] = (greg_t)mine;
	}
}

/* In the parking handler, for a call that returned EINTR right after its
 * system call instruction though /proc did not see the thread in it when
 * it was signalled (it entered the call between that read and the signal):
 * the call this thread's noted wait issues, if the registers still hold
 * its arguments; 0 if not. A job's own handler that interrupted the wait
 * just before (our signal blocked in it, delivered at its return) looks
 * the same: that wait then goes on to its deadline instead of returning
 * EINTR, the rarer and milder error. */
long ck__wait_unseen(const void *ucv)
{
	const greg_t *g = ((const ucontext_t *)ucv)->uc_mcontext.gregs;
	uint64_t mine = (uint64_t)(uintptr_t)&ck__w.left, rdx = (uint64_t)g[REG_RDX], r10 = (uint64_t)g[REG_R10];

	if (!__atomic_load_n(&ck__w.active, __ATOMIC_SEQ_CST))
		return 0;
	switch (ck__w.nr) {
	case SYS_clock_nanosleep: /* (clock, flags, req, NULL) */
		return (rdx == ck__w.what || rdx == mine) && !r10 && !(g[REG_RSI] & TIMER_ABSTIME) ? ck__w.nr : 0;
	/* a timeout in milliseconds: an int, sign-extended by the C library */
	case SYS_poll: /* (fds, n, milliseconds) */
		return (uint64_t)g[REG_RDI] == ck__w.what && (int64_t)rdx == (int)rdx ? ck__w.nr : 0;
	case SYS_epoll_wait: case SYS_epoll_pwait: /* (ep, events, max, milliseconds[, mask]) */
		return (uint64_t)g[REG_RSI] == ck__w.what && (int64_t)r10 == (int)r10 ? ck__w.nr : 0;
	case SYS_epoll_pwait2: /* (ep, events, max, timespec or NULL, mask) */
		return (uint64_t)g[REG_RSI] == ck__w.what && (r10 == ck__w.tsp || r10 == mine) ? ck__w.nr : 0;
	}
	return 0;
}

/* A restored thread: its wait is due what was left at the park from now. */
void ck__wait_restored(void)
{
	if (__atomic_load_n(&ck__w.active, __ATOMIC_SEQ_CST))
		ck__w.due_ns = ck__w.left_ns == CK__FOREVER ? CK__FOREVER : ck__mono_ns() + ck__w.left_ns;
}
