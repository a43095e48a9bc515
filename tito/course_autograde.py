"""`tito course autograde NN`: a module's submissions autograded in parallel by nbgrader's own autograde, the
gradebook written by this process alone.

nbgrader autogrades one submission at a time, and its gradebook is one SQLite file that processes must not write at
once. Here runners (`serve`), nbgrader processes in the course folder configured as `nbgrader autograde` is there (the
course's nbgrader_config.py: the sandboxed kernel, tito's judge), autograde side by side, each one submission after
another, each as `nbgrader autograde NN_name --student S --force` with two settings of the runner's own, in its
private scratch folder (0700): the gradebook, a copy of gradebook.db taken once at the start of the run (so the
assignment's source cells are there), and the path of the kernel's sockets (nbgrader puts them in the course folder
as `kernel-ipc-N`; two autogrades that start together pick the same N, each connects to the other's kernel, which
refuses it, and the notebook does not run). A runner pays nbgrader's imports and the judge's drawing of the cases
once, not once per submission. A submission writes only autograded/S/NN_name/; when it is done, what nbgrader wrote
of it is read back from the runner's gradebook through nbgrader's API (`Written`) and merged into gradebook.db, one
transaction per student, by this process, the only one that writes gradebook.db.

Where the runners run is all that -j and --scheduler change (`_Here`, `_OnCluster`): a Dask worker runs the same
`run_one`, with the course folder at the same path (a shared filesystem), and sends back an `Outcome` of a few
kilobytes. The workers copy the run's copy of the gradebook, in a private folder of the course, to scratch folders of
their own, so gradebook.db, written here, is the only SQLite file written on the shared filesystem.
"""

from __future__ import annotations

import atexit
import fcntl
import glob
import json
import os
import queue
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from sqlalchemy.orm import Session, scoped_session, sessionmaker

from tito import console
from tito.errors import TitoError
from tito.project import Stage
from tito.submissions import printable

COURSE_ID = "tinytorch"  # c.CourseDirectory.course_id in the course's nbgrader_config.py
RUN_PREFIX = ".tito-autograde-"  # the run's private folder in the course, which holds the gradebook's copy
LOCK = ".tito-autograde.lock"  # held by the one run of a course (two would both write gradebook.db)
POLL = 0.2  # seconds between looks at a running nbgrader, and at whether to stop it
GRACE = 5.0  # seconds an interrupted nbgrader has to shut its kernel down before it is killed
LOG_TAIL = 64 << 10  # bytes of nbgrader's output read for its last line
# the lines nbgrader ends a failure with, which only say to look above
SEE_ABOVE = ("Removing failed assignment", "There was an error processing assignment", "Please see the")


@dataclass(frozen=True)
class Job:
    """One submission to autograde, as run_one needs it on this machine or on a worker."""
    course: str
    assignment: str  # "01_tensor"
    student: str
    snapshot: str  # the run's copy of gradebook.db


@dataclass
class NotebookWritten:
    late_submission_penalty: float | None
    grades: dict[str, tuple[float | None, bool]]  # grade cell -> (auto_score, needs_manual_grade)
    comments: dict[str, str | None]  # solution or task cell -> auto_comment


@dataclass
class Written:
    """What nbgrader's autograde writes of a student's submission: its timestamp and, per notebook, the late
    penalty, each grade's auto_score and needs_manual_grade and each comment's auto_comment. The rest (scores and
    comments set by hand, extra credit, flags, extensions) is the instructor's, and autograde leaves it alone."""
    timestamp: datetime | None
    notebooks: dict[str, NotebookWritten]


@dataclass
class Outcome:
    student: str
    status: int | None  # nbgrader's exit status; None when it did not run to its end (stopped, its process died)
    last_line: str = ""  # nbgrader's last line that says more than "see above"
    written: Written | None = None
    seconds: float = 0.0
    failure: str = ""  # set by the coordinator: why this submission is not autograded


# ---------------------------------------------------------------------------------------------------
# The runner: one nbgrader process that autogrades submissions one after another


