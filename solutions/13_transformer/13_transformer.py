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
# # 13 Transformer: a GPT
#
# Everything a GPT needs is now in the package but two small pieces: a normalisation that keeps the
# activations of a deep stack at a sensible scale, and the glue that turns attention and linear layers
# into a **transformer block**. Stack a few blocks between an embedding and a linear head, and you have
# the model behind every large language model, small enough here to train on Shakespeare on a laptop.
#
# ```python
# model = GPT(vocab_size=84, block_size=64, n_layer=4, n_head=4, n_embd=128)
# logits, loss = model(idx, targets)            # idx, targets (B, T) token ids -> logits (B, T, 84)
# text = model.generate(prompt, max_new_tokens=200, temperature=0.8, top_k=10)
# ```
#
# What you build goes into `tinytorch/core/transformer.py`. `LayerNorm` and `layer_norm` are PyTorch's
# (`tt.nn.LayerNorm`, `tt.nn.functional.layer_norm`); PyTorch has no GPT of its own, so the model and
# its parts go to a namespace of their own, `tt.models` (names as in Karpathy's nanoGPT):
#
# | you build | task |
# |---|---|
# | `_LayerNorm.forward`: normalise over the last axes, scale and shift | 13.1 |
# | `_LayerNorm.backward`: the fused backward | 13.2 |
# | `nn.functional.layer_norm` and `nn.LayerNorm` | 13.3 |
# | `MLP`: Linear, GELU, Linear | 13.4 |
# | `CausalSelfAttention`: one projection, heads as views, causal attention | 13.5 |
# | `TransformerBlock`: pre-norm with residual connections | 13.6 |
# | `KVCache.attend`: attention over cached keys and values | 13.7 |
# | `_sample`: temperature, top-k, one draw per sequence | 13.8 |
# | `GPT`: embeddings, blocks, head, weight tying, initialisation | 13.9 |
# | `GPT.forward`: logits, and the loss | 13.10 |
# | `GPT.generate`: with and without the cache | 13.11 |
#
# **Before you start.** This notebook runs on *your* 01-06, 11 and 12: the package imports `Function`
# and `no_grad` from 02, `gelu` from 03, `Module`, `Linear` and `ModuleList` from 04, `cross_entropy`
# from 05, `Embedding` from 11 and `scaled_dot_product_attention` from 12; the training example uses
# 06's `AdamW`. <!-- tito -->Finish the earlier modules (`tito test` at full marks), export them, and
# restart this notebook's kernel whenever you export again. Grade this module with `tito test 13`, which
# exports every module up to 13 together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.transformer
import time

import numpy as np

import tinytorch as tt
from tinytorch.core.tensor import manual_seed
from tinytorch.core.autograd import gradcheck

rng = np.random.default_rng(0)

# %% [markdown]
# The package file starts with its imports. `_merge_heads` is 12's: `(B, H, T, D)` back to `(B, T, H·D)`.

# %%
#| export
import math

import numpy as np

from tinytorch.core.tensor import Tensor, as_tensor, default_generator
from tinytorch.core.autograd import Function, no_grad
from tinytorch.core.activations import gelu
from tinytorch.core.layers import Module, Parameter, Linear, ModuleList, Dropout
from tinytorch.core.losses import cross_entropy
from tinytorch.core.embeddings import Embedding
from tinytorch.core.attention import scaled_dot_product_attention, _merge_heads

__all__ = ["layer_norm", "LayerNorm", "MLP", "CausalSelfAttention", "TransformerBlock", "KVCache",
           "GPT"]  # tt.nn.functional, tt.nn, tt.models

# %% [markdown]
# ## Layer normalisation
#
# Send a vector through twenty layers and its scale drifts: a little growth per layer compounds, and the
# activations (and gradients) of the last layers end up far too large or too small for the learning
# rate. **Layer normalisation** (Ba et al., 2016) resets the scale at every layer, position by position:
# each token's vector x of C features is shifted to mean 0 and scaled to variance 1, then given a
# learned scale w and shift b per feature (so the layer can still express any scale it needs):
#
#     μ = mean(x)        σ² = mean((x − μ)²)        (over the C features of one position; σ² biased)
#     x̂ = (x − μ) / √(σ² + ε)                         ε = 1e-5 keeps a constant vector finite
#     y = x̂ ⊙ w + b
#
# Unlike batch normalisation it needs no statistics of the batch: every position is normalised on its
# own, the same in training and in generation, one token at a time.
#
# PyTorch's `normalized_shape` says over which **last** axes: `LayerNorm(128)` normalises the last axis,
# `LayerNorm((4, 5))` the last two together (20 numbers per mean). `w` and `b` have that shape.
#
# `_LayerNorm.forward(ctx, x, weight=None, bias=None, axes=1, eps=1e-5)` (task 13.1): x is an array
# `(..., *normalized_shape)` with `axes = len(normalized_shape)`; weight and bias (arrays of
# `normalized_shape`) are optional operands: the functional form calls `apply(x)`, `apply(x, w)` or
# `apply(x, w, b)` (an operand of `apply` is never `None`), so the arguments arrive positionally.
#
# Work on a 2-D view, one row per position: `rows = x.reshape(-1, n)`, with n the number of normalised
# elements (`math.prod` of the last `axes` sizes). Every statistic is then a sum along a row, and the
# formulas above become one line each:
#
#     μ = Σ x / n                     per row, (R, 1)
#     σ² = Σ (x − μ)² / n             per row, (R, 1)
#     rstd = 1 / √(σ² + ε)            per row, (R, 1)
#     x̂ = (x − μ) · rstd              (R, n)
#     y = x̂ ⊙ w + b                   w, b flattened to (n,); no weight: w = 1, no bias: b = 0
#
# Take the row sums with the two given helpers below: `_row_sum(a)` is Σ a along each row and
# `_row_dot(a, b)` is Σ a ⊙ b along each row, both as `(R, 1)` columns that broadcast against the rows.
# Keep x's dtype: for float32 input every intermediate stays float32 (mix in only Python numbers and
# arrays of x's dtype). Save x̂, rstd and the flattened weight (or the 1 standing in for it) for the
# backward, remember x's shape and `axes` on `ctx`, and return y in x's shape.
#
# (Why helpers for a sum: numpy's `a.sum(axis=-1)` over a short last axis, 128 numbers in the GPT, takes
# a slow path, one row at a time; `np.einsum`, which the helpers use, takes about a third of the time,
# and `_row_dot` also never builds the product a ⊙ b. Their docstrings give the measurements.)

