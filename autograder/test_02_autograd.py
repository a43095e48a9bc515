"""Hidden suite of 02_autograd: gradients of every op of 01 against float64 central differences, and the
engine's behaviour (graph recording, topological order, accumulation, no_grad, gradcheck).

Every `expected` uses numpy and `checklib.central_difference` only; every `compute` returns plain data,
gradients as a dict {"x.grad": ...} (None where no gradient arrived). Gradient checks run the package in
float64 (float64 inputs stay float64), so tolerances are tight. Variants of one behaviour (an operator, a
reduction, a kind of index) are one check family over a table, the variant's name travelling in the case; the
table gives each variant its task and points (`variants=`), since one behaviour spans the tasks of its ops.
"""

import gc
import operator
import weakref

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import (
    CheckFailed,
    capture_error,
    central_difference,
    check,
    floats_arrays,
    gradient_case,
    leaf_gradients,
    module,
    shapes,
    signed_arrays,
    upstream,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}

# ---------------------------------------------------------------------------------------------------
# compute helpers and tables: they run beside the package under test (the tables are numpy too)

BINARY = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
          "pow": operator.pow, "matmul": operator.matmul}
SCALAR_FORMS = {"c + x": lambda x, c: c + x, "x + c": lambda x, c: x + c, "c - x": lambda x, c: c - x,
                "x - c": lambda x, c: x - c, "c * x": lambda x, c: c * x, "x * c": lambda x, c: x * c,
                "c / x": lambda x, c: c / x, "x / c": lambda x, c: x / c, "x ** c": lambda x, c: x ** c,
                "c ** x": lambda x, c: c ** x}  # c a Python float


def _grad(tensor):
    return None if tensor.grad is None else tensor.grad.numpy()


def _gradients(tt, fn, case, names=("a", "b")):
    """{"a.grad": ..., "b.grad": ...} after fn(*leaves).backward(case["g"]), a leaf per name."""
    return dict(zip([f"{name}.grad" for name in names], leaf_gradients(tt, fn, [case[n] for n in names], case["g"])))


def _own_ops(tt):
    """Functions of the check's own on tt.autograd.Function (02.1) with their own backwards: Times (a * b), Plus
    (a + b), Minus (a - b), Divide (a / b) for operands of one shape or a Python number, and Total (the sum
    of every element). The checks of the engine (02.2, 02.3) build their graphs from these, so that they
    need the engine alone and no backward of the student's ops (02.7 on)."""
    def function(name, forward, backward):
        return type(name, (tt.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})

    def saving(op):  # a forward that saves its operands for the backward
        return lambda ctx, a, b: ctx.save_for_backward(a, b) or op(a, b)

    def total(ctx, a):
        ctx.shape = np.shape(a)
        return np.asarray(np.sum(a))

    return {"Times": function("Times", saving(operator.mul),
                              lambda ctx, g: (g * ctx.saved_tensors[1], g * ctx.saved_tensors[0])),
            "Plus": function("Plus", lambda ctx, a, b: a + b, lambda ctx, g: (g, g)),
            "Minus": function("Minus", lambda ctx, a, b: a - b, lambda ctx, g: (g, -g)),
            "Divide": function("Divide", saving(operator.truediv), lambda ctx, g: (
                g / ctx.saved_tensors[1], -g * ctx.saved_tensors[0] / (ctx.saved_tensors[1] * ctx.saved_tensors[1]))),
            "Total": function("Total", total, lambda ctx, g: (np.broadcast_to(g, ctx.shape).copy(),))}


# ---------------------------------------------------------------------------------------------------
# judge helpers: strategies, words and references


def _numeric(fn, case, names=("a", "b")):
    """The expected gradients of _gradients, by float64 central differences of the numpy `fn`."""
    return dict(zip([f"{name}.grad" for name in names], central_difference(fn, [case[n] for n in names], case["g"])))


def _failed(message):
    """A verdict whose message reveals nothing the notebook does not say: public as it is."""
    return CheckFailed(message, message)




def _ab(case):
    return f"a of shape {case['a'].shape} and b of shape {case['b'].shape}"


def _unary_case(shape_strategy, low=-3.0, high=3.0):
    """{"x", "g"}: x with values in [low, high], g an upstream gradient of its shape."""
    return shape_strategy.flatmap(lambda s: st.fixed_dictionaries({"x": floats_arrays(s, low, high), "g": upstream(s)}))


# ---------------------------------------------------------------------------------------------------
# 02.1 Function.apply: graph recording

_RECORDED = {"x * c": True, "c * c": False, "c + 1": False, "2 * x": True, "(x * c).sum()": True, "c.exp()": False}


@check(task="02.1", points=2,
       describe=lambda case: "requires_grad and is_leaf of the results of x * c, c * c, c + 1, 2 * x, (x * c).sum() "
                             "and c.exp() for x with requires_grad=True and c without")
def apply_records_graph_only_when_an_operand_requires_grad(tt, case):
    """Function.apply records a graph (requires_grad, grad_fn) only when an operand requires grad."""
    x, c = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True), tt.Tensor(np.array([3.0, 4.0]))
    results = {"x * c": x * c, "c * c": c * c, "c + 1": c + 1, "2 * x": 2 * x, "(x * c).sum()": (x * c).sum(),
               "c.exp()": c.exp()}
    return {name: {"requires_grad": bool(t.requires_grad), "is_leaf": bool(t.is_leaf)} for name, t in results.items()}


apply_records_graph_only_when_an_operand_requires_grad.expected(
    lambda case: {name: {"requires_grad": kept, "is_leaf": not kept} for name, kept in _RECORDED.items()})


@check(task="02.1", points=1,
       describe=lambda case: "y = Times(x, c) (Times: a Function of the check's own, a * b) for x with requires_grad "
                             "and c without: y.grad_fn.inputs, and whether c is freed once only y holds on to it")
