"""Hidden suite of 05_losses: every loss's values against an independent float64 numpy computation and its
input gradient against float64 central differences on every element, for every reduction; stability at
logits of magnitude 1e4; label smoothing and pos_weight; the errors for bad targets, shapes and
reductions; the loss modules.

Every `expected` uses numpy and `checklib.central_difference` only; every `compute` returns plain data.
Value and gradient checks run the package in float64 (float64 inputs stay float64), so tolerances are tight.
"""

import importlib
import warnings

import numpy as np
from hypothesis import strategies as st

from checklib import CheckFailed, capture_error, central_difference, check, floats_arrays, shapes, upstream

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
REDUCTIONS = ("mean", "sum", "none")
FUNCTIONS = ("mse_loss", "nll_loss", "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits")
MODULES = {"mse_loss": "MSELoss", "nll_loss": "NLLLoss", "cross_entropy": "CrossEntropyLoss",
           "binary_cross_entropy": "BCELoss", "binary_cross_entropy_with_logits": "BCEWithLogitsLoss"}


# ---------------------------------------------------------------------------------------------------
# Strategies (trusted side)






def _upstreams(none_shape):
    """One upstream gradient per reduction: scalars for 'mean' and 'sum', none_shape for 'none'."""
    return st.fixed_dictionaries({"mean": upstream(()), "sum": upstream(()), "none": upstream(none_shape)})


def _elementwise_case(name, x_low, x_high, y_low, y_high, max_dims=3):
    return shapes(min_dims=0, max_dims=max_dims, max_side=4).flatmap(lambda shape: st.fixed_dictionaries({
        "name": st.just(name), "x": floats_arrays(shape, x_low, x_high), "y": floats_arrays(shape, y_low, y_high),
        "g": _upstreams(shape)}))


@st.composite
def _class_case(draw, name, low=-5.0, high=5.0, smoothing=False, batched=True):
    num_classes = draw(st.integers(2, 5))
    if batched:
        rows = draw(st.integers(1, 5))
        x_shape, t = (rows, num_classes), np.array(draw(st.lists(st.integers(0, num_classes - 1), min_size=rows,
                                                                  max_size=rows)), dtype=np.int64)
    else:
        x_shape, t = (num_classes,), np.array(draw(st.integers(0, num_classes - 1)), dtype=np.int64)
    case = {"name": name, "x": draw(floats_arrays(x_shape, low, high)), "t": t, "g": draw(_upstreams(t.shape))}
    if smoothing:
        case["label_smoothing"] = draw(st.sampled_from([0.05, 0.1, 0.25, 0.5, 0.9, 1.0]))
    return case


def _bce_case():
    return _elementwise_case("binary_cross_entropy", 0.02, 0.98, 0.0, 1.0)


def _logits_case(low=-6.0, high=6.0, pos_weight=False):
    def build(shape):
        parts = {"name": st.just("binary_cross_entropy_with_logits"), "x": floats_arrays(shape, low, high),
                 "y": floats_arrays(shape, 0.0, 1.0), "g": _upstreams(shape)}
        if pos_weight:
            weight_shapes = [()] + ([shape[-1:]] if shape else [])
            parts["pos_weight"] = st.sampled_from(weight_shapes).flatmap(lambda s: floats_arrays(s, 0.2, 5.0))
        return st.fixed_dictionaries(parts)
    return shapes(min_dims=0 if not pos_weight else 1, max_dims=3, max_side=4).flatmap(build)


# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _functional(tt):
    return tt.nn.functional


def _losses_module(tt):
    """The exported module (for names outside the namespaces: _reduce)."""
    return importlib.import_module(tt.__name__ + ".core.losses")


def _options(case):
    """Keyword options of the loss named in the case, beyond `reduction`."""
    options = {}
    if "label_smoothing" in case:
        options["label_smoothing"] = case["label_smoothing"]
    if "pos_weight" in case:
        options["pos_weight"] = case["pos_weight"]
    return options


def _target(case):
    return case["t"] if case["name"] in ("nll_loss", "cross_entropy") else case["y"]


def _call(tt, case, x, reduction):
    """The functional loss named in the case, on the Tensor x."""
    return getattr(_functional(tt), case["name"])(x, _target(case), reduction=reduction, **_options(case))


_FUNCTION_OF = {"cross_entropy": "_CrossEntropy", "binary_cross_entropy": "_BinaryCrossEntropy",
                "binary_cross_entropy_with_logits": "_BCEWithLogits"}


def _applied(tt, case, x, reduction):
    """The Function of the loss named in the case (05.5/05.6, 05.8, 05.10) applied to the Tensor x and reduced
    by _reduce (05.1): for the valid arguments of these checks, what the loss's wrapper (05.7, 05.9, 05.11)
    computes, without needing the wrapper."""
    losses = _losses_module(tt)
    function = getattr(losses, _FUNCTION_OF[case["name"]])
    return losses._reduce(function.apply(x, _target(case), **_options(case)), reduction)


def _values_per_reduction(tt, case, loss=_call):
    return {reduction: loss(tt, case, tt.Tensor(case["x"]), reduction).numpy() for reduction in REDUCTIONS}


def _gradients_per_reduction(tt, case, loss=_call):
    grads = {}
    for reduction in REDUCTIONS:
        x = tt.Tensor(case["x"], requires_grad=True)
        loss(tt, case, x, reduction).backward(tt.Tensor(case["g"][reduction]))
        grads[reduction] = None if x.grad is None else x.grad.numpy()
    return grads


