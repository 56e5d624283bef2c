/* Restore, agent side: the sequence of phases. Each kind of state is
 * made again by its own file (kinds.h):
 *
 *   descriptors  every process's, unpacked and checked (image/procdesc_pack.c);
 *                their paths under --map-path, those it needs checked (mappath.c)
 *   tree         what processes, sessions and helpers to make (proctree.c)
 *   objects      before any process exists: shared memory objects and
 *                /dev/shm files (shm.c), the descriptor kinds' and the
 *                plugins' objects (fdkinds.c)
 *   spawn        fresh namespaces; init starts the top restorers (ns.c)
 *   build        children with their saved pids, sessions, groups;
 *                zombies and helpers end (proctree.c); System V segments
 *                (shm_sysv.c)
 *   each process its descriptors (fdkinds.c and the kinds' files), the
 *                layout the restorer maps and its memory filled with
 *                verified bytes (memory.c)
 *   go           every process ran its restart code: --env given to each
 *                (jobenv.c), then all resume at once
 *
 * The job runs again only after every byte has been verified and written;
 * any error kills the restorers first. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ckrun/agent_plugin.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"
#include "launcher/common/progress.h"
#include "launcher/image/chunkio.h"

int ck_rst_expect(int fd, uint32_t type, struct ck_msg *m)
{
	int r = ck_chan_recv(fd, m, NULL, 120000);

	if (r < 0) {
		ck_err_set("the restorer stopped answering: %s", strerror(-r));
		return r;
	}
	if (m->type == CK_MSG_RST_ERROR) {
		ck_err_set("%s", m->text);
		return -EIO;
	}
	if (m->type != type) {
		ck_err_set("the restorer sent message %u, expected %u", m->type, type);
		return -EPROTO;
	}
	return 0;
}

/* One process: layout, descriptors, memory; it then runs its restart code
 * and waits (RESTARTED) for the others. */
static int ck__restore_one(struct ck_reader *rd, struct ck_jproc *jp, const struct ck_proc *p,
			   const struct ck_procdesc *pd, struct ck_objs *objs, int mapped)
{
	struct ck_fdplan plan = {0};
	struct ck_msg msg;
	void *layout = NULL;
	size_t layout_len = 0;
	uint8_t *shmfill = calloc(p->nregions + 1, 1);
	uint32_t vdso_mode = 0;
	int r;

	if (!shmfill)
		return -ENOMEM;
	r = ck_fds_plan(rd, pd, &plan, objs);
	if (r < 0)
		goto out;
	r = ck_mem_layout(p, pd, &plan, objs, shmfill, &layout, &layout_len);
	if (r < 0)
		goto out;
	if ((r = ck_mem_vdso(rd, p, layout, &vdso_mode)) < 0)
		goto out;
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_LAYOUT;
	msg.arg[0] = layout_len;
	if ((r = ck_chan_send(jp->fd, &msg, NULL, 0)) < 0 || (r = ck_rst_expect(jp->fd, CK_MSG_RST_MAPPED, &msg)) < 0)
		goto out;
	if ((r = ck_mem_write(jp->pid, CK_RST_SCRATCH, layout, layout_len)) < 0)
		goto out;
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_FILLED;
	if ((r = ck_chan_send(jp->fd, &msg, NULL, 0)) < 0)
		goto out;
	for (uint32_t i = 0; i < plan.n; i += 200) {
		uint32_t k = plan.n - i < 200 ? plan.n - i : 200;
		memset(&msg, 0, sizeof(msg));
		msg.type = CK_MSG_RST_FDS;
		msg.len = k * 4;
		memcpy(msg.text, &plan.targets[i], k * 4);
		if ((r = ck_chan_send(jp->fd, &msg, &plan.fds[i], (int)k)) < 0)
			goto out;
	}
	if ((r = ck_rst_expect(jp->fd, CK_MSG_RST_MAPPED, &msg)) < 0)
		goto out;
	if ((r = ck_mem_fill(rd, jp, p, shmfill, vdso_mode)) < 0)
		goto out;
	if (mapped && (r = ck_mappath_write_proc(jp->pid, p, pd)) < 0)
		goto out;
	if ((r = ck_mqueue_notify_give(jp->pid, p, pd)) < 0)
		goto out;
	/* where its timers count from, into libckpt's descriptor (at
	 * restart_arg, restored with its memory) */
	if (pd->rst_mono &&
	    (r = ck_mem_write(jp->pid, p->restart_arg + offsetof(struct ck_procdesc, rst_mono), &pd->rst_mono,
			      sizeof(pd->rst_mono))) < 0)
		goto out;
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_RST_FILLED;
	r = ck_chan_send(jp->fd, &msg, NULL, 0);
out:
	if (r < 0 && !strstr(ck_err_msg(), "process"))
		ck_err_wrap("process %d", p->pid);
	ck_fdplan_free(&plan);
	free(layout);
	free(shmfill);
	return r;
}

