/* cksim device memory: one memfd ("cksim-device") is the device's RAM; one
 * reserved range of the address space is the device's virtual address
 * space. Reservations, physical ranges and maps mirror the VMM API. Callers
 * hold sim_lock. */
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* Puts a no-access view of the memfd over [va, va+size): the reservation
 * stays a mapping of the device file, so it is recognisable by name. */
static int park(uint64_t va, uint64_t size, int fixed)
{
	int flags = MAP_SHARED | MAP_NORESERVE | (fixed ? MAP_FIXED : MAP_FIXED_NOREPLACE);
	void *p = mmap((void *)va, size, PROT_NONE, flags, sim.memfd, 0);

	if (p == MAP_FAILED)
		return -errno;
	if ((uint64_t)p != va) {
		munmap(p, size);
		return -EEXIST;
	}
	return 0;
}

int sim_devmem_open(void)
{
	int ret;

	sim.memfd = memfd_create("cksim-device", MFD_CLOEXEC);
	if (sim.memfd < 0)
		return -errno;
	if (ftruncate(sim.memfd, (off_t)sim.mem_size) < 0) {
		ret = -errno;
		goto out_close;
	}
	ret = park(SIM_VA_BASE, SIM_VA_SIZE, 0);
	if (ret)
		goto out_close;
	sim.free_list = calloc(1, sizeof(*sim.free_list));
	if (!sim.free_list) {
		ret = -ENOMEM;
		goto out_unmap;
	}
	sim.free_list->off = 0;
	sim.free_list->size = sim.mem_size;
	return 0;
out_unmap:
	munmap((void *)SIM_VA_BASE, SIM_VA_SIZE);
out_close:
	close(sim.memfd);
	sim.memfd = -1;
	return ret;
}

int sim_devmem_reopen(void)
{
	int ret;

	sim.memfd = memfd_create("cksim-device", MFD_CLOEXEC);
	if (sim.memfd < 0)
		return -errno;
	if (ftruncate(sim.memfd, (off_t)sim.mem_size) < 0 || (ret = park(SIM_VA_BASE, SIM_VA_SIZE, 0))) {
		close(sim.memfd);
		sim.memfd = -1;
		return -EIO;
	}
	return 0;
}

/* Gives the device back (checkpoint API): every device mapping and the
 * file go; the records stay. */
void sim_devmem_release(void)
{
	sim_devmem_close();
}

void sim_devmem_close(void)
{
	munmap((void *)SIM_VA_BASE, SIM_VA_SIZE);
	if (sim.memfd >= 0)
		close(sim.memfd);
	sim.memfd = -1;
}

CUresult sim_phys_alloc(uint64_t size, struct sim_phys **out)
{
	struct sim_free **fp, *f;
	struct sim_phys *p;

	size = round_up(size, SIM_GRAN);
	for (fp = &sim.free_list; (f = *fp); fp = &f->next)
		if (f->size >= size)
			break;
	if (!f)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p = calloc(1, sizeof(*p));
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	p->magic = SIM_PHYS_MAGIC;
	p->off = f->off;
	p->size = size;
	p->refs = 1;
	f->off += size;
	f->size -= size;
	if (!f->size) {
		*fp = f->next;
		free(f);
	}
	p->next = sim.phys;
	sim.phys = p;
	sim.mem_used += size;
	*out = p;
	return CUDA_SUCCESS;
}

/* Returns the range to the free list (address-ordered, merged) and gives
 * its pages back to the kernel: device memory is not zeroed on allocation
 * by a real driver, but a sim that keeps stale pages would hide nothing. */
static void phys_free(struct sim_phys *p)
{
	struct sim_free **fp, *f, *n;

	fallocate(sim.memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p->off, (off_t)p->size);
	for (fp = &sim.free_list; (f = *fp) && f->off < p->off; fp = &f->next)
		;
	n = calloc(1, sizeof(*n));
	if (n) {
		n->off = p->off;
		n->size = p->size;
		n->next = f;
		*fp = n;
		if (n->next && n->off + n->size == n->next->off) {
			f = n->next;
			n->size += f->size;
			n->next = f->next;
			free(f);
		}
	}
	sim.mem_used -= p->size;
}

