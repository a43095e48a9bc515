"""Your own `tinytorch` in a notebook fetched from the nbgrader course.

Each course notebook after 01 starts with

    from tito.fetched import use_my_modules
    use_my_modules()

which exports the modules before this one from your own notebooks in the folders beside this one
(`../01_tensor/01_tensor.ipynb`, `../02_autograd/02_autograd.ipynb`, ...: where nbgrader fetches them) into
a fresh folder and imports `tinytorch` from there. A stub you have not written yet raises
NotImplementedError when it runs, as in your own notebook. During autograde the same cell finds the same
student's submitted notebooks, never anyone else's code and never the reference.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from tito import package
from tito.errors import TitoError
from tito.project import STAGE_DIR
from tito.source import parse_notebook

MAX_NOTEBOOK_BYTES = 16 << 20


def use_my_modules(here: Path | str | None = None, *, quiet: bool = False) -> list[str]:
    """Make `import tinytorch` give the modules before this folder's, from the notebooks beside it;
    returns the notebooks used. Run it again after you change an earlier notebook."""
    folder = Path(here or Path.cwd()).resolve()
    if not STAGE_DIR.match(folder.name):
        raise TitoError(f"{folder} is not an assignment folder like 05_losses: open the notebook from the folder "
                        "nbgrader fetched it into")
    files: dict[str, str] = {}
    used, notes = [], []
    for earlier in sorted(p for p in folder.parent.iterdir() if STAGE_DIR.match(p.name) and p.name < folder.name):
        notebook = earlier / f"{earlier.name}.ipynb"
        shown = f"{earlier.name}/{notebook.name}"
        if not notebook.is_file() or notebook.stat().st_size > MAX_NOTEBOOK_BYTES:
            notes.append(f"{shown} is missing: fetch that assignment beside this one")
            continue
        try:
            path, code, broken = package.notebook_module(parse_notebook(notebook.read_text(encoding="utf-8")), shown)
        except (ValueError, TitoError, UnicodeDecodeError) as error:
            notes.append(f"{shown} was left out: {error}")
            continue
        files[path] = code
        notes += broken
        used.append(shown)
    destination = Path(tempfile.mkdtemp(prefix="my-tinytorch-"))
    package.write_package(destination, files)
    for name in [name for name in sys.modules if name == "tinytorch" or name.startswith("tinytorch.")]:
        del sys.modules[name]
    sys.path[:] = [entry for entry in sys.path if not Path(entry).name.startswith("my-tinytorch-")]
    sys.path.insert(0, str(destination))
    if not quiet:
        print(f"tinytorch from your notebooks: {', '.join(used) or 'none found'}")
        for note in notes:
            print(f"  {note}")
    return used
