/* `ckpt inspect`: the threads, descriptors, timers and signals libckpt
 * recorded for a process. */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/procdesc_pack.h"
#include "launcher/ckpt/procdesc_print.h"

static const char *ck__kind_name(uint32_t k)
{
	static const char *names[] = {"none",    "stdio",   "file",     "deleted", "memfd",  "device", "pipe",
				      "fifo",    "eventfd", "timerfd",  "signalfd", "epoll", "plugin", "dup",
				      "socket",  "ptmx",    "pts",      "pidfd",    "inotify", "mqueue"};
	return k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

static void ck__print_fd(FILE *f, const struct ck_pd_fd *d)
{
	const char *acc = (d->flags & O_ACCMODE) == O_RDONLY ? "r" : (d->flags & O_ACCMODE) == O_WRONLY ? "w" : "rw";

	fprintf(f, "    %4d  %-8s %-2s%s%s", d->fd, ck__kind_name(d->kind), acc, (d->flags & O_APPEND) ? " append" : "",
		(d->fdflags & FD_CLOEXEC) ? " cloexec" : "");
	switch (d->kind) {
	case CK_FD_FILE:
	case CK_FD_DEV:
	case CK_FD_FIFO:
	case CK_FD_MQUEUE:
	case CK_FD_DELETED:
	case CK_FD_MEMFD:
		fprintf(f, "  %s @%" PRIu64, d->path, d->offset);
		if (d->xflags & CK_PD_FD_STDIO_FILE)
			fprintf(f, " (ckrun's stdio: the restoring ckrun's unless it is this file)");
		if (d->kind == CK_FD_DELETED || d->kind == CK_FD_MEMFD)
			fprintf(f, " (%" PRIu64 " bytes saved)", d->size);
		if (d->kind == CK_FD_MQUEUE && (d->xflags & CK_PD_FD_MQ_NOTIFY)) {
			if ((uint32_t)d->u64[1] == SIGEV_SIGNAL)
				fprintf(f, " (notification registered: signal %u, value 0x%" PRIx64 ")",
					(unsigned)(d->u64[1] >> 32), d->u64[0]);
			else
				fprintf(f, " (notification registered: none sent)");
		}
		break;
	case CK_FD_PIPE:
	case CK_FD_SOCKET:
		/* a socket's path holds its description first (see plugins/socket) */
		fprintf(f, "  %.256s", d->path);
		if (d->data_nchunks)
			fprintf(f, " (bytes in flight saved)");
		/* CK_SOCKOPT_RIGHTS of plugins/socket/agent/sock.h: the queue
		 * saved carries descriptors (SCM_RIGHTS) */
		if (d->kind == CK_FD_SOCKET && (d->u64[2] & 0x80))
			fprintf(f, " (with descriptors in flight)");
		/* CK_SOCKOPT_PEERPID: the process its SO_PEERCRED names */
		if (d->u64[2] & 0x4000)
			fprintf(f, " (peer credentials of process %d)", d->peer);
		break;
	case CK_FD_EVENTFD:
		fprintf(f, "  count %" PRIu64 "%s", d->u64[0], d->u64[1] ? " semaphore" : "");
		break;
	case CK_FD_TIMERFD:
		fprintf(f, "  clock %" PRIu64 ", %.3f s left, every %.3f s", d->u64[0], (double)d->u64[2] / 1e9,
			(double)d->u64[3] / 1e9);
		break;
	case CK_FD_SIGNALFD:
		fprintf(f, "  mask %016" PRIx64, d->u64[0]);
		break;
	case CK_FD_INOTIFY:
		fprintf(f, "  %" PRIu64 " watch(es), last number given %" PRIu64, d->u64[0], d->u64[1]);
		break;
	case CK_FD_PIDFD:
		if (d->u64[0])
			fprintf(f, "  pidfd of process %" PRIu64, d->u64[0]);
		else
			fprintf(f, "  pidfd of a process that had ended");
		break;
	case CK_FD_DUP:
		fprintf(f, "  duplicate of %d", d->peer);
		break;
	case CK_FD_STDIO:
		fprintf(f, "  %s (taken from the restoring ckrun)", d->path);
		break;
	case CK_FD_PLUGIN:
		fprintf(f, "  %s (rebuilt by a plugin)", d->path);
		break;
	case CK_FD_PTMX:
	case CK_FD_PTS:
		fprintf(f, "  %s, pts %" PRIu64 "%s", d->path, d->u64[0],
			d->data_nchunks ? " (the pair's state saved)" : "");
		if (d->kind == CK_FD_PTS && (d->u64[1] & 1))
			fprintf(f, " (its session's controlling terminal, foreground group %" PRIu64 ")", d->u64[2]);
		break;
	default:
		break;
	}
	fputc('\n', f);
}

void ck_procdesc_print(FILE *f, const uint8_t *desc, size_t len)
{
	struct ck_procdesc *pd = NULL;
	uint32_t handled = 0;

	if (ck_desc_unpack(desc, len, &pd) < 0) {
		fprintf(f, "  process state: unreadable (%s)\n", ck_err_msg());
		return;
	}
	fprintf(f, "  threads    %u\n", pd->nthreads);
	for (uint32_t i = 0; i < pd->nthreads; i++) {
		const struct ck_pd_thread *t = &pd->threads[i];
		char comm[17];
		snprintf(comm, sizeof(comm), "%.16s", t->comm);
		fprintf(f, "    tid %-7d %-16s%s%s fs 0x%" PRIx64 " rip 0x%" PRIx64 "%s\n", t->tid, comm,
			(t->flags & CK_PDT_MAIN) ? " main" : "", (t->flags & CK_PDT_MANAGER) ? " (ckrun's manager)" : "",
			t->fs_base, t->ctx.rip, t->rseq_addr ? " rseq" : "");
	}
	for (uint32_t i = 0; i < pd->nthreads; i++) {
		const struct ck_pd_thread *t = &pd->threads[i];
		if (!(t->flags & CK_PDT_MAIN))
			continue;
		/* the main thread's; each thread's own are saved and restored */
		fprintf(f, "  credentials uid %u/%u/%u/%u gid %u/%u/%u/%u groups", t->uid[0], t->uid[1], t->uid[2],
			t->uid[3], t->gid[0], t->gid[1], t->gid[2], t->gid[3]);
		for (uint32_t g = 0; g < pd->ngroups && g < 16; g++)
			fprintf(f, "%s%u", g ? "," : " ", pd->groups[g]);
		fprintf(f, "%s%s; capabilities eff %" PRIx64 " prm %" PRIx64 " inh %" PRIx64 " amb %" PRIx64
			   " bnd %" PRIx64 "\n",
			pd->ngroups > 16 ? ",..." : "", pd->ngroups ? "" : " none", t->cap_eff, t->cap_prm, t->cap_inh,
			pd->cap_amb, pd->cap_bnd);
	}
	fprintf(f, "  descriptors %u\n", pd->nfds);
	for (uint32_t i = 0; i < pd->nfds; i++)
		ck__print_fd(f, &pd->fds[i]);
	if (pd->nepitems)
		fprintf(f, "  epoll registrations %u\n", pd->nepitems);
	if (pd->ntimers) {
		fprintf(f, "  POSIX timers %u\n", pd->ntimers);
		for (uint32_t i = 0; i < pd->ntimers && i < CK_PD_MAX_TIMERS; i++)
			fprintf(f, "    id %d clock %d signal %d, %.3f s left, every %.3f s\n", pd->timers[i].id,
				pd->timers[i].clock, pd->timers[i].signo, (double)pd->timers[i].value_ns / 1e9,
				(double)pd->timers[i].interval_ns / 1e9);
	}
	if (pd->nsiginfo)
		fprintf(f, "  pending signals %u (re-queued at restart)\n", pd->nsiginfo);
	for (int s = 1; s < CK_PD_NSIG; s++)
		if (pd->sigact[s].handler > 1)
			handled++;
	fprintf(f, "  signals    %u with handlers\n", handled);
	fprintf(f, "  cwd        %s\n  umask      %03o\n", pd->cwd, pd->umask);
	free(pd);
}
