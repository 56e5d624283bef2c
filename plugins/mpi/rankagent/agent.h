/* ckmpi-agent: one per MPI rank, started by mpirun. It owns the real Open
 * MPI, creates the rank's channel, starts the rank's program with the
 * stand-in libmpi.so.40 first on its library path, and makes the program's
 * MPI calls on its behalf. */
#ifndef CK_MPI_AGENT_H
#define CK_MPI_AGENT_H

#include "plugins/mpi/channel/mpi_chan.h"

/* Makes the real call for request R (data in the channel's arena) and
 * fills R's answer. Returns 1 once the program finalised, 0 otherwise. */
int ck__agent_serve(struct ck_mpi_chan *ch, struct ck_mpi_req *r);
/* The MCA settings the agent pins before MPI_Init (deterministic
 * collectives), unless the environment sets them already. */
void ck__agent_pin_mca(void);

#endif
