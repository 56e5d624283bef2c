#!/usr/bin/env python3
"""selfsave: a PyTorch training loop that writes its own checkpoints, as
many jobs do: after every epoch, torch.save of the epoch, the model's and
the optimizer's state into $TORCH_SAVES/epoch-NNN.pt (written under a
temporary name, then renamed), and the same as last.pt.

ckrun does not roll files back: after a resume from a checkpoint taken at
epoch k, the directory holds what the job wrote before the kill (epochs
past k too); the resumed job writes those epochs again, the same bytes of
state, and the files end as a bare run leaves them.

Prints a line per epoch (its summed loss) and a digest of the final
parameters. "check DIR" loads every file of DIR and prints, per file, its
epoch and the digest of the parameters it holds (what a user restarting
from it would get).

Usage: python3 selfsave.py EPOCHS | check DIR
"""
import os
import sys

# First of all: the suites' proof of a restore (silent in a bare run).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apps", "origin"))
import origin  # noqa: E402,F401

import hashlib  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402


def make_model():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))


def digest(params):
    return hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in params)).hexdigest()[:16]


def check(top):
    for name in sorted(os.listdir(top)):
        if not name.endswith(".pt"):
            continue
        st = torch.load(os.path.join(top, name))
        model = make_model()
        model.load_state_dict(st["model"])
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        opt.load_state_dict(st["opt"])  # a restart would load it too
        print(name, "epoch", st["epoch"], digest(model.parameters()))


def train(epochs, top):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    X = torch.randn(1024, 32)
    Y = (X.sum(1, keepdim=True) > 0).float()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lossf = torch.nn.BCEWithLogitsLoss()
    g = torch.Generator()
    g.manual_seed(1)
    for epoch in range(epochs):
        tot = 0.0
        for idx in torch.randperm(len(X), generator=g).split(64):
            opt.zero_grad()
            loss = lossf(model(X[idx]), Y[idx])
            loss.backward()
            opt.step()
            tot += loss.item()
            time.sleep(0.01)  # a step of a real job takes a while: room for a checkpoint
        st = {"epoch": epoch, "model": model.state_dict(), "opt": opt.state_dict()}
        for name in ("epoch-%03d.pt" % epoch, "last.pt"):
            tmp = os.path.join(top, name + ".tmp")
            torch.save(st, tmp)
            os.replace(tmp, os.path.join(top, name))
        print("epoch", epoch, "%.6f" % tot, flush=True)
    print("final", digest(model.parameters()), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        saves = os.environ["TORCH_SAVES"]
        os.makedirs(saves, exist_ok=True)
        train(int(sys.argv[1]), saves)
