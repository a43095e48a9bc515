"""`tito grade SUBMISSIONS`: official grades for a whole class, decided by a trusted judge.

Each submission and stage runs in a sandbox (tito.sandbox) that only computes outputs on cases drawn
here; this process judges them (tito.judge) and writes grades.csv, one feedback file per student,
summary.md and results.json into the output folder.
"""

from __future__ import annotations

import csv
import json
import os
import queue
import secrets
import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
from rich.progress import Progress

from tito import console, sandbox, submissions
from tito.commands.export import stage_module
from tito.errors import TitoError
from tito.judge import Plan, judge, make_plan, prepare_job, read_outputs
from tito.project import Stage, find_root, stage as find_stage, stages, stages_up_to
from tito.source import read_source
from tito.suite import CheckResult


@dataclass
class Grade:
    student: str
    stage: str
    mode: str  # "cumulative" or "isolated"
    score: float
    max_score: float
    tests: list[CheckResult]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _package_for(root: Path, stage: Stage, notebooks: dict[str, bytes], mode: str) -> tuple[dict[str, str], list[str]]:
    """The package files for grading `stage`: the student's notebooks, or in isolated mode the reference
    for every earlier stage. Returns (files, notes for the feedback)."""
    files, notes = {}, []
    for earlier in stages_up_to(root, stage):
        if mode == "isolated" and earlier != stage:
            notebook, origin, reference = read_source(earlier), earlier.relative(earlier.source), True
        else:
            data = notebooks.get(earlier.name)
            if data is None:
                notes.append(f"no notebook for {earlier.name} was submitted")
                continue
            try:
                notebook = nbformat.reads(data.decode("utf-8", errors="replace"), as_version=4)
                if not isinstance(notebook.get("cells"), list):
                    raise ValueError("no cells")
            except Exception:  # any malformed file is the student's, not the grader's, problem
                notes.append(f"the {earlier.name} notebook is not a readable Jupyter notebook")
                continue
            origin, reference = f"{earlier.name}.ipynb", False
        try:
            result, path, code = stage_module(earlier, notebook, origin, reference=reference)
        except TitoError as error:
            notes.append(str(error))
            continue
        notes += result.broken_cells
        files[path] = code
    return files, notes


# CPython 3.11 can fail ("AST constructor recursion depth mismatch") when threads compile at once
_COMPILING = threading.Lock()


def grade_submission(root: Path, plan: Plan, student: str, notebooks: dict[str, bytes], mode: str, base: Path,
               hidden: list[Path], limits: sandbox.Limits, level: str, slots: queue.Queue) -> Grade:
    started = time.monotonic()
    with _COMPILING:
        files, notes = _package_for(root, plan.stage, notebooks, mode)
    if plan.stage.name not in notebooks:
        tests = [CheckResult(c.name, c.task, 0, c.points, False, "no submission for this stage") for c in plan.checks]
        return Grade(student, plan.stage.number, mode, 0, plan.max_score, tests, notes)
    job = Path(tempfile.mkdtemp(prefix="job-", dir=base))
    os.chmod(job, 0o755)
    slot = slots.get()
    try:
        with _COMPILING:
            prepare_job(plan, job, files)
        outcome = sandbox.run(job, job / "lib" / "runner.py", hidden, limits, slot, level)
        stopped = f"stopped after {limits.wall_seconds:g} s" if outcome.timed_out else None
        records, import_error = read_outputs(job)
    finally:
        slots.put(slot)
        shutil.rmtree(job, ignore_errors=True)
    tests = judge(plan, records, import_error, stopped)
    return Grade(student, plan.stage.number, mode, sum(t.points for t in tests), plan.max_score, tests, notes,
                 time.monotonic() - started)


