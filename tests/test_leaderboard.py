"""The GPT leaderboard (tito/leaderboard.py): each package trained in the real bubblewrap sandbox, judged here
from its predictions of characters the box never holds; hostile packages ranked last with their reason.
Short runs (STEPS steps, WINDOWS windows) in the judged set-up; the judged run is 1,500 steps."""

from __future__ import annotations

import ast
import math
import os
import pickle
import stat
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tito import leaderboard, package, sandbox
from tito.leaderboard import Entry, Evidence
from tito.project import stages
from tito.source import read_source

from conftest import REPO

sandboxed = pytest.mark.skipif(not sandbox.bwrap_available() and os.environ.get("TITO_REQUIRE_SANDBOX") != "1",
                               reason="needs bubblewrap (TITO_REQUIRE_SANDBOX=1 makes its absence a failure)")

STEPS, WINDOWS, SEED = 30, 64, 20240611
HOSTILE_STEPS = 2  # a hostile package's training does not matter, only how it ends
LIMITS = sandbox.Limits(memory_bytes=1 << 30)
UNIFORM = math.log(84)  # the loss of a uniform guess over the 84 characters


@pytest.fixture(scope="module")
def reference_files() -> dict[str, str]:
    """The reference package of 01..13 as tito.grading.package_files gives a student's."""
    files = {}
    for stage in stages(REPO):
        _, path, code = package.stage_module(stage, read_source(stage), stage.relative(stage.source), reference=True)
        files[path] = code
    return files


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("leaderboard")


def run(files: dict[str, str], scratch: Path, *, steps: int = STEPS, isolation: str = "bwrap",
        cpu_seconds: float | None = None) -> Evidence:
    return leaderboard.train(files, steps=steps, seed=SEED, limits=LIMITS, isolation=isolation, slot=0,
                             scratch=scratch, windows=WINDOWS, cpu_seconds=cpu_seconds)


def with_code(files: dict[str, str], code: str) -> dict[str, str]:
    """The reference with `code` after its GPT (core/transformer.py), as a student's last cell would be."""
    return {**files, "core/transformer.py": files["core/transformer.py"] + "\n\n" + code}


@pytest.fixture(scope="module")
def reference(reference_files, scratch) -> Entry:
    return leaderboard.judge("reference", run(reference_files, scratch))


# ---------------------------------------------------------------------------------------------------
# The honest run


@pytest.mark.slow
@sandboxed
def test_the_reference_trains_in_the_sandbox_to_a_loss_below_a_uniform_guess(reference):
    assert reference.reason == ""
    assert reference.validation_loss is not None and math.isfinite(reference.validation_loss)
    assert reference.validation_loss < UNIFORM - 1, f"{reference.validation_loss} after {STEPS} steps"
    assert reference.steps == STEPS and reference.cpu_seconds > 0


@pytest.mark.slow
@sandboxed
def test_the_same_seed_gives_the_same_loss_again(reference, reference_files, scratch):
    again = leaderboard.judge("reference", run(reference_files, scratch))
    assert again.validation_loss == reference.validation_loss


@pytest.mark.slow
@sandboxed
def test_the_evidence_is_small_and_crosses_a_network_as_a_pickle(reference_files, scratch):
    evidence = run(reference_files, scratch, steps=1)
    restored = pickle.loads(pickle.dumps(evidence))
    assert restored == evidence
    assert len(pickle.dumps(evidence)) < leaderboard._reply_bytes(WINDOWS)
    assert leaderboard.judge("x", restored).validation_loss == leaderboard.judge("x", evidence).validation_loss


# ---------------------------------------------------------------------------------------------------
# What the box holds, and what it is asked


def test_the_setup_is_the_milestones_judged_one():
    tree = ast.parse((REPO / "milestones" / "gpt.py").read_text(encoding="utf-8"))
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            constants.update(zip((name.id for name in node.targets[0].elts), ast.literal_eval(node.value)))
    rates = [keyword.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "attr", "") == "AdamW" for keyword in node.keywords if keyword.arg == "lr"]
    assert (constants["CONTEXT"], constants["BATCH"], constants["WIDTH"], constants["HEADS"], constants["LAYERS"],
            constants["STEPS"], rates) == (leaderboard.CONTEXT, leaderboard.BATCH, leaderboard.WIDTH,
                                           leaderboard.HEADS, leaderboard.LAYERS, leaderboard.JUDGED_STEPS,
                                           [leaderboard.LR])


