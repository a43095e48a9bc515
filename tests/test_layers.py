"""tito in layers: only tito/main.py imports a command, commands never import each other, and the code
shipped beside student code imports nothing from tito."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tito.main import main, parser

from conftest import REPO

TITO = REPO / "tito"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.parametrize("path", sorted(TITO.rglob("*.py")), ids=lambda p: str(p.relative_to(TITO)))
def test_only_main_imports_a_command(path):
    if path == TITO / "main.py":
        return
    commands = {name for name in _imports(path) if name.startswith("tito.commands.")}
    assert commands == set(), f"{path.relative_to(REPO)} imports {sorted(commands)}"


@pytest.mark.parametrize("path", sorted((TITO / "shipped").glob("*.py")), ids=lambda p: p.name)
def test_shipped_code_imports_nothing_from_tito(path):
    assert not {name for name in _imports(path) if name == "tito" or name.startswith("tito.")}


def test_every_subcommand_answers_help(capsys):
    commands = parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in commands:
        with pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0, name
        assert name in capsys.readouterr().out