def serve() -> None:
    """The runner's own loop, in a process of its own in the course folder (`python -c SERVE GRADEBOOK KERNEL_IP`):
    each line on stdin names a submission, {"assignment", "student"}, which nbgrader's own app autogrades as
    `nbgrader autograde ASSIGNMENT --student STUDENT --force` with this runner's gradebook and kernel sockets, the
    way nbgrader's own test-suite runs its commands in one process (a new app each time, reset after); the exit
    status is the reply, one line on the descriptor named by REPLIES. Its stdout and stderr are a file the parent
    reads, emptied at each submission. It ends at the end of stdin, after IDLE seconds without a submission, at
    once on SIGTERM, and by itself when its parent is gone (`_orphaned`)."""
    database, kernel_ip = sys.argv[1:3]
    parent, replies = os.getppid(), int(os.environ.pop(REPLIES))
    os.set_inheritable(replies, False)
    signal.signal(signal.SIGTERM, _end)
    threading.Thread(target=_orphaned, args=(parent, Path(database).parent), daemon=True).start()
    try:
        while select.select([sys.stdin], [], [], IDLE)[0] and (line := sys.stdin.readline()):
            job = json.loads(line)
            sys.stdout.flush()
            sys.stderr.flush()
            os.ftruncate(2, 0)  # (stdout and stderr share the file and its offset)
            os.lseek(2, 0, os.SEEK_SET)
            status = _nbgrader_autograde(job["assignment"], job["student"], database, kernel_ip)
            sys.stderr.flush()
            try:
                os.write(replies, f"{status}\n".encode())
            except BrokenPipeError:  # the parent is gone
                break
    except _Ended:
        status = 128 + signal.SIGTERM
    else:
        status = 0
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # (ending already)
    # the parent has hung up or stopped it, and reads nothing more there; or it is gone (killed outright)
    shutil.rmtree(Path(database).parent, ignore_errors=True)
    sys.exit(status)


class _Ended(SystemExit):
    """SIGTERM in a runner: nbgrader stops wherever it is. (A SystemExit, which asyncio's callbacks let through as
    they do not other exceptions. SIGINT would not do: the asyncio loop that runs the kernel turns it into a
    cancellation, which the execution takes for an interrupted cell, and autograde goes on.)"""


def _end(signum: int, frame: FrameType | None) -> None:
    _kill_family(os.getpid(), signal.SIGTERM)  # first, as nbgrader kills its kernel outright (no box removed)
    raise _Ended


