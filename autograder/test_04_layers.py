"""Hidden suite of 04_layers: Parameter, Module (registration, traversal, modes, checkpoints), Linear
(shapes, initialisation, forward, gradients), the containers, Dropout, Flatten and the activation modules.
The code the notebook gives (PyTorch's assignment guards, register_parameter and add_module, the reprs,
load_state_dict's error report) earns no points and is not graded here.

Every `expected` uses numpy and `checklib.central_difference` only; every `compute` returns plain data:
which object a lookup returned is sent as its position among the objects the check made (`_positions`),
a random draw as the values drawn. Small modules built from Parameter and Module alone (`_toy`) test
Module without depending on Linear. Gradient checks run the layers in float64. The behaviours shared by
modules of several tasks (the containers' protocol, draws from the default generator) are families over a
table, each variant worth the points of its own task.
"""

import math

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    assert_close,
    capture_error,
    central_difference,
    check,
    draws_around,
    expect_error,
    expect_no_draws,
    expect_seeded_draws,
    expect_uniform,
    floats_arrays,
    gradient_case,
    leaf_gradients,
    seed_pair,
    seeded_draws,
    shape_texts,
    shapes,
    upstream,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

# ---------------------------------------------------------------------------------------------------
# Small modules and trees (compute side: shipped to the sandbox with the compute parts)


def _toy(tt):
    """{'Scale', 'Block', 'Unit'}: modules built from Parameter and Module only."""
    nn = tt.nn

    class Scale(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(np.arange(1.0, n + 1.0))
            self.n = n

        def forward(self, x):
            return x * self.weight

        def extra_repr(self):
            return f"n={self.n}"

    class Block(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.scale = Scale(n)
            self.shift = nn.Parameter(np.zeros(n))

        def forward(self, x):
            return self.scale(x) + self.shift

    class Unit(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = Scale(n)

    return {"Scale": Scale, "Block": Block, "Unit": Unit}


def _names(pairs):
    return [name for name, _ in pairs]


def _positions(found, among):
    """Where each object of `found` is among `among`, by identity (-1: none of them): identity as plain data."""
    among = list(among)
    return [next((k for k, known in enumerate(among) if known is item), -1) for item in found]


def _registered(registry):
    """The names in a registry (`_parameters` or `_modules`, the dicts 04.2 fills) whose value is not None."""
    return [name for name, value in registry.items() if value is not None]


def _registered_parameters(module, prefix=""):
    """Dotted names of the parameters of a tree, read from the registries that 04.2 fills rather than through
    the traversal of 04.3: the module's own, then each sub-module's, in registration order."""
    names = [prefix + name for name in _registered(module._parameters)]
    for name, child in module._modules.items():
        if child is not None:
            names += _registered_parameters(child, f"{prefix}{name}.")
    return names


def _nested(tt, case):
    """A tree: own parameter 'gain' (optional), 'encoder' a Block, 'layers' a Module holding Blocks."""
    toy = _toy(tt)
    net = tt.nn.Module()
    if case["own"]:
        net.gain = tt.nn.Parameter(np.ones(1))
    net.encoder = toy["Block"](case["widths"][0])
    net.layers = tt.nn.Module()
    for index, width in enumerate(case["widths"][1:]):
        net.layers.add_module(str(index), toy["Block"](width))
    return net


def _shared(tt):
    """Module 'first' reached three times (also as 'alias' and as block.scale), its weight also registered as
    'tied', and a child 'empty' set to None."""
    toy = _toy(tt)
    net = tt.nn.Module()
    shared = toy["Scale"](2)
    net.first = shared
    net.block = toy["Block"](2)
    net.block.scale = shared
    net.alias = shared
    net.add_module("empty", None)
    net.tied = shared.weight
    return net


# Judge side: the same trees in words and names.

_nested_case = st.fixed_dictionaries({"own": st.booleans(),
                                      "widths": st.lists(st.integers(1, 4), min_size=1, max_size=4)})
SHARED_WORDS = ("a Module with 'first' a Scale, 'block' a Block whose 'scale' is that same Scale, 'alias' that "
                "Scale again, a child 'empty' set to None, and 'tied' that Scale's weight")


def _nested_words(case):
    own = "an own Parameter 'gain', " if case["own"] else ""
    return (f"a Module with {own}'encoder' a Block(n={case['widths'][0]}) (children: a Parameter 'shift' "
            f"assigned after a Scale 'scale') and 'layers' a Module holding {len(case['widths']) - 1} Blocks")


def _nested_parameter_names(case, prefix=""):
    names = (["gain"] if case["own"] else []) + ["encoder.shift", "encoder.scale.weight"]
    for index in range(len(case["widths"]) - 1):
        names += [f"layers.{index}.shift", f"layers.{index}.scale.weight"]
    return [f"{prefix}.{name}" if prefix else name for name in names]


def _nested_parameter_values(case):
    """The initial values of the tree's parameters, in named_parameters() order."""
    return ([np.ones(1)] if case["own"] else []) + [
        value for width in case["widths"] for value in (np.zeros(width), np.arange(1.0, width + 1.0))]


def _nested_module_names(case):
    names = ["", "encoder", "encoder.scale", "layers"]
    for index in range(len(case["widths"]) - 1):
        names += [f"layers.{index}", f"layers.{index}.scale"]
    return names


# ---------------------------------------------------------------------------------------------------
# 04.1 Parameter


@check(task="04.1", points=2, dtype=True,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape), "requires_grad": st.booleans()})),
       describe=lambda case: f"p = Parameter(x) for a float64 x of shape {case['x'].shape}, Parameter(Tensor(x)), "
                             f"Parameter(x.tolist(), requires_grad={case['requires_grad']}) and Parameter()")
def parameter_is_a_float32_leaf_tensor_that_requires_grad(tt, case):
    x, parameter = case["x"], tt.nn.Parameter
    p, listed = parameter(x), parameter(x.tolist(), requires_grad=case["requires_grad"])
    return {"isinstance(p, Tensor)": isinstance(p, tt.Tensor), "p": p.numpy(), "p.requires_grad": bool(p.requires_grad),
            "p.grad is None": p.grad is None, "p.grad_fn is None": p.grad_fn is None,
            "Parameter(Tensor(x))": parameter(tt.Tensor(x.astype(np.float32))).numpy(),
            "Parameter(x.tolist())": listed.numpy(),
            "Parameter(x.tolist(), requires_grad=...).requires_grad": bool(listed.requires_grad),
            "Parameter()": parameter().numpy()}


