/* ckpt inspect --backtrace: every thread's stack in every process of a
 * checkpoint, unwound from the image (unwind.c), with function names from
 * the ELF objects the process had mapped (elfobj.c). */
#include "launcher/ckpt/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckpt/procimg.h"

#define BT_MAX_FRAMES 256

static void print_frame(FILE *f, struct ckpt_procimg *pi, size_t i, const struct ckpt_frame *fr)
{
	/* A return address may be one past the end of its function (a call
	 * that does not return): look up the call instruction instead. */
	uint64_t look = fr->exact ? fr->ip : fr->ip - 1, off = 0;
	struct ckpt_obj *o = ckpt_obj_at(&pi->objs, look);
	const char *name = o ? ckpt_obj_symbol(o, pi->im, look, &off) : NULL;

	fprintf(f, "    #%-3zu 0x%016llx in ", i, (unsigned long long)fr->ip);
	if (name)
		fprintf(f, "%s+0x%llx", name, (unsigned long long)(off + (fr->exact ? 0 : 1)));
	else
		fprintf(f, "??");
	if (o && o->from_image)
		fprintf(f, " (%s: %s, names from the image's .dynsym)", o->path, o->nosyms);
	else if (o && o->nosyms && !name)
		fprintf(f, " (%s: no symbols, %s)", o->path, o->nosyms);
	else if (o)
		fprintf(f, " (%s)", o->path);
	if (fr->signal)
		fprintf(f, " <signal frame>");
	fputc('\n', f);
}

static int print_proc(struct ck_reader *rd, const struct ck_manifest *m, const struct ck_proc *p)
{
	struct ckpt_procimg pi;
	struct ckpt_frame *fr = NULL;
	uint32_t *order = NULL;
	size_t nt;
	int rc;

	rc = ckpt_procimg_open(rd, m, p, &pi);
	if (rc < 0)
		return rc;
	fr = calloc(BT_MAX_FRAMES, sizeof(*fr));
	order = calloc(pi.pd->nthreads + 1, sizeof(*order));
	if (!fr || !order) {
		rc = -ENOMEM;
		goto out;
	}
	nt = ckpt_thread_order(pi.pd, order);
	printf("\nprocess %d (parent %d) %s: %u threads\n", p->pid, p->ppid, p->exe ? p->exe : "?", pi.pd->nthreads);
	for (size_t k = 0; k < nt; k++) {
		const struct ck_pd_thread *t = &pi.pd->threads[order[k]];
		struct ckpt_tstate ts;
		const char *why;
		size_t n;

		printf("  thread %d \"%.16s\"%s\n", t->tid, t->comm,
		       (t->flags & CK_PDT_MAIN) ? " (main)" : (t->flags & CK_PDT_MANAGER) ? " (libckpt's manager)" : "");
		ckpt_unw_thread(pi.u, pi.pd, t, &ts);
		if (!ts.from_uc)
			printf("    (%s)\n", ts.why);
		n = ckpt_unw_stack(pi.u, ts.reg, fr, BT_MAX_FRAMES, &why);
		for (size_t i = 0; i < n; i++)
			print_frame(stdout, &pi, i, &fr[i]);
		if (why)
			printf("    (unwinding stopped: %s)\n", why);
	}
out:
	free(fr);
	free(order);
	ckpt_procimg_close(&pi);
	return rc;
}

int ckpt_backtrace(struct ck_store *s, const struct ck_manifest *m)
{
	struct ck_reader *rd = NULL;
	int rc;

	rc = ck_reader_open(s, m->job, m, &rd);
	if (rc < 0)
		return rc;
	printf("checkpoint %s@%llu (store %s): %zu processes\n", m->job, (unsigned long long)m->seq, s->uri, m->nprocs);
	for (size_t i = 0; i < m->nprocs && rc == 0; i++)
		rc = print_proc(rd, m, &m->procs[i]);
	ck_reader_close(rd);
	return rc;
}
