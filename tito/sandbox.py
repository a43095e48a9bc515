"""The boxes the runner (tito/shipped/runner.py) runs in, and the one function that runs it.

- "process" (`tito test`, on the student's own machine): a child process in its own session with
  resource limits and a deadline. It keeps the student's view of the files.
- "bwrap" (`tito grade`, the nbgrader judge): bubblewrap builds a root from an allow-list: read-only
  binds of /usr, the interpreter and the virtual environment, the job's runner files and the package
  under test; a fresh /proc, a minimal /dev, a private size-limited /tmp; new PID, network, IPC, UTS and
  (for a non-root grader) user namespaces; no capabilities; a new session; killed with its parent. Under
  root the code runs as a user id of its own per slot, held by no other process on the machine, so the
  process limit counts only its processes.
- "none" (`tito grade --unsafe-no-sandbox`): the process box, stated in every report.

The runner reports on a pipe that the parent reads with a size cap, so nothing in the box writes to a
file the parent later opens.
"""

from __future__ import annotations

import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SANDBOX_UID_BASE = 61000
SANDBOX_UIDS = 1000  # the boxes' user ids: SANDBOX_UID_BASE up to SANDBOX_UID_BASE + SANDBOX_UIDS - 1
INSIDE = Path("/job")  # where the job folder appears inside the bubblewrap box


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 4 << 30
    wall_seconds: float = 300.0
    file_bytes: int = 64 << 20
    tmp_bytes: int = 64 << 20
    open_files: int = 256
    processes: int = 64
    report_bytes: int = 64 << 20  # read from one box, over all its requests


@lru_cache(maxsize=1)
def bwrap_available() -> bool:
    """bubblewrap is installed and can build a box on this machine in which Python starts."""
    return sys.platform == "linux" and shutil.which("bwrap") is not None and _box_mode() is not None


@lru_cache(maxsize=1)
def _box_mode() -> str | None:
    """How the box gets its own user: "user" (a non-root grader: a user namespace of its own), "drop"
    (root: drop to a user id of its own, then a user namespace, as for a non-root grader), "inside" (root,
    where that user cannot reach the interpreter, e.g. under /root: bubblewrap as root builds the root, and
    inside it, as a user id of its own, a second bubblewrap makes the user namespace)."""
    modes = ["drop", "inside"] if os.geteuid() == 0 else ["user"]
    for mode in modes:
        probe = bwrap_prefix(0, Limits(), mode) + [sys.executable, "-I", "-S", "-c",
                                                    "import sys; sys.path += sys.argv[1:]; import numpy; "
                                                    "open('/tmp/probe', 'w').close()", *site_paths()]
        try:
            if subprocess.run(probe, capture_output=True, timeout=60, preexec_fn=_new_session).returncode == 0:
                return mode
        except (OSError, subprocess.SubprocessError):
            continue
    return None


def describe(isolation: str) -> str:
    return {
        "bwrap": "bubblewrap sandbox: read-only allow-listed root, no network, new PID/IPC/user namespaces, "
                 "a user id of its own, private size-limited /tmp, resource limits"
                 + (", memory and processes limited per submission (cgroup)" if cgroups_available() else
                    " (memory limited per process: no cgroup can be made here)"),
        "process": "a child process with resource limits and a deadline (feedback on your own machine)",
        "none": "NO SANDBOX (--unsafe-no-sandbox): student code ran with the grader's rights and could read "
                "and write the grader's files and use the network",
    }[isolation]


def interpreter_paths() -> list[Path]:
    """The folders the runner needs to start Python and import numpy: the interpreter's installation
    and the virtual environment (if any)."""
    found = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             Path(sys.executable).resolve().parent.parent}
    return sorted(path for path in found if path != Path("/usr"))


