"""`tito grade SUBMISSIONS`: official grades for a whole class, decided by the trusted engine.

Each submission and stage runs in a bubblewrap sandbox that only computes outputs on cases drawn here, in a
thread of this process or (`--scheduler`) on a Dask worker; this process judges them and writes grades.csv,
one feedback file per student, summary.md, results.json and report.html into the output folder, each grade
as it ends (tito.jobs). `--milestone gpt` ranks the class by their own GPTs, trained in the box
(tito.leaderboard): leaderboard.csv and report.html.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tito import console, engine, grading, sandbox, submissions
from tito import jobs as jobs_
from tito.errors import TitoError
from tito.project import Stage, find_root, stages_up_to
from tito.project import stage as find_stage
from tito.project import stages as all_stages


def grade(where: Path, *, stages: list[str] | None = None, isolated: bool = False, jobs: int = 1,
          out: Path | None = None, timeout: float = 300.0, memory_mb: int = 4096, examples: int | None = None,
          seed: int | None = None, students: list[str] | None = None, unsafe_no_sandbox: bool = False,
          scheduler: str | None = None, milestone: str | None = None, steps: int | None = None) -> int:
    previous = signal.signal(signal.SIGTERM, _interrupt) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        return _grade(where, stages=stages, isolated=isolated, jobs=jobs, out=out, timeout=timeout,
                      memory_mb=memory_mb, examples=examples, seed=seed, students=students,
                      unsafe_no_sandbox=unsafe_no_sandbox, scheduler=scheduler, milestone=milestone, steps=steps)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM as Ctrl-C: the run stops the same way (the scratch folders removed, what finished written)."""
    raise KeyboardInterrupt


