"""A student of the nbgrader course reads the shipped datasets: `tito course init` keeps a copy in the course's
datasets/ (readable by every account, written by the instructor alone), the student's nbgrader configuration
names it, and a notebook's first cell (use_my_modules) points 08's loaders at it. A real account fetches the
released 01..08, 10 and 13 and runs, in each of 08, 10 and 13, the first cell and then the data-loading lines
of the learner-only cells, with tito installed apart from the checkout (as `pip install` gives it) and no
checkout in or above its folders."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_course import nbgrader
from test_exchange import SITE, Student, scratch_for_accounts, student_python

from tito import datasets
from tito.nbgrader_judge import LEARNER_ONLY

from conftest import REPO, tito

pytestmark = pytest.mark.slow  # a real account, real nbgrader, use_my_modules on the fetched notebooks

FETCHED = ["01_tensor", "02_autograd", "03_activations", "04_layers", "05_losses", "06_optimizers", "07_training",
           "08_dataloader", "10_tokenization", "13_transformer"]
READERS = ["08_dataloader", "10_tokenization", "13_transformer"]  # the modules whose data cells are run
# What a student's kernel runs in the folder of a fetched notebook: the notebook's first cell, in 08 its exported
# cells (08 defines the loaders itself), then every line of its learner-only cells that loads a dataset. tito comes
# from a copy as pip installs it (argv[1]), the environment's other packages from its site-packages (argv[2],
# without its .pth files: no editable install, so no way back to the checkout).
LOAD = """import json, sys
sys.path[:0] = [sys.argv[1]]
sys.path.append(sys.argv[2])
notebook = json.load(open(sys.argv[3]))
code = ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]
space = {}
exec(code[0], space)
if notebook["metadata"]["tinytorch"]["stage"] == "08_dataloader":
    for source in code:
        if source.startswith("#| export"):
            exec(source, space)
exec("import tinytorch as tt", space)
report = {"tito": __import__("tito").__file__}
try:
    for cell in notebook["cells"]:
        if "learner-only" in cell["metadata"].get("tags", []):
            for line in "".join(cell["source"]).splitlines():
                if "MNIST(" in line or "datasets." in line:
                    exec(line.strip(), space)
                    name = line.split("=")[0].strip()
                    value = space[name]
                    report[name] = len(value) if isinstance(value, str) else [len(value), list(value.data.shape)]
    loader = space.get("_data_file") or space["tt"].datasets.MNIST.__init__.__globals__["_data_file"]
    report["from"] = str(loader("mnist_10k_2k.npz").parent)
except Exception as error:
    report["raised"] = type(error).__name__ + ": " + str(error)
print(json.dumps(report))
"""


def wheel_copy(destination: Path) -> Path:
    """tito as `pip install /path/to/checkout` puts it in a student's environment: the packages pyproject names
    (tito, tito.commands, tito.shipped), without the checkout's datasets/ beside them."""
    for package in ("tito", "tito/commands", "tito/shipped"):
        (destination / package).mkdir(parents=True)
        for source in (REPO / package).glob("*.py"):
            shutil.copy2(source, destination / package / source.name)
    for folder in (destination, *destination.rglob("*")):
        folder.chmod(0o755 if folder.is_dir() else 0o644)
    return destination


