/* ckrun --map-path OLD=NEW and --env NAME=VALUE: the rules, checked on the
 * command line and applied at a restore (mappath.c, jobenv.c). */
#ifndef CK_CKRUN_PATHMAP_H
#define CK_CKRUN_PATHMAP_H

#include <stddef.h>

struct ck_pathmap_rule {
	char *from, *to;
	size_t from_len;
};
struct ck_pathmap {
	struct ck_pathmap_rule *v;
	size_t n;
};

/* Adds one --map-path argument "OLD=NEW": both absolute, without "." or
 * ".." components or empty ones ("//"), a trailing '/' dropped, OLD not
 * "/" and not given twice. 0, or -EINVAL / -ENOMEM with the message set. */
int ck_pathmap_add(struct ck_pathmap *pm, const char *arg);
/* in under the rule with the longest OLD that is a leading run of whole
 * components of in ("/a/b" maps "/a/b" and "/a/b/c", never "/a/bc"):
 * 1 with out = NEW followed by the rest of in, 0 when no rule applies
 * (out = in), -ENAMETOOLONG (message set) when it does not fit cap. */
int ck_pathmap_apply(const struct ck_pathmap *pm, const char *in, char *out, size_t cap);
void ck_pathmap_free(struct ck_pathmap *pm);

/* --env: "NAME=VALUE" entries, a later one for the same NAME replacing an
 * earlier one; an empty VALUE removes NAME. */
struct ck_jobenv {
	char **v;
	size_t n;
};
/* NAME: a letter or '_', then letters, digits, '_'; not one ckrun sets
 * or removes itself (LD_PRELOAD, CKPT_CTL_FD, CKPT_ATTACH, the AWS
 * credentials). 0, or -EINVAL / -ENOMEM with the message set. */
int ck_jobenv_add(struct ck_jobenv *je, const char *arg);
void ck_jobenv_free(struct ck_jobenv *je);

#endif
