"""Run the sandbox runner on one job folder with resource limits and, where Linux allows, namespaces.

Protection levels, strongest first (the report names the one in force):

- "namespaces+uid": run as root: new mount, network and PID namespaces; the paths in `hidden` are covered
  by empty read-only tmpfs mounts, /tmp is private, /dev/shm shows only this job's folder, and the code
  runs as an unprivileged user of its own (so it can write nowhere but its output folder, and the
  process limit counts only its own processes).
- "namespaces": an unprivileged user namespace: the same mounts and no network, but the code keeps the
  grader's user id without capabilities, and the paths it could write are remounted read-only.
- "limits": no namespaces: only the resource limits and the timeout hold; the code could read files.
"""

from __future__ import annotations

import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SANDBOX_UID_BASE = 61000


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 << 30
    cpu_seconds: int = 300
    wall_seconds: float = 300.0
    file_bytes: int = 64 << 20
    open_files: int = 256
    processes: int = 64


@dataclass
class Outcome:
    returncode: int | None
    timed_out: bool


def _works(command: list[str]) -> bool:
    try:
        return subprocess.run(command, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=1)
def protection() -> str:
    """The strongest protection this machine allows."""
    if sys.platform != "linux" or not (shutil.which("unshare") and shutil.which("setpriv")):
        return "limits"
    probe = "mount -t tmpfs -o size=1k tmpfs /tmp"
    if os.geteuid() == 0 and _works(["unshare", "--mount", "--net", "--pid", "--fork", "sh", "-c", probe]):
        return "namespaces+uid"
    if _works(["unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "sh", "-c", probe]):
        return "namespaces"
    return "limits"


def describe(level: str) -> str:
    return {
        "namespaces+uid": "Linux namespaces and a separate user id: no network, hidden suites, solutions, "
                          "gradebook and other submissions out of sight, resource limits",
        "namespaces": "Linux user namespaces: no network, hidden suites, solutions, gradebook and other "
                      "submissions out of sight, resource limits (the process limit counts the grader's user)",
        "limits": "resource limits and a timeout only: this system offers no namespaces, so student code "
                  "could read files the grader can read and open network connections",
    }[level]


def _closed_ancestor(path: Path) -> Path | None:
    """The highest folder above `path` that other users cannot traverse (e.g. /root), if any."""
    for folder in reversed(path.parents):  # from / downwards
        if folder != Path("/") and not os.stat(folder).st_mode & 0o001:
            return folder
    return None


def private_paths(root: Path, *, tito_visible: bool = False) -> list[Path]:
    """The checkout's folders that student code must not see: hidden suites, solutions, builds, the
    student package, the project's tests and history (and tito itself, unless the kernel needs it)."""
    names = ["autograder", "solutions", "build", "modules", "src", "tests", ".git", ".tito"]
    return [root / name for name in names + ([] if tito_visible else ["tito"])]


def hiding_lines(hidden: list[Path], blank_file: str) -> list[str]:
    """Shell lines covering each folder with an empty read-only tmpfs and each file with `blank_file`, an
    empty file of mode 000 (so opening it fails rather than reading nothing)."""
    lines = []
    for path in hidden:
        if path.is_dir():
            lines.append(f"mount -t tmpfs -o size=4k,mode=000,ro tmpfs {shlex.quote(str(path))}")
        elif path.exists():
            lines.append(f"mount --bind {shlex.quote(blank_file)} {shlex.quote(str(path))}")
    return lines


def needed_paths() -> list[Path]:
    """What the runner needs to see wherever it lives: the interpreter and the virtual environment."""
    return sorted({Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})


def _mount_script(job: Path, hidden: list[Path], level: str) -> str:
    """Shell commands run as (namespace) root before the runner starts. The job folder holds an empty
    folder .keep/N for each needed path, where that path is held while everything around it is hidden."""
    q = shlex.quote
    needed = needed_paths()
    lines = ["set -e"]
    for number, path in enumerate(needed):
        lines.append(f"mount --bind {q(str(path))} {q(str(job / '.keep' / str(number)))}")
    # /dev/shm shows only this job's folder (other jobs live beside it), with the held paths inside
    lines.append(f"mount --rbind {q(str(job))} /dev/shm")
    lines += hiding_lines(hidden, "/dev/shm/.blank")
    lines.append("mount -t tmpfs -o size=64m,mode=1777 tmpfs /tmp")
    if level == "namespaces+uid":
        for closed in {c for c in map(_closed_ancestor, needed) if c is not None}:
            lines += [f"mkdir -p {q(str(closed))}",  # it may lie under the fresh /tmp
                      f"mount -t tmpfs -o mode=755 tmpfs {q(str(closed))}"]  # e.g. /root
    for number, path in enumerate(needed):
        lines += [f"mkdir -p {q(str(path))}", f"mount --bind /dev/shm/.keep/{number} {q(str(path))}"]
    if level != "namespaces+uid":  # the grader's own user: make what it could write read-only
        for writable in {*needed, Path.home()}:
            if writable.is_dir():
                lines.append(f"mount --bind -o remount,ro {q(str(writable))} {q(str(writable))} || true")
    return "\n".join(lines)


def _set_limits(limits: Limits, level: str) -> None:
    os.setsid()
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if level == "namespaces+uid":
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))


def run(job: Path, runner: Path, hidden: list[Path], limits: Limits, slot: int, level: str) -> Outcome:
    """Run `runner` on `job` (a folder with cases.json, lib/, pkg/ and a writable out/)."""
    python = [sys.executable, "-I", "-B"]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    if level == "limits":
        command = [*python, str(runner), str(job)]
    else:
        uid = SANDBOX_UID_BASE + slot
        inside = "/dev/shm"
        if level == "namespaces+uid":
            os.chown(job / "out", uid, uid)
            drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                    "--inh-caps=-all", "--bounding-set=-all"]
            unshare = ["unshare", "--mount", "--net", "--pid", "--fork", "--kill-child"]
        else:
            drop = ["setpriv", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all"]
            unshare = ["unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child"]
        for number in range(len(needed_paths())):
            (job / ".keep" / str(number)).mkdir(parents=True)
        (job / ".blank").touch(mode=0o000)
        script = _mount_script(job, hidden, level)
        runner_command = " ".join(shlex.quote(part) for part in [*drop, *python, f"{inside}/lib/runner.py", inside])
        script += f"\nexec {runner_command} >/dev/null 2>&1"  # what the student's code prints goes nowhere
        command = [*unshare, "sh", "-c", script]
    with open(job / "setup-errors.txt", "wb") as errors:  # the mount commands' complaints, if any
        process = subprocess.Popen(command, cwd="/", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL if level == "limits" else errors,
                                   preexec_fn=lambda: _set_limits(limits, level))
    try:
        process.wait(timeout=limits.wall_seconds)
        return Outcome(process.returncode, False)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
        return Outcome(process.returncode, True)
