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
# # 12 Attention
#
# A convolution looks at a fixed, small neighbourhood. A sentence does not work like that: in "the cat
# that the dog chased *ran* away", the verb's subject is five words back, and next time it may be
# twenty. **Attention** lets every position of a sequence decide, from the data, which other positions
# to read, and how much of each. It is the one new idea of the transformer, and the GPT of the next
# module is little more than attention layers stacked with the linear layers you already have.
#
# ```python
# out = F.scaled_dot_product_attention(q, k, v, is_causal=True)   # (B, H, T, D): every position reads
#                                                                  # the positions up to itself
# mha = nn.MultiheadAttention(128, 4, batch_first=True)
# y, weights = mha(x, x, x)                                        # self-attention over x (B, T, 128)
# ```
#
# What you build goes into `tinytorch/core/attention.py`, under PyTorch's names, with PyTorch's
# arguments, defaults and mask conventions:
#
# | you build | task |
# |---|---|
# | `_attention_bias`: boolean, float and causal masks as one additive bias | 12.1 |
# | `_attention_composed`: attention written with tensor ops (autograd does the backward) | 12.2 |
# | `_softmax_rows`: a stable softmax in place, with fully masked rows | 12.3 |
# | `_ScaledDotProductAttention.forward` (and `_attention_weights`): the fused forward | 12.4 |
# | `_ScaledDotProductAttention.backward`: the fused backward | 12.5 |
# | `nn.functional.scaled_dot_product_attention`: checked arguments | 12.6 |
# | `_mha_bias`: `nn.MultiheadAttention`'s masks (the other convention!) | 12.7 |
# | `_split_heads`, `_merge_heads`: heads as views | 12.8 |
# | `nn.MultiheadAttention`: parameters and PyTorch's initialisation | 12.9 |
# | `nn.MultiheadAttention`: the forward | 12.10 |
#
# As in 09, the operation appears twice. First composed from the ops you have (a matmul, a softmax,
# another matmul: autograd differentiates it for free), then as **one** `Function` with a hand-written
# backward that makes fewer passes over memory. Both give the same numbers; the second is what the GPT
# uses, because attention runs in every layer of every training step, and you will time the two.
#
# **Before you start.** This notebook runs on *your* 01-07 and 09 is not needed: the package imports
# `Function` from 02, `softmax` from 03, and `Module`, `Parameter`, `Linear` and `linear` from 04; the
# last example trains with your losses and optimizers. <!-- tito -->Finish the earlier modules
# (`tito test` at full marks), export them, and restart this notebook's kernel whenever you export again.
# Grade this module with `tito test 12`, which exports every module up to 12 together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.attention
import time

import numpy as np

import tinytorch as tt
from tinytorch import nn
from tinytorch.core.tensor import manual_seed
from tinytorch.core.autograd import gradcheck

rng = np.random.default_rng(0)

# %% [markdown]
# The package file starts with its imports. The fused attention is a `Function` from 02 with a
# hand-written backward, like 04's `_Linear`; `unbroadcast` (02) sums a gradient back to an operand's
# shape when the operand's batch axes were broadcast.

# %%
#| export
import math

import numpy as np

from tinytorch.core.tensor import Tensor, as_tensor, default_generator
from tinytorch.core.autograd import Function, unbroadcast
from tinytorch.core.activations import softmax
from tinytorch.core.layers import Module, Parameter, Linear, linear

__all__ = ["scaled_dot_product_attention", "MultiheadAttention"]  # tt.nn.functional, tt.nn

# %% [markdown]
# ## Attention in one formula
#
# Each of the L positions of a sequence asks a **query** q (a vector of size E); each of the S positions
# it may read offers a **key** k (size E) and a **value** v (size Ev). The answer for one query is an
# average of the values, weighted by how well the query matches each key:
#
#     scores = q kᵀ · scale          (L, E) @ (E, S) -> (L, S)     scale = 1/√E by default
#     P = softmax(scores) by rows    each row: S weights ≥ 0 that sum to 1
#     out = P v                      (L, S) @ (S, Ev) -> (L, Ev)
#
# Why the scale 1/√E: if the entries of q and k are independent with variance 1, a dot product of E of
# them has variance E, and for E = 64 the scores would spread over ±20, where the softmax is nearly a
# one-hot and its gradient nearly zero. Dividing by √E brings them back to variance 1.
#
# Everything before the last two axes is a batch: `q (B, H, L, E)` means B sequences with H heads each
# (see `MultiheadAttention`), all computed by the same matrix products at once (`np.matmul` multiplies
# the last two axes and broadcasts the others).
#
# ## Masks
#
# Often a position must *not* read some others: a language model predicting token t+1 from tokens
# 0..t may not peek at t+1 (a **causal** mask), and the padding at the end of a short sequence in a
# batch must be ignored. A mask removes entries of the score matrix before the softmax. PyTorch's
# `scaled_dot_product_attention` takes it as `attn_mask`, broadcastable to `(..., L, S)`, in one of two
# forms:
#
# | `attn_mask` | meaning | as an additive bias |
# |---|---|---|
# | boolean | **True: may attend** (takes part), False: masked | 0 where True, −∞ where False |
# | float | added to the scores | itself |
# | `is_causal=True` (no `attn_mask`) | query i reads keys 0..i | the boolean `tril` of ones `(L, S)` |
#
# Every mask becomes one float array `bias` added to the scores; e^−∞ = 0, so a masked entry gets
# weight exactly 0 and the row's other weights still sum to 1. The causal mask is aligned to the top
# left, as in PyTorch: query i may read key j when j ≤ i, also when L ≠ S.
#
# `_attention_bias(attn_mask, is_causal, L, S, dtype)` (task 12.1) returns that bias as an array of
# `dtype` (the query's), or `None` when there is no mask:
#
# - `is_causal=True` together with an `attn_mask` is PyTorch's `RuntimeError` ("Explicit attn_mask should
#   not be set when is_causal=True"): two masks would be ambiguous;
# - a mask of another dtype than bool or float (an int array, say) is a `TypeError` naming its dtype;
# - a mask whose shape does not broadcast to `(L, S)` in its last two axes (`np.broadcast_shapes(mask.shape,
#   (L, S))` must end in `(L, S)`) is a `ValueError` naming the mask's shape and `(L, S)`;
# - build the bool bias with `np.where(mask, 0, -np.inf)` in `dtype` (no loop); a float mask is cast
#   to `dtype` (without a copy when it already has it).

