"""The GPT leaderboard (tito/leaderboard.py): each package trained in the real bubblewrap sandbox, its weights
scored by the course's GPT in a second box and judged here on characters neither box's student code holds;
hostile packages ranked last with their reason. Short runs (STEPS steps, WINDOWS windows) in the judged
set-up; the judged run is 1,500 steps."""

from __future__ import annotations

import ast
import json
import math
import os
import pickle
import stat
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tito import leaderboard, package, sandbox
from tito.leaderboard import Entry, Evidence
from tito.project import stages
from tito.shipped import wire
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
    return leaderboard.train(files, files_of_the_course(), steps=steps, seed=SEED, limits=LIMITS,
                             isolation=isolation, slot=0, scratch=scratch, windows=WINDOWS, cpu_seconds=cpu_seconds)


def files_of_the_course() -> dict[str, str]:
    """The course's package that scores every student's weights, as `tito grade` passes it."""
    return leaderboard.reference_files(REPO, stages(REPO)[-1])


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

ASKED_FOR_WEIGHTS = '''
import sys as _sys


def _asked_for_weights():
    """Whether the trainer is taking the trained model's parameters (its weights request), not training."""
    frame = _sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "trained_parameters":
            return True
        frame = frame.f_back
    return False


_named = GPT.named_parameters
'''

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
    while True:
        pass


GPT.forward = _burning_forward
'''

BURNS_AT_WEIGHTS = ASKED_FOR_WEIGHTS + '''

def _burning_named_parameters(self, *args, **kwargs):
    while _asked_for_weights():
        pass
    return _named(self, *args, **kwargs)


GPT.named_parameters = _burning_named_parameters
'''

HOGS = '''
_hoard = []


def _hoarding_forward(self, *args, **kwargs):
    while True:
        _hoard.append(np.ones(1 << 27))  # 1 GiB at a time, every page touched


GPT.forward = _hoarding_forward
'''

BREAKS_IMPORT = "import tinytorch_helpers_nobody_installed\n"

# The weights it sends are NaN: the course's GPT then predicts NaN
NAN = ASKED_FOR_WEIGHTS + '''

def _nan_named_parameters(self, *args, **kwargs):
    named = list(_named(self, *args, **kwargs))
    if _asked_for_weights():
        for _, param in named:
            param.data[...] = float("nan")
    return iter(named)


GPT.named_parameters = _nan_named_parameters
'''

# Parameters under names of its own
RENAMED = ASKED_FOR_WEIGHTS + '''

def _renamed_parameters(self, *args, **kwargs):
    return ((f"mine.{name}", param) for name, param in _named(self, *args, **kwargs))


GPT.named_parameters = _renamed_parameters
'''

# A GPT half as wide as the judged one: the names are the course's, the shapes are not
NARROW = '''
_init = GPT.__init__


