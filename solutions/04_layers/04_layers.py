# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 Layers
#
# With 02 you can differentiate anything built from tensor ops, and with 03 you have the activation
# functions. A network written that way is a loose heap of tensors, though: you would pass every weight
# to the optimizer by hand, remember which ones belong to which layer, switch dropout off by hand for
# evaluation, and save a model by listing its arrays one by one. PyTorch's answer is `nn.Module`, and it
# is what you build here: an object that *finds its own parameters*.
#
# ```python
# model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
# list(model.parameters())     # the 4 Parameters, found by walking the tree of modules
# model.eval()                 # every sub-module switches to evaluation mode
# model.state_dict()           # {"0.weight": array, "0.bias": array, "2.weight": ..., "2.bias": ...}
# print(model)                 # the tree, in exactly PyTorch's words
# ```
#
# What you build goes into `tinytorch/core/layers.py`, and every public name is exported to
# `tinytorch.nn` (`tt.nn.Linear`, as `torch.nn.Linear`):
#
# | you build | task |
# |---|---|
# | `Parameter`: a tensor that says "train me" | 04.1 |
# | `Module`: registering parameters and sub-modules by attribute (`__setattr__`, `__getattr__`) | 04.2 |
# | `Module`: walking the tree (`named_modules`, `named_parameters`) | 04.3 |
# | `Module`: `train`, `eval`, `zero_grad` | 04.4 |
# | `Module`: `state_dict`, `load_state_dict` | 04.5 |
# | `Linear`: shapes and PyTorch's initialisation | 04.6 |
# | `nn.functional.linear`: the layer's forward and backward as one op | 04.7 |
# | `Sequential` | 04.8 |
# | `ModuleList` | 04.9 |
# | `Dropout` | 04.10 |
# | `Flatten`, `Identity` | 04.11 |
# | `ReLU`, `Sigmoid`, `Tanh`, `GELU`, `Softmax`, `LogSoftmax` as modules | 04.12 |
#
# Almost nothing here is numerical: the maths of a linear layer is one matrix product, and autograd
# already differentiates it. This module is about *structure*, the bookkeeping that every model from
# here to the GPT relies on. It is also where Python's attribute machinery (`__setattr__`,
# `__getattr__`) does real work, so read those parts slowly.
#
# **Before you start.** This notebook runs on *your* 01, 02 and 03: its first exported cell imports
# `Tensor` from `tinytorch.core.tensor`, and the cell of task 04.12 imports the activation functions
# from `tinytorch.core.activations`.
# <!-- tito -->Finish 03 (`tito test 03` at full marks), run `tito export 03`, and restart this notebook's
# kernel whenever you export again. Grade this module with `tito test 04`, which exports 01 to 04
# together.<!-- /tito --><!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->
# Tasks 04.1 to 04.11 need only 01 and 02; task 04.12 calls 03's functions.

# %%
#| default_exp core.layers
import numpy as np

from tinytorch.core.tensor import manual_seed
from tinytorch.core.autograd import gradcheck

# %% [markdown]
# The package file starts with its imports. Inside the package we import from the *defining* module
# (`tinytorch.core.activations`), never from the namespace `tinytorch.nn.functional`, so that no import
# cycle can form. Every other cell of this module is marked `#| export nn`: its public names (those not
# starting with `_`) become `tinytorch.nn.<name>`.

# %%
#| export
import math
from collections import OrderedDict, namedtuple

import numpy as np

from tinytorch.core.tensor import Tensor, as_tensor, default_generator
from tinytorch.core.autograd import Function

__all__ = ["Parameter", "Module", "Linear", "linear", "Sequential", "ModuleList", "Dropout", "Flatten", "Identity",
           "ReLU", "Sigmoid", "Tanh", "GELU", "Softmax", "LogSoftmax"]  # tt.nn, and linear in tt.nn.functional

# %% [markdown]
# ## Parameter: a tensor that says "train me"
#
# A layer's weight is a tensor like any other, but it must be told apart from the tensors a layer
# merely *uses* (an input, a constant, a cached mask): only weights are returned by `parameters()`,
# updated by the optimizer and saved in a checkpoint. PyTorch marks them by type: `nn.Parameter` is a
# subclass of `Tensor` with nothing new but its class, and `requires_grad=True` by default (a weight
# that receives no gradient cannot learn).
#
# `Parameter(data=None, requires_grad=True)`:
#
# - `data` is a `Tensor`, a numpy array or anything `Tensor` accepts; `None` means an empty tensor
#   (shape `(0,)`), as in PyTorch;
# - the values are **float32**, whatever came in: parameters are what the optimizer updates in place,
#   and one float64 weight would silently turn every activation downstream into float64, twice the
#   memory and half the speed. (PyTorch keeps the dtype it is given; in this course a parameter is
#   always float32, so you never have to think about it.)
# - a float32 array is *not* copied: the parameter wraps the array you gave it, as `torch.nn.Parameter`
#   shares the storage of the tensor it is made from.
#
# `Tensor.__init__(data, dtype=np.float32, requires_grad=...)` from 01 does all of this already. The
# repr (given) says what the object is, like PyTorch's: `Parameter containing:` on a line of its own,
# then the tensor.

# %%
#| export nn
class Parameter(Tensor):
    """A Tensor that a Module registers as trainable: float32, requires_grad=True by default."""

    def __init__(self, data=None, requires_grad: bool = True):
        """data: a Tensor, array or nested list (None: an empty tensor of shape (0,))."""
        ### BEGIN SOLUTION 04.1 Parameter
        if data is None:
            data = np.empty(0, dtype=np.float32)
        super().__init__(data, dtype=np.float32, requires_grad=requires_grad)
        ### END SOLUTION

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

# %% [markdown]
# Test 04.1.

# %%
p = Parameter(np.arange(6.0).reshape(2, 3))            # float64 in ...
assert isinstance(p, Tensor) and p.dtype == np.float32 and p.shape == (2, 3)   # ... float32 out
assert p.requires_grad and p.grad is None and p.grad_fn is None
assert not Parameter([1.0, 2.0], requires_grad=False).requires_grad
assert Parameter().shape == (0,) and Parameter().dtype == np.float32
array = np.ones(3, dtype=np.float32)
assert Parameter(array).data is array or np.shares_memory(Parameter(array).data, array)
assert Parameter(Tensor([1.0, 2.0])).data.tolist() == [1.0, 2.0]
print(repr(Parameter([1.0, 2.0])))
assert repr(Parameter([1.0, 2.0])).startswith("Parameter containing:\ntensor([1., 2.]")
assert type(p * 2) is Tensor, "an op on a Parameter gives a plain Tensor, not a new Parameter"