def _orphaned(parent: int, scratch: Path) -> None:
    """A runner's watch over its parent (the coordinator, or a Dask worker): once that is gone, killed outright,
    the runner stops as on SIGTERM; if it has not within GRACE seconds, what it started is killed, its scratch
    folder removed, and it ends."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(GRACE)
    _kill_family(os.getpid(), signal.SIGTERM)  # a kernel's launcher removes its box
    time.sleep(1.0)
    _kill_family(os.getpid(), signal.SIGKILL)
    atexit._run_exitfuncs()  # the judge's scratch folder
    shutil.rmtree(scratch, ignore_errors=True)
    os._exit(128 + signal.SIGTERM)


def _nbgrader_autograde(assignment: str, student: str, database: str, kernel_ip: str) -> int:
    """`nbgrader autograde` in this process, as nbgrader's tests run it (tests/__init__.py, run_nbgrader); its
    exit status."""
    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

    environ, folder, path = dict(os.environ), os.getcwd(), list(sys.path)
    app = NbGraderApp.instance()
    try:
        app.initialize(["autograde", assignment, f"--student={glob.escape(student)}", "--force",
                        f"--CourseDirectory.db_url=sqlite:///{database}", f"--KernelManager.ip={kernel_ip}"])
        app.start()
        return 0
    except NoStart:  # what jupyter's apps raise once their subcommand has run
        return 0
    except _Ended:
        raise
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else 1
    except Exception:  # noqa: BLE001 - what `nbgrader autograde` would end with
        traceback.print_exc()
        return 1
    finally:
        app.reset()
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(folder)
        sys.path[:] = path


SERVE = "from tito.course_autograde import serve; serve()"
REPLIES = "TITO_AUTOGRADE_REPLIES"
IDLE = 300.0  # seconds a runner waits for its next submission (a coordinator that died never says goodbye)


class _Runner:
    """The parent's side of one runner (serve()): nbgrader's imports and the judge's drawn cases are paid once per
    runner, not once per submission (for 01, 3-4 s and 3 s, more than the 4-5 s of its autograde). It has a
    private scratch folder (0700) with its gradebook, a copy of the run's, and the path of its kernel's sockets."""

    def __init__(self, job: Job) -> None:
        for path, what in ((job.course, "course folder"), (job.snapshot, "run's copy of the gradebook")):
            if not os.path.exists(path):
                raise RuntimeError(f"the {what} {path} is not on this machine: nbgrader must see the course at the "
                                   "same path here (a shared filesystem)")
        self.scratch = Path(tempfile.mkdtemp(prefix=f"tito-autograde-{os.getpid()}-"))  # 0700
        self.database, self.log = self.scratch / "gradebook.db", self.scratch / "nbgrader.log"
        shutil.copyfile(job.snapshot, self.database)
        reading, writing = os.pipe()
        with open(self.log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SERVE, str(self.database), str(self.scratch / "kernel")], cwd=job.course,
                stdin=subprocess.PIPE, stdout=output, stderr=output, pass_fds=(writing,),
                env={**os.environ, REPLIES: str(writing)}, start_new_session=True)
        os.close(writing)
        self.replies = reading

    def alive(self) -> bool:
        return self.process.poll() is None

    def autograde(self, job: Job, stop: Callable[[], bool], poll: float) -> Outcome:
        """One submission: asked, then waited for while `stop()` is false; when it turns true, the runner and
        what it started are stopped, the submission's half-written autograded/ folder is removed and nothing of
        it is kept."""
        started = time.monotonic()
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"assignment": job.assignment, "student": job.student}).encode()
                                     + b"\n")
            self.process.stdin.flush()
            while not select.select([self.replies], [], [], poll)[0]:
                if stop():
                    self.close(at_once=True)
                    shutil.rmtree(Path(job.course) / "autograded" / job.student / job.assignment, ignore_errors=True)
                    return Outcome(job.student, None, "stopped by an interrupt", seconds=time.monotonic() - started)
            reply = os.read(self.replies, 64)
        except BrokenPipeError:
            reply = b""
        except BaseException:
            self.close(at_once=True)
            raise
        if not reply:  # the runner itself ended (killed, out of memory), maybe half-way through the folder
            self.close()
            shutil.rmtree(Path(job.course) / "autograded" / job.student / job.assignment, ignore_errors=True)
            return Outcome(job.student, None, f"nbgrader's process ended (exit status {self.process.returncode}): "
                                              f"{_last_line(self.log)}", seconds=time.monotonic() - started)
        return Outcome(job.student, int(reply), _last_line(self.log),
                       _written(self.database, job.assignment, job.student), time.monotonic() - started)

    def hang_up(self) -> None:
        """The end of the runner's stdin, at which an idle runner ends."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass

    def close(self, at_once: bool = False) -> None:
        """End the runner and remove its scratch folder."""
        if self.alive():
            self.hang_up()
            if at_once or _wait(self.process, 1.0) is None:
                _stop(self.process)
        if self.replies >= 0:
            os.close(self.replies)
            self.replies = -1
        shutil.rmtree(self.scratch, ignore_errors=True)


_RUNNERS: dict[tuple[str, int], _Runner] = {}  # (the run's gradebook copy, thread) -> this process's runner
_RUNNERS_LOCK = threading.Lock()


def run_one(job: Job, stop: Callable[[], bool], poll: float = POLL) -> Outcome:
    """Autograde one submission with this thread's runner for the job's run (started the first time)."""
    key = (job.snapshot, threading.get_ident())
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(key)
    if runner is None or not runner.alive():
        if runner is not None:
            runner.close()
        runner = _Runner(job)
        with _RUNNERS_LOCK:
            _RUNNERS[key] = runner
    return runner.autograde(job, stop, poll)


