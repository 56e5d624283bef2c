/* ckpt.h: the optional API a job may call. Unmodified jobs never need it.
 *
 * All functions are weak references: a program built with this header runs
 * with or without libckpt.so preloaded; without it, calls report
 * CKPT_NOT_PRESENT. Link nothing extra. */
#ifndef CKPT_H
#define CKPT_H

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_NOT_PRESENT (-1000)

/* Asks ckrun for a checkpoint now; returns 0 once it is committed, or a
 * negative errno, or CKPT_NOT_PRESENT. */
int ckpt_request(void) __attribute__((weak));
/* 1 if this process was restored from a checkpoint, 0 if not. */
int ckpt_is_restarted(void) __attribute__((weak));
/* Registers fn to run in the restored process before the job's threads go
 * on. Returns 0 or a negative errno. */
int ckpt_on_restart(void (*fn)(void *arg), void *arg) __attribute__((weak));

static inline int ckpt_present(void)
{
	return ckpt_request != 0;
}

#ifdef __cplusplus
}
#endif
#endif
