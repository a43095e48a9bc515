"""Hidden suite of 04_layers: Parameter, Module (registration, traversal, modes, checkpoints, repr), Linear
(shapes, initialisation, forward, gradients), the containers, Dropout, Flatten and the activation modules.

Every `expected` uses numpy and `checklib.central_difference` only; every `compute` returns plain data.
Small modules built from Parameter and Module alone (`_toy`) test Module without depending on Linear.
Gradient checks run the layers in float64 (their parameters' `.data` set to float64 arrays), so
tolerances are tight.
"""

import math

import numpy as np
from hypothesis import strategies as st

from checklib import CheckFailed, capture_error, central_difference, check, floats_arrays, shapes, upstream

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}






# ---------------------------------------------------------------------------------------------------
# Small modules for the Module checks (compute side: shipped to the sandbox with the compute parts)


def _toy(tt):
    """{'Scale', 'Block', 'Unit', 'Tagged'}: modules built from Parameter and Module only."""
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

        def forward(self, x):
            return self.fc(x)

    class Tagged(nn.Module):
        def __init__(self, tag, lines=1):
            super().__init__()
            self.tag, self.lines = tag, lines

        def extra_repr(self):
            return "\n".join(f"tag{k}={self.tag}" for k in range(self.lines))

    return {"Scale": Scale, "Block": Block, "Unit": Unit, "Tagged": Tagged}


def _build(tt, toy, spec):
    """A module from a spec: ("scale", n), ("block", n), ("tagged", tag, lines, children) or ("holder",
    [(name, spec or None), ...]) (a plain Module with those children)."""
    kind = spec[0]
    if kind == "scale":
        return toy["Scale"](spec[1])
    if kind == "block":
        return toy["Block"](spec[1])
    module = toy["Tagged"](spec[1], spec[2]) if kind == "tagged" else tt.nn.Module()
    for name, child in spec[-1]:
        module.add_module(name, None if child is None else _build(tt, toy, child))
    return module


def _names(pairs):
    return [name for name, _ in pairs]


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
    """Module 'first' reached twice (also as block.scale) and its weight also registered as 'tied'."""
    toy = _toy(tt)
    net = tt.nn.Module()
    shared = toy["Scale"](2)
    net.first = shared
    net.block = toy["Block"](2)
    net.block.scale = shared
    net.tied = shared.weight
    return net


# Judge side: the same trees in words and names.

_nested_case = st.fixed_dictionaries({
    "own": st.booleans(), "widths": st.lists(st.integers(1, 4), min_size=1, max_size=4)})


def _nested_words(case):
    own = "an own Parameter 'gain', " if case["own"] else ""
    return (f"a Module with {own}'encoder' a Block(n={case['widths'][0]}) (children: a Parameter 'shift' "
            f"assigned after a Scale 'scale') and 'layers' a Module holding {len(case['widths']) - 1} Blocks")


def _nested_parameter_names(case, prefix=""):
    names = (["gain"] if case["own"] else []) + ["encoder.shift", "encoder.scale.weight"]
    for index in range(len(case["widths"]) - 1):
        names += [f"layers.{index}.shift", f"layers.{index}.scale.weight"]
    return [f"{prefix}.{name}" if prefix else name for name in names]


def _nested_parameter_shapes(case):
    shapes_ = [[1]] if case["own"] else []
    for width in case["widths"]:
        shapes_ += [[width], [width]]
    return shapes_


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
       describe=lambda case: f"Parameter(x) for float64 x of shape {case['x'].shape}, Parameter(Tensor(x)), "
                             f"Parameter(x.tolist(), requires_grad={case['requires_grad']})")
def parameter_is_a_float32_leaf_tensor_that_requires_grad(tt, case):
    x = case["x"]
    p = tt.nn.Parameter(x)
    q = tt.nn.Parameter(tt.Tensor(x.astype(np.float32)))
    r = tt.nn.Parameter(x.tolist(), requires_grad=case["requires_grad"])
    return {"is a Tensor": isinstance(p, tt.Tensor), "dtype": str(p.numpy().dtype), "values": p.numpy(),
            "requires_grad": bool(p.requires_grad), "leaf without grad": p.grad is None and p.grad_fn is None,
            "dtype from a Tensor": str(q.numpy().dtype), "requires_grad given": bool(r.requires_grad),
            "values from a list": r.numpy()}


@parameter_is_a_float32_leaf_tensor_that_requires_grad.expected
def _(case):
    x32 = case["x"].astype(np.float32)
    return {"is a Tensor": True, "dtype": "float32", "values": x32, "requires_grad": True,
            "leaf without grad": True, "dtype from a Tensor": "float32",
            "requires_grad given": case["requires_grad"], "values from a list": x32}


@check(task="04.1", points=1,
       describe=lambda case: "Parameter() (no data) and repr(Parameter([1.0, 2.0])): [shape, dtype, the repr, "
                             "repr(Tensor([1.0, 2.0], requires_grad=True))]")
def parameter_without_data_and_its_repr(tt, case):
    empty = tt.nn.Parameter()
    return [list(empty.shape), str(empty.numpy().dtype), repr(tt.nn.Parameter([1.0, 2.0])),
            repr(tt.Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True))]


@parameter_without_data_and_its_repr.verdict
def _(case, output):
    what = "Parameter() and repr(Parameter([1.0, 2.0]))"
    if not isinstance(output, list) or len(output) != 4:
        raise CheckFailed(f"{what}: expected four results but got {output!r:.80}")
    shape, dtype, text, tensor_text = output
    if shape != [0] or dtype != "float32":
        raise CheckFailed(f"{what}: Parameter() should be an empty float32 tensor of shape (0,), got shape "
                          f"{tuple(shape)} and dtype {dtype}")
    if text != "Parameter containing:\n" + tensor_text:
        raise CheckFailed(f"{what}: expected 'Parameter containing:' and a newline before the tensor's repr "
                          f"{tensor_text!r}, got {text!r:.120}")


# ---------------------------------------------------------------------------------------------------
# 04.2 Module registration


@check(task="04.2", points=2, rtol=0, atol=0,
       describe=lambda case: "a Block(3) (Scale 'scale', then Parameter 'shift') after block.extra = "
                             "Parameter(ones(2)), block.note = 'plain', block.inner = Scale(2): [own parameter "
                             "names, child names, lookups give the assigned objects, block(ones(3))]")
def assignment_registers_parameters_and_modules(tt, case):
    toy = _toy(tt)
    block = toy["Block"](3)
    extra = tt.nn.Parameter(np.ones(2))
    inner = toy["Scale"](2)
    block.extra = extra
    block.note = "plain"
    block.inner = inner
    lookups = [block.extra is extra, block.inner is inner, block.note == "plain", isinstance(block.shift, tt.Tensor)]
    return {"parameters": _registered(block._parameters),
            "children": _registered(block._modules),
            "lookups": lookups,
            "forward": block(tt.Tensor(np.ones(3, dtype=np.float32))).numpy()}


@assignment_registers_parameters_and_modules.expected
def _(case):
    return {"parameters": ["shift", "extra"], "children": ["scale", "inner"], "lookups": [True, True, True, True],
            "forward": np.array([1.0, 2.0, 3.0], dtype=np.float32)}


@check(task="04.2", points=2,
       describe=lambda case: "on Block(2)s: re-assigning the Parameter 'shift', setting 'shift' and 'scale' to "
                             "None, assigning a Tensor to 'shift' and an int to 'scale', a Parameter over the "
                             "module 'scale', `del block.shift`")
def reassignment_none_type_errors_and_del(tt, case):
    toy = _toy(tt)
    block = toy["Block"](2)
    new = tt.nn.Parameter(np.full(2, 5.0))
    block.shift = new
    replaced = [_registered_parameters(block), block.shift is new]
    block.shift = None
    block.scale = None
    to_none = [block.shift is None, block.scale is None, _registered_parameters(block), _registered(block._modules)]
    other = toy["Block"](2)
    errors = [capture_error(lambda: setattr(other, "shift", tt.Tensor(np.zeros(2))))["raised"],
              capture_error(lambda: setattr(other, "scale", 3))["raised"]]
    moved = toy["Block"](2)
    moved.scale = tt.nn.Parameter(np.ones(2))
    moved_names = [_registered_parameters(moved), _registered(moved._modules)]
    deleted = toy["Block"](2)
    del deleted.shift
    gone = [_registered_parameters(deleted), hasattr(deleted, "shift")]
    return {"replaced": replaced, "set to None": to_none, "errors": errors, "Parameter over a module": moved_names,
            "del": gone}


