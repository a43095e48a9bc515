"""Hidden suite of 06_optimizers: zero_grad (06.1); the update rules, the points of the module: SGD's
weight decay, momentum, dampening and Nesterov (06.2 _sgd_update, 06.3 SGD), Adam's moments and bias
correction (06.4 _adam_update, 06.5 Adam) and where weight decay goes, L2 in Adam and decoupled in AdamW
(06.6), over several steps against the algorithms re-derived here in float64 numpy; the optimizers' use of
the given bookkeeping (param groups, skipped parameters, their state in self.state, so that a state_dict
resumes a run exactly; in-place float32 updates outside autograd); argument checks; and the
learning-rate schedulers (06.7 LRScheduler, 06.8 StepLR, 06.9 CosineAnnealingLR) against their closed
forms. The bookkeeping itself (Optimizer.__init__, add_param_group, state_dict, load_state_dict) is given
code: no check grades it alone.

A run travels in its case: the optimizer ("kind"), its keyword arguments ("hyper"), param groups (indices
and overrides), the float32 initial parameters and each step's gradients (None: no gradient). Each
parameter's update depends only on its own hyperparameters, so `RULES` re-derives one parameter at a
time. The behaviours SGD, Adam and AdamW share are families over the optimizers, each variant worth the
points of its optimizer's task in the family's table. Every result is a dict whose keys name its parts.
"""

import math
from functools import partial

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from checklib import capture_error, check, expect_error, module, shapes

SGD_TOL = {"rtol": 1e-4, "atol": 1e-4}
ADAM_TOL = {"rtol": 1e-4, "atol": 2e-5}
SCHEDULE_TOL = {"rtol": 1e-9, "atol": 1e-12}

# ---------------------------------------------------------------------------------------------------
# compute helpers: drive the package under test (they travel to the sandbox and reveal no answer)


def _leaves(tt, arrays):
    return [tt.Tensor(np.array(array, dtype=np.float32), requires_grad=True) for array in arrays]


def _array(tensor):
    return None if tensor is None else tensor.numpy()


def _optimizer(tt, case, params):
    """tt.optim.<kind>(params, **hyper); with case['groups'], one param group per dict of indices and overrides."""
    if case.get("groups"):
        params = [{**group, "params": [params[i] for i in group["params"]]} for group in case["groups"]]
    return getattr(tt.optim, case["kind"])(params, **case["hyper"])


def _step(tt, optimizer, params, steps):
    for grads in steps:
        for param, grad in zip(params, grads):
            param.grad = None if grad is None else tt.Tensor(np.array(grad, dtype=np.float32))
        optimizer.step()


def _trained(tt, case):
    params = _leaves(tt, case["params"])
    optimizer = _optimizer(tt, case, params)
    _step(tt, optimizer, params, case["grads"])
    return params, optimizer


def _copy(array):
    return None if array is None else np.array(array)


class _Groups:
    """Stands in for an optimizer: a scheduler only reads and writes optimizer.param_groups."""

    def __init__(self, lrs):
        self.param_groups = [{"lr": lr, "params": []} for lr in lrs]


def _halving(tt):
    """A schedule of the check's own on the package's LRScheduler: lr = base_lr * 0.5 ** last_epoch."""
    class Halving(tt.optim.lr_scheduler.LRScheduler):
        def get_lr(self):
            return [base_lr * 0.5 ** self.last_epoch for base_lr in self.base_lrs]
    return Halving


# ---------------------------------------------------------------------------------------------------
# the algorithms for one parameter in float64, references and verdicts (the judge's side)

DEFAULTS = {"SGD": {"lr": 1e-3, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False},
            "Adam": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0},
            "AdamW": {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2}}


def _sgd_rule(param, grads, lr, momentum, dampening, weight_decay, nesterov):
    """The parameter after its steps (a None gradient skips one) and its state (None: no state)."""
    param, buffer = np.array(param, dtype=np.float64), None
    for grad in (g for g in grads if g is not None):
        d_p = grad + weight_decay * param
        if momentum != 0:
            buffer = d_p.copy() if buffer is None else momentum * buffer + (1 - dampening) * d_p
            d_p = d_p + momentum * buffer if nesterov else buffer
        param = param - lr * d_p
    return param, None if buffer is None else {"momentum_buffer": buffer}


def _adam_rule(param, grads, lr, betas, eps, weight_decay, decoupled):
    param, m, v, step = np.array(param, dtype=np.float64), 0.0, 0.0, 0
    for grad in (np.asarray(g, dtype=np.float64) for g in grads if g is not None):
        step += 1
        param, grad = (param * (1 - lr * weight_decay), grad) if decoupled else (param, grad + weight_decay * param)
        m, v = betas[0] * m + (1 - betas[0]) * grad, betas[1] * v + (1 - betas[1]) * grad * grad
        param = param - lr * (m / (1 - betas[0] ** step)) / (np.sqrt(v / (1 - betas[1] ** step)) + eps)
    return param, {"step": step, "exp_avg": m, "exp_avg_sq": v} if step else None