def _quietly(fn):
    """fn() and the number of warnings (overflow, divide by zero, invalid value) it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, len(caught)


# ---------------------------------------------------------------------------------------------------
# Reference losses in float64 numpy (trusted side)


def _np_reduce(losses, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": np.asarray}[reduction](losses)


def _np_log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def _np_log_softmax(z):
    return z - np.logaddexp.reduce(z, axis=-1, keepdims=True)


def _np_losses(case, x):
    """Per-element (per-example) losses of the loss named in the case, at input x, from the definitions."""
    name = case["name"]
    if name == "mse_loss":
        return (x - case["y"]) ** 2
    if name == "binary_cross_entropy":
        y = case["y"]
        with np.errstate(divide="ignore"):
            return -(y * np.maximum(np.log(x), -100) + (1 - y) * np.maximum(np.log(1 - x), -100))
    if name == "binary_cross_entropy_with_logits":
        y, weight = case["y"], case.get("pos_weight", 1.0)
        return -(weight * y * _np_log_sigmoid(x) + (1 - y) * _np_log_sigmoid(-x))
    t = case["t"]
    log_probs = x if name == "nll_loss" else _np_log_softmax(x)
    eps = case.get("label_smoothing", 0.0)
    q = (1 - eps) * (np.arange(x.shape[-1]) == t[..., None]) + eps / x.shape[-1]   # the target distribution
    return -(q * log_probs).sum(axis=-1)


def _np_loss(case, x, reduction):
    return _np_reduce(_np_losses(case, x), reduction)


def _expected_values(case):
    return {reduction: _np_loss(case, case["x"], reduction) for reduction in REDUCTIONS}


def _expected_gradients(case):
    return {reduction: central_difference(lambda x: _np_loss(case, x, reduction), [case["x"]],
                                          case["g"][reduction])[0] for reduction in REDUCTIONS}


def _expect_error(what, output, error_type, words=()):
    """Judge a capture_error result: error_type raised, its message containing every word."""
    raised, message = output["raised"], output["message"]
    if raised != error_type:
        said = "raised nothing" if raised is None else f"raised {raised} ({message})"
        raise CheckFailed(f"{what}: expected {error_type} but it {said}",
                          f"{what}: the expected error was not raised")
    missing = [word for word in words if word not in message]
    if missing:
        raise CheckFailed(f"{what}: the {error_type} message {message!r} does not name {' and '.join(missing)}",
                          f"{what}: the {error_type} message does not say enough")


def _loss_words(case):
    extra = "".join(f", {key}={value!r}" if not isinstance(value, np.ndarray) else f", {key} of shape {value.shape}"
                    for key, value in _options(case).items())
    target = f"target {case['t'].tolist()}" if "t" in case else f"target of shape {case['y'].shape}"
    return f"{case['name']}(input of shape {case['x'].shape}, {target}{extra})"


def _values_words(case):
    return f"{_loss_words(case)} for reduction 'mean', 'sum', 'none'"


def _gradients_words(case):
    return f"input.grad of {_loss_words(case)}.backward(g) for reduction 'mean', 'sum', 'none'"


def _applied_words(words):
    """The description of a check that runs the loss's Function directly (_applied)."""
    return lambda case: f"{words(case)}, computed as _reduce({_FUNCTION_OF[case['name']]}.apply(...), reduction)"


# ---------------------------------------------------------------------------------------------------
# 05.1 reduction


@check(task="05.1", points=1, inputs=shapes(min_dims=1, max_dims=3).flatmap(lambda shape: floats_arrays(shape)).map(
           lambda losses: {"losses": losses}),
       describe=lambda case: f"_reduce(losses of shape {case['losses'].shape}, reduction) for 'mean', 'sum', 'none'")
def reduce_applies_mean_sum_and_none(tt, case):
    reduce = _losses_module(tt)._reduce
    return {reduction: reduce(tt.Tensor(case["losses"]), reduction).numpy() for reduction in REDUCTIONS}


@reduce_applies_mean_sum_and_none.expected
def _(case):
    return {reduction: _np_reduce(case["losses"], reduction) for reduction in REDUCTIONS}


def _small_inputs():
    """Valid small arguments for every functional loss."""
    return {"mse_loss": (np.zeros((2, 3)), np.ones((2, 3))),
            "nll_loss": (-np.ones((2, 3)), np.array([0, 2])),
            "cross_entropy": (np.zeros((2, 3)), np.array([0, 2])),
            "binary_cross_entropy": (np.full((2, 3), 0.5), np.ones((2, 3))),
            "binary_cross_entropy_with_logits": (np.zeros((2, 3)), np.ones((2, 3)))}


@check(task="05.11", points=2, examples=5,
       inputs=st.fixed_dictionaries({"reduction": st.sampled_from(["avg", "elementwise_mean", "MEAN", "batchmean", "",
                                                                   None])}),
       describe=lambda case: f"every functional loss with reduction={case['reduction']!r}")
def a_bad_reduction_raises_value_error_naming_the_allowed_values(tt, case):
    functional = _functional(tt)
    return {name: capture_error(lambda: getattr(functional, name)(
        tt.Tensor(x), target, reduction=case["reduction"])) for name, (x, target) in _small_inputs().items()}


@a_bad_reduction_raises_value_error_naming_the_allowed_values.verdict
def _(case, output):
    for name in FUNCTIONS:
        _expect_error(f"{name}(..., reduction={case['reduction']!r})", output[name], "ValueError",
                      ["'mean'", "'sum'", "'none'"])


# ---------------------------------------------------------------------------------------------------
# 05.2 mse_loss


@check(task="05.2", points=2, inputs=_elementwise_case("mse_loss", -3, 3, -3, 3), describe=_values_words)
def mse_loss_values_for_every_reduction(tt, case):
    return _values_per_reduction(tt, case)


@check(task="05.2", points=2, inputs=_elementwise_case("mse_loss", -3, 3, -3, 3), **GRAD_TOL,
       describe=_gradients_words)
def mse_loss_gradients_for_every_reduction(tt, case):
    return _gradients_per_reduction(tt, case)


@check(task="05.2", points=1, inputs=_elementwise_case("mse_loss", -3, 3, -3, 3, max_dims=2), **GRAD_TOL,
       describe=lambda case: f"mse_loss(x, y) with both x and y requiring grad, shape {case['x'].shape}: "
                             f"[x.grad, y.grad]")