# %%
#| export
def _row_sum(a: np.ndarray) -> np.ndarray:
    """Σ_j a[r, j] for a (R, n), as an (R, 1) column: a.sum(axis=1, keepdims=True) by np.einsum, which on a
    GPT's (2048, 128) float32 activations took 18 µs against 62 µs (medians, one thread: numpy reduces a short
    last axis one row at a time)."""
    return np.einsum("rn->r", a)[:, None]


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σ_j a[r, j] b[r, j] for a, b (R, n), as an (R, 1) column: (a * b).sum(axis=1, keepdims=True) by
    np.einsum, without the (R, n) product; on (2048, 128) float32 it took 33 µs against 94 µs."""
    return np.einsum("rn,rn->r", a, b)[:, None]

# %%
#| export
class _LayerNorm(Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last `axes` axes of x."""

    @staticmethod
    def forward(ctx, x, weight=None, bias=None, axes=1, eps=1e-5):
        ### BEGIN SOLUTION 13.1 _LayerNorm.forward
        n = math.prod(x.shape[x.ndim - axes:])                      # numbers per position
        rows = x.reshape(-1, n)                                     # (R, n): one row per position
        mean = _row_sum(rows) / n                                   # μ, (R, 1)
        centred = rows - mean                                       # x − μ, (R, n)
        var = _row_dot(centred, centred) / n                        # σ², (R, 1)
        rstd = 1 / np.sqrt(var + eps)                               # 1 / √(σ² + ε), (R, 1)
        xhat = centred * rstd                                       # x̂, (R, n)
        weight = 1 if weight is None else weight.reshape(-1)        # (n,)
        bias = 0 if bias is None else bias.reshape(-1)              # (n,)
        ctx.save_for_backward(xhat, rstd, weight)
        ctx.shape, ctx.axes = x.shape, axes
        return (xhat * weight + bias).reshape(x.shape)              # y = x̂ ⊙ w + b
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 13.2 _LayerNorm.backward
        xhat, rstd, weight = ctx.saved_tensors
        n = xhat.shape[1]
        needs = (*ctx.needs_input_grad, False, False)               # x, weight, bias: False for one not given
        g = grad_output.reshape(xhat.shape)                         # (R, n), like x̂
        normalized_shape = ctx.shape[len(ctx.shape) - ctx.axes:]
        grad_x = grad_weight = grad_bias = None
        if needs[0]:
            g_hat = g * weight                                      # ĝ = g ⊙ w, the gradient reaching x̂
            grad_x = (g_hat - _row_sum(g_hat) / n - xhat * (_row_dot(g_hat, xhat) / n)) * rstd
            grad_x = grad_x.reshape(ctx.shape)
        if needs[1]:
            grad_weight = (g * xhat).sum(axis=0).reshape(normalized_shape)    # Σ over the positions
        if needs[2]:
            grad_bias = g.sum(axis=0).reshape(normalized_shape)
        return (grad_x, grad_weight, grad_bias)[:len(ctx.needs_input_grad)]   # one per operand of apply
        ### END SOLUTION

# %% [markdown]
# Test 13.1: against the formula, for one and for two normalised axes.

# %%
def numpy_layer_norm(x, w=None, b=None, axes=1, eps=1e-5):
    """The formula in numpy, for the tests of this notebook."""
    dims = tuple(range(x.ndim - axes, x.ndim))
    mu, var = x.mean(axis=dims, keepdims=True), x.var(axis=dims, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


x = rng.standard_normal((2, 3, 8)).astype(np.float32) * 3 + 1
w, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
y = _LayerNorm.apply(Tensor(x), Tensor(w), Tensor(b))
assert y.dtype == np.float32 and np.allclose(y.data, numpy_layer_norm(x, w, b), atol=1e-5)
plain = _LayerNorm.apply(Tensor(x)).data
assert np.allclose(plain.mean(axis=-1), 0, atol=1e-5) and np.allclose(plain.std(axis=-1), 1, atol=1e-3)
w2 = rng.standard_normal((3, 8)).astype(np.float32)
assert np.allclose(_LayerNorm.apply(Tensor(x), Tensor(w2), axes=2).data, numpy_layer_norm(x, w2, axes=2), atol=1e-5)
assert np.all(_LayerNorm.apply(Tensor(np.ones((2, 4), np.float32))).data == 0), "a constant vector: zeros, not NaN"

# %% [markdown]
# ## The fused backward
#
# Composed from tensor ops (mean, subtract, square, mean, add, sqrt, divide, multiply, add), layer norm
# records nine nodes and its backward walks nine full-size arrays. By hand it is short. With g the
# upstream gradient, n the number of normalised elements and all means over the normalised axes:
#
#     ḡ_b = Σ g                  ḡ_w = Σ g ⊙ x̂               (sums over the leading axes: one per feature)
#     ĝ = g ⊙ w                   (the gradient reaching x̂)
#     ḡ_x = (ĝ − mean(ĝ) − x̂ ⊙ mean(ĝ ⊙ x̂)) / √(σ² + ε)
#
# The last line is the whole chain rule through μ and σ: x̂ does not change when x is shifted (so ḡ_x
# has mean 0: the `− mean(ĝ)`) or scaled (so ḡ_x is orthogonal to x̂: the `− x̂ mean(ĝ x̂)`). ĝ is
# `g * w` (with the 1 forward saved when there is no weight); never change g in place, it belongs to
# the caller. Work on the `(R, n)` rows again (`grad_output.reshape(-1, n)`): the means along a row
# with `_row_sum` and `_row_dot` as in forward, the sums over the positions (down the rows, one number
# per feature) with `.sum(axis=0)`, and give each gradient its operand's shape.
#
# Return one gradient per operand that `apply` got: `ctx.needs_input_grad` holds one flag per operand
# (1, 2 or 3 of them), and a gradient is `None` where its flag does not ask for it (task 13.2).

# %% [markdown]
# Test 13.2: every gradient against central differences (float64), and only the gradients asked for.

# %%
x64 = Tensor(rng.standard_normal((2, 3, 4)) * 2, requires_grad=True)
w64, b64 = (Tensor(rng.standard_normal(4), requires_grad=True) for _ in range(2))
assert gradcheck(lambda x, w, b: _LayerNorm.apply(x, w, b), x64, w64, b64)
assert gradcheck(lambda x: _LayerNorm.apply(x), x64)
assert gradcheck(lambda x, w: _LayerNorm.apply(x, w, axes=2), x64, Tensor(rng.standard_normal((3, 4)), requires_grad=True))
data = Tensor(rng.standard_normal((2, 4)))
_LayerNorm.apply(data, w64, b64).sum().backward()
assert data.grad is None and w64.grad.shape == (4,)

# %% [markdown]
# ## `layer_norm` and `LayerNorm`
#
# Task 13.3, PyTorch's two forms:
#
# - `nn.functional.layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5)`: `input` becomes
#   a tensor; `normalized_shape` an int or a tuple (make it a tuple); the input's last axes must be
#   exactly `normalized_shape`, else a `ValueError` naming both shapes; then `_LayerNorm.apply` with the
#   operands that are not `None` (a bias without a weight: pass a weight of ones) and
#   `axes=len(normalized_shape)`, `eps=eps`.
# - `nn.LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)`: stores
#   `normalized_shape` (a tuple), `eps` and `elementwise_affine`; its `weight` (ones) and `bias` (zeros)
#   are float32 Parameters of `normalized_shape` (PyTorch's initialisation: at first the layer only
#   normalises). Without `elementwise_affine` both are registered as `None`; with `bias=False`, only
#   the bias. Its forward is `layer_norm` with its own parameters. `extra_repr` is given.

# %%
#| export nn.functional
def layer_norm(input, normalized_shape, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalise input over its last axes, which must be normalized_shape, then scale by weight and add bias."""
    ### BEGIN SOLUTION 13.3 layer_norm and LayerNorm
    x = as_tensor(input)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) == 0 or x.shape[x.ndim - len(shape):] != shape or x.ndim < len(shape):
        raise ValueError(f"layer_norm: expected input with shape (*, {', '.join(map(str, shape))}) "
                         f"(normalized_shape {shape}), got shape {x.shape}")
    if weight is None and bias is not None:
        weight = Tensor(np.ones(shape, dtype=x.dtype))
    operands = [operand for operand in (weight, bias) if operand is not None]
    return _LayerNorm.apply(x, *operands, axes=len(shape), eps=eps)
    ### END SOLUTION

# %%
#| export nn
class LayerNorm(Module):
    """Layer normalisation over the last axes (normalized_shape), with a learned weight (ones) and bias (zeros)."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True):
        super().__init__()
        ### BEGIN SOLUTION 13.3 layer_norm and LayerNorm
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps, self.elementwise_affine = shape, eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(shape, dtype=np.float32))
            if bias:
                self.bias = Parameter(np.zeros(shape, dtype=np.float32))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 13.3 layer_norm and LayerNorm
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)
        ### END SOLUTION

