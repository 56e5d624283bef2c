/* ender: a job that ends by itself, with status 7, as soon as the file
 * named by its argument exists (checked every millisecond); for the stop
 * that meets a job ending (tests/suite/30-faults.sh, part lifecycle). */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct timespec ms = {0, 1000000};

	if (argc < 2)
		return 2;
	printf("ender: waiting for %s\n", argv[1]);
	fflush(stdout);
	for (long i = 0; i < 60000; i++) {
		if (access(argv[1], F_OK) == 0) {
			printf("ender: done\n");
			return 7;
		}
		nanosleep(&ms, NULL);
	}
	return 1;
}
