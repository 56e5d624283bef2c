/* fdwatch inotify|inotify-raw|inotify-orphan|epoll-moved|memfd-sealed|mqueue-notify-queued|mqueue-notify-thread|mqueue-notify-raw|passcred|passcred-shut|dgram-peer-shut|dgram-sender-shut|dgram-shut-rd|dgram-empty-shut|udp-sender-shut|shut-queued|lease-mapped|lease:
 * a descriptor whose
 * state a checkpoint cannot restore exactly:
 *   inotify         an instance holding an event the job has not read
 *                   (reading it would take it from the job);
 *   inotify-raw     a watch added by a bare system call (libckpt never saw
 *                   its path);
 *   inotify-orphan  an instance a child inherited and its maker closed
 *                   (the maker adds the watches again at a restore);
 *   epoll-moved     an epoll registration of a pipe whose descriptor was
 *                   moved to another number after it (a registration is
 *                   made again by number);
 *   memfd-sealed    a writable shared mapping of a memfd sealed after it
 *                   with F_SEAL_FUTURE_WRITE (a restore seals, then maps);
 *   mqueue-notify-queued  a POSIX message queue where the process
 *                   registered for a notification (mq_notify) while a
 *                   message is queued: a round's taking and putting back
 *                   its messages would send it;
 *   mqueue-notify-thread  the same on an empty queue, SIGEV_THREAD (the C
 *                   library's own socket and thread);
 *   mqueue-notify-raw  the same, SIGEV_SIGNAL, registered by a bare system
 *                   call (libckpt does not know the signal's value);
 *   passcred        a message queued toward a UNIX socket with SO_PASSCRED
 *                   by a child that has exited since
 *                   (its sender's credentials come with it);
 *   passcred-shut   datagrams queued toward a UNIX datagram socket with
 *                   SO_PASSCRED from a peer that then shut itself for
 *                   writing: taken, they could not be sent back through it;
 *   dgram-peer-shut datagrams queued toward a UNIX datagram socket from its
 *                   peer, which then shut itself for writing (only that
 *                   peer may send to it: nothing could be put back);
 *   dgram-sender-shut  a datagram queued on a named unconnected socket
 *                   from a named socket of the job that then shut itself
 *                   for writing (it would be sent again from there);
 *   dgram-shut-rd   a datagram queued on a named unconnected socket that
 *                   then shut itself for reading;
 *   dgram-empty-shut  an empty datagram queued toward a UNIX datagram
 *                   socket that then shut itself for reading;
 *   udp-sender-shut a datagram queued toward an unconnected UDP socket from
 *                   a UDP socket of the job that then shut itself for
 *                   writing (it could not be sent again through it);
 *   shut-queued     records queued on a UNIX record socket whose peer
 *                   has shut it for reading (shutdown(SHUT_WR)): taken,
 *                   they could not be sent back to it;
 *   lease-mapped    a write lease on a file the process maps shared
 *                   through the same open (a restore maps through an open
 *                   of its own, which the lease would forbid);
 *   lease           a read lease (F_SETLEASE) on a file of its own being
 *                   broken: a child's open for writing waits for the job
 *                   to give it up.
 * The round must be refused naming it, and the job must go on: the event
 * is still queued, the watch still reports, the lease is still being
 * broken (the child's open still waits), and once given up the child's
 * open goes through. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <mqueue.h>
#include <netinet/in.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[256];
static volatile sig_atomic_t notified;

static void on_notify(int sig)
{
	(void)sig;
	notified++;
}

static void on_notify_thread(union sigval v)
{
	(void)v;
	notified++;
}

static void make(const char *name)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	close(open(path, O_RDWR | O_CREAT, 0600));
}

/* The next event must be IN_CREATE of name. */
static int created(int fd, const char *name)
{
	char ev[4096] __attribute__((aligned(8)));
	struct inotify_event *e = (struct inotify_event *)ev;

	return read(fd, ev, sizeof(ev)) > 0 && (e->mask & IN_CREATE) && e->len && !strcmp(e->name, name);
}

