/* The job lock: a file lock on a file store, and the lease protocol (run on
 * a file store too, through CK_JOBLOCK_LEASE): one holder at a time, the
 * holder named, stale leases taken over, a broken lease noticed by its
 * holder, records that cannot inject text. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/store/joblock.h"
#include "launcher/store/store.h"
#include "tests/unit/tmpdir.h"
#include "tests/unit/unit.h"

static int exists(struct ck_store *s, const char *key)
{
	uint64_t size;

	return ck_store_stat(s, key, &size) == 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void test_file_lock(struct ck_store *s)
{
	struct ck_joblock *a = NULL, *b = NULL;
	struct ck_lock_owner o;
	char pid[64];

	snprintf(pid, sizeof(pid), "ckrun pid %d on host ", (int)getpid());
	CHECK_EQ_INT(ck_joblock_acquire(s, "job", "ckrun", 0, &a), 0);
	CHECK(a != NULL);
	CHECK(exists(s, "job/lock"));
	/* A second taker (another open file description) is refused and told
	 * who holds it. */
	CHECK_EQ_INT(ck_joblock_acquire(s, "job", "ckpt gc", 0, &b), -EBUSY);
	CHECK(b == NULL);
	CHECK(strstr(ck_err_msg(), pid) != NULL);
	CHECK(strstr(ck_err_msg(), "one writer at a time") != NULL);
	CHECK_EQ_INT(ck_joblock_holder(s, "job", 0, &o), 1);
	CHECK_EQ_INT(o.pid, getpid());
	CHECK_EQ_STR(o.tool, "ckrun");
	/* ckpt unlock cannot break a file lock: its holder is alive. */
	CHECK_EQ_INT(ck_joblock_break(s, "job", 1, 0, &o), -EBUSY);
	CHECK_EQ_INT(ck_joblock_check(a), 0);
	ck_joblock_release(a);
	/* Free again; the lock of another job is another lock. */
	CHECK_EQ_INT(ck_joblock_holder(s, "job", 0, &o), 0);
	CHECK_EQ_INT(ck_joblock_acquire(s, "job", "ckpt gc", 0, &b), 0);
	CHECK_EQ_INT(ck_joblock_acquire(s, "other", "ckrun", 0, &a), 0);
	/* The lock file removed under its holder (rm -rf, or a drop): the
	 * holder finds out before it commits, and a new taker gets the new
	 * file. */
	CHECK_EQ_INT(ck_store_del(s, "job/lock"), 0);
	CHECK_EQ_INT(ck_joblock_check(b), -ENOLCK);
	CHECK(strstr(ck_err_msg(), "lost the lock of job job") != NULL);
	ck_joblock_release(b);
	CHECK_EQ_INT(ck_joblock_acquire(s, "job", "ckrun", 0, &b), 0);
	ck_joblock_drop(b);
	CHECK(!exists(s, "job/lock"));
	ck_joblock_release(a);
	CHECK_EQ_INT(ck_joblock_acquire(s, "../x", "ckrun", 0, &a), -EINVAL);
}

/* A lease record as another host's writer would leave it. */
static void put_lease(struct ck_store *s, uint64_t gen, const char *host, uint64_t renewed, uint64_t lease,
		      int released)
{
	struct ck_lock_owner o;
	char key[64], rec[1024];
	int n;

	memset(&o, 0, sizeof(o));
	snprintf(o.tool, sizeof(o.tool), "ckrun");
	snprintf(o.host, sizeof(o.host), "%s", host);
	snprintf(o.boot, sizeof(o.boot), "boot-of-%s", host);
	snprintf(o.pidns, sizeof(o.pidns), "pid:[1]");
	o.pid = 4242;
	o.since_ns = renewed;
	o.renewed_ns = renewed;
	o.lease_ns = lease;
	o.released = released;
	n = ck_lock_owner_format(&o, rec, sizeof(rec));
	CHECK(n > 0);
	snprintf(key, sizeof(key), "lj/lease/%08llu", (unsigned long long)gen);
	CHECK_EQ_INT(ck_store_put(s, key, rec, (size_t)n, 0), 0);
}

