"""`tito grade` on a real class: honest and hostile submissions graded together in real sandboxes.

One `tito grade` run grades a hostile class: honest submissions (full, empty, half done, and full ones under
odd student ids) beside adversaries of every kind: escape and persistence, reading outside the box,
crashing the trusted parent, crashing the class, forging results and abusing resources. Every adversary
scores no more than the honest work it contains, has a row graded like any other (never a grader fault,
never missing), and every honest grade is the one it gets when graded alone. Escapes also leave no trace:
no file written outside, no process alive after the run, no connection.

Most adversaries that try to read or write outside report what they managed from inside the box: they
end the import with `RuntimeError("PROBE <what succeeded>")`, which reaches their feedback as the import
error, so "PROBE []" in their notes says the code ran to its end and nothing succeeded.

Two attacks need a run of their own: a crash timed against a short deadline, and a notebook whose export
alone strains the trusted parent's memory.
"""

from __future__ import annotations

import csv
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from tito import grading, sandbox

from conftest import REPO, Run, tito
from student import edit_cell, fill

pytestmark = pytest.mark.slow  # real subprocesses and sandboxes end to end: left out by make test-fast

STAGE = "01_tensor"
SOURCE = REPO / "solutions" / STAGE / f"{STAGE}.py"
NOTEBOOK = REPO / "modules" / STAGE / f"{STAGE}.ipynb"
ALL_TASKS = {f"01.{number}" for number in range(1, 15)}
HALF_TASKS = {"01.1", "01.2", "01.3", "01.4", "01.5"}
SUM_TASK = "01.8"  # the task of sum_kernel: its two checks (the [sum] variants) are the only ones that call it
INTERPRETER = [str(path) for path in sandbox.interpreter_paths()]  # bound into the box on purpose


def _first_export_cell(path: Path) -> int:
    cells = nbformat.read(path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith("#| export"))


def _kernel_cell(path: Path, name: str) -> int:
    cells = nbformat.read(path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and f"def {name}(" in c.source)


def submission(folder: Path, student: str, *, filled: bool, at_import: str = "", kernel_edit=None,
               tasks: set[str] | None = None) -> Path:
    """A student's folder holding their 01_tensor notebook, optionally filled (only `tasks` when given), with
    code added to the first exported cell (runs when the package is imported) or a kernel cell rewritten."""
    path = folder / student / f"{STAGE}.ipynb"
    path.parent.mkdir(parents=True)
    shutil.copy2(NOTEBOOK, path)
    if filled:
        fill(path, SOURCE, tasks)
    if at_import:
        edit_cell(path, _first_export_cell(path), lambda text: text + "\n" + at_import)
    if kernel_edit:
        name, edit = kernel_edit
        edit_cell(path, _kernel_cell(path, name), edit)
    return path


def in_sum(code: str):
    """A kernel edit: `code` runs first in sum_kernel's body, each time the kernel is called."""
    body = textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", "    ")
    return "sum_kernel", lambda text: text.replace('"""\n', '"""\n' + body, 1)


def after_sum(code: str):
    """A kernel edit: `code` runs at the top level right after sum_kernel is defined."""
    return "sum_kernel", lambda text: text + "\n" + textwrap.dedent(code).strip("\n") + "\n"


def fill_in(code: str, **values) -> str:
    """`code` with each __NAME__ replaced by repr(values[name])."""
    code = textwrap.dedent(code).strip("\n") + "\n"
    for name, value in values.items():
        code = code.replace(f"__{name}__", repr(value))
    return code


def tito_bytes(*args: str) -> Run:
    """`tito` as conftest runs it, its output decoded with surrogateescape: the run prints student ids
    exactly as found on disk, and an id need not be UTF-8."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "tito", *args], cwd=REPO, env=env, capture_output=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout.decode("utf-8", "surrogateescape"),
               done.stderr.decode("utf-8", "surrogateescape"))


def grades(out: Path) -> dict[str, float]:
    with open(out / "grades.csv", encoding="utf-8") as stream:
        return {row["student"]: float(row["score"]) for row in csv.DictReader(stream)}


def csv_name(student: str) -> str:
    """A student id as grades.csv spells it (written with errors="backslashreplace")."""
    return student.encode("utf-8", "backslashreplace").decode("utf-8")


def processes_matching(*needles: str) -> list[str]:
    """Host processes whose command line or name holds one of `needles`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as stream:
                text = stream.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{entry}/comm", encoding="utf-8", errors="replace") as stream:
                text += " " + stream.read().strip()
        except OSError:
            continue
        if any(needle in text for needle in needles):
            found.append(f"{entry}: {text[:120]}")
    return found


# ---------------------------------------------------------------------------------------------------
# The code of the adversaries, run at import of the package (at_import) or inside sum_kernel (in_sum)

# Helpers for the probes; every name starts with an underscore so the package's public names stay the same.
PRELUDE = """
import os as _os


def _report_fd():
    import sys as _sys  # the runner's command line: JOB PACKAGE REPORT_FD REQUEST_FD ...

    return int(_sys.argv[3])


def _request_fd():
    import sys as _sys

    return int(_sys.argv[4])


def _readable(_path):
    try:
        with open(_path, "rb") as _stream:
            return _stream.read(1 << 16)
    except Exception:
        return None


def _files(_top, _limit=50000):
    _skip = {"/proc", "/sys", "/dev", "/usr", "/job", "/tmp", *__INTERPRETER__}
    _seen = 0
    for _root, _dirs, _names in _os.walk(_top):
        _dirs[:] = [_d for _d in _dirs if _os.path.join(_root, _d) not in _skip]
        for _name in _names:
            _seen += 1
            if _seen > _limit:
                return
            yield _os.path.join(_root, _name)


def _probe(_leaks):
    raise RuntimeError("PROBE " + repr(sorted(set(_leaks)))[:250])
"""


def probe(code: str, **values) -> str:
    return fill_in(PRELUDE, INTERPRETER=INTERPRETER) + "\n\n" + fill_in(code, **values)


WRITES_OUTSIDE = """
_wrote = []
for _path in __TARGETS__:
    try:
        with open(_path, "a") as _stream:
            _stream.write("pwned\\n")
        _wrote.append(_path)
    except Exception:
        pass
for _path in __BOX_ONLY__:  # the box's own /tmp: writable there, never the host's
    try:
        open(_path, "w").write("pwned")
    except Exception:
        pass
_probe(_wrote)
"""

OUTLIVES_THE_JOB = """
import time as _time

_child = _os.fork()
if _child == 0:
    try:
        _os.setsid()
        if _os.fork() == 0:  # a Python process that would tamper with whatever runs after this job
            try:
                import ctypes as _ctypes
                _ctypes.CDLL(None).prctl(15, __COMM__.encode(), 0, 0, 0)  # PR_SET_NAME
            except Exception:
                pass
            _time.sleep(2)
            for _ in range(100000):
                for _path in __FLAGS__:
                    try:
                        open(_path, "w").write("still alive")
                    except Exception:
                        pass
                try:
                    _os.kill(-1, 9)
                except Exception:
                    pass
                _time.sleep(0.05)
            _os._exit(0)
        if _os.fork() == 0:
            _os.execv("/usr/bin/sleep", ["sleep", __MARKER__])
    finally:
        _os._exit(0)
_os.waitpid(_child, 0)
_started = set()
for _ in range(100):  # both left-behind processes run before this job ends
    for _pid in (_entry for _entry in _os.listdir("/proc") if _entry.isdigit()):
        _text = (_readable("/proc/%s/cmdline" % _pid) or b"") + (_readable("/proc/%s/comm" % _pid) or b"")
        _started |= {_name for _name in (__MARKER__, __COMM__) if _name.encode() in _text}
    if len(_started) == 2:
        break
    _time.sleep(0.05)
_probe([] if len(_started) == 2 else ["the processes to leave behind did not start"])
"""

