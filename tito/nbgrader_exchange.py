"""nbgrader's collect and export as a shared server needs them, set by the course's nbgrader_config.py.

nbgrader 0.9's collect copies each inbound folder with `shutil.copytree` as the instructor (often root),
following symbolic links, and only warns when a folder's owner is not the student it names: a student could
hand in under a classmate's name, or hand in a link to the course's source notebook or key, and one dangling
link or malformed folder name stopped the collection of the whole class. `CollectOwnFiles`
(`c.ExchangeFactory.collect`) takes a submission only from folders and regular files its student owns, opens
each one without following a link, and refuses any other submission with one log line. `PrivateCsvExport`
(`c.ExportApp.plugin_class`) writes grades.csv readable by its owner alone.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import os
import pwd
import shutil
import stat
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default import ExchangeCollect
from nbgrader.plugins.export import CsvExportPlugin
from nbgrader.utils import check_mode, parse_utc

OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the check opens at once (and is then refused) instead of waiting
OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
MAX_DEPTH = 32  # folders inside a submission: each level holds one descriptor open while it is walked
CHUNK = 1 << 20


class Refused(Exception):
    """Why one submission is not collected, as the end of a sentence."""


def _account(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"user id {uid}"


def _timestamp(data: bytes) -> datetime | None:
    """A submission's timestamp.txt, read as nbgrader's CourseDirectory.get_existing_timestamp reads it (which
    raises AttributeError on a malformed one, stopping the collection of the class: CourseDirectory has no
    `fail`)."""
    try:
        text = data.decode("utf-8").strip()
        return parse_utc(text) if text else None
    except (ValueError, OverflowError):
        raise Refused("its timestamp.txt holds no timestamp") from None


def _timestamp_in(folder: str) -> datetime | None:
    """The timestamp of a folder in the instructor's submitted/ (or the staging folder beside it)."""
    path = os.path.join(folder, "timestamp.txt")
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as stream:
        return _timestamp(stream.read())


@contextmanager
def _reading(path: str) -> Iterator[None]:
    """An error reading the student's side refuses the submission; one writing the instructor's side is raised."""
    try:
        yield
    except OSError as error:
        raise Refused(f"{path or 'its folder'} cannot be read ({error.strerror})") from None


