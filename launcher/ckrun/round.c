/* A checkpoint round, agent side, for every process of the job at once:
 *
 *   ask    every process parks its threads (SUSPENDED); processes born
 *          meanwhile are asked too; every live process of the namespace
 *          must be one of ours;
 *   take   every process records its state and forks its snapshot;
 *   drain  the unread bytes of every pipe, once per pipe;
 *   read   what a snapshot does not freeze (shared memory, file contents),
 *          then RELEASE: the job runs on while the snapshots are read;
 *   commit the manifest; DONE to every process; retention.
 *
 * Any failure (a process that refuses, dies, or does not answer) ends the
 * round for all: each process resumes, and the previous checkpoint stays
 * the newest. */
#include <dirent.h>
#include <stddef.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/image/chunkio.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/chunk.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/agent_plugin.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/wpread.h"
#include "ckrun/proto.h"

/* A tracer outside the job's namespace shows as TracerPid 0 inside it:
 * look from here. */
static int ck__tracer_of(pid_t tid, const char *val, void *arg)
{
	(void)tid;
	(void)arg;
	return atoi(val);
}

static int ck__job_traced(pid_t pid, pid_t *tracer)
{
	*tracer = (pid_t)ck_proc_each_task(pid, "TracerPid:", ck__tracer_of, NULL);
	return *tracer > 0;
}

static const char *ck__comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	buf[0] = 0;
	if ((f = fopen(path, "re"))) {
		if (fgets(buf, (int)len, f))
			buf[strcspn(buf, "\n")] = 0;
		fclose(f);
	}
	return buf;
}

/* Ask: every process of the job parks its threads, records its state and
 * takes its snapshot, each as soon as it can (a parked process's own state
 * cannot change). Returns 0 when every attached process has a snapshot and
 * the namespace holds no other live process: the consistent cut. Nothing
 * that crosses processes (pipes, sockets, shared memory) is read before. */
