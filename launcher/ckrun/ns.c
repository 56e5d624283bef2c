/* The job's namespaces. ckrun clones an init process into a new pid, mount
 * and IPC namespace (so the job is never PID 1, sees its own /proc, and can
 * be restored with the same PIDs through clone3 set_tid). Root needs
 * nothing more, and the job keeps every privilege it would have bare.
 * Anyone else (or a root without CAP_SYS_ADMIN) also gets a user namespace,
 * the only way to make the others, where the job keeps its own ids
 * (idmap.c); its restorers then keep one capability for the restore
 * (ck__keep_restore_cap). The init starts the job (or the restorers with
 * the saved pids), reaps everything and reports the job's wait status to
 * ckrun. If ckrun dies, the init is killed (PDEATHSIG) and the kernel
 * kills the whole namespace with it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/capability.h>
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
#include <sys/resource.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"
#include "ckrun/proto.h"

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

/* ckrun's capability bounding set: the job's in a user namespace too,
 * where the kernel starts from a full one. */
static uint64_t ck__bset;

static uint64_t ck__bset_read(void)
{
	uint64_t m = 0;

	for (int cap = 0; cap < 64; cap++) {
		int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
		if (r < 0)
			break; /* past the kernel's last capability */
		if (r > 0)
			m |= 1ull << cap;
	}
	return m;
}

static void ck__bset_drop(void)
{
	for (int cap = 0; cap < 64; cap++)
		if (!(ck__bset & (1ull << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno == EINVAL)
			break;
}

/* close_range's stand-in: the numbers /proc/self/fd lists (init mounted
 * its own /proc just before), read again after each batch of closes since
 * a directory changed while read may skip entries. Where /proc cannot be
 * read, every number below the soft limit and 65536, whichever is more. */
static void ck__close_listed(unsigned lo, unsigned hi)
{
	int more = 1;

	while (more) {
		DIR *d = opendir("/proc/self/fd");
		struct dirent *e;

		if (!d) {
			struct rlimit rl;
			unsigned top = 65536;

			if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > top)
				top = rl.rlim_cur > ~0u ? ~0u : (unsigned)rl.rlim_cur;
			for (unsigned fd = lo; fd <= hi && fd < top; fd++)
				close((int)fd);
			return;
		}
		more = 0;
		while ((e = readdir(d))) {
			char *end;
			unsigned long fd = strtoul(e->d_name, &end, 10);

			if (*end || e->d_name[0] == '.' || fd < lo || fd > hi || (int)fd == dirfd(d))
				continue;
			close((int)fd);
			more = 1;
		}
		closedir(d);
	}
}

/* Every descriptor from lowfd up but two, however high (ckrun's own may
 * lie above 4096 under a raised RLIMIT_NOFILE, and init lives as long as
 * the job: a pipe end kept here would keep its reader from EOF). */
static void ck__close_range(unsigned lo, unsigned hi)
{
	if (lo > hi || syscall(SYS_close_range, lo, hi, 0) == 0)
		return;
	ck__close_listed(lo, hi); /* a kernel before 5.9 */
}

/* Every descriptor from lowfd up but those of keep (sorted here). */
static void ck__close_from(int lowfd, int *keep, int nkeep)
{
	unsigned lo = (unsigned)lowfd;

	for (int i = 0; i < nkeep; i++)
		for (int k = i + 1; k < nkeep; k++)
			if (keep[k] < keep[i]) {
				int t = keep[i];
				keep[i] = keep[k];
				keep[k] = t;
			}

	for (int i = 0; i < nkeep; i++) {
		if (keep[i] < lowfd || (unsigned)keep[i] < lo)
			continue;
		if ((unsigned)keep[i] > lo)
			ck__close_range(lo, (unsigned)keep[i] - 1);
		lo = (unsigned)keep[i] + 1;
	}
	ck__close_range(lo, ~0u);
}

static __attribute__((noreturn)) void ck__exec_job(struct ckrun *c, int chan)
{
	const char *old = getenv("LD_PRELOAD");
	char *pre;

	if (dup2(chan, CK_CTL_FD) < 0)
		_exit(CK_EXIT_INTERNAL);
	if (chan != CK_CTL_FD)
		close(chan);
	if (c->nofile_raised) { /* the job's own soft limit, as bare */
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || (rl.rlim_cur = c->nofile_cur, setrlimit(RLIMIT_NOFILE, &rl)) < 0)
			_exit(CK_EXIT_INTERNAL);
	}
	if (c->userns)
		ck__bset_drop();
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
	if (ck_jobenv_exec_env(&c->jobenv) < 0) /* --env on a fresh start too */
		_exit(CK_EXIT_INTERNAL);
	execvp(c->argv[0], c->argv);
	fprintf(stderr, "ckrun: cannot run %s: %s\n", c->argv[0], strerror(errno));
	_exit(127);
}

