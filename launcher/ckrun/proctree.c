/* The process tree: every process and zombie of the job, with its
 * parent, process group and session.
 *
 * Round: recorded from /proc (pids as the job's namespace numbers them, a
 * zombie's wait status), and refused where the restore's plan could not
 * rebuild it. Restore: each restorer creates its saved
 * children with their pids (clone3 set_tid) and sessions; helpers stand in
 * for session leaders that had exited (they start the session, create its
 * members and exit, so the members end up init's children, as saved);
 * where a member's parent has exited but its session's leader is saved
 * (alive or a zombie), the leader makes such a helper under a number no
 * saved process has, and reaps it after; a child its parent left behind
 * by setsid is made before that setsid, its parent made in the child's
 * session (by its own parent, or by that session's helper where its
 * parent had exited); a group whose leader had exited
 * gets a helper with the leader's number, made (and reaped) by a member;
 * a session leader whose pseudo-terminal was its controlling terminal
 * takes it (TIOCSCTTY) before its children exist (pty.c); then process
 * groups, leaders first; then the terminals' foreground groups; then
 * zombies and helpers end as saved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"

static int ck__zombie_status(pid_t pid)
{
	char buf[1024];
	/* field 52: exit_code, as waitpid reports it */
	const char *p = ck_proc_stat_field(pid, 52, buf, sizeof(buf));

	return p ? atoi(p) : 0;
}

static int ck__id_used(const struct ck_tree_node *v, size_t n, int32_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].pid == id || v[i].sid == id || v[i].pgid == id)
			return 1;
	return 0;
}

/* A number for a helper: above every saved pid, session and group (a
 * helper standing in for an exited leader takes its session's number),
 * and above the helpers made so far; where that passes pid_max, the
 * lowest number none of them has. */
static int32_t ck__helper_pid(const struct ck_tree_node *v, size_t n)
{
	int32_t top = 1, max = 4194304;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");

	if (f) {
		if (fscanf(f, "%d", &max) != 1)
			max = 32768;
		fclose(f);
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i].pid > top)
			top = v[i].pid;
		if (v[i].sid > top)
			top = v[i].sid;
		if (v[i].pgid > top)
			top = v[i].pgid;
	}
	if (top + 1 < max)
		return top + 1;
	for (top = 2; ck__id_used(v, n, top); top++)
		;
	return top;
}

/* The helper making the members of session sid whose parent has exited:
 * one per session. Where the session's leader has exited too, the helper
 * stands in for it (its pid, setsid) and init is its parent; where the
 * leader is saved (alive or a zombie), the leader makes the helper, under
 * a number of its own, in the session, and reaps it when it has ended
 * (ck_tree_finish). Returns its index in v. */
static int ck__session_helper(struct ck_tree_node *v, size_t nt, size_t *n, int32_t sid, int leader)
{
	struct ck_tree_node *h;

	for (size_t k = nt; k < *n; k++)
		if (v[k].sid == sid)
			return (int)k;
	h = &v[*n];
	memset(h, 0, sizeof(*h));
	h->sid = sid;
	h->helper = 1;
	h->proc = -1;
	if (leader < 0) {
		h->pid = h->pgid = sid;
		h->ppid = 1;
		h->creator = -1;
	} else {
		h->pid = ck__helper_pid(v, *n);
		h->ppid = v[leader].pid;
		h->creator = leader;
	}
	return (int)(*n)++;
}

/* The session a restore makes node i in: its parent's (before any setsid
 * of its own), or init's (0) for init's children. A parent that had
 * exited is init (the helpers of sessions make only processes of their
 * session, never a process whose parent lives). A parent that leads its
 * session was not made before its own creator's setsid (such a process
 * stays in a session it does not lead), so its creator's session is it. */
static int32_t ck__birth_session(const struct ck_tree_node *v, size_t nt, int i)
{
	if (v[i].creator >= 0 && v[v[i].creator].helper) /* a session's helper made it */
		return v[v[i].creator].sid;
	for (size_t k = 0; k < nt; k++)
		if (v[k].pid == v[i].ppid && !v[k].zombie)
			return v[k].sid;
	return 0;
}

