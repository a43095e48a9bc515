"""Hidden suite of 07_training: accuracy, gradient clipping, mini-batches, the training and evaluation
loops, fit, and checkpoints.

Every `expected` re-derives the result in numpy (float64): the training checks run the same mini-batch
steps of a linear model by hand (forward, loss, gradients, clipping, SGD with momentum), so they use tiny
models, few examples and `shuffle=False` (or one batch, where order cannot matter). Checkpoint round
trips compare a resumed run with an uninterrupted one, both computed by the package, through a real .npz
file in a temporary directory made inside `compute`. The encoding of the optimizer's state into that file
is given code (`_optimizer_arrays`, `_optimizer_state`), so the checkpoint checks grade what the student
writes around it: the entries, the file, the refusal of pickle, the restored model and optimizer, the
extras. Variants of one behaviour (a norm type, a loss) are check families over a table giving each
variant's task and points; every result is a dict whose keys name its parts.
"""

import contextlib
import io
import json
import math
import os
import tempfile
import time

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from checklib import CheckFailed, arrays, assert_close, capture_error, check, expect_error

TRAIN_TOL = {"rtol": 1e-4, "atol": 1e-5}

# ---------------------------------------------------------------------------------------------------
# compute helpers: build models and run steps (they travel to the sandbox and reveal no answer)


def _linear(tt, weight, bias):
    """tt.nn.Linear with the given float32 weight (out, in) and bias (out,)."""
    model = tt.nn.Linear(weight.shape[1], weight.shape[0])
    model.weight.data[...], model.bias.data[...] = weight, bias
    return model


def _mlp(tt, seed, sizes):
    tt.manual_seed(seed)
    return tt.nn.Sequential(tt.nn.Linear(sizes[0], sizes[1]), tt.nn.ReLU(), tt.nn.Linear(sizes[1], sizes[2]))


def _parameters(model):
    names = ("weight 0", "bias 0", "weight 2", "bias 2")
    return {name: np.array(p.numpy()) for name, p in zip(names, model.parameters())}


class _Recording:
    """Wraps an optimizer and records the gradients each step() sees."""

    def __init__(self, optimizer, parameters):
        self.optimizer, self.parameters, self.seen = optimizer, list(parameters), {}

    def __getattr__(self, name):
        return getattr(self.optimizer, name)

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad()

    def step(self):
        self.seen[f"step {len(self.seen) + 1}"] = {name: None if p.grad is None else p.grad.numpy().copy()
                                                   for name, p in zip(("weight.grad", "bias.grad"), self.parameters)}
        self.optimizer.step()


class _Counter:
    """A scheduler that counts its step() calls."""
    calls = 0

    def step(self):
        self.calls += 1


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


def _with_grads(tt, grads):
    parameters = [tt.Tensor(np.zeros(g.shape, np.float32), requires_grad=True) for g in grads]
    for p, g in zip(parameters, grads):
        p.grad = tt.Tensor(g.copy())
    return parameters


def _blobs(seed, n):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    centres = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]])
    return (centres[labels] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32), labels.astype(np.int64)


def _small_fit(tt, epochs, **options):
    """fit of a small MLP on 20 blob points (batch_size=8, SGD): what it printed to stdout."""
    printed, (x, y), model = io.StringIO(), _blobs(0, 20), _mlp(tt, 0, (2, 4, 3))
    with contextlib.redirect_stdout(printed):
        tt.training.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.1), (x, y), (x, y),
               epochs=epochs, batch_size=8, **options)
    return printed.getvalue()


# ---------------------------------------------------------------------------------------------------
# the judge's side: numpy references (float64), strategies and words


def _mse_step(x, y, w, b):
    """Loss and gradients of mean((x @ w.T + b - y)**2) w.r.t. w and b."""
    diff = x @ w.T + b - y
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


STEP = {"MSELoss": _mse_step, "CrossEntropyLoss": _ce_step}


def _norm(grads, norm_type=None):
    """The joint p-norm of the grads (2 unless told; 'inf' and math.inf: the largest magnitude)."""
    flat = np.concatenate([np.abs(np.asarray(g, dtype=np.float64)).ravel() for g in grads])
    p = 2.0 if norm_type is None else float(norm_type)
    return float(flat.max()) if p == math.inf else float(np.sum(flat ** p) ** (1 / p))


def _clipped(grads, max_norm, norm_type=None):
    total = _norm(grads, norm_type)
    return [g * (max_norm / (total + 1e-6)) for g in grads] if total > max_norm else list(grads)


def _run_epoch(case):
    """The epoch of train_epoch(shuffle=False) with SGD(lr, momentum) and max_norm: the mean loss, final
    weight and bias, the per-batch losses and the gradients each step sees."""
    x, y = case["x"].astype(np.float64), case["y"]
    w, b = case["w"].astype(np.float64), case["b"].astype(np.float64)
    momentum, buffers, losses, seen, total = case.get("momentum", 0.0), None, [], {}, 0.0
    for start in range(0, len(x), case["batch_size"]):
        xb, yb = x[start:start + case["batch_size"]], y[start:start + case["batch_size"]]
        loss, gw, gb = STEP[case.get("loss", "MSELoss")](xb, yb, w, b)
        gw, gb = _clipped([gw, gb], case["max_norm"]) if case.get("max_norm") else (gw, gb)
        seen[f"step {len(seen) + 1}"] = {"weight.grad": gw, "bias.grad": gb}
        buffers = [gw, gb] if buffers is None or not momentum else [momentum * buffers[0] + gw,
                                                                       momentum * buffers[1] + gb]
        w, b = w - case["lr"] * buffers[0], b - case["lr"] * buffers[1]
        losses.append(loss)
        total += loss * len(xb)
    return {"mean loss": total / len(x), "weight": w, "bias": b, "losses": losses, "seen": seen}


def _evaluated(case):
    """evaluate's (mean loss, accuracy) in numpy: accuracy nan for float targets."""
    logits = case["x"].astype(np.float64) @ case["w"].T.astype(np.float64) + case["b"]
    if case.get("loss", "CrossEntropyLoss") == "MSELoss":
        return float(np.mean((logits - case["y"]) ** 2)), math.nan
    return _cross_entropy(logits, case["y"])[0], float(np.mean(np.argmax(logits, axis=-1) == case["y"]))




def _floats(shape, low=-2.0, high=2.0):
    return arrays(shape, np.float32, low, high)


