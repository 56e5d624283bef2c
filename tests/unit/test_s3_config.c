/* S3 store without a server: address parsing, endpoint/region/credential
 * sources, the XML reader, and a clean error after retries when nothing
 * listens. Secrets must never reach an error message. */
#include "tests/unit/unit.h"
#include "launcher/common/ck_err.h"
#include "launcher/store/s3/s3.h"
#include "launcher/store/s3/store_s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const k_vars[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
				      "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_REGION",
				      "AWS_DEFAULT_REGION", "CKPT_S3_ENDPOINT", "AWS_ENDPOINT_URL", NULL };

static void clean_env(void)
{
	int i;

	for (i = 0; k_vars[i]; i++)
		unsetenv(k_vars[i]);
	setenv("HOME", "/nonexistent-home", 1);
}

static struct ck_s3 *open_ok(const char *uri, const struct ck_store_opts *o)
{
	struct ck_store *st = NULL;
	int rc = ck_store_s3_open(uri, o, &st);

	CHECK_EQ_INT(rc, 0);
	if (rc)
		fprintf(stderr, "  open %s: %s\n", uri, ck_err_msg());
	return (struct ck_s3 *)st;
}

static void close_s3(struct ck_s3 *s)
{
	if (s)
		s->base.ops->close(&s->base);
}

static void test_uri_and_endpoint(void)
{
	struct ck_store_opts o = { 0 };
	struct ck_store *st = NULL;
	struct ck_s3 *s;

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "TOPSECRETVALUE", 1);
	s = open_ok("s3://my-bucket//jobs/a//", NULL);
	if (s) {
		CHECK_EQ_STR(s->bucket, "my-bucket");
		CHECK_EQ_STR(s->prefix, "jobs/a/");
		CHECK_EQ_STR(s->cfg.region, "us-east-1");
		CHECK_EQ_STR(s->endpoint_desc, "https://s3.us-east-1.amazonaws.com");
		CHECK_EQ_STR(s->base.ops->scheme, "s3");
	}
	close_s3(s);
	setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
	s = open_ok("s3://bkt", NULL);
	if (s) {
		CHECK_EQ_STR(s->prefix, "");
		CHECK_EQ_STR(s->cfg.region, "eu-west-3");
		CHECK_EQ_STR(s->endpoint_desc, "http://127.0.0.1:9000");
	}
	close_s3(s);
	setenv("AWS_REGION", "ap-south-1", 1);
	setenv("CKPT_S3_ENDPOINT", "http://127.0.0.1:7480/", 1);
	s = open_ok("s3://bkt/p", NULL);
	if (s) {
		CHECK_EQ_STR(s->cfg.region, "ap-south-1");
		CHECK_EQ_STR(s->cfg.hostport, "127.0.0.1:7480");
	}
	close_s3(s);
	o.s3_endpoint = "https://gw.example:8443";
	o.s3_ca = "/etc/ssl/private-ca.pem";
	o.s3_virtual_host = 1;
	s = open_ok("s3://bkt/p", &o);
	if (s) {
		CHECK_EQ_STR(s->endpoint_desc, "https://gw.example:8443");
		CHECK_EQ_STR(s->cfg.ca, "/etc/ssl/private-ca.pem");
		CHECK_EQ_INT(s->cfg.virtual_host, 1);
	}
	close_s3(s);

	CHECK_EQ_INT(ck_store_s3_open("file:///tmp", NULL, &st), -EINVAL);
	CHECK_EQ_INT(ck_store_s3_open("s3://x/p", NULL, &st), -EINVAL);
	CHECK(strstr(ck_err_msg(), "bad bucket name") != NULL);
	o.s3_endpoint = "ftp://host";
	CHECK_EQ_INT(ck_store_s3_open("s3://bkt/p", &o, &st), -EINVAL);
	o.s3_endpoint = "http://host/with/path";
	CHECK_EQ_INT(ck_store_s3_open("s3://bkt/p", &o, &st), -EINVAL);
	CHECK(strstr(ck_err_msg(), "TOPSECRETVALUE") == NULL);
}

