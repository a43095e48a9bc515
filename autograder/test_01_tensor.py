"""Hidden suite of 01_tensor: tinytorch/core/tensor.py against numpy.

Cases hold only numpy arrays and plain values (dtypes as names, axes and shapes as lists, indices in a
plain encoding), so they travel between processes; every expected value comes from numpy on the case.
"""

import operator
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import CheckFailed, arrays, capture_error, check, shapes

# --- shared strategies and helpers -----------------------------------------------------------------

SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}
OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
             "pow": operator.pow}
UFUNCS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power}


def tensor_words(x) -> str:
    x = np.asarray(x)
    article = "an" if x.dtype.name.startswith("int") else "a"
    return f"{article} {x.dtype} tensor of shape {x.shape}"


def strides_in_elements(x: np.ndarray) -> list:
    return [step // x.itemsize for step in x.strides]


def as_axis(axis):
    """Axes travel as None, an int or a list; numpy wants a tuple."""
    return tuple(axis) if isinstance(axis, list) else axis


def squeeze(text: str) -> str:
    return "".join(str(text).split())


def dtype_arrays(shape, dtypes, low=-10.0, high=10.0):
    """(array) of one of `dtypes` (names), values in [low, high]."""
    return st.sampled_from(dtypes).flatmap(lambda name: arrays(shape, np.dtype(name), low, high))


def away_from_zero(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 0.5, np.ones_like(x), x)


@st.composite
def broadcastable_pair(draw, dtypes=("float32", "float64", "int64"), nonzero_b=False):
    a_shape, b_shape = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                              min_side=1, max_side=5)).input_shapes
    a = draw(dtype_arrays(a_shape, list(dtypes)))
    b = draw(dtype_arrays(b_shape, list(dtypes)))
    return {"a": a, "b": away_from_zero(b) if nonzero_b else b}


@st.composite
def mismatched_shapes(draw):
    """Two shapes that do not broadcast: equal everywhere but one aligned axis, where both sizes are >= 2."""
    base = list(draw(shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)))
    axis = draw(st.integers(0, len(base) - 1))
    start = draw(st.integers(0, axis))
    size_a, size_b = draw(st.lists(st.integers(2, 5), min_size=2, max_size=2, unique=True))
    a, b = list(base), base[start:]
    a[axis], b[axis - start] = size_a, size_b
    if draw(st.booleans()):
        a, b = b, a
    return a, b


