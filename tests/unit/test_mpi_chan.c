/* The MPI channel (plugins/mpi/channel): names and foreign objects refused,
 * requests answered in order across many ring wraps with several in
 * flight, arena data both ways, a server's timeout, and each side noticing
 * the other gone (closed, or killed without closing). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/mpi/channel/mpi_chan.h"
#include "tests/unit/unit.h"

#define ROUNDS 5000
#define BURST 5

static char name[64];

/* Server: answers each request with rc = seq, rlen = sum of its arena
 * bytes, and the bytes negated in place; stops when the client closes. */
static int serve(struct ck_mpi_chan *c)
{
	struct ck_mpi_req *r;
	uint64_t n = 0;
	int rc;

	while ((rc = ck_mpi_chan_next(c, &r, 10000)) == 0) {
		uint64_t sum = 0;

		if (r->seq != n++ || r->off + r->len > c->arena_len)
			return 2;
		for (uint64_t i = 0; i < r->len; i++) {
			sum += c->arena[r->off + i];
			c->arena[r->off + i] = (uint8_t)-c->arena[r->off + i];
		}
		r->rc = (int)r->seq;
		r->rlen = sum;
		memcpy(r->inl, "pong", 5);
		ck_mpi_chan_done(c, r);
	}
	return rc == -EPIPE && n == ROUNDS * BURST ? 0 : 3;
}

static void test_refusals(void)
{
	struct ck_mpi_chan c;
	int fd;

	CHECK_EQ_INT(ck_mpi_chan_create(&c, "no-slash", 4096, 0), -EINVAL);
	CHECK_EQ_INT(ck_mpi_chan_open(&c, name), -ENOENT);
	/* An object of the right size that is not a channel. */
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0);
	CHECK_EQ_INT(ftruncate(fd, 1 << 20), 0);
	close(fd);
	CHECK_EQ_INT(ck_mpi_chan_open(&c, name), -EPROTO);
	CHECK_EQ_INT(ck_mpi_chan_create(&c, name, 4096, 0), -EEXIST);
	CHECK_EQ_INT(ck_mpi_chan_unlink(name), 0);
}

static void test_traffic(void)
{
	struct ck_mpi_chan s, c;
	struct ck_mpi_req *r[BURST];
	int ws = 0, bad = 0;
	pid_t pid;

	CHECK_EQ_INT(ck_mpi_chan_create(&s, name, 1 << 16, 0), 0);
	CHECK_EQ_INT(s.arena_len, 1 << 16);
	pid = fork();
	if (pid == 0)
		_exit(serve(&s));
	s.h->server_pid = pid; /* the child serves; this process keeps the lock that says a server lives */
	CHECK_EQ_INT(ck_mpi_chan_open(&c, name), 0);
	CHECK_EQ_INT(ck_mpi_chan_unlink(name), 0);
	for (int round = 0; round < ROUNDS && !bad; round++) {
		for (int k = 0; k < BURST; k++) {
			uint64_t off = (uint64_t)k * 1000;

			r[k] = ck_mpi_chan_slot(&c);
			if (!r[k]) {
				bad = 1;
				break;
			}
			r[k]->off = off;
			r[k]->len = 1 + (uint64_t)(round + k) % 999;
			for (uint64_t i = 0; i < r[k]->len; i++)
				c.arena[off + i] = (uint8_t)(i + (uint64_t)round);
			ck_mpi_chan_post(&c, r[k]);
		}
		for (int k = 0; k < BURST && !bad; k++) {
			uint64_t sum = 0;

			if (ck_mpi_chan_wait(&c, r[k])) {
				bad = 2;
				break;
			}
			for (uint64_t i = 0; i < r[k]->len; i++) {
				sum += (uint8_t)(i + (uint64_t)round);
				if (c.arena[r[k]->off + i] != (uint8_t)-(uint8_t)(i + (uint64_t)round))
					bad = 3;
			}
			if (r[k]->rc != round * BURST + k || r[k]->rlen != sum || strcmp((char *)r[k]->inl, "pong"))
				bad = 4;
			ck_mpi_chan_release(&c, r[k]);
		}
	}
	CHECK_EQ_INT(bad, 0);
	ck_mpi_chan_close(&c);
	CHECK_EQ_INT(waitpid(pid, &ws, 0), pid);
	CHECK(WIFEXITED(ws));
	CHECK_EQ_INT(WEXITSTATUS(ws), 0);
	ck_mpi_chan_forget(&s);
}

