# %% [markdown]
# # 02 Autograd
#
# In 01 you built a `Tensor` that computes. Here you make it *learn*: every op will remember how its
# result was made, and one call, `loss.backward()`, will fill `.grad` of every parameter with
# d(loss)/d(parameter). That is reverse-mode automatic differentiation, the engine under PyTorch, and it
# is what every later module (layers, losses, optimizers, the GPT) stands on.
#
# What you build goes into `tinytorch/core/autograd.py`:
#
# | piece | what it does |
# |---|---|
# | `Context`, `Function`, `Function.apply` | an op as a `forward` and a `backward` side by side; `apply` records the graph |
# | `topological_sort`, `backward` | the engine: order the graph, walk it in reverse, accumulate gradients, free what the graph saved |
# | `no_grad` | switch graph recording off (evaluation, optimizer updates) |
# | `gradcheck` | compare any backward with finite differences |
# | `unbroadcast` | the one helper that undoes broadcasting in a gradient |
# | `Add`, `Sub`, `Mul`, ..., `GetItem` | one `Function` per op of 01, registered under 01's op name |
#
# You will not edit a line of 01. In 01 every operator looked its op up by name in one table, `_OPS`.
# Registering a `Function` under the same name replaces the plain kernel by a differentiable op:
# `a + b` keeps calling `_OPS["add"](a, b)`, and now lands in `Add.apply`. That table is the one place
# where this module upgrades 01's operators, the way PyTorch's dispatcher lets its autograd layer wrap
# the kernels; `register_autograd(backward)` plugs the engine into `Tensor.backward()`.
#
# **Before you start.** This notebook runs on *your* 01: its first exported cell imports `Tensor` from the
# package that your 01 became. <!-- tito -->Finish 01 (`tito test 01` at full marks), run `tito export 01`,
# and restart this notebook's kernel whenever you export again, so it picks up the new code. Grade this
# module with `tito test 02`, which exports 01 and 02 together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.autograd
import time

import numpy as np

# %%
#| export
import numpy as np

from tinytorch.core.tensor import (
    Tensor, register_op, register_autograd, _as_array,
    add_kernel, sub_kernel, mul_kernel, div_kernel, pow_kernel, neg_kernel, exp_kernel, log_kernel,
    sqrt_kernel, matmul_kernel, sum_kernel, mean_kernel, max_kernel, reshape_kernel, permute_kernel,
    getitem_kernel,
)

__all__ = ["Function", "Context", "backward", "no_grad", "is_grad_enabled", "gradcheck", "GradcheckError"]

# Where the names go: `tt.no_grad` and `tt.is_grad_enabled` at the top, as in PyTorch; the rest in
# `tt.autograd` (`tt.autograd.Function`, `tt.autograd.backward`, `tt.autograd.gradcheck`); the cells
# below say so in their `#| export` lines.

_grad_enabled = True  # False inside `with no_grad():` (task 02.4)


def is_grad_enabled() -> bool:
    """True unless inside a `no_grad()` block."""
    return _grad_enabled

# %% [markdown]
# ## The computation graph
#
# Take `loss = ((x @ w) + b).sum()`. Evaluating it left to right builds a graph whose nodes are
# tensors and whose edges say "was computed from":
#
# ```
#   x ─┐
#      ├─ MatMul ─→ h ─┐
#   w ─┘               ├─ Add ─→ z ─ Sum ─→ loss
#   b ─────────────────┘
# ```
#
# `x`, `w` and `b` are *leaves*: nobody computed them, they were given. `h`, `z` and `loss` remember
# the op that made them in their `grad_fn`: a `Context` that says which `Function` ran, holds what its
# backward will need, and points to the operands it ran on. The graph is recorded as a side effect of
# computing, so it is exactly the computation that happened, loops and `if`s included
# ("define by run").
#
# Only what can carry a gradient enters the graph. Say `x` is data (`requires_grad=False`) and `w`, `b`
# are parameters (`requires_grad=True`): the node of `x @ w` points to `w` and holds `None` where `x`
# would be, so no gradient is ever computed or stored for `x`, and the graph does not keep `x` alive.
# A tensor that requires grad and was not made by a recorded op is a leaf (`t.is_leaf`); its gradient
# lands in `t.grad`.
#
# ## The chain rule in vector form
#
# For a scalar loss L and a tensor y = f(x), write ḡ_y = dL/dy: an array with the shape of y. The chain
# rule says
#
#     ḡ_x[j] = Σ_i ḡ_y[i] · ∂y[i]/∂x[j]        i.e.   ḡ_x = Jᵀ ḡ_y
#
# with J the Jacobian of f. A `backward` never builds J (for a 1000×1000 matmul it would have 10¹²
# entries); it computes the product Jᵀ ḡ_y directly, a *vector-Jacobian product*. For an elementwise
# op J is diagonal and the product is elementwise (`grad_output * f'(x)`); for `y = a @ b` it is two
# matmuls (`grad_output @ bᵀ`, `aᵀ @ grad_output`). Two facts hold for every op:
#
# - the gradient of an operand has the operand's shape (the engine checks it for you);
# - when a tensor is used by several ops, its gradient is the **sum** of what each use sends back
#   (the Σ_i above runs over every path from x to L).
#
# ## `Function`: forward and backward side by side
#
# An op is a subclass of `Function` with two static methods on plain numpy arrays:
#
# - `forward(ctx, *arrays, **params) -> ndarray` computes the result and saves on `ctx` whatever
#   backward needs (`ctx.save_for_backward(a, b)`, or attributes like `ctx.shape = a.shape`);
# - `backward(ctx, grad_output) -> tuple` returns one gradient per operand (an array with that
#   operand's shape, or `None` for "no gradient").
#
# The `Context` (given) is also the node of the graph: the result's `grad_fn`. It knows its
# `function`, its `inputs` (the operands that require grad, `None` in place of every other operand),
# `needs_input_grad` (one bool per operand, so that a backward can skip a gradient nobody wants: the
# exponent of `x ** 2`, the data `x` in `x @ w`), and what forward saved.
#
# `Function.apply(*operands, **params)` is the only place the graph is recorded:
#
# 1. `needs_input_grad`: for each operand, is it a `Tensor` with `requires_grad=True`?
# 2. record = grad mode is on (`_grad_enabled`) and some operand needs a gradient.
# 3. `ctx = Context(cls, inputs, needs_input_grad)`, with `inputs` the operands that need a gradient
#    and `None` for the others when recording (an empty tuple when not: nothing is kept).
# 4. Unwrap the operands with 01's `_as_array` (a `Tensor` gives its `.data`, a Python scalar stays a
#    scalar, exactly as `register_kernel` does), run `cls.forward(ctx, *arrays, **params)` and wrap the
#    result in a `Tensor`.
# 5. When recording: the result gets `requires_grad = True` and `grad_fn = ctx`.

