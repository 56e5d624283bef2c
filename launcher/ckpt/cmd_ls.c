/* ckpt ls [--json] [JOB]: jobs of a store, or the checkpoints of one job. */
#include "launcher/ckpt/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/common/ck_err.h"

static int ls_jobs(struct ck_store *s, int json)
{
	char **jobs = NULL, when[64];
	size_t n = 0, i;
	int rc, bad = 0;

	rc = ck_store_list_jobs(s, &jobs, &n);
	if (rc < 0)
		return ckpt_fail(rc);
	if (json)
		printf("[");
	else if (n)
		printf("%-32s %11s %9s  %s\n", "JOB", "CHECKPOINTS", "LATEST", "TIME (UTC)");
	for (i = 0; i < n; i++) {
		struct ck_manifest *m = NULL;
		uint64_t *seqs = NULL;
		char name[CK_JOB_NAME_MAX + 1], shown[CK_JOB_NAME_MAX + 1];
		size_t ns = 0, k;

		/* The user's name, as ckrun and ckpt take it (jobname.c). */
		if (ck_job_name_decode(jobs[i], name, sizeof(name)) < 0)
			snprintf(name, sizeof(name), "%s", jobs[i]);
		for (k = 0; name[k] && k < sizeof(shown) - 1; k++)
			shown[k] = (unsigned char)name[k] < 0x20 || name[k] == 0x7f ? '?' : name[k];
		shown[k] = 0;

		if (ck_manifest_list(s, jobs[i], &seqs, &ns) == 0 && ns)
			if (ck_manifest_load(s, jobs[i], seqs[ns - 1], &m) < 0)
				bad = 1;
		ckpt_fmt_time(m ? m->time_ns : 0, when, sizeof(when));
		if (json) {
			printf("%s{\"job\":", i ? "," : "");
			ckpt_json_str(stdout, name);
			printf(",\"checkpoints\":%zu,\"latest\":%llu,\"time_ns\":%llu,\"ok\":%s}", ns,
			       ns ? (unsigned long long)seqs[ns - 1] : 0ull, m ? (unsigned long long)m->time_ns : 0ull,
			       m ? "true" : "false");
		} else {
			printf("%-32s %11zu %9llu  %s%s\n", shown, ns, ns ? (unsigned long long)seqs[ns - 1] : 0ull,
			       when, m ? "" : "  (latest does not load)");
		}
		ck_manifest_free(m);
		free(seqs);
		free(jobs[i]);
	}
	if (json)
		printf("]\n");
	free(jobs);
	if (bad) {
		fprintf(stderr, "ckpt: some jobs have a checkpoint that does not load; see ckpt verify\n");
		return CK_EXIT_CORRUPT;
	}
	return 0;
}

static int ls_job(struct ck_store *s, const char *job, int json)
{
	uint64_t *seqs = NULL;
	size_t n = 0, i;
	int rc, bad = 0;
	char first_err[1024] = "";

	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc < 0)
		return ckpt_fail(rc);
	if (n == 0) {
		free(seqs);
		ck_err_set("job %s has no checkpoint in store %s", job, s->uri);
		return ckpt_fail(-ENOENT);
	}
	if (json)
		printf("[");
	else
		printf("%-9s %-19s %11s %11s %10s\n", "SEQ", "TIME (UTC)", "LOGICAL", "STORED", "DURATION");
	for (i = 0; i < n; i++) {
		struct ck_manifest *m = NULL;
		char when[64], lb[32], sb[32], dur[32];

		rc = ck_manifest_load(s, job, seqs[i], &m);
		if (rc < 0) {
			if (!bad)
				snprintf(first_err, sizeof(first_err), "%s", ck_err_msg());
			bad = 1;
			if (json)
				printf("%s{\"seq\":%llu,\"ok\":false}", i ? "," : "", (unsigned long long)seqs[i]);
			else
				printf("%-9llu (does not load: see ckpt verify)\n", (unsigned long long)seqs[i]);
			continue;
		}
		if (json) {
			printf("%s{\"seq\":%llu,\"ok\":true,\"time_ns\":%llu,\"logical_bytes\":%llu,"
			       "\"stored_bytes\":%llu,\"duration_ns\":%llu,\"frozen_ns\":%llu,\"processes\":%zu,"
			       "\"chunks\":%zu,\"packs\":%zu}",
			       i ? "," : "", (unsigned long long)m->seq, (unsigned long long)m->time_ns,
			       (unsigned long long)m->logical_bytes, (unsigned long long)m->stored_bytes,
			       (unsigned long long)m->duration_ns, (unsigned long long)m->frozen_ns, m->nprocs,
			       m->nchunks, m->npacks);
		} else {
			ckpt_fmt_time(m->time_ns, when, sizeof(when));
			ck_fmt_bytes(m->logical_bytes, lb, sizeof(lb));
			ck_fmt_bytes(m->stored_bytes, sb, sizeof(sb));
			ckpt_fmt_duration(m->duration_ns, dur, sizeof(dur));
			printf("%-9llu %-19s %11s %11s %10s\n", (unsigned long long)m->seq, when, lb, sb, dur);
		}
		ck_manifest_free(m);
	}
	if (json)
		printf("]\n");
	free(seqs);
	if (bad) {
		fprintf(stderr, "ckpt: %s\n", first_err);
		return CK_EXIT_CORRUPT;
	}
	return 0;
}

int ckpt_cmd_ls(int argc, char **argv)
{
	struct ckpt_opts o;
	struct ck_store *s;
	char job[CK_JOB_NAME_MAX + 1];
	int i, rc;

	i = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_JSON, &o);
	if (i < 0)
		return CK_EXIT_USAGE;
	if (argc - i > 1)
		return ckpt_usage_error("ls: expected at most one JOB");
	if (argc - i == 1 && ck_job_name_encode(argv[i], job, sizeof(job)) < 0)
		return ckpt_usage_error("ls: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = argc - i == 1 ? ls_job(s, job, o.json) : ls_jobs(s, o.json);
	ck_store_close(s);
	return rc;
}
