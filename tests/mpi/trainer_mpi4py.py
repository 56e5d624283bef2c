"""Data-parallel trainer with mpi4py (Debian's python3-mpi4py), unmodified:
integer (fixed-point) SGD of a linear model, gradients summed with
Comm.Allreduce on numpy buffers, the true model sent with Comm.Bcast, the
loss with Comm.Reduce; exact, so a run through the agents must print what a
bare mpirun prints. Usage: trainer_mpi4py.py [STEPS]"""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
nf, ns = 8, 32
true_w = np.zeros(nf, dtype=np.int64)
if rank == 0:
    true_w[:] = np.random.default_rng(42).integers(-1000, 1000, nf)
comm.Bcast(true_w, root=0)
x = np.random.default_rng(1000 + rank).integers(-10, 11, (ns, nf)).astype(np.int64)
y = x @ true_w
w = np.zeros(nf, dtype=np.int64)
grad_sum = np.zeros(nf, dtype=np.int64)
for step in range(steps):
    err = (x @ w) // 65536 - y
    grad = x.T @ err
    comm.Allreduce(grad, grad_sum, op=MPI.SUM)
    w -= grad_sum * 65536 // (400 * ns * size)
    loss = np.array([int(err @ err)], dtype=np.int64)
    total = np.zeros(1, dtype=np.int64)
    comm.Reduce(loss, total, op=MPI.SUM, root=0)
    if rank == 0 and (step % 20 == 0 or step == steps - 1):
        print(f"step {step} loss {total[0]} w0 {w[0]}")
comm.Barrier()
if rank == 0:
    print("ranks", size, "host", len(MPI.Get_processor_name()) > 0, "final", " ".join(str(v) for v in w))

# mpi4py's object (pickle) interface: the calls it makes underneath
# (MPI_Comm_dup of a private communicator, attributes, Mprobe/Mrecv,
# Allgather(v), Gather, Scatter, Comm_split/free) go through the stand-in too.
cfg = comm.bcast({"lr": 3, "tag": "cfg"} if rank == 0 else None, root=0)
total = comm.allreduce(rank + 1)
squares = comm.gather(rank * rank, root=0)
names = comm.allgather(f"r{rank}")
part = comm.scatter([[i] * (i + 1) for i in range(size)] if rank == 0 else None, root=0)
if rank == 0:
    got = sorted(repr(comm.recv(source=MPI.ANY_SOURCE, tag=7)) for _ in range(1, size))
else:
    comm.send({"from": rank, "w0": int(w[0])}, dest=0, tag=7)
    got = None
sub = comm.Split(rank % 2, -rank)
sub_info = (sub.Get_rank(), sub.Get_size(), sub.allreduce(rank))
sub.Free()
everything = comm.gather((cfg, total, names, part, sub_info), root=0)
if rank == 0:
    print("objects", squares, got)
    for i, e in enumerate(everything):
        print("rank", i, e)
