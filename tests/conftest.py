"""Fixtures for the project's own tests: a throwaway copy of the course, and `tito` run as a real
subprocess in it, the way a student or a maintainer runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def copy_course(destination: Path) -> Path:
    """A copy of what a student's clone holds that tito reads and writes."""
    for folder in ("solutions", "modules", "autograder", "milestones"):
        shutil.copytree(REPO / folder, destination / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (destination / "src" / "tinytorch").mkdir(parents=True)
    shutil.copy2(REPO / "src" / "tinytorch" / "__init__.py", destination / "src" / "tinytorch" / "__init__.py")
    return destination


def tito(root: Path, *args: str, timeout: float = 900) -> Run:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "tito", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout, done.stderr)


def stage_numbers() -> list[str]:
    return sorted(p.name[:2] for p in (REPO / "solutions").iterdir() if p.is_dir() and p.name[:2].isdigit())


@pytest.fixture
def course(tmp_path: Path) -> Path:
    return copy_course(tmp_path / "course")


@pytest.fixture(scope="session")
def shared_course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy for the tests that only read results; never modified after set-up."""
    return copy_course(tmp_path_factory.mktemp("shared") / "course")
