# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 Training
#
# You have every part of a neural network: tensors (01), gradients (02), activations (03), layers
# (04), losses (05) and optimizers (06). This module puts them to work. You write the loop that every
# deep-learning project runs, millions of times a day, in some form:
#
# ```
# for each epoch:
#     for each mini-batch (x, y) of the shuffled training set:
#         optimizer.zero_grad()          # forget the last batch's gradients
#         loss = loss_fn(model(x), y)    # forward
#         loss.backward()                # gradients of the loss w.r.t. every parameter
#         optimizer.step()               # move the parameters downhill
#     measure loss and accuracy on data the model never trained on
# ```
#
# and everything around it that makes it usable: a metric, a guard against exploding gradients, a
# progress bar, a record of the losses to plot, and checkpoints to stop and resume. At the end you train
# your first real network: a multi-layer perceptron that reads handwritten digits (MNIST) with about
# 94% accuracy, built entirely from code you wrote.
#
# What you build goes into `tinytorch/core/training.py`:
#
# | you build | task |
# |---|---|
# | `tt.training.accuracy(logits, targets)` | 07.1 |
# | `tt.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=2.0)` | 07.2 |
# | `tt.training.batches(n, batch_size, shuffle=True)`: the index arrays of the mini-batches | 07.3 |
# | `tt.training.train_epoch(...)`: one pass over the training set | 07.4 |
# | `tt.training.evaluate(...)`: loss and accuracy on held-out data | 07.5 |
# | `tt.training.fit(...)`: epochs, evaluation, progress, history | 07.6 |
# | `tt.training.save_checkpoint(...)`, `tt.training.load_checkpoint(...)` | 07.7, 07.8 |
#
# `tt.training.ProgressBar` is given, and so are two private helpers that turn an optimizer's state
# into checkpoint entries and back (07.7 and 07.8 call them). PyTorch has no `fit` or `accuracy` (you
# write your own loop there), so these functions live in a namespace of their own, `tt.training`, not
# among PyTorch's names at the top of `tt`; `clip_grad_norm_` is PyTorch's, and sits where PyTorch has it.
#
# **Before you start.** This notebook runs on *your* modules 01 to 06: its exported cell imports
# `Tensor` and `no_grad` from the package, and the examples use your `nn.Linear`, `nn.ReLU`,
# `nn.Dropout`, `nn.CrossEntropyLoss`, `nn.MSELoss`, `optim.SGD` and `optim.Adam`. <!-- tito -->Finish 06
# (`tito test 06` at full marks), run `tito export 06`, and restart this notebook's kernel whenever you
# export again. Grade this module with `tito test 07`, which exports 01 to 07 together.<!-- /tito -->
# <!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.training
import io
import os
import tempfile
import time
from contextlib import redirect_stdout

import numpy as np

import tinytorch as tt
from tinytorch import nn, optim

# %% [markdown]
# The package file starts with its imports. Nothing here depends on a particular layer, loss or
# optimizer: a model is anything you can call that has `parameters()`, `train()`, `eval()` and
# `training`; a loss function is anything that maps `(output, target)` to a scalar tensor; an
# optimizer is anything with `zero_grad()` and `step()`. That is all the loop needs to know.

# %%
#| export
import json
import math
import sys
import time

import numpy as np

from tinytorch.core.tensor import Tensor, default_generator
from tinytorch.core.autograd import no_grad

# tt.nn.utils.clip_grad_norm_ as in PyTorch; the training helpers, which PyTorch leaves to you, in tt.training
__all__ = ["accuracy", "clip_grad_norm_", "batches", "train_epoch", "evaluate", "ProgressBar", "fit",
           "save_checkpoint", "load_checkpoint"]

# %% [markdown]
# ## Accuracy
#
# A classifier outputs one score (a *logit*) per class; its prediction is the class with the highest
# score, `argmax` over the last axis. Accuracy is the fraction of predictions equal to the targets:
#
#     accuracy = (1/N) · #{ i : argmax_c logits[i, c] == targets[i] }
#
# The loss is what we optimise (it is differentiable, accuracy is not: a tiny change to a weight almost
# never changes an argmax), but accuracy is what we care about and report. Note that the softmax is
# not needed: it is monotonic, so the largest logit is also the largest probability.
#
# Shapes: logits `(..., C)`, targets `(...)` of integer class indices; sequence models give
# `(B, T, C)` and `(B, T)`, and the same one line works. If `logits.shape[:-1] != targets.shape`, the
# comparison would *broadcast* (an `(N,)` against an `(N, 1)` gives an `(N, N)` table of nonsense and
# no error), so raise a `ValueError` naming both shapes instead. Both arguments may be `Tensor`s or
# arrays; return a Python `float`. Ties go to the first maximum, as `np.argmax` does.

