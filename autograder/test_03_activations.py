"""Hidden suite of 03_activations: relu, sigmoid, tanh, gelu, softmax, log_softmax (tt.nn.functional) and
_softmax_composed against float64 numpy references.

Forward values: float32 inputs, float32 results (exact dtype), compared with the float64 reference cast
to float32. Gradients: float64 inputs, x.grad after (f(x) * w).sum().backward() with a random w,
against float64 central differences on every element. Stability: inputs of magnitude up to 1e4 must
give finite, correct values and gradients without a numpy warning. Every `expected` uses numpy,
`math.erf` and `checklib.central_difference` only; every `compute` returns plain data.
"""

import importlib
import math
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import arrays, capture_error, central_difference, check, floats_arrays, shapes, signed_arrays

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
FLOAT32_GRAD_TOL = {"rtol": 1e-4, "atol": 1e-4}


# ---------------------------------------------------------------------------------------------------
# compute helpers: run the package under test (they travel to the sandbox)


def _function(tt, name):
    """tt.nn.functional.<name>, or a private function of tinytorch/core/activations.py."""
    if name.startswith("_"):
        return getattr(importlib.import_module(tt.__name__ + ".core.activations"), name)
    return getattr(tt.nn.functional, name)


def _forward(tt, case):
    return _function(tt, case["fn"])(tt.Tensor(case["x"]), **case["params"]).numpy()


def _values_and_gradient(tt, case):
    """f(x) and x.grad after (f(x) * w).sum().backward()."""
    x = tt.Tensor(case["x"], requires_grad=True)
    y = _function(tt, case["fn"])(x, **case["params"])
    (y * tt.Tensor(case["w"])).sum().backward()
    return y.numpy(), None if x.grad is None else x.grad.numpy()


def _gradient(tt, case):
    return _values_and_gradient(tt, case)[1]


def _function_class(tt, name):
    """A private Function of tinytorch/core/activations.py, called directly on numpy arrays (no engine)."""
    return getattr(importlib.import_module(tt.__name__ + ".core.activations"), name)


def _direct_backward(tt, case):
    """Function.forward(ctx, x, dim=...) then Function.backward(ctx, w) on numpy arrays: the input gradient."""
    function = _function_class(tt, case["function"])
    ctx = tt.Context()
    function.forward(ctx, case["x"], **case["params"])
    return function.backward(ctx, case["w"])[0]


