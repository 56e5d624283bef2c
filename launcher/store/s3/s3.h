/* Internal interface of the S3 store backend (store_s3.c and friends).
 *
 * One request = struct ck_s3_req. ck_s3_run() carries any number of them
 * over one curl multi handle, several at once, retrying each one on its own
 * (connection resets, timeouts, 500/502/503/504, SlowDown) with exponential
 * backoff and jitter, and records one error line for the first that fails
 * for good. Handles are pooled per store so connections are reused; every
 * call takes its own, which makes the store safe to use from many threads. */
#ifndef CK_S3_H
#define CK_S3_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/store/store.h"
#include "launcher/store/s3/s3_buf.h"
#include "launcher/store/s3/sigv4.h"

#define CK_S3_MIB (1024ULL * 1024)
/* Above this, puts go multipart and reads split into parallel ranges. */
#define CK_S3_SINGLE_MAX (16 * CK_S3_MIB)
#define CK_S3_PART_MIN (8 * CK_S3_MIB)
#define CK_S3_PART_MAX (128 * CK_S3_MIB)
#define CK_S3_MAX_PARTS 10000
#define CK_S3_PUT_MAX (5ULL << 30) /* one PUT */
#define CK_S3_RANGE_SIZE (8 * CK_S3_MIB)

struct ck_s3_cfg {
	char *scheme;    /* "http" or "https" */
	char *hostport;  /* "127.0.0.1:7480", as the Host header names it */
	char *region;
	char *access_key;
	char *secret_key;  /* never printed */
	char *session_token;
	char *ca;          /* private CA bundle, or NULL for the system store */
	int virtual_host;
	long connect_timeout_s;
	long stall_timeout_s; /* below 1 KiB/s this long = stalled */
	int max_tries;
	int parallel;         /* transfers in flight per operation */
};

struct ck_s3_conn;

struct ck_s3 {
	struct ck_store base;
	struct ck_s3_cfg cfg;
	char *bucket;
	char *prefix; /* "" or ends with '/' */
	char *endpoint_desc; /* "scheme://hostport" for messages */
	pthread_mutex_t lock;
	struct ck_s3_conn *idle; /* pooled multi handles */
	uint64_t retries;        /* attempts repeated, for tests and logs */
};

#define CK_S3_MAXQ 6
#define CK_S3_MAXH 6

struct ck_s3_req {
	/* what to send */
	const char *method;
	const char *op;       /* "put", "get", ... for messages */
	const char *key;      /* full object key; NULL for the bucket */
	struct ck_sigv4_kv query[CK_S3_MAXQ];
	size_t nquery;
	struct ck_sigv4_kv hdr[CK_S3_MAXH]; /* extra signed headers */
	size_t nhdr;
	const void *body;
	size_t body_len;
	char body_sha256[CK_SHA256_HEX_LEN + 1]; /* filled by ck_s3_run if empty */
	/* where the answer goes: a fixed region (ranged reads), else out */
	char *dst;
	size_t dst_len;
	int want_partial; /* dst must be answered by 206 */
	/* results */
	long status;
	int result;            /* 0 or -errno, final */
	struct ck_buf out;     /* body of a non-dst answer, and of errors */
	size_t dst_got;
	uint64_t content_length;
	int have_length;
	char etag[128];
	char meta_sha256[CK_SHA256_HEX_LEN + 1];
	/* runner state */
	int tries;
	double not_before;
	size_t body_off;
	int overflow;
	void *priv;
};

/* s3_config.c */
int ck_s3_cfg_load(struct ck_s3_cfg *c, const struct ck_store_opts *opts, const char *uri);
void ck_s3_cfg_free(struct ck_s3_cfg *c);

/* s3_http.c */
void ck_s3_req_init(struct ck_s3_req *r, const char *method, const char *op, const char *key);
void ck_s3_req_query(struct ck_s3_req *r, const char *name, const char *value);
void ck_s3_req_header(struct ck_s3_req *r, const char *name, const char *value);
void ck_s3_req_free(struct ck_s3_req *r);
/* Runs n requests, at most `parallel` at once. Returns 0 if all succeeded,
 * else the first final error (and its message). stop_on_error: do not start
 * further requests once one failed for good. */
int ck_s3_run(struct ck_s3 *s, struct ck_s3_req **reqs, size_t n, int parallel, int stop_on_error);
int ck_s3_run1(struct ck_s3 *s, struct ck_s3_req *r);
int ck_s3_target(struct ck_s3 *s, const struct ck_s3_req *r, struct ck_buf *host, struct ck_buf *path,
		 struct ck_buf *url);
void ck_s3_pool_free(struct ck_s3 *s);
int ck_s3_global_init(void);

/* s3_xml.c: the few fields S3 answers carry. */
char *ck_xml_text(const char *xml, size_t len, const char *tag);
/* Next <tag>...</tag> at or after *pos; returns its inner text (not
 * decoded) through in/inlen and advances *pos; 0 when none is left. */
int ck_xml_next(const char *xml, size_t len, size_t *pos, const char *tag, const char **in, size_t *inlen);
char *ck_xml_decode(const char *s, size_t n);

/* s3_put.c */
int ck_s3_put(struct ck_store *st, const char *key, const void *buf, size_t len, unsigned flags);

/* store_s3.c helpers shared with s3_put.c */
char *ck_s3_full_key(struct ck_s3 *s, const char *key);
int ck_s3_head(struct ck_s3 *s, const char *fullkey, const char *op, struct ck_s3_req *out);

#endif
