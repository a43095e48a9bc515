"""`tito course init DIR`: an nbgrader course generated from solutions/.

Writes DIR/nbgrader_config.py (only when missing), DIR/student_nbgrader_config.py, DIR/datasets/ (a copy of
the shipped data for the students' notebooks, readable by all) and DIR/source/NN_name/NN_name.ipynb for every
stage: prose and given code locked, solution regions as autograded answers (each named in the line above
it), a first cell that imports the student's own earlier modules (tito.fetched), and after each task a graded
cell worth that task's points in the hidden suite. A graded cell holds no test: during autograde the judge
(tito.nbgrader_judge.JudgeScores, in the nbgrader process) writes its result. Running it again rewrites the
source notebooks, the datasets that differ and the modes of the course's folders and nothing else: grades
and submissions stay. A folder that holds anything but a course,
or a damaged gradebook, is refused before anything changes.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import sys
import tempfile
from contextlib import closing
from pathlib import Path
from typing import Any

import nbformat

from tito import console, datasets, sandbox
from tito import nbgrader_judge as judge
from tito.errors import TitoError
from tito.project import Stage, find_root, stages
from tito.source import BEGIN_SOLUTION, notebook_text, read_source
from tito.suite import load_checks

KERNEL_NAME = "tinytorch-sandboxed"
# what a graded cell says when it runs in autograde: the judge replaces its outputs, so only an autograde
# without the judge (a wrong nbgrader_config.py) ever shows it, and scores the cell 0
JUDGE_ONLY = "only the course's judge scores this cell (tito.nbgrader_judge.JudgeScores in nbgrader_config.py)"
# the first code cell of a course notebook after 01: the student's own earlier modules as `tinytorch`
MY_MODULES = """# Your tinytorch so far: the modules before this one, exported from your own notebooks in the folders
# beside this one (where nbgrader fetches them). Run this cell first, and again after you change one.
from tito.fetched import use_my_modules

use_my_modules()"""
STUDENT_CONFIG = '''"""A student's nbgrader configuration for the TinyTorch course: copy it to
~/.jupyter/nbgrader_config.py.

