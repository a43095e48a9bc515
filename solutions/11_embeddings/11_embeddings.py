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
# # 11 Embeddings: tokens and positions as vectors
#
# A language model reads text as a sequence of integers, one per token: with the 84 characters of the
# Shakespeare that 08 loads as the vocabulary, numbered in sorted order, `"To be"` is `[46, 70, 1, 57, 60]`. A network cannot do arithmetic with those
# numbers as numbers (token 53 is not "more" than token 40), so the first layer of every language model
# turns each token id into a vector of learned numbers, its **embedding**: row `i` of a table of shape
# `(vocabulary size, width)` is the vector of token `i`. Training moves the rows, and tokens that are
# used alike end up with similar vectors.
#
# ```python
# tokens = nn.Embedding(84, 128)                # 84 characters, a vector of 128 numbers for each
# positions = nn.PositionalEmbedding(64, 128)   # a learned vector for each of the positions 0..63
# idx = Tensor(np.array([[46, 70, 1, 57, 60]])) # (B, T) = (1, 5) token ids
# x = positions(tokens(idx))                    # (1, 5, 128): what token, and where it stands
# ```
#
# The second line is the other half of this module. The attention layers of 12 compare every token with
# every other one, and they do not see the order of the tokens at all: shuffle the sequence and each token
# gets the same result. So the position of each token is *added* to its vector, either as a fixed pattern
# of sines and cosines (Vaswani et al., 2017) or as a second learned table, indexed by the position
# (GPT-2).
#
# What you build goes into `tinytorch/core/embeddings.py`; the layers are exported to `tt.nn`, the
# functions to `tt.nn.functional`:
#
# | you build | task |
# |---|---|
# | `_check_indices`: integer indices within the table, or an error naming the index and the size | 11.1 |
# | `_scatter_add`: rows added into a table, repeated indices included | 11.2 |
# | `_Embedding.forward`: the lookup, a gather of rows | 11.3 |
# | `_Embedding.backward`: the weight's gradient, and `padding_idx`'s row that gets none | 11.4 |
# | `nn.functional.embedding(input, weight, padding_idx=None)` | 11.5 |
# | `nn.Embedding`: the layer and PyTorch's initialisation | 11.6 |
# | `Embedding.from_pretrained`: a table you already have | 11.7 |
# | `nn.functional.sinusoidal_positions(length, embedding_dim)`: the fixed encoding | 11.8 |
# | `nn.SinusoidalPositionalEncoding(max_len, embedding_dim)` | 11.9 |
# | `nn.PositionalEmbedding(max_len, embedding_dim)`: learned positions | 11.10 |
#
# `nn.Embedding` and `nn.functional.embedding` are PyTorch's, with PyTorch's arguments and defaults.
# PyTorch has no positional encodings of its own (every model writes its own); ours have the names
# above.
#
# **Before you start.** This notebook runs on *your* 01, 02 and 04: the package imports `Tensor` and
# `default_generator` from 01, `Function` from 02, and `Module` and `Parameter` from 04. The examples
# use 04's `Linear`, and the demo at the end trains with your 05 and 06 on the text that 08 loads. It
# does not need 09 or 10. <!-- tito -->Finish 08 (`tito test 08` at full marks), run `tito export 08`, and
# restart this notebook's kernel whenever you export again. Grade this module with `tito test 11`, which
# exports every module up to 11 together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.embeddings
import time

import numpy as np

import tinytorch as tt
from tinytorch.core.tensor import Tensor, manual_seed
from tinytorch.core.autograd import gradcheck

rng = np.random.default_rng(0)

# %% [markdown]
# The package file starts with its imports: the layers are `Module`s with `Parameter`s (04), and the
# lookup is a `Function` (02) with a hand-written backward, like 04's `_Linear` and 09's `_Conv2d`.

# %%
#| export
import numpy as np

from tinytorch.core.tensor import Tensor, as_tensor, default_generator
from tinytorch.core.autograd import Function
from tinytorch.core.layers import Module, Parameter

__all__ = ["embedding", "sinusoidal_positions", "Embedding", "SinusoidalPositionalEncoding",
           "PositionalEmbedding"]  # tt.nn.functional, tt.nn

# %% [markdown]
# ## A lookup is a matrix product with a one-hot vector
#
# Write token `i` of a vocabulary of V tokens as its one-hot vector eᵢ (V numbers, all 0 but a 1 at
# place i). A linear layer without bias applied to it gives
#
#     eᵢᵀ W = W[i]        W: (V, D)
#
# row `i` of the weight: the product with a one-hot vector *selects a row*. An embedding layer is exactly
# this linear layer, with the product replaced by the selection. For a batch of N token ids that is the
# difference between a `(N, V) @ (V, D)` product, N·V·D multiplications of which all but N·D are by zero
# (with GPT-2's 50,257 tokens, a few billion of them per batch), and copying N rows.
#
# The same picture gives the backward. For `out = onehot(idx) @ W` the weight's gradient is
# `onehot(idx)ᵀ @ ḡ_out`, a `(V, N) @ (N, D)` product; row v of it adds up the upstream gradients of
# every position that looked up token v:
#
#     ḡ_W[v] = Σ_{n : idx[n] = v} ḡ_out[n]
#
# Rows of tokens not in the batch get 0, and a token that appears five times in the batch gets the sum
# of five gradients. Doing this without the one-hot matrix is a *scatter-add* (task 11.2), and getting
# the repeated indices right is what this module is about.
#
# ## Checking the indices
#
# An index must be an integer between 0 and V − 1. Numpy does not check the way we need:
#
# - a negative index counts from the end (`W[-1]` is the last row), so a token id of −1, from a bug in
#   a tokenizer, would silently read the last token's vector, and the model would train on it;
# - a float array is refused, but a bool array is read as a *mask* (`W[[True, False, True]]` selects
#   rows 0 and 2), a different operation altogether;
# - a too-large index is an `IndexError` from deep inside the forward, naming the axis but not the
#   table you meant.
#
# PyTorch refuses all three; its message for an index out of range reads only `index out of range in
# self`. Yours says which index and how large the table is. `_check_indices(indices, num_embeddings)`
# (task 11.1):
#
# - turns `indices` into a numpy array with `np.asarray` (a Tensor gives its array: `Tensor.__array__`;
#   a list, a Python int and a numpy array work too) and returns it, unchanged, whatever its shape (a
#   numpy array given is returned itself: the same object, of its own dtype, never a converted copy);
# - raises `IndexError` if its dtype is not an integer type (`array.dtype.kind` is `"i"` for signed and
#   `"u"` for unsigned integers; bools are `"b"`, floats `"f"`), naming the dtype;
# - raises `IndexError` if any index is below 0 or at least `num_embeddings`, naming one such index and
#   the size: `index 90 is out of range for an embedding of 84 rows (0 to 83)`. Finding the smallest and
#   the largest index (`min()`, `max()`) is enough to decide, and to pick an index to name. An empty
#   array has no index to check.

