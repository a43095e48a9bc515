"""The trusted reader of a class's submissions: each student's stage notebooks as bytes, read from files that
students made, maybe with hostile intent, so nothing here follows a link, blocks, or reads without a bound."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import zipfile
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from tito.errors import TitoError

MAX_NOTEBOOK_BYTES = 50 << 20
MAX_SUBMISSION_BYTES = 200 << 20  # read in all from one student's files
MAX_DEPTH = 6  # levels of folders searched below a student's own folder
MAX_ENTRIES = 10_000  # files and folders looked at in one student's folder
MAX_ZIP_MEMBERS = 10_000
# zipfile parses an archive's whole directory when it opens it: millions of entries would take gigabytes
MAX_ZIP_DIRECTORY_BYTES = 4 << 20
# zipfile bounds what one read decompresses only for these; a bzip2 or LZMA chunk could expand to gigabytes
READABLE_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
CHUNK_BYTES = 1 << 20
MAX_ID_CHARS = 100
MAX_ID_BYTES = 200  # file names are limited to 255 bytes, and a letter can take 4 of them


@dataclass
class Submission:
    student: str  # the id exactly as found: folder name, or file name without .zip/.ipynb; Unicode kept as is
    notebooks: dict[str, bytes]  # stage folder name such as "01_tensor" -> the notebook's bytes
    notes: list[str]  # one plain sentence per problem met while reading it (for that student's feedback)


class _Unreadable(Exception):
    """A file that was not read; the message says why, as the end of a sentence that names the file."""


class _TooLarge(Exception):
    """A file over the bound it was read with; `read` counts the bytes read before stopping."""

    def __init__(self, read: int) -> None:
        super().__init__(read)
        self.read = read


@dataclass
class _Candidate:
    """A file of a submission that may be a stage's notebook."""
    parts: tuple[str, ...]  # its path from the student's entry down: the sort order, and its name in notes
    read: Callable[[int], bytes]  # its bytes, raising _TooLarge past the given bound or _Unreadable


def find(where: Path, stages: Collection[str]) -> dict[str, Submission]:
    """Every student's submission in `where` by student id, in name order. Only notebooks of `stages` are read."""
    if not where.is_dir():
        raise TitoError(f"{where} is not a folder: give the folder that holds the submissions "
                        f"(an nbgrader course, its submitted/ folder, or one notebook, zip or folder per student)")
    if (where / "submitted").is_dir():
        where = where / "submitted"  # an nbgrader course: submitted/<student>/<assignment>/<stage>.ipynb
    entries = _student_entries(where)
    if not entries:
        raise TitoError(f"{where} holds no submissions (expected one notebook, zip or folder per student)")
    return {student: _read_submission(student, entry, stages) for student, entry in entries.items()}


def feedback_filename(student: str) -> str:
    """A file name for a student's feedback: letters, digits and -_.@ kept, anything else replaced, and a hash
    of the id appended whenever the id was changed or cut, so that two different ids never share a file."""
    safe = "".join(c if c.isalnum() or c in "-_.@" else "_" for c in student)
    if not safe or safe.startswith("."):
        safe = "_" + safe  # never hidden, never "." or ".."
    safe = safe[:MAX_ID_CHARS]
    while len(safe.encode("utf-8")) > MAX_ID_BYTES:
        safe = safe[:-1]
    if safe != student or re.search(r"-[0-9a-f]{8}$", student):  # an id shaped like a changed one gets its hash too
        safe += "-" + hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return safe + ".md"


def _student_entries(where: Path) -> dict[str, os.DirEntry]:
    """The entry of each student: refuses two entries for one student rather than merge or drop either."""
    try:
        with os.scandir(where) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        raise TitoError(f"cannot list {where}: {error.strerror}") from error
    found: dict[str, os.DirEntry] = {}
    for entry in entries:
        student = _student_of(entry)
        if student is None:
            continue
        if student in found:
            raise TitoError(f"{printable(found[student].name)} and {printable(entry.name)} in {where} are both "
                            f"submissions of {printable(student)}: keep one of them and grade again")
        found[student] = entry
    return found


def _student_of(entry: os.DirEntry) -> str | None:
    """The student whose submission the entry is, or None for an entry that is no submission."""
    if entry.name.startswith(".") or entry.is_symlink():
        return None  # a link could make anyone's file pass for the student's own
    if entry.is_dir(follow_symlinks=False):
        return entry.name
    for suffix in (".zip", ".ipynb"):
        if entry.name.endswith(suffix):
            return entry.name.removesuffix(suffix)
    return None


