/* seccomp_strict: a thread in seccomp strict mode (read, write, exit and
 * sigreturn only: it could not even take part in a checkpoint) while a
 * checkpoint is asked for: the round must be refused before the cut naming
 * the process and the mode, and the job must go on untouched. The strict
 * thread counts (no clock: strict mode turns the TSC off, and any system
 * call but those four kills) for a second or two, then ends with a plain
 * exit of itself; the main thread joins it and reports. */
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void *strict(void *arg)
{
	volatile unsigned long n = 0;

	(void)arg;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0)
		return NULL;
	while (n < 1500000000ul)
		n++;
	syscall(SYS_write, 1, "seccomp_strict: the strict thread ran\n", 38);
	syscall(SYS_exit, 0); /* exit_group would be fatal here */
	return NULL;
}

int main(void)
{
	pthread_t t;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (pthread_create(&t, NULL, strict, NULL) != 0)
		return 1;
	pthread_join(t, NULL);
	printf("seccomp_strict: joined\n");
	return 0;
}
