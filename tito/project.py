"""Where things are: the checkout, its stages, and the paths of each stage's files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tito.errors import TitoError

STAGE_DIR = re.compile(r"^(\d\d)_[a-z0-9_]+$")


@dataclass(frozen=True)
class Stage:
    root: Path
    number: str  # "01"
    name: str  # "01_tensor"

    @property
    def source(self) -> Path:
        return self.root / "solutions" / self.name / f"{self.name}.py"

    @property
    def notebook(self) -> Path:
        return self.root / "modules" / self.name / f"{self.name}.ipynb"

    @property
    def suite(self) -> Path:
        return self.root / "autograder" / f"test_{self.name}.py"

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root))


def _is_root(path: Path) -> bool:
    return (path / "solutions").is_dir() and (path / "autograder").is_dir()


def find_root(start: Path | None = None) -> Path:
    """The checkout that holds solutions/ and autograder/: the working directory or one above it, else
    the checkout tito itself was installed from."""
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if _is_root(candidate):
            return candidate
    installed = Path(__file__).resolve().parents[1]
    if _is_root(installed):
        return installed
    raise TitoError("tito must run inside a TinyTorch checkout (a folder with solutions/ and autograder/); "
                    "cd into your clone of the course first")


def stages(root: Path) -> list[Stage]:
    folder = root / "solutions"
    found = [Stage(root, m.group(1), p.name) for p in sorted(folder.iterdir())
             if p.is_dir() and (m := STAGE_DIR.match(p.name)) and (p / f"{p.name}.py").is_file()]
    return found


def stage(root: Path, wanted: str) -> Stage:
    """Look up a stage by number ("1", "01") or folder name ("01_tensor")."""
    known = stages(root)
    key = wanted.strip()
    if key.isdigit():
        key = f"{int(key):02d}"
    for candidate in known:
        if key in (candidate.number, candidate.name):
            return candidate
    choices = ", ".join(s.number for s in known) or "none yet"
    raise TitoError(f"unknown stage {wanted!r}: choose one of {choices}")


def stages_up_to(root: Path, last: Stage) -> list[Stage]:
    return [s for s in stages(root) if s.number <= last.number]
