/* eventfd, timerfd, signalfd, epoll and inotify. libckpt records them in
 * the process descriptor (count and mode; clock, flags, remaining time and
 * unread expirations; mask; nothing: the epoll items and inotify watches
 * are added again by libckpt at restart); ckrun makes them again with the
 * same flags. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"

#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

int ck_eventfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	int nb = (f->flags & O_NONBLOCK) ? 1 : 0;

	(void)rd;
	(void)o;
	/* (eventfd() takes 32 bits; the count is 64: written after) */
	*fd = eventfd(0, EFD_CLOEXEC | (nb ? EFD_NONBLOCK : 0) | (f->u64[1] ? EFD_SEMAPHORE : 0));
	if (*fd >= 0 && f->u64[0] && write(*fd, &f->u64[0], sizeof(f->u64[0])) != (ssize_t)sizeof(f->u64[0])) {
		int e = errno;

		ck_err_set("eventfd (descriptor %d): cannot set its count %llu again: %s", f->fd,
			   (unsigned long long)f->u64[0], strerror(e));
		close(*fd);
		*fd = -1;
		return -e;
	}
	return 0;
}

int ck_timerfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	int nb = (f->flags & O_NONBLOCK) ? 1 : 0;
	uint64_t left = f->u64[2], every = f->u64[3], ticks = f->size, since = ck_timens_since_mark();
	uint64_t cut = ck_timens_cut_mono(), at = (uint64_t)f->mtime_ns;
	struct itimerspec its;

	(void)rd;
	(void)o;
	/* Read after the cut (in flight, by the socket plugin): as it was at
	 * the cut, the expirations since taken back. (An older image holds the
	 * inode's mtime there: far from the cut, not a reading time.) */
	if (since && cut && at > cut && at - cut < (1ull << 40)) {
		uint64_t back = at - cut, k = 0;
		/* it fired since only if its next expiry is within a period and
		 * an expiration is unread (the job was parked) */
		if (left && every && left <= every && left + back > every)
			k = (left + back - 1) / every;
		if (k > ticks)
			k = ticks;
		if (left)
			left += back - k * every;
		ticks = ticks > k ? ticks - k : 0;
	} else if (since && cut && at && cut - at < (1ull << 40)) {
		since += cut - at; /* read before the cut: that time passed too */
	}
	/* The time left counts from the restore's start, where the job's
	 * clocks go on from the cut (timens.c), however late in the restore
	 * this one is made: what came due since are expirations. */
	if (left && since) {
		if (left > since) {
			left -= since;
		} else if (every) {
			ticks += 1 + (since - left) / every;
			left = every - (since - left) % every;
		} else {
			ticks++;
			left = 0;
		}
	}
	/* due within a millisecond (1 ns: due as it was read, libckpt/fds.c):
	 * counted now, whole periods on, not armed to fire before
	 * TFD_IOC_SET_TICKS below overwrites the count */
	if (left && every && left < 1000000) {
		uint64_t k = (1000000 - left + every - 1) / every;
		ticks += k;
		left += k * every;
	}
	*fd = timerfd_create((int)f->u64[0], TFD_CLOEXEC | (nb ? TFD_NONBLOCK : 0));
	its.it_value.tv_sec = (time_t)(left / 1000000000ull);
	its.it_value.tv_nsec = (long)(left % 1000000000ull);
	its.it_interval.tv_sec = (time_t)(every / 1000000000ull);
	its.it_interval.tv_nsec = (long)(every % 1000000000ull);
	if (*fd >= 0 && !left && every) {
		/* disarmed, its interval kept (timerfd_gettime shows it) */
		timerfd_settime(*fd, 0, &its, NULL);
	} else if (*fd >= 0 && left) {
		int fl = 0;
		/* Set with an absolute time (TFD_TIMER_ABSTIME: a change of the
		 * clock moves its expiry; TFD_TIMER_CANCEL_ON_SET, which needs it:
		 * reads fail with ECANCELED once the clock is set): so again,
		 * the time left from now on this clock. */
		if (f->u64[1] & (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET)) {
			struct timespec now;
			clock_gettime((clockid_t)f->u64[0], &now);
			its.it_value.tv_sec += now.tv_sec;
			its.it_value.tv_nsec += now.tv_nsec;
			if (its.it_value.tv_nsec >= 1000000000L) {
				its.it_value.tv_sec++;
				its.it_value.tv_nsec -= 1000000000L;
			}
			fl = (int)(f->u64[1] & (TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET));
		}
		timerfd_settime(*fd, fl, &its, NULL);
	}
	/* Expirations the job had not read: a kernel without checkpoint and
	 * restore support cannot take them, and the job would wait for a tick
	 * that already came. */
	if (*fd >= 0 && ticks) {
		if (ioctl(*fd, TFD_IOC_SET_TICKS, &ticks) < 0) {
			int e = errno;

			ck_err_set("timerfd (descriptor %d): cannot set its %llu unread expiration(s) again "
				   "(TFD_IOC_SET_TICKS): %s", f->fd, (unsigned long long)ticks, strerror(e));
			close(*fd);
			*fd = -1;
			return -e;
		}
	}
	return 0;
}

int ck_signalfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	int nb = (f->flags & O_NONBLOCK) ? 1 : 0;
	sigset_t set;

	(void)rd;
	(void)o;
	sigemptyset(&set);
	for (int s = 1; s <= 64; s++)
		if (f->u64[0] & (1ull << (s - 1)))
			sigaddset(&set, s);
	*fd = signalfd(-1, &set, SFD_CLOEXEC | (nb ? SFD_NONBLOCK : 0));
	return 0;
}

