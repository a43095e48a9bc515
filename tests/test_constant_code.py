"""Invariant 2 of the threat model: no check is earned by code that ignores its input. For every stage, the
student notebook with every stub replaced by one constant body (always raising one of the errors the suites
expect, returning its first argument, returning None), graded in isolated mode (the reference stands in for
the earlier stages), scores 0: a check that such code passes is a guard (`@check(..., guard=True)`), which
counts only together with its task's checks of values (`engine.guarded`)."""

from __future__ import annotations

import ast
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tito import engine, grading, package, sandbox
from tito.project import Stage, stages
from tito.source import STUB_RAISE

from conftest import stage_numbers
from student import reference_bodies

pytestmark = pytest.mark.slow  # a real grading per constant body: left out by make test-fast

# The errors the suites expect (capture_error/expect_error); NotImplementedError is the stub's own.
ERRORS = ("ValueError", "TypeError", "IndexError", "KeyError", "RuntimeError", "AttributeError",
          "FileNotFoundError")
FIRST_ARGUMENT = "return its first argument"
CONSTANTS = (*(f"raise {error}" for error in ERRORS), FIRST_ARGUMENT, "return None")
RECEIVERS = ("self", "cls", "ctx")  # not an input: a method's object, a Function's context
SEED_KEY = "constant code"
# Cases per check, fewer than grading draws (25 by default): what constant code does hardly depends on the case,
# and fewer cases only make an accidental pass likelier: they hide nothing, at a third of the time.
EXAMPLES = 3
Function = ast.FunctionDef | ast.AsyncFunctionDef


def _first_argument(function: Function) -> str:
    """The first parameter of `function` that is an input (after self, cls or a Function's ctx), or None."""
    names = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    inputs = [name for name in names if name not in RECEIVERS]
    return inputs[0] if inputs else "None"


def constant_body(constant: str, function: Function) -> str:
    if constant == FIRST_ARGUMENT:
        return f"return {_first_argument(function)}"
    if constant.startswith("raise "):
        return f'{constant}("constant")'
    return constant


def _stub_function(tree: ast.AST, line: int) -> Function:
    """The innermost function holding line `line` (every stub sits in one)."""
    holding = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               and node.lineno <= line <= (node.end_lineno or node.lineno)]
    assert holding, f"a stub at line {line} is outside any function"
    return max(holding, key=lambda node: node.lineno)


def rewrite_stubs(text: str, body: Callable[[str, Function, int], list[str]]) -> str:
    """A student notebook's JSON text with each stub line `raise NotImplementedError("Task ...")` replaced,
    at its indentation, by `body(task, function, index)`'s lines: `function` is the stub's function (ast),
    `index` counts the stubs of the notebook from 0."""
    notebook = json.loads(text)
    index = 0
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or not STUB_RAISE.search(source):
            continue
        tree = ast.parse(source)
        lines = source.splitlines()
        for number, line in enumerate(lines):
            match = STUB_RAISE.search(line)
            if match is None:
                continue
            indent = line[:len(line) - len(line.lstrip())]
            replacement = body(match["task"], _stub_function(tree, number + 1), index)
            lines[number] = "\n".join(indent + part for part in replacement)
            index += 1
        cell["source"] = "\n".join(lines)
    return json.dumps(notebook)


def constant_notebook(stage: Stage, constant: str) -> bytes:
    """The stage's untouched student notebook with every stub made `constant`."""
    text = stage.notebook.read_text(encoding="utf-8")
    return rewrite_stubs(text, lambda task, function, index: [constant_body(constant, function)]).encode()


def reference_notebook(stage: Stage) -> bytes:
    """The same notebook with the reference body written into every stub, by the same rewriting (the
    control: what is left of a constant notebook's score is the constant's)."""
    bodies = [body for cell in reference_bodies(stage.source) for _, body in cell]
    text = stage.notebook.read_text(encoding="utf-8")

    def body(task: str, function: Function, index: int) -> list[str]:
        own = bodies[index]
        margin = min(len(line) - len(line.lstrip()) for line in own if line.strip())
        return [line[margin:] for line in own]
    return rewrite_stubs(text, body).encode()


def grade_notebook(root: Path, plan: engine.Plan, notebook: bytes) -> engine.StageResult:
    """Grade a notebook for the plan's stage as official grading does in isolated mode, in a child process."""
    files, notes = grading.package_files(root, plan.stage, {plan.stage.name: notebook}, "isolated")
    assert not notes, notes
    with tempfile.TemporaryDirectory(prefix="tito-constant-") as folder:
        package.write_package(Path(folder), files)
        return engine.grade_stage(plan, Path(folder), isolation="process", limits=sandbox.Limits())


def earned(result: engine.StageResult) -> list[str]:
    return [f"{t.id} [task {t.task}]" for t in result.tests if t.points]


@pytest.mark.parametrize("number", stage_numbers())
def test_code_that_ignores_its_input_scores_nothing(shared_course, tmp_path, number):
    stage = next(s for s in stages(shared_course) if s.number == number)
    plan = engine.make_plan(stage, seed=engine.stage_seed(SEED_KEY, stage), jobs=tmp_path / "jobs",
                            examples=EXAMPLES)
    control = grade_notebook(shared_course, plan, reference_notebook(stage))
    assert control.score == control.max_score > 0, [t.message for t in control.tests if not t.passed]
    found = {}
    for constant in CONSTANTS:
        result = grade_notebook(shared_course, plan, constant_notebook(stage, constant))
        assert not result.notes, f"{constant}: {result.notes}"  # it imported, so every check ran on it
        if earned(result):
            found[constant] = earned(result)
    assert not found, "points earned by constant code (make each such check a guard, guard=True, or give it " \
                      "cases that constant code fails):\n" + "\n".join(f"{c}: {', '.join(p)}" for c, p in found.items())
