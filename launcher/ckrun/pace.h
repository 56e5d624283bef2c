/* The writer's priority over a round (pace.c). */
#ifndef CK_CKRUN_PACE_H
#define CK_CKRUN_PACE_H

#include <stdint.h>

struct ck_pace {
	uint64_t start_ns; /* when the round's writer was opened */
	int from, to;      /* nice values: the first, and the last it rises to */
	unsigned step_ms;  /* 0: fixed at from */
	unsigned gen;      /* one per round: threads re-read their own value */
};

/* A round's writer starts at nice `from` and rises by 5 every step_ms to
 * `to` (the value of the thread that calls this: ckrun's own). */
void ck_pace_start(struct ck_pace *p, int from, unsigned step_ms);
/* Whether this thread may set nice value `to` (lower than its own):
 * CAP_SYS_NICE, or RLIMIT_NICE. */
int ck_pace_may_nice(int to);
/* The nice value the round wants now. */
int ck_pace_want(const struct ck_pace *p);
/* The writer's hook (a struct ck_pace * as arg): a writer thread starting
 * (first) takes the value the round wants; any thread between pieces of
 * work has its priority raised to it (never lowered: ckrun's own thread
 * writes too, and an ordinary user could not raise it back). */
void ck_pace_thread(void *arg, int first);

#endif
