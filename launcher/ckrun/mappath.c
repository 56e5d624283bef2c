/* A restore at another site: the checkpoint's paths under --map-path, and
 * the paths a restore cannot do without checked before any process is
 * made.
 *
 * Mapped, once the descriptors are unpacked and before anything uses
 * them: the paths of regular files, directories, devices, FIFOs and
 * deleted files held open (a deleted file is made again beside its new
 * name), UNIX socket addresses (the socket plugin's map_paths), every
 * process's working directory and executable, and file-backed mappings
 * (programs and libraries too). A restored process's working directory
 * and executable are libckpt's to set again (restart.c reads them from
 * its own descriptor in the restored memory): ckrun writes the mapped
 * ones there once the memory is filled (ck_mappath_write_proc).
 *
 * Checked, with or without rules: every process's working directory, the
 * regular files and directories it holds open (not a stdio file that the
 * new ckrun's own descriptor stands for), and the files it maps shared.
 * The first one missing fails the restore with one line naming it and the
 * --map-path that would find it if it moved (its highest missing
 * directory). Private file mappings are not needed: their bytes are in the
 * image, the file only names the mapping. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launcher/ckrun/agent_plugin.h"
#include "launcher/ckrun/kinds.h"
#include "launcher/ckrun/pathmap.h"
#include "launcher/common/ck_err.h"

#define CK__DELETED " (deleted)"

/* in mapped into out (cap bytes); " (deleted)" at the end of a deleted
 * file's name is kept out of the match. 1 mapped, 0 not, -errno. */
static int ck__map(const struct ck_pathmap *pm, const char *in, char *out, size_t cap, int deleted)
{
	size_t n = strlen(in), dl = strlen(CK__DELETED);
	char base[CK_PD_PATH];
	int r;

	if (in[0] != '/' || !strncmp(in, "/memfd:", 7))
		return 0;
	if (!deleted || n <= dl || strcmp(in + n - dl, CK__DELETED) || n >= sizeof(base))
		return ck_pathmap_apply(pm, in, out, cap);
	memcpy(base, in, n - dl);
	base[n - dl] = 0;
	r = ck_pathmap_apply(pm, base, out, cap - dl);
	if (r > 0)
		strcat(out, CK__DELETED);
	return r;
}

/* The map function handed to plugins. */
static int ck__map_plain(void *arg, const char *in, char *out, size_t cap)
{
	return ck__map(arg, in, out, cap, 0);
}

/* A fixed-size path of the descriptor, in place. */
static int ck__map_fixed(const struct ck_pathmap *pm, char *path, int deleted)
{
	char out[CK_PD_PATH];
	int r = ck__map(pm, path, out, sizeof(out), deleted);

	if (r > 0)
		memcpy(path, out, sizeof(out));
	return r;
}

/* A string of the manifest, in place. */
static int ck__map_str(const struct ck_pathmap *pm, char **s, int deleted)
{
	char out[CK_PD_PATH], *n;
	int r;

	if (!*s)
		return 0;
	r = ck__map(pm, *s, out, sizeof(out), deleted);
	if (r <= 0)
		return r;
	n = strdup(out);
	if (!n)
		return -ENOMEM;
	free(*s);
	*s = n;
	return 1;
}

static int ck__map_fd(const struct ck_pathmap *pm, struct ck_pd_fd *f)
{
	int r;

	switch (f->kind) {
	case CK_FD_FILE:
	case CK_FD_DEV:
	case CK_FD_FIFO:
	case CK_FD_DELETED:
		r = ck__map_fixed(pm, f->path, f->kind == CK_FD_DELETED);
		break;
	default:
		r = ck_agent_plugins_map_paths(f, ck__map_plain, (void *)pm);
		break;
	}
	if (r > 0)
		f->xflags |= CK_PD_FD_MAPPED;
	if (r < 0)
		ck_err_wrap("descriptor %d", f->fd);
	return r;
}

int ck_mappath_write_proc(pid_t pid, const struct ck_proc *p, const struct ck_procdesc *pd)
{
	int r;

	/* libckpt's descriptor lives at restart_arg (libckpt/checkpoint.c) */
	if ((r = ck_mem_write(pid, p->restart_arg + offsetof(struct ck_procdesc, cwd), pd->cwd, sizeof(pd->cwd))) < 0 ||
	    (r = ck_mem_write(pid, p->restart_arg + offsetof(struct ck_procdesc, exe), pd->exe, sizeof(pd->exe))) < 0)
		ck_err_set("cannot give process %d its mapped working directory and program: %s", p->pid, strerror(-r));
	return r;
}

/* ---- what must be here ---- */

/* The highest directory of path that is missing (path itself when only
 * its last component is): the OLD a --map-path would need. */
static void ck__missing_top(const char *path, char *top, size_t cap)
{
	snprintf(top, cap, "%s", path);
	for (;;) {
		char *slash = strrchr(top, '/');
		if (!slash || slash == top)
			return;
		*slash = 0;
		if (access(top, F_OK) == 0) {
			*slash = '/';
			return;
		}
	}
}

/* 0 if path is here; else -ENXIO with one line: what (naming path). Only
 * a missing path is reported: other errors are the open's to name. */
static int ck__need(int32_t pid, const char *what, const char *path, int mapped)
{
	char top[CK_PD_PATH];
	struct stat st;

	/* lstat: a descriptor of a symlink (O_PATH|O_NOFOLLOW) needs the link */
	if (!path[0] || lstat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR))
		return 0;
	if (mapped) {
		ck_err_set("process %d: %s %s is not here, where --map-path put it (%s)", pid, what, path,
			   strerror(errno));
		return -ENXIO;
	}
	ck__missing_top(path, top, sizeof(top));
	ck_err_set("process %d: %s %s is not here (%s); if it moved, resume with --map-path %s=NEW", pid, what,
		   path, strerror(errno), top);
	return -ENXIO;
}

