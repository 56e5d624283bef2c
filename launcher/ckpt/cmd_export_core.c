/* ckpt export-core JOB[@SEQ] [--pid P] -o FILE: one process of a
 * checkpoint as an ELF core file that gdb opens with the program.
 *
 * libelf writes the ELF header, the program headers and the notes (one
 * SHT_NOTE section that the PT_NOTE segment covers); the memory, which may
 * be many GiB, is streamed from the checkpoint's chunks straight to the
 * file behind them, at the offsets the PT_LOAD headers give (page aligned,
 * after everything libelf writes; all-zero chunks are left as holes). Each
 * thread's registers are those of its signal frame (unwind.c): where the
 * thread was when the checkpoint stopped it, not libckpt's handler. */
#include "launcher/ckpt/cli.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/procfs.h>
#include <sys/user.h>
#include <ucontext.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckpt/procimg.h"

#define PAGE 4096ull
#define FP_XSTATE_MAGIC1 0x46505853u
#define XSTATE_MAX (64u * 1024u)

struct nbuf {
	uint8_t *b;
	size_t len, cap;
};

static int nb_put(struct nbuf *n, const void *p, size_t len)
{
	size_t pad = (len + 3) & ~(size_t)3;

	if (n->len + pad > n->cap) {
		size_t cap = n->cap ? n->cap : 4096;
		uint8_t *b;
		while (n->len + pad > cap)
			cap *= 2;
		if (!(b = realloc(n->b, cap)))
			return -ENOMEM;
		n->b = b;
		n->cap = cap;
	}
	memcpy(n->b + n->len, p, len);
	memset(n->b + n->len + len, 0, pad - len);
	n->len += pad;
	return 0;
}

static int note(struct nbuf *n, const char *name, uint32_t type, const void *desc, size_t len)
{
	Elf64_Nhdr h = {(Elf64_Word)strlen(name) + 1, (Elf64_Word)len, type};
	int rc;

	if ((rc = nb_put(n, &h, sizeof(h))) < 0 || (rc = nb_put(n, name, h.n_namesz)) < 0)
		return rc;
	return nb_put(n, desc, len);
}

static const struct ck_task *task_of(const struct ck_manifest *m, int pid)
{
	for (size_t i = 0; i < m->ntasks; i++)
		if (m->tasks[i].pid == pid)
			return &m->tasks[i];
	return NULL;
}

static int note_psinfo(struct nbuf *n, const struct ck_manifest *m, struct ckpt_procimg *pi)
{
	const struct ck_procdesc *pd = pi->pd;
	const struct ck_task *t = task_of(m, pi->p->pid);
	struct elf_prpsinfo ps;
	const char *exe = pi->p->exe ? pi->p->exe : pd->exe, *base = strrchr(exe, '/');
	uint64_t alen = pd->arg_end > pd->arg_start ? pd->arg_end - pd->arg_start : 0;

	memset(&ps, 0, sizeof(ps));
	ps.pr_sname = 'S';
	ps.pr_pid = pi->p->pid;
	ps.pr_ppid = pi->p->ppid;
	ps.pr_pgrp = t ? t->pgid : 0;
	ps.pr_sid = t ? t->sid : 0;
	for (uint32_t i = 0; i < pd->nthreads; i++)
		if (pd->threads[i].flags & CK_PDT_MAIN) {
			ps.pr_uid = pd->threads[i].uid[0];
			ps.pr_gid = pd->threads[i].gid[0];
		}
	snprintf(ps.pr_fname, sizeof(ps.pr_fname), "%.15s", base ? base + 1 : exe);
	/* the command line as the process had it: its own memory */
	if (alen > sizeof(ps.pr_psargs) - 1)
		alen = sizeof(ps.pr_psargs) - 1;
	if (alen && ckpt_img_read(pi->im, pd->arg_start, ps.pr_psargs, alen) == 0) {
		for (uint64_t i = 0; i < alen; i++)
			if (!ps.pr_psargs[i])
				ps.pr_psargs[i] = ' ';
		while (alen && ps.pr_psargs[alen - 1] == ' ')
			ps.pr_psargs[--alen] = 0;
	} else {
		memset(ps.pr_psargs, 0, sizeof(ps.pr_psargs));
	}
	return note(n, "CORE", NT_PRPSINFO, &ps, sizeof(ps));
}