@st.composite
def axis_for(draw, ndim: int):
    """None, an int (maybe negative) or a list of distinct axes (maybe negative, maybe empty)."""
    kind = draw(st.sampled_from(["none", "int", "tuple"] if ndim else ["none", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    if ndim == 0:
        return []
    axes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return [a - ndim if draw(st.booleans()) else a for a in axes]


@st.composite
def reduction_case(draw, dtypes):
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    return {"x": draw(dtype_arrays(shape, dtypes)), "axis": draw(axis_for(len(shape))),
            "keepdims": draw(st.booleans())}


@st.composite
def empty_reduction_case(draw):
    """An array with a zero-size axis, reduced over that axis (alone, in a tuple, or with axis=None)."""
    shape = list(draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)))
    ndim = len(shape)
    zero = draw(st.integers(0, ndim - 1))
    shape[zero] = 0
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        axis = None
    elif kind == "int":
        axis = zero - ndim if draw(st.booleans()) else zero
    else:
        axes = sorted({zero, *draw(st.lists(st.integers(0, ndim - 1), max_size=ndim))})
        axis = [a - ndim if draw(st.booleans()) else a for a in axes]
    return {"x": np.zeros(shape, np.float32), "axis": axis, "keepdims": draw(st.booleans())}


def reduction_words(name: str, case: dict) -> str:
    return (f"Tensor.{name}(axis={as_axis(case['axis'])!r}, keepdims={case['keepdims']}) of "
            f"{tensor_words(case['x'])}")


# Indices travel in a plain encoding: ints, None, "..." and ["slice", start, stop, step].
def encode_index(index) -> dict:
    def one(item):
        if isinstance(item, slice):
            return ["slice", item.start, item.stop, item.step]
        if item is Ellipsis:
            return "..."
        return None if item is None else int(item)
    if isinstance(index, tuple):
        return {"tuple": True, "items": [one(item) for item in index]}
    return {"tuple": False, "items": [one(index)]}


def decode_index(encoded: dict):
    def one(item):
        if isinstance(item, list):
            return slice(*item[1:])
        return Ellipsis if item == "..." else item
    items = [one(item) for item in encoded["items"]]
    return tuple(items) if encoded["tuple"] else items[0]


def index_words(encoded: dict) -> str:
    def one(item):
        if isinstance(item, list):
            start, stop, step = item[1:]
            text = f"{'' if start is None else start}:{'' if stop is None else stop}"
            return text + (f":{step}" if step is not None else "")
        return "..." if item == "..." else "None" if item is None else str(item)
    inner = ", ".join(one(item) for item in encoded["items"])
    return f"[{inner}{',' if encoded['tuple'] and len(encoded['items']) == 1 else ''}]"


def expect_error(case: dict, output: dict, what: str, *parts: str, error: str = "ValueError") -> None:
    if output.get("raised") != error:
        got = "no error" if output.get("raised") is None else f"{output['raised']}: {output.get('message')}"
        raise CheckFailed(f"{what}: expected a {error} but got {got}")
    missing = [part for part in parts if part not in output.get("message", "")]
    if missing:
        raise CheckFailed(f"{what}: the {error} should name {' and '.join(parts)}, "
                          f"but its message is {output['message']!r}")


# --- 01.1 construction and the dtype rule ----------------------------------------------------------

@st.composite
def python_floats(draw):
    """Nested lists of Python floats (or one float); when mixed, every other element is a Python int."""
    x = draw(arrays(shapes(min_dims=0, max_dims=3), np.float64, -100, 100)).astype(object)
    mixed = x.ndim > 0 and draw(st.booleans())
    if mixed:
        flat = x.reshape(-1)
        flat[1::2] = [int(round(value)) for value in flat[1::2]]
    return {"data": x.tolist(), "mixed": mixed}


@check(task="01.1", points=2, dtype=True, inputs=python_floats(),
       describe=lambda c: f"Tensor({c['data']!r:.60}) (Python floats{' and ints' if c['mixed'] else ''})")
def python_floats_become_float32(tt, case):
    """Tensor(Python floats) is float32."""
    return tt.Tensor(case["data"]).data


@python_floats_become_float32.expected
def _(case):
    return np.array(case["data"], dtype=np.float64).astype(np.float32)


@check(task="01.1", points=2, dtype=True,
       inputs=st.sampled_from(["int64", "bool"]).flatmap(lambda kind: st.fixed_dictionaries({
           "kind": st.just(kind),
           "data": arrays(shapes(min_dims=0, max_dims=3), np.dtype(kind), -1000, 1000).map(lambda x: x.tolist())})),
       describe=lambda c: f"Tensor({c['data']!r:.60}) (Python {'ints' if c['kind'] == 'int64' else 'bools'})")
def python_ints_become_int64_and_bools_bool(tt, case):
    """Tensor(Python ints) is int64; Tensor(Python bools) is bool."""
    return tt.Tensor(case["data"]).data


@python_ints_become_int64_and_bools_bool.expected
def _(case):
    return np.array(case["data"], dtype=case["kind"])


@check(task="01.1", points=2, dtype=True,
       inputs=st.fixed_dictionaries({
           "x": dtype_arrays(shapes(min_dims=0, max_dims=3),
                             ["float16", "float32", "float64", "int8", "int32", "int64", "uint8", "bool"], 0, 100),
           "scalar": st.booleans()}).map(lambda c: {"x": c["x"].reshape(-1)[0] if c["scalar"] and c["x"].size
                                                     else c["x"]}),
       describe=lambda c: f"Tensor(numpy {'scalar' if isinstance(c['x'], np.generic) else 'array'} of dtype "
                          f"{c['x'].dtype} and shape {np.shape(c['x'])})")
def numpy_data_keeps_its_dtype(tt, case):
    """Tensor(numpy array or scalar) keeps its dtype."""
    return tt.Tensor(case["x"]).data


@numpy_data_keeps_its_dtype.expected
def _(case):
    return np.asarray(case["x"])


@check(task="01.1", points=1, dtype=True,
       inputs=st.fixed_dictionaries({
           "x": dtype_arrays(shapes(min_dims=0, max_dims=3), ["float32", "int64"], -100, 100),
           "as_list": st.booleans(),
           "dtype": st.sampled_from(["float32", "float64", "int32", "int64", "float16"])}).map(
           lambda c: {"data": c["x"].tolist() if c["as_list"] else c["x"], "dtype": c["dtype"]}),
       describe=lambda c: f"Tensor({'a list' if isinstance(c['data'], (list, float, int)) else tensor_words(c['data'])}"
                          f", dtype=np.{c['dtype']})")
def explicit_dtype_is_a_cast(tt, case):
    """Tensor(data, dtype=...) casts to that dtype."""
    return tt.Tensor(case["data"], dtype=getattr(np, case["dtype"])).data


@explicit_dtype_is_a_cast.expected
def _(case):
    return np.asarray(case["data"]).astype(case["dtype"])


# --- 01.2 shape and strides ------------------------------------------------------------------------

@check(task="01.2", points=2,
       inputs=st.fixed_dictionaries({"x": arrays(shapes(min_dims=0, max_dims=4, min_side=0), np.float32)}),
       describe=lambda c: f"shape, ndim, size and len() of {tensor_words(c['x'])}")
def shape_ndim_size_and_len(tt, case):
    """shape (a tuple), ndim, size and len() describe the tensor; len() of a 0-d tensor is a TypeError."""
    t = tt.Tensor(case["x"])
    return {"shape": list(t.shape), "shape is a tuple": isinstance(t.shape, tuple), "ndim": t.ndim,
            "size": t.size, "len": len(t) if case["x"].ndim else capture_error(lambda: len(t))["raised"]}


@shape_ndim_size_and_len.expected
def _(case):
    x = case["x"]
    return {"shape": list(x.shape), "shape is a tuple": True, "ndim": x.ndim, "size": x.size,
            "len": len(x) if x.ndim else capture_error(lambda: len(x))["raised"]}


@check(task="01.2", points=1,
       inputs=st.fixed_dictionaries({"x": dtype_arrays(shapes(min_dims=0, max_dims=4, min_side=0),
                                                       ["float32", "float64", "int64", "int8", "bool"])}),
       describe=lambda c: f"stride() and is_contiguous() of {tensor_words(c['x'])}")
def stride_counts_elements(tt, case):
    """stride() counts elements (not bytes); a new tensor is contiguous."""
    t = tt.Tensor(case["x"])
    return {"stride": list(t.stride()), "is_contiguous": bool(t.is_contiguous())}


@stride_counts_elements.expected
def _(case):
    return {"stride": strides_in_elements(case["x"]), "is_contiguous": True}


# --- 01.3 repr, numpy and item ---------------------------------------------------------------------

@check(task="01.3", points=1,
       inputs=st.fixed_dictionaries({"x": dtype_arrays(shapes(min_dims=0, max_dims=4), ["float32", "int64", "bool"])}),
       describe=lambda c: f"Tensor(x).numpy() for {tensor_words(c['x'])}")
def numpy_returns_the_array(tt, case):
    """numpy() returns the tensor's own numpy array."""
    t = tt.Tensor(case["x"])
    out = t.numpy()
    return {"is an ndarray": isinstance(out, np.ndarray), "values": np.asarray(out),
            "shares memory": bool(np.shares_memory(out, t.data))}


@numpy_returns_the_array.expected
def _(case):
    return {"is an ndarray": True, "values": case["x"], "shares memory": True}


@check(task="01.3", points=1,
       inputs=st.fixed_dictionaries({"x": st.sampled_from([(), (1,), (1, 1), (1, 1, 1)]).flatmap(
           lambda shape: dtype_arrays(shape, ["float32", "float64", "int64", "bool"], -1000, 1000))}),
       describe=lambda c: f"item() of {tensor_words(c['x'])}")
def item_returns_a_python_number(tt, case):
    """item() returns the one element as a Python float, int or bool."""
    value = tt.Tensor(case["x"]).item()
    return {"type": type(value).__name__, "value": value}


@item_returns_a_python_number.expected
def _(case):
    value = case["x"].item()
    return {"type": type(value).__name__, "value": value}


@check(task="01.3", points=2,
       inputs=st.fixed_dictionaries({"x": dtype_arrays(shapes(min_dims=0, max_dims=3, max_side=4),
                                                       ["float32", "float64", "int64", "bool"], -100, 100)}),
       describe=lambda c: f"repr() of {tensor_words(c['x'])}")
def repr_shows_values_and_dtype(tt, case):
    """repr() reads tensor(<values>, dtype=<dtype>)."""
    return repr(tt.Tensor(case["x"]))


@repr_shows_values_and_dtype.verdict
def _(case, output):
    x = case["x"]
    values = squeeze(np.array2string(x, separator=", "))
    what = f"repr() of {tensor_words(x)}"
    if not isinstance(output, str):
        raise CheckFailed(f"{what}: expected a str but got {type(output).__name__}")
    text = squeeze(output)
    if not text.startswith("tensor(" + values):
        raise CheckFailed(f"{what}: expected it to start with tensor({np.array2string(x, separator=', ')} "
                          f"but got {output!r:.120}")
    if f"dtype={x.dtype}" not in text:
        raise CheckFailed(f"{what}: expected it to show dtype={x.dtype} but got {output!r:.120}")


@check(task="01.3", points=1,
       inputs=st.fixed_dictionaries({"x": arrays(shapes(min_dims=0, max_dims=2, max_side=4), np.float32)}),
       describe=lambda c: f"repr() of {tensor_words(c['x'])} with requires_grad=True")
def repr_shows_requires_grad(tt, case):
    """repr() ends with requires_grad=True when it is set."""
    return repr(tt.Tensor(case["x"], requires_grad=True))


@repr_shows_requires_grad.verdict
def _(case, output):
    what = f"repr() of {tensor_words(case['x'])} with requires_grad=True"
    values = squeeze(np.array2string(case["x"], separator=", "))
    text = squeeze(output) if isinstance(output, str) else ""
    if not (text.startswith("tensor(" + values) and text.endswith(",requires_grad=True)")):
        raise CheckFailed(f"{what}: expected tensor(<values>, dtype=float32, requires_grad=True) "
                          f"but got {output!r:.120}")


# --- 01.4 broadcasting -----------------------------------------------------------------------------

@check(task="01.4", points=2,
       inputs=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=5)
       .map(lambda shapes_: {"a": list(shapes_.input_shapes[0]), "b": list(shapes_.input_shapes[1])}),
       describe=lambda c: f"broadcast_shape({tuple(c['a'])}, {tuple(c['b'])})")
