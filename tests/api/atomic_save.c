/* atomic_save DIR [EARLY]: the atomic save of a training loop (write a
 * temporary, rename it over the result) with a checkpoint cut while the
 * temporary is open. With EARLY 1 (the default) a first checkpoint comes
 * before the temporary is opened. Then the temporary gets half its line,
 * a second checkpoint (ckpt_request: the cut holds the temporary open), the
 * rest, and is renamed over DIR/model. A first run then waits to be killed;
 * the temporary is gone from then on, so the second checkpoint cannot
 * come back: a resume must go back to the first. A restored run saves
 * again and checks DIR/model, then prints the value its first run drew
 * (only a restored process holds it; a fresh start prints "start"). */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ckpt.h"

int main(int argc, char **argv)
{
	char tmp[4096], model[4096], line[128], got[128];
	int early = argc > 2 ? atoi(argv[2]) : 1, fd, n, r;
	uint64_t first, x;
	ssize_t k;

	if (argc < 2 || getrandom(&first, sizeof(first), 0) != sizeof(first))
		return 2;
	snprintf(tmp, sizeof(tmp), "%s/model.tmp", argv[1]);
	snprintf(model, sizeof(model), "%s/model", argv[1]);
	printf("start %016" PRIx64 "\n", first);
	fflush(stdout);
	if (early && (r = ckpt_request()) != 0) {
		printf("FAIL the first checkpoint: %d\n", r);
		return 1;
	}
	x = first * 6364136223846793005ull + 1442695040888963407ull;
	n = snprintf(line, sizeof(line), "model %016" PRIx64 "\n", x);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, line, (size_t)n / 2) != n / 2) {
		perror(tmp);
		return 1;
	}
	if ((r = ckpt_request()) != 0) {
		printf("FAIL the checkpoint with %s open: %d\n", tmp, r);
		return 1;
	}
	if (write(fd, line + n / 2, (size_t)(n - n / 2)) != n - n / 2 || close(fd) < 0 || rename(tmp, model) < 0) {
		perror(tmp);
		return 1;
	}
	printf("renamed\n");
	fflush(stdout);
	if (ckpt_is_restarted() != 1)
		pause(); /* the test kills the first run here */
	fd = open(model, O_RDONLY | O_CLOEXEC);
	k = fd < 0 ? -1 : read(fd, got, sizeof(got));
	if (k != n || memcmp(got, line, (size_t)n)) {
		printf("FAIL %s does not hold the saved line\n", model);
		return 1;
	}
	printf("saved, first drew %016" PRIx64 "\n", first);
	return 0;
}
