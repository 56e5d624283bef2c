/* Stand-in handles to wire numbers. A predefined handle is the address of
 * an ompi_mpi_* object; the program and this library agree on it because
 * the dynamic linker binds this library's references to the program's copy
 * when the program holds one (copy relocation). */
#include "plugins/mpi/standin/sti.h"

#define COMM_ADDR(n) (void *)&ompi_mpi_##n,
#define TYPE_ADDR(n, s) (void *)&ompi_mpi_##n,
#define TYPE_SIZE(n, s) s,
#define OP_ADDR(n) (void *)&ompi_mpi_##n,
#define EH_ADDR(n) (void *)&ompi_mpi_##n,

static int find(void *const *tab, int n, const void *h)
{
	for (int i = 0; i < n; i++)
		if (tab[i] == h)
			return i;
	return -1;
}

int ck__sti_comm(const char *fn, MPI_Comm c)
{
	void *const tab[] = { CK_MPI_COMMS(COMM_ADDR) };
	int i = find(tab, CK_NCOMMS, c);

	for (int k = CK_NCOMMS; i < 0 && k < CK_MAX_COMMS; k++)
		if (ck__sti.comms[k] && (void *)ck__sti.comms[k] == (void *)c)
			i = k;
	if (i < 0)
		ck__sti_die(fn, "communicator %p is not one (MPI_COMM_WORLD, MPI_COMM_SELF or one the program made)",
			    (void *)c);
	return i;
}

int ck__sti_type(const char *fn, MPI_Datatype t, size_t *size)
{
	void *const tab[] = { CK_MPI_TYPES(TYPE_ADDR) };
	static const size_t sizes[] = { CK_MPI_TYPES(TYPE_SIZE) };
	int i = find(tab, CK_NTYPES, t);

	if (i < 0 && ck__sti_is_derived(t))
		ck__sti_die(fn, "a derived datatype is not supported here (yet: Send, Recv, Isend, Irecv, Sendrecv, Bcast only)");
	if (i < 0)
		ck__sti_die(fn, "datatype %p is not supported (predefined C types, contiguous and vector)", (void *)t);
	*size = sizes[i];
	return i;
}

int ck__sti_op(const char *fn, MPI_Op op)
{
	void *const tab[] = { CK_MPI_OPS(OP_ADDR) };
	int i = find(tab, CK_NOPS, op);

	if (i < 0)
		ck__sti_die(fn, "reduction op %p is not supported (predefined ops only)", (void *)op);
	return i;
}

int ck__sti_errh(const char *fn, MPI_Errhandler eh)
{
	void *const tab[] = { CK_MPI_ERRHANDLERS(EH_ADDR) };
	int i = find(tab, CK_NEHS, eh);

	if (i < 0)
		ck__sti_die(fn, "error handler %p is not supported (MPI_ERRORS_ARE_FATAL and MPI_ERRORS_RETURN only)",
			    (void *)eh);
	return i;
}

MPI_Errhandler ck__sti_errh_handle(int i)
{
	void *const tab[] = { CK_MPI_ERRHANDLERS(EH_ADDR) };

	return (MPI_Errhandler)tab[i];
}

int ck__sti_comm_rank(int comm)
{
	if (comm >= CK_NCOMMS && comm < CK_MAX_COMMS)
		return ck__sti.comms[comm]->rank;
	return comm == CK_COMM_comm_world ? ck__sti.rank : 0;
}

int ck__sti_comm_size(int comm)
{
	if (comm >= CK_NCOMMS && comm < CK_MAX_COMMS)
		return ck__sti.comms[comm]->size;
	return comm == CK_COMM_comm_world ? ck__sti.size : 1;
}

MPI_Comm ck__sti_comm_handle(int id)
{
	void *const tab[] = { CK_MPI_COMMS(COMM_ADDR) };

	if (id >= 0 && id < CK_NCOMMS)
		return (MPI_Comm)tab[id];
	return id < CK_MAX_COMMS ? (MPI_Comm)(void *)ck__sti.comms[id] : MPI_COMM_NULL;
}

int MPI_Type_size(MPI_Datatype t, int *size)
{
	size_t s, e;

	if (!ck__sti_type_geometry(t, &s, &e))
		ck__sti_type("MPI_Type_size", t, &s);
	*size = (int)s;
	return MPI_SUCCESS;
}

/* Lower bound 0; a predefined type's extent is its size. The true extent of
 * a vector is its extent (no padding at either end). */
int MPI_Type_get_extent(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *extent)
{
	size_t s, e;

	if (!ck__sti_type_geometry(t, &s, &e))
		ck__sti_type("MPI_Type_get_extent", t, &s), e = s;
	*lb = 0;
	*extent = (MPI_Aint)e;
	return MPI_SUCCESS;
}

int MPI_Type_get_true_extent(MPI_Datatype t, MPI_Aint *lb, MPI_Aint *extent)
{
	size_t s, e;

	if (!ck__sti_type_geometry(t, &s, &e))
		ck__sti_type("MPI_Type_get_true_extent", t, &s), e = s;
	*lb = 0;
	*extent = (MPI_Aint)e;
	return MPI_SUCCESS;
}