# %%
#| export training
def accuracy(logits, targets) -> float:
    """Fraction of argmax(logits, axis=-1) == targets; logits (..., C), targets (...) class indices."""
    ### BEGIN SOLUTION 07.1 accuracy
    logits, targets = np.asarray(logits), np.asarray(targets)
    if logits.shape[:-1] != targets.shape:
        raise ValueError(f"accuracy: logits of shape {logits.shape} need targets of shape {logits.shape[:-1]}, "
                         f"got targets of shape {targets.shape}")
    return float(np.mean(np.argmax(logits, axis=-1) == targets))
    ### END SOLUTION

# %%
logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 5.0]], dtype=np.float32)
assert accuracy(logits, np.array([0, 1, 1, 2])) == 0.75            # the tie in row 2 goes to class 0
assert accuracy(tt.Tensor(logits), tt.Tensor(np.array([0, 1, 0, 2]))) == 1.0
assert type(accuracy(logits, np.array([1, 0, 1, 0]))) is float
assert accuracy(np.zeros((2, 3, 4)), np.zeros((2, 3), dtype=np.int64)) == 1.0
try:
    accuracy(logits, np.zeros((4, 1), dtype=np.int64))
    raise AssertionError("mismatched shapes must raise")
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## Gradient clipping
#
# Sometimes one batch produces a huge gradient: a rare example far from the others, a recurrent network
# multiplying by the same matrix a hundred times, a loss near a cliff. One step with it can throw the
# parameters so far that training never recovers (the loss jumps to `nan`). *Clipping by the global
# norm* caps the length of the step direction without changing where it points.
#
# Treat all gradients of all parameters as one long vector g and take its p-norm:
#
#     total = ( Σ_params Σ_elements |g|^p )^(1/p)          (p = 2: the Euclidean length)
#     total = max_params max_elements |g|                   (p = ∞)
#
# If `total > max_norm`, multiply every gradient by `max_norm / (total + 1e-6)` (the 1e-6 guards against
# dividing by zero and lands just below `max_norm`); otherwise leave them alone. Every gradient is scaled
# by the **same** factor, so the direction of the step is kept; clipping each parameter on its own
# would change it.
#
# `clip_grad_norm_(parameters, max_norm, norm_type=2.0)` follows `torch.nn.utils.clip_grad_norm_`:
#
# - `parameters` is an iterable of tensors (often the generator `model.parameters()`, which you can
#   walk only once: make it a list first) or a single tensor;
# - parameters whose `.grad` is `None` are skipped (a frozen layer, a layer the loss did not reach);
# - `norm_type` is a number, or `float('inf')` / `'inf'` for the max norm;
# - the gradients are scaled **in place**: the `.grad` tensors stay the same objects (the trailing
#   underscore is PyTorch's naming convention for in-place functions), and stay float32;
# - it returns the total norm *before* clipping, as a Python `float`: worth logging, since a norm that
#   keeps growing is an early sign of trouble. With no gradients at all it returns 0.0.
#
# Compute the norm in float64 (`np.abs(g, dtype=np.float64)`): a sum of squares of many float32
# numbers loses digits.

# %%
#| export nn.utils
def clip_grad_norm_(parameters, max_norm: float, norm_type=2.0) -> float:
    """Scale all grads in place by max_norm / (total + 1e-6) when their joint norm `total` exceeds
    max_norm; parameters without grad are skipped. Returns `total` (before clipping) as a float."""
    ### BEGIN SOLUTION 07.2 clip_grad_norm_
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad.data for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    norm_type = float(norm_type)
    if norm_type == math.inf:
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in grads)
    else:
        total = sum(float(np.sum(np.abs(g, dtype=np.float64) ** norm_type)) for g in grads) ** (1.0 / norm_type)
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g *= scale
    return total
    ### END SOLUTION

# %%
w = tt.Tensor(np.zeros((2, 2), dtype=np.float32), requires_grad=True)
b = tt.Tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
frozen = tt.Tensor(np.zeros(3, dtype=np.float32), requires_grad=True)   # no grad: skipped
w.grad = tt.Tensor(np.array([[3.0, 0.0], [0.0, 0.0]], dtype=np.float32))
b.grad = tt.Tensor(np.array([0.0, 4.0], dtype=np.float32))
w_grad = w.grad
assert clip_grad_norm_([w, frozen, b], max_norm=10.0) == 5.0                     # below: unchanged
assert w.grad.data[0, 0] == 3.0
assert abs(clip_grad_norm_(iter([w, b, frozen]), max_norm=1.0) - 5.0) < 1e-9     # a generator works
assert np.allclose(w.grad.data[0, 0], 0.6) and np.allclose(b.grad.data[1], 0.8), (w.grad, b.grad)
assert w.grad is w_grad and w.grad.dtype == np.float32 and frozen.grad is None
assert np.isclose(clip_grad_norm_([w, b], max_norm=0.1, norm_type="inf"), 0.8)   # the largest |g|
assert np.isclose(np.abs(b.grad.data).max(), 0.1, atol=1e-6)

