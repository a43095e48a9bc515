"""Hidden suite of 01_tensor: tinytorch/core/tensor.py against numpy.

Cases hold only numpy arrays and plain values (dtypes as names, axes and shapes as lists, indices in a
plain encoding), so they travel between processes; every expected value comes from numpy on the case.
Variants of one behaviour (a rule of construction, an operator, a reduction, a factory) are one check family
over a table, the variant's name travelling in the case; where the variants belong to different tasks, the
table gives each its task and points (`variants=`). A view is judged by what it shows after 0, 1, 2, ...
are written through the tensor it came from.
"""

import math
import operator
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import CheckFailed, Timed, arrays, capture_error, check, module, shapes, with_article

# --- compute helpers: they run beside the package under test -------------------------------------------

OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
             "pow": operator.pow}  # on Tensors, and on numpy arrays for the expected values


def write_through(tensor):
    """Overwrite the tensor's own array with 0, 1, 2, ... in place (cast to its dtype)."""
    tensor.data[...] = np.arange(tensor.data.size).reshape(tensor.data.shape)


def as_axis(axis):
    """Axes travel as None, an int or a list; numpy wants a tuple."""
    return tuple(axis) if isinstance(axis, list) else axis


def reduce(tt, case):
    return getattr(tt.Tensor(case["x"]), case["method"])(axis=as_axis(case["axis"]), keepdims=case["keepdims"]).data


def decode_index(encoded: dict):
    """Indices travel in a plain encoding: ints, None, "..." and ["slice", start, stop, step]."""
    items = [slice(*item[1:]) if isinstance(item, list) else Ellipsis if item == "..." else item
             for item in encoded["items"]]
    return tuple(items) if encoded["tuple"] else items[0]


LAYOUTS = {  # the call -> the tensor it makes of t, the case giving the arguments
    "reshape": lambda t, case: t.reshape(tuple(case["shape"])) if case["as_tuple"] else t.reshape(*case["shape"]),
    "permute": lambda t, case: t.permute(tuple(case["dims"])) if case["as_tuple"] else t.permute(*case["dims"]),
    "transpose": lambda t, case: t.transpose(*case["dims"]), "T": lambda t, case: t.T,
    "index": lambda t, case: t[decode_index(case["index"])]}


# --- judge helpers: words, strategies and references ---------------------------------------------------

SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
ANY_DTYPE = ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"]


def tensor_words(x) -> str:
    x = np.asarray(x)
    return f"{'an' if x.dtype.name.startswith('int') else 'a'} {x.dtype} tensor of shape {x.shape}"


def operand_words(b) -> str:
    return tensor_words(b) if isinstance(b, np.ndarray) else repr(b)


def strides_in_elements(x: np.ndarray) -> list:
    return [step // x.itemsize for step in x.strides]


def written(x: np.ndarray) -> np.ndarray:
    """What write_through leaves in an array like x."""
    return np.arange(x.size).reshape(x.shape).astype(x.dtype)


def squeeze(text: str) -> str:
    return "".join(str(text).split())


def dtype_arrays(shape, dtypes, low=-10.0, high=10.0):
    """Arrays of one of `dtypes` (names), values in [low, high]."""
    return st.sampled_from(dtypes).flatmap(lambda name: arrays(shape, np.dtype(name), low, high))


def x_case(shape, dtypes, low=-10.0, high=10.0):
    return st.fixed_dictionaries({"x": dtype_arrays(shape, dtypes, low, high)})


@st.composite
def mismatched_shapes(draw):
    """Two shapes that do not broadcast: equal everywhere but one aligned axis, where both sizes are >= 2."""
    base = list(draw(shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)))
    axis = draw(st.integers(0, len(base) - 1))
    start = draw(st.integers(0, axis))
    size_a, size_b = draw(st.lists(st.integers(2, 5), min_size=2, max_size=2, unique=True))
    a, b = list(base), base[start:]
    a[axis], b[axis - start] = size_a, size_b
    return (b, a) if draw(st.booleans()) else (a, b)


def failed(message: str) -> CheckFailed:
    """A verdict whose message reveals nothing the notebook does not say: public as it is."""
    return CheckFailed(message, message)


def expect_error(output: dict, what: str, *parts: str, error: str = "ValueError") -> None:
    if output.get("raised") != error:
        got = "no error" if output.get("raised") is None else f"{output['raised']}: {output.get('message')}"
        raise failed(f"{what}: expected {with_article(error)} but got {got}")
    missing = [part for part in parts if part not in output.get("message", "")]
    if missing:
        raise failed(f"{what}: the {error} should name {' and '.join(parts)}, but its message is {output['message']!r}")




# --- 01.1 construction and the dtype rule ----------------------------------------------------------

@st.composite
def python_floats(draw):
    """Nested lists of Python floats (or one float); in about half, every other element a Python int."""
    x = draw(arrays(shapes(max_dims=3), np.float64, -100, 100)).astype(object)
    if x.ndim and draw(st.booleans()):
        flat = x.reshape(-1)
        flat[1::2] = [int(round(value)) for value in flat[1::2]]
    return x.tolist()


def to_list(strategy):
    return strategy.map(lambda x: x.tolist())


CONSTRUCTION = {  # the rule -> (strategy of data, strategy of the dtype= argument)
    "Python floats": (python_floats(), st.none()),
    "Python ints": (to_list(arrays(shapes(max_dims=3), np.int64, -1000, 1000)), st.none()),
    "Python bools": (to_list(arrays(shapes(max_dims=3), np.bool_)), st.none()),
    "a numpy array": (dtype_arrays(shapes(max_dims=3), ANY_DTYPE, 0, 100), st.none()),
    "a numpy scalar": (dtype_arrays((), ANY_DTYPE, 0, 100).map(lambda x: x[()]), st.none()),
    "a Tensor": (dtype_arrays(shapes(max_dims=3), ANY_DTYPE, 0, 100), st.none()),
    "dtype=": (st.one_of(dtype_arrays(shapes(max_dims=3), ["float32", "int64"], -100, 100),
                         to_list(dtype_arrays(shapes(max_dims=3), ["float32", "int64"], -100, 100))),
               st.sampled_from(["float32", "float64", "int32", "int64", "float16"])),
}


