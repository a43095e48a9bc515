"""report.html: the instructor's page of a graded class at a glance, one self-contained file (no script, no
network, plots inline as SVG). Every text from a submission (ids, notes, reasons) is attacker-controlled:
it is escaped, bounded, and never drawn into a plot; a Content-Security-Policy forbids scripts and fetches."""

from __future__ import annotations

import html
import io
import math
import re
from collections import Counter
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tito.grading import MODES, _write_private
from tito.submissions import printable

MAX_REASON = 300  # characters of one reason or fault shown
MAX_FAILED_ROWS = 20  # checks in "failed most"
MAX_FAULT_ROWS = 200  # grader faults listed (all are counted)
MAX_PHASES = 16  # kinds of phase timed; more are not shown
MAX_WORKERS = 50  # rows of the workers' table
REASONS_KEPT = 16  # counters per check for its most common reason
BINS_PER_DECADE = 40  # of the durations' histograms: a quantile within 3 %


def _text(value: object) -> str:
    """Any value as HTML text: on one line, every control character an escape, every markup character an entity."""
    return html.escape(printable(str(value)), quote=True)


def _reason(text: str) -> str:
    """A reason or a fault as shown: whitespace collapsed, at most MAX_REASON characters."""
    text = " ".join(text.split())
    return text if len(text) <= MAX_REASON else text[:MAX_REASON - 1] + "…"


def _not_submitted_note(stage_name: str) -> str:
    return f"no notebook for {stage_name} was submitted"  # tito.grading.Grader.grade's words


_NOT_SUBMITTED = re.compile(r"no notebook for \d\d_\w+ was submitted")  # where meta names no stage


