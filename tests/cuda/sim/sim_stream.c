/* cksim: streams and events. Work is done at enqueue time, so a stream is
 * only a validated handle and an event only a timestamp. */
#include "sim.h"

#include <stdlib.h>
#include <time.h>

struct sim_event {
	uint32_t magic;
	unsigned flags;
	int recorded;
	uint64_t t_ns;
	struct sim_event *next;
};
#define SIM_EVENT_MAGIC 0x45564b53u

struct sim_stream_node {
	struct sim_stream s;
	int priority;
	struct sim_stream_node *next;
};

static struct sim_stream_node *streams;
static struct sim_event *events;

CUresult sim_stream_ok(CUstream s)
{
	struct sim_stream_node *n;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&sim_lock);
	for (n = streams; n; n = n->next)
		if ((CUstream)&n->s == s)
			break;
	pthread_mutex_unlock(&sim_lock);
	return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	struct sim_stream_node *n;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!phStream)
		return CUDA_ERROR_INVALID_VALUE;
	n = calloc(1, sizeof(*n));
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->s.magic = SIM_STREAM_MAGIC;
	n->s.ctx = sim_cur;
	n->s.flags = Flags;
	pthread_mutex_lock(&sim_lock);
	n->next = streams;
	streams = n;
	pthread_mutex_unlock(&sim_lock);
	*phStream = (CUstream)&n->s;
	return CUDA_SUCCESS;
}

/* Priorities are kept and reported; the sim schedules nothing by them. */
SIM_API CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	CUresult r = cuStreamCreate(phStream, flags);

	if (!r)
		((struct sim_stream_node *)*phStream)->priority = priority;
	return r;
}

SIM_API CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
	CUresult r = sim_stream_ok(hStream);

	if (r)
		return r;
	if (!priority)
		return CUDA_ERROR_INVALID_VALUE;
	*priority = (!hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
			    ? 0
			    : ((struct sim_stream_node *)hStream)->priority;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
	struct sim_stream_node **np, *n;
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	for (np = &streams; (n = *np); np = &n->next)
		if ((CUstream)&n->s == hStream)
			break;
	if (n)
		*np = n->next;
	pthread_mutex_unlock(&sim_lock);
	if (!n)
		return CUDA_ERROR_INVALID_HANDLE;
	free(n);
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	return sim_stream_ok(hStream);
}

SIM_API CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
	return sim_stream_ok(hStream);
}

static struct sim_event *event_find(CUevent e)
{
	struct sim_event *i;

	for (i = events; i; i = i->next)
		if ((CUevent)i == e)
			return i;
	return NULL;
}

SIM_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	CUresult r = sim_stream_ok(hStream);

	(void)Flags;
	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = event_find(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct sim_event *e;
	CUresult r = sim_need_ctx();

	if (r)
		return r;
	if (!phEvent)
		return CUDA_ERROR_INVALID_VALUE;
	e = calloc(1, sizeof(*e));
	if (!e)
		return CUDA_ERROR_OUT_OF_MEMORY;
	e->magic = SIM_EVENT_MAGIC;
	e->flags = Flags;
	pthread_mutex_lock(&sim_lock);
	e->next = events;
	events = e;
	pthread_mutex_unlock(&sim_lock);
	*phEvent = (CUevent)e;
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
	struct sim_event **ep, *e;
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	for (ep = &events; (e = *ep); ep = &e->next)
		if ((CUevent)e == hEvent)
			break;
	if (e)
		*ep = e->next;
	pthread_mutex_unlock(&sim_lock);
	if (!e)
		return CUDA_ERROR_INVALID_HANDLE;
	e->magic = 0;
	free(e);
	return CUDA_SUCCESS;
}

SIM_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	struct sim_event *e;
	struct timespec ts;
	CUresult r = sim_stream_ok(hStream);

	if (r)
		return r;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&sim_lock);
	if ((e = event_find(hEvent))) {
		e->recorded = 1;
		e->t_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	}
	pthread_mutex_unlock(&sim_lock);
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

SIM_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	CUresult r = sim_check();

	if (r)
		return r;
	pthread_mutex_lock(&sim_lock);
	r = event_find(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_unlock(&sim_lock);
	return r;
}

SIM_API CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	return cuEventSynchronize(hEvent);
}

SIM_API CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	struct sim_event *a, *b;
	CUresult r = sim_check();

	if (r)
		return r;
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&sim_lock);
	a = event_find(hStart);
	b = event_find(hEnd);
	if (!a || !b || (a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		r = CUDA_ERROR_INVALID_HANDLE;
	else if (!a->recorded || !b->recorded)
		r = CUDA_ERROR_NOT_READY;
	else
		*pMilliseconds = (float)((double)((int64_t)(b->t_ns - a->t_ns)) / 1e6);
	pthread_mutex_unlock(&sim_lock);
	return r;
}

/* Called by the reset hook. */
void sim_stream_forget(void)
{
	while (streams) {
		struct sim_stream_node *n = streams;
		streams = n->next;
		free(n);
	}
	while (events) {
		struct sim_event *e = events;
		events = e->next;
		free(e);
	}
}