@st.composite
def _regression(draw, min_n=2, max_n=9):
    n, fin, fout = draw(st.integers(min_n, max_n)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    return {"x": draw(_floats((n, fin))), "y": draw(_floats((n, fout))), "w": draw(_floats((fout, fin), -1, 1)),
            "b": draw(_floats((fout,), -1, 1)), "batch_size": draw(st.integers(1, 4)),
            "lr": draw(st.sampled_from([0.01, 0.05, 0.1])), "loss": "MSELoss"}


@st.composite
def _classification(draw, min_n=2, max_n=9, clear=False):
    """A linear classifier's data; `clear`: no row's two largest logits within 1e-4 (its accuracy cannot
    depend on float32 rounding)."""
    n, fin, classes = draw(st.integers(min_n, max_n)), draw(st.integers(1, 3)), draw(st.integers(2, 4))
    case = {"x": draw(_floats((n, fin))), "y": draw(arrays((n,), np.int64, 0, classes - 1)),
            "w": draw(_floats((classes, fin), -1, 1)), "b": draw(_floats((classes,), -1, 1)),
            "batch_size": draw(st.integers(1, 4)), "lr": draw(st.sampled_from([0.05, 0.1])), "loss": "CrossEntropyLoss"}
    top = np.sort(case["x"].astype(np.float64) @ case["w"].T.astype(np.float64) + case["b"], axis=-1)[:, -2:]
    assume(not clear or np.all(top[:, 1] - top[:, 0] > 1e-4))
    return case


def _data(case):
    return f"{len(case['x'])} examples of {case['x'].shape[1]} features, batch_size={case['batch_size']}, shuffle=False"


# ---------------------------------------------------------------------------------------------------
# 07.1 accuracy


@st.composite
def _logits_targets(draw, batch_dims, kind):
    shape = tuple(draw(st.integers(1, 6)) for _ in range(batch_dims))
    classes = draw(st.integers(1, 5))
    values = st.sampled_from([-1.0, 0.0, 0.5, 2.0]) if draw(st.booleans()) else st.floats(-5, 5, width=32)
    size = int(np.prod(shape)) * classes
    logits = np.array(draw(st.lists(values, min_size=size, max_size=size)), dtype=np.float32)
    return {"logits": logits.reshape(shape + (classes,)), "targets": draw(arrays(shape, np.int64, 0, classes - 1)),
            "as": kind}


ACCURACY = {"(N, C) arrays": ("07.1", 1, _logits_targets(1, "array")),
            "(N, C) Tensors": ("07.1", 1, _logits_targets(1, "Tensor")),
            "(B, T, C) arrays, a batch of sequences": ("07.1", 1, _logits_targets(2, "array"))}


@check(variants={v: row[:3] for v, row in ACCURACY.items()},
       describe=lambda case: f"accuracy(logits, targets) for {case['as']}s of shapes {case['logits'].shape} and "
                             f"{case['targets'].shape} (ties in a row go to the first maximum)")
def accuracy_is_the_fraction_of_correct_argmax(tt, case):
    as_input = tt.Tensor if case["as"] == "Tensor" else np.asarray
    return tt.training.accuracy(as_input(case["logits"]), as_input(case["targets"]))


accuracy_is_the_fraction_of_correct_argmax.expected(
    lambda case: float(np.mean(np.argmax(case["logits"], axis=-1) == case["targets"])))


@check(task="07.1", points=1, inputs=_logits_targets(1, "array"),
       describe=lambda case: f"accuracy(logits, targets) of shapes {case['logits'].shape} and {case['targets'].shape}"
                             f", given as numpy arrays and as Tensors: the type of the result")
def accuracy_returns_a_python_float(tt, case):
    return {"for arrays": type(tt.training.accuracy(case["logits"], case["targets"])).__name__,
            "for Tensors": type(tt.training.accuracy(tt.Tensor(case["logits"]), tt.Tensor(case["targets"]))).__name__}


accuracy_returns_a_python_float.expected(lambda case: {"for arrays": "float", "for Tensors": "float"})


@check(task="07.1", points=1, guard=True, inputs=st.integers(2, 6).map(lambda n: {"n": n}),
       describe=lambda case: f"accuracy(logits of shape ({case['n']}, 3), targets of shape ({case['n']}, 1))")
def accuracy_with_mismatched_shapes_raises(tt, case):
    return capture_error(lambda: tt.training.accuracy(np.zeros((case["n"], 3), np.float32), np.zeros((case["n"], 1), np.int64)))


accuracy_with_mismatched_shapes_raises.verdict(lambda case, output: expect_error(
    f"accuracy(logits of shape ({case['n']}, 3), targets of shape ({case['n']}, 1))", output, "ValueError"))

# ---------------------------------------------------------------------------------------------------
# 07.2 clip_grad_norm_


@st.composite
def _grads(draw, scale=(0.1, 0.9), norm_type=st.none(), magnitude=2.0):
    """Grads of a visible norm and a max_norm of `scale` times their norm of the drawn norm_type."""
    count = draw(st.integers(1, 3))
    shapes = [tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(1, 2)))) for _ in range(count)]
    grads = [draw(_floats(shape, -magnitude, magnitude)) for shape in shapes]
    if _norm(grads) < 0.01 * magnitude:
        grads[0] = grads[0] + np.float32(magnitude / 2)
    norm_type = draw(norm_type)
    return {"grads": grads, "norm_type": norm_type, "max_norm": draw(st.floats(*scale)) * _norm(grads, norm_type)}


def _shapes(case):
    return ", ".join(str(g.shape) for g in case["grads"])


CLIP = {"norm_type=2 (the default), max_norm below the norm": ("07.2", 1, _grads()),
        "norm_type=2, max_norm above the norm (nothing changes)": ("07.2", 1, _grads(scale=(1.01, 3.0))),
        "norm_type=2, grads of magnitude about 1e-4 (max_norm / (total + 1e-6) shows)": ("07.2", 1, _grads(
            magnitude=2.0 ** -13)),
        "norm_type=inf or 'inf'": ("07.2", 1, _grads(norm_type=st.sampled_from(["inf", math.inf]))),
        "norm_type=1": ("07.2", 1, _grads(norm_type=st.just(1.0))),
        "norm_type=3": ("07.2", 1, _grads(norm_type=st.just(3.0)))}


@check(rtol=1e-5, atol=1e-10, variants={v: row[:3] for v, row in CLIP.items()},
       describe=lambda case: f"clip_grad_norm_(parameters with grads of shapes {_shapes(case)}, max_norm="
                             f"{case['max_norm']:.4g}" + ("" if case["norm_type"] is None else
                                                          f", norm_type={case['norm_type']!r}") + ")")