def broadcast_shape_follows_the_rule(tt, case):
    """broadcast_shape gives numpy's broadcast shape."""
    result = tt.core.tensor.broadcast_shape(tuple(case["a"]), tuple(case["b"]))
    return {"shape": list(result), "is a tuple": isinstance(result, tuple)}


@broadcast_shape_follows_the_rule.expected
def _(case):
    return {"shape": list(np.broadcast_shapes(tuple(case["a"]), tuple(case["b"]))), "is a tuple": True}


@check(task="01.4", points=1,
       inputs=mismatched_shapes().map(lambda pair: {"a": pair[0], "b": pair[1]}),
       describe=lambda c: f"broadcast_shape({tuple(c['a'])}, {tuple(c['b'])}, 'add')")
def broadcast_shape_refuses_with_both_shapes(tt, case):
    """broadcast_shape raises a ValueError naming both shapes when they do not broadcast."""
    return capture_error(lambda: tt.core.tensor.broadcast_shape(tuple(case["a"]), tuple(case["b"]), "add"))


@broadcast_shape_refuses_with_both_shapes.verdict
def _(case, output):
    expect_error(case, output, f"broadcast_shape({tuple(case['a'])}, {tuple(case['b'])}, 'add')",
                 str(tuple(case["a"])), str(tuple(case["b"])))


# --- 01.5 elementwise operations -------------------------------------------------------------------

def binary_case(op: str, nonzero_b: bool = False):
    """Two broadcastable arrays, and the operator's name, which travels in the case."""
    return broadcastable_pair(nonzero_b=nonzero_b).map(lambda pair: {**pair, "op": op})


def binary_words(case: dict) -> str:
    return f"{tensor_words(case['a'])} {SYMBOLS[case['op']]} {tensor_words(case['b'])}"


def apply_operator(tt, case):
    return OPERATORS[case["op"]](tt.Tensor(case["a"]), tt.Tensor(case["b"])).data


def numpy_operator(case):
    return UFUNCS[case["op"]](case["a"], case["b"])


@check(task="01.5", points=2, dtype=True, inputs=binary_case("add"), describe=binary_words)
def add_broadcasts_like_numpy(tt, case):
    """Tensor + Tensor broadcasts and promotes dtypes like numpy."""
    return apply_operator(tt, case)