def run_on_worker(job: Job, stop_event: str) -> Outcome:
    """What a Dask worker runs: run_one, stopped once the coordinator sets the Dask Event `stop_event`."""
    from distributed import Event

    return run_one(job, Event(stop_event).is_set, poll=1.0)


def close_runners(snapshot: str) -> None:
    """End this process's runners of a run (the coordinator's, and each worker's at the end of the run)."""
    with _RUNNERS_LOCK:
        runners = [_RUNNERS.pop(key) for key in list(_RUNNERS) if key[0] == snapshot]
    for runner in runners:  # all at once, then each
        runner.hang_up()
    for runner in runners:
        runner.close()


def _wait(process: subprocess.Popen, seconds: float) -> int | None:
    try:
        return process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def _stop(process: subprocess.Popen) -> None:
    """A runner told to end (its judge's scratch is removed as it exits), and the kernels and boxes it started,
    each in a session of its own, too (the kernel's launcher then removes its box); what is left after GRACE
    seconds is killed."""
    import psutil

    family = _kill_family(process.pid, signal.SIGTERM)
    _signal(process.pid, signal.SIGTERM)
    if _wait(process, GRACE) is None:
        _signal(process.pid, signal.SIGKILL)
        process.wait()
    # a launcher removes its kernel's box in a moment; a process that is pid 1 of its box ignores SIGTERM
    _, alive = psutil.wait_procs(family, timeout=1.0)
    for child in alive:
        try:
            child.kill()
        except psutil.Error:
            pass


def _kill_family(pid: int, signum: int) -> list[Any]:
    """Send `signum` to every process `pid` started, and theirs; returns them (psutil processes)."""
    import psutil

    try:
        family = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    for child in family:
        try:
            child.send_signal(signum)
        except psutil.Error:
            pass
    return family


def _signal(group: int, signum: int) -> None:
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        pass


def _last_line(log: Path) -> str:
    """nbgrader's last line of output that says more than "see above" (for a failure: the error it raised)."""
    with open(log, "rb") as stream:
        stream.seek(max(0, log.stat().st_size - LOG_TAIL))
        lines = [line.strip() for line in stream.read().decode("utf-8", "replace").splitlines()]
    said = [line for line in lines if line and not any(words in line for words in SEE_ABOVE)]
    return printable(said[-1][:300]) if said else "it printed nothing"


def _written(database: Path, assignment: str, student: str) -> Written | None:
    """What autograde wrote of the student's submission in its gradebook (None: it wrote no submission)."""
    from nbgrader.api import Gradebook, MissingEntry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's warnings about nbgrader's sessions
        with Gradebook(f"sqlite:///{database}", COURSE_ID) as gradebook:
            try:
                submission = gradebook.find_submission(assignment, student)
            except MissingEntry:
                return None
            return Written(submission.timestamp, {notebook.name: NotebookWritten(
                notebook.late_submission_penalty,
                {grade.name: (grade.auto_score, grade.needs_manual_grade) for grade in notebook.grades},
                {comment.name: comment.auto_comment for comment in notebook.comments})
                for notebook in submission.notebooks})


# ---------------------------------------------------------------------------------------------------
# The gradebook, written by the coordinator alone


class _OneTransaction(Session):
    """nbgrader's API commits after every change it makes; in a merge those commits only flush, so that one
    student's merge is one transaction, which `merge` commits."""

    def commit(self) -> None:
        self.flush()


def merge(gradebook: Path, assignment: str, student: str, written: Written) -> None:
    """Write into the course's gradebook, in one transaction and through nbgrader's API, what autograde wrote of
    the student's submission; what the instructor set by hand stays."""
    from nbgrader.api import Gradebook

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy warns about objects nbgrader's add_submission builds
        with Gradebook(f"sqlite:///{gradebook}", COURSE_ID) as book:
            book.db.remove()
            book.db = scoped_session(sessionmaker(bind=book.engine, autoflush=True, future=True,
                                                  class_=_OneTransaction))
            try:
                book.update_or_create_student(student)
                submission = book.update_or_create_submission(assignment, student, timestamp=written.timestamp)
                for notebook in submission.notebooks:
                    mine = written.notebooks[notebook.name]
                    notebook.late_submission_penalty = mine.late_submission_penalty
                    for grade in notebook.grades:
                        grade.auto_score, grade.needs_manual_grade = mine.grades[grade.name]
                    for comment in notebook.comments:
                        comment.auto_comment = mine.comments[comment.name]
                Session.commit(book.db())
            except BaseException:
                book.db.rollback()
                raise


