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

/* [profile] section of an AWS shared credentials file. Returns 0 when the
 * file was read (keys may still be missing), -ENOENT if there is none. */
static int read_profile(struct ck_s3_cfg *c, const char *path, const char *profile)
{
	char line[4096], *p, *eq;
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
		if (!strcmp(p, "aws_access_key_id") && !c->access_key)
			c->access_key = strdup(eq);
		else if (!strcmp(p, "aws_secret_access_key") && !c->secret_key)
			c->secret_key = strdup(eq);
		else if (!strcmp(p, "aws_session_token") && !c->session_token)
			c->session_token = strdup(eq);
	}
	OPENSSL_cleanse(line, sizeof(line));
	fclose(f);
	return found ? 0 : -ENOENT;
}

static int load_credentials(struct ck_s3_cfg *c, const char *uri)
{
	const char *ak = env("AWS_ACCESS_KEY_ID"), *sk = env("AWS_SECRET_ACCESS_KEY");
	const char *profile = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	const char *home = env("HOME");
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
	if (env("AWS_SHARED_CREDENTIALS_FILE"))
		snprintf(path, sizeof(path), "%s", env("AWS_SHARED_CREDENTIALS_FILE"));
	else
		snprintf(path, sizeof(path), "%s/.aws/credentials", home ? home : "");
	read_profile(c, path, profile);
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
	const char *region = env("AWS_REGION") ? env("AWS_REGION") : env("AWS_DEFAULT_REGION");
	char dflt[256];
	int ret;

	memset(c, 0, sizeof(*c));
	c->region = strdup(region ? region : "us-east-1");
	if (!c->region)
		return -ENOMEM;
	if (!ep)
		ep = env("CKPT_S3_ENDPOINT") ? env("CKPT_S3_ENDPOINT") : env("AWS_ENDPOINT_URL");
	if (!ep) {
		snprintf(dflt, sizeof(dflt), "https://s3.%s.amazonaws.com", c->region);
		ep = dflt;
	}
	ret = parse_endpoint(c, ep);
	if (ret)
		return ret;
	if (opts && opts->s3_ca) {
		c->ca = strdup(opts->s3_ca);
		if (!c->ca)
			return -ENOMEM;
	}
	c->virtual_host = opts ? opts->s3_virtual_host : 0;
	c->connect_timeout_s = env_long("CKPT_S3_CONNECT_TIMEOUT", 10, 1);
	c->stall_timeout_s = env_long("CKPT_S3_STALL_TIMEOUT", 30, 1);
	c->max_tries = (int)env_long("CKPT_S3_TRIES", 6, 1);
	c->parallel = (int)env_long("CKPT_S3_PARALLEL", 4, 1);
	if (c->parallel > 32)
		c->parallel = 32;
	return load_credentials(c, uri);
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