def clip_grad_norm_returns_the_norm_and_scales_the_grads(tt, case):
    parameters = _with_grads(tt, case["grads"])
    options = {} if case["norm_type"] is None else {"norm_type": case["norm_type"]}
    norm = tt.nn.utils.clip_grad_norm_(parameters, case["max_norm"], **options)
    return {"the norm returned": float(norm), **{f"p{i}.grad after": p.grad.numpy() for i, p in enumerate(parameters)}}


@clip_grad_norm_returns_the_norm_and_scales_the_grads.expected
def _(case):
    grads = _clipped(case["grads"], case["max_norm"], case["norm_type"])
    return {"the norm returned": _norm(case["grads"], case["norm_type"]),
            **{f"p{i}.grad after": g for i, g in enumerate(grads)}}


@check(task="07.2", points=2, inputs=_grads(), rtol=1e-5,
       describe=lambda case: f"clip_grad_norm_(iter(parameters), max_norm={case['max_norm']:.4g}) below the norm of "
                             f"grads of shapes {_shapes(case)}, with old_i = p_i.grad taken before")
def clip_grad_norm_scales_the_grads_in_place(tt, case):
    parameters = _with_grads(tt, case["grads"])
    old = [p.grad for p in parameters]
    tt.nn.utils.clip_grad_norm_(iter(parameters), case["max_norm"])
    return {**{f"old_{i}": g.numpy() for i, g in enumerate(old)}, **{f"p{i}.grad.dtype": str(p.grad.dtype)
                                                                    for i, p in enumerate(parameters)}}


clip_grad_norm_scales_the_grads_in_place.expected(lambda case: {
    **{f"old_{i}": g for i, g in enumerate(_clipped(case["grads"], case["max_norm"]))},
    **{f"p{i}.grad.dtype": "float32" for i in range(len(case["grads"]))}})


@check(task="07.2", points=1, inputs=_grads(), rtol=1e-5,
       describe=lambda case: f"clip_grad_norm_([first, tensors with grads of shapes {_shapes(case)}, last], "
                             f"max_norm={case['max_norm']:.4g}) where first and last have no grad, then "
                             f"clip_grad_norm_([first, last], max_norm)")
def clip_grad_norm_skips_parameters_without_grad(tt, case):
    first, last = (tt.Tensor(np.ones(2, np.float32), requires_grad=True) for _ in range(2))
    norm = tt.nn.utils.clip_grad_norm_([first, *_with_grads(tt, case["grads"]), last], case["max_norm"])
    return {"the norm returned": float(norm), "first.grad is None": first.grad is None,
            "last.grad is None": last.grad is None,
            "the norm of [first, last] (no grad at all)": tt.nn.utils.clip_grad_norm_([first, last], case["max_norm"])}


clip_grad_norm_skips_parameters_without_grad.expected(lambda case: {
    "the norm returned": _norm(case["grads"]), "first.grad is None": True, "last.grad is None": True,
    "the norm of [first, last] (no grad at all)": 0.0})


@check(task="07.2", points=1, inputs=_grads(scale=(0.5, 3.0)),
       describe=lambda case: f"clip_grad_norm_(parameters with grads of shapes {_shapes(case)}, max_norm="
                             f"{case['max_norm']:.4g}): the type of the result")
def clip_grad_norm_returns_a_python_float(tt, case):
    return type(tt.nn.utils.clip_grad_norm_(_with_grads(tt, case["grads"]), case["max_norm"])).__name__


clip_grad_norm_returns_a_python_float.expected(lambda case: "float")

# ---------------------------------------------------------------------------------------------------
# 07.3 batches

_sizes = st.fixed_dictionaries({"n": st.integers(0, 40), "batch_size": st.integers(1, 12)})


@check(task="07.3", points=1, inputs=_sizes, describe=lambda case: f"batches({case['n']}, {case['batch_size']}, "
                                                                   f"shuffle=False)")
def batches_without_shuffle_are_consecutive_ranges(tt, case):
    return {f"batch {k}": np.asarray(batch).astype(np.int64)
            for k, batch in enumerate(tt.training.batches(case["n"], case["batch_size"], shuffle=False))}


batches_without_shuffle_are_consecutive_ranges.expected(lambda case: {
    f"batch {k}": np.arange(start, min(start + case["batch_size"], case["n"]), dtype=np.int64)
    for k, start in enumerate(range(0, case["n"], case["batch_size"]))})


@check(task="07.3", points=2, inputs=_sizes.map(lambda case: {**case, "n": case["n"] + 10}),
       describe=lambda case: f"batches({case['n']}, {case['batch_size']}) (shuffled)")
def batches_with_shuffle_cover_every_index_once(tt, case):
    return [np.asarray(batch).astype(np.int64) for batch in tt.training.batches(case["n"], case["batch_size"])]