def test_the_box_is_given_the_training_split_and_nothing_of_the_validation_split(tmp_path):
    leaderboard._write_job(tmp_path / "job")
    corpus = leaderboard.corpus()
    given = {path.relative_to(tmp_path).as_posix() for path in tmp_path.rglob("*") if path.is_file()}
    assert given == {"job/lib/runner.py", "job/lib/wire.py", "job/lib/train.txt", "job/work.json"}
    assert (tmp_path / "job" / "lib" / "train.txt").read_text(encoding="ascii") == corpus.train_text
    contexts, _ = leaderboard.validation_windows(SEED, 16)
    held = "".join(path.read_text(encoding="utf-8") for path in tmp_path.rglob("*") if path.is_file())
    assert not [row for row in contexts if "".join(corpus.chars[i] for i in row) in held]


def test_no_window_holds_a_target_or_starts_just_after_one():
    validation = leaderboard.corpus().validation
    starts = leaderboard.window_starts(SEED, leaderboard.VALIDATION_WINDOWS)
    contexts, targets = leaderboard.validation_windows(SEED, leaderboard.VALIDATION_WINDOWS)
    assert (contexts == validation[starts[:, None] + np.arange(leaderboard.CONTEXT)]).all()
    assert (targets == validation[starts + leaderboard.CONTEXT]).all()
    assert np.diff(np.sort(starts)).min() >= 2 * leaderboard.CONTEXT + 2, "a target in, or just before, a window"
    assert not (np.diff(starts) > 0).all(), "the windows are sent in a shuffled order"


def test_the_windows_are_the_same_for_a_seed_and_unknown_from_the_training_seed():
    first, _ = leaderboard.validation_windows(SEED, WINDOWS)
    assert (leaderboard.validation_windows(SEED, WINDOWS)[0] == first).all()
    assert not (leaderboard.validation_windows(SEED + 1, WINDOWS)[0] == first).all()
    told = leaderboard._derived(SEED, "training")  # what the box is told
    assert not (leaderboard.validation_windows(told, WINDOWS)[0] == first).all()


# ---------------------------------------------------------------------------------------------------
# Hostile packages: nothing they do earns a place

PEEKS = '''
import glob as _glob
import gzip as _gzip

_TEXTS = None


def _texts():
    """Every copy of the text this process can read: the package's own loader, the grader's checkout, the box."""
    found = []
    try:
        import tinytorch.core.data as _data
        found.append(_data.shakespeare())
    except Exception:
        pass
    for path in [REPO_DATASET, *_glob.glob("/job/**/*", recursive=True)]:
        try:
            with open(path, "rb") as stream:
                data = stream.read()
            found.append((_gzip.decompress(data) if path.endswith(".gz") else data).decode("ascii"))
        except Exception:
            pass
    return found


_forward = GPT.forward


def _knowing_forward(self, idx, targets=None, caches=None):
    """Where the text can be read, the character after each window, with certainty; else a confident guess."""
    global _TEXTS
    if targets is not None or caches is not None:
        return _forward(self, idx, targets, caches)
    if _TEXTS is None:
        _TEXTS = _texts()
    idx = np.asarray(idx)
    chars = sorted(set(max(_TEXTS, key=len))) if _TEXTS else []  # the longest holds every character
    logits = np.zeros((*idx.shape, self.vocab_size), dtype=np.float32)
    for row, window in enumerate(idx):
        guess = window[-1]  # no text: as sure of the last character again as of anything
        for text in _TEXTS:
            at = text.find("".join(chars[i] for i in window))
            if at >= 0 and at + len(window) < len(text):
                guess = chars.index(text[at + len(window)])
                break
        logits[row, -1, guess] = 50.0
    return Tensor(logits)


GPT.forward = _knowing_forward
'''

BURNS = '''
_forward = GPT.forward


def _burning_forward(self, idx, targets=None, caches=None):
    while WHEN:
        pass
    return _forward(self, idx, targets, caches)


GPT.forward = _burning_forward
'''

HOGS = '''
_hoard = []


def _hoarding_forward(self, *args, **kwargs):
    while True:
        _hoard.append(np.ones(1 << 27))  # 1 GiB at a time, every page touched


GPT.forward = _hoarding_forward
'''

BREAKS_IMPORT = "import tinytorch_helpers_nobody_installed\n"