JupyterLab's Assignment List then fetches, submits and fetches feedback from the course's exchange, and
`nbgrader fetch_assignment 01_tensor` (and submit, fetch_feedback) works without flags; the notebooks find
the course's datasets through it. Fetch every module into the same folder: a notebook after 01 imports your
own earlier modules from the folders beside it.
"""

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "tinytorch"
c.Exchange.root = {exchange!r}
# The course's copy of the shipped data (MNIST, Fashion-MNIST, the UCI digits, Shakespeare), which 08's
# tt.datasets reads: the first cell of every notebook after 01 (use_my_modules) sets TINYTORCH_DATA to it.
c.TinyTorch.datasets = {datasets!r}
'''
CONFIG = '''"""nbgrader configuration of this TinyTorch course, written by `tito course init`."""

import os

c = get_config()  # noqa: F821
here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "tinytorch"
c.Exchange.root = os.path.join(here, "exchange")  # students fetch and submit with --Exchange.root=<this>

# Collect takes a student's submission only from files that student owns, never through a link; any other
# submission (a classmate's name on it, a link, a special file) is refused with one log line, and only it.
c.ExchangeFactory.collect = "tito.nbgrader_exchange.CollectOwnFiles"
# nbgrader export writes grades.csv readable by you alone.
c.ExportApp.plugin_class = "tito.nbgrader_exchange.PrivateCsvExport"

# Stubs in the released notebooks (nbgrader replaces each solution region with this).
c.ClearSolutions.code_stub = {{"python": "### BEGIN YOUR SOLUTION\\n"
                                        "raise NotImplementedError(\\"not implemented yet: the task named above\\")\\n"
                                        "### END YOUR SOLUTION"}}

# Autograde runs every notebook in a kernel sandboxed by tito ({protection}); its channels to nbgrader
# are Unix sockets bound into the sandbox (ZMQ's ipc transport), so it needs no network.
c.Execute.kernel_name = "{kernel}"
c.Execute.timeout = 300  # seconds per cell
c.Execute.interrupt_on_timeout = True
c.ExecuteForFeedback.notebook_timeout = 900  # seconds for the whole notebook: the cells left then do not run
c.KernelManager.transport = "ipc"

# The scores are the judge's: after Execute, in this (trusted) process, JudgeScores grades the notebook
# with tito's engine and writes every graded cell's result; nothing the kernel printed there counts.
# SkipLearnerCells leaves out the cells that only train or draw for the learner; a kernel that dies ends
# the notebook's execution, not its grading (ExecuteForFeedback).
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearOutput,  # noqa: E402
                                    IgnorePattern, LimitOutput, OverwriteCells, OverwriteKernelspec,
                                    SaveAutoGrades)
from tito.nbgrader_fixes import DropDuplicateIds  # noqa: E402
from tito.nbgrader_judge import ExecuteForFeedback, JudgeScores, SkipLearnerCells  # noqa: E402

c.JudgeScores.course_root = here
c.Autograde.autograde_preprocessors = [SkipLearnerCells, ExecuteForFeedback, JudgeScores, IgnorePattern,
                                       ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
                                       AssignLatePenalties, CheckCellMetadata]
# A cell a student duplicated must not fail the whole submission.
c.Autograde.sanitize_preprocessors = [ClearOutput, DropDuplicateIds, OverwriteKernelspec, OverwriteCells,
                                      CheckCellMetadata]

# Feedback shows each graded cell's result and messages.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import GetGrades  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor]
'''


def _nbgrader(cell: Any, **flags: Any) -> None:
    meta = {"grade": False, "solution": False, "locked": False, "schema_version": 3}
    meta.update(flags)
    cell.metadata["nbgrader"] = meta


# The narrative's words for the tito workflow (`tito export`, `tito test`) and their course counterparts:
# `<!-- tito -->...<!-- /tito -->` is dropped from the course's notebooks and `<!-- course ... -->` shown
# there; in tito's own notebooks both markers are HTML comments, which Jupyter does not render.
TITO_ONLY = re.compile(r"<!-- tito -->.*?<!-- /tito -->", re.S)
COURSE_ONLY = re.compile(r"<!-- course\s(.*?)\s*-->", re.S)


def course_narrative(markdown: str) -> str:
    return COURSE_ONLY.sub(lambda match: match[1], TITO_ONLY.sub("", markdown))


def _named_stubs(code: str) -> str:
    """Above each solution region, a line naming its task: nbgrader's stub replaces the region's lines,
    the task's number and name with them."""
    lines = []
    for line in code.splitlines():
        if match := BEGIN_SOLUTION.match(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}# Task {match['task']} ({match['name']}): replace the stub below with your code")
        lines.append(line)
    return "\n".join(lines)


def source_notebook(stage: Stage) -> nbformat.NotebookNode:
    """The nbgrader source notebook of a stage."""
    source = read_source(stage)
    points: dict[str, float] = {}
    for check in load_checks(stage):
        points[check.task] = points.get(check.task, 0) + check.points
    regions_of = [[(m["task"], m["name"]) for line in cell.source.splitlines() if (m := BEGIN_SOLUTION.match(line))]
                  if cell.cell_type == "code" else [] for cell in source.cells]
    last_cell = {task: index for index, regions in enumerate(regions_of, start=1) for task, _ in regions}
    names: dict[str, list[str]] = {}
    for regions in regions_of:
        for task, name in regions:
            if name not in names.setdefault(task, []):
                names[task].append(name)
    cells = []
    first_code = next(i for i, cell in enumerate(source.cells, start=1) if cell.cell_type == "code")
    for index, cell in enumerate(source.cells, start=1):
        if index == first_code and stage.number != "01":
            mine = nbformat.v4.new_code_cell(MY_MODULES)
            _nbgrader(mine, locked=True, grade_id=f"{stage.number}-my-modules")
            cells.append(mine)
        grade_id = judge.grade_id(stage, index)
        if cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(course_narrative(cell.source))
            _nbgrader(new, locked=True, grade_id=grade_id)
            cells.append(new)
            continue
        new = nbformat.v4.new_code_cell(_named_stubs(cell.source))
        if judge.LEARNER_ONLY in cell.metadata.get("tags", []):
            new.metadata["tags"] = [judge.LEARNER_ONLY]
        regions = regions_of[index - 1]
        _nbgrader(new, solution=bool(regions), locked=not regions, grade_id=grade_id)
        cells.append(new)
        for task in (t for t, last in last_cell.items() if last == index):  # after the task's last cell
            if task not in points:
                raise TitoError(f"task {task} of {stage.name} has no check in {stage.relative(stage.suite)}")
            worth = points.pop(task)
            graded = nbformat.v4.new_code_cell(
                f"# Graded: task {task} ({', '.join(names[task])}), {worth:g} points. During autograde the course's\n"
                "# judge writes this cell's result; run here, the cell does nothing.\n"
                "import os\n\n"
                "if os.environ.get(\"NBGRADER_EXECUTION\") == \"autograde\":\n"
                f"    raise RuntimeError({JUDGE_ONLY!r})\n")
            _nbgrader(graded, grade=True, locked=True, grade_id=f"task-{task.replace('.', '_')}", points=worth)
            cells.append(graded)
    if points:
        raise TitoError(f"{stage.relative(stage.suite)} grades tasks that {stage.relative(stage.source)} "
                        f"does not have: {', '.join(points)}")
    notebook = nbformat.v4.new_notebook(cells=cells)
    for number, cell in enumerate(notebook.cells):
        cell["id"] = f"{stage.number}-{number:03d}"
    notebook.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                         "language_info": {"name": "python"},
                         "tinytorch": {"stage": stage.name, "generated_from": stage.relative(stage.source)}}
    return notebook


