"""Invariant 5, the nbgrader exchange is the instructor's: under the course's nbgrader_config.py `nbgrader
collect` takes a student's submission only from files that student owns, in their own name, never through a
link, and a hostile submission costs only itself; `nbgrader export` writes grades.csv for the instructor
alone. Two real accounts fetch and submit with real nbgrader commands, and make the attacks as themselves."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_course import nbgrader

from conftest import REPO, tito

pytestmark = pytest.mark.slow  # real accounts, real nbgrader on both sides

ASSIGNMENT = "01_tensor"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
SUBMITTED_FILES = [NOTEBOOK, "submission_secret.txt", "timestamp.txt"]  # what nbgrader submit hands in
SITE = sysconfig.get_paths()["purelib"]  # this environment's packages: nbgrader for the students too
# a student's nbgrader: this environment's packages on an interpreter every account can run (this checkout's
# own may sit in root's home), without the system's packages (-S)
LAUNCH = ("import site, sys; site.addsitedir(sys.argv.pop(1)); sys.argv[0] = 'nbgrader'; "
          "from nbgrader.apps.nbgraderapp import main; main()")
# a student's own edit of the fetched notebook: one markdown cell more
EDIT = ("import json, sys; path, text = sys.argv[1:]; notebook = json.load(open(path)); "
        "notebook['cells'].append({'cell_type': 'markdown', 'id': 'work-%d' % len(notebook['cells']), "
        "'metadata': {}, 'source': text}); json.dump(notebook, open(path, 'w'), indent=1)")
# a submission folder made by hand in the inbound folder: entries are text, a link or a FIFO
MAKE = """import json, os, sys
inbound, spec = sys.argv[1], json.loads(sys.argv[2])
folder = os.path.join(inbound, spec["name"])
if "link" in spec:
    os.symlink(spec["link"], folder)
else:
    os.mkdir(folder)
    for name, entry in spec["entries"].items():
        path = os.path.join(folder, name)
        if "link" in entry:
            os.symlink(entry["link"], path)
        elif "fifo" in entry:
            os.mkfifo(path)
        else:
            with open(path, "w") as stream:
                stream.write(entry["text"])
