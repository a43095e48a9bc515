"""The trusted reader and the instructor's reports under attack (docs/security.md, invariants 3 and 4): what
`tito grade` parses from a submission is bounded before it is parsed, its memory stays within 256 MB of an
honest class's whatever one submission holds; no link at any level is followed and no name a student chose
changes how the class is read or breaks a report; the reports are the instructor's alone (review H1); a
damaged gradebook is one sentence after the reports are written (review M6).

The end-to-end tests run `tito grade` as a real subprocess inside a wrapper that writes, as the process exits,
its own peak resident memory (VmHWM: the trusted process itself, none of its boxes): once on an honest class,
once on each memory attack alone, and once on the whole class, honest and hostile together.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from test_grade import NOTEBOOK, STAGE, submission
from test_submissions import find_within, make_zip, notebook, notes_of, write

from tito import grading, submissions
from tito.errors import TitoError
from tito.project import find_root
from tito.project import stage as find_stage
from tito.submissions import json_problem, printable

from conftest import REPO, Run

BOUND = 256 << 20  # what one submission may cost the trusted process beyond an honest class
FLAGS = ("--stage", "01", "-j", "2", "--examples", "3", "--timeout", "150")
STAGE_NAMES = sorted(p.name for p in (REPO / "solutions").iterdir() if p.is_dir() and p.name[:2].isdigit())
NEAR_THE_CAP = submissions.MAX_NOTEBOOK_BYTES - (64 << 10)  # read, then judged by what it would cost


# ---------------------------------------------------------------------------------------------------
# Notebooks and zips that cost a parser far more than their size

def notebook_bytes(cells: bytes = b"", metadata: bytes = b"{}") -> bytes:
    return b'{"cells": [' + cells + b'], "metadata": ' + metadata + b', "nbformat": 4, "nbformat_minor": 5}'


def repeated(unit: bytes, size: int, last: bytes) -> bytes:
    """`unit` repeated to about `size` bytes, then `last` (so that a JSON list closes)."""
    return unit * (size // len(unit)) + last


def deep_nesting() -> bytes:
    """Chains of 500 nested lists: under Python's recursion limit, so json.loads builds them all (8 million lists)."""
    chain = b"[" * 500 + b"]" * 500 + b","
    return notebook_bytes(metadata=b'{"x": [' + repeated(chain, NEAR_THE_CAP, b"0") + b"]}")


def many_tiny_values() -> bytes:
    return notebook_bytes(metadata=b'{"x": [' + repeated(b"[],", NEAR_THE_CAP, b"[]") + b"]}")


def many_cells() -> bytes:
    return notebook_bytes(repeated(b'{"cell_type": "raw"},', NEAR_THE_CAP, b'{"cell_type": "raw"}'))


def with_cell(source: str, filled: bool = False) -> bytes:
    """The student notebook of 01 (filled or not) with one more code cell."""
    notebook_ = nbformat.read(NOTEBOOK, as_version=4)
    notebook_.cells.append(nbformat.v4.new_code_cell(source, id="extra"))
    return nbformat.writes(notebook_).encode()


