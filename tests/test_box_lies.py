"""Invariant 1 and 6 of docs/security.md, held against packages that lie: nothing the box says about time,
budgets or results is believed, and nothing the box writes reaches official feedback in pieces long enough
to carry code. A tiny stage with a timed check, a check with a CPU budget and a check after them, graded on
small packages through the real engine (child processes; one test in bubblewrap where it is installed)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tito import engine, sandbox
from tito.project import stage as find_stage

SUITE = '''
import numpy as np
from hypothesis import strategies as st

from checklib import Timed, check


def square(case):
    """The array of one timed call, made from the seed the grader sends with it."""
    return np.random.default_rng(case["seed"]).random((256, 256), dtype=np.float32)


def numpy_column_sums(case):
    return np.sum(square(case), axis=0)


@check(task="01.1", points=1, examples=5, rtol=1e-4, atol=1e-3,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1)}),
       timed=Timed(numpy_column_sums, limit=5, against="np.sum on the same array"),
       describe=lambda case: "colsum(x) for x of shape (256, 256)")
def sums_columns_fast(tt, case):
    return np.asarray(tt.colsum(square(case)))


@sums_columns_fast.expected
def _(case):
    return np.sum(square(case), axis=0)


@check(task="01.2", points=1, timeout=2, examples=3, inputs=st.integers(0, 9).map(lambda n: {"n": n}),
       describe=lambda case: f"spin({case['n']})")
def spins(tt, case):
    return tt.spin(case["n"])


@spins.expected
def _(case):
    return case["n"]


def _asker(name):
    return lambda tt: getattr(tt, name)()


ASK = {"after": _asker("after")}  # a table of the suite's own code, as a check's variants are


@check(task="01.3", points=1)
def after(tt, case):
    """after() returns 1"""
    return ASK["after"](tt)


@after.expected
def _(case):
    return 1
'''

GOOD = '''
import numpy as np

def colsum(x):
    return np.sum(x, axis=0)

def spin(n):
    return n

def after():
    return 1
'''

ELEMENT_LOOP = '''
def colsum(x):
    out = np.zeros(x.shape[1], dtype=x.dtype)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            out[j] += x[i, j]
    return out
'''

DISARMS_THE_TIMERS = '''
import signal

def _disarm():
    for timer in (signal.ITIMER_PROF, signal.ITIMER_REAL, signal.ITIMER_VIRTUAL):
        signal.setitimer(timer, 0)
    for number in (signal.SIGPROF, signal.SIGALRM, signal.SIGVTALRM, signal.SIGXCPU):
        signal.signal(number, signal.SIG_IGN)
'''


@pytest.fixture
def stage(tmp_path: Path):
    root = tmp_path / "course"
    (root / "solutions" / "01_lies").mkdir(parents=True)
    (root / "solutions" / "01_lies" / "01_lies.py").write_text(
        "# %%\n#| default_exp core.lies\n# %%\n#| export\n### BEGIN SOLUTION 01.1 colsum\n### END SOLUTION\n"
        "### BEGIN SOLUTION 01.2 spin\n### END SOLUTION\n### BEGIN SOLUTION 01.3 after\n### END SOLUTION\n")
    (root / "autograder").mkdir()
    (root / "autograder" / "test_01_lies.py").write_text(SUITE)
    return find_stage(root, "01")


def grade(stage, tmp_path: Path, code: str, *, isolation: str = "process", wall: float = 120.0):
    package = tmp_path / f"pkg-{time.monotonic_ns()}"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(textwrap.dedent(code))
    for path in [tmp_path, package, *package.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    plan = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    return engine.grade_stage(plan, package, isolation=isolation, limits=sandbox.Limits(wall_seconds=wall))


def verdicts(result) -> dict[str, tuple[bool, str]]:
    return {t.id: (t.passed, t.message) for t in result.tests}


def test_honest_code_passes_and_a_loop_over_elements_fails_the_timed_check(stage, tmp_path):
    assert grade(stage, tmp_path, GOOD).score == 3
    slow = verdicts(grade(stage, tmp_path, GOOD + ELEMENT_LOOP))
    assert not slow["sums_columns_fast"][0] and "times as long as np.sum" in slow["sums_columns_fast"][1]
    assert slow["spins"][0] and slow["after"][0]


def test_a_package_that_stops_every_clock_it_can_reach_is_timed_by_the_parent(stage, tmp_path):
    liar = GOOD + ELEMENT_LOOP + '''
import time
for name in ("perf_counter", "monotonic", "thread_time", "process_time", "time"):
    setattr(time, name, lambda: 0.0)
    setattr(time, name + "_ns", lambda: 0)
'''
    found = verdicts(grade(stage, tmp_path, liar))
    assert not found["sums_columns_fast"][0] and "times as long" in found["sums_columns_fast"][1]


SLOWS_THE_YARDSTICK = '''
import mmap, os, select, sys, threading, time

_idle = mmap.mmap(-1, 1)  # shared with the burners: 1 from the end of colsum until the next request
for _ in range(30):
    if os.fork() == 0:  # a burner: each in a session of its own, so in a scheduling group of its own
        os.setsid()
        while True:
            while _idle[0]:
                sum(range(20000))
            time.sleep(0.0005)


def _watch(requests=int(sys.argv[4])):  # the runner's request pipe: a request is waiting, stop burning
    poller = select.poll()
    poller.register(requests, select.POLLIN)
    while True:
        if poller.poll(1000):
            _idle[0] = 0
            time.sleep(0.0002)


threading.Thread(target=_watch, daemon=True).start()
_loop = colsum

def colsum(x):
    out = _loop(x)
    _idle[0] = 1  # the grader now times the yardstick
    return out
'''


@pytest.mark.parametrize("isolation", ["none", pytest.param("bwrap", marks=pytest.mark.skipif(
    not sandbox.bwrap_available(), reason="needs bubblewrap"))])
@pytest.mark.slow  # thirty processes burning CPU at each timed case: left out by make test-fast
def test_processes_of_the_package_cannot_slow_the_yardstick_while_it_is_timed(stage, tmp_path, isolation):
    """A loop over elements, with processes that burn the CPU from the moment the package's call returns,
    while the grader times the yardstick beside it: the package's box is stopped (SIGSTOP, every process of
    its cgroup or tree) for the yardstick's turn, so the yardstick's time is its own and the loop fails. (In
    official grading's boxes: bubblewrap's, and the unsandboxed one of --unsafe-no-sandbox.)"""
    found = verdicts(grade(stage, tmp_path, GOOD + ELEMENT_LOOP + SLOWS_THE_YARDSTICK, isolation=isolation))
    assert not found["sums_columns_fast"][0] and "times as long" in found["sums_columns_fast"][1], found
    assert found["spins"][0] and found["after"][0]


def test_results_cached_by_input_or_kept_from_the_first_call_do_not_pass_the_timed_check(stage, tmp_path):
    keeps_the_first = GOOD + '''
_first = []
def colsum(x):
    if not _first:
        _first.append(np.sum(x, axis=0))
    return _first[0]
'''
    cache_by_shape = GOOD + '''
_cache = {}
def colsum(x):
    return _cache.setdefault(x.shape, np.sum(x, axis=0))
'''
    for code in (keeps_the_first, cache_by_shape):
        found = verdicts(grade(stage, tmp_path, code))
        assert not found["sums_columns_fast"][0] and "times as long" not in found["sums_columns_fast"][1]


@pytest.mark.parametrize("spin", [
    "def spin(n):\n    _disarm()\n    while True:\n        pass\n",  # an endless loop past its disarmed timers
    "def spin(n):\n    _disarm()\n    end = time.process_time() + 5\n    while time.process_time() < end:\n"
    "        pass\n    return n\n",  # the right answer, after more CPU than the check allows
    "def spin(n):\n    _disarm()\n    time.sleep(3600)\n    return n\n",  # waiting, SIGALRM ignored
    "def spin(n):\n    import os\n    if os.fork() == 0:\n        if os.fork() == 0:\n            _disarm()\n"
    "            while True:\n                pass\n        os._exit(0)\n    while True:\n        time.sleep(1)\n",
    # the work in a grandchild nobody reaps, the runner waiting
], ids=["loops", "slow_but_right", "sleeps", "unreaped_grandchild"])
@pytest.mark.slow  # a runner process waited out to its budget, then started again: left out by make test-fast
def test_a_budget_the_box_disarms_is_still_kept_by_the_parent(stage, tmp_path, spin):
    code = GOOD + "import time\n" + DISARMS_THE_TIMERS + spin
    started = time.monotonic()
    found = verdicts(grade(stage, tmp_path, code))
    assert not found["spins"][0]
    assert "counted by the grader" in found["spins"][1] or "still running after" in found["spins"][1]
    assert found["after"][0], "the check after the stopped one still ran (the runner was started again)"
    assert found["sums_columns_fast"][0]
    assert time.monotonic() - started < 3 * 60, "the parent stopped the box within the check's budgets"


@pytest.mark.skipif(not sandbox.bwrap_available() or not sandbox.cgroups_available(),
                    reason="needs bubblewrap and cgroups")
@pytest.mark.slow  # in the bubblewrap sandbox, children spinning for 12 s of CPU: left out by make test-fast
def test_cpu_of_children_the_kernel_reaps_at_once_is_counted_in_the_sandbox(stage, tmp_path):
    """With SIGCHLD ignored the kernel reaps each child as it ends, and no process's times hold its CPU any
    more; the box's cgroup (v2's cpu.stat, v1's cpuacct) still counts it."""
    spin = ("def spin(n):\n    import os, signal\n    signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
            "    for _ in range(8):\n        if os.fork() == 0:\n            _disarm()\n"
            "            end = time.process_time() + 1.5\n            while time.process_time() < end:\n"
            "                pass\n            os._exit(0)\n        time.sleep(1.6)\n    return n\n")
    found = verdicts(grade(stage, tmp_path, GOOD + "import time\n" + DISARMS_THE_TIMERS + spin, isolation="bwrap"))
    assert not found["spins"][0] and "counted by the grader" in found["spins"][1], found["spins"]
    assert found["after"][0] and found["sums_columns_fast"][0]


