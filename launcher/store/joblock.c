/* The job lock: one writer per job in a store (joblock.h, FORMAT.md). */
#include "launcher/store/joblock.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/image/manifest.h"

struct ck_joblock {
	struct ck_store *s;
	char job[160];
	char key[256]; /* JOB/lock, or this generation's JOB/lease/G */
	int fd;        /* a file lock's descriptor; -1 for a lease */
	struct ck_lock_owner me;
	/* lease */
	pthread_t th;
	int th_started;
	pthread_mutex_t mu;     /* the fields below */
	pthread_mutex_t renew;  /* one renewal at a time */
	pthread_cond_t cv;
	int quit, lost;
	char lost_why[768];
	uint64_t renewed_mono; /* CLOCK_MONOTONIC of the last renewal */
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t lease_len(void)
{
	const char *t = getenv("CKPT_TEST_LEASE_MS"); /* tests: a lease of a few seconds */

	return t && atoll(t) > 0 ? (uint64_t)atoll(t) * 1000000ull : CK_LEASE_NS;
}

static int use_file(const struct ck_store *s, unsigned flags)
{
	return s->ops->open_lock && !(flags & CK_JOBLOCK_LEASE);
}

/* ---- the holder's record ---- */

static void read_line_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	buf[0] = 0;
	if (f) {
		if (!fgets(buf, (int)len, f))
			buf[0] = 0;
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = 0;
}

/* Field 22 of /proc/PID/stat (clock ticks after boot); 0 if no such process. */
static uint64_t proc_start(int64_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	int i;

	if (pid <= 0 || pid > 0x7fffffff)
		return 0;
	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)pid);
	read_line_file(path, buf, sizeof(buf));
	p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
	if (!p)
		return 0;
	for (i = 2; i < 22 && p; i++) /* field 3 starts after ") " */
		p = strchr(p + 1, ' ');
	if (p)
		v = strtoull(p + 1, NULL, 10);
	return v;
}

static void self_owner(struct ck_lock_owner *o, const char *tool, uint64_t lease_ns)
{
	const char *fake = getenv("CKPT_TEST_LOCK_HOST"); /* tests: as if from another machine */
	unsigned char r[16];
	ssize_t n;

	memset(o, 0, sizeof(*o));
	snprintf(o->tool, sizeof(o->tool), "%s", tool);
	if (fake && *fake) {
		snprintf(o->host, sizeof(o->host), "%s", fake);
		snprintf(o->boot, sizeof(o->boot), "test-%.30s", fake);
	} else {
		if (gethostname(o->host, sizeof(o->host) - 1) < 0)
			snprintf(o->host, sizeof(o->host), "?");
		read_line_file("/proc/sys/kernel/random/boot_id", o->boot, sizeof(o->boot));
	}
	n = readlink("/proc/self/ns/pid", o->pidns, sizeof(o->pidns) - 1);
	o->pidns[n > 0 ? n : 0] = 0;
	o->pid = getpid();
	o->start = proc_start(o->pid);
	o->since_ns = clock_ns(CLOCK_REALTIME);
	o->renewed_ns = lease_ns ? o->since_ns : 0;
	o->lease_ns = lease_ns;
	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(o->since_ns >> (i % 8 * 8) ^ (uint64_t)o->pid * (i + 1));
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(o->token + 2 * i, 3, "%02x", r[i]);
}

