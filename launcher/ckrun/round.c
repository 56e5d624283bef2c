/* A checkpoint round, agent side, for every process of the job at once,
 * as a sequence of phases over one struct ck_round (round.h):
 *
 *   check   the job can take part (ready, our lock, not traced)
 *   begin   the writer opens; the job is boosted; a write-protect
 *           snapshot is prepared (pre-armed while the job runs: prearm.c)
 *   cut     every process parks, records its state and takes its
 *           snapshot; its descriptor is read (cut.c)
 *   record  with every process parked: the tree (proctree.c), what
 *           crosses processes (the descriptor kinds: fdkinds.c; the
 *           plugins' agent halves; System V: shm_sysv.c)
 *   save    memory and descriptor contents (memory.c, fdkinds.c), in two
 *           passes around RELEASE: the job runs on while its snapshots
 *           are read
 *   commit  the packs flushed, the lock and packs checked, the manifest
 *           committed; DONE to every process; retention
 *
 * Any failure (a process that refuses, dies, or does not answer) ends the
 * round for all: each process resumes, and the previous checkpoint stays
 * the newest. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ckrun/proto.h"
#include "launcher/ckrun/agent_plugin.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/round.h"
#include "launcher/ckrun/stash.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/chunkio.h"

static void ck__end_round(struct ckrun *c, struct ck_round *rd, int result, int stop)
{
	rd->asking = 0;
	/* Before DONE: what is still protected is lifted, and ckrun's
	 * userfaultfds (the last references) are closed. */
	ck_wp_stop(rd->wp, &rd->wpn);
	if (rd->wp && c->verbose && rd->wpn.split_lifts)
		fprintf(stderr, "ckrun: checkpoint %" PRIu64 ": %" PRIu64 " protected run(s) lifted in parts at the "
				"round's end (the job mapped memory inside them since the scan)\n",
			rd->seq, rd->wpn.split_lifts);
	rd->wp = NULL;
	if (rd->devfd >= 0)
		close(rd->devfd);
	rd->devfd = -1;
	ck_procs_boost(c, 0); /* (already, if released) */
	/* Processes the job stopped go back into their stop before any other
	 * runs again: no process of the job sees one out of it (stopped.c). */
	for (int pass = ck_stopped_any(c) ? 0 : 1; pass < 2; pass++)
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		if (pass == 0 && !p->round.hold)
			continue;
		/* The snapshot goes before DONE: the process reaps it. */
		if (!c->nofork && p->round.snap > 0 && p->round.snap != p->pid)
			kill(p->round.snap, SIGKILL);
		p->round.snap = 0;
		if (p->round.hold) /* the job had stopped it: back into its stop */
			ck_stopped_end(c, p, !stop && p->round.state != CK_JP_IDLE, result);
		else if (!stop && p->round.state != CK_JP_IDLE)
			ck_procs_send(p, CK_MSG_DONE, (uint64_t)(int64_t)result);
		/* What -v prints after the end (timings, why no write-protect
		 * snapshot) stays until the next round starts. */
		p->round.state = CK_JP_IDLE;
		p->round.wp = NULL;
		p->round.wp_pre = NULL;
		p->round.prearm = 0;
		if (p->round.wp_fd >= 0)
			close(p->round.wp_fd);
		p->round.wp_fd = -1;
	}
}

/* A process that died after the cut (killed from outside): the round
 * fails rather than save a job that no longer exists. */
static int ck__all_alive(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		if (ck_proc_gone(c->procs[i].pid)) {
			ck_err_set("process %d of the job exited during the checkpoint", c->procs[i].jpid);
			return -ESRCH;
		}
	}
	return 0;
}

static void ck__release(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++)
		ck_procs_send(&c->procs[i], CK_MSG_RELEASE, 0);
}

static int ck__round_once(struct ckrun *c, unsigned flags, uint64_t *seq_out, int try_wp);

/* After RELEASE this thread appends chunks to packs while the job runs:
 * at the writer threads' nice value, not the job's (the write-protect
 * handler keeps its own priority: the job's faults wait for it). */
static void ck__round_nice(struct ckrun *c, int on)
{
	static int saved = 0, lowered = 0;

	if (on && !lowered) {
		errno = 0;
		saved = getpriority(PRIO_PROCESS, (id_t)gettid());
		/* only where it can come back: without CAP_SYS_NICE a nice
		 * value goes down only as far as RLIMIT_NICE lets it (this
		 * thread would stay low for good, answering the job late) */
		if (errno || !ck_pace_may_nice(saved))
			return;
		ck_pace_thread(&c->pace, 1); /* the round's value now, then rising with it */
		lowered = 1;
	} else if (!on && lowered) {
		setpriority(PRIO_PROCESS, (id_t)gettid(), saved);
		lowered = 0;
	}
}