# %%
#| export
def _check_indices(indices, num_embeddings: int) -> np.ndarray:
    """`indices` as an integer numpy array (any shape), or IndexError naming a wrong index or dtype and
    the size of the table."""
    ### BEGIN SOLUTION 11.1 _check_indices
    index = np.asarray(indices)
    if index.dtype.kind not in "iu":
        raise IndexError(f"embedding: indices must be integers, got an array of dtype {index.dtype}")
    if index.size:
        low, high = index.min(), index.max()
        if low < 0 or high >= num_embeddings:
            bad = low if low < 0 else high
            raise IndexError(f"embedding: index {bad} is out of range for an embedding of {num_embeddings} rows "
                             f"(0 to {num_embeddings - 1})")
    return index
    ### END SOLUTION

# %% [markdown]
# Test 11.1.

# %%
assert _check_indices([[3, 0], [4, 4]], 5).tolist() == [[3, 0], [4, 4]]
assert _check_indices(np.array(2, dtype=np.uint8), 3).shape == ()
assert _check_indices(Tensor(np.arange(6).reshape(2, 3)), 6).shape == (2, 3)
assert _check_indices(np.zeros((2, 0), dtype=np.int64), 1).shape == (2, 0)
for bad, words in [([0, 9, 2], ["9", "6"]), ([[1, -1]], ["-1", "6"]), (np.array([1.0, 2.0]), ["float64"]),
                   (np.array([True, False]), ["bool"])]:
    try:
        _check_indices(bad, 6)
        raise AssertionError(f"_check_indices({bad!r}, 6) must raise IndexError")
    except IndexError as error:
        print("as expected:", error)
        assert all(word in str(error) for word in words), error

# %% [markdown]
# ## The scatter-add
#
# The backward of a lookup, from above: with the indices flattened to `idx (N,)` and the upstream
# gradient to `g (N, D)`, start from zeros `(V, D)` and add row n of g into row idx[n], for every n.
# That is the tool to build first, `_scatter_add(index, rows, num_rows)`, task 11.2. The obvious numpy
# line is wrong:
#
# ```python
# grad = np.zeros((V, D))
# grad[idx] += g            # WRONG when idx repeats an index
# ```
#
# `grad[idx] += g` is `grad[idx] = grad[idx] + g`: numpy reads the rows `grad[idx]` (a copy), adds g,
# and writes the rows back one after the other, so when row 7 appears three times in idx the three writes
# overwrite each other and row 7 keeps *one* of the three gradients. (The cell after the next one shows
# it.) Repeated indices are not a corner case: in a batch of English text the letter `e` appears hundreds
# of times.
#
# `np.add.at(grad, idx, g)` is numpy's *unbuffered* addition: it adds every row in, one at a time, and
# gets repeats right. It is also slow on a 2-d table. Measured at the sizes of the GPT of 13 (N = 32·64
# positions, D = 128, float32, one thread; the best of 20 calls, over 3 to 5 such runs on two shared,
# busy cores), for a small character vocabulary (65; the 84 of the Shakespeare shipped here
# give about the same times) and for GPT-2's, the ways to compute the same `(V, D)` sum:
#
# | scatter-add of 2,048 rows of 128 | V = 65 | V = 50,257 (GPT-2) |
# |---|---|---|
# | a Python loop, `for n in range(N): grad[idx[n]] += g[n]` | 1.5–2.3 ms | 2.7–3.0 ms |
# | `np.add.at(grad, idx, g)` on the `(V, D)` table | 2.3–2.9 ms | 3.7–5.0 ms |
# | `np.add.at` on the table *flattened* to `(V·D,)`, with flat indices | **0.45–0.57 ms** | **1.7–2.2 ms** |
# | `np.bincount` of the flat indices with `weights=g` | 2.2–2.6 ms | 5.9–6.6 ms |
# | sort the indices, then `np.add.reduceat` over runs of equal ones | 0.35–0.37 ms | 3.8–4.4 ms |
# | the one-hot product `onehot(idx)ᵀ @ g` | 0.42–0.46 ms | 390–490 ms |
#
# (For V = 50,257 about 1 ms of each is spent just zeroing the 25 MB table: a dense gradient of a large
# vocabulary is expensive whatever you do, which is why PyTorch also offers sparse gradients.) The
# flattened `np.add.at` is fast at every size: on a 1-d target numpy ≥ 1.25 adds single numbers in a
# tight loop, where the 2-d version handles every index as a row of its own. So, with `index (N,)`
# integers and `rows (N, D)`:
#
# ```python
# flat = index[:, None] * D + np.arange(D)      # (N, D): where each element of each row goes in (V·D,)
# out = np.zeros(num_rows * D)                  # of rows' dtype
# np.add.at(out, flat.ravel(), rows.ravel())
# return out.reshape(num_rows, D)
# ```
#
# One trap in the first line: numpy keeps the index's dtype, and token ids are often stored small
# (`uint8` for characters, `int16`, `int32`); `index * D` then overflows (200 · 128 does not fit in a
# `uint8`). Convert the index to `np.intp`, numpy's own index type, first.

# %%
#| export
def _scatter_add(index: np.ndarray, rows: np.ndarray, num_rows: int) -> np.ndarray:
    """out (num_rows, D) of rows' dtype with out[index[n]] += rows[n] for every n: a repeated index receives
    the sum of its rows. index (N,) integers, rows (N, D)."""
    ### BEGIN SOLUTION 11.2 _scatter_add
    dim = rows.shape[1]
    flat = index.astype(np.intp)[:, None] * dim + np.arange(dim)
    out = np.zeros(num_rows * dim, dtype=rows.dtype)
    np.add.at(out, flat.ravel(), rows.ravel())
    return out.reshape(num_rows, dim)
    ### END SOLUTION