int ck_lock_owner_format(const struct ck_lock_owner *o, char *buf, size_t len)
{
	int n = snprintf(buf, len,
			 "ckpt-lock 1\ntool %s\nhost %s\nboot %s\npidns %s\npid %lld\nstart %llu\nsince %llu\n"
			 "renewed %llu\nlease %llu\ntoken %s\nreleased %d\n",
			 o->tool, o->host, o->boot, o->pidns, (long long)o->pid, (unsigned long long)o->start,
			 (unsigned long long)o->since_ns, (unsigned long long)o->renewed_ns,
			 (unsigned long long)o->lease_ns, o->token, o->released);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

/* Copies a value, printable characters only: a record read from a store
 * ends up in messages. */
static void take(char *dst, size_t dlen, const char *v, size_t vlen)
{
	size_t i, j = 0;

	for (i = 0; i < vlen && j + 1 < dlen; i++)
		if (v[i] >= 0x20 && v[i] < 0x7f)
			dst[j++] = v[i];
	dst[j] = 0;
}

int ck_lock_owner_parse(const char *buf, size_t len, struct ck_lock_owner *o)
{
	const char *p = buf, *end = buf + len;

	memset(o, 0, sizeof(*o));
	if (len < 12 || memcmp(buf, "ckpt-lock 1\n", 12))
		return -EBADMSG;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *sp;
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char num[32];

		sp = memchr(p, ' ', n);
		if (sp) {
			size_t kl = (size_t)(sp - p), vl = n - kl - 1;

			take(num, sizeof(num), sp + 1, vl);
#define K(name) (kl == sizeof(name) - 1 && !memcmp(p, name, kl))
			if (K("tool"))
				take(o->tool, sizeof(o->tool), sp + 1, vl);
			else if (K("host"))
				take(o->host, sizeof(o->host), sp + 1, vl);
			else if (K("boot"))
				take(o->boot, sizeof(o->boot), sp + 1, vl);
			else if (K("pidns"))
				take(o->pidns, sizeof(o->pidns), sp + 1, vl);
			else if (K("token"))
				take(o->token, sizeof(o->token), sp + 1, vl);
			else if (K("pid"))
				o->pid = strtoll(num, NULL, 10);
			else if (K("start"))
				o->start = strtoull(num, NULL, 10);
			else if (K("since"))
				o->since_ns = strtoull(num, NULL, 10);
			else if (K("renewed"))
				o->renewed_ns = strtoull(num, NULL, 10);
			else if (K("lease"))
				o->lease_ns = strtoull(num, NULL, 10);
			else if (K("released"))
				o->released = atoi(num);
#undef K
		}
		p += n + 1;
	}
	return 0;
}

static void fmt_utc(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000ull);
	struct tm tm;

	if (!ns || !gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, len, "an unknown time");
}

void ck_lock_owner_describe(const struct ck_lock_owner *o, char *buf, size_t len)
{
	char since[64];

	fmt_utc(o->since_ns, since, sizeof(since));
	if (!o->pid)
		snprintf(buf, len, "another writer (its record is not readable yet)");
	else
		snprintf(buf, len, "%s pid %lld on host %s, since %s", o->tool[0] ? o->tool : "?", (long long)o->pid,
			 o->host[0] ? o->host : "?", since);
}

/* A holder on this machine, in this pid namespace, whose process is gone
 * (or is another process now): stale whatever its lease says. */
static int dead_here(const struct ck_lock_owner *o, const struct ck_lock_owner *me)
{
	uint64_t st;

	if (!o->boot[0] || strcmp(o->boot, me->boot) || strcmp(o->pidns, me->pidns))
		return 0; /* cannot tell from here */
	st = proc_start(o->pid);
	return st == 0 || st != o->start;
}

static int lease_live(const struct ck_lock_owner *o, const struct ck_lock_owner *me, uint64_t now)
{
	if (o->released || dead_here(o, me))
		return 0;
	if (o->boot[0] && !strcmp(o->boot, me->boot) && !strcmp(o->pidns, me->pidns))
		return 1; /* its process is alive here */
	return now < o->renewed_ns + o->lease_ns;
}

static int busy(struct ck_store *s, const char *job, const struct ck_lock_owner *o, int lease)
{
	char who[512], until[64];

	ck_lock_owner_describe(o, who, sizeof(who));
	if (lease && o->pid && o->lease_ns) {
		fmt_utc(o->renewed_ns + o->lease_ns, until, sizeof(until));
		ck_err_set("job %s in store %s is held by %s (lease until %s unless renewed; one writer at a time)",
			   job, s->uri, who, until);
	} else {
		ck_err_set("job %s in store %s is held by %s (one writer at a time)", job, s->uri, who);
	}
	return -EBUSY;
}

/* ---- file lock ---- */

static void fd_record(int fd, struct ck_lock_owner *o)
{
	char buf[2048];
	ssize_t n = pread(fd, buf, sizeof(buf), 0);

	if (n <= 0 || ck_lock_owner_parse(buf, (size_t)n, o) < 0)
		memset(o, 0, sizeof(*o));
}

