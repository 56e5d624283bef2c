/* The request engine of the S3 store: signs each attempt, carries several
 * requests at once over one curl multi handle, retries what is worth
 * retrying, and turns the rest into one error line.
 *
 * Retried: connection refused/reset, timeouts (connect and low-speed, so a
 * stalled server is noticed), truncated answers, HTTP 500/502/503/504, 408,
 * 429 and the S3 codes SlowDown/RequestTimeout/InternalError, also when they
 * come inside a 200 answer (CompleteMultipartUpload does that). Up to
 * cfg.max_tries attempts, exponential backoff with jitter between them. */
#include "launcher/store/s3/s3.h"
#include "launcher/common/ck_err.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#define MAX_SLOTS 32
#define ERR_BODY_MAX (64 * 1024 * 1024)

struct ck_s3_conn {
	CURLM *multi;
	CURL *easy[MAX_SLOTS];
	struct ck_s3_conn *next;
};

struct slot {
	CURL *e;
	struct ck_s3_req *r;
	struct curl_slist *hdrs;
	char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

/* HTTP requests sent (retries included), for ckrun's per-round report. */
static uint64_t ck__s3_requests;

uint64_t ck_s3_request_count(void)
{
	return __atomic_load_n(&ck__s3_requests, __ATOMIC_RELAXED);
}

int ck_s3_global_init(void)
{
	pthread_once(&global_once, global_init);
	return global_rc;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long env_ms(const char *name, long dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtol(v, NULL, 10) : dflt;
}

/* Full jitter on the upper half: tries that failed together do not come
 * back together. */
static double backoff_s(int tries)
{
	static __thread unsigned seed;
	long base = env_ms("CKPT_S3_BACKOFF_MS", 200), cap = 10000;
	double d;

	if (!seed)
		seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed;
	d = (double)base * (double)(1u << (tries - 1 < 16 ? tries - 1 : 16));
	if (d > (double)cap)
		d = (double)cap;
	d = d / 2 + (d / 2) * ((double)rand_r(&seed) / (double)RAND_MAX);
	return d / 1000.0;
}

void ck_s3_req_init(struct ck_s3_req *r, const char *method, const char *op, const char *key)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->op = op;
	r->key = key;
}

void ck_s3_req_query(struct ck_s3_req *r, const char *name, const char *value)
{
	if (r->nquery < CK_S3_MAXQ) {
		r->query[r->nquery].name = name;
		r->query[r->nquery++].value = value;
	}
}

void ck_s3_req_header(struct ck_s3_req *r, const char *name, const char *value)
{
	if (r->nhdr < CK_S3_MAXH) {
		r->hdr[r->nhdr].name = name;
		r->hdr[r->nhdr++].value = value;
	}
}

void ck_s3_req_free(struct ck_s3_req *r)
{
	ck_buf_free(&r->out);
}

static struct ck_s3_conn *pool_get(struct ck_s3 *s)
{
	struct ck_s3_conn *c;

	pthread_mutex_lock(&s->lock);
	c = s->idle;
	if (c)
		s->idle = c->next;
	pthread_mutex_unlock(&s->lock);
	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->multi = curl_multi_init();
	if (!c->multi) {
		free(c);
		return NULL;
	}
	return c;
}

static void pool_put(struct ck_s3 *s, struct ck_s3_conn *c)
{
	pthread_mutex_lock(&s->lock);
	c->next = s->idle;
	s->idle = c;
	pthread_mutex_unlock(&s->lock);
}

void ck_s3_pool_free(struct ck_s3 *s)
{
	struct ck_s3_conn *c = s->idle, *n;
	int i;

	while (c) {
		n = c->next;
		for (i = 0; i < MAX_SLOTS; i++)
			if (c->easy[i])
				curl_easy_cleanup(c->easy[i]);
		curl_multi_cleanup(c->multi);
		free(c);
		c = n;
	}
	s->idle = NULL;
}

/* ---- callbacks ---- */

static int hdr_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
	size_t k = strlen(name);