"""


def _runnable_by_all(path: Path) -> bool:
    return path.exists() and all(p.stat().st_mode & stat.S_IXOTH for p in (path, *path.parents))


def student_python() -> str:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(sys.base_prefix) / "bin" / version, Path("/usr/bin") / version):
        if _runnable_by_all(candidate.resolve()) and _runnable_by_all(Path(SITE)):
            return str(candidate)
    pytest.skip(f"no {version} that every account can run beside readable packages in {SITE}")


@dataclass
class Student:
    name: str
    home: Path
    python: str

    @property
    def uid(self) -> int:
        return self.home.stat().st_uid

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {"HOME": str(self.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        done = subprocess.run(["setpriv", f"--reuid={self.name}", f"--regid={self.name}", "--init-groups", *command],
                              cwd=self.home, env=env, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0 or not check, \
            f"{self.name}: {command[-3:]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    def nbgrader(self, *args: str) -> subprocess.CompletedProcess:
        return self.run(self.python, "-S", "-c", LAUNCH, SITE, *args)

    def work(self, text: str) -> bytes:
        """Edit the fetched notebook as this student; what it now holds."""
        path = self.home / ASSIGNMENT / NOTEBOOK
        self.run(self.python, "-S", "-c", EDIT, str(path), text)
        return path.read_bytes()

    def make(self, inbound: Path, spec: dict) -> str:
        self.run(self.python, "-S", "-c", MAKE, str(inbound), json.dumps(spec))
        return spec["name"]


def stamp(days: int, micro: int) -> str:
    """A timestamp as nbgrader submit writes it, `days` from now: a hand-made folder that would be the latest."""
    return (datetime.now(UTC) + timedelta(days=days, microseconds=micro)).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under a folder, by relative path, with its bytes (a link or a folder inside would show as a
    path too: a folder as None)."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(folder.rglob("*"))}


def scratch_for_accounts(request, prefix: str, names: list[str]) -> Path:
    """A folder under /tmp that every account can cross (pytest's cannot), removed at the end of the fixture
    with the accounts `names` made for it (unique per run: other runs may hold accounts of their own)."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o711)

    def remove() -> None:
        for name in names:
            subprocess.run(["userdel", name], capture_output=True)
            subprocess.run(["groupdel", name], capture_output=True)  # where userdel kept the user's group
        shutil.rmtree(base, ignore_errors=True)

    request.addfinalizer(remove)
    return base


@pytest.fixture(scope="module")
def exchange(request):
    """One course with 01_tensor released; alice and bob (real accounts) fetch it, work and submit, then make
    their attacks; the instructor collects, alice submits again, and the instructor collects with --update."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the students are real accounts made with useradd")
    python = student_python()
    token = secrets.token_hex(3)
    names = [f"tx{token}a", f"tx{token}b"]
    base = scratch_for_accounts(request, "tito-exchange-", names)
    course = base / "course"
    run = tito(REPO, "course", "init", str(course))
    assert run.code == 0, run.stderr
    assert "cannot cross" not in run.stderr, run.stderr
    key = course / ".tito-course-key"  # as `tito grade` keeps it
    with os.fdopen(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as stream:
        stream.write(secrets.token_hex(16) + "\n")
    nbgrader("generate_assignment", ASSIGNMENT, "--force", cwd=course)
    nbgrader("release_assignment", ASSIGNMENT, "--force", cwd=course)
    inbound = course / "exchange" / "tinytorch" / "inbound"

    students: list[Student] = []
    for name in names:
        home = base / "home" / name
        subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--user-group",
                        "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
        students.append(Student(name, home, python))
    alice, bob = students
    submitted = {}
    for student in students:  # the README's set-up step, then fetch, work, submit
        student.run("sh", "-c", f"mkdir -p ~/.jupyter && cp {course}/student_nbgrader_config.py "
                                "~/.jupyter/nbgrader_config.py")
        student.nbgrader("fetch_assignment", ASSIGNMENT)
        submitted[student.name] = student.work(f"{student.name}'s own work")
        student.nbgrader("submit", ASSIGNMENT)

    hostile = {}  # what each attack is, by the folder it leaves in inbound
    bob.work("bob's half-done work, handed in as alice's")
    bob.nbgrader("submit", ASSIGNMENT, "--student", alice.name)
    hostile["under a classmate's name (--student)"] = next(
        p.name for p in inbound.iterdir() if p.name.startswith(f"{alice.name}+") and p.lstat().st_uid == bob.uid)
    source = course / "source" / ASSIGNMENT / NOTEBOOK

    def handmade(student: Student, owner: str, micro: int, entries: dict | None = None, link: str = "") -> str:
        when = stamp(1, micro)
        spec: dict = {"name": f"{owner}+{ASSIGNMENT}+{when}+hand{micro}"}
        if link:
            spec["link"] = link
        else:
            spec["entries"] = {"timestamp.txt": {"text": when}, NOTEBOOK: {"text": "{}"}, **(entries or {})}
        return student.make(inbound, spec)

    hostile["under a classmate's name (by hand)"] = handmade(alice, bob.name, 1, {
        NOTEBOOK: {"text": "alice's work under bob's name"}})
    hostile["a link to the source notebook"] = handmade(bob, bob.name, 2, {NOTEBOOK: {"link": str(source)}})
    hostile["a link to the course key"] = handmade(alice, alice.name, 3, {"notes.txt": {"link": str(key)}})
    hostile["a dangling link"] = handmade(bob, bob.name, 4, {"data.csv": {"link": str(base / "nothing")}})
    hostile["a folder that is a link"] = handmade(alice, alice.name, 5, link=str(source.parent))
    hostile["a link to a folder inside"] = handmade(bob, bob.name, 6, {"extra": {"link": str(course / "source")}})
    hostile["a FIFO"] = handmade(alice, alice.name, 7, {"pipe": {"fifo": True}})
    hostile["a timestamp.txt without a timestamp"] = handmade(bob, bob.name, 8, {"timestamp.txt": {"text": "soon"}})
    hostile["a name without a timestamp"] = bob.make(inbound, {
        "name": f"{bob.name}+{ASSIGNMENT}+not-a-time", "entries": {NOTEBOOK: {"text": "{}"}}})

    first = nbgrader("collect", ASSIGNMENT, cwd=course)
    after_first = {student.name: tree(course / "submitted" / student.name / ASSIGNMENT) for student in students}
    again = alice.work("alice's work, improved")
    alice.nbgrader("submit", ASSIGNMENT)
    update = nbgrader("collect", "--update", ASSIGNMENT, cwd=course)
    logs = {"collect": first.stdout + first.stderr, "collect --update": update.stdout + update.stderr}
    return SimpleNamespace(course=course, base=base, alice=alice, bob=bob, submitted=submitted, again=again,
                           hostile=hostile, after_first=after_first, key=key.read_bytes(), source=source.read_bytes(),
                           logs=logs)


def collected(exchange, student: Student) -> Path:
    return exchange.course / "submitted" / student.name / ASSIGNMENT


def test_honest_submissions_are_collected_intact_and_update_takes_the_newer_one(exchange):
    alice, bob = exchange.alice, exchange.bob
    for student in (alice, bob):
        first = exchange.after_first[student.name]
        assert first[NOTEBOOK] == exchange.submitted[student.name], f"{student.name}'s collected work is not theirs"
        assert sorted(first) == SUBMITTED_FILES
    assert (collected(exchange, alice) / NOTEBOOK).read_bytes() == exchange.again, "--update missed alice's newer work"
    assert "Updating submission: " + alice.name in exchange.logs["collect --update"]
    assert f"No newer submission to collect: {bob.name}" in exchange.logs["collect --update"]


def _refused(exchange, attack: str, reason: str) -> None:
    folder = exchange.hostile[attack]
    for command, log in exchange.logs.items():
        lines = [line for line in log.splitlines() if f"Refused submission {folder!r}: " in line]
        assert len(lines) == 1, f"`nbgrader {command}` did not refuse {attack} ({folder}) in one line:\n{log[-3000:]}"
        assert reason in lines[0], lines[0]


def test_a_submission_in_a_classmates_name_is_refused_and_the_classmates_work_stays(exchange):
    alice, bob = exchange.alice, exchange.bob
    _refused(exchange, "under a classmate's name (--student)", f"filed under {alice.name}'s name but its folder "
                                                               f"belongs to {bob.name}")
    _refused(exchange, "under a classmate's name (by hand)", f"filed under {bob.name}'s name but its folder "
                                                             f"belongs to {alice.name}")
    assert exchange.after_first[alice.name][NOTEBOOK] == exchange.submitted[alice.name], "bob replaced alice's work"
    assert tree(collected(exchange, bob)) == exchange.after_first[bob.name], "alice's collect --update changed bob's"
    assert (collected(exchange, bob) / NOTEBOOK).read_bytes() == exchange.submitted[bob.name]


@pytest.mark.parametrize("attack", ["a link to the source notebook", "a link to the course key", "a dangling link",
                                    "a link to a folder inside"])
def test_a_link_inside_a_submission_is_refused(exchange, attack):
    _refused(exchange, attack, "is a symbolic link")


def test_a_submission_folder_that_is_a_link_is_refused(exchange):
    _refused(exchange, "a folder that is a link", "its folder is a symbolic link")


def test_a_special_file_or_a_malformed_submission_costs_only_itself(exchange):
    _refused(exchange, "a FIFO", "pipe is not a regular file or folder")
    _refused(exchange, "a timestamp.txt without a timestamp", "its timestamp.txt holds no timestamp")
    _refused(exchange, "a name without a timestamp", "its name holds no timestamp")


def test_nothing_from_outside_the_inbound_folder_reaches_submitted(exchange):
    """Exactly the honest students' files are in submitted/: no linked file, no staging folder, and no byte of
    the course key or the source notebook (which holds the solutions) anywhere."""
    everything = tree(exchange.course / "submitted")
    expected = set()
    for student in (exchange.alice, exchange.bob):
        expected |= {student.name, f"{student.name}/{ASSIGNMENT}"}
        expected |= {f"{student.name}/{ASSIGNMENT}/{name}" for name in SUBMITTED_FILES}
    assert set(everything) == expected
    for path, data in everything.items():
        if data is not None:
            assert exchange.key.strip() not in data, f"{path} holds the course key"
            assert data != exchange.source and b"### BEGIN SOLUTION" not in data, f"{path} holds the source notebook"


def test_export_writes_grades_csv_for_the_instructor_alone(exchange):
    """Even over a grades.csv an export before this course's configuration left readable by all."""
    grades = exchange.course / "grades.csv"
    grades.write_text("old grades\n")
    grades.chmod(0o644)
    nbgrader("export", cwd=exchange.course)
    assert stat.S_IMODE(grades.lstat().st_mode) == 0o600, "grades.csv is readable by other accounts"
    assert grades.read_text().startswith("assignment,duedate,timestamp,student_id")
    assert exchange.bob.run("cat", str(grades), check=False).returncode != 0, "a student read grades.csv"


def test_init_names_a_folder_above_the_exchange_that_students_cannot_cross(exchange):
    """Ubuntu's homes are 0750: through such a folder no student reaches the exchange. Running init again
    also makes an older grades.csv private (MODES)."""
    course, base = exchange.course, exchange.base
    grades = course / "grades.csv"
    grades.touch()
    grades.chmod(0o644)
    base.chmod(0o750)
    try:
        run = tito(REPO, "course", "init", str(course))
    finally:
        base.chmod(0o711)
    assert run.code == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if "cannot cross" in line]
    assert len(warnings) == 1 and f"`chmod o+x {base}` fixes it" in warnings[0], run.stderr
    assert stat.S_IMODE(grades.stat().st_mode) == 0o600