def operands_without_grad_stay_out_of_the_graph(tt, case):
    """The node of y = x * c points to x and holds None for c, which needs no gradient: no graph keeps c alive."""
    x, c = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True), tt.Tensor(np.array([3.0, 4.0]))
    y = _own_ops(tt)["Times"].apply(x, c)
    inputs = ["x" if t is x else "c" if t is c else None if t is None else type(t).__name__ for t in y.grad_fn.inputs]
    c_alive = weakref.ref(c)
    del c
    gc.collect()
    return {"y.grad_fn.inputs": inputs, "y.is_leaf": bool(y.is_leaf), "x.is_leaf": bool(x.is_leaf),
            "c freed while y lives": c_alive() is None}


operands_without_grad_stay_out_of_the_graph.expected(lambda case: {
    "y.grad_fn.inputs": ["x", None], "y.is_leaf": False, "x.is_leaf": True, "c freed while y lives": True})


# ---------------------------------------------------------------------------------------------------
# 02.2 topological_sort


@st.composite
def _random_graph(draw):
    num_leaves = draw(st.integers(1, 3))
    ops = [(draw(st.integers(0, num_leaves + k - 1)), draw(st.integers(0, num_leaves + k - 1)))
           for k in range(draw(st.integers(1, 12)))]
    return {"num_leaves": num_leaves, "ops": ops}


@check(task="02.2", points=2, inputs=_random_graph(),
       describe=lambda case: f"topological_sort(root) of a graph of {case['num_leaves']} leaves and "
                             f"{len(case['ops'])} additions (tensor k = tensor i + tensor j for (i, j) in "
                             f"{case['ops']}, the root is the last)")
def topological_sort_puts_inputs_first_and_the_root_last(tt, case):
    """topological_sort lists every tensor the root depends on once, each after its inputs, the root last."""
    tensors = [tt.Tensor(np.array(float(k)), requires_grad=True) for k in range(case["num_leaves"])]
    for i, j in case["ops"]:
        tensors.append(tensors[i] + tensors[j])
    index_of = {id(t): k for k, t in enumerate(tensors)}
    return [index_of.get(id(t), -1) for t in module(tt, "autograd").topological_sort(tensors[-1])]


@topological_sort_puts_inputs_first_and_the_root_last.verdict
def _(case, output):
    num_leaves, ops = case["num_leaves"], case["ops"]
    inputs_of = {num_leaves + k: op for k, op in enumerate(ops)}
    root = num_leaves + len(ops) - 1
    reachable, stack = set(), [root]
    while stack:
        k = stack.pop()
        if k not in reachable:
            reachable.add(k)
            stack.extend(inputs_of.get(k, ()))
    what = f"topological_sort of a graph with operations {ops} (leaves 0..{num_leaves - 1})"
    if not isinstance(output, list) or -1 in output:
        raise _failed(f"{what}: expected a list of the graph's tensors but got {output!r:.80}")
    if len(output) != len(set(output)):
        raise _failed(f"{what}: a tensor appears more than once in {output}")
    if set(output) != reachable:
        raise CheckFailed(f"{what}: expected the tensors {sorted(reachable)} but got {sorted(output)}",
                          f"{what}: the list {sorted(output)} does not hold exactly the tensors the root depends on")
    position = {k: p for p, k in enumerate(output)}
    for k, (i, j) in inputs_of.items():
        if k in position and (position[i] > position[k] or position[j] > position[k]):
            raise _failed(f"{what}: tensor {k} = {i} + {j} comes before its inputs in {output}")
    if output[-1] != root:
        raise _failed(f"{what}: the root {root} must come last, got {output}")


# ---------------------------------------------------------------------------------------------------
# 02.3 backward: seed, walk, accumulate (on Functions of the check's own)


@check(task="02.3", points=2, dtype=True, **GRAD_TOL,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "scale": st.floats(-3, 3), "g": upstream(shape)})),
       describe=lambda case: f"a Function subclass y = scale * x ** 3 (3 an operand, scale a keyword param) applied "
                             f"to x of shape {case['x'].shape}, and to x in float32, then y.backward(g)")
def custom_function_forward_backward_and_params(tt, case):
    """A Function subclass gets numpy arrays and params in forward, keeps forward's dtype, and its backward runs."""
    seen = []

    class ScaledCube(tt.autograd.Function):
        @staticmethod
        def forward(ctx, x, power, scale=1.0):
            seen.extend([type(x).__name__, type(power).__name__])
            ctx.save_for_backward(x)
            ctx.scale, ctx.power = scale, power
            return scale * x ** power

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return grad_output * ctx.scale * ctx.power * x ** (ctx.power - 1), None

    x = tt.Tensor(case["x"], requires_grad=True)
    y = ScaledCube.apply(x, 3, scale=case["scale"])
    y32 = ScaledCube.apply(tt.Tensor(case["x"].astype(np.float32)), 3, scale=case["scale"])
    y.backward(tt.Tensor(case["g"]))
    return {"y": y.numpy(), "y for x in float32": y32.numpy(), "x.grad": _grad(x), "types forward got": seen[:2]}


custom_function_forward_backward_and_params.expected(lambda case: {
    "y": case["scale"] * case["x"] ** 3, "y for x in float32": case["scale"] * case["x"].astype(np.float32) ** 3,
    "x.grad": case["g"] * case["scale"] * 3 * case["x"] ** 2, "types forward got": ["ndarray", "int"]})


@check(task="02.3", points=1, **GRAD_TOL, inputs=_unary_case(shapes(max_dims=2)),
       describe=lambda case: f"Times(x, x.detach()).backward(g) (Times: a Function of the check's own, a * b) for x "
                             f"of shape {case['x'].shape}")
