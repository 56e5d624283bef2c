/* ckpt.h: the optional API a job may call. Unmodified jobs never need it.
 *
 * A program built with this header runs with or without libckpt.so
 * preloaded and links nothing extra: the library's entry points are weak
 * references, and the inline functions below answer CKPT_NOT_PRESENT when
 * the library is absent (or the process does not run under ckrun). */
#ifndef CKPT_H
#define CKPT_H

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_NOT_PRESENT (-1000)

/* Entry points in libckpt.so; call the ckpt_* wrappers instead. */
int ck_api_request(void) __attribute__((weak));
int ck_api_is_restarted(void) __attribute__((weak));
int ck_api_on_restart(void (*fn)(void *arg), void *arg) __attribute__((weak));

/* 1 if libckpt is loaded in this process. */
static inline int ckpt_present(void)
{
	return ck_api_request != 0;
}

/* Asks ckrun for a checkpoint now and waits for the next round to end:
 * 0 once it is committed, a negative errno if it failed, CKPT_NOT_PRESENT
 * without ckrun. In a process restored from that checkpoint it returns 0
 * as well (see ckpt_is_restarted). */
static inline int ckpt_request(void)
{
	return ck_api_request ? ck_api_request() : CKPT_NOT_PRESENT;
}

/* 1 if this process was restored from a checkpoint, 0 if not. */
static inline int ckpt_is_restarted(void)
{
	return ck_api_is_restarted ? ck_api_is_restarted() : CKPT_NOT_PRESENT;
}

/* Registers fn(arg) to run in a restored process before the job's threads
 * go on (up to 16). Returns 0, a negative errno, or CKPT_NOT_PRESENT. */
static inline int ckpt_on_restart(void (*fn)(void *arg), void *arg)
{
	return ck_api_on_restart ? ck_api_on_restart(fn, arg) : CKPT_NOT_PRESENT;
}

#ifdef __cplusplus
}
#endif
#endif
