/* mp_passcred: messages queued toward UNIX sockets that receive their
 * senders' credentials (SO_PASSCRED), across a restore.
 *
 * State exercised: three socket pairs (stream, seqpacket, datagram), the
 * parent's end of each with SO_PASSCRED. Two forked children share the
 * other ends and send numbered 32-byte messages carrying a token the
 * parent drew at its start; the second child first sets its
 * oom_score_adj (123) and takes other ids (uid and gid 4242) where the
 * job runs as root, and checks its oom_score_adj at its end. The parent starts
 * reading late and reads more slowly than they send, so every queue holds
 * messages of both senders at any cut. Each message must come with its
 * sender's pid, uid and gid (SCM_CREDENTIALS), in order per sender and
 * exactly once; a stream read must never mix two senders (a read stops
 * where the sender changes).
 * Usage: mp_passcred [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 32
#define OTHER_ID 4242

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void nap_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static uint64_t draw(void)
{
	uint64_t v = 0;
	FILE *f = fopen("/dev/urandom", "rb");

	if (!f || fread(&v, sizeof(v), 1, f) != 1)
		v = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	if (f)
		fclose(f);
	return v | 1;
}

static const char *kind[3] = {"stream", "seqpacket", "dgram"};

/* A child: sends n messages on each socket, one round every ms. */
static void sender(int who, const int *to, int n, uint64_t token, long ms)
{
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 3; k++) {
			char m[MSG];
			memset(m, 0, sizeof(m));
			snprintf(m, sizeof(m), "%d %d %016llx", who, i, (unsigned long long)token);
			if (send(to[k], m, MSG, MSG_NOSIGNAL) != MSG) {
				fprintf(stderr, "mp_passcred: sender %d: %s: %s\n", who, kind[k], strerror(errno));
				_exit(3);
			}
		}
		nap_ms(ms);
	}
	if (who) {
		FILE *o = fopen("/proc/self/oom_score_adj", "r");
		int v = -1;
		if (o && fscanf(o, "%d", &v) != 1)
			v = -1;
		if (o)
			fclose(o);
		if (geteuid() == OTHER_ID && v != 123) {
			fprintf(stderr, "mp_passcred: sender 1's oom_score_adj is %d, not 123\n", v);
			_exit(4);
		}
	}
	_exit(0);
}

/* One message with its credentials; -1 at an error. */
static ssize_t take(int fd, char *buf, struct ucred *uc)
{
	union {
		char b[CMSG_SPACE(sizeof(struct ucred))];
		struct cmsghdr a;
	} u;
	struct iovec iov = {buf, MSG};
	struct msghdr mh;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.b;
	mh.msg_controllen = sizeof(u.b);
	memset(uc, 0xff, sizeof(*uc));
	do
		n = recvmsg(fd, &mh, MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS)
			memcpy(uc, CMSG_DATA(c), sizeof(*uc));
	return n;
}

int main(int argc, char **argv)
{
	double scale = app_scale(argc, argv);
	int n = (int)(150 * scale), pair[3][2], on = 1, next[3][2], bad = 0;
	static const int types[3] = {SOCK_STREAM, SOCK_SEQPACKET, SOCK_DGRAM};
	uint64_t token = draw();
	pid_t kid[2];
	uid_t uid[2];
	gid_t gid[2];

	if (n < 20)
		n = 20;
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int k = 0; k < 3; k++)
		if (socketpair(AF_UNIX, types[k], 0, pair[k]) < 0 ||
		    setsockopt(pair[k][0], SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) < 0) {
			perror("mp_passcred: socketpair");
			return 1;
		}
	for (int w = 0; w < 2; w++) {
		uid[w] = w && geteuid() == 0 ? OTHER_ID : getuid();
		gid[w] = w && geteuid() == 0 ? OTHER_ID : getgid();
		if ((kid[w] = fork()) < 0) {
			perror("mp_passcred: fork");
			return 1;
		}
		if (kid[w] == 0) {
			int to[3] = {pair[0][1], pair[1][1], pair[2][1]};
			for (int k = 0; k < 3; k++)
				close(pair[k][0]);
			if (w && geteuid() == 0) {
				/* an oom_score_adj of its own, then other ids: not
				 * dumpable, its /proc files root's (a restore had to
				 * set the value before giving it its ids) */
				FILE *o = fopen("/proc/self/oom_score_adj", "w");
				if (!o || fprintf(o, "123\n") < 0 || fclose(o) != 0 ||
				    setresgid(OTHER_ID, OTHER_ID, OTHER_ID) < 0 || setresuid(OTHER_ID, OTHER_ID, OTHER_ID) < 0) {
					perror("mp_passcred: oom_score_adj, setresuid");
					_exit(2);
				}
			}
			sender(w, to, n, token, 14 + 5 * w);
		}
	}
	for (int k = 0; k < 3; k++)
		close(pair[k][1]);
	memset(next, 0, sizeof(next));
	nap_ms(400); /* a backlog from here on */
	for (int got = 0; got < 6 * n && !bad;) {
		for (int k = 0; k < 3 && !bad; k++) {
			char m[MSG + 1];
			struct ucred uc;
			int who = -1, i = -1;
			unsigned long long t = 0;
			ssize_t r;

			if (next[k][0] + next[k][1] >= 2 * n)
				continue;
			r = take(pair[k][0], m, &uc);
			m[MSG] = 0;
			if (r != MSG || sscanf(m, "%d %d %llx", &who, &i, &t) != 3 || who < 0 || who > 1) {
				printf("mp_passcred: %s: a malformed message (%zd bytes)\n", kind[k], r);
				bad = 1;
				break;
			}
			if (t != token) {
				printf("mp_passcred: %s: a message with another token: the job started afresh\n", kind[k]);
				bad = 1;
			} else if (i != next[k][who]) {
				printf("mp_passcred: %s: sender %d's message %d came where %d was due\n", kind[k], who, i,
				       next[k][who]);
				bad = 1;
			} else if (uc.pid != kid[who] || uc.uid != uid[who] || uc.gid != gid[who]) {
				printf("mp_passcred: %s: sender %d's message %d came as pid %d uid %d gid %d, not pid %d "
				       "uid %d gid %d\n",
				       kind[k], who, i, (int)uc.pid, (int)uc.uid, (int)uc.gid, (int)kid[who], (int)uid[who],
				       (int)gid[who]);
				bad = 1;
			}
			next[k][who]++;
			got++;
		}
		nap_ms(7);
	}
	for (int w = 0; w < 2; w++) {
		int st = 0;
		while (waitpid(kid[w], &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			printf("mp_passcred: sender %d ended with status %#x\n", w, st);
			bad = 1;
		}
	}
	if (bad)
		return 1;
	printf("mp_passcred: %d messages from each of 2 senders on stream, seqpacket and dgram, each with its "
	       "sender's credentials\n",
	       n);
	return 0;
}
