/* Processes the job stopped (SIGSTOP, or SIGTSTP & co. once reported)
 * through a round, and again after a restore.
 *
 * A stopped process runs nothing, libckpt's manager included: it can
 * neither hear the round's request nor park. ckrun holds it instead, as
 * its tracer, once every other process of the job has parked (so that no
 * process of the job sees it out of its stop):
 *   hold: every thread is seized (PTRACE_SEIZE turns its group stop into
 *     a ptrace stop, without a word to its parent); libckpt's threads
 *     (they block every signal and sit in libckpt's code) run on, and
 *     libckpt's manager first takes what ckrun sent while it was stopped
 *     (PING, PONG); a job thread gets a mask blocking everything but the
 *     parking signal and stays stopped until the manager has sent it that
 *     signal;
 *   pump (while the round asks): a job thread with the parking signal
 *     pending is let go; at its signal-delivery stop its own mask is put
 *     back and the signal delivered, so the handler saves the true mask
 *     and parks it: no job code runs, no signal of the job is delivered;
 *   end (before any other process is let go): the job threads are
 *     interrupted where they park, DONE goes to the manager, and each job
 *     thread leaves the handler under PTRACE_SYSCALL until its
 *     rt_sigreturn has returned: it is where its stop found it, its mask
 *     its own (a next round finds it so, not inside the handler); PONG
 *     says the manager has ended its round. Every thread is then let go
 *     (PTRACE_DETACH): the kernel puts it back into the group stop, again
 *     without a report to the parent.
 * The round records the process as stopped (CK_PD_P_STOPPED). A restore
 * lets it go first (children before parents): the same end, then
 * SIGSTOP, so that its threads stop where they were; its parent is told
 * as the job's stop told it, and the parent's libckpt puts back what the
 * parent had seen of that stop (libckpt/stopkids.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckrun/proto.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/common/ck_err.h"

/* CK__T_FORKED: a process the manager made (its forked snapshot), traced
 * by PTRACE_O_TRACECLONE too: let go at its first stop */
/* CK__T_UNWINDING: a job thread leaving the parking handler, stopped at
 * each system call until the handler's rt_sigreturn has returned
 * (CK__T_UNWOUND): back where its stop had found it. */
/* CK__T_PARKED: a job thread in the parking handler, run under
 * PTRACE_SYSCALL: stopped at the entry of its rt_sigreturn
 * (CK__T_AT_SIGRETURN) whenever it would leave the handler before the
 * round's end (a round its own libckpt gave up: no job code runs). */
enum {
	CK__T_TRAPPED,
	CK__T_RUNNING,
	CK__T_PARKING,
	CK__T_PARKED,
	CK__T_AT_SIGRETURN,
	CK__T_NEW,
	CK__T_FORKED,
	CK__T_UNWINDING,
	CK__T_UNWOUND,
	CK__T_GONE
};

struct ck__thr {
	pid_t tid;
	int ours;     /* libckpt's (manager, reader): runs through the round */
	int state;    /* CK__T_* */
	int mask_set; /* its mask is ours: put back before it goes */
	int in_handler; /* in the parking handler: unwound before it goes */
	long nr;        /* CK__T_UNWINDING: the system call it entered */
	uint64_t mask;
};

struct ck_hold {
	int sig;     /* libckpt's parking signal in this process */
	int stopsig; /* the signal of the job's stop (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU) */
	size_t n;
	struct ck__thr *t;
};

/* libckpt's parking signal: CKPT_SIGNAL of the process's environment
 * (libckpt/init.c reads it at its start), else 63. */
static int ck__park_sig(pid_t pid)
{
	char path[64], *buf = NULL;
	size_t len = 0;
	int sig = 63;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	if (!(f = fopen(path, "re")))
		return sig;
	while (getdelim(&buf, &len, 0, f) > 0)
		if (!strncmp(buf, "CKPT_SIGNAL=", 12) && atoi(buf + 12) >= SIGRTMIN && atoi(buf + 12) <= SIGRTMAX)
			sig = atoi(buf + 12);
	free(buf);
	fclose(f);
	return sig;
}