/* A server that times out, then a client that dies without closing, then a
 * server that dies while the client waits. */
static void test_peers_gone(void)
{
	struct ck_mpi_chan s, c;
	struct ck_mpi_req *r;
	int ws;
	pid_t pid;

	CHECK_EQ_INT(ck_mpi_chan_create(&s, name, 4096, 0), 0);
	CHECK_EQ_INT(ck_mpi_chan_next(&s, &r, 50), -ETIMEDOUT);
	pid = fork();
	if (pid == 0) {
		struct ck_mpi_chan cc;

		_exit(ck_mpi_chan_open(&cc, name) ? 1 : 0); /* no close */
	}
	CHECK_EQ_INT(waitpid(pid, &ws, 0), pid);
	CHECK_EQ_INT(ck_mpi_chan_next(&s, &r, 5000), -EPIPE);
	ck_mpi_chan_close(&s);
	CHECK_EQ_INT(ck_mpi_chan_unlink(name), 0);

	/* The server (a child, never reaped while we wait) is killed. */
	CHECK_EQ_INT(ck_mpi_chan_create(&s, name, 4096, 0), 0);
	pid = fork();
	if (pid == 0) {
		ck_mpi_chan_next(&s, &r, 10000);
		pause(); /* takes the request and never answers */
		_exit(0);
	}
	s.h->server_pid = pid; /* the child serves, not this process */
	CHECK_EQ_INT(ck_mpi_chan_open(&c, name), 0);
	ck_mpi_chan_unlink(name);
	r = ck_mpi_chan_slot(&c);
	CHECK(r != NULL);
	if (r) {
		ck_mpi_chan_post(&c, r);
		usleep(100000);
		kill(pid, SIGKILL);
		CHECK_EQ_INT(ck_mpi_chan_wait(&c, r), -EPIPE);
	}
	waitpid(pid, &ws, 0);
	ck_mpi_chan_close(&c);
	ck_mpi_chan_forget(&s);
}

/* A restarted client moves its channel's contents into a new server's
 * channel, at the same address: the request the old server took and never
 * answered is served by the new one, the arena, the drain area, the log of
 * communicators and the cut's numbers come along; another size is refused,
 * a channel that never comes times out. */
