"""The one check engine, in-process and fast: a tiny stage with a tiny suite, graded on small packages
that do the work, skip it, get it wrong, or misbehave in the ways a student's code can."""

from __future__ import annotations

import json
import os
import textwrap
import time
from pathlib import Path

import pytest

from tito import engine, sandbox
from tito.project import stage as find_stage
from tito.shipped.checklib import Check

SUITE = '''
import numpy as np
from hypothesis import strategies as st

from checklib import CheckFailed, check, floats_arrays, shapes


@check(task="01.1", points=2, inputs=shapes(max_dims=2).flatmap(lambda s: floats_arrays(s)).map(lambda x: {"x": x}),
       describe=lambda case: f"double(x) for x of shape {case['x'].shape}")
def doubles(tt, case):
    return tt.double(case["x"])


@doubles.expected
def _(case):
    return 2 * case["x"]


@check(task="01.2", points=1, timeout=1)
def halts(tt, case):
    """halt() returns 1"""
    return tt.halt()


@halts.expected
def _(case):
    return 1


@check(task="01.3", points=3, inputs=st.integers(1, 50).map(lambda n: {"n": n}),
       describe=lambda case: f"noise({case['n']})")
def noise_is_centred(tt, case):
    return np.asarray(tt.noise(case["n"]), dtype=np.float64)


@noise_is_centred.verdict
def _(case, output):
    if output.shape != (case["n"],) or abs(float(output.mean())) > 10:
        raise CheckFailed(f"noise({case['n']}): the mean {float(output.mean()):.3f} is far from 0")


@check(task="01.1", points=1, describe=lambda case: f"unary({case['op']!r}, x)",
       variants={op: floats_arrays((3,)).map(lambda x, op=op: {"op": op, "x": x}) for op in ("exp", "neg")})
def unary(tt, case):
    return tt.unary(case["op"], case["x"])


@unary.expected
def _(case):
    return {"exp": np.exp, "neg": np.negative}[case["op"]](case["x"])


@check(task="01.3", points=1)
def broken_expectation(tt, case):
    """a check whose expected value the grader cannot compute"""
    return tt.noise(1)


@broken_expectation.expected
def _(case):
    raise ZeroDivisionError("the grader's own bug")
'''

GOOD = '''
import numpy as np

def double(x):
    return 2 * np.asarray(x)

def halt():
    return 1

def noise(n):
    return np.zeros(n)

def unary(op, x):
    return np.exp(x) if op == "exp" else -x
'''


@pytest.fixture
def stage(tmp_path: Path):
    root = tmp_path / "course"
    (root / "solutions" / "01_tiny").mkdir(parents=True)
    (root / "solutions" / "01_tiny" / "01_tiny.py").write_text(
        "# %%\n#| default_exp core.tiny\n# %%\n#| export\n### BEGIN SOLUTION 01.1 double\n### END SOLUTION\n"
        "### BEGIN SOLUTION 01.2 halt\n### END SOLUTION\n### BEGIN SOLUTION 01.3 noise\n### END SOLUTION\n")
    (root / "autograder").mkdir()
    (root / "autograder" / "test_01_tiny.py").write_text(SUITE)
    return find_stage(root, "01")


def grade(stage, tmp_path: Path, code: str, *, seed: int = 1, wall: float = 60.0) -> engine.StageResult:
    package = tmp_path / f"pkg-{time.monotonic_ns()}"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(textwrap.dedent(code))
    plan = engine.make_plan(stage, seed=seed, jobs=tmp_path / "jobs")
    return engine.grade_stage(plan, package, isolation="process", limits=sandbox.Limits(wall_seconds=wall))


def outcome(result: engine.StageResult) -> dict[str, tuple[bool, str]]:
    return {t.id: (t.passed, t.message) for t in result.tests}


def test_work_done_scores_full_marks_and_the_grader_fault_costs_nothing(stage, tmp_path):
    result = grade(stage, tmp_path, GOOD)
    assert result.score == result.max_score == 9
    fault = next(t for t in result.tests if t.id == "broken_expectation")
    assert fault.fault and fault.passed and "grader fault" in fault.message and "ZeroDivisionError" in fault.message


def test_a_stub_names_its_task(stage, tmp_path):
    code = GOOD.replace("    return 2 * np.asarray(x)",
                        '    raise NotImplementedError("Task 01.1: double is not implemented yet")')
    passed, message = outcome(grade(stage, tmp_path, code))["doubles"]
    assert not passed and message == "Task 01.1: double is not implemented yet"


