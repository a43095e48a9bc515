"""`tito test NN [--reference] [--json] [--seed S]`: export, then grade stage NN with its hidden suite.

The engine is the official grader's (tito.engine); only the box differs: a child process with limits on
the student's own machine. Exit status: 0 at full marks, 1 when points are lost, 2 for a usage error.
"""

from __future__ import annotations

import json
from pathlib import Path

from tito import console, engine, package, sandbox
from tito.project import Stage, find_root, stages
from tito.project import stage as find_stage

FEEDBACK_KEY = "feedback"  # the course key of `tito test` without --seed: its cases differ from official ones


def test(stage: str, *, reference: bool = False, as_json: bool = False, seed: int | None = None,
         timeout: float = 600.0) -> int:
    root = find_root()
    chosen = find_stage(root, stage)
    # the reference is exported whole, once: it imports fine past any stage
    exports = package.export(root, stages(root)[-1] if reference else chosen, reference=reference)
    if reference:
        exports = [exported for exported in exports if exported.stage.number <= chosen.number]
    if as_json:
        for exported in exports:
            for sentence in exported.broken_cells:
                console.warn(sentence)
    else:
        package.report(exports, reference=reference)
    key = FEEDBACK_KEY if seed is None else str(seed)
    plan = engine.make_plan(chosen, seed=engine.stage_seed(key, chosen), jobs=root / ".tito" / "jobs")
    limits = sandbox.Limits(wall_seconds=timeout)
    result = engine.grade_stage(plan, package.package_root(root, reference), isolation="process", limits=limits)
    broken = sum(len(r.broken_cells) for r in exports)
    if not reference:
        _save(root, result)
    if as_json:
        console.write_json(json.dumps(result.as_json()))
    else:
        _print_table(chosen, result, reference=reference, broken=broken)
    for fault in (t for t in result.tests if t.fault):
        console.error(f"{fault.message} (a fault of the grader, not of your code: the check's points were "
                      f"given; please report it)")
    return 0 if result.score == result.max_score else 1


def _print_table(stage: Stage, result: engine.StageResult, *, reference: bool, broken: int) -> None:
    from rich.table import Table

    whose = "the reference solutions" if reference else "your notebooks"
    table = Table(title=f"Hidden suite of {stage.name}, on {whose}", title_justify="left")
    table.add_column("task", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("result")
    for test in result.tests:
        table.add_row(test.task, _escape(test.id), f"{test.points:g}/{test.max_points:g}",
                      "[green]passed[/green]" if test.passed else _escape(test.message))
    console.out.print(table)
    failed = sum(not t.passed for t in result.tests)
    verdict = "full marks" if failed == 0 else f"{failed} of {len(result.tests)} checks failed"
    left_out = f"; {broken} cell(s) with a syntax error were left out of the package (named above)" if broken else ""
    console.out.print(f"Stage {result.stage} score: {result.score:g}/{result.max_score:g} ({verdict}{left_out}). "
                      "This is the hidden suite; the public tests are the ones in the notebook.", markup=False)


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def _save(root: Path, result: engine.StageResult) -> None:
    folder = root / ".tito" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result.stage}.json").write_text(json.dumps(result.as_json(), indent=1), encoding="utf-8")