# %% [markdown]
# ## Mini-batches
#
# The gradient of the loss over the whole training set points downhill most accurately, but costs a
# pass over all of it for a single step. A *mini-batch* of 32 to 512 examples gives a noisy but
# unbiased estimate of that gradient for a fraction of the cost, so in one pass over the data (an
# **epoch**) we take many cheap steps instead of one expensive one. The noise even helps: it shakes
# the parameters out of sharp, poorly generalising minima.
#
# Shuffle the order every epoch: a fixed order (say, all the zeros first) gives batches that are not
# representative, and the model chases each class in turn.
#
# `batches(n, batch_size, shuffle=True)` returns the list of index arrays: the order of `0..n-1`
# (a random permutation drawn from `default_generator` when shuffling, so `tt.manual_seed` makes it
# repeatable; `0, 1, ..., n-1` otherwise) cut into consecutive pieces of `batch_size`; the last piece
# holds the remainder (PyTorch's `DataLoader(drop_last=False)`). Every index appears exactly once.
# A `batch_size` below 1 is a `ValueError`.
#
# Indexing a numpy array with an index array (`inputs[batch]`) copies just those rows: that is how a
# batch is gathered, with no Python loop over examples.

# %%
#| export training
def batches(n: int, batch_size: int, shuffle: bool = True) -> list:
    """The indices 0..n-1 (permuted by default_generator when shuffle) cut into consecutive arrays of
    batch_size; the last holds the remainder."""
    ### BEGIN SOLUTION 07.3 batches
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    order = default_generator.permutation(n) if shuffle else np.arange(n)
    return [order[start:start + batch_size] for start in range(0, n, batch_size)]
    ### END SOLUTION

# %%
assert [b.tolist() for b in batches(7, 3, shuffle=False)] == [[0, 1, 2], [3, 4, 5], [6]]
tt.manual_seed(0)
first = batches(10, 4)
tt.manual_seed(0)
again = batches(10, 4)
assert [len(b) for b in first] == [4, 4, 2] and sorted(np.concatenate(first).tolist()) == list(range(10))
assert all((a == b).all() for a, b in zip(first, again)), "tt.manual_seed makes the order repeatable"
assert batches(0, 5) == []

# %% [markdown]
# ## One epoch of training
#
# `train_epoch(model, loss_fn, optimizer, inputs, targets, batch_size=128, shuffle=True, max_norm=None,
# progress=None)` makes one pass over `(inputs, targets)` (numpy arrays with the examples along the
# first axis) and returns the mean loss. First `model.train()`: layers such as `Dropout` behave
# differently during training, and a previous evaluation may have left the model in eval mode. Then,
# for each batch of `batches(len(inputs), batch_size, shuffle)`:
#
# 1. `optimizer.zero_grad()`. Gradients **accumulate** in `.grad` (02): without this line every step
#    would use the sum of all the gradients so far. Training still runs, and quietly goes wrong.
# 2. forward: `output = model(Tensor(inputs[batch]))`, then `loss = loss_fn(output, Tensor(targets[batch]))`;
# 3. `loss.backward()`;
# 4. if `max_norm` is not `None`: `clip_grad_norm_(model.parameters(), max_norm)`, after backward and
#    before the step that would use the gradients;
# 5. `optimizer.step()`;
# 6. if `progress` is given, call `progress(batch_index, n_batches, loss_value)` (batch_index counts
#    from 0; loss_value is a Python float).
#
# **The mean over samples.** Each batch loss is already a mean over its batch. With 10 examples and
# `batch_size=4` the batches hold 4, 4 and 2 examples; the plain mean of the three batch losses would
# count each of the last two examples twice as much as the others. Weight each batch loss by its size
# and divide by the number of examples: `Σ_b loss_b · |b| / N`, the mean loss over examples seen during
# the epoch (while the parameters were moving: it is a little worse than the loss at the end of the
# epoch, one reason to evaluate separately).
#
# Read the loss with `loss.item()`: a plain float. Keeping the `loss` tensors in a list instead would
# keep every batch's whole graph alive, a classic memory leak of training loops.

# %%
#| export training
def train_epoch(model, loss_fn, optimizer, inputs, targets, batch_size: int = 128, shuffle: bool = True,
                max_norm=None, progress=None) -> float:
    """One pass over (inputs, targets) in mini-batches: zero_grad, forward, loss, backward, optional
    clip_grad_norm_, step. Returns the mean loss over the examples; progress(batch_index, n_batches, loss)."""
    ### BEGIN SOLUTION 07.4 train_epoch
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    model.train()
    index_batches = batches(len(inputs), batch_size, shuffle)
    total = 0.0
    for batch_index, batch in enumerate(index_batches):
        optimizer.zero_grad()
        loss = loss_fn(model(Tensor(inputs[batch])), Tensor(targets[batch]))
        loss.backward()
        if max_norm is not None:
            clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        value = loss.item()
        total += value * len(batch)
        if progress is not None:
            progress(batch_index, len(index_batches), value)
    return total / len(inputs)
    ### END SOLUTION

