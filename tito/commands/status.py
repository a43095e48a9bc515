"""`tito status`: one row per stage: notebook present, tasks done out of total, last score."""

from __future__ import annotations

import json

from tito import console
from tito.errors import TitoError
from tito.project import find_root, stages
from tito.source import read_notebook, source_tasks, stubbed_tasks


def status() -> int:
    from rich.table import Table

    root = find_root()
    table = Table(title="TinyTorch progress", title_justify="left")
    for column in ("stage", "notebook", "tasks done", "last score"):
        table.add_column(column, no_wrap=True)
    for stage in stages(root):
        total = source_tasks(stage)
        try:
            stubs = stubbed_tasks(read_notebook(stage))
            notebook, done = "present", f"{sum(t.id not in stubs for t in total)}/{len(total)}"
        except TitoError:
            notebook = "missing" if not stage.notebook.exists() else "unreadable"
            done = "-"
        saved = root / ".tito" / "results" / f"{stage.number}.json"
        score = "not tested yet"
        if saved.is_file():
            last = json.loads(saved.read_text(encoding="utf-8"))
            score = f"{last['score']:g}/{last['max_score']:g}"
        table.add_row(stage.name, notebook, done, score)
    console.out.print(table)
    return 0