def test_a_wrong_value_says_expected_and_got_and_the_public_sentence_hides_the_expected_value(stage, tmp_path):
    result = grade(stage, tmp_path, GOOD.replace("2 * np.asarray(x)", "3 * np.asarray(x)"))
    check = next(t for t in result.tests if t.id == "doubles")
    assert not check.passed and check.message.startswith("double(x) for x of shape")
    assert "expected" in check.message and "expected" not in check.public
    assert result.score == 7


def test_an_error_names_the_line_of_the_students_code(stage, tmp_path):
    code = GOOD.replace("    return 2 * np.asarray(x)", '    raise ValueError("bad axis")')
    passed, message = outcome(grade(stage, tmp_path, code))["doubles"]
    assert not passed and "in double" in message
    assert "your code raised ValueError: bad axis (at __init__.py line" in message


def test_an_endless_loop_costs_only_its_check_within_its_cpu_budget(stage, tmp_path):
    started = time.monotonic()
    endless = GOOD.replace("def halt():\n    return 1", "def halt():\n    while True:\n        pass")
    result = grade(stage, tmp_path, endless)
    assert time.monotonic() - started < 20
    passed, message = outcome(result)["halts"]
    assert not passed and "more than 1 s of CPU time" in message and "__init__.py line" in message
    assert outcome(result)["doubles"][0] and outcome(result)["noise_is_centred"][0]


@pytest.mark.parametrize("ending, words", [
    ("import os; os._exit(3)", "exit status 3"),
    ("import ctypes; ctypes.string_at(0)", "SIGSEGV"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "SIGKILL"),
])
def test_a_check_that_ends_the_process_costs_that_check_and_the_rest_still_run(stage, tmp_path, ending, words):
    result = grade(stage, tmp_path, GOOD.replace("def halt():\n    return 1", f"def halt():\n    {ending}"))
    passed, message = outcome(result)["halts"]
    assert not passed and words in message
    assert outcome(result)["doubles"][0] and outcome(result)["noise_is_centred"][0]


def test_a_hang_at_import_is_named_with_its_line(stage, tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "IMPORT_CPU_SECONDS", 1.0)
    result = grade(stage, tmp_path, GOOD + "\nwhile True:\n    pass\n")
    assert result.score == 0
    assert "importing tinytorch did not finish within 1 s of CPU time (at __init__.py line" in result.tests[0].message


def test_an_error_at_import_zeroes_the_stage_with_one_sentence(stage, tmp_path):
    result = grade(stage, tmp_path, GOOD + "\nraise RuntimeError('left-over test line')\n")
    assert result.score == 0
    assert result.tests[0].message.startswith("your package could not be imported: RuntimeError: left-over test line")


def test_nan_never_satisfies_a_verdict(stage, tmp_path):
    result = grade(stage, tmp_path, GOOD.replace("np.zeros(n)", "np.full(n, np.nan)"))
    passed, message = outcome(result)["noise_is_centred"]
    assert not passed and "NaN or infinity" in message


def test_an_object_that_is_not_plain_data_is_refused(stage, tmp_path):
    code = GOOD.replace("    return 2 * np.asarray(x)", "    class Liar:\n        def __eq__(self, other):\n"
                                                            "            return True\n    return Liar()")
    passed, message = outcome(grade(stage, tmp_path, code))["doubles"]
    assert not passed and "not plain data" in message


def test_the_same_seed_draws_the_same_cases_and_another_seed_others(stage, tmp_path):
    first = engine.make_plan(stage, seed=3, jobs=tmp_path / "a")
    again = engine.make_plan(stage, seed=3, jobs=tmp_path / "b")
    other = engine.make_plan(stage, seed=4, jobs=tmp_path / "c")
    dump = lambda plan: json.dumps({k: [str(case) for case in v] for k, v in plan.cases.items()})  # noqa: E731
    assert dump(first) == dump(again) != dump(other)


def test_cases_are_ordered_smallest_first(stage, tmp_path):
    plan = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    sizes = [case["x"].size for case in plan.cases["doubles"]]
    assert sizes == sorted(sizes) and len(sizes) > 1


def test_a_cached_plan_is_reused_and_a_changed_suite_draws_again(stage, tmp_path):
    first = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    assert engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs").job == first.job
    stage.suite.write_text(stage.suite.read_text() + "\n# changed\n")
    assert engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs").job != first.job


