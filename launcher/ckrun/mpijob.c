/* ckrun --np N: an MPI job (plugins/mpi). The job's processes hold no MPI
 * state: ckrun starts N agents with Open MPI's mpirun, outside the job's
 * namespaces (each owns the real MPI of one rank), and the job itself is
 * ckmpi-ranks, which starts N copies of the program with the stand-in
 * libmpi.so.40. A checkpoint is the usual round; the stand-ins' plugin
 * brings the ranks to a consistent cut through their agents first. A
 * resume starts new agents (--restore) before the job comes back; each
 * restored rank moves its channel over to its new agent.
 *
 * Rank R's channel is /ckmpi-KEY-R, KEY made of the user and the job's
 * name: the same at every resume of the job, which the restored programs
 * hold in their memory. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/mpijob.h"

int ck_mpi_parse_np(struct ckrun *c, const char *arg)
{
	char *end;
	long n = strtol(arg, &end, 10);

	if (*end || n < 1 || n > 4096) {
		ck_err_set("bad --np '%s' (a number of ranks from 1 to 4096)", arg);
		return -EINVAL;
	}
	c->mpi_np = (int)n;
	return 0;
}

static int is_launcher(const char *prog)
{
	const char *b = strrchr(prog, '/');

	b = b ? b + 1 : prog;
	return !strcmp(b, "mpirun") || !strcmp(b, "mpiexec") || !strcmp(b, "orterun") ||
	       !strncmp(b, "mpirun.", 7) || !strncmp(b, "mpiexec.", 8);
}

int ck_mpi_refuse_nesting(struct ckrun *c)
{
	/* Under mpirun each rank would be a job of its own, checkpointed
	 * alone: no consistent cut, and agents of nobody. */
	if (getenv("OMPI_COMM_WORLD_SIZE")) { /* Open MPI's mpirun (srun's PMIx alone may run a serial job) */
		ck_err_set("ckrun runs under mpirun here: each rank would be checkpointed alone; run "
			   "`ckrun --np N -- PROGRAM` instead of `mpirun -np N ckrun -- PROGRAM`");
		return -EINVAL;
	}
	if (c->argv && c->argv[0] && is_launcher(c->argv[0])) {
		ck_err_set("%s cannot run inside ckrun's job (its ranks' MPI state cannot be checkpointed "
			   "there); run `ckrun --np N -- PROGRAM` instead", c->argv[0]);
		return -EINVAL;
	}
	return 0;
}

/* The helpers live in mpi/ next to libckpt.so (the build tree, or
 * PREFIX/lib/ckrun/mpi). */
static int helper(const struct ckrun *c, const char *name, char *out, size_t n)
{
	const char *slash = strrchr(c->libckpt, '/');
	int len = slash ? (int)(slash - c->libckpt) : 1;

	snprintf(out, n, "%.*s/mpi/%s", len, slash ? c->libckpt : ".", name);
	return access(out, X_OK) ? -errno : 0;
}

/* `ckmpi-agent --profile`, with ckrun's environment (the agents' own):
 * its one line on stdout, or the first line of its complaint (stderr) in
 * ckrun's one line; 10 s at most (a hung library load must not hold
 * ckrun). */
