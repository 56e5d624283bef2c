/* The restart entry: the restorer has mapped and filled the saved address
 * space, placed the descriptors and jumps here, on ck__restart_stack, as
 * the restored main thread. From here on, only system calls: libc's state
 * is the saved one and belongs to threads that do not exist yet.
 *
 * Steps: drop the restorer, restore process-wide kernel state (signal
 * dispositions, timers, umask, cwd, rlimits), refill pipes, re-register
 * epoll items, re-create every other thread with its old TID (clone3
 * set_tid) jumping to its saved context, then resume the main thread. */
#include <errno.h>
#include <linux/prctl.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#ifndef ARCH_SET_FS
#define ARCH_SET_FS 0x1002
#endif

/* A tiny stack per re-created thread: it only runs the jump to its
 * context. */
#define CK_TRAMP_STACK 256
static char ck__tramp_stacks[CK_PD_MAX_THREADS][CK_TRAMP_STACK] __attribute__((aligned(16)));

static struct ck_msg ck__fail_msg;

static size_t ck__append(char *to, size_t at, size_t cap, const char *s)
{
	while (*s && at < cap)
		to[at++] = *s++;
	return at;
}

/* Ends the restart: ckrun learns why over the channel the restorer left
 * (ck__core.ctl_fd, set first thing by ck__restart_main; it names the checkpoint in its one error line), and the
 * process exits 128 + errno. what2 may name the thing (a path) or be NULL. */
static __attribute__((noreturn)) void ck__restart_fail2(const char *what, const char *what2, long err)
{
	struct ck_msg *m = &ck__fail_msg;
	size_t cap = sizeof(m->text) - 24, n;
	char num[24];
	long e = -err;
	int k = 0;

	ck_memset(m, 0, sizeof(*m));
	n = ck__append(m->text, 0, cap, "process restart: ");
	n = ck__append(m->text, n, cap, what);
	if (what2) {
		n = ck__append(m->text, n, cap, " ");
		n = ck__append(m->text, n, cap, what2);
	}
	if (err < 0) {
		n = ck__append(m->text, n, sizeof(m->text), " (errno ");
		do
			num[k++] = (char)('0' + e % 10);
		while ((e /= 10) && k < 20);
		while (k && n < sizeof(m->text))
			m->text[n++] = num[--k];
		n = ck__append(m->text, n, sizeof(m->text), ")");
	}
	m->type = CK_MSG_RST_ERROR;
	m->len = (uint32_t)n;
	m->arg[0] = (uint64_t)err;
	if (ck_send_with_creds(ck__core.ctl_fd, m, __builtin_offsetof(struct ck_msg, text) + n) < 0) {
		m->text[n] = '\n';
		ck_write(2, m->text, n + 1); /* no ckrun to tell: the job's stderr */
	}
	ck_exit_group(128 + (int)(-err & 0x3f));
}

static __attribute__((noreturn)) void ck__restart_fail(const char *what, long err)
{
	ck__restart_fail2(what, NULL, err);
}

static size_t ck__append_u32(char *to, size_t at, size_t cap, uint32_t v)
{
	char d[12];
	int k = 0;

	do
		d[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < 11);
	while (k && at < cap)
		to[at++] = d[--k];
	return at;
}

/* The audit login uid, while we still have the restorer's credentials
 * (CAP_AUDIT_CONTROL where ckrun is root): given back, or the restore
 * fails naming both values. */
static void ck__restore_loginuid(void)
{
	static char line[96];
	uint32_t saved = 0, now = 0;
	size_t n;
	int r = ck__pstate_loginuid_restore(&saved, &now);

	if (r == 0)
		return;
	n = ck__append(line, 0, sizeof(line) - 1, "loginuid ");
	n = ck__append_u32(line, n, sizeof(line) - 1, saved);
	if (r == -ENOENT) {
		n = ck__append(line, n, sizeof(line) - 1, " (this kernel has no loginuid)");
	} else {
		n = ck__append(line, n, sizeof(line) - 1, " (the restoring process has ");
		n = ck__append_u32(line, n, sizeof(line) - 1, now);
		n = ck__append(line, n, sizeof(line) - 1, ")");
	}
	line[n] = 0;
	ck__restart_fail2("cannot give the process its saved", line, r);
}

/* The working directory was removed while the process was in it (its
 * path ends in " (deleted)"; it had to be empty): made again under its
 * name, entered and removed, so that the process is in a removed, empty
 * directory of that name and mode again. A name taken meanwhile gets
 * ".ckrun-removed" after it. */