def test_a_family_of_variants_is_one_check_per_variant(stage, tmp_path):
    result = grade(stage, tmp_path, GOOD.replace("else -x", "else x"))
    assert outcome(result)["unary[exp]"] == (True, "")
    passed, message = outcome(result)["unary[neg]"]
    assert not passed and message.startswith("unary('neg', x)")


def test_a_guard_counts_only_beside_its_tasks_checks_of_values():
    """engine.guarded: a guard (a check constant code could pass, such as an expected error) keeps its points
    while every check of values of its task passes, loses them naming the one that failed, and a grader fault
    in a check of values does not cost it."""
    raises = Check(name="raises_on_a_bad_shape", task="01.1", points=2, compute=lambda tt, case: None, guard=True)
    values = Check(name="doubles", task="01.1", points=1, compute=lambda tt, case: None)
    other = Check(name="halts", task="01.2", points=1, compute=lambda tt, case: None)

    def passed(check, fault=False):
        return engine.CheckResult(check.name, check.task, check.points, check.points, True,
                                  "grader fault in check doubles" if fault else "", fault=fault)

    def failed(check):
        return engine.CheckResult(check.name, check.task, 0, check.points, False, "doubles: expected 2 but got 3")

    checks = [raises, values, other]
    kept = engine.guarded(checks, [passed(raises), passed(values), failed(other)])  # another task's failure
    assert (kept[0].passed, kept[0].points, kept[0].message) == (True, 2, "")
    lost = engine.guarded(checks, [passed(raises), failed(values), passed(other)])
    assert not lost[0].passed and lost[0].points == 0
    assert "doubles failed" in lost[0].message and "doubles failed" in lost[0].public
    assert [r.points for r in lost[1:]] == [0, 1]  # only the guard changes
    fault = engine.guarded(checks, [passed(raises), passed(values, fault=True), passed(other)])
    assert fault[0].passed and fault[0].points == 2


def test_a_package_that_replaces_the_graders_compute_gets_nothing(stage, tmp_path):
    forger = GOOD.replace("    return 2 * np.asarray(x)", "    raise NotImplementedError('Task 01.1: double')") + (
        "\nimport sys\nsys.modules['compute_slice'].doubles = lambda tt, case: 2 * case['x']\n")
    result = grade(stage, tmp_path, forger)
    assert result.score == 0
    assert "changed the grader's code (compute_slice.doubles)" in result.tests[0].message


def test_records_a_package_writes_on_the_report_pipe_are_not_accepted(stage, tmp_path):
    forger = GOOD.replace("    return 2 * np.asarray(x)", "    raise NotImplementedError('Task 01.1: double')") + '''
import json, os
for fd in map(int, os.listdir("/proc/self/fd")):
    try:
        os.write(fd, b'{"imported": true}\\n{"begin": "doubles"}\\n{"check": "doubles", "outcomes": []}\\n')
    except OSError:
        pass
'''
    result = grade(stage, tmp_path, forger)
    assert not outcome(result)["doubles"][0]
    honest = grade(stage, tmp_path / "honest", forger.split("import json, os")[0])
    assert result.score == honest.score  # the forged records earned nothing: the rest is the honest checks' due


def test_a_failed_import_after_a_restart_keeps_the_points_already_earned(stage, tmp_path):
    code = '''
import os, numpy as np
_marker = os.path.join(os.path.dirname(__file__), "started-once")
if os.path.exists(_marker):
    raise RuntimeError("second import fails")
open(_marker, "w").close()

def double(x):
    return 2 * np.asarray(x)

def halt():
    os._exit(3)

def noise(n):
    return np.zeros(n)

def unary(op, x):
    return np.exp(x) if op == "exp" else -x
'''
    result = grade(stage, tmp_path, code)
    assert outcome(result)["doubles"] == (True, "")
    assert "exit status 3" in outcome(result)["halts"][1]
    later = outcome(result)["noise_is_centred"]
    assert not later[0] and "second import fails" in later[1]


@pytest.mark.skipif(not (sandbox.bwrap_available() and sandbox.cgroups_available()),
                    reason="needs bubblewrap and a cgroup per box")