/* The plan: who makes each process (its parent, init, or a session's
 * helper). images: every live process must have a saved image (a
 * restore's check; a round plans before the images exist). */
static int ck__tree_shape(const struct ck_manifest *m, int images, struct ck_tree_node **out, size_t *nout)
{
	size_t nt = m->ntasks ? m->ntasks : 1, n = 0;
	/* the saved, a helper per session and one per group at most */
	struct ck_tree_node *v = calloc(3 * nt + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < nt; i++) {
		struct ck_tree_node *x = &v[n++];
		if (m->ntasks) {
			const struct ck_task *t = &m->tasks[i];
			x->pid = t->pid;
			x->ppid = t->ppid;
			x->pgid = t->pgid;
			x->sid = t->sid;
			x->zombie = !!(t->flags & CK_TASK_ZOMBIE);
			x->maker = !!(t->flags & CK_TASK_MAKER);
			x->helper = x->maker && !x->zombie;
			x->status = t->status;
		} else {
			x->pid = m->procs[0].pid;
			x->ppid = 1;
		}
		x->proc = -1;
		for (size_t k = 0; k < m->nprocs; k++)
			if (m->procs[k].pid == x->pid)
				x->proc = (int)k;
		if (images && !x->zombie && !x->maker && x->proc < 0) {
			ck_err_set("process %d of the tree has no saved image", x->pid);
			free(v);
			return -EBADMSG;
		}
	}
	for (size_t i = 0; i < nt; i++) { /* its parent makes it, where saved alive */
		v[i].creator = -1;
		for (size_t k = 0; k < nt; k++)
			if (v[k].pid == v[i].ppid && !v[k].zombie)
				v[i].creator = (int)k;
	}
	/* a maker that had exited is made by a saved process, which reaps
	 * it, and has no image of its own (as ck_tree_makers records it) */
	for (size_t i = 0; i < nt; i++)
		if (v[i].helper && (v[i].creator < 0 || v[i].proc >= 0 || v[v[i].creator].helper)) {
			ck_err_set("process %d of the tree is made again for a connection, but not by a saved process "
				   "or with an image of its own",
				   v[i].pid);
			free(v);
			return -EBADMSG;
		}
	for (size_t i = 0; i < nt; i++) {
		struct ck_tree_node *x = &v[i], *p;
		int parent = x->creator, leader = -1;
		for (size_t k = 0; k < nt; k++)
			if (v[k].pid == x->sid)
				leader = (int)k;
		if (parent >= 0) {
			p = &v[parent];
			if (x->sid == p->sid || x->sid == x->pid)
				continue;
			/* the parent started a session of its own after making it:
			 * made before the parent's setsid, in the session the parent
			 * is made in (its creator's; init's is 0) */
			if (p->sid == p->pid && x->sid == ck__birth_session(v, nt, parent)) {
				x->early = 1;
				continue;
			}
			/* ... and the parent's own parent has exited too: the
			 * helper of this one's session makes the parent (in it, as
			 * it was), unless another child it makes early needs
			 * another session */
			if (p->sid == p->pid && p->creator < 0 && x->sid) {
				int other = 0;
				for (size_t k = 0; k < nt; k++)
					other |= v[k].early && v[k].creator == parent && v[k].sid != x->sid;
				if (!other) {
					p->creator = ck__session_helper(v, nt, &n, x->sid, leader);
					x->early = 1;
					continue;
				}
			}
			ck_err_set("process %d: its session %d cannot be rebuilt under its parent %d", x->pid, x->sid,
				   x->ppid);
			free(v);
			return -ENOTSUP;
		}
		/* init's child (a session leader's creator may be set above) */
		if (!x->sid || x->sid == x->pid)
			continue;
		x->creator = ck__session_helper(v, nt, &n, x->sid, leader);
	}
	/* A process group whose leader has exited (not a session's: that
	 * one's helper leads it): a helper under the leader's number, made
	 * by a member in the group's session, leads it while the members join
	 * and then ends, reaped by that member (ck_tree_finish). */
	for (size_t i = 0; i < nt; i++) {
		struct ck_tree_node *x = &v[i], *h;
		int dup = 0;
		if (!x->pgid || x->pgid == x->sid || x->pgid == x->pid)
			continue;
		for (size_t k = 0; k < n && !dup; k++)
			dup = v[k].pid == x->pgid;
		if (dup)
			continue;
		h = &v[n++];
		memset(h, 0, sizeof(*h));
		h->pid = h->pgid = x->pgid;
		h->sid = x->sid;
		h->helper = 1;
		h->proc = -1;
		h->ppid = x->pid;
		h->creator = (int)i;
	}
	/* Every process reachable from init: a creator that one of its own
	 * descendants would make (a subreaper that adopted a child from a
	 * session its own descendant leads, made by that session's helper)
	 * would never be made. */
	for (size_t i = 0; i < n; i++) {
		int c = v[i].creator;
		for (size_t hops = 0; c >= 0 && hops <= n; hops++)
			c = v[c].creator;
		if (c >= 0) {
			ck_err_set("process %d: its session cannot be rebuilt: its creator would be made by one of its "
				   "own descendants",
				   v[i].pid);
			free(v);
			return -ENOTSUP;
		}
	}
	*out = v;
	*nout = n;
	return 0;
}

