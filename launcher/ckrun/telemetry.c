/* Metrics and events for operators (telemetry.h).
 *
 * The metrics are a few counters and the last round's figures, rendered in
 * Prometheus' text format on demand: by a small HTTP server thread
 * (--metrics; one request per connection, GET /metrics), and into a file
 * replaced by rename after every round (--metrics-file; node_exporter's
 * textfile collector reads it). Events are JSON objects, one per line,
 * appended (--events). The series carry the label ckrun_job: Prometheus
 * itself sets "job" to the scrape job's name. */
#include "launcher/ckrun/telemetry.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"

struct ck_telemetry {
	pthread_mutex_t mu;
	char *job;
	char *metrics_file;
	int events_fd;
	int listen_fd;
	int stop_pipe[2];
	pthread_t server;
	int server_running;
	int warned_file, warned_events;
	/* counters */
	uint64_t rounds_ok, rounds_refused, rounds_failed, restores;
	uint64_t fb_fork, fb_nosnap, fb_full;
	double seconds_sum, frozen_sum, cpu_sum, restore_seconds_sum;
	uint64_t logical_sum, stored_sum;
	/* the last committed round, the last restore */
	int have_last;
	uint64_t last_seq, last_nprocs, last_logical, last_stored;
	double last_time, last_seconds, last_frozen, last_cpu, last_restore_seconds;
};

