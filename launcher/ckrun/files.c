/* Regular files, directories, devices, deleted files and memfds.
 *
 * Regular files and devices are reopened by path at their offset (a file
 * the job only reads and that changed since is reported). A deleted file
 * or a memfd has its contents saved at the round (read through /proc, the
 * size recorded while the job was parked) and is made again at restore:
 * a deleted file under its own name and unlinked at once, so /proc shows
 * "PATH (deleted)" as before, else as an O_TMPFILE or a memfd; one file
 * for every descriptor and mapping of it (rstobj.c, shm.c). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"
#include "launcher/common/ck_err.h"

/* Round: the contents of a deleted file or memfd, read through
 * /proc/PID/fd. */
int ck_files_save_data(struct ck_writer *w, pid_t snap, struct ck_pd_fd *f, unsigned flags)
{
	struct ck_src src = {snap, 0, -1, -1, flags, NULL, 0, 0, 0};
	char path[64];
	off_t size;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", snap, f->fd);
	src.file_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (src.file_fd < 0) {
		ck_err_set("cannot read descriptor %d (%s) of the job: %s", f->fd, f->path, strerror(errno));
		return -errno;
	}
	/* The size recorded while the job was parked, not the current one. */
	size = lseek(src.file_fd, 0, SEEK_END);
	if (size >= 0 && (uint64_t)size < f->size)
		f->size = (uint64_t)size;
	r = ck_writer_add(w, f->size, ck_src_read, &src, &f->data_chunk, &f->data_nchunks);
	close(src.file_fd);
	return r;
}

/* ---- restore ---- */

static int ck__fill_fd(struct ck_reader *rd, const struct ck_pd_fd *f, int fd)
{
	/* the file was just sized: pages of zeros are left as holes, as a
	 * sparse file had them (what it stores and SEEK_HOLE see) */
	struct ck_sink s = {0, 0, fd, 1};

	if (!f->data_nchunks)
		return 0;
	return ck_reader_read_sparse(rd, f->data_chunk, f->data_nchunks, ck_sink_write, &s);
}

static void ck__strip_deleted(char *path)
{
	size_t n = strlen(path);
	if (n > 10 && !strcmp(path + n - 10, " (deleted)"))
		path[n - 10] = 0;
}

pid_t ck_files_ns_pid; /* the job namespace's init (ns.c): its mounts are the job's */

/* Opens path on the job's mounts, as the job would: through its
 * namespace's root, absolute symlinks resolved there too (openat2
 * RESOLVE_IN_ROOT). A descriptor on ckrun's mounts names the same file
 * through other mount objects: the job's renameat from a directory
 * descriptor, or linkat of a file's, into its own tree failed with EXDEV.
 * Where openat2 is missing or forbidden (a container's seccomp profile),
 * a path under /proc/INIT/root: the job's mounts still, only its absolute
 * symlinks resolved from ckrun's root (the same directory). Before the
 * job's namespace exists, ckrun's own open. */
