/* Socket options beyond the core set of sock_ckpt.c (TCP_NODELAY,
 * SO_KEEPALIVE, SO_REUSEADDR/PORT, IPV6_V6ONLY, SO_LINGER, buffer sizes):
 * read at the round from ckrun's duplicate, set again on the socket the
 * restore makes. Held in two fields of the descriptor a socket has no use
 * for, valid when u64[2] has CK_SOCKOPT_EXT (an older image's are a
 * socket's mtime and nothing):
 *
 *   offset   TCP_KEEPIDLE (15 bits) | TCP_KEEPINTVL << 15 (15) |
 *            TCP_KEEPCNT << 30 (7) | IP_TOS << 37 (8) | IP_TTL << 45 (8) |
 *            SO_BROADCAST << 53 | SO_OOBINLINE << 54 |
 *            SO_PRIORITY << 55 (4 bits: 0-15) | SO_PASSCRED << 59
 *   mtime_ns SO_RCVTIMEO in ms | SO_SNDTIMEO in ms << 32
 *
 * and, with CK_SOCKOPT_EXT2, in three more:
 *
 *   pipe_len TCP_USER_TIMEOUT in ms
 *   pipe_cap SO_MARK
 *   u64[1]   (bits 48-63) IPV6_TCLASS << 48 (8 bits) |
 *            IPV6_UNICAST_HOPS << 56 (8 bits)
 *
 * What does not fit is refused at the round in one line (a priority above
 * 15, a timeout above 49 days), as is a classic BPF filter the job
 * attached (SO_ATTACH_FILTER: readable, but not made again here) and a
 * socket bound to a device (SO_BINDTODEVICE). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "launcher/common/ck_err.h"
#include "plugins/socket/agent/sock.h"

static int ck__get(int fd, int level, int name, int *v)
{
	socklen_t l = sizeof(*v);

	*v = 0;
	return getsockopt(fd, level, name, v, &l);
}

static int ck__timeout_ms(int fd, int name, uint64_t *ms)
{
	struct timeval tv = {0, 0};
	socklen_t l = sizeof(tv);

	if (getsockopt(fd, SOL_SOCKET, name, &tv, &l) < 0)
		return 0;
	*ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
	return *ms > 0xffffffffull ? -ERANGE : 0;
}

int ck_sockopt_save(int fd, int family, int type, int32_t jpid, struct ck_pd_fd *f)
{
	uint64_t o = 0, rcv = 0, snd = 0, x = 0;
	int v, inet = family == AF_INET || family == AF_INET6;
	socklen_t l = 0;
	char dev[32];

	/* optlen 0 asks how many instructions a filter has */
	if (getsockopt(fd, SOL_SOCKET, SO_GET_FILTER, NULL, &l) == 0 && l > 0) {
		ck_err_set("process %d: socket (descriptor %d) has a BPF filter attached (SO_ATTACH_FILTER): not "
			   "supported", jpid, f->fd);
		return -ENOTSUP;
	}
	l = sizeof(dev);
	if (inet && getsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, dev, &l) == 0 && l > 0 && dev[0]) {
		ck_err_set("process %d: socket (descriptor %d) is bound to a device (SO_BINDTODEVICE): not supported",
			   jpid, f->fd);
		return -ENOTSUP;
	}
	if (ck__timeout_ms(fd, SO_RCVTIMEO, &rcv) < 0 || ck__timeout_ms(fd, SO_SNDTIMEO, &snd) < 0) {
		ck_err_set("process %d: socket (descriptor %d) has a timeout over 49 days: not supported", jpid, f->fd);
		return -ENOTSUP;
	}
	if (ck__get(fd, SOL_SOCKET, SO_PRIORITY, &v) == 0 && (v < 0 || v > 15)) {
		ck_err_set("process %d: socket (descriptor %d) has priority %d (SO_PRIORITY): not supported", jpid, f->fd,
			   v);
		return -ENOTSUP;
	}
	o |= (uint64_t)(v & 15) << 55;
	if (ck__get(fd, SOL_SOCKET, SO_BROADCAST, &v) == 0 && v)
		o |= 1ull << 53;
	if (ck__get(fd, SOL_SOCKET, SO_OOBINLINE, &v) == 0 && v)
		o |= 1ull << 54;
	if (ck__get(fd, SOL_SOCKET, SO_PASSCRED, &v) == 0 && v)
		o |= 1ull << 59;
	if (inet && type == SOCK_STREAM) {
		if (ck__get(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v) == 0)
			o |= (uint64_t)(v & 0x7fff);
		if (ck__get(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v) == 0)
			o |= (uint64_t)(v & 0x7fff) << 15;
		if (ck__get(fd, IPPROTO_TCP, TCP_KEEPCNT, &v) == 0)
			o |= (uint64_t)(v & 0x7f) << 30;
	}
	if (family == AF_INET) {
		if (ck__get(fd, IPPROTO_IP, IP_TOS, &v) == 0)
			o |= (uint64_t)(v & 0xff) << 37;
		if (ck__get(fd, IPPROTO_IP, IP_TTL, &v) == 0)
			o |= (uint64_t)(v & 0xff) << 45;
	}
	f->offset = o;
	f->mtime_ns = (int64_t)(rcv | snd << 32);
	if (ck__get(fd, SOL_SOCKET, SO_MARK, &v) == 0)
		f->pipe_cap = (uint32_t)v;
	if (inet && type == SOCK_STREAM && ck__get(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &v) == 0)
		f->pipe_len = (uint32_t)v;
	if (family == AF_INET6) {
		if (ck__get(fd, IPPROTO_IPV6, IPV6_TCLASS, &v) == 0)
			x |= (uint64_t)(v & 0xff);
		if (ck__get(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, &v) == 0)
			x |= (uint64_t)(v & 0xff) << 8;
	}
	f->u64[1] = (f->u64[1] & 0x0000ffffffffffffull) | x << 48;
	return 0;
}

