"""Terminal output: one place that decides where messages go (stderr, so stdout stays for --json)."""

from __future__ import annotations

import sys

from rich.console import Console

err = Console(stderr=True, highlight=False, soft_wrap=True)
# a terminal wraps tables to its width; piped output keeps one test per line
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def info(message: str) -> None:
    err.print(message, markup=False)


def warn(message: str) -> None:
    err.print(f"warning: {message}", style="yellow", markup=False)


def error(message: str) -> None:
    err.print(f"error: {message}", style="bold red", markup=False)


def write_json(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
