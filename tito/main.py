"""The `tito` command line: `main(argv) -> exit status`. Each subcommand is a typed function in its own
module of tito/commands, imported only here and only when it runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tito.errors import TitoError


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="tito", description="Build, export and grade the TinyTorch course.")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = commands.add_parser("build", help="generate the student notebooks in modules/ from solutions/")
    build.add_argument("stages", nargs="*", metavar="STAGE", help="stages to build (default: all)")
    build.add_argument("--check", action="store_true", help="write nothing; exit 1 if any notebook is stale")
    build.add_argument("--force", action="store_true", help="overwrite notebooks that hold a student's changes")

    export = commands.add_parser("export", help="export notebooks 01..NN into the tinytorch package")
    export.add_argument("stage", nargs="?", metavar="NN", help="last stage to export, e.g. 02")
    export.add_argument("--reference", action="store_true",
                        help="export solutions/ into build/reference/ (all stages unless NN is given)")

    test = commands.add_parser("test", help="export, then grade stage NN with its hidden suite")
    test.add_argument("stage", metavar="NN", help="the stage to grade, e.g. 01")
    test.add_argument("--reference", action="store_true", help="grade the reference solutions instead")
    test.add_argument("--json", action="store_true", help="print one JSON object with the results")
    test.add_argument("--timeout", type=_seconds, default=600.0, help="seconds before the run is stopped")
    test.add_argument("--seed", type=int,
                      help="draw the cases `tito grade --seed S` draws (default: the feedback cases)")

    commands.add_parser("status", help="one row per stage: notebook, tasks done, last score")

    from tito.milestones import MILESTONES
    milestone = commands.add_parser("milestone", help="train a milestone model on real data with your package")
    milestone.add_argument("name", metavar="NAME", choices=sorted(MILESTONES),
                           help=f"which milestone: {', '.join(sorted(MILESTONES))}")
    milestone.add_argument("--reference", action="store_true", help="run it on the reference solutions instead")
    milestone.add_argument("--epochs", type=_count,
                           help="epochs to train (default: the epochs its target is judged after)")
    milestone.add_argument("--seed", type=int, default=0, help="seed for initialisation and shuffling")
    milestone.add_argument("--dataset", choices=["mnist", "fashion"], help="cnn only: the data (default mnist)")
    milestone.add_argument("--steps", type=_count, help="gpt only: training steps (the target is judged after 1500)")

    mutants = commands.add_parser("mutants", help="measure a hidden suite: grade single-point bugs in the reference")
    mutants.add_argument("stage", metavar="NN", help="the stage whose suite to measure, e.g. 01")
    mutants.add_argument("--count", type=_count, default=80, help="mutants to sample and grade (default 80)")
    mutants.add_argument("-j", "--jobs", type=_count, default=2, help="mutants graded at once (default 2)")
    mutants.add_argument("--seed", type=int, default=0, help="which mutants are sampled (default 0)")

    course = commands.add_parser("course", help="an nbgrader course generated from solutions/")
    course_commands = course.add_subparsers(dest="course_command", required=True, metavar="ACTION")
    course_init = course_commands.add_parser("init", help="create or update the course in DIR")
    course_init.add_argument("directory", metavar="DIR")
    course_autograde = course_commands.add_parser(
        "autograde", help="autograde a module's submissions in parallel, through nbgrader's own autograde")
    course_autograde.add_argument("stage", metavar="NN", help="the module (assignment) to autograde, e.g. 01")
    course_autograde.add_argument("--course", metavar="DIR", default=".", help="the course folder (default: here)")
    course_autograde.add_argument("-j", "--jobs", type=_count, default=os.cpu_count() or 1,
                                  help="submissions autograded at once on this machine")
    course_autograde.add_argument("--scheduler", metavar="ADDRESS",
                                  help="autograde on a Dask cluster (tcp://HOST:PORT) instead of here")
    course_autograde.add_argument("--student", action="append", metavar="NAME", help="only this student (repeat)")
    course_autograde.add_argument("--force", action="store_true",
                                  help="autograde again the submissions already autograded and unchanged")

    grade = commands.add_parser("grade", help="official grades for a class, judged outside the students' code")
    grade.add_argument("submissions", metavar="SUBMISSIONS",
                       help="an nbgrader course (or its submitted/ folder), or a folder with one notebook, "
                            "zip or folder per student")
    grade.add_argument("--stage", action="append", metavar="NN", help="a stage to grade (repeat; default: all)")
    grade.add_argument("--isolated", action="store_true",
                       help="also grade each stage with the reference standing in for earlier stages (an nbgrader "
                            "course is always graded so, as its judge grades)")
    grade.add_argument("-j", "--jobs", type=_count, default=os.cpu_count() or 1, help="submissions graded at once")
    grade.add_argument("--out", metavar="DIR", help="where to write the reports (default: SUBMISSIONS-grades)")
    grade.add_argument("--timeout", type=_seconds, default=300.0, help="seconds one submission may run per stage")
    grade.add_argument("--memory-mb", type=_count, default=4096, help="address-space limit of one submission")
    grade.add_argument("--examples", type=_count, help="cases per check (default: each check's own)")
    grade.add_argument("--seed", type=int, help="course key for the drawn cases (default: the course's own, kept "
                                                "in the course or output folder; always recorded)")
    grade.add_argument("--student", action="append", metavar="NAME", help="grade only this student (repeat)")
    grade.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the boxes on a Dask cluster (tcp://HOST:PORT); this process still plans, judges "
                            "and records every grade (needs the cluster extra: pip install 'tinytorch[cluster]')")
    grade.add_argument("--milestone", choices=["gpt"],
                       help="rank the class: train each student's own GPT in the sandbox (leaderboard.csv)")
    grade.add_argument("--steps", type=_count, help="with --milestone gpt: training steps (default: the judged 1500)")
    grade.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="grade without bubblewrap: student code runs with your rights (never on real work)")
    return top


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "build":
        from tito.commands.build import build
        return build(args.stages, check=args.check, force=args.force)
    if args.command == "export":
        from tito.commands.export import export
        return export(args.stage, reference=args.reference)
    if args.command == "test":
        from tito.commands.test import test
        return test(args.stage, reference=args.reference, as_json=args.json, seed=args.seed, timeout=args.timeout)
    if args.command == "status":
        from tito.commands.status import status
        return status()
    if args.command == "milestone":
        from tito.commands.milestone import milestone
        return milestone(args.name, reference=args.reference, epochs=args.epochs, seed=args.seed,
                         dataset=args.dataset, steps=args.steps)
    if args.command == "mutants":
        from tito.commands.mutants import mutants
        return mutants(args.stage, count=args.count, jobs=args.jobs, seed=args.seed)
    if args.command == "course":
        if args.course_command == "autograde":
            from tito.commands.course import autograde
            return autograde(args.stage, course=Path(args.course), jobs=args.jobs, scheduler=args.scheduler,
                             students=args.student, force=args.force)
        from tito.commands.course import init
        return init(Path(args.directory))
    from tito.commands.grade import grade
    return grade(Path(args.submissions), stages=args.stage, isolated=args.isolated, jobs=args.jobs,
                 out=Path(args.out) if args.out else None, timeout=args.timeout, memory_mb=args.memory_mb,
                 examples=args.examples, seed=args.seed, students=args.student,
                 unsafe_no_sandbox=args.unsafe_no_sandbox, scheduler=args.scheduler, milestone=args.milestone,
                 steps=args.steps)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        return _dispatch(args)
    except TitoError as error:
        from tito import console

        console.error(str(error))
        return error.code
    except KeyboardInterrupt:  # at any moment, imports included: one line, no traceback
        print("tito: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
