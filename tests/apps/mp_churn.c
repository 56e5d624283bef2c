/* mp_churn: processes born and ended all the time.
 *
 * State exercised: a parent that keeps forking short-lived children (each
 * computes a little, writes its result into a pipe and exits) and reaps
 * each with waitpid, two at a time, so that checkpoints land while a child
 * is being born, running, exiting, or a zombie not yet reaped. The output
 * is the ordered results and their checksum.
 * Usage: mp_churn [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? atof(s) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t work(uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int i = 0; i < 20000; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

int main(int argc, char **argv)
{
	int n = (int)(300 * app_scale(argc, argv));
	uint64_t sum = 0;

	if (n < 4)
		n = 4;
	printf("mp_churn: %d short-lived children, two at a time\n", n);
	for (int i = 0; i < n; i += 2) {
		int p[2][2], st;
		pid_t kid[2];
		for (int k = 0; k < 2; k++) {
			if (pipe(p[k]) < 0)
				return 1;
			fflush(stdout);
			kid[k] = fork();
			if (kid[k] < 0)
				return 1;
			if (kid[k] == 0) {
				uint64_t r = work((uint64_t)(i + k));
				close(p[k][0]);
				usleep(5000);
				_exit(write(p[k][1], &r, sizeof(r)) == sizeof(r) ? (i + k) % 100 : 101);
			}
			close(p[k][1]);
		}
		for (int k = 0; k < 2; k++) {
			uint64_t r = 0;
			if (read(p[k][0], &r, sizeof(r)) != sizeof(r)) {
				printf("FAIL child %d sent nothing\n", i + k);
				return 1;
			}
			close(p[k][0]);
			usleep(3000); /* the child is a zombie for a while */
			if (waitpid(kid[k], &st, 0) != kid[k] || !WIFEXITED(st) || WEXITSTATUS(st) != (i + k) % 100) {
				printf("FAIL child %d: status %#x\n", i + k, st);
				return 1;
			}
			if (r != work((uint64_t)(i + k))) {
				printf("FAIL child %d: wrong result\n", i + k);
				return 1;
			}
			sum = sum * 31 + r;
		}
		if (i % 50 == 0)
			printf("children %d-%d ok\n", i, i + 1);
	}
	printf("checksum %016llx\n", (unsigned long long)sum);
	return 0;
}