def test_how_often_the_runner_restarts_is_the_parents_count(stage, tmp_path):
    marks = tmp_path / "starts"
    marks.mkdir()
    code = GOOD + f'''
import os
open(os.path.join({str(marks)!r}, str(os.getpid())), "w").close()
def spin(n):
    os._exit(3)
def colsum(x):
    os._exit(3)
def after():
    os._exit(3)
'''
    result = grade(stage, tmp_path, code)
    assert result.score == 0
    assert len(list(marks.iterdir())) <= engine.MAX_RESTARTS + 1


@pytest.mark.parametrize("patch", [
    'cs.ASK["after"] = lambda tt: 1',  # a lambda in a table of the suite swapped
    'cs.ASK["after"].__closure__[0].cell_contents = "spin"',  # a closure rewritten in place
    'cs.ASK = {"after": lambda tt: 1}',  # the table itself replaced
    'cs.after.__wrapped__ = None; cs._asker.__defaults__ = ("x",)',  # defaults given to a helper
])
def test_a_package_that_rewrites_the_graders_code_or_tables_in_the_box_is_caught(stage, tmp_path, patch):
    code = GOOD + f'''
import sys
def after():
    return 0
def spin(n):
    cs = sys.modules["compute_slice"]
    {patch}
    return n
'''
    found = verdicts(grade(stage, tmp_path, code))
    assert not found["spins"][0] and "changed the grader's code" in found["spins"][1]
    assert not found["after"][0], "no result after the change counts"
    assert grade(stage, tmp_path, GOOD).score == 3