@parameter_is_a_float32_leaf_tensor_that_requires_grad.expected
def _(case):
    x32 = case["x"].astype(np.float32)
    return {"isinstance(p, Tensor)": True, "p": x32, "p.requires_grad": True, "p.grad is None": True,
            "p.grad_fn is None": True, "Parameter(Tensor(x))": x32, "Parameter(x.tolist())": x32,
            "Parameter(x.tolist(), requires_grad=...).requires_grad": case["requires_grad"],
            "Parameter()": np.zeros(0, dtype=np.float32)}


# ---------------------------------------------------------------------------------------------------
# 04.2 Module registration


@check(task="04.2", points=3, rtol=0, atol=0,
       describe=lambda case: "a Block(3) (a Scale 'scale', then a Parameter 'shift') after block.extra = "
                             "Parameter(ones(2)), block.note = 'plain', block.inner = Scale(2)")
def assignment_registers_parameters_and_modules(tt, case):
    toy = _toy(tt)
    block, extra, inner = toy["Block"](3), tt.nn.Parameter(np.ones(2)), toy["Scale"](2)
    block.extra, block.note, block.inner = extra, "plain", inner
    return {"block._parameters": _registered(block._parameters), "block._modules": _registered(block._modules),
            "block.extra, block.inner (positions among the objects assigned)": _positions([block.extra, block.inner],
                                                                                        [extra, inner]),
            "block.note": block.note, "block(ones(3))": block(tt.Tensor(np.ones(3, dtype=np.float32))).numpy()}


@assignment_registers_parameters_and_modules.expected
def _(case):
    return {"block._parameters": ["shift", "extra"], "block._modules": ["scale", "inner"],
            "block.extra, block.inner (positions among the objects assigned)": [0, 1], "block.note": "plain",
            "block(ones(3))": np.array([1.0, 2.0, 3.0], dtype=np.float32)}


@check(task="04.2", points=1, describe=lambda case: "a Block(2) after block.shift = new (a new Parameter), then "
                                                    "after block.shift = None and block.scale = None")
def assigning_a_parameter_or_none_replaces_the_registered_value(tt, case):
    block, new = _toy(tt)["Block"](2), tt.nn.Parameter(np.full(2, 5.0))
    block.shift = new
    found = {"parameters after block.shift = new": _registered_parameters(block),
             "block.shift (position among [new])": _positions([block.shift], [new])}
    block.shift, block.scale = None, None
    return {**found, "block.shift is None": block.shift is None, "block.scale is None": block.scale is None,
            "parameters after = None": _registered_parameters(block),
            "children after = None": _registered(block._modules)}


@assigning_a_parameter_or_none_replaces_the_registered_value.expected
def _(case):
    return {"parameters after block.shift = new": ["shift", "scale.weight"], "block.shift (position among [new])": [0],
            "block.shift is None": True, "block.scale is None": True, "parameters after = None": [],
            "children after = None": []}


@check(task="04.2", points=1,
       describe=lambda case: "on a Block(2): block.scale = Parameter p (over a module), and block.note = p, block.label "
                             "= Scale m over plain attributes of those names")
def a_value_of_another_kind_moves_the_name_to_its_registry(tt, case):
    toy = _toy(tt)
    moved, p, m = toy["Block"](2), tt.nn.Parameter(np.ones(2)), toy["Scale"](2)
    moved.note, moved.label = "plain", "plain"
    moved.scale, moved.note, moved.label = p, p, m
    return {"parameters after": _registered(moved._parameters), "children after": _registered(moved._modules),
            "plain attributes left": sorted(name for name in ("scale", "note", "label") if name in moved.__dict__),
            "block.scale, block.note, block.label (positions among [p, m])": _positions(
                [moved.scale, moved.note, moved.label], [p, m])}


@a_value_of_another_kind_moves_the_name_to_its_registry.expected
def _(case):
    return {"parameters after": ["shift", "scale", "note"], "children after": ["label"], "plain attributes left": [],
            "block.scale, block.note, block.label (positions among [p, m])": [0, 0, 1]}


@check(task="04.2", points=1, describe=lambda case: "scale.wieght on a Scale module that has 'weight'")
def missing_attribute_raises_attribute_error_naming_class_and_attribute(tt, case):
    scale = _toy(tt)["Scale"](2)
    return {"scale.wieght": capture_error(lambda: scale.wieght), "hasattr(scale, 'wieght')": hasattr(scale, "wieght"),
            "getattr(scale, 'wieght', 7)": getattr(scale, "wieght", 7)}


@missing_attribute_raises_attribute_error_naming_class_and_attribute.expected
def _(case):
    return {"scale.wieght": {"raised": "AttributeError", "message": "'Scale' object has no attribute 'wieght'"},
            "hasattr(scale, 'wieght')": False, "getattr(scale, 'wieght', 7)": 7}


# ---------------------------------------------------------------------------------------------------
# 04.3 Module traversal


@check(task="04.3", points=3, inputs=_nested_case, examples=10,
       describe=lambda case: f"named_parameters() (with prefix='model', with recurse=False) and parameters() of "
                             f"{_nested_words(case)}")
def named_parameters_of_nested_modules(tt, case):
    net = _nested(tt, case)
    named = list(net.named_parameters())
    return {"named_parameters()": _names(named), "shapes": [list(p.shape) for _, p in named],
            "parameters() (positions in named_parameters())": _positions(net.parameters(), [p for _, p in named]),
            "named_parameters(prefix='model')": _names(net.named_parameters(prefix="model")),
            "named_parameters(recurse=False)": _names(net.named_parameters(recurse=False))}


@named_parameters_of_nested_modules.expected
def _(case):
    names = _nested_parameter_names(case)
    return {"named_parameters()": names, "shapes": [list(value.shape) for value in _nested_parameter_values(case)],
            "parameters() (positions in named_parameters())": list(range(len(names))),
            "named_parameters(prefix='model')": _nested_parameter_names(case, "model"),
            "named_parameters(recurse=False)": ["gain"] if case["own"] else []}


@check(task="04.3", points=2, inputs=_nested_case, examples=10,
       describe=lambda case: f"named_modules() (also with prefix='net') and modules() of {_nested_words(case)}")
def named_modules_walks_the_tree_in_pre_order(tt, case):
    net = _nested(tt, case)
    modules = [m for _, m in net.named_modules()]
    return {"named_modules()": _names(net.named_modules()),
            "named_modules(prefix='net')": _names(net.named_modules(prefix="net")),
            "modules() (positions in named_modules())": _positions(net.modules(), modules),
            "the module itself (position in named_modules())": _positions([net], modules)}


@named_modules_walks_the_tree_in_pre_order.expected
def _(case):
    modules = _nested_module_names(case)
    return {"named_modules()": modules, "named_modules(prefix='net')": ["net" + (f".{name}" if name else "")
                                                                        for name in modules],
            "modules() (positions in named_modules())": list(range(len(modules))),
            "the module itself (position in named_modules())": [0]}


