/* libckpt start-up: in a process of a ckrun job (CKPT_CTL_FD set), take a
 * control channel of its own, install the suspend handler, tell plugins,
 * and start the manager thread. Children do the same from a fork handler,
 * exec'd programs from this constructor again. In any other process the
 * library stays inert. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

/* ckrun's attach socket (CKPT_ATTACH, an abstract UNIX name): for a
 * process that lost the inherited channel (a program that closed every
 * descriptor before exec, as Python's subprocess does). */
static char ck__attach_name[108];

static int ck__connect_attach(void)
{
	struct sockaddr_un sa;
	size_t n = strlen(ck__attach_name);
	int fd, r;

	if (!n || n + 1 > sizeof(sa.sun_path))
		return -ENOENT;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path + 1, ck__attach_name, n); /* abstract: leading NUL */
	if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
		r = -errno;
		ck_close(fd);
		return r;
	}
	return fd;
}

/* Our channel's inode: an old channel of ours that ckrun closed (it left
 * us at EOF) is replaced in place, while a descriptor the job put at that
 * number after closing ours is left alone. */
static uint64_t ck__channel_ino;

static uint64_t ck__ino_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static int ck__is_our_channel(int fd)
{
	return ck__channel_ino && ck__ino_of(fd) == ck__channel_ino;
}

/* A channel of our own: a new socketpair, one end sent to ckrun over the
 * channel we inherited (with our pid), the other end at CK_CTL_FD (or, if
 * the job uses that number itself, at another close-on-exec one). The
 * channel stays open across exec, so exec'd programs attach the same way. */
static int ck__attach(int inherited)
{
	static struct ck_msg m;
	int sp[2];
	long r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	memset(&m, 0, __builtin_offsetof(struct ck_msg, text));
	m.type = CK_MSG_HELLO;
	m.arg[0] = (uint64_t)getpid();
	m.arg[1] = ck__stack_start();
	m.arg[2] = (uint64_t)(uintptr_t)&ck__semundo;
	r = ck_send_with_creds_fd(inherited, &m, __builtin_offsetof(struct ck_msg, text), sp[1]);
	ck_close(sp[1]);
	if (r < 0) {
		ck_close(sp[0]);
		return (int)r;
	}
	/* system calls: the job's close, dup3 and fcntl (fdhide.c) hide the channel */
	if (inherited == CK_CTL_FD || ck_sys2(SYS_fcntl, CK_CTL_FD, F_GETFD) < 0 || ck__is_our_channel(CK_CTL_FD)) {
		r = ck_sys3(SYS_dup3, sp[0], CK_CTL_FD, 0);
		if (r < 0) {
			ck_close(sp[0]);
			return (int)r;
		}
		ck__core.ctl_fd = CK_CTL_FD;
	} else {
		ck__core.ctl_fd = (int)ck_sys3(SYS_fcntl, sp[0], F_DUPFD_CLOEXEC, CK_CTL_FD + 1);
	}
	ck_close(sp[0]);
	if (inherited != CK_CTL_FD && inherited != ck__core.ctl_fd)
		ck_close(inherited);
	if (ck__core.ctl_fd < 0)
		return -EBADF;
	ck__channel_ino = ck__ino_of(ck__core.ctl_fd);
	return 0;
}

/* In a restored process: the restorer's channel is ours now (the restart
 * code set ck__core.ctl_fd to where the restorer left it). */
void ck__channel_restored(void)
{
	ck__channel_ino = ck__ino_of(ck__core.ctl_fd);
}

/* The manager lost its channel while ckrun still runs (the job closed our
 * descriptor): attach again through ckrun's attach socket. */
int ck__reattach(void)
{
	int fd = ck__connect_attach();

	if (fd < 0)
		return fd;
	return ck__attach(fd);
}

/* glibc ends the process when the last thread it made ends (the main
 * thread's pthread_exit, then the others return) by counting them: the
 * manager is one, and would keep such a job from ever ending. It is taken
 * out of the count; it never ends on its own (ck__manager). The count is
 * glibc's private symbol; without it such a job does not end. */
static int *ck__nptl_nthreads;

static void ck__start_manager(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;

	/* The manager takes no job signals. */
	sigfillset(&all);
	ck__real_sigprocmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	if (pthread_create(&th, &attr, ck__manager, NULL) == 0) {
		if (ck__nptl_nthreads)
			__atomic_sub_fetch(ck__nptl_nthreads, 1, __ATOMIC_SEQ_CST);
		/* its tid known before the job runs: listings of the job's
		 * threads leave it out from the first (fdhide.c) */
		while (!__atomic_load_n(&ck__core.manager_tid, __ATOMIC_SEQ_CST))
			ck_futex(&ck__core.manager_tid, FUTEX_WAIT_PRIVATE, 0, NULL);
	}
	pthread_attr_destroy(&attr);
	ck__seccomp_manager_started();
	ck__real_sigprocmask(SIG_SETMASK, &old, NULL);
}