int ck_tree_plan(const struct ck_manifest *m, struct ck_tree_node **out, size_t *nout)
{
	return ck__tree_shape(m, 1, out, nout);
}

/* A restorer holds at most CK_RST_MAX_CHILDREN children to make (they
 * come in messages of CK_RST_KIDS_PER_MSG, ck_tree_build): more, or a tree
 * the plan cannot rebuild, refuse the round rather than the restore. */
static int ck__tree_fits(const struct ck_manifest *m)
{
	struct ck_tree_node *v;
	size_t n, *made, *helpers;
	int r = ck__tree_shape(m, 0, &v, &n), max = CK_RST_MAX_CHILDREN;
	const char *knob;

	if (r < 0)
		return r;
	made = calloc(n, sizeof(*made));
	helpers = calloc(n, sizeof(*helpers));
	if (!made || !helpers) {
		free(made);
		free(helpers);
		free(v);
		return -ENOMEM;
	}
	for (size_t j = 0; j < n; j++)
		if (v[j].creator >= 0) {
			made[v[j].creator]++;
			helpers[v[j].creator] += v[j].helper;
		}
	/* test knob: a lower bound, to meet the refusal with fewer processes */
	if ((knob = getenv("CKPT_TEST_MAX_CHILDREN")) && atoi(knob) > 0 && atoi(knob) < max)
		max = atoi(knob);
	for (size_t i = 0; i < n && !r; i++) {
		size_t kids = made[i];

		if (kids <= (size_t)max)
			continue;
		if (v[i].helper)
			ck_err_set("session %d has %zu processes whose parent has exited, more than a restore makes "
				   "for one process (%d): not supported",
				   v[i].sid, kids, max);
		else if (helpers[i])
			ck_err_set("process %d has %zu children and makes %zu helper(s) at a restore: more than a "
				   "restore makes for one process (%d): not supported",
				   v[i].pid, kids - helpers[i], helpers[i], max);
		else
			ck_err_set("process %d has %zu children, more than a restore makes for one process (%d): not "
				   "supported",
				   v[i].pid, kids, max);
		r = -ENOTSUP;
	}
	free(helpers);
	free(made);
	free(v);
	return r;
}

