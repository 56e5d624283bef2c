/* A checkpoint round, agent side: ask libckpt for a snapshot, read the
 * snapshot's memory map, memory and descriptor contents, write them as
 * chunks, commit the manifest, let the job go on (or stop), apply
 * retention. The job's time frozen is only until the snapshot exists. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "launcher/chunkio.h"
#include "launcher/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "libckpt/proto.h"

uint64_t ck_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ck__wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct ck__src {
	pid_t pid;
	uint64_t base;
	int pagemap_fd; /* >= 0: skip pages that are not present (private anonymous) */
	int file_fd;    /* >= 0: read a descriptor's contents instead of memory */
	unsigned stop;
};

static int ck__read_src(void *arg, uint64_t off, void *buf, size_t len)
{
	struct ck__src *s = arg;

	if ((s->stop & CK_ROUND_STOP) && ck_sig_term >= 2)
		return -ECANCELED;
	if (s->file_fd >= 0) {
		size_t done = 0;
		while (done < len) {
			ssize_t n = pread(s->file_fd, (char *)buf + done, len - done, (off_t)(off + done));
			if (n < 0) {
				ck_err_set("cannot read a descriptor's contents: %s", strerror(errno));
				return -errno;
			}
			if (n == 0) { /* shrank meanwhile */
				memset((char *)buf + done, 0, len - done);
				break;
			}
			done += (size_t)n;
		}
		return 0;
	}
	if (s->pagemap_fd >= 0) {
		uint64_t addr = s->base + off, ent[64];
		size_t pages = (len + 4095) / 4096, any = 0;
		if (pages <= 64 && pread(s->pagemap_fd, ent, pages * 8, (off_t)(addr / 4096 * 8)) == (ssize_t)(pages * 8)) {
			for (size_t i = 0; i < pages; i++)
				any |= ent[i] & (3ull << 62); /* present or swapped */
			if (!any) {
				memset(buf, 0, len);
				return 0;
			}
		}
	}
	return ck_mem_read(s->pid, s->base + off, buf, len);
}

static int ck__endswith(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && !strcmp(s + a - b, suf);
}

static uint32_t ck__region_flags(const struct ck_map *mp)
{
	uint32_t f = mp->shared ? CK_REG_SHARED : 0;
	const char *p = mp->path;

	if (!p)
		return f;
	if (!strcmp(p, "[heap]"))
		return f | CK_REG_HEAP;
	if (!strcmp(p, "[stack]"))
		return f | CK_REG_STACK | CK_REG_GROWSDOWN;
	if (!strcmp(p, "[vdso]")) /* saved: a restore on another kernel needs its symbols */
		return f | CK_REG_VDSO;
	if (!strcmp(p, "[vvar]") || !strcmp(p, "[vvar_vclock]"))
		return f | CK_REG_VVAR | CK_REG_NODATA;
	if (!strcmp(p, "[vsyscall]"))
		return f | CK_REG_VSYSCALL | CK_REG_NODATA;
	if (p[0] == '/') {
		f |= CK_REG_FILE;
		if (ck__endswith(p, " (deleted)"))
			f |= CK_REG_DELETED;
	}
	return f;
}

