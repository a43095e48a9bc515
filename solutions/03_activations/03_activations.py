# %% [markdown]
# # 03 Activations
#
# A linear layer computes `x @ W + b`. Stack two of them and you get `(x @ W1 + b1) @ W2 + b2`, which
# is `x @ (W1 @ W2) + (b1 @ W2 + b2)`: one linear layer again. However deep, a stack of linear maps is
# a linear map, and a linear map cannot tell a 3 from an 8. What makes depth pay is a **nonlinearity**
# between the layers, applied to every element: an *activation function*. This module builds the six
# that modern networks use, each with its derivative written by hand:
#
# | function | formula | where you meet it | task |
# |---|---|---|---|
# | `relu` | max(x, 0) | hidden layers of MLPs and CNNs | 03.1 |
# | `sigmoid` | 1 / (1 + e⁻ˣ) | gates (LSTM), binary outputs | 03.2 |
# | `tanh` | (eˣ − e⁻ˣ) / (eˣ + e⁻ˣ) | RNNs, the GELU approximation | 03.3 |
# | `gelu` | x·Φ(x), or its tanh approximation | transformers (BERT, GPT-2) | 03.4, 03.5 |
# | `softmax` | eˣⁱ / Σⱼ eˣʲ along `dim` | class probabilities, attention weights | 03.6, 03.7, 03.8 |
# | `log_softmax` | xᵢ − log Σⱼ eˣʲ along `dim` | cross-entropy (module 05), language models | 03.9, 03.10 |
#
# They go into `tinytorch/core/activations.py` and appear as `tt.nn.functional.relu`, ... (the same
# place as PyTorch's `torch.nn.functional.relu`; `import tinytorch.nn.functional as F` works too).
# Each is a `Function` of 02 (a numpy `forward` and a hand-written `backward`) plus a one-line
# functional form that calls `Function.apply`. PyTorch also has *module* forms, `nn.ReLU()`,
# `nn.Softmax(dim=1)`: objects you put in an `nn.Sequential`. Those are `Module`s, and `Module` (the
# class that holds parameters and sub-modules) arrives in 04, so 04 defines them as thin wrappers that
# call the functions you write here, exactly as PyTorch's `nn/modules/activation.py` calls `F`.
#
# Two demands run through the whole module:
#
# - **Hand-written backward.** Autograd could differentiate `sigmoid` built from `exp`, `+` and `/`,
#   but one fused `Function` stores one array instead of four and runs one numpy expression backward
#   instead of four ops. For softmax you will build both versions and compare them.
# - **Numerical stability.** float32 overflows at 3.4e38, so `np.exp(x)` is `inf` from x ≈ 88.7 on.
#   Logits of a few hundred are ordinary in a badly initialised or diverging network; every function
#   here must give finite, correct values (and no overflow warning) for inputs of magnitude 1e4 and
#   beyond. The recipe is always the same: rewrite the formula so that `exp` only ever sees numbers
#   ≤ 0.
#
# **Before you start.** This notebook runs on *your* 01 and 02: its exported cells import `Tensor` and
# `Function` from the package your 01 and 02 became. <!-- tito -->Finish 02 (`tito test 02` at full
# marks), run `tito export 02`, and restart this notebook's kernel whenever you export again. Grade this
# module with `tito test 03`, which exports 01, 02 and 03 together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.activations
import time

import numpy as np

from tinytorch.core.autograd import gradcheck, no_grad, topological_sort
from tinytorch.core.tensor import Tensor

rng = np.random.default_rng(0)


def leaf(*shape, scale=1.0):
    """A float64 tensor of normals that requires grad (gradcheck's favourite input)."""
    return Tensor(rng.standard_normal(shape) * scale, requires_grad=True)

# %%
#| export
import math

import numpy as np

from tinytorch.core.autograd import Function
from tinytorch.core.tensor import Tensor

__all__ = ["relu", "sigmoid", "tanh", "gelu", "softmax", "log_softmax"]  # all in tt.nn.functional

# %% [markdown]
# ## The backward of an elementwise function
#
# For y = f(x) applied to every element, output element i depends on input element i only: the
# Jacobian is diagonal, and the vector-Jacobian product of 02 is an elementwise product:
#
#     ḡ_x = ḡ_y ⊙ f′(x)        (same shape as x)
#
# So every elementwise backward is one line, `grad_output * (derivative)`. What to save for it is a
# choice: the input x, or the output y when f′ is cheaper in terms of y (σ′ = σ(1 − σ), tanh′ = 1 − tanh²).
# Saving y costs nothing extra: forward computed it anyway.
#
# Each Function below has its `forward` and `backward` side by side. The given lines around your
# regions show what is saved and under which name; your regions compute the result, or the gradient.
# Keep the dtype: float32 in, float32 out. numpy does that by itself as long as your constants are
# Python numbers (`0.5`, `1`), never `np.float64(...)` scalars, which would promote the result to
# float64.
#
# ## ReLU
#
#     relu(x) = max(x, 0)        relu′(x) = 1 if x > 0, 0 if x < 0
#
# At x = 0 the derivative does not exist; like PyTorch we use 0 there. (It never matters in practice:
# an input that is *exactly* 0 is rare, and any value in [0, 1] would do.) A unit whose input is
# negative for every example gets gradient 0 for every example and never recovers: a "dead ReLU", the
# price of the simplest activation there is. It is also the cheapest: one comparison forward, one mask
# backward.

