/* vDSO across kernels. The restored code holds pointers into the vDSO it
 * started with (glibc caches them). When this kernel's vDSO is the same
 * image with the same vvar layout, the restorer just moves the kernel's
 * mappings to the old addresses. When it differs (another kernel), the old
 * vDSO's bytes are restored as ordinary memory and each of its exported
 * functions is patched with a jump to the same function of the new vDSO,
 * which the restorer places in a free gap: old addresses lead to new code.
 * libelf reads the symbol tables of both. */
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/vdso.h"

struct ck__sym {
	char name[64];
	uint64_t off;
};

/* Exported functions of a vDSO image in memory: name and offset. */
static int ck__vdso_syms(const void *img, size_t len, struct ck__sym *out, int max)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	uint64_t base = UINT64_MAX;
	size_t phnum;
	int n = 0;

	elf_version(EV_CURRENT);
	e = elf_memory((char *)img, len);
	if (!e || elf_kind(e) != ELF_K_ELF)
		goto bad;
	if (elf_getphdrnum(e, &phnum) == 0) {
		for (size_t i = 0; i < phnum; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < base)
				base = ph.p_vaddr;
		}
	}
	if (base == UINT64_MAX)
		base = 0;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; sh.sh_entsize && i < sh.sh_size / sh.sh_entsize && n < max; i++) {
			GElf_Sym s;
			const char *name;
			if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC || !s.st_value)
				continue;
			name = elf_strptr(e, sh.sh_link, s.st_name);
			if (!name || strlen(name) >= sizeof(out[n].name))
				continue;
			snprintf(out[n].name, sizeof(out[n].name), "%s", name);
			out[n].off = s.st_value - base;
			n++;
		}
	}
	elf_end(e);
	return n;
bad:
	if (e)
		elf_end(e);
	ck_err_set("cannot read a vDSO image: %s", elf_errmsg(-1));
	return -EINVAL;
}

/* This kernel's special mappings, from our own /proc/self/maps. */
static int ck__own_specials(uint64_t *vvar, uint64_t *vvar_len, uint64_t *vclock, uint64_t *vclock_len,
			    uint64_t *vdso, uint64_t *vdso_len)
{
	struct ck_map *maps;
	size_t n;
	int r = ck_maps_read(getpid(), &maps, &n);

	if (r < 0)
		return r;
	*vvar = *vvar_len = *vclock = *vclock_len = *vdso = *vdso_len = 0;
	for (size_t i = 0; i < n; i++) {
		if (!maps[i].path)
			continue;
		if (!strcmp(maps[i].path, "[vvar]")) {
			*vvar = maps[i].start;
			*vvar_len = maps[i].end - maps[i].start;
		} else if (!strcmp(maps[i].path, "[vvar_vclock]")) {
			*vclock = maps[i].start;
			*vclock_len = maps[i].end - maps[i].start;
		} else if (!strcmp(maps[i].path, "[vdso]")) {
			*vdso = maps[i].start;
			*vdso_len = maps[i].end - maps[i].start;
		}
	}
	ck_maps_free(maps, n);
	return 0;
}

static int ck__overlaps(const struct ck_proc *p, uint64_t a, uint64_t b)
{
	for (size_t i = 0; i < p->nregions; i++)
		if (p->regions[i].start < b && a < p->regions[i].end)
			return 1;
	return 0;
}

int ck_vdso_plan(const struct ck_proc *p, const void *old_img, size_t old_len, struct ck_rst_layout *l)
{
	uint64_t vv, vvl, vc, vcl, vd, vdl, lo, hi, blk, cand;
	struct ck__sym olds[64], news[64];
	void *own = NULL, *old = NULL;
	int no, nn, r;

	r = ck__own_specials(&vv, &vvl, &vc, &vcl, &vd, &vdl);
	if (r < 0)
		return r;
	/* libelf wants images it may touch: private copies of both. */
	own = malloc(vdl ? vdl : 1);
	old = malloc(old_len ? old_len : 1);
	if (!own || !old) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(own, (const void *)vd, vdl);
	if (old_img)
		memcpy(old, old_img, old_len);
	l->vdso_mode = 0;
	r = 0;
	if (!l->vdso_start || !vd)
		goto out; /* nothing to carry */
	if (!getenv("CKPT_TEST_VDSO_TRAMPOLINES") && old_img && old_len == vdl && !memcmp(old, own, vdl) &&
	    l->vvar_end - l->vvar_start == vvl && l->vclock_end - l->vclock_start == vcl &&
	    (!vv || l->vdso_start - l->vvar_start == vd - vv))
		goto out; /* the same image and layout: move the kernel's mappings */
	if (!old_img) {
		ck_err_set("the vDSO of this kernel differs and the checkpoint holds no copy of the old one");
		r = -ENOTSUP;
		goto out;
	}
	no = ck__vdso_syms(old, old_len, olds, 64);
	nn = ck__vdso_syms(own, vdl, news, 64);
	if (no < 0 || nn < 0) {
		r = -EINVAL;
		goto out;
	}
	/* A free gap for this kernel's specials, near the old ones. */
	lo = vd;
	hi = vd + vdl;
	if (vv && vv < lo)
		lo = vv;
	if (vc && vc < lo)
		lo = vc;
	blk = hi - lo;
	cand = (l->vvar_start ? l->vvar_start : l->vdso_start) - blk - (1ull << 20);
	for (int tries = 0; tries < 4096 && ck__overlaps(p, cand - 4096, cand + blk + 4096); tries++)
		cand -= blk + (1ull << 20);
	if (ck__overlaps(p, cand - 4096, cand + blk + 4096)) {
		ck_err_set("no free place for this kernel's vDSO in the restored address space");
		r = -ENOMEM;
		goto out;
	}
	l->vdso_mode = 1;
	l->new_special_base = cand;
	l->ntramp = 0;
	for (int i = 0; i < no; i++) {
		int j;
		for (j = 0; j < nn && strcmp(olds[i].name, news[j].name); j++)
			;
		if (j == nn) {
			fprintf(stderr, "ckrun: warning: vDSO function %s is gone in this kernel\n", olds[i].name);
			continue;
		}
		if (l->ntramp >= CK_RST_MAX_TRAMP)
			break;
		l->tramp[l->ntramp].old_addr = l->vdso_start + olds[i].off;
		l->tramp[l->ntramp].new_addr = cand + (vd - lo) + news[j].off;
		l->ntramp++;
	}
out:
	free(own);
	free(old);
	return r;
}
