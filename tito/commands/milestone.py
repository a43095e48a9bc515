"""`tito milestone NAME [--reference]`: export, then train a milestone model on real data with the
learner's package (or the reference build), printing its progress; exit 0 when it reaches its target."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from tito import console
from tito.commands.export import export, package_root, report
from tito.errors import TitoError
from tito.project import find_root, stages


@dataclass(frozen=True)
class Milestone:
    script: str  # path inside the checkout
    stage: str  # the last stage it needs
    what: str


MILESTONES = {
    "mlp": Milestone("milestones/mlp.py", "07", "a 784-256-128-10 MLP trained with Adam on MNIST"),
}


def run(args) -> int:
    root = find_root()
    milestone = MILESTONES[args.name]
    known = {stage.number: stage for stage in stages(root)}
    if milestone.stage not in known:
        raise TitoError(f"the {args.name} milestone needs stages up to {milestone.stage}, and this checkout "
                        f"has stages up to {max(known, default='none')}")
    script = root / milestone.script
    if not script.is_file():
        raise TitoError(f"{milestone.script} is missing: restore it with `git checkout -- {milestone.script}`")
    whose = "solutions/ (reference)" if args.reference else "your notebooks in modules/"
    console.info(f"exporting stages 01..{milestone.stage} from {whose}")
    exports = export(root, known[milestone.stage], reference=args.reference)
    report(exports, reference=args.reference)
    unfinished = [result for result in exports if result.stubs]
    if unfinished:
        counts = ", ".join(f"{r.stage.name} {len(r.stubs)} of {len(r.tasks)}" for r in unfinished)
        first = unfinished[0]
        raise TitoError(f"the {args.name} milestone runs on your stages 01..{milestone.stage}, and tasks are still "
                        f"stubs in {counts} (listed above). Start with {first.stage.name}: `tito test "
                        f"{first.stage.number}` shows what is missing. `tito milestone {args.name} --reference` "
                        f"runs it on the reference", code=1)
    if any(result.broken_cells for result in exports):
        raise TitoError("a cell with a syntax error was left out of the package (named above): fix it first",
                        code=1)
    console.info(f"milestone {args.name}: {milestone.what}, on "
                 f"{'the reference' if args.reference else 'your package'}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(package_root(root, args.reference)), *filter(None, [os.environ.get("PYTHONPATH")])]))
    command = [sys.executable, str(script), "--epochs", str(args.epochs), "--seed", str(args.seed)]
    return subprocess.run(command, cwd=root, env=env).returncode
