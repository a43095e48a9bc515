"""Hidden suite of 02_autograd: gradients of every op of 01 against float64 central differences, and the
engine's behaviour (graph recording, topological order, accumulation, no_grad, gradcheck).

Every `expected` uses numpy and `checklib.central_difference` only; every `compute` returns plain data.
Gradient checks run the package in float64 (float64 inputs stay float64), so tolerances are tight.
"""

import importlib

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import (CheckFailed, capture_error, central_difference, check, floats_arrays, shapes, signed_arrays,
                      upstream)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _autograd(tt):
    """The exported module (for names outside tinytorch.__all__: unbroadcast, topological_sort)."""
    return importlib.import_module(tt.__name__ + ".core.autograd")








def _gradients(tt, fn, inputs, grad_output):
    """Leaves for `inputs` (requires_grad), fn(*leaves).backward(grad_output), their .grad arrays."""
    leaves = [tt.Tensor(x, requires_grad=True) for x in inputs]
    fn(*leaves).backward(tt.Tensor(grad_output))
    return [None if leaf.grad is None else leaf.grad.numpy() for leaf in leaves]


def _own_ops(tt):
    """Functions written here on tt.Function (02.1), with their own backwards: Times (a * b), Plus (a + b),
    Minus (a - b), Divide (a / b) for operands of one shape or a Python number, and Total (the sum of every
    element). The checks of the engine (02.2, 02.3) build their graphs from these, so that they need the
    engine alone and no backward of the student's ops (02.7 on)."""

    class Times(tt.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            return grad_output * b, grad_output * a

    class Plus(tt.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, grad_output

    class Minus(tt.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a - b

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output, -grad_output

    class Divide(tt.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return a / b

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            return grad_output / b, -grad_output * a / (b * b)

    class Total(tt.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.shape = np.shape(a)
            return np.asarray(np.sum(a))

        @staticmethod
        def backward(ctx, grad_output):
            return (np.broadcast_to(grad_output, ctx.shape).copy(),)

    return Times, Plus, Minus, Divide, Total


@st.composite
def _case(draw, fn, *input_strategies, names=("a", "b")):
    """A case {names...: arrays, "g": upstream gradient of fn's output shape}."""
    case = {name: draw(strategy) for name, strategy in zip(names, input_strategies)}
    out_shape = np.shape(fn(*[case[name] for name in names]))
    case["g"] = draw(upstream(out_shape))
    return case


def _broadcast_case(fn, low=-3.0, high=3.0, b_strategy=None):
    def build(shapes_pair):
        shape_a, shape_b = shapes_pair.input_shapes
        return _case(fn, floats_arrays(shape_a, low, high),
                     b_strategy(shape_b) if b_strategy else floats_arrays(shape_b))
    return hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4).flatmap(build)


def _ab(case):
    return f"a of shape {case['a'].shape} and b of shape {case['b'].shape}"


# ---------------------------------------------------------------------------------------------------
# 02.1 Function.apply: graph recording


@check(task="02.1", points=2,
       describe=lambda case: "results of ops on tensors with and without requires_grad (requires_grad, grad_fn)")
def apply_records_graph_only_when_an_operand_requires_grad(tt, case):
    x = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = tt.Tensor(np.array([3.0, 4.0]))
    results = {"x * c": x * c, "c * c": c * c, "c + 1": c + 1, "2 * x": 2 * x, "(x * c).sum()": (x * c).sum(),
               "c.exp()": c.exp()}
    return {name: [bool(t.requires_grad), t.grad_fn is not None] for name, t in results.items()}


@apply_records_graph_only_when_an_operand_requires_grad.expected
def _(case):
    recorded = {"x * c", "2 * x", "(x * c).sum()"}
    return {name: [name in recorded, name in recorded]
            for name in ["x * c", "c * c", "c + 1", "2 * x", "(x * c).sum()", "c.exp()"]}


@check(task="02.3", points=2, **GRAD_TOL,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "scale": st.floats(-3, 3), "g": upstream(shape)})),
       describe=lambda case: f"a Function subclass y = scale * x³ (scale a keyword param) applied to x of "
                             f"shape {case['x'].shape}: [forward value, forward dtype, x.grad, types seen by forward]")
def custom_function_forward_backward_and_params(tt, case):
    seen = []

    class ScaledCube(tt.Function):
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
    return [y.numpy(), str(y32.numpy().dtype), x.grad.numpy(), seen[:2]]


@custom_function_forward_backward_and_params.expected
def _(case):
    x, scale = case["x"], case["scale"]
    return [scale * x ** 3, "float32", case["g"] * scale * 3 * x ** 2, ["ndarray", "int"]]


@check(task="02.3", points=1, **GRAD_TOL,
       inputs=shapes(max_dims=2).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "g": upstream(shape)})),
       describe=lambda case: f"Times(x, x.detach()).backward(g) (Times: a Function of the check's own, a * b) for x "
                             f"of shape {case['x'].shape}: [requires_grad of x.detach(), x.grad]")
def detach_stops_the_gradient(tt, case):
    times = _own_ops(tt)[0]
    x = tt.Tensor(case["x"], requires_grad=True)
    constant = x.detach()
    times.apply(x, constant).backward(tt.Tensor(case["g"]))
    return [bool(constant.requires_grad), x.grad.numpy()]


@detach_stops_the_gradient.expected
def _(case):
    return [False, case["g"] * case["x"]]


# ---------------------------------------------------------------------------------------------------
# 02.2 topological_sort


