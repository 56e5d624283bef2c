/* Raw system calls for code that must not touch libc: the restorer (no libc
 * at all) and libckpt's restart path and suspended-state code, which run
 * while libc's own state (locks, TID cache, errno) belongs to threads that
 * are parked or not yet re-created. Return value is the kernel's: >= 0, or
 * -errno. */
#ifndef CK_SYS_H
#define CK_SYS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/syscall.h>

static inline long ck_sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long ret;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline void ck_memcpy_early(void *d, const void *s, unsigned long n)
{
	unsigned char *p = d;
	const unsigned char *q = s;
	while (n--)
		*p++ = *q++;
}

#define ck_sys0(n) ck_sys6((n), 0, 0, 0, 0, 0, 0)
#define ck_sys1(n, a) ck_sys6((n), (long)(a), 0, 0, 0, 0, 0)
#define ck_sys2(n, a, b) ck_sys6((n), (long)(a), (long)(b), 0, 0, 0, 0)
#define ck_sys3(n, a, b, c) ck_sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define ck_sys4(n, a, b, c, d) ck_sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define ck_sys5(n, a, b, c, d, e) ck_sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

static inline long ck_read(int fd, void *buf, size_t len) { return ck_sys3(SYS_read, fd, buf, len); }
static inline long ck_write(int fd, const void *buf, size_t len) { return ck_sys3(SYS_write, fd, buf, len); }
static inline long ck_close(int fd) { return ck_sys1(SYS_close, fd); }
static inline long ck_openat(int dfd, const char *p, int fl, int mode) { return ck_sys4(SYS_openat, dfd, p, fl, mode); }
static inline long ck_mmap(uint64_t a, size_t l, int prot, int fl, int fd, uint64_t off)
{
	return ck_sys6(SYS_mmap, (long)a, (long)l, prot, fl, fd, (long)off);
}
static inline long ck_munmap(uint64_t a, size_t l) { return ck_sys2(SYS_munmap, a, l); }
static inline long ck_mprotect(uint64_t a, size_t l, int prot) { return ck_sys3(SYS_mprotect, a, l, prot); }
static inline long ck_mremap(uint64_t o, size_t ol, size_t nl, int fl, uint64_t n)
{
	return ck_sys5(SYS_mremap, o, ol, nl, fl, n);
}
static inline long ck_gettid(void) { return ck_sys0(SYS_gettid); }
static inline long ck_getpid(void) { return ck_sys0(SYS_getpid); }
static inline long ck_tgkill(int tgid, int tid, int sig) { return ck_sys3(SYS_tgkill, tgid, tid, sig); }
static inline long ck_futex(volatile int *uaddr, int op, int val, const void *ts)
{
	return ck_sys4(SYS_futex, uaddr, op, val, ts);
}
static inline __attribute__((noreturn)) void ck_exit_group(int code)
{
	for (;;)
		ck_sys1(SYS_exit_group, code);
}
static inline __attribute__((noreturn)) void ck_exit_thread(int code)
{
	for (;;)
		ck_sys1(SYS_exit, code);
}

/* Queues a signal again with its saved siginfo. The kernel lets a thread
 * forge siginfo only with a negative si_code (SI_QUEUE, SI_TIMER, ...) or
 * when it is the target itself: for the others (SI_USER, SI_KERNEL) a plain
 * kill/tgkill carries the signal, with this process as the sender. tid 0:
 * process-directed. */
static inline long ck_requeue_signal(int pid, int tid, int sig, const void *info)
{
	int code;

	long r;

	ck_memcpy_early(&code, (const char *)info + 8, sizeof(code));
	/* The whole siginfo (an F_SETSIG signal's si_fd, a SIGCHLD's status).
	 * The kernel lets only the target thread itself (for a process, its
	 * main thread) queue one the kernel made (si_code >= 0) or a tkill's;
	 * anyone else gets EPERM, and then the signal alone goes. */
	r = tid ? ck_sys4(SYS_rt_tgsigqueueinfo, pid, tid, sig, info) : ck_sys3(SYS_rt_sigqueueinfo, pid, sig, info);
	if (r != -1 /* -EPERM */ || (code < 0 && code != -6 /* SI_TKILL */))
		return r;
	return tid ? ck_sys3(SYS_tgkill, pid, tid, sig) : ck_sys2(SYS_kill, pid, sig);
}

/* Byte helpers usable without libc. */
static inline void ck_memset(void *d, int c, size_t n)
{
	unsigned char *p = d;
	while (n--)
		*p++ = (unsigned char)c;
}
static inline void ck_memcpy(void *d, const void *s, size_t n)
{
	unsigned char *p = d;
	const unsigned char *q = s;
	while (n--)
		*p++ = *q++;
}
static inline size_t ck_strlen(const char *s)
{
	size_t n = 0;
	while (s[n])
		n++;
	return n;
}
static inline int ck_strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (unsigned char)*a - (unsigned char)*b;
		if (!*a)
			return 0;
	}
	return 0;
}

/* sendmsg of len bytes with our credentials attached (SCM_CREDENTIALS),
 * so the receiver learns our pid as its own pid namespace numbers it.
 * Restarted on EINTR; returns 0 or -errno. */
static inline long ck_send_with_creds_fd(int fd, const void *buf, size_t len, int passfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh;
	struct cmsghdr *c;
	struct ucred cred;
	long r;

	ck_memset(&mh, 0, sizeof(mh));
	ck_memset(&u, 0, sizeof(u));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.buf;
	mh.msg_controllen = CMSG_SPACE(sizeof(struct ucred)) + (passfd >= 0 ? CMSG_SPACE(sizeof(int)) : 0);
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_CREDENTIALS;
	c->cmsg_len = CMSG_LEN(sizeof(cred));
	cred.pid = (pid_t)ck_getpid();
	cred.uid = (uid_t)ck_sys0(SYS_getuid);
	cred.gid = (gid_t)ck_sys0(SYS_getgid);
	ck_memcpy(CMSG_DATA(c), &cred, sizeof(cred));
	if (passfd >= 0) {
		c = CMSG_NXTHDR(&mh, c);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		ck_memcpy(CMSG_DATA(c), &passfd, sizeof(int));
	}
	do
		r = ck_sys3(SYS_sendmsg, fd, &mh, MSG_NOSIGNAL);
	while (r == -4 /* EINTR */);
	return r < 0 ? r : 0;
}

static inline long ck_send_with_creds(int fd, const void *buf, size_t len)
{
	return ck_send_with_creds_fd(fd, buf, len, -1);
}

#endif
