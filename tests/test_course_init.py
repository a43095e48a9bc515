"""`tito course init` in process: the layout and modes a shared server needs, the student's configuration,
source notebooks whose released form fits a fetched notebook, what it refuses; and what autograde's kernel
box and judge keep from other accounts (no nbgrader run: see test_course.py)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import nbformat
import pytest

from tito.commands.course import KERNEL_NAME, source_notebook, write_course
from tito.errors import TitoError
from tito.nbgrader_judge import LEARNER_ONLY, task_of
from tito.project import stages

from conftest import REPO


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    folder = tmp_path_factory.mktemp("init") / "course"
    write_course(REPO, folder)
    return folder


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_modes_let_students_reach_the_exchange_and_nothing_else(course):
    assert mode(course) == 0o711
    assert mode(course / "exchange") == 0o1777
    for name in ("source", "release", "submitted", "autograded", "feedback"):
        assert mode(course / name) == 0o700, name
    assert mode(course / "nbgrader_config.py") == 0o600
    assert mode(course / "gradebook.db") == 0o600
    assert mode(course / "student_nbgrader_config.py") == 0o644
    assert mode(course / "datasets") == 0o755
    for path in (course / "datasets").iterdir():
        assert mode(path) == 0o644, path
    # the course's folders in the exchange are the instructor's, made before any student could make them;
    # inbound is sticky, so no student renames another's submission away
    for name, wanted in (("tinytorch", 0o755), ("tinytorch/outbound", 0o755), ("tinytorch/inbound", 0o3733),
                         ("tinytorch/feedback", 0o711)):
        path = course / "exchange" / name
        assert mode(path) == wanted and path.stat().st_uid == os.geteuid(), name


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to make a folder as another account")
def test_init_refuses_a_course_folder_in_the_exchange_that_another_account_made(tmp_path, capsys):
    """A student who makes exchange/tinytorch/inbound first owns it: release fails for everyone, and the
    student reads and moves the others' submissions. init names it, with what to do, and grades nothing."""
    course = tmp_path / "course"
    write_course(REPO, course)
    planted = course / "exchange" / "tinytorch"
    shutil.rmtree(planted)
    (planted / "inbound").mkdir(parents=True)  # as the student would have made them: theirs
    for path in (planted, planted / "inbound"):
        os.chown(path, NOBODY, NOBODY)
    code, said = init_command(capsys, course)
    assert code == 2 and f"{planted} is not a folder of yours" in said and "Traceback" not in said
    assert planted.stat().st_uid == NOBODY


def test_the_course_holds_a_checked_copy_of_the_datasets(course):
    from tito import datasets

    copy = course / "datasets"
    assert sorted(path.name for path in copy.iterdir()) == sorted([*datasets.CHECKSUMS, "README.md"])
    for name in [*datasets.CHECKSUMS, "README.md"]:
        assert (copy / name).read_bytes() == (REPO / "datasets" / name).read_bytes(), name


def test_init_again_restores_a_damaged_dataset_of_the_course(tmp_path):
    course = tmp_path / "course"
    write_course(REPO, course)
    damaged = course / "datasets" / "digits.csv.gz"
    damaged.write_bytes(b"not the digits")
    assert write_course(REPO, course) == [str(damaged)]
    assert damaged.read_bytes() == (REPO / "datasets" / "digits.csv.gz").read_bytes() and mode(damaged) == 0o644


def test_the_student_configuration_names_the_datasets_for_the_first_cell(course, tmp_path, monkeypatch):
    from tito.fetched import course_datasets

    text = (course / "student_nbgrader_config.py").read_text()
    assert f"c.TinyTorch.datasets = {str(course / 'datasets')!r}" in text
    config = tmp_path / "jupyter"
    config.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config))
    shutil.copy2(course / "student_nbgrader_config.py", config / "nbgrader_config.py")
    assert course_datasets() == (str(course / "datasets"), [])
    (config / "nbgrader_config.py").write_text("c = get_config(\n")  # a typo in the student's own copy
    found, notes = course_datasets()
    assert found is None and len(notes) == 1 and "nbgrader_config.py could not be read (SyntaxError" in notes[0]