def test_what_the_parent_keeps_of_a_run_is_bounded_over_all_its_boxes(stage, tmp_path):
    """A box that ends after one large reply is started again for the next check: what the parent keeps
    until judging is the replies' bytes, within one budget for the whole run, not one per box."""
    code = GOOD + '''
import os
_calls = []
def _large_then_end():
    _calls.append(1)
    if len(_calls) > 1:
        os._exit(3)
    return "x" * 1_200_000
def spin(n):
    return _large_then_end()
def after():
    return _large_then_end()
'''
    package = tmp_path / "pkg"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(code)
    plan = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    limits = sandbox.Limits(wall_seconds=120, report_bytes=2 << 20)
    report = engine.run_checks(plan, package, isolation="process", limits=limits)
    kept = [reply for replies in report.outcomes.values() for reply in replies]
    assert all(isinstance(reply, bytes) for reply in kept) and sum(map(len, kept)) <= limits.report_bytes
    assert len(report.outcomes["spins"]) == 1 and "after" not in report.outcomes, "the second box was cut short"
    assert "more than the grader reads" in (report.unfinished or "")
    assert "output" in engine.read_outcome(kept[0])
    result = engine.grade_stage(plan, package, isolation="process", limits=limits)
    assert any("more than the grader reads" in t.message for t in result.tests if t.id == "after")


