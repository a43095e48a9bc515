"""`tito test NN [--reference] [--json] [--seed S]`: export, then grade stage NN with its hidden suite.

The engine is the official grader's (tito.engine); only the box differs: a child process with limits on
the student's own machine. Exit status: 0 at full marks, 1 when points are lost, 2 for a usage error.
"""

from __future__ import annotations

import json
from pathlib import Path

from tito import console, engine, package, sandbox
from tito.errors import TitoError
from tito.project import Stage, find_root, stages
from tito.project import stage as find_stage

FEEDBACK_KEY = "feedback"  # the course key of `tito test` without --seed: its cases differ from official ones


def test(stage: str, *, reference: bool = False, as_json: bool = False, seed: int | None = None,
         timeout: float = 600.0) -> int:
    root = find_root()
    chosen = find_stage(root, stage)
    if reference:  # the reference is exported whole, once: it imports fine past any stage
        exports = package.export(root, stages(root)[-1], reference=True)
        exports = [exported for exported in exports if exported.stage.number <= chosen.number]
        graded = package.package_root(root, True)
    else:  # stages 01..NN exactly, apart from src/, which keeps the later stages the student exported
        graded = package.graded_root(root, chosen)
        exports = package.export(root, chosen, folder=graded)
        _update_src(root, chosen)
    if as_json:
        for exported in exports:
            for sentence in [*exported.notes, *exported.broken_cells]:
                console.warn(sentence)
    else:
        package.report(exports, reference=reference)
    key = FEEDBACK_KEY if seed is None else str(seed)
    limits = sandbox.Limits(wall_seconds=timeout)
    jobs, stage_seed = root / ".tito" / "jobs", engine.stage_seed(key, chosen)
    started = engine.start_early(chosen, graded, seed=stage_seed, jobs=jobs, isolation="process", limits=limits)
    try:  # the box starts while the suite loads
        plan = engine.make_plan(chosen, seed=stage_seed, jobs=jobs)
    except BaseException:
        if started is not None:
            started.close()
        raise
    locate = None if reference else lambda where: package.locate(root, chosen, where)
    result = engine.grade_stage(plan, graded, isolation="process", limits=limits, locate=locate, started=started)
    import_failure = list(result.notes)
    problems = [problem for exported in exports for problem in exported.progress.problems()]
    result.notes = [*(note for exported in exports for note in exported.notes), *problems, *import_failure]
    if not reference:
        _save(root, result)
    if as_json:
        console.write_json(json.dumps(result.as_json()))
    else:
        for note in import_failure:
            console.out.print(note, markup=False, style="bold red")
        current = next(exported for exported in exports if exported.stage == chosen)
        tasks = "" if reference else f"{len(current.progress.done)} of {len(current.tasks)} tasks done"
        broken = sum(len(r.broken_cells) for r in exports)
        _print_table(chosen, result, reference=reference, summary=[tasks, *problems], broken=broken,
                     import_failure=import_failure)
    for fault in (t for t in result.tests if t.fault):
        console.error(f"{fault.message} (a fault of the grader, not of your code: the check's points were "
                      f"given; please report it)")
    return 0 if result.score == result.max_score else 1


def _update_src(root: Path, chosen: Stage) -> None:
    """Export src/ for the notebooks and JupyterLab: 01..NN and every later stage exported there before."""
    try:
        package.export_student(root, chosen)
    except TitoError as error:  # a later stage's notebook: grading NN goes on from its own folder
        console.warn(f"src/tinytorch/ was left as it was: {error}")


def _print_table(stage: Stage, result: engine.StageResult, *, reference: bool, summary: list[str], broken: int,
                 import_failure: list[str]) -> None:
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
    left_out = f"{broken} cell(s) with a syntax error were left out of the package (named above)" if broken else ""
    said = "; ".join(part for part in [verdict, *summary, left_out, *import_failure] if part)
    console.out.print(f"Stage {result.stage} score: {result.score:g}/{result.max_score:g} ({said}). "
                      "This is the hidden suite; the public tests are the ones in the notebook.", markup=False)


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def _save(root: Path, result: engine.StageResult) -> None:
    folder = root / ".tito" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result.stage}.json").write_text(json.dumps(result.as_json(), indent=1), encoding="utf-8")
