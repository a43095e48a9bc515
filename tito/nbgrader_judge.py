"""The judge in nbgrader's autograde pipeline: `JudgeScores`, a preprocessor that runs after Execute in
the trusted nbgrader process (the course's nbgrader_config.py puts it there).

It grades the submitted notebook with tito's engine (the runner in the bubblewrap sandbox, the checks
judged here, earlier stages from the reference inside the sandbox only) and writes every graded cell's
outputs itself: the task's score as the cell's result, which nbgrader takes as partial credit, and one
line per lost check. Nothing the kernel printed in a graded cell is kept, so no cell, kernel choice or
crash in the notebook can raise a score; what a submission breaks (a syntax error, a deleted cell) scores
0 where it breaks, with the reason. A notebook the judge cannot grade at all (no bubblewrap, a fault of
the grader) gets no score: the judge raises, nbgrader keeps nothing of that notebook's autograde and
exits non-zero.

The kernel's outputs reach the nbgrader process capped as they arrive, and the notebook's execution has a
deadline of its own (ExecuteForFeedback), so no notebook holds nbgrader's memory or time.

A graded cell's own code raises during autograde: under an autograde that lacks this preprocessor (a
wrong configuration) the cell ends in an error, and nbgrader gives it 0.
"""

from __future__ import annotations

import asyncio
import atexit
import math
import os
import queue
import re
import shutil
import tempfile
import time
from functools import cache
from pathlib import Path
from typing import Any

import nbformat
import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from nbclient.exceptions import DeadKernelError
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Float, Unicode, default

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


# What the kernel's outputs may hold of the nbgrader process's memory (characters, plus OUTPUT_OVERHEAD per
# output: a flood of tiny outputs costs its dicts), and what one message on its sockets may be: nbclient keeps
# every output as it arrives and LimitOutput trims only after the execution
CELL_OUTPUT = 2 << 20
NOTEBOOK_OUTPUT = 8 << 20
OUTPUT_OVERHEAD = 1024
# one frame from the kernel: a larger one closes that channel for good (ZMQ_MAXMSGSIZE); jupyter_client
# parses a frame before any cap here counts it, and 1 MiB of JSON of empty lists is some 20 MB of objects
MESSAGE_BYTES = 1 << 20
QUEUED_MESSAGES = 4  # received but not yet read; beyond that the kernel's side waits, then drops


class _CappedClient(AsyncKernelClient):
    """nbgrader's client of the kernel, whose sockets refuse a frame over MESSAGE_BYTES and queue at most
    QUEUED_MESSAGES: whatever the kernel sends, what waits here stays bounded. ZMQ does not connect again
    after a refused frame; `closed` tells that it happened, so the execution ends then, not at a timeout."""

    @default("context")
    def _context_default(self) -> zmq.asyncio.Context:
        self._created_context = True
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, MESSAGE_BYTES)
        context.setsockopt(zmq.RCVHWM, QUEUED_MESSAGES)
        return context

    def start_channels(self, *args: Any, **kwargs: Any) -> None:
        super().start_channels(*args, **kwargs)
        monitors = [channel.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
                    for channel in (self.shell_channel, self.iopub_channel)]
        # each asyncio monitor, and a plain view of it that polls without the event loop
        self._monitors: list[tuple[Any, zmq.Socket]] = [(monitor, zmq.Socket.shadow(monitor.underlying))
                                                       for monitor in monitors]

    def closed(self) -> bool:
        """Whether the shell or iopub channel lost its connection to the kernel (a refused frame, a dead kernel)."""
        return any(view.poll(0) for _, view in getattr(self, "_monitors", []))


def _characters(value: Any) -> int:
    """The characters of the strings in a message's content, plus a little for every other part."""
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += 16 * len(item)
            pending += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            total += 16 * len(item)
            pending += item
        else:
            total += 16
    return total