add_broadcasts_like_numpy.expected(numpy_operator)


@check(task="01.5", points=1, dtype=True, inputs=binary_case("sub"), describe=binary_words)
def sub_broadcasts_like_numpy(tt, case):
    """Tensor - Tensor broadcasts and promotes dtypes like numpy."""
    return apply_operator(tt, case)


sub_broadcasts_like_numpy.expected(numpy_operator)


@check(task="01.5", points=1, dtype=True, inputs=binary_case("mul"), describe=binary_words)
def mul_broadcasts_like_numpy(tt, case):
    """Tensor * Tensor broadcasts and promotes dtypes like numpy."""
    return apply_operator(tt, case)


mul_broadcasts_like_numpy.expected(numpy_operator)


@check(task="01.5", points=1, dtype=True, inputs=binary_case("div", nonzero_b=True), describe=binary_words)
def div_broadcasts_like_numpy(tt, case):
    """Tensor / Tensor broadcasts and promotes dtypes like numpy."""
    return apply_operator(tt, case)


div_broadcasts_like_numpy.expected(numpy_operator)


@st.composite
def pow_case(draw):
    a_shape, b_shape = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4,
                                                              min_side=1, max_side=5)).input_shapes
    base = draw(dtype_arrays(a_shape, ["float32", "float64"], 0.5, 3.0))
    exponent = draw(st.one_of(arrays(b_shape, np.float32, -2.0, 2.0), st.sampled_from([2, 3, -1, 0.5, 1.5])))
    return {"a": base, "b": exponent}


@check(task="01.5", points=1, dtype=True, inputs=pow_case(),
       describe=lambda c: f"{tensor_words(c['a'])} ** "
                          f"{tensor_words(c['b']) if isinstance(c['b'], np.ndarray) else repr(c['b'])}")
def pow_like_numpy(tt, case):
    """Tensor ** Tensor and Tensor ** number like numpy."""
    b = tt.Tensor(case["b"]) if isinstance(case["b"], np.ndarray) else case["b"]
    return (tt.Tensor(case["a"]) ** b).data


@pow_like_numpy.expected
def _(case):
    return np.power(case["a"], case["b"])


@check(task="01.5", points=2, dtype=True,
       inputs=st.fixed_dictionaries({
           "op": st.sampled_from(list(SYMBOLS)),
           "x": dtype_arrays(shapes(min_dims=0, max_dims=3), ["float32", "int64"], 1, 3),
           "number": st.one_of(st.sampled_from([1, 2, 3]), st.floats(0.5, 3.0, width=32)),
           "number_first": st.booleans()}),
       describe=lambda c: (f"{c['number']!r} {SYMBOLS[c['op']]} {tensor_words(c['x'])}" if c["number_first"]
                           else f"{tensor_words(c['x'])} {SYMBOLS[c['op']]} {c['number']!r}"))
def python_numbers_on_either_side(tt, case):
    """A Python number works on either side and does not change a float32 tensor's dtype."""
    t, number, op = tt.Tensor(case["x"]), case["number"], OPERATORS[case["op"]]
    return (op(number, t) if case["number_first"] else op(t, number)).data


@python_numbers_on_either_side.expected
def _(case):
    ufunc, x, number = UFUNCS[case["op"]], case["x"], case["number"]
    return ufunc(number, x) if case["number_first"] else ufunc(x, number)


@check(task="01.5", points=1, dtype=True,
       inputs=st.fixed_dictionaries({"x": dtype_arrays(shapes(min_dims=0, max_dims=4), ["float32", "float64", "int64"])}),
       describe=lambda c: f"-(tensor) for {tensor_words(c['x'])}")
def neg_like_numpy(tt, case):
    """-Tensor negates every element."""
    return (-tt.Tensor(case["x"])).data


@neg_like_numpy.expected
def _(case):
    return np.negative(case["x"])


@check(task="01.5", points=2,
       inputs=st.fixed_dictionaries({"shapes": mismatched_shapes(), "op": st.sampled_from(list(SYMBOLS))}),
       describe=lambda c: f"a tensor of shape {tuple(c['shapes'][0])} {SYMBOLS[c['op']]} "
                          f"a tensor of shape {tuple(c['shapes'][1])}")
def elementwise_mismatch_names_both_shapes(tt, case):
    """Shapes that do not broadcast raise a ValueError naming both."""
    a_shape, b_shape = case["shapes"]
    a, b = tt.Tensor(np.ones(a_shape, np.float32)), tt.Tensor(np.ones(b_shape, np.float32))
    return capture_error(lambda: OPERATORS[case["op"]](a, b))


@elementwise_mismatch_names_both_shapes.verdict
def _(case, output):
    a_shape, b_shape = (tuple(shape) for shape in case["shapes"])
    expect_error(case, output, f"a tensor of shape {a_shape} {SYMBOLS[case['op']]} a tensor of shape {b_shape}",
                 str(a_shape), str(b_shape))


# --- 01.6 exp, log, sqrt ---------------------------------------------------------------------------

@st.composite
def unary_case(draw):
    op = draw(st.sampled_from(["exp", "log", "sqrt"]))
    low, high = (-10, 10) if op == "exp" else (1 / 64, 100)
    dtype = draw(st.sampled_from(["float32", "float64", "int64"]))
    if dtype == "int64":
        low, high = (-5, 5) if op == "exp" else (1, 100)
    return {"op": op, "x": draw(arrays(shapes(min_dims=0, max_dims=4), np.dtype(dtype), low, high))}


@check(task="01.6", points=2, dtype=True, inputs=unary_case(),
       describe=lambda c: f"Tensor.{c['op']}() of {tensor_words(c['x'])}")