/* A write-protect snapshot the job broke (it unmapped or moved memory not
 * read yet, or exec'd) fails its round with -ESTALE; the round is then
 * repeated at once with a fork. A forked one that cannot see all memory
 * (wipe-on-fork) fails with -EXDEV and is repeated with the job stopped. */
static int ck__round_tries(struct ckrun *c, unsigned flags, uint64_t *seq_out);

/* A round, reported to the telemetry (metrics, events) once, whatever
 * tries it took. */
int ck_round(struct ckrun *c, unsigned flags, uint64_t *seq_out)
{
	uint64_t t0 = ck_now_ns(), cpu0 = ck_cpu_ns(), seq = c->last_seq + 1;
	int r = ck__round_tries(c, flags, seq_out);
	struct ck_tel_round tr = {.seq = seq, .ok = r == 0, .refused = r == -ENOTSUP, .stop = !!(flags & CK_ROUND_STOP)};

	if (!c->tel)
		return r;
	tr.seconds = (double)(ck_now_ns() - t0) / 1e9;
	tr.cpu_seconds = (double)(ck_cpu_ns() - cpu0) / 1e9;
	if (r == 0 && c->prev) {
		tr.seq = c->prev->seq;
		tr.nprocs = c->prev->nprocs;
		tr.logical_bytes = c->prev->logical_bytes;
		tr.stored_bytes = c->prev->stored_bytes;
		tr.frozen_seconds = (double)c->prev->frozen_ns / 1e9;
		tr.snapshot = c->round_snapshot;
	} else {
		tr.error = ck_err_msg();
	}
	ck_tel_round(c->tel, &tr);
	return r;
}

static int ck__round_tries(struct ckrun *c, unsigned flags, uint64_t *seq_out)
{
	int try_wp = !c->nofork && !c->snapshot_fork;
	int r;

	if (flags & CK_ROUND_STOP) {
		/* The last round of a stop: the job stays parked from the cut
		 * until it is killed. Released, it would run on while its memory
		 * is written and print again, after the resume, what it printed
		 * meanwhile. */
		int nofork = c->nofork;
		c->nofork = 1;
		r = ck__round_once(c, flags, seq_out, 0);
		c->nofork = nofork;
		return r;
	}
	r = ck__round_once(c, flags, seq_out, try_wp);

	if (r == -ENOLINK && c->prev) {
		/* Packs of the previous checkpoint are gone (deleted while the
		 * job ran): this round is written again, every chunk stored. */
		fprintf(stderr, "ckrun: %s; repeating the checkpoint without the previous one\n", ck_err_msg());
		ck_tel_fallback(c->tel, c->last_seq + 1, "full", ck_err_msg());
		ck_manifest_free(c->prev);
		c->prev = NULL;
		r = ck__round_once(c, flags, seq_out, try_wp);
	}

	if (r == -ESTALE && try_wp) {
		ck_tel_fallback(c->tel, c->last_seq + 1, "forked-snapshot", ck_err_msg());
		if (c->verbose)
			fprintf(stderr, "ckrun: %s; repeating the checkpoint with a forked snapshot\n", ck_err_msg());
		r = ck__round_once(c, flags, seq_out, 0);
	}
	if (r == -EXDEV && !c->nofork) {
		ck_tel_fallback(c->tel, c->last_seq + 1, "no-snapshot", ck_err_msg());
		if (c->verbose)
			fprintf(stderr, "ckrun: %s; repeating the checkpoint without a snapshot\n", ck_err_msg());
		c->nofork = 1;
		r = ck__round_once(c, flags, seq_out, 0);
		c->nofork = 0;
	}
	return r;
}

/* vm.unprivileged_userfaultfd: 1 lets a job without privileges call
 * userfaultfd(2) (0 or unreadable: it may not). */
static int ck__unprivileged_uffd(void)
{
	char v = '0';
	int fd = open("/proc/sys/vm/unprivileged_userfaultfd", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &v, 1) != 1)
			v = '0';
		close(fd);
	}
	return v == '1';
}

/* A thread under seccomp: strict mode cannot even answer (any system call
 * but read, write, exit and sigreturn kills it): refused. Filters cannot
 * be read back here (PTRACE_SECCOMP_GET_FILTER needs CAP_SYS_ADMIN), but
 * libckpt keeps a copy of each one the job installs: a thread under more
 * filters than ckrun has makes the request ask each process to check its
 * record against its threads (libckpt/seccomp.c). Filters the job
 * inherited from ckrun's own surroundings (a container runtime's profile:
 * podman, Kubernetes) are not the job's: ckrun runs under them too, and
 * the processes it restores inherit them again. Filters only stack, so a
 * thread with no more of them than ckrun has installed none of its own. */
struct ck__seccomp {
	int own_mode;      /* ckrun's Seccomp: */
	long own_filters;  /* ckrun's Seccomp_filters: (-1: the kernel does not say) */
	pid_t tid;         /* the first thread refused (strict), or under filters of the job's */
	int filtered;      /* a thread runs under filters ckrun does not */
};

