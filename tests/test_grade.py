"""`tito grade` on a real class: honest and adversarial submissions graded together in real sandboxes.

Every adversary scores no more than the honest work it contains, and every honest grade is the same as
when it is graded alone."""

from __future__ import annotations

import csv
import json
import shutil
import socket
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest

from conftest import REPO, tito
from student import edit_cell, fill

STAGE = "01_tensor"
SOURCE = REPO / "solutions" / STAGE / f"{STAGE}.py"
NOTEBOOK = REPO / "modules" / STAGE / f"{STAGE}.ipynb"


def _first_export_cell(path: Path) -> int:
    cells = nbformat.read(path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith("#| export"))


def _kernel_cell(path: Path, name: str) -> int:
    cells = nbformat.read(path, as_version=4).cells
    return next(i for i, c in enumerate(cells) if c.cell_type == "code" and f"def {name}(" in c.source)


def submission(folder: Path, student: str, *, filled: bool, at_import: str = "", kernel_edit=None) -> Path:
    """A student's folder holding their 01_tensor notebook, optionally filled, with code added to the
    first exported cell (runs when the package is imported) or a kernel cell rewritten."""
    path = folder / student / f"{STAGE}.ipynb"
    path.parent.mkdir(parents=True)
    shutil.copy2(NOTEBOOK, path)
    if filled:
        fill(path, SOURCE)
    if at_import:
        edit_cell(path, _first_export_cell(path), lambda text: text + "\n" + at_import)
    if kernel_edit:
        name, edit = kernel_edit
        edit_cell(path, _kernel_cell(path, name), edit)
    return path


def grades(out: Path) -> dict[str, float]:
    with open(out / "grades.csv", encoding="utf-8") as stream:
        return {row["student"]: float(row["score"]) for row in csv.DictReader(stream)}


