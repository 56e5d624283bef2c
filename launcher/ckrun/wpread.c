/* The write-protect snapshot, ckrun side: see wpread.h. One lock guards
 * every block's state; it is held while a block is taken, so a write
 * fault on a block being read waits for the read, and an unmap event is
 * only read from the descriptor (which lets the job's munmap go on) when
 * no block is being read. */
#include "launcher/ckrun/wpread.h"

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
#include <sys/mman.h>
#include <unistd.h>

#include "launcher/common/bigbuf.h"
#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/wpcut.h"
#include "launcher/image/chunkio.h"

#define CK__BLOCK (2ull << 20)
#define CK__WRITER_SLOTS 8u /* slots of the pool only the writer may use */
#define CK__LIFT_STEP (64ull << 20)

/* BUSY: being read (outside the lock); DONE: consumed, or given up. */
enum { CK__UNREAD, CK__BUSY, CK__ASIDE, CK__DONE };

struct ck__blk {
	uint8_t state;
	uint8_t lifted; /* its protection was lifted (only once its bytes are safe) */
	uint8_t pooled; /* buf is a slot of the pool (else malloc'd by the writer) */
	uint8_t zero;   /* ASIDE without buf or spill: held no page at the cut */
	uint32_t used;  /* bytes the writer consumed */
	uint32_t spill; /* ASIDE without buf: slot spill - 1 of the spill file */
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
	struct ck_wp_cut cut; /* what was present and protected at the cut */
	/* Pre-armed, before its cut: every block is DONE (nothing to read),
	 * so a write fault only lifts its block. Frozen: its faults wait
	 * (the process is parked and protects again what was lifted). */
	int pre, frozen;
};