static long ck__status_value(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen)) {
			v = atol(line + klen);
			break;
		}
	fclose(f);
	return v;
}

static int ck__seccomp_mode_of(pid_t tid, const char *val, void *arg)
{
	struct ck__seccomp *sc = arg;
	int mode = atoi(val);

	if (mode == 1) {
		sc->tid = tid;
		return 1;
	}
	if (mode == 2 && sc->own_mode != 2 && !sc->filtered) {
		sc->tid = tid;
		sc->filtered = 1;
	}
	return 0;
}

static int ck__seccomp_filters_of(pid_t tid, const char *val, void *arg)
{
	struct ck__seccomp *sc = arg;

	if (sc->own_filters >= 0 && atol(val) > sc->own_filters) {
		sc->tid = tid;
		sc->filtered = 1;
		return 1; /* one is enough */
	}
	return 0;
}

/* A process of the namespace without libckpt that will never have it (a
 * static program, an environment without libckpt): one that never
 * attached, or one that attached and exec'd since (its channel survives
 * the exec, so it is counted, but nobody answers on it). The first such
 * one, or 0. */
static pid_t ck__round_stray(struct ckrun *c, const char **why)
{
	pid_t *live = NULL, *zomb = NULL, found = 0;
	size_t nlive = 0, nz = 0;

	if (ck_procs_scan(c, &live, &nlive, &zomb, &nz) < 0)
		return 0; /* the cut lists them again */
	for (size_t i = 0; !found && i < nlive; i++) {
		struct ck_jproc *p = ck_procs_find(c, live[i]);
		if (p && p->stack0 && ck_proc_stack_start(p->pid) == p->stack0)
			continue; /* attached, and has not exec'd since */
		/* (a stack not known: whether libckpt is mapped says) */
		if ((*why = ck_proc_never_attaches(live[i])))
			found = live[i];
	}
	free(live);
	free(zomb);
	return found;
}

/* Such a process, while the job runs and before anything is asked: a
 * short-lived helper (a static tool the job runs) may end within the
 * grace the cut gives a process that has not attached (cut.c); one still
 * there is named, instead of the round waiting for its answer at the cut
 * with every other process parked (until the round's bound, for one that
 * attached and exec'd). */
static int ck__round_strays(struct ckrun *c)
{
	uint64_t t0 = ck_now_ns(), grace = ck_stray_grace_ns(c);
	const char *why = NULL;
	pid_t stray;

	while ((stray = ck__round_stray(c, &why))) {
		if (ck_now_ns() - t0 >= grace)
			return ck_proc_refuse_unattached(stray, why, "; the job keeps running");
		usleep(50000);
	}
	return 0;
}

/* check: whether the job can take part at all. A refusal here touches
 * nothing: no writer, no request. */
static int ck__round_check(struct ckrun *c, struct ck_round *rd)
{
	long own_filters;
	int r, own_mode;

	if (!c->nprocs) {
		ck_err_set("the job is not ready for checkpoints yet");
		return -EAGAIN;
	}
	/* A writer known to have lost the job's lock writes nothing more
	 * (the store is asked before the commit). */
	if ((r = ck_joblock_lost(c->lock)) < 0)
		return r;
	for (size_t i = 0; i < c->nprocs; i++) {
		pid_t tracer = 0;
		if (ck_job_traced(c->procs[i].pid, &tracer)) {
			ck_err_set("the job is traced (ptrace) by process %d: not supported; the job keeps running",
				   tracer);
			return -ENOTSUP;
		}
	}
	if ((r = ck__round_strays(c)) < 0)
		return r;
	own_mode = (int)ck__status_value("Seccomp:");
	own_filters = ck__status_value("Seccomp_filters:");
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck__seccomp sc = {own_mode, own_filters, 0, 0};
		int mode = ck_proc_each_task(c->procs[i].pid, "Seccomp:", ck__seccomp_mode_of, &sc) > 0 ? 1 : 0;
		if (!mode && !sc.filtered)
			ck_proc_each_task(c->procs[i].pid, "Seccomp_filters:", ck__seccomp_filters_of, &sc);
		if (!mode && sc.filtered) {
			if (own_filters >= 0) {
				/* the job's own filters: each process checks its record */
				rd->ckflags |= CK_CKPT_SECCOMP;
				rd->seccomp_base = (uint32_t)own_filters;
				continue;
			}
			mode = 2;
		}
		if (mode > 0) {
			ck_err_set("process %d of the job (thread %d here) is in seccomp %s mode: not supported (%s); "
				   "the job keeps running",
				   c->procs[i].jpid, sc.tid, mode == 1 ? "strict" : "filter",
				   mode == 1 ? "it cannot take part in a checkpoint"
					     : "this kernel does not count a thread's filters (Seccomp_filters:)");
			return -ENOTSUP;
		}
	}
	return 0;
}

