/* Interposed: streams and events. The program holds the plugin's records;
 * the driver's handles inside them are replaced on restart. */
#include "cu_internal.h"

#include <stdlib.h>

static CUresult stream_new(CUstream *phStream, unsigned int flags, int priority, int has_priority)
{
	struct ck_cu_stream *s;
	CUresult r;

	if (!phStream)
		return CUDA_ERROR_INVALID_VALUE;
	if (has_priority && !ck_cu_d.cuStreamCreateWithPriority)
		return CUDA_ERROR_NOT_SUPPORTED;
	if (!(s = calloc(1, sizeof(*s))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = has_priority ? ck_cu_d.cuStreamCreateWithPriority(&s->real, flags, priority)
			 : ck_cu_d.cuStreamCreate(&s->real, flags);
	if (r != CUDA_SUCCESS) {
		free(s);
		return r;
	}
	s->magic = CK_CU_STREAM_MAGIC;
	s->ctx = ck_cu_current();
	s->flags = flags;
	s->priority = priority;
	s->has_priority = has_priority;
	pthread_mutex_lock(&ck_cu_lock);
	s->next = ck_cu.streams;
	ck_cu.streams = s;
	pthread_mutex_unlock(&ck_cu_lock);
	*phStream = (CUstream)s;
	return CUDA_SUCCESS;
}

CK_CU_API CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	CK_ENTER;
	CK_LEAVE(stream_new(phStream, Flags, 0, 0));
}

CK_CU_API CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	CK_ENTER;
	CK_LEAVE(stream_new(phStream, flags, priority, 1));
}

CK_CU_API CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
	CUstream s;

	CK_ENTER;
	if (!ck_cu_d.cuStreamGetPriority)
		CK_LEAVE(CUDA_ERROR_NOT_SUPPORTED);
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuStreamGetPriority(s, priority));
}

CK_CU_API CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
	struct ck_cu_stream **sp, *s;

	CK_ENTER;
	if (!ck_cu_stream_of(hStream))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	s = (struct ck_cu_stream *)hStream;
	if ((r = ck_cu_d.cuStreamDestroy(s->real)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (sp = &ck_cu.streams; *sp; sp = &(*sp)->next)
		if (*sp == s) {
			*sp = s->next;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	s->magic = 0;
	free(s);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuStreamSynchronize(s));
}

CK_CU_API CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	CK_LEAVE(ck_cu_d.cuStreamQuery(s));
}

CK_CU_API CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	struct ck_cu_event *e;
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	if (!(e = ck_cu_event_of(hEvent)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	CK_LEAVE(ck_cu_d.cuStreamWaitEvent(s, e->real, Flags));
}

CK_CU_API CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct ck_cu_event *e;

	CK_ENTER;
	if (!phEvent)
		CK_LEAVE(CUDA_ERROR_INVALID_VALUE);
	if (!(e = calloc(1, sizeof(*e))))
		CK_LEAVE(CUDA_ERROR_OUT_OF_MEMORY);
	if ((r = ck_cu_d.cuEventCreate(&e->real, Flags)) != CUDA_SUCCESS) {
		free(e);
		CK_LEAVE(r);
	}
	e->magic = CK_CU_EVENT_MAGIC;
	e->ctx = ck_cu_current();
	e->flags = Flags;
	/* Shared with another process, which a restart cannot reconnect:
	 * allowed, and rounds are refused while it lives (cu_api_unsup.c). */
	if (Flags & CU_EVENT_INTERPROCESS)
		__atomic_fetch_add(&ck_cu.ipc_events, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&ck_cu_lock);
	e->next = ck_cu.events;
	ck_cu.events = e;
	pthread_mutex_unlock(&ck_cu_lock);
	*phEvent = (CUevent)e;
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
	struct ck_cu_event **ep, *e;

	CK_ENTER;
	if (!(e = ck_cu_event_of(hEvent)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if ((r = ck_cu_d.cuEventDestroy(e->real)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	pthread_mutex_lock(&ck_cu_lock);
	for (ep = &ck_cu.events; *ep; ep = &(*ep)->next)
		if (*ep == e) {
			*ep = e->next;
			break;
		}
	pthread_mutex_unlock(&ck_cu_lock);
	if (e->flags & CU_EVENT_INTERPROCESS)
		__atomic_fetch_sub(&ck_cu.ipc_events, 1, __ATOMIC_SEQ_CST);
	e->magic = 0;
	free(e);
	CK_LEAVE(CUDA_SUCCESS);
}

CK_CU_API CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
	struct ck_cu_event *e;
	CUstream s;

	CK_ENTER;
	if ((r = ck_cu_stream_real(hStream, &s)) != CUDA_SUCCESS)
		CK_LEAVE(r);
	if (!(e = ck_cu_event_of(hEvent)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	if ((r = ck_cu_d.cuEventRecord(e->real, s)) == CUDA_SUCCESS)
		e->recorded = __atomic_add_fetch(&ck_cu.records, 1, __ATOMIC_RELAXED);
	CK_LEAVE(r);
}

CK_CU_API CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
	struct ck_cu_event *e;

	CK_ENTER;
	if (!(e = ck_cu_event_of(hEvent)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	CK_LEAVE(ck_cu_d.cuEventSynchronize(e->real));
}

CK_CU_API CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
	struct ck_cu_event *e;

	CK_ENTER;
	if (!(e = ck_cu_event_of(hEvent)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	CK_LEAVE(ck_cu_d.cuEventQuery(e->real));
}

CK_CU_API CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	struct ck_cu_event *a, *b;

	CK_ENTER;
	if (!(a = ck_cu_event_of(hStart)) || !(b = ck_cu_event_of(hEnd)))
		CK_LEAVE(CUDA_ERROR_INVALID_HANDLE);
	CK_LEAVE(ck_cu_d.cuEventElapsedTime(pMilliseconds, a->real, b->real));
}
