/* The job's processes as ckrun sees them. Each has a control channel of
 * its own; a new process (fork, exec, a restorer) announces itself with a
 * HELLO carrying that channel over the channel it inherited, so a message
 * loop over all channels learns of every process as it appears. */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/round.h"
#include "ckrun/proto.h"

struct ck_jproc *ck_procs_find(struct ckrun *c, pid_t pid)
{
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].pid == pid)
			return &c->procs[i];
	return NULL;
}

int ck_procs_send(struct ck_jproc *p, uint32_t type, uint64_t arg0)
{
	struct ck_msg m;

	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = type;
	m.arg[0] = arg0;
	return ck_chan_send(p->fd, &m, NULL, 0);
}

void ck_procs_drop(struct ckrun *c, struct ck_jproc *p)
{
	size_t i = (size_t)(p - c->procs);

	if (p->fd >= 0)
		close(p->fd);
	if (p->round.wp_fd >= 0)
		close(p->round.wp_fd);
	ck_stopped_end(c, p, 0, 0); /* a held one: gone, or ckrun lets it go */
	free(p->pd);
	memmove(p, p + 1, (c->nprocs - i - 1) * sizeof(*p));
	c->nprocs--;
}

void ck_jproc_round_clear(struct ck_jproc *p)
{
	if (p->round.wp_fd >= 0)
		close(p->round.wp_fd);
	memset(&p->round, 0, sizeof(p->round));
	p->round.wp_fd = -1;
}

void ck_procs_clear(struct ckrun *c)
{
	while (c->nprocs)
		ck_procs_drop(c, &c->procs[c->nprocs - 1]);
}

/* A HELLO: a new process, or a known one that exec'd (same pid, new
 * channel). While a round asks processes to suspend, newcomers are asked
 * too. */
static int ck__attach(struct ckrun *c, pid_t pid, int32_t jpid, int fd, uint64_t stack0, uint64_t semundo)
{
	struct ck_jproc *p = pid > 0 ? ck_procs_find(c, pid) : NULL;
	int one = 1;

	if (pid <= 0) {
		close(fd);
		return -EPROTO;
	}
	setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	if (p) {
		close(p->fd);
		/* exec'd: a pre-armed descriptor is the old memory's (ckrun
		 * closes it at the round's end); the new one arms at the cut */
		p->round.wp_pre = NULL;
		p->round.prearm = 0;
	} else {
		if (c->nprocs == c->procs_cap) {
			size_t cap = c->procs_cap ? c->procs_cap * 2 : 16;
			struct ck_jproc *n = realloc(c->procs, cap * sizeof(*n));
			if (!n) {
				close(fd);
				return -ENOMEM;
			}
			c->procs = n;
			c->procs_cap = cap;
		}
		p = &c->procs[c->nprocs++];
		memset(p, 0, sizeof(*p));
		p->pid = pid;
		p->round.wp_fd = -1; /* (the rest of its round state: zeros, none yet) */
		/* Its descriptor's buffer, with the pages a round fills touched
		 * now: faulting them in is no business of the frozen time. */
		p->pd = malloc(sizeof(*p->pd));
		if (p->pd)
			memset(p->pd, 0, offsetof(struct ck_procdesc, threads) + 8 * sizeof(p->pd->threads[0]));
		if (!c->root_jpid)
			c->root_jpid = jpid; /* the first to attach: the program ckrun started */
	}
	p->jpid = jpid;
	p->fd = fd;
	/* The stack the HELLO's sender had. Read here, it is that of a program
	 * the process exec'd since if the HELLO is read late, and 0 when read
	 * in the middle of that exec (the new memory has no stack yet): on a
	 * loaded machine a round then counted on a static program as attached,
	 * asked it in vain and committed the job without it. */
	if (getenv("CKPT_TEST_STACK_UNREAD")) /* test: as read in the middle of an exec (0) */
		stack0 = 0;
	else if (!stack0) /* an older libckpt */
		stack0 = ck_proc_stack_start(pid);
	p->stack0 = stack0;
	p->semundo_addr = semundo;
	p->round.state = CK_JP_IDLE;
	if (c->round && c->round->asking) {
		struct ck_msg m;
		memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
		m.type = CK_MSG_CHECKPOINT;
		m.arg[0] = c->round->ckflags;
		m.arg[1] = c->round->seq;
		m.arg[4] = c->round->seccomp_base;
		if (ck_chan_send(fd, &m, c->round->devfd >= 0 ? &c->round->devfd : NULL, c->round->devfd >= 0) == 0)
			p->round.state = CK_JP_ASKED;
	}
	return 0;
}