def _narrow_init(self, vocab_size, block_size, n_layer, n_head, n_embd, *args, **kwargs):
    _init(self, vocab_size, block_size, n_layer, n_head, n_embd // 2, *args, **kwargs)


GPT.__init__ = _narrow_init
'''

# Writes its own weights reply on the report pipe, before the trainer's: an array that is not base64
UNREADABLE = ASKED_FOR_WEIGHTS + '''
import json as _json
import os as _os


def _forging_named_parameters(self, *args, **kwargs):
    if _asked_for_weights():
        claim = {"__dict__": {"wte.weight": {"__ndarray__": "not base64!", "dtype": "<f4", "shape": [1]}}}
        _os.write(int(_sys.argv[3]), (_json.dumps({"n": 2, "weights": claim}) + "\\n").encode())
    return _named(self, *args, **kwargs)


GPT.named_parameters = _forging_named_parameters
'''

# A weights reply past what the parent reads: the judged GPT's weights as float32 in base64, and 1 MiB
TOO_LARGE = UNREADABLE.replace("claim = {", "claim = 'A' * (7 << 20) or {")

# The attack that ranked first when the box predicted: models.GPT a character n-gram counted from train.txt (which
# the box holds by design), training ignored. POSING: its weights are those of a GPT it built and never trained.
NGRAM = '''
import os as _os
import sys as _sys

_CourseGPT = GPT


class GPT(Module):
    """p(next | the two characters before), counted from the training split, add-0.1 smoothed; never trained."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, *args, **kwargs):
        super().__init__()
        self.vocab_size = vocab_size
        self.knob = Parameter(np.zeros(1, dtype=np.float32))
        object.__setattr__(self, "pose", _CourseGPT(vocab_size, block_size, n_layer, n_head, n_embd)
                           if POSING else None)
        text = next(open(path, "rb").read() for path in (_os.path.join(p, "train.txt") for p in _sys.path)
                    if _os.path.isfile(path))
        table = np.zeros(256, dtype=np.int64)
        table[sorted(set(text))] = np.arange(len(set(text)))
        ids = table[np.frombuffer(text, dtype=np.uint8)]
        v = vocab_size
        counts = np.bincount((ids[:-2] * v + ids[1:-1]) * v + ids[2:], minlength=v ** 3).reshape(v * v, v) + 0.1
        self.table = np.log(counts / counts.sum(axis=1, keepdims=True)).astype(np.float32)

    def named_parameters(self, *args, **kwargs):
        return self.pose.named_parameters(*args, **kwargs) if self.pose is not None else \\
            super().named_parameters(*args, **kwargs)

    def forward(self, idx, targets=None, caches=None):
        idx = np.asarray(idx)
        before = np.concatenate([idx[:, :1], idx[:, :-1]], axis=1)
        logits = Tensor(self.table[before * self.vocab_size + idx])
        if targets is None:
            return logits
        return logits, (self.knob * 0.0).sum()  # a loss to step on, which changes nothing
'''


@pytest.fixture(scope="module")
def hostile(reference_files, scratch) -> dict[str, Entry]:
    """Each hostile package's entry, each from a short run in the sandbox (the training's CPU budget 6 s), and the
    reference's run of as many steps ("honest")."""
    dataset = repr(str(REPO / "datasets" / "shakespeare_complete.txt.gz"))
    codes = {"honest": "", "peeks": PEEKS.replace("REPO_DATASET", dataset), "burns": BURNS,
             "burns_at_weights": BURNS_AT_WEIGHTS, "hogs": HOGS, "breaks_import": BREAKS_IMPORT, "nan": NAN,
             "renamed": RENAMED, "narrow": NARROW, "unreadable": UNREADABLE, "too_large": TOO_LARGE}
    return {name: leaderboard.judge(name, run(with_code(reference_files, code), scratch, steps=HOSTILE_STEPS,
                                              cpu_seconds=6.0))
            for name, code in codes.items()}


@pytest.fixture(scope="module")
def ngrams(reference_files, scratch) -> dict[str, Entry]:
    """The n-gram attack, trained as many steps as the reference (which it ignores)."""
    return {name: leaderboard.judge(name, run(with_code(reference_files, NGRAM.replace("POSING", posing)), scratch))
            for name, posing in (("ngram", "False"), ("ngram_posing", "True"))}


@pytest.mark.slow
@sandboxed
def test_an_ngram_posing_as_the_gpt_does_not_rank_above_an_honest_gpt_trained_as_many_steps(ngrams, reference):
    """Its table never predicts: the course's GPT does, with the parameters training produced, which here are
    not a GPT's at all, or those of one never trained (about a uniform guess)."""
    assert ngrams["ngram"].validation_loss is None
    assert ngrams["ngram"].reason == "its trained parameters are not those of models.GPT's layout (names or shapes)"
    posing = ngrams["ngram_posing"]
    assert posing.reason == "" and posing.validation_loss is not None and reference.validation_loss is not None
    assert posing.validation_loss > reference.validation_loss + 1, (posing, reference)
    ranked = leaderboard.rank([*ngrams.values(), reference])
    assert [entry.student for _, entry in ranked] == ["reference", "ngram_posing", "ngram"]