def mse_loss_gradient_reaches_a_target_that_requires_grad(tt, case):
    x = tt.Tensor(case["x"], requires_grad=True)
    y = tt.Tensor(case["y"], requires_grad=True)
    _functional(tt).mse_loss(x, y).backward()
    return [None if x.grad is None else x.grad.numpy(), None if y.grad is None else y.grad.numpy()]


@mse_loss_gradient_reaches_a_target_that_requires_grad.expected
def _(case):
    return central_difference(lambda x, y: np.mean((x - y) ** 2), [case["x"], case["y"]], np.array(1.0))


@check(task="05.2", points=1, dtype=True, inputs=_elementwise_case("mse_loss", -3, 3, -3, 3, max_dims=2),
       describe=lambda case: f"mse_loss of a float32 input of shape {case['x'].shape} against a float64 numpy "
                             f"target, a Python list target and a float32 Tensor target (values, float32)")
def mse_loss_keeps_float32_and_accepts_arrays_and_lists(tt, case):
    x = tt.Tensor(case["x"].astype(np.float32))
    mse_loss = _functional(tt).mse_loss
    return [mse_loss(x, case["y"]).numpy(), mse_loss(x, case["y"].tolist()).numpy(),
            mse_loss(x, tt.Tensor(case["y"].astype(np.float32))).numpy()]


@mse_loss_keeps_float32_and_accepts_arrays_and_lists.expected
def _(case):
    value = np.float32(np.mean((case["x"].astype(np.float32) - case["y"].astype(np.float32)) ** 2))
    return [np.asarray(value)] * 3


_MISMATCHED = [((4, 1), (4,)), ((3,), (4,)), ((2, 3), (3, 2)), ((2, 3), (1, 3)), ((), (1,))]


@check(task="05.2", points=1, examples=5, inputs=st.fixed_dictionaries({"shapes": st.sampled_from(_MISMATCHED)}),
       describe=lambda case: f"mse_loss(input of shape {case['shapes'][0]}, target of shape {case['shapes'][1]})")
def mse_loss_rejects_a_target_of_another_shape(tt, case):
    input_shape, target_shape = case["shapes"]
    return capture_error(lambda: _functional(tt).mse_loss(tt.Tensor(np.zeros(input_shape)), np.zeros(target_shape)))


@mse_loss_rejects_a_target_of_another_shape.verdict
def _(case, output):
    input_shape, target_shape = case["shapes"]
    _expect_error(f"mse_loss(input of shape {input_shape}, target of shape {target_shape})", output, "ValueError",
                  [str(input_shape), str(target_shape)])


# ---------------------------------------------------------------------------------------------------
# 05.3 class-index targets


@st.composite
def _out_of_range_case(draw):
    num_classes = draw(st.integers(2, 6))
    rows = draw(st.integers(1, 5))
    t = draw(st.lists(st.integers(0, num_classes - 1), min_size=rows, max_size=rows))
    bad = draw(st.sampled_from([num_classes, num_classes + 1, num_classes + 7, -1, -3]))
    t[draw(st.integers(0, rows - 1))] = bad
    return {"x": draw(floats_arrays((rows, num_classes))), "t": np.array(t, dtype=np.int64), "bad": bad}


@check(task="05.7", points=2, inputs=_out_of_range_case(),
       describe=lambda case: f"cross_entropy and nll_loss of input of shape {case['x'].shape} with target "
                             f"{case['t'].tolist()}")
def out_of_range_targets_raise_index_error_naming_target_and_class_count(tt, case):
    functional = _functional(tt)
    return {name: capture_error(lambda: getattr(functional, name)(tt.Tensor(case["x"]), case["t"]))
            for name in ("cross_entropy", "nll_loss")}


@out_of_range_targets_raise_index_error_naming_target_and_class_count.verdict
def _(case, output):
    num_classes = case["x"].shape[1]
    for name in ("cross_entropy", "nll_loss"):
        _expect_error(f"{name}(input of shape {case['x'].shape}, target {case['t'].tolist()})", output[name],
                      "IndexError", [f"Target {case['bad']}", f"{num_classes} classes"])


@check(task="05.3", points=1, inputs=_class_case("cross_entropy"),
       describe=lambda case: f"_class_targets (the target check of cross_entropy and nll_loss) for an input of shape "
                             f"{case['x'].shape} with the float targets {case['t'].astype(float).tolist()} (a float64 "
                             f"array and a float32 Tensor)")
def float_targets_raise_type_error(tt, case):
    class_targets, shape = _losses_module(tt)._class_targets, case["x"].shape
    return {f"_class_targets {kind}": capture_error(lambda: class_targets(target, shape))
            for kind, target in [("array", case["t"].astype(np.float64)),
                                 ("Tensor", tt.Tensor(case["t"].astype(np.float32)))]}


@float_targets_raise_type_error.verdict
def _(case, output):
    for key, result in output.items():
        name, kind = key.split()
        _expect_error(f"{name}(input of shape {case['x'].shape}, float {kind} target)", result, "TypeError")


_COUNT_MISMATCHED = [((4, 3), (3,)), ((2, 5), (5,)), ((3, 4), (3, 4)), ((3, 4), (1, 3)), ((1, 2), ()), ((3,), (3,))]


@check(task="05.7", points=1, examples=6, inputs=st.fixed_dictionaries({"shapes": st.sampled_from(_COUNT_MISMATCHED)}),
       describe=lambda case: f"cross_entropy and nll_loss of input of shape {case['shapes'][0]} with a target of "
                             f"shape {case['shapes'][1]}")
def a_target_of_the_wrong_shape_raises_value_error_naming_both_shapes(tt, case):
    input_shape, target_shape = case["shapes"]
    functional = _functional(tt)
    return {name: capture_error(lambda: getattr(functional, name)(tt.Tensor(np.zeros(input_shape)),
                                                                  np.zeros(target_shape, dtype=np.int64)))
            for name in ("cross_entropy", "nll_loss")}


