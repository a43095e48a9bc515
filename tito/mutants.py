"""Mutation testing of a hidden suite: how many small, deliberate bugs in a stage's reference it catches.

A mutant changes one point inside one solution region of an `#| export` cell: an operator, a
comparison, a constant, a returned value, an axis, a deleted statement. Each mutant is exported with
the reference of the earlier stages and graded by the stage's suite; it is killed when it loses points.
A survivor is either a gap in the suite or an equivalent mutant, which a maintainer judges by its diff.
"""

from __future__ import annotations

import ast
import bisect
import io
import random
import tempfile
import threading
import time
import tokenize
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tito import engine, sandbox
from tito.errors import TitoError
from tito.package import stage_module, write_package
from tito.project import Stage, stages_up_to
from tito.source import Node, directives, read_source, solution_regions

SEED_KEY = "mutants"  # the course key of the cases every mutant is graded on
WALL_SECONDS = 120.0  # per mutant: a mutant that loops forever is stopped (and counts as killed)

SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**",
           ast.MatMult: "@", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
           ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
ARITHMETIC_SWAPS = {ast.Add: ["-"], ast.Sub: ["+"], ast.Mult: ["/"], ast.Div: ["*", "//"], ast.FloorDiv: ["/"],
                    ast.Pow: ["*"], ast.MatMult: ["*"]}
COMPARISON_SWAPS = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "==",
                    ast.Is: "is not", ast.IsNot: "is", ast.In: "not in", ast.NotIn: "in"}
AXIS_KEYWORDS = {"axis", "axes", "dim", "dims"}


@dataclass(frozen=True)
class Edit:
    """Replace characters start..end of a cell's source with `text`."""
    start: int
    end: int
    text: str
    kind: str  # what changes, e.g. "+ -> -"


@dataclass(frozen=True)
class Mutation:
    task: str  # "01.5"
    cell: int  # index of the cell in the stage's source notebook
    line: int  # line of the change in the source file, 1-based
    edit: Edit
    before: str  # the changed line(s) as they are, on one line
    after: str  # the same after the change

    def apply(self, source: str) -> str:
        return source[:self.edit.start] + self.edit.text + source[self.edit.end:]

    @property
    def diff(self) -> str:
        return f"{self.before}  ->  {self.after}"


# ---------------------------------------------------------------------------------------------------
# Finding mutation points


