/* mp_scm_stream: descriptors in flight over a UNIX stream socket.
 *
 * State exercised: the parent queues five messages toward its child on a
 * socketpair, some carrying descriptors (SCM_RIGHTS): plain bytes; one byte
 * with a regular file at offset 1000 (the parent keeps it) and a second open
 * of the file at offset 5 (the parent closes it); plain bytes; two bytes with
 * a pipe's read end holding unread bytes (the parent closes its copy and
 * keeps the write end) and a memfd at offset 77 (the parent keeps it);
 * plain bytes. The child reads nothing for a while, then reads each message
 * with its exact size and checks: which message the descriptors came with
 * (none with the plain ones), the files' contents and offsets, the pipe's
 * unread bytes and O_NONBLOCK, and that each is the parent's own open file
 * description still (the parent sees the child's offset move, the child
 * reads what the parent writes into the pipe after, the parent reads what
 * the child writes into the memfd).
 * Usage: mp_scm_stream [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static void nap(int ms)
{
	for (int i = 0; i < ms / 10; i++) {
		struct timespec ts = {0, 10 * 1000000};
		nanosleep(&ts, NULL);
	}
}

static int send_with(int sock, const char *p, size_t len, const int *fds, int nfd)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr a;
	} u;
	struct iovec iov = {(void *)p, len};
	struct msghdr mh = {0};
	memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (nfd) {
		struct cmsghdr *c;
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfd);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfd);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfd);
	}
	return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

/* Reads exactly len bytes in one recvmsg; the descriptors that came. */
static int recv_with(int sock, char *p, size_t len, int *fds, int max)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 8)];
		struct cmsghdr a;
	} u;
	struct iovec iov = {p, len};
	struct msghdr mh = {0};
	int n = 0;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	if (recvmsg(sock, &mh, MSG_WAITALL) != (ssize_t)len)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			for (int i = 0; i < k; i++)
				if (n < max)
					memcpy(&fds[n++], CMSG_DATA(c) + sizeof(int) * (size_t)i, sizeof(int));
		}
	return n;
}

static char pat(size_t i)
{
	return (char)('a' + (i * 7 + i / 13) % 26);
}

#define FAIL(...) do { printf("child: " __VA_ARGS__); printf("\n"); fflush(stdout); _exit(1); } while (0)

static void child(int s, int ms)
{
	char b[64], t;
	int fds[8], n;
	off_t o;

	nap(ms); /* the messages wait, unread, in the socket */
	if ((n = recv_with(s, b, 5, fds, 8)) != 0 || memcmp(b, "hello", 5))
		FAIL("message 1: %d descriptors or wrong bytes", n);
	if ((n = recv_with(s, b, 1, fds, 8)) != 2 || b[0] != 'A')
		FAIL("message 2: %d descriptors (2 expected)", n);
	if ((o = lseek(fds[0], 0, SEEK_CUR)) != 1000)
		FAIL("file: offset %lld, not 1000", (long long)o);
	if (read(fds[0], b, 10) != 10)
		FAIL("file: read");
	for (int i = 0; i < 10; i++)
		if (b[i] != pat(1000 + (size_t)i))
			FAIL("file: wrong bytes at %d", 1000 + i);
	if ((o = lseek(fds[1], 0, SEEK_CUR)) != 5 || read(fds[1], b, 3) != 3 || b[0] != pat(5) || b[2] != pat(7))
		FAIL("second open of the file: offset %lld or bytes wrong", (long long)o);
	if ((fcntl(fds[1], F_GETFL) & O_ACCMODE) != O_RDONLY)
		FAIL("second open of the file: not read-only");
	if ((n = recv_with(s, b, 3, fds + 2, 6)) != 0 || memcmp(b, "mid", 3))
		FAIL("message 3: %d descriptors or wrong bytes", n);
	if ((n = recv_with(s, b, 2, fds + 2, 6)) != 2 || memcmp(b, "BB", 2))
		FAIL("message 4: %d descriptors (2 expected)", n);
	if (!(fcntl(fds[2], F_GETFL) & O_NONBLOCK))
		FAIL("pipe: O_NONBLOCK lost");
	if (read(fds[2], b, 12) != 12 || memcmp(b, "pipe-unread!", 12))
		FAIL("pipe: unread bytes lost");
	if (read(fds[2], b, 1) != -1 || errno != EAGAIN)
		FAIL("pipe: more bytes than were written");
	if ((o = lseek(fds[3], 0, SEEK_CUR)) != 77 || pread(fds[3], b, 4, 4096) != 4 || memcmp(b, "MEMF", 4))
		FAIL("memfd: offset %lld or contents wrong", (long long)o);
	if ((n = recv_with(s, b, 3, fds + 4, 4)) != 0 || memcmp(b, "end", 3))
		FAIL("message 5: %d descriptors or wrong bytes", n);
	/* the same descriptions as the parent's */
	if (pwrite(fds[3], "CHLD", 4, 8192) != 4 || lseek(fds[3], 200, SEEK_SET) != 200)
		FAIL("memfd: write");
	if (write(s, "r", 1) != 1 || read(s, &t, 1) != 1)
		FAIL("talk to the parent");
	nap(50);
	if (read(fds[2], b, 5) != 5 || memcmp(b, "later", 5))
		FAIL("pipe: what the parent wrote after is not there");
	_exit(0);
}

