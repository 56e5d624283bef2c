/* A restore tells each parent what its restored children had used before
 * it (CPU time and the other counters of struct rusage), so that its wait
 * of each gives what a bare run gives (libckpt/cputime.c): each process
 * says what it had used in its RESTARTED, and before any process goes
 * on, its parent gets the list of its children's (CK_MSG_KIDS_CPU). */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "ckrun/proto.h"

void ck_rst_cpu_note(struct ck_jproc *p, const struct ck_msg *m)
{
	p->has_cpu = m->len >= sizeof(p->cpu); /* 0 from a libckpt before cputime.c */
	if (p->has_cpu)
		memcpy(&p->cpu, m->text, sizeof(p->cpu));
}

/* the parent of the job's process jpid, as the image says; 0 if none */
static int32_t ck__ppid_of(const struct ck_manifest *m, int32_t jpid)
{
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == jpid)
			return m->procs[i].ppid;
	return 0;
}

int ck_rst_cpu_send(struct ckrun *c, const struct ck_manifest *m)
{
	const size_t per = CK_MSG_TEXT / sizeof(struct ck_kid_cpu);

	for (size_t i = 0; i < c->nprocs; i++) {
		struct ck_jproc *parent = &c->procs[i];
		struct ck_msg msg;
		size_t n = 0;

		memset(&msg, 0, offsetof(struct ck_msg, text));
		msg.type = CK_MSG_KIDS_CPU;
		for (size_t k = 0; k <= c->nprocs; k++) {
			const struct ck_jproc *kid = k < c->nprocs ? &c->procs[k] : NULL;
			int r;
			if (kid && kid->has_cpu && ck__ppid_of(m, kid->jpid) == parent->jpid) {
				struct ck_kid_cpu e = {kid->jpid, 0, kid->cpu};
				memcpy(msg.text + n * sizeof(e), &e, sizeof(e));
				n++;
			}
			if (n && (n == per || !kid)) {
				msg.len = (uint32_t)(n * sizeof(struct ck_kid_cpu));
				if ((r = ck_chan_send(parent->fd, &msg, NULL, 0)) < 0)
					return r;
				n = 0;
			}
		}
	}
	return 0;
}
