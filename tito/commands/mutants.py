"""`tito mutants NN [--count N] [-j J] [--seed S]`: how strong is stage NN's hidden suite?

Grades up to N single-point mutants of the stage's reference (tito.mutants) and prints the survivors
and the kill rate. Exit status: 0 when at least 90% of the mutants are killed, 1 below, 2 for a usage
error. A survivor is a gap in the suite or an equivalent mutant: its diff says which.
"""

from __future__ import annotations

from tito import console
from tito import mutants as mutation
from tito.project import find_root
from tito.project import stage as find_stage

REQUIRED_RATE = 0.9


def mutants(stage: str, *, count: int = 80, jobs: int = 2, seed: int = 0) -> int:
    root = find_root()
    chosen = find_stage(root, stage)

    def progress(done: int, total: int, result: mutation.MutantResult) -> None:
        verdict = "killed" if result.killed else "SURVIVED"
        console.info(f"[{done}/{total}] {verdict:8} {result.mutation.task:6} line {result.mutation.line}: "
                     f"{result.mutation.edit.kind} ({result.seconds:.1f} s)")

    console.info(f"mutating the solution regions of {chosen.relative(chosen.source)} (sample seed {seed}, -j {jobs})")
    run = mutation.measure(root, chosen, count=count, seed=seed, workers=jobs, progress=progress)
    if run.skipped:
        console.info(f"{run.skipped} mutants that do not compile were left out")
    if run.survivors:
        _print_survivors(chosen.relative(chosen.source), run.survivors)
    total = len(run.results)
    console.out.print(f"Stage {run.stage}: killed {run.killed} of {total} mutants ({run.kill_rate:.0%}), "
                      f"sampled from {run.found} mutation points.", markup=False)
    return 0 if run.kill_rate >= REQUIRED_RATE else 1


def _print_survivors(origin: str, survivors: list[mutation.MutantResult]) -> None:
    from rich.table import Table

    table = Table(title="Surviving mutants: a gap in the suite, or equivalent to the reference",
                  title_justify="left")
    table.add_column("task", no_wrap=True)
    table.add_column("location", no_wrap=True)
    table.add_column("diff")
    for result in survivors:
        table.add_row(result.mutation.task, f"{origin}:{result.mutation.line}",
                      result.mutation.diff.replace("[", "\\["))
    console.out.print(table)