# %% [markdown]
# Test 13.3.

# %%
norm = LayerNorm(8)
print(norm)
assert repr(norm) == "LayerNorm((8,), eps=1e-05, elementwise_affine=True)"
assert norm.weight.data.tolist() == [1.0] * 8 and norm.bias.data.tolist() == [0.0] * 8
norm.weight.data[...], norm.bias.data[...] = w, b
assert np.allclose(norm(x).data, numpy_layer_norm(x, w, b), atol=1e-5)
assert np.allclose(layer_norm(x, (3, 8)).data, numpy_layer_norm(x, axes=2), atol=1e-5)
assert LayerNorm((3, 8)).weight.shape == (3, 8) and LayerNorm(8, elementwise_affine=False).weight is None
assert LayerNorm(8, bias=False).bias is None and len(list(LayerNorm(8, bias=False).parameters())) == 1
try:
    norm(Tensor(np.ones((2, 5), np.float32)))
    raise AssertionError("expected ValueError")
except ValueError as error:
    print("as expected:", error)

# %% [markdown]
# ## The feed-forward block
#
# Attention moves information *between* positions; the **MLP** then works on each position on its own:
# a `Linear(n_embd, 4·n_embd)` (`c_fc`), GELU (03, exact: `approximate='none'`, as PyTorch's `nn.GELU()`),
# and a `Linear(4·n_embd, n_embd)` back (`c_proj`), then dropout (task 13.4). The four-fold width is
# where most of a transformer's parameters are: 8·n² of the block's 12·n².
#
# `MLP(n_embd, dropout=0.0, bias=True)`: create `c_fc`, `c_proj` (both with `bias`) and `dropout =
# Dropout(dropout)` in that order. (A Dropout of 0 returns its input and draws nothing, 04.10, so the
# forward calls it whatever its `p`.)