def test_a_file_swapped_for_a_link_after_the_check_is_not_followed(tmp_path, monkeypatch):
    """Between a name's check and its opening, a student replaces their notebook by a link to a secret: the
    copy opens the name without following it (O_NOFOLLOW: ELOOP) and refuses the submission; nothing of the
    secret is copied."""
    from tito.nbgrader_exchange import OPEN_FILE, Refused, _Walk

    secret = tmp_path / "secret"
    secret.write_text("the course key")
    folder = tmp_path / "inbound" / "student+01_tensor+2026-12-01 10:00:00.000000 UTC"
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_text("{}")
    staging = tmp_path / "staging"
    staging.mkdir()
    real_open = os.open

    def swap_then_open(path, flags, *args, **kwargs):
        if path == NOTEBOOK and flags == OPEN_FILE:
            (folder / NOTEBOOK).unlink()
            (folder / NOTEBOOK).symlink_to(secret)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_then_open)
    walk = _Walk(student="student", uid=os.getuid(), left=10**6, max_file=10**6, exclude=[], include=["*"],
                 groupshared=False, log=None)
    inbound = real_open(folder.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(Refused, match=rf"{NOTEBOOK} changed while it was collected \(Too many levels of symb"):
            walk.submission(inbound, folder.name, into=str(staging))
    finally:
        os.close(inbound)
    assert not any(b"course key" in path.read_bytes() for path in staging.rglob("*") if path.is_file())
