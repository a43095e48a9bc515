"""Hidden suite of 06_optimizers: the update rules of SGD, Adam and AdamW over several steps against the
algorithms re-derived here in float64 numpy, the optimizer's bookkeeping (param groups, skipped
parameters, zero_grad, state_dict / load_state_dict, in-place float32 updates outside autograd), argument
checks, and the learning-rate schedulers against their closed forms.

Parameters and gradients are float32 (the framework's dtype), so results are compared with float32
tolerances. `compute` returns plain data only: state_dict indices become strings.
"""

import importlib
import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import CheckFailed, capture_error, check, shapes

SGD_TOL = {"rtol": 1e-4, "atol": 1e-4}
ADAM_TOL = {"rtol": 1e-4, "atol": 2e-5}


def _optim_module(tt):
    """The exported module (for the private array kernels _sgd_update and _adam_update)."""
    return importlib.import_module(tt.__name__ + ".core.optim")


def _f32(shape, low=-3.0, high=3.0):
    """float32 arrays, every element drawn on its own."""
    return hnp.arrays(np.float32, shape, fill=st.nothing(), elements=st.floats(
        low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32))


@st.composite
def _run(draw, max_params=3, min_steps=3, max_steps=6, skips=False, min_params=1):
    """Initial parameters and, for each step, one gradient per parameter (None: no gradient this step)."""
    param_shapes = draw(st.lists(shapes(max_dims=2, max_side=4), min_size=min_params, max_size=max_params))
    params = [draw(_f32(shape)) for shape in param_shapes]
    grads = []
    for _ in range(draw(st.integers(min_steps, max_steps))):
        grads.append([None if skips and draw(st.booleans()) else draw(_f32(shape)) for shape in param_shapes])
    if skips:
        grads[0][0] = None                                   # the first parameter waits at least once
    return {"params": params, "grads": grads}


_SGD_HYPER = st.fixed_dictionaries({
    "lr": st.floats(0.01, 0.5), "momentum": st.one_of(st.just(0.0), st.floats(0.1, 0.95)),
    "dampening": st.sampled_from([0.0, 0.0, 0.1, 0.5]), "weight_decay": st.sampled_from([0.0, 0.05, 0.1]),
    "nesterov": st.booleans()}).map(lambda h: {
        **h, "nesterov": h["nesterov"] and h["momentum"] > 0 and h["dampening"] == 0})

_ADAM_HYPER = st.fixed_dictionaries({
    "lr": st.floats(1e-3, 0.1), "beta1": st.sampled_from([0.0, 0.5, 0.9]),
    "beta2": st.sampled_from([0.9, 0.99, 0.999]), "eps": st.sampled_from([1e-8, 1e-6, 1e-3]),
    "weight_decay": st.sampled_from([0.0, 0.01, 0.1, 0.5])})


@st.composite
def _sgd_case(draw, skips=False, max_params=3, min_steps=3):
    return {**draw(_run(max_params=max_params, skips=skips, min_steps=min_steps)), **draw(_SGD_HYPER)}


@st.composite
def _adam_case(draw, skips=False, max_params=3, min_steps=3):
    return {**draw(_run(max_params=max_params, skips=skips, min_steps=min_steps)), **draw(_ADAM_HYPER)}


def _hyper_words(case, names):
    return ", ".join(f"{name}={case[name]:.4g}" if isinstance(case[name], float) else f"{name}={case[name]}"
                     for name in names)


def _run_words(case):
    return (f"{len(case['grads'])} steps on parameters of shapes {[p.shape for p in case['params']]} "
            f"(float32)")


_SGD_NAMES = ("lr", "momentum", "dampening", "weight_decay", "nesterov")
_ADAM_NAMES = ("lr", "beta1", "beta2", "eps", "weight_decay")


# --- helpers compute uses: they only drive the package ---------------------------------------------


def _leaves(tt, arrays):
    return [tt.Tensor(np.array(array, dtype=np.float32), requires_grad=True) for array in arrays]


def _set_grads(tt, params, grads):
    for param, grad in zip(params, grads):
        param.grad = None if grad is None else tt.Tensor(np.array(grad, dtype=np.float32))


def _make_optimizer(tt, kind, params, case):
    if kind == "SGD":
        return tt.optim.SGD(params, lr=case["lr"], momentum=case["momentum"], dampening=case["dampening"],
                            weight_decay=case["weight_decay"], nesterov=case["nesterov"])
    optimizer_class = tt.optim.Adam if kind == "Adam" else tt.optim.AdamW
    return optimizer_class(params, lr=case["lr"], betas=(case["beta1"], case["beta2"]), eps=case["eps"],
                           weight_decay=case["weight_decay"])


def _train(tt, kind, case):
    params = _leaves(tt, case["params"])
    optimizer = _make_optimizer(tt, kind, params, case)
    for grads in case["grads"]:
        _set_grads(tt, params, grads)
        optimizer.step()
    return params, optimizer


def _plain_state(state_dict):
    """A state_dict as plain data: integer keys become strings."""
    return {"state": {str(index): dict(values) for index, values in state_dict["state"].items()},
            "param_groups": [dict(group) for group in state_dict["param_groups"]]}


class _Groups:
    """Stands in for an optimizer: a scheduler only reads and writes optimizer.param_groups."""

    def __init__(self, lrs):
        self.param_groups = [{"lr": lr, "params": []} for lr in lrs]


# --- the algorithms, re-derived in float64 (used by expected only) ---------------------------------


def _sgd_reference(params, steps, lr, momentum, dampening, weight_decay, nesterov):
    params = [np.array(p, dtype=np.float64) for p in params]
    buffers = [None] * len(params)
    for grads in steps:
        for i, grad in enumerate(grads):
            if grad is None:
                continue
            d_p = np.array(grad, dtype=np.float64)
            if weight_decay != 0:
                d_p = d_p + weight_decay * params[i]
            if momentum != 0:
                buffers[i] = d_p.copy() if buffers[i] is None else momentum * buffers[i] + (1 - dampening) * d_p
                d_p = d_p + momentum * buffers[i] if nesterov else buffers[i]
            params[i] = params[i] - lr * d_p
    return params, buffers


