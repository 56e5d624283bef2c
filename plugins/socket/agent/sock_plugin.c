/* The socket plugin's agent half registers with ckrun. */
#include "launcher/ckrun/agent_plugin.h"
#include "plugins/socket/agent/sock.h"

static int ck__prepare(struct ck_reader *rd, struct ck_procdesc *const *pds, size_t n, void **state)
{
	struct ck_sock_set *s = NULL;
	int r = ck_sock_prepare(rd, pds, n, &s);

	*state = s;
	return r;
}

static int ck__fd(void *state, const struct ck_pd_fd *f)
{
	return ck_sock_fd(state, f);
}

static int ck__late(void *state, struct ck_reader *rd, pid_t (*host_pid)(void *arg, int32_t jpid), void *arg)
{
	return ck_sock_late(state, rd, host_pid, arg);
}

static int ck__made(void *state, struct ck_reader *rd, const struct ck_agent_procs *procs)
{
	return ck_sock_made(state, rd, procs);
}

static void ck__release(void *state)
{
	ck_sock_free(state);
}

static const struct ck_agent_plugin ck__socket_agent = {
	.abi = CK_AGENT_PLUGIN_ABI,
	.name = "socket",
	.fd_kind = CK_FD_SOCKET,
	.phase = "sockets",
	.checkpoint = ck_sock_checkpoint,
	.prepare = ck__prepare,
	.fd = ck__fd,
	.release = ck__release,
	.late = ck__late,
	.made = ck__made,
	.map_paths = ck_sock_map_paths,
};

__attribute__((constructor)) static void ck__register(void)
{
	ck_agent_plugin_register(&ck__socket_agent);
}
