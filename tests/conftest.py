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


# ---------------------------------------------------------------------------------------------------
# `make test` runs the suite on three pytest-xdist workers (-n 3), `make test-fast` on two. Each test is a unit
# of work of its own, handed to whichever worker is free, except the tests of ONE_WORKER: they read what
# one module- or session-scoped fixture built (the nbgrader course, the hostile class, the two engines'
# verdicts, stage 01's drawn cases), so each of these files is one unit, run whole on one worker, and
# builds it once. Units go out longest first: these files, then the other slow tests, then the quick
# ones, which even out the end.

ONE_WORKER = ("test_course.py", "test_grade.py", "test_one_engine.py", "test_reader_bounds.py",
              "test_exchange.py", "test_course_datasets.py", "test_leaderboard.py",
              "test_course_autograde.py", "test_student_loop.py")  # longest first


def _one_worker_file(nodeid: str) -> str | None:
    path = nodeid.split("::", 1)[0]
    return path if Path(path).name in ONE_WORKER else None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--stage", metavar="NN", help="only the tests of one stage (those parametrised by it), "
                                                    "as `make test-stage N=12` runs them")


def _of_stage(item: pytest.Item, number: str) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and any(part == number or part.startswith(f"{number}_")
                                        for part in callspec.id.split("-"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    number = config.getoption("--stage")
    if number:
        kept = [item for item in items if _of_stage(item, number)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    if not hasattr(config, "workerinput"):  # not an xdist worker: the order of the files
        return

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = _one_worker_file(item.nodeid)
        if path is not None:
            return 0, ONE_WORKER.index(Path(path).name)
        return (1 if item.get_closest_marker("slow") else 2), 0

    items.sort(key=rank)  # stable: within a rank, the order of collection


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """xdist's scheduling by scope, with the scopes above, in the order of the collection. (Not `--dist
    loadgroup` with xdist_group marks: pytest 9.2 keeps the node id where xdist 3.8 cannot add the group.)"""
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerFiles(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _one_worker_file(nodeid) or nodeid

    config.option.loadscopereorder = False  # xdist would put the scopes with the most tests first
    return OneWorkerFiles(config, log)