static int fd_locked(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

static int file_acquire(struct ck_joblock *l)
{
	char rec[1024];
	int tries, n, rc;

	for (tries = 0; tries < 5; tries++) {
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
		struct stat st;
		int fd = l->s->ops->open_lock(l->s, l->key);

		if (fd < 0)
			return fd;
		if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
			struct ck_lock_owner o;

			rc = -errno;
			if (rc == -EAGAIN || rc == -EACCES) {
				fd_record(fd, &o);
				close(fd);
				return busy(l->s, l->job, &o, 0);
			}
			close(fd);
			ck_err_set("store %s: lock %s: %s", l->s->uri, l->key, strerror(-rc));
			return rc;
		}
		/* Removed between our open and our lock (ckpt unlock, ckpt rm
		 * of the whole job): the lock is the file that is there now. */
		if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
			close(fd);
			continue;
		}
		n = ck_lock_owner_format(&l->me, rec, sizeof(rec));
		if (n < 0 || ftruncate(fd, 0) < 0 || pwrite(fd, rec, (size_t)n, 0) != n || fdatasync(fd) < 0) {
			rc = n < 0 ? n : -errno;
			close(fd);
			ck_err_set("store %s: lock %s: writing the holder's record: %s", l->s->uri, l->key, strerror(-rc));
			return rc;
		}
		l->fd = fd;
		return 0;
	}
	ck_err_set("store %s: lock %s: removed again and again while being taken", l->s->uri, l->key);
	return -EBUSY;
}

/* ---- lease ---- */

static void lease_key(const char *job, uint64_t gen, char *buf, size_t len)
{
	snprintf(buf, len, "%s/lease/%08llu", job, (unsigned long long)gen);
}

struct gens {
	uint64_t *v;
	size_t n, cap, plen;
};

static int gen_cb(void *arg, const char *key, uint64_t size)
{
	struct gens *g = arg;
	const char *p = key + g->plen;
	char *end;
	unsigned long long v;

	(void)size;
	if (*p < '0' || *p > '9')
		return 0;
	v = strtoull(p, &end, 10);
	if (*end || !v)
		return 0;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 8;
		uint64_t *nv = realloc(g->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		g->v = nv;
		g->cap = cap;
	}
	g->v[g->n++] = v;
	return 0;
}

static int list_gens(struct ck_store *s, const char *job, struct gens *g)
{
	char prefix[256];
	int rc;

	memset(g, 0, sizeof(*g));
	snprintf(prefix, sizeof(prefix), "%s/lease/", job);
	g->plen = strlen(prefix);
	rc = ck_store_list(s, prefix, gen_cb, g);
	if (rc == -ENOMEM)
		ck_err_set("out of memory listing %s", prefix);
	return rc;
}

static int read_gen(struct ck_store *s, const char *job, uint64_t gen, struct ck_lock_owner *o)
{
	char key[256];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	lease_key(job, gen, key, sizeof(key));
	rc = ck_store_get(s, key, &buf, &len);
	if (rc < 0)
		return rc;
	rc = ck_lock_owner_parse(buf, len, o);
	free(buf);
	if (rc < 0) {
		ck_err_set("store %s: %s is not a lock record (ckpt unlock --force %s replaces it)", s->uri, key, job);
		return rc;
	}
	o->gen = gen;
	return 0;
}

/* The newest generation and its record; *have 0 when there is none. */
static int lease_newest(struct ck_store *s, const char *job, struct ck_lock_owner *o, int *have)
{
	int tries, rc = 0;

	*have = 0;
	for (tries = 0; tries < 5; tries++) {
		struct gens g;
		uint64_t max = 0;

		rc = list_gens(s, job, &g);
		for (size_t i = 0; rc == 0 && i < g.n; i++)
			if (g.v[i] > max)
				max = g.v[i];
		free(g.v);
		if (rc < 0 || !max)
			return rc;
		rc = read_gen(s, job, max, o);
		if (rc == -ENOENT)
			continue; /* pruned meanwhile by a newer holder */
		if (rc == 0)
			*have = 1;
		return rc;
	}
	return rc;
}