struct ck_wp {
	pthread_mutex_t lock;
	pthread_t th;
	int started, evfd, stop;
	struct ck_wp_proc **procs;
	size_t nprocs;
	uint64_t faults, taken_aside, pre_faults;
	int nbusy;             /* blocks being read: no event is read meanwhile */
	pthread_cond_t change; /* a block stopped being BUSY */
	int want_room; /* a fault waits for blocks aside to be consumed */
	/* Blocks the job wrote before the writer read them wait aside in a
	 * pool of 2 MiB slots (huge pages: on a VM a fresh small page costs
	 * a hypervisor trip); when it is full the job's faults wait for the
	 * writer. Blocks the writer takes itself use the pool or malloc. */
	uint8_t *pool; /* pool_len bytes, ck_bigbuf_get's */
	size_t pool_len;
	uint32_t *free_slot, nfree;
	/* When the pool is full, blocks the job writes go to an unlinked
	 * file instead (through the bounce slot, the handler's alone): the
	 * job waits for a 2 MiB write, not for the writer to reach that part
	 * of its memory, which can be seconds. */
	uint8_t *bounce;
	int spill_fd;      /* -1: not opened yet; -2: cannot be had */
	uint32_t *spill_free, nspill_free, spill_cap, spill_slots;
	uint64_t spilled;
	uint64_t split_lifts; /* runs the round's end lifted in parts (ck__lift) */
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

static void ck__buf_free(struct ck_wp *wp, uint8_t *buf, int pooled)
{
	if (!pooled) {
		free(buf);
		return;
	}
	wp->free_slot[wp->nfree++] = (uint32_t)((size_t)(buf - wp->pool) / CK__BLOCK);
	if (wp->want_room) {
		uint64_t one = 1;
		wp->want_room = 0;
		if (write(wp->evfd, &one, sizeof(one)) < 0) { /* the handler polls again within 1 ms */
		}
	}
}

/* Under the lock: what held a block aside is free again (a spilled
 * block's buf is the bounce slot, not freed). */
static void ck__aside_free(struct ck_wp *wp, uint8_t *buf, int pooled, uint32_t spill)
{
	if (spill)
		wp->spill_free[wp->nspill_free++] = spill;
	else
		ck__buf_free(wp, buf, pooled);
}

/* Under the lock: a free slot of the spill file (1-based), or 0. */
static uint32_t ck__spill_slot(struct ck_wp *wp)
{
	if (wp->spill_fd == -1) {
		const char *dir = getenv("TMPDIR");
		/* /var/tmp: on disk where /tmp may be memory (tmpfs) */
		wp->spill_fd = open(dir && *dir ? dir : "/var/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (wp->spill_fd < 0)
			wp->spill_fd = -2;
	}
	if (wp->spill_fd < 0)
		return 0;
	if (wp->nspill_free)
		return wp->spill_free[--wp->nspill_free];
	if (wp->spill_slots == wp->spill_cap) {
		uint32_t nc = wp->spill_cap ? wp->spill_cap * 2 : 64;
		uint32_t *n = realloc(wp->spill_free, nc * sizeof(*n));
		if (!n)
			return 0;
		wp->spill_free = n;
		wp->spill_cap = nc;
	}
	return ++wp->spill_slots;
}

/* Under the lock: block k of r is read aside and its protection lifted.
 * Pages without the write-protect bit were not present at the cut (a
 * present page got the bit then, and loses it only when its block is
 * taken): they read as zeros, whatever the job put there since. */
static int ck__take(struct ck_wp_proc *p, struct ck__wrange *r, size_t k, int handler)
{
	struct ck_wp *wp = p->wp;
	struct ck__blk *b = &r->blk[k];
	uint64_t s, e, pm[CK__BLOCK / 4096];
	uint8_t *buf;
	size_t pages;
	uint32_t spill = 0;
	uint64_t moved = 0;
	int rc = 0, pooled = 0, spill_failed;

	ck__blk_bounds(r, k, &s, &e);
	pages = (e - s) / 4096;
	/* The handler leaves a few slots to the writer: a malloc'd block
	 * costs a fault per page here, a recycled slot none. */
	if (wp->nfree > (handler ? CK__WRITER_SLOTS : 0)) {
		pooled = 1;
		buf = wp->pool + (size_t)wp->free_slot[--wp->nfree] * CK__BLOCK;
	} else if (handler && (spill = ck__spill_slot(wp)) != 0) {
		buf = wp->bounce;
	} else if (handler) {
		wp->want_room = 1; /* the writer wakes us when it frees a slot */
		return -EAGAIN;
	} else if (!(buf = malloc(e - s))) {
		ck__break(wp, "out of memory for a block of process %d", p->jpid);
		return -ENOMEM;
	}
	/* Read without the lock (the writer's other thread and the handler go
	 * on); the handler reads no layout event until nothing is BUSY. */
	b->state = CK__BUSY;
	wp->nbusy++;
	pthread_mutex_unlock(&wp->lock);
	if (pread(p->pagemap, pm, pages * 8, (off_t)(s / 4096 * 8)) != (ssize_t)(pages * 8))
		rc = errno ? -errno : -EIO;
	/* Every page protected at the cut must be protected still (nothing
	 * but taking its block lifts it): one that is not was unmapped,
	 * discarded or moved by the job, whose layout event may not be read
	 * yet. Its zeros are not what the cut held. */
	if (rc == 0)
		moved = ck_wp_cut_mismatch(&p->cut, s, pm, pages);
	/* Only the runs of protected pages are read: reading an absent page
	 * would make it resident (a sparse reservation would come back full). */
	for (size_t i = 0; i < pages && rc == 0;) {
		size_t j = i;

		if (!(pm[i] & CK_PM_UFFD_WP)) {
			memset(buf + i * 4096, 0, 4096);
			i++;
			continue;
		}
		while (j < pages && (pm[j] & CK_PM_UFFD_WP))
			j++;
		rc = ck_mem_read(p->pid, s + i * 4096, buf + i * 4096, (j - i) * 4096);
		i = j;
	}
	spill_failed = rc == 0 && spill &&
		       pwrite(wp->spill_fd, buf, e - s, (off_t)(spill - 1) * (off_t)CK__BLOCK) != (ssize_t)(e - s);
	pthread_mutex_lock(&wp->lock);
	wp->nbusy--;
	pthread_cond_broadcast(&wp->change);
	if (spill_failed) { /* a full disk: this block waits for room in the pool instead */
		ck__aside_free(wp, buf, pooled, spill);
		b->state = CK__UNREAD;
		wp->want_room = 1;
		return -EAGAIN;
	}
	if (rc < 0 && !wp->broken)
		ck__break(wp, "process %d: cannot read its memory at 0x%" PRIx64 ": %s", p->jpid, s, strerror(-rc));
	if (moved && !wp->broken)
		ck__break(wp, "process %d unmapped, discarded or moved its memory at 0x%" PRIx64 " during the snapshot",
			  p->jpid, moved);
	if (wp->broken)
		goto fail;
	/* The writer leaves the protection on: lifting it block by block
	 * flushes the job's TLB each time (on this VM that tripled the job's
	 * own CPU time). ck_wp_stop lifts what is left at the end; a write
	 * meanwhile faults and lifts that block (ck__fault).
	 * The handler lifts the block it takes for the job at once.
	 * EAGAIN: the job is changing its layout and that event is still
	 * unread; the fault is answered after the handler reads it. */
	if (handler) {
		rc = ck__unprotect(p, s, e);
		if (rc == -EAGAIN) {
			ck__aside_free(wp, buf, pooled, spill);
			b->state = CK__UNREAD;
			return -EAGAIN;
		}
		if (rc < 0) { /* the process exec'd or exited: its memory is not ours to read */
			ck__break(wp, "process %d left its memory during the snapshot (%s)", p->jpid, strerror(-rc));
			goto fail;
		}
		b->lifted = 1;
	}
	b->buf = spill ? NULL : buf;
	b->pooled = (uint8_t)pooled;
	b->spill = spill;
	b->state = CK__ASIDE;
	if (spill)
		wp->spilled++;
	return 0;
fail:
	ck__aside_free(wp, buf, pooled, spill);
	b->state = CK__DONE;
	return -ESTALE;
}

int ck_wp_read(struct ck_wp_proc *p, uint64_t addr, void *buf, size_t len)
{
	struct ck_wp *wp = p->wp;
	char *out = buf; /* NULL: a probe (CK_WADD_PROBE) */
	size_t at = 0, zfrom = 0, zlen = 0; /* zeros owed to out[zfrom, zfrom + zlen) */
	int rc = 0;

	pthread_mutex_lock(&wp->lock);
	/* A probe consumes nothing unless the whole span held no page at
	 * the cut: then every part of it reads as zeros. */
	if (!out && ck_wp_cut_any(&p->cut, addr, addr + len)) {
		pthread_mutex_unlock(&wp->lock);
		return 0;
	}
	while (at < len && rc == 0) {
		struct ck__wrange *r = ck__find(p, addr + at);
		uint64_t s, e;
		size_t k, n;
		struct ck__blk *b;

		if (wp->broken) {
			rc = -ESTALE;
			break;
		}
		if (!r) {
			ck__break(wp, "process %d: 0x%" PRIx64 " is not in its protected memory", p->jpid, addr + at);
			rc = -ESTALE;
			break;
		}
		k = (size_t)((addr + at) / CK__BLOCK - r->start / CK__BLOCK);
		b = &r->blk[k];
		ck__blk_bounds(r, k, &s, &e);
		n = e - (addr + at) < len - at ? (size_t)(e - (addr + at)) : len - at;
		if (b->state == CK__BUSY) { /* the handler or our other thread reads it */
			pthread_cond_wait(&wp->change, &wp->lock);
			continue;
		}
		if (b->state == CK__UNREAD && !ck_wp_cut_any(&p->cut, s, e)) {
			/* Nothing to take: reading and scanning a sparse
			 * reservation's zeros cost seconds per 64 GiB. */
			b->state = CK__ASIDE;
			b->zero = 1;
		}
		if (b->state == CK__UNREAD && !out) {
			/* a probed part of a block holding pages elsewhere: counted,
			 * the block taken by whoever reads the rest */
			b->used += (uint32_t)n;
			at += n;
			continue;
		}
		if (b->state == CK__UNREAD) {
			if ((rc = ck__take(p, r, k, 0)) < 0)
				break;
			continue; /* the lock was let go: look again */
		}
		if (b->state != CK__ASIDE) { /* consumed already: the writer read a byte twice */
			ck__break(wp, "process %d: block at 0x%" PRIx64 " read twice", p->jpid, s);
			rc = -ESTALE;
			break;
		}
		if (b->zero || !out) { /* written only if data follows in this request */
			if (!zlen)
				zfrom = at;
			zlen += n;
			goto counted;
		}
		if (zlen) {
			memset(out + zfrom, 0, zlen);
			zlen = 0;
		}
		/* Copied without the lock: only the consumer of its last byte
		 * frees a block, and this part is not counted yet. */
		pthread_mutex_unlock(&wp->lock);
		if (!b->spill)
			memcpy(out + at, b->buf + (addr + at - s), n);
		else if (pread(wp->spill_fd, out + at, n,
			       (off_t)(b->spill - 1) * (off_t)CK__BLOCK + (off_t)(addr + at - s)) != (ssize_t)n)
			rc = errno ? -errno : -EIO;
		pthread_mutex_lock(&wp->lock);
		if (rc < 0) {
			ck__break(wp, "process %d: cannot read back a block it rewrote (at 0x%" PRIx64 ") from the spill file: %s",
				  p->jpid, s, strerror(-rc));
			break;
		}
counted:
		b->used += (uint32_t)n;
		if (b->used >= e - s) {
			ck__aside_free(wp, b->buf, b->pooled, b->spill);
			b->buf = NULL;
			b->spill = 0;
			b->state = CK__DONE;
		}
		at += n;
	}
	if (rc < 0)
		ck_err_set("the write-protect snapshot broke: %s", wp->why);
	pthread_mutex_unlock(&wp->lock);
	if (rc == 0 && !out)
		return CK_READ_ZEROS;
	if (rc == 0 && zlen) {
		if (zfrom == 0)
			return CK_READ_ZEROS; /* the whole request: out as it was */
		memset(out + zfrom, 0, zlen);
	}
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
			uint64_t hi = a + CK__BLOCK < e ? a + CK__BLOCK : e;
			/* Only pages the cut held count: those absent then read as
			 * zeros whatever happens to them now. */
			if (k < r->nblk && (r->blk[k].state == CK__UNREAD || r->blk[k].state == CK__BUSY) &&
			    ck_wp_cut_any(&p->cut, lo > r->start ? lo : r->start, hi < r->end ? hi : r->end)) {
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
		struct ck__blk *b = &r->blk[k];
		if (b->state == CK__BUSY)
			return -EAGAIN; /* being read: answered when it is taken */
		if (b->state == CK__UNREAD && !wp->broken) {
			int rc = ck__take(p, r, k, 1);
			if (rc == -EAGAIN)
				return rc;
			if (rc == 0)
				wp->taken_aside++;
		}
		if (!b->lifted && (b->state == CK__ASIDE || b->state == CK__DONE)) {
			/* read by the writer, still protected: lift the block */
			uint64_t s, e;
			int rc;
			ck__blk_bounds(r, k, &s, &e);
			rc = ck__unprotect(p, s, e);
			if (rc == -EAGAIN)
				return rc;
			if (rc == 0) {
				b->lifted = 1;
				return 0;
			}
			/* (a mapping made inside it since: the round's end
			 * lifts the block in parts, ck__lift) */
		}
	}
	/* Lifted already (a fault that raced with it), or not ours: lifting
	 * the page again only wakes the thread. If even that fails (the page
	 * is gone), wake it anyway: it faults again, or finds its page gone,
	 * rather than wait for ever. */
	{
		int rc = ck__unprotect(p, page, page + 4096);
		if (rc == -EAGAIN)
			return rc;
		if (rc < 0) {
			struct uffdio_range wr = {page, 4096};
			ioctl(p->uffd, UFFDIO_WAKE, &wr);
		}
	}
	return 0;
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

/* A layout event held back by the test knob of ck__handler. */
struct ck__late {
	struct ck_wp_proc *p;
	struct uffd_msg msg;
	uint64_t due;
};

static int ck__late_add(struct ck__late **v, size_t *n, size_t *cap, struct ck_wp_proc *p, const struct uffd_msg *m,
			uint64_t due)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct ck__late *nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = (struct ck__late){p, *m, due};
	return 0;
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
	/* Test knob: layout events take effect this much after they are
	 * read (the job's munmap goes on at once), as if the kernel were that
	 * slow to queue them: the writer then meets memory the job unmapped
	 * before ckrun knows of it (CKPT_TEST_WP_EVENT_DELAY_MS). */
	const char *delay = getenv("CKPT_TEST_WP_EVENT_DELAY_MS");
	uint64_t event_delay_ns = delay ? (uint64_t)atoi(delay) * 1000000u : 0;
	struct ck__late *late = NULL;
	size_t nlate = 0, late_cap = 0;

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
		if (poll(pf, n, npend || nlate ? 1 : -1) < 0)
			continue;
		if (pf[0].revents) {
			uint64_t v;
			if (read(wp->evfd, &v, sizeof(v)) < 0)
				continue;
		}
		pthread_mutex_lock(&wp->lock);
		/* No block half read when an event lets the job's munmap go on. */
		while (wp->nbusy)
			pthread_cond_wait(&wp->change, &wp->lock);
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
						if (event_delay_ns && ck__late_add(&late, &nlate, &late_cap, pp[i], &msg[j],
										   ck_now_ns() + event_delay_ns) == 0)
							continue;
						ck__layout_msg(pp[i], &msg[j]);
						continue;
					}
					if (pp[i]->pre)
						wp->pre_faults++;
					else
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
		if (nlate) {
			uint64_t now = ck_now_ns();
			size_t keep = 0;
			for (size_t i = 0; i < nlate; i++)
				if (late[i].due <= now)
					ck__layout_msg(late[i].p, &late[i].msg);
				else
					late[keep++] = late[i];
			nlate = keep;
		}
		/* Every message read (so no event is pending): answer the faults. */
		{
			size_t keep = 0;
			for (size_t i = 0; i < npend; i++)
				if (pend[i].p->frozen || ck__fault(wp, pend[i].p, pend[i].addr) == -EAGAIN)
					pend[keep++] = pend[i];
			npend = keep;
		}
		pthread_mutex_unlock(&wp->lock);
	}
	free(late);
	free(pend);
	free(pf);
	free(pp);
	return NULL;
}