static void test_lease(struct ck_store *s)
{
	const unsigned L = CK_JOBLOCK_LEASE;
	struct ck_joblock *a = NULL, *b = NULL;
	struct ck_lock_owner o;
	uint64_t minute = 60ull * 1000000000ull;

	/* Nobody: generation 1. A second taker on this host is refused while
	 * the holder lives, whatever its lease. */
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	CHECK(exists(s, "lj/lease/00000001"));
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &b), -EBUSY);
	CHECK(strstr(ck_err_msg(), "lease until") != NULL);
	CHECK_EQ_INT(ck_joblock_check(a), 0);
	/* Given back: the next one takes generation 2 at once and prunes 1. */
	ck_joblock_release(a);
	CHECK_EQ_INT(ck_joblock_holder(s, "lj", L, &o), 0);
	CHECK_EQ_INT(o.released, 1);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	CHECK(exists(s, "lj/lease/00000002") && !exists(s, "lj/lease/00000001"));
	ck_joblock_release(a);

	/* Another host's live lease: refused, naming it; expired: taken. */
	put_lease(s, 3, "elsewhere", now_ns(), minute, 0);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), -EBUSY);
	CHECK(strstr(ck_err_msg(), "ckrun pid 4242 on host elsewhere") != NULL);
	CHECK_EQ_INT(ck_joblock_holder(s, "lj", L, &o), 1);
	put_lease(s, 4, "elsewhere", now_ns() - 2 * minute, minute, 0);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	CHECK(exists(s, "lj/lease/00000005") && !exists(s, "lj/lease/00000004") && !exists(s, "lj/lease/00000003"));

	/* ckpt unlock: refused for a live lease without force; with force a
	 * newer generation appears, and the holder, at its next check, knows
	 * it has lost the lock and commits nothing. */
	CHECK_EQ_INT(ck_joblock_break(s, "lj", 0, L, &o), -EBUSY);
	CHECK(strstr(ck_err_msg(), "--force") != NULL);
	CHECK_EQ_INT(ck_joblock_break(s, "lj", 1, L, &o), 0);
	CHECK_EQ_INT(o.pid, getpid());
	CHECK_EQ_INT(ck_joblock_check(a), -ENOLCK);
	CHECK(strstr(ck_err_msg(), "lost the lock of job lj") != NULL);
	CHECK(strstr(ck_err_msg(), "ckpt unlock") != NULL);
	ck_joblock_release(a); /* writes nothing over the newer generation */
	CHECK_EQ_INT(ck_joblock_holder(s, "lj", L, &o), 0);
	CHECK_EQ_STR(o.tool, "ckpt unlock");
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	ck_joblock_drop(a);
	CHECK(!exists(s, "lj/lease/00000007") && !exists(s, "lj/lease/00000006"));

	/* Taken twice while its holder slept (the first taker's generation
	 * pruned by the second, ours by the first): still noticed. */
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	CHECK_EQ_INT(ck_joblock_break(s, "lj", 1, L, &o), 0);
	CHECK_EQ_INT(ck_joblock_break(s, "lj", 1, L, &o), 0);
	CHECK_EQ_INT(ck_joblock_check(a), -ENOLCK);
	ck_joblock_release(a);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	ck_joblock_drop(a);

	/* A record that is not one is no lock to take over silently. */
	CHECK_EQ_INT(ck_store_put(s, "lj/lease/00000009", "garbage", 7, 0), 0);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), -EBADMSG);
	CHECK_EQ_INT(ck_joblock_break(s, "lj", 1, L, &o), 0);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L, &a), 0);
	CHECK(exists(s, "lj/lease/00000011"));
	ck_joblock_release(a);
}

static struct ck_store *renew_store;
static uint64_t renew_gen;

/* The silent holder speaks again: its generation renewed. */
static void *renew_later(void *arg)
{
	(void)arg;
	usleep(1000 * 1000);
	put_lease(renew_store, renew_gen, "elsewhere", now_ns(), 6000000000ull, 0);
	return NULL;
}

/* CK_JOBLOCK_WAIT_SILENT (a resume): a holder elsewhere that renewed
 * lately is refused at once; one silent for more than a renewal period is
 * waited for until its lease ends, then taken; one that renews while
 * waited for is refused. */
