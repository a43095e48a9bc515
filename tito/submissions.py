"""Find a class's submissions: nbgrader's submitted/<student>/<assignment>/ layout, or a folder with one
notebook, zip or folder per student. Notebooks are read as bytes, never executed or imported."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from tito.errors import TitoError

MAX_NOTEBOOK_BYTES = 50 << 20
STAGE_FILE = re.compile(r"^(\d\d_[a-z0-9_]+)\.ipynb$")


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", text).strip("._") or "student"


def _stage_of(data: bytes, filename: str) -> str | None:
    match = STAGE_FILE.match(Path(filename).name)
    if match:
        return match.group(1)
    try:
        return json.loads(data)["metadata"]["tinytorch"]["stage"]
    except (ValueError, KeyError, TypeError):
        return None


def _from_zip(path: Path) -> dict[str, bytes]:
    notebooks: dict[str, bytes] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.infolist():
                if member.is_dir() or not member.filename.endswith(".ipynb") or "__MACOSX" in member.filename:
                    continue
                if member.file_size > MAX_NOTEBOOK_BYTES:
                    continue
                data = archive.read(member)
                stage = _stage_of(data, member.filename)
                if stage and stage not in notebooks:
                    notebooks[stage] = data
    except (zipfile.BadZipFile, OSError):
        return {}
    return notebooks


def _from_folder(folder: Path) -> dict[str, bytes]:
    notebooks: dict[str, bytes] = {}
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts or path.is_symlink() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            continue
        data = path.read_bytes()
        stage = _stage_of(data, path.name)
        if stage and stage not in notebooks:
            notebooks[stage] = data
    return notebooks


def find(where: Path) -> dict[str, dict[str, bytes]]:
    """{student: {stage name: notebook bytes}}. A student whose files hold no notebook maps to {}."""
    if not where.is_dir():
        raise TitoError(f"{where} is not a folder: give the folder that holds the submissions "
                        f"(an nbgrader course, its submitted/ folder, or one notebook, zip or folder per student)")
    if (where / "submitted").is_dir():
        where = where / "submitted"
    students: dict[str, dict[str, bytes]] = {}
    for entry in sorted(where.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue  # a link could point at files the student must not hand in as their own
        name = _safe_name(entry.stem if entry.is_file() else entry.name)
        if entry.is_dir():
            students[name] = _from_folder(entry)
        elif entry.suffix == ".zip":
            students[name] = _from_zip(entry)
        elif entry.suffix == ".ipynb" and entry.stat().st_size <= MAX_NOTEBOOK_BYTES:
            data = entry.read_bytes()
            stage = _stage_of(data, entry.name)
            students[name] = {stage: data} if stage else {}
    if not students:
        raise TitoError(f"{where} holds no submissions (expected one notebook, zip or folder per student)")
    return students
