"""The instructor's workflow with real nbgrader on a real course directory and a real kernel:
`tito course init`, then generate_assignment, release_assignment, fetch_assignment, submit, collect,
autograde, generate_feedback, release_feedback and export, for every module."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

from conftest import REPO, stage_numbers, tito
from student import fill_nbgrader_release

pytestmark = pytest.mark.slow  # real nbgrader, kernels and sandboxes end to end: left out by make test-fast

BIN = Path(sys.executable).parent
STAGES = [p.name for p in sorted((REPO / "solutions").iterdir()) if p.name[:2] in stage_numbers()]


def nbgrader(*args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "HOME": str(cwd)}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(BIN / "nbgrader"), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def edit(path: Path, change) -> None:
    notebook = nbformat.read(path, as_version=4)
    change(notebook)
    nbformat.write(notebook, path)


def cell_index(notebook, grade_id: str) -> int:
    return next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def solution_cell(notebook, text: str) -> int:
    return next(i for i, c in enumerate(notebook.cells)
                if c.metadata.get("nbgrader", {}).get("solution") and text in c.source)


READS_SECRETS = f'''
import glob, os

for pattern in [{str(REPO / "autograder" / "*.py")!r}, {str(REPO / "solutions" / "*" / "*.py")!r},
                "../../../gradebook.db", "../../../source/*/*.ipynb", "../../../release/*/*.ipynb"]:
    for path in glob.glob(pattern):
        try:
            if open(path, "rb").read(100):
                print("READ OK", path)
        except OSError:
            pass
'''

STUDENTS = {
    "01": {
        "alice": "reference", "bob": "untouched", "carol": "half", "dave": "reads_secrets",
        "erin": "warns_on_stderr", "frank": "deleted_cells", "gina": "duplicated_cell", "hank": "reordered",
        "ivan": "syntax_error", "jack": "infinite_loop", "kate": "memory_hog", "mallory": "forges_scores",
    },
}


def prepare(kind: str, path: Path, source: Path) -> None:
    """Turn a fetched notebook into one student's submission."""
    if kind == "untouched":
        return
    tasks = None
    if kind == "half":
        every = list(dict.fromkeys(re.findall(r"### BEGIN SOLUTION (\d\d\.\d+) ", source.read_text())))
        tasks = set(every[: len(every) // 2])
    fill_nbgrader_release(path, source, tasks)
    if kind == "reads_secrets":
        edit(path, lambda nb: nb.cells.insert(1, nbformat.v4.new_code_cell(READS_SECRETS)))
    elif kind == "warns_on_stderr":
        def warn(nb):
            index = solution_cell(nb, "def sum_kernel(")
            nb.cells[index].source += ("\nimport sys, warnings\nprint('a warning on stderr', file=sys.stderr)\n"
                                       "warnings.warn('something the student left in')\n")
        edit(path, warn)
    elif kind == "deleted_cells":
        def delete(nb):
            del nb.cells[cell_index(nb, "task-01_8")]
            del nb.cells[solution_cell(nb, "def sum_kernel(")]
        edit(path, delete)
    elif kind == "duplicated_cell":
        def duplicate(nb):
            index = solution_cell(nb, "def sum_kernel(")
            nb.cells.insert(index, nbformat.from_dict(nb.cells[index]))
            nb.cells[index]["id"] = "duplicated-by-the-student"
        edit(path, duplicate)
    elif kind == "reordered":
        def move(nb):
            nb.cells.append(nb.cells.pop(solution_cell(nb, "def sum_kernel(")))
        edit(path, move)
    elif kind == "syntax_error":
        def broken(nb):
            nb.cells[solution_cell(nb, "def sum_kernel(")].source += "\nresult = (1 +\n"
        edit(path, broken)
    elif kind == "infinite_loop":
        edit(path, lambda nb: nb.cells.insert(1, nbformat.v4.new_code_cell("while True:\n    pass\n")))
    elif kind == "forges_scores":
        def forge(nb):
            found = (re.match(r"# Graded: task (\S+) .*, ([\d.]+) points", c.source) for c in nb.cells)
            points = {m.group(1): float(m.group(2)) for m in found if m}
            nb.cells.insert(1, nbformat.v4.new_code_cell(
                f"import tito.nbgrader_judge as judge\nPOINTS = {points!r}\n"
                "judge.score = lambda stage, task: POINTS[task]\n"))
        edit(path, forge)
    elif kind == "memory_hog":
        edit(path, lambda nb: nb.cells.insert(1, nbformat.v4.new_code_cell("hog = bytearray(8 << 30)\n")))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("nbgrader")
    course = base / "course"
    run = tito(REPO, "course", "init", str(course))
    assert run.code == 0, run.stderr
    exchange = str(course / "exchange")
    students_of = {}
    for name in STAGES:
        number = name[:2]
        students = STUDENTS.get(number, {"alice": "reference", "bob": "untouched"})
        students_of[name] = students
        nbgrader("generate_assignment", name, "--force", cwd=course)
        nbgrader("release_assignment", name, "--force", cwd=course)
        for student, kind in students.items():
            home = base / "students" / student
            home.mkdir(parents=True, exist_ok=True)
            if not (home / name).exists():
                nbgrader("fetch_assignment", name, "--course", "tinytorch", f"--Exchange.root={exchange}", cwd=home)
            prepare(kind, home / name / f"{name}.ipynb", REPO / "solutions" / name / f"{name}.py")
            nbgrader("submit", name, "--course", "tinytorch", "--student", student, f"--Exchange.root={exchange}",
                     cwd=home)
        nbgrader("collect", name, cwd=course)
        # short for the stage whose students loop forever; later notebooks train real models in a cell
        timeout = 60 if "infinite_loop" in students.values() else 600
        nbgrader("autograde", name, f"--Execute.timeout={timeout}", cwd=course)
        nbgrader("generate_feedback", name, cwd=course)
        nbgrader("release_feedback", name, cwd=course)
    nbgrader("export", cwd=course)
    scores = _exported(course)
    judged = tito(REPO, "grade", str(course), "--stage", STAGES[0][:2], "--isolated", "--out", str(base / "judged"),
                  "--examples", "5")
    assert judged.code == 0, judged.stderr
    assert "task scores into" in judged.stderr
    nbgrader("export", cwd=course)
    return course, scores, students_of, _exported(course)


def _exported(course: Path) -> dict:
    scores = {}
    with open(course / "grades.csv", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            scores[(row["assignment"], row["student_id"])] = (float(row["score"]), float(row["max_score"]))
    return scores


@pytest.mark.parametrize("name", STAGES)
def test_reference_scores_full_marks_and_the_untouched_release_zero(course, name):
    _, scores, _, _ = course
    score, maximum = scores[(name, "alice")]
    assert maximum > 0 and score == maximum
    assert scores[(name, "bob")][0] == 0


def test_partial_work_gets_partial_credit(course):
    _, scores, _, _ = course
    score, maximum = scores[(STAGES[0], "carol")]
    assert 0 < score < maximum


def test_a_warning_on_stderr_costs_nothing(course):
    _, scores, _, _ = course
    assert scores[(STAGES[0], "erin")] == scores[(STAGES[0], "alice")]


def test_student_code_cannot_read_suites_solutions_or_gradebook(course):
    root, scores, _, _ = course
    autograded = nbformat.read(root / "autograded" / "dave" / STAGES[0] / f"{STAGES[0]}.ipynb", as_version=4)
    printed = "".join(output.get("text", "") for cell in autograded.cells if cell.cell_type == "code"
                      for output in cell.outputs)
    assert "READ OK" not in printed
    assert any("READS_SECRETS" in cell.source or "glob.glob(pattern)" in cell.source for cell in autograded.cells)
    assert scores[(STAGES[0], "dave")] == scores[(STAGES[0], "alice")]


@pytest.mark.parametrize("student", ["frank", "gina", "hank", "ivan"])
def test_broken_structure_is_graded_sensibly(course, student):
    """Deleted, duplicated or reordered cells and syntax errors: the missing work scores 0, the rest is
    graded, and the batch goes on."""
    _, scores, _, _ = course
    score, maximum = scores[(STAGES[0], student)]
    full = scores[(STAGES[0], "alice")][0]
    if student in ("gina", "hank"):
        assert score == full
    else:
        assert 0 < score < full


@pytest.mark.parametrize("student", ["jack", "kate"])
def test_a_hang_or_a_memory_hog_is_stopped_and_the_others_are_graded(course, student):
    _, scores, _, _ = course
    assert (STAGES[0], student) in scores
    assert scores[(STAGES[0], "alice")][0] == scores[(STAGES[0], "alice")][1]


@pytest.mark.parametrize("name", STAGES)
def test_released_notebooks_hold_no_solution_and_no_hidden_test(course, name):
    root, _, _, _ = course
    released = (root / "release" / name / f"{name}.ipynb").read_text()
    fetched = (root.parent / "students" / "bob" / name / f"{name}.ipynb").read_text()
    for line in secret_lines(name, root):
        assert json_text(line) not in released and json_text(line) not in fetched, line


@pytest.mark.parametrize("name", STAGES)
def test_feedback_holds_no_hidden_test_source(course, name):
    root, _, students, _ = course
    for student in students[name]:
        for html in (root / "feedback" / student / name).glob("*.html"):
            text = html.read_text()
            for line in hidden_lines(name, root):
                assert line not in text, (student, line)


def test_init_again_keeps_grades_and_submissions(course):
    root, _, _, _ = course
    before = {p: p.stat().st_mtime_ns for p in [root / "gradebook.db", *root.glob("submitted/*/*/*.ipynb")]}
    run = tito(REPO, "course", "init", str(root))
    assert run.code == 0 and "up to date" in run.stderr
    assert {p: p.stat().st_mtime_ns for p in before} == before


def json_text(line: str) -> str:
    return line.replace("\\", "\\\\").replace('"', '\\"')


def _split(text: str, begin: str, end: str) -> tuple[list[str], list[str]]:
    """(stripped lines inside begin/end regions, stripped lines outside them) of a cell's source."""
    inside, outside, region = [], [], False
    for line in text.splitlines():
        if begin in line:
            region = True
        elif end in line:
            region = False
        else:
            (inside if region else outside).append(line.strip())
    return inside, outside


def hidden_lines(name: str, root: Path) -> list[str]:
    source = nbformat.read(root / "source" / name / f"{name}.ipynb", as_version=4)
    lines = [line for cell in source.cells
             for line in _split(cell.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")[0] if line]
    suite = (REPO / "autograder" / f"test_{name}.py").read_text().splitlines()
    source = jupytext.read(REPO / "solutions" / name / f"{name}.py", fmt="py:percent")
    public = {line for cell in source.cells for line in _split(cell.source, "BEGIN SOLUTION", "END SOLUTION")[1]}
    return lines + [line.strip() for line in suite
                    if len(line.strip()) > 30 and not line.strip().startswith("#") and line.strip() not in public]


def secret_lines(name: str, root: Path) -> list[str]:
    """Every solution line that the source does not also show outside its solution regions (the narrative
    may quote `loss.backward()` as a hint), and every hidden line."""
    source = jupytext.read(REPO / "solutions" / name / f"{name}.py", fmt="py:percent")
    inside, outside = [], []
    for cell in source.cells:
        cell_inside, cell_outside = _split(cell.source, "BEGIN SOLUTION", "END SOLUTION")
        inside += cell_inside
        outside += cell_outside
    shown = "\n".join(outside)
    solution = [line for line in inside if len(line) > 12 and line not in shown and not line.startswith("#")]
    return solution + hidden_lines(name, root)