def detach_stops_the_gradient(tt, case):
    """x.detach() does not require grad, so the gradient flows through x alone."""
    x = tt.Tensor(case["x"], requires_grad=True)
    constant = x.detach()
    _own_ops(tt)["Times"].apply(x, constant).backward(tt.Tensor(case["g"]))
    return {"x.detach().requires_grad": bool(constant.requires_grad), "x.grad": _grad(x)}


detach_stops_the_gradient.expected(lambda case: {"x.detach().requires_grad": False, "x.grad": case["g"] * case["x"]})


LOOPS = {  # variant -> (task, points, case): y = x; `steps` times y = Op(y, other), other y itself, x or a number
    "a chain of 20,000 ops": ("02.3", 3, {"x": np.ones(3), "op": "Times", "other": 1.00001, "steps": 20_000}),
    "2**50 paths to x": ("02.3", 2, {"x": np.array([1.5, -2.0]), "op": "Plus", "other": "y", "steps": 50}),
    "x used 10,000 times": ("02.3", 2, {"x": np.array([0.5, -1.0, 2.0]), "op": "Plus", "other": "x", "steps": 9_999})}


@check(timeout=15, examples=1, **GRAD_TOL,
       variants={name: (task, points, st.just(case)) for name, (task, points, case) in LOOPS.items()},
       describe=lambda case: f"y = x; {case['steps']:,} times y = {case['op']}(y, {case['other']}) ({case['op']}: a "
                             f"Function of the check's own, a {'*' if case['op'] == 'Times' else '+'} b); "
                             f"y.backward(ones): x.grad")
def backward_of_a_large_graph(tt, case):
    """backward walks long chains without recursion, visits a shared tensor once and sums a reused one's gradients."""
    op = _own_ops(tt)[case["op"]]
    x = y = tt.Tensor(case["x"], requires_grad=True)
    for _ in range(case["steps"]):
        y = op.apply(y, y if case["other"] == "y" else x if case["other"] == "x" else case["other"])
    y.backward(tt.Tensor(np.ones_like(case["x"])))
    return _grad(x)


@backward_of_a_large_graph.expected
def _(case):
    steps, other = case["steps"], case["other"]
    return np.full(case["x"].shape, 2.0 ** steps if other == "y" else steps + 1.0 if other == "x"
                   else np.float64(other) ** steps)


@check(task="02.3", points=1, **GRAD_TOL,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "w": signed_arrays(shape)})),
       describe=lambda case: f"Total(Times(x, w)).backward() without a grad argument (Times, Total: Functions of "
                             f"the check's own, a * b and the sum of all elements), x of shape {case['x'].shape}: "
                             f"x.grad")
def backward_of_a_scalar_seeds_ones(tt, case):
    """backward() of a one-element tensor starts from a gradient of 1."""
    ops = _own_ops(tt)
    x = tt.Tensor(case["x"], requires_grad=True)
    ops["Total"].apply(ops["Times"].apply(x, tt.Tensor(case["w"]))).backward()
    return _grad(x)


backward_of_a_scalar_seeds_ones.expected(lambda case: case["w"])

BACKWARD_ERRORS = {  # the variant -> the call that must raise a RuntimeError
    "non-scalar without grad": lambda tt: (tt.Tensor(np.ones((2, 3)), requires_grad=True) * 2).backward(),
    "without requires_grad": lambda tt: (tt.Tensor(np.ones((2, 3))) * 2).sum().backward()}
_BACKWARD_ERROR_WORDS = {"non-scalar without grad": "(x * 2).backward() for x of shape (2, 3) without a grad argument",
                         "without requires_grad": "(c * 2).sum().backward() for c without requires_grad"}


@check(task="02.3", points=1, examples=1, variants={name: st.just({"call": name}) for name in BACKWARD_ERRORS},
       guard=True, describe=lambda case: f"{_BACKWARD_ERROR_WORDS[case['call']]}: the error raised")
def backward_refuses_with_a_runtime_error(tt, case):
    """backward() raises a RuntimeError without a grad for a non-scalar, or on a tensor that needs no grad."""
    return capture_error(lambda: BACKWARD_ERRORS[case["call"]](tt))["raised"]


backward_refuses_with_a_runtime_error.expected(lambda case: "RuntimeError")


@check(task="02.3", points=2, **GRAD_TOL,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "w": signed_arrays(shape), "g1": upstream(shape),
           "g2": upstream(shape), "g3": upstream(shape)})),
       describe=lambda case: f"Times(x, w).backward(g) (Times: a Function of the check's own, a * b) twice, then "
                             f"x.grad = None and once more, x of shape {case['x'].shape}")
def gradients_accumulate_across_calls_until_reset(tt, case):
    """Each backward adds to x.grad; after x.grad = None it starts again."""
    times, x, w = _own_ops(tt)["Times"], tt.Tensor(case["x"], requires_grad=True), tt.Tensor(case["w"])
    times.apply(x, w).backward(tt.Tensor(case["g1"]))
    times.apply(x, w).backward(tt.Tensor(case["g2"]))
    after_two = None if x.grad is None else x.grad.numpy().copy()
    x.grad = None
    times.apply(x, w).backward(tt.Tensor(case["g3"]))
    return {"x.grad after two calls": after_two, "x.grad after the reset and one call": _grad(x)}


gradients_accumulate_across_calls_until_reset.expected(lambda case: {
    "x.grad after two calls": case["w"] * (case["g1"] + case["g2"]),
    "x.grad after the reset and one call": case["w"] * case["g3"]})


def _reused(x, y):
    return x * x * y - x / (y * y + 1) + x + (x - y) * x


@check(task="02.3", points=2, **GRAD_TOL,
       inputs=shapes(max_dims=2).flatmap(lambda shape: gradient_case(_reused, floats_arrays(shape),
                                                                     floats_arrays(shape), names=("x", "y"))),
       describe=lambda case: f"x * x * y - x / (y * y + 1) + x + (x - y) * x (x used five times), built from "
                             f"Functions of the check's own for *, /, +, -, shape {case['x'].shape}")
