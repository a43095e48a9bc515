"""`tito milestone mlp`: the reference trains the MNIST MLP to its target, with a progress bar and the
test accuracy of every epoch; unfinished work and wrong input get one clear sentence."""

from __future__ import annotations

import re

from conftest import tito


def test_the_reference_mlp_reaches_its_target_on_mnist(shared_course):
    run = tito(shared_course, "milestone", "mlp", "--reference", timeout=1800)
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    accuracies = [float(a) for a in re.findall(r"test accuracy (\d+\.\d+)%", run.stdout)]
    assert len(accuracies) == 10, run.stdout[-3000:]
    final = re.search(r"test accuracy after 10 epochs: (\d+\.\d+)%", run.stdout)
    assert final and float(final.group(1)) >= 93.5
    assert "milestone reached" in run.stdout
    assert "Linear(in_features=784, out_features=256, bias=True)" in run.stdout


def test_unfinished_stages_are_named_instead_of_training(shared_course):
    run = tito(shared_course, "milestone", "mlp")
    assert run.code == 1
    assert "still stubs" in run.stderr and "07." in run.stderr and "Traceback" not in run.stderr


def test_a_wrong_milestone_name_lists_the_known_ones(shared_course):
    run = tito(shared_course, "milestone", "gpt")
    assert run.code == 2 and "choose from 'mlp'" in run.stderr