DAEMON_THREAD = """
import threading as _threading
import time as _time


def _tamper():
    _forged = b'{"check": "reduction_over_axes[sum]", "outcomes": [{"output": 21.0}]}\\n{"finished": true}\\n'
    _fd = _report_fd()
    while True:
        try:
            _os.write(_fd, _forged)
        except Exception:
            pass
        for _path in __FLAGS__:
            try:
                open(_path, "w").write("thread")
            except Exception:
                pass
        _time.sleep(0.01)


_threading.Thread(target=_tamper, daemon=True).start()
"""

USER_NAMESPACE = """
import ctypes as _ctypes
import subprocess as _subprocess

_libc = _ctypes.CDLL(None, use_errno=True)
_uid, _gid = _os.getuid(), _os.getgid()
_read, _write = _os.pipe()
_child = _os.fork()
if _child == 0:
    _seen = []
    try:
        if _libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
            _seen.append("userns=refused")
        else:
            _seen.append("userns=created")
            for _file, _text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", "0 %d 1" % _uid),
                                 ("/proc/self/gid_map", "0 %d 1" % _gid)):
                try:
                    with open(_file, "w") as _stream:
                        _stream.write(_text)
                except Exception:
                    pass
            for _target in (b"/usr", b"/job/lib", b"/job/pkg", b"/"):  # MS_REMOUNT | MS_BIND, not read-only
                if _libc.mount(None, _target, None, 32 | 4096, None) == 0:
                    _seen.append("remounted " + _target.decode())
            for _path in __TARGETS__:
                try:
                    open(_path, "w").write("pwned")
                    _seen.append("wrote " + _path)
                except Exception:
                    pass
    finally:
        _os.write(_write, " ".join(_seen).encode())
        _os._exit(0)
_os.close(_write)
_os.waitpid(_child, 0)
_seen = _os.read(_read, 4096).decode().split()
try:
    _done = _subprocess.run(["unshare", "-r", "true"], capture_output=True, timeout=10)
    _seen.append("cli-userns=" + ("created" if _done.returncode == 0 else "refused"))
    _done = _subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -o remount,rw /usr && touch " + __USR__],
                            capture_output=True, timeout=10)
    _seen.append("cli-remount=" + ("done" if _done.returncode == 0 else "failed"))
except Exception as _error:
    _seen.append("cli=" + type(_error).__name__)
raise RuntimeError("PROBE " + " ".join(_seen))
"""

PTRACE = """
import ctypes as _ctypes

_libc = _ctypes.CDLL(None, use_errno=True)
_leaks = []
for _pid in sorted({1, _os.getppid()}):
    for _request, _name in ((16, "attach"), (0x4206, "seize")):  # PTRACE_ATTACH, PTRACE_SEIZE
        if _libc.ptrace(_request, _pid, None, None) == 0:
            _leaks.append("%s %d" % (_name, _pid))
    for _part in ("mem", "environ", "stack"):
        if _readable("/proc/%d/%s" % (_pid, _part)):
            _leaks.append("read /proc/%d/%s" % (_pid, _part))
    for _part in ("root", "cwd", "fd"):
        try:
            _os.listdir("/proc/%d/%s" % (_pid, _part))
            _leaks.append("listed /proc/%d/%s" % (_pid, _part))
        except Exception:
            pass
_probe(_leaks)
"""

READS_THE_SOLUTIONS = """
_found = [_path for _path in __PATHS__ if _readable(_path) is not None]
_found += [_path for _path in _files("/") if _path.endswith("solutions/01_tensor/01_tensor.py")]
for _path in _found:
    try:
        exec(open(_path).read(), globals())  # the reference in place of the stubs
    except Exception:
        pass
_probe(_found)
"""

READS_THE_HIDDEN_SUITE = """
_leaks = [_path for _path in __PATHS__ if _readable(_path) is not None]
_leaks += [_path for _path in _files("/") if _path.endswith(("test_01_tensor.py", "test_02_autograd.py"))]
_slice = (_readable("/job/lib/compute_slice.py") or b"").decode()
if "def _(" in _slice or "expect_error" in _slice or ".expected" in _slice or ".verdict" in _slice:
    _leaks.append("judging code in the compute slice")
_probe(_leaks)
"""

READS_OTHER_SUBMISSIONS = """
_leaks = [_path for _path in __PATHS__ if _readable(_path) is not None or _os.path.isdir(_path)]
_leaks += [_path for _path in _files("/") if _path.endswith(".ipynb")]
_command = (_readable("/proc/1/cmdline") or b"").split(b"\\0")
for _word in _command:  # the box's init names the host folders bound into it: try to reach beyond them
    if _word.startswith(b"/tmp/tito-grade-"):
        _scratch = _word.decode().split("/")[:3]
        _where = "/".join(_scratch)
        try:
            _leaks += [_where + "/" + _name for _name in _os.listdir(_where)][:3]
        except Exception:
            pass
_probe(_leaks)
"""

READS_HOST_PROC = """
_leaks = []
_pids = [_entry for _entry in _os.listdir("/proc") if _entry.isdigit()]
if len(_pids) > 8:
    _leaks.append("%d processes" % len(_pids))
for _pid in _pids:
    _command = _readable("/proc/%s/cmdline" % _pid) or b""
    if any(_needle.encode() in _command for _needle in __NEEDLES__):
        _leaks.append("host process %s" % _pid)
    _self = {str(_os.getpid()), _os.readlink("/proc/self")}  # itself, numbered in the box or in /proc's view
    if _pid not in _self and _readable("/proc/%s/environ" % _pid):
        _leaks.append("environment of %s" % _pid)
_probe(_leaks)
"""

READS_GRADER_ENV = """
_leaks = [_key for _key, _value in _os.environ.items() if __SECRET__ in _key + _value]
for _entry in _os.listdir("/proc"):
    for _part in ("environ", "cmdline"):
        if __SECRET__.encode() in (_readable("/proc/%s/%s" % (_entry, _part)) or b""):
            _leaks.append("/proc/%s/%s" % (_entry, _part))
_probe(_leaks)
"""

READS_ETC = """
_leaks = []
for _path in ("/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers", "/etc/hostname"):
    _data = _readable(_path)
    if _data:
        _leaks.append(_path)
_probe(_leaks)
"""

READS_THE_COURSE_KEY = """
_leaks = [_path for _path in __PATHS__ if _readable(_path) is not None]
for _path in _files("/"):
    if _path.endswith(".tito-course-key") or __SECRET__.encode() in (_readable(_path) or b"")[:4096]:
        _leaks.append(_path)
_probe(_leaks)
"""

READS_THE_GRADERS_HOME = """
_leaks = list(_files(__HOME__))[:5]
for _name in (".ssh", ".bash_history", ".config", ".cache", ".gitconfig", ".netrc", ".pypirc"):
    if _os.path.lexists(__HOME__ + "/" + _name):
        _leaks.append(_name)
_probe(_leaks)
"""

FLOODS_THE_REPORT_PIPE = """
_fd = _report_fd()
_chunk = b"x" * (1 << 20)
for _ in range(100):
    _os.write(_fd, _chunk)
"""

WRITES_A_HUGE_JSON_LINE = """
_fd = _report_fd()
_chunk = b"0.5," * (1 << 18)
_os.write(_fd, b"[")
for _ in range(60):
    _os.write(_fd, _chunk)
_os.write(_fd, b"0.5]\\n")
"""

WRITES_MALFORMED_JSON = """
_fd = _report_fd()
_lines = [b"{", b"}", b"[" * 100000 + b"]" * 100000, b'{"a": ' * 50000 + b"1" + b"}" * 50000,
          b"\\xff\\xfe\\xfd not utf-8", b"\\0" * 1000, b"1" * 10000, b"NaN", b'"just a string"',
          b'{"importing": {"a": [1, 2]}}', b'{"imported": "yes"}', b'{"begin": ["reduction_over_axes[sum]"]}',
          b'{"check": 5, "outcomes": []}', b'{"check": "reduction_over_axes[sum]", "outcomes": 7}',
          b'{"check": "reduction_over_axes[sum]", "outcomes": {"0": {"output": 1}}}', b'{"check": null}',
          b'{"begin": "no_such_check"}', b'{"check": "no_such_check", "outcomes": [{"output": 1}]}',
          b"\\x1e\\x1c\\xe2\\x80\\xa8\\xc2\\x85"]
for _line in _lines:
    _os.write(_fd, _line + b"\\n")
"""