# %% [markdown]
# The trap, seen once: the buffered `+=` keeps one of the repeated rows' gradients, `np.add.at` adds
# them all.

# %%
idx = np.array([1, 3, 1, 1])
g = np.ones((4, 2))
buffered = np.zeros((5, 2))
buffered[idx] += g
unbuffered = np.zeros((5, 2))
np.add.at(unbuffered, idx, g)
print("grad[idx] += g         :", buffered[:, 0])
print("np.add.at(grad, idx, g):", unbuffered[:, 0])
assert buffered[1, 0] == 1.0 and unbuffered[1, 0] == 3.0

# %% [markdown]
# Test 11.2: the scatter-add, with repeats and with a narrow index dtype.

# %%
rows = np.arange(8.0).reshape(4, 2)
assert _scatter_add(np.array([2, 0, 2, 2]), rows, 3).tolist() == [[2.0, 3.0], [0.0, 0.0], [10.0, 13.0]]
index = rng.integers(0, 300, 1000).astype(np.int16)
rows = rng.standard_normal((1000, 200)).astype(np.float32)
expected = np.zeros((300, 200), dtype=np.float32)
np.add.at(expected, index, rows)
found = _scatter_add(index, rows, 300)
assert found.dtype == np.float32 and np.allclose(found, expected, atol=1e-5), "int16 indices times 200 overflow"
assert _scatter_add(np.zeros(0, dtype=np.int64), np.zeros((0, 4)), 2).tolist() == [[0.0] * 4] * 2

# %% [markdown]
# ### How much faster? (learner-only)
#
# The table above, measured on your machine: a Python loop, `np.add.at` on the 2-d table, and your
# `_scatter_add`, for the GPT's sizes.

# %% tags=["learner-only"]
import matplotlib.pyplot as plt
from threadpoolctl import threadpool_limits


def milliseconds(fn, repeat=20):
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return 1e3 * best


def loop(index, rows, num_rows):
    out = np.zeros((num_rows, rows.shape[1]), dtype=rows.dtype)
    for n in range(len(index)):
        out[index[n]] += rows[n]
    return out


def add_at_2d(index, rows, num_rows):
    out = np.zeros((num_rows, rows.shape[1]), dtype=rows.dtype)
    np.add.at(out, index, rows)
    return out


index = rng.integers(0, 84, 32 * 64)
rows = rng.standard_normal((32 * 64, 128)).astype(np.float32)
ways = {"Python loop": loop, "np.add.at, 2-d": add_at_2d, "your _scatter_add": _scatter_add}
with threadpool_limits(limits=1):
    times = {name: milliseconds(lambda way=way: way(index, rows, 84)) for name, way in ways.items()}
for name, ms in times.items():
    print(f"{name:>20}: {ms:.2f} ms")
figure, axis = plt.subplots(figsize=(6, 2.5))
axis.barh(list(times), list(times.values()))
axis.set_xlabel("ms per backward (V = 84, N = 2,048, D = 128)")
figure.tight_layout()
plt.show()

# %% [markdown]
# ## `_Embedding`: the lookup and its gradient
#
# `_Embedding` is a `Function`. `forward(ctx, indices, weight, padding_idx=None)`, task 11.3, gets the
# checked index array and the weight `(V, D)` as numpy arrays, and returns the rows, one per index, in
# the shape of the indices with the width added:
#
#     out[i₁, ..., iₖ, :] = weight[indices[i₁, ..., iₖ], :]        out: (*indices.shape, D)
#
# A `(B, T)` batch of token ids gives a `(B, T, D)` batch of vectors; a single index (a 0-d array) gives
# one vector `(D,)`; an empty index array gives an empty result. Numpy's fancy indexing does exactly
# this. Use `np.take(weight, indices, axis=0)`, which always returns a new array: `weight[indices]`
# returns a *view* of the weight for a single index given as a Python int or a numpy integer
# (`apply` passes a Python number through unchanged, so `_Embedding.apply(4, weight)` gets one), and
# an output that shares memory with a parameter changes under the optimizer's in-place update (and
# writing into it writes into the weight). Save what the backward needs: the indices,
# the weight's shape (not the weight: its values play no part in the gradient) and `padding_idx`.
#
# `backward(ctx, grad_output)`, task 11.4, returns `(None, grad_weight)`: no gradient for the indices
# (they are integers; nothing can be learned about them), and for the weight your scatter-add of
# `grad_output` reshaped to `(N, D)` at the flattened indices, into V rows. (The backward runs only when
# the weight needs a gradient: the indices never do, and `apply` records no graph when no operand needs
# one, so a frozen table costs no backward at all.)
#
# **`padding_idx`.** Batches of sentences of different lengths are padded to one length with a special
# token, and the padding should not learn anything. With `padding_idx=p`, row p of the weight's gradient
# is 0, whatever the upstream gradient says (PyTorch's rule). Set it to zero after the scatter-add.

# %%
#| export
class _Embedding(Function):
    """out = weight[indices] for integer indices of any shape, weight (V, D): (*indices.shape, D); the weight's
    gradient is the scatter-add of the upstream gradient, with row padding_idx left at zero."""

    @staticmethod
    def forward(ctx, indices, weight, padding_idx=None):
        ### BEGIN SOLUTION 11.3 _Embedding.forward
        ctx.save_for_backward(indices)
        ctx.weight_shape, ctx.padding_idx = weight.shape, padding_idx
        return np.take(weight, indices, axis=0)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 11.4 _Embedding.backward
        (indices,) = ctx.saved_tensors
        num_rows, dim = ctx.weight_shape
        grad = _scatter_add(indices.reshape(-1), grad_output.reshape(-1, dim), num_rows)
        if ctx.padding_idx is not None:
            grad[ctx.padding_idx] = 0
        return None, grad
        ### END SOLUTION

# %% [markdown]
# Test 11.3: the lookup.

# %%
weight = rng.standard_normal((6, 3)).astype(np.float32)
indices = np.array([[5, 0, 5], [2, 2, 1]])
out = _Embedding.apply(indices, Tensor(weight))
assert out.shape == (2, 3, 3) and out.dtype == np.float32
assert np.array_equal(out.data[0, 2], weight[5]) and np.array_equal(out.data[1, 0], weight[2])
for index in (np.array(4), 4):                               # a 0-d array, and a Python int
    single = _Embedding.apply(index, Tensor(weight))
    assert single.shape == (3,) and np.array_equal(single.data, weight[4])
    assert not np.shares_memory(single.data, weight), "the output is a new array, never a view of the weight"