static int ck__ask_all(struct ckrun *c, unsigned ckflags)
{
	uint64_t start = ck_now_ns(), unknown_since = 0;

	c->round_asking = 1;
	c->round_ckflags = ckflags;
	c->round_seq = c->last_seq + 1;
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		int fd = c->round_devfd;
		struct ck_msg m;
		memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
		m.type = CK_MSG_CHECKPOINT;
		m.arg[0] = ckflags;
		m.arg[1] = c->round_seq;
		if (p->prearm == 2 && p->wp_pre) { /* its own userfaultfd instead */
			m.arg[0] |= CK_CKPT_PREARMED;
			fd = ck_wp_fd(p->wp_pre);
		}
		p->state = ck_chan_send(p->fd, &m, fd >= 0 ? &fd : NULL, fd >= 0) == 0 ? CK_JP_ASKED : CK_JP_IDLE;
		p->snap = 0;
	}
	for (;;) {
		struct ck_jproc *from;
		struct ck_msg m;
		pid_t sender, *live = NULL, *zomb = NULL;
		size_t nlive = 0, nz = 0, waiting = 0;
		int r = ck_procs_wait(c, NULL, 0, 100, &m, &from, &sender);

		if (r < 0) {
			ck_err_set("waiting for the job's processes: %s", strerror(-r));
			return r;
		}
		if (r == 1 && !from && m.type == CK_MSG_GONE) {
			/* Exiting: its channel may close before its other
			 * descriptors are released (the kernel releases them in
			 * no set order). Wait until it is a zombie, or a socket
			 * whose peer it was still looks connected to a live peer
			 * and comes back reset instead of at its EOF. */
			pid_t gone = (pid_t)m.arg[0];
			for (int k = 0; k < 2000 && !ck_proc_gone(gone); k++)
				usleep(1000);
		}
		if (r == 1 && from && (m.type == CK_MSG_WP_FREEZE || m.type == CK_MSG_WP_THAW)) {
			/* a pre-armed process at its cut (libckpt/wpprearm.c) */
			int ok = from->prearm == 2 && from->wp_pre && from->state == CK_JP_ASKED;
			if (ok)
				ck_wp_freeze(from->wp_pre, m.type == CK_MSG_WP_FREEZE);
			if (m.type == CK_MSG_WP_FREEZE)
				ck_procs_send(from, CK_MSG_WP_FROZEN, ok ? 0 : (uint64_t)(int64_t)-ENOENT);
			continue;
		}
		if (r == 1 && from && m.type == CK_MSG_FAILED) {
			ck_err_set("process %d: %s", from->jpid, m.text);
			return -ENOTSUP;
		}
		if (r == 1 && from && m.type == CK_MSG_SNAPSHOT && m.arg[3] != c->round_seq) {
			if (sender != from->pid) /* a forked one; a write-protect one lifted already */
				kill(sender, SIGKILL); /* of a round that ended without it */
			continue;
		}
		if (r == 1 && from && m.type == CK_MSG_SNAPSHOT && from->state != CK_JP_SNAPSHOT) {
			if (m.arg[1] != sizeof(struct ck_procdesc)) {
				ck_err_set("libckpt and ckrun disagree on the process descriptor (%" PRIu64
					   " vs %zu bytes): mixed versions?", m.arg[1], sizeof(struct ck_procdesc));
				return -EPROTO;
			}
			from->state = CK_JP_SNAPSHOT;
			from->snap = c->nofork ? from->pid : sender;
			from->wp_errno = 0;
			if (from->wp_fd < 0 && m.len == sizeof(int32_t)) {
				int32_t e;
				memcpy(&e, m.text, sizeof(e));
				from->wp_errno = e;
			}
			if (from->wp_fd < 0 && m.len == sizeof(struct ck_wp_info)) {
				/* pre-armed: ckrun has the descriptor; its cut now */
				struct ck_wp_info wi;
				if (!from->wp_pre || from->prearm != 2 || sender != from->pid) {
					ck_err_set("process %d: a write-protect snapshot without its descriptor", from->jpid);
					return -EPROTO;
				}
				memcpy(&wi, m.text, sizeof(wi));
				from->snap = from->pid;
				if ((r = ck_wp_activate(from->wp_pre, &wi)) < 0) {
					ck_err_wrap("process %d: write-protect snapshot", from->jpid);
					return -ESTALE; /* the round is repeated with a fork */
				}
				from->wp = from->wp_pre;
			} else if (from->wp_pre && from->wp_fd < 0) {
				ck_wp_freeze(from->wp_pre, 0); /* it forked after all: lift its writes again */
			}
			if (from->wp_fd >= 0) {
				struct ck_wp_info wi;
				int fd = from->wp_fd;

				from->wp_fd = -1;
				from->snap = from->pid;
				if (m.len != sizeof(wi)) {
					close(fd);
					ck_err_set("process %d: a write-protect snapshot without its ranges", from->jpid);
					return -EPROTO;
				}
				memcpy(&wi, m.text, sizeof(wi));
				if ((r = ck_wp_add(&c->wp, c->wp_aside_max, from->pid, from->jpid, fd, &wi, &from->wp)) < 0) {
					ck_err_wrap("process %d: write-protect snapshot", from->jpid);
					return -ESTALE; /* the round is repeated with a fork */
				}
			}
			from->pd_addr = m.arg[0];
			from->held = m.arg[2] != 0;
			from->t_snap = ck_now_ns();
			from->us_park = (uint32_t)m.arg[4];
			from->us_record = (uint32_t)(m.arg[4] >> 32);
			from->us_fork = (uint32_t)m.arg[5];
		}
		for (size_t i = 0; i < c->nprocs; i++)
			waiting += c->procs[i].state != CK_JP_SNAPSHOT;
		if (ck_now_ns() - start > 60000000000ull) {
			ck_err_set("%zu process(es) of the job did not take their snapshot within 60 s", waiting);
			return -ETIMEDOUT;
		}
		if (waiting) {
			/* A process that exited before answering: its channel may
			 * still be open in a child that has not attached yet. A
			 * stopped one (SIGSTOP, a debugger) never answers. */
			for (size_t i = 0; i < c->nprocs; i++) {
				int st = ck_proc_state(c->procs[i].pid);
				if (c->procs[i].state == CK_JP_SNAPSHOT)
					continue;
				if (!st) {
					ck_procs_drop(c, &c->procs[i]);
					break;
				}
				if ((st == 'T' || st == 't') && ck_now_ns() - start > 200000000ull) {
					ck_err_set("process %d of the job is stopped (SIGSTOP or a debugger): it cannot "
						   "take part in a checkpoint", c->procs[i].jpid);
					return -ENOTSUP;
				}
			}
			continue;
		}
		if ((r = ck_procs_scan(c, &live, &nlive, &zomb, &nz)) < 0)
			return r;
		{
			pid_t stray = 0;
			for (size_t i = 0; i < nlive && !stray; i++)
				if (!ck_procs_find(c, live[i]))
					stray = live[i];
			free(live);
			free(zomb);
			if (!stray)
				break;
			/* Born just now, attaching, or running without libckpt. */
			if (!unknown_since)
				unknown_since = ck_now_ns();
			if (ck_now_ns() - unknown_since > 3000000000ull) {
				char comm[64];
				int32_t jp = 0, pg, sd;
				ck_proc_ids(stray, &jp, &pg, &sd, NULL);
				ck_err_set("process %d (%s) of the job runs without libckpt (a static program, or "
					   "LD_PRELOAD or its channel removed): not supported",
					   jp, ck__comm(stray, comm, sizeof(comm)));
				return -ENOTSUP;
			}
		}
	}
	c->round_asking = 0;
	return 0;
}

