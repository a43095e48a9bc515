"""`tito grade` as a run of jobs: locally and on a real Dask cluster (a `dask scheduler` and `dask worker`
processes on 127.0.0.1, started and stopped here), with its reports written as each job ends.

- A class graded on the cluster equals the same class graded here: scores, verdicts, feedback, CSV.
- A worker killed with SIGKILL mid-job loses and doubles nothing; a job that keeps killing its workers is a
  graded 0 with a note, not an endless retry; the scheduler going away stops the run with one sentence.
- Ctrl-C and SIGTERM stop a run within seconds, keep what finished, leave no scratch folder and no box;
  a rerun into the same folder grades only what is missing or changed.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dask_cluster import LocalCluster
from test_grade import ALL_TASKS, HALF_TASKS, submission

from tito import sandbox

from conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sandbox.bwrap_available(), reason="needs bubblewrap")]

FLAGS = ("--stage", "01", "--examples", "3", "--seed", "7", "--timeout", "150", "--memory-mb", "1024")
FULL = 73  # stage 01's points
SLEEP = "import time as _t\n_t.sleep(__SECONDS__)\n"  # at import: a long job that costs no CPU


def sleeper(folder: Path, student: str, seconds: float) -> None:
    submission(folder, student, filled=True, at_import=SLEEP.replace("__SECONDS__", str(seconds)))


def start(*args: str, tmp: Path) -> subprocess.Popen:
    """`tito` in its own session (a signal reaches it alone), its scratch folders under `tmp`."""
    tmp.mkdir(parents=True, exist_ok=True)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "TMPDIR": str(tmp)}
    return subprocess.Popen([sys.executable, "-m", "tito", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, stdin=subprocess.DEVNULL)


def finish(process: subprocess.Popen, timeout: float = 600) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def rows(out: Path) -> list[dict]:
    with open(out / "grades.csv", encoding="utf-8", newline="") as stream:
        return list(csv.DictReader(stream))


def results(out: Path) -> dict[str, dict]:
    """results.json's grades by student, without what differs run to run (times, where the box ran)."""
    grades = json.loads((out / "results.json").read_text())["grades"]
    for grade in grades:
        for volatile in ("seconds", "phases", "worker"):
            grade.pop(volatile)
    return {f"{g['student']}/{g['stage']}/{g['mode']}": g for g in grades}


