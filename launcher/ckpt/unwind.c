/* Remote unwinding of a checkpoint image with libunwind (unwind.h).
 *
 * libunwind's remote interface asks its accessors for everything: register
 * values (ours, from the image), memory words (the image, imgmem.c) and
 * the unwind information of an address. For the last we locate the ELF
 * object holding the address, read its .eh_frame_hdr from the image and
 * hand libunwind that binary search table as a "remote table", which its
 * DWARF code searches and parses through the same memory accessor (the
 * call libunwind's ptrace and core-file helpers use for the same job). */
#include "launcher/ckpt/unwind.h"

#include <errno.h>
#include <libunwind.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

/* Exported by libunwind (libunwind-ptrace and -coredump call it) but not
 * declared in its public headers. */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
					      unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* .eh_frame_hdr pointer encodings (LSB) */
#define EH_PE_udata4 0x03
#define EH_PE_sdata4 0x0b
#define EH_PE_datarel 0x30

struct ckpt_unw {
	struct ckpt_img *im;
	struct ckpt_objs *objs;
	unw_addr_space_t as;
	const uint64_t *reg; /* the registers the stack being unwound starts from */
};

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need, void *arg)
{
	struct ckpt_unw *u = arg;
	struct ckpt_obj *o = ckpt_obj_at(u->objs, ip);
	unw_dyn_info_t di;
	uint8_t h[12];
	uint32_t count;

	if (!o || !o->eh_hdr || ckpt_img_read(u->im, o->eh_hdr, h, sizeof(h)) < 0)
		return -UNW_ENOINFO;
	/* version 1, a 4-byte eh_frame pointer, a 4-byte count and a table of
	 * 4-byte offsets from the header: what the linkers write */
	if (h[0] != 1 || ((h[1] & 0x0f) != EH_PE_udata4 && (h[1] & 0x0f) != EH_PE_sdata4) || h[2] != EH_PE_udata4 ||
	    h[3] != (EH_PE_datarel | EH_PE_sdata4))
		return -UNW_ENOINFO;
	memcpy(&count, h + 8, 4);
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = o->text_lo ? o->text_lo : o->lo;
	di.end_ip = o->text_hi ? o->text_hi : o->hi;
	di.u.rti.segbase = o->eh_hdr;
	di.u.rti.table_data = o->eh_hdr + sizeof(h);
	di.u.rti.table_len = (unw_word_t)count * 8 / sizeof(unw_word_t); /* in words */
	return _Ux86_64_dwarf_search_unwind_table(as, ip, &di, pi, need, arg);
}

/* The DWARF code frees the unwind information it made from a table. */
static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as;
	(void)pi;
	(void)arg;
}

static int acc_dyn_list(unw_addr_space_t as, unw_word_t *addr, void *arg)
{
	(void)as;
	(void)addr;
	(void)arg;
	return -UNW_ENOINFO; /* no run-time registered code in an image */
}

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	struct ckpt_unw *u = arg;

	(void)as;
	if (write || ckpt_img_read(u->im, addr, val, sizeof(*val)) < 0)
		return -UNW_EINVAL;
	return 0;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write, void *arg)
{
	struct ckpt_unw *u = arg;

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	if (reg < 0 || reg >= CKPT_NREG)
		return -UNW_EBADREG;
	*val = u->reg[reg];
	return 0;
}

static int acc_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write, void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL; /* nothing runs */
}

static int acc_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len, unw_word_t *off, void *arg)
{
	(void)as;
	(void)addr;
	(void)buf;
	(void)len;
	(void)off;
	(void)arg;
	return -UNW_ENOINFO; /* names come from elfobj.c */
}

static unw_accessors_t accessors = {
	.find_proc_info = acc_find_proc_info,
	.put_unwind_info = acc_put_unwind_info,
	.get_dyn_info_list_addr = acc_dyn_list,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_proc_name,
};

int ckpt_unw_open(struct ckpt_img *im, struct ckpt_objs *objs, struct ckpt_unw **out)
{
	struct ckpt_unw *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->im = im;
	u->objs = objs;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		free(u);
		return -ENOMEM;
	}
	/* one address space per process, and imgmem caches the reads */
	unw_set_caching_policy(u->as, UNW_CACHE_NONE);
	*out = u;
	return 0;
}

void ckpt_unw_close(struct ckpt_unw *u)
{
	if (!u)
		return;
	unw_destroy_addr_space(u->as);
	free(u);
}