/* Every process's descriptor, from its snapshot. */
static int ck__read_descriptors(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		int r;
		/* kept from round to round: its pages are already there */
		if (!p->pd && !(p->pd = malloc(sizeof(*p->pd))))
			return -ENOMEM;
		/* the header, then only the used threads, descriptors and epoll
		 * items: a full descriptor is megabytes, most of it empty */
		if ((r = ck_mem_read(p->snap, p->pd_addr, p->pd, CK_PD_HDR_SIZE)) < 0 ||
		    p->pd->nthreads > CK_PD_MAX_THREADS || p->pd->nfds > CK_PD_MAX_FDS ||
		    p->pd->nepitems > CK_PD_MAX_EPITEMS ||
		    (r = ck_mem_read(p->snap, p->pd_addr + offsetof(struct ck_procdesc, threads), p->pd->threads,
				     p->pd->nthreads * sizeof(p->pd->threads[0]))) < 0 ||
		    (r = ck_mem_read(p->snap, p->pd_addr + offsetof(struct ck_procdesc, fds), p->pd->fds,
				     p->pd->nfds * sizeof(p->pd->fds[0]))) < 0 ||
		    (r = ck_mem_read(p->snap, p->pd_addr + offsetof(struct ck_procdesc, epitems), p->pd->epitems,
				     p->pd->nepitems * sizeof(p->pd->epitems[0]))) < 0) {
			if (ck_proc_gone(p->pid)) { /* read from the process itself (no fork) */
				ck_err_set("process %d of the job exited during the checkpoint", p->jpid);
				return -ESRCH;
			}
			ck_err_wrap("process %d: its descriptor", p->jpid);
			return r < 0 ? r : -EPROTO;
		}
		ck_stdio_mark(c, p->pd);
	}
	return 0;
}

