/* syscall(3), interposed for the job's seccomp filters (seccomp.c): the
 * io_* calls of Linux AIO (io_setup to io_cancel, io_pgetevents) go to
 * ck__syscall_aio (aio.c), which counts what may be in flight; a
 * SYS_seccomp, SYS_prctl or SYS_membarrier call goes to
 * ck__syscall_record, which records what it installs or registers (for a
 * prctl, only its first three arguments matter: prctl(2) takes five, and
 * the C path passes three); every other call is made here as the C library makes it, with
 * no stack frame of ours, so that a call that returns twice on one stack
 * (SYS_vfork, clone with CLONE_VM and no new stack) behaves as it does
 * without libckpt. Errors go to ck__syscall_fail, which sets errno and
 * returns -1 to our caller. */
#include <sys/syscall.h>

	.text
	.globl syscall
	.type syscall, @function
syscall:
	.cfi_startproc
	endbr64
	cmpq $SYS_seccomp, %rdi
	je ck__syscall_record
	cmpq $SYS_prctl, %rdi
	je ck__syscall_record
	cmpq $SYS_membarrier, %rdi
	je ck__syscall_record
	cmpq $SYS_io_setup, %rdi
	jb 2f
	cmpq $SYS_io_cancel, %rdi
	jbe ck__syscall_aio
2:	cmpq $SYS_io_pgetevents, %rdi
	je ck__syscall_aio
	movq %rdi, %rax
	movq %rsi, %rdi
	movq %rdx, %rsi
	movq %rcx, %rdx
	movq %r8, %r10
	movq %r9, %r8
	movq 8(%rsp), %r9
	syscall
	cmpq $-4095, %rax
	jae 1f
	ret
1:	movq %rax, %rdi
	jmp ck__syscall_fail
	.cfi_endproc
	.size syscall, .-syscall

	.section .note.GNU-stack, "", @progbits
