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
# # 01 Tensor
#
# Every deep-learning framework is built on one data structure: the **tensor**, an n-dimensional grid
# of numbers of one type. A batch of 32 greyscale images of 28x28 pixels is a tensor of shape
# `(32, 28, 28)`; the weights of a linear layer from 784 inputs to 10 outputs are a tensor of shape
# `(784, 10)`; a loss is a tensor of shape `()`, a single number.
#
# In this module you build `tinytorch.Tensor`, a thin, fast layer over a numpy array:
#
# | you build | task |
# |---|---|
# | construction and the dtype rule | 01.1 |
# | `shape`, `ndim`, `size`, `dtype`, `stride()`, `is_contiguous()`, `len()` | 01.2 |
# | `repr`, `numpy()`, `item()` | 01.3 |
# | the broadcasting rule | 01.4 |
# | `+ - * / **` and unary `-` | 01.5 |
# | `exp`, `log`, `sqrt` | 01.6 |
# | `@` (matrix product, batched) | 01.7 |
# | `sum`, `mean`, `max` with `axis` and `keepdims` | 01.8, 01.9, 01.10 |
# | `reshape`, `permute` (and with it `transpose`, `.T`) | 01.11, 01.12 |
# | indexing `t[...]` | 01.13 |
# | the factories `zeros`, `ones`, `randn`, `arange` | 01.14 |
#
# numpy does the arithmetic. Your job is the framework around it: which dtype a tensor gets, which
# shapes may meet, what an error says, and one table through which every operator method of `Tensor`
# passes, so that module 02 can teach each operation its derivative without touching this file.
#
# **How to work.** Every code cell that starts with `#| export` becomes part of the package
# `tinytorch/core/tensor.py`<!-- tito --> when you run `tito export 01`<!-- /tito -->. Fill in each
# `### BEGIN YOUR SOLUTION` ... `### END YOUR SOLUTION` region, run the cell, then run the small test
# cell after it. Until you have filled in a region, its test cell fails with `NotImplementedError`
# naming the task: that is expected. <!-- tito -->`tito test 01` runs the hidden suite and tells you what is
# wrong.<!-- /tito --><!-- course Your work is graded when you submit this notebook; the feedback shows
# each task's score. -->
#
# No Python loops over elements anywhere: a tensor may hold millions of numbers, and a Python loop
# handles a few million per second where numpy handles a billion.

# %%
#| default_exp core.tensor
import numpy as np

# %% [markdown]
# The package file starts with its imports and its public names. `__all__` is what
# `import tinytorch as tt` puts into `tt`, with PyTorch's names: `tt.Tensor`, `tt.as_tensor`,
# `tt.zeros`, ... Everything else (the op table, the kernels) stays importable by its full path
# (`from tinytorch.core.tensor import matmul_kernel`), which is how module 02 and the grader reach it.

# %%
#| export
from typing import Callable

import numpy as np

__all__ = ["Tensor", "as_tensor", "zeros", "ones", "randn", "arange", "manual_seed"]

# %% [markdown]
# ## One table for every operator
#
# `a + b` on two tensors does not call numpy directly. `Tensor.__add__` looks up the op named `"add"`
# in a table, `_OPS`, and calls whatever is registered there:
#
# ```
# a + b  ->  Tensor.__add__  ->  _OPS["add"](a, b)  ->  Tensor
# ```
#
# In this module each entry of the table is a plain **kernel**: a numpy function from arrays to an
# array, such as `add_kernel(a, b) = np.add(a, b)`, registered with the decorator `@register_kernel`.
# The op's name comes from the kernel's: `add_kernel` is the op `"add"`, so every op is spelled one way.
# The decorator unwraps the operands (a Tensor gives its array, a Python number stays a Python number)
# and wraps the result in a new Tensor.
#
# Why the indirection? In module 02 every operation needs a second half, its derivative. Module 02
# registers, under the same name, a version of add that also records the operation in a graph, and
# from then on every `a + b` is differentiable. It never edits this file and never replaces a method of
# `Tensor` from outside (monkey-patching); the table is the one, documented place where a later module
# upgrades the operators of this one. PyTorch's dispatcher works the same way: the autograd layer wraps
# the kernels. (Operations that later modules add, such as `relu` in 03, are born differentiable and
# have no plain kernel to upgrade: they call their op directly, without the table.)
#
# `backward()` is not an operator. Its engine arrives with module 02, which plugs it in with
# `register_autograd(engine)`; until then, calling it says so.
#
# This cell is given: read it, you will use `register_kernel` for every kernel you write.

# %%
#| export
class _OpTable(dict):
    """op name -> implementation `impl(*operands, **params) -> Tensor`; a missing op says so."""

    def __missing__(self, name):
        raise NotImplementedError(f"no op named {name!r} is registered: run the cell that defines it "
                                  f"(or export the module that does)")


_OPS: dict[str, Callable[..., "Tensor"]] = _OpTable()


def register_op(name: str, impl: Callable[..., "Tensor"]) -> None:
    """Make `impl(*operands, **params) -> Tensor` the implementation of op `name` (replacing any earlier one)."""
    _OPS[name] = impl


def _as_array(operand):
    """Tensor -> its array; Python numbers stay Python numbers (numpy treats them as weakly typed)."""
    if isinstance(operand, Tensor):
        return operand.data
    if isinstance(operand, (bool, int, float, complex)):
        return operand
    return Tensor(operand).data


def register_kernel(kernel):
    """Decorator: register numpy kernel `name_kernel(*arrays, **params) -> array` as op "name"; returns
    the kernel unchanged."""
    def impl(*operands, **params):
        return Tensor(kernel(*[_as_array(operand) for operand in operands], **params))
    register_op(kernel.__name__.removesuffix("_kernel"), impl)
    return kernel


_autograd = None  # the engine behind Tensor.backward(); module 02 plugs it in


def register_autograd(engine: Callable) -> None:
    """Make `engine(tensor, gradient, retain_graph, create_graph)` what `Tensor.backward()` runs."""
    global _autograd
    _autograd = engine


