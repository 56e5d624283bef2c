/* The stand-in under ckrun: a plugin of libckpt (when the program runs with
 * it preloaded), so that a checkpoint holds the rank at a consistent cut
 * and a restored rank finds its new agent.
 *
 * PRESUSPEND asks the agent for a cut (the agents agree on it among
 * themselves, the program's threads still running, agent_cut.c) and waits
 * for the answer; a cut that cannot hold fails the round in one line and
 * the job goes on. RESUME releases the agent. RESTART moves the channel's
 * contents (the request the cut held, the log of communicators, the arena)
 * into the channel of the new agent, at the same address. */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckrun/plugin.h"
#include "plugins/mpi/standin/sti.h"

/* The answer of a cut comes within the agents' limit (CKPT_MPI_CUT_MS,
 * 5 s by default) and a few of their rounds; 10 s more bound a lost
 * agent. */
#define ANSWER_MARGIN_MS 10000
#define ADOPT_MS 60000

static void (*fail_fn)(const char *fmt, ...);

static int answer_ms(void)
{
	const char *v = getenv("CKPT_MPI_CUT_MS");

	return (v && atoi(v) > 0 ? atoi(v) : CK_MPI_CUT_MS_DEFAULT) + ANSWER_MARGIN_MS;
}

static int ask_cut(void)
{
	struct ck_mpi_chan_hdr *h = ck__sti.ch.h;
	uint32_t req = ck_mpi_chan_ld(&h->cut_done) + 1;
	int waited = 0, limit = answer_ms();

	ck_mpi_chan_st_wake(&h->cut_req, req);
	while (ck_mpi_chan_ld(&h->cut_done) != req) {
		if (waited >= limit || !ck_mpi_chan_peer_alive(&ck__sti.ch, 1)) {
			/* no RESUME follows a failed PRESUSPEND: released now,
			 * should the cut hold after all */
			ck_mpi_chan_st_wake(&h->cut_release, req);
			fail_fn("MPI: rank %d: its agent did not answer the cut", ck__sti.rank);
			return -ETIMEDOUT;
		}
		ck_mpi_chan_wait_word(&h->cut_done, req - 1, 200);
		waited += 200;
	}
	if (ck_mpi_chan_ld(&h->cut_ok))
		return 0;
	fail_fn("%s", h->cut_why);
	return -EAGAIN;
}

/* A restored rank that cannot go on: one line and out, without flushing
 * the program's stdio (what it buffered before the checkpoint would be
 * printed a second time by the resume that works). */
__attribute__((noreturn, format(printf, 1, 2))) static void restart_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ck__sti_vdie("restart", 0, fmt, ap);
}

static int live(void)
{
	return ck__sti.inited && !ck__sti.finalized && ck__sti.ch.h;
}

static int event(enum ck_event ev)
{
	int rc;

	switch (ev) {
	case CK_EV_PRESUSPEND:
		/* MPI_Finalize unmaps the channel: not while we wait on it */
		ck__sti_cut_lock();
		rc = live() ? ask_cut() : 0;
		ck__sti_cut_unlock();
		return rc;
	case CK_EV_RESUME:
		ck__sti_cut_lock();
		if (live()) /* a cut that held ends with the round */
			ck_mpi_chan_st_wake(&ck__sti.ch.h->cut_release, ck_mpi_chan_ld(&ck__sti.ch.h->cut_done));
		ck__sti_cut_unlock();
		return 0;
	case CK_EV_RESTART:
		if (!live())
			return 0;
		rc = ck_mpi_chan_adopt(&ck__sti.ch, ck__sti.ch.name, ADOPT_MS);
		if (rc == -EXDEV)
			restart_fail("the checkpoint holds %d ranks; resume it with ckrun --np %d", ck__sti.size,
				     ck__sti.size);
		if (rc)
			restart_fail("cannot take over the new agent's channel %s: %s", ck__sti.ch.name,
				     rc == -EMSGSIZE ? "it has another size (CKPT_MPI_ARENA or CKPT_MPI_DRAIN differs)"
						     : strerror(-rc));
		return 0;
	default:
		return 0;
	}
}

static const struct ck_plugin plugin = {
	.abi = CK_PLUGIN_ABI,
	.name = "mpi",
	.event = event,
};

/* libckpt is there when the program runs under ckrun; a program run by a
 * plain ckmpi-agent has no checkpoints and no plugin. */
__attribute__((constructor)) static void sti_register(void)
{
	void (*reg)(const struct ck_plugin *) = (void (*)(const struct ck_plugin *))dlsym(RTLD_DEFAULT,
											 "ck_plugin_register");

	fail_fn = (void (*)(const char *, ...))dlsym(RTLD_DEFAULT, "ck_plugin_fail");
	if (reg && fail_fn)
		reg(&plugin);
}