def test_memory_is_limited_per_submission_not_per_process(stage, tmp_path):
    hog = '''
def halt():
    import os, time
    children = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            block = bytearray(400 << 20)
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    return int(sum(status == 0 for status in statuses))
'''
    package = tmp_path / "pkg"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(GOOD.replace("def halt():\n    return 1", hog))
    for path in [tmp_path, package, *package.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    plan = engine.make_plan(stage, seed=1, jobs=tmp_path / "jobs")
    limits = sandbox.Limits(memory_bytes=1 << 30, wall_seconds=60)
    report = engine.run_checks(plan, package, isolation="bwrap", limits=limits)
    first = engine.read_outcome(report.outcomes["halts"][0]) if report.outcomes.get("halts") else {}
    held_at_once = engine.wire.decode(first["output"]) if "output" in first else 0
    assert held_at_once < 3, "three processes held 400 MiB each under a limit of 1 GiB for the submission"


@pytest.mark.skipif(not os.environ.get("TITO_REQUIRE_SANDBOX"), reason="only where bubblewrap must work (CI)")
def test_the_sandbox_works_where_it_is_required():
    """CI installs bubblewrap: official grading must then be able to box a runner from this checkout (a
    virtual environment under /tmp once hid itself behind the box's private /tmp)."""
    assert sandbox.bwrap_available()


def test_a_long_failure_message_keeps_its_summary_at_the_end():
    """A verdict's summary stands last ("N of M values wrong, the first at index ...: expected ... but got
    ..."); a message over the length kept loses its middle, never its end."""
    summary = "(3 of 12 values wrong, the first at index (0, 2): expected 1.0 but got 2.0)"
    message = "layer(x) for x of shape (4, 3): expected " + "[1.0, 2.0, 3.0] " * 80 + summary
    kept = engine._head_and_tail(message, 600)
    assert len(kept) <= 600 and kept.endswith(summary) and kept.startswith("layer(x) for x of shape (4, 3)")
    assert engine._head_and_tail(summary, 600) == summary


class _CountedBoxes:
    """sandbox.Box, counting the boxes started."""

    def __init__(self, monkeypatch) -> None:
        self.started = 0
        real = sandbox.Box

        def counted(*args, **kwargs):
            self.started += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(sandbox, "Box", counted)


def test_a_box_started_early_grades_as_one_started_after_the_plan(stage, tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(textwrap.dedent(GOOD))
    limits, jobs = sandbox.Limits(wall_seconds=60), tmp_path / "jobs"
    assert engine.start_early(stage, package, seed=1, jobs=jobs, isolation="process", limits=limits) is None  # no plan
    plan = engine.make_plan(stage, seed=1, jobs=jobs)
    boxes = _CountedBoxes(monkeypatch)
    after = engine.grade_stage(plan, package, isolation="process", limits=limits)
    plain = boxes.started
    early = engine.start_early(stage, package, seed=1, jobs=jobs, isolation="process", limits=limits)
    assert early is not None
    boxes.started = 0
    found = engine.grade_stage(plan, package, isolation="process", limits=limits, started=early)
    assert (found.score, outcome(found)) == (after.score, outcome(after)) and after.score == 9
    assert boxes.started == plain - 1  # the early box was the run's first
    other = tmp_path / "other"
    (other / "tinytorch").mkdir(parents=True)
    (other / "tinytorch" / "__init__.py").write_text(textwrap.dedent(GOOD).replace("2 * np", "3 * np"))
    early = engine.start_early(stage, package, seed=1, jobs=jobs, isolation="process", limits=limits)
    assert early is not None
    wrong = engine.grade_stage(plan, other, isolation="process", limits=limits, started=early)
    assert early.box.process.poll() is not None  # a box of another package is closed, never asked
    assert not outcome(wrong)["doubles"][0] and wrong.score < after.score


TIMED_SUITE = '''
import numpy as np
from hypothesis import strategies as st

from checklib import Timed, check


def summed(case):
    return sum(range(10_000))


@check(task="01.1", points=1, examples=3, inputs=st.fixed_dictionaries({"seed": st.integers(0, 9)}),
       timed=Timed(summed, limit=1000, against="a sum of 10,000 numbers"))
def doubles_quickly(tt, case):
    return tt.double(np.ones(3))


@doubles_quickly.expected
def _(case):
    return 2 * np.ones(3)
'''


def test_a_speed_check_starts_its_yardstick_only_for_an_output(stage, tmp_path, monkeypatch):
    stage.suite.write_text(TIMED_SUITE)
    boxes = _CountedBoxes(monkeypatch)
    stub = grade(stage, tmp_path, 'def double(x):\n    raise NotImplementedError("Task 01.1")\n')
    assert (stub.score, boxes.started) == (0, 1)  # the stub's check: no yardstick
    boxes.started = 0
    done = grade(stage, tmp_path, GOOD)
    assert (done.score, boxes.started) == (1, 2)  # timed against the yardstick, in a box of its own