/* A restore's own state, handed to its phases. */
struct ck__rst {
	struct ck_manifest *m;
	struct ck_procdesc **pds; /* every process's descriptor, unpacked */
	struct ck_objs objs;      /* objects shared between processes */
	struct ck_reader *rd;
	struct ck_tree_node *nodes; /* the tree to make */
	size_t nnodes;
	pid_t *top; /* init's children: the main process first */
	struct ck_progress prog; /* the image's bytes read, on a terminal */
};

/* descriptors: every process's, unpacked and checked. */
static int ck__rst_descriptors(struct ck__rst *x)
{
	struct ck_manifest *m = x->m;

	for (size_t i = 0; i < m->nprocs; i++) {
		int r = ck_desc_unpack(m->procs[i].desc, m->procs[i].desc_len, &x->pds[i]);
		if (r < 0) {
			ck_err_wrap("checkpoint %s@%" PRIu64, m->job, m->seq);
			return r;
		}
	}
	x->objs.pds = x->pds;
	x->objs.npds = m->nprocs;
	return 0;
}

/* objects: before any process exists, what several processes share. */
static int ck__rst_objects(struct ckrun *c, struct ck__rst *x)
{
	int r = ck_reader_open(c->store, c->job, x->m, &x->rd);
	uint64_t total = 0;
	char what[96];

	if (r < 0)
		return r;
	x->objs.c = c;
	for (size_t i = 0; i < x->m->nchunks; i++)
		total += x->m->chunks[i].len;
	snprintf(what, sizeof(what), "restore %s@%" PRIu64, c->job, x->m->seq);
	ck_progress_start(&x->prog, what, total);
	ck_reader_set_progress(x->rd, &x->prog);
	if ((r = ck_shm_prepare_files(x->m)) < 0 || (r = ck_shm_make_objects(x->rd, x->m, &x->objs)) < 0 ||
	    (r = ck_fds_prepare_all(x->rd, &x->objs)) < 0)
		return r;
	return 0;
}

/* Every pipe made: what no process holds closed (files in flight on the
 * pairs the processes made, ck_plugin_fds_made, may have needed them). */
static int ck__rst_pipes_settled(struct ck__rst *x)
{
	ck_pipes_drop_unheld(&x->objs);
	return 0;
}

/* spawn: the job's namespaces; init starts the restorers of its children,
 * the main process first. */
static int ck__rst_spawn(struct ckrun *c, struct ck__rst *x)
{
	struct ck_manifest *m = x->m;
	size_t ntop = 0;

	x->top = calloc(x->nnodes + 1, sizeof(*x->top));
	if (!x->top)
		return -ENOMEM;
	x->top[ntop++] = m->procs[0].pid;
	for (size_t i = 0; i < x->nnodes; i++)
		if (x->nodes[i].creator < 0 && x->nodes[i].pid != m->procs[0].pid)
			x->top[ntop++] = x->nodes[i].pid;
	c->root_jpid = m->procs[0].pid;
	c->tns_want = m->has_clocks;
	c->tns_mono = m->mono_ns;
	c->tns_boot = m->boot_ns;
	return ck_spawn(c, CK_SPAWN_RESTORE, x->top, ntop);
}

