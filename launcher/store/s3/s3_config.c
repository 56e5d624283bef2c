/* Where the S3 store is and who we are there: endpoint, region and
 * credentials from options, the usual AWS variables, or the shared
 * credentials file. Messages never contain a secret. */
#include "launcher/store/s3/s3.h"
#include "launcher/common/ck_err.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] ? v : NULL;
}

static long env_long(const char *name, long dflt, long min)
{
	const char *v = env(name);
	char *end;
	long x;

	if (!v)
		return dflt;
	x = strtol(v, &end, 10);
	return *end || x < min ? dflt : x;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

static void wipe_free(char *s)
{
	if (s)
		OPENSSL_cleanse(s, strlen(s));
	free(s);
}

/* What one section of a shared credentials file names. A section chosen
 * with --s3-profile describes a whole site: where it is (endpoint_url,
 * ca_bundle, region) as well as who we are there. */
struct s3_profile {
	char *endpoint, *ca, *region;
};

static void profile_free(struct s3_profile *p)
{
	free(p->endpoint);
	free(p->ca);
	free(p->region);
	memset(p, 0, sizeof(*p));
}

/* Section [profile] of an AWS shared credentials file into c (keys not
 * already set) and, when site is given, the site's keys. Returns 0 when
 * the section was there (keys may still be missing), -ENOENT if not. */
static int read_profile(struct ck_s3_cfg *c, const char *path, const char *profile, struct s3_profile *site)
{
	char line[4096], *p, *eq, **to;
	FILE *f = fopen(path, "r");
	int in = 0, found = 0;

	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		p = trim(line);
		if (*p == '#' || *p == ';' || !*p)
			continue;
		if (*p == '[') {
			char *e = strchr(p, ']');

			if (e)
				*e = 0;
			p = trim(p + 1);
			/* the config-file spelling "[profile x]" is accepted too */
			if (!strncmp(p, "profile ", 8))
				p = trim(p + 8);
			in = !strcmp(p, profile);
			found |= in;
			continue;
		}
		if (!in || !(eq = strchr(p, '=')))
			continue;
		*eq = 0;
		p = trim(p);
		eq = trim(eq + 1);
		to = !strcmp(p, "aws_access_key_id")	     ? &c->access_key
		     : !strcmp(p, "aws_secret_access_key") ? &c->secret_key
		     : !strcmp(p, "aws_session_token")	     ? &c->session_token
		     : site && !strcmp(p, "endpoint_url")  ? &site->endpoint
		     : site && !strcmp(p, "ca_bundle")	     ? &site->ca
		     : site && !strcmp(p, "region")	     ? &site->region
							     : NULL;
		if (to && !*to && *eq)
			*to = strdup(eq);
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
	return found ? 0 : -ENOENT;
}

static void credentials_path(char *path, size_t len)
{
	const char *home = env("HOME");

	if (env("AWS_SHARED_CREDENTIALS_FILE"))
		snprintf(path, len, "%s", env("AWS_SHARED_CREDENTIALS_FILE"));
	else
		snprintf(path, len, "%s/.aws/credentials", home ? home : "");
}

/* A profile named on the command line: its section must be there and hold
 * both keys; the environment's keys do not count (two stores of one
 * command, ckpt cp between sites, each have their own). */
static int load_site(struct ck_s3_cfg *c, const char *uri, const char *profile, struct s3_profile *site)
{
	char path[4096];

	credentials_path(path, sizeof(path));
	if (read_profile(c, path, profile, site) < 0) {
		ck_err_set("s3: %s: no profile [%s] in %s", uri, profile, path);
		return -EACCES;
	}
	if (c->access_key && c->secret_key)
		return 0;
	ck_err_set("s3: %s: profile [%s] in %s lacks aws_access_key_id or aws_secret_access_key", uri, profile,
		   path);
	return -EACCES;
}

static int load_credentials(struct ck_s3_cfg *c, const char *uri)
{
	const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
	const char *profile = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	char path[4096];

	if (ak || sk) {
		if (!ak || !sk) {
			ck_err_set("s3: %s: %s is set but %s is not", uri,
				   ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
				   ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
			return -EACCES;
		}
		c->access_key = strdup(ak);
		c->secret_key = strdup(sk);
		if (env("AWS_SESSION_TOKEN"))
			c->session_token = strdup(env("AWS_SESSION_TOKEN"));
		return c->access_key && c->secret_key ? 0 : -ENOMEM;
	}
	credentials_path(path, sizeof(path));
	read_profile(c, path, profile, NULL);
	if (c->access_key && c->secret_key && c->access_key[0] && c->secret_key[0])
		return 0;
	ck_err_set("s3: no credentials for %s: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
		   "or give profile [%s] aws_access_key_id and aws_secret_access_key in %s",
		   uri, profile, path);
	return -EACCES;
}

static int parse_endpoint(struct ck_s3_cfg *c, const char *ep)
{
	const char *hp = strstr(ep, "://");
	size_t n;

	if (hp) {
		c->scheme = strndup(ep, (size_t)(hp - ep));
		hp += 3;
	} else {
		c->scheme = strdup("https");
		hp = ep;
	}
	n = strcspn(hp, "/?#");
	/* an endpoint is a host and port only; a path would change what we sign */
	if (!n || (hp[n] && strcmp(hp + n, "/"))) {
		ck_err_set("s3: endpoint %s: expected http[s]://HOST[:PORT]", ep);
		return -EINVAL;
	}
	c->hostport = strndup(hp, n);
	if (!c->scheme || !c->hostport)
		return -ENOMEM;
	if (strcmp(c->scheme, "http") && strcmp(c->scheme, "https")) {
		ck_err_set("s3: endpoint %s: scheme must be http or https", ep);
		return -EINVAL;
	}
	return 0;
}

int ck_s3_cfg_load(struct ck_s3_cfg *c, const struct ck_store_opts *opts, const char *uri)
{
	const char *ep = opts && opts->s3_endpoint ? opts->s3_endpoint : NULL;
	const char *ca = opts && opts->s3_ca ? opts->s3_ca : NULL;
	const char *region = env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
	struct s3_profile site = {0};
	char dflt[256];
	int ret;

	memset(c, 0, sizeof(*c));
	/* A named profile comes before the environment, options before it. */
	if (opts && opts->s3_profile) {
		ret = load_site(c, uri, opts->s3_profile, &site);
		if (ret)
			goto out;
		if (!ep)
			ep = site.endpoint;
		if (!ca)
			ca = site.ca;
		if (site.region)
			region = site.region;
	}
	ret = -ENOMEM;
	c->region = strdup(region ? region : "us-east-1");
	if (!c->region)
		goto out;
	if (!ep)
		ep = env("CKPT_S3_ENDPOINT") ? env("CKPT_S3_ENDPOINT") : env("AWS_ENDPOINT_URL");
	if (!ep) {
		snprintf(dflt, sizeof(dflt), "https://s3.%s.amazonaws.com", c->region);
		ep = dflt;
	}
	ret = parse_endpoint(c, ep);
	if (ret)
		goto out;
	if (ca) {
		ret = -ENOMEM;
		c->ca = strdup(ca);
		if (!c->ca)
			goto out;
	}
	c->virtual_host = opts ? opts->s3_virtual_host : 0;
	c->connect_timeout_s = env_long("CKPT_S3_CONNECT_TIMEOUT", 10, 1);
	c->stall_timeout_s = env_long("CKPT_S3_STALL_TIMEOUT", 30, 1);
	c->max_tries = (int)env_long("CKPT_S3_TRIES", 6, 1);
	c->parallel = (int)env_long("CKPT_S3_PARALLEL", 4, 1);
	if (c->parallel > 32)
		c->parallel = 32;
	ret = opts && opts->s3_profile ? 0 : load_credentials(c, uri);
out:
	profile_free(&site);
	return ret;
}

void ck_s3_cfg_free(struct ck_s3_cfg *c)
{
	free(c->scheme);
	free(c->hostport);
	free(c->region);
	free(c->access_key);
	wipe_free(c->secret_key);
	wipe_free(c->session_token);
	free(c->ca);
	memset(c, 0, sizeof(*c));
}