/* Deletes the generations before ours: a new holder's clean-up. */
static void lease_prune(struct ck_store *s, const char *job, uint64_t below)
{
	struct gens g;
	char key[256], saved[1024];

	snprintf(saved, sizeof(saved), "%s", ck_err_msg());
	if (list_gens(s, job, &g) == 0)
		for (size_t i = 0; i < g.n; i++)
			if (g.v[i] < below) {
				lease_key(job, g.v[i], key, sizeof(key));
				ck_store_del(s, key);
			}
	free(g.v);
	ck_err_set("%s", saved);
}

/* Whether the lock is still ours: 0 if our generation is there and none
 * newer, 1 (and l->lost, with the reason) if not, <0 when the store
 * cannot tell. A listing, not a look at G+1 alone: after two takeovers
 * G+1 may be pruned already, and our own G with it. */
static int lease_gone(struct ck_joblock *l)
{
	struct ck_lock_owner o;
	struct gens g;
	uint64_t max = 0;
	char who[512];
	int mine = 0, rc = list_gens(l->s, l->job, &g);

	if (rc < 0) {
		free(g.v);
		return rc;
	}
	for (size_t i = 0; i < g.n; i++) {
		max = g.v[i] > max ? g.v[i] : max;
		mine |= g.v[i] == l->me.gen;
	}
	free(g.v);
	if (mine && max == l->me.gen)
		return 0;
	if (max > l->me.gen && read_gen(l->s, l->job, max, &o) == 0)
		ck_lock_owner_describe(&o, who, sizeof(who));
	else
		snprintf(who, sizeof(who), "another writer (the lease was removed)");
	pthread_mutex_lock(&l->mu);
	l->lost = 1;
	snprintf(l->lost_why, sizeof(l->lost_why), "lost the lock of job %s in store %s: taken over by %s", l->job,
		 l->s->uri, who);
	pthread_mutex_unlock(&l->mu);
	return 1;
}

/* Checks that the lock is still ours, then rewrites our generation with a
 * new renewal time. Under l->renew. */
static int lease_renew(struct ck_joblock *l)
{
	char rec[1024];
	int rc, n;

	rc = lease_gone(l);
	if (rc != 0)
		return rc > 0 ? -ENOLCK : rc;
	l->me.renewed_ns = clock_ns(CLOCK_REALTIME);
	n = ck_lock_owner_format(&l->me, rec, sizeof(rec));
	if (n < 0)
		return n;
	rc = ck_store_put(l->s, l->key, rec, (size_t)n, 0);
	if (rc == 0) {
		pthread_mutex_lock(&l->mu);
		l->renewed_mono = clock_ns(CLOCK_MONOTONIC);
		pthread_mutex_unlock(&l->mu);
	}
	return rc;
}