/* each process: its descriptors, layout and memory. */
static int ck__rst_processes(struct ckrun *c, struct ck__rst *x)
{
	struct ck_manifest *m = x->m;
	uint64_t mono = 0;
	int r;

	for (size_t i = 0; i < m->nprocs; i++) {
		struct ck_jproc *jp = ck_tree_jproc(c, m->procs[i].pid);
		if (!jp) {
			ck_err_set("restored process %d is missing", m->procs[i].pid);
			return -EPROTO;
		}
		/* where its timers count from (the job's clock: its time
		 * namespace's, or the host's where none could be made) */
		if (!mono && ck_timens_job_mark(jp->pid, &mono) < 0)
			mono = 0;
		/* less the time from its timers' reading to the cut */
		x->pds[i]->rst_mono = mono;
		if (mono && ck_timens_cut_mono() && x->pds[i]->rec_mono && x->pds[i]->rec_mono <= ck_timens_cut_mono() &&
		    ck_timens_cut_mono() - x->pds[i]->rec_mono < mono)
			x->pds[i]->rst_mono = mono - (ck_timens_cut_mono() - x->pds[i]->rec_mono);
		if ((r = ck__restore_one(x->rd, jp, &m->procs[i], x->pds[i], &x->objs, c->pathmap.n > 0)) < 0)
			return r;
	}
	return 0;
}

/* The processes saved stopped (CK_PD_P_STOPPED): DONE, deepest first,
 * each awaited in its stop (its manager stops it: libckpt/checkpoint.c). */
static int ck__rst_stopped_first(struct ckrun *c, struct ck__rst *x)
{
	struct ck_manifest *m = x->m;
	int r;

	for (size_t pass = 0; pass < m->nprocs; pass++) {
		int sent = 0;
		for (size_t i = 0; i < m->nprocs; i++) {
			struct ck_jproc *jp = ck_tree_jproc(c, m->procs[i].pid);
			int later = 0;
			if (!(x->pds[i]->pflags & CK_PD_P_STOPPED) || !jp || jp->round.state == CK_JP_IDLE)
				continue;
			/* a stopped child of its own not let go yet: later */
			for (size_t k = 0; k < m->nprocs && !later; k++) {
				struct ck_jproc *kj = ck_tree_jproc(c, m->procs[k].pid);
				later = k != i && (x->pds[k]->pflags & CK_PD_P_STOPPED) && x->pds[k]->ppid == m->procs[i].pid &&
					kj && kj->round.state != CK_JP_IDLE;
			}
			if (later)
				continue;
			jp->round.state = CK_JP_IDLE;
			if ((r = ck_stopped_restore(jp, x->pds[i])) < 0)
				return r;
			for (uint64_t until = ck_now_ns() + 5000000000ull;;) {
				if (ck_stopped_all_T(jp->pid))
					break;
				if (ck_now_ns() > until) {
					ck_err_set("restored process %d, which the job had stopped, did not stop again", jp->jpid);
					return -ETIMEDOUT;
				}
				usleep(1000);
			}
			sent = 1;
		}
		if (!sent)
			break;
	}
	return 0;
}

/* go: every process runs its restart code, then all go at once. */
static int ck__rst_go(struct ckrun *c, struct ck__rst *x)
{
	struct ck_manifest *m = x->m;
	size_t restarted = 0;
	int r;

	for (uint64_t until = ck_now_ns() + 60000000000ull; restarted < m->nprocs;) {
		struct ck_jproc *from;
		struct ck_msg msg;
		pid_t sender;
		r = ck_procs_wait(c, NULL, 0, 1000, &msg, &from, &sender);
		if (r < 0 || (r == 0 && ck_now_ns() > until)) {
			ck_err_set("the restored job did not come back: %s", r ? strerror(-r) : "timed out");
			return r ? r : -ETIMEDOUT;
		}
		if (r == 0)
			continue; /* a signal to ckrun (handled once the job runs), or a second gone by */
		if (msg.type == CK_MSG_GONE) {
			ck_err_set("a restored process exited before the job resumed");
			return -EIO;
		}
		if (from && msg.type == CK_MSG_RST_ERROR) {
			ck_err_set("process %d: %s", from->jpid, msg.text); /* the restart code's: which process */
			return -EIO;
		}
		if (from && msg.type == CK_MSG_RESTARTED && from->round.state != CK_JP_SNAPSHOT) {
			from->round.state = CK_JP_SNAPSHOT; /* marks "restarted" here */
			/* its saved stack start, set again by the restart code:
			 * not an exec since it attached (round.c) */
			from->stack0 = ck_proc_stack_start(from->pid);
			from->semundo_addr = msg.arg[0];
			ck_rst_cpu_note(from, &msg);
			restarted++;
		}
	}
	if ((r = ck_rst_cpu_send(c, m)) < 0) {
		ck_err_set("cannot tell the restored processes their children's CPU time: %s", strerror(-r));
		return r;
	}
	ck_sysv_remove_marked(c, m); /* attached again by now */
	for (size_t i = 0; i < c->nprocs; i++) {
		/* --env: each process's libckpt sets it before its threads go */
		if ((r = ck_jobenv_send(&c->jobenv, c->procs[i].fd)) < 0) {
			ck_err_set("cannot give process %d its environment (--env): %s", c->procs[i].jpid, strerror(-r));
			return r;
		}
	}
	/* Processes the job had stopped go first, children before parents,
	 * each stopped again before the next: a parent then finds its
	 * children's stops as it had seen them (libckpt/stopkids.c). */
	if ((r = ck__rst_stopped_first(c, x)) < 0)
		return r;
	for (size_t i = 0; i < c->nprocs; i++) {
		if (c->procs[i].round.state == CK_JP_IDLE)
			continue; /* went first */
		c->procs[i].round.state = CK_JP_IDLE;
		ck_procs_send(&c->procs[i], CK_MSG_DONE, 0);
	}
	c->job_pid = ck_tree_jproc(c, m->procs[0].pid)->pid;
	c->job_ready = c->job_started = 1;
	c->last_seq = m->seq;
	return 0;
}