def _read_submission(student: str, entry: os.DirEntry, stages: Collection[str]) -> Submission:
    notes: list[str] = []
    path = Path(entry.path)
    try:
        if entry.is_dir(follow_symlinks=False):
            notebooks = _choose(_folder_candidates(path, notes), stages, notes)
        elif entry.name.endswith(".zip"):
            notebooks = _read_zip(path, stages, notes)
        else:
            notebooks = _choose([_Candidate((entry.name,), lambda limit: _read_file(path, limit))], stages, notes)
    except Exception as error:  # the last resort: one student's files must never stop the grading of the class
        notes.append(f"{printable(entry.name)} could not be read ({type(error).__name__})")
        notebooks = {}
    return Submission(student, notebooks, notes)


def _folder_candidates(folder: Path, notes: list[str]) -> list[_Candidate]:
    """The notebooks in a student's folder, searched breadth first so that a deep or huge tree (a virtual
    environment, a data set) uses up the bounds only after the shallow notebooks were found."""
    candidates: list[_Candidate] = []
    pending: deque[tuple[Path, tuple[str, ...]]] = deque([(folder, (folder.name,))])
    visited, too_deep = 0, False
    while pending:
        path, parts = pending.popleft()
        try:
            with os.scandir(path) as listing:
                for entry in listing:
                    visited += 1
                    if visited > MAX_ENTRIES:
                        notes.append(f"{_shown(parts[:1])} holds more than {MAX_ENTRIES} files and folders; "
                                     f"only the first {MAX_ENTRIES} were looked at")
                        return candidates
                    if entry.name.startswith("."):
                        continue  # checkpoints, git, virtual environments, macOS ._ files
                    here = (*parts, entry.name)
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISDIR(mode):
                        if len(here) - 1 > MAX_DEPTH:
                            too_deep = True
                        else:
                            pending.append((Path(entry.path), here))
                    elif entry.name.endswith(".ipynb"):
                        if stat.S_ISLNK(mode):
                            notes.append(f"{_shown(here)} is a symbolic link, which is never followed")
                        else:
                            candidates.append(_Candidate(here, functools.partial(_read_file, Path(entry.path))))
        except OSError as error:
            notes.append(f"{_shown(parts)} could not be read ({error.strerror})")
    if too_deep:
        notes.append(f"folders more than {MAX_DEPTH} levels deep in {_shown(folder.name)} were not searched")
    return candidates


def _read_zip(path: Path, stages: Collection[str], notes: list[str]) -> dict[str, bytes]:
    try:
        with _open_regular(path) as stream, _open_zip(stream) as archive:
            return _choose(_zip_candidates(archive, path.name, notes), stages, notes)
    except _Unreadable as error:
        notes.append(f"{_shown(path.name)} {error}")
        return {}


def _open_zip(stream: BinaryIO) -> zipfile.ZipFile:
    try:
        end = zipfile._EndRecData(stream)  # type: ignore[attr-defined]  # zipfile's own reader of the end record: private, stable for decades
        if end and end[zipfile._ECD_SIZE] > MAX_ZIP_DIRECTORY_BYTES:  # type: ignore[attr-defined]
            raise _Unreadable("lists too many files to be read; zip only the notebooks")
        return zipfile.ZipFile(stream)
    except _Unreadable:
        raise
    except Exception as error:  # zipfile raises many kinds of error on a damaged or hostile archive
        raise _Unreadable("is not a readable zip archive") from error


def _zip_candidates(archive: zipfile.ZipFile, name: str, notes: list[str]) -> list[_Candidate]:
    members = archive.infolist()
    if len(members) > MAX_ZIP_MEMBERS:
        notes.append(f"{_shown(name)} holds more than {MAX_ZIP_MEMBERS} files; "
                     f"only the first {MAX_ZIP_MEMBERS} were looked at")
    candidates = []
    for member in members[:MAX_ZIP_MEMBERS]:
        parts = tuple(part for part in member.filename.replace("\\", "/").split("/") if part)
        if (member.is_dir() or not parts or not parts[-1].endswith(".ipynb") or "__MACOSX" in parts
                or any(part.startswith(".") for part in parts)):
            continue  # nested zips are no notebooks, and hidden parts are checkpoints or macOS ._ files
        here = (name, *parts)
        if member.flag_bits & 0x1:
            notes.append(f"{_shown(here)} is encrypted, so it was not read")
        elif member.compress_type not in READABLE_COMPRESSIONS:
            notes.append(f"{_shown(here)} is compressed with a method other than deflate, so it was not read")
        else:
            candidates.append(_Candidate(here, functools.partial(_read_member, archive, member)))
    return candidates