int ck_proc_each_tid(pid_t pid, int (*fn)(pid_t pid, pid_t tid, void *arg), void *arg)
{
	char path[64];
	struct dirent *d;
	int r = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	if (!(dir = opendir(path)))
		return 0;
	while (!r && (d = readdir(dir)))
		if (d->d_name[0] >= '0' && d->d_name[0] <= '9')
			r = fn(pid, (pid_t)atoi(d->d_name), arg);
	closedir(dir);
	return r;
}

struct ck__status_line {
	const char *key;
	int (*fn)(pid_t tid, const char *val, void *arg);
	void *arg;
};

static int ck__status_line_of(pid_t pid, pid_t tid, void *arg)
{
	struct ck__status_line *q = arg;
	size_t klen = strlen(q->key);
	char path[96], line[256];
	int r = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, q->key, klen)) {
			r = q->fn(tid, line + klen, q->arg);
			break;
		}
	fclose(f);
	return r;
}

int ck_proc_each_task(pid_t pid, const char *key, int (*fn)(pid_t tid, const char *val, void *arg), void *arg)
{
	struct ck__status_line q = {key, fn, arg};

	return ck_proc_each_tid(pid, ck__status_line_of, &q);
}

int ck_procs_wait(struct ckrun *c, struct pollfd *extra, int nextra, int timeout_ms, struct ck_msg *m,
		  struct ck_jproc **from, pid_t *sender)
{
	*from = NULL; /* no message (0): no process */
	for (;;) {
		size_t n = (size_t)nextra + c->nprocs + 2;
		struct pollfd *pf = calloc(n, sizeof(*pf));
		int r, newfd;
		size_t k;

		if (!pf)
			return -ENOMEM;
		memcpy(pf, extra, sizeof(*pf) * (size_t)nextra);
		for (k = 0; k < c->nprocs; k++)
			pf[nextra + k] = (struct pollfd){c->procs[k].fd, POLLIN, 0};
		pf[n - 2] = (struct pollfd){c->agent_fd, POLLIN, 0};
		pf[n - 1] = (struct pollfd){c->attach_fd, POLLIN, 0};
		r = poll(pf, n, timeout_ms);
		if (r < 0 && errno == EINTR) {
			free(pf);
			return 0; /* a signal: the caller looks at its flags */
		}
		if (r <= 0) {
			free(pf);
			return r < 0 ? -errno : 0;
		}
		for (int i = 0; i < nextra; i++)
			extra[i].revents = pf[i].revents;
		if (pf[n - 1].revents & POLLIN) {
			int chan = ck_attach_accept(c, sender, m);
			free(pf);
			if (chan < 0)
				continue;
			ck__attach(c, *sender, (int32_t)m->arg[0], chan, m->arg[1], m->arg[2]);
			*from = ck_procs_find(c, *sender);
			return 1;
		}
		for (k = 0; k < n - 1 - (size_t)nextra; k++)
			if (pf[nextra + k].revents)
				break;
		if (k == n - 1 - (size_t)nextra) {
			free(pf);
			return 0; /* only extra[] */
		}
		{
			int fd = pf[nextra + k].fd;
			struct ck_jproc *p = k < c->nprocs ? &c->procs[k] : NULL;
			free(pf);
			r = ck_chan_recv_fd(fd, m, sender, 0, &newfd);
			if (r == -EPIPE || r == -ECONNRESET || (r < 0 && r != -EAGAIN && r != -EINTR && r != -EBADMSG)) {
				if (!p) { /* the first channel: its process attached elsewhere, or is gone */
					close(c->agent_fd);
					c->agent_fd = -1;
					continue;
				}
				memset(m, 0, __builtin_offsetof(struct ck_msg, text));
				m->type = CK_MSG_GONE;
				m->arg[0] = (uint64_t)p->pid;
				*from = NULL;
				ck_procs_drop(c, p);
				return 1;
			}
			if (r < 0)
				continue;
			if ((m->type == CK_MSG_HELLO || m->type == CK_MSG_RST_HELLO) && newfd >= 0) {
				ck__attach(c, *sender, (int32_t)m->arg[0], newfd, m->type == CK_MSG_HELLO ? m->arg[1] : 0,
					   m->type == CK_MSG_HELLO ? m->arg[2] : 0);
				*from = ck_procs_find(c, *sender);
				return 1;
			}
			/* A write-protect snapshot of this round (or its pre-armed
			 * descriptor): ck_cut_ask (ck_prearm_all) takes it. Any
			 * other descriptor is closed, a late snapshot's userfaultfd
			 * included, which lifts its protection. */
			if (newfd >= 0 && p && p->round.wp_fd < 0 &&
			    ((m->type == CK_MSG_SNAPSHOT && c->round && c->round->asking && m->arg[3] == c->round->seq) ||
			     (m->type == CK_MSG_PREARM_FD && c->round && c->round->prearming && m->arg[0] == c->round->seq))) {
				p->round.wp_fd = newfd;
				newfd = -1;
			}
			if (newfd >= 0)
				close(newfd);
			*from = p;
			return 1;
		}
	}
}