# %%
#| export autograd
class Context:
    """A recorded op: its Function, its inputs (None for operands without grad), needs_input_grad, and
    what forward saved for backward (`save_for_backward(*arrays)`, `saved_tensors`, free attributes)."""

    def __init__(self, function=None, inputs: tuple = (), needs_input_grad: tuple = ()):
        self.function, self.inputs, self.needs_input_grad = function, inputs, needs_input_grad
        self._saved: tuple | None = ()

    def save_for_backward(self, *arrays) -> None:
        self._saved = arrays

    @property
    def saved_tensors(self) -> tuple:
        if self._saved is None:
            raise RuntimeError(f"{self.function.__name__}.backward needs the arrays its forward saved, and an "
                               f"earlier backward() through this graph freed them: to run backward through a "
                               f"graph twice, pass retain_graph=True to the first backward()")
        return self._saved

    def free_saved(self) -> None:
        """Drop what forward saved (the engine does this after the op's backward, unless retain_graph)."""
        if self._saved:
            self._saved = None

    def __repr__(self) -> str:
        return f"<{getattr(self.function, '__name__', 'Function')}Backward>"


class Function:
    """One differentiable op: `forward(ctx, *arrays, **params)` and `backward(ctx, grad_output)`."""

    @staticmethod
    def forward(ctx, *arrays, **params):
        raise NotImplementedError("a Function subclass defines forward(ctx, *arrays, **params)")

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError("a Function subclass defines backward(ctx, grad_output)")

    @classmethod
    def apply(cls, *operands, **params) -> Tensor:
        """Run forward on the operands unwrapped by `_as_array` (Tensor -> its array, Python scalar
        unchanged) with a Context, and wrap the result in a Tensor. When grad mode is on and an operand
        requires grad, the result requires grad and its grad_fn is the Context, whose inputs hold the
        operands that require grad (None for the others)."""
        ### BEGIN SOLUTION 02.1 Function.apply
        arrays, inputs, needs = [], [], []
        for x in operands:
            need = isinstance(x, Tensor) and x.requires_grad
            arrays.append(x.data if isinstance(x, Tensor) else _as_array(x))
            inputs.append(x if need else None)
            needs.append(need)
        record = _grad_enabled and True in needs
        ctx = Context(cls, tuple(inputs) if record else (), tuple(needs))
        result = Tensor(cls.forward(ctx, *arrays, **params))
        if record:
            result.requires_grad = True
            result.grad_fn = ctx
        return result
        ### END SOLUTION

# %% [markdown]
# A first test with an op of our own (the engine does not exist yet, so we only look at the graph).
# Until you fill in `Function.apply`, this cell raises `NotImplementedError`: that is expected.

# %%
class Square(Function):
    """y = x²"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (grad_output * 2 * x,)


x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
y = Square.apply(x)
assert y.data.tolist() == [1.0, 4.0, 9.0] and y.requires_grad and y.grad_fn.function is Square
assert y.grad_fn.inputs == (x,) and y.grad_fn.needs_input_grad == (True,) and not y.is_leaf and x.is_leaf
print(y.grad_fn)
constant = Square.apply(Tensor(np.array([1.0, 2.0])))
assert not constant.requires_grad and constant.grad_fn is None, "no operand requires grad: no graph"
assert Square.apply(Tensor(np.float32(2.0))).dtype == np.float32, "forward's dtype is kept"

# %% [markdown]
# ## Backward is a topological sort walked in reverse
#
# To send gradients back we must visit a tensor only once *every* op that used it has sent its share
# back. An order in which each tensor comes after the tensors it was computed from is a *topological
# order*; walking it in reverse, from `loss` to the leaves, guarantees that.
#
# The tempting alternative, a recursive `backward` that calls itself on each input, goes wrong twice:
#
# - **It is exponential.** It visits a shared tensor once per *path* to it, not once. In
#   `for _ in range(50): y = y + y` each `y` is used twice, so there are 2⁵⁰ paths from the end to
#   `x`; the recursive version never finishes, the topological one does 50 steps.
# - **It overflows the stack.** Python allows about 1000 nested calls; a recurrent network unrolled
#   over a long sequence, or any chain of 100,000 ops, raises `RecursionError`.
#
# So both halves of the engine use an explicit stack and a loop (micrograd's two phases, without its
# recursion):
#
# 1. `topological_sort(root)`: a depth-first search that pushes `(tensor, False)` to say "visit my
#    inputs" and `(tensor, True)` to say "my inputs are done, append me". Each tensor is marked visited
#    the first time, so a shared tensor is expanded once. A tensor's inputs are in
#    `tensor.grad_fn.inputs` (a leaf has no `grad_fn`); skip the `None`s, which stand for operands that
#    need no gradient. Keep the visited tensors as a set of `id(tensor)`: identity is what matters,
#    whatever `==` means for tensors.
# 2. `backward(root, grad)`: walk that order in reverse (below).
#
# `topological_sort` is not part of `tt`'s surface (it is not in `__all__`; PyTorch keeps its graph
# ordering internal too): in the package only `backward` calls it, and the grader reaches it as
# `tinytorch.core.autograd.topological_sort` to test it on its own.

# %%
#| export
def topological_sort(root: Tensor) -> list:
    """Tensors that `root` was computed from and that require grad, each once, every tensor after
    its inputs, `root` last. Iterative: no recursion."""
    ### BEGIN SOLUTION 02.2 topological_sort
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        tensor, inputs_done = stack.pop()
        if inputs_done:
            order.append(tensor)
            continue
        if id(tensor) in visited:
            continue
        visited.add(id(tensor))
        stack.append((tensor, True))
        if tensor.grad_fn is not None:
            for operand in tensor.grad_fn.inputs:
                if operand is not None and id(operand) not in visited:
                    stack.append((operand, False))
    return order
    ### END SOLUTION

# %%
class Times(Function):
    """y = a * b (same shapes)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    @staticmethod
    def backward(ctx, grad_output):
        a, b = ctx.saved_tensors
        return grad_output * b, grad_output * a