RULES = {"SGD": _sgd_rule, "Adam": partial(_adam_rule, decoupled=False), "AdamW": partial(_adam_rule, decoupled=True)}


def _groups(case):
    return case.get("groups") or [{"params": list(range(len(case["params"])))}]


def _group_hyper(case, group):
    return {**DEFAULTS[case["kind"]], **case["hyper"], **{k: v for k, v in group.items() if k != "params"}}


def _reference(case):
    """[(parameter, state)] of every parameter after the steps, in float32 (state None: none)."""
    hyper = {i: _group_hyper(case, group) for group in _groups(case) for i in group["params"]}
    found = [RULES[case["kind"]](p, [grads[i] for grads in case["grads"]], **hyper[i])
             for i, p in enumerate(case["params"])]
    return [(p.astype(np.float32), state and {k: v if k == "step" else v.astype(np.float32) for k, v in state.items()})
            for p, state in found]




def _expect_errors(wanted, output):
    """Judge {call: capture_error(...)}: `wanted` maps each call to the error it must raise (None: none)
    and words, one of which its message must hold."""
    for call, (error, words) in wanted.items():
        expect_error(call, output[call], error, words)


# ---------------------------------------------------------------------------------------------------
# strategies and words (the judge's side)


def _f32(shape, low=-3.0, high=3.0):
    """float32 arrays, every element drawn on its own."""
    return hnp.arrays(np.float32, shape, fill=st.nothing(), elements=st.floats(
        low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32))


HYPER = {"SGD": st.fixed_dictionaries({
             "lr": st.floats(0.01, 0.5), "momentum": st.one_of(st.just(0.0), st.floats(0.1, 0.95)),
             "dampening": st.sampled_from([0.0, 0.0, 0.1, 0.5]), "weight_decay": st.sampled_from([0.0, 0.05, 0.1, 1.0]),
             "nesterov": st.booleans()}).map(lambda h: {
                 **h, "nesterov": h["nesterov"] and h["momentum"] > 0 and h["dampening"] == 0}),
         "Adam": st.fixed_dictionaries({
             "lr": st.floats(1e-3, 0.1), "betas": st.tuples(st.sampled_from([0.0, 0.5, 0.9]),
                                                            st.sampled_from([0.9, 0.99, 0.999])),
             "eps": st.sampled_from([1e-8, 1e-6, 1e-3]), "weight_decay": st.sampled_from([0.0, 0.01, 0.1, 0.5, 1.0])})}
HYPER["AdamW"] = HYPER["Adam"]
AN_LR = st.floats(0.01, 0.5).map(lambda lr: {"lr": lr})


@st.composite
def _run(draw, kind, hyper=None, groups=None, skips=False, min_params=1, max_params=3, min_steps=3):
    """A case: the optimizer, its arguments (and param groups), the initial parameters and each step's
    gradients (with `skips`, some None, the first parameter's at least once)."""
    param_shapes = draw(st.lists(shapes(max_dims=2, max_side=4), min_size=min_params, max_size=max_params))
    grads = [[None if skips and draw(st.booleans()) else draw(_f32(shape)) for shape in param_shapes]
             for _ in range(draw(st.integers(min_steps, 6)))]
    grads[0][0] = None if skips else grads[0][0]
    case = {"kind": kind, "hyper": draw(HYPER[kind] if hyper is None else hyper),
            "params": [draw(_f32(shape)) for shape in param_shapes], "grads": grads}
    return {**case, "groups": draw(groups)} if groups is not None else case


def _two_groups(kind, first, second=st.just({}), hyper=None):
    """Two parameters in two param groups, each overriding the hyperparameters its strategy draws."""
    return _run(kind, hyper=hyper, min_params=2, max_params=2, groups=st.tuples(first, second).map(
        lambda pair: [{"params": [0], **pair[0]}, {"params": [1], **pair[1]}]))


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.4g}"
    return "(" + ", ".join(_fmt(v) for v in value) + ")" if isinstance(value, tuple) else repr(value)


def _kwargs(values):
    return "".join(f", {name}={_fmt(value)}" for name, value in values.items())


def _lrs(case):
    return "[" + ", ".join(_fmt(lr) for lr in case["lrs"]) + "]"


def _run_words(case):
    """The optimizer's construction and the run, in words."""
    if case.get("groups"):
        params = "[" + ", ".join("{'params': [" + ", ".join(f"p{i}" for i in group["params"]) + "]" + "".join(
            f", '{k}': {_fmt(v)}" for k, v in group.items() if k != "params") + "}" for group in case["groups"]) + "]"
    else:
        params = "[" + ", ".join(f"p{i}" for i in range(len(case["params"]))) + "]"
    skipped = ", some gradients None" if any(g is None for grads in case["grads"] for g in grads) else ""
    shapes_ = ", ".join(f"p{i} {p.shape}" for i, p in enumerate(case["params"]))
    return f"{case['kind']}({params}{_kwargs(case['hyper'])}), {len(case['grads'])} steps on float32 {shapes_}{skipped}"


# ---------------------------------------------------------------------------------------------------
# families over the optimizers: each variant worth the points of its task in the table

STEPS = {"SGD": ("06.3", 2, _run("SGD")), "SGD, some gradients None": ("06.3", 2, _run("SGD", skips=True)),
         "SGD, two param groups": ("06.3", 2, _two_groups("SGD", AN_LR, st.just({"momentum": 0.9}), hyper=AN_LR)),
         "Adam": ("06.5", 2, _run("Adam")), "Adam, some gradients None": ("06.5", 2, _run("Adam", skips=True)),
         "Adam, two param groups": ("06.5", 2, _two_groups("Adam", HYPER["Adam"].map(
             lambda h: {"lr": h["lr"], "betas": h["betas"], "eps": h["eps"]}))),
         "AdamW": ("06.6", 2, _run("AdamW")),
         "AdamW, default weight_decay, some gradients None": ("06.6", 2, _run(
             "AdamW", skips=True, max_params=2, hyper=st.floats(1e-3, 0.1).map(lambda lr: {"lr": lr})))}


@check(dtype=True, variants={v: row[:3] for v, row in STEPS.items()},
       describe=lambda case: f"{_run_words(case)}: each parameter, its .grad (which step() leaves alone)"
                             + ("" if case["kind"] == "SGD" else " and state['step'] (0 without a gradient)"))
def steps_match_the_update_rule(tt, case):
    params, optimizer = _trained(tt, case)
    result = {}
    for i, param in enumerate(params):
        result[f"p{i}"], result[f"p{i}.grad"] = param.numpy(), _array(param.grad)
        if case["kind"] != "SGD":
            result[f"state['step'] of p{i}"] = optimizer.state[param].get("step", 0) if param in optimizer.state else 0
    return result


@steps_match_the_update_rule.expected
def _(case):
    result = {}
    for i, (param, state) in enumerate(_reference(case)):
        result[f"p{i}"], result[f"p{i}.grad"] = param, case["grads"][-1][i]
        if case["kind"] != "SGD":
            result[f"state['step'] of p{i}"] = state["step"] if state else 0
    return result


# the optimizer's state, read through the given state_dict(): what step() keeps, under PyTorch's names
STATE_DICT = {"SGD": ("06.3", 1, _run("SGD", skips=True, min_params=2, hyper=st.fixed_dictionaries({
                  "lr": st.floats(0.01, 0.5), "momentum": st.floats(0.1, 0.9), "dampening": st.just(0.1)})).map(
                  lambda case: {**case, "groups": [{"params": [0]}, {"params": list(range(1, len(case["params"]))),
                                                                     "lr": 0.05}]})),
              "Adam": ("06.5", 1, _run("Adam", skips=True))}


@check(examples=15, variants={v: row[:3] for v, row in STATE_DICT.items()},
       describe=lambda case: f"{_run_words(case)}: state_dict()")
def state_dict_holds_what_step_keeps(tt, case):
    saved = _trained(tt, case)[1].state_dict()
    return {"state": {f"parameter {index}": dict(values) for index, values in saved["state"].items()},
            "param_groups": {f"group {n}": dict(group) for n, group in enumerate(saved["param_groups"])}}


@state_dict_holds_what_step_keeps.expected
def _(case):
    return {"state": {f"parameter {i}": state for i, (_, state) in enumerate(_reference(case)) if state},
            "param_groups": {f"group {n}": {**_group_hyper(case, group), "params": group["params"]}
                             for n, group in enumerate(_groups(case))}}


# the given load_state_dict resumes a run exactly only if step() keeps everything it remembers in self.state
RESUME = {"SGD": ("06.3", 1, _run("SGD", min_steps=4)), "Adam": ("06.5", 1, _run("Adam", min_steps=4)),
          "AdamW": ("06.6", 1, _run("AdamW", min_steps=4))}


@check(examples=15, variants={v: row[:3] for v, row in RESUME.items()},
       describe=lambda case: f"{_run_words(case)}, interrupted after 2 steps: its state_dict() loaded into a fresh "
                             f"{case['kind']}(copies of the parameters, lr=9.0, ...), both continued alike")
def resumes_identically_after_load_state_dict(tt, case):
    params, optimizer = _trained(tt, {**case, "grads": case["grads"][:2]})
    copies = _leaves(tt, [param.numpy() for param in params])
    resumed = _optimizer(tt, {**case, "hyper": {**case["hyper"], "lr": 9.0}}, copies)
    resumed.load_state_dict(optimizer.state_dict())
    for grads in case["grads"][2:]:
        _step(tt, optimizer, params, [grads])
        _step(tt, resumed, copies, [grads])
    return {"the resumed optimizer's lr": resumed.param_groups[0]["lr"],
            **{f"resumed p{i}": p.numpy() for i, p in enumerate(copies)},
            **{f"original p{i}": p.numpy() for i, p in enumerate(params)}}


@resumes_identically_after_load_state_dict.expected
def _(case):
    final = [param for param, _ in _reference(case)]
    return {"the resumed optimizer's lr": case["hyper"]["lr"], **{f"resumed p{i}": p for i, p in enumerate(final)},
            **{f"original p{i}": p for i, p in enumerate(final)}}


