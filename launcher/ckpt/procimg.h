/* One process of a checkpoint, opened for looking into: its descriptor,
 * memory, ELF objects and an unwinder over them (inspect --backtrace,
 * export-core). */
#ifndef CKPT_PROCIMG_H
#define CKPT_PROCIMG_H

#include "launcher/ckpt/elfobj.h"
#include "launcher/ckpt/imgmem.h"
#include "launcher/ckpt/unwind.h"
#include "launcher/image/procdesc_pack.h"

struct ckpt_procimg {
	const struct ck_proc *p;
	struct ck_procdesc *pd;
	struct ckpt_img *im;
	struct ckpt_objs objs;
	struct ckpt_unw *u;
};

int ckpt_procimg_open(struct ck_reader *rd, const struct ck_manifest *m, const struct ck_proc *p,
		      struct ckpt_procimg *pi);
void ckpt_procimg_close(struct ckpt_procimg *pi);
/* Thread indexes of pd in the order shown: the main thread, the others,
 * libckpt's manager last. Returns how many. */
size_t ckpt_thread_order(const struct ck_procdesc *pd, uint32_t *idx);

#endif
