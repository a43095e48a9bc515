"""The GPT leaderboard: every student's own package trained in a box in the judged set-up of milestones/gpt.py,
ranked by a validation loss computed here, of the weights that training produced, scored by the course's GPT.

`train` runs on the trusted side beside the boxes (a thread of `tito grade`, or a Dask worker) and returns
`Evidence`: the boxes' replies as bytes and what this side measured. `judge` (on the coordinator) makes it an
`Entry`; `rank`, `write_leaderboard` and `as_meta` order and report the entries. The student's box gets the
training split alone; it trains, then sends its model's parameters ({name: float32 array}) and is closed.
It is never sent a validation character, and its code never predicts: a second box, on the same side with the
same isolation and limits, runs the same trainer on the course's reference package, loads those weights into
models.GPT of the judged set-up (strictly: the names and shapes of its parameters) and sends the
log-probabilities of the character after each window of the validation split, which only this side knows.
docs/security.md ("The GPT leaderboard") says what this defends, and what it cannot.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tito import datasets, engine, grading, package, sandbox
from tito.errors import TitoError
from tito.project import stages_up_to
from tito.shipped import wire
from tito.submissions import printable

# The judged set-up of milestones/gpt.py (tests/test_leaderboard.py holds the two equal)
CONTEXT, BATCH, WIDTH, HEADS, LAYERS, LR = 64, 32, 128, 4, 4, 1e-3
JUDGED_STEPS = 1500

VALIDATION_WINDOWS = 2048  # scored characters: every student is scored on the same ones
SPACING = 2 * CONTEXT + 2  # at least this far apart: no target in any window, none just before one
# The CPU budgets of the four requests, each counted from the request: about four times what the reference
# needs on one thread in the box (0.12 s a step, 1.6 ms a window). The student's box has the first three
# (import, training, sending its weights: about 0.1 s); the reference box's prediction has the fourth.
IMPORT_CPU_SECONDS = engine.IMPORT_CPU_SECONDS
CPU_SECONDS_PER_STEP, TRAIN_CPU_SECONDS = 0.5, 10.0  # a step, and the model's set-up
WEIGHTS_CPU_SECONDS = 3.0
CPU_SECONDS_PER_WINDOW, PREDICT_CPU_SECONDS = 0.006, 2.0
NORMALISED = 1e-3  # how far from 0 a row's logsumexp may be (a box gains at most this many nats by it)
SHOWN_CHARACTERS = 160  # of an import error's words
SHIPPED = Path(__file__).with_name("shipped")
PHASES = ("import", "train", "weights", "predict")  # the answers in order: the student's box's, the reference's
Record = dict[str, Any]  # one line from the box, parsed within engine.parse_record's bounds
DOING = {"import": "importing tinytorch", "train": "training", "weights": "sending its trained parameters",
         "predict": "predicting with its trained parameters in the course's GPT"}
REQUESTS = {"train": "training", "weights": "weights", "predict": "prediction"}
SENT_WEIGHTS = b'{"n": 2, "weights": "sent"}'  # what Evidence keeps of the weights (they are 3.3 MB)


# ---------------------------------------------------------------------------------------------------
# The data and the windows, the same in every process for the same seed


@dataclass(frozen=True)
class Corpus:
    chars: str  # every character of the text, sorted: the vocabulary
    train_text: str  # the first 90%: all the box is given
    validation: np.ndarray  # the last 10%, as int64 ids into chars


@cache
def corpus() -> Corpus:
    """The milestone's split of datasets/shakespeare_complete.txt.gz (loaded after its sha256 matched)."""
    text: str = datasets.load("shakespeare")
    chars = "".join(sorted(set(text)))
    table = np.zeros(256, dtype=np.int64)
    table[[ord(c) for c in chars]] = np.arange(len(chars))
    split = int(0.9 * len(text))
    return Corpus(chars, text[:split], table[np.frombuffer(text[split:].encode("ascii"), dtype=np.uint8)])


