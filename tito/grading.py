"""Official grading of a class: each submission's package built here from its notebooks, run by the one
engine in a box, judged here. Anything a submission breaks is a graded 0 with a note; a fault of the
grader itself is kept apart and reported."""

from __future__ import annotations

import csv
import io
import json
import os
import queue
import re
import secrets
import shutil
import sqlite3
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from pathlib import Path

from tito import engine, package, sandbox
from tito.errors import TitoError
from tito.project import Stage, stages_up_to
from tito.source import exported_cells, parse_notebook, read_source, solution_regions
from tito.submissions import feedback_filename, json_problem, printable

MODES = ("isolated", "cumulative")
# compiling costs up to 550 bytes a character (a list of dict literals, measured): 66 MB at the cap, five times
# the largest module's reference code (04_layers, 24,000 characters)
MAX_EXPORTED_CHARACTERS = 120_000


@dataclass
class Grade:
    student: str
    stage: str
    mode: str  # "isolated": the reference stands in for earlier stages; "cumulative": the student's own
    score: float
    max_score: float
    seed: int
    tests: list[engine.CheckResult]
    notes: list[str] = field(default_factory=list)  # for the instructor (results.json)
    fault: str = ""  # a fault of the grader, not of the submission: this grade is not to be trusted
    seconds: float = 0.0
    public_notes: list[str] | None = None  # what the student's feedback shows (None: the notes, all trusted words)

    def feedback_notes(self) -> list[str]:
        return self.notes if self.public_notes is None else self.public_notes

    def task_scores(self) -> dict[str, float]:
        """Each task's points, in the order of the checks."""
        scores: dict[str, float] = {}
        for test in self.tests:
            scores[test.task] = scores.get(test.task, 0.0) + test.points
        return scores


