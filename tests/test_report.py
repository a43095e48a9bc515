"""report.html, the instructor's page of a class: it names every student as text (no id becomes markup, in the
tables or the plots), shows each stage's scores, the tasks the class earned, the checks it failed most with
their public reasons, grader faults, time per phase and the leaderboard; it reads the grades once and is the
instructor's file. The browser tests open it in headless Chromium, as an instructor's browser would."""

from __future__ import annotations

import os
import random
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tito import report
from tito.report import write_report

from conftest import REPO

HOSTILE = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "$x^2$ & <b>bold</b>"]
STUDENTS = ["ada", "bob", "cy", *HOSTILE]  # bob never submitted stage 02
NEVER_SUBMITTED = "dee"  # found in the class, submitted nothing at all
STAGES = {"01": ("01_tensor", 3), "02": ("02_autograd", 2), "03": ("03_activations", 2)}  # number of tasks
SECRET = "expected 41.5"  # what a check's message may hold and the page must never show


# ---------------------------------------------------------------------------------------------------
# A synthetic class


def _meta(stages: dict[str, tuple[str, int]], students: list[str], **extra: object) -> dict:
    checks = {number: [{"id": f"test_{name[3:]}_{task}_{k}", "task": f"{number}.{task}", "points": 1.0}
                       for task in range(1, tasks + 1) for k in (1, 2)] for number, (name, tasks) in stages.items()}
    return {"title": "TinyTorch, autumn term", "protection": "a bubblewrap sandbox with no network",
            "seeds": {number: 1000 + int(number) for number in stages},
            "stages": {number: {"name": name, "max_score": float(len(checks[number])), "checks": checks[number]}
                       for number, (name, _) in stages.items()},
            "students": students, **extra}


def _grade(meta: dict, student: str, stage: str, passed: set[str], *, notes: list[str] | None = None,
           fault: str = "", phases: dict[str, float] | None = None, reason: str = "returned the wrong shape") -> dict:
    checks = meta["stages"][stage]["checks"]
    tests = [{"id": c["id"], "task": c["task"], "points": c["points"] if c["id"] in passed else 0.0,
              "max_points": c["points"], "passed": c["id"] in passed,
              "message": "" if c["id"] in passed else f"{reason}: {SECRET}",
              "public": "" if c["id"] in passed else reason, "fault": False} for c in checks]
    return {"student": student, "stage": stage, "mode": "cumulative", "score": sum(t["points"] for t in tests),
            "max_score": meta["stages"][stage]["max_score"], "seed": meta["seeds"][stage], "tests": tests,
            "notes": notes or [], "fault": fault, "seconds": 3.0, "public_notes": None,
            "phases": phases if phases is not None else {"queued": 0.5, "built": 0.2, "run": 2.0, "judged": 0.3},
            "worker": "tcp://10.0.0.7:40111"}


def synthetic_class() -> tuple[list[dict], dict]:
    """Six students on three stages: bob never submitted stage 02, dee nothing at all, one grade a grader
    fault, three ids made of markup, phases timed, a leaderboard."""
    leaderboard = [{"student": HOSTILE[0], "rank": 1, "validation_loss": 1.8125, "reason": "", "seconds": 410.0},
                   {"student": "ada", "rank": 2, "validation_loss": 2.25, "reason": "", "seconds": 395.0},
                   {"student": HOSTILE[1], "rank": 3, "validation_loss": None,
                    "reason": "the model did not train: <b>NaN</b> loss", "seconds": 12.0}]
    meta = _meta(STAGES, [*STUDENTS, NEVER_SUBMITTED], leaderboard=leaderboard)
    grades = []
    for index, student in enumerate(STUDENTS):
        for stage, (name, _) in STAGES.items():
            ids = [c["id"] for c in meta["stages"][stage]["checks"]]
            if student == "bob" and stage == "02":
                grades.append(_grade(meta, student, stage, set(), notes=[f"no notebook for {name} was submitted"]))
            elif student == "cy" and stage == "03":
                grades.append(_grade(meta, student, stage, set(), fault="grader fault: OSError: no space left"))
            else:
                grades.append(_grade(meta, student, stage, set(ids[:len(ids) - index % 4]),
                                     phases={"queued": 0.1 * index, "built": 0.5, "run": 2.0 + index, "judged": 0.25}))
    return grades, meta