# %%
#| export models
class MLP(Module):
    """The transformer's position-wise feed-forward block: Linear(n, 4n), GELU, Linear(4n, n), dropout."""

    def __init__(self, n_embd: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        ### BEGIN SOLUTION 13.4 MLP
        self.c_fc = Linear(n_embd, 4 * n_embd, bias=bias)
        self.c_proj = Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = Dropout(dropout)
        ### END SOLUTION

    def forward(self, x) -> Tensor:
        ### BEGIN SOLUTION 13.4 MLP
        x = self.c_proj(gelu(self.c_fc(x)))
        return self.dropout(x)
        ### END SOLUTION

# %% [markdown]
# Test 13.4.

# %%
def numpy_gelu(x):
    from math import erf
    return x * 0.5 * (1 + np.vectorize(erf)(x / np.sqrt(2)))


mlp = MLP(8)
assert [(name, p.shape) for name, p in mlp.named_parameters()] == [
    ("c_fc.weight", (32, 8)), ("c_fc.bias", (32,)), ("c_proj.weight", (8, 32)), ("c_proj.bias", (8,))]
hidden = numpy_gelu(x @ mlp.c_fc.weight.data.T + mlp.c_fc.bias.data)
assert np.allclose(mlp(x).data, hidden @ mlp.c_proj.weight.data.T + mlp.c_proj.bias.data, atol=1e-5)

# %% [markdown]
# ## Causal self-attention, lean
#
# 12's `nn.MultiheadAttention` is general: separate query, key and value inputs, two mask conventions,
# the weights returned on request. A GPT needs none of that: it attends from a sequence to itself, always
# causally. `CausalSelfAttention(n_embd, n_head, dropout=0.0, bias=True)` is the lean version nanoGPT
# uses (and faster here: one projection node instead of three):
#
# - `c_attn = Linear(n_embd, 3·n_embd)`: q, k and v of every position in one product, side by side in
#   the last axis; `c_proj = Linear(n_embd, n_embd)`, the output projection; `resid_dropout =
#   Dropout(dropout)`; and `n_head`, `n_embd` (an `n_head` below 1, or one that does not divide
#   `n_embd`, is a `ValueError` naming both);
# - `_qkv(x)`: `(B, T, C)` → q, k, v, each `(B, H, T, D)` with D = C / H, all views of the projection:
#   reshape `(B, T, 3C)` to `(B, T, 3, H, D)`, permute to `(3, B, H, T, D)` (a view) and index `[0]`,
#   `[1]`, `[2]` (views again; autograd adds each gradient into its third of the projection's);
# - the forward (given) attends with 12's fused `scaled_dot_product_attention(q, k, v, is_causal=True)`,
#   merges the heads (12's `_merge_heads`) and projects. With a `cache` (task 13.7) it attends over the
#   cached keys and values instead.
#
# Task 13.5 is `__init__` and `_qkv`.

# %%
#| export models
class CausalSelfAttention(Module):
    """Multi-head causal self-attention: c_attn Linear(C, 3C) makes q, k, v; c_proj Linear(C, C) projects back."""

    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        ### BEGIN SOLUTION 13.5 CausalSelfAttention
        if n_head <= 0 or n_embd % n_head != 0:
            raise ValueError(f"CausalSelfAttention: n_embd ({n_embd}) must be divisible by n_head ({n_head})")
        self.n_embd, self.n_head = n_embd, n_head
        self.c_attn = Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = Dropout(dropout)
        ### END SOLUTION

    def _qkv(self, x) -> tuple:
        """x (B, T, C) -> q, k, v, each (B, H, T, C // H), views of one projection."""
        ### BEGIN SOLUTION 13.5 CausalSelfAttention
        batch, length, channels = x.shape
        heads = self.c_attn(x).reshape(batch, length, 3, self.n_head, channels // self.n_head).permute(2, 0, 3, 1, 4)
        return heads[0], heads[1], heads[2]
        ### END SOLUTION

    def forward(self, x, cache=None) -> Tensor:
        """x (B, T, C) -> (B, T, C); with a KVCache, x holds the tokens that follow the cached ones."""
        q, k, v = self._qkv(as_tensor(x))
        if cache is None:
            out = scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            out = cache.attend(q, k, v)
        out = self.c_proj(_merge_heads(out))
        return self.resid_dropout(out)

# %% [markdown]
# Test 13.5: against multi-head attention in numpy, and causality.

# %%
def numpy_softmax(scores):
    scores = scores - scores.max(axis=-1, keepdims=True)
    return np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)


def numpy_causal_attention(attention, x):
    """Causal multi-head self-attention in numpy with the module's weights, one head at a time."""
    C, H = attention.n_embd, attention.n_head
    D, T = C // H, x.shape[-2]
    qkv = x @ attention.c_attn.weight.data.T + attention.c_attn.bias.data
    hidden = np.triu(np.ones((T, T), bool), 1)
    heads = []
    for h in range(H):
        q, k, v = (qkv[..., i * C + h * D:i * C + (h + 1) * D] for i in range(3))
        scores = np.where(hidden, -np.inf, q @ np.swapaxes(k, -1, -2) / np.sqrt(D))
        heads.append(numpy_softmax(scores) @ v)
    return np.concatenate(heads, axis=-1) @ attention.c_proj.weight.data.T + attention.c_proj.bias.data


attention = CausalSelfAttention(8, 2)
q, k, v = attention._qkv(Tensor(x))
assert q.shape == k.shape == v.shape == (2, 2, 3, 4) and q.data.base is not None, "q, k, v: views of one projection"
out = attention(x)
assert out.shape == (2, 3, 8) and np.allclose(out.data, numpy_causal_attention(attention, x), atol=1e-5)
changed = x.copy()
changed[:, 2] = rng.standard_normal((2, 8))
assert np.allclose(attention(changed).data[:, :2], out.data[:, :2]), "position 2 must not change positions 0, 1"

# %% [markdown]
# ## The transformer block
#
# A block is two sub-layers, each wrapped the same way:
#
#     x = x + attn(ln_1(x))          every position reads the earlier ones
#     x = x + mlp(ln_2(x))           every position thinks on its own
#
# The **residual connections** (`x + ...`) are what make a deep stack trainable: the gradient reaches
# the first block through the additions untouched, whatever the sub-layers do, and each sub-layer only
# has to learn a *correction* to its input. The normalisation sits *before* each sub-layer (**pre-norm**,
# as GPT-2 and every model since; the original transformer normalised after the addition, which needs a
# careful warm-up of the learning rate to train at all), so the residual stream itself is never
# normalised: the final `ln_f` of the GPT does that once, before the head.
#
# The picture (learner-only): the stream runs straight through the block, and each sub-layer reads a
# normalised copy of it and adds its result back.

# %% tags=["learner-only"]
import matplotlib.pyplot as plt

figure, axis = plt.subplots(figsize=(10, 3))
axis.annotate("", xy=(10.6, 0), xytext=(-0.2, 0), arrowprops={"arrowstyle": "-|>", "lw": 3, "color": "C0"})
axis.text(-0.2, -0.45, "x (B, T, C): embeddings, or the previous block", va="top", fontsize=9)
axis.text(10.6, -0.45, "to the next block (after the last: ln_f, head)", ha="right", va="top", fontsize=9)
axis.text(5.2, -0.2, "the residual stream: added to, never normalised", ha="center", va="top", color="C0")
for left, norm, sublayer, says in [(0.5, "ln_1", "attn", "x = x + attn(ln_1(x))\nreads the earlier positions"),
                                 (5.5, "ln_2", "mlp", "x = x + mlp(ln_2(x))\neach position on its own")]:
    right = left + 4                                                       # where it adds back
    axis.plot([left, left, right, right], [0, 1.2, 1.2, 0.25], color="gray", zorder=1)   # the branch
    axis.annotate("", xy=(right, 0.16), xytext=(right, 0.6), arrowprops={"arrowstyle": "-|>", "color": "gray"})
    for centre, label, color in [(left + 1.1, norm, "#fde9c9"), (left + 2.7, sublayer, "#d7e8f7")]:
        axis.text(centre, 1.2, label, ha="center", va="center", family="monospace", fontsize=12,
                  bbox={"boxstyle": "round,pad=0.5", "facecolor": color, "edgecolor": "black"})
    axis.text(right, 0, "+", ha="center", va="center", fontsize=14, fontweight="bold",
              bbox={"boxstyle": "circle,pad=0.15", "facecolor": "white", "edgecolor": "C0", "lw": 2})
    axis.text(left + 2, 1.75, says, ha="center", va="bottom", fontsize=9)
axis.set(xlim=(-0.3, 10.7), ylim=(-0.9, 2.5), title="one pre-norm transformer block")
axis.axis("off")
figure.tight_layout()
plt.show()

# %% [markdown]
# `TransformerBlock(n_embd, n_head, dropout=0.0, bias=True)` (task 13.6): `ln_1 = LayerNorm(n_embd)`,
# `attn = CausalSelfAttention(...)`, `ln_2 = LayerNorm(n_embd)`, `mlp = MLP(...)`, in that order (it
# is the order of the parameters' names); `forward(x, cache=None)` as above, passing `cache` to the
# attention.

# %%
#| export models
class TransformerBlock(Module):
    """Pre-norm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, n_embd: int, n_head: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        ### BEGIN SOLUTION 13.6 TransformerBlock
        self.ln_1 = LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout, bias)
        ### END SOLUTION

    def forward(self, x, cache=None) -> Tensor:
        ### BEGIN SOLUTION 13.6 TransformerBlock
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))
        ### END SOLUTION

# %% [markdown]
# Test 13.6: the block against numpy, causality, and the gradient of the input against central differences.

# %%
def numpy_block(block, x):
    h = x + numpy_causal_attention(block.attn, numpy_layer_norm(x, block.ln_1.weight.data, block.ln_1.bias.data))
    inner = numpy_layer_norm(h, block.ln_2.weight.data, block.ln_2.bias.data)
    mlp = block.mlp
    return h + numpy_gelu(inner @ mlp.c_fc.weight.data.T + mlp.c_fc.bias.data) @ mlp.c_proj.weight.data.T + \
        mlp.c_proj.bias.data


block = TransformerBlock(8, 2)
for p in block.parameters():
    p.data[...] += rng.standard_normal(p.shape).astype(np.float32) * 0.1
assert np.allclose(block(x).data, numpy_block(block, x), atol=1e-4)
assert np.allclose(block(changed).data[:, :2], block(x).data[:, :2], atol=1e-6), "causal"
assert gradcheck(block, Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True))

# %% [markdown]
# ## Generating text, and the key-value cache
#
# Two pieces for the GPT's generation come first, as they need only the attention: the cache, and the
# choice of the next token. A language model writes one token at a time: run the model on the text so
# far, take the logits of the **last** position, draw the next token from them, append it, repeat. Run naively, step n
# recomputes all n positions, although the first n − 1 have not changed at all: position t's keys and
# values depend only on tokens 0..t (the attention is causal), so they are the same at every later
# step. Generating N tokens costs O(N²) positions of work where O(N) would do.
#
# The **key-value cache** keeps, for every layer, the keys and values of the positions already seen.
# The prompt is run once (filling the cache); then each step feeds only the one new token: its query
# attends to all the cached keys plus its own, and its key and value are appended to the cache. Only
# the attention needs the past; every other layer (LayerNorm, MLP, the head) works position by position.
#
# `KVCache(batch, n_head, max_length, head_dim, dtype=np.float32)` (given `__init__`) holds two
# preallocated arrays `keys` and `values` of shape `(batch, n_head, max_length, head_dim)` and `length`,
# the number of positions filled. Appending is then a copy into a slice, never a reallocation.
# `attend(q, k, v)` (task 13.7) gets the new positions' q, k, v `(B, H, T, D)` (T new tokens: the prompt,
# or 1) and:
#
# 1. raises a `ValueError` (naming both numbers) if `length + T` exceeds `max_length`;
# 2. writes k and v into `keys[:, :, length:length + T]` and `values[...]` and advances `length`;
# 3. attends q to the filled part, `Tensor(keys[:, :, :length])` (a view) and the values, with 12's
#    `scaled_dot_product_attention`, under a mask that lets new token i (at absolute position
#    `length_before + i`) read every key up to its own position: the boolean `np.tril(np.ones((T,
#    length), bool), k=length_before)`. A single new token may read everything, so for T = 1 pass no
#    mask at all (one pass over the scores saved per layer and step).
#
# The cache is for generation, under `no_grad`: gradients do not flow into cached keys.

# %%
#| export models
class KVCache:
    """The keys and values of one attention layer for the positions seen so far, in preallocated arrays."""

    def __init__(self, batch: int, n_head: int, max_length: int, head_dim: int, dtype=np.float32):
        self.keys = np.zeros((batch, n_head, max_length, head_dim), dtype=dtype)
        self.values = np.zeros((batch, n_head, max_length, head_dim), dtype=dtype)
        self.max_length, self.length = max_length, 0

    def __repr__(self) -> str:
        return f"KVCache(length={self.length}, max_length={self.max_length})"

    def attend(self, q, k, v) -> Tensor:
        """Append k, v (B, H, T, D) to the cache; q (B, H, T, D) attends to every cached position up to its own."""
        ### BEGIN SOLUTION 13.7 KVCache.attend
        start, new = self.length, k.shape[-2]
        end = start + new
        if end > self.max_length:
            raise ValueError(f"KVCache: {start} cached positions and {new} new ones exceed max_length "
                             f"{self.max_length}")
        self.keys[:, :, start:end] = np.asarray(k)
        self.values[:, :, start:end] = np.asarray(v)
        self.length = end
        mask = None if new == 1 else np.tril(np.ones((new, end), dtype=bool), k=start)
        return scaled_dot_product_attention(q, Tensor(self.keys[:, :, :end]), Tensor(self.values[:, :, :end]),
                                            attn_mask=mask)
        ### END SOLUTION

# %% [markdown]
# Test 13.7: a sequence fed through the cache in pieces (3 tokens, then 1, then 2) gives what the
# whole sequence gives at once (the GPT's tests below do the same through the whole model).

# %%
cache = KVCache(2, 2, 8, 4)
x6 = rng.standard_normal((2, 6, 8)).astype(np.float32)
pieces = [attention(x6[:, a:b], cache) for a, b in [(0, 3), (3, 4), (4, 6)]]
assert cache.length == 6 and np.allclose(np.concatenate([p.data for p in pieces], axis=1), attention(x6).data,
                                         atol=1e-5)

# %% [markdown]
# ## Choosing the next token
#
# The logits of the last position give, by their softmax, a probability for every token. Three ways to
# shape that choice:
#
# - **Temperature** T: sample from softmax(logits / T). T < 1 sharpens the distribution (safer, more
#   repetitive text), T > 1 flattens it (more surprising, more mistakes). `temperature=0` means
#   **greedy**: take the `argmax` and draw nothing (the limit of T → 0; dividing by 0 is not an option).
#   A negative temperature is a `ValueError` that names `temperature`.
# - **Top-k**: keep the k largest logits, set the others to −∞ (probability 0), so the long tail of
#   unlikely tokens, each rare but many together, cannot be drawn. Keep every logit ≥ the k-th largest
#   (ties may keep a few more, as nanoGPT and PyTorch's `topk` recipes do); find that value with
#   `np.partition`, without sorting the whole row; k larger than the vocabulary keeps everything; k < 1
#   is a `ValueError` that names `top_k` (check it before numpy meets it).
# - **The draw**, reproducible by construction: exactly **one** uniform number per sequence,
#   `u = generator.random((B, 1))`, and the token is the first i whose cumulative probability exceeds
#   u · total (`np.cumsum` along the row; the count of entries ≤ u · total is that index; clip it to
#   V − 1 against rounding). A token of probability 0 is never drawn.
#
# `_sample(logits, temperature, top_k, generator)` (task 13.8): logits `(B, V)` (an array) → `(B,)`
# int64, computed in float64 (the softmax of a few dozen logits costs nothing, and float64 keeps the
# cumulative sum exact enough). Why so precise about the draw? Because the cached and the uncached
# generation must give the *same* tokens for the same seed: both consume the generator identically.

# %%
#| export
def _sample(logits, temperature: float, top_k, generator) -> np.ndarray:
    """One token id per row of logits (B, V): greedy at temperature 0, else one uniform draw per row from
    softmax(logits / temperature) restricted to the top_k largest logits."""
    ### BEGIN SOLUTION 13.8 _sample
    logits = np.asarray(logits, dtype=np.float64)
    if temperature < 0:
        raise ValueError(f"generate: temperature must be >= 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"generate: top_k must be a positive integer or None, got {top_k}")
    if temperature == 0:
        return logits.argmax(axis=-1)
    logits = logits / temperature
    vocab = logits.shape[-1]
    if top_k is not None and top_k < vocab:
        kth = np.partition(logits, vocab - top_k, axis=-1)[:, vocab - top_k:vocab - top_k + 1]
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    cumulative = np.cumsum(probs, axis=-1)
    u = generator.random((len(logits), 1)) * cumulative[:, -1:]
    return np.minimum((cumulative <= u).sum(axis=-1), vocab - 1)
    ### END SOLUTION

# %% [markdown]
# Test 13.8.

# %%
scores = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]]))
assert _sample(scores, 0, None, rng).tolist() == [3, 0]
draws = np.stack([_sample(scores, 1.0, None, np.random.default_rng(seed)) for seed in range(4000)])
print("frequencies of row 0:", np.bincount(draws[:, 0], minlength=4) / 4000)
assert np.allclose(np.bincount(draws[:, 0], minlength=4) / 4000, [0.1, 0.2, 0.3, 0.4], atol=0.03)
assert set(np.concatenate([_sample(scores[:1], 1.0, 2, rng) for _ in range(200)])) == {2, 3}, "top_k=2: 0.3, 0.4"
assert _sample(scores, 1.0, None, np.random.default_rng(7)).tolist() == \
    _sample(scores, 1.0, None, np.random.default_rng(7)).tolist()

# %% [markdown]
# ## The GPT
#
# `GPT(vocab_size, block_size, n_layer, n_head, n_embd, dropout=0.0, bias=True, tie_weights=False)`
# (nanoGPT's configuration names): token ids in, one score per vocabulary entry out, for every position.
#
# | name | what |
# |---|---|
# | `wte = Embedding(vocab_size, n_embd)` | the token embedding (11) |
# | `wpe = Embedding(block_size, n_embd)` | a learned vector per position 0..block_size − 1 |
# | `drop = Dropout(dropout)` | on the sum of the two |
# | `h = ModuleList(n_layer × TransformerBlock)` | the stack |
# | `ln_f = LayerNorm(n_embd)` | the final normalisation |
# | `lm_head = Linear(n_embd, vocab_size, bias=False)` | back to the vocabulary |
#
# Store `vocab_size`, `block_size` and `n_layer` too. **Weight tying** (Press and Wolf, 2017): with
# `tie_weights=True` the head *is* the token embedding (`lm_head.weight = wte.weight`: the same
# Parameter, registered twice, trained once, counted once by `parameters()`). Both are `(vocab_size,
# n_embd)` tables that say how a token relates to the model's features, one going in and one going out;
# sharing saves parameters and often helps small models.
#
# **Initialisation** (GPT-2's, as nanoGPT does it; task 13.9 too), after creating the modules, drawn
# from `default_generator` in the order of `named_parameters()`: every `Linear`'s weight and both
# embeddings' weights from N(0, 0.02²), every `Linear`'s bias zero (LayerNorm keeps its ones and zeros),
# and then every weight whose name ends in `c_proj.weight` (the two projections that write into the
# residual stream) drawn again from N(0, (0.02 / √(2·n_layer))²): each block adds two of them to the
# stream, so without the scaling the stream's variance would grow with the depth. Each draw is
# `default_generator.normal(0.0, std, size=p.shape)`, one parameter after the other in that order (the
# grader replays them), and the `c_proj` weights are drawn anew, not their first draw scaled.
#
# The class holds three tasks: `__init__` (13.9), `forward` (13.10, below the class) and `generate`
# (13.11, after the tests of the forward), which puts together the cache and the sampling above.

# %%
#| export models
class GPT(Module):
    """A decoder-only transformer language model: token and position embeddings, n_layer blocks, ln_f, lm_head."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int,
                 dropout: float = 0.0, bias: bool = True, tie_weights: bool = False):
        super().__init__()
        ### BEGIN SOLUTION 13.9 GPT
        self.vocab_size, self.block_size, self.n_layer = vocab_size, block_size, n_layer
        self.wte = Embedding(vocab_size, n_embd)
        self.wpe = Embedding(block_size, n_embd)
        self.drop = Dropout(dropout)
        self.h = ModuleList([TransformerBlock(n_embd, n_head, dropout, bias) for _ in range(n_layer)])
        self.ln_f = LayerNorm(n_embd)
        self.lm_head = Linear(n_embd, vocab_size, bias=False)
        if tie_weights:
            self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.ndim == 2:                                 # the Linear and Embedding weights
                p.data[...] = default_generator.normal(0.0, 0.02, size=p.shape)
            elif name.endswith("bias"):                     # Linear biases (LayerNorm's are zeros already)
                p.data[...] = 0.0
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                p.data[...] = default_generator.normal(0.0, 0.02 / math.sqrt(2 * n_layer), size=p.shape)
        ### END SOLUTION

    def forward(self, idx, targets=None, caches=None):
        """idx (B, T) token ids -> logits (B, T, vocab_size); with targets (B, T), (logits, mean cross-entropy).
        With caches (one KVCache per block), idx holds the tokens that follow the cached ones."""
        ### BEGIN SOLUTION 13.10 GPT.forward
        idx = np.asarray(idx)
        start = 0 if caches is None else caches[0].length
        length = idx.shape[-1]
        if idx.ndim != 2 or start + length > self.block_size:
            raise ValueError(f"GPT: expected idx of shape (B, T) with T at most block_size ({self.block_size}) "
                             f"after {start} cached tokens, got shape {idx.shape}")
        x = self.wte(idx) + self.wpe(np.arange(start, start + length))
        x = self.drop(x)
        for index, block in enumerate(self.h):
            x = block(x, None if caches is None else caches[index])
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        loss = cross_entropy(logits.reshape(-1, self.vocab_size), np.asarray(targets).reshape(-1))
        return logits, loss
        ### END SOLUTION

    def make_caches(self, batch: int) -> list:
        """One empty KVCache per block, for `batch` sequences of up to block_size tokens (see task 13.7)."""
        return [KVCache(batch, block.attn.n_head, self.block_size, block.attn.n_embd // block.attn.n_head)
                for block in self.h]

    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, top_k=None, use_cache: bool = True,
                 generator=None) -> Tensor:
        """Append max_new_tokens sampled tokens to idx (B, T): with a key-value cache, or recomputing everything."""
        ### BEGIN SOLUTION 13.11 GPT.generate
        generator = default_generator if generator is None else generator
        idx = np.asarray(idx).astype(np.int64)
        mode = self.training
        self.eval()
        try:
            with no_grad():
                caches = None
                for _ in range(max_new_tokens):
                    if not use_cache:
                        logits = self(idx[:, -self.block_size:])
                    elif caches is None or caches[0].length == self.block_size:
                        caches = self.make_caches(len(idx))
                        logits = self(idx[:, -self.block_size:], caches=caches)
                    else:
                        logits = self(idx[:, -1:], caches=caches)
                    token = _sample(logits.data[:, -1], temperature, top_k, generator)
                    idx = np.concatenate([idx, token[:, None]], axis=1)
        finally:
            self.train(mode)
        return Tensor(idx)
        ### END SOLUTION

