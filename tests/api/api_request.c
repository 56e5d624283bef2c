/* The optional job API: run bare, every call answers CKPT_NOT_PRESENT;
 * under ckrun, ckpt_request() returns once a checkpoint is committed, and
 * in a process restored from it ckpt_is_restarted() is 1 and the
 * registered callback has run. ckpt_version() is libckpt's version under
 * ckrun, CKPT_NOT_PRESENT bare. Prints one line per step. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ckpt.h"

static int restarts;

static void on_restart(void *arg)
{
	(*(int *)arg)++;
}

int main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 3;

	printf("present %d version %d register %d\n", ckpt_present(), ckpt_version(),
	       ckpt_on_restart(on_restart, &restarts));
	for (int i = 0; i < steps; i++) {
		int r = ckpt_request();
		printf("step %d: request %d restarted %d callbacks %d\n", i, r, ckpt_is_restarted(), restarts);
		fflush(stdout);
		usleep(200000);
	}
	return 0;
}
