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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "Check", "CheckFamily", "Timed", "CheckFailed", "check", "by_variant", "expect_error", "assert_close",
    "capture_error", "central_difference",
    "finite", "shapes", "arrays", "floats_arrays", "signed_arrays", "upstream", "gradient_case", "leaf_gradients",
    "seed_pair", "seeded_draws", "expect_seeded_draws",
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


def by_variant(*families: tuple[CheckFamily, dict]) -> None:
    """Give each check of a family the task and points its variant has in the family's table
    (``{variant: (task, points, ...)}``): a behaviour shared by several operations belongs to each
    operation's task. Run on the judge's side, at import of the suite."""
    for family, table in families:
        for member in family.checks:
            member.task, member.points = table[member.name.split("[", 1)[1][:-1]][:2]


def check(*, task: str, points: float, inputs: Any = None, variants: dict[str, Any] | None = None,
          describe: Callable[[dict], str] | None = None, examples: int = 25, timeout: float = 30.0,
          rtol: float = 1e-5, atol: float = 1e-6, dtype: bool = False,
          guard: bool = False, timed: Timed | None = None) -> Callable[[Callable], Any]:
    """Decorator turning ``compute(tt, case)`` into a graded check worth ``points`` for ``task``; with
    ``variants`` (a dict of name to strategy of cases), into one check per variant. ``guard``: a constant
    implementation could pass it, so it counts only together with its task's other checks."""
    def one(compute: Callable[[Any, dict], Any], name: str, strategy: Any) -> Check:
        return Check(name=name, task=task, points=points, compute=compute, inputs=strategy, describe=describe,
                     examples=examples if strategy is not None else 1, timeout=timeout,
                     rtol=rtol, atol=atol, dtype=dtype, guard=guard, timed=timed)

    def make(compute: Callable[[Any, dict], Any]) -> Any:
        if variants is None:
            return one(compute, compute.__name__, inputs)
        return CheckFamily([one(compute, f"{compute.__name__}[{variant}]", strategy)
                            for variant, strategy in variants.items()])
    return make


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


def expect_error(what: str, output: dict, error: str | None, words: tuple = ()) -> None:
    """Judge a ``capture_error`` result: ``error`` raised (None: no error; "any": some error), its message
    holding one of ``words`` (lower case)."""
    raised, message = output["raised"], output["message"]
    wanted = "no error" if error is None else "an error" if error == "any" else f"a {error}"
    if (raised is None) != (error is None) or error not in ("any", raised):
        said = f"a {raised} ({message!r:.80})" if raised else "no error"
        raise CheckFailed(f"{what}: expected {wanted} but got {said}",
                          f"{what}: expected {wanted} but got {raised or 'none'}")
    if raised and words and not any(word in message.lower() for word in words):
        raise CheckFailed(f"{what}: the {raised}'s message {message!r:.80} should name {' or '.join(words)}",
                          f"{what}: the {raised}'s message does not name {' or '.join(words)}")


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
            raise CheckFailed(f"{what}: expected {len(expected)} results but got {output!r:.80}",
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


def expect_seeded_draws(what: str, output: dict) -> None:
    """Judge ``seeded_draws``: the same seed repeats the values, the next draw and another seed do not."""
    if not np.array_equal(output["first"], output["again"]):
        raise CheckFailed(f"{what}: the same seed gave different values; draw them from tinytorch's default_generator")
    if np.array_equal(output["again"], output["next"]):
        raise CheckFailed(f"{what}: the next draw repeated the last one; each draw must advance the generator")
    if np.array_equal(output["first"], output["other seed"]):
        raise CheckFailed(f"{what}: two different seeds gave the same values")