@pytest.mark.slow
@sandboxed
def test_the_students_box_is_sent_no_validation_window(reference_files, scratch, monkeypatch):
    """Every line the parent writes to a box, seen where it is written (sandbox.Box.send): the student's box gets
    the training and the weights request alone; the windows go to the course's box only."""
    sent: dict[str, list[dict]] = {"student": [], "course": []}
    made = sandbox.Box.__init__
    send = sandbox.Box.send

    def spying_init(self, job, package, **kwargs):
        code = (package / "tinytorch" / "core" / "transformer.py").read_text(encoding="utf-8")
        self.spied = "student" if "# the student's own" in code else "course"
        made(self, job, package, **kwargs)

    def spying_send(self, line, deadline):
        sent[self.spied].append(json.loads(line))
        return send(self, line, deadline)

    monkeypatch.setattr(sandbox.Box, "__init__", spying_init)
    monkeypatch.setattr(sandbox.Box, "send", spying_send)
    entry = leaderboard.judge("s", run(with_code(reference_files, "# the student's own"), scratch,
                                       steps=HOSTILE_STEPS))
    assert entry.reason == "" and entry.validation_loss is not None
    assert [sorted(request) for request in sent["student"]] == [["n", "train"], ["n", "weights"]]
    assert sent["student"][1] == {"n": 2, "weights": True}
    contexts, _ = leaderboard.validation_windows(SEED, WINDOWS)
    windows = wire.encode(contexts.astype(np.uint8))["__ndarray__"]
    assert not [request for request in sent["student"] if windows in json.dumps(request)]
    assert [sorted(request["predict"]) for request in sent["course"]] == [["contexts", "weights"]]
    assert sent["course"][0]["predict"]["contexts"]["__ndarray__"] == windows


@pytest.mark.slow
@sandboxed
def test_a_package_that_looks_for_the_validation_text_is_scored_by_its_weights_alone(
        hostile, reference_files, scratch):
    """Its forward is never asked to predict: in the box, and where the grader's files can be read (a plain
    child process, in which its forward would know every character), it scores what honest training scores."""
    honest = hostile["honest"]
    assert honest.reason == "" and honest.validation_loss is not None
    assert hostile["peeks"].validation_loss == pytest.approx(honest.validation_loss, abs=1e-6)
    code = PEEKS.replace("REPO_DATASET", repr(str(REPO / "datasets" / "shakespeare_complete.txt.gz")))
    outside = leaderboard.judge("peeks", run(with_code(reference_files, code), scratch, steps=HOSTILE_STEPS,
                                             isolation="process"))
    assert outside.validation_loss == pytest.approx(honest.validation_loss, abs=1e-6)


@pytest.mark.slow
@sandboxed
def test_a_package_that_burns_cpu_is_stopped_at_its_budget_counted_by_the_grader(hostile):
    burns = hostile["burns"]
    assert burns.validation_loss is None
    assert burns.reason == "needed more than 6 s of CPU (counted by the grader, while training)"
    assert 6.0 <= burns.cpu_seconds < 10.0


@pytest.mark.slow
@sandboxed
def test_a_package_that_burns_cpu_at_the_weights_request_is_stopped_at_that_requests_budget(hostile):
    """Training left most of its 6 s; none of it is the weights request's."""
    budget = leaderboard.cpu_budgets(HOSTILE_STEPS, WINDOWS)[2]
    burns = hostile["burns_at_weights"]
    assert burns.validation_loss is None
    assert burns.reason == f"needed more than {budget:g} s of CPU (counted by the grader, while sending its " \
                           "trained parameters)"
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
def test_weights_that_are_not_finite_give_predictions_that_are_refused(hostile):
    assert hostile["nan"].validation_loss is None
    assert hostile["nan"].reason == "its trained parameters give predictions that are not all finite numbers"


@pytest.mark.slow
@sandboxed
def test_weights_of_other_names_or_shapes_do_not_load_into_the_courses_gpt(hostile):
    for name in ("renamed", "narrow"):
        assert hostile[name].validation_loss is None
        assert hostile[name].reason == "its trained parameters are not those of models.GPT's layout (names or shapes)"