/* A restorer that is not root in the job's user namespace would lose at
 * its exec the capabilities init has there; it keeps the one a restore
 * needs, as an ambient capability: CAP_CHECKPOINT_RESTORE (Linux 5.9) for
 * clone3 set_tid (its children's pids, its threads' TIDs) and
 * PR_SET_MM_MAP's exe_fd (/proc/self/exe), else CAP_SYS_ADMIN. libckpt's
 * restart code gives every thread its saved credentials back (none of
 * these) before the job runs again. Returns the capability, 0 where none is
 * needed, or -errno. */
static int ck__keep_restore_cap(void)
{
	static const int want[] = {CAP_CHECKPOINT_RESTORE, CAP_SYS_ADMIN};
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	int r = -EPERM;

	if (getuid() == 0) /* root there: its exec keeps every capability */
		return 0;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (syscall(SYS_capget, &h, d) < 0)
			return -errno;
		d[want[i] / 32].inheritable |= 1u << (want[i] % 32);
		if (syscall(SYS_capset, &h, d) == 0 && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, want[i], 0, 0) == 0)
			return want[i];
		r = -errno;
	}
	return r;
}

static __attribute__((noreturn)) void ck__exec_restorer(struct ckrun *c, int chan)
{
	int r = ck__keep_restore_cap();

	if (r < 0)
		fprintf(stderr,
			"ckrun: the restorer cannot keep CAP_CHECKPOINT_RESTORE in the job's user namespace (%s): "
			"threads come back with new TIDs, a process tree fails to restore\n",
			strerror(-r));
	if (c->userns)
		ck__bset_drop(); /* after: the ambient raise needs the capability in it */
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
static void ck__init_chld(int sig)
{
	(void)sig; /* (only to end init's ppoll) */
}

static __attribute__((noreturn)) void ck__init_main(struct ckrun *c, enum ck_spawn_mode mode, const pid_t *pids,
						     size_t npids, int chan, int status_w, int lastpid)
{
	pid_t job = -1;
	int st, keep[3] = {chan, status_w, lastpid};
	sigset_t chld, waiting;
	struct sigaction sa;

	/* A session of the job's own: a terminal's Ctrl-C, or a signal to
	 * ckrun's process group (GNU timeout, a scheduler), reaches ckrun,
	 * which checkpoints and then stops the job, and not the job first. */
	setsid();
	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		fprintf(stderr, "ckrun: cannot mount /proc for the job's pid namespace: %s\n", strerror(errno));
		_exit(CK_EXIT_INTERNAL);
	}
	ck__close_from(3, keep, 3);
	if (mode == CK_SPAWN_LAUNCH) {
		job = fork();
		if (job == 0)
			ck__exec_job(c, chan);
	} else {
		/* Restorers of init's saved children (the main process first),
		 * each with its pid; they create the rest of the tree, all in
		 * a time namespace where the clocks go on from the cut's. */
		int r = c->tns_want ? ck_timens_enter(c->tns_mono, c->tns_boot) : 0;
		if (r < 0 && c->verbose) { /* write(2): no stdio after a raw clone of ckrun's threads */
			static const char no_tns[] = "ckrun: no time namespace for the restored job: its CLOCK_MONOTONIC "
						     "and CLOCK_BOOTTIME are the host's, moved on while it was down\n";
			ssize_t w = write(2, no_tns, sizeof(no_tns) - 1);
			(void)w;
		}
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
	/* Reaps, and answers ckrun's requests for the namespace's last pid
	 * (lastpid.c) between: SIGCHLD is let in only while it waits. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, &waiting);
	sigdelset(&waiting, SIGCHLD);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ck__init_chld;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;) {
		struct pollfd pf = {lastpid, POLLIN, 0};
		pid_t p;
		int n;

		while ((p = waitpid(-1, &st, __WALL | WNOHANG)) > 0) {
			if (p != job)
				continue; /* orphans (daemons of the job) and restore helpers: reaped silently */
			if (write(status_w, &st, sizeof(st)) != sizeof(st))
				_exit(CK_EXIT_INTERNAL);
			_exit(0); /* the job ends with its main process */
		}
		if (p < 0 && errno != EINTR)
			_exit(CK_EXIT_INTERNAL);
		/* (a second at most: a child whose exit signal is 0 sends none) */
		n = ppoll(lastpid >= 0 ? &pf : NULL, lastpid >= 0 ? 1 : 0, &(struct timespec){1, 0}, &waiting);
		if (n > 0 && ((pf.revents & POLLIN) ? ck_lastpid_serve(lastpid) < 0 : 1))
			lastpid = -1; /* (ckrun's end closed: init dies with ckrun anyway) */
	}
}