@check(task="04.3", points=2, describe=lambda case: SHARED_WORDS)
def shared_parameters_and_modules_are_yielded_once(tt, case):
    net = _shared(tt)
    return {"named_parameters()": _names(net.named_parameters()),
            "len(list(parameters()))": len(list(net.parameters())),
            "named_modules()": _names(net.named_modules()),
            "named_parameters(remove_duplicate=False)": _names(net.named_parameters(remove_duplicate=False))}


@shared_parameters_and_modules_are_yielded_once.expected
def _(case):
    return {"named_parameters()": ["tied", "block.shift"], "len(list(parameters()))": 2,
            "named_modules()": ["", "first", "block"],
            "named_parameters(remove_duplicate=False)": ["tied", "first.weight", "block.shift", "block.scale.weight",
                                                         "alias.weight"]}


# ---------------------------------------------------------------------------------------------------
# 04.4 train, eval, zero_grad


@check(task="04.4", points=2, inputs=_nested_case, examples=5,
       describe=lambda case: f"eval(), then encoder.train(), then train(), then train('yes') on {_nested_words(case)} "
                             f"(training flags in named_modules() order)")
def train_and_eval_are_recursive_and_return_self(tt, case):
    net = _nested(tt, case)

    def flags():
        return [bool(module.training) for _, module in net.named_modules()]

    found = {"training at first": flags(), "eval() returns the module (position)": _positions([net.eval()], [net]),
             "after eval()": flags()}
    net.encoder.train()
    found["after encoder.train()"] = flags()
    found["train() returns the module (position)"] = _positions([net.train()], [net])
    return {**found, "after train()": flags(), "train('yes')": capture_error(lambda: net.train("yes"))["raised"]}


@train_and_eval_are_recursive_and_return_self.expected
def _(case):
    names = _nested_module_names(case)
    return {"training at first": [True] * len(names), "eval() returns the module (position)": [0],
            "after eval()": [False] * len(names),
            "after encoder.train()": [name == "encoder" or name.startswith("encoder.") for name in names],
            "train() returns the module (position)": [0], "after train()": [True] * len(names),
            "train('yes')": "ValueError"}


@check(task="04.4", points=2, inputs=_nested_case, examples=5,
       describe=lambda case: f"zero_grad(set_to_none=False) then zero_grad() on {_nested_words(case)}, every "
                             f"parameter but the first with a .grad")
def zero_grad_sets_zeros_or_none(tt, case):
    net = _nested(tt, case)
    params = list(net.parameters())
    for index, param in enumerate(params[1:], start=1):
        param.grad = tt.Tensor(np.full(param.shape, float(index), dtype=np.float32))
    net.zero_grad(set_to_none=False)
    zeroed = [None if p.grad is None else p.grad.numpy() for p in params]
    net.zero_grad()
    return {"grads after zero_grad(set_to_none=False)": zeroed,
            "grad is None after zero_grad()": [p.grad is None for p in params]}


@zero_grad_sets_zeros_or_none.expected
def _(case):
    zeroed = [None] + [np.zeros(value.shape, dtype=np.float32) for value in _nested_parameter_values(case)[1:]]
    return {"grads after zero_grad(set_to_none=False)": zeroed, "grad is None after zero_grad()": [True] * len(zeroed)}


# ---------------------------------------------------------------------------------------------------
# 04.5 state_dict and load_state_dict


@check(task="04.5", points=1, inputs=_nested_case, examples=5,
       describe=lambda case: f"state = state_dict() of {_nested_words(case)}, then the first parameter after "
                             f"setting the first value of state to 42")
def state_dict_holds_float32_copies_under_dotted_names(tt, case):
    net = _nested(tt, case)
    state = net.state_dict()
    found = {"keys": list(state), "values": [np.array(value, dtype=np.float64) for value in state.values()],
             "types": [f"{type(value).__name__} {getattr(value, 'dtype', '')}" for value in state.values()]}
    next(iter(state.values()))[...] = 42.0
    return {**found, "the first parameter after the edit": next(iter(net.parameters())).numpy().astype(np.float64)}


@state_dict_holds_float32_copies_under_dotted_names.expected
def _(case):
    names, values = _nested_parameter_names(case), _nested_parameter_values(case)
    return {"keys": names, "types": ["ndarray float32"] * len(names), "values": values,
            "the first parameter after the edit": values[0]}


@check(task="04.5", points=1, describe=lambda case: f"state_dict() of {SHARED_WORDS}, loaded back into it")
def state_dict_names_a_shared_parameter_under_every_name(tt, case):
    net = _shared(tt)
    result = net.load_state_dict(net.state_dict())
    return {"state_dict() keys": list(net.state_dict()),
            "load_state_dict(state_dict())": [list(result.missing_keys), list(result.unexpected_keys)]}


@state_dict_names_a_shared_parameter_under_every_name.expected
def _(case):
    return {"state_dict() keys": ["tied", "first.weight", "block.shift", "block.scale.weight", "alias.weight"],
            "load_state_dict(state_dict())": [[], []]}


@st.composite
def _round_trip_case(draw):
    case = draw(_nested_case)
    case["values"] = [draw(floats_arrays(value.shape, dtype=np.float32)) for value in _nested_parameter_values(case)]
    case["x"] = draw(floats_arrays((case["widths"][0],), dtype=np.float32))
    case["as_tensors"] = draw(st.booleans())
    return case


@check(task="04.5", points=3, inputs=_round_trip_case(), examples=10, dtype=True, rtol=0, atol=0,
       describe=lambda case: f"result = fresh.load_state_dict(trained.state_dict()) "
                             f"({'Tensor' if case['as_tensors'] else 'array'} values), for two copies of "
                             f"{_nested_words(case)}, the trained one holding other values")
def load_state_dict_round_trip_copies_the_values_into_the_parameters(tt, case):
    trained, fresh = _nested(tt, case), _nested(tt, case)
    for param, value in zip(trained.parameters(), case["values"]):
        param.data = np.array(value, dtype=np.float32)
    state = trained.state_dict()
    if case["as_tensors"]:
        state = {name: tt.Tensor(value) for name, value in state.items()}
    before = list(fresh.parameters())
    result = fresh.load_state_dict(state)
    return {"result.missing_keys": list(result.missing_keys), "result.unexpected_keys": list(result.unexpected_keys),
            "parameter values": [p.numpy() for p in fresh.parameters()],
            "parameters (positions among those before loading)": _positions(fresh.parameters(), before),
            "fresh.encoder(x)": fresh.encoder(tt.Tensor(case["x"])).numpy()}


@load_state_dict_round_trip_copies_the_values_into_the_parameters.expected
def _(case):
    shift, weight = case["values"][int(case["own"]):][:2]
    return {"result.missing_keys": [], "result.unexpected_keys": [], "parameter values": case["values"],
            "parameters (positions among those before loading)": list(range(len(case["values"]))),
            "fresh.encoder(x)": case["x"] * weight + shift}


@st.composite
def _strict_case(draw):
    """Some keys of the tree's state dropped, keys the tree does not have added (at least one of either)."""
    case = draw(_nested_case)
    keys = _nested_parameter_names(case)
    drop = draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    extra = draw(st.lists(st.sampled_from(["bogus", "head.weight", "encoder.scale.bias", "layers.9.shift"]),
                          unique=True, max_size=2))
    if not any(drop) and not extra:
        drop[0] = True
    case.update(drop=drop, extra=[[name, (2,)] for name in extra], strict=True, fill=draw(st.floats(-3, 3, width=32)))
    return case


def _missing(case):
    return [key for key, dropped in zip(_nested_parameter_names(case), case["drop"]) if dropped]


def _state_words(case):
    added = [f"'{name}' of shape {shape}" for name, shape in case["extra"]]
    return f"the state of {_nested_words(case)} without {_missing(case)} and with {added or 'nothing more'}"


def _edited_state(tt, case, net):
    """The net's state without the dropped keys, with the case's extra values (zeros) and, with a fill, every
    other value that fill (as a Tensor)."""
    state = {name: value if "fill" not in case else tt.Tensor(np.full(value.shape, case["fill"], dtype=np.float32))
             for (name, value), drop in zip(net.state_dict().items(), case["drop"]) if not drop}
    return {**state, **{name: np.zeros(shape, dtype=np.float32) for name, shape in case["extra"]}}


@check(task="04.5", points=2, inputs=_strict_case(), examples=10,
       describe=lambda case: f"result = load_state_dict(state, strict=False) of {_state_words(case)}, every other "
                             f"value filled with {case['fill']}")
def load_state_dict_not_strict_returns_the_key_lists_and_loads_the_rest(tt, case):
    net = _nested(tt, case)
    result = net.load_state_dict(_edited_state(tt, case, net), strict=False)
    missing, unexpected = result
    return {"result.missing_keys": list(result.missing_keys), "result.unexpected_keys": list(result.unexpected_keys),
            "missing, unexpected = result": [list(missing), list(unexpected)],
            "parameter values": [p.numpy().astype(np.float64) for p in net.parameters()]}


@load_state_dict_not_strict_returns_the_key_lists_and_loads_the_rest.expected
def _(case):
    fill = float(np.float32(case["fill"]))
    unexpected = [name for name, _ in case["extra"]]
    return {"result.missing_keys": _missing(case), "result.unexpected_keys": unexpected,
            "missing, unexpected = result": [_missing(case), unexpected],
            "parameter values": [value if drop else np.full(value.shape, fill)
                                 for value, drop in zip(_nested_parameter_values(case), case["drop"])]}


# ---------------------------------------------------------------------------------------------------
# 04.6 Linear initialisation

_linear_sizes = st.fixed_dictionaries({"in": st.integers(1, 7), "out": st.integers(1, 7), "bias": st.booleans()})


@check(task="04.6", points=2, inputs=_linear_sizes, examples=10,
       describe=lambda case: f"layer = Linear({case['in']}, {case['out']}, bias={case['bias']})")
def linear_parameters_have_pytorchs_shapes_and_names(tt, case):
    layer = tt.nn.Linear(case["in"], case["out"], bias=case["bias"])
    return {"layer.weight shape and dtype": [list(layer.weight.shape), str(layer.weight.numpy().dtype)],
            "layer.weight.requires_grad": bool(layer.weight.requires_grad),
            "layer.bias shape and dtype": None if layer.bias is None else [list(layer.bias.shape),
                                                                           str(layer.bias.numpy().dtype)],
            "named_parameters()": _names(layer.named_parameters()),
            "in_features, out_features": [layer.in_features, layer.out_features]}


@linear_parameters_have_pytorchs_shapes_and_names.expected
def _(case):
    return {"layer.weight shape and dtype": [[case["out"], case["in"]], "float32"], "layer.weight.requires_grad": True,
            "layer.bias shape and dtype": [[case["out"]], "float32"] if case["bias"] else None,
            "named_parameters()": ["weight", "bias"] if case["bias"] else ["weight"],
            "in_features, out_features": [case["in"], case["out"]]}


@check(task="04.6", points=2, examples=3, timeout=20,
       inputs=st.fixed_dictionaries({"in": st.sampled_from([3, 50, 400, 1000]), "seed": st.integers(0, 2**31)}),
       describe=lambda case: f"Linear({case['in']}, {max(200_000 // case['in'], 500)}) after manual_seed"
                             f"({case['seed']}): the weight and bias values")