static void test_adopt(void)
{
	struct ck_mpi_chan a, b, c, d;
	struct ck_mpi_req *r1, *r2, *x = NULL;
	char n2[80], n3[80];
	void *at;

	snprintf(n2, sizeof(n2), "%s-new", name);
	snprintf(n3, sizeof(n3), "%s-other", name);
	CHECK_EQ_INT(ck_mpi_chan_create(&a, name, 1 << 16, 8192), 0);
	CHECK_EQ_INT(ck_mpi_chan_open(&c, name), 0);
	CHECK(c.drain == c.arena + (1 << 16));
	r1 = ck_mpi_chan_slot(&c);
	CHECK(r1 != NULL);
	if (!r1)
		return;
	r1->op = 7;
	ck_mpi_chan_post(&c, r1);
	r2 = ck_mpi_chan_slot(&c);
	CHECK(r2 != NULL);
	if (!r2)
		return;
	r2->op = 8;
	ck_mpi_chan_post(&c, r2);
	CHECK_EQ_INT(ck_mpi_chan_next(&a, &x, 100), 0); /* taken, held: never answered */
	CHECK(x && x->op == 7);
	c.arena[100] = 42;
	c.drain[10] = 7;
	a.h->log_n = 1;
	a.h->log[0].id = 5;
	a.h->ndrained = 1;
	a.h->drained[0].len = 3;
	a.h->preq[9].state = CK_PREQ_POST_AGAIN; /* a receive the cut cancelled */
	a.h->preq[9].off = 4096;
	a.h->cut_done = a.h->cut_req = 3;
	CHECK_EQ_INT(ck_mpi_chan_create(&b, n2, 1 << 16, 8192), 0);
	at = c.h;
	CHECK_EQ_INT(ck_mpi_chan_adopt(&c, n2, 1000), 0);
	CHECK(c.h == at);
	CHECK_EQ_INT(strcmp(c.name, n2), 0);
	CHECK_EQ_INT(ck_mpi_chan_wait_adopted(&b, 0), 0);
	CHECK_EQ_INT(b.arena[100], 42);
	CHECK_EQ_INT(b.drain[10], 7);
	CHECK_EQ_INT(b.h->log_n, 1);
	CHECK_EQ_INT(b.h->log[0].id, 5);
	CHECK_EQ_INT(b.h->ndrained, 1);
	CHECK_EQ_INT(b.h->drained[0].len, 3);
	CHECK_EQ_INT(b.h->preq[9].state, CK_PREQ_POST_AGAIN);
	CHECK_EQ_INT(b.h->preq[9].off, 4096);
	CHECK_EQ_INT(b.h->cut_req, 3);
	CHECK_EQ_INT(b.h->cut_done, 3);
	CHECK_EQ_INT(b.h->head, 2);
	ck_mpi_chan_rewind(&b); /* the held request first */
	CHECK_EQ_INT(b.h->tail, 0);
	x = NULL;
	CHECK_EQ_INT(ck_mpi_chan_next(&b, &x, 100), 0);
	CHECK(x && x->op == 7);
	if (x) {
		x->rc = 11;
		ck_mpi_chan_done(&b, x);
	}
	CHECK_EQ_INT(ck_mpi_chan_wait(&c, r1), 0); /* the client's pointer: same address, new object */
	CHECK_EQ_INT(r1->rc, 11);
	ck_mpi_chan_release(&c, r1);
	x = NULL;
	CHECK_EQ_INT(ck_mpi_chan_next(&b, &x, 100), 0);
	CHECK(x && x->op == 8);
	if (x)
		ck_mpi_chan_done(&b, x);
	CHECK_EQ_INT(ck_mpi_chan_wait(&c, r2), 0);
	ck_mpi_chan_release(&c, r2);
	/* another size; a channel that never comes */
	CHECK_EQ_INT(ck_mpi_chan_create(&d, n3, 1 << 17, 8192), 0);
	CHECK_EQ_INT(ck_mpi_chan_adopt(&c, n3, 1000), -EMSGSIZE);
	CHECK(c.h == at);
	ck_mpi_chan_forget(&d);
	ck_mpi_chan_unlink(n3);
	/* A server of another world. Its rank and size are in the header
	 * once the channel can be opened (a restarted client adopting it at
	 * once read them as 0 while the agent had yet to store them: "the
	 * checkpoint holds 4 ranks" in a CI run). */
	CHECK_EQ_INT(ck_mpi_chan_create_world(&d, n3, 1 << 16, 8192, 0, 9), 0);
	{
		struct ck_mpi_chan o;
		CHECK_EQ_INT(ck_mpi_chan_open(&o, n3), 0);
		CHECK_EQ_INT(o.h->world_size, 9);
		CHECK_EQ_INT(o.h->world_rank, 0);
		munmap(o.h, o.map_len);
	}
	CHECK_EQ_INT(ck_mpi_chan_adopt(&c, n3, 1000), -EXDEV);
	CHECK(c.h == at);
	CHECK_EQ_INT(ck_mpi_chan_adopt(&c, "/ckunit-mpichan-none", 60), -ENOENT);
	ck_mpi_chan_unlink(name);
	ck_mpi_chan_unlink(n2);
	ck_mpi_chan_unlink(n3);
	ck_mpi_chan_close(&c);
	ck_mpi_chan_forget(&a);
	ck_mpi_chan_forget(&b);
	ck_mpi_chan_forget(&d);
}

/* A server in another pid namespace cannot be looked up by pid: its death
 * is told by its robust lock, which the kernel marks when it dies. */
static void test_server_lock(void)
{
	struct ck_mpi_chan c;
	int p[2], ws;
	char b;
	pid_t pid;

	CHECK_EQ_INT(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		struct ck_mpi_chan s;

		close(p[0]);
		if (ck_mpi_chan_create(&s, name, 4096, 0))
			_exit(1);
		(void)!write(p[1], "x", 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	CHECK_EQ_INT(read(p[0], &b, 1), 1);
	close(p[0]);
	CHECK_EQ_INT(ck_mpi_chan_open(&c, name), 0);
	ck_mpi_chan_unlink(name);
	c.pidns = c.h->server_pidns + 1; /* as if in another namespace */
	CHECK_EQ_INT(ck_mpi_chan_peer_alive(&c, 1), 1);
	kill(pid, SIGKILL);
	CHECK_EQ_INT(waitpid(pid, &ws, 0), pid);
	CHECK_EQ_INT(ck_mpi_chan_peer_alive(&c, 1), 0);
	ck_mpi_chan_close(&c);
}

void ck_unit_run(void)
{
	snprintf(name, sizeof(name), "/ckunit-mpichan-%d", (int)getpid());
	test_refusals();
	test_traffic();
	test_peers_gone();
	test_adopt();
	test_server_lock();
}
