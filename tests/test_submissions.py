"""`tito.submissions.find` on honest and hostile submission folders: every student kept, nothing followed,
blocked on or read past a bound, and every problem a note rather than an exception."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import threading
import zipfile
import zlib
from pathlib import Path

import pytest

from tito import submissions
from tito.errors import TitoError
from tito.submissions import Submission, feedback_filename, find

STAGES = ("01_tensor", "02_autograd", "03_activations")


def notebook(stage: str | None = None) -> bytes:
    metadata = {"tinytorch": {"stage": stage}} if stage else {}
    return json.dumps({"cells": [], "metadata": metadata, "nbformat": 4, "nbformat_minor": 5}).encode()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def raw_zip(path: Path, members: list[tuple[str, bytes, int, int]], flags: int = 0, method: int = 8) -> Path:
    """A zip written byte by byte from (name, compressed data, crc, uncompressed size claimed), so that a test
    can claim any size and hold any stream."""
    body, directory = bytearray(), bytearray()
    for name, data, crc, size in members:
        encoded = name.encode()
        directory += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, flags, method, 0, 0x21, crc, len(data), size,
                                 len(encoded), 0, 0, 0, 0, 0, len(body)) + encoded
        body += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, flags, method, 0, 0x21, crc, len(data), size,
                            len(encoded), 0) + encoded + data
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), len(body), 0)
    path.write_bytes(bytes(body + directory + end))
    return path


def deflated_zeros(mib: int) -> tuple[bytes, int]:
    """A raw deflate stream of `mib` MiB of zeros and its CRC, built from one compressed MiB repeated (each full
    flush starts afresh), so that a 300 MiB member costs milliseconds to make."""
    zeros = bytes(1 << 20)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(zeros, crc)
    return block * mib + compressor.flush(), crc


@pytest.fixture
def bytes_unpacked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of every read from a zip member, as zipfile returned them."""
    sizes: list[int] = []
    read = zipfile.ZipExtFile.read

    def counted(self, n=-1):
        data = read(self, n)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(zipfile.ZipExtFile, "read", counted)
    return sizes


