/* ckmpi-agent [--lib DIR] -- PROGRAM [ARGS...]
 *
 * Started by mpirun as the MPI process of one rank: initialises the real
 * MPI, creates the rank's channel (CKPT_MPI_ARENA bytes of arena, default
 * 64 MiB), starts PROGRAM with DIR (default: lib/ next to this executable,
 * where the stand-in libmpi.so.40 is) first on LD_LIBRARY_PATH and
 * CKPT_MPI_CHANNEL naming the channel, serves its requests and exits with
 * its status. A program that ends without MPI_Finalize (an unsupported
 * call, a crash, a non-zero exit) makes the agent abort the whole job with
 * MPI_Abort and the program's status (128+N for signal N), which mpirun
 * reports as its own. With CKPT_MPI_STATS=1 it says at the end how many
 * requests it served (the tests' proof that the program went through it). */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugins/mpi/channel/mpi_wire.h"
#include "plugins/mpi/rankagent/agent.h"

#define DEFAULT_ARENA (64ul << 20)

static int usage(void)
{
	fprintf(stderr, "usage: ckmpi-agent [--lib DIR] -- PROGRAM [ARGS...]\n"
			"       ckmpi-agent --serve KEY [--restore]   (started by ckrun --np)\n"
			"       ckmpi-agent --profile   (Open MPI's version and the pinned settings)\n");
	return 64;
}

/* lib/ next to /proc/self/exe. */
static int default_lib(char *out, size_t n)
{
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (len <= 0)
		return -errno;
	exe[len] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = 0;
	return snprintf(out, n, "%s/lib", exe) < (int)n ? 0 : -ENAMETOOLONG;
}

static size_t arena_size(void)
{
	const char *v = getenv("CKPT_MPI_ARENA");
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return DEFAULT_ARENA;
	n = strtoull(v, &end, 0);
	if (*end || n < 4096 || n > (1ull << 36)) {
		fprintf(stderr, "ckmpi-agent: CKPT_MPI_ARENA=%s: not a size between 4096 and 64 GiB\n", v);
		exit(64);
	}
	return (size_t)n;
}

static pid_t start(char **argv, const char *lib, const char *chan)
{
	const char *old = getenv("LD_LIBRARY_PATH");
	char *path;
	pid_t pid;

	if (asprintf(&path, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* the program never outlives its agent */
		setenv("LD_LIBRARY_PATH", path, 1);
		setenv(CK_MPI_CHANNEL_ENV, chan, 1);
		execvp(argv[0], argv);
		fprintf(stderr, "ckmpi-agent: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	free(path);
	return pid;
}

static int status_code(int ws)
{
	return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

int main(int argc, char **argv)
{
	char lib[PATH_MAX] = "", chan[64];
	int i, rank = -1, rc, ws = 0, code, finalized = 0, exited = 0, named = 1;
	unsigned long served = 0;
	struct ck_mpi_chan ch;
	struct ck_mpi_req *r;
	size_t arena;
	pid_t pid;

	if (argc == 2 && !strcmp(argv[1], "--profile")) {
		char prof[1024];

		if (ck__agent_profile(prof, sizeof(prof)) < 0) {
			fprintf(stderr, "ckmpi-agent: cannot read Open MPI's version\n");
			return 70;
		}
		printf("%s\n", prof);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "--serve")) {
		if (argc > 4 || (argc == 4 && strcmp(argv[3], "--restore")) || !*argv[2] || strlen(argv[2]) > 40)
			return usage();
		return ck__agent_job(argv[2], argc == 4, arena_size(), &argc, &argv);
	}
	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--lib") && i + 1 < argc)
			snprintf(lib, sizeof(lib), "%s", argv[++i]);
		else
			return usage();
	}
	if (i + 1 >= argc)
		return usage();
	if (!*lib && default_lib(lib, sizeof(lib))) {
		fprintf(stderr, "ckmpi-agent: cannot find the stand-in library's directory (use --lib)\n");
		return 64;
	}
	arena = arena_size();
	ck__agent_pin_mca();
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	snprintf(chan, sizeof(chan), "/ckmpi-%d-%d", (int)getpid(), rank);
	rc = ck_mpi_chan_create(&ch, chan, arena, 0);
	if (rc) {
		fprintf(stderr, "ckmpi-agent: rank %d: cannot create the channel %s: %s\n", rank, chan, strerror(-rc));
		MPI_Abort(MPI_COMM_WORLD, 69);
	}
	ck__agent_name_guard(chan);
	pid = start(argv + i + 1, lib, chan);
	if (pid < 0) {
		fprintf(stderr, "ckmpi-agent: rank %d: fork: %s\n", rank, strerror(errno));
		ck_mpi_chan_unlink(chan);
		MPI_Abort(MPI_COMM_WORLD, 69);
	}
	while (!exited) {
		rc = ck_mpi_chan_next(&ch, &r, finalized ? -1 : 100);
		if (rc == 0) {
			finalized |= ck__agent_serve(&ch, r) & 1;
			served++;
			if (r->op == CK_W_HELLO && named) { /* mapped by the program: the name can go */
				ck__agent_name_drop(chan);
				named = 0;
			}
			ck_mpi_chan_done(&ch, r);
			continue;
		}
		if (waitpid(pid, &ws, rc == -EPIPE ? 0 : WNOHANG) == pid)
			exited = 1;
	}
	ck__agent_name_drop(chan);
	ck_mpi_chan_close(&ch);
	code = status_code(ws);
	if (getenv("CKPT_MPI_STATS") && !strcmp(getenv("CKPT_MPI_STATS"), "1"))
		fprintf(stderr, "ckmpi-agent: rank %d: %lu requests served\n", rank, served);
	if (finalized)
		return code;
	if (named && code == 0) { /* never used MPI: as a bare program that does not */
		MPI_Finalize();
		return 0;
	}
	if (code == 0)
		fprintf(stderr, "ckmpi-agent: rank %d: the program exited before MPI_Finalize\n", rank);
	fflush(NULL);
	MPI_Abort(MPI_COMM_WORLD, code ? code : 1);
	return code ? code : 1;
}