def exp_log_sqrt_like_numpy(tt, case):
    """exp(), log() and sqrt() apply elementwise like numpy."""
    return getattr(tt.Tensor(case["x"]), case["op"])().data


@exp_log_sqrt_like_numpy.expected
def _(case):
    return getattr(np, case["op"])(case["x"])


# --- 01.7 matmul -----------------------------------------------------------------------------------

@check(task="01.7", points=2, dtype=True, atol=1e-4,
       inputs=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5),
                        st.sampled_from(["float32", "float64"])).flatmap(
           lambda nkm: st.fixed_dictionaries({"a": arrays((nkm[0], nkm[1]), np.dtype(nkm[3])),
                                              "b": arrays((nkm[1], nkm[2]), np.float32)})),
       describe=lambda c: f"{tensor_words(c['a'])} @ {tensor_words(c['b'])}")
def matmul_of_two_matrices(tt, case):
    """(n, k) @ (k, m) gives (n, m) like numpy."""
    return (tt.Tensor(case["a"]) @ tt.Tensor(case["b"])).data


@matmul_of_two_matrices.expected
def _(case):
    return np.matmul(case["a"], case["b"])


@check(task="01.7", points=2, dtype=True, atol=1e-4,
       inputs=hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, min_side=1, max_side=4)
       .flatmap(lambda s: st.fixed_dictionaries({"a": arrays(s.input_shapes[0], np.float32),
                                                 "b": arrays(s.input_shapes[1], np.float32)})),
       describe=lambda c: f"{tensor_words(c['a'])} @ {tensor_words(c['b'])}")
def matmul_batched_and_vectors(tt, case):
    """@ broadcasts batch axes and treats 1-d operands as vectors, like np.matmul."""
    return (tt.Tensor(case["a"]) @ tt.Tensor(case["b"])).data


@matmul_batched_and_vectors.expected
def _(case):
    return np.matmul(case["a"], case["b"])


@st.composite
def misaligned_matmul(draw):
    kind = draw(st.sampled_from(["matrix", "vector", "batch"]))
    n, m = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    k_a, k_b = draw(st.lists(st.integers(1, 5), min_size=2, max_size=2, unique=True))
    if kind == "matrix":
        batch = draw(st.lists(st.integers(1, 3), max_size=2))
        return {"a": [*batch, n, k_a], "b": [*batch, k_b, m]}
    if kind == "vector":
        a, b = draw(st.sampled_from([([k_a], [k_b]), ([k_a], [k_b, m]), ([n, k_a], [k_b])]))
        return {"a": a, "b": b}
    batch_a, batch_b = draw(st.lists(st.integers(2, 4), min_size=2, max_size=2, unique=True))
    return {"a": [batch_a, n, k_a], "b": [batch_b, k_a, m]}


@check(task="01.7", points=2, inputs=misaligned_matmul(),
       describe=lambda c: f"a tensor of shape {tuple(c['a'])} @ a tensor of shape {tuple(c['b'])}")
def matmul_mismatch_names_both_shapes(tt, case):
    """@ on shapes that do not fit raises a ValueError naming both."""
    a = tt.Tensor(np.ones(case["a"], np.float32))
    b = tt.Tensor(np.ones(case["b"], np.float32))
    return capture_error(lambda: a @ b)


@matmul_mismatch_names_both_shapes.verdict
def _(case, output):
    a_shape, b_shape = tuple(case["a"]), tuple(case["b"])
    expect_error(case, output, f"a tensor of shape {a_shape} @ a tensor of shape {b_shape}",
                 str(a_shape), str(b_shape))


# --- 01.8 sum, 01.9 mean, 01.10 max ----------------------------------------------------------------

@check(task="01.8", points=2, dtype=True, atol=1e-4,
       inputs=reduction_case(["float32", "float64", "int64", "bool"]),
       describe=lambda c: reduction_words("sum", c))
def sum_over_axes(tt, case):
    """sum() over None, an int, a negative int or a tuple of axes, with keepdims, like numpy."""
    return tt.Tensor(case["x"]).sum(axis=as_axis(case["axis"]), keepdims=case["keepdims"]).data


@sum_over_axes.expected
def _(case):
    return np.sum(case["x"], axis=as_axis(case["axis"]), keepdims=case["keepdims"])


@check(task="01.8", points=1, dtype=True, inputs=empty_reduction_case(),
       describe=lambda c: reduction_words("sum", c))
def sum_over_an_empty_axis(tt, case):
    """The sum over an axis of size 0 is 0, like numpy."""
    return tt.Tensor(case["x"]).sum(axis=as_axis(case["axis"]), keepdims=case["keepdims"]).data


@sum_over_an_empty_axis.expected
def _(case):
    return np.sum(case["x"], axis=as_axis(case["axis"]), keepdims=case["keepdims"])


@check(task="01.9", points=2, dtype=True, atol=1e-4,
       inputs=reduction_case(["float32", "float64", "int64"]),
       describe=lambda c: reduction_words("mean", c))
def mean_over_axes(tt, case):
    """mean() over None, an int, a negative int or a tuple of axes, with keepdims, like numpy."""
    return tt.Tensor(case["x"]).mean(axis=as_axis(case["axis"]), keepdims=case["keepdims"]).data


@mean_over_axes.expected
def _(case):
    return np.mean(case["x"], axis=as_axis(case["axis"]), keepdims=case["keepdims"])


@check(task="01.9", points=1, dtype=True, inputs=empty_reduction_case(),
       describe=lambda c: reduction_words("mean", c))
def mean_over_an_empty_axis(tt, case):
    """The mean over an axis of size 0 is nan, like numpy."""
    return tt.Tensor(case["x"]).mean(axis=as_axis(case["axis"]), keepdims=case["keepdims"]).data


