/* ELF objects of a checkpointed process (elfobj.h). */
#include "launcher/ckpt/elfobj.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_PHDRS 64

/* Reads the ELF and program headers at a mapping's start from the image
 * and fills the object's layout; -ENOEXEC when it is no ELF object. */
static int obj_layout(struct ckpt_img *im, const struct ck_region *g, struct ckpt_obj *o)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[MAX_PHDRS];
	uint64_t minv = UINT64_MAX, maxv = 0, eh_vaddr = 0, tlo = UINT64_MAX, thi = 0;
	int have_eh = 0;

	if (ckpt_img_read(im, g->start, &eh, sizeof(eh)) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
	    (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum == 0 || eh.e_phnum > MAX_PHDRS)
		return -ENOEXEC;
	if (ckpt_img_read(im, g->start + eh.e_phoff, ph, eh.e_phnum * sizeof(ph[0])) < 0)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD) {
			if (ph[i].p_vaddr < minv)
				minv = ph[i].p_vaddr;
			if (ph[i].p_vaddr + ph[i].p_memsz > maxv)
				maxv = ph[i].p_vaddr + ph[i].p_memsz;
			if (ph[i].p_flags & PF_X) {
				tlo = ph[i].p_vaddr < tlo ? ph[i].p_vaddr : tlo;
				thi = ph[i].p_vaddr + ph[i].p_memsz > thi ? ph[i].p_vaddr + ph[i].p_memsz : thi;
			}
		} else if (ph[i].p_type == PT_GNU_EH_FRAME) {
			eh_vaddr = ph[i].p_vaddr;
			have_eh = 1;
		}
	}
	if (minv == UINT64_MAX)
		return -ENOEXEC;
	minv &= ~0xfffull;
	o->bias = g->start - minv;
	o->lo = g->start;
	o->hi = o->bias + maxv;
	o->text_lo = tlo == UINT64_MAX ? 0 : o->bias + tlo;
	o->text_hi = tlo == UINT64_MAX ? 0 : o->bias + thi;
	o->eh_hdr = have_eh ? o->bias + eh_vaddr : 0;
	return 0;
}

int ckpt_objs_find(struct ckpt_img *im, const struct ck_proc *p, struct ckpt_objs *out)
{
	struct ckpt_obj *v = calloc(p->nregions + 1, sizeof(*v));
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < p->nregions; i++) {
		const struct ck_region *g = &p->regions[i];
		int vdso = (g->flags & CK_REG_VDSO) != 0;

		if (!vdso && (!(g->flags & CK_REG_FILE) || g->file_off || !g->path || g->path[0] != '/'))
			continue;
		if (!ckpt_img_readable(g) || obj_layout(im, g, &v[n]) < 0) {
			memset(&v[n], 0, sizeof(v[n]));
			continue;
		}
		v[n].path = vdso ? "[vdso]" : g->path;
		v[n].vdso = vdso;
		v[n].dev = g->dev;
		v[n].ino = g->ino;
		n++;
	}
	out->v = v;
	out->n = n;
	return 0;
}

void ckpt_objs_free(struct ckpt_objs *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->v[i].syms);
		free(o->v[i].strs);
	}
	free(o->v);
	o->v = NULL;
	o->n = 0;
}

struct ckpt_obj *ckpt_obj_at(const struct ckpt_objs *o, uint64_t addr)
{
	for (size_t i = 0; i < o->n; i++)
		if (addr >= o->v[i].lo && addr < o->v[i].hi)
			return &o->v[i];
	return NULL;
}