/* begin: the writer, the boost, the write-protect snapshot's preparation. */
static int ck__round_begin(struct ckrun *c, struct ck_round *rd)
{
	struct ck_writer_opts wo = {.level = 1, .threads = 2, .pack_size = 0};
	const char *wt = getenv("CKPT_WRITER_THREADS");
	int r;

	if (wt && atoi(wt) > 0)
		wo.threads = (unsigned)atoi(wt);
	/* The writer first: opening it (threads, a store connection) is no
	 * business of the job's frozen time. Its threads take the round's
	 * nice value as they start (pace.c): at a lower priority than the job
	 * a checkpoint takes the CPU the job leaves idle rather than the
	 * job's own progress, rising if the round falls behind. */
	ck_pace_start(&c->pace, c->writer_nice, c->writer_pace_ms);
	wo.pace = ck_pace_thread;
	wo.pace_arg = &c->pace;
	if ((r = ck_writer_open(c->store, c->job, c->last_seq + 1, c->prev, &wo, &rd->w)) < 0)
		return r;
	/* Every task of the job, and this thread above them, runs boosted
	 * until RELEASE is sent (boost.c; as root, otherwise nothing changes). */
	ck_procs_boost(c, 1);
	memset(&rd->wpn, 0, sizeof(rd->wpn));
	rd->wp_none = 0;
	if (rd->try_wp) {
		/* Opened here, not by the job: a user's job runs in a user
		 * namespace, where userfaultfd(2) wants CAP_SYS_PTRACE over the
		 * initial one, or vm.unprivileged_userfaultfd=1. Without it the
		 * job tries userfaultfd(2) (root's job can), then forks. */
		errno = EACCES;
		if (!getenv("CKPT_TEST_NO_UFFD_DEV")) /* test knob: as if it were not ours to open */
			rd->devfd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		rd->wp_none = rd->devfd < 0 && c->userns && !ck__unprivileged_uffd() ? errno : 0;
		rd->try_wp = !rd->wp_none;
	}
	if (rd->try_wp) {
		rd->ckflags |= CK_CKPT_WP;
		/* Protect while the job runs; the cut then protects again only
		 * what was written meanwhile (CKPT_TEST_NO_PREARM: at the cut;
		 * so also as the kernel without PAGEMAP_SCAN, whose test knob
		 * would not reach libckpt's own check). */
		if (!getenv("CKPT_TEST_NO_PREARM") && !getenv("CKPT_TEST_NO_PAGEMAP_SCAN")) {
			const char *hold = getenv("CKPT_TEST_PREARM_HOLD_MS");
			rd->t_pre = ck_now_ns();
			if ((r = ck_prearm_all(c, rd)) < 0)
				return r;
			rd->t_pre = ck_now_ns() - rd->t_pre;
			/* Test knob: the job runs on, pre-armed, this long before the cut. */
			if (hold && atoi(hold) > 0)
				usleep((useconds_t)atoi(hold) * 1000);
		}
	}
	{
		/* Test knob: the round asks the job this late (as when opening
		 * a remote store's writer takes a while): a fault test can end
		 * the job in between. */
		const char *delay = getenv("CKPT_TEST_ASK_DELAY_MS");
		if (delay && atoi(delay) > 0)
			usleep((useconds_t)atoi(delay) * 1000);
	}
	return 0;
}

/* cut: every process parked with its snapshot, its descriptor read. */
static int ck__round_cut(struct ckrun *c, struct ck_round *rd)
{
	int r;

	rd->t_ask = ck_now_ns(); /* the job runs unparked until here */
	if ((r = ck_cut_ask(c, rd)) < 0)
		return r;
	if (!c->nprocs) { /* every process exited while asked: the job is ending */
		ck_err_set("the job ended during the checkpoint");
		return -ESRCH;
	}
	rd->t_parked = rd->ph.last = ck_now_ns();
	/* the job's clocks at the cut: where a restore lets them go on */
	rd->has_clocks = ck_timens_job_clocks(c->procs[0].pid, &rd->clk_mono, &rd->clk_boot) == 0;
	/* and the last pid its namespace gave (a restore goes on after it;
	 * without it, it would start again at the namespace's start) */
	rd->has_last_pid = ck_lastpid_read(c, &rd->last_pid) == 0;
	if (!rd->has_last_pid && c->verbose)
		fprintf(stderr, "ckrun: warning: %s: a restore of this checkpoint gives new processes the lowest "
				"free numbers\n",
			ck_err_msg());
	/* The job's main process first: a restore starts the tree from it, and
	 * its end is the job's end. */
	for (size_t i = 1; i < c->nprocs; i++)
		if (c->procs[i].jpid == c->root_jpid) {
			struct ck_jproc t = c->procs[0];
			c->procs[0] = c->procs[i];
			c->procs[i] = t;
		}
	{
		/* Test knob: hold the parked job this long, so a fault test can
		 * kill one of its processes in the middle of a round. */
		const char *hold = getenv("CKPT_TEST_HOLD_MS");
		if (hold && atoi(hold) > 0) {
			fprintf(stderr, "ckrun: test: holding the parked job for %d ms\n", atoi(hold));
			usleep((useconds_t)atoi(hold) * 1000);
		}
	}
	if ((r = ck_cut_descriptors(c)) < 0)
		return r;
	ck_round_phase(&rd->ph, "descriptors");
	return 0;
}

