"""Throughput of official grading: a class graded with -j 1, -j 2 and on a local Dask cluster of 1 and 2
workers, in one run, on this machine.

    .venv/bin/python benchmarks/grading.py [--students 40] [--stage 01]

For each set-up: submissions per minute, the median job (built, run, judged, recorded, from results.json), and
the coordinator's overhead per job: the time this process spends on a job outside its box (building the
package, judging, recording) as a share of the job's time. Then one full submission graded on every stage,
for the cost of a job per stage, and from it the estimate for a course of 1,000 students x 13 modules on 50
workers. Timings on a shared machine vary: run it twice and quote the range.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from dask_cluster import LocalCluster  # noqa: E402

from student import fill  # noqa: E402

TITO = [sys.executable, "-m", "tito"]
COORDINATOR = ("built", "judged", "recorded")


def make_class(folder: Path, stage: str, students: int) -> None:
    """Seven in ten full, two half done, one untouched: as a class hands in."""
    module = next(p for p in sorted((REPO / "modules").iterdir()) if p.name.startswith(stage))
    source = REPO / "solutions" / module.name / f"{module.name}.py"
    for number in range(students):
        path = folder / f"student{number:03d}" / f"{module.name}.ipynb"
        path.parent.mkdir(parents=True)
        shutil.copy2(module / f"{module.name}.ipynb", path)
        kind = number % 10
        if kind < 7:
            fill(path, source)
        elif kind < 9:
            lines = source.read_text().splitlines()
            tasks = sorted({line.split()[3] for line in lines if "### BEGIN SOLUTION" in line})
            fill(path, source, set(tasks[: len(tasks) // 2]))


def grade(folder: Path, out: Path, stage: str, *extra: str) -> tuple[float, list[dict]]:
    started = time.monotonic()
    done = subprocess.run([*TITO, "grade", str(folder), "--out", str(out), "--stage", stage, "--seed", "1", *extra],
                          cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"tito grade {' '.join(extra)} failed:\n{done.stderr[-3000:]}")
    return seconds, json.loads((out / "results.json").read_text())["grades"]


def describe(name: str, seconds: float, grades: list[dict]) -> dict:
    jobs = [g["phases"] for g in grades if g.get("phases")]
    total = [sum(v for k, v in p.items() if k != "queued") for p in jobs]
    coordinator = [sum(p.get(k, 0.0) for k in COORDINATOR) for p in jobs]
    row = {"set-up": name, "wall s": seconds, "per minute": 60 * len(grades) / seconds,
           "median job s": statistics.median(total), "median box s": statistics.median(p["run"] for p in jobs),
           "coordinator s/job": statistics.median(coordinator),
           "overhead": sum(coordinator) / sum(total)}
    print(f"{name:<22} {seconds:7.1f} s  {row['per minute']:6.1f} submissions/min  job {row['median job s']:.2f} s "
          f"(box {row['median box s']:.2f} s)  coordinator {row['coordinator s/job']:.3f} s/job "
          f"= {100 * row['overhead']:.1f}% of a job", flush=True)
    return row


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--students", type=int, default=40)
    options.add_argument("--stage", default="01")
    options.add_argument("--skip-stages", action="store_true", help="leave out the per-stage cost and the estimate")
    options.add_argument("--only-stages", action="store_true", help="only the per-stage cost and the estimate")
    args = options.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tito-bench-grading-"))
    try:
        folder = base / "class"
        make_class(folder, args.stage, args.students)
        print(f"a class of {args.students} submissions of stage {args.stage} (7/10 full, 2/10 half, 1/10 untouched)")
        rows = []
        for jobs in (() if args.only_stages else (1, 2)):
            rows.append(describe(f"-j {jobs}", *grade(folder, base / f"j{jobs}", args.stage, "-j", str(jobs))))
        for workers in (() if args.only_stages else (1, 2)):
            with LocalCluster(workers, logs=base / f"dask{workers}") as cluster:
                rows.append(describe(f"cluster of {workers} worker{'s' * (workers > 1)}",
                                     *grade(folder, base / f"w{workers}", args.stage, "--scheduler", cluster.address)))
        (base / "rows.json").write_text(json.dumps(rows, indent=1))
        if args.skip_stages:
            return 0
        # three full submissions a stage, graded in turn: the first pays what a plan costs once (every case's
        # expected value), the other two what each further job costs; theirs is the mean taken
        one = base / "one"
        for module in sorted((REPO / "modules").iterdir()):
            if module.is_dir() and module.name[:2].isdigit():
                for copy in ("a", "b", "c"):
                    path = one / f"full_{copy}" / f"{module.name}.ipynb"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(module / f"{module.name}.ipynb", path)
                    fill(path, REPO / "solutions" / module.name / f"{module.name}.py")
        per_stage, coordinator = {}, {}
        for module in sorted((one / "full_a").iterdir()):
            number = module.name[:2]
            _, grades = grade(one, base / f"stage{number}", number, "-j", "1")
            later = [g["phases"] for g in grades if g["student"] != "full_a"]
            per_stage[number] = statistics.mean(sum(v for k, v in p.items() if k != "queued") for p in later)
            coordinator[number] = statistics.mean(sum(p.get(k, 0.0) for k in COORDINATOR) for p in later)
        print("a full submission, per stage: job s (coordinator's share): " + ", ".join(
            f"{n} {s:.1f} ({100 * coordinator[n] / s:.0f}%)" for n, s in per_stage.items()))
        jobs, mine = sum(per_stage.values()), sum(coordinator.values())
        print(f"a whole course's mix of stages: the coordinator's share is {100 * mine / jobs:.1f}% of the jobs' time")
        boxes = 1000 * (jobs - mine) / 50  # 50 one-thread workers run the boxes
        judging = 1000 * mine  # one coordinator process builds, judges and records every job
        print(f"a course of 1,000 students x 13 modules: {1000 * jobs / 3600:.1f} hours of jobs; on 50 one-thread "
              f"workers like these cores the boxes take {boxes / 3600:.1f} hours and the one coordinator "
              f"{judging / 3600:.1f} hours of its own work: about {max(boxes, judging) / 3600:.1f} hours")
        return 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
