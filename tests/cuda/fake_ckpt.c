/* A stand-in for libckpt's plugin registry, for testing the CUDA plugin
 * without the core: it records the registered plugin and the last failure
 * message, and lets the harness fire events itself. */
#include "fake_ckpt.h"

#include <stdarg.h>
#include <stdio.h>

const struct ck_plugin *fake_plugin;
char fake_fail_msg[512];
int fake_restarted;

void ck_plugin_register(const struct ck_plugin *p)
{
	fake_plugin = p;
}

void ck_plugin_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(fake_fail_msg, sizeof(fake_fail_msg), fmt, ap);
	va_end(ap);
}

int ck_plugin_restarted(void)
{
	return fake_restarted;
}

int fake_fire(enum ck_event ev)
{
	fake_fail_msg[0] = 0;
	return fake_plugin->event(ev);
}