size_t ckpt_unw_stack(struct ckpt_unw *u, const uint64_t reg[CKPT_NREG], struct ckpt_frame *fr, size_t max,
		      const char **why)
{
	unw_cursor_t c;
	size_t n = 0;
	int exact = 1, r;

	*why = NULL;
	u->reg = reg;
	if ((r = unw_init_remote(&c, u->as, u)) < 0) {
		*why = unw_strerror(r);
		return 0;
	}
	for (;;) {
		unw_word_t ip = 0, sp = 0;
		int sig;

		unw_get_reg(&c, UNW_REG_IP, &ip);
		unw_get_reg(&c, UNW_REG_SP, &sp);
		if (n == max) {
			*why = "more frames than shown";
			break;
		}
		if (n && ip == fr[n - 1].ip && sp == fr[n - 1].sp) {
			*why = "the stack loops";
			break;
		}
		sig = unw_is_signal_frame(&c) > 0;
		fr[n++] = (struct ckpt_frame){ip, sp, exact, sig};
		r = unw_step(&c);
		if (r == 0)
			break; /* the outermost frame (its return address is undefined) */
		if (r < 0) {
			*why = unw_strerror(r);
			break;
		}
		exact = sig;
	}
	return n;
}

static int is_restorer(const struct ck_procdesc *pd, uint64_t ip)
{
	for (int i = 1; i < CK_PD_NSIG; i++)
		if (pd->sigact[i].restorer && pd->sigact[i].restorer == ip)
			return 1;
	return 0;
}

/* Is there a kernel signal frame's ucontext at a? Its link is NULL, its
 * code segment the user one, its rip in executable memory of the process
 * and its FP area just above it. */
static int uc_at(struct ckpt_unw *u, uint64_t a, struct ckpt_tstate *ts)
{
	ucontext_t uc;
	const struct ck_region *g;
	uint64_t fp, rip;

	memset(&uc, 0, sizeof(uc));
	if (ckpt_img_read(u->im, a, &uc, offsetof(ucontext_t, uc_sigmask)) < 0)
		return 0;
	fp = (uint64_t)(uintptr_t)uc.uc_mcontext.fpregs;
	rip = (uint64_t)uc.uc_mcontext.gregs[REG_RIP];
	if (uc.uc_link || (uc.uc_mcontext.gregs[REG_CSGSFS] & 0xffff) != 0x33 || (fp && (fp <= a || fp - a > (1u << 20))))
		return 0;
	if (!(g = ckpt_img_region(u->im, rip)) || !(g->prot & PROT_EXEC))
		return 0;
	ts->from_uc = 1;
	ts->uc = a;
	ts->fpstate = fp;
	for (int i = 0; i < 23; i++)
		ts->gregs[i] = (uint64_t)uc.uc_mcontext.gregs[i];
	{
		static const int map[CKPT_NREG] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI,
						   REG_RBP, REG_RSP, REG_R8,  REG_R9,  REG_R10, REG_R11,
						   REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
		for (int i = 0; i < CKPT_NREG; i++)
			ts->reg[i] = ts->gregs[map[i]];
	}
	return 1;
}

void ckpt_unw_thread(struct ckpt_unw *u, const struct ck_procdesc *pd, const struct ck_pd_thread *t,
		     struct ckpt_tstate *ts)
{
	struct ckpt_frame fr[8];
	const char *why;
	size_t n;

	memset(ts, 0, sizeof(*ts));
	ts->reg[UNW_X86_64_RBX] = t->ctx.rbx;
	ts->reg[UNW_X86_64_RBP] = t->ctx.rbp;
	ts->reg[UNW_X86_64_R12] = t->ctx.r12;
	ts->reg[UNW_X86_64_R13] = t->ctx.r13;
	ts->reg[UNW_X86_64_R14] = t->ctx.r14;
	ts->reg[UNW_X86_64_R15] = t->ctx.r15;
	ts->reg[UNW_X86_64_RSP] = t->ctx.rsp;
	ts->reg[UNW_X86_64_RIP] = t->ctx.rip;
	if (t->flags & CK_PDT_MANAGER) {
		ts->why = "libckpt's manager thread: from its saved context";
		return;
	}
	/* The saved context is inside the suspend handler: the frame above it
	 * is the signal trampoline, and the ucontext starts where the
	 * handler's frame ended (its return address popped). */
	n = ckpt_unw_stack(u, ts->reg, fr, 8, &why);
	for (size_t i = 1; i < n; i++)
		if ((fr[i].signal || is_restorer(pd, fr[i].ip)) && uc_at(u, fr[i].sp, ts))
			return;
	/* Without unwind information for the handler: the frame is the first
	 * word above the saved stack pointer that is a signal's restorer and
	 * is followed by a ucontext. */
	for (uint64_t a = t->ctx.rsp; a < t->ctx.rsp + 65536; a += 8) {
		uint64_t w;
		if (ckpt_img_read(u->im, a, &w, sizeof(w)) < 0)
			break;
		if (is_restorer(pd, w) && uc_at(u, a + 8, ts))
			return;
	}
	ts->why = "no signal frame found: from the context saved in libckpt's handler";
}
