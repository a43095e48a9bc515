"""Hidden suite of 05_losses: every loss's values against an independent float64 numpy computation and its
input gradient against float64 central differences on every element, for every reduction; stability at
logits of magnitude 1e4; label smoothing and pos_weight; the errors for bad targets, shapes and
reductions; the loss modules.

The checks shared by several losses are families over a table of losses (`values[mse_loss]`,
`gradients[cross_entropy]`, ...), each variant worth the points of its own task. A loss whose wrapper
is a later task than its Function is run as `_reduce(<its Function>.apply(...), reduction)` (the case
says `"via": "Function"`). Every `expected` uses numpy and `checklib.central_difference` only; value and
gradient checks run the package in float64, so tolerances are tight.
"""

import warnings

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    capture_error,
    central_difference,
    check,
    floats_arrays,
    leaf_gradients,
    module,
    shapes,
    upstream,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
REDUCTIONS = ("mean", "sum", "none")
FUNCTIONS = ("mse_loss", "nll_loss", "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits")
MODULES = {"mse_loss": "MSELoss", "nll_loss": "NLLLoss", "cross_entropy": "CrossEntropyLoss",
           "binary_cross_entropy": "BCELoss", "binary_cross_entropy_with_logits": "BCEWithLogitsLoss"}
FUNCTION_OF = {"cross_entropy": "_CrossEntropy", "binary_cross_entropy": "_BinaryCrossEntropy",
               "binary_cross_entropy_with_logits": "_BCEWithLogits"}

# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _functional(tt):
    return tt.nn.functional


def _options(case):
    """Keyword options of the loss named in the case, beyond `reduction`."""
    return {key: case[key] for key in ("label_smoothing", "pos_weight") if key in case}


def _target(case):
    return case["t"] if "t" in case else case["y"]


def _loss(tt, case, x, reduction):
    """The loss named in the case on the Tensor x: the functional, or (via "Function") the loss's Function
    reduced by _reduce (05.1), what the wrapper (a later task) computes for the valid arguments of a case."""
    if case.get("via") == "Function":
        losses = module(tt, "losses")
        return losses._reduce(getattr(losses, FUNCTION_OF[case["name"]]).apply(x, _target(case), **_options(case)),
                              reduction)
    return getattr(_functional(tt), case["name"])(x, _target(case), reduction=reduction, **_options(case))


def _values(tt, case):
    return {reduction: _loss(tt, case, tt.Tensor(case["x"]), reduction).numpy() for reduction in REDUCTIONS}


def _gradients(tt, case):
    return {reduction: leaf_gradients(tt, lambda x: _loss(tt, case, x, reduction), [case["x"]], case["g"][reduction])[0]
            for reduction in REDUCTIONS}