# %% [markdown]
# A test that can be checked by hand: a linear model `y = x·w + b` with one input, MSE and plain SGD on
# two examples, one batch each, no shuffling. Work out the two steps on paper and compare.

# %%
model = nn.Linear(1, 1)
model.weight.data[...] = 0.0
model.bias.data[...] = 0.0
model.eval()                                           # train_epoch must switch it back
x = np.array([[1.0], [2.0]], dtype=np.float32)
y = np.array([[2.0], [4.0]], dtype=np.float32)
seen = []
mean_loss = train_epoch(model, nn.MSELoss(), optim.SGD(model.parameters(), lr=0.1), x, y, batch_size=1,
                        shuffle=False, progress=lambda i, n, loss: seen.append((i, n, round(loss, 4))))
# step 1: pred 0, loss (0-2)^2 = 4, dL/dw = 2*(0-2)*1 = -4, dL/db = -4  ->  w = b = 0.4
# step 2: pred 0.4*2 + 0.4 = 1.2, loss (1.2-4)^2 = 7.84, dL/dw = 2*(-2.8)*2 = -11.2, dL/db = -5.6
assert seen == [(0, 2, 4.0), (1, 2, 7.84)], seen
assert np.isclose(mean_loss, (4.0 + 7.84) / 2) and model.training
assert np.allclose(model.weight.data, 0.4 + 1.12) and np.allclose(model.bias.data, 0.4 + 0.56)

# %% [markdown]
# ## Evaluation
#
# How well does the model do on data it has not trained on? `evaluate(model, loss_fn, inputs, targets,
# batch_size=512)` returns `(mean_loss, accuracy)` over the held-out set, and changes nothing:
#
# - **eval mode**: `model.eval()` before, so `Dropout` passes everything through and the result is
#   deterministic; afterwards put the model back in the mode it was in (`was_training =
#   model.training` ... `model.train(was_training)`), in a `try`/`finally` so that an error half-way
#   does not leave it in the wrong mode.
# - **no graph**: run under `with no_grad():`. Nobody will call `backward`, so recording the graph
#   would only cost time and keep every intermediate array in memory. Evaluation batches can be larger
#   than training batches for the same reason (512 by default).
# - **no shuffling**: `batches(n, batch_size, shuffle=False)`. The order does not change the result,
#   and drawing a permutation would consume random numbers and change the rest of the training run.
#
# The loss is the mean over examples weighted as in `train_epoch`, and the accuracy is
# `accuracy(output, targets)` summed over the batches with the same weights. Accuracy only means
# something for class indices: when the targets are not integers (a regression with `MSELoss`), return
# `float('nan')` for it.

# %%
#| export training
def evaluate(model, loss_fn, inputs, targets, batch_size: int = 512) -> tuple:
    """(mean loss, accuracy) over (inputs, targets), in eval mode and under no_grad; the model's
    training mode is restored afterwards. Accuracy is nan unless the targets are integers."""
    ### BEGIN SOLUTION 07.5 evaluate
    inputs, targets = np.asarray(inputs), np.asarray(targets)
    classes = np.issubdtype(targets.dtype, np.integer)
    was_training = model.training
    model.eval()
    total_loss = total_correct = 0.0
    try:
        with no_grad():
            for batch in batches(len(inputs), batch_size, shuffle=False):
                output = model(Tensor(inputs[batch]))
                total_loss += loss_fn(output, Tensor(targets[batch])).item() * len(batch)
                if classes:
                    total_correct += accuracy(output, targets[batch]) * len(batch)
    finally:
        model.train(was_training)
    return total_loss / len(inputs), (total_correct / len(inputs) if classes else float("nan"))
    ### END SOLUTION

# %%
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3))
x = np.random.default_rng(0).standard_normal((10, 4)).astype(np.float32)
y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
first = evaluate(model, nn.CrossEntropyLoss(), x, y, batch_size=3)
assert first == evaluate(model, nn.CrossEntropyLoss(), x, y, batch_size=3), "eval mode: Dropout is off, results repeat"
with tt.no_grad():
    logits = model.eval()(tt.Tensor(x))
model.train()
assert np.isclose(first[0], nn.CrossEntropyLoss()(logits, tt.Tensor(y)).item(), rtol=1e-5)
assert first[1] == accuracy(logits, y) and model.training
assert all(p.grad is None for p in model.parameters())
assert np.isnan(evaluate(nn.Linear(4, 1), nn.MSELoss(), x, np.zeros((10, 1), dtype=np.float32))[1])

