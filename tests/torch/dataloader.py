#!/usr/bin/env python3
"""dataloader: a PyTorch training loop fed by a DataLoader with worker
processes, PyTorch's default set-up (workers exit and are made again every
epoch; batches come back through shared memory and descriptors passed over
UNIX sockets, under a listener in a temporary directory of its own).

Prints a line per epoch (its summed loss) and, at the end, a digest of the
final parameters: bit-identical to a bare run's only if every step ran once,
in order, from the state it had.

"fds": 4 workers, batches of 8, 4 batches prefetched per worker: many
descriptors passed (the file_descriptor sharing strategy, Linux's default,
named here: each batch's tensors go as shared-memory files over the
workers' UNIX sockets), so that a round may find some in flight.

"inline": the same training with no workers (num_workers=0): the main
process alone, for make bench's comparison.

Usage: python3 dataloader.py EPOCHS [default|persistent|fds|inline]
"""
import os
import sys

# First of all: the suites' proof of a restore (silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "origin"))
import origin  # noqa: E402,F401

import hashlib  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

torch.manual_seed(0)
torch.set_num_threads(1)
X = torch.randn(2048, 32)
Y = (X.sum(1, keepdim=True) > 0).float()
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
lossf = torch.nn.BCEWithLogitsLoss()
g = torch.Generator()
g.manual_seed(1)
how = sys.argv[2] if len(sys.argv) > 2 else "default"
if how == "fds":
    torch.multiprocessing.set_sharing_strategy("file_descriptor")
    dl = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=True, num_workers=4, generator=g,
                    prefetch_factor=4, pin_memory=False)
elif how == "inline":
    dl = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True, num_workers=0, generator=g)
else:
    dl = DataLoader(TensorDataset(X, Y), batch_size=64, shuffle=True, num_workers=2, generator=g,
                    persistent_workers=how == "persistent", pin_memory=False)
for epoch in range(int(sys.argv[1])):
    tot = 0.0
    for xb, yb in dl:
        opt.zero_grad()
        loss = lossf(model(xb), yb)
        loss.backward()
        opt.step()
        tot += loss.item()
        time.sleep(0.01 if how != "fds" else 0.001)  # a step of a real job takes a while: room for a checkpoint
    print("epoch", epoch, "%.6f" % tot, flush=True)
h = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters()))
print("final", h.hexdigest()[:16], flush=True)
