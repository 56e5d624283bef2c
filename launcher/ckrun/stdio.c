/* ckrun's stdio in the job: which descriptors of the job's processes are
 * the descriptors 0-2 they inherited from this ckrun (or, after a restart,
 * were given by it). At the next restart they become the new ckrun's: the
 * job writes to whoever runs it now.
 *
 * ckrun decides it, at every round, against its own descriptors: the job
 * cannot, since after a restart its idea of ckrun's stdio would be the
 * first ckrun's, and the new ckrun's pipe or log would be taken for one of
 * the job's own (output into a pipe nobody reads after a second restart,
 * an earlier run's log written over). At a restore (ck_stdio_remake)
 * the job's stdio descriptors become the new ckrun's. */
#include <fcntl.h>
#include <sys/stat.h>

#include "launcher/ckrun/ckrun.h"
#include "launcher/ckrun/kinds.h"

void ck_stdio_record(struct ckrun *c)
{
	for (int fd = 0; fd < 3; fd++) {
		struct stat st;
		c->stdio_ok[fd] = fstat(fd, &st) == 0;
		c->stdio_dev[fd] = c->stdio_ok[fd] ? (uint64_t)st.st_dev : 0;
		c->stdio_ino[fd] = c->stdio_ok[fd] ? (uint64_t)st.st_ino : 0;
	}
}

/* Which of ckrun's descriptors 0-2 the file (dev, ino) is; -1 if none. */
static int ck__stdio_which(const struct ckrun *c, int fd, uint64_t dev, uint64_t ino)
{
	/* the same number first: stdout and stderr are often one file */
	if (fd >= 0 && fd < 3 && c->stdio_ok[fd] && c->stdio_dev[fd] == dev && c->stdio_ino[fd] == ino)
		return fd;
	for (int i = 0; i < 3; i++)
		if (c->stdio_ok[i] && c->stdio_dev[i] == dev && c->stdio_ino[i] == ino)
			return i;
	return -1;
}

void ck_stdio_mark(const struct ckrun *c, struct ck_procdesc *pd)
{
	for (uint32_t i = 0; i < pd->nfds; i++) {
		struct ck_pd_fd *f = &pd->fds[i];
		int which = ck__stdio_which(c, f->fd, f->dev, f->ino);

		f->xflags &= ~(uint32_t)CK_PD_FD_STDIO_FILE;
		if (which < 0)
			continue;
		/* A duplicate follows the descriptor it duplicates, except
		 * ckrun's own 0-2 handed down as one open file (a terminal
		 * opened once by a login shell): each becomes the new ckrun's
		 * of its own number, or a resume with another stdin would take
		 * the job's stdout and stderr with it. */
		if (f->kind == CK_FD_DUP && !(f->fd <= 2 && which == f->fd && !S_ISREG(f->mode)))
			continue;
		if (S_ISREG(f->mode)) {
			/* saved as the file it is; at a restart the new ckrun's
			 * if that one does not hold it (files.c: ck_file_remake) */
			if (f->fd <= 2 && which == f->fd)
				f->xflags |= CK_PD_FD_STDIO_FILE;
			continue;
		}
		/* a terminal, pipe or socket of ckrun's: nothing of it is saved,
		 * the restart gives the new ckrun's descriptor `which` */
		f->kind = CK_FD_STDIO;
		f->peer = -1;
		f->u64[0] = (uint64_t)which + 1;
	}
}

/* Restore: the new ckrun's descriptor of the same number, or the one the
 * round found it was (u64[0] - 1: a dup of stdout at 5); /dev/null if
 * the new ckrun has none. */
int ck_stdio_remake(struct ck_reader *rd, struct ck_objs *o, const struct ck_pd_fd *f, int *fd)
{
	(void)rd;
	(void)o;
	*fd = fcntl(f->kind == CK_FD_STDIO && f->u64[0] >= 1 && f->u64[0] <= 3 ? (int)f->u64[0] - 1 : f->fd,
		    F_DUPFD_CLOEXEC, 3);
	if (*fd < 0)
		*fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	return 0;
}
