# %% [markdown]
# # 05 Losses
#
# A network turns inputs into numbers; a **loss** turns those numbers into one number that says how
# wrong they are. Training is nothing but `loss.backward()` followed by a step downhill, so the loss is
# where learning starts: its value is what you watch, and its gradient is the very first `grad_output`
# that flows back through every layer. A loss that overflows, returns `nan`, or has a subtly wrong
# gradient silently ruins every model trained with it.
#
# You build PyTorch's five standard losses, each as a function and as a `Module`:
#
# | function (`tt.nn.functional`) | module (`tt.nn`) | for | task |
# |---|---|---|---|
# | reductions `'mean'`, `'sum'`, `'none'` | | every loss | 05.1 |
# | `mse_loss` | `MSELoss` | regression | 05.2 |
# | class-index targets, checked | | classification | 05.3 |
# | `nll_loss` | `NLLLoss` | log-probabilities | 05.4 |
# | `cross_entropy` (`_CrossEntropy` forward, backward) | `CrossEntropyLoss` | logits, C classes | 05.5, 05.6, 05.7 |
# | `binary_cross_entropy` (`_BinaryCrossEntropy`) | `BCELoss` | probabilities, yes/no | 05.8, 05.9 |
# | `binary_cross_entropy_with_logits` (`_BCEWithLogits`) | `BCEWithLogitsLoss` | logits, yes/no | 05.10, 05.11 |
# | the loss modules | all five | `loss_fn(output, target)` | 05.12 |
#
# Everything follows PyTorch's definitions and defaults exactly, so `tt.nn.CrossEntropyLoss()(logits,
# labels)` gives the number `torch.nn.CrossEntropyLoss()(logits, labels)` gives, with the same
# gradient. Two of the losses are composed from the Tensor ops of 01 and 02 (autograd differentiates
# them for free); three are single `Function`s with a hand-written backward, for the two reasons that
# decide such things in real frameworks: **numerical stability** (logits of 10⁴ must give a finite,
# exact loss) and **speed** (`cross_entropy` runs in every training step of every classifier you will
# train in this course).
#
# **Before you start.** This notebook runs on *your* 01-04: the package imports `Function` from 02 and
# `Module` from 04, and the notebook's tests use `log_softmax` and `sigmoid` from 03 to cross-check the
# losses. <!-- tito -->Finish 01-04 (`tito test 04` at full marks), run `tito export 04`, and restart
# this notebook's kernel whenever you export again. Grade this module with `tito test 05`, which exports
# 01-05 together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.losses
import time

import numpy as np

# %%
#| export
import numpy as np

from tinytorch.core.tensor import Tensor, as_tensor
from tinytorch.core.autograd import Function
from tinytorch.core.layers import Module