static int by_addr(const void *a, const void *b)
{
	const struct ckpt_sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Collects the function symbols of every symbol table of e (.symtab and
 * .dynsym), at runtime addresses. Names go into one buffer: the offsets
 * are turned into pointers once it stops growing. */
static int load_syms(struct ckpt_obj *o, Elf *e)
{
	Elf_Scn *scn = NULL;
	size_t cap = 0, scap = 0, slen = 0;
	GElf_Ehdr eh;
	uint64_t bias;

	if (!gelf_getehdr(e, &eh))
		return -ENOEXEC;
	/* An executable's symbols hold absolute addresses; a shared object's
	 * and a PIE's are relative to its load address. */
	bias = eh.e_type == ET_EXEC ? 0 : o->bias;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *nm;
			size_t l;

			if (!gelf_getsym(d, (int)i, &s))
				break;
			if ((GELF_ST_TYPE(s.st_info) != STT_FUNC && GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC) ||
			    s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			nm = elf_strptr(e, sh.sh_link, s.st_name);
			if (!nm || !*nm)
				continue;
			l = strlen(nm) + 1;
			if (o->nsyms == cap) {
				struct ckpt_sym *ns = realloc(o->syms, (cap = cap ? cap * 2 : 256) * sizeof(*ns));
				if (!ns)
					return -ENOMEM;
				o->syms = ns;
			}
			if (slen + l > scap) {
				char *nb;
				while (slen + l > scap)
					scap = scap ? scap * 2 : 4096;
				if (!(nb = realloc(o->strs, scap)))
					return -ENOMEM;
				o->strs = nb;
			}
			memcpy(o->strs + slen, nm, l);
			o->syms[o->nsyms++] = (struct ckpt_sym){s.st_value + bias, s.st_size, (const char *)(uintptr_t)slen};
			slen += l;
		}
	}
	for (size_t i = 0; i < o->nsyms; i++)
		o->syms[i].name = o->strs + (uintptr_t)o->syms[i].name;
	qsort(o->syms, o->nsyms, sizeof(o->syms[0]), by_addr);
	return 0;
}

static void syms_from_file(struct ckpt_obj *o)
{
	struct stat st;
	Elf *e = NULL;
	int fd = open(o->path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		o->nosyms = "file gone";
		return;
	}
	/* ckrun records a mapping's device as /proc/PID/maps shows it,
	 * major << 8 | minor */
	if (fstat(fd, &st) < 0 || st.st_ino != o->ino ||
	    (((uint64_t)major(st.st_dev) << 8) | minor(st.st_dev)) != o->dev) {
		o->nosyms = "file replaced since the checkpoint";
		goto out;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || load_syms(o, e) < 0)
		o->nosyms = "unreadable ELF file";
out:
	if (e)
		elf_end(e);
	close(fd);
}

/* The vDSO is a whole ELF image in memory, section headers included. */
static void syms_from_image(struct ckpt_obj *o, struct ckpt_img *im)
{
	const struct ck_region *g = ckpt_img_region(im, o->lo);
	size_t len = g ? g->end - g->start : 0;
	char *buf = len ? malloc(len) : NULL;
	Elf *e = NULL;

	if (!buf || ckpt_img_read(im, g->start, buf, len) < 0 || !(e = elf_memory(buf, len)) ||
	    elf_kind(e) != ELF_K_ELF || load_syms(o, e) < 0)
		o->nosyms = "vDSO unreadable";
	if (e)
		elf_end(e);
	free(buf);
}

const char *ckpt_obj_symbol(struct ckpt_obj *o, struct ckpt_img *im, uint64_t addr, uint64_t *off)
{
	size_t lo = 0, hi;

	if (!o->syms_done) {
		o->syms_done = 1;
		if (elf_version(EV_CURRENT) == EV_NONE)
			o->nosyms = "libelf too old";
		else if (o->vdso)
			syms_from_image(o, im);
		else
			syms_from_file(o);
	}
	hi = o->nsyms;
	while (lo < hi) { /* first symbol above addr */
		size_t mid = lo + (hi - lo) / 2;
		if (o->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The nearest symbol below that spans addr; one without a size counts
	 * when it is the nearest (hand-written assembly). */
	for (size_t i = lo, k = 0; i-- > 0 && k < 16; k++) {
		const struct ckpt_sym *s = &o->syms[i];
		if (addr < s->addr + s->size || (!s->size && i + 1 == lo)) {
			*off = addr - s->addr;
			return s->name;
		}
	}
	return NULL;
}
