/* epoll instances: their registrations (fdinfo: "tfd: events: data:"),
 * added again by the restored process before its threads run.
 *
 * A registration names a file and the number it had when it was added, and
 * is added again by number: libckpt asks kcmp (KCMP_EPOLL_TFD) whether its
 * own descriptor of that number is still that file, and marks the ones
 * that are not (CK_PD_EPI_ELSEWHERE: another holder of an instance shared
 * by fork may hold it; ckrun refuses the round when none does).
 *
 * What fdinfo does not show is the ready list: an edge-triggered
 * registration whose edge the job already took is, added again, reported
 * again while its file is ready. The round asks the instance itself, from
 * a probe instance of ours watching it (the job's instance reports ready
 * when a registration on its ready list is ready now): nothing ready there
 * means the edge of every ready edge-triggered registration was taken
 * (CK_PD_EPI_TAKEN); at a restore those are added alone first and their
 * edges taken, then the others (whose events stay the job's). A ready
 * edge-triggered registration in an instance that also has a ready list
 * cannot be told apart: the round is refused naming it. The round's half
 * uses system calls and string functions, the restart's system calls. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

/* Whether the job's instance epfd has a ready registration on its ready
 * list (1), none (0), or the probe failed (-errno). */
static int ck__ready_listed(int epfd)
{
	struct epoll_event ev = {EPOLLIN, {0}};
	long probe, r;

	/* (calls the job's own seccomp filters may forbid: then unknown) */
	if (!ck__seccomp_allows(SYS_epoll_create1) || !ck__seccomp_allows(SYS_epoll_ctl) ||
	    !ck__seccomp_allows(SYS_epoll_pwait))
		return -EPERM;
	probe = ck_sys1(SYS_epoll_create1, EPOLL_CLOEXEC);
	if (probe < 0)
		return (int)probe;
	r = ck_sys4(SYS_epoll_ctl, probe, EPOLL_CTL_ADD, epfd, &ev);
	if (r == 0)
		r = ck_sys6(SYS_epoll_pwait, probe, (long)&ev, 1, 0, 0, 8);
	ck_close((int)probe);
	return (int)(r < 0 ? r : r > 0);
}

/* Whether our descriptor tfd is ready for what the registration asks. */
static int ck__target_ready(const struct ck_pd_epitem *e)
{
	struct pollfd p = {e->tfd, (short)(e->events & (POLLIN | POLLOUT | POLLPRI | POLLRDHUP)), 0};

	if (!ck__seccomp_allows(SYS_poll))
		return 1; /* unknown: as if ready */

	/* (hang-up and error: epoll reports them whatever was asked) */
	return ck_sys3(SYS_poll, &p, 1, 0) > 0 && (p.revents & (p.events | POLLHUP | POLLERR));
}

int ck__epoll_collect(int epfd, const char *info)
{
	struct kcmp_epoll_slot slot;
	const char *p = info;
	uint32_t first = ck__pd.nepitems;
	int edge = 0, listed;

	while ((p = strstr(p, "tfd:")) != NULL) {
		struct ck_pd_epitem *e;
		if (ck__pd.nepitems >= CK_PD_MAX_EPITEMS) {
			ck__failf("more than %d epoll registrations: a checkpoint holds at most %d per process",
				  CK_PD_MAX_EPITEMS, CK_PD_MAX_EPITEMS);
			return -E2BIG;
		}
		e = &ck__pd.epitems[ck__pd.nepitems++];
		e->epfd = epfd;
		e->tfd = (int32_t)ck__field(p, "tfd:", 10);
		e->events = (uint32_t)ck__field(p, "events:", 16);
		e->data = ck__field(p, "data:", 16);
		slot.efd = (uint32_t)epfd;
		slot.tfd = (uint32_t)e->tfd;
		slot.toff = 0;
		e->flags = ck_sys5(SYS_kcmp, ck__core.pid, ck__core.pid, KCMP_EPOLL_TFD, e->tfd, &slot) == 0
				   ? 0
				   : CK_PD_EPI_ELSEWHERE;
		edge |= !!(e->events & EPOLLET);
		p += 4;
	}
	if (!edge)
		return 0;
	listed = ck__ready_listed(epfd);
	for (uint32_t i = first; i < ck__pd.nepitems; i++) {
		struct ck_pd_epitem *e = &ck__pd.epitems[i];

		if (listed == 0) {
			/* ready now, not on the ready list: its edge was taken */
			if ((e->events & EPOLLET) && !(e->flags & CK_PD_EPI_ELSEWHERE) && ck__target_ready(e))
				e->flags |= CK_PD_EPI_TAKEN;
			continue;
		}
		if ((e->events & EPOLLET) && ((e->flags & CK_PD_EPI_ELSEWHERE) || ck__target_ready(e))) {
			ck__failf("descriptor %d (epoll): its edge-triggered registration of descriptor %d is ready, "
				  "and whether the job took its edge cannot be told while the instance has other "
				  "events ready: not restored this time",
				  epfd, e->tfd);
			return -EAGAIN;
		}
	}
	return 0;
}

/* The registrations with CK_PD_EPI_TAKEN `taken`, but not those another
 * holder adds. */
static long ck__add(const struct ck_procdesc *pd, uint32_t taken, const char **why)
{
	struct epoll_event ev;

	for (uint32_t i = 0; i < pd->nepitems; i++) {
		const struct ck_pd_epitem *e = &pd->epitems[i];
		long r;

		if ((e->flags & CK_PD_EPI_ELSEWHERE) || (e->flags & CK_PD_EPI_TAKEN) != taken)
			continue;
		ev.events = e->events;
		ev.data.u64 = e->data;
		r = ck_sys4(SYS_epoll_ctl, e->epfd, EPOLL_CTL_ADD, e->tfd, &ev);
		/* EEXIST: an instance shared by fork, the other holder added it */
		if (r < 0 && r != -EEXIST) {
			*why = "cannot re-register an epoll item";
			return r;
		}
	}
	return 0;
}

long ck__epoll_restore(const struct ck_procdesc *pd, const char **why)
{
	struct epoll_event ev[64];
	long r;

	/* First the edge-triggered registrations whose edge the job had taken,
	 * alone in their instances: the edge each reports is taken here; then
	 * every other one, whose events are the job's. */
	if ((r = ck__add(pd, CK_PD_EPI_TAKEN, why)) < 0)
		return r;
	for (uint32_t i = 0; i < pd->nepitems; i++) {
		int epfd = pd->epitems[i].epfd, seen = 0;

		if (!(pd->epitems[i].flags & CK_PD_EPI_TAKEN) || (pd->epitems[i].flags & CK_PD_EPI_ELSEWHERE))
			continue;
		for (uint32_t k = 0; k < i && !seen; k++)
			seen = pd->epitems[k].epfd == epfd && (pd->epitems[k].flags & CK_PD_EPI_TAKEN);
		for (int n = 0; !seen && n < 64 && ck_sys6(SYS_epoll_pwait, epfd, (long)ev, 64, 0, 0, 8) == 64; n++)
			;
	}
	return ck__add(pd, 0, why);
}