def _autograded(gradebook: Path, assignment: str) -> dict[str, datetime | None]:
    """The gradebook's submissions of the assignment (student -> timestamp). Read with SQLite alone, read-only:
    nbgrader's Gradebook writes tables and rows as it opens, and a run that refuses changes nothing."""
    try:
        with closing(sqlite3.connect(f"{gradebook.as_uri()}?mode=ro", uri=True)) as database:
            known = database.execute("SELECT name FROM sqlite_master WHERE name = 'assignment'").fetchone() and \
                database.execute("SELECT 1 FROM assignment WHERE name = ?", (assignment,)).fetchone()
            if not known:
                raise TitoError(f"{assignment} is not in the gradebook of {gradebook.parent} yet: run `nbgrader "
                                f"generate_assignment {assignment}` there first")
            rows = database.execute(
                "SELECT submitted_assignment.student_id, submitted_assignment.timestamp FROM submitted_assignment "
                "JOIN assignment ON assignment.id = submitted_assignment.assignment_id WHERE assignment.name = ?",
                (assignment,)).fetchall()
    except sqlite3.Error as error:
        raise TitoError(f"{gradebook} cannot be read (SQLite: {error}): restore it from a backup") from None
    return {student: datetime.fromisoformat(stamp) if stamp else None for student, stamp in rows}


def _unchanged(course: Path, assignment: str, student: str, autograded: dict[str, datetime | None]) -> bool:
    """Whether the submission is autograded already: the gradebook holds it with the timestamp of
    submitted/S/NN_name/timestamp.txt, and autograded/S/NN_name/ exists."""
    from nbgrader.utils import parse_utc

    if student not in autograded or not (course / "autograded" / student / assignment).is_dir():
        return False
    stamp = course / "submitted" / student / assignment / "timestamp.txt"
    try:
        text = stamp.read_text(encoding="utf-8").strip() if stamp.is_file() else ""
        return (parse_utc(text) if text else None) == autograded[student]
    except (OSError, ValueError, OverflowError):  # unreadable: nbgrader decides, and says why
        return False


def _submitted(course: Path, assignment: str, wanted: list[str] | None) -> list[str]:
    """The students with a notebook in submitted/S/NN_name/ (what nbgrader autograde takes), or those of them named."""
    folder = course / "submitted"
    found = sorted({path.parent.parent.name for path in folder.glob(f"*/{glob.escape(assignment)}/*.ipynb")})
    if not found:
        raise TitoError(f"no submission of {assignment} in {folder}: collect them first (`nbgrader collect "
                        f"{assignment}` in the course folder)")
    if not wanted:
        return found
    unknown = [printable(name) for name in dict.fromkeys(wanted) if name not in found]
    if unknown:
        raise TitoError(f"no submission of {assignment} from {', '.join(unknown)} in {folder}")
    return list(dict.fromkeys(wanted))