static int note_thread(struct nbuf *n, const struct ck_manifest *m, struct ckpt_procimg *pi,
		       const struct ck_pd_thread *t)
{
	const struct ck_task *tk = task_of(m, pi->p->pid);
	struct ckpt_tstate ts;
	struct elf_prstatus st;
	struct user_regs_struct r;
	uint8_t fx[512], *xs = NULL;
	int rc, have_fp = 0;

	ckpt_unw_thread(pi->u, pi->pd, t, &ts);
	memset(&st, 0, sizeof(st));
	memset(&r, 0, sizeof(r));
	st.pr_pid = t->tid;
	st.pr_ppid = pi->p->ppid;
	st.pr_pgrp = tk ? tk->pgid : 0;
	st.pr_sid = tk ? tk->sid : 0;
	if (ts.from_uc) {
		const uint64_t *g = ts.gregs;
		uint64_t mask;

		r.r15 = g[REG_R15], r.r14 = g[REG_R14], r.r13 = g[REG_R13], r.r12 = g[REG_R12];
		r.rbp = g[REG_RBP], r.rbx = g[REG_RBX], r.r11 = g[REG_R11], r.r10 = g[REG_R10];
		r.r9 = g[REG_R9], r.r8 = g[REG_R8], r.rax = g[REG_RAX], r.rcx = g[REG_RCX];
		r.rdx = g[REG_RDX], r.rsi = g[REG_RSI], r.rdi = g[REG_RDI], r.rip = g[REG_RIP];
		r.eflags = g[REG_EFL], r.rsp = g[REG_RSP];
		/* the mask the thread had: the ucontext's, not the handler's */
		if (ckpt_img_read(pi->im, ts.uc + offsetof(ucontext_t, uc_sigmask), &mask, sizeof(mask)) == 0)
			st.pr_sighold = mask;
	} else {
		r.rbx = t->ctx.rbx, r.rbp = t->ctx.rbp, r.r12 = t->ctx.r12, r.r13 = t->ctx.r13;
		r.r14 = t->ctx.r14, r.r15 = t->ctx.r15, r.rsp = t->ctx.rsp, r.rip = t->ctx.rip;
		r.eflags = 0x202;
	}
	r.orig_rax = (unsigned long long)-1;
	r.cs = 0x33;
	r.ss = 0x2b;
	r.fs_base = t->fs_base;
	if (ts.fpstate && ckpt_img_read(pi->im, ts.fpstate, fx, sizeof(fx)) == 0)
		have_fp = 1;
	st.pr_fpvalid = have_fp;
	memcpy(&st.pr_reg, &r, sizeof(r));
	if ((rc = note(n, "CORE", NT_PRSTATUS, &st, sizeof(st))) < 0)
		return rc;
	if (!have_fp)
		return 0;
	if ((rc = note(n, "CORE", NT_FPREGSET, fx, sizeof(fx))) < 0)
		return rc;
	{
		/* The kernel's signal frame ends the FXSAVE part with a software
		 * header saying an XSAVE area follows: its features and size. */
		uint32_t magic, size;
		uint64_t feat;

		memcpy(&magic, fx + 464, 4);
		memcpy(&feat, fx + 472, 8);
		memcpy(&size, fx + 480, 4);
		if (magic != FP_XSTATE_MAGIC1 || size < 576 || size > XSTATE_MAX)
			return 0;
		if (!(xs = malloc(size)))
			return -ENOMEM;
		if (ckpt_img_read(pi->im, ts.fpstate, xs, size) == 0) {
			/* where a core file keeps XCR0 (gdb reads the features there) */
			memcpy(xs + 464, &feat, 8);
			rc = note(n, "LINUX", NT_X86_XSTATE, xs, size);
		}
		free(xs);
	}
	return rc;
}