def a_tensor_used_several_times_sums_its_gradients(tt, case):
    """A tensor used several times gets the sum of the gradients of its uses."""
    times, plus, minus, divide = (_own_ops(tt)[name].apply for name in ("Times", "Plus", "Minus", "Divide"))

    def reused(x, y):
        return plus(plus(minus(times(times(x, x), y), divide(x, plus(times(y, y), 1.0))), x), times(minus(x, y), x))
    return _gradients(tt, reused, case, ("x", "y"))


a_tensor_used_several_times_sums_its_gradients.expected(lambda case: _numeric(_reused, case, ("x", "y")))


@check(task="02.3", points=1,
       describe=lambda case: "h = Times(x, c); Total(Times(h, h)).backward() for x = [1, 2] with requires_grad and "
                             "c = [3, 4] without (Times, Total: Functions of the check's own, a * b and the sum)")
def only_leaves_that_require_grad_get_a_grad(tt, case):
    """Only leaves that require grad get a .grad: not a constant, not an intermediate result."""
    ops = _own_ops(tt)
    x, c = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True), tt.Tensor(np.array([3.0, 4.0]))
    h = ops["Times"].apply(x, c)
    ops["Total"].apply(ops["Times"].apply(h, h)).backward()
    return {"x.grad": _grad(x), "c.grad": _grad(c), "h.grad": _grad(h)}


only_leaves_that_require_grad_get_a_grad.expected(lambda case: {"x.grad": np.array([18.0, 64.0]), "c.grad": None,
                                                                 "h.grad": None})


def _twice(tt, first: dict):
    """Total(Times(x, w)).backward(**first), then backward() again: x.grad after each call and what the second
    raised. Times saves its operands, so the second call needs what the first may have freed."""
    ops = _own_ops(tt)
    x, w = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True), tt.Tensor(np.array([3.0, 4.0]))
    y = ops["Total"].apply(ops["Times"].apply(x, w))
    y.backward(**first)
    after_first = _grad(x).copy() if x.grad is not None else None
    error = capture_error(y.backward)
    return {"the second raised": error.get("raised"),
            "its message names retain_graph": "retain_graph" in error.get("message", ""),
            "x.grad after the first": after_first, "x.grad after the second": _grad(x)}


@check(task="02.3", points=2,
       describe=lambda case: "y = Total(Times(x, w)) (Functions of the check's own; Times saves its operands), "
                             "y.backward() and then y.backward() again")
def a_second_backward_through_a_freed_graph_raises(tt, case):
    """backward() frees what the graph saved: a second backward through it raises and says retain_graph=True."""
    return _twice(tt, {})


a_second_backward_through_a_freed_graph_raises.expected(lambda case: {
    "the second raised": "RuntimeError", "its message names retain_graph": True,
    "x.grad after the first": np.array([3.0, 4.0]), "x.grad after the second": np.array([3.0, 4.0])})


@check(task="02.3", points=1,
       describe=lambda case: "y = Total(Times(x, w)) (Functions of the check's own), y.backward(retain_graph=True) "
                             "and then y.backward() again")
def retain_graph_keeps_the_graph_for_a_second_backward(tt, case):
    """With retain_graph=True the saved arrays stay, so a second backward works (and accumulates)."""
    return _twice(tt, {"retain_graph": True})


retain_graph_keeps_the_graph_for_a_second_backward.expected(lambda case: {
    "the second raised": None, "its message names retain_graph": False,
    "x.grad after the first": np.array([3.0, 4.0]), "x.grad after the second": np.array([6.0, 8.0])})


@check(task="02.3", points=1, **GRAD_TOL,
       inputs=shapes(max_dims=2).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "w": signed_arrays(shape), "g": upstream(shape)})),
       describe=lambda case: f"h = Times(x, w); h.retain_grad(); Times(h, h).backward(gradient=g) (Functions of the "
                             f"check's own), x of shape {case['x'].shape}; then backward(create_graph=True)")
def retain_grad_and_the_backward_keywords(tt, case):
    """retain_grad() keeps a non-leaf's .grad; backward takes PyTorch's keyword `gradient`; create_graph=True is
    refused with NotImplementedError (no graph of the backward pass)."""
    times = _own_ops(tt)["Times"].apply
    x, w = tt.Tensor(case["x"], requires_grad=True), tt.Tensor(case["w"])
    h = times(x, w)
    h.retain_grad()
    times(h, h).backward(gradient=tt.Tensor(case["g"]))
    try:
        times(x, w).backward(gradient=tt.Tensor(case["g"]), create_graph=True)
        refused = None
    except Exception as error:  # NotImplementedError included: it is the expected answer here
        refused = type(error).__name__
    return {"h.grad": _grad(h), "x.grad": _grad(x), "create_graph=True raised": refused}


retain_grad_and_the_backward_keywords.expected(lambda case: {
    "h.grad": 2 * case["x"] * case["w"] * case["g"], "x.grad": 2 * case["x"] * case["w"] ** 2 * case["g"],
    "create_graph=True raised": "NotImplementedError"})


# ---------------------------------------------------------------------------------------------------
# 02.4 no_grad


@check(task="02.4", points=2,
       describe=lambda case: "y = x * 2 inside `with no_grad():` for x with requires_grad, and x * 2 after the block")
def no_grad_records_no_graph(tt, case):
    """Inside no_grad() grad mode is off and ops record no graph; after the block it is on again."""
    x = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    with tt.no_grad():
        inside, y = tt.is_grad_enabled(), x * 2
    after = x * 2
    return {"is_grad_enabled() inside": bool(inside), "y.requires_grad": bool(y.requires_grad),
            "y.is_leaf": bool(y.is_leaf), "is_grad_enabled() after": bool(tt.is_grad_enabled()),
            "(x * 2).requires_grad after": bool(after.requires_grad)}