@contextmanager
def _only_run(course: Path) -> Iterator[None]:
    """This run as the course's only one (a lock the system drops when the process ends, however it ends); the
    folders of a run that was killed outright are removed."""
    descriptor = os.open(course / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TitoError(f"another `tito course autograde` is running on {course}: wait for it to end (two runs "
                            "would both write gradebook.db)") from None
        for stale in course.glob(f"{RUN_PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)
        yield
    finally:
        os.close(descriptor)


def _copy_gradebook(gradebook: Path, copy: Path) -> None:
    with closing(sqlite3.connect(f"{gradebook.as_uri()}?mode=ro", uri=True)) as source, \
            closing(sqlite3.connect(copy)) as target:
        source.backup(target)
    copy.chmod(0o600)


# ---------------------------------------------------------------------------------------------------
# Where the nbgraders run


def _outcome(job: Job, future: Any) -> Outcome:
    if future.cancelled():
        return Outcome(job.student, None, "not started")
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001 - a job that could not run costs only its submission
        return Outcome(job.student, None, f"nbgrader could not be run: {' '.join(str(error).split())[:300]}")


class _Here:
    """-j N: the nbgraders run on this machine, N at once."""

    def __init__(self, jobs: int) -> None:
        self.pool = ThreadPoolExecutor(jobs, thread_name_prefix="autograde")
        self.halt = threading.Event()
        self.futures: list[Any] = []
        self.where = f"on this machine, {jobs} at once"

    def submit(self, job: Job, done: Callable[[Outcome], None]) -> None:
        future = self.pool.submit(run_one, job, self.halt.is_set)
        future.add_done_callback(lambda finished: done(_outcome(job, finished)))
        self.futures.append(future)

    def running(self) -> int:
        return sum(future.running() for future in self.futures)

    def stop(self) -> None:
        """Each running nbgrader stopped (within GRACE seconds and a little), the others never started."""
        self.halt.set()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def close(self, snapshot: str) -> None:
        self.halt.set()  # (all done by now, unless the run ended in an error)
        self.pool.shutdown(wait=True, cancel_futures=True)
        close_runners(snapshot)


class _OnCluster:
    """--scheduler: run_one on the Dask workers, as many at once as they have threads; an interrupt is a Dask Event
    each running task looks at every second."""

    def __init__(self, client: Any) -> None:
        from distributed import Event

        self.client = client
        self.stop_event = f"tito-autograde-{uuid.uuid4().hex}"
        self.halt = Event(self.stop_event, client=client)
        self.threads = sum(client.nthreads().values())
        self.futures: list[Any] = []
        self.where = f"on {len(client.nthreads())} Dask workers ({self.threads} threads)"

    def submit(self, job: Job, done: Callable[[Outcome], None]) -> None:
        future = self.client.submit(run_on_worker, job, self.stop_event, pure=False)
        future.add_done_callback(lambda finished: done(_outcome(job, finished)))
        self.futures.append(future)

    def running(self) -> int:  # the workers' threads are busy while there is work left for them
        return min(self.threads, sum(not future.done() for future in self.futures))

    def stop(self) -> None:
        """Each running task's nbgrader stopped (within a second, GRACE seconds and a little); the rest cancelled."""
        self.halt.set()
        deadline = time.monotonic() + GRACE + 5
        while time.monotonic() < deadline and not all(future.done() for future in self.futures):
            time.sleep(0.2)
        self.client.cancel(self.futures)

    def close(self, snapshot: str) -> None:
        try:
            self.client.run(close_runners, snapshot)
        except Exception:  # noqa: BLE001 - a runner left idle ends by itself after IDLE seconds
            pass
        finally:
            self.client.close()


# ---------------------------------------------------------------------------------------------------
# The run


class _Interrupts:
    """SIGINT and SIGTERM stop the run: KeyboardInterrupt in the main thread, held back while a merge is written
    (so a student is merged whole or not at all, and counted right); further signals are ignored while it stops."""

    def __enter__(self) -> _Interrupts:
        self.signum, self.holding = 0, False
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self._handle) for signum in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum:
            return
        self.signum = signum
        if not self.holding:
            raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.signum:
            raise KeyboardInterrupt


def autograde(stage: Stage, course: Path, *, jobs: int, scheduler: str | None, students: list[str] | None,
              force: bool) -> int:
    """Autograde the submissions of `stage` in `course` (a TinyTorch course) that are new or changed (all with
    `force`), -j `jobs` at once here or on the Dask cluster at `scheduler`. Exit status 0 when every one was
    autograded, 1 when one failed, 128 + the signal's number when interrupted."""
    from sqlalchemy.exc import SAWarning

    from tito import grading

    # SQLAlchemy warns about the sessions nbgrader's API keeps; printed, a warning's source line read as a failure
    warnings.filterwarnings("ignore", category=SAWarning)
    assignment, gradebook = stage.name, course / "gradebook.db"
    autograded = _autograded(gradebook, assignment)
    submitted = _submitted(course, assignment, students)
    work = [name for name in submitted if force or not _unchanged(course, assignment, name, autograded)]
    skipped = len(submitted) - len(work)
    if scheduler is not None:
        from tito import cluster

        place: _Here | _OnCluster = _OnCluster(cluster.client(scheduler))
    else:
        place = _Here(jobs)
    snapshot = ""
    try:
        if not work:
            console.info(f"nothing to autograde: the {skipped} submissions of {assignment} are autograded already "
                         "and unchanged since (--force autogrades them again)")
            return 0
        with _only_run(course):
            grading.course_key(course, course, None)  # which every judge reads: made here, not by two at once
            run = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=course))  # 0700
            try:
                snapshot = str(run / "gradebook.db")
                _copy_gradebook(gradebook, Path(snapshot))
                return _run(place, [Job(str(course), assignment, name, snapshot) for name in work], gradebook, skipped)
            finally:
                shutil.rmtree(run, ignore_errors=True)
    finally:
        place.close(snapshot)


