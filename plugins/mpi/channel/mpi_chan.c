/* The shared-memory channel (see mpi_chan.h). A side about to sleep says so
 * in a flag before it checks the word it waits on for the last time; the
 * other side stores the word, then reads the flag, and calls FUTEX_WAKE only
 * when someone may sleep (both sequentially consistent), so a hot channel
 * makes no system call. Sleeps are bounded so that a peer that died without
 * closing is noticed. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "plugins/mpi/channel/mpi_chan.h"

#define SPINS 200 /* polls before sleeping, every other one a sched_yield: on a
                   * machine with fewer cores than processes a pure spin takes
                   * the core the peer needs (measured: 2000 pause-spins 180 us
                   * per round trip, 200 with yields 10-15 us, on 2 loaded cores) */
#define CHECK_PEER_MS 200   /* a sleeper wakes this often to look at its peer */

static long futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

static uint32_t ld(uint32_t *w)
{
	return __atomic_load_n(w, __ATOMIC_SEQ_CST);
}

static void st(uint32_t *w, uint32_t v)
{
	__atomic_store_n(w, v, __ATOMIC_SEQ_CST);
}

static void cpu_relax(void)
{
	__builtin_ia32_pause();
}

static void wake(uint32_t *waiting, uint32_t *word)
{
	if (ld(waiting))
		futex(word, FUTEX_WAKE, 0x7fffffff, NULL);
}

/* Whether PID runs (a zombie does not: its parent may be the one waiting
 * here). Unknown pids (0: the peer did not open yet) count as alive. */