a = Tensor(np.array(2.0), requires_grad=True)
b = Square.apply(a)                      # a diamond: b and c both use a, d uses b and c
c = Times.apply(a, Tensor(np.array(3.0)))
d = Times.apply(b, c)
order = topological_sort(d)
assert len(order) == 4 and order[0] is a and order[-1] is d, [repr(t) for t in order]
assert len(topological_sort(a)) == 1
chain, one = a, Tensor(np.array(1.0))
for _ in range(5000):                    # far deeper than Python's recursion limit
    chain = Times.apply(chain, one)
assert len(topological_sort(chain)) == 5001

# %% [markdown]
# ## The backward walk and gradient accumulation
#
# `backward(tensor, gradient=None, retain_graph=None, create_graph=False)`, PyTorch's names, is what
# `tensor.backward(...)` runs (`register_autograd(backward)` below plugs it into 01's `Tensor`):
#
# 1. If `tensor` does not require grad there is nothing to differentiate: raise `RuntimeError`.
# 2. Seed: ḡ = `gradient`, or ones when `gradient` is None. `gradient` arrives as a `Tensor` (or an
#    array): take its array with `np.asarray(gradient)` (01's `Tensor.__array__` makes that work). Ones
#    only make sense for a one-element tensor (d loss / d loss = 1); for any other size PyTorch raises
#    `RuntimeError("grad can be implicitly created only for scalar outputs")` and so do we.
# 3. Keep a dict `id(tensor) -> gradient so far`. Walk the topological order in reverse. For each
#    tensor take its finished gradient; if it is a leaf, accumulate it into `.grad`; otherwise call its
#    Function's backward and **add** each input's gradient into the dict (`+`, never `=`: a tensor used
#    twice gets two contributions).
# 4. After an op's backward has run, free what its forward saved (`ctx.free_saved()`), unless
#    `retain_graph=True`.
#
# `_input_gradients(ctx, grad_output)` (given) calls `ctx.function.backward(ctx, grad_output)` and
# checks what comes back: one gradient per operand, each with its operand's shape. A wrong shape from
# one of your backwards is then reported where it happens, naming the op and both shapes, instead of as
# a broadcasting error three ops later. It returns `None` in place of the gradient of an operand that
# needs none (a Python scalar, a constant tensor), so you can skip those.
#
# **Accumulation.** Only leaves get a `.grad` (as in PyTorch, intermediate results keep
# `.grad = None` unless you ask with `t.retain_grad()`, which the engine honours the same way): a
# `Tensor` of the leaf's dtype. It **accumulates across calls**: a second `backward()` adds to what is
# there. That is what lets you sum gradients over several mini-batches, and it is why a training loop
# must clear the gradients (`p.grad = None`, `optimizer.zero_grad()` in module 06) before each step.
# Forgetting it is one of the classic silent bugs of deep learning: training still runs, on stale
# gradients. Store a new gradient as a C-ordered copy (`np.array(g, dtype=leaf.dtype, order="C")`):
# a gradient that arrives as a transposed view would otherwise make every optimizer update on it
# stride through memory.
#
# **Why a graph is used once.** Every Context holds arrays its backward needs: the inputs of `a * b`,
# the output of `exp`. For a network that is every activation of the forward pass, the bulk of training
# memory. Once backward has used them they are dead weight, so the engine frees them as it goes, and a
# second `backward()` through the same graph fails with an error that says what happened: the arrays
# it needs are gone. That is PyTorch's behaviour too. When you do need two passes (two losses sharing a
# trunk, each `backward`ed on its own), the first call passes `retain_graph=True`. `create_graph=True`
# (a graph of the backward pass itself, for gradients of gradients) is beyond this course: raise
# `NotImplementedError` for it.
#
# Never modify a gradient array in place: `Add.backward` hands the very same `grad_output` to both
# operands, so the arrays in the dict may be shared. `g = g + h` makes a new array; `g += h` does not.

# %%
#| export autograd
def _input_gradients(ctx: Context, grad_output) -> list:
    """ctx.function.backward(ctx, grad_output), checked: one array per operand, with the operand's
    shape, for the inputs that require grad; None for the others."""
    grads = ctx.function.backward(ctx, grad_output)
    if not isinstance(grads, (tuple, list)) or len(grads) != len(ctx.inputs):
        raise RuntimeError(f"{ctx.function.__name__}.backward must return a tuple of {len(ctx.inputs)} "
                           f"gradients (one per operand), got {type(grads).__name__}")
    checked = []
    for operand, grad in zip(ctx.inputs, grads):
        if grad is None or operand is None:
            checked.append(None)
            continue
        if type(grad) is not np.ndarray:
            grad = np.asarray(grad)
        if grad.shape != operand.data.shape:
            raise RuntimeError(f"{ctx.function.__name__}.backward returned a gradient of shape "
                               f"{grad.shape} for an operand of shape {operand.shape}")
        checked.append(grad)
    return checked


def backward(tensor: Tensor, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
    """Accumulate d(tensor)/d(leaf) (weighted by `gradient`; ones for a one-element tensor) into `.grad`
    of every leaf that requires grad (and of tensors that called retain_grad()). Frees what the graph
    saved unless retain_graph."""
    ### BEGIN SOLUTION 02.3 backward
    if create_graph:
        raise NotImplementedError("backward(create_graph=True): tinytorch does not record the backward pass, "
                                  "so gradients of gradients are not available")
    if not tensor.requires_grad:
        raise RuntimeError("backward() needs a tensor that requires grad: none of the tensors it was "
                           "computed from has requires_grad=True")
    if gradient is None:
        if tensor.size != 1:
            raise RuntimeError(f"grad can be implicitly created only for scalar outputs (this tensor has "
                               f"shape {tensor.shape}); pass the gradient: backward(gradient)")
        grad = np.ones(tensor.shape, dtype=tensor.dtype)
    else:
        grad = np.asarray(gradient)
        if grad.shape != tensor.shape:
            raise RuntimeError(f"backward: gradient has shape {grad.shape} but the tensor has shape "
                               f"{tensor.shape}")

    grads = {id(tensor): grad}
    for node in reversed(topological_sort(tensor)):
        grad_output = grads.pop(id(node), None)
        if grad_output is None:
            continue
        ctx = node.grad_fn
        if ctx is None or node.retains_grad:                 # a leaf (or asked to): accumulate into .grad
            if node.grad is None:
                node.grad = Tensor(np.array(grad_output, dtype=node.dtype, order="C"))
            else:
                node.grad = Tensor((node.grad.data + grad_output).astype(node.dtype, copy=False))
        if ctx is None:
            continue
        for operand, operand_grad in zip(ctx.inputs, _input_gradients(ctx, grad_output)):
            if operand_grad is None:                          # a constant, or no gradient
                continue
            key = id(operand)
            grads[key] = operand_grad if key not in grads else grads[key] + operand_grad
        if not retain_graph:
            ctx.free_saved()
    ### END SOLUTION


register_autograd(backward)

# %%
x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
Square.apply(x).backward(Tensor(np.ones(3)))
assert x.grad.data.tolist() == [2.0, -4.0, 6.0] and x.grad.shape == x.shape
Square.apply(x).backward(Tensor(np.ones(3)))
assert x.grad.data.tolist() == [4.0, -8.0, 12.0], "a second backward accumulates"
x.grad = None

a = Tensor(np.array(2.0), requires_grad=True)
d = Times.apply(Square.apply(a), Times.apply(a, Tensor(np.array(3.0))))   # d = a² · 3a = 3a³
d.backward()
assert a.grad.item() == 36.0, a.grad                                        # 9a² = 36
assert d.grad is None, "only leaves keep a .grad"

x = Tensor(np.array(1.0), requires_grad=True)
y = x
for _ in range(50):                      # y = y · y: 2⁵⁰ paths from y to x, 50 steps for the engine
    y = Times.apply(y, y)
y.backward()
assert x.grad.item() == 2.0 ** 50
x = Tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True)
try:
    Square.apply(x).backward()
    raise AssertionError("backward() of a non-scalar without a gradient must raise")
