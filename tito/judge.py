"""The trusted side of official grading: draw the cases, compute what is expected, judge the outputs.

Nothing here imports or runs student code: the outputs arrive as plain data from the sandbox
(tito.sandbox, tito.sandbox_runner) and are compared with values computed here.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings

from tito import wire
from tito.project import Stage
from tito.suite import CheckResult, compute_slice, load_checks

RUNNER = Path(__file__).with_name("sandbox_runner.py")
WIRE = Path(__file__).with_name("wire.py")


@dataclass
class Plan:
    """One stage's checks, each with its cases and expected values, drawn once per grading run so that
    every submission meets the same inputs."""
    stage: Stage
    checks: list
    cases: dict[str, list[dict]]
    expected: dict[str, list[Any]]
    seed: int
    shipped: str  # the compute slice of the suite, the only suite code the sandbox sees

    @property
    def max_score(self) -> float:
        return sum(check.points for check in self.checks)


def draw_cases(check, examples: int, seed: int) -> list[dict]:
    drawn: list[dict] = []

    @hypothesis_seed(seed)
    @settings(max_examples=examples, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(check.inputs)
    def collect(case: dict) -> None:
        drawn.append(case)

    collect()
    return drawn[:examples]


def make_plan(stage: Stage, seed: int, examples: int | None = None) -> Plan:
    checks = load_checks(stage)
    cases, expected = {}, {}
    for number, check in enumerate(checks):
        count = check.examples if examples is None else min(check.examples, examples)
        cases[check.name] = draw_cases(check, max(1, count), seed + number)
        expected[check.name] = [check._expected(case) if check._verdict is None else None
                                for case in cases[check.name]]
    return Plan(stage, checks, cases, expected, seed, compute_slice(stage.suite))


def prepare_job(plan: Plan, job: Path, package_files: dict[str, str]) -> None:
    """Lay out a job folder: lib/ (runner, wire, checklib, compute slice), pkg/ (the package), cases."""
    from tito.commands.export import write_package

    lib = job / "lib"
    lib.mkdir(parents=True)
    (job / "out").mkdir()
    shutil.copy2(RUNNER, lib / "runner.py")
    shutil.copy2(WIRE, lib / "wire.py")
    shutil.copy2(plan.stage.suite.parent / "checklib.py", lib / "checklib.py")
    (lib / "compute_slice.py").write_text(plan.shipped, encoding="utf-8")
    write_package(job / "pkg", package_files)
    work = [{"name": check.name, "timeout": float(check.timeout), "cases": plan.cases[check.name]}
            for check in plan.checks]
    (job / "cases.json").write_text(wire.dumps(work), encoding="utf-8")


def read_outputs(job: Path, limit: int = 256 << 20) -> tuple[dict[str, list[dict]], str | None]:
    """The first record per check, and the import error if the package could not be imported. Raises
    RuntimeError when the runner never started: a fault of the grader's set-up, not of the submission."""
    path = job / "out" / "outputs.jsonl"
    records: dict[str, list[dict]] = {}
    import_error = None
    if not path.is_file() or not path.read_text(encoding="utf-8", errors="replace").startswith('{"started": true}'):
        errors = (job / "setup-errors.txt").read_text(errors="replace").strip() if (job / "setup-errors.txt").exists() else ""
        raise RuntimeError(f"the sandbox did not start{': ' + errors[-300:] if errors else ''}")
    with open(path, encoding="utf-8", errors="replace") as stream:
        text = stream.read(limit)
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "import_error" in record and import_error is None:
            import_error = str(record["import_error"])[:300]
        name, results = record.get("check"), record.get("results")
        if isinstance(name, str) and isinstance(results, list) and name not in records:
            records[name] = results
    return records, import_error


def judge(plan: Plan, records: dict[str, list[dict]], import_error: str | None,
          stopped: str | None) -> list[CheckResult]:
    """Decide every check of the plan from the outputs the sandbox produced."""
    from checklib import CheckFailed  # loaded by load_checks from the stage's autograder folder

    results = []
    for check in plan.checks:
        cases = plan.cases[check.name]
        message = None
        if import_error is not None:
            message = f"your package could not be imported: {import_error}"
        elif check.name not in records:
            message = f"{check.doc}: did not run ({stopped or 'the run ended before this check'})"
        else:
            outputs = records[check.name]
            for index, case in enumerate(cases):
                what = check.what(case)
                if index >= len(outputs):
                    message = f"{what}: did not finish"
                    break
                result = outputs[index] if isinstance(outputs[index], dict) else {}
                if "stub" in result:
                    message = str(result["stub"])[:300]
                elif "timeout" in result:
                    message = f"{check.doc}: did not finish within {check.timeout:g} s"
                elif "error" in result:
                    message = f"{what}: your code raised {str(result['error'])[:300]}"
                elif "output" in result:
                    try:
                        check.judge(case, wire.decode(result["output"]), plan.expected[check.name][index])
                    except wire.WireError:
                        message = f"{what}: the result could not be read back"
                    except CheckFailed as failure:
                        message = failure.public or f"{check.doc}: not satisfied for {what}"
                    except Exception:
                        message = f"{what}: the result does not have the expected form"
                else:
                    message = f"{what}: no result"
                if message:
                    break
        passed = message is None
        results.append(CheckResult(check.name, check.task, check.points if passed else 0, check.points,
                                   passed, message or ""))
    return results
