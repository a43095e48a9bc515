"""`tito status`: one row per stage: notebook present, tasks done out of total, problems, last score."""

from __future__ import annotations

import json
from pathlib import Path

from tito import console
from tito.errors import TitoError
from tito.project import Stage, find_root, stages
from tito.source import check_other_notebooks, missing_beside, other_notebooks, progress, read_notebook, source_tasks


def status() -> int:
    from rich.table import Table

    root = find_root()
    table = Table(title="TinyTorch progress", title_justify="left")
    for column in ("stage", "notebook", "tasks done", "last score"):
        table.add_column(column, no_wrap=True)
    table.add_column("problems")
    for stage in stages(root):
        notebook, done, problems = _row(stage)
        saved = root / ".tito" / "results" / f"{stage.number}.json"
        score = "not tested yet"
        if saved.is_file():
            last = json.loads(saved.read_text(encoding="utf-8"))
            score = f"{last['score']:g}/{last['max_score']:g}"
            changed = _changed_since(root, stage, saved.stat().st_mtime)
            if changed:
                score += " stale"
                problems.append(f"the last score is stale: {changed} changed after it; "
                                f"run `tito test {stage.number}` again")
        table.add_row(stage.name, notebook, done, score, "; ".join(problems))
    console.out.print(table)
    return 0


def _changed_since(root: Path, last: Stage, when: float) -> str:
    """The first notebook of stages 01..last (the package graded) changed after `when`, as "01_tensor", or ""."""
    for stage in stages(root):
        if stage.number > last.number:
            break
        if stage.notebook.is_file() and stage.notebook.stat().st_mtime > when:
            return stage.name if stage.number != last.number else "the notebook"
    return ""


def _row(stage: Stage) -> tuple[str, str, list[str]]:
    """(notebook present, "12/14, 1 broken, 1 missing", problems) of one stage."""
    if not stage.notebook.exists():
        others = other_notebooks(stage)
        return "missing", "-", [missing_beside(stage, others)] if others else []
    try:
        found = progress(stage, read_notebook(stage))
    except TitoError as error:
        return "unreadable", "-", [str(error)]
    counts = [f"{len(found.done)}/{len(source_tasks(stage))}"]
    counts += [f"{len(found.broken)} broken"] if found.broken else []
    counts += [f"{len(found.missing)} missing"] if found.missing else []
    problems = found.problems()
    try:
        problems += [note for note in [check_other_notebooks(stage)] if note]
    except TitoError as error:
        problems.append(str(error))
    return "present", ", ".join(counts), problems
