/* The pre-armed cut, ckrun side: before a write-protect round asks the job
 * to park, every process protects its memory while it runs
 * (libckpt/wpprearm.c), so the cut only protects again what was written
 * meanwhile. A process that cannot, or does not answer in time, arms at
 * the cut as before; nothing here fails the round. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/round.h"

/* Longer than any protection takes (0.1-0.3 s per 4 GiB here); a process
 * still busy then arms at the cut, after its late PREARMED. */
#define CK__PREARM_WAIT_NS 10000000000ull

static void ck__prearm_failed(struct ckrun *c, struct ck_jproc *p, int err)
{
	p->round.prearm = err < 0 ? err : -EPROTO;
	p->round.wp_pre = NULL; /* the round's wp keeps it until the round ends (then closed) */
	if (c->verbose > 1)
		fprintf(stderr, "ckrun: process %d: no pre-armed cut: %s\n", p->jpid, strerror(-p->round.prearm));
}

static void ck__prearm_answer(struct ckrun *c, struct ck_jproc *p, const struct ck_msg *m)
{
	int err = (int)(int64_t)m->arg[1];

	if (err == 0 && !p->round.wp_pre)
		err = -EPROTO;
	/* arg[2]: how long its threads were parked to take its descriptors */
	if (c->round && m->arg[2] > c->round->pre_park_us)
		c->round->pre_park_us = m->arg[2];
	if (err < 0)
		ck__prearm_failed(c, p, err);
	else
		p->round.prearm = 2;
}

int ck_prearm_all(struct ckrun *c, struct ck_round *rd)
{
	/* A quarter of the round's bound at most: the cut needs the rest. */
	uint64_t start = ck_now_ns(), wait_ns = c->round_timeout_ms * 1000000ull / 4;
	int r = 0;

	if (wait_ns > CK__PREARM_WAIT_NS)
		wait_ns = CK__PREARM_WAIT_NS;
	rd->seq = c->last_seq + 1;
	rd->prearming = 1;
	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *p = &c->procs[i];
		struct ck_msg m;

		if (ck_stopped_all_T(p->pid)) { /* stopped by the job: held at the cut */
			p->round.prearm = 0;
			continue;
		}
		memset(&m, 0, offsetof(struct ck_msg, text));
		m.type = CK_MSG_PREARM;
		m.arg[0] = rd->seq;
		p->round.wp_pre = NULL;
		p->round.prearm = ck_chan_send(p->fd, &m, rd->devfd >= 0 ? &rd->devfd : NULL, rd->devfd >= 0) == 0;
	}
	for (;;) {
		struct ck_jproc *from;
		struct ck_msg m;
		pid_t sender;
		size_t waiting = 0;

		for (size_t i = 0; i < c->nprocs; i++) {
			struct ck_jproc *p = &c->procs[i];
			int st;
			if (p->round.prearm != 1)
				continue;
			st = ck_proc_state(p->pid);
			if (st == 'T' || st == 't' || !st) /* stopped or gone: the cut says so */
				ck__prearm_failed(c, p, -ESRCH);
			else
				waiting++;
		}
		if (!waiting || ck_now_ns() - start > wait_ns)
			break;
		r = ck_procs_wait(c, NULL, 0, 100, &m, &from, &sender);
		if (r < 0) {
			ck_err_set("waiting for the job's processes: %s", strerror(-r));
			break;
		}
		if (r == 0 || !from || m.arg[0] != rd->seq || from->round.prearm != 1) {
			r = 0; /* time up, or not for us: m and from hold nothing then */
			continue;
		}
		r = 0;
		if (m.type == CK_MSG_PREARM_FD && from->round.wp_fd >= 0 && !from->round.wp_pre) {
			struct ck_wp_info wi = {0, 0, 0};
			int fd = from->round.wp_fd, e = m.len == sizeof(wi) ? 0 : -EPROTO;
			from->round.wp_fd = -1;
			if (e == 0)
				memcpy(&wi, m.text, sizeof(wi));
			else
				close(fd);
			if (e == 0 &&
			    (e = ck_wp_prearm(&rd->wp, c->wp_aside_max, from->pid, from->jpid, fd, &wi, &from->round.wp_pre)) < 0 &&
			    c->verbose > 1)
				fprintf(stderr, "ckrun: %s\n", ck_err_msg());
			if (e < 0)
				ck__prearm_failed(c, from, e);
		} else if (m.type == CK_MSG_PREARMED) {
			ck__prearm_answer(c, from, &m);
		}
	}
	for (size_t i = 0; i < c->nprocs; i++) /* late: they arm at the cut */
		if (c->procs[i].round.prearm == 1)
			ck__prearm_failed(c, &c->procs[i], -ETIMEDOUT);
	rd->prearming = 0;
	return r;
}