no_grad_records_no_graph.expected(lambda case: {
    "is_grad_enabled() inside": False, "y.requires_grad": False, "y.is_leaf": True, "is_grad_enabled() after": True,
    "(x * 2).requires_grad after": True})


def _raise_inside_no_grad(tt):
    with tt.no_grad():
        raise ValueError("raised inside no_grad")


@check(task="02.4", points=1, guard=True,
       describe=lambda case: "a `with no_grad():` block that raises ValueError, then is_grad_enabled() and x * 2 for "
                             "x with requires_grad")
def no_grad_restores_grad_mode_after_an_exception(tt, case):
    """no_grad lets an exception out and still restores grad mode."""
    escaped = capture_error(lambda: _raise_inside_no_grad(tt))["raised"]
    x = tt.Tensor(np.array([1.0]), requires_grad=True)
    return {"the error that got out": escaped, "is_grad_enabled() after": bool(tt.is_grad_enabled()),
            "(x * 2).requires_grad after": bool((x * 2).requires_grad)}


no_grad_restores_grad_mode_after_an_exception.expected(lambda case: {
    "the error that got out": "ValueError", "is_grad_enabled() after": True, "(x * 2).requires_grad after": True})


@check(task="02.4", points=1, describe=lambda case: "is_grad_enabled() in nested `with no_grad():` blocks")
def no_grad_blocks_nest(tt, case):
    """no_grad restores the mode it found, so blocks nest."""
    with tt.no_grad():
        with tt.no_grad():
            pass
        between = tt.is_grad_enabled()
    return {"after the inner block": bool(between), "after the outer block": bool(tt.is_grad_enabled())}


no_grad_blocks_nest.expected(lambda case: {"after the inner block": False, "after the outer block": True})


# ---------------------------------------------------------------------------------------------------
# 02.5 gradcheck


def _gradcheck(tt, case):
    """gradcheck(SinTimes.apply, a, b) for z = sin(a) * b whose backward is off by `factor` for a and by +1 at
    element `wrong` (flat; None: nowhere) of b's gradient: what it raised and what it returned."""
    factor, wrong = case["factor"], case["wrong"]

    class SinTimes(tt.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return np.sin(a) * b

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            grad_b = np.array(grad_output * np.sin(a))
            if wrong is not None:
                grad_b.reshape(-1)[wrong] += 1.0
            return factor * grad_output * np.cos(a) * b, grad_b

    a, b = tt.Tensor(case["a"], requires_grad=True), tt.Tensor(case["b"], requires_grad=True)
    outcome = {}
    raised = capture_error(lambda: outcome.setdefault("returned", tt.autograd.gradcheck(SinTimes.apply, a, b)))["raised"]
    returned = outcome.get("returned")
    return {"raised": raised, "returned": returned if isinstance(returned, (bool, np.bool_)) else repr(returned)}


def _gradcheck_case(factor=1.0, wrong=False, min_side=1):
    """float32 a and b of one shape, the backward's factor for a, and maybe the element of b's gradient made wrong."""
    return shapes(min_dims=1, max_dims=2, min_side=min_side, max_side=3).flatmap(lambda shape: st.fixed_dictionaries({
        "a": floats_arrays(shape, dtype=np.float32), "b": floats_arrays(shape, dtype=np.float32),
        "factor": st.just(factor), "wrong": st.integers(0, int(np.prod(shape)) - 1) if wrong else st.none()}))


def _gradcheck_words(case):
    call = f"gradcheck(SinTimes.apply, a, b) for float32 a and b of shape {case['a'].shape}"
    if case["factor"] != 1.0:
        return f"{call}, SinTimes's backward 10% off for a"
    if case["wrong"] is not None:
        return f"{call}, SinTimes's backward wrong at element {case['wrong']} (flat) of b's gradient only"
    return f"{call}, SinTimes's backward correct"


def _judge_gradcheck(case, output):
    what, raised, returned = _gradcheck_words(case), output["raised"], output["returned"]
    did = f"raised {raised}" if raised else f"returned {returned!r}"
    if case["factor"] == 1.0 and case["wrong"] is None:
        if raised or not (isinstance(returned, (bool, np.bool_)) and returned):
            raise _failed(f"{what}: expected it to return True but it {did}")
    elif raised != "GradcheckError":
        raise _failed(f"{what}: expected a GradcheckError but it {did}")


GRADCHECKS = {  # variant -> (task, points, cases)
    "a correct backward": ("02.5", 2, _gradcheck_case()),
    "a backward 10% off": ("02.5", 2, _gradcheck_case(factor=1.1).map(lambda case: {  # |cos(a) * b| >= 0.27
        **case, "a": case["a"] / 3, "b": np.where(np.abs(case["b"]) < 0.5, 1.0, case["b"]).astype(np.float32)})),
    "a backward wrong at one element": ("02.5", 1, _gradcheck_case(wrong=True, min_side=2))}


@check(examples=10, describe=_gradcheck_words, variants=GRADCHECKS)
def gradcheck(tt, case):
    """gradcheck returns True for a correct backward and raises GradcheckError for one wrong anywhere."""
    return _gradcheck(tt, case)


gradcheck.verdict(_judge_gradcheck)

@check(task="02.5", points=1, examples=10,
       inputs=shapes(min_dims=1, max_dims=2, max_side=3).flatmap(lambda shape: st.fixed_dictionaries({
           "a": floats_arrays(shape, -1e-5, 1e-5)})),
       describe=lambda case: f"gradcheck(Steep.apply, a) for Steep: y = 1e5 * a**2 with a correct backward, a of shape "
                             f"{case['a'].shape} near 0 (y'' = 2e5: one-sided differences are off by about 0.1)")
def gradcheck_uses_central_differences(tt, case):
    """Only central differences get a steep function right: (f(x+e) - f(x)) / e is off by f''(x) e / 2."""
    class Steep(tt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return 1e5 * a * a

        @staticmethod
        def backward(ctx, grad_output):
            (a,) = ctx.saved_tensors
            return (grad_output * 2e5 * a,)

    a = tt.Tensor(case["a"], requires_grad=True)
    outcome = {}
    raised = capture_error(lambda: outcome.setdefault("returned", tt.autograd.gradcheck(Steep.apply, a)))["raised"]
    return {"raised": raised, "returned": bool(outcome.get("returned") is True)}


gradcheck_uses_central_differences.expected(lambda case: {"raised": None, "returned": True})



# ---------------------------------------------------------------------------------------------------
# 02.6 unbroadcast


@st.composite
def _unbroadcast_case(draw):
    """A gradient's shape and a shape that broadcasts to it (leading axes dropped, sides set to 1); in about one
    case in three the gradient is empty along an axis where the shape has 1."""
    grad_shape = list(draw(shapes(max_dims=4, max_side=4)))
    start = draw(st.integers(0, len(grad_shape)))
    shape = [1 if draw(st.booleans()) else side for side in grad_shape[start:]]
    if shape and draw(st.integers(0, 2)) == 0:
        axis = draw(st.integers(0, len(shape) - 1))
        shape[axis], grad_shape[start + axis] = 1, 0
    return {"shape": tuple(shape), "grad": draw(floats_arrays(tuple(grad_shape)))}


@check(task="02.6", points=2, inputs=_unbroadcast_case(),
       describe=lambda case: f"unbroadcast(grad of shape {case['grad'].shape}, {case['shape']})")
def unbroadcast_sums_over_broadcast_axes(tt, case):
    """unbroadcast sums a gradient over the axes broadcasting added or stretched."""
    return np.asarray(module(tt, "autograd").unbroadcast(case["grad"], case["shape"]))


@unbroadcast_sums_over_broadcast_axes.expected
def _(case):
    # the adjoint of np.broadcast_to: every element of `shape` collects the gradients of its copies
    shape, grad = case["shape"], case["grad"]
    source = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), grad.shape)
    sums = np.bincount(source.reshape(-1), weights=grad.reshape(-1), minlength=int(np.prod(shape)))
    return sums.astype(grad.dtype).reshape(shape)  # float even when there is nothing to sum


