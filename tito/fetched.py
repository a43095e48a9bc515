"""Your own `tinytorch` in a notebook fetched from the nbgrader course.

Each course notebook after 01 starts with

    from tito.fetched import use_my_modules
    use_my_modules()

which exports the modules before this one from your own notebooks in the folders beside this one
(`../01_tensor/01_tensor.ipynb`, `../02_autograd/02_autograd.ipynb`, ...: where nbgrader fetches them) into
a fresh folder and imports `tinytorch` from there. A stub you have not written yet raises
NotImplementedError when it runs, as in your own notebook. During autograde the same cell finds the same
student's submitted notebooks, never anyone else's code and never the reference.

It also points 08's `tt.datasets` at the course's copy of the shipped data: unless TINYTORCH_DATA is set
already, it sets it to the folder your ~/.jupyter/nbgrader_config.py (the course's
student_nbgrader_config.py) names as `c.TinyTorch.datasets`. Not during autograde: the cells that read the
data are skipped there.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tito import package
from tito.errors import TitoError
from tito.project import STAGE_DIR
from tito.source import parse_notebook

MAX_NOTEBOOK_BYTES = 16 << 20
DATA_VARIABLE = "TINYTORCH_DATA"  # where 08's loaders look first when no root= is given


def course_datasets() -> tuple[str | None, list[str]]:
    """The course's datasets folder as the student's nbgrader configuration names it (`c.TinyTorch.datasets`, in
    the folders nbgrader reads its configuration from, the student's own first), or None; and a note per
    configuration that could not be read."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    notes = []
    for folder in jupyter_config_path():
        try:
            config = PyFileConfigLoader("nbgrader_config.py", path=folder).load_config()
        except ConfigFileNotFound:
            continue
        except Exception as error:  # the student's own Python file: a typo must not stop this cell
            notes.append(f"{Path(folder) / 'nbgrader_config.py'} could not be read ({type(error).__name__}: "
                         f"{error}), so the course's datasets are not set from it")
            continue
        if "TinyTorch" in config and "datasets" in config["TinyTorch"]:
            return str(config["TinyTorch"]["datasets"]), notes
    return None, notes


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
    if not os.environ.get("NBGRADER_EXECUTION") and not os.environ.get(DATA_VARIABLE):
        datasets, unread = course_datasets()
        notes += unread
        if datasets is not None:
            os.environ[DATA_VARIABLE] = datasets
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
