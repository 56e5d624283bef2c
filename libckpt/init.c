/* libckpt start-up: in a process started by ckrun (CKPT_CTL_FD set), take
 * the control channel, install the suspend handler, tell plugins, and start
 * the manager thread. In any other process the library stays inert. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

static void ck__record_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		struct stat st;
		if (fstat(fd, &st) == 0) {
			ck__core.stdio_dev[fd] = st.st_dev;
			ck__core.stdio_ino[fd] = st.st_ino;
		}
	}
}

__attribute__((constructor)) static void ck__init(void)
{
	const char *s = getenv(CK_CTL_ENV), *sig;
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	int fd;

	if (!s)
		return;
	fd = atoi(s);
	/* Children and exec'd programs do not inherit the channel. */
	unsetenv(CK_CTL_ENV);
	if (fd < 3 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return;
	sig = getenv("CKPT_SIGNAL");
	if (sig && atoi(sig) >= SIGRTMIN && atoi(sig) <= SIGRTMAX)
		ck__core.sig = atoi(sig);
	ck__core.ctl_fd = fd;
	ck__core.pid = getpid();
	ck__record_stdio();
	if (ck__install_handler() < 0)
		return;
	ck__plugins_event(CK_EV_INIT);

	/* The manager takes no job signals. */
	sigfillset(&all);
	ck__real_sigprocmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	pthread_create(&th, &attr, ck__manager, NULL);
	pthread_attr_destroy(&attr);
	ck__real_sigprocmask(SIG_SETMASK, &old, NULL);
}
