/* --env NAME=VALUE: the job's environment, where it reads it again.
 *
 * A fresh start (a --resume with nothing stored) execs the job with it.
 * A restore sends it over each process's control channel once every
 * process has run its restart code and before any resumes (CK_MSG_ENV);
 * libckpt sets it there without malloc (libckpt/env.c). It never enters
 * the image from here: what the job's memory holds after the restore is
 * the job's own environment, saved by later checkpoints like the rest of
 * its memory. An empty VALUE removes NAME. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/ckrun/ckrun.h"
#include "ckrun/proto.h"

int ck_jobenv_send(const struct ck_jobenv *je, int fd)
{
	struct ck_msg m;
	size_t i = 0;

	while (i < je->n) {
		memset(&m, 0, offsetof(struct ck_msg, text));
		m.type = CK_MSG_ENV;
		/* as many whole entries as fit (each fits: ck_jobenv_add) */
		for (; i < je->n && m.len + strlen(je->v[i]) + 1 <= CK_MSG_TEXT; i++) {
			memcpy(m.text + m.len, je->v[i], strlen(je->v[i]) + 1);
			m.len += (uint32_t)strlen(je->v[i]) + 1;
		}
		int r = ck_chan_send(fd, &m, NULL, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

int ck_jobenv_exec_env(const struct ck_jobenv *je)
{
	for (size_t i = 0; i < je->n; i++) {
		char *eq = strchr(je->v[i], '='), name[CK_MSG_TEXT];
		size_t n = (size_t)(eq - je->v[i]);

		memcpy(name, je->v[i], n);
		name[n] = 0;
		if (eq[1] ? setenv(name, eq + 1, 1) : unsetenv(name))
			return -errno;
	}
	return 0;
}