int ck_spawn(struct ckrun *c, enum ck_spawn_mode mode, const pid_t *pids, size_t npids)
{
	int chan[2] = {-1, -1}, sync[2] = {-1, -1}, status[2] = {-1, -1}, lastpid[2] = {-1, -1}, one = 1, r;
	long pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0 || pipe2(sync, O_CLOEXEC) < 0 ||
	    pipe2(status, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, lastpid) < 0) {
		r = -errno;
		ck_err_set("cannot create the job's channels: %s", strerror(errno));
		goto fail;
	}
	setsockopt(chan[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
	fflush(NULL);
	/* The child runs on without the lease's renewal thread: it must not
	 * be in the middle of a request (holding malloc's lock) now. */
	ck_joblock_pause(c->lock, 1);
	/* IPC too: the job's System V objects are its own, their ids restorable.
	 * Root (real root: never a setuid ckrun) makes these itself and
	 * restores pids and TIDs with its own capabilities. */
	c->userns = !(getuid() == 0 && geteuid() == 0);
	ck__bset = ck__bset_read();
	pid = syscall(SYS_clone, (c->userns ? CLONE_NEWUSER : 0) | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | SIGCHLD,
		      0, 0, 0, 0);
	if (pid < 0 && errno == EPERM && !c->userns) {
		/* root without CAP_SYS_ADMIN (a container's): a user namespace
		 * gives it the others */
		if (c->verbose)
			fprintf(stderr, "ckrun: no CAP_SYS_ADMIN: the job runs in a user namespace (root's privileges "
					"outside it are lost)\n");
		c->userns = 1;
		pid = syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | SIGCHLD, 0, 0, 0,
			      0);
	}
	if (pid != 0)
		ck_joblock_pause(c->lock, 0);
	if (pid < 0) {
		r = -errno;
		if (c->userns && errno == EPERM)
			ck_err_set("cannot create the job's user namespace: %s (user namespaces disabled for this "
				   "user? see user.max_user_namespaces)",
				   strerror(errno));
		else
			ck_err_set("cannot create the job's %snamespaces: %s", c->userns ? "user and pid " : "pid ",
				   strerror(errno));
		goto fail;
	}
	if (pid == 0) {
		char b;
		close(chan[0]);
		close(sync[1]);
		close(status[0]);
		close(lastpid[0]);
		/* Die with ckrun; the sync read also catches a ckrun that died
		 * before we asked (the pipe then reads end-of-file). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (read(sync[0], &b, 1) != 1)
			_exit(CK_EXIT_INTERNAL);
		ck__init_main(c, mode, pids, npids, chan[1], status[1], lastpid[1]);
	}
	close(chan[1]);
	close(sync[0]);
	close(status[1]);
	close(lastpid[1]);
	chan[1] = sync[0] = status[1] = lastpid[1] = -1; /* (not again at fail) */
	r = c->userns ? ck_idmap_write((pid_t)pid, c->verbose) : 0;
	if (r < 0) {
		ck_err_set("cannot map user ids into the job's namespace: %s", strerror(-r));
		kill((pid_t)pid, SIGKILL);
		waitpid((pid_t)pid, NULL, 0);
		close(sync[1]);
		close(chan[0]);
		close(status[0]);
		close(lastpid[0]);
		return r;
	}
	if (write(sync[1], "g", 1) != 1) {
		r = -errno;
		goto fail;
	}
	close(sync[1]);
	c->agent_fd = chan[0];
	c->status_fd = status[0];
	if (c->lastpid_fd >= 0) /* (the namespace of a job that ended, or of a failed restore) */
		close(c->lastpid_fd);
	c->lastpid_fd = lastpid[0];
	c->init_pid = (pid_t)pid;
	ck_files_ns_pid = c->init_pid;
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
		if (lastpid[i] >= 0)
			close(lastpid[i]);
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
