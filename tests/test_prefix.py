"""Points follow the work: a student who has completed tasks 1..k of a stage (and every earlier stage
completely) gets exactly the points of the checks of tasks 1..k. Every check of a task among the first k
passes and every other check fails, for every k from 0 (nothing done) to the last task; at the last, the
stage's notebook counts every task done (as `tito status` shows it) and the score is full marks.

Graded in the same interpreter, with the same cases (those of `tito test NN`): the untouched course, as a
student first finds it, scores 0 on every check, and each failure names a task instead of showing a
traceback, at least one a task of this stage; the reference solutions, exported as `tito test NN
--reference` exports them, score full marks (`tito test NN`'s exit status follows from the score).

"The first k tasks" is read both ways where they differ: by task number, the order the narrative asks
for, and by first appearance in the source, the order of the notebook's stubs (in 03 the stub of 03.8,
softmax's backward, sits in the class of 03.6, above 03.7)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tito import engine, package, sandbox
from tito.project import Stage, stages
from tito.source import progress, read_notebook, read_source, source_tasks, tasks

from conftest import copy_course, stage_numbers
from student import fill

pytestmark = pytest.mark.slow  # a real grading per prefix: left out by make test-fast
STAGES = stage_numbers()


def _prefixes(source_order: list[str]) -> list[list[str]]:
    """Each distinct prefix of the tasks by number, then those of the source order that are not among
    them; the first is the empty prefix."""
    by_number = sorted(source_order, key=lambda task: int(task.split(".")[1]))
    found = [by_number[:k] for k in range(len(by_number) + 1)]
    sets = [set(prefix) for prefix in found]
    for k in range(1, len(source_order) + 1):
        if set(source_order[:k]) not in sets:
            found.append(source_order[:k])
            sets.append(set(source_order[:k]))
    return found


@pytest.mark.parametrize("stage", STAGES)
def test_each_prefix_of_tasks_earns_exactly_the_points_of_its_checks(tmp_path, stage):
    course = copy_course(tmp_path / "course")
    # one fresh interpreter per stage, as `tito test` runs (test_one_engine runs that command itself): the
    # prefixes are graded there one after the other, without a new interpreter for each
    done = subprocess.run([sys.executable, __file__, str(course), stage], capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    problems = json.loads(done.stdout.splitlines()[-1])
    assert not problems, f"{len(problems)} violations in stage {stage}:\n" + "\n".join(problems)


def _untouched_and_reference(course: Path, current: Stage, plan: engine.Plan) -> list[str]:
    """The untouched course scores 0 on every check, with failures that name tasks, not tracebacks; the
    reference scores full marks."""
    problems: list[str] = []
    package.export(course, current)
    untouched = engine.grade_stage(plan, course / "src", isolation="process", limits=sandbox.Limits()).as_json()
    passed = [t["id"] for t in untouched["tests"] if t["passed"] or t["points"] != 0]
    if passed or untouched["score"] != 0:
        problems.append(f"untouched: score {untouched['score']}; these checks pass on untouched stubs: {passed}")
    if not any(t["message"].startswith(f"Task {current.number}.") for t in untouched["tests"]):
        problems.append("untouched: no failure message names a task of this stage")
    problems += [f"untouched: {t['id']} shows a traceback: {t['message']}" for t in untouched["tests"]
                 if "Traceback" in t["message"]]
    package.export(course, stages(course)[-1], reference=True)  # as `tito test NN --reference`: whole, once
    reference = engine.grade_stage(plan, package.package_root(course, True), isolation="process",
                                   limits=sandbox.Limits()).as_json()
    problems += [f"reference: {t['id']} fails: {t['message']}" for t in reference["tests"] if not t["passed"]]
    if not reference["score"] == reference["max_score"] > 0:
        problems.append(f"reference: score {reference['score']} of {reference['max_score']}")
    return problems


def grade_prefixes(course: Path, stage: str) -> list[str]:
    """Grade the untouched course and the reference; then fill the earlier stages, then each prefix of this
    stage's tasks, grade it as `tito test NN --json` does, and return every violation of the rule."""
    known = stages(course)
    current = next(s for s in known if s.number == stage)
    plan = engine.make_plan(current, seed=engine.stage_seed("feedback", current), jobs=course / ".tito" / "jobs")
    before = _untouched_and_reference(course, current, plan)
    for earlier in known:
        if earlier.number < stage:
            fill(earlier.notebook, earlier.source)
    untouched = course / "untouched.ipynb"
    shutil.copy2(current.notebook, untouched)
    order = [task.id for task in tasks(read_source(current))]
    assert order, f"{current.name} has no tasks"
    problems: list[str] = []
    every_check: set[str] | None = None
    filled: set[str] = set()
    for prefix in _prefixes(order):
        done = set(prefix)
        if not filled <= done:                          # not an extension of what is filled: start again
            shutil.copy2(untouched, current.notebook)
            filled = set()
        if done - filled:
            fill(current.notebook, current.source, tasks=done - filled)
            filled = set(done)
        k = f"k={len(prefix)} (tasks {', '.join(prefix) or 'none'})"
        package.export(course, current)
        result = engine.grade_stage(plan, course / "src", isolation="process", limits=sandbox.Limits()).as_json()
        checks = {test["id"] for test in result["tests"]}
        assert checks, f"stage {stage} reported no checks"
        every_check = checks if every_check is None else every_check
        assert checks == every_check, f"{k}: the checks reported changed: {sorted(checks ^ every_check)}"
        for test in result["tests"]:
            if test["passed"] and test["task"] not in done:
                problems.append(f"{k}: {test['id']} [task {test['task']}] passes though its task is still a stub")
            elif not test["passed"] and test["task"] in done:
                problems.append(f"{k}: {test['id']} [task {test['task']}] fails though its task is done: "
                                f"{test['message']}")
        expected = sum(test["max_points"] for test in result["tests"] if test["task"] in done)
        if not problems and abs(result["score"] - expected) > 1e-9:
            problems.append(f"{k}: score {result['score']}, expected {expected}")
        if done == set(order):  # every task: `tito status` counts them all, and the marks are full
            counted = len(progress(current, read_notebook(current)).done)
            if counted != len(source_tasks(current)):
                problems.append(f"{k}: status counts {counted} of {len(source_tasks(current))} tasks done")
            if result["score"] != result["max_score"]:
                problems.append(f"{k}: score {result['score']}, not full marks {result['max_score']}")
    return before + problems


if __name__ == "__main__":
    print(json.dumps(grade_prefixes(Path(sys.argv[1]), sys.argv[2])))
