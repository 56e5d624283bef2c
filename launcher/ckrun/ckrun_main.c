/* ckrun: run a job so that it can be checkpointed, stopped and resumed.
 *
 *   ckrun [OPTIONS] -- PROGRAM [ARGS...]
 *
 * Single-host coordinator and agent: starts the job in its own namespaces
 * with libckpt preloaded, takes checkpoints on request (interval, SIGUSR2,
 * SIGTERM/SIGINT to stop, `ckpt checkpoint`), and with --resume restarts
 * the job from its newest committed checkpoint. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/mpijob.h"
#include "launcher/ckrun/ctlsrv.h"
#include "launcher/image/restore_log.h"
#include "launcher/store/joblock.h"
#include "ckrun/proto.h"

volatile sig_atomic_t ck_sig_term, ck_sig_usr2, ck_sig_chld;
int ck_wake_fd[2] = {-1, -1};

static void ck__on_signal(int sig)
{
	int e = errno;

	if (sig == SIGTERM || sig == SIGINT) {
		if (!ck_sig_term) { /* the grace runs from the first */
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ck_sig_term_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		}
		ck_sig_term++;
	}
	else if (sig == SIGUSR2)
		ck_sig_usr2 = 1;
	else if (sig == SIGCHLD)
		ck_sig_chld = 1;
	(void)!write(ck_wake_fd[1], "x", 1);
	errno = e;
}

static void ck__usage(FILE *f)
{
	fprintf(f, "usage: ckrun [OPTIONS] -- PROGRAM [ARGS...]\n"
		   "  --store URI        where checkpoints go (file:///dir, a path, s3://bucket/prefix);\n"
		   "                     default $CKPT_STORE, else ./ckpt-store\n"
		   "  --job NAME         the job's name in the store (default: program name)\n"
		   "  --interval D       checkpoint every D (500ms, 30s, 10m, 2h), counted from\n"
		   "                     the end of the previous checkpoint\n"
		   "  --resume           restart from the newest checkpoint of JOB if there is one\n"
		   "  --map-path OLD=NEW with --resume: paths under OLD are under NEW here (files, working\n"
		   "                     directories, mappings, FIFOs, UNIX sockets; repeatable, the\n"
		   "                     longest OLD wins, whole components only)\n"
		   "  --env NAME=VALUE   with --resume: the job's environment has NAME=VALUE, restored or\n"
		   "                     started afresh (NAME= removes NAME; repeatable)\n"
		   "  --keep N           keep the newest N checkpoints (default 3)\n"
		   "  --grace D          a stop (SIGTERM/SIGINT) commits within D of the signal or keeps\n"
		   "                     the previous checkpoint (30s, 500ms; default $CKPT_GRACE, else none)\n"
		   "  --round-timeout D  a round whose processes do not all stop within D fails naming\n"
		   "                     the thread that did not, and the job runs on (default 10s)\n"
		   "  --no-fork          checkpoint without a snapshot: the job waits while it is written\n"
		   "  --snapshot MODE    wp (default): write-protect the job's memory and read it live,\n"
		   "                     forking where that cannot be armed or the job changes its\n"
		   "                     memory layout meanwhile; fork: a copy-on-write child always\n"
		   "  --snapshot-memory M  memory for the parts the job rewrites before ckrun has read\n"
		   "                     them (write-protect snapshot; 512M, 4G; default 128M); when it\n"
		   "                     is full such writes wait for ckrun\n"
		   "  --huge-pages       the job's malloc asks for transparent huge pages (glibc): faster\n"
		   "                     snapshots of large dense memory; sparse heaps become resident\n"
		   "  --s3-endpoint URL  S3 endpoint (default $CKPT_S3_ENDPOINT or $AWS_ENDPOINT_URL)\n"
		   "  --s3-ca FILE       CA bundle for the S3 endpoint\n"
		   "  --s3-profile P     the S3 site of section P of $AWS_SHARED_CREDENTIALS_FILE (else\n"
		   "                     ~/.aws/credentials): its keys, endpoint_url, ca_bundle, region\n"
		   "  --metrics [HOST:]PORT  serve Prometheus metrics on http://HOST:PORT/metrics\n"
		   "                     (a bare PORT listens on 127.0.0.1)\n"
		   "  --metrics-file F   write the same metrics to F after every round (node_exporter's\n"
		   "                     textfile collector: F ends in .prom)\n"
		   "  --events F         append one JSON object per line to F for each checkpoint,\n"
		   "                     refusal, fallback, restore and the end\n"
		   "  --sign-key FILE    sign each checkpoint (HMAC-SHA-256, key kept outside the store,\n"
		   "                     mode 0600); with --resume, refuse one not signed with it\n"
		   "  --np N             an MPI program of N ranks (Open MPI ABI): ckrun starts N agents\n"
		   "                     with mpirun, each owning one rank's MPI, and checkpoints the\n"
		   "                     ranks at a consistent cut (same --np on --resume)\n"
		   "  -v, --verbose      report each checkpoint on stderr (twice: with its phases)\n"
		   "signals: SIGUSR2 = checkpoint now; SIGTERM/SIGINT = checkpoint and stop (exit 75)\n");
}