def construction_words(case: dict) -> str:
    data, rule = case["data"], case["rule"]
    if isinstance(data, (list, int, float, bool)):
        shown = repr(data) if len(repr(data)) <= 60 else repr(data)[:56] + " ..."
    else:
        kind = "scalar" if isinstance(data, np.generic) else "array"
        shown = f"a numpy {kind} of dtype {data.dtype} and shape {data.shape}"
        shown = f"Tensor({shown})" if rule == "a Tensor" else shown
    return f"Tensor({shown}{'' if case['dtype'] is None else ', dtype=np.' + case['dtype']}) ({rule})"


@check(task="01.1", points=1, dtype=True, describe=construction_words,
       variants={rule: st.fixed_dictionaries({"rule": st.just(rule), "data": data, "dtype": dtype})
                 for rule, (data, dtype) in CONSTRUCTION.items()})
def construction_follows_the_dtype_rule(tt, case):
    """Tensor(data) follows the dtype rule (Python floats float32, ints int64; numpy data keeps its dtype)."""
    data = tt.Tensor(case["data"]) if case["rule"] == "a Tensor" else case["data"]
    return tt.Tensor(data, **({} if case["dtype"] is None else {"dtype": getattr(np, case["dtype"])})).data


@construction_follows_the_dtype_rule.expected
def _(case):
    data = np.asarray(case["data"])
    if case["dtype"] is not None:
        return data.astype(case["dtype"])
    return data.astype(np.float32) if case["rule"] == "Python floats" else data


# --- 01.2 shape and strides ------------------------------------------------------------------------

@check(task="01.2", points=2, inputs=x_case(shapes(max_dims=4, min_side=0), ["float32", "int64", "bool"]),
       describe=lambda c: f"shape, ndim, size, dtype and len() of {tensor_words(c['x'])}")
def shape_ndim_size_dtype_and_len(tt, case):
    """shape (a tuple), ndim, size, dtype and len() describe the tensor; len() of a 0-d tensor is a TypeError."""
    t = tt.Tensor(case["x"])
    return {"shape": t.shape, "type of shape": type(t.shape).__name__, "ndim": t.ndim, "size": t.size,
            "dtype": str(t.dtype), "len()": len(t) if case["x"].ndim else capture_error(lambda: len(t))["raised"]}


@shape_ndim_size_dtype_and_len.expected
def _(case):
    x = case["x"]
    return {"shape": x.shape, "type of shape": "tuple", "ndim": x.ndim, "size": x.size, "dtype": str(x.dtype),
            "len()": len(x) if x.ndim else "TypeError"}


@check(task="01.2", points=1, dtype=True,
       inputs=x_case(shapes(max_dims=4, min_side=0), ["float32", "float64", "int64", "int8", "bool"]),
       describe=lambda c: f"stride(), stride(dim) for each axis and is_contiguous() of {tensor_words(c['x'])}")
def stride_counts_elements(tt, case):
    """stride() and stride(dim) count elements, as ints (not bytes); a new tensor is contiguous."""
    t = tt.Tensor(case["x"])
    return {"stride()": t.stride(), "stride(dim)": [t.stride(dim) for dim in range(case["x"].ndim)],
            "is_contiguous()": bool(t.is_contiguous())}


@stride_counts_elements.expected
def _(case):
    return {"stride()": tuple(strides_in_elements(case["x"])), "stride(dim)": strides_in_elements(case["x"]),
            "is_contiguous()": True}


# --- 01.3 repr, numpy and item ---------------------------------------------------------------------

@check(task="01.3", points=1, dtype=True, inputs=x_case(shapes(max_dims=4), ["float32", "int64", "bool"]),
       describe=lambda c: f"Tensor(x).numpy() for {tensor_words(c['x'])}, then 0, 1, 2, ... written in place "
                          f"into the tensor's data")
def numpy_returns_the_array(tt, case):
    """numpy() returns the tensor's own numpy array (what is written through the tensor shows in it)."""
    t = tt.Tensor(case["x"])
    out = t.numpy()
    before = {"type": type(out).__name__, "values": np.array(out)}
    write_through(t)
    return {**before, "values after the write": np.array(out)}


@numpy_returns_the_array.expected
def _(case):
    return {"type": "ndarray", "values": case["x"], "values after the write": written(case["x"])}


@check(task="01.3", points=1,
       inputs=x_case(st.sampled_from([(), (1,), (1, 1), (1, 1, 1)]), ["float32", "float64", "int64", "bool"],
                     -1000, 1000),
       describe=lambda c: f"item() of {tensor_words(c['x'])}")
def item_returns_a_python_number(tt, case):
    """item() returns the one element as a Python float, int or bool."""
    value = tt.Tensor(case["x"]).item()
    return {"type": type(value).__name__, "value": value}


@item_returns_a_python_number.expected
def _(case):
    value = case["x"].item()
    return {"type": type(value).__name__, "value": value}


REPRS = {  # the variant -> (dtypes of x, requires_grad)
    "floats": (["float32", "float64"], False), "ints and bools": (["int64", "bool"], False),
    "requires_grad=True": (["float32"], True)}


def repr_words(case: dict) -> str:
    return f"repr() of {tensor_words(case['x'])}{' with requires_grad=True' if case['requires_grad'] else ''}"


@check(task="01.3", points=1, describe=repr_words,
       variants={name: st.fixed_dictionaries({"x": dtype_arrays(shapes(max_dims=3, max_side=4), dtypes, -100, 100),
                                              "requires_grad": st.just(flag)})
                 for name, (dtypes, flag) in REPRS.items()})
