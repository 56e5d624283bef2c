/* ckrun contract: the saved execution context of one thread.
 *
 * Version: part of the process descriptor (CK_PD_VERSION in
 * ckrun/procdesc.h); a change of this layout bumps that version.
 *
 * What a function call boundary must preserve on x86-64: callee-saved
 * registers, stack and return address, MXCSR and the x87 control word.
 * libckpt fills it where a job thread parks (libckpt/ctx.h: ck_ctx_save)
 * and resumes it at restart; images hold it inside each thread's record. */
#ifndef CK_CONTRACT_CTX_LAYOUT_H
#define CK_CONTRACT_CTX_LAYOUT_H

#include <stdint.h>

struct ck_ctx {
	uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip;
	uint32_t mxcsr;
	uint16_t fpucw;
	uint16_t pad;
};

#endif