static long ck__deleted_dir_enter(const char *cwd, uint32_t mode)
{
	static char path[CK_PD_PATH + 16];
	size_t n = ck_strlen(cwd) - 10; /* " (deleted)" */
	long r, fd;

	ck_memcpy_early(path, cwd, n);
	path[n] = 0;
	r = ck_sys2(SYS_mkdir, path, 0700);
	if (r == -EEXIST) {
		ck__msg_put(path, sizeof(path), n, ".ckrun-removed");
		r = ck_sys2(SYS_mkdir, path, 0700);
	}
	if (r < 0)
		return r;
	/* by descriptor from here: the name may be replaced meanwhile (a
	 * symlink in a shared directory), the directory we made may not */
	fd = ck_openat(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return fd;
	if ((r = ck_sys2(SYS_fchmod, fd, mode)) == 0 && (r = ck_sys1(SYS_fchdir, fd)) == 0)
		r = ck_sys3(SYS_unlinkat, AT_FDCWD, path, AT_REMOVEDIR);
	ck_close((int)fd);
	return r;
}

/* The time a wall-clock timer had left, counted from the restore's start,
 * where the job's clocks go on from the cut (ckrun's timens.c): less the
 * time since; 1 ns where it came due since (it fires at once, the
 * expirations in between not counted). CPU-time clocks did not run. */
static uint64_t ck__left_now(const struct ck_procdesc *pd, long clock, uint64_t left)
{
	struct timespec ts;
	uint64_t now;

	if (!left || !pd->rst_mono ||
	    !(clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC || clock == CLOCK_BOOTTIME ||
	      clock == CLOCK_REALTIME_ALARM || clock == CLOCK_BOOTTIME_ALARM || clock == CLOCK_TAI))
		return left;
	ck_sys2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (now <= pd->rst_mono)
		return left;
	return left > now - pd->rst_mono ? left - (now - pd->rst_mono) : 1;
}

static void ck__restore_process_state(const struct ck_procdesc *pd)
{
	for (int s = 1; s < CK_PD_NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP)
			continue;
		ck_sys4(SYS_rt_sigaction, s, &pd->sigact[s], NULL, 8);
	}
	for (int w = 0; w < 3; w++) {
		struct itimerval it;
		it.it_interval.tv_sec = (long)pd->itimer[w][0];
		it.it_interval.tv_usec = (long)pd->itimer[w][1];
		it.it_value.tv_sec = (long)pd->itimer[w][2];
		it.it_value.tv_usec = (long)pd->itimer[w][3];
		/* A periodic ITIMER_REAL whose SIGALRM was pending at the cut
		 * reads 0: the kernel re-arms it only when that signal is taken,
		 * and the signal raised again here is not the timer's. Arm it
		 * for its next period, or it never fires again. (A disarmed
		 * ITIMER_REAL reads a zero interval too; the CPU-time timers
		 * keep their interval when disarmed, so they are left alone.) */
		if (w == ITIMER_REAL && !it.it_value.tv_sec && !it.it_value.tv_usec)
			it.it_value = it.it_interval;
		if (w == ITIMER_REAL) {
			uint64_t us = (uint64_t)it.it_value.tv_sec * 1000000ull + (uint64_t)it.it_value.tv_usec;
			us = (ck__left_now(pd, CLOCK_MONOTONIC, us * 1000ull) + 999ull) / 1000ull;
			it.it_value.tv_sec = (long)(us / 1000000ull);
			it.it_value.tv_usec = (long)(us % 1000000ull);
		}
		if (it.it_value.tv_sec || it.it_value.tv_usec)
			ck_sys3(SYS_setitimer, w, &it, NULL);
	}
	for (int l = 0; l < CK_PD_NRLIMIT; l++) {
		uint64_t rl[2] = {pd->rlimit[l][0], pd->rlimit[l][1]};
		/* Raising a hard limit needs privileges we may not have: then keep
		 * the soft limit within what is allowed. */
		if (ck_sys4(SYS_prlimit64, 0, l, rl, NULL) < 0) {
			uint64_t cur[2];
			if (ck_sys4(SYS_prlimit64, 0, l, NULL, cur) == 0) {
				rl[1] = cur[1];
				if (rl[0] > rl[1])
					rl[0] = rl[1];
				ck_sys4(SYS_prlimit64, 0, l, rl, NULL);
			}
		}
	}
	ck_sys1(SYS_umask, pd->umask);
	/* Per-process flags (no_new_privs is per thread: each thread sets its
	 * own when it resumes). */
	if (pd->dumpable >= 0)
		ck_sys2(SYS_prctl, 4 /* PR_SET_DUMPABLE */, pd->dumpable);
	if (pd->pdeathsig > 0)
		ck_sys2(SYS_prctl, 1 /* PR_SET_PDEATHSIG */, pd->pdeathsig);
	if (pd->child_subreaper > 0)
		ck_sys2(SYS_prctl, 36 /* PR_SET_CHILD_SUBREAPER */, 1);
	/* A job put back in another directory would read and write the wrong
	 * files through relative paths: no way back is a failed restart. */
	if (pd->cwd[0] && (pd->cwd_mode & CK_PD_CWD_REMOVED)) {
		long r = ck__deleted_dir_enter(pd->cwd, pd->cwd_mode & 07777);
		if (r < 0)
			ck__restart_fail2("cannot make again the removed working directory in", pd->cwd, r);
	} else if (pd->cwd[0]) {
		long r = ck_sys1(SYS_chdir, pd->cwd);
		if (r < 0)
			ck__restart_fail2("cannot return to the saved working directory", pd->cwd, r);
	}
}