def _grade(where: Path, *, stages: list[str] | None, isolated: bool, jobs: int, out: Path | None, timeout: float,
           memory_mb: int, examples: int | None, seed: int | None, students: list[str] | None,
           unsafe_no_sandbox: bool, scheduler: str | None, milestone: str | None, steps: int | None) -> int:
    root = find_root()
    where = where.resolve()
    out = out.resolve() if out else where.parent / f"{where.name}-grades"
    course = _course_of(where)
    if milestone:
        from tito.milestones import MILESTONES

        if stages:
            raise TitoError(f"--milestone {milestone} ranks the class by the students' own models and grades no "
                            "stage: leave out --stage (grade the stages in a run of their own)")
        chosen = [find_stage(root, MILESTONES[milestone].stage)]
    elif stages:
        chosen = [find_stage(root, name) for name in stages]
    elif course is not None:  # what nbgrader grades: the released assignments
        chosen = [stage for stage in all_stages(root) if (course / "release" / stage.name).is_dir()]
        if not chosen:
            raise TitoError(f"no assignment of {course} is released yet: run `nbgrader release_assignment 01_tensor` "
                            "there first, or name the stages with --stage")
    else:
        chosen = all_stages(root)
    if steps is not None and not milestone:
        raise TitoError("--steps is the training steps of --milestone gpt: give --milestone gpt too, or leave it out")
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
    everyone = found  # the class the reports show: with --student, the others' recorded grades stay in them
    if students:
        found = {name: found[name] for name in students}
    graded = {s.name for s in chosen} if course is not None and not milestone else \
        {s.name for s in all_stages(root) if s.number <= max(c.number for c in chosen)}
    for submission in everyone.values():  # held until the class is graded: only what grading reads
        submission.notebooks = {name: data for name, data in submission.notebooks.items() if name in graded}
    key, key_source = grading.course_key(course, out, seed)
    limits = sandbox.Limits(memory_bytes=memory_mb << 20, wall_seconds=timeout)
    where_words = f"on the Dask cluster at {scheduler}" if scheduler else f"with -j {jobs}"
    console.info(f"grading {len(found)} submissions on stages {', '.join(s.number for s in chosen)} {where_words}")
    console.info(f"protection: {sandbox.describe(isolation)}")
    if isolation == "none":
        console.warn("student code is not isolated from the files of this machine (--unsafe-no-sandbox)")
    coordinator = None
    scratch = Path(tempfile.mkdtemp(prefix="tito-grade-"))
    scratch.chmod(0o711)  # crossable by the box's user, not listable: its job folders have unguessable names
    try:
        # drawn before any Dask client exists in this process: with one, hypothesis drew one of 01's integers
        # otherwise (and the workers are sent these cases, never drawing their own)
        plans = {stage.number: _plan(stage, engine.stage_seed(key, stage), scratch, examples, out) for stage in chosen}
        if scheduler:
            from tito import cluster

            coordinator = cluster.Coordinator(cluster.client(scheduler), scheduler, examples=examples,
                                              isolation=isolation, limits=limits)
        if milestone:
            return _leaderboard(root, found, key, out, jobs, limits, isolation, steps, scratch, coordinator, plans)
        console.info(f"seeds: {', '.join(f'{n} {p.seed}' for n, p in plans.items())} (course key from {key_source})")
        # an nbgrader course is graded as its judge grades: each module on its own
        modes = ("isolated",) if course is not None else grading.MODES if isolated else ("cumulative",)
        # the class's jobs, which its reports show (with --student, the others' as recorded), and those graded now
        reported = [jobs_.Job(plans[s.number], name, mode) for name in everyone for s in chosen for mode in modes
                    if course is None or s.name in everyone[name].notebooks]  # a course: what was submitted
        settings = f"{isolation}/{limits.memory_bytes}/{limits.wall_seconds}"
        for job in reported:
            job.digest = _digest(root, job, everyone[job.student], settings)
        work = [job for job in reported if job.student in found]
        journal = jobs_.Journal(out)
        todo = [job for job in work if not journal.done(job)]
        if len(todo) < len(work):
            console.info(f"{len(work) - len(todo)} grades are kept from the last run into {out} (nothing they "
                         f"depend on changed); grading the {len(todo)} others")
        slots: queue.Queue = queue.Queue()
        for slot in range(jobs):
            slots.put(slot)
        grader = grading.Grader(root, isolation, limits, scratch, slots)
        # what the threads would import or read first, here before they start: a first import compiles its
        # source, and CPython 3.11's parser fails when two threads parse at once
        engine.shipped_checklib()
        grading.redact(root, "x" * grading.MIN_SECRET)
        finished, stopped = _run(grader, todo, work, found, jobs, journal, out, coordinator)
    finally:
        if coordinator is not None:
            coordinator.close()
        shutil.rmtree(scratch, ignore_errors=True)
    try:
        journal.compact(reported)
        grading.write_reports(out, journal.grades(reported), plans, isolation, key_source)
        _write_page(out, journal, reported, plans, everyone, isolation)
    except OSError as error:
        raise TitoError(f"the reports could not be written to {out} ({error.strerror}): make it writable, or "
                        f"pass --out, and grade again (the submissions were not changed)", code=1) from None
    finally:
        journal.close()
    if stopped:
        raise stopped
    grades = list(_light(journal, work))
    written = f"{out / 'grades.csv'}, {out / 'summary.md'}, {out / 'results.json'}, {out / 'report.html'} and " \
              f"{len(found)} files in {out / 'feedback'}"
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