# %%
#| export
def _attention_bias(attn_mask, is_causal: bool, L: int, S: int, dtype):
    """attn_mask (bool: True = attend; float: added) or the causal mask, as an additive float bias of
    `dtype` broadcastable to (..., L, S); None without a mask."""
    ### BEGIN SOLUTION 12.1 _attention_bias
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("scaled_dot_product_attention: Explicit attn_mask should not be set when "
                               "is_causal=True")
        attn_mask = np.tril(np.ones((L, S), dtype=bool))
    if attn_mask is None:
        return None
    mask = np.asarray(attn_mask)
    if mask.dtype != np.bool_ and not np.issubdtype(mask.dtype, np.floating):
        raise TypeError(f"attn_mask must be a bool or float array, got dtype {mask.dtype}")
    try:
        fits = np.broadcast_shapes(mask.shape, (L, S))[-2:] == (L, S)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"attn_mask of shape {mask.shape} does not broadcast to the scores' (L, S) = {(L, S)}")
    if mask.dtype == np.bool_:
        return np.where(mask, np.asarray(0, dtype), np.asarray(-np.inf, dtype))
    return mask.astype(dtype, copy=False)
    ### END SOLUTION

# %% [markdown]
# Test 12.1.

# %%
causal = _attention_bias(None, True, 3, 4, np.float32)
print(causal)
assert causal.dtype == np.float32 and causal.shape == (3, 4)
assert np.array_equal(np.isinf(causal), ~np.tril(np.ones((3, 4), dtype=bool))) and causal[2, 2] == 0
keep = np.array([[True, False], [True, True]])
assert _attention_bias(keep, False, 2, 2, np.float64).tolist() == [[0.0, -np.inf], [0.0, 0.0]]
assert _attention_bias(None, False, 2, 2, np.float32) is None
floats = rng.standard_normal((2, 1, 5)).astype(np.float32)
assert _attention_bias(floats, False, 3, 5, np.float32) is floats, "a float mask of the right dtype: no copy"
for mask, causal_too, error_type in [(keep, True, RuntimeError), (np.ones((2, 2), np.int64), False, TypeError),
                                     (np.ones((3, 2), bool), False, ValueError)]:
    try:
        _attention_bias(mask, causal_too, 2, 2, np.float32)
        raise AssertionError(f"expected {error_type.__name__}")
    except error_type as error:
        print("as expected:", error)

# %% [markdown]
# ## Attention composed from tensor ops
#
# With 01-03 you can write attention directly, and autograd differentiates it:
#
# ```python
# scores = q @ k.transpose(-2, -1) * scale          # (..., L, S)
# scores = scores + Tensor(bias)                     # when there is a mask
# out = softmax(scores, dim=-1) @ v                 # (..., L, Ev)
# ```
#
# `_attention_composed(query, key, value, bias=None, scale=None)` (task 12.2) is exactly that, with
# 03's `softmax`; `scale=None` means 1/√E (E = `query.shape[-1]`), `bias` is an array from
# `_attention_bias` or `None`. It is exported under a private name only so that the grader can reach
# it, and so that you can time it against the fused version below; the package never calls it.
#
# Count what it costs. The forward records six nodes (transpose, matmul, multiply, add, softmax,
# matmul: the transpose is free, a view); every node's output is a full `(..., L, S)` array, and the
# backward walks all of them again. For the GPT of the next module that is a few megabytes per layer,
# read and written several times per step.
#
# One more thing it gets wrong: a row that is **masked entirely** (a query allowed to read nothing, as
# a padded query row can be) has the scores −∞ everywhere. The stable softmax subtracts the row's
# maximum, −∞ − (−∞) = NaN, and the NaN spreads into the output and, through the backward, into every
# weight. You will fix that in the fused version.

# %%
#| export
def _attention_composed(query, key, value, bias=None, scale=None) -> Tensor:
    """softmax(query @ key^T * scale + bias) @ value from Tensor ops (autograd derives the backward)."""
    ### BEGIN SOLUTION 12.2 _attention_composed
    q, k, v = as_tensor(query), as_tensor(key), as_tensor(value)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ k.transpose(-2, -1)) * scale
    if bias is not None:
        scores = scores + Tensor(bias)
    return softmax(scores, dim=-1) @ v
    ### END SOLUTION

# %% [markdown]
# Test 12.2: against numpy, and its gradients against central differences.

# %%
def numpy_attention(q, k, v, bias=None, scale=None):
    """The formula in numpy, for the tests of this notebook."""
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale + (0 if bias is None else bias)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return np.matmul(weights / weights.sum(axis=-1, keepdims=True), v)


q, k, v = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4)), rng.standard_normal((2, 5, 6))
bias = _attention_bias(None, True, 3, 5, np.float64)
out = _attention_composed(Tensor(q), Tensor(k), Tensor(v), bias)
assert out.shape == (2, 3, 6) and np.allclose(out.data, numpy_attention(q, k, v, bias))
assert np.allclose(out.data[:, 0], v[:, 0]), "causal: the first query reads only the first value"
assert np.allclose(_attention_composed(Tensor(q), Tensor(k), Tensor(v), scale=0.3).data,
                   numpy_attention(q, k, v, scale=0.3))
leaves = [Tensor(a, requires_grad=True) for a in (q, k, v)]
assert gradcheck(lambda q, k, v: _attention_composed(q, k, v, bias), *leaves)

# %% [markdown]
# ## A softmax for attention
#
# The fused version works on numpy arrays, and its softmax is a helper of its own,
# `_softmax_rows(scores)` (task 12.3): the softmax along the last axis, with three properties.
#
# - **Stable.** Subtract each row's maximum first: every exponent is then ≤ 0, so nothing overflows
#   however large the scores (e^89 is already infinite in float32), and the result is unchanged, since
#   the common factor e^−max cancels between numerator and denominator.
# - **Fully masked rows give zeros.** A row whose maximum is −∞ has nothing to attend to. Its weights
#   are defined as 0, so its output is 0 and no gradient flows through it. That is what PyTorch 2.5 and
#   later return from `scaled_dot_product_attention` (older versions, and `nn.MultiheadAttention` in
#   PyTorch when it returns the weights, give NaN). Zeros are the useful choice: a NaN in one padded
#   row would reach the loss through the backward and ruin every weight of the model in one step,
#   while a zero row is simply ignored. Implement it without a branch per row: where the row maximum
#   is −∞ use 0 in its place (then every e^(−∞ − 0) = 0), and where the row's sum is 0 divide by 1.
#   Both fixes touch only the small `(..., L, 1)` arrays of maxima and sums.
# - **In place.** `scores` is a fresh array that nobody else holds (the forward just computed it), so
#   overwrite it: `scores -= m`, `np.exp(scores, out=scores)`, `scores /= total`. Every `(..., L, S)`
#   temporary you avoid is a pass over memory saved. Return `scores`.