static void ck__set(int fd, int level, int name, int v)
{
	setsockopt(fd, level, name, &v, sizeof(v));
}

static void ck__set_timeout(int fd, int name, uint64_t ms)
{
	struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000)};

	if (ms)
		setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv));
}

int ck_sockopt_restore(int fd, int family, int type, const struct ck_pd_fd *f)
{
	uint64_t o = f->offset, t = (uint64_t)f->mtime_ns;

	if (!(f->u64[2] & CK_SOCKOPT_EXT))
		return 0;
	ck__set_timeout(fd, SO_RCVTIMEO, t & 0xffffffffull);
	ck__set_timeout(fd, SO_SNDTIMEO, t >> 32);
	if (o & (1ull << 53))
		ck__set(fd, SOL_SOCKET, SO_BROADCAST, 1);
	if (o & (1ull << 54))
		ck__set(fd, SOL_SOCKET, SO_OOBINLINE, 1);
	if (o & (1ull << 59))
		ck__set(fd, SOL_SOCKET, SO_PASSCRED, 1);
	if ((family == AF_INET || family == AF_INET6) && type == SOCK_STREAM) {
		if (o & 0x7fff)
			ck__set(fd, IPPROTO_TCP, TCP_KEEPIDLE, (int)(o & 0x7fff));
		if ((o >> 15) & 0x7fff)
			ck__set(fd, IPPROTO_TCP, TCP_KEEPINTVL, (int)((o >> 15) & 0x7fff));
		if ((o >> 30) & 0x7f)
			ck__set(fd, IPPROTO_TCP, TCP_KEEPCNT, (int)((o >> 30) & 0x7f));
	}
	if (family == AF_INET) {
		ck__set(fd, IPPROTO_IP, IP_TOS, (int)((o >> 37) & 0xff));
		if ((o >> 45) & 0xff)
			ck__set(fd, IPPROTO_IP, IP_TTL, (int)((o >> 45) & 0xff));
	}
	/* after IP_TOS, which sets the priority from the TOS */
	ck__set(fd, SOL_SOCKET, SO_PRIORITY, (int)((o >> 55) & 15));
	if (!(f->u64[2] & CK_SOCKOPT_EXT2))
		return 0;
	if ((family == AF_INET || family == AF_INET6) && type == SOCK_STREAM && f->pipe_len)
		ck__set(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, (int)f->pipe_len);
	if (family == AF_INET6) {
		int hops = (int)((f->u64[1] >> 56) & 0xff);

		ck__set(fd, IPPROTO_IPV6, IPV6_TCLASS, (int)((f->u64[1] >> 48) & 0xff));
		if (hops)
			ck__set(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, hops);
	}
	/* a mark routes and filters the socket's packets: one that cannot be
	 * set again (no CAP_NET_ADMIN here) fails the restore */
	if (f->pipe_cap && setsockopt(fd, SOL_SOCKET, SO_MARK, &(int){(int)f->pipe_cap}, sizeof(int)) < 0) {
		int e = errno;

		ck_err_set("cannot set mark %u (SO_MARK) on %s again: %s", f->pipe_cap, f->path, strerror(e));
		return -e;
	}
	return 0;
}