def realistic_class(students: int, seed: int = 0) -> tuple[Iterator[dict], dict]:
    """A class on the course's own stages and checks: each student of some skill works through the stages
    until they stop; a check fails with one of a few public reasons. The grades are made as they are read."""
    from tito import engine
    from tito.project import stages

    plans = {stage.number: (stage.name, engine.load_checks(stage)) for stage in stages(REPO)}
    ids = [f"s{n:04d}" for n in range(students)]
    meta = {"title": f"TinyTorch, a class of {students}", "protection": "a bubblewrap sandbox with no network",
            "seeds": {number: 7919 * int(number) for number in plans},
            "stages": {number: {"name": name, "max_score": float(sum(c.points for c in checks)),
                                "checks": [{"id": c.name, "task": c.task, "points": c.points} for c in checks]}
                       for number, (name, checks) in plans.items()},
            "students": ids,
            "leaderboard": [{"student": ids[n], "rank": n + 1, "validation_loss": 1.6 + 0.07 * n, "reason": "",
                             "seconds": 380.0 + 9 * n} for n in range(min(8, students))]}
    reasons = ["returned an array of the wrong shape", "the gradient differs from a finite difference",
               "raised an error on a valid input", "did not raise ValueError for mismatched shapes",
               "ran more than 20 times slower than the reference"]

    def grades() -> Iterator[dict]:
        draw = random.Random(seed)
        for student in ids:
            skill, last = draw.betavariate(5, 1.6), draw.choice([*[13] * 6, 4, 7, 9, 11])
            for number, (name, checks) in plans.items():
                if int(number) > last:
                    yield _grade(meta, student, number, set(), notes=[f"no notebook for {name} was submitted"])
                    continue
                hard = {c.name: draw.random() < 0.5 * (1 - skill) + 0.04 * int(number) * (1 - skill) for c in checks}
                passed = {c.name for c in checks if not hard[c.name]}
                grade = _grade(meta, student, number, passed, reason=reasons[(int(number) + len(passed)) % 5],
                               phases={"queued": draw.expovariate(1 / 20), "built": draw.uniform(0.3, 1.2),
                                       "run": draw.lognormvariate(3, 0.5), "judged": draw.uniform(0.2, 0.6)})
                if draw.random() < 0.003:
                    grade["fault"] = "grader fault: RuntimeError: the box ended before its first reply"
                yield grade

    return grades(), meta


# ---------------------------------------------------------------------------------------------------
# Reading the page


