/* Objects a restore makes once and hands to every process that had them
 * (kinds.h): pipes, FIFO anchors, deleted files and memfds, shared memory
 * objects, keyed by the saved (dev, ino); and the plan of one process's
 * descriptors. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/ckrun/kinds.h"

struct ck_obj *ck_obj_find(struct ck_objs *o, uint32_t kind, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].kind == kind && o->v[i].dev == dev && o->v[i].ino == ino)
			return &o->v[i];
	return NULL;
}

struct ck_obj *ck_obj_file(struct ck_objs *o, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < o->n; i++)
		if ((o->v[i].kind == CK_OBJ_SHM || o->v[i].kind == CK_FD_MEMFD || o->v[i].kind == CK_FD_DELETED) &&
		    o->v[i].dev == dev && o->v[i].ino == ino)
			return &o->v[i];
	return NULL;
}

/* A read-write descriptor of the same file (mappings need one). */
int ck_rdwr_again(int fd)
{
	char p[64];
	int again;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	again = open(p, O_RDWR | O_CLOEXEC);
	return again >= 0 ? again : fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

struct ck_obj *ck_obj_add(struct ck_objs *o, uint32_t kind, uint64_t dev, uint64_t ino)
{
	struct ck_obj *n = realloc(o->v, (o->n + 1) * sizeof(*n));

	if (!n)
		return NULL;
	o->v = n;
	n += o->n++;
	memset(n, 0, sizeof(*n));
	n->kind = kind;
	n->dev = dev;
	n->ino = ino;
	n->fd[0] = n->fd[1] = -1;
	return n;
}

void ck_objs_free(struct ck_objs *o)
{
	for (size_t i = 0; i < o->n; i++)
		for (int k = 0; k < 2; k++)
			if (o->v[i].fd[k] >= 0)
				close(o->v[i].fd[k]);
	free(o->v);
	o->v = NULL;
	o->n = 0;
}

void ck_fdplan_free(struct ck_fdplan *pl)
{
	for (uint32_t i = 0; i < pl->n; i++)
		close(pl->fds[i]);
	free(pl->fds);
	free(pl->targets);
}