@st.composite
def _random_graph(draw):
    num_leaves = draw(st.integers(1, 3))
    ops = []
    for k in range(draw(st.integers(1, 12))):
        available = num_leaves + k
        ops.append((draw(st.integers(0, available - 1)), draw(st.integers(0, available - 1))))
    return {"num_leaves": num_leaves, "ops": ops}


@check(task="02.2", points=2, inputs=_random_graph(),
       describe=lambda case: f"topological_sort(root) of a graph of {case['num_leaves']} leaves and "
                             f"{len(case['ops'])} additions (tensor k = tensor i + tensor j for (i, j) in "
                             f"{case['ops']}, the root is the last)")
def topological_sort_puts_inputs_first_and_the_root_last(tt, case):
    tensors = [tt.Tensor(np.array(float(k)), requires_grad=True) for k in range(case["num_leaves"])]
    for i, j in case["ops"]:
        tensors.append(tensors[i] + tensors[j])
    index_of = {id(t): k for k, t in enumerate(tensors)}
    return [index_of.get(id(t), -1) for t in _autograd(tt).topological_sort(tensors[-1])]


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
        raise CheckFailed(f"{what}: expected a list of the graph's tensors but got {output!r:.80}")
    if len(output) != len(set(output)):
        raise CheckFailed(f"{what}: a tensor appears more than once in {output}")
    if set(output) != reachable:
        raise CheckFailed(f"{what}: expected the tensors {sorted(reachable)} but got {sorted(output)}")
    position = {k: p for p, k in enumerate(output)}
    for k, (i, j) in inputs_of.items():
        if k in position and (position[i] > position[k] or position[j] > position[k]):
            raise CheckFailed(f"{what}: tensor {k} = {i} + {j} comes before its inputs in {output}")
    if output[-1] != root:
        raise CheckFailed(f"{what}: the root {root} must come last, got {output}")


@check(task="02.3", points=3, timeout=15, **GRAD_TOL,
       describe=lambda case: "y = x; 20,000 times (20 times Python's recursion limit) y = Times(y, 1.00001) "
                             "(a Function of the check's own, a * b); y.backward(ones): x.grad")
def backward_through_a_20000_op_chain(tt, case):
    times = _own_ops(tt)[0]
    x = tt.Tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(20_000):
        y = times.apply(y, 1.00001)
    y.backward(tt.Tensor(np.ones(3)))
    return x.grad.numpy()


@backward_through_a_20000_op_chain.expected
def _(case):
    return np.full(3, np.float64(1.00001) ** 20_000)


@check(task="02.3", points=2, timeout=10,
       describe=lambda case: "y = x; 50 times y = Plus(y, y) (a Function of the check's own, a + b; 2**50 paths "
                             "to x): x.grad")
def backward_visits_a_shared_node_once(tt, case):
    plus = _own_ops(tt)[1]
    x = tt.Tensor(np.array([1.5, -2.0]), requires_grad=True)
    y = x
    for _ in range(50):
        y = plus.apply(y, y)
    y.backward(tt.Tensor(np.ones(2)))
    return x.grad.numpy()


@backward_visits_a_shared_node_once.expected
def _(case):
    return np.full(2, 2.0 ** 50)


# ---------------------------------------------------------------------------------------------------
# 02.3 backward: seed, walk, accumulate


@check(task="02.3", points=1, **GRAD_TOL,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "w": signed_arrays(shape)})),
       describe=lambda case: f"Total(Times(x, w)).backward() without a grad argument (Times, Total: Functions of "
                             f"the check's own, a * b and the sum of all elements), x of shape {case['x'].shape}")
def backward_of_a_scalar_seeds_ones(tt, case):
    times, _, _, _, total = _own_ops(tt)
    x = tt.Tensor(case["x"], requires_grad=True)
    total.apply(times.apply(x, tt.Tensor(case["w"]))).backward()
    return x.grad.numpy()


@backward_of_a_scalar_seeds_ones.expected
def _(case):
    return case["w"]


@check(task="02.3", points=1,
       describe=lambda case: "(x * 2).backward() for x of shape (2, 3) without a grad argument: the error raised")
def backward_of_a_non_scalar_without_grad_raises(tt, case):
    x = tt.Tensor(np.ones((2, 3)), requires_grad=True)
    return capture_error(lambda: (x * 2).backward())["raised"]


@backward_of_a_non_scalar_without_grad_raises.expected
def _(case):
    return "RuntimeError"


@check(task="02.3", points=1,
       describe=lambda case: "(c * 2).sum().backward() for c without requires_grad: the error raised")
def backward_of_a_tensor_without_requires_grad_raises(tt, case):
    c = tt.Tensor(np.ones((2, 3)))
    return capture_error(lambda: (c * 2).sum().backward())["raised"]


@backward_of_a_tensor_without_requires_grad_raises.expected
def _(case):
    return "RuntimeError"


@check(task="02.3", points=2, **GRAD_TOL,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "w": signed_arrays(shape), "g1": upstream(shape),
           "g2": upstream(shape), "g3": upstream(shape)})),
       describe=lambda case: f"Times(x, w).backward(g) (Times: a Function of the check's own, a * b) twice, then "
                             f"x.grad = None and once more, x of shape {case['x'].shape}: [x.grad after two calls, "
                             f"x.grad after the reset]")