@batches_with_shuffle_cover_every_index_once.verdict
def _(case, output):
    n, size = case["n"], case["batch_size"]
    what, sizes = f"batches({n}, {size}) (shuffled)", [size] * (n // size) + ([n % size] if n % size else [])
    if [np.shape(b) for b in output] != [(s,) for s in sizes]:
        raise CheckFailed(f"{what}: expected {len(sizes)} index arrays of lengths {sizes} but got shapes "
                          f"{[np.shape(b) for b in output]!r:.120}")
    joined = np.concatenate(output).tolist() if output else []
    if sorted(joined) != list(range(n)):
        raise CheckFailed(f"{what}: the batches together must hold every index 0..{n - 1} exactly once, got "
                          f"{joined!r:.120}")
    if joined == list(range(n)):
        raise CheckFailed(f"{what}: the indices come in order 0..{n - 1}; shuffled, they must be a random permutation")


@check(task="07.3", points=1, inputs=st.integers(0, 2 ** 16).map(lambda seed: {"seed": seed}),
       describe=lambda case: f"np.concatenate(batches(20, 6)) after tt.manual_seed({case['seed']}), again after "
                             f"tt.manual_seed({case['seed']}) and after tt.manual_seed({case['seed'] + 1})")
def batches_shuffle_draws_from_the_default_generator(tt, case):
    def draw(seed):
        tt.manual_seed(seed)
        return np.concatenate(tt.training.batches(20, 6)).astype(np.int64)
    return {"first": draw(case["seed"]), "second": draw(case["seed"]), "third": draw(case["seed"] + 1)}


@batches_shuffle_draws_from_the_default_generator.verdict
def _(case, output):
    what = f"batches(20, 6) after tt.manual_seed({case['seed']})"
    if not np.array_equal(output["first"], output["second"]):
        sentence = (f"{what}: the same seed gave {output['first'].tolist()} and then {output['second'].tolist()}; "
                    f"the order must come from tt's default generator")
        raise CheckFailed(sentence, sentence)
    if np.array_equal(output["first"], output["third"]):
        sentence = (f"{what}: seeds {case['seed']} and {case['seed'] + 1} gave the same order "
                    f"{output['first'].tolist()}; the order must come from tt's default generator")
        raise CheckFailed(sentence, sentence)


@check(task="07.3", points=1, inputs=st.sampled_from([0, -1, -5]).map(lambda size: {"batch_size": size}),
       describe=lambda case: f"batches(10, {case['batch_size']})")
def batches_with_a_batch_size_below_one_raises(tt, case):
    return capture_error(lambda: tt.training.batches(10, case["batch_size"]))


batches_with_a_batch_size_below_one_raises.verdict(lambda case, output: expect_error(
    f"batches(10, {case['batch_size']})", output, "ValueError", ("batch_size", "batch size")))

# ---------------------------------------------------------------------------------------------------
# 07.4 train_epoch

EPOCHS = {"Linear, MSELoss, SGD": ("07.4", 3, _regression()),
          "Linear, CrossEntropyLoss, SGD(momentum=0.9)": ("07.4", 3, _classification().map(
              lambda case: {**case, "momentum": 0.9})),
          "Linear, MSELoss, SGD, max_norm=0.05": ("07.4", 4, _regression(min_n=3).map(
              lambda case: {**case, "max_norm": 0.05}))}


@check(examples=15, **TRAIN_TOL, variants={v: row[:3] for v, row in EPOCHS.items()},
       describe=lambda case: f"train_epoch(Linear, {case['loss']}, SGD(lr={case['lr']}, momentum="
                             f"{case.get('momentum', 0.0)}){', max_norm=0.05' if case.get('max_norm') else ''}) on "
                             f"{_data(case)}")
def train_epoch_matches_numpy_step_by_step(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = _Recording(tt.optim.SGD(model.parameters(), lr=case["lr"], momentum=case.get("momentum", 0.0)),
                           model.parameters())
    loss = tt.training.train_epoch(model, getattr(tt.nn, case["loss"])(), optimizer, case["x"], case["y"],
                          batch_size=case["batch_size"], shuffle=False, max_norm=case.get("max_norm"))
    return {"the grads each step() saw": optimizer.seen, "the mean loss returned": float(loss),
            "weight": model.weight.numpy(), "bias": model.bias.numpy()}


@train_epoch_matches_numpy_step_by_step.expected
def _(case):
    run = _run_epoch(case)
    return {"the grads each step() saw": run["seen"], "the mean loss returned": run["mean loss"],
            "weight": run["weight"], "bias": run["bias"]}


@check(task="07.4", points=1, inputs=_regression(), examples=5,
       describe=lambda case: f"train_epoch(Linear in eval mode, MSELoss, SGD) on {_data(case)}")
def train_epoch_puts_the_model_in_training_mode(tt, case):
    model, modes, mse = _linear(tt, case["w"], case["b"]).eval(), [], tt.nn.MSELoss()

    def loss_fn(output, target):
        modes.append(bool(model.training))
        return mse(output, target)

    tt.training.train_epoch(model, loss_fn, tt.optim.SGD(model.parameters(), lr=case["lr"]), case["x"], case["y"],
                   batch_size=case["batch_size"], shuffle=False)
    return {"model.training at each loss": modes, "model.training afterwards": bool(model.training)}


train_epoch_puts_the_model_in_training_mode.expected(lambda case: {
    "model.training at each loss": [True] * -(-len(case["x"]) // case["batch_size"]),
    "model.training afterwards": True})


@check(task="07.4", points=1, inputs=_regression(), examples=10, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, MSELoss, SGD(lr={case['lr']}), progress=record) on {_data(case)}: "
                             f"the arguments (batch_index, n_batches, loss) of each call")
def train_epoch_reports_each_batch_to_progress(tt, case):
    model, calls = _linear(tt, case["w"], case["b"]), []
    tt.training.train_epoch(model, tt.nn.MSELoss(), tt.optim.SGD(model.parameters(), lr=case["lr"]), case["x"], case["y"],
                   batch_size=case["batch_size"], shuffle=False,
                   progress=lambda index, total, loss: calls.append([int(index), int(total), float(loss)]))
    return {f"call {k + 1}": call for k, call in enumerate(calls)}


train_epoch_reports_each_batch_to_progress.expected(lambda case: {
    f"call {k + 1}": [k, len(_run_epoch(case)["losses"]), loss] for k, loss in enumerate(_run_epoch(case)["losses"])})


@check(task="07.4", points=1, inputs=_regression(min_n=5), examples=10, **TRAIN_TOL,
       describe=lambda case: f"train_epoch(Linear, MSELoss, SGD(lr=0)) shuffled (the default) on {len(case['x'])} "
                             f"examples, batch_size={case['batch_size']}, after tt.manual_seed(7), twice")
def train_epoch_with_shuffle_sees_every_example_once(tt, case):
    results = []
    for _ in range(2):
        tt.manual_seed(7)
        model = _linear(tt, case["w"], case["b"])
        results.append(tt.training.train_epoch(model, tt.nn.MSELoss(), tt.optim.SGD(model.parameters(), lr=0.0), case["x"],
                                      case["y"], batch_size=case["batch_size"]))
    return {"the mean loss returned": float(results[0]), "its type": type(results[0]).__name__,
            "the mean loss the second time": float(results[1])}


@train_epoch_with_shuffle_sees_every_example_once.expected
def _(case):
    loss = _mse_step(case["x"].astype(np.float64), case["y"].astype(np.float64), case["w"].astype(np.float64),
                     case["b"].astype(np.float64))[0]
    return {"the mean loss returned": loss, "its type": "float", "the mean loss the second time": loss}


# ---------------------------------------------------------------------------------------------------
# 07.5 evaluate

EVALUATE = {"CrossEntropyLoss, integer targets": ("07.5", 2, _classification(max_n=12, clear=True)),
            "MSELoss, float targets (accuracy nan)": ("07.5", 1, _regression())}


@check(examples=15, **TRAIN_TOL, variants={v: row[:3] for v, row in EVALUATE.items()},
       describe=lambda case: f"evaluate(Linear, {case['loss']}, {len(case['x'])} examples, batch_size="
                             f"{case['batch_size']})")
def evaluate_returns_the_mean_loss_and_accuracy(tt, case):
    loss, acc = tt.training.evaluate(_linear(tt, case["w"], case["b"]), getattr(tt.nn, case["loss"])(), case["x"], case["y"],
                            batch_size=case["batch_size"])
    return {"mean loss": float(loss), "accuracy": float(acc), "type of the loss": type(loss).__name__,
            "type of the accuracy": type(acc).__name__}


evaluate_returns_the_mean_loss_and_accuracy.expected(lambda case: {
    "mean loss": _evaluated(case)[0], "accuracy": _evaluated(case)[1], "type of the loss": "float",
    "type of the accuracy": "float"})


@check(task="07.5", points=2, inputs=_classification(max_n=12, clear=True), examples=10, **TRAIN_TOL,
       describe=lambda case: f"evaluate(Sequential(Linear, Dropout(0.5)) left in training mode, CrossEntropyLoss, "
                             f"{len(case['x'])} examples) twice (in eval mode Dropout passes everything)")
def evaluate_runs_in_eval_mode(tt, case):
    tt.manual_seed(0)
    model = tt.nn.Sequential(_linear(tt, case["w"], case["b"]), tt.nn.Dropout(0.5))
    return {call: [float(v) for v in tt.training.evaluate(model, tt.nn.CrossEntropyLoss(), case["x"], case["y"],
                                                 batch_size=case["batch_size"])] for call in ("first", "second")}


evaluate_runs_in_eval_mode.expected(lambda case: {"first": list(_evaluated(case)), "second": list(_evaluated(case))})


@check(task="07.5", points=2, inputs=_classification(max_n=12), examples=5,
       describe=lambda case: f"evaluate(Linear, CrossEntropyLoss, {len(case['x'])} examples, batch_size="
                             f"{case['batch_size']}), the loss function recording what it sees")
def evaluate_records_no_graph(tt, case):
    model, seen, ce = _linear(tt, case["w"], case["b"]), {}, tt.nn.CrossEntropyLoss()

    def loss_fn(output, target):
        seen[f"batch {len(seen) + 1}: output.requires_grad, is_grad_enabled()"] = [bool(output.requires_grad),
                                                                                    bool(tt.is_grad_enabled())]
        return ce(output, target)

    tt.training.evaluate(model, loss_fn, case["x"], case["y"], batch_size=case["batch_size"])
    return {**seen, "each parameter's grad is None": [p.grad is None for p in model.parameters()]}


evaluate_records_no_graph.expected(lambda case: {
    **{f"batch {k + 1}: output.requires_grad, is_grad_enabled()": [False, False]
       for k in range(-(-len(case["x"]) // case["batch_size"]))}, "each parameter's grad is None": [True, True]})


@check(task="07.5", points=1, inputs=_classification(max_n=12), examples=5,
       describe=lambda case: "evaluate on a Linear in training mode, then on one in eval mode, the loss function "
                             "recording model.training")
def evaluate_restores_the_training_mode(tt, case):
    result = {}
    for mode in ("training", "eval"):
        model, modes, ce = _linear(tt, case["w"], case["b"]).train(mode == "training"), [], tt.nn.CrossEntropyLoss()

        def loss_fn(output, target):
            modes.append(bool(model.training))
            return ce(output, target)

        tt.training.evaluate(model, loss_fn, case["x"], case["y"])
        result[f"started in {mode} mode"] = {"model.training during evaluation": modes,
                                             "model.training afterwards": bool(model.training)}
    return result


evaluate_restores_the_training_mode.expected(lambda case: {
    f"started in {mode} mode": {"model.training during evaluation": [False],
                                "model.training afterwards": mode == "training"} for mode in ("training", "eval")})


@check(task="07.5", points=1, guard=True, inputs=_classification(max_n=12), examples=5,
       describe=lambda case: f"tt.manual_seed(3), evaluate(Linear, CrossEntropyLoss, {len(case['x'])} examples, "
                             f"batch_size={case['batch_size']}), tt.randn(8): against tt.randn(8) right after "
                             f"tt.manual_seed(3)")
def evaluate_draws_no_random_numbers(tt, case):
    model, loss_fn = _linear(tt, case["w"], case["b"]), tt.nn.CrossEntropyLoss()   # Linear's init draws
    tt.manual_seed(3)
    tt.training.evaluate(model, loss_fn, case["x"], case["y"], batch_size=case["batch_size"])
    after = tt.randn(8).numpy()
    tt.manual_seed(3)
    return {"drawn after evaluate": after, "drawn without evaluate": tt.randn(8).numpy()}


@evaluate_draws_no_random_numbers.verdict
def _(case, output):
    if not np.array_equal(output["drawn after evaluate"], output["drawn without evaluate"]):
        sentence = (f"evaluate on {len(case['x'])} examples changed the random numbers drawn after it; it must not "
                    f"shuffle (batches(..., shuffle=False)) nor draw from tt's default generator in any other way")
        raise CheckFailed(sentence, sentence)

# ---------------------------------------------------------------------------------------------------
# 07.6 fit

_epochs = st.integers(1, 4).map(lambda epochs: {"epochs": epochs})


@check(task="07.6", points=1, inputs=st.tuples(_classification(min_n=4), st.integers(1, 3)).map(
           lambda pair: {**pair[0], "epochs": pair[1]}), examples=5,
       describe=lambda case: f"the history of fit(Linear, CrossEntropyLoss, SGD, epochs={case['epochs']}, "
                             f"progress=False)")
def fit_returns_a_history_with_one_entry_per_epoch(tt, case):
    model, data = _linear(tt, case["w"], case["b"]), (case["x"], case["y"])
    history = tt.training.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=case["lr"]), data, data,
                     epochs=case["epochs"], batch_size=case["batch_size"], progress=False, log=None)
    return {str(key): {"entries": len(values), "types": ", ".join(sorted({type(v).__name__ for v in values}))}
            for key, values in history.items()}


fit_returns_a_history_with_one_entry_per_epoch.expected(lambda case: {
    key: {"entries": case["epochs"], "types": "float"}
    for key in ("train_loss", "test_loss", "test_accuracy", "seconds")})


@check(task="07.6", points=1, inputs=st.integers(1, 3).map(lambda epochs: {"epochs": epochs}), examples=3,
       describe=lambda case: f"fit(MLP, CrossEntropyLoss, SGD, epochs={case['epochs']}, progress=False, log=None) on "
                             f"300 blob points, timed around the call")
def fit_times_each_epoch(tt, case):
    model, (x, y) = _mlp(tt, 0, (2, 16, 3)), _blobs(0, 300)
    start = time.perf_counter()
    history = tt.training.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.1), (x, y), (x, y),
                     epochs=case["epochs"], batch_size=32, progress=False, log=None)
    wall = time.perf_counter() - start
    return {"history['seconds']": [float(s) for s in history["seconds"]], "seconds of the call": wall}


@fit_times_each_epoch.verdict
def _(case, output):
    seconds, wall = output["history['seconds']"], output["seconds of the call"]
    what = f"fit(..., epochs={case['epochs']}) that took {wall:.3f} s in all"
    if len(seconds) != case["epochs"] or any(s < 0 for s in seconds) or sum(seconds) > wall + 1e-9:
        sentence = (f"{what}: history['seconds'] is {[round(s, 4) for s in seconds]}; expected each epoch's time "
                    f"(from time.perf_counter()), none negative and together at most the time of the call")
        raise CheckFailed(sentence, sentence)


@check(task="07.6", points=2, inputs=_classification(min_n=4, max_n=12, clear=True), examples=8, **TRAIN_TOL,
       describe=lambda case: f"the history of fit(Linear, CrossEntropyLoss, SGD(lr=0), train = test = "
                             f"{len(case['x'])} examples, epochs=2)")
def fit_records_the_train_and_test_results_of_each_epoch(tt, case):
    model, data = _linear(tt, case["w"], case["b"]), (case["x"], case["y"])
    history = tt.training.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.SGD(model.parameters(), lr=0.0), data, data,
                     epochs=2, batch_size=case["batch_size"], progress=False, log=None)
    return {key: [float(v) for v in history[key]] for key in ("train_loss", "test_loss", "test_accuracy")}


fit_records_the_train_and_test_results_of_each_epoch.expected(lambda case: {
    "train_loss": [_evaluated(case)[0]] * 2, "test_loss": [_evaluated(case)[0]] * 2,
    "test_accuracy": [_evaluated(case)[1]] * 2})


def _full_batch_data(seed, max_norm):
    """130 to 140 examples (more than fit's default batch_size of 128), drawn from a seed: cheap to shrink."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(130, 141))
    return {"x": rng.uniform(-2, 2, (n, 2)).astype(np.float32), "y": rng.uniform(-2, 2, (n, 1)).astype(np.float32),
            "w": rng.uniform(-1, 1, (1, 2)).astype(np.float32), "b": rng.uniform(-1, 1, 1).astype(np.float32),
            "batch_size": n, "lr": 0.1, "max_norm": max_norm}


@check(task="07.6", points=2, inputs=st.builds(_full_batch_data, st.integers(0, 2 ** 16), st.floats(0.01, 0.1)),
       examples=5, **TRAIN_TOL,
       describe=lambda case: f"fit(Linear, MSELoss, SGD(lr=0.1), {len(case['x'])} examples, batch_size="
                             f"{case['batch_size']} (one batch), max_norm={case['max_norm']:.3g}, epochs=2)")
def fit_passes_batch_size_and_max_norm_to_each_epoch(tt, case):
    model, data = _linear(tt, case["w"], case["b"]), (case["x"], case["y"])
    tt.training.fit(model, tt.nn.MSELoss(), tt.optim.SGD(model.parameters(), lr=case["lr"]), data, data, epochs=2,
           batch_size=case["batch_size"], max_norm=case["max_norm"], progress=False, log=None)
    return {"weight": model.weight.numpy(), "bias": model.bias.numpy()}


@fit_passes_batch_size_and_max_norm_to_each_epoch.expected
def _(case):
    first = _run_epoch(case)
    second = _run_epoch({**case, "w": first["weight"], "b": first["bias"]})
    return {"weight": second["weight"], "bias": second["bias"]}


@check(task="07.6", points=2, inputs=st.integers(0, 1000).map(lambda seed: {"seed": seed}), examples=3,
       describe=lambda case: f"fit(Sequential(Linear(2, 16), ReLU, Linear(16, 3)), CrossEntropyLoss, Adam(lr=0.01), "
                             f"three separable blobs (seed {case['seed']}), epochs=5, batch_size=32)")
def fit_learns_a_separable_problem(tt, case):
    model = _mlp(tt, case["seed"], (2, 16, 3))
    history = tt.training.fit(model, tt.nn.CrossEntropyLoss(), tt.optim.Adam(model.parameters(), lr=0.01),
                     _blobs(case["seed"], 300), _blobs(case["seed"] + 1, 100), epochs=5, batch_size=32,
                     progress=False, log=None)
    return {"first train loss": float(history["train_loss"][0]), "last train loss": float(history["train_loss"][-1]),
            "last test accuracy": float(history["test_accuracy"][-1])}


@fit_learns_a_separable_problem.verdict
def _(case, output):
    first, last, acc = output["first train loss"], output["last train loss"], output["last test accuracy"]
    what = f"fit on three separable blobs (seed {case['seed']}) for 5 epochs"
    if not last < 0.5 * first:
        raise CheckFailed(f"{what}: expected the training loss to fall to less than half, got {first:.4f} in the "
                          f"first epoch and {last:.4f} in the last")
    if not acc >= 0.9:
        raise CheckFailed(f"{what}: expected a test accuracy of at least 90% after the last epoch, got "
                          f"{100 * acc:.1f}%")


@check(task="07.6", points=1, inputs=_epochs,
       describe=lambda case: f"fit(..., epochs={case['epochs']}, scheduler=counter): the calls of scheduler.step()")
def fit_steps_the_scheduler_once_per_epoch(tt, case):
    counter = _Counter()
    _small_fit(tt, case["epochs"], scheduler=counter, progress=False, log=None)
    return counter.calls


fit_steps_the_scheduler_once_per_epoch.expected(lambda case: case["epochs"])


@check(task="07.6", points=1, inputs=_epochs,
       describe=lambda case: f"fit(..., epochs={case['epochs']}, progress=False, log=lines.append)")
def fit_logs_one_line_per_epoch(tt, case):
    lines = []
    printed = _small_fit(tt, case["epochs"], progress=False, log=lines.append)
    return {"the types of the lines logged": [type(line).__name__ for line in lines], "what it printed": printed}


fit_logs_one_line_per_epoch.expected(lambda case: {"the types of the lines logged": ["str"] * case["epochs"],
                                                   "what it printed": ""})


@check(task="07.6", points=1, inputs=st.integers(1, 3).map(lambda epochs: {"epochs": epochs}),
       describe=lambda case: f"fit(..., epochs={case['epochs']}, progress=True, log=None) printing to stdout")
def fit_prints_a_progress_bar_per_epoch(tt, case):
    return _small_fit(tt, case["epochs"], progress=True, log=None)


@fit_prints_a_progress_bar_per_epoch.verdict
def _(case, output):
    if "\r" not in output or output.count("\n") != case["epochs"]:
        raise CheckFailed(f"fit(..., epochs={case['epochs']}, progress=True, log=None): expected one progress bar "
                          f"redrawn with '\\r' and ended with a new line per epoch, but it printed {output!r:.160}")


# ---------------------------------------------------------------------------------------------------
# 07.7 save_checkpoint


@check(task="07.7", points=1, inputs=_regression(), examples=5, **TRAIN_TOL,
       describe=lambda case: "save_checkpoint(path, Linear, SGD(lr=0, momentum=0.9) after one MSE step, epoch=3), read "
                             "back with np.load(path, allow_pickle=False)")
def save_checkpoint_writes_one_npz_with_flat_names(tt, case):
    model = _linear(tt, case["w"], case["b"])
    optimizer = tt.optim.SGD(model.parameters(), lr=0.0, momentum=0.9)
    optimizer.zero_grad()
    tt.nn.MSELoss()(model(tt.Tensor(case["x"])), tt.Tensor(case["y"])).backward()
    optimizer.step()
    with tempfile.TemporaryDirectory() as folder:
        tt.training.save_checkpoint(os.path.join(folder, "checkpoint.npz"), model, optimizer, epoch=3)
        with np.load(os.path.join(folder, "checkpoint.npz"), allow_pickle=False) as data:
            files = {key: data[key] for key in data.files}
    groups = json.loads(str(files.get("optimizer/param_groups", "[]")))
    return {"the names in the file": sorted(files),
            "the arrays": {k: v for k, v in files.items() if k != "optimizer/param_groups"},
            "lr, momentum and params of each group in optimizer/param_groups":
                [[float(g["lr"]), float(g["momentum"]), [int(i) for i in g["params"]]] for g in groups]}


@save_checkpoint_writes_one_npz_with_flat_names.expected
def _(case):
    _, gw, gb = _mse_step(*(case[k].astype(np.float64) for k in ("x", "y", "w", "b")))
    arrays_ = {"epoch": np.asarray(3), "model/bias": case["b"], "model/weight": case["w"],
               "optimizer/state/0/momentum_buffer": gw, "optimizer/state/1/momentum_buffer": gb}
    return {"the names in the file": sorted([*arrays_, "optimizer/param_groups"]), "the arrays": arrays_,
            "lr, momentum and params of each group in optimizer/param_groups": [[0.0, 0.9, [0, 1]]]}


@check(task="07.7", points=1, inputs=st.sampled_from(["run.ckpt", "model", "weights.npz"]).map(
           lambda name: {"name": name}),
       describe=lambda case: f"save_checkpoint(folder/{case['name']!r}, Linear) in an empty folder: the files in the "
                             f"folder afterwards")
def save_checkpoint_writes_exactly_the_path_given(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        tt.training.save_checkpoint(os.path.join(folder, case["name"]), tt.nn.Linear(2, 1))
        return sorted(os.listdir(folder))


save_checkpoint_writes_exactly_the_path_given.expected(lambda case: [case["name"]])


@check(task="07.7", points=1, describe=lambda case: "save_checkpoint(path, Linear, config={'lr': 0.1}) (a dict would "
                                                    "need pickle)")
def save_checkpoint_refuses_extras_that_need_pickle(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        return capture_error(lambda: tt.training.save_checkpoint(os.path.join(folder, "c.npz"), tt.nn.Linear(2, 1),
                                                        config={"lr": 0.1}))


save_checkpoint_refuses_extras_that_need_pickle.verdict(lambda case, output: expect_error(
    "save_checkpoint(path, Linear, config={'lr': 0.1}) (a dict would need pickle)", output, "TypeError", ("config",)))


# ---------------------------------------------------------------------------------------------------
# 07.8 load_checkpoint

# optimizer: (its keyword arguments, those of the fresh optimizer the checkpoint is loaded into). Which one
# is drawn matters to the given encoding only, not to the student's code around it: one check, not a family.
RESUME = {"SGD": ({"lr": 0.1, "momentum": 0.9}, {"lr": 1.0, "momentum": 0.5}),
          "Adam": ({"lr": 0.01, "betas": (0.8, 0.95)}, {"lr": 1.0}),
          "AdamW": ({"lr": 0.01, "weight_decay": 0.1}, {"lr": 1.0, "weight_decay": 0.5})}


@st.composite
def _resume(draw):
    optimizer = draw(st.sampled_from(sorted(RESUME)))
    return {"optimizer": optimizer, "kwargs": RESUME[optimizer][0], "fresh": RESUME[optimizer][1],
            "before": draw(st.integers(1, 3)), "after": draw(st.integers(1, 3)), "seed": draw(st.integers(0, 1000)),
            "n": draw(st.integers(4, 10))}


@check(task="07.8", points=2, inputs=_resume(), examples=6,
       describe=lambda case: f"MLP + {case['optimizer']}({', '.join(f'{k}={v}' for k, v in case['kwargs'].items())}): "
                             f"{case['before']} steps, save_checkpoint, load_checkpoint into a fresh model and a fresh "
                             f"{case['optimizer']}({', '.join(f'{k}={v}' for k, v in case['fresh'].items())}), "
                             f"{case['after']} more steps")
def load_checkpoint_resumes_training_exactly(tt, case):
    rng = np.random.default_rng(case["seed"])
    x, y = rng.standard_normal((case["n"], 3)).astype(np.float32), rng.integers(0, 4, case["n"]).astype(np.int64)
    model = _mlp(tt, case["seed"], (3, 5, 4))
    optimizer = getattr(tt.optim, case["optimizer"])(model.parameters(), **case["kwargs"])
    _steps(tt, model, optimizer, x, y, case["before"])
    with tempfile.TemporaryDirectory() as folder:
        tt.training.save_checkpoint(os.path.join(folder, "checkpoint.npz"), model, optimizer)
        runs = {"uninterrupted": {"losses": _steps(tt, model, optimizer, x, y, case["after"])}}
        resumed_model = _mlp(tt, case["seed"] + 1, (3, 5, 4))
        resumed = getattr(tt.optim, case["optimizer"])(resumed_model.parameters(), **case["fresh"])
        tt.training.load_checkpoint(os.path.join(folder, "checkpoint.npz"), resumed_model, resumed)
    runs["resumed"] = {"losses": _steps(tt, resumed_model, resumed, x, y, case["after"])}
    return {run: {"hyperparameters": {k: v for k, v in opt.param_groups[0].items() if k != "params"},
                  "their types": {k: type(v).__name__ for k, v in opt.param_groups[0].items() if k != "params"},
                  **runs[run], **_parameters(net)}
            for run, net, opt in (("uninterrupted", model, optimizer), ("resumed", resumed_model, resumed))}


@load_checkpoint_resumes_training_exactly.verdict
def _(case, output):
    assert_close(output["resumed"], output["uninterrupted"], rtol=1e-6, atol=1e-7, exact_dtype=True, what=(
        f"{case['optimizer']} resumed from a checkpoint after {case['before']} steps, then {case['after']} more steps, "
        f"against the run that never stopped"))


@check(task="07.8", points=1,
       describe=lambda case: "load_checkpoint(path, fresh model, fresh optimizer) of save_checkpoint(path, model, "
                             "optimizer, epoch=4, best=0.5, note='ok', losses=[3.0, 2.0]): the extras returned")
def load_checkpoint_returns_the_extras(tt, case):
    model = _mlp(tt, 0, (2, 3, 2))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.npz")
        tt.training.save_checkpoint(path, model, tt.optim.Adam(model.parameters()), epoch=4, best=0.5, note="ok",
                           losses=[3.0, 2.0])
        extras = tt.training.load_checkpoint(path, _mlp(tt, 1, (2, 3, 2)), tt.optim.Adam(model.parameters()))
    return {str(key): {"type": type(value).__name__, "value": value} for key, value in extras.items()}


load_checkpoint_returns_the_extras.expected(lambda case: {
    "epoch": {"type": "int", "value": 4}, "best": {"type": "float", "value": 0.5},
    "note": {"type": "str", "value": "ok"}, "losses": {"type": "ndarray", "value": np.array([3.0, 2.0])}})


@check(task="07.8", points=1, inputs=st.integers(0, 1000).map(lambda seed: {"seed": seed}), examples=3,
       describe=lambda case: "save_checkpoint(path, model, SGD after 2 steps, epoch=2), then load_checkpoint(path, "
                             "fresh model) without an optimizer")
def load_checkpoint_restores_the_model_alone(tt, case):
    model, fresh = _mlp(tt, case["seed"], (3, 4, 2)), _mlp(tt, case["seed"] + 1, (3, 4, 2))
    optimizer = tt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(case["seed"])
    _steps(tt, model, optimizer, rng.standard_normal((5, 3)).astype(np.float32), np.array([0, 1, 1, 0, 1]), 2)
    with tempfile.TemporaryDirectory() as folder:
        tt.training.save_checkpoint(os.path.join(folder, "checkpoint.npz"), model, optimizer, epoch=2)
        extras = tt.training.load_checkpoint(os.path.join(folder, "checkpoint.npz"), fresh)
    return {"saved": _parameters(model),
            "restored": {**_parameters(fresh), "the extras' names": sorted(str(key) for key in extras)}}


@load_checkpoint_restores_the_model_alone.verdict
def _(case, output):
    assert_close(output["restored"], {**output["saved"], "the extras' names": ["epoch"]}, rtol=0, atol=0,
                 what="the fresh model after load_checkpoint(path, fresh model), against the model saved")


@check(task="07.8", points=1, describe=lambda case: "load_checkpoint(path, MLP (3, 5, 2)) of a checkpoint of an MLP "
                                                    "(3, 4, 2)", guard=True)
def load_checkpoint_into_another_architecture_raises(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        tt.training.save_checkpoint(os.path.join(folder, "c.npz"), _mlp(tt, 0, (3, 4, 2)))
        return capture_error(lambda: tt.training.load_checkpoint(os.path.join(folder, "c.npz"), _mlp(tt, 0, (3, 5, 2))))


load_checkpoint_into_another_architecture_raises.verdict(lambda case, output: expect_error(
    "load_checkpoint(path, MLP (3, 5, 2)) of a checkpoint of an MLP (3, 4, 2)", output, "RuntimeError"))


@check(task="07.8", points=1, describe=lambda case: "load_checkpoint(path, model, optimizer) of save_checkpoint(path, "
                                                    "model) without an optimizer")
def load_checkpoint_without_optimizer_state_raises(tt, case):
    model = _mlp(tt, 0, (2, 3, 2))
    with tempfile.TemporaryDirectory() as folder:
        tt.training.save_checkpoint(os.path.join(folder, "c.npz"), model)
        return capture_error(lambda: tt.training.load_checkpoint(os.path.join(folder, "c.npz"), model,
                                                        tt.optim.SGD(model.parameters(), lr=0.1)))


load_checkpoint_without_optimizer_state_raises.verdict(lambda case, output: expect_error(
    "load_checkpoint(path, model, optimizer) of a checkpoint c.npz saved without an optimizer", output, "KeyError",
    ("c.npz",)))


class _Payload:
    """Pickled, it creates the folder `path` when it is unpickled: proof that a load ran pickle."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


@check(task="07.8", points=1, describe=lambda case: "load_checkpoint(path, model) of a checkpoint whose extra "
                                                    "'note' is a pickled object array that creates a folder when "
                                                    "unpickled (np.load needs allow_pickle=False)", guard=True)
def load_checkpoint_refuses_pickled_objects(tt, case):
    model = _mlp(tt, 0, (2, 3, 2))
    with tempfile.TemporaryDirectory() as folder:
        marker, path = os.path.join(folder, "pickle ran"), os.path.join(folder, "c.npz")
        np.savez(path, note=np.array([_Payload(marker)], dtype=object),
                 **{f"model/{name}": value for name, value in model.state_dict().items()})
        return {"the error": capture_error(lambda: tt.training.load_checkpoint(path, model))["raised"],
                "the pickled object ran": os.path.exists(marker)}


load_checkpoint_refuses_pickled_objects.expected(lambda case: {"the error": "ValueError",
                                                               "the pickled object ran": False})