def linear_initialisation_is_uniform_within_one_over_sqrt_in(tt, case):
    tt.manual_seed(case["seed"])
    layer = tt.nn.Linear(case["in"], max(200_000 // case["in"], 500))
    return {"weight": layer.weight.numpy(), "bias": layer.bias.numpy()}


@linear_initialisation_is_uniform_within_one_over_sqrt_in.verdict
def _(case, output):
    for name in ("weight", "bias"):
        expect_uniform(f"Linear({case['in']}, {max(200_000 // case['in'], 500)})'s {name}", output[name],
                       1 / math.sqrt(case["in"]), "1/sqrt(in_features)")


@check(task="04.6", points=1, examples=5, inputs=st.integers(1, 7).map(lambda out: {"out": out}),
       describe=lambda case: f"Linear(0, {case['out']}) (no inputs: the bound 1/sqrt(in_features) is taken as 0)")
def linear_without_inputs_has_a_zero_bias(tt, case):
    layer = tt.nn.Linear(0, case["out"])
    return {"weight": layer.weight.numpy(), "bias": layer.bias.numpy()}


@linear_without_inputs_has_a_zero_bias.expected
def _(case):
    return {"weight": np.zeros((case["out"], 0), dtype=np.float32), "bias": np.zeros(case["out"], dtype=np.float32)}


# ---------------------------------------------------------------------------------------------------
# 04.7 Linear.forward


def _affine(x, w, b):
    return x @ w.T + b


def _linear_case(dtype):
    """x (any leading shape), w, b and g (upstream of the output's shape), and whether the layer has a bias."""
    def draw(sizes):
        fan_in, fan_out, leading = sizes
        return gradient_case(_affine, floats_arrays(leading + (fan_in,), dtype=dtype),
                             floats_arrays((fan_out, fan_in), -1.0, 1.0, dtype=dtype),
                             floats_arrays((fan_out,), -1.0, 1.0, dtype=dtype), names=("x", "w", "b"))
    cases = st.tuples(st.integers(1, 5), st.integers(1, 5), shapes(min_dims=0, max_dims=2, max_side=4)).flatmap(draw)
    return st.tuples(cases, st.booleans()).map(lambda pair: {**pair[0], "bias": pair[1]})


def _linear_with(tt, case):
    """A Linear layer holding the case's weight and bias (any dtype: the arrays are set directly)."""
    fan_out, fan_in = case["w"].shape
    layer = tt.nn.Linear(fan_in, fan_out, bias=case["bias"])
    layer.weight.data = case["w"]
    if case["bias"]:
        layer.bias.data = case["b"]
    return layer


def _linear_words(case):
    fan_out, fan_in = case["w"].shape
    return f"Linear({fan_in}, {fan_out}, bias={case['bias']}) on an input of shape {case['x'].shape}"


@check(task="04.7", points=2, inputs=_linear_case(np.float32), dtype=True, rtol=1e-5, atol=1e-5,
       describe=lambda case: f"{_linear_words(case)} (float32)")
def linear_forward_matches_numpy_on_any_leading_shape(tt, case):
    return _linear_with(tt, case)(tt.Tensor(case["x"])).numpy()


@linear_forward_matches_numpy_on_any_leading_shape.expected
def _(case):
    x, w, b = (case[key].astype(np.float64) for key in ("x", "w", "b"))
    return _affine(x, w, b if case["bias"] else 0.0).astype(np.float32)


@check(task="04.7", points=3, inputs=_linear_case(np.float64), **GRAD_TOL,
       describe=lambda case: f"{_linear_words(case)}, backward(g) in float64")
def linear_gradients_match_central_differences(tt, case):
    layer = _linear_with(tt, case)
    x = tt.Tensor(case["x"], requires_grad=True)
    layer(x).backward(tt.Tensor(case["g"]))
    return {"input.grad": x.grad.numpy(), "weight.grad": layer.weight.grad.numpy(),
            "bias.grad": layer.bias.grad.numpy() if case["bias"] else None}


@linear_gradients_match_central_differences.expected
def _(case):
    b = case["b"] if case["bias"] else np.zeros_like(case["b"])
    grad_x, grad_w, grad_b = central_difference(_affine, [case["x"], case["w"], b], case["g"])
    return {"input.grad": grad_x, "weight.grad": grad_w, "bias.grad": grad_b if case["bias"] else None}


@st.composite
def _bad_input_case(draw):
    fan_in = draw(st.integers(1, 6))
    leading = draw(shapes(min_dims=0, max_dims=2, max_side=4))
    shape = draw(st.sampled_from([leading + (draw(st.integers(1, 8).filter(lambda n: n != fan_in)),), ()]))
    return {"in": fan_in, "out": draw(st.integers(1, 4)), "shape": shape}


@check(task="04.7", points=2, inputs=_bad_input_case(), examples=15,
       describe=lambda case: f"Linear({case['in']}, {case['out']}) on an input of shape {case['shape']}")
def linear_rejects_a_mis_shaped_input_naming_both_shapes(tt, case):
    layer = tt.nn.Linear(case["in"], case["out"])
    return capture_error(lambda: layer(tt.Tensor(np.ones(case["shape"], dtype=np.float32))))


@linear_rejects_a_mis_shaped_input_naming_both_shapes.verdict
def _(case, output):
    expect_error(f"Linear({case['in']}, {case['out']}) on an input of shape {case['shape']}", output, "ValueError",
                 names=[str(case["in"]), shape_texts(case["shape"])])


# ---------------------------------------------------------------------------------------------------
# 04.8 Sequential


@st.composite
def _chain_case(draw):
    sizes = draw(st.lists(st.integers(1, 5), min_size=2, max_size=3))
    pairs = list(zip(sizes[:-1], sizes[1:]))
    return {"sizes": sizes, "x": draw(floats_arrays((draw(st.integers(1, 4)), sizes[0]), dtype=np.float32)),
            "weights": [draw(floats_arrays((b, a), -1.0, 1.0, dtype=np.float32)) for a, b in pairs],
            "biases": [draw(floats_arrays((b,), -1.0, 1.0, dtype=np.float32)) for _, b in pairs]}


@check(task="04.8", points=2, inputs=_chain_case(), rtol=1e-5, atol=1e-5,
       describe=lambda case: f"Sequential(Linear, Scale, Linear, ...) through sizes {case['sizes']} (a Scale (weights "
                             f"1..n) after each Linear), and Sequential(), on x of shape {case['x'].shape}")
def sequential_applies_its_modules_in_order(tt, case):
    modules = []
    for weight, bias in zip(case["weights"], case["biases"]):
        layer = tt.nn.Linear(weight.shape[1], weight.shape[0])
        layer.weight.data, layer.bias.data = weight, bias
        modules += [layer, _toy(tt)["Scale"](weight.shape[0])]
    x = tt.Tensor(case["x"])
    return {"Sequential(...)(x)": tt.nn.Sequential(*modules)(x).numpy(),
            "Sequential()(x)": tt.nn.Sequential()(x).numpy()}


@sequential_applies_its_modules_in_order.expected
def _(case):
    out = case["x"].astype(np.float64)
    for weight, bias in zip(case["weights"], case["biases"]):
        out = (out @ weight.T.astype(np.float64) + bias) * np.arange(1.0, weight.shape[0] + 1.0)
    return {"Sequential(...)(x)": out, "Sequential()(x)": case["x"]}


@check(task="04.8", points=2, examples=10,
       inputs=st.fixed_dictionaries({"sizes": st.lists(st.integers(1, 6), min_size=2, max_size=4),
                                     "seeds": st.lists(st.integers(0, 2**31), min_size=2, max_size=2, unique=True)}),
       describe=lambda case: f"a Sequential of Linear layers of sizes {case['sizes']} (seed {case['seeds'][0]}), its "
                             f"state_dict loaded into a fresh one (seed {case['seeds'][1]}): outputs on x = ones")
def state_dict_round_trip_of_linear_layers_gives_identical_outputs(tt, case):
    def build(seed):
        tt.manual_seed(seed)
        return tt.nn.Sequential(*[tt.nn.Linear(a, b) for a, b in zip(case["sizes"][:-1], case["sizes"][1:])])

    original, fresh = build(case["seeds"][0]), build(case["seeds"][1])
    x = tt.Tensor(np.ones((3, case["sizes"][0]), dtype=np.float32))
    before = fresh(x).numpy()
    fresh.load_state_dict(original.state_dict())
    return {"original": original(x).numpy(), "fresh before loading": before, "fresh after loading": fresh(x).numpy()}


@state_dict_round_trip_of_linear_layers_gives_identical_outputs.verdict
def _(case, output):
    what = f"a Sequential of Linear layers of sizes {case['sizes']} loaded from another's state_dict"
    if np.array_equal(output["original"], output["fresh before loading"]):
        raise CheckFailed(f"{what}: two different seeds gave identical models before loading, so the initialisation "
                          f"is not random")
    if not np.array_equal(output["original"], output["fresh after loading"]):
        raise CheckFailed(f"{what}: after loading, the outputs {np.round(output['fresh after loading'], 4).tolist()} "
                          f"differ from the original model's {np.round(output['original'], 4).tolist()}")


# ---------------------------------------------------------------------------------------------------
# 04.9 ModuleList


@check(task="04.9", points=2, inputs=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(
           lambda widths: {"widths": widths}), examples=8,
       describe=lambda case: f"a Module with 'blocks' a ModuleList of Units (each: 'fc' a Scale) of widths "
                             f"{case['widths']} and 'plain' a Python list of one more Unit")
def modulelist_registers_its_modules_under_dotted_names(tt, case):
    toy, net = _toy(tt), tt.nn.Module()
    net.blocks = tt.nn.ModuleList([toy["Unit"](width) for width in case["widths"]])
    net.plain = [toy["Unit"](1)]
    return {"named_parameters()": _names(net.named_parameters()), "named_modules()": _names(net.named_modules())}


@modulelist_registers_its_modules_under_dotted_names.expected
def _(case):
    indexes = range(len(case["widths"]))
    return {"named_parameters()": [f"blocks.{k}.fc.weight" for k in indexes],
            "named_modules()": ["", "blocks"] + [name for k in indexes for name in (f"blocks.{k}", f"blocks.{k}.fc")]}


@check(task="04.9", points=1,
       describe=lambda case: "l = ModuleList([a]), then l.extend([b]), l.extend(Sequential(c, d)), l.extend(ModuleList("
                             "[e])), l[1] = f, l.extend(g) for a Scale g, and ModuleList() (modules as their positions "
                             "among a..g)")
def modulelist_extend_and_set(tt, case):
    modules = [_toy(tt)["Scale"](k + 1) for k in range(7)]
    layers = tt.nn.ModuleList(modules[:1])
    chained = [layers.extend(group) is layers for group in (modules[1:2], tt.nn.Sequential(*modules[2:4]),
                                                             tt.nn.ModuleList(modules[4:5]))]
    layers[1] = modules[5]
    return {"each extend returns l": chained, "iter(l)": _positions(layers, modules),
            "child names": _names(layers.named_children()),
            "count of f's weight in parameters()": _positions(layers.parameters(), [modules[5].weight]).count(0),
            "l.extend(g)": capture_error(lambda: layers.extend(modules[6]))["raised"],
            "len(ModuleList())": len(tt.nn.ModuleList())}


@modulelist_extend_and_set.expected
def _(case):
    return {"each extend returns l": [True, True, True], "iter(l)": [0, 5, 2, 3, 4],
            "child names": ["0", "1", "2", "3", "4"], "count of f's weight in parameters()": 1,
            "l.extend(g)": "TypeError", "len(ModuleList())": 0}


# ---------------------------------------------------------------------------------------------------
# 04.10 Dropout

_DROPOUT_SIZE = 100_000


def _dropout_input(seed, size):
    """float32 values in [1, 2] (none is zero, so a zero in the output is a dropped element)."""
    return np.random.default_rng(seed).uniform(1.0, 2.0, size).astype(np.float32)


def _dropout_upstream(seed, size):
    """A float32 upstream gradient of magnitudes in [0.25, 2], either sign."""
    rng = np.random.default_rng(seed + 1)
    return (rng.uniform(0.25, 2.0, size) * rng.choice([-1.0, 1.0], size)).astype(np.float32)


@check(task="04.10", points=1, dtype=True,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape, dtype=np.float32), "p": st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0])})),
       describe=lambda case: f"Dropout(p={case['p']}).eval() on x of shape {case['x'].shape}")
