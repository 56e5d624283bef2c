/* privs: who the job is and what it may do, as seen from inside.
 *
 * State exercised: the job's credentials and privileges. At the start and
 * at the end (after any restore) every thread prints its user and group
 * ids (real, effective, saved, filesystem), its supplementary groups, its
 * five capability sets and no_new_privs, as /proc/thread-self/status shows
 * them; and the main thread tries what needs a privilege over the initial
 * namespaces, which a user namespace never gives, even to its root: a raw
 * socket (CAP_NET_RAW), SO_MARK (CAP_NET_ADMIN), raising its own priority
 * (CAP_SYS_NICE), reading /proc/self/map_files (CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE). In between, the threads work (short sleeps and
 * a checksum); at the end each checks that its TID is the one it had
 * (threads started and ended first leave gaps in the TIDs: a restore that
 * took whatever TIDs came next would not give the same ones by chance). Under ckrun the job must print what a bare run prints: as
 * root, all of it works, as bare; as a user none of it, and a restored
 * thread has its own credentials back and none of the capabilities the
 * restore used.
 * Usage: privs [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 3

static long rounds;

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

/* The credential lines of the calling thread's status, in file order. */
static void creds(char *out, size_t len)
{
	static const char *keys[] = {"Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:", "CapEff:", "CapBnd:",
				     "CapAmb:", "NoNewPrivs:", NULL};
	char buf[8192];
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	size_t at = 0;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	out[0] = 0;
	char *save = NULL;

	/* strtok_r: every thread reads its status at once (strtok's one
	 * shared position lost lines in a bare run) */
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		for (int k = 0; keys[k]; k++)
			if (!strncmp(line, keys[k], strlen(keys[k])) && at < len)
				at += (size_t)snprintf(out + at, len - at, "  %s\n", line);
}

static const char *result(int ok)
{
	static char e[64];

	if (ok)
		return "allowed";
	snprintf(e, sizeof(e), "refused (%s)", errno == EPERM ? "EPERM" : errno == EACCES ? "EACCES" : strerror(errno));
	return e;
}

/* What only the initial namespaces' privileges allow. */
static void probes(const char *when)
{
	int fd, one = 1, ok, prio;
	char maps[256], link[64], target[512];
	FILE *f;

	fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
	printf("%s: raw socket: %s\n", when, result(fd >= 0));
	if (fd >= 0)
		close(fd);
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_MARK, &one, sizeof(one)) == 0;
	printf("%s: SO_MARK: %s\n", when, result(ok));
	if (fd >= 0)
		close(fd);
	errno = 0;
	prio = getpriority(PRIO_PROCESS, 0);
	ok = prio > -20 && setpriority(PRIO_PROCESS, 0, prio - 1) == 0;
	printf("%s: raise own priority: %s\n", when, result(ok));
	if (ok)
		setpriority(PRIO_PROCESS, 0, prio);
	ok = 0;
	if ((f = fopen("/proc/self/maps", "re")) && fgets(maps, sizeof(maps), f)) {
		char *sp = strchr(maps, ' ');
		if (sp)
			*sp = 0;
		snprintf(link, sizeof(link), "/proc/self/map_files/%.40s", maps);
		ok = readlink(link, target, sizeof(target)) > 0;
	}
	printf("%s: read /proc/self/map_files: %s\n", when, result(ok));
	if (f)
		fclose(f);
}

struct worker {
	pthread_t t;
	pid_t tid;
	long n;
	uint64_t sum;
	char start[1024], end[1024];
};
static struct worker w[NTHREADS + 1];
static pthread_barrier_t started;

static void work(struct worker *me)
{
	struct timespec ts = {0, 10 * 1000 * 1000};

	for (long i = 0; i < rounds; i++) {
		for (int k = 0; k < 1000; k++)
			me->sum = me->sum * 6364136223846793005ull + 1442695040888963407ull + (uint64_t)i;
		me->n++;
		nanosleep(&ts, NULL);
	}
}

static void *nothing(void *arg)
{
	return arg;
}

static void *thread_main(void *arg)
{
	struct worker *me = arg;

	me->tid = gettid();
	creds(me->start, sizeof(me->start));
	pthread_barrier_wait(&started);
	work(me);
	creds(me->end, sizeof(me->end));
	if (gettid() != me->tid)
		me->tid = -1;
	return NULL;
}

int main(int argc, char **argv)
{
	int fails = 0;

	rounds = (long)(300 * app_scale(argc, argv));
	if (rounds < 1)
		rounds = 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("privs: %d threads + main, %ld rounds\n", NTHREADS, rounds);
	probes("start");
	w[0].tid = gettid();
	creds(w[0].start, sizeof(w[0].start));
	pthread_barrier_init(&started, NULL, NTHREADS + 1);
	for (int i = 1; i <= NTHREADS; i++) {
		for (int k = 0; k < 3; k++) { /* a gap before each worker's TID */
			pthread_t t;
			pthread_create(&t, NULL, nothing, NULL);
			pthread_join(t, NULL);
		}
		pthread_create(&w[i].t, NULL, thread_main, &w[i]);
	}
	pthread_barrier_wait(&started);
	for (int i = 0; i <= NTHREADS; i++)
		printf("thread %d at start:\n%s", i, w[i].start);
	work(&w[0]);
	for (int i = 1; i <= NTHREADS; i++)
		pthread_join(w[i].t, NULL);
	creds(w[0].end, sizeof(w[0].end));
	if (gettid() != w[0].tid)
		w[0].tid = -1;
	probes("end");
	for (int i = 0; i <= NTHREADS; i++) {
		printf("thread %d at end:\n%s", i, w[i].end);
		printf("thread %d: %ld rounds, sum %016llx\n", i, w[i].n, (unsigned long long)w[i].sum);
		if (strcmp(w[i].start, w[i].end)) {
			printf("FAIL thread %d: its credentials changed\n", i);
			fails++;
		}
		if (w[i].tid < 0) {
			printf("FAIL thread %d: its TID changed\n", i);
			fails++;
		}
	}
	printf("privs: %s\n", fails ? "FAIL" : "ok");
	return fails ? 1 : 0;
}