@reassignment_none_type_errors_and_del.expected
def _(case):
    return {"replaced": [["shift", "scale.weight"], True],
            "set to None": [True, True, [], []],
            "errors": ["TypeError", "TypeError"],
            "Parameter over a module": [["shift", "scale"], []],
            "del": [["scale.weight"], False]}


@check(task="04.2", points=1,
       describe=lambda case: "scale.wieght on a Scale module that has 'weight': [error type, message, "
                             "hasattr(scale, 'wieght'), getattr(scale, 'wieght', 7)]")
def missing_attribute_raises_attribute_error_naming_class_and_attribute(tt, case):
    scale = _toy(tt)["Scale"](2)
    error = capture_error(lambda: scale.wieght)
    return [error["raised"], error["message"], hasattr(scale, "wieght"), getattr(scale, "wieght", 7)]


@missing_attribute_raises_attribute_error_naming_class_and_attribute.expected
def _(case):
    return ["AttributeError", "'Scale' object has no attribute 'wieght'", False, 7]


@check(task="04.2", points=2,
       describe=lambda case: "register_parameter('w2', Parameter), register_parameter('bias', None), "
                             "add_module('child', Scale(1)), add_module('0', Scale(1)) on a Scale, then the "
                             "errors of register_parameter with a Tensor, add_module with an int, a name with "
                             "a '.', and a name that is an ordinary attribute")
def register_parameter_and_add_module(tt, case):
    toy = _toy(tt)
    scale = toy["Scale"](2)
    w2 = tt.nn.Parameter(np.ones(3))
    scale.register_parameter("w2", w2)
    scale.register_parameter("bias", None)
    scale.add_module("child", toy["Scale"](1))
    scale.add_module("0", toy["Scale"](1))
    registered = [_registered(scale._parameters), _registered(scale._modules),
                  scale.w2 is w2, scale.bias is None, getattr(scale, "0").n]
    errors = [capture_error(lambda: scale.register_parameter("w3", tt.Tensor(np.ones(2))))["raised"],
              capture_error(lambda: scale.add_module("c2", 5))["raised"],
              capture_error(lambda: scale.register_parameter("a.b", tt.nn.Parameter(np.ones(1))))["raised"],
              capture_error(lambda: scale.add_module("n", toy["Scale"](1)))["raised"]]
    return {"registered": registered, "errors": errors}


@register_parameter_and_add_module.expected
def _(case):
    return {"registered": [["weight", "w2"], ["child", "0"], True, True, 1],
            "errors": ["TypeError", "TypeError", "KeyError", "KeyError"]}


@check(task="04.2", points=1,
       describe=lambda case: "a Module subclass whose __init__ assigns a Parameter before calling "
                             "super().__init__(): the error raised")
def assigning_before_module_init_raises_attribute_error(tt, case):
    class Careless(tt.nn.Module):
        def __init__(self):
            self.weight = tt.nn.Parameter(np.ones(2))
            super().__init__()

    return capture_error(Careless)["raised"]


@assigning_before_module_init_raises_attribute_error.expected
def _(case):
    return "AttributeError"


# ---------------------------------------------------------------------------------------------------
# 04.3 Module traversal


@check(task="04.3", points=3, inputs=_nested_case, examples=10,
       describe=lambda case: f"named_parameters(), parameters(), named_parameters(prefix='model') and "
                             f"named_parameters(recurse=False) of {_nested_words(case)}")
def named_parameters_of_nested_modules(tt, case):
    net = _nested(tt, case)
    named = list(net.named_parameters())
    return {"names": _names(named),
            "shapes": [list(p.shape) for p in net.parameters()],
            "same objects": all(a is b for (_, a), b in zip(named, net.parameters())),
            "prefixed": _names(net.named_parameters(prefix="model")),
            "not recursive": _names(net.named_parameters(recurse=False))}


@named_parameters_of_nested_modules.expected
def _(case):
    return {"names": _nested_parameter_names(case), "shapes": _nested_parameter_shapes(case),
            "same objects": True, "prefixed": _nested_parameter_names(case, "model"),
            "not recursive": ["gain"] if case["own"] else []}


@check(task="04.3", points=2, inputs=_nested_case, examples=10,
       describe=lambda case: f"named_children(), children(), named_modules() and modules() of "
                             f"{_nested_words(case)}")
def children_and_modules_in_order(tt, case):
    net = _nested(tt, case)
    named_children = list(net.named_children())
    named_modules = list(net.named_modules())
    return {"children": _names(named_children),
            "children() matches": [a is b for (_, a), b in zip(named_children, net.children())],
            "modules": _names(named_modules),
            "modules() matches": [a is b for (_, a), b in zip(named_modules, net.modules())],
            "self first": named_modules[0][1] is net if named_modules else False}


@children_and_modules_in_order.expected
def _(case):
    modules = _nested_module_names(case)
    return {"children": ["encoder", "layers"], "children() matches": [True, True], "modules": modules,
            "modules() matches": [True] * len(modules), "self first": True}


@check(task="04.3", points=2,
       describe=lambda case: "a Module with 'first' a Scale, 'block' a Block whose 'scale' is that same Scale, "
                             "and 'tied' that Scale's weight")
def shared_parameters_and_modules_are_yielded_once(tt, case):
    net = _shared(tt)
    return {"named_parameters()": _names(net.named_parameters()), "parameters() count": len(list(net.parameters())),
            "named_modules()": _names(net.named_modules()), "named_children()": _names(net.named_children()),
            "named_parameters(remove_duplicate=False)": _names(net.named_parameters(remove_duplicate=False))}


@shared_parameters_and_modules_are_yielded_once.expected
def _(case):
    return {"named_parameters()": ["tied", "block.shift"], "parameters() count": 2,
            "named_modules()": ["", "first", "block"], "named_children()": ["first", "block"],
            "named_parameters(remove_duplicate=False)": ["tied", "first.weight", "block.shift", "block.scale.weight"]}


# ---------------------------------------------------------------------------------------------------
# 04.4 train, eval, zero_grad


@check(task="04.4", points=2, inputs=_nested_case, examples=5,
       describe=lambda case: f"eval(), then encoder.train(), then train(), then train('yes') on "
                             f"{_nested_words(case)} (training flags in named_modules() order)")
def train_and_eval_are_recursive_and_return_self(tt, case):
    net = _nested(tt, case)

    def flags():
        return [bool(module.training) for _, module in net.named_modules()]

    result = {"training at first": flags(), "eval() returns self": net.eval() is net, "after eval()": flags()}
    net.encoder.train()
    result["after encoder.train()"] = flags()
    result["train() returns self"] = net.train() is net
    result["after train()"] = flags()
    result["train('yes') raises"] = capture_error(lambda: net.train("yes"))["raised"]
    return result


@train_and_eval_are_recursive_and_return_self.expected
def _(case):
    names = _nested_module_names(case)
    count = len(names)
    in_encoder = [name == "encoder" or name.startswith("encoder.") for name in names]
    return {"training at first": [True] * count, "eval() returns self": True, "after eval()": [False] * count,
            "after encoder.train()": in_encoder, "train() returns self": True, "after train()": [True] * count,
            "train('yes') raises": "ValueError"}


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
    shapes_ = _nested_parameter_shapes(case)
    zeroed = [None] + [np.zeros(shape, dtype=np.float32) for shape in shapes_[1:]]
    return {"grads after zero_grad(set_to_none=False)": zeroed,
            "grad is None after zero_grad()": [True] * len(shapes_)}


# ---------------------------------------------------------------------------------------------------
# 04.5 state_dict and load_state_dict


@check(task="04.5", points=2, inputs=_nested_case, examples=5,
       describe=lambda case: f"state_dict() of {_nested_words(case)}, and of the shared-module tree: [keys, "
                             f"values, are float32 numpy arrays, the parameter after editing the returned "
                             f"array, keys of the shared tree]")