def _last_run(nb: Any) -> Any | None:
    """The code cell that ran last (or the first code cell), where a note about the whole run goes."""
    code = [cell for cell in nb.cells if cell.get("cell_type") == "code" and cell.get("outputs") is not None]
    return max((cell for cell in code if cell.get("execution_count")), default=code[0] if code else None,
               key=lambda cell: cell.get("execution_count") or 0)


class ExecuteForFeedback(Execute):
    """nbgrader's Execute, made safe for the nbgrader process whatever the notebook does; the scores come
    from the judge, which does not need the kernel, so each of these ends only the feedback:

    - a kernel that dies, cannot start or stops answering ends the execution (the notebook keeps the
      outputs it had, and a note in the cell it died in) instead of the student's whole autograde;
    - outputs are kept as they arrive only up to CELL_OUTPUT per cell and NOTEBOOK_OUTPUT per notebook;
      the rest is dropped, with one note; widgets (comm messages) are not kept at all; a message larger
      than MESSAGE_BYTES never reaches this process, and ends the execution (_CappedClient);
    - the whole execution has a deadline (`notebook_timeout`; c.Execute.timeout is per cell): the cell
      running then is interrupted and the cells after it are not run."""

    notebook_timeout = Float(900.0, help="Seconds one notebook's execution may take in all; the cells left "
                                         "then are not run, and the judge grades the notebook anyway.").tag(
        config=True)

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> tuple[Any, dict]:
        self._deadline = time.monotonic() + self.notebook_timeout
        self._notebook_output = 0
        self._cell_output = 0
        self._out_of_time = False
        self._cells_full: set[int] = set()
        self._notebook_full = False
        self._stopped = ""
        try:
            return super().preprocess(nb, resources, km)
        except Exception as error:  # noqa: BLE001 - the kernel is the student's; its failure ends only the run
            reason = self._stopped or " ".join(f"{type(error).__name__}: {error}".split())[:MESSAGE_CHARACTERS]
            self.log.warning("tito: the notebook's execution ended early (%s); the judge grades it anyway", reason)
            if (last := _last_run(nb)) is not None:
                last.outputs.append(_failure(f"the kernel stopped here ({reason}); the cells below did not run")[0])
            return nb, resources

    def create_kernel_manager(self) -> Any:
        manager = super().create_kernel_manager()
        manager.client_factory = _CappedClient
        return manager

    def preprocess_cell(self, cell: Any, resources: Any, index: int) -> tuple[Any, Any]:
        if cell.get("cell_type") == "code" and time.monotonic() >= self._deadline:
            if not self._out_of_time:
                self._out_of_time = True
                self.log.warning("tito: the notebook's %g s ran out; the cells left were not run, the judge grades "
                                 "it anyway", self.notebook_timeout)
                if (last := _last_run(self.nb)) is not None:
                    last.outputs.append(_failure(f"the notebook's time ({self.notebook_timeout:g} s) ran out here; "
                                                 "the cells below did not run")[0])
            return cell, self.resources
        self._cell_output = 0
        return super().preprocess_cell(cell, resources, index)

    async def _async_check_alive(self) -> None:
        """nbclient asks this every second while a cell runs: a channel ZMQ closed ends the execution too."""
        await super()._async_check_alive()
        if isinstance(self.kc, _CappedClient) and self.kc.closed():
            await asyncio.sleep(1.0)  # a kernel that dies closes its channels too: then it is said to have died
            await super()._async_check_alive()
            self._stopped = (f"the kernel sent a message larger than {MESSAGE_BYTES >> 20} MiB, which closed its "
                             "channel to nbgrader")
            raise DeadKernelError(self._stopped)

    def _get_timeout(self, cell: Any) -> int | None:
        """The cell's own timeout, or less: what is left of the notebook's time."""
        timeout = super()._get_timeout(cell)
        left = max(1, math.ceil(self._deadline - time.monotonic()))
        return left if timeout is None else min(timeout, left)

    def _keep(self, characters: int, outs: list | None = None, cell_index: int = -1) -> bool:
        """Whether an output of this size is kept (then it is counted). The first one that would pass a
        limit ends what is kept of the cell (or of the notebook), with a note in `outs` saying so."""
        if self._notebook_full or cell_index in self._cells_full:
            return False
        if self._cell_output + characters <= CELL_OUTPUT and self._notebook_output + characters <= NOTEBOOK_OUTPUT:
            self._cell_output += characters
            self._notebook_output += characters
            return True
        if self._cell_output + characters > CELL_OUTPUT:
            self._cells_full.add(cell_index)
            note = f"the rest of this cell's output was left out: it went past {CELL_OUTPUT >> 20} MiB"
        else:
            self._notebook_full = True
            note = f"the rest of the notebook's output was left out: it went past {NOTEBOOK_OUTPUT >> 20} MiB"
        if outs is not None:
            outs.append(nbformat.v4.new_output("stream", name="stderr", text=f"[tito: {note}]\n"))
        return False

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        if self._keep(OUTPUT_OVERHEAD + _characters(msg.get("content")), outs, cell_index):
            return super().output(outs, msg, display_id, cell_index)
        return None

    def _update_display_id(self, display_id: str, msg: dict) -> None:
        if self._keep(_characters(msg.get("content"))):
            super()._update_display_id(display_id, msg)

    def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
        """Widgets are not kept: their state and output hooks would be kept beside the caps."""

    def on_cell_executed(self, **kwargs: Any) -> None:
        """nbgrader adds the reply's error to the cell when no output shows it (a timeout, or an error output
        dropped here): that too within the caps."""
        reply = kwargs["execute_reply"]
        content = reply.get("content", {}) if isinstance(reply, dict) else {}
        shown = any(output.get("output_type") == "error" and output.get("ename") == content.get("ename")
                    for output in kwargs["cell"].outputs)
        if content.get("status") == "error" and not shown and not self._keep(OUTPUT_OVERHEAD + _characters(content)):
            short = {"ename": str(content.get("ename", ""))[:100], "evalue": str(content.get("evalue", ""))[:1000],
                     "traceback": []}
            kwargs["execute_reply"] = {**reply, "content": {**content, **short}}
        super().on_cell_executed(**kwargs)


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
        assignment, student = str(info.get("assignment", "")), str(info.get("student", ""))
        try:
            scores = self._grade(nb, assignment, student)
        except Exception as error:
            # the grader's own failure (no bubblewrap, a wrong assignment, a fault): no score at all, rather
            # than 0 for work that may be complete. nbgrader drops this notebook's autograde, records no score
            # and exits non-zero once the other submissions are done
            reason = error.args[0] if isinstance(error, TitoError) else f"{type(error).__name__}: {error}"
            self.log.error("tito judge: %s of %s not graded, no score written: %s", assignment, student, reason)
            raise TitoError(f"the judge could not grade {assignment} of {student}: {reason}") from error
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
        for check in grade.tests:
            if check.fault:  # counted as passed, as in tito grade: said loudly, for the instructor to regrade
                self.log.error("tito judge: %s of %s: %s", assignment, student, check.message)
        lost: dict[str, list[str]] = {}
        for check in grade.tests:
            if not check.passed:
                lost.setdefault(check.task, []).append(f"lost {check.max_points:g} points: {check.public}")
        scores = {}
        for task, points in grade.task_scores().items():
            lines = [*grade.feedback_notes(), *lost[task]] if task in lost else [f"task {task}: every check passed"]
            scores[task] = (points, lines)
        return scores


_PLANS: dict[tuple[str, str], engine.Plan] = {}


@cache
def _scratch() -> Path:
    """The judge's folder for the run: the drawn cases and each submission's package; removed when nbgrader
    exits. No other account can enter it: under root only the judge's box user may cross it (0710, its
    group: bubblewrap binds the job and the package as that user), otherwise it is the grader's alone (0700)."""
    folder = Path(tempfile.mkdtemp(prefix="tito-judge-"))  # 0700
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    if os.geteuid() == 0:
        os.chown(folder, 0, sandbox.box_uid(0))  # the judge's boxes run in slot 0 (one slot, see _grade)
        folder.chmod(0o710)
    return folder