class _TopReasons:
    """The most common of a stream of reasons in REASONS_KEPT counters (Metwally et al.'s Space-Saving): a
    reason given for more than 1/REASONS_KEPT of the failures is always found, and its count is a lower bound."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.errors: dict[str, int] = {}  # how much of a count may belong to reasons it replaced

    def add(self, reason: str) -> None:
        if reason in self.counts:
            self.counts[reason] += 1
            return
        floor = 0
        if len(self.counts) >= REASONS_KEPT:
            least = min(self.counts, key=self.counts.__getitem__)
            floor = self.counts.pop(least)
            del self.errors[least]
        self.counts[reason], self.errors[reason] = floor + 1, floor

    def top(self) -> tuple[str, int, bool]:
        """The most common reason, how many failures gave it at least, and whether that count is exact."""
        reason = max(self.counts, key=lambda r: (self.counts[r], -self.errors[r]))
        return reason, self.counts[reason] - self.errors[reason], not any(self.errors.values())


class _Durations:
    """A sum, a count and a histogram on a log scale (BINS_PER_DECADE a decade from 1 ms): quantiles in
    bounded memory."""

    def __init__(self) -> None:
        self.total, self.count = 0.0, 0
        self.bins: Counter[int] = Counter()

    def add(self, seconds: float) -> None:
        seconds = seconds if seconds >= 0 and math.isfinite(seconds) else 0.0
        self.total += seconds
        self.count += 1
        self.bins[0 if seconds < 1e-3 else 1 + int(BINS_PER_DECADE * math.log10(seconds / 1e-3))] += 1

    def quantile(self, q: float) -> float:
        seen = 0
        for index in sorted(self.bins):
            seen += self.bins[index]
            if seen >= q * self.count:
                return 0.0 if index == 0 else 1e-3 * 10 ** ((index - 0.5) / BINS_PER_DECADE)
        return 0.0


@dataclass
class _Column:
    """One (stage, mode) of the class: what the page shows of it, kept as the grades go by."""
    scores: Counter[float] = field(default_factory=Counter)
    graded: int = 0
    earned: Counter[str] = field(default_factory=Counter)  # task -> submissions that earned all its points
    tasks: dict[str, None] = field(default_factory=dict)  # in the order seen
    failures: Counter[str] = field(default_factory=Counter)  # check -> failed by
    task_of: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, _TopReasons] = field(default_factory=dict)
    max_score: float = 0.0


@dataclass
class _Class:
    meta: dict
    columns: dict[tuple[str, str], _Column] = field(default_factory=dict)
    cells: dict[tuple[str, str, str], float | str] = field(default_factory=dict)  # (student, stage, mode)
    faults: list[tuple[str, str, str, str]] = field(default_factory=list)  # student, stage, mode, what
    fault_count: int = 0
    phases: dict[str, _Durations] = field(default_factory=dict)
    workers: Counter[str] = field(default_factory=Counter)

    def column(self, stage: str, mode: str) -> _Column:
        if (stage, mode) not in self.columns:
            column = self.columns[stage, mode] = _Column()
            info = self.meta.get("stages", {}).get(stage, {})
            column.max_score = float(info.get("max_score", 0.0))
            for check in info.get("checks", []):
                column.tasks.setdefault(str(check["task"]))
        return self.columns[stage, mode]

    def fault(self, grade: dict, what: str) -> None:
        self.fault_count += 1
        if len(self.faults) < MAX_FAULT_ROWS:
            self.faults.append((str(grade["student"]), str(grade["stage"]), str(grade["mode"]), _reason(what)))

    def add(self, grade: dict) -> None:
        stage, mode, student = str(grade["stage"]), str(grade["mode"]), str(grade["student"])
        column = self.column(stage, mode)
        column.max_score = column.max_score or float(grade["max_score"])
        for phase, seconds in (grade.get("phases") or {}).items():
            if phase in self.phases or len(self.phases) < MAX_PHASES:
                self.phases.setdefault(str(phase), _Durations()).add(float(seconds))
        if grade.get("worker"):
            self.workers[str(grade["worker"])] += 1
        if grade.get("fault"):
            self.cells[student, stage, mode] = "grader fault"
            self.fault(grade, str(grade["fault"]))
            return
        name = self.meta.get("stages", {}).get(stage, {}).get("name")
        absent = (lambda note: note == _not_submitted_note(name)) if name else _NOT_SUBMITTED.fullmatch
        if any(absent(note) for note in grade["notes"]):
            self.cells[student, stage, mode] = "not submitted"
            return
        self.cells[student, stage, mode] = float(grade["score"])
        column.graded += 1
        column.scores[round(float(grade["score"]), 6)] += 1
        points: dict[str, list[float]] = {}
        for test in grade["tests"]:
            task, check = str(test["task"]), str(test["id"])
            column.tasks.setdefault(task)
            earned = points.setdefault(task, [0.0, 0.0])
            earned[0] += float(test["points"])
            earned[1] += float(test["max_points"])
            if test.get("fault"):
                self.fault(grade, f"check {check}: {test.get('public') or 'a fault of the grader'}")
            elif not test["passed"]:
                column.failures[check] += 1
                column.task_of[check] = task
                column.reasons.setdefault(check, _TopReasons()).add(_reason(str(test.get("public") or "")))
        for task, (got, worth) in points.items():
            if worth > 0 and got >= worth - 1e-9:
                column.earned[task] += 1


def write_report(out: Path, grades: Iterable[dict], meta: dict) -> Path:
    """report.html in `out` (0600 from its first byte: use tito.grading._write_private); returns its path.

    `grades` (dicts as dataclasses.asdict(Grade) gives them, with optional "phases" and "worker") is read once
    and never held: only counts, each (student, stage)'s score and bounded tallies are kept."""
    whole = _Class(meta)
    for grade in grades:
        whole.add(grade)
    with _plain_text_plots():
        page = _page(whole)
    path = out / "report.html"
    _write_private(path, page)
    return path


