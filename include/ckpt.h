/* ckpt.h: the optional API a job may call under ckrun.
 *
 * Unmodified jobs never need it: ckrun checkpoints a program that knows
 * nothing about it. This header is for programs that want to ask for a
 * checkpoint at a point of their choosing, or learn that they were
 * restored, or redo something (reopen a connection) when they are.
 *
 * Linking. A program built with this header runs with or without
 * libckpt.so preloaded and links nothing extra: the library's entry points
 * are weak references, and the inline functions below answer
 * CKPT_NOT_PRESENT when the library is absent, or (ckpt_present and
 * ckpt_version apart) present but not under ckrun: no control channel.
 *
 * Version. CKPT_API_VERSION is the version of this header; ckpt_version()
 * that of the libckpt.so the process runs with. A version only grows, and
 * what a version declares stays as documented here.
 *
 * Thread safety. ckpt_present, ckpt_version, ckpt_is_restarted and
 * ckpt_request may be called from any thread, at once; concurrent
 * ckpt_request calls each return when a round ends after their request
 * (one round may serve several). ckpt_on_restart is not thread-safe:
 * register callbacks from one thread, before the first checkpoint (at
 * start-up), not while another thread registers or a round runs. None of
 * these may be called from a signal handler.
 *
 * Restart callbacks. In a process restored from a checkpoint, the
 * callbacks registered with ckpt_on_restart run once, in the order they
 * were registered, on libckpt's own manager thread, after the plugins'
 * RESTART event and before any thread of the job runs again: every other
 * thread is still parked where the checkpoint stopped it, and may hold
 * any lock of the process (malloc's, stdio's, the program's own). So a
 * callback must not take a lock a job thread may hold: no malloc, free,
 * printf or other stdio, no lock of the program's; it may make system
 * calls, write to memory allocated beforehand, set flags the job reads
 * later. It must not call ckpt_request (it would wait for itself) and
 * should return quickly: the whole job waits for it. They run in every
 * restored process that registered them (a child forked after the
 * registration inherits its parent's list), and never in a process that
 * was not restored. */
#ifndef CKPT_H
#define CKPT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this header (see "Version" above). */
#define CKPT_API_VERSION 1

/* Answer of every call when libckpt is not loaded, or not under ckrun. */
#define CKPT_NOT_PRESENT (-1000)

/* Entry points in libckpt.so; call the ckpt_* wrappers instead. */
int ck_api_request(void) __attribute__((weak));
int ck_api_is_restarted(void) __attribute__((weak));
int ck_api_on_restart(void (*fn)(void *arg), void *arg) __attribute__((weak));
int ck_api_version(void) __attribute__((weak));

/* 1 if libckpt is loaded in this process (under ckrun or not), 0 if not. */
static inline int ckpt_present(void)
{
	return ck_api_request != 0;
}

/* The API version of the libckpt.so loaded (CKPT_API_VERSION of its
 * build), under ckrun or not; CKPT_NOT_PRESENT without libckpt, or with
 * one built before this call existed. */
static inline int ckpt_version(void)
{
	return ck_api_version ? ck_api_version() : CKPT_NOT_PRESENT;
}

/* Asks ckrun for a checkpoint now and waits until a round that started
 * after the request ends (a round already running ends first; ckrun then
 * starts another). Returns:
 *   0                 the checkpoint was committed; in a process restored
 *                     from that checkpoint the same call returns 0 too
 *                     (ckpt_is_restarted tells which);
 *   a negative errno  the round failed and the job runs on from where it
 *                     was (ckrun's stderr has the reason): e.g. -ENOTSUP
 *                     (state it cannot save, or a refusal), -ESRCH (a
 *                     process of the job exited during it), -ETIMEDOUT (a
 *                     process did not park within 60 s), -EPROTO, and the
 *                     store's (-EIO, -ENOSPC, -EACCES...); -EPIPE if the
 *                     request could not be sent;
 *   CKPT_NOT_PRESENT  no libckpt, or not under ckrun.
 * A round ckrun refuses before it asks the job (the job is traced, ckrun
 * lost the job's lock in the store) answers nothing: the call then
 * returns when the next round that runs ends (an interval's, SIGUSR2's,
 * ckpt checkpoint's). The calling thread blocks; the others run until the
 * round parks them. Not from a restart callback. */
static inline int ckpt_request(void)
{
	return ck_api_request ? ck_api_request() : CKPT_NOT_PRESENT;
}

/* 1 if this process was restored from a checkpoint (at any time since it
 * started), 0 if not, CKPT_NOT_PRESENT without libckpt or ckrun. */
static inline int ckpt_is_restarted(void)
{
	return ck_api_is_restarted ? ck_api_is_restarted() : CKPT_NOT_PRESENT;
}

/* Registers fn(arg) to run in a restored process before the job's threads
 * go on (see "Restart callbacks" above for where it runs and what it may
 * not do). At most 16 per process. Returns 0, -EINVAL (fn is NULL),
 * -ENOSPC (16 already), or CKPT_NOT_PRESENT. Not thread-safe. */
static inline int ckpt_on_restart(void (*fn)(void *arg), void *arg)
{
	return ck_api_on_restart ? ck_api_on_restart(fn, arg) : CKPT_NOT_PRESENT;
}

#ifdef __cplusplus
}
#endif
#endif