# ---------------------------------------------------------------------------------------------------
# 02.7 Add, Sub   02.8 Mul, Div   02.9 Pow: two tensors that broadcast, or a tensor and a Python number c


def _broadcast_case(op, low=-3.0, high=3.0, b_values=floats_arrays):
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4).flatmap(
        lambda pair: gradient_case(BINARY[op], floats_arrays(pair.input_shapes[0], low, high),
                                   b_values(pair.input_shapes[1]))).map(lambda case: {**case, "op": op})


BINARY_GRADIENTS = {  # variant -> (task, points, cases)
    "add": ("02.7", 2, _broadcast_case("add")), "sub": ("02.7", 2, _broadcast_case("sub")),
    "mul": ("02.8", 2, _broadcast_case("mul")), "div": ("02.8", 2, _broadcast_case("div", b_values=signed_arrays)),
    "pow": ("02.9", 2, _broadcast_case("pow", low=0.5, high=2.0))}  # a tensor exponent, a > 0


@check(**GRAD_TOL, variants=BINARY_GRADIENTS,
       describe=lambda case: f"(a {SYMBOLS[case['op']]} b).backward(g) with {_ab(case)}")
def binary_gradients_with_broadcasting(tt, case):
    """Add, Sub, Mul, Div and Pow send each operand its gradient, summed over the axes it was broadcast along."""
    return _gradients(tt, BINARY[case["op"]], case)


binary_gradients_with_broadcasting.expected(lambda case: _numeric(BINARY[case["op"]], case))


def _scalar_case(forms, c, x=floats_arrays, max_dims=2):
    return shapes(max_dims=max_dims).flatmap(lambda shape: st.fixed_dictionaries({
        "forms": st.just(forms), "c": c, "x": x(shape), "g": upstream(shape)}))


@st.composite
def _pow_scalar_exponent(draw):
    """x ** c for c an int (x of either sign) or a float (x > 0), negative or 0 too; |x| in [0.5, 2]."""
    case = draw(_scalar_case(["x ** c"], st.sampled_from([2, 3, 1, 0, -1, -2, 0.5, 1.5, -0.5, 2.5]),
                             lambda shape: signed_arrays(shape, 0.5, 2.0), max_dims=3))
    return {**case, "x": np.abs(case["x"]) if isinstance(case["c"], float) else case["x"]}


_EITHER_SIGN = st.floats(0.5, 3.0) | st.floats(-3.0, -0.5)
SCALAR_GRADIENTS = {  # variant -> (task, points, cases)
    "c + x, x + c, c - x, x - c": ("02.7", 1, _scalar_case(["c + x", "x + c", "c - x", "x - c"], _EITHER_SIGN)),
    "c * x, x * c, c / x, x / c": ("02.8", 1, _scalar_case(["c * x", "x * c", "c / x", "x / c"], _EITHER_SIGN,
                                                           signed_arrays)),
    "x ** c": ("02.9", 2, _pow_scalar_exponent()),
    "c ** x": ("02.9", 1, _scalar_case(["c ** x"], st.sampled_from([2.0, 0.5, 3.7]),
                                       lambda shape: floats_arrays(shape, -2, 2)))}


@check(**GRAD_TOL, variants=SCALAR_GRADIENTS,
       describe=lambda case: f"{', '.join(f'({form}).backward(g)' for form in case['forms'])} with c = {case['c']!r} "
                             f"a Python number, x of shape {case['x'].shape}")
def python_number_gradients(tt, case):
    """With a Python number c on either side, as the exponent or as the base, x gets its gradient."""
    return {f"x.grad of {form}": leaf_gradients(tt, lambda x: SCALAR_FORMS[form](x, case["c"]), [case["x"]],
                                                case["g"])[0] for form in case["forms"]}


