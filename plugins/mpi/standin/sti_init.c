/* The stand-in's environment calls: MPI_Init connects to the agent named in
 * CKPT_MPI_CHANNEL (the agent's real MPI is initialised already), the rank,
 * size and processor name come back once and are answered locally after. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugins/mpi/standin/sti.h"

struct ck__sti ck__sti;
#define CONNECT_MS 60000
/* One caller on the channel at a time (MPI_THREAD_SERIALIZED at most is
 * promised, this keeps a program that breaks the promise safe). */
static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;

/* Held by the checkpoint's plugin while it uses the channel's header from
 * libckpt's thread; MPI_Finalize takes it before it unmaps the channel. */
static pthread_mutex_t cut_lock = PTHREAD_MUTEX_INITIALIZER;

void ck__sti_cut_lock(void)
{
	pthread_mutex_lock(&cut_lock);
}

void ck__sti_cut_unlock(void)
{
	pthread_mutex_unlock(&cut_lock);
}

void ck__sti_lock(void)
{
	pthread_mutex_lock(&chan_lock);
}

void ck__sti_unlock(void)
{
	pthread_mutex_unlock(&chan_lock);
}

struct ck_mpi_req *ck__sti_slot(const char *fn, unsigned op)
{
	struct ck_mpi_req *r = ck__sti.ch.h ? ck_mpi_chan_slot(&ck__sti.ch) : NULL;

	if (!r)
		ck__sti_die(fn, "the rank's agent is gone");
	r->op = op;
	return r;
}

int ck__sti_wait(const char *fn, struct ck_mpi_req *r)
{
	if (ck_mpi_chan_wait(&ck__sti.ch, r))
		ck__sti_die(fn, "the rank's agent is gone");
	return r->rc;
}

struct ck_mpi_req *ck__sti_begin(const char *fn, unsigned op)
{
	ck__sti_lock();
	return ck__sti_slot(fn, op);
}

int ck__sti_call(const char *fn, struct ck_mpi_req *r)
{
	ck_mpi_chan_post(&ck__sti.ch, r);
	return ck__sti_wait(fn, r);
}

void ck__sti_end(struct ck_mpi_req *r)
{
	ck_mpi_chan_release(&ck__sti.ch, r);
	ck__sti_unlock();
}

void ck__sti_need_init(const char *fn)
{
	if (!ck__sti.inited)
		ck__sti_die(fn, "called before MPI_Init");
	if (ck__sti.finalized)
		ck__sti_die(fn, "called after MPI_Finalize");
}

static int init(const char *fn)
{
	const char *name = getenv(CK_MPI_CHANNEL_ENV), *pipe;
	struct ck_mpi_req *r;
	int rc;

	if (ck__sti.inited)
		ck__sti_die(fn, "MPI is initialised already");
	if (!name || !*name)
		ck__sti_die(fn, "no agent: %s is not set (this libmpi.so.40 is ckrun's stand-in; "
				"run the program under ckmpi-agent)", CK_MPI_CHANNEL_ENV);
	/* Under ckrun --np the agents start beside the job, not before it:
	 * the channel may come a moment after the program. */
	for (int waited = 0;; waited += 10) {
		rc = ck_mpi_chan_open(&ck__sti.ch, name);
		if ((rc != -ENOENT && rc != -EPROTO) || waited >= CONNECT_MS)
			break;
		usleep(10000);
	}
	if (rc)
		ck__sti_die(fn, "cannot open the agent's channel %s: %s", name, strerror(-rc));
	r = ck__sti_begin(fn, CK_W_HELLO);
	rc = ck__sti_call(fn, r);
	ck__sti.rank = r->src;
	ck__sti.size = r->rtag;
	memcpy(ck__sti.host, r->inl, sizeof(ck__sti.host) < sizeof(r->inl) ? sizeof(ck__sti.host) : sizeof(r->inl));
	ck__sti.host[sizeof(ck__sti.host) - 1] = 0;
	ck__sti.scratch = ck__sti.ch.arena_len / 2;
	pipe = getenv("CKPT_MPI_SEGMENT");
	if (pipe && *pipe) {
		char *end;
		unsigned long long v = strtoull(pipe, &end, 0);

		if (*end || v < 64)
			ck__sti_die(fn, "CKPT_MPI_SEGMENT=%s: not a size of 64 bytes or more", pipe);
		ck__sti.segment = (size_t)v;
	}
	ck__sti.tag_ub = (int)r->rlen;
	ck__sti.universe = (int)r->count;
	ck__sti.appnum = (int)r->off;
	ck__sti.lastcode = (int)r->len;
	ck__sti_end(r);
	ck__sti.inited = 1;
	return rc;
}

int MPI_Init(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return init("MPI_Init");
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
	(void)argc;
	(void)argv;
	*provided = required < MPI_THREAD_SERIALIZED ? required : MPI_THREAD_SERIALIZED;
	return init("MPI_Init_thread");
}

int MPI_Query_thread(int *provided)
{
	*provided = MPI_THREAD_SERIALIZED;
	return MPI_SUCCESS;
}

int MPI_Is_thread_main(int *flag)
{
	*flag = 1;
	return MPI_SUCCESS;
}

int MPI_Initialized(int *flag)
{
	*flag = ck__sti.inited;
	return MPI_SUCCESS;
}

int MPI_Finalized(int *flag)
{
	*flag = ck__sti.finalized;
	return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
	struct ck_mpi_req *r;
	int rc;

	ck__sti_need_init("MPI_Finalize");
	ck__sti_attr_delete_all(CK_COMM_comm_self); /* first, as the standard asks */
	r = ck__sti_begin("MPI_Finalize", CK_W_FINALIZE);
	rc = ck__sti_call("MPI_Finalize", r);
	ck__sti_end(r);
	ck__sti_cut_lock(); /* a cut being asked for ends first (it fails: this rank finalized) */
	ck__sti.finalized = 1;
	ck_mpi_chan_close(&ck__sti.ch);
	ck__sti_cut_unlock();
	return rc;
}

int MPI_Abort(MPI_Comm comm, int errorcode)
{
	struct ck_mpi_req *r;

	(void)ck__sti_comm("MPI_Abort", comm);
	if (ck__sti.inited && !ck__sti.finalized) {
		r = ck__sti_begin("MPI_Abort", CK_W_ABORT);
		r->tag = errorcode;
		ck__sti_call("MPI_Abort", r); /* the agent does not come back */
	}
	_exit(errorcode & 0xff ? errorcode & 0xff : 1);
}

double MPI_Wtime(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double MPI_Wtick(void)
{
	return 1e-9;
}

int MPI_Get_processor_name(char *name, int *resultlen)
{
	ck__sti_need_init("MPI_Get_processor_name");
	strcpy(name, ck__sti.host);
	*resultlen = (int)strlen(name);
	return MPI_SUCCESS;
}

int MPI_Get_version(int *version, int *subversion)
{
	*version = MPI_VERSION;
	*subversion = MPI_SUBVERSION;
	return MPI_SUCCESS;
}

int MPI_Comm_rank(MPI_Comm comm, int *rank)
{
	ck__sti_need_init("MPI_Comm_rank");
	*rank = ck__sti_comm_rank(ck__sti_comm("MPI_Comm_rank", comm));
	return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size)
{
	ck__sti_need_init("MPI_Comm_size");
	*size = ck__sti_comm_size(ck__sti_comm("MPI_Comm_size", comm));
	return MPI_SUCCESS;
}
