"""The training curve every milestone draws: the loss of each batch, faint, and its running mean, so that a
short run (one epoch, 250 steps) still shows a curve, not one point per epoch."""

from __future__ import annotations

import numpy as np


def pyplot():
    """matplotlib's pyplot on the Agg backend (files only, no window), imported when a run ends."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def running_mean(values, window: int) -> np.ndarray:
    """At each point the mean of the `window` values centred on it (of fewer at the two ends): centred, so
    that the curve does not lag behind a loss that falls fast."""
    sums = np.concatenate([[0.0], np.cumsum(np.asarray(values, dtype=np.float64))])
    starts = np.clip(np.arange(len(values)) - window // 2, 0, len(values))
    ends = np.clip(np.arange(len(values)) - window // 2 + window, 0, len(values))
    return (sums[ends] - sums[starts]) / (ends - starts)


def plot_batch_losses(axis, losses, per_unit: int = 1, batch: str = "batch") -> None:
    """Each batch's loss and its running mean over a tenth of the run (at most 50 batches), against batches
    (per_unit=1) or against epochs (per_unit = batches per epoch); `batch` is what the legend calls one."""
    window = max(1, min(50, len(losses) // 10))
    x = np.arange(1, len(losses) + 1) / per_unit
    axis.plot(x, losses, color="C0", alpha=0.3, linewidth=0.8, label=f"each {batch}")
    axis.plot(x, running_mean(losses, window), color="C0", label=f"running mean over {window}")


def save_classifier_curves(path, batch_losses, batches_per_epoch: int, accuracies, title: str) -> None:
    """The MLP's and the CNN's picture: each batch's training loss against epochs, and the test accuracy
    before training (epoch 0) and after each epoch."""
    plt = pyplot()
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    plot_batch_losses(left, batch_losses, per_unit=batches_per_epoch)
    left.set(xlabel="epoch", ylabel="cross-entropy", title="training loss")
    left.legend()
    right.plot(range(len(accuracies)), [100 * a for a in accuracies], marker="o")
    right.set(xlabel="epoch", ylabel="test accuracy (%)", title="test accuracy", xticks=range(len(accuracies)))
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