static void test_wait_silent(struct ck_store *s)
{
	const unsigned L = CK_JOBLOCK_LEASE, W = CK_JOBLOCK_WAIT_SILENT;
	const uint64_t lease = 6000000000ull; /* 6 s: renewals every 1.5 s */
	struct ck_joblock *a = NULL;
	uint64_t t0;
	pthread_t th;

	put_lease(s, 20, "elsewhere", now_ns(), lease, 0);
	t0 = now_ns();
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L | W, &a), -EBUSY);
	CHECK(now_ns() - t0 < 1000000000ull);
	/* silent for 3 s of 6: taken when it ends, not before */
	put_lease(s, 21, "elsewhere", now_ns() - 3000000000ull, lease, 0);
	t0 = now_ns();
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L | W, &a), 0);
	CHECK(now_ns() - t0 >= 2500000000ull);
	CHECK(exists(s, "lj/lease/00000022"));
	ck_joblock_release(a);
	/* silent, then renewed while waited for: refused */
	put_lease(s, 23, "elsewhere", now_ns() - 3000000000ull, lease, 0);
	renew_store = s;
	renew_gen = 23;
	pthread_create(&th, NULL, renew_later, NULL);
	CHECK_EQ_INT(ck_joblock_acquire(s, "lj", "ckrun", L | W, &a), -EBUSY);
	pthread_join(th, NULL);
	CHECK(strstr(ck_err_msg(), "elsewhere") != NULL);
}

/* A short lease renewed by its thread stays ours past its length. */
static void test_renewal(struct ck_store *s)
{
	const unsigned L = CK_JOBLOCK_LEASE;
	struct ck_joblock *a = NULL;
	struct ck_lock_owner o;

	setenv("CKPT_TEST_LEASE_MS", "400", 1);
	CHECK_EQ_INT(ck_joblock_acquire(s, "rj", "ckrun", L, &a), 0);
	unsetenv("CKPT_TEST_LEASE_MS");
	usleep(1000 * 1000);
	CHECK_EQ_INT(ck_joblock_holder(s, "rj", L, &o), 1);
	CHECK(o.lease_ns == 400000000ull);
	CHECK(o.renewed_ns > o.since_ns);
	CHECK_EQ_INT(ck_joblock_check(a), 0);
	ck_joblock_release(a);
}

static void test_record(void)
{
	struct ck_lock_owner o, p;
	const char evil[] = "ckpt-lock 1\ntool ck\x1b[2Jrun\nhost a\rb\npid 12\nsince 5\nbogus line\n";
	char rec[1024], who[512];
	int n;

	memset(&o, 0, sizeof(o));
	snprintf(o.tool, sizeof(o.tool), "ckpt gc");
	snprintf(o.host, sizeof(o.host), "node-7");
	o.pid = 99;
	o.since_ns = 1796234246000000000ull;
	o.renewed_ns = 7;
	o.lease_ns = 60;
	o.released = 1;
	n = ck_lock_owner_format(&o, rec, sizeof(rec));
	CHECK(n > 0);
	CHECK_EQ_INT(ck_lock_owner_parse(rec, (size_t)n, &p), 0);
	CHECK_EQ_STR(p.tool, "ckpt gc");
	CHECK_EQ_STR(p.host, "node-7");
	CHECK(p.pid == 99 && p.since_ns == o.since_ns && p.renewed_ns == 7 && p.lease_ns == 60 && p.released == 1);
	ck_lock_owner_describe(&p, who, sizeof(who));
	CHECK_EQ_STR(who, "ckpt gc pid 99 on host node-7, since 2026-12-02 17:57:26 UTC");
	/* control characters never reach a message */
	CHECK_EQ_INT(ck_lock_owner_parse(evil, sizeof(evil) - 1, &p), 0);
	CHECK_EQ_STR(p.tool, "ck[2Jrun");
	CHECK_EQ_STR(p.host, "ab");
	CHECK_EQ_INT(ck_lock_owner_parse("lock 1\n", 7, &p), -EBADMSG);
}

void ck_unit_run(void)
{
	char *dir = ck_unit_tmpdir();
	struct ck_store *s = NULL;

	CHECK_EQ_INT(ck_store_open(dir, NULL, &s), 0);
	if (s) {
		test_file_lock(s);
		test_lease(s);
		test_renewal(s);
		test_wait_silent(s);
		ck_store_close(s);
	}
	test_record();
	ck_unit_rmtree(dir);
}
