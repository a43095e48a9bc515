"""Grading on a Dask cluster: the connection, and what a worker runs.

The cluster is one more place the box runs, not a second engine. The trusted coordinator (`tito grade
--scheduler`, `tito course autograde --scheduler`) keeps the course key, draws the plans, builds every package
and judges and records every result itself; a worker only writes a package it is sent into a job folder of its
own, drives the box exactly as `tito grade` does on one machine (its clocks, its CPU counts, its byte budget)
and sends back what the box said, as bytes (engine.Report). Workers are trusted processes of the instructor's:
plain `dask worker` processes started in the project's environment, with bubblewrap installed.
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito.errors import TitoError

NEEDS_EXTRA = "grading on a cluster needs Dask distributed: pip install 'tinytorch[cluster]'"


def client(address: str, *, timeout: float = 10.0) -> Any:
    """A Dask client of the scheduler at `address`, or a TitoError in one sentence saying what to do."""
    try:
        import distributed
    except ImportError:
        raise TitoError(NEEDS_EXTRA) from None
    if "://" not in address:
        address = f"tcp://{address}"
    # distributed logs its reconnection attempts with tracebacks; this process says what happened in one sentence
    for name in [*logging.root.manager.loggerDict, "distributed"]:
        if name.split(".")[0] == "distributed":
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    try:
        connected = distributed.Client(address, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise TitoError(f"no Dask scheduler answered at {address} within {timeout:g} s ({_words(error)}): start one "
                        "with `dask scheduler` and workers with `dask worker ADDRESS` (docs/instructors.md, \"Grading a"
                        " large course\"), or grade on this machine without --scheduler") from None
    if not connected.scheduler_info().get("workers"):
        _wait_for_workers(connected, address, timeout)
    return connected


def _wait_for_workers(connected: Any, address: str, timeout: float) -> None:
    try:
        connected.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError):
        connected.close()
        raise TitoError(f"the Dask scheduler at {address} has no workers (none joined within {timeout:g} s): start "
                        f"some with `dask worker {address}` in the project's environment") from None


def _words(error: BaseException) -> str:
    text = " ".join(str(error).split())[:160]
    return text or type(error).__name__


# ---------------------------------------------------------------------------------------------------
# On the worker


@dataclass
class BoxJob:
    """What a worker needs to run one (submission, stage): the plan's identity (the worker draws the same cases
    from the same seed, and proves it by the fingerprint) and the package files built by the coordinator."""
    stage: str  # "01_tensor"
    seed: int
    examples: int | None
    fingerprint: str  # engine._fingerprint of the coordinator's plan: the worker's must be the same
    files: dict[str, str]  # package path -> code, as grading.package_files built them
    isolation: str
    limits: Any  # sandbox.Limits
    label: str = ""  # who and what, for the worker's events (never read back as a grade)


@dataclass
class BoxOutcome:
    report: Any  # engine.Report, its package None and its package files named in `files`
    unwritable: str = ""  # why the package could not be written from the files (then no box ran)
    worker: str = ""
    seconds: dict[str, float] = field(default_factory=dict)  # "written", "run" on the worker


_PLANS: dict[tuple[str, int, str], Any] = {}
_PLANNING = threading.Lock()
_SLOTS: list[int] = []
_SLOTTING = threading.Lock()
_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """This worker's folder for plans and job folders (crossable by the box users, not listable)."""
    with _PLANNING:
        if not _SCRATCH:
            folder = Path(tempfile.mkdtemp(prefix="tito-worker-"))
            folder.chmod(0o711)
            _SCRATCH.append(folder)
            atexit.register(shutil.rmtree, folder, True)  # the cases it was sent go with the worker
        return _SCRATCH[0]


def _plan(job: BoxJob, cases: str) -> Any:
    """The coordinator's plan on this worker: its cases as sent (`cases`, wire text), never drawn again here."""
    from tito import engine
    from tito.project import find_root
    from tito.project import stage as find_stage
    from tito.shipped import wire

    key = (job.stage, job.seed, job.fingerprint)
    with _PLANNING:
        plan = _PLANS.get(key)
    if plan is None:
        stage = find_stage(find_root(Path(__file__).resolve().parents[1]), job.stage)
        plan = engine.make_plan(stage, seed=job.seed, jobs=_scratch(), examples=job.examples,
                                cases=wire.loads(cases))
        with _PLANNING:
            _PLANS[key] = plan
    mine = engine.plan_fingerprint(plan)
    if mine != job.fingerprint:
        raise RuntimeError(f"this worker's checkout draws other cases for {job.stage} (fingerprint {mine}, the "
                           f"coordinator's {job.fingerprint}): start the workers from the same checkout and versions")
    return plan


def _slot() -> int:
    with _SLOTTING:
        used = set(_SLOTS)
        slot = next(n for n in range(len(used) + 1) if n not in used)
        _SLOTS.append(slot)
        return slot


