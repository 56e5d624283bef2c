/* Minimal execution context: what a function call boundary must preserve
 * on x86-64 (callee-saved registers, stack and return address, MXCSR and the
 * x87 control word). ck_ctx_save() returns 0 when called and 1 when the
 * context is resumed by ck_ctx_resume(), possibly in a restored process.
 * Unlike setjmp it touches no signal mask and mangles no pointers, so it
 * can be resumed from raw restart code. */
#ifndef CK_CTX_H
#define CK_CTX_H

#include "ckrun/ctx_layout.h" /* struct ck_ctx, part of the image */

int ck_ctx_save(struct ck_ctx *c) __attribute__((returns_twice));
__attribute__((noreturn)) void ck_ctx_resume(const struct ck_ctx *c);

#endif
