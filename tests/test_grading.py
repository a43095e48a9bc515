"""Every reference stage scores full marks; every untouched notebook scores 0 on every graded test;
a student who fills the stubs in the notebook gets full marks, and partial work gets partial credit."""

from __future__ import annotations

import pytest

from conftest import stage_numbers, tito
from student import fill

pytestmark = pytest.mark.slow  # real subprocesses end to end: left out by make test-fast

STAGES = stage_numbers()


@pytest.mark.parametrize("stage", STAGES)
def test_reference_scores_full_marks(shared_course, stage):
    run = tito(shared_course, "test", stage, "--reference", "--json")
    result = run.json()
    failed = [f"{t['id']}: {t['message']}" for t in result["tests"] if not t["passed"]]
    assert failed == [] and run.code == 0
    assert result["score"] == result["max_score"] > 0


@pytest.mark.parametrize("stage", STAGES)
def test_untouched_notebook_scores_zero_on_every_test(shared_course, stage):
    run = tito(shared_course, "test", stage, "--json")
    result = run.json()
    assert run.code == 1
    passed = [t["id"] for t in result["tests"] if t["passed"] or t["points"] != 0]
    assert passed == [], f"these tests pass on untouched stubs: {passed}"
    assert result["score"] == 0
    # an untouched stub names its task instead of showing a traceback
    own = [t for t in result["tests"] if t["message"].startswith(f"Task {stage}.")]
    assert own, "no failure message names a task of this stage"
    assert all("Traceback" not in t["message"] for t in result["tests"])


def test_student_who_fills_every_stub_gets_full_marks(course):
    """`tito test` of the last stage exports every notebook; each stage's own full marks from filled notebooks
    are test_prefix.py's last prefix (the same export, engine and feedback cases), and `tito test NN` at full
    marks is test_reference_scores_full_marks, for every stage."""
    for stage in STAGES:
        name = next(p.name for p in (course / "solutions").iterdir() if p.name.startswith(stage))
        fill(course / "modules" / name / f"{name}.ipynb", course / "solutions" / name / f"{name}.py")
    run = tito(course, "test", STAGES[-1], "--json")
    result = run.json()
    assert [t["message"] for t in result["tests"] if not t["passed"]] == []
    assert run.code == 0 and result["score"] == result["max_score"]
    status = tito(course, "status")
    assert status.code == 0
    for stage in STAGES:
        line = next(line for line in status.stdout.splitlines() if f"{stage}_" in line)
        done, total = line.split("│")[3].strip().split("/")
        assert done == total


def test_partial_work_gets_the_points_of_the_tasks_it_completes(course):
    stage = STAGES[0]
    name = next(p.name for p in (course / "solutions").iterdir() if p.name.startswith(stage))
    notebook = course / "modules" / name / f"{name}.ipynb"
    reference = tito(course, "test", stage, "--reference", "--json").json()
    every_task = sorted({t["task"] for t in reference["tests"]})
    done = set(every_task[: len(every_task) // 2])
    # the tasks each check needs beyond its own are unknown here: fill half, expect a score in between
    fill(notebook, course / "solutions" / name / f"{name}.py", tasks=done)
    result = tito(course, "test", stage, "--json").json()
    assert 0 < result["score"] < result["max_score"]
    for test in result["tests"]:
        if test["task"] not in done:
            assert not test["passed"], f"{test['id']} passed though its task {test['task']} is a stub"