/* A restored process's pid here (the plugins' late step), 0 if none. */
static pid_t ck__host_pid(void *arg, int32_t jpid)
{
	struct ck_jproc *jp = ck_tree_jproc(arg, jpid);

	return jp ? jp->pid : 0;
}

int ck_restore(struct ckrun *c, struct ck_manifest *m)
{
	struct ck__rst x = {.m = m};
	struct ck_agent_procs procs = {c, ck__host_pid, ck_rst_unix_pair, ck_rst_unix_listen, ck_rst_unix_connect};
	int r;

	if (!m->nprocs) {
		ck_err_set("checkpoint %s@%" PRIu64 " holds no process", m->job, m->seq);
		return -EBADMSG;
	}
	x.pds = calloc(m->nprocs, sizeof(*x.pds));
	if (!x.pds)
		return -ENOMEM;
	ck_timens_mark(m->has_clocks ? m->mono_ns : 0);
	if ((r = ck__rst_descriptors(&x)) < 0 || (r = ck_mappath_restore(&c->pathmap, m, x.pds)) < 0 ||
	    (r = ck_fp_check(m)) < 0 ||
	    (r = ck_tree_plan(m, &x.nodes, &x.nnodes)) < 0 ||
	    (r = ck__rst_objects(c, &x)) < 0 || (r = ck__rst_spawn(c, &x)) < 0 ||
	    (r = ck_tree_build(c, x.nodes, x.nnodes, &x.objs)) < 0 ||
	    (r = ck_tree_finish(c, x.nodes, x.nnodes, &x.objs)) < 0 ||
	    (r = ck_plugin_fds_made(x.rd, &x.objs, &procs)) < 0 ||
	    (r = ck_tree_end_makers(c, x.nodes, x.nnodes)) < 0 || (r = ck__rst_pipes_settled(&x)) < 0 ||
	    (r = ck_sysv_make(c, x.rd, m)) < 0 || (r = ck__rst_processes(c, &x)) < 0 ||
	    (r = ck_agent_plugins_late(x.objs.plugins, x.rd, ck__host_pid, c)) < 0)
		goto out;
	/* Every process exists (its threads come back under their saved
	 * numbers, which moves no cursor): new ones go on after the saved
	 * last pid, as they would have. */
	if (m->has_last_pid && ck_lastpid_write(c, m->last_pid) < 0) /* (not worth the job's loss) */
		fprintf(stderr, "ckrun: warning: %s: its new processes take the lowest free numbers\n", ck_err_msg());
	/* The line goes before the job runs again: the terminal is its too. */
	ck_progress_end(&x.prog);
	if ((r = ck__rst_go(c, &x)) < 0)
		goto out;
	r = 0;
out:
	ck_progress_end(&x.prog);
	if (r < 0) {
		ck_kill_job(c);
		ck_procs_clear(c);
	}
	ck_objs_free(&x.objs);
	ck_agent_plugins_release(x.objs.plugins);
	if (x.rd)
		ck_reader_close(x.rd);
	for (size_t i = 0; i < m->nprocs; i++)
		free(x.pds[i]);
	free(x.pds);
	free(x.nodes);
	free(x.top);
	return r;
}
