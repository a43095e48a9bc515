"""Checks: the one definition of every graded check, and the helpers the hidden suites share.

This file is shipped beside the package under test (tito/shipped/), so it imports hypothesis only when a
strategy is built, never in the box that runs student code. A check has three parts that share nothing
but plain data; the trusted parent draws and judges, the box only computes:

- ``inputs``: a hypothesis strategy drawing one *case* (a dict of numpy arrays and plain values);
- ``compute(tt, case)``: the only part that runs the package under test; returns plain data;
- ``expected(case)`` (numpy or finite differences, never the package under test) or
  ``verdict(case, output)``, which raises ``CheckFailed`` with one sentence when the output is wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Check", "CheckFamily", "Timed", "CheckFailed", "check", "module", "expect_error", "with_article", "assert_close",
    "capture_error", "central_difference",
    "finite", "shapes", "arrays", "floats_arrays", "signed_arrays", "upstream", "gradient_case", "leaf_gradients",
    "gradients_asked_for", "expected_gradients_asked_for", "expect_gradients_asked_for", "expect_causal",
    "seed_pair", "seeded_draws", "expect_seeded_draws", "generator_draws", "expect_generator_draws", "draws_around",
    "expect_no_draws", "expect_uniform",
    "held", "expect_unchanged", "unchanged_then_expected", "shape_texts",
]


class CheckFailed(AssertionError):
    """A check's verdict: one sentence saying what was expected and what came back.

    ``public`` says what was wrong without the expected values, for official feedback."""

    def __init__(self, message: str, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public


@dataclass(frozen=True)
class Timed:
    """How a speed check is timed: every case (each on inputs of its own, made from ``case["seed"]``) is timed
    by the trusted parent, from the request to the reply, and so is ``yardstick(case)`` (numpy alone, the same
    work's measure, in a box without the package), taking turns. The check passes when every value is right
    and the best time is at most ``limit`` times the yardstick's best."""
    yardstick: Callable[[dict], Any]
    limit: float
    against: str  # what the yardstick is, in words: "np.matmul on the same arrays"
    advice: str = ""


@dataclass
class Check:
    name: str
    task: str
    points: float
    compute: Callable[[Any, dict], Any]
    inputs: Any = None  # a hypothesis strategy of cases; None: one empty case
    describe: Callable[[dict], str] | None = None
    examples: int = 25
    timeout: float = 30.0  # seconds of CPU time for all the cases of the check: the same under any load
    rtol: float = 1e-5
    atol: float = 1e-6
    dtype: bool = False
    # a check that code ignoring its input can pass (an expected error, an input left unchanged, zeros): it
    # earns its points only when every other check of its task passes (docs/security.md, invariant 2)
    guard: bool = False
    timed: Timed | None = None
    _expected: Callable[[dict], Any] | None = None
    _verdict: Callable[[dict, Any], None] | None = None

    def expected(self, fn: Callable[[dict], Any]) -> Callable[[dict], Any]:
        """Decorator: the right answer for a case, from numpy or finite differences."""
        self._expected = fn
        return fn

    def verdict(self, fn: Callable[[dict, Any], None]) -> Callable[[dict, Any], None]:
        """Decorator: judge an output directly; raise CheckFailed when it is wrong."""
        self._verdict = fn
        return fn

    @property
    def doc(self) -> str:
        return (self.compute.__doc__ or self.name.replace("_", " ")).strip().splitlines()[0].rstrip(".")

    def what(self, case: dict) -> str:
        return self.describe(case) if self.describe else self.doc

    def judge(self, case: dict, output: Any, expected: Any) -> None:
        """Decide one case in the trusted process; raises CheckFailed on a wrong output. `expected` is
        `self._expected(case)`, computed by the caller (unused by a verdict)."""
        if self._verdict is not None:
            finite(output, what=self.what(case))
            self._verdict(case, output)
            return
        assert_close(output, expected, what=self.what(case), rtol=self.rtol, atol=self.atol,
                     exact_dtype=self.dtype)


@dataclass
class CheckFamily:
    """One ``compute`` graded as several checks, one per variant (``name[variant]``), each worth its points:
    minitorch's parametrize over a catalogue, with the variant travelling in the case."""
    checks: list[Check]

    def expected(self, fn: Callable[[dict], Any]) -> Callable[[dict], Any]:
        for member in self.checks:
            member._expected = fn
        return fn

    def verdict(self, fn: Callable[[dict, Any], None]) -> Callable[[dict, Any], None]:
        for member in self.checks:
            member._verdict = fn
        return fn


def check(*, task: str | None = None, points: float | None = None, inputs: Any = None,
          variants: dict[str, Any] | None = None, describe: Callable[[dict], str] | None = None, examples: int = 25,
          timeout: float = 30.0, rtol: float = 1e-5, atol: float = 1e-6, dtype: bool = False,
          guard: bool = False, timed: Timed | None = None) -> Callable[[Callable], Any]:
    """Decorator turning ``compute(tt, case)`` into a graded check worth ``points`` for ``task``; with
    ``variants``, into one check per variant, ``name[variant]``. A variant is a strategy of cases (graded for
    the decorator's task and points) or ``(task, points, strategy)``: a behaviour shared by several operations
    belongs to each operation's task. ``guard``: a constant implementation could pass it, so it counts only
    together with its task's other checks."""
    def one(compute: Callable[[Any, dict], Any], name: str, entry: Any) -> Check:
        own_task, own_points, strategy = entry if isinstance(entry, tuple) else (task, points, entry)
        if own_task is None or own_points is None:
            raise TypeError(f"check {name}: give task= and points=, or (task, points, strategy) for the variant")
        return Check(name=name, task=own_task, points=own_points, compute=compute, inputs=strategy,
                     describe=describe, examples=examples if strategy is not None else 1, timeout=timeout,
                     rtol=rtol, atol=atol, dtype=dtype, guard=guard, timed=timed)

    def make(compute: Callable[[Any, dict], Any]) -> Any:
        if variants is None:
            return one(compute, compute.__name__, inputs)
        return CheckFamily([one(compute, f"{compute.__name__}[{variant}]", entry)
                            for variant, entry in variants.items()])
    return make


def module(tt: Any, name: str) -> Any:
    """In the box: the package's module ``core.<name>`` itself (``module(tt, "spatial")``), for the private names
    a later task wraps, so that a check grades a task through its own code and points follow the work."""
    import importlib

    return importlib.import_module(f"{tt.__name__}.core.{name}")


def capture_error(fn: Callable[[], Any]) -> dict:
    """Run ``fn`` and report the error it raised, as plain data. NotImplementedError passes through,
    so an untouched stub still names its task."""
    try:
        fn()
    except NotImplementedError:
        raise
    except Exception as error:  # the point: any error type is data here
        return {"raised": type(error).__name__, "message": str(error)}
    return {"raised": None, "message": ""}


def finite(output: Any, *, what: str) -> None:
    """Raise CheckFailed when any number in ``output`` (arrays, numbers, and lists, tuples and dicts of
    them) is NaN or infinite: a verdict's statistics must never be decided by a NaN."""
    if isinstance(output, dict):
        values: Any = list(output.values())
    elif isinstance(output, (list, tuple)):
        values = output
    else:
        values = None
    if values is not None:
        for value in values:
            finite(value, what=what)
        return
    if isinstance(output, (bool, np.bool_, str)) or output is None:
        return
    array = np.asarray(output)
    if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
        raise CheckFailed(f"{what}: the result holds NaN or infinity", f"{what}: the result holds NaN or infinity")


def with_article(noun: str) -> str:
    """ "a ValueError", "an IndexError": the noun after the article its first letter asks for."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def expect_error(what: str, output: dict, error: str | None, words: tuple = (), *, names: Any = ()) -> None:
    """Judge a ``capture_error`` result: ``error`` raised (None: no error; "any": some error), its message
    holding one of ``words`` (lower case), and each of ``names``: a text as written, an int as a whole number
    (not a part of 123 or 1.5), a set of them as one of them (``shape_texts((2, 3))``)."""
    raised, message = output["raised"], output["message"]
    wanted = "no error" if error is None else "an error" if error == "any" else with_article(error)
    if (raised is None) != (error is None) or error not in ("any", raised):
        said = f"{with_article(raised)} ({message!r:.80})" if raised else "no error"
        raise CheckFailed(f"{what}: expected {wanted} but got {said}",
                          f"{what}: expected {wanted} but got {raised or 'none'}")
    if raised and words and not any(word in message.lower() for word in words):
        raise CheckFailed(f"{what}: the {raised}'s message {message!r:.80} should name {' or '.join(words)}",
                          f"{what}: the {raised}'s message does not name {' or '.join(words)}")
    numbers = {int(text) for text in re.findall(r"(?<![\w.])-?\d+(?!\w|\.\d)", message)}
    options = [[name] if isinstance(name, (str, int)) else sorted(name, key=str) for name in names]
    missing = [" or ".join(map(str, texts)) for texts in options
               if not any(text in numbers if isinstance(text, int) else text in message for text in texts)]
    if raised and missing:
        raise CheckFailed(f"{what}: the {raised}'s message {message!r:.200} should name {' and '.join(missing)}",
                          f"{what}: the {raised}'s message does not name {' and '.join(missing)}")


def shape_texts(shape: tuple) -> set[str]:
    """The ways an error message may write a shape, for ``expect_error``'s names: (2, 3) or [2, 3]."""
    return {str(tuple(shape)), str(list(shape))}


# --- what a call leaves of its arguments: an array a function is given stays as it was ----------------------

def held(tt: Any, value: Any) -> Any:
    """What an argument holds, as plain data to compare after the call (in the box, and on the judge's side for
    what it was given, with tt None): a Tensor or an array as a copy of its values, a list, tuple or dict as its
    type and parts, anything else as its type and repr."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if tt is not None and isinstance(value, tt.Tensor):
        return np.array(value.numpy())
    if isinstance(value, dict):
        return {"dict": {str(key): held(tt, part) for key, part in value.items()}}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [held(tt, part) for part in value]}
    return {type(value).__name__: repr(value)}


def _same(before: Any, after: Any) -> bool:
    """``held`` data equal, arrays by shape, dtype and values (lists and tuples alike: the wire makes both lists)."""
    if isinstance(before, dict):
        return isinstance(after, dict) and set(before) == set(after) and all(_same(before[k], after[k]) for k in before)
    if isinstance(before, (list, tuple)):
        return isinstance(after, (list, tuple)) and len(before) == len(after) and all(map(_same, before, after))
    if isinstance(before, np.ndarray) or isinstance(after, np.ndarray):
        before, after = np.asarray(before), np.asarray(after)
        return before.shape == after.shape and before.dtype == after.dtype and np.array_equal(before, after)
    return type(before) is type(after) and before == after


def _change(before: Any, after: Any) -> str:
    """How an array changed, in words; for other data, what it held before and after."""
    if isinstance(before, dict) and isinstance(after, dict) and len(before) == 1 and before.keys() == after.keys():
        return _change(*before.values(), *after.values())
    if not (isinstance(before, np.ndarray) and isinstance(after, np.ndarray)):
        return f"it held {before!r:.80} and then {after!r:.80}"
    if before.shape != after.shape or before.dtype != after.dtype:
        return f"shape {before.shape} and dtype {before.dtype} became shape {after.shape} and dtype {after.dtype}"
    wrong = before != after
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(wrong)), before.shape))
    return (f"{int(wrong.sum())} of {before.size} values changed, the first at index {index}: {before[index].item()!r} "
            f"became {after[index].item()!r}")


def expect_unchanged(what: str, given: dict, afterwards: dict, advice: str = "") -> None:
    """Judge a call's arguments: each (name -> what it was given) must hold the same after the call
    (``afterwards``: name -> ``held(tt, the argument)`` in the box)."""
    for name, value in given.items():
        before = held(None, value)
        if not _same(before, afterwards[name]):
            tail = f"; {advice}" if advice else ""
            raise CheckFailed(f"{what}: the call changed {name}, which it was given, in place "
                              f"({_change(before, afterwards[name])}){tail}",
                              f"{what}: the call changed {name}, which it was given, in place{tail}")


def unchanged_then_expected(check_: Check | CheckFamily, expected: Callable[[dict], Any],
                            given: Callable[[dict], dict], advice: str = "") -> None:
    """Give ``check_`` its verdict, for a compute that returns ``{"result": ..., "afterwards": {name:
    held(tt, argument)}}``: every argument as it was given (``given(case)``: name -> what it was given), then
    the result against ``expected(case)``, compared as the check compares."""
    first = check_.checks[0] if isinstance(check_, CheckFamily) else check_

    def verdict(case: dict, output: Any) -> None:
        what = first.what(case)
        expect_unchanged(what, given(case), output["afterwards"], advice)
        assert_close(output["result"], expected(case), what=what, rtol=first.rtol, atol=first.atol,
                     exact_dtype=first.dtype)
    check_.verdict(verdict)


def _brief(value: np.ndarray) -> str:
    text = np.array2string(np.asarray(value), precision=4, threshold=12, edgeitems=2, separator=", ")
    return " ".join(text.split())


def assert_close(output: Any, expected: Any, *, what: str, rtol: float = 1e-5, atol: float = 1e-6,
                 exact_dtype: bool = False) -> None:
    """Compare plain data recursively; numpy arrays by kind of dtype, shape and values."""
    if isinstance(expected, dict):
        if not isinstance(output, dict) or set(output) != set(expected):
            raise CheckFailed(f"{what}: expected a result with keys {sorted(expected)} but got {output!r:.80}",
                              f"{what}: the result does not have the expected parts")
        for key in expected:
            assert_close(output[key], expected[key], what=f"{what} [{key}]", rtol=rtol, atol=atol,
                         exact_dtype=exact_dtype)
        return
    if isinstance(expected, (list, tuple)) and expected and _is_numeric_sequence(expected) \
            and isinstance(output, (list, tuple)) and not exact_dtype:  # exact dtypes: element by element
        same = len(output) == len(expected) and _is_numeric_sequence(output) and bool(
            np.allclose(np.asarray(output, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                        rtol=rtol, atol=atol))
        if not same:
            raise CheckFailed(f"{what}: expected {tuple(expected)} but got {tuple(output)!r:.120}",
                              f"{what}: the result is wrong")
        return
    if isinstance(expected, (list, tuple)) and (exact_dtype or not _is_numeric_sequence(expected)):
        if not isinstance(output, (list, tuple)) or len(output) != len(expected):
            raise CheckFailed(f"{what}: expected {len(expected)} part{'' if len(expected) == 1 else 's'} but got "
                              f"{output!r:.80}",
                              f"{what}: the result does not have the expected number of parts")
        for index, (out, exp) in enumerate(zip(output, expected)):
            assert_close(out, exp, what=f"{what} (part {index + 1} of {len(expected)})", rtol=rtol, atol=atol,
                         exact_dtype=exact_dtype)
        return
    if expected is None or isinstance(expected, (str, bool)):
        if type(output) is not type(expected) or output != expected:  # type first: an array has no truth value
            raise CheckFailed(f"{what}: expected {expected!r} but got {output!r:.80}",
                              f"{what}: the result is wrong")
        return
    _assert_array_close(output, np.asarray(expected), what=what, rtol=rtol, atol=atol, exact_dtype=exact_dtype)


def _is_number(item: Any) -> bool:
    if isinstance(item, np.ndarray):
        return item.ndim == 0 and item.dtype.kind in "iuf"
    return isinstance(item, (int, float, np.number)) and not isinstance(item, (bool, np.bool_))


def _is_numeric_sequence(value: Any) -> bool:
    return all(_is_number(item) for item in value)


def _assert_array_close(output: Any, expected: np.ndarray, *, what: str, rtol: float, atol: float,
                        exact_dtype: bool) -> None:
    if output is None or isinstance(output, (str, dict)) or type(output).__module__.startswith("tinytorch"):
        raise CheckFailed(f"{what}: expected an array of shape {expected.shape} but got {type(output).__name__}",
                          f"{what}: the result is a {type(output).__name__}, not an array")
    got = np.asarray(output)
    if got.dtype == object:
        raise CheckFailed(f"{what}: expected numbers but got an object array",
                          f"{what}: the result holds objects, not numbers")
    if got.shape != expected.shape:
        raise CheckFailed(f"{what}: expected shape {expected.shape} but got shape {got.shape}",
                          f"{what}: the result has the wrong shape {got.shape}")
    if exact_dtype and got.dtype != expected.dtype:
        raise CheckFailed(f"{what}: expected dtype {expected.dtype} but got dtype {got.dtype}",
                          f"{what}: the result has the wrong dtype {got.dtype}")
    if _kind(got.dtype) != _kind(expected.dtype):
        raise CheckFailed(f"{what}: expected a {_kind(expected.dtype)} dtype ({expected.dtype}) "
                          f"but got {got.dtype}", f"{what}: the result has the wrong kind of dtype {got.dtype}")
    if expected.size == 0:
        return
    if _kind(expected.dtype) in ("bool", "integer"):
        wrong = got != expected
    else:
        exp = expected.astype(np.float64)
        out = got.astype(np.float64)
        same_nan = np.isnan(exp) & np.isnan(out)
        same_inf = np.isinf(exp) & (out == exp)
        with np.errstate(invalid="ignore"):
            wrong = ~(same_nan | same_inf | (np.abs(out - exp) <= atol + rtol * np.abs(exp)))
    if np.any(wrong):
        count = int(np.count_nonzero(wrong))
        if expected.size == 1:
            raise CheckFailed(f"{what}: expected {_number(expected.reshape(-1)[0])} "
                              f"but got {_number(got.reshape(-1)[0])}",
                              f"{what}: the value is wrong")
        index = np.unravel_index(int(np.argmax(wrong)), expected.shape)
        raise CheckFailed(f"{what}: expected {_brief(expected)} but got {_brief(got)} ({count} of "
                          f"{expected.size} values wrong, the first at index {tuple(int(i) for i in index)}: "
                          f"expected {_number(expected[index])} but got {_number(got[index])})",
                          f"{what}: {_share(count, expected.size)} of the values are wrong")


def _share(count: int, size: int) -> str:
    """How many values are wrong, in words the public feedback can show (no number the box chose)."""
    return "all" if count == size else "one" if count == 1 else "most" if 2 * count > size else "some"


def _number(value: Any) -> str:
    return repr(value.item()) if isinstance(value, np.generic) else repr(value)


def _kind(dtype: np.dtype) -> str:
    if dtype == np.bool_:
        return "bool"
    if np.issubdtype(dtype, np.integer):
        return "integer"
    if np.issubdtype(dtype, np.floating):
        return "floating"
    return str(dtype)


def central_difference(fn: Callable[..., np.ndarray], inputs: list[np.ndarray], grad_output: np.ndarray,
                       eps: float = 1e-6) -> list[np.ndarray]:
    """d/dx of sum(fn(*inputs) * grad_output) for every element of every input, in float64.

    ``fn`` is a numpy function, so this never runs the package under test."""
    inputs = [np.array(x, dtype=np.float64) for x in inputs]
    weight = np.asarray(grad_output, dtype=np.float64)
    grads = []
    for x in inputs:
        grad = np.zeros_like(x)
        flat, grad_flat = x.reshape(-1), grad.reshape(-1)
        for i in range(flat.size):
            saved = flat[i]
            flat[i] = saved + eps
            plus = np.sum(np.asarray(fn(*inputs), dtype=np.float64) * weight)
            flat[i] = saved - eps
            minus = np.sum(np.asarray(fn(*inputs), dtype=np.float64) * weight)
            flat[i] = saved
            grad_flat[i] = (plus - minus) / (2 * eps)
        grads.append(grad)
    return grads


def _hypothesis() -> tuple[Any, Any]:
    """hypothesis's strategies and numpy strategies, imported on first use (the box never draws)."""
    from hypothesis import strategies
    from hypothesis.extra import numpy

    return strategies, numpy


def shapes(min_dims: int = 0, max_dims: int = 4, min_side: int = 1, max_side: int = 5) -> Any:
    """Array shapes small enough to check every element by finite differences."""
    _, hnp = _hypothesis()
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def arrays(shape: Any, dtype: Any = np.float32, low: float = -10.0, high: float = 10.0) -> Any:
    """Arrays of finite values in [low, high]; ``shape`` is a tuple or a strategy of tuples."""
    st, hnp = _hypothesis()
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.floating):
        elements = st.floats(low, high, allow_nan=False, allow_infinity=False, width=min(64, 8 * dtype.itemsize))
    elif np.issubdtype(dtype, np.integer):
        elements = st.integers(int(math.ceil(low)), int(math.floor(high)))
    else:
        elements = st.booleans()
    return hnp.arrays(dtype, shape, elements=elements, fill=st.nothing())  # every element drawn, none constant