/* "4096", "512K", "256M", "4G". */
static int ck__parse_size(const char *s, uint64_t *bytes)
{
	char *end;
	double v = strtod(s, &end);
	uint64_t mul = 1;

	if (end == s || v < 0)
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10, end++;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20, end++;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30, end++;
	if (*end || v * (double)mul > 1e15)
		return -EINVAL;
	*bytes = (uint64_t)(v * (double)mul);
	return 0;
}

/* "500ms", "30s", "10m", "2h"; plain numbers are seconds. */
static int ck__parse_duration(const char *s, uint64_t *ms)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v <= 0)
		return -EINVAL;
	if (!strcmp(end, "ms"))
		*ms = (uint64_t)v;
	else if (!*end || !strcmp(end, "s"))
		*ms = (uint64_t)(v * 1000);
	else if (!strcmp(end, "m"))
		*ms = (uint64_t)(v * 60000);
	else if (!strcmp(end, "h"))
		*ms = (uint64_t)(v * 3600000);
	else
		return -EINVAL;
	return *ms ? 0 : -EINVAL;
}

static int ck__find_helpers(struct ckrun *c)
{
	char self[2048], *slash;
	const char *dir = getenv("CKPT_LIBDIR");
	ssize_t n;

	if (!dir) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0)
			return -errno;
		self[n] = 0;
		slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		dir = self;
	}
	/* build tree: next to ckrun; installed: PREFIX/lib/ckrun */
	snprintf(c->libckpt, sizeof(c->libckpt), "%s/libckpt.so", dir);
	snprintf(c->restorer, sizeof(c->restorer), "%s/ckpt-restore", dir);
	if (access(c->libckpt, R_OK) != 0) {
		snprintf(c->libckpt, sizeof(c->libckpt), "%s/../lib/ckrun/libckpt.so", dir);
		snprintf(c->restorer, sizeof(c->restorer), "%s/../lib/ckrun/ckpt-restore", dir);
	}
	if (access(c->libckpt, R_OK) != 0 || access(c->restorer, X_OK) != 0) {
		ck_err_set("cannot find libckpt.so and ckpt-restore next to ckrun or in ../lib/ckrun (set CKPT_LIBDIR)");
		return -ENOENT;
	}
	return 0;
}