static double now_unix(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A growing text buffer; on allocation failure it stays short (ok = 0). */
struct tbuf {
	char *p;
	size_t n, cap;
	int ok;
};

static void tb_add(struct tbuf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (!b->ok)
		return;
	for (;;) {
		va_start(ap, fmt);
		k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->ok = 0;
			return;
		}
		if ((size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = (b->cap + (size_t)k) * 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->ok = 0;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

static void tb_init(struct tbuf *b)
{
	b->cap = 4096;
	b->n = 0;
	b->p = malloc(b->cap);
	b->ok = b->p != NULL;
	if (b->ok)
		b->p[0] = 0;
}

/* s as a Prometheus label value (quotes added by the caller) or a JSON
 * string body: the same three escapes, plus control bytes for JSON. */
static void tb_escaped(struct tbuf *b, const char *s, int json)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\' || c == '"')
			tb_add(b, "\\%c", c);
		else if (c == '\n')
			tb_add(b, "\\n");
		else if (json && c < 0x20)
			tb_add(b, "\\u%04x", c);
		else
			tb_add(b, "%c", c);
	}
}

static void metric(struct tbuf *b, const struct ck_telemetry *t, const char *name, const char *type,
		   const char *help, const char *label, double v)
{
	tb_add(b, "# HELP %s %s\n# TYPE %s %s\n%s{ckrun_job=\"", name, help, name, type, name);
	tb_escaped(b, t->job, 0);
	tb_add(b, "\"%s} %.9g\n", label ? label : "", v);
}

/* The text exposition of t (caller holds t->mu); NULL if out of memory. */
static char *render(const struct ck_telemetry *t, size_t *len)
{
	struct tbuf b;

	tb_init(&b);
	metric(&b, t, "ckrun_checkpoints_total", "counter", "Checkpoints committed.", NULL, (double)t->rounds_ok);
	tb_add(&b, "# HELP ckrun_checkpoint_failures_total Checkpoints not committed (refused: before the cut, the "
		   "job untouched).\n# TYPE ckrun_checkpoint_failures_total counter\n");
	tb_add(&b, "ckrun_checkpoint_failures_total{ckrun_job=\"");
	tb_escaped(&b, t->job, 0);
	tb_add(&b, "\",reason=\"refused\"} %llu\n", (unsigned long long)t->rounds_refused);
	tb_add(&b, "ckrun_checkpoint_failures_total{ckrun_job=\"");
	tb_escaped(&b, t->job, 0);
	tb_add(&b, "\",reason=\"failed\"} %llu\n", (unsigned long long)t->rounds_failed);
	tb_add(&b, "# HELP ckrun_checkpoint_fallbacks_total Rounds repeated another way.\n"
		   "# TYPE ckrun_checkpoint_fallbacks_total counter\n");
	static const char *const to[] = {"forked-snapshot", "no-snapshot", "full"};
	const uint64_t n[] = {t->fb_fork, t->fb_nosnap, t->fb_full};
	for (int i = 0; i < 3; i++) {
		tb_add(&b, "ckrun_checkpoint_fallbacks_total{ckrun_job=\"");
		tb_escaped(&b, t->job, 0);
		tb_add(&b, "\",to=\"%s\"} %llu\n", to[i], (unsigned long long)n[i]);
	}
	metric(&b, t, "ckrun_checkpoint_seconds_total", "counter", "Time from the request to the commit, summed.",
	       NULL, t->seconds_sum);
	metric(&b, t, "ckrun_checkpoint_frozen_seconds_total", "counter", "Time the job was stopped, summed.", NULL,
	       t->frozen_sum);
	metric(&b, t, "ckrun_checkpoint_cpu_seconds_total", "counter",
	       "CPU time of ckrun's own threads in rounds (reading, hashing, compressing), summed.", NULL, t->cpu_sum);
	metric(&b, t, "ckrun_checkpoint_logical_bytes_total", "counter", "Bytes of memory saved, summed.", NULL,
	       (double)t->logical_sum);
	metric(&b, t, "ckrun_checkpoint_stored_bytes_total", "counter",
	       "Bytes written to the store (compressed, deduplicated), summed.", NULL, (double)t->stored_sum);
	metric(&b, t, "ckrun_restores_total", "counter", "Restores by this ckrun (0 or 1).", NULL, (double)t->restores);
	metric(&b, t, "ckrun_restore_seconds_total", "counter", "Time to restore, summed.", NULL,
	       t->restore_seconds_sum);
	if (t->have_last) {
		metric(&b, t, "ckrun_last_checkpoint_timestamp_seconds", "gauge",
		       "When the newest checkpoint committed (Unix time).", NULL, t->last_time);
		metric(&b, t, "ckrun_last_checkpoint_sequence", "gauge", "Sequence of the newest checkpoint.", NULL,
		       (double)t->last_seq);
		metric(&b, t, "ckrun_last_checkpoint_seconds", "gauge", "Its time from request to commit.", NULL,
		       t->last_seconds);
		metric(&b, t, "ckrun_last_checkpoint_frozen_seconds", "gauge", "Its frozen time.", NULL,
		       t->last_frozen);
		metric(&b, t, "ckrun_last_checkpoint_cpu_seconds", "gauge", "Its CPU time in ckrun.", NULL,
		       t->last_cpu);
		metric(&b, t, "ckrun_last_checkpoint_processes", "gauge", "Its processes.", NULL,
		       (double)t->last_nprocs);
		metric(&b, t, "ckrun_last_checkpoint_logical_bytes", "gauge", "Its bytes of memory.", NULL,
		       (double)t->last_logical);
		metric(&b, t, "ckrun_last_checkpoint_stored_bytes", "gauge", "Its bytes written to the store.", NULL,
		       (double)t->last_stored);
	}
	if (t->restores)
		metric(&b, t, "ckrun_last_restore_seconds", "gauge", "Time the restore took.", NULL,
		       t->last_restore_seconds);
	if (!b.ok) {
		free(b.p);
		return NULL;
	}
	*len = b.n;
	return b.p;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* The metrics file, replaced whole: a reader sees the old or the new.
 * Mode 0644: the textfile collector runs as its own user, and the file
 * holds counters and the job's name only. Caller holds t->mu. */
static int write_metrics_file(struct ck_telemetry *t)
{
	char tmp[4200];
	size_t len = 0;
	char *text = render(t, &len);
	int fd, r;

	if (!text)
		return -ENOMEM;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%d", t->metrics_file, (int)getpid()) >= (int)sizeof(tmp)) {
		free(text);
		return -ENAMETOOLONG;
	}
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	r = write_all(fd, text, len);
	if (close(fd) < 0 && !r)
		r = -errno;
	if (!r && rename(tmp, t->metrics_file) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
out:
	free(text);
	return r;
}

/* Caller holds t->mu. */
static void after_change(struct ck_telemetry *t)
{
	int r;

	if (t->metrics_file && (r = write_metrics_file(t)) < 0 && !t->warned_file) {
		t->warned_file = 1;
		fprintf(stderr, "ckrun: warning: cannot write the metrics file %s: %s\n", t->metrics_file,
			strerror(-r));
	}
}

/* Starts an event object with its kind and time; the caller adds fields
 * and calls event_end. */
static void event_begin(struct tbuf *b, const char *kind)
{
	char when[64];
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	tb_init(b);
	tb_add(b, "{\"event\":\"%s\",\"time\":\"%s.%03ldZ\",\"job\":\"", kind, when, ts.tv_nsec / 1000000);
}

static void event_end(struct ck_telemetry *t, struct tbuf *b)
{
	int r;

	tb_add(b, "}\n");
	if (b->ok && t->events_fd >= 0 && (r = write_all(t->events_fd, b->p, b->n)) < 0 && !t->warned_events) {
		t->warned_events = 1;
		fprintf(stderr, "ckrun: warning: cannot write events: %s\n", strerror(-r));
	}
	free(b->p);
}

static void event_str(struct tbuf *b, const char *key, const char *v)
{
	tb_add(b, ",\"%s\":\"", key);
	tb_escaped(b, v ? v : "", 1);
	tb_add(b, "\"");
}

void ck_tel_round(struct ck_telemetry *t, const struct ck_tel_round *r)
{
	struct tbuf b;

	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	if (r->ok) {
		t->rounds_ok++;
		t->seconds_sum += r->seconds;
		t->frozen_sum += r->frozen_seconds;
		t->cpu_sum += r->cpu_seconds;
		t->logical_sum += r->logical_bytes;
		t->stored_sum += r->stored_bytes;
		t->have_last = 1;
		t->last_seq = r->seq;
		t->last_nprocs = r->nprocs;
		t->last_logical = r->logical_bytes;
		t->last_stored = r->stored_bytes;
		t->last_seconds = r->seconds;
		t->last_frozen = r->frozen_seconds;
		t->last_cpu = r->cpu_seconds;
		t->last_time = now_unix();
	} else if (r->refused) {
		t->rounds_refused++;
	} else {
		t->rounds_failed++;
	}
	after_change(t);
	event_begin(&b, r->ok ? "checkpoint" : r->refused ? "refusal" : "checkpoint-failed");
	tb_escaped(&b, t->job, 1);
	tb_add(&b, "\",\"seq\":%llu,\"stop\":%s", (unsigned long long)r->seq, r->stop ? "true" : "false");
	if (r->ok) {
		tb_add(&b,
		       ",\"processes\":%llu,\"logical_bytes\":%llu,\"stored_bytes\":%llu,\"seconds\":%.6f,"
		       "\"frozen_seconds\":%.6f,\"cpu_seconds\":%.6f",
		       (unsigned long long)r->nprocs, (unsigned long long)r->logical_bytes,
		       (unsigned long long)r->stored_bytes, r->seconds, r->frozen_seconds, r->cpu_seconds);
		event_str(&b, "snapshot", r->snapshot);
	} else {
		event_str(&b, "error", r->error);
	}
	event_end(t, &b);
	pthread_mutex_unlock(&t->mu);
}

void ck_tel_restore(struct ck_telemetry *t, uint64_t seq, double seconds)
{
	struct tbuf b;

	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	t->restores++;
	t->restore_seconds_sum += seconds;
	t->last_restore_seconds = seconds;
	after_change(t);
	event_begin(&b, "restore");
	tb_escaped(&b, t->job, 1);
	tb_add(&b, "\",\"seq\":%llu,\"seconds\":%.6f", (unsigned long long)seq, seconds);
	event_end(t, &b);
	pthread_mutex_unlock(&t->mu);
}

void ck_tel_fallback(struct ck_telemetry *t, uint64_t seq, const char *to, const char *why)
{
	struct tbuf b;

	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	if (!strcmp(to, "forked-snapshot"))
		t->fb_fork++;
	else if (!strcmp(to, "no-snapshot"))
		t->fb_nosnap++;
	else
		t->fb_full++;
	after_change(t);
	event_begin(&b, "fallback");
	tb_escaped(&b, t->job, 1);
	tb_add(&b, "\",\"seq\":%llu", (unsigned long long)seq);
	event_str(&b, "to", to);
	event_str(&b, "why", why);
	event_end(t, &b);
	pthread_mutex_unlock(&t->mu);
}

void ck_tel_end(struct ck_telemetry *t, int status, const char *how)
{
	struct tbuf b;

	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	event_begin(&b, "end");
	tb_escaped(&b, t->job, 1);
	tb_add(&b, "\",\"status\":%d", status);
	event_str(&b, "how", how);
	event_end(t, &b);
	pthread_mutex_unlock(&t->mu);
}

/* One connection: read the request head (bounded in size and time),
 * answer GET /metrics, 404 otherwise. */
static void serve_one(struct ck_telemetry *t, int fd)
{
	char req[2048], head[256];
	size_t n = 0;
	struct timeval tv = {2, 0};
	char *text = NULL;
	size_t len = 0;
	int hl;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (n < sizeof(req) - 1) {
		ssize_t k = read(fd, req + n, sizeof(req) - 1 - n);
		if (k <= 0)
			return;
		n += (size_t)k;
		req[n] = 0;
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	if (!strncmp(req, "GET /metrics ", 13) || !strncmp(req, "GET /metrics?", 13)) {
		pthread_mutex_lock(&t->mu);
		text = render(t, &len);
		pthread_mutex_unlock(&t->mu);
	}
	if (text)
		hl = snprintf(head, sizeof(head),
			      "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
			      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			      len);
	else
		hl = snprintf(head, sizeof(head),
			      "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 22\r\n"
			      "Connection: close\r\n\r\nonly GET /metrics here");
	if (write_all(fd, head, (size_t)hl) == 0 && text)
		write_all(fd, text, len);
	free(text);
}

static void *server_main(void *arg)
{
	struct ck_telemetry *t = arg;

	for (;;) {
		struct pollfd p[2] = {{t->listen_fd, POLLIN, 0}, {t->stop_pipe[0], POLLIN, 0}};
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve_one(t, fd);
		close(fd);
	}
	return NULL;
}

/* [HOST:]PORT; a bare port listens on loopback only: metrics are for the
 * node's collector, not the network, unless the operator says so. */
static int listen_on(const char *addr, int *out)
{
	char host[256] = "127.0.0.1";
	const char *port = addr, *colon = strrchr(addr, ':');
	struct addrinfo hints, *ai = NULL, *a;
	int fd = -1, r, one = 1;

	if (colon) {
		size_t n = (size_t)(colon - addr);
		if (n >= sizeof(host))
			goto bad;
		memcpy(host, addr, n);
		host[n] = 0;
		if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
			memmove(host, host + 1, n - 2);
			host[n - 2] = 0;
		}
		port = colon + 1;
	}
	if (!*port || strspn(port, "0123456789") != strlen(port) || atoi(port) > 65535)
		goto bad;
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	if ((r = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai)) != 0) {
		ck_err_set("--metrics %s: %s", addr, gai_strerror(r));
		return -EINVAL;
	}
	r = -EADDRNOTAVAIL;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 16) == 0)
			break;
		r = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		ck_err_set("--metrics %s: cannot listen: %s", addr, strerror(-r));
		return r;
	}
	*out = fd;
	return 0;