@mean_over_an_empty_axis.expected
def _(case):
    with warnings.catch_warnings():  # numpy warns "Mean of empty slice"; nan is the answer
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.mean(case["x"], axis=as_axis(case["axis"]), keepdims=case["keepdims"])


@check(task="01.10", points=2, dtype=True,
       inputs=reduction_case(["float32", "float64", "int64"]),
       describe=lambda c: reduction_words("max", c))
def max_over_axes(tt, case):
    """max() over None, an int, a negative int or a tuple of axes, with keepdims, like numpy."""
    return tt.Tensor(case["x"]).max(axis=as_axis(case["axis"]), keepdims=case["keepdims"]).data


@max_over_axes.expected
def _(case):
    return np.max(case["x"], axis=as_axis(case["axis"]), keepdims=case["keepdims"])


@check(task="01.10", points=1, inputs=empty_reduction_case(),
       describe=lambda c: reduction_words("max", c))
def max_over_an_empty_axis_raises(tt, case):
    """max() over an axis of size 0 raises a ValueError, like numpy."""
    t = tt.Tensor(case["x"])
    return capture_error(lambda: t.max(axis=as_axis(case["axis"]), keepdims=case["keepdims"]))


@max_over_an_empty_axis_raises.verdict
def _(case, output):
    expect_error(case, output, reduction_words("max", case))


# --- 01.11 reshape ---------------------------------------------------------------------------------

@st.composite
def reshape_case(draw):
    """A shape and a new shape of the same size (axes shuffled, merged, 1s inserted; maybe one -1)."""
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    sides = draw(st.permutations(list(shape)))
    merged = []
    for side in sides:
        if merged and draw(st.booleans()):
            merged[-1] *= side
        else:
            merged.append(side)
    for _ in range(draw(st.integers(0, 2))):
        merged.insert(draw(st.integers(0, len(merged))), 1)
    if merged and draw(st.booleans()):
        merged[draw(st.integers(0, len(merged) - 1))] = -1
    return {"x": draw(arrays(shape, np.float32)), "shape": merged, "as_tuple": draw(st.booleans())}


def reshape_words(case: dict) -> str:
    args = f"({', '.join(map(str, case['shape']))}{',' if len(case['shape']) == 1 else ''})"
    args = args if case["as_tuple"] else args[1:-1].rstrip(",")
    return f"Tensor.reshape({args}) of {tensor_words(case['x'])}"


def call_reshape(tensor, case):
    return tensor.reshape(tuple(case["shape"])) if case["as_tuple"] else tensor.reshape(*case["shape"])


@check(task="01.11", points=2, dtype=True, inputs=reshape_case(), describe=reshape_words)
def reshape_like_numpy(tt, case):
    """reshape(*shape) and reshape(shape), with -1 inferred, like numpy."""
    return call_reshape(tt.Tensor(case["x"]), case).data


@reshape_like_numpy.expected
def _(case):
    return np.reshape(case["x"], tuple(case["shape"]))


@check(task="01.11", points=1, inputs=reshape_case(), describe=reshape_words)
def reshape_is_a_view(tt, case):
    """reshape of a contiguous tensor shares its memory (a view, no copy): what is written through the
    tensor is read through the reshaped one."""
    t = tt.Tensor(case["x"])
    view = call_reshape(t, case)
    np.copyto(t.data, np.arange(t.data.size).reshape(t.data.shape))  # write through the original
    return np.array(view.data)  # the values seen through the view


@reshape_is_a_view.expected
def _(case):
    return np.arange(case["x"].size, dtype=case["x"].dtype).reshape(np.reshape(case["x"], tuple(case["shape"])).shape)


@check(task="01.11", points=1,
       inputs=st.fixed_dictionaries({"x": arrays(shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), np.float32),
                                     "extra": st.integers(1, 3), "as_tuple": st.booleans()}).map(
           lambda c: {**c, "shape": [c["x"].size + c["extra"]]}),
       describe=reshape_words)
def reshape_mismatch_names_both_shapes(tt, case):
    """reshape to a different number of elements raises a ValueError naming both shapes."""
    t = tt.Tensor(case["x"])
    return capture_error(lambda: call_reshape(t, case))


@reshape_mismatch_names_both_shapes.verdict
def _(case, output):
    expect_error(case, output, reshape_words(case), str(case["x"].shape), str(tuple(case["shape"])))


# --- 01.12 permute, transpose, .T ------------------------------------------------------------------

@st.composite
def permute_case(draw, min_side=1):
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=min_side, max_side=5))
    ndim = len(shape)
    dims = [d - ndim if draw(st.booleans()) else d for d in draw(st.permutations(range(ndim)))]
    return {"x": draw(arrays(shape, np.float32)), "dims": dims, "as_tuple": draw(st.booleans())}


def permute_words(case: dict) -> str:
    dims = ", ".join(map(str, case["dims"]))
    args = f"({dims}{',' if len(case['dims']) == 1 else ''})" if case["as_tuple"] else dims
    return f"Tensor.permute({args}) of {tensor_words(case['x'])}"


def call_permute(tensor, case):
    return tensor.permute(tuple(case["dims"])) if case["as_tuple"] else tensor.permute(*case["dims"])


@check(task="01.12", points=2, dtype=True, inputs=permute_case(), describe=permute_words)
def permute_like_numpy(tt, case):
    """permute(*dims) and permute(dims) reorder axes like np.transpose."""
    return call_permute(tt.Tensor(case["x"]), case).data


@permute_like_numpy.expected
def _(case):
    return np.transpose(case["x"], case["dims"])