/* The pool: aside_max bytes in 2 MiB slots for the handler, and a few
 * for the writer; 2 MiB aligned, huge pages. */
static int ck__pool_init(struct ck_wp *wp, uint64_t aside_max)
{
	uint32_t n = (uint32_t)(aside_max / CK__BLOCK) + CK__WRITER_SLOTS + 1; /* + the bounce slot */

	wp->free_slot = calloc(n, sizeof(*wp->free_slot));
	wp->pool_len = (size_t)n * CK__BLOCK;
	wp->pool = wp->free_slot ? ck_bigbuf_get(wp->pool_len) : NULL;
	if (!wp->pool) {
		free(wp->free_slot);
		wp->free_slot = NULL;
		return -ENOMEM;
	}
	wp->bounce = wp->pool + (size_t)(n - 1) * CK__BLOCK;
	for (uint32_t i = 0; i < n - 1; i++)
		wp->free_slot[wp->nfree++] = n - 2 - i;
	wp->spill_fd = -1;
	return 0;
}

/* The round's handler and pool, on first use. */
static int ck__wp_get(struct ck_wp **wpp, uint64_t aside_max)
{
	struct ck_wp *wp = *wpp;

	if (wp)
		return 0;
	if (!(wp = calloc(1, sizeof(*wp))))
		return -ENOMEM;
	pthread_mutex_init(&wp->lock, NULL);
	pthread_cond_init(&wp->change, NULL);
	wp->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wp->evfd < 0 || ck__pool_init(wp, aside_max) < 0 || pthread_create(&wp->th, NULL, ck__handler, wp) != 0) {
		ck_err_set("cannot start the write-protect handler: %s", strerror(errno));
		if (wp->evfd >= 0)
			close(wp->evfd);
		ck_bigbuf_put(wp->pool, wp->pool_len);
		free(wp->free_slot);
		free(wp);
		return -EAGAIN;
	}
	wp->started = 1;
	*wpp = wp;
	return 0;
}

