/* The consistent cut of a round: every process of the job parks its
 * threads, records its state and takes its snapshot (a fork, or a
 * write-protect snapshot armed now or pre-armed: wpread.c, prearm.c),
 * each as soon as it can; processes born meanwhile are asked too, and
 * every live process of the namespace must be one of ours. Then every
 * process's descriptor is read from its snapshot. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckrun/proto.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/round.h"
#include "launcher/common/ck_err.h"

/* A tracer outside the job's namespace shows as TracerPid 0 inside it:
 * look from here. */
static int ck__tracer_of(pid_t tid, const char *val, void *arg)
{
	(void)tid;
	(void)arg;
	return atoi(val);
}

int ck_job_traced(pid_t pid, pid_t *tracer)
{
	*tracer = (pid_t)ck_proc_each_task(pid, "TracerPid:", ck__tracer_of, NULL);
	return *tracer > 0;
}

/* A process that neither parked nor refused within the bound (its
 * manager thread does not run: the whole process is frozen, or stuck). */
static void ck__name_waiting(struct ckrun *c, uint64_t ms)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		char comm[64];
		int st;
		if (c->procs[i].round.state == CK_JP_SNAPSHOT)
			continue;
		st = ck_proc_state(c->procs[i].pid);
		ck_err_set("process %d (%s) did not answer within the round's bound (%" PRIu64 ".%03" PRIu64
			   " s, --round-timeout; state %c)",
			   c->procs[i].jpid, ck_proc_comm(c->procs[i].pid, comm, sizeof(comm)), ms / 1000, ms % 1000,
			   st ? st : '?');
		return;
	}
	ck_err_set("the job's processes did not answer within the round's bound (--round-timeout)");
}

/* The numbers of pid's NSpid line (outermost first), at most max; how
 * many. */
static int ck__nspids(pid_t pid, int32_t *v, int max)
{
	char path[64], line[512];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "NSpid:", 6)) {
			char *s = line + 6, *end;
			for (long x; n < max && (x = strtol(s, &end, 10), end != s); s = end)
				v[n++] = (int32_t)x;
			break;
		}
	fclose(f);
	return n;
}

/* The pids of p's children that the job stopped (held in this round, or
 * to be), as p sees them (a child may be in a pid namespace of its own),
 * into text: p records its view of them when asked, and one held already
 * does not look stopped to it (its threads run in the parking handler).
 * Returns the bytes used. */
static uint32_t ck__stopped_kids(const struct ckrun *c, const struct ck_jproc *p, char *text, size_t size)
{
	int32_t pv[32], kv[32];
	int np = 0;
	uint32_t n = 0;

	for (size_t k = 0; k < c->nprocs && (n + 1) * sizeof(int32_t) <= size; k++) {
		char buf[64];
		const char *pp;
		int32_t j;
		int nk;
		if (!c->procs[k].round.later && !c->procs[k].round.hold)
			continue;
		pp = ck_proc_stat_field(c->procs[k].pid, 4, buf, sizeof(buf));
		if (!pp || (pid_t)atoi(pp) != p->pid)
			continue;
		if (!np && !(np = ck__nspids(p->pid, pv, 32)))
			continue;
		if ((nk = ck__nspids(c->procs[k].pid, kv, 32)) < np)
			continue;
		j = kv[np - 1]; /* at p's own namespace's level */
		memcpy(text + n * sizeof(j), &j, sizeof(j));
		n++;
	}
	return n * (uint32_t)sizeof(int32_t);
}

static void ck__ask(struct ckrun *c, struct ck_round *rd, struct ck_jproc *p, uint64_t park_ms)
{
	int fd = rd->devfd;
	struct ck_msg m;

	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = CK_MSG_CHECKPOINT;
	m.arg[0] = rd->ckflags;
	m.arg[1] = rd->seq;
	m.arg[2] = park_ms;
	m.arg[3] = c->round_timeout_ms; /* for its message */
	m.arg[4] = rd->seccomp_base;
	m.arg[5] = (uint64_t)ck_procs_boost_orig(p->pid);
	if (rd->ckflags & CK_CKPT_STOPKIDS)
		m.len = ck__stopped_kids(c, p, m.text, sizeof(m.text));
	if (p->round.prearm == 2 && p->round.wp_pre) { /* its own userfaultfd instead */
		m.arg[0] |= CK_CKPT_PREARMED;
		fd = ck_wp_fd(p->round.wp_pre);
	}
	p->round.state = ck_chan_send(p->fd, &m, fd >= 0 ? &fd : NULL, fd >= 0) == 0 ? CK_JP_ASKED : CK_JP_IDLE;
	p->round.snap = 0;
}

/* Once every process asked has its snapshot: the stopped ones held and
 * asked. 0: not yet; 1: done; -errno. */
