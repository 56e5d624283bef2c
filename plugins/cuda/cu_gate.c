/* The gate every interposed call passes through. Cheap when open (two
 * atomic operations); a round closes it, waits for the calls in flight to
 * leave, and holds new ones until it opens again, so no CUDA work starts
 * while device memory is being saved or rebuilt. Deliberately not a
 * pthread rwlock: that records the writer's TID, which a restored process
 * may not share with the one that closed it. */
#include "cu_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>

static atomic_int closed;
static atomic_long inside;
static pthread_mutex_t wait_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reopened = PTHREAD_COND_INITIALIZER;

/* Per thread: the context the program made current, and the generation in
 * which that was last told to the driver. */
static __thread struct ck_cu_ctx *tls_ctx;
static __thread unsigned tls_gen;
static atomic_uint gen;

struct ck_cu_ctx *ck_cu_current(void)
{
	return tls_ctx;
}

void ck_cu_set_current(struct ck_cu_ctx *c)
{
	tls_ctx = c;
	tls_gen = atomic_load(&gen);
}

void ck_cu_new_generation(void)
{
	atomic_fetch_add(&gen, 1);
}

CUresult ck_cu_enter(void)
{
	if (ck_cu_drv_load() < 0)
		return CUDA_ERROR_STUB_LIBRARY;
	for (;;) {
		atomic_fetch_add(&inside, 1);
		if (!atomic_load(&closed))
			break;
		atomic_fetch_sub(&inside, 1);
		pthread_mutex_lock(&wait_lock);
		while (atomic_load(&closed))
			pthread_cond_wait(&reopened, &wait_lock);
		pthread_mutex_unlock(&wait_lock);
	}
	/* The driver of a restored process knows no current context. */
	if (tls_gen != atomic_load(&gen)) {
		tls_gen = atomic_load(&gen);
		if (tls_ctx && ck_cu_d.cuCtxSetCurrent)
			ck_cu_d.cuCtxSetCurrent(tls_ctx->real);
	}
	return CUDA_SUCCESS;
}

void ck_cu_leave(void)
{
	atomic_fetch_sub(&inside, 1);
}

/* A call can stay inside for long (a synchronize behind a long kernel);
 * one that never leaves (a stream waiting on a value the host never
 * writes) must fail the round, not hang it. */
static long ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int ck_cu_gate_close(long timeout_ms)
{
	struct timespec ts = { 0, 50000 };
	long until = ms_now() + timeout_ms;

	atomic_store(&closed, 1);
	while (atomic_load(&inside) > 0) {
		if (ms_now() >= until)
			return -ETIMEDOUT;
		nanosleep(&ts, NULL);
	}
	return 0;
}

void ck_cu_gate_open(void)
{
	pthread_mutex_lock(&wait_lock);
	atomic_store(&closed, 0);
	pthread_cond_broadcast(&reopened);
	pthread_mutex_unlock(&wait_lock);
}
