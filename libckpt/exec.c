/* exec with an environment of the job's own choosing (execve, execvpe,
 * fexecve, posix_spawn[p]) must still load libckpt in the new program:
 * the variables it needs (LD_PRELOAD with libckpt, the channel, the
 * suspend signal, the attach socket) are put back into that environment, as DMTCP does; an exec
 * also hands on the process's semaphore adjustments (semundo.c). exec*()
 * that take `environ` come here too (at the end). Runs in vfork children
 * too: the new array lives on the stack, nothing is allocated. */
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__NVARS 4
static const char *const ck__names[CK__NVARS] = {"LD_PRELOAD=", CK_CTL_ENV "=", "CKPT_SIGNAL=", "CKPT_ATTACH="};
static char *ck__vars[CK__NVARS]; /* "NAME=value" as ckrun set them */

__attribute__((constructor)) static void ck__exec_init(void)
{
	extern char **environ;

	for (char **e = environ; e && *e; e++)
		for (int i = 0; i < CK__NVARS; i++)
			if (!strncmp(*e, ck__names[i], strlen(ck__names[i])))
				ck__vars[i] = strdup(*e);
}

static size_t ck__count(char *const envp[])
{
	size_t n = 0;

	while (envp && envp[n])
		n++;
	return n;
}

/* Copies envp into out (room for count + CK__NVARS + 2), adding what is
 * missing. A job that sets LD_PRELOAD itself gets libckpt's entry in front
 * of its list. An exec (same_process: not a spawn) also hands on the
 * process's semaphore adjustments, which the kernel keeps (semundo.c). */
static char *const *ck__fix(char *const envp[], char **out, char *preload_buf, size_t preload_len, int same_process)
{
	const char *semundo = same_process ? ck__semundo_env() : NULL;
	const char *cpu = same_process ? ck__cputime_env() : NULL;
	size_t n = 0;
	int have[CK__NVARS] = {0};

	if (ck__core.ctl_fd < 0 || !ck__vars[1])
		return envp; /* not under ckrun */
	for (size_t i = 0; envp && envp[i]; i++) {
		const char *e = envp[i];
		for (int k = 0; k < CK__NVARS; k++)
			if (!strncmp(e, ck__names[k], strlen(ck__names[k])))
				have[k] = 1;
		/* the job took the channel's number (fdhide.c moved the channel,
		 * close-on-exec): the new program attaches through the attach
		 * socket, never through what the job holds at that number */
		if (!strncmp(e, "CKPT_SEMUNDO=", 13) || !strncmp(e, "CKPT_CPU=", 9))
			continue; /* ours, from this process's account only */
		if (ck__core.ctl_fd != CK_CTL_FD && !strncmp(e, CK_CTL_ENV "=", sizeof(CK_CTL_ENV)))
			e = CK_CTL_ENV "=-1";
		if (!strncmp(e, "LD_PRELOAD=", 11) && ck__vars[0] && !strstr(e, "libckpt.so")) {
			/* ours in front of the job's own list */
			size_t a = strlen(ck__vars[0]), b = strlen(e + 11);
			if (a + 1 + b + 1 <= preload_len) {
				memcpy(preload_buf, ck__vars[0], a);
				preload_buf[a] = ':';
				memcpy(preload_buf + a + 1, e + 11, b + 1);
				e = preload_buf;
			}
		}
		out[n++] = (char *)e;
	}
	for (int k = 0; k < CK__NVARS; k++)
		if (!have[k] && ck__vars[k])
			out[n++] = k == 1 && ck__core.ctl_fd != CK_CTL_FD ? (char *)CK_CTL_ENV "=-1" : ck__vars[k];
	if (semundo)
		out[n++] = (char *)semundo;
	if (cpu)
		out[n++] = (char *)cpu;
	out[n] = NULL;
	return out;
}

#define CK__FIXED_ENV_OF(envp, same)                                                                          \
	char **ck__out = __builtin_alloca((ck__count(envp) + CK__NVARS + 3) * sizeof(char *));                \
	char ck__pre[4096];                                                                                   \
	char *const *fixed = ck__fix(envp, ck__out, ck__pre, sizeof(ck__pre), same)
#define CK__FIXED_ENV(envp) CK__FIXED_ENV_OF(envp, 1)
#define CK__SPAWN_ENV(envp) CK__FIXED_ENV_OF(envp, 0)

/* A parking signal sent to this thread while it execs stays pending
 * across the exec, into a program that has no handler for it yet: its
 * default action ended the process. Ignored over the call (which drops
 * one pending, and lasts across the exec until the new program's
 * libckpt installs its handler), it cannot; a blocked mask instead would
 * be inherited by threads the new program's libraries start before
 * libckpt's constructor runs, which could then never park. A failed exec
 * puts the handler back (a round that signalled meanwhile gives up on the
 * threads it missed, within its bound). Returns the action to put back. */