@a_target_of_the_wrong_shape_raises_value_error_naming_both_shapes.verdict
def _(case, output):
    input_shape, target_shape = case["shapes"]
    for name in ("cross_entropy", "nll_loss"):
        _expect_error(f"{name}(input of shape {input_shape}, target of shape {target_shape})", output[name],
                      "ValueError", [str(input_shape), str(target_shape)])


@check(task="05.7", points=1, inputs=_class_case("cross_entropy"),
       describe=lambda case: f"cross_entropy(input of shape {case['x'].shape}, target {case['t'].tolist()}) with "
                             f"the target as a list, an int32 array, a uint8 array and an int64 Tensor")
def targets_as_lists_integer_arrays_and_tensors_agree(tt, case):
    cross_entropy, x, t = _functional(tt).cross_entropy, tt.Tensor(case["x"]), case["t"]
    return [cross_entropy(x, target).numpy() for target in
            (t.tolist(), t.astype(np.int32), t.astype(np.uint8), tt.Tensor(t))]


@targets_as_lists_integer_arrays_and_tensors_agree.expected
def _(case):
    return [_np_loss(case, case["x"], "mean")] * 4


# ---------------------------------------------------------------------------------------------------
# 05.4 nll_loss


@check(task="05.4", points=2, inputs=_class_case("nll_loss", -4.0, 1.0), describe=_values_words)
def nll_loss_values_for_every_reduction(tt, case):
    return _values_per_reduction(tt, case)


@check(task="05.4", points=2, inputs=_class_case("nll_loss", -4.0, 1.0), **GRAD_TOL, describe=_gradients_words)
def nll_loss_gradients_for_every_reduction(tt, case):
    return _gradients_per_reduction(tt, case)


@check(task="05.4", points=1, inputs=_class_case("nll_loss", -4.0, 1.0, batched=False), **GRAD_TOL,
       describe=lambda case: f"nll_loss of an unbatched input of shape {case['x'].shape} with the 0-d target "
                             f"{int(case['t'])}: {{reduction: [value, input.grad]}}")
def nll_loss_of_an_unbatched_row_with_a_0d_target(tt, case):
    return {reduction: [_values_per_reduction(tt, case)[reduction], _gradients_per_reduction(tt, case)[reduction]]
            for reduction in REDUCTIONS}


def _unbatched_expected(case):
    values, grads = _expected_values(case), _expected_gradients(case)
    return {reduction: [values[reduction], grads[reduction]] for reduction in REDUCTIONS}


nll_loss_of_an_unbatched_row_with_a_0d_target.expected(_unbatched_expected)


# ---------------------------------------------------------------------------------------------------
# 05.5 _CrossEntropy.forward


@check(task="05.5", points=2, inputs=_class_case("cross_entropy"), describe=_applied_words(_values_words))
def cross_entropy_values_for_every_reduction(tt, case):
    return _values_per_reduction(tt, case, _applied)


@check(task="05.5", points=2, inputs=_class_case("cross_entropy", smoothing=True),
       describe=_applied_words(_values_words))
def cross_entropy_values_with_label_smoothing(tt, case):
    return _values_per_reduction(tt, case, _applied)


@check(task="05.5", points=2, inputs=_class_case("cross_entropy", -1e4, 1e4),
       describe=lambda case: f"_CrossEntropy.apply (the losses of cross_entropy(reduction='none')) of logits up to "
                             f"1e4 in magnitude (input of shape {case['x'].shape}, target {case['t'].tolist()}) and, "
                             f"in float32, of [[1e4, 0, -1e4]] twice with targets [0, 2]: [losses, losses of the "
                             f"float32 rows, warnings raised]")
def cross_entropy_is_exact_for_logits_of_magnitude_1e4(tt, case):
    cross_entropy = _losses_module(tt)._CrossEntropy.apply
    big = tt.Tensor(np.array([[1e4, 0.0, -1e4], [1e4, 0.0, -1e4]], dtype=np.float32))
    (random, rows), count = _quietly(lambda: (cross_entropy(tt.Tensor(case["x"]), case["t"]).numpy(),
                                              cross_entropy(big, np.array([0, 2])).numpy()))
    return [random, rows, count]


@cross_entropy_is_exact_for_logits_of_magnitude_1e4.expected
def _(case):
    return [_np_losses(case, case["x"]), np.array([0.0, 2e4], dtype=np.float32), 0]


@check(task="05.5", points=1, dtype=True, inputs=_class_case("cross_entropy", smoothing=True),
       describe=lambda case: f"_CrossEntropy.apply (cross_entropy with reduction 'none') of float32 logits of shape "
                             f"{case['x'].shape}, target {case['t'].tolist()}, label_smoothing 0 and "
                             f"{case['label_smoothing']}")
def cross_entropy_keeps_float32(tt, case):
    x = tt.Tensor(case["x"].astype(np.float32))
    cross_entropy = _losses_module(tt)._CrossEntropy.apply
    return [cross_entropy(x, case["t"]).numpy(),
            cross_entropy(x, case["t"], label_smoothing=case["label_smoothing"]).numpy()]


@cross_entropy_keeps_float32.expected
def _(case):
    x = case["x"].astype(np.float32).astype(np.float64)
    plain = {**case, "label_smoothing": 0.0}
    return [_np_losses(plain, x).astype(np.float32), _np_losses(case, x).astype(np.float32)]


# ---------------------------------------------------------------------------------------------------
# 05.6 _CrossEntropy.backward


@check(task="05.6", points=3, inputs=_class_case("cross_entropy"), **GRAD_TOL,
       describe=_applied_words(_gradients_words))
def cross_entropy_gradients_for_every_reduction(tt, case):
    return _gradients_per_reduction(tt, case, _applied)


@check(task="05.6", points=2, inputs=_class_case("cross_entropy", smoothing=True), **GRAD_TOL,
       describe=_applied_words(_gradients_words))
def cross_entropy_gradients_with_label_smoothing(tt, case):
    return _gradients_per_reduction(tt, case, _applied)


for _gradient_check in (mse_loss_gradients_for_every_reduction, nll_loss_gradients_for_every_reduction,
                        cross_entropy_gradients_for_every_reduction, cross_entropy_gradients_with_label_smoothing):
    _gradient_check.expected(_expected_gradients)
