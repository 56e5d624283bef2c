/* Relative waits keep their deadline across a park.
 *
 * Parking a thread blocked in nanosleep, poll or epoll_wait makes the
 * kernel return EINTR; the handler issues the call again (suspend.c,
 * ck__fix_eintr). With only the call's arguments that means the full
 * timeout once more: a 300 ms nanosleep without a remaining-time pointer
 * under rounds every 200 ms never ended. So the C library's entry points
 * for these waits note, per thread, when the wait is due, and the handler
 * issues it again with what is left (rounded up to the millisecond for
 * poll and epoll). A restored thread counts what was left at the park
 * from its restore (the image's clock is another machine's).
 *
 * Not seen: raw system calls and the C library's own internal waits
 * (sleep(3) passes a remaining-time pointer, which the kernel fills:
 * ck__fix_eintr uses that). */
#include <dlfcn.h>
#include <errno.h>
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
	uint64_t due_ns;	/* CLOCK_MONOTONIC */
	uint64_t left_ns;	/* what was left at the last park */
	struct timespec left;	/* a sleep issued again reads its time here */
};

enum { CK__W_SLEEP = 1, CK__W_POLL };

static __thread struct ck__wait ck__w __attribute__((tls_model("initial-exec")));

static uint64_t ck__mono_ns(void)
{
	struct timespec ts;

	ck_sys2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct ck__wait ck__wait_begin(int kind, uint64_t ns)
{
	struct ck__wait saved = ck__w; /* a wait in a handler, inside another */

	ck__w.kind = kind;
	ck__w.due_ns = ck__mono_ns() + ns;
	__atomic_store_n(&ck__w.active, 1, __ATOMIC_SEQ_CST);
	return saved;
}

static void ck__wait_end(const struct ck__wait *saved)
{
	__atomic_store_n(&ck__w.active, 0, __ATOMIC_SEQ_CST);
	ck__w = *saved;
}

static uint64_t ck__left_ns(void)
{
	uint64_t now = ck__mono_ns();

	return ck__w.due_ns > now ? ck__w.due_ns - now : 0;
}

static int ck__relative(const struct timespec *t)
{
	return t && t->tv_sec >= 0 && t->tv_nsec >= 0 && t->tv_nsec < 1000000000L;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
	CK_REAL(nanosleep);
	struct ck__wait saved;
	int r;

	if (rem || !ck__relative(req)) /* the kernel writes what is left */
		return real(req, rem);
	saved = ck__wait_begin(CK__W_SLEEP, (uint64_t)req->tv_sec * 1000000000ull + (uint64_t)req->tv_nsec);
	r = real(req, rem);
	ck__wait_end(&saved);
	return r;
}

int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	CK_REAL(clock_nanosleep);
	struct ck__wait saved;
	int r;

	if (rem || (flags & TIMER_ABSTIME) || !ck__relative(req))
		return real(clk, flags, req, rem);
	saved = ck__wait_begin(CK__W_SLEEP, (uint64_t)req->tv_sec * 1000000000ull + (uint64_t)req->tv_nsec);
	r = real(clk, flags, req, rem);
	ck__wait_end(&saved);
	return r;
}

/* glibc's usleep calls its own nanosleep, which is not interposed. */
int usleep(useconds_t us)
{
	struct timespec t = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};

	return nanosleep(&t, NULL);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	CK_REAL(poll);
	struct ck__wait saved;
	int r;

	if (timeout <= 0)
		return real(fds, n, timeout);
	saved = ck__wait_begin(CK__W_POLL, (uint64_t)timeout * 1000000ull);
	r = real(fds, n, timeout);
	ck__wait_end(&saved);
	return r;
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
	CK_REAL(epoll_wait);
	struct ck__wait saved;
	int r;

	if (timeout <= 0)
		return real(ep, ev, max, timeout);
	saved = ck__wait_begin(CK__W_POLL, (uint64_t)timeout * 1000000ull);
	r = real(ep, ev, max, timeout);
	ck__wait_end(&saved);
	return r;
}

int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *mask)
{
	CK_REAL(epoll_pwait);
	struct ck__wait saved;
	int r;

	if (timeout <= 0)
		return real(ep, ev, max, timeout, mask);
	saved = ck__wait_begin(CK__W_POLL, (uint64_t)timeout * 1000000ull);
	r = real(ep, ev, max, timeout, mask);
	ck__wait_end(&saved);
	return r;
}

/* In the parking handler, before the call nr is issued again: gives it
 * what is left of this thread's wait, if nr is the wait noted. */
void ck__wait_left(void *ucv, long nr)
{
	greg_t *g = ((ucontext_t *)ucv)->uc_mcontext.gregs;
	uint64_t left;

	if (!__atomic_load_n(&ck__w.active, __ATOMIC_SEQ_CST))
		return;
	left = ck__left_ns();
	ck__w.left_ns = left;
	if (ck__w.kind == CK__W_SLEEP && nr == SYS_nanosleep && !g[REG_RSI]) {
		ck__w.left = (struct timespec){(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
		g[REG_RDI] = (greg_t)(uintptr_t)&ck__w.left;
	} else if (ck__w.kind == CK__W_SLEEP && nr == SYS_clock_nanosleep && !(g[REG_RSI] & TIMER_ABSTIME) &&
		   !g[REG_R10]) {
		ck__w.left = (struct timespec){(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
		g[REG_RDX] = (greg_t)(uintptr_t)&ck__w.left;
	} else if (ck__w.kind == CK__W_POLL && nr == SYS_poll && (int)g[REG_RDX] > 0) {
		g[REG_RDX] = (greg_t)((left + 999999) / 1000000);
	} else if (ck__w.kind == CK__W_POLL && (nr == SYS_epoll_wait || nr == SYS_epoll_pwait) && (int)g[REG_R10] > 0) {
		g[REG_R10] = (greg_t)((left + 999999) / 1000000);
	}
}

/* A restored thread: its wait is due what was left at the park from now. */
void ck__wait_restored(void)
{
	if (!__atomic_load_n(&ck__w.active, __ATOMIC_SEQ_CST))
		return;
	ck__w.due_ns = ck__mono_ns() + ck__w.left_ns;
}
