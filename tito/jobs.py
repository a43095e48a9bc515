"""A class's grading as jobs: each (submission, stage, mode) built, run in a box (in a thread here, or on a
Dask worker), judged and recorded by this process, exactly once, as it finishes.

- The journal (`results.jsonl` in the output folder) holds one line per grade, appended and flushed as each job
  ends; grades.csv gains its row and the student's feedback file is written again at the same moment. The
  whole reports (grades.csv in order, results.json, summary.md) are written from the journal at the end, and
  also when the run is interrupted, so nothing finished is lost.
- A job's digest says what its grade depends on (the plan, the notebooks it reads, the reference standing in,
  the limits): a rerun into the same folder grades only the jobs whose digest has no grade yet (or a grader
  fault), and keeps the rest.
- Ctrl-C or SIGTERM: no job starts after it, every open box is killed, the queued work is dropped, the reports
  are written from what finished and the scratch folders are removed, within seconds.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tito import engine, grading
from tito.errors import TitoError

JOURNAL = "results.jsonl"


@dataclass
class Job:
    plan: engine.Plan
    student: str
    mode: str
    digest: str = ""
    queued: float = 0.0  # when it was handed to the pool (monotonic)

    @property
    def key(self) -> str:
        return json.dumps([self.student, self.plan.stage.number, self.mode])


def digest(job: Job, notebooks: dict[str, bytes], notes: list[str], reference: dict[str, str], settings: str) -> str:
    """What a job's grade depends on: the plan (suite, check library, seed, examples), the notebooks of the
    stages it exports (the reference's code for those it stands in for), the submission's notes and the
    grading settings (protection, limits)."""
    hashed = hashlib.sha256(json.dumps([job.plan.fingerprint, job.mode, settings, notes]).encode())
    for name, code in sorted(reference.items()):
        hashed.update(f"\0reference {name}\0".encode() + code.encode())
    for name in sorted(notebooks):
        hashed.update(f"\0notebook {name}\0".encode() + hashlib.sha256(notebooks[name]).digest())
    return hashed.hexdigest()[:32]


class Journal:
    """results.jsonl: one grade per line ({"key", "digest", "grade"}), appended by this process alone. What
    is kept in memory is an index (key -> where its newest line is), never the grades."""

    def __init__(self, out: Path) -> None:
        grading.private_folder(out)
        self.path = out / JOURNAL
        self.index: dict[str, tuple[int, str, bool]] = {}  # key -> (offset, digest, a grader fault)
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            self.path.unlink()  # never appended through a link someone left
        if self.path.is_file():
            self._read()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        os.fchmod(descriptor, 0o600)
        self.stream = os.fdopen(descriptor, "ab")
        self.lock_folder(out)
        self.lock = threading.Lock()

    def lock_folder(self, out: Path) -> None:
        """One run at a time writes into `out`: a second is refused (two writers would interleave the journal)."""
        self.folder_lock = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self.folder_lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.folder_lock)
            self.stream.close()
            raise TitoError(f"another tito grade is writing its reports into {out} now: wait for it to end, or "
                            "give this run another --out") from None

    def _read(self) -> None:
        with open(self.path, "rb") as stream:
            offset = 0
            for line in stream:
                try:
                    entry = json.loads(line)
                    self.index[entry["key"]] = (offset, entry["digest"], bool(entry["grade"]["fault"]))
                except (ValueError, KeyError, TypeError):  # a line cut by a run killed mid-write
                    pass
                offset += len(line)

    def done(self, job: Job) -> bool:
        """A grade of this job with the same digest is in the journal, and it is not a grader fault."""
        found = self.index.get(job.key)
        return found is not None and found[1] == job.digest and not found[2]

    def add(self, job: Job, grade: grading.Grade) -> None:
        line = json.dumps({"key": job.key, "digest": job.digest, "grade": asdict(grade)}).encode() + b"\n"
        with self.lock:
            self.stream.seek(0, os.SEEK_END)
            offset = self.stream.tell()
            self.stream.write(line)
            self.stream.flush()
            self.index[job.key] = (offset, job.digest, bool(grade.fault))

    def grade(self, key: str) -> grading.Grade | None:
        found = self.index.get(key)
        if found is None:
            return None
        with open(self.path, "rb") as stream:
            stream.seek(found[0])
            return grading.Grade.from_json(json.loads(stream.readline())["grade"])

    def grades(self, jobs: list[Job]) -> Iterator[grading.Grade]:
        """The newest grade of each of `jobs` that has one, in their order, read one at a time."""
        with open(self.path, "rb") as stream:
            for job in jobs:
                found = self.index.get(job.key)
                if found is not None and found[1] == job.digest:
                    stream.seek(found[0])
                    yield grading.Grade.from_json(json.loads(stream.readline())["grade"])

    def compact(self, keep: list[Job]) -> None:
        """The journal again with only the newest line of each key (those of `keep` first): superseded lines go."""
        scratch = self.path.with_name(f".{JOURNAL}.{os.getpid()}")
        order = [job.key for job in keep] + [key for key in self.index if key not in {j.key for j in keep}]
        index = {}
        with open(self.path, "rb") as source, open(scratch, "wb") as target:
            os.fchmod(target.fileno(), 0o600)
            for key in dict.fromkeys(order):
                if key not in self.index:
                    continue
                offset, entry_digest, fault = self.index[key]
                source.seek(offset)
                index[key] = (target.tell(), entry_digest, fault)
                target.write(source.readline())
        with self.lock:
            self.stream.close()
            os.replace(scratch, self.path)
            self.index = index
            self.stream = open(self.path, "ab")  # noqa: SIM115 (closed by close())

    def close(self) -> None:
        self.stream.close()
        os.close(self.folder_lock)  # and the lock on the folder with it


class Stop(Exception):
    """SIGTERM, raised in the main thread like Ctrl-C's KeyboardInterrupt."""


@dataclass
class Progress:
    total: int
    done: int = 0
    failed: int = 0
    retried: int = 0
    running: set[str] = field(default_factory=set)
    starts: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, label: str) -> None:
        with self.lock:
            self.starts[label] = self.starts.get(label, 0) + 1
            if self.starts[label] > 1:
                self.retried += 1
            self.running.add(label)

    def words(self) -> str:
        return (f"done {self.done}/{self.total}, running {len(self.running)}, retried {self.retried}, "
                f"failed {self.failed}")