def repr_shows_values_dtype_and_requires_grad(tt, case):
    """repr() reads tensor(<values>, dtype=<dtype>), with requires_grad=True at the end when it is set."""
    return repr(tt.Tensor(case["x"], requires_grad=case["requires_grad"]))


@repr_shows_values_dtype_and_requires_grad.verdict
def _(case, output):
    x, flag = case["x"], case["requires_grad"]
    text = squeeze(output) if isinstance(output, str) else ""
    shown = text.endswith(",requires_grad=True)") if flag else f"dtype={x.dtype}" in text
    if not (text.startswith("tensor(" + squeeze(np.array2string(x, separator=", "))) and shown):
        want = f"tensor({np.array2string(x, separator=', ')}, dtype={x.dtype}{', requires_grad=True' if flag else ''})"
        raise CheckFailed(f"{repr_words(case)}: expected {want!r:.120} but got {output!r:.120}",
                          f"{repr_words(case)}: {output!r:.120} does not read tensor(<values>, dtype=...)")


# --- 01.4 broadcasting -----------------------------------------------------------------------------

@check(task="01.4", points=2,
       inputs=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=5)
       .map(lambda pair: {"a": list(pair.input_shapes[0]), "b": list(pair.input_shapes[1])}),
       describe=lambda c: f"broadcast_shape({tuple(c['a'])}, {tuple(c['b'])})")
def broadcast_shape_follows_the_rule(tt, case):
    """broadcast_shape gives numpy's broadcast shape, as a tuple."""
    result = module(tt, "tensor").broadcast_shape(tuple(case["a"]), tuple(case["b"]))
    return {"shape": result, "type": type(result).__name__}


@broadcast_shape_follows_the_rule.expected
def _(case):
    return {"shape": np.broadcast_shapes(tuple(case["a"]), tuple(case["b"])), "type": "tuple"}


# --- 01.5 elementwise operations -------------------------------------------------------------------

@st.composite
def binary_case(draw, op):
    """Two broadcastable arrays: float32, float64 or int64, no divisor near 0; for pow a positive float base
    and a float32 exponent or a Python number."""
    a_shape, b_shape = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1,
                                                              max_side=5)).input_shapes
    if op == "pow":
        a = draw(dtype_arrays(a_shape, ["float32", "float64"], 0.5, 3.0))
        b = draw(st.one_of(arrays(b_shape, np.float32, -2.0, 2.0), st.sampled_from([2, 3, -1, 0.5, 1.5])))
    else:
        a, b = (draw(dtype_arrays(shape, ["float32", "float64", "int64"])) for shape in (a_shape, b_shape))
        b = np.where(np.abs(b) < 0.5, np.ones_like(b), b) if op == "div" else b
    return {"op": op, "a": a, "b": b}


@check(task="01.5", points=1, dtype=True, variants={op: binary_case(op) for op in OPERATORS},
       describe=lambda c: f"{tensor_words(c['a'])} {SYMBOLS[c['op']]} {operand_words(c['b'])}")
def elementwise_like_numpy(tt, case):
    """Tensor <op> Tensor (and Tensor ** number) broadcasts and promotes dtypes like numpy."""
    b = tt.Tensor(case["b"]) if isinstance(case["b"], np.ndarray) else case["b"]
    return OPERATORS[case["op"]](tt.Tensor(case["a"]), b).data


elementwise_like_numpy.expected(lambda case: OPERATORS[case["op"]](case["a"], case["b"]))


NUMBERS = {  # the kind -> (tensor dtypes, Python numbers), promoted like numpy (NEP 50)
    "float32 tensor": (["float32"], st.one_of(st.sampled_from([1, 2, 3]), st.floats(0.5, 3.0, width=32))),
    "int64 tensor and int": (["int64"], st.sampled_from([1, 2, 3])),
    "int64 tensor and float": (["int64"], st.floats(0.5, 3.0, width=32)),
}


def number_words(c: dict) -> str:
    t, number, symbol = tensor_words(c["x"]), repr(c["number"]), SYMBOLS[c["op"]]
    return f"{number} {symbol} {t}" if c["number_first"] else f"{t} {symbol} {number}"


@check(task="01.5", points=1, dtype=True, describe=number_words,
       variants={kind: st.fixed_dictionaries({"op": st.sampled_from(list(OPERATORS)), "number": numbers,
                                              "x": dtype_arrays(shapes(max_dims=3), dtypes, 1, 3),
                                              "number_first": st.booleans()})
                 for kind, (dtypes, numbers) in NUMBERS.items()})
def python_number_on_either_side(tt, case):
    """A Python number works on either side of every operator and promotes like numpy (NEP 50)."""
    t, number, op = tt.Tensor(case["x"]), case["number"], OPERATORS[case["op"]]
    return (op(number, t) if case["number_first"] else op(t, number)).data


@python_number_on_either_side.expected
def _(case):
    op, x, number = OPERATORS[case["op"]], case["x"], case["number"]
    return op(number, x) if case["number_first"] else op(x, number)


@check(task="01.5", points=1, dtype=True, inputs=x_case(shapes(max_dims=4), ["float32", "float64", "int64"]),
       describe=lambda c: f"-(tensor) for {tensor_words(c['x'])}")
def neg_like_numpy(tt, case):
    """-Tensor negates every element."""
    return (-tt.Tensor(case["x"])).data


neg_like_numpy.expected(lambda case: np.negative(case["x"]))


# --- 01.6 exp, log, sqrt ---------------------------------------------------------------------------

UNARY_DOMAINS = {"exp": {"float": (-10, 10), "int": (-5, 5)}, "log": {"float": (1 / 64, 100), "int": (1, 100)},
                 "sqrt": {"float": (1 / 64, 100), "int": (1, 100)}}


@st.composite
def unary_case(draw):
    op, dtype = draw(st.sampled_from(list(UNARY_DOMAINS))), draw(st.sampled_from(["float32", "float64", "int64"]))
    low, high = UNARY_DOMAINS[op]["int" if dtype == "int64" else "float"]
    return {"op": op, "x": draw(arrays(shapes(max_dims=4), np.dtype(dtype), low, high))}