for _value_check in (mse_loss_values_for_every_reduction, nll_loss_values_for_every_reduction,
                     cross_entropy_values_for_every_reduction, cross_entropy_values_with_label_smoothing):
    _value_check.expected(_expected_values)


@check(task="05.6", points=2, inputs=_class_case("cross_entropy", -1e4, 1e4, smoothing=True), **GRAD_TOL,
       describe=lambda case: f"input.grad of _CrossEntropy.apply(...).backward(g) (cross_entropy with reduction "
                             f"'none') at logits up to 1e4 in magnitude (shape {case['x'].shape}, target "
                             f"{case['t'].tolist()}), without and with label_smoothing {case['label_smoothing']}, "
                             f"and in float32 for [[1e4, 0, -1e4]] twice with targets [0, 2] and g = 1: [grad, "
                             f"smoothed grad, float32 grad, warnings raised]")
def cross_entropy_gradients_are_exact_for_logits_of_magnitude_1e4(tt, case):
    cross_entropy = _losses_module(tt)._CrossEntropy.apply

    def run():
        grads = []
        for smoothing in (0.0, case["label_smoothing"]):
            x = tt.Tensor(case["x"], requires_grad=True)
            cross_entropy(x, case["t"], label_smoothing=smoothing).backward(tt.Tensor(case["g"]["none"]))
            grads.append(x.grad.numpy())
        big = tt.Tensor(np.array([[1e4, 0.0, -1e4], [1e4, 0.0, -1e4]], dtype=np.float32), requires_grad=True)
        cross_entropy(big, np.array([0, 2])).backward(tt.Tensor(np.ones(2, dtype=np.float32)))
        return grads + [big.grad.numpy()]
    grads, count = _quietly(run)
    return grads + [count]


@cross_entropy_gradients_are_exact_for_logits_of_magnitude_1e4.expected
def _(case):
    x, t, g = case["x"], case["t"], case["g"]["none"]
    probs = np.exp(_np_log_softmax(x))           # (softmax - q) * g: the exact gradient, no finite differences
    onehot = (np.arange(x.shape[-1]) == t[..., None]).astype(np.float64)
    grads = [(probs - ((1 - eps) * onehot + eps / x.shape[-1])) * g[..., None] for eps in (0.0, case["label_smoothing"])]
    return grads + [np.array([[0.0, 0.0, 0.0], [1.0, 0.0, -1.0]], dtype=np.float32), 0]


@check(task="05.6", points=1, dtype=True, inputs=_class_case("cross_entropy", smoothing=True), rtol=1e-4, atol=1e-5,
       describe=lambda case: f"input.grad of _reduce(_CrossEntropy.apply(..., label_smoothing="
                             f"{case['label_smoothing']}), 'mean').backward() (cross_entropy with its defaults) for "
                             f"float32 logits of shape {case['x'].shape}, target {case['t'].tolist()}")
def cross_entropy_gradient_is_float32_for_float32_logits(tt, case):
    x = tt.Tensor(case["x"].astype(np.float32), requires_grad=True)
    losses = _losses_module(tt)
    losses._reduce(losses._CrossEntropy.apply(x, case["t"], label_smoothing=case["label_smoothing"]), "mean").backward()
    return x.grad.numpy()


@cross_entropy_gradient_is_float32_for_float32_logits.expected
def _(case):
    x, t, eps = case["x"].astype(np.float32).astype(np.float64), case["t"], case["label_smoothing"]
    onehot = (np.arange(x.shape[-1]) == t[..., None]).astype(np.float64)
    q = (1 - eps) * onehot + eps / x.shape[-1]
    return ((np.exp(_np_log_softmax(x)) - q) / len(t)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# 05.7 cross_entropy


@check(task="05.7", points=1, inputs=_class_case("cross_entropy", batched=False, smoothing=True), **GRAD_TOL,
       describe=lambda case: f"cross_entropy of unbatched logits of shape {case['x'].shape} with the 0-d target "
                             f"{int(case['t'])}, label_smoothing {case['label_smoothing']}: "
                             f"{{reduction: [value, input.grad]}}")
def cross_entropy_of_an_unbatched_row_with_a_0d_target(tt, case):
    return {reduction: [_values_per_reduction(tt, case)[reduction], _gradients_per_reduction(tt, case)[reduction]]
            for reduction in REDUCTIONS}


cross_entropy_of_an_unbatched_row_with_a_0d_target.expected(_unbatched_expected)


@check(task="05.7", points=1, examples=5, inputs=st.fixed_dictionaries({"label_smoothing": st.sampled_from(
           [-0.1, 1.5, 2.0, -1.0])}),
       describe=lambda case: f"cross_entropy(..., label_smoothing={case['label_smoothing']})")
def label_smoothing_outside_0_to_1_raises_value_error(tt, case):
    return capture_error(lambda: _functional(tt).cross_entropy(
        tt.Tensor(np.zeros((2, 3))), np.array([0, 1]), label_smoothing=case["label_smoothing"]))


@label_smoothing_outside_0_to_1_raises_value_error.verdict
def _(case, output):
    _expect_error(f"cross_entropy(..., label_smoothing={case['label_smoothing']})", output, "ValueError")


@check(task="05.7", points=1, inputs=_class_case("cross_entropy"),
       describe=lambda case: f"cross_entropy(logits of shape {case['x'].shape} as a nested list, target "
                             f"{case['t'].tolist()} as a list)")
def cross_entropy_accepts_nested_lists(tt, case):
    return _functional(tt).cross_entropy(case["x"].tolist(), case["t"].tolist()).numpy()


@cross_entropy_accepts_nested_lists.expected
def _(case):
    return _np_loss(case, case["x"].astype(np.float32).astype(np.float64), "mean").astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# 05.8 _BinaryCrossEntropy


@check(task="05.8", points=2, inputs=_bce_case(), describe=_applied_words(_values_words))
def binary_cross_entropy_values_for_every_reduction(tt, case):
    return _values_per_reduction(tt, case, _applied)


@check(task="05.8", points=2, inputs=_bce_case(), **GRAD_TOL, describe=_applied_words(_gradients_words))
def binary_cross_entropy_gradients_for_every_reduction(tt, case):
    return _gradients_per_reduction(tt, case, _applied)


binary_cross_entropy_values_for_every_reduction.expected(_expected_values)
binary_cross_entropy_gradients_for_every_reduction.expected(_expected_gradients)


@st.composite
def _saturated_case(draw):
    size = draw(st.integers(1, 8))
    p = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 0.0, 1.0, 0.5, 1e-30]), min_size=size, max_size=size)),
                 dtype=np.float32)
    y = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 0.3]), min_size=size, max_size=size)), dtype=np.float32)
    return {"p": p, "y": y}