def _quietly(fn):
    """fn() with numpy's warnings (overflow, divide by zero, invalid value) recorded: (result, their messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, "; ".join(sorted({str(warning.message) for warning in caught}))


def _small_inputs():
    """Valid small arguments for every functional loss."""
    return {"mse_loss": (np.zeros((2, 3)), np.ones((2, 3))),
            "nll_loss": (-np.ones((2, 3)), np.array([0, 2])),
            "cross_entropy": (np.zeros((2, 3)), np.array([0, 2])),
            "binary_cross_entropy": (np.full((2, 3), 0.5), np.ones((2, 3))),
            "binary_cross_entropy_with_logits": (np.zeros((2, 3)), np.ones((2, 3)))}


# ---------------------------------------------------------------------------------------------------
# Strategies (trusted side)


def _upstreams(none_shape):
    """One upstream gradient per reduction: scalars for 'mean' and 'sum', none_shape for 'none'."""
    return st.fixed_dictionaries({"mean": upstream(()), "sum": upstream(()), "none": upstream(none_shape)})


def _elementwise_case(name, x_low, x_high, via="functional", max_dims=3, pos_weight=False):
    """Input and target in [0, 1] (mse: in [-3, 3]) of one shape; pos_weight of shape () or (last axis,)."""
    def build(shape):
        y_low, y_high = (-3.0, 3.0) if name == "mse_loss" else (0.0, 1.0)
        parts = {"name": st.just(name), "via": st.just(via), "x": floats_arrays(shape, x_low, x_high),
                 "y": floats_arrays(shape, y_low, y_high), "g": _upstreams(shape)}
        if pos_weight:
            parts["pos_weight"] = st.sampled_from([(), shape[-1:]]).flatmap(lambda s: floats_arrays(s, 0.2, 5.0))
        return st.fixed_dictionaries(parts)
    return shapes(min_dims=int(pos_weight), max_dims=max_dims, max_side=4).flatmap(build)


@st.composite
def _class_case(draw, name, low=-5.0, high=5.0, via="functional", smoothing=False, batched=True):
    num_classes = draw(st.integers(2, 5))
    if batched:
        rows = draw(st.integers(1, 5))
        x_shape = (rows, num_classes)
        t = np.array(draw(st.lists(st.integers(0, num_classes - 1), min_size=rows, max_size=rows)), dtype=np.int64)
    else:
        x_shape, t = (num_classes,), np.array(draw(st.integers(0, num_classes - 1)), dtype=np.int64)
    case = {"name": name, "via": via, "x": draw(floats_arrays(x_shape, low, high)), "t": t,
            "g": draw(_upstreams(t.shape))}
    if smoothing:
        case["label_smoothing"] = draw(st.sampled_from([0.05, 0.1, 0.25, 0.5, 0.9, 1.0]))
    return case


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
        raise CheckFailed(f"{what}: expected {error_type} but it {said}", f"{what}: the expected error was not raised")
    missing = [word for word in words if word not in message]
    if missing:
        raise CheckFailed(f"{what}: the {error_type} message {message!r} does not name {' and '.join(missing)}",
                          f"{what}: the {error_type} message does not say enough")


def _loss_words(case):
    """The call of a case in words: name(input of shape .., target .., options) or _reduce(_Function.apply(..))."""
    extra = "".join(f", {key}={value!r}" if not isinstance(value, np.ndarray) else f", {key} of shape {value.shape}"
                    for key, value in _options(case).items())
    target = f"target {case['t'].tolist()}" if "t" in case else f"target of shape {case['y'].shape}"
    arguments = f"input of shape {case['x'].shape}, {target}{extra}"
    if case.get("via") == "Function":
        return f"_reduce({FUNCTION_OF[case['name']]}.apply({arguments}), reduction)"
    return f"{case['name']}({arguments}, reduction=reduction)"




# ---------------------------------------------------------------------------------------------------
# Families: one check per loss (or kind of argument), each worth the points of its task in the table

CASES = {"mse_loss": _elementwise_case("mse_loss", -3, 3), "nll_loss": _class_case("nll_loss", -4.0, 1.0),
         "cross_entropy": _class_case("cross_entropy", via="Function"),
         "cross_entropy_smoothed": _class_case("cross_entropy", via="Function", smoothing=True),
         "binary_cross_entropy": _elementwise_case("binary_cross_entropy", 0.02, 0.98, via="Function"),
         "bce_with_logits": _elementwise_case("binary_cross_entropy_with_logits", -6, 6, via="Function"),
         "bce_with_logits_pos_weight": _elementwise_case("binary_cross_entropy_with_logits", -6, 6, via="Function",
                                                         pos_weight=True)}
VALUES = {"mse_loss": ("05.2", 2), "nll_loss": ("05.4", 2), "cross_entropy": ("05.5", 2),
          "cross_entropy_smoothed": ("05.5", 2), "binary_cross_entropy": ("05.8", 2),
          "bce_with_logits": ("05.10", 2), "bce_with_logits_pos_weight": ("05.10", 1)}
GRADIENTS = {"mse_loss": ("05.2", 2), "nll_loss": ("05.4", 2), "cross_entropy": ("05.6", 3),
             "cross_entropy_smoothed": ("05.6", 2), "binary_cross_entropy": ("05.8", 2),
             "bce_with_logits": ("05.10", 2), "bce_with_logits_pos_weight": ("05.10", 1)}


@check(variants={v: (*VALUES[v], CASES[v]) for v in VALUES},
       describe=lambda case: f"{_loss_words(case)} for each reduction")
def values(tt, case):
    return _values(tt, case)


@check(**GRAD_TOL, variants={v: (*GRADIENTS[v], CASES[v]) for v in GRADIENTS},
       describe=lambda case: f"input.grad of {_loss_words(case)}.backward(g) for each reduction")
def gradients(tt, case):
    return _gradients(tt, case)


values.expected(_expected_values)
gradients.expected(_expected_gradients)

UNBATCHED = {"nll_loss": ("05.4", 1, _class_case("nll_loss", -4.0, 1.0, batched=False)),
             "cross_entropy": ("05.7", 1, _class_case("cross_entropy", batched=False, smoothing=True))}


@check(**GRAD_TOL, variants=UNBATCHED,
       describe=lambda case: f"{_loss_words(case)} and its input.grad after backward(g), for an unbatched input and "
                             f"a 0-d target, for each reduction")
def unbatched_row_with_a_0d_target(tt, case):
    found, grads = _values(tt, case), _gradients(tt, case)
    return {reduction: {"value": found[reduction], "input.grad": grads[reduction]} for reduction in REDUCTIONS}


@unbatched_row_with_a_0d_target.expected
def _(case):
    found, grads = _expected_values(case), _expected_gradients(case)
    return {reduction: {"value": found[reduction], "input.grad": grads[reduction]} for reduction in REDUCTIONS}


# the forms a target (and pos_weight) may take: a class target is made from int64 class indices
FORMS = {"float": {"float64 array": lambda tt, a: a, "list": lambda tt, a: a.tolist(),
                   "float32 Tensor": lambda tt, a: tt.Tensor(a.astype(np.float32))},
         "class": {"list": lambda tt, t: t.tolist(), "int32 array": lambda tt, t: t.astype(np.int32),
                   "uint8 array": lambda tt, t: t.astype(np.uint8), "int64 Tensor": lambda tt, t: tt.Tensor(t)}}
TARGET_FORMS = {"mse_loss": ("05.2", 1, _elementwise_case("mse_loss", -3, 3, max_dims=2)),
                "cross_entropy": ("05.7", 1, _class_case("cross_entropy")),
                "binary_cross_entropy": ("05.9", 1, _elementwise_case("binary_cross_entropy", 0.02, 0.98)),
                "bce_with_logits": ("05.11", 1, _elementwise_case("binary_cross_entropy_with_logits", -6, 6,
                                                                  pos_weight=True))}


@check(dtype=True, variants=TARGET_FORMS,
       describe=lambda case: f"{case['name']} of a float32 input of shape {case['x'].shape}, the target (and "
                             f"pos_weight) given in each form")
def keeps_float32_and_accepts_every_form_of_target(tt, case):
    x, loss = tt.Tensor(case["x"].astype(np.float32)), getattr(_functional(tt), case["name"])
    forms = FORMS["class" if "t" in case else "float"]
    return {f"{form} target": loss(x, as_form(tt, _target(case)),
                                   **{key: as_form(tt, value) for key, value in _options(case).items()}).numpy()
            for form, as_form in forms.items()}


@keeps_float32_and_accepts_every_form_of_target.expected
def _(case):
    as32 = {key: case[key].astype(np.float32).astype(np.float64) for key in ("x", "y", "pos_weight") if key in case}
    value = np.asarray(np.float32(_np_loss({**case, **as32}, as32["x"], "mean")))
    return {f"{form} target": value for form in FORMS["class" if "t" in case else "float"]}


_MISMATCHED = [((4, 1), (4,)), ((3,), (4,)), ((2, 3), (3, 2)), ((2, 3), (1, 3)), ((), (1,))]
TARGET_SHAPE = {"mse_loss": ("05.2", 1), "binary_cross_entropy": ("05.9", 1),
                "binary_cross_entropy_with_logits": ("05.11", 1)}


@check(examples=5,
       variants={v: (*TARGET_SHAPE[v], st.fixed_dictionaries({"name": st.just(v), "shapes": st.sampled_from(
           _MISMATCHED)})) for v in TARGET_SHAPE},
       describe=lambda case: f"{case['name']}(input of shape {case['shapes'][0]}, target of shape {case['shapes'][1]})")
def rejects_a_target_of_another_shape(tt, case):
    input_shape, target_shape = case["shapes"]
    return capture_error(lambda: getattr(_functional(tt), case["name"])(tt.Tensor(np.full(input_shape, 0.5)),
                                                                        np.zeros(target_shape)))


@rejects_a_target_of_another_shape.verdict
def _(case, output):
    input_shape, target_shape = case["shapes"]
    _expect_error(f"{case['name']}(input of shape {input_shape}, target of shape {target_shape})", output, "ValueError",
                  [str(input_shape), str(target_shape)])


@st.composite
def _out_of_range_case(draw):
    num_classes, rows = draw(st.integers(2, 6)), draw(st.integers(1, 5))
    t = draw(st.lists(st.integers(0, num_classes - 1), min_size=rows, max_size=rows))
    bad = draw(st.sampled_from([num_classes, num_classes + 1, num_classes + 7, -1, -3]))
    t[draw(st.integers(0, rows - 1))] = bad
    return {"x": draw(floats_arrays((rows, num_classes))), "t": np.array(t, dtype=np.int64), "bad": bad}


_COUNT_MISMATCHED = [((4, 3), (3,)), ((2, 5), (5,)), ((3, 4), (3, 4)), ((3, 4), (1, 3)), ((1, 2), ()), ((3,), (3,))]
# a bad class target: (task, points, cases, the error, the words its message must hold)
BAD_CLASS_TARGETS = {
    "out_of_range": ("05.7", 2, _out_of_range_case(), "IndexError",
                     lambda case: [f"Target {case['bad']}", f"{case['x'].shape[1]} classes"]),
    "of_the_wrong_shape": ("05.7", 1, st.sampled_from(_COUNT_MISMATCHED).map(
        lambda shapes_: {"x": np.zeros(shapes_[0]), "t": np.zeros(shapes_[1], dtype=np.int64)}), "ValueError",
        lambda case: [str(case["x"].shape), str(case["t"].shape)])}


@check(examples=10,
       variants={v: (*row[:2], row[2].map(lambda case, v=v: {**case, "kind": v}))
                 for v, row in BAD_CLASS_TARGETS.items()},
       describe=lambda case: f"cross_entropy and nll_loss of an input of shape {case['x'].shape} with the target "
                             f"{case['t'].tolist()} (shape {case['t'].shape})")
def bad_class_targets_raise_an_error_naming_them(tt, case):
    functional = _functional(tt)
    return {name: capture_error(lambda: getattr(functional, name)(tt.Tensor(case["x"]), case["t"]))
            for name in ("cross_entropy", "nll_loss")}


@bad_class_targets_raise_an_error_naming_them.verdict
def _(case, output):
    _, _, _, error, words = BAD_CLASS_TARGETS[case["kind"]]
    for name in ("cross_entropy", "nll_loss"):
        _expect_error(f"{name}(input of shape {case['x'].shape}, target {case['t'].tolist()})", output[name], error,
                      words(case))


# an argument that must lie in [0, 1]: (task, points, the call in words, values outside, then inside at the bounds)
IN_0_TO_1 = {"label_smoothing": ("05.7", 1, "cross_entropy(zeros((2, 3)), [0, 1], label_smoothing=v)",
                                 [-0.1, 1.5, 2.0, -1.0, 1.001, -0.001, 0.0, 1.0]),
             "probability": ("05.9", 1, "binary_cross_entropy([0.5, v], [1, 0])",
                             [1.5, -0.25, 3.0, -2.0, 1.0001, -1e-4, 0.0, 1.0])}


@check(
       variants={v: (*row[:2], st.just({"argument": v, "values": row[3]})) for v, row in IN_0_TO_1.items()},
       describe=lambda case: f"{IN_0_TO_1[case['argument']][2]}: the error raised, for each v in {case['values']}")
def accepts_only_values_in_0_to_1(tt, case):
    functional = _functional(tt)
    if case["argument"] == "label_smoothing":
        call = lambda v: functional.cross_entropy(tt.Tensor(np.zeros((2, 3))), np.array([0, 1]), label_smoothing=v)
    else:
        call = lambda v: functional.binary_cross_entropy(tt.Tensor(np.array([0.5, v])), np.array([1.0, 0.0]))
    return {f"v={value}": capture_error(lambda: call(value))["raised"] for value in case["values"]}


@accepts_only_values_in_0_to_1.expected
def _(case):
    return {f"v={value}": None if 0 <= value <= 1 else "ValueError" for value in case["values"]}


BAD_REDUCTION = {"functions": ("05.11", 2, ["avg", "elementwise_mean", "MEAN", "batchmean", "", None]),
                 "modules": ("05.12", 1, ["avg", "elementwise_mean", "SUM", None])}


@check(guard=True, examples=5,
       variants={v: (*row[:2], st.sampled_from(row[2]).map(lambda reduction, v=v: {"via": v, "reduction": reduction}))
                 for v, row in BAD_REDUCTION.items()},
       describe=lambda case: f"every loss {'function' if case['via'] == 'functions' else 'module'} with reduction="
                             f"{case['reduction']!r}")
def a_bad_reduction_raises_value_error(tt, case):
    """The error of each loss given a bad reduction: the function, or the module built with it and called."""
    nn, reduction = tt.nn, case["reduction"]
    if case["via"] == "functions":
        call = lambda name, x, t: getattr(nn.functional, name)(tt.Tensor(x), t, reduction=reduction)
    else:
        call = lambda name, x, t: getattr(nn, MODULES[name])(reduction=reduction)(tt.Tensor(x), t)
    return {name: capture_error(lambda: call(name, *arguments)) for name, arguments in _small_inputs().items()}


@a_bad_reduction_raises_value_error.verdict
def _(case, output):
    for name in FUNCTIONS:   # the functions' message names the allowed values; a module's error may come from either
        words = ["'mean'", "'sum'", "'none'"] if case["via"] == "functions" else []
        what = f"{name}(..., reduction={case['reduction']!r})" if case["via"] == "functions" else \
            f"{MODULES[name]}(reduction={case['reduction']!r})(input, target)"
        _expect_error(what, output[name], "ValueError", words)



# ---------------------------------------------------------------------------------------------------
# 05.1 reduction, 05.2 mse_loss, 05.3 class-index targets


@check(task="05.1", points=1, inputs=shapes(min_dims=1, max_dims=3).flatmap(lambda shape: floats_arrays(shape)).map(
           lambda losses: {"losses": losses}),
       describe=lambda case: f"_reduce(losses of shape {case['losses'].shape}, reduction) for each reduction")
def reduce_applies_mean_sum_and_none(tt, case):
    return {reduction: module(tt, "losses")._reduce(tt.Tensor(case["losses"]), reduction).numpy()
            for reduction in REDUCTIONS}


@reduce_applies_mean_sum_and_none.expected
def _(case):
    return {reduction: _np_reduce(case["losses"], reduction) for reduction in REDUCTIONS}


@check(task="05.2", points=1, inputs=_elementwise_case("mse_loss", -3, 3, max_dims=2), **GRAD_TOL,
       describe=lambda case: f"mse_loss(x, y).backward() with both x and y of shape {case['x'].shape} requiring grad")
def mse_loss_gradient_reaches_a_target_that_requires_grad(tt, case):
    grads = leaf_gradients(tt, _functional(tt).mse_loss, [case["x"], case["y"]], np.array(1.0))
    return {"x.grad": grads[0], "y.grad": grads[1]}


@mse_loss_gradient_reaches_a_target_that_requires_grad.expected
def _(case):
    grads = central_difference(lambda x, y: np.mean((x - y) ** 2), [case["x"], case["y"]], np.array(1.0))
    return {"x.grad": grads[0], "y.grad": grads[1]}


@check(task="05.3", points=1, guard=True, inputs=_class_case("cross_entropy"),
       describe=lambda case: f"_class_targets(target, {case['x'].shape}) (the target check of cross_entropy and "
                             f"nll_loss) for the float targets {case['t'].astype(float).tolist()}")
def float_targets_raise_type_error(tt, case):
    class_targets, shape = module(tt, "losses")._class_targets, case["x"].shape
    return {"a float64 array": capture_error(lambda: class_targets(case["t"].astype(np.float64), shape))["raised"],
            "a float32 Tensor": capture_error(lambda: class_targets(tt.Tensor(case["t"].astype(np.float32)), shape))[
                "raised"]}


@float_targets_raise_type_error.expected
def _(case):
    return {"a float64 array": "TypeError", "a float32 Tensor": "TypeError"}


def _target_forms(tt, t):
    """The class indices `t` (int64) in each form a loss accepts."""
    forms = {"an int64 array": t, "a uint8 array": t.astype(np.uint8), "a list": t.tolist(), "a Tensor": tt.Tensor(t)}
    return {**forms, "a Python int": int(t)} if t.ndim == 0 else forms


@check(task="05.3", points=1, dtype=True,
       inputs=st.one_of(_class_case("cross_entropy"), _class_case("cross_entropy", batched=False)),
       describe=lambda case: f"_class_targets(target, {case['x'].shape}) for the class indices {case['t'].tolist()} "
                             f"as an int64 array, a uint8 array, a list, a Tensor (and a Python int): what it returns")
def class_targets_returns_int64_arrays(tt, case):
    """_class_targets returns valid class indices as an int64 numpy array, whatever form they came in."""
    class_targets, shape = module(tt, "losses")._class_targets, case["x"].shape
    return {form: class_targets(target, shape) for form, target in _target_forms(tt, case["t"]).items()}


@class_targets_returns_int64_arrays.expected
def _(case):
    forms = ["an int64 array", "a uint8 array", "a list", "a Tensor"] + (["a Python int"] if case["t"].ndim == 0 else [])
    return {form: case["t"].astype(np.int64) for form in forms}


@check(task="05.7", points=1, inputs=_class_case("cross_entropy"),
       describe=lambda case: f"cross_entropy(logits of shape {case['x'].shape} as a nested list, target "
                             f"{case['t'].tolist()} as a list)")
def cross_entropy_accepts_nested_lists(tt, case):
    return _functional(tt).cross_entropy(case["x"].tolist(), case["t"].tolist()).numpy()


@cross_entropy_accepts_nested_lists.expected
def _(case):
    return _np_loss(case, case["x"].astype(np.float32).astype(np.float64), "mean").astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# 05.5 and 05.6 _CrossEntropy: exactness at logits of 1e4 and float32

_BIG = [[1e4, 0.0, -1e4], [1e4, 0.0, -1e4]]   # in float32, with targets [0, 2]


@check(task="05.5", points=2, inputs=_class_case("cross_entropy", -1e4, 1e4),
       describe=lambda case: f"_CrossEntropy.apply (the losses of cross_entropy(reduction='none')) of logits up to "
                             f"1e4 in magnitude (input of shape {case['x'].shape}, target {case['t'].tolist()}) and "
                             f"of the float32 logits {_BIG} with targets [0, 2]")
def cross_entropy_is_exact_for_logits_of_magnitude_1e4(tt, case):
    cross_entropy = module(tt, "losses")._CrossEntropy.apply
    (drawn, big), warned = _quietly(lambda: (
        cross_entropy(tt.Tensor(case["x"]), case["t"]).numpy(),
        cross_entropy(tt.Tensor(np.array(_BIG, dtype=np.float32)), np.array([0, 2])).numpy()))
    return {"losses": drawn, "float32 losses": big, "numpy warnings": warned}


@cross_entropy_is_exact_for_logits_of_magnitude_1e4.expected
def _(case):
    return {"losses": _np_losses(case, case["x"]), "float32 losses": np.array([0.0, 2e4], dtype=np.float32),
            "numpy warnings": ""}


@check(task="05.5", points=1, dtype=True, inputs=_class_case("cross_entropy", smoothing=True),
       describe=lambda case: f"_CrossEntropy.apply (cross_entropy with reduction 'none') of float32 logits of shape "
                             f"{case['x'].shape}, target {case['t'].tolist()}, without and with label_smoothing="
                             f"{case['label_smoothing']}")
def cross_entropy_keeps_float32(tt, case):
    x, cross_entropy = tt.Tensor(case["x"].astype(np.float32)), module(tt, "losses")._CrossEntropy.apply
    return {"without label_smoothing": cross_entropy(x, case["t"]).numpy(),
            "with label_smoothing": cross_entropy(x, case["t"], label_smoothing=case["label_smoothing"]).numpy()}


@cross_entropy_keeps_float32.expected
def _(case):
    x = case["x"].astype(np.float32).astype(np.float64)
    return {"without label_smoothing": _np_losses({**case, "label_smoothing": 0.0}, x).astype(np.float32),
            "with label_smoothing": _np_losses(case, x).astype(np.float32)}


@check(task="05.6", points=2, inputs=_class_case("cross_entropy", -1e4, 1e4, smoothing=True), **GRAD_TOL,
       describe=lambda case: f"input.grad of _CrossEntropy.apply(...).backward(g) (cross_entropy with reduction "
                             f"'none') at logits up to 1e4 in magnitude (shape {case['x'].shape}, target "
                             f"{case['t'].tolist()}), without and with label_smoothing={case['label_smoothing']}, "
                             f"and for the float32 logits {_BIG} with targets [0, 2] and g = 1")
def cross_entropy_gradients_are_exact_for_logits_of_magnitude_1e4(tt, case):
    cross_entropy = module(tt, "losses")._CrossEntropy.apply

    def run():
        grads = {name: leaf_gradients(tt, lambda x: cross_entropy(x, case["t"], label_smoothing=smoothing),
                                      [case["x"]], case["g"]["none"])[0]
                 for name, smoothing in (("without label_smoothing", 0.0), ("with label_smoothing",
                                                                             case["label_smoothing"]))}
        big = leaf_gradients(tt, lambda x: cross_entropy(x, np.array([0, 2])), [np.array(_BIG, dtype=np.float32)],
                             np.ones(2, dtype=np.float32))[0]
        return {**grads, "float32 grad": big}
    grads, warned = _quietly(run)
    return {**grads, "numpy warnings": warned}


@cross_entropy_gradients_are_exact_for_logits_of_magnitude_1e4.expected
def _(case):
    x, t, g = case["x"], case["t"], case["g"]["none"]
    probs = np.exp(_np_log_softmax(x))           # (softmax - q) * g: the exact gradient, no finite differences
    onehot = (np.arange(x.shape[-1]) == t[..., None]).astype(np.float64)
    grads = {name: (probs - ((1 - eps) * onehot + eps / x.shape[-1])) * g[..., None]
             for name, eps in (("without label_smoothing", 0.0), ("with label_smoothing", case["label_smoothing"]))}
    return {**grads, "float32 grad": np.array([[0.0, 0.0, 0.0], [1.0, 0.0, -1.0]], dtype=np.float32),
            "numpy warnings": ""}


@check(task="05.6", points=1, dtype=True, inputs=_class_case("cross_entropy", smoothing=True), rtol=1e-4, atol=1e-5,
       describe=lambda case: f"input.grad of _reduce(_CrossEntropy.apply(..., label_smoothing="
                             f"{case['label_smoothing']}), 'mean').backward() (cross_entropy with its defaults) for "
                             f"float32 logits of shape {case['x'].shape}, target {case['t'].tolist()}")
def cross_entropy_gradient_is_float32_for_float32_logits(tt, case):
    losses = module(tt, "losses")
    return leaf_gradients(tt, lambda x: losses._reduce(losses._CrossEntropy.apply(
        x, case["t"], label_smoothing=case["label_smoothing"]), "mean"), [case["x"].astype(np.float32)],
        np.array(1.0, dtype=np.float32))[0]


@cross_entropy_gradient_is_float32_for_float32_logits.expected
def _(case):
    x, t, eps = case["x"].astype(np.float32).astype(np.float64), case["t"], case["label_smoothing"]
    q = (1 - eps) * (np.arange(x.shape[-1]) == t[..., None]) + eps / x.shape[-1]
    return ((np.exp(_np_log_softmax(x)) - q) / len(t)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# 05.8 _BinaryCrossEntropy at saturated probabilities


@st.composite
def _saturated_case(draw):
    size = draw(st.integers(1, 8))
    p = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 0.0, 1.0, 0.5, 1e-30]), min_size=size, max_size=size)),
                 dtype=np.float32)
    y = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 0.3]), min_size=size, max_size=size)), dtype=np.float32)
    return {"p": p, "y": y}


@check(task="05.8", points=2, inputs=_saturated_case(), rtol=1e-5, atol=1e-4,
       describe=lambda case: f"_BinaryCrossEntropy.apply (binary_cross_entropy with reduction 'none') of the float32 "
                             f"probabilities {case['p'].tolist()} against {case['y'].tolist()}, backward with g = 1 "
                             f"(each log clamped at -100; p.grad = (p - y) / max(p(1 - p), 1e-12))")
def binary_cross_entropy_clamps_its_logs_at_minus_100(tt, case):
    bce = module(tt, "losses")._BinaryCrossEntropy.apply
    (losses, grad), warned = _quietly(lambda: (
        bce(tt.Tensor(case["p"]), case["y"]).numpy(),
        leaf_gradients(tt, lambda p: bce(p, case["y"]), [case["p"]], np.ones_like(case["p"]))[0]))
    return {"losses": losses, "p.grad": grad, "numpy warnings": warned}


@binary_cross_entropy_clamps_its_logs_at_minus_100.expected
def _(case):
    p, y = case["p"].astype(np.float64), case["y"].astype(np.float64)
    with np.errstate(divide="ignore"):
        losses = -(y * np.maximum(np.log(p), -100) + (1 - y) * np.maximum(np.log1p(-p), -100))
    grad = (p - y) / np.maximum(p * (1 - p), 1e-12)              # PyTorch's backward
    return {"losses": losses.astype(np.float32), "p.grad": grad.astype(np.float32), "numpy warnings": ""}


# ---------------------------------------------------------------------------------------------------
# 05.10 _BCEWithLogits at logits of 1e4, 05.11 its pos_weight


@check(task="05.10", points=2, **GRAD_TOL,
       inputs=_elementwise_case("binary_cross_entropy_with_logits", -1e4, 1e4, pos_weight=True),
       describe=lambda case: f"_BCEWithLogits.apply (binary_cross_entropy_with_logits with reduction 'none'), "
                             f"pos_weight of shape {case['pos_weight'].shape}, and its input.grad after backward(g), "
                             f"at logits up to 1e4 in magnitude, shape {case['x'].shape}, and in float32 for "
                             f"[1e4, -1e4, 1e4, -1e4] against [1, 0, 0, 1] with g = 1")
def bce_with_logits_is_exact_for_logits_of_magnitude_1e4(tt, case):
    bce = module(tt, "losses")._BCEWithLogits.apply
    big, big_y = np.array([1e4, -1e4, 1e4, -1e4], dtype=np.float32), np.array([1.0, 0.0, 0.0, 1.0], dtype=np.float32)

    def run():
        return {"losses": bce(tt.Tensor(case["x"]), case["y"], pos_weight=case["pos_weight"]).numpy(),
                "input.grad": leaf_gradients(tt, lambda x: bce(x, case["y"], pos_weight=case["pos_weight"]),
                                             [case["x"]], case["g"]["none"])[0],
                "float32 losses": bce(tt.Tensor(big), big_y).numpy(),
                "float32 input.grad": leaf_gradients(tt, lambda x: bce(x, big_y), [big], np.ones(4, np.float32))[0]}
    found, warned = _quietly(run)
    return {**found, "numpy warnings": warned}


@bce_with_logits_is_exact_for_logits_of_magnitude_1e4.expected
def _(case):
    x, y, w, g = case["x"], case["y"], case["pos_weight"], case["g"]["none"]
    sigmoid = np.exp(_np_log_sigmoid(x))
    grad = ((1 + (w - 1) * y) * sigmoid - w * y) * g            # the exact gradient, no finite differences
    return {"losses": _np_losses(case, x), "input.grad": grad,
            "float32 losses": np.array([0.0, 0.0, 1e4, 1e4], dtype=np.float32),
            "float32 input.grad": np.array([0.0, 0.0, 1.0, -1.0], dtype=np.float32), "numpy warnings": ""}


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
       describe=lambda case: "the value and input.grad of MSELoss, NLLLoss, CrossEntropyLoss(label_smoothing=0.1), "
                             "BCELoss and BCEWithLogitsLoss(pos_weight of shape (4,)) for inputs of shape (3, 4), for "
                             "each reduction")
def loss_modules_compute_their_functions(tt, case):
    results = {}
    for name, c in case.items():
        for reduction in REDUCTIONS:
            module = getattr(tt.nn, MODULES[name])(reduction=reduction, **_options(c))
            results[f"{MODULES[name]}(reduction={reduction!r})"] = {
                "value": module(tt.Tensor(c["x"]), _target(c)).numpy(),
                "input.grad": leaf_gradients(tt, lambda x: module(x, _target(c)), [c["x"]], c["g"][reduction])[0]}
    return results


@loss_modules_compute_their_functions.expected
def _(case):
    expected = {}
    for name, c in case.items():
        found, grads = _expected_values(c), _expected_gradients(c)
        for reduction in REDUCTIONS:
            expected[f"{MODULES[name]}(reduction={reduction!r})"] = {"value": found[reduction],
                                                                    "input.grad": grads[reduction]}
    return expected


_LOSS_MODULES = [["MSELoss", {"reduction": "sum"}], ["NLLLoss", {}], ["CrossEntropyLoss", {}],
                 ["CrossEntropyLoss", {"label_smoothing": 0.1}], ["BCELoss", {"reduction": "none"}],
                 ["BCEWithLogitsLoss", {}], ["BCEWithLogitsLoss", {"pos_weight": np.array([2.0])}]]


def _label(spec):
    return f"{spec[0]}({', '.join(f'{key}={value!r}' for key, value in spec[1].items())})"


@check(task="05.12", points=1, inputs=st.just({"modules": _LOSS_MODULES}),
       describe=lambda case: "repr of each loss module, with and without options (PyTorch's show none)")
def loss_modules_print_like_pytorch(tt, case):
    return {f"repr({_label(spec)})": repr(getattr(tt.nn, spec[0])(**spec[1])) for spec in case["modules"]}


@loss_modules_print_like_pytorch.expected
def _(case):
    return {f"repr({_label(spec)})": f"{spec[0]}()" for spec in case["modules"]}


@check(task="05.12", points=1,
       describe=lambda case: "each loss module built with its defaults and with reduction='sum', and "
                             "CrossEntropyLoss(label_smoothing=0.2), BCEWithLogitsLoss(pos_weight=[3.0])")
def loss_modules_are_modules_that_store_their_options(tt, case):
    nn = tt.nn
    found = {cls: {"isinstance(module, Module)": isinstance(getattr(nn, cls)(), nn.Module),
                   "len(list(module.parameters()))": len(list(getattr(nn, cls)().parameters())),
                   "module.reduction": getattr(nn, cls)().reduction,
                   "module.reduction after reduction='sum'": getattr(nn, cls)(reduction="sum").reduction}
             for cls in MODULES.values()}
    pos_weight = nn.BCEWithLogitsLoss(pos_weight=np.array([3.0])).pos_weight
    smoothing = [float(nn.CrossEntropyLoss(**kwargs).label_smoothing) for kwargs in ({}, {"label_smoothing": 0.2})]
    return {**found, "CrossEntropyLoss label_smoothing, by default and given 0.2": smoothing,
            "BCEWithLogitsLoss().pos_weight is None": nn.BCEWithLogitsLoss().pos_weight is None,
            "BCEWithLogitsLoss(pos_weight=[3.0]).pos_weight":
                np.asarray(pos_weight.numpy() if hasattr(pos_weight, "numpy") else pos_weight, dtype=np.float64)}


@loss_modules_are_modules_that_store_their_options.expected
def _(case):
    stored = {"isinstance(module, Module)": True, "len(list(module.parameters()))": 0, "module.reduction": "mean",
              "module.reduction after reduction='sum'": "sum"}
    return {**{cls: stored for cls in MODULES.values()}, "CrossEntropyLoss label_smoothing, by default and given 0.2":
            [0.0, 0.2], "BCEWithLogitsLoss().pos_weight is None": True,
            "BCEWithLogitsLoss(pos_weight=[3.0]).pos_weight": np.array([3.0])}
