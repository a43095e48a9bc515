"""The trusted reader of a class's submissions: each student's stage notebooks as bytes, read from files that
students made, maybe with hostile intent, so nothing here follows a link, blocks, or reads without a bound.

Every file is opened one name at a time from the folder of the class, each name without following a link
(`_opened`), so no link at any level, made before or during the reading, leads out of it. What a notebook
would cost once parsed is bounded before anything parses it (`json_problem`)."""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
import stat
import zipfile
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import IO, BinaryIO

from tito import console
from tito.errors import TitoError

# The trusted process's memory for one submission: its bytes, held until the class is graded, and one notebook
# parsed at a time (its text decoded, up to 4 bytes a character, its strings, its cells' sources joined).
# tests/test_reader_bounds.py measures the worst case against an honest submission. A course notebook is 60 KB.
MAX_NOTEBOOK_BYTES = 16 << 20  # as tito.fetched reads a student's own notebooks
MAX_SUBMISSION_BYTES = 64 << 20  # read in all from one student's files
# json.loads builds about 80 bytes per value, key and (once a cell's source is split into lines) line: a
# notebook of this course holds some 3,000 of them, one with 10,000 cells added some 150,000.
MAX_JSON_VALUES = 500_000
MAX_JSON_DEPTH = 64  # nbformat nests 6 levels deep, widget states a few more
MAX_NOTES = 50  # notes kept per submission (a folder of 10,000 links would give 10,000)
MAX_SHOWN_CHARS = 300  # of a path in a note (a zip member's name may be 64 KiB long)
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
    """Every student's submission in the folder `where`, by student id in name order: one notebook, zip or
    folder per student (for an nbgrader course, its submitted/ folder: the caller decides, from the
    instructor's files, never from a student's). Only notebooks of `stages` are read."""
    try:
        descriptor = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        if not where.is_dir():
            raise TitoError(f"{where} is not a folder: give the folder that holds the submissions (an nbgrader "
                            f"course, its submitted/ folder, or one notebook, zip or folder per student)") from None
        raise TitoError(f"cannot list {where}: {error.strerror}") from None
    try:
        entries = _student_entries(where, descriptor)
        if not entries:
            raise TitoError(f"{where} holds no submissions (expected one notebook, zip or folder per student)")
        return {student: _claimed_twice(student, entry) if isinstance(entry, list) else
                _read_submission(student, entry, descriptor, stages) for student, entry in entries.items()}
    finally:
        os.close(descriptor)


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


def _student_entries(where: Path, descriptor: int) -> dict[str, os.DirEntry | list[os.DirEntry]]:
    """The entry of each student, or the entries when several claim one id: neither merged nor either
    chosen (a classmate can name a zip after someone else's folder), that id alone is a graded 0 with a
    note naming them all, for the instructor to decide."""
    try:
        with os.scandir(descriptor) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as error:
        raise TitoError(f"cannot list {where}: {error.strerror}") from error
    found: dict[str, os.DirEntry | list[os.DirEntry]] = {}
    hidden = [entry.name for entry in entries if entry.name.startswith(".") and entry.name not in TOOL_ENTRIES
              and not entry.name.startswith("._") and _student_of(entry, hidden=True) is not None]
    if hidden:
        shown = ", ".join(printable(name) for name in hidden[:5]) + (" ..." if len(hidden) > 5 else "")
        console.warn(f"{shown} in {where} {'was' if len(hidden) == 1 else 'were'} not graded: a name starting with "
                     f"'.' is hidden, never a student's submission; rename it if it is one")
    for entry in entries:
        student = _student_of(entry)
        if student is None:
            continue
        if student in found:
            earlier = found[student]
            found[student] = [*(earlier if isinstance(earlier, list) else [earlier]), entry]
        else:
            found[student] = entry
    return found


def _claimed_twice(student: str, entries: list[os.DirEntry]) -> Submission:
    names = " and ".join(_shown(entry.name) for entry in entries)
    return Submission(student, {}, [f"{names} are all submissions of {printable(student)}: none was graded; keep "
                                    f"the one that is theirs (rename or remove the others) and grade again"])


def _leads_to_folder(link: os.DirEntry) -> bool:
    """Whether a link's target is a folder: a stat through it, never a read."""
    try:
        return link.is_dir()
    except OSError:
        return False


TOOL_ENTRIES = {".ipynb_checkpoints", ".git", ".DS_Store", ".venv", ".tito", ".cache"}  # hidden, and no one's


def _student_of(entry: os.DirEntry, *, hidden: bool = False) -> str | None:
    """The student whose submission the entry is, or None for an entry that is no submission. A link named
    like a submission, or leading to a folder, is one: never followed, it is graded 0 with a note, so that
    the student's row says why rather than missing. A hidden entry (its name starts with ".") is none, unless
    `hidden`: then it is read as a student's would be, for the warning that names it."""
    if entry.name.startswith(".") and not hidden:
        return None
    for suffix in (".zip", ".ipynb"):
        if entry.name.endswith(suffix):
            return entry.name.removesuffix(suffix)
    if entry.is_dir(follow_symlinks=False):
        return entry.name
    return entry.name if entry.is_symlink() and _leads_to_folder(entry) else None


