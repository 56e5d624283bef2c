/* sysv_nattch: watches a System V segment's attachment count.
 *
 * State exercised: a process with one System V attachment and a 48 MiB heap
 * of incompressible data (writing its image takes a while) and a child
 * holding a second attachment. Both check shm_nattch (IPC_STAT) every few
 * milliseconds: it must read 2 throughout, whatever a checkpointer does
 * beside the job (a copy-on-write snapshot that kept the attachment while
 * the image is written would count). At the end the heap's checksum, the
 * segment's contents and the number of odd readings are printed.
 * Usage: sysv_nattch [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAP (48u << 20)
#define SEG (64u << 10)

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void sleep_ms(long ms)
{
	struct timespec req = { ms / 1000, (ms % 1000) * 1000000 }, rem;

	while (nanosleep(&req, &rem) == -1 && errno == EINTR)
		req = rem;
}

/* Checks the count `steps` times, 5 ms apart; returns the odd readings. */
static long watch(int id, long steps, volatile uint64_t *seg, int who)
{
	long odd = 0;

	for (long s = 0; s < steps; s++) {
		struct shmid_ds ds;

		if (shmctl(id, IPC_STAT, &ds) < 0) {
			perror("shmctl(IPC_STAT)");
			exit(1);
		}
		if (ds.shm_nattch != 2)
			odd++;
		seg[who * 64] += (uint64_t)s;
		sleep_ms(5);
	}
	return odd;
}

int main(int argc, char **argv)
{
	long steps = (long)(600 * app_scale(argc, argv));
	uint64_t *heap, x = 0x9e3779b97f4a7c15ULL, sum = 0;
	volatile uint64_t *seg;
	long odd_parent, odd_child = -1;
	int id, st;
	pid_t pid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	id = shmget(IPC_PRIVATE, SEG, IPC_CREAT | 0600);
	if (id < 0 || (seg = shmat(id, NULL, 0)) == (void *)-1) {
		perror("shmget/shmat");
		return 1;
	}
	heap = malloc(HEAP);
	if (!heap)
		return 1;
	for (size_t i = 0; i < HEAP / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		heap[i] = x;
	}
	/* the child inherits the attachment: two from here on */
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		long odd = watch(id, steps, seg, 1);
		seg[128] = (uint64_t)odd + 1;
		while (!seg[192]) /* nobody detaches before both are done */
			sleep_ms(1);
		_exit(0);
	}
	odd_parent = watch(id, steps, seg, 0);
	while (!seg[128])
		sleep_ms(1);
	seg[192] = 1;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "child failed\n");
		return 1;
	}
	odd_child = (long)seg[128] - 1;
	for (size_t i = 0; i < HEAP / 8; i += 4099)
		sum += heap[i] * (i | 1);
	printf("heap checksum %016llx\n", (unsigned long long)sum);
	printf("segment: %llu %llu\n", (unsigned long long)seg[0], (unsigned long long)seg[64]);
	printf("odd attachment counts: parent %ld, child %ld\n", odd_parent, odd_child);
	shmdt((const void *)seg);
	shmctl(id, IPC_RMID, NULL);
	printf("sysv_nattch: %s\n", odd_parent || odd_child ? "FAIL" : "ok");
	return odd_parent || odd_child ? 1 : 0;
}