def _quietly(fn):
    """fn() with numpy's floating-point warnings recorded: (result, the warnings' messages joined)."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(over="warn", invalid="warn", divide="warn"):
        warnings.simplefilter("always")
        result = fn()
    return result, "; ".join(sorted({str(warning.message) for warning in caught}))


def _stable_forward(tt, case):
    values, warned = _quietly(lambda: _forward(tt, case))
    return {"values": values, "numpy warnings": warned}


def _stable_gradient(tt, case):
    (values, grad), warned = _quietly(lambda: _values_and_gradient(tt, case))
    return {"values": values, "gradient": grad, "numpy warnings": warned}


def _graph(tt, case):
    fn = _function(tt, case["fn"])
    x = tt.Tensor(case["x"], requires_grad=True)
    y = fn(x, **case["params"])
    with tt.no_grad():
        z = fn(x, **case["params"])
    return {"returns a Tensor": isinstance(y, tt.Tensor), "requires_grad": bool(y.requires_grad),
            "grad_fn set": y.grad_fn is not None, "under no_grad, requires_grad": bool(z.requires_grad),
            "under no_grad, grad_fn set": z.grad_fn is not None}


# ---------------------------------------------------------------------------------------------------
# references (float64 numpy and math.erf) and strategies: these stay with the judge


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + _erf(x / math.sqrt(2)))


def _softmax(x, dim=-1):
    exps = np.exp(x - x.max(axis=dim, keepdims=True))
    return exps / exps.sum(axis=dim, keepdims=True)


def _log_softmax(x, dim=-1):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


REFERENCE = {
    "relu": lambda x: np.maximum(x, 0.0),
    "sigmoid": lambda x: np.exp(-np.logaddexp(0.0, -x)),
    "tanh": np.tanh,
    "gelu": _gelu,
    "softmax": _softmax,
    "_softmax_composed": _softmax,
    "log_softmax": _log_softmax,
}


def _reference(case, x=None):
    x = np.asarray(case["x"] if x is None else x, dtype=np.float64)
    return np.asarray(REFERENCE[case["fn"]](x, **case["params"]), dtype=np.float64)


def _expected_forward(case):
    return _reference(case).astype(case["x"].dtype)


def _expected_gradient(case):
    return central_difference(lambda x: _reference(case, x), [case["x"]], case["w"])[0]


def _expected_stable_forward(case):
    return {"values": _expected_forward(case), "numpy warnings": ""}


def _expected_stable_gradient(case):
    return {"values": _expected_forward(case), "gradient": _expected_gradient(case).astype(case["x"].dtype),
            "numpy warnings": ""}


def _expected_graph(case):
    return {"returns a Tensor": True, "requires_grad": True, "grad_fn set": True,
            "under no_grad, requires_grad": False, "under no_grad, grad_fn set": False}






def _large(shape):
    """float32 arrays of magnitude up to 1e4, the first element ±1e4 for sure."""
    elements = st.one_of(st.sampled_from([1e4, -1e4, 0.0, 9999.0, -5000.0, 88.0, -104.0]),
                         st.floats(-1e4, 1e4, allow_nan=False, width=32))
    sign = st.sampled_from([1e4, -1e4])
    return st.tuples(hnp.arrays(np.float32, shape, elements=elements, fill=st.nothing()), sign).map(
        lambda pair: np.concatenate([[pair[1]], pair[0].reshape(-1)[1:]]).astype(np.float32).reshape(shape))


def _params(fn, ndim, approximate=None):
    """The keyword arguments of a call: a dim (maybe negative) for softmax and log_softmax."""
    if fn in ("softmax", "log_softmax", "_softmax_composed"):
        return st.integers(-ndim, ndim - 1).map(lambda dim: {"dim": dim})
    if approximate is not None:
        return st.just({"approximate": approximate})
    return st.just({})


def _inputs(fn, values, *, min_dims=0, max_dims=4, max_side=5, approximate=None, upstream=False, params=None):
    """A case {"fn", "x", "params"} (and "w", an upstream weight of x's shape, for gradients)."""
    def build(shape):
        parts = {"fn": st.just(fn), "x": values(shape),
                 "params": params if params is not None else _params(fn, len(shape), approximate)}
        if upstream:
            parts["w"] = signed_arrays(shape, 0.25, 2.0)
        return st.fixed_dictionaries(parts)
    return shapes(min_dims=min_dims, max_dims=max_dims, max_side=max_side).flatmap(build)


def _call(case):
    args = "".join(f", {name}={value!r}" for name, value in case["params"].items())
    return f"{case['fn']}(x{args})"


def _x_words(case):
    return f"a {case['x'].dtype} x of shape {case['x'].shape}"


def _forward_words(case):
    return f"{_call(case)} for {_x_words(case)}"


def _gradient_words(case):
    return f"x.grad after ({_call(case)} * w).sum().backward() for {_x_words(case)}"


def _stable_words(case):
    return f"{_call(case)} for {_x_words(case)} with values of magnitude up to 1e4"


def _stable_gradient_words(case):
    return (f"{_call(case)} and x.grad after ({_call(case)} * w).sum().backward() for {_x_words(case)} with "
            f"values of magnitude up to 1e4")


def _graph_words(case):
    return f"{_call(case)} for x with requires_grad=True, and again under tt.no_grad()"


def _float32(shape):
    return arrays(shape, np.float32, -10.0, 10.0)


def _away_from_zero(shape):
    return signed_arrays(shape, 0.05, 3.0)


def _graph_inputs(fn):
    return _inputs(fn, lambda shape: floats_arrays(shape, dtype=np.float32), min_dims=1, max_dims=2)


# ---------------------------------------------------------------------------------------------------
# 03.1 relu


@check(task="03.1", points=1, dtype=True, inputs=_inputs("relu", _float32), describe=_forward_words)
def relu_forward_values(tt, case):
    return _forward(tt, case)


@check(task="03.1", points=2, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("relu", _away_from_zero, max_dims=3, max_side=4, upstream=True))
def relu_gradient(tt, case):
    return _gradient(tt, case)


@check(task="03.1", points=1, describe=lambda case: "x.grad after (relu(x) * w).sum().backward() for "
                                                    "x = [-1, 0, 0, 2], w = [1, 2, 3, 4] (0 at x = 0, like PyTorch)")
def relu_gradient_at_zero_is_zero(tt, case):
    x = tt.Tensor(np.array([-1.0, 0.0, 0.0, 2.0]), requires_grad=True)
    (tt.nn.functional.relu(x) * tt.Tensor(np.array([1.0, 2.0, 3.0, 4.0]))).sum().backward()
    return x.grad.numpy()


@relu_gradient_at_zero_is_zero.expected
def _(case):
    return np.array([0.0, 0.0, 0.0, 4.0])


@check(task="03.1", points=1, describe=lambda case: "relu of the list [[-1.5, 2.0], [0.5, -3.0]] and of a "
                                                    "float64 numpy array: [values, dtype, values, dtype]")
def relu_accepts_lists_and_numpy_arrays(tt, case):
    from_list = tt.nn.functional.relu([[-1.5, 2.0], [0.5, -3.0]])
    from_array = tt.nn.functional.relu(np.array([-1.5, 2.0, 0.25]))
    return [from_list.numpy(), str(from_list.dtype), from_array.numpy(), str(from_array.dtype)]


@relu_accepts_lists_and_numpy_arrays.expected
def _(case):
    return [np.array([[0.0, 2.0], [0.5, 0.0]], dtype=np.float32), "float32", np.array([0.0, 2.0, 0.25]), "float64"]


@check(task="03.1", points=1, inputs=_graph_inputs("relu"), describe=_graph_words)
def relu_records_a_graph_except_under_no_grad(tt, case):
    return _graph(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.2 sigmoid


@check(task="03.2", points=1, dtype=True, inputs=_inputs("sigmoid", _float32), describe=_forward_words)
def sigmoid_forward_values(tt, case):
    return _forward(tt, case)


@check(task="03.2", points=2, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("sigmoid", lambda shape: floats_arrays(shape, -6, 6), max_dims=3, max_side=4, upstream=True))
def sigmoid_gradient(tt, case):
    return _gradient(tt, case)


@check(task="03.2", points=2, dtype=True, inputs=_inputs("sigmoid", _large), describe=_stable_words)
def sigmoid_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_forward(tt, case)


@check(task="03.2", points=1, **FLOAT32_GRAD_TOL, describe=_stable_gradient_words,
       inputs=_inputs("sigmoid", _large, max_dims=2, max_side=4, upstream=True))
def sigmoid_gradient_is_finite_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_gradient(tt, case)


@check(task="03.2", points=1, inputs=_graph_inputs("sigmoid"), describe=_graph_words)
def sigmoid_records_a_graph_except_under_no_grad(tt, case):
    return _graph(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.3 tanh


@check(task="03.3", points=1, dtype=True, inputs=_inputs("tanh", _float32), describe=_forward_words)
def tanh_forward_values(tt, case):
    return _forward(tt, case)


@check(task="03.3", points=2, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("tanh", lambda shape: floats_arrays(shape, -4, 4), max_dims=3, max_side=4, upstream=True))
def tanh_gradient(tt, case):
    return _gradient(tt, case)


@check(task="03.3", points=1, **FLOAT32_GRAD_TOL, describe=_stable_gradient_words,
       inputs=_inputs("tanh", _large, max_dims=2, max_side=4, upstream=True))
def tanh_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_gradient(tt, case)


@check(task="03.3", points=1, inputs=_graph_inputs("tanh"), describe=_graph_words)
def tanh_records_a_graph_except_under_no_grad(tt, case):
    return _graph(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.4 gelu (exact)

_gelu_default_or_none = st.sampled_from([{}, {"approximate": "none"}])


@check(task="03.4", points=2, dtype=True, describe=_forward_words,
       inputs=_inputs("gelu", _float32, params=_gelu_default_or_none))
def gelu_forward_values(tt, case):
    return _forward(tt, case)


@check(task="03.4", points=2, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("gelu", floats_arrays, max_dims=3, max_side=4, upstream=True, params=_gelu_default_or_none))
def gelu_gradient(tt, case):
    return _gradient(tt, case)


@check(task="03.4", points=1, **FLOAT32_GRAD_TOL, describe=_stable_gradient_words,
       inputs=_inputs("gelu", _large, max_dims=2, max_side=4, upstream=True))
def gelu_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_gradient(tt, case)


@check(task="03.4", points=1, inputs=_graph_inputs("gelu"), describe=_graph_words)
def gelu_records_a_graph_except_under_no_grad(tt, case):
    return _graph(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.5 gelu (tanh approximation)


@check(task="03.5", points=2, dtype=True, inputs=_inputs("gelu", _float32, approximate="tanh"),
       describe=_forward_words)
def gelu_tanh_forward_values(tt, case):
    return _forward(tt, case)


@check(task="03.5", points=2, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("gelu", floats_arrays, max_dims=3, max_side=4, approximate="tanh", upstream=True))
def gelu_tanh_gradient(tt, case):
    return _gradient(tt, case)


@check(task="03.5", points=1, **FLOAT32_GRAD_TOL, describe=_stable_gradient_words,
       inputs=_inputs("gelu", _large, max_dims=2, max_side=4, approximate="tanh", upstream=True))
def gelu_tanh_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_gradient(tt, case)


@check(task="03.5", points=1, inputs=st.sampled_from(["erf", "exact", "Tanh", "sigmoid", ""]).map(
           lambda approximate: {"approximate": approximate}),
       describe=lambda case: f"gelu(x, approximate={case['approximate']!r}): [the error raised, whether its "
                             f"message names 'none' and 'tanh']")
def gelu_rejects_an_unknown_approximation(tt, case):
    x = tt.Tensor(np.array([0.5, -1.0], dtype=np.float32))
    error = capture_error(lambda: tt.nn.functional.gelu(x, approximate=case["approximate"]))
    return [error["raised"], "none" in error["message"] and "tanh" in error["message"]]


@gelu_rejects_an_unknown_approximation.expected
def _(case):
    return ["ValueError", True]


# ---------------------------------------------------------------------------------------------------
# 03.6 softmax forward


@check(task="03.6", points=2, dtype=True, inputs=_inputs("softmax", _float32, min_dims=1), describe=_forward_words)
def softmax_forward_values_on_any_dim(tt, case):
    return _forward(tt, case)


@check(task="03.6", points=1, dtype=True, inputs=_inputs("softmax", _float32, min_dims=1, max_dims=3),
       describe=lambda case: f"_Softmax.forward(ctx, x, dim={case['params']['dim']}) called directly on {_x_words(case)} "
                             f"(a numpy array in, a numpy array of its dtype out)")
def softmax_function_forward_on_a_numpy_array(tt, case):
    return _function_class(tt, "_Softmax").forward(tt.Context(), case["x"], **case["params"])


@check(task="03.6", points=1, inputs=_inputs("softmax", lambda shape: arrays(shape, np.float32, -50, 50), min_dims=1),
       describe=lambda case: f"{_forward_words(case)}, summed along dim {case['params']['dim']}")
def softmax_sums_to_one_along_dim(tt, case):
    return _forward(tt, case).sum(axis=case["params"]["dim"])


@softmax_sums_to_one_along_dim.expected
def _(case):
    return np.ones(np.delete(case["x"].shape, case["params"]["dim"]), dtype=np.float32)


@check(task="03.6", points=1, dtype=True,
       describe=lambda case: "softmax(x, dim=1) for the float32 x = [[1e4, 0, -1e4], [-1e4, 1e4, 1e4]]")
def softmax_of_huge_logits_is_one_hot(tt, case):
    x = tt.Tensor(np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]], dtype=np.float32))
    return _quietly(lambda: tt.nn.functional.softmax(x, dim=1).numpy())[0]


@softmax_of_huge_logits_is_one_hot.expected
def _(case):
    return np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]], dtype=np.float32)