static void test_credentials(void)
{
	char path[] = "/tmp/ck-s3-cred-XXXXXX";
	struct ck_store *st = NULL;
	struct ck_s3 *s;
	FILE *f;
	int fd;

	clean_env();
	CHECK_EQ_INT(ck_store_s3_open("s3://bkt/p", NULL, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "no credentials for s3://bkt/p") != NULL);
	CHECK(strstr(ck_err_msg(), "AWS_ACCESS_KEY_ID") != NULL);

	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	CHECK_EQ_INT(ck_store_s3_open("s3://bkt/p", NULL, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "AWS_SECRET_ACCESS_KEY is not") != NULL);
	unsetenv("AWS_ACCESS_KEY_ID");
	setenv("AWS_SECRET_ACCESS_KEY", "ONLYSECRET", 1);
	CHECK_EQ_INT(ck_store_s3_open("s3://bkt/p", NULL, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "ONLYSECRET") == NULL);
	unsetenv("AWS_SECRET_ACCESS_KEY");

	fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	f = fdopen(fd, "w");
	fprintf(f, "# comment\n[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = DEFAULTSECRET\n\n"
		   "[ck]\n  aws_access_key_id=CKKEY  \naws_secret_access_key= CKSECRET\naws_session_token = TOK\n");
	fclose(f);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	s = open_ok("s3://bkt/p", NULL);
	if (s) {
		CHECK_EQ_STR(s->cfg.access_key, "DEFAULTKEY");
		CHECK_EQ_STR(s->cfg.secret_key, "DEFAULTSECRET");
		CHECK(s->cfg.session_token == NULL);
	}
	close_s3(s);
	setenv("AWS_PROFILE", "ck", 1);
	s = open_ok("s3://bkt/p", NULL);
	if (s) {
		CHECK_EQ_STR(s->cfg.access_key, "CKKEY");
		CHECK_EQ_STR(s->cfg.secret_key, "CKSECRET");
		CHECK_EQ_STR(s->cfg.session_token, "TOK");
	}
	close_s3(s);
	setenv("AWS_PROFILE", "missing", 1);
	CHECK_EQ_INT(ck_store_s3_open("s3://bkt/p", NULL, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "[missing]") != NULL);
	CHECK(strstr(ck_err_msg(), "DEFAULTSECRET") == NULL && strstr(ck_err_msg(), "CKSECRET") == NULL);
	/* variables win over the file */
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	s = open_ok("s3://bkt/p", NULL);
	if (s)
		CHECK_EQ_STR(s->cfg.access_key, "ENVKEY");
	close_s3(s);
	unlink(path);
}

/* --s3-profile: a section naming a whole site, chosen per store (ckpt cp
 * between two sites opens two stores, each with its own). */