int ck_tree_record(struct ckrun *c, struct ck_manifest *m, pid_t *zombies, size_t nz)
{
	m->tasks = calloc(c->nprocs + nz + 1, sizeof(*m->tasks));
	if (!m->tasks)
		return -ENOMEM;
	for (size_t i = 0; i < c->nprocs + nz; i++) {
		struct ck_task *t = &m->tasks[m->ntasks];
		pid_t host = i < c->nprocs ? c->procs[i].pid : zombies[i - c->nprocs], hppid = 0;
		int32_t jpid = 0;

		if (ck_proc_ids(host, &jpid, &t->pgid, &t->sid, &hppid) < 0)
			continue; /* a zombie reaped meanwhile */
		/* init's session and group (ns.c) are where a restore starts
		 * every process anyway: recorded as 0, as ckrun's were before */
		if (t->sid == 1)
			t->sid = 0;
		if (t->pgid == 1)
			t->pgid = 0;
		t->pid = jpid;
		if (i < c->nprocs) {
			t->ppid = c->procs[i].pd->ppid;
		} else {
			struct ck_jproc *pp = ck_procs_find(c, hppid);
			t->flags = CK_TASK_ZOMBIE;
			t->status = ck__zombie_status(host);
			t->ppid = pp ? pp->jpid : 1;
		}
		m->ntasks++;
	}
	return ck__tree_fits(m);
}

static struct ck_tree_node *ck__node_of(struct ck_tree_node *v, size_t n, int32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].pid == pid)
			return &v[i];
	return NULL;
}

struct ck_jproc *ck_tree_jproc(struct ckrun *c, int32_t jpid)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].jpid == jpid)
			return &c->procs[i];
	return NULL;
}

/* Build the tree: every node's restorer attaches; each is told which
 * children to create (and to start its session first). */
int ck_tree_build(struct ckrun *c, struct ck_tree_node *v, size_t n, struct ck_objs *o)
{
	uint64_t start = ck_now_ns();
	size_t pending = n;

	while (pending) {
		struct ck_jproc *from;
		struct ck_msg msg;
		pid_t sender;
		int tty = -1;
		int32_t fg = 0;
		int r = ck_procs_wait(c, NULL, 0, 1000, &msg, &from, &sender);

		if (r < 0)
			return r;
		if (ck_now_ns() - start > 60000000000ull) {
			ck_err_set("the restored processes did not all start within 60 s");
			return -ETIMEDOUT;
		}
		if (r == 0)
			continue;
		if (msg.type == CK_MSG_GONE) {
			ck_err_set("a restorer exited while the tree was built");
			return -EIO;
		}
		if (!from)
			continue;
		if (msg.type == CK_MSG_RST_ERROR) {
			ck_err_set("%s", msg.text);
			return -EIO;
		}
		if (msg.type == CK_MSG_RST_HELLO) {
			struct ck_tree_node *x = ck__node_of(v, n, from->jpid);
			struct ck_msg t;
			uint32_t k = 0;
			if (!x || x->attached) {
				ck_err_set("an unexpected process %d started in the job's namespace", from->jpid);
				return -EPROTO;
			}
			x->attached = 1;
			memset(&t, 0, sizeof(t));
			for (size_t i = 0; i < n; i++) {
				struct ck_rst_child ch = {v[i].pid, v[i].early ? CK_RST_CHILD_EARLY : 0};
				if (v[i].creator != (int)(x - v))
					continue;
				if (k == CK_RST_MAX_CHILDREN) { /* (the round's check refuses it first) */
					ck_err_set("process %d makes more than %d processes", x->pid, CK_RST_MAX_CHILDREN);
					return -E2BIG;
				}
				if (t.arg[0] == CK_RST_KIDS_PER_MSG) { /* a full message goes ahead */
					t.type = CK_MSG_RST_KIDS;
					t.len = (uint32_t)(t.arg[0] * sizeof(ch));
					if ((r = ck_chan_send(from->fd, &t, NULL, 0)) < 0)
						return r;
					t.arg[0] = 0;
				}
				memcpy(t.text + t.arg[0] * sizeof(ch), &ch, sizeof(ch));
				t.arg[0]++;
				k++;
			}
			t.type = CK_MSG_RST_TREE;
			t.arg[2] = k;
			t.arg[1] = (x->sid && x->sid == x->pid) ? CK_RST_SETSID : 0;
			t.len = (uint32_t)(t.arg[0] * sizeof(struct ck_rst_child));
			/* a session's terminal before its members exist: they inherit it */
			if ((t.arg[1] & CK_RST_SETSID) && (r = ck_pty_ctty(o, x->pid, &tty, &fg)) < 0)
				return r;
			if ((t.arg[1] & CK_RST_SETSID) && r == 1)
				t.arg[1] |= CK_RST_CTTY;
			if ((r = ck_chan_send(from->fd, &t, &tty, (t.arg[1] & CK_RST_CTTY) ? 1 : 0)) < 0)
				return r;
			continue;
		}
		if (msg.type == CK_MSG_RST_TREE_DONE) {
			struct ck_tree_node *x = ck__node_of(v, n, from->jpid);
			if (x && !x->treedone) {
				x->treedone = 1;
				pending--;
			}
		}
	}
	return 0;
}