def _read_submission(student: str, entry: os.DirEntry, top: int, stages: Collection[str]) -> Submission:
    """The notebooks of one student's entry in the class folder open as `top`."""
    notes: list[str] = []
    notebooks: dict[str, bytes] = {}
    here = (entry.name,)
    try:
        if entry.is_symlink():
            notes.append(f"{_shown(here)} is a symbolic link, which is never followed")
        elif entry.is_dir(follow_symlinks=False):
            with _opened(top, here) as folder:
                notebooks = _choose(_folder_candidates(folder, entry.name, notes, stages), stages, notes)
        elif entry.name.endswith(".zip"):
            notebooks = _read_zip(top, entry.name, stages, notes)
        else:
            notebooks = _choose([_Candidate(here, functools.partial(_read_file, top, here))], stages, notes)
    except _Unreadable as error:
        notes.append(f"{_shown(here)} {error}")
    except Exception as error:  # the last resort: one student's files must never stop the grading of the class
        notes.append(f"{_shown(here)} could not be read ({type(error).__name__})")
    if len(notes) > MAX_NOTES:
        notes[MAX_NOTES - 1:] = [f"... and {len(notes) - MAX_NOTES + 1} more problems with the files of "
                                 f"{_shown(here)}"]
    return Submission(student, notebooks, notes)


def _folder_candidates(folder: int, name: str, notes: list[str],
                       stages: Collection[str] = ()) -> list[_Candidate]:
    """The notebooks in a student's folder (open as `folder`): first each stage's own NN_name.ipynb at its top,
    looked up by name (however many files lie beside it), then the rest searched breadth first so that a deep or
    huge tree (a virtual environment, a data set) uses up the bounds only after the shallow notebooks were found.
    A candidate's parts are its path from the class folder; it is read below `folder`."""
    candidates: list[_Candidate] = []
    named = set()
    for stage in stages:
        try:
            if stat.S_ISREG(os.stat(f"{stage}.ipynb", dir_fd=folder, follow_symlinks=False).st_mode):
                named.add(f"{stage}.ipynb")
                candidates.append(_Candidate((name, f"{stage}.ipynb"),
                                             functools.partial(_read_file, folder, (f"{stage}.ipynb",))))
        except OSError:
            continue
    pending: deque[tuple[str, ...]] = deque([()])
    visited, too_deep = 0, False
    while pending:
        below = pending.popleft()
        try:
            with _opened(folder, below) as descriptor, os.scandir(descriptor) as listing:
                for entry in listing:
                    visited += 1
                    if visited > MAX_ENTRIES:
                        notes.append(f"{_shown(name)} holds more than {MAX_ENTRIES} files and folders; "
                                     f"only the first {MAX_ENTRIES} were looked at")
                        return candidates
                    if entry.name.startswith(".") or not below and entry.name in named:
                        continue  # checkpoints, git, virtual environments, macOS ._ files; found already
                    path = (*below, entry.name)
                    mode = entry.stat(follow_symlinks=False).st_mode
                    if stat.S_ISLNK(mode):
                        if entry.name.endswith(".ipynb") or _leads_to_folder(entry):
                            notes.append(f"{_shown((name, *path))} is a symbolic link, which is never followed")
                    elif stat.S_ISDIR(mode):
                        if len(path) > MAX_DEPTH:
                            too_deep = True
                        else:
                            pending.append(path)
                    elif entry.name.endswith(".ipynb"):
                        candidates.append(_Candidate((name, *path), functools.partial(_read_file, folder, path)))
        except (OSError, _Unreadable) as error:
            reason = error if isinstance(error, _Unreadable) else f"could not be read ({error.strerror})"
            notes.append(f"{_shown((name, *below))} {reason}")
    if too_deep:
        notes.append(f"folders more than {MAX_DEPTH} levels deep in {_shown(name)} were not searched")
    return candidates


def _read_zip(top: int, name: str, stages: Collection[str], notes: list[str]) -> dict[str, bytes]:
    try:
        with _open_regular(top, (name,)) as stream, _open_zip(stream) as archive:
            return _choose(_zip_candidates(archive, name, notes), stages, notes)
    except _Unreadable as error:
        notes.append(f"{_shown(name)} {error}")
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
        kind = stat.S_IFMT(member.external_attr >> 16)  # the Unix mode, as zip and Info-ZIP write it
        if kind == stat.S_IFLNK:
            notes.append(f"{_shown(here)} is a symbolic link, which is never followed")
        elif kind not in (0, stat.S_IFREG):
            notes.append(f"{_shown(here)} is not a regular file, so it was not read")
        elif member.flag_bits & 0x1:
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