def floats_arrays(shape: Any, low: float = -3.0, high: float = 3.0, dtype: Any = np.float64) -> Any:
    """Arrays for gradient checks (float64 unless told), every element drawn on its own, so that a wrong
    gradient cannot hide behind an array of one value."""
    return arrays(shape, dtype, low, high)


def signed_arrays(shape: tuple, low: float = 0.5, high: float = 3.0, dtype: Any = np.float64) -> Any:
    """Arrays of magnitude in [low, high], either sign, no element zero: safe divisors."""
    st, hnp = _hypothesis()
    return st.tuples(arrays(shape, dtype, low, high), hnp.arrays(np.bool_, shape, fill=st.nothing())).map(
        lambda pair: np.where(pair[1], pair[0], -pair[0]).astype(dtype))


def upstream(shape: tuple) -> Any:
    """An upstream gradient g for backward(g): float64, magnitudes in [0.25, 2], either sign, never zero."""
    return signed_arrays(shape, 0.25, 2.0)


def gradient_case(fn: Callable[..., Any], *input_strategies: Any, names: tuple[str, ...] = ("a", "b")) -> Any:
    """Cases {names...: arrays drawn from the strategies, "g": an upstream gradient of the shape of
    ``fn(*inputs)``}; ``fn`` is numpy, run here to learn the output's shape."""
    st, _ = _hypothesis()

    @st.composite
    def draw_case(draw: Any) -> dict:
        case = {name: draw(strategy) for name, strategy in zip(names, input_strategies)}
        case["g"] = draw(upstream(np.shape(fn(*[case[name] for name in names]))))
        return case
    return draw_case()


