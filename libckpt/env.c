/* The job's environment changed at a restore (ckrun --resume --env).
 *
 * Runs on the manager thread after the restart, while every job thread is
 * still parked: none of them can read the environment half-changed, and
 * the first getenv() after the restore already sees the new value. A
 * parked thread may hold malloc's or libc's environment lock, so neither
 * setenv() nor malloc is used: the new environment (the old entries that
 * are not overridden, then the new ones) is built in memory of its own
 * (mmap) and `environ` is pointed at it. libc's setenv, unsetenv and
 * putenv work on it afterwards as on any environment a program set (a
 * later setenv copies it into memory of libc's). The memory is never
 * given back: the job may hold pointers getenv() returned into it. */
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

extern char **environ;

/* Length of the name of "NAME=VALUE" (up to '=' or the end). */
static size_t ck__name_len(const char *e)
{
	size_t n = 0;

	while (e[n] && e[n] != '=')
		n++;
	return n;
}

/* Whether entry e ("NAME=..." of the environment) has a name set in kv. */
static int ck__overridden(const char *e, const char *kv, size_t len)
{
	size_t n = ck__name_len(e);

	for (size_t at = 0; at < len;) {
		const char *o = kv + at;
		size_t on = ck__name_len(o);
		if (on == n && !ck_strncmp(o, e, n))
			return 1;
		at += ck_strlen(o) + 1;
	}
	return 0;
}

int ck__env_apply(const char *kv, size_t len)
{
	char **old = environ, **v;
	size_t nold = 0, nnew = 0, k = 0, bytes;
	char *s;
	long r;

	if (!len || kv[len - 1])
		return -EINVAL; /* entries end with a NUL */
	for (size_t at = 0; at < len; at += ck_strlen(kv + at) + 1)
		nnew++;
	while (old && old[nold])
		nold++;
	bytes = (nold + nnew + 1) * sizeof(char *) + len;
	r = ck_mmap(0, (bytes + 4095) & ~(size_t)4095, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r < 0)
		return (int)r;
	v = (char **)r;
	s = (char *)(v + nold + nnew + 1);
	ck_memcpy(s, kv, len);
	for (size_t i = 0; i < nold; i++)
		if (!ck__overridden(old[i], kv, len))
			v[k++] = old[i];
	for (size_t at = 0; at < len; at += ck_strlen(s + at) + 1) {
		const char *e = s + at;
		if (e[ck__name_len(e)] == '=' && e[ck__name_len(e) + 1]) /* an empty value removes it */
			v[k++] = s + at;
	}
	v[k] = NULL;
	environ = v;
	return 0;
}
