"""docs/security.md names, for every invariant, the tests that hold it; each named test exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEADING = re.compile(r"^### (\d+)\. (.+)$", re.M)
TEST = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def invariants() -> dict[str, str]:
    """Each invariant's heading -> its section of docs/security.md."""
    text = (REPO / "docs" / "security.md").read_text(encoding="utf-8")
    found = list(HEADING.finditer(text))
    ends = [match.start() for match in found[1:]] + [text.find("\n## ", found[-1].end())]
    return {match[0]: text[match.end():end] for match, end in zip(found, ends)}


def test_the_seven_invariants_are_written_down():
    assert [heading.split(".")[0][4:] for heading in invariants()] == [str(n) for n in range(1, 8)]


def test_every_invariant_names_tests_that_exist():
    for heading, section in invariants().items():
        named = TEST.findall(section)
        assert named, f"{heading} names no test"
        for path, name in named:
            source = (REPO / path).read_text(encoding="utf-8") if (REPO / path).is_file() else ""
            assert re.search(rf"^def {name}\(", source, re.M), f"{heading}: {path}::{name} does not exist"