/* -ESTALE with one line if f is a regular file the job had open for
 * writing, gone from a directory that is still here: the job's own later,
 * killed run renamed or removed it after the cut (an atomic save: write a
 * temporary, rename it over the result). Files are not rolled back, so
 * this checkpoint cannot come back; one taken before the file was opened
 * can (ckrun goes back to it). A whole directory gone is a move, for
 * --map-path. */
static int ck__gone_written;

int ck_mappath_written_gone(void)
{
	return ck__gone_written;
}

static int ck__written_gone(int32_t pid, const struct ck_pd_fd *f)
{
	char dir[CK_PD_PATH], *slash;
	struct stat st;

	/* (/dev/shm: shm_open's objects, which a reboot or RemoveIPC takes
	 * away, not the job) */
	if (!S_ISREG(f->mode) || (f->flags & O_ACCMODE) == O_RDONLY || !strncmp(f->path, "/dev/shm/", 9) ||
	    lstat(f->path, &st) == 0 || errno != ENOENT)
		return 0;
	snprintf(dir, sizeof(dir), "%s", f->path);
	if (!(slash = strrchr(dir, '/')))
		return 0;
	slash[slash == dir] = 0;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	ck_err_set("process %d: descriptor %d: %s, a file it had open for writing, is gone (renamed or removed "
		   "after the checkpoint; its directory is here)",
		   pid, f->fd, f->path);
	ck__gone_written = 1;
	return -ESTALE;
}

/* A shared file mapping the restorer maps by path (shared memory objects
 * and /dev/shm files are made again). */
static int ck__region_needed(const struct ck_region *rg)
{
	return (rg->flags & (CK_REG_FILE | CK_REG_SHARED)) == (CK_REG_FILE | CK_REG_SHARED) &&
	       !(rg->flags & (CK_REG_DELETED | CK_REG_SYSV | CK_REG_PLUGIN)) && rg->path && rg->path[0] == '/' &&
	       strncmp(rg->path, "/dev/shm/", 9);
}

static int ck__restore_proc(const struct ck_pathmap *pm, struct ck_proc *p, struct ck_procdesc *pd)
{
	int r = 0;

	if (pm->n && ((r = ck__map_fixed(pm, pd->exe, 0)) < 0 || (r = ck__map_str(pm, &p->exe, 0)) < 0 ||
		      (r = ck__map_fixed(pm, pd->cwd, 0)) < 0))
		return r;
	if ((pd->cwd_mode & CK_PD_CWD_REMOVED) && strlen(pd->cwd) > 10) {
		/* removed while it was in it: made again in its parent */
		char parent[CK_PD_PATH], *slash;
		snprintf(parent, sizeof(parent), "%.*s", (int)(strlen(pd->cwd) - 10), pd->cwd);
		if ((slash = strrchr(parent, '/')))
			slash[slash == parent] = 0;
		if ((r = ck__need(p->pid, "the directory of its removed working directory", parent, r > 0)) < 0)
			return r;
	} else if ((r = ck__need(p->pid, "its working directory", pd->cwd, r > 0)) < 0) {
		return r;
	}
	for (uint32_t k = 0; k < pd->nfds; k++) {
		struct ck_pd_fd *f = &pd->fds[k];
		char what[64];
		if (pm->n && (r = ck__map_fd(pm, f)) < 0)
			return r;
		if (f->kind != CK_FD_FILE || ((f->xflags & CK_PD_FD_STDIO_FILE) && f->fd <= 2))
			continue; /* ckrun's stdio: the new ckrun's own descriptor stands for it */
		if (ck_fd_is_proc_file(f) || ck_fd_removed_dir(f))
			continue; /* the job's own /proc: the restored process opens it; a removed directory is made */
		snprintf(what, sizeof(what), "descriptor %d:", f->fd);
		if ((r = ck__written_gone(p->pid, f)) < 0 ||
		    (r = ck__need(p->pid, what, f->path, f->xflags & CK_PD_FD_MAPPED)) < 0)
			return r;
	}
	for (size_t k = 0; k < p->nregions; k++) {
		struct ck_region *rg = &p->regions[k];
		int mapped = 0;
		if (pm->n && (rg->flags & CK_REG_FILE) && !(rg->flags & CK_REG_SYSV) &&
		    (mapped = ck__map_str(pm, &rg->path, rg->flags & CK_REG_DELETED)) < 0)
			return mapped;
		if (ck__region_needed(rg) && (r = ck__need(p->pid, "the file it maps shared,", rg->path, mapped)) < 0)
			return r;
	}
	return 0;
}

int ck_mappath_restore(const struct ck_pathmap *pm, struct ck_manifest *m, struct ck_procdesc **pds)
{
	int r = 0;

	ck__gone_written = 0;
	for (size_t i = 0; i < m->nprocs && r >= 0; i++)
		if ((r = ck__restore_proc(pm, &m->procs[i], pds[i])) < 0 && r != -ENXIO && r != -ESTALE)
			ck_err_wrap("process %d", m->procs[i].pid);
	for (size_t i = 0; i < m->nfiles && r >= 0 && pm->n; i++) /* files whose pages regions map */
		r = ck__map_str(pm, &m->files[i].path, 0);
	if (r >= 0 && pm->n)
		r = ck__map_str(pm, &m->cwd, 0);
	if (r == -ENOMEM)
		ck_err_set("out of memory");
	return r < 0 ? r : 0;
}