# ---------------------------------------------------------------------------------------------------
# The page

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ddd;padding:2px 8px;text-align:left}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.wide{overflow-x:auto}.grid{display:flex;flex-wrap:wrap;gap:1em}.grid figure{width:280px}
figure{margin:0}figure svg{max-width:100%;height:auto}
figcaption{font-size:.9em;color:#555}.alarm{background:#fde2e2;border:2px solid #c00;padding:.6em 1em;font-weight:bold}
.full{background:#cdeccd}.high{background:#e6f4d7}.mid{background:#fbf1cf}.low{background:#fbdcc8}
.none{background:#f6c6c6}.fault{background:#c00;color:#fff}
.absent{color:#777;background:#eee;font-style:italic;font-size:.8em;line-height:1.1}
"""


def _page(whole: _Class) -> str:
    meta = whole.meta
    stages = sorted({*meta.get("stages", {}), *(stage for stage, _ in whole.columns)})
    seen = {mode for _, mode in whole.columns}
    modes = [mode for mode in MODES if mode in seen] + sorted(seen - set(MODES)) or ["cumulative"]
    columns = [(stage, mode) for stage in stages for mode in modes]
    for stage, mode in columns:
        whole.column(stage, mode)
    students = sorted({*map(str, meta.get("students", [])), *(student for student, _, _ in whole.cells)})
    label = {(stage, mode): stage + (f" ({mode})" if len(modes) > 1 else "") for stage, mode in columns}
    title = meta.get("title") or "Class report"
    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>{_text(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_text(title)}</h1>",
        f"<p>{len(students)} students; stages {_text(', '.join(stages))}. Protection in force: "
        f"{_text(meta.get('protection', 'not given'))}. Seeds: "
        f"{_text(', '.join(f'stage {n} {s}' for n, s in sorted(meta.get('seeds', {}).items())))}.</p>",
    ]
    if whole.fault_count:
        parts.append(f"<p class=\"alarm\" role=\"alert\">{_count(whole.fault_count, 'grader fault')}: not real "
                     "scores. Regrade them (<a href=\"#faults\">listed below</a>).</p>")
    parts += _histograms(whole, columns, label, students)
    parts += _students(whole, columns, label, students)
    parts += _heatmap(whole, columns, label)
    parts += _failed_most(whole, columns, label)
    parts += _faults(whole)
    parts += _phases(whole)
    parts += _leaderboard(meta.get("leaderboard") or [])
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _histograms(whole: _Class, columns: list, label: dict, students: list[str]) -> list[str]:
    parts = ["<h2 id=\"scores\">Scores per stage</h2>", "<div class=\"grid\">"]
    for key in columns:
        column = whole.columns[key]
        absent = sum(whole.cells.get((s, *key), "not submitted") == "not submitted" for s in students)
        counts, edges = np.histogram(list(column.scores), bins=_bins(column),
                                     weights=list(column.scores.values()))
        figure, axis = _figure(2.9, 2.1)
        axis.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="#4a7fb5", edgecolor="white")
        axis.set_xlim(edges[0], edges[-1])
        axis.set_title(f"stage {label[key]}", fontsize=10)
        axis.set_xlabel(f"score (of {column.max_score:g})", fontsize=8)
        axis.set_ylabel("submissions", fontsize=8)
        axis.yaxis.get_major_locator().set_params(integer=True)
        axis.tick_params(labelsize=7)
        if not column.graded:
            axis.text(0.5, 0.5, "no graded submission", transform=axis.transAxes, ha="center", color="#888")
        mean = sum(s * n for s, n in column.scores.items()) / max(1, column.graded)
        faults = sum(whole.cells.get((s, *key)) == "grader fault" for s in students)
        caption = f"{column.graded} graded, mean {mean:.1f}, median {_median(column.scores):g}; {absent} not submitted"
        if faults:
            caption += f"; {_count(faults, 'grader fault')}"
        ident = "scores-" + "-".join(key)
        parts.append(f"<figure id=\"{_text(ident)}\" aria-label=\"scores of stage {_text(label[key])}\">"
                     f"{_svg(figure, ident)}<figcaption>{caption}</figcaption></figure>")
    parts.append("</div>")
    return parts


def _bins(column: _Column) -> np.ndarray:
    """Edges of at most 20 bins from 0 to the stage's maximum: whole points each in one bin when scores are whole."""
    top = max(column.max_score, max(column.scores, default=0.0), 1.0)
    if top == int(top) and all(score == int(score) for score in column.scores):
        width = math.ceil(top / 20)
        return np.arange(0, top // width + 2) * width - 0.5
    return np.linspace(0, top, 21)


def _students(whole: _Class, columns: list, label: dict, students: list[str]) -> list[str]:
    head = "".join(f"<th scope=\"col\">{_text(label[key])}</th>" for key in columns)
    parts = ["<h2 id=\"by-student\">Students by stage</h2>", "<div class=\"wide\"><table id=\"students\">",
             f"<thead><tr><th scope=\"col\">student</th>{head}</tr></thead><tbody>"]
    for student in students:
        cells = []
        for key in columns:
            cell = whole.cells.get((student, *key), "not submitted")
            if isinstance(cell, str):
                cells.append(f"<td class=\"{'fault' if cell == 'grader fault' else 'absent'}\">{cell}</td>")
            else:
                worth = whole.columns[key].max_score
                cells.append(f"<td class=\"num {_band(cell / worth if worth else 0.0)}\">{cell:g}</td>")
        parts.append(f"<tr><th scope=\"row\">{_text(student)}</th>{''.join(cells)}</tr>")
    parts.append("</tbody></table></div>")
    return parts


def _band(share: float) -> str:
    return "full" if share >= 1 - 1e-9 else "high" if share >= 0.75 else "mid" if share >= 0.5 else \
        "low" if share > 0 else "none"


def _heatmap(whole: _Class, columns: list, label: dict) -> list[str]:
    import matplotlib

    rows = [key for key in columns if whole.columns[key].tasks]
    if not rows:
        return []
    width = max(len(whole.columns[key].tasks) for key in rows)
    share = np.full((len(rows), width), np.nan)
    figure, axis = _figure(max(4.0, 0.62 * width + 1.6), 0.42 * len(rows) + 1.0)
    for row, key in enumerate(rows):
        column = whole.columns[key]
        for position, task in enumerate(sorted(column.tasks, key=_natural)):
            if column.graded:
                share[row, position] = column.earned[task] / column.graded
            shown = "–" if not column.graded else f"{100 * share[row, position]:.0f}%"
            dark = column.graded and not 0.2 <= share[row, position] <= 0.8
            axis.text(position, row, f"{task}\n{shown}", ha="center", va="center", fontsize=6.5,
                      color="white" if dark else "black")
    colours = matplotlib.colormaps["RdYlGn"].resampled(10)  # ten bands of 10 %: a colorbar of vectors too
    # a mesh of vector cells, not imshow's embedded PNG (which the page's policy would refuse to show)
    image = axis.pcolormesh(np.arange(width + 1) - 0.5, np.arange(len(rows) + 1) - 0.5, np.ma.masked_invalid(share),
                            cmap=colours, vmin=0, vmax=1, edgecolors="white", linewidth=1)
    axis.invert_yaxis()
    axis.set_facecolor("#f2f2f2")
    axis.set_yticks(range(len(rows)), [f"stage {label[key]}" for key in rows], fontsize=8)
    axis.set_xticks(range(width), [str(n + 1) for n in range(width)], fontsize=7)
    axis.set_xlabel("the stage's tasks, in order", fontsize=8)
    figure.colorbar(image, ax=axis, fraction=0.03, pad=0.02).ax.tick_params(labelsize=7)
    return ["<h2 id=\"tasks\">Share of the class that earned each task</h2>",
            "<figure id=\"task-heatmap\" aria-label=\"share of graded submissions that earned each task, stages by "
            f"tasks\">{_svg(figure, 'task-heatmap')}<figcaption>Of each stage's graded submissions (not those not "
            "submitted, nor grader faults), the share that earned all the task's points.</figcaption></figure>"]


def _natural(task: str) -> list[tuple[int, int | str]]:
    """A task's place among its stage's: 01.2 before 01.10."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", task) if part]


def _failed_most(whole: _Class, columns: list, label: dict) -> list[str]:
    failed = sorted(((column.failures[check], key, check) for key in columns
                     for column in [whole.columns[key]] for check in column.failures),
                    key=lambda item: (-item[0], item[1], item[2]))
    parts = ["<h2 id=\"failed\">Checks failed most</h2>"]
    if not failed:
        return [*parts, "<p>No check was failed.</p>"]
    parts.append("<table id=\"failed-most\"><thead><tr><th>stage</th><th>task</th><th>check</th><th>failed by</th>"
                 "<th>the reason shown most often</th></tr></thead><tbody>")
    for count, key, check in failed[:MAX_FAILED_ROWS]:
        column = whole.columns[key]
        reason, given, exact = column.reasons[check].top()
        times = _count(given, "time") if exact else f"at least {_count(given, 'time')}"
        parts.append(f"<tr><td>{_text(label[key])}</td><td>{_text(column.task_of[check])}</td><td>{_text(check)}</td>"
                     f"<td class=\"num\">{count} of {column.graded} ({100 * count / column.graded:.0f}%)</td>"
                     f"<td>{_text(reason) if reason else '<i>no reason shown to students</i>'} ({times})</td></tr>")
    parts.append("</tbody></table>")
    if len(failed) > MAX_FAILED_ROWS:
        parts.append(f"<p>{len(failed) - MAX_FAILED_ROWS} more checks were failed at least once "
                     "(summary.md lists them all).</p>")
    return parts


def _faults(whole: _Class) -> list[str]:
    if not whole.fault_count:
        return ["<h2 id=\"faults\">Grader faults</h2>", "<p>None.</p>"]
    parts = ["<h2 id=\"faults\">Grader faults</h2>",
             f"<p class=\"alarm\">{_count(whole.fault_count, 'grader fault')}: not real scores; regrade these.</p>",
             "<table id=\"fault-list\"><thead><tr><th>student</th><th>stage</th><th>mode</th><th>fault</th></tr>"
             "</thead><tbody>"]
    parts += [f"<tr><td>{_text(student)}</td><td>{_text(stage)}</td><td>{_text(mode)}</td><td>{_text(what)}</td></tr>"
              for student, stage, mode, what in whole.faults]
    parts.append("</tbody></table>")
    if whole.fault_count > len(whole.faults):
        parts.append(f"<p>and {whole.fault_count - len(whole.faults)} more (summary.md lists them all).</p>")
    return parts


def _phases(whole: _Class) -> list[str]:
    if not whole.phases:
        return []
    known = ["queued", "built", "run", "judged"]
    order = [p for p in known if p in whole.phases] + [p for p in whole.phases if p not in known]
    parts = ["<h2 id=\"time\">Time per phase</h2>", "<table id=\"phases\"><thead><tr><th>phase</th><th>jobs</th>"
             "<th>total</th><th>median per job</th><th>90th percentile</th></tr></thead><tbody>"]
    for phase in order:
        times = whole.phases[phase]
        parts.append(f"<tr><td>{_text(phase)}</td><td class=\"num\">{times.count}</td>"
                     f"<td class=\"num\">{_duration(times.total)}</td>"
                     f"<td class=\"num\">{_duration(times.quantile(0.5))}</td>"
                     f"<td class=\"num\">{_duration(times.quantile(0.9))}</td></tr>")
    parts.append("</tbody></table>")
    if whole.workers:
        rows = whole.workers.most_common(MAX_WORKERS)
        parts.append("<table id=\"workers\"><thead><tr><th>worker</th><th>jobs</th></tr></thead><tbody>" +
                     "".join(f"<tr><td>{_text(w)}</td><td class=\"num\">{n}</td></tr>" for w, n in rows) +
                     "</tbody></table>")
        if len(whole.workers) > MAX_WORKERS:
            parts.append(f"<p>and {len(whole.workers) - MAX_WORKERS} more workers.</p>")
    return parts


def _leaderboard(entries: list[dict]) -> list[str]:
    if not entries:
        return []
    ranked = sorted(entries, key=lambda e: (e.get("validation_loss") is None, e.get("rank", 0), str(e["student"])))
    parts = ["<h2 id=\"leaderboard\">Leaderboard</h2>", "<table id=\"leaderboard-table\"><thead><tr><th>rank</th>"
             "<th>student</th><th>validation loss</th><th>seconds</th><th>reason</th></tr></thead><tbody>"]
    for entry in ranked:
        loss = entry.get("validation_loss")
        rank = "unranked" if loss is None else _text(entry.get("rank", ""))
        parts.append(f"<tr><td class=\"num\">{rank}</td><td>{_text(entry['student'])}</td>"
                     f"<td class=\"num\">{'–' if loss is None else f'{float(loss):.4f}'}</td>"
                     f"<td class=\"num\">{float(entry.get('seconds') or 0.0):.0f}</td>"
                     f"<td>{_text(_reason(str(entry.get('reason') or '')))}</td></tr>")
    parts.append("</tbody></table>")
    return parts


def _count(number: int, thing: str) -> str:
    return f"{number} {thing}" + ("" if number == 1 else "s")


def _median(scores: Counter[float]) -> float:
    values = sorted(scores)
    half, seen = sum(scores.values()) / 2, 0
    for value in values:
        seen += scores[value]
        if seen >= half:
            return value
    return 0.0


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------------------------------------------
# Plots: matplotlib's Figure without pyplot, so nothing is registered in the process and nothing needs closing

def _plain_text_plots() -> AbstractContextManager:
    """matplotlib's settings while the page's figures are made: text drawn as paths (no font to fetch), never
    read as mathtext ("$") nor LaTeX, and ids the same from run to run."""
    import matplotlib

    return matplotlib.rc_context({"svg.fonttype": "path", "text.parse_math": False, "text.usetex": False,
                                  "svg.hashsalt": "tito-report", "font.family": "DejaVu Sans"})


def _figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots()


def _svg(figure: Any, prefix: str) -> str:
    """The figure as an <svg> element to inline: no XML prolog, and its ids prefixed so that the figures of
    one page never share one. Text is drawn as paths; matplotlib escapes it in the comments it writes."""
    stream = io.StringIO()
    figure.savefig(stream, format="svg", metadata={"Date": None})
    svg = stream.getvalue()
    svg = svg[svg.index("<svg"):]
    prefix = re.sub(r"[^\w-]", "_", prefix)
    return re.sub(r'(\bid="|href="#|url\(#)', rf"\1{prefix}-", svg)