# %% [markdown]
# ## Module: registration by attribute
#
# In PyTorch you never tell a module which tensors are its parameters. You write
#
# ```python
# class MLP(nn.Module):
#     def __init__(self):
#         super().__init__()
#         self.hidden = nn.Linear(784, 256)     # a sub-module
#         self.out = nn.Linear(256, 10)
#         self.scale = nn.Parameter(torch.ones(10))   # a parameter
#         self.name = "mlp"                     # a plain attribute
# ```
#
# and `Module` *watches the assignments*. Python calls `obj.__setattr__(name, value)` for every
# `obj.name = value`, so `Module.__setattr__` can look at the value and file it. That is task 04.2, in
# three branches:
#
# | value | where it goes |
# |---|---|
# | a `Parameter` | `self._parameters[name]` (a dict, in order of registration) |
# | a `Module` | `self._modules[name]` |
# | anything else | the instance's ordinary `__dict__`: `object.__setattr__(self, name, value)` |
#
# A name lives in one place: filing a Parameter removes the name from `__dict__` and `_modules` (and
# filing a Module removes it from `__dict__` and `_parameters`), so that `self.fc = nn.Linear(...)` after
# `self.fc = None` does not leave a stale plain attribute behind. One more case belongs to the first two
# branches: `None` assigned to a name that is *already* a registered parameter (or sub-module) stays in
# that registry with the value `None` (this is how `Linear(..., bias=False)` has `bias = None`, and
# `parameters()` then skips it).
#
# `__init__` creates the registries, `_parameters` and `_modules` (plain dicts, which keep insertion
# order), and sets `training = True`, all three with `object.__setattr__`: going through our own
# `__setattr__` before `_parameters` exists would look for `_parameters` to decide where to put
# `_parameters`. For the same reason, inside `__setattr__` and `__getattr__` find a registry with
# `self.__dict__["_parameters"]` (or `.get`), never `self._parameters`, which would itself go through
# `__getattr__` when it is missing, and recurse.
#
# Reading goes the other way. Python calls `__getattr__(name)` *only when the normal lookup fails*
# (the instance `__dict__`, then the class). Parameters and modules are not in `__dict__`, so every
# `self.hidden` lands in `Module.__getattr__`, which looks in the two registries and otherwise raises
# `AttributeError` with PyTorch's words: `'Linear' object has no attribute 'wieght'`. (It must be
# `AttributeError`, not `KeyError`: `hasattr` and `getattr(obj, name, default)` rely on it.)
#
# **Given: PyTorch's guards.** PyTorch refuses a few assignments that are almost always bugs, and
# `_check_assignment` (given, called by `__setattr__` before your branches) does the same: a plain
# `Tensor` assigned over a registered parameter (the optimizer would no longer see it) or a non-Module
# over a registered sub-module raises `TypeError`, and a Parameter or Module assigned before
# `super().__init__()` (a classic slip in a subclass's `__init__`) raises an `AttributeError` that says
# to call it first. Also given: `__delattr__` (`del module.name` removes the name from whichever
# registry holds it) and `register_parameter(name, param)` / `add_module(name, module)`, the explicit
# forms of the same filing, for names that are not valid identifiers (`Sequential` registers its
# children as `"0"`, `"1"`, ...), with their checks of the name (`_check_name`). Read them: they are
# short, and they are what PyTorch does.
#
# `forward` is what a subclass writes; `__call__` runs it (given), so `layer(x)` means `layer.forward(x)`.
# PyTorch's `__call__` also runs hooks around `forward`; we have none.

# %% [markdown]
# ## Walking the tree
#
# Modules inside modules form a tree. Every question about a model is a walk of it:
#
# ```
# Sequential                      named_modules():  ""   Sequential
# ├── "0": Linear(4, 8)                             "0"  Linear      ("0.weight", "0.bias")
# ├── "1": ReLU                                     "1"  ReLU
# └── "2": Block                                    "2"  Block
#     └── "fc": Linear(8, 2)                        "2.fc" Linear    ("2.fc.weight", "2.fc.bias")
# ```
#
# Task 04.3 is the two walks everything else is built on:
#
# - `named_modules(memo=None, prefix="", remove_duplicate=True)` yields `(prefix, self)` first, then,
#   for each registered sub-module that is not `None`, recursively everything *its* `named_modules`
#   yields, with the dotted name `prefix + "." + name` (just `name` when `prefix` is empty). Pre-order: a
#   module, then its subtree, as in the picture above.
# - `named_parameters(prefix="", recurse=True, remove_duplicate=True)` yields, for every module of
#   `named_modules(prefix=prefix)` (only `(prefix, self)` when `recurse=False`), its registered
#   parameters with the dotted name `module_name + "." + parameter_name` (no leading dot for `self`'s
#   own), skipping the `None` entries. So a module's own parameters come before those of its
#   sub-modules, whatever the order of the assignments in `__init__`: a `Block` that sets
#   `self.scale = Scale(2)` and then `self.shift = Parameter(...)` yields `shift`, then `scale.weight`,
#   exactly as PyTorch does.
#
# **Shared parameters and modules are yielded once.** Weight tying (the GPT shares its token embedding
# with its output layer) registers one Parameter under two names. An optimizer that received it twice
# would apply every update twice. So, with `remove_duplicate=True` (the default), remember what you have
# yielded and skip repeats: in `named_modules` the set `memo` (created on the first call, and passed down
# the recursion so that the whole walk shares it), in `named_parameters` a set of its own. Identify by
# identity: keep `id(...)` of what you have seen, or the objects themselves in a set (a Module hashes by
# identity). With `remove_duplicate=False` every name is yielded, repeats included: `state_dict` (task
# 04.5) needs that, since in PyTorch a tied weight appears in a checkpoint under each of its names.
#
# Both are generators (`yield`, `yield from`): a caller that wants a list writes
# `list(model.parameters())`. The recursion goes as deep as the module tree, a handful of levels, so a
# recursive `named_modules` is fine here (unlike autograd's graph in 02, which can be 100,000 deep).
# The rest is given, a line or two over your two walks: `modules()`, `parameters()`, and
# `named_children()` / `children()` (the direct sub-modules, each once).

# %% [markdown]
# ## Train and eval, zero_grad
#
# Some layers behave differently while training: `Dropout` zeroes random activations during training
# and does nothing at evaluation. Every module carries a flag `training`; `train(mode=True)` sets it on
# the module **and all its sub-modules** (recursively) and returns `self`, so that `model = Net().eval()`
# and `model.train()` chain. `mode` must be a `bool`: `ValueError` otherwise (`train("eval")` would
# otherwise be truthy and silently mean training). `eval()` is `train(False)`.
#
# `zero_grad(set_to_none=True)` clears the gradient of every parameter before the next backward (02
# showed why: gradients accumulate). `set_to_none=True` sets `.grad = None`, which frees the memory and
# lets the next backward write a fresh gradient; `set_to_none=False` sets it to a float32 tensor of zeros
# of the parameter's shape (only where there was a gradient, as PyTorch does).

# %% [markdown]
# ## state_dict and load_state_dict
#
# A checkpoint is a mapping from parameter names to arrays. `state_dict()` returns a `dict` (insertion
# ordered) `name -> numpy array`, one entry for each name of `named_parameters(remove_duplicate=False)`,
# each value a **copy** in float32 (`np.array(p.data, dtype=np.float32)`): a checkpoint that aliased the
# live weights would change under you as training continues. NumPy arrays, not Tensors, because they go
# straight into an `.npz` file in module 07.
#
# `load_state_dict(state_dict, strict=True)` is the inverse:
#
# 1. **Check before touching anything.** `_check_state_dict(self, own, state_dict, strict)` (given) takes
#    the model's parameters by name (`own`, a dict from `named_parameters(remove_duplicate=False)`) and
#    compares: missing keys, unexpected keys, values of another shape (a value may be an array or a
#    Tensor). If anything is wrong (with `strict=True`, missing or unexpected keys; a shape always) it
#    raises one `RuntimeError` that lists *every* problem in PyTorch's words, so the user fixes them in
#    one go and a failed load leaves the model as it was. Otherwise it returns the two lists
#    `(missing_keys, unexpected_keys)`.
# 2. **Copy in place**, for every key the model has: `param.data[...] = value` (`np.asarray(value)`
#    turns a Tensor into its array). The *same* Parameter objects (and arrays) stay registered, so an
#    optimizer that already holds them keeps working; a load that assigned new Parameters would leave the
#    optimizer updating orphans. The assignment casts to float32.
# 3. Return `_IncompatibleKeys(missing_keys, unexpected_keys)` (given: a namedtuple, whose repr says
#    `<All keys matched successfully>` when both lists are empty, like PyTorch's).
#
# With `strict=False`, missing and unexpected keys are reported in the returned lists, not raised, and
# the matching keys are loaded: that is how you load a pretrained body into a model with a new head.

