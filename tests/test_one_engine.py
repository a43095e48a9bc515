"""Feedback and official grading are one engine: for buggy student packages, `tito test NN --json --seed S`
on the student's machine and `tito grade --seed S` in the sandbox give every check the same verdict and
the same message."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from conftest import REPO, copy_course, tito
from student import edit_cell, fill

pytestmark = pytest.mark.slow  # real subprocesses end to end: left out by make test-fast

STAGE = "01_tensor"
SEED = "11"

# student -> (tasks left as stubs, {kernel function: text put before its solution})
BUGS = {
    "off_by_one_sum_and_raising_matmul": (set(), {
        "sum_kernel": "    return np.sum(a, axis=axis, keepdims=keepdims) + 1\n",
        "matmul_kernel": "    raise ValueError('shapes do not line up')\n"}),
    "stub_left_and_exit_in_max": ({"01.9"}, {"max_kernel": "    import os; os._exit(3)\n"}),
    "float64_add": (set(), {"add_kernel": "    return binary_elementwise('add', np.add, a, b).astype(np.float64)\n"}),
    "honest": (set(), {}),
}


def _sabotage(path: Path, function: str, line: str) -> None:
    cells = nbformat.read(path, as_version=4).cells
    index = next(i for i, c in enumerate(cells) if c.cell_type == "code" and f"def {function}(" in c.source)
    edit_cell(path, index, lambda text: text.replace('"""\n', '"""\n' + line, 1))


def _notebook(folder: Path, student: str) -> Path:
    stubs, sabotage = BUGS[student]
    path = folder / student / f"{STAGE}.ipynb"
    path.parent.mkdir(parents=True)
    shutil.copy2(REPO / "modules" / STAGE / f"{STAGE}.ipynb", path)
    source = REPO / "solutions" / STAGE / f"{STAGE}.py"
    every = {line.split()[3] for line in source.read_text().splitlines() if "### BEGIN SOLUTION" in line}
    fill(path, source, tasks=every - stubs)
    for function, line in sabotage.items():
        _sabotage(path, function, line)
    return path


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    base = tmp_path_factory.mktemp("one-engine")
    folder = base / "class"
    for student in BUGS:
        _notebook(folder, student)
    run = tito(REPO, "grade", str(folder), "--out", str(base / "out"), "--stage", "01", "--seed", SEED)
    assert run.code == 0, run.stderr
    official = {g["student"]: {t["id"]: (t["passed"], t["message"]) for t in g["tests"]}
                for g in json.loads((base / "out" / "results.json").read_text())["grades"]}
    feedback = {}
    for student in BUGS:
        course = copy_course(base / f"course-{student}")
        shutil.copy2(folder / student / f"{STAGE}.ipynb", course / "modules" / STAGE / f"{STAGE}.ipynb")
        result = tito(course, "test", "01", "--json", "--seed", SEED).json()
        feedback[student] = {t["id"]: (t["passed"], t["message"]) for t in result["tests"]}
    return feedback, official


@pytest.mark.parametrize("student", sorted(BUGS))
def test_feedback_and_official_grading_agree_on_every_check(verdicts, student):
    feedback, official = verdicts
    assert feedback[student] == official[student]


def test_the_bugs_were_caught_with_sentences_about_the_students_code(verdicts):
    feedback, _ = verdicts
    failed = {student: {name: message for name, (passed, message) in checks.items() if not passed}
              for student, checks in feedback.items()}
    assert failed["honest"] == {}
    assert any("your code raised ValueError: shapes do not line up (at core/tensor.py line" in m
               for m in failed["off_by_one_sum_and_raising_matmul"].values())
    assert any("exit status 3" in m for m in failed["stub_left_and_exit_in_max"].values())
    assert any(m.startswith("Task 01.9:") for m in failed["stub_left_and_exit_in_max"].values())
    assert any("dtype" in m for m in failed["float64_add"].values())