@check(task="05.8", points=2, inputs=_saturated_case(), rtol=1e-5, atol=1e-4,
       describe=lambda case: f"_BinaryCrossEntropy.apply (binary_cross_entropy with reduction 'none') of the float32 "
                             f"probabilities {case['p'].tolist()} against {case['y'].tolist()}, backward with g = 1: "
                             f"[losses (each log clamped at -100), input.grad ((p - y) / max(p(1 - p), 1e-12)), "
                             f"warnings raised]")
def binary_cross_entropy_clamps_its_logs_at_minus_100(tt, case):
    def run():
        p = tt.Tensor(case["p"], requires_grad=True)
        losses = _losses_module(tt)._BinaryCrossEntropy.apply(p, case["y"])
        losses.backward(tt.Tensor(np.ones_like(case["p"])))
        return [losses.numpy(), p.grad.numpy()]
    result, count = _quietly(run)
    return result + [count]


@binary_cross_entropy_clamps_its_logs_at_minus_100.expected
def _(case):
    p, y = case["p"].astype(np.float64), case["y"].astype(np.float64)
    with np.errstate(divide="ignore"):
        losses = -(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log1p(-p), -100))
    grad = (p - y) / np.maximum(p * (1 - p), 1e-12)              # PyTorch's backward
    return [losses.astype(np.float32), grad.astype(np.float32), 0]


# ---------------------------------------------------------------------------------------------------
# 05.9 binary_cross_entropy


@check(task="05.9", points=1, examples=5, inputs=st.fixed_dictionaries({"shapes": st.sampled_from(_MISMATCHED)}),
       describe=lambda case: f"binary_cross_entropy(input of shape {case['shapes'][0]}, target of shape "
                             f"{case['shapes'][1]})")
def binary_cross_entropy_rejects_a_target_of_another_shape(tt, case):
    input_shape, target_shape = case["shapes"]
    return capture_error(lambda: _functional(tt).binary_cross_entropy(
        tt.Tensor(np.full(input_shape, 0.5)), np.zeros(target_shape)))


@binary_cross_entropy_rejects_a_target_of_another_shape.verdict
def _(case, output):
    input_shape, target_shape = case["shapes"]
    _expect_error(f"binary_cross_entropy(input of shape {input_shape}, target of shape {target_shape})", output,
                  "ValueError", [str(input_shape), str(target_shape)])


@check(task="05.9", points=1, examples=5,
       inputs=st.fixed_dictionaries({"bad": st.sampled_from([1.5, -0.25, 3.0, -2.0, 1.0001])}),
       describe=lambda case: f"binary_cross_entropy of the input [0.5, {case['bad']}] (not a probability)")
def binary_cross_entropy_rejects_inputs_outside_0_to_1(tt, case):
    return capture_error(lambda: _functional(tt).binary_cross_entropy(
        tt.Tensor(np.array([0.5, case["bad"]])), np.array([1.0, 0.0])))


@binary_cross_entropy_rejects_inputs_outside_0_to_1.verdict
def _(case, output):
    _expect_error(f"binary_cross_entropy of the input [0.5, {case['bad']}]", output, "ValueError")


@check(task="05.9", points=1, dtype=True, rtol=1e-5, inputs=_bce_case(),
       describe=lambda case: f"binary_cross_entropy of float32 probabilities of shape {case['x'].shape} against a "
                             f"float64 numpy target, a Python list target and a float32 Tensor target")
def binary_cross_entropy_keeps_float32_and_accepts_arrays_and_lists(tt, case):
    p = tt.Tensor(case["x"].astype(np.float32))
    bce, y = _functional(tt).binary_cross_entropy, case["y"]
    return [bce(p, y).numpy(), bce(p, y.tolist()).numpy(), bce(p, tt.Tensor(y.astype(np.float32))).numpy()]


@binary_cross_entropy_keeps_float32_and_accepts_arrays_and_lists.expected
def _(case):
    x, y = case["x"].astype(np.float32).astype(np.float64), case["y"].astype(np.float32).astype(np.float64)
    return [np.asarray(np.float32(_np_loss({**case, "y": y}, x, "mean")))] * 3


# ---------------------------------------------------------------------------------------------------
# 05.10 _BCEWithLogits


@check(task="05.10", points=2, inputs=_logits_case(), describe=_applied_words(_values_words))
def bce_with_logits_values_for_every_reduction(tt, case):
    return _values_per_reduction(tt, case, _applied)


@check(task="05.10", points=2, inputs=_logits_case(), **GRAD_TOL, describe=_applied_words(_gradients_words))
def bce_with_logits_gradients_for_every_reduction(tt, case):
    return _gradients_per_reduction(tt, case, _applied)


@check(task="05.10", points=2, inputs=_logits_case(pos_weight=True), **GRAD_TOL,
       describe=lambda case: f"binary_cross_entropy_with_logits(input of shape {case['x'].shape}, pos_weight of "
                             f"shape {case['pos_weight'].shape}): [values, input.grad] for reduction 'mean', "
                             f"'sum', 'none', computed as _reduce(_BCEWithLogits.apply(...), reduction)")
