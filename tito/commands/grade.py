"""`tito grade SUBMISSIONS`: official grades for a whole class, decided by the trusted engine.

Each submission and stage runs in a bubblewrap sandbox that only computes outputs on cases drawn here;
this process judges them and writes grades.csv, one feedback file per student, summary.md and
results.json into the output folder.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tito import console, engine, grading, sandbox, submissions
from tito.errors import TitoError
from tito.project import find_root
from tito.project import stage as find_stage
from tito.project import stages as all_stages


def grade(where: Path, *, stages: list[str] | None = None, isolated: bool = False, jobs: int = 1,
          out: Path | None = None, timeout: float = 300.0, memory_mb: int = 4096, examples: int | None = None,
          seed: int | None = None, students: list[str] | None = None, unsafe_no_sandbox: bool = False) -> int:
    root = find_root()
    where = where.resolve()
    out = out.resolve() if out else where.parent / f"{where.name}-grades"
    course = _course_of(where)
    if stages:
        chosen = [find_stage(root, name) for name in stages]
    elif course is not None:  # what nbgrader grades: the released assignments
        chosen = [stage for stage in all_stages(root) if (course / "release" / stage.name).is_dir()]
        if not chosen:
            raise TitoError(f"no assignment of {course} is released yet: run `nbgrader release_assignment 01_tensor` "
                            "there first, or name the stages with --stage")
    else:
        chosen = all_stages(root)
    if unsafe_no_sandbox:
        isolation = "none"
    elif sandbox.bwrap_available():
        isolation = "bwrap"
    else:
        raise TitoError("bubblewrap (bwrap) is missing or cannot build a sandbox on this machine, so student code "
                        "cannot be isolated: install it (Debian/Ubuntu: `sudo apt install bubblewrap`), or pass "
                        "--unsafe-no-sandbox to grade without one")
    # the one decision that this is an nbgrader course, from the instructor's files: no student's name or
    # folder changes how the class is read or where its key is kept
    found = submissions.find(course / "submitted" if course is not None else where,
                             [stage.name for stage in all_stages(root)])
    if students:
        unknown = [name for name in students if name not in found]
        if unknown:
            raise TitoError(f"no submission from {', '.join(map(repr, unknown))} in {where}; "
                            f"the students there are {', '.join(map(submissions.printable, sorted(found)[:10]))}"
                            f"{' ...' if len(found) > 10 else ''}")
        found = {name: found[name] for name in students}
    graded = {s.name for s in chosen} if course is not None else \
        {s.name for s in all_stages(root) if s.number <= max(c.number for c in chosen)}
    for submission in found.values():  # held until the class is graded: only what grading reads
        submission.notebooks = {name: data for name, data in submission.notebooks.items() if name in graded}
    key, key_source = grading.course_key(course, out, seed)
    limits = sandbox.Limits(memory_bytes=memory_mb << 20, wall_seconds=timeout)
    console.info(f"grading {len(found)} submissions on stages {', '.join(s.number for s in chosen)} with -j {jobs}")
    console.info(f"protection: {sandbox.describe(isolation)}")
    if isolation == "none":
        console.warn("student code is not isolated from the files of this machine (--unsafe-no-sandbox)")
    scratch = Path(tempfile.mkdtemp(prefix="tito-grade-"))
    scratch.chmod(0o711)  # crossable by the box's user, not listable: its job folders have unguessable names
    try:
        plans = {stage.number: engine.make_plan(stage, seed=engine.stage_seed(key, stage), jobs=scratch,
                                                examples=examples) for stage in chosen}
        console.info(f"seeds: {', '.join(f'{n} {p.seed}' for n, p in plans.items())} (course key from {key_source})")
        # an nbgrader course is graded as its judge grades: each module on its own
        modes = ("isolated",) if course is not None else grading.MODES if isolated else ("cumulative",)
        work = [(plans[s.number], name, mode) for name in found for s in chosen for mode in modes
                if course is None or s.name in found[name].notebooks]  # a course: what was submitted
        slots: queue.Queue = queue.Queue()
        for slot in range(jobs):
            slots.put(slot)
        grader = grading.Grader(root, isolation, limits, scratch, slots)
        grades = _grade_all(grader, work, found, jobs)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        grading.write_reports(out, grades, plans, isolation, key_source)
    except OSError as error:
        raise TitoError(f"the reports could not be written to {out} ({error.strerror}): make it writable, or "
                        f"pass --out, and grade again (the submissions were not changed)", code=1) from None
    written = f"{out / 'grades.csv'}, {out / 'summary.md'}, {out / 'results.json'} and {len(found)} files in " \
              f"{out / 'feedback'}"
    unreadable = ""
    if course is not None and (course / "gradebook.db").exists():
        names = {stage.number: stage.name for stage in all_stages(root)}
        try:
            differences, agree = grading.compare_gradebook(course / "gradebook.db", grades, names)
        except TitoError as error:
            unreadable = f"{error}; the reports were written all the same, to {out}, and the gradebook left as it is"
        else:
            if differences:
                console.warn(f"nbgrader's gradebook differs from the judge for {len(differences)} submissions (it "
                             "was left as it is; autograde them again to take the judge's scores):")
                for line in differences:
                    console.info(f"  {line}")
            console.info(f"nbgrader's gradebook agrees with the judge for {agree} submissions")
    console.info(f"wrote {written}")
    _print_summary(grades)
    faults = [g for g in grades if g.fault]
    if faults:
        if unreadable:
            console.error(unreadable)
        raise TitoError(f"{len(faults)} grades could not be computed because the grader failed (marked "
                        f"'grader fault' in grades.csv and listed in summary.md); the first: "
                        f"{submissions.printable(faults[0].student)}, "
                        f"stage {faults[0].stage}: {faults[0].fault}", code=1)
    if unreadable:
        raise TitoError(unreadable, code=1)
    return 0


def _course_of(where: Path) -> Path | None:
    """The nbgrader course folder when `where` is one (or its submitted/ folder), else None: known from the
    instructor's files (the course's nbgrader_config.py beside submitted/), never from a student's."""
    for candidate in (where, where.parent if where.name == "submitted" else None):
        if candidate is not None and (candidate / "submitted").is_dir() and \
                (candidate / "nbgrader_config.py").is_file():
            return candidate
    return None


