"""Mutation testing of the hidden suites (tito.mutants, `tito mutants`): mutants touch only solution
regions, one point each; obvious bugs are killed; the command's usage errors are one sentence."""

from __future__ import annotations

import ast
import difflib
import time

import pytest

from tito import mutants
from tito.project import stage as find_stage
from tito.source import directives, read_source, solution_regions

from conftest import stage_numbers, tito

CELL = '''#| export
def f(a, b):
    c = a + b  # outside: never mutated
    ### BEGIN SOLUTION 09.1 f
    if a < 0 and not b:
        return -a * 2.5
    total = 0
    total += a[0]
    ### END SOLUTION
    return c - 1
'''


def _changed_lines(before: str, after: str) -> list[tuple[int, int]]:
    """The (first, last) 1-based lines of `before` in each hunk that differs."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    return [(i1 + 1, max(i1 + 1, i2)) for tag, i1, i2, _, _ in matcher.get_opcodes() if tag != "equal"]


def _assert_one_point_inside(mutation: mutants.Mutation, source: str) -> None:
    mutated = mutation.apply(source)
    assert ast.dump(ast.parse(mutated)) != ast.dump(ast.parse(source)), mutation
    hunks = _changed_lines(source, mutated)
    assert len(hunks) == 1, mutation
    (first, last), = hunks
    assert any(low <= first and last <= high and task == mutation.task
               for low, high, task in solution_regions(source)), mutation


def test_mutations_of_a_cell_stay_inside_its_solution_region():
    found = mutants.cell_mutations(CELL)
    kinds = {m.edit.kind for m in found}
    assert {"< -> <=", "and -> or", "not removed", "- removed", "* -> /", "0 -> 1", "[0] -> [-1]",
            "+= -> -=", "statement deleted", "returns None"} <= kinds
    assert {m.after for m in found} >= {f"return -a * {2.5 * 1.01!r}", "return -a * 0.0", "return None"}
    for mutation in found:
        assert 5 <= mutation.line <= 8 and mutation.task == "09.1"
        _assert_one_point_inside(mutation, CELL)


def test_an_unknown_reshape_size_is_not_mutated_to_another_negative():
    """numpy takes any negative size of a reshape as the unknown one: -1 -> -2 there is the same program."""
    cell = ("#| export\ndef g(x, n):\n    ### BEGIN SOLUTION 09.2 g\n"
            "    y = x.reshape(n, -1).view(-1)\n    return y[-1] - 1\n    ### END SOLUTION\n")
    after = {m.after for m in mutants.cell_mutations(cell)}
    assert not {"y = x.reshape(n, -2).view(-1)", "y = x.reshape(n, -1).view(-2)"} & after
    assert {"return y[0] - 1", "return y[-2] - 1"} <= after  # other negative constants still are


@pytest.mark.parametrize("number", stage_numbers())
def test_every_stage_mutation_is_one_point_inside_a_region(shared_course, number):
    stage = find_stage(shared_course, number)
    notebook = read_source(stage)
    found, _ = mutants.stage_mutations(stage, notebook)
    assert len(found) >= 50
    lines = stage.source.read_text(encoding="utf-8").splitlines()
    for mutation in found:
        cell = notebook.cells[mutation.cell]
        assert cell.cell_type == "code" and "export" in directives(cell.source)
        _assert_one_point_inside(mutation, cell.source)
        assert mutation.before.split()[0] in lines[mutation.line - 1]  # the location is the file's line
    chosen = mutants.sample(found, 30, seed=0)
    assert chosen == mutants.sample(found, 30, seed=0)
    assert {m.task for m in chosen} == {m.task for m in found}  # every task gets its share


def _pick(found: list[mutants.Mutation], text: str, kind: str) -> mutants.Mutation:
    return next(m for m in found if text in m.before and m.edit.kind == kind)


@pytest.mark.slow  # six mutants graded by the hidden suite in worker processes: left out by make test-fast
def test_obvious_bugs_in_stage_01_are_killed(shared_course):
    stage = find_stage(shared_course, "01")
    found, _ = mutants.stage_mutations(stage)
    chosen = [_pick(found, 'binary_elementwise("add"', "returns None"),
              _pick(found, "np.negative(a)", "returns None"),
              _pick(found, "if size_a == size_b or size_b == 1", "or -> and"),
              _pick(found, "if inner_a != inner_b", "!= -> =="),
              _pick(found, "count *= shape[ax]", "*= -> /="),
              _pick(found, "return np.sum(a, axis=axis", "axis changed")]
    started = time.monotonic()
    results = mutants.run_mutants(shared_course, stage, chosen, workers=2)
    assert time.monotonic() - started < 120
    assert [r.mutation for r in results] == chosen
    survivors = [r.mutation.diff for r in results if not r.killed or not r.caught_by]
    assert survivors == []


@pytest.mark.slow  # `tito` as a real subprocess: left out by make test-fast
def test_command_prints_the_kill_rate(shared_course):
    run = tito(shared_course, "mutants", "01", "--count", "2")
    assert run.code == 0, run.stderr
    assert "Stage 01: killed 2 of 2 mutants (100%)" in run.stdout


@pytest.mark.slow  # `tito` as a real subprocess: left out by make test-fast
def test_command_rejects_an_unknown_stage_in_one_sentence(shared_course):
    run = tito(shared_course, "mutants", "99")
    assert run.code == 2
    assert run.stderr.strip().splitlines() == ["error: unknown stage '99': choose one of "
                                               + ", ".join(stage_numbers())]
