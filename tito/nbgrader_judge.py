"""The judge in nbgrader's autograde pipeline: `JudgeScores`, a preprocessor that runs after Execute in
the trusted nbgrader process (the course's nbgrader_config.py puts it there).

It grades the submitted notebook with tito's engine (the runner in the bubblewrap sandbox, the checks
judged here, earlier stages from the reference inside the sandbox only) and writes every graded cell's
outputs itself: the task's score as the cell's result, which nbgrader takes as partial credit, and one
line per lost check. Nothing the kernel printed in a graded cell is kept, so no cell, kernel choice or
crash in the notebook can raise a score; a notebook the judge cannot grade scores 0 in every graded cell,
with the reason.

A graded cell's own code raises during autograde: under an autograde that lacks this preprocessor (a
wrong configuration) the cell ends in an error, and nbgrader gives it 0.
"""

from __future__ import annotations

import atexit
import queue
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Unicode

from tito import engine, grading, sandbox
from tito.errors import TitoError
from tito.project import Stage, find_root
from tito.project import stage as find_stage
from tito.source import read_source

GRADE_ID = re.compile(r"^task-(\d\d)_(\d+)$")  # the graded cell of task NN.k
MESSAGE_CHARACTERS = 300  # at most this much of one message reaches a student's feedback
LEARNER_ONLY = "learner-only"  # the tag of a solutions cell that only trains or draws for the learner


def grade_id(stage: Stage, index: int) -> str:
    """The nbgrader grade id `tito course init` gives the `index`-th (1-based) cell of a stage's source."""
    return f"{stage.number}-cell-{index:03d}"


@cache
def learner_only_ids(stage: Stage) -> frozenset[str]:
    """The grade ids of the stage's cells tagged learner-only in solutions/ (trusted, not the submission)."""
    return frozenset(grade_id(stage, index) for index, cell in enumerate(read_source(stage).cells, start=1)
                     if LEARNER_ONLY in cell.metadata.get("tags", []))


class SkipLearnerCells(NbGraderPreprocessor):
    """Before Execute: the cells that only train or draw for the learner (the MNIST run of 07, its plots)
    get nbclient's skip-execution tag, so autograde does not spend minutes on them. Which cells those are
    comes from solutions/, by grade id: a tag a student adds or removes changes nothing."""

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        try:
            stage = find_stage(find_root(Path(__file__)), str(resources.get("nbgrader", {}).get("assignment", "")))
        except TitoError:
            return nb, resources
        skipped = learner_only_ids(stage)
        for cell in nb.cells:
            tags = [tag for tag in cell.metadata.get("tags", []) if tag not in ("skip-execution", LEARNER_ONLY)]
            if cell.metadata.get("nbgrader", {}).get("grade_id") in skipped:
                tags.append("skip-execution")
            if tags:
                cell.metadata["tags"] = tags
            else:
                cell.metadata.pop("tags", None)
        return nb, resources


class ExecuteForFeedback(Execute):
    """nbgrader's Execute, except that a kernel that dies, cannot start or stops answering ends the
    execution (the notebook keeps the outputs it had, and a note in the cell it died in) instead of the
    student's whole autograde: the scores come from the judge, which does not need the kernel."""

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> tuple[Any, dict]:
        try:
            return super().preprocess(nb, resources, km)
        except Exception as error:  # noqa: BLE001 - the kernel is the student's; its failure ends only the run
            reason = " ".join(f"{type(error).__name__}: {error}".split())[:MESSAGE_CHARACTERS]
            self.log.warning("tito: the notebook's execution ended early (%s); the judge grades it anyway", reason)
            running = [cell for cell in nb.cells if cell.get("cell_type") == "code" and cell.get("outputs") is not None]
            if running:
                last = max((cell for cell in running if cell.get("execution_count")), default=running[0],
                           key=lambda cell: cell.get("execution_count") or 0)
                last.outputs.append(_failure(f"the kernel stopped here ({reason}); the cells below did not run")[0])
            return nb, resources


