"""`tito course init` in process: the layout and modes a shared server needs, the student's configuration,
and source notebooks whose released form fits a fetched notebook (no nbgrader run: see test_course.py)."""

from __future__ import annotations

import re
import stat

import nbformat
import pytest

from tito.commands.course import KERNEL_NAME, source_notebook, write_course
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


def test_a_notebook_the_judge_cannot_grade_scores_zero_in_every_graded_cell():
    """Whatever fails in the judge, each graded cell ends in an error (nbgrader: 0), never with the
    kernel's output: here a forged result the kernel printed, and a notebook of no known assignment."""
    from nbgrader.utils import determine_grade

    from tito.nbgrader_judge import JudgeScores

    notebook = source_notebook(stages(REPO)[0])
    graded = [cell for cell in notebook.cells if task_of(cell) is not None]
    for cell in graded:
        cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "1000.0"})]
    JudgeScores().preprocess(notebook, {"nbgrader": {"assignment": "99_nothing", "student": "mallory"}})
    for cell in graded:
        assert [output.output_type for output in cell.outputs] == ["error"]
        assert "could not grade this notebook" in cell.outputs[0].evalue
        assert determine_grade(cell)[0] == 0


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