# Both take the runner's place at import: they read the grader's requests themselves and answer each.
FORGES_EVERY_CHECK = """
import json as _json

_os.write(_report_fd(), b'{"imported": true}\\n')
for _line in _os.fdopen(_request_fd()):
    _reply = {"n": _json.loads(_line)["n"], "outcome": {"output": {"__dict__": {"passed": True, "score": 68}}}}
    _os.write(_report_fd(), (_json.dumps(_reply) + "\\n").encode())
_os._exit(0)
"""

FORGES_UNDECODABLE_OUTPUTS = """
import json as _json

_payloads = [{"__ndarray__": "", "dtype": "<f8", "shape": [2 ** 70]}, {"__dict__": 5}, {"__dict__": ["x"]},
             {"__ndarray__": "", "dtype": "<f8", "shape": [1e300]}, {"__tuple__": {"a": 1}},
             {"__scalar__": {"__dict__": 7}}]
_os.write(_report_fd(), b'{"imported": true}\\n')
for _number, _line in enumerate(_os.fdopen(_request_fd())):
    _reply = {"n": _json.loads(_line)["n"], "outcome": {"output": _payloads[_number % len(_payloads)]}}
    _os.write(_report_fd(), (_json.dumps(_reply) + "\\n").encode())
_os._exit(0)
"""

PATCHES_WIRE_ENCODE = """
import sys as _sys

_sys.modules["wire"].encode = lambda value: {"__dict__": ["forged"]}
"""

REPLACES_THE_COMPUTE_FUNCTIONS = """
import sys as _sys
import wire as _wire

_slice = _sys.modules["compute_slice"]
for _check in _wire.loads(open("/job/work.json").read())["checks"]:
    setattr(_slice, _check["name"], lambda tt, case: {"passed": True, "points": 68})
"""

REPLACES_THE_RUN_CHECK = """
import sys as _sys

_sys.modules["__main__"]._run_case = lambda *rest: {"output": True}
"""

COMPUTES_SUM_WITH_NUMPY = """
import sys as _sys

import numpy as _np


def _forged_sum(tt, case):
    _axis = tuple(case["axis"]) if isinstance(case["axis"], list) else case["axis"]
    return _np.sum(case["x"], axis=_axis, keepdims=case["keepdims"])


_sys.modules["compute_slice"].reduction_over_axes = _forged_sum
_sys.modules["compute_slice"].reduction_over_an_empty_axis = _forged_sum
"""

HOLDS_MEMORY_IN_MANY_PROCESSES = """
import mmap as _mmap
import time as _time

_read, _write = _os.pipe()
_children = []
for _ in range(3):
    _pid = _os.fork()
    if _pid == 0:
        try:  # 512 MiB, every page in memory (MAP_POPULATE)
            _block = _mmap.mmap(-1, 512 << 20, flags=_mmap.MAP_PRIVATE | _mmap.MAP_ANONYMOUS | _mmap.MAP_POPULATE)
            _os.write(_write, b"1")
            _time.sleep(60)
        finally:
            _os._exit(0)
    _children.append(_pid)
_os.close(_write)
_held = 0
_deadline = _time.monotonic() + 20
while _held < 3 and _time.monotonic() < _deadline:
    _data = _os.read(_read, 8)
    if not _data:
        break
    _held += len(_data)
for _pid in _children:
    try:
        _os.kill(_pid, 9)
    except OSError:
        pass
raise RuntimeError("PROBE held %d x 512 MiB at once" % _held)
"""

FILLS_TMP = """
_written = 0
for _folder in ("/tmp", "/dev/shm", "/var/tmp", "/job/pkg"):
    for _number in range(200):
        try:
            with open("%s/fill_%d" % (_folder, _number), "wb") as _stream:
                for _ in range(64):
                    _stream.write(b"\\0" * (1 << 20))
                    _written += 1
        except Exception:
            break
"""

MANY_THREADS = """
import threading as _threading
import time as _time

_threads = []
for _ in range(10000):
    try:
        _thread = _threading.Thread(target=_time.sleep, args=(3600,), daemon=True)
        _thread.start()
        _threads.append(_thread)
    except Exception:
        break
"""

CONNECTS_TO_HOST_SOCKETS = """
import socket as _socket

for _address in __ABSTRACT__:
    try:
        _client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        _client.settimeout(2)
        _client.connect(_address)
        _client.send(b"x")
    except Exception:
        pass
for _host in ("10.0.2.2", "172.17.0.1", "192.168.1.1", "169.254.169.254", "pypi.org"):
    try:
        _socket.create_connection((_host, 80), timeout=1).send(b"x")
    except Exception:
        pass
"""

LYING_RESULT = """
class _Liar(np.ndarray):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    def __bool__(self):
        return True

    def tobytes(self, *args, **kwargs):
        return np.ones(self.shape, self.dtype).tobytes()


class _LyingTensor:
    def __init__(self, data):
        self.data = data


Tensor.sum = lambda self, axis=None, keepdims=False: _LyingTensor(
    np.asarray(np.sum(self.data, axis=axis, keepdims=keepdims)).view(_Liar))
"""


# ---------------------------------------------------------------------------------------------------
# The class

HONEST = ("honest_full", "honest_empty", "honest_half")
ODD_IDS = {  # honest full work under ids that are hard to handle
    "emoji": "🦊 élève ñ",
    "traversal": "%2e%2e%2f..\\..\\pwned",
    "invalid_utf8": "bad\udcff\udcfeid",
    "control_chars": "ctl\r\x1b[2Jid\nnext",
}

# adversaries with no honest work: 0
ZERO = ["patches_the_checks", "exits_after_printing_passed", "reads_the_solutions", "writes_the_gradebook",
        "writes_outside", "outlives_the_job", "daemon_thread_tampers", "creates_a_user_namespace",
        "ptraces_the_box_init", "reads_the_hidden_suite", "reads_other_submissions", "reads_host_proc",
        "reads_grader_env", "reads_etc_passwd_and_shadow", "reads_the_course_key", "reads_the_graders_home",
        "floods_the_report_pipe", "forges_every_check_as_finished", "forges_undecodable_outputs",
        "holds_memory_in_many_processes", "empty_notebook_file", "deeply_nested_notebook",
        "cell_source_is_not_text", "zip_bomb", "zip_slip", "links_to_etc_shadow", "links_to_honest_notebook",
        "fifo_notebook"]
# adversaries with full honest work whose attack at import must not cost or earn anything
ZERO_DESPITE_WORK = ["loops_forever", "sleeps_past_the_timeout", "patches_wire_encode",
                     "replaces_the_compute_functions", "replaces_the_runners_run_check"]
UNCHANGED_FULL = ["opens_a_connection", "prints_100_mb", "prints_a_100_mb_line", "writes_a_huge_json_line",
                  "writes_malformed_json", "fills_tmp", "many_threads", "connects_to_host_sockets",
                  "ten_thousand_cells", "invalid_utf8_notebook"]