static void ck__wake(struct ck_wp *wp)
{
	uint64_t one = 1;

	if (write(wp->evfd, &one, sizeof(one)) < 0) { /* the counter cannot overflow here */
	}
}

static void ck__ranges_free(struct ck__wrange *r, size_t nr)
{
	for (size_t i = 0; i < nr; i++) {
		for (size_t k = 0; k < r[i].nblk; k++)
			if (!r[i].blk[k].pooled)
				free(r[i].blk[k].buf);
		free(r[i].blk);
	}
	free(r);
}

/* The ranges the process protected, read from its memory, as blocks in
 * `state`; rg gets the raw ranges (the caller frees both). */
static int ck__ranges_load(pid_t pid, int32_t jpid, const struct ck_wp_info *info, uint8_t state,
			   struct ck__wrange **out, size_t *nout, struct ck_wp_range **rgout)
{
	struct ck_wp_range *rg = NULL;
	struct ck__wrange *r = NULL;
	size_t nr = 0;
	int rc = -ENOMEM;

	if (info->nranges > CK_WP_MAX_RANGES) {
		ck_err_set("process %d: %u protected ranges", jpid, info->nranges);
		return -EPROTO;
	}
	if (!(rg = calloc(info->nranges ? info->nranges : 1, sizeof(*rg))) ||
	    !(r = calloc(info->nranges ? info->nranges : 1, sizeof(*r))))
		goto fail;
	if ((rc = ck_mem_read(pid, info->ranges, rg, info->nranges * sizeof(*rg))) < 0)
		goto fail;
	for (uint32_t i = 0; i < info->nranges; i++) {
		struct ck__wrange *w = &r[i];
		if (rg[i].end <= rg[i].start || (rg[i].start | rg[i].end) & 4095 || (i && rg[i].start < rg[i - 1].end)) {
			ck_err_set("process %d: bad protected range 0x%" PRIx64 "-0x%" PRIx64, jpid, rg[i].start,
				   rg[i].end);
			rc = -EPROTO;
			goto fail;
		}
		w->start = rg[i].start;
		w->end = rg[i].end;
		w->nblk = (size_t)((w->end - 1) / CK__BLOCK - w->start / CK__BLOCK + 1);
		nr++;
		rc = -ENOMEM;
		if (!(w->blk = calloc(w->nblk, sizeof(*w->blk))))
			goto fail;
		for (size_t k = 0; k < w->nblk; k++)
			w->blk[k].state = state;
	}
	*out = r;
	*nout = nr;
	*rgout = rg;
	return 0;
fail:
	ck__ranges_free(r, nr);
	free(rg);
	return rc;
}