def bce_with_logits_values_and_gradients_with_pos_weight(tt, case):
    return [_values_per_reduction(tt, case, _applied), _gradients_per_reduction(tt, case, _applied)]


@bce_with_logits_values_and_gradients_with_pos_weight.expected
def _(case):
    return [_expected_values(case), _expected_gradients(case)]


bce_with_logits_values_for_every_reduction.expected(_expected_values)
bce_with_logits_gradients_for_every_reduction.expected(_expected_gradients)


@check(task="05.10", points=2, inputs=_logits_case(-1e4, 1e4, pos_weight=True), **GRAD_TOL,
       describe=lambda case: f"_BCEWithLogits.apply (binary_cross_entropy_with_logits with reduction 'none'), "
                             f"pos_weight of shape {case['pos_weight'].shape}, at logits up to 1e4 in magnitude, shape "
                             f"{case['x'].shape}, "
                             f"and in float32 for [1e4, -1e4, 1e4, -1e4] against [1, 0, 0, 1]: "
                             f"[losses, input.grad, float32 losses, float32 input.grad, warnings raised]")
def bce_with_logits_is_exact_for_logits_of_magnitude_1e4(tt, case):
    bce = _losses_module(tt)._BCEWithLogits.apply

    def run():
        x = tt.Tensor(case["x"], requires_grad=True)
        losses = bce(x, case["y"], pos_weight=case["pos_weight"])
        losses.backward(tt.Tensor(case["g"]["none"]))
        big = tt.Tensor(np.array([1e4, -1e4, 1e4, -1e4], dtype=np.float32), requires_grad=True)
        big_losses = bce(big, np.array([1.0, 0.0, 0.0, 1.0], dtype=np.float32))
        big_losses.backward(tt.Tensor(np.ones(4, dtype=np.float32)))
        return [losses.numpy(), x.grad.numpy(), big_losses.numpy(), big.grad.numpy()]
    result, count = _quietly(run)
    return result + [count]


@bce_with_logits_is_exact_for_logits_of_magnitude_1e4.expected
def _(case):
    x, y, w, g = case["x"], case["y"], case["pos_weight"], case["g"]["none"]
    sigmoid = np.exp(_np_log_sigmoid(x))
    grad = ((1 + (w - 1) * y) * sigmoid - w * y) * g            # the exact gradient, no finite differences
    return [_np_losses(case, x), grad, np.array([0.0, 0.0, 1e4, 1e4], dtype=np.float32),
            np.array([0.0, 0.0, 1.0, -1.0], dtype=np.float32), 0]


# ---------------------------------------------------------------------------------------------------
# 05.11 binary_cross_entropy_with_logits


@check(task="05.11", points=1, examples=5, inputs=st.fixed_dictionaries({"shapes": st.sampled_from(_MISMATCHED)}),
       describe=lambda case: f"binary_cross_entropy_with_logits(input of shape {case['shapes'][0]}, target of shape "
                             f"{case['shapes'][1]})")
def bce_with_logits_rejects_a_target_of_another_shape(tt, case):
    input_shape, target_shape = case["shapes"]
    return capture_error(lambda: _functional(tt).binary_cross_entropy_with_logits(
        tt.Tensor(np.zeros(input_shape)), np.zeros(target_shape)))


@bce_with_logits_rejects_a_target_of_another_shape.verdict
def _(case, output):
    input_shape, target_shape = case["shapes"]
    _expect_error(f"binary_cross_entropy_with_logits(input of shape {input_shape}, target of shape {target_shape})",
                  output, "ValueError", [str(input_shape), str(target_shape)])


_BAD_POS_WEIGHTS = [((4, 3), (4,)), ((4, 3), (2,)), ((3,), (2, 3)), ((2, 3), (3, 1)), ((5,), (4,))]


@check(task="05.11", points=1, examples=5, inputs=st.fixed_dictionaries({"shapes": st.sampled_from(_BAD_POS_WEIGHTS)}),
       describe=lambda case: f"binary_cross_entropy_with_logits(input of shape {case['shapes'][0]}, pos_weight of "
                             f"shape {case['shapes'][1]})")
def bce_with_logits_rejects_a_pos_weight_that_does_not_broadcast(tt, case):
    input_shape, weight_shape = case["shapes"]
    return capture_error(lambda: _functional(tt).binary_cross_entropy_with_logits(
        tt.Tensor(np.zeros(input_shape)), np.ones(input_shape), pos_weight=np.ones(weight_shape)))


@bce_with_logits_rejects_a_pos_weight_that_does_not_broadcast.verdict
def _(case, output):
    input_shape, weight_shape = case["shapes"]
    _expect_error(f"binary_cross_entropy_with_logits(input of shape {input_shape}, pos_weight of shape "
                  f"{weight_shape})", output, "ValueError", [str(input_shape), str(weight_shape)])


@check(task="05.11", points=1, dtype=True, rtol=1e-5, inputs=_logits_case(pos_weight=True),
       describe=lambda case: f"binary_cross_entropy_with_logits of float32 logits of shape {case['x'].shape} with "
                             f"pos_weight of shape {case['pos_weight'].shape} given as a float64 array, a list and a "
                             f"Tensor, and the target as a float64 array, a list and a Tensor")
def bce_with_logits_keeps_float32_and_accepts_arrays_lists_and_tensors(tt, case):
    x = tt.Tensor(case["x"].astype(np.float32))
    bce, y, w = _functional(tt).binary_cross_entropy_with_logits, case["y"], case["pos_weight"]
    return [bce(x, y, pos_weight=w).numpy(), bce(x, y.tolist(), pos_weight=w.tolist()).numpy(),
            bce(x, tt.Tensor(y.astype(np.float32)), pos_weight=tt.Tensor(w.astype(np.float32))).numpy()]


@bce_with_logits_keeps_float32_and_accepts_arrays_lists_and_tensors.expected
def _(case):
    as32 = {key: case[key].astype(np.float32).astype(np.float64) for key in ("x", "y", "pos_weight")}
    return [np.asarray(np.float32(_np_loss({**case, **as32}, as32["x"], "mean")))] * 3