/* A task's field from /proc/PID/task/TID/status (hex masks), or 0. */
static uint64_t ck__task_hex(pid_t pid, pid_t tid, const char *key)
{
	char path[80], line[256];
	size_t kl = strlen(key);
	uint64_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl)) {
			v = strtoull(line + kl, NULL, 16);
			break;
		}
	fclose(f);
	return v;
}

static int ck__task_state(pid_t pid, pid_t tid)
{
	char path[80], line[256];
	int st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "State:", 6)) {
			const char *p = line + 6;
			while (*p == ' ' || *p == '\t')
				p++;
			st = *p;
			break;
		}
	fclose(f);
	return st;
}

struct ck__scan {
	pid_t pid;
	int all_T, any;
	pid_t *tids;
	size_t n, cap;
};

static int ck__scan_one(pid_t pid, pid_t tid, void *arg)
{
	struct ck__scan *s = arg;
	int st = ck__task_state(pid, tid);

	s->any = 1;
	if (st != 'T')
		s->all_T = 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		pid_t *t = realloc(s->tids, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		s->tids = t;
		s->cap = cap;
	}
	s->tids[s->n++] = tid;
	return 0;
}

/* Whether tid is one of libckpt's threads: named so (libckpt names its
 * manager and reader); with a mask blocking every signal. */
static int ck__libckpt_thread(pid_t pid, pid_t tid)
{
	char path[80], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	if (!(f = fopen(path, "re")))
		return 0;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = 0;
	fclose(f);
	comm[strcspn(comm, "\n")] = 0;
	return !strcmp(comm, CK_MANAGER_COMM) || !strcmp(comm, CK_READER_COMM);
}

/* Waits (up to ms) for a ptrace stop of tid; its status, or -errno. */
static int ck__wait_stop(pid_t tid, int ms, int *status)
{
	for (int i = 0; i <= ms; i++) {
		pid_t w = waitpid(tid, status, __WALL | WNOHANG);
		if (w == tid)
			return 0;
		if (w < 0 && errno != EINTR)
			return -errno;
		usleep(1000);
	}
	return -ETIMEDOUT;
}

static void ck__hold_free(struct ck_hold *h)
{
	if (h) {
		free(h->t);
		free(h);
	}
}

static int ck__add_thr(struct ck_hold *h, pid_t tid, int ours, int state)
{
	struct ck__thr *t = realloc(h->t, (h->n + 1) * sizeof(*t));

	if (!t)
		return -ENOMEM;
	h->t = t;
	h->t[h->n++] = (struct ck__thr){tid, ours, state, 0, 0, -1, 0};
	return 0;
}

/* Lets every thread of h go back to its stop (the group stop is in effect:
 * a detached thread rejoins it), its own mask given back. */
static void ck__detach_all(struct ck_hold *h)
{
	for (size_t i = 0; i < h->n; i++) {
		struct ck__thr *t = &h->t[i];
		int st;
		if (t->state == CK__T_GONE)
			continue;
		if (t->state != CK__T_TRAPPED && t->state != CK__T_UNWOUND && t->state != CK__T_AT_SIGRETURN) {
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
			(void)ck__wait_stop(t->tid, 2000, &st);
		}
		if (t->mask_set)
			ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(t->mask), &t->mask);
		if (ptrace(PTRACE_DETACH, t->tid, 0, 0) < 0) {
			/* it has exited (its zombie is ours to reap, as its tracer,
			 * before its parent can), or it was not stopped yet: once
			 * more after its stop */
			pid_t w = 0;
			for (int k = 0; k < 100 && (w = waitpid(t->tid, &st, __WALL | WNOHANG)) == 0; k++)
				usleep(1000);
			if (w == t->tid && WIFSTOPPED(st))
				ptrace(PTRACE_DETACH, t->tid, 0, 0);
		}
		t->state = CK__T_GONE;
	}
}

