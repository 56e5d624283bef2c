/* movedir: a job that lives in its working directory and reads its
 * environment at every step (ckrun --resume --map-path and --env:
 * tests/suite/42-mappath.sh).
 *
 * State exercised: the working directory; a file in it ("journal", opened
 * by a relative path) held open with O_APPEND whose first page is also
 * mapped MAP_SHARED; getenv("CK_TEST_LR") at every step. Each step prints
 * "step N lr=VALUE" ("unset" when absent), appends "step N\n" to the
 * journal and writes the same line at the start of the mapped page.
 *
 * Rollback safety: a restore goes back to the checkpoint while the journal
 * keeps what a killed run appended later, so a step reads back only what
 * it has just written: its line at the end of the file (where O_APPEND put
 * it, the descriptor's offset there too) and the mapped page through the
 * descriptor (the mapping and the descriptor are the same file).
 *
 * With "here" as second argument it works in the current directory and
 * leaves the journal there for the suite, and checks at every step that
 * /proc/self/exe and the journal's mapping in /proc/self/maps name its
 * current directory (the suite runs a copy of the program from there: a
 * restore that moved the directory must name the new place). Without, it
 * works in a temporary directory it makes and removes.
 * Usage: movedir [SCALE [here]]   (or CKPT_APP_SCALE; 1.0 = 40 steps, 4 s) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096

static double app_scale(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : getenv("CKPT_APP_SCALE");
	double v = s ? strtod(s, NULL) : 1.0;
	return v > 0 ? v : 1.0;
}

static void fail(int step, const char *what)
{
	printf("FAIL step %d: %s\n", step, what);
	exit(1);
}

/* /proc/self/exe in the current directory, and the mapping at map naming
 * the journal there. */
static void check_place(int step, const void *map)
{
	char cwd[PATH_MAX], exe[PATH_MAX], want[PATH_MAX + 16], line[2 * PATH_MAX], *slash;
	char addr[32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int found = 0;
	FILE *f;

	if (!getcwd(cwd, sizeof(cwd)) || n <= 0)
		fail(step, "cannot read the working directory or /proc/self/exe");
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash || (size_t)(slash - exe) != strlen(cwd) || strncmp(exe, cwd, strlen(cwd)))
		fail(step, "/proc/self/exe is not in the working directory");
	snprintf(want, sizeof(want), "%s/journal", cwd);
	snprintf(addr, sizeof(addr), "%lx-", (unsigned long)map);
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);
		if (l && line[l - 1] == '\n')
			line[--l] = 0;
		if (!strncmp(line, addr, strlen(addr)) && l >= strlen(want) && !strcmp(line + l - strlen(want), want))
			found = 1;
	}
	if (f)
		fclose(f);
	if (!found)
		fail(step, "the journal's mapping does not name the journal in the working directory");
}

int main(int argc, char **argv)
{
	int steps = (int)(40 * app_scale(argc, argv)), here = argc > 2 && !strcmp(argv[2], "here");
	char tmpl[PATH_MAX], page[PAGE], line[64], back[64];
	char *map;
	int fd;

	if (steps < 2)
		steps = 2;
	if (!here) {
		snprintf(tmpl, sizeof(tmpl), "%s/movedir.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
		if (!mkdtemp(tmpl) || chdir(tmpl) < 0)
			fail(-1, "cannot make a temporary directory");
	}
	fd = open("journal", O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	memset(page, 0, sizeof(page));
	if (fd < 0 || write(fd, page, PAGE) != PAGE)
		fail(-1, "cannot make the journal");
	map = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		fail(-1, "cannot map the journal");
	for (int i = 0; i < steps; i++) {
		const char *lr = getenv("CK_TEST_LR");
		struct stat st;
		int len = snprintf(line, sizeof(line), "step %d\n", i);

		printf("step %d lr=%s\n", i, lr ? lr : "unset");
		fflush(stdout);
		if (write(fd, line, (size_t)len) != len || fstat(fd, &st) < 0)
			fail(i, "cannot append to the journal");
		if (lseek(fd, 0, SEEK_CUR) != st.st_size)
			fail(i, "the journal's offset is not at its end after an append");
		if (pread(fd, back, (size_t)len, st.st_size - len) != len || memcmp(back, line, (size_t)len))
			fail(i, "the line appended is not at the journal's end");
		memset(map, 0, sizeof(line));
		memcpy(map, line, (size_t)len);
		if (pread(fd, back, sizeof(back), 0) != (ssize_t)sizeof(back) || memcmp(back, map, sizeof(back)))
			fail(i, "the mapped page is not the journal's first page");
		if (here)
			check_place(i, map);
		usleep(100000);
	}
	printf("done %d\n", steps);
	munmap(map, PAGE);
	close(fd);
	if (!here && (unlink("journal") < 0 || chdir("/") < 0 || rmdir(tmpl) < 0))
		fail(steps, "cannot remove the temporary directory");
	return 0;
}