#define CK_PROFILE_MS 10000
static int ck__agent_profile(struct ckrun *c)
{
	char buf[2][sizeof(c->mpi_profile)];
	size_t got[2] = {0, 0};
	int out[2], err[2], ws = 0, open_fds = 2, timed_out = 0;
	uint64_t end = ck_now_ns() + CK_PROFILE_MS * 1000000ull;
	pid_t pid, w;

	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		int e = -errno;
		close(out[0]);
		close(out[1]);
		return e;
	}
	pid = fork();
	if (pid == 0) {
		dup2(out[1], 1);
		dup2(err[1], 2);
		execl(c->mpi_agent, c->mpi_agent, "--profile", (char *)NULL);
		dprintf(2, "cannot run it: %s\n", strerror(errno));
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (pid < 0) {
		int e = -errno;
		close(out[0]);
		close(err[0]);
		return e;
	}
	{
		struct pollfd pf[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};

		while (open_fds > 0) {
			uint64_t now = ck_now_ns();
			int k;

			if (now >= end) {
				timed_out = 1;
				break;
			}
			k = poll(pf, 2, (int)((end - now) / 1000000) + 1);
			if (k < 0 && errno != EINTR)
				break;
			for (int i = 0; k > 0 && i < 2; i++) {
				ssize_t n;

				if (pf[i].fd < 0 || !pf[i].revents)
					continue;
				n = read(pf[i].fd, buf[i] + got[i], sizeof(buf[i]) - 1 - got[i]);
				if (n > 0)
					got[i] += (size_t)n;
				if (n == 0 || (n < 0 && errno != EINTR) || got[i] == sizeof(buf[i]) - 1) {
					close(pf[i].fd);
					pf[i].fd = -1;
					open_fds--;
				}
			}
		}
		for (int i = 0; i < 2; i++)
			if (pf[i].fd >= 0)
				close(pf[i].fd);
	}
	for (int i = 0; i < 2; i++) {
		buf[i][got[i]] = 0;
		buf[i][strcspn(buf[i], "\n")] = 0;
	}
	/* its output is in: it exits now, or is made to */
	while ((w = waitpid(pid, &ws, WNOHANG)) == 0 && !timed_out && ck_now_ns() < end)
		usleep(10000);
	if (w == 0) {
		timed_out = 1;
		kill(pid, SIGKILL);
		w = waitpid(pid, &ws, 0);
	}
	if (w != pid) {
		ck_err_set("--np: waiting for the MPI agent (%s --profile): %s", c->mpi_agent, strerror(errno));
		return -ECHILD;
	}
	if (!timed_out && WIFEXITED(ws) && WEXITSTATUS(ws) == 0 && buf[0][0]) {
		memcpy(c->mpi_profile, buf[0], strlen(buf[0]) + 1);
		return 0;
	}
	if (timed_out)
		ck_err_set("--np: the MPI agent (%s --profile) did not say Open MPI's version within %d s", c->mpi_agent,
			   CK_PROFILE_MS / 1000);
	else
		ck_err_set("--np: the MPI agent (%s --profile) cannot tell Open MPI's version (exit status %d%s%s)",
			   c->mpi_agent, WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws), buf[1][0] ? ": " : "", buf[1]);
	return -EIO;
}

int ck_mpi_prepare(struct ckrun *c)
{
	char ranks[4096], np[16], **av;
	uint64_t h = 1469598103934665603ull;
	size_t n = 0, i;
	int r;

	if (helper(c, "ckmpi-agent", c->mpi_agent, sizeof(c->mpi_agent)) < 0 ||
	    helper(c, "ckmpi-ranks", ranks, sizeof(ranks)) < 0) {
		ck_err_set("--np needs ckrun's MPI agent (%s): build it with `make mpi` (Open MPI's development "
			   "files: CKPT_DEPS_EXTRA=mpi scripts/deps.sh)", c->mpi_agent);
		return -ENOENT;
	}
	for (const char *p = c->job; *p; p++) {
		h ^= (uint8_t)*p;
		h *= 1099511628211ull;
	}
	snprintf(c->mpi_key, sizeof(c->mpi_key), "%u-%016llx", (unsigned)getuid(), (unsigned long long)h);
	if ((r = ck__agent_profile(c)) < 0)
		return r;
	while (c->argv[n])
		n++;
	av = calloc(n + 6, sizeof(*av));
	if (!av)
		return -ENOMEM;
	snprintf(np, sizeof(np), "%d", c->mpi_np);
	av[0] = strdup(ranks);
	av[1] = strdup(np);
	av[2] = c->mpi_key;
	av[3] = c->mpi_profile;
	av[4] = "--";
	for (i = 0; i < n; i++)
		av[5 + i] = c->argv[i];
	if (!av[0] || !av[1]) {
		free(av[0]);
		free(av[1]);
		free(av);
		return -ENOMEM;
	}
	c->argv = av;
	return 0;
}

/* The ranks a checkpoint holds and what decided its collectives, from its
 * job's command line (ckmpi-ranks N KEY PROFILE -- PROGRAM...); 0 for a
 * job that is not an MPI one. */
