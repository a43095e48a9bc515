"""The feedback runner: pytest collects every `Check` in a suite and runs it in this one process.

`tito test` starts pytest with ``--tito-report PATH``; each finished check appends one JSON line there
(id, task, points, passed, message). Nothing printed by the package under test reaches the report.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import signal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from checklib import Check, CheckFailed


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tito-report", default=None, help="append one JSON line per finished check here")


def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> Any:
    if isinstance(obj, Check) and name == obj.name:  # a check is collected once, under its own name
        return CheckItem.from_parent(collector, name=name, check=obj)
    return None


class CheckTimeout(BaseException):
    """Raised by the timer. A BaseException, so hypothesis neither shrinks nor replays the slow case."""


class StubReached(BaseException):
    """An untouched stub: stop at once (no shrinking) and report the task it names."""

    def __init__(self, error: NotImplementedError) -> None:
        super().__init__(str(error))
        self.error = error


@contextlib.contextmanager
def _time_limit(seconds: float):
    def expire(signum, frame):
        raise CheckTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _import_package() -> Any:
    try:
        return importlib.import_module("tinytorch")
    except Exception as error:
        raise CheckFailed(f"could not import tinytorch: {type(error).__name__}: {error}") from error


class CheckItem(pytest.Item):
    def __init__(self, *, check: Check, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.add_marker(pytest.mark.task(check.task))

    def runtest(self) -> None:
        check = self.check
        tt = _import_package()

        @settings(max_examples=check.examples, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
        @given(check.inputs)
        def run(case: dict) -> None:
            try:
                output = check.compute(tt, case)
            except NotImplementedError as error:
                raise StubReached(error) from error
            except CheckFailed:
                raise
            except (Exception, SystemExit) as error:
                raise CheckFailed(f"{check.what(case)}: your code raised {type(error).__name__}: "
                                  f"{_first_line(error)}") from error
            check.judge(case, output)

        try:
            with _time_limit(check.timeout):
                run()
        except StubReached as stub:
            raise stub.error from None

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return failure_message(self.check, excinfo.value)

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, f"{self.check.task} {self.name}"


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else "(no message)"


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def failure_message(check: Check, error: BaseException) -> str:
    """One sentence for a student: what was expected and what came back."""
    error = _leaf(error)
    if isinstance(error, CheckTimeout):
        return f"{check.doc}: did not finish within {check.timeout:g} s"
    if isinstance(error, NotImplementedError):
        text = _first_line(error)
        return text if text.startswith("Task ") else f"{check.doc}: NotImplementedError: {text}"
    if isinstance(error, CheckFailed):
        return _first_line(error)
    return f"{check.doc}: the check itself failed ({type(error).__name__}: {_first_line(error)})"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if _report_path is None or not (report.when == "call" or (report.when == "setup" and report.failed)):
        return
    item = _items.get(report.nodeid)
    if item is None:
        return
    check = item.check
    line = {"id": check.name, "task": check.task, "points": check.points if report.passed else 0,
            "max_points": check.points, "passed": report.passed,
            "message": "" if report.passed else str(report.longrepr)}
    with open(_report_path, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(line) + "\n")


_report_path: str | None = None
_items: dict[str, CheckItem] = {}


def pytest_configure(config: pytest.Config) -> None:
    global _report_path
    _report_path = config.getoption("--tito-report")
    config.addinivalue_line("markers", "task(id): the task a check grades")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, CheckItem):
            _items[item.nodeid] = item