def as_student(student: Student, cwd: Path, *command: str,
               config_dir: Path | None = None) -> subprocess.CompletedProcess:
    env = {"HOME": str(student.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    if config_dir is not None:
        env["JUPYTER_CONFIG_DIR"] = str(config_dir)
    return subprocess.run(["setpriv", f"--reuid={student.name}", f"--regid={student.name}", "--init-groups", *command],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def student_course(request):
    """A course made by `tito course init` with FETCHED released; one real account sets up as the README says and
    fetches them all."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the student is a real account made with useradd")
    python = student_python()
    name = f"td{secrets.token_hex(3)}"
    base = scratch_for_accounts(request, "tito-datasets-", [name])
    course = base / "course"
    init = tito(REPO, "course", "init", str(course))
    assert init.code == 0, init.stderr
    for assignment in FETCHED:
        nbgrader("generate_assignment", assignment, "--force", cwd=course)
        nbgrader("release_assignment", assignment, "--force", cwd=course)
    site = wheel_copy(base / "site")
    home = base / "home" / name
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--user-group", "--shell",
                    "/usr/sbin/nologin", name], check=True, capture_output=True)
    student = Student(name, home, python)
    student.run("sh", "-c", f"mkdir -p ~/.jupyter && cp {course}/student_nbgrader_config.py "
                            "~/.jupyter/nbgrader_config.py")  # the README's set-up step, as init prints it
    for assignment in FETCHED:
        student.nbgrader("fetch_assignment", assignment)
    return SimpleNamespace(course=course, init=init, site=site, student=student)


def load(student_course, assignment: str, **options) -> dict:
    student = student_course.student
    folder = student.home / assignment
    done = as_student(student, folder, student.python, "-S", "-c", LOAD, str(student_course.site), SITE,
                      str(folder / f"{assignment}.ipynb"), **options)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_init_tells_the_students_the_one_step_that_sets_it_up(student_course):
    course = student_course.course
    assert (f"each student, once: mkdir -p ~/.jupyter && cp {course}/student_nbgrader_config.py "
            "~/.jupyter/nbgrader_config.py") in student_course.init.stderr, student_course.init.stderr
    config = (course / "student_nbgrader_config.py").read_text()
    assert f"c.TinyTorch.datasets = {str(course / 'datasets')!r}" in config


def test_the_course_holds_the_datasets_readable_by_students_and_written_by_the_instructor_alone(student_course):
    copy, student = student_course.course / "datasets", student_course.student
    assert sorted(path.name for path in copy.iterdir()) == sorted([*datasets.CHECKSUMS, "README.md"])
    for key in datasets.NAMES:
        datasets.verified_path(key, copy)  # the sums of datasets/README.md
    assert (copy / "README.md").read_bytes() == (REPO / "datasets" / "README.md").read_bytes()  # the provenance
    listed = as_student(student, student.home, "ls", str(copy))
    assert sorted(listed.stdout.split()) == sorted(path.name for path in copy.iterdir()), listed.stderr
    for attempt in (["sh", "-c", f"echo forged > {copy / 'mnist_10k_2k.npz'}"],
                    ["rm", "-f", str(copy / "digits.csv.gz")], ["touch", str(copy / "extra")],
                    ["chmod", "666", str(copy / "README.md")]):
        assert as_student(student, student.home, *attempt).returncode != 0, attempt
    for key in datasets.NAMES:
        datasets.verified_path(key, copy)


@pytest.mark.parametrize("assignment", READERS)
def test_the_data_cells_load_the_course_copy_as_the_student(student_course, assignment):
    report = load(student_course, assignment)
    assert "raised" not in report, report["raised"]
    assert not report["tito"].startswith(str(REPO)), "tito must be the installed copy, not the checkout's"
    assert report["from"] == str(student_course.course / "datasets")
    expected = {"08_dataloader": {"fashion": [10000, [10000, 28, 28]], "mnist": [10000, [10000, 28, 28]]},
                "10_tokenization": {"text": 5_057_280}, "13_transformer": {"text": 1_000_000}}[assignment]
    assert {key: report[key] for key in expected} == expected


def test_without_the_course_configuration_the_error_says_what_to_do(student_course):
    """A student who skipped the set-up step (here: a Jupyter configuration folder without it)."""
    empty = student_course.student.home / "no-config"
    as_student(student_course.student, student_course.student.home, "mkdir", "-p", str(empty))
    report = load(student_course, "10_tokenization", config_dir=empty)
    assert report["raised"].startswith("FileNotFoundError: found no datasets/ folder holding "), report
    assert "copy the course's student_nbgrader_config.py to ~/.jupyter/nbgrader_config.py" in report["raised"]
    assert "run this notebook's first cell (use_my_modules) again" in report["raised"]


def test_the_learner_cells_read_no_data_outside_the_lines_run_here():
    """LOAD runs the lines of the learner-only cells that load a dataset: each of them is one assignment."""
    from tito.commands.course import source_notebook
    from tito.project import stages

    for stage in (stage for stage in stages(REPO) if stage.name in READERS):
        lines = [line.strip() for cell in source_notebook(stage).cells
                 if LEARNER_ONLY in cell.metadata.get("tags", [])
                 for line in cell.source.splitlines() if "MNIST(" in line or "datasets." in line]
        assert lines and all(line.split("=")[0].strip().isidentifier() for line in lines), (stage.name, lines)