@pytest.mark.slow
@sandboxed
def test_a_forged_weights_reply_that_cannot_be_read_is_refused(hostile):
    assert hostile["unreadable"].validation_loss is None
    assert hostile["unreadable"].reason.startswith("sent trained parameters that could not be read")


@pytest.mark.slow
@sandboxed
@pytest.mark.slow
@sandboxed
def test_a_weights_reply_larger_than_the_judged_gpts_weights_is_not_read(hostile):
    assert hostile["too_large"].validation_loss is None
    assert hostile["too_large"].reason == "wrote more than the grader reads"


@pytest.mark.slow
@sandboxed
def test_the_class_is_ranked_by_loss_with_every_failure_last_and_its_reason(hostile, reference):
    ranked = leaderboard.rank([*hostile.values(), reference])
    assert ranked[0][1].student == "reference"
    assert {entry.student for _, entry in ranked[1:3]} == {"honest", "peeks"}
    assert all(entry.validation_loss is None and entry.reason for _, entry in ranked[3:])
    assert {place for place, _ in ranked[3:]} == {4}


def test_the_parameters_read_are_the_course_gpts_in_the_judged_setup(reference_files, tmp_path):
    """What the parent reads from a student's box is bounded by the judged GPT's weights: the reference's count."""
    package.write_package(tmp_path / "pkg", reference_files)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import tinytorch as tt; m = tt.models.GPT(*map(int, "
            "sys.argv[2:])); print(sum(p.data.size for _, p in m.named_parameters()))")
    counted = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path / "pkg"), "84",
                              *map(str, (leaderboard.CONTEXT, leaderboard.LAYERS, leaderboard.HEADS,
                                         leaderboard.WIDTH))], capture_output=True, text=True, check=True, timeout=120)
    assert int(counted.stdout) == leaderboard.parameter_count() == 823_040
    assert leaderboard.reference_files(REPO, stages(REPO)[-1]) == reference_files


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
    base = Evidence(STEPS, SEED, WINDOWS, (10.0, 50.0, 3.0, 4.0), 1 << 30, replies=(b'{"imported": true}',))
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
    trained = replace(base, replies=(*base.replies, b'{"n": 1, "trained": true}'))
    assert leaderboard.judge("s", replace(trained, stopped="cpu")).reason == \
        "needed more than 3 s of CPU (counted by the grader, while sending its trained parameters)"
    missing = replace(trained, replies=(*trained.replies, b'{"n": 2, "error": "ValueError: x"}'))
    assert leaderboard.judge("s", missing).reason == "failed while sending its trained parameters: ValueError"
    other = replace(trained, replies=(*trained.replies, b'{"n": 2}'))
    assert leaderboard.judge("s", other).reason == "answered the weights request with something else"
    sent = replace(trained, replies=(*trained.replies, leaderboard.SENT_WEIGHTS))
    assert leaderboard.judge("s", replace(sent, stopped="cpu")).reason == \
        "needed more than 4 s of CPU (counted by the grader, while predicting with its trained parameters in the " \
        "course's GPT)"


def test_the_leaderboard_takes_the_output_folders_lock_before_it_trains_anyone(tmp_path):
    """A second run into a folder another tito grade is writing is refused at once, before any training, with
    the reports of the first left as they are (an attack found leaderboard.csv overwritten, then the refusal)."""
    from tito import jobs

    from conftest import tito

    (tmp_path / "class" / "ann").mkdir(parents=True)
    notebook = REPO / "modules" / "01_tensor" / "01_tensor.ipynb"
    (tmp_path / "class" / "ann" / "01_tensor.ipynb").write_bytes(notebook.read_bytes())
    out = tmp_path / "out"
    first = jobs.Journal(out)
    try:
        (out / "leaderboard.csv").write_text("the first run's\n")
        run = tito(REPO, "grade", str(tmp_path / "class"), "--milestone", "gpt", "--steps", "1", "--out", str(out),
                   "--unsafe-no-sandbox", timeout=120)
    finally:
        first.close()
    assert run.code == 2 and "another tito grade is writing its reports into" in run.stderr, run.stderr
    assert (out / "leaderboard.csv").read_text() == "the first run's\n"
    assert "training each student's GPT" not in run.stderr