bad:
	ck_err_set("bad --metrics '%s' (PORT or HOST:PORT)", addr);
	return -EINVAL;
}

int ck_tel_open(const struct ck_tel_opts *o, struct ck_telemetry **out)
{
	struct ck_telemetry *t;
	int r;

	*out = NULL;
	if (!o->metrics_addr && !o->metrics_file && !o->events_file)
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->mu, NULL);
	t->events_fd = t->listen_fd = t->stop_pipe[0] = t->stop_pipe[1] = -1;
	t->job = strdup(o->job);
	t->metrics_file = o->metrics_file ? strdup(o->metrics_file) : NULL;
	if (!t->job || (o->metrics_file && !t->metrics_file)) {
		r = -ENOMEM;
		goto fail;
	}
	if (o->events_file) {
		t->events_fd = open(o->events_file, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (t->events_fd < 0) {
			r = -errno;
			ck_err_set("--events %s: %s", o->events_file, strerror(-r));
			goto fail;
		}
	}
	if (t->metrics_file && (r = write_metrics_file(t)) < 0) {
		ck_err_set("--metrics-file %s: %s", t->metrics_file, strerror(-r));
		goto fail;
	}
	if (o->metrics_addr) {
		if ((r = listen_on(o->metrics_addr, &t->listen_fd)) < 0)
			goto fail;
		if (pipe2(t->stop_pipe, O_CLOEXEC) < 0) {
			r = -errno;
			ck_err_set("--metrics: %s", strerror(-r));
			goto fail;
		}
		if ((r = pthread_create(&t->server, NULL, server_main, t)) != 0) {
			r = -r;
			ck_err_set("--metrics: cannot start the server thread: %s", strerror(-r));
			goto fail;
		}
		t->server_running = 1;
	}
	*out = t;
	return 0;
fail:
	ck_tel_close(t);
	return r;
}

void ck_tel_close(struct ck_telemetry *t)
{
	if (!t)
		return;
	if (t->server_running) {
		(void)!write(t->stop_pipe[1], "x", 1);
		pthread_join(t->server, NULL);
	}
	if (t->listen_fd >= 0)
		close(t->listen_fd);
	if (t->stop_pipe[0] >= 0)
		close(t->stop_pipe[0]);
	if (t->stop_pipe[1] >= 0)
		close(t->stop_pipe[1]);
	if (t->events_fd >= 0)
		close(t->events_fd);
	pthread_mutex_destroy(&t->mu);
	free(t->metrics_file);
	free(t->job);
	free(t);
}