static int ck__skip_add(struct ck_manifest *m, int pid, const char *what, const char *why)
{
	struct ck_skip *n = realloc(m->skips, (m->nskips + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	m->skips = n;
	n[m->nskips].pid = pid;
	n[m->nskips].what = strdup(what);
	n[m->nskips].why = strdup(why);
	m->nskips++;
	return 0;
}

/* Memory regions of the snapshot into the writer. Pass 0 takes what a
 * forked snapshot does not freeze (shared mappings), pass 1 the rest. */
static int ck__skip_add(struct ck_manifest *m, int pid, const char *what, const char *why);

static int ck__save_regions(struct ckrun *c, struct ck_writer *w, pid_t snap, struct ck_proc *p,
			    struct ck_manifest *m, unsigned flags, int pass, struct ck_procdesc *pd)
{
	struct ck_map *maps = NULL;
	size_t n = 0;
	char pm[64];
	int pagemap = -1, r;

	(void)c;
	if (pass == 1)
		goto data;
	r = ck_maps_read(snap, &maps, &n);
	if (r < 0)
		return r;
	p->regions = calloc(n, sizeof(*p->regions));
	if (!p->regions) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct ck_region *rg = &p->regions[p->nregions++];
		const struct ck_map *mp = &maps[i];

		rg->start = mp->start;
		rg->end = mp->end;
		rg->prot = mp->prot;
		rg->flags = ck__region_flags(mp);
		rg->file_off = mp->off;
		rg->dev = mp->dev;
		rg->ino = mp->ino;
		rg->path = mp->path ? strdup(mp->path) : NULL;
		if (mp->prot == 0) /* guard pages and address-space reservations */
			rg->flags |= CK_REG_NODATA;
		if ((rg->flags & CK_REG_FILE) && (rg->flags & CK_REG_SHARED) && !(rg->flags & CK_REG_DELETED))
			rg->flags |= CK_REG_NODATA; /* the file itself holds the data */
		for (uint32_t k = 0; k < pd->nskips && k < CK_PD_MAX_SKIPS; k++) {
			if (pd->skips[k].start < rg->end && rg->start < pd->skips[k].end) {
				char what[320];
				rg->flags |= CK_REG_NODATA | CK_REG_PLUGIN;
				snprintf(what, sizeof(what), "mapping %" PRIx64 "-%" PRIx64 " %s", rg->start, rg->end,
					 rg->path ? rg->path : "");
				pd->skips[k].why[sizeof(pd->skips[k].why) - 1] = 0;
				ck__skip_add(m, pd->pid, what, pd->skips[k].why);
				break;
			}
		}
	}
data:
	snprintf(pm, sizeof(pm), "/proc/%d/pagemap", snap);
	pagemap = open(pm, O_RDONLY | O_CLOEXEC);
	for (size_t i = 0; i < p->nregions; i++) {
		struct ck_region *rg = &p->regions[i];
		struct ck__src src = {snap, rg->start, -1, -1, flags};

		if ((rg->flags & CK_REG_NODATA) || !!(rg->flags & CK_REG_SHARED) != (pass == 0))
			continue;
		/* Only anonymous private memory: fork copies its page table, so a
		 * page absent there was never touched. (The vDSO's pages are not
		 * copied by fork, file pages fault in lazily.) */
		if (!(rg->flags & (CK_REG_FILE | CK_REG_SHARED | CK_REG_VDSO)))
			src.pagemap_fd = pagemap;
		r = ck_writer_add(w, rg->end - rg->start, ck__read_src, &src, &rg->first_chunk, &rg->nchunks);
		if (r < 0) {
			ck_err_wrap("region %" PRIx64 "-%" PRIx64 " %s", rg->start, rg->end, rg->path ? rg->path : "");
			goto out;
		}
		m->logical_bytes += rg->end - rg->start;
	}
	r = 0;
out:
	if (pagemap >= 0)
		close(pagemap);
	ck_maps_free(maps, n);
	return r;
}

/* Contents of deleted files and memfds, read through /proc/PID/fd. */
static int ck__save_fd_contents(struct ck_writer *w, pid_t snap, struct ck_procdesc *pd, unsigned flags)
{
	for (uint32_t i = 0; i < pd->nfds; i++) {
		struct ck_pd_fd *f = &pd->fds[i];
		struct ck__src src = {snap, 0, -1, -1, flags};
		char path[64];
		off_t size;
		int r;

		if (f->kind != CK_FD_DELETED && f->kind != CK_FD_MEMFD)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", snap, f->fd);
		src.file_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (src.file_fd < 0) {
			ck_err_set("cannot read descriptor %d (%s) of the job: %s", f->fd, f->path, strerror(errno));
			return -errno;
		}
		/* The size recorded while the job was parked, not the current one. */
		size = lseek(src.file_fd, 0, SEEK_END);
		if (size >= 0 && (uint64_t)size < f->size)
			f->size = (uint64_t)size;
		r = ck_writer_add(w, f->size, ck__read_src, &src, &f->data_chunk, &f->data_nchunks);
		close(src.file_fd);
		if (r < 0)
			return r;
	}
	return 0;
}

static void ck__send_done(struct ckrun *c, int result)
{
	struct ck_msg m;

	memset(&m, 0, sizeof(m));
	m.type = CK_MSG_DONE;
	m.arg[0] = (uint64_t)(int64_t)result;
	ck_chan_send(c->agent_fd, &m, NULL, 0);
}

static int ck__build_and_commit(struct ckrun *c, struct ck_writer **wp, struct ck_manifest *m, pid_t snap,
				struct ck_procdesc *pd, unsigned flags, uint64_t t0, uint64_t *t_released)
{
	struct ck_proc *p;
	int r;

	m->procs = calloc(1, sizeof(*m->procs));
	if (!m->procs)
		return -ENOMEM;
	m->nprocs = 1;
	p = &m->procs[0];
	p->pid = pd->pid;
	p->ppid = pd->ppid;
	p->exe = strdup(pd->exe);
	p->restart_entry = pd->restart_entry;
	p->restart_arg = pd->restart_arg;
	p->restart_stack = pd->restart_stack;
	r = ck__save_regions(c, *wp, snap, p, m, flags, 0, pd);
	if (r == 0)
		r = ck__save_fd_contents(*wp, snap, pd, flags);
	if (r == 0 && !c->nofork) {
		struct ck_msg rel;
		memset(&rel, 0, sizeof(rel));
		rel.type = CK_MSG_RELEASE;
		ck_chan_send(c->agent_fd, &rel, NULL, 0);
		if (!*t_released)
			*t_released = ck_now_ns();
	}
	if (r == 0)
		r = ck__save_regions(c, *wp, snap, p, m, flags, 1, pd);
	if (r == 0)
		r = ck_desc_pack(pd, &p->desc, &p->desc_len);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < pd->nfds; i++)
		if (pd->fds[i].kind == CK_FD_PLUGIN) {
			char what[64];
			snprintf(what, sizeof(what), "descriptor %d", pd->fds[i].fd);
			ck__skip_add(m, pd->pid, what, "owned by a plugin, rebuilt at restart");
		}
	r = ck_writer_finish(*wp, m);
	*wp = NULL;
	if (r < 0)
		return r;
	m->time_ns = ck__wall_ns();
	m->duration_ns = ck_now_ns() - t0;
	m->frozen_ns = (c->nofork ? ck_now_ns() : *t_released) - t0;
	return ck_manifest_commit(c->store, m);
}