/* record: with every process parked, what crosses processes. */
static int ck__round_record(struct ckrun *c, struct ck_round *rd)
{
	struct ck_manifest *m;
	int r;

	if ((r = ck_procs_scan(c, &rd->live, &rd->nlive, &rd->zomb, &rd->nz)) < 0)
		return r;
	m = rd->m = calloc(1, sizeof(*m));
	if (!m || !(m->procs = calloc(c->nprocs, sizeof(*m->procs))))
		return -ENOMEM;
	if ((r = ck_tree_record(c, m, rd->zomb, rd->nz)) < 0)
		return r;
	m->version = CK_MANIFEST_VERSION;
	m->seq = c->last_seq + 1;
	m->job = strdup(c->job);
	m->cwd = strdup(c->procs[0].pd->cwd);
	for (m->argc = 0; c->argv[m->argc]; m->argc++)
		;
	m->argv = calloc(m->argc + 1, sizeof(char *));
	for (size_t i = 0; m->argv && i < m->argc; i++)
		m->argv[i] = strdup(c->argv[i]);
	ck_round_phase(&rd->ph, "tree");
	/* (after the record: it marks the descriptions processes share) */
	if ((r = ck_fds_record(c, rd, rd->w)) < 0 || (r = ck_fds_restore_fits(c, 0)) < 0)
		return r;
	ck_round_phase(&rd->ph, "pipes");
	{
		/* the plugins' ckrun halves, while all are parked */
		struct ck_procdesc **pds = calloc(c->nprocs, sizeof(*pds));
		pid_t *pids = calloc(c->nprocs, sizeof(*pids));
		for (size_t i = 0; pds && pids && i < c->nprocs; i++) {
			pds[i] = c->procs[i].pd;
			pids[i] = c->procs[i].pid;
		}
		r = pds && pids ? ck_agent_plugins_checkpoint(pds, pids, c->nprocs, rd->w, m) : -ENOMEM;
		free(pds);
		free(pids);
		if (r < 0 || (r = ck_tree_makers(c, m)) < 0)
			return r;
	}
	ck_round_phase(&rd->ph, ck_agent_plugins_phase());
	if ((r = ck_sysv_save(c, rd->w, m)) < 0)
		return r;
	ck_round_phase(&rd->ph, "System V");
	/* The main process first: restore starts the tree from it. */
	for (size_t i = 0; i < c->nprocs; i++) {
		rd->held |= c->procs[i].round.held;
		rd->any_wp |= c->procs[i].round.wp != NULL;
	}
	m->nprocs = c->nprocs;
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *jp = &c->procs[i];
		struct ck_proc *p = &m->procs[i];
		jp->round.mp = p;
		p->pid = jp->pd->pid;
		p->ppid = jp->pd->ppid;
		p->exe = strdup(jp->pd->exe);
		p->restart_entry = jp->pd->restart_entry;
		p->restart_arg = jp->pd->restart_arg;
		p->restart_stack = jp->pd->restart_stack;
	}
	if ((r = ck__all_alive(c)) < 0)
		return r;
	ck_round_phase(&rd->ph, "liveness");
	return 0;
}

/* The job runs on from here while its snapshots are read. */
static void ck__round_release(struct ckrun *c, struct ck_round *rd)
{
	/* A process the job stopped is out of its stop, held by ckrun, until
	 * the round ends: the others stay parked as long, so that none sees it
	 * (its state in /proc) or is seen by it. */
	if (ck_stopped_any(c))
		return;
	ck__release(c);
	rd->t_rel = ck_now_ns();
	ck_procs_boost(c, 0); /* after: we ran first until everyone was told */
	ck__round_nice(c, 1);
	ck_round_phase(&rd->ph, "release");
}

/* save: memory and descriptor contents, in two passes around RELEASE
 * (memory.c says which region is read in which pass). */
/* The mapped files' digests (read once per file, 0.5 s for the 550 MB a
 * PyTorch process maps) on a thread of their own while the memory is
 * written, so that they cost the round no time where a core is free. They
 * are optional (without one a restore checks the file's identity): a stop
 * round, whose grace is short, and a round without a snapshot, which keeps
 * the job frozen to its end, only take them from the previous checkpoint,
 * and a failing round stops the reading. */
static void *ck__digests_thread(void *arg)
{
	struct ck_round *rd = arg;
	uint64_t t = ck_now_ns();

	rd->fp_rc = ck_fp_digests(rd->m, rd->fp_prev, 0, &rd->fp_cancel, &rd->fp_bytes);
	rd->fp_ns = ck_now_ns() - t;
	return NULL;
}

