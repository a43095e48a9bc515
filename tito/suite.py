"""A stage's hidden suite, read in the trusted process: its checks, and the compute slice that is the
only part of it shipped beside the package under test."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tito.errors import TitoError
from tito.project import Stage


def shipped_checklib() -> ModuleType:
    """tito/shipped/checklib.py, also importable as `checklib`, the name the suites import it by (in
    the box it is a top-level module of the job's lib/ folder)."""
    from tito.shipped import checklib

    sys.modules.setdefault("checklib", checklib)
    return checklib


def load_checks(stage: Stage) -> list:
    """The checks of a stage's suite, in file order. Importing a suite runs none of them."""
    if not stage.suite.is_file():
        raise TitoError(f"stage {stage.name} has no hidden suite ({stage.relative(stage.suite)} is missing)")
    checklib = shipped_checklib()

    spec = importlib.util.spec_from_file_location(f"_tito_suite_{stage.name}", stage.suite)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    checks = []
    for name, value in vars(module).items():
        if isinstance(value, checklib.Check) and name == value.name:
            checks.append(value)
        elif isinstance(value, checklib.CheckFamily) and value.checks and name == value.checks[0].compute.__name__:
            checks += value.checks
    if not checks:
        raise TitoError(f"{stage.relative(stage.suite)} defines no checks")
    valued = {check.task for check in checks if not check.guard}
    alone = sorted({check.task for check in checks if check.guard} - valued)
    if alone:  # a guard counts only beside its task's checks of values (docs/security.md, invariant 2)
        raise TitoError(f"{stage.relative(stage.suite)}: task {', '.join(alone)} has only guard checks; "
                        f"give it a check of values")
    return checks


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
    # a timed check's yardstick runs in a box too (without the package): `@check(..., timed=Timed(yardstick, ...))`
    yardsticks = {name for node in tree.body for d in getattr(node, "decorator_list", []) if _is_check_decorator(d)
                  for keyword in getattr(d, "keywords", []) if keyword.arg == "timed" for name in _used_names(keyword)}
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
    needed |= yardsticks
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