def _run(place: _Here | _OnCluster, work: list[Job], gradebook: Path, skipped: int) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    assignment = work[0].assignment
    finished: queue.Queue[Outcome] = queue.Queue()
    outcomes: list[Outcome] = []
    started = time.monotonic()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[running]} running, {task.fields[failed]} failed"), TimeElapsedColumn())
    with _Interrupts() as interrupts, Progress(*columns, console=console.err, transient=True) as progress:
        bar = progress.add_task(f"autograding {assignment}", total=len(work), running=0, failed=0)
        try:
            for job in work:
                place.submit(job, finished.put)
            while len(outcomes) < len(work):
                try:
                    outcome = finished.get(timeout=0.5)
                except queue.Empty:
                    progress.update(bar, running=place.running())
                    continue
                with interrupts.held():  # a signal meanwhile is raised as the block ends: count what was merged first
                    _record(gradebook, assignment, outcome)
                    outcomes.append(outcome)
                progress.update(bar, advance=1, running=place.running(),
                                failed=sum(bool(done.failure) for done in outcomes))
        except KeyboardInterrupt:
            place.stop()
    autograded = sum(not outcome.failure for outcome in outcomes)
    if interrupts.signum:
        console.warn(f"interrupted: {autograded} of the {len(work)} submissions of {assignment} were autograded and "
                     f"are in the gradebook, which holds nothing of the others; run the same command again to "
                     f"autograde the other {len(work) - autograded}")
        return 128 + interrupts.signum
    failed = [outcome for outcome in outcomes if outcome.failure]
    console.info(f"autograded {autograded} of {len(work)} submissions of {assignment} in "
                 f"{time.monotonic() - started:.0f} s {place.where}"
                 + (f"; {skipped} autograded already and unchanged were left as they are (--force autogrades them "
                    "again)" if skipped else ""))
    if failed:
        console.error(f"{len(failed)} could not be autograded (autograde them again once the cause is fixed):")
        for outcome in sorted(failed, key=lambda outcome: outcome.student):
            console.info(f"  {printable(outcome.student)}: {outcome.failure}")
    return 1 if failed else 0


def _record(gradebook: Path, assignment: str, outcome: Outcome) -> None:
    """Merge what nbgrader wrote of the submission (a failed nbgrader's too: what it wrote before failing, as it
    would have in the gradebook), and say in `outcome.failure` why it is not autograded, if it is not."""
    from nbgrader.api import InvalidEntry
    from sqlalchemy.exc import SQLAlchemyError

    if outcome.status is None:
        outcome.failure = outcome.last_line
    elif outcome.status:
        outcome.failure = f"nbgrader exited with status {outcome.status}: {outcome.last_line}"
    elif outcome.written is None:
        outcome.failure = f"nbgrader wrote no submission for it: {outcome.last_line}"
    if outcome.written is None:
        return
    try:
        merge(gradebook, assignment, outcome.student, outcome.written)
    except (SQLAlchemyError, InvalidEntry, KeyError) as error:
        outcome.failure = f"its grades could not be written to {gradebook} ({' '.join(str(error).split())[:200]})"