def task_of(cell: Any) -> str | None:
    """The task a graded cell scores, from its grade id; None for any other cell."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if cell.get("cell_type") != "code" or not meta.get("grade") or meta.get("solution"):
        return None
    match = GRADE_ID.match(str(meta.get("grade_id", "")))
    return f"{match[1]}.{int(match[2])}" if match else None


def _result(score: float, lines: list[str]) -> list[Any]:
    text = "".join(f"{line[:MESSAGE_CHARACTERS]}\n" for line in lines)
    return [nbformat.v4.new_output("stream", name="stdout", text=text),
            nbformat.v4.new_output("execute_result", data={"text/plain": repr(float(score))}, execution_count=None)]


def _failure(reason: str) -> list[Any]:
    return [nbformat.v4.new_output("error", ename="NotGraded", evalue=reason, traceback=[f"NotGraded: {reason}"])]


class JudgeScores(NbGraderPreprocessor):
    """Write the judge's score and messages into every graded cell (see the module's docstring)."""

    course_root = Unicode("", help="The course folder (holds .tito-course-key, the seed of its cases).").tag(
        config=True)
    unsafe_no_sandbox = Bool(False, help="Grade without bubblewrap: student code runs with the grader's "
                                         "rights. Only for a machine that cannot run bubblewrap.").tag(config=True)

    def preprocess(self, nb: Any, resources: dict) -> tuple[Any, dict]:
        graded = [(cell, task) for cell in nb.cells if (task := task_of(cell)) is not None]
        info = resources.get("nbgrader", {})
        try:
            scores = self._grade(nb, str(info.get("assignment", "")), str(info.get("student", "")))
        except Exception as error:  # noqa: BLE001 - whatever it is, this notebook scores 0, said in every cell
            reason = error.args[0] if isinstance(error, TitoError) else f"{type(error).__name__}: {error}"
            self.log.error("tito judge: %s of %s not graded: %s", info.get("assignment"), info.get("student"),
                           reason)
            for cell, _ in graded:
                cell.outputs = _failure(f"the judge could not grade this notebook: {reason}")
            return nb, resources
        for cell, task in graded:
            if task not in scores:
                cell.outputs = _failure(f"task {task} is not a task of this assignment's hidden suite")
                continue
            score, lines = scores[task]
            cell.outputs = _result(score, lines)
        return nb, resources

    def _grade(self, nb: Any, assignment: str, student: str) -> dict[str, tuple[float, list[str]]]:
        root = find_root(Path(__file__))
        stage = find_stage(root, assignment)
        if stage.name != assignment:
            raise TitoError(f"the assignment {assignment!r} is not a TinyTorch stage")
        if sandbox.bwrap_available():
            isolation = "bwrap"
        elif self.unsafe_no_sandbox:
            isolation = "none"
        else:
            raise TitoError("bubblewrap is missing, so student code cannot be isolated: install it (Debian/Ubuntu: "
                            "`sudo apt install bubblewrap`), or set c.JudgeScores.unsafe_no_sandbox = True")
        scratch = _scratch()
        course = Path(self.course_root) if self.course_root else Path.cwd()
        key, _ = grading.course_key(course, scratch, None)
        if (stage.name, key) not in _PLANS:  # nbgrader makes a preprocessor per notebook: draw once per run
            _PLANS[stage.name, key] = engine.make_plan(stage, seed=engine.stage_seed(key, stage), jobs=scratch)
        slots: queue.Queue = queue.Queue()
        slots.put(0)
        grader = grading.Grader(root, isolation, sandbox.Limits(), scratch, slots)
        grade = grader.grade(_PLANS[stage.name, key], student, {stage.name: nbformat.writes(nb).encode()},
                             "isolated", [])
        if grade.fault:
            raise TitoError(grade.fault)
        lost: dict[str, list[str]] = {}
        for check in grade.tests:
            if not check.passed:
                lost.setdefault(check.task, []).append(f"lost {check.max_points:g} points: {check.public}")
        scores = {}
        for task, points in grade.task_scores().items():
            lines = [*grade.notes, *lost[task]] if task in lost else [f"task {task}: every check passed"]
            scores[task] = (points, lines)
        return scores


_PLANS: dict[tuple[str, str], engine.Plan] = {}


@cache
def _scratch() -> Path:
    """The judge's folder for the run: the drawn cases and each submission's package, readable by the
    sandbox's user; removed when nbgrader exits."""
    folder = Path(tempfile.mkdtemp(prefix="tito-judge-"))
    folder.chmod(0o711)  # crossable by the box's user, not listable: its job folders have unguessable names
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder
