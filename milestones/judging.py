"""The verdict every milestone prints last, and its exit status: judged only after the run its target is
set for; 0 when the target is reached, 1 otherwise. And the allocator setting the training scripts (and the
benchmark) ask for: `import tinytorch` itself changes nothing process-wide."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable


def keep_freed_memory() -> None:
    """Ask glibc's malloc to keep freed memory for the next arrays instead of handing it back to the kernel.
    By default an array of more than 128 KiB is a fresh mapping, and every 4 KiB page of it costs a page fault
    on first touch: a GPT training step that allocates a few hundred such arrays then spends a tenth of its
    time in the kernel (about 10,000 faults a step, measured on the milestone's GPT). PyTorch keeps a cache of
    freed blocks for the same reason. Elsewhere (macOS, musl) this does nothing."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: blocks up to 32 MiB come from the heap, reused when freed
    mallopt(-1, 1 << 30)   # M_TRIM_THRESHOLD: keep up to 1 GiB of free heap instead of returning it


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