int ck_proc_ids(pid_t pid, int32_t *jpid, int32_t *pgid, int32_t *sid, pid_t *ppid)
{
	char path[64], line[512];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		int32_t *dst = NULL;
		if (!strncmp(line, "NSpid:", 6))
			dst = jpid;
		else if (!strncmp(line, "NSpgid:", 7))
			dst = pgid;
		else if (!strncmp(line, "NSsid:", 6))
			dst = sid;
		else if (!strncmp(line, "PPid:", 5) && ppid)
			*ppid = atoi(line + 5);
		if (dst) {
			/* the last number: the innermost namespace's */
			char *sp = strrchr(line, '\t');
			*dst = atoi(sp ? sp + 1 : line);
			found++;
		}
	}
	fclose(f);
	return found == 3 ? 0 : -ENOENT;
}

const char *ck_proc_stat_field(pid_t pid, int field, char *buf, size_t len)
{
	char path[64], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "re")))
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	/* the command (field 2) may hold spaces and ')': count from its last ')' */
	p = strrchr(buf, ')');
	for (int i = 2; p && i < field; i++)
		p = strchr(p + 1, ' ');
	return p && p[1] ? p + 1 : NULL;
}

uint64_t ck_proc_stack_start(pid_t pid)
{
	char buf[1024];
	const char *p = ck_proc_stat_field(pid, 28, buf, sizeof(buf));

	return p ? strtoull(p, NULL, 10) : 0;
}

const char *ck_proc_comm(pid_t pid, char *buf, size_t len)
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

int ck_proc_state(pid_t pid)
{
	char buf[512];
	const char *p = ck_proc_stat_field(pid, 3, buf, sizeof(buf));

	return p ? *p : 0;
}

static int ck__push(pid_t **v, size_t *n, pid_t pid)
{
	pid_t *nv = realloc(*v, (*n + 1) * sizeof(pid_t));

	if (!nv)
		return -ENOMEM;
	nv[(*n)++] = pid;
	*v = nv;
	return 0;
}

int ck_procs_scan(struct ckrun *c, pid_t **pids, size_t *n, pid_t **zombies, size_t *nz)
{
	pid_t *todo = NULL;
	size_t ntodo = 0, at = 0;
	int r = 0;

	*pids = *zombies = NULL;
	*n = *nz = 0;
	if (ck__push(&todo, &ntodo, c->init_pid) < 0)
		return -ENOMEM;
	/* Breadth first through every thread's children. Snapshot children
	 * of a round in progress are ckrun's, not the job's. */
	while (at < ntodo && r == 0) {
		pid_t pid = todo[at++];
		char path[64];
		struct dirent *d;
		DIR *dir;

		snprintf(path, sizeof(path), "/proc/%d/task", pid);
		if (!(dir = opendir(path)))
			continue;
		while ((d = readdir(dir)) && r == 0) {
			char cp[320], buf[4096], *s, *e;
			FILE *f;
			size_t len;
			if (d->d_name[0] < '0' || d->d_name[0] > '9')
				continue;
			snprintf(cp, sizeof(cp), "/proc/%d/task/%s/children", pid, d->d_name);
			if (!(f = fopen(cp, "re")))
				continue;
			len = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
			buf[len] = 0;
			for (s = buf; *s; s = e) {
				long kid = strtol(s, &e, 10);
				int snap = 0;
				if (e == s)
					break;
				for (size_t i = 0; i < c->nprocs; i++) /* (with --no-fork or write protection: the process itself) */
					snap |= c->procs[i].round.snap == (pid_t)kid && c->procs[i].round.snap != c->procs[i].pid;
				if (kid > 0 && !snap)
					r = ck__push(&todo, &ntodo, (pid_t)kid);
			}
		}
		closedir(dir);
	}
	for (size_t i = 1; i < ntodo && r == 0; i++) {
		int st = ck_proc_state(todo[i]);
		if (st == 'Z')
			r = ck__push(zombies, nz, todo[i]);
		else if (st)
			r = ck__push(pids, n, todo[i]);
	}
	free(todo);
	return r;
}

/* Whether a process has exited (or is a zombie). */
int ck_proc_gone(pid_t pid)
{
	int st = ck_proc_state(pid);

	return !st || st == 'Z' || st == 'X';
}