def gradients_accumulate_across_calls_until_reset(tt, case):
    times = _own_ops(tt)[0]
    x = tt.Tensor(case["x"], requires_grad=True)
    w = tt.Tensor(case["w"])
    times.apply(x, w).backward(tt.Tensor(case["g1"]))
    times.apply(x, w).backward(tt.Tensor(case["g2"]))
    after_two = x.grad.numpy().copy()
    x.grad = None
    times.apply(x, w).backward(tt.Tensor(case["g3"]))
    return [after_two, x.grad.numpy()]


@gradients_accumulate_across_calls_until_reset.expected
def _(case):
    return [case["w"] * (case["g1"] + case["g2"]), case["w"] * case["g3"]]


def _reused(x, y):
    return x * x * y - x / (y * y + 1) + x + (x - y) * x


@check(task="02.3", points=2, **GRAD_TOL,
       inputs=shapes(max_dims=2).flatmap(lambda shape: _case(_reused, floats_arrays(shape), floats_arrays(shape),
                                                            names=("x", "y"))),
       describe=lambda case: f"x * x * y - x / (y * y + 1) + x + (x - y) * x (x used five times), built from "
                             f"Functions of the check's own for *, /, +, -, shape {case['x'].shape}: [x.grad, y.grad]")
def a_tensor_used_several_times_sums_its_gradients(tt, case):
    times, plus, minus, divide, _ = (op.apply for op in _own_ops(tt))

    def reused(x, y):
        return plus(plus(minus(times(times(x, x), y), divide(x, plus(times(y, y), 1.0))), x), times(minus(x, y), x))
    return _gradients(tt, reused, [case["x"], case["y"]], case["g"])


@a_tensor_used_several_times_sums_its_gradients.expected
def _(case):
    return central_difference(_reused, [case["x"], case["y"]], case["g"])


@check(task="02.3", points=2, timeout=10,
       describe=lambda case: "s = x; 9,999 times s = Plus(s, x) (a Function of the check's own, a + b; x used "
                             "10,000 times); s.backward(ones): x.grad")
def backward_with_a_node_reused_10000_times(tt, case):
    plus = _own_ops(tt)[1]
    x = tt.Tensor(np.array([0.5, -1.0, 2.0]), requires_grad=True)
    s = x
    for _ in range(9_999):
        s = plus.apply(s, x)
    s.backward(tt.Tensor(np.ones(3)))
    return x.grad.numpy()


@backward_with_a_node_reused_10000_times.expected
def _(case):
    return np.full(3, 10_000.0)


@check(task="02.3", points=1,
       describe=lambda case: "h = Times(x, c); Total(Times(h, h)).backward() (Times, Total: Functions of the "
                             "check's own, a * b and the sum of all elements): which of x, c, h have a .grad")
def only_leaves_that_require_grad_get_a_grad(tt, case):
    times, _, _, _, total = _own_ops(tt)
    x = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    c = tt.Tensor(np.array([3.0, 4.0]))
    h = times.apply(x, c)
    total.apply(times.apply(h, h)).backward()
    return {"x": x.grad is not None, "c": c.grad is not None, "h": h.grad is not None}


@only_leaves_that_require_grad_get_a_grad.expected
def _(case):
    return {"x": True, "c": False, "h": False}


def _affine(a, b):
    return a * b + 2.0 * a


@check(task="02.8", points=1, dtype=True, rtol=1e-4, atol=1e-4,
       inputs=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=4).flatmap(
           lambda pair: _case(_affine, floats_arrays(pair.input_shapes[0], dtype=np.float32),
                              floats_arrays(pair.input_shapes[1], dtype=np.float32))).map(
           lambda case: {**case, "g": case["g"].astype(np.float32)}),
       describe=lambda case: f"a * b + 2.0 * a in float32 with {_ab(case)}: [a.grad, b.grad] (float32, each "
                             f"of its tensor's shape)")
def float32_tensors_get_float32_gradients_of_their_shape(tt, case):
    return _gradients(tt, _affine, [case["a"], case["b"]], case["g"])


@float32_tensors_get_float32_gradients_of_their_shape.expected
def _(case):
    return [grad.astype(np.float32) for grad in central_difference(_affine, [case["a"], case["b"]], case["g"])]


# ---------------------------------------------------------------------------------------------------
# 02.4 no_grad


@check(task="02.4", points=2,
       describe=lambda case: "inside `with no_grad():` y = x * 2 for x with requires_grad: "
                             "[is_grad_enabled inside, y.requires_grad, y.grad_fn is None, is_grad_enabled after]")
def no_grad_records_no_graph(tt, case):
    x = tt.Tensor(np.array([1.0, 2.0]), requires_grad=True)
    with tt.no_grad():
        inside = tt.is_grad_enabled()
        y = x * 2
    after = x * 2
    return [bool(inside), bool(y.requires_grad), y.grad_fn is None, bool(tt.is_grad_enabled()),
            bool(after.requires_grad)]


@no_grad_records_no_graph.expected
def _(case):
    return [False, False, True, True, True]


@check(task="02.4", points=1,
       describe=lambda case: "is_grad_enabled() after a `with no_grad():` block that raised ValueError, "
                             "and whether the error got out")
def no_grad_restores_grad_mode_after_an_exception(tt, case):
    escaped = False
    try:
        with tt.no_grad():
            raise ValueError("raised inside no_grad")
    except ValueError:
        escaped = True
    x = tt.Tensor(np.array([1.0]), requires_grad=True)
    return [escaped, bool(tt.is_grad_enabled()), bool((x * 2).requires_grad)]


@no_grad_restores_grad_mode_after_an_exception.expected
def _(case):
    return [True, True, True]


