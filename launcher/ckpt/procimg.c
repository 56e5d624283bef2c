/* Opening one process of a checkpoint for inspection (procimg.h). */
#include "launcher/ckpt/procimg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

int ckpt_procimg_open(struct ck_reader *rd, const struct ck_manifest *m, const struct ck_proc *p,
		      struct ckpt_procimg *pi)
{
	int rc;

	memset(pi, 0, sizeof(*pi));
	pi->p = p;
	rc = ck_desc_unpack(p->desc, p->desc_len, &pi->pd);
	if (rc < 0) {
		ck_err_wrap("checkpoint %s@%llu, process %d", m->job, (unsigned long long)m->seq, p->pid);
		return rc;
	}
	if ((rc = ckpt_img_open(rd, m, p, &pi->im)) < 0 || (rc = ckpt_objs_find(pi->im, p, &pi->objs)) < 0 ||
	    (rc = ckpt_unw_open(pi->im, &pi->objs, &pi->u)) < 0) {
		ck_err_set("process %d: cannot set up its image (%s)", p->pid, strerror(-rc));
		ckpt_procimg_close(pi);
		return rc;
	}
	return 0;
}

void ckpt_procimg_close(struct ckpt_procimg *pi)
{
	ckpt_unw_close(pi->u);
	ckpt_objs_free(&pi->objs);
	ckpt_img_close(pi->im);
	free(pi->pd);
	memset(pi, 0, sizeof(*pi));
}

size_t ckpt_thread_order(const struct ck_procdesc *pd, uint32_t *idx)
{
	size_t n = 0;

	for (int pass = 0; pass < 3; pass++)
		for (uint32_t i = 0; i < pd->nthreads; i++) {
			uint32_t f = pd->threads[i].flags;
			int cls = (f & CK_PDT_MAIN) ? 0 : (f & CK_PDT_MANAGER) ? 2 : 1;
			if (cls == pass)
				idx[n++] = i;
		}
	return n;
}
