/* The ELF objects a process had mapped (its program, libraries, the vDSO),
 * as found in a checkpoint: where each was loaded, where its
 * .eh_frame_hdr is (for the unwinder), and its symbols (libelf). */
#ifndef CKPT_ELFOBJ_H
#define CKPT_ELFOBJ_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/ckpt/imgmem.h"

struct ckpt_sym {
	uint64_t addr, size;
	const char *name;
};

struct ckpt_obj {
	const char *path;    /* the region's path ("[vdso]") */
	uint64_t lo, hi;     /* addresses its segments span */
	uint64_t text_lo, text_hi; /* its executable segment(s) */
	uint64_t bias;       /* load bias: runtime address - ELF address */
	uint64_t eh_hdr;     /* runtime address of .eh_frame_hdr, 0: none */
	uint64_t dyn, dyn_len; /* runtime address and size of PT_DYNAMIC, 0: none */
	int exec;            /* ET_EXEC: symbol values are addresses */
	uint64_t dev, ino;
	int vdso;
	int syms_done;
	const char *nosyms; /* why there are no symbols (or only the image's .dynsym), or NULL */
	int from_image;     /* the symbols are the image's .dynsym */
	struct ckpt_sym *syms;
	size_t nsyms;
	char *strs;
};

struct ckpt_objs {
	struct ckpt_obj *v;
	size_t n;
};

/* Finds the ELF objects among the process's mappings (their headers are
 * read from the image). */
int ckpt_objs_find(struct ckpt_img *im, const struct ck_proc *p, struct ckpt_objs *out);
void ckpt_objs_free(struct ckpt_objs *o);
struct ckpt_obj *ckpt_obj_at(const struct ckpt_objs *o, uint64_t addr);
/* The function holding addr: its name (NULL if none is known) and the
 * offset of addr in it. Symbols are loaded at the first call: from the
 * file on disk when it is still the one that was mapped (device, inode
 * and its first page as the image has it), .symtab and .dynsym; else
 * the .dynsym the dynamic section in the image points to; the vDSO's
 * from its bytes in the image. */
const char *ckpt_obj_symbol(struct ckpt_obj *o, struct ckpt_img *im, uint64_t addr, uint64_t *off);

#endif
