/* ckrun internals: the coordinator/agent of a single-host job. */
#ifndef CKRUN_H
#define CKRUN_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher/manifest.h"
#include "launcher/procdesc.h"
#include "launcher/store.h"
#include "libckpt/procdesc.h"

struct ckrun {
	/* options */
	const char *store_uri;
	char *job;
	uint64_t interval_ms;
	int resume;
	unsigned keep;
	int nofork;
	int verbose;
	int writer_nice; /* nice value of the writer threads (default 10) */
	struct ck_store_opts sopts;
	char **argv;
	/* paths of our helpers */
	char libckpt[4096];
	char restorer[4096];
	/* runtime */
	struct ck_store *store;
	int agent_fd;   /* our end of the job's control channel */
	pid_t init_pid; /* the job namespace's init, in our pid namespace */
	pid_t job_pid;  /* the job's main process, in our pid namespace */
	int status_fd;  /* init reports the job's wait status here */
	int job_ready;  /* libckpt said hello (or restarted) */
	uint64_t last_seq;
	struct ck_manifest *prev; /* newest committed, for dedup */
};

/* ns.c: the job's user+pid+mount namespaces and their init */
enum ck_spawn_mode { CK_SPAWN_LAUNCH, CK_SPAWN_RESTORE };
int ck_spawn(struct ckrun *c, enum ck_spawn_mode mode, pid_t want_pid);
void ck_kill_job(struct ckrun *c);
/* Waits for the job's end; returns ckrun's exit status for it. */
int ck_job_exit_status(int wstatus);

/* memio.c: the job's memory, seen from ckrun */
int ck_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len);
int ck_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len);
struct ck_map {
	uint64_t start, end, off, dev, ino;
	uint32_t prot;
	int shared;
	char *path;
};
int ck_maps_read(pid_t pid, struct ck_map **out, size_t *n);
void ck_maps_free(struct ck_map *m, size_t n);

/* chan.c: messages on the control channel */
struct ck_msg;
int ck_chan_send(int fd, struct ck_msg *m, const int *fds, int nfds);
/* Receives one message; *pid = sender's pid in our namespace (0 if none).
 * timeout_ms < 0 waits for ever. -ETIMEDOUT, -EPIPE (peer gone). */
int ck_chan_recv(int fd, struct ck_msg *m, pid_t *pid, int timeout_ms);

/* round.c */
#define CK_ROUND_STOP 0x1
int ck_round(struct ckrun *c, unsigned flags, uint64_t *seq);

/* restore.c */
int ck_restore(struct ckrun *c, struct ck_manifest *m);


/* signals shared with the main loop */
extern volatile sig_atomic_t ck_sig_term, ck_sig_usr2, ck_sig_chld;
extern int ck_wake_fd[2];

uint64_t ck_now_ns(void);
#endif