static int ck__parse(struct ckrun *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{"store", required_argument, 0, 's'},   {"job", required_argument, 0, 'j'},
		{"interval", required_argument, 0, 'i'}, {"resume", no_argument, 0, 'r'},
		{"keep", required_argument, 0, 'k'},    {"no-fork", no_argument, 0, 'F'},
		{"snapshot", required_argument, 0, 'S'}, {"snapshot-memory", required_argument, 0, 'M'},
		{"huge-pages", no_argument, 0, 'H'},    {"grace", required_argument, 0, 'g'},
		{"s3-endpoint", required_argument, 0, 'E'}, {"s3-ca", required_argument, 0, 'C'},
		{"s3-profile", required_argument, 0, 1007},
		{"verbose", no_argument, 0, 'v'},       {"help", no_argument, 0, 'h'},
		{"metrics", required_argument, 0, 1001}, {"metrics-file", required_argument, 0, 1002},
		{"events", required_argument, 0, 1003}, {"sign-key", required_argument, 0, 1004},
		{"map-path", required_argument, 0, 1005}, {"env", required_argument, 0, 1006},
		{"round-timeout", required_argument, 0, 1008}, {"np", required_argument, 0, 1009},
		{0, 0, 0, 0}};
	int o;

	c->keep = 3;
	c->round_timeout_ms = CK_PARK_TIMEOUT_MS;
	c->wp_aside_max = 128ull << 20;
	c->snapshot_fork = 0; /* write protection, forking where it cannot be armed */
	/* Below the job, so that a round's hashing and compressing take
	 * mostly the CPU the job leaves idle. Not lower: at 19 a single-
	 * threaded 4 GiB job lost 0.3 s less per checkpoint (2.73 s against
	 * 3.03 s, four short pairs in turn), but a job keeping every core busy
	 * starved the round (sigpending's 14 MiB checkpoint: 0.56-1.57 s
	 * against 0.18-0.42 s at 10), and in a full test run it ended before
	 * any round committed. */
	c->writer_nice = 10;
	/* ... and rising while the round lasts, to ckrun's own after 0.2 s
	 * (pace.c): a job keeping every core busy leaves a writer at 10
	 * behind, and its writes wait for it (bench-busy, 1 GiB, busy: 4.68
	 * s at 10, 1.34 s at 0, 2.73 s rising every 0.5 s). */
	c->writer_pace_ms = 100;
	if (getenv("CKPT_WRITER_NICE")) { /* tuning: fixed */
		c->writer_nice = atoi(getenv("CKPT_WRITER_NICE"));
		c->writer_pace_ms = 0;
	}
	if (getenv("CKPT_WRITER_PACE_MS"))
		c->writer_pace_ms = (unsigned)atoi(getenv("CKPT_WRITER_PACE_MS"));
	/* Slurm tells a job neither its KillWait nor its GraceTime (no
	 * SLURM_* variable holds them): the batch script passes --grace or
	 * CKPT_GRACE (scripts/slurm/). */
	if (getenv("CKPT_GRACE") && *getenv("CKPT_GRACE")) {
		uint64_t ms;
		if (ck__parse_duration(getenv("CKPT_GRACE"), &ms) < 0) {
			fprintf(stderr, "ckrun: bad CKPT_GRACE '%s' (use 30s, 500ms, 2m)\n", getenv("CKPT_GRACE"));
			return -EINVAL;
		}
		ck_grace_set(ms);
	}
	c->store_uri = getenv("CKPT_STORE");
	if (!c->store_uri || !*c->store_uri)
		c->store_uri = "./ckpt-store";
	while ((o = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (o) {
		case 's': c->store_uri = optarg; break;
		case 'j': c->job = optarg; break;
		case 'i':
			if (ck__parse_duration(optarg, &c->interval_ms) < 0) {
				fprintf(stderr, "ckrun: bad --interval '%s' (use 500ms, 30s, 10m, 2h)\n", optarg);
				return -EINVAL;
			}
			break;
		case 'r': c->resume = 1; break;
		case 'k': {
			char *end;
			long k = strtol(optarg, &end, 10);
			if (*end || k < 1 || k > 1000000) {
				fprintf(stderr, "ckrun: bad --keep '%s' (a number >= 1)\n", optarg);
				return -EINVAL;
			}
			c->keep = (unsigned)k;
			break;
		}
		case 'F': c->nofork = 1; break;
		case 'S':
			if (strcmp(optarg, "wp") && strcmp(optarg, "fork")) {
				fprintf(stderr, "ckrun: bad --snapshot '%s' (wp or fork)\n", optarg);
				return -EINVAL;
			}
			c->snapshot_fork = !strcmp(optarg, "fork");
			break;
		case 'M':
			if (ck__parse_size(optarg, &c->wp_aside_max) < 0) {
				fprintf(stderr, "ckrun: bad --snapshot-memory '%s' (bytes, or with K, M, G)\n", optarg);
				return -EINVAL;
			}
			break;
		case 'H': c->huge_pages = 1; break;
		case 'g': {
			uint64_t ms;
			if (ck__parse_duration(optarg, &ms) < 0) {
				fprintf(stderr, "ckrun: bad --grace '%s' (use 30s, 500ms, 2m)\n", optarg);
				return -EINVAL;
			}
			ck_grace_set(ms);
			break;
		}
		case 'E': c->sopts.s3_endpoint = optarg; break;
		case 'C': c->sopts.s3_ca = optarg; break;
		case 1007: c->sopts.s3_profile = optarg; break;
		case 1008:
			if (ck__parse_duration(optarg, &c->round_timeout_ms) < 0 || c->round_timeout_ms < 100 ||
			    c->round_timeout_ms > 3600000) {
				fprintf(stderr, "ckrun: bad --round-timeout '%s' (100ms to 1h: 10s, 500ms, 2m)\n", optarg);
				return -EINVAL;
			}
			break;
		case 1009:
			if (ck_mpi_parse_np(c, optarg) < 0) {
				fprintf(stderr, "ckrun: %s\n", ck_err_msg());
				return -EINVAL;
			}
			break;
		case 'v': c->verbose++; break;
		case 1001: c->tel_opts.metrics_addr = optarg; break;
		case 1002: c->tel_opts.metrics_file = optarg; break;
		case 1003: c->tel_opts.events_file = optarg; break;
		case 1004:
			if (ck_manifest_sign_key_load(optarg) < 0) {
				fprintf(stderr, "ckrun: %s\n", ck_err_msg());
				return -EINVAL;
			}
			break;
		case 1005:
		case 1006:
			if ((o == 1005 ? ck_pathmap_add(&c->pathmap, optarg) : ck_jobenv_add(&c->jobenv, optarg)) < 0) {
				fprintf(stderr, "ckrun: %s\n", ck_err_msg());
				return -EINVAL;
			}
			break;
		case 'h': ck__usage(stdout); exit(0);
		default: ck__usage(stderr); return -EINVAL;
		}
	}
	if ((c->pathmap.n || c->jobenv.n) && !c->resume) {
		/* they describe this site to a job that comes back: without
		 * --resume that is a mistake, not a fresh start's settings */
		fprintf(stderr, "ckrun: %s is for a resume: add --resume\n", c->pathmap.n ? "--map-path" : "--env");
		return -EINVAL;
	}
	if (optind >= argc) {
		fprintf(stderr, "ckrun: no program given\n");
		ck__usage(stderr);
		return -EINVAL;
	}
	c->argv = argv + optind;
	{
		/* The store and the control socket hold the name encoded
		 * (launcher/image/jobname.c): a program "a+b" is job "a%2Bb". */
		const char *b = strrchr(c->argv[0], '/'), *name = c->job ? c->job : b ? b + 1 : c->argv[0];
		char enc[CK_JOB_NAME_MAX + 1];

		if (ck_job_name_encode(name, enc, sizeof(enc)) < 0) {
			fprintf(stderr, "ckrun: %s%s\n", ck_err_msg(), c->job ? "" : "; name the job with --job");
			return -EINVAL;
		}
		c->job = strdup(enc);
		if (!c->job)
			return -ENOMEM;
	}
	if (ck_mpi_refuse_nesting(c) < 0) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		return -EINVAL;
	}
	return 0;
}