# %% [markdown]
# ## The repr: the model as a tree (given)
#
# `print(model)` in PyTorch shows the tree, and this package prints the same text, character for
# character. `Module.__repr__` is given; what a layer adds is its `extra_repr()`, its own settings
# (`in_features=784, out_features=256, bias=True`; `''` by default), also given in every layer below:
#
# ```
# Sequential(
#   (0): Linear(in_features=784, out_features=256, bias=True)
#   (1): ReLU()
#   (2): Sequential(
#     (0): Dropout(p=0.5, inplace=False)
#   )
# )
# ```
#
# The rule: a module without children whose `extra_repr()` is at most one line prints on one line,
# `Name(` + extra + `)`; otherwise `Name(`, then the lines of `extra_repr()` and one line per child,
# `(name): ` + the child's repr (its later lines indented by two more spaces), each indented by two
# spaces, then `)` on its own line.

# %%
#| export
def _addindent(text: str, num_spaces: int) -> str:
    """Indent every line of `text` after the first by `num_spaces` spaces."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * num_spaces + line for line in rest])


def _check_assignment(module, name: str, value) -> None:
    """PyTorch's refusals for `module.name = value`: a Parameter or Module before Module.__init__(), and a
    registered parameter (or sub-module) replaced by anything but a Parameter (a Module) or None."""
    owner = type(module).__name__
    parameters, modules = module.__dict__.get("_parameters"), module.__dict__.get("_modules")
    if isinstance(value, (Parameter, Module)) and parameters is None:
        kind = "parameter" if isinstance(value, Parameter) else "module"
        raise AttributeError(f"cannot assign {kind} {name!r} to {owner} before Module.__init__() call: "
                             f"call super().__init__() first")
    if parameters is not None and name in parameters and not isinstance(value, Parameter) and value is not None:
        raise TypeError(f"cannot assign {type(value).__name__!r} as parameter {name!r} of {owner} "
                        f"(Parameter or None expected)")
    if (modules is not None and name in modules and not isinstance(value, (Module, Parameter))
            and value is not None):
        raise TypeError(f"cannot assign {type(value).__name__!r} as child module {name!r} of {owner} "
                        f"(Module or None expected)")


def _check_name(module, name, kind: str, registry: str) -> None:
    """A name for register_parameter/add_module: a non-empty str, no '.', not an ordinary attribute."""
    owner = type(module).__name__
    if registry not in module.__dict__:
        raise AttributeError(f"cannot assign {kind} {name!r} to {owner} before Module.__init__() call: "
                             f"call super().__init__() first in {owner}.__init__")
    if not isinstance(name, str):
        raise TypeError(f"{kind} name of {owner} should be a str, got {type(name).__name__}")
    if name == "" or "." in name:
        raise KeyError(f"{kind} name of {owner} can't be empty or contain \".\", got {name!r}")
    if hasattr(module, name) and name not in module.__dict__[registry]:
        raise KeyError(f"attribute {name!r} already exists in {owner}")


def _check_state_dict(module, own: dict, state_dict, strict: bool) -> tuple[list, list]:
    """(missing_keys, unexpected_keys) of loading state_dict into the parameters `own` (name -> Parameter);
    one RuntimeError naming every problem (missing or unexpected keys when strict, a shape always)."""
    missing = [name for name in own if name not in state_dict]
    unexpected = [name for name in state_dict if name not in own]
    errors = []
    if strict and missing:
        errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ". ")
    if strict and unexpected:
        errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ". ")
    for name, param in own.items():
        if name in state_dict and np.shape(state_dict[name]) != param.shape:
            errors.append(f"size mismatch for {name}: copying a param with shape {np.shape(state_dict[name])} "
                          f"from checkpoint, the shape in current model is {param.shape}.")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {type(module).__name__}:\n\t" + "\n\t".join(errors))
    return missing, unexpected


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys it could not match."""

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

# %% [markdown]
# The whole `Module` class is one cell (Python cannot split a class across cells); your regions for
# tasks 04.2 to 04.5 are in it, each marked with its task, between the given methods. The test cells
# after it take the tasks one at a time.