def _read_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes:
    if member.file_size > limit:
        raise _TooLarge(0)
    try:
        with archive.open(member) as stream:
            return _read_capped(stream, limit)
    except _TooLarge:
        raise
    except Exception as error:  # a bad CRC, a truncated stream, a header that disagrees with the directory...
        raise _Unreadable("is damaged in its archive, so it was not read") from error


def _open_regular(path: Path) -> BinaryIO:
    """A regular file opened for reading, never through a link and never anything else: a FIFO would block."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise _Unreadable("is not a regular file, so it was not read")
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise _Unreadable(f"could not be opened ({error.strerror})") from error
    stream = os.fdopen(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # replaced since the lstat
        stream.close()
        raise _Unreadable("is not a regular file, so it was not read")
    return stream


def _read_file(path: Path, limit: int) -> bytes:
    with _open_regular(path) as stream:
        if os.fstat(stream.fileno()).st_size > limit:
            raise _TooLarge(0)
        try:
            return _read_capped(stream, limit)
        except OSError as error:
            raise _Unreadable(f"could not be read ({error.strerror})") from error


def _read_capped(stream: IO[bytes], limit: int) -> bytes:
    """The whole stream, read in chunks so that no size a header claims can make it read past limit + 1 bytes."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(CHUNK_BYTES, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    raise _TooLarge(size)


def _choose(candidates: list[_Candidate], stages: Collection[str], notes: list[str]) -> dict[str, bytes]:
    """Each stage's notebook: one named after the stage wins over one whose metadata names it, then the first
    in path order wins; the submission's notebooks are read up to MAX_SUBMISSION_BYTES in all."""
    notebooks: dict[str, bytes] = {}
    kept: dict[str, str] = {}  # stage -> the notebook kept for it, as named in notes
    left = MAX_SUBMISSION_BYTES
    for candidate in sorted(candidates, key=lambda c: (_named_stage(c.parts[-1], stages) is None, c.parts)):
        shown, stage = _shown(candidate.parts), _named_stage(candidate.parts[-1], stages)
        if stage in kept:  # known from the name: not even read
            notes.append(_ignored(shown, kept[stage], stage))
            continue
        limit = min(MAX_NOTEBOOK_BYTES, left)
        try:
            data = candidate.read(limit)
        except _TooLarge as error:
            left -= error.read
            if limit == MAX_NOTEBOOK_BYTES:
                notes.append(f"{shown} is larger than {MAX_NOTEBOOK_BYTES >> 20} MiB, so it was not read")
                continue
            notes.append(f"{shown} was not read: the notebooks of this submission are over "
                         f"{MAX_SUBMISSION_BYTES >> 20} MiB in all")
            if left <= 0:
                break
            continue  # a smaller notebook further on may still fit in what is left
        except _Unreadable as error:
            notes.append(f"{shown} {error}")
            continue
        left -= len(data)
        stage = stage or _stage_in_metadata(data, shown, stages, notes)
        if stage in kept:
            notes.append(_ignored(shown, kept[stage], stage))
        elif stage:
            kept[stage], notebooks[stage] = shown, data
    return notebooks


def _ignored(shown: str, kept: str, stage: str) -> str:
    return f"{shown} was ignored: {kept} is the notebook graded for {stage}"


def _named_stage(filename: str, stages: Collection[str]) -> str | None:
    stem = filename.removesuffix(".ipynb")
    return stem if stem != filename and stem in stages else None


def _stage_in_metadata(data: bytes, shown: str, stages: Collection[str], notes: list[str]) -> str | None:
    """The known stage that metadata.tinytorch.stage names, or None (with a note if the bytes are no notebook)."""
    try:
        notebook = json.loads(data)
    except (ValueError, RecursionError, MemoryError):  # not UTF-8, not JSON, or nested past Python's stack
        notes.append(f"{shown} is not named after a stage and is not a readable notebook, so it was ignored")
        return None
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    tinytorch = metadata.get("tinytorch") if isinstance(metadata, dict) else None
    stage = tinytorch.get("stage") if isinstance(tinytorch, dict) else None
    return stage if isinstance(stage, str) and stage in stages else None


def _shown(parts: tuple[str, ...] | str) -> str:
    """A path for a note, on one line whatever characters its names hold."""
    return printable(parts if isinstance(parts, str) else "/".join(parts))


def printable(text: str) -> str:
    """`text` on one line with no control character: ids and names as the grader prints them."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