@python_number_gradients.expected
def _(case):
    return {f"x.grad of {form}": central_difference(lambda x: SCALAR_FORMS[form](x, case["c"]), [case["x"]],
                                                    case["g"])[0] for form in case["forms"]}




@check(task="02.8", points=1, dtype=True, rtol=1e-4, atol=1e-4,
       inputs=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4).flatmap(
           lambda pair: gradient_case(lambda a, b: a * b + 2.0 * a,
                                      *(floats_arrays(shape, dtype=np.float32) for shape in pair.input_shapes))).map(
           lambda case: {**case, "g": case["g"].astype(np.float32)}),
       describe=lambda case: f"(a * b + 2.0 * a).backward(g) in float32 with {_ab(case)}")
def float32_tensors_get_float32_gradients_of_their_shape(tt, case):
    """float32 leaves get float32 gradients, each of its leaf's shape."""
    return _gradients(tt, lambda a, b: a * b + 2.0 * a, case)


float32_tensors_get_float32_gradients_of_their_shape.expected(lambda case: {
    name: grad.astype(np.float32) for name, grad in _numeric(lambda a, b: a * b + 2.0 * a, case).items()})


# ---------------------------------------------------------------------------------------------------
# 02.10 MatMul: both operands or only one require grad (x @ W with data x)

_side = st.integers(1, 4)
MATMUL_SHAPES = {
    "matrices": st.tuples(_side, _side, _side).map(lambda mkn: ((mkn[0], mkn[1]), (mkn[1], mkn[2]))),
    "batched": st.tuples(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3),
                         _side, _side, _side).map(
        lambda t: (t[0].input_shapes[0] + (t[1], t[2]), t[0].input_shapes[1] + (t[2], t[3]))),
    "1-d operand": st.tuples(st.sampled_from(["vector @ matrix", "matrix @ vector", "vector @ vector",
                                              "vector @ batch", "batch @ vector"]), _side, _side, _side).map(
        lambda t: {"vector @ matrix": ((t[1],), (t[1], t[2])), "matrix @ vector": ((t[2], t[1]), (t[1],)),
                   "vector @ vector": ((t[1],), (t[1],)), "vector @ batch": ((t[1],), (t[3], t[1], t[2])),
                   "batch @ vector": ((t[3], t[2], t[1]), (t[1],))}[t[0]]),
}


def _matmul_case(pairs):
    return st.tuples(pairs, st.sampled_from([["a", "b"], ["a"], ["b"]])).flatmap(lambda t: gradient_case(
        operator.matmul, floats_arrays(t[0][0]), floats_arrays(t[0][1])).map(
        lambda case: {**case, "requires_grad": t[1]}))


@check(task="02.10", points=2, **GRAD_TOL,
       variants={name: _matmul_case(pairs) for name, pairs in MATMUL_SHAPES.items()},
       describe=lambda case: f"(a @ b).backward(g) with {_ab(case)}, requires_grad=True on "
                             f"{' and '.join(case['requires_grad'])} only")
def matmul_gradients(tt, case):
    """MatMul sends each operand that requires grad its gradient (and the others nothing)."""
    a, b = (tt.Tensor(case[name], requires_grad=name in case["requires_grad"]) for name in ("a", "b"))
    (a @ b).backward(tt.Tensor(case["g"]))
    return {"a.grad": _grad(a), "b.grad": _grad(b)}


matmul_gradients.expected(lambda case: {name: grad if name[0] in case["requires_grad"] else None
                                        for name, grad in _numeric(operator.matmul, case).items()})


# ---------------------------------------------------------------------------------------------------
# 02.9 Neg, Exp, Log, Sqrt   02.11 Sum, Mean   02.12 Max   02.13 Reshape, Permute   02.14 GetItem:
# x.grad after f(x).backward(g) for a function f of one tensor (ON_TENSORS, ON_ARRAYS)


@st.composite
def _x_case(draw, call, values=floats_arrays, shape=shapes(max_dims=3), args=lambda shape: st.none()):
    """{"call", "args", "x", "g"}: x drawn from values(shape), the call's args for x's shape, g of f(x)'s shape."""
    shape = draw(shape)
    x, args = draw(values(shape)), draw(args(shape))
    return {"call": call, "args": args, "x": x, "g": draw(upstream(np.shape(ON_ARRAYS[call](x, args))))}


@st.composite
def _reduce_args(draw, shape):
    """axis: None, an int or a tuple of distinct axes (maybe negative); keepdims."""
    ndim, kind = len(shape), draw(st.sampled_from(["none", "int", "tuple"]))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    axes = tuple(axis - ndim if draw(st.booleans()) else axis for axis in axes)
    return {"axis": None if kind == "none" else axes[0] if kind == "int" else axes, "keepdims": draw(st.booleans())}


def _distinct(shape):
    """Distinct values at least 0.37 apart, so a nudge never changes which one is the maximum."""
    return st.permutations(range(int(np.prod(shape)))).map(
        lambda order: (np.array(order, dtype=np.float64) * 0.37 - 1.5).reshape(shape))


