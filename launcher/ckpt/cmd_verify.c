/* ckpt verify [--json] JOB[@SEQ]: reads every chunk and checks it. */
#include "launcher/ckpt/cli.h"

#include <stdlib.h>
#include <string.h>

#include "launcher/image/chunkio.h"
#include "launcher/common/ck_err.h"
#include "launcher/common/progress.h"

static int discard(void *arg, uint64_t off, const void *buf, size_t len)
{
	(void)off;
	(void)buf;
	*(uint64_t *)arg += len;
	return 0;
}

int ckpt_cmd_verify(int argc, char **argv)
{
	struct ck_manifest *m = NULL;
	struct ck_reader *r = NULL;
	struct ck_store *s = NULL;
	struct ck_progress p;
	struct ckpt_opts o;
	char job[256], what[300], lb[32];
	uint64_t seq, i, bytes = 0, total = 0;
	int a, rc;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_JSON, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("verify: expected one JOB[@SEQ]");
	if (ckpt_parse_ref(argv[a], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("verify: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ckpt_load(s, job, seq, &m);
	if (rc < 0)
		goto out;
	rc = ck_reader_open(s, job, m, &r);
	if (rc < 0)
		goto out;
	snprintf(what, sizeof(what), "verify %s@%llu", job, (unsigned long long)m->seq);
	for (i = 0; i < m->nchunks; i++)
		total += m->chunks[i].len;
	ck_progress_start(&p, what, total);
	ck_reader_set_progress(r, &p);
	for (i = 0; i < m->nchunks && rc == 0; i += 64) {
		uint32_t n = m->nchunks - i < 64 ? (uint32_t)(m->nchunks - i) : 64;

		rc = ck_reader_read(r, i, n, discard, &bytes);
	}
	ck_progress_end(&p);
out:
	if (o.json) {
		printf("{\"job\":");
		ckpt_json_str(stdout, job);
		printf(",\"seq\":%llu,\"ok\":%s", (unsigned long long)(m ? m->seq : seq), rc ? "false" : "true");
		if (m)
			printf(",\"chunks\":%zu,\"packs\":%zu,\"logical_bytes\":%llu", m->nchunks, m->npacks,
			       (unsigned long long)bytes);
		if (rc) {
			printf(",\"error\":");
			ckpt_json_str(stdout, ck_err_msg());
		}
		printf("}\n");
	} else if (rc == 0) {
		ck_fmt_bytes(bytes, lb, sizeof(lb));
		printf("ok %s@%llu: %zu chunks in %zu packs verified (%s)\n", job, (unsigned long long)m->seq,
		       m->nchunks, m->npacks, lb);
	}
	if (rc < 0)
		rc = ckpt_fail(rc);
	ck_reader_close(r);
	ck_manifest_free(m);
	ck_store_close(s);
	return rc;
}
