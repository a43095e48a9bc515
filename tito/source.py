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
from pathlib import Path
from typing import Any, NamedTuple

from tito.errors import TitoError
from tito.project import Stage

BEGIN_SOLUTION = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION (?P<task>\d\d\.\d+) (?P<name>\S(?:.*\S)?)\s*$")
END_SOLUTION = re.compile(r"^\s*### END SOLUTION\s*$")
BEGIN_STUDENT = re.compile(r"^\s*### BEGIN YOUR SOLUTION \(Task (?P<task>\d\d\.\d+)\)\s*$")
END_STUDENT = re.compile(r"^\s*### END YOUR SOLUTION\s*$")
STUB_RAISE = re.compile(
    r'raise NotImplementedError\("Task (?P<task>\d\d\.\d+): (?P<name>[^"\n]+?) is not implemented yet"\)')
# linear in the line, whatever its spaces: a lazy `.*?` before `\s*$` retried at every space (50,000 spaces
# in a student's first line held the grader for a minute)
DIRECTIVE = re.compile(r"^#\|\s*(?P<name>[\w-]+)\s*(?P<value>(?:\S(?:.*\S)?)?)\s*$")
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


def task_regions(stage: Stage) -> dict[str, int]:
    """Task id -> how many solution regions the stage's source has for it (each is one stub to fill)."""
    counts: dict[str, int] = {}
    for line in stage.source.read_text(encoding="utf-8").splitlines():
        if match := BEGIN_SOLUTION.match(line):
            counts[match["task"]] = counts.get(match["task"], 0) + 1
    return counts


def read_source(stage: Stage) -> Any:
    import jupytext

    try:
        return jupytext.read(stage.source, fmt="py:percent")
    except Exception as error:
        raise TitoError(f"{stage.relative(stage.source)} could not be read as a jupytext percent file: "
                        f"{error}") from None