int ck_epoll_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	(void)rd;
	(void)o;
	(void)f;
	*fd = epoll_create1(EPOLL_CLOEXEC);
	return 0;
}

int ck_inotify_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	(void)rd;
	(void)o;
	*fd = inotify_init1(IN_CLOEXEC | ((f->flags & O_NONBLOCK) ? IN_NONBLOCK : 0));
	return 0;
}

/* An instance shared by fork, as its maker recorded it when it parked:
 * another holder parked later and may have added or removed a watch in
 * between. Its fdinfo now (every process parked) must list as many
 * watches, none numbered above the last the maker knew. */
static int ck__inotify_unchanged(const struct ckrun *c, const struct ck_procdesc *pd, const struct ck_pd_fd *f)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	uint64_t n = 0, last = 0;
	pid_t pid = 0;
	FILE *in;

	if (!(f->xflags & CK_PD_FD_SHARED) || f->u64[2] != (uint64_t)(uint32_t)pd->pid)
		return 0;
	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].pd == pd)
			pid = c->procs[i].pid;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%d", (int)pid, f->fd);
	if (!pid || !(in = fopen(path, "re")))
		return 0; /* (it ended: the round's other checks say so) */
	while (getline(&line, &cap, in) > 0) {
		unsigned long long wd;
		if (sscanf(line, "inotify wd:%llx", &wd) == 1) {
			n++;
			last = wd > last ? wd : last;
		}
	}
	free(line);
	fclose(in);
	if (n == f->u64[0] && last <= f->u64[1])
		return 0;
	ck_err_set("process %d: descriptor %d is an inotify instance shared with another process, which changed "
		   "its watches while the round parked the processes (%llu then, %llu now): not restored this time",
		   pd->pid, f->fd, (unsigned long long)f->u64[0], (unsigned long long)n);
	return -EAGAIN;
}

/* Every inotify instance, with every process parked and shared
 * descriptions marked: the process that made it adds its watches again at
 * a restore (libckpt/inotify.c), so it must be one of its holders. */
int ck_inotify_check(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		const struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nfds; k++) {
			const struct ck_pd_fd *f = &pd->fds[k];
			int made = 0, r;

			if (f->kind != CK_FD_INOTIFY)
				continue;
			for (size_t j = 0; j < c->nprocs; j++) {
				const struct ck_procdesc *po = c->procs[j].pd;
				for (uint32_t m = 0; m < po->nfds; m++) {
					const struct ck_pd_fd *g = &po->fds[m];
					if (g->kind == CK_FD_INOTIFY && (g == f || ((f->xflags & g->xflags & CK_PD_FD_SHARED) &&
										  g->pipe_off == f->pipe_off)))
						made += g->u64[2] == (uint64_t)(uint32_t)po->pid;
				}
			}
			if (made == 1 && (r = ck__inotify_unchanged(c, pd, f)) < 0)
				return r;
			if (made == 1)
				continue;
			if (!f->u64[2])
				ck_err_set("process %d: descriptor %d is an inotify instance not made through the C library "
					   "(or moved to another number): its watches are not restored",
					   pd->pid, f->fd);
			else
				ck_err_set("process %d: descriptor %d is an inotify instance made by process %d, which no "
					   "longer holds it: its watches are not restored",
					   pd->pid, f->fd, (int)f->u64[2]);
			return -ENOTSUP;
		}
	}
	return 0;
}

/* Whether process j's descriptor g is the same epoll description as f and
 * holds a registration equal to e as its own file. */
static int ck__epitem_held(const struct ck_procdesc *po, const struct ck_pd_fd *g, const struct ck_pd_fd *f,
			   const struct ck_pd_epitem *e)
{
	if (g->kind != CK_FD_EPOLL || (g != f && !((f->xflags & g->xflags & CK_PD_FD_SHARED) && g->pipe_off == f->pipe_off)))
		return 0;
	for (uint32_t k = 0; k < po->nepitems; k++) {
		const struct ck_pd_epitem *o = &po->epitems[k];
		if (o->epfd == g->fd && o->tfd == e->tfd && o->events == e->events && o->data == e->data &&
		    !(o->flags & CK_PD_EPI_ELSEWHERE))
			return 1;
	}
	return 0;
}

/* Every epoll registration, with every process parked and shared
 * descriptions marked: a restore adds it again by number in a holder whose
 * descriptor of that number is still the registered file (libckpt checks
 * its own with kcmp), so one holder must be such. */
int ck_epoll_check(struct ckrun *c)
{
	for (size_t i = 0; i < c->nprocs; i++) {
		const struct ck_procdesc *pd = c->procs[i].pd;
		for (uint32_t k = 0; k < pd->nepitems; k++) {
			const struct ck_pd_epitem *e = &pd->epitems[k];
			const struct ck_pd_fd *f = NULL;
			int held = 0;

			if (!(e->flags & CK_PD_EPI_ELSEWHERE))
				continue;
			for (uint32_t m = 0; m < pd->nfds && !f; m++)
				if (pd->fds[m].fd == e->epfd && pd->fds[m].kind == CK_FD_EPOLL)
					f = &pd->fds[m];
			for (size_t j = 0; f && j < c->nprocs && !held; j++) {
				const struct ck_procdesc *po = c->procs[j].pd;
				for (uint32_t m = 0; m < po->nfds && !held; m++)
					held = ck__epitem_held(po, &po->fds[m], f, e);
			}
			if (held)
				continue;
			ck_err_set("process %d: descriptor %d (epoll) holds a registration of descriptor %d whose file "
				   "no holder of the instance has at that number any more (closed or replaced since): "
				   "not restored",
				   pd->pid, e->epfd, e->tfd);
			return -ENOTSUP;
		}
	}
	return 0;
}