# the runner is pid 1 of its box, so a SIGKILL it sends itself is ignored: at most its honest work
# and its process group holds only itself, so killing everything it sees reaches nothing
AT_MOST_FULL = ["forks_repeatedly", "kills_itself_in_sum", "kills_everything_in_sum"]
# replaces the grader's compute of the sum check with numpy at import: the runner sees its functions changed
TAMPERS = "computes_sum_with_numpy_in_the_runner"
# full honest work with sum_kernel sabotaged: exactly the sum task's checks lost, for the reason given (one of
# the words appears in the messages of the lost checks; under bubblewrap a signal shows as exit status 128 + n)
LOSES_THE_SUM_TASK = {
    "allocates_8_gib": ("MemoryError", "SIGKILL"),  # an address-space limit, or the box's cgroup
    "hard_codes_public_answers": ("but got 6.0", "wrong dtype"),
    "segfaults_in_sum": ("exit status 139", "SIGSEGV"),
    "aborts_in_sum": ("exit status 134", "SIGABRT", "SIGSEGV"),  # as pid 1 SIGABRT is ignored; abort() then faults
    "exits_inside_sum": ("exit status 3",),
    "raises_system_exit_in_sum": ("SystemExit",),
    "recursion_bomb_in_sum": ("exit status 139", "SIGSEGV", "RecursionError"),
    "closes_the_report_pipe_in_sum": ("ended the process",),
    "nan_and_inf_from_sum": ("got nan", "got inf"),
    "lying_object_from_sum": ("but got 1.0",),
}
BUSY_LOOP = "busy_loop_in_one_check"  # loses only the one check it loops in
# --timeout leaves the busy loop its check's 30 s of CPU time even on a loaded machine (its wall limit is
# 100 s); only the adversaries that hang until the deadline would wait that long, and none does.
FLAGS = ("--stage", "01", "-j", "2", "--timeout", "150", "--memory-mb", "1024", "--seed", "7", "--examples", "3")
PROBES = ["reads_the_solutions", "writes_outside", "outlives_the_job", "ptraces_the_box_init", "reads_the_hidden_suite",
          "reads_other_submissions", "reads_host_proc", "reads_grader_env", "reads_etc_passwd_and_shadow",
          "reads_the_course_key", "reads_the_graders_home"]


@dataclass
class GradedClass:
    folder: Path
    out: Path
    run: Run
    seconds: float
    students: list[str]
    alone: dict  # results.json grades of the honest submissions graded alone, by student
    tag: str
    host_files: list[Path] = field(default_factory=list)  # files outside that no submission may create
    markers: list[str] = field(default_factory=list)  # process names no process may carry after the run
    connections: list = field(default_factory=list)
    secret: str = ""
    _results: dict = field(default_factory=dict)

    def results(self) -> dict[str, dict]:
        if not self._results:
            grades = json.loads((self.out / "results.json").read_text())["grades"]
            self._results.update({g["student"]: g for g in grades})
        return self._results

    def rows(self) -> dict[str, dict]:
        with open(self.out / "grades.csv", encoding="utf-8", newline="") as stream:
            return {row["student"]: row for row in csv.DictReader(stream)}

    def notes(self, student: str) -> str:
        return " ".join(self.results()[student]["notes"])

    def lost(self, student: str) -> set[str]:
        return {t["id"] for t in self.results()[student]["tests"] if not t["passed"]}


class Listener:
    """Servers on the host that record whether anyone connected: TCP on every address and an abstract unix
    socket (abstract sockets belong to the network namespace, not to the file system)."""

    def __init__(self) -> None:
        self.tcp = socket.socket()
        self.tcp.bind(("0.0.0.0", 0))
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract_name = f"\0tinytorch-grade-test-{secrets.token_hex(4)}"
        self.abstract.bind(self.abstract_name)
        self.connections: list = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._accept, args=(server,), daemon=True)
                        for server in (self.tcp, self.abstract)]
        for server, thread in zip((self.tcp, self.abstract), self.threads):
            server.listen()
            server.settimeout(0.2)
            thread.start()

    @property
    def port(self) -> int:
        return self.tcp.getsockname()[1]

    def _accept(self, server: socket.socket) -> None:
        while not self.stop.is_set():
            try:
                self.connections.append(server.accept()[0])
            except OSError:
                continue

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()
        self.tcp.close()
        self.abstract.close()


@pytest.fixture(scope="module")
def listener():
    server = Listener()
    yield server
    server.close()