def state_dict_holds_float32_copies_under_dotted_names(tt, case):
    net = _nested(tt, case)
    state = net.state_dict()
    kinds = [type(value).__name__ + " " + str(getattr(value, "dtype", "")) for value in state.values()]
    values = [np.array(value, dtype=np.float64) for value in state.values()]
    first = next(iter(state.values()))
    first[...] = 42.0
    untouched = next(iter(net.parameters())).numpy().astype(np.float64)
    return {"keys": list(state), "values": values, "types": kinds, "parameter after the edit": untouched,
            "shared tree": list(_shared(tt).state_dict())}


@state_dict_holds_float32_copies_under_dotted_names.expected
def _(case):
    names = _nested_parameter_names(case)
    values = ([np.ones(1)] if case["own"] else []) + [
        v for width in case["widths"] for v in (np.zeros(width), np.arange(1.0, width + 1.0))]
    return {"keys": names, "values": values, "types": ["ndarray float32"] * len(names),
            "parameter after the edit": values[0],
            "shared tree": ["tied", "first.weight", "block.shift", "block.scale.weight"]}


@st.composite
def _round_trip_case(draw):
    case = draw(_nested_case)
    sizes = [1] if case["own"] else []
    for width in case["widths"]:
        sizes += [width, width]
    case["values"] = [draw(floats_arrays((size,), dtype=np.float32)) for size in sizes]
    case["x"] = draw(floats_arrays((case["widths"][0],), dtype=np.float32))
    case["as_tensors"] = draw(st.booleans())
    return case


@check(task="04.5", points=3, inputs=_round_trip_case(), examples=10,
       describe=lambda case: f"load_state_dict of a trained copy's state_dict "
                             f"({'Tensor' if case['as_tensors'] else 'array'} values) into a fresh copy of "
                             f"{_nested_words(case)}: [the returned keys, "
                             f"parameter values, same Parameter objects as before, encoder outputs of both]")
def load_state_dict_round_trip_gives_identical_values_and_outputs(tt, case):
    trained = _nested(tt, case)
    for param, value in zip(trained.parameters(), case["values"]):
        param.data = np.array(value, dtype=np.float32)
    state = trained.state_dict()
    if case["as_tensors"]:
        state = {name: tt.Tensor(value) for name, value in state.items()}
    fresh = _nested(tt, case)
    before = list(fresh.parameters())
    x = tt.Tensor(case["x"])
    result = fresh.load_state_dict(state)
    return {"returned": [list(result.missing_keys), list(result.unexpected_keys)],
            "values": [p.numpy() for p in fresh.parameters()],
            "same objects": [a is b for a, b in zip(before, fresh.parameters())],
            "outputs": [trained.encoder(x).numpy(), fresh.encoder(x).numpy()]}


@load_state_dict_round_trip_gives_identical_values_and_outputs.verdict
def _(case, output):
    what = f"load_state_dict of a trained copy's state into a fresh copy of {_nested_words(case)}"
    if not isinstance(output, dict) or set(output) != {"returned", "values", "same objects", "outputs"}:
        raise CheckFailed(f"{what}: expected the check's four results but got {output!r:.80}")
    if output["returned"] != [[], []]:
        raise CheckFailed(f"{what}: expected it to return ([], []) (no missing or unexpected keys), got "
                          f"{output['returned']}")
    for index, (got, value) in enumerate(zip(output["values"], case["values"])):
        if np.asarray(got).dtype != np.float32 or not np.array_equal(got, value):
            raise CheckFailed(f"{what}: parameter {index} should hold the loaded float32 values {value} but "
                              f"holds {got!r:.80}")
    if not all(output["same objects"]):
        raise CheckFailed(f"{what}: the model's Parameter objects were replaced; load_state_dict must copy "
                          f"the values into the existing Parameters")
    trained_out, fresh_out = output["outputs"]
    if not np.array_equal(trained_out, fresh_out):
        raise CheckFailed(f"{what}: the loaded model's output {fresh_out} differs from the original's "
                          f"{trained_out}")


def _all_keys(case):
    return _nested_parameter_names(case)


@st.composite
def _strict_case(draw):
    case = draw(_nested_case)
    keys = _all_keys(case)
    drop = draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    extra = draw(st.lists(st.sampled_from(["bogus", "head.weight", "encoder.scale.bias", "layers.9.shift"]),
                          unique=True, max_size=2))
    if not any(drop) and not extra:
        drop[0] = True
    case["drop"], case["extra"] = drop, extra
    return case


def _strict_state(case):
    """(missing keys, unexpected keys) of the strict case."""
    keys = _all_keys(case)
    return [k for k, d in zip(keys, case["drop"]) if d], list(case["extra"])


@check(task="04.5", points=2, inputs=_strict_case(), examples=10,
       describe=lambda case: f"load_state_dict (strict) of a state without {_strict_state(case)[0]} and with "
                             f"the extra keys {case['extra']} into {_nested_words(case)}: the error raised")
def load_state_dict_strict_names_every_missing_and_unexpected_key(tt, case):
    net = _nested(tt, case)
    state = {name: value for (name, value), drop in zip(net.state_dict().items(), case["drop"]) if not drop}
    for name in case["extra"]:
        state[name] = np.zeros(2, dtype=np.float32)
    return capture_error(lambda: net.load_state_dict(state))


@load_state_dict_strict_names_every_missing_and_unexpected_key.verdict
def _(case, output):
    missing, unexpected = _strict_state(case)
    what = f"load_state_dict (strict) with missing keys {missing} and unexpected keys {unexpected}"
    if output.get("raised") != "RuntimeError":
        said = "raised nothing" if output.get("raised") is None else f"raised {output.get('raised')}"
        raise CheckFailed(f"{what}: expected RuntimeError but it {said}")
    absent = [key for key in missing + unexpected if key not in output["message"]]
    if absent:
        raise CheckFailed(f"{what}: the error message does not name {absent}: {output['message']!r:.160}",
                          f"{what}: the error message does not name every bad key")


def _shape_texts(shape):
    """Ways an error message may write a shape: (2, 3), [2, 3], torch.Size([2, 3])."""
    return {str(tuple(shape)), str(list(shape))}


@st.composite
def _mismatch_case(draw):
    case = draw(_nested_case)
    keys = _all_keys(case)
    index = draw(st.integers(0, len(keys) - 1))
    shapes_ = _nested_parameter_shapes(case)
    bad = draw(st.sampled_from([(shapes_[index][0] + 1,), (shapes_[index][0], 2), (shapes_[index][0] + 3,)]))
    case.update(key=keys[index], shape=tuple(shapes_[index]), bad_shape=bad, strict=draw(st.booleans()))
    return case


@check(task="04.5", points=2, inputs=_mismatch_case(), examples=10,
       describe=lambda case: f"load_state_dict(strict={case['strict']}) into {_nested_words(case)} with "
                             f"'{case['key']}' of shape {case['bad_shape']} instead of {case['shape']}: the error")
def load_state_dict_shape_mismatch_is_an_error_naming_key_and_shapes(tt, case):
    net = _nested(tt, case)
    state = net.state_dict()
    state[case["key"]] = np.zeros(case["bad_shape"], dtype=np.float32)
    return capture_error(lambda: net.load_state_dict(state, strict=case["strict"]))


@load_state_dict_shape_mismatch_is_an_error_naming_key_and_shapes.verdict
def _(case, output):
    what = (f"load_state_dict(strict={case['strict']}) with '{case['key']}' of shape {case['bad_shape']} "
            f"where the model has {case['shape']}")
    if output.get("raised") != "RuntimeError":
        said = "raised nothing" if output.get("raised") is None else f"raised {output.get('raised')}"
        raise CheckFailed(f"{what}: expected RuntimeError but it {said}")
    message = output["message"]
    named = case["key"] in message and all(any(text in message for text in _shape_texts(shape))
                                           for shape in (case["shape"], case["bad_shape"]))
    if not named:
        raise CheckFailed(f"{what}: the error message must name the key and both shapes, got {message!r:.160}",
                          f"{what}: the error message does not name the key and both shapes")


@st.composite
def _loose_case(draw):
    case = draw(_strict_case())
    case["fill"] = draw(st.floats(-3, 3, width=32))
    return case