static void ck__digests_start(struct ckrun *c, struct ck_round *rd)
{
	rd->fp_prev = c->prev; /* replaced only after the commit, the thread joined */
	if ((rd->flags & CK_ROUND_STOP) || c->nofork)
		return;
	rd->fp_started = pthread_create(&rd->fp_th, NULL, ck__digests_thread, rd) == 0;
}

/* Joins the digests' thread; its result, or (where it did not start) the
 * digests taken here: from the previous checkpoint only, for the rounds
 * above. */
static int ck__digests_join(struct ckrun *c, struct ck_round *rd)
{
	if (!rd->fp_started) {
		uint64_t t = ck_now_ns();
		rd->fp_rc = ck_fp_digests(rd->m, c->prev, (rd->flags & CK_ROUND_STOP) || c->nofork, NULL,
					  &rd->fp_bytes);
		rd->fp_ns = ck_now_ns() - t;
	} else if (rd->fp_started > 0) {
		pthread_join(rd->fp_th, NULL);
	}
	rd->fp_started = -1;
	if (rd->fp_rc < 0) /* (the thread's ck_err is its own) */
		ck_err_set("out of memory while taking the mapped files' digests");
	return rd->fp_rc;
}

/* A forked child shares most pages with its parent: the parent's chunks
 * are kept as bases, the child's stored as the pages that differ (the
 * parent is written first: processes are in the order they joined). Only
 * a child that has not run exec since (its stack where its parent's is):
 * another program's pages would cost their digests for nothing. */
static void ck__round_wadd(struct ckrun *c)
{
	uint64_t *stk = calloc(c->nprocs + 1, sizeof(*stk));

	for (size_t i = 0; i < c->nprocs; i++) {
		c->procs[i].round.wadd = 0;
		if (stk)
			stk[i] = ck_proc_stack_start(c->procs[i].pid);
	}
	for (size_t i = 0; stk && i < c->nprocs; i++)
		for (size_t j = 0; stk[i] && j < c->nprocs; j++)
			if (i != j && c->procs[j].pd->ppid == c->procs[i].jpid && stk[j] == stk[i]) {
				c->procs[i].round.wadd |= CK_WADD_BASE;
				c->procs[j].round.wadd |= CK_WADD_DELTA;
			}
	free(stk); /* (none: nothing stored as a delta this round) */
}

static int ck__u64pair_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Each parent's delta children's private mappings (known once the first
 * pass has listed every process's), merged: where its bases are kept. */
static void ck__round_kids(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		size_t n = 0, k = 0;

		free(p->round.kids);
		p->round.kids = NULL;
		p->round.nkids = 0;
		if (!(p->round.wadd & CK_WADD_BASE))
			continue;
		for (size_t j = 0; j < c->nprocs; j++)
			if ((c->procs[j].round.wadd & CK_WADD_DELTA) && c->procs[j].pd->ppid == p->jpid)
				n += c->procs[j].round.mp->nregions;
		if (!n || !(p->round.kids = malloc(2 * n * sizeof(uint64_t))))
			continue; /* (none: its chunks are stored whole, as without deltas) */
		for (size_t j = 0; j < c->nprocs; j++) {
			const struct ck_proc *q = c->procs[j].round.mp;
			if (!(c->procs[j].round.wadd & CK_WADD_DELTA) || c->procs[j].pd->ppid != p->jpid)
				continue;
			for (size_t g = 0; g < q->nregions; g++)
				if (!(q->regions[g].flags & (CK_REG_SHARED | CK_REG_NODATA))) {
					p->round.kids[2 * k] = q->regions[g].start;
					p->round.kids[2 * k++ + 1] = q->regions[g].end;
				}
		}
		qsort(p->round.kids, k, 2 * sizeof(uint64_t), ck__u64pair_cmp);
		for (size_t g = 0; g < k; g++) { /* merge overlapping and touching ones */
			if (p->round.nkids && p->round.kids[2 * g] <= p->round.kids[2 * p->round.nkids - 1]) {
				if (p->round.kids[2 * g + 1] > p->round.kids[2 * p->round.nkids - 1])
					p->round.kids[2 * p->round.nkids - 1] = p->round.kids[2 * g + 1];
				continue;
			}
			p->round.kids[2 * p->round.nkids] = p->round.kids[2 * g];
			p->round.kids[2 * p->round.nkids + 1] = p->round.kids[2 * g + 1];
			p->round.nkids++;
		}
	}
}

static void ck__round_kids_free(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		free(c->procs[i].round.kids);
		c->procs[i].round.kids = NULL;
		c->procs[i].round.nkids = 0;
	}
}

/* A stopped process whose parent is held too is recorded by that parent
 * from the list in ckrun's request (cut.c); a libckpt that does not take
 * it (restored from an image an older ckrun wrote) recorded nothing, and
 * a restore would report the child's stop to it again. */