class Dom(HTMLParser):
    """The elements of a page, each with its attributes; each text with the ids of the elements around it; and
    each table with an id as its rows of cells' texts (the header row first)."""

    VOID = {"meta", "link", "br", "img", "input", "hr", "col", "area", "base", "source", "wbr", "embed"}

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.texts: list[tuple[tuple[str, ...], str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._open: list[tuple[str, str]] = []
        self._table: list[list[str]] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("id") or "", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table:
            self._table[-1].append("")
        if tag not in self.VOID:
            self._open.append((tag, dict(attrs).get("id") or ""))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        while self._open and self._open.pop()[0] != tag:
            pass

    def handle_data(self, data: str) -> None:
        if self._table and self._table[-1] and any(tag in ("td", "th") for tag, _ in self._open):
            self._table[-1][-1] += data
        if data.strip():
            self.texts.append((tuple(f"{tag}#{ident}" for tag, ident in self._open), data.strip()))

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [attrs for tag, attrs in self.elements if tag == name]

    def inside(self, ident: str, tag: str) -> list[str]:
        """The texts of the `tag` elements inside the element of id `ident`."""
        return [text for path, text in self.texts if any(p.endswith(f"#{ident}") for p in path)
                and path[-1].startswith(f"{tag}#")]


def by_student(dom: Dom) -> dict[str, list[str]]:
    """The students' table: each student's id, as the page shows it, to their cells."""
    return {row[0]: row[1:] for row in dom.tables["students"][1:]}


# ---------------------------------------------------------------------------------------------------
# Without a browser


def test_the_grades_are_read_once_and_the_page_is_the_instructors_alone(tmp_path):
    grades, meta = synthetic_class()
    read = []

    def once() -> Iterator[dict]:
        read.append("started")
        yield from grades

    path = write_report(tmp_path, once(), meta)
    assert path == tmp_path / "report.html"
    assert read == ["started"], "the grades are read in one pass"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the page holds every student's grades"


def test_the_page_is_written_from_its_first_byte_as_a_new_file_never_through_a_link(tmp_path):
    grades, meta = synthetic_class()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not the instructor's page")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "report.html").symlink_to(elsewhere)
    path = write_report(tmp_path / "out", iter(grades), meta)
    assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert elsewhere.read_text() == "not the instructor's page"


def test_every_student_is_a_row_in_order_of_id_and_a_stage_not_submitted_says_so(tmp_path):
    grades, meta = synthetic_class()
    table = by_student(Dom(write_report(tmp_path, iter(grades), meta).read_text()))
    assert list(table) == sorted([*STUDENTS, NEVER_SUBMITTED]), "every student, their id as text, sorted"
    assert table["bob"][1] == "not submitted" and table["bob"][0] != "not submitted"
    assert table[NEVER_SUBMITTED] == ["not submitted"] * 3, "a student with no grade at all"
    assert table["cy"][2] == "grader fault"
    assert table["ada"] == ["6", "4", "4"], "full marks for ada"


def test_reasons_are_the_public_words_and_never_the_message(tmp_path):
    grades, meta = synthetic_class()
    text = write_report(tmp_path, iter(grades), meta).read_text()
    assert SECRET not in text, "a check's message can hold expected values: the page may be shared with TAs"
    assert Dom(text).tables["failed-most"][1][4] == "returned the wrong shape (4 times)"


def test_a_stage_not_submitted_is_no_zero_in_the_scores_nor_a_failure(tmp_path):
    meta = _meta({"01": ("01_tensor", 1)}, ["a", "b"])
    ids = {c["id"] for c in meta["stages"]["01"]["checks"]}
    grades = [_grade(meta, "a", "01", ids),
              _grade(meta, "b", "01", set(), notes=["no notebook for 01_tensor was submitted"])]
    dom = Dom(write_report(tmp_path, iter(grades), meta).read_text())
    assert "No check was failed." in [text for _, text in dom.texts]
    assert any("1 graded, mean 2.0" in text and "1 not submitted" in text for text in dom.inside("scores-01-cumulative",
                                                                                                  "figcaption"))


def test_grader_faults_are_announced_at_the_top_and_listed(tmp_path):
    grades, meta = synthetic_class()
    grades[0]["tests"][1].update(passed=True, fault=True, public="grader fault in check x (computing): KeyError")
    dom = Dom(write_report(tmp_path, iter(grades), meta).read_text())
    assert dom.tags("p")[1].get("role") == "alert", "the alarm comes right after the class's line"
    listed = [row[3] for row in dom.tables["fault-list"][1:]]
    assert listed == ["check test_tensor_1_2: grader fault in check x (computing): KeyError",
                      "grader fault: OSError: no space left"], "a fault in one check of a grade that counts, too"


def test_the_failed_most_table_and_its_reasons_are_bounded_whatever_the_class(tmp_path):
    many = {"01": ("01_tensor", 30)}
    meta = _meta(many, [f"s{n}" for n in range(40)])
    grades = (_grade(meta, f"s{n}", "01", set(), reason=f"{n} " + "very long reason " * 200) for n in range(40))
    rows = Dom(write_report(tmp_path, grades, meta).read_text()).tables["failed-most"][1:]
    assert len(rows) == report.MAX_FAILED_ROWS, "60 checks failed; the table keeps the most failed"
    assert max(len(cell) for row in rows for cell in row) <= report.MAX_REASON + len(" (at least 40 times)")


def test_the_most_common_reason_is_found_in_bounded_memory_even_when_it_comes_last():
    top = report._TopReasons()
    for n in range(1000):
        top.add(f"a reason of its own {n}")  # each once, far more than the counters
    for _ in range(200):
        top.add("the common reason")
    reason, at_least, exact = top.top()
    assert (reason, exact) == ("the common reason", False) and 150 <= at_least <= 200
    assert len(top.counts) == report.REASONS_KEPT


def test_the_median_time_of_a_phase_is_within_three_percent():
    times = report._Durations()
    for n in range(1, 1002):
        times.add(n / 10)
    assert abs(times.quantile(0.5) - 50.1) / 50.1 < 0.03
    assert times.total == pytest.approx(sum(n / 10 for n in range(1, 1002)))


def test_a_label_with_markup_or_dollars_is_drawn_as_text_in_a_plot():
    with report._plain_text_plots():
        figure, axis = report._figure(3, 2)
        axis.set_title(HOSTILE[1] + " " + HOSTILE[2] + " --> <script>")
        svg = report._svg(figure, "hostile")
    elements = Dom(svg).elements
    assert {tag for tag, _ in elements} <= {"svg", "metadata", "rdf:rdf", "cc:work", "dc:type", "dc:format",
                                              "dc:creator", "cc:agent", "dc:title", "defs", "style", "g", "path",
                                              "use", "clippath", "rect"}, "no element but matplotlib's drawing"
    assert "Oblique" not in svg, "$x^2$ is not read as mathtext (it would draw an italic x)"
    assert all(attrs.get("id", "").startswith("hostile-") for _, attrs in elements if attrs.get("id"))


def test_the_leaderboard_ranks_entries_without_a_loss_last_with_their_reason(tmp_path):
    grades, meta = synthetic_class()
    meta["leaderboard"].reverse()
    rows = Dom(write_report(tmp_path, iter(grades), meta).read_text()).tables["leaderboard-table"][1:]
    assert [row[1] for row in rows] == [HOSTILE[0], "ada", HOSTILE[1]]
    assert rows[2][0] == "unranked" and rows[2][4] == "the model did not train: <b>NaN</b> loss"


PEAK = """import resource, sys, tempfile
from pathlib import Path
from test_report import realistic_class
from tito.report import write_report
grades, meta = realistic_class(int(sys.argv[1]))
page = write_report(Path(sys.argv[2]), grades, meta)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, page.stat().st_size)
"""


def _peak_and_size(students: int, out: Path) -> tuple[int, int]:
    """The largest resident size (MB) of a process that writes the page of a class, and the page's size."""
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
    done = subprocess.run([sys.executable, "-c", PEAK, str(students), str(out)], capture_output=True, text=True,
                          env=env, timeout=300, check=True)
    peak, size = done.stdout.split()
    return int(peak), int(size)


@pytest.mark.slow
def test_a_course_of_13000_grades_is_never_held_whole(tmp_path):
    small, _ = _peak_and_size(10, tmp_path / "small")
    large, size = _peak_and_size(1000, tmp_path / "large")  # 13 stages: 13,000 grades, 520,000 checks
    assert large - small < 25, f"{large - small} MB more for 13,000 grades than for 130; held whole they are 160 MB"
    assert size < 3_000_000, "a row a student; bounded tables and plots"


# ---------------------------------------------------------------------------------------------------
# In a browser


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is not None:
        return found
    if os.environ.get("TITO_REQUIRE_BROWSER") == "1":
        pytest.fail("TITO_REQUIRE_BROWSER=1, but neither chromium nor chromium-browser is on PATH")
    pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium); TITO_REQUIRE_BROWSER=1 "
                "makes this a failure")


