/* fdwatch inotify|lease: a descriptor whose state a checkpoint does not
 * restore: an inotify instance with a watch, or a read lease (F_SETLEASE)
 * on a file of its own. The round must be refused naming it, and the job
 * must go on: the watch still reports, the lease is still held. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int lease = argc > 1 && !strcmp(argv[1], "lease"), fd, rc = 0;
	char dir[256], path[300], ev[4096];

	snprintf(dir, sizeof(dir), "%s/fdwatch.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/f", dir);
	close(open(path, O_RDWR | O_CREAT, 0600));
	if (lease) {
		fd = open(path, O_RDONLY);
		if (fd < 0 || fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
			return 1;
	} else {
		fd = inotify_init1(IN_NONBLOCK);
		if (fd < 0 || inotify_add_watch(fd, dir, IN_CREATE) < 0)
			return 1;
	}
	for (int i = 0; i < 25; i++)
		usleep(100000);
	if (lease) {
		if (fcntl(fd, F_GETLEASE) != F_RDLCK)
			rc = 1;
	} else {
		snprintf(path, sizeof(path), "%s/g", dir);
		close(open(path, O_RDWR | O_CREAT, 0600));
		if (read(fd, ev, sizeof(ev)) <= 0)
			rc = 1;
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/f", dir);
	unlink(path);
	rmdir(dir);
	printf("fdwatch %s: %s\n", lease ? "lease" : "inotify", rc ? "FAIL" : "still in place");
	return rc;
}