/* Whether fd can be an inherited channel: a UNIX SOCK_SEQPACKET socket
 * (fd 1000 may be the job's own file, or a socket of its own). */
static int ck__is_channel_kind(int fd)
{
	int v = 0;
	socklen_t l = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || v != AF_UNIX)
		return 0;
	l = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &l) == 0 && v == SOCK_SEQPACKET;
}

/* In a forked child: only the forking thread exists; the manager is gone. */
void ck__fork_lock(void)
{
	while (__atomic_exchange_n(&ck__core.fork_lock, 1, __ATOMIC_ACQUIRE))
		ck_futex(&ck__core.fork_lock, FUTEX_WAIT_PRIVATE, 1, NULL);
}

void ck__fork_unlock(void)
{
	__atomic_store_n(&ck__core.fork_lock, 0, __ATOMIC_RELEASE);
	ck_futex(&ck__core.fork_lock, FUTEX_WAKE_PRIVATE, 1, NULL);
}

static void ck__atfork_prepare(void)
{
	ck__fork_lock();
}

static void ck__atfork_parent(void)
{
	ck__fork_unlock();
}

static void ck__atfork_child(void)
{
	ck__semundo_atfork_child();
	ck__seccomp_atfork_child();
	ck__inotify_atfork_child();
	ck__mqnotify_atfork_child();
	ck__core.fork_lock = 0; /* the parent's, taken for this fork */
	ck__priv_forget();
	/* the parent's manager sat in recvmsg, or a thread was sending: not
	 * so here (a channel move would wait for them) */
	ck__core.ctl_send = 0;
	ck__core.ctl_recv = 0;
	ck__core.wp_busy = 0; /* the parent's round, not ours */
	ck__core.exiting = 0;
	/* the parent's own descriptors, open when it forked us: not ours */
	for (int i = 0; i < 2; i++) {
		if (ck__core.fork_fd[i] >= 0 && ck__core.fork_fd[i] != ck__core.devfd)
			ck_close(ck__core.fork_fd[i]);
		ck__core.fork_fd[i] = -1;
	}
	if (ck__core.devfd >= 0)
		ck_close(ck__core.devfd);
	ck__core.devfd = -1;
	ck__core.manager_tid = 0; /* none here yet: no thread of ours to hide */
	if (ck__core.ctl_fd < 0)
		return;
	ck__core.pid = getpid();
	ck__core.parked = 0;
	ck__core.suspending = 0;
	ck__core.hold = 0;
	ck__core.fail[0] = 0;
	if (ck__attach(ck__core.ctl_fd) < 0) {
		ck__core.ctl_fd = -1; /* ckrun will name this process as unmanaged */
		return;
	}
	ck__plugins_event(CK_EV_ATFORK_CHILD);
	ck__start_manager();
}

__attribute__((constructor)) static void ck__init(void)
{
	const char *s = getenv(CK_CTL_ENV), *sig;
	int fd;

	if (!s)
		return;
	fd = atoi(s);
	if (getenv("CKPT_ATTACH"))
		snprintf(ck__attach_name, sizeof(ck__attach_name), "%s", getenv("CKPT_ATTACH"));
	if (fd < 3 || ck_sys2(SYS_fcntl, fd, F_GETFD) < 0 || !ck__is_channel_kind(fd))
		fd = ck__connect_attach(); /* the channel was closed before exec */
	if (fd < 0)
		return;
	if (getenv("CKPT_TEST_PREARM_OPEN_MS"))
		ck__core.test_prearm_open_ms = atoi(getenv("CKPT_TEST_PREARM_OPEN_MS"));
	if (getenv("CKPT_TEST_SIGNAL_GAP_US"))
		ck__core.test_signal_gap_us = atoi(getenv("CKPT_TEST_SIGNAL_GAP_US"));
	if (getenv("CKPT_TEST_TAKE_DELAY_MS") && getenv("CKPT_TEST_TAKE_DELAY_COMM")) {
		ck__core.test_take_delay_ms = atoi(getenv("CKPT_TEST_TAKE_DELAY_MS"));
		snprintf(ck__core.test_take_delay_comm, sizeof(ck__core.test_take_delay_comm), "%s",
			 getenv("CKPT_TEST_TAKE_DELAY_COMM"));
	}
	sig = getenv("CKPT_SIGNAL");
	if (sig && atoi(sig) >= SIGRTMIN && atoi(sig) <= SIGRTMAX)
		ck__core.sig = atoi(sig);
	ck__core.pid = getpid();
	if (ck__attach(fd) < 0)
		return;
	if (ck__install_handler() < 0)
		return;
	ck__nptl_nthreads = (int *)dlsym(RTLD_DEFAULT, "__nptl_nthreads");
	ck__waits_init();
	pthread_atfork(ck__atfork_prepare, ck__atfork_parent, ck__atfork_child);
	ck__plugins_event(CK_EV_INIT);
	ck__start_manager();
}
