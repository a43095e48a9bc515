"""Hidden suite of 07_training: accuracy, gradient clipping, mini-batches, the training and evaluation
loops, fit, and checkpoints.

Every `expected` re-derives the result in numpy (float64): the training checks run the same mini-batch
steps of a linear model by hand (forward, loss, gradients, clipping, SGD with momentum), so they use
tiny models, few examples and `shuffle=False` (or one batch, where order cannot matter). Checkpoint
round trips compare a resumed run with an uninterrupted one, both computed by the package, through a
real .npz file in a temporary directory made inside `compute`.
"""

import contextlib
import io
import json
import math
import os
import tempfile

import numpy as np
from hypothesis import strategies as st

from checklib import CheckFailed, arrays, capture_error, check

TRAIN_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _floats(shape, low=-2.0, high=2.0):
    return arrays(shape, np.float32, low, high)


# ---------------------------------------------------------------------------------------------------
# helpers that compute calls: build models and run steps (they reveal no answer)


def _linear(tt, weight, bias):
    """tt.nn.Linear with the given float32 weight (out, in) and bias (out,)."""
    model = tt.nn.Linear(weight.shape[1], weight.shape[0])
    model.weight.data[...] = weight
    model.bias.data[...] = bias
    return model


def _parameters(model):
    return [p.numpy().copy() for p in model.parameters()]


class _RecordingOptimizer:
    """Wraps an optimizer; records the gradients that every step() sees."""

    def __init__(self, optimizer, parameters):
        self.optimizer, self.parameters, self.seen = optimizer, list(parameters), []

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad()

    def step(self):
        self.seen.append([None if p.grad is None else p.grad.numpy().copy() for p in self.parameters])
        self.optimizer.step()


def _mlp(tt, seed, sizes):
    tt.manual_seed(seed)
    return tt.nn.Sequential(tt.nn.Linear(sizes[0], sizes[1]), tt.nn.ReLU(), tt.nn.Linear(sizes[1], sizes[2]))


def _optimizer(tt, name, parameters):
    if name == "SGD":
        return tt.optim.SGD(parameters, lr=0.1, momentum=0.9)
    return tt.optim.Adam(parameters, lr=0.01)


def _steps(tt, model, optimizer, x, y, count):
    """`count` full-batch steps of cross-entropy; returns the losses."""
    losses = []
    for _ in range(count):
        optimizer.zero_grad()
        loss = tt.nn.CrossEntropyLoss()(model(tt.Tensor(x)), tt.Tensor(y))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ---------------------------------------------------------------------------------------------------
# helpers for expected: the same computations in numpy, float64


def _mse_step(x, y, w, b):
    """Loss and gradients of mean((x @ w.T + b - y)**2) w.r.t. w and b."""
    diff = x @ w.T + b - y                                     # (B, out)
    grad_pred = 2 * diff / diff.size
    return float(np.mean(diff ** 2)), grad_pred.T @ x, grad_pred.sum(axis=0)