# %%
#| export
def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    """softmax along the last axis, in place, stable; a row of -inf (fully masked) becomes zeros."""
    ### BEGIN SOLUTION 12.3 _softmax_rows
    top = scores.max(axis=-1, keepdims=True)
    top[np.isneginf(top)] = 0                         # a fully masked row: exp(-inf - 0) = 0 everywhere
    scores -= top
    np.exp(scores, out=scores)
    total = scores.sum(axis=-1, keepdims=True)
    total[total == 0] = 1                             # ... and 0 / 1 = 0
    scores /= total
    return scores
    ### END SOLUTION

# %% [markdown]
# Test 12.3.

# %%
scores = np.array([[1.0, 2.0, 3.0], [1000.0, 1001.0, -np.inf], [-np.inf, -np.inf, -np.inf]], dtype=np.float32)
weights = _softmax_rows(scores)
print(weights)
assert weights is scores or np.shares_memory(weights, scores), "in place"
assert np.allclose(weights[0], np.exp([1, 2, 3]) / np.exp([1, 2, 3]).sum())
assert np.allclose(weights[1], [1 / (1 + np.e), np.e / (1 + np.e), 0.0]), "large scores: no overflow"
assert weights[2].tolist() == [0.0, 0.0, 0.0], "a fully masked row: zeros, not NaN"

# %% [markdown]
# ## The fused forward
#
# `_ScaledDotProductAttention` is one `Function`: one node in the graph for the whole formula. Its
# `forward(ctx, q, k, v, bias=None, scale=1.0)` gets numpy arrays (`bias` and `scale` are parameters,
# not operands: the mask gets no gradient):
#
# 1. `p = _attention_weights(q, k, bias, scale)`, a helper (the same task) that the module below reuses
#    to return the weights: the scores q kᵀ · scale, from the given `_scores(q, k, scale)` below (a new
#    array), plus the bias, then `_softmax_rows`. Add the bias in place (`scores += bias`); but a bias
#    may have *more* batch axes than the scores (one mask per head for a query without heads, say), and
#    then `+=` cannot grow the array, so use `scores = scores + bias` in that case only (compare
#    `np.broadcast_shapes(scores.shape, bias.shape)` with `scores.shape`);
# 2. `out = np.matmul(p, v)`;
# 3. save q, k, v and p for the backward (`ctx.save_for_backward`), and the scale on `ctx`.
#
# Saving p costs one `(..., L, S)` array, and spares the backward the whole softmax again.
#
# `_scores(q, k, scale)` is one batched matrix product, `np.matmul(q, np.swapaxes(k, -1, -2)) * scale`
# (`np.swapaxes` is a view: `np.matmul` reads the transposed key in place, no copy), with one aside about
# memory. numpy reduces along a short last axis one row at a time, so the row maxima and sums are the
# slowest steps of `_softmax_rows` (64 numbers a row in the GPT). `_scores` computes k qᵀ = (q kᵀ)ᵀ and
# hands back its transposed view: the same `(..., L, S)` numbers, stored key by key, so that a reduction
# along the last axis combines whole rows of memory instead (the row maximum about twice as fast: its
# docstring has the measurements). Whatever works on it in place (`+=`, `_softmax_rows`) keeps that
# layout, and `np.matmul` reads either; only a new array from `scores + bias` goes back to numpy's
# default layout, which is why the bias goes in with `+=` where it can.