int main(int argc, char **argv)
{
	int ms = (int)(3000 * app_scale(argc, argv)), sv[2], p[2], st, file, file2, mfd, fl;
	char path[512], buf[16384], t;
	const char *tmp = getenv("TMPDIR");
	pid_t kid;
	off_t o;

	snprintf(path, sizeof(path), "%s/mp_scm_stream.%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = pat(i);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(p) < 0 ||
	    (file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600)) < 0 || write(file, buf, sizeof(buf)) != sizeof(buf) ||
	    (file2 = open(path, O_RDONLY)) < 0 || (mfd = memfd_create("ckapp-scm", 0)) < 0 ||
	    ftruncate(mfd, 16384) < 0 || pwrite(mfd, "MEMF", 4, 4096) != 4)
		return 1;
	lseek(file, 1000, SEEK_SET);
	lseek(file2, 5, SEEK_SET);
	lseek(mfd, 77, SEEK_SET);
	fl = fcntl(p[0], F_GETFL);
	fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
	if (write(p[1], "pipe-unread!", 12) != 12)
		return 1;
	printf("mp_scm_stream: 5 messages, 4 descriptors in flight for %d ms\n", ms);
	fflush(stdout);
	kid = fork();
	if (kid == 0) {
		close(sv[0]);
		close(file);
		close(file2);
		close(mfd);
		close(p[0]);
		close(p[1]);
		child(sv[1], ms);
	}
	close(sv[1]);
	{
		int f1[2] = {file, file2}, f2[2] = {p[0], mfd};
		if (send_with(sv[0], "hello", 5, NULL, 0) || send_with(sv[0], "A", 1, f1, 2) ||
		    send_with(sv[0], "mid", 3, NULL, 0) || send_with(sv[0], "BB", 2, f2, 2) ||
		    send_with(sv[0], "end", 3, NULL, 0))
			return 1;
	}
	close(file2); /* in flight only */
	close(p[0]);  /* the read end: in flight only */
	if (read(sv[0], &t, 1) != 1) {
		printf("parent: the child went away\n");
	} else {
		o = lseek(file, 0, SEEK_CUR);
		printf("parent: file offset after the child read: %lld\n", (long long)o);
		printf("parent: memfd offset after the child's seek: %lld\n", (long long)lseek(mfd, 0, SEEK_CUR));
		if (pread(mfd, buf, 4, 8192) != 4)
			buf[0] = 0;
		printf("parent: memfd holds the child's write: %s\n", memcmp(buf, "CHLD", 4) ? "no" : "yes");
		if (write(p[1], "later", 5) != 5 || write(sv[0], "k", 1) != 1)
			return 1;
	}
	waitpid(kid, &st, 0);
	unlink(path);
	printf("child %s\n", WIFEXITED(st) && !WEXITSTATUS(st) ? "ok" : "FAILED");
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}