assert _Embedding.apply(np.zeros((0, 2), dtype=np.int64), Tensor(weight)).shape == (0, 2, 3)

# %% [markdown]
# Test 11.4: the weight's gradient, against central differences (02's `gradcheck`), with repeated
# indices; then the padding row.

# %%
weight = Tensor(rng.standard_normal((5, 3)), requires_grad=True)
indices = np.array([[0, 3, 3], [3, 1, 0]])                   # 3 three times, 0 twice, 2 and 4 never
assert gradcheck(lambda w: _Embedding.apply(indices, w), weight)
_Embedding.apply(indices, weight).sum().backward()
print(weight.grad.data[:, 0])
assert weight.grad.data[:, 0].tolist() == [2.0, 1.0, 0.0, 3.0, 0.0], "row v counts the lookups of v"
weight.grad = None
_Embedding.apply(indices, weight, padding_idx=3).sum().backward()
assert weight.grad.data[:, 0].tolist() == [2.0, 1.0, 0.0, 0.0, 0.0], "the padding row gets no gradient"
frozen = Tensor(rng.standard_normal((5, 3)))
assert not _Embedding.apply(indices, frozen).requires_grad

# %% [markdown]
# ## `embedding`: the function users call
#
# `nn.functional.embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
# scale_grad_by_freq=False, sparse=False)` is PyTorch's signature. PyTorch's last four options
# (renormalising rows, scaling gradients by frequency, sparse gradients) are beyond this course: anything
# but their defaults is a `ValueError` (given, `_reject_options`). The rest is yours, task 11.5:
#
# - `weight` becomes a tensor (`as_tensor`) and must be 2-d `(V, D)`: otherwise a `ValueError` naming its
#   shape;
# - `input` goes through `_check_indices` against V rows;
# - `padding_idx` goes through `_padding_index(padding_idx, num_embeddings)`, which you write here too,
#   because the layer below needs it as well: `None` stays `None`; an int in `[-V, V)` is returned as a
#   row number in `[0, V)` (a negative one counts from the end, as in PyTorch: `padding_idx=-1` is row
#   V − 1); anything outside is a `ValueError` naming the value and V (PyTorch raises an
#   `AssertionError` saying `Padding_idx must be within num_embeddings`);
# - then `_Embedding.apply(indices, weight, padding_idx=...)`.
#
# (`apply` takes the index array as an operand like any other: an array that is not a Tensor needs no
# gradient.)

# %%
#| export
def _reject_options(name: str, max_norm, scale_grad_by_freq, sparse) -> None:
    """PyTorch's embedding options that tinytorch does not implement: ValueError unless they are the defaults."""
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise ValueError(f"{name}: tinytorch supports max_norm=None, scale_grad_by_freq=False and sparse=False "
                         f"only, got max_norm={max_norm}, scale_grad_by_freq={scale_grad_by_freq}, sparse={sparse}")


def _padding_index(padding_idx, num_embeddings: int):
    """None, or padding_idx as a row number in [0, num_embeddings) (negative counts from the end);
    ValueError outside [-num_embeddings, num_embeddings)."""
    ### BEGIN SOLUTION 11.5 embedding
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"padding_idx must be within num_embeddings: got padding_idx={padding_idx} for "
                         f"{num_embeddings} embeddings (allowed: {-num_embeddings} to {num_embeddings - 1})")
    return int(padding_idx) + num_embeddings if padding_idx < 0 else int(padding_idx)
    ### END SOLUTION

