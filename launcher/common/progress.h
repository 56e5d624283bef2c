/* A progress line on stderr for long transfers (ckpt cp, ckpt verify, a
 * restore): bytes done of the total, rate and time left, rewritten in place
 * with a carriage return. Only when stderr is a terminal: a pipe or a file
 * gets nothing, so logs and scripts see the same output as before.
 *
 * Not thread-safe: callers that count from several threads hold their own
 * lock around ck_progress_set/add. */
#ifndef CK_PROGRESS_H
#define CK_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

struct ck_progress {
	int on;         /* stderr is a terminal */
	int shown;      /* a line is on the screen (end clears it) */
	char what[96];  /* "verify JOB@3" */
	uint64_t total; /* bytes expected (0: unknown, no percentage nor ETA) */
	uint64_t done;
	uint64_t drawn; /* done as the line on the screen says */
	uint64_t t0_ns, last_ns; /* CLOCK_MONOTONIC: start, last line */
};

/* Starts counting; draws nothing yet. */
void ck_progress_start(struct ck_progress *p, const char *what, uint64_t total);
/* Sets or adds to the bytes done. The line is drawn for the first bytes,
 * then at most every CK_PROGRESS_PERIOD_NS, and once when done reaches
 * total. NULL p is ignored. */
void ck_progress_set(struct ck_progress *p, uint64_t done);
void ck_progress_add(struct ck_progress *p, uint64_t n);
/* Clears the line (if one was drawn), so what follows starts a clean line. */
void ck_progress_end(struct ck_progress *p);
/* The line as it would be drawn, without "\r" and colour: for tests. */
/* A byte count as people read it: "512 B", "1.5 MiB" (also ckpt's). */
void ck_fmt_bytes(uint64_t n, char *buf, size_t len);
void ck_progress_format(const struct ck_progress *p, uint64_t now_ns, char *buf, unsigned len);

#define CK_PROGRESS_PERIOD_NS 250000000ull /* four lines a second at most */
#define CK_PROGRESS_SETTLE_S 0.2            /* no rate nor ETA before this */

#endif
