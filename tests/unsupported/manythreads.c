/* manythreads: more threads than a checkpoint holds (4096 per process,
 * CK_PD_MAX_THREADS): the round must be refused naming the limit, and the
 * job must go on untouched. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_barrier_t done;

static void *sleeper(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&done);
	return NULL;
}

int main(void)
{
	enum { N = 4100 };
	static pthread_t t[N];
	pthread_attr_t a;
	int n = 0;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	pthread_barrier_init(&done, NULL, N + 1);
	for (int i = 0; i < N; i++)
		n += pthread_create(&t[i], &a, sleeper, NULL) == 0;
	for (int i = 0; i < 25; i++)
		usleep(100000);
	pthread_barrier_wait(&done);
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	printf("manythreads: %d threads\n", n);
	return n == N ? 0 : 1;
}
