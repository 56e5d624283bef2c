/* eventfd, timerfd, signalfd and epoll. libckpt records them in the
 * process descriptor (count and mode; clock, flags and remaining time;
 * mask; nothing: the epoll items are re-added by libckpt at restart);
 * ckrun makes them again with the same flags. */
#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>

#include "launcher/ckrun/kinds.h"

int ck_eventfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	int nb = (f->flags & O_NONBLOCK) ? 1 : 0;

	(void)rd;
	(void)o;
	*fd = eventfd((unsigned)f->u64[0], EFD_CLOEXEC | (nb ? EFD_NONBLOCK : 0) | (f->u64[1] ? EFD_SEMAPHORE : 0));
	return 0;
}

int ck_timerfd_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	int nb = (f->flags & O_NONBLOCK) ? 1 : 0;
	struct itimerspec its;

	(void)rd;
	(void)o;
	*fd = timerfd_create((int)f->u64[0], TFD_CLOEXEC | (nb ? TFD_NONBLOCK : 0));
	its.it_value.tv_sec = (time_t)(f->u64[2] / 1000000000ull);
	its.it_value.tv_nsec = (long)(f->u64[2] % 1000000000ull);
	its.it_interval.tv_sec = (time_t)(f->u64[3] / 1000000000ull);
	its.it_interval.tv_nsec = (long)(f->u64[3] % 1000000000ull);
	if (*fd >= 0 && f->u64[2])
		timerfd_settime(*fd, 0, &its, NULL);
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