@check(task="04.5", points=2, inputs=_loose_case(), examples=10,
       describe=lambda case: f"load_state_dict(state, strict=False) into {_nested_words(case)}, the state "
                             f"without {_strict_state(case)[0]}, with {case['extra']}, and every other value "
                             f"filled with {case['fill']}: [missing_keys, unexpected_keys, the result as a "
                             f"tuple of 2, parameter values]")
def load_state_dict_not_strict_returns_the_key_lists_and_loads_the_rest(tt, case):
    net = _nested(tt, case)
    state = {name: tt.Tensor(np.full(value.shape, case["fill"], dtype=np.float32))
             for (name, value), drop in zip(net.state_dict().items(), case["drop"]) if not drop}
    for name in case["extra"]:
        state[name] = np.zeros(2, dtype=np.float32)
    result = net.load_state_dict(state, strict=False)
    missing, unexpected = result
    return {"missing_keys": list(result.missing_keys), "unexpected_keys": list(result.unexpected_keys),
            "unpacked": [list(missing), list(unexpected)],
            "values": [p.numpy().astype(np.float64) for p in net.parameters()]}


@load_state_dict_not_strict_returns_the_key_lists_and_loads_the_rest.expected
def _(case):
    missing, unexpected = _strict_state(case)
    initial = ([np.ones(1)] if case["own"] else []) + [
        v for width in case["widths"] for v in (np.zeros(width), np.arange(1.0, width + 1.0))]
    fill = float(np.float32(case["fill"]))
    values = [value if drop else np.full(value.shape, fill) for value, drop in zip(initial, case["drop"])]
    return {"missing_keys": missing, "unexpected_keys": unexpected, "unpacked": [missing, unexpected],
            "values": values}


@st.composite
def _linear_round_trip_case(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=2, max_size=4))
    return {"sizes": sizes, "seeds": draw(st.lists(st.integers(0, 2**31), min_size=2, max_size=2, unique=True)),
            "x": draw(floats_arrays((3, sizes[0]), dtype=np.float32))}


@check(task="04.9", points=2, inputs=_linear_round_trip_case(), examples=10,
       describe=lambda case: f"Sequential of Linear layers of sizes {case['sizes']} (seed {case['seeds'][0]}), "
                             f"its state_dict loaded into a fresh one (seed {case['seeds'][1]}): outputs on x of "
                             f"shape (3, {case['sizes'][0]}) [original, fresh before loading, fresh after]")
def state_dict_round_trip_of_linear_layers_gives_identical_outputs(tt, case):
    def build(seed):
        tt.manual_seed(seed)
        sizes = case["sizes"]
        return tt.nn.Sequential(*[tt.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])

    original, fresh = build(case["seeds"][0]), build(case["seeds"][1])
    x = tt.Tensor(case["x"])
    before = fresh(x).numpy().copy()
    fresh.load_state_dict(original.state_dict())
    return [original(x).numpy(), before, fresh(x).numpy()]


@state_dict_round_trip_of_linear_layers_gives_identical_outputs.verdict
def _(case, output):
    what = f"a Sequential of Linear layers of sizes {case['sizes']} loaded from another's state_dict"
    if not isinstance(output, list) or len(output) != 3:
        raise CheckFailed(f"{what}: expected three outputs but got {output!r:.80}")
    original, before, after = (np.asarray(o) for o in output)
    if np.array_equal(original, before):
        raise CheckFailed(f"{what}: two different seeds gave identical models before loading, so the "
                          f"initialisation is not random")
    if not np.array_equal(original, after):
        raise CheckFailed(f"{what}: after loading, the outputs {after.round(4).tolist()} differ from the "
                          f"original model's {original.round(4).tolist()}")


# ---------------------------------------------------------------------------------------------------
# 04.6 Module.__repr__


def _indent(text):
    first, *rest = text.split("\n")
    return "\n".join([first] + ["  " + line for line in rest])


def _render(spec):
    """PyTorch's repr of a module built by _build, written independently."""
    kind = spec[0]
    if kind == "scale":
        return f"Scale(n={spec[1]})"
    if kind == "block":
        return f"Block(\n  (scale): Scale(n={spec[1]})\n)"
    name = "Tagged" if kind == "tagged" else "Module"
    extra = [f"tag{k}={spec[1]}" for k in range(spec[2])] if kind == "tagged" else []
    children = [f"({child_name}): " + ("None" if child is None else _indent(_render(child)))
                for child_name, child in spec[-1]]
    lines = extra + children
    if not children and len(extra) <= 1:
        return f"{name}({''.join(extra)})"
    return f"{name}(\n  " + "\n  ".join(lines) + "\n)"


def _tree(depth):
    leaf = st.one_of(st.tuples(st.just("scale"), st.integers(1, 9)), st.tuples(st.just("block"), st.integers(1, 9)))
    if depth == 0:
        return leaf
    children = st.lists(st.tuples(st.sampled_from(["0", "1", "encoder", "head", "fc", "blocks"]),
                                  st.one_of(st.none(), _tree(depth - 1))),
                        max_size=3, unique_by=lambda pair: pair[0])
    holder = st.tuples(st.just("holder"), children)
    tagged = st.tuples(st.just("tagged"), st.sampled_from(["a", "x7"]), st.integers(0, 2), children)
    return st.one_of(leaf, holder, tagged)


@check(task="04.6", points=2, inputs=st.fixed_dictionaries({"tree": _tree(2)}), examples=25,
       describe=lambda case: f"repr of the module tree {case['tree']} (holder: a plain Module with those "
                             f"children; tagged: extra_repr of that many lines 'tagK=tag', then children)")
def repr_of_nested_modules_is_pytorchs(tt, case):
    return repr(_build(tt, _toy(tt), case["tree"]))


@repr_of_nested_modules_is_pytorchs.expected
def _(case):
    return _render(case["tree"])


@check(task="04.6", points=1,
       describe=lambda case: "repr of Module(), Scale(3) (extra_repr 'n=3'), a module with a two-line "
                             "extra_repr and no children, and Block(2)")
def repr_of_leaf_and_simple_modules(tt, case):
    toy = _toy(tt)
    return [repr(tt.nn.Module()), repr(toy["Scale"](3)), repr(toy["Tagged"]("a", 2)), repr(toy["Block"](2))]


@repr_of_leaf_and_simple_modules.expected
def _(case):
    return ["Module()", "Scale(n=3)", "Tagged(\n  tag0=a\n  tag1=a\n)", "Block(\n  (scale): Scale(n=2)\n)"]


# ---------------------------------------------------------------------------------------------------
# 04.7 Linear initialisation

_linear_sizes = st.fixed_dictionaries({"in": st.integers(1, 7), "out": st.integers(1, 7), "bias": st.booleans()})


@check(task="04.7", points=2, inputs=_linear_sizes, examples=10,
       describe=lambda case: f"Linear({case['in']}, {case['out']}, bias={case['bias']}): [weight shape, weight "
                             f"dtype, requires_grad, bias shape (None without bias), parameter names, "
                             f"in_features, out_features]")
def linear_parameters_have_pytorchs_shapes_and_names(tt, case):
    layer = tt.nn.Linear(case["in"], case["out"], bias=case["bias"])
    bias = None if layer.bias is None else [list(layer.bias.shape), str(layer.bias.numpy().dtype)]
    return [list(layer.weight.shape), str(layer.weight.numpy().dtype), bool(layer.weight.requires_grad), bias,
            _names(layer.named_parameters()), layer.in_features, layer.out_features]


@linear_parameters_have_pytorchs_shapes_and_names.expected
def _(case):
    bias = [[case["out"]], "float32"] if case["bias"] else None
    names = ["weight", "bias"] if case["bias"] else ["weight"]
    return [[case["out"], case["in"]], "float32", True, bias, names, case["in"], case["out"]]


@check(task="04.7", points=2, examples=3, timeout=20,
       inputs=st.fixed_dictionaries({"in": st.sampled_from([3, 50, 400, 1000]), "seed": st.integers(0, 2**31)}),
       describe=lambda case: f"Linear({case['in']}, {max(200_000 // case['in'], 500)}) after manual_seed"
                             f"({case['seed']}): the weight and bias values")
