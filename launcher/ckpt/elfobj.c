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
		} else if (ph[i].p_type == PT_DYNAMIC) {
			o->dyn = ph[i].p_vaddr; /* + bias below */
			o->dyn_len = ph[i].p_memsz;
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
	if (o->dyn_len)
		o->dyn += o->bias;
	o->exec = eh.e_type == ET_EXEC;
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

/* Symbols being collected: names go into one buffer, whose offsets are
 * turned into pointers once it stops growing (sym_done). */
struct symacc {
	size_t cap, scap, slen;
};

static int sym_add(struct ckpt_obj *o, struct symacc *a, uint64_t addr, uint64_t size, const char *nm)
{
	size_t l = strlen(nm) + 1;

	if (o->nsyms == a->cap) {
		struct ckpt_sym *ns = realloc(o->syms, (a->cap = a->cap ? a->cap * 2 : 256) * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		o->syms = ns;
	}
	if (a->slen + l > a->scap) {
		char *nb;
		while (a->slen + l > a->scap)
			a->scap = a->scap ? a->scap * 2 : 4096;
		if (!(nb = realloc(o->strs, a->scap)))
			return -ENOMEM;
		o->strs = nb;
	}
	memcpy(o->strs + a->slen, nm, l);
	o->syms[o->nsyms++] = (struct ckpt_sym){addr, size, (const char *)(uintptr_t)a->slen};
	a->slen += l;
	return 0;
}

static void sym_done(struct ckpt_obj *o)
{
	for (size_t i = 0; i < o->nsyms; i++)
		o->syms[i].name = o->strs + (uintptr_t)o->syms[i].name;
	qsort(o->syms, o->nsyms, sizeof(o->syms[0]), by_addr);
}

static int wanted(const GElf_Sym *s)
{
	return (GELF_ST_TYPE(s->st_info) == STT_FUNC || GELF_ST_TYPE(s->st_info) == STT_GNU_IFUNC) &&
	       s->st_shndx != SHN_UNDEF && s->st_value;
}

/* Collects the function symbols of every symbol table of e (.symtab and
 * .dynsym), at runtime addresses. */
static int load_syms(struct ckpt_obj *o, Elf *e)
{
	Elf_Scn *scn = NULL;
	struct symacc a = {0};
	GElf_Ehdr eh;
	uint64_t bias;
	int rc;

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

			if (!gelf_getsym(d, (int)i, &s))
				break;
			if (!wanted(&s) || !(nm = elf_strptr(e, sh.sh_link, s.st_name)) || !*nm)
				continue;
			if ((rc = sym_add(o, &a, s.st_value + bias, s.st_size, nm)) < 0)
				return rc;
		}
	}
	sym_done(o);
	return 0;
}

/* A d_ptr of the dynamic section: the dynamic linker may have relocated
 * it in place (glibc does on x86-64) or not. */
static uint64_t dyn_addr(const struct ckpt_obj *o, uint64_t v)
{
	return o->exec || (v >= o->lo && v < o->hi) ? v : v + o->bias;
}

/* How many entries .dynsym has: DT_HASH says it; with DT_GNU_HASH, one
 * past the last symbol of the longest chain of the highest bucket. */
static int64_t dynsym_count(struct ckpt_img *im, uint64_t hash, uint64_t gnu)
{
	uint32_t h[4], b, last = 0;

	if (hash && ckpt_img_read(im, hash, h, 8) == 0)
		return h[1];
	if (!gnu || ckpt_img_read(im, gnu, h, 16) < 0 || !h[0] || h[0] > (1u << 24))
		return -1;
	for (uint32_t i = 0; i < h[0]; i++) {
		if (ckpt_img_read(im, gnu + 16 + (uint64_t)h[2] * 8 + i * 4ull, &b, 4) < 0)
			return -1;
		last = b > last ? b : last;
	}
	if (last < h[1])
		return h[1];
	for (uint32_t k = 0; k < (1u << 24); k++, last++) {
		uint64_t chain = gnu + 16 + (uint64_t)h[2] * 8 + (uint64_t)h[0] * 4 + (uint64_t)(last - h[1]) * 4;
		if (ckpt_img_read(im, chain, &b, 4) < 0)
			return -1;
		if (b & 1)
			return (int64_t)last + 1;
	}
	return -1;
}