# ---------------------------------------------------------------------------------------------------
# 05.12 loss modules


def _module_cases():
    """One fixed case per loss (seeded), with non-default options: the modules' wiring, not the numerics
    (the functional checks above cover those), so no shrinking is needed."""
    rng = np.random.default_rng(5)
    t = np.array([2, 0, 3], dtype=np.int64)
    upstreams = {"mean": np.array(0.7), "sum": np.array(-1.3), "none": None}
    cases = {"mse_loss": {"x": rng.normal(size=(3, 4)), "y": rng.normal(size=(3, 4))},
             "nll_loss": {"x": -rng.uniform(0.1, 3, size=(3, 4)), "t": t},
             "cross_entropy": {"x": rng.normal(size=(3, 4)) * 2, "t": t, "label_smoothing": 0.1},
             "binary_cross_entropy": {"x": rng.uniform(0.05, 0.95, size=(3, 4)), "y": rng.uniform(size=(3, 4))},
             "binary_cross_entropy_with_logits": {"x": rng.normal(size=(3, 4)) * 3, "y": rng.uniform(size=(3, 4)),
                                                  "pos_weight": rng.uniform(0.5, 3, size=4)}}
    for name, case in cases.items():
        none_shape = (3,) if "t" in case else (3, 4)
        case.update(name=name, g={**upstreams, "none": rng.uniform(0.5, 1.5, size=none_shape)})
    return cases


@check(task="05.12", points=2, inputs=st.builds(_module_cases), examples=1, **GRAD_TOL,
       describe=lambda case: "{loss: {reduction: [value, input.grad]}} of MSELoss, NLLLoss, "
                             "CrossEntropyLoss(label_smoothing=0.1), BCELoss and BCEWithLogitsLoss(pos_weight of "
                             "shape (4,)) for inputs of shape (3, 4), each reduction")
def loss_modules_compute_their_functions(tt, case):
    results = {}
    for name, c in case.items():
        results[MODULES[name]] = {}
        for reduction in REDUCTIONS:
            module = getattr(tt.nn, MODULES[name])(reduction=reduction, **_options(c))
            x = tt.Tensor(c["x"], requires_grad=True)
            loss = module(x, _target(c))
            loss.backward(tt.Tensor(c["g"][reduction]))
            results[MODULES[name]][reduction] = [loss.numpy(), None if x.grad is None else x.grad.numpy()]
    return results


@loss_modules_compute_their_functions.expected
def _(case):
    expected = {}
    for name, c in case.items():
        values, grads = _expected_values(c), _expected_gradients(c)
        expected[MODULES[name]] = {reduction: [values[reduction], grads[reduction]] for reduction in REDUCTIONS}
    return expected


@check(task="05.12", points=1,
       describe=lambda case: "repr of MSELoss(reduction='sum'), NLLLoss(), CrossEntropyLoss(), "
                             "CrossEntropyLoss(label_smoothing=0.1), BCELoss(reduction='none'), BCEWithLogitsLoss(), "
                             "BCEWithLogitsLoss(pos_weight=[2.0])")
def loss_modules_print_like_pytorch(tt, case):
    nn = tt.nn
    return [repr(nn.MSELoss(reduction="sum")), repr(nn.NLLLoss()), repr(nn.CrossEntropyLoss()),
            repr(nn.CrossEntropyLoss(label_smoothing=0.1)), repr(nn.BCELoss(reduction="none")),
            repr(nn.BCEWithLogitsLoss()), repr(nn.BCEWithLogitsLoss(pos_weight=np.array([2.0])))]


@loss_modules_print_like_pytorch.expected
def _(case):
    return ["MSELoss()", "NLLLoss()", "CrossEntropyLoss()", "CrossEntropyLoss()", "BCELoss()",
            "BCEWithLogitsLoss()", "BCEWithLogitsLoss()"]


@check(task="05.12", points=1,
       describe=lambda case: "the loss modules built with their defaults and with reduction='sum', "
                             "label_smoothing=0.2, pos_weight=[3.0]: [is a Module, number of parameters, options]")
def loss_modules_are_modules_that_store_their_options(tt, case):
    nn = tt.nn
    found = {}
    for name, cls in MODULES.items():
        default, custom = getattr(nn, cls)(), getattr(nn, cls)(reduction="sum")
        found[cls] = [isinstance(default, nn.Module), len(list(default.parameters())), default.reduction,
                      custom.reduction]
    ce = nn.CrossEntropyLoss(label_smoothing=0.2)
    bce = nn.BCEWithLogitsLoss(pos_weight=np.array([3.0]))
    pos_weight = bce.pos_weight.numpy() if hasattr(bce.pos_weight, "numpy") else np.asarray(bce.pos_weight)
    found["options"] = [float(nn.CrossEntropyLoss().label_smoothing), float(ce.label_smoothing),
                        nn.BCEWithLogitsLoss().pos_weight is None, pos_weight.tolist()]
    return found


@loss_modules_are_modules_that_store_their_options.expected
def _(case):
    expected = {cls: [True, 0, "mean", "sum"] for cls in MODULES.values()}
    expected["options"] = [0.0, 0.2, True, [3.0]]
    return expected


@check(task="05.12", points=1, examples=5,
       inputs=st.fixed_dictionaries({"reduction": st.sampled_from(["avg", "elementwise_mean", "SUM", None])}),
       describe=lambda case: f"every loss module built with reduction={case['reduction']!r} and called "
                             f"(the error may come from either)")
def loss_modules_reject_a_bad_reduction(tt, case):
    nn = tt.nn
    return {name: capture_error(lambda: getattr(nn, MODULES[name])(reduction=case["reduction"])(tt.Tensor(x), target))
            for name, (x, target) in _small_inputs().items()}


@loss_modules_reject_a_bad_reduction.verdict
def _(case, output):
    for name in FUNCTIONS:
        _expect_error(f"{MODULES[name]}(reduction={case['reduction']!r})(input, target)", output[name], "ValueError")
