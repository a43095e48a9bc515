"""The CNN milestone's set-up in PyTorch, one thread, for the numbers the milestone compares against.

    .venv/bin/python benchmarks/cnn_torch.py [--dataset mnist|fashion] [--epochs N] [--seed S]

Same data (the shipped subsets, scaled to [0, 1] and normalised with the training set's statistics), same
network, Adam (lr 1e-3), batch 64 shuffled each epoch; prints the test accuracy and the seconds of each
epoch. Needs the optional torch extra (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tito.datasets import load  # noqa: E402

EPOCHS = {"mnist": 5, "fashion": 8}


def main() -> int:
    import torch
    from torch import nn

    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--dataset", choices=sorted(EPOCHS), default="mnist")
    options.add_argument("--epochs", type=int, default=None)
    options.add_argument("--seed", type=int, default=0)
    args = options.parse_args()
    epochs = args.epochs or EPOCHS[args.dataset]
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    raw = load("mnist" if args.dataset == "mnist" else "fashion_mnist")
    x_train = raw["x_train"][:, None].astype(np.float32) / 255
    x_test = raw["x_test"][:, None].astype(np.float32) / 255
    mean, std = x_train.mean(), x_train.std()
    x_train, x_test = torch.from_numpy((x_train - mean) / std), torch.from_numpy((x_test - mean) / std)
    y_train, y_test = (torch.from_numpy(raw[key].astype(np.int64)) for key in ("y_train", "y_test"))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x_train, y_train), batch_size=64, shuffle=True)
    net = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    seconds = []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        net.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss_fn(net(images), labels).backward()
            optimizer.step()
        net.eval()
        with torch.no_grad():
            accuracy = (net(x_test).argmax(1) == y_test).float().mean().item()
        seconds.append(time.perf_counter() - start)
        print(f"epoch {epoch}/{epochs}: test accuracy {accuracy:.2%}, {seconds[-1]:.1f} s", flush=True)
    print(f"PyTorch {torch.__version__}, {args.dataset}: {accuracy:.2%} after {epochs} epochs, median "
          f"{statistics.median(seconds):.2f} s per epoch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