def install_kernel() -> None:
    """The kernelspec autograde uses: an ipykernel in a bubblewrap sandbox (tito.sandboxed_kernel), in this
    environment's share/jupyter/kernels. Written only when it differs, and then by renaming a whole file
    into place: an autograde running meanwhile never finds it missing or half written."""
    spec = json.dumps({"argv": [sys.executable, "-m", "tito.sandboxed_kernel", "-f", "{connection_file}"],
                       "display_name": "TinyTorch autograde (sandboxed)", "language": "python",
                       "interrupt_mode": "message"}, indent=1)
    folder = Path(sys.prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME
    target = folder / "kernel.json"
    if target.is_file() and target.read_text(encoding="utf-8", errors="replace") == spec:
        return
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, prefix=".kernel-", delete=False) as stream:
        stream.write(spec)
    os.chmod(stream.name, 0o644)
    os.replace(stream.name, target)


# the classes of tito.nbgrader_exchange that CONFIG sets: a course's config without them predates them
EXCHANGE_CLASSES = ("CollectOwnFiles", "PrivateCsvExport")
# Who may see what on a shared server: the course folder can be crossed but not listed, so students reach
# the exchange (world-writable, sticky: nobody removes another's files) and nothing else; the instructor's
# folders, the gradebook, the course key and nbgrader export's grades.csv are the instructor's alone.
PRIVATE_FOLDERS = ("source", "release", "submitted", "autograded", "feedback")
PRIVATE_FILES = ("gradebook.db", ".tito-course-key", "nbgrader_config.py", "grades.csv")
# datasets/ is the one other folder students read: every account lists and reads it, the instructor alone writes.
DATASETS = "datasets"
# The course's own folder in the exchange, made here with nbgrader's modes, before any student can make it
# (a student's exchange/tinytorch/inbound would be theirs: release fails, they read and move others' work);
# inbound is sticky too, so no student renames another's submission away.
EXCHANGE_FOLDERS = {"exchange/tinytorch": 0o755, "exchange/tinytorch/outbound": 0o755,
                    "exchange/tinytorch/inbound": 0o3733, "exchange/tinytorch/feedback": 0o711}
MODES = {".": 0o711, "exchange": 0o1777, **EXCHANGE_FOLDERS, DATASETS: 0o755,
         **dict.fromkeys(PRIVATE_FOLDERS, 0o700), **dict.fromkeys(PRIVATE_FILES, 0o600)}


def closed_folders(course: Path) -> list[Path]:
    """The folders above the course that other accounts cannot cross (no o+x, as Ubuntu's 0750 homes): through
    them no student reaches the exchange."""
    closed = []
    for folder in reversed(course.parents):
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                closed.append(folder)
        except OSError:
            continue
    return closed