static void *renewer(void *arg)
{
	struct ck_joblock *l = arg;
	struct timespec ts;
	uint64_t next;

	pthread_mutex_lock(&l->mu);
	while (!l->quit && !l->lost) {
		next = clock_ns(CLOCK_MONOTONIC) + l->me.lease_ns / 4;
		ts.tv_sec = (time_t)(next / 1000000000ull);
		ts.tv_nsec = (long)(next % 1000000000ull);
		while (!l->quit && pthread_cond_timedwait(&l->cv, &l->mu, &ts) != ETIMEDOUT)
			;
		if (l->quit)
			break;
		pthread_mutex_unlock(&l->mu);
		pthread_mutex_lock(&l->renew);
		/* a failure is retried at the next turn; the holder stops
		 * committing once its last renewal is too old */
		lease_renew(l);
		pthread_mutex_unlock(&l->renew);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* CK_JOBLOCK_WAIT_SILENT: o's lease is live as far as the clock goes;
 * wait while it stays silent, until it ends (0: take it) or is renewed
 * (-EBUSY). */
static int wait_silent(struct ck_joblock *l, struct ck_lock_owner *o)
{
	uint64_t now = clock_ns(CLOCK_REALTIME), period = o->lease_ns / 4;
	int rc, have, said = 0;

	if (o->released || !o->lease_ns || (o->boot[0] && !strcmp(o->boot, l->me.boot) &&
					     !strcmp(o->pidns, l->me.pidns)))
		return busy(l->s, l->job, o, 1); /* alive here, or no lease */
	while (now < o->renewed_ns + o->lease_ns) {
		struct ck_lock_owner n;

		/* a live holder renews every lease/4: silent longer than that
		 * (and a margin for a slow store) is probably dead */
		if (now < o->renewed_ns + period + period / 2 && !said)
			return busy(l->s, l->job, o, 1);
		if (!said) {
			char who[512];
			ck_lock_owner_describe(o, who, sizeof(who));
			fprintf(stderr, "ckrun: job %s is held by %s, silent for %.0f s: waiting up to %.0f s for its "
					"lease to end\n",
				l->job, who, (double)(now - o->renewed_ns) / 1e9,
				(double)(o->renewed_ns + o->lease_ns - now) / 1e9);
			said = 1;
		}
		sleep(2);
		if ((rc = lease_newest(l->s, l->job, &n, &have)) < 0)
			return rc;
		if (!have || n.released)
			return 0; /* given back meanwhile */
		if (n.gen != o->gen || n.renewed_ns != o->renewed_ns)
			return busy(l->s, l->job, &n, 1); /* renewed, or taken by another: alive */
		now = clock_ns(CLOCK_REALTIME);
	}
	return 0;
}

static int lease_acquire(struct ck_joblock *l, unsigned flags)
{
	char rec[1024];
	int tries, have, rc, n;

	for (tries = 0; tries < 5; tries++) {
		struct ck_lock_owner o;

		rc = lease_newest(l->s, l->job, &o, &have);
		if (rc < 0)
			return rc;
		if (have && lease_live(&o, &l->me, clock_ns(CLOCK_REALTIME))) {
			if (!(flags & CK_JOBLOCK_WAIT_SILENT))
				return busy(l->s, l->job, &o, 1);
			if ((rc = wait_silent(l, &o)) < 0)
				return rc;
			if ((rc = lease_newest(l->s, l->job, &o, &have)) < 0)
				return rc;
		}
		l->me.gen = have ? o.gen + 1 : 1;
		l->me.renewed_ns = clock_ns(CLOCK_REALTIME);
		lease_key(l->job, l->me.gen, l->key, sizeof(l->key));
		n = ck_lock_owner_format(&l->me, rec, sizeof(rec));
		if (n < 0)
			return n;
		rc = ck_store_put(l->s, l->key, rec, (size_t)n, CK_PUT_NOREPLACE);
		if (rc == -EEXIST)
			continue; /* another writer took this generation first: look again */
		if (rc < 0)
			return rc;
		l->renewed_mono = clock_ns(CLOCK_MONOTONIC);
		lease_prune(l->s, l->job, l->me.gen);
		return 0;
	}
	ck_err_set("job %s in store %s: the lock was taken by others at every try", l->job, l->s->uri);
	return -EBUSY;
}

static int start_renewer(struct ck_joblock *l)
{
	sigset_t all, old;
	int rc;

	/* The program's signals stay with its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&l->th, NULL, renewer, l);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		ck_err_set("job %s: cannot start the lease renewal: %s", l->job, strerror(rc));
		return -rc;
	}
	l->th_started = 1;
	return 0;
}

/* ---- public ---- */

static void lock_end(struct ck_joblock *l, int drop);

static struct ck_joblock *lock_new(struct ck_store *s, const char *job, const char *tool, int lease)
{
	struct ck_joblock *l = calloc(1, sizeof(*l));
	pthread_condattr_t ca;

	if (!l)
		return NULL;
	l->s = s;
	l->fd = -1;
	snprintf(l->job, sizeof(l->job), "%s", job);
	snprintf(l->key, sizeof(l->key), "%s/lock", job);
	self_owner(&l->me, tool, lease ? lease_len() : 0);
	pthread_mutex_init(&l->mu, NULL);
	pthread_mutex_init(&l->renew, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cv, &ca);
	pthread_condattr_destroy(&ca);
	return l;
}

static void lock_free(struct ck_joblock *l)
{
	pthread_mutex_destroy(&l->mu);
	pthread_mutex_destroy(&l->renew);
	pthread_cond_destroy(&l->cv);
	free(l);
}

static int check_job(const char *job)
{
	if (!ck_job_name_valid(job)) {
		ck_err_set("invalid job name \"%s\"", job ? job : "");
		return -EINVAL;
	}
	return 0;
}

int ck_joblock_acquire(struct ck_store *s, const char *job, const char *tool, unsigned flags,
		       struct ck_joblock **out)
{
	int file = use_file(s, flags), rc;
	struct ck_joblock *l;

	*out = NULL;
	if ((rc = check_job(job)) < 0)
		return rc;
	l = lock_new(s, job, tool, !file);
	if (!l) {
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	rc = file ? file_acquire(l) : lease_acquire(l, flags);
	if (rc == 0 && !file && (rc = start_renewer(l)) < 0) {
		lock_end(l, 0);
		l = NULL;
	}
	if (rc < 0) {
		if (l)
			lock_free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int ck_joblock_lost(struct ck_joblock *l)
{
	int lost;

	if (l->fd >= 0)
		return ck_joblock_check(l); /* an fstat */
	pthread_mutex_lock(&l->mu);
	lost = l->lost;
	if (lost)
		ck_err_set("%s", l->lost_why);
	pthread_mutex_unlock(&l->mu);
	return lost ? -ENOLCK : 0;
}

int ck_joblock_check(struct ck_joblock *l)
{
	struct stat st;
	uint64_t age;
	int rc = 0, lost;

	if (l->fd >= 0) {
		if (fstat(l->fd, &st) == 0 && st.st_nlink == 0) {
			ck_err_set("lost the lock of job %s in store %s: its lock file was removed while held", l->job,
				   l->s->uri);
			return -ENOLCK;
		}
		return 0;
	}
	pthread_mutex_lock(&l->renew);
	pthread_mutex_lock(&l->mu);
	age = clock_ns(CLOCK_MONOTONIC) - l->renewed_mono;
	lost = l->lost;
	pthread_mutex_unlock(&l->mu);
	/* A lease renewed more than half its length ago may be near its end
	 * on a contender's clock: renew it now, and check that no one took it
	 * either way. */
	/* A failed look (the gateway down a moment) is no loss by itself:
	 * nobody takes a lease before it is a whole length old, and ours is
	 * less than half, which is checked below. */
	if (!lost)
		rc = age > l->me.lease_ns / 2 ? lease_renew(l) : lease_gone(l) > 0 ? -ENOLCK : 0;
	pthread_mutex_lock(&l->mu);
	lost = l->lost;
	age = clock_ns(CLOCK_MONOTONIC) - l->renewed_mono;
	if (lost)
		ck_err_set("%s", l->lost_why);
	pthread_mutex_unlock(&l->mu);
	pthread_mutex_unlock(&l->renew);
	if (lost)
		return -ENOLCK;
	if (age > l->me.lease_ns / 2) {
		ck_err_set("job %s in store %s: the lock's lease could not be renewed for %.0f s (%s)", l->job, l->s->uri,
			   (double)age / 1e9, rc < 0 ? ck_err_msg() : "no answer");
		return -ENOLCK;
	}
	return 0;
}

static void lock_end(struct ck_joblock *l, int drop)
{
	char rec[1024], saved[1024];
	int n;

	if (!l)
		return;
	snprintf(saved, sizeof(saved), "%s", ck_err_msg());
	if (l->fd >= 0) {
		/* The record goes first: nobody is named after we are gone. A
		 * writer that opened the file before it is removed finds it
		 * unlinked once it has the lock, and opens the new one. */
		if (drop)
			ck_store_del(l->s, l->key);
		else if (ftruncate(l->fd, 0) < 0)
			(void)0;
		close(l->fd);
		lock_free(l);
		ck_err_set("%s", saved);
		return;
	}
	if (l->th_started) {
		pthread_mutex_lock(&l->mu);
		l->quit = 1;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->th, NULL);
	}
	if (!l->lost && drop) {
		lease_prune(l->s, l->job, l->me.gen);
		ck_store_del(l->s, l->key);
	} else if (!l->lost) {
		/* Given back: the next writer need not wait for the lease. */
		l->me.released = 1;
		l->me.renewed_ns = clock_ns(CLOCK_REALTIME);
		n = ck_lock_owner_format(&l->me, rec, sizeof(rec));
		if (n > 0)
			ck_store_put(l->s, l->key, rec, (size_t)n, 0);
	}
	ck_err_set("%s", saved);
	lock_free(l);
}

void ck_joblock_pause(struct ck_joblock *l, int pause)
{
	if (!l || l->fd >= 0)
		return;
	if (pause)
		pthread_mutex_lock(&l->renew);
	else
		pthread_mutex_unlock(&l->renew);
}

void ck_joblock_release(struct ck_joblock *l)
{
	lock_end(l, 0);
}

void ck_joblock_drop(struct ck_joblock *l)
{
	lock_end(l, 1);
}

int ck_joblock_holder(struct ck_store *s, const char *job, unsigned flags, struct ck_lock_owner *o)
{
	struct ck_lock_owner me;
	char key[256];
	int fd, rc, have;

	memset(o, 0, sizeof(*o));
	if ((rc = check_job(job)) < 0)
		return rc;
	if (use_file(s, flags)) {
		snprintf(key, sizeof(key), "%s/lock", job);
		fd = s->ops->open_lock(s, key);
		if (fd < 0)
			return fd;
		rc = fd_locked(fd);
		fd_record(fd, o);
		close(fd);
		if (rc < 0)
			ck_err_set("store %s: lock %s: %s", s->uri, key, strerror(-rc));
		return rc;
	}
	rc = lease_newest(s, job, o, &have);
	if (rc < 0 || !have)
		return rc;
	self_owner(&me, "", 0);
	return lease_live(o, &me, clock_ns(CLOCK_REALTIME));
}

int ck_joblock_break(struct ck_store *s, const char *job, int force, unsigned flags, struct ck_lock_owner *o)
{
	struct ck_lock_owner me;
	char key[256], rec[1024];
	int fd, rc, have, n;

	memset(o, 0, sizeof(*o));
	if ((rc = check_job(job)) < 0)
		return rc;
	if (use_file(s, flags)) {
		uint64_t size;

		snprintf(key, sizeof(key), "%s/lock", job);
		rc = ck_store_stat(s, key, &size);
		if (rc == -ENOENT)
			return 0; /* never locked: nothing to create */
		if (rc < 0)
			return rc;
		fd = s->ops->open_lock(s, key);
		if (fd < 0)
			return fd;
		rc = fd_locked(fd);
		fd_record(fd, o);
		if (rc > 0) {
			char who[512];

			close(fd);
			ck_lock_owner_describe(o, who, sizeof(who));
			ck_err_set("job %s in store %s is held by %s: a file lock ends only with its holder (stop that "
				   "process)",
				   job, s->uri, who);
			return -EBUSY;
		}
		close(fd);
		if (rc < 0) {
			ck_err_set("store %s: lock %s: %s", s->uri, key, strerror(-rc));
			return rc;
		}
		return ck_store_del(s, key);
	}
	rc = lease_newest(s, job, o, &have);
	if (rc == -EBADMSG && force) {
		/* an unreadable record: replaced by ours below */
		struct gens g;

		if ((rc = list_gens(s, job, &g)) < 0)
			return rc;
		for (size_t i = 0; i < g.n; i++)
			if (g.v[i] > o->gen)
				o->gen = g.v[i];
		free(g.v);
		have = 1;
		o->released = 1;
	}
	if (rc < 0 || !have)
		return rc;
	self_owner(&me, "ckpt unlock", lease_len());
	if (lease_live(o, &me, clock_ns(CLOCK_REALTIME)) && !force) {
		busy(s, job, o, 1);
		ck_err_set("%s; ckpt unlock --force %s takes it from that writer, which then commits nothing more",
			   ck_err_msg(), job);
		return -EBUSY;
	}
	/* A released generation of our own on top: the holder, if it is
	 * still there, finds it at its next renewal or commit and stops. */
	me.gen = o->gen + 1;
	me.released = 1;
	lease_key(job, me.gen, key, sizeof(key));
	n = ck_lock_owner_format(&me, rec, sizeof(rec));
	if (n < 0)
		return n;
	rc = ck_store_put(s, key, rec, (size_t)n, CK_PUT_NOREPLACE);
	if (rc == -EEXIST) {
		ck_err_set("job %s in store %s: the lock changed hands meanwhile; look again", job, s->uri);
		return -EBUSY;
	}
	if (rc == 0)
		lease_prune(s, job, me.gen);
	return rc;
}