except RuntimeError as error:
    assert "scalar" in str(error)

# %% [markdown]
# Twice through one graph: the first `backward()` frees what `Square` saved, so the second fails and
# says why; with `retain_graph=True` the first call keeps it. And `retain_grad()` keeps the gradient of
# an intermediate result, handy when you want to look inside a network.

# %%
x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
h = Square.apply(x)
h.retain_grad()
loss = Times.apply(h, Tensor(np.array([1.0, 1.0])))
loss.backward(Tensor(np.ones(2)), retain_graph=True)
loss.backward(Tensor(np.ones(2)))                      # fine: the first call kept the graph
assert x.grad.data.tolist() == [4.0, 8.0] and h.grad.data.tolist() == [2.0, 2.0]
try:
    loss.backward(Tensor(np.ones(2)))
    raise AssertionError("a third backward through a freed graph must raise")
except RuntimeError as error:
    print("as expected:", error)
    assert "retain_graph=True" in str(error)

# %% [markdown]
# ## `no_grad` and `detach`
#
# Recording the graph costs memory (every Context keeps its saved arrays alive) and is useless when you
# will not call `backward`: evaluating a model, or updating its parameters in an optimizer step (an
# update must not become part of the next step's graph). `with no_grad():` switches recording off:
# inside, `Function.apply` never sets `requires_grad` or `grad_fn`.
#
# `no_grad` must restore the *previous* mode when the block ends, not blindly switch recording back on,
# so that blocks nest (`with no_grad(): ... with no_grad(): ...` leaves grad mode off after the inner
# block); and it must restore it even when the block raises, which `__exit__` does for free: Python
# calls it on an exception too. Store the mode you found in `__enter__` on `self` and put it back in
# `__exit__`. (`no_grad()` also works as a decorator, `@no_grad()`, like PyTorch's; that part is
# given.)
#
# `tensor.detach()` (from 01) is the per-tensor version: a new tensor on the same data with no
# `grad_fn` and `requires_grad=False`. Gradients do not flow through it, which is how you treat a value
# as a constant (a target, a running statistic).

# %%
#| export
class no_grad:
    """Context manager (and decorator): ops inside record no graph. Restores the previous grad mode
    on exit, even on an exception; nests."""

    def __enter__(self):
        ### BEGIN SOLUTION 02.4 no_grad
        global _grad_enabled
        self.previous = _grad_enabled
        _grad_enabled = False
        ### END SOLUTION
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        ### BEGIN SOLUTION 02.4 no_grad
        global _grad_enabled
        _grad_enabled = self.previous
        ### END SOLUTION
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def without_grad(*args, **kwargs):
            with no_grad():
                return fn(*args, **kwargs)
        return without_grad

# %%
x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
with no_grad():
    assert not is_grad_enabled()
    y = Square.apply(x)
    with no_grad():
        pass
    assert not is_grad_enabled(), "the inner block restores the outer block's mode"
assert is_grad_enabled() and not y.requires_grad and y.grad_fn is None
try:
    with no_grad():
        raise KeyError("boom")
except KeyError:
    pass
assert is_grad_enabled(), "grad mode is restored after an exception"
z = Times.apply(x, x.detach())           # z = x · (a constant copy of x)
z.backward(Tensor(np.ones(2)))
assert x.grad.data.tolist() == [1.0, 2.0], "no gradient flows through detach()"

# %% [markdown]
# ## Gradient checking
#
# Every backward you write can be tested against the definition of the derivative. For
# f = Σ ḡ · fn(x) (a random upstream gradient ḡ makes one scalar out of any output), nudge one element
# x[j] by ±ε:
#
#     ∂f/∂x[j] ≈ (f(x + ε e_j) − f(x − ε e_j)) / 2ε
#
# - **Central, not forward** (`(f(x+ε) − f(x)) / ε`): the Taylor terms in ε cancel, so the truncation
#   error is O(ε²) instead of O(ε). With ε = 1e-6 that is ~1e-12 instead of ~1e-6.
# - **float64, not float32**: the difference f(x+ε) − f(x−ε) loses every digit that f and the nudge do
#   not share. float32 carries ~7 significant digits, so a nudge of 1e-6 on a value near 1 is at the
#   last digit and the quotient is mostly round-off; float64's ~16 digits leave ~10 good ones. So
#   `gradcheck` first copies every input to float64 (your ops keep float64 throughout, as numpy does).
#
# `gradcheck(fn, *inputs)` compares, on **every element of every input that requires grad**, the
# gradient from `backward` with the central difference. It returns `True` when all agree within
# `atol + rtol · |numeric|` and otherwise raises `GradcheckError` (a `RuntimeError`, as in PyTorch)
# naming the input, the element and both values. Run the numeric forwards under `no_grad()`: they need
# no graph. It costs two forwards per element, so keep the inputs small: it is a test tool.

# %%
#| export autograd
class GradcheckError(RuntimeError):
    """backward and central differences disagree (raised by `gradcheck`)."""