static int ck__job_open(const char *path, int flags, mode_t mode)
{
	const int valid = O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |
			  O_SYNC | O_ASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME |
			  O_CLOEXEC | O_PATH | O_TMPFILE;
	struct open_how how;
	char root[48], *in_root;
	int rfd, fd, e;

	if (ck_files_ns_pid <= 0 || path[0] != '/')
		return open(path, flags, mode);
	snprintf(root, sizeof(root), "/proc/%d/root", (int)ck_files_ns_pid);
	if ((rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return open(path, flags, mode);
	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(unsigned)(flags & valid);
	how.mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? mode : 0;
	how.resolve = RESOLVE_IN_ROOT;
	fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
	if (fd < 0 && errno == EAGAIN) /* a rename raced the walk */
		fd = (int)syscall(SYS_openat2, rfd, path, &how, sizeof(how));
	e = errno;
	close(rfd);
	if (fd >= 0 || !(e == ENOSYS || e == EPERM || e == EINVAL || e == EXDEV || e == EAGAIN)) {
		errno = e;
		return fd;
	}
	if (asprintf(&in_root, "%s%s", root, path) < 0)
		return open(path, flags, mode);
	fd = open(in_root, flags, mode);
	free(in_root);
	return fd;
}

/* Opens a regular file again and reports if it changed since. */
static int ck__open_file(const struct ck_pd_fd *f)
{
	int flags = f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY);
	struct stat st;
	int fd;

	if (S_ISLNK(f->mode)) /* an O_PATH descriptor of the link itself */
		flags |= O_NOFOLLOW;
	fd = ck__job_open(f->path, flags | O_CLOEXEC, 0);
	if (fd < 0) {
		ck_err_set("descriptor %d: cannot open %s again: %s", f->fd, f->path, strerror(errno));
		return -errno;
	}
	/* Data the job reads changed under it: say so. (Files it writes change
	 * by its own hand after the checkpoint; that is expected.) A path
	 * --map-path moved names another site's copy, whose mtime a copy need
	 * not keep: its size alone says whether it is the same data. */
	if (S_ISREG(f->mode) && (f->flags & O_ACCMODE) == O_RDONLY && fstat(fd, &st) == 0) {
		int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec;
		if ((uint64_t)st.st_size != f->size || (mt != f->mtime_ns && !(f->xflags & CK_PD_FD_MAPPED)))
			fprintf(stderr, "ckrun: warning: %s%s changed since the checkpoint (size %" PRIu64 " -> %lld)\n",
				f->path, (f->xflags & CK_PD_FD_MAPPED) ? " (through --map-path)" : "", f->size,
				(long long)st.st_size);
	}
	/* Devices and other unseekable files have no offset to restore. */
	(void)lseek(fd, (off_t)f->offset, SEEK_SET);
	return fd;
}

/* A deleted file made again under its own name and unlinked at once, so
 * /proc shows "PATH (deleted)" as before (CRIU's ghost files). Its
 * directory too, if the job removed it, and removed again. -1 if the name
 * is taken or cannot be made. */
static int ck__ghost_file(const char *path, mode_t mode)
{
	char dir[CK_PD_PATH], *made[64];
	int nmade = 0, fd;

	snprintf(dir, sizeof(dir), "%s", path);
	for (char *p = dir + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdir(dir, 0700) == 0 && nmade < 64)
			made[nmade++] = strdup(dir);
		*p = '/';
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd >= 0)
		unlink(path);
	while (nmade > 0) {
		char *d = made[--nmade];
		if (d)
			rmdir(d);
		free(d);
	}
	return fd;
}

/* The name the kernel gives a file made with O_TMPFILE: "#" and its inode
 * number in decimal. */
static int ck__tmpfile_name(const char *path)
{
	const char *b = strrchr(path, '/');

	b = b ? b + 1 : path;
	return b[0] == '#' && b[1] && strspn(b + 1, "0123456789") == strlen(b + 1);
}

int ck_content_file_make(struct ck_reader *rd, const struct ck_pd_fd *f)
{
	char path[CK_PD_PATH], dir[CK_PD_PATH];
	int fd = -1, r;

	snprintf(path, sizeof(path), "%s", f->path);
	ck__strip_deleted(path);
	if (f->kind == CK_FD_MEMFD) {
		const char *name = path + strlen("/memfd:");
		fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	} else if (ck__tmpfile_name(path)) {
		/* made with O_TMPFILE ("DIR/#INO"): so again, in its directory,
		 * which keeps it linkable (linkat gives it a name later), on the
		 * job's own mount of it (another mount's is EXDEV to linkat) */
		snprintf(dir, sizeof(dir), "%s", path);
		fd = ck__job_open(dirname(dir), O_TMPFILE | O_RDWR | O_CLOEXEC, f->mode & 07777);
		if (fd < 0)
			fd = memfd_create("ckpt-deleted", MFD_CLOEXEC);
	} else {
		fd = ck__ghost_file(path, f->mode & 07777);
		snprintf(dir, sizeof(dir), "%s", path);
		if (fd < 0)
			fd = open(dirname(dir), O_TMPFILE | O_RDWR | O_CLOEXEC, f->mode & 07777);
		if (fd < 0)
			fd = memfd_create("ckpt-deleted", MFD_CLOEXEC);
	}
	if (fd < 0) {
		ck_err_set("descriptor %d: cannot re-create %s: %s", f->fd, f->path, strerror(errno));
		return -errno;
	}
	if (ftruncate(fd, (off_t)f->size) < 0 || (r = ck__fill_fd(rd, f, fd)) < 0) {
		r = -errno;
		close(fd);
		return r ? r : -EIO;
	}
	if (f->kind == CK_FD_MEMFD && f->u64[0])
		fcntl(fd, F_ADD_SEALS, (int)f->u64[0]);
	lseek(fd, (off_t)f->offset, SEEK_SET);
	/* Same access mode as before (a memfd/tmpfile is opened read-write). */
	if ((f->flags & O_ACCMODE) != O_RDWR) {
		char p[64];
		int again;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		again = open(p, (f->flags & O_ACCMODE) | O_CLOEXEC); /* no O_NOFOLLOW: a /proc link */
		if (again >= 0) {
			lseek(again, (off_t)f->offset, SEEK_SET);
			close(fd);
			fd = again;
		}
	}
	return fd;
}

