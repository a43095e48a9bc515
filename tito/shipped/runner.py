"""The program that runs beside the package under test, in every box: a plain child process for
`tito test`, the bubblewrap sandbox for `tito grade` and the nbgrader judge.

    python -I -S runner.py JOB PACKAGE REPORT_FD REQUEST_FD [PATH ...]

It imports nothing from tito: the grader copies it with wire.py, checklib.py and the suite's compute
slice into JOB/lib. It imports `tinytorch` from PACKAGE ("-": no package, for the yardstick of a timed
check), says so on the pipe REPORT_FD, then answers requests from the pipe REQUEST_FD until it closes:
each request names a check of JOB/work.json and carries one case; the reply is that case's outcome (an
output, or the stub, error or timeout it met). After a check's cases the parent asks for an audit: whether
every object of the grader's code in the box is still the one it was before the package was imported.
The cases reach the box only one at a time, when the parent asks, and the parent keeps every clock: which
check runs, when, for how long and at what cost is its knowledge. The runner decides nothing; the
trusted parent judges every output.
"""

import importlib
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


def _parts(value: Any) -> list[tuple[Any, Any]]:
    """What a value of the grader's code holds that its computation depends on: a container's items, a
    function's code, defaults and closure, a class's attributes (never an imported module's)."""
    if isinstance(value, dict):
        return [(repr(key)[:40], item) for key, item in list(value.items())]
    if isinstance(value, (set, frozenset)):
        return list(enumerate(sorted(value, key=id)))
    if isinstance(value, (list, tuple)):
        return list(enumerate(value))
    if callable(value) and hasattr(value, "__code__"):
        cells = [cell.cell_contents for cell in (value.__closure__ or ()) if _filled(cell)]
        return [("code", value.__code__), ("defaults", value.__defaults__), ("kwdefaults", value.__kwdefaults__),
                *enumerate(cells)]
    wrapped = getattr(value, "__wrapped__", None) or getattr(value, "func", None)
    if wrapped is not None and callable(wrapped):  # functools' wrappers: lru_cache, partial
        return [("wrapped", wrapped), ("args", getattr(value, "args", None))]
    if isinstance(value, type) and value.__module__ == "compute_slice":
        return [(name, item) for name, item in list(vars(value).items()) if not name.startswith("__")]
    return []


def _filled(cell: Any) -> bool:
    try:
        return cell.cell_contents is not cell  # reading an empty cell raises
    except ValueError:
        return False


def _freeze(modules: dict) -> dict[str, tuple[int, Any]]:
    """Every object the grader's code in the box holds, by place, with its identity (and an array's bytes),
    taken before the package under test is imported: module-level functions and everything reachable
    from the module-level values of the compute slice (the tables of lambdas a check looks its variant up
    in, closures, classes), so that a package which swaps one of them is caught."""
    frozen: dict[str, tuple[int, Any]] = {}
    pending = [(label, value) for label, module in modules.items() for value in [module]]
    seen: set[int] = set()
    while pending and len(frozen) < 100_000:
        place, value = pending.pop()
        if id(value) in seen or isinstance(value, type(sys)) and place not in modules:
            frozen[place] = (id(value), None)
            continue
        seen.add(id(value))
        frozen[place] = (id(value), _content(value))
        parts = [(name, item) for name, item in list(vars(value).items()) if not name.startswith("__")] \
            if isinstance(value, type(sys)) else _parts(value)
        pending += [(f"{place}.{name}", item) for name, item in parts]
    frozen[""] = (0, modules)  # the modules themselves, for _changed
    return frozen


def _content(value: Any) -> Any:
    """An ndarray's bytes, checked as well as its identity (only small ones: the compute slice's constants)."""
    nbytes = getattr(value, "nbytes", None)
    if type(value).__name__ == "ndarray" and isinstance(nbytes, int) and nbytes <= 1 << 20:
        return value.tobytes()
    return None


def _changed(frozen: dict[str, tuple[int, Any]]) -> str:
    """Which object of the grader's code the package under test replaced or rewrote, if any (its place,
    such as `compute_slice.SPEED.'sum'.3`): the box's outputs would then not be the grader's computation."""
    now = _freeze(frozen[""][1])
    for place, (identity, content) in frozen.items():
        if place and (now.get(place) != (identity, content) if content is not None else
                      place not in now or now[place][0] != identity):
            return place
    return ""


def _run_case(compute: Any, tt: Any, case: Any, budget: tuple[float, float], package: str, wire: Any) -> dict:
    """One case's outcome. The timers are a courtesy (they say where a loop was); the parent enforces
    the budget from outside whatever happens to them."""
    try:
        _arm(*budget)
        try:
            output = compute(tt, case)
        except NotImplementedError as error:
            return {"stub": str(error).strip()[:500]}
        except OverBudget:
            raise
        except BaseException as error:  # student code may raise anything, SystemExit included
            return {"error": _first_line(error), "where": _where(error.__traceback__, package)}
        finally:
            _disarm()
    except OverBudget as budget_spent:
        return {"timeout": budget_spent.kind, "where": _where(budget_spent.__traceback__, package)}
    try:
        return {"output": wire.encode(output)}
    except wire.WireError as error:
        return {"unsendable": str(error)[:300]}


def _keep_freed_memory() -> None:
    """glibc's malloc keeps freed blocks up to 32 MiB for reuse, as the milestones ask too: the box
    with the package and the yardstick's box without it then allocate alike (fresh mappings would cost the
    yardstick a page fault per 4 KiB and make a timed check's ratio about half of what it is)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError, ImportError):
            return
        mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD


def main(job: str, package: str, report_fd: int, request_fd: int, paths: list) -> None:
    _keep_freed_memory()
    sys.path[:0] = [os.path.join(job, "lib")] if package == "-" else [package, os.path.join(job, "lib")]
    sys.path += paths
    import json

    import wire

    with open(os.path.join(job, "work.json"), encoding="utf-8") as stream:
        work = wire.loads(stream.read())
    out = os.fdopen(report_fd, "w", encoding="utf-8")
    requests = os.fdopen(request_fd, "r", encoding="utf-8")

    def emit(record: dict) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file too large fails to write, not the process
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    signal.signal(signal.SIGPROF, _expire)
    signal.signal(signal.SIGALRM, _expire)
    emit({"importing": True})  # before any code of the package under test runs
    tt: Any = None
    try:
        _arm(work["import_cpu"], work["import_wall"])
        import compute_slice

        frozen = _freeze({"compute_slice": compute_slice, "wire": wire, "runner": sys.modules[__name__]})
        if package != "-":
            tt = importlib.import_module("tinytorch")
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
    checks = {check["name"]: check for check in work["checks"]}
    for line in requests:
        request = json.loads(line)
        if "audit" in request:  # after a check's cases, outside every timed call: is the grader's code intact?
            changed = _changed(frozen)
            emit({"n": request["n"], "tampered": changed} if changed else {"n": request["n"], "audit": "clean"})
            continue
        check = checks[request["run"]]
        function = check["yardstick"] if package == "-" else check["function"]
        compute = getattr(compute_slice, function)  # looked up in the audited module at each request
        if package == "-":
            compute = (lambda yardstick: lambda tt, case: yardstick(case))(compute)
        outcome = _run_case(compute, tt, wire.decode(request["case"]), (request["cpu"], request["wall"]),
                            package, wire)
        emit({"n": request["n"], "outcome": outcome})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    os._exit(0)  # no interpreter shutdown: nothing the package registered with atexit runs