static void test_site_profile(void)
{
	char path[] = "/tmp/ck-s3-site-XXXXXX";
	struct ck_store_opts a = { 0 }, b = { 0 };
	struct ck_store *st = NULL;
	struct ck_s3 *s;
	FILE *f;
	int fd;

	clean_env();
	fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	f = fdopen(fd, "w");
	fprintf(f, "[siteA]\naws_access_key_id = AKEY\naws_secret_access_key = ASECRET\n"
		   "endpoint_url = http://10.231.1.1:7481\nregion = site-a\n"
		   "[profile siteB]\naws_access_key_id = BKEY\naws_secret_access_key = BSECRET\n"
		   "endpoint_url = https://10.231.2.1:7482\nca_bundle = /etc/b-ca.pem\n"
		   "[nokeys]\nendpoint_url = http://10.231.3.1:1\n");
	fclose(f);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	/* the environment's keys and endpoint do not override a named site */
	setenv("AWS_ACCESS_KEY_ID", "ENVKEY", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "ENVSECRET", 1);
	setenv("CKPT_S3_ENDPOINT", "http://127.0.0.1:7480", 1);
	setenv("AWS_REGION", "env-region", 1);
	a.s3_profile = "siteA";
	b.s3_profile = "siteB";
	s = open_ok("s3://site-a/jobs", &a);
	if (s) {
		CHECK_EQ_STR(s->cfg.access_key, "AKEY");
		CHECK_EQ_STR(s->cfg.secret_key, "ASECRET");
		CHECK_EQ_STR(s->endpoint_desc, "http://10.231.1.1:7481");
		CHECK_EQ_STR(s->cfg.region, "site-a");
		CHECK(s->cfg.ca == NULL);
	}
	close_s3(s);
	s = open_ok("s3://site-b/jobs", &b);
	if (s) {
		CHECK_EQ_STR(s->cfg.access_key, "BKEY");
		CHECK_EQ_STR(s->endpoint_desc, "https://10.231.2.1:7482");
		CHECK_EQ_STR(s->cfg.ca, "/etc/b-ca.pem");
		CHECK_EQ_STR(s->cfg.region, "env-region");
	}
	close_s3(s);
	/* options come before the profile */
	b.s3_endpoint = "http://127.0.0.1:9";
	b.s3_ca = "/etc/other.pem";
	s = open_ok("s3://site-b/jobs", &b);
	if (s) {
		CHECK_EQ_STR(s->endpoint_desc, "http://127.0.0.1:9");
		CHECK_EQ_STR(s->cfg.ca, "/etc/other.pem");
		CHECK_EQ_STR(s->cfg.access_key, "BKEY");
	}
	close_s3(s);
	/* a named profile that is not there, or lacks keys: one line, no
	 * fallback to the environment's keys */
	a.s3_profile = "siteC";
	CHECK_EQ_INT(ck_store_s3_open("s3://site-a/jobs", &a, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "no profile [siteC]") != NULL);
	CHECK(strstr(ck_err_msg(), path) != NULL);
	a.s3_profile = "nokeys";
	CHECK_EQ_INT(ck_store_s3_open("s3://site-a/jobs", &a, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "[nokeys]") != NULL && strstr(ck_err_msg(), "lacks") != NULL);
	CHECK(strstr(ck_err_msg(), "ENVSECRET") == NULL && strstr(ck_err_msg(), "ASECRET") == NULL);
	unlink(path);
	a.s3_profile = "siteA";
	CHECK_EQ_INT(ck_store_s3_open("s3://site-a/jobs", &a, &st), -EACCES);
	CHECK(strstr(ck_err_msg(), "no profile [siteA]") != NULL);
}

static void test_xml(void)
{
	const char *x = "<?xml?><ListBucketResult><KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>"
			"<Contents><Key>a&amp;b &lt;c&gt; &#233;</Key><Size>5</Size></Contents>"
			"<Contents><Key>z</Key><Size>7</Size></Contents>"
			"<NextContinuationToken>tok/+=</NextContinuationToken><Empty/></ListBucketResult>";
	size_t pos = 0, inlen, n = 0;
	const char *in;
	char *t;

	t = ck_xml_text(x, strlen(x), "Key");
	CHECK_EQ_STR(t, "a&b <c> \xc3\xa9");
	free(t);
	t = ck_xml_text(x, strlen(x), "NextContinuationToken");
	CHECK_EQ_STR(t, "tok/+=");
	free(t);
	t = ck_xml_text(x, strlen(x), "Empty");
	CHECK_EQ_STR(t, "");
	free(t);
	CHECK(ck_xml_text(x, strlen(x), "Code") == NULL);
	while (ck_xml_next(x, strlen(x), &pos, "Contents", &in, &inlen)) {
		t = ck_xml_text(in, inlen, "Size");
		CHECK_EQ_STR(t, n ? "7" : "5");
		free(t);
		n++;
	}
	CHECK_EQ_INT(n, 2);
}

/* Nothing listens: every attempt is refused; the error comes after the
 * configured number of tries and names endpoint, operation and key. */