@check(task="02.4", points=1,
       describe=lambda case: "nested `with no_grad():` blocks: [is_grad_enabled after the inner block, "
                             "after the outer block]")
def no_grad_blocks_nest(tt, case):
    with tt.no_grad():
        with tt.no_grad():
            pass
        between = tt.is_grad_enabled()
    return [bool(between), bool(tt.is_grad_enabled())]


@no_grad_blocks_nest.expected
def _(case):
    return [False, True]


# ---------------------------------------------------------------------------------------------------
# 02.5 gradcheck


def _sin_times(tt, wrong_element=None, factor=1.0):
    """A Function z = sin(a) * b; its backward is off by `factor` for a, and by +1 at `wrong_element`
    of b's gradient when given."""

    class SinTimes(tt.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, b)
            return np.sin(a) * b

        @staticmethod
        def backward(ctx, grad_output):
            a, b = ctx.saved_tensors
            grad_b = grad_output * np.sin(a)
            if wrong_element is not None:
                grad_b = grad_b.copy()
                grad_b.reshape(-1)[wrong_element] += 1.0
            return factor * grad_output * np.cos(a) * b, grad_b

    return SinTimes


def _gradcheck_inputs(min_side=1):
    return shapes(min_dims=1, max_dims=2, min_side=min_side, max_side=3).flatmap(
        lambda shape: st.fixed_dictionaries({"a": floats_arrays(shape, dtype=np.float32),
                                             "b": floats_arrays(shape, dtype=np.float32),
                                             "wrong": st.integers(0, int(np.prod(shape)) - 1)}))


@check(task="02.5", points=2, inputs=_gradcheck_inputs(), examples=10,
       describe=lambda case: f"gradcheck(SinTimes.apply, a, b) with a correct backward, float32 a and b of "
                             f"shape {case['a'].shape}: what it returns")
def gradcheck_accepts_a_correct_function(tt, case):
    sin_times = _sin_times(tt)
    a = tt.Tensor(case["a"], requires_grad=True)
    b = tt.Tensor(case["b"], requires_grad=True)
    outcome = {}
    result = capture_error(lambda: outcome.setdefault("returned", tt.gradcheck(sin_times.apply, a, b)))
    returned = outcome.get("returned")
    return result["raised"] or repr(bool(returned) if isinstance(returned, (bool, np.bool_)) else returned)


@gradcheck_accepts_a_correct_function.expected
def _(case):
    return "True"


@check(task="02.5", points=2, inputs=_gradcheck_inputs(), examples=10,
       describe=lambda case: f"gradcheck(WrongSinTimes.apply, a, b) whose backward for a is off by 10%, "
                             f"a and b of shape {case['a'].shape}: the error raised")
def gradcheck_rejects_a_wrong_function(tt, case):
    wrong = _sin_times(tt, factor=1.1)
    a = tt.Tensor(case["a"] / 3, requires_grad=True)                  # |cos(a) * b| >= 0.27: the 10% shows
    b = tt.Tensor(np.where(np.abs(case["b"]) < 0.5, 1.0, case["b"]).astype(np.float32), requires_grad=True)
    return capture_error(lambda: tt.gradcheck(wrong.apply, a, b))["raised"]


@gradcheck_rejects_a_wrong_function.verdict
def _(case, output):
    if output != "GradcheckError":
        said = "raised nothing" if output is None else f"raised {output}"
        raise CheckFailed(f"gradcheck of a Function whose backward is 10% off for a (shape {case['a'].shape}): "
                          f"expected GradcheckError but it {said}")


@check(task="02.5", points=1, inputs=_gradcheck_inputs(min_side=2), examples=10,
       describe=lambda case: f"gradcheck(SinTimes.apply, a, b) whose backward is wrong at element "
                             f"{case['wrong']} (flat) of b's gradient only, shape {case['a'].shape}: the error raised")
def gradcheck_checks_every_element_of_every_input(tt, case):
    wrong = _sin_times(tt, wrong_element=case["wrong"])
    a = tt.Tensor(case["a"], requires_grad=True)
    b = tt.Tensor(case["b"], requires_grad=True)
    return capture_error(lambda: tt.gradcheck(wrong.apply, a, b))["raised"]


@gradcheck_checks_every_element_of_every_input.expected
def _(case):
    return "GradcheckError"


# ---------------------------------------------------------------------------------------------------
# 02.6 unbroadcast


@check(task="02.6", points=2,
       inputs=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4).flatmap(
           lambda pair: st.fixed_dictionaries({"shape": st.just(pair.input_shapes[0]),
                                               "grad": floats_arrays(pair.result_shape)})),
       describe=lambda case: f"unbroadcast(grad of shape {case['grad'].shape}, {case['shape']})")
def unbroadcast_sums_over_broadcast_axes(tt, case):
    return np.asarray(_autograd(tt).unbroadcast(case["grad"], case["shape"]))


@unbroadcast_sums_over_broadcast_axes.expected
def _(case):
    # the adjoint of np.broadcast_to: every element of `shape` collects the gradients of its copies
    shape, grad = case["shape"], case["grad"]
    source = np.broadcast_to(np.arange(int(np.prod(shape))).reshape(shape), grad.shape)
    return np.bincount(source.reshape(-1), weights=grad.reshape(-1), minlength=int(np.prod(shape))).reshape(shape)


# ---------------------------------------------------------------------------------------------------
# 02.7 Add, Sub


def _add(a, b):
    return a + b