# %% [markdown]
# ## Watching it train: a progress bar (given)
#
# An epoch on MNIST takes from a third of a second (this module's MLP) to several seconds (09's CNN),
# and much longer on bigger data; a bar that fills up batch by batch, with the running loss, tells you
# it is alive and whether the loss goes down. `ProgressBar` is a `progress` callable for
# `train_epoch`: it redraws one line in place by starting it with a carriage return `'\r'` (back to the
# start of the line, without a new line), at most ten times a second, and ends the line after the last
# batch. It writes to `sys.stdout` as it is when it draws, so it works in a terminal and in Jupyter
# (which replaces `sys.stdout` with the cell's output).

# %%
#| export training
class ProgressBar:
    """A one-line text progress bar for train_epoch's `progress(batch_index, n_batches, loss)`: redrawn
    in place with '\\r' at most every `min_interval` seconds, showing the running mean loss; ends its line
    after the last batch. Written to a file or a pipe (not a terminal, not a notebook), only the final
    line of each epoch is written, so logs stay readable."""

    def __init__(self, description: str = "", width: int = 30, min_interval: float = 0.5, stream=None):
        self.description, self.width, self.min_interval, self.stream = description, width, min_interval, stream
        target = stream if stream is not None else sys.stdout
        self.live = getattr(target, "isatty", lambda: False)() or "ipykernel" in sys.modules
        self.start = time.perf_counter()
        self.last_draw = -math.inf
        self.loss_sum, self.count = 0.0, 0

    def __call__(self, batch_index: int, n_batches: int, loss: float) -> None:
        self.loss_sum += loss
        self.count += 1
        done = batch_index + 1
        now = time.perf_counter()
        if done < n_batches and (not self.live or now - self.last_draw < self.min_interval):
            return
        self.last_draw = now
        filled = self.width * done // n_batches
        bar = "#" * filled + "-" * (self.width - filled)
        stream = self.stream if self.stream is not None else sys.stdout
        stream.write(f"\r{self.description} [{bar}] {done}/{n_batches} loss {self.loss_sum / self.count:.4f} "
                     f"{now - self.start:.1f}s")
        if done == n_batches:
            stream.write("\n")
        stream.flush()

# %%
bar = ProgressBar("demo", width=10, min_interval=0)
for i in range(4):
    bar(i, 4, 1.0 / (i + 1))

# %% [markdown]
# ## The whole loop: `fit`
#
# `fit(model, loss_fn, optimizer, train, test, epochs, batch_size=128, scheduler=None, max_norm=None,
# progress=True, log=print)`, with `train` and `test` pairs `(inputs, targets)` of numpy arrays. For
# each epoch (counting from 1):
#
# 1. `train_epoch` on `train` with `batch_size`, `max_norm` (shuffled), and as `progress` a
#    `ProgressBar(f"epoch {epoch}/{epochs}")` when `progress` is true, `None` otherwise;
# 2. `evaluate` on `test` (default evaluation batch size);
# 3. `scheduler.step()` if a scheduler is given: schedulers count epochs here (06);
# 4. append to the history and, when `log` is not `None`, call it with one line such as
#    `epoch 3/10: train loss 0.1234, test loss 0.1456, test accuracy 95.30%, 2.1 s`.
#
# The history is a dict of lists with one entry per epoch: `'train_loss'` (what train_epoch returned),
# `'test_loss'`, `'test_accuracy'` (floats) and `'seconds'` (the epoch's wall-clock time, training and
# evaluation, from `time.perf_counter()`). Keras returns the same kind of record from `model.fit`;
# PyTorch leaves this loop to you, which is what you are doing now.

# %%
#| export training
def fit(model, loss_fn, optimizer, train, test, epochs: int, batch_size: int = 128, scheduler=None,
        max_norm=None, progress: bool = True, log=print) -> dict:
    """Train for `epochs` epochs on train = (inputs, targets), evaluating on test after each; returns
    {'train_loss', 'test_loss', 'test_accuracy', 'seconds'}, one entry per epoch each."""
    ### BEGIN SOLUTION 07.6 fit
    history = {"train_loss": [], "test_loss": [], "test_accuracy": [], "seconds": []}
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        bar = ProgressBar(f"epoch {epoch}/{epochs}") if progress else None
        train_loss = train_epoch(model, loss_fn, optimizer, *train, batch_size=batch_size, max_norm=max_norm,
                                 progress=bar)
        test_loss, test_accuracy = evaluate(model, loss_fn, *test)
        if scheduler is not None:
            scheduler.step()
        seconds = time.perf_counter() - start
        for key, value in zip(history, (train_loss, test_loss, test_accuracy, seconds)):
            history[key].append(value)
        if log is not None:
            log(f"epoch {epoch}/{epochs}: train loss {train_loss:.4f}, test loss {test_loss:.4f}, "
                f"test accuracy {100 * test_accuracy:.2f}%, {seconds:.1f} s")
    return history
    ### END SOLUTION

