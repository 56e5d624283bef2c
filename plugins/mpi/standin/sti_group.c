/* Groups, kept in the program: a group is the list of its members'
 * MPI_COMM_WORLD ranks (what a restart on another world will need), so
 * Group_incl, Group_translate_ranks, Group_size/rank and Group_free need no
 * agent; MPI_Comm_group asks the agent once for a made communicator's
 * members. */
#include <stdlib.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

struct ck__group {
	uint32_t magic;
	int n;
	int world[]; /* world rank of member i */
};

#define GROUP_MAGIC 0x636b6772u /* "ckgr" */

static struct ck__group *new_group(const char *fn, int n)
{
	struct ck__group *g = malloc(sizeof(*g) + (size_t)(n > 0 ? n : 0) * sizeof(int));

	if (!g)
		ck__sti_die(fn, "out of memory");
	g->magic = GROUP_MAGIC;
	g->n = n;
	return g;
}

/* The group behind a handle: MPI_GROUP_EMPTY as an empty one (in *tmp). */
static const struct ck__group *group_of(const char *fn, MPI_Group h, struct ck__group *tmp)
{
	const struct ck__group *g = (const struct ck__group *)(void *)h;

	if (h == MPI_GROUP_EMPTY) {
		tmp->magic = GROUP_MAGIC;
		tmp->n = 0;
		return tmp;
	}
	if (h == MPI_GROUP_NULL || !h || g->magic != GROUP_MAGIC)
		ck__sti_die(fn, "group %p is not one (MPI_GROUP_EMPTY or one the program made)", (void *)h);
	return g;
}

int MPI_Comm_group(MPI_Comm comm, MPI_Group *out)
{
	const char *fn = "MPI_Comm_group";
	struct ck__group *g;
	struct ck_mpi_req *r;
	int c, n, rc = MPI_SUCCESS;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	n = ck__sti_comm_size(c);
	g = new_group(fn, n);
	if (c == CK_COMM_comm_world) {
		for (int i = 0; i < n; i++)
			g->world[i] = i;
	} else if (c == CK_COMM_comm_self) {
		g->world[0] = ck__sti.rank;
	} else {
		if (2 * (size_t)n * sizeof(int) > ck__sti.scratch)
			ck__sti_die(fn, "a group of %d does not fit the arena", n);
		r = ck__sti_begin(fn, CK_W_COMM_MEMBERS);
		r->comm = c;
		rc = ck__sti_call(fn, r);
		if (rc == MPI_SUCCESS)
			memcpy(g->world, ck__sti.ch.arena, (size_t)n * sizeof(int));
		ck__sti_end(r);
	}
	if (rc != MPI_SUCCESS) {
		free(g);
		return rc;
	}
	*out = (MPI_Group)(void *)g;
	return MPI_SUCCESS;
}

int MPI_Group_size(MPI_Group h, int *size)
{
	struct ck__group tmp;

	*size = group_of("MPI_Group_size", h, &tmp)->n;
	return MPI_SUCCESS;
}

int MPI_Group_rank(MPI_Group h, int *rank)
{
	struct ck__group tmp;
	const struct ck__group *g = group_of("MPI_Group_rank", h, &tmp);

	*rank = MPI_UNDEFINED;
	for (int i = 0; i < g->n; i++)
		if (g->world[i] == ck__sti.rank)
			*rank = i;
	return MPI_SUCCESS;
}

int MPI_Group_incl(MPI_Group h, int n, const int ranks[], MPI_Group *out)
{
	struct ck__group tmp, *g;
	const struct ck__group *from = group_of("MPI_Group_incl", h, &tmp);

	if (n < 0 || n > from->n)
		return MPI_ERR_ARG;
	for (int i = 0; i < n; i++)
		if (ranks[i] < 0 || ranks[i] >= from->n)
			return MPI_ERR_RANK;
	if (!n) {
		*out = MPI_GROUP_EMPTY;
		return MPI_SUCCESS;
	}
	g = new_group("MPI_Group_incl", n);
	for (int i = 0; i < n; i++)
		g->world[i] = from->world[ranks[i]];
	*out = (MPI_Group)(void *)g;
	return MPI_SUCCESS;
}

int MPI_Group_translate_ranks(MPI_Group h1, int n, const int r1[], MPI_Group h2, int r2[])
{
	struct ck__group t1, t2;
	const struct ck__group *g1 = group_of("MPI_Group_translate_ranks", h1, &t1);
	const struct ck__group *g2 = group_of("MPI_Group_translate_ranks", h2, &t2);

	for (int i = 0; i < n; i++) {
		if (r1[i] == MPI_PROC_NULL) {
			r2[i] = MPI_PROC_NULL;
			continue;
		}
		if (r1[i] < 0 || r1[i] >= g1->n)
			return MPI_ERR_RANK;
		r2[i] = MPI_UNDEFINED;
		for (int j = 0; j < g2->n; j++)
			if (g2->world[j] == g1->world[r1[i]])
				r2[i] = j;
	}
	return MPI_SUCCESS;
}

int MPI_Group_free(MPI_Group *h)
{
	struct ck__group tmp;

	if (*h != MPI_GROUP_EMPTY) {
		(void)group_of("MPI_Group_free", *h, &tmp);
		((struct ck__group *)(void *)*h)->magic = 0;
		free((void *)*h);
	}
	*h = MPI_GROUP_NULL;
	return MPI_SUCCESS;
}