def dropout_in_eval_mode_is_the_identity(tt, case):
    drop = tt.nn.Dropout(p=case["p"])
    drop.eval()
    return drop(tt.Tensor(case["x"])).numpy()


@dropout_in_eval_mode_is_the_identity.expected
def _(case):
    return case["x"]


@check(task="04.10", points=3, examples=4,
       inputs=st.fixed_dictionaries({"p": st.sampled_from([0.1, 0.25, 0.5, 0.8]), "seed": st.integers(0, 2**31)}),
       describe=lambda case: f"Dropout(p={case['p']}) in training mode on {_DROPOUT_SIZE:,} float32 values in [1, 2]")
def dropout_in_training_zeroes_about_p_and_scales_the_rest(tt, case):
    return tt.nn.Dropout(p=case["p"])(tt.Tensor(_dropout_input(case["seed"], _DROPOUT_SIZE))).numpy()


@dropout_in_training_zeroes_about_p_and_scales_the_rest.verdict
def _(case, output):
    p = case["p"]
    what = f"Dropout(p={p}) in training mode on {_DROPOUT_SIZE:,} values in [1, 2]"
    x, out = _dropout_input(case["seed"], _DROPOUT_SIZE), np.asarray(output)
    if out.shape != x.shape or out.dtype != np.float32:
        raise CheckFailed(f"{what}: expected a float32 output of shape {x.shape}, got {out.dtype} {out.shape}")
    dropped, margin = float(np.mean(out == 0)), 5 * math.sqrt(p * (1 - p) / x.size)
    if abs(dropped - p) > margin:
        raise CheckFailed(f"{what}: {dropped:.4f} of the elements were zeroed, expected {p} ± {margin:.4f}")
    kept = out != 0
    assert_close(out[kept], x[kept] * np.float32(1 / (1 - p)), rtol=1e-6, atol=0,
                 what=f"{what}: the kept elements, each scaled by exactly 1/(1-p) = {1 / (1 - p):.6g}")


@check(task="04.10", points=2, examples=10,
       inputs=st.fixed_dictionaries({"p": st.sampled_from([0.2, 0.5, 0.7]), "seed": st.integers(0, 2**31)}),
       describe=lambda case: f"Dropout(p={case['p']}) in training mode, y = drop(x) for 1,000 values in [1, 2], "
                             f"y.backward(g)")
def dropout_gradient_is_the_mask_over_one_minus_p(tt, case):
    x = tt.Tensor(_dropout_input(case["seed"], 1000), requires_grad=True)
    y = tt.nn.Dropout(p=case["p"])(x)
    y.backward(tt.Tensor(_dropout_upstream(case["seed"], 1000)))
    return {"y": y.numpy(), "x.grad": x.grad.numpy()}


