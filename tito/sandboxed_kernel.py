"""The kernel nbgrader's autograde runs (kernelspec "tinytorch-sandboxed"): an ipykernel in a bubblewrap box.

    python -m tito.sandboxed_kernel -f CONNECTION_FILE [ipykernel arguments]

This launcher runs as the instructor and builds the box; the student's code runs only inside it:

- the allow-listed root of tito/sandbox.py: read-only /usr, interpreter and virtual environment, the
  `tito` package (not the rest of the checkout), a private /tmp; new PID, network, IPC and UTS
  namespaces; a user id of its own; a cgroup for memory and processes; killed with the launcher, and
  everything it started dies with its pid 1;
- its channels to nbgrader are Unix sockets (ZMQ's ipc transport) in a folder bound at /kernel, reached
  from outside through symbolic links at the paths the connection file names; no network at all;
- a home, /home/student, holding a writable copy of the assignment's folder (the kernel's working
  folder) and read-only copies of the same student's submitted notebooks of the earlier modules, which
  the notebook's first cell exports as its `tinytorch` (tito.fetched): no reference code, no other
  student, nothing of the course.

Nothing the box writes is read back: copies are discarded with it. No other account on the machine can
read any of it while the kernel runs (`make_box`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tito import sandbox
from tito.project import STAGE_DIR

CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")
HOME = Path("/home/student")
KERNEL = Path("/kernel")
SLOT = 100  # the box's user id is sandbox.box_uid(SLOT), apart from the judge's runners
LIMITS = sandbox.Limits(memory_bytes=4 << 30, wall_seconds=3600.0, processes=128)


def _fail(message: str) -> int:
    print(f"tinytorch sandboxed kernel: {message}", file=sys.stderr)
    return 2


def _earlier_notebooks(work: Path) -> dict[str, Path]:
    """The same student's submitted notebooks of the modules before this one: autograde runs in
    <course>/autograded/<student>/<assignment>/, the submissions are in <course>/submitted/<student>/."""
    if len(work.parents) < 3 or not STAGE_DIR.match(work.name):
        return {}
    submitted = work.parents[2] / "submitted" / work.parent.name
    found = {}
    if submitted.is_dir():
        for folder in sorted(submitted.iterdir()):
            notebook = folder / f"{folder.name}.ipynb"
            if STAGE_DIR.match(folder.name) and folder.name < work.name and notebook.is_file():
                found[folder.name] = notebook
    return found


def _copy_folder(source: Path, destination: Path, limit: int = 64 << 20) -> None:
    """A copy of the assignment's folder (files nbgrader placed there: the notebook and any data), without
    links and without anything larger than `limit` in all."""
    destination.mkdir(parents=True)
    total = 0
    for path in sorted(source.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        total += path.stat().st_size
        if total > limit:
            break
        target = destination / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def _own(path: Path, uid: int) -> None:
    """`path` and everything under it for the box's user alone (0700/0600): under root that user owns them;
    under a non-root grader they are the grader's own, as is the box's user. What the box must not change
    is bound read-only into it."""
    for entry in [path, *path.rglob("*")]:
        if os.geteuid() == 0:
            os.chown(entry, uid, uid)
        entry.chmod(0o700 if entry.is_dir() else 0o600)


def make_box(work: Path, info: dict, uid: int) -> Path:
    """The box's folder in the temporary folder: kernel/ (the connection file, then the kernel's sockets),
    home/<stage>/ (a copy of the assignment's folder) and home/NN_name/ (the student's earlier submitted
    notebooks). No other account may read any of it, as it holds submissions and the kernel's key: the
    copies are the box user's alone, and the folder itself is at most crossable by that user (0710, its
    group, under root; 0700, the grader's, otherwise). It is made private before anything is written."""
    stage = work.name if STAGE_DIR.match(work.name) else "work"
    box = Path(tempfile.mkdtemp(prefix=f"tito-kernel-{os.getpid()}-"))  # 0700, ours
    try:
        (box / "kernel").mkdir(mode=0o700)
        inside = {**info, "ip": str(KERNEL / "ipc")}
        (box / "kernel" / "connection.json").write_text(json.dumps(inside), encoding="utf-8")
        _copy_folder(work, box / "home" / stage)
        for name, notebook in _earlier_notebooks(work).items():
            (box / "home" / name).mkdir(parents=True)
            shutil.copyfile(notebook, box / "home" / name / notebook.name)
        _own(box / "home", uid)
        _own(box / "kernel", uid)
        if os.geteuid() == 0:  # the box's user (setpriv drops to it before bubblewrap binds these) crosses it
            os.chown(box, 0, uid)
            box.chmod(0o710)
    except BaseException:
        shutil.rmtree(box, ignore_errors=True)
        raise
    return box


