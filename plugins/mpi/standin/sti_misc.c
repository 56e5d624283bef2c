/* Calls answered in the program with no agent: names of communicators,
 * addresses, the library's version string, profiling control, comparison
 * of communicators by their members. */
#include <stdio.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

static char names[CK_MAX_COMMS][MPI_MAX_OBJECT_NAME];

int MPI_Get_library_version(char *version, int *len)
{
	int n = snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
			 "ckrun MPI stand-in for Open MPI %d.%d.%d (calls made by the rank's agent)",
			 OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);

	*len = n < MPI_MAX_LIBRARY_VERSION_STRING ? n : MPI_MAX_LIBRARY_VERSION_STRING - 1;
	return MPI_SUCCESS;
}

int MPI_Get_address(const void *location, MPI_Aint *address)
{
	*address = (MPI_Aint)location;
	return MPI_SUCCESS;
}

int MPI_Pcontrol(const int level, ...)
{
	(void)level;
	return MPI_SUCCESS;
}

int MPI_Comm_set_name(MPI_Comm comm, const char *name)
{
	snprintf(names[ck__sti_comm("MPI_Comm_set_name", comm)], MPI_MAX_OBJECT_NAME, "%s", name);
	return MPI_SUCCESS;
}

int MPI_Comm_get_name(MPI_Comm comm, char *name, int *len)
{
	int c = ck__sti_comm("MPI_Comm_get_name", comm);
	const char *n = names[c];

	if (!*n)
		n = c == CK_COMM_comm_world ? "MPI_COMM_WORLD" : c == CK_COMM_comm_self ? "MPI_COMM_SELF" : "";
	snprintf(name, MPI_MAX_OBJECT_NAME, "%s", n);
	*len = (int)strlen(name);
	return MPI_SUCCESS;
}

/* IDENT: the same handle; CONGRUENT: the same members in the same order;
 * SIMILAR: the same members; UNEQUAL otherwise. */
int MPI_Comm_compare(MPI_Comm a, MPI_Comm b, int *result)
{
	MPI_Group ga, gb;
	int na, nb, rc;

	if (ck__sti_comm("MPI_Comm_compare", a) == ck__sti_comm("MPI_Comm_compare", b)) {
		*result = MPI_IDENT;
		return MPI_SUCCESS;
	}
	if ((rc = MPI_Comm_group(a, &ga)) != MPI_SUCCESS)
		return rc;
	if ((rc = MPI_Comm_group(b, &gb)) != MPI_SUCCESS) {
		MPI_Group_free(&ga);
		return rc;
	}
	MPI_Group_size(ga, &na);
	MPI_Group_size(gb, &nb);
	*result = MPI_UNEQUAL;
	if (na == nb) {
		int same_order = 1, all_in = 1;

		for (int i = 0; i < na; i++) {
			int r = MPI_UNDEFINED;

			MPI_Group_translate_ranks(ga, 1, &i, gb, &r);
			same_order &= r == i;
			all_in &= r != MPI_UNDEFINED;
		}
		*result = same_order ? MPI_CONGRUENT : all_in ? MPI_SIMILAR : MPI_UNEQUAL;
	}
	MPI_Group_free(&ga);
	MPI_Group_free(&gb);
	return MPI_SUCCESS;
}
