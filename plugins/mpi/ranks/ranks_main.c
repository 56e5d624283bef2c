/* ckmpi-ranks N KEY PROFILE -- PROGRAM [ARGS...]: the main process of a job that
 * `ckrun --np N` runs. It starts N copies of PROGRAM, rank R with the
 * stand-in libmpi.so.40 (lib/ next to this executable) first on its
 * library path and CKPT_MPI_CHANNEL naming the channel of rank R's agent
 * (/ckmpi-KEY-R; ckrun started the agents with mpirun, outside the job),
 * and exits once all have: 0, or the status of the first that failed
 * (128+N for signal N); the first that fails ends the others, as mpirun
 * does (an MPI job is over when one rank is). It holds no state of its own
 * beyond its children, so a checkpoint of the job restores it with them.
 * PROFILE (Open MPI's version and the pinned settings) is not used here:
 * it is in the job's command line so that the checkpoint records it. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANKS 4096

static int usage(void)
{
	fprintf(stderr, "usage: ckmpi-ranks N KEY PROFILE -- PROGRAM [ARGS...] (started by ckrun --np)\n");
	return 64;
}

static int lib_dir(char *out, size_t n)
{
	char exe[PATH_MAX], *slash;
	ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (len <= 0)
		return -1;
	exe[len] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return snprintf(out, n, "%s/lib", exe) < (int)n ? 0 : -1;
}

int main(int argc, char **argv)
{
	char lib[PATH_MAX], chan[96], *path;
	const char *old = getenv("LD_LIBRARY_PATH");
	static pid_t kids[MAX_RANKS];
	int n, status = 0, left, ws;
	char *end;
	pid_t pid;

	if (argc < 6 || strcmp(argv[4], "--"))
		return usage();
	n = (int)strtol(argv[1], &end, 10);
	if (*end || n < 1 || n > MAX_RANKS || !*argv[2] || strlen(argv[2]) > 40)
		return usage();
	if (lib_dir(lib, sizeof(lib)) < 0 ||
	    asprintf(&path, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0) {
		fprintf(stderr, "ckmpi-ranks: cannot find the stand-in library's directory\n");
		return 71;
	}
	setenv("LD_LIBRARY_PATH", path, 1);
	for (int r = 0; r < n; r++) {
		snprintf(chan, sizeof(chan), "/ckmpi-%s-%d", argv[2], r);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "ckmpi-ranks: fork: %s\n", strerror(errno));
			for (int k = 0; k < r; k++)
				kill(kids[k], SIGKILL);
			while (wait(NULL) > 0)
				;
			return 71;
		}
		kids[r] = pid;
		if (pid == 0) {
			setenv("CKPT_MPI_CHANNEL", chan, 1);
			execvp(argv[5], argv + 5);
			fprintf(stderr, "ckmpi-ranks: cannot run %s: %s\n", argv[5], strerror(errno));
			_exit(127);
		}
	}
	for (left = n; left > 0;) {
		pid = wait(&ws);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		left--;
		for (int r = 0; r < n; r++)
			if (kids[r] == pid)
				kids[r] = 0; /* reaped: its pid may be another's now */
		if (!status && (status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws)))
			for (int r = 0; r < n; r++)
				if (kids[r] > 0)
					kill(kids[r], SIGKILL);
	}
	return status;
}
