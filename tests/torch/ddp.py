#!/usr/bin/env python3
"""ddp: DistributedDataParallel over gloo (CPU), started the two ways users
start it: torch.multiprocessing.spawn from this process ("spawn"), or
torch.distributed.run, torchrun's own code, run inside this process
("torchrun": its agent, its TCPStore and the ranks it starts are all part
of the job). Ranks talk over loopback TCP (the store, gloo's pairs).

Rank 0 prints a line per epoch (the loss summed over the ranks, through an
allreduce) and, at the end, a digest of the final parameters: bit-identical
to a bare run's only if every step ran once, in order, on every rank.

Usage: python3 ddp.py EPOCHS spawn|torchrun [RANKS]
"""
import os
import sys

# First of all: the suites' proof of a restore (silent in a bare run; the
# ranks, its descendants, stay quiet).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "origin"))
import origin  # noqa: E402,F401

import hashlib  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

STEPS = 24  # per epoch and rank


def train(rank, world, epochs):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    lossf = torch.nn.BCEWithLogitsLoss()
    g = torch.Generator()
    g.manual_seed(100 + rank)  # each rank its own shard of synthetic data
    for epoch in range(epochs):
        tot = torch.zeros(1)
        for _ in range(STEPS):
            x = torch.randn(64, 32, generator=g)
            y = (x.sum(1, keepdim=True) > 0).float()
            opt.zero_grad()
            loss = lossf(model(x), y)
            loss.backward()  # gradients averaged over the ranks by DDP
            opt.step()
            tot += loss.detach()
            time.sleep(0.01)  # a step of a real job takes a while: room for a checkpoint
        dist.all_reduce(tot)
        if rank == 0:
            print("epoch", epoch, "%.6f" % tot.item(), flush=True)
    if rank == 0:
        h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
        print("final", h.hexdigest()[:16], flush=True)
    dist.destroy_process_group()


def spawned(rank, world, epochs):
    train(rank, world, epochs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    epochs = int(sys.argv[1])
    how = sys.argv[2]
    world = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    if how == "rank":  # a rank torchrun started (this file again)
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), epochs)
    elif how == "spawn":
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(free_port())
        torch.multiprocessing.spawn(spawned, args=(world, epochs), nprocs=world, join=True)
    elif how == "torchrun":
        from torch.distributed.elastic.multiprocessing import api
        from torch.distributed.run import main as torchrun
        # Debian 12's torch 1.13 under Python 3.11: Std.from_str("0") (the
        # default of --redirects and --tee) finds no member for 0 and
        # returns None, which torchrun then fails on. Not ckrun's business:
        # the same shim a user of this torch needs.
        from_str = api.Std.from_str
        api.Std.from_str = classmethod(lambda cls, vm: cls.NONE if vm == "0" else from_str(vm))
        torchrun(["--standalone", "--nnodes=1", "--nproc_per_node=%d" % world, "--max_restarts=0",
                  os.path.abspath(__file__), str(epochs), "rank"])
    else:
        sys.exit("ddp.py: unknown start %r (spawn, torchrun)" % how)


if __name__ == "__main__":
    main()
