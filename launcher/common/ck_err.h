/* Error reporting for the launcher side (ckrun, ckpt, store, image code).
 *
 * Functions return 0 or a negative errno value. Where an error is detected,
 * the code also records one human-readable line naming the thing that failed
 * (ck_err_set); the top level prints it once. The message is thread-local so
 * worker threads do not clobber each other. */
#ifndef CK_ERR_H
#define CK_ERR_H

#include <stdarg.h>

void ck_err_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ck_err_vset(const char *fmt, va_list ap);
/* Prepends context: "CTX: previous message". */
void ck_err_wrap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *ck_err_msg(void);
void ck_err_clear(void);

/* Exit statuses of ckrun and ckpt (documented in README.md). The job's own
 * status passes through unchanged when the job ends by itself. */
enum {
	CK_EXIT_OK = 0,
	CK_EXIT_USAGE = 64,      /* bad command line (EX_USAGE) */
	CK_EXIT_CORRUPT = 2,     /* checkpoint data corrupt, truncated or missing */
	CK_EXIT_STORE = 69,      /* store unreachable / credentials / permission (EX_UNAVAILABLE) */
	CK_EXIT_CANTCREAT = 73,  /* ckpt: an output file (report -o, export-core -o) cannot be written (EX_CANTCREAT) */
	CK_EXIT_TEMPFAIL = 75,   /* job checkpointed and stopped: resume me later (EX_TEMPFAIL) */
	CK_EXIT_UNSAVED = 76,    /* job stopped without a new checkpoint: a resume goes back further */
	CK_EXIT_INTERNAL = 99,   /* ckrun itself failed (like DMTCP's 99) */
};

#endif