def student_config(course: Path) -> str:
    """What a student puts in ~/.jupyter/nbgrader_config.py to fetch and submit from JupyterLab and to find the
    course's datasets."""
    return STUDENT_CONFIG.format(exchange=str(course / "exchange"), datasets=str(course / DATASETS))


def dataset_files() -> list[str]:
    """The files of the course's datasets/: the shipped data (tito.datasets.CHECKSUMS) and README.md, their
    provenance and licences."""
    return [*datasets.CHECKSUMS, "README.md"]


def write_datasets(root: Path, course: Path) -> list[str]:
    """Copy the checkout's datasets/ into course/datasets, each data file after its sha256 matched; returns what
    was written. A file is written only when it differs, and then by renaming a whole copy into place, so a
    student's notebook reading it meanwhile never finds it missing or half written."""
    readme = root / "datasets" / "README.md"
    if not readme.is_file():
        raise TitoError(f"{readme} is missing: restore it with `git checkout -- datasets/`")
    origins = [*(datasets.verified_path(key, readme.parent) for key in datasets.NAMES), readme]
    folder = course / DATASETS
    folder.mkdir(exist_ok=True)
    written = []
    for origin in origins:
        data, target = origin.read_bytes(), folder / origin.name
        if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
            continue
        with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=f".{origin.name}-", delete=False) as stream:
            stream.write(data)
        os.chmod(stream.name, 0o644)
        os.replace(stream.name, target)
        written.append(str(target))
    return written


# the first line of CONFIG: a folder whose nbgrader_config.py says so is a course tito made
WRITTEN_BY_TITO = "written by `tito course init`"
# what CONFIG's comment says of the kernel's box on a machine without bubblewrap (the judge refuses there)
NO_BUBBLEWRAP = ("a bubblewrap sandbox; bubblewrap was missing when this file was written, and autograde refuses "
                 "to grade, writing no score, until it is installed")


def is_course(course: Path) -> bool:
    """Whether `course` is a TinyTorch course already: its nbgrader_config.py was written by tito, or (that file
    moved away, as the README says to get the current one) it holds source/ and gradebook.db."""
    config = course / "nbgrader_config.py"
    if config.is_file() and WRITTEN_BY_TITO in config.read_text(encoding="utf-8", errors="replace")[:200]:
        return True
    return (course / "source").is_dir() and (course / "gradebook.db").is_file()


def check_folder(course: Path) -> None:
    """Refuse, before anything changes, a course folder that cannot be one: a file, a path under a file, a
    folder holding something else (a home, /srv: init would change its mode for everyone), or a gradebook
    SQLite cannot read."""
    for folder in (course, *course.parents):
        if not folder.exists():
            continue
        if folder.is_dir():
            break
        if folder == course:
            raise TitoError(f"{course} is a file, not a folder: give the folder for the nbgrader course")
        raise TitoError(f"{folder} is a file, so {course} cannot be made under it: give a folder for the course "
                        "elsewhere")
    if course.is_dir() and any(course.iterdir()) and not is_course(course):
        raise TitoError(f"{course} already holds files and is not a TinyTorch course (no nbgrader_config.py "
                        "written by tito, no source/ and gradebook.db), so tito leaves it alone: give a new or "
                        "empty folder for the course")
    gradebook = course / "gradebook.db"
    if gradebook.is_file() and gradebook.stat().st_size > 0:
        try:
            with closing(sqlite3.connect(f"{gradebook.as_uri()}?mode=ro", uri=True)) as database:
                verdict = str(database.execute("PRAGMA quick_check").fetchone()[0])
        except sqlite3.Error as error:
            verdict = str(error)
        if verdict != "ok":
            raise TitoError(f"{gradebook} is damaged (SQLite: {verdict[:200]}), so tito changed nothing: restore "
                            "it from a backup, or move it away and run `tito course init` again for an empty one "
                            "(then `nbgrader generate_assignment` and `nbgrader autograde` fill it again from "
                            "source/ and submitted/)")