def linear_initialisation_is_uniform_within_one_over_sqrt_in(tt, case):
    tt.manual_seed(case["seed"])
    layer = tt.nn.Linear(case["in"], max(200_000 // case["in"], 500))
    return [layer.weight.numpy(), layer.bias.numpy()]


@linear_initialisation_is_uniform_within_one_over_sqrt_in.verdict
def _(case, output):
    fan_in = case["in"]
    what = f"Linear({fan_in}, {max(200_000 // fan_in, 500)}) initialisation"
    bound = 1 / math.sqrt(fan_in)
    weight, bias = (np.asarray(o, dtype=np.float64) for o in output)
    for name, values in (("weight", weight), ("bias", bias)):
        if np.abs(values).max() > bound * (1 + 1e-6):
            raise CheckFailed(f"{what}: {name} values must lie within ±1/sqrt(in_features) = ±{bound:.5f}, "
                              f"found {values.flat[np.abs(values).argmax()]:.5f}")
        if np.unique(values).size < values.size // 2:
            raise CheckFailed(f"{what}: {name} values are not random (only {np.unique(values).size} distinct "
                              f"values among {values.size})")
    uniform_std = bound / math.sqrt(3)
    if abs(weight.std() / uniform_std - 1) > 0.02 or abs(weight.mean()) > 0.02 * bound:
        raise CheckFailed(f"{what}: the weight's mean {weight.mean():.5f} and std {weight.std():.5f} should be "
                          f"those of U(-{bound:.4f}, {bound:.4f}): 0 and {uniform_std:.5f}")
    quarters = np.histogram(weight, bins=4, range=(-bound, bound))[0] / weight.size
    if np.abs(quarters - 0.25).max() > 0.01:
        raise CheckFailed(f"{what}: the weight should be spread evenly over [-{bound:.4f}, {bound:.4f}], but "
                          f"the quarters of that range hold {np.round(quarters, 3).tolist()} of the values")
    if abs(bias.std() / uniform_std - 1) > 0.15:
        raise CheckFailed(f"{what}: the bias's std {bias.std():.5f} should be close to that of "
                          f"U(-{bound:.4f}, {bound:.4f}), {uniform_std:.5f}")


@check(task="04.7", points=2, examples=10,
       inputs=st.lists(st.integers(0, 2**31), min_size=2, max_size=2, unique=True).map(lambda s: {"seeds": s}),
       describe=lambda case: f"manual_seed({case['seeds'][0]}), Linear(5, 4); again manual_seed"
                             f"({case['seeds'][0]}), Linear(5, 4); then manual_seed({case['seeds'][1]}), "
                             f"Linear(5, 4): [weights and biases equal for the same seed, different for "
                             f"different seeds]")
def linear_initialisation_is_repeatable_with_manual_seed(tt, case):
    layers = []
    for seed in (case["seeds"][0], case["seeds"][0], case["seeds"][1]):
        tt.manual_seed(seed)
        layers.append(tt.nn.Linear(5, 4))
    first, again, other = ([layer.weight.numpy().copy(), layer.bias.numpy().copy()] for layer in layers)
    return [bool(np.array_equal(first[0], again[0]) and np.array_equal(first[1], again[1])),
            bool(np.array_equal(first[0], other[0])), bool(np.array_equal(first[1], other[1]))]


@linear_initialisation_is_repeatable_with_manual_seed.expected
def _(case):
    return [True, False, False]


@check(task="04.7", points=1, inputs=_linear_sizes, examples=5,
       describe=lambda case: f"repr(Linear({case['in']}, {case['out']}, bias={case['bias']}))")
def linear_repr_is_pytorchs(tt, case):
    return repr(tt.nn.Linear(case["in"], case["out"], bias=case["bias"]))


@linear_repr_is_pytorchs.expected
def _(case):
    return f"Linear(in_features={case['in']}, out_features={case['out']}, bias={case['bias']})"


# ---------------------------------------------------------------------------------------------------
# 04.8 Linear.forward


@st.composite
def _linear_case(draw, dtype=np.float32, gradient=False):
    fan_in, fan_out = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    leading = draw(shapes(min_dims=0, max_dims=2, max_side=4))
    case = {"x": draw(floats_arrays(leading + (fan_in,), dtype=dtype)),
            "w": draw(floats_arrays((fan_out, fan_in), -1.0, 1.0, dtype=dtype)),
            "b": draw(floats_arrays((fan_out,), -1.0, 1.0, dtype=dtype)), "bias": draw(st.booleans())}
    if gradient:
        case["g"] = draw(upstream(leading + (fan_out,)))
    return case


def _linear_words(case):
    fan_out, fan_in = case["w"].shape
    return f"Linear({fan_in}, {fan_out}, bias={case['bias']}) on an input of shape {case['x'].shape}"


def _linear_with(tt, case):
    """A Linear layer holding the case's weight and bias (any dtype: the arrays are set directly)."""
    fan_out, fan_in = case["w"].shape
    layer = tt.nn.Linear(fan_in, fan_out, bias=case["bias"])
    layer.weight.data = case["w"]
    if case["bias"]:
        layer.bias.data = case["b"]
    return layer


def _affine(x, w, b):
    return x @ w.T + b


@check(task="04.8", points=2, inputs=_linear_case(), dtype=True, rtol=1e-5, atol=1e-5,
       describe=lambda case: f"{_linear_words(case)} (float32): the output")
def linear_forward_matches_numpy_on_any_leading_shape(tt, case):
    return _linear_with(tt, case)(tt.Tensor(case["x"])).numpy()


@linear_forward_matches_numpy_on_any_leading_shape.expected
def _(case):
    x, w = case["x"].astype(np.float64), case["w"].astype(np.float64)
    out = x @ w.T + (case["b"].astype(np.float64) if case["bias"] else 0.0)
    return out.astype(np.float32)


@check(task="04.8", points=3, inputs=_linear_case(np.float64, gradient=True), **GRAD_TOL,
       describe=lambda case: f"{_linear_words(case)}, backward(g) in float64: [input.grad, weight.grad, "
                             f"bias.grad (None without bias)]")
def linear_gradients_match_central_differences(tt, case):
    layer = _linear_with(tt, case)
    x = tt.Tensor(case["x"], requires_grad=True)
    layer(x).backward(tt.Tensor(case["g"]))
    bias_grad = None if not case["bias"] else layer.bias.grad.numpy()
    return [x.grad.numpy(), layer.weight.grad.numpy(), bias_grad]


@linear_gradients_match_central_differences.expected
def _(case):
    b = case["b"] if case["bias"] else np.zeros_like(case["b"])
    grad_x, grad_w, grad_b = central_difference(_affine, [case["x"], case["w"], b], case["g"])
    return [grad_x, grad_w, grad_b if case["bias"] else None]


@st.composite
def _bad_input_case(draw):
    fan_in = draw(st.integers(1, 6))
    leading = draw(shapes(min_dims=0, max_dims=2, max_side=4))
    last = draw(st.integers(1, 8).filter(lambda n: n != fan_in))
    shape = draw(st.sampled_from([leading + (last,), ()]))
    return {"in": fan_in, "out": draw(st.integers(1, 4)), "shape": shape}


@check(task="04.8", points=2, inputs=_bad_input_case(), examples=15,
       describe=lambda case: f"Linear({case['in']}, {case['out']}) on an input of shape {case['shape']}: the "
                             f"error")
def linear_rejects_a_mis_shaped_input_naming_both_shapes(tt, case):
    layer = tt.nn.Linear(case["in"], case["out"])
    return capture_error(lambda: layer(tt.Tensor(np.ones(case["shape"], dtype=np.float32))))


@linear_rejects_a_mis_shaped_input_naming_both_shapes.verdict
def _(case, output):
    what = f"Linear({case['in']}, {case['out']}) on an input of shape {case['shape']}"
    if output.get("raised") != "ValueError":
        said = "raised nothing" if output.get("raised") is None else f"raised {output.get('raised')}"
        raise CheckFailed(f"{what}: expected ValueError but it {said}")
    message = output["message"]
    if str(case["in"]) not in message or not any(text in message for text in _shape_texts(case["shape"])):
        raise CheckFailed(f"{what}: the message must name the expected last dimension {case['in']} and the "
                          f"input's shape {case['shape']}, got {message!r:.160}",
                          f"{what}: the message does not name both the expected last dimension and the shape")


# ---------------------------------------------------------------------------------------------------
# 04.9 Sequential


@st.composite
def _chain_case(draw):
    sizes = draw(st.lists(st.integers(1, 5), min_size=2, max_size=3))
    batch = draw(st.integers(1, 4))
    weights = [draw(floats_arrays((b, a), -1.0, 1.0, dtype=np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]
    biases = [draw(floats_arrays((b,), -1.0, 1.0, dtype=np.float32)) for b in sizes[1:]]
    return {"sizes": sizes, "weights": weights, "biases": biases,
            "x": draw(floats_arrays((batch, sizes[0]), dtype=np.float32))}


@check(task="04.9", points=2, inputs=_chain_case(), rtol=1e-5, atol=1e-5,
       describe=lambda case: f"Sequential(Linear, Scale, Linear, ...) through sizes {case['sizes']} (a Scale "
                             f"(weights 1..n) after each Linear) on x of shape {case['x'].shape}, and "
                             f"Sequential()(x): [output, empty Sequential's output]")
def sequential_applies_its_modules_in_order(tt, case):
    toy = _toy(tt)
    modules = []
    for weight, bias in zip(case["weights"], case["biases"]):
        layer = tt.nn.Linear(weight.shape[1], weight.shape[0])
        layer.weight.data, layer.bias.data = weight, bias
        modules += [layer, toy["Scale"](weight.shape[0])]
    x = tt.Tensor(case["x"])
    return [tt.nn.Sequential(*modules)(x).numpy(), tt.nn.Sequential()(x).numpy()]


@sequential_applies_its_modules_in_order.expected
def _(case):
    out = case["x"].astype(np.float64)
    for weight, bias in zip(case["weights"], case["biases"]):
        out = (out @ weight.T.astype(np.float64) + bias) * np.arange(1.0, weight.shape[0] + 1.0)
    return [out, case["x"]]


@check(task="04.9", points=2, inputs=st.integers(1, 5).map(lambda n: {"n": n}), examples=5,
       describe=lambda case: f"a Sequential of {case['n']} Scale modules: [s[i] is the i-th module for i in "
                             f"-n..n-1, len, iteration order, append returns s, its child name, s[1:] "
                             f"(type, child names, modules), the error of s[n+1]]")
def sequential_indexing_len_iteration_and_append(tt, case):
    toy = _toy(tt)
    n = case["n"]
    modules = [toy["Scale"](k + 1) for k in range(n)]
    seq = tt.nn.Sequential(*modules)
    indexed = [seq[i] is modules[i] for i in range(-n, n)]
    iterated = [a is b for a, b in zip(seq, modules)]
    length = len(seq)
    extra = toy["Scale"](9)
    appended = seq.append(extra) is seq
    tail = seq[1:]
    return {"indexing": indexed, "len": length, "iteration": iterated + [len(list(seq)) == n + 1],
            "append": [appended, _names(seq.named_children())[-1], seq[-1] is extra],
            "slice": [type(tail).__name__, _names(tail.named_children()),
                      [a is b for a, b in zip(tail, modules[1:] + [extra])]],
            "out of range": capture_error(lambda: seq[n + 1])["raised"]}


@sequential_indexing_len_iteration_and_append.expected
def _(case):
    n = case["n"]
    return {"indexing": [True] * (2 * n), "len": n, "iteration": [True] * (n + 1),
            "append": [True, str(n), True],
            "slice": ["Sequential", [str(k) for k in range(1, n + 1)], [True] * n],
            "out of range": "IndexError"}


@check(task="04.11", points=2,
       inputs=st.fixed_dictionaries({"in": st.integers(1, 900), "hidden": st.integers(1, 300),
                                     "out": st.integers(1, 20), "p": st.sampled_from([0.5, 0.1, 0.25, 0.0])}),
       examples=5,
       describe=lambda case: f"Sequential(Linear({case['in']}, {case['hidden']}), ReLU(), Sequential(Linear("
                             f"{case['hidden']}, {case['out']}, bias=False), Dropout(p={case['p']}))): "
                             f"[named_parameters() names, repr]")
def sequential_parameter_names_and_nested_repr(tt, case):
    nn = tt.nn
    model = nn.Sequential(nn.Linear(case["in"], case["hidden"]), nn.ReLU(),
                          nn.Sequential(nn.Linear(case["hidden"], case["out"], bias=False), nn.Dropout(p=case["p"])))
    return [_names(model.named_parameters()), repr(model)]


@sequential_parameter_names_and_nested_repr.expected
def _(case):
    return [["0.weight", "0.bias", "2.0.weight"],
            f"Sequential(\n"
            f"  (0): Linear(in_features={case['in']}, out_features={case['hidden']}, bias=True)\n"
            f"  (1): ReLU()\n"
            f"  (2): Sequential(\n"
            f"    (0): Linear(in_features={case['hidden']}, out_features={case['out']}, bias=False)\n"
            f"    (1): Dropout(p={case['p']}, inplace=False)\n"
            f"  )\n"
            f")"]


# ---------------------------------------------------------------------------------------------------
# 04.10 ModuleList


@check(task="04.10", points=3, inputs=st.lists(st.integers(1, 4), min_size=1, max_size=4).map(
           lambda widths: {"widths": widths}), examples=8,
       describe=lambda case: f"a Module with 'blocks' a ModuleList of Units (each: 'fc' a Scale) of widths "
                             f"{case['widths']} and 'plain' a Python list of one more Unit: [named_parameters() "
                             f"names, named_modules() names]")
def modulelist_registers_its_modules_under_dotted_names(tt, case):
    toy = _toy(tt)
    net = tt.nn.Module()
    net.blocks = tt.nn.ModuleList([toy["Unit"](width) for width in case["widths"]])
    net.plain = [toy["Unit"](1)]
    return [_names(net.named_parameters()), _names(net.named_modules())]


@modulelist_registers_its_modules_under_dotted_names.expected
def _(case):
    count = len(case["widths"])
    modules = ["", "blocks"]
    for index in range(count):
        modules += [f"blocks.{index}", f"blocks.{index}.fc"]
    return [[f"blocks.{index}.fc.weight" for index in range(count)], modules]


@check(task="04.10", points=2, inputs=st.integers(1, 4).map(lambda n: {"n": n}), examples=4,
       describe=lambda case: f"a ModuleList of {case['n']} Scales: [l[i] for i in -n..n-1, len, iteration, "
                             f"append and extend return the list, l[1] = new (names and lookups), l[1:] (type "
                             f"and modules), ModuleList() length, the error of l[len(l)]]")
def modulelist_append_extend_index_and_set(tt, case):
    toy = _toy(tt)
    n = case["n"]
    modules = [toy["Scale"](k + 1) for k in range(n)]
    layers = tt.nn.ModuleList(modules)
    indexed = [layers[i] is modules[i] for i in range(-n, n)]
    iterated = [a is b for a, b in zip(layers, modules)] + [len(list(layers)) == n]
    length = len(layers)
    more = [toy["Scale"](7), toy["Scale"](8)]
    chained = [layers.append(more[0]) is layers, layers.extend([more[1]]) is layers, len(layers)]
    new = toy["Scale"](5)
    layers[1] = new
    replaced = [layers[1] is new, _names(layers.named_children()),
                sum(1 for p in layers.parameters() if p is new.weight)]
    tail = layers[1:]
    sliced = [type(tail).__name__, len(tail), all(a is b for a, b in zip(tail, list(layers)[1:]))]
    return {"indexing": indexed, "len": length, "iteration": iterated, "append and extend": chained,
            "set": replaced, "slice": sliced, "empty": len(tt.nn.ModuleList()),
            "out of range": capture_error(lambda: layers[len(layers)])["raised"]}


@modulelist_append_extend_index_and_set.expected
def _(case):
    n = case["n"]
    return {"indexing": [True] * (2 * n), "len": n, "iteration": [True] * (n + 1),
            "append and extend": [True, True, n + 2], "set": [True, [str(k) for k in range(n + 2)], 1],
            "slice": ["ModuleList", n + 1, True], "empty": 0, "out of range": "IndexError"}


# ---------------------------------------------------------------------------------------------------
# 04.11 Dropout

_DROPOUT_SIZE = 100_000


def _dropout_input(seed, size):
    """float32 values in [1, 2] (none is zero, so a zero in the output is a dropped element)."""
    return np.random.default_rng(seed).uniform(1.0, 2.0, size).astype(np.float32)


def _dropout_upstream(seed, size):
    """A float32 upstream gradient of magnitudes in [0.25, 2], either sign."""
    rng = np.random.default_rng(seed + 1)
    return (rng.uniform(0.25, 2.0, size) * rng.choice([-1.0, 1.0], size)).astype(np.float32)


@check(task="04.11", points=1, dtype=True,
       inputs=shapes(max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape, dtype=np.float32), "p": st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0])})),
       describe=lambda case: f"Dropout(p={case['p']}).eval() on x of shape {case['x'].shape}: the output")