# %%
#| export nn
class Module:
    """Base class of every layer and model: registers Parameters and sub-Modules assigned as attributes."""

    def __init__(self):
        ### BEGIN SOLUTION 04.2 Module registration
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "training", True)
        ### END SOLUTION

    # --- registration (04.2) -----------------------------------------------------------------------

    def __setattr__(self, name: str, value) -> None:
        """Parameter -> _parameters, Module -> _modules, anything else -> the instance's __dict__."""
        _check_assignment(self, name, value)   # given: PyTorch's refusals, before anything is filed
        ### BEGIN SOLUTION 04.2 Module registration
        parameters, modules = self.__dict__.get("_parameters"), self.__dict__.get("_modules")
        if isinstance(value, Parameter) or (value is None and parameters is not None and name in parameters):
            self.__dict__.pop(name, None)
            modules.pop(name, None)
            parameters[name] = value
        elif isinstance(value, Module) or (value is None and modules is not None and name in modules):
            self.__dict__.pop(name, None)
            parameters.pop(name, None)
            modules[name] = value
        else:
            object.__setattr__(self, name, value)
        ### END SOLUTION

    def __getattr__(self, name: str):
        """Called only when normal lookup fails: the registered parameters and sub-modules."""
        ### BEGIN SOLUTION 04.2 Module registration
        for registry in ("_parameters", "_modules"):
            found = self.__dict__.get(registry)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        ### END SOLUTION

    def __delattr__(self, name: str) -> None:
        """`del module.name`: remove a registered parameter or sub-module, or an ordinary attribute."""
        if name in self.__dict__.get("_parameters", {}):
            del self._parameters[name]
        elif name in self.__dict__.get("_modules", {}):
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def register_parameter(self, name: str, param) -> None:
        """Register `param` (a Parameter, or None) under `name`."""
        _check_name(self, name, "parameter", "_parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__!r} as parameter {name!r} of "
                            f"{type(self).__name__} (Parameter or None expected)")
        self._parameters[name] = param

    def add_module(self, name: str, module) -> None:
        """Register `module` (a Module, or None) as a child under `name`."""
        _check_name(self, name, "module", "_modules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass: cannot add it to "
                            f"{type(self).__name__} as {name!r}")
        self._modules[name] = module

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # --- walking the tree (04.3) -------------------------------------------------------------------

    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        """(prefix, self), then every sub-module with its dotted name, each module once by default."""
        ### BEGIN SOLUTION 04.3 Module traversal
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                child_prefix = f"{prefix}.{name}" if prefix else name
                yield from module.named_modules(memo, child_prefix, remove_duplicate)
        ### END SOLUTION

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """(dotted name, Parameter) of this module (and, with recurse, of every sub-module)."""
        ### BEGIN SOLUTION 04.3 Module traversal
        if recurse:
            modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
        else:
            modules = [(prefix, self)]
        seen = set()
        for module_prefix, module in modules:
            for name, param in module._parameters.items():
                if param is None or (remove_duplicate and id(param) in seen):
                    continue
                seen.add(id(param))
                yield (f"{module_prefix}.{name}" if module_prefix else name), param
        ### END SOLUTION

    def modules(self):
        """Every module of the tree, self first."""
        for _, module in self.named_modules():
            yield module

    def parameters(self, recurse: bool = True):
        """Every Parameter of the tree, each once."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_children(self):
        """(name, module) of the direct sub-modules, in registration order, each once."""
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        """The direct sub-modules."""
        for _, module in self.named_children():
            yield module

    # --- modes and gradients (04.4) ----------------------------------------------------------------

    def train(self, mode: bool = True) -> "Module":
        """Set `training` on this module and every sub-module; returns self."""
        ### BEGIN SOLUTION 04.4 train, eval and zero_grad
        if not isinstance(mode, bool):
            raise ValueError(f"training mode is expected to be boolean, got {mode!r}")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self
        ### END SOLUTION

    def eval(self) -> "Module":
        """train(False)."""
        ### BEGIN SOLUTION 04.4 train, eval and zero_grad
        return self.train(False)
        ### END SOLUTION

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's gradient: None, or float32 zeros when set_to_none=False."""
        ### BEGIN SOLUTION 04.4 train, eval and zero_grad
        for param in self.parameters():
            if param.grad is not None:
                param.grad = None if set_to_none else Tensor(np.zeros(param.shape, dtype=np.float32))
        ### END SOLUTION

    # --- checkpoints (04.5) ------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """name -> float32 numpy copy of every parameter (every name of a shared one)."""
        ### BEGIN SOLUTION 04.5 state_dict and load_state_dict
        return {name: np.array(param.data, dtype=np.float32)
                for name, param in self.named_parameters(remove_duplicate=False)}
        ### END SOLUTION

    def load_state_dict(self, state_dict, strict: bool = True) -> _IncompatibleKeys:
        """Copy the values into the parameters in place, after _check_state_dict (given) found no problem."""
        own = dict(self.named_parameters(remove_duplicate=False))
        missing, unexpected = _check_state_dict(self, own, state_dict, strict)
        ### BEGIN SOLUTION 04.5 state_dict and load_state_dict
        for name, param in own.items():
            if name in state_dict:
                param.data[...] = np.asarray(state_dict[name])
        return _IncompatibleKeys(missing, unexpected)
        ### END SOLUTION

    # --- repr (given) ------------------------------------------------------------------------------

    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """This module's own settings, for its repr ('' by default)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): {_addindent(repr(module), 2)}" for name, module in self._modules.items()]
        if not child_lines and len(extra_lines) <= 1:
            return f"{self._get_name()}({''.join(extra_lines)})"
        return f"{self._get_name()}(\n  " + "\n  ".join(extra_lines + child_lines) + "\n)"

# %% [markdown]
# A few small modules to test with. They use only `Parameter` and `Module`: every layer in the rest of
# this notebook is built the same way.

# %%
class Scale(Module):
    """y = x * weight (elementwise, weight of shape (n,))."""

    def __init__(self, n):
        super().__init__()
        self.weight = Parameter(np.arange(1.0, n + 1.0))
        self.n = n

    def forward(self, x):
        return x * self.weight

    def extra_repr(self):
        return f"n={self.n}"


class Block(Module):
    def __init__(self, n):
        super().__init__()
        self.scale = Scale(n)
        self.shift = Parameter(np.zeros(n))

    def forward(self, x):
        return self.scale(x) + self.shift

# %% [markdown]
# Test 04.2: registration by attribute.

# %%
block = Block(3)
assert list(block._parameters) == ["shift"] and list(block._modules) == ["scale"]
assert "shift" not in block.__dict__ and "scale" not in block.__dict__
assert block.scale.n == 3 and "n" in block.scale.__dict__, "plain attributes stay ordinary attributes"
assert block(Tensor([1.0, 1.0, 1.0])).data.tolist() == [1.0, 2.0, 3.0]
block.shift = None                                   # allowed: registered as None
assert block.shift is None and "shift" in block._parameters
try:
    block.shift = Tensor([1.0, 2.0, 3.0])            # a plain Tensor cannot replace a parameter
    raise AssertionError("expected TypeError")
except TypeError as error:
    print("as expected:", error)
try:
    block.wieght
    raise AssertionError("expected AttributeError")
except AttributeError as error:
    assert str(error) == "'Block' object has no attribute 'wieght'", error
assert not hasattr(block, "wieght") and getattr(block, "wieght", 7) == 7
block.register_parameter("extra", Parameter([1.0]))
block.add_module("head", Scale(1))
assert list(block._parameters) == ["shift", "extra"] and list(block._modules) == ["scale", "head"]
del block.head
assert list(block._modules) == ["scale"]

# %% [markdown]
# Test 04.3: walking the tree. `Twice` holds two `Block`s and reaches the first block's `Scale` a second
# time under the name `tied` (a shared module); its parameters must come out once.

# %%
class Twice(Module):
    def __init__(self):
        super().__init__()
        self.first = Block(2)
        self.second = Block(2)
        self.tied = self.first.scale                # the same module under a second name


model = Twice()
names = [name for name, _ in model.named_parameters()]
assert names == ["first.shift", "first.scale.weight", "second.shift", "second.scale.weight"], names
assert len(list(model.parameters())) == 4
assert [name for name, _ in model.named_modules()] == ["", "first", "first.scale", "second", "second.scale"]
assert [name for name, _ in model.named_children()] == ["first", "second", "tied"]   # tied: a new child
assert list(model.modules())[0] is model and list(model.children())[1] is model.second
assert [name for name, _ in model.named_parameters(recurse=False)] == []
assert [name for name, _ in model.first.named_parameters(prefix="first")] == ["first.shift", "first.scale.weight"]
assert len(list(model.named_parameters(remove_duplicate=False))) == 5      # tied.weight too

# %% [markdown]
# Test 04.4: train, eval, zero_grad.

# %%
assert model.training and model.eval() is model
assert not any(m.training for m in model.modules())
assert model.train() is model and all(m.training for m in model.modules())
x = Tensor([1.0, 2.0])
(model.first(x).sum() + model.second(x).sum()).backward()
assert model.first.scale.weight.grad.data.tolist() == [1.0, 2.0]
model.zero_grad(set_to_none=False)
assert model.first.scale.weight.grad.data.tolist() == [0.0, 0.0]
model.zero_grad()
assert all(p.grad is None for p in model.parameters())

# %% [markdown]
# Test 04.5: a round trip, and the errors.

# %%
state = model.state_dict()
assert list(state) == ["first.shift", "first.scale.weight", "second.shift", "second.scale.weight",
                       "tied.weight"]
assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in state.values())
state["first.shift"][0] = 99.0                       # a copy: the model is untouched
assert model.first.shift.data[0] == 0.0
weight = model.second.scale.weight
fresh = {name: value + 1 for name, value in model.state_dict().items()}
print(model.load_state_dict(fresh))
assert model.second.scale.weight is weight and weight.data.tolist() == [2.0, 3.0]
try:
    model.load_state_dict({"first.shift": np.zeros(5), "bogus": np.zeros(1)})
    raise AssertionError("expected RuntimeError")
except RuntimeError as error:
    print(error)
    assert '"bogus"' in str(error) and '"second.shift"' in str(error) and "(5,)" in str(error)
assert weight.data.tolist() == [2.0, 3.0], "a failed load changes nothing"
result = model.load_state_dict({"first.shift": Tensor([5.0, 6.0])}, strict=False)
assert result.unexpected_keys == [] and "second.shift" in result.missing_keys
assert model.first.shift.data.tolist() == [5.0, 6.0]

# %% [markdown]
# The repr of the test modules (given code: nothing to write, but the text shows the tree).

# %%
print(model)
assert repr(Scale(3)) == "Scale(n=3)"
assert repr(Block(2)) == "Block(\n  (scale): Scale(n=2)\n)"
assert repr(model) == ("Twice(\n"
                       "  (first): Block(\n    (scale): Scale(n=2)\n  )\n"
                       "  (second): Block(\n    (scale): Scale(n=2)\n  )\n"
                       "  (tied): Scale(n=2)\n"
                       ")")

# %% [markdown]
# ## Linear
#
# The fully connected layer: every output is a weighted sum of every input, plus a bias.
#
#     y = x Wᵀ + b        x: (*, in_features)   W: (out_features, in_features)   b: (out_features,)
#
# The weight is stored as `(out_features, in_features)`, PyTorch's layout (row `i` holds the weights of
# output `i`), so the forward multiplies by `Wᵀ`. `*` means any number of leading axes, including none:
# a single sample `(in,)`, a batch `(N, in)`, a batch of sequences `(B, T, in)` (the GPT applies its
# linear layers to every position of every sequence at once). The last axis is transformed; the others
# are carried along.
#
# ### Initialisation (task 04.6)
#
# Weights must start random (identical weights get identical gradients and never become different) and
# at the right *scale*. If each of the `in` inputs has variance 1 and each weight variance σ², an output
# has variance `in · σ²`; through ten layers the signal would be multiplied by `(in · σ²)^(1/2)` ten
# times and explode or vanish unless σ² is near `1/in`. PyTorch's default,
# `kaiming_uniform_(W, a=√5)`, draws from a uniform distribution U(−bound, bound) with
#
#     gain = √(2 / (1 + a²)) = √(1/3),  std = gain / √in,  bound = √3 · std = 1 / √in
#
# (a uniform U(−c, c) has standard deviation c/√3). The bias is drawn from the same U(−1/√in, 1/√in).
# That is the whole rule: **both uniform in ±1/√in_features**.
#
# Draw from `default_generator` (01), weight first, then bias, as float32:
# `default_generator.uniform(-bound, bound, size=shape).astype(np.float32)`. Then `tt.manual_seed(0)`
# makes a model's initial weights repeatable, which is what makes an experiment reproducible.
#
# As in PyTorch, `__init__` stores the sizes and creates the Parameters, and `reset_parameters()` (which
# `__init__` calls) draws their values: call it again to re-initialise a layer. With `bias=False`,
# register the name `bias` as `None` (`self.register_parameter("bias", None)`), so `layer.bias` exists
# and is `None`, and `parameters()` yields only the weight.
#
# `extra_repr()` (given) is `in_features=4, out_features=3, bias=True`.

# %%
#| export nn
class Linear(Module):
    """y = x @ weight.T + bias; x: (*, in_features), weight: (out_features, in_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        ### BEGIN SOLUTION 04.6 Linear initialisation
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.empty((out_features, in_features), dtype=np.float32))
        if bias:
            self.bias = Parameter(np.empty(out_features, dtype=np.float32))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        ### END SOLUTION

    def reset_parameters(self) -> None:
        """weight and bias from U(-1/sqrt(in_features), 1/sqrt(in_features)), drawn from default_generator."""
        ### BEGIN SOLUTION 04.6 Linear initialisation
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features > 0 else 0.0
        self.weight.data[...] = default_generator.uniform(-bound, bound, size=self.weight.shape)
        if self.bias is not None:
            self.bias.data[...] = default_generator.uniform(-bound, bound, size=self.bias.shape)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"

    def forward(self, input) -> Tensor:
        return linear(input, self.weight, self.bias)

