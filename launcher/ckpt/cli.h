/* ckpt, the operator's tool: shared helpers of the subcommands. */
#ifndef CKPT_TOOL_H
#define CKPT_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "launcher/common/progress.h" /* ck_fmt_bytes */
#include "launcher/image/manifest.h"
#include "launcher/store/store.h"

/* options a subcommand accepts */
#define CKPT_O_STORE 0x01 /* --store URI, --s3-endpoint, --s3-ca, --s3-profile */
#define CKPT_O_JSON 0x02  /* --json */
#define CKPT_O_STOP 0x04  /* --stop */
#define CKPT_O_KEEP 0x08  /* --keep N */
#define CKPT_O_FORCE 0x10 /* --force */
#define CKPT_O_BACKTRACE 0x20 /* --backtrace */
#define CKPT_O_PID 0x40       /* --pid P */
#define CKPT_O_OUTPUT 0x80    /* -o FILE */
#define CKPT_O_SITES 0x100    /* --from-profile P, --to-profile P (cp) */

struct ckpt_opts {
	const char *store; /* --store, else $CKPT_STORE, else ./ckpt-store */
	struct ck_store_opts sopts;
	int json, stop, force;
	long keep; /* -1: not given */
	int backtrace;
	long pid;           /* -1: not given */
	const char *output; /* -o */
	const char *from_profile, *to_profile; /* cp: each store's own profile */
};

/* Parses the options of a subcommand (argv[0] is its name); returns the
 * index of the first operand, or -1 after printing a usage error. */
int ckpt_getopts(int argc, char **argv, unsigned allowed, struct ckpt_opts *o);
/* Prints "ckpt: MESSAGE" for a usage error and returns CK_EXIT_USAGE. */
int ckpt_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "ckpt: <ck_err_msg()>" and returns the exit status for rc. */
int ckpt_fail(int rc);
int ckpt_exit_status(int rc);

/* must_exist: a store that does not exist fails (-ENXIO: exit 69). */
int ckpt_open_store(const char *uri, const struct ck_store_opts *so, int must_exist, struct ck_store **s);
/* "JOB" or "JOB@SEQ": fills job and, if present, *seq (else 0). */
int ckpt_parse_ref(const char *arg, char *job, size_t len, uint64_t *seq);
/* Loads JOB@SEQ, or the newest checkpoint when seq is 0. */
int ckpt_load(struct ck_store *s, const char *job, uint64_t seq, struct ck_manifest **m);

void ckpt_fmt_time(uint64_t ns, char *buf, size_t len);
void ckpt_fmt_duration(uint64_t ns, char *buf, size_t len);
void ckpt_json_str(FILE *f, const char *s);


int ckpt_cmd_checkpoint(int argc, char **argv);
int ckpt_cmd_ls(int argc, char **argv);
int ckpt_cmd_verify(int argc, char **argv);
int ckpt_cmd_inspect(int argc, char **argv);
int ckpt_cmd_rm(int argc, char **argv);
int ckpt_cmd_gc(int argc, char **argv);
int ckpt_cmd_cp(int argc, char **argv);
int ckpt_cmd_unlock(int argc, char **argv);
int ckpt_cmd_export_core(int argc, char **argv);
int ckpt_cmd_report(int argc, char **argv);

/* inspect --backtrace: the stacks of every thread of m (backtrace.c). */
int ckpt_backtrace(struct ck_store *s, const struct ck_manifest *m);

#endif
