"""Each command on good and bad input: the documented sentence, the exit status, and no lost work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import nbformat
import pytest

from conftest import REPO, stage_numbers, tito
from student import edit_cell, fill

pytestmark = pytest.mark.slow  # real subprocesses end to end: left out by make test-fast

FIRST = stage_numbers()[0]


def first_stage(course):
    name = next(p.name for p in sorted((course / "solutions").iterdir()) if p.name.startswith(FIRST))
    return name, course / "modules" / name / f"{name}.ipynb", course / "solutions" / name / f"{name}.py"


def test_committed_notebooks_are_in_sync_with_their_sources():
    run = tito(REPO, "build", "--check")
    assert run.code == 0, run.stderr


def test_build_check_fails_when_a_source_changed(course):
    _, notebook, source = first_stage(course)
    source.write_text(source.read_text() + "\n# %% [markdown]\n# A new closing remark.\n")
    run = tito(course, "build", "--check")
    assert run.code == 1
    assert f"{notebook.relative_to(course)} is out of date" in run.stderr
    assert tito(course, "build").code == 0
    assert "A new closing remark." in notebook.read_text()
    assert tito(course, "build", "--check").code == 0


def test_build_writes_a_missing_notebook(course):
    _, notebook, _ = first_stage(course)
    notebook.unlink()
    assert tito(course, "build", "--check").code == 1
    run = tito(course, "build")
    assert run.code == 0 and notebook.is_file()


def test_build_never_overwrites_a_students_work_without_force(course):
    _, notebook, source = first_stage(course)
    fill(notebook, source)
    students_work = notebook.read_text()
    source.write_text(source.read_text() + "\n# %% [markdown]\n# Changed by a maintainer.\n")
    run = tito(course, "build")
    assert run.code == 1
    assert f"{notebook.relative_to(course)} has changes made after it was generated" in run.stderr
    assert "--force" in run.stderr
    assert notebook.read_text() == students_work
    assert tito(course, "build", "--force").code == 0
    assert "Changed by a maintainer." in notebook.read_text()


def test_build_updates_a_notebook_that_was_only_run(course):
    """Outputs and execution counts are not a student's work: the notebook may be regenerated."""
    _, notebook, source = first_stage(course)
    document = nbformat.read(notebook, as_version=4)
    code = next(cell for cell in document.cells if cell.cell_type == "code")
    code.execution_count = 3
    code.outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    nbformat.write(document, notebook)
    source.write_text(source.read_text() + "\n# %% [markdown]\n# Another remark.\n")
    assert tito(course, "build").code == 0
    assert "Another remark." in notebook.read_text()


def test_unknown_stage_is_a_usage_error(course):
    for command in (["test", "99"], ["export", "99"], ["test", "tensor-ish"]):
        run = tito(course, *command)
        assert run.code == 2
        assert "unknown stage" in run.stderr and "choose one of" in run.stderr
        assert "Traceback" not in run.stderr


def test_missing_notebook_is_a_usage_error(course):
    _, notebook, _ = first_stage(course)
    notebook.unlink()
    run = tito(course, "test", FIRST, "--json")
    assert run.code == 2 and run.stdout == ""
    assert f"{notebook.relative_to(course)} is missing: run `tito build`" in run.stderr


def test_a_file_that_is_not_a_notebook_is_a_usage_error_and_is_left_alone(course):
    _, notebook, _ = first_stage(course)
    notebook.write_text("print('this is not a notebook')\n")
    for command in (["test", FIRST], ["export", FIRST], ["build"]):
        run = tito(course, *command)
        assert run.code in (1, 2) and "Traceback" not in run.stderr
        assert notebook.read_text() == "print('this is not a notebook')\n"
    run = tito(course, "test", FIRST)
    assert run.code == 2
    assert "is not a readable Jupyter notebook" in run.stderr


def test_syntax_error_names_the_notebook_and_cell_and_keeps_the_package_importable(course):
    name, notebook, source = first_stage(course)
    fill(notebook, source)
    document = nbformat.read(notebook, as_version=4)
    # break the last exported cell: a learner's half-typed line
    index = max(i for i, cell in enumerate(document.cells)
                if cell.cell_type == "code" and cell.source.startswith("#| export"))
    edit_cell(notebook, index, lambda text: text + "\nresult = (1 +\n")
    run = tito(course, "export", FIRST)
    assert run.code == 1
    assert f"modules/{name}/{name}.ipynb, cell {index + 1} (the code cell starting" in run.stderr
    assert "left out of the package" in run.stderr
    imported = subprocess.run([sys.executable, "-c", "import tinytorch"], cwd=course, capture_output=True, text=True,
                              env={"PYTHONPATH": str(course / "src"), "PATH": "/usr/bin:/bin"})
    assert imported.returncode == 0, imported.stderr
    graded = tito(course, "test", FIRST, "--json")
    assert graded.code == 1
    result = graded.json()
    assert 0 < result["score"] < result["max_score"], "the cells without the error are still graded"