# %% [markdown]
# Test 04.6: shapes, dtype, the bound, the spread, repeatability.

# %%
layer = Linear(4, 3)
print(layer)
assert repr(layer) == "Linear(in_features=4, out_features=3, bias=True)"
assert layer.weight.shape == (3, 4) and layer.bias.shape == (3,) and layer.weight.dtype == np.float32
assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
no_bias = Linear(4, 3, bias=False)
assert no_bias.bias is None and len(list(no_bias.parameters())) == 1
assert repr(no_bias) == "Linear(in_features=4, out_features=3, bias=False)"
big = Linear(400, 500)
bound = 1 / np.sqrt(400)
assert np.abs(big.weight.data).max() <= np.float32(bound) and np.abs(big.bias.data).max() <= np.float32(bound)
print(f"weight std {big.weight.data.std():.5f}, uniform's {bound / np.sqrt(3):.5f}")
assert abs(big.weight.data.std() / (bound / np.sqrt(3)) - 1) < 0.02
manual_seed(0)
first = Linear(5, 2).weight.data.copy()
manual_seed(0)
assert np.array_equal(Linear(5, 2).weight.data, first), "manual_seed makes initialisation repeatable"
assert not np.array_equal(Linear(5, 2).weight.data, first)

# %% [markdown]
# ### The forward and its backward (task 04.7)
#
# `Linear.forward` (given, above) calls `linear(input, weight, bias)`, PyTorch's `nn.functional.linear`,
# which you write here. It could be composed from 01's ops (`x @ weight.T +
# bias`), and autograd would differentiate it for free. It is one op of its own instead, `_Linear`, a
# `Function` with a forward and a backward, for two reasons of speed that matter in every training step
# from here to the GPT:
#
# - Composed, it records three nodes (a transpose, a matmul, an add) where one does.
# - Composed, the weight's gradient arrives as the transpose of `x.T @ ḡ_y`: a strided view, in the
#   opposite memory order from the weight, and every optimizer update that reads it then strides through
#   memory (in the milestone MLP that made Adam's step twice as slow). Written by hand, ḡ_W = ḡ_yᵀ x is
#   computed directly in the weight's own layout.
#
# The forward and the gradients, for x: `(N, in)`, W: `(out, in)`, b: `(out,)`:
#
#     y = x Wᵀ + b        ḡ_x = ḡ_y W        ḡ_W = ḡ_yᵀ x        ḡ_b = Σ_rows ḡ_y
#
# (check them on shapes: `(N, out) @ (out, in)`, `(out, N) @ (N, in)`). `_Linear.forward(ctx, x, weight,
# bias=None)` gets numpy arrays and saves what its backward needs; `backward` returns one gradient per
# operand it was given (two without a bias, three with one), each only when `ctx.needs_input_grad`
# asks for it (the input of the first layer is data: its gradient would be a whole matmul of wasted
# work).
#
# `linear(input, weight, bias=None)` handles any number of leading axes by **flattening them into one**:
# reshape x from `(*, in)` to `(N, in)` with N the product of the leading sizes (`reshape(-1, in)`),
# apply `_Linear` once, and reshape back to `(*, out)`. Why not a batched product over the leading axes?
# `(B, T, in) @ (in, out)` broadcasts the weight over the batch, and the adjoint of that broadcast first
# builds a `(B, in, out)` array, one weight-sized gradient per batch element, and then sums it. Flattened,
# the weight gradient is one `(out, N) @ (N, in)` product: same numbers, B times less memory. (Call
# `_Linear.apply(rows, weight)` without a bias and `_Linear.apply(rows, weight, bias)` with one: an
# operand of `apply` must be a tensor or a number, never `None`.)
#
# Check the input first: a 0-d input, or one whose last axis is not the weight's `in_features`, is a
# `ValueError` naming both: `linear: expected input with last dimension 4 (the weight has shape (3, 4)),
# got shape (2, 5)`. Without it the user would get a matmul error naming shapes `(2, 5)` and `(4, 3)`,
# one step removed from their mistake.