# %%
#| export nn.functional
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of weight (V, D) at the integer indices `input` (any shape): (*input.shape, D). Row padding_idx
    receives no gradient."""
    _reject_options("embedding", max_norm, scale_grad_by_freq, sparse)
    ### BEGIN SOLUTION 11.5 embedding
    weight = as_tensor(weight)
    if weight.ndim != 2:
        raise ValueError(f"embedding: expected a 2-d weight (num_embeddings, embedding_dim), got shape "
                         f"{weight.shape}")
    indices = _check_indices(input, weight.shape[0])
    return _Embedding.apply(indices, weight, padding_idx=_padding_index(padding_idx, weight.shape[0]))
    ### END SOLUTION

# %% [markdown]
# Test 11.5.

# %%
weight = Tensor(rng.standard_normal((4, 2)).astype(np.float32), requires_grad=True)
out = embedding([[3, 1], [1, 1]], weight, padding_idx=-3)        # padding_idx=-3 is row 1
assert out.shape == (2, 2, 2) and np.array_equal(out.data[0, 0], weight.data[3])
out.sum().backward()
assert weight.grad.data[:, 0].tolist() == [0.0, 0.0, 0.0, 1.0]
assert embedding(Tensor(np.array([0, 2])), weight).shape == (2, 2)
for call, error_type in [(lambda: embedding([4], weight), IndexError), (lambda: embedding([0], weight, padding_idx=4),
                         ValueError), (lambda: embedding([0], weight.data[0]), ValueError),
                         (lambda: embedding([0], weight, max_norm=1.0), ValueError)]:
    try:
        call()
        raise AssertionError(f"expected {error_type.__name__}")
    except error_type as error:
        print("as expected:", error)

# %% [markdown]
# ## `nn.Embedding`
#
# `Embedding(num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
# scale_grad_by_freq=False, sparse=False)`, PyTorch's layer, holds the table `weight` of shape
# `(num_embeddings, embedding_dim)` as a `Parameter`, and `num_embeddings`, `embedding_dim` and
# `padding_idx` as attributes, the last as a row number in `[0, num_embeddings)` or `None` (through
# `_padding_index`: `Embedding(10, 3, padding_idx=-1).padding_idx == 9`). The other options are kept
# and refused as in `embedding` (given), and so are `forward` (a call of `embedding`) and the repr,
# PyTorch's: `Embedding(65, 128)`, `Embedding(65, 128, padding_idx=0)`.
#
# **Initialisation.** PyTorch draws every weight from the standard normal distribution N(0, 1), in
# `reset_parameters()` (which `__init__` calls), and then sets the row of `padding_idx` to zero: the
# padding token's vector starts at zero and, receiving no gradient, stays there. Why not Linear's
# ±1/√fan_in? A linear layer *sums* its inputs, so its weights must shrink as the inputs grow in number
# to keep the output's variance near 1; an embedding *selects* one row, and a row of N(0, 1) numbers
# already has variance 1. Draw from `default_generator` (01):
# `default_generator.standard_normal(shape, dtype=np.float32)`, so that `manual_seed` makes the table
# repeatable.
#
# **Weight tying.** A language model ends with a linear layer from width D back to V scores, one per
# token, whose weight `(V, D)` has the embedding's shape. Many models (GPT-2, and the GPT of 13) use the
# *same* matrix for both: `head.weight = tokens.weight`. The gradients of both uses add up in the one
# Parameter (02's engine accumulates them), `parameters()` yields it once (04), and the model has V·D
# fewer numbers to learn. The test below checks it.

# %%
#| export nn
class Embedding(Module):
    """A lookup table: row i of weight (num_embeddings, embedding_dim) is the vector of index i."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False):
        super().__init__()
        _reject_options("Embedding", max_norm, scale_grad_by_freq, sparse)
        self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = (max_norm, norm_type,
                                                                              scale_grad_by_freq, sparse)
        ### BEGIN SOLUTION 11.6 Embedding
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _padding_index(padding_idx, num_embeddings)
        self.weight = Parameter(np.empty((num_embeddings, embedding_dim), dtype=np.float32))
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self) -> None:
        """weight from N(0, 1), drawn from default_generator, with the row of padding_idx set to zero."""
        ### BEGIN SOLUTION 11.6 Embedding
        self.weight.data[...] = default_generator.standard_normal(self.weight.shape, dtype=np.float32)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0.0
        ### END SOLUTION

    def forward(self, input) -> Tensor:
        return embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> "Embedding":
        """An Embedding whose weight is `embeddings` (2-d); frozen (requires_grad=False) unless freeze=False."""
        ### BEGIN SOLUTION 11.7 from_pretrained
        table = as_tensor(embeddings)
        if table.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: expected a 2-d table (num_embeddings, embedding_dim), "
                             f"got shape {table.shape}")
        layer = cls(table.shape[0], table.shape[1], padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                    scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
        layer.weight = Parameter(table, requires_grad=not freeze)
        return layer
        ### END SOLUTION

# %% [markdown]
# Test 11.6: the layer, its initialisation, and a tied output layer.

# %%
manual_seed(0)
layer = Embedding(65, 128, padding_idx=-65)
print(layer)
assert repr(layer) == "Embedding(65, 128, padding_idx=0)" and repr(Embedding(3, 2)) == "Embedding(3, 2)"
assert layer.weight.shape == (65, 128) and layer.weight.dtype == np.float32 and layer.padding_idx == 0
assert [name for name, _ in layer.named_parameters()] == ["weight"]
assert np.all(layer.weight.data[0] == 0.0), "the padding row starts at zero"
big = Embedding(1000, 200).weight.data
print(f"mean {big.mean():.4f}, std {big.std():.4f}")
assert abs(big.mean()) < 0.01 and abs(big.std() - 1.0) < 0.01
idx = Tensor(np.array([[1, 0, 7]]))
assert np.array_equal(layer(idx).data, layer.weight.data[[[1, 0, 7]]])
manual_seed(3)
first = Embedding(4, 2).weight.data.copy()
manual_seed(3)
assert np.array_equal(Embedding(4, 2).weight.data, first), "manual_seed makes the table repeatable"

tokens, head = Embedding(5, 3), tt.nn.Linear(3, 5, bias=False)
head.weight = tokens.weight                                        # tied: one Parameter, two uses
logits = head(tokens(np.array([4, 1, 4])))                         # (3, 5) scores
logits.backward(Tensor(np.ones((3, 5), dtype=np.float32)))
w = tokens.weight.data
from_head = np.ones((3, 5)).T @ w[[4, 1, 4]]                       # the linear layer's share, (5, 3)
from_lookup = np.zeros((5, 3))
np.add.at(from_lookup, [4, 1, 4], np.ones((3, 5)) @ w)             # the embedding's share
assert np.allclose(tokens.weight.grad.data, from_head + from_lookup, atol=1e-5), "both uses add up"

# %% [markdown]
# ## `from_pretrained`: a table you already have
#
# Embeddings trained elsewhere (word2vec, GloVe, another model's table) are loaded with the class method
# `Embedding.from_pretrained(embeddings, freeze=True, padding_idx=None, ...)`, task 11.7:
#
# - `embeddings` (a Tensor or an array) must be 2-d: its shape gives `num_embeddings` and
#   `embedding_dim` (otherwise a `ValueError` naming the shape);
# - make the layer with `cls(...)`, passing on `padding_idx` and the other options, then replace its
#   weight: `layer.weight = Parameter(embeddings, requires_grad=not freeze)`. Frozen (the default), the
#   table is used as it is and never trained; `freeze=False` fine-tunes it.
# - The given values are kept exactly, even in the row of `padding_idx` (PyTorch does not zero it here):
#   `padding_idx` only means that the row gets no gradient.
#
# (Making the layer with `cls` draws a table that is thrown away at once: PyTorch avoids that with a
# private `_weight` argument, which we do without.)

# %% [markdown]
# Test 11.7.

# %%
table = rng.standard_normal((4, 3)).astype(np.float32)
frozen = Embedding.from_pretrained(table, padding_idx=1)
assert np.array_equal(frozen.weight.data, table) and not frozen.weight.requires_grad
assert frozen.num_embeddings == 4 and frozen.embedding_dim == 3 and frozen.padding_idx == 1
assert np.array_equal(frozen(np.array([1, 2])).data, table[[1, 2]]), "the padding row keeps its values"
tuned = Embedding.from_pretrained(Tensor(table), freeze=False)
tuned(np.array([0, 0, 3])).sum().backward()
assert tuned.weight.requires_grad and tuned.weight.grad.data[:, 0].tolist() == [2.0, 0.0, 0.0, 1.0]
try:
    Embedding.from_pretrained(table[0])
    raise AssertionError("a 1-d table must raise ValueError")
except ValueError as error:
    print("as expected:", error)

# %% [markdown]
# ## Where a token stands: positional encodings
#
# Attention (module 12) computes, for every token, a weighted average of all the tokens' vectors, with
# weights from the similarity of their vectors. Nothing in that uses the *order* of the tokens: give it
# "dog bites man" or "man bites dog" and each word gets the same result. The order has to be put into
# the vectors themselves, by adding to the vector of the token at position p a vector that depends on p.
#
# **Sinusoidal encoding** (Vaswani et al., *Attention is all you need*, 2017) uses a fixed vector for
# each position, made of sines and cosines of different frequencies. For position p and an embedding of
# width d, element 2i (even) and element 2i + 1 (odd) are
#
#     PE[p, 2i]     = sin(p / 10000^(2i/d))
#     PE[p, 2i + 1] = cos(p / 10000^(2i/d))            i = 0, 1, ..., ⌈d/2⌉ − 1
#
# Each pair (2i, 2i + 1) is a point on a circle that turns with the position, at its own speed: the
# first pair turns by 1 radian per position (a period of 2π ≈ 6 positions), the last ones barely move
# (a period of up to 2π·10000). Like the hands of a clock, the fast pairs tell nearby positions apart
# and the slow ones far-apart positions. Two properties make it a good choice:
#
# - every position gets a distinct vector, for any length, with no parameters to learn;
# - the vector of position p + k is a *rotation* of the vector of p, the same rotation for every p (sin
#   and cos of a sum), so "k places further on" is one linear map, the same everywhere in the sequence.
#   The dot product of two positions' vectors, Σᵢ cos((p − q)·ωᵢ), depends only on their distance: see
#   the pictures below.
#
# `sinusoidal_positions(length, embedding_dim)`, task 11.8, returns the table `(length, embedding_dim)`
# as a float32 Tensor (no gradient). Compute the angles p · 10000^(−2i/d) in float64 (with float32, the
# angles of positions in the thousands lose their last digits) as one `(length, 1) * (1, ⌈d/2⌉)`
# product, then write their sines into the even columns and their cosines into the odd ones
# (`table[:, 0::2]`, `table[:, 1::2]`). An odd width d has one even column more than odd ones: the last
# column is a sine, and the cosines use only the first ⌊d/2⌋ angles. The frequencies are
# `10000 ** (-np.arange(0, d, 2) / d)`, the 2i of the formula being `np.arange(0, d, 2)`.

# %%
#| export nn.functional
def sinusoidal_positions(length: int, embedding_dim: int) -> Tensor:
    """The sinusoidal positional encoding (length, embedding_dim), float32: sin(p / 10000^(2i/d)) in column 2i and
    cos(p / 10000^(2i/d)) in column 2i + 1 for position p."""
    ### BEGIN SOLUTION 11.8 sinusoidal_positions
    position = np.arange(length, dtype=np.float64)[:, None]                       # (length, 1)
    frequency = 10000.0 ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)   # (ceil(d/2),)
    angles = position * frequency                                                 # (length, ceil(d/2))
    table = np.empty((length, embedding_dim), dtype=np.float32)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, :embedding_dim // 2])
    return Tensor(table)
    ### END SOLUTION