# %%
#| export
def _scores(a: np.ndarray, b: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """a @ b^T * scale over the last two axes: (..., L, E), (..., S, E) -> (..., L, S), a new array. The
    attention scores q k^T * scale, and in the backward g v^T (laid out as P). Stored key by key, as the
    transposed view of b @ a^T, so that reductions along the last axis combine whole rows of memory: on the
    GPT's (32, 4, 64, 64) scores the row maximum took 0.24 ms against 0.58 ms in numpy's default layout, and
    the weights (_scores, then _softmax_rows) 1.1 ms against 1.5 ms (medians, one thread)."""
    scores = np.swapaxes(np.matmul(b, np.swapaxes(a, -1, -2)), -1, -2)
    if scale != 1.0:
        scores *= scale
    return scores

# %% [markdown]
# ## The fused backward
#
# With g = ḡ_out `(..., L, Ev)`, the chain rule through `out = P v`, the softmax and the scores gives
#
#     ḡ_v = Pᵀ g                                   (S, L) @ (L, Ev) -> (S, Ev)
#     ḡ_P = g vᵀ                                   (L, Ev) @ (Ev, S) -> (L, S)
#     ḡ_scores = P ⊙ (ḡ_P − rowsum(ḡ_P ⊙ P))       the softmax's backward, row by row (as in 03)
#     ḡ_q = ḡ_scores k · scale                     (L, S) @ (S, E) -> (L, E)
#     ḡ_k = ḡ_scoresᵀ q · scale                    (S, L) @ (L, E) -> (S, E)
#
# ḡ_P = g vᵀ is a product of the same form as the scores: take it from `_scores(grad_output, v)`, which
# lays it out as P, so that its products and row sums with P also run along memory.
#
# Fold the scale into ḡ_scores once (one multiply of an `(L, S)` array instead of two of `(L, E)` and
# `(S, E)` arrays... or the other way round when E is larger than S: either is fine), and compute ḡ_P
# into a new array and then work in place on it (`-=`, `*=`): three products, one temporary. A fully
# masked row has P = 0 there, so its ḡ_scores is 0: no gradient reaches its keys or its query.
#
# Return one gradient per operand, `None` where `ctx.needs_input_grad` does not ask for it (skip ḡ_P
# entirely when neither q nor k needs a gradient). Batch axes may have been broadcast (one key for
# every head, say): pass each gradient through `unbroadcast(grad, operand.shape)` (02), which returns
# it untouched when nothing was broadcast.

# %%
#| export
def _attention_weights(q: np.ndarray, k: np.ndarray, bias, scale: float) -> np.ndarray:
    """P = softmax(q @ k^T * scale + bias) along the last axis: (..., L, S), a new array."""
    ### BEGIN SOLUTION 12.4 fused forward
    scores = _scores(q, k, scale)                               # q kᵀ · scale, (..., L, S)
    if bias is not None:
        if np.broadcast_shapes(scores.shape, bias.shape) == scores.shape:
            scores += bias
        else:
            scores = scores + bias                              # the bias adds batch axes
    return _softmax_rows(scores)
    ### END SOLUTION


class _ScaledDotProductAttention(Function):
    """out = softmax(q @ k^T * scale + bias) @ v over the last two axes, batched over the others."""

    @staticmethod
    def forward(ctx, q, k, v, bias=None, scale=1.0):
        ### BEGIN SOLUTION 12.4 fused forward
        p = _attention_weights(q, k, bias, scale)
        ctx.save_for_backward(q, k, v, p)
        ctx.scale = scale
        return np.matmul(p, v)                                   # (..., L, Ev)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 12.5 fused backward
        q, k, v, p = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_q = grad_k = grad_v = None
        if needs[2]:
            grad_v = unbroadcast(np.matmul(np.swapaxes(p, -1, -2), grad_output), v.shape)
        if needs[0] or needs[1]:
            grad_scores = _scores(grad_output, v)                # ḡ_P = g vᵀ, (..., L, S), laid out as p
            grad_scores -= (grad_scores * p).sum(axis=-1, keepdims=True)
            grad_scores *= p                                     # ḡ_scores = P ⊙ (ḡ_P − rowsum(ḡ_P ⊙ P))
            grad_scores *= ctx.scale
            if needs[0]:
                grad_q = unbroadcast(np.matmul(grad_scores, k), q.shape)
            if needs[1]:
                grad_k = unbroadcast(np.matmul(np.swapaxes(grad_scores, -1, -2), q), k.shape)
        return grad_q, grad_k, grad_v
        ### END SOLUTION

# %% [markdown]
# Test 12.4: the same numbers as the formula, large scores, a fully masked row.

# %%
q = rng.standard_normal((2, 3, 4, 8)).astype(np.float32)
k = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
v = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
for bias in [None, _attention_bias(None, True, 4, 6, np.float32), rng.standard_normal((3, 1, 6)).astype(np.float32)]:
    fused = _ScaledDotProductAttention.apply(Tensor(q), Tensor(k), Tensor(v), bias=bias, scale=0.35)
    assert fused.shape == (2, 3, 4, 5) and fused.dtype == np.float32
    assert np.allclose(fused.data, numpy_attention(q, k, v, bias, 0.35), atol=1e-5)
big = _ScaledDotProductAttention.apply(Tensor(q * 100), Tensor(k * 100), Tensor(v), scale=1.0)
assert np.all(np.isfinite(big.data)), "scores of 10^4: still finite"
blocked = np.zeros((4, 6), dtype=np.float32)
blocked[1] = -np.inf                                        # query 1 may read nothing
out = _ScaledDotProductAttention.apply(Tensor(q), Tensor(k), Tensor(v), bias=blocked, scale=0.35)
assert np.all(out.data[:, :, 1] == 0) and np.all(np.isfinite(out.data)), "a fully masked row: output 0"
assert np.allclose(_attention_weights(q, k, blocked, 0.35).sum(axis=-1)[0, 0], [1, 0, 1, 1], atol=1e-6)

# %% [markdown]
# Test 12.5: the gradients against central differences (float64), with a causal mask, a fully masked row,
# and a key and value shared by all heads (broadcast batch axes).

# %%
q = Tensor(rng.standard_normal((2, 3, 4, 5)), requires_grad=True)
k = Tensor(rng.standard_normal((2, 1, 6, 5)), requires_grad=True)          # one key for the 3 heads
v = Tensor(rng.standard_normal((2, 1, 6, 3)), requires_grad=True)
for bias in [None, _attention_bias(None, True, 4, 6, np.float64), np.where(np.arange(4)[:, None] == 2, -np.inf, 0.0)]:
    assert gradcheck(lambda q, k, v: _ScaledDotProductAttention.apply(q, k, v, bias=bias, scale=0.4), q, k, v)
data = Tensor(rng.standard_normal((2, 3, 4, 5)))                            # a query without grad
_ScaledDotProductAttention.apply(data, k, v, scale=0.4).sum().backward()
assert data.grad is None and k.grad.shape == (2, 1, 6, 5) and v.grad.shape == (2, 1, 6, 3)

# %% [markdown]
# ## `scaled_dot_product_attention`
#
# The function users call, PyTorch's `nn.functional.scaled_dot_product_attention(query, key, value,
# attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False)` (task 12.6):
#
# - `query`, `key`, `value` become tensors (`as_tensor`); they must be `(..., L, E)`, `(..., S, E)` and
#   `(..., S, Ev)`: at least two axes each, the query's and key's last sizes equal, the key's and
#   value's sequence lengths equal, and batch axes that broadcast together. Anything else is a
#   `ValueError` naming the three shapes (numpy's own error would name arrays one step removed from the
#   user's mistake);
# - the mask: `_attention_bias(attn_mask, is_causal, L, S, query's dtype)`;
# - `scale=None` means 1/√E; a given scale is used as it is (a Python float);
# - then `_ScaledDotProductAttention.apply(query, key, value, bias=bias, scale=scale)`.
#
# Attention dropout (`dropout_p`) and grouped-query attention (`enable_gqa`) are PyTorch's and beyond
# this course: anything but their defaults is a `ValueError` (given).

# %%
#| export nn.functional
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False) -> Tensor:
    """softmax(query @ key^T * scale + mask) @ value for query (..., L, E), key (..., S, E), value (..., S, Ev);
    attn_mask bool (True: attend) or float (added), or is_causal; a fully masked row gives zeros."""
    if dropout_p != 0.0:
        raise ValueError(f"scaled_dot_product_attention: tinytorch supports dropout_p=0.0 only, got {dropout_p}")
    if enable_gqa:
        raise ValueError("scaled_dot_product_attention: tinytorch does not support enable_gqa=True")
    ### BEGIN SOLUTION 12.6 scaled_dot_product_attention
    q, k, v = as_tensor(query), as_tensor(key), as_tensor(value)
    try:
        fits = (min(q.ndim, k.ndim, v.ndim) >= 2 and q.shape[-1] == k.shape[-1] and k.shape[-2] == v.shape[-2]
                and np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) is not None)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"scaled_dot_product_attention: expected query (..., L, E), key (..., S, E) and value "
                         f"(..., S, Ev) with batch axes that broadcast, got shapes {q.shape}, {k.shape} and {v.shape}")
    bias = _attention_bias(attn_mask, is_causal, q.shape[-2], k.shape[-2], q.dtype)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return _ScaledDotProductAttention.apply(q, k, v, bias=bias, scale=scale)
    ### END SOLUTION

# %% [markdown]
# Test 12.6, and **causality**: with `is_causal=True`, the output at position t must not change when the
# tokens after t change.