@st.composite
def _reshape_args(draw, shape):
    size = int(np.prod(shape))
    rows = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
    target = list(draw(st.sampled_from([(rows, size // rows), (size,), (1, rows, size // rows),
                                        (size // rows, 1, rows)])))
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return tuple(target)


@st.composite
def _permute_args(draw, shape):
    """dims that are not their own inverse ((1, 2, 0) and (2, 0, 1) differ: a swap would not tell them apart)."""
    dims = draw(st.permutations(range(len(shape))).filter(lambda dims: list(np.argsort(dims)) != list(dims)))
    return tuple(d - len(shape) if draw(st.booleans()) else d for d in dims)


def _transpose_args(shape):
    return st.tuples(*[st.integers(-len(shape), len(shape) - 1)] * 2)


# Indices travel as plain data: ("slice", start, stop, step), ("int", i), ("none",), ("ellipsis",), ("array", [...])
def _decode(spec):
    def one(part):
        if part[0] == "slice":
            return slice(*part[1:])
        return {"none": None, "ellipsis": Ellipsis}[part[0]] if len(part) == 1 else \
            np.array(part[1], dtype=np.int64) if part[0] == "array" else part[1]
    return tuple(one(part) for part in spec)


def _encode(part):
    if isinstance(part, slice):
        return ("slice", part.start, part.stop, part.step)
    return ("none",) if part is None else ("ellipsis",) if part is Ellipsis else ("int", int(part))


@st.composite
def _basic_index(draw, shape):
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return tuple(_encode(part) for part in (index if isinstance(index, tuple) else (index,)))


@st.composite
def _repeated_integer_index(draw, shape):
    axis = draw(st.integers(0, len(shape) - 1))
    rows = draw(st.lists(st.integers(-shape[axis], shape[axis] - 1), min_size=1, max_size=8))
    if len(rows) > 1 and draw(st.booleans()):
        rows[1] = rows[0]  # make sure an index repeats
    array = np.array(rows).reshape(draw(st.sampled_from([(len(rows),), (1, len(rows))])))
    return tuple([("slice", None, None, None)] * axis + [("array", array.tolist())])


ON_TENSORS = {"neg": lambda x, args: -x, "exp": lambda x, args: x.exp(), "log": lambda x, args: x.log(),
              "sqrt": lambda x, args: x.sqrt(), "sum": lambda x, args: x.sum(**args),
              "mean": lambda x, args: x.mean(**args), "max": lambda x, args: x.max(**args),
              "reshape": lambda x, args: x.reshape(*args), "permute": lambda x, args: x.permute(*args),
              "transpose": lambda x, args: x.transpose(*args), "T": lambda x, args: x.T,
              "getitem": lambda x, args: x[_decode(args)]}  # the call -> f(x, the case's args) on a Tensor
ON_ARRAYS = {**ON_TENSORS, "exp": lambda x, args: np.exp(x), "log": lambda x, args: np.log(x),
             "sqrt": lambda x, args: np.sqrt(x), "permute": lambda x, args: np.transpose(x, args),
             "transpose": lambda x, args: np.swapaxes(x, *args)}  # the same on a numpy array
_SIDE_4 = shapes(min_dims=1, max_dims=3, max_side=4)
GRADIENTS = {  # variant -> (task, points, cases)
    **{op: ("02.9", 1, _x_case(op, **({"values": lambda s: floats_arrays(s, 0.2, 5.0)} if op in ("log", "sqrt")
                                      else {}))) for op in ("neg", "exp", "log", "sqrt")},
    "sum": ("02.11", 2, _x_case("sum", shape=_SIDE_4, args=_reduce_args)),
    "mean": ("02.11", 2, _x_case("mean", shape=_SIDE_4, args=_reduce_args)),
    "max": ("02.12", 2, _x_case("max", _distinct, _SIDE_4, _reduce_args)),
    "max with ties": ("02.12", 2, _x_case("max", lambda shape: floats_arrays(shape, 0, 2).map(np.round), _SIDE_4,
                                          _reduce_args)),
    "reshape": ("02.13", 1, _x_case("reshape", shape=shapes(min_dims=1, max_dims=3), args=_reshape_args)),
    "permute, transpose, T": ("02.13", 2, st.one_of(
        _x_case("permute", shape=shapes(min_dims=3, max_dims=4, min_side=2, max_side=4), args=_permute_args),
        _x_case("transpose", shape=shapes(min_dims=1, max_dims=4, max_side=4), args=_transpose_args),
        _x_case("T", shape=shapes(min_dims=1, max_dims=4, max_side=4)))),
    "getitem": ("02.14", 2, _x_case("getitem", shape=shapes(min_dims=1, max_dims=3, max_side=5), args=_basic_index)),
    "getitem, repeated integers": ("02.14", 2, _x_case("getitem", shape=_SIDE_4, args=_repeated_integer_index))}


def _index_words(spec):
    def one(part):
        if part[0] == "slice":
            start, stop, step = ("" if value is None else value for value in part[1:])
            return f"{start}:{stop}" + ("" if step == "" else f":{step}")
        return {"none": "None", "ellipsis": "..."}.get(part[0]) or str(part[1])
    return f"x[{', '.join(one(part) for part in spec)}]"


def _call_words(case):
    call, args = case["call"], case["args"]
    if call in ("sum", "mean", "max"):
        return f"x.{call}(axis={args['axis']!r}, keepdims={args['keepdims']})"
    if call == "getitem":
        return _index_words(args)
    return {"neg": "(-x)", "T": "x.T"}.get(call) or f"x.{call}{'()' if args is None else args}"


@check(**GRAD_TOL, variants=GRADIENTS,
       describe=lambda case: f"{_call_words(case)}.backward(g), x = " + (
           f"{case['x'].tolist()}" if case["x"].size <= 8 else f"an array of shape {case['x'].shape}"))
def gradient(tt, case):
    """x.grad after f(x).backward(g), for f an elementwise function, a reduction, a reshape or permutation, an index."""
    return _gradients(tt, lambda x: ON_TENSORS[case["call"]](x, case["args"]), case, ("x",))


@gradient.expected
def _(case):
    if case["call"] != "max":
        return _numeric(lambda x: ON_ARRAYS[case["call"]](x, case["args"]), case, ("x",))
    x, axis, g = case["x"], case["args"]["axis"], case["g"]  # the maxima share the gradient evenly
    is_max = x == x.max(axis=axis, keepdims=True)
    if not case["args"]["keepdims"] and axis is not None:
        g = np.expand_dims(g, axis)
    return {"x.grad": np.where(is_max, g / is_max.sum(axis=axis, keepdims=True), 0.0)}