def _sub(a, b):
    return a - b


@check(task="02.7", points=2, inputs=_broadcast_case(_add), **GRAD_TOL,
       describe=lambda case: f"(a + b).backward(g) with {_ab(case)}: [a.grad, b.grad]")
def add_gradients_with_broadcasting(tt, case):
    return _gradients(tt, _add, [case["a"], case["b"]], case["g"])


@add_gradients_with_broadcasting.expected
def _(case):
    return central_difference(_add, [case["a"], case["b"]], case["g"])


@check(task="02.7", points=2, inputs=_broadcast_case(_sub), **GRAD_TOL,
       describe=lambda case: f"(a - b).backward(g) with {_ab(case)}: [a.grad, b.grad]")
def sub_gradients_with_broadcasting(tt, case):
    return _gradients(tt, _sub, [case["a"], case["b"]], case["g"])


@sub_gradients_with_broadcasting.expected
def _(case):
    return central_difference(_sub, [case["a"], case["b"]], case["g"])


_SCALAR_FORMS = {
    "add": [lambda x, c: c + x, lambda x, c: x + c, lambda x, c: c - x, lambda x, c: x - c],
    "mul": [lambda x, c: c * x, lambda x, c: x * c, lambda x, c: c / x, lambda x, c: x / c],
}


def _scalar_case(nonzero):
    return shapes(max_dims=2).flatmap(lambda shape: st.fixed_dictionaries({
        "x": signed_arrays(shape) if nonzero else floats_arrays(shape),
        "c": st.floats(0.5, 3.0) | st.floats(-3.0, -0.5), "g": upstream(shape)}))


def _scalar_gradients(tt, case, kind):
    return [_gradients(tt, lambda x: form(x, case["c"]), [case["x"]], case["g"])[0]
            for form in _SCALAR_FORMS[kind]]


def _scalar_expected(case, kind):
    return [central_difference(lambda x: form(x, case["c"]), [case["x"]], case["g"])[0]
            for form in _SCALAR_FORMS[kind]]


@check(task="02.7", points=1, inputs=_scalar_case(nonzero=False), **GRAD_TOL,
       describe=lambda case: f"x.grad of c + x, x + c, c - x, x - c with c = {case['c']!r} a Python float, "
                             f"x of shape {case['x'].shape}")
def add_and_sub_with_python_scalars_on_either_side(tt, case):
    return _scalar_gradients(tt, case, "add")


@add_and_sub_with_python_scalars_on_either_side.expected
def _(case):
    return _scalar_expected(case, "add")


# ---------------------------------------------------------------------------------------------------
# 02.8 Mul, Div


def _mul(a, b):
    return a * b


def _div(a, b):
    return a / b


@check(task="02.8", points=2, inputs=_broadcast_case(_mul), **GRAD_TOL,
       describe=lambda case: f"(a * b).backward(g) with {_ab(case)}: [a.grad, b.grad]")
def mul_gradients_with_broadcasting(tt, case):
    return _gradients(tt, _mul, [case["a"], case["b"]], case["g"])


@mul_gradients_with_broadcasting.expected
def _(case):
    return central_difference(_mul, [case["a"], case["b"]], case["g"])


@check(task="02.8", points=2, inputs=_broadcast_case(_div, b_strategy=signed_arrays), **GRAD_TOL,
       describe=lambda case: f"(a / b).backward(g) with {_ab(case)}: [a.grad, b.grad]")
def div_gradients_with_broadcasting(tt, case):
    return _gradients(tt, _div, [case["a"], case["b"]], case["g"])


@div_gradients_with_broadcasting.expected
def _(case):
    return central_difference(_div, [case["a"], case["b"]], case["g"])


@check(task="02.8", points=1, inputs=_scalar_case(nonzero=True), **GRAD_TOL,
       describe=lambda case: f"x.grad of c * x, x * c, c / x, x / c with c = {case['c']!r} a Python float, "
                             f"x of shape {case['x'].shape}")
def mul_and_div_with_python_scalars_on_either_side(tt, case):
    return _scalar_gradients(tt, case, "mul")


@mul_and_div_with_python_scalars_on_either_side.expected
def _(case):
    return _scalar_expected(case, "mul")


# ---------------------------------------------------------------------------------------------------
# 02.9 Pow, Neg, Exp, Log, Sqrt


@st.composite
def _pow_scalar_case(draw):
    exponent = draw(st.sampled_from([2, 3, 1, 0, -1, -2, 0.5, 1.5, -0.5, 2.5]))
    shape = draw(shapes(max_dims=3))
    x = draw(floats_arrays(shape, 0.5, 2.0) if isinstance(exponent, float) else signed_arrays(shape, 0.5, 2.0))
    return {"x": x, "p": exponent, "g": draw(upstream(shape))}


@check(task="02.9", points=2, inputs=_pow_scalar_case(), **GRAD_TOL,
       describe=lambda case: f"(x ** {case['p']!r}).backward(g), x of shape {case['x'].shape}: x.grad")
def pow_gradient_with_a_python_scalar_exponent(tt, case):
    return _gradients(tt, lambda x: x ** case["p"], [case["x"]], case["g"])[0]


@pow_gradient_with_a_python_scalar_exponent.expected
def _(case):
    return central_difference(lambda x: x ** case["p"], [case["x"]], case["g"])[0]


def _pow(a, b):
    return a ** b


