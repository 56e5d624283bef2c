/* The writer's priority over a round (launcher/ckrun/pace.c): it starts at
 * the round's nice value, rises by 5 each step to the caller's own, and a
 * writer thread follows it; fixed when the step is 0; a thread that may not
 * lower its nice value (not root) stays where it is. */
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "launcher/ckrun/pace.h"
#include "tests/unit/unit.h"

static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&t, NULL);
}

static int nice_of_self(void)
{
	return getpriority(PRIO_PROCESS, (id_t)gettid());
}

struct seen {
	struct ck_pace *p;
	int at[3];
};

/* A writer thread: created at nice 10 (inherited), then paced. */
static void *writer(void *arg)
{
	struct seen *s = arg;

	ck_pace_thread(s->p, 1); /* as a writer thread starts */
	s->at[0] = nice_of_self();
	sleep_ms(130);
	ck_pace_thread(s->p, 0);
	s->at[1] = nice_of_self();
	sleep_ms(100);
	ck_pace_thread(s->p, 0);
	s->at[2] = nice_of_self();
	return NULL;
}

void ck_unit_run(void)
{
	struct ck_pace p = {0};
	struct seen s = {&p, {0, 0, 0}};
	pthread_t th;
	int own = nice_of_self();

	if (own > 0) /* the test's own value is the top: run it at 0 or below */
		return;
	ck_pace_start(&p, 10, 100);
	CHECK_EQ_INT(ck_pace_want(&p), 10);
	CHECK_EQ_INT(pthread_create(&th, NULL, writer, &s), 0);
	pthread_join(th, NULL);
	if (ck_pace_may_nice(own)) {
		CHECK_EQ_INT(s.at[0], 10);
		CHECK_EQ_INT(s.at[1], 5);   /* one step */
		CHECK_EQ_INT(s.at[2], own); /* two: at ckrun's own, no further */
		sleep_ms(50);
		CHECK_EQ_INT(ck_pace_want(&p), own);
	} else { /* RLIMIT_NICE: may not lower it; the round does not ask */
		CHECK_EQ_INT(s.at[0], 10);
		CHECK_EQ_INT(s.at[2], 10);
		CHECK_EQ_INT(ck_pace_want(&p), 10);
	}
	/* the caller's own thread is only ever raised, never lowered */
	{
		struct ck_pace q = {0};
		ck_pace_start(&q, 10, 100);
		ck_pace_thread(&q, 0);
		CHECK_EQ_INT(nice_of_self(), own);
	}

	/* fixed: never moves */
	ck_pace_start(&p, 10, 0);
	sleep_ms(20);
	CHECK_EQ_INT(ck_pace_want(&p), 10);
	/* a round whose caller runs above `from` does not lower it */
	ck_pace_start(&p, -5, 100);
	CHECK_EQ_INT(ck_pace_want(&p), -5);
}
