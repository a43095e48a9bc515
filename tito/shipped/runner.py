"""The program that runs beside the package under test, in every box: a plain child process for
`tito test`, the bubblewrap sandbox for `tito grade` and the nbgrader judge.

    python -I -S runner.py JOB PACKAGE FIRST REPORT_FD [PATH ...]

It imports nothing from tito: the grader copies it with wire.py, checklib.py and the suite's compute
slice into JOB/lib. It imports `tinytorch` from PACKAGE, runs the compute part of each check of
JOB/work.json from number FIRST on, and writes what happened to the pipe REPORT_FD: one record when
a check begins, one with its outcomes when it ends (an output per case, or the first stub, error or
timeout, after which the check stops). It decides nothing; the trusted parent judges every output.
"""

import os
import signal
import sys
from types import FrameType, TracebackType
from typing import Any


class OverBudget(BaseException):
    """Raised by a timer: a BaseException, so `except Exception` in student code does not swallow it."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind  # "cpu" or "wall"


def _expire(signum: int, frame: FrameType | None) -> None:
    raise OverBudget("cpu" if signum == signal.SIGPROF else "wall")


def _arm(cpu: float, wall: float) -> None:
    signal.setitimer(signal.ITIMER_PROF, cpu)  # CPU time of this process: the same on a busy machine
    signal.setitimer(signal.ITIMER_REAL, wall)  # a backstop for code that sleeps or waits


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else '(no message)'}"[:500]


def _where(trace: TracebackType | None, package: str) -> str:
    """`core/tensor.py line 57, in sum`: the innermost frame of the package under test, if any."""
    found = ""
    while trace is not None:
        code = trace.tb_frame.f_code
        if code.co_filename.startswith(package + os.sep):
            found = f"{code.co_filename[len(package) + 1:]} line {trace.tb_lineno}, in {code.co_name}"
        trace = trace.tb_next
    return found.removeprefix("tinytorch/")


def _frame_where(frame: FrameType | None, package: str) -> str:
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(package + os.sep):
            where = f"{code.co_filename[len(package) + 1:]} line {frame.f_lineno}, in {code.co_name}"
            return where.removeprefix("tinytorch/")
        frame = frame.f_back
    return ""


def _freeze(modules: dict) -> dict[str, tuple[Any, Any, Any]]:
    """The grader's own functions and their code, taken before the package under test is imported."""
    return {f"{label}.{name}": (value, value.__code__, getattr(value, "__defaults__", None))
            for label, module in modules.items() for name, value in list(vars(module).items())
            if callable(value) and hasattr(value, "__code__")}


def _changed(frozen: dict[str, tuple[Any, Any, Any]]) -> str:
    """Which of the grader's functions the package under test replaced or rewrote, if any: its outputs
    would then not be the grader's computation."""
    modules = {"compute_slice": sys.modules.get("compute_slice"), "wire": sys.modules.get("wire"),
               "runner": sys.modules.get(__name__)}
    for key, (saved, code, defaults) in frozen.items():
        label, name = key.split(".", 1)
        if getattr(modules[label], name, None) is not saved or getattr(saved, "__code__", None) is not code \
                or getattr(saved, "__defaults__", None) is not defaults:
            return key
    return ""


def _run_check(check: dict, compute: Any, tt: Any, package: str, wire: Any) -> list:
    outcomes = []
    try:
        _arm(check["cpu"], check["wall"])
        for case in check["cases"]:
            try:
                output = compute(tt, case)
            except NotImplementedError as error:
                outcomes.append({"stub": str(error).strip()[:500]})
                break
            except OverBudget:
                raise
            except BaseException as error:  # student code may raise anything, SystemExit included
                outcomes.append({"error": _first_line(error), "where": _where(error.__traceback__, package)})
                break
            try:
                outcomes.append({"output": wire.encode(output)})
            except wire.WireError as error:
                outcomes.append({"unsendable": str(error)[:300]})
                break
    except OverBudget as budget:
        outcomes.append({"timeout": budget.kind, "where": _where(budget.__traceback__, package)})
    finally:
        _disarm()
    return outcomes


def main(job: str, package: str, first: int, report_fd: int, paths: list) -> None:
    sys.path[:0] = [package, os.path.join(job, "lib")]
    sys.path += paths
    import json

    import wire

    with open(os.path.join(job, "work.json"), encoding="utf-8") as stream:
        work = wire.loads(stream.read())
    out = os.fdopen(report_fd, "w", encoding="utf-8")

    def emit(record: dict) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file too large fails to write, not the process
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGPROF, _expire)
    signal.signal(signal.SIGALRM, _expire)
    emit({"importing": first})  # before any code of the package under test runs
    try:
        _arm(work["import_cpu"], work["import_wall"])
        import compute_slice

        frozen = _freeze({"compute_slice": compute_slice, "wire": wire, "runner": sys.modules[__name__]})
        import tinytorch as tt
        _disarm()
    except OverBudget as budget:
        _disarm()
        trace = budget.__traceback__
        while trace is not None and trace.tb_next is not None:
            trace = trace.tb_next
        emit({"import_timeout": budget.kind, "where": _frame_where(trace.tb_frame if trace else None, package)})
        return
    except BaseException as error:  # the package under test may raise anything on import
        _disarm()
        emit({"import_error": _first_line(error), "where": _where(error.__traceback__, package)})
        return
    changed = _changed(frozen)
    if changed:
        emit({"tampered": changed})
        return
    emit({"imported": True})
    for check in work["checks"][first:]:
        emit({"begin": check["name"]})
        compute = frozen[f"compute_slice.{check['function']}"][0]
        outcomes = _run_check(check, compute, tt, package, wire)
        changed = _changed(frozen)
        if changed:
            emit({"tampered": changed})
            return
        emit({"check": check["name"], "outcomes": outcomes})
    emit({"finished": True})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    os._exit(0)  # no interpreter shutdown: nothing the package registered with atexit runs