@check(task="01.6", points=2, dtype=True, inputs=unary_case(),
       describe=lambda c: f"Tensor.{c['op']}() of {tensor_words(c['x'])}")
def exp_log_sqrt_like_numpy(tt, case):
    """exp(), log() and sqrt() apply elementwise like numpy."""
    return getattr(tt.Tensor(case["x"]), case["op"])().data


exp_log_sqrt_like_numpy.expected(lambda case: getattr(np, case["op"])(case["x"]))


# --- 01.7 matmul -----------------------------------------------------------------------------------

MATMUL = {
    "matrices": st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5),
                          st.sampled_from(["float32", "float64"])).flatmap(
        lambda nkm: st.fixed_dictionaries({"a": arrays((nkm[0], nkm[1]), np.dtype(nkm[3])),
                                           "b": arrays((nkm[1], nkm[2]), np.float32)})),
    "batched and vectors": hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, min_side=1,
                                                             max_side=4).flatmap(
        lambda s: st.fixed_dictionaries({"a": arrays(s.input_shapes[0], np.float32),
                                         "b": arrays(s.input_shapes[1], np.float32)})),
}


@check(task="01.7", points=2, dtype=True, atol=1e-4, variants=MATMUL,
       describe=lambda c: f"{tensor_words(c['a'])} @ {tensor_words(c['b'])}")
def matmul_like_numpy(tt, case):
    """@ gives np.matmul's result: (n, k) @ (k, m) is (n, m), batch axes broadcast, 1-d operands are vectors."""
    return (tt.Tensor(case["a"]) @ tt.Tensor(case["b"])).data


matmul_like_numpy.expected(lambda case: np.matmul(case["a"], case["b"]))


# --- 01.8 sum, 01.9 mean, 01.10 max ----------------------------------------------------------------