static int ck__pump_hold(struct ck_hold *h, pid_t pid, int let_park);
static int ck__pong(struct ck_jproc *p, int ms);

/* t (trapped, its mask letting only the parking signal through): each
 * pending parking signal is taken at its delivery stop and dropped, and
 * the thread trapped again before it can return to user space (an
 * interrupt asked for at the delivery stop traps it as it goes on). */
static int ck__drop_stale_park(struct ck_hold *h, pid_t pid, struct ck__thr *t)
{
	uint64_t mask = 0, only = ~(1ull << (h->sig - 1));
	int r = 0;

	if (!((ck__task_hex(pid, t->tid, "SigPnd:") >> (h->sig - 1)) & 1))
		return 0;
	/* only the parking signal may come out meanwhile: the job's stay */
	if (ptrace(PTRACE_GETSIGMASK, t->tid, sizeof(mask), &mask) < 0 ||
	    ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(only), &only) < 0)
		return -ESRCH;
	for (int k = 0; k < 8 && r == 0 && (ck__task_hex(pid, t->tid, "SigPnd:") >> (h->sig - 1)) & 1; k++) {
		int st;
		if (ptrace(PTRACE_CONT, t->tid, 0, 0) < 0 || ck__wait_stop(t->tid, 2000, &st) < 0 || !WIFSTOPPED(st)) {
			r = -ESRCH;
			break;
		}
		if ((st >> 16) == 0 && WSTOPSIG(st) == h->sig &&
		    (ptrace(PTRACE_INTERRUPT, t->tid, 0, 0) < 0 || ptrace(PTRACE_CONT, t->tid, 0, 0) < 0 ||
		     ck__wait_stop(t->tid, 2000, &st) < 0 || !WIFSTOPPED(st)))
			r = -ESRCH;
		/* any other stop: a trap, where it stays */
	}
	ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(mask), &mask);
	return r;
}

static int ck__stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

int ck_stopped_sig(const struct ck_jproc *p)
{
	return p->round.hold && p->round.hold->stopsig ? p->round.hold->stopsig : SIGSTOP;
}