	if (n <= k || strncasecmp(line, name, k) || line[k] != ':')
		return 0;
	line += k + 1;
	n -= k + 1;
	while (n && (*line == ' ' || *line == '\t')) {
		line++;
		n--;
	}
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' '))
		n--;
	*val = line;
	*vlen = n;
	return 1;
}

static size_t on_header(char *line, size_t size, size_t nitems, void *arg)
{
	struct ck_s3_req *r = arg;
	size_t n = size * nitems, vlen;
	const char *v;

	if (n > 5 && !strncmp(line, "HTTP/", 5)) {
		const char *sp = memchr(line, ' ', n);

		/* a new status line (after 100 Continue): forget the old one */
		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->etag[0] = r->meta_sha256[0] = 0;
		r->have_length = 0;
	} else if (hdr_is(line, n, "content-length", &v, &vlen)) {
		r->content_length = strtoull(v, NULL, 10);
		r->have_length = 1;
	} else if (hdr_is(line, n, "etag", &v, &vlen)) {
		snprintf(r->etag, sizeof(r->etag), "%.*s", (int)vlen, v);
	} else if (hdr_is(line, n, "x-amz-meta-sha256", &v, &vlen)) {
		snprintf(r->meta_sha256, sizeof(r->meta_sha256), "%.*s", (int)vlen, v);
	}
	return n;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct ck_s3_req *r = arg;
	size_t n = size * nmemb;

	if (r->dst && r->status >= 200 && r->status < 300) {
		if (r->want_partial && r->status != 206) {
			r->overflow = 2; /* the server ignored Range */
			return 0;
		}
		if (r->dst_got + n > r->dst_len) {
			r->overflow = 1;
			return 0;
		}
		memcpy(r->dst + r->dst_got, data, n);
		r->dst_got += n;
		return n;
	}
	if (r->out.len + n > ERR_BODY_MAX) {
		r->overflow = 1;
		return 0;
	}
	ck_buf_add(&r->out, data, n);
	return r->out.oom ? 0 : n;
}

static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct ck_s3_req *r = arg;
	size_t n = size * nitems, left = r->body_len - r->body_off;

	if (n > left)
		n = left;
	if (n)
		memcpy(buf, (const char *)r->body + r->body_off, n);
	r->body_off += n;
	return n;
}

