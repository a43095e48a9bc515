"""`tito course init DIR`: an nbgrader course generated from solutions/.

Writes DIR/nbgrader_config.py (only when missing) and DIR/source/NN_name/NN_name.ipynb for every stage:
prose and given code locked, solution regions as autograded answers, and after each task a graded cell
worth that task's points in the hidden suite. Its hidden part only asks the judge (tito.nbgrader_judge)
for the task's score: the checks themselves never enter the notebook, the gradebook or the kernel.
Running it again rewrites the source notebooks and nothing else: grades and submissions stay.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import nbformat

from tito import console, sandbox
from tito.errors import TitoError
from tito.project import Stage, find_root, stages
from tito.source import BEGIN_SOLUTION, notebook_text, read_source
from tito.suite import load_checks

KERNEL_NAME = "tinytorch-judged"
CONFIG = '''"""nbgrader configuration of this TinyTorch course, written by `tito course init`."""

import os

c = get_config()  # noqa: F821
here = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "tinytorch"
c.Exchange.root = os.path.join(here, "exchange")  # students fetch and submit with --Exchange.root=<this>

# Stubs in the released notebooks (nbgrader replaces each solution region with this).
c.ClearSolutions.code_stub = {{"python": "### BEGIN YOUR SOLUTION\\n"
                                        "raise NotImplementedError(\\"not implemented yet\\")\\n"
                                        "### END YOUR SOLUTION"}}

# Autograde runs every notebook in a kernel sandboxed by tito: {protection}
# The graded cells ask a judge outside that sandbox for their scores.
c.Execute.kernel_name = "{kernel}"
c.Execute.timeout = 600
c.Execute.interrupt_on_timeout = True

# Feedback shows each graded cell's result and messages, not its hidden part.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]

# A cell a student duplicated must not fail the whole submission.
from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, OverwriteCells, OverwriteKernelspec  # noqa: E402
from tito.nbgrader_fixes import DropDuplicateIds  # noqa: E402

c.Autograde.sanitize_preprocessors = [ClearOutput, DropDuplicateIds, OverwriteKernelspec, OverwriteCells,
                                      CheckCellMetadata]
'''


def _nbgrader(cell: Any, **flags: Any) -> None:
    meta = {"grade": False, "solution": False, "locked": False, "schema_version": 3}
    meta.update(flags)
    cell.metadata["nbgrader"] = meta


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
    for index, cell in enumerate(source.cells, start=1):
        grade_id = f"{stage.number}-cell-{index:03d}"
        if cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source)
            _nbgrader(new, locked=True, grade_id=grade_id)
            cells.append(new)
            continue
        new = nbformat.v4.new_code_cell(cell.source)
        regions = regions_of[index - 1]
        _nbgrader(new, solution=bool(regions), locked=not regions, grade_id=grade_id)
        cells.append(new)
        for task in (t for t, last in last_cell.items() if last == index):  # after the task's last cell
            if task not in points:
                raise TitoError(f"task {task} of {stage.name} has no check in {stage.relative(stage.suite)}")
            worth = points.pop(task)
            graded = nbformat.v4.new_code_cell(
                f"# Graded: task {task} ({', '.join(names[task])}), {worth:g} points, by the hidden suite.\n"
                "### BEGIN HIDDEN TESTS\n"
                "from tito.nbgrader_judge import score\n"
                f"score({stage.name!r}, {task!r})\n"
                "### END HIDDEN TESTS")
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
    """The kernelspec autograde uses: a judge beside a sandboxed ipykernel (tito.judged_kernel)."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = {"argv": [sys.executable, "-m", "tito.judged_kernel", "-f", "{connection_file}"],
            "display_name": "TinyTorch autograde (judged, sandboxed)", "language": "python",
            "interrupt_mode": "message"}
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
        KernelSpecManager().install_kernel_spec(folder, KERNEL_NAME, prefix=sys.prefix, replace=True)


def write_course(root: Path, course: Path) -> list[str]:
    """Create or update the course; returns what was written."""
    written = []
    course.mkdir(parents=True, exist_ok=True)
    config = course / "nbgrader_config.py"
    if not config.exists():
        protection = sandbox.describe("bwrap" if sandbox.bwrap_available() else "none")
        config.write_text(CONFIG.format(kernel=KERNEL_NAME, protection=protection),
                          encoding="utf-8")
        written.append(str(config))
    (course / "exchange").mkdir(exist_ok=True)
    install_kernel()
    for stage in stages(root):
        path = course / "source" / stage.name / f"{stage.name}.ipynb"
        text = notebook_text(source_notebook(stage))
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(str(path))
    return written


def init(directory: Path) -> int:
    root = find_root()
    course = directory.resolve()
    if course.exists() and not course.is_dir():
        raise TitoError(f"{course} is a file, not a folder: give the folder for the nbgrader course")
    written = write_course(root, course)
    for path in written:
        console.info(f"wrote {path}")
    if not written:
        console.info(f"{course} is up to date")
    if not sandbox.bwrap_available():
        console.warn("bubblewrap is missing: during autograde the judge grades without a sandbox; install it "
                     "(Debian/Ubuntu: `sudo apt install bubblewrap`)")
    console.info(f"next: cd {course} && nbgrader generate_assignment 01_tensor && "
                 "nbgrader release_assignment 01_tensor")
    return 0