@check(task="03.6", points=2, dtype=True, inputs=_inputs("softmax", _large, min_dims=1), describe=_stable_words)
def softmax_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_forward(tt, case)


@check(task="03.6", points=1, inputs=_graph_inputs("softmax"), describe=_graph_words)
def softmax_records_a_graph_except_under_no_grad(tt, case):
    return _graph(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.7 _softmax_composed (Tensor ops only)


@check(task="03.7", points=1, dtype=True, inputs=_inputs("_softmax_composed", _float32, min_dims=1),
       describe=_forward_words)
def softmax_composed_forward_values_on_any_dim(tt, case):
    return _forward(tt, case)


@check(task="03.7", points=2, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("_softmax_composed", floats_arrays, min_dims=1, max_dims=3, max_side=4, upstream=True))
def softmax_composed_gradient_through_autograd(tt, case):
    return _gradient(tt, case)


@check(task="03.7", points=1, dtype=True, inputs=_inputs("_softmax_composed", _large, min_dims=1),
       describe=_stable_words)
def softmax_composed_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_forward(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.8 softmax backward (hand-written)


@check(task="03.8", points=3, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("softmax", floats_arrays, min_dims=1, max_dims=3, max_side=4, upstream=True))
def softmax_gradient_on_any_dim(tt, case):
    return _gradient(tt, case)


@check(task="03.8", points=2, **FLOAT32_GRAD_TOL, describe=_stable_gradient_words,
       inputs=_inputs("softmax", _large, min_dims=1, max_dims=2, max_side=4, upstream=True))
def softmax_gradient_is_finite_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_gradient(tt, case)


@check(task="03.8", points=2, **GRAD_TOL,
       inputs=_inputs("softmax", floats_arrays, min_dims=1, max_dims=3, max_side=4, upstream=True).map(
           lambda case: {**case, "function": "_Softmax"}),
       describe=lambda case: f"_Softmax.backward(ctx, w) called directly after _Softmax.forward(ctx, x, "
                             f"dim={case['params']['dim']}) on numpy arrays, {_x_words(case)}")
def softmax_backward_on_numpy_arrays(tt, case):
    return _direct_backward(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.9 log_softmax forward


@check(task="03.9", points=2, dtype=True, inputs=_inputs("log_softmax", _float32, min_dims=1),
       describe=_forward_words)
def log_softmax_forward_values_on_any_dim(tt, case):
    return _forward(tt, case)


@check(task="03.9", points=1, dtype=True, rtol=0, atol=0,
       describe=lambda case: "log_softmax(x) for the float32 x = [[1e4, 0, -1e4], [0, -200, -1e4]] "
                             "(exact: [[0, -1e4, -2e4], [0, -200, -1e4]])")
def log_softmax_of_huge_logits_is_exact(tt, case):
    x = tt.Tensor(np.array([[1e4, 0.0, -1e4], [0.0, -200.0, -1e4]], dtype=np.float32))
    return _quietly(lambda: tt.nn.functional.log_softmax(x).numpy())[0]


@log_softmax_of_huge_logits_is_exact.expected
def _(case):
    return np.array([[0.0, -1e4, -2e4], [0.0, -200.0, -1e4]], dtype=np.float32)


@check(task="03.9", points=2, dtype=True, inputs=_inputs("log_softmax", _large, min_dims=1), describe=_stable_words)
def log_softmax_is_stable_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_forward(tt, case)


@check(task="03.9", points=1, rtol=1e-10, atol=1e-12,
       inputs=_inputs("log_softmax", floats_arrays, min_dims=1, max_dims=3),
       describe=lambda case: f"[log_softmax(x, dim={case['params']['dim']}), np.log(softmax(x, "
                             f"dim={case['params']['dim']}))] for {_x_words(case)} with values in [-3, 3]")
def log_softmax_equals_log_of_softmax_in_float64(tt, case):
    x = tt.Tensor(case["x"])
    dim = case["params"]["dim"]
    return [tt.nn.functional.log_softmax(x, dim=dim).numpy(), np.log(tt.nn.functional.softmax(x, dim=dim).numpy())]


@log_softmax_equals_log_of_softmax_in_float64.expected
def _(case):
    expected = _reference(case)
    return [expected, expected]


@check(task="03.9", points=1, inputs=_graph_inputs("log_softmax"), describe=_graph_words)
def log_softmax_records_a_graph_except_under_no_grad(tt, case):
    return _graph(tt, case)


# ---------------------------------------------------------------------------------------------------
# 03.10 log_softmax backward


@check(task="03.10", points=3, **GRAD_TOL, describe=_gradient_words,
       inputs=_inputs("log_softmax", floats_arrays, min_dims=1, max_dims=3, max_side=4, upstream=True))
def log_softmax_gradient_on_any_dim(tt, case):
    return _gradient(tt, case)


@check(task="03.10", points=2, **FLOAT32_GRAD_TOL, describe=_stable_gradient_words,
       inputs=_inputs("log_softmax", _large, min_dims=1, max_dims=2, max_side=4, upstream=True))
def log_softmax_gradient_is_finite_for_inputs_of_magnitude_1e4(tt, case):
    return _stable_gradient(tt, case)


@check(task="03.10", points=1, **GRAD_TOL,
       inputs=_inputs("log_softmax", floats_arrays, min_dims=1, max_dims=3, max_side=4, upstream=True).map(
           lambda case: {**case, "function": "_LogSoftmax"}),
       describe=lambda case: f"_LogSoftmax.backward(ctx, w) called directly after _LogSoftmax.forward(ctx, x, "
                             f"dim={case['params']['dim']}) on numpy arrays, {_x_words(case)}")
def log_softmax_backward_on_numpy_arrays(tt, case):
    return _direct_backward(tt, case)


# ---------------------------------------------------------------------------------------------------
# one expected() per kind of check

for _check in (relu_forward_values, sigmoid_forward_values, softmax_function_forward_on_a_numpy_array, tanh_forward_values, gelu_forward_values,
               gelu_tanh_forward_values, softmax_forward_values_on_any_dim, softmax_composed_forward_values_on_any_dim,
               log_softmax_forward_values_on_any_dim):
    _check.expected(_expected_forward)

for _check in (relu_gradient, sigmoid_gradient, tanh_gradient, gelu_gradient, gelu_tanh_gradient,
               softmax_composed_gradient_through_autograd, softmax_gradient_on_any_dim, log_softmax_gradient_on_any_dim,
               softmax_backward_on_numpy_arrays, log_softmax_backward_on_numpy_arrays):
    _check.expected(_expected_gradient)

for _check in (sigmoid_is_stable_for_inputs_of_magnitude_1e4, softmax_is_stable_for_inputs_of_magnitude_1e4,
               softmax_composed_is_stable_for_inputs_of_magnitude_1e4, log_softmax_is_stable_for_inputs_of_magnitude_1e4):
    _check.expected(_expected_stable_forward)

for _check in (sigmoid_gradient_is_finite_for_inputs_of_magnitude_1e4, tanh_is_stable_for_inputs_of_magnitude_1e4,
               gelu_is_stable_for_inputs_of_magnitude_1e4, gelu_tanh_is_stable_for_inputs_of_magnitude_1e4,
               softmax_gradient_is_finite_for_inputs_of_magnitude_1e4,
               log_softmax_gradient_is_finite_for_inputs_of_magnitude_1e4):
    _check.expected(_expected_stable_gradient)

for _check in (relu_records_a_graph_except_under_no_grad, sigmoid_records_a_graph_except_under_no_grad,
               tanh_records_a_graph_except_under_no_grad, gelu_records_a_graph_except_under_no_grad,
               softmax_records_a_graph_except_under_no_grad, log_softmax_records_a_graph_except_under_no_grad):
    _check.expected(_expected_graph)
