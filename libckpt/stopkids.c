/* A parent's view of its children that the job stopped (SIGSTOP).
 *
 * ckrun holds a stopped process through a round and a restore stops it
 * again (launcher/ckrun/stopped.c). Stopping it again tells its parent
 * once more: a wait report (waitpid WUNTRACED) and a SIGCHLD. What the
 * parent had seen is the parent's: at a round where ckrun holds a stopped
 * process (CK_CKPT_STOPKIDS), each process records, parked, which of its
 * children are stopped and whether their stop is still to be reported to
 * it (waitid WNOWAIT: nothing taken). This record is in libckpt's memory,
 * so in the image. At a restore, once those children are stopped again
 * (ckrun lets them go first), the parent takes the new report of a stop it
 * had waited for already, and the SIGCHLD the new stop sent where none
 * was pending at the cut.
 * A restore stops a child by the signal that had stopped it (SIGSTOP,
 * SIGTSTP, SIGTTIN, SIGTTOU), so a report still to be taken names it.
 * Refused: more than CK__MAX_KIDS stopped children. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__MAX_KIDS 64

struct ck__stopkid {
	int32_t pid;
	int32_t reported; /* its parent has waited for the stop */
};

static struct ck__stopkid ck__kids[CK__MAX_KIDS];
static uint32_t ck__nkids;

/* The state letter of /proc/PID/stat ("T": stopped), or 0. */
static char ck__state_of(long pid)
{
	char path[48], buf[512];
	const char *p;
	long n;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	n = ck__proc_read(path, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	p = strrchr(buf, ')'); /* the name may hold anything */
	return p && p[1] == ' ' ? p[2] : 0;
}

static int ck__add(long pid)
{
	siginfo_t si;
	long r;

	memset(&si, 0, sizeof(si));
	r = ck_sys5(SYS_waitid, P_PID, pid, (long)&si, WSTOPPED | WNOWAIT | WNOHANG, 0);
	if (r < 0)
		return 0; /* not a child of ours after all */
	/* (a restore stops it by the same signal: ckrun saw it when it held
	 * the child; these four are all a stop can be) */
	if (si.si_pid == pid && si.si_code == CLD_STOPPED && si.si_status != SIGSTOP && si.si_status != SIGTSTP &&
	    si.si_status != SIGTTIN && si.si_status != SIGTTOU) {
		ck__failf("child process %ld was stopped by signal %d and its parent has not waited for that stop yet: "
			  "not supported",
			  pid, si.si_status);
		return -ENOTSUP;
	}
	if (ck__nkids >= CK__MAX_KIDS) {
		ck__failf("more than %d stopped children of one process: not supported", CK__MAX_KIDS);
		return -E2BIG;
	}
	ck__kids[ck__nkids].pid = (int32_t)pid;
	ck__kids[ck__nkids].reported = !(si.si_pid == pid && si.si_code == CLD_STOPPED);
	ck__nkids++;
	return 0;
}

/* The children ckrun holds (or will) in this round because the job had
 * stopped them: where this process is stopped too, it records after them,
 * and a held child's threads run in the parking handler (not 'T'). */
static int32_t ck__held_pids[CK__MAX_KIDS];
static uint32_t ck__nheld, ck__held_over;

void ck__stopkids_held(const char *text, uint32_t len)
{
	ck__nheld = 0;
	ck__held_over = len / sizeof(int32_t) > CK__MAX_KIDS;
	for (uint32_t at = 0; at + sizeof(int32_t) <= len && ck__nheld < CK__MAX_KIDS; at += sizeof(int32_t))
		memcpy(&ck__held_pids[ck__nheld++], text + at, sizeof(int32_t));
}

static int ck__held(long pid)
{
	for (uint32_t i = 0; i < ck__nheld; i++)
		if (ck__held_pids[i] == pid)
			return 1;
	return 0;
}

int ck__stopkids_collect(int asked)
{
	static char buf[16384];

	ck__nkids = 0;
	/* this libckpt takes the list of held children (ckrun checks it for
	 * a parent held too: an older one's image cannot) */
	ck__pd.pflags |= CK_PD_P_HELDKIDS;
	if (!asked)
		return 0;
	if (ck__held_over) {
		ck__failf("more than %d stopped children of one process: not supported", CK__MAX_KIDS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < ck__pd.nthreads; i++) {
		char path[64];
		const char *p = buf;
		long n;

		snprintf(path, sizeof(path), "/proc/self/task/%d/children", ck__pd.threads[i].tid);
		n = ck__proc_read(path, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = 0;
		while (*p) {
			long pid = 0;
			int r;
			while (*p == ' ' || *p == '\n')
				p++;
			while (*p >= '0' && *p <= '9')
				pid = pid * 10 + (*p++ - '0');
			if (pid <= 0)
				break;
			if ((ck__state_of(pid) == 'T' || ck__held(pid)) && (r = ck__add(pid)) < 0)
				return r;
		}
	}
	return 0;
}

/* Whether a process-directed SIGCHLD was pending at the cut (a second
 * one merges into it). */
static int ck__sigchld_saved(void)
{
	for (uint32_t i = 0; i < ck__pd.nsiginfo && i < CK_PD_MAX_SIGINFO; i++)
		if (ck__pd.siginfo[i].sig == SIGCHLD && ck__pd.siginfo[i].tid == 0)
			return 1;
	return 0;
}

void ck__stopkids_restored(void)
{
	struct k_sigaction {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} act;
	int sent = 0;

	/* (ckrun lets this process go once every thread of each child it
	 * stopped again shows T: the report is there by then, posted as the
	 * last thread stops; a child the job continued during the round is
	 * not stopped again) */
	for (uint32_t i = 0; i < ck__nkids; i++) {
		siginfo_t si;
		memset(&si, 0, sizeof(si));
		/* the stop is there again: the one reported before is taken */
		if (ck_sys5(SYS_waitid, P_PID, ck__kids[i].pid, (long)&si, WSTOPPED | WNOWAIT | WNOHANG, 0) == 0 &&
		    si.si_pid == ck__kids[i].pid) {
			sent = 1;
			if (ck__kids[i].reported)
				ck_sys5(SYS_waitid, P_PID, ck__kids[i].pid, (long)&si, WSTOPPED | WNOHANG, 0);
		}
	}
	/* The new stop's SIGCHLD, unless the disposition sends none on a stop
	 * or one was pending at the cut. It may come a moment after the stop
	 * shows (the kernel reports it once the last thread has stopped). */
	memset(&act, 0, sizeof(act));
	if (!sent || ck__sigchld_saved() || ck_sys4(SYS_rt_sigaction, SIGCHLD, 0, (long)&act, 8) < 0 ||
	    act.handler == SIG_IGN || (act.flags & SA_NOCLDSTOP))
		return;
	{
		uint64_t set = 1ull << (SIGCHLD - 1);
		struct timespec wait = {0, 100 * 1000 * 1000};
		siginfo_t si;
		ck_sys4(SYS_rt_sigtimedwait, (long)&set, (long)&si, (long)&wait, 8);
	}
}