/* Before main: a SIGTERM, SIGINT or SIGUSR2 that comes while ckrun starts
 * (a scheduler's stop, a checkpoint request sent at once) is remembered
 * and acted on once the job runs, rather than ending ckrun by default. */
__attribute__((constructor)) static void ck__install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ck__on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The job ended by itself: collect its status from the namespace's init. */
static int ck__job_status(struct ckrun *c, int *status)
{
	int ws;
	ssize_t n = read(c->status_fd, &ws, sizeof(ws));

	if (n != sizeof(ws))
		return -1;
	*status = ck_job_exit_status(ws);
	waitpid(c->init_pid, NULL, 0);
	c->init_pid = 0;
	return 0;
}

/* A process that ends during a round (a DataLoader's worker at the end of
 * an epoch, a pool's child) fails that round, but not the request: it is
 * asked again once the loop has seen the end (the process leaves the job's
 * list), a few times in a row at most. */
#define CK_ROUND_AGAIN_MAX 3

static int ck__checkpoint(struct ckrun *c, unsigned flags, uint64_t *seq)
{
	static int again;
	int r = ck_round(c, flags, seq);

	if (r == -ESRCH && !(flags & CK_ROUND_STOP) && c->nprocs > 0 && again < CK_ROUND_AGAIN_MAX) {
		again++;
		fprintf(stderr, "ckrun: checkpoint %" PRIu64 " of job %s: %s; taking it again\n", c->last_seq + 1,
			c->job, ck_err_msg());
		ck_sig_usr2 = 1;
		(void)!write(ck_wake_fd[1], "x", 1);
		return r;
	}
	again = 0;
	if (r < 0)
		fprintf(stderr, "ckrun: checkpoint %" PRIu64 " of job %s failed: %s\n", c->last_seq + 1, c->job,
			ck_err_msg());
	return r;
}