# %% [markdown]
# Test 11.8.

# %%
table = sinusoidal_positions(50, 6)
assert table.shape == (50, 6) and table.dtype == np.float32 and not table.requires_grad
p, i = 7, 2                                                      # column 2i = 4 and 2i + 1 = 5
assert np.isclose(table.data[p, 2 * i], np.sin(p / 10000 ** (2 * i / 6)), atol=1e-6)
assert np.isclose(table.data[p, 2 * i + 1], np.cos(p / 10000 ** (2 * i / 6)), atol=1e-6)
assert table.data[0].tolist() == [0.0, 1.0] * 3, "position 0: sin 0 = 0, cos 0 = 1"
odd = sinusoidal_positions(4, 5).data
assert odd.shape == (4, 5) and np.allclose(odd[:, 4], np.sin(np.arange(4) / 10000 ** (4 / 5)))
shift = 5                                   # the same rotation takes every position p to p + 5, pair by pair
pairs = sinusoidal_positions(60, 8).data.astype(np.float64).reshape(60, 4, 2)
omega = 10000.0 ** (-np.arange(0, 8, 2) / 8)
c, s = np.cos(shift * omega), np.sin(shift * omega)
rotated = np.stack([pairs[:, :, 0] * c + pairs[:, :, 1] * s, pairs[:, :, 1] * c - pairs[:, :, 0] * s], axis=-1)
assert np.allclose(rotated[:-shift], pairs[shift:], atol=1e-5)

# %% [markdown]
# The table for 64 positions and width 128 (as in the GPT of 13), and the dot products of every pair of
# positions' vectors (learner-only: pictures). In the first, each column is a wave, faster on the left;
# in the second, every row is the same curve shifted: the similarity of two positions depends on their
# distance, largest at distance 0 and decaying as they move apart.

# %% tags=["learner-only"]
table = sinusoidal_positions(64, 128).data
similarity = table @ table.T
figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
image = left.imshow(table, cmap="RdBu_r", aspect="auto", vmin=-1, vmax=1)
left.set_xlabel("dimension")
left.set_ylabel("position")
left.set_title("sinusoidal_positions(64, 128)")
figure.colorbar(image, ax=left)
image = right.imshow(similarity, cmap="viridis")
right.set_xlabel("position q")
right.set_ylabel("position p")
right.set_title("PE[p] · PE[q]")
figure.colorbar(image, ax=right)
figure.tight_layout()
plt.show()
plt.figure(figsize=(5, 2.5))
plt.plot(similarity[20], marker=".")
plt.xlabel("position q")
plt.ylabel("PE[20] · PE[q]")
plt.title("the similarity of position 20 to the others")
plt.show()