def _leaderboard(root: Path, found: dict, key: str, out: Path, jobs: int, limits: sandbox.Limits, isolation: str,
                 steps: int | None, scratch: Path, coordinator: Any, plans: dict) -> int:
    """`--milestone gpt`: every student's own GPT trained in the box, its weights scored in a box of the course's
    own package, the class ranked by the validation loss judged here (tito.leaderboard); leaderboard.csv
    written as each run ends, report.html at the end."""
    from tito import leaderboard

    last = next(plan.stage for plan in plans.values())
    seed, steps = leaderboard.course_seed(key), steps or leaderboard.JUDGED_STEPS
    reference = leaderboard.reference_files(root, last)  # once: the course's GPT, which scores every student's
    grading.private_folder(out)
    journal = jobs_.Journal(out)  # the output folder's lock, before any training: a second run is refused
    try:
        console.info(f"training each student's GPT for {steps} steps in the sandbox (the judged run is "
                     f"{leaderboard.JUDGED_STEPS}), seed from the course key")
        entries: dict[str, leaderboard.Entry] = {}
        progress = jobs_.Progress(len(found))
        slots: queue.Queue = queue.Queue()
        for slot in range(jobs):
            slots.put(slot)

        def run_one(student: str, progress: jobs_.Progress) -> leaderboard.Entry:
            label = f"{student}/gpt"
            submission = found[student]
            if last.name not in submission.notebooks:
                return leaderboard.Entry(student, None, f"no notebook for {last.name} was submitted", 0.0, steps)
            files, _ = grading.package_files(root, last, submission.notebooks, "cumulative")
            if coordinator is not None:
                from tito.cluster import KilledWorkers

                try:
                    evidence = coordinator.gpt(files, reference, steps, seed, label)
                except KilledWorkers as error:
                    return leaderboard.Entry(student, None, str(error), 0.0, steps)
            else:
                progress.started(label)
                slot = slots.get()
                try:
                    evidence = leaderboard.train(files, reference, steps=steps, seed=seed, limits=limits,
                                                 isolation=isolation, slot=slot, scratch=scratch)
                finally:
                    slots.put(slot)
                    with progress.lock:
                        progress.running.discard(label)
            return leaderboard.judge(student, evidence)

        def record(student: str, entry: leaderboard.Entry) -> None:
            entries[student] = entry
            progress.done += 1
            progress.failed += entry.validation_loss is None
            leaderboard.write_leaderboard(out, leaderboard.rank(list(entries.values())))

        def fault(student: str, error: Exception) -> leaderboard.Entry:
            return leaderboard.Entry(student, None, f"grader fault: {grading._sentence(error)}", 0.0, steps)

        if coordinator is not None:
            coordinator.watch(progress)
        stopped: TitoError | None = None
        try:
            if not _run_shown("training", sorted(found), run_one, record, progress, coordinator, jobs, fault=fault):
                stopped = jobs_.interrupted(out, len(entries), len(found) - len(entries))
        except _lost() as error:
            stopped = TitoError(f"{_gone(error, coordinator.address)}: the {len(entries)} runs "
                                f"finished are in {out / 'leaderboard.csv'}; run the same command again", code=1)
        ranked = leaderboard.rank(list(entries.values()))
        leaderboard.write_leaderboard(out, ranked)
        _write_page(out, journal, [], plans, found, isolation, leaderboard=leaderboard.as_meta(ranked))
        if stopped:
            raise stopped
        from rich.table import Table

        table = Table(title=f"GPT leaderboard ({steps} steps)", title_justify="left")
        for column in ("rank", "student", "validation loss", "reason"):
            table.add_column(column)
        for place, entry in ranked:
            loss = "" if entry.validation_loss is None else f"{entry.validation_loss:.4f}"
            table.add_row(str(place), submissions.printable(entry.student), loss, entry.reason)
        console.out.print(table)
        console.info(f"wrote {out / 'leaderboard.csv'} and {out / 'report.html'}")
        return 0
    finally:
        journal.close()


CASES = ".tito-cases"  # in the output folder: each plan's cases as first drawn, for every regrade into it


def _plan(stage: Stage, seed: int, scratch: Path, examples: int | None, out: Path) -> engine.Plan:
    """The stage's plan, its cases those the first run into `out` drew with the same fingerprint (so a rerun
    grades what is missing on the same cases as the grades it keeps), else drawn now and kept there."""
    from tito.shipped import wire

    kept = out / CASES / f"{stage.name}-{engine.fingerprint(stage, seed, examples)}.json"
    cases = None
    if kept.is_file() and not kept.is_symlink():
        try:
            cases = wire.loads(kept.read_text(encoding="utf-8"))
        except (ValueError, OSError):
            cases = None
    plan = engine.make_plan(stage, seed=seed, jobs=scratch, examples=examples, cases=cases)
    if cases is None:
        grading.private_folder(out)
        grading.private_folder(kept.parent)
        grading._write_private(kept, wire.dumps(plan.cases))
    return plan


