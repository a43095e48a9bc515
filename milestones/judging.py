"""The verdict every milestone prints last, and its exit status: judged only after the run its target is
set for; 0 when the target is reached, 1 otherwise."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable


def stopped(error: Exception) -> int:
    """The run stopped on `error` from the package: 1 at a stub (the task to finish is named), else the
    traceback and 2."""
    if isinstance(error, NotImplementedError):
        print(f"\nThe milestone stopped at a stub: {error}. Finish that task (`tito test NN` shows what is left), "
              "then run the milestone again.", file=sys.stderr)
        return 1
    traceback.print_exception(error)
    print("\nThe milestone stopped on an error in the package (above).", file=sys.stderr)
    return 2


def judge(log: Callable[[str], None], *, result: float, ran: int, judged: int, unit: str, target: float,
          pytorch: float, pace: str, hint: str, lower_is_better: bool = False, fmt: str = ".2%") -> int:
    """`result` (test accuracy, or with lower_is_better a loss) after `ran` of `judged` epochs or steps
    (`unit`); `pace` says the time per epoch or step; `hint` where to look when the target is missed."""
    if ran != judged:
        said = unit[:-1] if ran == 1 else unit  # "after 1 epoch"
        log(f"{'validation loss' if lower_is_better else 'test accuracy'} after {ran} {said}: {result:{fmt}}; {pace}")
        log(f"not judged: the milestone is judged after {judged} {unit}, and this run had {ran}")
        return 1
    name = "validation loss" if lower_is_better else "test accuracy"
    log(f"{name} after {ran} {unit}: {result:{fmt}} (PyTorch, same set-up: {pytorch:{fmt}}); {pace}")
    reached = result <= target if lower_is_better else result >= target
    sign = "<=" if lower_is_better else ">="
    if reached:
        log(f"milestone reached: {result:{fmt}} {sign} {target:{fmt}}")
        return 0
    log(f"milestone not reached: {result:{fmt}} is not {sign} {target:{fmt}}; the reference reaches it, so "
        f"look at {hint}")
    return 1