# %% [markdown]
# A first run on a problem small enough to train in a few hundredths of a second: three blobs of 2-D
# points, one per class, and a small MLP. The loss should fall epoch after epoch and the test accuracy climb to about
# 92%. Not to 100%: the blobs overlap, so some points lie deep in another class's blob and no model
# can get them right.

# %%
def blobs(n, rng):
    """n points in 2-D around three centres; the label is the centre."""
    centres = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    labels = rng.integers(0, 3, n)
    return (centres[labels] + rng.standard_normal((n, 2))).astype(np.float32), labels


rng = np.random.default_rng(0)
train_set, test_set = blobs(600, rng), blobs(200, rng)
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
history = fit(model, nn.CrossEntropyLoss(), optimizer, train_set, test_set, epochs=8, batch_size=32,
              scheduler=scheduler, max_norm=5.0)
assert sorted(history) == ["seconds", "test_accuracy", "test_loss", "train_loss"]
assert all(len(values) == 8 for values in history.values())
assert history["train_loss"][-1] < history["train_loss"][0] and history["test_accuracy"][-1] > 0.85
assert np.isclose(optimizer.param_groups[0]["lr"], 0.005 * 0.5 ** 2)

# %% [markdown]
# ### The loss curve
#
# Numbers per epoch are hard to read; a plot shows at once whether training still improves, has
# converged, or has started to *overfit* (training loss still falling while the test loss turns up:
# the model memorises the training set instead of learning the pattern). `plot_history` is notebook
# code, not part of the package: the package does not depend on matplotlib.

# %%
import matplotlib.pyplot as plt


def plot_history(history, title=""):
    epochs = np.arange(1, len(history["train_loss"]) + 1)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    left.plot(epochs, history["train_loss"], "o-", label="train (mean during the epoch)")
    left.plot(epochs, history["test_loss"], "o-", label="test (after the epoch)")
    left.set(xlabel="epoch", ylabel="loss", title=f"{title} loss")
    left.legend()
    right.plot(epochs, 100 * np.array(history["test_accuracy"]), "o-", color="C2")
    right.set(xlabel="epoch", ylabel="test accuracy (%)", title=f"{title} accuracy")
    right.set_ylim(top=100)
    figure.tight_layout()
    plt.show()


plot_history(history, "blobs:")

# %% [markdown]
# ## Checkpoints
#
# Long runs get interrupted, and the best model of a run should be kept. A checkpoint saves what it
# takes to continue **exactly** where training stopped:
#
# - the model's parameters (`model.state_dict()`, 04);
# - the optimizer's state (`optimizer.state_dict()`, 06): SGD's momentum buffers, Adam's two moment
#   estimates and its step count. Without them a resumed Adam restarts its bias correction and takes a
#   few badly scaled steps; a resumed momentum SGD loses its velocity;
# - anything else the caller wants back: the epoch, the history, the best accuracy so far.
#
# **One file, no pickle.** `torch.save` uses Python's pickle, and unpickling a file can run arbitrary
# code: loading a checkpoint someone sent you is like running their program (PyTorch now defaults to
# `weights_only=True` for this reason). We use numpy's `.npz` instead, a zip of `.npy` arrays, loaded
# with `np.load(path, allow_pickle=False)`, which refuses anything that is not plain numbers or text.
# So everything must become an array with a flat name:
#
# | what | key in the .npz | value |
# |---|---|---|
# | parameter `0.weight` | `model/0.weight` | the array |
# | optimizer state of parameter 3, `exp_avg` | `optimizer/state/3/exp_avg` | the array; a number such as `step` as a 0-d array |
# | the optimizer's `param_groups` | `optimizer/param_groups` | one JSON string (hyperparameters and parameter indices) |
# | an extra `epoch=5` | `epoch` | `np.asarray(5)` |
#
# **The optimizer's entries are given.** Flattening the optimizer's nested `state_dict` into those keys
# and back is bookkeeping, not an idea about training, so two helpers do it for you:
#
# - `_optimizer_arrays(state_dict)` turns `optimizer.state_dict()` into the `optimizer/...` entries
#   (JSON cannot hold numpy numbers, so it writes them with `.item()`);
# - `_optimizer_state(arrays)` reads those entries of a loaded file back into a state_dict for
#   `optimizer.load_state_dict`: 0-d arrays become Python numbers again (`step`), JSON lists become
#   tuples (`betas`; but `params` stays a list).
#
# They are ordinary code in the cell below: read them, but there is nothing to write there.

# %%
#| export
def _optimizer_arrays(state_dict: dict) -> dict:
    """An optimizer's state_dict as flat .npz entries: each state value as "optimizer/state/<index>/<key>"
    (a number as a 0-d array), and the param_groups as one JSON string under "optimizer/param_groups"."""
    arrays = {}
    for index, state in state_dict["state"].items():
        for key, value in state.items():
            arrays[f"optimizer/state/{index}/{key}"] = np.asarray(value)
    arrays["optimizer/param_groups"] = np.asarray(
        json.dumps(state_dict["param_groups"], default=lambda value: value.item()))
    return arrays


