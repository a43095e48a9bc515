"""`tito export NN [--reference]`: write the package of stages 01..NN and say what is still a stub.

src/ keeps every later stage exported there before (re-exported from its notebook): exporting an earlier
stage never takes a module in progress away.
"""

from __future__ import annotations

from tito import console, package
from tito.errors import TitoError
from tito.project import find_root, stages
from tito.project import stage as find_stage


def export(stage: str | None, *, reference: bool = False) -> int:
    root = find_root()
    if stage is None and not reference:
        raise TitoError("say which stage to export, e.g. `tito export 01` (or `tito export --reference`)")
    last = find_stage(root, stage) if stage is not None else stages(root)[-1]
    exports, kept = (package.export(root, last, reference=True), []) if reference else \
        package.export_student(root, last)
    package.report(exports, reference=reference)
    where = package.package_root(root, reference) / "tinytorch"
    if kept:
        console.info(f"kept the later stages exported before ({', '.join(s.name for s in kept)}), re-exported "
                     f"from their notebooks: `tito export` never removes a stage")
    console.info(f"package written to {where.relative_to(root)}/")
    return 1 if any(r.broken_cells for r in exports) else 0
