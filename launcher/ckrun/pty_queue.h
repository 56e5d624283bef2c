/* Bytes waiting in a pseudo-terminal pair (pty_queue.c). */
#ifndef CK_CKRUN_PTY_QUEUE_H
#define CK_CKRUN_PTY_QUEUE_H

#include <stdint.h>
#include <asm/termbits.h>

/* The slave's line discipline holds at most 4095 bytes of input; bytes
 * the slave wrote wait in the master's (4095) and in the kernel's buffers
 * behind it (640 KiB at most). */
#define CK_PTYQ_IN_MAX 4096u
#define CK_PTYQ_OUT_MAX (1024u * 1024u)

struct ck_ptyq {
	uint32_t nin;  /* input the slave has not read: lines, then a partial one */
	uint32_t neof; /* lines ended by the EOF character: offsets into in[] */
	uint32_t nout; /* output of the slave the master has not read */
	uint8_t in[CK_PTYQ_IN_MAX];
	uint32_t eof[CK_PTYQ_IN_MAX];
	uint8_t *out; /* CK_PTYQ_OUT_MAX bytes, malloc'd */
};

/* Takes what waits in both directions into q and puts it back, so that
 * the pair is as it was (the job parked meanwhile). m: a duplicate of the
 * job's master; s: an open of the slave of ckrun's own, O_NONBLOCK; t:
 * the slave's termios. The caller has ruled out packet mode, locked
 * termios and EXTPROC. Returns 0, or -errno with the message set. */
int ck_ptyq_read(int m, int s, const struct termios2 *t, struct ck_ptyq *q);

/* Puts q into a pair (a restored one, or the one it was taken from). */
int ck_ptyq_put(int m, int s, const struct termios2 *t, const struct ck_ptyq *q);

#endif
