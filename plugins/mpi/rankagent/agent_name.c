/* The channel's name in /dev/shm, from its creation until the program has
 * opened the channel: a signal that ends the agent meanwhile (mpirun's
 * SIGTERM when another rank aborts, ckrun ending the agents) removes it. */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "plugins/mpi/rankagent/agent.h"

static char shm_path[96];

static void on_signal(int sig)
{
	if (shm_path[0])
		unlink(shm_path); /* shm_unlink is not async-signal-safe; this is the same */
	signal(sig, SIG_DFL);
	raise(sig);
}

void ck__agent_name_guard(const char *chan)
{
	snprintf(shm_path, sizeof(shm_path), "/dev/shm%s", chan);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
}

int ck__agent_name_held(void)
{
	return shm_path[0] != 0;
}

void ck__agent_name_drop(const char *chan)
{
	if (!shm_path[0])
		return;
	shm_path[0] = 0;
	ck_mpi_chan_unlink(chan);
}