def journal_lines(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(condition, timeout: float = 240, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def boxes_under(tmp: Path) -> list[str]:
    """Processes whose command line names a path under `tmp` (a box's job folder, its package)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(tmp) in command and ("bwrap" in command or "runner.py" in command):
            found.append(command[:200])
    return found


@pytest.fixture(scope="module")
def small_class(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("small") / "submitted"
    for student in ("ann", "cy", "dee"):
        submission(folder, student, filled=True)
    submission(folder, "bob", filled=False)
    submission(folder, "eve_half", filled=True, tasks=HALF_TASKS)
    submission(folder, "fay_all_but_sum", filled=True, tasks=ALL_TASKS - {"01.8"})
    # a student's id that is not UTF-8 (a folder name is any bytes): on a worker once shut every worker down
    submission(folder, os.fsdecode(b"gus-\xff\xfe"), filled=True)
    return folder


@pytest.fixture(scope="module")
def graded_here(small_class, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("here") / "grades"
    code, _, err = finish(start("grade", str(small_class), "--out", str(out), "-j", "2", *FLAGS,
                                tmp=out.parent / "tmp"))
    assert code == 0, err
    return out


def test_a_class_graded_on_the_cluster_equals_the_class_graded_here(small_class, graded_here, tmp_path):
    out = tmp_path / "grades"
    with LocalCluster(2, logs=tmp_path / "dask") as cluster:
        code, stdout, err = finish(start("grade", str(small_class), "--out", str(out), "--scheduler",
                                         cluster.address, *FLAGS, tmp=tmp_path / "tmp"))
    assert code == 0, err
    assert "on the Dask cluster at" in err
    assert (out / "grades.csv").read_bytes() == (graded_here / "grades.csv").read_bytes()
    assert results(out) == results(graded_here)
    assert (out / "summary.md").read_bytes() == (graded_here / "summary.md").read_bytes()
    for path in (graded_here / "feedback").iterdir():
        assert (out / "feedback" / path.name).read_bytes() == path.read_bytes(), path.name
    grades = json.loads((out / "results.json").read_text())["grades"]
    assert {g["worker"] for g in grades} <= {cluster.address_of(0), cluster.address_of(1)}
    assert all(set(g["phases"]) == {"queued", "built", "run", "judged", "recorded"} for g in grades)
    assert {r["student"]: float(r["score"]) for r in rows(out)}["ann"] == FULL


class Killer:
    """Kills, with SIGKILL, the worker that starts a chosen job (as the workers' events tell, tito.cluster.TOPIC),
    once its box runs, and starts a new worker in its place: `once` at its first start, `always` at each."""

    def __init__(self, client, cluster: LocalCluster, *, once: str, always: str) -> None:
        from tito.cluster import TOPIC, label_digest

        self.cluster, self.once, self.always = cluster, once, always
        self.starts: list[tuple[str, str]] = []  # (label, worker address)
        self.killed: list[str] = []
        labels = {label_digest(label): label for label in (once, always)}
        client.subscribe_topic(TOPIC, lambda event: self.starts.append((labels.get(event[1]["job"], ""),
                                                                         event[1]["worker"])))

    def run(self, process: subprocess.Popen) -> None:
        handled = 0
        while process.poll() is None:
            for label, address in self.starts[handled:]:
                handled += 1
                if label == self.always or label == self.once and self.once not in self.killed:
                    number = next(n for n in self.cluster.alive() if self.cluster.address_of(n) == address)
                    time.sleep(1.0)  # inside its box by now: the box and the worker die together
                    self.cluster.kill_worker(number)
                    self.killed.append(label)
                    self.cluster.add_worker()
            time.sleep(0.2)


def test_a_worker_killed_mid_job_loses_and_doubles_nothing(tmp_path):
    """One job's worker is killed once: the job runs again elsewhere and is graded as if nothing happened.
    Another's is killed each time it runs (the scheduler allows two retries here): it is a graded 0 with a
    note. Every student has one row, and the journal one line per job."""
    from distributed import Client

    folder = tmp_path / "submitted"
    sleeper(folder, "killed_once", 8)
    sleeper(folder, "kills_every_worker", 8)
    for student in ("ann", "bob_after"):
        submission(folder, student, filled=True)
    out = tmp_path / "grades"
    # two retries allowed (a worker lost counts against every job it holds: the job killed once may be counted
    # twice), and a worker holds only the job it runs
    settings = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "2",
                "DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION": "1.0"}
    with LocalCluster(2, logs=tmp_path / "dask", config=settings) as cluster, \
            Client(cluster.address, set_as_default=False) as client:
        killer = Killer(client, cluster, once="killed_once/01/cumulative", always="kills_every_worker/01/cumulative")
        run = start("grade", str(folder), "--out", str(out), "--scheduler", cluster.address, *FLAGS,
                    tmp=tmp_path / "tmp")
        killer.run(run)
        code, _, err = finish(run)
    assert killer.killed.count("killed_once/01/cumulative") == 1
    assert killer.killed.count("kills_every_worker/01/cumulative") >= 1
    assert code == 0, err
    table = rows(out)
    assert sorted(r["student"] for r in table) == sorted(os.listdir(folder))  # one row each
    scores = {r["student"]: float(r["score"]) for r in table}
    assert scores == {"killed_once": FULL, "kills_every_worker": 0, "ann": FULL, "bob_after": FULL}
    killed = results(out)["kills_every_worker/01/cumulative"]
    assert any("ended the grader's worker each time it ran (3 times)" in note for note in killed["notes"])
    assert not killed["fault"]
    assert len(journal_lines(out)) == 4


def test_the_scheduler_going_away_stops_the_run_in_one_sentence_and_a_rerun_grades_the_rest(tmp_path):
    folder = tmp_path / "submitted"
    submission(folder, "aa_first", filled=True)
    for student in ("sleeps_b", "sleeps_c", "sleeps_d"):
        sleeper(folder, student, 15)
    out = tmp_path / "grades"
    with LocalCluster(1, logs=tmp_path / "dask") as cluster:
        run = start("grade", str(folder), "--out", str(out), "--scheduler", cluster.address, *FLAGS,
                    tmp=tmp_path / "tmp")
        wait_for(lambda: len(journal_lines(out)) >= 1, what="a first grade")
        cluster.stop_scheduler()
        code, _, err = finish(run, timeout=120)
    assert code == 1
    sentence = [line for line in err.splitlines() if "went away" in line]
    assert sentence and "run the same command to grade the" in sentence[0], err
    assert "Traceback" not in err
    finished = len(journal_lines(out))
    assert 1 <= finished < 4 and len(rows(out)) == finished  # the finished grades are written
    assert len(results(out)) == finished
    assert not boxes_under(tmp_path / "tmp")
    with LocalCluster(1, logs=tmp_path / "dask-again") as cluster:
        code, _, err = finish(start("grade", str(folder), "--out", str(out), "--scheduler", cluster.address,
                                    *FLAGS, tmp=tmp_path / "tmp"))
    assert code == 0, err
    assert f"{finished} grades are kept from the last run" in err
    assert sorted(r["student"] for r in rows(out)) == sorted(os.listdir(folder))
    assert len(journal_lines(out)) == 4  # compacted: one line per job


@pytest.mark.parametrize("stop,where", [(signal.SIGTERM, "here"), (signal.SIGINT, "here"),
                                        (signal.SIGTERM, "cluster")], ids=["SIGTERM", "Ctrl-C", "SIGTERM-cluster"])
def test_an_interrupted_run_stops_within_seconds_keeps_what_finished_and_leaves_nothing(tmp_path, stop, where):
    folder = tmp_path / "submitted"
    submission(folder, "aa_first", filled=True)
    for student in ("sleeps_b", "sleeps_c", "sleeps_d", "sleeps_e"):
        sleeper(folder, student, 20)
    out, tmp = tmp_path / "grades", tmp_path / "tmp"
    cluster = LocalCluster(1, logs=tmp_path / "dask").__enter__() if where == "cluster" else None
    try:
        flags = ("--scheduler", cluster.address) if cluster else ("-j", "1")
        run = start("grade", str(folder), "--out", str(out), *flags, *FLAGS, tmp=tmp)
        wait_for(lambda: len(journal_lines(out)) >= 1, what="a first grade")
        if cluster is None:
            wait_for(lambda: bool(boxes_under(tmp)), what="the next box")
        else:
            time.sleep(3)  # the next job runs on the worker
        _interrupt_and_check(run, stop, out, tmp, ordered=cluster is None)
    finally:
        if cluster is not None:
            cluster.stop()


def _interrupt_and_check(run: subprocess.Popen, stop: int, out: Path, tmp: Path, *, ordered: bool) -> None:
    """`ordered`: -j 1 grades in the order of the students; on a cluster the coordinator's threads hand their
    jobs to the scheduler in whichever order they are ready, so the first to finish may be any of them."""
    os.kill(run.pid, stop)
    sent = time.monotonic()
    code, _, err = finish(run, timeout=120)
    stopped_after = time.monotonic() - sent
    assert code == 130, err
    assert stopped_after < 15, f"stopped {stopped_after:.1f} s after {stop!r}"  # within seconds, not the queue
    said = [line for line in err.splitlines() if "interrupted: the " in line]
    assert said and "run the same command again" in said[0], err
    assert "Traceback" not in err
    finished = int(said[0].split("interrupted: the ")[1].split()[0])  # 1, or 2 if the next ended meanwhile
    assert 1 <= finished < 5 and len(rows(out)) == len(results(out)) == finished
    first = rows(out)[0]["student"]
    assert first == "aa_first" or not ordered
    assert f"{first}/01/cumulative" in results(out) and (out / "feedback" / f"{first}.md").is_file()
    assert not list(tmp.iterdir()), list(tmp.iterdir())  # the scratch folders (the drawn cases) are gone
    assert not boxes_under(tmp)


def test_a_rerun_grades_only_what_is_missing_or_changed(small_class, graded_here, tmp_path):
    folder = tmp_path / "submitted"
    shutil.copytree(small_class, folder)
    out = tmp_path / "grades"
    shutil.copytree(graded_here, out)
    before = results(out)
    shutil.rmtree(folder / "cy")
    submission(folder, "cy", filled=True, tasks=HALF_TASKS)  # changed since
    submission(folder, "new_student", filled=False)  # missing
    code, _, err = finish(start("grade", str(folder), "--out", str(out), "-j", "2", *FLAGS, tmp=tmp_path / "tmp"))
    assert code == 0, err
    assert "6 grades are kept from the last run" in err and "grading the 2 others" in err
    after = results(out)
    assert {key for key in after if after[key] != before.get(key)} == {"cy/01/cumulative",
                                                                      "new_student/01/cumulative"}
    assert after["cy/01/cumulative"]["score"] < FULL
    code, _, err = finish(start("grade", str(folder), "--out", str(out), "-j", "2", *FLAGS, tmp=tmp_path / "tmp"))
    assert code == 0 and "8 grades are kept" in err and "grading the 0 others" in err
    # one student again: the class's reports keep everyone's recorded grades (they once shrank to that student)
    table = (out / "grades.csv").read_bytes()
    code, _, err = finish(start("grade", str(folder), "--out", str(out), "--student", "cy", *FLAGS,
                                tmp=tmp_path / "tmp"))
    assert code == 0 and "1 grades are kept" in err, err
    assert (out / "grades.csv").read_bytes() == table and results(out) == after


def full_course(folder: Path, student: str, *, skip: set[str] = frozenset(), stub: set[str] = frozenset()) -> None:
    """A student's folder of all 13 notebooks, filled with the reference (but those in `stub`; none of `skip`)."""
    from student import fill

    for module in sorted((REPO / "modules").iterdir()):
        if not module.is_dir() or module.name in skip:
            continue
        path = folder / student / f"{module.name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(module / f"{module.name}.ipynb", path)
        if module.name not in stub:
            fill(path, REPO / "solutions" / module.name / f"{module.name}.py")


def test_the_gpt_leaderboard_is_trained_on_the_cluster_and_ranked_by_the_grader(tmp_path):
    """Each student's own GPT trained in a box on a worker, judged and ranked here: those that cannot train are
    ranked last with their reason; the ranking is in leaderboard.csv and report.html."""
    folder = tmp_path / "submitted"
    full_course(folder, "ann_full")
    full_course(folder, "bob_stubs_13", stub={"13_transformer"})
    full_course(folder, "cy_without_13", skip={"13_transformer"})
    out = tmp_path / "grades"
    with LocalCluster(2, logs=tmp_path / "dask") as cluster:
        code, stdout, err = finish(start("grade", str(folder), "--out", str(out), "--scheduler", cluster.address,
                                         "--milestone", "gpt", "--steps", "20", "--seed", "7", tmp=tmp_path / "tmp"))
    assert code == 0, err
    table = rows_of(out / "leaderboard.csv")
    assert [row["student"] for row in table] == ["ann_full", "bob_stubs_13", "cy_without_13"]
    first, *last = table
    assert first["rank"] == "1" and 0 < float(first["validation_loss"]) < 4.43  # log(84): a uniform guess
    assert all(row["rank"] == "2" and not row["validation_loss"] and row["reason"] for row in last)
    assert "no notebook for 13_transformer was submitted" in last[1]["reason"]
    page = (out / "report.html").read_text()
    assert "ann_full" in page and "leaderboard" in page.lower()
    assert "GPT leaderboard (20 steps)" in stdout


def rows_of(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as stream:
        return list(csv.DictReader(stream))


def test_two_runs_into_one_output_folder_are_not_let_interleave_their_reports(tmp_path):
    from tito import jobs
    from tito.errors import TitoError

    first = jobs.Journal(tmp_path / "out")
    try:
        with pytest.raises(TitoError, match="another tito grade is writing its reports into"):
            jobs.Journal(tmp_path / "out")
    finally:
        first.close()
    jobs.Journal(tmp_path / "out").close()  # free again once the first has ended


def test_a_scheduler_left_without_workers_stops_the_run_in_one_sentence(monkeypatch):
    """Every worker gone (or none started) and the scheduler still there: the coordinator does not wait for
    ever, it stops the run as for a lost scheduler, saying how to start workers."""
    from distributed import Client
    from distributed import LocalCluster as InProcess

    from tito import cluster, sandbox

    monkeypatch.setattr(cluster, "NO_WORKERS_AFTER", 0.5)
    with InProcess(n_workers=0, processes=False, dashboard_address=":0") as local, \
            Client(local, set_as_default=False) as client:
        coordinator = cluster.Coordinator(client, local.scheduler_address, examples=None, isolation="process",
                                          limits=sandbox.Limits())
        started = time.monotonic()
        with pytest.raises(cluster.NoWorkers, match="has had no worker for 0.5 s .*dask worker"):
            coordinator._wait(client.submit(sum, [1, 2], key="tito-test-no-workers"))
        assert time.monotonic() - started < 30