/* Whether the job's main process has ended (init reports it), waiting up
 * to ms for the report; its status in *status. */
static int ck__job_ended(struct ckrun *c, int ms, int *status)
{
	struct pollfd p = {c->status_fd, POLLIN, 0};

	return c->status_fd >= 0 && poll(&p, 1, ms) == 1 && ck__job_status(c, status) == 0;
}

/* SIGTERM or SIGINT: a last checkpoint, then the job is stopped. It never
 * runs again after that checkpoint's cut (round.c). Returns ckrun's exit
 * status: 75 when the checkpoint committed; the job's own status when the
 * job ended by itself meanwhile (it is done: it must not be run again);
 * 76 when it was stopped without a new checkpoint. */
static int ck__stop(struct ckrun *c)
{
	uint64_t seq;
	int st;

	int r;

	/* No process attached: not started yet, or every one has just ended
	 * (their channels close before init reports the main one's status). */
	if (!c->job_ready && c->job_started && ck__job_ended(c, 2000, &st)) {
		fprintf(stderr, "ckrun: job %s ended by itself as it was stopped (status %d)\n", c->job, st);
		return st;
	}
	if (!c->job_ready) {
		fprintf(stderr, "ckrun: job %s stopped before it could be checkpointed (it had not started); "
				"nothing new saved\n", c->job);
		ck_kill_job(c);
		return CK_EXIT_UNSAVED;
	}
	r = ck__checkpoint(c, CK_ROUND_STOP, &seq);
	if (r == 0) {
		if (ck_grace_ms())
			fprintf(stderr,
				"ckrun: job %s checkpointed (%" PRIu64 ") within its grace (%.3f s of %.3f s) and stopped; "
				"resume with --resume\n",
				c->job, seq, (double)ck_grace_used_ms() / 1e3, (double)ck_grace_ms() / 1e3);
		else
			fprintf(stderr, "ckrun: job %s checkpointed (%" PRIu64 ") and stopped; resume with --resume\n",
				c->job, seq);
		ck_kill_job(c);
		return CK_EXIT_TEMPFAIL;
	}
	/* A process that ended during the round may be the main one: then the
	 * job is over (init reports it within moments). */
	if (ck__job_ended(c, r == -ESRCH ? 2000 : 0, &st)) {
		fprintf(stderr, "ckrun: job %s ended by itself during the stop (status %d)\n", c->job, st);
		return st;
	}
	if (c->last_seq)
		fprintf(stderr, "ckrun: job %s stopped without a new checkpoint; a resume goes back to checkpoint %" PRIu64
				"\n", c->job, c->last_seq);
	else
		fprintf(stderr, "ckrun: job %s stopped without a checkpoint; a resume starts it afresh\n", c->job);
	ck_kill_job(c);
	return CK_EXIT_UNSAVED;
}

/* --interval counts from the end of the previous round, whatever asked
 * for it: a round that takes longer than the interval (a big job, a
 * loaded machine) must not be followed at once by the next, or the job
 * only ever runs between rounds' freezes and barely advances (an MPI job
 * under a 300 ms interval ran 30 times slower than bare on 2 cores). */
static void ck__interval_rearm(int tfd, uint64_t ms)
{
	struct itimerspec its = {{(time_t)(ms / 1000), (long)(ms % 1000) * 1000000},
				 {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000}};

	if (tfd >= 0)
		timerfd_settime(tfd, 0, &its, NULL);
}