# %%
sdpa = scaled_dot_product_attention
q, k, v = (rng.standard_normal((2, 4, 7, 8)).astype(np.float32) for _ in range(3))
out = sdpa(q, k, v, is_causal=True)
assert np.allclose(out.data, numpy_attention(q, k, v, _attention_bias(None, True, 7, 7, np.float32)), atol=1e-5)
keep = rng.random((7, 7)) < 0.7
keep[:, 0] = True
assert np.allclose(sdpa(q, k, v, attn_mask=keep).data, sdpa(q, k, v, attn_mask=np.where(keep, 0.0, -np.inf)).data)
assert np.allclose(sdpa(q, k, v, scale=0.1).data, numpy_attention(q, k, v, scale=0.1), atol=1e-5)
later = slice(4, None)                                      # change the tokens after position 3
k2, v2 = k.copy(), v.copy()
k2[:, :, later], v2[:, :, later] = rng.standard_normal((2, 2, 4, 3, 8)).astype(np.float32)
changed = sdpa(q, k2, v2, is_causal=True)
assert np.allclose(changed.data[:, :, :4], out.data[:, :, :4]) and not np.allclose(changed.data[:, :, 4:],
                                                                                     out.data[:, :, 4:])
for call in (lambda: sdpa(q, k, v, attn_mask=keep, is_causal=True), lambda: sdpa(q, k[..., :5], v)):
    try:
        call()
        raise AssertionError("expected an error")
    except (RuntimeError, ValueError) as error:
        print("as expected:", type(error).__name__, error)

# %% [markdown]
# ### How much does fusing save?
#
# The composed version (task 12.2) against the fused one, forward and backward, at the size of the
# GPT of the next module: a batch of 32 sequences of 64 tokens, 4 heads of 32 (learner-only: about a
# second). The two do the same matrix products; the fused one saves the separate nodes, their
# temporaries and the passes over memory between them.

# %% tags=["learner-only"]
import matplotlib.pyplot as plt
from threadpoolctl import threadpool_limits


def seconds(fn, repeat=7):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


arrays = [rng.standard_normal((32, 4, 64, 32)).astype(np.float32) for _ in range(3)]
upstream = Tensor(np.ones((32, 4, 64, 32), dtype=np.float32))


def step(attend):
    leaves = [Tensor(array, requires_grad=True) for array in arrays]
    attend(*leaves).backward(upstream)


causal64 = _attention_bias(None, True, 64, 64, np.float32)
with threadpool_limits(limits=1):
    composed = seconds(lambda: step(lambda q, k, v: _attention_composed(q, k, v, causal64)))
    fused = seconds(lambda: step(lambda q, k, v: sdpa(q, k, v, is_causal=True)))
print(f"composed {composed * 1e3:.1f} ms, fused {fused * 1e3:.1f} ms: {composed / fused:.1f} times faster")
plt.figure(figsize=(5, 2))
plt.barh(["composed", "fused"], [composed * 1e3, fused * 1e3], color=["C1", "C0"])
plt.xlabel("ms, forward + backward, (32, 4, 64, 32)")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## `nn.MultiheadAttention`: the masks, the other way round
#
# `nn.MultiheadAttention` is older than `scaled_dot_product_attention`, and its masks follow the
# **opposite** boolean convention. Read this twice; it is a classic source of silent bugs:
#
# | mask | shape | boolean True means | float |
# |---|---|---|---|
# | SDPA's `attn_mask` | broadcast to `(..., L, S)` | **may attend** | added |
# | MHA's `attn_mask` | `(L, S)` or `(B·H, L, S)` | **masked** (may not attend) | added |
# | MHA's `key_padding_mask` | `(B, S)` | **masked**: key s of sequence b is padding | added |
#
# `_mha_bias(attn_mask, key_padding_mask, batch, heads, L, S, dtype)` (task 12.7) merges the two into
# one additive bias broadcastable to `(B, H, L, S)`, of `dtype`, or `None` when both are `None`:
#
# - a boolean mask becomes −∞ where True and 0 where False; a float mask is cast to `dtype`;
# - `attn_mask` `(L, S)` stays as it is (broadcast over batch and heads); `(B·H, L, S)` (one mask per
#   sequence and head, sequence-major as PyTorch orders them) is reshaped to `(B, H, L, S)`;
# - `key_padding_mask` `(B, S)` becomes `(B, 1, 1, S)`: the same keys are hidden from every head and
#   every query of that sequence;
# - with both, their sum;
# - a mask of another shape is PyTorch's `RuntimeError`, naming the mask's shape and the shapes
#   expected (as PyTorch: "The shape of the 2D attn_mask is ..., but should be ...").

# %%
#| export
def _mha_bias(attn_mask, key_padding_mask, batch: int, heads: int, L: int, S: int, dtype):
    """MultiheadAttention's masks (bool: True = masked; float: added) as one additive bias broadcastable to
    (batch, heads, L, S), or None."""
    ### BEGIN SOLUTION 12.7 _mha_bias
    def additive(mask):
        if mask.dtype == np.bool_:
            return np.where(mask, np.asarray(-np.inf, dtype), np.asarray(0, dtype))
        return mask.astype(dtype, copy=False)

    bias = None
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.shape not in ((L, S), (batch * heads, L, S)):
            raise RuntimeError(f"MultiheadAttention: the attn_mask has shape {mask.shape}, but should be {(L, S)} "
                               f"or {(batch * heads, L, S)}")
        bias = additive(mask).reshape((L, S) if mask.ndim == 2 else (batch, heads, L, S))
    if key_padding_mask is not None:
        padding = np.asarray(key_padding_mask)
        if padding.shape != (batch, S):
            raise RuntimeError(f"MultiheadAttention: the key_padding_mask has shape {padding.shape}, but should "
                               f"be {(batch, S)}")
        padding = additive(padding).reshape(batch, 1, 1, S)
        bias = padding if bias is None else bias + padding
    return bias
    ### END SOLUTION

# %% [markdown]
# Test 12.7.

# %%
hidden = np.triu(np.ones((3, 3), dtype=bool), 1)           # MHA's causal mask: True above the diagonal
assert np.array_equal(_mha_bias(hidden, None, 2, 4, 3, 3, np.float32), _attention_bias(None, True, 3, 3, np.float32))
padding = np.array([[False, False, True], [False, False, False]])
merged = _mha_bias(hidden, padding, 2, 4, 3, 3, np.float32)
assert merged.shape == (2, 1, 3, 3) and merged.dtype == np.float32
assert np.isneginf(merged[0, 0, :, 2]).all() and np.isneginf(merged[1, 0]).sum() == 3
per_head = rng.standard_normal((8, 3, 3))
assert np.array_equal(_mha_bias(per_head, None, 2, 4, 3, 3, np.float64)[1, 2], per_head[6])
assert _mha_bias(None, None, 2, 4, 3, 3, np.float32) is None
try:
    _mha_bias(np.zeros((3, 4)), None, 2, 4, 3, 3, np.float32)
    raise AssertionError("expected RuntimeError")
except RuntimeError as error:
    print("as expected:", error)

