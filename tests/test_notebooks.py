"""The student notebooks run in a real Jupyter kernel: once the stubs are filled every cell runs, public
tests included; untouched, the first public test stops on the stub and names its task."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from conftest import REPO, stage_numbers, tito
from student import fill

pytestmark = pytest.mark.slow  # real subprocesses end to end: left out by make test-fast


def _notebooks(course):
    for stage in stage_numbers():
        name = next(p.name for p in (course / "solutions").iterdir() if p.name.startswith(stage))
        yield stage, course / "modules" / name / f"{name}.ipynb", course / "solutions" / name / f"{name}.py"


def _execute(path, monkeypatch, course):
    monkeypatch.setenv("PYTHONPATH", str(course / "src"))  # the kernel imports this copy's exported package
    monkeypatch.setenv("TINYTORCH_DATA", str(REPO / "datasets"))  # the copy has no datasets/ for 08's loaders to find
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    return notebook


def test_filled_notebooks_run_top_to_bottom_in_a_kernel(course, monkeypatch):
    for stage, notebook, source in _notebooks(course):
        fill(notebook, source)
        assert tito(course, "export", stage).code == 0
        executed = _execute(notebook, monkeypatch, course)
        errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert errors == []


def test_untouched_notebook_stops_at_a_stub_naming_its_task(course, monkeypatch):
    stage, notebook, _ = next(_notebooks(course))
    with pytest.raises(CellExecutionError) as failure:
        _execute(notebook, monkeypatch, course)
    assert "NotImplementedError" in str(failure.value)
    assert f"Task {stage}." in str(failure.value)