/* NT_FILE: every file mapping, its range and offset in pages. */
static int note_files(struct nbuf *n, const struct ck_proc *p)
{
	struct nbuf d = {0};
	uint64_t cnt = 0, page = PAGE;
	int rc = 0;

	for (size_t i = 0; i < p->nregions; i++)
		cnt += (p->regions[i].flags & CK_REG_FILE) && p->regions[i].path;
	if ((rc = nb_put(&d, &cnt, 8)) < 0 || (rc = nb_put(&d, &page, 8)) < 0)
		goto out;
	for (size_t i = 0; i < p->nregions && rc == 0; i++) {
		const struct ck_region *g = &p->regions[i];
		uint64_t e[3] = {g->start, g->end, g->file_off / PAGE};
		if ((g->flags & CK_REG_FILE) && g->path)
			rc = nb_put(&d, e, sizeof(e));
	}
	/* names follow the table, NUL-separated, unpadded */
	for (size_t i = 0; i < p->nregions && rc == 0; i++) {
		const struct ck_region *g = &p->regions[i];
		if ((g->flags & CK_REG_FILE) && g->path) {
			size_t l = strlen(g->path) + 1;
			rc = nb_put(&d, g->path, l);
			if (rc == 0) /* nb_put padded it */
				d.len -= ((l + 3) & ~(size_t)3) - l;
		}
	}
	if (rc == 0)
		rc = note(n, "CORE", NT_FILE, d.b, d.len);
out:
	free(d.b);
	return rc;
}

/* Whether a region's bytes go into the core file: what the image saved
 * (private and anonymous memory), not shared mappings of files (the file
 * holds them; NT_FILE names it), nor what the job marked MADV_DONTDUMP. */
static int dumped(const struct ck_region *g)
{
	return ckpt_img_readable(g) && (g->nchunks || (g->flags & CK_REG_SYSV)) &&
	       !(g->flags & CK_REG_ADV_DONTDUMP);
}

static int shown(const struct ck_region *g)
{
	return !(g->flags & (CK_REG_PLUGIN | CK_REG_VSYSCALL));
}

struct wsink {
	int fd;
	uint64_t base;
	int werr; /* a write of the core file failed (not a read of the image) */
};

static int wsink_fn(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct wsink *w = arg;
	const uint8_t *b = buf;

	if (!buf)
		return 0; /* zeros: a hole */
	while (len) {
		ssize_t k = pwrite(w->fd, b, len, (off_t)(w->base + off));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			w->werr = 1;
			return -errno;
		}
		b += k;
		off += (uint64_t)k;
		len -= (size_t)k;
	}
	return 0;
}

/* *out_err: set when what failed is writing the core file (exit 73), not
 * reading the image. */