/* Seizes one stopped process; the job's threads stay stopped. */
static int ck__hold_one(struct ck_jproc *p)
{
	struct ck__scan s = {p->pid, 1, 0, NULL, 0, 0};
	struct ck_hold *h = calloc(1, sizeof(*h));
	int r = 0;

	if (!h)
		return -ENOMEM;
	h->sig = ck__park_sig(p->pid);
	if ((r = ck_proc_each_tid(p->pid, ck__scan_one, &s)) < 0 || !s.any || !s.all_T) {
		free(s.tids);
		free(h);
		return r < 0 ? r : 0; /* not (all) stopped: the round asks it as any other */
	}
	for (size_t i = 0; i < s.n && r == 0; i++) {
		pid_t tid = s.tids[i];
		int st;
		if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACECLONE | PTRACE_O_TRACESYSGOOD) < 0) {
			r = -errno;
			ck_err_set("process %d of the job is stopped and ckrun cannot hold it for the round (ptrace of "
				   "thread %d: %s)",
				   p->jpid, tid, strerror(errno));
			break;
		}
		if ((r = ck__add_thr(h, tid, 0, CK__T_TRAPPED)) < 0)
			break;
		/* a seized stopped thread reports its stop again, as a ptrace
		 * one (PTRACE_EVENT_STOP) naming the signal of the group stop */
		if ((r = ck__wait_stop(tid, 2000, &st)) == 0 && WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP &&
		    !h->stopsig && ck__stop_signal(WSTOPSIG(st)))
			h->stopsig = WSTOPSIG(st);
		if (r < 0 || !WIFSTOPPED(st)) {
			/* still traced if it did not stop: let go with the rest */
			h->t[h->n - 1].state = r == -ETIMEDOUT ? CK__T_RUNNING : CK__T_GONE;
			if (r == -ETIMEDOUT) {
				ck_err_set("process %d of the job is stopped and its thread %d did not stop for ckrun",
					   p->jpid, tid);
				r = -ENOTSUP;
			} else {
				r = 0; /* it ended meanwhile */
			}
		}
	}
	free(s.tids);
	if (r == 0 && h->n) {
		/* what holds a thread at its rt_sigreturn (Linux 5.3) */
		struct __ptrace_syscall_info si;
		if (ptrace(PTRACE_GET_SYSCALL_INFO, h->t[0].tid, sizeof(si), &si) <= 0) {
			ck_err_set("process %d of the job is stopped, and this kernel cannot tell ckrun where its threads are "
				   "(PTRACE_GET_SYSCALL_INFO: %s): it cannot take part in a checkpoint",
				   p->jpid, strerror(errno));
			r = -ENOTSUP;
		}
	}
	for (size_t i = 0; i < h->n && r == 0; i++) {
		struct ck__thr *t = &h->t[i];
		uint64_t m = 0, park = 1ull << (h->sig - 1), only = ~park;
		if (t->state == CK__T_GONE)
			continue;
		if (ptrace(PTRACE_GETSIGMASK, t->tid, sizeof(m), &m) < 0) {
			r = -errno;
			ck_err_set("process %d: thread %d: PTRACE_GETSIGMASK: %s", p->jpid, t->tid, strerror(errno));
			break;
		}
		if (m & park) {
			/* blocks the parking signal: libckpt's own, or a thread
			 * that could not park in any round */
			if (!ck__libckpt_thread(p->pid, t->tid)) {
				ck_err_set("process %d of the job is stopped, and its thread %d blocks signal %d, which "
					   "parks threads: it cannot take part in a checkpoint",
					   p->jpid, t->tid, h->sig);
				r = -ENOTSUP;
				break;
			}
			t->ours = 1;
			continue;
		}
		t->mask = m;
		if (ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(only), &only) < 0) {
			r = -errno;
			ck_err_set("process %d: thread %d: PTRACE_SETSIGMASK: %s", p->jpid, t->tid, strerror(errno));
			break;
		}
		t->mask_set = 1;
	}
	for (size_t i = 0; i < h->n && r == 0; i++)
		if (h->t[i].ours && h->t[i].state == CK__T_TRAPPED) {
			ptrace(PTRACE_CONT, h->t[i].tid, 0, 0);
			h->t[i].state = CK__T_RUNNING;
		}
	if (r == 0) {
		/* What ckrun sent while it was stopped (a pre-armed cut's
		 * request, an earlier round's end) is still unread: its manager
		 * takes it first, answered by the PONG that follows. */
		int outq = 0;
		if (ioctl(p->fd, SIOCOUTQ, &outq) == 0 && outq > 0) {
			ck_procs_send(p, CK_MSG_PING, 0);
			for (uint64_t until = ck_now_ns() + 2000000000ull;; ) {
				int e;
				ck__pump_hold(h, p->pid, 0);
				if ((e = ck__pong(p, 20)) == 0)
					break;
				if (e == -EPIPE || ck_now_ns() > until) {
					ck_err_set("process %d of the job is stopped and its libckpt did not answer ckrun",
						   p->jpid);
					r = -ENOTSUP;
					break;
				}
			}
		}
	}
	/* A parking signal still pending from an earlier round (the process
	 * stopped before its thread took it) would run the handler before
	 * this round's manager knows the thread, and the handler would return
	 * to the job's code: taken away here, the thread kept stopped. */
	for (size_t i = 0; i < h->n && r == 0; i++)
		if (!h->t[i].ours && h->t[i].state == CK__T_TRAPPED && ck__drop_stale_park(h, p->pid, &h->t[i]) < 0) {
			ck_err_set("process %d of the job is stopped and its thread %d did not stay stopped for ckrun",
				   p->jpid, h->t[i].tid);
			r = -ENOTSUP;
		}
	if (r < 0) {
		ck__detach_all(h);
		ck__hold_free(h);
		return r;
	}
	p->round.hold = h;
	return 1;
}

