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
    """(task, first line of the body, line after the body) of each region."""
    found, start, task = [], None, None
    for number, line in enumerate(lines):
        if start is None and (match := begin.match(line)):
            start, task = number + 1, match.group(1)
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