static int ck__loop(struct ckrun *c)
{
	char ctlpath[256], cmd[64];
	int tfd = -1, lfd, status = CK_EXIT_INTERNAL;

	lfd = ck_ctlsrv_open(c->job, ctlpath, sizeof(ctlpath));
	if (lfd < 0)
		fprintf(stderr, "ckrun: warning: no control socket: %s\n", ck_err_msg());
	if (c->interval_ms) {
		tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		ck__interval_rearm(tfd, c->interval_ms);
	}
	for (;;) {
		struct pollfd p[4] = {{ck_wake_fd[0], POLLIN, 0}, {c->status_fd, POLLIN, 0}, {tfd, POLLIN, 0},
				      {lfd, POLLIN, 0}};
		struct ck_jproc *from;
		struct ck_msg m;
		pid_t sender;
		uint64_t seq;
		char drain[64];
		int got = ck_procs_wait(c, p, 4, -1, &m, &from, &sender);

		if (got < 0)
			break;
		if (p[0].revents & POLLIN)
			while (read(ck_wake_fd[0], drain, sizeof(drain)) > 0)
				;
		if (p[1].revents & (POLLIN | POLLHUP)) {
			if (ck__job_status(c, &status) == 0)
				goto out;
			fprintf(stderr, "ckrun: the job's namespace ended unexpectedly\n");
			status = CK_EXIT_INTERNAL;
			goto out;
		}
		c->job_ready = c->nprocs > 0;
		c->job_started |= c->job_ready;
		if (ck_sig_chld) {
			int mst;
			ck_sig_chld = 0;
			/* 0: every agent finalized with its program, the job
			 * is ending by itself */
			if (ck_mpi_exited(c, &mst) && mst != 0) {
				/* The agents are gone: the ranks end (their agent's
				 * lock says so) unless they had not reached one yet */
				if (ck__job_ended(c, 3000, &status))
					goto out;
				fprintf(stderr, "ckrun: the MPI agents (mpirun) exited with status %d; job %s cannot go on\n",
					mst, c->job);
				ck_kill_job(c);
				status = CK_EXIT_INTERNAL;
				goto out;
			}
		}
		if (got == 1 && from && m.type == CK_MSG_REQUEST) {
			/* The job's own ckpt_request() */
			ck__checkpoint(c, 0, &seq);
			ck__interval_rearm(tfd, c->interval_ms);
		}
		if (ck_sig_term) {
			status = ck__stop(c);
			goto out;
		}
		if (ck_sig_usr2 && c->job_ready) {
			ck_sig_usr2 = 0;
			ck__checkpoint(c, 0, &seq);
			ck__interval_rearm(tfd, c->interval_ms);
		}
		if (tfd >= 0 && (p[2].revents & POLLIN)) {
			uint64_t ticks;
			if (read(tfd, &ticks, sizeof(ticks)) > 0 && c->job_ready) {
				ck__checkpoint(c, 0, &seq);
				ck__interval_rearm(tfd, c->interval_ms);
			}
		}
		if (lfd >= 0 && (p[3].revents & POLLIN)) {
			int cfd = ck_ctlsrv_accept(lfd, cmd, sizeof(cmd));
			char reply[1200];
			if (cfd < 0)
				continue;
			if (strcmp(cmd, "checkpoint") && strcmp(cmd, "checkpoint-stop")) {
				ck_ctlsrv_reply(cfd, "error unknown command");
				continue;
			}
			int stop = !strcmp(cmd, "checkpoint-stop");
			int rc = ck_round(c, stop ? CK_ROUND_STOP : 0, &seq);

			ck__interval_rearm(tfd, c->interval_ms);
			if (rc == 0) {
				snprintf(reply, sizeof(reply), "ok %" PRIu64, seq);
				ck_ctlsrv_reply(cfd, reply);
				if (stop) {
					ck_kill_job(c);
					status = CK_EXIT_TEMPFAIL;
					goto out;
				}
			} else {
				snprintf(reply, sizeof(reply), "error %s", ck_err_msg());
				fprintf(stderr, "ckrun: checkpoint of job %s failed: %s\n", c->job, ck_err_msg());
				ck_ctlsrv_reply(cfd, reply);
			}
		}
	}
out:
	if (lfd >= 0) {
		close(lfd);
		unlink(ctlpath);
	}
	if (tfd >= 0)
		close(tfd);
	return status;
}

