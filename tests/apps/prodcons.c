/* prodcons: threads, a mutex and two condition variables (bounded buffer).
 *
 * State exercised: several threads, most of them blocked in
 * pthread_cond_wait (futex) at any moment, a mutex that is often contended,
 * and a ring buffer half full of items in flight. A checkpoint may land while
 * a producer waits for room, a consumer waits for an item or the main thread
 * waits for the next milestone; after a restore every item must still be
 * delivered exactly once and in order per producer.
 *
 * Output: milestones in order and one line per producer with an
 * order-independent sum, all independent of scheduling.
 * Usage: prodcons [SCALE]   (or CKPT_APP_SCALE; 1.0 = about 3 s) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NPROD 3
#define NCONS 3
#define RING 64
#define MILESTONES 20

struct item {
	int prod;
	long seq;
	uint64_t val;
};

static struct item ring[RING];
static int head, count;
static long next_seq[NPROD];   /* next seq expected per producer, checked on take */
static long consumed;
static int order_errors;
static long items_per_prod;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t progress = PTHREAD_COND_INITIALIZER;
static uint64_t sums[NPROD];     /* per producer, added by consumers under lock */
static uint64_t expected[NPROD]; /* per producer, added by the producer itself */

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	x ^= x >> 33;
	return x;
}

/* Some work per item so that the run lasts a while without sleeping. */
static uint64_t work(uint64_t v)
{
	for (int i = 0; i < 30000; i++)
		v = mix(v + (uint64_t)i);
	return v;
}

static void *producer(void *arg)
{
	int id = (int)(intptr_t)arg;
	uint64_t state = 1000 + (uint64_t)id;

	for (long s = 0; s < items_per_prod; s++) {
		state = work(state);
		expected[id] += mix(state);
		pthread_mutex_lock(&lock);
		while (count == RING)
			pthread_cond_wait(&not_full, &lock);
		ring[(head + count) % RING] = (struct item){ id, s, state };
		count++;
		pthread_cond_signal(&not_empty);
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	for (;;) {
		struct item it;

		pthread_mutex_lock(&lock);
		while (count == 0 && consumed < NPROD * items_per_prod)
			pthread_cond_wait(&not_empty, &lock);
		if (count == 0) {
			pthread_mutex_unlock(&lock);
			return NULL;
		}
		it = ring[head];
		head = (head + 1) % RING;
		count--;
		if (it.seq != next_seq[it.prod])
			order_errors++;
		next_seq[it.prod] = it.seq + 1;
		pthread_cond_signal(&not_full);
		pthread_mutex_unlock(&lock);

		uint64_t h = mix(work(it.val) ^ it.val) ^ work(it.val);
		(void)h;
		pthread_mutex_lock(&lock);
		sums[it.prod] += mix(it.val);
		consumed++;
		if (consumed == NPROD * items_per_prod)
			pthread_cond_broadcast(&not_empty);
		pthread_cond_broadcast(&progress);
		pthread_mutex_unlock(&lock);
	}
}

int main(int argc, char **argv)
{
	pthread_t p[NPROD], c[NCONS];
	long total;
	int rc = 0;

	items_per_prod = (long)(6000 * app_scale(argc, argv));
	if (items_per_prod < MILESTONES)
		items_per_prod = MILESTONES;
	total = NPROD * items_per_prod;
	printf("prodcons: %d producers, %d consumers, %ld items each\n", NPROD, NCONS, items_per_prod);

	for (int i = 0; i < NCONS; i++)
		pthread_create(&c[i], NULL, consumer, NULL);
	for (int i = 0; i < NPROD; i++)
		pthread_create(&p[i], NULL, producer, (void *)(intptr_t)i);

	/* The main thread sleeps in pthread_cond_wait between milestones. */
	for (int m = 1; m <= MILESTONES; m++) {
		pthread_mutex_lock(&lock);
		while (consumed < total * m / MILESTONES)
			pthread_cond_wait(&progress, &lock);
		pthread_mutex_unlock(&lock);
		printf("milestone %d/%d\n", m, MILESTONES);
	}
	for (int i = 0; i < NPROD; i++)
		pthread_join(p[i], NULL);
	for (int i = 0; i < NCONS; i++)
		pthread_join(c[i], NULL);

	for (int i = 0; i < NPROD; i++) {
		printf("producer %d: %ld items, sum %016llx\n", i, next_seq[i], (unsigned long long)sums[i]);
		if (sums[i] != expected[i] || next_seq[i] != items_per_prod) {
			printf("FAIL producer %d: sum %016llx expected %016llx\n", i,
			       (unsigned long long)sums[i], (unsigned long long)expected[i]);
			rc = 1;
		}
	}
	if (order_errors) {
		printf("FAIL %d items out of order\n", order_errors);
		rc = 1;
	}
	printf("prodcons: %s\n", rc ? "FAIL" : "ok");
	return rc;
}