/* Whether ckrun's own descriptor f->fd is the file f was, still as long
 * as the offset the job had reached in it. Under --map-path the recorded
 * inode is another site's: there it is the file at the mapped path. */
static int ck__same_file_holding(const struct ck_pd_fd *f)
{
	struct stat st, at;

	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < f->offset)
		return 0;
	if (f->xflags & CK_PD_FD_MAPPED)
		return stat(f->path, &at) == 0 && at.st_dev == st.st_dev && at.st_ino == st.st_ino;
	return (uint64_t)st.st_dev == f->dev && (uint64_t)st.st_ino == f->ino;
}

/* Whether f is a directory removed while it was open ("PATH (deleted)"). */
int ck_fd_removed_dir(const struct ck_pd_fd *f)
{
	size_t n = strlen(f->path);

	return S_ISDIR(f->mode) && n > 10 && !strcmp(f->path + n - 10, " (deleted)");
}

/* A descriptor of a removed directory (it had to be empty): one made again
 * under its name (or that name and ".ckrun-removed", taken meanwhile),
 * opened, and removed. */
static int ck__removed_dir(const struct ck_pd_fd *f)
{
	char path[CK_PD_PATH + 16];
	struct stat st, at;
	int fd, r;

	snprintf(path, sizeof(path), "%.*s", (int)(strlen(f->path) - 10), f->path);
	r = mkdir(path, 0700);
	if (r < 0 && errno == EEXIST) {
		strcat(path, ".ckrun-removed");
		r = mkdir(path, 0700);
	}
	/* only the directory made here is opened and removed: a name replaced
	 * meanwhile (a symlink) is not followed */
	fd = r < 0 ? -1 : open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		ck_err_set("descriptor %d: cannot make again the removed directory %s: %s", f->fd, path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) == 0 && lstat(path, &at) == 0 && st.st_dev == at.st_dev && st.st_ino == at.st_ino)
		rmdir(path);
	if (fchmod(fd, f->mode & 07777) < 0 || fstat(fd, &st) < 0 || st.st_nlink) {
		r = -errno;
		close(fd);
		ck_err_set("descriptor %d: cannot make again the removed directory %s (mode, or removal)", f->fd, path);
		return r ? r : -EIO;
	}
	if ((f->flags & O_ACCMODE) != O_RDONLY || (f->flags & O_PATH)) {
		char self[64];
		int again;
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		again = open(self, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY)) | O_CLOEXEC);
		close(fd);
		if ((fd = again) < 0)
			return -errno;
	}
	lseek(fd, (off_t)f->offset, SEEK_SET);
	return fd;
}

int ck_file_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	char self[64];

	/* ckrun's stdio at the cut (`ckrun > log`): the new ckrun's, unless
	 * the same file still holds the saved offset; then the job writes on
	 * in it, opened through ckrun's descriptor (its path may have moved) */
	if ((f->xflags & CK_PD_FD_STDIO_FILE) && f->fd <= 2) {
		if (!ck__same_file_holding(f))
			return ck_stdio_remake(rd, o, f, fd);
		snprintf(self, sizeof(self), "/proc/self/fd/%d", f->fd);
		*fd = open(self, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOCTTY)) | O_CLOEXEC);
		if (*fd >= 0)
			(void)lseek(*fd, (off_t)f->offset, SEEK_SET);
		return 0;
	}
	if (S_ISDIR(f->mode) && ck_fd_removed_dir(f)) {
		*fd = ck__removed_dir(f);
		return *fd < 0 ? *fd : 0;
	}
	*fd = ck__open_file(f);
	return 0;
}

int ck_dev_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	(void)rd;
	(void)o;
	*fd = ck__open_file(f);
	return 0;
}

/* One file for every descriptor of it in the job; a second open() of it
 * has its own offset. */
int ck_content_file_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	struct ck_obj *ob = ck_obj_file(o, f->dev, f->ino);
	char p[64];

	if (!ob) {
		*fd = ck_content_file_make(rd, f);
		if (*fd < 0)
			return 0;
		ob = ck_obj_add(o, f->kind, f->dev, f->ino);
		if (!ob) {
			close(*fd);
			return -ENOMEM;
		}
		ob->fd[0] = ck_rdwr_again(*fd);
		return 0;
	}
	snprintf(p, sizeof(p), "/proc/self/fd/%d", ob->fd[0]);
	*fd = open(p, (f->flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC);
	if (*fd >= 0)
		lseek(*fd, (off_t)f->offset, SEEK_SET);
	return 0;
}