def test_the_box_never_holds_the_cases_so_nothing_can_be_computed_ahead(stage, tmp_path):
    plan = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    work = engine.wire.loads((plan.job / "work.json").read_text())
    assert all(set(entry) == {"name", "function", "yardstick"} for entry in work["checks"])
    assert (plan.job / engine.CASES).stat().st_mode & 0o077 == 0, "the cases are readable by the grader alone"


@pytest.mark.skipif(not sandbox.bwrap_available(), reason="needs bubblewrap")
def test_in_the_sandbox_the_cases_file_is_out_of_reach(stage, tmp_path):
    code = GOOD + '''
import os
def after():
    return 1 if not os.path.exists("/job/cases.json") and os.path.exists("/job/work.json") else 0
'''
    found = verdicts(grade(stage, tmp_path, code, isolation="bwrap"))
    assert found["after"][0]
    assert found["spins"][0] and found["sums_columns_fast"][0]


def test_text_the_box_writes_reaches_official_feedback_only_in_short_pieces(stage, tmp_path):
    secret = "the hidden suite's compute code, base64: " + base64.b64encode(SUITE.encode()).decode()[:400]
    leaker = GOOD + f'''
_SECRET = {secret!r}
class Leak(Exception):
    pass
def colsum(x):
    return _SECRET
def spin(n):
    raise Leak(_SECRET)
def after():
    raise NotImplementedError("Task 01.3: " + _SECRET)
'''
    result = grade(stage, tmp_path, leaker)
    public = " ".join(t.public for t in result.tests) + " ".join(result.public_notes)
    for start in range(0, len(secret) - engine.SCRUB_WINDOW):
        assert secret[start:start + engine.SCRUB_WINDOW] not in public
    spins = next(t for t in result.tests if t.id == "spins")
    assert "an exception of its own kind" in spins.public and "Leak" in spins.message
    after = next(t for t in result.tests if t.id == "after")
    assert after.public.startswith("Task 01.3: not implemented yet")
    broken = grade(stage, tmp_path, GOOD + "raise ValueError(" + repr(secret) + ")\n")
    assert broken.notes and secret[:60] in broken.notes[0]
    assert secret[10:10 + engine.SCRUB_WINDOW] not in " ".join(broken.public_notes)