# %% [markdown]
# ## The layers that add positions
#
# Both positional layers take the token vectors `x` of shape `(B, T, D)` (or `(T, D)`, one unbatched
# sequence) and return `x` plus the vectors of the positions 0 .. T − 1, `(T, D)`, broadcast over the
# batch. Both hold a table of `max_len` positions, so both first check the input (task 11.9, the helper
# `_sequence_length(name, x, max_len, embedding_dim)`, which returns T):
#
# - `x` must have at least 2 dimensions, the last one `embedding_dim`: otherwise a `ValueError` naming
#   the layer (`name`), the expected width and the input's shape;
# - T = `x.shape[-2]` must be at most `max_len`: otherwise a `ValueError` naming the layer, T and
#   `max_len` (`PositionalEmbedding: the input holds 80 positions (shape (2, 80, 128)), more than
#   max_len=64`). Without it, a learned table would fail inside the lookup with an index error about row
#   64, one step removed from the real mistake: a sequence longer than the model was built for.
#
# `SinusoidalPositionalEncoding(max_len, embedding_dim)`, also task 11.9, computes its table once in
# `__init__`, `self.pe = sinusoidal_positions(max_len, embedding_dim)`, a plain Tensor attribute: it is
# not a Parameter, so the optimizer never sees it and it is not saved in `state_dict()` (PyTorch would
# register it as a non-persistent *buffer*; we have none). `forward(input)` returns `x + pe[:T]`, with
# `x = as_tensor(input)`. (The original Transformer also multiplies the token vectors by √d before the
# addition; that belongs to the model, not to this layer.)
#
# `max_len`, `embedding_dim` and the repr (`SinusoidalPositionalEncoding(max_len=64, embedding_dim=128)`)
# are given.

# %%
#| export
def _sequence_length(name: str, x: Tensor, max_len: int, embedding_dim: int) -> int:
    """T of an input x (*, T, embedding_dim), checked: ValueError naming the layer unless x has at least 2
    dimensions, the last embedding_dim, and T <= max_len."""
    ### BEGIN SOLUTION 11.9 SinusoidalPositionalEncoding
    if x.ndim < 2 or x.shape[-1] != embedding_dim:
        raise ValueError(f"{name}: expected an input of shape (..., T, {embedding_dim}) (T positions of width "
                         f"embedding_dim={embedding_dim}), got shape {x.shape}")
    length = x.shape[-2]
    if length > max_len:
        raise ValueError(f"{name}: the input holds {length} positions (shape {x.shape}), more than "
                         f"max_len={max_len}")
    return length
    ### END SOLUTION

# %%
#| export nn
class SinusoidalPositionalEncoding(Module):
    """x (*, T, embedding_dim) plus the fixed sinusoidal encoding of the positions 0..T-1 (T <= max_len)."""

    def __init__(self, max_len: int, embedding_dim: int):
        super().__init__()
        self.max_len, self.embedding_dim = max_len, embedding_dim
        ### BEGIN SOLUTION 11.9 SinusoidalPositionalEncoding
        self.pe = sinusoidal_positions(max_len, embedding_dim)
        ### END SOLUTION

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 11.9 SinusoidalPositionalEncoding
        x = as_tensor(input)
        length = _sequence_length("SinusoidalPositionalEncoding", x, self.max_len, self.embedding_dim)
        return x + self.pe[:length]
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, embedding_dim={self.embedding_dim}"

# %% [markdown]
# Test 11.9.

# %%
encode = SinusoidalPositionalEncoding(16, 6)
print(encode)
assert repr(encode) == "SinusoidalPositionalEncoding(max_len=16, embedding_dim=6)"
assert list(encode.parameters()) == [] and encode.state_dict() == {}, "a fixed table: nothing to train or save"
x = Tensor(rng.standard_normal((2, 10, 6)), requires_grad=True)
y = encode(x)
assert y.shape == (2, 10, 6) and np.allclose(y.data, x.data + sinusoidal_positions(10, 6).data)
assert np.allclose(encode(x.data[0]).data, y.data[0]), "an unbatched (T, D) sequence"
assert gradcheck(encode, x)
for bad in (np.zeros((2, 17, 6)), np.zeros((2, 10, 5)), np.zeros(6)):
    try:
        encode(bad)
        raise AssertionError(f"an input of shape {bad.shape} must raise ValueError")
    except ValueError as error:
        print("as expected:", error)

# %% [markdown]
# **Learned positions** are what GPT-2 (and the GPT of 13) uses: a second embedding table, indexed by the
# position instead of the token. `PositionalEmbedding(max_len, embedding_dim)`, task 11.10, holds a
# `weight` Parameter `(max_len, embedding_dim)`, initialised as `nn.Embedding`'s, N(0, 1) from
# `default_generator` in `reset_parameters()`; its `forward(input)` checks the input with
# `_sequence_length` and returns `x + embedding(positions, self.weight)` with `positions` the integers
# 0 .. T − 1 (`np.arange(T)`). Through your `embedding`, the table's gradient is a scatter-add again:
# row t receives the gradients of position t summed over the batch, and rows T .. max_len − 1 nothing.
#
# The learned table can represent any pattern the data asks for, which the fixed one cannot; it costs
# max_len · D parameters, and it knows nothing about positions beyond `max_len`, which it never saw
# (the sinusoidal formula goes on for ever, though a model trained on 64 positions would not know what
# to do with the 65th either). For short contexts the two give similar results; GPT-2 learned its
# positions, the original Transformer used the sines.
#
# `max_len`, `embedding_dim` and the repr (`PositionalEmbedding(max_len=64, embedding_dim=128)`) are
# given.

# %%
#| export nn
class PositionalEmbedding(Module):
    """x (*, T, embedding_dim) plus a learned vector for each of the positions 0..T-1 (T <= max_len)."""

    def __init__(self, max_len: int, embedding_dim: int):
        super().__init__()
        self.max_len, self.embedding_dim = max_len, embedding_dim
        ### BEGIN SOLUTION 11.10 PositionalEmbedding
        self.weight = Parameter(np.empty((max_len, embedding_dim), dtype=np.float32))
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self) -> None:
        """weight from N(0, 1), drawn from default_generator, as nn.Embedding's."""
        ### BEGIN SOLUTION 11.10 PositionalEmbedding
        self.weight.data[...] = default_generator.standard_normal(self.weight.shape, dtype=np.float32)
        ### END SOLUTION

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 11.10 PositionalEmbedding
        x = as_tensor(input)
        length = _sequence_length("PositionalEmbedding", x, self.max_len, self.embedding_dim)
        return x + embedding(np.arange(length), self.weight)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, embedding_dim={self.embedding_dim}"

# %% [markdown]
# Test 11.10.