def course_seed(key: str) -> int:
    """A seed for the leaderboard from the course key: 128 bits, which no one brute-forces from what a box is
    told (a seed of 31 bits would be found in an hour from the training seed a box can leak)."""
    return int.from_bytes(hmac.new(key.encode(), b"gpt leaderboard", hashlib.sha256).digest()[:16], "big")


def _derived(seed: int, purpose: str) -> int:
    """A seed of 128 bits for one purpose, a keyed hash of the run's seed: the training seed the box is told
    tells nothing of the windows' seed."""
    return int.from_bytes(hmac.new(str(seed).encode(), purpose.encode(), hashlib.sha256).digest()[:16], "big")


def window_starts(seed: int, count: int) -> np.ndarray:
    """Where `count` windows of the validation split start, in the order they are sent: at least SPACING apart,
    so that no target is in any window nor within CONTEXT characters before one, drawn from the seed and
    shuffled (the order tells nothing of which window follows which)."""
    room = len(corpus().validation) - CONTEXT - 1 - (count - 1) * (SPACING - 1)
    if not 1 <= count <= room:
        raise ValueError(f"{count} windows {SPACING} characters apart do not fit in the validation split")
    rng = np.random.default_rng(_derived(seed, "validation windows"))
    starts = np.sort(rng.choice(room, count, replace=False)) + np.arange(count) * (SPACING - 1)
    return rng.permutation(starts)