def site_paths() -> list[str]:
    """The site-packages folders the runner adds to sys.path (it starts with -S, so no .pth file runs)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def _new_session() -> None:
    os.setsid()


_CLAIMS: dict[int, tuple[int, socket.socket]] = {}  # slot -> (user id, the socket that holds it)
_CLAIMING = threading.Lock()


def box_uid(slot: int) -> int:
    """The user id of this process's boxes of `slot` under root: SANDBOX_UID_BASE + slot, or the next one
    that no other process on the machine holds. RLIMIT_NPROC counts a user's processes machine-wide, so a
    box that forks to its limit would keep the boxes of another grading run (nbgrader's judge beside `tito
    grade`, say) from starting if they shared its user. A user id is held by binding an abstract Unix
    socket named after it, released when this process ends (the boxes have a network namespace of their
    own, so they cannot hold one)."""
    if os.geteuid() != 0:  # a user namespace of the grader's own: no user id is dropped to
        return SANDBOX_UID_BASE + slot
    with _CLAIMING:
        if slot not in _CLAIMS:
            mine = {uid for uid, _ in _CLAIMS.values()}
            for uid in range(SANDBOX_UID_BASE + slot, SANDBOX_UID_BASE + SANDBOX_UIDS):
                if uid in mine:
                    continue
                claim = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                try:
                    claim.bind(f"\0tito-box-user-{uid}")
                except OSError:  # another process boxes as this user now
                    claim.close()
                    continue
                _CLAIMS[slot] = (uid, claim)
                break
            else:
                raise OSError(f"every box user id from {SANDBOX_UID_BASE + slot} to "
                              f"{SANDBOX_UID_BASE + SANDBOX_UIDS - 1} is held by another process")
        return _CLAIMS[slot][0]


def bwrap_prefix(slot: int, limits: Limits, mode: str | None = None) -> list[str]:
    """The command up to the program to run in the box, whose user owns nothing outside and whose
    processes alone count against RLIMIT_NPROC (see `_box_mode` and `box_uid`)."""
    mode = mode or _box_mode()
    uid = box_uid(slot)
    drop = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    command = [*(drop if mode == "drop" else []), "bwrap", "--die-with-parent", "--new-session",
               "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
               "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    if mode != "inside":  # a user namespace, in which no further one can be made
        command += ["--unshare-user", "--disable-userns"]
    for name in ("bin", "lib", "lib64", "sbin"):
        if Path(f"/{name}").is_symlink():
            command += ["--symlink", os.readlink(f"/{name}"), f"/{name}"]
        elif Path(f"/{name}").is_dir():
            command += ["--ro-bind", f"/{name}", f"/{name}"]
    # the private /tmp first: a virtual environment under /tmp (a CI clone) is bound into it, not hidden by it
    command += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
    command += parent_dirs([*interpreter_paths(), INSIDE / "lib"], {Path("/tmp")})
    for path in interpreter_paths():
        command += ["--ro-bind", str(path), str(path)]
    command += ["--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp", "--clearenv"]
    if mode == "inside":  # then, as that user, a user namespace of its own in which no further one can be made
        return command + ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--", *drop,
                          "--inh-caps=-all", "--no-new-privs", "/usr/bin/bwrap", "--unshare-user",
                          "--disable-userns", "--uid", str(uid), "--gid", str(uid), "--die-with-parent",
                          "--new-session", "--unshare-pid", "--as-pid-1", "--dev-bind", "/", "/", "--"]
    return command + ["--as-pid-1", "--"]  # the runner is pid 1: no process of bubblewrap's shares its box


def parent_dirs(paths: list[Path], made: set[Path]) -> list[str]:
    """bubblewrap arguments that make the folders above each of `paths` (binds to come) in the box,
    traversable by the box's user; `made` holds those made already and grows."""
    arguments = []
    for path in paths:
        for parent in reversed(path.parents[:-1]):
            if parent not in made:
                made.add(parent)
                arguments += ["--perms", "0755", "--dir", str(parent)]
    return arguments


CGROUP_ROOT = Path("/sys/fs/cgroup")


class Cgroup:
    """A control group per box, where the machine lets the grader make one (as root, cgroup v1 or v2):
    memory and process count limited for the whole submission, not per process."""

    def __init__(self, name: str, limits: Limits) -> None:
        self.folders: list[Path] = []
        for controller, settings in _cgroup_settings(limits).items():
            try:
                folder = _cgroup_parent(controller) / name
                folder.mkdir()
            except OSError:
                if controller in OPTIONAL_CONTROLLERS:
                    continue
                raise
            self.folders.append(folder)
            for setting, value in settings.items():
                (folder / setting).write_text(value)

    def cpu_seconds(self) -> float | None:
        """CPU time of every process that was ever in the cgroup (cgroup v2's cpu.stat, v1's cpuacct.usage),
        reaped or not, or None."""
        for folder in self.folders:
            try:
                if (folder / "cpuacct.usage").is_file():
                    return int((folder / "cpuacct.usage").read_text()) / 1e9
                for line in (folder / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
            except (OSError, ValueError):
                continue
        return None

    def processes(self) -> list[int] | None:
        """Every process in the cgroup now (however it left its parent's tree), or None."""
        for folder in self.folders:
            try:
                return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
            except (OSError, ValueError):
                continue
        return None

    def enter(self) -> None:
        """Called in the box's first process before it starts anything: it and its descendants join."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text("0")

    def remove(self) -> None:
        for folder in self.folders:
            for _ in range(50):  # the box's last processes may still be exiting
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _cgroup_settings(limits: Limits) -> dict[str, dict[str, str]]:
    if (CGROUP_ROOT / "cgroup.controllers").is_file():  # cgroup v2 mounted at the root
        return {"": {"memory.max": str(limits.memory_bytes), "memory.swap.max": "0",
                     "pids.max": str(limits.processes)}}
    return {"memory": {"memory.limit_in_bytes": str(limits.memory_bytes)},
            "pids": {"pids.max": str(limits.processes)}, "cpuacct": {}}


OPTIONAL_CONTROLLERS = {"cpuacct"}  # counts CPU where it can; the /proc count stands in where it cannot


def _cgroup_parent(controller: str) -> Path:
    """The folder of this process's own cgroup for `controller` ("" for cgroup v2)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if (controller == "" and names == "") or controller in names.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/") if controller else CGROUP_ROOT / path.lstrip("/")
    raise OSError(f"no {controller or 'v2'} cgroup")


def cgroup_folders(pattern: str) -> list[Path]:
    """This process's child cgroups whose names match `pattern`, in every controller tito uses."""
    found: list[Path] = []
    for controller in _cgroup_settings(Limits()):
        try:
            found += _cgroup_parent(controller).glob(pattern)
        except OSError:
            continue
    return found


@lru_cache(maxsize=1)
def cgroups_available() -> bool:
    """Whether a box can get a cgroup of its own here (root, and the controllers writable)."""
    if os.geteuid() != 0 or sys.platform != "linux":
        return False
    try:
        probe = Cgroup(f"tito-probe-{os.getpid()}", Limits())
    except (OSError, ValueError):
        return False
    probe.remove()
    return True


def _user_processes() -> int:
    uid = str(os.getuid())
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as status:
                    if any(line.startswith("Uid:") and line.split()[1] == uid for line in status):
                        count += 1
            except OSError:
                continue
    return count


def limiter(limits: Limits, isolation: str, cgroup: Cgroup | None = None) -> Callable[[], None]:
    # for a non-root grader RLIMIT_NPROC counts all of its own processes: allow those running now
    processes = limits.processes if os.geteuid() == 0 else _user_processes() + limits.processes
    cpu = int(limits.wall_seconds) + 5
    subreaper = _subreaper() if isolation != "bwrap" else None

    def apply() -> None:
        os.setsid()
        if subreaper is not None:  # orphans of the box become the runner's, not init's: close() finds them
            subreaper()
        if cgroup is not None:
            cgroup.enter()
        if cgroup is None:  # else the cgroup limits resident memory, not reserved address space (thread stacks)
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if isolation == "bwrap":
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    return apply


def _subreaper() -> Callable[[], None] | None:
    """prctl(PR_SET_CHILD_SUBREAPER) for the box's first process (kept across exec), where libc has it: without a
    PID namespace a process that double-forks out of the runner's tree would outlive the box. Looked up before
    the fork, as a preexec_fn should do little."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError, ImportError):
        return None
    return lambda: prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp", "PYTHONHASHSEED": "0",
       "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


MAX_LINE_BYTES = 8 << 20  # one reply of the runner: the largest honest one is 2.6 MiB (04)
CPU_GRACE = 2.0  # seconds of CPU past a budget before the parent stops the box (the runner's own timer is first)
# Seconds on the parent's clock past the runner's own wall timer before the parent stops the box: the runner's
# report (with where the code was) then arrives on a loaded machine too, so the words do not depend on load.
WALL_GRACE = 5.0


def box_view(path: Path, slot: int) -> None:
    """Make the tree at `path` readable by the box user of `slot` and by no other account: under root, group
    owned by that user's own group (bubblewrap drops to it), 0750/0640; otherwise the grader's alone,
    0700/0600 (a user namespace maps the grader to the box's user). The paths are on every box's command
    line, which any account can read in /proc, so the modes are what keeps a job or a package private."""
    root = os.geteuid() == 0
    gid = box_uid(slot) if root else -1
    for entry in [path, *path.rglob("*")]:
        if entry.is_symlink():
            continue
        if root:
            os.chown(entry, 0, gid)
        entry.chmod((0o750 if root else 0o700) if entry.is_dir() else (0o640 if root else 0o600))


def _slot_job(job: Path, slot: int) -> Path:
    """The job's runner files as the box user of `slot` may read them (a copy of its own under root)."""
    if os.geteuid() != 0:
        return job
    copy = job / f"box-{box_uid(slot)}"
    if not (copy / "work.json").is_file():
        scratch = job / f".box-{box_uid(slot)}-{time.monotonic_ns()}"
        shutil.copytree(job / "lib", scratch / "lib")
        shutil.copy2(job / "work.json", scratch / "work.json")
        box_view(scratch, slot)
        try:
            scratch.rename(copy)
        except OSError:  # made meanwhile by another box of the slot
            shutil.rmtree(scratch, ignore_errors=True)
    return copy


class Interrupted(Exception):
    """The run is stopping (kill_all): no box is started any more."""


_OPEN: weakref.WeakSet[Box] = weakref.WeakSet()  # the boxes of this process not yet closed
_STOPPING = threading.Event()  # set by kill_all: no box starts after it


def kill_all() -> int:
    """End every box of this process now and start none after (an interrupted `tito grade`): the threads that
    drive them see their box end within a poll (0.1 s) and return. How many were killed."""
    _STOPPING.set()
    killed = 0
    for box in list(_OPEN):
        if box.process.poll() is None:
            box.kill()
            killed += 1
    return killed


class Box:
    """One runner in a box, driven by this (trusted) process: it sends one request at a time on the box's
    request pipe and reads one line in reply from its report pipe, with its own clocks. The deadline, the CPU
    budget of each request (the box's CPU time as the kernel counts it, read from outside: the box's cgroup, or
    /proc of its processes) and the bytes read are all decided here; nothing the box says about time counts.

    `package` None starts the runner without the package under test (the yardstick of a timed check)."""

    def __init__(self, job: Path, package: Path | None, *, limits: Limits, isolation: str, slot: int = 0) -> None:
        if _STOPPING.is_set():
            raise Interrupted("the grading run was interrupted")
        self.limits, self.isolation = limits, isolation
        python = [sys.executable, "-I", "-S", "-B"]
        report_read, report_write = os.pipe()
        request_read, request_write = os.pipe()
        where = "-" if package is None else str(INSIDE / "pkg" if isolation == "bwrap" else package)
        if isolation == "bwrap":
            job = _slot_job(job, slot)
            setenv = [part for key, value in ENV.items() for part in ("--setenv", key, value)]
            binds = ["--ro-bind", str(job / "lib"), f"{INSIDE}/lib", "--ro-bind", str(job / "work.json"),
                     f"{INSIDE}/work.json"]
            if package is not None:
                binds += ["--ro-bind", str(package), f"{INSIDE}/pkg"]
            prefix = bwrap_prefix(slot, limits)
            split = prefix.index("--")
            command = [*prefix[:split], *binds, *setenv, *prefix[split:], *python, f"{INSIDE}/lib/runner.py",
                       str(INSIDE), where, str(report_write), str(request_read), *site_paths()]
        else:
            command = [*python, str(job / "lib" / "runner.py"), str(job), where, str(report_write),
                       str(request_read), *site_paths()]
        self.cgroup = Cgroup(f"tito-{os.getpid()}-{slot}-{time.monotonic_ns()}", limits) \
            if isolation == "bwrap" and cgroups_available() else None
        try:
            self.process = subprocess.Popen(command, cwd="/tmp" if isolation == "bwrap" else str(job),
                                            env=dict(ENV), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, pass_fds=(report_write, request_read),
                                            preexec_fn=limiter(limits, isolation, self.cgroup))
        except BaseException:
            for fd in (report_read, request_write):
                os.close(fd)
            if self.cgroup is not None:
                self.cgroup.remove()
            raise
        finally:
            os.close(report_write)
            os.close(request_read)
        self.reports, self.requests = report_read, request_write
        os.set_blocking(self.requests, False)
        self.lines: list[bytes] = []
        self.chunks: list[bytes] = []
        self.pending = 0  # bytes of the line not yet ended
        self.read_bytes = 0
        self.pids: list[int] = [self.process.pid]
        self.watched = time.monotonic()
        self.truncated = False
        self.closed = False
        self.paused: set[int] = set()
        _OPEN.add(self)

    # -- what the box used, measured from outside

    def watch_processes(self) -> None:
        """Note the box's processes now (the runner under bubblewrap has a pid of its own out here), for the
        CPU count where no cgroup counts it."""
        self.pids = _descendants(self.process.pid) or [self.process.pid]
        self.watched = time.monotonic()

    def cpu(self) -> float:
        """Seconds of CPU the box's processes have used so far (their own, and that of those they reaped)."""
        if self.cgroup is not None:
            used = self.cgroup.cpu_seconds()
            if used is not None:
                return used
        if time.monotonic() - self.watched > 0.5:  # a process forked since, or left unreaped, counts too
            self.watch_processes()
        return sum(_process_cpu(pid) for pid in self.pids)

    def processes(self) -> list[int]:
        """The box's processes now: its cgroup's, or the tree below the process started."""
        found = self.cgroup.processes() if self.cgroup is not None else None
        return found if found is not None else _descendants(self.process.pid)

    def pause(self) -> None:
        """Stop every process of the box (SIGSTOP, which no process can catch, block or ignore) until
        resume(): a timed check's yardstick is timed while nothing of the package runs. Processes forked while
        this runs are found by the next look and stopped in turn; it returns once a look finds none running.
        Not in the "process" box of `tito test`: there the student's code fools only the student, and each look
        at the process tree reads all of /proc (a few ms a timed case)."""
        if self.isolation == "process":
            return
        for _ in range(PAUSE_LOOKS):
            running = [pid for pid in self.processes() if _state(pid) not in ("T", "t", "Z", "X", "")]
            if not running:
                return
            _signal(running, signal.SIGSTOP)
            self.paused.update(running)
            time.sleep(0.001)

    def resume(self) -> None:
        if self.isolation == "process":
            return
        _signal({*self.paused, *self.processes()}, signal.SIGCONT)
        self.paused.clear()

    # -- the conversation

    def send(self, line: bytes, deadline: float) -> bool:
        """Write one request line; False when the box stopped reading (ended, or past the deadline)."""
        view = memoryview(line)
        while view:
            now = time.monotonic()
            if now >= deadline or self.process.poll() is not None:
                return False
            _, ready, _ = select.select([], [self.requests], [], min(0.2, deadline - now))
            if not ready:
                continue
            try:
                written = os.write(self.requests, view)
            except (BrokenPipeError, BlockingIOError, OSError):
                return False
            view = view[written:]
        return True

    def receive(self, deadline: float, cpu_limit: float | None = None) -> tuple[bytes | None, str]:
        """The next line the box writes, or (None, why): "wall" (the deadline passed), "cpu" (the box used
        more than `cpu_limit` seconds of CPU), "ended" (the box is gone), "truncated" (it wrote more than
        the parent reads). The box is killed in every case but "ended"."""
        ended_at: float | None = None
        while True:
            if self.lines:
                return self.lines.pop(0), ""
            now = time.monotonic()
            if self.process.poll() is not None and ended_at is None:
                ended_at = now
            if ended_at is not None and now - ended_at > 1.0:
                return None, "ended"  # the runner is gone; something it left behind still holds the pipe
            if now >= deadline:
                return self._stop("wall")
            if cpu_limit is not None and self.cpu() > cpu_limit:
                return self._stop("cpu")
            ready, _, _ = select.select([self.reports], [], [], min(0.1, deadline - now))
            if not ready:
                continue
            data = os.read(self.reports, 1 << 20)
            if not data:
                if self.process.poll() is None:
                    try:
                        self.process.wait(timeout=max(0.1, min(2.0, deadline - time.monotonic())))
                    except subprocess.TimeoutExpired:
                        pass
                return None, "ended"
            self.read_bytes += len(data)
            if self.read_bytes > self.limits.report_bytes:
                return self._stop("truncated")
            self._split(data)

    def _split(self, data: bytes) -> None:
        """Complete lines to self.lines; the rest waits in self.chunks (joined only once a line ends). A line
        longer than MAX_LINE_BYTES is dropped as it arrives (it counts against report_bytes all the same)."""
        while (end := data.find(b"\n")) >= 0:
            if self.pending + end <= MAX_LINE_BYTES:
                self.lines.append(b"".join([*self.chunks, data[:end]]))
            self.chunks, self.pending, data = [], 0, data[end + 1:]
        if data:
            self.pending += len(data)
            self.chunks = [*self.chunks, data] if self.pending <= MAX_LINE_BYTES else []

    def _stop(self, why: str) -> tuple[None, str]:
        self.truncated = self.truncated or why == "truncated"
        self.kill()
        return None, why

    def kill(self) -> None:
        self._end_strays()
        if self.process.poll() is None:
            _kill(self.process)

    def _end_strays(self) -> None:
        """Without a PID namespace (every box but bubblewrap's), end the processes below the runner that left
        its session, which killing its process group would not reach."""
        if self.isolation != "bwrap" and self.process.poll() is None:
            _signal(_descendants(self.process.pid)[1:], signal.SIGKILL)

    def close(self) -> int | None:
        """End the box (closing its request pipe ends the runner), free its cgroup; its exit status."""
        if self.closed:
            return self.process.returncode
        self.closed = True
        _OPEN.discard(self)
        self._end_strays()
        try:
            os.close(self.requests)
        except OSError:
            pass
        try:
            self.process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self.process.wait()
        os.close(self.reports)
        if self.cgroup is not None:
            self.cgroup.remove()
        return self.process.returncode

    def __enter__(self) -> Box:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stream:
            return stream.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _signal(pids: Iterable[int], number: int) -> None:
    """Send a signal to each of `pids`, those gone already (or never the box's) passed over."""
    for pid in pids:
        try:
            os.kill(pid, number)
        except (ProcessLookupError, PermissionError):
            pass


def _state(pid: int) -> str:
    """A process's state letter ("R", "S", "T" stopped, "Z" ...), "" once it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else ""


PAUSE_LOOKS = 50  # a box forking as fast as it can is stopped within a few looks: each stops all it finds


def _process_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of a process, in seconds (0 once it is gone)."""
    fields = _stat_fields(pid)
    return sum(int(value) for value in fields[11:15]) / _TICKS if len(fields) > 14 else 0.0


def _descendants(pid: int) -> list[int]:
    """`pid` and every process below it now."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if len(fields) > 1 and fields[1].isdigit():
                children.setdefault(int(fields[1]), []).append(int(entry))
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        pending += children.get(current, [])
    return found


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