/* A writer of the job killed before it committed left packs no manifest
 * references and temporaries: gone now that the lock is ours (nobody else
 * writes the job), as is any pack no checkpoint references. */
static int ck__clean_leftovers(struct ckrun *c)
{
	struct ck_retain_opts ro = {.flags = CK_RETAIN_OWNER | CK_RETAIN_SWEEP};
	struct ck_retain_report rep;
	int r = ck_store_retain_ex(c->store, c->job, 0, &ro, &rep);

	if (r < 0)
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
	else if (c->verbose && (rep.npacks || rep.ntemp))
		fprintf(stderr,
			"ckrun: job %s: removed %u pack(s) no checkpoint references (%" PRIu64 " bytes) and %u "
			"temporary object(s) an earlier writer left\n",
			c->job, rep.npacks, rep.pack_bytes, rep.ntemp);
	ck_retain_report_free(&rep);
	return r;
}

static int ck__run(struct ckrun *c);

/* A restore holds a descriptor per shared memory object of the job and
 * more per process, a round pidfd duplicates: ckrun takes its hard limit
 * of descriptors for itself (a soft limit of 1024 is common), and gives
 * the job the soft limit it came with (ns.c). */
static void ck__raise_nofile(struct ckrun *c)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	c->nofile_cur = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		c->nofile_raised = 1;
}

int main(int argc, char **argv)
{
	struct ckrun c;
	int r;

	memset(&c, 0, sizeof(c));
	c.agent_fd = c.status_fd = c.lastpid_fd = c.attach_fd = -1;
	if (ck__parse(&c, argc, argv) < 0)
		return CK_EXIT_USAGE;
	ck__raise_nofile(&c);
	if (ck__find_helpers(&c) < 0 || (c.mpi_np && ck_mpi_prepare(&c) < 0)) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		return CK_EXIT_INTERNAL;
	}
	if (pipe2(ck_wake_fd, O_CLOEXEC | O_NONBLOCK) < 0)
		return CK_EXIT_INTERNAL;
	if (ck_sig_term || ck_sig_usr2) /* came before the pipe: the loop looks at once */
		(void)!write(ck_wake_fd[1], "x", 1);
	ck_stdio_record(&c);
	r = ck_store_open(c.store_uri, &c.sopts, &c.store);
	if (r < 0) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		return r == -EINVAL ? CK_EXIT_USAGE : CK_EXIT_STORE;
	}
	/* One writer per job: a second ckrun of the job (or ckpt rm/gc at
	 * work on it) is refused here, before anything is written. */
	/* A resume may follow a holder killed elsewhere (a container, another
	 * node): its silent lease is waited out rather than refused. */
	r = ck_joblock_acquire(c.store, c.job, "ckrun", c.resume ? CK_JOBLOCK_WAIT_SILENT : 0, &c.lock);
	if (r < 0) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		ck_store_close(c.store);
		return r == -EINVAL ? CK_EXIT_USAGE : CK_EXIT_STORE;
	}
	r = ck__clean_leftovers(&c);
	if (r >= 0) {
		c.tel_opts.job = c.job;
		if (ck_tel_open(&c.tel_opts, &c.tel) < 0) {
			fprintf(stderr, "ckrun: %s\n", ck_err_msg());
			ck_joblock_release(c.lock);
			ck_store_close(c.store);
			return CK_EXIT_USAGE;
		}
	}
	r = r < 0 ? CK_EXIT_STORE : ck__run(&c);
	ck_tel_end(c.tel, r,
		   r == CK_EXIT_TEMPFAIL ? "checkpointed and stopped"
		   : r == CK_EXIT_UNSAVED ? "stopped without a new checkpoint"
					  : "ended");
	ck_tel_close(c.tel);
	ck_joblock_release(c.lock);
	ck_store_close(c.store);
	return r;
}

/* The restore goes into the job's history in the store (ckpt report); the
 * job runs on whether or not that can be written. */
