/* ck_ctx_save / ck_ctx_resume: see ctx.h. Offsets follow struct ck_ctx. */
	.text
	.globl ck_ctx_save
	.hidden ck_ctx_save
	.type ck_ctx_save, @function
ck_ctx_save:
	movq %rbx, 0(%rdi)
	movq %rbp, 8(%rdi)
	movq %r12, 16(%rdi)
	movq %r13, 24(%rdi)
	movq %r14, 32(%rdi)
	movq %r15, 40(%rdi)
	leaq 8(%rsp), %rdx          /* caller's rsp after our return */
	movq %rdx, 48(%rdi)
	movq (%rsp), %rdx           /* return address */
	movq %rdx, 56(%rdi)
	stmxcsr 64(%rdi)
	fnstcw 68(%rdi)
	xorl %eax, %eax
	ret
	.size ck_ctx_save, .-ck_ctx_save

	.globl ck_ctx_resume
	.hidden ck_ctx_resume
	.type ck_ctx_resume, @function
ck_ctx_resume:
	movq 0(%rdi), %rbx
	movq 8(%rdi), %rbp
	movq 16(%rdi), %r12
	movq 24(%rdi), %r13
	movq 32(%rdi), %r14
	movq 40(%rdi), %r15
	ldmxcsr 64(%rdi)
	fldcw 68(%rdi)
	movq 48(%rdi), %rsp
	movl $1, %eax
	jmpq *56(%rdi)
	.size ck_ctx_resume, .-ck_ctx_resume
	.section .note.GNU-stack,"",@progbits