# %%
#| export
class _ReLU(Function):
    """y = max(x, 0); dy/dx = 1 where x > 0, else 0"""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ### BEGIN SOLUTION 03.1 relu
        return np.maximum(x, 0)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        ### BEGIN SOLUTION 03.1 relu
        return (grad_output * (x > 0),)
        ### END SOLUTION

# %% [markdown]
# The functional form is the public name. It is given: one line that applies the Function, so that
# `relu(x)` records the graph when x requires grad (and not under `no_grad()`). `Function.apply` turns
# a list or a numpy array into an array as 01's ops do, so `relu([1.0, -2.0])` works too.

# %%
#| export nn.functional
def relu(input, inplace: bool = False):
    """max(input, 0) elementwise. `inplace` is accepted like PyTorch's and ignored: tinytorch never
    overwrites a tensor that autograd may still need."""
    return _ReLU.apply(input)

# %%
x = Tensor(np.array([[-2.0, 0.0, 3.0], [1.5, -0.5, 0.25]], dtype=np.float32), requires_grad=True)
y = relu(x)
assert y.data.tolist() == [[0.0, 0.0, 3.0], [1.5, 0.0, 0.25]] and y.dtype == np.float32
assert y.requires_grad and y.grad_fn is not None
y.backward(Tensor(np.full((2, 3), 2.0, dtype=np.float32)))
assert x.grad.data.tolist() == [[0.0, 0.0, 2.0], [2.0, 0.0, 2.0]], "gradient 0 at x = 0, like PyTorch"
assert gradcheck(relu, Tensor(rng.uniform(0.1, 1.0, (3, 4)) * rng.choice([-1, 1], (3, 4)), requires_grad=True))
with no_grad():
    assert relu(x).grad_fn is None
assert relu([1.0, -2.0]).data.tolist() == [1.0, 0.0]

# %% [markdown]
# ## Sigmoid, and the first overflow
#
#     σ(x) = 1 / (1 + e⁻ˣ)        σ′(x) = σ(x) · (1 − σ(x))
#
# σ squashes any real number into (0, 1), so it turns a score into a probability. The derivative in
# terms of the output is the reason to save y: backward is `grad_output * y * (1 - y)`.
#
# The formula as written overflows: for x = −1e4, e⁻ˣ = e¹⁰⁰⁰⁰ is `inf` (with a `RuntimeWarning:
# overflow`), and 1 / (1 + inf) = 0 is right only by luck. The textbook rewrite for negative x is
# σ(x) = eˣ / (1 + eˣ), which is fine for negative x and overflows for positive x. So use each form
# where it is safe, the **sign-split** form. With z = e^(−|x|), which lies in (0, 1] and never
# overflows:
#
#     σ(x) = 1 / (1 + z)    for x ≥ 0        σ(x) = z / (1 + z)    for x < 0
#
# Careful with `np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))`: `np.where` is
# not an `if`; numpy evaluates *both* branches on *every* element before choosing, and the branch not
# taken still overflows and warns. Compute z once, then choose between the two safe expressions.
# (For x = −1e4, z underflows to 0 and σ = 0: underflow to 0 is harmless and numpy stays silent about
# it.)

# %%
#| export
class _Sigmoid(Function):
    """y = 1 / (1 + exp(-x)), sign-split so exp never overflows; dy/dx = y (1 - y)"""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION 03.2 sigmoid
        z = np.exp(-np.abs(x))                              # in (0, 1]: never overflows
        y = np.where(x >= 0, 1 / (1 + z), z / (1 + z))
        ### END SOLUTION
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        ### BEGIN SOLUTION 03.2 sigmoid
        return (grad_output * y * (1 - y),)
        ### END SOLUTION

# %%
#| export nn.functional
def sigmoid(input):
    """1 / (1 + exp(-input)) elementwise, stable for inputs of any magnitude"""
    return _Sigmoid.apply(input)

# %% [markdown]
# The test below runs sigmoid under `np.errstate(over="raise", invalid="raise")`: an overflow or a
# NaN inside your code becomes an error at the line that causes it, instead of a warning you might
# overlook. Use the same trick whenever you hunt a NaN.