def course_key(course: Path | None, out: Path, seed: int | None) -> tuple[str, str]:
    """(key, where it comes from): `--seed`, else a random key kept in the nbgrader course folder (`course`,
    None for a plain folder of submissions) or else in the output folder, so every regrade draws the same
    cases. The key file is the instructor's alone (0600)."""
    if seed is not None:
        return str(seed), "--seed"
    if course is None:
        private_folder(out)
    keeper = (course or out) / ".tito-course-key"
    if not keeper.is_file():
        descriptor = os.open(keeper, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as stream:
            stream.write(secrets.token_hex(16) + "\n")
    elif keeper.stat().st_mode & 0o077:
        keeper.chmod(0o600)
    return keeper.read_text(encoding="utf-8").strip(), str(keeper)


def private_folder(folder: Path) -> None:
    """`folder` made if missing and the instructor's alone (0700), whatever mode it had."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)


WITHHELD = "[reference code withheld]"
MIN_SECRET = 16  # shorter solution lines (`return out`) say nothing the narrative does not


@cache
def _reference_lines(root: Path) -> tuple[str, ...]:
    """Every line of a solution region in solutions/ that the source does not also show outside one,
    longest first."""
    from tito.project import stages

    inside: set[str] = set()
    outside: list[str] = []
    for stage in stages(root):
        for cell in read_source(stage).cells:
            lines = cell.source.splitlines()
            regions = solution_regions(cell.source)
            within = {number for first, last, _ in regions for number in range(first - 1, last + 2)}
            inside.update(lines[number - 1].strip() for first, last, _ in regions for number in range(first, last + 1))
            outside += [line for number, line in enumerate(lines, start=1) if number not in within]
    shown = "\n".join(outside)
    secret = [line for line in inside if len(line) >= MIN_SECRET and not line.startswith("#") and line not in shown]
    return tuple(sorted(secret, key=lambda line: (-len(line), line)))


def redact(root: Path, text: str) -> str:
    """`text` (a message for a student) with every verbatim line of the reference solutions replaced: in
    isolated grading the reference of earlier stages runs beside the student's code, which could raise it
    in an error message."""
    for line in _reference_lines(root):
        if line in text:
            text = text.replace(line, WITHHELD)
    return text


@cache
def _reference_module(stage: Stage) -> tuple[str, str]:
    _, path, code = package.stage_module(stage, read_source(stage), stage.relative(stage.source), reference=True)
    return path, code


# CPython 3.11 can fail ("AST constructor recursion depth mismatch") when threads compile at once
_COMPILING = threading.Lock()


def package_files(root: Path, stage: Stage, notebooks: dict[str, bytes], mode: str) -> tuple[dict[str, str], list[str]]:
    """The package files for grading `stage`: the student's notebooks for 01..stage, or in isolated mode
    the reference for every earlier stage. Returns (files, notes for the student's feedback)."""
    files, notes = {}, []
    for earlier in stages_up_to(root, stage):
        if mode == "isolated" and earlier != stage:
            with _COMPILING:
                path, code = _reference_module(earlier)
            files[path] = code
            continue
        data = notebooks.get(earlier.name)
        if data is None:
            notes.append(f"no notebook for {earlier.name} was submitted")
            continue
        with _COMPILING:  # one notebook parsed and compiled at a time, whatever -j: its cost is counted once
            exported = _stage_file(earlier, data, notes)
        if exported is not None:
            files[exported[0]] = exported[1]
    return files, notes


def _stage_file(stage: Stage, data: bytes, notes: list[str]) -> tuple[str, str] | None:
    """(path in the package, code) of one of the student's notebooks, or None with a note. Nothing is parsed
    beyond `json_problem`'s bounds, nor compiled beyond MAX_EXPORTED_CHARACTERS."""
    origin = f"{stage.name}.ipynb"
    problem = json_problem(data)
    try:
        if problem:
            raise ValueError(problem)
        notebook = parse_notebook(data.decode("utf-8", errors="replace"))
    except ValueError as error:
        notes.append(f"the {stage.name} notebook is not a readable Jupyter notebook ({error})")
        return None
    try:
        # the cells export takes, by its own reading of their directives (`#|export`, `#| export nn`, a
        # `#| default_exp` line above...), counted as the code it compiles
        exported = sum(len(cell.code) for cell in exported_cells(notebook, origin))
        if exported > MAX_EXPORTED_CHARACTERS:  # compiling megabytes of code costs the grader gigabytes
            notes.append(f"the exported cells of the {stage.name} notebook hold {exported:,} characters, more "
                         f"than the grader compiles ({MAX_EXPORTED_CHARACTERS:,}); that notebook was left out")
            return None
        result, path, code = package.stage_module(stage, notebook, origin, reference=False)
    except TitoError as error:
        notes.append(str(error))
        return None
    except (RecursionError, MemoryError, ValueError) as error:  # e.g. a cell nested too deep to compile
        notes.append(f"the {stage.name} notebook could not be exported ({type(error).__name__})")
        return None
    notes += result.broken_cells
    return path, code


@dataclass
class Grader:
    root: Path
    isolation: str
    limits: sandbox.Limits
    scratch: Path
    slots: queue.Queue

    def grade(self, plan: engine.Plan, student: str, notebooks: dict[str, bytes], mode: str,
              notes: list[str]) -> Grade:
        started = time.monotonic()

        def zero(note: str) -> Grade:
            tests = [engine.CheckResult(c.name, c.task, 0, c.points, False, note, note) for c in plan.checks]
            return Grade(student, plan.stage.number, mode, 0, plan.max_score, plan.seed, tests, [*notes, note])

        if plan.stage.name not in notebooks:
            return zero(f"no notebook for {plan.stage.name} was submitted")
        files, found = package_files(self.root, plan.stage, notebooks, mode)
        job = Path(tempfile.mkdtemp(prefix="submission-", dir=self.scratch))
        slot = self.slots.get()
        try:
            try:
                with _COMPILING:  # it parses each file to find its public names
                    package.write_package(job, files)
            except (TitoError, OSError, ValueError, RecursionError) as error:
                return zero(f"the package could not be written from the notebooks ({_sentence(error)})")
            sandbox.box_view(job, slot)  # readable by this slot's box user alone
            result = engine.grade_stage(plan, job, isolation=self.isolation, limits=self.limits, slot=slot)
        finally:
            self.slots.put(slot)
            shutil.rmtree(job, ignore_errors=True)
        tests = [replace(t, message=redact(self.root, t.message), public=redact(self.root, t.public))
                 for t in result.tests]
        return Grade(student, plan.stage.number, mode, result.score, result.max_score, plan.seed, tests,
                     [redact(self.root, note) for note in [*notes, *found, *result.notes]],
                     public_notes=[redact(self.root, note) for note in [*notes, *found, *result.public_notes]],
                     seconds=time.monotonic() - started)


def _sentence(error: BaseException) -> str:
    text = " ".join(str(error).split())[:200]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def fault_grade(plan: engine.Plan, student: str, mode: str, error: BaseException) -> Grade:
    """The row of a grading that failed in the grader itself: no score is claimed for it."""
    tests = [engine.CheckResult(c.name, c.task, 0, c.points, False, "not graded (a fault of the grader)", "")
             for c in plan.checks]
    return Grade(student, plan.stage.number, mode, 0, plan.max_score, plan.seed, tests, [],
                 fault=f"grader fault: {_sentence(error)}")


def spreadsheet_cell(text: str) -> str:
    """`text` for a CSV cell that a spreadsheet shows and never runs: a leading =, +, -, @, tab or carriage
    return (a formula, or one once trimmed) behind an apostrophe, as OWASP recommends."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


# inline syntax; an underscore between two letters or digits never emphasises (01_tensor stays as it is)
_MARKDOWN_SYNTAX = re.compile(r"([\\`*\[\]<>&|~$#!]|(?<![^\W_])_|_(?![^\W_]))")
_MARKDOWN_BLOCK = re.compile(r"^(\d*)([-+=>.:)(])")  # what could start a block at the head of a list item


def markdown_text(text: str) -> str:
    """`text` (an id, a note) as Markdown shows it, literally and on one line: every character of inline syntax
    and a first one that could open a block behind a backslash, leading spaces as entities (never code), and
    control characters as escapes (`printable`: a backslash before a letter is no Markdown)."""
    escaped = _MARKDOWN_BLOCK.sub(r"\1\\\2", _MARKDOWN_SYNTAX.sub(r"\\\1", text))
    stripped = escaped.lstrip(" ")
    return printable("&#32;" * (len(escaped) - len(stripped)) + stripped)


def write_reports(out: Path, grades: list[Grade], plans: dict[str, engine.Plan], isolation: str,
                  key_source: str) -> None:
    """grades.csv, results.json, summary.md and feedback/<student>.md in `out`, the instructor's alone: the
    folders 0700 and every file 0600 from its first byte, whatever was there before."""
    private_folder(out)  # grades, every check's message, every student's feedback
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow(["student", "stage", "mode", "score", "max_score", "seed", "status"])
    for grade in grades:
        writer.writerow([spreadsheet_cell(str(cell)) for cell in (
            grade.student, grade.stage, grade.mode, f"{grade.score:g}", f"{grade.max_score:g}", grade.seed,
            "grader fault" if grade.fault else "graded")])
    _write_private(out / "grades.csv", table.getvalue())
    _write_private(out / "results.json", json.dumps({
        "protection": isolation, "protection_words": sandbox.describe(isolation), "seed_from": key_source,
        "seeds": {number: plan.seed for number, plan in plans.items()},
        "grades": [asdict(g) for g in grades]}, indent=1))
    feedback = out / "feedback"
    private_folder(feedback)
    for student in dict.fromkeys(g.student for g in grades):
        lines = [f"# Feedback for {markdown_text(student)}", ""]
        for grade in (g for g in grades if g.student == student):
            lines.append(f"## Stage {grade.stage} ({grade.mode}): {grade.score:g}/{grade.max_score:g}")
            if grade.fault:
                lines.append("- not graded yet: the grader failed on this submission; your instructor will regrade it")
            lines += [f"- note: {markdown_text(note)}" for note in dict.fromkeys(grade.feedback_notes())]
            lost = [t for t in grade.tests if not t.passed]
            lines += [f"- task {t.task}, {t.id} ({t.max_points:g} points): {t.public}" for t in lost if t.public]
            if not lost:
                lines.append("- every check passed")
            lines.append("")
        _write_private(feedback / feedback_filename(student), "\n".join(lines))
    lines = ["# Class summary", "", f"Protection in force: {sandbox.describe(isolation)}.",
             f"Seeds: {', '.join(f'stage {n} {p.seed}' for n, p in plans.items())} (course key from {key_source}).", ""]
    faults = [g for g in grades if g.fault]
    if faults:
        lines += ["## Grader faults (regrade these)", ""]
        lines += [f"- {markdown_text(g.student)}, stage {g.stage} ({g.mode}): {markdown_text(g.fault)}" for g in faults]
        lines.append("")
    for number, plan in plans.items():
        stage_grades = [g for g in grades if g.stage == number and not g.fault]
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
    _write_private(out / "summary.md", "\n".join(lines))
    for folder, folders, files in os.walk(out):  # what an earlier run, or anyone, left there (links not followed)
        for name in folders:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o700)
        for name in files:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o600)


def _write_private(path: Path, text: str) -> None:
    """`text` as the file `path`, the instructor's (0600) from its first byte: written to a new file beside
    it and renamed over it, so a file or a link already there is replaced, never written through."""
    descriptor, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline="") as stream:
            stream.write(text)
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def compare_gradebook(path: Path, grades: list[Grade], names: dict[str, str]) -> tuple[list[str], int]:
    """Where nbgrader's gradebook holds a different score than the judge's for a graded submission: one
    line per (student, stage), naming the tasks that differ and any score the instructor set by hand
    (which stays). Returns (those lines, how many submissions agree). The gradebook is only read; one that
    cannot be read (damaged, not nbgrader's) is a TitoError naming it."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return _compare_gradebook(path, grades, names)
    except (SQLAlchemyError, sqlite3.Error, OSError) as error:
        reason = " ".join(str(getattr(error, "orig", None) or error).split())[:200]  # sqlite's own words
        raise TitoError(f"{path} could not be read as nbgrader's gradebook ({reason})", code=1) from None


def _compare_gradebook(path: Path, grades: list[Grade], names: dict[str, str]) -> tuple[list[str], int]:
    from nbgrader.api import Gradebook, MissingEntry

    lines, agree = [], 0
    with Gradebook(f"sqlite:///{path}") as gradebook:
        for grade in (g for g in grades if g.mode == "isolated" and not g.fault):
            name = names[grade.stage]
            try:
                notebook = gradebook.find_submission_notebook(name, name, grade.student)
            except MissingEntry:
                lines.append(f"{printable(grade.student)}, {name}: not autograded by nbgrader yet "
                             f"(the judge: {grade.score:g}/{grade.max_score:g})")
                continue
            cells = {cell.name: cell for cell in notebook.grades}
            differ = []
            for task, judged in grade.task_scores().items():
                cell = cells.get(f"task-{task.replace('.', '_')}")
                if cell is None:
                    differ.append(f"task {task}: no graded cell in nbgrader")
                elif cell.manual_score is not None and cell.manual_score != judged:
                    differ.append(f"task {task}: {cell.manual_score:g} set by hand (kept), the judge {judged:g}")
                elif cell.manual_score is None and (cell.auto_score or 0) != judged:
                    differ.append(f"task {task}: nbgrader {cell.auto_score or 0:g}, the judge {judged:g}")
            if differ:
                lines.append(f"{printable(grade.student)}, {name}: nbgrader {notebook.score:g}, the judge "
                             f"{grade.score:g}/{grade.max_score:g} ({'; '.join(differ)})")
            else:
                agree += 1
    return lines, agree