def _digest(root: Path, job: jobs_.Job, submission: submissions.Submission, settings: str) -> str:
    earlier = stages_up_to(root, job.plan.stage)
    reference = {} if job.mode == "cumulative" else \
        {stage.name: grading.reference_code(stage) for stage in earlier if stage != job.plan.stage}
    read = {stage.name for stage in earlier} - set(reference)
    notebooks = {name: data for name, data in submission.notebooks.items() if name in read}
    return jobs_.digest(job, notebooks, submission.notes, reference, settings)


def _light(journal: jobs_.Journal, work: list[jobs_.Job]) -> Iterator[grading.Grade]:
    """Each grade without its checks' messages (what the summary table and the gradebook comparison need)."""
    for grade in journal.grades(work):
        yield replace(grade, tests=[replace(t, message="", public="") for t in grade.tests], notes=[],
                      public_notes=None)


def _run(grader: grading.Grader, todo: list[jobs_.Job], work: list[jobs_.Job], found: dict, jobs: int,
         journal: jobs_.Journal, out: Path, coordinator: Any) -> tuple[int, TitoError | None]:
    """Grade `todo`, recording each grade as it ends. Returns (how many finished, the error that stopped the run
    or None)."""

    progress = jobs_.Progress(len(todo))
    feedback = out / "feedback"
    grading.private_folder(feedback)
    table = _CsvRows(out / "grades.csv")
    finished = 0
    if coordinator is not None:
        coordinator.watch(progress)

    def run_one(job: jobs_.Job, progress: jobs_.Progress) -> grading.Grade:
        label = f"{job.student}/{job.plan.stage.number}/{job.mode}"
        remote = None
        if coordinator is None:
            progress.started(label)
        else:
            remote = coordinator.remote(label)
        submission = found[job.student]
        try:
            return grader.grade(job.plan, job.student, submission.notebooks, job.mode, submission.notes,
                                remote=remote, queued=job.queued)
        finally:
            with progress.lock:
                progress.running.discard(label)

    def record(job: jobs_.Job, grade: grading.Grade) -> None:
        nonlocal finished
        started = time.monotonic()
        table.add(grading.csv_row(grade))
        theirs = [grade if other is job else journal.grade(other.key) if journal.done(other) else None
                  for other in work_of[job.student]]
        grading.write_feedback(feedback, job.student, [grading.feedback_section(g) for g in theirs if g is not None])
        grade.phases["recorded"] = round(time.monotonic() - started, 4)
        journal.add(job, grade)
        finished += 1
        progress.done += 1
        progress.failed += bool(grade.fault)
        if grade.fault:
            console.error(f"could not grade {submissions.printable(grade.student)}, stage {grade.stage} "
                          f"({grade.mode}): {grade.fault}")

    work_of: dict[str, list[jobs_.Job]] = {}
    for job in work:
        work_of.setdefault(job.student, []).append(job)
    stopped: TitoError | None = None
    try:
        completed = _run_shown("grading", todo, run_one, record, progress, coordinator, jobs)
    except _lost() as error:
        stopped = TitoError(f"{_gone(error, coordinator.address)}: the {finished} grades finished are in "
                            f"{out}; start the scheduler and its workers again and run the same command to grade "
                            f"the {len(todo) - finished} left", code=1)
        completed = True
    table.close()
    if not completed:
        stopped = jobs_.interrupted(out, finished, len(todo) - finished)
    elif todo:
        console.info(f"{len(todo)} jobs: {progress.words()}")
    return finished, stopped


def _run_shown(what: str, items: list, run_one: Any, record: Any, progress: jobs_.Progress, coordinator: Any,
               jobs: int, fault: Any = None) -> bool:
    """`jobs_.run_all` of `items` under a progress bar: -j threads here, or enough to keep a cluster's workers
    busy. False when interrupted; a lost scheduler is raised (cluster.SchedulerLost) once every box is stopped."""
    from rich.progress import Progress, TextColumn
    from threadpoolctl import threadpool_limits

    threads = jobs if coordinator is None else max(4, 2 * _cluster_threads(coordinator))
    # the judges run in this process's threads, side by side: numpy's BLAS on one thread each (OpenBLAS
    # called from several threads at once, each wanting all cores, can spin for minutes)
    with threadpool_limits(limits=1), Progress(TextColumn(what), *Progress.get_default_columns()[1:],
                                               TextColumn("{task.description}"), console=console.err,
                                               transient=True) as bar:
        task = bar.add_task("", total=len(items))

        def show(words: str) -> None:
            bar.update(task, completed=progress.done, description=words)

        def stop() -> None:
            if coordinator is not None:
                coordinator.stop()
            sandbox.kill_all()

        return jobs_.run_all(items, run_one, threads=threads, record=record, progress=progress, stop=stop,
                             show=show, fatal=(_lost(),), fault=fault)