def literal_code(characters: int) -> str:
    """Code whose syntax tree is hundreds of times its size: a list of dict literals."""
    return "_a = [" + "{1: 2}," * (characters // 7) + "]\n"


def overlapping_zip(path: Path, names: list[str], content: bytes) -> Path:
    """A zip whose members overlap (Fifield's non-recursive zip bomb): member i's data quotes the local
    headers of the members after it as stored deflate blocks and runs on into their data, ending in one
    shared deflate stream of `content`. Each member unpacks to those headers then `content`; the last to
    `content` alone; the archive holds `content` compressed once."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = compressor.compress(content) + compressor.flush()
    headers = [struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, 0, 0, 0, len(name), 0) + name.encode()
               for name in names]
    body, offsets = bytearray(), []
    for number, header in enumerate(headers):
        offsets.append(len(body))
        body += header
        if number + 1 < len(headers):  # a stored block, not the last, quoting the next header
            quoted = len(headers[number + 1])
            body += struct.pack("<BHH", 0, quoted, quoted ^ 0xFFFF)
    body += kernel
    directory = bytearray()
    for number, (name, header) in enumerate(zip(names, headers)):
        output = b"".join(headers[number + 1:])
        crc = zlib.crc32(content, zlib.crc32(output))
        compressed = len(body) - offsets[number] - len(header)
        directory += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 8, 0, 0x21, crc, compressed,
                                 len(output) + len(content), len(name), 0, 0, 0, 0, 0, offsets[number]) + name.encode()
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(names), len(names), len(directory), len(body), 0)
    path.write_bytes(bytes(body + directory + end))
    return path


def zip_with_link_member(path: Path, target: str) -> Path:
    """A zip whose 01_tensor.ipynb is a symbolic link entry (as `zip --symlinks` writes one) to `target`."""
    member = zipfile.ZipInfo(f"{STAGE}.ipynb")
    member.create_system = 3
    member.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, target)
    return path


# ---------------------------------------------------------------------------------------------------
# tito grade in a wrapper that reports the process's own peak memory

# VmHWM, the peak resident memory of this process's own address space: getrusage's ru_maxrss would also count
# what the process held before its exec, a copy of the test process that started it
PEAK = """
import os, runpy, sys
sys.argv = ["tito", *sys.argv[1:]]
try:
    runpy.run_module("tito", run_name="__main__", alter_sys=True)
finally:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    with open(os.environ["TITO_PEAK_FILE"], "w") as stream:
        stream.write(str(peak * 1024))
"""


@dataclass
class Graded:
    run: Run
    peak: int  # bytes
    seconds: float
    out: Path

    def results(self) -> dict[str, dict]:
        return {g["student"]: g for g in json.loads((self.out / "results.json").read_text())["grades"]}

    def rows(self) -> list[list[str]]:
        with open(self.out / "grades.csv", encoding="utf-8", newline="") as stream:
            return list(csv.reader(stream))[1:]

    def notes(self, student: str) -> str:
        return " ".join(self.results()[student]["notes"])


def grade(folder: Path, out: Path, *flags: str, default_out: bool = False) -> Graded:
    """`tito grade folder --out out flags` (without --out when `default_out`: `out` is then where it writes)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["TITO_PEAK_FILE"] = str(out.parent / f"{out.name}.peak")
    started = time.monotonic()
    where = [] if default_out else ["--out", str(out)]
    done = subprocess.run([sys.executable, "-c", PEAK, "grade", str(folder), *where, *flags], cwd=REPO, env=env,
                          capture_output=True, timeout=600, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    run = Run(done.returncode, done.stdout.decode("utf-8", "surrogateescape"),
              done.stderr.decode("utf-8", "surrogateescape"))
    return Graded(run, int(Path(env["TITO_PEAK_FILE"]).read_text()), seconds, out)


# ---------------------------------------------------------------------------------------------------
# The class: honest work, then every attack on the reader

# memory: each is a 01_tensor.ipynb (or a zip) that used to cost the parent hundreds of megabytes or more
MEMORY = {
    "deep_nesting": "not a readable Jupyter notebook",
    "many_tiny_values": "not a readable Jupyter notebook",
    "many_cells": "not a readable Jupyter notebook",
    "huge_cell_exported_by_a_directive_without_a_space": "more than the grader compiles",
    "zip_with_overlapping_members": "not a readable Jupyter notebook",
}
AT_THE_BOUNDS = "full_work_at_every_bound"  # full marks, in a notebook as costly as the bounds allow
# links at every level, to the instructor's files and to honest work
LINKS = {
    "link_as_the_student_folder": "is a symbolic link",
    "link_as_the_student_notebook": "is a symbolic link",
    "link_to_the_course_key": "is a symbolic link",
    "link_to_the_solutions": "is a symbolic link",
    "link_to_a_folder_of_honest_work": "is a symbolic link",
    "zip_member_that_is_a_link": "is a symbolic link",
}
# ids a spreadsheet would run as formulas, or that would break a Markdown report; their notebook is damaged
FORMULAS = ['=HYPERLINK("evil.example","x")', "+1", "@SUM(A1)", "-2+3", "\tTAB", "\rCR"]
MARKDOWN = ["# [click](evil.example) *b* <img src=x> |", "`tick` \\[x\\]", "a\n# injected", "    indented", "1. x"]
NAMES = ["submitted", "looks_like_a_course"]  # honest full work under names that used to mean "a course"


@dataclass
class Runs:
    base: Path
    honest: Graded
    alone: dict[str, Graded]  # each memory attack graded alone, and the notebook at every bound
    whole: Graded  # the whole class: honest work and every attack together
    folder: Path
    outside: Path  # a file an output file was a link to


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    base = tmp_path_factory.mktemp("reader")
    honest = base / "honest"
    submission(honest, "honest_full", filled=True)
    submission(honest, "honest_empty", filled=False)

    attacks = base / "attacks"
    for name, data in (("deep_nesting", deep_nesting()), ("many_tiny_values", many_tiny_values()),
                       ("many_cells", many_cells()),
                       ("huge_cell_exported_by_a_directive_without_a_space",
                        with_cell("#|export\n" + literal_code(NEAR_THE_CAP - 200_000)))):
        write(attacks / name / name / f"{STAGE}.ipynb", data)
    hostile_json = notebook_bytes(metadata=b'{"x": [' + repeated(b"[],", NEAR_THE_CAP - (1 << 20), b"[]") + b"]}")
    names = [f"{name}.ipynb" for name in STAGE_NAMES if name != STAGE] + [f"extra_{n:02d}.ipynb" for n in range(6)]
    (attacks / "zip_with_overlapping_members").mkdir(parents=True)
    overlapping_zip(attacks / "zip_with_overlapping_members" / "zip_with_overlapping_members.zip",
                    [*names, f"{STAGE}.ipynb"], hostile_json)
    # accepted: full work, an exported cell just under the export cap, and 4-byte characters up to the byte cap
    path = submission(base / "scratch", AT_THE_BOUNDS, filled=True)
    bounds = nbformat.read(path, as_version=4)
    honest_code = 20_000  # 01's own exported code is some 16,000 characters
    bounds.cells.append(nbformat.v4.new_code_cell("#| export\n" + literal_code(grading.MAX_EXPORTED_CHARACTERS -
                                                                               honest_code), id="bound-code"))
    line = "\U0001F600" + "a" * 100 + "\n"
    left = NEAR_THE_CAP - len(nbformat.writes(bounds).encode()) - (256 << 10)
    bounds.cells.append(nbformat.v4.new_markdown_cell(line * (left // (len(line) + 8)), id="bound-text"))
    data = json.dumps(bounds, ensure_ascii=False).encode()
    assert json_problem(data) is None and len(data) < submissions.MAX_NOTEBOOK_BYTES
    write(attacks / AT_THE_BOUNDS / AT_THE_BOUNDS / f"{STAGE}.ipynb", data)

    # the whole class: the honest students, every attack, links, names
    folder = base / "class"
    shutil.copytree(honest, folder)
    for kind in (*MEMORY, AT_THE_BOUNDS):
        for entry in (attacks / kind).iterdir():
            if entry.is_dir():
                shutil.copytree(entry, folder / entry.name)
            else:
                shutil.copy2(entry, folder / entry.name)
    out = base / "class-out"
    elsewhere = base / "elsewhere"
    shutil.copytree(honest / "honest_full", elsewhere / "honest_full")
    (folder / "link_as_the_student_folder").symlink_to(elsewhere / "honest_full")
    (folder / "link_as_the_student_notebook.ipynb").symlink_to(elsewhere / "honest_full" / f"{STAGE}.ipynb")
    for student, target in (("link_to_the_course_key", out / ".tito-course-key"),
                            ("link_to_the_solutions", REPO / "solutions" / STAGE / f"{STAGE}.py")):
        (folder / student).mkdir()
        (folder / student / f"{STAGE}.ipynb").symlink_to(target)
    (folder / "link_to_a_folder_of_honest_work").mkdir()
    (folder / "link_to_a_folder_of_honest_work" / "work").symlink_to(elsewhere / "honest_full")
    zip_with_link_member(folder / "zip_member_that_is_a_link.zip", f"../../elsewhere/honest_full/{STAGE}.ipynb")
    for student in FORMULAS + MARKDOWN:
        write(folder / student / f"{STAGE}.ipynb", b"not a notebook")
    shutil.copytree(honest / "honest_full", folder / "submitted")  # a plain folder: `submitted` is a student
    course_like = folder / "looks_like_a_course"
    write(course_like / "nbgrader_config.py", b"c = get_config()\n")
    (course_like / "release" / STAGE).mkdir(parents=True)
    shutil.copytree(honest / "honest_full", course_like / "submitted" / "bob" / STAGE)

    # an output folder someone left open: every mode too wide, a file that is a link to one outside
    (out / "feedback").mkdir(parents=True)
    (out / ".tito-course-key").write_text("7\n")  # the key --seed 7 gives, so seeds match the other runs
    (out / "grades.csv").write_text("old\n")
    (out / "feedback" / "stale.md").write_text("old\n")
    outside = base / "outside.md"
    outside.write_text("untouched\n")
    (out / "summary.md").symlink_to(outside)
    for path in (out, out / "feedback"):
        path.chmod(0o777)
    for path in (out / "grades.csv", out / "feedback" / "stale.md", out / ".tito-course-key"):
        path.chmod(0o666)

    started = time.monotonic()
    graded = Runs(base, grade(honest, base / "honest-out", *FLAGS, "--seed", "7"), {},
                  grade(folder, out, *FLAGS), folder, outside)
    for kind in (*MEMORY, AT_THE_BOUNDS):
        graded.alone[kind] = grade(attacks / kind, base / f"{kind}-out", *FLAGS, "--seed", "7")
    report = [f"honest class: peak {graded.honest.peak >> 20} MiB in {graded.honest.seconds:.1f} s",
              f"whole class ({len(os.listdir(folder))} students): peak {graded.whole.peak >> 20} MiB "
              f"in {graded.whole.seconds:.1f} s"]
    report += [f"{kind} alone: peak {g.peak >> 20} MiB in {g.seconds:.1f} s" for kind, g in graded.alone.items()]
    print("\n".join(report) + f"\n(all runs: {time.monotonic() - started:.0f} s)")
    (base / "peaks.txt").write_text("\n".join(report) + "\n")
    return graded


# ---------------------------------------------------------------------------------------------------
# Invariant 3: the trusted process's cost per submission is bounded

@pytest.mark.slow
@pytest.mark.parametrize("kind", [*MEMORY, AT_THE_BOUNDS])
def test_one_submission_costs_the_trusted_process_at_most_256_mb_more_than_an_honest_class(runs, kind):
    graded = runs.alone[kind]
    assert graded.run.code == 0, graded.run.stderr[-2000:]
    assert graded.peak <= runs.honest.peak + BOUND, \
        f"{kind}: {graded.peak >> 20} MiB against {runs.honest.peak >> 20} MiB for an honest class"
    assert graded.seconds < runs.honest.seconds + 60


@pytest.mark.slow
@pytest.mark.parametrize("kind", MEMORY)
def test_a_submission_beyond_the_bounds_is_a_graded_0_with_a_note_naming_its_notebook(runs, kind):
    for graded in (runs.alone[kind], runs.whole):
        result = graded.results()[kind]
        assert result["score"] == 0 and not result["fault"]
        notes = graded.notes(kind)
        assert MEMORY[kind] in notes and STAGE in notes, notes


@pytest.mark.slow
def test_a_notebook_within_every_bound_is_graded_like_the_honest_one(runs):
    honest = runs.honest.results()["honest_full"]
    for graded in (runs.alone[AT_THE_BOUNDS], runs.whole):
        result = graded.results()[AT_THE_BOUNDS]
        assert [(t["id"], t["passed"]) for t in result["tests"]] == [(t["id"], t["passed"]) for t in honest["tests"]]


@pytest.mark.slow
def test_overlapping_zip_members_are_read_within_the_submissions_byte_bound(runs):
    notes = runs.whole.notes("zip_with_overlapping_members")
    assert f"over {submissions.MAX_SUBMISSION_BYTES >> 20} MiB in all" in notes, notes


@pytest.mark.slow
def test_honest_grades_do_not_move_beside_every_attack_and_the_run_exits_0(runs):
    whole, honest = runs.whole, runs.honest
    assert whole.run.code == 0 and "Traceback" not in whole.run.stderr, whole.run.stderr[-3000:]
    assert whole.peak <= honest.peak + BOUND
    for student, alone in honest.results().items():
        assert [(t["id"], t["passed"]) for t in whole.results()[student]["tests"]] == \
            [(t["id"], t["passed"]) for t in alone["tests"]], student
    students = {entry.removesuffix(".zip").removesuffix(".ipynb") for entry in os.listdir(runs.folder)}
    assert set(whole.results()) == students
    assert all(row[-1] == "graded" for row in whole.rows())


# ---------------------------------------------------------------------------------------------------
# Invariant 4: links at every level are never followed; names change nothing

@pytest.mark.slow
@pytest.mark.parametrize("student", LINKS)
def test_a_link_at_any_level_is_a_graded_0_with_a_note(runs, student):
    result = runs.whole.results()[student]
    assert result["score"] == 0 and not result["fault"]
    assert LINKS[student] in runs.whole.notes(student)


@pytest.mark.slow
def test_a_student_named_submitted_or_a_course_like_folder_changes_nothing(runs):
    """The class is a plain folder: `submitted` is a student like any other, graded from its own notebook, and
    the key is the output folder's, as for any plain folder."""
    whole = runs.whole
    full = runs.honest.results()["honest_full"]["score"]
    assert {student: whole.results()[student]["score"] for student in NAMES} == {student: full for student in NAMES}
    assert json.loads((whole.out / "results.json").read_text())["seed_from"] == str(whole.out / ".tito-course-key")
    assert not (runs.folder / ".tito-course-key").exists()


@pytest.mark.slow
def test_ids_are_written_to_the_csv_so_that_no_spreadsheet_runs_them(runs):
    cells = [row[0] for row in runs.whole.rows()]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    for student in FORMULAS:
        assert "'" + student in cells
    assert set(FORMULAS + MARKDOWN) <= set(runs.whole.results())  # results.json keeps every id exactly


def markdown_title(text: str) -> str:
    """The text of the first heading of a Markdown document as CommonMark renders it, asserting that it is
    the first block and holds plain text only (no link, image, code, emphasis or HTML)."""
    tokens = MarkdownIt("commonmark").parse(text)
    assert tokens[0].type == "heading_open" and tokens[0].tag == "h1", tokens[:3]
    children = tokens[1].children or []
    assert {child.type for child in children} <= {"text"}, [child.type for child in children]
    return "".join(child.content for child in children)


@pytest.mark.slow
@pytest.mark.parametrize("student", MARKDOWN + FORMULAS)
def test_an_id_is_the_plain_title_of_its_feedback(runs, student):
    text = (runs.whole.out / "feedback" / submissions.feedback_filename(student)).read_text(encoding="utf-8")
    assert markdown_title(text) == f"Feedback for {printable(student)}"
    assert text.split("\n")[1] == ""  # the title is one line


# ---------------------------------------------------------------------------------------------------
# H1: the reports are the instructor's alone

def assert_private(out: Path) -> None:
    assert stat.S_IMODE(out.lstat().st_mode) == 0o700
    for folder, folders, files in os.walk(out):
        for name in folders:
            assert stat.S_IMODE(os.lstat(os.path.join(folder, name)).st_mode) == 0o700, name
        for name in files:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o600, name


@pytest.mark.slow
def test_an_output_folder_left_open_becomes_the_instructors_and_no_link_in_it_is_written_through(runs):
    out = runs.whole.out
    assert_private(out)
    assert (out / "summary.md").read_text().startswith("# Class summary")
    assert runs.outside.read_text() == "untouched\n"
    assert (out / "feedback" / "honest_full.md").is_file()


# ---------------------------------------------------------------------------------------------------
# M6: a damaged gradebook is one sentence, after the reports

@pytest.mark.slow
def test_a_damaged_gradebook_is_one_sentence_after_the_reports_which_are_the_instructors(tmp_path):
    course = tmp_path / "course"
    write(course / "nbgrader_config.py", b"c = get_config()\n")
    (course / "release" / STAGE).mkdir(parents=True)
    write(course / "submitted" / "alice" / STAGE / "timestamp.txt", b"2026-12-01")  # nothing to grade: quick
    damaged = os.urandom(4096)
    write(course / "gradebook.db", damaged)
    out = tmp_path / "course-grades"  # the default output folder
    graded = grade(course, out, "--stage", "01", "--examples", "3", "--seed", "7", default_out=True)
    assert graded.run.code == 1
    assert "Traceback" not in graded.run.stderr
    errors = [line for line in graded.run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, graded.run.stderr
    assert f"{course / 'gradebook.db'} could not be read" in errors[0] and "reports were written" in errors[0]
    assert (out / "grades.csv").read_text().startswith("student,stage")
    assert (course / "gradebook.db").read_bytes() == damaged
    assert_private(out)


# ---------------------------------------------------------------------------------------------------
# The scan that bounds parsing, in the trusted process

@pytest.mark.parametrize("data", [deep_nesting(), many_tiny_values(), many_cells()], ids=["deep", "values", "cells"])
def test_the_scan_refuses_what_json_would_build_too_much_of_and_is_fast(data):
    started = time.process_time()
    assert json_problem(data) is not None
    assert time.process_time() - started < 10


def test_every_notebook_of_the_course_and_a_notebook_of_10_000_cells_are_within_the_bounds(tmp_path):
    for name in STAGE_NAMES:
        assert json_problem((REPO / "modules" / name / f"{name}.ipynb").read_bytes()) is None, name
    path = submission(tmp_path, "ten_thousand_cells", filled=False)
    notebook_ = nbformat.read(path, as_version=4)
    notebook_.cells += [nbformat.v4.new_code_cell(f"#| export\n_filler_{n} = {n}", id=f"f{n}") for n in range(10_000)]
    assert json_problem(nbformat.writes(notebook_).encode()) is None


LINE_BREAKS = set("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")  # what str.splitlines splits on


def _size_and_depth(value) -> tuple[int, int]:
    """(values, keys and line breaks in strings, nesting depth) of a JSON value: what json.loads builds, and
    what splitting its strings into lines could add."""
    if isinstance(value, str):
        return 1 + sum(c in LINE_BREAKS for c in value), 0
    if isinstance(value, list):
        parts = [_size_and_depth(item) for item in value]
    elif isinstance(value, dict):
        parts = [_size_and_depth(item) for item in value.values()] + [_size_and_depth(key) for key in value]
    else:
        return 1, 0
    return 1 + sum(size for size, _ in parts), 1 + max((depth for _, depth in parts), default=0)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=40)


@settings(max_examples=150, deadline=None)
@given(value=JSON, ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_the_scan_never_counts_fewer_values_or_levels_than_json_builds(value, ascii_only, indent):
    data = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
    size, depth = _size_and_depth(value)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submissions, "MAX_JSON_VALUES", size - 1)
        assert json_problem(data) is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submissions, "MAX_JSON_DEPTH", depth - 1)
        assert json_problem(data) is not None


@pytest.mark.parametrize("directives", ["#|export", "#|  export", "#| default_exp core.tensor\n#| export"],
                         ids=["no space", "two spaces", "under default_exp"])
def test_the_export_cap_counts_every_cell_export_takes(directives):
    """package_files counts the code of the cells export takes by its own reading of their directives; a
    count of cells starting "#| export" let these through to be compiled."""
    root = find_root()
    code = "".join(f"_v{n} = {n}\n" for n in range(grading.MAX_EXPORTED_CHARACTERS // 10))
    data = with_cell(f"{directives}\n{code}", filled=True)
    files, notes = grading.package_files(root, find_stage(root, "01"), {STAGE: data}, "cumulative")
    assert files == {}
    assert any("more than the grader compiles" in note for note in notes), notes


# ---------------------------------------------------------------------------------------------------
# Links, unit by unit

def test_a_folder_swapped_for_a_link_after_it_was_listed_is_not_followed(tmp_path, monkeypatch):
    """The notebooks are listed, then read: a folder on the way replaced by a link in between leads nowhere."""
    write(tmp_path / "secret" / STAGE / f"{STAGE}.ipynb", notebook(STAGE))
    where = tmp_path / "class"
    write(where / "alice" / "work" / STAGE / f"{STAGE}.ipynb", notebook())
    choose = submissions._choose

    def swapped(candidates, stages, notes):
        shutil.rmtree(where / "alice" / "work")
        (where / "alice" / "work").symlink_to(tmp_path / "secret")
        return choose(candidates, stages, notes)

    monkeypatch.setattr(submissions, "_choose", swapped)
    found = find_within(5, where)
    assert found["alice"].notebooks == {}
    assert "alice/work/01_tensor/01_tensor.ipynb is reached through a symbolic link" in notes_of(found, "alice")


def test_a_link_as_a_student_entry_notebook_folder_or_zip_member_is_never_followed(tmp_path):
    secret = write(tmp_path / "secret" / f"{STAGE}.ipynb", notebook(STAGE))
    where = tmp_path / "class"
    where.mkdir()
    (where / "alice").symlink_to(secret.parent)
    (where / "bob.ipynb").symlink_to(secret)
    (where / "carol.zip").symlink_to(make_zip(tmp_path / "carol.zip", {f"{STAGE}.ipynb": notebook()}))
    write(where / "dave" / "README.txt", b"")
    (where / "dave" / "work").symlink_to(secret.parent)
    zip_with_link_member(where / "erin.zip", str(secret))
    found = find_within(5, where)
    assert list(found) == ["alice", "bob", "carol", "dave", "erin"]
    assert all(s.notebooks == {} for s in found.values())
    for student, shown in (("alice", "alice"), ("bob", "bob.ipynb"), ("carol", "carol.zip"), ("dave", "dave/work"),
                           ("erin", f"erin.zip/{STAGE}.ipynb")):
        assert f"{shown} is a symbolic link, which is never followed" in notes_of(found, student)


def test_a_folder_of_links_gives_a_bounded_number_of_notes(tmp_path):
    write(tmp_path / "alice" / f"{STAGE}.ipynb", notebook())
    for n in range(500):
        (tmp_path / "alice" / f"link{n}.ipynb").symlink_to("/etc/passwd")
    found = find_within(10, tmp_path)
    assert found["alice"].notebooks == {STAGE: notebook()}
    assert len(found["alice"].notes) == submissions.MAX_NOTES
    assert found["alice"].notes[-1].startswith("... and 451 more problems")


# ---------------------------------------------------------------------------------------------------
# Names, unit by unit

def test_the_key_of_a_plain_folder_is_the_output_folders_whatever_its_students_are_called(tmp_path):
    where = tmp_path / "class"
    write(where / "submitted" / f"{STAGE}.ipynb", notebook())
    key, source = grading.course_key(None, tmp_path / "out", None)
    assert source == str(tmp_path / "out" / ".tito-course-key") and not (where / ".tito-course-key").exists()
    assert stat.S_IMODE((tmp_path / "out" / ".tito-course-key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o700
    assert grading.course_key(None, tmp_path / "out", None)[0] == key


def test_a_course_key_left_readable_becomes_the_instructors(tmp_path):
    course = tmp_path / "course"
    write(course / ".tito-course-key", b"0123456789abcdef\n").chmod(0o644)
    assert grading.course_key(course, tmp_path / "out", None) == ("0123456789abcdef", str(course / ".tito-course-key"))
    assert stat.S_IMODE((course / ".tito-course-key").stat().st_mode) == 0o600
    assert not (tmp_path / "out").exists()  # a course keeps its key: nothing is written for a plain folder


def test_a_student_folder_named_submitted_is_a_student(tmp_path):
    write(tmp_path / "submitted" / f"{STAGE}.ipynb", notebook())
    write(tmp_path / "alice" / f"{STAGE}.ipynb", notebook())
    assert list(find_within(5, tmp_path)) == ["alice", "submitted"]


@pytest.mark.parametrize("student", MARKDOWN + FORMULAS + ["honest_full", "o'brien", "🦊 élève ñ"])
def test_an_id_is_plain_text_in_its_feedback_title_and_in_the_summary(tmp_path, student):
    grades, plans = one_fault(student)
    grading.write_reports(tmp_path / "out", grades, plans, "none", "--seed")
    feedback = (tmp_path / "out" / "feedback" / submissions.feedback_filename(student)).read_text()
    assert markdown_title(feedback) == f"Feedback for {printable(student)}"
    summary = MarkdownIt("commonmark").parse((tmp_path / "out" / "summary.md").read_text())
    items = [token for token in summary if token.type == "inline" and "grader fault" in token.content]
    assert len(items) == 1 and {child.type for child in items[0].children or []} <= {"text"}
    text = "".join(child.content for child in items[0].children or [])
    assert text == f"{printable(student)}, stage 01 (cumulative): grader fault: RuntimeError: broken [link](x) *y*"
    with open(tmp_path / "out" / "grades.csv", encoding="utf-8", newline="") as stream:
        cell = list(csv.reader(stream))[1][0]
    assert cell == ("'" + student if student[:1] in "=+-@\t\r" else student)


# ---------------------------------------------------------------------------------------------------
# The reports and the gradebook, unit by unit

def one_fault(student: str = "alice") -> tuple[list[grading.Grade], dict]:
    """A grade (a grader fault, so that the summary lists the id) and its plan, without running anything."""
    check = SimpleNamespace(name="a_check", task="01.1", points=1)
    plan = SimpleNamespace(stage=SimpleNamespace(number="01"), checks=[check], max_score=1, seed=7)
    return [grading.fault_grade(plan, student, "cumulative", RuntimeError("broken [link](x) *y*"))], {"01": plan}


def test_reports_replace_what_was_there_and_never_write_through_a_link(tmp_path):
    out = tmp_path / "out"
    (out / "feedback").mkdir(parents=True)
    outside = tmp_path / "outside.csv"
    outside.write_text("untouched\n")
    outside.chmod(0o644)
    (out / "grades.csv").symlink_to(outside)
    (out / "feedback" / "alice.md").write_text("old\n")
    for path, mode in ((out, 0o777), (out / "feedback", 0o777), (out / "feedback" / "alice.md", 0o666)):
        path.chmod(mode)
    grades, plans = one_fault()
    grading.write_reports(out, grades, plans, "none", "--seed")
    assert outside.read_text() == "untouched\n" and stat.S_IMODE(outside.stat().st_mode) == 0o644
    assert (out / "grades.csv").read_text().startswith("student,stage")
    assert (out / "feedback" / "alice.md").read_text().startswith("# Feedback for alice")
    assert_private(out)


def test_a_damaged_gradebook_is_a_tito_error_naming_it(tmp_path):
    path = write(tmp_path / "gradebook.db", os.urandom(4096))
    with pytest.raises(TitoError, match="gradebook.db could not be read as nbgrader's gradebook") as error:
        grading.compare_gradebook(path, [], {})
    assert error.value.code == 1