def read_notebook(stage: Stage) -> Node:
    """The student's notebook, or a TitoError naming it when it is missing (and naming the other notebooks
    in its folder, which may hold the work) or not a notebook."""
    path = stage.notebook
    where = stage.relative(path)
    if not path.is_file():
        others = other_notebooks(stage)
        if others:
            raise TitoError(missing_beside(stage, others))
        raise TitoError(f"{where} is missing: run `tito build` to generate it")
    try:
        return parse_notebook(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as error:
        reason = " ".join(str(error).split())[:160]
        raise TitoError(f"{where} is not a readable Jupyter notebook ({reason}); "
                        f"repair it, or move it aside and run `tito build` for a fresh copy") from None


def other_notebooks(stage: Stage) -> dict[Path, int | None]:
    """The other notebooks in a stage's folder (a JupyterLab "Duplicate", a renamed copy), each with its
    number of tasks done (None when it is not a readable notebook); checkpoints and hidden files aside."""
    folder = stage.notebook.parent
    found: dict[Path, int | None] = {}
    for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
        if path != stage.notebook and not path.name.startswith(".") and path.is_file():
            try:
                found[path] = len(progress(stage, parse_notebook(path.read_text(encoding="utf-8"))).done)
            except (ValueError, OSError, RecursionError, MemoryError):
                found[path] = None
    return found


def holds_work(others: dict[Path, int | None]) -> bool:
    """Whether any of `other_notebooks` may be someone's work: tasks done, or not readable."""
    return any(done != 0 for done in others.values())


def _named(stage: Stage, others: dict[Path, int | None]) -> str:
    total = len(source_tasks(stage))
    return ", ".join(f"{stage.relative(path)} ("
                     + ("not a readable notebook" if done is None else f"{done} of {total} tasks done") + ")"
                     for path, done in others.items())


def missing_beside(stage: Stage, others: dict[Path, int | None]) -> str:
    """The sentence for a missing stage notebook whose folder holds other notebooks."""
    where = stage.relative(stage.notebook)
    build = "tito build --force" if holds_work(others) else "tito build"
    return (f"{where} is missing, and its folder holds {_named(stage, others)}: tito grades only {where}, so "
            f"rename or copy your work to that name (`{build} {stage.number}` writes a fresh blank notebook "
            f"there instead)")


def check_other_notebooks(stage: Stage) -> str:
    """"" when a stage's folder holds only its notebook; a warning naming the others when none of them has
    more tasks done; a TitoError naming both when one has (tito would grade the wrong one)."""
    others = other_notebooks(stage)
    if not others:
        return ""
    where = stage.relative(stage.notebook)
    done = len(progress(stage, read_notebook(stage)).done)
    ahead: dict[Path, int | None] = {path: n for path, n in others.items() if n is not None and n > done}
    if ahead:
        total = len(source_tasks(stage))
        folder = stage.relative(stage.notebook.parent)
        raise TitoError(f"{_named(stage, ahead)} has more tasks done than {where} ({done} of {total}), the "
                        f"notebook tito grades: copy your work into {where}, or delete the other notebook or "
                        f"move it out of {folder}/")
    return f"tito grades {where} ({done} tasks done) and ignores {_named(stage, others)} beside it"


@dataclass
class Progress:
    """Where a student notebook stands: a task is done when each of its solution regions is in an exported
    cell that compiles and holds no stub."""
    tasks: list[Task]
    stubs: dict[str, list[str]]  # task id -> names of the stubs left
    broken: dict[str, list[int]]  # task id -> the cells with a syntax error that hold its regions
    missing: dict[str, list[int]]  # task id -> [regions found in exported cells, regions in the source]

    @property
    def done(self) -> list[Task]:
        left = {*self.stubs, *self.broken, *self.missing}
        return [task for task in self.tasks if task.id not in left]

    def problems(self) -> list[str]:
        """One phrase per task in a cell with a syntax error or with a solution region missing."""
        said = []
        for task in self.tasks:
            if task.id in self.broken:
                cells = self.broken[task.id]
                said.append(f"{task.id} {task.name} is in a cell with a syntax error "
                            f"(cell{'s' if len(cells) > 1 else ''} {', '.join(map(str, cells))})")
            elif task.id in self.missing:
                found, wanted = self.missing[task.id]
                what = "its solution region is" if wanted == 1 else f"its {wanted} solution regions are" \
                    if found == 0 else f"{wanted - found} of its {wanted} solution regions are"
                said.append(f"{task.id} {task.name}: {what} missing (deleted cell or markers?)")
        return said


def progress(stage: Stage, notebook: Any) -> Progress:
    """The tasks of a stage done in a student notebook, and those in a cell with a syntax error, missing, or
    still stubs (only `#| export` cells count: they are what gets graded)."""
    regions = task_regions(stage)
    found: dict[str, int] = {}
    stubs: dict[str, list[str]] = {}
    broken: dict[str, list[int]] = {}
    for number, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or "export" not in directives(cell.source):
            continue
        held = [m["task"] for line in cell.source.splitlines() if (m := BEGIN_STUDENT.match(line))]
        for task in held:
            found[task] = found.get(task, 0) + 1
        try:
            compile(strip_markers(cell.source), f"cell {number}", "exec")
        except SyntaxError:
            _, stubbed = stub_broken_regions(cell.source)  # only the tasks whose region was stubbed
            named = [said.split(":")[0].removeprefix("Task ") for said in stubbed if said.startswith("Task ")]
            for task in dict.fromkeys(named or held):
                broken.setdefault(task, []).append(number)
            continue
        for match in STUB_RAISE.finditer(cell.source):
            names = stubs.setdefault(match["task"], [])
            if match["name"] not in names:  # several regions of one task often share its name
                names.append(match["name"])
    missing = {task: [found.get(task, 0), wanted] for task, wanted in regions.items() if found.get(task, 0) < wanted}
    return Progress(source_tasks(stage), stubs, broken, missing)


def tasks(notebook: Any) -> list[Task]:
    """The tasks of a source, in order of first appearance."""
    seen: dict[str, Task] = {}
    for cell in notebook.cells:
        for line in cell.source.splitlines():
            match = BEGIN_SOLUTION.match(line)
            if match and match["task"] not in seen:
                seen[match["task"]] = Task(match["task"], match["name"])
    return list(seen.values())


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


def kept_lines(source: str) -> list[int]:
    """The numbers (from 1) of the lines of a cell that `strip_markers` keeps."""
    markers = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_STUDENT, END_STUDENT, DIRECTIVE)
    return [number for number, line in enumerate(source.splitlines(), start=1)
            if not any(p.match(line) for p in markers)]