def _gone(error: Exception, address: str) -> str:
    """What stopped a cluster run: the scheduler gone, or a scheduler left without workers."""
    from tito.cluster import NoWorkers

    return str(error) if isinstance(error, NoWorkers) else f"the Dask scheduler at {address} went away"


def _lost() -> type[Exception]:
    from tito.cluster import SchedulerLost  # distributed itself is imported only with --scheduler

    return SchedulerLost


def _cluster_threads(coordinator: Any) -> int:
    try:
        workers = coordinator.client.scheduler_info().get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
    except Exception:  # noqa: BLE001
        return 2


class _CsvRows:
    """grades.csv as the run goes: one row per grade as it ends (written again in order at the end)."""

    def __init__(self, path: Path) -> None:
        import csv

        if path.is_symlink():
            path.unlink()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(descriptor, 0o600)
        self.stream = os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline="")
        self.writer = csv.writer(self.stream)
        self.writer.writerow(grading.CSV_HEADER)
        self.stream.flush()

    def add(self, row: list[str]) -> None:
        self.writer.writerow(row)
        self.stream.flush()

    def close(self) -> None:
        self.stream.close()


def _write_page(out: Path, journal: jobs_.Journal, work: list[jobs_.Job], plans: dict, found: dict,
                isolation: str, leaderboard: list[dict] | None = None) -> None:
    """report.html: the class at a glance, when tito.report is there."""
    try:
        from tito import report
    except ImportError:
        return
    meta = {"title": f"TinyTorch grades of {len(found)} students", "protection": sandbox.describe(isolation),
            "seeds": {number: plan.seed for number, plan in plans.items()},
            "stages": {number: {"name": plan.stage.name, "max_score": plan.max_score,
                                "checks": [{"id": c.name, "task": c.task, "points": c.points} for c in plan.checks]}
                       for number, plan in plans.items()},
            "students": sorted(found)}
    if leaderboard is not None:
        meta["leaderboard"] = leaderboard
    report.write_report(out, (asdict(grade) for grade in journal.grades(work)), meta)


def _course_of(where: Path) -> Path | None:
    """The nbgrader course folder when `where` is one (or its submitted/ folder), else None: known from the
    instructor's files (the course's nbgrader_config.py beside submitted/), never from a student's."""
    for candidate in (where, where.parent if where.name == "submitted" else None):
        if candidate is not None and (candidate / "submitted").is_dir() and \
                (candidate / "nbgrader_config.py").is_file():
            return candidate
    return None


SHOWN_ROWS = 200  # grades the terminal lists one by one; a larger class gets a line per stage (the CSV has all)


def _print_summary(grades: list[grading.Grade]) -> None:
    from rich.table import Table

    if len(grades) > SHOWN_ROWS:
        for stage, mode in dict.fromkeys((g.stage, g.mode) for g in grades):
            chosen = [g for g in grades if g.stage == stage and g.mode == mode and not g.fault]
            mean = sum(g.score for g in chosen) / max(1, len(chosen))
            full = sum(g.score == g.max_score for g in chosen)
            console.out.print(f"stage {stage} ({mode}): {len(chosen)} graded, mean {mean:.1f}, full marks {full}")
        return
    table = Table(title="Grades", title_justify="left")
    for column in ("student", "stage", "mode", "score"):
        table.add_column(column, no_wrap=True)
    for grade in grades:
        score = "grader fault" if grade.fault else f"{grade.score:g}/{grade.max_score:g}"
        table.add_row(submissions.printable(grade.student), grade.stage, grade.mode, score)
    console.out.print(table)
