/* What a round tells with -v (one line per commit: sizes, times, which
 * snapshot) and -v -v (how the frozen time was spent). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/round.h"

void ck_round_phase(struct ck_phases *ph, const char *name)
{
	uint64_t now = ck_now_ns();

	if (ph->n < sizeof(ph->v) / sizeof(ph->v[0]))
		ph->v[ph->n++] = (typeof(ph->v[0])){name, now - ph->last};
	ph->last = now;
}

static int ck__cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* -v -v: how the frozen time was spent. Per process (the slowest to
 * announce its snapshot): waiting for its manager to run, parking its
 * threads, recording its state, forking; then ckrun's own phases. */
static void ck__print_phases(const struct ckrun *c, uint64_t seq, uint64_t t_ask, const struct ck_phases *ph)
{
	uint64_t *at = calloc(c->nprocs ? c->nprocs : 1, sizeof(*at));
	const struct ck_jproc *slow = NULL;
	char line[1024];
	int o;

	if (!at)
		return;
	for (size_t i = 0; i < c->nprocs; i++) {
		at[i] = c->procs[i].round.t_snap - t_ask;
		if (!slow || c->procs[i].round.t_snap > slow->round.t_snap)
			slow = &c->procs[i];
	}
	qsort(at, c->nprocs, sizeof(*at), ck__cmp_u64);
	if (slow) {
		uint64_t own = (uint64_t)slow->round.us_park + slow->round.us_record + slow->round.us_fork;
		uint64_t total = (slow->round.t_snap - t_ask) / 1000;
		fprintf(stderr,
			"ckrun: checkpoint %" PRIu64 " phases: snapshots announced after %.1f (first), %.1f (median), "
			"%.1f ms (last: process %d: %.1f ms to be scheduled and told, %.1f to park, %.1f to record, "
			"%.1f to fork or write-protect)\n",
			seq, (double)at[0] / 1e6, (double)at[c->nprocs / 2] / 1e6, (double)at[c->nprocs - 1] / 1e6,
			slow->jpid, total > own ? (double)(total - own) / 1e3 : 0.0, slow->round.us_park / 1e3,
			slow->round.us_record / 1e3, slow->round.us_fork / 1e3);
	}
	o = snprintf(line, sizeof(line), "ckrun: checkpoint %" PRIu64 " phases after all parked:", seq);
	for (size_t i = 0; i < ph->n && o > 0 && (size_t)o < sizeof(line); i++)
		o += snprintf(line + o, sizeof(line) - (size_t)o, "%s %s %.1f ms", i ? "," : "", ph->v[i].name,
			      (double)ph->v[i].ns / 1e6);
	fprintf(stderr, "%s\n", line);
	free(at);
}

void ck_round_print_commit(const struct ckrun *c, const struct ck_round *rd, size_t npre)
{
	const struct ck_manifest *m = rd->m;
	char req[64] = "";
	char snap[320] = "";

	if (rd->any_wp) {
		int o = snprintf(snap, sizeof(snap),
			     ", write-protect snapshot: %" PRIu64 " faults, %" PRIu64 " blocks copied aside (%" PRIu64
			     " through the spill file)",
			     rd->wpn.faults, rd->wpn.blocks_aside, rd->wpn.blocks_spilled);
		if (npre && o > 0 && (size_t)o < sizeof(snap))
			snprintf(snap + o, sizeof(snap) - (size_t)o,
				 "; pre-armed: %zu of %zu process(es) in %.3f s (parked %.1f ms at most), %" PRIu64
				 " faults before the cut",
				 npre, c->nprocs, (double)rd->t_pre / 1e9, (double)rd->pre_park_us / 1e3, rd->wpn.pre_faults);
	} else if (!c->nofork && rd->wp_none) {
		snprintf(snap, sizeof(snap),
			 ", forked snapshot (write protection: no userfaultfd for this user: /dev/userfaultfd: %s, "
			 "and vm.unprivileged_userfaultfd is 0)",
			 strerror(rd->wp_none));
	} else if (!c->nofork) {
		int e = 0;
		for (size_t i = 0; i < c->nprocs && !e; i++)
			e = c->procs[i].round.wp_errno;
		snprintf(snap, sizeof(snap), ", forked snapshot%s%s%s", e ? " (write protection: " : "",
			 e ? strerror(e) : "", e ? ")" : "");
	}
	if (ck_s3_request_count && ck_s3_request_count() > rd->req0)
		snprintf(req, sizeof(req), ", %" PRIu64 " S3 requests", ck_s3_request_count() - rd->req0);
	fprintf(stderr, "ckrun: checkpoint %" PRIu64 " committed: %zu process(es), %" PRIu64
			" bytes of memory, %" PRIu64 " stored, %.3f s (frozen %.3f s, all parked after %.3f s), CPU %.3f s%s%s\n",
		m->seq, m->nprocs, m->logical_bytes, m->stored_bytes, (double)(ck_now_ns() - rd->t0) / 1e9,
		(double)m->frozen_ns / 1e9, (double)(rd->t_parked - rd->t_ask) / 1e9,
		(double)(ck_cpu_ns() - rd->cpu0) / 1e9, snap, req);
	if (c->verbose > 1)
		ck__print_phases(c, m->seq, rd->t_ask, &rd->ph);
}
