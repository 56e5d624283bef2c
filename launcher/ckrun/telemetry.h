/* What ckrun tells operators: Prometheus metrics (served on --metrics
 * ADDR, written to --metrics-file F for node_exporter's textfile
 * collector) and a JSON event per line (--events F). */
#ifndef CK_TELEMETRY_H
#define CK_TELEMETRY_H

#include <stdint.h>

struct ck_telemetry;

struct ck_tel_opts {
	const char *job;          /* the job's name (label ckrun_job) */
	const char *metrics_addr; /* [HOST:]PORT, NULL: no server */
	const char *metrics_file; /* NULL: none */
	const char *events_file;  /* NULL: none */
};

/* A round's outcome, as reported by round.c. */
struct ck_tel_round {
	uint64_t seq;
	int ok;      /* committed */
	int refused; /* not committed: refused before the cut, the job untouched */
	int stop;    /* the last round of a stop */
	uint64_t nprocs, logical_bytes, stored_bytes;
	double seconds, frozen_seconds;
	double cpu_seconds; /* ckrun's own CPU time in it (every try) */
	const char *snapshot; /* "write-protect", "fork", "none" */
	const char *error;    /* !ok: why */
};

/* NULL opts fields: that output is off. 0, or -errno (message in ck_err):
 * an address that cannot be bound, a file that cannot be written. */
int ck_tel_open(const struct ck_tel_opts *o, struct ck_telemetry **out);
void ck_tel_close(struct ck_telemetry *t);

/* Each call updates the metrics (file rewritten atomically) and writes an
 * event. t may be NULL (nothing asked for). Never fails the caller: an
 * output that cannot be written is reported once on stderr. */
void ck_tel_round(struct ck_telemetry *t, const struct ck_tel_round *r);
void ck_tel_restore(struct ck_telemetry *t, uint64_t seq, double seconds);
/* A round repeated another way: to is "forked-snapshot", "no-snapshot" or
 * "full" (without the previous checkpoint's packs). */
void ck_tel_fallback(struct ck_telemetry *t, uint64_t seq, const char *to, const char *why);
/* The job ended (status: ckrun's exit status). */
void ck_tel_end(struct ck_telemetry *t, int status, const char *how);

#endif