def leaf_gradients(tt: Any, fn: Callable[..., Any], inputs: list, grad_output: Any) -> list:
    """In the box: leaves for ``inputs`` (requires_grad), ``fn(*leaves).backward(grad_output)``, and their
    ``.grad`` arrays (None where no gradient arrived)."""
    leaves = [tt.Tensor(x, requires_grad=True) for x in inputs]
    fn(*leaves).backward(tt.Tensor(grad_output))
    return [None if leaf.grad is None else leaf.grad.numpy() for leaf in leaves]



def gradients_asked_for(tt: Any, fn: Callable[..., Any], inputs: list, grad_output: Any, names: list,
                        function: Any = None) -> dict:
    """In the box: each input in turn the only Tensor that requires grad, ``fn(*tensors).backward(grad_output)``;
    its ``.grad`` and the others' (None where no gradient arrived), for ``expect_gradients_asked_for``. With
    ``function``, the Function whose ``apply`` ends ``fn``: also the inputs its ``backward`` returned a gradient
    for though only one asked (called directly, on a fresh graph: the engine drops such a gradient unseen)."""
    found: dict[str, Any] = {}
    for k, name in enumerate(names):
        def leaves(k: int = k) -> list:  # the inputs, only the k-th requiring grad: a fresh graph each call
            return [tt.Tensor(x, requires_grad=i == k) for i, x in enumerate(inputs)]
        if function is not None:
            returned = function.backward(fn(*leaves()).grad_fn, np.asarray(grad_output))
            returned = returned if isinstance(returned, tuple | list) else (returned,)
            found[f"only {name} requires grad: {RETURNED}"] = [
                other for i, (other, grad) in enumerate(zip(names, returned)) if i != k and grad is not None]
        tensors = leaves()
        fn(*tensors).backward(tt.Tensor(grad_output))
        grads = [None if tensor.grad is None else tensor.grad.numpy() for tensor in tensors]
        found[f"only {name} requires grad: {name}.grad"] = grads[k]
        found[f"only {name} requires grad: the others' .grad"] = grads[:k] + grads[k + 1:]
    return found