# %% [markdown]
# ## Heads
#
# One attention lets each query form *one* weighted average. **Multi-head** attention runs H smaller
# attentions side by side: the E features of each position are cut into H groups of D = E / H, and
# head h attends with its own slice of the queries, keys and values, free to look somewhere else than
# the other heads (one at the previous token, one at the subject of the sentence, ...). The cost is the
# same as one attention of size E.
#
# The heads are a batch axis: reshape `(B, T, E)` into `(B, T, H, D)` (a view: the features of a head
# are adjacent in memory), then swap the middle axes to `(B, H, T, D)` (a view again: only the strides
# change). `np.matmul` then multiplies the last two axes of all B·H heads in one call, reading the
# strided view in place (its rows are D contiguous floats, H·D apart, which BLAS accepts), so the
# split costs **no copy at all**. Merging back, `(B, H, T, D)` → `(B, T, H, D)` → `(B, T, E)`, is a
# transpose (a view) and a reshape, which must copy once: the heads' outputs are separate blocks, and
# the next linear layer wants each position's E features side by side.
#
# Task 12.8: `_split_heads(x, num_heads)` (a Tensor `(B, T, E)` → `(B, H, T, D)`) and
# `_merge_heads(x)` (`(B, H, T, D)` → `(B, T, H·D)`), with 01's `reshape` and `transpose`, so that
# autograd carries the gradients through.

