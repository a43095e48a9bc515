"""The one check engine: draw a stage's cases, run their compute parts in a box, judge the outcomes.

`tito test`, `tito grade` and the nbgrader judge all grade through `grade_stage`; they differ only in
the box (tito.sandbox: a plain child process or bubblewrap) and in the seed. Nothing here imports the
package under test: the runner (tito/shipped/runner.py) reports raw outcomes on a pipe, and `judge`
turns them into points and one sentence per failure, in this process, against values computed here.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import importlib.util
import json
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tito import sandbox
from tito.project import Stage
from tito.shipped import wire
from tito.shipped.checklib import Check
from tito.suite import compute_slice, load_checks, shipped_checklib

SHIPPED = Path(__file__).with_name("shipped")
SHIPPED_FILES = ("runner.py", "wire.py", "checklib.py")
IMPORT_CPU_SECONDS = 10.0
AUDIT_CPU_SECONDS = 5.0  # the runner's look over the grader's code in the box after each check
MAX_RESTARTS = 8  # a check that kills the runner costs that check; the run goes on from the next one
# A place in the package under test as the runner reports it ("core/tensor.py line 57, in sum") -> the
# notebook cell that wrote that line, in the student's words, or None
Locate = Callable[[str], str | None]


@dataclass
class CheckResult:
    id: str
    task: str
    points: float
    max_points: float
    passed: bool
    message: str  # one sentence about the student's code; "" when passed
    public: str = ""  # the same without expected values, for official feedback
    fault: bool = False  # the grader itself failed on this check: reported loudly, costs no points


@dataclass
class StageResult:
    stage: str
    score: float
    max_score: float
    seed: int
    tests: list[CheckResult]
    notes: list[str] = field(default_factory=list)  # about the whole run: import failures, the box ending
    public_notes: list[str] = field(default_factory=list)  # the same as official feedback shows them

    def as_json(self, *, public: bool = False) -> dict:
        tests = [{"id": t.id, "task": t.task, "points": t.points, "max_points": t.max_points, "passed": t.passed,
                  "message": t.public if public else t.message, "fault": t.fault} for t in self.tests]
        return {"stage": self.stage, "score": self.score, "max_score": self.max_score, "seed": self.seed,
                "notes": self.notes, "tests": tests}


def stage_seed(key: str, stage: Stage) -> int:
    """The seed of one stage's cases under a course key (`--seed`, or the course's own): the same key
    always draws the same cases, so an unchanged submission always gets the same grade. A keyed hash
    (HMAC-SHA256), so that no seed, nor all of them together, tells the key or another stage's seed."""
    digest = hmac.new(key.encode(), stage.name.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


# ---------------------------------------------------------------------------------------------------
# The plan: a stage's checks with their cases, drawn once and shared by every submission


@dataclass
class Plan:
    stage: Stage
    checks: list[Check]
    cases: dict[str, list[dict]]
    seed: int
    job: Path  # lib/ (runner, wire, checklib, compute slice) and work.json: read-only to every box
    fingerprint: str = ""  # of the suite, check library, seed and examples: equal plans draw equal cases
    _expected: dict[tuple[str, int], Any] = field(default_factory=dict)
    _known: frozenset[str] | None = None

    @property
    def known_words(self) -> frozenset[str]:
        """The words and numbers the grader writes that no box is given: those of the suite outside its
        compute slice, and of checklib's messages. A verdict's public words keep only these (`confine`)."""
        if self._known is None:
            suite = set(_WORDS.findall(self.stage.suite.read_text(encoding="utf-8")))
            inside = set(_WORDS.findall((self.job / "lib" / "compute_slice.py").read_text(encoding="utf-8")))
            checklib = set(_WORDS.findall((SHIPPED / "checklib.py").read_text(encoding="utf-8")))
            self._known = frozenset((suite - inside) | checklib)
        return self._known

    @property
    def max_score(self) -> float:
        return sum(check.points for check in self.checks)

    def expected(self, check: Check, index: int) -> Any:
        """The right answer for one case, computed here once (numpy or finite differences)."""
        key = (check.name, index)
        if key not in self._expected:
            assert check._expected is not None, f"check {check.name} has neither expected() nor verdict()"
            self._expected[key] = check._expected(self.cases[check.name][index])
        return self._expected[key]


def _size(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value) + len(value)
    return int(getattr(value, "size", 1))


def draw_cases(check: Check, examples: int, seed: int) -> list[dict]:
    """`examples` cases of a check, the same for the same seed; smallest first, so that the first failing
    case, which decides the message, is a small one."""
    if check.inputs is None:
        return [{}]
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: list[dict] = []

    @hypothesis_seed(seed)
    @settings(max_examples=examples, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(check.inputs)
    def collect(case: dict) -> None:
        drawn.append(case)

    collect()
    return sorted(drawn[:examples], key=_size)


def _hypothesis_version() -> bytes:
    """hypothesis's version file, found without importing hypothesis (start_early runs before it is imported)."""
    spec = importlib.util.find_spec("hypothesis")
    assert spec is not None and spec.origin is not None, "hypothesis is a dependency of tito"
    return (Path(spec.origin).parent / "version.py").read_bytes()


def _fingerprint(stage: Stage, seed: int, examples: int | None) -> str:
    digest = hashlib.sha256(f"{seed}/{examples}/".encode())
    digest.update(_hypothesis_version())
    for path in [stage.suite, *(SHIPPED / name for name in SHIPPED_FILES)]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def make_plan(stage: Stage, *, seed: int, jobs: Path, examples: int | None = None,
              cases: dict[str, list[dict]] | None = None) -> Plan:
    """Load the stage's checks and draw their cases, or reuse the job folder under `jobs` that holds the
    same cases (same suite, check library, seed and number of examples). `cases`: the cases drawn before, by
    this plan's fingerprint (a worker is sent the coordinator's; a regrade reuses the first run's). Drawing
    is not reproducible across processes in every detail (hypothesis drew one integer of 01's cases otherwise
    in a process holding a Dask client), so cases drawn once are kept, never drawn again."""
    checks = load_checks(stage)
    fingerprint = _fingerprint(stage, seed, examples)
    job = jobs / f"{stage.name}-{fingerprint}"
    names = {check.name for check in checks}
    if cases is not None and set(cases) == names:
        if not (job / CASES).is_file():
            _write_job(job, stage, checks, cases)
        return Plan(stage, checks, wire.loads((job / CASES).read_text(encoding="utf-8")), seed, job, fingerprint)
    if (job / CASES).is_file():
        cases = wire.loads((job / CASES).read_text(encoding="utf-8"))
        if set(cases) == names:
            return Plan(stage, checks, cases, seed, job, fingerprint)
    cases = {}
    for number, check in enumerate(checks):
        count = check.examples if examples is None else min(check.examples, examples)
        cases[check.name] = draw_cases(check, max(1, count), seed + number)
        if check.timed is not None:  # every timed call on inputs of its own: no result can be reused
            cases[check.name] = [{**case, "seed": _derived_seed(seed, check.name, index)}
                                 for index, case in enumerate(cases[check.name])]
    _write_job(job, stage, checks, cases)
    return Plan(stage, checks, cases, seed, job, fingerprint)


def fingerprint(stage: Stage, seed: int, examples: int | None) -> str:
    """The fingerprint a plan of these would have (see Plan.fingerprint)."""
    return _fingerprint(stage, seed, examples)


def plan_fingerprint(plan: Plan) -> str:
    """What proves that two plans, made in two processes (the coordinator's and a worker's), draw the same
    cases: the same suite, check library, hypothesis, seed and number of examples."""
    return plan.fingerprint


def _derived_seed(seed: int, name: str, index: int) -> int:
    digest = hmac.new(str(seed).encode(), f"{name}/{index}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


CASES = "cases.json"  # beside the job's lib/ and work.json, never bound into a box: cases go one at a time


def _write_job(job: Path, stage: Stage, checks: list[Check], cases: dict[str, list[dict]]) -> None:
    scratch = job.with_name(job.name + f".{time.monotonic_ns()}")
    (scratch / "lib").mkdir(parents=True)
    for name in SHIPPED_FILES:
        shutil.copy2(SHIPPED / name, scratch / "lib" / name)
    (scratch / "lib" / "compute_slice.py").write_text(compute_slice(stage.suite), encoding="utf-8")
    work = {"import_cpu": IMPORT_CPU_SECONDS, "import_wall": 3 * IMPORT_CPU_SECONDS,
            "checks": [{"name": c.name, "function": c.compute.__name__,
                        "yardstick": c.timed.yardstick.__name__ if c.timed else None} for c in checks]}
    (scratch / "work.json").write_text(wire.dumps(work), encoding="utf-8")
    for path in scratch.rglob("*"):  # the grader's; a box gets its own view (sandbox.box_view)
        path.chmod(0o700 if path.is_dir() else 0o600)
    scratch.chmod(0o711)  # crossable to a box's view inside it, not listable
    descriptor = os.open(scratch / CASES, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        stream.write(wire.dumps(cases))
    try:
        scratch.rename(job)
    except OSError:  # another run wrote the same job meanwhile
        shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# Running: the runner in a box, started again after a check that killed it


@dataclass
class Report:
    """What the boxes did, as the parent saw it: the reply each case's request got, how a box ended during a
    check, and the parent's own timings of timed checks. A reply is kept as the bytes the box sent (read
    again by `read_outcome` when judged), so what a run keeps is at most what the parent reads from its boxes,
    `sandbox.Limits.report_bytes` over the whole run, restarts included (docs/security.md, invariant 3)."""
    outcomes: dict[str, list[bytes]] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)  # check -> how the box ended during it
    import_failure: str | None = None
    unfinished: str | None = None  # why the checks without outcomes never ran
    seconds: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # timed check -> (yours, yardstick)
    said: list[str] = field(default_factory=list)  # what the box wrote into texts of the run (import failures)
    package: Path | None = None  # the package graded, to check the places the box names
    files: frozenset[str] = frozenset()  # its files under tinytorch/, kept when the package is gone (a worker's)


IMPORT_ENDINGS = {"import_error", "import_timeout", "tampered"}
MAX_RECORD_VALUES = 200_000  # JSON values in one reply: a check's outputs are arrays, sent as strings
MAX_RECORD_DEPTH = 64
_STRING = re.compile(rb'"[^"]*"')  # once no quote is escaped: linear, whatever the line holds
_BRACKETS = re.compile(rb"[\[\]{}]")


def parse_record(line: bytes) -> dict | None:
    """One line from a box as a dict, or None. What is parsed is bounded before it is parsed: the number of
    values and the nesting, counted with the strings' contents skipped, so no line costs this process more
    than a small multiple of its size."""
    skeleton = _STRING.sub(b'""', line.replace(b"\\\\", b"").replace(b'\\"', b""))
    if sum(skeleton.count(token) for token in (b",", b":", b"[", b"{")) > MAX_RECORD_VALUES:  # every container too
        return None
    depth = deepest = 0
    for bracket in _BRACKETS.findall(skeleton):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_RECORD_DEPTH:
        return None
    try:
        record = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError, MemoryError):
        return None
    return record if isinstance(record, dict) else None


OUTCOME_KEYS = ("output", "stub", "error", "where", "timeout", "unsendable")  # what a runner's outcome holds
_NOT_AN_OUTPUT = frozenset({"stub", "error", "timeout", "unsendable"})


def read_outcome(reply: bytes) -> dict:
    """The outcome a kept reply carries ({} for one without a dict), parsed again within parse_record's bounds;
    of its parts only those a runner writes, and of those only strings but the output."""
    record = parse_record(reply) or {}
    found = record.get("outcome")
    if not isinstance(found, dict):
        return {}
    return {key: value for key, value in found.items() if key in OUTCOME_KEYS and (
        key == "output" or isinstance(value, str))}


def _ending(why: str, limits: sandbox.Limits, returncode: int | None) -> str:
    if why == "wall":
        return f"the run was stopped after {limits.wall_seconds:g} s"
    if why == "truncated":
        return "your code wrote more than the grader reads"
    code = returncode
    if code is not None and 128 < code < 128 + 65:  # bubblewrap reports a signal as 128 + its number
        code = 128 - code
    if code is not None and code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        reason = {"SIGXCPU": " (CPU time limit)", "SIGKILL": " (killed: a limit was reached)",
                  "SIGSEGV": " (a crash in native code)"}.get(name, "")
        return f"the process running your code was killed by {name}{reason}"
    return f"your code ended the process (exit status {code})"


def _text(value: Any, limit: int = 300) -> str:
    return str(value)[:limit]


def _said(value: Any, limit: int) -> str:
    """A text the box sent, cut to `limit`; anything else it sent in its place is not shown (a number of 300
    digits would carry 120 bytes past the scrub, which reads strings)."""
    return value[:limit] if isinstance(value, str) else "(something that is not text)"


def _head_and_tail(text: str, limit: int) -> str:
    """`text` within `limit` characters, keeping its start and its end: a verdict's summary ("3 of 12 values
    wrong, the first at index (0, 2): expected 1.0 but got 2.0") stands last, after the arrays."""
    if len(text) <= limit:
        return text
    tail = limit // 2
    return f"{text[:limit - tail - 3]} … {text[-tail:]}"


class _Conversation:
    """One box and the requests sent to it, numbered: a reply counts only for the request in flight."""

    def __init__(self, job: Path, package: Path | None, *, isolation: str, limits: sandbox.Limits,
                 slot: int) -> None:
        self.box = sandbox.Box(job, package, limits=limits, isolation=isolation, slot=slot)
        self.job, self.package, self.limits, self.isolation, self.slot = job, package, limits, isolation, slot
        self.number = 0

    def hello(self, deadline: float) -> tuple[dict | None, str]:
        """The runner's first words: {"importing": true}, then how the import went."""
        first, why, _ = self._record(deadline, None)
        if first != {"importing": True}:
            return None, why or "did not start"
        cpu_limit = self.box.cpu() + IMPORT_CPU_SECONDS + sandbox.CPU_GRACE
        import_deadline = min(deadline, time.monotonic() + 3 * IMPORT_CPU_SECONDS + sandbox.WALL_GRACE)
        while True:  # records of any other form are what the package wrote on the pipe: skipped
            second, why, _ = self._record(import_deadline, cpu_limit)
            if second is None or second == {"imported": True} or set(second) & IMPORT_ENDINGS:
                self.box.watch_processes()
                return second, why

    def ask(self, check: Check, case: dict, deadline: float,
            cpu_left: float) -> tuple[dict | None, str, float, bytes]:
        """One case's outcome (None and why the box ended), the seconds it took by this process's clock, and the
        reply's bytes."""
        self.number += 1
        wall_left = max(0.0, deadline - time.monotonic())
        request = json.dumps({"n": self.number, "run": check.name, "case": wire.encode(case),
                              "cpu": max(0.01, cpu_left), "wall": max(0.01, wall_left)}) + "\n"
        cpu_limit = self.box.cpu() + cpu_left + sandbox.CPU_GRACE
        started = time.monotonic()
        if not self.box.send(request.encode(), deadline):
            _, why = self.box.receive(min(deadline, time.monotonic() + 1.0))
            return None, why or "ended", 0.0, b""
        while True:
            record, why, line = self._record(deadline + sandbox.WALL_GRACE, cpu_limit)
            if record is None:
                return None, why, time.monotonic() - started, b""
            if record.get("n") != self.number:
                continue  # not the reply to this request: something the package wrote on the pipe
            seconds = time.monotonic() - started
            if "tampered" in record:
                return {"tampered": _said(record["tampered"], 80)}, "", seconds, b""
            found = record.get("outcome")
            return (found if isinstance(found, dict) else {}), "", seconds, line

    def audit(self, deadline: float) -> tuple[str, str]:
        """After a check's cases: ("", "") when the box says the grader's code in it is as it was before the
        package was imported, (the place it changed, "") when it says otherwise, else ("", why it ended). A
        box that does not answer cleanly has its check's outcomes thrown away."""
        self.number += 1
        if not self.box.send(json.dumps({"n": self.number, "audit": True}).encode() + b"\n", deadline):
            _, why = self.box.receive(min(deadline, time.monotonic() + 1.0))
            return "", why or "ended"
        cpu_limit = self.box.cpu() + AUDIT_CPU_SECONDS
        while True:
            record, why, _ = self._record(min(deadline, time.monotonic() + 3 * AUDIT_CPU_SECONDS), cpu_limit)
            if record is None:
                return "", why
            if record.get("n") == self.number:
                if record.get("audit") == "clean":
                    return "", ""
                return _said(record.get("tampered") or "an audit it did not answer", 80), ""

    def _record(self, deadline: float, cpu_limit: float | None) -> tuple[dict | None, str, bytes]:
        while True:
            line, why = self.box.receive(deadline, cpu_limit)
            if line is None:
                return None, why, b""
            record = parse_record(line)
            if record is not None:
                return record, "", line

    def close(self) -> int | None:
        return self.box.close()


def start_early(stage: Stage, package: Path, *, seed: int, jobs: Path, isolation: str, limits: sandbox.Limits,
                slot: int = 0, examples: int | None = None) -> _Conversation | None:
    """The package's box started before its plan is loaded, when the plan's job folder is there from an
    earlier run (`tito test` again): the box's interpreter, numpy and the package import while this process
    loads the suite. Hand it to run_checks, which uses it for a plan of that job folder and closes it
    otherwise; None when there is no such folder yet."""
    job = jobs / f"{stage.name}-{_fingerprint(stage, seed, examples)}"
    if not (job / CASES).is_file() or not (job / "work.json").is_file():
        return None
    return _Conversation(job, package, isolation=isolation, limits=limits, slot=slot)


def run_checks(plan: Plan, package: Path, *, isolation: str, limits: sandbox.Limits, slot: int = 0,
               locate: Locate | None = None, started: _Conversation | None = None) -> Report:
    """Run every check of the plan on the `tinytorch` found in `package`, one case per request, starting the
    runner again after a check that ended its process. Budgets and deadlines are this process's: a check's
    CPU time is read from outside the box and its wall time on this clock. A timed check's cases also run,
    taking turns, in a box without the package (the yardstick), each timed here. What the parent reads from
    the package's boxes is `limits.report_bytes` over the whole run, restarts included. `locate` names the
    notebook cell of a failed import; `started`, a box from start_early."""
    if started is not None and (started.job, started.package, started.limits, started.isolation, started.slot) != \
            (plan.job, package, limits, isolation, slot):
        started.close()
        started = None
    report = Report(package=package, files=frozenset(
        str(path.relative_to(package / "tinytorch")) for path in (package / "tinytorch").rglob("*.py")))
    read = 0  # bytes read from the package's boxes closed so far
    deadline = time.monotonic() + limits.wall_seconds
    conversation: _Conversation | None = None
    yardstick: _Conversation | None = None
    starts = 0
    index = 0
    try:
        while index < len(plan.checks):
            check = plan.checks[index]
            if conversation is None:
                if starts > MAX_RESTARTS:
                    report.unfinished = f"your code stopped the grader more than {MAX_RESTARTS} times"
                    return report
                starts += 1
                if read >= limits.report_bytes:
                    report.unfinished = _ending("truncated", limits, None)
                    return report
                if started is not None:  # the first start, begun before the plan was loaded
                    conversation, started = started, None
                else:
                    conversation = _Conversation(plan.job, package, isolation=isolation, slot=slot,
                                                 limits=replace(limits, report_bytes=limits.report_bytes - read))
                record, why = conversation.hello(deadline)
                if record is None and why == "did not start":
                    status = conversation.close()
                    if starts == 1:
                        raise RuntimeError(f"the grader's runner did not start ({_ending(why, limits, status)})")
                    report.unfinished = "the grader could not start your package again " \
                                        f"({_ending(why, limits, status)})"
                    return report
                if record is None or record.get("imported") is not True:
                    report.said += box_strings(record)
                    failure = _start_failure(record, why, conversation, limits, locate)
                    if starts == 1:
                        report.import_failure = failure
                    else:  # what ran before the restart keeps its outcomes
                        report.unfinished = f"importing tinytorch failed when the grader started it again: {failure}"
                    return report

            def yardstick_box(check: Check = check) -> _Conversation:
                """The box without the package, started when a timed check's first output needs it."""
                nonlocal yardstick
                if yardstick is None:
                    yardstick = _Conversation(plan.job, None, isolation=isolation, limits=limits, slot=slot)
                    record, why = yardstick.hello(deadline)
                    if record is None or record.get("imported") is not True:
                        raise RuntimeError(f"the yardstick of {check.name} did not start ({why or record})")
                return yardstick

            why = _run_check(plan, check, conversation, yardstick_box, report, deadline)
            if why:
                status = conversation.close()
                read += conversation.box.read_bytes
                conversation = None
                if why == "tampered":
                    message = report.stopped[check.name]
                    report.unfinished = message
                    return report
                report.stopped[check.name] = _budget_words(why, check) or _ending(why, limits, status)
                if why in ("wall", "truncated") and time.monotonic() >= deadline or why == "truncated":
                    report.unfinished = _ending(why, limits, status)
                    return report
            index += 1
        return report
    finally:
        for open_box in (conversation, yardstick, started):
            if open_box is not None:
                open_box.close()


def _budget_words(why: str, check: Check) -> str:
    if why == "cpu":
        return f"your code needed more than {check.timeout:g} s of CPU time (counted by the grader)"
    if why == "check-wall":
        return f"your code was still running after {3 * check.timeout + 10:g} s"
    return ""


def _run_check(plan: Plan, check: Check, conversation: _Conversation, yardstick: Callable[[], _Conversation],
               report: Report, run_deadline: float) -> str:
    """Ask for each case of the check in turn; stop at the first case that is not an output. A timed check's
    case that gave an output is then asked of the yardstick, the box without the package, taking turns (a
    stub's check never starts one). Returns "" or why the box ended ("cpu", "wall", "check-wall", "ended",
    "truncated", "tampered")."""
    outcomes: list[bytes] = []
    report.outcomes[check.name] = outcomes
    timings: list[tuple[float, float]] = []
    cpu_left = float(check.timeout)
    check_deadline = min(run_deadline, time.monotonic() + 3 * float(check.timeout) + 10)
    for case in plan.cases[check.name]:
        cpu_before = conversation.box.cpu()
        found, why, seconds, reply = conversation.ask(check, case, check_deadline, cpu_left)
        cpu_left -= conversation.box.cpu() - cpu_before if found is not None else 0
        if found is None:
            if why == "wall" and time.monotonic() < run_deadline:
                why = "check-wall"
            if not outcomes:
                del report.outcomes[check.name]
            return why
        if "tampered" in found:
            report.stopped[check.name] = _tampered(found["tampered"])
            if not outcomes:
                del report.outcomes[check.name]
            return "tampered"
        outcomes.append(reply)
        if "output" not in found:
            break
        if check.timed is not None:  # the package's box stopped meanwhile: nothing of it competes
            conversation.box.pause()
            try:
                yard, why, yard_seconds, _ = yardstick().ask(check, case, run_deadline, float(check.timeout))
            finally:
                conversation.box.resume()
            if yard is None or "output" not in yard:
                raise RuntimeError(f"the yardstick of {check.name} failed ({why or _text(yard, 200)})")
            timings.append((seconds, yard_seconds))
    changed, why = conversation.audit(min(run_deadline, check_deadline + 2 * AUDIT_CPU_SECONDS))
    if changed or why:
        del report.outcomes[check.name]
        if changed:
            report.stopped[check.name] = _tampered(changed)
            return "tampered"
        return "check-wall" if why == "wall" and time.monotonic() < run_deadline else why
    if check.timed is not None:
        report.seconds[check.name] = timings
    return ""


def _tampered(what: str) -> str:
    return f"your package changed the grader's code ({what}), so no result after that counts"


def _start_failure(record: dict | None, why: str, conversation: _Conversation, limits: sandbox.Limits,
                   locate: Locate | None) -> str:
    if record is not None and "tampered" in record:
        return _tampered(_said(record["tampered"], 80))
    if record is not None and ("import_error" in record or "import_timeout" in record):
        return _import_failure(record, why, limits, None, locate)
    if why == "cpu":
        return _import_failure({"import_timeout": "cpu"}, why, limits, None, locate)
    if why == "wall":
        return _import_failure({"import_timeout": "wall"}, why, limits, None, locate)
    status = conversation.close()
    return _import_failure(None, why, limits, status, locate)


def _import_failure(record: dict | None, why: str, limits: sandbox.Limits, status: int | None,
                    locate: Locate | None = None) -> str:
    if record is None:
        return f"importing tinytorch stopped the grader: {_ending(why, limits, status)}"
    reported = _said(record["where"], 120) if record.get("where") else ""
    cell = locate(reported) if locate is not None and reported else None
    if "import_timeout" in record:
        spent = f"{IMPORT_CPU_SECONDS:g} s of CPU time" if record["import_timeout"] == "cpu" else \
            f"{3 * IMPORT_CPU_SECONDS:g} s (it was waiting)"
        where = f" (in {cell})" if cell else f" (at {reported})" if reported else ""
        return (f"importing tinytorch did not finish within {spent}{where}: "
                f"look for a loop, a wait or a long computation at the top level of an exported cell")
    if cell:  # one sentence of about 300 characters at most: the error, then its cell
        return f"your package could not be imported: {_said(record['import_error'], 120)}, raised in {cell}"
    where = f" (at {reported})" if reported else ""
    return f"your package could not be imported: {_said(record['import_error'], 300)}{where}"


# ---------------------------------------------------------------------------------------------------
# Judging: the only place that decides a check and words the result


def judge(plan: Plan, report: Report) -> list[CheckResult]:
    return guarded(plan.checks, [_judge_check(plan, check, report) for check in plan.checks])


def guarded(checks: list[Check], results: list[CheckResult]) -> list[CheckResult]:
    """A guard check (one that code ignoring its input could pass: an expected error, an unchanged input)
    keeps its points only when every other check of its task passed, so neither a constant implementation
    nor a forged report earns it (docs/security.md, invariant 2). A grader fault counts as passed here."""
    failed: dict[str, str] = {}
    for check, result in zip(checks, results):
        if not check.guard and not result.passed:
            failed.setdefault(check.task, check.name)
    out = []
    for check, result in zip(checks, results):
        if check.guard and result.passed and not result.fault and check.task in failed:
            why = (f"{check.doc}: counts only together with the other checks of task {check.task}, and "
                   f"{failed[check.task]} failed")
            result = replace(result, points=0, passed=False, message=why, public=why)
        out.append(result)
    return out


def _judge_check(plan: Plan, check: Check, report: Report) -> CheckResult:
    current: list[dict] = []  # the outcome judged now: what the box wrote in it a message may reflect

    def result(message: str = "", public: str | None = None, *, fault: bool = False) -> CheckResult:
        passed = not message or fault
        said = list(report.said)  # what the box wrote that a message may reflect: kept out of the public words
        for outcome in current:
            said += box_strings({key: _after_name(value) if key in ("error", "stub") else value
                                 for key, value in outcome.items() if key != "where"})
        return CheckResult(check.name, check.task, check.points if passed else 0, check.points, passed,
                           message, scrub(message if public is None else public, said) if message else "", fault)

    def fault(step: str, error: Exception) -> CheckResult:
        return result(f"grader fault in check {check.name} ({step}): {type(error).__name__}: {_text(error, 200)}",
                      fault=True)

    if report.import_failure is not None:
        return result(report.import_failure)
    outcomes = report.outcomes.get(check.name)
    if outcomes is None:
        if check.name in report.stopped:
            return result(f"{check.doc}: {report.stopped[check.name]} during this check")
        return result(f"{check.doc}: did not run ({report.unfinished or 'the run ended before this check'})")
    checklib = shipped_checklib()
    for index, case in enumerate(plan.cases[check.name]):
        outcome = read_outcome(outcomes[index]) if index < len(outcomes) else None
        if outcome is not None and "output" in outcome and not _NOT_AN_OUTPUT.intersection(outcome):
            try:  # the common case, a result to judge: the case is put in words only if it fails
                output = wire.decode(outcome["output"])
                expected = plan.expected(check, index) if check._verdict is None else None
                check.judge(case, output, expected)
                continue
            except Exception:  # noqa: BLE001 (judged again below, with the words and the faults)
                pass
        try:
            what = check.what(case)
        except Exception as error:  # the suite's own words failed
            return fault("describing the case", error)
        if outcome is None:
            return result(f"{what}: did not finish ({report.stopped.get(check.name, 'the run ended')})")
        current[:] = [outcome]
        sentences = _failure(check, what, outcome, report.files, {c.task for c in plan.checks})
        if sentences is not None:
            return result(*sentences)
        try:
            output = wire.decode(outcome["output"])
        except Exception:  # anything the box sent that is not well-formed data is the submission's
            return result(f"{what}: the result could not be read back")
        try:
            expected = plan.expected(check, index) if check._verdict is None else None
        except Exception as error:  # computing the right answer failed: the grader's fault
            return fault("computing the expected value", error)
        try:
            check.judge(case, output, expected)
        except checklib.CheckFailed as failure:
            public = failure.public or f"{what}: the result is wrong"
            known = plan.known_words | set(_WORDS.findall(f"{what} {check.doc}"))
            return result(_head_and_tail(str(failure), 600), confine(public, what, known))
        except Exception as error:  # the output had a form the judge cannot read: the student's result
            return result(f"{what}: the result does not have the expected form ({type(error).__name__}: "
                          f"{_text(str(error), 200)})", f"{what}: the result does not have the expected form")
    if check.timed is not None:
        return result(_too_slow(check, plan.cases[check.name][0], report.seconds.get(check.name, [])))
    return result()


def _too_slow(check: Check, case: dict, seconds: list[tuple[float, float]]) -> str:
    """The sentence for a timed check whose values were right: "" when its best time, taken by this process,
    is within its limit of the yardstick's best on the same cases, taking turns."""
    assert check.timed is not None
    if not seconds:
        return f"{check.what(case)}: the grader has no time of it"
    ratio = min(ours for ours, _ in seconds) / max(1e-9, min(yard for _, yard in seconds))
    if ratio <= check.timed.limit:
        return ""
    advice = f". {check.timed.advice}" if check.timed.advice else ""
    return (f"{check.what(case)}: the values are right, but it took {ratio:.0f} times as long as "
            f"{check.timed.against} (at most {check.timed.limit:g} times is allowed){advice}")


def _failure(check: Check, what: str, outcome: dict, package: frozenset[str],
             tasks: set[str]) -> tuple[str, str] | None:
    """(the sentence, its public form) for an outcome that is not an output, or None for an output to judge.
    The public form names only what the grader can check, each from a short list it knows: a task of the
    stage, a built-in exception's name, a file of the package (not its line: a line number is the box's
    choice of some twenty bits), never the words of the student's code."""
    where = f" (at {_text(outcome['where'], 120)})" if outcome.get("where") else ""
    public_where = _public_where(outcome.get("where"), package)
    if "stub" in outcome:
        stub = _text(outcome["stub"])
        task = re.match(r"Task (\d\d\.\d{1,2})\b", stub)
        public = f"Task {task[1]}: not implemented yet" if task and task[1] in tasks else \
            f"{what}: not implemented yet"
        return (stub if stub.startswith("Task ") else f"{what}: NotImplementedError: {stub}"), public
    if "error" in outcome:
        return (f"{what}: your code raised {_text(outcome['error'])}{where}",
                f"{what}: your code raised {_exception_name(outcome['error'])}{public_where}")
    if "timeout" in outcome:
        if outcome["timeout"] == "cpu":
            words = (f"{check.doc}: your code needed more than {check.timeout:g} s of CPU time{{}}; "
                     f"look for an endless loop or a Python loop over elements")
            return words.format(where), words.format(public_where)
        words = f"{check.doc}: your code was still running after {3 * check.timeout + 10:g} s{{}}"
        return words.format(where), words.format(public_where)
    if "unsendable" in outcome:
        return f"{what}: the result is not plain data ({_text(outcome['unsendable'], 160)})", \
            f"{what}: the result is not plain data (return numbers, strings, numpy arrays, or lists of these)"
    if "output" not in outcome:
        return f"{what}: no result", f"{what}: no result"
    return None


_WHERE = re.compile(r"([\w/]{1,80}\.py) line (\d{1,6})\b")
_BUILTIN_EXCEPTIONS = frozenset(name for name, value in vars(builtins).items()
                                if isinstance(value, type) and issubclass(value, BaseException))


def _public_where(where: Any, package: frozenset[str]) -> str:
    """" (in core/tensor.py)" when the box named a file the package holds, else ""."""
    match = _WHERE.match(where) if isinstance(where, str) else None
    if match is None or ".." in match[1] or match[1] not in package:
        return ""
    return f" (in {match[1]})"


def _after_name(text: Any) -> Any:
    """An error's or a stub's words without the name in front ("ValueError: ...", "Task 01.3: ..."), which
    the public words check and show on their own."""
    return text.split(":", 1)[-1] if isinstance(text, str) else text


def _exception_name(error: Any) -> str:
    name = str(error).split(":", 1)[0].strip()
    return name if name in _BUILTIN_EXCEPTIONS else "an exception of its own kind"


SCRUB_WINDOW = 8  # no run of this many characters the box wrote reaches official feedback
SCRUB_BUDGET = 1 << 18  # characters of box text considered; past them, a message is cut to its start


def box_strings(value: Any) -> list[str]:
    """Every string in data the box sent (arrays' payloads aside), for `scrub`."""
    found: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            pending += [v for k, v in item.items() if k not in ("__ndarray__", "dtype")] + list(item)
        elif isinstance(item, (list, tuple)):
            pending += list(item)
    return found


def scrub(text: str, said: list[str]) -> str:
    """`text` with every run of SCRUB_WINDOW or more characters that also stands in something the box wrote
    replaced by "…": the only way box text reaches official feedback is then in pieces too short to carry
    code, a key or a line of the hidden suite (docs/security.md, invariant 6)."""
    strings = [piece for piece in said if len(piece) >= SCRUB_WINDOW]
    if not strings or len(text) < SCRUB_WINDOW:
        return text
    if sum(map(len, strings)) > SCRUB_BUDGET:
        return text[:text.find(":") + 1 or 80] + " …"
    windows = {piece[i:i + SCRUB_WINDOW] for piece in strings for i in range(len(piece) - SCRUB_WINDOW + 1)}
    windows |= {repr(piece)[1:-1][i:i + SCRUB_WINDOW] for piece in strings if repr(piece)[1:-1] != piece
                for i in range(len(repr(piece)) - 1 - SCRUB_WINDOW)}
    hidden = [False] * len(text)
    for i in range(len(text) - SCRUB_WINDOW + 1):
        if text[i:i + SCRUB_WINDOW] in windows:
            hidden[i:i + SCRUB_WINDOW] = [True] * SCRUB_WINDOW
    out, previous = [], False
    for character, gone in zip(text, hidden):
        if not gone:
            out.append(character)
        elif not previous:
            out.append("…")
        previous = gone
    return "".join(out)


_WORDS = re.compile(r"[A-Za-z_]+|\d+")
CONFINED_CHARACTERS = 160  # of a verdict's public words after the case's description


def confine(public: str, what: str, known: frozenset[str] | set[str]) -> str:
    """A verdict's public words with every word and number the grader did not write replaced by "…", and at
    most CONFINED_CHARACTERS after the case's description: a box's output reaches official feedback only as
    the grader's own words, chosen among a known few, never as digits or text of its choice (docs/security.md,
    invariant 6). "-0.5" the box returned becomes "-…" unless the grader's words hold 0 and 5."""
    head = what if public.startswith(what) else ""
    rest = public[len(head):]
    out, last = [], 0
    for token in _WORDS.finditer(rest):
        out.append(rest[last:token.start()])
        keep = token[0] in known
        if keep or not out or not out[-1].endswith("…"):
            out.append(token[0] if keep else "…")
        last = token.end()
    out.append(rest[last:])
    text = "".join(out)
    return head + (text if len(text) <= CONFINED_CHARACTERS else text[:CONFINED_CHARACTERS - 2] + " …")


def grade_stage(plan: Plan, package: Path, *, isolation: str, limits: sandbox.Limits,
                slot: int = 0, locate: Locate | None = None, started: _Conversation | None = None) -> StageResult:
    return stage_result(plan, run_checks(plan, package, isolation=isolation, limits=limits, slot=slot,
                                         locate=locate, started=started))


def stage_result(plan: Plan, report: Report) -> StageResult:
    """The stage's grade from what its boxes did: judged here, in the trusted process."""
    tests = judge(plan, report)
    notes = [report.import_failure] if report.import_failure else []
    return StageResult(plan.stage.number, sum(t.points for t in tests), plan.max_score, plan.seed, tests, notes,
                       [scrub(note, report.said) for note in notes])