static void ck__record_restore(struct ckrun *c, uint64_t seq, uint64_t duration_ns)
{
	struct ck_restore_rec rec = {.seq = seq, .duration_ns = duration_ns};
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	rec.time_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (ck_restore_log_put(c->store, c->job, &rec) < 0)
		fprintf(stderr, "ckrun: warning: the restore of %s@%" PRIu64 " is not recorded in the store: %s\n",
			c->job, seq, ck_err_msg());
}

static int ck__run(struct ckrun *c)
{
	/* used: the checkpoint restored, an older one than m if m could not
	 * be (its sequence numbers and dedup base stay m's) */
	struct ck_manifest *m = NULL, *used = NULL, *older = NULL;
	int r;

	/* The newest committed checkpoint: the base for dedup and sequence
	 * numbers, and with --resume the one to restart from. */
	r = ck_manifest_load_latest(c->store, c->job, &m);
	if (r < 0 && r != -ENOENT) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		return r == -EBADMSG ? CK_EXIT_CORRUPT : CK_EXIT_STORE;
	}
	if (m) {
		c->last_seq = m->seq;
		c->prev = m;
	}
	if (c->resume && m && (r = ck_mpi_check_resume(c, m)) < 0) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		ck_manifest_free(m);
		c->prev = NULL;
		return r == -EXDEV ? CK_EXIT_INTERNAL : CK_EXIT_USAGE;
	}
	if (ck_attach_open(c) < 0)
		fprintf(stderr, "ckrun: warning: %s; programs that close every descriptor before exec will not be "
				"checkpointable\n", ck_err_msg());
	/* a fresh start's lineage; a resume takes the restored checkpoint's */
	if (getrandom(c->lineage, sizeof(c->lineage), 0) != sizeof(c->lineage)) {
		fprintf(stderr, "ckrun: cannot draw the run's lineage: %s\n", strerror(errno));
		return CK_EXIT_INTERNAL;
	}
	if (ck_mpi_start(c, c->resume && m) < 0) {
		fprintf(stderr, "ckrun: %s\n", ck_err_msg());
		return CK_EXIT_INTERNAL;
	}
	if (c->resume && m) {
		uint64_t t0 = ck_now_ns(), req0 = ck_s3_request_count ? ck_s3_request_count() : 0;
		r = ck_resume_newest(c, m, &used);
		if (r < 0) {
			fprintf(stderr, "ckrun: cannot restore %s@%" PRIu64 ": %s\n", c->job, m->seq, ck_err_msg());
			ck_mpi_stop(c);
			return r == -EBADMSG || r == -ENOENT ? CK_EXIT_CORRUPT : CK_EXIT_INTERNAL;
		}
		older = used != m ? used : NULL;
		if (used->has_lineage) /* (else: an older image's, a lineage of its own) */
			memcpy(c->lineage, used->lineage, sizeof(c->lineage));
		ck_tel_restore(c->tel, used->seq, (double)(ck_now_ns() - t0) / 1e9);
		ck__record_restore(c, used->seq, ck_now_ns() - t0);
		if (c->verbose) {
			char req[64] = "";
			if (ck_s3_request_count && ck_s3_request_count() > req0)
				snprintf(req, sizeof(req), ", %" PRIu64 " S3 requests", ck_s3_request_count() - req0);
			fprintf(stderr, "ckrun: job %s restored from checkpoint %" PRIu64 " in %.3f s%s\n", c->job, used->seq,
				(double)(ck_now_ns() - t0) / 1e9, req);
		}
	} else {
		if (!c->resume && m && c->verbose)
			fprintf(stderr, "ckrun: job %s has checkpoints; starting fresh (use --resume to restart)\n",
				c->job);
		r = ck_spawn(c, CK_SPAWN_LAUNCH, NULL, 0);
		if (r < 0) {
			fprintf(stderr, "ckrun: %s\n", ck_err_msg());
			ck_mpi_stop(c);
			return CK_EXIT_INTERNAL;
		}
	}
	r = ck__loop(c);
	ck_mpi_stop(c);
	ck_procs_clear(c);
	free(c->procs);
	ck_manifest_free(older);
	ck_manifest_free(c->prev);
	return r;
}