@contextmanager
def _opened(top: int, names: Sequence[str]) -> Iterator[int]:
    """The folder top/names[0]/.../names[-1] open, each name opened in the one before it without following a
    link: a link anywhere on the way, even one made after the folder was listed, is refused."""
    descriptor = os.dup(top)
    try:
        for name in names:
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=descriptor)
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _Unreadable("is reached through a symbolic link or a file, which is never followed") \
                        from error
                raise
            os.close(descriptor)
            descriptor = child
        yield descriptor
    finally:
        os.close(descriptor)


def _open_regular(top: int, names: Sequence[str]) -> BinaryIO:
    """A regular file below the folder open as `top`, opened for reading through no link at any level and
    never anything else: a FIFO would block."""
    try:
        with _opened(top, names[:-1]) as folder:
            mode = os.stat(names[-1], dir_fd=folder, follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode):
                raise _Unreadable("is a symbolic link, which is never followed")
            if not stat.S_ISREG(mode):
                raise _Unreadable("is not a regular file, so it was not read")
            descriptor = os.open(names[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                 dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:  # replaced by a link since the stat
            raise _Unreadable("is a symbolic link, which is never followed") from error
        raise _Unreadable(f"could not be opened ({error.strerror})") from error
    stream = os.fdopen(descriptor, "rb")
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # replaced since the stat
        stream.close()
        raise _Unreadable("is not a regular file, so it was not read")
    return stream


def _read_file(top: int, names: Sequence[str], limit: int) -> bytes:
    with _open_regular(top, names) as stream:
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
        if stage is None:
            stage = _stage_in_metadata(data, shown, stages, notes)
        elif problem := json_problem(data):  # not held until the class is graded, to be refused then
            notes.append(f"{shown} is not a readable Jupyter notebook ({problem}), so it was not graded")
            continue
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
    """The known stage that metadata.tinytorch.stage names, or None (with a note if the bytes are no notebook).
    Read as grading reads it: UTF-8 (a bad byte replaced), parsed only within `json_problem`'s bounds."""
    try:
        if json_problem(data):
            raise ValueError("too costly to parse")
        notebook = json.loads(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError, MemoryError):  # not JSON, beyond the bounds, or nested past Python's stack
        notes.append(f"{shown} is not named after a stage and is not a readable notebook, so it was ignored")
        return None
    metadata = notebook.get("metadata") if isinstance(notebook, dict) else None
    tinytorch = metadata.get("tinytorch") if isinstance(metadata, dict) else None
    stage = tinytorch.get("stage") if isinstance(tinytorch, dict) else None
    return stage if isinstance(stage, str) and stage in stages else None


def _shown(parts: tuple[str, ...] | str) -> str:
    """A path for a note, on one line whatever characters its names hold, and cut if very long."""
    text = printable(parts if isinstance(parts, str) else "/".join(parts))
    return text if len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS - 3] + "..."


# `json_problem`'s scan: what json.loads would build, counted in the bytes at the speed of bytes.count
_STRING = re.compile(rb'"[^"]*"')
# a line break in a string: an escape (\n, \r, \u000b...), or a separator str.splitlines splits on unescaped
_LINE_BREAKS = (b"\\", "\u0085".encode(), "\u2028".encode(), "\u2029".encode())
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def json_problem(data: bytes) -> str | None:
    """Why parsing `data` (a notebook's UTF-8 bytes) could cost the trusted process more than any notebook of
    the course does, as the end of a sentence, or None. Scanned, not parsed: outside strings, each value or
    key but the first follows a `,`, `:`, `[` or `{`; each escape in a string may be a line break, which
    becomes a string of its own when a cell's source is split into lines; the brackets give the depth."""
    plain = data.replace(b"\\\\", b"").replace(b'\\"', b"")  # no quote is escaped now: a string is "[^"]*"
    if plain.count(b'"') // 2 > MAX_JSON_VALUES:  # each string is a key or a value
        return f"it holds more than {MAX_JSON_VALUES:,} values, keys and lines, far more than a notebook of the course"
    structure = _STRING.sub(b"", plain)
    del plain
    count = 1 + sum(structure.count(mark) for mark in b",:[{") + sum(data.count(mark) for mark in _LINE_BREAKS)
    if count > MAX_JSON_VALUES:
        return f"it holds more than {MAX_JSON_VALUES:,} values, keys and lines, far more than a notebook of the course"
    # JSON with more closing brackets than opening ones fails where it has them: the depth before is enough
    brackets = structure.translate(None, _NOT_BRACKETS)[:2 * MAX_JSON_VALUES + 2]
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_JSON_DEPTH:
        return f"it nests more than {MAX_JSON_DEPTH} levels deep"
    return None


def printable(text: str) -> str:
    """`text` on one line with no control character: ids and names as the grader prints them."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