@check(task="02.9", points=2, inputs=_broadcast_case(_pow, low=0.5, high=2.0), **GRAD_TOL,
       describe=lambda case: f"(a ** b).backward(g) with a tensor exponent, {_ab(case)}, a > 0: [a.grad, b.grad]")
def pow_gradients_with_a_tensor_exponent(tt, case):
    return _gradients(tt, _pow, [case["a"], case["b"]], case["g"])


@pow_gradients_with_a_tensor_exponent.expected
def _(case):
    return central_difference(_pow, [case["a"], case["b"]], case["g"])


@check(task="02.9", points=1, **GRAD_TOL,
       inputs=shapes(max_dims=2).flatmap(lambda shape: st.fixed_dictionaries({
           "c": st.sampled_from([2.0, 0.5, 3.7]), "x": floats_arrays(shape, -2, 2), "g": upstream(shape)})),
       describe=lambda case: f"({case['c']!r} ** x).backward(g), x of shape {case['x'].shape}: x.grad")
def pow_gradient_with_a_python_scalar_base(tt, case):
    return _gradients(tt, lambda x: case["c"] ** x, [case["x"]], case["g"])[0]


@pow_gradient_with_a_python_scalar_base.expected
def _(case):
    return central_difference(lambda x: case["c"] ** x, [case["x"]], case["g"])[0]


# The op travels in the case, so each check's compute part stands alone (no closures).
UNARY_CALLS = {"neg": "(-x)", "exp": "x.exp()", "log": "x.log()", "sqrt": "x.sqrt()"}
UNARY_NUMPY = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt}


def _unary_tensor_fn(op):
    return {"neg": lambda x: -x, "exp": lambda x: x.exp(), "log": lambda x: x.log(),
            "sqrt": lambda x: x.sqrt()}[op]


def _unary_case(op, low, high):
    return shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
        "x": floats_arrays(shape, low, high), "g": upstream(shape), "op": st.just(op)}))


def _unary_words(case):
    return f"{UNARY_CALLS[case['op']]}.backward(g), x of shape {case['x'].shape}: x.grad"


def _unary_gradient(tt, case):
    return _gradients(tt, _unary_tensor_fn(case["op"]), [case["x"]], case["g"])[0]


def _unary_expected(case):
    return central_difference(UNARY_NUMPY[case["op"]], [case["x"]], case["g"])[0]


@check(task="02.9", points=1, **GRAD_TOL, inputs=_unary_case("neg", -3, 3), describe=_unary_words)
def neg_gradient(tt, case):
    return _unary_gradient(tt, case)


@check(task="02.9", points=1, **GRAD_TOL, inputs=_unary_case("exp", -3, 3), describe=_unary_words)
def exp_gradient(tt, case):
    return _unary_gradient(tt, case)


@check(task="02.9", points=1, **GRAD_TOL, inputs=_unary_case("log", 0.2, 5), describe=_unary_words)
def log_gradient(tt, case):
    return _unary_gradient(tt, case)


@check(task="02.9", points=1, **GRAD_TOL, inputs=_unary_case("sqrt", 0.2, 5), describe=_unary_words)
def sqrt_gradient(tt, case):
    return _unary_gradient(tt, case)


for _unary in (neg_gradient, exp_gradient, log_gradient, sqrt_gradient):
    _unary.expected(_unary_expected)


# ---------------------------------------------------------------------------------------------------
# 02.10 MatMul


def _matmul(a, b):
    return a @ b


def _matmul_case(shape_pairs):
    return shape_pairs.flatmap(lambda pair: _case(_matmul, floats_arrays(pair[0]), floats_arrays(pair[1])))


_side = st.integers(1, 4)
_matrix_pairs = st.tuples(_side, _side, _side).map(lambda mkn: ((mkn[0], mkn[1]), (mkn[1], mkn[2])))
_batched_pairs = st.tuples(
    hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=2, max_side=3), _side, _side, _side).map(
    lambda t: (t[0].input_shapes[0] + (t[1], t[2]), t[0].input_shapes[1] + (t[2], t[3])))
_vector_pairs = st.tuples(st.sampled_from(["vector @ matrix", "matrix @ vector", "vector @ vector",
                                           "vector @ batch", "batch @ vector"]), _side, _side, _side).map(
    lambda t: {"vector @ matrix": ((t[1],), (t[1], t[2])), "matrix @ vector": ((t[2], t[1]), (t[1],)),
               "vector @ vector": ((t[1],), (t[1],)), "vector @ batch": ((t[1],), (t[3], t[1], t[2])),
               "batch @ vector": ((t[3], t[2], t[1]), (t[1],))}[t[0]])


@check(task="02.10", points=2, inputs=_matmul_case(_matrix_pairs), **GRAD_TOL,
       describe=lambda case: f"(a @ b).backward(g) with {_ab(case)}: [a.grad, b.grad]")
def matmul_gradients_of_matrices(tt, case):
    return _gradients(tt, _matmul, [case["a"], case["b"]], case["g"])


@matmul_gradients_of_matrices.expected
def _(case):
    return central_difference(_matmul, [case["a"], case["b"]], case["g"])


@check(task="02.10", points=2, inputs=_matmul_case(_batched_pairs), examples=20, **GRAD_TOL,
       describe=lambda case: f"(a @ b).backward(g), batched with broadcast batch axes, {_ab(case)}: [a.grad, b.grad]")
def matmul_gradients_batched_with_broadcast_batch_axes(tt, case):
    return _gradients(tt, _matmul, [case["a"], case["b"]], case["g"])


