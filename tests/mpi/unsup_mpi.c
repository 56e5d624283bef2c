/* Calls MPI_Win_create (one-sided communication, which the stand-in does
 * not support): through the agents the job must end with one line naming
 * the function. Bare, it prints the window's size. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	static int mem[16];
	MPI_Win win;

	MPI_Init(&argc, &argv);
	MPI_Win_create(mem, sizeof(mem), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
	printf("window of %zu bytes\n", sizeof(mem));
	MPI_Win_free(&win);
	MPI_Finalize();
	return 0;
}