def strip_markers(source: str) -> str:
    """The code of a cell without solution markers and directives, as it goes into the package."""
    lines = source.splitlines()
    return "\n".join(lines[number - 1] for number in kept_lines(source))


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


class ExportedCell(NamedTuple):
    number: int  # from 1, as JupyterLab counts cells
    code: str  # without markers and directives
    namespace: str
    lines: list[int]  # the cell's own number (from 1) of each line of `code`
    source: str = ""  # the cell as the student wrote it, markers included


MAX_REPAIRED_CHARACTERS = 120_000  # the export cap: a longer cell is never compiled


def stub_broken_regions(source: str) -> tuple[str, tuple[str, ...]]:
    """A cell whose own code does not compile because of a student's region: that region (only that one)
    becomes the stub again, with the error as its message, so the given code around it, which other tasks
    use, is still exported. (source, what was stubbed); the source unchanged when the error is elsewhere, or
    when the cell is longer than any cell export takes (each try compiles it)."""
    if len(source) > MAX_REPAIRED_CHARACTERS or not ANY_STUDENT_BEGIN.search(source):
        return source, ()
    original = source.splitlines()
    lines = list(original)
    stubbed: dict[int, str] = {}  # line of the region's BEGIN -> what was said
    while _syntax_error(lines) is not None:
        error, at = _syntax_error(lines)  # type: ignore[misc]
        region = _student_region(lines, at)
        if region is None or region[0] in stubbed:
            return source, ()  # the error is in given code: the cell stays out, as it is
        begin, end, task, indent = region
        stubbed[begin] = f"{f'Task {task}: ' if task else ''}{error.msg} (line {at} of the cell)"
        stub = f"{indent}raise NotImplementedError({stubbed[begin] + '; fix the syntax error'!r})"
        lines[begin:end - 1] = [stub] + [""] * (end - begin - 2)
    for begin in list(stubbed):  # an error reported past its region can stub an innocent one: give it back
        end = _student_region(lines, begin + 1)[1]  # type: ignore[index]
        trial = lines[:begin] + original[begin:end - 1] + lines[end - 1:]
        if _syntax_error(trial) is None:
            lines = trial
            del stubbed[begin]
    return ("\n".join(lines), tuple(stubbed.values())) if stubbed else (source, ())


def _syntax_error(lines: list[str]) -> tuple[SyntaxError, int] | None:
    """The syntax error of a cell's code as exported, and the line of the cell it names (0 if none)."""
    kept = kept_lines("\n".join(lines))
    try:
        compile("\n".join(lines[number - 1] for number in kept), "cell", "exec")
    except SyntaxError as error:
        return error, kept[error.lineno - 1] if error.lineno and 0 < error.lineno <= len(kept) else 0
    return None


# a student region's start, with its task or (in notebooks nbgrader released) without
ANY_STUDENT_BEGIN = re.compile(r"^\s*### BEGIN YOUR SOLUTION(?: \(Task (?P<task>\d\d\.\d+)\))?\s*$", re.MULTILINE)


def _student_region(lines: list[str], at: int) -> tuple[int, int, str, str] | None:
    """(line of BEGIN, line of END, task or "", indent) of the student region holding line `at` (from 1)."""
    begin: tuple[int, str, str] | None = None
    for number, line in enumerate(lines, start=1):
        if match := ANY_STUDENT_BEGIN.match(line):
            begin = (number, match["task"] or "", line[:len(line) - len(line.lstrip())])
        elif begin and END_STUDENT.match(line):
            if begin[0] < at < number:
                return begin[0], number, begin[1], begin[2]
            begin = None
    return None


def exported_cells(notebook: Any, where: str = "the notebook") -> list[ExportedCell]:
    """Every `#| export` cell. The namespace is the directive's argument (`#| export nn.functional` ->
    "nn.functional"), "" for the top-level `tinytorch`."""
    cells = []
    for index, cell in enumerate(notebook.cells, start=1):
        if cell.cell_type != "code" or "export" not in directives(cell.source):
            continue
        namespace = directives(cell.source)["export"]
        if namespace and not NAMESPACE.fullmatch(namespace):
            raise TitoError(f"{where}, cell {index}: `#| export {namespace}` does not name a namespace like "
                            f"nn or nn.functional; restore the cell's first line")
        cells.append(ExportedCell(index, strip_markers(cell.source), namespace, kept_lines(cell.source), cell.source))
    return cells