# %%
x = Tensor(np.array([-1e4, -30.0, -1.0, 0.0, 2.0, 1e4], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", invalid="raise"):
    y = sigmoid(x)
    y.backward(Tensor(np.ones(6, dtype=np.float32)))
assert y.dtype == np.float32
assert y.data[0] == 0.0 and y.data[-1] == 1.0 and y.data[3] == 0.5
assert np.allclose(y.data[1:-1], 1 / (1 + np.exp(-np.array([-30.0, -1.0, 0.0, 2.0]))), rtol=1e-6, atol=0)
assert np.all(np.isfinite(x.grad.data)) and x.grad.data[0] == 0.0 and x.grad.data[3] == 0.25
assert gradcheck(sigmoid, leaf(2, 3, scale=3.0))

# %% [markdown]
# ## Tanh
#
#     tanh(x) = (eˣ − e⁻ˣ) / (eˣ + e⁻ˣ) = 2σ(2x) − 1        tanh′(x) = 1 − tanh²(x)
#
# Like σ but centred: values in (−1, 1), tanh(0) = 0. The formula above overflows just like σ's, but
# here numpy has done the work: `np.tanh` is stable for every input (tanh(±1e4) = ±1), so use it.
# Save the output: the derivative is cheapest in terms of y.

# %%
#| export
class _Tanh(Function):
    """y = tanh(x); dy/dx = 1 - y²"""

    @staticmethod
    def forward(ctx, x):
        ### BEGIN SOLUTION 03.3 tanh
        y = np.tanh(x)
        ### END SOLUTION
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        ### BEGIN SOLUTION 03.3 tanh
        return (grad_output * (1 - y * y),)
        ### END SOLUTION

# %%
#| export nn.functional
def tanh(input):
    """Hyperbolic tangent elementwise"""
    return _Tanh.apply(input)

# %%
x = Tensor(np.array([-1e4, -1.0, 0.0, 0.5, 1e4], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", invalid="raise"):
    y = tanh(x)
    y.backward(Tensor(np.ones(5, dtype=np.float32)))
assert y.dtype == np.float32 and y.data[0] == -1.0 and y.data[-1] == 1.0 and y.data[2] == 0.0
assert np.allclose(y.data, 2 / (1 + np.exp(-2 * x.data.astype(np.float64).clip(-50, 50))) - 1, atol=1e-6)
assert x.grad.data[2] == 1.0 and x.grad.data[0] == 0.0
assert gradcheck(tanh, leaf(3, 2, scale=2.0))

# %% [markdown]
# ## GELU
#
# ReLU multiplies x by a hard gate: 1 if x > 0, else 0. GELU (Hendrycks and Gimpel, 2016) multiplies x
# by a *soft* gate, the probability Φ(x) that a standard normal variable is below x:
#
#     gelu(x) = x · Φ(x),        Φ(x) = ½ (1 + erf(x / √2))
#
# It is smooth everywhere, slightly negative for small negative x (the minimum is about −0.17 near
# x = −0.75), and has been the transformer activation since BERT and GPT-2. Its derivative, by the
# product rule with Φ′ = φ, the normal density:
#
#     gelu′(x) = Φ(x) + x · φ(x),        φ(x) = e^(−x²/2) / √(2π)
#
# numpy has no `erf` (it is in scipy and in Python's `math`, one number at a time), so Φ and φ are given
# below as `_normal_cdf_pdf(x)`, a private helper on numpy arrays. Φ comes from a classic polynomial
# approximation (Abramowitz and Stegun 7.1.26), accurate to 1e-7 in float64 and 3e-7 in float32, a few
# units in the last place of float32: for a ≥ 0,
#
#     ½ erfc(a/√2) = poly(t) · φ(a),     t = 1 / (1 + p a/√2),     poly(t) = c₁t + c₂t² + ... + c₅t⁵
#
# is the normal tail beyond a (A&S's erfc(z) = poly(t) e^(−z²), with its constants times ½√(2π), so
# that the tail and φ share their exponential), and Φ(x) = ½ + sign(x) (½ − tail) for either sign of x,
# without a branch. It computes in the input's dtype (the constants are Python floats, so float32 stays
# float32). Is it stable? For x = 1e4: Φ = 1, gelu = x; φ(1e4) = e^(−5e7) underflows to 0, silently.
# For x = −1e4: Φ = 0 and gelu = −0. Nothing overflows as long as x² does (float32: |x| < 1.8e19).
#
# You call it once in forward, and write the formulas: `x * cdf` for gelu(x) and `cdf + x * pdf` for
# the slope gelu′(x). Backward needs that slope; forward computes it while Φ and φ are at hand and saves
# it instead of x, so backward is a single product, with no second pass through the approximation.
#
# (Speed, an aside: a GPT calls this on a million activations per layer and step, and the twenty-odd
# whole-array steps of the formula each stream a fresh 4 MB array through memory. For arrays that large
# `_normal_cdf_pdf` hands over to `_normal_cdf_pdf_blocked`, the same steps in place on blocks of 32,768
# numbers whose buffers stay in the processor's cache: the same numbers, in less time. Its docstring says
# how much; `tests/test_reference_helpers.py` checks that the two agree.)

# %%
#| export
_BLOCK = 1 << 15                                 # numbers per block of _normal_cdf_pdf_blocked: a few fit in cache
_SQRT_HALF = math.sqrt(0.5)                      # 1/√2
_LOG_INV_SQRT_2PI = -0.5 * math.log(2 * math.pi)  # log φ(0) = log(1/√(2π))
_AS_P = 0.3275911                                # Abramowitz & Stegun 7.1.26: erfc(a) = poly(t) e^(−a²), t = 1/(1 + p a)
_AS_POLY = [c * 0.5 * math.sqrt(2 * math.pi)     # ... its coefficients times ½√(2π): then tail = poly(t) φ(x)
            for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)        # √(2/π), in the tanh approximation
_GELU_CUBIC = 0.044715                           # the x³ coefficient of the tanh approximation


def _normal_cdf_pdf(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Φ(x) and φ(x), the standard normal distribution function and density, elementwise in x's floating dtype
    (float64 for other inputs); |error of Φ| < 1e-7 in float64, < 3e-7 in float32. Arrays of more than
    _BLOCK numbers go through _normal_cdf_pdf_blocked: the same steps, faster on large arrays."""
    x = np.asarray(x)
    x = x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float64)
    if x.size > _BLOCK:
        return _normal_cdf_pdf_blocked(x)
    c1, c2, c3, c4, c5 = _AS_POLY
    pdf = np.exp(-0.5 * x * x + _LOG_INV_SQRT_2PI)                     # φ(x) = e^(−x²/2) / √(2π)
    t = 1 / (1 + _AS_P * _SQRT_HALF * np.abs(x))
    tail = t * (c1 + t * (c2 + t * (c3 + t * (c4 + t * c5)))) * pdf   # ½ erfc(|x|/√2) = poly(t) φ(x)
    cdf = 0.5 + np.sign(x) * (0.5 - tail)                              # Φ(x)
    return cdf, pdf


def _normal_cdf_pdf_blocked(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """_normal_cdf_pdf for a floating array x, its steps in place (out=, *=) on blocks of _BLOCK numbers, so that
    each step finds its data in the processor's cache: on a GPT's (2048, 512) float32 activations Φ and φ took
    2.0 ms against 2.9 ms for the whole-array steps, and gelu's forward 2.5 ms against 3.1 ms (medians, one
    thread, two shared cores)."""
    flat = x.reshape(-1)
    cdf, pdf = np.empty_like(flat), np.empty_like(flat)
    t_buffer, tail_buffer = np.empty(min(flat.size, _BLOCK), flat.dtype), np.empty(min(flat.size, _BLOCK), flat.dtype)
    for start in range(0, flat.size, _BLOCK):
        xs, c, p = flat[start:start + _BLOCK], cdf[start:start + _BLOCK], pdf[start:start + _BLOCK]
        t, tail = t_buffer[:len(xs)], tail_buffer[:len(xs)]
        np.multiply(xs, xs, out=p)                            # φ(x) = e^(−x²/2) / √(2π)
        p *= -0.5
        p += _LOG_INV_SQRT_2PI
        np.exp(p, out=p)
        np.abs(xs, out=t)                                     # t = 1 / (1 + p |x|/√2)
        t *= _AS_P * _SQRT_HALF
        t += 1
        np.divide(1, t, out=t)
        np.multiply(t, _AS_POLY[4], out=tail)                 # tail = poly(t) φ(x), by Horner
        for coefficient in _AS_POLY[3::-1]:
            tail += coefficient
            tail *= t
        tail *= p
        np.sign(xs, out=t)                                    # Φ(x) = ½ + sign(x) (½ − tail)
        np.subtract(0.5, tail, out=c)
        c *= t
        c += 0.5
    return cdf.reshape(x.shape), pdf.reshape(x.shape)

# %%
x = np.linspace(-8, 8, 4001)
exact_cdf = 0.5 * (1 + np.vectorize(math.erf)(x * _SQRT_HALF))
cdf, pdf = _normal_cdf_pdf(x)
assert np.max(np.abs(cdf - exact_cdf)) < 1e-7 and np.allclose(pdf, np.exp(-x * x / 2) / math.sqrt(2 * math.pi))
x32 = np.concatenate([np.linspace(-8, 8, 100001, dtype=np.float32), np.zeros(_BLOCK, np.float32)])  # 4 blocks
assert np.max(np.abs(_normal_cdf_pdf(x32)[0] - 0.5 * (1 + np.vectorize(math.erf)(x32.astype(np.float64) * _SQRT_HALF)))) < 3e-7
assert _normal_cdf_pdf(np.float32(0.5))[0].dtype == np.float32 and _normal_cdf_pdf(np.array([1e4, -1e4]))[0].tolist() == [1.0, 0.0]

# %% [markdown]
# ### The tanh approximation
#
# Before fast erf implementations were common on accelerators, GELU was computed with tanh instead:
#
#     gelu(x) ≈ ½ x (1 + tanh(u)),        u = √(2/π) (x + 0.044715 x³)
#
# (the original GPT-2 code does this, and PyTorch offers it as `F.gelu(x, approximate='tanh')`). It
# differs from the exact GELU by less than 5e-4 everywhere. Its derivative, with t = tanh(u) and
# the chain rule through u:
#
#     d/dx = ½ (1 + t) + ½ x (1 − t²) · √(2/π) (1 + 3 · 0.044715 x²)
#
# `gelu(input, approximate='none')` chooses: `'none'` is the exact form, `'tanh'` the approximation,
# and anything else is a `ValueError` naming the allowed values (PyTorch does the same). One Function
# holds both modes: forward stores the mode on `ctx`, backward branches on it.
#
# Task 03.4 is the exact form (the `approximate == "none"` branches), task 03.5 the tanh form and the
# `ValueError` (the rest of forward and backward). Do 03.4 first; its test runs on its own.

# %%
#| export
class _GELU(Function):
    """y = x Φ(x) (approximate='none') or ½ x (1 + tanh(√(2/π) (x + 0.044715 x³))) (approximate='tanh')"""

    @staticmethod
    def forward(ctx, x, approximate="none"):
        ctx.approximate = approximate
        if approximate == "none":
            cdf, pdf = _normal_cdf_pdf(x)                       # Φ(x), φ(x)
            ### BEGIN SOLUTION 03.4 gelu
            out = x * cdf                                       # gelu(x) = x Φ(x)
            slope = cdf + x * pdf                               # gelu′(x) = Φ(x) + x φ(x)
            ### END SOLUTION
            ctx.save_for_backward(slope)                        # backward multiplies by it
            return out
        # approximate is 'tanh' here, or a mistake: a ValueError naming the allowed values
        ctx.save_for_backward(x)
        ### BEGIN SOLUTION 03.5 gelu tanh approximation
        if approximate != "tanh":
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        return 0.5 * x * (1 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x ** 3)))
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.approximate == "none":
            (slope,) = ctx.saved_tensors                        # gelu′(x), saved by forward
            ### BEGIN SOLUTION 03.4 gelu
            return (grad_output * slope,)
            ### END SOLUTION
        (x,) = ctx.saved_tensors
        ### BEGIN SOLUTION 03.5 gelu tanh approximation
        t = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x ** 3))
        du_dx = _SQRT_2_OVER_PI * (1 + 3 * _GELU_CUBIC * x * x)
        return (grad_output * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du_dx),)
        ### END SOLUTION

# %%
#| export nn.functional
def gelu(input, approximate="none"):
    """input · Φ(input) elementwise; approximate='tanh' uses the tanh approximation"""
    return _GELU.apply(input, approximate=approximate)

# %%
x = Tensor(np.array([-1e4, -3.0, -0.75, 0.0, 1.0, 1e4], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", invalid="raise"):
    y = gelu(x)
    y.backward(Tensor(np.ones(6, dtype=np.float32)))
exact = np.array([0.0, -0.00404969, -0.16997051, 0.0, 0.84134475, 1e4])
assert y.dtype == np.float32 and np.allclose(y.data, exact, rtol=1e-5, atol=1e-6), y
assert np.all(np.isfinite(x.grad.data)) and x.grad.data[0] == 0.0 and x.grad.data[-1] == 1.0
assert abs(x.grad.data[3] - 0.5) < 1e-7, "gelu'(0) = Φ(0) = 0.5"
assert gradcheck(gelu, leaf(3, 4, scale=2.0))

# %%
x = Tensor(np.array([-1e4, -3.0, -0.75, 0.0, 1.0, 1e4], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", invalid="raise"):
    y = gelu(x, approximate="tanh")
    y.backward(Tensor(np.ones(6, dtype=np.float32)))
assert y.dtype == np.float32 and np.allclose(y.data, exact, atol=5e-4) and y.data[-1] == 1e4
assert np.all(np.isfinite(x.grad.data)) and x.grad.data[0] == 0.0 and x.grad.data[-1] == 1.0
assert gradcheck(lambda t: gelu(t, approximate="tanh"), leaf(3, 4, scale=2.0))
try:
    gelu(x, approximate="erf")
    raise AssertionError("gelu(x, approximate='erf') must raise ValueError")
except ValueError as error:
    assert "'none'" in str(error) and "'tanh'" in str(error), error

# %% [markdown]
# ## Softmax
#
# A classifier's last layer produces one score (*logit*) per class; softmax turns a vector of logits
# into a probability distribution:
#
#     softmax(x)ᵢ = eˣⁱ / Σⱼ eˣʲ
#
# Every output is in (0, 1), they sum to 1, and the order of the logits is kept. Unlike the functions
# above it is **not elementwise**: each output depends on the whole vector. For a batch of logits of
# shape (N, C) we want one distribution per row, so softmax takes a `dim` (as in PyTorch) along which
# it normalises: `softmax(x, dim=-1)` (the default here) makes every row sum to 1, `dim=0` every
# column. A (B, heads, T, T) attention-score tensor uses `dim=-1` too. Every reduction below is
# along `dim` with `keepdims=True`, so the result broadcasts back against x.
#
# ### The max trick
#
# e¹⁰⁰ already overflows float32, so softmax([100, 0]) computed as written is inf / inf = NaN. But
# softmax does not change when the same constant c is subtracted from every logit:
#
#     e^(xᵢ − c) / Σⱼ e^(xⱼ − c) = (e⁻ᶜ eˣⁱ) / (e⁻ᶜ Σⱼ eˣʲ) = eˣⁱ / Σⱼ eˣʲ
#
# Choose c = max(x): then every exponent is ≤ 0, so every eˣⁱ⁻ᶜ is in (0, 1] (no overflow), and the
# largest is exactly 1, so the sum is ≥ 1 (no division by 0, even when all the others underflow).
# softmax([1e4, 0, −1e4]) becomes softmax([0, −1e4, −2e4]) = [1, 0, 0], as it should.
#
# Forward saves its output y (and `dim`): the backward needs nothing else.

# %%
#| export
class _Softmax(Function):
    """y = exp(x - max) / sum(exp(x - max)) along dim; backward in task 03.8"""

    @staticmethod
    def forward(ctx, x, dim=-1):
        ### BEGIN SOLUTION 03.6 softmax forward
        exps = np.exp(x - x.max(axis=dim, keepdims=True))        # every exponent <= 0
        y = exps / exps.sum(axis=dim, keepdims=True)
        ### END SOLUTION
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        ### BEGIN SOLUTION 03.8 softmax backward
        return (y * (grad_output - (grad_output * y).sum(axis=ctx.dim, keepdims=True)),)
        ### END SOLUTION

# %%
#| export nn.functional
def softmax(input, dim=-1):
    """exp(input) / sum(exp(input)) along dim (stable: the max is subtracted first)"""
    return _Softmax.apply(input, dim=dim)

# %%
x = Tensor(np.array([[1.0, 2.0, 3.0], [1e4, 0.0, -1e4]], dtype=np.float32))
with np.errstate(over="raise", invalid="raise"):
    y = softmax(x)
assert y.dtype == np.float32 and y.shape == (2, 3)
assert np.allclose(y.data[0], np.exp([1.0, 2.0, 3.0]) / np.exp([1.0, 2.0, 3.0]).sum())
assert y.data[1].tolist() == [1.0, 0.0, 0.0]
assert np.allclose(softmax(x, dim=0).data.sum(axis=0), 1.0) and softmax(x, dim=-2).shape == (2, 3)
assert np.allclose(softmax(Tensor(rng.standard_normal((2, 3, 4))), dim=1).data.sum(axis=1), 1.0)
assert softmax([0.0, 0.0]).data.tolist() == [0.5, 0.5]

# %% [markdown]
# ## Softmax from Tensor ops
#
# Before writing softmax's backward by hand, build a second softmax from the `Tensor` operations of 01
# and 02 only: `x - x.max(axis=dim, keepdims=True)`, `.exp()`, `.sum(axis=dim, keepdims=True)`, `/`.
# Autograd differentiates it with no backward of yours, so it is a *reference* for the hand-written
# one (and the way you would write a new function for which you have not yet derived a gradient).
#
# Does the gradient flowing through the max do harm? No: softmax does not depend on c at all, so the
# total gradient that reaches the max is exactly 0 (up to round-off). PyTorch code often writes
# `x.max(...).detach()` to skip that useless path; you may.
#
# The private name `_softmax_composed` says it is not part of the API: it is here to be compared. Its
# cell is exported only so the grader can test it on its own (nothing in the package calls it): the
# grader reaches it as `tinytorch.core.activations._softmax_composed`; it is not part of `tt`'s surface.

# %%
#| export
def _softmax_composed(input, dim=-1):
    """softmax along dim from Tensor ops only (max, -, exp, sum, /): autograd derives its backward"""
    ### BEGIN SOLUTION 03.7 softmax from Tensor ops
    exps = (input - input.max(axis=dim, keepdims=True)).exp()
    return exps / exps.sum(axis=dim, keepdims=True)
    ### END SOLUTION

# %%
x = Tensor(np.array([[1.0, 2.0, 3.0], [1e4, 0.0, -1e4]], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", invalid="raise"):
    composed = _softmax_composed(x)
assert composed.dtype == np.float32 and composed.requires_grad
assert np.allclose(composed.data, softmax(x).data) and composed.data[1].tolist() == [1.0, 0.0, 0.0]
assert np.allclose(_softmax_composed(x, dim=0).data, softmax(x, dim=0).data)
assert gradcheck(lambda t: _softmax_composed(t, dim=-1), leaf(3, 4))

# %% [markdown]
# ## Softmax backward, by hand
#
# Write s = softmax(x) along one row (the other rows are independent). The quotient rule on
# sᵢ = eˣⁱ / Σ gives
#
#     ∂sᵢ/∂xⱼ = sᵢ (δᵢⱼ − sⱼ)        i.e.   J = diag(s) − s sᵀ
#
# The Jacobian is C × C per row: for a language model with a vocabulary of 50,000 that is 2.5 billion
# numbers per position, never to be built. The vector-Jacobian product is cheap (J is symmetric):
#
#     ḡ_x = J ḡ_s = s ⊙ ḡ_s − s (sᵀ ḡ_s) = s ⊙ (ḡ_s − ⟨ḡ_s, s⟩)
#
# where ⟨ḡ_s, s⟩ = Σⱼ ḡ_s,ⱼ sⱼ is one number per row: in numpy, `(grad_output * y).sum(axis=dim,
# keepdims=True)`, which broadcasts back along `dim`. Two elementwise products and one reduction: the
# same cost as the forward.
#
# A classic mistake is to keep only the diagonal, `grad_output * y * (1 - y)` (sigmoid's derivative):
# it forgets that raising one logit lowers every other probability. Gradcheck catches it, as the cell
# after the task shows. Write `_Softmax.backward` in the cell that defines `class _Softmax` above (task
# 03.8), run that cell again, then run the checks below.

# %%
for dim in (0, 1, -1):
    assert gradcheck(lambda t: softmax(t, dim=dim), leaf(3, 4))
    assert gradcheck(lambda t: _softmax_composed(t, dim=dim), leaf(3, 4))
assert gradcheck(lambda t: softmax(t, dim=1), leaf(2, 3, 4))
assert gradcheck(lambda t: softmax(t, dim=-1), Tensor(np.array([[1e4, 0.0, -1e4], [3.0, 2.0, 1.0]]), requires_grad=True))

# the hand-written backward and autograd through the composed version agree
x, g = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
hand, auto = Tensor(x, requires_grad=True), Tensor(x, requires_grad=True)
softmax(hand, dim=0).backward(Tensor(g))
_softmax_composed(auto, dim=0).backward(Tensor(g))
assert np.allclose(hand.grad.data, auto.grad.data, atol=1e-12)


class _DiagonalOnlySoftmax(_Softmax):
    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        diagonal = y - y ** 2                                       # J_ii = y_i (1 - y_i)
        return (diagonal * grad_output,)                            # wrong: the rest of J is left out


try:
    gradcheck(lambda t: _DiagonalOnlySoftmax.apply(t, dim=-1), leaf(2, 3))
    raise AssertionError("gradcheck must reject the diagonal-only backward")
except RuntimeError as error:
    print("as expected:", error)

# %% [markdown]
# What did the hand-written Function buy? The composed softmax is five nodes in the graph (max, −,
# exp, sum, /), each keeping its arrays alive until backward; the Function is one node holding one
# array, and its backward is one numpy expression instead of five. The cell below counts the nodes
# and times both, forward and backward, on a (256, 1000) batch.

# %%
x = rng.standard_normal((256, 1000)).astype(np.float32)
for name, fn in [("Function (hand-written backward)", softmax), ("composed from Tensor ops", _softmax_composed)]:
    leaf_x = Tensor(x, requires_grad=True)
    start = time.perf_counter()
    for _ in range(10):
        leaf_x.grad = None
        y = fn(leaf_x, dim=-1)
        y.backward(Tensor(np.ones_like(x)))
    seconds = (time.perf_counter() - start) / 10
    print(f"{name:34s} {len(topological_sort(y)) - 1} node(s) after the input, {1000 * seconds:.1f} ms")

# %% [markdown]
# ## Log-softmax
#
# Cross-entropy (module 05) needs log sᵢ, the log-probability of the right class. `log(softmax(x))`
# is correct in exact arithmetic and wrong in float32: softmax([0, −200]) = [1, e⁻²⁰⁰], and e⁻²⁰⁰
# underflows to 0, so the log is −inf, although the true answer, −200, is a perfectly ordinary number.
# A network that is confidently wrong then gets an infinite loss and NaN gradients. Take the log
# analytically instead:
#
#     log_softmax(x)ᵢ = xᵢ − log Σⱼ eˣʲ = (xᵢ − m) − log Σⱼ e^(xⱼ − m),      m = max(x)
#
# With the max subtracted, the sum is between 1 and C, so its log is between 0 and log C: no overflow,
# no log(0), and every output is exact up to round-off. log_softmax([1e4, 0, −1e4]) =
# [0, −1e4, −2e4], exactly. (m + log Σⱼ e^(xⱼ − m) is the *log-sum-exp trick*; PyTorch's
# `torch.logsumexp` computes it the same way, and 05's cross-entropy uses it again.)
#
# Forward (task 03.9) saves its output y and `dim`.

# %% [markdown]
# ### Its backward
#
# With y = log_softmax(x) along a row, ∂yᵢ/∂xⱼ = δᵢⱼ − sⱼ (s = softmax(x) = e^y), so
#
#     ḡ_x = ḡ_y − s · Σᵢ ḡ_y,ᵢ
#
# (the sum along `dim` with `keepdims=True`, one number per row). s is `np.exp(y)`: y ≤ 0, so this
# exp cannot overflow either. Task 03.10.

# %%
#| export
class _LogSoftmax(Function):
    """y = x - max - log(sum(exp(x - max))) along dim; dy/dx: g - softmax(x) * sum(g)"""

    @staticmethod
    def forward(ctx, x, dim=-1):
        ### BEGIN SOLUTION 03.9 log_softmax forward
        shifted = x - x.max(axis=dim, keepdims=True)                   # max 0 along dim
        y = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        ### END SOLUTION
        ctx.save_for_backward(y)
        ctx.dim = dim
        return y

    @staticmethod
    def backward(ctx, grad_output):
        (y,) = ctx.saved_tensors
        ### BEGIN SOLUTION 03.10 log_softmax backward
        return (grad_output - np.exp(y) * grad_output.sum(axis=ctx.dim, keepdims=True),)
        ### END SOLUTION

# %%
#| export nn.functional
def log_softmax(input, dim=-1):
    """log(softmax(input)) along dim, computed stably as input - max - log(sum(exp(input - max)))"""
    return _LogSoftmax.apply(input, dim=dim)

# %%
x = Tensor(np.array([[1.0, 2.0, 3.0], [1e4, 0.0, -1e4]], dtype=np.float32))
with np.errstate(over="raise", invalid="raise", divide="raise"):
    y = log_softmax(x)
assert y.dtype == np.float32 and y.data[1].tolist() == [0.0, -1e4, -2e4]
assert np.allclose(y.data[0], np.log(softmax(x).data[0]))
assert log_softmax(Tensor(np.array([0.0, -200.0], dtype=np.float32))).data.tolist() == [0.0, -200.0]
assert np.allclose(np.exp(log_softmax(x, dim=0).data).sum(axis=0), 1.0)

# %%
for dim in (0, 1, -1):
    assert gradcheck(lambda t: log_softmax(t, dim=dim), leaf(3, 4))
assert gradcheck(lambda t: log_softmax(t, dim=-2), leaf(2, 3, 4))
assert gradcheck(lambda t: log_softmax(t), Tensor(np.array([[1e4, 0.0, -1e4], [3.0, 2.0, 1.0]]), requires_grad=True))
x = Tensor(np.array([[1e4, 0.0, -1e4]], dtype=np.float32), requires_grad=True)
with np.errstate(over="raise", invalid="raise", divide="raise"):
    log_softmax(x).backward(Tensor(np.array([[1.0, 2.0, 3.0]], dtype=np.float32)))
assert x.grad.data.tolist() == [[-5.0, 2.0, 3.0]], x.grad

# %% [markdown]
# ## Putting it together
#
# A two-layer classifier on random data, forward and backward, with the activations of this module
# only; then gradcheck on the whole thing in float64. Module 04 wraps the same computation in
# `nn.Linear` and `nn.ReLU`, and module 05 replaces the hand-made loss by `F.cross_entropy`, which is
# `log_softmax` plus picking the right class.
#
# | here | PyTorch |
# |---|---|
# | `tt.nn.functional.relu(x)` | `torch.nn.functional.relu(x)`, `torch.relu(x)` |
# | `sigmoid(x)`, `tanh(x)` | `torch.sigmoid(x)`, `torch.tanh(x)` (also in `F`) |
# | `gelu(x, approximate='tanh')` | `F.gelu(x, approximate='tanh')` |
# | `softmax(x, dim=1)`, `log_softmax(x, dim=1)` | `F.softmax(x, dim=1)`, `F.log_softmax(x, dim=1)` |
# | `nn.ReLU()`, `nn.Softmax(dim=1)` (module 04) | `nn.ReLU()`, `nn.Softmax(dim=1)` |

# %%
def classifier_loss(x, w1, w2, labels_one_hot):
    hidden = gelu(x @ w1) + relu(x @ w1) * sigmoid(x @ w1) + tanh(x @ w1)       # (N, H)
    log_probs = log_softmax(hidden @ w2, dim=1)                                # (N, C)
    return -(log_probs * labels_one_hot).sum() / x.shape[0] + softmax(hidden @ w2, dim=0).max()


x = Tensor(rng.standard_normal((8, 5)))
w1, w2 = leaf(5, 6, scale=0.5), leaf(6, 3, scale=0.5)
labels = Tensor(np.eye(3)[rng.integers(0, 3, 8)])
loss = classifier_loss(x, w1, w2, labels)
loss.backward()
assert w1.grad.shape == (5, 6) and w2.grad.shape == (6, 3)
assert gradcheck(classifier_loss, x, leaf(5, 6, scale=0.5), leaf(6, 3, scale=0.5), labels)
