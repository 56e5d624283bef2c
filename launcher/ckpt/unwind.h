/* Stacks of a checkpointed process's threads, unwound by libunwind from
 * the image: an address space whose accessors read the registers we give
 * and the memory of the checkpoint (imgmem), and whose unwind tables are
 * the .eh_frame_hdr of the ELF objects the process had mapped (elfobj). */
#ifndef CKPT_UNWIND_H
#define CKPT_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "launcher/ckpt/elfobj.h"
#include "launcher/ckpt/imgmem.h"
#include "ckrun/procdesc.h"

#define CKPT_NREG 17 /* libunwind's x86-64 numbering: rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip */

/* Where a thread's stack starts. A job thread is parked in libckpt's
 * suspend handler: its own registers at the moment the signal came are in
 * the kernel's signal frame (a ucontext) on its stack; that is where its
 * stack starts. libckpt's manager thread starts at its saved context. */
struct ckpt_tstate {
	int from_uc;          /* the registers come from the signal frame */
	uint64_t uc;          /* the ucontext's address */
	uint64_t gregs[23];   /* its mcontext gregs (REG_* order) */
	uint64_t fpstate;     /* address of its FXSAVE/XSAVE area, 0: none */
	uint64_t reg[CKPT_NREG];
	const char *why;      /* !from_uc: why the saved context is used */
};

struct ckpt_frame {
	uint64_t ip, sp;
	int exact;  /* ip is where the thread is (frame 0, or after a signal frame), not a return address */
	int signal; /* a signal trampoline frame */
};

struct ckpt_unw;
int ckpt_unw_open(struct ckpt_img *im, struct ckpt_objs *objs, struct ckpt_unw **out);
void ckpt_unw_close(struct ckpt_unw *u);
/* The registers a thread's stack starts from. */
void ckpt_unw_thread(struct ckpt_unw *u, const struct ck_procdesc *pd, const struct ck_pd_thread *t,
		     struct ckpt_tstate *ts);
/* Unwinds from reg: up to max frames into fr; *why says why it stopped
 * early (NULL: the outermost frame was reached). */
size_t ckpt_unw_stack(struct ckpt_unw *u, const uint64_t reg[CKPT_NREG], struct ckpt_frame *fr, size_t max,
		      const char **why);

#endif
