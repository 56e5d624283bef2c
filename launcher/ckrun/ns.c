/* The job's namespaces. ckrun clones an init process into a new user, pid,
 * mount and IPC namespace (so the job is never PID 1, sees its own /proc, and
 * can be restored with the same PIDs through clone3 set_tid). The init
 * starts the job (or the restorer with the saved pid), reaps everything
 * and reports the job's wait status to ckrun. If ckrun dies, the init is
 * killed (PDEATHSIG) and the kernel kills the whole namespace with it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "libckpt/proto.h"

static int ck__write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		r = -errno;
	close(fd);
	return r;
}

static int ck__map_ids(pid_t pid)
{
	char path[64], map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	int r;

	/* root keeps every id; anyone else maps to themselves. */
	snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
	if (uid == 0)
		snprintf(map, sizeof(map), "0 0 4294967295");
	else
		snprintf(map, sizeof(map), "%u %u 1", uid, uid);
	if ((r = ck__write_file(path, map)) < 0)
		return r;
	if (gid != 0 || uid != 0) {
		snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
		ck__write_file(path, "deny");
	}
	snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
	if (gid == 0 && uid == 0)
		snprintf(map, sizeof(map), "0 0 4294967295");
	else
		snprintf(map, sizeof(map), "%u %u 1", gid, gid);
	return ck__write_file(path, map);
}

static void ck__scrub_env(void)
{
	/* Credentials are ckrun's alone (see README, Security). */
	static const char *secret[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
				       "AWS_SECURITY_TOKEN", NULL};
	for (int i = 0; secret[i]; i++)
		unsetenv(secret[i]);
}

/* --huge-pages: glibc's malloc advises MADV_HUGEPAGE on the memory it
 * maps (tunable glibc.malloc.hugetlb=1, glibc 2.35 and later; read by the
 * job's dynamic loader, other tunables the user set are kept). With 2 MiB
 * pages a snapshot write-protects and lifts 512 times fewer entries. */
static int ck__env_huge_pages(void)
{
	const char *t = getenv("GLIBC_TUNABLES");
	char *v;

	if (t && strstr(t, "glibc.malloc.hugetlb="))
		return 0; /* the user's choice stands */
	if (asprintf(&v, "%s%sglibc.malloc.hugetlb=1", t && *t ? t : "", t && *t ? ":" : "") < 0)
		return -ENOMEM;
	return setenv("GLIBC_TUNABLES", v, 1) ? -errno : 0;
}

static void ck__close_from(int lowfd, int keep1, int keep2)
{
	for (int fd = lowfd; fd < 4096; fd++)
		if (fd != keep1 && fd != keep2)
			close(fd);
}

static __attribute__((noreturn)) void ck__exec_job(struct ckrun *c, int chan)
{
	const char *old = getenv("LD_PRELOAD");
	char *pre;

	if (dup2(chan, CK_CTL_FD) < 0)
		_exit(CK_EXIT_INTERNAL);
	if (chan != CK_CTL_FD)
		close(chan);
	if (old && *old) {
		if (asprintf(&pre, "%s:%s", c->libckpt, old) < 0)
			_exit(CK_EXIT_INTERNAL);
	} else {
		pre = c->libckpt;
	}
	setenv("LD_PRELOAD", pre, 1);
	setenv(CK_CTL_ENV, "1000", 1);
	if (c->attach_name[0])
		setenv("CKPT_ATTACH", c->attach_name, 1);
	ck__scrub_env();
	if (c->huge_pages && ck__env_huge_pages() < 0)
		_exit(CK_EXIT_INTERNAL);
	execvp(c->argv[0], c->argv);
	fprintf(stderr, "ckrun: cannot run %s: %s\n", c->argv[0], strerror(errno));
	_exit(127);
}

static __attribute__((noreturn)) void ck__exec_restorer(struct ckrun *c, int chan)
{
	char *argv[] = {"ckpt-restore", NULL};
	char *envp[] = {NULL};

	if (dup2(chan, CK_CTL_FD) < 0)
		_exit(CK_EXIT_INTERNAL);
	if (chan != CK_CTL_FD)
		close(chan);
	execve(c->restorer, argv, envp);
	fprintf(stderr, "ckrun: cannot run the restorer %s: %s\n", c->restorer, strerror(errno));
	_exit(CK_EXIT_INTERNAL);
}

