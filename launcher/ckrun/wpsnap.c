/* The write-protect snapshot, ckrun side: see wpsnap.h. One lock guards
 * every block's state; it is held while a block is taken, so a write
 * fault on a block being read waits for the read, and an unmap event is
 * only read from the descriptor (which lets the job's munmap go on) when
 * no block is being read. */
#include "launcher/ckrun/wpsnap.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "launcher/ck_err.h"
#include "launcher/ckrun/ckrun.h"

#define CK__BLOCK (2ull << 20)
/* Blocks the job wrote before the writer read them wait aside; beyond
 * this much the handler lets the job's faults wait for the writer. */
#define CK__ASIDE_MAX (128ull << 20)
#define CK__PM_UFFD_WP (1ull << 57) /* pagemap: the page is write-protected */

enum { CK__UNREAD, CK__ASIDE, CK__DONE };

struct ck__blk {
	uint8_t state;
	uint32_t used; /* bytes the writer consumed */
	uint8_t *buf;
};

struct ck__wrange {
	uint64_t start, end;
	struct ck__blk *blk; /* block k: [max(start, (start/B + k) * B), min(end, (start/B + k + 1) * B)) */
	size_t nblk;
};

struct ck_wp_proc {
	struct ck_wp *wp;
	pid_t pid;
	int32_t jpid;
	int uffd, pagemap;
	struct ck__wrange *r;
	size_t nr;
};

struct ck_wp {
	pthread_mutex_t lock;
	pthread_t th;
	int started, evfd, stop;
	struct ck_wp_proc **procs;
	size_t nprocs;
	uint64_t aside, faults, taken_aside;
	int want_room; /* a fault waits for blocks aside to be consumed */
	int broken;
	char why[512];
};

static void ck__blk_bounds(const struct ck__wrange *r, size_t k, uint64_t *s, uint64_t *e)
{
	uint64_t b = (r->start / CK__BLOCK + k) * CK__BLOCK;

	*s = b > r->start ? b : r->start;
	*e = b + CK__BLOCK < r->end ? b + CK__BLOCK : r->end;
}

static struct ck__wrange *ck__find(const struct ck_wp_proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nr;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (addr < p->r[mid].start)
			hi = mid;
		else if (addr >= p->r[mid].end)
			lo = mid + 1;
		else
			return &p->r[mid];
	}
	return NULL;
}

static int ck__unprotect(struct ck_wp_proc *p, uint64_t s, uint64_t e)
{
	struct uffdio_writeprotect w = {.range = {s, e - s}, .mode = 0};

	return ioctl(p->uffd, UFFDIO_WRITEPROTECT, &w) < 0 ? -errno : 0;
}