@dropout_gradient_is_the_mask_over_one_minus_p.verdict
def _(case, output):
    what = f"Dropout(p={case['p']}) in training mode, y.backward(g)"
    mask = np.asarray(output["y"]) != 0
    if mask.shape != (1000,) or mask.all() or not mask.any():
        raise CheckFailed(f"{what}: expected some of the 1,000 elements of y dropped and some kept, got "
                          f"{int((~mask).sum())} of {mask.size} dropped")
    assert_close(output["x.grad"], _dropout_upstream(case["seed"], 1000).astype(np.float64) * mask / (1 - case["p"]),
                 what=f"{what}: x.grad, g * mask / (1 - p) with the mask of the forward", rtol=1e-5, atol=1e-7)


@check(task="04.10", points=1, rtol=0, atol=0,
       inputs=shapes(min_dims=1, max_dims=3).flatmap(lambda shape: floats_arrays(shape, dtype=np.float32)).map(
           lambda x: {"x": x}),
       describe=lambda case: f"Dropout(p=0) and Dropout(p=1) in training mode on x of shape {case['x'].shape}")
def dropout_p0_keeps_everything_and_p1_drops_everything(tt, case):
    return {"Dropout(p=0)(x)": tt.nn.Dropout(p=0.0)(tt.Tensor(case["x"])).numpy(),
            "Dropout(p=1)(x)": tt.nn.Dropout(p=1.0)(tt.Tensor(case["x"])).numpy(),
            "x.grad after Dropout(p=1)(x).backward(g)": leaf_gradients(tt, tt.nn.Dropout(p=1.0), [case["x"]],
                                                                        np.ones_like(case["x"]))[0]}


@dropout_p0_keeps_everything_and_p1_drops_everything.expected
def _(case):
    zeros = np.zeros_like(case["x"])
    return {"Dropout(p=0)(x)": case["x"], "Dropout(p=1)(x)": zeros, "x.grad after Dropout(p=1)(x).backward(g)": zeros}


@check(task="04.10", points=1, guard=True, inputs=shapes(min_dims=1, max_dims=3).map(lambda shape: {"shape": shape}),
       describe=lambda case: f"x = tt.randn{case['shape']}; tt.manual_seed(1); Dropout(p=0)(x) in training mode, "
                             f"then tt.randn(8): against tt.randn(8) right after tt.manual_seed(1)")
def dropout_p0_returns_its_input_and_draws_nothing(tt, case):
    x, found = tt.randn(*case["shape"]), {}
    draws = draws_around(tt, lambda: found.setdefault("y", tt.nn.Dropout(p=0.0).train()(x).numpy()))
    return {"x": x.numpy(), **found, **draws}


@dropout_p0_returns_its_input_and_draws_nothing.verdict
def _(case, output):
    what, fix = f"Dropout(p=0) in training mode on x of shape {case['shape']}", "return the input as it is when p is 0"
    if not np.array_equal(output["x"], output["y"]):
        raise CheckFailed(f"{what} changed x: {fix}", f"{what} changed x: {fix}")
    expect_no_draws(what, output, fix + ", before drawing a mask")


_DROPOUT_PS = [-0.5, -1e-3, 1.0001, 2.0, -3, 0.0, 1.0]


@check(task="04.10", points=1, describe=lambda case: f"Dropout(p) for p in {_DROPOUT_PS}: the error raised")
def dropout_rejects_p_outside_zero_one(tt, case):
    return {f"Dropout(p={p})": capture_error(lambda: tt.nn.Dropout(p=p))["raised"] for p in _DROPOUT_PS}


@dropout_rejects_p_outside_zero_one.expected
def _(case):
    return {f"Dropout(p={p})": None if 0 <= p <= 1 else "ValueError" for p in _DROPOUT_PS}


# ---------------------------------------------------------------------------------------------------
# 04.11 Flatten


@st.composite
def _flatten_case(draw, gradient=False):
    """x of 0 to 4 dimensions (a 0-d x flattens as shape (1,)), start_dim <= end_dim, either maybe negative."""
    shape = draw(shapes(min_dims=0, max_dims=4, max_side=4))
    ndim = max(len(shape), 1)
    start = draw(st.integers(0, ndim - 1))
    end = draw(st.integers(start, ndim - 1))
    case = {"x": draw(floats_arrays(shape)), "start": draw(st.sampled_from([start, start - ndim])),
            "end": draw(st.sampled_from([end, end - ndim]))}
    if gradient:
        case["g"] = draw(upstream(_flat(case["x"], start, end).shape))
    return case


def _flat(x, start, end):
    x = x.reshape(-1) if x.ndim == 0 else x
    start, end = start % x.ndim, end % x.ndim
    return x.reshape(x.shape[:start] + (int(np.prod(x.shape[start:end + 1])),) + x.shape[end + 1:])


@check(task="04.11", points=2, inputs=_flatten_case(), rtol=0, atol=0,
       describe=lambda case: f"Flatten(start_dim={case['start']}, end_dim={case['end']}) and Flatten() on x of "
                             f"shape {case['x'].shape} (Flatten() on an x of fewer than 2 dimensions: the error)")
def flatten_matches_numpy_reshape(tt, case):
    x = tt.Tensor(case["x"])
    default = tt.nn.Flatten()(x).numpy() if case["x"].ndim >= 2 else capture_error(lambda: tt.nn.Flatten()(x))["raised"]
    return {"Flatten(start_dim, end_dim)(x)": tt.nn.Flatten(start_dim=case["start"], end_dim=case["end"])(x).numpy(),
            "Flatten()(x)": default}


@flatten_matches_numpy_reshape.expected
def _(case):
    x = case["x"]
    return {"Flatten(start_dim, end_dim)(x)": _flat(x, case["start"], case["end"]),
            "Flatten()(x)": x.reshape(x.shape[0], -1) if x.ndim >= 2 else "IndexError"}


@check(task="04.11", points=2, inputs=_flatten_case(gradient=True), **GRAD_TOL,
       describe=lambda case: f"x.grad after Flatten(start_dim={case['start']}, end_dim={case['end']})(x).backward(g) "
                             f"for x of shape {case['x'].shape}")
def flatten_gradient_matches_central_differences(tt, case):
    return leaf_gradients(tt, tt.nn.Flatten(start_dim=case["start"], end_dim=case["end"]), [case["x"]], case["g"])[0]


@flatten_gradient_matches_central_differences.expected
def _(case):
    return central_difference(lambda x: _flat(x, case["start"], case["end"]), [case["x"]], case["g"])[0]


@check(task="04.11", points=1, describe=lambda case: "Identity()(x), and Flatten(start_dim=3) on an x of shape "
                                                     "(2, 3, 4)", guard=True)
