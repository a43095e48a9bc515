"""The mistakes students made that once passed a hidden suite at full marks: each, written into the reference,
must cost points of the task it is in, with words that send the student to it.

Each row is a reviewed mistake (a student's walk through 08-13, the code review's), not a sampled mutant: the
text of the reference it replaces, what a student wrote instead, the task that must lose points and the words
its message must hold. They are graded through `tito mutants`' machinery (the stage's own suite on the
reference of the stages before it), one stage's mistakes side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tito import mutants
from tito.project import stage as find_stage
from tito.source import read_source, solution_regions

pytestmark = pytest.mark.slow  # each stage's suite runs on the reference and on every mistake: minutes


@dataclass(frozen=True)
class Mistake:
    stage: str
    task: str  # the task whose region the mistake is in
    what: str  # the mistake, as a student would describe it
    old: str  # text of the reference solution, unique in the stage's exported cells
    new: str  # what the student wrote instead
    words: tuple[str, ...] = ()  # each in the message of some failed check of the task that loses points
    loses: str = ""  # the task that must lose points, when not the mistake's own

    @property
    def costs(self) -> str:
        return self.loses or self.task


MISTAKES = [
    Mistake("04", "04.10", "a Dropout of p = 0 still draws its mask",
            "if not self.training or self.p == 0:", "if not self.training:", ("draw",)),
    Mistake("08", "08.5", "BatchSampler's length through floats (large counts round)",
            "return -(-len(self.sampler) // self.batch_size)",
            "return int(np.ceil(len(self.sampler) / self.batch_size))"),
    Mistake("08", "08.8", "Normalize works in place on the images it is given",
            "return _returned((batch - mean) / std, x)",
            "batch -= mean\n        batch /= std\n        return _returned(batch, x)", ("not batch -= mean",)),
    Mistake("09", "09.1", "_pair lets a bool through as a size",
            "and not isinstance(v, (bool, np.bool_))", "", ("True",)),
    Mistake("09", "09.4", "the convolution's forward is the loop over output pixels",
            "out = np.matmul(weight.reshape(out_channels, -1), cols)        # (N, O, OH*OW), a new array\n"
            "        if bias is not None:\n            out += bias[:, None]\n",
            "out = _conv2d_loops(x, weight, bias, stride, padding, dilation).reshape(x.shape[0], out_channels, -1)\n",
            ("im2col",), loses="09.7"),  # the speed is judged where the whole conv2d runs, forward and backward
    Mistake("11", "11.3", "Embedding's lookup is weight[indices] (a view of the weight for one index)",
            "return np.take(weight, indices, axis=0)", "return weight[indices]", ("view",)),
    Mistake("11", "11.8", "sinusoidal positions computed in float32",
            "position = np.arange(length, dtype=np.float64)[:, None]                       # (length, 1)\n"
            "    frequency = 10000.0 ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)",
            "position = np.arange(length, dtype=np.float32)[:, None]\n"
            "    frequency = np.float32(1e4) ** (-np.arange(0, embedding_dim, 2, dtype=np.float32) / embedding_dim)"),
    Mistake("13", "13.6", "the block does not hand the cache to its attention",
            "x = x + self.attn(self.ln_1(x), cache)", "x = x + self.attn(self.ln_1(x))"),
    Mistake("13", "13.8", "greedy sampling (temperature 0) still draws from the generator",
            "if temperature == 0:\n        return logits.argmax(axis=-1)",
            "if temperature == 0:\n        generator.random((len(logits), 1))\n        return logits.argmax(axis=-1)",
            ("draw",)),
]


def as_mutation(notebook, mistake: Mistake) -> mutants.Mutation:
    """The mistake as a one-place edit of the cell that holds its text, inside a region of its task."""
    found = [(index, cell.source) for index, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and mistake.old in cell.source]
    assert len(found) == 1 and found[0][1].count(mistake.old) == 1, f"{mistake.what}: its text is not unique"
    index, source = found[0]
    start = source.index(mistake.old)
    line = source.count("\n", 0, start) + 1
    last = line + mistake.old.count("\n")
    tasks = {task for low, high, task in solution_regions(source) if low <= line and last <= high}
    assert tasks == {mistake.task}, f"{mistake.what}: the text is in {tasks or 'no region'}, not {mistake.task}"
    edit = mutants.Edit(start, start + len(mistake.old), mistake.new, mistake.what)
    return mutants.Mutation(mistake.task, index, line, edit, mistake.old, mistake.new)


@pytest.mark.parametrize("number", sorted({m.stage for m in MISTAKES}))
def test_each_known_mistake_costs_its_task_with_words_that_point_to_it(shared_course, number):
    stage = find_stage(shared_course, number)
    notebook = read_source(stage)
    mistakes = [m for m in MISTAKES if m.stage == number]
    results = mutants.run_mutants(shared_course, stage, [as_mutation(notebook, m) for m in mistakes], workers=2)
    missed = []
    for mistake, result in zip(mistakes, results):
        lost = [check for check in result.failures if check.task == mistake.costs and check.points < check.max_points]
        words = " ".join(check.message for check in lost)
        if not lost:
            missed.append(f"{mistake.what}: no check of {mistake.costs} lost points (failed: {result.caught_by})")
        elif not all(word in words for word in mistake.words):
            missed.append(f"{mistake.what}: the words of {mistake.costs} lack {mistake.words}: {words[:400]}")
    assert missed == []
