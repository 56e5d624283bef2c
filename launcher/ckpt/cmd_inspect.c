/* ckpt inspect JOB[@SEQ]: what a checkpoint holds, for people. */
#include "launcher/ckpt/cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckpt/procdesc_print.h"

static void region_flags(uint32_t f, char *buf, size_t len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
		{CK_REG_SHARED, "shared"}, {CK_REG_FILE, "file"},       {CK_REG_STACK, "stack"},
		{CK_REG_HEAP, "heap"},     {CK_REG_VDSO, "vdso"},       {CK_REG_VVAR, "vvar"},
		{CK_REG_VSYSCALL, "vsyscall"}, {CK_REG_NODATA, "nodata"}, {CK_REG_DELETED, "deleted"},
		{CK_REG_GROWSDOWN, "growsdown"}, {CK_REG_DENSE, "dense"},
		{CK_REG_ADV_HUGE, "hugepage"}, {CK_REG_ADV_NOHUGE, "nohugepage"}, {CK_REG_ADV_WIPEONFORK, "wipeonfork"},
		{CK_REG_ADV_DONTDUMP, "dontdump"}, {CK_REG_ADV_DONTFORK, "dontfork"}, {CK_REG_ADV_RANDOM, "random"},
		{CK_REG_ADV_SEQUENTIAL, "sequential"}, {CK_REG_FILEPAGES, "filepages"},
	};
	size_t i, n = 0;

	buf[0] = 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f & names[i].bit)
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? "," : "", names[i].name);
	if (!n)
		snprintf(buf, len, "-");
}

static void print_proc(const struct ck_manifest *m, const struct ck_proc *p)
{
	uint64_t total = 0, saved = 0;
	char b1[32], b2[32];
	size_t j;

	for (j = 0; j < p->nregions; j++) {
		const struct ck_region *g = &p->regions[j];
		uint32_t k;

		total += g->end - g->start;
		for (k = 0; k < g->nchunks; k++)
			saved += m->chunks[g->first_chunk + k].len;
	}
	printf("\nprocess %d (parent %d) %s\n", p->pid, p->ppid, p->exe ? p->exe : "?");
	printf("  restart    entry 0x%llx, argument 0x%llx, stack 0x%llx\n", (unsigned long long)p->restart_entry,
	       (unsigned long long)p->restart_arg, (unsigned long long)p->restart_stack);
	ck_fmt_bytes(total, b1, sizeof(b1));
	ck_fmt_bytes(saved, b2, sizeof(b2));
	printf("  regions    %zu, %s mapped, %s saved\n", p->nregions, b1, b2);
	printf("    %-33s %-4s %10s %7s  %-16s %s\n", "ADDRESS", "PROT", "SIZE", "CHUNKS", "FLAGS", "PATH");
	for (j = 0; j < p->nregions; j++) {
		const struct ck_region *g = &p->regions[j];
		char flags[128], size[32], off[48] = "";

		region_flags(g->flags, flags, sizeof(flags));
		ck_fmt_bytes(g->end - g->start, size, sizeof(size));
		if (g->flags & CK_REG_FILE)
			snprintf(off, sizeof(off), " @0x%llx", (unsigned long long)g->file_off);
		printf("    %016llx-%016llx %c%c%c%c %10s %7u  %-16s %s%s\n", (unsigned long long)g->start,
		       (unsigned long long)g->end, g->prot & PROT_READ ? 'r' : '-', g->prot & PROT_WRITE ? 'w' : '-',
		       g->prot & PROT_EXEC ? 'x' : '-', g->flags & CK_REG_SHARED ? 's' : 'p', size, g->nchunks,
		       flags, g->path ? g->path : "", off);
	}
	if (ck_procdesc_print)
		ck_procdesc_print(stdout, p->desc, p->desc_len);
	else
		printf("  process state: %zu bytes\n", p->desc_len);
}
/* One argument of a command line as a shell would read it back: quoted
 * unless every character is one a shell leaves alone (an MPI job's
 * PROFILE holds blanks). */
static void ckpt__print_word(const char *w)
{
	static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+@%-";

	if (!*w || w[strspn(w, plain)]) {
		printf(" '");
		for (; *w; w++) {
			if (*w == '\'')
				fputs("'\\''", stdout);
			else
				putchar(*w);
		}
		printf("'");
		return;
	}
	printf(" %s", w);
}


