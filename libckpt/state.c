/* libckpt's process-wide state (core.h): the one definition of its
 * globals, so that its files share them through core.h alone and none
 * depends on checkpoint.c, the round, for them. */
#include <stdarg.h>
#include <stdio.h>

#include "libckpt/core.h"

struct ck_core ck__core = {.ctl_fd = -1, .sig = CK_SIG_DEFAULT, .devfd = -1, .fork_fd = {-1, -1}};
struct ck_procdesc ck__pd;
char ck__restart_stack[CK_RESTART_STACK_SIZE] __attribute__((aligned(64)));

void ck__failf(const char *fmt, ...)
{
	va_list ap;

	if (ck__core.fail[0])
		return; /* keep the first reason */
	va_start(ap, fmt);
	vsnprintf(ck__core.fail, sizeof(ck__core.fail), fmt, ap);
	va_end(ap);
}

/* A message put together with no C library (a restart): s appended at
 * `at` of m, kept NUL-terminated; the new length. */
size_t ck__msg_put(char *m, size_t cap, size_t at, const char *s)
{
	while (*s && at + 1 < cap)
		m[at++] = *s++;
	m[at] = 0;
	return at;
}

size_t ck__msg_putnum(char *m, size_t cap, size_t at, int64_t v)
{
	char num[24];
	int k = 0;

	if (v < 0 && at + 1 < cap) {
		m[at++] = '-';
		v = -v;
	}
	do
		num[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < 20);
	while (k && at + 1 < cap)
		m[at++] = num[--k];
	m[at] = 0;
	return at;
}