def run_all(jobs: list[Any], run_one: Callable[[Any, Progress], Any], *, threads: int,
            record: Callable[[Any, Any], None], progress: Progress, stop: Callable[[], None],
            show: Callable[[str], None], fatal: tuple[type[Exception], ...] = (),
            fault: Callable[[Any, Exception], Any] | None = None) -> bool:
    """Run `jobs` on `threads` threads, recording each grade as it ends (in this thread: one writer). Returns
    False when interrupted (Ctrl-C, SIGTERM): then `stop` ends what runs, and what had not finished is dropped.
    A job raising one of `fatal` (the scheduler lost) stops the run the same way, and is raised here; any other
    exception is a fault of the grader, recorded as `fault` words it (by default a grade marked so)."""
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum: int, frame: Any) -> None:
        raise Stop()

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        signal.signal(signal.SIGTERM, terminate)
    stopping = threading.Event()
    pool = ThreadPoolExecutor(threads)

    def guarded(job: Any) -> Any:
        if stopping.is_set():
            return None
        return run_one(job, progress)

    pending: dict[Future, Any] = {}
    try:
        for job in jobs:
            if isinstance(job, Job):
                job.queued = time.monotonic()
            pending[pool.submit(guarded, job)] = job
        while pending:
            finished, _ = wait(list(pending), timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:
                job = pending.pop(future)
                try:
                    grade = future.result()
                except fatal:
                    stopping.set()
                    for other in pending:
                        other.cancel()
                    stop()
                    raise
                except Exception as error:  # a fault of the grader: the row stays, marked, and the run says so
                    grade = fault(job, error) if fault else grading.fault_grade(job.plan, job.student, job.mode,
                                                                                 error)
                if grade is not None:
                    record(job, grade)
            show(progress.words())
        return True
    except (KeyboardInterrupt, Stop):
        stopping.set()
        for future in pending:
            future.cancel()
        stop()
        return False
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def interrupted(out: Path, finished: int, left: int) -> TitoError:
    return TitoError(f"interrupted: the {finished} grades finished are in {out} (grades.csv, results.json, "
                     f"feedback/); run the same command again to grade the {left} left", code=130)