@check(task="01.12", points=1, inputs=permute_case(), describe=permute_words)
def permute_is_a_view(tt, case):
    """permute moves no data: the strides are permuted with the shape."""
    result = call_permute(tt.Tensor(case["x"]), case)
    return {"stride": list(result.stride()), "is_contiguous": bool(result.is_contiguous())}


@permute_is_a_view.expected
def _(case):
    view = np.transpose(case["x"], case["dims"])
    return {"stride": strides_in_elements(view), "is_contiguous": bool(view.flags.c_contiguous)}


@st.composite
def transpose_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    ndim = len(shape)
    dim0, dim1 = draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))
    return {"x": draw(arrays(shape, np.float32)), "dim0": dim0, "dim1": dim1}


@check(task="01.12", points=1, dtype=True, inputs=transpose_case(),
       describe=lambda c: f"Tensor.transpose({c['dim0']}, {c['dim1']}) of {tensor_words(c['x'])}")
def transpose_swaps_two_axes(tt, case):
    """transpose(dim0, dim1) swaps two axes."""
    return tt.Tensor(case["x"]).transpose(case["dim0"], case["dim1"]).data


@transpose_swaps_two_axes.expected
def _(case):
    return np.swapaxes(case["x"], case["dim0"], case["dim1"])


@check(task="01.12", points=1, dtype=True,
       inputs=st.fixed_dictionaries({"x": arrays(shapes(min_dims=0, max_dims=4), np.float32)}),
       describe=lambda c: f"Tensor.T of {tensor_words(c['x'])}")
def T_reverses_all_axes(tt, case):
    """.T reverses the order of all axes, like numpy."""
    return tt.Tensor(case["x"]).T.data


@T_reverses_all_axes.expected
def _(case):
    return case["x"].T


# --- 01.13 indexing --------------------------------------------------------------------------------

@st.composite
def basic_index_case(draw):
    shape = draw(shapes(min_dims=0, max_dims=4, min_side=1, max_side=5))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return {"x": draw(arrays(shape, np.float32)), "index": encode_index(index)}


@check(task="01.13", points=2, dtype=True, inputs=basic_index_case(),
       describe=lambda c: f"t{index_words(c['index'])} for {tensor_words(c['x'])}")
def basic_indexing_like_numpy(tt, case):
    """Ints (negative too), slices, None and ... index like numpy."""
    return tt.Tensor(case["x"])[decode_index(case["index"])].data


@basic_indexing_like_numpy.expected
def _(case):
    return case["x"][decode_index(case["index"])]


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
    inner = ", ".join(wrap.format(p) for p in case["positions"])
    return f"t[{inner}] for {tensor_words(case['x'])}"


@check(task="01.13", points=2, dtype=True, inputs=integer_index_case(), describe=integer_index_words)
def integer_array_indexing(tt, case):
    """Lists, integer arrays and integer Tensors pick positions (repeats and negatives too)."""
    form = case["form"]
    wrap = (lambda p: p) if form == "list" else (lambda p: np.array(p, dtype=np.int64)) if form == "array" \
        else (lambda p: tt.Tensor(np.array(p, dtype=np.int64)))
    parts = [wrap(p) for p in case["positions"]]
    index = parts[0] if len(parts) == 1 else tuple(parts)
    return tt.Tensor(case["x"])[index].data


@integer_array_indexing.expected
def _(case):
    parts = [np.array(p, dtype=np.int64) for p in case["positions"]]
    return case["x"][parts[0] if len(parts) == 1 else tuple(parts)]


@st.composite
def tensor_index_case(draw):
    """Integer positions to wrap in Tensors, alone or in a tuple with a slice, an int, None or ...;
    `tensors` marks which items of the tuple are Tensors."""
    positions = draw(st.lists(st.lists(st.integers(-4, 3), min_size=1, max_size=4), min_size=1, max_size=2))
    if not draw(st.booleans()):
        return {"positions": positions[:1], "tuple": False, "extra": None}
    extra = draw(st.sampled_from([["slice", None, None, None], ["slice", 1, None, 2], "...", None, 0, -1]))
    return {"positions": positions, "tuple": True, "extra": extra}


def tensor_index_words(case: dict) -> str:
    items = [f"Tensor({p})" for p in case["positions"]]
    if not case["tuple"]:
        return f"unwrap_index({items[0]})"
    extra = index_words({"tuple": False, "items": [case["extra"]]})[1:-1]
    return f"unwrap_index(({', '.join(items + [extra])}))"


@check(task="01.13", points=1, inputs=tensor_index_case(), describe=tensor_index_words)
def unwrap_index_replaces_tensors(tt, case):
    """unwrap_index replaces every Tensor in an index (alone or in a tuple) by its array."""
    tensors = [tt.Tensor(np.array(p, dtype=np.int64)) for p in case["positions"]]
    if case["tuple"]:
        index = tt.core.tensor.unwrap_index((*tensors, decode_index({"tuple": False, "items": [case["extra"]]})))
    else:
        index = tt.core.tensor.unwrap_index(tensors[0])
    items = index if isinstance(index, tuple) else (index,)
    return {"is a tuple": isinstance(index, tuple), "types": [type(item).__name__ for item in items],
            "arrays": [np.asarray(item) for item in items[:len(tensors)] if isinstance(item, np.ndarray)]}


@unwrap_index_replaces_tensors.expected
def _(case):
    extra = decode_index({"tuple": False, "items": [case["extra"]]})
    types = ["ndarray"] * len(case["positions"]) + ([type(extra).__name__] if case["tuple"] else [])
    return {"is a tuple": case["tuple"], "types": types,
            "arrays": [np.array(p, dtype=np.int64) for p in case["positions"]]}


@st.composite
def stepped_slice_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    axis = draw(st.integers(0, len(shape) - 1))
    start, step = draw(st.integers(0, shape[axis] - 1)), draw(st.integers(1, 3))
    index = [["slice", None, None, None]] * axis + [["slice", start, None, step]]
    return {"x": draw(arrays(shape, np.float32)), "index": {"tuple": True, "items": index}}