static int ck__hold_later(struct ckrun *c, struct ck_round *rd, uint64_t park_ms)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (!c->procs[i].round.later && c->procs[i].round.state != CK_JP_SNAPSHOT)
			return 0;
	/* (a stopped parent records its stopped children's state once they
	 * may be held: each is told which of its children are: ck__ask) */
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		int r;
		if (!p->round.later)
			continue;
		p->round.later = 0;
		/* continued meanwhile (0): asked as any other */
		if ((r = ck_stopped_hold(p)) < 0)
			return r;
		ck__ask(c, rd, p, park_ms);
	}
	return 1;
}

/* Ask: every process of the job parks its threads, records its state and
 * takes its snapshot, each as soon as it can (a parked process's own state
 * cannot change). Returns 0 when every attached process has a snapshot and
 * the namespace holds no other live process: the consistent cut. Nothing
 * that crosses processes (pipes, sockets, shared memory) is read before. */
int ck_cut_ask(struct ckrun *c, struct ck_round *rd)
{
	/* The round's bound counts from its start (pre-arming took part of
	 * it): each process gets what is left, less a moment to report which
	 * thread did not park; ckrun gives up a second after the bound. */
	uint64_t bound_ns = c->round_timeout_ms * 1000000ull, unknown_since = 0, spent = ck_now_ns() - rd->t0;
	uint64_t park_ms = spent + 350000000ull < bound_ns ? (bound_ns - spent) / 1000000ull - 250 : 100;

	uint64_t asked = ck_now_ns();
	/* Processes the job stopped (stopped.c) are asked last: held by ckrun
	 * once every other one has parked, so that none sees them out of
	 * their stop. held: -1 none, 0 some to hold yet, 1 held. */
	int held = -1;

	rd->asking = 1;
	rd->seq = c->last_seq + 1;
	for (size_t i = 0; i < c->nprocs; i++)
		if ((c->procs[i].round.later = ck_stopped_all_T(c->procs[i].pid)))
			held = 0;
	if (held == 0)
		rd->ckflags |= CK_CKPT_STOPKIDS; /* parents record their view of them */
	for (size_t i = 0; i < c->nprocs; i++)
		if (!c->procs[i].round.later)
			ck__ask(c, rd, &c->procs[i], park_ms);
	for (;;) {
		struct ck_jproc *from;
		struct ck_msg m;
		pid_t sender, *live = NULL, *zomb = NULL;
		size_t nlive = 0, nz = 0, waiting = 0;
		int r = held == 0 ? ck__hold_later(c, rd, park_ms) : 0;

		if (r < 0)
			return r;
		if (r == 1)
			held = 1;
		r = ck_procs_wait(c, NULL, 0, held >= 0 ? 5 : 100, &m, &from, &sender);
		if (held == 1)
			ck_stopped_pump(c);
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
			int ok = from->round.prearm == 2 && from->round.wp_pre && from->round.state == CK_JP_ASKED;
			if (ok)
				ck_wp_freeze(from->round.wp_pre, m.type == CK_MSG_WP_FREEZE);
			if (m.type == CK_MSG_WP_FREEZE)
				ck_procs_send(from, CK_MSG_WP_FROZEN, ok ? 0 : (uint64_t)(int64_t)-ENOENT);
			continue;
		}
		if (r == 1 && from && m.type == CK_MSG_FAILED) {
			ck_err_set("process %d: %s", from->jpid, m.text);
			return -ENOTSUP;
		}
		if (r == 1 && from && m.type == CK_MSG_SNAPSHOT && m.arg[3] != rd->seq) {
			if (sender != from->pid) /* a forked one; a write-protect one lifted already */
				kill(sender, SIGKILL); /* of a round that ended without it */
			continue;
		}
		if (r == 1 && from && m.type == CK_MSG_SNAPSHOT && from->round.state != CK_JP_SNAPSHOT) {
			if (m.arg[1] != sizeof(struct ck_procdesc)) {
				ck_err_set("libckpt and ckrun disagree on the process descriptor (%" PRIu64
					   " vs %zu bytes): mixed versions?", m.arg[1], sizeof(struct ck_procdesc));
				return -EPROTO;
			}
			from->round.state = CK_JP_SNAPSHOT;
			from->round.snap = c->nofork ? from->pid : sender;
			from->round.wp_errno = 0;
			if (from->round.wp_fd < 0 && m.len == sizeof(int32_t)) {
				int32_t e;
				memcpy(&e, m.text, sizeof(e));
				from->round.wp_errno = e;
			}
			if (from->round.wp_fd < 0 && m.len == sizeof(struct ck_wp_info)) {
				/* pre-armed: ckrun has the descriptor; its cut now */
				struct ck_wp_info wi;
				if (!from->round.wp_pre || from->round.prearm != 2 || sender != from->pid) {
					ck_err_set("process %d: a write-protect snapshot without its descriptor", from->jpid);
					return -EPROTO;
				}
				memcpy(&wi, m.text, sizeof(wi));
				from->round.snap = from->pid;
				if ((r = ck_wp_activate(from->round.wp_pre, &wi)) < 0) {
					ck_err_wrap("process %d: write-protect snapshot", from->jpid);
					return -ESTALE; /* the round is repeated with a fork */
				}
				from->round.wp = from->round.wp_pre;
			} else if (from->round.wp_pre && from->round.wp_fd < 0) {
				ck_wp_freeze(from->round.wp_pre, 0); /* it forked after all: lift its writes again */
			}
			if (from->round.wp_fd >= 0) {
				struct ck_wp_info wi;
				int fd = from->round.wp_fd;

				from->round.wp_fd = -1;
				from->round.snap = from->pid;
				if (m.len != sizeof(wi)) {
					close(fd);
					ck_err_set("process %d: a write-protect snapshot without its ranges", from->jpid);
					return -EPROTO;
				}
				memcpy(&wi, m.text, sizeof(wi));
				if ((r = ck_wp_add(&rd->wp, c->wp_aside_max, from->pid, from->jpid, fd, &wi, &from->round.wp)) < 0) {
					ck_err_wrap("process %d: write-protect snapshot", from->jpid);
					return -ESTALE; /* the round is repeated with a fork */
				}
			}
			from->pd_addr = m.arg[0];
			from->round.held = m.arg[2] != 0;
			from->round.t_snap = ck_now_ns();
			from->round.us_park = (uint32_t)m.arg[4];
			from->round.us_record = (uint32_t)(m.arg[4] >> 32);
			from->round.us_fork = (uint32_t)m.arg[5];
		}
		for (size_t i = 0; i < c->nprocs; i++)
			waiting += c->procs[i].round.state != CK_JP_SNAPSHOT;
		/* Each process gives up on its own threads within the bound and
		 * says which one; this catches one that does not answer at all. */
		if (waiting && ck_now_ns() - rd->t0 > bound_ns + 1000000000ull) {
			ck__name_waiting(c, c->round_timeout_ms);
			return -ENOTSUP;
		}
		if (waiting) {
			/* A process that exited before answering: its channel may
			 * still be open in a child that has not attached yet. A
			 * stopped one (SIGSTOP, a debugger) never answers. */
			for (size_t i = 0; i < c->nprocs; i++) {
				int st = ck_proc_state(c->procs[i].pid);
				if (c->procs[i].round.state == CK_JP_SNAPSHOT || c->procs[i].round.hold ||
				    c->procs[i].round.later)
					continue;
				if (!st) {
					ck_procs_drop(c, &c->procs[i]);
					break;
				}
				if ((st == 'T' || st == 't') && ck_now_ns() - asked > 200000000ull) {
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
			/* Born just now, attaching, or running without libckpt:
			 * one that never will attach is named at once. */
			{
				const char *why = ck_proc_never_attaches(stray);
				if (why)
					return ck_proc_refuse_unattached(stray, why, "");
			}
			if (!unknown_since)
				unknown_since = ck_now_ns();
			if (ck_now_ns() - unknown_since > ck_stray_grace_ns(c))
				return ck_proc_refuse_unattached(stray, "a static program, or LD_PRELOAD or its channel removed",
								 "");
		}
	}
	rd->asking = 0;
	return 0;
}

/* Every process's descriptor, from its snapshot. */
int ck_cut_descriptors(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		int r;
		/* kept from round to round: its pages are already there */
		if (!p->pd && !(p->pd = malloc(sizeof(*p->pd))))
			return -ENOMEM;
		/* the header, then only the used threads, descriptors and epoll
		 * items: a full descriptor is megabytes, most of it empty */
		if ((r = ck_mem_read(p->round.snap, p->pd_addr, p->pd, CK_PD_HDR_SIZE)) < 0 ||
		    p->pd->nthreads > CK_PD_MAX_THREADS || p->pd->nfds > CK_PD_MAX_FDS ||
		    p->pd->nepitems > CK_PD_MAX_EPITEMS ||
		    (r = ck_mem_read(p->round.snap, p->pd_addr + offsetof(struct ck_procdesc, threads), p->pd->threads,
				     p->pd->nthreads * sizeof(p->pd->threads[0]))) < 0 ||
		    (r = ck_mem_read(p->round.snap, p->pd_addr + offsetof(struct ck_procdesc, fds), p->pd->fds,
				     p->pd->nfds * sizeof(p->pd->fds[0]))) < 0 ||
		    (r = ck_mem_read(p->round.snap, p->pd_addr + offsetof(struct ck_procdesc, epitems), p->pd->epitems,
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