void sim_phys_put(struct sim_phys *p)
{
	struct sim_phys **pp;

	if (--p->refs > 0)
		return;
	for (pp = &sim.phys; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	phys_free(p);
	p->magic = 0;
	free(p);
}

static int overlaps(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return a < b + bs && b < a + as;
}

static int resv_free_at(uint64_t base, uint64_t size)
{
	struct sim_resv *r;

	if (base < SIM_VA_BASE || base + size > SIM_VA_BASE + SIM_VA_SIZE || base + size < base)
		return 0;
	for (r = sim.resvs; r; r = r->next)
		if (overlaps(base, size, r->base, r->size))
			return 0;
	return 1;
}

/* `want` is a hint, as for the real driver: honoured when that range is
 * free, otherwise the first free aligned range is returned. */
CUresult sim_va_reserve(uint64_t size, uint64_t align, uint64_t want, uint64_t *out)
{
	struct sim_resv *r, **rp, *n;
	uint64_t cand;

	if (!size || size % SIM_GRAN)
		return CUDA_ERROR_INVALID_VALUE;
	if (align < SIM_GRAN)
		align = SIM_GRAN;
	if (align & (align - 1))
		return CUDA_ERROR_INVALID_VALUE;
	if (want && want % SIM_GRAN == 0 && resv_free_at(want, size)) {
		cand = want;
	} else {
		/* Leave the first granule unused so no device pointer is the base. */
		cand = round_up(SIM_VA_BASE + SIM_GRAN, align);
		for (r = sim.resvs; r; r = r->next)
			if (overlaps(cand, size, r->base, r->size))
				cand = round_up(r->base + r->size, align);
		if (!resv_free_at(cand, size))
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->base = cand;
	n->size = size;
	for (rp = &sim.resvs; *rp && (*rp)->base < cand; rp = &(*rp)->next)
		;
	n->next = *rp;
	*rp = n;
	*out = cand;
	return CUDA_SUCCESS;
}

CUresult sim_va_release(uint64_t base, uint64_t size)
{
	struct sim_resv **rp, *r;
	struct sim_map *m;

	for (rp = &sim.resvs; (r = *rp); rp = &r->next)
		if (r->base == base && r->size == size)
			break;
	if (!r)
		return CUDA_ERROR_INVALID_VALUE;
	for (m = sim.maps; m; m = m->next)
		if (overlaps(m->va, m->size, base, size))
			return CUDA_ERROR_INVALID_VALUE;
	*rp = r->next;
	free(r);
	return CUDA_SUCCESS;
}

static struct sim_resv *resv_of(uint64_t va, uint64_t size)
{
	struct sim_resv *r;

	for (r = sim.resvs; r; r = r->next)
		if (va >= r->base && va + size <= r->base + r->size)
			return r;
	return NULL;
}

CUresult sim_map(uint64_t va, uint64_t size, struct sim_phys *p, uint64_t off)
{
	struct sim_map *m;
	void *a;

	if (!size || va % SIM_GRAN || size % SIM_GRAN || off % SIM_GRAN || off + size > p->size)
		return CUDA_ERROR_INVALID_VALUE;
	if (!resv_of(va, size))
		return CUDA_ERROR_INVALID_VALUE;
	for (m = sim.maps; m; m = m->next)
		if (overlaps(m->va, m->size, va, size))
			return CUDA_ERROR_ALREADY_MAPPED;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	a = mmap((void *)va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, sim.memfd, (off_t)(p->off + off));
	if (a == MAP_FAILED) {
		free(m);
		return CUDA_ERROR_MAP_FAILED;
	}
	m->va = va;
	m->size = size;
	m->phys = p;
	m->phys_off = off;
	p->refs++;
	m->next = sim.maps;
	sim.maps = m;
	return CUDA_SUCCESS;
}

/* The range must consist of whole maps, as the real driver requires. */
CUresult sim_unmap(uint64_t va, uint64_t size)
{
	struct sim_map **mp, *m;
	uint64_t covered = 0;

	for (m = sim.maps; m; m = m->next)
		if (overlaps(m->va, m->size, va, size)) {
			if (m->va < va || m->va + m->size > va + size)
				return CUDA_ERROR_INVALID_VALUE;
			covered += m->size;
		}
	if (covered != size)
		return CUDA_ERROR_INVALID_VALUE;
	if (park(va, size, 1))
		return CUDA_ERROR_UNMAP_FAILED;
	for (mp = &sim.maps; (m = *mp);) {
		if (overlaps(m->va, m->size, va, size)) {
			*mp = m->next;
			sim_phys_put(m->phys);
			free(m);
		} else {
			mp = &m->next;
		}
	}
	return CUDA_SUCCESS;
}

static struct sim_map *map_at(uint64_t p)
{
	struct sim_map *m;

	for (m = sim.maps; m; m = m->next)
		if (p >= m->va && p < m->va + m->size)
			return m;
	return NULL;
}

CUresult sim_set_access(uint64_t va, uint64_t size, int rw)
{
	uint64_t pos;
	struct sim_map *m;

	for (pos = va; pos < va + size; pos = m->va + m->size)
		if (!(m = map_at(pos)))
			return CUDA_ERROR_INVALID_VALUE;
	if (mprotect((void *)va, size, rw ? PROT_READ | PROT_WRITE : PROT_NONE) < 0)
		return CUDA_ERROR_INVALID_VALUE;
	for (pos = va; pos < va + size; pos = m->va + m->size) {
		m = map_at(pos);
		m->access = rw;
	}
	return CUDA_SUCCESS;
}

int sim_dev_ok(uint64_t p, uint64_t n)
{
	uint64_t pos;
	struct sim_map *m;

	if (p + n < p)
		return 0;
	for (pos = p; pos < p + n; pos = m->va + m->size)
		if (!(m = map_at(pos)) || !m->access)
			return 0;
	return 1;
}

int sim_is_dev(uint64_t p)
{
	return p >= SIM_VA_BASE && p < SIM_VA_BASE + SIM_VA_SIZE;
}