def dropout_in_eval_mode_is_the_identity(tt, case):
    drop = tt.nn.Dropout(p=case["p"])
    drop.eval()
    return drop(tt.Tensor(case["x"])).numpy()


@dropout_in_eval_mode_is_the_identity.expected
def _(case):
    return case["x"]


@check(task="04.11", points=3, examples=4,
       inputs=st.fixed_dictionaries({"p": st.sampled_from([0.1, 0.25, 0.5, 0.8]), "seed": st.integers(0, 2**31)}),
       describe=lambda case: f"Dropout(p={case['p']}) in training mode on {_DROPOUT_SIZE:,} float32 values in "
                             f"[1, 2]: the output")
def dropout_in_training_zeroes_about_p_and_scales_the_rest(tt, case):
    x = _dropout_input(case["seed"], _DROPOUT_SIZE)
    return tt.nn.Dropout(p=case["p"])(tt.Tensor(x)).numpy()


@dropout_in_training_zeroes_about_p_and_scales_the_rest.verdict
def _(case, output):
    p = case["p"]
    what = f"Dropout(p={p}) in training mode on {_DROPOUT_SIZE:,} values in [1, 2]"
    x = _dropout_input(case["seed"], _DROPOUT_SIZE)
    out = np.asarray(output)
    if out.shape != x.shape or out.dtype != np.float32:
        raise CheckFailed(f"{what}: expected a float32 output of shape {x.shape}, got {out.dtype} {out.shape}")
    dropped = float(np.mean(out == 0))
    margin = 5 * math.sqrt(p * (1 - p) / x.size)
    if abs(dropped - p) > margin:
        raise CheckFailed(f"{what}: {dropped:.4f} of the elements were zeroed, expected {p} ± {margin:.4f}")
    kept = out != 0
    expected = x[kept] * np.float32(1 / (1 - p))
    wrong = ~np.isclose(out[kept], expected, rtol=1e-6, atol=0)
    if wrong.any():
        index = int(np.flatnonzero(kept)[np.argmax(wrong)])
        raise CheckFailed(f"{what}: a kept element must be scaled by exactly 1/(1-p) = {1 / (1 - p):.6g}: "
                          f"input {float(x[index]):.7g} gave {float(out[index]):.7g}",
                          f"{what}: the kept elements are not scaled by exactly 1/(1-p)")