@st.composite
def axis_for(draw, ndim: int):
    """None, an int (maybe negative) or a list of distinct axes (maybe negative, maybe empty)."""
    kind = draw(st.sampled_from(["none", "int", "tuple"] if ndim else ["none", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return [a - ndim if draw(st.booleans()) else a for a in axes]


@st.composite
def reduction_case(draw, method, dtypes):
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    return {"method": method, "x": draw(dtype_arrays(shape, dtypes)), "axis": draw(axis_for(len(shape))),
            "keepdims": draw(st.booleans())}


@st.composite
def empty_reduction_case(draw, method):
    """A float32 array with a zero-size axis, reduced over that axis (alone, in a list, or with axis=None)."""
    shape = list(draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)))
    ndim, zero = len(shape), draw(st.integers(0, len(shape) - 1))
    shape[zero] = 0
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    axes = sorted({zero, *draw(st.lists(st.integers(0, ndim - 1), max_size=ndim))}) if kind == "tuple" else [zero]
    axis = [a - ndim if draw(st.booleans()) else a for a in axes]
    return {"method": method, "x": np.zeros(shape, np.float32), "keepdims": draw(st.booleans()),
            "axis": None if kind == "none" else axis[0] if kind == "int" else axis}


def reduction_words(c: dict) -> str:
    return f"Tensor.{c['method']}(axis={as_axis(c['axis'])!r}, keepdims={c['keepdims']}) of {tensor_words(c['x'])}"


def numpy_reduce(case):
    with warnings.catch_warnings():  # numpy warns "Mean of empty slice"; nan is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        return getattr(np, case["method"])(case["x"], axis=as_axis(case["axis"]), keepdims=case["keepdims"])


REDUCTIONS = {  # variant -> (task, points, cases)
    "sum": ("01.8", 2, reduction_case("sum", ["float32", "float64", "int64", "bool"])),
    "mean": ("01.9", 2, reduction_case("mean", ["float32", "float64", "int64"])),
    "max": ("01.10", 2, reduction_case("max", ["float32", "float64", "int64"]))}
EMPTY_REDUCTIONS = {"sum": ("01.8", 1, empty_reduction_case("sum")), "mean": ("01.9", 1, empty_reduction_case("mean"))}


@check(dtype=True, atol=1e-4, describe=reduction_words, variants=REDUCTIONS)
def reduction_over_axes(tt, case):
    """sum(), mean() and max() over None, an int, a negative int or a tuple of axes, with keepdims, like numpy."""
    return reduce(tt, case)


@check(dtype=True, describe=reduction_words, variants=EMPTY_REDUCTIONS)
def reduction_over_an_empty_axis(tt, case):
    """The sum over an axis of size 0 is 0 and the mean is nan, like numpy."""
    return reduce(tt, case)


reduction_over_axes.expected(numpy_reduce)
reduction_over_an_empty_axis.expected(numpy_reduce)


@check(task="01.10", points=1, guard=True, inputs=empty_reduction_case("max"), describe=reduction_words)
def max_over_an_empty_axis_raises(tt, case):
    """max() over an axis of size 0 raises a ValueError, like numpy."""
    return capture_error(lambda: reduce(tt, case))


@max_over_an_empty_axis_raises.verdict
def _(case, output):
    expect_error(output, reduction_words(case))




# --- speed: the ops a milestone leans on are vectorised -----------------------------------------------
# Correct values are not enough for matmul and the reductions: the milestones call them on large arrays
# thousands of times, and a Python loop over elements makes a milestone epoch take hours. The grader times
# each op itself, from its request to the box to the reply, on arrays made afresh for every call from a seed
# it sends, against numpy's own call on the same arrays in a box without your package, taking turns; the
# check compares the best times as a ratio (never an absolute time). A loop over rows passes (about 2 times
# numpy's), a loop over elements does not (30 times and more).

SPEED_LIMIT = 10  # times numpy's time, each timed from request to reply (the reference: about 1 to 2)
SPEED = {  # variant -> (task, points, words, the op through tinytorch, numpy's own call, shapes of a and b)
    "matmul": ("01.7", 2, "a @ b for float32 a of shape (128, 256) and b of shape (256, 128)",
               lambda tt, a, b: tt.Tensor(a) @ tt.Tensor(b), lambda a, b: np.matmul(a, b), ((128, 256), (256, 128))),
    "sum": ("01.8", 1, "Tensor.sum(axis=0) of a float32 tensor of shape (512, 512)",
            lambda tt, a, b: tt.Tensor(a).sum(axis=0), lambda a, b: np.sum(a, axis=0), ((512, 512), (1, 1))),
    "mean": ("01.9", 1, "Tensor.mean(axis=0) of a float32 tensor of shape (512, 512)",
             lambda tt, a, b: tt.Tensor(a).mean(axis=0), lambda a, b: np.mean(a, axis=0), ((512, 512), (1, 1))),
    "max": ("01.10", 1, "Tensor.max(axis=0) of a float32 tensor of shape (512, 512)",
            lambda tt, a, b: tt.Tensor(a).max(axis=0), lambda a, b: np.max(a, axis=0), ((512, 512), (1, 1)))}


def speed_arrays(case):
    """The arrays of one timed call, made from the seed the grader sent with it: the same on both sides."""
    rng = np.random.default_rng(case["seed"])
    return tuple(rng.random(shape, dtype=np.float32) - 0.5 for shape in SPEED[case["op"]][5])


def speed_yardstick(case):
    """numpy's own call on the arrays of the case: what the op's time is measured against."""
    return SPEED[case["op"]][4](*speed_arrays(case))


@check(examples=9, rtol=1e-4, atol=1e-3,
       variants={op: (task, points, st.fixed_dictionaries({"op": st.just(op), "seed": st.integers(0, 2**31 - 1)}))
                 for op, (task, points, *_) in SPEED.items()},
       timed=Timed(speed_yardstick, limit=SPEED_LIMIT, against="numpy's own call on the same arrays",
                   advice="A Python loop handles a few million numbers per second, numpy's kernels billions, and "
                          "the milestones call this op thousands of times on large arrays: make it one numpy call "
                          "on the whole arrays"),
       describe=lambda case: f"{SPEED[case['op']][2]}: its values, and its time against numpy's on the same arrays")
def vectorised_like_numpy(tt, case):
    """matmul, sum, mean and max give numpy's values within SPEED_LIMIT times numpy's own time on the same arrays."""
    return SPEED[case["op"]][3](tt, *speed_arrays(case)).numpy()


@vectorised_like_numpy.expected
def _(case):
    a, b = speed_arrays(case)
    # the judge never calls BLAS: OpenBLAS called from several grading threads at once can spin forever
    return np.einsum("ij,jk->ik", a, b) if case["op"] == "matmul" else SPEED[case["op"]][4](a, b)




# --- 01.11 reshape, 01.12 permute, transpose and .T, 01.13 indexing: values like numpy, and views -------

@st.composite
def reshape_case(draw):
    """A shape and a new shape of the same size (axes shuffled, merged, 1s inserted; maybe one -1)."""
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    merged = []
    for side in draw(st.permutations(list(shape))):
        if merged and draw(st.booleans()):
            merged[-1] *= side
        else:
            merged.append(side)
    for _ in range(draw(st.integers(0, 2))):
        merged.insert(draw(st.integers(0, len(merged))), 1)
    if merged and draw(st.booleans()):
        merged[draw(st.integers(0, len(merged) - 1))] = -1
    return {"call": "reshape", "x": draw(arrays(shape, np.float32)), "shape": merged, "as_tuple": draw(st.booleans())}


@st.composite
def permute_case(draw, call="permute"):
    """permute: every axis (maybe negative), as arguments or a tuple; transpose: two axes; T: none."""
    shape = draw(shapes(min_dims=int(call == "transpose"), max_dims=4, min_side=1, max_side=5))
    ndim, dims = len(shape), None
    if call == "permute":
        dims = [d - ndim if draw(st.booleans()) else d for d in draw(st.permutations(range(ndim)))]
    elif call == "transpose":
        dims = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=2, max_size=2))
    return {"call": call, "x": draw(arrays(shape, np.float32)), "dims": dims, "as_tuple": draw(st.booleans())}


def encode_index(index) -> dict:
    def one(item):
        if isinstance(item, slice):
            return ["slice", item.start, item.stop, item.step]
        return "..." if item is Ellipsis else None if item is None else int(item)
    return {"tuple": isinstance(index, tuple),
            "items": [one(item) for item in (index if isinstance(index, tuple) else (index,))]}


@st.composite
def basic_index_case(draw):
    """Ints (negative too), slices, None and ... for an array of any shape."""
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return {"call": "index", "x": draw(arrays(shape, np.float32)), "index": encode_index(index)}