int ck_stopped_hold(struct ck_jproc *p)
{
	return ck__hold_one(p);
}

int ck_stopped_all_T(pid_t pid)
{
	struct ck__scan s = {pid, 1, 0, NULL, 0, 0};
	int r;

	if (ck_proc_state(pid) != 'T') /* one read for a process that runs */
		return 0;
	r = ck_proc_each_tid(pid, ck__scan_one, &s);

	free(s.tids);
	return r == 0 && s.any && s.all_T;
}

/* A job thread run under PTRACE_SYSCALL, in the parking handler (PARKED)
 * or leaving it at the round's end (UNWINDING): its stop served. Leaving
 * the handler early, it is held at its rt_sigreturn's entry; at the end,
 * once that call has returned, it stays stopped there (UNWOUND). */
static void ck__syscall_stop(struct ck_hold *h, struct ck__thr *t, int sig, int ev)
{
	long data = 0;

	if (sig == (SIGTRAP | 0x80)) {
		struct __ptrace_syscall_info si;
		memset(&si, 0, sizeof(si));
		if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, sizeof(si), &si) > 0) {
			if (si.op == PTRACE_SYSCALL_INFO_ENTRY) {
				t->nr = (long)si.entry.nr;
				if (t->nr == SYS_rt_sigreturn && t->state == CK__T_PARKED) {
					t->state = CK__T_AT_SIGRETURN;
					return;
				}
			} else if (si.op == PTRACE_SYSCALL_INFO_EXIT && t->nr == SYS_rt_sigreturn &&
				   t->state == CK__T_UNWINDING) {
				t->state = CK__T_UNWOUND;
				t->in_handler = 0;
				return;
			}
		}
	} else if (ev == 0 && sig != h->sig) {
		data = sig; /* (nothing else gets through the handler's mask) */
	}
	ptrace(PTRACE_SYSCALL, t->tid, 0, data);
}

/* One ptrace event of thread k of h. */
static void ck__event(struct ck_hold *h, pid_t pid, size_t k, int st)
{
	struct ck__thr *t = &h->t[k];
	int sig, ev;


	if (WIFEXITED(st) || WIFSIGNALED(st)) {
		t->state = CK__T_GONE;
		return;
	}
	if (!WIFSTOPPED(st))
		return;
	sig = WSTOPSIG(st);
	ev = st >> 16;
	if (ev == PTRACE_EVENT_CLONE) {
		unsigned long kid = 0;
		/* libckpt's reader thread, made by its manager for the round,
		 * or its forked snapshot (another process: let go) */
		if (ptrace(PTRACE_GETEVENTMSG, t->tid, 0, &kid) == 0 && kid > 0) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/task/%lu", pid, kid);
			ck__add_thr(h, (pid_t)kid, t->ours, access(path, F_OK) == 0 ? CK__T_NEW : CK__T_FORKED);
		}
		t = &h->t[k];
		ptrace(PTRACE_CONT, t->tid, 0, 0);
		t->state = t->state == CK__T_PARKED ? CK__T_PARKED : CK__T_RUNNING;
		return;
	}
	if (t->state == CK__T_PARKED || t->state == CK__T_UNWINDING) {
		ck__syscall_stop(h, t, sig, ev);
		return;
	}
	if (t->state == CK__T_FORKED) {
		ptrace(PTRACE_DETACH, t->tid, 0, 0);
		t->state = CK__T_GONE;
		return;
	}
	if (ev == PTRACE_EVENT_STOP || ev != 0) {
		/* a group stop, an interrupt, or a new thread's first stop */
		if (t->ours) {
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			t->state = CK__T_RUNNING;
		} else {
			t->state = CK__T_TRAPPED;
		}
		return;
	}
	if (!t->ours && sig == h->sig) {
		/* (in any state: one that came another way is parked the same) */
		/* its own mask back, so that the handler saves it */
		if (t->mask_set && ptrace(PTRACE_SETSIGMASK, t->tid, sizeof(t->mask), &t->mask) == 0)
			t->mask_set = 0;
		t->nr = -1;
		ptrace(PTRACE_SYSCALL, t->tid, 0, sig);
		t->state = CK__T_PARKED;
		t->in_handler = 1;
		return;
	}
	/* any other signal goes its way (one that cannot be blocked) */
	ptrace(PTRACE_CONT, t->tid, 0, sig);
	t->state = CK__T_RUNNING;
}