def run(args) -> int:
    root = find_root()
    where = Path(args.submissions).resolve()
    out = Path(args.out).resolve() if args.out else where.parent / f"{where.name}-grades"
    chosen = [find_stage(root, name) for name in args.stage] if args.stage else stages(root)
    students = submissions.find(where)
    level = sandbox.protection()
    limits = sandbox.Limits(memory_bytes=args.memory_mb << 20, cpu_seconds=int(args.timeout) + 5,
                            wall_seconds=args.timeout)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    console.info(f"grading {len(students)} submissions on stages {', '.join(s.number for s in chosen)} "
                 f"with -j {args.jobs}; seed {seed}")
    console.info(f"protection: {sandbox.describe(level)}")
    if level == "limits":
        console.warn("student code is not isolated from the files of this machine")
    plans = {stage.number: make_plan(stage, seed, args.examples) for stage in chosen}
    out.mkdir(parents=True, exist_ok=True)
    hidden = sandbox.private_paths(root) + [where, out]
    if (where.parent / "gradebook.db").exists():
        hidden.append(where.parent)  # an nbgrader course: its gradebook, source and release folders
    modes = ["isolated", "cumulative"] if args.isolated else ["cumulative"]
    work = [(plans[s.number], student, mode) for student in students for s in chosen for mode in modes]
    slots: queue.Queue = queue.Queue()
    for slot in range(args.jobs):
        slots.put(slot)
    grades: list[Grade] = []
    failures: list[str] = []
    base = Path(tempfile.mkdtemp(prefix="tito-grade-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        with Progress(console=console.err, transient=True) as progress, ThreadPoolExecutor(args.jobs) as pool:
            task = progress.add_task("grading", total=len(work))
            futures = [pool.submit(grade_submission, root, plan, student, students[student], mode, base, hidden,
                                   limits, level, slots) for plan, student, mode in work]
            for (plan, student, mode), future in zip(work, futures):
                try:
                    grades.append(future.result())
                except Exception as error:  # a bug of the grader: report it, grade the rest
                    failures.append(f"{student}, stage {plan.stage.number} ({mode}): {type(error).__name__}: {error}")
                    console.error(f"could not grade {failures[-1]}")
                progress.advance(task)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    _write_reports(out, grades, plans, level, seed)
    gradebook = where.parent / "gradebook.db" if where.name == "submitted" else where / "gradebook.db"
    if gradebook.exists():
        written, skipped = write_gradebook(root, gradebook, grades, "isolated" if args.isolated else "cumulative")
        console.info(f"wrote {written} task scores into {gradebook} as manual scores (nbgrader export "
                     f"reports them){f'; {skipped} had no autograded notebook to attach to' if skipped else ''}")
    console.info(f"wrote {out / 'grades.csv'}, {out / 'summary.md'}, {out / 'results.json'} and "
                 f"{len(students)} files in {out / 'feedback'}")
    _print_summary(grades)
    if failures:
        raise TitoError(f"{len(failures)} grades could not be computed and are missing from grades.csv; "
                        f"the first: {failures[0]}", code=1)
    return 0


def write_gradebook(root: Path, path: Path, grades: list[Grade], mode: str) -> tuple[int, int]:
    """Put the judge's score of every task into nbgrader's gradebook as the manual score of that task's
    graded cell (a cell's manual score overrides its autograded one), so `nbgrader export` reports it."""
    from nbgrader.api import Gradebook, MissingEntry

    names = {stage.number: stage.name for stage in stages(root)}
    written = skipped = 0
    with Gradebook(f"sqlite:///{path}") as gradebook:
        for grade in (g for g in grades if g.mode == mode):
            name = names[grade.stage]
            for task in dict.fromkeys(t.task for t in grade.tests):
                score = sum(t.points for t in grade.tests if t.task == task)
                try:
                    cell = gradebook.find_grade(f"task-{task.replace('.', '_')}", name, name, grade.student)
                except MissingEntry:
                    skipped += 1
                    continue
                cell.manual_score = score
                written += 1
        gradebook.db.commit()
    return written, skipped


def _write_reports(out: Path, grades: list[Grade], plans: dict[str, Plan], level: str, seed: int) -> None:
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(["student", "stage", "mode", "score", "max_score"])
        for grade in grades:
            writer.writerow([grade.student, grade.stage, grade.mode, f"{grade.score:g}", f"{grade.max_score:g}"])
    (out / "results.json").write_text(json.dumps({"protection": level, "seed": seed,
                                                  "grades": [asdict(g) for g in grades]}, indent=1),
                                      encoding="utf-8")
    feedback = out / "feedback"
    feedback.mkdir(exist_ok=True)
    for student in dict.fromkeys(g.student for g in grades):
        lines = [f"# Feedback for {student}", ""]
        for grade in (g for g in grades if g.student == student):
            lines.append(f"## Stage {grade.stage} ({grade.mode}): {grade.score:g}/{grade.max_score:g}")
            lines += [f"- note: {note}" for note in grade.notes]
            lost = [t for t in grade.tests if not t.passed]
            lines += [f"- task {t.task}, {t.id} ({t.max_points:g} points): {t.message}" for t in lost]
            if not lost:
                lines.append("- every check passed")
            lines.append("")
        (feedback / f"{student}.md").write_text("\n".join(lines), encoding="utf-8")
    lines = ["# Class summary", "", f"Protection in force: {sandbox.describe(level)}. Seed: {seed}.", ""]
    for number, plan in plans.items():
        stage_grades = [g for g in grades if g.stage == number]
        for mode in dict.fromkeys(g.mode for g in stage_grades):
            chosen = [g for g in stage_grades if g.mode == mode]
            mean = sum(g.score for g in chosen) / max(1, len(chosen))
            lines += [f"## Stage {number} ({mode}): mean {mean:.1f}/{plan.max_score:g} over {len(chosen)} submissions",
                      "", "| check | task | failed by |", "|---|---|---|"]
            failures = {c.name: sum(not t.passed for g in chosen for t in g.tests if t.id == c.name)
                        for c in plan.checks}
            for check in sorted(plan.checks, key=lambda c: -failures[c.name]):
                if failures[check.name]:
                    lines.append(f"| {check.name} | {check.task} | {failures[check.name]} of {len(chosen)} |")
            lines.append("")
    (out / "summary.md").write_text("\n".join(lines), encoding="utf-8")


def _print_summary(grades: list[Grade]) -> None:
    from rich.table import Table

    table = Table(title="Grades", title_justify="left")
    for column in ("student", "stage", "mode", "score"):
        table.add_column(column, no_wrap=True)
    for grade in grades:
        table.add_row(grade.student, grade.stage, grade.mode, f"{grade.score:g}/{grade.max_score:g}")
    console.out.print(table)