def _make_zip_bomb(path: Path) -> None:
    zeros = bytes(1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(f"work/{STAGE}.ipynb", "w", force_zip64=True) as member:
            for _ in range(200):
                member.write(zeros)


def _build_class(folder: Path, out: Path, listener: Listener, tag: str, secret: str) -> GradedClass:
    home = Path.home()
    flags = [f"/tmp/tt-flag-{tag}", str(out / f"flag-{tag}"), str(REPO / f"flag-{tag}"), str(home / f"flag-{tag}")]
    host_files = [Path(p) for p in flags]
    targets = ["/job/lib/runner.py", "/job/lib/compute_slice.py", "/job/lib/wire.py", f"/job/lib/pwned_{tag}.py",
               "/job/work.json", "/job/pkg/tinytorch/__init__.py", f"/job/pkg/tinytorch/pwned_{tag}.py",
               f"/job/pwned_{tag}", f"/pwned_{tag}", f"/usr/pwned_{tag}", f"/usr/bin/pwned_{tag}",
               f"/dev/shm/pwned_{tag}", f"/dev/pwned_{tag}", f"/var/tmp/pwned_{tag}",
               str(REPO / "tito" / f"pwned_{tag}.py"), str(REPO / "tito" / "shipped" / f"pwned_{tag}.py"),
               str(out / f"pwned_{tag}"), str(out / "feedback" / f"honest_full-{tag}.md"),
               str(home / f"pwned_{tag}"), str(folder / "honest_full" / f"pwned_{tag}"),
               str(folder.parent / f"pwned_{tag}"), str(sandbox.interpreter_paths()[-1] / f"pwned_{tag}")]
    host_files += [Path(p) for p in targets if not p.startswith(("/job/", "/dev/pwned"))]
    host_files += [Path(f"/tmp/pwned_{tag}"), Path(f"/dev/shm/pwned_{tag}")]
    marker = f"3599.{secrets.randbelow(10 ** 6):06d}"
    comm = f"ttp{tag[:8]}"
    usr_mark = f"/usr/ns_pwned_{tag}"
    host_files.append(Path(usr_mark))
    (out / ".tito-course-key").write_text(secret + "\n")
    solution = str(REPO / "solutions" / STAGE / f"{STAGE}.py")
    ours = folder / "honest_full" / f"{STAGE}.ipynb"

    submission(folder, "honest_full", filled=True)
    submission(folder, "honest_empty", filled=False)
    submission(folder, "honest_half", filled=True, tasks=HALF_TASKS)
    submission(folder, "zzz_honest_after_everyone", filled=True)
    for student in ODD_IDS.values():
        submission(folder, student, filled=True)

    # --- the original adversaries
    submission(folder, "patches_the_checks", filled=False, at_import=(
        "import sys\n"
        "try:\n    import checklib\n    checklib.assert_close = lambda *a, **k: None\n"
        "    checklib.CheckFailed = Exception\nexcept Exception:\n    pass\n"
        "try:\n    import pytest\n    pytest.fail = lambda *a, **k: None\nexcept Exception:\n    pass\n"))
    submission(folder, "exits_after_printing_passed", filled=False,
               at_import="import os\nprint('45 passed, 0 failed')\nos._exit(0)\n")
    submission(folder, "reads_the_solutions", filled=False, at_import=probe(READS_THE_SOLUTIONS, PATHS=[solution]))
    submission(folder, "allocates_8_gib", filled=True, kernel_edit=in_sum("_hog = bytearray(8 << 30)"))
    submission(folder, "loops_forever", filled=True, at_import="while True:\n    pass\n")
    submission(folder, "forks_repeatedly", filled=True, at_import=(
        "import os\nfor _ in range(100000):\n    try:\n        os.fork()\n    except OSError:\n        break\n"))
    submission(folder, "writes_the_gradebook", filled=False, at_import=(
        f"for _path in [{str(out / 'grades.csv')!r}, {str(folder.parent / 'gradebook.db')!r}]:\n"
        "    try:\n        open(_path, 'w').write('student,stage,mode,score,max_score\\nwrites_the_gradebook,01,"
        "cumulative,68,68\\n')\n    except Exception:\n        pass\n"))
    submission(folder, "opens_a_connection", filled=True, at_import=(
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {listener.port}), timeout=2).send(b'x')\n"
        "except OSError:\n    pass\n"))
    submission(folder, "prints_100_mb", filled=True, at_import=(
        "import sys\n_line = 'x' * 1023 + '\\n'\nfor _ in range(100 * 1024):\n    sys.stdout.write(_line)\n"))
    submission(folder, "sleeps_past_the_timeout", filled=True, at_import="import time\ntime.sleep(3600)\n")
    submission(folder, "hard_codes_public_answers", filled=True,
               kernel_edit=in_sum("return np.asarray(6.0, dtype=np.float32)"))

    # --- escape and persistence
    submission(folder, "writes_outside", filled=False, at_import=probe(
        WRITES_OUTSIDE, TARGETS=targets, BOX_ONLY=[f"/tmp/pwned_{tag}"]))
    submission(folder, "outlives_the_job", filled=False, at_import=probe(
        OUTLIVES_THE_JOB, COMM=comm, FLAGS=flags, MARKER=marker))
    submission(folder, "daemon_thread_tampers", filled=False, at_import=probe(DAEMON_THREAD, FLAGS=flags))
    submission(folder, "creates_a_user_namespace", filled=False, at_import=probe(
        USER_NAMESPACE, TARGETS=[usr_mark, f"/job/lib/ns_pwned_{tag}", f"/job/pkg/ns_pwned_{tag}"], USR=usr_mark))
    submission(folder, "ptraces_the_box_init", filled=False, at_import=probe(PTRACE))
    submission(folder, "kills_everything_in_sum", filled=True, kernel_edit=in_sum("""
        import os, signal
        for _pid in (1, os.getppid()):
            try:
                os.kill(_pid, signal.SIGKILL)
            except OSError:
                pass
        os.kill(-1, signal.SIGKILL)
        """))
    submission(folder, "connects_to_host_sockets", filled=True, at_import=fill_in(
        CONNECTS_TO_HOST_SOCKETS, ABSTRACT=[listener.abstract_name]))

    # --- reading outside
    submission(folder, "reads_the_hidden_suite", filled=False, at_import=probe(READS_THE_HIDDEN_SUITE, PATHS=[
        str(REPO / "autograder" / f"test_{STAGE}.py"), str(REPO / "autograder" / "pytest.ini"),
        str(REPO / "tito" / "engine.py")]))
    submission(folder, "reads_other_submissions", filled=False, at_import=probe(READS_OTHER_SUBMISSIONS, PATHS=[
        str(ours), str(folder), str(folder / "honest_half"), str(out)]))
    submission(folder, "reads_host_proc", filled=False, at_import=probe(READS_HOST_PROC, NEEDLES=[
        "pytest", str(folder), "--out", "tito grade"]))
    submission(folder, "reads_grader_env", filled=False, at_import=probe(READS_GRADER_ENV, SECRET=secret))
    submission(folder, "reads_etc_passwd_and_shadow", filled=False, at_import=probe(READS_ETC))
    submission(folder, "reads_the_course_key", filled=False, at_import=probe(READS_THE_COURSE_KEY, SECRET=secret,
               PATHS=[str(out / ".tito-course-key"), str(folder.parent / ".tito-course-key")]))
    submission(folder, "reads_the_graders_home", filled=False, at_import=probe(
        READS_THE_GRADERS_HOME, HOME=str(home)))

    # --- crashing the trusted parent through the report pipe
    submission(folder, "floods_the_report_pipe", filled=False, at_import=probe(FLOODS_THE_REPORT_PIPE))
    submission(folder, "writes_a_huge_json_line", filled=True, at_import=probe(WRITES_A_HUGE_JSON_LINE))
    submission(folder, "writes_malformed_json", filled=True, at_import=probe(WRITES_MALFORMED_JSON))
    submission(folder, "prints_a_100_mb_line", filled=True, at_import=(
        "import sys\nsys.stdout.write('y' * (100 << 20))\nsys.stderr.write('z' * (100 << 20))\n"))

    # --- crashing the trusted parent through the files it reads
    (folder / "empty_notebook_file").mkdir()
    (folder / "empty_notebook_file" / f"{STAGE}.ipynb").write_bytes(b"")
    nested = '{"cells": [], "metadata": {"deep": ' + "[" * 500_000 + "]" * 500_000 + "}}"
    (folder / "deeply_nested_notebook").mkdir()
    (folder / "deeply_nested_notebook" / f"{STAGE}.ipynb").write_text(nested)
    (folder / "deeply_nested_notebook" / "extra.ipynb").write_text(nested)
    path = submission(folder, "cell_source_is_not_text", filled=True)
    data = json.loads(path.read_text())
    data["cells"][_first_export_cell(path)]["source"] = {"not": "text"}
    data["cells"][-1]["source"] = 12345
    path.write_text(json.dumps(data))
    path = submission(folder, "ten_thousand_cells", filled=True)
    notebook = nbformat.read(path, as_version=4)
    for number in range(10_000):
        notebook.cells.append(nbformat.v4.new_code_cell(f"#| export\n_filler_{number} = {number}", id=f"f{number}")
                              if number % 2 else nbformat.v4.new_markdown_cell(f"filler {number}", id=f"f{number}"))
    nbformat.write(notebook, path)
    path = submission(folder, "invalid_utf8_notebook", filled=True)
    raw = path.read_bytes()
    assert b"How to work" in raw and b"framework default" in raw
    path.write_bytes(raw.replace(b"How to work", b"How \xff\xfe\xc3 to work", 1)
                     .replace(b"framework default", b"framework \xc0\xaf\xed\xa0\x80 default", 1))
    _make_zip_bomb(folder / "zip_bomb.zip")
    with zipfile.ZipFile(folder / "zip_slip.zip", "w") as archive:  # a member whose path climbs out
        archive.writestr(zipfile.ZipInfo(f"../../zip_slip_{tag}/{STAGE}.ipynb"), ours.read_bytes())
    host_files += [folder.parent.parent / f"zip_slip_{tag}", folder / f"zip_slip_{tag}", out / f"zip_slip_{tag}"]
    for student, target in (("links_to_etc_shadow", Path("/etc/shadow")), ("links_to_honest_notebook", ours)):
        (folder / student).mkdir()
        (folder / student / f"{STAGE}.ipynb").symlink_to(target)
    (folder / "fifo_notebook").mkdir()
    os.mkfifo(folder / "fifo_notebook" / f"{STAGE}.ipynb")

    # --- crashing the class: sum_kernel ends the process that runs it, in every way there is
    submission(folder, "segfaults_in_sum", filled=True, kernel_edit=in_sum("import ctypes\nctypes.string_at(0)"))
    submission(folder, "aborts_in_sum", filled=True, kernel_edit=in_sum("import os\nos.abort()"))
    submission(folder, "exits_inside_sum", filled=True, kernel_edit=in_sum("import os\nos._exit(3)"))
    submission(folder, "raises_system_exit_in_sum", filled=True, kernel_edit=in_sum("raise SystemExit(0)"))
    submission(folder, "recursion_bomb_in_sum", filled=True, kernel_edit=in_sum("""
        import sys
        sys.setrecursionlimit(1 << 30)
        _nest = []
        for _ in range(200_000):
            _nest = [_nest]
        repr(_nest)
        """))
    submission(folder, "kills_itself_in_sum", filled=True, kernel_edit=in_sum("import os\nos.kill(os.getpid(), 9)"))
    submission(folder, "closes_the_report_pipe_in_sum", filled=True, kernel_edit=in_sum("""
        import os
        for _n in os.listdir("/proc/self/fd"):
            try:
                if os.readlink("/proc/self/fd/" + _n).startswith("pipe:"):
                    os.close(int(_n))
                    os.dup2(os.open("/tmp/swallowed", os.O_WRONLY | os.O_CREAT), int(_n))  # the runner writes here
            except OSError:
                pass
        """))
    submission(folder, BUSY_LOOP, filled=True, kernel_edit=in_sum("""
        import builtins
        if not getattr(builtins, "_tt_looped", False):
            builtins._tt_looped = True
            while True:
                pass
        """))

    # --- forging
    submission(folder, "forges_every_check_as_finished", filled=False, at_import=probe(FORGES_EVERY_CHECK))
    submission(folder, "forges_undecodable_outputs", filled=False, at_import=probe(FORGES_UNDECODABLE_OUTPUTS))
    submission(folder, "patches_wire_encode", filled=True, at_import=PATCHES_WIRE_ENCODE)
    submission(folder, "replaces_the_compute_functions", filled=True, at_import=REPLACES_THE_COMPUTE_FUNCTIONS)
    submission(folder, "replaces_the_runners_run_check", filled=True, at_import=REPLACES_THE_RUN_CHECK)
    submission(folder, "computes_sum_with_numpy_in_the_runner", filled=True, tasks=ALL_TASKS - {SUM_TASK},
               at_import=COMPUTES_SUM_WITH_NUMPY)
    submission(folder, "nan_and_inf_from_sum", filled=True, kernel_edit=in_sum("""
        _right = np.asarray(np.sum(a, axis=axis, keepdims=keepdims))
        if _right.dtype.kind == "f":  # NaN or infinity, in the right dtype and shape
            return np.full(_right.shape, np.nan if np.size(a) % 2 else np.inf, _right.dtype)
        """))
    submission(folder, "lying_object_from_sum", filled=True, kernel_edit=after_sum(LYING_RESULT))

    # --- resource abuse
    submission(folder, "holds_memory_in_many_processes", filled=False, at_import=probe(HOLDS_MEMORY_IN_MANY_PROCESSES))
    submission(folder, "fills_tmp", filled=True, at_import=FILLS_TMP)
    submission(folder, "many_threads", filled=True, at_import=MANY_THREADS)

    students = sorted({*HONEST, "zzz_honest_after_everyone", *ODD_IDS.values(), *ZERO, *ZERO_DESPITE_WORK,
                       *UNCHANGED_FULL, *AT_MOST_FULL, *LOSES_THE_SUM_TASK, BUSY_LOOP, TAMPERS})
    assert {s.removesuffix(".zip") for s in os.listdir(folder)} == set(students)
    return GradedClass(folder, out, Run(0, "", ""), 0.0, students, {}, tag, host_files,
                       [marker, comm], listener.connections, secret)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, listener) -> GradedClass:
    base = tmp_path_factory.mktemp("class")
    folder, out = base / "submitted", base / "grades"
    out.mkdir()
    (out / "grades.csv").write_text("sentinel\n")
    tag = secrets.token_hex(6)
    secret = f"grader-secret-{secrets.token_hex(8)}"
    graded = _build_class(folder, out, listener, tag, secret)

    alone = base / "alone"
    for student in HONEST:
        shutil.copytree(folder / student, alone / student)
    run = tito(REPO, "grade", str(alone), "--out", str(base / "alone-grades"), *FLAGS)
    assert run.code == 0, run.stderr
    graded.alone = {g["student"]: g for g in json.loads((base / "alone-grades" / "results.json").read_text())["grades"]}

    previous = os.environ.get("TITO_GRADER_SECRET")
    os.environ["TITO_GRADER_SECRET"] = secret  # the grader's environment holds a secret the box must not see
    try:
        started = time.monotonic()
        graded.run = tito_bytes("grade", str(folder), "--out", str(out), *FLAGS)
        graded.seconds = time.monotonic() - started
        for name, text in (("stdout.txt", graded.run.stdout), ("stderr.txt", graded.run.stderr)):
            (base / name).write_bytes(text.encode("utf-8", "surrogateescape"))  # for a look after a failure
    finally:
        if previous is None:
            os.environ.pop("TITO_GRADER_SECRET")
        else:
            os.environ["TITO_GRADER_SECRET"] = previous
    print(f"class of {len(graded.students)} in {base} graded in {graded.seconds:.0f} s")
    return graded


