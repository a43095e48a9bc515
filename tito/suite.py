"""A stage's hidden suite: its checks (read in this process, never run here) and the feedback run
(pytest in a subprocess with a timeout, against one package)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from tito.errors import TitoError
from tito.project import Stage


@dataclass
class CheckResult:
    id: str
    task: str
    points: float
    max_points: float
    passed: bool
    message: str


@dataclass
class StageResult:
    stage: str
    score: float
    max_score: float
    tests: list[CheckResult]

    def as_json(self) -> dict:
        return asdict(self)


def load_checks(stage: Stage) -> list:
    """The checks of a stage's suite, in file order. Importing a suite runs none of them."""
    if not stage.suite.is_file():
        raise TitoError(f"stage {stage.name} has no hidden suite ({stage.relative(stage.suite)} is missing)")
    autograder = str(stage.suite.parent)
    if autograder not in sys.path:
        sys.path.insert(0, autograder)
    import checklib

    spec = importlib.util.spec_from_file_location(f"_tito_suite_{stage.name}", stage.suite)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    checks = [value for name, value in vars(module).items()
              if isinstance(value, checklib.Check) and name == value.name]
    if not checks:
        raise TitoError(f"{stage.relative(stage.suite)} defines no checks")
    return checks


def run_feedback(stage: Stage, package_root: Path, timeout: float) -> StageResult:
    """Run the suite with pytest against the `tinytorch` found in `package_root`, in a subprocess."""
    checks = load_checks(stage)
    with tempfile.TemporaryDirectory(prefix="tito-test-") as scratch:
        report = Path(scratch) / "report.jsonl"
        env = {**os.environ, "PYTHONPATH": str(package_root), "PYTHONDONTWRITEBYTECODE": "1"}
        command = [sys.executable, "-m", "pytest", str(stage.suite), "-q", "-p", "no:cacheprovider",
                   "--rootdir", str(stage.suite.parent), "--tito-report", str(report)]
        process = subprocess.Popen(command, cwd=scratch, env=env, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            process.wait(timeout=timeout)
            stopped = None if process.returncode in (0, 1) else f"the test run stopped early (exit code {process.returncode})"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            stopped = f"the test run was stopped after {timeout:g} s"
        finished = {}
        if report.exists():
            for line in report.read_text(encoding="utf-8").splitlines():
                entry = json.loads(line)
                finished[entry["id"]] = entry
    results = []
    for check in checks:
        entry = finished.get(check.name)
        if entry is None:
            results.append(CheckResult(check.name, check.task, 0, check.points, False,
                                       f"{check.doc}: did not run ({stopped or 'not reported'})"))
        else:
            passed = bool(entry["passed"])
            results.append(CheckResult(check.name, check.task, check.points if passed else 0, check.points,
                                       passed, entry["message"]))
    return StageResult(stage.number, sum(r.points for r in results), sum(c.points for c in checks), results)


def _is_check_decorator(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Name) and target.id == "check"


def _is_judge_decorator(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in ("expected", "verdict")


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _used_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def compute_slice(suite: Path) -> str:
    """The part of a suite that the package under test may see: every check's `compute` function (its
    `@check(...)` decorator removed) and the module-level code it needs, transitively. Strategies,
    descriptions, `expected` and `verdict` functions, and helpers only they use, are left out."""
    tree = ast.parse(suite.read_text(encoding="utf-8"))
    computes, others = [], []
    for node in tree.body:
        decorators = getattr(node, "decorator_list", [])
        if any(_is_judge_decorator(d) for d in decorators):
            continue
        if isinstance(node, ast.FunctionDef) and any(_is_check_decorator(d) for d in decorators):
            node.decorator_list = []
            computes.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign,
                               ast.AnnAssign)):
            others.append(node)
    needed: set[str] = set().union(*(_used_names(node) for node in computes)) if computes else set()
    kept: list[ast.stmt] = []
    changed = True
    while changed:
        changed = False
        for node in others:
            if node not in kept and _bound_names(node) & needed:
                kept.append(node)
                needed |= _used_names(node)
                changed = True
    body = [node for node in tree.body if node in kept or node in computes]
    return ast.unparse(ast.Module(body=body, type_ignores=[]))