def gradcheck(fn, *inputs, eps=1e-6, atol=1e-5, rtol=1e-3) -> bool:
    """Compare backward of fn(*inputs) (with a random upstream gradient) against float64 central
    differences on every element of every input that requires grad. True if all agree; otherwise
    raise GradcheckError naming the input, the element and both values."""
    ### BEGIN SOLUTION 02.5 gradcheck
    inputs = [Tensor(x.data.astype(np.float64), requires_grad=x.requires_grad) if isinstance(x, Tensor)
              else x for x in inputs]
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input has requires_grad=True, so there is nothing to check")
    output = fn(*inputs)
    grad_output = np.random.default_rng(0).standard_normal(output.shape)
    output.backward(Tensor(grad_output))
    with no_grad():
        for i in checked:
            x = inputs[i]
            analytic = np.zeros_like(x.data) if x.grad is None else x.grad.data
            numeric = np.zeros_like(x.data)
            flat, numeric_flat = x.data.reshape(-1), numeric.reshape(-1)   # views: nudging flat nudges x
            for j in range(flat.size):
                saved = flat[j]
                flat[j] = saved + eps
                plus = np.sum(fn(*inputs).data * grad_output)
                flat[j] = saved - eps
                minus = np.sum(fn(*inputs).data * grad_output)
                flat[j] = saved
                numeric_flat[j] = (plus - minus) / (2 * eps)
            wrong = ~np.isclose(analytic, numeric, rtol=rtol, atol=atol)
            if wrong.any():
                where = np.unravel_index(int(np.argmax(wrong)), numeric.shape)
                raise GradcheckError(f"gradcheck: input {i}, element {tuple(int(k) for k in where)}: "
                                     f"backward gives {analytic[where]:.6g} but central differences give "
                                     f"{numeric[where]:.6g}")
    return True
    ### END SOLUTION

# %%
class WrongSquare(Square):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (grad_output * x,)                # forgot the 2


x = Tensor(np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32), requires_grad=True)
assert gradcheck(Square.apply, x) is True
try:
    gradcheck(WrongSquare.apply, x)
    raise AssertionError("gradcheck must reject WrongSquare")
except GradcheckError as error:
    print("as expected:", error)
assert x.grad is None, "gradcheck works on float64 copies and leaves the inputs alone"

# %% [markdown]
# ## The adjoint of broadcasting is a sum
#
# `a + b` with `a: (4, 3)` and `b: (3,)` uses every `b[j]` four times, once per row. Each use sends a
# gradient back, and a tensor used several times gets the *sum* of them: the gradient of `b` is
# `grad_output.sum(axis=0)`, shape `(3,)`. In general broadcasting (1) prepends axes and (2) stretches
# axes of size 1, so its adjoint, `unbroadcast(grad, shape)`, (1) sums the leading extra axes away and
# (2) sums, with `keepdims=True`, every axis where `shape` has a 1 and `grad` does not:
#
# ```
#   grad (2, 4, 3)  --sum axis 0-->  (4, 3)  --sum axis 0, keepdims-->  (1, 3) == shape
# ```
#
# This one helper serves every op that broadcasts (add, sub, mul, div, pow, the batch axes of matmul).
# It must also take `shape == ()` (a Python scalar or a 0-d tensor: sum everything).

# %%
#| export
def unbroadcast(grad, shape):
    """Sum `grad` over the axes that broadcasting added or stretched, so it gets `shape`."""
    ### BEGIN SOLUTION 02.6 unbroadcast
    grad = np.asarray(grad)
    if grad.shape == tuple(shape):                      # nothing was broadcast: the common case
        return grad
    extra = grad.ndim - len(shape)
    if extra > 0:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad
    ### END SOLUTION

# %%
g = np.arange(24.0).reshape(2, 4, 3)
assert unbroadcast(g, (2, 4, 3)).shape == (2, 4, 3)
assert np.array_equal(unbroadcast(g, (3,)), g.sum(axis=(0, 1)))
assert np.array_equal(unbroadcast(g, (4, 1)), g.sum(axis=(0, 2))[:, None])
assert np.array_equal(unbroadcast(g, (1, 1, 3)), g.sum(axis=(0, 1), keepdims=True))
assert unbroadcast(g, ()) == g.sum()

# %% [markdown]
# ## The ops, each registered under 01's name
#
# Now one `Function` per op of 01. Each forward is given (it calls 01's kernel, so the forward values
# and error messages stay exactly 01's, and saves what backward needs); you write each backward. Read
# the forward first: it tells you what is in `ctx`. The tests after each op run your `gradcheck` (task
# 02.5) on it, in float64, on inputs drawn at random.
#
# `@differentiable` is the registration: on `class Add` it calls `register_op("add", Add.apply)` (the op's
# name is the class's, lower-cased, so `Add` is op `"add"` as `add_kernel` was), and from then on `a + b`,
# `a.__radd__`, every operator that looks up `"add"`, runs `Add.apply` and records the graph. Nothing in
# 01's source changes. An operand may be a Python scalar (`x * 2`, `1 - x`): the engine
# ignores the gradient you return for it, so `unbroadcast(..., np.shape(b))` (shape `()`) is fine, but
# a backward must not crash on it.
#
# ### Add, Sub
#
# z = a ± b: ∂z/∂a = 1, ∂z/∂b = ±1, elementwise, so the gradients are `grad_output` and
# `±grad_output`, unbroadcast to each operand's shape.

# %%
#| export
def differentiable(cls):
    """Class decorator: register `cls.apply` as the op of tinytorch.core.tensor named `cls.__name__.lower()`."""
    register_op(cls.__name__.lower(), cls.apply)
    return cls


