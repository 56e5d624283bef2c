/* ckrun's registry of the plugins' ckrun halves: kinds owned, the round's
 * phase name, and refusals that end the program loudly (exit 99 and one
 * line), never a plugin silently left out. */
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/ckrun/agent_plugin.h"
#include "tests/unit/unit.h"

static int ck__fd(void *state, const struct ck_pd_fd *f)
{
	(void)state;
	(void)f;
	return -1;
}

static int ck__ckpt(struct ck_procdesc **pds, const pid_t *pids, size_t n, struct ck_writer *w,
		    struct ck_manifest *m)
{
	(void)pds;
	(void)pids;
	(void)n;
	(void)w;
	(void)m;
	return 0;
}

/* Registers p in a child; its exit status. */
static int ck__register_in_child(const struct ck_agent_plugin *p, int times)
{
	int st = 0;
	pid_t pid = fork();

	if (pid == 0) {
		for (int i = 0; i < times; i++)
			ck_agent_plugin_register(p);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void ck_unit_run(void)
{
	static const struct ck_agent_plugin one = {CK_AGENT_PLUGIN_ABI, "one", 77, "ones", ck__ckpt, NULL, ck__fd, NULL, NULL, NULL, NULL};
	static const struct ck_agent_plugin two = {CK_AGENT_PLUGIN_ABI, "two", 78, "twos", ck__ckpt, NULL, ck__fd, NULL, NULL, NULL, NULL};
	static const struct ck_agent_plugin old = {CK_AGENT_PLUGIN_ABI + 1, "old", 79, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

	/* another ABI, a full registry: exit 99 */
	CHECK_EQ_INT(ck__register_in_child(&old, 1), 99);
	CHECK_EQ_INT(ck__register_in_child(&one, CK_AGENT_MAX_PLUGINS), 0);
	CHECK_EQ_INT(ck__register_in_child(&one, CK_AGENT_MAX_PLUGINS + 1), 99);
	/* kinds and the phase's name */
	CHECK_EQ_STR(ck_agent_plugins_phase(), "plugins");
	CHECK(!ck_agent_plugins_owns(77));
	ck_agent_plugin_register(&one);
	CHECK(ck_agent_plugins_owns(77) && !ck_agent_plugins_owns(78));
	CHECK_EQ_STR(ck_agent_plugins_phase(), "ones");
	ck_agent_plugin_register(&two);
	CHECK(ck_agent_plugins_owns(78));
	CHECK_EQ_STR(ck_agent_plugins_phase(), "plugins");
}