/* Each thread's pending event; with let_park, a job thread the manager
 * has sent the parking signal goes to take it. Returns how many job
 * threads are not parked yet. */
static int ck__pump_hold(struct ck_hold *h, pid_t pid, int let_park)
{
	int waiting = 0;

	for (size_t k = 0; k < h->n; k++) {
		struct ck__thr *t = &h->t[k];
		int st;
		if (t->state == CK__T_GONE)
			continue;
		if (waitpid(t->tid, &st, __WALL | WNOHANG) == t->tid)
			ck__event(h, pid, k, st);
		t = &h->t[k];
		if (let_park && !t->ours && t->state == CK__T_TRAPPED &&
		    (ck__task_hex(pid, t->tid, "SigPnd:") >> (h->sig - 1)) & 1) {
			/* the manager sent it the parking signal: the only one its
			 * mask lets through now */
			if (ptrace(PTRACE_CONT, t->tid, 0, 0) == 0)
				t->state = CK__T_PARKING;
		}
		waiting += !t->ours && t->state != CK__T_PARKED && t->state != CK__T_GONE;
	}
	return waiting;
}

int ck_stopped_pump(struct ckrun *c)
{
	int waiting = 0;

	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].round.hold)
			waiting += ck__pump_hold(c->procs[i].round.hold, c->procs[i].pid, 1);
	return waiting;
}

/* Waits up to ms for PONG on p's channel, after DONE and PING. */
static int ck__pong(struct ck_jproc *p, int ms)
{
	uint64_t until = ck_now_ns() + (uint64_t)ms * 1000000ull;

	while (ck_now_ns() < until) {
		struct pollfd pf = {p->fd, POLLIN, 0};
		struct ck_msg m;
		pid_t sender;
		int newfd = -1;
		if (poll(&pf, 1, 50) <= 0)
			continue;
		int r = ck_chan_recv_fd(p->fd, &m, &sender, 0, &newfd);
		if (r == -ETIMEDOUT || r == -EAGAIN || r == -EINTR)
			continue;
		if (r < 0)
			return -EPIPE;
		if (newfd >= 0)
			close(newfd);
		if (m.type == CK_MSG_PONG)
			return 0;
	}
	return -ETIMEDOUT;
}

/* DONE (and PING) to p's manager, which releases the parked threads: each
 * job thread in the handler leaves it under PTRACE_SYSCALL and stops at
 * its rt_sigreturn's return; the manager's PONG says it ended the round.
 * 0, or -ETIMEDOUT. */