static void ck__break(struct ck_wp *wp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The snapshot cannot be completed: let the job run free at once. */
static void ck__break(struct ck_wp *wp, const char *fmt, ...)
{
	va_list ap;

	if (!wp->broken) {
		va_start(ap, fmt);
		vsnprintf(wp->why, sizeof(wp->why), fmt, ap);
		va_end(ap);
	}
	wp->broken = 1;
	for (size_t i = 0; i < wp->nprocs; i++) {
		struct ck_wp_proc *p = wp->procs[i];
		for (size_t j = 0; j < p->nr; j++)
			for (size_t k = 0; k < p->r[j].nblk; k++)
				if (p->r[j].blk[k].state == CK__UNREAD) {
					uint64_t s, e;
					ck__blk_bounds(&p->r[j], k, &s, &e);
					ck__unprotect(p, s, e);
					p->r[j].blk[k].state = CK__DONE;
				}
	}
}

/* Under the lock: block k of r is read aside and its protection lifted.
 * Pages without the write-protect bit were not present at the cut (a
 * present page got the bit then, and loses it only when its block is
 * taken): they read as zeros, whatever the job put there since. */
static int ck__take(struct ck_wp_proc *p, struct ck__wrange *r, size_t k, int handler)
{
	struct ck__blk *b = &r->blk[k];
	uint64_t s, e, pm[CK__BLOCK / 4096];
	uint8_t *buf;
	size_t pages;
	int rc;

	ck__blk_bounds(r, k, &s, &e);
	pages = (e - s) / 4096;
	buf = malloc(e - s);
	if (!buf) {
		ck__break(p->wp, "out of memory for a block of process %d", p->jpid);
		return -ENOMEM;
	}
	if (pread(p->pagemap, pm, pages * 8, (off_t)(s / 4096 * 8)) != (ssize_t)(pages * 8)) {
		ck__break(p->wp, "cannot read the page map of process %d: %s", p->jpid, strerror(errno));
		goto fail;
	}
	/* Only the runs of protected pages are read: reading an absent page
	 * would make it resident (a sparse reservation would come back full). */
	for (size_t i = 0; i < pages;) {
		size_t j = i;

		if (!(pm[i] & CK__PM_UFFD_WP)) {
			memset(buf + i * 4096, 0, 4096);
			i++;
			continue;
		}
		while (j < pages && (pm[j] & CK__PM_UFFD_WP))
			j++;
		rc = ck_mem_read(p->pid, s + i * 4096, buf + i * 4096, (j - i) * 4096);
		if (rc < 0) {
			ck__break(p->wp, "process %d: %s", p->jpid, ck_err_msg());
			goto fail;
		}
		i = j;
	}
	/* EAGAIN: the job is changing its layout and the handler has not read
	 * that event yet. The writer lets it (the bytes read stay valid: the
	 * protected pages cannot change, and an event that reaches this block
	 * while it is still unread breaks the snapshot); the handler itself
	 * answers the fault later (-EAGAIN). */
	while ((rc = ck__unprotect(p, s, e)) == -EAGAIN && !handler) {
		pthread_mutex_unlock(&p->wp->lock);
		usleep(200);
		pthread_mutex_lock(&p->wp->lock);
		if (p->wp->broken || b->state != CK__UNREAD) {
			free(buf);
			return p->wp->broken ? -ESTALE : 0; /* taken meanwhile by the handler */
		}
	}
	if (rc == -EAGAIN) {
		free(buf);
		return -EAGAIN;
	}
	if (rc < 0) { /* the process exec'd or exited: its memory is not ours to read */
		ck__break(p->wp, "process %d left its memory during the snapshot (%s)", p->jpid, strerror(-rc));
		goto fail;
	}
	b->buf = buf;
	b->state = CK__ASIDE;
	p->wp->aside += e - s;
	return 0;
fail:
	free(buf);
	return -ESTALE;
}

int ck_wp_read(struct ck_wp_proc *p, uint64_t addr, void *buf, size_t len)
{
	struct ck_wp *wp = p->wp;
	int rc = 0;

	pthread_mutex_lock(&wp->lock);
	while (len && rc == 0) {
		struct ck__wrange *r = ck__find(p, addr);
		uint64_t s, e;
		size_t k, n;
		struct ck__blk *b;

		if (wp->broken) {
			rc = -ESTALE;
			break;
		}
		if (!r) {
			ck__break(wp, "process %d: 0x%" PRIx64 " is not in its protected memory", p->jpid, addr);
			rc = -ESTALE;
			break;
		}
		k = (size_t)(addr / CK__BLOCK - r->start / CK__BLOCK);
		b = &r->blk[k];
		ck__blk_bounds(r, k, &s, &e);
		if (b->state == CK__UNREAD && (rc = ck__take(p, r, k, 0)) < 0)
			break;
		if (b->state != CK__ASIDE) { /* consumed already: the writer read a byte twice */
			ck__break(wp, "process %d: block at 0x%" PRIx64 " read twice", p->jpid, s);
			rc = -ESTALE;
			break;
		}
		n = e - addr < len ? (size_t)(e - addr) : len;
		memcpy(buf, b->buf + (addr - s), n);
		b->used += (uint32_t)n;
		if (b->used >= e - s) {
			free(b->buf);
			b->buf = NULL;
			b->state = CK__DONE;
			wp->aside -= e - s;
			if (wp->want_room) {
				uint64_t one = 1;
				wp->want_room = 0;
				if (write(wp->evfd, &one, sizeof(one)) < 0) { /* the handler polls again within 1 ms */
				}
			}
		}
		buf = (char *)buf + n;
		addr += n;
		len -= n;
	}
	if (rc < 0)
		ck_err_set("the write-protect snapshot broke: %s", wp->why);
	pthread_mutex_unlock(&wp->lock);
	return rc;
}

/* A layout change reported by the kernel: fine where every block was
 * taken already, fatal where one was not. */
static void ck__layout_event(struct ck_wp_proc *p, uint64_t s, uint64_t e, const char *what)
{
	for (uint64_t a = s & ~(CK__BLOCK - 1); a < e; a += CK__BLOCK) {
		struct ck__wrange *r;
		uint64_t lo = a > s ? a : s;

		/* any range overlapping this block's span */
		for (size_t j = 0; j < p->nr; j++) {
			r = &p->r[j];
			if (r->end <= lo || r->start >= (a + CK__BLOCK < e ? a + CK__BLOCK : e))
				continue;
			size_t k = (size_t)((lo > r->start ? lo : r->start) / CK__BLOCK - r->start / CK__BLOCK);
			if (k < r->nblk && r->blk[k].state == CK__UNREAD) {
				ck__break(p->wp, "process %d %s 0x%" PRIx64 "-0x%" PRIx64 " during the snapshot", p->jpid,
					  what, s, e);
				return;
			}
		}
	}
}

/* Answers a write fault: the block is taken (or was), the page unprotected
 * (which wakes the waiting thread). -EAGAIN: a layout event is still
 * unread, or too much is aside; the fault is answered again later. */
static int ck__fault(struct ck_wp *wp, struct ck_wp_proc *p, uint64_t addr)
{
	uint64_t page = addr & ~4095ull;
	struct ck__wrange *r = ck__find(p, addr);

	if (r) {
		size_t k = (size_t)(addr / CK__BLOCK - r->start / CK__BLOCK);
		if (r->blk[k].state == CK__UNREAD && wp->aside > CK__ASIDE_MAX && !wp->stop && !wp->broken) {
			wp->want_room = 1; /* the writer wakes us when it frees a block */
			return -EAGAIN;
		}
		if (r->blk[k].state == CK__UNREAD && !wp->broken) {
			int rc = ck__take(p, r, k, 1);
			if (rc == -EAGAIN)
				return rc;
			if (rc == 0)
				wp->taken_aside++;
		}
	}
	/* Taken meanwhile, or not ours: lifting again only wakes. */
	return ck__unprotect(p, page, page + 4096) == -EAGAIN ? -EAGAIN : 0;
}

static void ck__layout_msg(struct ck_wp_proc *p, const struct uffd_msg *m)
{
	switch (m->event) {
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		ck__layout_event(p, m->arg.remove.start, m->arg.remove.end,
				 m->event == UFFD_EVENT_UNMAP ? "unmapped" : "discarded");
		break;
	case UFFD_EVENT_REMAP:
		ck__layout_event(p, m->arg.remap.from, m->arg.remap.from + m->arg.remap.len, "moved");
		break;
	default:
		break;
	}
}

struct ck__pending {
	struct ck_wp_proc *p;
	uint64_t addr;
};

static void *ck__handler(void *arg)
{
	struct ck_wp *wp = arg;
	struct pollfd *pf = NULL;
	struct ck_wp_proc **pp = NULL;
	struct ck__pending *pend = NULL;
	size_t cap = 0, npend = 0, pend_cap = 0;

	for (;;) {
		nfds_t n = 1;

		pthread_mutex_lock(&wp->lock);
		if (wp->stop) {
			pthread_mutex_unlock(&wp->lock);
			break;
		}
		if (wp->nprocs + 1 > cap) {
			size_t nc = wp->nprocs + 16;
			struct pollfd *npf = realloc(pf, nc * sizeof(*npf));
			struct ck_wp_proc **npp = npf ? realloc(pp, nc * sizeof(*npp)) : NULL;
			if (npf)
				pf = npf;
			if (npp)
				pp = npp;
			if (npf && npp)
				cap = nc;
		}
		if (!cap) { /* out of memory: try again shortly */
			pthread_mutex_unlock(&wp->lock);
			usleep(1000);
			continue;
		}
		pf[0] = (struct pollfd){wp->evfd, POLLIN, 0};
		for (size_t i = 0; i < wp->nprocs && n < cap; i++) {
			pp[n] = wp->procs[i];
			pf[n++] = (struct pollfd){wp->procs[i]->uffd, POLLIN, 0};
		}
		pthread_mutex_unlock(&wp->lock);
		/* Faults waiting for an unread layout event: look again soon. */
		if (poll(pf, n, npend ? 1 : -1) < 0)
			continue;
		if (pf[0].revents) {
			uint64_t v;
			if (read(wp->evfd, &v, sizeof(v)) < 0)
				continue;
		}
		pthread_mutex_lock(&wp->lock);
		for (nfds_t i = 1; i < n; i++) {
			struct uffd_msg msg[16];
			ssize_t got;

			if (!pf[i].revents)
				continue;
			/* Read under the lock: an unmap event lets the job go
			 * on, and no block may be half read when it does. */
			while ((got = read(pp[i]->uffd, msg, sizeof(msg))) > 0) {
				for (size_t j = 0; j < (size_t)got / sizeof(msg[0]); j++) {
					if (msg[j].event != UFFD_EVENT_PAGEFAULT) {
						ck__layout_msg(pp[i], &msg[j]);
						continue;
					}
					wp->faults++;
					if (npend == pend_cap) {
						size_t nc = pend_cap ? pend_cap * 2 : 64;
						struct ck__pending *np = realloc(pend, nc * sizeof(*np));
						if (!np) {
							ck__break(wp, "out of memory for pending faults");
							continue;
						}
						pend = np;
						pend_cap = nc;
					}
					pend[npend++] = (struct ck__pending){pp[i], msg[j].arg.pagefault.address};
				}
			}
		}
		/* Every message read (so no event is pending): answer the faults. */
		{
			size_t keep = 0;
			for (size_t i = 0; i < npend; i++)
				if (ck__fault(wp, pend[i].p, pend[i].addr) == -EAGAIN)
					pend[keep++] = pend[i];
			npend = keep;
		}
		pthread_mutex_unlock(&wp->lock);
	}
	free(pend);
	free(pf);
	free(pp);
	return NULL;
}

int ck_wp_add(struct ck_wp **wpp, pid_t pid, int32_t jpid, int uffd, const struct ck_wp_info *info,
	      struct ck_wp_proc **out)
{
	struct ck_wp *wp = *wpp;
	struct ck_wp_range *rg = NULL;
	struct ck_wp_proc *p = NULL, **np;
	char path[64];
	int rc;

	if (info->nranges > CK_WP_MAX_RANGES) {
		ck_err_set("process %d: %u protected ranges", jpid, info->nranges);
		close(uffd);
		return -EPROTO;
	}
	if (!wp) {
		if (!(wp = calloc(1, sizeof(*wp)))) {
			close(uffd);
			return -ENOMEM;
		}
		pthread_mutex_init(&wp->lock, NULL);
		wp->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (wp->evfd < 0 || pthread_create(&wp->th, NULL, ck__handler, wp) != 0) {
			ck_err_set("cannot start the write-protect handler: %s", strerror(errno));
			if (wp->evfd >= 0)
				close(wp->evfd);
			free(wp);
			close(uffd);
			return -EAGAIN;
		}
		wp->started = 1;
		*wpp = wp;
	}
	rc = -ENOMEM;
	p = calloc(1, sizeof(*p));
	rg = calloc(info->nranges ? info->nranges : 1, sizeof(*rg));
	if (!p || !rg)
		goto fail;
	p->wp = wp;
	p->pid = pid;
	p->jpid = jpid;
	p->uffd = uffd;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	p->pagemap = open(path, O_RDONLY | O_CLOEXEC);
	if (p->pagemap < 0) {
		rc = -errno;
		ck_err_set("cannot open %s: %s", path, strerror(errno));
		goto fail;
	}
	if ((rc = ck_mem_read(pid, info->ranges, rg, info->nranges * sizeof(*rg))) < 0)
		goto fail;
	rc = -ENOMEM;
	if (!(p->r = calloc(info->nranges ? info->nranges : 1, sizeof(*p->r))))
		goto fail;
	for (uint32_t i = 0; i < info->nranges; i++) {
		struct ck__wrange *r = &p->r[i];
		if (rg[i].end <= rg[i].start || (rg[i].start | rg[i].end) & 4095 || (i && rg[i].start < rg[i - 1].end)) {
			ck_err_set("process %d: bad protected range 0x%" PRIx64 "-0x%" PRIx64, jpid, rg[i].start,
				   rg[i].end);
			rc = -EPROTO;
			goto fail;
		}
		r->start = rg[i].start;
		r->end = rg[i].end;
		r->nblk = (size_t)((r->end - 1) / CK__BLOCK - r->start / CK__BLOCK + 1);
		p->nr++;
		if (!(r->blk = calloc(r->nblk, sizeof(*r->blk))))
			goto fail;
	}
	pthread_mutex_lock(&wp->lock);
	np = realloc(wp->procs, (wp->nprocs + 1) * sizeof(*np));
	if (np) {
		wp->procs = np;
		np[wp->nprocs++] = p;
	}
	pthread_mutex_unlock(&wp->lock);
	if (!np)
		goto fail;
	{
		uint64_t one = 1;
		if (write(wp->evfd, &one, sizeof(one)) < 0) { /* the counter cannot overflow here */
		}
	}
	free(rg);
	*out = p;
	return 0;
fail:
	if (p) {
		for (size_t i = 0; i < p->nr; i++)
			free(p->r[i].blk);
		free(p->r);
		if (p->pagemap >= 0)
			close(p->pagemap);
	}
	free(p);
	free(rg);
	close(uffd); /* the last reference: the process is unprotected */
	return rc;
}

int ck_wp_covers(const struct ck_wp_proc *p, uint64_t start, uint64_t end)
{
	const struct ck__wrange *r = ck__find(p, start);

	return r && end <= r->end;
}

int ck_wp_check(struct ck_wp *wp)
{
	int rc = 0;

	if (!wp)
		return 0;
	pthread_mutex_lock(&wp->lock);
	if (wp->broken) {
		ck_err_set("the write-protect snapshot broke: %s", wp->why);
		rc = -ESTALE;
	}
	pthread_mutex_unlock(&wp->lock);
	return rc;
}

void ck_wp_stop(struct ck_wp *wp, uint64_t *faults, uint64_t *blocks_aside)
{
	if (!wp)
		return;
	pthread_mutex_lock(&wp->lock);
	wp->stop = 1;
	pthread_mutex_unlock(&wp->lock);
	if (wp->started) {
		uint64_t one = 1;
		if (write(wp->evfd, &one, sizeof(one)) < 0) { /* the thread also sees stop on its next turn */
		}
		pthread_join(wp->th, NULL);
	}
	if (faults)
		*faults = wp->faults;
	if (blocks_aside)
		*blocks_aside = wp->taken_aside;
	for (size_t i = 0; i < wp->nprocs; i++) {
		struct ck_wp_proc *p = wp->procs[i];
		for (size_t j = 0; j < p->nr; j++) {
			for (size_t k = 0; k < p->r[j].nblk; k++)
				free(p->r[j].blk[k].buf);
			free(p->r[j].blk);
		}
		free(p->r);
		close(p->pagemap);
		/* The last reference (libckpt closed its own): closing it
		 * unregisters every range, blocks never taken included (a
		 * round that ended early), and wakes any thread still waiting. */
		close(p->uffd);
		free(p);
	}
	free(wp->procs);
	close(wp->evfd);
	pthread_mutex_destroy(&wp->lock);
	free(wp);
}
