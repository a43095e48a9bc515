"""The pictures: a milestone's curves show every batch of a short run, and module 13 draws in cells that the
package and the grader never see."""

from __future__ import annotations

import sys

import jupytext
import numpy as np

from tito.source import directives

from conftest import REPO

sys.path.insert(0, str(REPO / "milestones"))
from plotting import running_mean, save_classifier_curves  # noqa: E402


def test_the_running_mean_is_centred_and_averages_fewer_values_at_the_ends():
    assert running_mean([1, 2, 3, 4, 5, 6], 3).tolist() == [1.5, 2.0, 3.0, 4.0, 5.0, 5.5]
    assert running_mean([5.0], 1).tolist() == [5.0]
    assert np.allclose(running_mean(np.arange(10.0), 50), 4.5), "a window wider than the run: the mean of all"


def test_the_curves_of_a_one_epoch_run_are_saved(tmp_path):
    path = tmp_path / "curves.png"
    losses = list(np.linspace(2.3, 0.3, 79))                          # one epoch of the MLP milestone
    save_classifier_curves(path, losses, 79, [0.1, 0.88], "one epoch")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_module_13_draws_only_in_learner_only_cells_that_are_not_exported():
    notebook = jupytext.read(REPO / "solutions" / "13_transformer" / "13_transformer.py", fmt="py:percent")
    drawing = [cell for cell in notebook.cells if cell.cell_type == "code" and "plt." in cell.source]
    assert len(drawing) >= 3, "the block, the loss curve and the attention map"
    for cell in drawing:
        assert "learner-only" in cell.metadata.get("tags", []), cell.source[:80]
        assert "export" not in directives(cell.source), cell.source[:80]