static int ck__done_unwind(struct ck_hold *h, struct ck_jproc *p, int64_t result)
{
	int ponged = 0, left = 1;

	ck_procs_send(p, CK_MSG_DONE, (uint64_t)result);
	ck_procs_send(p, CK_MSG_PING, 0);
	for (size_t i = 0; i < h->n; i++) {
		struct ck__thr *t = &h->t[i];
		if (t->ours || !t->in_handler)
			continue;
		if (t->state == CK__T_PARKED) { /* running, traced: its next stops */
			t->state = CK__T_UNWINDING;
		} else if (t->state == CK__T_AT_SIGRETURN || t->state == CK__T_TRAPPED) {
			if (t->state == CK__T_TRAPPED)
				t->nr = -1;
			if (ptrace(PTRACE_SYSCALL, t->tid, 0, 0) == 0)
				t->state = CK__T_UNWINDING;
		}
	}
	for (uint64_t until = ck_now_ns() + 5000000000ull; (!ponged || left) && ck_now_ns() < until;) {
		int r;
		ck__pump_hold(h, p->pid, 0);
		left = 0;
		for (size_t i = 0; i < h->n; i++)
			left += h->t[i].state == CK__T_UNWINDING;
		if (!ponged && ((r = ck__pong(p, 5)) == 0 || r == -EPIPE))
			ponged = 1;
		else if (ponged && left)
			usleep(1000);
	}
	return ponged && !left ? 0 : -ETIMEDOUT;
}

void ck_stopped_end(struct ckrun *c, struct ck_jproc *p, int done, int64_t result)
{
	struct ck_hold *h = p->round.hold;

	(void)c;
	if (!h)
		return;
	/* The job threads first: none may leave its stop or the handler. */
	for (size_t i = 0; i < h->n; i++) {
		struct ck__thr *t = &h->t[i];
		int st;
		if (t->ours || t->state == CK__T_GONE || t->state == CK__T_TRAPPED || t->state == CK__T_AT_SIGRETURN ||
		    t->state == CK__T_UNWOUND || (done && t->state == CK__T_PARKED))
			continue;
		ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
		if (ck__wait_stop(t->tid, 2000, &st) < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			if (ck__wait_stop(t->tid, 0, &st) == 0 && (WIFEXITED(st) || WIFSIGNALED(st)))
				t->state = CK__T_GONE;
			continue; /* (let go below, or ckrun's end) */
		}
		if ((st >> 16) == 0 && WSTOPSIG(st) == h->sig) {
			/* the parking signal, about to be taken: dropped, trapped */
			ptrace(PTRACE_INTERRUPT, t->tid, 0, 0);
			ptrace(PTRACE_CONT, t->tid, 0, 0);
			(void)ck__wait_stop(t->tid, 2000, &st);
		}
		t->state = CK__T_TRAPPED;
	}
	if (done && ck__done_unwind(h, p, result) < 0)
		fprintf(stderr, "ckrun: warning: process %d, which the job stopped, did not end its round in time\n",
			p->jpid);
	/* a parking signal still pending would interrupt a call of the job's
	 * after its SIGCONT (the handler finds no round): taken away */
	for (size_t i = 0; done && i < h->n; i++)
		if (!h->t[i].ours && (h->t[i].state == CK__T_TRAPPED || h->t[i].state == CK__T_UNWOUND))
			(void)ck__drop_stale_park(h, p->pid, &h->t[i]);
	ck__detach_all(h);
	ck__hold_free(h);
	p->round.hold = NULL;
}

/* The thread of pid whose id in the job's namespace is jtid (the last
 * NSpid), its id here; 0 if none. */
struct ck__nstid {
	pid_t jtid, tid;
};

static int ck__nstid_of(pid_t pid, pid_t tid, void *arg)
{
	struct ck__nstid *q = arg;
	char path[80], line[256];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "NSpid:", 6)) {
			const char *last = strrchr(line, '\t') ? strrchr(line, '\t') : line + 6;
			if (atoi(last) == q->jtid)
				q->tid = tid;
			break;
		}
	fclose(f);
	return q->tid != 0;
}

