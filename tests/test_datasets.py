"""The shipped datasets load, with the documented shapes, only when their checksums match."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from tito import datasets
from tito.errors import TitoError


def test_mnist_has_the_documented_split_and_statistics():
    data = datasets.load("mnist")
    assert data["x_train"].shape == (10000, 28, 28) and data["x_train"].dtype == np.uint8
    assert data["x_test"].shape == (2000, 28, 28) and data["y_test"].shape == (2000,)
    assert abs(data["x_train"].mean() / 255 - 0.1307) < 0.01
    assert set(np.unique(data["y_train"])) == set(range(10))


def test_fashion_digits_and_shakespeare_load():
    assert datasets.load("fashion_mnist")["x_train"].shape == (10000, 28, 28)
    pixels, labels = datasets.load("digits")
    assert pixels.shape == (1797, 64) and pixels.max() == 16 and labels.shape == (1797,)
    text = datasets.load("shakespeare")
    assert len(text) == 5_057_280 and len(set(text)) == 84


def test_a_corrupted_file_is_refused_with_its_name(tmp_path):
    for name in datasets.CHECKSUMS:
        shutil.copy2(datasets.folder() / name, tmp_path / name)
    with open(tmp_path / "mnist_10k_2k.npz", "r+b") as stream:
        stream.seek(1000)
        stream.write(b"\x00\x01\x02")
    with pytest.raises(TitoError, match="mnist_10k_2k.npz does not match its sha256"):
        datasets.load("mnist", tmp_path)
    assert datasets.load("digits", tmp_path)[0].shape == (1797, 64)


def test_an_unknown_dataset_names_the_choices():
    with pytest.raises(TitoError, match="choose one of mnist"):
        datasets.load("cifar10")