@st.composite
def stepped_slice_case(draw):
    """[:, ..., :, start::step] along one axis."""
    shape = draw(shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    axis = draw(st.integers(0, len(shape) - 1))
    start, step = draw(st.integers(0, shape[axis] - 1)), draw(st.integers(1, 3))
    index = [["slice", None, None, None]] * axis + [["slice", start, None, step]]
    return {"call": "index", "x": draw(arrays(shape, np.float32)), "index": {"tuple": True, "items": index}}


def index_words(encoded: dict) -> str:
    def one(item):
        if isinstance(item, list):
            start, stop, step = ("" if value is None else value for value in item[1:])
            return f"{start}:{stop}" + ("" if step == "" else f":{step}")
        return "..." if item == "..." else str(item)
    inner = ", ".join(one(item) for item in encoded["items"])
    return f"[{inner}{',' if encoded['tuple'] and len(encoded['items']) == 1 else ''}]"


def layout_words(case: dict) -> str:
    call, x = case["call"], case["x"]
    if call == "index":
        return f"t{index_words(case['index'])} for {tensor_words(x)}"
    if call == "T":
        return f"Tensor.T of {tensor_words(x)}"
    numbers = case["shape"] if call == "reshape" else case["dims"]
    args = ", ".join(map(str, numbers))
    if case["as_tuple"] and call != "transpose":
        args = f"({args}{',' if len(numbers) == 1 else ''})"
    return f"Tensor.{call}({args}) of {tensor_words(x)}"


ON_ARRAYS = {"reshape": lambda x, case: np.reshape(x, tuple(case["shape"])),
             "permute": lambda x, case: np.transpose(x, case["dims"]),
             "transpose": lambda x, case: np.swapaxes(x, *case["dims"]), "T": lambda x, case: x.T,
             "index": lambda x, case: x[decode_index(case["index"])]}  # what LAYOUTS does, on a numpy array
LAYOUTS_LIKE_NUMPY = {  # variant -> (task, points, cases)
    "reshape": ("01.11", 2, reshape_case()), "permute": ("01.12", 2, permute_case()),
    "transpose": ("01.12", 1, permute_case("transpose")), "T": ("01.12", 1, permute_case("T")),
    "basic indexing": ("01.13", 2, basic_index_case())}
VIEWS = {"reshape": ("01.11", 1, reshape_case()), "permute": ("01.12", 1, permute_case()),
         "stepped slice": ("01.13", 1, stepped_slice_case())}


@check(dtype=True, describe=layout_words, variants=LAYOUTS_LIKE_NUMPY)
def layout_like_numpy(tt, case):
    """reshape (-1 inferred), permute, transpose, .T and basic indexing (ints, slices, None, ...) like numpy."""
    return LAYOUTS[case["call"]](tt.Tensor(case["x"]), case).data


layout_like_numpy.expected(lambda case: ON_ARRAYS[case["call"]](case["x"], case))


@check(variants=VIEWS,
       describe=lambda c: f"{layout_words(c)}, then 0, 1, 2, ... written into the original tensor's data")
def views_share_memory(tt, case):
    """reshape of a contiguous tensor, permute and slicing move no data: new strides over the same memory."""
    t = tt.Tensor(case["x"])
    view = LAYOUTS[case["call"]](t, case)
    found = {"stride()": list(view.stride()), "is_contiguous()": bool(view.is_contiguous())}
    write_through(t)
    return {**found, "values seen through the view": np.array(view.data)}


@views_share_memory.expected
def _(case):
    view = ON_ARRAYS[case["call"]](case["x"], case)
    return {"stride()": strides_in_elements(view), "is_contiguous()": bool(view.flags.c_contiguous),
            "values seen through the view": ON_ARRAYS[case["call"]](written(case["x"]), case)}




# --- shapes that do not fit: 01.4 broadcast_shape, 01.5 elementwise, 01.7 matmul, 01.11 reshape --------

@st.composite
def misaligned_matmul(draw):
    """Shapes @ refuses: inner sizes that differ, batch axes that do not broadcast, or a 0-d operand."""
    kind = draw(st.sampled_from(["matrix", "vector", "batch", "0-d"]))
    n, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k_a, k_b = draw(st.lists(st.integers(1, 5), min_size=2, max_size=2, unique=True))
    if kind == "matrix":
        batch = draw(st.lists(st.integers(1, 3), max_size=2))
        return {"a": [*batch, n, k_a], "b": [*batch, k_b, m]}
    if kind == "vector":
        a, b = draw(st.sampled_from([([k_a], [k_b]), ([k_a], [k_b, m]), ([n, k_a], [k_b])]))
        return {"a": a, "b": b}
    if kind == "0-d":
        other = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        return {"a": [], "b": other} if draw(st.booleans()) else {"a": other, "b": []}
    batch_a, batch_b = draw(st.lists(st.integers(2, 4), min_size=2, max_size=2, unique=True))
    return {"a": [batch_a, n, k_a], "b": [batch_b, k_a, m]}


@st.composite
def reshape_mismatch(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    return {"a": list(shape), "b": [int(np.prod(shape)) + draw(st.integers(1, 3))], "as_tuple": draw(st.booleans())}


SHAPE_ERRORS = {  # variant -> (task, points, cases {"call", "a", "b"}: the call and the two shapes it must name)
    "broadcast_shape": ("01.4", 1, mismatched_shapes().map(lambda pair: {"a": pair[0], "b": pair[1]})),
    "elementwise": ("01.5", 2, st.tuples(mismatched_shapes(), st.sampled_from(list(OPERATORS))).map(
        lambda pair: {"a": pair[0][0], "b": pair[0][1], "call": pair[1]})),
    "matmul": ("01.7", 2, misaligned_matmul()),
    "reshape": ("01.11", 1, reshape_mismatch())}


def shape_error_words(case: dict) -> str:
    a, b, call = tuple(case["a"]), tuple(case["b"]), case["call"]
    if call == "broadcast_shape":
        return f"broadcast_shape({a}, {b}, 'add')"
    if call == "reshape":
        args = f"{b}" if case["as_tuple"] else ", ".join(map(str, b))
        return f"Tensor.reshape({args}) of a float32 tensor of shape {a}"
    return f"a tensor of shape {a} {SYMBOLS.get(call, '@')} a tensor of shape {b}"


@check(describe=shape_error_words,
       variants={name: (task, points, cases.map(lambda case, name=name: {"call": name, "as_tuple": False, **case}))
                 for name, (task, points, cases) in SHAPE_ERRORS.items()})
def shapes_that_do_not_fit_raise_a_value_error(tt, case):
    """Shapes that do not broadcast, multiply or reshape raise a ValueError naming both (and a 0-d operand of @)."""
    a, b, call = case["a"], case["b"], case["call"]
    if call == "broadcast_shape":
        return capture_error(lambda: module(tt, "tensor").broadcast_shape(tuple(a), tuple(b), "add"))
    t = tt.Tensor(np.ones(a, np.float32))
    if call == "reshape":
        return capture_error(lambda: LAYOUTS["reshape"](t, {"shape": b, "as_tuple": case["as_tuple"]}))
    other = tt.Tensor(np.ones(b, np.float32))
    return capture_error(lambda: (operator.matmul if call == "matmul" else OPERATORS[call])(t, other))


@shapes_that_do_not_fit_raise_a_value_error.verdict
def _(case, output):
    expect_error(output, shape_error_words(case), str(tuple(case["a"])), str(tuple(case["b"])))




# --- 01.13 indexing with integer arrays and Tensors -----------------------------------------------------

@st.composite
def integer_index_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    length = draw(st.integers(1, 6))
    axes = 2 if len(shape) >= 2 and draw(st.booleans()) else 1
    positions = [draw(st.lists(st.integers(-shape[axis], shape[axis] - 1), min_size=length, max_size=length))
                 for axis in range(axes)]
    return {"x": draw(arrays(shape, np.float32)), "positions": positions,
            "form": draw(st.sampled_from(["list", "array", "tensor"]))}


def integer_index_words(case: dict) -> str:
    wrap = {"list": "{}", "array": "np.array({})", "tensor": "Tensor({})"}[case["form"]]
    return f"t[{', '.join(wrap.format(p) for p in case['positions'])}] for {tensor_words(case['x'])}"


@check(task="01.13", points=2, dtype=True, inputs=integer_index_case(), describe=integer_index_words)
def integer_array_indexing(tt, case):
    """Lists, integer arrays and integer Tensors pick positions (repeats and negatives too)."""
    wrap = {"list": lambda p: p, "array": lambda p: np.array(p, dtype=np.int64),
            "tensor": lambda p: tt.Tensor(np.array(p, dtype=np.int64))}[case["form"]]
    parts = [wrap(p) for p in case["positions"]]
    return tt.Tensor(case["x"])[parts[0] if len(parts) == 1 else tuple(parts)].data


@integer_array_indexing.expected
def _(case):
    parts = [np.array(p, dtype=np.int64) for p in case["positions"]]
    return case["x"][parts[0] if len(parts) == 1 else tuple(parts)]


@st.composite
def tensor_index_case(draw):
    """Integer positions to wrap in Tensors, alone or in a tuple with a slice, an int, None or ..."""
    positions = draw(st.lists(st.lists(st.integers(-4, 3), min_size=1, max_size=4), min_size=1, max_size=2))
    if not draw(st.booleans()):
        return {"positions": positions[:1], "tuple": False, "extra": None}
    extra = draw(st.sampled_from([["slice", None, None, None], ["slice", 1, None, 2], "...", None, 0, -1]))
    return {"positions": positions, "tuple": True, "extra": extra}


def tensor_index_words(case: dict) -> str:
    items = [f"Tensor({p})" for p in case["positions"]]
    if not case["tuple"]:
        return f"unwrap_index({items[0]})"
    return f"unwrap_index(({', '.join(items + [index_words({'tuple': False, 'items': [case['extra']]})[1:-1]])}))"


@check(task="01.13", points=1, inputs=tensor_index_case(), describe=tensor_index_words)
def unwrap_index_replaces_tensors(tt, case):
    """unwrap_index replaces every Tensor in an index (alone or in a tuple) by its array."""
    tensors = [tt.Tensor(np.array(p, dtype=np.int64)) for p in case["positions"]]
    extra = decode_index({"tuple": False, "items": [case["extra"]]})
    index = module(tt, "tensor").unwrap_index((*tensors, extra) if case["tuple"] else tensors[0])
    items = index if isinstance(index, tuple) else (index,)
    return {"type": type(index).__name__, "types of the items": [type(item).__name__ for item in items],
            "arrays": [np.asarray(item) for item in items[:len(tensors)] if isinstance(item, np.ndarray)]}


@unwrap_index_replaces_tensors.expected
def _(case):
    extra = decode_index({"tuple": False, "items": [case["extra"]]})
    return {"type": "tuple" if case["tuple"] else "ndarray",
            "types of the items": ["ndarray"] * len(case["positions"]) + ([type(extra).__name__] if case["tuple"]
                                                                          else []),
            "arrays": [np.array(p, dtype=np.int64) for p in case["positions"]]}


# --- 01.14 factories -------------------------------------------------------------------------------

def factory_words(c: dict) -> str:
    shape = tuple(c["shape"]) if c["as_tuple"] else ", ".join(map(str, c["shape"]))
    return (f"{c['which']}({shape}{'' if c['dtype'] is None else ', dtype=np.' + c['dtype']}, "
            f"requires_grad={c['requires_grad']})")


@check(task="01.14", points=1, dtype=True, describe=factory_words,
       variants={which: st.fixed_dictionaries({
           "which": st.just(which), "shape": shapes(min_dims=0, max_dims=3, min_side=0, max_side=4).map(list),
           "as_tuple": st.booleans(), "dtype": st.sampled_from([None, "float64", "int64"]),
           "requires_grad": st.booleans()}) for which in ("zeros", "ones")})
def zeros_and_ones(tt, case):
    """zeros/ones take a shape as arguments or a tuple; float32 unless dtype says otherwise."""
    make, shape = getattr(tt, case["which"]), case["shape"]
    kwargs = {"requires_grad": case["requires_grad"], **({} if case["dtype"] is None
                                                         else {"dtype": getattr(np, case["dtype"])})}
    t = make(tuple(shape), **kwargs) if case["as_tuple"] else make(*shape, **kwargs)
    return {"data": t.data, "requires_grad": bool(t.requires_grad)}


@zeros_and_ones.expected
def _(case):
    fill = np.zeros if case["which"] == "zeros" else np.ones
    return {"data": fill(tuple(case["shape"]), dtype=case["dtype"] or np.float32),
            "requires_grad": case["requires_grad"]}


@st.composite
def arange_case(draw):
    if draw(st.booleans()):  # ints
        start, end = draw(st.integers(-20, 20)), draw(st.integers(-20, 20))
        step = draw(st.sampled_from([1, 2, 3, -1, -2]))
    else:  # floats on a grid of quarters, so the values are exact in float32
        start, end = draw(st.integers(-20, 20)) / 4, draw(st.integers(-20, 20)) / 4
        step = draw(st.sampled_from([0.25, 0.5, 1.0, 1.5, -0.5, 2]))
    form = draw(st.sampled_from(["end", "start_end", "start_end_step"]))
    if form == "end" or (form == "start_end" and step != 1):
        step = 1
    if form == "end" and isinstance(end, float):
        end = abs(end)
    return {"args": {"end": [end], "start_end": [start, end], "start_end_step": [start, end, step]}[form]}


@check(task="01.14", points=2, dtype=True, inputs=arange_case(),
       describe=lambda c: f"arange({', '.join(map(repr, c['args']))})")
def arange_like_numpy(tt, case):
    """arange like np.arange: int64 for int arguments, float32 otherwise."""
    return tt.arange(*case["args"]).data


@arange_like_numpy.expected
def _(case):
    values = np.arange(*case["args"])
    return values.astype(np.int64 if all(isinstance(v, int) for v in case["args"]) else np.float32)


@check(task="01.14", points=2, examples=3, inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1)}),
       describe=lambda c: f"randn(1000, 100) after manual_seed({c['seed']})")