static void clean(void)
{
	char path[300];

	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, (const char *[]){"f", "g", "early"}[i]);
		unlink(path);
	}
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "inotify";
	int lease = !strcmp(mode, "lease"), fd, rc = 0;
	pid_t kid = -1;
	char path[300];

	snprintf(dir, sizeof(dir), "%s/fdwatch.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	make("f");
	snprintf(path, sizeof(path), "%s/f", dir);
	if (!strcmp(mode, "passcred")) {
		union {
			char b[CMSG_SPACE(sizeof(struct ucred))];
			struct cmsghdr a;
		} u;
		struct iovec iov = {path, 1};
		struct msghdr mh = {0};
		struct ucred uc = {0};
		int sv[2], on = 1;
		/* sent by a child that has exited since: no process to send
		 * it as at a restore */
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 ||
		    setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0 || (kid = fork()) < 0)
			return 1;
		if (kid == 0)
			_exit(write(sv[1], "m", 1) != 1);
		if (waitpid(kid, &rc, 0) != kid || rc != 0)
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.b;
		mh.msg_controllen = sizeof(u.b);
		if (recvmsg(sv[0], &mh, 0) != 1 || !CMSG_FIRSTHDR(&mh))
			rc = 1;
		else
			memcpy(&uc, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(uc));
		rc |= uc.pid != kid || uc.uid != getuid();
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strcmp(mode, "passcred-shut")) {
		char b[8];
		int sv[2], on = 1;
		if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0 ||
		    setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0 || send(sv[1], "ab", 2, 0) != 2 ||
		    send(sv[1], "c", 1, 0) != 1 || shutdown(sv[1], SHUT_WR) < 0)
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		rc = recv(sv[0], b, sizeof(b), 0) != 2 || recv(sv[0], b, sizeof(b), 0) != 1 ||
		     recv(sv[0], b, sizeof(b), MSG_DONTWAIT) != -1;
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strncmp(mode, "dgram-", 6)) {
		/* a datagram queued, then a shutdown; read at the end as sent */
		struct sockaddr_un sa = {.sun_family = AF_UNIX}, ca = {.sun_family = AF_UNIX};
		socklen_t l = offsetof(struct sockaddr_un, sun_path) + 1 + 20;
		int sv[2], srv, cli, empty = !strcmp(mode, "dgram-empty-shut");
		char b[8];
		ssize_t want = empty ? 0 : 2;
		if (!strcmp(mode, "dgram-peer-shut") || empty) {
			if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) < 0 || send(sv[1], "ab", (size_t)want, 0) != want)
				return 1;
			srv = sv[0];
			cli = sv[1];
		} else {
			/* abstract names (nothing to remove), of this run only: a
			 * job's pid is 2 in every run under ckrun */
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			snprintf(sa.sun_path + 1, 20, "fdwatch-s-%08lx", (unsigned long)ts.tv_nsec ^ (unsigned long)getpid());
			snprintf(ca.sun_path + 1, 20, "fdwatch-c-%08lx", (unsigned long)ts.tv_nsec ^ (unsigned long)getpid());
			srv = socket(AF_UNIX, SOCK_DGRAM, 0);
			cli = socket(AF_UNIX, SOCK_DGRAM, 0);
			if (srv < 0 || cli < 0 || bind(srv, (struct sockaddr *)&sa, l) < 0 ||
			    bind(cli, (struct sockaddr *)&ca, l) < 0 ||
			    sendto(cli, "ab", 2, 0, (struct sockaddr *)&sa, l) != 2)
				return 1;
		}
		if (shutdown(!strcmp(mode, "dgram-peer-shut") || !strcmp(mode, "dgram-sender-shut") ? cli : srv,
			     !strcmp(mode, "dgram-peer-shut") || !strcmp(mode, "dgram-sender-shut") ? SHUT_WR : SHUT_RD) <
		    0)
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		rc = recv(srv, b, sizeof(b), MSG_DONTWAIT) != want || recv(srv, b, sizeof(b), MSG_DONTWAIT) != -1;
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strcmp(mode, "udp-sender-shut")) {
		/* a UDP socket of the job sends, then shuts itself for writing
		 * (ENOTCONN, unconnected, but the bit is set) */
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t l = sizeof(a);
		int r = socket(AF_INET, SOCK_DGRAM, 0), w = socket(AF_INET, SOCK_DGRAM, 0);
		char b[8];
		if (r < 0 || w < 0 || bind(r, (struct sockaddr *)&a, l) < 0 || bind(w, (struct sockaddr *)&a, l) < 0 ||
		    getsockname(r, (struct sockaddr *)&a, &l) < 0 || sendto(w, "ab", 2, 0, (struct sockaddr *)&a, l) != 2 ||
		    (shutdown(w, SHUT_WR) < 0 && errno != ENOTCONN))
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		rc = recv(r, b, sizeof(b), MSG_DONTWAIT) != 2 || recv(r, b, sizeof(b), MSG_DONTWAIT) != -1 ||
		     sendto(w, "c", 1, 0, (struct sockaddr *)&a, l) != -1 || errno != EPIPE;
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strcmp(mode, "shut-queued")) {
		char b[8];
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0 || send(sv[1], "ab", 2, 0) != 2 ||
		    send(sv[1], "c", 1, 0) != 1 || shutdown(sv[1], SHUT_WR) < 0)
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		rc = recv(sv[0], b, sizeof(b), 0) != 2 || recv(sv[0], b, sizeof(b), 0) != 1 ||
		     recv(sv[0], b, sizeof(b), MSG_DONTWAIT) != 0;
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strncmp(mode, "mqueue-notify-", 14)) {
		static char got[65536]; /* at least the queue's message size */
		int thread = !strcmp(mode, "mqueue-notify-thread"), queued = !strcmp(mode, "mqueue-notify-queued");
		struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
		struct sigaction sa = {.sa_handler = on_notify, .sa_flags = SA_RESTART};
		char name[64];
		mqd_t q;
		if (thread) {
			ev.sigev_notify = SIGEV_THREAD;
			ev.sigev_notify_function = on_notify_thread;
		}
		snprintf(name, sizeof(name), "/fdwatch-notify-%d", (int)getpid());
		if (sigaction(SIGUSR1, &sa, NULL) < 0 ||
		    (q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, NULL)) == (mqd_t)-1 ||
		    (queued && mq_send(q, "first", 5, 1) < 0) ||
		    (!strcmp(mode, "mqueue-notify-raw") ? syscall(SYS_mq_notify, q, &ev) : mq_notify(q, &ev)) < 0)
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		/* nothing sent it, the message is there; now it comes */
		rc = notified != 0 ||
		     (queued && (mq_receive(q, got, sizeof(got), NULL) != 5 || memcmp(got, "first", 5))) ||
		     mq_send(q, "queued", 6, 1) < 0;
		for (int i = 0; i < 100 && !notified; i++)
			usleep(10000);
		rc |= notified != 1 || mq_receive(q, got, sizeof(got), NULL) != 6 || memcmp(got, "queued", 6);
		mq_unlink(name);
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strcmp(mode, "lease-mapped")) {
		char *m;
		signal(SIGIO, SIG_IGN);
		if ((fd = open(path, O_RDWR)) < 0 || ftruncate(fd, 4096) < 0 ||
		    (m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
		    fcntl(fd, F_SETLEASE, F_WRLCK) < 0)
			return 1;
		m[0] = 'a';
		for (int i = 0; i < 25; i++)
			usleep(100000);
		m[1] = 'b';
		rc = fcntl(fd, F_GETLEASE) != F_WRLCK || pread(fd, path, 2, 0) != 2 || path[0] != 'a' || path[1] != 'b';
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strcmp(mode, "memfd-sealed")) {
		char *m;
		if ((fd = memfd_create("fdwatch", MFD_ALLOW_SEALING)) < 0 || ftruncate(fd, 4096) < 0 ||
		    (m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
		    fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) < 0)
			return 1;
		m[0] = 'a';
		for (int i = 0; i < 25; i++)
			usleep(100000);
		m[1] = 'b'; /* the mapping made before the seal still writes */
		if (pread(fd, path, 2, 0) != 2 || path[0] != 'a' || path[1] != 'b' || write(fd, "x", 1) >= 0)
			rc = 1;
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (!strcmp(mode, "epoll-moved")) {
		struct epoll_event ev = {EPOLLIN, {.u64 = 1}};
		int p[2];

		if (pipe(p) < 0 || (fd = epoll_create1(0)) < 0 || epoll_ctl(fd, EPOLL_CTL_ADD, p[0], &ev) < 0 ||
		    dup2(p[0], 20) < 0 || close(p[0]) < 0)
			return 1;
		for (int i = 0; i < 25; i++)
			usleep(100000);
		if (write(p[1], "x", 1) != 1 || epoll_wait(fd, &ev, 1, 1000) != 1 || ev.data.u64 != 1)
			rc = 1;
		clean();
		printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
		return rc;
	}
	if (lease) {
		signal(SIGIO, SIG_IGN); /* the break's notice */
		fd = open(path, O_RDONLY);
		if (fd < 0 || fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
			return 1;
		if ((kid = fork()) == 0) {
			int w = open(path, O_WRONLY); /* waits for the lease */
			_exit(w < 0 ? 4 : 0);
		}
		for (int i = 0; i < 2500 && fcntl(fd, F_GETLEASE) == F_RDLCK; i++)
			usleep(2000);
		if (fcntl(fd, F_GETLEASE) != F_UNLCK) /* being broken: what it will be */
			return 1;
	} else {
		fd = inotify_init1(IN_NONBLOCK);
		if (fd < 0)
			return 1;
		if (!strcmp(mode, "inotify-raw") ? syscall(SYS_inotify_add_watch, fd, dir, IN_CREATE) < 0
						 : inotify_add_watch(fd, dir, IN_CREATE) < 0)
			return 1;
		if (!strcmp(mode, "inotify"))
			make("early"); /* read after the round */
		if (!strcmp(mode, "inotify-orphan") && (kid = fork()) > 0) {
			int st;
			close(fd);
			waitpid(kid, &st, 0);
			clean();
			rc = !WIFEXITED(st) || WEXITSTATUS(st);
			printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
			return rc;
		}
	}
	for (int i = 0; i < 25; i++)
		usleep(100000);
	if (lease) {
		int st;

		/* still being broken, the child still waiting; given up, it opens */
		if (fcntl(fd, F_GETLEASE) != F_UNLCK || waitpid(kid, &st, WNOHANG) != 0 ||
		    fcntl(fd, F_SETLEASE, F_UNLCK) < 0 || waitpid(kid, &st, 0) != kid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			rc = 1;
		kid = -1;
	} else {
		if (!strcmp(mode, "inotify") && !created(fd, "early"))
			rc = 1;
		make("g");
		if (!created(fd, "g"))
			rc = 1;
	}
	if (kid == 0)
		_exit(rc);
	clean();
	printf("fdwatch %s: %s\n", mode, rc ? "FAIL" : "still in place");
	return rc;
}