def test_the_student_configuration_names_the_exchange(course):
    text = (course / "student_nbgrader_config.py").read_text()
    assert f"c.Exchange.root = {str(course / 'exchange')!r}" in text
    assert 'c.CourseDirectory.course_id = "tinytorch"' in text
    compile(text, "student_nbgrader_config.py", "exec")


def test_the_instructor_configuration_puts_the_judge_after_execute(course):
    text = (course / "nbgrader_config.py").read_text()
    order = re.search(r"autograde_preprocessors = \[([^\]]*)\]", text)[1].replace("\n", " ")
    names = [name.strip() for name in order.split(",")]
    assert names.index("JudgeScores") == names.index("ExecuteForFeedback") + 1
    assert names.index("JudgeScores") < names.index("SaveAutoGrades")
    assert f'kernel_name = "{KERNEL_NAME}"' in text and 'transport = "ipc"' in text


def test_init_again_writes_nothing_and_keeps_an_edited_configuration(course):
    config = course / "nbgrader_config.py"
    config.write_text(config.read_text() + "# the instructor's own line\n")
    assert write_course(REPO, course) == []
    assert config.read_text().endswith("# the instructor's own line\n")


@pytest.mark.parametrize("stage", stages(REPO), ids=lambda stage: stage.number)
def test_source_notebooks_fit_the_course(stage):
    notebook = source_notebook(stage)
    markdown = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert "tito test" not in markdown and "tito export" not in markdown and "<!--" not in markdown
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    mine = [cell for cell in code if "use_my_modules()" in cell.source]
    assert len(mine) == (stage.number != "01")
    if mine:
        assert code.index(mine[0]) == 0, "the student's own earlier modules come first"
    for cell in code:
        if "### BEGIN SOLUTION" in cell.source:  # each region is named above it, where nbgrader's stub keeps it
            lines = cell.source.splitlines()
            for index, line in enumerate(lines):
                if "### BEGIN SOLUTION" in line:
                    task = line.split()[3]
                    assert lines[index - 1].strip().startswith(f"# Task {task} ("), lines[index - 1]
        if task_of(cell) is not None:  # a graded cell holds no test and raises only during autograde
            assert "BEGIN HIDDEN TESTS" not in cell.source
            assert 'os.environ.get("NBGRADER_EXECUTION") == "autograde"' in cell.source
    tagged = [cell for cell in notebook.cells if LEARNER_ONLY in cell.metadata.get("tags", [])]
    if stage.number == "07":
        assert len(tagged) == 2 and any("fit(model" in cell.source for cell in tagged)
    if stage.number == "08":
        assert len(tagged) == 3 and any("samples_per_second" in cell.source for cell in tagged)
    if stage.number == "09":  # the milestone's training and the pictures of learned filters
        assert len(tagged) == 4 and any("DataLoader(TensorDataset" in cell.source for cell in tagged)
    if stage.number == "10":  # the tokenizers compared on the shipped Shakespeare
        assert len(tagged) == 1 and "BPETokenizer.train(train_text" in tagged[0].source
    if stage.number == "11":  # the scatter-add timings, the pictures of positions, the bigram model
        assert len(tagged) == 3 and any("shakespeare" in cell.source for cell in tagged)
    # the shipped files are read only in cells the sandboxed autograde skips
    untagged = [cell.source for cell in code if LEARNER_ONLY not in cell.metadata.get("tags", [])]
    assert not any(word in source for source in untagged for word in ("(train=", "datasets.", "datasets import"))
    nbformat.validate(notebook)


def test_a_notebook_the_judge_cannot_grade_gets_no_score_at_all():
    """A fault of the grader's (here a notebook of no known assignment) raises: nbgrader then keeps nothing of
    that notebook's autograde (not the kernel's forged output, not a 0) and exits non-zero."""
    from tito.nbgrader_judge import JudgeScores

    notebook = source_notebook(stages(REPO)[0])
    for cell in notebook.cells:
        if task_of(cell) is not None:
            cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1000.0"})]
    with pytest.raises(TitoError, match="could not grade 99_nothing of mallory"):
        JudgeScores().preprocess(notebook, {"nbgrader": {"assignment": "99_nothing", "student": "mallory"}})


