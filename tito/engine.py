"""The one check engine: draw a stage's cases, run their compute parts in a box, judge the outcomes.

`tito test`, `tito grade` and the nbgrader judge all grade through `grade_stage`; they differ only in
the box (tito.sandbox: a plain child process or bubblewrap) and in the seed. Nothing here imports the
package under test: the runner (tito/shipped/runner.py) reports raw outcomes on a pipe, and `judge`
turns them into points and one sentence per failure, in this process, against values computed here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
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
    _expected: dict[tuple[str, int], Any] = field(default_factory=dict)

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


def _fingerprint(stage: Stage, seed: int, examples: int | None) -> str:
    import hypothesis

    digest = hashlib.sha256(f"{seed}/{examples}/{hypothesis.__version__}".encode())
    for path in [stage.suite, *(SHIPPED / name for name in SHIPPED_FILES)]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def make_plan(stage: Stage, *, seed: int, jobs: Path, examples: int | None = None) -> Plan:
    """Load the stage's checks and draw their cases, or reuse the job folder under `jobs` that holds the
    same cases (same suite, check library, seed and number of examples)."""
    checks = load_checks(stage)
    job = jobs / f"{stage.name}-{_fingerprint(stage, seed, examples)}"
    if (job / "work.json").is_file():
        work = wire.loads((job / "work.json").read_text(encoding="utf-8"))
        cases = {entry["name"]: entry["cases"] for entry in work["checks"]}
        if set(cases) == {check.name for check in checks}:
            return Plan(stage, checks, cases, seed, job)
    cases = {}
    for number, check in enumerate(checks):
        count = check.examples if examples is None else min(check.examples, examples)
        cases[check.name] = draw_cases(check, max(1, count), seed + number)
    _write_job(job, stage, checks, cases)
    return Plan(stage, checks, cases, seed, job)


def _write_job(job: Path, stage: Stage, checks: list[Check], cases: dict[str, list[dict]]) -> None:
    scratch = job.with_name(job.name + f".{time.monotonic_ns()}")
    (scratch / "lib").mkdir(parents=True)
    for name in SHIPPED_FILES:
        shutil.copy2(SHIPPED / name, scratch / "lib" / name)
    (scratch / "lib" / "compute_slice.py").write_text(compute_slice(stage.suite), encoding="utf-8")
    work = {"import_cpu": IMPORT_CPU_SECONDS, "import_wall": 3 * IMPORT_CPU_SECONDS,
            "checks": [{"name": c.name, "function": c.compute.__name__, "cpu": float(c.timeout),
                        "wall": 3 * float(c.timeout) + 10, "cases": cases[c.name]} for c in checks]}
    (scratch / "work.json").write_text(wire.dumps(work), encoding="utf-8")
    for path in [scratch, *scratch.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        scratch.rename(job)
    except OSError:  # another run wrote the same job meanwhile
        shutil.rmtree(scratch, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# Running: the runner in a box, started again after a check that killed it


@dataclass
class Report:
    """What the runner said, over all its starts."""
    outcomes: dict[str, list[dict]] = field(default_factory=dict)
    stopped: dict[str, str] = field(default_factory=dict)  # check -> how the box ended during it
    import_failure: str | None = None
    unfinished: str | None = None  # why the checks without outcomes never ran


def _records(data: bytes) -> list[dict]:
    records = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except (ValueError, RecursionError, MemoryError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _ending(exit: sandbox.Exit, limits: sandbox.Limits) -> str:
    if exit.timed_out:
        return f"the run was stopped after {limits.wall_seconds:g} s"
    if exit.truncated:
        return "your code wrote more than the grader reads"
    code = exit.returncode
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


def run_checks(plan: Plan, package: Path, *, isolation: str, limits: sandbox.Limits, slot: int = 0,
               locate: Locate | None = None) -> Report:
    """Run every check of the plan on the `tinytorch` found in `package`, starting the runner again after a
    check that ended its process. `locate` names the notebook cell of a failed import."""
    report = Report()
    names = [check.name for check in plan.checks]
    deadline = time.monotonic() + limits.wall_seconds
    first = 0
    for _ in range(MAX_RESTARTS + 1):
        exit = sandbox.run(plan.job, package, first, limits=limits, isolation=isolation, slot=slot,
                           deadline=deadline)
        records = _records(exit.report)
        if not any(record.get("importing") == first for record in records[:1]):
            if first == 0:
                raise RuntimeError(f"the grader's runner did not start ({_ending(exit, limits)})")
            report.unfinished = f"the grader could not start your package again ({_ending(exit, limits)})"
            return report
        tampered = next((str(r["tampered"])[:80] for r in records if "tampered" in r), None)
        if tampered is not None:
            message = f"your package changed the grader's code ({tampered}), so no result after that counts"
            if first == 0 and not any(r.get("imported") is True for r in records):
                report.import_failure = message
            else:
                current, _, _ = _read_sequence(records, names[first:], report)
                report.stopped.update({current: message} if current else {})
                report.unfinished = message
            return report
        failed = next((r for r in records if "import_error" in r or "import_timeout" in r), None)
        if failed is not None or not any(r.get("imported") is True for r in records):
            if first == 0:
                report.import_failure = _import_failure(failed, exit, limits, locate)
            else:  # what ran before the restart keeps its outcomes
                report.unfinished = f"importing tinytorch failed when the grader started it again: " \
                                    f"{_import_failure(failed, exit, limits, locate)}"
            return report
        current, finished, broken = _read_sequence(records, names[first:], report)
        if finished:
            return report
        ending = _ending(exit, limits)
        if broken:
            ending = "your code wrote into the grader's report"
        if current is not None:
            report.stopped[current] = ending
        if current is None or broken or exit.timed_out or exit.truncated:
            report.unfinished = ending
            return report
        first = names.index(current) + 1
        if first == len(names):
            return report
    report.unfinished = f"your code stopped the grader more than {MAX_RESTARTS} times"
    return report


def _read_sequence(records: list[dict], names: list[str], report: Report) -> tuple[str | None, bool, bool]:
    """Accept the runner's records only in the order it writes them: after "imported", `begin` then `check`
    for each check in turn, then "finished". Anything else (a record the package under test wrote on the
    report pipe) ends the reading: the check under way is not accepted. Returns (the check begun and not
    ended, whether the runner finished, whether the sequence was broken)."""
    position = next((i for i, r in enumerate(records) if r.get("imported") is True), len(records)) + 1
    expected = iter(names)
    current = None
    for record in records[position:]:
        if current is None and record == {"finished": True}:
            return None, True, False
        if current is None and set(record) == {"begin"}:
            name = next(expected, None)
            if record["begin"] != name:
                return None, False, True
            current = name
        elif current is not None and set(record) == {"check", "outcomes"} and record["check"] == current \
                and isinstance(record["outcomes"], list):
            report.outcomes[current] = record["outcomes"]
            current = None
        else:
            return current, False, True
    return current, False, False


def _import_failure(record: dict | None, exit: sandbox.Exit, limits: sandbox.Limits,
                    locate: Locate | None = None) -> str:
    if record is None:
        return f"importing tinytorch stopped the grader: {_ending(exit, limits)}"
    reported = _text(record["where"], 120) if record.get("where") else ""
    cell = locate(reported) if locate is not None and reported else None
    if "import_timeout" in record:
        spent = f"{IMPORT_CPU_SECONDS:g} s of CPU time" if record["import_timeout"] == "cpu" else \
            f"{3 * IMPORT_CPU_SECONDS:g} s (it was waiting)"
        where = f" (in {cell})" if cell else f" (at {reported})" if reported else ""
        return (f"importing tinytorch did not finish within {spent}{where}: "
                f"look for a loop, a wait or a long computation at the top level of an exported cell")
    if cell:  # one sentence of about 300 characters at most: the error, then its cell
        return f"your package could not be imported: {_text(record['import_error'], 120)}, raised in {cell}"
    where = f" (at {reported})" if reported else ""
    return f"your package could not be imported: {_text(record['import_error'])}{where}"


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
    def result(message: str = "", public: str | None = None, *, fault: bool = False) -> CheckResult:
        passed = not message or fault
        return CheckResult(check.name, check.task, check.points if passed else 0, check.points, passed,
                           message, message if public is None else public, fault)

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
        try:
            what = check.what(case)
        except Exception as error:  # the suite's own words failed
            return fault("describing the case", error)
        if index >= len(outcomes):
            return result(f"{what}: did not finish ({report.stopped.get(check.name, 'the run ended')})")
        outcome = outcomes[index] if isinstance(outcomes[index], dict) else {}
        message = _failure(check, what, outcome)
        if message is not None:
            return result(message)
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
            return result(_text(failure, 600), _text(failure.public or f"{what}: the result is wrong", 600))
        except Exception as error:  # the output had a form the judge cannot read: the student's result
            return result(f"{what}: the result does not have the expected form ({type(error).__name__}: "
                          f"{_text(str(error), 200)})", f"{what}: the result does not have the expected form")
    return result()


def _failure(check: Check, what: str, outcome: dict) -> str | None:
    """The sentence for an outcome that is not an output, or None for an output to judge."""
    where = f" (at {_text(outcome['where'], 120)})" if outcome.get("where") else ""
    if "stub" in outcome:
        stub = _text(outcome["stub"])
        return stub if stub.startswith("Task ") else f"{what}: NotImplementedError: {stub}"
    if "error" in outcome:
        return f"{what}: your code raised {_text(outcome['error'])}{where}"
    if "timeout" in outcome:
        if outcome["timeout"] == "cpu":
            return (f"{check.doc}: your code needed more than {check.timeout:g} s of CPU time{where}; "
                    f"look for an endless loop or a Python loop over elements")
        return f"{check.doc}: your code was still running after {3 * check.timeout + 10:g} s{where}"
    if "unsendable" in outcome:
        return f"{what}: the result is not plain data ({_text(outcome['unsendable'], 160)})"
    if "output" not in outcome:
        return f"{what}: no result"
    return None


def grade_stage(plan: Plan, package: Path, *, isolation: str, limits: sandbox.Limits,
                slot: int = 0, locate: Locate | None = None) -> StageResult:
    report = run_checks(plan, package, isolation=isolation, limits=limits, slot=slot, locate=locate)
    tests = judge(plan, report)
    notes = [report.import_failure] if report.import_failure else []
    return StageResult(plan.stage.number, sum(t.points for t in tests), plan.max_score, plan.seed, tests, notes)