/* POSIX timers with their old ids (PR_TIMER_CREATE_RESTORE_IDS: the
 * kernel then takes the id passed in) and remaining times. */
static void ck__restore_timers(const struct ck_procdesc *pd)
{
	if (!pd->ntimers)
		return;
	if (ck_sys5(SYS_prctl, 77 /* PR_TIMER_CREATE_RESTORE_IDS */, 1, 0, 0, 0) < 0)
		ck__restart_fail("this kernel cannot re-create POSIX timers with their ids", -ENOSYS);
	for (uint32_t i = 0; i < pd->ntimers && i < CK_PD_MAX_TIMERS; i++) {
		const struct ck_pd_timer *t = &pd->timers[i];
		struct {
			uint64_t value;
			int32_t signo, notify;
			int32_t tid;
			int32_t pad[11];
		} ev;
		int id = t->id;
		uint64_t left = ck__left_now(pd, t->clock, t->value_ns);
		struct itimerspec its;

		ck_memset(&ev, 0, sizeof(ev));
		ev.value = t->value;
		ev.signo = t->signo;
		ev.notify = t->notify;
		ev.tid = t->tid;
		if (ck_sys3(SYS_timer_create, t->clock, &ev, &id) < 0 || id != t->id)
			ck__restart_fail("cannot re-create a POSIX timer", -EINVAL);
		its.it_value.tv_sec = (long)(left / 1000000000ull);
		its.it_value.tv_nsec = (long)(left % 1000000000ull);
		its.it_interval.tv_sec = (long)(t->interval_ns / 1000000000ull);
		its.it_interval.tv_nsec = (long)(t->interval_ns % 1000000000ull);
		if (left)
			ck_sys4(SYS_timer_settime, id, 0, &its, NULL);
	}
	ck_sys5(SYS_prctl, 77, 0, 0, 0, 0);
}