@check(task="04.11", points=2, examples=10,
       inputs=st.fixed_dictionaries({"p": st.sampled_from([0.2, 0.5, 0.7]), "seed": st.integers(0, 2**31)}),
       describe=lambda case: f"Dropout(p={case['p']}) in training mode, y = drop(x) for 1,000 values in [1, 2], "
                             f"y.backward(g): [y, x.grad]")
def dropout_gradient_is_the_mask_over_one_minus_p(tt, case):
    x = tt.Tensor(_dropout_input(case["seed"], 1000), requires_grad=True)
    y = tt.nn.Dropout(p=case["p"])(x)
    y.backward(tt.Tensor(_dropout_upstream(case["seed"], 1000)))
    return [y.numpy(), x.grad.numpy()]


@dropout_gradient_is_the_mask_over_one_minus_p.verdict
def _(case, output):
    p = case["p"]
    what = f"Dropout(p={p}) in training mode, y.backward(g)"
    y, grad = (np.asarray(o) for o in output)
    mask = y != 0
    if mask.all() or not mask.any():
        raise CheckFailed(f"{what}: expected some elements dropped and some kept out of 1,000, got "
                          f"{int((~mask).sum())} dropped")
    expected = _dropout_upstream(case["seed"], 1000).astype(np.float64) * mask / (1 - p)
    wrong = ~np.isclose(grad, expected, rtol=1e-5, atol=1e-7)
    if grad.shape != expected.shape or wrong.any():
        index = int(np.argmax(wrong)) if grad.shape == expected.shape else 0
        raise CheckFailed(f"{what}: x.grad must be g * mask / (1 - p), with the mask of the forward (element "
                          f"{index}: {'kept' if mask[index] else 'dropped'}, expected {expected[index]:.6g}, got "
                          f"{np.ravel(grad)[index] if grad.size else 'nothing'})",
                          f"{what}: x.grad is not g * mask / (1 - p) with the forward's mask")


@check(task="04.11", points=1, rtol=0, atol=0,
       inputs=shapes(min_dims=1, max_dims=3).flatmap(lambda shape: st.fixed_dictionaries({
           "x": floats_arrays(shape, dtype=np.float32)})),
       describe=lambda case: f"Dropout(p=0) and Dropout(p=1) in training mode on x of shape {case['x'].shape}: "
                             f"[p=0 output, p=1 output, x.grad after p=1's output.sum().backward()]")
def dropout_p0_keeps_everything_and_p1_drops_everything(tt, case):
    x = tt.Tensor(case["x"], requires_grad=True)
    kept = tt.nn.Dropout(p=0.0)(x).numpy()
    none = tt.nn.Dropout(p=1.0)(x)
    none.sum().backward()
    return [kept, none.numpy(), x.grad.numpy()]


@dropout_p0_keeps_everything_and_p1_drops_everything.expected
def _(case):
    zeros = np.zeros_like(case["x"])
    return [case["x"], zeros, zeros]


@check(task="04.11", points=1,
       inputs=st.sampled_from([-0.5, -1e-3, 1.0001, 2.0, -3]).map(lambda p: {"p": p}), examples=5,
       describe=lambda case: f"Dropout(p={case['p']}), and Dropout(p=0.0), Dropout(p=1.0): the errors raised")
def dropout_rejects_p_outside_zero_one(tt, case):
    return [capture_error(lambda: tt.nn.Dropout(p=case["p"]))["raised"],
            capture_error(lambda: tt.nn.Dropout(p=0.0))["raised"], capture_error(lambda: tt.nn.Dropout(p=1.0))["raised"]]


@dropout_rejects_p_outside_zero_one.expected
def _(case):
    return ["ValueError", None, None]


@check(task="04.11", points=1, examples=5, inputs=st.integers(0, 2**31).map(lambda seed: {"seed": seed}),
       describe=lambda case: f"Dropout(0.5) on 1,000 ones after manual_seed({case['seed']}) twice, then a second "
                             f"call: [same mask after the same seed, a new mask on the next call]")
def dropout_masks_come_from_the_default_generator(tt, case):
    drop = tt.nn.Dropout(0.5)
    x = tt.Tensor(np.ones(1000, dtype=np.float32))
    tt.manual_seed(case["seed"])
    first = drop(x).numpy().copy()
    tt.manual_seed(case["seed"])
    again = drop(x).numpy().copy()
    following = drop(x).numpy().copy()
    return [bool(np.array_equal(first, again)), bool(np.array_equal(again, following))]


@dropout_masks_come_from_the_default_generator.expected
def _(case):
    return [True, False]


@check(task="04.11", points=1, inputs=st.sampled_from([0.5, 0.1, 0.25, 0.0, 1.0]).map(lambda p: {"p": p}),
       examples=4, describe=lambda case: f"repr(Dropout(p={case['p']})) and repr(Dropout())")
def dropout_repr_is_pytorchs(tt, case):
    return [repr(tt.nn.Dropout(p=case["p"])), repr(tt.nn.Dropout())]