def _free(slot: int) -> None:
    with _SLOTTING:
        _SLOTS.remove(slot)


def run_box(job: BoxJob, cases: str) -> BoxOutcome:
    """Run one job's checks in a box on this worker: what `tito grade` does in each of its threads, up to the
    judging, which is the coordinator's."""
    from tito import engine, grading, package, sandbox

    started = time.monotonic()
    worker = _worker_name()
    _event("started", job.label, worker)
    if job.isolation == "bwrap" and not sandbox.bwrap_available():
        raise RuntimeError(f"the worker {worker} cannot build a bubblewrap sandbox: install bubblewrap there "
                           "(Debian/Ubuntu: sudo apt install bubblewrap)")
    plan = _plan(job, cases)
    folder = Path(tempfile.mkdtemp(prefix="submission-", dir=_scratch()))
    slot = _slot()
    try:
        try:
            with grading._COMPILING:  # it parses each file (CPython 3.11's parser fails in threads at once)
                package.write_package(folder, job.files)
        except (TitoError, OSError, ValueError, RecursionError) as error:
            words = " ".join(str(error).split())[:200]
            return BoxOutcome(engine.Report(), f"{type(error).__name__}: {words}" if words else type(error).__name__,
                              worker=worker)
        sandbox.box_view(folder, slot)
        written = time.monotonic()
        report = engine.run_checks(plan, folder, isolation=job.isolation, limits=job.limits, slot=slot)
    finally:
        _free(slot)
        shutil.rmtree(folder, ignore_errors=True)
    report.package = None
    return BoxOutcome(report, worker=worker, seconds={"written": written - started, "run": time.monotonic() - written})


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"pid {os.getpid()}"


TOPIC = "tito-jobs"


def label_digest(label: str) -> str:
    """What names a job in the workers' events: its label's hash. The label holds a student's id, which may be
    any bytes a file name can hold (Dask writes events as msgpack, which fails on them later, in the worker's
    background, and that failure shut every worker that ran such a job down), and is not for the scheduler."""
    import hashlib

    return hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _event(what: str, label: str, worker: str) -> None:
    """Tell the coordinator (subscribed to TOPIC) that a job started here: a second start is a retry."""
    try:
        from distributed import get_worker

        get_worker().log_event(TOPIC, {"what": what, "job": label_digest(label), "worker": worker})
    except (ImportError, ValueError):
        pass


# ---------------------------------------------------------------------------------------------------
# On the coordinator


class SchedulerLost(Exception):
    """The scheduler went away: the run stops (what finished is kept)."""


class NoWorkers(SchedulerLost):
    """The scheduler answers but has had no worker for NO_WORKERS_AFTER seconds (every one of them stopped, or
    none was started): the run stops as for a lost scheduler, its words saying which."""


class KilledWorkers(Exception):
    """The job ended every worker that ran it, as many times as the scheduler allows: a graded 0."""


LOST_AFTER = 20.0  # seconds without a scheduler before the run stops
NO_WORKERS_AFTER = 120.0  # seconds of a scheduler without workers before the run stops


