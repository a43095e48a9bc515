"""`tito export NN [--reference]`: write the package of stages 01..NN and say what is still a stub."""

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
    exports = package.export(root, last, reference=reference)
    package.report(exports, reference=reference)
    where = package.package_root(root, reference) / "tinytorch"
    console.info(f"package written to {where.relative_to(root)}/")
    return 1 if any(r.broken_cells for r in exports) else 0