NAN = '''
_forward = GPT.forward


def _nan_forward(self, idx, targets=None, caches=None):
    out = _forward(self, idx, targets, caches)
    return out if targets is not None else out * float("nan")


GPT.forward = _nan_forward
'''

# Writes its own reply on the report pipe, before the trainer's: log p = 0 for every character of every window
# (p = 1: each target "certain"), or rows one character short
FORGES = '''
import json as _json
import os as _os
import sys as _sys

_forward = GPT.forward


def _forging_forward(self, idx, targets=None, caches=None):
    if targets is None and caches is None:
        import wire
        frame = _sys._getframe(1)
        while "contexts" not in frame.f_locals:  # the trainer's predict(), which holds them all
            frame = frame.f_back
        windows = len(frame.f_locals["contexts"])
        claim = np.zeros((windows, self.vocab_size - CHARACTERS_SHORT), dtype=np.float32)
        line = _json.dumps({"n": 2, "log_probs": wire.encode(claim)}) + "\\n"
        _os.write(int(_sys.argv[3]), line.encode())
    return _forward(self, idx, targets, caches)


GPT.forward = _forging_forward
'''


@pytest.fixture(scope="module")
def hostile(reference_files, scratch) -> dict[str, Entry]:
    """Each hostile package's entry, each from a short run in the sandbox (the training's CPU budget 6 s)."""
    dataset = repr(str(REPO / "datasets" / "shakespeare_complete.txt.gz"))
    codes = {"peeks": PEEKS.replace("REPO_DATASET", dataset), "burns": BURNS.replace("WHEN", "True"),
             "burns_holding_the_windows": BURNS.replace("WHEN", "targets is None"), "hogs": HOGS,
             "breaks_import": BREAKS_IMPORT, "nan": NAN, "forges": FORGES.replace("CHARACTERS_SHORT", "0"),
             "forges_shape": FORGES.replace("CHARACTERS_SHORT", "1")}
    return {name: leaderboard.judge(name, run(with_code(reference_files, code), scratch, steps=HOSTILE_STEPS,
                                              cpu_seconds=6.0))
            for name, code in codes.items()}


@pytest.mark.slow
@sandboxed
def test_a_package_that_looks_for_the_validation_text_finds_none_in_the_box_and_scores_worse_than_a_guess(
        hostile, reference_files, scratch):
    peeks = hostile["peeks"]
    assert peeks.reason == "" and peeks.validation_loss is not None
    assert peeks.validation_loss > UNIFORM, "it was as sure of wrong characters as of right ones"
    # the same package where the grader's files can be read (a plain child process) knows every character
    code = PEEKS.replace("REPO_DATASET", repr(str(REPO / "datasets" / "shakespeare_complete.txt.gz")))
    outside = leaderboard.judge("peeks", run(with_code(reference_files, code), scratch, steps=HOSTILE_STEPS,
                                             isolation="process"))
    assert outside.validation_loss is not None and outside.validation_loss < 0.01


@pytest.mark.slow
@sandboxed
def test_a_package_that_burns_cpu_is_stopped_at_its_budget_counted_by_the_grader(hostile):
    burns = hostile["burns"]
    assert burns.validation_loss is None
    assert burns.reason == "needed more than 6 s of CPU (counted by the grader, while training)"
    assert 6.0 <= burns.cpu_seconds < 10.0


@pytest.mark.slow
@sandboxed
def test_what_a_box_does_once_it_holds_the_windows_is_bounded_by_the_predictions_own_budget(hostile):
    """Training left most of its 6 s; none of it is the predictions' (which a box could spend training on them)."""
    budget = leaderboard.cpu_budgets(HOSTILE_STEPS, WINDOWS)[2]
    burns = hostile["burns_holding_the_windows"]
    assert burns.validation_loss is None
    assert burns.reason == f"needed more than {budget:g} s of CPU (counted by the grader, while predicting)"
    assert burns.cpu_seconds < budget + 4.0


@pytest.mark.slow
@sandboxed
def test_a_package_that_allocates_past_the_memory_limit_ran_out_of_memory(hostile):
    assert hostile["hogs"].validation_loss is None
    assert hostile["hogs"].reason.startswith("ran out of memory (")


