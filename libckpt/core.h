/* libckpt internal state, shared by its files. Nothing here is exported:
 * the library's only public symbols are ckpt.h's and the interposed libc
 * and driver functions. */
#ifndef CK_CORE_H
#define CK_CORE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "ckrun/plugin.h"
#include "ckrun/procdesc.h"
#include "ckrun/semundo.h"
#include "ckrun/proto.h"
#include "libckpt/ctx.h"

#define CK_HIDDEN __attribute__((visibility("hidden")))

/* The signal that parks job threads. Kept out of the job's reach: the
 * interposed sigprocmask/sigaction never let it be blocked or replaced. */
#define CK_SIG_DEFAULT 63

struct ck_core {
	int ctl_fd;        /* control channel to ckrun, -1 when not under ckrun (moves: fdhide.c) */
	/* Uses of ctl_fd under way: the manager's receive, and sends (any
	 * thread); a move of the channel waits for them (fdhide.c). */
	volatile int ctl_recv, ctl_send;
	/* libckpt's own short-lived descriptors (a /proc file read while job
	 * threads run), as number + 1 (0: free): listings skip them. */
	volatile int priv_fd[8];
	int sig;           /* suspend signal */
	int pid;           /* pid in the job's namespace */
	int manager_tid;
	volatile int gen;      /* release generation: parked threads wait for it to change */
	volatile int parked;   /* threads parked in this round */
	volatile int suspending;
	volatile int restarted; /* 1 in a restored process */
	int restart_count;
	int hold; /* this round must keep threads parked until ckrun says RELEASE */
	int devfd; /* this round's /dev/userfaultfd from ckrun (-1: none): not the job's */
	/* Descriptors of ours open while the job's threads run (a message's
	 * /dev/userfaultfd, a userfaultfd being pre-armed): a child the job
	 * forks meanwhile closes its copies (init.c), or they would be the
	 * child's, seen by its next round and by the job. Set right after
	 * they open, cleared before they close. */
	volatile int fork_fd[2];
	/* Held (by the manager, briefly) from a descriptor's open to its
	 * fork_fd entry and from that entry's clearing to the close; a fork
	 * waits for it (init.c's prepare handler): else a child forked in
	 * between kept the descriptor without knowing it. */
	volatile int fork_lock;
	int test_prearm_open_ms; /* test knob CKPT_TEST_PREARM_OPEN_MS: the pre-armed userfaultfd stays open this long */
	/* test knob CKPT_TEST_TAKE_DELAY_MS: a pre-armed round's request is
	 * taken this late, by a process named CKPT_TEST_TAKE_DELAY_COMM */
	int test_take_delay_ms;
	int test_signal_gap_us; /* test knob CKPT_TEST_SIGNAL_GAP_US: a pause between reading a thread's system call and signalling it */
	char test_take_delay_comm[16];
	volatile int wp_busy; /* pid of this process while ckrun reads it live: exits wait (wpsnap.c) */
	volatile int exiting; /* pid of this process once it is ending: rounds fork (wpsnap.c) */
	/* this round's threads run at nice -10 (ckrun's boost.c) and had
	 * nice boost_nice - 21 before it (0: not boosted) */
	int boost_nice;
	/* the main thread took the process-directed pending signals as it
	 * parked this round (suspend.c): the manager must not take them again */
	volatile int shd_taken;
	char fail[512]; /* why the current round failed */
};

/* fdhide.c: a /proc file opened (system calls only) and marked as
 * libckpt's own, so that a listing of the job's descriptors skips it;
 * closed and unmarked */
long ck__open_priv(const char *path, int flags) CK_HIDDEN;
void ck__close_priv(int fd) CK_HIDDEN;
void ck__priv_forget(void) CK_HIDDEN; /* a fork child: the parent's marks are not ours */
/* fd is about to be taken by a descriptor of the job's (a restore's dup3
 * onto it): where the channel has that number, the channel moves first
 * and the old number stays open for the dup3 to replace. threads: other
 * threads of libckpt may use the channel (the move waits for them). 0 or
 * -errno. */