static int ck__round_heldkids(const struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		char buf[64];
		const char *pp;
		if (!c->procs[i].round.hold)
			continue;
		pp = ck_proc_stat_field(c->procs[i].pid, 4, buf, sizeof(buf));
		for (size_t k = 0; pp && k < c->nprocs; k++) {
			const struct ck_jproc *q = &c->procs[k];
			if (q->pid != (pid_t)atoi(pp) || !q->round.hold || !q->pd || (q->pd->pflags & CK_PD_P_HELDKIDS))
				continue;
			ck_err_set("process %d of the job and its parent, process %d, are both stopped, and the parent runs "
				   "the libckpt of an image an older ckrun wrote, which cannot record that child: not "
				   "supported (try again once one of them runs); the job keeps running",
				   c->procs[i].jpid, q->jpid);
			return -ENOTSUP;
		}
	}
	return 0;
}

static int ck__round_save(struct ckrun *c, struct ck_round *rd)
{
	struct ck_manifest *m = rd->m;
	int r = 0;

	if ((r = ck__round_heldkids(c)) < 0)
		return r;

	if (!c->nofork && !rd->held && !rd->any_wp)
		ck__round_release(c, rd);
	ck__round_wadd(c);
	for (size_t i = 0; i < c->nprocs && r == 0; i++) {
		struct ck_jproc *jp = &c->procs[i];
		r = ck_mem_save_regions(rd, rd->w, jp, m, rd->flags, 0);
		if (r == 0)
			r = ck_fds_save_data(rd->w, jp->round.snap, jp->pd, rd->flags);
	}
	if (r == 0) /* each process's maps are read: with its shared memory objects */
		r = ck_fds_restore_fits(c, 1);
	if (r < 0)
		return r;
	if (!c->nofork && (rd->held || rd->any_wp)) {
		ck_round_phase(&rd->ph, rd->any_wp ? "unprotected memory" : "shared memory, deleted files");
		ck__round_release(c, rd);
	}
	ck__digests_start(c, rd);
	if ((r = ck_stash_write(rd->stash, rd->w, m)) < 0)
		return r;
	ck__round_kids(c);
	for (size_t i = 0; i < c->nprocs && r == 0; i++) {
		struct ck_jproc *jp = &c->procs[i];
		r = ck_mem_save_regions(rd, rd->w, jp, m, rd->flags, 1);
		if (r == 0 && jp->round.snap == jp->pid)
			r = ck_mem_advice(jp);
		/* the job had stopped it: a restore stops it again, by the
		 * same signal (stopped.c) */
		jp->pd->pflags &= ~(CK_PD_P_STOPPED | CK_PD_P_STOPSIG_MASK);
		if (jp->round.hold && !ck_stopped_continued(jp)) {
			int sig = ck_stopped_sig(jp);
			jp->pd->pflags |= CK_PD_P_STOPPED;
			if (sig != SIGSTOP)
				jp->pd->pflags |= (uint32_t)sig << CK_PD_P_STOPSIG_SHIFT;
		}
		if (r == 0)
			r = ck_desc_pack(jp->pd, &jp->round.mp->desc, &jp->round.mp->desc_len);
		for (uint32_t k = 0; r == 0 && k < jp->pd->nfds; k++)
			if (jp->pd->fds[k].kind == CK_FD_PLUGIN) {
				char what[64];
				snprintf(what, sizeof(what), "descriptor %d", jp->pd->fds[k].fd);
				ck_skip_add(m, jp->pd->pid, what, "owned by a plugin, rebuilt at restart");
			}
	}
	ck__round_kids_free(c);
	for (size_t i = 0; i < c->nprocs && r == 0; i++)
		if (c->procs[i].round.wp)
			r = ck_mem_wp_verify(&c->procs[i]);
	if (r == 0)
		r = ck_wp_check(rd->wp);
	return r;
}

/* commit: the last pack flushed, the lock and the packs checked, the
 * manifest written. */