def box_command(box: Path, stage: str, extra: list[str]) -> list[str]:
    """The bubblewrap command that runs ipykernel on /kernel/connection.json in the box."""
    tito_package = Path(__file__).resolve().parent
    binds = [*sandbox.parent_dirs([tito_package, HOME / stage], set()),
             "--ro-bind", str(tito_package), str(tito_package), "--ro-bind", str(box / "home"), str(HOME),
             "--bind", str(box / "home" / stage), str(HOME / stage),
             "--bind", str(box / "kernel"), str(KERNEL), "--chdir", str(HOME / stage)]
    env = {**sandbox.ENV, "HOME": "/tmp", "NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION", ""),
           "PYTHONDONTWRITEBYTECODE": "1"}
    setenv = [part for key, value in env.items() for part in ("--setenv", key, value)]
    prefix = sandbox.bwrap_prefix(SLOT, LIMITS)
    at = prefix.index("--chdir")
    del prefix[at:at + 2]  # the box starts in the assignment's folder instead
    # ipykernel ends itself with SIGTERM, which pid 1 of a namespace ignores: bubblewrap stays pid 1, and
    # when the kernel ends it ends too, and the kernel's namespace with every process in it
    prefix.remove("--as-pid-1")
    split = prefix.index("--")
    return [*prefix[:split], *binds, *setenv, *prefix[split:], sys.executable, "-m", "ipykernel_launcher",
            "-f", str(KERNEL / "connection.json"), *extra]


def _sweep() -> None:
    """Remove what a launcher killed outright (SIGKILL, no clean-up) left: its box folder and cgroup."""
    def dead(name: str) -> bool:
        pid = name.split("-")[2] if name.count("-") >= 2 else ""
        return pid.isdigit() and not Path(f"/proc/{pid}").exists()

    for folder in Path(tempfile.gettempdir()).glob("tito-kernel-*"):
        if dead(folder.name):
            shutil.rmtree(folder, ignore_errors=True)
    if sandbox.cgroups_available():
        for folder in sandbox.cgroup_folders("tito-kernel-*"):
            if dead(folder.name):
                try:
                    folder.rmdir()
                except OSError:
                    pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "-f" not in argv or argv.index("-f") + 1 >= len(argv):
        return _fail("usage: python -m tito.sandboxed_kernel -f CONNECTION_FILE")
    at = argv.index("-f")
    connection_file, extra = Path(argv[at + 1]), argv[:at] + argv[at + 2:]
    try:
        info = json.loads(connection_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        return _fail(f"cannot read the connection file {connection_file}: {error}")
    if info.get("transport") != "ipc":
        return _fail("the sandboxed kernel has no network, so its channels must be Unix sockets: set "
                     "c.KernelManager.transport = \"ipc\" in nbgrader_config.py (tito course init writes it)")
    if not sandbox.bwrap_available():
        return _fail("bubblewrap is missing, so the notebook cannot run sandboxed: install it (Debian/Ubuntu: "
                     "`sudo apt install bubblewrap`), or autograde with another kernel at your own risk")
    work = Path.cwd()
    stage = work.name if STAGE_DIR.match(work.name) else "work"
    uid = sandbox.box_uid(SLOT) if os.geteuid() == 0 else os.getuid()
    _sweep()
    box = make_box(work, info, uid)
    # a relative ip is relative to the client's folder (nbgrader's), not to this one (the notebook's)
    client = Path(os.readlink(f"/proc/{os.getppid()}/cwd"))
    links = [client / f"{info['ip']}-{info[channel]}" for channel in CHANNELS]
    cgroup = None
    try:
        for link, channel in zip(links, CHANNELS):
            link.unlink(missing_ok=True)
            link.symlink_to(box / "kernel" / f"ipc-{info[channel]}")
        if sandbox.cgroups_available():
            cgroup = sandbox.Cgroup(f"tito-kernel-{os.getpid()}", LIMITS)
        process = subprocess.Popen(box_command(box, stage, extra), env=dict(sandbox.ENV),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,  # stderr: nbgrader's log
                                   preexec_fn=sandbox.limiter(LIMITS, "bwrap", cgroup))
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda number, frame: process.send_signal(signal.SIGKILL))
        return process.wait()
    finally:
        for link in links:
            if link.is_symlink():
                link.unlink()
        if cgroup is not None:
            cgroup.remove()
        shutil.rmtree(box, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