@dataclass
class _Walk:
    """One pass over one submission folder, through descriptors opened one name at a time without following
    a link: every entry must be a folder or a regular file owned by the student the folder names (so a hard
    link to anyone else's file is refused too), or, for a folder the instructor filed, all by the
    instructor. With `into`, what CourseDirectory.ignore/include/max_file_size
    let through is copied there, mode and times kept as copytree keeps them."""

    student: str
    uid: int
    left: int  # bytes still allowed: CourseDirectory.max_dir_size
    max_file: int  # bytes, 0 for no limit: CourseDirectory.max_file_size
    exclude: list[str]
    include: list[str]
    groupshared: bool
    log: Any

    def submission(self, inbound: int, name: str, into: str | None) -> None:
        with _reading(""):
            status = os.stat(name, dir_fd=inbound, follow_symlinks=False)
        if stat.S_ISDIR(status.st_mode) and status.st_uid == os.geteuid():
            self.uid = status.st_uid  # filed by the instructor (no student can make a folder of theirs): all theirs
        if self.uid < 0:
            raise Refused(f"no account is named {self.student!r}")
        if stat.S_ISDIR(status.st_mode) and status.st_uid != self.uid:
            owner = _account(status.st_uid)
            raise Refused(f"it is filed under {self.student}'s name but its folder belongs to {owner}")
        self._check(status, "")
        folder = self._open(inbound, name, status, OPEN_FOLDER, "")
        try:
            self._folder(folder, "", into, depth=0)
        finally:
            os.close(folder)
        if into is not None:
            self._keep_stat(into, status, folder=True)

    def _check(self, status: os.stat_result, path: str) -> None:
        what = path or "its folder"
        if stat.S_ISLNK(status.st_mode):
            raise Refused(f"{what} is a symbolic link")
        if not (stat.S_ISDIR(status.st_mode) or (path and stat.S_ISREG(status.st_mode))):
            raise Refused(f"{what} is not a regular file or folder" if path else "its folder is not a folder")
        if status.st_uid != self.uid:
            raise Refused(f"{what} belongs to {_account(status.st_uid)}, not to {self.student}")

    def _open(self, folder: int, name: str, checked: os.stat_result, flags: int, path: str) -> int:
        """The entry checked a moment ago, opened without following a link; refused if it was swapped."""
        with _reading(path):
            try:
                descriptor = os.open(name, flags, dir_fd=folder)
            except OSError as error:
                if error.errno not in (errno.ELOOP, errno.ENOENT, errno.ENOTDIR):
                    raise
                raise Refused(f"{path or 'its folder'} changed while it was collected ({error.strerror})") from None
        status = os.fstat(descriptor)
        if (status.st_dev, status.st_ino) != (checked.st_dev, checked.st_ino):
            os.close(descriptor)
            raise Refused(f"{path or 'its folder'} changed while it was collected")
        return descriptor

    def _folder(self, folder: int, where: str, into: str | None, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise Refused(f"its folders are nested deeper than {MAX_DEPTH}")
        with _reading(where.rstrip("/")):
            names = sorted(os.listdir(folder))
        for name in names:
            path = where + name
            with _reading(path):
                status = os.stat(name, dir_fd=folder, follow_symlinks=False)
            self._check(status, path)
            if any(fnmatch.fnmatch(name, pattern) for pattern in self.exclude):
                self.log.debug("Ignoring excluded file '%s' (see config option CourseDirectory.ignore)", path)
                continue
            target = None if into is None else os.path.join(into, name)
            if stat.S_ISDIR(status.st_mode):
                child = self._open(folder, name, status, OPEN_FOLDER, path)
                try:
                    if target is not None:
                        os.mkdir(target, 0o700)
                    self._folder(child, path + "/", target, depth + 1)
                finally:
                    os.close(child)
                if target is not None:
                    self._keep_stat(target, status, folder=True)
                continue
            if self.include and not any(fnmatch.fnmatch(name, pattern) for pattern in self.include):
                self.log.debug("Ignoring non included file '%s' (see config option CourseDirectory.include)", path)
                continue
            if self.max_file and status.st_size > self.max_file:
                self.log.warning("Ignoring file too large '%s' (see config option CourseDirectory.max_file_size)", path)
                continue
            if target is None:
                self._spend(status.st_size)
                if not where and name == "timestamp.txt":
                    self._check_timestamp(folder, name, status)
            else:
                self._copy(folder, name, status, path, target)

    def _check_timestamp(self, folder: int, name: str, status: os.stat_result) -> None:
        """The submission's timestamp.txt, which autograde and the next --update read, must hold a timestamp."""
        descriptor = self._open(folder, name, status, OPEN_FILE, name)
        try:
            with _reading(name):
                _timestamp(os.read(descriptor, 256))
        finally:
            os.close(descriptor)

    def _spend(self, size: int) -> None:
        self.left -= size
        if self.left < 0:
            raise Refused("it is larger than CourseDirectory.max_dir_size allows")

    def _copy(self, folder: int, name: str, checked: os.stat_result, path: str, target: str) -> None:
        source = self._open(folder, name, checked, OPEN_FILE, path)
        try:
            copy = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                size = 0
                while True:
                    with _reading(path):
                        chunk = os.read(source, CHUNK)
                    if not chunk:
                        break
                    size += len(chunk)
                    if self.max_file and size > self.max_file:
                        raise Refused(f"{path} grew past CourseDirectory.max_file_size while it was collected")
                    self._spend(len(chunk))
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(copy, view):]
            finally:
                os.close(copy)
        finally:
            os.close(source)
        self._keep_stat(target, checked, folder=False)

    def _keep_stat(self, target: str, status: os.stat_result, folder: bool) -> None:
        """copytree's copystat, without set-user-id, set-group-id or sticky bits (the copy is the instructor's),
        and nbgrader's group permissions for a groupshared course."""
        mode = stat.S_IMODE(status.st_mode) & 0o777
        if self.groupshared:
            mode = (mode | 0o2770) & 0o2777 if folder else mode | 0o660
        os.chmod(target, mode)  # targets are in the staging folder, the instructor's alone
        os.utime(target, ns=(status.st_atime_ns, status.st_mtime_ns))