@differentiable
class Add(Function):
    """z = a + b (broadcasting)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.a_shape, ctx.b_shape = np.shape(a), np.shape(b)
        return add_kernel(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.7 Add.backward
        return unbroadcast(grad_output, ctx.a_shape), unbroadcast(grad_output, ctx.b_shape)
        ### END SOLUTION


@differentiable
class Sub(Function):
    """z = a - b (broadcasting)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.a_shape, ctx.b_shape = np.shape(a), np.shape(b)
        return sub_kernel(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.7 Sub.backward
        return unbroadcast(grad_output, ctx.a_shape), unbroadcast(-grad_output, ctx.b_shape)
        ### END SOLUTION

# %%
rng = np.random.default_rng(0)


def leaf(*shape):
    """A float64 tensor of standard normals that requires grad (gradcheck's favourite input)."""
    return Tensor(rng.standard_normal(shape), requires_grad=True)


assert gradcheck(lambda a, b: a + b, leaf(4, 3), leaf(3))
assert gradcheck(lambda a, b: a - b, leaf(2, 1, 3), leaf(4, 1))
assert gradcheck(lambda a: 1.5 - a + 2, leaf(3))
x = leaf(3)
(x + x).backward(Tensor(np.ones(3)))
assert x.grad.data.tolist() == [2.0, 2.0, 2.0], "x used twice: both uses count"

# %% [markdown]
# ### Mul, Div
#
# z = a · b: ∂z/∂a = b, ∂z/∂b = a. z = a / b: ∂z/∂a = 1/b, ∂z/∂b = −a/b². Multiply by `grad_output`
# elementwise, then unbroadcast.

# %%
#| export
@differentiable
class Mul(Function):
    """z = a * b (broadcasting)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return mul_kernel(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.8 Mul.backward
        a, b = ctx.saved_tensors
        return unbroadcast(grad_output * b, np.shape(a)), unbroadcast(grad_output * a, np.shape(b))
        ### END SOLUTION


@differentiable
class Div(Function):
    """z = a / b (broadcasting)"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return div_kernel(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.8 Div.backward
        a, b = ctx.saved_tensors
        grad_a = grad_output / b
        return unbroadcast(grad_a, np.shape(a)), unbroadcast(-grad_a * a / b, np.shape(b))
        ### END SOLUTION

# %%
assert gradcheck(lambda a, b: a * b, leaf(4, 3), leaf(3))
assert gradcheck(lambda a, b: a / (b * b + 1), leaf(2, 3), leaf(2, 1))
assert gradcheck(lambda a: 3 / (a * a + 1) * 2.5, leaf(5))

# %% [markdown]
# ### Pow, Neg, Exp, Log, Sqrt
#
# - z = aᵇ: ∂z/∂a = b·aᵇ⁻¹ and ∂z/∂b = aᵇ·ln a. The second is only defined for a > 0, and `x ** 2`
#   (a Python scalar exponent) needs no gradient for the exponent at all: compute each gradient only
#   when `ctx.needs_input_grad` asks for it, and return `None` otherwise.
# - z = −a: ∂z/∂a = −1.
# - z = eᵃ: ∂z/∂a = eᵃ = z (saved by forward: reuse it, do not recompute).
# - z = ln a: ∂z/∂a = 1/a.
# - z = √a: ∂z/∂a = 1/(2√a) = 1/(2z).

# %%
#| export
@differentiable
class Pow(Function):
    """z = a ** b (broadcasting)"""

    @staticmethod
    def forward(ctx, a, b):
        result = pow_kernel(a, b)
        ctx.save_for_backward(a, b, result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.9 Pow.backward
        a, b, result = ctx.saved_tensors
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = unbroadcast(grad_output * b * a ** (b - 1), np.shape(a))
        if ctx.needs_input_grad[1]:
            grad_b = unbroadcast(grad_output * result * np.log(a), np.shape(b))
        return grad_a, grad_b
        ### END SOLUTION


@differentiable
class Neg(Function):
    """z = -a"""

    @staticmethod
    def forward(ctx, a):
        return neg_kernel(a)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.9 Neg.backward
        return (-grad_output,)
        ### END SOLUTION


@differentiable
class Exp(Function):
    """z = e ** a"""

    @staticmethod
    def forward(ctx, a):
        result = exp_kernel(a)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.9 Exp.backward
        (result,) = ctx.saved_tensors
        return (grad_output * result,)
        ### END SOLUTION


@differentiable
class Log(Function):
    """z = ln a"""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return log_kernel(a)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.9 Log.backward
        (a,) = ctx.saved_tensors
        return (grad_output / a,)
        ### END SOLUTION


@differentiable
class Sqrt(Function):
    """z = √a"""

    @staticmethod
    def forward(ctx, a):
        result = sqrt_kernel(a)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.9 Sqrt.backward
        (result,) = ctx.saved_tensors
        return (grad_output / (2 * result),)
        ### END SOLUTION

# %%
def positive(*shape):
    return Tensor(rng.uniform(0.5, 2.0, shape), requires_grad=True)


assert gradcheck(lambda a: a ** 3, leaf(2, 3))
assert gradcheck(lambda a: a ** -1.5, positive(4))
assert gradcheck(lambda a, b: a ** b, positive(2, 3), leaf(3))
assert gradcheck(lambda b: 2.0 ** b, leaf(3))
assert gradcheck(lambda a: -a, leaf(2, 2))
assert gradcheck(lambda a: a.exp(), leaf(3))
assert gradcheck(lambda a: a.log(), positive(3))
assert gradcheck(lambda a: a.sqrt(), positive(3))
x = Tensor(np.array([-2.0, 3.0]), requires_grad=True)
(x ** 2).backward(Tensor(np.ones(2)))          # a negative base is fine: no ln of the exponent
assert x.grad.data.tolist() == [-4.0, 6.0]

# %% [markdown]
# ### MatMul
#
# For matrices, z = a @ b with a: (m, k), b: (k, n), z: (m, n):
#
#     ḡ_a = ḡ_z @ bᵀ   (m, n) @ (n, k) -> (m, k)        ḡ_b = aᵀ @ ḡ_z   (k, m) @ (m, n) -> (k, n)
#
# (check it on shapes: it is the only arrangement that fits). `np.matmul` adds two complications, and
# your backward must handle both:
#
# - **Batch axes** `(..., m, k) @ (..., k, n)` broadcast like elementwise ops, so the same formulas
#   apply with `np.swapaxes(x, -1, -2)` as the transpose, followed by `unbroadcast` to the operand's
#   shape (a `(k, n)` weight used by every batch element gets the sum over the batch).
# - **1-d operands**: a vector a: (k,) is treated as a (1, k) matrix and b: (k,) as (k, 1), and that
#   axis is removed from the result. Undo it in backward: view a as `(1, k)`, b as `(k, 1)`, put the
#   removed axis back into `grad_output` (`[..., None, :]` for a, `[..., None]` for b), apply the
#   matrix formulas, and reshape each gradient to its operand's shape at the end.
#
# Skip a gradient `ctx.needs_input_grad` does not ask for: in `x @ w` with data `x`, ḡ_x is a whole
# matmul of wasted work.

# %%
#| export
@differentiable
class MatMul(Function):
    """z = a @ b as np.matmul: batched (batch axes broadcast), 1-d operands promoted"""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return matmul_kernel(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.10 MatMul.backward
        a, b = ctx.saved_tensors
        a2 = a[None, :] if a.ndim == 1 else a              # (..., m, k)
        b2 = b[:, None] if b.ndim == 1 else b              # (..., k, n)
        grad = np.asarray(grad_output)
        if b.ndim == 1:
            grad = grad[..., None]
        if a.ndim == 1:
            grad = grad[..., None, :]                       # (..., m, n)
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = unbroadcast(grad @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
        if ctx.needs_input_grad[1]:
            grad_b = unbroadcast(np.swapaxes(a2, -1, -2) @ grad, b2.shape).reshape(b.shape)
        return grad_a, grad_b
        ### END SOLUTION

# %%
assert gradcheck(lambda a, b: a @ b, leaf(2, 3), leaf(3, 4))
assert gradcheck(lambda a, b: a @ b, leaf(2, 1, 2, 3), leaf(4, 3, 2))        # batch (2, 1) with (4,)
assert gradcheck(lambda a, b: a @ b, leaf(3), leaf(2, 3, 4))                 # vector @ batch
assert gradcheck(lambda a, b: a @ b, leaf(2, 3), leaf(3))                    # matrix @ vector
assert gradcheck(lambda a, b: a @ b, leaf(3), leaf(3))                       # dot product

# %% [markdown]
# ### Sum, Mean: the adjoint of a reduction is a broadcast
#
# Every input element contributes to its output element with weight 1 (weight 1/count for the mean),
# so each input element's gradient is the gradient of the output element it went into. Put the reduced
# axes back as size 1, then broadcast to the input's shape. Given: `_keepdims(grad, axis, keepdims)`
# puts the reduced axes back (`np.expand_dims` handles an int, a tuple and negative axes; with
# `axis=None` the output is a scalar, which broadcasts as it is). `np.broadcast_to` returns a
# read-only view: fine, since nobody modifies gradients in place.

# %%
#| export
def _keepdims(array, axis, keepdims):
    """The result of a reduction over `axis`, with the reduced axes put back as size 1."""
    if keepdims or axis is None:
        return array
    return np.expand_dims(array, axis)


@differentiable
class Sum(Function):
    """z = a.sum(axis, keepdims)"""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        return sum_kernel(a, axis=axis, keepdims=keepdims)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.11 Sum.backward
        return (np.broadcast_to(_keepdims(grad_output, ctx.axis, ctx.keepdims), ctx.shape),)
        ### END SOLUTION


@differentiable
class Mean(Function):
    """z = a.mean(axis, keepdims)"""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        result = mean_kernel(a, axis=axis, keepdims=keepdims)
        ctx.shape, ctx.axis, ctx.keepdims = a.shape, axis, keepdims
        ctx.count = a.size // max(np.size(result), 1)         # elements averaged into each output
        return result

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.11 Mean.backward
        grad = _keepdims(grad_output, ctx.axis, ctx.keepdims) / ctx.count
        return (np.broadcast_to(grad, ctx.shape),)
        ### END SOLUTION

# %%
for axis, keepdims in [(None, False), (None, True), (0, False), (-1, True), ((0, 2), False), ((2, -3), True)]:
    assert gradcheck(lambda a: a.sum(axis=axis, keepdims=keepdims), leaf(2, 3, 4))
    assert gradcheck(lambda a: a.mean(axis=axis, keepdims=keepdims), leaf(2, 3, 4))

# %% [markdown]
# ### Max, and what to do with ties
#
# z = max over an axis picks one element; the gradient flows to the maximum and to nothing else (a
# tiny change to any other element does not change z). When several elements tie for the maximum the
# derivative does not exist, and a framework must choose. We do what `torch.amax` does: **the gradient
# is split evenly among the tied maxima** (`max([1, 3, 3])` sends ½ to each 3). That keeps the total
# gradient right (the sum of the shares is 1) and treats the ties symmetrically.
#
# Vectorised: a mask `a == z` (with z's reduced axes put back by `_keepdims`) marks the maxima, the
# mask's sum over the reduced axes (with `keepdims=True`) counts them, and the gradient is
# `mask * grad_output / count`. Make the mask the dtype of `grad_output` (`.astype`) so a float32
# gradient stays float32.

# %%
#| export
@differentiable
class Max(Function):
    """z = a.max(axis, keepdims); ties share the gradient evenly"""

    @staticmethod
    def forward(ctx, a, axis=None, keepdims=False):
        result = max_kernel(a, axis=axis, keepdims=keepdims)
        ctx.save_for_backward(a, result)
        ctx.axis, ctx.keepdims = axis, keepdims
        return result

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.12 Max.backward
        a, result = ctx.saved_tensors
        grad = np.asarray(_keepdims(grad_output, ctx.axis, ctx.keepdims))
        mask = (a == _keepdims(result, ctx.axis, ctx.keepdims)).astype(grad.dtype)
        return (mask * (grad / mask.sum(axis=ctx.axis, keepdims=True)),)
        ### END SOLUTION

# %%
assert gradcheck(lambda a: a.max(axis=1), leaf(3, 4))
assert gradcheck(lambda a: a.max(axis=(0, -1), keepdims=True), leaf(2, 3, 4))
assert gradcheck(lambda a: a.max(), leaf(5))
x = Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]), requires_grad=True)
x.max(axis=1).backward(Tensor(np.array([1.0, 6.0])))
assert x.grad.data.tolist() == [[0.0, 0.5, 0.5], [2.0, 2.0, 2.0]], x.grad

# %% [markdown]
# ### Reshape, Permute: moving elements around
#
# Neither changes a value, only where it sits, so the gradient of each element is the gradient at its
# new place, moved back: reshape `grad_output` to the input's shape; permute it by the *inverse*
# permutation. If `z = a.permute(dims)` then axis `i` of z is axis `dims[i]` of a; the inverse
# permutation is `np.argsort(dims)` (once negative dims are made positive with `d % ndim`).
# `transpose(i, j)` and `.T` in 01 both dispatch `"permute"`, so this one Function covers all three.

# %%
#| export
@differentiable
class Reshape(Function):
    """z = a.reshape(shape)"""

    @staticmethod
    def forward(ctx, a, shape):
        ctx.shape = a.shape
        return reshape_kernel(a, shape=shape)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.13 Reshape.backward
        return (np.reshape(grad_output, ctx.shape),)
        ### END SOLUTION


@differentiable
class Permute(Function):
    """z = a.permute(dims): axis i of z is axis dims[i] of a"""

    @staticmethod
    def forward(ctx, a, dims):
        ctx.dims, ctx.ndim = dims, a.ndim
        return permute_kernel(a, dims=dims)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.13 Permute.backward
        inverse = np.argsort([dim % ctx.ndim for dim in ctx.dims])
        return (np.transpose(grad_output, inverse),)
        ### END SOLUTION

# %%
assert gradcheck(lambda a: a.reshape(3, -1) * Tensor(np.arange(8.0)), leaf(2, 12))
assert gradcheck(lambda a: a.permute(2, 0, 1) * Tensor(np.arange(4.0)[:, None, None]), leaf(2, 3, 4))
assert gradcheck(lambda a: a.transpose(0, -1) @ Tensor(np.ones((2, 5))), leaf(2, 3, 4))
assert gradcheck(lambda a: a.T * Tensor(np.arange(3.0)), leaf(3, 2))

# %% [markdown]
# ### GetItem: scatter-add
#
# `a[index]` copies some elements of a out; their gradients go back to the places they came from, and
# everything not selected gets 0. For a slice, `grad = zeros; grad[index] = grad_output` would do. But
# an integer index may select the same element twice (`a[[0, 0, 2]]`, an embedding lookup of a
# repeated token), and then both gradients must be **added**. `grad[index] += grad_output` looks right
# and is wrong: numpy evaluates it as `grad[index] = grad[index] + grad_output`, and of the repeated
# writes only the last one survives. `np.add.at(grad, index, grad_output)` is the unbuffered
# scatter-add that accumulates every repeat, and it handles every index 01 accepts (ints, slices,
# `None`, `...`, integer arrays).
#
# It is also slow: it visits the elements one at a time, some twenty times slower than an assignment.
# A *basic* index (ints, slices, `None` and `...` only, no arrays) never selects an element twice, so
# there the plain assignment is exact, and a transformer that splits its queries, keys and values out of
# one array with `qkv[0]`, `qkv[1]`, `qkv[2]` runs its backward through this op three times per layer and
# step. The given `_is_basic_index(index)` tells the two kinds apart; use the assignment where it is
# exact and `np.add.at` elsewhere (with `np.add.at` alone the gradients are just as right, only slower).

# %%
#| export
def _is_basic_index(index) -> bool:
    """True when `index` holds only ints, slices, None and Ellipsis: numpy's basic indexing, which selects
    every element at most once."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(part is None or part is Ellipsis or isinstance(part, (int, np.integer, slice)) for part in parts)


@differentiable
class GetItem(Function):
    """z = a[index]: basic slices, ints, None, Ellipsis, integer arrays"""

    @staticmethod
    def forward(ctx, a, index):
        ctx.shape, ctx.index = a.shape, index
        return getitem_kernel(a, index=index)

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 02.14 GetItem.backward
        grad = np.zeros(ctx.shape, dtype=np.asarray(grad_output).dtype)
        if _is_basic_index(ctx.index):                  # every element at most once: assignment is exact
            grad[ctx.index] = grad_output
        else:                                           # integer arrays may repeat an element: accumulate
            np.add.at(grad, ctx.index, grad_output)
        return (grad,)
        ### END SOLUTION

# %%
assert gradcheck(lambda a: a[1:, ::-2], leaf(3, 5))
assert gradcheck(lambda a: a[..., None, 0], leaf(2, 3))
assert gradcheck(lambda a: a[np.array([0, 0, 2, 0])], leaf(3, 2))
x = Tensor(np.zeros(3), requires_grad=True)
x[np.array([0, 0, 2, 0])].backward(Tensor(np.ones(4)))
assert x.grad.data.tolist() == [3.0, 0.0, 1.0], "repeated indices accumulate"

# %% [markdown]
# ## Putting it together
#
# Every op of 01 is now differentiable, through the operators you already use. A two-layer network and
# its loss, in float32, differentiated in one call; then gradcheck on the whole thing:

# %%
def mlp_loss(x, w1, b1, w2):
    hidden = (x @ w1 + b1).max(axis=-1, keepdims=True) + (x @ w1).exp().sqrt()   # (N, H)
    return ((hidden @ w2 - 1.0) ** 2).mean()


x = Tensor(rng.standard_normal((8, 4)).astype(np.float32))
w1 = Tensor(rng.standard_normal((4, 6)).astype(np.float32) * 0.5, requires_grad=True)
b1 = Tensor(np.zeros(6, dtype=np.float32), requires_grad=True)
w2 = Tensor(rng.standard_normal((6, 1)).astype(np.float32) * 0.5, requires_grad=True)
loss = mlp_loss(x, w1, b1, w2)
loss.backward()
assert w1.grad.shape == w1.shape and w1.grad.dtype == np.float32 and x.grad is None
assert gradcheck(mlp_loss, x, w1, b1, w2)

# %% [markdown]
# ## A picture of the graph
#
# The graph is plain data: each result's `grad_fn` names its op and points to its inputs, so walking it
# from the loss draws it. Here is the graph of the opening example, `loss = ((x @ w) + b).sum()`, in
# text: one line per tensor (its name or shape, and the op that made it), with the tensors it was
# computed from indented below it. `x` is data (`requires_grad=False`), so it is not in the graph at
# all; a tensor used twice would appear under each of its users. (The optional `graphviz` package could
# draw the same walk as a picture; text needs nothing.)

# %%
def draw(tensor: Tensor, names: dict, indent: str = "") -> None:
    """Print the graph behind `tensor`: one line per tensor, its inputs indented below it."""
    label = names.get(id(tensor), f"tensor of shape {tensor.shape}")
    print(f"{indent}{label}  <- {tensor.grad_fn!r}" if tensor.grad_fn is not None else f"{indent}{label}  (leaf)")
    if tensor.grad_fn is not None:
        for operand in tensor.grad_fn.inputs:
            if operand is not None:
                draw(operand, names, indent + "    ")


x = Tensor(rng.standard_normal((4, 3)))
w = Tensor(rng.standard_normal((3, 2)), requires_grad=True)
b = Tensor(np.zeros(2), requires_grad=True)
h = x @ w
z = h + b
loss = z.sum()
draw(loss, {id(x): "x", id(w): "w", id(b): "b", id(h): "h", id(z): "z", id(loss): "loss"})
assert h.grad_fn.inputs == (None, w), "x needs no gradient: the node holds None in its place"

# %% [markdown]
# And the engine is fast enough to train a GPT later: linear in the size of the graph, with no
# recursion anywhere, a 100,000-op chain takes a second or two forward and backward (1.3 to 1.7 s,
# measured on two shared, busy cores).

# %%
start = time.perf_counter()
x = Tensor(np.array(1.0), requires_grad=True)
y = x
for _ in range(100_000):
    y = y * 1.00001
y.backward()
print(f"100,000-op chain, forward and backward: {time.perf_counter() - start:.2f} s")
assert abs(x.grad.item() - 1.00001 ** 100_000) < 1e-6