def _as_tuple(args: tuple) -> tuple:
    """`f(2, 3)` and `f((2, 3))` both mean (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


# %% [markdown]
# ## The Tensor
#
# A `Tensor` holds its numbers in `self.data`, a numpy array, plus three attributes that module 02
# uses: `requires_grad` (should gradients flow into this tensor?), `grad` (the gradient, once computed)
# and `grad_fn` (the operation that produced this tensor; `None` for a tensor you made yourself, a
# *leaf*). The small methods around them (`is_leaf`, `requires_grad_()`, `retain_grad()`, `detach()`)
# are given; module 02 explains what they are for.
#
# ### The dtype rule (task 01.1)
#
# Every element of a tensor has the same type, its **dtype**. `Tensor(data, dtype=None)` chooses it
# like `torch.tensor`:
#
# | `data` | dtype |
# |---|---|
# | `dtype=` given | that dtype (cast) |
# | a numpy array or numpy scalar | its own dtype, unchanged (no copy needed) |
# | a Tensor | its array's dtype |
# | Python floats, or lists mixing floats and ints | **float32** |
# | Python ints, or lists of them | int64 |
# | Python bools, or lists of them | bool |
#
# Why float32 and not numpy's float64? Half the memory and roughly twice the speed (twice as many
# numbers per cache line and per SIMD instruction), and seven significant digits are plenty for
# weights that gradient descent only ever nudges approximately. Every deep-learning framework defaults
# to it. Integers default to int64 because they are mostly indices and counts, which must not overflow.
#
# `np.asarray(data)` does most of the work: it turns nested lists into an array (float64 for Python
# floats, int64 for ints, bool for bools) and returns an existing array as it is. What remains is the
# float32 rule for data that did not arrive as numpy.
#
# ### Shape and strides (task 01.2)
#
# `shape` is the size along each axis, `ndim` the number of axes, `size` the number of elements (the
# product of the shape; 1 for a 0-d tensor, whose shape is `()`), `len(t)` the size of the first axis
# (a 0-d tensor has no length: `TypeError`).
#
# Memory is one-dimensional. A 2x3 array lives as 6 numbers in a row, and the **strides** say how far
# to jump in memory to take one step along each axis. numpy counts strides in bytes; PyTorch's
# `stride()` counts them in elements, and so does ours: divide by `itemsize`.
#
# ```
# values   [[0, 1, 2],       memory  0 1 2 3 4 5       stride() == (3, 1)
#           [3, 4, 5]]                 one row = 3 elements on, one column = 1 on
# ```
#
# A tensor is **contiguous** when its elements sit in memory in row-major order with no gaps, which
# is what a freshly made array looks like. numpy knows: `array.flags.c_contiguous`.
#
# ### Looking inside (task 01.3)
#
# `repr(t)` shows what a tensor holds, in PyTorch's style, with the dtype always shown (in this course
# it matters):
#
# ```
# tensor([[1., 2.],
#         [3., 4.]], dtype=float32)
# ```
#
# `np.array2string(array, separator=", ", prefix="tensor(")` formats the values (the `prefix` lines up
# the rows below the first). Add `, requires_grad=True` before the closing parenthesis when it is set.
# `t.numpy()` returns the array itself; `t.item()` returns the one number of a one-element tensor as a
# Python `float`, `int` or `bool` (numpy's `array.item()` does this).
#
# The operator methods below are given: each is one lookup in `_OPS`. The class is one cell, since
# Python cannot split a class across cells; your regions for 01.1, 01.2 and 01.3 are in it.

# %%
#| export
class Tensor:
    """An n-dimensional array of one dtype: numpy data plus what autograd needs (requires_grad, grad, grad_fn)."""

    __array_ufunc__ = None  # numpy defers to us: np.float32(2) * t calls t.__rmul__

    def __init__(self, data, dtype=None, requires_grad: bool = False):
        """data: a Tensor, numpy array, Python number or nested list; dtype: a numpy dtype to cast to."""
        ### BEGIN SOLUTION 01.1 Tensor construction
        if isinstance(data, Tensor):
            data = data.data
        if dtype is not None:
            array = np.asarray(data, dtype=dtype)
        elif isinstance(data, np.ndarray):
            array = data
        elif isinstance(data, np.generic):
            array = np.asarray(data)
        else:
            array = np.asarray(data)
            if array.dtype == np.float64:  # Python floats: float32 is the framework default
                array = array.astype(np.float32)
        self.data: np.ndarray = array
        ### END SOLUTION
        self.requires_grad = bool(requires_grad)
        self.grad: "Tensor | None" = None
        self.grad_fn = None  # set by module 02 on the results of operations
        self.retains_grad = False

    @property
    def is_leaf(self) -> bool:
        """True for a tensor no recorded op produced: made by you, or computed without grad."""
        return self.grad_fn is None

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Switch gradient tracking of this leaf on (or off), in place; returns the tensor."""
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_(False) works on leaves only: this tensor was computed by an op "
                               "that records a graph; use detach() for a copy outside the graph")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self) -> None:
        """Keep .grad on this non-leaf tensor after backward() (leaves keep theirs anyway)."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad() on a tensor that does not require grad: no gradient reaches it")
        if self.grad_fn is not None:
            self.retains_grad = True

    # --- shape and strides -------------------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        ### BEGIN SOLUTION 01.2 shape and strides
        return self.data.shape
        ### END SOLUTION

    @property
    def ndim(self) -> int:
        ### BEGIN SOLUTION 01.2 shape and strides
        return self.data.ndim
        ### END SOLUTION

    @property
    def size(self) -> int:
        """Number of elements: the product of the shape."""
        ### BEGIN SOLUTION 01.2 shape and strides
        return self.data.size
        ### END SOLUTION

    @property
    def dtype(self) -> np.dtype:
        ### BEGIN SOLUTION 01.2 shape and strides
        return self.data.dtype
        ### END SOLUTION

    def stride(self, dim: int | None = None):
        """Steps in memory, in elements, per step along each axis (or along axis `dim`)."""
        ### BEGIN SOLUTION 01.2 shape and strides
        strides = tuple(step // self.data.itemsize for step in self.data.strides)
        return strides if dim is None else strides[dim]
        ### END SOLUTION

    def is_contiguous(self) -> bool:
        """True when the elements lie in memory in row-major order without gaps."""
        ### BEGIN SOLUTION 01.2 shape and strides
        return bool(self.data.flags.c_contiguous)
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION 01.2 shape and strides
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]
        ### END SOLUTION

    # --- looking inside ----------------------------------------------------------------------------

    def __repr__(self) -> str:
        ### BEGIN SOLUTION 01.3 repr, numpy and item
        values = np.array2string(self.data, separator=", ", prefix="tensor(")
        flag = ", requires_grad=True" if self.requires_grad else ""
        return f"tensor({values}, dtype={self.data.dtype}{flag})"
        ### END SOLUTION

    def numpy(self) -> np.ndarray:
        """The numpy array behind this tensor (not a copy)."""
        ### BEGIN SOLUTION 01.3 repr, numpy and item
        return self.data
        ### END SOLUTION

    def item(self):
        """The value of a one-element tensor as a Python number."""
        ### BEGIN SOLUTION 01.3 repr, numpy and item
        return self.data.item()
        ### END SOLUTION

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self.data, dtype=dtype) if copy is not True else np.array(self.data, dtype=dtype)

    # --- operations: each one goes through the op table --------------------------------------------

    def __add__(self, other): return _OPS["add"](self, other)
    def __radd__(self, other): return _OPS["add"](other, self)
    def __sub__(self, other): return _OPS["sub"](self, other)
    def __rsub__(self, other): return _OPS["sub"](other, self)
    def __mul__(self, other): return _OPS["mul"](self, other)
    def __rmul__(self, other): return _OPS["mul"](other, self)
    def __truediv__(self, other): return _OPS["div"](self, other)
    def __rtruediv__(self, other): return _OPS["div"](other, self)
    def __pow__(self, other): return _OPS["pow"](self, other)
    def __rpow__(self, other): return _OPS["pow"](other, self)
    def __neg__(self): return _OPS["neg"](self)
    def __matmul__(self, other): return _OPS["matmul"](self, other)
    def __rmatmul__(self, other): return _OPS["matmul"](other, self)

    def exp(self): return _OPS["exp"](self)
    def log(self): return _OPS["log"](self)
    def sqrt(self): return _OPS["sqrt"](self)

    def sum(self, axis=None, keepdims: bool = False):
        return _OPS["sum"](self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims: bool = False):
        return _OPS["mean"](self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims: bool = False):
        return _OPS["max"](self, axis=axis, keepdims=keepdims)

    def reshape(self, *shape):
        """t.reshape(2, 3) or t.reshape((2, 3)); one size may be -1."""
        return _OPS["reshape"](self, shape=_as_tuple(shape))

    def permute(self, *dims):
        """Axis i of the result is axis dims[i] of this tensor."""
        return _OPS["permute"](self, dims=_as_tuple(dims))

    def transpose(self, dim0: int, dim1: int):
        """Swap two axes."""
        dims = list(range(self.data.ndim))
        dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
        return _OPS["permute"](self, dims=tuple(dims))

    @property
    def T(self):
        """All axes reversed (numpy's .T)."""
        return _OPS["permute"](self, dims=tuple(reversed(range(self.data.ndim))))

    def __getitem__(self, index):
        return _OPS["getitem"](self, index=unwrap_index(index))

    def detach(self) -> "Tensor":
        """A new leaf sharing this tensor's data, outside any graph."""
        return Tensor(self.data)

    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into .grad of every leaf that requires grad (the engine of module 02)."""
        if _autograd is None:
            raise NotImplementedError("backward() arrives with module 02_autograd: export 02 to use it")
        _autograd(self, gradient, retain_graph, create_graph)


def as_tensor(data, dtype=None) -> Tensor:
    """`data` as a Tensor: a Tensor of the wanted dtype is returned as it is (no copy), anything else is
    made into one (arrays keep their memory when the dtype allows)."""
    if isinstance(data, Tensor) and (dtype is None or data.dtype == np.dtype(dtype)):
        return data
    return Tensor(data, dtype=dtype)


# %% [markdown]
# Test 01.1: the dtype rule.

# %%
assert Tensor([1.5, 2.0]).data.dtype == np.float32
assert Tensor([[1, 2], [3, 4]]).data.dtype == np.int64
assert Tensor([1, 2.5]).data.dtype == np.float32
assert Tensor(3.0).data.shape == () and Tensor(3.0).data.dtype == np.float32
assert Tensor([True, False]).data.dtype == np.bool_
assert Tensor(np.zeros(3, dtype=np.float64)).data.dtype == np.float64  # numpy arrays keep their dtype
assert Tensor([1, 2], dtype=np.float32).data.dtype == np.float32
assert Tensor(Tensor([1.0, 2.0])).data.tolist() == [1.0, 2.0]
assert Tensor([1.0]).requires_grad is False and Tensor([1.0], requires_grad=True).requires_grad is True
t = Tensor([1.0, 2.0])
assert as_tensor(t) is t and as_tensor([1, 2]).dtype == np.int64 and as_tensor(t, dtype=np.float64).dtype == np.float64
assert t.requires_grad_() is t and t.requires_grad and t.is_leaf

# %% [markdown]
# Test 01.2: shape and strides.

# %%
t = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
assert t.shape == (2, 3, 4) and t.ndim == 3 and t.size == 24 and len(t) == 2
assert t.dtype == np.float32
assert t.stride() == (12, 4, 1) and t.stride(1) == 4
assert t.is_contiguous()
assert Tensor(5.0).shape == () and Tensor(5.0).size == 1

# %% [markdown]
# Test 01.3: repr, numpy and item.

# %%
print(repr(Tensor([[1.0, 2.0], [3.0, 4.0]])))
assert repr(Tensor([1.0, 2.0])) == "tensor([1., 2.], dtype=float32)"
assert repr(Tensor([1, 2])) == "tensor([1, 2], dtype=int64)"
assert repr(Tensor([1.0], requires_grad=True)) == "tensor([1.], dtype=float32, requires_grad=True)"
assert isinstance(Tensor(np.ones((2, 2))).numpy(), np.ndarray)
assert Tensor([[2.5]]).item() == 2.5 and type(Tensor([[2.5]]).item()) is float
assert type(Tensor(7).item()) is int

# %% [markdown]
# ## Views: same memory, new shape
#
# Many tensor operations move no numbers at all. `reshape`, `transpose` and basic slicing make a
# **view**: a new array object with its own shape and strides over the *same* memory. Watch the
# strides (here in elements, as `stride()` gives them) and `np.shares_memory`:

# %%
def strides_in_elements(array):
    return tuple(step // array.itemsize for step in array.strides)

base = np.arange(6, dtype=np.float32)  # memory: 0 1 2 3 4 5
grid = base.reshape(2, 3)                # [[0 1 2] [3 4 5]]
flipped = grid.T                         # [[0 3] [1 4] [2 5]]
every_other = grid[:, ::2]               # [[0 2] [3 5]]
for name, view in [("base", base), ("grid", grid), ("grid.T", flipped), ("grid[:, ::2]", every_other)]:
    print(f"{name:13} shape {str(view.shape):7} strides {str(strides_in_elements(view)):7} "
          f"shares memory with base: {np.shares_memory(view, base)}  contiguous: {view.flags.c_contiguous}")

grid[0, 0] = 100.0                       # writing through one view ...
assert base[0] == 100.0 and flipped[0, 0] == 100.0  # ... changes what every view sees

# %% [markdown]
# * `reshape` of a contiguous array keeps the memory and recomputes strides: (2, 3) gets (3, 1).
# * The transpose swaps shape *and* strides: (3, 1) becomes (1, 3). No element moves, but walking the
#   result row by row now jumps through memory, so it is no longer contiguous. Reshaping such a tensor
#   cannot be a view; numpy (and your `reshape`) then copies.
# * The slice `[:, ::2]` multiplies the stride of the last axis by 2: the elements in between are
#   skipped, still in the same memory.
#
# Views make these operations O(1) instead of O(n), which matters when the tensors are large. The
# price: writing into a view writes into the original. Our tensors behave the same: `Tensor(array)`
# keeps the array (no copy), and `reshape`, `permute` and slicing return views whenever numpy does.

# %% [markdown]
# ## Broadcasting (task 01.4)
#
# Adding a bias of shape `(3,)` to a batch of shape `(4, 3)` should add the bias to every row, without
# anyone writing a loop or copying the bias four times. **Broadcasting** is the rule that says which
# shapes may meet in an elementwise operation and what shape comes out:
#
# 1. Line the shapes up on the right; pad the shorter one with 1s on the left.
# 2. Along each axis the two sizes must be equal, or one of them must be 1.
# 3. The result takes the larger size on each axis; an axis of size 1 is stretched (virtually, with
#    stride 0: nothing is copied).
#
# Worked example, `(8, 1, 6, 1)` with `(7, 1, 5)`:
#
# ```
# a       8  1  6  1
# b          7  1  5      pad:  1  7  1  5
# result  8  7  6  5      per axis: 8|1 -> 8, 1|7 -> 7, 6|1 -> 6, 1|5 -> 5
# ```
#
# and `(2, 3)` with `(4,)` fails on the last axis: 3 and 4 are different and neither is 1.
#
# numpy applies this rule for us in every ufunc. Your `broadcast_shape` applies it by hand (a loop
# over the *axes*, a handful of steps, not over elements), and the elementwise kernels call it when
# numpy refuses, to explain the refusal in terms of the two shapes. Module 02 needs the same rule
# backwards: a gradient flowing into a broadcast operand must be summed over the stretched axes.

# %%
#| export
def broadcast_shape(shape_a: tuple, shape_b: tuple, op: str = "broadcast") -> tuple:
    """The shape numpy broadcasting gives two shapes: align right, sizes equal or 1.
    ValueError naming `op` and both shapes when they do not broadcast."""
    ### BEGIN SOLUTION 01.4 broadcasting
    shape_a, shape_b = tuple(shape_a), tuple(shape_b)
    ndim = max(len(shape_a), len(shape_b))
    padded_a = (1,) * (ndim - len(shape_a)) + shape_a
    padded_b = (1,) * (ndim - len(shape_b)) + shape_b
    result = []
    for size_a, size_b in zip(padded_a, padded_b):
        if size_a == size_b or size_b == 1:
            result.append(size_a)
        elif size_a == 1:
            result.append(size_b)
        else:
            raise ValueError(f"{op}: shapes {shape_a} and {shape_b} cannot be broadcast together")
    return tuple(result)
    ### END SOLUTION


# %% [markdown]
# Test 01.4.

# %%
assert broadcast_shape((8, 1, 6, 1), (7, 1, 5)) == (8, 7, 6, 5)
assert broadcast_shape((4, 3), (3,)) == (4, 3)
assert broadcast_shape((), (2, 2)) == (2, 2)
assert broadcast_shape((0, 1), (1, 5)) == (0, 5)
try:
    broadcast_shape((2, 3), (4,), "add")
    raise AssertionError("(2, 3) and (4,) must not broadcast")
except ValueError as error:
    assert str(error) == "add: shapes (2, 3) and (4,) cannot be broadcast together"

# %% [markdown]
# ## Elementwise operations (task 01.5)
#
# `a + b`, `a - b`, `a * b`, `a / b`, `a ** b` apply to each pair of elements, broadcasting first;
# `-a` to each element. A numpy *ufunc* (`np.add`, `np.subtract`, `np.multiply`, `np.divide`,
# `np.power`, `np.negative`) does exactly this, in C, for arrays and Python numbers alike.
#
# **Which dtype comes out?** numpy's promotion rules (NEP 50, numpy 2):
#
# * two arrays: the larger type wins: float32 with float64 gives float64, int64 with float32 gives
#   float64 (float32 cannot hold every int64);
# * an array with a *Python* number: the array's type wins as long as the kind fits, so
#   `float32 tensor * 2.5` stays float32, and `int64 tensor * 2.5` becomes float64 (an int cannot
#   hold 2.5);
# * true division of integers gives float64.
#
# This is why `register_kernel` hands Python numbers to your kernels unchanged: wrapped in an array
# they would be float64 and would promote every float32 tensor they touch.
#
# First the helper all five binary kernels share: call the ufunc; if numpy refuses with a
# `ValueError`, ask `broadcast_shape` whether the shapes are to blame (it raises the error that names
# both), and otherwise let numpy's own error stand (`raise` with no argument re-raises it). Errors are
# part of the interface: "add: shapes (2, 3) and (4,) cannot be broadcast together" tells a learner
# what to fix; "operands could not be broadcast together with shapes (2,3) (4,)" from deep inside a
# model does not say which operation failed.
#
# Then each kernel, in its own cell, passes its name and its ufunc to the helper.

# %%
#| export
def binary_elementwise(op: str, ufunc, a, b):
    """ufunc(a, b) with broadcasting; ValueError naming `op` and both shapes when the shapes do not broadcast."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    try:
        return ufunc(a, b)
    except ValueError:
        broadcast_shape(np.shape(a), np.shape(b), op)  # raises if the shapes are to blame
        raise
    ### END SOLUTION


# %%
#| export
@register_kernel
def add_kernel(a, b):
    """a + b, broadcasting; a, b: arrays or Python numbers."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    return binary_elementwise("add", np.add, a, b)
    ### END SOLUTION


# %%
#| export
@register_kernel
def sub_kernel(a, b):
    """a - b, broadcasting."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    return binary_elementwise("sub", np.subtract, a, b)
    ### END SOLUTION


# %%
#| export
@register_kernel
def mul_kernel(a, b):
    """a * b, broadcasting."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    return binary_elementwise("mul", np.multiply, a, b)
    ### END SOLUTION


# %%
#| export
@register_kernel
def div_kernel(a, b):
    """a / b (true division), broadcasting."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    return binary_elementwise("div", np.divide, a, b)
    ### END SOLUTION


# %%
#| export
@register_kernel
def pow_kernel(a, b):
    """a ** b, broadcasting."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    return binary_elementwise("pow", np.power, a, b)
    ### END SOLUTION


# %%
#| export
@register_kernel
def neg_kernel(a):
    """-a."""
    ### BEGIN SOLUTION 01.5 elementwise ops
    return np.negative(a)
    ### END SOLUTION


# %% [markdown]
# Test 01.5.

# %%
x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
bias = Tensor([10.0, 20.0, 30.0])
assert (x + bias).data.tolist() == [[11.0, 22.0, 33.0], [14.0, 25.0, 36.0]]
assert (x - 1).data.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
assert (2 * x).dtype == np.float32 and (x * 2.5).dtype == np.float32
assert (1 / Tensor([2.0, 4.0])).data.tolist() == [0.5, 0.25]
assert (Tensor([2.0, 3.0]) ** 2).data.tolist() == [4.0, 9.0] and (2 ** Tensor([3])).data.tolist() == [8]
assert (-x).data[1, 2] == -6.0
assert (Tensor([1, 2]) / Tensor([2, 2])).dtype == np.float64  # numpy: true division of ints
try:
    x + Tensor([1.0, 2.0, 3.0, 4.0])
    raise AssertionError("(2, 3) + (4,) must fail")
except ValueError as error:
    assert str(error) == "add: shapes (2, 3) and (4,) cannot be broadcast together"

# %% [markdown]
# ## exp, log, sqrt (task 01.6)
#
# Elementwise functions of one tensor, each a numpy ufunc. Outside their domain (`log` of a negative
# number, `sqrt` of a negative number) numpy returns `nan` and warns; so will we. An integer tensor
# gives float64, as in numpy.

# %%
#| export
@register_kernel
def exp_kernel(a):
    """e ** a, elementwise."""
    ### BEGIN SOLUTION 01.6 exp, log and sqrt
    return np.exp(a)
    ### END SOLUTION


# %%
#| export
@register_kernel
def log_kernel(a):
    """Natural logarithm, elementwise."""
    ### BEGIN SOLUTION 01.6 exp, log and sqrt
    return np.log(a)
    ### END SOLUTION


# %%
#| export
@register_kernel
def sqrt_kernel(a):
    """Square root, elementwise."""
    ### BEGIN SOLUTION 01.6 exp, log and sqrt
    return np.sqrt(a)
    ### END SOLUTION


# %% [markdown]
# Test 01.6.

# %%
assert np.allclose(Tensor([0.0, 1.0]).exp().data, [1.0, np.e]) and Tensor([0.0]).exp().dtype == np.float32
assert np.allclose(Tensor([1.0, np.e]).log().data, [0.0, 1.0])
assert Tensor([4.0, 9.0]).sqrt().data.tolist() == [2.0, 3.0]

# %% [markdown]
# ## Matrix product (task 01.7)
#
# `a @ b` for matrices `a: (n, k)` and `b: (k, m)` gives `(n, m)`, with
# `out[i, j] = sum_l a[i, l] * b[l, j]`. The inner sizes must agree.
#
# Deep learning multiplies whole **batches** of matrices at once: attention computes `(B, T, d) @
# (B, d, T)` for every sequence in a batch. `np.matmul` treats every axis but the last two as batch
# axes, and those broadcast: `(5, 2, 3) @ (3, 4)` multiplies each of the 5 matrices by the same
# `(3, 4)` matrix and gives `(5, 2, 4)`. A 1-d operand is a vector: `(k,)` on the left acts as
# `(1, k)`, on the right as `(k, 1)`, and that axis is dropped from the result.
#
# ```
# shapes               contracted   result
# (2, 3) @ (3, 4)      3 == 3       (2, 4)
# (5, 2, 3) @ (3, 4)   3 == 3       (5, 2, 4)       batch (5,) with ()
# (7, 1, 2, 3) @ (6, 3, 4)          (7, 6, 2, 4)    batch (7, 1) with (6,)
# (3,) @ (3, 4)                     (4,)
# (3,) @ (3,)                       ()              the dot product
# ```
#
# `np.matmul` computes it (with BLAS: fast). Your kernel's job is the error: before calling numpy,
# check that both operands have at least one axis and that the contracted sizes agree, and raise a
# `ValueError` that names both shapes, for example
# `"matmul: shapes (2, 3) and (4, 5) are not aligned (3 != 4)"`. If the batch axes do not broadcast,
# numpy raises; turn that into a `ValueError` naming both shapes too.

# %%
#| export
@register_kernel
def matmul_kernel(a, b):
    """a @ b like np.matmul: (..., n, k) @ (..., k, m) -> (..., n, m); 1-d operands are vectors."""
    ### BEGIN SOLUTION 01.7 matmul
    shape_a, shape_b = np.shape(a), np.shape(b)
    if len(shape_a) == 0 or len(shape_b) == 0:
        raise ValueError(f"matmul: shapes {shape_a} and {shape_b}: both operands need at least one dimension")
    inner_a, inner_b = shape_a[-1], shape_b[-2 if len(shape_b) > 1 else -1]
    if inner_a != inner_b:
        raise ValueError(f"matmul: shapes {shape_a} and {shape_b} are not aligned ({inner_a} != {inner_b})")
    try:
        return np.matmul(a, b)
    except ValueError:
        raise ValueError(f"matmul: shapes {shape_a} and {shape_b}: the batch dimensions "
                         f"{shape_a[:-2]} and {shape_b[:-2]} cannot be broadcast together") from None
    ### END SOLUTION


# %% [markdown]
# Test 01.7.

# %%
a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
assert (a @ Tensor(np.eye(3, dtype=np.float32))).data.tolist() == a.data.tolist()
assert (Tensor(np.ones((5, 2, 3), np.float32)) @ Tensor(np.ones((3, 4), np.float32))).shape == (5, 2, 4)
assert (Tensor([1.0, 2.0]) @ Tensor([3.0, 4.0])).item() == 11.0
try:
    a @ Tensor(np.ones((4, 5), np.float32))
    raise AssertionError("(2, 3) @ (4, 5) must fail")
except ValueError as error:
    assert str(error) == "matmul: shapes (2, 3) and (4, 5) are not aligned (3 != 4)"

# %% [markdown]
# ## Reductions (tasks 01.8, 01.9, 01.10)
#
# A reduction combines many elements into one. `axis` says which axes disappear:
#
# ```
# x = [[1, 2, 3],        x.sum()        -> 21              shape ()
#      [4, 5, 6]]        x.sum(axis=0)  -> [5, 7, 9]       shape (3,)    down the columns
#                        x.sum(axis=1)  -> [6, 15]         shape (2,)    along the rows
#                        x.sum(axis=-1) -> [6, 15]         negative axes count from the end
#                        x.sum(axis=(0, 1)) -> 21          a tuple reduces several axes
#                        x.sum(axis=1, keepdims=True) -> [[6], [15]]  shape (2, 1)
# ```
#
# `keepdims=True` keeps each reduced axis with size 1, so that the result broadcasts against the
# input: `x - x.mean(axis=1, keepdims=True)` centres each row. (Without keepdims, shape `(2,)` would
# line up with the *last* axis of `(2, 3)` and fail.)
#
# Empty axes follow numpy: the sum over an axis of size 0 is 0 (the empty sum), the mean is `nan`
# (0 / 0), and the max is an error, since there is no largest element of nothing.
#
# `sum` and `max` are one numpy call each (`np.sum`, `np.max`); they return numpy's dtype (the sum of
# an int64 or bool tensor is int64). Write `mean` as what it is, the sum divided by the number of
# elements reduced: the product of the sizes of the reduced axes (all axes when `axis` is `None`).
# Dividing by a Python int keeps float32 float32; an integer tensor's mean is float64, as in numpy.
# When that count is 0, numpy warns about 0 / 0; `np.errstate(invalid="ignore")` silences it, since
# `nan` is the documented answer.

# %%
#| export
@register_kernel
def sum_kernel(a, axis=None, keepdims: bool = False):
    """Sum over `axis` (None: all; int or tuple; negative counts from the end)."""
    ### BEGIN SOLUTION 01.8 sum
    return np.sum(a, axis=axis, keepdims=keepdims)
    ### END SOLUTION


# %% [markdown]
# Test 01.8.

# %%
x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
assert x.sum().item() == 21.0 and x.sum().shape == () and x.sum().dtype == np.float32
assert x.sum(axis=0).data.tolist() == [5.0, 7.0, 9.0]
assert x.sum(axis=-1, keepdims=True).shape == (2, 1)
assert x.sum(axis=(0, 1)).item() == 21.0
assert Tensor(np.zeros((0, 3), np.float32)).sum(axis=0).data.tolist() == [0.0, 0.0, 0.0]

# %%
#| export
@register_kernel
def mean_kernel(a, axis=None, keepdims: bool = False):
    """Mean over `axis`: sum / number of elements reduced."""
    ### BEGIN SOLUTION 01.9 mean
    total = np.sum(a, axis=axis, keepdims=keepdims)  # also checks that the axes exist
    shape = np.shape(a)
    axes = range(len(shape)) if axis is None else np.atleast_1d(axis).tolist()
    count = 1
    for ax in axes:
        count *= shape[ax]
    if count == 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / count
    return total / count
    ### END SOLUTION


# %% [markdown]
# Test 01.9.

# %%
x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
assert x.mean().item() == 3.5 and x.mean().dtype == np.float32
assert x.mean(axis=1).data.tolist() == [2.0, 5.0]
assert (x - x.mean(axis=1, keepdims=True)).data.tolist() == [[-1.0, 0.0, 1.0], [-1.0, 0.0, 1.0]]
assert Tensor([1, 2]).mean().dtype == np.float64
assert np.isnan(Tensor(np.zeros((0, 2), np.float32)).mean(axis=0).data).all()

# %%
#| export
@register_kernel
def max_kernel(a, axis=None, keepdims: bool = False):
    """Largest element over `axis` (values only); ValueError over an empty axis."""
    ### BEGIN SOLUTION 01.10 max
    return np.max(a, axis=axis, keepdims=keepdims)
    ### END SOLUTION


# %% [markdown]
# Test 01.10.

# %%
x = Tensor([[1.0, 9.0, 3.0], [4.0, 5.0, 6.0]])
assert x.max().item() == 9.0
assert x.max(axis=0).data.tolist() == [4.0, 9.0, 6.0]
assert x.max(axis=-1, keepdims=True).data.tolist() == [[9.0], [6.0]]
try:
    Tensor(np.zeros((0, 2), np.float32)).max(axis=0)
    raise AssertionError("max over an empty axis must fail")
except ValueError:
    pass

# %% [markdown]
# ## Reshape (task 01.11)
#
# `t.reshape(3, 2)` (or `t.reshape((3, 2))`: the method accepts both and passes the kernel a tuple)
# lays the same elements, in the same row-major order, into a new shape with the same size. One size
# may be `-1`: it is inferred from the others, so `x.reshape(-1)` flattens and `x.reshape(batch, -1)`
# keeps the first axis.
#
# For a contiguous tensor this is a view (new strides, same memory); otherwise `np.reshape` copies.
# Your kernel's job is again the error: when the sizes cannot match, raise a `ValueError` naming both
# shapes, for example `"reshape: cannot reshape a tensor of shape (2, 3) into shape (4,)"`.

# %%
#| export
@register_kernel
def reshape_kernel(a, shape: tuple):
    """a's elements in row-major order, laid out in `shape` (one entry may be -1); a view when a is contiguous."""
    ### BEGIN SOLUTION 01.11 reshape
    try:
        return np.reshape(a, shape)
    except ValueError:
        raise ValueError(f"reshape: cannot reshape a tensor of shape {np.shape(a)} into shape {tuple(shape)}") from None
    ### END SOLUTION


# %% [markdown]
# Test 01.11.

# %%
x = Tensor(np.arange(6, dtype=np.float32))
assert x.reshape(2, 3).shape == (2, 3) and x.reshape((3, 2)).shape == (3, 2)
assert x.reshape(-1, 2).shape == (3, 2) and x.reshape(2, 3).reshape(-1).data.tolist() == list(range(6))
assert np.shares_memory(x.reshape(2, 3).data, x.data)  # a view
try:
    x.reshape(4, 2)
    raise AssertionError("6 elements cannot have shape (4, 2)")
except ValueError as error:
    assert "(6,)" in str(error) and "(4, 2)" in str(error)

# %% [markdown]
# ## Permute, transpose, .T (task 01.12)
#
# `t.permute(2, 0, 1)` reorders the axes: axis `i` of the result is axis `dims[i]` of `t`. A tensor of
# shape `(B, H, W)` permuted with `(2, 0, 1)` has shape `(W, B, H)`. Like the transpose above it is a
# view: shape and strides are permuted together, nothing is copied (`np.transpose(a, dims)`).
#
# Given on top of it: `t.transpose(0, 1)` swaps two axes (PyTorch's meaning), and `t.T` reverses all
# axes (numpy's). Both call the op "permute", so module 02 writes one derivative for all three.
#
# Check `dims` before calling numpy: it must name every axis exactly once (negative numbers count from
# the end). Otherwise raise a `ValueError` that names `dims` and the tensor's shape.

# %%
#| export
@register_kernel
def permute_kernel(a, dims: tuple):
    """a with its axes reordered: axis i of the result is axis dims[i] of a (a view)."""
    ### BEGIN SOLUTION 01.12 permute
    ndim = np.ndim(a)
    axes = tuple(d + ndim if -ndim <= d < 0 else d for d in dims)
    if sorted(axes) != list(range(ndim)):
        raise ValueError(f"permute: dims {tuple(dims)} are not a permutation of the axes of a tensor "
                         f"of shape {np.shape(a)}")
    return np.transpose(a, axes)
    ### END SOLUTION


# %% [markdown]
# Test 01.12.

# %%
x = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
assert x.permute(2, 0, 1).shape == (4, 2, 3) and x.permute((2, 0, 1)).stride() == (1, 12, 4)
assert x.transpose(0, 2).shape == (4, 3, 2) and x.transpose(-1, 0).shape == (4, 3, 2)
assert x.T.shape == (4, 3, 2) and not x.T.is_contiguous()
assert x.permute(1, 0, 2).data[2, 1, 3] == x.data[1, 2, 3]
try:
    x.permute(0, 0, 1)
    raise AssertionError("(0, 0, 1) is not a permutation")
except ValueError:
    pass

# %% [markdown]
# ## Indexing (task 01.13)
#
# `t[index]` indexes like numpy:
#
# | index | meaning | result |
# |---|---|---|
# | `t[1]`, `t[-1]` | one position on the first axis (negative counts from the end) | the axis disappears |
# | `t[1:3]`, `t[::2]` | a slice | a view, strides multiplied by the step |
# | `t[:, 0]` | a tuple: one entry per axis | |
# | `t[None]` | a new axis of size 1 | shape `(1, ...)` |
# | `t[..., 0]` | `...` stands for as many `:` as needed | |
# | `t[[0, 0, 2]]`, `t[np.array(...)]`, `t[Tensor(...)]` | integer arrays pick positions (repeats allowed) | a copy |
#
# `Tensor.__getitem__` is given: it calls `_OPS["getitem"](self, index=unwrap_index(index))`.
# numpy does not know our Tensor, so `unwrap_index` replaces every Tensor in the index (on its own or
# inside a tuple) by its array and leaves everything else as it is. The kernel then indexes.

# %%
#| export
def unwrap_index(index):
    """The index with every Tensor in it (alone or inside a tuple) replaced by its numpy array."""
    ### BEGIN SOLUTION 01.13 indexing
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(item.data if isinstance(item, Tensor) else item for item in index)
    return index
    ### END SOLUTION


# %%
#| export
@register_kernel
def getitem_kernel(a, index):
    """a[index] with numpy's rules: ints, slices, None, Ellipsis, integer arrays."""
    ### BEGIN SOLUTION 01.13 indexing
    return a[index]
    ### END SOLUTION


# %% [markdown]
# Test 01.13.

# %%
x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
assert x[1].data.tolist() == [4.0, 5.0, 6.0, 7.0] and x[-1, -1].item() == 11.0
assert x[:, 1:3].shape == (3, 2) and x[::2].stride() == (8, 1)
assert x[None].shape == (1, 3, 4) and x[..., 0].data.tolist() == [0.0, 4.0, 8.0]
assert x[[0, 0, 2]].shape == (3, 4) and x[Tensor([2, 0])].data[0, 0] == 8.0
assert x[Tensor([0, 1]), Tensor([3, 3])].data.tolist() == [3.0, 7.0]

# %% [markdown]
# ## Factories (task 01.14)
#
# Functions that make new tensors, with PyTorch's names and arguments:
#
# * `zeros(2, 3)` or `zeros((2, 3))`, `ones(...)`: filled with 0 or 1, float32 unless `dtype` says
#   otherwise (`_as_tuple` turns either form into a shape);
# * `randn(2, 3)`: samples of the standard normal distribution (mean 0, standard deviation 1), the
#   usual starting point for weights;
# * `arange(5)` = `[0, 1, 2, 3, 4]`, `arange(2, 8, 2)` = `[2, 4, 6]`: like `np.arange` (the end is not
#   included); int64 when `start`, `end` and `step` are all ints, else float32, unless `dtype` is given.
#
# All random numbers in tinytorch come from one `np.random.Generator`, `default_generator`. Experiments
# must be repeatable: `manual_seed(seed)` resets it, so the same seed gives the same samples.
# `manual_seed` resets the generator *in place* rather than making a new one, so that every module
# holding a reference to `default_generator` sees the reset. Draw with
# `default_generator.standard_normal(shape, dtype=dtype)`: it produces float32 directly, with no
# float64 detour.

# %%
#| export
default_generator = np.random.default_rng()


def manual_seed(seed: int) -> None:
    """Reset the generator behind every random tensor, so that what follows is reproducible."""
    default_generator.bit_generator.state = np.random.default_rng(seed).bit_generator.state


def zeros(*shape, dtype=np.float32, requires_grad: bool = False) -> Tensor:
    """A tensor of 0s: zeros(2, 3) or zeros((2, 3))."""
    ### BEGIN SOLUTION 01.14 factories
    return Tensor(np.zeros(_as_tuple(shape), dtype=dtype), requires_grad=requires_grad)
    ### END SOLUTION


def ones(*shape, dtype=np.float32, requires_grad: bool = False) -> Tensor:
    """A tensor of 1s: ones(2, 3) or ones((2, 3))."""
    ### BEGIN SOLUTION 01.14 factories
    return Tensor(np.ones(_as_tuple(shape), dtype=dtype), requires_grad=requires_grad)
    ### END SOLUTION


def randn(*shape, dtype=np.float32, requires_grad: bool = False) -> Tensor:
    """Standard normal samples (mean 0, std 1) from default_generator."""
    ### BEGIN SOLUTION 01.14 factories
    samples = default_generator.standard_normal(_as_tuple(shape), dtype=dtype)
    return Tensor(samples, requires_grad=requires_grad)
    ### END SOLUTION


def arange(start, end=None, step=1, dtype=None) -> Tensor:
    """start, start + step, ... up to but not including end; arange(n) counts 0..n-1."""
    ### BEGIN SOLUTION 01.14 factories
    if end is None:
        start, end = 0, start
    if dtype is None:
        all_ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = np.int64 if all_ints else np.float32
    return Tensor(np.arange(start, end, step).astype(dtype, copy=False))
    ### END SOLUTION


# %% [markdown]
# Test 01.14.

# %%
assert zeros(2, 3).shape == (2, 3) and zeros((2, 3)).dtype == np.float32 and zeros(2).data.sum() == 0
assert ones(4, dtype=np.int64).data.tolist() == [1, 1, 1, 1]
assert zeros(3, requires_grad=True).requires_grad
assert arange(5).data.tolist() == [0, 1, 2, 3, 4] and arange(5).dtype == np.int64
assert arange(2, 8, 2).data.tolist() == [2, 4, 6] and arange(0, 1, 0.25).dtype == np.float32
manual_seed(0)
first = randn(3, 4)
manual_seed(0)
assert first.shape == (3, 4) and first.dtype == np.float32 and (randn(3, 4).data == first.data).all()
big = randn(100_000)
assert abs(big.data.mean()) < 0.02 and abs(big.data.std() - 1) < 0.02

# %% [markdown]
# ## What you built, and what comes next
#
# A tensor that knows its dtype, shape and strides, makes views instead of copies where it can,
# broadcasts, multiplies batches of matrices, reduces along any axes, and explains itself when shapes
# do not fit. Every operator went through the table `_OPS`:

# %%
print(sorted(_OPS))
x = Tensor([[0.1, 0.2], [0.3, 0.4]], requires_grad=True)
loss = ((x @ x.T).exp().mean(axis=0) - 1).sum()
print(loss)
try:
    loss.backward()
except NotImplementedError as error:
    print("backward:", error)

# %% [markdown]
# `backward` is still missing. In module 02 you write, for each of these operations, its derivative
# beside its forward, register the pair in this same table, and `loss.backward()` fills `x.grad`.
