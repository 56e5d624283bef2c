/* mp_posixshm: POSIX shared memory and a named semaphore between processes.
 *
 * State exercised: a POSIX shared memory object (shm_open + ftruncate, a file
 * in /dev/shm, its descriptor kept open by the parent) mapped MAP_SHARED before
 * three children are forked, so four processes share its pages; one child
 * also opens the object again by name and maps it a second time (two mappings
 * of one object in one process). A named POSIX semaphore (sem_open, unlinked
 * at once as Python's multiprocessing does, so only the mappings keep it)
 * serves as the lock between processes. Children push records into a ring in
 * the shared object and update their own region of it; the parent drains the
 * ring in bursts, so records wait in shared memory at most moments. The
 * parent checks sequence numbers, per-child checksums and the regions against
 * its own arithmetic. The object's name is unique per run and never printed.
 * Usage: mp_posixshm [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3.5 s) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NCH 3
#define RING 64
#define REGION 1024 /* uint64 values per child */
#define SHM_SIZE (256 * 1024)

struct rec {
	uint32_t child, seq;
	uint64_t val;
};

struct area {
	uint32_t head, count; /* the ring, under the semaphore */
	uint64_t pushes;
	struct rec ring[RING];
	uint64_t region[NCH][REGION]; /* child c writes only region[c] */
	uint64_t done[NCH];
	char tag[64];
};

static sem_t *lock;

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

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

static uint64_t value(int c, long seq)
{
	return mix(((uint64_t)c << 40) + (uint64_t)seq * 7919 + 17);
}

static void lock_take(void)
{
	while (sem_wait(lock) != 0)
		if (errno != EINTR)
			_exit(90);
}

static void lock_give(void)
{
	if (sem_post(lock) != 0)
		_exit(91);
}