def validation_windows(seed: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """(contexts (count, CONTEXT) ids, targets (count,) ids): the windows and the character after each."""
    validation, starts = corpus().validation, window_starts(seed, count)
    return validation[starts[:, None] + np.arange(CONTEXT)], validation[starts + CONTEXT]


def cpu_budgets(steps: int, windows: int = VALIDATION_WINDOWS) -> tuple[float, float, float, float]:
    """Seconds of CPU for importing tinytorch, for training `steps` steps, for sending the weights (the
    student's box) and for predicting `windows` with them (the reference box)."""
    return (IMPORT_CPU_SECONDS, TRAIN_CPU_SECONDS + steps * CPU_SECONDS_PER_STEP, WEIGHTS_CPU_SECONDS,
            PREDICT_CPU_SECONDS + windows * CPU_SECONDS_PER_WINDOW)


def parameter_count() -> int:
    """The parameters of models.GPT in the judged set-up: 823,040 (the reference's, measured; tests hold the
    two equal): the token and position embeddings, per block two LayerNorms, the attention's c_attn and c_proj
    and the MLP's c_fc and c_proj (each with a bias), ln_f, and lm_head (no bias)."""
    vocab = len(corpus().chars)
    return vocab * WIDTH + CONTEXT * WIDTH + LAYERS * (12 * WIDTH * WIDTH + 13 * WIDTH) + 2 * WIDTH + WIDTH * vocab


def reference_files(root: Path, last: Any) -> dict[str, str]:
    """The course's own package (the reference solutions) of every stage up to `last`, as
    grading.package_files gives a package: the trusted code that scores every student's weights."""
    files = {}
    for stage in stages_up_to(root, last):
        with grading._COMPILING:
            path, code = grading._reference_module(stage)
        files[path] = code
    return files


def wall_budget(cpu_seconds: float) -> float:
    """The seconds on the parent's clock a request may take, for a CPU budget: a check's (a box waiting, or on
    a busy machine)."""
    return 3 * cpu_seconds + 10


# ---------------------------------------------------------------------------------------------------
# Training, beside the box


@dataclass(frozen=True)
class Evidence:
    """What one run showed the trusted side: its set-up and budgets, the answers as the bytes the boxes sent (the
    student's box's to the import, the training and the weights request, the last as SENT_WEIGHTS, then the
    reference box's to the prediction request, in order, as far as it got) and what this side measured. Small
    and picklable: the predictions of the judged 2,048 windows are 0.9 MB."""
    steps: int
    seed: int
    windows: int
    budgets: tuple[float, ...]  # seconds of CPU of each request (cpu_budgets), each counted from the request
    memory_bytes: int
    replies: tuple[bytes, ...] = ()
    stopped: str = ""  # how a box ended before its next answer: "cpu", "wall", "memory", "ended", "truncated"
    status: int | None = None  # that box's exit status (the student's, or the reference's while predicting)
    cpu_seconds: float = 0.0  # the student's box's, counted from outside (its cgroup, or /proc)
    wall_seconds: float = 0.0  # on this side's clock
    failure: str = ""  # this side could not start the box: why (the package could not be written)


def train(files: dict[str, str], reference: dict[str, str], *, steps: int, seed: int, limits: sandbox.Limits,
          isolation: str, slot: int, scratch: Path, windows: int = VALIDATION_WINDOWS,
          cpu_seconds: float | None = None) -> Evidence:
    """Write the student's package (`files`, as tito.grading.package_files gives them) into a fresh folder under
    `scratch`, train it in a box for `steps` steps and take its weights; then, with the box closed, load them
    in a second box running the course's package (`reference`, as `reference_files` gives it) and take its
    predictions on `windows` validation windows. Each request has the CPU budget of `cpu_budgets`
    (`cpu_seconds`, if given, for the training) and its `wall_budget`, both counted here; memory and the rest
    are `limits'`. Both boxes are in `slot`, with `isolation`."""
    budgets = cpu_budgets(steps, windows)
    if cpu_seconds is not None:
        budgets = (budgets[0], cpu_seconds, *budgets[2:])
    evidence = Evidence(steps, seed, windows, budgets, limits.memory_bytes)
    student_limits = replace(limits, wall_seconds=sum(map(wall_budget, budgets[:3])),  # RLIMIT_CPU is past it
                             report_bytes=min(limits.report_bytes, _weights_bytes()))
    started = time.monotonic()
    with _boxed(files, limits=student_limits, isolation=isolation, slot=slot, scratch=scratch) as box:
        if isinstance(box, str):
            return replace(evidence, failure=f"the package could not be written from the notebooks ({box})")
        talk = _Talk(box)
        _start(talk, budgets[0], "the leaderboard's trainer")
        training = {"steps": steps, "seed": _derived(seed, "training")}
        sent = None
        for number, (phase, request) in enumerate(zip(PHASES[:3], [None, {"n": 1, "train": training},
                                                                   {"n": 2, "weights": True}])):
            why = talk.answer(_answers(number), request, budgets[number])
            record = {} if why else engine.parse_record(talk.replies[-1]) or {}
            if phase == "weights" and not why:
                sent = record.get("weights")
                talk.replies[-1] = SENT_WEIGHTS if "weights" in record else _small(record)
            if why or _failed(phase, record):  # the judge's own test: go on or stop
                return talk.finished(evidence, why, started)
        evidence = talk.finished(evidence, "", started)
    contexts, _ = validation_windows(seed, windows)  # the targets stay here
    reference_limits = replace(limits, wall_seconds=wall_budget(IMPORT_CPU_SECONDS) + wall_budget(budgets[3]),
                               report_bytes=min(limits.report_bytes, _reply_bytes(windows)))
    with _boxed(reference, limits=reference_limits, isolation=isolation, slot=slot, scratch=scratch) as box:
        if isinstance(box, str):
            raise RuntimeError(f"the leaderboard's reference package could not be written ({box})")
        talk = _Talk(box)
        _start(talk, IMPORT_CPU_SECONDS, "the leaderboard's reference GPT")
        why = talk.answer(_answers(0), None, IMPORT_CPU_SECONDS)
        if why or engine.parse_record(talk.replies[-1]) != {"imported": True}:
            status = box.close()
            raise RuntimeError(f"the leaderboard's reference GPT did not import "
                               f"({engine._ending(why, box.limits, status) if why else 'it failed to'})")
        request = {"n": 1, "predict": {"weights": sent, "contexts": wire.encode(contexts.astype(np.uint8))}}
        why = talk.answer(_answers(1), request, budgets[3])
        predicted = talk.replies[-1:] if not why else []
        ended = talk.finished(evidence, why, started)
    return replace(evidence, replies=evidence.replies + tuple(predicted), stopped=ended.stopped,
                   status=ended.status if why else evidence.status, wall_seconds=ended.wall_seconds)


@contextmanager
def _boxed(files: dict[str, str], *, limits: sandbox.Limits, isolation: str, slot: int,
           scratch: Path) -> Iterator[sandbox.Box | str]:
    """A box running the trainer on the package `files`, written into a fresh folder under `scratch` (removed
    afterwards); or why the package could not be written, in one sentence."""
    folder = Path(tempfile.mkdtemp(prefix="gpt-", dir=scratch))
    try:
        try:
            with grading._COMPILING:  # it parses each file (CPython 3.11 cannot compile in two threads at once)
                package.write_package(folder / "pkg", files)
        except (TitoError, OSError, ValueError, RecursionError) as error:
            yield grading._sentence(error)
            return
        _write_job(folder / "job")
        sandbox.box_view(folder, slot)  # readable by this slot's box user alone
        with sandbox.Box(folder / "job", folder / "pkg", limits=limits, isolation=isolation, slot=slot) as box:
            yield box
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _weights_bytes() -> int:
    """What the parent reads from the student's box: the judged GPT's weights as float32 in base64, and 1 MiB
    for the rest (names, shapes, the other answers): 5.4 MB."""
    return parameter_count() * 4 * 4 // 3 + (1 << 20)


def _reply_bytes(windows: int) -> int:
    """What the parent reads from the reference box: the predictions as float64 in base64, and 1 MiB for the
    rest."""
    return windows * len(corpus().chars) * 8 * 4 // 3 + (1 << 20)


def _small(record: Record) -> bytes:
    """A weights reply without weights, as Evidence keeps it: its number and its error's first 500 characters."""
    error = record.get("error")
    return json.dumps({"n": 2, **({"error": error[:500]} if isinstance(error, str) else {})}).encode()


def _write_job(job: Path) -> None:
    """JOB/lib/runner.py (the trainer: the program a sandbox.Box starts), wire.py and train.txt (the training
    split alone), and JOB/work.json (the characters and the set-up)."""
    (job / "lib").mkdir(parents=True)
    shutil.copy2(SHIPPED / "gpt_trainer.py", job / "lib" / "runner.py")
    shutil.copy2(SHIPPED / "wire.py", job / "lib" / "wire.py")
    (job / "lib" / "train.txt").write_text(corpus().train_text, encoding="ascii")
    work = {"chars": corpus().chars, "context": CONTEXT, "batch": BATCH, "width": WIDTH, "heads": HEADS,
            "layers": LAYERS, "lr": LR}
    (job / "work.json").write_text(wire.dumps(work), encoding="utf-8")


class _Talk:
    """One request at a time to a box, each answer the first record of its number; what else the box writes
    on the pipe is skipped. Budgets are this side's, each request's counted from when it was sent."""

    def __init__(self, box: sandbox.Box) -> None:
        self.box = box
        self.replies: list[bytes] = []
        self.used = 0.0

    def answer(self, accept: Callable[[Record], bool], request: Record | None, budget: float) -> str:
        """Send `request` (if any), then wait for the first record `accept`s; "" or how the box ended."""
        box = self.box
        deadline, cpu_limit = time.monotonic() + wall_budget(budget), box.cpu() + budget
        if request is not None and not box.send(json.dumps(request).encode() + b"\n", deadline):
            return box.receive(min(deadline, time.monotonic() + 1.0), cpu_limit)[1] or "ended"
        while True:
            line, why = box.receive(deadline, cpu_limit)
            self.used = max(self.used, box.cpu())
            if line is None:
                return why
            record = engine.parse_record(line)
            if record is not None and accept(record):
                self.replies.append(line)
                return ""

    def finished(self, evidence: Evidence, why: str, started: float) -> Evidence:
        """The evidence with this box's replies, how it ended, its CPU and the time since `started`."""
        if why == "ended" and _out_of_memory(self.box):
            why = "memory"
        cpu = max(self.used, self.box.cpu())
        status = self.box.close()
        return replace(evidence, replies=tuple(self.replies), stopped=why, status=status, cpu_seconds=cpu,
                       wall_seconds=time.monotonic() - started)


def _start(talk: _Talk, budget: float, what: str) -> None:
    """The trainer's first record, sent before any code of the package runs; else a RuntimeError (a fault of
    the grader's, not the package's)."""
    why = talk.answer(lambda record: True, None, budget)
    if why or engine.parse_record(talk.replies.pop()) != {"importing": True}:
        status = talk.box.close()
        raise RuntimeError(f"{what} did not start ({engine._ending(why, talk.box.limits, status)})")


def _answers(number: int) -> Callable[[Record], bool]:
    """Which record answers request `number`: for 0, the import, one with "imported" or "import_error"; else
    the first of that number."""
    if number == 0:
        return lambda record: record.get("imported") is True or "import_error" in record
    return lambda record: record.get("n") == number


def _out_of_memory(box: sandbox.Box) -> bool:
    """Whether the kernel killed a process of the box for memory: the oom_kill count of its cgroup (v2's
    memory.events, v1's memory.oom_control). Without a cgroup, RLIMIT_AS makes it a MemoryError the trainer
    reports."""
    for folder in box.cgroup.folders if box.cgroup is not None else []:
        for name in ("memory.events", "memory.oom_control"):
            try:
                lines = (folder / name).read_text().splitlines()
            except OSError:
                continue
            if any(line.split()[:1] == ["oom_kill"] and line.split()[1:2] != ["0"] for line in lines):
                return True
    return False


# ---------------------------------------------------------------------------------------------------
# Judging, on the coordinator: the only place that decides an entry


@dataclass(frozen=True)
class Entry:
    student: str
    validation_loss: float | None  # nats per character; None: ranked last, for `reason`
    reason: str  # "" when ranked by its loss
    cpu_seconds: float
    steps: int


def judge(student: str, evidence: Evidence) -> Entry:
    """The mean of -log p(target) over the windows, computed here from the log-probabilities the course's GPT
    gave with the student's weights and the targets only this side holds; or, when the student's box failed,
    ran past a budget or sent weights that are not those of the course's GPT, or the predictions are not a
    distribution over the characters for every window, None and the reason in one sentence."""
    loss, reason = _verdict(evidence)
    return Entry(student, loss, reason, evidence.cpu_seconds, evidence.steps)


def _verdict(evidence: Evidence) -> tuple[float | None, str]:
    if evidence.failure:
        return None, evidence.failure
    record: Record = {}
    for index, phase in enumerate(PHASES):
        if index >= len(evidence.replies):
            return None, _stopped(evidence, phase)
        record = engine.parse_record(evidence.replies[index]) or {}
        failure = _failed(phase, record)
        if failure:
            return None, failure
    return _loss(evidence, record["log_probs"])


def _stopped(evidence: Evidence, phase: str) -> str:
    """The sentence for a box that ended, or was stopped, before it answered `phase`."""
    doing, budget = DOING[phase], evidence.budgets[PHASES.index(phase)]
    if evidence.stopped == "cpu":
        return f"needed more than {budget:g} s of CPU (counted by the grader, while {doing})"
    if evidence.stopped == "wall":
        return f"was still running after {wall_budget(budget):g} s (while {doing})"
    if evidence.stopped == "memory":
        return f"ran out of memory (more than {evidence.memory_bytes >> 20} MiB, while {doing})"
    if evidence.stopped == "truncated":
        return "wrote more than the grader reads"
    return f"ended without predictions while {doing}: {engine._ending('ended', sandbox.Limits(), evidence.status)}"


def _failed(phase: str, record: Record) -> str:
    """The sentence for an answer to `phase` that is not the one that lets the run go on, else ""."""
    if phase == "import":
        if record.get("imported") is True:
            return ""
        # nothing the box holds before the import is secret (the training split, the characters, the
        # set-up), so the import's words are shown, on one line
        words = record.get("import_error")
        return f"import failed: {printable(words[:SHOWN_CHARACTERS]) if isinstance(words, str) else 'no reason'}"
    if phase == "train" and record.get("trained") is True or phase == "weights" and "weights" in record or \
            phase == "predict" and "log_probs" in record:
        return ""
    if phase == "predict" and record.get("refused") == "layout":  # the reference box's words
        return "its trained parameters are not those of models.GPT's layout (names or shapes)"
    if phase == "predict" and record.get("refused") == "unreadable":
        return "sent trained parameters that could not be read (not a dict of names to float arrays)"
    if "error" not in record:
        return f"answered the {REQUESTS[phase]} request with something else"
    name = engine._exception_name(record["error"])  # the name of a built-in exception, never the box's words
    if name == "MemoryError":
        return f"ran out of memory (while {DOING[phase]})"
    stub = " (a task is still a stub)" if name == "NotImplementedError" else ""
    return f"failed while {DOING[phase]}: {name}{stub}"


def _loss(evidence: Evidence, sent: object) -> tuple[float | None, str]:
    """The loss, or None and why, from the log-probabilities the reference box sent (in the wire format)."""
    vocab = len(corpus().chars)
    try:
        log_probs = wire.decode(sent)
    except Exception:  # anything the box sent that is not well-formed data
        return None, "sent predictions that could not be read"
    if not isinstance(log_probs, np.ndarray) or log_probs.dtype.kind != "f" or \
            log_probs.shape != (evidence.windows, vocab):
        return None, (f"sent predictions of the wrong form (expected {evidence.windows} rows of {vocab} "
                      "log-probabilities, one row per window)")
    values = log_probs.astype(np.float64)
    if not np.isfinite(values).all():
        return None, "its trained parameters give predictions that are not all finite numbers"
    top = values.max(axis=1)  # (N,)
    logsumexp = top + np.log(np.exp(values - top[:, None]).sum(axis=1))
    if np.abs(logsumexp).max() > NORMALISED:
        return None, (f"sent rows that are not probability distributions (the logsumexp of every row must be 0 "
                      f"within {NORMALISED:g})")
    _, targets = validation_windows(evidence.seed, evidence.windows)
    loss = float(-values[np.arange(evidence.windows), targets].mean())
    if not math.isfinite(loss):
        return None, "gave the characters that follow probabilities too small to count (an infinite loss)"
    return loss, ""


def rank(entries: list[Entry]) -> list[tuple[int, Entry]]:
    """(rank, entry), the lowest loss first and the entries without one last, each sharing the last rank; equal
    losses share a rank; within a rank by student id, so the order never depends on which job ended first."""
    ordered = sorted(entries, key=lambda e: (e.validation_loss is None, e.validation_loss or 0.0, e.student))
    ranked: list[tuple[int, Entry]] = []
    for place, entry in enumerate(ordered, start=1):
        if ranked and ranked[-1][1].validation_loss == entry.validation_loss:
            place = ranked[-1][0]
        ranked.append((place, entry))
    return ranked


def _shown_loss(entry: Entry) -> str:
    return "" if entry.validation_loss is None else f"{entry.validation_loss:.4f}"


def write_leaderboard(out: Path, ranked: list[tuple[int, Entry]]) -> None:
    """out/leaderboard.csv, the instructor's (0600) from its first byte; no cell a spreadsheet would run."""
    grading.private_folder(out)
    table = io.StringIO(newline="")
    writer = csv.writer(table)
    writer.writerow(["rank", "student", "validation_loss", "reason", "cpu_seconds", "steps"])
    for place, entry in ranked:
        writer.writerow([grading.spreadsheet_cell(str(cell)) for cell in (
            place, entry.student, _shown_loss(entry), entry.reason, f"{entry.cpu_seconds:.1f}", entry.steps)])
    grading._write_private(out / "leaderboard.csv", table.getvalue())


def as_meta(ranked: list[tuple[int, Entry]]) -> list[dict[str, object]]:
    """The leaderboard for report.html: the loss rounded as the CSV shows it, None for an entry ranked last."""
    return [{"student": entry.student, "rank": place,
             "validation_loss": None if entry.validation_loss is None else round(entry.validation_loss, 4),
             "reason": entry.reason, "seconds": round(entry.cpu_seconds, 1)} for place, entry in ranked]