# ---------------------------------------------------------------------------------------------------
# The whole class


def test_the_run_finishes_without_a_grader_fault(graded_class):
    run = graded_class.run
    assert run.code == 0, run.stderr[-3000:]
    assert "grader fault" not in (graded_class.out / "summary.md").read_text()
    faults = {g["student"]: sum(t["fault"] for t in g["tests"]) for g in graded_class.results().values()}
    assert {student: count for student, count in faults.items() if count} == {}


def test_every_submission_has_one_graded_row(graded_class):
    rows = graded_class.rows()
    assert sorted(rows) == sorted(csv_name(student) for student in graded_class.students)
    faults = {student: row["status"] for student, row in rows.items() if row["status"] != "graded"}
    assert faults == {}
    assert set(graded_class.results()) == set(graded_class.students)


def test_honest_grades_are_the_same_as_when_graded_alone(graded_class):
    results = graded_class.results()
    for student, alone in graded_class.alone.items():
        assert results[student]["score"] == alone["score"], student
        assert [(t["id"], t["passed"]) for t in results[student]["tests"]] == \
            [(t["id"], t["passed"]) for t in alone["tests"]], student
    maximum = results["honest_full"]["max_score"]
    assert results["honest_full"]["score"] == maximum
    assert results["honest_empty"]["score"] == 0
    assert 0 < results["honest_half"]["score"] < maximum
    assert results["zzz_honest_after_everyone"]["score"] == maximum  # graded after every adversary


@pytest.mark.parametrize("kind", sorted(ODD_IDS))
def test_an_odd_student_id_is_graded_like_any_other(graded_class, kind):
    student = ODD_IDS[kind]
    result = graded_class.results()[student]
    assert result["score"] == result["max_score"]
    assert graded_class.rows()[csv_name(student)]["status"] == "graded"
    heading = f"# Feedback for {grading.markdown_text(student)}\n".encode("utf-8", "backslashreplace")
    feedback = [path for path in (graded_class.out / "feedback").iterdir() if path.read_bytes().startswith(heading)]
    assert len(feedback) == 1 and feedback[0].parent == graded_class.out / "feedback"
    assert not list(graded_class.out.parent.glob("*pwned*")) and not list(graded_class.out.glob("*pwned*"))


def test_a_student_id_cannot_write_control_characters_to_the_graders_terminal(graded_class):
    """The control-character id holds ESC [2J (clear the screen) and a carriage return: printed raw, an id
    can rewrite what the instructor sees in the terminal."""
    run = graded_class.run
    assert "\x1b[2J" not in run.stdout + run.stderr
    assert "\r" not in (run.stdout + run.stderr).replace("\r\n", "\n")


# ---------------------------------------------------------------------------------------------------
# Each adversary's grade


@pytest.mark.parametrize("student", ZERO + ZERO_DESPITE_WORK)
def test_adversary_scores_zero(graded_class, student):
    result = graded_class.results()[student]
    assert not result["fault"] and not [t["id"] for t in result["tests"] if t["fault"]]
    assert result["score"] == 0, [t["id"] for t in result["tests"] if t["passed"]]
    assert graded_class.rows()[student]["status"] == "graded"


@pytest.mark.parametrize("student", UNCHANGED_FULL)
def test_adversary_with_full_honest_work_gets_exactly_its_grade(graded_class, student):
    results = graded_class.results()
    assert results[student]["score"] == results["honest_full"]["score"], graded_class.lost(student)
    assert graded_class.rows()[student]["status"] == "graded"


@pytest.mark.parametrize("student", AT_MOST_FULL)
def test_adversary_with_full_honest_work_scores_no_more_than_it(graded_class, student):
    results = graded_class.results()
    assert results[student]["score"] <= results["honest_full"]["score"]
    assert graded_class.rows()[student]["status"] == "graded"


