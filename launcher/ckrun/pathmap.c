/* The rules of --map-path and --env, as the command line gives them. Only
 * strings here: where a restore applies them is mappath.c and jobenv.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckrun/procdesc.h"
#include "ckrun/proto.h"
#include "launcher/ckrun/pathmap.h"
#include "launcher/common/ck_err.h"

/* An absolute path without "", "." or ".." components; a trailing '/'
 * (not the root's) dropped. NULL with the message set if not. */
static char *ck__clean_path(const char *arg, const char *p, size_t n, const char *which)
{
	char *s;

	if (!n || p[0] != '/') {
		ck_err_set("--map-path '%s': %s must be an absolute path", arg, which);
		return NULL;
	}
	while (n > 1 && p[n - 1] == '/')
		n--;
	if (n >= CK_PD_PATH) {
		ck_err_set("--map-path '%s': %s is longer than %d bytes", arg, which, CK_PD_PATH - 1);
		return NULL;
	}
	for (size_t i = 1, start = 1; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		size_t len = i - start;
		if (n > 1 && (len == 0 || (len == 1 && p[start] == '.') || (len == 2 && !strncmp(p + start, "..", 2)))) {
			ck_err_set("--map-path '%s': %s has an empty, '.' or '..' component (paths are compared as "
				   "the kernel names them)", arg, which);
			return NULL;
		}
		start = i + 1;
	}
	s = strndup(p, n);
	if (!s)
		ck_err_set("out of memory");
	return s;
}

int ck_pathmap_add(struct ck_pathmap *pm, const char *arg)
{
	const char *eq = strchr(arg, '=');
	struct ck_pathmap_rule r = {0}, *v;

	if (!eq) {
		ck_err_set("--map-path '%s': not OLD=NEW", arg);
		return -EINVAL;
	}
	if (!(r.from = ck__clean_path(arg, arg, (size_t)(eq - arg), "OLD")) ||
	    !(r.to = ck__clean_path(arg, eq + 1, strlen(eq + 1), "NEW")))
		goto bad;
	if (!strcmp(r.from, "/")) {
		ck_err_set("--map-path '%s': OLD is '/', which would move every path (/dev and /proc too)", arg);
		goto bad;
	}
	r.from_len = strlen(r.from);
	for (size_t i = 0; i < pm->n; i++)
		if (!strcmp(pm->v[i].from, r.from)) {
			ck_err_set("--map-path '%s': %s is mapped twice", arg, r.from);
			goto bad;
		}
	v = realloc(pm->v, (pm->n + 1) * sizeof(*v));
	if (!v) {
		ck_err_set("out of memory");
		goto bad;
	}
	pm->v = v;
	pm->v[pm->n++] = r;
	return 0;
bad:
	free(r.from);
	free(r.to);
	return -EINVAL;
}

int ck_pathmap_apply(const struct ck_pathmap *pm, const char *in, char *out, size_t cap)
{
	const struct ck_pathmap_rule *best = NULL;
	const char *rest;
	size_t tl, rl;

	for (size_t i = 0; i < pm->n; i++) {
		const struct ck_pathmap_rule *r = &pm->v[i];
		if (!strncmp(in, r->from, r->from_len) && (in[r->from_len] == 0 || in[r->from_len] == '/') &&
		    (!best || r->from_len > best->from_len))
			best = r;
	}
	if (!best) {
		if (strlen(in) >= cap) {
			ck_err_set("path %s is too long", in);
			return -ENAMETOOLONG;
		}
		strcpy(out, in);
		return 0;
	}
	rest = in + best->from_len;
	tl = strlen(best->to);
	if (tl == 1 && *rest) /* NEW "/": "/" + "/x" is "/x" */
		tl = 0;
	rl = strlen(rest);
	if (tl + rl >= cap) {
		ck_err_set("%s mapped by --map-path %s=%s is longer than %zu bytes", in, best->from, best->to, cap - 1);
		return -ENAMETOOLONG;
	}
	memcpy(out, best->to, tl);
	memcpy(out + tl, rest, rl + 1);
	return 1;
}

void ck_pathmap_free(struct ck_pathmap *pm)
{
	for (size_t i = 0; i < pm->n; i++) {
		free(pm->v[i].from);
		free(pm->v[i].to);
	}
	free(pm->v);
	pm->v = NULL;
	pm->n = 0;
}

/* ---- --env ---- */

/* Names ckrun sets in the job's environment or keeps out of it. */
static const char *const ck__env_own[] = {"LD_PRELOAD", CK_CTL_ENV, "CKPT_ATTACH", "AWS_ACCESS_KEY_ID",
					  "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", NULL};

int ck_jobenv_add(struct ck_jobenv *je, const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t n = eq ? (size_t)(eq - arg) : 0;
	char *e, **v;

	if (!eq) {
		ck_err_set("--env '%s': not NAME=VALUE (NAME= removes NAME)", arg);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		char ch = arg[i];
		int ok = ch == '_' || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (i && ch >= '0' && ch <= '9');
		if (!ok)
			n = 0;
	}
	if (!n) {
		ck_err_set("--env '%s': bad name (a letter or '_', then letters, digits or '_')", arg);
		return -EINVAL;
	}
	for (int i = 0; ck__env_own[i]; i++)
		if (strlen(ck__env_own[i]) == n && !strncmp(arg, ck__env_own[i], n)) {
			ck_err_set("--env '%s': ckrun sets or removes %s itself", arg, ck__env_own[i]);
			return -EINVAL;
		}
	if (strlen(arg) >= CK_MSG_TEXT) {
		ck_err_set("--env '%.*s=...': longer than %d bytes", (int)n, arg, CK_MSG_TEXT - 1);
		return -EINVAL;
	}
	e = strdup(arg);
	if (!e) {
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < je->n; i++)
		if (!strncmp(je->v[i], arg, n + 1)) { /* the same NAME=: the later one stands */
			free(je->v[i]);
			je->v[i] = e;
			return 0;
		}
	v = realloc(je->v, (je->n + 1) * sizeof(*v));
	if (!v) {
		free(e);
		ck_err_set("out of memory");
		return -ENOMEM;
	}
	je->v = v;
	je->v[je->n++] = e;
	return 0;
}

void ck_jobenv_free(struct ck_jobenv *je)
{
	for (size_t i = 0; i < je->n; i++)
		free(je->v[i]);
	free(je->v);
	je->v = NULL;
	je->n = 0;
}