@pytest.fixture(scope="module")
def listener():
    """A TCP server on loopback that records whether anyone connected."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    connections = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connections.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], connections
    stop.set()
    thread.join()
    server.close()


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, listener):
    port, connections = listener
    folder = tmp_path_factory.mktemp("class") / "submitted"
    out = folder.parent / "grades"
    out.mkdir()
    (out / "grades.csv").write_text("sentinel\n")
    secret = str(REPO / "solutions" / STAGE / f"{STAGE}.py")
    submission(folder, "honest_full", filled=True)
    submission(folder, "honest_empty", filled=False)
    submission(folder, "patches_the_checks", filled=False, at_import=(
        "import sys\n"
        "try:\n    import checklib\n    checklib.assert_close = lambda *a, **k: None\n"
        "    checklib.CheckFailed = Exception\nexcept Exception:\n    pass\n"
        "try:\n    import pytest\n    pytest.fail = lambda *a, **k: None\nexcept Exception:\n    pass\n"))
    submission(folder, "exits_after_printing_passed", filled=False,
               at_import="import os\nprint('45 passed, 0 failed')\nos._exit(0)\n")
    submission(folder, "reads_the_solutions", filled=False, at_import=(
        "import glob\n"
        f"for _path in [{secret!r}] + glob.glob('/**/solutions/01_tensor/01_tensor.py', recursive=True)[:3]:\n"
        "    try:\n        exec(open(_path).read(), globals())\n        break\n    except Exception:\n"
        "        pass\n"))
    submission(folder, "allocates_8_gib", filled=True, kernel_edit=("sum_kernel", lambda text: text.replace(
        '"""\n', '"""\n    _hog = bytearray(8 << 30)\n', 1)))
    submission(folder, "loops_forever", filled=True, at_import="while True:\n    pass\n")
    submission(folder, "forks_repeatedly", filled=True, at_import=(
        "import os\nfor _ in range(100000):\n    try:\n        os.fork()\n    except OSError:\n        break\n"))
    submission(folder, "writes_the_gradebook", filled=False, at_import=(
        f"for _path in [{str(out / 'grades.csv')!r}, {str(folder.parent / 'gradebook.db')!r}]:\n"
        "    try:\n        open(_path, 'w').write('student,stage,mode,score,max_score\\nwrites_the_gradebook,01,"
        "cumulative,68,68\\n')\n    except Exception:\n        pass\n"))
    submission(folder, "opens_a_connection", filled=True, at_import=(
        f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2).send(b'x')\n"
        "except OSError:\n    pass\n"))
    submission(folder, "prints_100_mb", filled=True, at_import=(
        "import sys\n_line = 'x' * 1023 + '\\n'\nfor _ in range(100 * 1024):\n    sys.stdout.write(_line)\n"))
    submission(folder, "sleeps_past_the_timeout", filled=True, at_import="import time\ntime.sleep(3600)\n")
    submission(folder, "hard_codes_public_answers", filled=True, kernel_edit=("sum_kernel", lambda text: text.replace(
        '"""\n', '"""\n    return np.asarray(6.0, dtype=np.float32)\n', 1)))
    run = tito(REPO, "grade", str(folder), "--out", str(out), "--stage", "01", "-j", "2", "--timeout", "30",
               "--seed", "7", "--examples", "5")
    assert run.code == 0, run.stderr
    return out, run, connections


def test_honest_work_gets_its_grade_next_to_adversaries(graded_class):
    out, _, _ = graded_class
    scores = grades(out)
    maximum = json.loads((out / "results.json").read_text())["grades"][0]["max_score"]
    assert scores["honest_full"] == maximum
    assert scores["honest_empty"] == 0


@pytest.mark.parametrize("student", ["patches_the_checks", "exits_after_printing_passed", "reads_the_solutions",
                                     "writes_the_gradebook", "loops_forever", "sleeps_past_the_timeout"])
def test_adversary_without_honest_work_scores_zero(graded_class, student):
    out, _, _ = graded_class
    assert grades(out)[student] == 0


@pytest.mark.parametrize("student", ["allocates_8_gib", "hard_codes_public_answers"])
def test_adversary_loses_the_points_of_what_it_broke(graded_class, student):
    out, _, _ = graded_class
    scores = grades(out)
    assert 0 < scores[student] < scores["honest_full"]
    result = json.loads((out / "results.json").read_text())
    lost = [t for g in result["grades"] if g["student"] == student for t in g["tests"] if not t["passed"]]
    assert {t["task"] for t in lost} == {"01.8"}, "only the sum kernel was broken"


@pytest.mark.parametrize("student", ["forks_repeatedly", "opens_a_connection", "prints_100_mb"])
def test_adversary_with_full_honest_work_scores_no_more_than_it(graded_class, student):
    out, _, _ = graded_class
    scores = grades(out)
    assert scores[student] <= scores["honest_full"]


def test_no_connection_left_the_sandbox(graded_class):
    _, _, connections = graded_class
    assert connections == []


def test_the_csv_is_the_graders_and_the_run_names_its_protection(graded_class):
    out, run, _ = graded_class
    rows = list(csv.DictReader(open(out / "grades.csv", encoding="utf-8")))
    assert len(rows) == 13 and {row["mode"] for row in rows} == {"cumulative"}
    assert "protection:" in run.stderr
    assert json.loads((out / "results.json").read_text())["protection"] == "bwrap"


def test_feedback_explains_lost_points_without_expected_values_or_test_code(graded_class):
    out, _, _ = graded_class
    text = (out / "feedback" / "hard_codes_public_answers.md").read_text()
    assert "sum_over_axes" in text and "wrong" in text
    assert "expected" not in text.lower().replace("the expected", "")
    suite = (REPO / "autograder" / f"test_{STAGE}.py").read_text()
    for line in suite.splitlines():
        if len(line.strip()) > 30 and not line.strip().startswith(("#", '"""')):
            assert line.strip() not in text
    summary = (out / "summary.md").read_text()
    assert "sum_over_axes" in summary


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