# %%
#| export
class _Linear(Function):
    """y = x @ weight.T (+ bias) for x: (N, in), weight: (out, in), bias: (out,); gradients in the operands' layout"""

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        ### BEGIN SOLUTION 04.7 linear
        ctx.save_for_backward(x, weight)
        out = x @ weight.T                                      # (N, in) @ (in, out) -> (N, out), a new array
        if bias is not None:
            out += bias                                         # (out,) broadcast over the N rows
        return out
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        ### BEGIN SOLUTION 04.7 linear
        x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        grad_x = grad_output @ weight if needs[0] else None     # (N, out) @ (out, in) -> (N, in)
        grad_weight = grad_output.T @ x if needs[1] else None   # (out, N) @ (N, in) -> (out, in), W's layout
        if len(needs) == 2:
            return grad_x, grad_weight
        return grad_x, grad_weight, grad_output.sum(axis=0) if needs[2] else None
        ### END SOLUTION


# %%
#| export nn.functional
def linear(input, weight, bias=None) -> Tensor:
    """y = input @ weight.T + bias over the last axis of input: (*, in) -> (*, out)."""
    ### BEGIN SOLUTION 04.7 linear
    x = as_tensor(input)
    if x.ndim == 0 or x.shape[-1] != weight.shape[-1]:
        raise ValueError(f"linear: expected input with last dimension {weight.shape[-1]} (the weight has shape "
                         f"{tuple(weight.shape)}), got shape {x.shape}")
    rows = x.reshape(-1, x.shape[-1])                           # (N, in), N = product of the leading axes
    out = _Linear.apply(rows, weight) if bias is None else _Linear.apply(rows, weight, bias)
    return out.reshape(*x.shape[:-1], weight.shape[0])          # (*, out)
    ### END SOLUTION

# %% [markdown]
# Test 04.7.

# %%
rng = np.random.default_rng(0)
layer = Linear(4, 3)
for shape in [(4,), (2, 4), (2, 5, 4)]:
    x = rng.standard_normal(shape).astype(np.float32)
    y = layer(Tensor(x))
    assert y.shape == shape[:-1] + (3,) and y.dtype == np.float32
    assert np.allclose(y.data, x @ layer.weight.data.T + layer.bias.data, atol=1e-6)
try:
    layer(Tensor(np.ones((2, 5))))
    raise AssertionError("expected ValueError")
except ValueError as error:
    print("as expected:", error)
    assert "4" in str(error) and "(2, 5)" in str(error)

# the gradients of a (2, 5, 4) input against the formulas above, with the leading axes flattened
x = Tensor(rng.standard_normal((2, 5, 4)).astype(np.float32), requires_grad=True)
grad_output = rng.standard_normal((2, 5, 3)).astype(np.float32)
layer(x).backward(Tensor(grad_output))
rows, grad_rows = x.data.reshape(10, 4), grad_output.reshape(10, 3)
assert np.allclose(x.grad.data, grad_output @ layer.weight.data, atol=1e-5)
assert np.allclose(layer.weight.grad.data, grad_rows.T @ rows, atol=1e-5)
assert np.allclose(layer.bias.grad.data, grad_rows.sum(axis=0), atol=1e-5)
assert layer.weight.grad.data.flags.c_contiguous, "the weight's gradient in the weight's own layout"
x64 = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
assert gradcheck(layer, x64), "d(output)/d(input) against central differences"

# %% [markdown]
# ## Containers: Sequential and ModuleList
#
# Most models are a chain: the output of one layer is the input of the next. `Sequential(*modules)`
# registers its arguments as children named `"0"`, `"1"`, ... (with `add_module`: `self.0 = ...` is not
# valid Python), and its `forward` feeds the input through them in order. An empty `Sequential()` is
# the identity. PyTorch also accepts one `OrderedDict` of `name -> module`, to name the children
# yourself; so do we.
#
# It also behaves like a list of its layers:
#
# - `model[0]`, `model[-1]` (negative indices count from the end; out of range is an `IndexError`);
#   `model[1:]` is a new `Sequential` of those layers, keeping their names (PyTorch's behaviour);
# - `len(model)`, `for layer in model`, `model.append(layer)` (registered under the next number;
#   returns `self`).
#
# Use the given helper `_checked_index(index, length, owner)`: it turns an index into a position in
# `range(length)` and raises the errors.
#
# `ModuleList(modules=None)` is the same list without a `forward`: a container for layers that your
# own `forward` uses in some other way (the GPT's blocks, applied in a loop with extra work between
# them). The point of both containers is registration: a plain Python list of layers stored on a module
# is just an attribute, and `parameters()` would never find the layers inside it, a silent bug where
# half the model never trains. `ModuleList` registers them as `"0"`, `"1"`, ..., so their parameters are
# named `blocks.1.fc.weight`. It supports `append` (returns self), `extend(iterable)` (returns self),
# `list[i]` (negative too) and `list[a:b]` (a new ModuleList), `list[i] = module` (replaces the child
# `str(i)`), `len` and iteration.
#
# `ModuleList.__repr__` is given: PyTorch 2 prints repeated identical children once
# (`(0-11): 12 x Block(...)`), so a 12-layer GPT prints on one screen.

# %%
#| export
def _checked_index(index, length: int, owner: str) -> int:
    """A position in range(length) for `index` (negative counts from the end), or IndexError/TypeError."""
    if not isinstance(index, (int, np.integer)) or isinstance(index, bool):
        raise TypeError(f"{owner} indices must be integers or slices, not {type(index).__name__}")
    if not -length <= index < length:
        raise IndexError(f"index {index} is out of range for a {owner} of length {length}")
    return int(index) % length

# %%
#| export nn
class Sequential(Module):
    """Applies its children in order: Sequential(Linear(4, 8), ReLU(), Linear(8, 2))."""

    def __init__(self, *modules):
        super().__init__()
        ### BEGIN SOLUTION 04.8 Sequential
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, module in modules[0].items():
                self.add_module(name, module)
        else:
            for index, module in enumerate(modules):
                self.add_module(str(index), module)
        ### END SOLUTION

    def __getitem__(self, index):
        ### BEGIN SOLUTION 04.8 Sequential
        if isinstance(index, slice):
            return Sequential(OrderedDict(list(self._modules.items())[index]))
        return list(self._modules.values())[_checked_index(index, len(self), "Sequential")]
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION 04.8 Sequential
        return len(self._modules)
        ### END SOLUTION

    def __iter__(self):
        ### BEGIN SOLUTION 04.8 Sequential
        return iter(self._modules.values())
        ### END SOLUTION

    def append(self, module: Module) -> "Sequential":
        ### BEGIN SOLUTION 04.8 Sequential
        self.add_module(str(len(self)), module)
        return self
        ### END SOLUTION

    def forward(self, input):
        ### BEGIN SOLUTION 04.8 Sequential
        for module in self:
            input = module(input)
        return input
        ### END SOLUTION