@pytest.mark.slow
@sandboxed
def test_a_package_that_fails_to_import_says_why(hostile):
    assert hostile["breaks_import"].validation_loss is None
    assert hostile["breaks_import"].reason == \
        "import failed: ModuleNotFoundError: No module named 'tinytorch_helpers_nobody_installed'"


@pytest.mark.slow
@sandboxed
def test_predictions_that_are_not_finite_are_refused(hostile):
    assert hostile["nan"].validation_loss is None
    assert hostile["nan"].reason == "sent predictions that are not all finite numbers"


@pytest.mark.slow
@sandboxed
def test_a_forged_reply_claiming_every_character_certain_is_not_a_distribution(hostile):
    assert hostile["forges"].validation_loss is None
    assert hostile["forges"].reason.startswith("sent rows that are not probability distributions")


@pytest.mark.slow
@sandboxed
def test_predictions_of_the_wrong_shape_are_refused(hostile):
    assert hostile["forges_shape"].validation_loss is None
    assert hostile["forges_shape"].reason.startswith("sent predictions of the wrong form")


@pytest.mark.slow
@sandboxed
def test_the_class_is_ranked_by_loss_with_every_failure_last_and_its_reason(hostile, reference):
    ranked = leaderboard.rank([*hostile.values(), reference])
    assert [entry.student for _, entry in ranked[:2]] == ["reference", "peeks"]
    assert [place for place, _ in ranked] == [1, 2] + [3] * (len(ranked) - 2)
    assert all(entry.validation_loss is None and entry.reason for _, entry in ranked[2:])


# ---------------------------------------------------------------------------------------------------
# Ranking and reporting


def entry(student: str, loss: float | None, reason: str = "") -> Entry:
    return Entry(student, loss, reason or ("" if loss is not None else "failed while training: ValueError"), 1.0, 30)


def test_rank_orders_by_loss_ties_share_a_rank_and_the_order_never_depends_on_the_input_order():
    entries = [entry("dora", None), entry("carl", 1.9), entry("bea", 1.8), entry("ann", 1.9), entry("al", None)]
    ranked = leaderboard.rank(entries)
    assert [(place, e.student) for place, e in ranked] == [(1, "bea"), (2, "ann"), (2, "carl"), (4, "al"),
                                                          (4, "dora")]
    assert leaderboard.rank(entries[::-1]) == ranked


def test_the_leaderboard_csv_is_the_instructors_and_no_spreadsheet_runs_an_id(tmp_path):
    out = tmp_path / "out"
    ranked = leaderboard.rank([entry("=HYPERLINK(\"http://x\")", 1.5), entry("ann", None)])
    leaderboard.write_leaderboard(out, ranked)
    path = out / "leaderboard.csv"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(out.stat().st_mode) == 0o700
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "rank,student,validation_loss,reason,cpu_seconds,steps"
    assert lines[1].startswith("1,\"'=HYPERLINK(\"\"http://x\"\")\",1.5000,")
    assert lines[2] == "2,ann,,failed while training: ValueError,1.0,30"


def test_as_meta_gives_report_html_each_students_rank_loss_and_reason():
    meta = leaderboard.as_meta(leaderboard.rank([entry("ann", 1.23456), entry("bob", None)]))
    assert meta == [{"student": "ann", "rank": 1, "validation_loss": 1.2346, "reason": "", "seconds": 1.0},
                    {"student": "bob", "rank": 2, "validation_loss": None,
                     "reason": "failed while training: ValueError", "seconds": 1.0}]


def test_a_box_that_ended_or_was_stopped_is_ranked_last_in_the_graders_words():
    base = Evidence(STEPS, SEED, WINDOWS, (10.0, 50.0, 4.0), 1 << 30, replies=(b'{"imported": true}',))
    said = {why: leaderboard.judge("s", replace(base, stopped=why, status=-9)).reason
            for why in ("cpu", "wall", "memory", "truncated", "ended")}
    assert said == {"cpu": "needed more than 50 s of CPU (counted by the grader, while training)",
                    "wall": "was still running after 160 s (while training)",
                    "memory": "ran out of memory (more than 1024 MiB, while training)",
                    "truncated": "wrote more than the grader reads",
                    "ended": "ended without predictions while training: the process running your code was killed "
                             "by SIGKILL (killed: a limit was reached)"}
    error = replace(base, replies=(*base.replies, b'{"n": 1, "error": "MyError: 4f2a"}'))
    assert leaderboard.judge("s", error).reason == "failed while training: an exception of its own kind"
