/* A fixed process descriptor with every kind of field filled in, shared by
 * the unit test and the program that wrote tests/golden/procdesc-v4.bin.
 * Changing it changes the golden file: do not. Fields are set one by one
 * into zeroed memory, so padding is zero and the bytes are reproducible. */
#ifndef CK_UNIT_SAMPLE_PROCDESC_H
#define CK_UNIT_SAMPLE_PROCDESC_H

#include <stdlib.h>
#include <string.h>

#include "launcher/image/procdesc_pack.h"

static inline struct ck_procdesc *ck_unit_sample_procdesc(void)
{
	struct ck_procdesc *pd = calloc(1, sizeof(*pd));
	uint32_t i;

	if (!pd)
		return NULL;
	pd->magic = CK_PD_MAGIC;
	pd->version = CK_PD_VERSION;
	pd->size = sizeof(*pd);
	pd->pid = 1000;
	pd->ppid = 999;
	pd->umask = 022;
	pd->nskips = 1;
	pd->skips[0].start = 0x7f0000000000ull;
	pd->skips[0].end = 0x7f0000200000ull;
	strcpy(pd->skips[0].why, "device memory");
	pd->nsysv = 1;
	pd->dumpable = 1;
	pd->child_subreaper = 1;
	pd->pdeathsig = 15;
	pd->ntimers = 1;
	pd->timers[0].id = 3;
	pd->timers[0].clock = 1;
	pd->timers[0].notify = 4;
	pd->timers[0].signo = 34;
	pd->timers[0].value = 0xabcdef;
	pd->timers[0].tid = 1001;
	pd->timers[0].value_ns = 5000000;
	pd->timers[0].interval_ns = 10000000;
	pd->nsiginfo = 2;
	pd->siginfo[0].tid = 0;
	pd->siginfo[0].sig = 10;
	pd->siginfo[1].tid = 1001;
	pd->siginfo[1].sig = 35;
	for (i = 0; i < 128; i++)
		pd->siginfo[1].info[i] = (uint8_t)i;
	pd->start_code = 0x400000;
	pd->end_code = 0x4c0000;
	pd->start_data = 0x6c0000;
	pd->end_data = 0x6d0000;
	pd->start_brk = 0x5000000;
	pd->brk = 0x5021000;
	pd->start_stack = 0x7ffffffde000ull;
	pd->arg_start = 0x7ffffffdf000ull;
	pd->arg_end = 0x7ffffffdf100ull;
	pd->env_start = 0x7ffffffdf100ull;
	pd->env_end = 0x7ffffffdf800ull;
	for (i = 0; i < 40; i++)
		pd->auxv[i] = 0x100 + i;
	pd->auxv_size = 40 * 8;
	for (i = 1; i < CK_PD_NSIG; i += 7) {
		pd->sigact[i].handler = 0x401000 + i;
		pd->sigact[i].flags = 0x04000000;
		pd->sigact[i].restorer = 0x402000;
		pd->sigact[i].mask = 1ull << (i - 1);
	}
	pd->itimer[0][0] = 1;
	pd->itimer[0][3] = 500000;
	for (i = 0; i < CK_PD_NRLIMIT; i++) {
		pd->rlimit[i][0] = 1000 + i;
		pd->rlimit[i][1] = ~0ull;
	}
	pd->restart_entry = 0x7f0000001000ull;
	pd->restart_arg = 0x7f0000002000ull;
	pd->restart_stack = 0x7f0000010000ull;
	strcpy(pd->exe, "/usr/bin/python3");
	strcpy(pd->cwd, "/home/u/run");
	pd->cap_bnd = 0x1ffffffffffull;
	pd->cap_amb = 0;
	pd->ngroups = 2;
	pd->groups[0] = 100;
	pd->groups[1] = 65534;
	pd->nthreads = 2;
	for (i = 0; i < 2; i++) {
		struct ck_pd_thread *t = &pd->threads[i];

		t->tid = (int32_t)(1000 + i);
		t->flags = i ? CK_PDT_MANAGER : CK_PDT_MAIN | CK_PDT_NNP;
		t->fs_base = 0x7f0000100000ull + i * 0x1000;
		t->tid_addr = t->fs_base + 0x2d0;
		t->robust_head = t->fs_base + 0x2e0;
		t->robust_len = 24;
		t->rseq_addr = i ? 0 : t->fs_base + 0x9a0;
		t->rseq_len = i ? 0 : 32;
		t->rseq_sig = i ? 0 : 0x53053053;
		strcpy(t->comm, i ? "ckpt-mgr" : "python3");
		t->timerslack = 50000;
		t->uid[0] = t->uid[1] = t->uid[2] = t->uid[3] = 1000;
		t->gid[0] = t->gid[1] = t->gid[2] = t->gid[3] = 100;
		t->cap_eff = t->cap_prm = 0;
		t->cap_inh = 0;
		t->securebits = 0;
		t->ctx.rbx = 1;
		t->ctx.rbp = 2;
		t->ctx.r12 = 3;
		t->ctx.r13 = 4;
		t->ctx.r14 = 5;
		t->ctx.r15 = 6;
		t->ctx.rsp = 0x7ffffffde000ull - 0x100 * i;
		t->ctx.rip = 0x7f0000003000ull;
		t->ctx.mxcsr = 0x1f80;
		t->ctx.fpucw = 0x37f;
	}
	pd->nfds = 4;
	pd->fds[0].fd = 0;
	pd->fds[0].kind = CK_FD_STDIO;
	pd->fds[0].flags = 2;
	pd->fds[0].u64[0] = 1;
	pd->fds[1].fd = 3;
	pd->fds[1].kind = CK_FD_FILE;
	pd->fds[1].flags = 02101;
	pd->fds[1].fdflags = 1;
	pd->fds[1].offset = 4096;
	pd->fds[1].dev = 0x803;
	pd->fds[1].ino = 4242;
	pd->fds[1].size = 8192;
	pd->fds[1].mtime_ns = 1796000000123456789ll;
	pd->fds[1].mode = 0100644;
	pd->fds[1].xflags = CK_PD_FD_STDIO_FILE;
	strcpy(pd->fds[1].path, "/home/u/run/log.txt");
	pd->fds[2].fd = 4;
	pd->fds[2].kind = CK_FD_PIPE;
	pd->fds[2].peer = -1;
	pd->fds[2].ino = 777;
	pd->fds[2].pipe_cap = 65536;
	pd->fds[2].data_chunk = 12;
	pd->fds[2].data_nchunks = 1;
	strcpy(pd->fds[2].path, "pipe:[777]");
	pd->fds[3].fd = 5;
	pd->fds[3].kind = CK_FD_EPOLL;
	pd->fds[3].fdflags = 1;
	pd->nepitems = 1;
	pd->epitems[0].epfd = 5;
	pd->epitems[0].tfd = 4;
	pd->epitems[0].events = 1;
	pd->epitems[0].data = 0x1234567890ull;
	return pd;
}

#endif