def _grade_all(grader: grading.Grader, work: list, found: dict, jobs: int) -> list[grading.Grade]:
    from rich.progress import Progress
    from threadpoolctl import threadpool_limits

    grades = []
    # the judges run in this process's threads, side by side: numpy's BLAS on one thread each (OpenBLAS
    # called from several threads at once, each wanting all cores, can spin for minutes)
    with threadpool_limits(limits=1), Progress(console=console.err, transient=True) as progress, \
            ThreadPoolExecutor(jobs) as pool:
        task = progress.add_task("grading", total=len(work))
        futures = [pool.submit(grader.grade, plan, name, found[name].notebooks, mode, found[name].notes)
                   for plan, name, mode in work]
        for (plan, name, mode), future in zip(work, futures):
            try:
                grades.append(future.result())
            except Exception as error:  # a fault of the grader: the row stays, marked, and the run says so
                grades.append(grading.fault_grade(plan, name, mode, error))
                console.error(f"could not grade {submissions.printable(name)}, stage {plan.stage.number} "
                              f"({mode}): {grades[-1].fault}")
            progress.advance(task)
    return grades


def _print_summary(grades: list[grading.Grade]) -> None:
    from rich.table import Table

    table = Table(title="Grades", title_justify="left")
    for column in ("student", "stage", "mode", "score"):
        table.add_column(column, no_wrap=True)
    for grade in grades:
        score = "grader fault" if grade.fault else f"{grade.score:g}/{grade.max_score:g}"
        table.add_row(submissions.printable(grade.student), grade.stage, grade.mode, score)
    console.out.print(table)