/* PID 1 of the job's namespace. */
static __attribute__((noreturn)) void ck__init_main(struct ckrun *c, enum ck_spawn_mode mode, const pid_t *pids,
						     size_t npids, int chan, int status_w)
{
	pid_t job = -1;
	int st;

	/* A session of the job's own: a terminal's Ctrl-C, or a signal to
	 * ckrun's process group (GNU timeout, a scheduler), reaches ckrun,
	 * which checkpoints and then stops the job, and not the job first. */
	setsid();
	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		fprintf(stderr, "ckrun: cannot mount /proc for the job's pid namespace: %s\n", strerror(errno));
		_exit(CK_EXIT_INTERNAL);
	}
	ck__close_from(3, chan, status_w);
	if (mode == CK_SPAWN_LAUNCH) {
		job = fork();
		if (job == 0)
			ck__exec_job(c, chan);
	} else {
		/* Restorers of init's saved children (the main process first),
		 * each with its pid; they create the rest of the tree. */
		for (size_t i = 0; i < npids; i++) {
			struct clone_args ca;
			pid_t tid = pids[i], kid;
			memset(&ca, 0, sizeof(ca));
			ca.exit_signal = SIGCHLD;
			ca.set_tid = (uint64_t)(uintptr_t)&tid;
			ca.set_tid_size = 1;
			kid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
			if (kid == 0)
				ck__exec_restorer(c, chan);
			if (kid < 0) {
				fprintf(stderr, "ckrun: cannot start the job's process (pid %d): %s\n", tid, strerror(errno));
				_exit(CK_EXIT_INTERNAL);
			}
			if (i == 0)
				job = kid;
		}
	}
	if (job < 0) {
		fprintf(stderr, "ckrun: cannot start the job's process: %s\n", strerror(errno));
		_exit(CK_EXIT_INTERNAL);
	}
	close(chan);
	for (;;) {
		pid_t p = waitpid(-1, &st, __WALL);
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0)
			_exit(CK_EXIT_INTERNAL);
		if (p == job) {
			if (write(status_w, &st, sizeof(st)) != sizeof(st))
				_exit(CK_EXIT_INTERNAL);
			_exit(0);
		}
		/* orphans (daemons of the job) and restore helpers: reaped
		 * silently; the job ends with its main process */
	}
}

int ck_spawn(struct ckrun *c, enum ck_spawn_mode mode, const pid_t *pids, size_t npids)
{
	int chan[2] = {-1, -1}, sync[2] = {-1, -1}, status[2] = {-1, -1}, one = 1, r;
	long pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0 || pipe2(sync, O_CLOEXEC) < 0 ||
	    pipe2(status, O_CLOEXEC) < 0) {
		r = -errno;
		ck_err_set("cannot create the job's channels: %s", strerror(errno));
		goto fail;
	}
	setsockopt(chan[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	fflush(NULL);
	/* The child runs on without the lease's renewal thread: it must not
	 * be in the middle of a request (holding malloc's lock) now. */
	ck_joblock_pause(c->lock, 1);
	/* IPC too: the job's System V objects are its own, their ids restorable */
	pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | SIGCHLD, 0, 0, 0, 0);
	if (pid != 0)
		ck_joblock_pause(c->lock, 0);
	if (pid < 0) {
		r = -errno;
		ck_err_set("cannot create the job's user and pid namespaces: %s", strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		char b;
		close(chan[0]);
		close(sync[1]);
		close(status[0]);
		/* Die with ckrun; the sync read also catches a ckrun that died
		 * before we asked (the pipe then reads end-of-file). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (read(sync[0], &b, 1) != 1)
			_exit(CK_EXIT_INTERNAL);
		ck__init_main(c, mode, pids, npids, chan[1], status[1]);
	}
	close(chan[1]);
	close(sync[0]);
	close(status[1]);
	r = ck__map_ids((pid_t)pid);
	if (r < 0) {
		ck_err_set("cannot map user ids into the job's namespace: %s", strerror(-r));
		kill((pid_t)pid, SIGKILL);
		waitpid((pid_t)pid, NULL, 0);
		close(sync[1]);
		close(chan[0]);
		close(status[0]);
		return r;
	}
	if (write(sync[1], "g", 1) != 1) {
		r = -errno;
		goto fail;
	}
	close(sync[1]);
	c->agent_fd = chan[0];
	c->status_fd = status[0];
	c->init_pid = (pid_t)pid;
	c->job_pid = 0;
	c->job_ready = 0;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (chan[i] >= 0)
			close(chan[i]);
		if (sync[i] >= 0)
			close(sync[i]);
		if (status[i] >= 0)
			close(status[i]);
	}
	return r;
}

void ck_kill_job(struct ckrun *c)
{
	if (c->init_pid > 0) {
		kill(c->init_pid, SIGKILL);
		waitpid(c->init_pid, NULL, 0);
		c->init_pid = 0;
	}
}

int ck_job_exit_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return CK_EXIT_INTERNAL;
}