long ck__ctl_aside(int fd, int threads) CK_HIDDEN;

/* init.c: ck__core.fork_lock */
void ck__fork_lock(void) CK_HIDDEN;
void ck__fork_unlock(void) CK_HIDDEN;

/* state.c: the globals, and the first reason the current round fails */
extern struct ck_core ck__core CK_HIDDEN;
void ck__failf(const char *fmt, ...) CK_HIDDEN __attribute__((format(printf, 1, 2)));
extern struct ck_procdesc ck__pd CK_HIDDEN;
size_t ck__msg_put(char *m, size_t cap, size_t at, const char *s) CK_HIDDEN;
size_t ck__msg_putnum(char *m, size_t cap, size_t at, int64_t v) CK_HIDDEN;
/* System V attachments, from the round's scan of our maps: the snapshot
 * does not inherit them (ckrun reads the segments itself), so that the
 * job's IPC_STAT never counts a snapshot among its attachments. */
#define CK_MAX_SYSV_MAPS 64
struct ck_sysv_map {
	uint64_t start, end;
};
extern struct ck_sysv_map ck__sysv_maps[CK_MAX_SYSV_MAPS] CK_HIDDEN;

/* suspend.c */
/* Parks every job thread within timeout_ms, else fails naming the thread
 * that did not stop and the round's bound_ms (ck__core.fail), and releases
 * the others. */
int ck__suspend_all(uint32_t timeout_ms, uint32_t bound_ms) CK_HIDDEN;
void ck__release_all(void) CK_HIDDEN;
int ck__install_handler(void) CK_HIDDEN;
void ck__thread_restored(struct ck_pd_thread *t) CK_HIDDEN;
void ck__save_kernel_thread_state(struct ck_pd_thread *t) CK_HIDDEN;
void ck__capture_pending(const char *path, const char *key, int tid) CK_HIDDEN;

/* creds.c: the job's credentials. _save per thread as it parks,
 * _collect the process's (groups, bounding and ambient sets); at a restart
 * _prepare once (the restart code), _restore on every thread before it
 * runs job code, and the manager's _wait: 0 or -errno (*what names the
 * credential that could not be given back). */
void ck__creds_save(struct ck_pd_thread *t) CK_HIDDEN;
int ck__creds_collect(void) CK_HIDDEN;
void ck__creds_prepare(const struct ck_procdesc *pd) CK_HIDDEN;
void ck__creds_restore(const struct ck_pd_thread *t) CK_HIDDEN;
void ck__creds_thread_done(void) CK_HIDDEN; /* end of ck__thread_restored: counted by _wait */
int ck__creds_wait(const char **what) CK_HIDDEN;

/* pstate.c: personality (per thread: _thread_save as it parks,
 * _thread_restored after its credentials), oom_score_adj, THP disable and
 * memory locks (_collect with the threads parked; _restore by the manager
 * once every thread has its credentials: 0 or -errno, *what names it). */
void ck__pstate_thread_save(struct ck_pd_thread *t) CK_HIDDEN;
/* sched.c: a thread's affinity, policy, nice and I/O priority (by its
 * index in ck__pd.threads), from pstate.c's hooks */
void ck__sched_thread_save(ptrdiff_t i) CK_HIDDEN;
void ck__sched_thread_restored(ptrdiff_t i) CK_HIDDEN;
int ck__sched_restored(uint32_t nthreads, const char **what) CK_HIDDEN;
void ck__pstate_thread_restored(const struct ck_pd_thread *t) CK_HIDDEN;
int ck__pstate_collect(void) CK_HIDDEN;
/* stopkids.c: at a round (asked: CK_CKPT_STOPKIDS), which children are
 * stopped and whether this process waited for their stop; at a restore,
 * once they are stopped again, its view of them as it was. */
