"""What a student meets between JupyterLab and `tito`, in-process on a copy of the course: a duplicated or
renamed notebook, a later module in progress, a broken or deleted solution cell, a stray line that raises
on import. Each gets one sentence naming the file and cell, and no work is lost or graded as 0 silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from tito import engine
from tito.main import main
from tito.project import stages
from tito.source import BEGIN_STUDENT, directives, source_tasks, task_regions

from conftest import copy_course
from student import edit_cell, fill


@pytest.fixture(scope="session")
def drawn_jobs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cases of stage 01's feedback plan, drawn once for every copy of the course here."""
    template = copy_course(tmp_path_factory.mktemp("drawn") / "course")
    first = stages(template)[0]
    engine.make_plan(first, seed=engine.stage_seed("feedback", first), jobs=template / ".tito" / "jobs")
    return template / ".tito" / "jobs"


@pytest.fixture
def course(tmp_path: Path, drawn_jobs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = copy_course(tmp_path / "course")
    shutil.copytree(drawn_jobs, root / ".tito" / "jobs")
    monkeypatch.chdir(root)
    return root


def tito(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """`tito ARGS` in this process: (exit status, stdout, stderr with its lines joined by spaces)."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, " ".join(captured.err.split())


def flat(text: str) -> str:
    """Printed text as one line: table borders and wrapping removed (a wrapped cell's other columns are blank)."""
    return " ".join(text.replace("│", " ").split())


def first_two(course: Path):
    return stages(course)[:2]


def module_file(course: Path, folder: Path, stage_name: str) -> Path:
    entry = next(e for e in json.loads((folder / ".export.json").read_text())["stages"] if e["stage"] == stage_name)
    return folder / "tinytorch" / (entry["module"].replace(".", "/") + ".py")


# --- 1. a duplicated or renamed notebook -------------------------------------------------------------


def test_a_copy_with_more_work_stops_export_test_and_shows_in_status(course, capsys):
    one, _ = first_two(course)
    copy = one.notebook.with_name(f"{one.name}-Copy1.ipynb")
    shutil.copy2(one.notebook, copy)
    fill(copy, one.source, tasks={task.id for task in source_tasks(one)[:2]})
    before = {path: path.read_bytes() for path in (one.notebook, copy)}
    total = len(source_tasks(one))
    for command in (["export", one.number], ["test", one.number, "--json"]):
        code, out, err = tito(capsys, *command)
        assert code == 2 and out == ""
        assert f"modules/{one.name}/{one.name}-Copy1.ipynb (2 of {total} tasks done) has more tasks done than " \
               f"modules/{one.name}/{one.name}.ipynb (0 of {total}), the notebook tito grades" in err
        assert f"copy your work into modules/{one.name}/{one.name}.ipynb" in err
    code, out, _ = tito(capsys, "status")
    assert code == 0 and f"{one.name}-Copy1.ipynb (2 of {total} tasks done) has more tasks done" in flat(out)
    assert {path: path.read_bytes() for path in before} == before


def test_a_renamed_notebook_is_named_and_build_writes_no_blank_one_beside_it_without_force(course, capsys):
    one, _ = first_two(course)
    renamed = one.notebook.with_name("my_tensor.ipynb")
    fill(one.notebook, one.source, tasks={source_tasks(one)[0].id})
    one.notebook.rename(renamed)
    work = renamed.read_bytes()
    code, _, err = tito(capsys, "export", one.number)
    assert code == 2
    assert f"modules/{one.name}/{one.name}.ipynb is missing, and its folder holds modules/{one.name}/my_tensor.ipynb " \
           f"(1 of {len(source_tasks(one))} tasks done)" in err
    assert "rename or copy your work to that name" in err and "run `tito build` to generate it" not in err
    code, _, err = tito(capsys, "build", one.number)
    assert code == 1 and not one.notebook.exists()
    assert f"`tito build --force {one.number}` writes a fresh blank notebook" in err
    code, _, _ = tito(capsys, "build", "--force", one.number)
    assert code == 0 and one.notebook.is_file() and renamed.read_bytes() == work
    code, _, err = tito(capsys, "export", one.number)  # now the blank one would be graded: still refused
    assert code == 2 and "my_tensor.ipynb (1 of" in err and "has more tasks done than" in err


def test_other_notebooks_with_no_more_work_are_one_warning_and_checkpoints_are_ignored(course, capsys):
    one, _ = first_two(course)
    fill(one.notebook, one.source, tasks={source_tasks(one)[0].id})
    shutil.copy2(one.notebook, one.notebook.with_name("scratch.ipynb"))
    checkpoints = one.notebook.parent / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy2(one.notebook, checkpoints / f"{one.name}-checkpoint.ipynb")
    fill(checkpoints / f"{one.name}-checkpoint.ipynb", one.source)
    code, _, err = tito(capsys, "export", one.number)
    assert code == 0
    assert f"warning: tito grades modules/{one.name}/{one.name}.ipynb (1 tasks done) and ignores " \
           f"modules/{one.name}/scratch.ipynb (1 of" in err
    assert err.count("warning:") == 1 and "checkpoint" not in err


def test_build_still_writes_a_missing_notebook_beside_a_blank_copy(course, capsys):
    one, _ = first_two(course)
    one.notebook.rename(one.notebook.with_name(f"{one.name}-Copy1.ipynb"))
    code, _, err = tito(capsys, "test", one.number)
    assert code == 2 and f"(`tito build {one.number}` writes a fresh blank notebook there instead)" in err
    assert tito(capsys, "build", one.number)[0] == 0 and one.notebook.is_file()


# --- 2. grading an earlier stage keeps the later ones ------------------------------------------------


def test_testing_an_earlier_stage_keeps_later_stages_in_src_and_grades_exactly_its_own(course, capsys):
    one, two = first_two(course)
    fill(one.notebook, one.source, tasks={source_tasks(one)[0].id})
    document = nbformat.read(two.notebook, as_version=4)
    last = max(i for i, cell in enumerate(document.cells)
               if cell.cell_type == "code" and cell.source.startswith("#| export"))
    edit_cell(two.notebook, last, lambda text: text + "\nraise RuntimeError('left-over test line')\n")
    assert tito(capsys, "export", two.number)[0] == 0
    later = module_file(course, course / "src", two.name)
    assert later.is_file()

    code, out, _ = tito(capsys, "test", one.number, "--json")
    result = json.loads(out)
    assert later.is_file(), "grading 01 removed the module of 02 from src/"
    graded = course / ".tito" / "graded" / one.number
    assert module_file(course, graded, one.name).is_file() and not (graded / later.relative_to(course / "src")).exists()
    assert result["score"] > 0 and not any("could not be imported" in t["message"] for t in result["tests"])

    # both folders keep their cache: nothing is written again until a notebook changes
    for folder in (graded, course / "src"):
        (folder / "tinytorch" / "sentinel").write_text("")
    tito(capsys, "test", one.number, "--json")
    assert (graded / "tinytorch" / "sentinel").exists() and (course / "src" / "tinytorch" / "sentinel").exists()
    edit_cell(one.notebook, 0, lambda text: text + "\n")
    code, _, err = tito(capsys, "export", one.number)
    assert code == 0 and f"kept the later stages exported before ({two.name})" in err
    assert later.is_file() and not (course / "src" / "tinytorch" / "sentinel").exists()
    assert (graded / "tinytorch" / "sentinel").exists(), "export touched the graded folder"


# --- 3. a broken or deleted solution cell is not a done task -----------------------------------------


def _single_task_cells(notebook: Path, counts: dict[str, int]) -> list[tuple[int, str]]:
    """(index, task) of the exported cells that hold every region of one task and nothing else."""
    found = []
    for index, cell in enumerate(nbformat.read(notebook, as_version=4).cells):
        if cell.cell_type == "code" and "export" in directives(cell.source):
            held = [m["task"] for line in cell.source.splitlines() if (m := BEGIN_STUDENT.match(line))]
            if len(set(held)) == 1 and len(held) == counts[held[0]]:
                found.append((index, held[0]))
    return found


def test_a_task_in_a_cell_with_a_syntax_error_or_a_deleted_region_is_not_done_and_is_named(course, capsys):
    one, _ = first_two(course)
    tasks = {task.id: task.name for task in source_tasks(one)}
    (broken, broken_task), (deleted, deleted_task) = _single_task_cells(one.notebook, task_regions(one))[-2:]
    assert broken < deleted
    fill(one.notebook, one.source)
    edit_cell(one.notebook, broken, lambda text: text + "\nresult = (1 +\n")
    document = nbformat.read(one.notebook, as_version=4)
    del document.cells[deleted]
    nbformat.write(document, one.notebook)
    said_broken = f"{broken_task} {tasks[broken_task]} is in a cell with a syntax error (cell {broken + 1})"
    regions = task_regions(one)[deleted_task]
    said_missing = f"{deleted_task} {tasks[deleted_task]}: " \
                   f"{'its solution region is' if regions == 1 else f'its {regions} solution regions are'} missing"
    done = f"{len(tasks) - 2} of {len(tasks)} tasks done"

    code, _, err = tito(capsys, "export", one.number)
    assert code == 1 and f"exported {one.name}: {done}; {said_broken}; {said_missing}" in err

    code, out, _ = tito(capsys, "test", one.number)
    printed = flat(out)
    score_line = printed[printed.index(f"Stage {one.number} score:"):]
    assert done in score_line and said_broken in score_line and said_missing in score_line

    code, out, _ = tito(capsys, "test", one.number, "--json")
    notes = json.loads(out)["notes"]
    assert said_broken in notes and any(note.startswith(said_missing) for note in notes)

    code, out, _ = tito(capsys, "status")
    row = next(line for line in out.splitlines() if one.name in line)
    assert f"{len(tasks) - 2}/{len(tasks)}, 1 broken, 1 missing" in row
    assert said_broken in flat(out) and said_missing in flat(out)


# --- 4. a line that raises on import is traced back to its cell --------------------------------------


def test_a_syntax_error_in_one_task_costs_that_task_and_not_the_given_code_of_its_cell(course, capsys):
    """02.8's region shares its cell with given code that 02.1 and 02.4 use: a half-typed line in it costs
    02.8 (and what builds on it), not them; the student is told which task's code was left out."""
    tensor, autograd = first_two(course)
    fill(tensor.notebook, tensor.source)
    fill(autograd.notebook, autograd.source)
    document = nbformat.read(autograd.notebook, as_version=4)
    index = next(i for i, cell in enumerate(document.cells) if "### BEGIN YOUR SOLUTION (Task 02.8)" in cell.source)
    edit_cell(autograd.notebook, index, lambda text: text.replace(
        "### BEGIN YOUR SOLUTION (Task 02.8)\n", "### BEGIN YOUR SOLUTION (Task 02.8)\n        a, b = (ctx.saved\n", 1))
    code, out, err = tito(capsys, "test", "02", "--json")
    result = json.loads(out)
    lost = {t["task"] for t in result["tests"] if not t["passed"]}
    assert "02.8" in lost and not lost & {"02.1", "02.4"}, lost
    assert "02.8 Mul.backward is in a cell with a syntax error" in " ".join(result["notes"])
    assert "Task 02.8: '(' was never closed" in flat(err) and "the rest of the cell exported" in flat(err)
    eight = next(t for t in result["tests"] if t["task"] == "02.8")
    assert "was never closed" in eight["message"] and "fix the syntax error" in eight["message"]


def test_an_error_at_import_names_the_notebook_cell_and_line_once_above_the_table_and_in_the_score(course, capsys):
    one, _ = first_two(course)
    document = nbformat.read(one.notebook, as_version=4)
    document.cells.append(nbformat.v4.new_code_cell("#| export\n\n# a leftover test line\nnp.sum(np.ones(3), axis=5)"))
    nbformat.write(document, one.notebook)
    cell = len(document.cells)
    place = (f"raised in modules/{one.name}/{one.name}.ipynb, cell {cell} (the code cell starting "
             f"`# a leftover test line`), line 4 of the cell")

    code, out, _ = tito(capsys, "test", one.number, "--json")
    result = json.loads(out)
    message = result["tests"][0]["message"]
    assert message.startswith("your package could not be imported: AxisError: axis 5 is out of bounds")
    assert message.endswith(place) and len(message) < 300
    assert result["notes"][-1] == message

    code, out, _ = tito(capsys, "test", one.number)
    printed = flat(out)
    assert code == 1 and printed.index(place) < printed.index(f"Hidden suite of {one.name}")
    assert place in printed[printed.index(f"Stage {one.number} score:"):]