def find_within(seconds: float, where: Path) -> dict[str, Submission]:
    """find, failing the test rather than hanging it."""
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(found=find(where, STAGES)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "find hung"
    return result["found"]


def notes_of(found: dict[str, Submission], student: str) -> str:
    return "\n".join(found[student].notes)


# Layouts


def test_folder_zip_and_notebook_per_student_are_all_read(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "01_tensor.ipynb", notebook())
    make_zip(tmp_path / "bob.zip", {"bob/02_autograd.ipynb": notebook()})
    write(tmp_path / "carol.ipynb", notebook("01_tensor"))
    found = find(tmp_path, STAGES)
    assert list(found) == ["alice", "bob", "carol"]
    assert found["alice"] == Submission("alice", {"01_tensor": notebook()}, [])
    assert found["bob"].notebooks == {"02_autograd": notebook()}
    assert found["carol"].notebooks == {"01_tensor": notebook("01_tensor")}


def test_an_nbgrader_courses_submitted_folder_is_read_a_folder_per_student(tmp_path: Path) -> None:
    """find reads the folder it is given; which folder that is (a course's submitted/) is `tito grade`'s
    decision, from the instructor's files (tests/test_reader_bounds.py)."""
    course = tmp_path / "course"
    write(course / "source" / "01_tensor" / "01_tensor.ipynb", notebook())
    write(course / "gradebook.db", b"")
    write(course / "submitted" / "alice" / "01_tensor" / "01_tensor.ipynb", notebook())
    write(course / "submitted" / "alice" / "01_tensor" / "timestamp.txt", b"2024-01-01")
    write(course / "submitted" / "alice" / "02_autograd" / "02_autograd.ipynb", notebook())
    write(course / "submitted" / "bob" / "01_tensor" / "01_tensor.ipynb", notebook())
    expected = {"alice": {"01_tensor": notebook(), "02_autograd": notebook()}, "bob": {"01_tensor": notebook()}}
    found = find(course / "submitted", STAGES)
    assert {student: s.notebooks for student, s in found.items()} == expected
    assert all(not s.notes for s in found.values())


def test_only_notebooks_of_known_stages_are_kept(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "01_tensor.ipynb", notebook())
    write(tmp_path / "alice" / "99_extra.ipynb", notebook())
    write(tmp_path / "alice" / "scratch.ipynb", notebook())
    write(tmp_path / "alice" / "other.ipynb", notebook("99_unknown"))
    write(tmp_path / "alice" / "01_tensor.py", b"print('hi')")
    assert find(tmp_path, STAGES)["alice"] == Submission("alice", {"01_tensor": notebook()}, [])


def test_stage_in_metadata_places_a_renamed_notebook(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "01_tensor (1).ipynb", notebook("02_autograd"))
    assert find(tmp_path, STAGES)["alice"].notebooks == {"02_autograd": notebook("02_autograd")}


def test_odd_stage_metadata_is_no_stage(tmp_path: Path) -> None:
    for i, metadata in enumerate([[], {"tinytorch": []}, {"tinytorch": {"stage": ["01_tensor"]}}, None]):
        write(tmp_path / "alice" / f"n{i}.ipynb", json.dumps({"metadata": metadata}).encode())
    write(tmp_path / "alice" / "list.ipynb", b"[1, 2]")
    assert find(tmp_path, STAGES)["alice"] == Submission("alice", {}, [])


def test_a_student_with_no_notebook_is_kept(tmp_path: Path) -> None:
    write(tmp_path / "dave" / "README.txt", b"sorry")
    assert find(tmp_path, STAGES) == {"dave": Submission("dave", {}, [])}


def test_hidden_entries_are_skipped(tmp_path: Path) -> None:
    write(tmp_path / ".DS_Store", b"")
    write(tmp_path / ".hidden" / "01_tensor.ipynb", notebook())
    write(tmp_path / "alice" / ".ipynb_checkpoints" / "01_tensor.ipynb", notebook())
    write(tmp_path / "alice" / "grades.csv", b"")
    write(tmp_path / "notes.txt", b"")
    assert find(tmp_path, STAGES) == {"alice": Submission("alice", {}, [])}


def test_a_hidden_entry_shaped_like_a_submission_is_named_in_a_warning(tmp_path: Path, capsys) -> None:
    """An id that starts with "." (a roster can hold one) is not graded, but never silently: the run names it."""
    write(tmp_path / ".bob" / "01_tensor.ipynb", notebook())
    write(tmp_path / ".DS_Store", b"")
    write(tmp_path / ".ipynb_checkpoints" / "01_tensor.ipynb", notebook())
    write(tmp_path / "alice" / "01_tensor.ipynb", notebook())
    assert list(find(tmp_path, STAGES)) == ["alice"]
    said = capsys.readouterr().err
    assert ".bob" in said and "not graded" in said and ".DS_Store" not in said and "checkpoints" not in said


def test_not_a_folder_and_no_submissions_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TitoError, match="is not a folder"):
        find(write(tmp_path / "file.txt", b""), STAGES)
    with pytest.raises(TitoError, match="holds no submissions"):
        find(tmp_path, STAGES)


# Student ids


def test_unicode_ids_are_kept_exactly(tmp_path: Path) -> None:
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    for student in ("李雷", "Zoë Ñúñez", "🎓 x", nfc, nfd):
        write(tmp_path / student / "01_tensor.ipynb", notebook())
    make_zip(tmp_path / "Ølaf.zip", {"01_tensor.ipynb": notebook()})
    found = find(tmp_path, STAGES)
    assert set(found) == {"李雷", "Zoë Ñúñez", "🎓 x", nfc, nfd, "Ølaf"}
    assert all(s.student == student and s.notebooks == {"01_tensor": notebook()} for student, s in found.items())


def test_an_undecodable_folder_name_is_kept_as_python_decodes_it(tmp_path: Path) -> None:
    folder = os.fsencode(tmp_path) + b"/b\xffob"
    os.mkdir(folder)
    write(Path(os.fsdecode(folder)) / "01_tensor.ipynb", notebook())
    found = find(tmp_path, STAGES)
    assert list(found) == ["b\udcffob"] and found["b\udcffob"].notebooks == {"01_tensor": notebook()}
    assert feedback_filename("b\udcffob").startswith("b_ob-")