int ck__stopkids_collect(int asked) CK_HIDDEN;
void ck__stopkids_held(const char *text, uint32_t len) CK_HIDDEN;
/* pstate.c: the saved oom_score_adj, where it differs (restart.c, before
 * the credentials; pstate_restore again). */
int ck__pstate_oom_restore(void) CK_HIDDEN;
void ck__stopkids_restored(void) CK_HIDDEN;
int ck__pstate_restore(const char **what) CK_HIDDEN;
/* the restart code, before the credentials: the saved audit login uid
 * given back; 0, or -errno with *saved and *now (the restorer's) */
int ck__pstate_loginuid_restore(uint32_t *saved, uint32_t *now) CK_HIDDEN;

/* collect.c: process-wide state into ck__pd (threads parked); a whole
 * small file into buf, NUL-terminated: bytes read or -errno */
long ck__read_file(const char *path, char *buf, size_t len) CK_HIDDEN;
uint64_t ck__stack_start(void) CK_HIDDEN; /* /proc/self/stat field 28, 0 if unknown */
/* collect.c: this round's /proc/self/maps shows a mapping of dev:ino */
int ck__maps_has_file(uint64_t dev, uint64_t ino) CK_HIDDEN;
int ck__collect_process(void) CK_HIDDEN;
/* fds.c */
int ck__collect_fds(void) CK_HIDDEN;
void ck__fds_after_round(void) CK_HIDDEN;
/* fdstate.c: flags, owners, signals and locks of descriptions; /proc files.
 * The restart half returns -errno with *why and *path naming the failure. */
void ck__fdstate_reset(void) CK_HIDDEN;
int ck__fdstate_collect(uint32_t idx) CK_HIDDEN;
int ck__fdstate_is_proc(const char *path) CK_HIDDEN;
long ck__fdstate_reopen(const struct ck_procdesc *pd, const char **why, const char **path) CK_HIDDEN;
long ck__fdstate_restore(const struct ck_procdesc *pd, const char **why, const char **path) CK_HIDDEN;
/* the manager, once ckrun says go (every thread of the job made again) */
long ck__fdstate_late(const struct ck_procdesc *pd, const char **why, const char **path) CK_HIDDEN;
/* fds.c: the value after "key" in fdinfo text, in the given base */
uint64_t ck__field(const char *text, const char *key, int base) CK_HIDDEN;
/* epoll.c: an instance's registrations from its fdinfo text (the round),
 * added again before the threads (restart: -errno with *why) */
int ck__epoll_collect(int epfd, const char *info) CK_HIDDEN;
long ck__epoll_restore(const struct ck_procdesc *pd, const char **why) CK_HIDDEN;
/* inotify.c: the watches of an instance (the round: its fdinfo text;
 * restart: before the threads, -errno with *why and *path) */
void ck__inotify_reset(void) CK_HIDDEN;
/* mqnotify.c: mq_notify registrations noted (the round: a queue's
 * descriptor; restart: registered again) */
void ck__mqnotify_atfork_child(void) CK_HIDDEN;
int ck__mqnotify_parkable(void) CK_HIDDEN;
void ck__mqnotify_collect(struct ck_pd_fd *f) CK_HIDDEN;
long ck__mqnotify_restore(const struct ck_procdesc *pd, const char **why, const char **path) CK_HIDDEN;
void ck__inotify_atfork_child(void) CK_HIDDEN;
void ck__inotify_closed(unsigned first, unsigned last) CK_HIDDEN; /* close, dup2/3 over, close_range */
int ck__inotify_collect(struct ck_pd_fd *f, const char *info) CK_HIDDEN;
long ck__inotify_restore(const struct ck_procdesc *pd, const char **why, const char **path) CK_HIDDEN;
/* wpsnap.c: returns the armed userfaultfd, or -errno (then fork) */
int ck__wp_arm(int devfd) CK_HIDDEN;
int ck__wp_refusal(void) CK_HIDDEN;            /* -ENOTSUP: pinned pages, device mappings */
int ck__wp_scan(uint64_t sp) CK_HIDDEN;        /* eligible ranges into ck__wp_ranges */
long ck__wp_new(int devfd) CK_HIDDEN;          /* a userfaultfd, API done */
int ck__wp_register(int uffd, uint64_t start, uint64_t end) CK_HIDDEN;
int ck__wp_protect(int uffd, uint64_t start, uint64_t end) CK_HIDDEN;
/* wpprearm.c: the pre-armed cut. PREARM: protect while the job runs, ckrun
 * lifting what it writes; at the cut (parked) register what is new, have
 * ckrun stop lifting, and protect again what was written meanwhile.
 * ck__wp_rearm returns uffd, or -errno (then fork), or -ECANCELED when
 * ckrun ended the round meanwhile (*done: its verdict). */