static int ck__round_commit(struct ckrun *c, struct ck_round *rd)
{
	struct ck_manifest *m = rd->m;
	int r;

	if ((r = ck__digests_join(c, rd)) < 0)
		return r; /* the caller aborts the writer */
	if (rd->fp_bytes && c->verbose)
		fprintf(stderr, "ckrun: content digests of mapped files: %.1f MB read in %.2f s\n",
			(double)rd->fp_bytes / 1e6, (double)rd->fp_ns / 1e9);
	r = ck_writer_finish(rd->w, m);
	rd->w = NULL;
	if (r < 0)
		return r;
	m->time_ns = ck_wall_ns();
	m->duration_ns = ck_now_ns() - rd->t0;
	/* from the request to suspend (the first process to park cannot park
	 * earlier) to the release of all */
	m->frozen_ns = (c->nofork || !rd->t_rel ? ck_now_ns() : rd->t_rel) - rd->t_ask;
	m->has_clocks = rd->has_clocks;
	m->mono_ns = rd->clk_mono;
	m->boot_ns = rd->clk_boot;
	m->has_lineage = 1;
	memcpy(m->lineage, c->lineage, sizeof(m->lineage));
	m->has_last_pid = rd->has_last_pid;
	m->last_pid = rd->last_pid;
	/* Still the job's only writer, and every pack this checkpoint names
	 * still there (ckpt rm --force may have removed the previous one's
	 * under us: then ck_round writes the round again without it). */
	if ((r = ck_joblock_check(c->lock)) < 0) {
		ck_err_wrap("nothing committed");
		return r;
	}
	if ((r = ck_manifest_check_packs(c->store, m)) < 0) {
		if (r == -ENOENT || r == -EBADMSG)
			r = -ENOLINK;
		return r;
	}
	/* a stop's round: its grace may have run out while it was written */
	if ((rd->flags & CK_ROUND_STOP) && (r = ck_grace_check()) < 0)
		return r;
	return ck_manifest_commit(c->store, m);
}

/* After the commit: the job resumes, the manifest becomes the previous
 * one, retention. */
static void ck__round_done(struct ckrun *c, struct ck_round *rd)
{
	size_t npre = 0;

	for (size_t i = 0; i < c->nprocs; i++)
		npre += c->procs[i].round.wp && c->procs[i].round.wp == c->procs[i].round.wp_pre;
	ck__end_round(c, rd, 0, rd->flags & CK_ROUND_STOP);
	c->round_snapshot = rd->any_wp ? "write-protect" : !c->nofork ? "fork" : "none";
	if (c->verbose)
		ck_round_print_commit(c, rd, npre);
	c->last_seq = rd->m->seq;
	ck_manifest_free(c->prev);
	c->prev = rd->m;
	rd->m = NULL;
	{
		/* No round is in flight: ours just committed, and the lock keeps
		 * others out. */
		struct ck_retain_opts ro = {.flags = CK_RETAIN_OWNER};
		struct ck_retain_report rep;

		if (ck_store_retain_ex(c->store, c->job, c->keep, &ro, &rep) < 0) {
			fprintf(stderr, "ckrun: warning: retention: %s\n", ck_err_msg());
		} else {
			if (rep.ndamaged)
				fprintf(stderr,
					"ckrun: warning: retention: checkpoint %" PRIu64 " of job %s is damaged, kept and "
					"not counted (%s)\n",
					rep.damaged[0], c->job, rep.damaged_why);
			if (rep.packs_held)
				fprintf(stderr, "ckrun: warning: retention: packs not collected: %s\n", ck_err_msg());
		}
		ck_retain_report_free(&rep);
	}
}

static int ck__round_once(struct ckrun *c, unsigned flags, uint64_t *seq_out, int try_wp)
{
	struct ck_round rd = {.flags = flags, .try_wp = try_wp, .ckflags = c->nofork ? CK_CKPT_NOFORK : 0, .devfd = -1};
	int r;

	rd.t0 = ck_now_ns();
	rd.cpu0 = ck_cpu_ns();
	rd.req0 = ck_s3_request_count ? ck_s3_request_count() : 0;
	if ((r = ck__round_check(c, &rd)) < 0)
		return r;
	for (size_t i = 0; i < c->nprocs; i++)
		ck_jproc_round_clear(&c->procs[i]);
	c->round = &rd;
	if ((r = ck__round_begin(c, &rd)) < 0 || (r = ck__round_cut(c, &rd)) < 0 ||
	    (r = ck__round_record(c, &rd)) < 0 || (r = ck__round_save(c, &rd)) < 0 ||
	    (r = ck__round_commit(c, &rd)) < 0)
		goto fail;
	ck__round_done(c, &rd);
	*seq_out = c->last_seq;
	r = 0;
	goto out;
fail:
	if (rd.fp_started > 0) {
		__atomic_store_n(&rd.fp_cancel, 1, __ATOMIC_RELAXED);
		pthread_join(rd.fp_th, NULL);
	}
	if (rd.w)
		ck_writer_abort(rd.w);
	ck__end_round(c, &rd, r, 0);
	if (r == -ENOTSUP && !(flags & CK_ROUND_STOP) && !strstr(ck_err_msg(), "keeps running")) {
		/* a refusal: say that nothing happened to the job (a stop's
		 * caller says what happens instead) */
		char why[1024];
		snprintf(why, sizeof(why), "%s", ck_err_msg());
		ck_err_set("%s; the job keeps running", why);
	}
	ck_manifest_free(rd.m);
out:
	c->round = NULL;
	ck__round_nice(c, 0);
	free(rd.live);
	free(rd.zomb);
	free(rd.shared);
	free(rd.pipes);
	ck_stash_free(rd.stash);
	return r;
}