@pytest.mark.parametrize("first, second", [("alice.zip", "alice"), ("alice.ipynb", "alice.zip"),
                                           ("alice.ipynb", "alice")])
def test_two_entries_for_one_student_are_that_ids_graded_0_naming_both(tmp_path: Path, first: str, second: str) -> None:
    """A classmate can name a zip after someone's folder: that id is not graded (neither entry is chosen),
    the note names both for the instructor, and the rest of the class is read as ever."""
    for name in (first, second):
        if name.endswith(".zip"):
            make_zip(tmp_path / name, {"01_tensor.ipynb": notebook()})
        elif name.endswith(".ipynb"):
            write(tmp_path / name, notebook("01_tensor"))
        else:
            write(tmp_path / name / "01_tensor.ipynb", notebook())
    write(tmp_path / "bob" / "01_tensor.ipynb", notebook())
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {} and found["bob"].notebooks == {"01_tensor": notebook()}
    note = notes_of(found, "alice")
    assert "are all submissions of alice: none was graded" in note and first in note and second in note


@pytest.mark.parametrize("student", ["alice", "José", "李雷", "a@b.edu", "x-y_z.1"])
def test_feedback_filename_keeps_a_plain_id(student: str) -> None:
    assert feedback_filename(student) == f"{student}.md"


@pytest.mark.parametrize("student", ["a/b", "a\\b", "..", ".", "", "../../etc/passwd", "a\nb", "\u202eevil",
                                     "a\udcffb", "x" * 300, "𝒜" * 100, "con:1", "a b"])
def test_feedback_filename_is_a_safe_name_with_a_hash_when_changed(student: str) -> None:
    name = feedback_filename(student)
    assert name.endswith(".md") and not name.startswith(".")
    assert "/" not in name and "\\" not in name and all(c.isprintable() for c in name)
    assert len(name.encode("utf-8")) <= 255 and len(name) <= 112
    assert name[-12:-3] == "-" + hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def test_an_id_shaped_like_a_changed_one_cannot_take_its_feedback_file() -> None:
    """o'brien's file is o_brien-<hash>.md: a student who names herself exactly that gets another file."""
    taken = feedback_filename("o'brien")
    assert feedback_filename(taken.removesuffix(".md")) != taken


def test_feedback_filenames_of_different_ids_differ() -> None:
    ids = ["a/b", "a\\b", "a_b", "a:b", "x" * 101, "x" * 102, "x" * 100, "..", "_..", "", "_"]
    assert len({feedback_filename(student) for student in ids}) == len(ids)


# Links and special files


def test_a_symlink_to_a_secret_file_is_not_read(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret" / "answers.ipynb", notebook("01_tensor"))
    write(tmp_path / "secret" / "01_tensor.ipynb", notebook())
    where = tmp_path / "class"
    (where / "alice").mkdir(parents=True)
    (where / "alice" / "01_tensor.ipynb").symlink_to(secret)
    (where / "alice" / "solutions").symlink_to(tmp_path / "secret")  # a linked folder is not searched either
    (where / "alice" / "loop").symlink_to(where / "alice")
    (where / "bob.ipynb").symlink_to(secret)
    (where / "carol").symlink_to(tmp_path / "secret")
    found = find_within(5, where)
    assert list(found) == ["alice", "bob", "carol"]  # a linked entry is a row of its own, graded 0 with a note
    assert all(s.notebooks == {} for s in found.values())
    assert "alice/01_tensor.ipynb is a symbolic link" in notes_of(found, "alice")
    assert notes_of(found, "bob") == "bob.ipynb is a symbolic link, which is never followed"
    assert notes_of(found, "carol") == "carol is a symbolic link, which is never followed"


def test_a_fifo_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "bob.zip")
    os.mkfifo(tmp_path / "carol.ipynb")
    (tmp_path / "alice").mkdir()
    os.mkfifo(tmp_path / "alice" / "01_tensor.ipynb")
    write(tmp_path / "alice" / "sub" / "01_tensor.ipynb", notebook())
    found = find_within(5, tmp_path)
    assert found["alice"].notebooks == {"01_tensor": notebook()}
    for student, name in (("alice", "alice/01_tensor.ipynb"), ("bob", "bob.zip"), ("carol", "carol.ipynb")):
        assert f"{name} is not a regular file" in notes_of(found, student)