def test_json_output_is_exactly_one_object_even_when_student_code_prints(course):
    _, notebook, source = first_stage(course)
    fill(notebook, source)
    document = nbformat.read(notebook, as_version=4)
    index = next(i for i, cell in enumerate(document.cells)
                 if cell.cell_type == "code" and cell.source.startswith("#| export"))
    noise = ("import sys, warnings\nprint('debug output from the student')\n"
             "print('a warning on stderr', file=sys.stderr)\nwarnings.warn('a student warning')\n")
    edit_cell(notebook, index, lambda text: text + "\n" + noise)
    run = tito(course, "test", FIRST, "--json")
    result = json.loads(run.stdout)
    assert set(result) == {"stage", "score", "max_score", "seed", "notes", "tests"}
    assert result["stage"] == FIRST
    for test in result["tests"]:
        assert {"id", "points", "max_points", "passed", "message"} <= set(test)
    assert run.code == 0 and result["score"] == result["max_score"], "printed warnings cost points"


def test_human_output_shows_points_total_and_one_sentence_per_failure(shared_course):
    run = tito(shared_course, "test", FIRST)
    assert run.code == 1
    assert f"Stage {FIRST} score: 0/" in run.stdout
    assert f"Task {FIRST}." in run.stdout and "is not implemented yet" in run.stdout
    assert "Traceback" not in run.stdout + run.stderr


def test_status_lists_every_stage(shared_course):
    run = tito(shared_course, "status")
    assert run.code == 0
    for stage in stage_numbers():
        assert f"{stage}_" in run.stdout


def test_status_marks_a_last_score_stale_once_a_notebook_it_graded_changed(course):
    assert tito(course, "test", FIRST).code == 1
    fresh = tito(course, "status")
    assert fresh.code == 0 and "0/" in fresh.stdout and "stale" not in fresh.stdout
    notebook = next((course / "modules").glob(f"{FIRST}_*/*.ipynb"))
    later = time.time() + 5
    os.utime(notebook, (later, later))
    stale = tito(course, "status")
    assert stale.code == 0 and "stale" in stale.stdout.replace("\n", " ")


def test_export_without_a_stage_is_a_usage_error(course):
    run = tito(course, "export")
    assert run.code == 2 and "say which stage" in run.stderr


def test_reference_export_is_importable_from_build_reference(course):
    assert tito(course, "export", "--reference").code == 0
    imported = subprocess.run([sys.executable, "-c", "import tinytorch, sys; print(tinytorch.__file__)"],
                              cwd=course, capture_output=True, text=True,
                              env={"PYTHONPATH": str(course / "build" / "reference"), "PATH": "/usr/bin:/bin"})
    assert imported.returncode == 0, imported.stderr
    assert "build/reference/tinytorch" in imported.stdout


def test_export_names_the_stubs_that_are_left_even_when_a_task_has_several(course):
    name = next(p.name for p in sorted((course / "solutions").iterdir()) if p.name.startswith("02"))
    notebook = course / "modules" / name / f"{name}.ipynb"
    document = nbformat.read(notebook, as_version=4)
    index = next(i for i, cell in enumerate(document.cells) if 'Task 02.7: Add.backward' in cell.source)
    fill_one = document.cells[index].source.replace(
        'raise NotImplementedError("Task 02.7: Add.backward is not implemented yet")', "return None, None")
    edit_cell(notebook, index, lambda text: fill_one)
    run = tito(course, "export", "02")
    assert "02.7 Sub.backward" in run.stderr and "02.7 Add.backward" not in run.stderr


def test_bad_numbers_are_usage_errors(course):
    run = tito(course, "test", FIRST, "--timeout", "-1")
    assert run.code == 2 and "not a positive number of seconds" in run.stderr


@pytest.mark.parametrize("after", [0.15, 0.6, 1.5])
def test_ctrl_c_at_any_moment_is_one_line_and_status_130(course, after):
    """SIGINT while Python starts, while tito imports and exports, or while the suite runs: one line, no traceback."""
    import os
    import signal
    import time

    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    child = subprocess.Popen([sys.executable, "-m", "tito", "test", "02", "--reference"], cwd=course, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    time.sleep(after)
    child.send_signal(signal.SIGINT)
    _, stderr = child.communicate(timeout=120)
    if child.returncode == 0:  # it finished first: nothing to interrupt
        return
    # 130 from tito, or death by SIGINT itself (-2 here) when CPython re-raises it at exit: a shell reports 130 for both
    assert child.returncode in (130, -2), stderr
    assert "Traceback" not in stderr and stderr.strip().splitlines()[-1] == "tito: interrupted", stderr