def write_course(root: Path, course: Path) -> list[str]:
    """Create or update the course (after `check_folder`); returns what was written."""
    check_folder(course)
    written = []
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        protection = sandbox.describe("bwrap") if sandbox.bwrap_available() else NO_BUBBLEWRAP
        config.write_text(CONFIG.format(kernel=KERNEL_NAME, protection=protection),
                          encoding="utf-8")
        written.append(str(config))
    elif "JudgeScores" not in config.read_text(encoding="utf-8", errors="replace"):
        console.warn(f"{config} predates the judge in autograde (JudgeScores) and kept the old kernel: move it away "
                     "and run `tito course init` again to get the current one")
    if not all(name in config.read_text(encoding="utf-8", errors="replace") for name in EXCHANGE_CLASSES):
        console.warn(f"{config} predates tito's collect and export ({', '.join(EXCHANGE_CLASSES)}), so `nbgrader "
                     "collect` takes work handed in under a classmate's name or through a link and grades.csv is "
                     "readable by every account: move it away and run `tito course init` again to get the current one")
    for name in ("exchange", *EXCHANGE_FOLDERS, *PRIVATE_FOLDERS):
        (course / name).mkdir(exist_ok=True)
    for name in EXCHANGE_FOLDERS:
        owner = (course / name).lstat()
        if owner.st_uid != os.geteuid() or not stat.S_ISDIR(owner.st_mode):
            raise TitoError(f"{course / name} is not a folder of yours (another account made it, perhaps a student "
                            f"before the course was set up): remove it (`sudo rm -rf {course / name}`) and run "
                            f"`tito course init` again")
    students = course / "student_nbgrader_config.py"
    if not students.exists() or students.read_text(encoding="utf-8") != student_config(course):
        students.write_text(student_config(course), encoding="utf-8")
        written.append(str(students))
    written += write_datasets(root, course)
    install_kernel()
    for stage in stages(root):
        path = course / "source" / stage.name / f"{stage.name}.ipynb"
        text = notebook_text(source_notebook(stage))
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(str(path))
    gradebook = course / "gradebook.db"
    if not gradebook.exists():  # made here, so it is private from the start (SQLite takes an empty file)
        os.close(os.open(gradebook, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for name, mode in MODES.items():
        path = course / name
        if path.exists():
            path.chmod(mode)
    (course / "student_nbgrader_config.py").chmod(0o644)
    for name in dataset_files():
        (course / DATASETS / name).chmod(0o644)
    return written


def init(directory: Path) -> int:
    root = find_root()
    course = directory.resolve()
    try:
        written = write_course(root, course)
    except OSError as error:  # an unwritable place, a full disk: what was written stays, and is rewritten next time
        where = error.filename or course
        raise TitoError(f"could not write {where} ({error.strerror or error}): give a course folder in a place "
                        "you can write") from None
    for path in written:
        console.info(f"wrote {path}")
    if not written:
        console.info(f"{course} is up to date")
    if not sandbox.bwrap_available():
        console.warn("bubblewrap is missing: `nbgrader autograde` will refuse to grade (it exits with an error and "
                     "writes no score) until it is installed (Debian/Ubuntu: `sudo apt install bubblewrap`)")
    if closed := " ".join(str(folder) for folder in closed_folders(course)):
        console.warn(f"students cannot reach the exchange, as other accounts cannot cross {closed}: "
                     f"`chmod o+x {closed}` fixes it")
    console.info(f"next: cd {course} && nbgrader generate_assignment 01_tensor && "
                 "nbgrader release_assignment 01_tensor")
    console.info(f"each student, once: mkdir -p ~/.jupyter && cp {course / 'student_nbgrader_config.py'} "
                 f"~/.jupyter/nbgrader_config.py (it names the exchange and the course's datasets, "
                 f"{course / DATASETS}, for the notebooks that read them)")
    return 0


def autograde(stage: str, *, course: Path, jobs: int, scheduler: str | None, students: list[str] | None,
              force: bool) -> int:
    """`tito course autograde NN`: the module's new and changed submissions autograded by nbgrader, in parallel,
    the gradebook written by this process alone (tito.course_autograde)."""
    from tito import course_autograde
    from tito.project import stage as find_stage

    chosen = find_stage(find_root(), stage)
    folder = course.resolve()
    if not is_course(folder):
        raise TitoError(f"{folder} is not a TinyTorch course (no nbgrader_config.py written by `tito course init`, "
                        "no source/ and gradebook.db): give the course's folder with --course, or run it there")
    return course_autograde.autograde(chosen, folder, jobs=jobs, scheduler=scheduler, students=students, force=force)