def _adam_reference(params, steps, lr, beta1, beta2, eps, weight_decay, decoupled):
    params = [np.array(p, dtype=np.float64) for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    count = [0] * len(params)
    for grads in steps:
        for i, grad in enumerate(grads):
            if grad is None:
                continue
            count[i] += 1
            t = count[i]
            g = np.array(grad, dtype=np.float64)
            if decoupled:
                params[i] = params[i] * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * params[i]
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat = m[i] / (1 - beta1 ** t)
            v_hat = v[i] / (1 - beta2 ** t)
            params[i] = params[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return params, m, v, count


def _f32_list(arrays):
    return [np.asarray(a, dtype=np.float32) for a in arrays]


# ---------------------------------------------------------------------------------------------------
# 06.1 Optimizer.__init__ / add_param_group


@check(task="06.1", points=2,
       inputs=st.fixed_dictionaries({"lr": st.floats(0.01, 1.0), "group_lr": st.floats(0.01, 1.0),
                                     "beta": st.floats(0.0, 0.9)}),
       describe=lambda case: "Optimizer([{'params': [a, b]}, {'params': [c], 'lr': group_lr}], "
                             "defaults={'lr': lr, 'beta': beta}): per group [its keys, lr, beta, which "
                             "parameters (by identity)]")
def param_groups_take_defaults_and_their_own_overrides(tt, case):
    a, b, c = _leaves(tt, [np.ones(2), np.ones(3), np.ones(1)])
    optimizer = tt.optim.Optimizer([{"params": [a, b]}, {"params": [c], "lr": case["group_lr"]}],
                                   {"lr": case["lr"], "beta": case["beta"]})
    names = {id(a): "a", id(b): "b", id(c): "c"}
    return [[sorted(group), group["lr"], group["beta"], [names.get(id(p), "?") for p in group["params"]]]
            for group in optimizer.param_groups]


@param_groups_take_defaults_and_their_own_overrides.expected
def _(case):
    keys = ["beta", "lr", "params"]
    return [[keys, case["lr"], case["beta"], ["a", "b"]], [keys, case["group_lr"], case["beta"], ["c"]]]


@check(task="06.1", points=1,
       describe=lambda case: "Optimizer built from a generator of tensors, then add_param_group({'params': "
                             "d, 'lr': 0.5}) with d a single tensor: [number of groups, params of each group "
                             "(as lists, by identity), lr of each group, defaults, state]")
def params_from_any_iterable_and_add_param_group(tt, case):
    a, b, c, d = _leaves(tt, [np.ones(2), np.ones(3), np.ones(1), np.ones((2, 2))])
    optimizer = tt.optim.Optimizer((p for p in [a, b, c]), {"lr": 0.1})
    optimizer.add_param_group({"params": d, "lr": 0.5})
    names = {id(a): "a", id(b): "b", id(c): "c", id(d): "d"}
    groups = optimizer.param_groups
    return [len(groups), [isinstance(g["params"], list) and [names.get(id(p), "?") for p in g["params"]]
                          for g in groups],
            [g["lr"] for g in groups], dict(optimizer.defaults), len(optimizer.state)]


@params_from_any_iterable_and_add_param_group.expected
def _(case):
    return [2, [["a", "b", "c"], ["d"]], [0.1, 0.5], {"lr": 0.1}, 0]


_BAD_PARAMS = ["an empty list", "a single Tensor", "a list holding a numpy array",
               "the same tensor in two groups", "a non-leaf tensor (x * 2)"]


@check(task="06.1", points=2, inputs=st.fixed_dictionaries({"what": st.sampled_from(_BAD_PARAMS)}),
       describe=lambda case: f"Optimizer(params, {{'lr': 0.1}}) with params {case['what']}: the error raised")
def bad_params_raise(tt, case):
    x = tt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    params = {"an empty list": [], "a single Tensor": x, "a list holding a numpy array": [np.ones(2)],
              "the same tensor in two groups": [{"params": [x]}, {"params": [x]}],
              "a non-leaf tensor (x * 2)": [x * 2]}[case["what"]]
    return capture_error(lambda: tt.optim.Optimizer(params, {"lr": 0.1}))


@bad_params_raise.verdict
def _(case, output):
    wanted = {"an empty list": "ValueError", "a single Tensor": "TypeError",
              "a list holding a numpy array": "TypeError", "the same tensor in two groups": "ValueError",
              "a non-leaf tensor (x * 2)": "ValueError"}[case["what"]]
    what = f"Optimizer(params, {{'lr': 0.1}}) with params {case['what']}"
    if output["raised"] != wanted:
        raise CheckFailed(f"{what}: expected a {wanted} but got {output['raised'] or 'no error'}")
    if case["what"] == "an empty list" and "empty parameter list" not in output["message"]:
        raise CheckFailed(f"{what}: expected the message 'optimizer got an empty parameter list' but got "
                          f"{output['message']!r:.80}")


# ---------------------------------------------------------------------------------------------------
# 06.2 zero_grad


@check(task="06.2", points=1,
       describe=lambda case: "zero_grad() after setting .grad of two of three parameters: which .grad are None")
def zero_grad_sets_grads_to_none(tt, case):
    a, b, c = _leaves(tt, [np.ones(2), np.ones(3), np.ones(1)])
    optimizer = tt.optim.Optimizer([{"params": [a, b]}, {"params": [c]}], {"lr": 0.1})
    a.grad, c.grad = tt.Tensor(np.ones(2, dtype=np.float32)), tt.Tensor(np.ones(1, dtype=np.float32))
    optimizer.zero_grad()
    return [a.grad is None, b.grad is None, c.grad is None]


@zero_grad_sets_grads_to_none.expected
def _(case):
    return [True, True, True]


@check(task="06.2", points=2, dtype=True,
       inputs=st.tuples(shapes(max_dims=3), shapes(max_dims=3)).flatmap(lambda pair: st.fixed_dictionaries({
           "ga": _f32(pair[0]), "gc": _f32(pair[1])})),
       describe=lambda case: f"zero_grad(set_to_none=False) on parameters a {case['ga'].shape}, b (no "
                             f"grad), c {case['gc'].shape}: [a.grad, is it the same Tensor, b.grad is None, c.grad]")
def zero_grad_without_none_zeros_in_place(tt, case):
    a, b, c = _leaves(tt, [case["ga"], np.ones(2), case["gc"]])
    optimizer = tt.optim.Optimizer([a, b, c], {"lr": 0.1})
    a.grad, c.grad = tt.Tensor(case["ga"].copy()), tt.Tensor(case["gc"].copy())
    grad_a = a.grad
    optimizer.zero_grad(set_to_none=False)
    return [None if a.grad is None else a.grad.numpy(), a.grad is grad_a, b.grad is None,
            None if c.grad is None else c.grad.numpy()]


@zero_grad_without_none_zeros_in_place.expected
def _(case):
    return [np.zeros_like(case["ga"]), True, True, np.zeros_like(case["gc"])]


# ---------------------------------------------------------------------------------------------------
# 06.3 state_dict


@check(task="06.6", points=2, **SGD_TOL, examples=15,
       inputs=st.tuples(_run(max_params=3, skips=True), st.floats(0.1, 0.9), st.floats(0.01, 0.5)).map(
           lambda t: {**t[0], "momentum": t[1], "lr": t[2]}),
       describe=lambda case: f"SGD([{{'params': [p0]}}, {{'params': the others, 'lr': 0.05}}], lr, "
                             f"momentum, dampening=0.1), {_run_words(case)}, some gradients None: state_dict()")
def sgd_state_dict_holds_buffers_and_groups(tt, case):
    params = _leaves(tt, case["params"])
    optimizer = tt.optim.SGD([{"params": params[:1]}, {"params": params[1:], "lr": 0.05}], lr=case["lr"],
                             momentum=case["momentum"], dampening=0.1)
    for grads in case["grads"]:
        _set_grads(tt, params, grads)
        optimizer.step()
    return _plain_state(optimizer.state_dict())


@sgd_state_dict_holds_buffers_and_groups.expected
def _(case):
    n = len(case["params"])
    steps = case["grads"]
    buffers = _sgd_reference(case["params"][:1], [g[:1] for g in steps], case["lr"], case["momentum"], 0.1, 0,
                             False)[1]
    buffers += _sgd_reference(case["params"][1:], [g[1:] for g in steps], 0.05, case["momentum"], 0.1, 0,
                              False)[1]
    common = {"momentum": case["momentum"], "dampening": 0.1, "weight_decay": 0.0, "nesterov": False}
    return {"state": {str(i): {"momentum_buffer": buffers[i].astype(np.float32)}
                      for i in range(n) if buffers[i] is not None},
            "param_groups": [{"lr": case["lr"], **common, "params": [0]},
                             {"lr": 0.05, **common, "params": list(range(1, n))}]}


@check(task="06.8", points=2, **ADAM_TOL, examples=15, inputs=_adam_case(skips=True),
       describe=lambda case: f"Adam({_hyper_words(case, _ADAM_NAMES)}), {_run_words(case)}, some gradients "
                             f"None: state_dict()")
def adam_state_dict_holds_step_and_moments(tt, case):
    params, optimizer = _train(tt, "Adam", case)
    return _plain_state(optimizer.state_dict())


@adam_state_dict_holds_step_and_moments.expected
def _(case):
    _, m, v, count = _adam_reference(case["params"], case["grads"], case["lr"], case["beta1"], case["beta2"],
                                     case["eps"], case["weight_decay"], decoupled=False)
    return {"state": {str(i): {"step": count[i], "exp_avg": m[i].astype(np.float32),
                               "exp_avg_sq": v[i].astype(np.float32)}
                      for i in range(len(count)) if count[i] > 0},
            "param_groups": [{"lr": case["lr"], "betas": (case["beta1"], case["beta2"]), "eps": case["eps"],
                              "weight_decay": case["weight_decay"], "params": list(range(len(count)))}]}


@check(task="06.3", points=1,
       describe=lambda case: "an Optimizer subclass of the check's own that keeps a momentum buffer per parameter "
                             "and updates it in place (as SGD(momentum=0.9) does): state_dict(), then one more "
                             "step: is the saved momentum buffer unchanged, and are its keys plain integers")
def state_dict_is_a_copy_indexed_by_integers(tt, case):
    class Momentum(tt.optim.Optimizer):
        def step(self):
            for group in self.param_groups:
                for param in group["params"]:
                    state = self.state.setdefault(param, {})
                    if "momentum_buffer" in state:
                        state["momentum_buffer"] *= 0.9
                        state["momentum_buffer"] += param.grad.data
                    else:
                        state["momentum_buffer"] = param.grad.data.copy()
                    param.data -= group["lr"] * state["momentum_buffer"]

    p = tt.Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    optimizer = Momentum([p], {"lr": 0.1})
    p.grad = tt.Tensor(np.array([1.0, -1.0], dtype=np.float32))
    optimizer.step()
    saved = optimizer.state_dict()
    before = np.array(saved["state"][0]["momentum_buffer"])
    optimizer.step()
    return [sorted(saved["state"]), bool(np.array_equal(saved["state"][0]["momentum_buffer"], before))]


@state_dict_is_a_copy_indexed_by_integers.expected
def _(case):
    return [[0], True]


# ---------------------------------------------------------------------------------------------------
# 06.4 load_state_dict


def _resume(tt, params, optimizer, copies, resumed, later_grads):
    """Load optimizer's state into `resumed` (over `copies` of `params`), continue both with the same
    gradients: [resumed lr, the resumed parameters, the original's parameters]."""
    resumed.load_state_dict(optimizer.state_dict())
    for grads in later_grads:
        _set_grads(tt, params, grads)
        optimizer.step()
        _set_grads(tt, copies, grads)
        resumed.step()
    return [resumed.param_groups[0]["lr"], [p.numpy() for p in copies], [p.numpy() for p in params]]


@check(task="06.6", points=2, **SGD_TOL, examples=15, inputs=_sgd_case(min_steps=4),
       describe=lambda case: f"SGD({_hyper_words(case, _SGD_NAMES)}), {_run_words(case)}, interrupted after 2 "
                             f"steps: state_dict() loaded into a fresh SGD(lr=9.0) over copies of the "
                             f"parameters, both continued with the same gradients: [resumed lr, the resumed "
                             f"parameters, the original's parameters]")
def sgd_resumes_identically_after_load_state_dict(tt, case):
    params, optimizer = _train(tt, "SGD", {**case, "grads": case["grads"][:2]})
    copies = _leaves(tt, [p.numpy() for p in params])
    resumed = tt.optim.SGD(copies, lr=9.0, momentum=case["momentum"], dampening=case["dampening"],
                           weight_decay=case["weight_decay"], nesterov=case["nesterov"])
    return _resume(tt, params, optimizer, copies, resumed, case["grads"][2:])


@sgd_resumes_identically_after_load_state_dict.expected
def _(case):
    final = _f32_list(_sgd_reference(case["params"], case["grads"], *(case[n] for n in _SGD_NAMES))[0])
    return [case["lr"], final, final]


@check(task="06.9", points=2, **ADAM_TOL, examples=15,
       inputs=st.tuples(_adam_case(min_steps=4), st.sampled_from(["Adam", "AdamW"])).map(
           lambda pair: {**pair[0], "kind": pair[1]}),
       describe=lambda case: f"{case['kind']}({_hyper_words(case, _ADAM_NAMES)}), {_run_words(case)}, "
                             f"interrupted after 2 steps: state_dict() loaded into a fresh {case['kind']}(lr=9.0) "
                             f"over copies of the parameters, both continued with the same gradients: "
                             f"[resumed lr, the resumed parameters, the original's parameters]")
def adam_resumes_identically_after_load_state_dict(tt, case):
    params, optimizer = _train(tt, case["kind"], {**case, "grads": case["grads"][:2]})
    copies = _leaves(tt, [p.numpy() for p in params])
    resumed = _make_optimizer(tt, case["kind"], copies, {**case, "lr": 9.0})
    return _resume(tt, params, optimizer, copies, resumed, case["grads"][2:])


@adam_resumes_identically_after_load_state_dict.expected
def _(case):
    final = _f32_list(_adam_reference(case["params"], case["grads"], *(case[n] for n in _ADAM_NAMES),
                                      decoupled=case["kind"] == "AdamW")[0])
    return [case["lr"], final, final]


@check(task="06.8", points=1, **ADAM_TOL,
       describe=lambda case: "Adam.load_state_dict of a state dict whose 'step' is a 0-d int64 array and whose "
                             "moments are float64 arrays (as read back from an .npz file), then changing those "
                             "arrays: [type of step, dtype of exp_avg, exp_avg, parameter after one more step]")
def load_state_dict_copies_and_converts_values(tt, case):
    p = tt.Tensor(np.array([1.0, -2.0], dtype=np.float32), requires_grad=True)
    optimizer = tt.optim.Adam([p], lr=0.1)
    saved = {"state": {0: {"step": np.array(3), "exp_avg": np.array([0.5, -0.25]),
                           "exp_avg_sq": np.array([0.04, 0.01])}},
             "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "params": [0]}]}
    optimizer.load_state_dict(saved)
    saved["state"][0]["exp_avg"][...] = 100.0
    saved["state"][0]["exp_avg_sq"][...] = 100.0
    state = optimizer.state[p]
    result = [type(state["step"]).__name__, str(np.asarray(state["exp_avg"]).dtype), np.array(state["exp_avg"])]
    p.grad = tt.Tensor(np.array([1.0, 1.0], dtype=np.float32))
    optimizer.step()
    return result + [p.numpy()]


@load_state_dict_copies_and_converts_values.expected
def _(case):
    m = 0.9 * np.array([0.5, -0.25]) + 0.1
    v = 0.999 * np.array([0.04, 0.01]) + 0.001
    step = 0.1 * (m / (1 - 0.9 ** 4)) / (np.sqrt(v / (1 - 0.999 ** 4)) + 1e-8)
    return ["int", "float32", np.array([0.5, -0.25], dtype=np.float32),
            (np.array([1.0, -2.0]) - step).astype(np.float32)]


_MISMATCH = ["two groups saved, one in the optimizer", "a group of 2 parameters saved, 3 in the optimizer"]


@check(task="06.4", points=1, inputs=st.fixed_dictionaries({"what": st.sampled_from(_MISMATCH)}),
       describe=lambda case: f"Optimizer.load_state_dict (the base class's, which SGD inherits) with {case['what']}: "
                             f"the error raised")
def load_state_dict_rejects_another_setup(tt, case):
    a, b, c = _leaves(tt, [np.ones(2), np.ones(3), np.ones(1)])
    optimizer = tt.optim.Optimizer
    if case["what"] == _MISMATCH[0]:
        source, target = optimizer([{"params": [a]}, {"params": [b]}], {"lr": 0.1}), optimizer([a, b], {"lr": 0.1})
    else:
        source, target = optimizer([a, b], {"lr": 0.1}), optimizer([a, b, c], {"lr": 0.1})
    return capture_error(lambda: target.load_state_dict(source.state_dict()))["raised"]


@load_state_dict_rejects_another_setup.expected
def _(case):
    return "ValueError"


# ---------------------------------------------------------------------------------------------------
# 06.5 _sgd_update


@check(task="06.5", points=3, dtype=True, **SGD_TOL, inputs=_sgd_case(max_params=1),
       describe=lambda case: f"_sgd_update({_hyper_words(case, _SGD_NAMES)}) for {len(case['grads'])} steps "
                             f"on a float32 parameter of shape {case['params'][0].shape}: [parameter, "
                             f"momentum buffer (None without momentum)]")
def sgd_update_follows_pytorchs_algorithm(tt, case):
    update = _optim_module(tt)._sgd_update
    param = np.array(case["params"][0], dtype=np.float32)
    buffer = None
    for grads in case["grads"]:
        buffer = update(param, np.array(grads[0]), buffer, lr=case["lr"], momentum=case["momentum"],
                        dampening=case["dampening"], weight_decay=case["weight_decay"], nesterov=case["nesterov"])
    return [param, None if buffer is None else np.array(buffer)]


@sgd_update_follows_pytorchs_algorithm.expected
def _(case):
    params, buffers = _sgd_reference(case["params"], case["grads"], *(case[n] for n in _SGD_NAMES))
    return [params[0].astype(np.float32), None if buffers[0] is None else buffers[0].astype(np.float32)]


@check(task="06.5", points=1,
       inputs=st.fixed_dictionaries({"g": _f32((3,), 0.5, 2.0), "weight_decay": st.sampled_from([0.0, 0.1])}),
       describe=lambda case: f"_sgd_update(param, grad, None, lr=0.1, momentum=0.9, weight_decay="
                             f"{case['weight_decay']}) then a second step: [grad unchanged, the first "
                             f"buffer is not grad's memory, the second step returns the same buffer object]")
def sgd_update_leaves_grad_alone_and_keeps_its_buffer(tt, case):
    update = _optim_module(tt)._sgd_update
    param, grad = np.ones(3, dtype=np.float32), case["g"].copy()
    first = update(param, grad, None, lr=0.1, momentum=0.9, weight_decay=case["weight_decay"])
    shared = first is not None and bool(np.shares_memory(np.asarray(first), grad))
    second = update(param, grad, first, lr=0.1, momentum=0.9, weight_decay=case["weight_decay"])
    return [bool(np.array_equal(grad, case["g"])), not shared, second is first]


@sgd_update_leaves_grad_alone_and_keeps_its_buffer.expected
def _(case):
    return [True, True, True]


# ---------------------------------------------------------------------------------------------------
# 06.6 SGD


@check(task="06.6", points=3, dtype=True, **SGD_TOL, inputs=_sgd_case(),
       describe=lambda case: f"SGD({_hyper_words(case, _SGD_NAMES)}), {_run_words(case)}: the parameters")
def sgd_steps_match_the_update_rule(tt, case):
    params, _ = _train(tt, "SGD", case)
    return [p.numpy() for p in params]


@sgd_steps_match_the_update_rule.expected
def _(case):
    return _f32_list(_sgd_reference(case["params"], case["grads"], *(case[n] for n in _SGD_NAMES))[0])


@check(task="06.6", points=2, dtype=True, **SGD_TOL, examples=15,
       inputs=st.tuples(_run(min_params=2, max_params=2), st.floats(0.01, 0.5), st.floats(0.01, 0.5)).map(lambda t: {**t[0], "lr0": t[1], "lr1": t[2]}),
       describe=lambda case: f"SGD([{{'params': [p0], 'lr': {case['lr0']:.4g}}}, {{'params': [p1], 'momentum': "
                             f"0.9}}], lr={case['lr1']:.4g}), {_run_words(case)}: the parameters")
def sgd_param_groups_use_their_own_hyperparameters(tt, case):
    params = _leaves(tt, case["params"])
    optimizer = tt.optim.SGD([{"params": params[:1], "lr": case["lr0"]}, {"params": params[1:], "momentum": 0.9}],
                             lr=case["lr1"])
    for grads in case["grads"]:
        _set_grads(tt, params, grads)
        optimizer.step()
    return [p.numpy() for p in params]


@sgd_param_groups_use_their_own_hyperparameters.expected
def _(case):
    first = _sgd_reference(case["params"][:1], [g[:1] for g in case["grads"]], case["lr0"], 0, 0, 0, False)[0]
    second = _sgd_reference(case["params"][1:], [g[1:] for g in case["grads"]], case["lr1"], 0.9, 0, 0, False)[0]
    return _f32_list(first + second)


@check(task="06.6", points=2, dtype=True, **SGD_TOL, inputs=_sgd_case(skips=True),
       describe=lambda case: f"SGD({_hyper_words(case, _SGD_NAMES)}), {_run_words(case)}, some gradients None "
                             f"(skipped, their momentum kept for later): the parameters")
def sgd_skips_parameters_without_grad(tt, case):
    params, _ = _train(tt, "SGD", case)
    return [p.numpy() for p in params]


@sgd_skips_parameters_without_grad.expected
def _(case):
    return _f32_list(_sgd_reference(case["params"], case["grads"], *(case[n] for n in _SGD_NAMES))[0])


@check(task="06.6", points=2, **SGD_TOL,
       inputs=shapes(min_dims=1, max_dims=2).flatmap(lambda shape: st.fixed_dictionaries({
           "p": _f32(shape), "g": _f32(shape)})),
       describe=lambda case: f"SGD([p], lr=0.1, momentum=0.9), two steps on p of shape {case['p'].shape}: [same "
                             f"array object p.data, a view of p taken before sees the update, p.grad_fn is None, "
                             f"p.requires_grad, dtype, p]")
def sgd_updates_in_place_outside_autograd(tt, case):
    p = tt.Tensor(case["p"].copy(), requires_grad=True)
    array = p.data
    view = array.reshape(-1)
    optimizer = tt.optim.SGD([p], lr=0.1, momentum=0.9)
    for _ in range(2):
        p.grad = tt.Tensor(case["g"].copy())
        optimizer.step()
    return [p.data is array, bool(np.array_equal(view, np.asarray(p.data).reshape(-1))), p.grad_fn is None,
            bool(p.requires_grad), str(p.dtype), p.numpy()]


@sgd_updates_in_place_outside_autograd.expected
def _(case):
    final = _sgd_reference([case["p"]], [[case["g"]], [case["g"]]], 0.1, 0.9, 0, 0, False)[0][0]
    return [True, True, True, True, "float32", final.astype(np.float32)]


_SGD_BAD = [("lr=-0.1", {"lr": -0.1}, ("learning rate", "lr")),
            ("momentum=-0.5", {"lr": 0.1, "momentum": -0.5}, ("momentum",)),
            ("weight_decay=-0.01", {"lr": 0.1, "weight_decay": -0.01}, ("weight_decay", "weight decay")),
            ("nesterov=True without momentum", {"lr": 0.1, "nesterov": True}, ("nesterov",)),
            ("nesterov=True, momentum=0.9, dampening=0.1",
             {"lr": 0.1, "nesterov": True, "momentum": 0.9, "dampening": 0.1}, ("nesterov",))]


@check(task="06.6", points=2, inputs=st.integers(0, len(_SGD_BAD) - 1).map(
           lambda k: {"words": _SGD_BAD[k][0], "kwargs": _SGD_BAD[k][1], "names": list(_SGD_BAD[k][2])}),
       describe=lambda case: f"SGD([p], {case['words']}): the error raised and its message")
def sgd_bad_arguments_raise(tt, case):
    p = tt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    return capture_error(lambda: tt.optim.SGD([p], **case["kwargs"]))


@sgd_bad_arguments_raise.verdict
def _(case, output):
    what = f"SGD([p], {case['words']})"
    if output["raised"] != "ValueError":
        raise CheckFailed(f"{what}: expected a ValueError but got {output['raised'] or 'no error'}")
    if not any(name in output["message"].lower() for name in case["names"]):
        raise CheckFailed(f"{what}: the error message {output['message']!r:.80} should name the argument "
                          f"({' or '.join(case['names'])})")


@check(task="06.6", points=1,
       describe=lambda case: "SGD([p]) without hyperparameters: [defaults, keys of its param group]")
def sgd_defaults_are_pytorchs(tt, case):
    p = tt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    optimizer = tt.optim.SGD([p])
    return [dict(optimizer.defaults), sorted(optimizer.param_groups[0])]


@sgd_defaults_are_pytorchs.expected
def _(case):
    return [{"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False},
            ["dampening", "lr", "momentum", "nesterov", "params", "weight_decay"]]


@check(task="06.6", points=2, rtol=1e-4, atol=1e-4,
       inputs=st.fixed_dictionaries({"w": _f32((2, 3), -1, 1), "b": _f32((2,), -1, 1), "x": _f32((4, 3), -2, 2)}),
       describe=lambda case: "tt.nn.Linear(3, 2) with given weight and bias, loss = (model(x) ** 2).mean(), "
                             "backward, SGD(model.parameters(), lr=0.5).step(): model(x) after the step")
def a_models_forward_sees_the_update(tt, case):
    model = tt.nn.Linear(3, 2)
    model.weight.data[...] = case["w"]
    model.bias.data[...] = case["b"]
    optimizer = tt.optim.SGD(model.parameters(), lr=0.5)
    optimizer.zero_grad()
    (model(tt.Tensor(case["x"])) ** 2).mean().backward()
    optimizer.step()
    return model(tt.Tensor(case["x"])).numpy()


@a_models_forward_sees_the_update.expected
def _(case):
    w, b, x = (case[k].astype(np.float64) for k in ("w", "b", "x"))
    out = x @ w.T + b
    grad_out = 2 * out / out.size
    w = w - 0.5 * grad_out.T @ x
    b = b - 0.5 * grad_out.sum(axis=0)
    return x @ w.T + b


@check(task="06.6", points=1, dtype=True, **SGD_TOL,
       describe=lambda case: "SGD([p], lr=0.1), three steps with gradient [1, 2], group['lr'] set to 0.01 after "
                             "the first and to 1.0 after the second: p (the lr is read at every step)")
def sgd_reads_the_lr_of_its_group_at_every_step(tt, case):
    p = tt.Tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    optimizer = tt.optim.SGD([p], lr=0.1)
    for lr in [0.1, 0.01, 1.0]:
        optimizer.param_groups[0]["lr"] = lr
        p.grad = tt.Tensor(np.array([1.0, 2.0], dtype=np.float32))
        optimizer.step()
    return p.numpy()


@sgd_reads_the_lr_of_its_group_at_every_step.expected
def _(case):
    return (-1.11 * np.array([1.0, 2.0])).astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# 06.7 _adam_update


@check(task="06.7", points=3, dtype=True, **ADAM_TOL,
       inputs=_adam_case(max_params=1).map(lambda case: {**case, "weight_decay": 0.0}),
       describe=lambda case: f"_adam_update(lr={case['lr']:.4g}, beta1={case['beta1']}, beta2={case['beta2']}, "
                             f"eps={case['eps']}) for {len(case['grads'])} steps on a float32 parameter of shape "
                             f"{case['params'][0].shape}: [parameter, exp_avg, exp_avg_sq]")
def adam_update_follows_the_algorithm(tt, case):
    update = _optim_module(tt)._adam_update
    param = np.array(case["params"][0], dtype=np.float32)
    exp_avg, exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
    for step, grads in enumerate(case["grads"], start=1):
        update(param, np.array(grads[0]), exp_avg, exp_avg_sq, step, lr=case["lr"], beta1=case["beta1"],
               beta2=case["beta2"], eps=case["eps"])
    return [param, exp_avg, exp_avg_sq]


@adam_update_follows_the_algorithm.expected
def _(case):
    params, m, v, _ = _adam_reference(case["params"], case["grads"], *(case[n] for n in _ADAM_NAMES),
                                      decoupled=False)
    return _f32_list([params[0], m[0], v[0]])


@check(task="06.7", points=2, timeout=10, dtype=True, **ADAM_TOL,
       describe=lambda case: "_adam_update on a (1000, 1000) float32 parameter, 5 steps (a Python loop over "
                             "elements would time out): the parameter's first row")
def adam_update_is_vectorised(tt, case):
    update = _optim_module(tt)._adam_update
    rng = np.random.default_rng(6)
    param = rng.standard_normal((1000, 1000)).astype(np.float32)
    grad = rng.standard_normal((1000, 1000)).astype(np.float32)
    exp_avg, exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
    for step in range(1, 6):
        update(param, grad, exp_avg, exp_avg_sq, step, lr=0.01, beta1=0.9, beta2=0.999, eps=1e-8)
    return param[0]


@adam_update_is_vectorised.expected
def _(case):
    rng = np.random.default_rng(6)
    param = rng.standard_normal((1000, 1000)).astype(np.float32)[:1]
    grad = rng.standard_normal((1000, 1000)).astype(np.float32)[:1]
    return _f32_list(_adam_reference([param], [[grad]] * 5, 0.01, 0.9, 0.999, 1e-8, 0.0, False)[0])[0][0]


# ---------------------------------------------------------------------------------------------------
# 06.8 Adam


@check(task="06.8", points=3, dtype=True, **ADAM_TOL, inputs=_adam_case(),
       describe=lambda case: f"Adam({_hyper_words(case, _ADAM_NAMES)}) (L2 weight decay), {_run_words(case)}: "
                             f"[the parameters, their .grad after the last step (unchanged)]")
def adam_steps_match_the_update_rule(tt, case):
    params, _ = _train(tt, "Adam", case)
    return [[p.numpy() for p in params], [p.grad.numpy() for p in params]]


@adam_steps_match_the_update_rule.expected
def _(case):
    final = _adam_reference(case["params"], case["grads"], *(case[n] for n in _ADAM_NAMES), decoupled=False)[0]
    return [_f32_list(final), _f32_list(case["grads"][-1])]


@check(task="06.8", points=2, dtype=True, **ADAM_TOL, inputs=_adam_case(skips=True),
       describe=lambda case: f"Adam({_hyper_words(case, _ADAM_NAMES)}), {_run_words(case)}, some gradients None "
                             f"(skipped: no step counted, moments kept): [the parameters, each state['step'] (0 "
                             f"if no state)]")
def adam_skips_parameters_without_grad(tt, case):
    params, optimizer = _train(tt, "Adam", case)
    return [[p.numpy() for p in params], [int(optimizer.state[p]["step"]) if p in optimizer.state else 0
                                          for p in params]]


@adam_skips_parameters_without_grad.expected
def _(case):
    final, _, _, count = _adam_reference(case["params"], case["grads"], *(case[n] for n in _ADAM_NAMES),
                                         decoupled=False)
    return [_f32_list(final), count]


@check(task="06.8", points=2, dtype=True, **ADAM_TOL, examples=15,
       inputs=st.tuples(_run(min_params=2, max_params=2), _ADAM_HYPER, _ADAM_HYPER).map(lambda t: {**t[0], "first": t[1], "second": t[2]}),
       describe=lambda case: f"Adam([{{'params': [p0], {_hyper_words(case['first'], ('lr', 'eps'))}, 'betas': "
                             f"({case['first']['beta1']}, {case['first']['beta2']})}}, {{'params': [p1]}}], "
                             f"{_hyper_words(case['second'], _ADAM_NAMES[:1])}, ...), {_run_words(case)}: the "
                             f"parameters")
def adam_param_groups_use_their_own_hyperparameters(tt, case):
    params = _leaves(tt, case["params"])
    first, second = case["first"], case["second"]
    optimizer = tt.optim.Adam([{"params": params[:1], "lr": first["lr"], "betas": (first["beta1"], first["beta2"]),
                                "eps": first["eps"]}, {"params": params[1:]}],
                              lr=second["lr"], betas=(second["beta1"], second["beta2"]), eps=second["eps"])
    for grads in case["grads"]:
        _set_grads(tt, params, grads)
        optimizer.step()
    return [p.numpy() for p in params]


@adam_param_groups_use_their_own_hyperparameters.expected
def _(case):
    first, second = case["first"], case["second"]
    a = _adam_reference(case["params"][:1], [g[:1] for g in case["grads"]], first["lr"], first["beta1"],
                        first["beta2"], first["eps"], 0.0, False)[0]
    b = _adam_reference(case["params"][1:], [g[1:] for g in case["grads"]], second["lr"], second["beta1"],
                        second["beta2"], second["eps"], 0.0, False)[0]
    return _f32_list(a + b)


_ADAM_BAD = [("lr=-0.001", {"lr": -0.001}, ("learning rate", "lr")),
             ("betas=(1.0, 0.999)", {"betas": (1.0, 0.999)}, ("beta",)),
             ("betas=(0.9, -0.1)", {"betas": (0.9, -0.1)}, ("beta",)),
             ("eps=-1e-8", {"eps": -1e-8}, ("eps",)),
             ("weight_decay=-0.1", {"weight_decay": -0.1}, ("weight_decay", "weight decay"))]


@check(task="06.8", points=2, inputs=st.tuples(st.integers(0, len(_ADAM_BAD) - 1), st.booleans()).map(
           lambda pair: {"words": _ADAM_BAD[pair[0]][0], "kwargs": _ADAM_BAD[pair[0]][1],
                         "names": list(_ADAM_BAD[pair[0]][2]), "kind": "AdamW" if pair[1] else "Adam"}),
       describe=lambda case: f"{case['kind']}([p], {case['words']}): the error raised and its message")
def adam_bad_arguments_raise(tt, case):
    p = tt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    optimizer_class = tt.optim.AdamW if case["kind"] == "AdamW" else tt.optim.Adam
    return capture_error(lambda: optimizer_class([p], **case["kwargs"]))


@adam_bad_arguments_raise.verdict
def _(case, output):
    what = f"{case['kind']}([p], {case['words']})"
    if output["raised"] != "ValueError":
        raise CheckFailed(f"{what}: expected a ValueError but got {output['raised'] or 'no error'}")
    if not any(name in output["message"].lower() for name in case["names"]):
        raise CheckFailed(f"{what}: the error message {output['message']!r:.80} should name the argument "
                          f"({' or '.join(case['names'])})")


# ---------------------------------------------------------------------------------------------------
# 06.9 AdamW


@check(task="06.9", points=3, dtype=True, **ADAM_TOL, inputs=_adam_case(skips=False),
       describe=lambda case: f"AdamW({_hyper_words(case, _ADAM_NAMES)}) (decoupled weight decay), "
                             f"{_run_words(case)}: [the parameters, their .grad after the last step (unchanged)]")
def adamw_steps_match_the_update_rule(tt, case):
    params, _ = _train(tt, "AdamW", case)
    return [[p.numpy() for p in params], [p.grad.numpy() for p in params]]


@adamw_steps_match_the_update_rule.expected
def _(case):
    final = _adam_reference(case["params"], case["grads"], *(case[n] for n in _ADAM_NAMES), decoupled=True)[0]
    return [_f32_list(final), _f32_list(case["grads"][-1])]


@check(task="06.9", points=1, dtype=True, **ADAM_TOL, inputs=_adam_case(skips=True, max_params=2),
       describe=lambda case: f"AdamW(lr={case['lr']:.4g}) with its default weight_decay, {_run_words(case)}, "
                             f"some gradients None (a skipped parameter is not decayed either): the parameters")
def adamw_default_decay_skips_parameters_without_grad(tt, case):
    params = _leaves(tt, case["params"])
    optimizer = tt.optim.AdamW(params, lr=case["lr"])
    for grads in case["grads"]:
        _set_grads(tt, params, grads)
        optimizer.step()
    return [p.numpy() for p in params]


@adamw_default_decay_skips_parameters_without_grad.expected
def _(case):
    return _f32_list(_adam_reference(case["params"], case["grads"], case["lr"], 0.9, 0.999, 1e-8, 1e-2, True)[0])


# ---------------------------------------------------------------------------------------------------
# 06.10 LRScheduler


@check(task="06.10", points=2, inputs=st.fixed_dictionaries({
           "lrs": st.lists(st.floats(1e-4, 1.0), min_size=1, max_size=3), "k": st.integers(0, 6)}),
       describe=lambda case: f"a scheduler with get_lr() = [base * 0.5 ** last_epoch] on groups with lr "
                             f"{case['lrs']}, constructed and stepped {case['k']} times: [initial_lr of each group, "
                             f"base_lrs, last_epoch, get_last_lr(), lr of each group]")
def scheduler_sets_every_group_lr_at_each_step(tt, case):
    class Halving(tt.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [base_lr * 0.5 ** self.last_epoch for base_lr in self.base_lrs]

    optimizer = _Groups(case["lrs"])
    scheduler = Halving(optimizer)
    for _ in range(case["k"]):
        scheduler.step()
    return [[g.get("initial_lr") for g in optimizer.param_groups], list(scheduler.base_lrs),
            scheduler.last_epoch, list(scheduler.get_last_lr()), [g["lr"] for g in optimizer.param_groups]]


@scheduler_sets_every_group_lr_at_each_step.expected
def _(case):
    lrs = [lr * 0.5 ** case["k"] for lr in case["lrs"]]
    return [case["lrs"], case["lrs"], case["k"], lrs, lrs]


@check(task="06.10", points=1,
       describe=lambda case: "a scheduler constructed with last_epoch=4: [the error without 'initial_lr' in the "
                             "groups; with it: last_epoch after construction, base_lrs, group lr]")
def scheduler_resumes_from_initial_lr(tt, case):
    class Halving(tt.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [base_lr * 0.5 ** self.last_epoch for base_lr in self.base_lrs]

    missing = capture_error(lambda: Halving(_Groups([0.1]), last_epoch=4))["raised"]
    optimizer = _Groups([0.1])
    optimizer.param_groups[0]["initial_lr"] = 0.8
    scheduler = Halving(optimizer, last_epoch=4)
    return [missing, scheduler.last_epoch, list(scheduler.base_lrs), optimizer.param_groups[0]["lr"]]


@scheduler_resumes_from_initial_lr.expected
def _(case):
    return ["KeyError", 5, [0.8], 0.8 * 0.5 ** 5]


@check(task="06.11", points=1,
       describe=lambda case: "StepLR(step_size=2) stepped 3 times: [its state_dict() has no 'optimizer', "
                             "last_epoch and base_lrs in it, get_last_lr() of a second StepLR loading that state]")
def scheduler_state_dict_round_trip(tt, case):
    scheduler = tt.optim.lr_scheduler.StepLR(_Groups([0.4]), step_size=2)
    for _ in range(3):
        scheduler.step()
    saved = scheduler.state_dict()
    other = tt.optim.lr_scheduler.StepLR(_Groups([0.4]), step_size=2)
    other.load_state_dict(saved)
    return ["optimizer" not in saved, saved.get("last_epoch"), list(saved.get("base_lrs", [])),
            list(other.get_last_lr())]


@scheduler_state_dict_round_trip.expected
def _(case):
    return [True, 3, [0.4], [0.4 * 0.1]]


# ---------------------------------------------------------------------------------------------------
# 06.11 StepLR, 06.12 CosineAnnealingLR


@check(task="06.11", points=2, rtol=1e-9, atol=1e-12, inputs=st.fixed_dictionaries({
           "lrs": st.lists(st.floats(1e-4, 1.0), min_size=1, max_size=3), "step_size": st.integers(1, 5),
           "gamma": st.floats(0.05, 0.95), "k": st.integers(0, 12)}),
       describe=lambda case: f"StepLR(step_size={case['step_size']}, gamma={case['gamma']:.4g}) on groups with lr "
                             f"{case['lrs']}, after 0..{case['k']} steps: get_last_lr() after each")
def steplr_matches_the_closed_form(tt, case):
    scheduler = tt.optim.lr_scheduler.StepLR(_Groups(case["lrs"]), step_size=case["step_size"], gamma=case["gamma"])
    history = [list(scheduler.get_last_lr())]
    for _ in range(case["k"]):
        scheduler.step()
        history.append(list(scheduler.get_last_lr()))
    return history


@steplr_matches_the_closed_form.expected
def _(case):
    return [[lr * case["gamma"] ** (t // case["step_size"]) for lr in case["lrs"]] for t in range(case["k"] + 1)]


@check(task="06.11", points=2, dtype=True, **SGD_TOL,
       inputs=st.fixed_dictionaries({"p": _f32((3,)), "g": _f32((3,)), "lr": st.floats(0.01, 0.5)}),
       describe=lambda case: f"SGD([p], lr={case['lr']:.4g}) with StepLR(step_size=2, gamma=0.5), 5 epochs of 2 "
                             f"steps with gradient g, scheduler.step() after each epoch: p")
def steplr_drives_an_optimizer(tt, case):
    p = tt.Tensor(case["p"].copy(), requires_grad=True)
    optimizer = tt.optim.SGD([p], lr=case["lr"])
    scheduler = tt.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for _ in range(5):
        for _ in range(2):
            p.grad = tt.Tensor(case["g"].copy())
            optimizer.step()
        scheduler.step()
    return p.numpy()


@steplr_drives_an_optimizer.expected
def _(case):
    total = sum(2 * case["lr"] * 0.5 ** (epoch // 2) for epoch in range(5))
    return (case["p"].astype(np.float64) - total * case["g"]).astype(np.float32)


@check(task="06.12", points=2, rtol=1e-9, atol=1e-12, inputs=st.fixed_dictionaries({
           "lrs": st.lists(st.floats(1e-3, 1.0), min_size=1, max_size=3), "T_max": st.integers(1, 10),
           "eta_min": st.sampled_from([0.0, 1e-4, 1e-3]), "k": st.integers(0, 15)}),
       describe=lambda case: f"CosineAnnealingLR(T_max={case['T_max']}, eta_min={case['eta_min']}) on groups with "
                             f"lr {case['lrs']}, after 0..{case['k']} steps: get_last_lr() after each")
def cosine_annealing_matches_the_closed_form(tt, case):
    scheduler = tt.optim.lr_scheduler.CosineAnnealingLR(_Groups(case["lrs"]), T_max=case["T_max"],
                                                        eta_min=case["eta_min"])
    history = [list(scheduler.get_last_lr())]
    for _ in range(case["k"]):
        scheduler.step()
        history.append(list(scheduler.get_last_lr()))
    return history


@cosine_annealing_matches_the_closed_form.expected
def _(case):
    eta = case["eta_min"]
    return [[eta + (lr - eta) * (1 + math.cos(math.pi * t / case["T_max"])) / 2 for lr in case["lrs"]]
            for t in range(case["k"] + 1)]


@check(task="06.12", points=1, rtol=1e-9, atol=1e-12,
       describe=lambda case: "CosineAnnealingLR(optimizer with lr 0.2 and 0.05, T_max=6): the lr of each group "
                             "at epochs 0, 3 and 6")
def cosine_annealing_goes_from_base_to_eta_min(tt, case):
    optimizer = _Groups([0.2, 0.05])
    scheduler = tt.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=6)
    seen = [[g["lr"] for g in optimizer.param_groups]]
    for epoch in range(1, 7):
        scheduler.step()
        if epoch in (3, 6):
            seen.append([g["lr"] for g in optimizer.param_groups])
    return seen


@cosine_annealing_goes_from_base_to_eta_min.expected
def _(case):
    return [[0.2, 0.05], [0.1, 0.025], [0.0, 0.0]]