int ck_stopped_restore(struct ck_jproc *p, const struct ck_procdesc *pd)
{
	struct ck_hold *h = calloc(1, sizeof(*h));
	int r = 0, sig;

	if (!h)
		return -ENOMEM;
	h->sig = ck__park_sig(p->pid);
	/* its job threads wait in the parking handler: held there */
	for (uint32_t i = 0; i < pd->nthreads && r == 0; i++) {
		struct ck__nstid q = {pd->threads[i].tid, 0};
		pid_t tid;
		int st;
		if (pd->threads[i].flags & CK_PDT_MANAGER)
			continue;
		ck_proc_each_tid(p->pid, ck__nstid_of, &q);
		if (!(tid = q.tid)) {
			ck_err_set("restored process %d, which the job had stopped, has no thread %d", p->jpid, q.jtid);
			r = -ESRCH;
			break;
		}
		if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACESYSGOOD) < 0) {
			r = -errno;
			ck_err_set("restored process %d, which the job had stopped: ptrace of thread %d: %s", p->jpid, tid,
				   strerror(errno));
			break;
		}
		if ((r = ck__add_thr(h, tid, 0, CK__T_RUNNING)) < 0)
			break;
		h->t[h->n - 1].in_handler = 1;
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		if ((r = ck__wait_stop(tid, 2000, &st)) < 0 || !WIFSTOPPED(st)) {
			ck_err_set("restored process %d, which the job had stopped: thread %d did not stop for ckrun",
				   p->jpid, tid);
			r = r < 0 ? r : -ESRCH;
			break;
		}
		h->t[h->n - 1].state = CK__T_TRAPPED;
	}
	if (r == 0 && (r = ck__done_unwind(h, p, 0)) < 0)
		ck_err_set("restored process %d, which the job had stopped, did not end its restart", p->jpid);
	/* Stopped again, by the signal that had stopped it: its threads join
	 * the stop as they are let go, and its parent is told once, as the
	 * job's stop told it (its libckpt then takes what it had seen:
	 * libckpt/stopkids.c). */
	sig = (int)((pd->pflags & CK_PD_P_STOPSIG_MASK) >> CK_PD_P_STOPSIG_SHIFT);
	if (!ck__stop_signal(sig))
		sig = SIGSTOP;
	if (r == 0 && kill(p->pid, sig) < 0)
		r = -errno;
	ck__detach_all(h);
	ck__hold_free(h);
	if (r == 0 && sig != SIGSTOP) {
		/* the kernel drops SIGTSTP & co. in an orphaned process group,
		 * and a handler would take it: then as SIGSTOP, said */
		for (int i = 0; i < 2000 && !ck_stopped_all_T(p->pid); i++)
			usleep(1000);
		if (!ck_stopped_all_T(p->pid)) {
			fprintf(stderr,
				"ckrun: warning: restored process %d did not stop by signal %d as the job had stopped it: "
				"stopped by SIGSTOP instead (its parent's report names SIGSTOP)\n",
				p->jpid, sig);
			if (kill(p->pid, SIGSTOP) < 0)
				r = -errno;
		}
	}
	return r;
}

void ck_stopped_let_go_all(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].round.hold)
			ck_stopped_end(c, &c->procs[i], 0, 0);
}

int ck_stopped_any(const struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].round.hold)
			return 1;
	return 0;
}

/* A SIGCONT pending (the job's threads, masked, have not taken it): the
 * job continued the process during the round. */
int ck_stopped_continued(const struct ck_jproc *p)
{
	const struct ck_hold *h = p->round.hold;
	uint64_t cont = 1ull << (SIGCONT - 1);
	char path[64], line[256];
	int yes = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", p->pid);
	if ((f = fopen(path, "re"))) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "ShdPnd:", 7))
				yes = (strtoull(line + 7, NULL, 16) & cont) != 0;
		fclose(f);
	}
	for (size_t i = 0; h && !yes && i < h->n; i++)
		yes = h->t[i].state != CK__T_GONE && (ck__task_hex(p->pid, h->t[i].tid, "SigPnd:") & cont);
	return yes;
}
