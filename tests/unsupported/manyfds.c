/* manyfds: more open descriptors than a checkpoint holds (4096 per
 * process): the round must be refused naming the limit, and the job must
 * go on untouched. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

int main(void)
{
	struct rlimit rl = {8192, 8192};
	int n = 0;

	setrlimit(RLIMIT_NOFILE, &rl);
	for (int i = 0; i < 4200; i++)
		n += open("/dev/null", O_RDONLY) >= 0;
	for (int i = 0; i < 25; i++)
		usleep(100000);
	printf("manyfds: %d descriptors open\n", n);
	return n == 4200 ? 0 : 1;
}