def test_without_bubblewrap_the_judge_refuses_rather_than_scoring_zero(monkeypatch):
    from tito import sandbox
    from tito.nbgrader_judge import JudgeScores

    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    stage = stages(REPO)[0]
    with pytest.raises(TitoError, match="bubblewrap is missing"):
        JudgeScores().preprocess(source_notebook(stage), {"nbgrader": {"assignment": stage.name, "student": "alice"}})


# ---------------------------------------------------------------------------------------------------
# What autograde's kernel box and the judge's scratch hold is for the box's user alone: a student's
# submissions, the kernel's key, the drawn cases.

def as_user(uid: int, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *command],
                          capture_output=True, text=True, timeout=30)


NOBODY = 65534  # another account of the machine


def test_the_kernel_box_is_unreadable_by_other_accounts(tmp_path):
    """The box folder sandboxed_kernel.make_box builds for a student's autograde of 03: the copies of the
    working folder and of the same student's 01 and 02 are the box user's alone (0700/0600, owned by it
    under root), the folder itself at most crossable by that user; checked as another account too."""
    from tito import sandbox
    from tito.sandboxed_kernel import make_box

    work = tmp_path / "course" / "autograded" / "alice" / "03_activations"
    work.mkdir(parents=True)
    (work / "03_activations.ipynb").write_text("{}")
    (work / "data").mkdir()
    (work / "data" / "table.csv").write_text("1,2\n")
    for earlier in ("01_tensor", "02_autograd"):
        folder = tmp_path / "course" / "submitted" / "alice" / earlier
        folder.mkdir(parents=True)
        (folder / f"{earlier}.ipynb").write_text('{"secret": "alice\'s work"}')
    uid = sandbox.box_uid(100) if os.geteuid() == 0 else os.getuid()
    box = make_box(work, {"transport": "ipc", "ip": "kernel", "key": "the kernel's key"}, uid)
    try:
        inside = sorted(box.rglob("*"))
        assert box / "home" / "01_tensor" / "01_tensor.ipynb" in inside
        assert box / "home" / "03_activations" / "data" / "table.csv" in inside
        assert box / "kernel" / "connection.json" in inside
        assert mode(box) & 0o007 == 0, oct(mode(box))
        for path in inside:
            assert mode(path) & 0o077 == 0, (path, oct(mode(path)))
            assert path.stat().st_uid == uid, path
        if os.geteuid() == 0:  # as root: the box's user crosses the folder, nobody else
            assert mode(box) == 0o710 and box.stat().st_gid == uid
            for path in [box, *inside]:
                assert as_user(NOBODY, "cat" if path.is_file() else "ls", str(path)).returncode != 0, path
            assert as_user(uid, "cat", str(box / "home" / "02_autograd" / "02_autograd.ipynb")).returncode == 0
            assert as_user(uid, "ls", str(box)).returncode != 0  # crossable, not listable
    finally:
        shutil.rmtree(box)


def test_the_judges_scratch_is_unreadable_by_other_accounts():
    from tito import sandbox
    from tito.nbgrader_judge import _scratch

    folder = _scratch()
    if os.geteuid() == 0:
        assert mode(folder) == 0o710 and folder.stat().st_gid == sandbox.box_uid(0)
        (folder / "cases").mkdir(exist_ok=True)
        assert as_user(NOBODY, "ls", str(folder / "cases")).returncode != 0
    else:
        assert mode(folder) == 0o700


# ---------------------------------------------------------------------------------------------------
# Bad input: one sentence, a non-zero exit, nothing changed.

def init_command(capsys, folder) -> tuple[int, str]:
    from tito.main import main

    code = main(["course", "init", str(folder)])
    return code, capsys.readouterr().err


def snapshot(folder):
    return {path: (mode(path), path.stat().st_mtime_ns) for path in [folder, *folder.rglob("*")]}


