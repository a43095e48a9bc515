"""Official grading of a class: each submission's package built here from its notebooks, run by the one
engine in a box, judged here. Anything a submission breaks is a graded 0 with a note; a fault of the
grader itself is kept apart and reported."""

from __future__ import annotations

import csv
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
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from functools import cache
from pathlib import Path
from typing import Any, TextIO

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
    phases: dict[str, float] = field(default_factory=dict)  # seconds: queued, built, run, judged, recorded
    worker: str = ""  # where the box ran: "here", or a Dask worker's address

    @classmethod
    def from_json(cls, data: dict) -> Grade:
        """A grade as `asdict` wrote it (results.json, the journal)."""
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in data.items() if key in known}
        values["tests"] = [engine.CheckResult(**test) for test in values.get("tests", [])]
        return cls(**values)

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
    if len(text) < MIN_SECRET:  # most messages: "" for a check passed
        return text
    with _COMPILING:  # read once, by jupytext, whose metadata reader parses Python (ast.literal_eval)
        lines = _reference_lines(root)
    for line in lines:
        if len(line) <= len(text) and line in text:
            text = text.replace(line, WITHHELD)
    return text


def reference_code(stage: Stage) -> str:
    """The reference's code of a stage, as it stands in for the student's in isolated grading."""
    with _COMPILING:
        return _reference_module(stage)[1]


@cache
def _reference_module(stage: Stage) -> tuple[str, str]:
    _, path, code = package.stage_module(stage, read_source(stage), stage.relative(stage.source), reference=True)
    return path, code


# CPython 3.11 can fail ("AST constructor recursion depth mismatch") when threads compile or parse at once
# (compile, ast.parse, ast.literal_eval: jupytext's reader uses the last)
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
              notes: list[str], *, remote: Remote | None = None, queued: float | None = None) -> Grade:
        """Build the package here, run its checks in a box (here, or by `remote` on a worker), judge here.
        `queued`: when the job was queued (monotonic), for its phase times."""
        picked = time.monotonic()

        def zero(note: str) -> Grade:
            tests = [engine.CheckResult(c.name, c.task, 0, c.points, False, note, note) for c in plan.checks]
            return Grade(student, plan.stage.number, mode, 0, plan.max_score, plan.seed, tests, [*notes, note],
                         seconds=time.monotonic() - picked)

        if plan.stage.name not in notebooks:
            return zero(f"no notebook for {plan.stage.name} was submitted")
        files, found = package_files(self.root, plan.stage, notebooks, mode)
        built = time.monotonic()
        boxed: float | None = None  # seconds the box ran on a worker, within the wait for it
        if remote is None:
            report, unwritable, worker = self._run_here(plan, files)
        else:
            from tito.cluster import KilledWorkers

            try:
                report, unwritable, worker, boxed = remote(plan, files)
            except KilledWorkers as error:
                return zero(str(error))
        ran = time.monotonic()
        waited = 0.0 if boxed is None else max(0.0, ran - built - boxed)
        if unwritable:
            return zero(f"the package could not be written from the notebooks ({unwritable})")
        result = engine.stage_result(plan, report)
        tests = [replace(t, message=redact(self.root, t.message), public=redact(self.root, t.public))
                 for t in result.tests]
        judged = time.monotonic()
        return Grade(student, plan.stage.number, mode, result.score, result.max_score, plan.seed, tests,
                     [redact(self.root, note) for note in [*notes, *found, *result.notes]],
                     public_notes=[redact(self.root, note) for note in [*notes, *found, *result.public_notes]],
                     seconds=judged - picked, worker=worker,
                     phases={"queued": round(picked - (queued or picked) + waited, 4),
                             "built": round(built - picked, 4), "run": round(ran - built - waited, 4),
                             "judged": round(judged - ran, 4)})

    def _run_here(self, plan: engine.Plan, files: dict[str, str]) -> tuple[engine.Report, str, str]:
        """(what the boxes did, why the package could not be written or "", where it ran)."""
        job = Path(tempfile.mkdtemp(prefix="submission-", dir=self.scratch))
        slot = self.slots.get()
        try:
            try:
                with _COMPILING:  # it parses each file to find its public names
                    package.write_package(job, files)
            except (TitoError, OSError, ValueError, RecursionError) as error:
                return engine.Report(), _sentence(error), "here"
            sandbox.box_view(job, slot)  # readable by this slot's box user alone
            return engine.run_checks(plan, job, isolation=self.isolation, limits=self.limits, slot=slot), "", "here"
        finally:
            self.slots.put(slot)
            shutil.rmtree(job, ignore_errors=True)


# runs a job's checks elsewhere (a Dask worker): (plan, package files) -> (report, why the package could not be
# written or "", the worker, the seconds its box ran there)
Remote = Callable[[engine.Plan, dict[str, str]], tuple[engine.Report, str, str, float]]


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