def open_in_chromium(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """What headless Chromium does with `page` (its DOM with --dump-dom; the page's console on stderr), as
    root too (--no-sandbox)."""
    done = subprocess.run([chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Dom, str]:
    """The synthetic class's page, its DOM as Chromium built it, and what Chromium's console said."""
    chromium()
    folder = tmp_path_factory.mktemp("report")
    grades, meta = synthetic_class()
    page = write_report(folder, iter(grades), meta)
    done = open_in_chromium(page, folder / "profile", "--dump-dom")
    return page, Dom(done.stdout), done.stderr


@pytest.mark.slow
def test_in_a_browser_every_student_is_named_as_text_and_no_id_becomes_markup(rendered):
    _, dom, _ = rendered
    assert list(by_student(dom)) == sorted([*STUDENTS, NEVER_SUBMITTED])
    assert not dom.tags("script") and not dom.tags("img") and not dom.tags("b"), "no element from an id"
    assert [text for path, text in dom.texts if path[-1].startswith("title#")] == ["TinyTorch, autumn term"]


@pytest.mark.slow
def test_in_a_browser_every_stage_has_its_histogram_and_the_class_its_heat_map(rendered):
    _, dom, _ = rendered
    figures = {attrs["id"]: attrs for attrs in dom.tags("figure")}
    for stage in STAGES:
        assert f"scores-{stage}-cumulative" in figures, f"stage {stage}'s histogram"
    assert "task-heatmap" in figures
    assert len(dom.tags("svg")) == len(STAGES) + 1, "one inline <svg> a histogram, one for the heat map"
    ids = [attrs["id"] for _, attrs in dom.elements if attrs.get("id")]
    assert len(ids) == len(set(ids)), "the figures of one page share no id (a glyph's, a clip path's)"


@pytest.mark.slow
def test_in_a_browser_the_page_needs_nothing_its_policy_refuses(rendered):
    _, dom, console = rendered
    assert "Content Security Policy" not in console, "a plot or a style that is not inline (imshow's PNG was)"
    policy = [attrs for attrs in dom.tags("meta") if attrs.get("http-equiv") == "Content-Security-Policy"]
    assert policy and "default-src 'none'" in (policy[0]["content"] or ""), "no script, no fetch, whatever is injected"


@pytest.mark.slow
def test_in_a_browser_the_page_draws_its_tables_and_plots(rendered, tmp_path):
    from matplotlib.image import imread

    page, _, _ = rendered
    shot = tmp_path / "report.png"
    open_in_chromium(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000",
                     "--hide-scrollbars")
    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels[..., :3].std() > 0.1, "the screenshot is not blank"
