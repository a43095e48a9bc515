"""The hidden suites are written in the form the official grader needs: every check names a task of its
own stage, is worth points, and its `compute` part can be shipped to a sandboxed process without the
code that decides the verdict (strategies, `expected`, `verdict` and the helpers only they use)."""

from __future__ import annotations

import builtins
import dis

import pytest

from tito.project import stages
from tito.source import read_source, tasks
from tito.suite import compute_slice, load_checks

from conftest import REPO

STAGES = stages(REPO)


def _globals_used(code) -> set[str]:
    names = {ins.argval for ins in dis.get_instructions(code) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            names |= _globals_used(const)
    return names


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_check_names_a_task_of_its_stage_and_is_worth_points(stage):
    known = {task.id for task in tasks(read_source(stage))}
    checks = load_checks(stage)
    assert len({c.name for c in checks}) == len(checks), "two checks share a name"
    for check in checks:
        assert check.task in known, f"{check.name} grades task {check.task}, which {stage.name} does not have"
        assert check.points > 0
        assert check._expected is not None or check._verdict is not None, f"{check.name} cannot be judged"


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_compute_parts_can_be_shipped_without_the_judging_parts(stage):
    """The official grader ships only the compute slice of a suite to the sandbox."""
    checks = load_checks(stage)
    for check in checks:
        assert check.compute.__code__.co_freevars == (), (
            f"{check.name}.compute closes over {check.compute.__code__.co_freevars}; draw the variant into the case")
    shipped = compute_slice(stage.suite)
    namespace: dict = {}
    exec(compile(shipped, f"compute slice of {stage.name}", "exec"), namespace)
    for check in checks:
        assert callable(namespace.get(check.compute.__name__)), f"{check.name} is missing from the compute slice"
    assert ".expected" not in shipped and ".verdict" not in shipped, "judging code would reach the sandbox"
    for check in checks:
        missing = _globals_used(check.compute.__code__) - set(namespace) - set(dir(builtins))
        assert not missing, f"{check.name}.compute needs {sorted(missing)}, which the slice does not define"