class _Cell:
    """One exported cell's source, with the character offsets of AST positions and of its tokens."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.tokens = [(token.string, self.offset(*token.start), self.offset(*token.end))
                       for token in tokenize.generate_tokens(io.StringIO(source).readline)
                       if token.type in (tokenize.OP, tokenize.NAME)]

    def offset(self, line: int, column: int) -> int:
        return self.starts[line - 1] + column

    def _ast_offset(self, line: int, byte_column: int) -> int:
        # AST columns count UTF-8 bytes: non-ASCII text earlier on the line (an ε in a string) must not shift them
        text = self.lines[line - 1]
        return self.offset(line, len(text.encode()[:byte_column].decode(errors="ignore")))

    def span(self, node: ast.expr | ast.stmt) -> tuple[int, int]:
        end_line, end_column = node.end_lineno, node.end_col_offset
        assert end_line is not None and end_column is not None  # always set by ast.parse
        return self._ast_offset(node.lineno, node.col_offset), self._ast_offset(end_line, end_column)

    def text(self, node: ast.expr) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def between(self, symbol: str, left: ast.expr, right: ast.expr) -> tuple[int, int] | None:
        """The span of operator `symbol` (one or two tokens, e.g. "is not") between two nodes."""
        low, high = self.span(left)[1], self.span(right)[0]
        words = symbol.split()
        for index, (string, start, _) in enumerate(self.tokens):
            if low <= start < high and string == words[0]:
                return start, self.tokens[index + len(words) - 1][2]
        return None

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def _nodes(tree: ast.AST) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """Every node with its parent, leaving out f-strings (3.11 gives their parts no reliable position)
    and annotations (never run)."""
    stack: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        if isinstance(node, ast.JoinedStr):
            continue
        yield node, parent
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    stack.append((child, node))


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def _binop(node: ast.BinOp, cell: _Cell) -> Iterator[Edit]:
    if type(node.op) not in ARITHMETIC_SWAPS or _is_text(node.left) or _is_text(node.right):
        return  # string building: a swap only tests that the line runs
    symbol = SYMBOLS[type(node.op)]
    where = cell.between(symbol, node.left, node.right)
    if where:
        for swapped in ARITHMETIC_SWAPS[type(node.op)]:
            yield Edit(*where, swapped, f"{symbol} -> {swapped}")
    operand = cell.text(node.right)
    if not isinstance(node.right, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)):
        operand = f"({operand})"  # -(a - b), not -a - b
    yield Edit(*cell.span(node.right), f"(-{operand})", "operand negated")


def _augassign(node: ast.AugAssign, cell: _Cell) -> Iterator[Edit]:
    if type(node.op) in ARITHMETIC_SWAPS:
        symbol = SYMBOLS[type(node.op)] + "="
        where = cell.between(symbol, node.target, node.value)
        if where:
            for swapped in ARITHMETIC_SWAPS[type(node.op)]:
                yield Edit(*where, swapped + "=", f"{symbol} -> {swapped}=")


def _compare(node: ast.Compare, cell: _Cell) -> Iterator[Edit]:
    for index, op in enumerate(node.ops):
        left = node.left if index == 0 else node.comparators[index - 1]
        where = cell.between(SYMBOLS[type(op)], left, node.comparators[index])
        if where:
            yield Edit(*where, COMPARISON_SWAPS[type(op)], f"{SYMBOLS[type(op)]} -> {COMPARISON_SWAPS[type(op)]}")


def _boolop(node: ast.BoolOp, cell: _Cell) -> Iterator[Edit]:
    word, other = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
    for left, right in zip(node.values, node.values[1:]):
        where = cell.between(word, left, right)
        if where:
            yield Edit(*where, other, f"{word} -> {other}")


def _unary(node: ast.UnaryOp, cell: _Cell) -> Iterator[Edit]:
    if isinstance(node.op, (ast.Not, ast.USub)):
        symbol = "not" if isinstance(node.op, ast.Not) else "-"
        start = end = cell.span(node)[0]
        end += len(symbol)
        while cell.source[end] in " \t":  # `not x` -> `x`; only the operator goes: `-(a + b)` -> `(a + b)`
            end += 1
        yield Edit(start, end, "", f"{symbol} removed")


def _constant(node: ast.Constant, parent: ast.AST | None, cell: _Cell) -> Iterator[Edit]:
    value = node.value
    if isinstance(value, bool):
        replacements = [repr(not value)]
    elif isinstance(value, int):
        negative = isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub)
        # -1 -> -2 rather than -0: "[-1] -> [0]" is the index mutation's
        replacements = [str(value + 1) if negative or value > 1 else str(1 - value)]
    elif isinstance(value, float):
        replacements = [repr(value * 1.01), "0.0"] if value else ["1.0"]
    else:
        return
    for text in replacements:
        yield Edit(*cell.span(node), text, f"{cell.text(node)} -> {text}")


def _keyword(node: ast.keyword, cell: _Cell) -> Iterator[Edit]:
    value = node.value
    if node.arg == "keepdims" and not isinstance(value, ast.Constant):  # a constant flips as a constant
        yield Edit(*cell.span(value), f"(not {cell.text(value)})", "keepdims negated")
    elif node.arg in AXIS_KEYWORDS:
        is_none = isinstance(value, ast.Constant) and value.value is None
        yield Edit(*cell.span(value), "0" if is_none else "None", f"{node.arg} changed")


def _return(node: ast.Return, cell: _Cell) -> Iterator[Edit]:
    if node.value is not None and not (isinstance(node.value, ast.Constant) and node.value.value is None):
        yield Edit(*cell.span(node.value), "None", "returns None")


def _subscript(node: ast.Subscript, cell: _Cell) -> Iterator[Edit]:
    index = node.slice
    if isinstance(index, ast.Constant) and type(index.value) is int and index.value == 0:
        yield Edit(*cell.span(index), "-1", "[0] -> [-1]")
    elif (isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub) and isinstance(index.operand, ast.Constant)
          and index.operand.value == 1):
        yield Edit(*cell.span(index), "0", "[-1] -> [0]")


def _deletable(node: ast.stmt) -> bool:
    """Simple statements whose whole effect is a side effect: calls, augmented and attribute/item stores."""
    if isinstance(node, ast.AugAssign):
        return True
    if isinstance(node, ast.Expr):
        return isinstance(node.value, (ast.Call, ast.Yield, ast.YieldFrom))
    return isinstance(node, ast.Assign) and any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in node.targets)


def _unknown_sizes(tree: ast.AST) -> set[int]:
    """The constants of the -1 sizes given to a reshape or view: numpy takes any negative size there as the
    unknown one, so -1 -> -2 is the same program (an equivalent mutant by construction, never sampled)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)) and \
                (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in ("reshape", "view"):
            sizes = [*node.args, *(keyword.value for keyword in node.keywords if keyword.arg in ("shape", "newshape"))]
            for size in [*sizes, *(item for each in sizes if isinstance(each, ast.Tuple) for item in each.elts)]:
                if isinstance(size, ast.UnaryOp) and isinstance(size.op, ast.USub) and \
                        isinstance(size.operand, ast.Constant) and size.operand.value == 1:
                    found.add(id(size.operand))
    return found


def _edits(tree: ast.AST, cell: _Cell) -> Iterator[Edit]:
    unknown_sizes = _unknown_sizes(tree)
    for node, parent in _nodes(tree):
        if isinstance(node, ast.BinOp):
            yield from _binop(node, cell)
        elif isinstance(node, ast.AugAssign):
            yield from _augassign(node, cell)
        elif isinstance(node, ast.Compare):
            yield from _compare(node, cell)
        elif isinstance(node, ast.BoolOp):
            yield from _boolop(node, cell)
        elif isinstance(node, ast.UnaryOp):
            yield from _unary(node, cell)
        elif isinstance(node, ast.Constant) and id(node) not in unknown_sizes:
            yield from _constant(node, parent, cell)
        elif isinstance(node, ast.keyword):
            yield from _keyword(node, cell)
        elif isinstance(node, ast.Return):
            yield from _return(node, cell)
        elif isinstance(node, ast.Subscript):
            yield from _subscript(node, cell)
        if isinstance(node, ast.stmt) and _deletable(node):
            yield Edit(*cell.span(node), "pass", "statement deleted")


def _first_lines(text: str, cells: list) -> dict[int, int]:
    """Cell index -> the file line of its first source line (a percent file keeps code cells verbatim)."""
    lines, found, position = text.splitlines(), {}, 0
    for index, cell in enumerate(cells):
        body = cell.source.splitlines()
        if cell.cell_type != "code" or not body:
            continue
        for candidate in range(position, len(lines) - len(body) + 1):
            if lines[candidate] == body[0] and lines[candidate:candidate + len(body)] == body:
                found[index], position = candidate + 1, candidate + len(body)
                break
    return found


def _one_line(text: str) -> str:
    return " ".join(text.split())


def cell_mutations(source: str, index: int = 0, first_line: int = 1) -> list[Mutation]:
    """The mutations of one cell that touch only lines inside its solution regions; `first_line` is
    where the cell starts in its file."""
    regions = solution_regions(source)
    if not regions:
        return []
    cell = _Cell(source)
    found: dict[str, Mutation] = {}  # mutated source -> mutation: two rules that write the same text are one
    for edit in _edits(ast.parse(source), cell):
        first, last = cell.line_of(edit.start), cell.line_of(max(edit.start, edit.end - 1))
        task = next((task for low, high, task in regions if low <= first and last <= high), None)
        if task is None:
            continue
        line_start, line_end = cell.starts[first - 1], cell.starts[last]
        before = source[line_start:line_end]
        after = source[line_start:edit.start] + edit.text + source[edit.end:line_end]
        mutation = Mutation(task, index, first_line + first - 1, edit, _one_line(before), _one_line(after))
        found.setdefault(mutation.apply(source), mutation)
    return list(found.values())


def stage_mutations(stage: Stage, notebook: Any = None) -> tuple[list[Mutation], int]:
    """Every mutation of the stage's exported solution regions that compiles, in file order, and the
    number left out because the mutated cell does not compile."""
    notebook = read_source(stage) if notebook is None else notebook
    first_lines = _first_lines(stage.source.read_text(encoding="utf-8"), notebook.cells)
    kept, broken = [], 0
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or "export" not in directives(cell.source):
            continue
        for mutation in cell_mutations(cell.source, index, first_lines.get(index, 1)):
            try:
                compile(mutation.apply(cell.source), "<mutant>", "exec")
                kept.append(mutation)
            except SyntaxError:
                broken += 1
    return kept, broken


def sample(mutations: list[Mutation], count: int, seed: int) -> list[Mutation]:
    """Up to `count` mutations, the same for the same seed, taken from the tasks in turn so that each
    task gets its share; returned in file order."""
    rng = random.Random(seed)
    by_task: dict[str, list[Mutation]] = {}
    for mutation in mutations:
        by_task.setdefault(mutation.task, []).append(mutation)
    for group in by_task.values():
        rng.shuffle(group)
    chosen: list[Mutation] = []
    while len(chosen) < count and any(by_task.values()):
        for group in by_task.values():
            if group and len(chosen) < count:
                chosen.append(group.pop())
    return sorted(chosen, key=lambda m: (m.line, m.edit.start, m.edit.text))


# ---------------------------------------------------------------------------------------------------
# Grading mutants


@dataclass
class MutantResult:
    mutation: Mutation
    killed: bool
    caught_by: list[str]  # the checks that failed
    seconds: float
    failures: list[engine.CheckResult] = field(default_factory=list)  # those checks' results, with their words


@dataclass
class MutationRun:
    stage: str
    found: int  # mutation points that compile
    skipped: int  # mutants left out because they do not compile
    results: list[MutantResult] = field(default_factory=list)

    @property
    def killed(self) -> int:
        return sum(result.killed for result in self.results)

    @property
    def kill_rate(self) -> float:
        return self.killed / len(self.results) if self.results else 1.0

    @property
    def survivors(self) -> list[MutantResult]:
        return [result for result in self.results if not result.killed]


# Exporting parses code, and CPython 3.11's ast.parse can fail when threads parse at once
# ("AST constructor recursion depth mismatch", python/cpython#106905): one mutant is built at a time.
_BUILDING = threading.Lock()


def _with_cell(notebook: Any, index: int, source: str) -> Node:
    """A copy of the notebook with one cell's source replaced; the other cells are shared."""
    cells = list(notebook.cells)
    cells[index] = Node(cell_type="code", source=source, metadata={})
    return Node(cells=cells, metadata={})


def _reference_files(root: Path, stage: Stage) -> dict[str, str]:
    """The package files of the reference of every stage before `stage`."""
    files = {}
    for earlier in stages_up_to(root, stage):
        if earlier.number < stage.number:
            _, path, code = stage_module(earlier, read_source(earlier), earlier.relative(earlier.source),
                                         reference=True)
            files[path] = code
    return files


def run_mutants(root: Path, stage: Stage, mutations: list[Mutation], *, workers: int = 2,
                wall_seconds: float = WALL_SECONDS,
                progress: Callable[[int, int, MutantResult], None] | None = None) -> list[MutantResult]:
    """Grade each mutant with the stage's suite, `workers` at a time; results in the order given.
    The unmutated reference is graded first: unless it gets full marks, no kill would mean anything."""
    notebook = read_source(stage)
    origin = stage.relative(stage.source)
    earlier = _reference_files(root, stage)
    plan = engine.make_plan(stage, seed=engine.stage_seed(SEED_KEY, stage), jobs=root / ".tito" / "jobs")
    limits = sandbox.Limits(wall_seconds=wall_seconds)

    def grade(variant: Any) -> engine.StageResult:
        with tempfile.TemporaryDirectory(prefix="tito-mutant-") as folder:
            with _BUILDING:
                _, path, code = stage_module(stage, variant, origin, reference=True)
                write_package(Path(folder), {**earlier, path: code})
            return engine.grade_stage(plan, Path(folder), isolation="process", limits=limits)

    def grade_mutant(mutation: Mutation) -> MutantResult:
        started = time.monotonic()
        source = notebook.cells[mutation.cell].source
        result = grade(_with_cell(notebook, mutation.cell, mutation.apply(source)))
        failed = [test for test in result.tests if not test.passed]
        return MutantResult(mutation, result.score < result.max_score, [test.id for test in failed],
                            time.monotonic() - started, failed)

    baseline = grade(notebook)  # also computes every expected value once, before the threads share the plan
    if baseline.score < baseline.max_score:
        failed = ", ".join(test.id for test in baseline.tests if not test.passed)
        raise TitoError(f"the reference of stage {stage.number} scores {baseline.score:g}/{baseline.max_score:g} "
                        f"on the mutation cases (failing: {failed}); fix it before measuring the suite")
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        futures = [pool.submit(grade_mutant, mutation) for mutation in mutations]
        for done, future in enumerate(as_completed(futures), start=1):
            if progress:
                progress(done, len(mutations), future.result())
        return [future.result() for future in futures]
    finally:
        pool.shutdown(cancel_futures=True)  # on an error or Ctrl-C, waits only for the mutants running


def measure(root: Path, stage: Stage, *, count: int = 80, seed: int = 0, workers: int = 2,
            wall_seconds: float = WALL_SECONDS,
            progress: Callable[[int, int, MutantResult], None] | None = None) -> MutationRun:
    """Sample up to `count` mutants of the stage and grade them: the suite's kill rate and its survivors."""
    mutations, skipped = stage_mutations(stage)
    chosen = sample(mutations, count, seed)
    results = run_mutants(root, stage, chosen, workers=workers, wall_seconds=wall_seconds, progress=progress)
    return MutationRun(stage.number, len(mutations), skipped, results)