/* clone3 whose child jumps straight into ctx. */
static long ck__spawn_thread(struct clone_args *ca, const struct ck_ctx *ctx)
{
	register const struct ck_ctx *c __asm__("r12") = ctx;
	long ret;

	__asm__ volatile("syscall\n\t"
			 "testq %%rax, %%rax\n\t"
			 "jnz 1f\n\t"
			 "movq %%r12, %%rdi\n\t"
			 "call ck_ctx_resume\n\t"
			 "1:"
			 : "=a"(ret)
			 : "a"(SYS_clone3), "D"(ca), "S"(sizeof(*ca)), "r"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

static void ck__recreate_threads(const struct ck_procdesc *pd)
{
	for (uint32_t i = 0; i < pd->nthreads; i++) {
		const struct ck_pd_thread *t = &pd->threads[i];
		struct clone_args ca;
		pid_t tid = t->tid;
		long r;

		if (t->flags & CK_PDT_MAIN)
			continue;
		ck_memset(&ca, 0, sizeof(ca));
		ca.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
			   CLONE_SETTLS | CLONE_CHILD_CLEARTID;
		ca.child_tid = t->tid_addr;
		ca.stack = (uint64_t)(uintptr_t)ck__tramp_stacks[i];
		ca.stack_size = CK_TRAMP_STACK;
		ca.tls = t->fs_base;
		ca.set_tid = (uint64_t)(uintptr_t)&tid;
		ca.set_tid_size = 1;
		r = ck__spawn_thread(&ca, &t->ctx);
		if (r == -EPERM || r == -EINVAL) {
			/* No way to choose TIDs here: take a new one and tell glibc. */
			ca.set_tid = 0;
			ca.set_tid_size = 0;
			ca.flags |= CLONE_PARENT_SETTID;
			ca.parent_tid = t->tid_addr;
			r = ck__spawn_thread(&ca, &t->ctx);
			if (r > 0 && (t->flags & CK_PDT_MANAGER)) /* listings leave it out by tid (fdhide.c) */
				ck__core.manager_tid = (int)r;
		}
		if (r < 0)
			ck__restart_fail("cannot re-create a thread", r);
	}
}

/* Entered with: rdi = the process descriptor, rsi/rdx = the restorer's
 * range to unmap, rcx = where it left our channel (CK_RST_CTL_MAGIC in the
 * high half; a restorer without it left the channel at CK_CTL_FD). */
__attribute__((noreturn, used, visibility("hidden"))) void ck__restart_main(struct ck_procdesc *pd, uint64_t rst, uint64_t rst_len,
									  uint64_t ctl)
{
	const struct ck_pd_thread *main_thread = NULL;

	ck__core.ctl_fd = (ctl >> 32) == CK_RST_CTL_MAGIC ? (int)(uint32_t)ctl : CK_CTL_FD;
	for (uint32_t i = 0; i < pd->nthreads; i++)
		if (pd->threads[i].flags & CK_PDT_MAIN)
			main_thread = &pd->threads[i];
	if (!main_thread)
		ck__restart_fail("no main thread in the image", -EINVAL);
	ck_sys2(SYS_arch_prctl, ARCH_SET_FS, main_thread->fs_base);
	ck_sys2(SYS_prctl, 15 /* PR_SET_NAME */, main_thread->comm);
	if (rst_len)
		ck_munmap(rst, rst_len);
	/* /proc/self/exe named the restorer: point it at the job's program
	 * again, now that no mapping of the restorer is left. */
	if (pd->exe[0]) {
		long fd = ck_openat(AT_FDCWD, pd->exe, O_RDONLY | O_CLOEXEC, 0);
		if (fd >= 0) {
			/* PR_SET_MM_EXE_FILE needs CAP_SYS_RESOURCE in the initial
			 * namespace; PR_SET_MM_MAP only ours. */
			struct prctl_mm_map mm;
			ck_memset(&mm, 0, sizeof(mm));
			mm.start_code = pd->start_code;
			mm.end_code = pd->end_code;
			mm.start_data = pd->start_data;
			mm.end_data = pd->end_data;
			mm.start_brk = pd->start_brk;
			mm.brk = pd->brk;
			mm.start_stack = pd->start_stack;
			mm.arg_start = pd->arg_start;
			mm.arg_end = pd->arg_end;
			mm.env_start = pd->env_start;
			mm.env_end = pd->env_end;
			mm.auxv = (__u64 *)(uintptr_t)pd->auxv;
			mm.auxv_size = pd->auxv_size;
			mm.exe_fd = (__u32)fd;
			ck_sys5(SYS_prctl, PR_SET_MM, PR_SET_MM_MAP, (long)&mm, sizeof(mm), 0);
			ck_close((int)fd);
		}
	}
	ck__restore_process_state(pd);
	ck__restore_loginuid();
	{
		const char *why = NULL, *path = NULL;
		long r = ck__fdstate_reopen(pd, &why, &path);
		if (r < 0)
			ck__restart_fail2(why, path, r);
		if ((r = ck__inotify_restore(pd, &why, &path)) < 0)
			ck__restart_fail2(why, path, r);
		if ((r = ck__mqnotify_restore(pd, &why, &path)) < 0)
			ck__restart_fail2(why, path, r);
		if ((r = ck__epoll_restore(pd, &why)) < 0)
			ck__restart_fail(why, r);
		/* with the restorer's credentials still: a process whose ids
		 * changed cannot open its own /proc files for writing */
		if ((r = ck__pstate_oom_restore()) < 0)
			ck__restart_fail("oom_score_adj", r);
		ck__creds_prepare(pd); /* before any thread can give its own back */
		ck__recreate_threads(pd);
		if ((r = ck__fdstate_restore(pd, &why, &path)) < 0)
			ck__restart_fail2(why, path, r);
	}
	ck__restore_timers(pd);
	/* Every thread exists, all with signals blocked until they return
	 * from their parking handler: raise what was pending. */
	for (uint32_t i = 0; i < pd->nsiginfo && i < CK_PD_MAX_SIGINFO; i++) {
		const struct ck_pd_siginfo *q = &pd->siginfo[i];
		ck_requeue_signal(pd->pid, q->tid, q->sig, q->info);
	}
	ck_ctx_resume(&main_thread->ctx);
}

/* The address the restorer jumps to (recorded as restart_entry). */
__asm__(".text\n"
	".globl ck__restart_entry\n"
	".hidden ck__restart_entry\n"
	".type ck__restart_entry, @function\n"
	"ck__restart_entry:\n"
	"\tandq $-16, %rsp\n"
	"\tcall ck__restart_main\n"
	"\tud2\n");
