/* Plugin registry and event dispatch (see plugin.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "libckpt/core.h"

#define CK_MAX_PLUGINS 16

static const struct ck_plugin *ck__plugins[CK_MAX_PLUGINS];
static int ck__nplugins;
static int ck__presuspended[CK_MAX_PLUGINS];
/* Why a plugin was refused: said once on the job's stderr, and every
 * round fails with it (its state would be missing from the image). */
static char ck__refused[160];

void ck_plugin_register(const struct ck_plugin *p)
{
	const char *name = p && p->name ? p->name : "(unnamed)";
	char line[200];
	int n;

	if (p && p->abi == CK_PLUGIN_ABI && ck__nplugins < CK_MAX_PLUGINS) {
		ck__plugins[ck__nplugins++] = p;
		return;
	}
	if (!p || p->abi != CK_PLUGIN_ABI)
		snprintf(ck__refused, sizeof(ck__refused), "plugin %s: written for plugin ABI %u, this libckpt has ABI %u",
			 name, p ? p->abi : 0, (unsigned)CK_PLUGIN_ABI);
	else
		snprintf(ck__refused, sizeof(ck__refused), "plugin %s: the registry holds %d plugins at most", name,
			 CK_MAX_PLUGINS);
	n = snprintf(line, sizeof(line), "libckpt: %s; no checkpoint can be taken\n", ck__refused);
	if (n > 0) {
		ssize_t w = write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
		(void)w; /* nowhere else to say it */
	}
}

void ck_plugin_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ck__core.fail, sizeof(ck__core.fail), fmt, ap);
	va_end(ap);
}

int ck_plugin_restarted(void)
{
	return ck__core.restarted;
}

static int ck__forward(enum ck_event ev)
{
	return ev == CK_EV_INIT || ev == CK_EV_PRESUSPEND || ev == CK_EV_PRECHECKPOINT;
}

/* Checkpoint-side events stop at the first failure; plugins that saw
 * PRESUSPEND always get RESUME, in reverse order. */
int ck__plugins_event(enum ck_event ev)
{
	int r = 0;

	if (ev == CK_EV_PRESUSPEND && ck__refused[0]) {
		ck_plugin_fail("%s", ck__refused);
		return -ENOTSUP;
	}
	if (ck__forward(ev)) {
		for (int i = 0; i < ck__nplugins; i++) {
			if (!ck__plugins[i]->event)
				continue;
			r = ck__plugins[i]->event(ev);
			if (ev == CK_EV_PRESUSPEND)
				ck__presuspended[i] = r == 0;
			if (r < 0) {
				if (!ck__core.fail[0])
					ck_plugin_fail("plugin %s failed (%s)", ck__plugins[i]->name, strerror(-r));
				return r;
			}
		}
		return 0;
	}
	for (int i = ck__nplugins - 1; i >= 0; i--) {
		if (!ck__plugins[i]->event)
			continue;
		if (ev == CK_EV_RESUME && !ck__presuspended[i])
			continue;
		if (ev == CK_EV_RESUME)
			ck__presuspended[i] = 0;
		int e = ck__plugins[i]->event(ev);
		if (e < 0 && !r)
			r = e;
	}
	return r;
}

int ck__plugins_skip(uint64_t start, uint64_t end, const char *path, const char **why)
{
	for (int i = 0; i < ck__nplugins; i++)
		if (ck__plugins[i]->skip_region && ck__plugins[i]->skip_region(start, end, path, why))
			return 1;
	return 0;
}
