"""A simulated student: fills stubs in the generated notebook with nbformat, as JupyterLab would save them."""

from __future__ import annotations

import re
from pathlib import Path

import jupytext
import nbformat

BEGIN_SOLUTION = re.compile(r"^\s*### BEGIN SOLUTION (\d\d\.\d+) ")
END_SOLUTION = re.compile(r"^\s*### END SOLUTION\s*$")
BEGIN_STUDENT = re.compile(r"^\s*### BEGIN YOUR SOLUTION \(Task (\d\d\.\d+)\)\s*$")
END_STUDENT = re.compile(r"^\s*### END YOUR SOLUTION\s*$")


def _regions(lines: list[str], begin: re.Pattern, end: re.Pattern) -> list[tuple[str, int, int]]:
    """(task, first line of the body, line of the end marker) of each region."""
    found, start, task = [], None, None
    for number, line in enumerate(lines):
        if start is None and (match := begin.match(line)):
            start, task = number + 1, match.group(1) if begin.groups else None
        elif start is not None and end.match(line):
            found.append((task, start, number))
            start = None
    return found


def reference_bodies(source: Path) -> list[list[list[str]]]:
    """For each cell of a solutions source: the bodies of its solution regions, with their tasks."""
    notebook = jupytext.read(source, fmt="py:percent")
    bodies = []
    for cell in notebook.cells:
        lines = cell.source.splitlines()
        bodies.append([(task, lines[a:b]) for task, a, b in _regions(lines, BEGIN_SOLUTION, END_SOLUTION)])
    return bodies


def fill(notebook_path: Path, source: Path, tasks: set[str] | None = None) -> None:
    """Write the reference body into every stub of `tasks` (all when None), in place."""
    notebook = nbformat.read(notebook_path, as_version=4)
    bodies = reference_bodies(source)
    assert len(bodies) == len(notebook.cells), "the student notebook no longer matches its source"
    for cell, cell_bodies in zip(notebook.cells, bodies):
        lines = cell.source.splitlines()
        stubs = _regions(lines, BEGIN_STUDENT, END_STUDENT)
        assert len(stubs) == len(cell_bodies)
        for (task, start, stop), (_, body) in reversed(list(zip(stubs, cell_bodies))):
            if tasks is None or task in tasks:
                lines[start:stop] = body
        cell.source = "\n".join(lines)
    nbformat.write(notebook, notebook_path)


def edit_cell(notebook_path: Path, index: int, edit) -> None:
    """Apply `edit(source) -> source` to the 0-based cell `index`."""
    notebook = nbformat.read(notebook_path, as_version=4)
    notebook.cells[index].source = edit(notebook.cells[index].source)
    nbformat.write(notebook, notebook_path)


NBGRADER_BEGIN = re.compile(r"^\s*### BEGIN YOUR SOLUTION\s*$")


def fill_nbgrader_release(notebook_path: Path, source: Path, tasks: set[str] | None = None) -> None:
    """Fill the stubs of a notebook released by nbgrader from `tito course init`'s source: each cell keeps
    the grade_id "NN-cell-XXX" that names its cell in the solutions source."""
    notebook = nbformat.read(notebook_path, as_version=4)
    bodies = reference_bodies(source)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if "-cell-" not in grade_id or cell.cell_type != "code":
            continue
        cell_bodies = bodies[int(grade_id.rsplit("-", 1)[1]) - 1]
        lines = cell.source.splitlines()
        stubs = _regions(lines, NBGRADER_BEGIN, END_STUDENT)
        assert len(stubs) == len(cell_bodies)
        for (_, start, stop), (task, body) in reversed(list(zip(stubs, cell_bodies))):
            if tasks is None or task in tasks:
                lines[start - 1:stop + 1] = body
        cell.source = "\n".join(lines)
    nbformat.write(notebook, notebook_path)