static int on_seek(void *arg, curl_off_t off, int origin)
{
	struct ck_s3_req *r = arg;

	if (origin != SEEK_SET || off < 0 || (size_t)off > r->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->body_off = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

/* ---- one attempt ---- */

/* Host header, path (as sent and signed) and URL of a request:
 * path-style  http://HOST:PORT/BUCKET/KEY?Q
 * virtual     http://BUCKET.HOST:PORT/KEY?Q */
int ck_s3_target(struct ck_s3 *s, const struct ck_s3_req *r, struct ck_buf *host, struct ck_buf *path,
		 struct ck_buf *url)
{
	size_t i;

	if (s->cfg.virtual_host)
		ck_buf_addf(host, "%s.%s", s->bucket, s->cfg.hostport);
	else
		ck_buf_adds(host, s->cfg.hostport);
	if (!s->cfg.virtual_host) {
		ck_buf_addc(path, '/');
		ck_buf_add_uri_encoded(path, s->bucket, strlen(s->bucket), 0);
	}
	if (r->key) {
		ck_buf_addc(path, '/');
		ck_buf_add_uri_encoded(path, r->key, strlen(r->key), 1);
	} else if (s->cfg.virtual_host) {
		ck_buf_addc(path, '/');
	}
	ck_buf_addf(url, "%s://%s%s", s->cfg.scheme, host->p ? host->p : "", path->p ? path->p : "/");
	for (i = 0; i < r->nquery; i++) {
		ck_buf_addc(url, i ? '&' : '?');
		ck_buf_add_uri_encoded(url, r->query[i].name, strlen(r->query[i].name), 0);
		if (r->query[i].value) {
			ck_buf_addc(url, '=');
			ck_buf_add_uri_encoded(url, r->query[i].value, strlen(r->query[i].value), 0);
		}
	}
	return host->oom || path->oom || url->oom ? -ENOMEM : 0;
}

static struct curl_slist *add_hdr(struct curl_slist *l, int *fail, const char *name, const char *value)
{
	struct ck_buf b = { 0 };
	struct curl_slist *n;
	char *line;

	ck_buf_addf(&b, "%s: %s", name, value);
	line = ck_buf_steal(&b);
	if (!line) {
		*fail = 1;
		return l;
	}
	n = curl_slist_append(l, line);
	free(line);
	if (!n) {
		*fail = 1;
		return l;
	}
	return n;
}

static int start(struct ck_s3 *s, CURLM *multi, struct slot *sl, struct ck_s3_req *r)
{
	struct ck_sigv4_kv hdr[CK_S3_MAXH + 4];
	struct ck_sigv4_key k = { s->cfg.access_key, s->cfg.secret_key, s->cfg.region, "s3" };
	struct ck_sigv4_req sr = { 0 };
	struct ck_buf path = { 0 }, url = { 0 }, host = { 0 };
	char date[17], *authz = NULL;
	size_t nh = 0, i;
	int fail = 0, ret = -ENOMEM;
	CURL *e = sl->e;

	/* reset the answer of an earlier attempt */
	r->status = 0;
	r->dst_got = 0;
	r->body_off = 0;
	r->overflow = 0;
	r->have_length = 0;
	r->etag[0] = r->meta_sha256[0] = 0;
	ck_buf_reset(&r->out);
	r->tries++;

	if (ck_s3_target(s, r, &host, &path, &url))
		goto out;

	ck_sigv4_amz_date((long long)time(NULL), date);
	hdr[nh].name = "host";
	hdr[nh++].value = host.p;
	hdr[nh].name = "x-amz-date";
	hdr[nh++].value = date;
	hdr[nh].name = "x-amz-content-sha256";
	hdr[nh++].value = r->body_sha256;
	if (s->cfg.session_token) {
		hdr[nh].name = "x-amz-security-token";
		hdr[nh++].value = s->cfg.session_token;
	}
	for (i = 0; i < r->nhdr; i++)
		hdr[nh++] = r->hdr[i];
	sr.method = r->method;
	sr.path = path.p;
	sr.query = r->query;
	sr.nquery = r->nquery;
	sr.headers = hdr;
	sr.nheaders = nh;
	sr.payload_hash = r->body_sha256;
	sr.normalize = 0;
	ret = ck_sigv4_authorization(&k, date, &sr, &authz);
	if (ret)
		goto out;
	ret = -ENOMEM;

	curl_slist_free_all(sl->hdrs);
	sl->hdrs = NULL;
	for (i = 0; i < nh; i++)
		sl->hdrs = add_hdr(sl->hdrs, &fail, hdr[i].name, hdr[i].value);
	sl->hdrs = add_hdr(sl->hdrs, &fail, "Authorization", authz);
	/* no "Expect: 100-continue" round trip before each part */
	sl->hdrs = curl_slist_append(sl->hdrs, "Expect:");
	if (fail || !sl->hdrs)
		goto out;

	curl_easy_reset(e);
	sl->errbuf[0] = 0;
	curl_easy_setopt(e, CURLOPT_URL, url.p);
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L); /* sign and send the same path */
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, sl->hdrs);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, sl->errbuf);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, s->cfg.connect_timeout_s);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, s->cfg.stall_timeout_s);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(e, CURLOPT_PRIVATE, sl);
	if (s->cfg.ca)
		curl_easy_setopt(e, CURLOPT_CAINFO, s->cfg.ca);
	if (!strcmp(r->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(r->method, "PUT") || !strcmp(r->method, "POST")) {
		/* always a known Content-Length: RGW refuses chunked uploads */
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(e, CURLOPT_READDATA, r);
		curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(e, CURLOPT_SEEKDATA, r);
		if (!strcmp(r->method, "POST"))
			curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "POST");
	} else if (strcmp(r->method, "GET")) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
	}
	if (curl_multi_add_handle(multi, e) != CURLM_OK)
		goto out;
	__atomic_add_fetch(&ck__s3_requests, 1, __ATOMIC_RELAXED);
	sl->r = r;
	ret = 0;
