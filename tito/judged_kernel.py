"""The kernel nbgrader's autograde runs (kernelspec "tinytorch-judged"): a judge plus a sandboxed ipykernel.

    python -m tito.judged_kernel -f CONNECTION_FILE

This process stays outside the sandbox. It serves the judge on a Unix socket: a graded cell sends
(stage, task, its working folder); the judge grades that student's submitted notebook with the official
grader (sandboxed runner, trusted judging, stage isolation) and answers with the task's score and the
messages of its lost points. The ipykernel runs in a mount namespace where the hidden suites, the
solutions, the gradebook and the course's source, release and submitted folders are covered, the
interpreter and the course are read-only, and no capability is left to undo that.
"""

from __future__ import annotations

import ctypes
import json
import os
import queue
import shlex
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tito import engine, grading, package, sandbox
from tito.nbgrader_judge import SOCKET_VARIABLE
from tito.project import find_root
from tito.project import stage as find_stage

PR_SET_PDEATHSIG = 1


class Judge:
    """Grades a submitted notebook once per file version and answers per task."""

    def __init__(self, root: Path, course: Path | None) -> None:
        self.root = root
        self.course = course
        self.plans: dict = {}
        self.results: dict = {}
        self.lock = threading.Lock()
        self.isolation = "bwrap" if sandbox.bwrap_available() else "none"
        self.scratch = Path(tempfile.mkdtemp(prefix="tito-judge-"))
        self.scratch.chmod(0o755)

    def answer(self, request: dict) -> dict:
        stage = find_stage(self.root, str(request["stage"]))
        task = str(request["task"])
        folder = Path(str(request["cwd"]))
        # nbgrader runs the kernel in autograded/<student>/<assignment>/; the work is in submitted/
        course, student = folder.parents[2], folder.parent.name
        notebook = course / "submitted" / student / folder.name / f"{stage.name}.ipynb"
        if not notebook.is_file():
            notebook = folder / f"{stage.name}.ipynb"
        data = notebook.read_bytes()
        with self.lock:
            key = (str(notebook), hash(data))
            if key not in self.results:
                if stage.name not in self.plans:
                    course_key, _ = grading.course_key(course, self.scratch, None)
                    self.plans[stage.name] = engine.make_plan(stage, seed=engine.stage_seed(course_key, stage),
                                                              jobs=self.scratch)
                slots: queue.Queue = queue.Queue()
                slots.put(0)
                grader = grading.Grader(self.root, self.isolation, sandbox.Limits(), self.scratch, slots)
                self.results[key] = grader.grade(self.plans[stage.name], student, {stage.name: data}, "isolated", [])
            grade = self.results[key]
        tests = [t for t in grade.tests if t.task == task]
        messages = [f"lost {t.max_points:g} points: {t.public}" for t in tests if not t.passed]
        messages = grade.notes + messages if messages else messages
        return {"score": sum(t.points for t in tests), "max": sum(t.max_points for t in tests),
                "messages": messages or [f"task {task}: every check passed"]}


def _serve(judge: Judge, path: str) -> socketserver.UnixStreamServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            try:
                reply = judge.answer(json.loads(self.rfile.readline(1 << 16)))
            except Exception as error:  # the cell shows it; the grade is 0 for this task
                reason = f"the judge could not grade this task: {type(error).__name__}: {error}"
                reply = {"score": 0.0, "messages": [reason]}
            self.wfile.write(json.dumps(reply).encode() + b"\n")

    server = socketserver.ThreadingUnixStreamServer(path, Handler)
    os.chmod(path, 0o777)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _private_paths(root: Path) -> list[Path]:
    """The checkout's folders that student code must not see (tito stays: the graded cells import it)."""
    names = ["autograder", "solutions", "build", "modules", "src", "tests", ".git", ".tito"]
    return [root / name for name in names]


def _hiding_lines(hidden: list[Path], blank_file: str) -> list[str]:
    """Shell lines covering each folder with an empty read-only tmpfs and each file with `blank_file`."""
    lines = []
    for path in hidden:
        if path.is_dir():
            lines.append(f"mount -t tmpfs -o size=4k,mode=000,ro tmpfs {shlex.quote(str(path))}")
        elif path.exists():
            lines.append(f"mount --bind {shlex.quote(blank_file)} {shlex.quote(str(path))}")
    return lines


def _kernel_command(connection_file: str, course: Path | None, level: str, root: Path, blank: Path) -> list[str]:
    kernel = [sys.executable, "-m", "ipykernel_launcher", "-f", connection_file]
    if level == "limits":
        return kernel
    q = shlex.quote
    hidden = _private_paths(root)  # the graded cells import tito.nbgrader_judge
    if course is not None:
        hidden += [course / name for name in ("source", "release", "submitted", "feedback", "exchange")]
        hidden += [course / "gradebook.db", course / ".tito-course-key"]
    lines = ["set -e"]
    for path in sorted({*sandbox.interpreter_paths(), root, *(c for c in [course] if c)}):  # read-only first
        lines.append(f"mount --bind {q(str(path))} {q(str(path))}")
        lines.append(f"mount -o remount,bind,ro {q(str(path))}")
    lines += _hiding_lines(hidden, str(blank))  # then covered
    drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
    lines.append("exec " + " ".join(q(part) for part in [*drop, *kernel]))
    user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--mount", "sh", "-c", "\n".join(lines)]


def _reference_before(root: Path, assignment: str) -> Path | None:
    """A reference build of the stages before `assignment`, for the kernel to import; None for the first."""
    from tito.project import stages
    from tito.source import read_source

    earlier = [s for s in stages(root) if s.name < assignment]
    if not earlier or assignment not in {s.name for s in stages(root)}:
        return None
    files = {}
    for stage in earlier:
        _, path, code = package.stage_module(stage, read_source(stage), stage.relative(stage.source), reference=True)
        files[path] = code
    folder = Path(tempfile.mkdtemp(prefix="tito-earlier-"))
    os.chmod(folder, 0o755)
    package.write_package(folder, files)
    return folder


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    connection_file = argv[argv.index("-f") + 1]
    root = find_root()
    folder = Path.cwd()
    in_course = len(folder.parents) > 2 and (folder.parents[2] / "nbgrader_config.py").exists()
    course = folder.parents[2] if in_course else None
    judge = Judge(root, course)
    level = "namespaces" if sys.platform == "linux" and shutil.which("unshare") else "limits"
    if level == "limits":
        print("tinytorch kernel: this system offers no namespaces, so student code can read the course's "
              "files during autograde", file=sys.stderr)
    socket_dir = tempfile.mkdtemp(prefix="tito-judge-socket-")
    os.chmod(socket_dir, 0o755)
    path = os.path.join(socket_dir, "judge.sock")
    server = _serve(judge, path)
    env = {**os.environ, SOCKET_VARIABLE: path}
    earlier = _reference_before(root, folder.name)
    if earlier is not None:  # module NN imports the modules before it: the reference stands in for them
        env["PYTHONPATH"] = str(earlier)
    limits = sandbox.Limits()

    def limit() -> None:
        _die_with_parent()
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))

    blank = Path(socket_dir) / "blank"
    blank.touch(mode=0o000)
    process = subprocess.Popen(_kernel_command(connection_file, course, level, root, blank), env=env,
                               preexec_fn=limit)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda number, frame: process.send_signal(number))
    code = process.wait()
    server.shutdown()
    for scratch in (socket_dir, earlier, judge.scratch):
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
