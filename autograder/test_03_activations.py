"""Hidden suite of 03_activations: relu, sigmoid, tanh, gelu, softmax, log_softmax (tt.nn.functional) and
_softmax_composed against float64 numpy references.

Most checks are families over the activations (`forward_values[relu]`, `gradient[softmax]`, ...): the
variant names the function and its keyword arguments (CALLS), travels in the case, and each family's
table gives the task and points of each of its checks. Forward values: float32 in, float32 out (exact
dtype), against the float64 reference cast to float32. Gradients: float64 x, x.grad after
f(x).backward(g), against float64 central differences on every element. Stability: inputs of magnitude
up to 1e4 must give finite, correct values and gradients without a numpy warning.
"""

import math
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import (
    CheckFailed,
    arrays,
    capture_error,
    central_difference,
    check,
    floats_arrays,
    leaf_gradients,
    module,
    shapes,
    signed_arrays,
    upstream,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
FLOAT32_GRAD_TOL = {"rtol": 1e-4, "atol": 1e-4}
SOFTMAXES = ("softmax", "_softmax_composed", "log_softmax")

# ---------------------------------------------------------------------------------------------------
# compute helpers: run the package under test (they travel to the sandbox)


def _function(tt, name):
    """tt.nn.functional.<name>, or a private name of tinytorch/core/activations.py (_softmax_composed,
    the Functions _Softmax and _LogSoftmax)."""
    if name.startswith("_"):
        return getattr(module(tt, "activations"), name)
    return getattr(tt.nn.functional, name)


def _forward(tt, case):
    return _function(tt, case["fn"])(tt.Tensor(case["x"]), **case["params"]).numpy()


def _gradient(tt, case):
    """x.grad after f(x).backward(g)."""
    return leaf_gradients(tt, lambda x: _function(tt, case["fn"])(x, **case["params"]), [case["x"]], case["g"])[0]


def _quietly(fn):
    """fn() with numpy's floating-point warnings recorded: (result, the warnings' messages joined)."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(over="warn", invalid="warn", divide="warn"):
        warnings.simplefilter("always")
        result = fn()
    return result, "; ".join(sorted({str(warning.message) for warning in caught}))


# ---------------------------------------------------------------------------------------------------
# references (float64 numpy and math.erf) and strategies: these stay with the judge


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


def _softmax(x, dim=-1):
    exps = np.exp(x - x.max(axis=dim, keepdims=True))
    return exps / exps.sum(axis=dim, keepdims=True)


def _log_softmax(x, dim=-1):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


REFERENCE = {"relu": lambda x: np.maximum(x, 0.0), "sigmoid": lambda x: np.exp(-np.logaddexp(0.0, -x)), "tanh": np.tanh,
             "gelu": _gelu, "softmax": _softmax, "_softmax_composed": _softmax, "log_softmax": _log_softmax}

# variant -> (the function called, its keyword arguments: a strategy, or "dim" for a dim drawn in x's range)
CALLS = {"relu": ("relu", st.just({})), "sigmoid": ("sigmoid", st.just({})), "tanh": ("tanh", st.just({})),
         "gelu": ("gelu", st.sampled_from([{}, {"approximate": "none"}])),
         "gelu_tanh": ("gelu", st.just({"approximate": "tanh"})), "softmax": ("softmax", "dim"),
         "softmax_composed": ("_softmax_composed", "dim"), "log_softmax": ("log_softmax", "dim")}


def _reference(case, x=None):
    x = np.asarray(case["x"] if x is None else x, dtype=np.float64)
    return np.asarray(REFERENCE[case["fn"]](x, **case["params"]), dtype=np.float64)


def _expected_forward(case):
    return _reference(case).astype(case["x"].dtype)


def _expected_gradient(case):
    return central_difference(lambda x: _reference(case, x), [case["x"]], case["g"])[0]


def _case(variant, values, *, max_dims=4, max_side=5, gradient=False, **extra):
    """A case {"fn", "x", "params"} for the variant (and "g", an upstream gradient of x's dtype and shape,
    for gradients); softmaxes get x of at least one dimension."""
    fn, params = CALLS[variant]
    softmax = fn in SOFTMAXES

    def build(shape):
        dims = st.integers(-len(shape), len(shape) - 1).map(lambda dim: {"dim": dim})
        parts = {"fn": st.just(fn), "x": values(shape), "params": dims if softmax else params,
                 **{key: st.just(value) for key, value in extra.items()}}
        if gradient:
            parts["g"] = upstream(shape)
        return st.fixed_dictionaries(parts)

    def to_dtype(case):  # g in x's dtype (float32 for the stability checks)
        return {**case, "g": case["g"].astype(case["x"].dtype)} if gradient else case
    return shapes(min_dims=int(softmax), max_dims=max_dims, max_side=max_side).flatmap(build).map(to_dtype)


def _large(shape):
    """float32 arrays of magnitude up to 1e4, the first element ±1e4 for sure."""
    elements = st.one_of(st.sampled_from([1e4, -1e4, 0.0, 9999.0, -5000.0, 88.0, -104.0]),
                         st.floats(-1e4, 1e4, allow_nan=False, width=32))
    sign = st.sampled_from([1e4, -1e4])
    return st.tuples(hnp.arrays(np.float32, shape, elements=elements, fill=st.nothing()), sign).map(
        lambda pair: np.concatenate([[pair[1]], pair[0].reshape(-1)[1:]]).astype(np.float32).reshape(shape))


def _float32(shape):
    return arrays(shape, np.float32, -10.0, 10.0)


def _call(case):
    args = "".join(f", {name}={value!r}" for name, value in case["params"].items())
    return f"{case['fn']}(x{args})"


def _x_words(case):
    return f"a {case['x'].dtype} x of shape {case['x'].shape}"




# ---------------------------------------------------------------------------------------------------
# families: one check per activation, each worth the points of its task in the table

FORWARD = {"relu": ("03.1", 1), "sigmoid": ("03.2", 1), "tanh": ("03.3", 1), "gelu": ("03.4", 2),
           "gelu_tanh": ("03.5", 2), "softmax": ("03.6", 2), "softmax_composed": ("03.7", 1),
           "log_softmax": ("03.9", 2)}


@check(dtype=True, variants={v: (*FORWARD[v], _case(v, _float32)) for v in FORWARD},
       describe=lambda case: f"{_call(case)} for {_x_words(case)}")
def forward_values(tt, case):
    return _forward(tt, case)


# gradients: relu away from its kink, sigmoid and tanh over their curved parts, the others in [-3, 3]
GRADIENT = {"relu": ("03.1", 2), "sigmoid": ("03.2", 2), "tanh": ("03.3", 2), "gelu": ("03.4", 2),
            "gelu_tanh": ("03.5", 2), "softmax_composed": ("03.7", 2), "softmax": ("03.8", 3),
            "log_softmax": ("03.10", 3)}
GRADIENT_VALUES = {"relu": lambda shape: signed_arrays(shape, 0.05, 3.0),
                   "sigmoid": lambda shape: floats_arrays(shape, -6, 6),
                   "tanh": lambda shape: floats_arrays(shape, -4, 4)}


@check(**GRAD_TOL,
       variants={v: (*GRADIENT[v], _case(v, GRADIENT_VALUES.get(v, floats_arrays), max_dims=3, max_side=4,
                                         gradient=True)) for v in GRADIENT},
       describe=lambda case: f"x.grad after {_call(case)}.backward(g) for {_x_words(case)}")
def gradient(tt, case):
    return _gradient(tt, case)


STABLE_FORWARD = {"sigmoid": ("03.2", 2), "softmax": ("03.6", 2), "softmax_composed": ("03.7", 1),
                  "log_softmax": ("03.9", 2)}


@check(dtype=True, variants={v: (*STABLE_FORWARD[v], _case(v, _large)) for v in STABLE_FORWARD},
       describe=lambda case: f"{_call(case)} for {_x_words(case)} with values of magnitude up to 1e4")
def stable_forward(tt, case):
    values, warned = _quietly(lambda: _forward(tt, case))
    return {"values": values, "numpy warnings": warned}


STABLE_GRADIENT = {"sigmoid": ("03.2", 1), "tanh": ("03.3", 1), "gelu": ("03.4", 1), "gelu_tanh": ("03.5", 1),
                   "softmax": ("03.8", 2), "log_softmax": ("03.10", 2)}


@check(**FLOAT32_GRAD_TOL,
       variants={v: (*STABLE_GRADIENT[v], _case(v, _large, max_dims=2, max_side=4, gradient=True))
                 for v in STABLE_GRADIENT},
       describe=lambda case: f"{_call(case)} and x.grad after {_call(case)}.backward(g) for {_x_words(case)} with "
                             f"values of magnitude up to 1e4")
def stable_gradient(tt, case):
    (values, grad), warned = _quietly(lambda: (_forward(tt, case), _gradient(tt, case)))
    return {"values": values, "x.grad": grad, "numpy warnings": warned}


GRAPH = {"relu": ("03.1", 1), "sigmoid": ("03.2", 1), "tanh": ("03.3", 1), "gelu": ("03.4", 1), "softmax": ("03.6", 1),
         "log_softmax": ("03.9", 1)}


@check(guard=True,
       variants={v: (*GRAPH[v], _case(v, lambda shape: floats_arrays(shape, dtype=np.float32), max_dims=2))
                 for v in GRAPH},
       describe=lambda case: f"y = {_call(case)} for x with requires_grad=True, and z, the same under tt.no_grad()")
def records_a_graph_except_under_no_grad(tt, case):
    fn, x = _function(tt, case["fn"]), tt.Tensor(case["x"], requires_grad=True)
    y = fn(x, **case["params"])
    with tt.no_grad():
        z = fn(x, **case["params"])
    return {"y is a Tensor": isinstance(y, tt.Tensor), "y.requires_grad": bool(y.requires_grad),
            "y.grad_fn is not None": y.grad_fn is not None, "z.requires_grad": bool(z.requires_grad),
            "z.grad_fn is not None": z.grad_fn is not None}


# the fixed logits of the exactness checks, with their exact float32 answers (the references give them exactly)
HUGE = {"softmax": ("03.6", 1, [[1e4, 0.0, -1e4], [-1e4, 1e4, 1e4]]),
        "log_softmax": ("03.9", 1, [[1e4, 0.0, -1e4], [0.0, -200.0, -1e4]])}


@check(dtype=True, rtol=0, atol=0,
       variants={v: (task, points, st.just({"fn": v, "x": np.array(x, dtype=np.float32), "params": {"dim": 1}}))
                 for v, (task, points, x) in HUGE.items()},
       describe=lambda case: f"{_call(case)} for the float32 x = {case['x'].tolist()} (exact)")
def exact_at_logits_of_1e4(tt, case):
    return _quietly(lambda: _forward(tt, case))[0]


BACKWARD_ON_ARRAYS = {"softmax": ("03.8", 2, "_Softmax"), "log_softmax": ("03.10", 1, "_LogSoftmax")}


@check(**GRAD_TOL,
       variants={v: (task, points, _case(v, floats_arrays, max_dims=3, max_side=4, gradient=True, function=function))
                 for v, (task, points, function) in BACKWARD_ON_ARRAYS.items()},
       describe=lambda case: f"{case['function']}.backward(ctx, g) called directly after {case['function']}.forward("
                             f"ctx, x, dim={case['params']['dim']}) on numpy arrays, {_x_words(case)}")
def function_backward_on_numpy_arrays(tt, case):
    """The input gradient of a Function of 03 called on numpy arrays, without the autograd engine."""
    function, ctx = _function(tt, case["function"]), tt.autograd.Context()
    function.forward(ctx, case["x"], **case["params"])
    return function.backward(ctx, case["g"])[0]


for _family in (forward_values, exact_at_logits_of_1e4):
    _family.expected(_expected_forward)
for _family in (gradient, function_backward_on_numpy_arrays):
    _family.expected(_expected_gradient)


@stable_forward.expected
def _(case):
    return {"values": _expected_forward(case), "numpy warnings": ""}


@stable_gradient.expected
def _(case):
    return {"values": _expected_forward(case), "x.grad": _expected_gradient(case).astype(case["x"].dtype),
            "numpy warnings": ""}


@records_a_graph_except_under_no_grad.expected
def _(case):
    return {"y is a Tensor": True, "y.requires_grad": True, "y.grad_fn is not None": True, "z.requires_grad": False,
            "z.grad_fn is not None": False}


# ---------------------------------------------------------------------------------------------------
# one function's own behaviours


@check(task="03.1", points=1, describe=lambda case: "x.grad after relu(x).backward(g) for x = [-1, 0, 0, 2], "
                                                    "g = [1, 2, 3, 4] (0 at x = 0, like PyTorch)")
def relu_gradient_at_zero_is_zero(tt, case):
    x, g = np.array([-1.0, 0.0, 0.0, 2.0]), np.array([1.0, 2.0, 3.0, 4.0])
    return leaf_gradients(tt, tt.nn.functional.relu, [x], g)[0]


@relu_gradient_at_zero_is_zero.expected
def _(case):
    return np.array([0.0, 0.0, 0.0, 4.0])


@check(task="03.1", points=1, dtype=True, describe=lambda case: "relu of a nested list and of a float64 numpy array")
def relu_accepts_lists_and_numpy_arrays(tt, case):
    return {"relu([[-1.5, 2.0], [0.5, -3.0]])": tt.nn.functional.relu([[-1.5, 2.0], [0.5, -3.0]]).numpy(),
            "relu(np.array([-1.5, 2.0, 0.25]))": tt.nn.functional.relu(np.array([-1.5, 2.0, 0.25])).numpy()}


@relu_accepts_lists_and_numpy_arrays.expected
def _(case):
    return {"relu([[-1.5, 2.0], [0.5, -3.0]])": np.array([[0.0, 2.0], [0.5, 0.0]], dtype=np.float32),
            "relu(np.array([-1.5, 2.0, 0.25]))": np.array([0.0, 2.0, 0.25])}


@check(task="03.5", points=1, inputs=st.sampled_from(["erf", "exact", "Tanh", "sigmoid", ""]).map(
           lambda approximate: {"approximate": approximate}),
       describe=lambda case: f"gelu(x, approximate={case['approximate']!r})")
def gelu_rejects_an_unknown_approximation(tt, case):
    return capture_error(lambda: tt.nn.functional.gelu(tt.Tensor(np.array([0.5, -1.0], dtype=np.float32)),
                                                       approximate=case["approximate"]))


@gelu_rejects_an_unknown_approximation.verdict
def _(case, output):
    what = f"gelu(x, approximate={case['approximate']!r})"
    if output["raised"] != "ValueError":
        said = "raised nothing" if output["raised"] is None else f"raised {output['raised']}"
        raise CheckFailed(f"{what}: expected ValueError but it {said}")
    if "none" not in output["message"] or "tanh" not in output["message"]:
        raise CheckFailed(f"{what}: the ValueError should name the allowed values 'none' and 'tanh', but says "
                          f"{output['message']!r:.120}", f"{what}: the ValueError does not name 'none' and 'tanh'")


@check(task="03.6", points=1, dtype=True, inputs=_case("softmax", _float32, max_dims=3),
       describe=lambda case: f"_Softmax.forward(ctx, x, dim={case['params']['dim']}) called directly on "
                             f"{_x_words(case)} (a numpy array in, a numpy array of its dtype out)")
def softmax_function_forward_on_a_numpy_array(tt, case):
    return _function(tt, "_Softmax").forward(tt.autograd.Context(), case["x"], **case["params"])


softmax_function_forward_on_a_numpy_array.expected(_expected_forward)


@check(task="03.6", points=1, inputs=_case("softmax", lambda shape: arrays(shape, np.float32, -50, 50)),
       describe=lambda case: f"{_call(case)} for {_x_words(case)}, summed along dim {case['params']['dim']}")
def softmax_sums_to_one_along_dim(tt, case):
    return _forward(tt, case).sum(axis=case["params"]["dim"])


@softmax_sums_to_one_along_dim.expected
def _(case):
    return np.ones(np.delete(case["x"].shape, case["params"]["dim"]), dtype=np.float32)


@check(task="03.9", points=1, rtol=1e-10, atol=1e-12, inputs=_case("log_softmax", floats_arrays, max_dims=3),
       describe=lambda case: f"log_softmax(x, dim={case['params']['dim']}) and np.log(softmax(x, dim="
                             f"{case['params']['dim']})) for {_x_words(case)} with values in [-3, 3]")
def log_softmax_equals_log_of_softmax_in_float64(tt, case):
    x, dim = tt.Tensor(case["x"]), case["params"]["dim"]
    return {"log_softmax(x)": tt.nn.functional.log_softmax(x, dim=dim).numpy(),
            "np.log(softmax(x))": np.log(tt.nn.functional.softmax(x, dim=dim).numpy())}


@log_softmax_equals_log_of_softmax_in_float64.expected
def _(case):
    return {"log_softmax(x)": _reference(case), "np.log(softmax(x))": _reference(case)}