/* A tracer outside the job's namespace shows as TracerPid 0 inside it:
 * look from here. */
static int ck__job_traced(pid_t pid, pid_t *tracer)
{
	char path[320], line[256];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((d = readdir(dir))) {
		FILE *f;
		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", pid, d->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "TracerPid:", 10) && (*tracer = atoi(line + 10)) > 0)
				break;
		fclose(f);
		if (*tracer > 0) {
			closedir(dir);
			return 1;
		}
	}
	closedir(dir);
	return 0;
}

int ck_round(struct ckrun *c, unsigned flags, uint64_t *seq_out)
{
	struct ck_writer_opts wo = {.level = 1, .threads = 2, .pack_size = 0};
	const char *wt = getenv("CKPT_WRITER_THREADS");
	struct ck_manifest *m = NULL;
	struct ck_writer *w = NULL;
	struct ck_procdesc *pd = NULL;
	int held = 1;
	uint64_t t0 = ck_now_ns(), t_snap, req0 = ck_s3_request_count ? ck_s3_request_count() : 0;
	struct ck_msg msg;
	pid_t snap = 0;
	int r;

	if (wt && atoi(wt) > 0)
		wo.threads = (unsigned)atoi(wt);
	if (!c->job_ready) {
		ck_err_set("the job is not ready for checkpoints yet");
		return -EAGAIN;
	}
	{
		pid_t tracer = 0;
		if (c->job_pid > 0 && ck__job_traced(c->job_pid, &tracer)) {
			ck_err_set("the job is traced (ptrace) by process %d: not supported; the job keeps running",
				   tracer);
			return -ENOTSUP;
		}
	}
	memset(&msg, 0, sizeof(msg));
	msg.type = CK_MSG_CHECKPOINT;
	msg.arg[0] = c->nofork ? CK_CKPT_NOFORK : 0;
	msg.arg[1] = c->last_seq + 1;
	r = ck_chan_send(c->agent_fd, &msg, NULL, 0);
	if (r < 0) {
		ck_err_set("cannot reach the job's checkpoint library: %s", strerror(-r));
		return r;
	}
	for (;;) {
		r = ck_chan_recv(c->agent_fd, &msg, &snap, 60000);
		if (r < 0) {
			ck_err_set("the job did not answer the checkpoint request: %s", strerror(-r));
			return r;
		}
		if (msg.type == CK_MSG_FAILED) {
			ck_err_set("%s; the job keeps running", msg.text);
			return -ENOTSUP;
		}
		if (msg.type == CK_MSG_SNAPSHOT)
			break;
	}
	t_snap = ck_now_ns(); /* the job runs on from here, or from RELEASE if it holds */
	held = msg.arg[2] != 0;
	pd = malloc(sizeof(*pd));
	m = calloc(1, sizeof(*m));
	if (!pd || !m) {
		r = -ENOMEM;
		goto fail;
	}
	if (msg.arg[1] != sizeof(*pd)) {
		ck_err_set("libckpt and ckrun disagree on the process descriptor (%" PRIu64 " vs %zu bytes): "
			   "mixed versions?", msg.arg[1], sizeof(*pd));
		r = -EPROTO;
		goto fail;
	}
	r = ck_mem_read(snap, msg.arg[0], pd, sizeof(*pd));
	if (r < 0)
		goto fail;
	m->version = CK_MANIFEST_VERSION;
	m->seq = c->last_seq + 1;
	m->job = strdup(c->job);
	m->cwd = strdup(pd->cwd);
	for (m->argc = 0; c->argv[m->argc]; m->argc++)
		;
	m->argv = calloc(m->argc + 1, sizeof(char *));
	for (size_t i = 0; m->argv && i < m->argc; i++)
		m->argv[i] = strdup(c->argv[i]);
	/* The writer's threads inherit this thread's nice value: running them
	 * at a lower priority than the job means a forked checkpoint takes the
	 * CPU the job leaves idle rather than the job's own progress. */
	{
		int old = getpriority(PRIO_PROCESS, (id_t)gettid());
		setpriority(PRIO_PROCESS, (id_t)gettid(), c->writer_nice);
		r = ck_writer_open(c->store, c->job, m->seq, c->prev, &wo, &w);
		setpriority(PRIO_PROCESS, (id_t)gettid(), old);
	}
	if (r < 0)
		goto fail;
	{
		/* Held rounds release the job at RELEASE (the value comes back
		 * in t_rel); others released it right after the fork. */
		uint64_t t_rel = held ? 0 : t_snap;
		r = ck__build_and_commit(c, &w, m, snap, pd, flags, t0, &t_rel);
	}
	if (r < 0)
		goto fail;
	if (!(flags & CK_ROUND_STOP))
		ck__send_done(c, 0);
	if (!c->nofork)
		kill(snap, SIGKILL); /* the snapshot child, never the job */
	if (c->verbose) {
		char req[64] = "";
		if (ck_s3_request_count && ck_s3_request_count() > req0)
			snprintf(req, sizeof(req), ", %" PRIu64 " S3 requests", ck_s3_request_count() - req0);
		fprintf(stderr, "ckrun: checkpoint %" PRIu64 " committed: %" PRIu64 " bytes of memory, %" PRIu64
				" stored, %.3f s (frozen %.3f s)%s\n",
			m->seq, m->logical_bytes, m->stored_bytes, (double)(ck_now_ns() - t0) / 1e9,
			(double)m->frozen_ns / 1e9, req);
	}
	c->last_seq = m->seq;
	ck_manifest_free(c->prev);
	c->prev = m;
	if (ck_store_retain(c->store, c->job, c->keep) < 0)
		fprintf(stderr, "ckrun: warning: retention: %s\n", ck_err_msg());
	*seq_out = c->last_seq;
	free(pd);
	return 0;
fail:
	if (w)
		ck_writer_abort(w);
	ck__send_done(c, r);
	if (snap > 0 && !c->nofork)
		kill(snap, SIGKILL);
	ck_manifest_free(m);
	free(pd);
	return r;
}
