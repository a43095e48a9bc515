"""Benchmark: the milestone MLP trained with tinytorch and with PyTorch on the CPU, in one run.

    PYTHONPATH=build/reference .venv/bin/python benchmarks/mlp.py   # or: make bench

Same model (784-256-128-10, ReLU), loss, optimizer (Adam, lr 1e-3), batch size (128), data
(datasets/mnist_10k_2k.npz, standardised) and batch order for both. Each epoch is timed on its own; the
report gives the median seconds per training epoch of each framework, their ratio, and the test accuracy
each reaches. The machine is shared and noisy: trust the ratio of medians, not a single time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "milestones"))
from mlp import mnist  # noqa: E402  the milestone's own data preparation

import tinytorch as tt  # noqa: E402


def orders(n: int, epochs: int, batch_size: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [np.array_split(order, range(batch_size, n, batch_size)) for order in
            (rng.permutation(n) for _ in range(epochs))]


def run_tinytorch(train, test, batches, seed):
    tt.manual_seed(seed)
    model = tt.nn.Sequential(tt.nn.Linear(784, 256), tt.nn.ReLU(), tt.nn.Linear(256, 128), tt.nn.ReLU(),
                             tt.nn.Linear(128, 10))
    optimizer = tt.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = tt.nn.CrossEntropyLoss()
    seconds = []
    for epoch in batches:
        model.train()
        start = time.perf_counter()
        for index in epoch:
            optimizer.zero_grad()
            loss = loss_fn(model(tt.Tensor(train[0][index])), train[1][index])
            loss.backward()
            optimizer.step()
        seconds.append(time.perf_counter() - start)
    model.eval()
    with tt.no_grad():
        logits = model(tt.Tensor(test[0])).numpy()
    return seconds, float((logits.argmax(axis=1) == test[1]).mean())


def run_torch(train, test, batches, seed):
    import torch

    torch.manual_seed(seed)
    nn = torch.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.from_numpy(train[0]), torch.from_numpy(train[1])
    seconds = []
    for epoch in batches:
        model.train()
        start = time.perf_counter()
        for index in epoch:
            index = torch.from_numpy(index)
            optimizer.zero_grad()
            loss = loss_fn(model(x[index]), y[index])
            loss.backward()
            optimizer.step()
        seconds.append(time.perf_counter() - start)
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(test[0])).numpy()
    return seconds, float((logits.argmax(axis=1) == test[1]).mean()), torch.__version__, torch.get_num_threads()


def main(argv=None) -> int:
    options = argparse.ArgumentParser(description="tinytorch vs PyTorch on the milestone MLP")
    options.add_argument("--epochs", type=int, default=5)
    options.add_argument("--seed", type=int, default=0)
    args = options.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: `.venv/bin/pip install -e '.[bench]'` (or `make bench`)", file=sys.stderr)
        return 2
    train, test = mnist()
    batches = orders(len(train[0]), args.epochs, 128, args.seed)
    ours, our_accuracy = run_tinytorch(train, test, batches, args.seed)
    theirs, their_accuracy, version, threads = run_torch(train, test, batches, args.seed)
    mine, other = statistics.median(ours), statistics.median(theirs)
    print(f"MLP 784-256-128-10, Adam, batch 128, {len(batches[0])} steps per epoch, {args.epochs} epochs")
    print(f"tinytorch ({Path(tt.__file__).parent}): median {mine:.3f} s per epoch, "
          f"test accuracy {our_accuracy:.2%}")
    print(f"PyTorch {version} ({threads} threads): median {other:.3f} s per epoch, test accuracy {their_accuracy:.2%}")
    print(f"ratio tinytorch / PyTorch: {mine / other:.2f}x the time per epoch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
