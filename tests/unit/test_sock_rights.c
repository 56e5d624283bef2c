/* The socket plugin's saved queue with descriptors in flight
 * (CK_SOCKOPT_RIGHTS, plugins/socket/agent/sock_rights.c): a restore sends
 * each file with the message it rode on and no other (a stream's plain
 * bytes before it come without it), and a damaged block is refused. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plugins/socket/agent/sock.h"
#include "tests/unit/unit.h"

static int ck__made;

/* ckrun's maker, here: a pipe's read end per saved file. */
uint64_t ck_agent_job_now(void)
{
	return 0;
}

int ck_agent_fd_make(const struct ck_pd_fd *f)
{
	int p[2];

	(void)f;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	close(p[1]);
	ck__made++;
	return p[0];
}

static size_t ck__block(char *b, uint32_t nmark, const struct ck_sock_mark *mk, uint32_t nidx, const uint32_t *ix,
			const void *data, size_t ndata)
{
	uint32_t h[4] = {CK_SOCK_RIGHTS_MAGIC, 2, nmark, nidx};
	struct ck_pd_fd d[2];
	size_t n = 0;

	memset(d, 0, sizeof(d));
	d[0].kind = d[1].kind = CK_FD_PIPE;
	memcpy(b + n, h, sizeof(h));
	n += sizeof(h);
	memcpy(b + n, d, sizeof(d));
	n += sizeof(d);
	memcpy(b + n, mk, nmark * sizeof(*mk));
	n += nmark * sizeof(*mk);
	memcpy(b + n, ix, nidx * sizeof(*ix));
	n += nidx * sizeof(*ix);
	memcpy(b + n, data, ndata);
	return n + ndata;
}

/* One recvmsg of up to len bytes: how many, and the files that came. */
static ssize_t ck__recv(int s, char *p, size_t len, int *nfd)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr a;
	} u;
	struct iovec iov = {p, len};
	struct msghdr mh = {0};
	ssize_t n;

	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	n = recvmsg(s, &mh, MSG_DONTWAIT);
	*nfd = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof(int));
				close(fd);
			}
			*nfd += k;
		}
	return n;
}

void ck_unit_run(void)
{
	static char b[65536];
	char r[64];
	int sv[2], nfd;
	size_t n;

	/* stream: "abc" plain, "de" with both files, "fgh" plain */
	{
		struct ck_sock_mark mk[1] = {{3, 2, 2, 0, 0}};
		uint32_t ix[2] = {0, 1};
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		n = ck__block(b, 1, mk, 2, ix, "abcdefgh", 8);
		ck__made = 0;
		CHECK_EQ_INT(ck_rights_deliver(b, n, 0, sv[1], NULL, 0), 0);
		CHECK_EQ_INT(ck__made, 2);
		CHECK_EQ_INT(ck__recv(sv[0], r, 3, &nfd), 3);
		CHECK_EQ_INT(nfd, 0);
		CHECK_EQ_INT(ck__recv(sv[0], r, 64, &nfd), 2); /* the files end a read */
		CHECK_EQ_INT(nfd, 2);
		CHECK(!memcmp(r, "de", 2));
		CHECK_EQ_INT(ck__recv(sv[0], r, 64, &nfd), 3);
		CHECK_EQ_INT(nfd, 0);
		close(sv[0]);
		close(sv[1]);
	}
	/* datagrams: "x", "" with file 1, "yz" with file 0 and 1 */
	{
		struct ck_sock_mark mk[2] = {{1, 0, 1, 0, 0}, {2, 2, 2, 1, 0}};
		uint32_t ix[3] = {1, 0, 1};
		char q[32];
		uint32_t l;
		size_t k = 0;
		l = 1, memcpy(q + k, &l, 4), k += 4, q[k++] = 'x';
		l = 0, memcpy(q + k, &l, 4), k += 4;
		l = 2, memcpy(q + k, &l, 4), k += 4, q[k++] = 'y', q[k++] = 'z';
		CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
		n = ck__block(b, 2, mk, 3, ix, q, k);
		ck__made = 0;
		CHECK_EQ_INT(ck_rights_deliver(b, n, 1, sv[1], NULL, 0), 0);
		CHECK_EQ_INT(ck__made, 2); /* file 1 made once, sent twice */
		CHECK_EQ_INT(ck__recv(sv[0], r, 64, &nfd), 1);
		CHECK_EQ_INT(nfd, 0);
		CHECK_EQ_INT(ck__recv(sv[0], r, 64, &nfd), 0);
		CHECK_EQ_INT(nfd, 1);
		CHECK_EQ_INT(ck__recv(sv[0], r, 64, &nfd), 2);
		CHECK_EQ_INT(nfd, 2);
		CHECK_EQ_INT(ck__recv(sv[0], r, 64, &nfd), -1);
		close(sv[0]);
		close(sv[1]);
	}
	/* damaged: short, bad magic, an index past the table, a mark past the data */
	{
		struct ck_sock_mark mk[1] = {{3, 2, 1, 0, 0}}, far[1] = {{30, 2, 1, 0, 0}};
		uint32_t bad[1] = {7}, ok[1] = {0};
		CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		CHECK_EQ_INT(ck_rights_deliver(b, 8, 0, sv[1], NULL, 0), -EBADMSG);
		n = ck__block(b, 1, mk, 1, ok, "abcde", 5);
		b[0] ^= 1;
		CHECK_EQ_INT(ck_rights_deliver(b, n, 0, sv[1], NULL, 0), -EBADMSG);
		n = ck__block(b, 1, mk, 1, bad, "abcde", 5);
		CHECK_EQ_INT(ck_rights_deliver(b, n, 0, sv[1], NULL, 0), -EBADMSG);
		n = ck__block(b, 1, far, 1, ok, "abcde", 5);
		CHECK_EQ_INT(ck_rights_deliver(b, n, 0, sv[1], NULL, 0), -EBADMSG);
		close(sv[0]);
		close(sv[1]);
	}
}
