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


# The package's own loaders (tt.datasets, module 08, given code): the same files, found without tito.

PROBE = """
import json, os, sys
import numpy as np
import tinytorch as tt
from tinytorch.core import data

def attempt(make):
    try:
        return {"ok": repr(make())}
    except Exception as error:
        return {"raised": type(error).__name__, "message": str(error)}

report = {"checksums": data._CHECKSUMS}
if sys.argv[1] == "found":
    train, test = tt.datasets.MNIST(), tt.datasets.MNIST(train=False)
    image, label = train[0]
    fashion, digits = tt.datasets.FashionMNIST(), tt.datasets.Digits()
    report.update(train=len(train), test=len(test), image=[type(image).__name__, list(image.shape), str(image.dtype),
                  float(image.numpy().min()), float(image.numpy().max())], label=[type(label).__name__, label],
                  first_pixels=train.data[:2].tolist(), fashion=len(fashion), fashion_label=int(fashion.targets[0]),
                  digits=[len(digits), list(digits[5][0].shape), float(digits.data.max())],
                  text=len(tt.datasets.shakespeare()))
else:
    root = sys.argv[2]
    report.update(corrupt=attempt(lambda: tt.datasets.MNIST(root=root)),
                  digits_beside_it=attempt(lambda: len(tt.datasets.Digits(root=root))),
                  missing=attempt(lambda: tt.datasets.FashionMNIST(root=root)),
                  from_the_environment=attempt(lambda: len(tt.datasets.Digits())))
    os.environ.pop("TINYTORCH_DATA")
    report["through_tito"] = attempt(lambda: len(tt.datasets.Digits()))  # the checkout tito runs from
    sys.path.insert(0, sys.argv[3])  # a tito of a folder without datasets/ in its place
    report["nowhere"] = attempt(lambda: tt.datasets.Digits())
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tito.package import export
    from tito.project import stages

    from conftest import copy_course

    root = copy_course(tmp_path_factory.mktemp("reference") / "course")
    export(root, next(stage for stage in stages(root) if stage.number == "08"), reference=True)
    return root / "build" / "reference"


def _probe(reference, cwd, *args, data=None):
    import json
    import subprocess
    import sys

    env = {"PYTHONPATH": str(reference), **({"TINYTORCH_DATA": str(data)} if data else {})}
    run = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_the_package_finds_the_shipped_files_from_below_the_checkout(reference):
    report = _probe(reference, datasets.folder().parent / "modules", "found")
    assert report["checksums"] == datasets.CHECKSUMS, "tt.datasets must check the sums of datasets/README.md"
    mnist = datasets.load("mnist")
    assert report["train"] == 10000 and report["test"] == 2000
    assert report["image"] == ["Tensor", [1, 28, 28], "float32", 0.0, 1.0]
    assert report["label"] == ["int", int(mnist["y_train"][0])]
    assert report["first_pixels"] == mnist["x_train"][:2].tolist()
    assert report["fashion"] == 10000 and report["fashion_label"] == int(datasets.load("fashion_mnist")["y_train"][0])
    assert report["digits"] == [1797, [1, 8, 8], 16.0]
    assert report["text"] == 5_057_280


def test_the_package_names_a_missing_or_corrupt_file(reference, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for name in ("mnist_10k_2k.npz", "digits.csv.gz"):
        shutil.copy2(datasets.folder() / name, data / name)
    with open(data / "mnist_10k_2k.npz", "r+b") as stream:
        stream.seek(1000)
        stream.write(b"\x00\x01\x02")
    elsewhere = tmp_path / "elsewhere"  # no datasets/ folder in it or above it
    elsewhere.mkdir()
    stand_in = tmp_path / "no_checkout"  # a `tito` package whose folder holds no datasets/
    (stand_in / "tito").mkdir(parents=True)
    (stand_in / "tito" / "__init__.py").write_text("")
    report = _probe(reference, elsewhere, "broken", str(data), str(stand_in), data=data)
    assert report["corrupt"]["raised"] == "RuntimeError"
    assert f"{data / 'mnist_10k_2k.npz'} is corrupt" in report["corrupt"]["message"]
    assert "git checkout -- datasets/" in report["corrupt"]["message"]
    assert report["digits_beside_it"] == {"ok": "1797"}
    assert report["missing"]["raised"] == "FileNotFoundError"
    assert f"{data / 'fashion_mnist_10k_2k.npz'} is missing" in report["missing"]["message"]
    assert report["from_the_environment"] == {"ok": "1797"}
    assert report["through_tito"] == {"ok": "1797"}, "in the course, the folder of the checkout tito runs from"
    assert report["nowhere"]["raised"] == "FileNotFoundError"
    assert "digits.csv.gz" in report["nowhere"]["message"] and "TINYTORCH_DATA" in report["nowhere"]["message"]