def test_outputs_chosen_to_carry_text_or_digits_reach_official_feedback_only_as_the_graders_words(stage, tmp_path):
    """A box's outputs are echoed by verdicts ("the result ... is wrong"): pieces under 8 characters pass the
    scrub, and digits are no string at all. The public words keep only words and numbers the grader wrote."""
    secret = base64.b64encode(SUITE.encode()).decode()[:140]
    pieces = [secret[i:i + 7] for i in range(0, len(secret), 7)]
    digits = "".join(str(ord(c)) for c in secret[:40])
    leaker = GOOD + f'''
_PIECES = {pieces!r}
def colsum(x):
    return np.full(x.shape[1], float("0.{digits[:15]}"), dtype=x.dtype)
def spin(n):
    return float("{digits[:6]}.{digits[6:12]}")
def after():
    return _PIECES
'''
    result = grade(stage, tmp_path, leaker)
    public = " ".join(t.public for t in result.tests)
    assert result.score == 0 and all(t.public for t in result.tests)
    assert not any(piece in public for piece in pieces), public
    for start in range(0, 12 - 3):
        assert digits[start:start + 4] not in public, public
    assert all(len(t.public) <= len(t.message) + engine.CONFINED_CHARACTERS for t in result.tests)
    # a verdict of a suite that echoes the output in its public words: confined to the grader's own words
    plan = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    echo = f"spin(3): the result {pieces!r} is wrong, 0.{digits} of " + "x" * 400
    confined = engine.confine(echo, "spin(3)", plan.known_words)
    assert confined.startswith("spin(3): the result [") and "is wrong" in confined
    assert not any(piece in confined for piece in pieces) and digits[:4] not in confined
    assert len(confined) <= len("spin(3)") + engine.CONFINED_CHARACTERS


def test_a_builtin_error_and_its_file_in_the_package_stay_in_the_public_words(stage, tmp_path):
    code = GOOD + "def spin(n):\n    raise ValueError('spin: n must be even')\n"
    spins = next(t for t in grade(stage, tmp_path, code).tests if t.id == "spins")
    assert "ValueError" in spins.public and "(in __init__.py)" in spins.public
    assert "must be even" in spins.message and "__init__.py line" in spins.message


def test_what_the_box_chooses_in_the_public_words_comes_from_short_lists_the_grader_knows(stage, tmp_path):
    """A line number or a task number is the box's choice: the public words carry neither unless the grader
    knows it (a task of this stage), so a box that encodes something in them says nothing more."""
    def public(padding: int, task: str) -> dict[str, str]:
        code = GOOD + "\n" * padding + (
            "def spin(n):\n    raise KeyError(n)\n"
            f"def after():\n    raise NotImplementedError('Task {task}: after')\n")
        return {t.id: t.public for t in grade(stage, tmp_path, code).tests}
    short, long = public(3, "01.3"), public(40_000, "01.3")
    assert short == long and "(in __init__.py)" in short["spins"] and "KeyError" in short["spins"]
    assert short["after"].startswith("Task 01.3: not implemented yet")
    for chosen in ("73.41", "07.99"):
        assert public(3, chosen)["after"] == "after() returns 1: not implemented yet"

def test_stage_seeds_are_keyed_hashes_that_tell_nothing_of_each_other(stage):
    import hashlib
    import hmac

    seed = engine.stage_seed("course key", stage)
    assert seed == int.from_bytes(hmac.new(b"course key", stage.name.encode(), hashlib.sha256).digest()[:4],
                                  "big") & 0x7FFFFFFF
    assert engine.stage_seed("course kez", stage) != seed