@matmul_gradients_batched_with_broadcast_batch_axes.expected
def _(case):
    return central_difference(_matmul, [case["a"], case["b"]], case["g"])


@check(task="02.10", points=2, inputs=_matmul_case(_vector_pairs), **GRAD_TOL,
       describe=lambda case: f"(a @ b).backward(g) with a 1-d operand, {_ab(case)}: [a.grad, b.grad]")
def matmul_gradients_with_1d_operands(tt, case):
    return _gradients(tt, _matmul, [case["a"], case["b"]], case["g"])


@matmul_gradients_with_1d_operands.expected
def _(case):
    return central_difference(_matmul, [case["a"], case["b"]], case["g"])


# ---------------------------------------------------------------------------------------------------
# 02.11 Sum, Mean   02.12 Max


@st.composite
def _axis(draw, ndim):
    """None, an int (maybe negative) or a tuple of distinct axes (maybe negative)."""
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    axes = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(axis - ndim if draw(st.booleans()) else axis for axis in axes)


@st.composite
def _reduction_case(draw, reduce, values=None):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    axis, keepdims = draw(_axis(len(shape))), draw(st.booleans())
    x = draw(values(shape) if values else floats_arrays(shape))
    out_shape = np.shape(reduce(x, axis=axis, keepdims=keepdims))
    return {"x": x, "axis": axis, "keepdims": keepdims, "g": draw(upstream(out_shape))}


REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max}


def _reduction_inputs(method, values=None):
    return _reduction_case(REDUCTIONS[method], values).map(lambda case: {**case, "method": method})


def _reduction_words(case):
    return (f"x.{case['method']}(axis={case['axis']!r}, keepdims={case['keepdims']}).backward(g), "
            f"x of shape {case['x'].shape}: x.grad")


def _reduction_gradient(tt, case):
    return _gradients(tt, lambda x: getattr(x, case["method"])(axis=case["axis"], keepdims=case["keepdims"]),
                      [case["x"]], case["g"])[0]


def _reduction_expected(case):
    reduce = REDUCTIONS[case["method"]]
    return central_difference(lambda x: reduce(x, axis=case["axis"], keepdims=case["keepdims"]),
                              [case["x"]], case["g"])[0]


@check(task="02.11", points=2, inputs=_reduction_inputs("sum"), **GRAD_TOL, describe=_reduction_words)
def sum_gradient_with_axis_and_keepdims(tt, case):
    return _reduction_gradient(tt, case)


@check(task="02.11", points=2, inputs=_reduction_inputs("mean"), **GRAD_TOL, describe=_reduction_words)
def mean_gradient_with_axis_and_keepdims(tt, case):
    return _reduction_gradient(tt, case)


def _distinct(shape):
    """Distinct values at least 0.37 apart, so a nudge of 1e-6 never changes which one is the maximum."""
    size = int(np.prod(shape))
    return st.permutations(range(size)).map(lambda order: (np.array(order, dtype=np.float64) * 0.37 - 1.5)
                                            .reshape(shape))


@check(task="02.12", points=2, inputs=_reduction_inputs("max", _distinct), **GRAD_TOL,
       describe=_reduction_words)
def max_gradient_with_distinct_values(tt, case):
    return _reduction_gradient(tt, case)


for _reduction in (sum_gradient_with_axis_and_keepdims, mean_gradient_with_axis_and_keepdims,
                   max_gradient_with_distinct_values):
    _reduction.expected(_reduction_expected)


@check(task="02.12", points=2, inputs=_reduction_case(np.max, lambda shape: floats_arrays(shape, 0, 2).map(np.round)),
       **GRAD_TOL,
       describe=lambda case: f"x.max(axis={case['axis']!r}, keepdims={case['keepdims']}).backward(g) with tied "
                             f"maxima, x = {case['x'].tolist()}: x.grad (ties share the gradient evenly)")
def max_gradient_splits_evenly_among_ties(tt, case):
    return _gradients(tt, lambda x: x.max(axis=case["axis"], keepdims=case["keepdims"]), [case["x"]], case["g"])[0]


@max_gradient_splits_evenly_among_ties.expected
def _(case):
    x, axis, g = case["x"], case["axis"], case["g"]
    is_max = x == x.max(axis=axis, keepdims=True)
    ties = is_max.sum(axis=axis, keepdims=True)
    if not case["keepdims"] and axis is not None:
        g = np.expand_dims(g, axis)
    return np.where(is_max, g / ties, 0.0)


# ---------------------------------------------------------------------------------------------------
# 02.13 Reshape, Permute