@pytest.mark.parametrize("student", sorted(LOSES_THE_SUM_TASK))
def test_adversary_loses_exactly_the_checks_of_the_task_it_broke(graded_class, student):
    results = graded_class.results()
    sum_checks = {t["id"] for t in results["honest_full"]["tests"] if t["task"] == SUM_TASK}
    sum_points = sum(t["max_points"] for t in results["honest_full"]["tests"] if t["task"] == SUM_TASK)
    assert graded_class.lost(student) == sum_checks, graded_class.notes(student)
    assert results[student]["score"] == results["honest_full"]["score"] - sum_points
    assert graded_class.rows()[student]["status"] == "graded"
    messages = " ".join(t["message"] for t in results[student]["tests"] if not t["passed"])
    assert any(words in messages for words in LOSES_THE_SUM_TASK[student]), messages


def test_a_package_that_rewrites_the_graders_compute_gets_nothing_and_is_told_why(graded_class):
    result = graded_class.results()[TAMPERS]
    assert result["score"] == 0 and graded_class.rows()[TAMPERS]["status"] == "graded"
    assert "changed the grader's code (compute_slice.reduction_over_" in graded_class.notes(TAMPERS)


def test_a_busy_loop_costs_only_the_check_it_loops_in(graded_class):
    assert graded_class.lost(BUSY_LOOP) == {"reduction_over_axes[sum]"}, graded_class.notes(BUSY_LOOP)
    test = next(t for t in graded_class.results()[BUSY_LOOP]["tests"] if t["id"] == "reduction_over_axes[sum]")
    assert "CPU time" in test["message"] or "still running" in test["message"]


@pytest.mark.parametrize("student", PROBES)
def test_nothing_outside_the_box_could_be_read_or_written(graded_class, student):
    """The probe ran to its end ("PROBE" is its import error) and found nothing it could reach."""
    assert "PROBE []" in graded_class.notes(student)


def test_the_box_cannot_remount_anything_from_a_user_namespace(graded_class):
    notes = graded_class.notes("creates_a_user_namespace")
    assert "PROBE" in notes
    assert "remounted" not in notes and "wrote" not in notes and "cli-remount=done" not in notes


def test_the_box_cannot_create_a_user_namespace(graded_class):
    """bubblewrap's --disable-userns is applied only for a non-root grader; as root the box's user may
    create user namespaces (namespace-root capabilities, and the kernel's whole userns attack surface)."""
    notes = graded_class.notes("creates_a_user_namespace")
    assert "userns=refused" in notes and "cli-userns=refused" in notes, notes


def test_a_submission_cannot_hold_more_memory_than_its_limit_across_processes(graded_class):
    """--memory-mb is "the address-space limit of one submission" (1024 for this class): three processes of
    512 MiB each must not all hold their memory at once. Forked 64 times (the process limit), 4 GiB each by
    default, a submission could take 256 GiB and bring the OOM killer onto other students' boxes."""
    notes = graded_class.notes("holds_memory_in_many_processes")
    # with a cgroup per box the third child is killed: the probe reports fewer, or waits for it in vain
    assert "PROBE held" in notes or "(it was waiting)" in notes, notes
    assert "PROBE held 3 x" not in notes, notes


# ---------------------------------------------------------------------------------------------------
# The traces an escape would leave


def test_no_file_was_written_outside_the_box(graded_class):
    time.sleep(2.5)  # a process that outlived its job would write its flag files 2 s after it started
    written = [str(path) for path in graded_class.host_files if os.path.lexists(path)]
    assert written == []
    assert (graded_class.out / "grades.csv").read_text().startswith("student,stage,mode,score,max_score,seed,status")
    assert not (graded_class.folder.parent / "gradebook.db").exists()
    assert not [path for folder in (REPO, REPO / "tito", REPO / "tito" / "shipped") for path in folder.glob("*")
                if path.name.startswith(("pwned_", "flag-"))]


def test_no_process_of_a_submission_outlives_the_run(graded_class):
    """outlives_the_job left a `sleep <marker>` and a Python process named <comm> behind, in a new session."""
    assert processes_matching(*graded_class.markers) == []


def test_no_connection_left_the_sandbox(graded_class):
    assert graded_class.connections == []


def test_nothing_secret_reached_any_report(graded_class):
    """Neither the grader's secrets nor another file's contents appear in what the run wrote."""
    shadow = Path("/etc/shadow").read_text().splitlines()[0] if Path("/etc/shadow").is_file() else "root:"
    texts = [path.read_text(errors="replace") for path in graded_class.out.rglob("*") if path.is_file()
             and path.name != ".tito-course-key"]
    texts.append(graded_class.run.stdout + graded_class.run.stderr)
    for text in texts:
        assert graded_class.secret not in text
        assert shadow not in text


@pytest.mark.parametrize(("student", "words"), [
    ("empty_notebook_file", "not a readable Jupyter notebook"),
    ("cell_source_is_not_text", "not a readable Jupyter notebook"),
    ("deeply_nested_notebook", "not a readable Jupyter notebook"),
    ("zip_bomb", "larger than 16 MiB"),
    ("links_to_etc_shadow", "symbolic link"),
    ("links_to_honest_notebook", "symbolic link"),
    ("fifo_notebook", "not a regular file"),
])
def test_a_hostile_file_is_a_note_in_its_feedback(graded_class, student, words):
    assert words in graded_class.notes(student)


# ---------------------------------------------------------------------------------------------------
# Reports


def test_the_csv_is_the_graders_and_the_run_names_its_protection(graded_class):
    rows = list(csv.DictReader(open(graded_class.out / "grades.csv", encoding="utf-8", newline="")))
    assert len(rows) == len(graded_class.students) and {row["mode"] for row in rows} == {"cumulative"}
    assert "protection:" in graded_class.run.stderr
    assert json.loads((graded_class.out / "results.json").read_text())["protection"] == "bwrap"


def test_the_reports_are_the_instructors_alone(graded_class):
    """grades.csv, results.json, summary.md and every feedback file: no other account may read them."""
    assert graded_class.out.stat().st_mode & 0o777 == 0o700
    for path in graded_class.out.rglob("*"):
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by other accounts"


def test_feedback_explains_lost_points_without_expected_values_or_test_code(graded_class):
    out = graded_class.out
    text = (out / "feedback" / "hard_codes_public_answers.md").read_text()
    assert "reduction_over_axes[sum]" in text and "wrong" in text
    assert "expected" not in text.lower().replace("the expected", "")
    suite = (REPO / "autograder" / f"test_{STAGE}.py").read_text()
    for line in suite.splitlines():
        if len(line.strip()) > 30 and not line.strip().startswith(("#", '"""')):
            assert line.strip() not in text
    summary = (out / "summary.md").read_text()
    assert "reduction_over_axes[sum]" in summary


# ---------------------------------------------------------------------------------------------------
# A crash near the deadline, in a run of its own (it waits for the deadline of a short --timeout)

SLOW_IMPORT = "import time as _time\n_time.sleep(4)  # a slow import: each start of the runner pays it\n"
EXITS_NEAR_THE_DEADLINE = """
import os, resource, time
_timeout = resource.getrlimit(resource.RLIMIT_CPU)[0] - 5  # the grader's --timeout, read from the CPU limit
_started = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
_age = float(open("/proc/uptime").read().split()[0]) - _started
time.sleep(max(0.0, _timeout - _age - 2.0))
os._exit(3)
"""