static int pid_alive(pid_t pid)
{
	char path[64], buf[256], *p;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold anything */
	return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

static uint64_t self_pidns(void)
{
	struct stat sb;

	return stat("/proc/self/ns/pid", &sb) ? 0 : (uint64_t)sb.st_ino;
}

int ck_mpi_chan_peer_alive(struct ck_mpi_chan *c, int peer_is_server)
{
	struct ck_mpi_chan_hdr *h = c->h;

	if (peer_is_server && h->server_pid) {
		/* The kernel marks the server's robust lock when it dies,
		 * whichever namespace looks. */
		int rc = pthread_mutex_trylock(&h->server_lock);
		if (rc == EOWNERDEAD || rc == 0) {
			/* not kept: a robust lock held in a mapping that goes
			 * away would leave this thread's robust list dangling */
			pthread_mutex_unlock(&h->server_lock);
			return 0;
		}
		if (rc == ENOTRECOVERABLE)
			return 0;
	}
	if ((peer_is_server ? h->server_pidns : h->client_pidns) != c->pidns)
		return 1; /* not ours to look up */
	return pid_alive(peer_is_server ? h->server_pid : h->client_pid);
}

/* Waits until *WORD != OLD; *WAITING is this side's sleep flag. Returns 0,
 * -ETIMEDOUT after TIMEOUT_MS (-1: none), -EPIPE when the peer left. */
static int wait_change(struct ck_mpi_chan *c, uint32_t *word, uint32_t old, uint32_t *waiting,
		       int peer_is_server, int timeout_ms)
{
	struct timespec ts = { 0, CHECK_PEER_MS * 1000000L };
	long waited_ms = 0;
	int i;

	for (i = 0; i < SPINS; i++) {
		if (ld(word) != old)
			return 0;
		if (i & 1)
			sched_yield();
		else
			cpu_relax();
	}
	for (;;) {
		st(waiting, 1);
		if (ld(word) != old) {
			st(waiting, 0);
			return 0;
		}
		if (ld(&c->h->closed) || !ck_mpi_chan_peer_alive(c, peer_is_server)) {
			st(waiting, 0);
			return ld(word) != old ? 0 : -EPIPE;
		}
		if (timeout_ms >= 0 && waited_ms >= timeout_ms) {
			st(waiting, 0);
			return -ETIMEDOUT;
		}
		if (timeout_ms >= 0 && timeout_ms - waited_ms < CHECK_PEER_MS)
			ts.tv_nsec = (timeout_ms - waited_ms) * 1000000L;
		futex(word, FUTEX_WAIT, old, &ts);
		st(waiting, 0);
		if (ld(word) != old)
			return 0;
		waited_ms += ts.tv_nsec / 1000000L; /* wakes early count as a full slice: bounded anyway */
	}
}

static int map(struct ck_mpi_chan *c, int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	c->h = p;
	c->map_len = len;
	return 0;
}

int ck_mpi_chan_create_world(struct ck_mpi_chan *c, const char *name, size_t arena_len, size_t drain_len,
			     int world_rank, int world_size)
{
	size_t hdr = (sizeof(struct ck_mpi_chan_hdr) + 4095) & ~(size_t)4095;
	int fd, rc;

	memset(c, 0, sizeof(*c));
	if (strlen(name) >= sizeof(c->name) || name[0] != '/')
		return -EINVAL;
	arena_len = (arena_len + 4095) & ~(size_t)4095;
	drain_len = (drain_len + 4095) & ~(size_t)4095;
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = ftruncate(fd, (off_t)(hdr + arena_len + drain_len)) ? -errno : map(c, fd, hdr + arena_len + drain_len);
	close(fd);
	if (rc) {
		shm_unlink(name);
		return rc;
	}
	strcpy(c->name, name);
	c->h->version = CK_MPI_CHAN_VERSION;
	c->h->nslots = CK_MPI_CHAN_SLOTS;
	c->h->size = hdr + arena_len + drain_len;
	c->h->arena_off = hdr;
	c->h->arena_len = arena_len;
	c->h->drain_off = hdr + arena_len;
	c->h->drain_len = drain_len;
	c->h->server_pid = getpid();
	/* before the magic: a restarted client that opens the channel as soon
	 * as it is published checks these (a later store read as world 0) */
	c->h->world_rank = world_rank;
	c->h->world_size = world_size;
	c->pidns = c->h->server_pidns = self_pidns();
	{
		pthread_mutexattr_t a;

		pthread_mutexattr_init(&a);
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
		pthread_mutex_init(&c->h->server_lock, &a);
		pthread_mutexattr_destroy(&a);
		pthread_mutex_lock(&c->h->server_lock); /* until this process ends or closes */
		c->server = 1;
	}
	c->arena = (uint8_t *)c->h + hdr;
	c->drain = c->arena + arena_len;
	c->arena_len = arena_len;
	__atomic_store_n(&c->h->magic, CK_MPI_CHAN_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

int ck_mpi_chan_create(struct ck_mpi_chan *c, const char *name, size_t arena_len, size_t drain_len)
{
	return ck_mpi_chan_create_world(c, name, arena_len, drain_len, 0, 0);
}

int ck_mpi_chan_open(struct ck_mpi_chan *c, const char *name)
{
	struct stat sb;
	int fd, rc;

	memset(c, 0, sizeof(*c));
	if (strlen(name) >= sizeof(c->name))
		return -EINVAL;
	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = fstat(fd, &sb) ? -errno : 0;
	if (!rc && (size_t)sb.st_size < sizeof(struct ck_mpi_chan_hdr))
		rc = -EPROTO;
	if (!rc)
		rc = map(c, fd, (size_t)sb.st_size);
	close(fd);
	if (rc)
		return rc;
	if (__atomic_load_n(&c->h->magic, __ATOMIC_ACQUIRE) != CK_MPI_CHAN_MAGIC ||
	    c->h->version != CK_MPI_CHAN_VERSION || c->h->nslots != CK_MPI_CHAN_SLOTS ||
	    c->h->size != (uint64_t)sb.st_size || c->h->arena_off + c->h->arena_len > c->h->size ||
	    c->h->drain_off + c->h->drain_len > c->h->size) {
		munmap(c->h, c->map_len);
		c->h = NULL;
		return -EPROTO;
	}
	strcpy(c->name, name);
	c->arena = (uint8_t *)c->h + c->h->arena_off;
	c->drain = (uint8_t *)c->h + c->h->drain_off;
	c->arena_len = c->h->arena_len;
	c->h->client_pid = getpid();
	c->pidns = c->h->client_pidns = self_pidns();
	return 0;
}

void ck_mpi_chan_forget(struct ck_mpi_chan *c)
{
	if (!c->h)
		return;
	if (c->server)
		pthread_mutex_unlock(&c->h->server_lock); /* off this thread's robust list before the unmap */
	munmap(c->h, c->map_len);
	c->h = NULL;
}

void ck_mpi_chan_close(struct ck_mpi_chan *c)
{
	if (!c->h)
		return;
	if (c->server)
		pthread_mutex_unlock(&c->h->server_lock);
	st(&c->h->closed, 1);
	futex(&c->h->req_bell, FUTEX_WAKE, 0x7fffffff, NULL);
	for (unsigned i = 0; i < CK_MPI_CHAN_SLOTS; i++)
		futex(&c->h->slots[i].state, FUTEX_WAKE, 0x7fffffff, NULL);
	munmap(c->h, c->map_len);
	c->h = NULL;
}

int ck_mpi_chan_in_use(const char *name)
{
	struct ck_mpi_chan_hdr *h;
	struct stat sb;
	int fd, rc, live = 0;

	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (fstat(fd, &sb) || (size_t)sb.st_size < sizeof(*h)) {
		close(fd);
		return 0;
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED)
		return 0;
	if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == CK_MPI_CHAN_MAGIC && h->version == CK_MPI_CHAN_VERSION) {
		rc = pthread_mutex_trylock(&h->server_lock);
		live = rc == EBUSY;
		if (rc == 0 || rc == EOWNERDEAD)
			pthread_mutex_unlock(&h->server_lock);
	}
	munmap(h, sizeof(*h));
	return live;
}

int ck_mpi_chan_unlink(const char *name)
{
	return shm_unlink(name) ? -errno : 0;
}

struct ck_mpi_req *ck_mpi_chan_slot(struct ck_mpi_chan *c)
{
	struct ck_mpi_req *r = &c->h->slots[c->h->head % CK_MPI_CHAN_SLOTS];

	/* A full ring: the oldest request is still being served. */
	if (ld(&r->state) == CK_SLOT_POSTED &&
	    wait_change(c, &r->state, CK_SLOT_POSTED, &c->h->client_waiting, 1, -1))
		return NULL;
	if (ld(&r->state) != CK_SLOT_FREE)
		return NULL; /* answered but never released: the caller's bug */
	memset((char *)r + sizeof(r->state), 0, offsetof(struct ck_mpi_req, inl) - sizeof(r->state));
	return r;
}

void ck_mpi_chan_post(struct ck_mpi_chan *c, struct ck_mpi_req *r)
{
	r->seq = c->h->head++;
	st(&r->state, CK_SLOT_POSTED);
	__atomic_add_fetch(&c->h->req_bell, 1, __ATOMIC_SEQ_CST);
	wake(&c->h->server_waiting, &c->h->req_bell);
}

int ck_mpi_chan_wait(struct ck_mpi_chan *c, struct ck_mpi_req *r)
{
	while (ld(&r->state) == CK_SLOT_POSTED)
		if (wait_change(c, &r->state, CK_SLOT_POSTED, &c->h->client_waiting, 1, -1))
			return ld(&r->state) == CK_SLOT_DONE ? 0 : -EPIPE;
	return 0;
}

void ck_mpi_chan_release(struct ck_mpi_chan *c, struct ck_mpi_req *r)
{
	(void)c;
	st(&r->state, CK_SLOT_FREE);
}

int ck_mpi_chan_next(struct ck_mpi_chan *c, struct ck_mpi_req **out, int timeout_ms)
{
	struct ck_mpi_req *r = &c->h->slots[c->h->tail % CK_MPI_CHAN_SLOTS];
	uint32_t bell;
	int rc;

	for (;;) {
		bell = ld(&c->h->req_bell);
		if (ld(&r->state) == CK_SLOT_POSTED) {
			c->h->tail++;
			*out = r;
			return 0;
		}
		rc = wait_change(c, &c->h->req_bell, bell, &c->h->server_waiting, 0, timeout_ms);
		if (rc && ld(&r->state) != CK_SLOT_POSTED)
			return rc;
	}
}

void ck_mpi_chan_done(struct ck_mpi_chan *c, struct ck_mpi_req *r)
{
	st(&r->state, CK_SLOT_DONE);
	wake(&c->h->client_waiting, &r->state);
}

uint32_t ck_mpi_chan_ld(uint32_t *w)
{
	return ld(w);
}

void ck_mpi_chan_st_wake(uint32_t *w, uint32_t v)
{
	st(w, v);
	futex(w, FUTEX_WAKE, 0x7fffffff, NULL);
}

int ck_mpi_chan_wait_word(uint32_t *w, uint32_t old, int timeout_ms)
{
	struct timespec t0, now, ts;
	long left;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (ld(w) == old) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (timeout_ms >= 0 && left <= 0)
			return -ETIMEDOUT;
		if (timeout_ms < 0 || left > CHECK_PEER_MS)
			left = CHECK_PEER_MS;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000L;
		futex(w, FUTEX_WAIT, old, &ts);
	}
	return 0;
}

/* The pages of [src, src+len) that hold anything, copied to dst (a fresh
 * object reads as zeros: untouched arena pages cost nothing). */
static void copy_used(uint8_t *dst, const uint8_t *src, size_t len)
{
	static const uint8_t zero[4096];

	for (size_t o = 0; o < len; o += 4096) {
		size_t n = len - o < 4096 ? len - o : 4096;
		if (memcmp(src + o, zero, n))
			memcpy(dst + o, src + o, n);
	}
}

int ck_mpi_chan_adopt(struct ck_mpi_chan *c, const char *name, int timeout_ms)
{
	struct ck_mpi_chan_hdr *o = c->h, *n;
	struct ck_mpi_chan nc;
	int rc, waited = 0;
	char nm[sizeof(c->name)];
	void *at;

	snprintf(nm, sizeof(nm), "%s", name); /* may be c->name */
	name = nm;

	for (;;) {
		rc = ck_mpi_chan_open(&nc, name);
		if (rc != -ENOENT && rc != -EPROTO)
			break;
		if (waited >= timeout_ms)
			return rc;
		usleep(20000);
		waited += 20;
	}
	if (rc)
		return rc;
	if (nc.h->world_size != o->world_size || nc.h->world_rank != o->world_rank) {
		munmap(nc.h, nc.map_len);
		return -EXDEV;
	}
	if (nc.map_len != c->map_len || nc.h->arena_off != o->arena_off || nc.h->drain_off != o->drain_off) {
		munmap(nc.h, nc.map_len);
		return -EMSGSIZE;
	}
	n = nc.h;
	n->head = o->head;
	n->tail = o->tail;
	n->req_bell = o->req_bell;
	memcpy(n->slots, o->slots, sizeof(n->slots));
	n->cut_req = n->cut_done = n->cut_release = o->cut_done; /* any cut of the old one is over */
	n->log_n = o->log_n;
	n->log_full = o->log_full;
	memcpy(n->log, o->log, sizeof(n->log));
	n->drain_used = o->drain_used;
	n->ndrained = o->ndrained;
	memcpy(n->drained, o->drained, sizeof(n->drained));
	memcpy(n->preq, o->preq, sizeof(n->preq));
	/* the arena and the drain area */
	copy_used((uint8_t *)n + n->arena_off, (const uint8_t *)o + o->arena_off, o->size - o->arena_off);
	/* The same address: the program's threads hold pointers into it. */
	at = mremap(nc.h, nc.map_len, c->map_len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)o);
	if (at == MAP_FAILED) {
		rc = -errno;
		munmap(nc.h, nc.map_len);
		return rc;
	}
	snprintf(c->name, sizeof(c->name), "%s", name);
	c->pidns = c->h->client_pidns = nc.pidns;
	c->h->client_pid = getpid();
	ck_mpi_chan_st_wake(&c->h->adopted, 1);
	return 0;
}

int ck_mpi_chan_wait_adopted(struct ck_mpi_chan *c, int timeout_ms)
{
	return ck_mpi_chan_wait_word(&c->h->adopted, 0, timeout_ms);
}

void ck_mpi_chan_rewind(struct ck_mpi_chan *c)
{
	struct ck_mpi_req *r;

	if (!c->h->tail)
		return;
	r = &c->h->slots[(c->h->tail - 1) % CK_MPI_CHAN_SLOTS];
	if (ld(&r->state) == CK_SLOT_POSTED && r->seq == c->h->tail - 1)
		c->h->tail--;
}
