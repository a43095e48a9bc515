"""`tito course autograde NN`: a class autograded in parallel, here (-j 2) and on a real Dask cluster, leaves the
gradebook a serial `nbgrader autograde NN` leaves; a rerun grades only what is new or changed; SIGTERM stops it
within seconds and keeps what was merged; bad input is one sentence and changes nothing.

One course with 01 generated and a class of five (alice and bob through the real exchange; carol late, with a
score set by hand; frank with cells deleted; zed's notebook not JSON, which nbgrader fails on), copied once per
way of grading it."""

from __future__ import annotations

import csv
import fcntl
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from dask_cluster import LocalCluster
from nbgrader.api import Gradebook
from test_course import BIN, STAGES, nbgrader, prepare, submit

from conftest import REPO

pytestmark = pytest.mark.slow  # real nbgrader, kernels and sandboxes, a real Dask cluster

NAME = STAGES[0]
SOURCE = REPO / "solutions" / NAME / f"{NAME}.py"
EXCHANGED = {"alice": "reference", "bob": "untouched"}  # fetched and submitted as students, then collected
FILED = {"carol": "half", "frank": "deleted_cells"}  # what collect leaves, filed directly
NOW = datetime.now(UTC)


def stamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The course, 01 generated with a due date a day from now and late work scored 0 (the penalty is the score),
    its key made, the class submitted; carol's submission late, with task 01.2 scored by hand after an earlier
    autograde."""
    from tito.commands.course import write_course
    from tito.grading import course_key

    root = tmp_path_factory.mktemp("autograde")
    course = root / "course"
    write_course(REPO, course)
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    course_key(course, course, None)
    nbgrader("generate_assignment", NAME, cwd=course)
    nbgrader("release_assignment", NAME, cwd=course)
    for student, kind in EXCHANGED.items():
        home = root / "students" / student
        home.mkdir(parents=True)
        nbgrader("fetch_assignment", NAME, cwd=home, config=course / "student_nbgrader_config.py")
        prepare(kind, home / NAME / f"{NAME}.ipynb", SOURCE, course)
        nbgrader("submit", NAME, "--student", student, cwd=home, config=course / "student_nbgrader_config.py")
    nbgrader("collect", NAME, cwd=course)
    for student, kind in FILED.items():
        notebook = root / "students" / student / NAME / f"{NAME}.ipynb"
        notebook.parent.mkdir(parents=True)
        shutil.copy2(course / "release" / NAME / f"{NAME}.ipynb", notebook)
        prepare(kind, notebook, SOURCE, course)
        submit(course, student, NAME, notebook)
    (course / "submitted" / "carol" / NAME / "timestamp.txt").write_text(stamp(NOW + timedelta(days=2)) + "\n")
    submit(course, "zed", NAME, course / "release" / NAME / f"{NAME}.ipynb")
    (course / "submitted" / "zed" / NAME / f"{NAME}.ipynb").write_text('{"cells": [')
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{course / 'gradebook.db'}", "tinytorch") as gradebook:
        warnings.simplefilter("ignore")  # SQLAlchemy's, about the objects nbgrader's add_submission builds
        gradebook.update_or_create_assignment(NAME, duedate=stamp(NOW + timedelta(days=1)))
        gradebook.update_or_create_student("carol")
        gradebook.update_or_create_submission(NAME, "carol")
        gradebook.find_grade("task-01_2", NAME, NAME, "carol").manual_score = 0.5
        gradebook.db.commit()
    return course


def copy_of(base: Path, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copytree(base, where / "course", symlinks=True))


def autograde_command(course: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "tito", "course", "autograde", "01", "--course", str(course), *args]


def environment(course: Path) -> dict[str, str]:
    """What test_course's nbgrader() runs in: the project's bin first, the course as HOME (no ~/.jupyter config)."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "HOME": str(course)}
    env.pop("PYTHONPATH", None)
    return env


