/* Linux AIO contexts (io_setup) with no I/O in flight.
 *
 * A context is the kernel's, named by the address of its ring, a mapping
 * the kernel makes ("/[aio] (deleted)"); its requests in flight are
 * invisible. libckpt sees the calls made through the C library's
 * syscall(3) (syscall.S; libaio makes its calls through it too, checked
 * for Debian 12's 0.3.113), and keeps per context
 * the number of events asked for and the requests that may be in flight
 * (counted up before a submission, down after its events are read: a
 * round that parks a thread in between sees more, never fewer). A round
 * saves a context only when none may be in flight and its ring holds no
 * event unread; the ring itself stays out of the image (a skip), and a
 * restored process makes the context again (io_setup with the same
 * count) and moves its ring to the saved address (mremap: the kernel
 * follows it), before any thread of the job runs. A ring libckpt did not
 * see made (a raw system call, a program without libckpt) refuses the
 * round. */
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "libckpt/ck_sys.h"
#include "libckpt/core.h"

#define CK__AIO_MAX 16

struct ck__aio {
	uint64_t id;	      /* the context: its ring's address (0: free slot) */
	uint32_t nr;	      /* events asked for at io_setup */
	volatile int inflight; /* requests that may be in flight */
	uint64_t len;	      /* the ring's length, at the round */
	int saved;	      /* the round saved it: a restart makes it again */
};

static struct ck__aio ck__aios[CK__AIO_MAX];
uint32_t ck__aio_rings;
static int ck__aio_owner;   /* the process the table is of */
static volatile int ck__aio_lost; /* a context made while the table was full */

/* The ring's header, as the kernel lays it out (fs/aio.c). */
struct ck__aio_ring {
	unsigned id, nr, head, tail, magic, compat, incompat, header_length;
};

static struct ck__aio *ck__find(uint64_t id)
{
	if (ck__aio_owner != ck__core.pid)
		return NULL; /* a fork's copy of its parent's table: no context is this process's */
	for (int i = 0; i < CK__AIO_MAX; i++)
		if (id && ck__aios[i].id == id)
			return &ck__aios[i];
	return NULL;
}

static void ck__note_setup(unsigned nr, uint64_t id)
{
	if (ck__aio_owner != ck__core.pid) {
		memset(ck__aios, 0, sizeof(ck__aios));
		ck__aio_owner = ck__core.pid;
	}
	/* the kernel gave this address anew: a context noted there was
	 * destroyed by a call libckpt did not see */
	for (int i = 0; i < CK__AIO_MAX; i++)
		__atomic_compare_exchange_n(&ck__aios[i].id, &(uint64_t){id}, 0, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	for (int i = 0; i < CK__AIO_MAX; i++)
		if (__atomic_compare_exchange_n(&ck__aios[i].id, &(uint64_t){0}, id, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST)) {
			ck__aios[i].nr = nr;
			ck__aios[i].inflight = 0;
			ck__aios[i].saved = 0;
			return;
		}
	ck__aio_lost = 1;
}

static void ck__add(uint64_t id, long n)
{
	struct ck__aio *a = ck__find(id);

	if (a)
		__atomic_add_fetch(&a->inflight, (int)n, __ATOMIC_SEQ_CST);
}

/* syscall(3)'s io_* calls, from syscall.S: made here, noted around. */
long ck__syscall_aio(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	long r;

	if (nr == SYS_io_submit && a1 > 0)
		ck__add((uint64_t)a0, a1); /* before: a round in between sees them */
	r = ck_sys6(nr, a0, a1, a2, a3, a4, a5);
	switch (nr) {
	case SYS_io_setup:
		if (r == 0 && a1)
			ck__note_setup((unsigned)a0, *(uint64_t *)a1);
		break;
	case SYS_io_submit:
		if (a1 > 0)
			ck__add((uint64_t)a0, -(a1 - (r > 0 ? r : 0)));
		break;
	case SYS_io_getevents:
	case SYS_io_pgetevents:
		if (r > 0)
			ck__add((uint64_t)a0, -r);
		break;
	case SYS_io_cancel:
		if (r == 0)
			ck__add((uint64_t)a0, -1);
		break;
	case SYS_io_destroy:
		if (r == 0) {
			struct ck__aio *a = ck__find((uint64_t)a0);
			if (a)
				__atomic_store_n(&a->id, 0, __ATOMIC_SEQ_CST);
		}
		break;
	}
	if (r < 0 && r > -4096)
		return ck__syscall_fail(r);
	return r;
}

/* The round's collection begins: a context the last round saved and this
 * one does not see (destroyed by a bare system call) is not made again. */
void ck__aio_round_begin(void)
{
	if (ck__aio_owner != ck__core.pid)
		return;
	for (int i = 0; i < CK__AIO_MAX; i++)
		ck__aios[i].saved = 0;
}

/* The round (threads parked): the ring [start, end) of /proc/self/maps.
 * 0 when it can be made again at a restart (noted as saved), else -ENOTSUP
 * with the reason set. */
int ck__aio_ring_check(uint64_t start, uint64_t end)
{
	struct ck__aio *a = ck__find(start);
	const struct ck__aio_ring *ring = (const struct ck__aio_ring *)(uintptr_t)start;

	if (!a) {
		ck__failf("a Linux AIO context (io_setup) at 0x%llx made by a call libckpt did not see (a raw system "
			  "call%s): not supported",
			  (unsigned long long)start, ck__aio_lost ? ", or more than 16 contexts" : "");
		return -ENOTSUP;
	}
	if (__atomic_load_n(&a->inflight, __ATOMIC_SEQ_CST) > 0) {
		ck__failf("a Linux AIO context (io_setup) at 0x%llx has %d request(s) that may be in flight: not "
			  "supported (try again)",
			  (unsigned long long)start, a->inflight);
		return -ENOTSUP;
	}
	if (ring->head != ring->tail) {
		ck__failf("a Linux AIO context (io_setup) at 0x%llx holds completed events not read yet: not supported "
			  "(try again)",
			  (unsigned long long)start);
		return -ENOTSUP;
	}
	a->len = end - start;
	a->saved = 1;
	return 0;
}

/* Restart, on the manager, every other thread parked: each context saved
 * made again at its address. */
int ck__aio_restore(uint64_t *failed)
{
	if (ck__aio_owner != ck__core.pid)
		return 0;
	for (int i = 0; i < CK__AIO_MAX; i++) {
		struct ck__aio *a = &ck__aios[i];
		aio_context_t id = 0;
		long r;
		if (!a->id)
			continue;
		if (!a->saved) { /* made after the round: gone with the process */
			a->id = 0;
			continue;
		}
		uint64_t len;
		*failed = a->id;
		if ((r = ck_sys2(SYS_io_setup, a->nr, &id)) < 0)
			return (int)r;
		/* the kernel sizes a ring by its count of CPUs too: one larger
		 * than the saved one would cover what lies after it */
		len = (32 + (uint64_t)((const struct ck__aio_ring *)(uintptr_t)id)->nr * 32 + 4095) & ~4095ull;
		if (len > a->len) {
			ck_sys1(SYS_io_destroy, id);
			return -ENOSPC;
		}
		if (id != a->id) {
			long m = ck_sys5(SYS_mremap, id, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, a->id);
			if (m < 0) {
				ck_sys1(SYS_io_destroy, id);
				return (int)m;
			}
			if ((uint64_t)m != a->id)
				return -EFAULT;
		}
		a->inflight = 0;
	}
	return 0;
}