static int ck__manifest_np(const struct ck_manifest *m, const char **profile)
{
	const char *b;

	*profile = NULL;
	if (m->argc < 4 || !m->argv[0] || !m->argv[1] || !m->argv[3])
		return 0;
	b = strrchr(m->argv[0], '/');
	if (strcmp(b ? b + 1 : m->argv[0], "ckmpi-ranks"))
		return 0;
	if (m->argc >= 5 && m->argv[4] && !strcmp(m->argv[4], "--"))
		*profile = m->argv[3];
	else if (strcmp(m->argv[3], "--")) /* before PROFILE: ckmpi-ranks N KEY -- PROGRAM */
		return 0;
	return atoi(m->argv[1]);
}

int ck_mpi_check_resume(const struct ckrun *c, const struct ck_manifest *m)
{
	const char *profile = NULL;
	int held = ck__manifest_np(m, &profile);

	if (held && held == c->mpi_np) {
		if (!profile || !strcmp(profile, c->mpi_profile)) /* none recorded: nothing to compare */
			return 0;
		/* another library or another algorithm sums in another order */
		ck_err_set("checkpoint %s@%llu ran its collectives with %s; the agents here would run them with %s: "
			   "the results would not be bit-identical (resume it under that Open MPI and those settings)",
			   c->job, (unsigned long long)m->seq, profile, c->mpi_profile);
		return -EXDEV;
	}
	if (held == c->mpi_np)
		return 0;
	if (!held)
		ck_err_set("checkpoint %s@%llu is not an MPI job's: resume it without --np", c->job,
			   (unsigned long long)m->seq);
	else
		ck_err_set("checkpoint %s@%llu holds an MPI job of %d ranks: resume it with ckrun --np %d", c->job,
			   (unsigned long long)m->seq, held, held);
	return -EINVAL;
}

int ck_mpi_start(struct ckrun *c, int restore)
{
	const char *mpirun = getenv("CKPT_MPIRUN");
	char np[16];
	const char *av[16];
	int n = 0, fd;
	pid_t pid;

	if (!c->mpi_np)
		return 0;
	if (!mpirun || !*mpirun)
		mpirun = "mpirun";
	snprintf(np, sizeof(np), "%d", c->mpi_np);
	av[n++] = mpirun;
	av[n++] = "-np";
	av[n++] = np;
	/* ranks beyond the cores, and no binding: the programs do the work */
	av[n++] = "--oversubscribe";
	av[n++] = "--bind-to";
	av[n++] = "none";
	if (geteuid() == 0)
		av[n++] = "--allow-run-as-root";
	av[n++] = c->mpi_agent;
	av[n++] = "--serve";
	av[n++] = c->mpi_key;
	if (restore)
		av[n++] = "--restore";
	av[n] = NULL;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		ck_err_set("cannot start the MPI agents: fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		/* Its own process group (a terminal's ^C is ckrun's to turn into
		 * a checkpoint, not the agents' end); gone with ckrun. */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			dup2(fd, 0); /* mpirun forwards its stdin to rank 0: the job's stdin is the job's */
		/* The job's stdout is the job's alone: whatever mpirun or the
		 * agents print (Open MPI's warnings among it) goes with ckrun's
		 * own messages. */
		dup2(2, 1);
		execvp(mpirun, (char **)av);
		fprintf(stderr, "ckrun: cannot run %s for the MPI agents: %s\n", mpirun, strerror(errno));
		_exit(127);
	}
	c->mpi_pid = pid;
	if (c->verbose)
		fprintf(stderr, "ckrun: %d MPI agents started (%s%s, channels /ckmpi-%s-*)\n", c->mpi_np, mpirun,
			restore ? ", to restore" : "", c->mpi_key);
	return 0;
}

int ck_mpi_exited(struct ckrun *c, int *status)
{
	int ws;

	if (c->mpi_pid <= 0 || waitpid(c->mpi_pid, &ws, WNOHANG) != c->mpi_pid)
		return 0;
	c->mpi_pid = 0;
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return 1;
}

void ck_mpi_stop(struct ckrun *c)
{
	int st;

	if (c->mpi_pid <= 0)
		return;
	kill(c->mpi_pid, SIGTERM);
	for (int i = 0; i < 500; i++) {
		if (waitpid(c->mpi_pid, &st, WNOHANG) == c->mpi_pid) {
			c->mpi_pid = 0;
			return;
		}
		usleep(10000);
	}
	kill(-c->mpi_pid, SIGKILL);
	kill(c->mpi_pid, SIGKILL);
	waitpid(c->mpi_pid, &st, 0);
	c->mpi_pid = 0;
}
