/* shm_many: many shared memory objects, each mapped without a descriptor.
 *
 * State exercised: 200 shared anonymous mappings (each its own object) and
 * 20 deleted files of /dev/shm mapped shared and closed, in a parent and
 * the child it forks. Each step the parent writes the step into every
 * mapping and sends the child a byte through a pipe; the child checks
 * every mapping (the parent may be a step on) and answers. A restore hands
 * each such object to the process's restorer as a descriptor: a build
 * that took at most 96 of them committed checkpoints of this program it
 * could not restore ("maps more than 96 shared memory objects").
 * Usage: shm_many [SCALE [NANON]]   (SCALE or CKPT_APP_SCALE; 1.0 = about
 * 3 s; NANON shared anonymous mappings, 200 unless given, at most 900) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NANON_MAX 900
#define NFILE 20

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static int fail(const char *who, const char *what, long step)
{
	printf("FAIL %s: %s at step %ld (errno %d)\n", who, what, step, errno);
	fflush(stdout);
	return 1;
}

int main(int argc, char **argv)
{
	long steps = (long)(60 * app_scale(argc, argv)), i;
	struct timespec nap = {0, 50 * 1000 * 1000};
	static volatile long *m[NANON_MAX + NFILE];
	int to[2], back[2], st = 0, rc = 0, NANON = argc > 2 ? atoi(argv[2]) : 200, N = NANON + NFILE;
	pid_t kid;

	if (NANON < 0 || NANON > NANON_MAX) {
		fprintf(stderr, "usage: shm_many [SCALE [NANON]] (NANON at most %d)\n", NANON_MAX);
		return 2;
	}

	for (int k = 0; k < N; k++) {
		void *a;
		if (k < NANON) {
			a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		} else {
			char name[64];
			int fd;
			snprintf(name, sizeof(name), "/dev/shm/shm_many.%d.%d", (int)getpid(), k);
			fd = open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
			if (fd < 0 || ftruncate(fd, 4096) < 0 || unlink(name) < 0)
				return fail("main", "a /dev/shm file", -1);
			a = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			close(fd);
		}
		if (a == MAP_FAILED)
			return fail("main", "mmap", -1);
		m[k] = a;
		*m[k] = -1;
	}
	if (pipe(to) < 0 || pipe(back) < 0)
		return fail("main", "pipe", -1);
	kid = fork();
	if (kid < 0)
		return fail("main", "fork", -1);
	if (kid == 0) {
		close(to[1]);
		close(back[0]);
		for (i = 0; i < steps; i++) {
			char c;
			if (read(to[0], &c, 1) != 1)
				_exit(fail("child", "the pipe", i));
			for (int k = 0; k < N; k++)
				if (*m[k] != i)
					_exit(fail("child", "a shared mapping", i));
			if (write(back[1], &c, 1) != 1)
				_exit(fail("child", "the answer", i));
		}
		_exit(0);
	}
	close(to[0]);
	close(back[1]);
	for (i = 0; i < steps && !rc; i++) {
		char c = 'x';
		for (int k = 0; k < N; k++)
			*m[k] = i;
		if (write(to[1], &c, 1) != 1 || read(back[0], &c, 1) != 1)
			rc = fail("parent", "the child's answer", i);
		nanosleep(&nap, NULL);
	}
	close(to[1]);
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st))
		rc = rc ? rc : fail("parent", "the child failed", i);
	if (!rc)
		printf("shm_many: %ld steps, %d shared anonymous mappings and %d deleted /dev/shm files shared with a child\n",
		       i, NANON, NFILE);
	return rc;
}