def _optimizer_state(arrays: dict) -> dict:
    """The state_dict that _optimizer_arrays flattened, rebuilt from the "optimizer/..." entries of arrays
    (other entries are ignored): 0-d arrays as Python numbers, JSON lists as tuples except 'params'."""
    groups = [{key: tuple(value) if isinstance(value, list) and key != "params" else value
               for key, value in group.items()}
              for group in json.loads(str(arrays["optimizer/param_groups"]))]
    state = {}
    for key, value in arrays.items():
        if key.startswith("optimizer/state/"):
            _, _, index, name = key.split("/", 3)
            state.setdefault(int(index), {})[name] = value.item() if value.ndim == 0 else value
    return {"state": dict(sorted(state.items())), "param_groups": groups}

# %%
weight = tt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
adam = optim.Adam([weight], lr=0.01, betas=(0.8, 0.99))
weight.grad = tt.Tensor(np.ones(2, dtype=np.float32))
adam.step()
flat = _optimizer_arrays(adam.state_dict())
print(sorted(flat))
print(flat["optimizer/param_groups"])
back = _optimizer_state(flat)
assert back["state"][0]["step"] == 1 and back["param_groups"][0]["betas"] == (0.8, 0.99)

# %% [markdown]
# What you write is the checkpoint itself.
#
# `save_checkpoint(path, model, optimizer=None, **extra)` collects the entries: `model/<name>` for each
# item of `model.state_dict()`; the optimizer's entries from `_optimizer_arrays(optimizer.state_dict())`
# when an optimizer is given; each extra as `np.asarray(value)` under its own name. An extra that numpy
# can only store as an object array (a dict, say: its dtype is `object`) would need pickle: raise a
# `TypeError` naming it. Then write exactly the file `path`: open it yourself (`with open(path, "wb") as
# file: np.savez(file, **arrays)`), since `np.savez(path, ...)` given a name appends `.npz` to it when it
# is missing.
#
# `load_checkpoint(path, model, optimizer=None) -> dict` reverses it. Read every entry with
# `np.load(path, allow_pickle=False)` (a `with` block closes the file); restore the model with
# `model.load_state_dict` of the `model/` entries, the `model/` prefix removed (it raises if the
# checkpoint belongs to another architecture); for an optimizer, call `optimizer.load_state_dict` with
# what `_optimizer_state` rebuilds, but first raise a `KeyError` naming the file if it holds no optimizer
# state (no `optimizer/param_groups` entry). Return the extras: every entry that is neither `model/` nor
# `optimizer/`, 0-d arrays as Python numbers or strings (`.item()`), the rest as arrays.

# %%
#| export training
def save_checkpoint(path, model, optimizer=None, **extra) -> None:
    """Write model.state_dict() as "model/<name>", the optimizer's entries (_optimizer_arrays) and each
    extra as an array, to ONE .npz at exactly path; TypeError for an extra that would need pickle."""
    ### BEGIN SOLUTION 07.7 save_checkpoint
    arrays = {f"model/{name}": value for name, value in model.state_dict().items()}
    if optimizer is not None:
        arrays.update(_optimizer_arrays(optimizer.state_dict()))
    for name, value in extra.items():
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"save_checkpoint: extra {name!r} cannot be stored without pickle "
                            f"(give numbers, strings or arrays)")
        arrays[name] = array
    with open(path, "wb") as file:
        np.savez(file, **arrays)
    ### END SOLUTION


def load_checkpoint(path, model, optimizer=None) -> dict:
    """Restore the model (and the optimizer) saved by save_checkpoint at path; returns the extras
    (0-d arrays as Python numbers/strings). Loads with allow_pickle=False."""
    ### BEGIN SOLUTION 07.8 load_checkpoint
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    model.load_state_dict({key[len("model/"):]: value for key, value in arrays.items() if key.startswith("model/")})
    if optimizer is not None:
        if "optimizer/param_groups" not in arrays:
            raise KeyError(f"{path} holds no optimizer state")
        optimizer.load_state_dict(_optimizer_state(arrays))
    return {key: value.item() if value.ndim == 0 else value
            for key, value in arrays.items() if not key.startswith(("model/", "optimizer/"))}
    ### END SOLUTION

# %% [markdown]
# The test that matters: train three steps, save, build a *fresh* model and optimizer (different
# initial weights, empty optimizer state), load, and train three more. The parameters must equal those
# of a run that never stopped, exactly.

# %%
def steps(model, optimizer, x, y, count):
    for _ in range(count):
        optimizer.zero_grad()
        nn.CrossEntropyLoss()(model(tt.Tensor(x)), tt.Tensor(y)).backward()
        optimizer.step()


def mlp():
    return nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))