static int write_core(int fd, const struct ck_manifest *m, struct ck_reader *rd, struct ckpt_procimg *pi,
		      const struct nbuf *notes, int *out_err)
{
	const struct ck_proc *p = pi->p;
	size_t nload = 0, k = 1;
	uint64_t note_off, sh_off, off;
	Elf *e = NULL;
	Elf64_Ehdr *eh;
	Elf64_Phdr *ph;
	Elf64_Shdr *sh;
	Elf_Scn *scn;
	Elf_Data *d;
	int rc = 0;

	for (size_t i = 0; i < p->nregions; i++)
		nload += shown(&p->regions[i]);
	if (elf_version(EV_CURRENT) == EV_NONE || !(e = elf_begin(fd, ELF_C_WRITE, NULL)) || !(eh = elf64_newehdr(e)) ||
	    !(ph = elf64_newphdr(e, nload + 1)) || !(scn = elf_newscn(e)) || !(d = elf_newdata(scn)) ||
	    !(sh = elf64_getshdr(scn)))
		goto elferr;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh->e_type = ET_CORE;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(Elf64_Ehdr);
	note_off = eh->e_phoff + (nload + 1) * sizeof(Elf64_Phdr);
	sh_off = (note_off + notes->len + 7) & ~7ull;
	eh->e_shoff = sh_off;
	d->d_buf = notes->b;
	d->d_size = notes->len;
	d->d_type = ELF_T_BYTE;
	d->d_align = 4;
	d->d_off = 0;
	sh->sh_type = SHT_NOTE;
	sh->sh_offset = note_off;
	sh->sh_size = notes->len;
	sh->sh_addralign = 4;
	ph[0] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = note_off, .p_filesz = notes->len, .p_align = 4};
	/* memory after libelf's part, page aligned, regions in address order */
	off = (sh_off + 2 * sizeof(Elf64_Shdr) + PAGE - 1) & ~(PAGE - 1);
	for (uint64_t last = 0;;) {
		const struct ck_region *g = NULL;
		for (size_t i = 0; i < p->nregions; i++) {
			const struct ck_region *c = &p->regions[i];
			if (shown(c) && c->start >= last && (!g || c->start < g->start))
				g = c;
		}
		if (!g)
			break;
		last = g->end;
		ph[k] = (Elf64_Phdr){.p_type = PT_LOAD, .p_vaddr = g->start, .p_memsz = g->end - g->start,
				     .p_align = PAGE, .p_offset = off};
		ph[k].p_flags = ((g->prot & PROT_READ) ? PF_R : 0) | ((g->prot & PROT_WRITE) ? PF_W : 0) |
				((g->prot & PROT_EXEC) ? PF_X : 0);
		if (dumped(g)) {
			ph[k].p_filesz = g->end - g->start;
			off += ph[k].p_filesz;
		}
		k++;
	}
	/* (a region overlapping an earlier one, never seen, would leave a
	 * PT_NULL entry at the end) */
	elf_flagelf(e, ELF_C_SET, ELF_F_LAYOUT);
	elf_flagphdr(e, ELF_C_SET, ELF_F_DIRTY);
	if (elf_update(e, ELF_C_WRITE) < 0)
		goto elferr;
	/* the memory, chunk by chunk (ph is libelf's: e stays open) */
	for (size_t j = 1; j < k; j++) {
		const struct ck_region *g = ckpt_img_region(pi->im, ph[j].p_vaddr);
		struct wsink w = {fd, ph[j].p_offset, 0};
		uint64_t first;
		uint32_t nch;

		if (!ph[j].p_filesz || !g)
			continue;
		first = g->first_chunk;
		nch = g->nchunks;
		if (!nch && (g->flags & CK_REG_SYSV)) {
			for (size_t i = 0; i < m->nshms; i++)
				if ((uint64_t)m->shms[i].id == g->ino) {
					first = m->shms[i].first_chunk;
					nch = m->shms[i].nchunks;
				}
		}
		rc = ck_reader_read_sparse(rd, first, nch, wsink_fn, &w);
		if (rc < 0) {
			*out_err = w.werr;
			if (rc != -EBADMSG)
				ck_err_set("writing the core file: %s", strerror(-rc));
			goto out;
		}
	}
	if (ftruncate(fd, (off_t)off) < 0 || fsync(fd) < 0) {
		rc = -errno;
		*out_err = 1;
		ck_err_set("writing the core file: %s", strerror(errno));
	}
out:
	elf_end(e);
	return rc;
elferr:
	*out_err = 1;
	ck_err_set("writing the core file with libelf: %s", elf_errmsg(-1));
	if (e)
		elf_end(e);
	return -EIO;
}