int ckpt_cmd_inspect(int argc, char **argv)
{
	struct ck_manifest *m = NULL;
	struct ck_store *s = NULL;
	struct ckpt_opts o;
	char job[256], when[64], dur[32], frozen[32], lb[32], sb[32];
	size_t i, zero = 0, raw = 0, comp = 0, delta = 0, this_round = 0;
	uint64_t seq;
	int a, rc;

	a = ckpt_getopts(argc, argv, CKPT_O_STORE | CKPT_O_BACKTRACE, &o);
	if (a < 0)
		return CK_EXIT_USAGE;
	if (argc - a != 1)
		return ckpt_usage_error("inspect: expected one JOB[@SEQ]");
	if (ckpt_parse_ref(argv[a], job, sizeof(job), &seq) < 0)
		return ckpt_usage_error("inspect: %s", ck_err_msg());
	rc = ckpt_open_store(o.store, &o.sopts, 1, &s);
	if (rc < 0)
		return ckpt_fail(rc);
	rc = ckpt_load(s, job, seq, &m);
	if (rc < 0) {
		rc = ckpt_fail(rc);
		goto out;
	}
	if (o.backtrace) {
		rc = ckpt_backtrace(s, m);
		if (rc < 0)
			rc = ckpt_fail(rc);
		goto out;
	}
	for (i = 0; i < m->nchunks; i++) {
		uint32_t f = m->chunks[i].flags;

		zero += !!(f & CK_CHUNK_ZERO);
		raw += !!(f & CK_CHUNK_RAW);
		delta += !!(f & CK_CHUNK_DELTA);
		comp += !f;
	}
	for (i = 0; i < m->npacks; i++)
		this_round += ck_pack_seq(m->packs[i]) == m->seq;
	ckpt_fmt_time(m->time_ns, when, sizeof(when));
	ckpt_fmt_duration(m->duration_ns, dur, sizeof(dur));
	ckpt_fmt_duration(m->frozen_ns, frozen, sizeof(frozen));
	ck_fmt_bytes(m->logical_bytes, lb, sizeof(lb));
	ck_fmt_bytes(m->stored_bytes, sb, sizeof(sb));
	printf("checkpoint %s@%llu (store %s, format version %u)\n", m->job, (unsigned long long)m->seq, s->uri,
	       m->version);
	printf("  time       %s UTC (took %s, job stopped %s)\n", when, dur, frozen);
	printf("  command   ");
	for (i = 0; i < m->argc; i++)
		ckpt__print_word(m->argv[i]);
	printf("\n  cwd        %s\n", m->cwd ? m->cwd : "?");
	printf("  data       %s of region data, %s newly stored by this round\n", lb, sb);
	printf("  chunks     %zu: %zu zero, %zu compressed, %zu stored raw, %zu as pages differing from a "
	       "parent's\n", m->nchunks, zero, comp, raw, delta);
	printf("  packs      %zu (%zu written by this round, %zu shared with earlier ones)\n", m->npacks, this_round,
	       m->npacks - this_round);
	printf("  processes  %zu\n", m->nprocs);
	for (i = 0; i < m->nprocs; i++)
		print_proc(m, &m->procs[i]);
	if (m->has_last_pid)
		printf("  last pid   %d (the job's pid namespace gave no higher number before the cut)\n", m->last_pid);
	if (m->ntasks) {
		printf("\ntree         %zu processes\n", m->ntasks);
		for (i = 0; i < m->ntasks; i++) {
			const struct ck_task *t = &m->tasks[i];
			printf("  pid %d parent %d group %d session %d", t->pid, t->ppid, t->pgid, t->sid);
			if (t->flags & CK_TASK_ZOMBIE)
				printf("  zombie, wait status %#x", t->status);
			if ((t->flags & CK_TASK_MAKER) && !(t->flags & CK_TASK_ZOMBIE))
				printf("  exited; made again for a connection's SO_PEERCRED, then ended");
			else if (t->flags & CK_TASK_MAKER)
				printf("; lives on for a connection's SO_PEERCRED");
			printf("\n");
		}
	}
	if (m->nshms) {
		printf("\nIPC        %zu System V shared memory segments, message queues and semaphore sets, POSIX message queues\n",
		       m->nshms);
		for (i = 0; i < m->nshms; i++) {
			const struct ck_sysv_shm *x = &m->shms[i];

			if (x->flags & CK_SYSV_PMQ) {
				printf("  POSIX queue mode %03o owner %u:%u, %llu bytes of attributes, name and messages\n",
				       x->mode, x->uid, x->gid, (unsigned long long)x->size);
				continue;
			}
			if (x->flags & CK_SYSV_SEM) {
				printf("  semaphore set id %d key %#x mode %03o owner %u:%u, %u semaphores\n", x->id,
				       (unsigned)x->key, x->mode, x->uid, x->gid, x->pad);
				continue;
			}
			printf("  %s id %d key %#x mode %03o %s %llu%s\n", (x->flags & CK_SYSV_MSG) ? "queue" : "segment",
			       x->id, (unsigned)x->key, x->mode, (x->flags & CK_SYSV_MSG) ? "message bytes" : "size",
			       (unsigned long long)x->size, (x->flags & CK_SYSV_DEST) ? " (marked for removal)" : "");
		}
	}
	printf("\nskipped      %zu\n", m->nskips);
	for (i = 0; i < m->nskips; i++)
		printf("  pid %d: %s: %s\n", m->skips[i].pid, m->skips[i].what ? m->skips[i].what : "?",
		       m->skips[i].why ? m->skips[i].why : "no reason recorded");
	rc = 0;
out:
	ck_manifest_free(m);
	ck_store_close(s);
	return rc;
}