def _cross_entropy(logits, y):
    """Mean cross-entropy and its gradient w.r.t. the logits."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    grad = np.exp(log_probs)
    grad[np.arange(len(y)), y] -= 1
    return float(-log_probs[np.arange(len(y)), y].mean()), grad / len(y)


def _ce_step(x, y, w, b):
    loss, grad_logits = _cross_entropy(x @ w.T + b, y)
    return loss, grad_logits.T @ x, grad_logits.sum(axis=0)


def _clip(grads, max_norm):
    if max_norm is None:
        return grads
    total = math.sqrt(sum(float(np.sum(g ** 2)) for g in grads))
    return [g * (max_norm / (total + 1e-6)) for g in grads] if total > max_norm else grads


def _run_epoch(case, step, momentum=0.0, max_norm=None):
    """The epoch of train_epoch(shuffle=False) with SGD(lr, momentum): final [w, b], mean loss, and the
    per-batch losses and gradients."""
    x, y = case["x"].astype(np.float64), case["y"]
    w, b = case["w"].astype(np.float64), case["b"].astype(np.float64)
    buffers, losses, grads_seen, total = None, [], [], 0.0
    for start in range(0, len(x), case["batch_size"]):
        xb, yb = x[start:start + case["batch_size"]], y[start:start + case["batch_size"]]
        loss, gw, gb = step(xb, yb, w, b)
        gw, gb = _clip([gw, gb], max_norm)
        grads_seen.append([gw, gb])
        buffers = [gw, gb] if buffers is None or not momentum else [momentum * buffers[0] + gw,
                                                                       momentum * buffers[1] + gb]
        direction = buffers if momentum else [gw, gb]
        w, b = w - case["lr"] * direction[0], b - case["lr"] * direction[1]
        losses.append(loss)
        total += loss * len(xb)
    return {"parameters": [w, b], "mean_loss": total / len(x), "losses": losses, "grads": grads_seen}


# ---------------------------------------------------------------------------------------------------
# strategies


@st.composite
def _regression(draw, min_n=2, max_n=9):
    n = draw(st.integers(min_n, max_n))
    fin, fout = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    return {"x": draw(_floats((n, fin))), "y": draw(_floats((n, fout))), "w": draw(_floats((fout, fin), -1, 1)),
            "b": draw(_floats((fout,), -1, 1)), "batch_size": draw(st.integers(1, 4)),
            "lr": draw(st.sampled_from([0.01, 0.05, 0.1]))}


@st.composite
def _classification(draw, min_n=2, max_n=9):
    n = draw(st.integers(min_n, max_n))
    fin, classes = draw(st.integers(1, 3)), draw(st.integers(2, 4))
    return {"x": draw(_floats((n, fin))), "y": draw(arrays((n,), np.int64, 0, classes - 1)),
            "w": draw(_floats((classes, fin), -1, 1)), "b": draw(_floats((classes,), -1, 1)),
            "batch_size": draw(st.integers(1, 4)), "lr": draw(st.sampled_from([0.05, 0.1]))}


def _data(case):
    return (f"{len(case['x'])} examples of {case['x'].shape[1]} features, batch_size={case['batch_size']}, "
            f"shuffle=False")


# ---------------------------------------------------------------------------------------------------
# 07.1 accuracy


@st.composite
def _logits_targets(draw, batch_dims=1):
    shape = tuple(draw(st.integers(1, 6)) for _ in range(batch_dims))
    classes = draw(st.integers(1, 5))
    values = st.sampled_from([-1.0, 0.0, 0.5, 2.0]) if draw(st.booleans()) else st.floats(-5, 5, width=32)
    logits = np.array(draw(st.lists(values, min_size=int(np.prod(shape)) * classes,
                                    max_size=int(np.prod(shape)) * classes)), dtype=np.float32)
    return {"logits": logits.reshape(shape + (classes,)),
            "targets": draw(arrays(shape, np.int64, 0, classes - 1))}


@check(task="07.1", points=2, inputs=_logits_targets(),
       describe=lambda case: f"accuracy(logits of shape {case['logits'].shape}, targets of shape "
                             f"{case['targets'].shape}) (ties in a row go to the first maximum)")
def accuracy_is_the_fraction_of_correct_argmax(tt, case):
    return tt.accuracy(case["logits"], case["targets"])


@accuracy_is_the_fraction_of_correct_argmax.expected
def _(case):
    return float(np.mean(np.argmax(case["logits"], axis=-1) == case["targets"]))


@check(task="07.1", points=1, inputs=_logits_targets(),
       describe=lambda case: f"accuracy(tt.Tensor(logits), tt.Tensor(targets)) for logits of shape "
                             f"{case['logits'].shape}: [the type of the result, its value]")
def accuracy_accepts_tensors_and_returns_a_float(tt, case):
    result = tt.accuracy(tt.Tensor(case["logits"]), tt.Tensor(case["targets"]))
    return [type(result).__name__, float(result)]


@accuracy_accepts_tensors_and_returns_a_float.expected
def _(case):
    return ["float", float(np.mean(np.argmax(case["logits"], axis=-1) == case["targets"]))]


@check(task="07.1", points=1, inputs=_logits_targets(batch_dims=2),
       describe=lambda case: f"accuracy(logits of shape {case['logits'].shape}, targets of shape "
                             f"{case['targets'].shape}) (a batch of sequences)")
def accuracy_of_sequence_logits_uses_the_last_axis(tt, case):
    return tt.accuracy(case["logits"], case["targets"])


@accuracy_of_sequence_logits_uses_the_last_axis.expected
def _(case):
    return float(np.mean(np.argmax(case["logits"], axis=-1) == case["targets"]))


@check(task="07.1", points=1, inputs=st.integers(2, 6).map(lambda n: {"n": n}),
       describe=lambda case: f"accuracy(logits of shape ({case['n']}, 3), targets of shape ({case['n']}, 1)): "
                             f"the error raised")
def accuracy_with_mismatched_shapes_raises(tt, case):
    return capture_error(lambda: tt.accuracy(np.zeros((case["n"], 3), np.float32),
                                             np.zeros((case["n"], 1), np.int64)))["raised"]


@accuracy_with_mismatched_shapes_raises.expected
def _(case):
    return "ValueError"


# ---------------------------------------------------------------------------------------------------
# 07.2 clip_grad_norm_


@st.composite
def _grads(draw, scale=(0.5, 3.0)):
    count = draw(st.integers(1, 3))
    grads = [draw(_floats(tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2)))), -2, 2))
             for _ in range(count)]
    total = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    if total < 0.01:                                   # a visible norm: clipping must show
        grads[0] = grads[0] + np.float32(1.0)
        total = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in grads))
    return {"grads": grads, "max_norm": draw(st.floats(*scale)) * total}


def _with_grads(tt, grads):
    parameters = []
    for g in grads:
        p = tt.Tensor(np.zeros(g.shape, np.float32), requires_grad=True)
        p.grad = tt.Tensor(g.copy())
        parameters.append(p)
    return parameters


def _shapes(case):
    return ", ".join(str(g.shape) for g in case["grads"])


@check(task="07.2", points=2, inputs=_grads(), rtol=1e-5,
       describe=lambda case: f"clip_grad_norm_(parameters with grads of shapes {_shapes(case)}, "
                             f"max_norm={case['max_norm']:.4g}): [type of the result, the total norm returned]")
def clip_grad_norm_returns_the_total_2_norm(tt, case):
    result = tt.nn.utils.clip_grad_norm_(_with_grads(tt, case["grads"]), case["max_norm"])
    return [type(result).__name__, float(result)]


@clip_grad_norm_returns_the_total_2_norm.expected
def _(case):
    return ["float", math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in case["grads"]))]


@check(task="07.2", points=2, inputs=_grads(scale=(0.1, 0.9)), rtol=1e-5, atol=1e-6,
       describe=lambda case: f"clip_grad_norm_(parameters with grads of shapes {_shapes(case)}, max_norm="
                             f"{case['max_norm']:.4g}) below the total norm: [each grad after clipping, the "
                             f"grads still the same Tensor objects and float32]")
def clip_grad_norm_scales_every_grad_in_place(tt, case):
    parameters = _with_grads(tt, case["grads"])
    before = [p.grad for p in parameters]
    tt.nn.utils.clip_grad_norm_(iter(parameters), case["max_norm"])
    same = all(p.grad is g for p, g in zip(parameters, before))
    return [[p.grad.numpy() for p in parameters], bool(same and all(p.grad.dtype == np.float32 for p in parameters))]


@clip_grad_norm_scales_every_grad_in_place.expected
def _(case):
    total = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in case["grads"]))
    return [[g * (case["max_norm"] / (total + 1e-6)) for g in case["grads"]], True]


@check(task="07.2", points=1, inputs=_grads(scale=(1.01, 3.0)),
       describe=lambda case: f"clip_grad_norm_(parameters with grads of shapes {_shapes(case)}, max_norm="
                             f"{case['max_norm']:.4g}) above the total norm: the grads afterwards (unchanged)")
def clip_grad_norm_below_max_norm_changes_nothing(tt, case):
    parameters = _with_grads(tt, case["grads"])
    tt.nn.utils.clip_grad_norm_(parameters, case["max_norm"])
    return [p.grad.numpy() for p in parameters]


@clip_grad_norm_below_max_norm_changes_nothing.expected
def _(case):
    return case["grads"]


@check(task="07.2", points=2, inputs=st.tuples(_grads(scale=(0.1, 0.9)), st.sampled_from(["inf", "float"])).map(
           lambda pair: {**pair[0], "spelling": pair[1]}), rtol=1e-5,
       describe=lambda case: f"clip_grad_norm_(grads of shapes {_shapes(case)}, max_norm={case['max_norm']:.4g}, "
                             f"norm_type={'inf' if case['spelling'] == 'inf' else 'float(inf)'}) where max_norm "
                             f"is below the largest |grad|: [the norm returned, the grads after clipping]")
def clip_grad_norm_with_the_infinity_norm(tt, case):
    parameters = _with_grads(tt, case["grads"])
    norm_type = "inf" if case["spelling"] == "inf" else float("inf")
    # max_norm was drawn below the 2-norm; scale it to the max norm so clipping happens
    largest = max(float(np.max(np.abs(g))) for g in case["grads"])
    two_norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in case["grads"]))
    max_norm = case["max_norm"] * largest / two_norm
    result = tt.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)
    return [float(result), [p.grad.numpy() for p in parameters]]


@clip_grad_norm_with_the_infinity_norm.expected
def _(case):
    largest = max(float(np.max(np.abs(g.astype(np.float64)))) for g in case["grads"])
    two_norm = math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in case["grads"]))
    max_norm = case["max_norm"] * largest / two_norm
    if largest <= max_norm:
        return [largest, case["grads"]]
    return [largest, [g * (max_norm / (largest + 1e-6)) for g in case["grads"]]]


@check(task="07.2", points=1, inputs=st.tuples(_grads(scale=(0.1, 0.9)), st.sampled_from([1.0, 3.0])).map(
           lambda pair: {**pair[0], "p": pair[1]}), rtol=1e-5,
       describe=lambda case: f"clip_grad_norm_(grads of shapes {_shapes(case)}, max_norm={case['max_norm']:.4g}, "
                             f"norm_type={case['p']}): the norm returned")
def clip_grad_norm_with_other_p_norms(tt, case):
    return float(tt.nn.utils.clip_grad_norm_(_with_grads(tt, case["grads"]), case["max_norm"], norm_type=case["p"]))


@clip_grad_norm_with_other_p_norms.expected
def _(case):
    p = case["p"]
    return sum(float(np.sum(np.abs(g.astype(np.float64)) ** p)) for g in case["grads"]) ** (1 / p)


@check(task="07.2", points=1, inputs=_grads(scale=(0.1, 0.9)), rtol=1e-5,
       describe=lambda case: f"clip_grad_norm_ of [a tensor without grad, tensors with grads of shapes "
                             f"{_shapes(case)}, a tensor without grad], max_norm={case['max_norm']:.4g}: "
                             f"[the norm returned, the grads without grad still None]")
def clip_grad_norm_skips_parameters_without_grad(tt, case):
    first, last = (tt.Tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2))
    result = tt.nn.utils.clip_grad_norm_([first, *_with_grads(tt, case["grads"]), last], case["max_norm"])
    return [float(result), first.grad is None and last.grad is None]


@clip_grad_norm_skips_parameters_without_grad.expected
def _(case):
    return [math.sqrt(sum(float(np.sum(g.astype(np.float64) ** 2)) for g in case["grads"])), True]


# ---------------------------------------------------------------------------------------------------
# 07.3 batches


_sizes = st.fixed_dictionaries({"n": st.integers(0, 40), "batch_size": st.integers(1, 12)})


@check(task="07.3", points=1, inputs=_sizes,
       describe=lambda case: f"batches({case['n']}, {case['batch_size']}, shuffle=False)")
def batches_without_shuffle_are_consecutive_ranges(tt, case):
    return [np.asarray(batch).astype(np.int64) for batch in tt.batches(case["n"], case["batch_size"], shuffle=False)]


@batches_without_shuffle_are_consecutive_ranges.expected
def _(case):
    n, size = case["n"], case["batch_size"]
    return [np.arange(start, min(start + size, n), dtype=np.int64) for start in range(0, n, size)]


@check(task="07.3", points=2, inputs=_sizes.map(lambda case: {**case, "n": case["n"] + 10}),
       describe=lambda case: f"batches({case['n']}, {case['batch_size']}) (shuffled)")
def batches_with_shuffle_cover_every_index_once(tt, case):
    return [np.asarray(batch).astype(np.int64) for batch in tt.batches(case["n"], case["batch_size"])]


@batches_with_shuffle_cover_every_index_once.verdict
def _(case, output):
    n, size = case["n"], case["batch_size"]
    what = f"batches({n}, {size}) (shuffled)"
    sizes = [size] * (n // size) + ([n % size] if n % size else [])
    if not isinstance(output, list) or [np.shape(b) for b in output] != [(s,) for s in sizes]:
        got = [np.shape(b) for b in output] if isinstance(output, list) else output
        raise CheckFailed(f"{what}: expected {len(sizes)} index arrays of lengths {sizes} but got shapes {got!r:.120}")
    joined = np.concatenate(output) if output else np.zeros(0, np.int64)
    if sorted(joined.tolist()) != list(range(n)):
        raise CheckFailed(f"{what}: the batches together must hold every index 0..{n - 1} exactly once, got "
                          f"{joined.tolist()!r:.120}")
    if joined.tolist() == list(range(n)):
        raise CheckFailed(f"{what}: the indices come in order 0..{n - 1}; with shuffle=True they must be a "
                          f"random permutation")


@check(task="07.3", points=1, inputs=st.integers(0, 2 ** 16).map(lambda seed: {"seed": seed}),
       describe=lambda case: f"tt.manual_seed({case['seed']}); batches(20, 6) twice, and again after "
                             f"tt.manual_seed({case['seed'] + 1}): [first equals second, first equals third]")
def batches_shuffle_draws_from_the_default_generator(tt, case):
    def draw(seed):
        tt.manual_seed(seed)
        return np.concatenate(tt.batches(20, 6)).tolist()

    return [draw(case["seed"]) == draw(case["seed"]), draw(case["seed"]) == draw(case["seed"] + 1)]


@batches_shuffle_draws_from_the_default_generator.expected
def _(case):
    return [True, False]


@check(task="07.3", points=1, inputs=st.sampled_from([0, -1, -5]).map(lambda size: {"batch_size": size}),
       describe=lambda case: f"batches(10, {case['batch_size']}): the error raised")
def batches_with_a_batch_size_below_one_raises(tt, case):
    return capture_error(lambda: tt.batches(10, case["batch_size"]))["raised"]


@batches_with_a_batch_size_below_one_raises.expected
def _(case):
    return "ValueError"


# ---------------------------------------------------------------------------------------------------
# 07.4 train_epoch


@check(task="07.4", points=3, inputs=_regression(), examples=15, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, MSELoss, SGD(lr={case['lr']})) on {_data(case)}: "
                             f"[type of the result, mean loss, weight, bias]")
def train_epoch_of_linear_mse_sgd_matches_numpy(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = tt.optim.SGD(model.parameters(), lr=case["lr"])
    loss = tt.train_epoch(model, tt.nn.MSELoss(), optimizer, case["x"], case["y"],
                          batch_size=case["batch_size"], shuffle=False)
    return [type(loss).__name__, float(loss), model.weight.numpy(), model.bias.numpy()]


@train_epoch_of_linear_mse_sgd_matches_numpy.expected
def _(case):
    run = _run_epoch(case, _mse_step)
    return ["float", run["mean_loss"], *run["parameters"]]


@check(task="07.4", points=2, inputs=_classification(), examples=15, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, CrossEntropyLoss, SGD(lr={case['lr']}, momentum=0.9)) on "
                             f"{_data(case)}: [mean loss, weight, bias]")
def train_epoch_of_a_classifier_with_momentum_matches_numpy(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = tt.optim.SGD(model.parameters(), lr=case["lr"], momentum=0.9)
    loss = tt.train_epoch(model, tt.nn.CrossEntropyLoss(), optimizer, case["x"], case["y"],
                          batch_size=case["batch_size"], shuffle=False)
    return [float(loss), model.weight.numpy(), model.bias.numpy()]


@train_epoch_of_a_classifier_with_momentum_matches_numpy.expected
def _(case):
    run = _run_epoch(case, _ce_step, momentum=0.9)
    return [run["mean_loss"], *run["parameters"]]


@check(task="07.4", points=2, inputs=_regression(min_n=3), examples=15, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, MSELoss, SGD(lr={case['lr']})) on {_data(case)}: the "
                             f"[weight.grad, bias.grad] that each optimizer.step() sees (no accumulation "
                             f"across batches)")
def train_epoch_zeroes_the_gradients_before_each_batch(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = _RecordingOptimizer(tt.optim.SGD(model.parameters(), lr=case["lr"]), model.parameters())
    tt.train_epoch(model, tt.nn.MSELoss(), optimizer, case["x"], case["y"], batch_size=case["batch_size"],
                   shuffle=False)
    return optimizer.seen


@train_epoch_zeroes_the_gradients_before_each_batch.expected
def _(case):
    return _run_epoch(case, _mse_step)["grads"]


@check(task="07.4", points=2, inputs=_regression(min_n=3), examples=15, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, MSELoss, SGD(lr={case['lr']}), max_norm=0.05) on "
                             f"{_data(case)}: [the grads each step() sees, weight, bias]")
def train_epoch_clips_the_gradients_before_each_step(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = _RecordingOptimizer(tt.optim.SGD(model.parameters(), lr=case["lr"]), model.parameters())
    tt.train_epoch(model, tt.nn.MSELoss(), optimizer, case["x"], case["y"], batch_size=case["batch_size"],
                   shuffle=False, max_norm=0.05)
    return [optimizer.seen, model.weight.numpy(), model.bias.numpy()]


@train_epoch_clips_the_gradients_before_each_step.expected
def _(case):
    run = _run_epoch(case, _mse_step, max_norm=0.05)
    return [run["grads"], *run["parameters"]]


@check(task="07.4", points=1, inputs=_regression(), examples=5,
       describe=lambda case: f"train_epoch on a model left in eval mode ({_data(case)}): [model.training "
                             f"during each forward, model.training afterwards]")
def train_epoch_puts_the_model_in_training_mode(tt, case):
    model = _linear(tt, case["w"], case["b"]).eval()
    modes, mse = [], tt.nn.MSELoss()

    def loss_fn(output, target):
        modes.append(bool(model.training))
        return mse(output, target)

    tt.train_epoch(model, loss_fn, tt.optim.SGD(model.parameters(), lr=case["lr"]), case["x"], case["y"],
                   batch_size=case["batch_size"], shuffle=False)
    return [modes, bool(model.training)]


@train_epoch_puts_the_model_in_training_mode.expected
def _(case):
    return [[True] * -(-len(case["x"]) // case["batch_size"]), True]


@check(task="07.4", points=1, inputs=_regression(), examples=10, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(..., progress=record) on {_data(case)}: the calls "
                             f"(batch_index, n_batches, loss) recorded")
def train_epoch_reports_each_batch_to_progress(tt, case):
    model = _linear(tt, case["w"], case["b"])
    calls = []
    tt.train_epoch(model, tt.nn.MSELoss(), tt.optim.SGD(model.parameters(), lr=case["lr"]), case["x"], case["y"],
                   batch_size=case["batch_size"], shuffle=False,
                   progress=lambda index, total, loss: calls.append([int(index), int(total), float(loss)]))
    return calls


@train_epoch_reports_each_batch_to_progress.expected
def _(case):
    losses = _run_epoch(case, _mse_step)["losses"]
    return [[k, len(losses), loss] for k, loss in enumerate(losses)]


@check(task="07.4", points=1, inputs=_regression(min_n=5).map(lambda case: {**case, "seed": 7}), examples=10,
       **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, MSELoss, SGD(lr=0)) with shuffle=True on "
                             f"{len(case['x'])} examples, batch_size={case['batch_size']}, twice after "
                             f"tt.manual_seed(7): [mean loss, mean loss again]")
def train_epoch_with_shuffle_sees_every_example_once(tt, case):
    results = []
    for _ in range(2):
        tt.manual_seed(case["seed"])
        model = _linear(tt, case["w"], case["b"])
        results.append(float(tt.train_epoch(model, tt.nn.MSELoss(), tt.optim.SGD(model.parameters(), lr=0.0),
                                            case["x"], case["y"], batch_size=case["batch_size"])))
    return results


@train_epoch_with_shuffle_sees_every_example_once.expected
def _(case):
    x, y = case["x"].astype(np.float64), case["y"].astype(np.float64)
    loss = float(np.mean((x @ case["w"].T.astype(np.float64) + case["b"] - y) ** 2))
    return [loss, loss]


# ---------------------------------------------------------------------------------------------------
# 07.5 evaluate


def _eval_numpy(case):
    loss, _ = _cross_entropy(case["x"].astype(np.float64) @ case["w"].T + case["b"], case["y"])
    logits = case["x"].astype(np.float64) @ case["w"].T + case["b"]
    return [loss, float(np.mean(np.argmax(logits, axis=-1) == case["y"]))]


@check(task="07.5", points=2, inputs=_classification(max_n=12), examples=15, **TRAIN_TOL,
       describe=lambda case: f"evaluate(Linear, CrossEntropyLoss, {len(case['x'])} examples, "
                             f"batch_size={case['batch_size']}): [mean loss, accuracy, their types]")
def evaluate_returns_the_mean_loss_and_accuracy(tt, case):
    model = _linear(tt, case["w"], case["b"])
    loss, acc = tt.evaluate(model, tt.nn.CrossEntropyLoss(), case["x"], case["y"], batch_size=case["batch_size"])
    return [float(loss), float(acc), [type(loss).__name__, type(acc).__name__]]


@evaluate_returns_the_mean_loss_and_accuracy.expected
def _(case):
    return [*_eval_numpy(case), ["float", "float"]]


@check(task="07.5", points=2, inputs=_classification(max_n=12), examples=10, **TRAIN_TOL,
       describe=lambda case: f"evaluate(Sequential(Linear, Dropout(0.5)) in training mode, CrossEntropyLoss, "
                             f"{len(case['x'])} examples) twice: [first (loss, accuracy), second] (eval mode: "
                             f"Dropout passes everything)")
def evaluate_runs_in_eval_mode(tt, case):
    tt.manual_seed(0)
    model = tt.nn.Sequential(_linear(tt, case["w"], case["b"]), tt.nn.Dropout(0.5))
    results = []
    for _ in range(2):
        loss, acc = tt.evaluate(model, tt.nn.CrossEntropyLoss(), case["x"], case["y"], batch_size=case["batch_size"])
        results.append([float(loss), float(acc)])
    return results


@evaluate_runs_in_eval_mode.expected
def _(case):
    return [_eval_numpy(case)] * 2


@check(task="07.5", points=2, inputs=_classification(max_n=12), examples=5,
       describe=lambda case: f"evaluate(Linear, CrossEntropyLoss, {len(case['x'])} examples, batch_size="
                             f"{case['batch_size']}): for each batch [output.requires_grad, is_grad_enabled()], "
                             f"then whether every parameter's grad is still None")
def evaluate_records_no_graph(tt, case):
    model = _linear(tt, case["w"], case["b"])
    seen, ce = [], tt.nn.CrossEntropyLoss()

    def loss_fn(output, target):
        seen.append([bool(output.requires_grad), bool(tt.is_grad_enabled())])
        return ce(output, target)

    tt.evaluate(model, loss_fn, case["x"], case["y"], batch_size=case["batch_size"])
    return [seen, all(p.grad is None for p in model.parameters())]


@evaluate_records_no_graph.expected
def _(case):
    return [[[False, False]] * -(-len(case["x"]) // case["batch_size"]), True]


@check(task="07.5", points=1, inputs=_classification(max_n=12), examples=5,
       describe=lambda case: "evaluate on a model in training mode, then on one in eval mode: [model.training "
                             "during evaluation, model.training afterwards] for each")
def evaluate_restores_the_training_mode(tt, case):
    result = []
    for start_in_training in (True, False):
        model = _linear(tt, case["w"], case["b"]).train(start_in_training)
        modes, ce = [], tt.nn.CrossEntropyLoss()

        def loss_fn(output, target):
            modes.append(bool(model.training))
            return ce(output, target)

        tt.evaluate(model, loss_fn, case["x"], case["y"])
        result.append([any(modes), bool(model.training)])
    return result


@evaluate_restores_the_training_mode.expected
def _(case):
    return [[False, True], [False, False]]


@check(task="07.5", points=1, inputs=_regression(), examples=5, **TRAIN_TOL,
       describe=lambda case: f"evaluate(Linear, MSELoss, {len(case['x'])} examples with float targets): "
                             f"[mean loss, accuracy is nan]")
def evaluate_of_a_regression_gives_nan_accuracy(tt, case):
    model = _linear(tt, case["w"], case["b"])
    loss, acc = tt.evaluate(model, tt.nn.MSELoss(), case["x"], case["y"], batch_size=case["batch_size"])
    return [float(loss), bool(np.isnan(acc))]


@evaluate_of_a_regression_gives_nan_accuracy.expected
def _(case):
    x = case["x"].astype(np.float64)
    return [float(np.mean((x @ case["w"].T + case["b"] - case["y"]) ** 2)), True]


# ---------------------------------------------------------------------------------------------------
# 07.6 fit


@check(task="07.6", points=2, inputs=st.tuples(_classification(min_n=4), st.integers(1, 3)).map(
           lambda pair: {**pair[0], "epochs": pair[1]}), examples=5,
       describe=lambda case: f"fit(Linear, CrossEntropyLoss, SGD, epochs={case['epochs']}, progress=False): "
                             f"the history's keys, the length and type of each list")
def fit_returns_a_history_with_one_entry_per_epoch(tt, case):
    model = _linear(tt, case["w"], case["b"])
    data = (case["x"], case["y"])
    history = tt.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=case["lr"]), data, data,
                     epochs=case["epochs"], batch_size=case["batch_size"], progress=False, log=None)
    return {str(key): [len(values), sorted({type(v).__name__ for v in values})] for key, values in history.items()}


@fit_returns_a_history_with_one_entry_per_epoch.expected
def _(case):
    return {key: [case["epochs"], ["float"]] for key in ("train_loss", "test_loss", "test_accuracy", "seconds")}


@check(task="07.6", points=2, inputs=_classification(min_n=4, max_n=12), examples=8, **TRAIN_TOL,
       describe=lambda case: f"fit(Linear, CrossEntropyLoss, SGD(lr=0), train = test = {len(case['x'])} "
                             f"examples, epochs=2): [train_loss, test_loss, test_accuracy] of the history")
def fit_records_the_train_and_test_results_of_each_epoch(tt, case):
    model = _linear(tt, case["w"], case["b"])
    data = (case["x"], case["y"])
    history = tt.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.0), data, data,
                     epochs=2, batch_size=case["batch_size"], progress=False, log=None)
    return [[float(v) for v in history[key]] for key in ("train_loss", "test_loss", "test_accuracy")]


@fit_records_the_train_and_test_results_of_each_epoch.expected
def _(case):
    loss, acc = _eval_numpy(case)
    return [[loss, loss], [loss, loss], [acc, acc]]


def _full_batch_data(seed, max_norm):
    """130 to 140 examples (more than fit's default batch_size of 128), drawn from a seed: cheap to shrink."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(130, 141))
    return {"x": rng.uniform(-2, 2, (n, 2)).astype(np.float32), "y": rng.uniform(-2, 2, (n, 1)).astype(np.float32),
            "w": rng.uniform(-1, 1, (1, 2)).astype(np.float32), "b": rng.uniform(-1, 1, 1).astype(np.float32),
            "batch_size": n, "lr": 0.1, "max_norm": max_norm}


_full_batch = st.builds(_full_batch_data, st.integers(0, 2 ** 16), st.floats(0.01, 0.1))


@check(task="07.6", points=2, inputs=_full_batch, examples=5, **TRAIN_TOL,
       describe=lambda case: f"fit(Linear, MSELoss, SGD(lr=0.1), {len(case['x'])} examples, batch_size="
                             f"{case['batch_size']} (one batch), max_norm={case['max_norm']:.3g}, epochs=2): "
                             f"[weight, bias] afterwards")
def fit_passes_batch_size_and_max_norm_to_each_epoch(tt, case):
    model = _linear(tt, case["w"], case["b"])
    data = (case["x"], case["y"])
    tt.fit(model, tt.nn.MSELoss(), tt.optim.SGD(model.parameters(), lr=case["lr"]), data, data, epochs=2,
           batch_size=case["batch_size"], max_norm=case["max_norm"], progress=False, log=None)
    return [model.weight.numpy(), model.bias.numpy()]


@fit_passes_batch_size_and_max_norm_to_each_epoch.expected
def _(case):
    w, b = case["w"].astype(np.float64), case["b"].astype(np.float64)
    for _ in range(2):
        _, gw, gb = _mse_step(case["x"].astype(np.float64), case["y"].astype(np.float64), w, b)
        gw, gb = _clip([gw, gb], case["max_norm"])
        w, b = w - case["lr"] * gw, b - case["lr"] * gb
    return [w, b]


def _blobs(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    centres = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    return (centres[labels] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32), labels.astype(np.int64)


@check(task="07.6", points=2, inputs=st.integers(0, 1000).map(lambda seed: {"seed": seed}), examples=3,
       describe=lambda case: f"fit(Sequential(Linear(2, 16), ReLU, Linear(16, 3)), CrossEntropyLoss, Adam(lr=0.01), "
                             f"three separable blobs (seed {case['seed']}), epochs=5, batch_size=32): [first "
                             f"train loss, last train loss, last test accuracy]")
def fit_learns_a_separable_problem(tt, case):
    model = _mlp(tt, case["seed"], (2, 16, 3))
    history = tt.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.Adam(model.parameters(), lr=0.01),
                     _blobs(case["seed"], 300), _blobs(case["seed"] + 1, 100), epochs=5, batch_size=32,
                     progress=False, log=None)
    return [float(history["train_loss"][0]), float(history["train_loss"][-1]), float(history["test_accuracy"][-1])]


@fit_learns_a_separable_problem.verdict
def _(case, output):
    first, last, acc = output
    what = f"fit on three separable blobs (seed {case['seed']}) for 5 epochs"
    if not last < 0.5 * first:
        raise CheckFailed(f"{what}: expected the training loss to fall to less than half, got {first:.4f} in the "
                          f"first epoch and {last:.4f} in the last")
    if not acc >= 0.9:
        raise CheckFailed(f"{what}: expected a test accuracy of at least 90% after the last epoch, got {100 * acc:.1f}%")


@check(task="07.6", points=1, inputs=st.integers(1, 4).map(lambda epochs: {"epochs": epochs}),
       describe=lambda case: f"fit(..., epochs={case['epochs']}, scheduler=counter): how often scheduler.step() "
                             f"was called")
def fit_steps_the_scheduler_once_per_epoch(tt, case):
    class Counter:
        calls = 0

        def step(self):
            self.calls += 1

    scheduler = Counter()
    x, y = _blobs(0, 20)
    model = _mlp(tt, 0, (2, 4, 3))
    tt.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.1), (x, y), (x, y),
           epochs=case["epochs"], batch_size=8, scheduler=scheduler, progress=False, log=None)
    return scheduler.calls