def test_a_crash_near_the_deadline_keeps_the_points_already_earned(tmp_path):
    """sum_kernel ends the runner 2 s before the run's deadline: the restart cannot finish its (slow) import in
    what is left. The checks that reported before the crash keep their points; sum's check and those after it
    are lost."""
    folder = tmp_path / "class"
    submission(folder, "exits_near_the_deadline", filled=True, at_import=SLOW_IMPORT,
               kernel_edit=in_sum(EXITS_NEAR_THE_DEADLINE))
    run = tito(REPO, "grade", str(folder), "--out", str(tmp_path / "out"), "--stage", "01", "--timeout", "12",
               "--seed", "7", "--examples", "3")
    assert run.code == 0, run.stderr
    result = json.loads((tmp_path / "out" / "results.json").read_text())["grades"][0]
    names = [t["id"] for t in result["tests"]]
    before = result["tests"][:names.index("reduction_over_axes[sum]")]
    assert [t["id"] for t in before if not t["passed"]] == [], result["notes"]
    assert result["score"] == sum(t["max_points"] for t in before)


# ---------------------------------------------------------------------------------------------------
# The trusted parent's memory for one notebook

EXPORT_PEAK = """
import resource, sys, tempfile
from pathlib import Path
from tito import grading, package
from tito.project import find_root, stage
root = find_root()
data = Path(sys.argv[1]).read_bytes()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
files, notes = grading.package_files(root, stage(root, "01"), {"01_tensor": data}, "cumulative")
package.write_package(Path(tempfile.mkdtemp()), files)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


def test_exporting_a_notebook_costs_the_parent_memory_in_proportion_to_its_size(tmp_path):
    """The parent turns each notebook into a package (`package_files`, `write_package`) with no limit but the
    reader's 50 MiB per notebook. Exported cells full of literals make syntax trees hundreds of times larger
    than their text: measured at 2 MiB, the parent's peak may grow by at most 40 times the notebook's size
    (2 GiB at the 50 MiB cap), or one notebook can take the grader's machine down."""
    path = submission(tmp_path / "class", "literal_heavy", filled=True)
    notebook = nbformat.read(path, as_version=4)
    line = "_a = (" + "1," * 500 + ")\n"
    for number in range(4):
        notebook.cells.append(nbformat.v4.new_code_cell("#| export\n" + line * 500, id=f"literals{number}"))
    nbformat.write(notebook, path)
    size = path.stat().st_size
    assert size > 2_000_000
    done = subprocess.run([sys.executable, "-c", EXPORT_PEAK, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    growth = int(done.stdout.split()[-1])
    assert growth < 40 * size, f"{size >> 10} KiB notebook: the parent grew by {growth >> 20} MiB"


# ---------------------------------------------------------------------------------------------------
# Other layouts and modes


def test_isolated_mode_grades_a_stage_with_the_reference_before_it(tmp_path):
    folder = tmp_path / "class"
    student = folder / "carol"
    student.mkdir(parents=True)
    for name in (STAGE, "02_autograd"):
        shutil.copy2(REPO / "modules" / name / f"{name}.ipynb", student / f"{name}.ipynb")
    fill(student / "02_autograd.ipynb", REPO / "solutions" / "02_autograd" / "02_autograd.py")
    run = tito(REPO, "grade", str(folder), "--out", str(tmp_path / "out"), "--stage", "02", "--isolated",
               "--examples", "3", "--seed", "1")
    assert run.code == 0, run.stderr
    rows = {row["mode"]: row for row in csv.DictReader(open(tmp_path / "out" / "grades.csv", encoding="utf-8"))}
    assert float(rows["isolated"]["score"]) == float(rows["isolated"]["max_score"])
    # cumulative: the untouched 01 stubs break nearly every 02 check; only checks of 02 code alone pass
    assert float(rows["cumulative"]["score"]) < float(rows["isolated"]["score"]) / 2


def test_nbgrader_layout_and_zips_are_read(tmp_path):
    course = tmp_path / "course"
    nbgrader_style = course / "submitted" / "dave" / STAGE / f"{STAGE}.ipynb"
    nbgrader_style.parent.mkdir(parents=True)
    shutil.copy2(NOTEBOOK, nbgrader_style)
    fill(nbgrader_style, SOURCE)
    with zipfile.ZipFile(course / "submitted" / "erin.zip", "w") as archive:
        archive.write(nbgrader_style, f"work/{STAGE}.ipynb")
    (course / "nbgrader_config.py").write_text("")  # what makes a folder an nbgrader course, beside submitted/
    run = tito(REPO, "grade", str(course), "--out", str(tmp_path / "out"), "--stage", "01", "--examples", "3")
    assert run.code == 0, run.stderr
    scores = grades(tmp_path / "out")
    assert scores["dave"] == scores["erin"] > 0


def test_bad_input_is_one_sentence(tmp_path):
    run = tito(REPO, "grade", str(tmp_path / "nowhere"))
    assert run.code == 2 and "is not a folder" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "empty").mkdir()
    run = tito(REPO, "grade", str(tmp_path / "empty"))
    assert run.code == 2 and "holds no submissions" in run.stderr


def test_every_stage_grades_full_work_full_and_untouched_work_zero_in_the_sandbox(tmp_path):
    """Each stage's compute slice runs in the real sandbox: a student who filled every notebook gets full
    marks on every stage, cumulative and isolated, and one who filled none gets 0 on every stage."""
    folder = tmp_path / "class"
    names = sorted(p.name for p in (REPO / "solutions").iterdir() if p.name[:2].isdigit())
    for student, filled in (("full", True), ("empty", False)):
        (folder / student).mkdir(parents=True)
        for name in names:
            path = folder / student / f"{name}.ipynb"
            shutil.copy2(REPO / "modules" / name / f"{name}.ipynb", path)
            if filled:
                fill(path, REPO / "solutions" / name / f"{name}.py")
    run = tito(REPO, "grade", str(folder), "--out", str(tmp_path / "out"), "--isolated", "--examples", "3",
               "-j", "2", "--seed", "7")
    assert run.code == 0, run.stderr
    rows = list(csv.DictReader(open(tmp_path / "out" / "grades.csv", encoding="utf-8")))
    assert {(row["stage"], row["mode"]) for row in rows if row["student"] == "full"} == \
        {(name[:2], mode) for name in names for mode in ("cumulative", "isolated")}
    for row in rows:
        expected = float(row["max_score"]) if row["student"] == "full" else 0.0
        assert float(row["score"]) == expected, row


# ---------------------------------------------------------------------------------------------------
# The same adversaries on a Dask cluster: the cluster is one more place the box runs, not a second engine

ON_THE_CLUSTER = ["honest_full", "honest_half", "patches_the_checks", "forges_every_check_as_finished",
                  "reads_the_course_key", "reads_other_submissions", "holds_memory_in_many_processes",
                  "replaces_the_compute_functions", TAMPERS, "segfaults_in_sum", "nan_and_inf_from_sum",
                  "forks_repeatedly", "fills_tmp", "reads_grader_env"]


def test_hostile_submissions_are_graded_on_a_dask_cluster_exactly_as_here(graded_class, tmp_path):
    from dask_cluster import LocalCluster

    out = tmp_path / "cluster-grades"
    picked = [flag for student in ON_THE_CLUSTER for flag in ("--student", student)]
    with LocalCluster(2, logs=tmp_path / "dask") as cluster:
        run = tito_bytes("grade", str(graded_class.folder), "--out", str(out), *FLAGS, *picked,
                         "--scheduler", cluster.address)
    assert run.code == 0, run.stderr
    here = graded_class.results()
    there = {g["student"]: g for g in json.loads((out / "results.json").read_text())["grades"]}
    assert sorted(there) == sorted(ON_THE_CLUSTER)
    def steady(grade: dict) -> dict:  # without what differs run to run: times, where the box ran
        return {key: value for key, value in grade.items() if key not in ("seconds", "phases", "worker")}

    for student, grade in there.items():
        if student in AT_MOST_FULL:  # its forks race each other for the box's processes: a score that varies
            assert grade["score"] <= grade["max_score"] == here[student]["max_score"], student
            assert not any(test["fault"] for test in grade["tests"]), student
            continue
        assert steady(grade) == steady(here[student]), student
    assert graded_class.secret not in (out / "results.json").read_text()