def randn_is_standard_normal(tt, case):
    """randn draws float32 samples with mean 0 and standard deviation 1."""
    tt.manual_seed(case["seed"])
    return tt.randn(1000, 100).data


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """The standard normal's CDF, vectorised: erf by Abramowitz and Stegun's 7.1.26 (error under 1.5e-7, far
    below the 0.0082 the gap is held to; math.erf over 10^5 samples cost a tenth of a second per case)."""
    z = np.abs(x) / math.sqrt(2)
    t = 1 / (1 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf = 1 - poly * np.exp(-z * z)
    return 0.5 * (1 + np.sign(x) * erf)


@randn_is_standard_normal.verdict
def _(case, output):
    what, samples = f"randn(1000, 100) after manual_seed({case['seed']})", np.asarray(output)
    if samples.shape != (1000, 100) or samples.dtype != np.float32:
        raise failed(f"{what}: expected float32 samples of shape (1000, 100) but got {samples.dtype} samples of "
                     f"shape {samples.shape}")
    mean, std = float(samples.astype(np.float64).mean()), float(samples.astype(np.float64).std())
    # 10^5 samples: the mean's standard error is 0.003, the std's 0.002; 0.02 is over 6 of them.
    if abs(mean) > 0.02 or abs(std - 1) > 0.02:
        raise failed(f"{what}: expected mean 0 and standard deviation 1 but the samples have mean {mean:.4f} and "
                     f"standard deviation {std:.4f}")
    # the right mean and spread are not a normal distribution: the largest gap between the samples' CDF and the
    # normal's (Kolmogorov-Smirnov; over 0.0082 has a chance under 1e-6 for 10^5 normal samples), and the
    # correlation of neighbours (a draw must not follow from the one before; its standard error is 0.003)
    ordered = np.sort(samples.astype(np.float64).ravel())
    normal = _normal_cdf(ordered)
    steps = np.arange(1, ordered.size + 1) / ordered.size
    gap = float(max(np.max(steps - normal), np.max(normal - (steps - 1 / ordered.size))))
    flat = samples.astype(np.float64).ravel()
    neighbours = float(np.corrcoef(flat[:-1], flat[1:])[0, 1])
    if gap > 0.0082 or abs(neighbours) > 0.02:
        raise failed(f"{what}: the samples have mean 0 and standard deviation 1 but are not independent draws of a "
                     f"normal distribution (largest gap to the normal CDF {gap:.4f}, at most 0.0082; correlation of "
                     f"neighbours {neighbours:.3f}): draw them with default_generator's standard_normal")
    # and they are the generator's own draws, as the notebook asks: no sequence made to look normal passes
    drawn = np.random.default_rng(case["seed"]).standard_normal((1000, 100), dtype=np.float32)
    if not np.array_equal(samples, drawn):
        raise failed(f"{what}: the samples look normal but are not the draws of "
                     f"default_generator.standard_normal(shape, dtype=dtype) after manual_seed({case['seed']}) "
                     f"({int(np.count_nonzero(samples != drawn)):,} of 100,000 differ): draw them with that one call, "
                     f"as the notebook says (float32 directly, no float64 detour)")


@check(task="01.14", points=1, examples=10,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1),
                                     "shape": shapes(min_dims=1, max_dims=3, min_side=2, max_side=4).map(list)}),
       describe=lambda c: f"randn{tuple(c['shape'])} after manual_seed({c['seed']}), again after manual_seed("
                          f"{c['seed']}), and once more without reseeding")
def randn_is_reproducible_after_manual_seed(tt, case):
    """The same seed gives the same samples; without a reset the samples change."""
    tt.manual_seed(case["seed"])
    first = np.array(tt.randn(*case["shape"]).data)
    tt.manual_seed(case["seed"])
    return {"first draw": first, "draw after reseeding": np.array(tt.randn(*case["shape"]).data),
            "next draw": np.array(tt.randn(*case["shape"]).data)}


@randn_is_reproducible_after_manual_seed.verdict
def _(case, output):
    what, shape = randn_is_reproducible_after_manual_seed.what(case), tuple(case["shape"])
    draws = {name: np.asarray(output[name]) for name in ("first draw", "draw after reseeding", "next draw")}
    for name, draw in draws.items():
        if draw.shape != shape:
            raise failed(f"{what}: expected the {name} to have shape {shape} but it has shape {draw.shape}")
    if not np.array_equal(draws["first draw"], draws["draw after reseeding"]):
        raise failed(f"{what}: the draw after reseeding differs from the first draw with the same seed")
    if np.array_equal(draws["draw after reseeding"], draws["next draw"]):
        raise failed(f"{what}: the next draw, without reseeding, repeats the one before it")
