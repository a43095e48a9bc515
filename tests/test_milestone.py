"""`tito milestone mlp`: the reference trains the MNIST MLP to its target, with a progress bar and the
test accuracy of every epoch; unfinished work and wrong input get one clear sentence."""

from __future__ import annotations

import re

import pytest

from conftest import tito

pytestmark = pytest.mark.slow  # real subprocesses end to end: left out by make test-fast


def test_the_reference_mlp_reaches_its_target_on_mnist(shared_course):
    run = tito(shared_course, "milestone", "mlp", "--reference", timeout=1800)
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    accuracies = [float(a) for a in re.findall(r"test accuracy (\d+\.\d+)%", run.stdout)]
    assert len(accuracies) == 10, run.stdout[-3000:]
    final = re.search(r"test accuracy after 10 epochs: (\d+\.\d+)%", run.stdout)
    assert final and float(final.group(1)) >= 93.5
    assert "milestone reached" in run.stdout
    assert "Linear(in_features=784, out_features=256, bias=True)" in run.stdout
    # into a pipe the progress bar writes one final line per epoch, not every redraw
    assert run.stdout.count("epoch 1/10 [") == 1 and run.stdout.count("79/79") == 10


def test_a_shorter_run_is_reported_but_not_judged(shared_course):
    run = tito(shared_course, "milestone", "mlp", "--reference", "--epochs", "1")
    assert run.code == 1
    assert "not judged: the milestone is judged after 10 epochs, and this run had 1" in run.stdout
    assert "PyTorch" not in run.stdout


def test_unfinished_stages_are_named_instead_of_training(shared_course):
    run = tito(shared_course, "milestone", "mlp")
    assert run.code == 1
    assert "still stubs" in run.stderr and "07_training 8 of 8" in run.stderr and "Traceback" not in run.stderr
    assert "Start with 01_tensor: `tito test 01`" in run.stderr


def test_a_wrong_milestone_name_lists_the_known_ones(shared_course):
    run = tito(shared_course, "milestone", "rnn")
    assert run.code == 2 and "choose from 'cnn', 'gpt', 'mlp'" in run.stderr


def test_the_reference_cnn_reaches_its_target_on_mnist_and_saves_its_curves(shared_course):
    run = tito(shared_course, "milestone", "cnn", "--reference", timeout=1800)
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    accuracies = [float(a) for a in re.findall(r"test accuracy (\d+\.\d+)%,", run.stdout)]
    assert len(accuracies) == 5, run.stdout[-3000:]
    final = re.search(r"test accuracy after 5 epochs: (\d+\.\d+)%", run.stdout)
    assert final and float(final.group(1)) >= 96.0 and "milestone reached" in run.stdout
    assert "Conv2d(1, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))" in run.stdout
    assert run.stdout.count("epoch 1/5 [") == 1 and run.stdout.count("157/157") == 5
    log = shared_course / ".tito" / "milestones" / "cnn-mnist.log"
    assert log.read_text().splitlines()[-1] == run.stdout.strip().splitlines()[-1]
    assert (shared_course / ".tito" / "milestones" / "cnn-mnist.png").read_bytes().startswith(b"\x89PNG")


def test_an_option_a_milestone_does_not_take_is_one_sentence(shared_course):
    run = tito(shared_course, "milestone", "mlp", "--dataset", "fashion")
    assert run.code != 0 and "the mlp milestone has no --dataset option (it takes --epochs, --seed)" in run.stderr
    assert "Traceback" not in run.stderr
    run = tito(shared_course, "milestone", "cnn", "--dataset", "cifar")
    assert run.code == 2 and "invalid choice: 'cifar'" in run.stderr


def test_a_short_gpt_run_reports_its_losses_and_a_sample_but_is_not_judged(shared_course):
    run = tito(shared_course, "milestone", "gpt", "--reference", "--steps", "12", timeout=1800)
    assert run.code == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "vocabulary 84" in run.stdout and "step 12: training loss" in run.stdout
    assert "sample:\nROMEO:\n" in run.stdout
    assert "not judged: the milestone is judged after 1500 steps, and this run had 12" in run.stdout
    assert (shared_course / ".tito" / "milestones" / "gpt.png").read_bytes().startswith(b"\x89PNG")
    run = tito(shared_course, "milestone", "gpt", "--reference", "--dataset", "mnist")
    assert run.code != 0 and "the gpt milestone has no --dataset option (it takes --epochs, --seed, --steps)" in \
        run.stderr