# %%
manual_seed(0)
positions = PositionalEmbedding(8, 4)
assert repr(positions) == "PositionalEmbedding(max_len=8, embedding_dim=4)"
assert [(name, p.shape) for name, p in positions.named_parameters()] == [("weight", (8, 4))]
x = Tensor(rng.standard_normal((3, 5, 4)).astype(np.float32), requires_grad=True)
y = positions(x)
assert y.shape == (3, 5, 4) and np.allclose(y.data, x.data + positions.weight.data[:5])
y.backward(Tensor(np.ones((3, 5, 4), dtype=np.float32)))
assert np.array_equal(positions.weight.grad.data[:, 0], [3.0] * 5 + [0.0] * 3), "3 sequences; rows 5..7 unused"
assert np.array_equal(x.grad.data, np.ones((3, 5, 4)))
try:
    positions(np.zeros((1, 9, 4), dtype=np.float32))
    raise AssertionError("9 positions with max_len=8 must raise ValueError")
except ValueError as error:
    print("as expected:", error)
    assert "9" in str(error) and "8" in str(error)

# %% [markdown]
# ## Putting it together: the input layer of a GPT
#
# Token vectors plus positions, for a batch of 32 sequences of 64 characters, as in 13; then a tied
# output layer, a loss, and the backward through both tables.

# %%
manual_seed(0)
vocabulary, width, context = 84, 128, 64
tokens, positions = Embedding(vocabulary, width), PositionalEmbedding(context, width)
head = tt.nn.Linear(width, vocabulary, bias=False)
head.weight = tokens.weight
idx = rng.integers(0, vocabulary, (32, context))
x = positions(tokens(idx))
print(x.shape)
assert x.shape == (32, context, width) and x.dtype == np.float32
logits = head(x)
loss = tt.nn.functional.cross_entropy(logits.reshape(-1, vocabulary), idx.reshape(-1))
loss.backward()
assert tokens.weight.grad.shape == (vocabulary, width) and positions.weight.grad.shape == (context, width)
start = time.perf_counter()
for _ in range(10):
    tokens.weight.grad = None
    tokens(idx).backward(Tensor(np.ones((32, context, width), dtype=np.float32)))
print(f"the token embedding's forward and backward: {(time.perf_counter() - start) / 10 * 1e3:.2f} ms per batch")

# %% [markdown]
# ## An embedding learns: a bigram model of Shakespeare
#
# The smallest language model there is predicts the next character from the current one alone: a
# *bigram* model. Its only layer is an `Embedding(V, V)`: row c holds V scores, the logits of the
# character that follows c. Trained with cross-entropy on pairs (character, next character) from the
# complete works of Shakespeare, the rows become the log-probabilities of what follows each character
# (up to a constant per row), learned one gradient step at a time through your scatter-add: every step,
# each row receives the gradients of all the positions in the batch that hold its character.
#
# The vocabulary is the characters of the text, numbered in sorted order (10's tokenizer does the same
# thing, with more care). The cell (learner-only) samples text from the untrained table (each next
# character drawn from the softmax of the row of the last one: noise), trains for 300 steps of Adam on
# batches of 32 × 64 pairs (under a second: 0.4 to 0.6 s on two cores, idle or shared), and samples
# again. Expect the loss to fall from about 4.8 nats (the random table) to about 2.5, and text with the
# rhythm of words, but few words: a bigram model knows nothing but the previous character. The pictures show the loss, and what the table learned
# about the letters: the probability of each next character (a `q` is followed by a `u`; after a space
# comes the first letter of a word, often a `t`).

# %% tags=["learner-only"]
text = tt.datasets.shakespeare()
characters = sorted(set(text))
V = len(characters)
lookup = np.zeros(128, dtype=np.int64)
lookup[[ord(c) for c in characters]] = np.arange(V)
codes = lookup[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
print(f"{len(codes):,} characters, a vocabulary of {V}")


def sample(scores, length, first="T"):
    """Text from a bigram table of scores (V, V): each next character drawn from the softmax of the row of the
    last one; and the table of those probabilities."""
    scores = scores.astype(np.float64)
    probabilities = np.exp(scores - scores.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    characters_drawn, current = [], lookup[ord(first)]
    for _ in range(length):
        characters_drawn.append(characters[current])
        current = rng.choice(V, p=probabilities[current])
    return "".join(characters_drawn), probabilities


manual_seed(0)
bigram = Embedding(V, V)
print("untrained:", repr(sample(bigram.weight.data, 80)[0]), "\n")
optimizer = tt.optim.Adam(bigram.parameters(), lr=0.1)
batch, length, losses = 32, 64, []
start = time.perf_counter()
for step in range(300):
    offsets = rng.integers(0, len(codes) - length - 1, batch)
    window = codes[offsets[:, None] + np.arange(length + 1)]                  # (32, 65)
    inputs, targets = window[:, :-1], window[:, 1:]
    logits = bigram(inputs)                                                   # (32, 64, V)
    loss = tt.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
    if step % 50 == 0 or step == 299:
        print(f"step {step:3d}: loss {loss.item():.3f}")
print(f"{time.perf_counter() - start:.1f} s\n")
text_sample, probabilities = sample(bigram.weight.data, 400)
print(text_sample)

letters = [lookup[ord(c)] for c in " abcdefghijklmnopqrstuvwxyz"]
figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [1, 1.3]})
left.plot(losses)
left.set_xlabel("step")
left.set_ylabel("cross-entropy (nats)")
left.set_title("training the bigram Embedding(V, V)")
image = right.imshow(probabilities[np.ix_(letters, letters)], cmap="Blues")
labels = ["␣"] + list("abcdefghijklmnopqrstuvwxyz")
right.set_xticks(range(27), labels)
right.set_yticks(range(27), labels)
right.set_xlabel("next character")
right.set_ylabel("character")
right.set_title("P(next | character), learned")
figure.colorbar(image, ax=right)
figure.tight_layout()
plt.show()

# %% [markdown]
# ## What you built, and what comes next
#
# `nn.Embedding`, a lookup whose backward is a scatter-add that sums the gradients of repeated indices
# (the bug of the buffered `+=` avoided, at a speed that does not depend on the vocabulary), refusing
# indices that numpy would have wrapped, masked or reported from deep inside; PyTorch's initialisation and
# `padding_idx`; a pretrained table; and the two ways of telling a model where each token stands. The
# next module, 12, builds attention, the layer that lets each position look at the others; 13 stacks
# both into a GPT: `Embedding(84, 128)` for the characters, a second `Embedding(64, 128)` looked up at the
# positions 0..63 for their places (`PositionalEmbedding`'s table, with the addition written in the GPT's
# forward, where the cache of 13 moves the positions on), and an output layer that can share the token
# table.