@check(task="01.13", points=1, inputs=stepped_slice_case(),
       describe=lambda c: f"t{index_words(c['index'])} for {tensor_words(c['x'])}")
def slicing_is_a_view(tt, case):
    """A slice is a view: same memory (what is written through the tensor is read through the slice), the
    stride multiplied by the step."""
    t = tt.Tensor(case["x"])
    view = t[decode_index(case["index"])]
    np.copyto(t.data, np.arange(t.data.size).reshape(t.data.shape))  # write through the original
    return {"stride": list(view.stride()), "values seen through the slice": np.array(view.data)}


@slicing_is_a_view.expected
def _(case):
    written = np.arange(case["x"].size, dtype=case["x"].dtype).reshape(case["x"].shape)
    return {"stride": strides_in_elements(case["x"][decode_index(case["index"])]),
            "values seen through the slice": written[decode_index(case["index"])]}


# --- 01.14 factories -------------------------------------------------------------------------------

@check(task="01.14", points=2, dtype=True,
       inputs=st.fixed_dictionaries({
           "which": st.sampled_from(["zeros", "ones"]),
           "shape": shapes(min_dims=0, max_dims=3, min_side=0, max_side=4).map(list),
           "as_tuple": st.booleans(),
           "dtype": st.sampled_from([None, "float64", "int64"]),
           "requires_grad": st.booleans()}),
       describe=lambda c: (f"{c['which']}({tuple(c['shape']) if c['as_tuple'] else ', '.join(map(str, c['shape']))}"
                           f"{'' if c['dtype'] is None else ', dtype=np.' + c['dtype']}, "
                           f"requires_grad={c['requires_grad']})"))
def zeros_and_ones(tt, case):
    """zeros/ones take a shape as arguments or a tuple; float32 unless dtype says otherwise."""
    make = getattr(tt, case["which"])
    shape = tuple(case["shape"]) if case["as_tuple"] else case["shape"]
    kwargs = {"requires_grad": case["requires_grad"]}
    if case["dtype"] is not None:
        kwargs["dtype"] = getattr(np, case["dtype"])
    t = make(shape, **kwargs) if case["as_tuple"] else make(*shape, **kwargs)
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
    return {"start": start, "end": end, "step": step, "form": form}


def arange_words(case: dict) -> str:
    args = {"end": [case["end"]], "start_end": [case["start"], case["end"]],
            "start_end_step": [case["start"], case["end"], case["step"]]}[case["form"]]
    return f"arange({', '.join(map(repr, args))})"


@check(task="01.14", points=2, dtype=True, inputs=arange_case(), describe=arange_words)
def arange_like_numpy(tt, case):
    """arange like np.arange: int64 for int arguments, float32 otherwise."""
    start, end, step = case["start"], case["end"], case["step"]
    t = {"end": lambda: tt.arange(end), "start_end": lambda: tt.arange(start, end),
         "start_end_step": lambda: tt.arange(start, end, step)}[case["form"]]()
    return t.data


@arange_like_numpy.expected
def _(case):
    start, end, step = case["start"], case["end"], case["step"]
    if case["form"] == "end":
        start, step = 0, 1
    values = np.arange(start, end, step)
    ints = all(isinstance(v, int) for v in (start, end, step))
    return values.astype(np.int64 if ints else np.float32)


@check(task="01.14", points=2, examples=3,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1)}),
       describe=lambda c: f"randn(1000, 100) after manual_seed({c['seed']})")
def randn_is_standard_normal(tt, case):
    """randn draws float32 samples with mean 0 and standard deviation 1."""
    tt.manual_seed(case["seed"])
    samples = tt.randn(1000, 100).data
    values = np.asarray(samples, dtype=np.float64)
    return {"shape": list(np.shape(samples)), "dtype": str(np.asarray(samples).dtype),
            "mean": float(values.mean()), "std": float(values.std())}


@randn_is_standard_normal.verdict
def _(case, output):
    what = f"randn(1000, 100) after manual_seed({case['seed']})"
    if output["shape"] != [1000, 100]:
        raise CheckFailed(f"{what}: expected shape (1000, 100) but got {tuple(output['shape'])}")
    if output["dtype"] != "float32":
        raise CheckFailed(f"{what}: expected dtype float32 but got {output['dtype']}")
    # 10^5 samples: the mean's standard error is 0.003, the std's 0.002; 0.02 is over 6 of them.
    if abs(output["mean"]) > 0.02 or abs(output["std"] - 1) > 0.02:
        raise CheckFailed(f"{what}: expected mean 0 and standard deviation 1 but got mean "
                          f"{output['mean']:.4f} and standard deviation {output['std']:.4f}")


@check(task="01.14", points=1, examples=10,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1),
                                     "shape": shapes(min_dims=1, max_dims=3, min_side=2, max_side=4).map(list)}),
       describe=lambda c: f"randn{tuple(c['shape'])} twice after manual_seed({c['seed']})")
def randn_is_reproducible_after_manual_seed(tt, case):
    """The same seed gives the same samples; without a reset the samples change."""
    shape = case["shape"]
    tt.manual_seed(case["seed"])
    first = np.array(tt.randn(*shape).data)
    tt.manual_seed(case["seed"])
    second = np.array(tt.randn(*shape).data)
    third = np.array(tt.randn(*shape).data)
    return {"shape": list(second.shape), "same after reseeding": bool(np.array_equal(first, second)),
            "different without reseeding": not np.array_equal(second, third)}


@randn_is_reproducible_after_manual_seed.expected
def _(case):
    return {"shape": case["shape"], "same after reseeding": True, "different without reseeding": True}