void ck__wp_prearm(uint64_t seq) CK_HIDDEN;
int ck__wp_rearm(int uffd, int *done) CK_HIDDEN;
int ck__wp_begin(void) CK_HIDDEN; /* before arming: -ESRCH when the process is ending */
void ck__wp_idle(void) CK_HIDDEN; /* the round's verdict came: exits may go on */
extern struct ck_wp_range ck__wp_ranges[CK_WP_MAX_RANGES] CK_HIDDEN;
extern uint32_t ck__wp_nranges CK_HIDDEN;
/* init.c */
int ck__reattach(void) CK_HIDDEN;
void ck__channel_restored(void) CK_HIDDEN;
/* ctlchan.c: the control channel (recv_fd: *fd the descriptor that came
 * with the message, or -1; NULL: closed) */
int ck__send(struct ck_msg *m) CK_HIDDEN;
int ck__recv(struct ck_msg *m) CK_HIDDEN;
int ck__recv_fd(struct ck_msg *m, int *fd) CK_HIDDEN;
/* one entry of getdents64's answer */
struct ck__dirent64 {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* CLOCK_MONOTONIC in µs (checkpoint.c) */
uint64_t ck__now_us(void) CK_HIDDEN;

/* real: libc's own fn, looked up once (the file includes dlfcn.h) */
#define CK_REAL(fn)                                                                                           \
	static __typeof__(&fn) real;                                                                          \
	if (!real)                                                                                            \
		real = (__typeof__(&fn))dlsym(RTLD_NEXT, #fn)

/* cputime.c: CPU time and rusage go on across a restore (_thread_park
 * in the parking handler, _cut by the manager at the cut, _restored and
 * _thread_restored at a restore; _kids takes CK_MSG_KIDS_CPU) */
void ck__cputime_init(void) CK_HIDDEN;
void ck__cpu_thread_park(void) CK_HIDDEN;
void ck__cpu_thread_restored(void) CK_HIDDEN;
void ck__cpu_cut(void) CK_HIDDEN;
void ck__cpu_restored(struct ck_cpu_use *as_child) CK_HIDDEN;
void ck__cpu_kids(const void *text, uint32_t len) CK_HIDDEN;
const char *ck__cputime_env(void) CK_HIDDEN;

/* waits.c: relative waits keep their deadline across a park (_parked
 * at the park, _left as the handler returns to the call issued again,
 * _unseen names a noted wait's call /proc did not see) */
void ck__waits_init(void) CK_HIDDEN;
void ck__wait_parked(void) CK_HIDDEN;
void ck__wait_left(void *ucv, long nr) CK_HIDDEN;
long ck__wait_unseen(const void *ucv) CK_HIDDEN;
void ck__wait_restored(void) CK_HIDDEN;

/* procread.c: /proc read while job threads run, by a thread of ours with
 * a descriptor table of its own (no number of the job's taken) */
void ck__reader_start(void) CK_HIDDEN;
int ck__reader_tid(void) CK_HIDDEN;
long ck__proc_read(const char *path, char *buf, size_t len, int dir) CK_HIDDEN;
/* the next message, left in the channel with its descriptor */
int ck__peek(struct ck_msg *m) CK_HIDDEN;
/* a message of len bytes with our credentials and passfd (-1: none) */
long ck__send_fd(const void *m, size_t len, int passfd) CK_HIDDEN;
/* checkpoint.c */
/* park_ms: what is left of the round's bound (bound_ms, --round-timeout)
 * for parking (0: CK_PARK_TIMEOUT_MS). The request is still in the
 * channel (ck__peek): the round takes it, and its descriptor, parked. */
void ck__round(uint32_t flags, uint64_t seq, uint32_t park_ms, uint32_t bound_ms, uint32_t seccomp_base) CK_HIDDEN;

/* seccomp.c: the job's filters. _manager_started when the manager thread
 * is created, _atfork_child first in a forked child; _check with the
 * threads parked, given ckrun's own filter count when it asked for the
 * count check (counted != 0): 0, or -ENOTSUP with ck__core.fail set; at a
 * restart the manager installs every filter on every thread (_restore,
 * once all have their credentials, before it releases them: 0 or -errno). */
void ck__seccomp_manager_started(void) CK_HIDDEN;
void ck__seccomp_atfork_child(void) CK_HIDDEN;
int ck__seccomp_check(int counted, uint32_t base) CK_HIDDEN;
int ck__seccomp_restore(void) CK_HIDDEN;
uint32_t ck__seccomp_count(void) CK_HIDDEN; /* filters recorded so far */
int ck__seccomp_allows(int nr) CK_HIDDEN; /* every recorded filter lets nr through (zero arguments) */
long ck__syscall_fail(long r) CK_HIDDEN;

/* membarrier.c: the job's membarrier registrations. _note from syscall(3)
 * (syscall.S), _collect at the round (threads parked), _restore by the
 * manager at restart: 0, or -errno with the command that failed. */
void ck__membarrier_note(long cmd, long r) CK_HIDDEN;
void ck__membarrier_collect(void) CK_HIDDEN;
int ck__membarrier_restore(unsigned *failed) CK_HIDDEN;
/* semundo.c: the process's System V semaphore adjustments */
extern struct ck_semundo ck__semundo CK_HIDDEN;
void ck__semundo_parked(void *ucv) CK_HIDDEN;
int ck__semundo_restore(int32_t *failed) CK_HIDDEN;
const char *ck__semundo_env(void) CK_HIDDEN;
void ck__semundo_atfork_child(void) CK_HIDDEN;
long ck__syscall_record(long nr, long a0, long a1, long a2) CK_HIDDEN;
/* aio.c: Linux AIO contexts */
long ck__syscall_aio(long nr, long a0, long a1, long a2, long a3, long a4, long a5) CK_HIDDEN;
void ck__aio_round_begin(void) CK_HIDDEN;
int ck__aio_ring_check(uint64_t start, uint64_t end) CK_HIDDEN;
extern uint32_t ck__aio_rings CK_HIDDEN; /* of ck__pd.skips, the AIO rings (the rest: device memory) */
int ck__aio_restore(uint64_t *failed) CK_HIDDEN;
void *ck__manager(void *arg) CK_HIDDEN;
/* env.c: "NAME=VALUE\0" entries (len bytes) into environ, without malloc
 * (a restore's --env; threads parked): 0 or -errno */
int ck__env_apply(const char *kv, size_t len) CK_HIDDEN;
/* plugin.c */
int ck__plugins_event(enum ck_event ev) CK_HIDDEN;
int ck__plugins_skip(uint64_t start, uint64_t end, const char *path, const char **why) CK_HIDDEN;
/* restart.c */
void ck__restart_entry(void) CK_HIDDEN;
extern char ck__restart_stack[] CK_HIDDEN;
#define CK_RESTART_STACK_SIZE (256u << 10)

/* api.c */
void ck__round_finished(int result) CK_HIDDEN;
void ck__run_restart_callbacks(void) CK_HIDDEN;

/* real libc functions behind the interposed ones */
int ck__real_sigprocmask(int how, const sigset_t *set, sigset_t *old) CK_HIDDEN;

#endif