class Coordinator:
    """Sends each job's box to the cluster and waits for what it did; the grade is judged by the caller."""

    def __init__(self, connected: Any, address: str, *, examples: int | None, isolation: str, limits: Any) -> None:
        self.client, self.address = connected, address
        self.examples, self.isolation, self.limits = examples, isolation, limits  # every job's, as the plans'
        self.scattered: dict[str, Any] = {}  # plan fingerprint -> the future of its cases
        self.futures: set[Any] = set()
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.progress: Any = None
        self.labels: dict[str, str] = {}  # label_digest -> label, of every job sent
        self.looked = 0.0  # when the workers were last counted
        self.workerless_since: float | None = None  # since when the scheduler has had none

    def watch(self, progress: Any) -> None:
        """Count each job's starts (a second start on another worker is a retry) from the workers' events."""
        self.progress = progress

        def started(event: Any) -> None:
            _, message = event
            if isinstance(message, dict) and message.get("what") == "started" and self.progress is not None:
                label = self.labels.get(str(message.get("job")))
                if label is not None:
                    self.progress.started(label)

        self.client.subscribe_topic(TOPIC, started)

    def remote(self, label: str) -> Any:
        """The grading.Remote for one job (its label names it in the workers' events)."""
        from tito import engine

        def run(plan: Any, files: dict[str, str]) -> tuple[Any, str, str, float]:
            job = BoxJob(plan.stage.name, plan.seed, self.examples, engine.plan_fingerprint(plan), files,
                         self.isolation, self.limits, label)
            self.labels[label_digest(label)] = label
            outcome = self._wait(self.client.submit(run_box, job, self._cases(plan), key=job_key(label)))
            return outcome.report, outcome.unwritable, outcome.worker, sum(outcome.seconds.values())

        return run

    def gpt(self, files: dict[str, str], reference: dict[str, str], steps: int, seed: int, label: str) -> Any:
        """A student's GPT trained on a worker and its weights scored there by the course's package
        (`reference`): the boxes' Evidence (tito.leaderboard), judged by the caller."""
        self.labels[label_digest(label)] = label
        return self._wait(self.client.submit(run_gpt, files, reference, steps, seed, self.limits, self.isolation,
                                             label, key=job_key(f"gpt/{label}")))

    def _cases(self, plan: Any) -> Any:
        """The plan's cases for the workers, sent once (a Dask future each job depends on)."""
        from tito.shipped import wire

        with self.lock:
            if plan.fingerprint not in self.scattered:
                # a task whose result is the text, not scattered data: a scheduler can compute it again when
                # the workers that held it are lost (scattered data would be gone with them, and every job on it)
                self.scattered[plan.fingerprint] = self.client.submit(
                    _same, wire.dumps(plan.cases), key=f"tito-cases-{plan.fingerprint}-{uuid.uuid4().hex[:8]}")
            return self.scattered[plan.fingerprint]

    def _wait(self, future: Any) -> Any:
        from distributed import KilledWorker

        with self.lock:
            self.futures.add(future)
        lost_since: float | None = None
        try:
            while True:
                if self.stopped.is_set():
                    raise RuntimeError("the run was interrupted")
                try:
                    return future.result(timeout=0.5)
                except TimeoutError:
                    pass
                except KilledWorker as error:
                    found = re.search(r"on (\d+) different workers", str(error))
                    times = f"{found[1]} times" if found else "more times than the scheduler allows"
                    raise KilledWorkers(f"this job ended the grader's worker each time it ran ({times}): your "
                                        "code, or what it made the worker do, stopped it; it was not run "
                                        "again") from None
                except Exception as error:
                    if future.status == "error" or not self._lost():
                        raise
                    raise SchedulerLost(str(error)) from None
                if self._workerless() > NO_WORKERS_AFTER:
                    raise NoWorkers(f"the Dask scheduler at {self.address} has had no worker for "
                                    f"{NO_WORKERS_AFTER:g} s (start them with `dask worker {self.address}`)")
                if self._lost():
                    lost_since = lost_since or time.monotonic()
                    if time.monotonic() - lost_since > LOST_AFTER:
                        raise SchedulerLost(f"no answer from {self.address} for {LOST_AFTER:g} s")
                else:
                    lost_since = None
        finally:
            with self.lock:
                self.futures.discard(future)

    def _workerless(self) -> float:
        """Seconds the scheduler has had no worker (0 while it has one), counted at most every 5 s."""
        now = time.monotonic()
        with self.lock:
            if now - self.looked < 5.0:
                return 0.0 if self.workerless_since is None else now - self.workerless_since
            self.looked = now
        try:
            count = len(self.client.nthreads())
        except Exception:  # noqa: BLE001 (a lost scheduler is _lost's to say)
            return 0.0
        with self.lock:
            self.workerless_since = None if count else (self.workerless_since or now)
            return 0.0 if self.workerless_since is None else now - self.workerless_since

    def _lost(self) -> bool:
        return str(getattr(self.client, "status", "running")) not in ("running", "newly-created")

    def stop(self) -> None:
        """Cancel every job sent (the workers drop the queued ones); an interrupted run."""
        self.stopped.set()
        with self.lock:
            sent = list(self.futures)
        if sent and not self._lost():
            try:
                self.client.cancel(sent, force=True)
            except Exception:  # noqa: BLE001 (the scheduler may be gone already)
                pass

    def close(self) -> None:
        try:
            self.client.close(timeout=5)
        except Exception:  # noqa: BLE001
            pass


def _same(text: str) -> str:
    return text


def job_key(label: str) -> str:
    """The Dask key of one job's box: the label's hash (a student's id is not for the scheduler's logs) and a
    part of its own, as a key is run once per client."""
    return f"tito-box-{label_digest(label)}-{uuid.uuid4().hex[:12]}"


def run_gpt(files: dict[str, str], reference: dict[str, str], steps: int, seed: int, limits: Any, isolation: str,
            label: str) -> Any:
    """One student's GPT trained in a box on this worker, its weights scored in a box of the course's package
    (`reference`) in the same slot (tito.leaderboard.train); the coordinator judges."""
    from tito import leaderboard, sandbox

    worker = _worker_name()
    _event("started", label, worker)
    if isolation == "bwrap" and not sandbox.bwrap_available():
        raise RuntimeError(f"the worker {worker} cannot build a bubblewrap sandbox: install bubblewrap there")
    slot = _slot()
    try:
        return leaderboard.train(files, reference, steps=steps, seed=seed, limits=limits, isolation=isolation,
                                 slot=slot, scratch=_scratch())
    finally:
        _free(slot)
