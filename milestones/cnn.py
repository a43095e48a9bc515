"""Milestone 2: a convolutional network learns to read digits and to tell clothes apart.

Runs on whichever `tinytorch` is first on PYTHONPATH: `tito milestone cnn` puts your exported package
there, `tito milestone cnn --reference` the reference build. Everything it calls is what you built in
01-09: the shipped datasets and your DataLoader (08), Conv2d and MaxPool2d (09), Flatten and Linear (04),
cross-entropy (05), Adam (06), and the progress bar of 07.

The set-up is fixed so that results compare: Conv(1->16, 3, padding 1)-ReLU-MaxPool(2)-Conv(16->32, 3,
padding 1)-ReLU-MaxPool(2)-Flatten-Linear(1568->10), Adam (lr 1e-3), batches of 64 shuffled by the
DataLoader, images scaled to [0, 1] and normalised with the training set's mean and standard deviation,
on the shipped subsets (10,000 training and 2,000 test images). PyTorch in exactly this set-up on a
laptop CPU reaches 96.8% on MNIST after 5 epochs and 88.65% on Fashion-MNIST after 8.

The run's lines are also written to .tito/milestones/cnn-DATASET.log, and the curves of training loss (every
batch, and its running mean) and test accuracy (before training, then after each epoch) to cnn-DATASET.png
beside it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from judging import judge, keep_freed_memory, stopped
from plotting import save_classifier_curves
from threadpoolctl import threadpool_limits

import tinytorch as tt

SETS = {  # dataset: (class in tt.datasets, epochs judged, target, PyTorch in this set-up)
    "mnist": ("MNIST", 5, 0.960, 0.968),
    "fashion": ("FashionMNIST", 8, 0.875, 0.8865),
}
BATCH = 64


def data(dataset: str):
    """(train, test) as (images (N, 1, 28, 28) float32 normalised, labels int64), from the shipped files."""
    kind = getattr(tt.datasets, SETS[dataset][0])
    train, test = kind(train=True), kind(train=False)
    scale = np.float32(1 / 255)
    x_train, x_test = (split.data[:, None].astype(np.float32) * scale for split in (train, test))
    mean, std = float(x_train.mean()), float(x_train.std())
    normalize = tt.transforms.Normalize((mean,), (std,))
    return (normalize(x_train), train.targets), (normalize(x_test), test.targets)


def model():
    nn = tt.nn
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10),
    )


def evaluate(net, loader) -> float:
    net.eval()
    right = 0
    with tt.no_grad():
        for images, labels in loader:
            right += int((net(images).numpy().argmax(axis=1) == labels.numpy()).sum())
    net.train()
    return right / len(loader.dataset)


def train(net, train_loader, test_loader, epochs: int, log) -> dict:
    loss_fn = tt.nn.CrossEntropyLoss()
    optimizer = tt.optim.Adam(net.parameters(), lr=1e-3)
    history: dict = {"train_loss": [], "test_accuracy": [], "seconds": []}  # one entry per epoch
    # for the plot: the accuracy before training (a forward pass over the test set, no draw) and every batch's loss
    history["start_accuracy"], history["batch_losses"] = evaluate(net, test_loader), []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        bar = tt.training.ProgressBar(f"epoch {epoch}/{epochs}")
        total, count = 0.0, 0
        for index, (images, labels) in enumerate(train_loader):
            optimizer.zero_grad()
            loss = loss_fn(net(images), labels)
            loss.backward()
            optimizer.step()
            value = loss.item()
            total, count = total + value * len(labels), count + len(labels)
            history["batch_losses"].append(value)
            bar(index, len(train_loader), value)
        accuracy = evaluate(net, test_loader)
        seconds = time.perf_counter() - start
        for key, value in zip(("train_loss", "test_accuracy", "seconds"), (total / count, accuracy, seconds)):
            history[key].append(value)
        log(f"epoch {epoch}/{epochs}: train loss {total / count:.4f}, test accuracy {accuracy:.2%}, {seconds:.1f} s")
    return history


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--dataset", choices=sorted(SETS), default="mnist")
    options.add_argument("--epochs", type=int, default=None, help="default: the epochs the target is judged after")
    options.add_argument("--seed", type=int, default=0)
    args = options.parse_args(argv)
    keep_freed_memory()
    name, judged, target, pytorch = SETS[args.dataset]
    epochs = judged if args.epochs is None else args.epochs

    folder = Path(".tito") / "milestones"
    folder.mkdir(parents=True, exist_ok=True)
    log_path, plot_path = folder / f"cnn-{args.dataset}.log", folder / f"cnn-{args.dataset}.png"
    with open(log_path, "w", encoding="utf-8") as log_file:
        def log(line: str) -> None:
            print(line, flush=True)
            log_file.write(line + "\n")
            log_file.flush()

        try:
            (x_train, y_train), (x_test, y_test) = data(args.dataset)
            tt.manual_seed(args.seed)
            net = model()
            data_module = tt.utils.data
            train_loader = data_module.DataLoader(data_module.TensorDataset(x_train, y_train), batch_size=BATCH,
                                                  shuffle=True)
            test_loader = data_module.DataLoader(data_module.TensorDataset(x_test, y_test), batch_size=500)
            print(net)
            log(f"{name}: training on {len(x_train):,} images, testing on {len(x_test):,}; Adam lr 1e-3, batch "
                f"{BATCH}, {epochs} epochs, seed {args.seed}; BLAS on one thread (threadpoolctl)")
            with threadpool_limits(limits=1):
                history = train(net, train_loader, test_loader, epochs, log)
        except Exception as error:
            return stopped(error)

        accuracy, seconds = history["test_accuracy"][-1], statistics.median(history["seconds"])
        accuracies = [history["start_accuracy"], *history["test_accuracy"]]
        save_classifier_curves(plot_path, history["batch_losses"], len(train_loader), accuracies,
                               f"CNN on {name}, seed {args.seed}")
        log(f"curves saved to {plot_path}, this log to {log_path}")
        return judge(log, result=accuracy, ran=epochs, judged=judged, unit="epochs", target=target, pytorch=pytorch,
                     pace=f"median {seconds:.2f} s per epoch",
                     hint="your convolution, pooling and DataLoader (`tito test 08`, `tito test 09`)")

if __name__ == "__main__":
    sys.exit(main())