/* The exported functions (.dynsym), found through PT_DYNAMIC in the
 * image: what is left when the file on disk is not the one that was
 * mapped. The entries are converted with libelf (elf64_xlatetom). */
static int syms_from_dynamic(struct ckpt_obj *o, struct ckpt_img *im)
{
	uint64_t symtab = 0, strtab = 0, strsz = 0, hash = 0, gnu = 0;
	struct symacc a = {0};
	Elf64_Sym *syms = NULL;
	char *strs = NULL;
	int64_t n;
	int rc = -ENOENT;

	for (uint64_t off = 0; o->dyn && off + sizeof(Elf64_Dyn) <= o->dyn_len; off += sizeof(Elf64_Dyn)) {
		Elf64_Dyn d;
		if (ckpt_img_read(im, o->dyn + off, &d, sizeof(d)) < 0 || d.d_tag == DT_NULL)
			break;
		switch (d.d_tag) {
		case DT_SYMTAB: symtab = dyn_addr(o, d.d_un.d_ptr); break;
		case DT_STRTAB: strtab = dyn_addr(o, d.d_un.d_ptr); break;
		case DT_STRSZ: strsz = d.d_un.d_val; break;
		case DT_HASH: hash = dyn_addr(o, d.d_un.d_ptr); break;
		case DT_GNU_HASH: gnu = dyn_addr(o, d.d_un.d_ptr); break;
		}
	}
	if (!symtab || !strtab || !strsz || strsz > (64u << 20))
		return -ENOENT;
	n = dynsym_count(im, hash, gnu);
	if (n <= 0 || n > (1 << 22))
		return -ENOENT;
	syms = malloc((size_t)n * sizeof(*syms));
	strs = malloc(strsz + 1);
	if (!syms || !strs) {
		rc = -ENOMEM;
		goto out;
	}
	if (ckpt_img_read(im, symtab, syms, (size_t)n * sizeof(*syms)) < 0 || ckpt_img_read(im, strtab, strs, strsz) < 0)
		goto out;
	strs[strsz] = 0;
	{
		Elf_Data src = {.d_buf = syms, .d_type = ELF_T_SYM, .d_size = (size_t)n * sizeof(*syms),
				.d_version = EV_CURRENT};
		Elf_Data dst = src;
		if (!elf64_xlatetom(&dst, &src, ELFDATA2LSB))
			goto out;
	}
	for (int64_t i = 0; i < n; i++) {
		GElf_Sym s = syms[i];
		if (!wanted(&s) || s.st_name >= strsz || !strs[s.st_name])
			continue;
		if ((rc = sym_add(o, &a, s.st_value + (o->exec ? 0 : o->bias), s.st_size, strs + s.st_name)) < 0)
			goto out;
	}
	sym_done(o);
	rc = 0;
out:
	free(syms);
	free(strs);
	return rc;
}

/* Whether the file starts with the bytes its mapping at offset 0 had (the
 * ELF and program headers and, where linkers put it, the build id): the
 * device and inode alone do not say, a new file may get a freed inode. */
static int same_start(int fd, const struct ckpt_obj *o, struct ckpt_img *im)
{
	const struct ck_region *g = ckpt_img_region(im, o->lo);
	uint8_t a[4096], b[4096];
	size_t len = g && g->end - g->start < sizeof(a) ? g->end - g->start : sizeof(a);

	return g && ckpt_img_read(im, o->lo, a, len) == 0 && pread(fd, b, len, 0) == (ssize_t)len && !memcmp(a, b, len);
}

static void syms_from_file(struct ckpt_obj *o, struct ckpt_img *im)
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
	    (((uint64_t)major(st.st_dev) << 8) | minor(st.st_dev)) != o->dev || !same_start(fd, o, im)) {
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
		else {
			syms_from_file(o, im);
			if (o->nosyms) {
				free(o->syms);
				free(o->strs);
				o->syms = NULL;
				o->strs = NULL;
				o->nsyms = 0;
			}
			if (o->nosyms && syms_from_dynamic(o, im) == 0 && o->nsyms)
				o->from_image = 1;
		}
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