@dropout_repr_is_pytorchs.expected
def _(case):
    return [f"Dropout(p={case['p']}, inplace=False)", "Dropout(p=0.5, inplace=False)"]


# ---------------------------------------------------------------------------------------------------
# 04.12 Flatten


@st.composite
def _flatten_case(draw, gradient=False):
    shape = draw(shapes(min_dims=1, max_dims=4, max_side=4))
    ndim = len(shape)
    start = draw(st.integers(0, ndim - 1))
    end = draw(st.integers(start, ndim - 1))
    start = draw(st.sampled_from([start, start - ndim]))
    end = draw(st.sampled_from([end, end - ndim]))
    case = {"x": draw(floats_arrays(shape)), "start": start, "end": end}
    if gradient:
        merged = shape[:start % ndim] + (int(np.prod(shape[start % ndim:end % ndim + 1])),) + shape[end % ndim + 1:]
        case["g"] = draw(upstream(merged))
    return case


def _flat(x, start, end):
    start, end = start % x.ndim, end % x.ndim
    return x.reshape(x.shape[:start] + (int(np.prod(x.shape[start:end + 1])),) + x.shape[end + 1:])


@check(task="04.12", points=2, inputs=_flatten_case(), rtol=0, atol=0,
       describe=lambda case: f"Flatten(start_dim={case['start']}, end_dim={case['end']}) and Flatten() on x of "
                             f"shape {case['x'].shape}: [output, Flatten() output (None for a 1-d x: an error)]")
def flatten_matches_numpy_reshape(tt, case):
    x = tt.Tensor(case["x"])
    default = None if case["x"].ndim < 2 else tt.nn.Flatten()(x).numpy()
    return [tt.nn.Flatten(start_dim=case["start"], end_dim=case["end"])(x).numpy(), default]


@flatten_matches_numpy_reshape.expected
def _(case):
    x = case["x"]
    return [_flat(x, case["start"], case["end"]), None if x.ndim < 2 else x.reshape(x.shape[0], -1)]


@check(task="04.12", points=2, inputs=_flatten_case(gradient=True), **GRAD_TOL,
       describe=lambda case: f"Flatten(start_dim={case['start']}, end_dim={case['end']}) on x of shape "
                             f"{case['x'].shape}, backward(g): x.grad")
def flatten_gradient_matches_central_differences(tt, case):
    x = tt.Tensor(case["x"], requires_grad=True)
    tt.nn.Flatten(start_dim=case["start"], end_dim=case["end"])(x).backward(tt.Tensor(case["g"]))
    return x.grad.numpy()


@flatten_gradient_matches_central_differences.expected
def _(case):
    return central_difference(lambda x: _flat(x, case["start"], case["end"]), [case["x"]], case["g"])[0]


@check(task="04.12", points=1,
       describe=lambda case: "repr(Flatten()), repr(Flatten(0, 2)), repr(Identity()), Identity()(x) is x, and "
                             "Flatten(start_dim=3) on an input of shape (2, 3, 4): the error")
def flatten_and_identity_repr_and_dimension_errors(tt, case):
    x = tt.Tensor(np.ones((2, 3, 4), dtype=np.float32))
    return [repr(tt.nn.Flatten()), repr(tt.nn.Flatten(0, 2)), repr(tt.nn.Identity()), tt.nn.Identity()(x) is x,
            capture_error(lambda: tt.nn.Flatten(start_dim=3)(x))["raised"]]


@flatten_and_identity_repr_and_dimension_errors.expected
def _(case):
    return ["Flatten(start_dim=1, end_dim=-1)", "Flatten(start_dim=0, end_dim=2)", "Identity()", True, "IndexError"]


# ---------------------------------------------------------------------------------------------------
# 04.13 activation modules

_ACTIVATIONS = ["ReLU()", "Sigmoid()", "Tanh()", "GELU(approximate='none')", "GELU(approximate='tanh')", "Softmax(dim={dim})",
                "LogSoftmax(dim={dim})"]


def _activation_module(tt, name, dim):
    nn = tt.nn
    return {"ReLU()": lambda: nn.ReLU(), "Sigmoid()": lambda: nn.Sigmoid(), "Tanh()": lambda: nn.Tanh(),
            "GELU(approximate='none')": lambda: nn.GELU(approximate="none"),
            "GELU(approximate='tanh')": lambda: nn.GELU(approximate="tanh"),
            "Softmax(dim={dim})": lambda: nn.Softmax(dim=dim),
            "LogSoftmax(dim={dim})": lambda: nn.LogSoftmax(dim=dim)}[name]()


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _activation_numpy(name, x, dim):
    if name == "ReLU()":
        return np.maximum(x, 0.0)
    if name == "Sigmoid()":
        return 1 / (1 + np.exp(-x))
    if name == "Tanh()":
        return np.tanh(x)
    if name == "GELU(approximate='none')":
        return x * 0.5 * (1 + _erf(x / math.sqrt(2)))
    if name == "GELU(approximate='tanh')":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    shifted = x - x.max(axis=dim, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
    return np.exp(log_probs) if name.startswith("Softmax") else log_probs


@st.composite
def _activation_case(draw, gradient=False):
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=4))
    x = draw(floats_arrays(shape, -4.0, 4.0))
    if gradient:                       # keep relu's kink out of reach of the finite differences
        x = np.where(np.abs(x) < 1e-3, 0.5, x)
    case = {"x": x, "dim": draw(st.integers(-len(shape), len(shape) - 1))}
    if gradient:
        case["g"] = draw(upstream(shape))
    return case


def _activation_words(case):
    names = ", ".join(name.format(dim=case["dim"]) for name in _ACTIVATIONS)
    return f"{names} on x of shape {case['x'].shape}"


@check(task="04.13", points=2, inputs=_activation_case(), examples=15, rtol=1e-5, atol=1e-6,
       describe=lambda case: f"{_activation_words(case)} (float64): the outputs")
def activation_modules_match_numpy(tt, case):
    x = tt.Tensor(case["x"])
    return {name.format(dim=case["dim"]): _activation_module(tt, name, case["dim"])(x).numpy()
            for name in _ACTIVATIONS}


@activation_modules_match_numpy.expected
def _(case):
    return {name.format(dim=case["dim"]): _activation_numpy(name, case["x"], case["dim"]) for name in _ACTIVATIONS}


@check(task="04.13", points=2, inputs=_activation_case(gradient=True), examples=15, **GRAD_TOL,
       describe=lambda case: f"{_activation_words(case)} (float64), each module's output.backward(g): x.grad")
def activation_module_gradients_match_central_differences(tt, case):
    grads = {}
    for name in _ACTIVATIONS:
        x = tt.Tensor(case["x"], requires_grad=True)
        _activation_module(tt, name, case["dim"])(x).backward(tt.Tensor(case["g"]))
        grads[name.format(dim=case["dim"])] = x.grad.numpy()
    return grads


@activation_module_gradients_match_central_differences.expected
def _(case):
    return {name.format(dim=case["dim"]):
            central_difference(lambda x: _activation_numpy(name, x, case["dim"]), [case["x"]], case["g"])[0]
            for name in _ACTIVATIONS}


@check(task="04.13", points=1, inputs=st.integers(-3, 3).map(lambda dim: {"dim": dim}), examples=4,
       describe=lambda case: f"repr of ReLU(), Sigmoid(), Tanh(), GELU(approximate='none'), GELU(approximate="
                             f"'tanh'), Softmax(dim={case['dim']}), LogSoftmax(dim={case['dim']}), GELU(), "
                             f"Softmax(), LogSoftmax()")
def activation_module_reprs_are_pytorchs(tt, case):
    modules = [_activation_module(tt, name, case["dim"]) for name in _ACTIVATIONS]
    defaults = [tt.nn.GELU(), tt.nn.Softmax(), tt.nn.LogSoftmax()]
    return [repr(module) for module in modules + defaults]


@activation_module_reprs_are_pytorchs.expected
def _(case):
    return [name.format(dim=case["dim"]) for name in _ACTIVATIONS] + [
        "GELU(approximate='none')", "Softmax(dim=-1)", "LogSoftmax(dim=-1)"]