@st.composite
def _reshape_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=3))
    size = int(np.prod(shape))
    rows = draw(st.sampled_from([d for d in range(1, size + 1) if size % d == 0]))
    target = list(draw(st.sampled_from([(rows, size // rows), (size,), (1, rows, size // rows), (size // rows, 1, rows)])))
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return {"x": draw(floats_arrays(shape)), "shape": tuple(target),
            "g": draw(upstream(np.empty(shape).reshape(target).shape))}


@check(task="02.13", points=1, inputs=_reshape_case(), **GRAD_TOL,
       describe=lambda case: f"x.reshape({case['shape']}).backward(g), x of shape {case['x'].shape}: x.grad")
def reshape_gradient(tt, case):
    return _gradients(tt, lambda x: x.reshape(*case["shape"]), [case["x"]], case["g"])[0]


@reshape_gradient.expected
def _(case):
    return central_difference(lambda x: x.reshape(case["shape"]), [case["x"]], case["g"])[0]


def _not_self_inverse(dims):
    return list(np.argsort(dims)) != list(dims)


@st.composite
def _permute_case(draw):
    kind = draw(st.sampled_from(["permute", "permute", "transpose", "T"]))
    if kind == "permute":   # (1, 2, 0) and its inverse (2, 0, 1) differ: a swap would not tell them apart
        shape = draw(shapes(min_dims=3, max_dims=4, min_side=2, max_side=4))
        ndim = len(shape)
        dims = draw(st.permutations(range(ndim)).filter(_not_self_inverse))
        args = tuple(d - ndim if draw(st.booleans()) else d for d in dims)
    else:
        shape = draw(shapes(min_dims=1, max_dims=4, max_side=4))
        ndim = len(shape)
        args = (draw(st.integers(-ndim, ndim - 1)), draw(st.integers(-ndim, ndim - 1))) if kind == "transpose" else ()
    x = draw(floats_arrays(shape))
    return {"x": x, "kind": kind, "args": args, "g": draw(upstream(_permuted(x, kind, args).shape))}


def _permuted(x, kind, args):
    if kind == "permute":
        return np.transpose(x, args)
    if kind == "transpose":
        return np.swapaxes(x, *args)
    return x.T


def _permute_call(case):
    return {"permute": f"x.permute{case['args']}", "transpose": f"x.transpose{case['args']}", "T": "x.T"}[case["kind"]]


@check(task="02.13", points=2, inputs=_permute_case(), **GRAD_TOL,
       describe=lambda case: f"{_permute_call(case)}.backward(g), x of shape {case['x'].shape}: x.grad")
def permute_transpose_and_T_gradients(tt, case):
    def call(x):
        if case["kind"] == "permute":
            return x.permute(*case["args"])
        if case["kind"] == "transpose":
            return x.transpose(*case["args"])
        return x.T
    return _gradients(tt, call, [case["x"]], case["g"])[0]


@permute_transpose_and_T_gradients.expected
def _(case):
    return central_difference(lambda x: _permuted(x, case["kind"], case["args"]), [case["x"]], case["g"])[0]


# ---------------------------------------------------------------------------------------------------
# 02.14 GetItem
# Indices travel as plain data: ("slice", start, stop, step), ("int", i), ("none",), ("ellipsis",),
# ("array", [i, ...]).


def _encode(part):
    if isinstance(part, slice):
        return ("slice", part.start, part.stop, part.step)
    if part is None:
        return ("none",)
    if part is Ellipsis:
        return ("ellipsis",)
    if isinstance(part, np.ndarray):
        return ("array", part.tolist())
    return ("int", int(part))


def _decode(spec):
    def one(part):
        kind = part[0]
        if kind == "slice":
            return slice(*part[1:])
        if kind == "none":
            return None
        if kind == "ellipsis":
            return Ellipsis
        if kind == "array":
            return np.array(part[1], dtype=np.int64)
        return part[1]
    return tuple(one(part) for part in spec)


def _index_text(spec):
    def one(part):
        kind = part[0]
        if kind == "slice":
            start, stop, step = ("" if value is None else value for value in part[1:])
            return f"{start}:{stop}" + ("" if step == "" else f":{step}")
        if kind == "none":
            return "None"
        if kind == "ellipsis":
            return "..."
        return str(part[1])
    return ", ".join(one(part) for part in spec)


@st.composite
def _basic_index_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=5))
    index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    spec = tuple(_encode(part) for part in (index if isinstance(index, tuple) else (index,)))
    x = draw(floats_arrays(shape))
    return {"x": x, "index": spec, "g": draw(upstream(x[_decode(spec)].shape))}


@st.composite
def _integer_index_case(draw):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    axis = draw(st.integers(0, len(shape) - 1))
    rows = draw(st.lists(st.integers(-shape[axis], shape[axis] - 1), min_size=1, max_size=8))
    if len(rows) > 1 and draw(st.booleans()):
        rows[1] = rows[0]                                   # make sure an index repeats
    array = np.array(rows).reshape(draw(st.sampled_from([(len(rows),), (1, len(rows))])))
    spec = tuple([("slice", None, None, None)] * axis + [("array", array.tolist())])
    x = draw(floats_arrays(shape))
    return {"x": x, "index": spec, "g": draw(upstream(x[_decode(spec)].shape))}


def _getitem_words(case):
    return f"x[{_index_text(case['index'])}].backward(g) ({case['what']}), x of shape {case['x'].shape}: x.grad"


def _getitem_gradient(tt, case):
    return _gradients(tt, lambda x: x[_decode(case["index"])], [case["x"]], case["g"])[0]


def _getitem_expected(case):
    return central_difference(lambda x: x[_decode(case["index"])], [case["x"]], case["g"])[0]


@check(task="02.14", points=2, **GRAD_TOL, describe=_getitem_words,
       inputs=_basic_index_case().map(lambda case: {**case, "what": "ints, slices, None, ..."}))
def getitem_gradient_with_basic_indices(tt, case):
    return _getitem_gradient(tt, case)


@check(task="02.14", points=2, **GRAD_TOL, describe=_getitem_words,
       inputs=_integer_index_case().map(lambda case: {**case, "what": "an integer array with repeats"}))
def getitem_gradient_with_repeated_integer_indices(tt, case):
    return _getitem_gradient(tt, case)


getitem_gradient_with_basic_indices.expected(_getitem_expected)
getitem_gradient_with_repeated_integer_indices.expected(_getitem_expected)