static void child(int c, struct area *a, const char *name, long count)
{
	if (c == 2) {
		/* A second mapping of the same object, opened by name. */
		int fd = shm_open(name, O_RDWR, 0);
		struct area *b;
		if (fd < 0)
			_exit(20);
		b = mmap(NULL, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (b == MAP_FAILED || b == a || strcmp(b->tag, a->tag) != 0)
			_exit(21);
		b->region[c][0] = 0x1234;
		if (a->region[c][0] != 0x1234)
			_exit(22);
		a = b; /* work through the second mapping from now on */
	}
	for (long s = 0; s < count; s++) {
		struct rec r = { (uint32_t)c, (uint32_t)s, value(c, s) };
		for (;;) {
			lock_take();
			if (a->count < RING)
				break;
			lock_give();
			sleep_ms(2);
		}
		a->ring[(a->head + a->count) % RING] = r;
		a->count++;
		a->pushes++;
		lock_give();
		a->region[c][s % REGION] ^= r.val;
		__atomic_store_n(&a->done[c], (uint64_t)s + 1, __ATOMIC_RELEASE);
		sleep_ms(10);
	}
	_exit(30 + c);
}

int main(int argc, char **argv)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	long count = (long)(320 * app_scale(argc, argv));
	char dir[4096], name[256], sname[300];
	long got[NCH] = { 0 };
	uint64_t sum[NCH] = { 0 };
	struct area *a;
	pid_t pid[NCH];
	struct stat st;
	int fd, rc = 0;

	if (count < 1)
		count = 1;
	snprintf(dir, sizeof(dir), "%s/mp_posixshm.XXXXXX", tmp);
	if (!mkdtemp(dir)) {
		printf("FAIL mkdtemp\n");
		return 1;
	}
	/* Unique per run: the pid and the temporary directory's random suffix. */
	snprintf(name, sizeof(name), "/ckapp-posixshm-%d-%s", (int)getpid(), strrchr(dir, '.') + 1);
	snprintf(sname, sizeof(sname), "%s-sem", name);
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, SHM_SIZE) != 0) {
		printf("FAIL shm_open/ftruncate: %s\n", strerror(errno));
		rmdir(dir);
		return 1;
	}
	a = mmap(NULL, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	lock = sem_open(sname, O_CREAT | O_EXCL, 0600, 1);
	if (a == MAP_FAILED || lock == SEM_FAILED) {
		printf("FAIL mmap/sem_open: %s\n", strerror(errno));
		shm_unlink(name);
		rmdir(dir);
		return 1;
	}
	sem_unlink(sname); /* only the mappings keep the semaphore now */
	snprintf(a->tag, sizeof(a->tag), "mp_posixshm area");

	printf("mp_posixshm: %d children, %ld records each\n", NCH, count);
	fflush(stdout);
	for (int c = 0; c < NCH; c++) {
		pid[c] = fork();
		if (pid[c] < 0) {
			printf("FAIL fork\n");
			return 1;
		}
		if (pid[c] == 0) {
			close(fd);
			child(c, a, name, count);
		}
	}

	/* Drain the ring in bursts. */
	long total = 0, next_report = NCH * count / 4;
	while (total < NCH * count && !rc) {
		struct rec buf[RING];
		uint32_t n;

		sleep_ms(25);
		lock_take();
		n = a->count;
		for (uint32_t k = 0; k < n; k++)
			buf[k] = a->ring[(a->head + k) % RING];
		a->head = (a->head + n) % RING;
		a->count = 0;
		lock_give();
		for (uint32_t k = 0; k < n; k++) {
			struct rec *r = &buf[k];
			if (r->child >= NCH || r->seq != (uint32_t)got[r->child] || r->val != value((int)r->child, r->seq)) {
				printf("FAIL bad record (child %u seq %u)\n", r->child, r->seq);
				rc = 1;
				break;
			}
			got[r->child]++;
			sum[r->child] = mix(sum[r->child] + r->val);
			total++;
			if (total == next_report && total < NCH * count) {
				printf("progress: %ld records\n", total);
				next_report += NCH * count / 4;
			}
		}
	}

	for (int c = 0; c < NCH; c++) {
		int s;
		if (rc)
			kill(pid[c], SIGKILL);
		while (waitpid(pid[c], &s, 0) < 0)
			if (errno != EINTR) {
				printf("FAIL waitpid\n");
				return 1;
			}
		if (!rc && (!WIFEXITED(s) || WEXITSTATUS(s) != 30 + c)) {
			printf("FAIL child %d: status %#x\n", c, s);
			rc = 1;
		}
	}
	/* Every child's region, recomputed. */
	for (int c = 0; c < NCH; c++) {
		uint64_t want[REGION] = { 0 }, h = 0;
		if (c == 2)
			want[0] = 0x1234;
		for (long s = 0; s < count; s++)
			want[s % REGION] ^= value(c, s);
		if (memcmp(want, a->region[c], sizeof(want)) != 0 || a->done[c] != (uint64_t)count) {
			printf("FAIL child %d: region differs\n", c);
			rc = 1;
		}
		for (int k = 0; k < REGION; k++)
			h = mix(h + a->region[c][k]);
		printf("child %d: %ld records, checksum %016llx, region %016llx\n", c, got[c],
		       (unsigned long long)sum[c], (unsigned long long)h);
	}
	printf("ring: %llu pushes, %u left\n", (unsigned long long)a->pushes, a->count);
	if (a->pushes != (uint64_t)(NCH * count) || a->count != 0)
		rc = 1;
	if (fstat(fd, &st) != 0 || st.st_size != SHM_SIZE) {
		printf("FAIL shared object size\n");
		rc = 1;
	}
	if (shm_unlink(name) != 0) {
		printf("FAIL shm_unlink: %s\n", strerror(errno));
		rc = 1;
	}
	if (shm_open(name, O_RDWR, 0) >= 0 || errno != ENOENT) {
		printf("FAIL shared object still there after shm_unlink\n");
		rc = 1;
	}
	close(fd);
	sem_close(lock);
	munmap(a, SHM_SIZE);
	rmdir(dir);
	printf("mp_posixshm: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