x, y = train_set[0][:64], train_set[1][:64]
tt.manual_seed(1)
model = mlp()
optimizer = optim.Adam(model.parameters(), lr=0.01)
steps(model, optimizer, x, y, 3)
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "run.ckpt")
    save_checkpoint(path, model, optimizer, epoch=3, note="three steps", losses=[1.5, 1.2, 1.0])
    with np.load(path, allow_pickle=False) as data:
        print(sorted(data.files))
    steps(model, optimizer, x, y, 3)                          # the uninterrupted run
    tt.manual_seed(2)
    resumed = mlp()
    resumed_optimizer = optim.Adam(resumed.parameters(), lr=0.01)
    extras = load_checkpoint(path, resumed, resumed_optimizer)
steps(resumed, resumed_optimizer, x, y, 3)
assert extras["epoch"] == 3 and extras["note"] == "three steps" and extras["losses"].tolist() == [1.5, 1.2, 1.0]
for (name, a), b in zip(model.state_dict().items(), resumed.state_dict().values()):
    assert np.array_equal(a, b), f"{name} differs after resuming"
print("resumed run identical to the uninterrupted one")

# %% [markdown]
# ## Milestone: an MLP that reads handwritten digits
#
# MNIST: 28×28 greyscale images of the digits 0 to 9, written by hundreds of people. The course ships
# 10,000 training and 2,000 test images. The network is the classic multi-layer perceptron:
#
# ```
# image (28, 28) -> flatten (784) -> Linear(784, 256) -> ReLU -> Linear(256, 128) -> ReLU -> Linear(128, 10) -> logits
# ```
#
# about 235,000 parameters, trained with Adam (lr 1e-3), batch 128, 10 epochs, cross-entropy. Two
# details of the data matter:
#
# - **Flatten and convert**: the pixels are `uint8` in 0..255; the network wants `float32` vectors.
# - **Standardise**: subtract the mean and divide by the standard deviation of the *training* pixels
#   (two scalars), so inputs have mean 0 and variance 1 and the initial layers are in their comfortable
#   range. The test set is scaled with the training set's numbers: statistics of the test set are
#   information the model must not see.
#
# PyTorch, with the same set-up, reaches 94.35% test accuracy; yours should reach about 94%.
#
# **What this run can and cannot tell you.** Reaching about 94% says that everything on the path works
# together: tensors, autograd, the layers, the loss, the optimizer, the loop. It does not say that each
# piece is exactly right. Some bugs cost a point or two of accuracy (a `Linear` initialised with the
# wrong bound trains to about 92%); others cost nothing visible here: Adam without its bias correction
# reaches 95.5%, and a cross-entropy computed as `log(softmax(x))` reaches 94%, although the first
# takes wrong steps early in training and the second returns `inf` for large logits. Only the graded
# checks of modules 03 to 07 test each piece on the cases where it matters.
#
# The cell trains with BLAS (numpy's matrix library) on one thread, via `threadpoolctl`: for matrices
# this small one thread is as fast, and on a machine whose cores are busy with other work a
# multi-threaded matrix product waits for all of them (measured on two shared, busy cores: 0.8 to 5 s
# an epoch with the default threads, 0.3 s with one).

# %% tags=["learner-only"]
from threadpoolctl import threadpool_limits

from tito.datasets import load

data = load("mnist")
x_train = data["x_train"].reshape(len(data["x_train"]), -1).astype(np.float32)   # (10000, 784)
x_test = data["x_test"].reshape(len(data["x_test"]), -1).astype(np.float32)      # (2000, 784)
mean, std = x_train.mean(), x_train.std()
x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
y_train, y_test = data["y_train"].astype(np.int64), data["y_test"].astype(np.int64)
print(f"train {x_train.shape}, test {x_test.shape}, pixel mean {mean:.2f}, std {std:.2f}")

tt.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
print(model)
print(f"{sum(p.data.size for p in model.parameters()):,} parameters")
optimizer = optim.Adam(model.parameters(), lr=1e-3)
with threadpool_limits(limits=1):
    history = fit(model, nn.CrossEntropyLoss(), optimizer, (x_train, y_train), (x_test, y_test), epochs=10,
                  batch_size=128)
print(f"test accuracy {100 * history['test_accuracy'][-1]:.2f}%, "
      f"{np.mean(history['seconds']):.1f} s per epoch")

# %% tags=["learner-only"]
plot_history(history, "MNIST MLP:")

# %% [markdown]
# ## What you built, and what comes next
#
# A complete training pipeline: mini-batches, the five-line step, gradient clipping, evaluation that
# changes nothing, a progress bar, a history to plot, and checkpoints that resume exactly. With it, a
# network you built from `np.ndarray` up reads handwritten digits about as well as the same network in
# PyTorch.
#
# An MLP sees an image as 784 unrelated numbers: shift a digit by two pixels and, to the first layer, it
# is a different input. The next modules build the layers that know that images are grids (convolution
# and pooling), and then the ones that read sequences (attention), all trained with this same `fit`.