def test_init_refuses_a_folder_that_holds_something_else(tmp_path, capsys):
    """`tito course init ~` (a typo) must not turn a home into a course, nor change its mode for everyone."""
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "notes.txt").write_text("notes\n")
    home.chmod(0o1777)
    before = snapshot(home)
    code, said = init_command(capsys, home)
    assert code == 2 and "is not a TinyTorch course" in said and "Traceback" not in said
    assert len(said.strip().splitlines()) == 1
    assert snapshot(home) == before


def test_init_takes_an_empty_folder_and_its_own_course_even_without_its_configuration(course, tmp_path):
    from tito.commands.course import check_folder, is_course

    empty = tmp_path / "empty"
    empty.mkdir()
    check_folder(empty)
    assert is_course(course)
    moved = tmp_path / "moved"  # the README: move an old nbgrader_config.py away to get the current one
    moved.mkdir()
    (moved / "source").mkdir()
    (moved / "gradebook.db").touch()
    check_folder(moved)


def test_init_under_a_file_is_one_sentence(tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    code, said = init_command(capsys, tmp_path / "a-file" / "course")
    assert code == 2 and "a-file is a file, so" in said and "Traceback" not in said
    assert not (tmp_path / "a-file").is_dir()


# as root, `tito course init` as a real subprocess under another account: then left out by make test-fast
@(pytest.mark.slow if os.geteuid() == 0 else pytest.mark.usefixtures())
def test_init_in_an_unwritable_place_is_one_sentence(tmp_path, capsys):
    parent = tmp_path / "locked"
    parent.mkdir()
    if os.geteuid() == 0:  # root writes anywhere: try as another account
        if not all(folder.stat().st_mode & stat.S_IXOTH for folder in (REPO, *REPO.parents)):
            pytest.skip(f"another account cannot reach tito in {REPO} (a folder above it is closed to others)")
        parent.chmod(0o755)
        tmp_path.chmod(0o755)
        done = as_user(NOBODY, sys.executable, "-m", "tito", "course", "init", str(parent / "course"))
        code, said = done.returncode, done.stderr
    else:
        parent.chmod(0o555)
        code, said = init_command(capsys, parent / "course")
    assert code == 2 and "could not write" in said and "Permission denied" in said, said
    assert "Traceback" not in said
    assert list(parent.iterdir()) == []


def test_init_names_a_damaged_gradebook_and_changes_nothing(tmp_path, capsys):
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    (course / "gradebook.db").write_bytes(b"\x00garbage" * 100)  # as after an overwritten header
    before = snapshot(course)
    code, said = init_command(capsys, course)
    assert code == 2 and f"{course / 'gradebook.db'} is damaged" in said and "restore it from a backup" in said
    assert "Traceback" not in said
    assert snapshot(course) == before


def test_without_bubblewrap_init_says_autograde_will_refuse(tmp_path, capsys, monkeypatch):
    from tito import sandbox
    from tito.commands.course import init

    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    assert init(tmp_path / "course") == 0
    said = capsys.readouterr().err
    assert "will refuse to grade" in said and "without a sandbox" not in said
    config = (tmp_path / "course" / "nbgrader_config.py").read_text()
    assert "autograde refuses to grade" in config and "grader's rights" not in config


def test_messages_withhold_every_line_of_the_reference():
    """In isolated grading the reference of earlier stages runs beside the student's code, which can raise
    its source as an error: every verbatim reference line in a message is withheld."""
    from tito.grading import WITHHELD, redact

    source = (REPO / "solutions" / "01_tensor" / "01_tensor.py").read_text()
    region = source.split("### BEGIN SOLUTION 01.3 ", 1)[1].split("### END SOLUTION", 1)[0].splitlines()[1:]
    line = max((text.strip() for text in region), key=len)
    assert len(line) >= 16
    message = f"ValueError: {line} (at core/losses.py line 43, in mse_loss)"
    assert redact(REPO, message) == f"ValueError: {WITHHELD} (at core/losses.py line 43, in mse_loss)"
    assert redact(REPO, "ValueError: shapes (2,) and (3,) do not broadcast") == \
        "ValueError: shapes (2,) and (3,) do not broadcast"