# %% [markdown]
# `forward(idx, targets=None, caches=None)` (task 13.10): `idx` is a `(B, T)` array (or tensor) of token ids
# with T ≤ `block_size` (more is a `ValueError` naming the shape and `block_size`: there are no
# positions beyond it):
#
# 1. x = `wte(idx) + wpe(positions)`, positions `0, 1, ..., T − 1` (`np.arange`; with `caches`, the new
#    tokens stand after the cached ones: positions start at `caches[0].length`, and the check above
#    counts those too); `(B, T, C) + (T, C)` broadcasts;
# 2. dropout (`drop`);
# 3. every block in turn (block i gets `caches[i]`, or `None`);
# 4. `ln_f`, then `lm_head`: logits `(B, T, vocab_size)`.
#
# Without targets return the logits; with `targets` (B, T) return `(logits, loss)`, the loss being 05's
# `cross_entropy` over the flattened logits `(B·T, vocab_size)` and targets `(B·T,)`: the mean over
# every position of every sequence. Training a language model is exactly this: `targets` is `idx`
# shifted by one, and every position learns to predict the token after it, all T at once, which is
# only fair because the attention is causal (position t cannot peek at token t + 1, its own answer).
#
# `make_caches(batch)` (given) makes the caches of task 13.7.

# %% [markdown]
# Test 13.9 and 13.10: the parameters, weight tying, a forward and a backward on random tokens, and the
# sequence fed through the caches in pieces (5 tokens, then 1, then 2) giving the logits of the whole.

