/* Reading and writing another process's memory (the snapshot child, the
 * restorer) with process_vm_readv/writev: one copy, no ptrace stop. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "launcher/common/ck_err.h"
#include "launcher/ckrun/ckrun.h"

/* From addr, the pages process_vm_readv refused, until one it can read
 * again (at least one page): bytes done. */
static size_t ck__mem_read_forced(pid_t pid, uint64_t addr, char *buf, size_t len)
{
	char path[64];
	size_t done = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		/* (proc_mem.force_override=never): zeros would be silently wrong */
		ck_err_set("cannot read memory of process %d at 0x%" PRIx64 " (PROT_NONE?) through %s: %s", pid, addr,
			   path, strerror(errno));
		return (size_t)-1;
	}
	while (done < len) {
		size_t page = 4096 - ((addr + done) & 4095);
		struct iovec l, r;

		if (page > len - done)
			page = len - done;
		if (done) { /* readable again: back to the faster call */
			l = (struct iovec){buf + done, 1};
			r = (struct iovec){(void *)(uintptr_t)(addr + done), 1};
			if (process_vm_readv(pid, &l, 1, &r, 1, 0) == 1)
				break;
		}
		if (pread(fd, buf + done, page, (off_t)(addr + done)) != (ssize_t)page) {
			if (errno != EIO) { /* EIO: beyond a mapped file's end */
				ck_err_set("cannot read memory of process %d at 0x%" PRIx64 " through %s: %s", pid,
					   addr + done, path, strerror(errno));
				close(fd);
				return (size_t)-1;
			}
			memset(buf + done, 0, page);
		}
		done += page;
	}
	close(fd);
	return done;
}

int ck_mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		struct iovec l = {(char *)buf + done, len - done};
		struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
		ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EFAULT) {
			ck_err_set("cannot read memory of process %d at 0x%" PRIx64 ": %s", pid, addr + done,
				   strerror(errno));
			return -errno;
		}
		/* A page the job cannot read now: memory it made PROT_NONE after
		 * writing it, read by force through /proc/PID/mem; or beyond the
		 * end of a mapped file (the job cannot read it either), zeros. */
		size_t got = ck__mem_read_forced(pid, addr + done, (char *)buf + done, len - done);
		if (got == (size_t)-1)
			return -EIO;
		done += got;
	}
	return 0;
}

int ck_mem_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		struct iovec l = {(char *)buf + done, len - done};
		struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
		ssize_t n = process_vm_writev(pid, &l, 1, &r, 1, 0);
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			ck_err_set("cannot write memory of the restored process at 0x%" PRIx64 ": %s", addr + done,
				   strerror(e));
			return -e;
		}
		done += (size_t)n;
	}
	return 0;
}

void ck_maps_free(struct ck_map *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(m[i].path);
	free(m);
}

int ck_maps_read(pid_t pid, struct ck_map **out, size_t *n)
{
	char path[64], *line = NULL;
	size_t cap = 0, cnt = 0, alloc = 0;
	struct ck_map *v = NULL;
	FILE *f;
	int r = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f) {
		ck_err_set("cannot read %s: %s", path, strerror(errno));
		return -errno;
	}
	while (getline(&line, &cap, f) > 0) {
		struct ck_map m;
		char perms[8], *p;
		unsigned dmaj, dmin;
		int pos = 0;

		memset(&m, 0, sizeof(m));
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &m.start, &m.end, perms,
			   &m.off, &dmaj, &dmin, &m.ino, &pos) < 7) {
			ck_err_set("cannot parse %s line: %s", path, line);
			r = -EBADMSG;
			break;
		}
		m.dev = ((uint64_t)dmaj << 8) | dmin;
		m.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
			 (perms[2] == 'x' ? PROT_EXEC : 0);
		m.shared = perms[3] == 's';
		p = line + pos;
		p[strcspn(p, "\n")] = 0;
		m.path = *p ? strdup(p) : NULL;
		if (cnt == alloc) {
			alloc = alloc ? alloc * 2 : 64;
			struct ck_map *nv = realloc(v, alloc * sizeof(*v));
			if (!nv) {
				free(m.path);
				r = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[cnt++] = m;
	}
	free(line);
	fclose(f);
	if (r < 0) {
		ck_maps_free(v, cnt);
		return r;
	}
	*out = v;
	*n = cnt;
	return 0;
}