static void test_unreachable(void)
{
	struct ck_store_opts o = { 0 };
	struct ck_store *st = NULL;
	uint64_t size;
	int rc;

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "TOPSECRETVALUE", 1);
	setenv("CKPT_S3_TRIES", "3", 1);
	setenv("CKPT_S3_BACKOFF_MS", "10", 1);
	o.s3_endpoint = "http://127.0.0.1:1";
	rc = ck_store_s3_open("s3://bkt/pre", &o, &st);
	CHECK_EQ_INT(rc, 0);
	if (rc)
		return;
	CHECK_EQ_INT(ck_store_stat(st, "JOB/manifests/1", &size), -ECONNREFUSED);
	CHECK(strstr(ck_err_msg(), "s3://bkt/pre/JOB/manifests/1") != NULL);
	CHECK(strstr(ck_err_msg(), "http://127.0.0.1:1") != NULL);
	CHECK(strstr(ck_err_msg(), "after 3 tries") != NULL);
	/* also the strong reference that pulls the backend out of the
	 * archive: store.h declares ck_store_s3_open weak */
	CHECK_EQ_INT(ck_store_s3_retries(st), 2);
	CHECK(strstr(ck_err_msg(), "TOPSECRETVALUE") == NULL);
	CHECK_EQ_INT(ck_store_put(st, "k", "x", 1, CK_PUT_NOREPLACE), -ECONNREFUSED);
	CHECK_EQ_INT(ck_store_put(st, "", "x", 1, 0), -EINVAL);
	st->ops->close(st);
	unsetenv("CKPT_S3_TRIES");
	unsetenv("CKPT_S3_BACKOFF_MS");
}

static void test_target(void)
{
	struct ck_store_opts o = { 0 };
	struct ck_buf h = { 0 }, p = { 0 }, u = { 0 };
	struct ck_s3_req r;
	struct ck_s3 *s;

	clean_env();
	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "S", 1);
	o.s3_endpoint = "http://127.0.0.1:7480";
	s = open_ok("s3://bkt/pre", &o);
	if (!s)
		return;
	ck_s3_req_init(&r, "PUT", "put", "pre/a b/$x//./k");
	ck_s3_req_query(&r, "partNumber", "3");
	ck_s3_req_query(&r, "uploadId", "2~a/b+c");
	CHECK_EQ_INT(ck_s3_target(s, &r, &h, &p, &u), 0);
	CHECK_EQ_STR(h.p, "127.0.0.1:7480");
	CHECK_EQ_STR(p.p, "/bkt/pre/a%20b/%24x//./k");
	CHECK_EQ_STR(u.p, "http://127.0.0.1:7480/bkt/pre/a%20b/%24x//./k?partNumber=3&uploadId=2~a%2Fb%2Bc");
	ck_buf_free(&h);
	ck_buf_free(&p);
	ck_buf_free(&u);
	s->cfg.virtual_host = 1;
	ck_s3_req_init(&r, "POST", "create", "pre/k");
	ck_s3_req_query(&r, "uploads", NULL);
	CHECK_EQ_INT(ck_s3_target(s, &r, &h, &p, &u), 0);
	CHECK_EQ_STR(h.p, "bkt.127.0.0.1:7480");
	CHECK_EQ_STR(p.p, "/pre/k");
	CHECK_EQ_STR(u.p, "http://bkt.127.0.0.1:7480/pre/k?uploads");
	ck_buf_free(&h);
	ck_buf_free(&p);
	ck_buf_free(&u);
	ck_s3_req_init(&r, "GET", "list", NULL);
	CHECK_EQ_INT(ck_s3_target(s, &r, &h, &p, &u), 0);
	CHECK_EQ_STR(p.p, "/");
	ck_buf_free(&h);
	ck_buf_free(&p);
	ck_buf_free(&u);
	close_s3(s);
}

void ck_unit_run(void)
{
	test_target();
	test_uri_and_endpoint();
	test_credentials();
	test_site_profile();
	test_xml();
	test_unreachable();
}