/* A process's record, its page map open; not yet served. */
static int ck__proc_new(struct ck_wp *wp, pid_t pid, int32_t jpid, int uffd, struct ck_wp_proc **out)
{
	struct ck_wp_proc *p = calloc(1, sizeof(*p));
	char path[64];

	if (!p)
		return -ENOMEM;
	p->wp = wp;
	p->pid = pid;
	p->jpid = jpid;
	p->uffd = uffd;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", pid);
	p->pagemap = open(path, O_RDONLY | O_CLOEXEC);
	if (p->pagemap < 0) {
		int rc = -errno;
		ck_err_set("cannot open %s: %s", path, strerror(errno));
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static void ck__proc_free(struct ck_wp_proc *p)
{
	ck__ranges_free(p->r, p->nr);
	ck_wp_cut_free(&p->cut);
	close(p->pagemap);
	free(p);
}

/* The handler serves it from now on. */
static int ck__proc_publish(struct ck_wp *wp, struct ck_wp_proc *p)
{
	struct ck_wp_proc **np;

	pthread_mutex_lock(&wp->lock);
	np = realloc(wp->procs, (wp->nprocs + 1) * sizeof(*np));
	if (np) {
		wp->procs = np;
		np[wp->nprocs++] = p;
	}
	pthread_mutex_unlock(&wp->lock);
	if (!np)
		return -ENOMEM;
	ck__wake(wp);
	return 0;
}

/* The process is parked at its cut: the blocks to read, and what was
 * protected then. */
static int ck__cut_load(struct ck_wp_proc *p, const struct ck_wp_info *info, struct ck__wrange **r, size_t *nr,
			struct ck_wp_cut *cut)
{
	struct ck_wp_range *rg = NULL;
	int rc = ck__ranges_load(p->pid, p->jpid, info, CK__UNREAD, r, nr, &rg);

	if (rc < 0)
		return rc;
	if ((rc = ck_wp_cut_scan(p->pagemap, rg, info->nranges, cut)) < 0) {
		ck_err_set("process %d: cannot read its page map: %s", p->jpid, strerror(-rc));
		ck__ranges_free(*r, *nr);
		*r = NULL;
		*nr = 0;
		ck_wp_cut_free(cut);
	}
	free(rg);
	return rc;
}

int ck_wp_add(struct ck_wp **wpp, uint64_t aside_max, pid_t pid, int32_t jpid, int uffd,
	      const struct ck_wp_info *info, struct ck_wp_proc **out)
{
	struct ck_wp_proc *p = NULL;
	int rc;

	if ((rc = ck__wp_get(wpp, aside_max)) < 0 || (rc = ck__proc_new(*wpp, pid, jpid, uffd, &p)) < 0)
		goto fail;
	if ((rc = ck__cut_load(p, info, &p->r, &p->nr, &p->cut)) < 0 || (rc = ck__proc_publish(*wpp, p)) < 0) {
		ck__proc_free(p);
		goto fail;
	}
	*out = p;
	return 0;
fail:
	close(uffd); /* the last reference: the process is unprotected */
	return rc;
}

int ck_wp_prearm(struct ck_wp **wpp, uint64_t aside_max, pid_t pid, int32_t jpid, int uffd,
		 const struct ck_wp_info *info, struct ck_wp_proc **out)
{
	struct ck_wp_range *rg = NULL;
	struct ck_wp_proc *p = NULL;
	int rc;

	if ((rc = ck__wp_get(wpp, aside_max)) < 0 || (rc = ck__proc_new(*wpp, pid, jpid, uffd, &p)) < 0)
		goto fail;
	p->pre = 1;
	/* every block DONE: a fault only lifts its block */
	if ((rc = ck__ranges_load(pid, jpid, info, CK__DONE, &p->r, &p->nr, &rg)) < 0 ||
	    (rc = ck__proc_publish(*wpp, p)) < 0) {
		ck__proc_free(p);
		goto fail;
	}
	free(rg);
	*out = p;
	return 0;
fail:
	free(rg);
	close(uffd); /* the job's copy is closed once it has protected: then nothing is */
	return rc;
}

void ck_wp_freeze(struct ck_wp_proc *p, int on)
{
	pthread_mutex_lock(&p->wp->lock);
	p->frozen = on;
	pthread_mutex_unlock(&p->wp->lock);
	if (!on)
		ck__wake(p->wp);
}

int ck_wp_activate(struct ck_wp_proc *p, const struct ck_wp_info *info)
{
	struct ck_wp *wp = p->wp;
	struct ck__wrange *r = NULL, *old;
	struct ck_wp_cut cut = {0};
	size_t nr = 0, nold;
	int rc = ck__cut_load(p, info, &r, &nr, &cut);

	if (rc < 0) {
		ck_wp_freeze(p, 0); /* the round forks: lift its writes again */
		return rc;
	}
	pthread_mutex_lock(&wp->lock);
	old = p->r;
	nold = p->nr;
	p->r = r;
	p->nr = nr;
	ck_wp_cut_free(&p->cut);
	p->cut = cut;
	p->pre = 0;
	p->frozen = 0;
	pthread_mutex_unlock(&wp->lock);
	ck__ranges_free(old, nold);
	ck__wake(wp);
	return 0;
}

int ck_wp_fd(const struct ck_wp_proc *p)
{
	return p->uffd;
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

/* Unprotects [S, E). The kernel stops at the first mapping in the run
 * that is not registered (-ENOENT), leaving the rest protected: the job
 * mapped something new inside a range since it was scanned (a Python
 * rank importing its modules). Such a run is lifted in halves, down to
 * single pages only next to what fails (a 4 KiB lift splits a huge
 * page). A page left protected here is not harmless: a pre-armed process
 * holds its own reference to the descriptor during the round, so closing
 * ckrun's does not unregister, and a write there would wait for a
 * handler that is gone (seen: a rank's manager thread hung in a fault on
 * its own static buffer, the job stuck for good). -ESRCH: the process is
 * gone. */
static int ck__lift(struct ck_wp_proc *p, uint64_t s, uint64_t e)
{
	uint64_t mid;
	int rc;

	while ((rc = ck__unprotect(p, s, e)) == -EAGAIN) /* a layout event first */
		usleep(1000);
	if (rc == 0 || rc == -ESRCH)
		return rc;
	if (e - s <= 4096)
		return 0; /* not registered (or gone): nothing to lift */
	p->wp->split_lifts++;
	mid = s + ((e - s) / 2 & ~4095ull);
	if ((rc = ck__lift(p, s, mid)) < 0)
		return rc;
	return ck__lift(p, mid, e);
}

/* Unprotects every block not lifted yet, in runs of up to CK__LIFT_STEP
 * (one ioctl never holds the job's page tables for long). */
static void ck__lift_rest(struct ck_wp_proc *p)
{
	for (size_t j = 0; j < p->nr; j++) {
		struct ck__wrange *r = &p->r[j];
		uint64_t run_s = 0, run_e = 0, s, e;

		for (size_t k = 0; k <= r->nblk; k++) {
			int rc;
			if (k < r->nblk) {
				ck__blk_bounds(r, k, &s, &e);
				if (!r->blk[k].lifted) {
					if (run_e == run_s)
						run_s = s;
					run_e = e;
					if (run_e - run_s < CK__LIFT_STEP)
						continue;
				}
			}
			if (run_e == run_s)
				continue;
			if ((rc = ck__lift(p, run_s, run_e)) < 0)
				return; /* the process is gone: nothing left to lift */
			run_s = run_e = 0;
		}
	}
}

void ck_wp_stop(struct ck_wp *wp, struct ck_wp_counts *n)
{
	if (!wp)
		return;
	/* Every range is unprotected before the descriptor is closed, while
	 * the handler still answers faults. Closing a descriptor whose ranges
	 * are still protected lets the job's writes fault and retry without
	 * pause until the kernel has cleared them all under the job's mmap
	 * lock, which those faults keep taking: on this project's VM the
	 * job burnt both cores for 4.5 s so after a 4 GiB snapshot (its own
	 * cost: making 1M pages writable again, about 4 s here, stalls all
	 * its threads whatever the way). */
	for (size_t i = 0; i < wp->nprocs; i++)
		ck__lift_rest(wp->procs[i]);
	pthread_mutex_lock(&wp->lock);
	wp->stop = 1;
	pthread_mutex_unlock(&wp->lock);
	if (wp->started) {
		uint64_t one = 1;
		if (write(wp->evfd, &one, sizeof(one)) < 0) { /* the thread also sees stop on its next turn */
		}
		pthread_join(wp->th, NULL);
	}
	if (n)
		*n = (struct ck_wp_counts){wp->faults, wp->taken_aside, wp->spilled, wp->pre_faults, wp->split_lifts};
	for (size_t i = 0; i < wp->nprocs; i++) {
		struct ck_wp_proc *p = wp->procs[i];
		/* The last reference (libckpt closed its own): closing it
		 * unregisters every range, blocks never taken included (a
		 * round that ended early), and wakes any thread still waiting. */
		close(p->uffd);
		ck__proc_free(p);
	}
	free(wp->procs);
	ck_bigbuf_put(wp->pool, wp->pool_len);
	free(wp->free_slot);
	free(wp->spill_free);
	if (wp->spill_fd >= 0)
		close(wp->spill_fd);
	close(wp->evfd);
	pthread_mutex_destroy(&wp->lock);
	pthread_cond_destroy(&wp->change);
	free(wp);
}
