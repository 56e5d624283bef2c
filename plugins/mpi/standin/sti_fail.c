/* The stand-in's one-line failures: a call it does not support, a handle it
 * does not know, no agent. The program ends with a documented status; the
 * agent sees it and aborts the whole job with the same status. */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "plugins/mpi/standin/sti.h"

void ck__sti_vdie(const char *fn, int flush, const char *fmt, va_list ap)
{
	char why[256];

	vsnprintf(why, sizeof(why), fmt, ap);
	if (ck__sti.inited)
		fprintf(stderr, "ckrun-mpi: rank %d: %s: %s\n", ck__sti.rank, fn, why);
	else
		fprintf(stderr, "ckrun-mpi: %s: %s\n", fn, why);
	if (flush)
		fflush(NULL);
	_exit(CK_MPI_EXIT_UNSUPPORTED);
}

void ck__sti_die(const char *fn, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ck__sti_vdie(fn, 1, fmt, ap);
}

void ck__sti_unsupported(const char *fn)
{
	ck__sti_die(fn, "not supported by ckrun's MPI stand-in (exit %d)", CK_MPI_EXIT_UNSUPPORTED);
}