RETURNED = "the others backward computed"


def expected_gradients_asked_for(names: list, grads: list) -> dict:
    """What ``gradients_asked_for`` must give: each input's gradient (``grads``, from central differences), and
    None for the inputs that did not ask for one."""
    expected = {}
    for name, grad in zip(names, grads):
        expected[f"only {name} requires grad: {name}.grad"] = grad
        expected[f"only {name} requires grad: the others' .grad"] = [None] * (len(names) - 1)
    return expected


def expect_gradients_asked_for(what: str, output: dict, names: list, grads: list, why: str = "",
                               **tolerance: Any) -> None:
    """Judge ``gradients_asked_for``: first no gradient computed that was not asked for (``why`` says what it
    would have cost), then the gradients against ``grads`` (from central differences)."""
    for name in names:
        extra = output.get(f"only {name} requires grad: {RETURNED}") or []
        if extra:
            raise CheckFailed(f"{what}: with only {name} requiring grad, backward computed a gradient for "
                              f"{' and '.join(map(str, extra))} too: compute each only if ctx.needs_input_grad "
                              f"asks{f' ({why})' if why else ''}")
    found = {key: value for key, value in output.items() if not key.endswith(RETURNED)}
    assert_close(found, expected_gradients_asked_for(names, grads), what=what, **tolerance)


