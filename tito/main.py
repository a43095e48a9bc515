"""The `tito` command line: `main(argv) -> exit status`, one subcommand per module in tito/commands."""

from __future__ import annotations

import argparse
import os
import sys

from tito import console
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

    commands.add_parser("status", help="one row per stage: notebook, tasks done, last score")

    from tito.commands.milestone import MILESTONES
    milestone = commands.add_parser("milestone", help="train a milestone model on real data with your package")
    milestone.add_argument("name", metavar="NAME", choices=sorted(MILESTONES),
                           help=f"which milestone: {', '.join(sorted(MILESTONES))}")
    milestone.add_argument("--reference", action="store_true", help="run it on the reference solutions instead")
    milestone.add_argument("--epochs", type=_count, default=10, help="epochs to train (the target is judged after 10)")
    milestone.add_argument("--seed", type=int, default=0, help="seed for initialisation and shuffling")

    course = commands.add_parser("course", help="an nbgrader course generated from solutions/")
    course_commands = course.add_subparsers(dest="course_command", required=True, metavar="ACTION")
    course_init = course_commands.add_parser("init", help="create or update the course in DIR")
    course_init.add_argument("directory", metavar="DIR")

    grade = commands.add_parser("grade", help="official grades for a class, judged outside the students' code")
    grade.add_argument("submissions", metavar="SUBMISSIONS",
                       help="an nbgrader course (or its submitted/ folder), or a folder with one notebook, "
                            "zip or folder per student")
    grade.add_argument("--stage", action="append", metavar="NN", help="a stage to grade (repeat; default: all)")
    grade.add_argument("--isolated", action="store_true",
                       help="also grade each stage with the reference standing in for earlier stages")
    grade.add_argument("-j", "--jobs", type=_count, default=os.cpu_count() or 1, help="submissions graded at once")
    grade.add_argument("--out", metavar="DIR", help="where to write the reports (default: SUBMISSIONS-grades)")
    grade.add_argument("--timeout", type=_seconds, default=300.0, help="seconds one submission may run per stage")
    grade.add_argument("--memory-mb", type=_count, default=4096, help="address-space limit of one submission")
    grade.add_argument("--examples", type=_count, help="cases per check (default: each check's own)")
    grade.add_argument("--seed", type=int, help="seed for the drawn cases (default: random, and reported)")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from tito.commands import build, course, export, grade, milestone, status, test

    command = {"build": build, "export": export, "test": test, "status": status, "grade": grade,
               "course": course, "milestone": milestone}[args.command]
    try:
        return command.run(args)
    except TitoError as error:
        console.error(str(error))
        return error.code
    except KeyboardInterrupt:
        console.error("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
