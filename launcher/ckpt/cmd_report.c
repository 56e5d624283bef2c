/* ckpt report [--store URI] JOB -o FILE.svg|FILE.png: a picture of the
 * job's checkpoint history (report.h): per checkpoint its logical and
 * stored bytes, dedup, round duration and frozen time, from its manifest;
 * the restores from the job's restore records (restore_log.h). */
#include "launcher/ckpt/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "launcher/ckpt/report.h"
#include "launcher/common/ck_err.h"
#include "launcher/image/restore_log.h"

/* Bytes of chunks the round wrote anew: those in its own packs
 * ("packs/SEQ-..."), each place counted once (a chunk met twice in one
 * round is stored once). */
static int rp_by_place(const void *a, const void *b)
{
	const struct ck_chunk *x = *(const struct ck_chunk *const *)a, *y = *(const struct ck_chunk *const *)b;

	if (x->pack != y->pack)
		return x->pack < y->pack ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int rp_figures(const struct ck_manifest *m, struct rp_ckpt *c)
{
	const struct ck_chunk **own = NULL;
	char prefix[40];
	size_t n = 0, plen;
	uint8_t *mine;

	c->ok = 1;
	c->time_ns = m->time_ns;
	c->duration_ns = m->duration_ns;
	c->frozen_ns = m->frozen_ns;
	c->logical = m->logical_bytes;
	c->stored = m->stored_bytes;
	plen = (size_t)snprintf(prefix, sizeof(prefix), "packs/%08llu-", (unsigned long long)m->seq);
	mine = calloc(m->npacks + 1, 1);
	own = calloc(m->nchunks + 1, sizeof(*own));
	if (!mine || !own) {
		free(mine);
		free(own);
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->npacks; i++)
		mine[i] = !strncmp(m->packs[i], prefix, plen);
	for (size_t i = 0; i < m->nchunks; i++) {
		const struct ck_chunk *k = &m->chunks[i];

		c->chunk_bytes += k->len;
		if (!(k->flags & CK_CHUNK_ZERO) && mine[k->pack])
			own[n++] = k;
	}
	qsort(own, n, sizeof(*own), rp_by_place);
	for (size_t i = 0; i < n; i++)
		if (!i || rp_by_place(&own[i - 1], &own[i]))
			c->new_bytes += own[i]->len;
	free(mine);
	free(own);
	return 0;
}

/* The picture into path: a temporary file next to it, renamed over it
 * once whole, so a failure leaves no part of a picture. */
static int rp_output(const struct rp_pic *pic, const char *path, int png)
{
	char *tmp = NULL;
	FILE *f = NULL;
	int fd = -1, rc;

	if (asprintf(&tmp, "%s.tmp-XXXXXX", path) < 0) {
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	fd = mkstemp(tmp); /* 0600 */
	if (fd < 0) {
		rc = -errno;
		ck_err_set("cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	f = fdopen(fd, "w");
	if (!f) {
		rc = -errno;
		ck_err_set("cannot write %s: %s", path, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	rc = png ? rp_write_png(pic, f) : rp_write_svg(pic, f);
	if ((fflush(f) || fsync(fileno(f))) && rc == 0)
		rc = -errno;
	if (fclose(f) && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		if (rc != -ENOMEM)
			ck_err_set("cannot write %s: %s", path, strerror(-rc));
		unlink(tmp);
	}
out:
	free(tmp);
	return rc;
}

static int rp_kind(const char *path)
{
	size_t n = strlen(path);

	if (n > 4 && !strcasecmp(path + n - 4, ".svg"))
		return 0;
	if (n > 4 && !strcasecmp(path + n - 4, ".png"))
		return 1;
	return -1;
}

int ckpt_cmd_report(int argc, char **argv)
{
	struct rp_data d = {0};
	struct rp_pic pic = {0};
	struct ck_store *s = NULL;
	struct ckpt_opts o;
	uint64_t *seqs = NULL;
	size_t n = 0, nbad_rst = 0, nbad = 0;
	char job[CK_JOB_NAME_MAX + 1], name[CK_JOB_NAME_MAX + 1], first_err[1024] = "";
	int a, rc, png;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_OUTPUT, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("report: expected one JOB");
	if (!o.output || !*o.output)
		return ckpt_usage_error("report: -o FILE.svg or -o FILE.png is needed (the picture to write)");
	if ((png = rp_kind(o.output)) < 0)
		return ckpt_usage_error("report: %s: the picture's name must end in .svg or .png", o.output);
	if (ck_job_name_encode(argv[a], job, sizeof(job)) < 0)
		return ckpt_usage_error("report: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ck_manifest_list(s, job, &seqs, &n);
	if (rc == 0 && n == 0) {
		ck_err_set("job %s has no checkpoint in store %s", argv[a], s->uri);
		rc = -ENOENT;
	}
	if (rc < 0)
		goto fail;
	if (!(d.c = calloc(n, sizeof(*d.c)))) {
		rc = -ENOMEM;
		ck_err_set("out of memory");
		goto fail;
	}
	d.nc = n;
	for (size_t i = 0; i < n; i++) {
		struct ck_manifest *m = NULL;

		d.c[i].seq = seqs[i];
		rc = ck_manifest_load(s, job, seqs[i], &m);
		if (rc == -EBADMSG || rc == -ENOENT) {
			/* drawn as damaged; said once, after the picture */
			if (!nbad++)
				snprintf(first_err, sizeof(first_err), "%s", ck_err_msg());
			continue;
		}
		if (rc == 0)
			rc = rp_figures(m, &d.c[i]);
		ck_manifest_free(m);
		if (rc < 0)
			goto fail;
	}
	rc = ck_restore_log_list(s, job, &d.r, &d.nr, &nbad_rst);
	if (rc < 0)
		goto fail;
	/* The name as the user gives it, printable. */
	if (ck_job_name_decode(job, name, sizeof(name)) < 0)
		snprintf(name, sizeof(name), "%s", job);
	for (char *p = name; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	d.job = name;
	d.store = s->uri;
	if ((rc = rp_layout(&d, &pic)) < 0)
		goto fail;
	rc = rp_output(&pic, o.output, png);
	if (rc < 0) {
		fprintf(stderr, "ckpt: %s\n", ck_err_msg());
		rc = rc == -ENOMEM ? CK_EXIT_INTERNAL : CK_EXIT_CANTCREAT;
		goto out;
	}
	printf("%s: %zu checkpoint%s and %zu restore%s of %s\n", o.output, n, n == 1 ? "" : "s", d.nr,
	       d.nr == 1 ? "" : "s", argv[a]);
	if (nbad_rst)
		fprintf(stderr, "ckpt: warning: %zu restore record%s of %s in %s could not be read and %s left out\n",
			nbad_rst, nbad_rst == 1 ? "" : "s", argv[a], s->uri, nbad_rst == 1 ? "is" : "are");
	if (nbad) {
		fprintf(stderr, "ckpt: %zu checkpoint%s drawn as damaged: %s\n", nbad, nbad == 1 ? "" : "s",
			first_err);
		rc = CK_EXIT_CORRUPT;
	} else {
		rc = 0;
	}
	goto out;
fail:
	rc = ckpt_fail(rc);
out:
	rp_pic_free(&pic);
	free(d.c);
	free(d.r);
	free(seqs);
	ck_store_close(s);
	return rc;
}