def write_reports(out: Path, grades: Iterable[Grade], plans: dict[str, Any], isolation: str, key_source: str) -> None:
    """grades.csv, results.json, summary.md and feedback/<student>.md in `out`, the instructor's alone: the
    folders 0700 and every file 0600 from its first byte, whatever was there before. `grades` is read once, in
    one pass, and never held whole (13,000 grades of a course are a few hundred megabytes of messages): each
    file is streamed to a new file renamed into place, and a student's feedback is written once their grades
    (consecutive in `grades`) end."""
    private_folder(out)  # grades, every check's message, every student's feedback
    feedback = out / "feedback"
    private_folder(feedback)
    failures: dict[tuple[str, str], dict[str, int]] = {}  # (stage, mode) -> check -> failed by
    totals: dict[tuple[str, str], list[float]] = {}  # (stage, mode) -> [sum of scores, count]
    faults: list[str] = []
    student: str | None = None
    sections: list[str] = []
    with _private_stream(out / "grades.csv") as table, _private_stream(out / "results.json") as results:
        writer = csv.writer(table)
        writer.writerow(CSV_HEADER)
        results.write(json.dumps({"protection": isolation, "protection_words": sandbox.describe(isolation),
                                  "seed_from": key_source,
                                  "seeds": {number: plan.seed for number, plan in plans.items()}},
                                 indent=1)[:-2] + ',\n "grades": [')
        first = True
        for grade in grades:
            writer.writerow(csv_row(grade))
            results.write(("\n" if first else ",\n") + json.dumps(asdict(grade)))
            first = False
            if grade.student != student:
                if student is not None:
                    write_feedback(feedback, student, sections)
                student, sections = grade.student, []
            sections.append(feedback_section(grade))
            if grade.fault:
                faults.append(f"- {markdown_text(grade.student)}, stage {grade.stage} ({grade.mode}): "
                              f"{markdown_text(grade.fault)}")
                continue
            total = totals.setdefault((grade.stage, grade.mode), [0.0, 0])
            total[0] += grade.score
            total[1] += 1
            failed = failures.setdefault((grade.stage, grade.mode), {})
            for test in grade.tests:
                if not test.passed:
                    failed[test.id] = failed.get(test.id, 0) + 1
        results.write("\n]}\n")
    if student is not None:
        write_feedback(feedback, student, sections)
    lines = ["# Class summary", "", f"Protection in force: {sandbox.describe(isolation)}.",
             f"Seeds: {', '.join(f'stage {n} {p.seed}' for n, p in plans.items())} (course key from {key_source}).", ""]
    if faults:
        lines += ["## Grader faults (regrade these)", "", *faults, ""]
    for number, plan in plans.items():
        for mode in MODES:
            if (number, mode) not in totals:
                continue
            scored, count = totals[number, mode]
            failed = failures.get((number, mode), {})
            lines += [f"## Stage {number} ({mode}): mean {scored / max(1, count):.1f}/{plan.max_score:g} over "
                      f"{count:g} submissions", "", "| check | task | failed by |", "|---|---|---|"]
            for check in sorted(plan.checks, key=lambda c: -failed.get(c.name, 0)):
                if failed.get(check.name):
                    lines.append(f"| {check.name} | {check.task} | {failed[check.name]} of {count:g} |")
            lines.append("")
    _write_private(out / "summary.md", "\n".join(lines))
    for folder, folders, files in os.walk(out):  # what an earlier run, or anyone, left there (links not followed)
        for name in folders:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o700)
        for name in files:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o600)


CSV_HEADER = ["student", "stage", "mode", "score", "max_score", "seed", "status"]


def csv_row(grade: Grade) -> list[str]:
    return [spreadsheet_cell(str(cell)) for cell in (
        grade.student, grade.stage, grade.mode, f"{grade.score:g}", f"{grade.max_score:g}", grade.seed,
        "grader fault" if grade.fault else "graded")]


def feedback_section(grade: Grade) -> str:
    """A grade as its student's feedback shows it: the score, the notes and one line per check lost."""
    lines = [f"## Stage {grade.stage} ({grade.mode}): {grade.score:g}/{grade.max_score:g}"]
    if grade.fault:
        lines.append("- not graded yet: the grader failed on this submission; your instructor will regrade it")
    lines += [f"- note: {markdown_text(note)}" for note in dict.fromkeys(grade.feedback_notes())]
    lost = [t for t in grade.tests if not t.passed]
    lines += [f"- task {t.task}, {t.id} ({t.max_points:g} points): {t.public}" for t in lost if t.public]
    if not lost:
        lines.append("- every check passed")
    return "\n".join(lines) + "\n"


def write_feedback(folder: Path, student: str, sections: list[str]) -> None:
    _write_private(folder / feedback_filename(student),
                   "\n".join([f"# Feedback for {markdown_text(student)}\n", *sections]))


@contextmanager
def _private_stream(path: Path) -> Iterator[TextIO]:
    """A text stream to a new file beside `path` (0600 from its first byte), renamed over `path` when the
    block ends well, removed when it does not: a file or link already there is replaced, never written
    through, and never left half written."""
    descriptor, scratch = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline="") as stream:
            yield stream
        os.replace(scratch, path)
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise


def _write_private(path: Path, text: str) -> None:
    """`text` as the file `path`, the instructor's (0600) from its first byte: written to a new file beside
    it and renamed over it, so a file or a link already there is replaced, never written through."""
    with _private_stream(path) as stream:
        stream.write(text)


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