static int export_proc(const struct ck_manifest *m, struct ck_reader *rd, const struct ck_proc *p, const char *path,
		       int *out_err)
{
	struct ckpt_procimg pi;
	struct nbuf notes = {0};
	uint32_t *order = NULL;
	char *tmp = NULL;
	size_t nt;
	int rc, fd = -1;

	rc = ckpt_procimg_open(rd, m, p, &pi);
	if (rc < 0)
		return rc;
	order = calloc(pi.pd->nthreads + 1, sizeof(*order));
	if (!order || asprintf(&tmp, "%s.tmp-%d", path, (int)getpid()) < 0) {
		tmp = NULL;
		rc = -ENOMEM;
		goto out;
	}
	/* gdb takes the first thread's registers as the current ones: the
	 * main thread's */
	nt = ckpt_thread_order(pi.pd, order);
	rc = note_psinfo(&notes, m, &pi);
	for (size_t i = 0; i < nt && rc == 0; i++)
		rc = note_thread(&notes, m, &pi, &pi.pd->threads[order[i]]);
	if (rc == 0 && pi.pd->auxv_size && pi.pd->auxv_size <= sizeof(pi.pd->auxv))
		rc = note(&notes, "CORE", NT_AUXV, pi.pd->auxv, pi.pd->auxv_size);
	if (rc == 0)
		rc = note_files(&notes, p);
	if (rc < 0)
		goto out;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		*out_err = 1;
		ck_err_set("cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = write_core(fd, m, rd, &pi, &notes, out_err);
	if (close(fd) < 0 && rc == 0) {
		rc = -errno;
		*out_err = 1;
		ck_err_set("writing %s: %s", tmp, strerror(errno));
	}
	fd = -1;
	if (rc == 0 && rename(tmp, path) < 0) {
		rc = -errno;
		*out_err = 1;
		ck_err_set("cannot rename %s to %s: %s", tmp, path, strerror(errno));
	}
	if (rc < 0)
		unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(order);
	free(notes.b);
	ckpt_procimg_close(&pi);
	return rc;
}

int ckpt_cmd_export_core(int argc, char **argv)
{
	struct ck_manifest *m = NULL;
	struct ck_store *s = NULL;
	struct ck_reader *rd = NULL;
	const struct ck_proc *p = NULL;
	struct ckpt_opts o;
	char job[256];
	uint64_t seq;
	int a, rc, out_err = 0;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_PID | CKPT_O_OUTPUT, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("export-core: expected one JOB[@SEQ]");
	if (!o.output || !*o.output)
		return ckpt_usage_error("export-core: -o FILE is needed (the core file to write)");
	if (ckpt_parse_ref(argv[a], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("export-core: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ckpt_load(s, job, seq, &m);
	if (rc < 0)
		goto fail;
	for (size_t i = 0; i < m->nprocs && !p; i++)
		if (o.pid < 0 || m->procs[i].pid == o.pid)
			p = &m->procs[i];
	if (!p) {
		ck_err_set("checkpoint %s@%llu has no process %ld (ckpt inspect lists them)", m->job,
			   (unsigned long long)m->seq, o.pid);
		rc = -ENOENT;
		goto fail;
	}
	rc = ck_reader_open(s, m->job, m, &rd);
	if (rc < 0)
		goto fail;
	rc = export_proc(m, rd, p, o.output, &out_err);
	if (rc < 0 && out_err) {
		fprintf(stderr, "ckpt: %s\n", ck_err_msg());
		rc = CK_EXIT_CANTCREAT;
		goto out;
	}
	if (rc < 0)
		goto fail;
	printf("%s: core of process %d of %s@%llu\n", o.output, p->pid, m->job, (unsigned long long)m->seq);
	goto out;
fail:
	rc = ckpt_fail(rc);
out:
	ck_reader_close(rd);
	ck_manifest_free(m);
	ck_store_close(s);
	return rc;
}