class CollectOwnFiles(ExchangeCollect):
    """nbgrader's collect (the latest submission of each student, --update, --before-duedate, timestamps,
    CourseDirectory.ignore/include/max_file_size/max_dir_size) that takes a submission only from files its
    student owns: the folder `student+assignment+timestamp[+random]` must belong to the Unix account named
    `student`, and so must every folder and regular file inside; a link, any other kind of file, a folder
    whose name holds no timestamp or names no account refuses that submission alone, with one log line, and
    never counts as anyone's latest. Everything is checked once to choose each student's latest submission and
    again, on the opened descriptors, while it is copied into a staging folder that replaces the collected one
    only when whole. ExchangeCollect.check_owner is not honoured: ownership is always required."""

    inbound_fd = -1

    def init_src(self) -> None:
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        try:
            self.inbound_fd = os.open(self.inbound_path, OPEN_FOLDER)
        except OSError as error:
            self.fail(f"The inbound folder {self.inbound_path} cannot be opened without following a link "
                      f"({error.strerror})")
        student_id = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student_id}+{self.coursedir.assignment_id}+*")
        submissions_of: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for path in sorted(glob.glob(pattern)):
            name = os.path.basename(path)
            try:
                record = self._record(name)
                self._walk(record).submission(self.inbound_fd, name, into=None)
            except Refused as reason:
                self._refuse(name, reason)
                continue
            submissions_of[record["username"]].append(record)
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gradebook:
            try:
                self.duedate = gradebook.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        self.src_records = []
        for records in submissions_of.values():
            latest_first = self._sort_by_timestamp(records)
            in_time = [record for record in latest_first
                       if self.before_duedate and self.duedate is not None and record["timestamp"] <= self.duedate]
            self.src_records.append((in_time or latest_first)[0])

    def _record(self, name: str) -> dict[str, Any]:
        parts = name.rsplit("+", 3)  # as nbgrader: a student id may hold a +
        try:
            timestamp = parse_utc(parts[2])
        except (ValueError, OverflowError, IndexError):
            raise Refused("its name holds no timestamp") from None
        return {"username": parts[0], "filename": name, "timestamp": timestamp}

    def _walk(self, record: dict[str, Any]) -> _Walk:
        student = record["username"]
        try:
            uid = pwd.getpwnam(student).pw_uid
        except (KeyError, UnicodeError):
            uid = -1  # only a submission the instructor filed can be taken then
        coursedir = self.coursedir
        return _Walk(student=student, uid=uid, left=1000 * coursedir.max_dir_size,
                     max_file=1000 * (coursedir.max_file_size or 0), exclude=list(coursedir.ignore or []),
                     include=list(coursedir.include or []), groupshared=coursedir.groupshared, log=self.log)

    def _refuse(self, name: str, reason: Refused) -> None:
        self.log.error("Refused submission %r: %s; nothing of it is collected", name, reason)

    def copy_files(self) -> None:
        try:
            self._copy_submissions()
        finally:
            os.close(self.inbound_fd)

    def _copy_submissions(self) -> None:
        assignment, course = self.coursedir.assignment_id, self.coursedir.course_id
        if not self.src_records:
            self.log.warning(f"No submissions of '{assignment}' for course '{course}' to collect")
        else:
            self.log.info(f"Processing {len(self.src_records)} submissions of '{assignment}' for course '{course}'")
        for record in self.src_records:
            student_id = record["username"]
            dest_path = self.coursedir.format_path(self.coursedir.submitted_directory, student_id, assignment)
            os.makedirs(os.path.dirname(dest_path), exist_ok=True)
            if os.path.isdir(dest_path):
                try:
                    existing = _timestamp_in(dest_path)
                except Refused:  # collected before this class was in place: the new one replaces it
                    existing = None
                newer = self.update and (existing is None or record["timestamp"] > existing)
                if not (newer or (self.before_duedate and existing != record["timestamp"])):
                    self.log.info(f"No newer submission to collect: {student_id} {assignment}" if self.update else
                                  f"Submission already exists, use --update to update: {student_id} {assignment}")
                    continue
            staging = tempfile.mkdtemp(prefix=f".{assignment}.collecting-", dir=os.path.dirname(dest_path))
            try:
                self._walk(record).submission(self.inbound_fd, record["filename"], into=staging)
                _timestamp_in(staging)  # autograde and the next --update read it
            except Refused as reason:
                shutil.rmtree(staging)
                self._refuse(record["filename"], reason)
                continue
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
            if os.path.isdir(dest_path):
                self.log.info(f"Updating submission: {student_id} {assignment}")
                shutil.rmtree(dest_path)
            else:
                self.log.info(f"Collecting submission: {student_id} {assignment}")
            os.rename(staging, dest_path)


class PrivateCsvExport(CsvExportPlugin):
    """nbgrader's CSV export (grades.csv, or --to), the file readable and writable by its owner alone:
    nbgrader's own is 0644, and the course folder (0711) lets anyone read a file whose name they know."""

    def export(self, gradebook: Gradebook) -> None:
        destination = self.to or "grades.csv"
        try:  # made or made private before nbgrader writes a line into it
            descriptor = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            self.log.error(f"cannot write the grades to {destination}: {error.strerror}")
            sys.exit(1)
        try:
            os.fchmod(descriptor, 0o600)
        finally:
            os.close(descriptor)
        super().export(gradebook)