# %%
manual_seed(0)
model = GPT(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
names = [name for name, _ in model.named_parameters()]
print(len(names), "parameters, first", names[:6])
assert names[:4] == ["wte.weight", "wpe.weight", "h.0.ln_1.weight", "h.0.ln_1.bias"] and names[-1] == "lm_head.weight"
assert abs(model.wte.weight.data.std() - 0.02) < 0.005 and not model.h[0].attn.c_attn.bias.data.any()
assert abs(model.h[1].mlp.c_proj.weight.data.std() - 0.01) < 0.002, "c_proj: 0.02 / sqrt(2 * n_layer)"
tied = GPT(11, 8, 2, 2, 16, tie_weights=True)
assert tied.lm_head.weight is tied.wte.weight and len(list(tied.parameters())) == len(names) - 1
idx = rng.integers(0, 11, (3, 8))
logits, loss = model(idx, np.roll(idx, -1, axis=1))
print(f"loss at initialisation {loss.item():.3f}, log(11) = {np.log(11):.3f}")
assert logits.shape == (3, 8, 11) and logits.dtype == np.float32 and abs(loss.item() - np.log(11)) < 0.1
loss.backward()
assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
later = idx.copy()
later[:, 5:] = rng.integers(0, 11, (3, 3))
assert np.allclose(model(later).data[:, :5], logits.data[:, :5], atol=1e-6), "causal"
try:
    model(rng.integers(0, 11, (1, 9)))
    raise AssertionError("expected ValueError")
except ValueError as error:
    print("as expected:", error)
caches = model.make_caches(3)
pieces = [model(idx[:, a:b], caches=caches) for a, b in [(0, 5), (5, 6), (6, 8)]]
assert np.allclose(np.concatenate([p.data for p in pieces], axis=1), logits.data, atol=1e-5)

# %% [markdown]
# ## `generate`
#
# `GPT.generate(idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True, generator=None)`, the
# last method of the class above (task 13.11): `idx` is the prompt, a `(B, T)` array or tensor of token ids; the result is a `(B, T +
# max_new_tokens)` int64 Tensor, the prompt followed by the new tokens. `generator` is a
# `np.random.Generator`, by default 01's `default_generator` (so `manual_seed` makes generation
# repeatable).
#
# Run everything under `no_grad()` and in evaluation mode (`self.eval()`, restoring the previous mode
# with `self.train(mode)` afterwards, also on an error). Each step:
#
# - without the cache: the logits of `self(idx[:, -block_size:])`, the last `block_size` tokens (the
#   model knows no positions beyond);
# - with the cache: on the first step, **or when the cache is full** (`caches[0].length == block_size`:
#   the window must slide, and sliding changes every position, so the cached keys are stale), make new
#   caches (`make_caches`) and run the last `block_size` tokens through them; otherwise run only the
#   newest token, `idx[:, -1:]`, with the caches;
# - then `_sample(logits of the last position, temperature, top_k, generator)` and append it.
#
# Both ways compute the same logits (up to float32 rounding) and draw identically, so for the same seed
# they give the same tokens.

# %% [markdown]
# Test 13.11: the length, the prompt kept, greedy generation against the model's own argmax step by
# step, and **the cache agreeing with no cache**, also past `block_size` (the window slides).

# %%
prompt = rng.integers(0, 11, (2, 3))
greedy = model.generate(prompt, 4, temperature=0).numpy()
assert greedy.shape == (2, 7) and greedy.dtype == np.int64 and np.array_equal(greedy[:, :3], prompt)
assert np.array_equal(greedy[:, 3], model(prompt).data[:, -1].argmax(axis=-1))
for options in [{"temperature": 0}, {"temperature": 1.0}, {"temperature": 0.7, "top_k": 3}]:
    cached = model.generate(prompt, 12, generator=np.random.default_rng(1), **options).numpy()
    uncached = model.generate(prompt, 12, use_cache=False, generator=np.random.default_rng(1), **options).numpy()
    print(options, cached[0].tolist())
    assert np.array_equal(cached, uncached), "the cache must not change the tokens"
manual_seed(3)
first = model.generate(prompt, 5).numpy()
manual_seed(3)
assert np.array_equal(model.generate(prompt, 5).numpy(), first), "manual_seed makes generation repeatable"
assert model.training, "generate restores the mode"

# %% [markdown]
# ## Training a tiny GPT on Shakespeare (learner-only)
#
# The real test of a language model: train one. Characters of the shipped complete works (08's
# `tt.datasets.shakespeare()`), a tiny GPT (2 layers, width 64, 4 heads, context 64), 200 steps of AdamW
# on batches of 16 windows: a few seconds (4.9 s on two idle cores, 5 to 9 s when they were shared). Expect the loss
# to fall from log(vocabulary) ≈ 4.3 nats per character (the first million characters hold 76 distinct
# ones) to about 2.4, and the sample to have the look of a play (names in capitals, lines, common short
# words) but little sense. The milestone trains a bigger one for longer.

# %% tags=["learner-only"]
from threadpoolctl import threadpool_limits

text = tt.datasets.shakespeare()[:1_000_000]
chars = sorted(set(text))
encode = {c: i for i, c in enumerate(chars)}
data = np.array([encode[c] for c in text], dtype=np.int64)
manual_seed(0)
tiny = GPT(vocab_size=len(chars), block_size=64, n_layer=2, n_head=4, n_embd=64)
optimizer = tt.optim.AdamW(tiny.parameters(), lr=3e-3)
losses = []                                         # every step's loss, for the curve below
start = time.perf_counter()
with threadpool_limits(limits=1):
    for step_index in range(200):
        offsets = rng.integers(0, len(data) - 65, 16)
        windows = data[offsets[:, None] + np.arange(65)]
        _, loss = tiny(windows[:, :-1], windows[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step_index % 50 == 49:
            print(f"step {step_index + 1}: loss {loss.item():.3f}")
print(f"{time.perf_counter() - start:.1f} s")
sample = tiny.generate(np.array([[encode["\n"]]]), 300, temperature=0.8, top_k=10)
print("".join(chars[i] for i in sample.numpy()[0]))

# %% [markdown]
# ### What the tiny GPT learned (learner-only)
#
# First its loss, step by step (each step's batch is a different draw of 16 windows, hence the noise; the
# darker line is the mean of the 10 steps around each). Two levels to read it by: log(76) ≈ 4.33, a
# uniform guess, where an untrained model starts; and about 3.34, the entropy of the characters'
# frequencies, the best a model can do that ignores the context. The loss passes that second line within
# the first ten or twenty steps: from there on the model uses the characters before each position.

# %% tags=["learner-only"]
smoothed = np.convolve(losses, np.ones(10) / 10, mode="valid")                 # the mean of each 10 steps
plt.figure(figsize=(8, 3))
plt.plot(range(1, len(losses) + 1), losses, color="C0", alpha=0.35, label="each step")
plt.plot(np.arange(len(smoothed)) + 5.5, smoothed, color="C0", label="mean of 10 steps")
frequencies = np.bincount(data, minlength=len(chars)) / len(data)
plt.axhline(np.log(len(chars)), color="gray", linestyle="--", label=f"log({len(chars)}): a uniform guess")
plt.axhline(-(frequencies * np.log(frequencies)).sum(), color="C1", linestyle=":",
            label="the characters' frequencies alone")
plt.xlabel("step")
plt.ylabel("cross-entropy (nats per character)")
plt.title("the tiny GPT on Shakespeare")
plt.legend(loc="upper left", bbox_to_anchor=(1, 1))
plt.tight_layout()
plt.show()

# %% [markdown]
# Then what one head attends to: the attention weights softmax(q kᵀ / √D) of one head of the last block,
# on the first 40 characters of a speech. Row t is the query at character t, column s the key at
# character s; every row sums to 1 and is zero right of the diagonal (the causal mask: nothing reads the
# future). The forward
# above attends with the fused `scaled_dot_product_attention`, which keeps no weights, so the cell
# recomputes them from the block's own q and k (`_qkv`), with the stream run through the blocks before
# it. Change `layer` and `head` to look at the others. What to look for: a bright diagonal just left of
# the main one (a head that reads the character before), bright columns at spaces and line breaks (a head
# that finds where the word or the line began), or weight spread evenly over the past (an average).

# %% tags=["learner-only"]
layer, head = tiny.n_layer - 1, 0
first = text.index("BERTRAM.\nAnd I in going")
line = text[first:first + 40]                                                  # 40 characters of the play
idx = np.array([[encode[c] for c in line]])
tiny.eval()
with tt.no_grad():
    stream = tiny.wte(idx) + tiny.wpe(np.arange(len(line)))                    # (1, T, C)
    for block in tiny.h[:layer]:
        stream = block(stream)
    q, k, _ = tiny.h[layer].attn._qkv(tiny.h[layer].ln_1(stream))              # (1, H, T, D) each
tiny.train()
scores = q.numpy()[0, head] @ k.numpy()[0, head].T / np.sqrt(q.shape[-1])     # (T, T)
scores[np.triu_indices(len(line), 1)] = -np.inf                                # the causal mask
weights = numpy_softmax(scores)
assert np.allclose(weights.sum(axis=-1), 1) and not np.triu(weights, 1).any(), "rows sum to 1, no future"
shown = [{"\n": "⏎", " ": "␣"}.get(c, c) for c in line]
plt.figure(figsize=(6.5, 6))
plt.imshow(weights, cmap="viridis")
plt.xticks(range(len(line)), shown, fontsize=8)
plt.yticks(range(len(line)), shown, fontsize=8)
plt.xlabel("key: the character attended to")
plt.ylabel("query: the character attending")
plt.title(f"attention weights, block {layer}, head {head}")
plt.colorbar(shrink=0.8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ### What the cache buys (learner-only)
#
# The same 63 tokens (a full window) for 16 sequences at once, with and without the cache, from the same
# seed: the same text, and the time of each. The cache wins more the longer the context: without it every step reruns the
# whole window. (Past `block_size` this simple cache must be rebuilt at every step, as the window
# slides, and buys nothing: models with relative positions, or a rolling cache, avoid that.)

# %% tags=["learner-only"]
with threadpool_limits(limits=1):
    timings = {}
    for use_cache in (True, False):
        manual_seed(5)
        start = time.perf_counter()
        tokens = tiny.generate(np.array([[encode["\n"]]] * 16), 63, top_k=10, use_cache=use_cache).numpy()
        timings[use_cache] = (time.perf_counter() - start, tokens)
(fast, with_cache), (slow, without) = timings[True], timings[False]
print(f"with the cache {fast:.2f} s, without {slow:.2f} s: {slow / fast:.1f} times faster; "
      f"same tokens: {np.array_equal(with_cache, without)}")

# %% [markdown]
# ## What you built
#
# Layer normalisation with one fused backward; the feed-forward block; causal self-attention whose
# heads are views of one projection; the pre-norm block with its residual stream; a GPT with GPT-2's
# initialisation and optional weight tying; and generation with temperature, top-k and a key-value
# cache that turns each new token's cost from the whole window to one position. The milestone trains
# it on Shakespeare.
