"""How long a student waits for `tito test NN`, per stage, in one run on this machine.

    .venv/bin/python benchmarks/student_loop.py [--stages 01,10] [--rounds 3]

In a copy of the course (the repository's tracked files), for each stage: the first run on the untouched
notebook (it draws the stage's cases), then the median of `--rounds` runs untouched and of `--rounds` runs with
the notebooks of 01..NN complete (the reference solutions filled in), each a whole `tito test NN` process as the
student starts it. The goal is 1 s untouched and 2 s complete on an idle machine; on a shared, busy machine quote
the range of two runs. Where the time goes: `--profile NN` prints the slowest calls of one complete run.
"""

from __future__ import annotations

import argparse
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from student import fill  # noqa: E402

TITO = Path(sys.executable).parent / "tito"


def copy_course(into: Path) -> Path:
    """The tracked files of the repository (no .tito/, no build/, no virtual environment)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def run(course: Path, stage: str) -> float:
    started = time.monotonic()
    done = subprocess.run([str(TITO), "test", stage], cwd=course, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"tito test {stage} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def complete(course: Path, stage: str) -> None:
    for module in sorted((course / "modules").iterdir()):
        if module.name[:2] <= stage:
            fill(module / f"{module.name}.ipynb", course / "solutions" / module.name / f"{module.name}.py")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", default="", help="comma-separated stages (default: every stage)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default="", help="profile one complete run of this stage instead")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tito-loop-") as scratch:
        course = copy_course(Path(scratch))
        names = sorted(p.name[:2] for p in (course / "modules").iterdir() if p.name[:2].isdigit())
        if args.profile:
            complete(course, args.profile)
            run(course, args.profile)  # the cases drawn, the package exported
            subprocess.run([sys.executable, "-m", "cProfile", "-o", str(course / "profile.out"), "-m", "tito", "test",
                            args.profile], cwd=course, capture_output=True)
            pstats.Stats(str(course / "profile.out")).sort_stats("cumtime").print_stats(25)
            return 0
        chosen = [s for s in names if not args.stages or s in args.stages.split(",")]
        rows = []
        for stage in chosen:  # untouched first: completing a stage fills the notebooks before it too
            first = run(course, stage)
            rows.append([stage, first, statistics.median(run(course, stage) for _ in range(args.rounds))])
        complete(course, chosen[-1])
        for row in rows:
            row.append(statistics.median(run(course, row[0]) for _ in range(args.rounds)))
        print(f"tito test NN, seconds (median of {args.rounds}; the first run draws the cases)")
        print(f"{'stage':>5}  {'first':>6}  {'untouched':>9}  {'complete':>8}")
        for stage, first, untouched, done in rows:
            print(f"{stage:>5}  {first:6.2f}  {untouched:9.2f}  {done:8.2f}")
        print(f"median over stages: untouched {statistics.median(r[2] for r in rows):.2f} s, "
              f"complete {statistics.median(r[3] for r in rows):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