# %%
#| export
def _split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, E) -> (B, H, T, E // H): a reshape and a transpose, both views."""
    ### BEGIN SOLUTION 12.8 heads
    batch, length, embed = x.shape
    return x.reshape(batch, length, num_heads, embed // num_heads).transpose(1, 2)
    ### END SOLUTION


def _merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, D) -> (B, T, H * D): the inverse of _split_heads."""
    ### BEGIN SOLUTION 12.8 heads
    batch, heads, length, size = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * size)
    ### END SOLUTION

# %% [markdown]
# Test 12.8.

# %%
x = Tensor(np.arange(2 * 3 * 8, dtype=np.float32).reshape(2, 3, 8), requires_grad=True)
heads = _split_heads(x, 4)
assert heads.shape == (2, 4, 3, 2) and np.shares_memory(heads.data, x.data), "a view, no copy"
assert heads.data[1, 2, 0].tolist() == x.data[1, 0, 4:6].tolist(), "head 2 holds features 4 and 5"
assert np.array_equal(_merge_heads(heads).data, x.data)
(_merge_heads(heads) * 2).sum().backward()
assert np.array_equal(x.grad.data, np.full((2, 3, 8), 2.0))

# %% [markdown]
# ## The module: parameters and initialisation
#
# `MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
# add_zero_attn=False, kdim=None, vdim=None, batch_first=False)`: PyTorch's signature and defaults
# (note `batch_first=False`: PyTorch's default layout is `(T, B, E)`; pass `batch_first=True` for
# `(B, T, E)`, as the GPT will). Its parameters, in PyTorch's names and shapes:
#
# | parameter | shape | what | initialisation |
# |---|---|---|---|
# | `in_proj_weight` | `(3E, E)` | the query, key and value projections stacked: rows 0..E−1 make q, then k, then v | `xavier_uniform_` |
# | `in_proj_bias` | `(3E,)` | their biases (`None` with `bias=False`) | zeros |
# | `out_proj.weight` | `(E, E)` | the output projection, a `Linear` | `Linear`'s (U(±1/√E)) |
# | `out_proj.bias` | `(E,)` | its bias (none with `bias=False`) | zeros |
#
# **Xavier (Glorot) uniform** draws from U(−a, a) with a = √(6 / (fan_in + fan_out)); for the `(3E, E)`
# weight, fan_in = E and fan_out = 3E, so a = √(6 / 4E). It keeps the variance of the activations
# about the same forwards *and* backwards (Glorot and Bengio, 2010); PyTorch uses it here and keeps
# `Linear`'s own rule for `out_proj`.
#
# In `__init__` (task 12.9), in this order, which is PyTorch's: store `embed_dim`, `num_heads`,
# `head_dim = embed_dim // num_heads`, `batch_first`, `dropout`; create `in_proj_weight` (float32
# `Parameter` of shape `(3E, E)`), `in_proj_bias` (`(3E,)`, or `register_parameter("in_proj_bias",
# None)`), then `out_proj = NonDynamicallyQuantizableLinear(E, E, bias=bias)` (given: a `Linear` under
# PyTorch's name for it, so that the repr is PyTorch's; creating it draws its weight and bias from
# `default_generator`); then call `_reset_parameters()`, which draws `in_proj_weight` from
# `default_generator` and zeroes `in_proj_bias` and `out_proj.bias` (when they exist): so after
# `manual_seed(s)`, `out_proj.weight` is the weight that `Linear(E, E)` draws after `manual_seed(s)`. An
# `embed_dim` that `num_heads` does not divide is a `ValueError` naming both (PyTorch asserts).
#
# The options this course does not implement (`dropout`, `add_bias_kv`, `add_zero_attn`, a `kdim` or
# `vdim` other than `embed_dim`) are refused with a `ValueError` by the given check `_check_options`.

# %% [markdown]
# ## The forward
#
# `forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
# average_attn_weights=True, is_causal=False)` returns `(attn_output, attn_weights)`. The given
# `forward` handles PyTorch's layouts (with `batch_first=False` the inputs are `(T, B, E)`: a transpose
# view makes them `(B, T, E)`; an unbatched `(T, E)` input gets a batch axis of 1) and its checks, and
# calls `_attend`, which you write (task 12.10) for `query (B, L, E)`, `key (B, S, E)`, `value (B, S, E)`:
#
# 1. project: q = query W_qᵀ + b_q with W_q = `in_proj_weight[:E]`, b_q = `in_proj_bias[:E]`; k with
#    rows `E:2E`, v with rows `2E:` (04's `linear`; slicing a Parameter is a differentiable op, and its
#    gradient lands in the right rows of `in_proj_weight.grad`);
# 2. split the heads: `_split_heads`, `(B, H, L, D)` and `(B, H, S, D)`;
# 3. the masks: `bias = _mha_bias(attn_mask, key_padding_mask, B, H, L, S, dtype)` (the query's dtype);
# 4. attend, fused: `_ScaledDotProductAttention.apply(q, k, v, bias=bias, scale=1/√D)` (D, the head's
#    size: each head is an attention of size D);
# 5. merge the heads and project: `out_proj(_merge_heads(out))`, `(B, L, E)`;
# 6. the weights: `None` when `need_weights=False`; otherwise P of every head, `_attention_weights(q, k,
#    bias, scale)` on the arrays, `(B, H, L, S)`, averaged over the heads when `average_attn_weights`
#    (`(B, L, S)`), as a Tensor. They are computed again, for inspection only, and carry no gradient
#    (PyTorch's do; nothing in this course differentiates them). PyTorch too takes a slower path when it
#    must return the weights, so a model passes `need_weights=False`.
#
# `is_causal` in PyTorch's `MultiheadAttention` is only a *hint* that `attn_mask` is the causal mask:
# the mask must be given (the given `forward` raises PyTorch's `RuntimeError` without it) and is used.

# %%
#| export
class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for MultiheadAttention's out_proj: a plain Linear (the name only matters to PyTorch's
    quantization tools), kept so that the module prints as PyTorch's does."""


def _check_options(embed_dim, dropout, add_bias_kv, add_zero_attn, kdim, vdim) -> None:
    """ValueError for the options of PyTorch's MultiheadAttention that tinytorch does not implement."""
    if dropout != 0.0:
        raise ValueError(f"MultiheadAttention: tinytorch supports dropout=0.0 only, got {dropout}")
    if add_bias_kv or add_zero_attn:
        raise ValueError("MultiheadAttention: tinytorch does not support add_bias_kv or add_zero_attn")
    if kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
        raise ValueError(f"MultiheadAttention: tinytorch supports kdim = vdim = embed_dim ({embed_dim}) only, "
                         f"got kdim={kdim}, vdim={vdim}")

# %%
#| export nn
class MultiheadAttention(Module):
    """Multi-head attention: in_proj_weight (3E, E), in_proj_bias (3E,), out_proj a Linear(E, E); forward
    returns (attn_output, attn_weights or None)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False):
        super().__init__()
        _check_options(embed_dim, dropout, add_bias_kv, add_zero_attn, kdim, vdim)
        ### BEGIN SOLUTION 12.9 MultiheadAttention parameters
        if num_heads <= 0 or embed_dim % num_heads != 0:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.batch_first, self.dropout = batch_first, dropout
        self.in_proj_weight = Parameter(np.empty((3 * embed_dim, embed_dim), dtype=np.float32))
        if bias:
            self.in_proj_bias = Parameter(np.empty(3 * embed_dim, dtype=np.float32))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias)
        self._reset_parameters()
        ### END SOLUTION

    def _reset_parameters(self) -> None:
        """in_proj_weight: xavier_uniform_; in_proj_bias and out_proj.bias: zeros."""
        ### BEGIN SOLUTION 12.9 MultiheadAttention parameters
        fan_out, fan_in = self.in_proj_weight.shape
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        self.in_proj_weight.data[...] = default_generator.uniform(-bound, bound, size=self.in_proj_weight.shape)
        if self.in_proj_bias is not None:
            self.in_proj_bias.data[...] = 0.0
        if self.out_proj.bias is not None:
            self.out_proj.bias.data[...] = 0.0
        ### END SOLUTION

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        """(attn_output, attn_weights): inputs (B, T, E) with batch_first, else (T, B, E); or unbatched (T, E)."""
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                               "module method `generate_square_subsequent_mask` to create this mask.")
        query, key, value = as_tensor(query), as_tensor(key), as_tensor(value)
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (x.reshape(1, *x.shape) for x in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = np.asarray(key_padding_mask).reshape(1, -1)
        elif not self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))   # (T, B, E) -> (B, T, E), views
        shapes = (query.shape, key.shape, value.shape)
        if (any(len(shape) != 3 or shape[2] != self.embed_dim for shape in shapes) or key.shape != value.shape
                or key.shape[0] != query.shape[0]):
            raise ValueError(f"MultiheadAttention: expected query (B, L, E), key and value (B, S, E) with "
                             f"E = {self.embed_dim} (batch_first={self.batch_first}), got shapes "
                             f"{', '.join(str(s) for s in shapes)}")
        out, weights = self._attend(query, key, value, key_padding_mask, need_weights, attn_mask,
                                    average_attn_weights)
        if unbatched:
            return out.reshape(*out.shape[1:]), None if weights is None else weights.reshape(*weights.shape[1:])
        if not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _attend(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask, need_weights: bool,
                attn_mask, average_attn_weights: bool):
        """The forward for query (B, L, E), key and value (B, S, E): (output (B, L, E), weights or None)."""
        ### BEGIN SOLUTION 12.10 MultiheadAttention forward
        E, H = self.embed_dim, self.num_heads
        batch, L, S = query.shape[0], query.shape[1], key.shape[1]
        w, b = self.in_proj_weight, self.in_proj_bias
        projected = []
        for index, x in enumerate((query, key, value)):
            rows = slice(index * E, (index + 1) * E)
            projected.append(_split_heads(linear(x, w[rows], None if b is None else b[rows]), H))
        q, k, v = projected
        bias = _mha_bias(attn_mask, key_padding_mask, batch, H, L, S, q.dtype)
        scale = 1.0 / math.sqrt(self.head_dim)
        out = _ScaledDotProductAttention.apply(q, k, v, bias=bias, scale=scale)       # (B, H, L, D)
        out = self.out_proj(_merge_heads(out))                                         # (B, L, E)
        if not need_weights:
            return out, None
        weights = _attention_weights(q.data, k.data, bias, scale)                     # (B, H, L, S)
        return out, Tensor(weights.mean(axis=1) if average_attn_weights else weights)
        ### END SOLUTION

# %% [markdown]
# Test 12.9.

# %%
manual_seed(0)
mha = MultiheadAttention(64, 4, batch_first=True)
print(mha)
assert repr(mha) == ("MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=64, "
                     "out_features=64, bias=True)\n)")
assert [(name, p.shape) for name, p in mha.named_parameters()] == [
    ("in_proj_weight", (192, 64)), ("in_proj_bias", (192,)), ("out_proj.weight", (64, 64)), ("out_proj.bias", (64,))]
assert mha.head_dim == 16 and mha.in_proj_weight.dtype == np.float32
bound = np.sqrt(6 / (64 + 192))
assert np.abs(mha.in_proj_weight.data).max() <= bound and mha.in_proj_weight.data.std() > 0.9 * bound / np.sqrt(3)
assert not mha.in_proj_bias.data.any() and not mha.out_proj.bias.data.any()
assert np.abs(mha.out_proj.weight.data).max() <= 1 / 8 and mha.out_proj.weight.data.std() > 0.9 / 8 / np.sqrt(3)
assert MultiheadAttention(8, 2, bias=False).in_proj_bias is None
assert len(list(MultiheadAttention(8, 2, bias=False).parameters())) == 2
try:
    MultiheadAttention(10, 3)
    raise AssertionError("expected ValueError")
except ValueError as error:
    print("as expected:", error)

# %% [markdown]
# Test 12.10: against the formula, head by head in numpy; masks; the three layouts; gradients.

# %%
def numpy_mha(module, query, key, value, bias=None):
    """Multi-head attention in numpy with the module's own weights, one head at a time."""
    E, H = module.embed_dim, module.num_heads
    D = E // H
    w, b = module.in_proj_weight.data, module.in_proj_bias.data
    q, k, v = (x @ w[i * E:(i + 1) * E].T + b[i * E:(i + 1) * E] for i, x in enumerate((query, key, value)))
    heads = [numpy_attention(q[..., h * D:(h + 1) * D], k[..., h * D:(h + 1) * D], v[..., h * D:(h + 1) * D],
                             None if bias is None else bias[:, h] if bias.ndim == 4 else bias) for h in range(H)]
    return np.concatenate(heads, axis=-1) @ module.out_proj.weight.data.T + module.out_proj.bias.data


mha.in_proj_bias.data[...] = rng.standard_normal(192).astype(np.float32) * 0.1
mha.out_proj.bias.data[...] = rng.standard_normal(64).astype(np.float32) * 0.1
x, memory = rng.standard_normal((2, 5, 64)).astype(np.float32), rng.standard_normal((2, 7, 64)).astype(np.float32)
out, weights = mha(x, x, x)
assert out.shape == (2, 5, 64) and weights.shape == (2, 5, 5) and np.allclose(weights.data.sum(axis=-1), 1, atol=1e-5)
assert np.allclose(out.data, numpy_mha(mha, x, x, x), atol=1e-4)
out, weights = mha(x, memory, memory, need_weights=False)                       # cross-attention
assert weights is None and np.allclose(out.data, numpy_mha(mha, x, memory, memory), atol=1e-4)
hidden = np.triu(np.ones((5, 5), dtype=bool), 1)
out, weights = mha(x, x, x, attn_mask=hidden, is_causal=True, average_attn_weights=False)
assert weights.shape == (2, 4, 5, 5) and np.all(weights.data[..., hidden] == 0)
assert np.allclose(out.data, numpy_mha(mha, x, x, x, _attention_bias(None, True, 5, 5, np.float32)), atol=1e-4)
padding = np.array([[False] * 6 + [True], [False] * 7])
out, weights = mha(x, memory, memory, key_padding_mask=padding)
assert np.all(weights.data[0, :, 6] == 0) and weights.data[1, :, 6].min() > 0
seq_first = MultiheadAttention(64, 4)
seq_first.load_state_dict(mha.state_dict())
assert np.allclose(seq_first(x.transpose(1, 0, 2), x.transpose(1, 0, 2), x.transpose(1, 0, 2))[0].data,
                   mha(x, x, x)[0].data.transpose(1, 0, 2), atol=1e-5), "batch_first=False: (T, B, E)"
assert np.allclose(mha(x[1], x[1], x[1])[0].data, mha(x, x, x)[0].data[1], atol=1e-5), "unbatched: (T, E)"
small = MultiheadAttention(8, 2, batch_first=True)
small.in_proj_bias.data[...] = rng.standard_normal(24).astype(np.float32)
x64 = Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
assert gradcheck(lambda x: small(x, x, x, attn_mask=np.triu(np.ones((3, 3), bool), 1), need_weights=False)[0], x64)
small(x64, x64, x64)[0].sum().backward()
assert small.in_proj_weight.grad.shape == (24, 8) and small.out_proj.bias.grad.shape == (8,)

# %% [markdown]
# ## Seeing attention: a tiny model learns to reverse a sequence
#
# What does attention *do*? Train the smallest model that must use it (learner-only: under a second):
# sequences of 8 digits in, the same digits reversed out. Each output position must find one
# particular input position (output 0 needs input 7, output 1 needs input 6, ...), and only attention
# can move information between positions here. The model: a one-hot digit through a `Linear` (an
# embedding), plus a learned vector per position (without it, every position would look the same to
# attention, and "the third from the end" could not be found), one `MultiheadAttention` with 2 heads,
# and a `Linear` back to the 10 digits. Then the picture: the attention weights of one example, per
# head. Expect an anti-diagonal: query t attends to key 7 − t.

# %% tags=["learner-only"]
class Reverser(nn.Module):
    def __init__(self, vocab=10, length=8, width=32, heads=2):
        super().__init__()
        self.embed = nn.Linear(vocab, width, bias=False)
        self.position = nn.Parameter(tt.randn(length, width).numpy() * 0.5)
        self.attention = MultiheadAttention(width, heads, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, digits, need_weights=False):
        x = self.embed(Tensor(np.eye(10, dtype=np.float32)[digits])) + self.position
        mixed, weights = self.attention(x, x, x, need_weights=need_weights, average_attn_weights=False)
        return self.head(mixed + x), weights


manual_seed(0)
model = Reverser()
optimizer, loss_fn = tt.optim.Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss()
start = time.perf_counter()
with threadpool_limits(limits=1):
    for step_index in range(200):
        digits = rng.integers(0, 10, (64, 8))
        logits, _ = model(digits)
        loss = loss_fn(logits.reshape(-1, 10), digits[:, ::-1].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step_index % 50 == 49:
            print(f"step {step_index + 1}: loss {loss.item():.3f}")
digits = rng.integers(0, 10, (256, 8))
logits, weights = model(digits, need_weights=True)
accuracy = (logits.numpy().argmax(axis=-1) == digits[:, ::-1]).mean()
print(f"{time.perf_counter() - start:.1f} s; reversed correctly: {accuracy:.1%} of the digits")

# %% tags=["learner-only"]
example = digits[0]
figure, axes = plt.subplots(1, 2, figsize=(8, 3.8))
for head, axis in enumerate(axes):
    axis.imshow(weights.numpy()[0, head], cmap="viridis", vmin=0, vmax=1)
    axis.set_title(f"head {head}")
    axis.set_xticks(range(8), [str(d) for d in example])
    axis.set_yticks(range(8), [str(d) for d in example[::-1]])
    axis.set_xlabel("key: input digit")
    axis.set_ylabel("query: output position (its target)")
figure.suptitle("attention weights of the reversing model")
figure.tight_layout()
plt.show()

# %% [markdown]
# ## What you built, and what comes next
#
# Attention as PyTorch defines it, with both of its mask conventions, stable for any scores and defined
# (as zeros) for fully masked rows; a fused `Function` whose backward makes three matrix products and
# one temporary; and multi-head attention whose heads are views of one projection, computed by one
# batched product. The next module stacks it: a causal `MultiheadAttention`, a two-layer MLP, layer
# normalisation and residual connections make one transformer block, and a few of them make a GPT.