static int ck__ask(struct ck_jproc *p, uint32_t type, uint64_t arg, uint32_t reply)
{
	struct ck_msg m;
	int r = ck_procs_send(p, type, arg);

	if (r < 0) {
		ck_err_set("a restorer stopped answering: %s", strerror(-r));
		return r;
	}
	return reply ? ck_rst_expect(p->fd, reply, &m) : 0;
}

static int ck__reap(struct ckrun *c, const struct ck_tree_node *parent, int32_t pid)
{
	struct ck_jproc *p = ck_tree_jproc(c, parent->pid);
	struct ck_msg m;
	int r;

	if (!p) {
		ck_err_set("process %d, which made helper %d, has no channel", parent->pid, pid);
		return -EPROTO;
	}
	if ((r = ck__ask(p, CK_MSG_RST_REAP, (uint64_t)(uint32_t)pid, 0)) < 0 ||
	    (r = ck_rst_expect(p->fd, CK_MSG_RST_REAP_DONE, &m)) < 0)
		return r;
	if ((int64_t)m.arg[0] < 0) {
		ck_err_set("process %d could not reap helper %d: %s", parent->pid, pid, strerror((int)-(int64_t)m.arg[0]));
		return (int)(int64_t)m.arg[0];
	}
	return 0;
}

/* A zombie or helper ends as saved; returns when it has. */
static int ck__end(struct ckrun *c, const struct ck_tree_node *x)
{
	struct ck_jproc *p = ck_tree_jproc(c, x->pid);
	struct ck_msg m;
	int r;

	if ((r = ck__ask(p, CK_MSG_RST_EXIT, (uint64_t)(uint32_t)x->status, 0)) < 0)
		return r;
	/* its channel closes when it has ended */
	while ((r = ck_chan_recv(p->fd, &m, NULL, 30000)) == 0)
		;
	if (r != -EPIPE && r != -ECONNRESET) {
		ck_err_set("restored zombie or helper %d did not end: %s", x->pid, strerror(-r));
		return r;
	}
	ck_procs_drop(c, p);
	return 0;
}

/* Process groups: leaders first, then members; then zombies and helpers end. */
int ck_tree_finish(struct ckrun *c, struct ck_tree_node *v, size_t n, struct ck_objs *o)
{
	int r;

	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			struct ck_tree_node *x = &v[i];
			int lead = x->pgid == x->pid;
			if (!x->pgid || x->sid == x->pid || lead != (pass == 0))
				continue;
			if ((r = ck__ask(ck_tree_jproc(c, x->pid), CK_MSG_RST_PGID, (uint64_t)x->pgid,
					 CK_MSG_RST_PGID_DONE)) < 0) {
				ck_err_wrap("process %d, group %d", x->pid, x->pgid);
				return r;
			}
		}
	/* Every group exists: a terminal's foreground group, set by its
	 * session's leader (only a process of the session may). */
	for (size_t i = 0; i < n; i++) {
		struct ck_tree_node *x = &v[i];
		struct ck_jproc *p;
		struct ck_msg m;
		int tty = -1;
		int32_t fg = 0;

		if (!x->sid || x->sid != x->pid || x->zombie || x->helper)
			continue;
		if ((r = ck_pty_ctty(o, x->pid, &tty, &fg)) < 0)
			return r;
		if (r == 0 || fg <= 0 || !(p = ck_tree_jproc(c, x->pid)))
			continue;
		memset(&m, 0, sizeof(m));
		m.type = CK_MSG_RST_FGPGRP;
		m.arg[0] = (uint64_t)(uint32_t)fg;
		if ((r = ck_chan_send(p->fd, &m, &tty, 1)) < 0 || (r = ck_rst_expect(p->fd, CK_MSG_RST_FGPGRP_DONE, &m)) < 0) {
			ck_err_wrap("process %d: the foreground group %d of its terminal", x->pid, fg);
			return r;
		}
	}
	/* A saved leader's helpers first, each reaped by its leader (a zombie
	 * one too: its restorer has not ended yet), so that their numbers are
	 * free before threads are made again; then zombies and the other
	 * helpers (init reaps those; their numbers were sessions', which no
	 * thread can hold). */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < n; i++) {
			struct ck_tree_node *x = &v[i];
			int made = x->helper && x->creator >= 0;
			if ((!x->zombie && !x->helper) || x->maker || made != (pass == 0))
				continue;
			if ((r = ck__end(c, x)) < 0 || (made && (r = ck__reap(c, &v[x->creator], x->pid)) < 0))
				return r;
		}
	return 0;
}