def expect_causal(what: str, output: dict, right: np.ndarray, t: int, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """Judge a causality check: ``output["before"]``, the outputs up to position ``t``, must be ``right``, and
    ``output["after"]``, the same outputs once only the inputs after ``t`` changed, must not have moved."""
    before, after = np.asarray(output["before"]), np.asarray(output["after"])
    if before.shape != right.shape or not np.allclose(before, right, rtol=rtol, atol=atol):
        raise CheckFailed(f"{what}: the outputs up to position {t} are wrong", f"{what}: the outputs are wrong")
    if after.shape != before.shape or not np.allclose(after, before, rtol=rtol / 10, atol=atol / 10):
        _fail(f"{what}: the outputs up to position {t} changed when only the inputs after {t} changed: the future "
              f"leaks into the past")


# --- draws from the package's default generator (layer initialisations, dropout masks, ...) --------------

def seed_pair() -> Any:
    """Cases {"seeds": [s, t]}: two different seeds for ``seeded_draws``."""
    st, _ = _hypothesis()
    return st.lists(st.integers(0, 2**31), min_size=2, max_size=2, unique=True).map(lambda seeds: {"seeds": seeds})


def seeded_draws(tt: Any, draw: Callable[[], np.ndarray], seeds: list) -> dict:
    """In the box: ``draw()`` after ``tt.manual_seed(s)``, again after the same seed, once more without a
    seed, and after ``manual_seed(t)``; the raw values, for ``expect_seeded_draws`` to judge."""
    def after(seed: int | None) -> np.ndarray:
        if seed is not None:
            tt.manual_seed(seed)
        return np.asarray(draw())
    return {"first": after(seeds[0]), "again": after(seeds[0]), "next": after(None), "other seed": after(seeds[1])}


def _fail(sentence: str) -> None:
    """A verdict whose words reveal no expected value: public as it is."""
    raise CheckFailed(sentence, sentence)


def expect_seeded_draws(what: str, output: dict) -> None:
    """Judge ``seeded_draws``: the same seed repeats the values, the next draw and another seed do not."""
    if not np.array_equal(output["first"], output["again"]):
        _fail(f"{what}: the same seed gave different values; draw them from tinytorch's default_generator")
    if np.array_equal(output["again"], output["next"]):
        _fail(f"{what}: the next draw repeated the last one; each draw must advance the generator")
    if np.array_equal(output["first"], output["other seed"]):
        _fail(f"{what}: two different seeds gave the same values")


def generator_draws(tt: Any, draw: Callable[[Any], Any], seed: int) -> dict:
    """In the box, for what takes ``generator=`` (None: tinytorch's default_generator): ``seeded_draws`` of
    ``draw(None)`` for the seeds ``seed`` and ``seed + 1``; ``draw(np.random.default_rng(seed))`` after
    ``tt.manual_seed(0)`` and after ``tt.manual_seed(1)``, and with the generator of ``seed + 1``; and
    ``tt.randn(4)`` after the first of these, and after ``tt.manual_seed(0)`` alone."""
    found = seeded_draws(tt, lambda: draw(None), [seed, seed + 1])
    for name, (own, default) in {"given": (seed, 0), "given, another manual_seed": (seed, 1),
                                 "given, another seed": (seed + 1, 0)}.items():
        tt.manual_seed(default)
        found[name] = np.asarray(draw(np.random.default_rng(own)))
        found[f"tt.randn(4) after {name}"] = tt.randn(4).numpy()
    tt.manual_seed(0)
    found["tt.randn(4) alone"] = tt.randn(4).numpy()
    return found


def expect_generator_draws(what: str, output: dict) -> None:
    """Judge ``generator_draws``: without a generator the draws are the default generator's
    (``expect_seeded_draws``); with one they come from it alone, whatever ``tt.manual_seed`` said, and leave the
    default generator where it was."""
    expect_seeded_draws(what, output)
    if not np.array_equal(output["given"], output["given, another manual_seed"]):
        _fail(f"{what}: with generator=np.random.default_rng(seed) the draws changed with tt.manual_seed; draw from "
              f"the generator given")
    if np.array_equal(output["given"], output["given, another seed"]):
        _fail(f"{what}: generators of two different seeds gave the same draws; draw from the generator given")
    if not np.array_equal(output["tt.randn(4) after given"], output["tt.randn(4) alone"]):
        _fail(f"{what}: drawing with a generator given moved tinytorch's default_generator; leave it alone")


def draws_around(tt: Any, run: Callable[[], Any], seed: int = 1) -> dict:
    """In the box: ``tt.randn(8)`` after ``tt.manual_seed(seed)`` and ``run()``, and right after
    ``tt.manual_seed(seed)`` alone, for ``expect_no_draws``."""
    tt.manual_seed(seed)
    run()
    after = tt.randn(8).numpy()
    tt.manual_seed(seed)
    return {"drawn after it": after, "drawn without it": tt.randn(8).numpy()}


def expect_no_draws(what: str, output: dict, fix: str) -> None:
    """Judge ``draws_around`` (or the same two draws of a generator of its own): what was drawn after the call
    is what is drawn without it, so the call drew nothing."""
    if not np.array_equal(output["drawn after it"], output["drawn without it"]):
        _fail(f"{what} drew random numbers (the numbers drawn after it changed): {fix}")


def expect_uniform(what: str, values: Any, bound: float, rule: str = "") -> None:
    """Judge draws of U(-bound, bound) (``rule`` says why that bound): every value within it, hardly one
    repeated, and the mean, the standard deviation and the share in each quarter of the range within six
    standard errors of the uniform distribution's (over hundreds of thousands of values, a quarter of a
    percent)."""
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    n, std, why = values.size, bound / math.sqrt(3), f" ({rule})" if rule else ""
    if np.abs(values).max() > bound * (1 + 1e-6):
        raise CheckFailed(f"{what}: the values must lie within ±{bound:.5f}{why}, found "
                          f"{values[np.abs(values).argmax()]:.5f}", f"{what}: values lie outside the bound{why}")
    if np.unique(values).size < n // 2:
        raise CheckFailed(f"{what}: the values are not random (only {np.unique(values).size} distinct values among "
                          f"{n})", f"{what}: the values are not random")
    if abs(values.mean()) > 6 * std / math.sqrt(n) or abs(values.std() / std - 1) > 6 * 0.45 / math.sqrt(n):
        raise CheckFailed(f"{what}: the mean {values.mean():.5f} and std {values.std():.5f} of {n} values should be "
                          f"those of U(-{bound:.4f}, {bound:.4f}){why}: 0 and {std:.5f}",
                          f"{what}: the mean and std are not those of the uniform distribution{why}")
    quarters = np.histogram(values, bins=4, range=(-bound, bound))[0] / n
    if np.abs(quarters - 0.25).max() > 6 * 0.44 / math.sqrt(n):
        raise CheckFailed(f"{what}: the values should be spread evenly over [-{bound:.4f}, {bound:.4f}], but the "
                          f"quarters of that range hold {np.round(quarters, 3).tolist()} of them",
                          f"{what}: the values are not spread evenly over the range{why}")