struct ck__ksigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

static struct ck__ksigaction ck__exec_ignore(void)
{
	struct ck__ksigaction ign = {SIG_IGN, 0, NULL, 0}, old = {0};

	if (ck__core.ctl_fd >= 0)
		ck_sys4(SYS_rt_sigaction, ck__core.sig, (long)&ign, (long)&old, sizeof(uint64_t));
	return old;
}

static void ck__exec_failed(const struct ck__ksigaction *old)
{
	int e = errno;

	if (ck__core.ctl_fd >= 0)
		ck_sys4(SYS_rt_sigaction, ck__core.sig, (long)old, 0, sizeof(uint64_t));
	errno = e;
}

#define CK__EXEC(call)                                                                                         \
	do {                                                                                                   \
		struct ck__ksigaction ck__old = ck__exec_ignore();                                             \
		int ck__r = call;                                                                              \
		ck__exec_failed(&ck__old);                                                                     \
		return ck__r;                                                                                  \
	} while (0)

int execve(const char *path, char *const argv[], char *const envp[])
{
	static int (*real)(const char *, char *const[], char *const[]);
	CK__FIXED_ENV(envp);

	if (!real)
		real = dlsym(RTLD_NEXT, "execve");
	CK__EXEC(real(path, argv, fixed));
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	static int (*real)(const char *, char *const[], char *const[]);
	CK__FIXED_ENV(envp);

	if (!real)
		real = dlsym(RTLD_NEXT, "execvpe");
	CK__EXEC(real(file, argv, fixed));
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	static int (*real)(int, char *const[], char *const[]);
	CK__FIXED_ENV(envp);

	if (!real)
		real = dlsym(RTLD_NEXT, "fexecve");
	CK__EXEC(real(fd, argv, fixed));
}

/* (the C library's own since 2.34; the system call where it has none) */
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
	static int (*real)(int, const char *, char *const[], char *const[], int);
	CK__FIXED_ENV(envp);

	if (!real)
		real = dlsym(RTLD_NEXT, "execveat");
	if (!real)
		CK__EXEC((int)syscall(SYS_execveat, dirfd, path, argv, fixed, flags));
	CK__EXEC(real(dirfd, path, argv, fixed, flags));
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
		char *const argv[], char *const envp[])
{
	static int (*real)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
			   char *const[], char *const[]);
	CK__SPAWN_ENV(envp);

	if (!real)
		real = dlsym(RTLD_NEXT, "posix_spawn");
	return real(pid, path, fa, at, argv, fixed);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
		 char *const argv[], char *const envp[])
{
	static int (*real)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
			   char *const[], char *const[]);
	CK__SPAWN_ENV(envp);

	if (!real)
		real = dlsym(RTLD_NEXT, "posix_spawnp");
	return real(pid, file, fa, at, argv, fixed);
}

/* The C library's exec*() that take `environ` call its own execve inside
 * it, not ours: they come here so that an exec hands on what ck__fix adds
 * (the semaphore adjustments; the rest `environ` already holds). */
extern char **environ;

int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* argv of execl*(): arg, then the variadic ones up to NULL; then, for
 * execle, the environment after it. */
#define CK__LIST_ARGS(arg, ap, argv, envp_out, with_env)                                                              \
	size_t ck__n = 1;                                                                                     \
	va_start(ap, arg);                                                                                    \
	while (va_arg(ap, char *))                                                                            \
		ck__n++;                                                                                      \
	va_end(ap);                                                                                           \
	char **argv = __builtin_alloca((ck__n + 1) * sizeof(char *));                                        \
	va_start(ap, arg);                                                                                    \
	argv[0] = (char *)arg;                                                                                \
	for (size_t ck__i = 1; ck__i <= ck__n; ck__i++)                                                       \
		argv[ck__i] = va_arg(ap, char *);                                                             \
	envp_out = (with_env) ? va_arg(ap, char **) : NULL;                                                   \
	va_end(ap)

int execl(const char *path, const char *arg, ...)
{
	char **envp;
	va_list ap;
	CK__LIST_ARGS(arg, ap, argv, envp, 0);

	(void)envp;
	return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...)
{
	char **envp;
	va_list ap;
	CK__LIST_ARGS(arg, ap, argv, envp, 0);

	(void)envp;
	return execvpe(file, argv, environ);
}

int execle(const char *path, const char *arg, ...)
{
	char **envp;
	va_list ap;
	CK__LIST_ARGS(arg, ap, argv, envp, 1);

	return execve(path, argv, envp);
}