def autograde(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(autograde_command(course, *args), cwd=REPO, env=environment(course), capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)


def contents(course: Path, students: set[str] | None = None) -> dict:
    """Everything autograde and the instructor write in the gradebook, with nbgrader's API (its row ids aside, which
    are random): each submission's timestamp and extension, each notebook's flag and late penalty, each grade's
    scores and needs_manual_grade, each comment's texts; the students; and the rows per table."""
    found: dict = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "tinytorch") as gradebook:
        for assignment in gradebook.assignments:
            for submission in assignment.submissions:
                if students is not None and submission.student.id not in students:
                    continue
                found[assignment.name, submission.student.id] = (submission.timestamp, submission.extension, [(
                    notebook.name, notebook.flagged, notebook.late_submission_penalty,
                    sorted((grade.name, grade.auto_score, grade.manual_score, grade.extra_credit,
                            grade.needs_manual_grade) for grade in notebook.grades),
                    sorted((comment.name, comment.auto_comment, comment.manual_comment) for comment in
                           notebook.comments)) for notebook in submission.notebooks])
        if students is None:
            found["students"] = sorted((s.id, s.first_name, s.last_name, s.email, s.lms_user_id)
                                       for s in gradebook.students)
    if students is None:
        with sqlite3.connect(course / "gradebook.db") as database:
            tables = [name for (name,) in database.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            found["rows"] = {name: database.execute(f"SELECT COUNT(*) FROM {name}").fetchone()[0] for name in tables}
            found["courses"] = sorted(database.execute("SELECT * FROM course").fetchall())
    return found


def exported(course: Path) -> list[dict]:
    nbgrader("export", cwd=course)
    with open(course / "grades.csv", encoding="utf-8") as stream:
        return sorted(csv.DictReader(stream), key=lambda row: (row["assignment"], row["student_id"]))


def timed(command) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = command()
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def serial(base, tmp_path_factory):
    course = copy_of(base, tmp_path_factory.mktemp("serial"))
    done, seconds = timed(lambda: nbgrader("autograde", NAME, cwd=course, check=False))
    assert done.returncode == 1, done.stderr[-3000:]  # zed's notebook
    return SimpleNamespace(root=course, seconds=seconds, contents=contents(course), csv=exported(course))


@pytest.fixture(scope="module")
def parallel(base, tmp_path_factory):
    course = copy_of(base, tmp_path_factory.mktemp("parallel"))
    done, seconds = timed(lambda: autograde(course, "-j", "2"))
    return SimpleNamespace(root=course, seconds=seconds, done=done, contents=contents(course), csv=exported(course))


def test_a_class_autograded_two_at_a_time_leaves_the_gradebook_a_serial_autograde_leaves(serial, parallel):
    count = len(EXCHANGED) + len(FILED) + 1
    print(f"\n{count} submissions of {NAME}: serial `nbgrader autograde` {serial.seconds:.1f} s, "
          f"`tito course autograde -j 2` {parallel.seconds:.1f} s")
    assert parallel.done.returncode == 1, parallel.done.stderr
    assert parallel.contents == serial.contents
    assert parallel.csv == serial.csv
    # what the class holds: a late penalty, a score set by hand kept (and so to be reviewed), cells deleted
    _, _, [(_, _, penalty, grades, _)] = parallel.contents[NAME, "carol"]
    assert penalty is not None and penalty > 0
    [(_, auto, manual, _, review)] = [grade for grade in grades if grade[0] == "task-01_2"]
    assert auto is not None and manual == 0.5 and review is True
    assert any(grade[1] is None for grade in parallel.contents[NAME, "frank"][2][0][3])
    said = parallel.done.stderr
    assert "autograded 4 of 5 submissions of 01_tensor" in said
    failures = [line.strip() for line in said.splitlines() if line.startswith("  ")]
    assert len(failures) == 1 and failures[0].startswith(
        "zed: nbgrader exited with status 1: nbformat.reader.NotJSONError: Notebook does not appear to be JSON"), said
    assert not list(parallel.root.glob(".tito-autograde-*"))


def test_each_notebook_ran_in_its_own_kernel_while_another_ran_beside_it(parallel):
    """nbgrader names its kernel's sockets in the course folder; two autogrades started together would connect to
    each other's kernels, which refuse them, and run no cell (the judge's scores would not show it)."""
    for student in [*EXCHANGED, *FILED]:
        notebook = nbformat.read(parallel.root / "autograded" / student / NAME / f"{NAME}.ipynb", as_version=4)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        assert code[0].execution_count == 1, student
        printed = "".join(str(output.get("text", "")) + str(output.get("evalue", ""))
                          for cell in code for output in cell.outputs)
        assert "the kernel stopped here" not in printed and "ran out here" not in printed, student


def test_a_class_autograded_on_a_dask_cluster_leaves_the_gradebook_a_serial_autograde_leaves(base, serial, tmp_path):
    course = copy_of(base, tmp_path)
    with LocalCluster(workers=2, logs=tmp_path / "dask") as cluster:
        done = autograde(course, "--scheduler", cluster.address)
        assert "close_runners" in cluster.log("worker-0") + cluster.log("worker-1")
    assert done.returncode == 1, done.stderr
    assert "on 2 Dask workers" in done.stderr
    assert contents(course) == serial.contents


def test_a_rerun_autogrades_only_what_is_new_or_changed_and_force_autogrades_again(parallel):
    course, before = parallel.root, parallel.contents
    done = autograde(course, "--student", "alice", "--student", "carol")
    assert done.returncode == 0, done.stderr
    assert "nothing to autograde: the 2 submissions of 01_tensor are autograded already and unchanged" in done.stderr
    assert contents(course) == before
    # bob hands in again; zed, whom nbgrader failed on, is tried again
    resubmitted = NOW + timedelta(hours=1)
    (course / "submitted" / "bob" / NAME / "timestamp.txt").write_text(stamp(resubmitted) + "\n")
    notebook = course / "autograded" / "alice" / NAME / f"{NAME}.ipynb"
    alice_graded = notebook.stat().st_mtime_ns
    done = autograde(course, "-j", "2")
    assert done.returncode == 1, done.stderr
    assert "autograded 1 of 2 submissions of 01_tensor" in done.stderr
    assert "3 autograded already and unchanged were left as they are" in done.stderr
    now = contents(course)
    assert now[NAME, "bob"][0] == resubmitted.replace(tzinfo=None)
    assert {key: value for key, value in now.items() if key != (NAME, "bob")} == \
        {key: value for key, value in before.items() if key != (NAME, "bob")}
    assert notebook.stat().st_mtime_ns == alice_graded
    done = autograde(course, "--student", "alice", "--force")
    assert done.returncode == 0, done.stderr
    assert "autograded 1 of 1 submissions of 01_tensor" in done.stderr
    assert notebook.stat().st_mtime_ns != alice_graded
    assert contents(course)[NAME, "alice"] == before[NAME, "alice"]


def _scored(course: Path) -> int:
    """Submissions in the gradebook with an autograded score (read-only, beside the run that writes it)."""
    with sqlite3.connect(f"{(course / 'gradebook.db').as_uri()}?mode=ro", uri=True) as database:
        return database.execute(
            "SELECT COUNT(DISTINCT submitted_notebook.assignment_id) FROM grade JOIN submitted_notebook ON "
            "submitted_notebook.id = grade.notebook_id WHERE grade.auto_score IS NOT NULL").fetchone()[0]


def _left_behind(course: Path, pid: int) -> list[str]:
    """Processes of the run still alive (in the course folder, or holding its scratch), and scratch left."""
    found = [str(path) for path in [*course.glob(".tito-autograde-*"), *Path("/tmp").glob(f"tito-autograde-{pid}-*")]]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (os.readlink(entry / "cwd").startswith(str(course))
                                         or f"tito-autograde-{pid}-" in (entry / "cmdline").read_text()):
                found.append(f"process {entry.name}: {(entry / 'cmdline').read_bytes()[:200]!r}")
        except OSError:
            continue
    return found


def test_sigterm_stops_within_seconds_keeps_what_was_merged_and_a_rerun_does_the_rest(base, serial, tmp_path):
    course = copy_of(base, tmp_path)
    process = subprocess.Popen(autograde_command(course, "-j", "2"), cwd=REPO, env=environment(course),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while _scored(course) == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert process.poll() is None, "the run ended before a submission was merged"
    process.send_signal(signal.SIGTERM)
    started = time.monotonic()
    _, said = process.communicate(timeout=60)
    stopped = time.monotonic() - started
    print(f"\nstopped {stopped:.1f} s after SIGTERM")
    assert stopped < 10
    assert process.returncode == 128 + signal.SIGTERM
    last = said.strip().splitlines()[-1]
    assert last.startswith("warning: interrupted: ") and "run the same command again to autograde the other" in last
    merged = int(last.split("interrupted: ")[1].split()[0])
    assert 1 <= merged < 5
    deadline = time.monotonic() + 5
    while _left_behind(course, process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _left_behind(course, process.pid) == []
    with sqlite3.connect(course / "gradebook.db") as database:
        assert database.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    graded = {key[1] for key, value in contents(course).items() if isinstance(key, tuple)
              and any(grade[1] is not None for notebook in value[2] for grade in notebook[3])}
    assert len(graded) == merged
    assert contents(course, graded) == {key: value for key, value in serial.contents.items()
                                        if isinstance(key, tuple) and key[1] in graded}
    done = autograde(course, "-j", "2")
    assert done.returncode == 1, done.stderr
    assert f"{merged} autograded already and unchanged were left as they are" in done.stderr
    assert contents(course) == serial.contents


@pytest.fixture(scope="module")
def untouched(base, tmp_path_factory):
    return copy_of(base, tmp_path_factory.mktemp("refused"))


def tree(folder: Path) -> dict:
    return {path: (path.stat().st_size, path.stat().st_mtime_ns) for path in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("args, said", [
    (["99"], "unknown stage '99'"),
    (["02"], "02_autograd is not in the gradebook of {course} yet: run `nbgrader generate_assignment 02_autograd`"),
    (["01", "--student", "nobody"], "no submission of 01_tensor from nobody in {course}/submitted"),
    (["01", "--scheduler", "127.0.0.1:1"], "grading on a cluster needs Dask distributed"),
    (["01", "--locked"], "another `tito course autograde` is running on {course}"),
])
def test_bad_input_is_one_sentence_and_changes_nothing(untouched, args, said, capsys, monkeypatch):
    from tito.main import main

    if "--scheduler" in args:
        monkeypatch.setitem(sys.modules, "distributed", None)  # as where the cluster extra is not installed
    before = tree(untouched)
    lock = None
    if "--locked" in args:  # another run holds the course
        args = args[:1]
        lock = os.open(untouched / ".tito-autograde.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = tree(untouched)
    try:
        code = main(["course", "autograde", *args, "--course", str(untouched)])
    finally:
        if lock is not None:
            os.close(lock)
    err = capsys.readouterr().err
    assert code == 2
    assert said.format(course=untouched) in " ".join(err.split()), err
    assert len(err.strip().splitlines()) == 1, err
    assert tree(untouched) == before


def test_a_folder_that_is_not_a_course_or_has_no_submissions_is_refused(untouched, tmp_path, capsys):
    from tito.main import main

    assert main(["course", "autograde", "01", "--course", str(tmp_path)]) == 2
    assert f"{tmp_path} is not a TinyTorch course" in capsys.readouterr().err
    empty = copy_of(untouched, tmp_path / "empty")
    shutil.rmtree(empty / "submitted")
    (empty / "submitted").mkdir()
    before = tree(empty)
    assert main(["course", "autograde", "01", "--course", str(empty)]) == 2
    assert f"no submission of 01_tensor in {empty / 'submitted'}" in " ".join(capsys.readouterr().err.split())
    assert tree(empty) == before
