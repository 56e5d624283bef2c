/* The checkpoint round as the job sees it, run by libckpt's manager thread:
 * plugins reach a clean point, threads park, process state is recorded,
 * then either a copy-on-write child is forked for ckrun to read (the job
 * resumes at once) or, with --no-fork, ckrun reads the parked process
 * itself. The manager's own context is saved here too, so in a restored
 * process execution continues below ck_ctx_save() with restarted = 1. */
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

/* what this process had used before the restore: its parent's wait adds
 * it (cputime.c) */
static struct ck_cpu_use ck__as_child;

static void ck__send_restarted(void)
{
	static struct ck_msg m;

	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = CK_MSG_RESTARTED;
	m.arg[0] = (uint64_t)(uintptr_t)&ck__semundo;
	memcpy(m.text, &ck__as_child, sizeof(ck__as_child));
	m.len = sizeof(ck__as_child);
	ck__send(&m);
}

static void ck__send_simple(uint32_t type, const char *text)
{
	static struct ck_msg m;

	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = type;
	m.len = 0;
	if (text) {
		m.len = (uint32_t)ck_strlen(text);
		if (m.len >= CK_MSG_TEXT)
			m.len = CK_MSG_TEXT - 1;
		ck_memcpy(m.text, text, m.len);
	}
	ck__send(&m);
}

static uint64_t ck__round_seq;
/* When the round's phases ended (µs, CLOCK_MONOTONIC): ckrun's -v -v. */
static uint64_t ck__t_ask, ck__t_parked, ck__t_recorded;