out:
	free(authz);
	ck_buf_free(&path);
	ck_buf_free(&url);
	ck_buf_free(&host);
	return ret;
}

static int status_errno(long st)
{
	switch (st) {
	case 404: return -ENOENT;
	case 401:
	case 403: return -EACCES;
	case 412: return -EEXIST;
	case 400: return -EINVAL;
	case 409: return -EBUSY;
	default: return -EIO;
	}
}

static const char *status_code_name(long st)
{
	switch (st) {
	case 400: return "BadRequest";
	case 403: return "Forbidden";
	case 404: return "NotFound";
	case 411: return "MissingContentLength";
	case 412: return "PreconditionFailed";
	case 416: return "InvalidRange";
	case 500: return "InternalError";
	case 503: return "ServiceUnavailable";
	default: return "";
	}
}

static int curl_retryable(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_READ_ERROR:
		return 1;
	default:
		return 0;
	}
}

static int curl_errno(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING: return -ECONNRESET;
	case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE: return -EACCES;
	default: return -EIO;
	}
}

struct run_state {
	int failed;      /* a request failed for good */
	int have_msg;    /* the error line is set */
};

static void fail_msg(struct ck_s3 *s, struct run_state *rs, struct ck_s3_req *r, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* "s3: put s3://bucket/key (PUT at http://host:port): <what>, after N tries" */
static void fail_msg(struct ck_s3 *s, struct run_state *rs, struct ck_s3_req *r, const char *fmt, ...)
{
	char what[512];
	va_list ap;

	rs->failed = 1;
	if (rs->have_msg)
		return;
	rs->have_msg = 1;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	ck_err_set("s3: %s s3://%s/%s (%s at %s): %s, after %d %s", r->op, s->bucket, r->key ? r->key : "",
		   r->method, s->endpoint_desc, what, r->tries, r->tries == 1 ? "try" : "tries");
}

/* The Code or Message of an error answer, fit for one line of a log: an
 * error body is the gateway's text, and some echo the request (the
 * canonical request, header values: the Authorization header among them).
 * Only the <Error> element's own Code and Message are taken; control
 * characters become spaces, and the text is cut at anything that looks
 * like a request header or a credential, and at max bytes. */
static char *error_field(const char *body, size_t len, const char *tag, size_t max)
{
	static const char *const cut_at[] = {"authorization", "credential=", "signature=", "security-token",
					     "aws4-hmac"};
	const char *in;
	size_t inlen, pos = 0, i, n;
	char *v, *c;

	/* inside <Error> when there is one: not a Code of some echoed part */
	if (ck_xml_next(body, len, &pos, "Error", &in, &inlen)) {
		body = in;
		len = inlen;
	}
	v = ck_xml_text(body, len, tag);
	if (!v)
		return NULL;
	for (c = v; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	n = strlen(v);
	for (i = 0; i < sizeof(cut_at) / sizeof(cut_at[0]); i++) {
		const char *hit = strcasestr(v, cut_at[i]);

		if (hit && (size_t)(hit - v) < n)
			n = (size_t)(hit - v);
	}
	/* a header line "x-amz-NAME: value" (names alone say nothing) */
	for (c = v; (c = strcasestr(c, "x-amz-")) && (size_t)(c - v) < n; c++) {
		const char *e = c + 6;

		while ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z') || (*e >= '0' && *e <= '9') || *e == '-')
			e++;
		if (*e == ':' || *e == '=') {
			n = (size_t)(c - v);
			break;
		}
	}
	if (n > max)
		n = max;
	if (n < strlen(v)) {
		char *t;

		while (n && v[n - 1] == ' ')
			n--;
		if (asprintf(&t, "%.*s%s[...]", (int)n, v, n ? " " : "") < 0)
			t = NULL;
		free(v);
		v = t;
	}
	return v;
}

/* Decides what an ended attempt means: 1 = retry it, 0 = final. */
static int judge(struct ck_s3 *s, struct run_state *rs, struct slot *sl, CURLcode cc)
{
	struct ck_s3_req *r = sl->r;
	char *code = NULL, *msg = NULL;
	long st = 0;
	int retry = 0;

	curl_easy_getinfo(sl->e, CURLINFO_RESPONSE_CODE, &st);
	if (st)
		r->status = st;
	if (cc != CURLE_OK) {
		if (r->overflow) {
			r->result = -EIO;
			fail_msg(s, rs, r, "%s",
				 r->overflow == 2 ? "server ignored the Range header"
						  : "answer longer than the object's known size (changed while read?)");
			return 0;
		}
		if (curl_retryable(cc) && r->tries < s->cfg.max_tries)
			return 1;
		r->result = curl_errno(cc);
		fail_msg(s, rs, r, "%s%s%s", curl_easy_strerror(cc), sl->errbuf[0] ? ": " : "", sl->errbuf);
		return 0;
	}
	if (r->status >= 200 && r->status < 300) {
		/* CompleteMultipartUpload reports some failures in a 200 answer */
		if (r->out.len && !r->dst && (code = ck_xml_text(r->out.p, r->out.len, "Error"))) {
			free(code);
			code = error_field(r->out.p, r->out.len, "Code", 64);
			if (r->tries < s->cfg.max_tries) {
				free(code);
				return 1;
			}
			r->result = -EIO;
			fail_msg(s, rs, r, "HTTP %ld with error %s", r->status, code ? code : "?");
			free(code);
			return 0;
		}
		r->result = 0;
		return 0;
	}
	if (r->out.len) {
		code = error_field(r->out.p, r->out.len, "Code", 64);
		msg = error_field(r->out.p, r->out.len, "Message", 200);
	}
	retry = r->status == 500 || r->status == 502 || r->status == 503 || r->status == 504 || r->status == 408 ||
		r->status == 429 ||
		(code && (!strcmp(code, "SlowDown") || !strcmp(code, "RequestTimeout") ||
			  !strcmp(code, "InternalError") || !strcmp(code, "ServiceUnavailable")));
	if (retry && r->tries < s->cfg.max_tries) {
		free(code);
		free(msg);
		return 1;
	}
	r->result = retry ? -EIO : status_errno(r->status);
	/* a missing key is an answer, not a failure worth a loud message,
	 * but callers still get one naming the key */
	fail_msg(s, rs, r, "HTTP %ld %s%s%s%s", r->status, code && *code ? code : status_code_name(r->status),
		 msg && *msg ? ": " : "", msg && *msg ? msg : "",
		 /* HEAD answers have no body to name the cause */
		 !code && r->status == 403 && !strcmp(r->method, "HEAD")
			 ? " (no error code in a HEAD answer: wrong secret key, or no permission)"
			 : "");
	free(code);
	free(msg);
	return 0;
}

int ck_s3_run(struct ck_s3 *s, struct ck_s3_req **reqs, size_t n, int parallel, int stop_on_error)
{
	struct slot slots[MAX_SLOTS];
	struct run_state rs = { 0, 0 };
	struct ck_s3_conn *c;
	size_t first = 0, i, done = 0, running = 0;
	int *state, ret = 0, still, k, debug = getenv("CKPT_S3_DEBUG") != NULL;

	if (parallel < 1)
		parallel = 1;
	if (parallel > MAX_SLOTS)
		parallel = MAX_SLOTS;
	if ((size_t)parallel > n)
		parallel = (int)n;
	state = calloc(n + 1, sizeof(*state)); /* 0 waiting, 1 running, 2 done */
	c = pool_get(s);
	if (!state || !c) {
		free(state);
		if (c)
			pool_put(s, c);
		ck_err_set("s3: out of memory");
		return -ENOMEM;
	}
	memset(slots, 0, sizeof(slots));
	for (k = 0; k < parallel; k++) {
		if (!c->easy[k])
			c->easy[k] = curl_easy_init();
		slots[k].e = c->easy[k];
		if (!slots[k].e) {
			ret = -ENOMEM;
			ck_err_set("s3: out of memory");
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		reqs[i]->tries = 0;
		reqs[i]->not_before = 0;
		reqs[i]->result = 0;
		if (!reqs[i]->body_sha256[0])
			ck_sha256_hex(reqs[i]->body ? reqs[i]->body : "", reqs[i]->body_len, reqs[i]->body_sha256);
	}

	while (done < n) {
		double t = now_s(), wake = t + 0.1;
		CURLMsg *m;
		int left;

		if (rs.failed && stop_on_error) {
			/* give up the rest at once: the caller aborts anyway */
			for (i = first; i < n; i++)
				if (state[i] == 0) {
					reqs[i]->result = -ECANCELED;
					state[i] = 2;
					done++;
				}
			for (k = 0; k < parallel; k++)
				if (slots[k].r) {
					curl_multi_remove_handle(c->multi, slots[k].e);
					slots[k].r->result = -ECANCELED;
					*(int *)slots[k].r->priv = 2;
					slots[k].r = NULL;
					running--;
					done++;
				}
			break;
		}
		/* fill free slots with requests whose backoff has passed */
		for (k = 0; k < parallel; k++) {
			if (slots[k].r)
				continue;
			while (first < n && state[first] == 2)
				first++;
			for (i = first; i < n; i++) {
				if (state[i] != 0)
					continue;
				if (reqs[i]->not_before > t) {
					if (reqs[i]->not_before < wake)
						wake = reqs[i]->not_before;
					continue;
				}
				ret = start(s, c->multi, &slots[k], reqs[i]);
				if (ret) {
					reqs[i]->result = ret;
					fail_msg(s, &rs, reqs[i], "cannot set up the request (%s)", strerror(-ret));
					state[i] = 2;
					done++;
					ret = 0;
					continue;
				}
				reqs[i]->priv = &state[i];
				state[i] = 1;
				running++;
				break;
			}
		}
		if (!running) {
			if (done >= n)
				break;
			if (wake > t)
				curl_multi_poll(c->multi, NULL, 0, (int)((wake - t) * 1000) + 1, NULL);
			continue;
		}
		curl_multi_perform(c->multi, &still);
		while ((m = curl_multi_info_read(c->multi, &left))) {
			struct slot *sl = NULL;

			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&sl);
			if (!sl || !sl->r)
				continue;
			curl_multi_remove_handle(c->multi, sl->e);
			running--;
			if (judge(s, &rs, sl, m->data.result)) {
				sl->r->not_before = now_s() + backoff_s(sl->r->tries);
				*(int *)sl->r->priv = 0;
				__atomic_add_fetch(&s->retries, 1, __ATOMIC_RELAXED);
				if (debug)
					fprintf(stderr, "s3: retry %d of %s %s/%s (status %ld, curl %d)\n",
						sl->r->tries, sl->r->method, s->bucket, sl->r->key ? sl->r->key : "",
						sl->r->status, (int)m->data.result);
			} else {
				*(int *)sl->r->priv = 2;
				done++;
			}
			sl->r = NULL;
		}
		t = now_s();
		if (done < n)
			curl_multi_poll(c->multi, NULL, 0, wake > t ? (int)((wake - t) * 1000) + 1 : 1, NULL);
	}
	for (i = 0; i < n; i++)
		if (reqs[i]->result && reqs[i]->result != -ECANCELED) {
			ret = reqs[i]->result;
			break;
		}
	if (!ret)
		for (i = 0; i < n; i++)
			if (reqs[i]->result) {
				ret = reqs[i]->result;
				break;
			}
out:
	for (k = 0; k < parallel; k++) {
		curl_slist_free_all(slots[k].hdrs);
		curl_easy_setopt(slots[k].e, CURLOPT_HTTPHEADER, NULL);
	}
	pool_put(s, c);
	free(state);
	return ret;
}

int ck_s3_run1(struct ck_s3 *s, struct ck_s3_req *r)
{
	return ck_s3_run(s, &r, 1, 1, 1);
}