static void ck__end_round(struct ckrun *c, int result, int stop)
{
	c->round_asking = 0;
	/* Before DONE: what is still protected is lifted, and ckrun's
	 * userfaultfds (the last references) are closed. */
	ck_wp_stop(c->wp, &c->wpn);
	c->wp = NULL;
	if (c->round_devfd >= 0)
		close(c->round_devfd);
	c->round_devfd = -1;
	ck_procs_boost(c, 0); /* (already, if released) */
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		/* The snapshot goes before DONE: the process reaps it. */
		if (!c->nofork && p->snap > 0 && p->snap != p->pid)
			kill(p->snap, SIGKILL);
		p->snap = 0;
		if (!stop && p->state != CK_JP_IDLE)
			ck_procs_send(p, CK_MSG_DONE, (uint64_t)(int64_t)result);
		p->state = CK_JP_IDLE;
		p->wp = NULL;
		p->wp_pre = NULL;
		p->prearm = 0;
		if (p->wp_fd >= 0)
			close(p->wp_fd);
		p->wp_fd = -1;
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

/* Phases of a round after every process parked, for -v -v. */
struct ck__phases {
	uint64_t last;
	size_t n;
	struct {
		const char *name;
		uint64_t ns;
	} v[12];
};

static void ck__phase(struct ck__phases *ph, const char *name)
{
	uint64_t now = ck_now_ns();

	if (ph->n < sizeof(ph->v) / sizeof(ph->v[0]))
		ph->v[ph->n++] = (typeof(ph->v[0])){name, now - ph->last};
	ph->last = now;
}

static int ck__cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* -v -v: how the frozen time was spent. Per process (the slowest to
 * announce its snapshot): waiting for its manager to run, parking its
 * threads, recording its state, forking; then ckrun's own phases. */
static void ck__print_phases(const struct ckrun *c, uint64_t seq, uint64_t t_ask, const struct ck__phases *ph)
{
	uint64_t *at = calloc(c->nprocs ? c->nprocs : 1, sizeof(*at));
	const struct ck_jproc *slow = NULL;
	char line[1024];
	int o;

	if (!at)
		return;
	for (size_t i = 0; i < c->nprocs; i++) {
		at[i] = c->procs[i].t_snap - t_ask;
		if (!slow || c->procs[i].t_snap > slow->t_snap)
			slow = &c->procs[i];
	}
	qsort(at, c->nprocs, sizeof(*at), ck__cmp_u64);
	if (slow) {
		uint64_t own = (uint64_t)slow->us_park + slow->us_record + slow->us_fork;
		uint64_t total = (slow->t_snap - t_ask) / 1000;
		fprintf(stderr,
			"ckrun: checkpoint %" PRIu64 " phases: snapshots announced after %.1f (first), %.1f (median), "
			"%.1f ms (last: process %d: %.1f ms to be scheduled and told, %.1f to park, %.1f to record, "
			"%.1f to fork or write-protect)\n",
			seq, (double)at[0] / 1e6, (double)at[c->nprocs / 2] / 1e6, (double)at[c->nprocs - 1] / 1e6,
			slow->jpid, total > own ? (double)(total - own) / 1e3 : 0.0, slow->us_park / 1e3,
			slow->us_record / 1e3, slow->us_fork / 1e3);
	}
	o = snprintf(line, sizeof(line), "ckrun: checkpoint %" PRIu64 " phases after all parked:", seq);
	for (size_t i = 0; i < ph->n && o > 0 && (size_t)o < sizeof(line); i++)
		o += snprintf(line + o, sizeof(line) - (size_t)o, "%s %s %.1f ms", i ? "," : "", ph->v[i].name,
			      (double)ph->v[i].ns / 1e6);
	fprintf(stderr, "%s\n", line);
	free(at);
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
		saved = getpriority(PRIO_PROCESS, (id_t)gettid());
		setpriority(PRIO_PROCESS, (id_t)gettid(), c->writer_nice);
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
int ck_round(struct ckrun *c, unsigned flags, uint64_t *seq_out)
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
		ck_manifest_free(c->prev);
		c->prev = NULL;
		r = ck__round_once(c, flags, seq_out, try_wp);
	}

	if (r == -ESTALE && try_wp) {
		if (c->verbose)
			fprintf(stderr, "ckrun: %s; repeating the checkpoint with a forked snapshot\n", ck_err_msg());
		r = ck__round_once(c, flags, seq_out, 0);
	}
	if (r == -EXDEV && !c->nofork) {
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

static int ck__round_once(struct ckrun *c, unsigned flags, uint64_t *seq_out, int try_wp)
{
	struct ck_writer_opts wo = {.level = 1, .threads = 2, .pack_size = 0};
	const char *wt = getenv("CKPT_WRITER_THREADS");
	struct ck_round rc = {0};
	struct ck__phases ph = {0};
	struct ck_manifest *m = NULL;
	struct ck_writer *w = NULL;
	uint64_t t0 = ck_now_ns(), t_rel = 0, t_parked = 0, t_ask = 0, t_pre = 0, req0 = ck_s3_request_count ? ck_s3_request_count() : 0;
	pid_t *live = NULL, *zomb = NULL;
	size_t nlive = 0, nz = 0, npre = 0;
	int held = 0, any_wp = 0, r;
	unsigned ckflags = c->nofork ? CK_CKPT_NOFORK : 0;

	if (wt && atoi(wt) > 0)
		wo.threads = (unsigned)atoi(wt);
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
		if (ck__job_traced(c->procs[i].pid, &tracer)) {
			ck_err_set("the job is traced (ptrace) by process %d: not supported; the job keeps running",
				   tracer);
			return -ENOTSUP;
		}
	}
	/* The writer first: opening it (threads, a store connection) is no
	 * business of the job's frozen time. Its threads inherit this thread's
	 * nice value: running them at a lower priority than the job means a
	 * forked checkpoint takes the CPU the job leaves idle rather than the
	 * job's own progress. */
	{
		int old = getpriority(PRIO_PROCESS, (id_t)gettid());
		setpriority(PRIO_PROCESS, (id_t)gettid(), c->writer_nice);
		r = ck_writer_open(c->store, c->job, c->last_seq + 1, c->prev, &wo, &w);
		setpriority(PRIO_PROCESS, (id_t)gettid(), old);
		if (r < 0)
			goto fail;
	}
	/* Every task of the job, and this thread above them, runs boosted
	 * until RELEASE is sent (boost.c; as root, otherwise nothing changes). */
	ck_procs_boost(c, 1);
	memset(&c->wpn, 0, sizeof(c->wpn));
	c->wp_none = 0;
	if (try_wp) {
		/* Opened here, not by the job: a user's job runs in a user
		 * namespace, where userfaultfd(2) wants CAP_SYS_PTRACE over the
		 * initial one, or vm.unprivileged_userfaultfd=1. Without it the
		 * job tries userfaultfd(2) (root's job can), then forks. */
		errno = EACCES;
		if (!getenv("CKPT_TEST_NO_UFFD_DEV")) /* test knob: as if it were not ours to open */
			c->round_devfd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
		c->wp_none = c->round_devfd < 0 && c->userns && !ck__unprivileged_uffd() ? errno : 0;
		try_wp = !c->wp_none;
	}
	if (try_wp) {
		ckflags |= CK_CKPT_WP;
		/* Protect while the job runs; the cut then protects again only
		 * what was written meanwhile (CKPT_TEST_NO_PREARM: at the cut;
		 * so also as the kernel without PAGEMAP_SCAN, whose test knob
		 * would not reach libckpt's own check). */
		if (!getenv("CKPT_TEST_NO_PREARM") && !getenv("CKPT_TEST_NO_PAGEMAP_SCAN")) {
			const char *hold = getenv("CKPT_TEST_PREARM_HOLD_MS");
			t_pre = ck_now_ns();
			if ((r = ck_prearm_all(c)) < 0)
				goto fail;
			t_pre = ck_now_ns() - t_pre;
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
	t_ask = ck_now_ns(); /* the job runs unparked until here */
	if ((r = ck__ask_all(c, ckflags)) < 0)
		goto fail;
	if (!c->nprocs) { /* every process exited while asked: the job is ending */
		ck_err_set("the job ended during the checkpoint");
		r = -ESRCH;
		goto fail;
	}
	t_parked = ph.last = ck_now_ns();
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
	if ((r = ck__read_descriptors(c)) < 0)
		goto fail;
	ck__phase(&ph, "descriptors");
	if ((r = ck_procs_scan(c, &live, &nlive, &zomb, &nz)) < 0)
		goto fail;
	m = calloc(1, sizeof(*m));
	if (!m || !(m->procs = calloc(c->nprocs, sizeof(*m->procs)))) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = ck_tree_record(c, m, zomb, nz)) < 0)
		goto fail;
	m->version = CK_MANIFEST_VERSION;
	m->seq = c->last_seq + 1;
	m->job = strdup(c->job);
	m->cwd = strdup(c->procs[0].pd->cwd);
	for (m->argc = 0; c->argv[m->argc]; m->argc++)
		;
	m->argv = calloc(m->argc + 1, sizeof(char *));
	for (size_t i = 0; m->argv && i < m->argc; i++)
		m->argv[i] = strdup(c->argv[i]);
	ck__phase(&ph, "tree");
	if ((r = ck_fds_record(c, &rc, w)) < 0)
		goto fail;
	ck__phase(&ph, "pipes");
	{
		/* plugins' agent halves (sockets), while all are parked */
		struct ck_procdesc **pds = calloc(c->nprocs, sizeof(*pds));
		pid_t *pids = calloc(c->nprocs, sizeof(*pids));
		for (size_t i = 0; pds && pids && i < c->nprocs; i++) {
			pds[i] = c->procs[i].pd;
			pids[i] = c->procs[i].pid;
		}
		r = pds && pids ? ck_agent_plugins_checkpoint(pds, pids, c->nprocs, w, m) : -ENOMEM;
		free(pds);
		free(pids);
		if (r < 0)
			goto fail;
	}
	ck__phase(&ph, "sockets");
	if ((r = ck_sysv_save(c, w, m)) < 0)
		goto fail;
	ck__phase(&ph, "System V");
	/* The main process first: restore starts the tree from it. */
	for (size_t i = 0; i < c->nprocs; i++) {
		held |= c->procs[i].held;
		any_wp |= c->procs[i].wp != NULL;
	}
	m->nprocs = c->nprocs;
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *jp = &c->procs[i];
		struct ck_proc *p = &m->procs[i];
		jp->mp = p;
		p->pid = jp->pd->pid;
		p->ppid = jp->pd->ppid;
		p->exe = strdup(jp->pd->exe);
		p->restart_entry = jp->pd->restart_entry;
		p->restart_arg = jp->pd->restart_arg;
		p->restart_stack = jp->pd->restart_stack;
	}
	if ((r = ck__all_alive(c)) < 0)
		goto fail;
	ck__phase(&ph, "liveness");
	if (!c->nofork && !held && !any_wp) {
		ck__release(c);
		t_rel = ck_now_ns();
		ck_procs_boost(c, 0); /* after: we ran first until everyone was told */
		ck__round_nice(c, 1);
		ck__phase(&ph, "release");
	}
	for (size_t i = 0; i < c->nprocs && r == 0; i++) {
		struct ck_jproc *jp = &c->procs[i];
		r = ck_mem_save_regions(&rc, w, jp, m, flags, 0);
		if (r == 0)
			r = ck_fds_save_data(w, jp->snap, jp->pd, flags);
	}
	if (r < 0)
		goto fail;
	if (!c->nofork && (held || any_wp)) {
		ck__phase(&ph, any_wp ? "unprotected memory" : "shared memory, deleted files");
		ck__release(c);
		t_rel = ck_now_ns();
		ck_procs_boost(c, 0); /* after: we ran first until everyone was told */
		ck__round_nice(c, 1);
		ck__phase(&ph, "release");
	}
	for (size_t i = 0; i < c->nprocs && r == 0; i++) {
		struct ck_jproc *jp = &c->procs[i];
		r = ck_mem_save_regions(&rc, w, jp, m, flags, 1);
		if (r == 0 && jp->snap == jp->pid)
			r = ck_mem_advice(jp);
		if (r == 0)
			r = ck_desc_pack(jp->pd, &jp->mp->desc, &jp->mp->desc_len);
		for (uint32_t k = 0; r == 0 && k < jp->pd->nfds; k++)
			if (jp->pd->fds[k].kind == CK_FD_PLUGIN) {
				char what[64];
				snprintf(what, sizeof(what), "descriptor %d", jp->pd->fds[k].fd);
				ck_skip_add(m, jp->pd->pid, what, "owned by a plugin, rebuilt at restart");
			}
	}
	for (size_t i = 0; i < c->nprocs && r == 0; i++)
		if (c->procs[i].wp)
			r = ck_mem_wp_verify(&c->procs[i]);
	if (r == 0)
		r = ck_wp_check(c->wp);
	if (r < 0)
		goto fail;
	r = ck_writer_finish(w, m);
	w = NULL;
	if (r < 0)
		goto fail;
	m->time_ns = ck_wall_ns();
	m->duration_ns = ck_now_ns() - t0;
	/* from the request to suspend (the first process to park cannot park
	 * earlier) to the release of all */
	m->frozen_ns = (c->nofork ? ck_now_ns() : t_rel) - t_ask;
	/* Still the job's only writer, and every pack this checkpoint names
	 * still there (ckpt rm --force may have removed the previous one's
	 * under us: then ck_round writes the round again without it). */
	if ((r = ck_joblock_check(c->lock)) < 0) {
		ck_err_wrap("nothing committed");
		goto fail;
	}
	if ((r = ck_manifest_check_packs(c->store, m)) < 0) {
		if (r == -ENOENT || r == -EBADMSG)
			r = -ENOLINK;
		goto fail;
	}
	if ((r = ck_manifest_commit(c->store, m)) < 0)
		goto fail;
	for (size_t i = 0; i < c->nprocs; i++)
		npre += c->procs[i].wp && c->procs[i].wp == c->procs[i].wp_pre;
	ck__end_round(c, 0, flags & CK_ROUND_STOP);
	if (c->verbose) {
		char req[64] = "";
		char snap[320] = "";
		if (any_wp) {
			int o = snprintf(snap, sizeof(snap),
				     ", write-protect snapshot: %" PRIu64 " faults, %" PRIu64 " blocks copied aside (%" PRIu64
				     " through the spill file)",
				     c->wpn.faults, c->wpn.blocks_aside, c->wpn.blocks_spilled);
			if (npre && o > 0 && (size_t)o < sizeof(snap))
				snprintf(snap + o, sizeof(snap) - (size_t)o,
					 "; pre-armed: %zu of %zu process(es) in %.3f s, %" PRIu64 " faults before the cut",
					 npre, c->nprocs, (double)t_pre / 1e9, c->wpn.pre_faults);
		} else if (!c->nofork && c->wp_none) {
			snprintf(snap, sizeof(snap),
				 ", forked snapshot (write protection: no userfaultfd for this user: /dev/userfaultfd: %s, "
				 "and vm.unprivileged_userfaultfd is 0)",
				 strerror(c->wp_none));
		} else if (!c->nofork) {
			int e = 0;
			for (size_t i = 0; i < c->nprocs && !e; i++)
				e = c->procs[i].wp_errno;
			snprintf(snap, sizeof(snap), ", forked snapshot%s%s%s", e ? " (write protection: " : "",
				 e ? strerror(e) : "", e ? ")" : "");
		}
		if (ck_s3_request_count && ck_s3_request_count() > req0)
			snprintf(req, sizeof(req), ", %" PRIu64 " S3 requests", ck_s3_request_count() - req0);
		fprintf(stderr, "ckrun: checkpoint %" PRIu64 " committed: %zu process(es), %" PRIu64
				" bytes of memory, %" PRIu64 " stored, %.3f s (frozen %.3f s, all parked after %.3f s)%s%s\n",
			m->seq, m->nprocs, m->logical_bytes, m->stored_bytes, (double)(ck_now_ns() - t0) / 1e9,
			(double)m->frozen_ns / 1e9, (double)(t_parked - t_ask) / 1e9, snap, req);
		if (c->verbose > 1)
			ck__print_phases(c, m->seq, t_ask, &ph);
	}
	c->last_seq = m->seq;
	ck_manifest_free(c->prev);
	c->prev = m;
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
	*seq_out = c->last_seq;
	r = 0;
	goto out;
fail:
	if (w)
		ck_writer_abort(w);
	ck__end_round(c, r, 0);
	if (r == -ENOTSUP && !strstr(ck_err_msg(), "keeps running")) {
		/* a refusal: say that nothing happened to the job */
		char why[1024];
		snprintf(why, sizeof(why), "%s", ck_err_msg());
		ck_err_set("%s; the job keeps running", why);
	}
	ck_manifest_free(m);
out:
	ck__round_nice(c, 0);
	free(live);
	free(zomb);
	free(rc.shared);
	free(rc.pipes);
	return r;
}
