/* Bytes waiting in a pseudo-terminal pair (pty_queue.c). */
#ifndef CK_CKRUN_PTY_QUEUE_H
#define CK_CKRUN_PTY_QUEUE_H

#include <stdint.h>
#include <asm/termbits.h>

/* What a round can take: the kernel buffers up to 640 KiB behind a line
 * discipline's 4095 bytes; input is kept escaped (at most twice its size).
 * What a put-back can confirm: input that fits the slave's line buffer
 * and whose echo fits the master's. */
#define CK_PTYQ_OUT_MAX (1024u * 1024u)
#define CK_PTYQ_IN_MAX (2u * 1024u * 1024u + 65536u)
#define CK_PTYQ_IN_FIT 4000u

struct ck_ptyq {
	/* Input the slave has not read, as it is written back to the master
	 * under the identity termios (pty_queue.c): in canonical mode a
	 * line-end, EOF, erase or literal-next byte that is data is preceded
	 * by the literal-next character, and a line ended by EOF is followed
	 * by the EOF character; lnext, eofc, erase: those characters (0:
	 * non-canonical, the bytes as they are). */
	uint8_t *in;
	uint32_t nin;
	uint8_t lnext, eofc, erase;
	uint32_t nout; /* output of the slave the master has not read */
	uint8_t *out;
	/* the round's counts: bytes of data and line-buffer places taken */
	uint32_t ndata, nplaces;
};

/* Buffers of a queue to take into (ck_ptyq_free releases them). */
int ck_ptyq_alloc(struct ck_ptyq *q);
void ck_ptyq_free(struct ck_ptyq *q);

/* Takes what waits in both directions into q and puts it back, so that
 * the pair is as it was (the job parked meanwhile). m: a duplicate of the
 * job's master; s: an open of the slave of ckrun's own, O_NONBLOCK; t:
 * the slave's termios. The caller has ruled out packet mode, locked
 * termios, EXTPROC and O_ASYNC. Returns 0, or -errno with the message set
 * (then what was taken is back as far as it could be put). */
int ck_ptyq_read(int m, int s, const struct termios2 *t, struct ck_ptyq *q);

/* Puts q into a pair (a restored one, or the one it was taken from). */
int ck_ptyq_put(int m, int s, const struct termios2 *t, const struct ck_ptyq *q);

#endif