class ModuleList(Module):
    """A registered list of modules (no forward): their parameters are found by parameters()."""

    def __init__(self, modules=None):
        super().__init__()
        ### BEGIN SOLUTION 04.9 ModuleList
        if modules is not None:
            self.extend(modules)
        ### END SOLUTION

    def __getitem__(self, index):
        ### BEGIN SOLUTION 04.9 ModuleList
        if isinstance(index, slice):
            return ModuleList(list(self._modules.values())[index])
        return self._modules[str(_checked_index(index, len(self), "ModuleList"))]
        ### END SOLUTION

    def __setitem__(self, index, module: Module) -> None:
        ### BEGIN SOLUTION 04.9 ModuleList
        self.add_module(str(_checked_index(index, len(self), "ModuleList")), module)
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION 04.9 ModuleList
        return len(self._modules)
        ### END SOLUTION

    def __iter__(self):
        ### BEGIN SOLUTION 04.9 ModuleList
        return iter(self._modules.values())
        ### END SOLUTION

    def append(self, module: Module) -> "ModuleList":
        ### BEGIN SOLUTION 04.9 ModuleList
        self.add_module(str(len(self)), module)
        return self
        ### END SOLUTION

    def extend(self, modules) -> "ModuleList":
        ### BEGIN SOLUTION 04.9 ModuleList
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(f"ModuleList.extend should be called with an iterable of modules, "
                            f"but got {type(modules).__name__}")
        for module in modules:
            self.append(module)
        return self
        ### END SOLUTION

    def __repr__(self) -> str:
        """PyTorch 2's: runs of identical children print once, as `(0-2): 3 x Linear(...)`."""
        reprs = [repr(module) for module in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []                                        # [first index, last index, repr]
        for index, text in enumerate(reprs):
            if runs and runs[-1][2] == text:
                runs[-1][1] = index
            else:
                runs.append([index, index, text])
        lines = [_addindent(f"({first}): {text}" if first == last else f"({first}-{last}): "
                            f"{last - first + 1} x {text}", 2) for first, last, text in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

# %% [markdown]
# Test 04.8: Sequential.

# %%
net = Sequential(Linear(4, 8), Scale(8), Linear(8, 2))
x = rng.standard_normal((3, 4)).astype(np.float32)
manual = net[2](net[1](net[0](Tensor(x))))
assert np.allclose(net(Tensor(x)).data, manual.data) and net(Tensor(x)).shape == (3, 2)
assert len(net) == 3 and net[-1] is net[2] and [type(m).__name__ for m in net] == ["Linear", "Scale", "Linear"]
assert [name for name, _ in net.named_parameters()] == ["0.weight", "0.bias", "1.weight", "2.weight", "2.bias"]
tail = net[1:]
assert isinstance(tail, Sequential) and [name for name, _ in tail.named_children()] == ["1", "2"]
assert net.append(Scale(2)) is net and len(net) == 4
try:
    net[4]
    raise AssertionError("expected IndexError")
except IndexError as error:
    print("as expected:", error)
assert Sequential()(Tensor([1.0])).data.tolist() == [1.0]
print(Sequential(Linear(784, 256), Sequential(Scale(2))))
assert repr(Sequential(Linear(784, 256), Sequential(Scale(2)))) == (
    "Sequential(\n  (0): Linear(in_features=784, out_features=256, bias=True)\n"
    "  (1): Sequential(\n    (0): Scale(n=2)\n  )\n)")

# %% [markdown]
# Test 04.9: ModuleList. A plain list would hide the layers; a ModuleList registers them.

# %%
class Stack(Module):
    def __init__(self, depth):
        super().__init__()
        self.blocks = ModuleList([Block(2) for _ in range(depth)])
        self.forgotten = [Block(2)]                       # a plain list: not registered

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


stack = Stack(3)
names = [name for name, _ in stack.named_parameters()]
assert names[:2] == ["blocks.0.shift", "blocks.0.scale.weight"] and len(names) == 6, names
assert "blocks.2.shift" in names and not any("forgotten" in n for n in names)
blocks = stack.blocks
assert len(blocks) == 3 and blocks[-1] is list(blocks)[2] and isinstance(blocks[:2], ModuleList)
replacement = Block(2)
blocks[1] = replacement
assert blocks[1] is replacement and stack.blocks._modules["1"] is replacement
assert blocks.append(Block(2)) is blocks and blocks.extend([Block(2)]) is blocks and len(blocks) == 5
print(ModuleList([Scale(2), Scale(2), Scale(2), Scale(3)]))
assert repr(ModuleList([Scale(2), Scale(2)])) == "ModuleList(\n  (0-1): 2 x Scale(n=2)\n)"

# %% [markdown]
# ## Dropout
#
# Dropout (Srivastava et al., 2014) fights overfitting by zeroing each activation with probability `p`
# during training, so that no unit can rely on one particular other unit being there. At evaluation the
# whole network is used. To keep the *expected* value of every activation the same in both modes, the
# kept activations are scaled up during training ("inverted dropout", what PyTorch does):
#
#     y = x · m / (1 − p),   m ~ Bernoulli(1 − p) elementwise        E[y] = x · (1 − p) / (1 − p) = x
#
# so evaluation needs no correction at all: `eval()` mode returns the input unchanged.
#
# - Draw the mask from `default_generator` (so `tt.manual_seed` makes it repeatable):
#   `keep = default_generator.random(x.shape) >= p` keeps each element with probability 1 − p.
# - Multiply by a *constant* tensor: `x * Tensor(scale)` with `scale = keep / (1 − p)` in x's dtype.
#   Autograd does the rest: the gradient is `grad_output · m / (1 − p)`, exactly the forward's mask
#   (a dropped activation passes no gradient back).
# - `p = 1` drops everything: `scale` is all zeros (do not divide by 1 − p = 0: that gives NaN). `p = 0`
#   keeps everything: return the input as it is and draw nothing (a mask of ones would be a pass over
#   memory and random numbers for nothing, and would move every later draw), so a model built with
#   `dropout=0.0` can call its dropout layers unconditionally, as PyTorch's models do.
# - In `__init__`, a `p` outside [0, 1] is a `ValueError` in PyTorch's words: `dropout probability has
#   to be between 0 and 1, but got 1.5`. Store `p` as given.
# - `extra_repr()` (given) is `p=0.5, inplace=False` (PyTorch's `inplace` option: accepted, shown, never
#   acted on).

# %%
#| export nn
class Dropout(Module):
    """Training: zero each element with probability p and scale the rest by 1/(1-p). Eval: identity."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        ### BEGIN SOLUTION 04.10 Dropout
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        ### END SOLUTION
        self.inplace = inplace  # accepted like PyTorch's, but tinytorch never overwrites a tensor autograd may need

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.10 Dropout
        x = as_tensor(input)
        if not self.training or self.p == 0:
            return x
        if self.p == 1:
            scale = np.zeros(x.shape, dtype=x.dtype)
        else:
            keep = default_generator.random(x.shape, dtype=np.float32) >= self.p
            scale = keep.astype(x.dtype) * x.dtype.type(1 / (1 - self.p))
        return x * Tensor(scale)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"

# %% [markdown]
# Test 04.10.

# %%
drop = Dropout(0.25)
assert repr(drop) == "Dropout(p=0.25, inplace=False)"
x = Tensor(rng.uniform(1.0, 2.0, 100_000).astype(np.float32), requires_grad=True)
y = drop(x)
dropped = (y.data == 0).mean()
print(f"dropped {dropped:.4f} of the elements (p = 0.25)")
assert abs(dropped - 0.25) < 0.01 and y.dtype == np.float32
kept = y.data != 0
assert np.allclose(y.data[kept], x.data[kept] / 0.75, rtol=1e-6)
y.backward(Tensor(np.ones(100_000, dtype=np.float32)))
assert np.allclose(x.grad.data, kept / 0.75)
assert drop.eval()(x) is x or np.array_equal(drop(x).data, x.data)
assert np.array_equal(Dropout(1.0)(x).data, np.zeros(100_000)) and np.array_equal(Dropout(0.0)(x).data, x.data)
for bad in (-0.1, 1.5):
    try:
        Dropout(bad)
        raise AssertionError("expected ValueError")
    except ValueError as error:
        print("as expected:", error)

# %% [markdown]
# ## Flatten and Identity
#
# `Flatten(start_dim=1, end_dim=-1)` merges the axes `start_dim..end_dim` (inclusive, negative counting
# from the end) into one: `(N, 1, 28, 28) -> (N, 784)` with the defaults, which keep the batch axis. It is
# a `reshape`, so it is differentiable for free. Its new shape: `shape[:start] + (product of
# shape[start:end + 1],) + shape[end + 1:]`. A dimension outside the input's range is an `IndexError`
# (`Dimension out of range (expected to be in range of [-2, 1], but got 2)`), and `start_dim` after
# `end_dim` a `ValueError`. `extra_repr()` (given) is `start_dim=1, end_dim=-1`.
#
# `Identity()` returns its input: a placeholder where an architecture has an optional layer (a model
# built with or without a projection), so the code that uses it needs no `if`. Its `forward` is given.

# %%
#| export
def _dim(dim: int, ndim: int) -> int:
    """`dim` as a position in range(ndim) (negative counts from the end), or IndexError."""
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], but got {dim})")
    return dim % ndim

# %%
#| export nn
class Flatten(Module):
    """Merge the axes start_dim..end_dim (inclusive) into one: (N, C, H, W) -> (N, C*H*W)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.11 Flatten
        x = as_tensor(input)
        shape = x.shape if x.ndim > 0 else (1,)
        start, end = _dim(self.start_dim, len(shape)), _dim(self.end_dim, len(shape))
        if start > end:
            raise ValueError(f"Flatten: start_dim ({self.start_dim}) cannot come after end_dim ({self.end_dim}) "
                             f"for an input of shape {x.shape}")
        merged = int(np.prod(shape[start:end + 1]))
        return x.reshape(*shape[:start], merged, *shape[end + 1:])
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Identity(Module):
    """Returns its input unchanged (accepts and ignores any constructor arguments, like PyTorch's)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input

# %% [markdown]
# Test 04.11.

# %%
x = Tensor(rng.standard_normal((2, 1, 3, 4)), requires_grad=True)
assert Flatten()(x).shape == (2, 12) and Flatten(0, 2)(x).shape == (6, 4) and Flatten(-2)(x).shape == (2, 1, 12)
assert np.array_equal(Flatten()(x).data, x.data.reshape(2, 12))
assert gradcheck(Flatten(1, 2), x)
assert repr(Flatten()) == "Flatten(start_dim=1, end_dim=-1)" and repr(Identity()) == "Identity()"
assert Identity(54, unused="yes")(x) is x
try:
    Flatten(start_dim=4)(x)
    raise AssertionError("expected IndexError")
except IndexError as error:
    print("as expected:", error)

# %% [markdown]
# ## Activation modules
#
# Inside a `Sequential` an activation must be a module. 03 wrote the functions (with their hand-written
# backwards); here each becomes a thin module whose `forward` calls the function, exactly as PyTorch's
# `nn/modules/activation.py` calls `torch.nn.functional`. The settings live on the module and appear in
# its repr (given), in PyTorch's words:
#
# | module | forward | repr |
# |---|---|---|
# | `ReLU()` | `relu(input)` | `ReLU()` |
# | `Sigmoid()` | `sigmoid(input)` | `Sigmoid()` |
# | `Tanh()` | `tanh(input)` | `Tanh()` |
# | `GELU(approximate='none')` | `gelu(input, approximate=self.approximate)` | `GELU(approximate='none')` |
# | `Softmax(dim=-1)` | `softmax(input, dim=self.dim)` | `Softmax(dim=-1)` |
# | `LogSoftmax(dim=-1)` | `log_softmax(input, dim=self.dim)` | `LogSoftmax(dim=-1)` |
#
# Each `forward` is one line: one task for all six. They are the only code of this module that needs 03, so 03's functions are
# imported here, in the first cell that uses them.

# %%
#| export nn
from tinytorch.core.activations import relu, sigmoid, tanh, gelu, softmax, log_softmax


class ReLU(Module):
    """relu(x) = max(x, 0), elementwise. `inplace` is accepted like PyTorch's and never acted on: an op that
    overwrites its input could destroy a value autograd still needs."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.12 activation modules
        return relu(input)
        ### END SOLUTION


class Sigmoid(Module):
    """sigmoid(x) = 1 / (1 + exp(-x)), elementwise."""

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.12 activation modules
        return sigmoid(input)
        ### END SOLUTION


class Tanh(Module):
    """tanh(x), elementwise."""

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.12 activation modules
        return tanh(input)
        ### END SOLUTION


class GELU(Module):
    """gelu(x) = x * Phi(x) (approximate='none') or its tanh approximation (approximate='tanh')."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.12 activation modules
        return gelu(input, approximate=self.approximate)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """softmax along `dim`: exp(x) / sum(exp(x)), computed stably."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.12 activation modules
        return softmax(input, dim=self.dim)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log_softmax along `dim`: x - logsumexp(x), computed stably."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input) -> Tensor:
        ### BEGIN SOLUTION 04.12 activation modules
        return log_softmax(input, dim=self.dim)
        ### END SOLUTION

    def extra_repr(self) -> str:
        return f"dim={self.dim}"

# %% [markdown]
# Test 04.12.

# %%
x = Tensor(np.array([[-2.0, 0.0, 3.0], [1.0, -1.0, 0.5]], dtype=np.float32))
assert ReLU()(x).data.tolist() == [[0.0, 0.0, 3.0], [1.0, 0.0, 0.5]]
assert np.allclose(Sigmoid()(x).data, 1 / (1 + np.exp(-x.data)))
assert np.allclose(Tanh()(x).data, np.tanh(x.data))
assert np.allclose(GELU(approximate="tanh")(x).data, GELU()(x).data, atol=1e-3)
assert np.allclose(Softmax(dim=0)(x).data.sum(axis=0), 1.0) and np.allclose(Softmax()(x).data.sum(axis=1), 1.0)
assert np.allclose(LogSoftmax()(x).data, np.log(Softmax()(x).data), atol=1e-6)
assert [repr(m) for m in (ReLU(), GELU(), GELU("tanh"), Softmax(dim=1), LogSoftmax())] == [
    "ReLU()", "GELU(approximate='none')", "GELU(approximate='tanh')", "Softmax(dim=1)", "LogSoftmax(dim=-1)"]

# %% [markdown]
# ## Putting it together
#
# The network of the MNIST milestone, built, printed, run and differentiated:

# %%
manual_seed(0)
model = Sequential(Flatten(), Linear(784, 256), ReLU(), Dropout(0.1), Linear(256, 128), ReLU(),
                   Linear(128, 10))
print(model)
print(sum(p.size for p in model.parameters()), "parameters")
images = Tensor(rng.standard_normal((32, 1, 28, 28)).astype(np.float32))
logits = model(images)
assert logits.shape == (32, 10) and logits.dtype == np.float32
LogSoftmax()(logits).mean().backward()
assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
model.zero_grad()
checkpoint = model.state_dict()
manual_seed(1)
copy = Sequential(Flatten(), Linear(784, 256), ReLU(), Dropout(0.1), Linear(256, 128), ReLU(),
                  Linear(128, 10))
copy.load_state_dict(checkpoint)
assert np.array_equal(model.eval()(images).data, copy.eval()(images).data), "same weights, same outputs"

# %% [markdown]
# ## What you built, and what comes next
#
# `Module` turns a heap of tensors into a model: parameters registered by assignment, found by one walk
# of the tree, switched between training and evaluation in one call, saved and restored by name, and
# printed as PyTorch prints it. Module 05 adds the loss functions (also Modules: `nn.CrossEntropyLoss()`),
# 06 the optimizers that take `model.parameters()`, and 07 the training loop that ties them together.