# a call's keyword arguments, the error expected (None: none) and words its message names, one at least
LR, DECAY = ("learning rate", "lr"), ("weight_decay", "weight decay")
SGD_ARGUMENTS = [({"lr": -0.1}, "ValueError", LR), ({"momentum": -0.5}, "ValueError", ("momentum",)),
                 ({"weight_decay": -0.01}, "ValueError", DECAY), ({"nesterov": True}, "ValueError", ("nesterov",)),
                 ({"momentum": 0.9, "dampening": 0.1, "nesterov": True}, "ValueError", ("nesterov",)),
                 ({"lr": 0.0, "momentum": 0.0, "weight_decay": 0.0}, None, ()),
                 ({"momentum": 0.9, "nesterov": True}, None, ())]
ADAM_ARGUMENTS = [({"lr": -0.001}, "ValueError", LR), ({"betas": (1.0, 0.999)}, "ValueError", ("beta",)),
                  ({"betas": (0.9, -0.1)}, "ValueError", ("beta",)), ({"eps": -1e-8}, "ValueError", ("eps",)),
                  ({"weight_decay": -0.1}, "ValueError", DECAY), ({"lr": 0.0}, None, ()), ({"eps": 0.0}, None, ()),
                  ({"betas": (0.0, 0.0), "weight_decay": 0.0}, None, ())]
# AdamW checks its arguments in Adam.__init__ (06.5): the calls of both are graded with 06.5
ARGUMENTS = {"SGD": ("06.3", 2, [("SGD", *row) for row in SGD_ARGUMENTS]),
             "Adam and AdamW": ("06.5", 2, [(kind, *row) for kind in ("Adam", "AdamW") for row in ADAM_ARGUMENTS])}


@check(examples=1,
       variants={v: (*row[:2], st.just({"calls": [[kind, kwargs] for kind, kwargs, _, _ in row[2]]}))
                 for v, row in ARGUMENTS.items()},
       describe=lambda case: "optimizers constructed with arguments to check (PyTorch accepts a lr, eps or "
                             "momentum of 0)")
def checks_its_arguments(tt, case):
    """The error raised by tt.optim.<kind>([p], **kwargs) for each call of the case."""
    p = tt.Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    return [capture_error(lambda: getattr(tt.optim, kind)([p], **kwargs)) for kind, kwargs in case["calls"]]


@checks_its_arguments.verdict
def _(case, output):
    calls = [f"{kind}([p]{_kwargs(kwargs)})" for kind, kwargs in case["calls"]]
    outcomes = {f"{kind}([p]{_kwargs(kwargs)})": (error, words) for rows in ARGUMENTS.values()
                for kind, kwargs, error, words in rows[2]}
    _expect_errors({call: outcomes[call] for call in calls}, dict(zip(calls, output)))