# Bounds


def test_a_notebook_over_16_mib_is_skipped_with_a_note(tmp_path: Path) -> None:
    with open(tmp_path / "alice.ipynb", "wb") as stream:
        stream.truncate(submissions.MAX_NOTEBOOK_BYTES + 1)  # sparse: no time or disk spent
    assert find(tmp_path, STAGES)["alice"] == Submission(
        "alice", {}, ["alice.ipynb is larger than 16 MiB, so it was not read"])


def test_notebooks_past_the_total_bound_of_a_submission_are_not_read(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(submissions, "MAX_NOTEBOOK_BYTES", 1000)
    monkeypatch.setattr(submissions, "MAX_SUBMISSION_BYTES", 2000)
    sizes = {"01_a": 950, "02_b": 990, "03_c": 900, "04_d": 50}  # 03_c is over the 60 bytes left; 04_d fits
    for stage, size in sizes.items():
        write(tmp_path / "alice" / f"{stage}.ipynb", b"x" * size)
    found = find(tmp_path, sizes)
    assert list(found["alice"].notebooks) == ["01_a", "02_b", "04_d"]
    assert len(found["alice"].notes) == 1
    assert found["alice"].notes[0].startswith("alice/03_c.ipynb was not read: the notebooks of this submission")


def test_a_stream_longer_than_its_claimed_size_is_not_read_past_the_cap() -> None:
    stream = io.BytesIO(bytes(10 << 20))
    with pytest.raises(submissions._TooLarge):
        submissions._read_capped(stream, 1000)
    assert stream.tell() == 1001


def test_a_deep_folder_is_searched_down_to_the_bound(tmp_path: Path) -> None:
    shallow = tmp_path / "alice" / Path(*"abcdef")
    write(shallow / "01_tensor.ipynb", notebook())
    write(shallow / "g" / "02_autograd.ipynb", notebook())
    found = find(tmp_path, STAGES)
    assert list(found["alice"].notebooks) == ["01_tensor"]
    assert "more than 6 levels deep in alice were not searched" in notes_of(found, "alice")


def test_a_huge_folder_is_searched_up_to_the_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(submissions, "MAX_ENTRIES", 50)
    write(tmp_path / "alice" / "01_tensor.ipynb", notebook())
    for i in range(60):
        write(tmp_path / "alice" / "venv" / f"file{i}", b"")
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {"01_tensor": notebook()}  # breadth first: the shallow one is found
    assert "alice holds more than 50 files and folders" in notes_of(found, "alice")



def test_a_stages_notebook_is_found_by_its_name_however_many_files_lie_beside_it(tmp_path, monkeypatch) -> None:
    """A data set saved beside the notebook uses up the search's bound in whatever order the folder lists its
    files: the stage's own NN_name.ipynb at the top is looked up by name first (an attack found it hidden)."""
    monkeypatch.setattr(submissions, "MAX_ENTRIES", 50)
    for i in range(200):
        write(tmp_path / "alice" / f"image{i:03d}.png", b"")
    write(tmp_path / "alice" / "01_tensor.ipynb", notebook())
    write(tmp_path / "alice" / "work" / "02_autograd.ipynb", notebook())  # not at the top: the bound decides
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks["01_tensor"] == notebook()
    assert "alice holds more than 50 files and folders" in notes_of(found, "alice")


# Zips


def test_a_zip_reads_only_notebooks_outside_macosx_and_not_nested_zips(tmp_path: Path) -> None:
    inner = make_zip(tmp_path / "inner.zip", {"02_autograd.ipynb": notebook()}).read_bytes()
    (tmp_path / "class").mkdir()
    make_zip(tmp_path / "class" / "alice.zip", {
        "alice/01_tensor.ipynb": notebook(),
        "__MACOSX/alice/03_activations.ipynb": notebook(),
        "alice/.ipynb_checkpoints/02_autograd.ipynb": notebook(),
        "alice/inner.zip": inner,
        "alice/02_autograd.py": b"",
    })
    assert find(tmp_path / "class", STAGES)["alice"] == Submission("alice", {"01_tensor": notebook()}, [])


def test_an_encrypted_member_is_skipped_with_a_note(tmp_path: Path) -> None:
    data = notebook()
    raw_zip(tmp_path / "alice.zip", [("01_tensor.ipynb", data, zlib.crc32(data), len(data))], flags=1, method=0)
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {}
    assert "alice.zip/01_tensor.ipynb is encrypted" in notes_of(found, "alice")


def test_a_bzip2_member_is_skipped_with_a_note(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "alice.zip", "w", zipfile.ZIP_BZIP2) as archive:
        archive.writestr("01_tensor.ipynb", notebook())
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {}
    assert "other than deflate" in notes_of(found, "alice")


def test_a_raw_zip_of_deflated_zeros_is_read_when_its_sizes_are_true(tmp_path: Path) -> None:
    """The bombs below are refused for their sizes, not for being malformed."""
    zeros, crc = deflated_zeros(3)
    raw_zip(tmp_path / "alice.zip", [("01_tensor.ipynb", zeros, crc, 3 << 20)])
    assert find(tmp_path, STAGES)["alice"] == Submission("alice", {"01_tensor": bytes(3 << 20)}, [])


def test_a_member_of_300_mib_of_zeros_is_not_unpacked(tmp_path: Path, bytes_unpacked: list[int]) -> None:
    zeros, crc = deflated_zeros(300)
    path = raw_zip(tmp_path / "alice.zip", [("01_tensor.ipynb", zeros, crc, 300 << 20)])
    assert path.stat().st_size < 1 << 20
    found = find(tmp_path, STAGES)
    assert found["alice"] == Submission("alice", {}, ["alice.zip/01_tensor.ipynb is larger than 16 MiB, "
                                                      "so it was not read"])
    assert sum(bytes_unpacked) == 0


def test_a_member_claiming_a_small_size_is_not_read_past_the_cap(tmp_path: Path, bytes_unpacked: list[int]) -> None:
    zeros, crc = deflated_zeros(60)
    raw_zip(tmp_path / "alice.zip", [("01_tensor.ipynb", zeros, crc, 1000),
                                     ("02_autograd.ipynb", zeros, crc, submissions.MAX_NOTEBOOK_BYTES)])
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {}
    assert "alice.zip/01_tensor.ipynb is damaged in its archive" in notes_of(found, "alice")
    assert "alice.zip/02_autograd.ipynb is damaged in its archive" in notes_of(found, "alice")
    assert sum(bytes_unpacked) <= 1000 + submissions.MAX_NOTEBOOK_BYTES
    assert max(bytes_unpacked) <= submissions.CHUNK_BYTES


def test_a_corrupt_zip_gives_a_note(tmp_path: Path) -> None:
    write(tmp_path / "alice.zip", b"PK\x03\x04 this is not really a zip")
    found = find(tmp_path, STAGES)
    assert found["alice"] == Submission("alice", {}, ["alice.zip is not a readable zip archive"])


def test_a_truncated_zip_gives_a_note(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "alice.zip", {"01_tensor.ipynb": os.urandom(5000)})
    path.write_bytes(path.read_bytes()[:3000])
    assert find(tmp_path, STAGES)["alice"].notes == ["alice.zip is not a readable zip archive"]


def test_a_member_failing_its_crc_gives_a_note(tmp_path: Path) -> None:
    data = notebook()
    raw_zip(tmp_path / "alice.zip", [("01_tensor.ipynb", data, zlib.crc32(data) ^ 1, len(data))], method=0)
    found = find(tmp_path, STAGES)
    assert found["alice"] == Submission("alice", {}, ["alice.zip/01_tensor.ipynb is damaged in its archive, "
                                                      "so it was not read"])


def test_a_zip_with_a_huge_directory_is_not_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(submissions, "MAX_ZIP_DIRECTORY_BYTES", 1000)
    make_zip(tmp_path / "alice.zip", {f"{i}.txt": b"" for i in range(100)})
    assert "alice.zip lists too many files" in notes_of(find(tmp_path, STAGES), "alice")


def test_a_zip_is_scanned_up_to_the_member_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(submissions, "MAX_ZIP_MEMBERS", 10)
    make_zip(tmp_path / "alice.zip", {"01_tensor.ipynb": notebook(), **{f"{i}.txt": b"" for i in range(20)},
                                      "02_autograd.ipynb": notebook()})
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {"01_tensor": notebook()}
    assert "alice.zip holds more than 10 files" in notes_of(found, "alice")


# Reading a notebook's stage


@pytest.mark.parametrize("data", [b"[" * 100_000, b"{" * 100_000, b"\x80\x81 not UTF-8", b'{"metadata": ', b""])
def test_an_unreadable_notebook_without_a_stage_name_is_no_stage(tmp_path: Path, data: bytes) -> None:
    write(tmp_path / "alice" / "work.ipynb", data)
    write(tmp_path / "alice" / "01_tensor.ipynb", notebook())
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {"01_tensor": notebook()}
    assert found["alice"].notes == ["alice/work.ipynb is not named after a stage and is not a readable notebook, "
                                    "so it was ignored"]


def test_a_notebook_named_after_its_stage_is_kept_as_bytes_even_if_unreadable(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "01_tensor.ipynb", b'{"cells": [{')  # graded as what it is: 0 with a note
    assert find(tmp_path, STAGES)["alice"].notebooks == {"01_tensor": b'{"cells": [{'}


def test_a_notebook_named_after_its_stage_too_costly_to_parse_is_not_kept(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "01_tensor.ipynb", b"[" * 100_000)
    assert find(tmp_path, STAGES)["alice"] == Submission("alice", {}, [
        "alice/01_tensor.ipynb is not a readable Jupyter notebook (it nests more than 64 levels deep), "
        "so it was not graded"])


def test_memory_error_reading_a_stage_is_no_stage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(submissions.json, "loads", exhausted)
    write(tmp_path / "alice" / "work.ipynb", notebook("01_tensor"))
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {}
    assert "not a readable notebook" in notes_of(found, "alice")


def test_two_notebooks_for_a_stage_keep_the_exactly_named_one(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "00_backup.ipynb", notebook("01_tensor"))
    write(tmp_path / "alice" / "z" / "01_tensor.ipynb", notebook())
    found = find(tmp_path, STAGES)
    assert found["alice"] == Submission("alice", {"01_tensor": notebook()}, [
        "alice/00_backup.ipynb was ignored: alice/z/01_tensor.ipynb is the notebook graded for 01_tensor"])


def test_two_notebooks_for_a_stage_by_metadata_keep_the_first_in_path_order(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "b" / "copy.ipynb", notebook("01_tensor") + b" ")
    write(tmp_path / "alice" / "a" / "copy.ipynb", notebook("01_tensor"))
    write(tmp_path / "alice" / "a" / "z.ipynb", notebook("01_tensor") + b"  ")
    found = find(tmp_path, STAGES)
    assert found["alice"].notebooks == {"01_tensor": notebook("01_tensor")}
    assert found["alice"].notes == [
        "alice/a/z.ipynb was ignored: alice/a/copy.ipynb is the notebook graded for 01_tensor",
        "alice/b/copy.ipynb was ignored: alice/a/copy.ipynb is the notebook graded for 01_tensor"]


def test_two_exactly_named_notebooks_keep_the_first_in_path_order(tmp_path: Path) -> None:
    make_zip(tmp_path / "alice.zip", {"v2/01_tensor.ipynb": notebook() + b" ", "v1/01_tensor.ipynb": notebook()})
    found = find(tmp_path, STAGES)
    assert found["alice"] == Submission("alice", {"01_tensor": notebook()}, [
        "alice.zip/v2/01_tensor.ipynb was ignored: alice.zip/v1/01_tensor.ipynb is the notebook graded for 01_tensor"])


def test_odd_names_appear_in_notes_on_one_line(tmp_path: Path) -> None:
    write(tmp_path / "alice" / "a\nb.ipynb", b"{")
    assert find(tmp_path, STAGES)["alice"].notes == [
        "alice/a\\nb.ipynb is not named after a stage and is not a readable notebook, so it was ignored"]
