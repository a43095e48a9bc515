"""`tito test NN [--reference] [--json]`: export, then grade stage NN with its hidden suite.

Exit status: 0 at full marks, 1 when points are lost, 2 for a usage or set-up error.
"""

from __future__ import annotations

import json

from rich.table import Table

from tito import console
from tito.commands.export import export, package_root, report
from tito.project import find_root, stage as find_stage
from tito.suite import StageResult, run_feedback


def run(args) -> int:
    root = find_root()
    stage = find_stage(root, args.stage)
    if not args.json:
        console.info(f"exporting stages 01..{stage.number} from "
                     f"{'solutions/ (reference)' if args.reference else 'your notebooks in modules/'}")
    exports = export(root, stage, reference=args.reference)
    if not args.json:
        report(exports, reference=args.reference)
    else:
        for result in exports:
            for sentence in result.broken_cells:
                console.warn(sentence)
    result = run_feedback(stage, package_root(root, args.reference), timeout=args.timeout)
    if not args.reference:
        _save(root, result)
    if args.json:
        console.write_json(json.dumps(result.as_json()))
    else:
        _print_table(stage.name, result, reference=args.reference)
    return 0 if result.score == result.max_score else 1


def _print_table(name: str, result: StageResult, *, reference: bool) -> None:
    whose = "the reference solutions" if reference else "your notebooks"
    table = Table(title=f"Hidden suite of {name}, on {whose}", title_justify="left")
    table.add_column("task", no_wrap=True)
    table.add_column("test", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("result")
    for test in result.tests:
        table.add_row(test.task, test.id, f"{test.points:g}/{test.max_points:g}",
                      "[green]passed[/green]" if test.passed else _escape(test.message))
    console.out.print(table)
    failed = sum(not t.passed for t in result.tests)
    verdict = "full marks" if failed == 0 else f"{failed} of {len(result.tests)} tests failed"
    console.out.print(f"Stage {result.stage} score: {result.score:g}/{result.max_score:g} ({verdict}). "
                      "This is the hidden suite; the public tests are the ones in the notebook.", markup=False)


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def _save(root, result: StageResult) -> None:
    folder = root / ".tito" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result.stage}.json").write_text(json.dumps(result.as_json(), indent=1), encoding="utf-8")
