/* Error handlers of the predefined communicators: set in the agent's real
 * MPI too (a failing call then returns its code to the program instead of
 * aborting), remembered here for MPI_Comm_get_errhandler. */
#include <stdio.h>
#include <string.h>

#include "plugins/mpi/standin/sti.h"

int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler eh)
{
	const char *fn = "MPI_Comm_set_errhandler";
	struct ck_mpi_req *r;
	int c, e, rc;

	ck__sti_need_init(fn);
	c = ck__sti_comm(fn, comm);
	e = ck__sti_errh(fn, eh);
	r = ck__sti_begin(fn, CK_W_ERRHANDLER);
	r->comm = c;
	r->rop = e;
	rc = ck__sti_call(fn, r);
	ck__sti_end(r);
	if (rc == MPI_SUCCESS)
		ck__sti.errh[c] = e;
	return rc;
}

int MPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler *eh)
{
	ck__sti_need_init("MPI_Comm_get_errhandler");
	*eh = ck__sti_errh_handle(ck__sti.errh[ck__sti_comm("MPI_Comm_get_errhandler", comm)]);
	return MPI_SUCCESS;
}

int MPI_Errhandler_free(MPI_Errhandler *eh)
{
	(void)ck__sti_errh("MPI_Errhandler_free", *eh); /* predefined: nothing to free */
	*eh = MPI_ERRHANDLER_NULL;
	return MPI_SUCCESS;
}

/* Texts and classes are the real library's, asked of the agent. */
static int error_info(const char *fn, int code, char *text, int *len, int *cls)
{
	struct ck_mpi_req *r;
	int rc;

	ck__sti_need_init(fn);
	r = ck__sti_begin(fn, CK_W_ERROR_STRING);
	r->tag = code;
	rc = ck__sti_call(fn, r);
	if (rc == MPI_SUCCESS && text) {
		snprintf(text, MPI_MAX_ERROR_STRING, "%s", (const char *)r->inl);
		*len = (int)strlen(text);
	}
	if (rc == MPI_SUCCESS && cls)
		*cls = r->src;
	ck__sti_end(r);
	return rc;
}

int MPI_Error_string(int code, char *text, int *len)
{
	return error_info("MPI_Error_string", code, text, len, NULL);
}

int MPI_Error_class(int code, int *cls)
{
	return error_info("MPI_Error_class", code, NULL, NULL, cls);
}
