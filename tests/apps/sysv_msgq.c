/* sysv_msgq: System V message queues come back with their ids, keys, size
 * limits, modes and the messages still queued, in order, with their types.
 *
 * State exercised: a private queue that always holds the last five
 * messages sent (each step sends one, of type 1-3, and takes the oldest,
 * whatever its type), and a keyed queue with a lowered size limit, mode
 * 0640 and two messages of different types, taken by type at the end, and
 * a queue whose limit was lowered to 200 bytes below the 400 it holds (a
 * restore that set the limit before sending them could not send them),
 * and one filled to its default limit, 16384 bytes in 64 messages (one
 * that counted the image's 16 bytes a message asked for more, which only
 * root may give).
 * Each step checks the taken message, the counts, limits, modes and that
 * the key still names the same id.
 * Usage: sysv_msgq [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <time.h>
#include <unistd.h>

#define BACKLOG 5

struct msg {
	long type;
	char text[128];
};

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *what, long step)
{
	printf("FAIL %s at step %ld (%s)\n", what, step, strerror(errno));
	fflush(stdout);
	return 1;
}

static int put(int q, long type, const char *text)
{
	struct msg m = {type, {0}};

	snprintf(m.text, sizeof(m.text), "%s", text);
	return msgsnd(q, &m, strlen(m.text) + 1, IPC_NOWAIT);
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	key_t key = (key_t)(0x5eed0000 | (getpid() & 0xffff)); /* a bare run shares the host's namespace */
	int q = msgget(IPC_PRIVATE, IPC_CREAT | 0600), kq = msgget(key, IPC_CREAT | IPC_EXCL | 0600), rc = 0;
	int full = msgget(IPC_PRIVATE, IPC_CREAT | 0600), brim = msgget(IPC_PRIVATE, IPC_CREAT | 0600);
	char hundred[101];
	int brim_n;
	msglen_t brim_limit = 0;
	struct {
		long type;
		char text[256];
	} big = {1, {0}};
	struct msqid_ds ds;
	struct msg m;
	char want[64];

	i = 0;
	if (q < 0 || kq < 0)
		rc = fail("msgget", 0);
	else if (msgctl(kq, IPC_STAT, &ds) < 0)
		rc = fail("IPC_STAT", 0);
	ds.msg_qbytes = 4000;
	ds.msg_perm.mode = 0640;
	if (!rc && (msgctl(kq, IPC_SET, &ds) < 0 || put(kq, 7, "seven") < 0 || put(kq, 3, "three") < 0))
		rc = fail("keyed queue setup", 0);
	memset(hundred, 'h', 99);
	hundred[99] = 0; /* 100 bytes with its NUL */
	for (int k = 0; !rc && k < 4; k++)
		if (full < 0 || put(full, k + 1, hundred) < 0)
			rc = fail("full queue setup", 0);
	if (!rc && (msgctl(full, IPC_STAT, &ds) < 0 || (ds.msg_qbytes = 200, msgctl(full, IPC_SET, &ds) < 0)))
		rc = fail("lowering the full queue's limit", 0);
	/* a bare run has the host's default limit: at most 16384 here, the
	 * default of the job's own namespace (lowering needs no privilege) */
	if (!rc && (brim < 0 || msgctl(brim, IPC_STAT, &ds) < 0 ||
		    (ds.msg_qbytes > 16384 && (ds.msg_qbytes = 16384, msgctl(brim, IPC_SET, &ds) < 0))))
		rc = fail("a limit of 16384", 0);
	brim_limit = ds.msg_qbytes;
	brim_n = rc ? 0 : (int)(brim_limit / sizeof(big.text));
	for (int k = 0; !rc && k < brim_n; k++) {
		memset(big.text, 'a' + k % 26, sizeof(big.text));
		if (msgsnd(brim, &big, sizeof(big.text), IPC_NOWAIT) < 0)
			rc = fail("filling a queue to its limit", 0);
	}
	for (; i < steps && !rc; i++) {
		struct timespec nap = {0, 50000000};
		ssize_t n;

		snprintf(want, sizeof(want), "message %ld", i);
		if (put(q, i % 3 + 1, want) < 0) {
			rc = fail("msgsnd", i);
			break;
		}
		if (i >= BACKLOG) {
			snprintf(want, sizeof(want), "message %ld", i - BACKLOG);
			n = msgrcv(q, &m, sizeof(m.text), 0, IPC_NOWAIT);
			if (n < 0 || (size_t)n != strlen(want) + 1 || strcmp(m.text, want) ||
			    m.type != (i - BACKLOG) % 3 + 1) {
				rc = fail("the oldest message, its bytes and type", i);
				break;
			}
		}
		if (msgctl(q, IPC_STAT, &ds) < 0 || ds.msg_qnum != (msgqnum_t)(i < BACKLOG ? i + 1 : BACKLOG))
			rc = fail("the private queue's message count", i);
		else if (msgget(key, 0) != kq)
			rc = fail("the key names the same queue", i);
		else if (msgctl(kq, IPC_STAT, &ds) < 0 || ds.msg_qnum != 2 || ds.msg_qbytes != 4000 ||
			 (ds.msg_perm.mode & 0777) != 0640)
			rc = fail("the keyed queue's count, size limit or mode", i);
		else if (msgctl(full, IPC_STAT, &ds) < 0 || ds.msg_qnum != 4 || ds.msg_qbytes != 200)
			rc = fail("the full queue's count or lowered limit", i);
		else if (msgctl(brim, IPC_STAT, &ds) < 0 || ds.msg_qnum != (msgqnum_t)brim_n ||
			 ds.msg_qbytes != brim_limit)
			rc = fail("the queue filled to its limit", i);
		nanosleep(&nap, NULL);
	}
	/* the keyed queue's two, by type */
	if (!rc && (msgrcv(kq, &m, sizeof(m.text), 3, IPC_NOWAIT) < 0 || strcmp(m.text, "three") ||
		    msgrcv(kq, &m, sizeof(m.text), 7, IPC_NOWAIT) < 0 || strcmp(m.text, "seven")))
		rc = fail("the keyed queue's messages by type", i);
	for (int k = 0; !rc && k < 4; k++)
		if (msgrcv(full, &m, sizeof(m.text), 0, IPC_NOWAIT) != 100 || m.type != k + 1 || strcmp(m.text, hundred))
			rc = fail("the full queue's messages", i);
	for (int k = 0; !rc && k < brim_n; k++)
		if (msgrcv(brim, &big, sizeof(big.text), 0, IPC_NOWAIT) != (ssize_t)sizeof(big.text) ||
		    big.text[0] != 'a' + k % 26 || big.text[255] != 'a' + k % 26)
			rc = fail("the messages of the queue filled to its limit", i);
	msgctl(q, IPC_RMID, NULL);
	msgctl(kq, IPC_RMID, NULL);
	msgctl(full, IPC_RMID, NULL);
	msgctl(brim, IPC_RMID, NULL);
	if (!rc)
		printf("sysv_msgq: %ld steps, every message back in order with its type\n", i);
	return rc;
}
