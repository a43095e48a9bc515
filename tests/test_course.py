"""The instructor's workflow with real nbgrader on a real course directory and a real sandboxed kernel:
`tito course init`, then generate_assignment, release_assignment, fetch_assignment, submit, collect,
autograde, generate_feedback, release_feedback and export, for every module, with a class of honest,
broken and hostile students; then `tito grade` on the course."""

from __future__ import annotations

import csv
import html
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import jupytext
import nbformat
import psutil
import pytest
from nbgrader.api import Gradebook
from test_course_init import NOBODY, as_user

from conftest import REPO, stage_numbers, tito
from student import fill_nbgrader_release

pytestmark = pytest.mark.slow  # real nbgrader, kernels and sandboxes end to end: left out by make test-fast

BIN = Path(sys.executable).parent
STAGES = [p.name for p in sorted((REPO / "solutions").iterdir()) if p.name[:2] in stage_numbers()]


# nbgrader in this interpreter, then its own peak resident memory (KiB) on stderr: the nbgrader process alone,
# not the kernels and boxes it starts
MEASURED = """import resource, sys
from nbgrader.apps.nbgraderapp import main
try:
    main()
finally:
    print("nbgrader peak RSS KiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def nbgrader(*args: str, cwd: Path, timeout: float = 900, config: Path | None = None, check: bool = True,
             path: str | None = None, measured: bool = False) -> subprocess.CompletedProcess:
    """A real nbgrader command; `config` is a student's ~/.jupyter/nbgrader_config.py; `path` replaces PATH;
    `measured` ends stderr with the line of MEASURED."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}" if path is None else path, "HOME": str(cwd)}
    env.pop("PYTHONPATH", None)
    if config is not None:
        (cwd / ".jupyter").mkdir(exist_ok=True)
        shutil.copy2(config, cwd / ".jupyter" / "nbgrader_config.py")
    program = [sys.executable, "-c", MEASURED] if measured else [str(BIN / "nbgrader")]
    done = subprocess.run([*program, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, \
            f"nbgrader {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
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


READS_SECRETS = """
import glob, os

for pattern in [{repo!r} + "/autograder/*.py", {repo!r} + "/solutions/*/*.py", {course!r} + "/gradebook.db",
                {course!r} + "/source/*/*.ipynb", {course!r} + "/release/*/*.ipynb", {course!r} + "/submitted/*/*/*",
                {course!r} + "/autograded/*/*/*", {course!r} + "/.tito-course-key", "../../../gradebook.db",
                "/root/.bash_history", "/etc/shadow"]:
    for path in glob.glob(pattern):
        try:
            if open(path, "rb").read(100):
                print("READ OK", path)
        except OSError:
            pass
"""

# a student with the reference solutions who also tries to reach out of the kernel's sandbox
ESCAPES = """
import os, signal, socket, subprocess, sys

for path in [{course!r} + "/nbgrader_config.py", {course!r} + "/.jupyter/nbgrader_config.py",
             os.path.expanduser("~/.jupyter/nbgrader_config.py"), "/root/.jupyter/nbgrader_config.py"]:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as stream:
            stream.write("c.Autograde.autograde_preprocessors = []  # planted\\n")
        print("WROTE", path)
    except OSError:
        pass
for address in [("pypi.org", 443), ("127.0.0.1", 22), ("10.0.0.1", 80)]:
    try:
        socket.create_connection(address, timeout=2).close()
        print("NET OK", address)
    except OSError:
        pass
subprocess.Popen([sys.executable, "-c", "import time\\nwhile True:\\n    time.sleep(0.2)  # {marker}"],
                 start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execv("/bin/sh", ["sh", "-c", "while true; do sleep 0.2; done # {marker}"])
"""

FORGES = """
import os

os.environ.pop("NBGRADER_EXECUTION", None)
get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)
print(12.0)
"""

LEAKS = """
import importlib, inspect, os, pkgutil, sys

import tinytorch

for module in pkgutil.walk_packages(tinytorch.__path__, "tinytorch."):
    try:
        print(inspect.getsource(importlib.import_module(module.name)))
    except Exception as error:
        print("no source of", module.name, error)
for entry in sys.path:
    for folder, _, files in os.walk(entry):
        for name in files:
            if name.endswith(".py") and "tinytorch" in folder:
                print(open(os.path.join(folder, name)).read())
"""

MARKER = "tito-escaped-background-process"

STUDENTS = {
    "01": {
        "alice": "reference", "bob": "untouched", "carol": "half", "dave": "reads_secrets",
        "erin": "warns_on_stderr", "frank": "deleted_cells", "gina": "duplicated_cell", "hank": "reordered",
        "ivan": "syntax_error", "jack": "infinite_loop", "kate": "memory_hog", "mallory": "forges_scores",
        "nina": "escapes", "oscar": "kills_its_kernel",
    },
    "05": {"alice": "reference", "bob": "untouched", "leo": "prints_every_source"},
}


def prepare(kind: str, path: Path, source: Path, course: Path) -> None:
    """Turn a released notebook into one student's submission."""
    if kind in ("untouched", "forges_scores", "prints_every_source"):
        tasks: set[str] | None = set()
    elif kind == "half":
        every = list(dict.fromkeys(re.findall(r"### BEGIN SOLUTION (\d\d\.\d+) ", source.read_text())))
        tasks = set(every[: len(every) // 2])
    else:
        tasks = None
    fill_nbgrader_release(path, source, tasks)
    first = {"reads_secrets": READS_SECRETS.format(repo=str(REPO), course=str(course)),
             "escapes": ESCAPES.format(course=str(course), marker=MARKER), "forges_scores": FORGES,
             "prints_every_source": LEAKS, "infinite_loop": "while True:\n    pass\n",
             "memory_hog": "hog = bytearray(8 << 30)\nhog[::4096] = b'x' * len(hog[::4096])\n",
             # every process it may signal: its own kernel; outside the box, that would be nbgrader too
             "kills_its_kernel": "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n"
                                 "    pass\nos.kill(os.getpid(), signal.SIGKILL)\n"}.get(kind)
    if first is not None:  # early, but after the cell that imports the student's earlier modules
        def insert(nb):
            mine = [i for i, cell in enumerate(nb.cells) if "use_my_modules()" in cell.source]
            nb.cells.insert(mine[0] + 1 if mine else 2, nbformat.v4.new_code_cell(first))
        edit(path, insert)
    if kind == "prints_every_source":  # and raises the reference of 01 as mse_loss's error, for the judge to echo
        def exfiltrate(nb):
            cell = nb.cells[solution_cell(nb, "def mse_loss(")]
            stub = next(line for line in cell.source.splitlines() if "raise NotImplementedError" in line)
            indent = stub[: len(stub) - len(stub.lstrip())]
            cell.source = cell.source.replace(stub, f"{indent}import inspect, tinytorch.core.tensor as reference\n"
                                              f"{indent}raise ValueError(inspect.getsource(reference)[3000:9000])")
        edit(path, exfiltrate)
    if kind == "warns_on_stderr":
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


def submit(course: Path, student: str, name: str, notebook: Path) -> None:
    """What `nbgrader collect` leaves for a student (real fetch and submit are run for alice and bob)."""
    folder = course / "submitted" / student / name
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(notebook, folder / notebook.name)
    (folder / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC\n")
    (folder / "submission_secret.txt").write_text(secrets.token_hex(16))  # release_feedback needs it


def _marked_processes() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARKER in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(entry.name)
        except OSError:
            continue
    return found


EXCHANGED = ("01", "05")  # the stages whose alice and bob go through the real exchange: release, fetch, submit, collect


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """One course, every stage; nbgrader commands that take an assignment pattern run once for all."""
    base = tmp_path_factory.mktemp("nbgrader")
    course = base / "course"
    run = tito(REPO, "course", "init", str(course))
    assert run.code == 0, run.stderr
    config = (course / "nbgrader_config.py").read_text()
    nbgrader("generate_assignment", "*", "--force", cwd=course)
    students_of = {}
    for name in STAGES:
        students = STUDENTS.get(name[:2], {"alice": "reference", "bob": "untouched"})
        students_of[name] = students
        exchanged = name[:2] in EXCHANGED
        if exchanged:
            nbgrader("release_assignment", name, "--force", cwd=course)
        for student, kind in students.items():
            home = base / "students" / student
            home.mkdir(parents=True, exist_ok=True)
            source = REPO / "solutions" / name / f"{name}.py"
            if exchanged and student in ("alice", "bob"):  # the real student side
                nbgrader("fetch_assignment", name, cwd=home, config=course / "student_nbgrader_config.py")
                prepare(kind, home / name / f"{name}.ipynb", source, course)
                nbgrader("submit", name, "--student", student,  # every simulated student is this one user
                         cwd=home, config=course / "student_nbgrader_config.py")
            else:
                (home / name).mkdir(exist_ok=True)
                shutil.copy2(course / "release" / name / f"{name}.ipynb", home / name / f"{name}.ipynb")
                prepare(kind, home / name / f"{name}.ipynb", source, course)
                if student not in ("alice", "bob"):  # earlier modules this student never did: untouched
                    for earlier in STAGES[: STAGES.index(name)]:
                        submit(course, student, earlier, course / "release" / earlier / f"{earlier}.ipynb")
                submit(course, student, name, home / name / f"{name}.ipynb")
        if exchanged:
            nbgrader("collect", name, cwd=course)
    # every stage at once; the cells are short, and jack's endless loop is stopped after the timeout
    nbgrader("autograde", "*", "--Execute.timeout=30", cwd=course)
    processes_left = _marked_processes()
    nbgrader("generate_feedback", "*", cwd=course)
    for name in STAGES:
        if name[:2] in EXCHANGED:
            nbgrader("release_feedback", name, cwd=course)
    nbgrader("export", cwd=course)
    scores = _exported(course)
    # the wrong kernel (the instructor's own, unsandboxed) changes no score: the judge decides them. It runs
    # the notebook over TCP: the ipc channels' relative paths reach only a kernel started in nbgrader's folder
    # (the sandboxed kernel links them there), so with ipc this kernel never answered and ran nothing
    nbgrader("autograde", STAGES[0], "--force", "--student", "mallory", "--Execute.kernel_name=python3",
             "--KernelManager.transport=tcp", cwd=course)
    nbgrader("export", cwd=course)
    wrong_kernel = _exported(course)
    # an instructor's score set by hand stays; tito grade only compares
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.find_grade("task-01_2", STAGES[0], STAGES[0], "carol").manual_score = 1.0
        gradebook.db.commit()
    judged = tito(REPO, "grade", str(course), "--out", str(base / "judged"))
    assert judged.code == 0, judged.stderr
    nbgrader("export", cwd=course)
    return SimpleNamespace(root=course, scores=scores, students=students_of, regraded=_exported(course),
                           wrong_kernel=wrong_kernel, config=config, processes_left=processes_left,
                           judged=judged.stderr)


def _exported(course: Path) -> dict:
    scores = {}
    with open(course / "grades.csv", encoding="utf-8") as stream:
        for row in csv.DictReader(stream):
            scores[(row["assignment"], row["student_id"])] = (float(row["score"]), float(row["max_score"]))
    return scores


def outputs(course, student: str, name: str) -> str:
    notebook = nbformat.read(course.root / "autograded" / student / name / f"{name}.ipynb", as_version=4)
    return "\n".join(str(output.get("text", "")) + str(output.get("evalue", "")) + str(output.get("data", ""))
                     for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs)


@pytest.mark.parametrize("name", STAGES)
def test_reference_scores_full_marks_and_the_untouched_release_zero(course, name):
    score, maximum = course.scores[(name, "alice")]
    assert maximum > 0 and score == maximum
    assert course.scores[(name, "bob")][0] == 0


@pytest.mark.parametrize("name", STAGES)
def test_each_notebook_runs_on_the_students_own_earlier_modules(course, name):
    """alice submitted every module: in the sandboxed kernel her notebook imports her own 01..NN-1 and every
    public test in it passes; no cell ends in an error."""
    notebook = nbformat.read(course.root / "autograded" / "alice" / name / f"{name}.ipynb", as_version=4)
    errors = [(index, output.get("ename"), output.get("evalue", "")[:200]) for index, cell in enumerate(notebook.cells)
              if cell.cell_type == "code" for output in cell.outputs if output.output_type == "error"]
    assert not errors
    if name != STAGES[0]:
        mine = "\n".join(output.get("text", "") for output in notebook.cells[1].outputs)
        earlier = STAGES[: STAGES.index(name)]
        assert f"tinytorch from your notebooks: {', '.join(f'{e}/{e}.ipynb' for e in earlier)}" in mine


def test_a_student_runs_a_later_notebook_on_their_own_earlier_modules():
    """The student side: in the folder nbgrader fetched 05 into, the notebook's first cell makes `tinytorch`
    the student's own 01..04 (here with one of them changed, to see it is theirs)."""
    home = Path(tempfile.mkdtemp(prefix="student-home-"))
    try:
        for name in STAGES[:5]:
            (home / name).mkdir()
            notebook = nbformat.v4.new_notebook(cells=[
                nbformat.v4.new_code_cell(cell.source) for cell in
                jupytext.read(REPO / "solutions" / name / f"{name}.py", fmt="py:percent").cells
                if cell.cell_type == "code"])
            nbformat.write(notebook, home / name / f"{name}.ipynb")
        edit(home / STAGES[0] / f"{STAGES[0]}.ipynb", lambda nb: nb.cells.append(
            nbformat.v4.new_code_cell("#| export\nMARKED_BY_THE_STUDENT = 42\n")))
        code = ("from tito.fetched import use_my_modules\nuse_my_modules()\nimport tinytorch as tt\n"
                "from tinytorch.core import tensor\nprint(tensor.MARKED_BY_THE_STUDENT, tensor.__file__)\n"
                "print(tt.nn.Linear(2, 3)(tt.ones(4, 2)).shape)\n")
        done = subprocess.run([sys.executable, "-c", code], cwd=home / STAGES[4], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert "tinytorch from your notebooks: 01_tensor/01_tensor.ipynb" in done.stdout
        assert "42 " in done.stdout and str(REPO) not in done.stdout.splitlines()[-2]
        assert "(4, 3)" in done.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_partial_work_gets_partial_credit(course):
    score, maximum = course.scores[(STAGES[0], "carol")]
    assert 0 < score < maximum


def test_a_warning_on_stderr_costs_nothing(course):
    assert course.scores[(STAGES[0], "erin")] == course.scores[(STAGES[0], "alice")]


def test_student_code_cannot_read_suites_solutions_gradebook_or_other_students(course):
    printed = outputs(course, "dave", STAGES[0])
    assert "READ OK" not in printed
    notebook = nbformat.read(course.root / "autograded" / "dave" / STAGES[0] / f"{STAGES[0]}.ipynb", as_version=4)
    assert any("glob.glob(pattern)" in cell.source for cell in notebook.cells)
    assert course.scores[(STAGES[0], "dave")] == course.scores[(STAGES[0], "alice")]


def test_a_notebook_cannot_reach_out_of_its_sandbox(course):
    """nina writes the instructor's nbgrader configuration, opens sockets and leaves processes behind; none of
    it works, her grade is honest and the next student's (oscar, who signals every process he may) too."""
    assert "NET OK" not in outputs(course, "nina", STAGES[0])  # (what she wrote went to the box's own /tmp)
    assert (course.root / "nbgrader_config.py").read_text() == course.config
    assert not (course.root / ".jupyter" / "nbgrader_config.py").exists()
    assert not list(Path.home().glob(".jupyter/nbgrader_config.py")) or "planted" not in \
        (Path.home() / ".jupyter" / "nbgrader_config.py").read_text()
    assert course.processes_left == [], "a process started by a cell outlived autograde"
    assert course.scores[(STAGES[0], "nina")] == course.scores[(STAGES[0], "alice")]
    assert course.scores[(STAGES[0], "oscar")] == course.scores[(STAGES[0], "alice")]


def test_a_kernel_that_dies_ends_the_run_not_the_grade(course):
    assert course.scores[(STAGES[0], "oscar")] == course.scores[(STAGES[0], "alice")]
    assert "the kernel stopped here" in outputs(course, "oscar", STAGES[0])


def test_forged_scores_stay_zero_under_any_kernel(course):
    """mallory's cells remove the graded cells' environment variable, swallow their errors and print a
    score; the judge writes the graded cells' results, under the sandboxed kernel and the wrong one."""
    assert course.scores[(STAGES[0], "mallory")][0] == 0
    assert course.wrong_kernel[(STAGES[0], "mallory")][0] == 0
    # the last autograde of her notebook was the wrong kernel's, and her cells did run there
    notebook = nbformat.read(course.root / "autograded" / "mallory" / STAGES[0] / f"{STAGES[0]}.ipynb", as_version=4)
    forged = next(cell for cell in notebook.cells if 'os.environ.pop("NBGRADER_EXECUTION", None)' in cell.source)
    assert "12.0" in "".join(output.get("text", "") for output in forged.outputs)


@pytest.mark.parametrize("student", ["frank", "gina", "hank", "ivan"])
def test_broken_structure_is_graded_sensibly(course, student):
    """Deleted, duplicated or reordered cells and syntax errors: the missing work scores 0, the rest is
    graded, and the batch goes on."""
    score, _ = course.scores[(STAGES[0], student)]
    full = course.scores[(STAGES[0], "alice")][0]
    if student in ("gina", "hank"):
        assert score == full
    else:
        assert 0 < score < full


@pytest.mark.parametrize("student", ["jack", "kate"])
def test_a_hang_or_a_memory_hog_is_stopped_and_graded_honestly(course, student):
    """Their solutions are the reference: stopping the cell costs them nothing."""
    assert course.scores[(STAGES[0], student)] == course.scores[(STAGES[0], "alice")]


def test_tito_grade_on_the_course_agrees_with_autograde_and_keeps_manual_scores(course):
    """`tito grade COURSE` grades every released assignment as the judge did during autograde (same key,
    same cases, each module on its own): it agrees for every submission but the one whose score the
    instructor set by hand, which it reports and keeps."""
    for name in STAGES:
        for student in course.students[name]:
            expected = course.scores[(name, student)]
            if (name, student) == (STAGES[0], "carol"):
                assert course.regraded[(name, student)][0] != expected[0]  # the manual score counts
            else:
                assert course.regraded[(name, student)] == expected, (name, student)
    reported = [line.strip() for line in course.judged.splitlines() if line.startswith("  ")]
    assert any(line.startswith("carol, 01_tensor") and "set by hand (kept)" in line for line in reported)
    others = [line for line in reported if not line.startswith("carol, 01_tensor")]
    # leo submitted 01-04 after they were autograded: only those are new to nbgrader
    assert all(line.startswith("leo, 0") and "not autograded by nbgrader yet" in line for line in others), others


@pytest.mark.parametrize("name", STAGES)
def test_released_notebooks_hold_no_solution_and_no_hidden_test(course, name):
    released = (course.root / "release" / name / f"{name}.ipynb").read_text()
    fetched = (course.root.parent / "students" / "bob" / name / f"{name}.ipynb").read_text()
    for line in secret_lines(name):
        assert json_text(line) not in released and json_text(line) not in fetched, line


@pytest.mark.parametrize("name", STAGES)
def test_feedback_holds_no_hidden_test_source(course, name):
    for student in course.students[name]:
        for page in (course.root / "feedback" / student / name).glob("*.html"):
            text = page.read_text()
            for line in hidden_lines(name):
                assert line not in text, (student, line)


def test_no_reference_code_reaches_a_student_who_prints_every_source(course):
    """leo (05) prints the source of every tinytorch module his kernel can import and every file on its
    path: only his own stubs are there, so no line of the reference of 01..05 reaches autograded/,
    feedback/ or the exchange."""
    name = next(n for n in STAGES if n.startswith("05"))
    printed = outputs(course, "leo", name)
    assert "class Function" in printed  # his own (stubbed) 02 was printed
    places = [*(course.root / "autograded" / "leo").rglob("*.ipynb"), *(course.root / "feedback" / "leo").rglob("*"),
              *(course.root / "exchange").rglob("*leo*/**/*")]
    seen = set().union(*(_lines_of(path) for path in places if path.is_file()))
    assert seen
    for earlier in STAGES[: STAGES.index(name) + 1]:
        leaked = [line for line in secret_lines(earlier) if line in seen]
        assert not leaked, (earlier, leaked[:5])


def _lines_of(path: Path) -> set[str]:
    """The stripped lines a student reads in a notebook (sources and outputs) or an HTML feedback file."""
    if path.suffix == ".ipynb":
        notebook = nbformat.read(path, as_version=4)
        texts = [cell.source for cell in notebook.cells]
        texts += [str(output.get(key, "")) for cell in notebook.cells for output in cell.get("outputs", [])
                  for key in ("text", "evalue", "traceback")]
        texts += [str(output.get("data", {}).get("text/plain", "")) for cell in notebook.cells
                  for output in cell.get("outputs", [])]
    else:
        texts = [html.unescape(re.sub(r"<[^>]*>", "", path.read_text(errors="replace")))]
    return {line.strip() for text in texts for line in text.splitlines()}


def test_no_checksum_warning_for_an_honest_submission(course):
    done = nbgrader("autograde", STAGES[0], "--force", "--student", "alice", cwd=course.root)
    assert "has changed" not in done.stdout + done.stderr


def test_init_again_keeps_grades_and_submissions(course):
    root = course.root
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


def hidden_lines(name: str) -> list[str]:
    suite = (REPO / "autograder" / f"test_{name}.py").read_text().splitlines()
    source = jupytext.read(REPO / "solutions" / name / f"{name}.py", fmt="py:percent")
    public = {line for cell in source.cells for line in _split(cell.source, "BEGIN SOLUTION", "END SOLUTION")[1]}
    return [line.strip() for line in suite
                    if len(line.strip()) > 30 and not line.strip().startswith("#") and line.strip() not in public]


def secret_lines(name: str) -> list[str]:
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
    return solution + hidden_lines(name)


# ---------------------------------------------------------------------------------------------------
# An autograde that cannot grade, and a notebook that floods nbgrader: a course of its own with 01 only,
# so these need not wait for the class above.

FLOODS = ("from IPython.display import display\n\nwhile True:\n    print('x' * 10**6)\n"
          "    display({'text/plain': 'y' * 10**6}, raw=True)\n")
NOTEBOOK_SECONDS = 15  # the test's notebook deadline (the course's own is 900)


@pytest.fixture(scope="module")
def small_course(tmp_path_factory):
    """01 generated; alice's reference, flo's reference after a cell that prints without end, quinn's
    reference (for the grader without bubblewrap) submitted."""
    from tito.commands.course import write_course

    course = tmp_path_factory.mktemp("small") / "course"
    write_course(REPO, course)
    name = STAGES[0]
    nbgrader("generate_assignment", name, cwd=course)
    for student in ("alice", "flo", "quinn"):
        submit(course, student, name, course / "release" / name / f"{name}.ipynb")
        fill_nbgrader_release(course / "submitted" / student / name / f"{name}.ipynb",
                              REPO / "solutions" / name / f"{name}.py")
    edit(course / "submitted" / "flo" / name / f"{name}.ipynb",
         lambda nb: nb.cells.insert(2, nbformat.v4.new_code_cell(FLOODS)))
    return course


def auto_scores(course: Path, student: str) -> list:
    """The autograded score of each graded cell of the student's 01 in the gradebook (None: not graded)."""
    from nbgrader.api import MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        try:
            notebook = gradebook.find_submission_notebook(STAGES[0], STAGES[0], student)
        except MissingEntry:
            return []
        return [grade.auto_score for grade in notebook.grades]


def peak_rss(done: subprocess.CompletedProcess) -> int:
    """Bytes: the nbgrader process's own peak resident memory, from MEASURED's line."""
    return int(re.findall(r"nbgrader peak RSS KiB (\d+)", done.stderr)[-1]) * 1024


def test_autograde_without_bubblewrap_fails_and_writes_no_score(small_course):
    """A grader that cannot grade says so with its exit status and leaves the gradebook as it was, rather than
    scoring complete work 0."""
    done = nbgrader("autograde", STAGES[0], "--student", "quinn", cwd=small_course, check=False, path=str(BIN))
    assert done.returncode != 0
    assert "bubblewrap is missing" in done.stdout + done.stderr
    scores = auto_scores(small_course, "quinn")
    assert all(score is None for score in scores), scores
    assert not (small_course / "autograded" / "quinn" / STAGES[0] / f"{STAGES[0]}.ipynb").exists()


def _watch_boxes(nbgrader_pid: list[int], seen: dict, stop: threading.Event) -> None:
    """While autograde runs: every kernel box of that nbgrader, once its kernel listens, with its modes and
    what another account can read there."""
    while not stop.wait(0.05):
        for box in Path(tempfile.gettempdir()).glob("tito-kernel-*"):
            launcher = box.name.split("-")[2]
            try:
                if box in seen or not nbgrader_pid or nbgrader_pid[0] not in \
                        [parent.pid for parent in psutil.Process(int(launcher)).parents()]:
                    continue
                if not list((box / "kernel").glob("ipc-*")):
                    continue  # the kernel is not listening yet
                entries = [box, *(path for path in box.rglob("*") if not path.is_socket())]  # (the kernel's own)
                readable = [path for path in entries if path.is_file()
                            and as_user(NOBODY, "cat", str(path)).returncode == 0]
                seen[box] = {"modes": {path: stat.S_IMODE(path.lstat().st_mode) for path in entries},
                             "read by another account": readable}
            except (OSError, psutil.Error, ValueError):
                continue


def test_a_notebook_that_prints_without_end_keeps_nbgrader_small_and_on_time(small_course):
    """Invariant 3 for nbgrader's own process: flo's first cell prints and displays a megabyte at a time,
    without end. nbgrader's peak memory stays within 256 MB of an honest notebook's, the execution stops at
    the notebook's deadline and the judge grades flo anyway. Meanwhile the kernel box of alice's autograde is
    unreadable to other accounts."""
    stop, seen, pid = threading.Event(), {}, []
    watcher = threading.Thread(target=_watch_boxes, args=(pid, seen, stop), daemon=True)
    watcher.start()
    started = time.monotonic()
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "HOME": str(small_course)}
    env.pop("PYTHONPATH", None)
    process = subprocess.Popen([sys.executable, "-c", MEASURED, "autograde", STAGES[0], "--student", "alice"],
                               cwd=small_course, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid.append(process.pid)
    out, err = process.communicate(timeout=600)
    honest_seconds = time.monotonic() - started
    stop.set()
    watcher.join()
    assert process.returncode == 0, err[-3000:]
    honest = peak_rss(subprocess.CompletedProcess([], 0, out, err))
    started = time.monotonic()
    flood = nbgrader("autograde", STAGES[0], "--student", "flo", f"--ExecuteForFeedback.notebook_timeout="
                     f"{NOTEBOOK_SECONDS}", "--Execute.timeout=300", cwd=small_course, measured=True)
    flood_seconds = time.monotonic() - started
    print(f"nbgrader peak RSS: honest {honest >> 20} MiB in {honest_seconds:.1f} s, "
          f"flooding {peak_rss(flood) >> 20} MiB in {flood_seconds:.1f} s")
    assert peak_rss(flood) <= honest + (256 << 20), (honest >> 20, peak_rss(flood) >> 20)
    # the honest run executes every cell in a few seconds; the flood stops at its deadline, then a few
    # seconds of interrupt and shutdown
    assert flood_seconds <= honest_seconds + NOTEBOOK_SECONDS + 30
    notebook = nbformat.read(small_course / "autograded" / "flo" / STAGES[0] / f"{STAGES[0]}.ipynb", as_version=4)
    printed = "\n".join(str(output.get("text", "")) + str(output.get("evalue", ""))
                        for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs)
    assert "the cells below did not run" in printed
    assert auto_scores(small_course, "flo") == auto_scores(small_course, "alice")
    assert all(score is not None for score in auto_scores(small_course, "alice"))
    # alice's box, while her kernel ran
    assert seen, "no kernel box of this autograde was seen"
    for box, found in seen.items():
        assert not found["read by another account"], found["read by another account"]
        assert all(mode & 0o077 == 0 for path, mode in found["modes"].items() if path != box), found["modes"]
        assert found["modes"][box] & 0o007 == 0


# ExecuteForFeedback alone, on the instructor's own kernel (the sockets' caps are nbgrader's side), in a fresh
# interpreter that prints its own peak resident memory
EXECUTES = """import resource, sys
import nbformat
from tito.nbgrader_judge import ExecuteForFeedback

cells = [nbformat.v4.new_code_cell(source) for source in sys.argv[1:]]
notebook = nbformat.v4.new_notebook(cells=cells)
ExecuteForFeedback(kernel_name="python3", timeout=120).preprocess(notebook, {"metadata": {"path": "/tmp"}})
print(nbformat.writes(notebook))
print("nbgrader peak RSS KiB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def execute_for_feedback(*cells: str) -> tuple[int, object]:
    done = subprocess.run([sys.executable, "-c", EXECUTES, *cells], capture_output=True, text=True, timeout=300,
                          cwd="/tmp")
    assert done.returncode == 0, done.stderr[-3000:]
    return peak_rss(done), nbformat.reads(done.stdout, as_version=4)


def test_one_huge_message_never_reaches_nbgrader_and_ends_the_execution():
    """A 300 MB print is one message: ZMQ refuses it before nbgrader's process holds it (it would take about
    a gigabyte there), and the execution ends at once rather than at a timeout."""
    honest, _ = execute_for_feedback("print('hello')")
    started = time.monotonic()
    huge, notebook = execute_for_feedback("print('hello')", "print('h' * 300_000_000)", "print('after')")
    assert time.monotonic() - started < 60
    assert huge <= honest + (256 << 20), (honest >> 20, huge >> 20)
    assert "larger than 1 MiB" in notebook.cells[1].outputs[-1].evalue
    assert notebook.cells[2].outputs == []


def test_frames_just_under_the_cap_that_parse_into_millions_of_objects_keep_nbgrader_small():
    """Each frame is parsed by jupyter_client before any output cap counts it: JSON of empty lists costs
    some 20 times its size as objects, so the frame cap is what bounds it."""
    honest, _ = execute_for_feedback("print('hello')")
    flood = ("from IPython.display import display\n"
             "for _ in range(40):\n"
             "    display({'application/json': {'x': [[]] * 1_300_000}}, raw=True)\n")
    peak, _ = execute_for_feedback("print('hello')", flood, "print('after')")
    assert peak <= honest + (256 << 20), (honest >> 20, peak >> 20)
