"""One source per module: reading it, turning it into the student notebook, and finding tasks and stubs.

The source is a jupytext percent file (docs/authoring.md). Solution regions

    ### BEGIN SOLUTION 01.4 Tensor.sum
    ...
    ### END SOLUTION

become stubs that raise NotImplementedError naming the task.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from tito.errors import TitoError
from tito.project import Stage

BEGIN_SOLUTION = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION (?P<task>\d\d\.\d+) (?P<name>\S.*?)\s*$")
END_SOLUTION = re.compile(r"^\s*### END SOLUTION\s*$")
BEGIN_STUDENT = re.compile(r"^\s*### BEGIN YOUR SOLUTION \(Task \d\d\.\d+\)\s*$")
END_STUDENT = re.compile(r"^\s*### END YOUR SOLUTION\s*$")
STUB_RAISE = re.compile(
    r'raise NotImplementedError\("Task (?P<task>\d\d\.\d+): (?P<name>.+?) is not implemented yet"\)')
DIRECTIVE = re.compile(r"^#\|\s*(?P<name>[\w-]+)\s*(?P<value>.*?)\s*$")
NBFORMAT_MINOR = 5


@dataclass(frozen=True)
class Task:
    id: str
    name: str


def directives(source: str) -> dict[str, str]:
    """The `#| name value` lines at the top of a code cell."""
    found = {}
    for line in source.splitlines():
        match = DIRECTIVE.match(line)
        if not match:
            break
        found[match["name"]] = match["value"]
    return found


class Node(dict):
    """A dict whose keys read as attributes, like nbformat's NotebookNode, for notebooks read with `json`
    alone: importing nbformat costs seconds, and the student loop reads notebooks on every run."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def parse_notebook(text: str) -> Node:
    """A notebook's cells (cell_type, source as one string, metadata) and metadata, from its JSON text.
    Raises ValueError when the text is not a Jupyter notebook (RecursionError and MemoryError included)."""
    try:
        data = json.loads(text)
    except (RecursionError, MemoryError) as error:
        raise ValueError(f"it cannot be read ({type(error).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise ValueError("it has no cells")
    cells = []
    for cell in data["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise ValueError("a cell has no type")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise ValueError("a cell's source is not text")
        metadata = cell.get("metadata")
        cells.append(Node(cell_type=cell["cell_type"], source=source,
                          metadata=metadata if isinstance(metadata, dict) else {}))
    metadata = data.get("metadata")
    return Node(cells=cells, metadata=metadata if isinstance(metadata, dict) else {})


def source_tasks(stage: Stage) -> list[Task]:
    """The tasks of a stage's source, in order of first appearance (read without jupytext)."""
    seen: dict[str, Task] = {}
    for line in stage.source.read_text(encoding="utf-8").splitlines():
        match = BEGIN_SOLUTION.match(line)
        if match and match["task"] not in seen:
            seen[match["task"]] = Task(match["task"], match["name"])
    return list(seen.values())


def read_source(stage: Stage) -> Any:
    import jupytext

    try:
        return jupytext.read(stage.source, fmt="py:percent")
    except Exception as error:
        raise TitoError(f"{stage.relative(stage.source)} could not be read as a jupytext percent file: "
                        f"{error}") from None


def read_notebook(stage: Stage) -> Node:
    """The student's notebook, or a TitoError naming it when it is missing or not a notebook."""
    path = stage.notebook
    where = stage.relative(path)
    if not path.is_file():
        raise TitoError(f"{where} is missing: run `tito build` to generate it")
    try:
        return parse_notebook(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as error:
        reason = " ".join(str(error).split())[:160]
        raise TitoError(f"{where} is not a readable Jupyter notebook ({reason}); "
                        f"repair it, or move it aside and run `tito build` for a fresh copy") from None


def tasks(notebook: Any) -> list[Task]:
    """The tasks of a source, in order of first appearance."""
    seen: dict[str, Task] = {}
    for cell in notebook.cells:
        for line in cell.source.splitlines():
            match = BEGIN_SOLUTION.match(line)
            if match and match["task"] not in seen:
                seen[match["task"]] = Task(match["task"], match["name"])
    return list(seen.values())


def stubbed_tasks(notebook: Any) -> dict[str, list[str]]:
    """Task id -> names of the stubs still left for it in a student notebook."""
    left: dict[str, list[str]] = {}
    for cell in notebook.cells:
        if cell.cell_type == "code":
            for match in STUB_RAISE.finditer(cell.source):
                names = left.setdefault(match["task"], [])
                if match["name"] not in names:  # several regions of one task often share its name
                    names.append(match["name"])
    return left


def stub_out(source: str, where: str) -> str:
    """Replace every solution region in a cell with a stub naming its task."""
    out: list[str] = []
    region: re.Match | None = None
    for number, line in enumerate(source.splitlines(), start=1):
        begin = BEGIN_SOLUTION.match(line)
        if region is None and begin:
            region = begin
            indent, task, name = begin["indent"], begin["task"], begin["name"]
            out += [f"{indent}### BEGIN YOUR SOLUTION (Task {task})",
                    f'{indent}raise NotImplementedError("Task {task}: {name} is not implemented yet")',
                    f"{indent}### END YOUR SOLUTION"]
        elif region is not None and END_SOLUTION.match(line):
            region = None
        elif begin or END_SOLUTION.match(line) or "BEGIN SOLUTION" in line:
            raise TitoError(f"{where}, line {number}: solution markers are unbalanced or malformed "
                            f"(expected `### BEGIN SOLUTION NN.k Name` ... `### END SOLUTION`)")
        elif region is None:
            out.append(line)
    if region is not None:
        raise TitoError(f"{where}: `### BEGIN SOLUTION {region['task']}` has no `### END SOLUTION`")
    return "\n".join(out)


def solution_regions(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, task) of the lines strictly inside each solution region of a cell."""
    regions, begin = [], None
    for number, line in enumerate(source.splitlines(), start=1):
        if match := BEGIN_SOLUTION.match(line):
            begin = (number, match["task"])
        elif begin and END_SOLUTION.match(line):
            if number - begin[0] > 1:
                regions.append((begin[0] + 1, number - 1, begin[1]))
            begin = None
    return regions


def strip_markers(source: str) -> str:
    """The code of a cell without solution markers and directives, as it goes into the package."""
    markers = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_STUDENT, END_STUDENT, DIRECTIVE)
    return "\n".join(line for line in source.splitlines() if not any(p.match(line) for p in markers))


def content_hash(notebook: Any) -> str:
    """Hash of what a person edits (cell types and sources), not of outputs or metadata."""
    cells = [[cell.cell_type, cell.source] for cell in notebook.cells]
    return hashlib.sha256(json.dumps(cells).encode()).hexdigest()


def student_notebook(stage: Stage) -> Any:
    """The student notebook generated from a stage's source."""
    import nbformat

    source = read_source(stage)
    where = stage.relative(stage.source)
    cells = []
    for index, cell in enumerate(source.cells, start=1):
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(stub_out(cell.source, f"{where} cell {index}"))
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source)
        else:
            new = nbformat.v4.new_raw_cell(cell.source)
        new["id"] = f"{stage.number}-{index:03d}"
        cells.append(new)
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.nbformat_minor = NBFORMAT_MINOR
    notebook.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
        "tinytorch": {"stage": stage.name, "generated_from": where, "content_hash": content_hash(notebook)},
    }
    return notebook


def notebook_text(notebook: Any) -> str:
    import nbformat

    return nbformat.writes(notebook, version=4) + "\n"


def edited_since_generated(notebook: Any) -> bool:
    recorded = notebook.get("metadata", {}).get("tinytorch", {}).get("content_hash")
    return recorded != content_hash(notebook)


def export_target(notebook: Any, where: str) -> str:
    """The dotted module path after `#| default_exp`, e.g. "core.tensor"."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and "default_exp" in directives(cell.source):
            target = directives(cell.source)["default_exp"]
            if not re.fullmatch(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*", target):
                raise TitoError(f"{where}: `#| default_exp {target}` is not a module path like core.tensor")
            return target
    raise TitoError(f"{where} has no `#| default_exp` cell, so tito does not know where to export it; "
                    f"restore that cell (see the generated notebook's first code cell)")


NAMESPACE = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*")


def exported_cells(notebook: Any, where: str = "the notebook") -> list[tuple[int, str, str]]:
    """(1-based cell number, code, namespace) of every `#| export` cell. The namespace is the directive's
    argument (`#| export nn.functional` -> "nn.functional"), "" for the top-level `tinytorch`."""
    cells = []
    for index, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or "export" not in directives(cell.source):
            continue
        namespace = directives(cell.source)["export"]
        if namespace and not NAMESPACE.fullmatch(namespace):
            raise TitoError(f"{where}, cell {index}: `#| export {namespace}` does not name a namespace like "
                            f"nn or nn.functional; restore the cell's first line")
        cells.append((index, strip_markers(cell.source), namespace))
    return cells
