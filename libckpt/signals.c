/* Keeps the suspend signal usable whatever the job does with signals: a
 * job that blocks "all" signals, or installs handlers for all of them,
 * would otherwise make its threads impossible to park. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "libckpt/core.h"

typedef int (*ck__sigprocmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*ck__sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static int ck__active(void)
{
	return ck__core.ctl_fd >= 0;
}

static const sigset_t *ck__filter(int how, const sigset_t *set, sigset_t *tmp)
{
	if (!set || !ck__active() || how == SIG_UNBLOCK || !sigismember(set, ck__core.sig))
		return set;
	*tmp = *set;
	sigdelset(tmp, ck__core.sig);
	return tmp;
}

int ck__real_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static ck__sigprocmask_fn real;

	if (!real)
		real = (ck__sigprocmask_fn)dlsym(RTLD_NEXT, "sigprocmask");
	return real(how, set, old);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	sigset_t tmp;

	return ck__real_sigprocmask(how, ck__filter(how, set, &tmp), old);
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	static ck__sigprocmask_fn real;
	sigset_t tmp;

	if (!real)
		real = (ck__sigprocmask_fn)dlsym(RTLD_NEXT, "pthread_sigmask");
	return real(how, ck__filter(how, set, &tmp), old);
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	static ck__sigaction_fn real;

	if (!real)
		real = (ck__sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
	/* The first call is libckpt's own installation. */
	if (act && ck__active() && sig == ck__core.sig && ck__core.manager_tid) {
		errno = EINVAL;
		return -1;
	}
	/* A handler of the job's that blocks the parking signal: it still
	 * parks inside it (as a thread's mask never blocks it, ck__filter);
	 * else the signal came as the handler returned, right after a call
	 * the handler had interrupted, which then looked interrupted by us
	 * (suspend.c issues it again) */
	if (act && ck__active() && sigismember(&act->sa_mask, ck__core.sig) == 1) {
		struct sigaction mine = *act;
		sigdelset(&mine.sa_mask, ck__core.sig);
		return real(sig, &mine, old);
	}
	return real(sig, act, old);
}