uint64_t ck__now_us(void)
{
	struct timespec ts;

	ck_sys2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* uffd >= 0: a write-protect snapshot; ckrun gets the descriptor and
 * where the protected ranges are. */
static int ck__wp_err; /* why this round's write protection was not armed (errno), for ckrun -v */

static void ck__send_snapshot(int uffd, int prearmed)
{
	/* On our stack, which stays unprotected: until ckrun has the
	 * userfaultfd, a write to protected memory would wait forever. */
	struct ck_msg m;

	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	if (uffd >= 0) {
		struct ck_wp_info wi = {(uint64_t)(uintptr_t)ck__wp_ranges, ck__wp_nranges, 0};
		ck_memcpy(m.text, &wi, sizeof(wi));
		m.len = sizeof(wi);
	} else if (ck__wp_err) {
		int32_t e = ck__wp_err;
		ck_memcpy(m.text, &e, sizeof(e));
		m.len = sizeof(e);
	}
	m.type = CK_MSG_SNAPSHOT;
	m.arg[0] = (uint64_t)(uintptr_t)&ck__pd;
	m.arg[1] = sizeof(ck__pd);
	m.arg[2] = (uint64_t)ck__core.hold; /* the job has memory a fork does not freeze */
	m.arg[3] = ck__round_seq;           /* a late snapshot of an ended round is told apart */
	m.arg[4] = ((ck__t_parked - ck__t_ask) & 0xffffffffu) | (ck__t_recorded - ck__t_parked) << 32;
	m.arg[5] = ck__now_us() - ck__t_recorded;
	/* a pre-armed process's descriptor is ckrun's already */
	ck__send_fd(&m, __builtin_offsetof(struct ck_msg, text) + m.len, prearmed ? -1 : uffd);
}

/* Waits for one of ckrun's messages: DONE (the round's verdict: resume),
 * or also `other` (COLLECT, RELEASE) when non-zero. Returns the message
 * type, or -errno when ckrun is gone. */
static int ck__round_result;

static struct ck_msg ck__last_msg; /* the one ck__wait_msg returned */

static int ck__wait_msg(uint32_t other)
{
	struct ck_msg *m = &ck__last_msg;
	int r;

	for (;;) {
		r = ck__recv(m);
		if (r < 0) {
			ck__round_result = r;
			return r;
		}
		if (m->type == CK_MSG_KIDS_CPU) /* a restore's, before DONE */
			ck__cpu_kids(m->text, m->len);
		if (m->type == CK_MSG_DONE)
			ck__round_result = (int)(int64_t)m->arg[0];
		if (m->type == CK_MSG_DONE || (other && m->type == other))
			return (int)m->type;
	}
}

static void __attribute__((noinline)) ck__snapshot_child(void)
{
	/* A copy-on-write image of the parked process: ckrun reads it and
	 * kills it. Nothing else runs here. It leaves the job's session and
	 * process group, so the job counting their members (or signalling its
	 * group) never meets it, and names itself for ps. */
	ck_sys0(SYS_setsid);
	ck_sys2(SYS_prctl, 15 /* PR_SET_NAME */, (long)"ckpt-snapshot");
	ck__send_snapshot(-1, 0);
	for (;;)
		ck_sys0(SYS_pause);
}

/* The snapshot is our child with no exit signal: the job's wait() and
 * SIGCHLD never see it (only __WALL does). ckrun kills it before DONE; we
 * kill it too, for a round that ended before ckrun knew of it (a process
 * that was stopped) or a ckrun that is gone: it holds copies of every
 * descriptor, pipe ends included. */
static void ck__reap_snapshot(long child)
{
	ck_sys2(SYS_kill, child, SIGKILL);
	while (ck_sys4(SYS_wait4, child, 0, 0x40000000 /* __WALL */, 0) == -EINTR)
		;
}

/* ckrun saves System V segments itself, from their ids. The snapshot does
 * not inherit our attachments: one would show in shm_nattch, to this job's
 * processes still running while we park and to all while the image is
 * written. (An attachment the job itself marked MADV_DONTFORK loses the
 * mark: /proc/self/maps does not show it.) */
static void ck__sysv_fork_advice(int advice)
{
	for (uint32_t i = 0; i < ck__pd.nsysv; i++)
		ck_sys3(SYS_madvise, ck__sysv_maps[i].start, ck__sysv_maps[i].end - ck__sysv_maps[i].start, advice);
}

/* ckrun's /dev/userfaultfd for this round is kept in ck__core, not in a
 * local: it changes after ck_ctx_save. */
static void ck__devfd_close(void)
{
	int fd = ck__core.devfd;

	ck__core.devfd = -1; /* before the close: a child forked now must not close a number reused */
	if (fd >= 0)
		ck_close(fd);
}

/* Takes the round's request out of the channel, its descriptor (ckrun's
 * /dev/userfaultfd, or a pre-armed round's userfaultfd) with it, or drops
 * both (devfd NULL). Only while parked does a number the kernel gives us
 * never change which one a job thread's open gets. */
static int ck__take_request(int *devfd)
{
	struct ck_msg m;
	int r = ck__recv_fd(&m, devfd);

	if (r == 0 && m.type != CK_MSG_CHECKPOINT)
		r = -EPROTO;
	if (r == 0)
		ck__stopkids_held(m.text, m.len);
	return r;
}

void ck__round(uint32_t flags, uint64_t seq, uint32_t park_ms, uint32_t bound_ms, uint32_t seccomp_base)
{
	struct ck_pd_thread *mgr;
	int r, taken = 0;

	ck__round_seq = seq;
	ck__core.devfd = -1;
	ck__core.fork_fd[0] = -1;
	ck__t_ask = ck__now_us();
	ck__core.fail[0] = 0;
	ck__core.hold = 0;
	r = ck__plugins_event(CK_EV_PRESUSPEND);
	if (r < 0 || (r = ck__mqnotify_parkable()) < 0)
		goto fail_resume;
	r = ck__suspend_all(park_ms ? park_ms : CK_PARK_TIMEOUT_MS, bound_ms ? bound_ms : CK_PARK_TIMEOUT_MS);
	if (r < 0)
		goto fail_resume;
	taken = 1;
	if ((r = ck__take_request(&ck__core.devfd)) < 0)
		goto fail_release;
	ck__t_parked = ck__now_us();
	/* the job's own seccomp filters (ckrun saw threads under more than
	 * its own: the counts are checked too) */
	if ((r = ck__seccomp_check(!!(flags & CK_CKPT_SECCOMP), seccomp_base)) < 0)
		goto fail_release;
	/* Our own state cannot change while we are parked: record it and take
	 * the snapshot now. What crosses processes (pipes, sockets, shared
	 * memory) ckrun reads once every process has its snapshot, and nobody
	 * runs again before RELEASE. */
	ck__cpu_cut();
	r = ck__collect_process();
	if (r == 0)
		r = ck__collect_fds();
	if (r == 0)
		r = ck__stopkids_collect(!!(flags & CK_CKPT_STOPKIDS));
	if (r == 0)
		r = ck__plugins_event(CK_EV_PRECHECKPOINT);
	if (r < 0)
		goto fail_release;
	mgr = &ck__pd.threads[0];
	ck__save_kernel_thread_state(mgr);
	ck__pd.restart_entry = (uint64_t)(uintptr_t)ck__restart_entry;
	ck__pd.restart_arg = (uint64_t)(uintptr_t)&ck__pd;
	ck__pd.restart_stack = (uint64_t)(uintptr_t)(ck__restart_stack + CK_RESTART_STACK_SIZE);
	ck__t_recorded = ck__now_us();

	if (ck_ctx_save(&mgr->ctx) == 0) {
		int uffd = -1, prearmed = (flags & CK_CKPT_PREARMED) != 0, done = 0;

		ck__wp_err = 0;
		if ((flags & CK_CKPT_WP) && !(flags & CK_CKPT_NOFORK)) {
			/* Once armed, nothing but the stack is written until
			 * SNAPSHOT is sent (ck__send_snapshot). Pre-armed: the
			 * descriptor that came is the process's userfaultfd. */
			uffd = ck__wp_begin();
			if (uffd == 0)
				uffd = prearmed ? ck__wp_rearm(ck__core.devfd, &done) : ck__wp_arm(ck__core.devfd);
			if (uffd == -ECANCELED) { /* ckrun ended the round meanwhile */
				ck__wp_idle();
				ck__devfd_close();
				ck__release_all();
				ck__plugins_event(CK_EV_RESUME);
				ck__round_finished(done);
				return;
			}
			if (uffd < 0) {
				ck__wp_err = -uffd;
				ck__wp_idle();
			}
		}
		if (uffd >= 0) {
			/* Nothing but this stack is written until ckrun has the
			 * descriptor. Then it holds the only reference: when it
			 * closes it, or dies, every protection goes with it. */
			ck__send_snapshot(uffd, prearmed);
			if (!prearmed) /* else it is ck__core.devfd */
				ck_close(uffd);
			ck__devfd_close();
			r = ck__wait_msg(CK_MSG_RELEASE);
			ck__release_all();
			if (r == CK_MSG_RELEASE)
				ck__wait_msg(0);
			ck__wp_idle();
		} else if (!(flags & CK_CKPT_NOFORK)) {
			long child;

			ck__devfd_close();
			ck__sysv_fork_advice(MADV_DONTFORK);
			child = ck_sys5(SYS_clone, 0 /* no exit signal */, 0, 0, 0, 0);
			if (child == 0)
				ck__snapshot_child();
			ck__sysv_fork_advice(MADV_DOFORK);
			if (child < 0) {
				ck__failf("cannot fork the snapshot (%s)", strerror((int)-child));
				r = (int)child;
				goto fail_release;
			}
			/* Threads stay parked until ckrun has every process's
			 * snapshot and has read what a copy-on-write child cannot
			 * hold (shared memory, file and pipe contents). */
			r = ck__wait_msg(CK_MSG_RELEASE);
			ck__release_all();
			if (r == CK_MSG_RELEASE)
				r = ck__wait_msg(0);
			ck__reap_snapshot(child);
		} else {
			ck__devfd_close();
			ck__send_snapshot(-1, 0);
			ck__wait_msg(0);
			ck__release_all();
		}
		ck__plugins_event(CK_EV_RESUME);
		ck__round_finished(ck__round_result);
		return;
	}
	/* Restored process: this thread was re-created by the restart code;
	 * the restorer left our new channel at CK_CTL_FD. */
	ck__channel_restored();
	ck__core.devfd = -1; /* the saving round's, not open here */
	ck__core.fork_fd[0] = ck__core.fork_fd[1] = -1;
	/* /proc files the saving round had open are not here either: their
	 * numbers may be the job's now, which a listing must not hide */
	ck__priv_forget();
	ck__core.wp_busy = 0; /* saved while ckrun read the process */
	ck__core.exiting = 0;
	ck__core.restarted = 1;
	ck__core.restart_count++;
	ck__thread_restored(&ck__pd.threads[0]);
	{
		/* No thread runs job code before each has its credentials back. */
		const char *what = NULL;
		int e = ck__creds_wait(&what);
		if (e < 0) {
			static char line[160];
			snprintf(line, sizeof(line), "process restart: cannot give a thread its saved %s (errno %d)",
				 what ? what : "credentials", -e);
			ck__send_simple(CK_MSG_RST_ERROR, line);
			ck_exit_group(128 + (-e & 0x3f));
		}
		/* a change of ids resets it */
		if (ck__pd.dumpable >= 0)
			ck_sys2(SYS_prctl, PR_SET_DUMPABLE, ck__pd.dumpable);
		/* every mapping holds its data now, and the restorer is gone */
		if ((e = ck__pstate_restore(&what)) < 0) {
			static char line[160];
			snprintf(line, sizeof(line), "process restart: cannot give the process its saved %s (errno %d)",
				 what, -e);
			ck__send_simple(CK_MSG_RST_ERROR, line);
			ck_exit_group(128 + (-e & 0x3f));
		}
		{
			uint64_t ctx = 0;
			if ((e = ck__aio_restore(&ctx)) < 0) {
				static char line[200];
				snprintf(line, sizeof(line),
					 "process restart: cannot make its Linux AIO context 0x%llx again%s (errno %d)",
					 (unsigned long long)ctx,
					 e == -ENOSPC ? ": this host's ring for it would be larger (more CPUs)" : "", -e);
				ck__send_simple(CK_MSG_RST_ERROR, line);
				ck_exit_group(128 + (-e & 0x3f));
			}
		}
		{
			int32_t set = 0;
			if ((e = ck__semundo_restore(&set)) < 0) {
				static char line[160];
				snprintf(line, sizeof(line),
					 "process restart: cannot set its adjustments (SEM_UNDO) of System V semaphore set %d again (errno %d)",
					 set, -e);
				ck__send_simple(CK_MSG_RST_ERROR, line);
				ck_exit_group(128 + (-e & 0x3f));
			}
		}
		{
			unsigned cmd = 0;
			if ((e = ck__membarrier_restore(&cmd)) < 0) {
				static char line[160];
				snprintf(line, sizeof(line),
					 "process restart: cannot register membarrier command %u again (errno %d)", cmd, -e);
				ck__send_simple(CK_MSG_RST_ERROR, line);
				ck_exit_group(128 + (-e & 0x3f));
			}
		}
	}
	ck__cpu_restored(&ck__as_child); /* before the job's restart callbacks read a clock */
	ck__plugins_event(CK_EV_RESTART);
	ck__run_restart_callbacks();
	ck__send_restarted();
	/* Every process of the job runs again at once, when ckrun says so;
	 * before that, the environment ckrun's --env gives it (env.c: no
	 * malloc, the job's threads still parked). */
	while (ck__wait_msg(CK_MSG_ENV) == CK_MSG_ENV)
		if (ck__env_apply(ck__last_msg.text, ck__last_msg.len) < 0) {
			static const char w[] = "libckpt: warning: the environment of --env could not be set\n";
			ck_write(2, w, sizeof(w) - 1);
		}
	{
		const char *why = NULL, *path = NULL;
		long e = ck__fdstate_late(&ck__pd, &why, &path);
		if (e < 0) {
			static char line[320];
			snprintf(line, sizeof(line), "process restart: %s %s (errno %ld)", why ? why : "descriptor",
				 path ? path : "", -e);
			ck__send_simple(CK_MSG_RST_ERROR, line);
			ck_exit_group(128 + (int)(-e & 0x3f));
		}
	}
	/* children the job had stopped are stopped again by now (ckrun let
	 * them go first): what this parent had seen of them */
	ck__stopkids_restored();
	{
		/* the last thing before job code runs: the filters forbid what
		 * the restore itself did */
		int e = ck__seccomp_restore();
		if (e < 0) {
			static char line[160];
			snprintf(line, sizeof(line), "process restart: cannot install the job's seccomp filters again (errno %d)",
				 -e);
			ck__send_simple(CK_MSG_RST_ERROR, line);
			ck_exit_group(128 + (-e & 0x3f));
		}
	}
	ck__release_all();
	ck__round_finished(0); /* the saved round succeeded, by definition */
	return;

fail_release:
	ck__devfd_close(); /* parked: no fork copies it meanwhile */
	ck__release_all();
fail_resume:
	if (!taken)
		ck__take_request(NULL);
	ck__plugins_event(CK_EV_RESUME);
	if (!ck__core.fail[0])
		ck__failf("checkpoint failed (%s)", strerror(-r));
	ck__send_simple(CK_MSG_FAILED, ck__core.fail);
	ck__round_finished(r < 0 ? r : -EIO);
}

/* Test knob: a manager slow to take a pre-armed round's request (the
 * round may have ended meanwhile: tests/suite/22-wpsnap.sh). */
static void ck__test_take_delay(void)
{
	char comm[32] = "";
	struct timespec ts = {ck__core.test_take_delay_ms / 1000, ck__core.test_take_delay_ms % 1000 * 1000000L};
	long n = ck__read_file("/proc/self/comm", comm, sizeof(comm)); /* the process's name, not this thread's */

	if (n > 0 && comm[n - 1] == '\n')
		comm[n - 1] = 0;
	if (n > 0 && !strcmp(comm, ck__core.test_take_delay_comm))
		ck_sys2(SYS_nanosleep, (long)&ts, 0);
}

/* The manager thread: waits for ckrun's requests. */
void *ck__manager(void *arg)
{
	static struct ck_msg m;

	(void)arg;
	/* named: ckrun tells libckpt's threads from the job's by it, with their
	 * masks, in a process the job stopped (launcher/ckrun/stopped.c) */
	ck_sys2(SYS_prctl, PR_SET_NAME, (long)CK_MANAGER_COMM);
	__atomic_store_n(&ck__core.manager_tid, (int)ck_gettid(), __ATOMIC_SEQ_CST);
	ck_futex(&ck__core.manager_tid, FUTEX_WAKE_PRIVATE, 1, NULL);
	for (;;) {
		/* Looked at, not taken: a request's descriptor enters our
		 * table only once the job's threads are parked. */
		int r = ck__peek(&m);

		if (r < 0) {
			/* The job closed our descriptor, or ckrun is gone: in the
			 * first case its attach socket answers. */
			if (ck__reattach() == 0)
				continue;
			/* the job runs on, uncheckpointed; glibc does not count
			 * this thread (init.c): its end must not be counted */
			for (;;)
				ck_sys0(SYS_pause);
		}
		if (m.type == CK_MSG_CHECKPOINT) {
			if ((m.arg[0] & CK_CKPT_PREARMED) && ck__core.test_take_delay_ms > 0)
				ck__test_take_delay();
			ck__core.boost_nice = (int)m.arg[5];
			ck__round((uint32_t)m.arg[0], m.arg[1], (uint32_t)m.arg[2], (uint32_t)m.arg[3], (uint32_t)m.arg[4]);
		}
		else if (m.type == CK_MSG_PREARM)
			ck__wp_prearm(m.arg[0]);
		else if (ck__recv(&m) == 0 && m.type == CK_MSG_PING)
			ck__send_simple(CK_MSG_PONG, NULL);
	}
}
