/* Entry of the restorer: move to our own stack (the kernel's one lies where
 * the restored process may need its memory) and run ck_rst_main. */
	.text
	.globl _start
	.type _start, @function
_start:
	leaq ck_rst_stack_top(%rip), %rsp
	andq $-16, %rsp
	call ck_rst_main
	ud2
	.size _start, .-_start
	.section .note.GNU-stack,"",@progbits