def identity_returns_its_input_and_flatten_checks_its_dimensions(tt, case):
    x = tt.Tensor(np.ones((2, 3, 4), dtype=np.float32))
    return {"Identity()(x) is x": tt.nn.Identity()(x) is x,
            "Flatten(start_dim=3)(x)": capture_error(lambda: tt.nn.Flatten(start_dim=3)(x))["raised"]}


@identity_returns_its_input_and_flatten_checks_its_dimensions.expected
def _(case):
    return {"Identity()(x) is x": True, "Flatten(start_dim=3)(x)": "IndexError"}


# ---------------------------------------------------------------------------------------------------
# 04.12 activation modules, each against its numpy function, along a drawn dim


def _module(tt, spec):
    """The module of a spec [class name in tt.nn, keyword arguments]."""
    return getattr(tt.nn, spec[0])(**spec[1])


def _label(spec):
    return f"{spec[0]}({', '.join(f'{key}={value!r}' for key, value in spec[1].items())})"


def _activations(dim):
    return [["ReLU", {}], ["Sigmoid", {}], ["Tanh", {}], ["GELU", {"approximate": "none"}],
            ["GELU", {"approximate": "tanh"}], ["Softmax", {"dim": dim}], ["LogSoftmax", {"dim": dim}]]


def _log_softmax(x, dim):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return x * 0.5 * (1 + np.vectorize(math.erf, otypes=[np.float64])(x / math.sqrt(2)))


NUMPY_ACTIVATIONS = {"ReLU": lambda x: np.maximum(x, 0.0), "Sigmoid": lambda x: 1 / (1 + np.exp(-x)), "Tanh": np.tanh,
                     "GELU": _gelu, "Softmax": lambda x, dim: np.exp(_log_softmax(x, dim)), "LogSoftmax": _log_softmax}


@st.composite
def _activation_case(draw, gradient=False):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(floats_arrays(shape, -4.0, 4.0))
    if gradient:                       # keep relu's kink out of reach of the finite differences
        x = np.where(np.abs(x) < 1e-3, 0.5, x)
    case = {"x": x, "modules": _activations(draw(st.integers(-len(shape), len(shape) - 1)))}
    if gradient:
        case["g"] = draw(upstream(shape))
    return case


def _activation_words(case):
    return f"{', '.join(_label(spec) for spec in case['modules'])} on a float64 x of shape {case['x'].shape}"


@check(task="04.12", points=2, inputs=_activation_case(), examples=15,
       describe=lambda case: f"the outputs of {_activation_words(case)}")
def activation_modules_match_numpy(tt, case):
    return {_label(spec): _module(tt, spec)(tt.Tensor(case["x"])).numpy() for spec in case["modules"]}


@activation_modules_match_numpy.expected
def _(case):
    return {_label(spec): NUMPY_ACTIVATIONS[spec[0]](case["x"], **spec[1]) for spec in case["modules"]}


@check(task="04.12", points=2, inputs=_activation_case(gradient=True), examples=15, **GRAD_TOL,
       describe=lambda case: f"x.grad after module(x).backward(g) for each of {_activation_words(case)}")
def activation_module_gradients_match_central_differences(tt, case):
    return {_label(spec): leaf_gradients(tt, _module(tt, spec), [case["x"]], case["g"])[0] for spec in case["modules"]}


@activation_module_gradients_match_central_differences.expected
def _(case):
    return {_label(spec): central_difference(lambda x: NUMPY_ACTIVATIONS[spec[0]](x, **spec[1]), [case["x"]],
                                             case["g"])[0] for spec in case["modules"]}


# ---------------------------------------------------------------------------------------------------
# Families: one check per container or module, each worth the points of its task in the table




CONTAINERS = {"Sequential": ("04.8", 2), "ModuleList": ("04.9", 2)}


@check(examples=5,
       variants={v: (*CONTAINERS[v], st.integers(1, 5).map(lambda n, v=v: {"container": v, "n": n}))
                 for v in CONTAINERS},
       describe=lambda case: f"c = {case['container']} of {case['n']} Scales m0..m{case['n'] - 1}, then c.append("
                             f"m{case['n']}) (modules as their positions among m0..m{case['n']})")
def container_indexing_len_iteration_append_and_slice(tt, case):
    n = case["n"]
    modules = [_toy(tt)["Scale"](k + 1) for k in range(n + 1)]
    box = tt.nn.Sequential(*modules[:n]) if case["container"] == "Sequential" else tt.nn.ModuleList(modules[:n])
    found = {"c[i] for i in range(-n, n)": _positions([box[i] for i in range(-n, n)], modules), "len(c)": len(box),
             "iter(c)": _positions(box, modules), "c.append(m) is c": box.append(modules[n]) is box}
    return {**found, "child names": _names(box.named_children()), "c[-1]": _positions([box[-1]], modules),
            "type(c[1:])": type(box[1:]).__name__, "c[1:]": _positions(box[1:], modules),
            "c[1:] child names": _names(box[1:].named_children()),
            "c[len(c)]": capture_error(lambda: box[n + 1])["raised"]}


@container_indexing_len_iteration_append_and_slice.expected
def _(case):
    n, names = case["n"], [str(k) for k in range(case["n"] + 1)]
    return {"c[i] for i in range(-n, n)": list(range(n)) * 2, "len(c)": n, "iter(c)": list(range(n)),
            "c.append(m) is c": True, "child names": names, "c[-1]": [n], "type(c[1:])": case["container"],
            "c[1:]": list(range(1, n + 1)), "c[len(c)]": "IndexError",
            "c[1:] child names": names[1:] if case["container"] == "Sequential" else names[:-1]}


DRAWS = {"Linear": ("04.6", 1, "the weight and bias of Linear(5, 4)"),
         "Dropout": ("04.10", 1, "the output of Dropout(0.5) on 1,000 ones")}


@check(examples=5,
       variants={v: (task, points, seed_pair().map(lambda case, v=v: {**case, "module": v}))
                 for v, (task, points, _) in DRAWS.items()},
       describe=lambda case: f"{DRAWS[case['module']][2]} after manual_seed({case['seeds'][0]}), again after "
                             f"manual_seed({case['seeds'][0]}), once more, and after manual_seed({case['seeds'][1]})")
def draws_come_from_the_default_generator(tt, case):
    def draw():
        if case["module"] == "Dropout":
            return tt.nn.Dropout(0.5)(tt.Tensor(np.ones(1000, dtype=np.float32))).numpy()
        layer = tt.nn.Linear(5, 4)
        return np.concatenate([layer.weight.numpy().ravel(), layer.bias.numpy()])
    return seeded_draws(tt, draw, case["seeds"])


@draws_come_from_the_default_generator.verdict
def _(case, output):
    expect_seeded_draws(f"{DRAWS[case['module']][2]} after manual_seed({case['seeds'][0]}) twice, once more, and "
                        f"after manual_seed({case['seeds'][1]})", output)

