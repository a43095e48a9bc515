"""`tito milestone NAME [--reference]`: export, then train a milestone model on real data with the
learner's package (or the reference build), printing its progress; exit 0 when it reaches its target."""

from __future__ import annotations

import os
import subprocess
import sys

from tito import console
from tito.errors import TitoError
from tito.milestones import MILESTONES
from tito.package import export, export_student, package_root, report
from tito.project import find_root, stages


def milestone(name: str, *, reference: bool = False, epochs: int | None = None, seed: int = 0,
              dataset: str | None = None, steps: int | None = None) -> int:
    root = find_root()
    chosen = MILESTONES[name]
    extra: dict[str, str | int | None] = {"dataset": dataset, "steps": steps}
    for option, value in extra.items():
        if value is not None and option not in chosen.options:
            takes = ", ".join(f"--{known}" for known in ("epochs", "seed", *chosen.options))
            raise TitoError(f"the {name} milestone has no --{option} option (it takes {takes})")
    known = {stage.number: stage for stage in stages(root)}
    if chosen.stage not in known:
        raise TitoError(f"the {name} milestone needs stages up to {chosen.stage}, and this checkout "
                        f"has stages up to {max(known, default='none')}")
    script = root / chosen.script
    if not script.is_file():
        raise TitoError(f"{chosen.script} is missing: restore it with `git checkout -- {chosen.script}`")
    whose = "solutions/ (reference)" if reference else "your notebooks in modules/"
    console.info(f"exporting stages 01..{chosen.stage} from {whose}")
    exports = export(root, known[chosen.stage], reference=True) if reference else \
        export_student(root, known[chosen.stage])[0]
    report(exports, reference=reference)
    unfinished = [result for result in exports if result.stubs]
    if unfinished:
        counts = ", ".join(f"{r.stage.name} {len(r.stubs)} of {len(r.tasks)}" for r in unfinished)
        first = unfinished[0]
        raise TitoError(f"the {name} milestone runs on your stages 01..{chosen.stage}, and tasks are still "
                        f"stubs in {counts} (listed above). Start with {first.stage.name}: `tito test "
                        f"{first.stage.number}` shows what is missing. `tito milestone {name} --reference` "
                        f"runs it on the reference", code=1)
    if any(result.broken_cells for result in exports):
        raise TitoError("a cell with a syntax error was left out of the package (named above): fix it first",
                        code=1)
    console.info(f"milestone {name}: {chosen.what}, on "
                 f"{'the reference' if reference else 'your package'}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(package_root(root, reference)), *filter(None, [os.environ.get("PYTHONPATH")])]))
    command = [sys.executable, str(script), "--seed", str(seed)]
    for option, given in [("epochs", epochs), *extra.items()]:
        if given is not None:
            command += [f"--{option}", str(given)]
    return subprocess.run(command, cwd=root, env=env).returncode