int ck_tree_end_makers(struct ckrun *c, struct ck_tree_node *v, size_t n)
{
	int r;

	for (size_t i = 0; i < n; i++)
		if (v[i].maker && ((r = ck__end(c, &v[i])) < 0 ||
				   (v[i].helper && (r = ck__reap(c, &v[v[i].creator], v[i].pid)) < 0)))
			return r;
	return 0;
}

static struct ck_task *ck__task_of(struct ck_manifest *m, int32_t pid)
{
	for (size_t i = 0; i < m->ntasks; i++)
		if (m->tasks[i].pid == pid)
			return &m->tasks[i];
	return NULL;
}

/* X had exited: a zombie of the job lives on until the connections are
 * made; another number becomes a maker, made by the process holding the
 * socket, in its session. A number a session or group of the job still
 * has is the kernel's until they end (a restore's helper may take it), so
 * no process could be made under it. */
static int ck__maker(struct ck_manifest *m, const struct ck_jproc *holder, const struct ck_pd_fd *f)
{
	const struct ck_task *h = ck__task_of(m, holder->jpid);
	struct ck_task *t = ck__task_of(m, f->peer), *nt;
	struct ck_task made = {0};

	if (t) {
		if (t->flags & CK_TASK_ZOMBIE)
			t->flags |= CK_TASK_MAKER;
		return 0; /* (a live process has the number now: it makes it, and reads as bare) */
	}
	for (size_t i = 0; i < m->ntasks; i++)
		if (m->tasks[i].sid == f->peer || m->tasks[i].pgid == f->peer) {
			ck_err_set("process %d: descriptor %d (a UNIX socket) names in SO_PEERCRED process %d, which has "
				   "exited while its number is still the %s %d's: a restore could not make a process "
				   "under it: not supported",
				   holder->jpid, f->fd, f->peer,
				   m->tasks[i].sid == f->peer ? "session" : "process group", f->peer);
			return -ENOTSUP;
		}
	if (!h) {
		ck_err_set("process %d, which holds descriptor %d, is not in the tree", holder->jpid, f->fd);
		return -EPROTO;
	}
	made.pid = f->peer;
	made.ppid = h->pid;
	made.sid = h->sid;
	made.flags = CK_TASK_MAKER;
	nt = realloc(m->tasks, (m->ntasks + 1) * sizeof(*m->tasks));
	if (!nt)
		return -ENOMEM;
	m->tasks = nt;
	m->tasks[m->ntasks++] = made;
	return 0;
}

int ck_tree_makers(struct ckrun *c, struct ck_manifest *m)
{
	int r = 0, any = 0;

	for (size_t i = 0; i < c->nprocs && r == 0; i++) {
		const struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; pd && k < pd->nfds && r == 0; k++) {
			const struct ck_pd_fd *f = &pd->fds[k];
			if (f->kind != CK_FD_SOCKET || !(f->xflags & CK_PD_FD_PEER_GONE) || f->peer <= 1)
				continue;
			r = ck__maker(m, &c->procs[i], f);
			any = 1;
		}
	}
	return r == 0 && any ? ck__tree_fits(m) : r;
}
