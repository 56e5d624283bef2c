/* A process of the job that has not attached: one that never will is
 * named at once, instead of after the grace a process just forked or
 * just exec'd gets to load libckpt and attach (cut.c). It never will when
 * libckpt is not mapped in it and cannot be loaded into its program: a
 * static program (no program interpreter to honour LD_PRELOAD), or an
 * environment without LD_PRELOAD naming libckpt (the job cleared it).
 * A process that maps libckpt (forked, or loaded, and not attached yet)
 * or that may still load it (its dynamic loader runs) is given the grace.
 * Only what /proc tells: nothing here touches the process. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/common/ck_err.h"

/* Whether path's contents hold needle (a whole /proc file, read in
 * pieces that overlap by the needle's length). */
static int ck__file_has(const char *path, const char *needle)
{
	char buf[8192];
	size_t keep = 0, nl = strlen(needle);
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), found = 0;

	if (fd < 0)
		return -1;
	while (!found && (n = read(fd, buf + keep, sizeof(buf) - keep - 1)) > 0) {
		size_t len = keep + (size_t)n;
		buf[len] = 0;
		/* environ separates its entries with NUL: look in each */
		for (size_t off = 0; off < len && !found; off += strlen(buf + off) + 1)
			found = strstr(buf + off, needle) != NULL;
		keep = len > nl ? nl : len;
		memmove(buf, buf + len - keep, keep);
	}
	close(fd);
	return found;
}

/* 1 if the program has no PT_INTERP (static), 0 if it has, -1 unknown. */
static int ck__exe_static(pid_t pid)
{
	char path[64];
	Elf64_Ehdr eh;
	int fd, r = -1;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr))
		goto out;
	r = 1;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != (ssize_t)sizeof(ph)) {
			r = -1;
			break;
		}
		if (ph.p_type == PT_INTERP) {
			r = 0;
			break;
		}
	}
out:
	close(fd);
	return r;
}

uint64_t ck_stray_grace_ns(const struct ckrun *c)
{
	uint64_t ms = c->round_timeout_ms < 3000 ? c->round_timeout_ms : 3000;
	return (ms < 1000 ? 1000 : ms) * 1000000ull;
}

int ck_proc_refuse_unattached(pid_t pid, const char *why, const char *tail)
{
	char comm[32];
	int32_t jp = 0, pg, sd;

	ck_proc_ids(pid, &jp, &pg, &sd, NULL);
	ck_err_set("process %d (%s) of the job runs without libckpt (%s): not supported%s", jp,
		   ck_proc_comm(pid, comm, sizeof(comm)), why, tail);
	return -ENOTSUP;
}

const char *ck_proc_never_attaches(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	if (ck__file_has(path, "/libckpt.so") != 0)
		return NULL; /* mapped (or unknown): it may attach yet */
	if (ck__exe_static(pid) == 1)
		return "a static program, into which libckpt cannot be loaded";
	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	if (ck__file_has(path, "libckpt.so") == 0)
		return "its environment has no LD_PRELOAD of libckpt";
	return NULL;
}
