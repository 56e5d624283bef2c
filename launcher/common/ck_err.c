#include "launcher/common/ck_err.h"

#include <stdio.h>
#include <string.h>

static __thread char ck__errbuf[1024];

void ck_err_vset(const char *fmt, va_list ap)
{
	char buf[sizeof(ck__errbuf)];

	/* through a copy: the arguments may be ck_err_msg() itself */
	vsnprintf(buf, sizeof(buf), fmt, ap);
	memcpy(ck__errbuf, buf, sizeof(buf));
}

void ck_err_set(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ck_err_vset(fmt, ap);
	va_end(ap);
}

void ck_err_wrap(const char *fmt, ...)
{
	char prev[sizeof(ck__errbuf)], ctx[512];
	va_list ap;

	memcpy(prev, ck__errbuf, sizeof(prev));
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	if (prev[0])
		snprintf(ck__errbuf, sizeof(ck__errbuf), "%s: %s", ctx, prev);
	else
		snprintf(ck__errbuf, sizeof(ck__errbuf), "%s", ctx);
}

const char *ck_err_msg(void)
{
	return ck__errbuf[0] ? ck__errbuf : "unknown error";
}

void ck_err_clear(void)
{
	ck__errbuf[0] = 0;
}
