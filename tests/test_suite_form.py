"""The hidden suites stay in the table form: a family's variants carry their own task and points, and no suite
spends more than MAX_LINES_PER_CHECK lines of code per graded check (its non-blank, non-comment lines over the
checks `tito`'s plan has for the stage). The shared verdicts live in checklib, so a suite that copies one grows."""

from __future__ import annotations

from pathlib import Path

import pytest

from tito.project import stages
from tito.suite import load_checks, shipped_checklib

from conftest import REPO

MAX_LINES_PER_CHECK = 20
STAGES = stages(REPO)


def code_lines(path: Path) -> int:
    """The lines of a file that are neither blank nor only a comment (docstrings count: they are code too)."""
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines()
               if line.strip() and not line.strip().startswith("#"))


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_a_suite_spends_at_most_twenty_lines_per_graded_check(stage):
    checks, lines = load_checks(stage), code_lines(stage.suite)
    assert lines <= MAX_LINES_PER_CHECK * len(checks), (
        f"{stage.relative(stage.suite)}: {lines} lines of code for {len(checks)} graded checks "
        f"({lines / len(checks):.1f} a check, at most {MAX_LINES_PER_CHECK}): make variants of one behaviour a "
        f"family over a table, and a verdict two suites share a checklib helper")


def test_a_variant_carries_its_task_and_points_or_takes_the_decorators():
    checklib = shipped_checklib()

    def compute(tt, case):
        return None

    family = checklib.check(task="01.1", points=2, variants={"plain": None, "own": ("01.2", 3, None)})(compute)
    assert [(c.name, c.task, c.points) for c in family.checks] == [("compute[plain]", "01.1", 2),
                                                                   ("compute[own]", "01.2", 3)]
    with pytest.raises(TypeError, match="give task= and points="):
        checklib.check(variants={"plain": None})(compute)