def test_the_parent_bounds_what_it_parses_from_one_reply():
    reply = {"n": 1, "outcome": {"output": [1, 2, 3]}}
    assert engine.parse_record(b'{"n": 1, "outcome": {"output": [1, 2, 3]}}') == reply
    assert engine.parse_record(b"[" * 100 + b"]" * 100) is None
    assert engine.parse_record(b'{"a": ' + b"[" * 80 + b"]" * 80 + b"}") is None
    assert engine.parse_record(b'{"a": [' + b"0," * engine.MAX_RECORD_VALUES + b"0]}") is None
    nested = b"[" * 60 + b"]" * 60  # empty lists have no commas: each container counts
    assert engine.parse_record(b'{"x": [' + b",".join([nested] * (engine.MAX_RECORD_VALUES // 60)) + b"]}") is None
    text = '{"a": "' + "[,:" * 300_000 + '"}'  # brackets inside a string are not values
    assert engine.parse_record(text.encode()) == {"a": "[,:" * 300_000}


def test_reading_a_reply_costs_time_in_proportion_to_its_size_whatever_its_quotes(tmp_path):
    """Escaped quotes in a string that never closes made the string-skipping pattern start again at each one
    (500,000 pairs held the grader for minutes): the scan removes escapes first, as the notebook scan does."""
    script = ("import sys; from tito import engine\n"
              "for unit in (b'\\\\\"', b'\\\\\\\\', b'\"\\\\\"'):\n"
              "    engine.parse_record(b'{\"x\":\"' + unit * 1_000_000)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_keys_and_parts_no_runner_writes_carry_nothing_out(stage, tmp_path):
    """A record forged by the package: text as a dict's key (the scrub read values only), and parts a runner
    never writes (kept, they cost memory and reached the scrub's list)."""
    secret = base64.b64encode(SUITE.encode()).decode()[:300]
    code = f'''
import json, os, sys
forged = {{"import_error": {{{secret!r}: 0}}, "where": {{{secret!r}: 1}}}}
os.write(int(sys.argv[3]), (json.dumps(forged) + "\\n").encode())
os._exit(0)
'''
    result = grade(stage, tmp_path, code)
    public = " ".join([*result.public_notes, *(t.public for t in result.tests)])
    assert result.score == 0 and secret[:40] not in public
    for start in range(0, len(secret) - engine.SCRUB_WINDOW, 7):
        assert secret[start:start + engine.SCRUB_WINDOW] not in public
    reply = b'{"n": 1, "outcome": {"output": 1, "pad": "' + b"x" * 1000 + b'", "error": {"k": 1}}}'
    assert engine.read_outcome(reply) == {"output": 1}
    digits = str(int.from_bytes(b"\x01" + SUITE.encode()[:120], "big"))  # text as a number: no string to scrub
    numbers = f'''
import json, os, sys
os.write(int(sys.argv[3]), (json.dumps({{"import_error": {digits}, "where": {digits}}}) + "\\n").encode())
os._exit(0)
'''
    result = grade(stage, tmp_path, numbers)
    said = " ".join([*result.notes, *result.public_notes, *(t.public for t in result.tests)])
    assert result.score == 0 and digits[:12] not in said and "not text" in said


@pytest.mark.skipif(os.geteuid() != 0 or not sandbox.bwrap_available(), reason="needs root and bubblewrap")
def test_what_a_box_is_given_is_unreadable_by_other_accounts(stage, tmp_path):
    """The job's and the package's paths stand on the box's command line, which every account can read in
    /proc: another account (nobody) can read none of their files."""
    plan = engine.make_plan(stage, seed=3, jobs=tmp_path / "jobs")
    package = tmp_path / "pkg"
    (package / "tinytorch").mkdir(parents=True)
    (package / "tinytorch" / "__init__.py").write_text(GOOD)
    sandbox.box_view(package, 0)
    view = sandbox._slot_job(plan.job, 0)
    tmp_path.chmod(0o755)
    (tmp_path / "jobs").chmod(0o755)
    files = [plan.job / engine.CASES, plan.job / "work.json", view / "work.json", view / "lib" / "compute_slice.py",
             package / "tinytorch" / "__init__.py"]
    for path in files:
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(path)],
                              capture_output=True)
        assert done.returncode != 0 and not done.stdout, f"another account read {path}"
    assert verdicts(engine.grade_stage(plan, package, isolation="bwrap", limits=sandbox.Limits()))["after"][0]
