"""`tito build [--check] [--force] [STAGE...]`: solutions/ to the student notebooks in modules/.

A notebook that changed after it was generated (a student's work) is never overwritten without --force,
and a missing one is not written beside another notebook that holds tasks done (a copy or a renamed
notebook, which tito would not grade) without --force either.
With --check nothing is written; the exit status is 1 when any generated notebook is missing or stale.
"""

from __future__ import annotations

from tito import console
from tito.errors import TitoError
from tito.project import Stage, find_root, stages
from tito.project import stage as find_stage
from tito.source import (
    edited_since_generated,
    holds_work,
    missing_beside,
    notebook_text,
    other_notebooks,
    read_notebook,
    student_notebook,
)


def build(names: list[str], *, check: bool = False, force: bool = False) -> int:
    root = find_root()
    chosen = [find_stage(root, name) for name in names] if names else stages(root)
    problems = 0
    for stage in chosen:
        where = stage.relative(stage.notebook)
        text = notebook_text(student_notebook(stage))
        current = stage.notebook.read_text(encoding="utf-8") if stage.notebook.is_file() else None
        if current == text:
            console.info(f"{where} is up to date")
            continue
        others = other_notebooks(stage) if current is None else {}
        if current is None and holds_work(others) and not force:  # the work is there: say so, write nothing
            console.error(missing_beside(stage, others))
            problems += 1
            continue
        if check:
            if current is not None and _holds_student_work(stage):
                console.error(f"{where} has changes made after it was generated (a student's work), so it "
                              f"differs from {stage.relative(stage.source)}; `tito build --force` would replace it")
            else:
                state = "missing" if current is None else "out of date"
                console.error(f"{where} is {state} with {stage.relative(stage.source)}: run `tito build`")
            problems += 1
            continue
        if current is not None and not force and _holds_student_work(stage):
            console.error(f"{where} has changes made after it was generated (a student's work), so it was "
                          f"not overwritten; rerun with --force to replace it")
            problems += 1
            continue
        stage.notebook.parent.mkdir(parents=True, exist_ok=True)
        stage.notebook.write_text(text, encoding="utf-8")
        console.info(f"{'wrote' if current is None else 'updated'} {where}")
    return 1 if problems else 0


def _holds_student_work(stage: Stage) -> bool:
    """True unless the notebook on disk is exactly as it was generated (outputs aside)."""
    try:
        return edited_since_generated(read_notebook(stage))
    except TitoError:
        return True  # unreadable: it may still be someone's work
