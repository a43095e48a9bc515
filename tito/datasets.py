"""The datasets shipped in datasets/, loaded only after their sha256 matches datasets/README.md."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from tito.errors import TitoError

CHECKSUMS = {
    "mnist_10k_2k.npz": "1541ae7e489cd0e5335d3d9a7768245b29297e0b851104bfc571c813725e679b",
    "fashion_mnist_10k_2k.npz": "009dc909d6914f083fba08e5fd702ecb398ce07d2710ca2194130aea5eedb6e1",
    "digits.csv.gz": "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
    "shakespeare_complete.txt.gz": "b171b7e9eabeec9c8ca962b53bed01d1d3ac6b473050631f077bb3caa9f5a00b",
}
NAMES = {"mnist": "mnist_10k_2k.npz", "fashion_mnist": "fashion_mnist_10k_2k.npz",
         "digits": "digits.csv.gz", "shakespeare": "shakespeare_complete.txt.gz"}


def folder() -> Path:
    return Path(__file__).resolve().parents[1] / "datasets"


def verified_path(name: str, directory: Path | None = None) -> Path:
    """The path of a dataset file whose sha256 matches; a TitoError naming the file otherwise."""
    if name not in NAMES:
        raise TitoError(f"unknown dataset {name!r}: choose one of {', '.join(NAMES)}")
    path = (directory or folder()) / NAMES[name]
    if not path.is_file():
        raise TitoError(f"{path} is missing: restore it with `git checkout -- datasets/`")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != CHECKSUMS[path.name]:
        raise TitoError(f"{path} does not match its sha256 in datasets/README.md (got {digest[:12]}...); "
                        f"restore it with `git checkout -- datasets/`")
    return path


def load(name: str, directory: Path | None = None) -> Any:
    """mnist/fashion_mnist: dict of uint8 arrays x_train, y_train, x_test, y_test;
    digits: (x (1797, 64) uint8, y (1797,) uint8); shakespeare: the text as a str."""
    path = verified_path(name, directory)
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    if name == "digits":
        with gzip.open(path, "rt") as stream:
            table = np.loadtxt(stream, delimiter=",", dtype=np.float64).astype(np.uint8)
        return table[:, :64], table[:, 64]
    with gzip.open(path, "rt", encoding="ascii") as stream:
        return stream.read()