@fit_steps_the_scheduler_once_per_epoch.expected
def _(case):
    return case["epochs"]


@check(task="07.6", points=1, inputs=st.integers(1, 4).map(lambda epochs: {"epochs": epochs}),
       describe=lambda case: f"fit(..., epochs={case['epochs']}, progress=False, log=lines.append): [number of "
                             f"lines logged, all of them strings, anything printed to stdout]")
def fit_logs_one_line_per_epoch(tt, case):
    lines, printed = [], io.StringIO()
    x, y = _blobs(0, 20)
    model = _mlp(tt, 0, (2, 4, 3))
    with contextlib.redirect_stdout(printed):
        tt.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.1), (x, y), (x, y),
               epochs=case["epochs"], batch_size=8, progress=False, log=lines.append)
    return [len(lines), all(isinstance(line, str) for line in lines), printed.getvalue() != ""]


@fit_logs_one_line_per_epoch.expected
def _(case):
    return [case["epochs"], True, False]


@check(task="07.6", points=1, inputs=st.integers(1, 3).map(lambda epochs: {"epochs": epochs}),
       describe=lambda case: f"fit(..., epochs={case['epochs']}, progress=True, log=None) printing to stdout: "
                             f"[a progress bar redrawn with '\\r' was printed, number of lines printed]")