SCHEDULES = {"StepLR": lambda base, t, step_size, gamma=0.1: base * gamma ** (t // step_size),
             "CosineAnnealingLR": lambda base, t, T_max, eta_min=0.0:
                 eta_min + (base - eta_min) * (1 + math.cos(math.pi * t / T_max)) / 2}


def _schedules(scheduler, lrs, optional, **required):
    """Cases of a scheduler; its optional argument (name, strategy) sometimes left to its default."""
    name, values = optional
    return st.fixed_dictionaries({
        "scheduler": st.just(scheduler), "lrs": st.lists(lrs, min_size=1, max_size=3), "k": st.integers(0, 15),
        "kwargs": st.tuples(st.fixed_dictionaries(required), st.one_of(st.none(), values)).map(
            lambda pair: pair[0] if pair[1] is None else {**pair[0], name: pair[1]})})


CLOSED_FORMS = {"StepLR": ("06.8", 2, _schedules("StepLR", st.floats(1e-4, 1.0), ("gamma", st.floats(0.05, 0.95)),
                                                 step_size=st.integers(1, 5))),
                "CosineAnnealingLR": ("06.9", 2, _schedules("CosineAnnealingLR", st.floats(1e-3, 1.0), (
                    "eta_min", st.sampled_from([0.0, 1e-4, 1e-3])), T_max=st.integers(1, 10))),
                "CosineAnnealingLR, from the base lr to 0": ("06.9", 1, st.just({
                    "scheduler": "CosineAnnealingLR", "lrs": [0.2, 0.05], "kwargs": {"T_max": 6}, "k": 6}))}


@check(**SCHEDULE_TOL, variants={v: row[:3] for v, row in CLOSED_FORMS.items()},
       describe=lambda case: f"{case['scheduler']}(optimizer{_kwargs(case['kwargs'])}) on groups with lr "
                             f"{_lrs(case)}, stepped {case['k']} times")
def scheduler_matches_its_closed_form(tt, case):
    optimizer = _Groups(case["lrs"])
    scheduler = getattr(tt.optim.lr_scheduler, case["scheduler"])(optimizer, **case["kwargs"])
    seen = {}
    for epoch in range(case["k"] + 1):
        if epoch:
            scheduler.step()
        seen[f"epoch {epoch}"] = {"get_last_lr()": list(scheduler.get_last_lr()),
                                  "the groups' lr": [group["lr"] for group in optimizer.param_groups]}
    return seen


@scheduler_matches_its_closed_form.expected
def _(case):
    rule = SCHEDULES[case["scheduler"]]
    lrs = {t: [rule(base, t, **case["kwargs"]) for base in case["lrs"]] for t in range(case["k"] + 1)}
    return {f"epoch {t}": {"get_last_lr()": lr, "the groups' lr": lr} for t, lr in lrs.items()}



# ---------------------------------------------------------------------------------------------------
# 06.1 zero_grad


@check(task="06.1", points=1, describe=lambda case: "zero_grad() of Optimizer([{'params': [a, b]}, {'params': [c]}]) "
                                                    "after a.grad and c.grad were set")
def zero_grad_sets_grads_to_none(tt, case):
    a, b, c = _leaves(tt, [np.ones(2), np.ones(3), np.ones(1)])
    optimizer = tt.optim.Optimizer([{"params": [a, b]}, {"params": [c]}], {"lr": 0.1})
    a.grad, c.grad = tt.Tensor(np.ones(2, dtype=np.float32)), tt.Tensor(np.ones(1, dtype=np.float32))
    optimizer.zero_grad()
    return {f"{name}.grad is None": p.grad is None for name, p in zip("abc", (a, b, c))}


zero_grad_sets_grads_to_none.expected(lambda case: {f"{p}.grad is None": True for p in "abc"})


@check(task="06.1", points=1, dtype=True, inputs=st.tuples(shapes(max_dims=3), shapes(max_dims=3)).flatmap(
           lambda pair: st.fixed_dictionaries({"ga": _f32(pair[0]), "gc": _f32(pair[1])})),
       describe=lambda case: f"zero_grad(set_to_none=False) on parameters a {case['ga'].shape}, b (no grad) and "
                             f"c {case['gc'].shape}, with old = a.grad taken before")
def zero_grad_without_none_zeros_in_place(tt, case):
    a, b, c = _leaves(tt, [case["ga"], np.ones(2), case["gc"]])
    optimizer = tt.optim.Optimizer([a, b, c], {"lr": 0.1})
    a.grad, c.grad = tt.Tensor(case["ga"].copy()), tt.Tensor(case["gc"].copy())
    old = a.grad
    optimizer.zero_grad(set_to_none=False)
    return {"a.grad": _array(a.grad), "old": old.numpy(), "b.grad is None": b.grad is None, "c.grad": _array(c.grad)}


zero_grad_without_none_zeros_in_place.expected(lambda case: {
    "a.grad": np.zeros_like(case["ga"]), "old": np.zeros_like(case["ga"]), "b.grad is None": True,
    "c.grad": np.zeros_like(case["gc"])})

# ---------------------------------------------------------------------------------------------------
# 06.2 _sgd_update: a family over the parts of SGD's algorithm, each graded on its own


def _sgd_hyper(**drawn):
    """SGD's keyword arguments: a lr and the strategies `drawn`; the others are left to their defaults."""
    return st.fixed_dictionaries({"lr": st.floats(0.01, 0.5), **drawn})


MOMENTUM = st.floats(0.1, 0.95)
SGD_UPDATE = {"lr only": ("06.2", 1, _sgd_hyper()),
              "weight_decay": ("06.2", 1, _sgd_hyper(weight_decay=st.floats(0.05, 1.0))),
              "momentum": ("06.2", 2, _sgd_hyper(momentum=MOMENTUM)),
              "momentum and dampening": ("06.2", 1, _sgd_hyper(momentum=MOMENTUM, dampening=st.floats(0.1, 0.9))),
              "nesterov": ("06.2", 2, _sgd_hyper(momentum=MOMENTUM, nesterov=st.just(True))),
              "all of them drawn": ("06.2", 1, HYPER["SGD"])}


@check(dtype=True, **SGD_TOL,
       variants={v: (*row[:2], _run("SGD", max_params=1, hyper=row[2])) for v, row in SGD_UPDATE.items()},
       describe=lambda case: f"_sgd_update(param, grad, buffer{_kwargs(case['hyper'])}) for {len(case['grads'])} "
                             f"steps on a float32 param of shape {case['params'][0].shape}")
def sgd_update_follows_pytorchs_algorithm(tt, case):
    param, buffer = np.array(case["params"][0], dtype=np.float32), None
    for grads in case["grads"]:
        buffer = module(tt, "optim")._sgd_update(param, np.array(grads[0]), buffer, **case["hyper"])
    return {"param": param, "the buffer returned (None without momentum)": _copy(buffer)}


sgd_update_follows_pytorchs_algorithm.expected(lambda case: {
    "param": _reference(case)[0][0], "the buffer returned (None without momentum)": (_reference(case)[0][1] or {}).get(
        "momentum_buffer")})


@check(task="06.2", points=1, inputs=st.fixed_dictionaries({"g": _f32((3,), 0.5, 2.0),
                                                            "weight_decay": st.sampled_from([0.0, 0.1])}),
       describe=lambda case: f"first = _sgd_update(param, g1, None, lr=0.1, momentum=0.9, weight_decay="
                             f"{case['weight_decay']}), g1 then overwritten with zeros, second = _sgd_update(param, "
                             f"g2, first, ...) with g2 = g (the buffer is a copy, updated in place; a grad never "
                             f"changes)")
def sgd_update_leaves_grad_alone_and_keeps_its_buffer(tt, case):
    update, param = module(tt, "optim")._sgd_update, np.ones(3, dtype=np.float32)
    g1, g2 = case["g"].copy(), case["g"].copy()
    first = update(param, g1, None, lr=0.1, momentum=0.9, weight_decay=case["weight_decay"])
    g1_after, g1[...] = g1.copy(), 0.0
    second = update(param, g2, first, lr=0.1, momentum=0.9, weight_decay=case["weight_decay"])
    return {"g1 after the first step": g1_after, "g2 after the second step": g2,
            "first, after the second step": _copy(first), "second": _copy(second)}


@sgd_update_leaves_grad_alone_and_keeps_its_buffer.expected
def _(case):
    buffer = _reference({"kind": "SGD", "hyper": {"lr": 0.1, "momentum": 0.9, "weight_decay": case["weight_decay"]},
                         "params": [np.ones(3)], "grads": [[case["g"]], [case["g"]]]})[0][1]["momentum_buffer"]
    return {"g1 after the first step": case["g"], "g2 after the second step": case["g"],
            "first, after the second step": buffer, "second": buffer}


# ---------------------------------------------------------------------------------------------------
# 06.4 _adam_update: a family over what its steps must get right


def _adam_run(lr=st.floats(0.01, 0.1), betas=st.just((0.9, 0.999)), eps=st.just(1e-8), scale=1.0, first_only=False):
    """Adam runs of one parameter without weight decay; gradients times `scale`; with `first_only`, one step."""
    return _run("Adam", max_params=1, hyper=st.fixed_dictionaries({
        "lr": lr, "betas": betas, "eps": eps, "weight_decay": st.just(0.0)})).map(lambda case: {
            **case, "grads": [[grads[0] * np.float32(scale)] for grads in case["grads"][:1 if first_only else None]]})


ADAM_UPDATE = {"the first step, bias-corrected": ("06.4", 2, _adam_run(first_only=True)),
               "several steps, default betas and eps": ("06.4", 2, _adam_run()),
               "several steps, any betas and eps": ("06.4", 2, _adam_run(
                   lr=st.floats(1e-3, 0.1), betas=HYPER["Adam"].map(lambda h: h["betas"]),
                   eps=st.sampled_from([1e-8, 1e-6, 1e-3]))),
               "small gradients, eps=1e-3 outside the square root": ("06.4", 1, _adam_run(
                   eps=st.just(1e-3), scale=1e-3))}


@check(dtype=True, **ADAM_TOL,
       variants={v: row[:3] for v, row in ADAM_UPDATE.items()},
       describe=lambda case: f"_adam_update(param, grad, exp_avg, exp_avg_sq, step, lr={case['hyper']['lr']:.4g}, "
                             f"beta1={case['hyper']['betas'][0]}, beta2={case['hyper']['betas'][1]}, eps="
                             f"{case['hyper']['eps']}) for steps 1..{len(case['grads'])} on a float32 param of shape "
                             f"{case['params'][0].shape}")
def adam_update_follows_the_algorithm(tt, case):
    h, param = case["hyper"], np.array(case["params"][0], dtype=np.float32)
    exp_avg, exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
    for step, grads in enumerate(case["grads"], start=1):
        module(tt, "optim")._adam_update(param, np.array(grads[0]), exp_avg, exp_avg_sq, step, lr=h["lr"],
                                       beta1=h["betas"][0], beta2=h["betas"][1], eps=h["eps"])
    return {"param": param, "exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq}


adam_update_follows_the_algorithm.expected(lambda case: {"param": _reference(case)[0][0], **{
    k: v for k, v in _reference(case)[0][1].items() if k != "step"}})


@check(task="06.4", points=2, timeout=10, dtype=True, **ADAM_TOL,
       describe=lambda case: "_adam_update on a (1000, 1000) float32 parameter, 5 steps (a Python loop over "
                             "elements would time out): the parameter's first row")
def adam_update_is_vectorised(tt, case):
    rng = np.random.default_rng(6)
    param, grad = (rng.standard_normal((1000, 1000)).astype(np.float32) for _ in range(2))
    exp_avg, exp_avg_sq = np.zeros_like(param), np.zeros_like(param)
    for step in range(1, 6):
        module(tt, "optim")._adam_update(param, grad, exp_avg, exp_avg_sq, step, lr=0.01, beta1=0.9, beta2=0.999,
                                       eps=1e-8)
    return param[0]


@adam_update_is_vectorised.expected
def _(case):
    rng = np.random.default_rng(6)
    param, grad = (rng.standard_normal((1000, 1000)).astype(np.float32)[0] for _ in range(2))
    return _reference({"kind": "Adam", "hyper": {"lr": 0.01}, "params": [param], "grads": [[grad]] * 5})[0][0]


# ---------------------------------------------------------------------------------------------------
# 06.5 Adam, 06.6 AdamW: where the weight decay goes


def _decay_run(kind):
    """One parameter, a large weight decay, and a first gradient of zeros: there L2 moves the parameter by
    about lr times the sign of the parameter, decoupled decay only scales it by 1 - lr * weight_decay."""
    return _run(kind, max_params=1, hyper=st.fixed_dictionaries({
        "lr": st.floats(0.01, 0.1), "weight_decay": st.floats(0.1, 1.0)})).map(lambda case: {
            **case, "grads": [[np.zeros_like(case["params"][0])]] + case["grads"][1:]})


WEIGHT_DECAY = {"Adam, L2 through the moments": ("06.5", 2, _decay_run("Adam")),
                "AdamW, decoupled from the moments": ("06.6", 3, _decay_run("AdamW"))}


@check(dtype=True, **ADAM_TOL, variants={v: row[:3] for v, row in WEIGHT_DECAY.items()},
       describe=lambda case: f"{_run_words(case)}, the first gradient zeros: p after each step, and the state's "
                             f"exp_avg and exp_avg_sq after the last")
def weight_decay_goes_where_it_belongs(tt, case):
    params = _leaves(tt, case["params"])
    optimizer, result = _optimizer(tt, case, params), {}
    for k, grads in enumerate(case["grads"], start=1):
        _step(tt, optimizer, params, [grads])
        result[f"p after step {k}"] = _copy(params[0].numpy())  # numpy() shares the memory the next step changes
    state = optimizer.state.get(params[0], {})
    return {**result, "exp_avg": _copy(state.get("exp_avg")), "exp_avg_sq": _copy(state.get("exp_avg_sq"))}


@weight_decay_goes_where_it_belongs.expected
def _(case):
    steps = range(1, len(case["grads"]) + 1)
    state = _reference(case)[0][1]
    return {**{f"p after step {k}": _reference({**case, "grads": case["grads"][:k]})[0][0] for k in steps},
            "exp_avg": state["exp_avg"], "exp_avg_sq": state["exp_avg_sq"]}



# ---------------------------------------------------------------------------------------------------
# 06.3 SGD: what the families do not cover


@check(task="06.3", points=3, **SGD_TOL, inputs=shapes(min_dims=1, max_dims=2).flatmap(
           lambda shape: st.fixed_dictionaries({"p": _f32(shape), "g": _f32(shape)})),
       describe=lambda case: f"SGD([p], lr=0.1, momentum=0.9), two steps with gradient g on a float32 p of shape "
                             f"{case['p'].shape}, array = p.data taken before (updated in place, outside autograd)")
def sgd_updates_in_place_outside_autograd(tt, case):
    p = tt.Tensor(case["p"].copy(), requires_grad=True)
    array, optimizer = p.data, tt.optim.SGD([p], lr=0.1, momentum=0.9)
    _step(tt, optimizer, [p], [[case["g"]], [case["g"]]])
    return {"p": p.numpy(), "array": np.array(array), "p.grad_fn is None": p.grad_fn is None,
            "p.requires_grad": bool(p.requires_grad), "p.dtype": str(p.dtype)}


@sgd_updates_in_place_outside_autograd.expected
def _(case):
    final = _reference({"kind": "SGD", "hyper": {"lr": 0.1, "momentum": 0.9}, "params": [case["p"]],
                        "grads": [[case["g"]], [case["g"]]]})[0][0]
    return {"p": final, "array": final, "p.grad_fn is None": True, "p.requires_grad": True, "p.dtype": "float32"}


@check(task="06.3", points=2, rtol=1e-4, atol=1e-4,
       inputs=st.fixed_dictionaries({"w": _f32((2, 3), -1, 1), "b": _f32((2,), -1, 1), "x": _f32((4, 3), -2, 2)}),
       describe=lambda case: "tt.nn.Linear(3, 2) with given weight and bias, loss = (model(x) ** 2).mean(), "
                             "backward, SGD(model.parameters(), lr=0.5).step(): model(x) after the step")
def a_models_forward_sees_the_update(tt, case):
    model = tt.nn.Linear(3, 2)
    model.weight.data[...], model.bias.data[...] = case["w"], case["b"]
    optimizer = tt.optim.SGD(model.parameters(), lr=0.5)
    optimizer.zero_grad()
    (model(tt.Tensor(case["x"])) ** 2).mean().backward()
    optimizer.step()
    return model(tt.Tensor(case["x"])).numpy()


@a_models_forward_sees_the_update.expected
def _(case):
    w, b, x = (case[k].astype(np.float64) for k in ("w", "b", "x"))
    grad_out = 2 * (x @ w.T + b) / (x.shape[0] * w.shape[0])
    return x @ (w - 0.5 * grad_out.T @ x).T + (b - 0.5 * grad_out.sum(axis=0))


@check(task="06.3", points=1, dtype=True, **SGD_TOL,
       describe=lambda case: "SGD([p], lr=0.1) on p = [0, 0], three steps with gradient [1, 2], group['lr'] set to "
                             "0.01 after the first and to 1.0 after the second: p (the lr is read at every step)")
def sgd_reads_the_lr_of_its_group_at_every_step(tt, case):
    p = tt.Tensor(np.zeros(2, dtype=np.float32), requires_grad=True)
    optimizer = tt.optim.SGD([p], lr=0.1)
    for lr in [0.1, 0.01, 1.0]:
        optimizer.param_groups[0]["lr"] = lr
        _step(tt, optimizer, [p], [[np.array([1.0, 2.0])]])
    return p.numpy()


sgd_reads_the_lr_of_its_group_at_every_step.expected(lambda case: (-1.11 * np.array([1.0, 2.0])).astype(np.float32))


# ---------------------------------------------------------------------------------------------------
# 06.7 LRScheduler, 06.8 StepLR


@check(task="06.7", points=2, inputs=st.fixed_dictionaries({
           "lrs": st.lists(st.floats(1e-4, 1.0), min_size=1, max_size=3), "k": st.integers(0, 6)}),
       describe=lambda case: f"a scheduler with get_lr() = [base_lr * 0.5 ** last_epoch] on groups with lr "
                             f"{_lrs(case)}, constructed and stepped {case['k']} times")
def scheduler_sets_every_group_lr_at_each_step(tt, case):
    optimizer = _Groups(case["lrs"])
    scheduler = _halving(tt)(optimizer)
    for _ in range(case["k"]):
        scheduler.step()
    return {"initial_lr of each group": [group.get("initial_lr") for group in optimizer.param_groups],
            "base_lrs": list(scheduler.base_lrs), "last_epoch": scheduler.last_epoch,
            "get_last_lr()": list(scheduler.get_last_lr()),
            "lr of each group": [group["lr"] for group in optimizer.param_groups]}


scheduler_sets_every_group_lr_at_each_step.expected(lambda case: {
    "initial_lr of each group": case["lrs"], "base_lrs": case["lrs"], "last_epoch": case["k"],
    "get_last_lr()": [lr * 0.5 ** case["k"] for lr in case["lrs"]],
    "lr of each group": [lr * 0.5 ** case["k"] for lr in case["lrs"]]})


@check(task="06.7", points=1, describe=lambda case: "a halving scheduler constructed with last_epoch=4, on a group "
                                                     "without 'initial_lr' and on one with initial_lr 0.8")
def scheduler_resumes_from_initial_lr(tt, case):
    missing = capture_error(lambda: _halving(tt)(_Groups([0.1]), last_epoch=4))["raised"]
    optimizer = _Groups([0.1])
    optimizer.param_groups[0]["initial_lr"] = 0.8
    scheduler = _halving(tt)(optimizer, last_epoch=4)
    return {"the error without 'initial_lr'": missing, "last_epoch": scheduler.last_epoch,
            "base_lrs": list(scheduler.base_lrs), "the group's lr": optimizer.param_groups[0]["lr"]}


scheduler_resumes_from_initial_lr.expected(lambda case: {
    "the error without 'initial_lr'": "KeyError", "last_epoch": 5, "base_lrs": [0.8], "the group's lr": 0.8 * 0.5 ** 5})


@check(task="06.8", points=1, describe=lambda case: "StepLR(optimizer, step_size=2) stepped 3 times, its "
                                                     "state_dict() loaded by a second StepLR")
def scheduler_state_dict_round_trip(tt, case):
    scheduler = tt.optim.lr_scheduler.StepLR(_Groups([0.4]), step_size=2)
    for _ in range(3):
        scheduler.step()
    saved, other = scheduler.state_dict(), tt.optim.lr_scheduler.StepLR(_Groups([0.4]), step_size=2)
    other.load_state_dict(saved)
    return {"'optimizer' in the state_dict": "optimizer" in saved, "its last_epoch": saved.get("last_epoch"),
            "its base_lrs": list(saved.get("base_lrs", [])),
            "the second StepLR's get_last_lr()": list(other.get_last_lr())}


scheduler_state_dict_round_trip.expected(lambda case: {
    "'optimizer' in the state_dict": False, "its last_epoch": 3, "its base_lrs": [0.4],
    "the second StepLR's get_last_lr()": [0.4 * 0.1]})


@check(task="06.8", points=2, dtype=True, **SGD_TOL,
       inputs=st.fixed_dictionaries({"p": _f32((3,)), "g": _f32((3,)), "lr": st.floats(0.01, 0.5)}),
       describe=lambda case: f"SGD([p], lr={case['lr']:.4g}) with StepLR(step_size=2, gamma=0.5), 5 epochs of 2 "
                             f"steps with gradient g, scheduler.step() after each epoch: p")
def steplr_drives_an_optimizer(tt, case):
    p = tt.Tensor(case["p"].copy(), requires_grad=True)
    optimizer = tt.optim.SGD([p], lr=case["lr"])
    scheduler = tt.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for _ in range(5):
        _step(tt, optimizer, [p], [[case["g"]]] * 2)
        scheduler.step()
    return p.numpy()


steplr_drives_an_optimizer.expected(lambda case: (case["p"].astype(np.float64) - sum(
    2 * case["lr"] * 0.5 ** (epoch // 2) for epoch in range(5)) * case["g"]).astype(np.float32))