__all__ = ["mse_loss", "nll_loss", "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "MSELoss", "NLLLoss", "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss"]  # tt.nn.functional and tt.nn

# %%
from tinytorch.core.autograd import gradcheck
from tinytorch.core.activations import log_softmax, sigmoid

rng = np.random.default_rng(0)


def leaf(*shape, scale=1.0):
    """A float64 tensor of normals that requires grad (gradcheck works in float64)."""
    return Tensor(rng.standard_normal(shape) * scale, requires_grad=True)

# %% [markdown]
# ## Reductions: one number, or one per example
#
# Every loss first computes one loss per element (per example for the classification losses), then
# **reduces** them, exactly as in PyTorch:
#
# | `reduction` | result | shape |
# |---|---|---|
# | `'mean'` (the default) | the average | `()` |
# | `'sum'` | the total | `()` |
# | `'none'` | the losses themselves | one per element / example |
#
# `'mean'` makes the loss, and so the gradient's size and a good learning rate, independent of the
# batch size; `'sum'` is what you want when batches of different sizes must count by their size;
# `'none'` lets you weight examples yourself (`(losses * weights).sum()`), or look at which examples
# the model gets most wrong.
#
# `_reduce` is the one place where every loss of this module reduces, and so the one place that
# rejects a bad `reduction` (`'avg'`, `'elementwise_mean'`, `None`): raise `ValueError` naming the
# three allowed values. The reductions are the Tensor ops `.mean()` and `.sum()` from 01, so autograd
# differentiates them with no extra work: a `'mean'` loss sends `grad_output / n` to each element.
#
# Arguments become tensors in two given ways. 01's `as_tensor` (PyTorch's name) returns a `Tensor` as it
# is and wraps anything else (a list of floats becomes float32, as everywhere in TinyTorch).
# `_float_target` does the same for the target of an *elementwise* loss (MSE, the two BCEs): it must have exactly the input's
# shape (PyTorch warns and broadcasts for MSE, a classic silent bug: a `(N, 1)` output against an `(N,)`
# target broadcasts to `(N, N)`; we refuse), and it takes the input's dtype, so that a float32 model
# trained on float64 numpy targets keeps computing in float32.

# %%
#| export
def _float_target(input: Tensor, target, function_name: str) -> Tensor:
    """The target of an elementwise loss as a Tensor of input's shape and dtype (a Tensor that requires
    grad is kept as it is). A different shape: ValueError naming both shapes."""
    if not (isinstance(target, Tensor) and target.requires_grad):
        target = Tensor(np.asarray(target, dtype=input.dtype))
    if target.shape != input.shape:
        raise ValueError(f"{function_name}: target shape {target.shape} does not match input shape "
                         f"{input.shape}; give the target exactly the input's shape")
    return target


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    """`loss` reduced: 'mean' -> loss.mean(), 'sum' -> loss.sum(), 'none' -> loss unchanged. Anything
    else: ValueError naming the allowed values."""
    ### BEGIN SOLUTION 05.1 reduction
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    ### END SOLUTION

# %%
losses = Tensor(np.array([1.0, 2.0, 6.0]))
assert _reduce(losses, "mean").item() == 3.0 and _reduce(losses, "sum").item() == 9.0
assert _reduce(losses, "none") is losses
try:
    _reduce(losses, "avg")
    raise AssertionError("reduction='avg' must raise ValueError")
except ValueError as error:
    assert all(word in str(error) for word in ("'mean'", "'sum'", "'none'")), error
x = leaf(4)
_reduce(x * x, "mean").backward()
assert np.allclose(x.grad.data, 2 * x.data / 4), "a mean sends grad / n to each element"

# %% [markdown]
# ## Mean squared error
#
# For predictions x and targets y of the same shape, with n elements:
#
#     ℓᵢ = (xᵢ − yᵢ)²            mse_loss = (1/n) Σᵢ ℓᵢ   (reduction='mean')
#
# and ∂ℓᵢ/∂xᵢ = 2(xᵢ − yᵢ): a prediction twice as far off is pushed back twice as hard. That is MSE's
# strength for regression and its weakness for outliers (one target 100 away dominates the gradient).
#
# Compose it from Tensor ops: autograd does the derivative. Turn `input` into a tensor with
# `as_tensor`, the target with `_float_target(input, target, "mse_loss")`, then reduce the squared
# differences with `_reduce`. (`diff * diff` is a little cheaper than `diff ** 2` and gives the same
# gradient; both are fine.)

# %%
#| export nn.functional
def mse_loss(input, target, reduction: str = "mean") -> Tensor:
    """Mean squared error: (input - target)² reduced; input and target of the same shape."""
    ### BEGIN SOLUTION 05.2 mse_loss
    input = as_tensor(input)
    target = _float_target(input, target, "mse_loss")
    diff = input - target
    return _reduce(diff * diff, reduction)
    ### END SOLUTION

# %%
x, y = leaf(3, 2), rng.standard_normal((3, 2))
assert np.isclose(mse_loss(x, y).item(), np.mean((x.data - y) ** 2))
assert np.isclose(mse_loss(x, y, reduction="sum").item(), np.sum((x.data - y) ** 2))
assert mse_loss(x, y, reduction="none").shape == (3, 2)
assert gradcheck(lambda x: mse_loss(x, y), x)
assert gradcheck(lambda x: mse_loss(x, y, reduction="none"), x)
assert mse_loss(Tensor([1.0, 2.0]), np.array([0.0, 0.0])).dtype == np.float32, "float32 in, float32 out"
try:
    mse_loss(leaf(4, 1), np.zeros(4))
    raise AssertionError("an (N, 1) input against an (N,) target must raise")
except ValueError as error:
    assert "(4, 1)" in str(error) and "(4,)" in str(error), error

# %% [markdown]
# ## Classification targets: class indices
#
# A classifier over C classes outputs, for each of N examples, C numbers: a row of the `(N, C)`
# input. The target says which class is right, as an **integer index** per example: shape `(N,)`,
# values in `0 .. C-1` (PyTorch's "class-index targets"; the MNIST labels are exactly this). A single
# example may also come unbatched: input `(C,)` and a 0-d target.
#
# Three mistakes are common enough that the losses check for them and say so:
#
# | mistake | error |
# |---|---|
# | a label outside `0 .. C-1` (labels 1..10 for 10 classes; a -1 "unknown") | `IndexError: Target 10 is out of bounds for 10 classes` |
# | float targets (`y.astype(np.float32)`, or one-hot rows) | `TypeError` |
# | N rows of input but a different number of targets | `ValueError` naming both shapes |
#
# The out-of-range check matters most: numpy would happily index with -1 (the last class) and raise a
# confusing error for 10, and a framework running on a GPU may not check at all and read garbage.
#
# `_class_targets(target, input_shape)` takes the target as anything (a Tensor, a numpy array of any
# integer dtype, a list, a Python int), and returns an int64 numpy array after the checks, in this
# order: integer dtype (`np.issubdtype(dtype, np.integer)`; bool is not an integer here), an input of
# 1 or 2 dimensions, `target.shape == input_shape[:-1]`, every value in range. For the IndexError name
# the first offending value: `target[bad][0]`, with `bad` a boolean mask (for a 0-d target,
# `target[bad]` is still a 1-d array).

# %%
#| export
def _class_targets(target, input_shape: tuple) -> np.ndarray:
    """Class indices as an int64 array, checked against an input of shape (N, C) (target (N,)) or (C,)
    (target 0-d): TypeError for a non-integer dtype, ValueError naming both shapes for a shape mismatch,
    IndexError "Target 7 is out of bounds for 5 classes" for a value outside [0, C)."""
    ### BEGIN SOLUTION 05.3 class-index targets
    target = np.asarray(target)
    if not np.issubdtype(target.dtype, np.integer):
        raise TypeError(f"expected class indices of an integer dtype, got dtype {target.dtype}")
    if len(input_shape) not in (1, 2):
        raise ValueError(f"expected an input of shape (N, C) or (C,), got shape {tuple(input_shape)}")
    if target.shape != tuple(input_shape[:-1]):
        raise ValueError(f"target shape {target.shape} does not match input shape {tuple(input_shape)}: "
                         f"expected a target of shape {tuple(input_shape[:-1])}, one class index per row")
    num_classes = input_shape[-1]
    bad = (target < 0) | (target >= num_classes)
    if np.any(bad):
        raise IndexError(f"Target {target[bad][0]} is out of bounds for {num_classes} classes")
    return target.astype(np.int64)
    ### END SOLUTION

# %%
assert _class_targets([2, 0, 1], (3, 4)).tolist() == [2, 0, 1]
assert _class_targets(np.array([1, 1], dtype=np.uint8), (2, 3)).dtype == np.int64
assert _class_targets(Tensor([3]), (1, 5)).tolist() == [3]
assert _class_targets(4, (5,)).shape == ()
for bad_target, shape, error_type, words in [([0, 5], (2, 5), IndexError, ["Target 5", "5 classes"]),
                                             ([-1, 0], (2, 5), IndexError, ["Target -1", "5 classes"]),
                                             (np.array([0.0, 1.0]), (2, 5), TypeError, []),
                                             ([0, 1, 2], (2, 5), ValueError, ["(3,)", "(2, 5)"])]:
    try:
        _class_targets(bad_target, shape)
        raise AssertionError(f"{bad_target} for input of shape {shape} must raise {error_type.__name__}")
    except error_type as error:
        assert all(word in str(error) for word in words), error

# %% [markdown]
# ## Negative log-likelihood
#
# If row i of the input holds **log-probabilities** log p(c | example i), the negative log-likelihood
# of the right answers is
#
#     ℓᵢ = −input[i, targetᵢ]            nll_loss = (1/N) Σᵢ ℓᵢ   (reduction='mean')
#
# Minimising it maximises the probability the model gives to the right class. It does nothing but pick
# one number per row: `input[np.arange(N), target]` (01's integer-array indexing, made differentiable
# by 02's `GetItem`, whose backward scatters the gradient back to the picked places and zero elsewhere).
# For an unbatched `(C,)` input it picks `input[int(target)]`.
#
# Like PyTorch, `nll_loss` does not check that the rows are normalised log-probabilities: it computes
# the formula on whatever it gets. `nll_loss(log_softmax(logits), target)` is the cross-entropy; the
# next section fuses the two.

# %%
#| export nn.functional
def nll_loss(input, target, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood: -input[i, target[i]] reduced. input (N, C) log-probabilities with target
    (N,) class indices, or (C,) with a 0-d target."""
    ### BEGIN SOLUTION 05.4 nll_loss
    input = as_tensor(input)
    target = _class_targets(target, input.shape)
    if input.ndim == 1:
        picked = input[int(target)]                                  # ()
    else:
        picked = input[np.arange(len(target)), target]              # (N,)
    return _reduce(-picked, reduction)
    ### END SOLUTION

# %%
log_probs = Tensor(np.log(np.array([[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])), requires_grad=True)
assert np.isclose(nll_loss(log_probs, [0, 2]).item(), -(np.log(0.5) + np.log(0.8)) / 2)
assert nll_loss(log_probs, [0, 2], reduction="none").shape == (2,)
nll_loss(log_probs, [0, 2], reduction="sum").backward()
assert log_probs.grad.data.tolist() == [[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]
assert gradcheck(lambda x: nll_loss(x, np.array([1, 1, 3])), leaf(3, 4))
assert np.isclose(nll_loss(Tensor([-1.0, -2.0, -3.0]), 2).item(), 3.0), "unbatched (C,) input, 0-d target"

# %% [markdown]
# ## Cross-entropy from logits
#
# A classifier's last layer outputs **logits** z, unnormalised scores. Softmax turns a row into
# probabilities pᶜ = e^{zᶜ} / Σₖ e^{zₖ}, and the cross-entropy is the NLL of those:
#
#     ℓᵢ = −log p_{tᵢ} = −z_{t} + log Σₖ e^{zₖ}           (row i, target t = tᵢ)
#
# ### Why not `nll_loss(log(softmax(z)))`?
#
# Take the row z = [10⁴, 0, −10⁴] (logits this size happen: an untrained network with large inputs, a
# learning rate slightly too high).
#
# - e^{10⁴} overflows to `inf` (float64 overflows at e^{710}, float32 at e^{89}), softmax becomes
#   `inf / inf = nan`, and so does the loss, the gradient and every weight after one step.
# - Subtracting the row's maximum first (what 03's softmax does) fixes the overflow, but
#   p₂ = e^{−2·10⁴} underflows to exactly 0, and −log 0 = `inf`: the loss for target 2 is `inf`
#   instead of the exact 2·10⁴.
#
# The cure is to never form the probabilities. With m = maxₖ zₖ,
#
#     log Σₖ e^{zₖ} = m + log Σₖ e^{zₖ − m}                    (the log-sum-exp trick)
#
# Every exponent is now ≤ 0, so nothing overflows, and the largest term is e⁰ = 1, so the sum lies in
# [1, C] and its log is harmless. Then log pᶜ = (zᶜ − m) − log Σₖ e^{zₖ − m}: for the row above, the
# log-probabilities [0, −10⁴, −2·10⁴], exact, and a loss of exactly 2·10⁴ for target 2 (a small
# underflowing e^{−10⁴} inside the sum only drops a term far below the sum's last digit).
#
# ### Label smoothing
#
# With `label_smoothing` ε > 0 the target is no longer "all probability on class t" but the mixture
# q = (1 − ε)·onehot(t) + ε/C (every class gets ε/C). PyTorch defines the loss as the cross-entropy
# against q:
#
#     ℓᵢ = −Σ_c q_c log p_c = (1 − ε)·(−log p_t) + ε·(1/C) Σ_c (−log p_c)
#
# It keeps a classifier from pushing its logits towards ±∞ to reach probabilities of exactly 0 and 1,
# and usually generalises a little better (the original Transformer used ε = 0.1).
#
# ### One Function
#
# Composed from Tensor ops this is about ten nodes per step (max, subtract, exp, sum, log, subtract,
# index, negate, ...), each allocating an `(N, C)` array and saving it for backward. `_CrossEntropy` is
# one `Function` that returns the per-example losses `(N,)` (reduction stays with `_reduce`, so there is
# one more node: the mean), and whose backward is one vectorised line.
#
# `forward(ctx, logits, target, label_smoothing)`: `logits` `(N, C)` (or `(C,)`, unbatched: write it
# with `axis=-1` and `[..., None]` and both work), `target` the int64 array from `_class_targets`.
# Compute the log-probabilities by log-sum-exp (`keepdims=True` keeps the shapes aligned), pick each
# row's target entry with `np.take_along_axis(log_probs, target[..., None], axis=-1)[..., 0]`, and mix
# in the smoothing term with `log_probs.mean(axis=-1)` (skip it when ε = 0: it costs a pass over the
# array). Save for backward the softmax probabilities, which you have almost for free as `exp_shifted /
# sum_exp` (no second `np.exp`), the target and ε. Keep the logits' dtype: every intermediate here
# stays float32 for float32 logits, as long as you mix in only Python numbers.

# %%
#| export
class _CrossEntropy(Function):
    """Per-example cross-entropy from logits: logsumexp(z) - (1-ε) z[t] - ε mean(z), with label
    smoothing ε. logits (N, C) or (C,), target int64 (N,) or () -> losses (N,) or ()."""

    @staticmethod
    def forward(ctx, logits, target, label_smoothing=0.0):
        ### BEGIN SOLUTION 05.5 _CrossEntropy.forward
        shifted = logits - logits.max(axis=-1, keepdims=True)                       # (N, C), ≤ 0
        exp_shifted = np.exp(shifted)                                               # (N, C), in (0, 1]
        sum_exp = exp_shifted.sum(axis=-1, keepdims=True)                           # (N, 1), in [1, C]
        log_probs = shifted - np.log(sum_exp)                                       # (N, C)
        nll = -np.take_along_axis(log_probs, target[..., None], axis=-1)[..., 0]     # (N,)
        ctx.save_for_backward(exp_shifted / sum_exp, target)                        # softmax p, (N, C)
        ctx.label_smoothing = label_smoothing
        if label_smoothing == 0:
            return nll
        return (1 - label_smoothing) * nll - label_smoothing * log_probs.mean(axis=-1)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 05.6 _CrossEntropy.backward
        probs, target = ctx.saved_tensors                                           # (N, C), (N,)
        smoothing, num_classes = ctx.label_smoothing, probs.shape[-1]
        index = target[..., None]                                                   # (N, 1)
        grad = probs - smoothing / num_classes                                      # p - ε/C, (N, C)
        picked = np.take_along_axis(grad, index, axis=-1)                           # (N, 1)
        np.put_along_axis(grad, index, picked - (1 - smoothing), axis=-1)           # p - q
        grad *= np.asarray(grad_output)[..., None]
        return grad, None
        ### END SOLUTION

# %%
logits = np.array([[1e4, 0.0, -1e4]], dtype=np.float32)
with np.errstate(over="raise", divide="raise", invalid="raise"):     # an overflow or a nan would raise here
    losses = _CrossEntropy.apply(Tensor(logits), np.array([0]))
    assert losses.data.tolist() == [0.0] and losses.dtype == np.float32
    assert _CrossEntropy.apply(Tensor(logits), np.array([2])).data.tolist() == [2e4]
z, t = rng.standard_normal((4, 3)), np.array([0, 2, 2, 1])
expected = np.log(np.exp(z).sum(axis=1)) - z[np.arange(4), t]
assert np.allclose(_CrossEntropy.apply(Tensor(z), t).data, expected)
smoothed = 0.8 * expected + 0.2 * (np.log(np.exp(z).sum(axis=1)) - z.mean(axis=1))
assert np.allclose(_CrossEntropy.apply(Tensor(z), t, label_smoothing=0.2).data, smoothed)
assert np.isclose(_CrossEntropy.apply(Tensor(z[0]), np.array(0)).item(), expected[0]), "unbatched"

# %% [markdown]
# ### The gradient: softmax minus target
#
# Differentiate ℓ = log Σₖ e^{zₖ} − z_t with respect to z_c: the first term gives
# e^{z_c} / Σₖ e^{zₖ} = p_c, the second gives 1 if c = t, else 0. So
#
#     ∂ℓ/∂z = p − onehot(t)                        (with smoothing:  p − q,  q = (1−ε)·onehot(t) + ε/C)
#
# one of the most useful formulas in deep learning. Each row of the gradient sums to zero (a logit
# goes up only by pushing others down), it is bounded (every entry lies in [−1, 1], whatever the logits:
# no exploding gradient from the loss), and it vanishes exactly when the prediction matches the target.
# At z = [10⁴, 0, −10⁴] with target 2 it is [1, 0, −1]: "lower class 0, raise class 2", finite and
# exact, where the composed version would have produced `nan`.
#
# `backward` receives `grad_output` of shape `(N,)` (one upstream weight per example: 1/N from the mean,
# or your own weights with `reduction='none'`) and returns `(p − q) * grad_output[..., None]` for the
# logits and `None` for the target (class indices have no gradient). Never build the one-hot matrix:
# p − q is p − ε/C everywhere and 1 − ε less at each row's target, so it is one subtraction over the
# array plus a change to N entries: `np.take_along_axis(grad, target[..., None], axis=-1)` reads those
# N entries (as in forward) and `np.put_along_axis(grad, index, values, axis=-1)` writes them back. (An
# `(N, C)` one-hot mask from `np.arange(C) == target[..., None]` gives the same numbers and, for a batch
# of 128 over 1000 classes, costs about twenty times as much: several passes over the whole array.)

# %%
assert gradcheck(lambda z: _CrossEntropy.apply(z, np.array([0, 2, 1])), leaf(3, 4))
assert gradcheck(lambda z: _CrossEntropy.apply(z, np.array([3, 3]), label_smoothing=0.3), leaf(2, 4))
assert gradcheck(lambda z: _CrossEntropy.apply(z, np.array(1)), leaf(5))
z = Tensor(np.array([[1e4, 0.0, -1e4]], dtype=np.float32), requires_grad=True)
_CrossEntropy.apply(z, np.array([2])).backward(Tensor(np.ones(1, dtype=np.float32)))
assert z.grad.data.tolist() == [[1.0, 0.0, -1.0]] and z.grad.dtype == np.float32

# %% [markdown]
# ### `cross_entropy`
#
# The function students of PyTorch call a thousand times: check the target with `_class_targets`,
# check `label_smoothing` (a number in [0, 1], else `ValueError`), apply `_CrossEntropy`, reduce.

# %%
#| export nn.functional
def cross_entropy(input, target, reduction: str = "mean", label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy of logits input (N, C) (or (C,)) against class indices target (N,) (or 0-d), with
    PyTorch's label smoothing: loss = (1-ε)·nll + ε·mean over classes of -log p."""
    ### BEGIN SOLUTION 05.7 cross_entropy
    input = as_tensor(input)
    target = _class_targets(target, input.shape)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    return _reduce(_CrossEntropy.apply(input, target, label_smoothing=float(label_smoothing)), reduction)
    ### END SOLUTION

# %% [markdown]
# Three cross-checks: `cross_entropy` equals `nll_loss` of 03's `log_softmax` (the composition it
# fuses); it is exact at logits of 10⁴; and label smoothing is the cross-entropy against the smoothed
# target distribution q.

# %%
z, t = leaf(5, 4), np.array([0, 3, 3, 1, 2])
for reduction in ("mean", "sum", "none"):
    assert np.allclose(cross_entropy(z, t, reduction=reduction).data,
                       nll_loss(log_softmax(z, dim=-1), t, reduction=reduction).data)
    assert gradcheck(lambda z: cross_entropy(z, t, reduction=reduction, label_smoothing=0.1), z)
big = Tensor(np.array([[1e4, 0.0, -1e4]], dtype=np.float32))
assert cross_entropy(big, [0]).item() == 0.0 and cross_entropy(big, [2]).item() == 2e4
q = 0.9 * np.eye(4)[t] + 0.1 / 4
log_p = log_softmax(z, dim=-1).data
assert np.isclose(cross_entropy(z, t, label_smoothing=0.1).item(), np.mean(-(q * log_p).sum(axis=1)))
assert cross_entropy(Tensor(np.zeros((2, 3), dtype=np.float32)), [0, 1]).dtype == np.float32
try:
    cross_entropy(z, t, label_smoothing=1.5)
    raise AssertionError("label_smoothing=1.5 must raise ValueError")
except ValueError:
    pass

# %% [markdown]
# How much does the fused Function buy? The same loss composed from Tensor ops (autograd does the
# backward through max, exp, sum, log and indexing; the max's gradient cancels exactly, since shifting
# every logit by m does not change the loss), against `cross_entropy`, for an MNIST-sized batch:

# %%
def cross_entropy_composed(logits, target):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - shifted.exp().sum(axis=-1, keepdims=True).log()
    return -log_probs[np.arange(len(target)), target].mean()


def seconds_per_step(loss_fn, logits, target, repeats=50):
    start = time.perf_counter()
    for _ in range(repeats):
        logits.grad = None
        loss_fn(logits, target).backward()
    return (time.perf_counter() - start) / repeats


logits = Tensor(rng.standard_normal((128, 10)).astype(np.float32), requires_grad=True)
labels = rng.integers(0, 10, 128)
assert np.isclose(cross_entropy_composed(logits, labels).item(), cross_entropy(logits, labels).item())
fused, composed = seconds_per_step(cross_entropy, logits, labels), seconds_per_step(cross_entropy_composed, logits, labels)
print(f"cross-entropy forward + backward, batch 128 x 10: fused {fused * 1e6:.0f} µs, composed {composed * 1e6:.0f} µs")

# %% [markdown]
# ## Binary cross-entropy on probabilities
#
# For a yes/no question per element (is this pixel foreground? does this review mention price?), the
# model outputs a probability p ∈ [0, 1] and the target is y ∈ [0, 1] (usually 0 or 1; soft labels in
# between are allowed):
#
#     ℓ = −[ y·log p + (1 − y)·log(1 − p) ]
#
# At p = 0 with y = 1 (a confident wrong answer) this is −log 0 = ∞, and 0·log 0 = `nan` even when the
# answer is right. PyTorch's fix, which we copy exactly: **each log is clamped at −100**, so the loss of
# one element is at most 100, and p = 0 or 1 never produces `inf` or `nan`. Compute log(1 − p) with
# `np.log1p(-p)` (exact for tiny p, where `1 - p` would round to 1), and silence numpy's divide-by-zero
# warning for log 0 with `np.errstate(divide="ignore")`: the clamp handles it.
#
# The gradient is ∂ℓ/∂p = −y/p + (1 − y)/(1 − p) = (p − y) / (p(1 − p)). PyTorch computes it as
# `(p - y) / max(p·(1 − p), 1e-12)`: finite at p = 0 and p = 1 (huge, and of the right sign). That is
# not the derivative of the clamped forward (which is 0 where the clamp is active), it is deliberately
# the smooth formula with a floor, so that a saturated prediction still gets pushed back; we copy it.
#
# The target gets no gradient (`None`): targets are data here.

# %%
#| export
class _BinaryCrossEntropy(Function):
    """ℓ = -(y·max(log p, -100) + (1-y)·max(log(1-p), -100)); ∂ℓ/∂p = (p - y) / max(p(1-p), 1e-12)."""

    @staticmethod
    def forward(ctx, probs, target):
        ### BEGIN SOLUTION 05.8 _BinaryCrossEntropy.forward
        with np.errstate(divide="ignore"):                      # log(0) = -inf, clamped just below
            log_p = np.maximum(np.log(probs), -100)
            log_one_minus_p = np.maximum(np.log1p(-probs), -100)
        ctx.save_for_backward(probs, target)
        return -(target * log_p + (1 - target) * log_one_minus_p)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 05.8 _BinaryCrossEntropy.backward
        probs, target = ctx.saved_tensors
        return grad_output * (probs - target) / np.maximum(probs * (1 - probs), 1e-12), None
        ### END SOLUTION

# %%
p, y = np.array([0.9, 0.2, 0.5]), np.array([1.0, 0.0, 0.3])
expected = -(y * np.log(p) + (1 - y) * np.log(1 - p))
assert np.allclose(_BinaryCrossEntropy.apply(Tensor(p), y).data, expected)
assert gradcheck(lambda p: _BinaryCrossEntropy.apply(p, y), Tensor(p, requires_grad=True))
extreme = Tensor(np.array([0.0, 1.0, 0.0, 1.0], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", divide="raise", invalid="raise"):
    losses = _BinaryCrossEntropy.apply(extreme, np.array([1.0, 0.0, 0.0, 1.0], dtype=np.float32))
    assert losses.data.tolist() == [100.0, 100.0, 0.0, 0.0], losses
    losses.backward(Tensor(np.ones(4, dtype=np.float32)))
assert np.all(np.isfinite(extreme.grad.data)) and extreme.grad.data[0] < 0 < extreme.grad.data[1]

# %% [markdown]
# `binary_cross_entropy` converts and checks its arguments (`_float_target` for the shape and dtype;
# PyTorch too refuses a target of another shape here) and, since its input must be probabilities,
# raises `ValueError` for any input outside [0, 1] (PyTorch raises too): logits passed by mistake are
# the usual cause, and `binary_cross_entropy_with_logits` below is what they need.

# %%
#| export nn.functional
def binary_cross_entropy(input, target, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of probabilities input against targets in [0, 1] of the same shape; each
    log clamped at -100 like PyTorch. An input outside [0, 1]: ValueError."""
    ### BEGIN SOLUTION 05.9 binary_cross_entropy
    input = as_tensor(input)
    target = _float_target(input, target, "binary_cross_entropy")
    if np.any((input.data < 0) | (input.data > 1)):
        raise ValueError(f"binary_cross_entropy: input must hold probabilities in [0, 1], got values from "
                         f"{input.data.min()} to {input.data.max()} (for logits use "
                         f"binary_cross_entropy_with_logits)")
    return _reduce(_BinaryCrossEntropy.apply(input, target), reduction)
    ### END SOLUTION

# %%
p = Tensor(np.array([[0.9, 0.2], [0.5, 0.01]]), requires_grad=True)
y = np.array([[1.0, 0.0], [0.0, 1.0]])
assert np.isclose(binary_cross_entropy(p, y).item(), np.mean(-(y * np.log(p.data) + (1 - y) * np.log(1 - p.data))))
assert gradcheck(lambda p: binary_cross_entropy(p, y, reduction="sum"), p)
x = leaf(3, 2)
assert np.allclose(binary_cross_entropy(sigmoid(x), np.ones((3, 2))).item(),
                   np.mean(np.log1p(np.exp(-x.data)))), "BCE of sigmoid(x) against 1 is softplus(-x)"
for bad_input in (np.array([0.5, 1.5]), np.array([-0.1, 0.5])):
    try:
        binary_cross_entropy(bad_input, np.zeros(2))
        raise AssertionError("an input outside [0, 1] must raise ValueError")
    except ValueError:
        pass

# %% [markdown]
# ## Binary cross-entropy with logits
#
# In practice a binary classifier outputs a logit x and p = σ(x) = 1/(1 + e^{−x}). Taking the log of a
# sigmoid is where precision dies: σ(40) rounds to exactly 1 in float64 (σ(17) in float32), so
# log(1 − σ(40)) = log 0, clamped to −100, where the true value is −40. Working with x directly, the
# logs simplify to the **softplus** s(x) = log(1 + eˣ):
#
#     −log σ(x) = s(−x)          −log(1 − σ(x)) = s(x) = x + s(−x)
#
# so ℓ = y·s(−x) + (1 − y)·(x + s(−x)) = (1 − y)·x + s(−x), and s(−x) is computed without overflow as
#
#     s(−x) = log(1 + e^{−x}) = max(−x, 0) + log1p(e^{−|x|})       (e^{−|x|} ∈ (0, 1]: never overflows)
#
# which together give the form the contract states: ℓ = max(x, 0) − x·y + log1p(e^{−|x|}).
#
# **pos_weight** w (PyTorch's name) multiplies the loss of the *positive* examples,
# ℓ = −[w·y·log σ(x) + (1 − y)·log(1 − σ(x))], to balance a rare positive class (w = #negatives /
# #positives is the usual choice). The same algebra gives PyTorch's formula
#
#     ℓ = (1 − y)·x + (1 + (w − 1)·y) · s(−x)
#
# with w broadcast against the input (a number, or one weight per class: shape `(C,)` for an `(N, C)`
# input); w = 1 is the plain loss.
#
# The gradient, from ds(−x)/dx = σ(x) − 1 and ds(x)/dx = σ(x):
#
#     ∂ℓ/∂x = w·y·(σ(x) − 1) + (1 − y)·σ(x) = (1 + (w − 1)·y)·σ(x) − w·y
#
# which is the familiar σ(x) − y for w = 1: bounded, like cross-entropy's p − onehot. Compute σ(x)
# without overflow from the e^{−|x|} you already have (the sign-split form of 03's sigmoid):
# σ(x) = 1/(1 + e^{−|x|}) for x ≥ 0 and e^{−|x|}/(1 + e^{−|x|}) for x < 0, one `np.where`.
#
# `forward(ctx, logits, target, pos_weight=None)`: `pos_weight` is `None` or an array (the wrapper
# below prepares it); treat `None` as w = 1. Save what backward needs; backward returns the gradient
# for the logits and `None` for the target.

# %%
#| export
class _BCEWithLogits(Function):
    """ℓ = (1-y)·x + (1 + (w-1)·y)·softplus(-x) with pos_weight w (None: 1), computed stably;
    ∂ℓ/∂x = (1 + (w-1)·y)·σ(x) - w·y."""

    @staticmethod
    def forward(ctx, logits, target, pos_weight=None):
        ### BEGIN SOLUTION 05.10 _BCEWithLogits.forward
        pos_weight = 1.0 if pos_weight is None else pos_weight
        exp_neg_abs = np.exp(-np.abs(logits))                              # e^{-|x|} in (0, 1]
        softplus_neg = np.maximum(-logits, 0) + np.log1p(exp_neg_abs)     # s(-x) = -log σ(x)
        log_weight = 1 + (pos_weight - 1) * target                        # 1 without pos_weight
        ctx.save_for_backward(np.where(logits >= 0, 1.0, exp_neg_abs) / (1 + exp_neg_abs), target)
        ctx.pos_weight, ctx.log_weight = pos_weight, log_weight
        return (1 - target) * logits + log_weight * softplus_neg
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 05.10 _BCEWithLogits.backward
        sigmoid_x, target = ctx.saved_tensors
        return grad_output * (ctx.log_weight * sigmoid_x - ctx.pos_weight * target), None
        ### END SOLUTION

# %%
x, y = np.array([2.0, -1.0, 0.5, -3.0]), np.array([1.0, 0.0, 0.3, 1.0])
sig = 1 / (1 + np.exp(-x))
assert np.allclose(_BCEWithLogits.apply(Tensor(x), y).data, -(y * np.log(sig) + (1 - y) * np.log(1 - sig)))
weighted = -(2.5 * y * np.log(sig) + (1 - y) * np.log(1 - sig))
assert np.allclose(_BCEWithLogits.apply(Tensor(x), y, pos_weight=np.array(2.5)).data, weighted)
assert gradcheck(lambda x: _BCEWithLogits.apply(x, y), Tensor(x, requires_grad=True))
assert gradcheck(lambda x: _BCEWithLogits.apply(x, y, pos_weight=np.array(2.5)), Tensor(x, requires_grad=True))
big = Tensor(np.array([1e4, -1e4, 1e4, -1e4], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", divide="raise", invalid="raise"):
    losses = _BCEWithLogits.apply(big, np.array([1.0, 0.0, 0.0, 1.0], dtype=np.float32))
    losses.backward(Tensor(np.ones(4, dtype=np.float32)))
assert losses.data.tolist() == [0.0, 0.0, 1e4, 1e4] and big.grad.data.tolist() == [0.0, 0.0, 1.0, -1.0]

# %% [markdown]
# `binary_cross_entropy_with_logits` prepares the arguments: the target with `_float_target`, and
# `pos_weight` (None, a number, a list, an array or a Tensor) as a numpy array of the input's dtype
# that broadcasts to the input's shape; if `np.broadcast_shapes(pos_weight.shape, input.shape)` is not
# the input's shape (or raises), raise `ValueError` naming both shapes.

# %%
#| export nn.functional
def binary_cross_entropy_with_logits(input, target, reduction: str = "mean", pos_weight=None) -> Tensor:
    """Binary cross-entropy of logits input against targets in [0, 1] of the same shape, stable for any
    logit size; pos_weight (broadcast to input, e.g. one per class) weights the positive term."""
    ### BEGIN SOLUTION 05.11 binary_cross_entropy_with_logits
    input = as_tensor(input)
    target = _float_target(input, target, "binary_cross_entropy_with_logits")
    if pos_weight is not None:
        pos_weight = np.asarray(pos_weight, dtype=input.dtype)
        try:
            fits = np.broadcast_shapes(pos_weight.shape, input.shape) == input.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"binary_cross_entropy_with_logits: pos_weight of shape {pos_weight.shape} does "
                             f"not broadcast to the input shape {input.shape}")
    return _reduce(_BCEWithLogits.apply(input, target, pos_weight=pos_weight), reduction)
    ### END SOLUTION

# %%
x, y = leaf(4, 3), (rng.random((4, 3)) < 0.5).astype(np.float64)
for reduction in ("mean", "sum", "none"):
    assert np.allclose(binary_cross_entropy_with_logits(x, y, reduction=reduction).data,
                       binary_cross_entropy(sigmoid(x), y, reduction=reduction).data)
assert gradcheck(lambda x: binary_cross_entropy_with_logits(x, y, pos_weight=[1.0, 3.0, 0.5]), x)
assert binary_cross_entropy_with_logits(Tensor([0.0, 1.0]), [0.0, 1.0]).dtype == np.float32
try:
    binary_cross_entropy_with_logits(x, y, pos_weight=np.ones(4))
    raise AssertionError("pos_weight of shape (4,) for input (4, 3) must raise ValueError")
except ValueError as error:
    assert "(4,)" in str(error) and "(4, 3)" in str(error), error

# %% [markdown]
# ## The loss modules
#
# PyTorch code builds its loss once, `loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)`, and calls it
# like a layer: `loss = loss_fn(model(x), y)`. A loss module holds its options and nothing to learn
# (no parameters), and its `forward(input, target)` calls the function. They are `Module`s from 04,
# so they print like PyTorch's: `CrossEntropyLoss()` (PyTorch's losses show no options in their repr,
# so `extra_repr` stays the base class's empty string).
#
# `_Loss` (PyTorch's name for the base class) stores `reduction`; remember `super().__init__()` first,
# or 04's `__setattr__` has no registries to work with. The subclasses store their extra options
# (`label_smoothing`, `pos_weight`) and pass everything on. A bad `reduction` is reported when the loss
# is first called (as in PyTorch), by `_reduce`.

# %%
#| export nn
class _Loss(Module):
    """Base of the loss modules: stores `reduction`; no parameters."""

    def __init__(self, reduction: str = "mean"):
        ### BEGIN SOLUTION 05.12 loss modules
        super().__init__()
        self.reduction = reduction
        ### END SOLUTION


class MSELoss(_Loss):
    """`mse_loss` as a module: MSELoss(reduction='mean')(input, target)."""

    def forward(self, input, target) -> Tensor:
        ### BEGIN SOLUTION 05.12 loss modules
        return mse_loss(input, target, reduction=self.reduction)
        ### END SOLUTION


class NLLLoss(_Loss):
    """`nll_loss` as a module: NLLLoss(reduction='mean')(log_probs, target)."""

    def forward(self, input, target) -> Tensor:
        ### BEGIN SOLUTION 05.12 loss modules
        return nll_loss(input, target, reduction=self.reduction)
        ### END SOLUTION


class CrossEntropyLoss(_Loss):
    """`cross_entropy` as a module: CrossEntropyLoss(reduction='mean', label_smoothing=0.0)(logits, target)."""

    def __init__(self, reduction: str = "mean", label_smoothing: float = 0.0):
        ### BEGIN SOLUTION 05.12 loss modules
        super().__init__(reduction)
        self.label_smoothing = label_smoothing
        ### END SOLUTION

    def forward(self, input, target) -> Tensor:
        ### BEGIN SOLUTION 05.12 loss modules
        return cross_entropy(input, target, reduction=self.reduction, label_smoothing=self.label_smoothing)
        ### END SOLUTION


class BCELoss(_Loss):
    """`binary_cross_entropy` as a module: BCELoss(reduction='mean')(probs, target)."""

    def forward(self, input, target) -> Tensor:
        ### BEGIN SOLUTION 05.12 loss modules
        return binary_cross_entropy(input, target, reduction=self.reduction)
        ### END SOLUTION


class BCEWithLogitsLoss(_Loss):
    """`binary_cross_entropy_with_logits` as a module: BCEWithLogitsLoss(reduction='mean', pos_weight=None)."""

    def __init__(self, reduction: str = "mean", pos_weight=None):
        ### BEGIN SOLUTION 05.12 loss modules
        super().__init__(reduction)
        self.pos_weight = pos_weight
        ### END SOLUTION

    def forward(self, input, target) -> Tensor:
        ### BEGIN SOLUTION 05.12 loss modules
        return binary_cross_entropy_with_logits(input, target, reduction=self.reduction,
                                                pos_weight=self.pos_weight)
        ### END SOLUTION

# %%
z, t = leaf(4, 3), np.array([2, 0, 1, 1])
loss_fn = CrossEntropyLoss(label_smoothing=0.1)
assert repr(loss_fn) == "CrossEntropyLoss()" and list(loss_fn.parameters()) == []
assert np.isclose(loss_fn(z, t).item(), cross_entropy(z, t, label_smoothing=0.1).item())
assert repr(BCEWithLogitsLoss(pos_weight=np.ones(3))) == "BCEWithLogitsLoss()"
assert np.allclose(MSELoss(reduction="none")(z, np.zeros((4, 3))).data, z.data ** 2)
assert np.isclose(NLLLoss(reduction="sum")(z, t).item(), -z.data[np.arange(4), t].sum())
assert np.isclose(BCELoss()(sigmoid(z), np.ones((4, 3))).item(),
                  BCEWithLogitsLoss()(z, np.ones((4, 3))).item())
try:
    MSELoss(reduction="elementwise_mean")(z, np.zeros((4, 3)))
    raise AssertionError("a bad reduction must raise ValueError when the loss is called")
except ValueError:
    pass

# %% [markdown]
# ## Putting it together: a classifier learns
#
# A linear classifier from 04 and `CrossEntropyLoss`, trained with plain gradient descent (the
# optimizers arrive in 06) on three Gaussian clouds in 2-d. Each step is the loop every later module
# runs: forward, loss, `backward()`, update, clear the gradients.

# %%
from tinytorch.core.layers import Linear
from tinytorch.core.tensor import manual_seed

manual_seed(0)
centres = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
labels = rng.integers(0, 3, 300)
points = (centres[labels] + 0.6 * rng.standard_normal((300, 2))).astype(np.float32)
model, loss_fn = Linear(2, 3), CrossEntropyLoss()
history = []
for step in range(100):
    loss = loss_fn(model(Tensor(points)), labels)
    loss.backward()
    for param in model.parameters():
        param.data -= 0.5 * param.grad.data
        param.grad = None
    history.append(loss.item())
accuracy = np.mean(model(Tensor(points)).data.argmax(axis=1) == labels)
print(f"loss {history[0]:.3f} -> {history[-1]:.3f}, training accuracy {accuracy:.1%}")
assert history[-1] < 0.5 * history[0] and accuracy > 0.9