def fit_prints_a_progress_bar_per_epoch(tt, case):
    printed = io.StringIO()
    x, y = _blobs(0, 20)
    model = _mlp(tt, 0, (2, 4, 3))
    with contextlib.redirect_stdout(printed):
        tt.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.1), (x, y), (x, y),
               epochs=case["epochs"], batch_size=8, progress=True, log=None)
    text = printed.getvalue()
    return ["\r" in text, text.count("\n")]


@fit_prints_a_progress_bar_per_epoch.expected
def _(case):
    return [True, case["epochs"]]


# ---------------------------------------------------------------------------------------------------
# 07.7 save_checkpoint


@check(task="07.7", points=2, inputs=_regression(), examples=5, **TRAIN_TOL,
       describe=lambda case: "save_checkpoint(path, Linear, SGD(lr=0, momentum=0.9) after one MSE step, epoch=3), "
                             "read back with np.load(path, allow_pickle=False): [sorted keys, model/weight, "
                             "model/bias, the momentum buffers, lr/momentum/params of the JSON param_groups, epoch]")
def save_checkpoint_writes_one_npz_with_flat_names(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = tt.optim.SGD(model.parameters(), lr=0.0, momentum=0.9)
    optimizer.zero_grad()
    tt.nn.MSELoss()(model(tt.Tensor(case["x"])), tt.Tensor(case["y"])).backward()
    optimizer.step()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.save_checkpoint(path, model, optimizer, epoch=3)
        with np.load(path, allow_pickle=False) as data:
            files = {key: data[key] for key in data.files}
    groups = json.loads(str(files["optimizer/param_groups"]))
    return [sorted(files), files["model/weight"], files["model/bias"],
            [files["optimizer/state/0/momentum_buffer"], files["optimizer/state/1/momentum_buffer"]],
            [[float(g["lr"]), float(g["momentum"]), [int(i) for i in g["params"]]] for g in groups],
            int(files["epoch"])]


@save_checkpoint_writes_one_npz_with_flat_names.expected
def _(case):
    _, gw, gb = _mse_step(case["x"].astype(np.float64), case["y"].astype(np.float64), case["w"].astype(np.float64),
                          case["b"].astype(np.float64))
    keys = ["epoch", "model/bias", "model/weight", "optimizer/param_groups", "optimizer/state/0/momentum_buffer",
            "optimizer/state/1/momentum_buffer"]
    return [keys, case["w"], case["b"], [gw, gb], [[0.0, 0.9, [0, 1]]], 3]


@check(task="07.7", points=1, inputs=st.sampled_from(["run.ckpt", "model", "weights.npz"]).map(
           lambda name: {"name": name}),
       describe=lambda case: f"save_checkpoint(folder/{case['name']!r}, Linear) in an empty folder: the files "
                             f"in the folder afterwards")
def save_checkpoint_writes_exactly_the_path_given(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        tt.save_checkpoint(os.path.join(folder, case["name"]), tt.nn.Linear(2, 1))
        return sorted(os.listdir(folder))


@save_checkpoint_writes_exactly_the_path_given.expected
def _(case):
    return [case["name"]]


@check(task="07.7", points=1,
       describe=lambda case: "save_checkpoint(path, Linear, config={'lr': 0.1}) (a dict would need pickle): the "
                             "error raised")
def save_checkpoint_refuses_extras_that_need_pickle(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        return capture_error(lambda: tt.save_checkpoint(os.path.join(folder, "c.npz"), tt.nn.Linear(2, 1),
                                                        config={"lr": 0.1}))["raised"]


@save_checkpoint_refuses_extras_that_need_pickle.verdict
def _(case, output):
    if output not in ("TypeError", "ValueError"):
        said = "nothing" if output is None else output
        raise CheckFailed(f"save_checkpoint with an extra that is a dict (it would need pickle): expected a "
                          f"TypeError but it raised {said}")


# ---------------------------------------------------------------------------------------------------
# 07.8 load_checkpoint


@st.composite
def _resume(draw):
    return {"optimizer": draw(st.sampled_from(["SGD", "Adam"])), "before": draw(st.integers(1, 3)),
            "after": draw(st.integers(1, 3)), "seed": draw(st.integers(0, 1000)), "n": draw(st.integers(4, 10))}


@check(task="07.8", points=3, inputs=_resume(), examples=6,
       describe=lambda case: f"MLP + {case['optimizer']} ({'momentum 0.9' if case['optimizer'] == 'SGD' else 'lr 0.01'}): "
                             f"{case['before']} steps, save_checkpoint, load_checkpoint into a fresh model and "
                             f"optimizer, {case['after']} more steps, compared with {case['before'] + case['after']} "
                             f"uninterrupted steps")
def load_checkpoint_resumes_training_exactly(tt, case):
    rng = np.random.default_rng(case["seed"])
    x = rng.standard_normal((case["n"], 3)).astype(np.float32)
    y = rng.integers(0, 4, case["n"]).astype(np.int64)
    model = _mlp(tt, case["seed"], (3, 5, 4))
    optimizer = _optimizer(tt, case["optimizer"], model.parameters())
    _steps(tt, model, optimizer, x, y, case["before"])
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.save_checkpoint(path, model, optimizer)
        uninterrupted = _steps(tt, model, optimizer, x, y, case["after"])
        resumed_model = _mlp(tt, case["seed"] + 1, (3, 5, 4))
        resumed_optimizer = _optimizer(tt, case["optimizer"], resumed_model.parameters())
        tt.load_checkpoint(path, resumed_model, resumed_optimizer)
    resumed = _steps(tt, resumed_model, resumed_optimizer, x, y, case["after"])
    return [[uninterrupted, _parameters(model)], [resumed, _parameters(resumed_model)]]


@load_checkpoint_resumes_training_exactly.verdict
def _(case, output):
    (losses, params), (resumed_losses, resumed_params) = output
    what = (f"{case['optimizer']}: {case['after']} steps after resuming from a checkpoint saved after "
            f"{case['before']} steps")
    if not np.allclose(resumed_losses, losses, rtol=1e-6, atol=1e-7):
        raise CheckFailed(f"{what}: expected the losses {np.round(losses, 6).tolist()} of the uninterrupted run but "
                          f"got {np.round(resumed_losses, 6).tolist()}",
                          f"{what}: the losses differ from those of the uninterrupted run")
    for index, (a, b) in enumerate(zip(params, resumed_params)):
        if b.dtype != np.float32 or not np.allclose(b, a, rtol=1e-6, atol=1e-7):
            raise CheckFailed(f"{what}: parameter {index} (shape {a.shape}) differs from the uninterrupted run's "
                              f"(or is not float32)")


@check(task="07.8", points=1,
       describe=lambda case: "save_checkpoint(path, model, optimizer, epoch=4, best=0.5, note='ok', losses=[3, 2]) "
                             "then load_checkpoint(path, fresh model, fresh optimizer): the extras returned "
                             "(type and value of each)")
def load_checkpoint_returns_the_extras(tt, case):
    model = _mlp(tt, 0, (2, 3, 2))
    optimizer = _optimizer(tt, "Adam", model.parameters())
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.save_checkpoint(path, model, optimizer, epoch=4, best=0.5, note="ok", losses=[3.0, 2.0])
        extras = tt.load_checkpoint(path, _mlp(tt, 1, (2, 3, 2)), _optimizer(tt, "Adam", model.parameters()))
    return {str(key): [type(value).__name__, value if not isinstance(value, np.ndarray) else value.tolist()]
            for key, value in extras.items()}


@load_checkpoint_returns_the_extras.expected
def _(case):
    return {"epoch": ["int", 4], "best": ["float", 0.5], "note": ["str", "ok"], "losses": ["ndarray", [3.0, 2.0]]}


@check(task="07.8", points=1, inputs=st.integers(0, 1000).map(lambda seed: {"seed": seed}), examples=3,
       describe=lambda case: "save_checkpoint(path, model, optimizer, epoch=2), then load_checkpoint(path, "
                             "fresh model) without an optimizer: [the fresh model's parameters equal the saved "
                             "ones, the extras' names]")
def load_checkpoint_restores_the_model_alone(tt, case):
    model = _mlp(tt, case["seed"], (3, 4, 2))
    optimizer = _optimizer(tt, "SGD", model.parameters())
    rng = np.random.default_rng(case["seed"])
    _steps(tt, model, optimizer, rng.standard_normal((5, 3)).astype(np.float32), np.array([0, 1, 1, 0, 1]), 2)
    fresh = _mlp(tt, case["seed"] + 1, (3, 4, 2))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.save_checkpoint(path, model, optimizer, epoch=2)
        extras = tt.load_checkpoint(path, fresh)
    same = all(np.array_equal(a, b) for a, b in zip(_parameters(model), _parameters(fresh)))
    return [bool(same), sorted(str(key) for key in extras)]


@load_checkpoint_restores_the_model_alone.expected
def _(case):
    return [True, ["epoch"]]


@check(task="07.8", points=1,
       describe=lambda case: "save_checkpoint of SGD(lr=0.05, momentum=0.5) and Adam(lr=0.002, betas=(0.8, 0.95)), "
                             "load_checkpoint into fresh SGD(lr=1, momentum=0.9) and Adam(lr=1): the restored "
                             "[lr, momentum] and [lr, betas]")
def load_checkpoint_restores_the_hyperparameters(tt, case):
    result = []
    for make, fresh, read in (
            (lambda p: tt.optim.SGD(p, lr=0.05, momentum=0.5), lambda p: tt.optim.SGD(p, lr=1.0, momentum=0.9),
             lambda g: [float(g["lr"]), float(g["momentum"])]),
            (lambda p: tt.optim.Adam(p, lr=0.002, betas=(0.8, 0.95)), lambda p: tt.optim.Adam(p, lr=1.0),
             lambda g: [float(g["lr"]), [float(b) for b in g["betas"]]])):
        model = _mlp(tt, 0, (2, 3, 2))
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "checkpoint.npz")
            tt.save_checkpoint(path, model, make(model.parameters()))
            restored = fresh(model.parameters())
            tt.load_checkpoint(path, model, restored)
        result.append(read(restored.param_groups[0]))
    return result


@load_checkpoint_restores_the_hyperparameters.expected
def _(case):
    return [[0.05, 0.5], [0.002, [0.8, 0.95]]]


@check(task="07.8", points=1,
       describe=lambda case: "save_checkpoint of an MLP (3, 4, 2), load_checkpoint into an MLP (3, 5, 2): the error "
                             "raised")
def load_checkpoint_into_another_architecture_raises(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.save_checkpoint(path, _mlp(tt, 0, (3, 4, 2)))
        return capture_error(lambda: tt.load_checkpoint(path, _mlp(tt, 0, (3, 5, 2))))["raised"]


@load_checkpoint_into_another_architecture_raises.expected
def _(case):
    return "RuntimeError"


@check(task="07.8", points=1,
       describe=lambda case: "save_checkpoint(path, model) without an optimizer, then load_checkpoint(path, model, "
                             "optimizer): whether an error was raised")
def load_checkpoint_without_optimizer_state_raises(tt, case):
    model = _mlp(tt, 0, (2, 3, 2))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.save_checkpoint(path, model)
        return capture_error(lambda: tt.load_checkpoint(path, model, _optimizer(tt, "SGD", model.parameters())))[
            "raised"] is not None


@load_checkpoint_without_optimizer_state_raises.expected
def _(case):
    return True
