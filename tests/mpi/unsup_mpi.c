/* Calls MPI_Comm_dup, which the stand-in does not support (yet): through
 * the agents it must end the job with one line naming the function. Bare,
 * it prints the duplicate's size. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	MPI_Comm dup;
	int size;

	MPI_Init(&argc, &argv);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Comm_size(dup, &size);
	printf("dup size %d\n", size);
	MPI_Finalize();
	return 0;
}
