# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 08 DataLoader
#
# In 07 the training set was two numpy arrays held in memory, and `batches` cut their indices into
# mini-batches. Real data is rarely that tidy: images sit in files, a text must be cut into pieces, an
# image should be flipped or shifted a little differently each time the model sees it. PyTorch
# separates the two concerns:
#
# - a **dataset** knows how many items there are and how to get item `i`: `len(dataset)` and
#   `dataset[i]`, nothing else;
# - a **data loader** decides the order of the items in each epoch, fetches a mini-batch of them,
#   and *collates* them: stacks 128 images of shape `(1, 28, 28)` into one tensor of shape
#   `(128, 1, 28, 28)` and 128 labels into one tensor of shape `(128,)`.
#
# ```python
# train = datasets.MNIST(train=True, transform=transforms.Normalize((0.1307,), (0.3081,)))
# loader = DataLoader(train, batch_size=128, shuffle=True)
# for epoch in range(10):
#     for images, labels in loader:      # a new order every epoch
#         ...                            # images (128, 1, 28, 28) float32, labels (128,) int64
# ```
#
# **Why batches.** A model applied to 128 samples at once is one numpy call on a `(128, 784)` array
# instead of 128 calls on `(1, 784)` arrays. Every numpy call costs a few microseconds of Python and
# dispatch before any arithmetic happens, and the arithmetic itself runs faster on bigger arrays (the
# matrix product reuses each weight for 128 rows while it is in the cache). At the end of this module
# you measure it: samples per second at batch sizes 1 to 512.
#
# **Why shuffle, every epoch.** Mini-batch gradient descent assumes each batch is a fair sample of the
# data. A file sorted by label (all the zeros first) breaks that, and so does any fixed order seen
# again and again: the model learns the order. So the loader draws a new permutation at the start of
# every epoch, from a random generator you can seed, so that a run can be repeated exactly.
#
# **Why transforms.** A digit shifted by two pixels is still the same digit. Showing the model each
# training image with a small random shift (a *crop* of a padded image) or mirrored (for clothes, not
# for digits) gives it, in effect, a bigger training set, and it learns to ignore what does not
# matter. These random *augmentations* are redrawn every time an image is used. Normalisation
# (subtract a mean, divide by a standard deviation, per channel) is a transform too, with no
# randomness.
#
# What you build goes into `tinytorch/core/data.py`, in PyTorch's namespaces: `tt.utils.data` as
# `torch.utils.data`, and `tt.transforms` and `tt.datasets` in the role of `torchvision.transforms` and
# `torchvision.datasets`:
#
# | you build | task |
# |---|---|
# | `tt.utils.data.TensorDataset(*tensors)` | 08.1 |
# | `tt.utils.data.default_collate(batch)`: numbers, arrays and Tensors | 08.2 |
# | `default_collate`: tuples, lists and dicts | 08.3 |
# | `tt.utils.data.RandomSampler(data_source, generator=None)`: a new permutation every epoch | 08.4 |
# | `tt.utils.data.BatchSampler(sampler, batch_size, drop_last)` | 08.5 |
# | `tt.utils.data.DataLoader(...)`: which sampler, and `len()` in batches | 08.6 |
# | `DataLoader`: iterating over batches | 08.7 |
# | `tt.transforms.Normalize(mean, std)` | 08.8 |
# | `tt.transforms.RandomHorizontalFlip(p=0.5)` | 08.9 |
# | `tt.transforms.RandomCrop(size, padding=None)` | 08.10 |
#
# Given (you read them, you do not write them): the base classes `Dataset` and `Sampler`,
# `SequentialSampler`, `transforms.Compose`, and the loaders of the data shipped with the course,
# `tt.datasets.MNIST`, `FashionMNIST`, `Digits` and `shakespeare`, which check every file before they
# read it.
#
# **Before you start.** This notebook runs on *your* modules 01 to 07: its exported cell imports
# `Tensor`, `as_tensor` and `default_generator` from 01, and the examples train with your `nn` and
# `optim`. <!-- tito -->Finish 07 (`tito test 07` at full marks), run `tito export 07`, and restart this
# notebook's kernel whenever you export again. Grade this module with `tito test 08`, which exports 01
# to 08 together.<!-- /tito -->
# <!-- course In the nbgrader course the notebook's first code cell builds `tinytorch` from your own
# notebooks of the earlier modules, fetched into the folders beside this one: finish those first, and
# run that cell (then the cells below it) again whenever you change one. Your work is graded when you
# submit this notebook. -->

# %%
#| default_exp core.data
import collections
import os
import tempfile
import time

import numpy as np

import tinytorch as tt
from tinytorch import nn, optim

# %% [markdown]
# The package file starts with its imports and its public names. Nothing here needs autograd: data
# comes before the model. Random numbers come from 01's `default_generator` (an `np.random.Generator`),
# so `tt.manual_seed` makes the shuffling and the augmentations repeatable, like everything else.

# %%
#| export
import gzip
import hashlib
import importlib.util
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tinytorch.core.tensor import Tensor, as_tensor, default_generator

# tt.utils.data as torch.utils.data; tt.transforms and tt.datasets in the role of torchvision's
__all__ = ["Dataset", "TensorDataset", "default_collate", "Sampler", "SequentialSampler", "RandomSampler",
           "BatchSampler", "DataLoader", "Compose", "Normalize", "RandomHorizontalFlip", "RandomCrop", "MNIST",
           "FashionMNIST", "Digits", "shakespeare"]

# %% [markdown]
# ## Datasets
#
# A *map-style* dataset is any object with two methods:
#
# - `__len__()`: the number of items;
# - `__getitem__(index)`: the item at `index`, for `0 <= index < len(dataset)`. An item is whatever the
#   task needs: usually a pair `(input, target)`, but a dict or a single array works too.
#
# PyTorch's `Dataset` class is almost empty: it documents the two methods and raises
# `NotImplementedError` when `__getitem__` is missing. Subclassing it says what the object is for. A
# dataset decides nothing about order or batches; it may load an item from disk only when asked (a
# million images need not fit in memory), or hold everything in arrays.
#
# This cell is given.

# %%
#| export utils.data
class Dataset:
    """A map-style dataset: subclasses define __len__() and __getitem__(index)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(index)")

# %% [markdown]
# A dataset in four lines: the squares of `0..n-1`, computed when asked.

# %%
class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if not 0 <= index < self.n:
            raise IndexError(f"index {index} out of range for {self.n} items")
        return index, index ** 2


squares = Squares(5)
print(len(squares), squares[3], [squares[i] for i in range(len(squares))])

# %% [markdown]
# ### TensorDataset (task 08.1)
#
# The most common dataset wraps tensors that are already in memory, with the items along the first
# axis: `TensorDataset(images, labels)` with `images` of shape `(N, 1, 28, 28)` and `labels` of shape
# `(N,)`. Item `i` is the tuple `(images[i], labels[i])`, one entry per tensor, in the order given.
#
# `TensorDataset(*tensors)`, as `torch.utils.data.TensorDataset`:
#
# - each argument is a `Tensor` or anything `as_tensor` accepts (a numpy array keeps its memory); keep
#   them as the tuple `self.tensors`;
# - all must have the same size along the first axis, and at least one axis: otherwise raise a
#   `ValueError` naming the sizes (PyTorch asserts "Size mismatch between tensors"; a sentence with the
#   numbers helps more). With no tensor at all, raise a `ValueError` too;
# - `dataset[i]` is `tuple(t[i] for t in self.tensors)`: your `Tensor.__getitem__` from 01 does the
#   indexing (a negative `i` counts from the end; one out of range raises `IndexError`);
# - `len(dataset)` is that common first size.

# %%
#| export utils.data
class TensorDataset(Dataset):
    """Items are tuples (t[i] for each tensor t); all tensors share their first size."""

    def __init__(self, *tensors):
        ### BEGIN SOLUTION 08.1 TensorDataset
        tensors = tuple(as_tensor(t) for t in tensors)
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        sizes = [t.shape[0] if t.ndim else None for t in tensors]
        if None in sizes or any(size != sizes[0] for size in sizes):
            raise ValueError(f"TensorDataset: every tensor needs the same size along its first axis, got the "
                             f"shapes {[t.shape for t in tensors]}")
        self.tensors = tensors
        ### END SOLUTION

    def __getitem__(self, index):
        ### BEGIN SOLUTION 08.1 TensorDataset
        return tuple(t[index] for t in self.tensors)
        ### END SOLUTION

    def __len__(self):
        ### BEGIN SOLUTION 08.1 TensorDataset
        return self.tensors[0].shape[0]
        ### END SOLUTION

# %% [markdown]
# Test 08.1.

# %%
x = np.arange(12, dtype=np.float32).reshape(6, 2)
y = np.array([0, 1, 0, 1, 1, 0])
dataset = TensorDataset(x, tt.Tensor(y))
assert len(dataset) == 6 and isinstance(dataset, Dataset)
first = dataset[0]
assert isinstance(first, tuple) and len(first) == 2 and all(isinstance(part, tt.Tensor) for part in first)
assert first[0].numpy().tolist() == [0.0, 1.0] and first[1].item() == 0
assert dataset[-1][0].numpy().tolist() == [10.0, 11.0]
assert len(TensorDataset(x)[2]) == 1
try:
    TensorDataset(x, np.zeros(5))
    raise AssertionError("a size mismatch must raise")
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# ## Collation: from a list of items to one batch
#
# The loader fetches a list of items, `[dataset[i] for i in batch_indices]`, and hands it to a *collate
# function*, which makes one batch of it. `default_collate` does what you almost always want: it stacks
# the items into one tensor with a new first axis, and it does so *inside* tuples, lists and dicts:
#
# ```
# [(image_0, 3), (image_1, 7), (image_2, 1)]        a list of 3 items (image (1, 28, 28), int label)
#   -> [Tensor (3, 1, 28, 28), Tensor([3, 7, 1])]   a list of 2 batched tensors
# ```
#
# ### Numbers, arrays and Tensors (task 08.2)
#
# The leaves first: a batch whose items are all numbers, numpy arrays or Tensors becomes **one**
# `Tensor` of shape `(len(batch), *item_shape)`:
#
# - the dtype follows 01's rule for the numbers you would write by hand: Python ints give int64,
#   Python floats (or ints and floats mixed) float32, bools bool: pass the list of numbers to
#   `Tensor(...)`. (PyTorch gives float64 for Python floats; in this course floats are float32, so
#   that a batch of float targets meets float32 predictions.) Numpy arrays, numpy scalars (an
#   `np.uint8` label) and Tensors keep their dtype: stack them with `np.stack` (which reads a Tensor
#   through its `__array__`) and wrap the result in a `Tensor`. Careful: `np.float64` is a subclass
#   of Python's `float`, so test for `np.generic` before you treat an item as a Python number.
# - every item must have the shape of the first. `np.stack` would say only "all input arrays must have
#   the same shape"; in a batch of 128 you want to know *which* item and *what* shapes. Before
#   stacking, raise a `RuntimeError` (PyTorch's type) naming the index of the first item whose shape
#   differs, its shape and the shape of item 0: `default_collate: item 5 of the batch has shape (3, 30)
#   but item 0 has shape (3, 28); ...`. A dataset whose images differ in size needs a transform that
#   crops them to one size, or a `collate_fn` of its own.
#
# ### Tuples, lists and dicts (task 08.3)
#
# When the first item is a container, collate each position (each key) on its own, recursively:
#
# | items are | the batch is |
# |---|---|
# | dicts | a dict with the same keys: `{key: default_collate([item[key] for item in batch])}` |
# | tuples or lists | a **list**, one entry per position: `[default_collate(column) for column in zip(*batch)]` |
# | named tuples | the same named tuple type, built from those entries |
#
# A batch of `(image, label)` tuples gives a *list* `[images, labels]`, not a tuple: that is what
# PyTorch does, and `for images, labels in loader` unpacks either. Items with different numbers of
# parts cannot be collated position by position: raise a `RuntimeError` naming the index of the first
# such item and the two lengths (`zip` would silently cut the longer ones).
#
# Strings are sequences too, but a batch of strings is not stacked: the given first lines return it
# unchanged, as PyTorch does. So the strings of one key of dicts come back as a list (you collate
# `[item[key] for item in batch]`), and those of one position of tuples as a **tuple**, since `zip`
# gives tuples: pass each column to `default_collate` as `zip` gives it, as PyTorch does
# (`default_collate([(x, "cat"), (y, "dog")])[1] == ("cat", "dog")`). A numpy array or a Tensor is
# neither a `Mapping` nor a `Sequence` (in the sense of `collections.abc`), so it reaches the leaves.

# %%
#| export utils.data
def default_collate(batch):
    """Stack a list of items into one batch: numbers, arrays and Tensors become one Tensor with a new first
    axis; tuples and lists become a list, dicts a dict, named tuples their type, collated position by
    position (key by key); a batch of strings is returned as it is."""
    elem = batch[0]
    if isinstance(elem, str):
        return batch
    if not isinstance(elem, (Mapping, Sequence)):
        ### BEGIN SOLUTION 08.2 default_collate: numbers, arrays and Tensors
        arrays = [np.asarray(item) for item in batch]
        for index, array in enumerate(arrays):
            if array.shape != arrays[0].shape:
                raise RuntimeError(f"default_collate: item {index} of the batch has shape {array.shape} but item 0 "
                                   f"has shape {arrays[0].shape}; every item must have the same shape")
        if isinstance(elem, (int, float)) and not isinstance(elem, np.generic):
            return Tensor(list(batch))
        return Tensor(np.stack(arrays))
        ### END SOLUTION
    ### BEGIN SOLUTION 08.3 default_collate: tuples, lists and dicts
    if isinstance(elem, Mapping):
        return {key: default_collate([item[key] for item in batch]) for key in elem}
    for index, item in enumerate(batch):
        if len(item) != len(elem):
            raise RuntimeError(f"default_collate: item {index} of the batch has {len(item)} parts but item 0 has "
                               f"{len(elem)}; every item must have the same structure")
    columns = [default_collate(column) for column in zip(*batch)]
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*columns)
    return columns
    ### END SOLUTION

# %% [markdown]
# Test 08.2: numbers, arrays and Tensors.

# %%
labels = default_collate([3, 7, 1])
assert isinstance(labels, tt.Tensor) and labels.dtype == np.int64 and labels.numpy().tolist() == [3, 7, 1]
assert default_collate([0.5, 1]).dtype == np.float32 and default_collate([True, False]).dtype == np.bool_
images = default_collate([np.full((1, 2, 2), k, dtype=np.uint8) for k in range(3)])
assert images.shape == (3, 1, 2, 2) and images.dtype == np.uint8 and images.numpy()[2].max() == 2
assert default_collate([tt.Tensor([1.0, 2.0]), tt.Tensor([3.0, 4.0])]).numpy().tolist() == [[1, 2], [3, 4]]
assert default_collate([np.float64(1.5), np.float64(2.5)]).dtype == np.float64
try:
    default_collate([np.zeros((3, 28)), np.zeros((3, 28)), np.zeros((3, 30))])
    raise AssertionError("items of different shapes must raise")
except RuntimeError as error:
    print("RuntimeError:", error)
    assert "2" in str(error) and "(3, 30)" in str(error) and "(3, 28)" in str(error)

# %% [markdown]
# Test 08.3: tuples, lists and dicts.

# %%
batch = default_collate([(np.zeros(2, np.float32), 1), (np.ones(2, np.float32), 0)])
assert isinstance(batch, list) and len(batch) == 2
assert batch[0].shape == (2, 2) and batch[1].numpy().tolist() == [1, 0] and batch[1].dtype == np.int64
record = default_collate([{"x": np.ones(3), "id": 4}, {"x": np.zeros(3), "id": 5}])
assert sorted(record) == ["id", "x"] and record["x"].shape == (2, 3) and record["id"].numpy().tolist() == [4, 5]
Pair = collections.namedtuple("Pair", ["image", "label"])
pair = default_collate([Pair(np.zeros((1, 2)), 0), Pair(np.ones((1, 2)), 1)])
assert type(pair) is Pair and pair.image.shape == (2, 1, 2)
nested = default_collate([{"pair": (1, 2.0)}, {"pair": (3, 4.0)}])
assert nested["pair"][0].numpy().tolist() == [1, 3] and nested["pair"][1].dtype == np.float32
assert default_collate(["to be", "or not"]) == ["to be", "or not"]
named = default_collate([(np.zeros(2), "cat"), (np.ones(2), "dog")])
assert named[1] == ("cat", "dog"), "the strings of one position of tuples: a tuple, as PyTorch gives"
try:
    default_collate([(1, 2), (3, 4, 5)])
    raise AssertionError("items with different numbers of parts must raise")
except RuntimeError as error:
    print("RuntimeError:", error)

# %% [markdown]
# ## Samplers: the order of an epoch
#
# Which items go into which batch is decided apart from the dataset, by a **sampler**: an object whose
# `iter()` yields the indices of one epoch, one by one, and whose `len()` is how many it yields.
# `SequentialSampler` yields `0, 1, ..., len(dataset) - 1`: it is given, as the example. PyTorch has a
# few more (weighted, subset, distributed over several machines); the loader does not care which it
# gets.
#
# ### RandomSampler (task 08.4)
#
# `RandomSampler(data_source, generator=None)` yields a random permutation of `0..len(data_source)-1`,
# a **new one every time it is iterated**: one `iter()` is one epoch. Each index comes exactly once per
# epoch (sampling *without* replacement), so every item is seen once per epoch.
#
# Draw the permutation with `generator.permutation(n)` from `self.generator` when one was given, else
# from 01's `default_generator`, and return an iterator over its entries as Python ints
# (`iter(order.tolist())`). So:
#
# - `tt.manual_seed(s)` before the loop makes every epoch of the run repeatable, and successive epochs
#   still differ, because each draw moves the generator on;
# - a generator of its own (`np.random.default_rng(s)`) gives the loader a stream of orders that
#   nothing else disturbs: adding a `randn` call to the model does not change the order of the data.
#
# PyTorch's `generator` is a `torch.Generator`; ours is an `np.random.Generator`, the kind of
# `default_generator`.

# %%
#| export utils.data
class Sampler:
    """Yields the indices of one epoch when iterated; len() is how many."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__()")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1, every epoch."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation of 0..len(data_source)-1 every epoch, drawn from `generator` (an
    np.random.Generator) or, when it is None, from tinytorch's default_generator."""

    def __init__(self, data_source, generator=None):
        self.data_source, self.generator = data_source, generator

    def __iter__(self):
        ### BEGIN SOLUTION 08.4 RandomSampler
        generator = self.generator if self.generator is not None else default_generator
        return iter(generator.permutation(len(self.data_source)).tolist())
        ### END SOLUTION

    def __len__(self) -> int:
        return len(self.data_source)

# %% [markdown]
# Test 08.4.

# %%
sampler = RandomSampler(range(10))
tt.manual_seed(0)
epoch_1, epoch_2 = list(sampler), list(sampler)
assert sorted(epoch_1) == list(range(10)) and sorted(epoch_2) == list(range(10)) and epoch_1 != epoch_2
assert all(type(index) is int for index in epoch_1) and len(sampler) == 10
tt.manual_seed(0)
assert list(sampler) == epoch_1, "tt.manual_seed makes the epochs repeatable"
mine = RandomSampler(range(10), generator=np.random.default_rng(5))
tt.manual_seed(0)
assert list(mine) == list(RandomSampler(range(10), generator=np.random.default_rng(5)))
assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]

# %% [markdown]
# ### BatchSampler (task 08.5)
#
# `BatchSampler(sampler, batch_size, drop_last)` groups the indices of `sampler` into lists of
# `batch_size`, in the sampler's order: `[0, 1, 2], [3, 4, 5], [6]` for 7 indices in order and
# `batch_size=3`. The last batch holds what is left; with `drop_last=True` a last batch smaller than
# `batch_size` is dropped instead (some models need every batch full, and one tiny batch gives one
# very noisy step).
#
# - `__init__` checks `batch_size`: it must be an `int` (numpy integers count, `bool` does not) of at
#   least 1, else raise `ValueError` naming the value, as PyTorch does (`batch_size should be a positive
#   integer value, but got batch_size=0`). Assigning the attributes is given.
# - `__iter__` walks the sampler **once** per epoch (`for index in self.sampler`: a `RandomSampler`
#   draws a new order each time it is iterated), and yields each list as soon as it is full. Write it
#   as a generator, with `yield`.
# - `len()` is the number of batches: `ceil(n / batch_size)`, or `floor(n / batch_size)` with
#   `drop_last`, where `n = len(self.sampler)`. Use integer arithmetic (`-(-n // b)` is the ceiling),
#   not `math.ceil(n / b)`: a float has 53 bits and rounds large counts.
#
# This is 07's `batches`, split in two: the order comes from the sampler, the grouping from here.

# %%
#| export utils.data
class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler, in its order; the last holds the rest unless drop_last."""

    def __init__(self, sampler, batch_size: int, drop_last: bool):
        ### BEGIN SOLUTION 08.5 BatchSampler
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size!r}")
        ### END SOLUTION
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), bool(drop_last)

    def __iter__(self):
        ### BEGIN SOLUTION 08.5 BatchSampler
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION 08.5 BatchSampler
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return -(-len(self.sampler) // self.batch_size)
        ### END SOLUTION

# %% [markdown]
# Test 08.5.

# %%
assert list(BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)) == [[0, 1, 2], [3, 4, 5], [6]]
assert list(BatchSampler(SequentialSampler(range(7)), 3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
assert len(BatchSampler(SequentialSampler(range(7)), 3, False)) == 3
assert len(BatchSampler(SequentialSampler(range(7)), 3, True)) == 2
assert len(BatchSampler(SequentialSampler(range(6)), 3, False)) == 2
assert list(BatchSampler(SequentialSampler(range(0)), 4, False)) == []
tt.manual_seed(1)
shuffled = list(BatchSampler(RandomSampler(range(10)), 4, False))
assert [len(b) for b in shuffled] == [4, 4, 2] and sorted(sum(shuffled, [])) == list(range(10))
for wrong in (0, -2, 2.0, True):
    try:
        BatchSampler(SequentialSampler(range(7)), wrong, False)
        raise AssertionError(f"batch_size={wrong!r} must raise")
    except ValueError as error:
        print("ValueError:", error)

# %% [markdown]
# ## The DataLoader
#
# `DataLoader(dataset, batch_size=1, shuffle=False, sampler=None, collate_fn=None, drop_last=False,
# generator=None)` puts the pieces together, with PyTorch's names and defaults (PyTorch has more
# options, for worker processes and pinned memory; you will not need them here).
#
# ### Which sampler, and how many batches (task 08.6)
#
# The constructor builds the pipeline and keeps every argument as an attribute of the same name:
#
# 1. the sampler: the `sampler` given, else `RandomSampler(dataset, generator=generator)` when
#    `shuffle`, else `SequentialSampler(dataset)`. A sampler *and* `shuffle=True` contradict each other
#    (who decides the order?): raise `ValueError("sampler option is mutually exclusive with
#    shuffle")`, PyTorch's words;
# 2. `self.batch_sampler = BatchSampler(self.sampler, batch_size, drop_last)` (which checks
#    `batch_size`);
# 3. `self.collate_fn`: the one given, else `default_collate`.
#
# Store `dataset`, `batch_size`, `drop_last`, `generator`, `sampler`, `batch_sampler` and `collate_fn`.
# `len(loader)` is the number of batches per epoch: the batch sampler's length.
#
# ### Iterating (task 08.7)
#
# `for batch in loader` runs one epoch: for each list of indices of `self.batch_sampler`, fetch the
# items `[self.dataset[i] for i in indices]` and yield `self.collate_fn(items)`. Write `__iter__` as a
# generator: iterating the loader again starts a new epoch, and with `shuffle=True` the batch
# sampler's new pass draws a new order.

# %%
#| export utils.data
class DataLoader:
    """Iterates over mini-batches of a dataset: the order from a sampler (shuffled each epoch when shuffle),
    grouped by a BatchSampler, fetched item by item and stacked by collate_fn (default_collate)."""

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, sampler=None, collate_fn=None,
                 drop_last: bool = False, generator=None):
        ### BEGIN SOLUTION 08.6 DataLoader: samplers and length
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.dataset, self.batch_size, self.drop_last, self.generator = dataset, batch_size, drop_last, generator
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        ### END SOLUTION

    def __len__(self) -> int:
        ### BEGIN SOLUTION 08.6 DataLoader: samplers and length
        return len(self.batch_sampler)
        ### END SOLUTION

    def __iter__(self):
        ### BEGIN SOLUTION 08.7 DataLoader: iteration
        for indices in self.batch_sampler:
            yield self.collate_fn([self.dataset[index] for index in indices])
        ### END SOLUTION

# %% [markdown]
# Test 08.6.

# %%
dataset = TensorDataset(np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10))
assert len(DataLoader(dataset, batch_size=4)) == 3 and len(DataLoader(dataset, batch_size=4, drop_last=True)) == 2
assert len(DataLoader(dataset)) == 10, "batch_size=1 by default"
assert type(DataLoader(dataset).sampler) is SequentialSampler
generator = np.random.default_rng(0)
loader = DataLoader(dataset, batch_size=4, shuffle=True, generator=generator)
assert type(loader.sampler) is RandomSampler and loader.sampler.generator is generator
assert loader.collate_fn is default_collate and loader.batch_sampler.batch_size == 4
try:
    DataLoader(dataset, shuffle=True, sampler=SequentialSampler(dataset))
    raise AssertionError("sampler and shuffle together must raise")
except ValueError as error:
    print("ValueError:", error)

# %% [markdown]
# Test 08.7.

# %%
batches = list(DataLoader(dataset, batch_size=4))
assert [b[0].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
assert np.concatenate([b[1].numpy() for b in batches]).tolist() == list(range(10))
tt.manual_seed(0)
loader = DataLoader(dataset, batch_size=3, shuffle=True)
epochs = [np.concatenate([labels.numpy() for _, labels in loader]).tolist() for _ in range(2)]
assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(10)) and epochs[0] != epochs[1]
tt.manual_seed(0)
assert np.concatenate([labels.numpy() for _, labels in loader]).tolist() == epochs[0], "repeatable"
assert [len(y) for _, y in DataLoader(dataset, batch_size=3, shuffle=True, drop_last=True)] == [3, 3, 3]
pairs = list(DataLoader(dataset, batch_size=5, collate_fn=lambda items: items))
assert len(pairs) == 2 and len(pairs[0]) == 5 and isinstance(pairs[0][0], tuple)

# %% [markdown]
# A first training loop with a loader: three blobs of 2-D points as in 07, now as a `TensorDataset`.
# The loop is 07's `train_epoch`, with the loader doing the shuffling and the batching.

# %%
rng = np.random.default_rng(0)
centres = np.array([[0.0, 2.0], [-2.0, -1.0], [2.0, -1.0]], dtype=np.float32)
labels = rng.integers(0, 3, 600)
points = (centres[labels] + rng.standard_normal((600, 2))).astype(np.float32)
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))
optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(TensorDataset(points, labels), batch_size=32, shuffle=True)
for epoch in range(3):
    total = 0.0
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = nn.CrossEntropyLoss()(model(inputs), targets)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(targets)
    print(f"epoch {epoch + 1}: mean training loss {total / len(loader.dataset):.4f}")
with tt.no_grad():
    accuracy = np.mean(np.argmax(model(tt.Tensor(points)).numpy(), axis=1) == labels)
print(f"training accuracy {100 * accuracy:.1f}%")
assert accuracy > 0.85

# %% [markdown]
# ## Transforms
#
# A transform is a callable that takes an image (or a batch of them) and returns a new one.
# torchvision's transforms act on one image at a time, inside the dataset's `__getitem__`; that is one
# Python call per image per transform. Ours take either one image `(C, H, W)` or a whole batch
# `(N, C, H, W)`, and treat a batch with whole-array numpy, drawing the random choices **per image**.
# So they work in both places: `MNIST(transform=...)` applies one to each item, and in a loop
# `images = augment(images)` applies it to a collated batch at once, much faster.
#
# Every transform returns what it was given: a `Tensor` for a `Tensor`, a numpy array for an array,
# one image for one image, with the dtype it came with. Two given helpers do the bookkeeping:
# `_images(x, name)` returns `x` as an array of shape `(N, C, H, W)` (a single image becomes a batch of
# one; any other number of axes is a `ValueError`), and `_returned(batch, x)` turns the result back
# into the form of `x`.
#
# `Compose([t1, t2, ...])` applies transforms one after the other; it is given. The random transforms
# take a `generator` keyword (torchvision's have none and use the global generator): by default they
# draw from `default_generator`, so `tt.manual_seed` makes an augmented run repeatable too.

# %%
#| export transforms
def _images(x, name: str) -> np.ndarray:
    """x as an array of shape (N, C, H, W): one image (C, H, W) becomes a batch of one."""
    array = np.asarray(x)
    if array.ndim not in (3, 4):
        raise ValueError(f"{name} expects one image of shape (C, H, W) or a batch of shape (N, C, H, W), got "
                         f"shape {array.shape}")
    return array if array.ndim == 4 else array[None]


def _returned(batch: np.ndarray, x):
    """The batch (N, C, H, W) in the form of x: one image if x was one, a Tensor if x was a Tensor."""
    result = batch if np.ndim(x) == 4 else batch[0]
    return Tensor(result) if isinstance(x, Tensor) else result


class Compose:
    """Apply transforms one after the other: Compose([RandomCrop(28, padding=2), Normalize(...)])."""

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for transform in self.transforms:
            x = transform(x)
        return x

    def __repr__(self) -> str:
        return "Compose(" + "".join(f"\n    {transform!r}," for transform in self.transforms) + "\n)"

# %% [markdown]
# ### Normalize (task 08.8)
#
# `Normalize(mean, std)` computes, for every channel `c`,
#
#     output[..., c, :, :] = (input[..., c, :, :] - mean[c]) / std[c]
#
# `mean` and `std` are sequences with one number per channel (or a single number for all channels);
# MNIST's are `(0.1307,)` and `(0.3081,)` for pixels in `[0, 1]`. Reshape them to `(C, 1, 1)` and let
# broadcasting do the rest, in the dtype of the images (make the arrays with `dtype=batch.dtype`, so
# float32 images stay float32). Three errors, each a clear sentence:
#
# - images that are not floating point (`uint8` pixels): `TypeError`, saying to convert them first
#   (`x.astype(np.float32) / 255`). Subtracting 0.13 from a `uint8` would wrap around;
# - `mean` or `std` with neither 1 nor C values: `ValueError` naming the lengths;
# - a `std` with a zero: `ValueError` (a division by zero fills the images with `inf`).

# %%
#| export transforms
class Normalize:
    """(x - mean[c]) / std[c] for each channel c of images (C, H, W) or batches (N, C, H, W); float images only."""

    def __init__(self, mean, std):
        self.mean, self.std = mean, std

    def __call__(self, x):
        ### BEGIN SOLUTION 08.8 Normalize
        batch = _images(x, "Normalize")
        if not np.issubdtype(batch.dtype, np.floating):
            raise TypeError(f"Normalize expects floating-point images, got dtype {batch.dtype}: convert them first, "
                            f"e.g. x.astype(np.float32) / 255")
        mean = np.asarray(self.mean, dtype=batch.dtype).reshape(-1, 1, 1)
        std = np.asarray(self.std, dtype=batch.dtype).reshape(-1, 1, 1)
        channels = batch.shape[1]
        if len(mean) not in (1, channels) or len(std) not in (1, channels):
            raise ValueError(f"Normalize: mean and std need 1 or {channels} values for images with {channels} "
                             f"channels, got {len(mean)} and {len(std)}")
        if np.any(std == 0):
            raise ValueError(f"Normalize: std {self.std} holds a zero, which would divide by zero")
        return _returned((batch - mean) / std, x)
        ### END SOLUTION

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean}, std={self.std})"

# %% [markdown]
# Test 08.8.

# %%
images = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
normalized = Normalize((1.0, 2.0, 3.0), (1.0, 2.0, 4.0))(images)
assert normalized.dtype == np.float32 and normalized.shape == (2, 3, 2, 2)
assert np.allclose(normalized[1, 2], (images[1, 2] - 3.0) / 4.0)
one = Normalize((0.5,), (0.25,))(tt.Tensor(images[0]))
assert isinstance(one, tt.Tensor) and one.shape == (3, 2, 2) and np.allclose(one.numpy(), (images[0] - 0.5) / 0.25)
for bad, error_type in ((images.astype(np.uint8), TypeError), (images[:, :2], ValueError)):
    try:
        Normalize((1.0, 2.0, 3.0), (1.0, 2.0, 4.0))(bad)
        raise AssertionError("must raise")
    except error_type as error:
        print(f"{error_type.__name__}:", error)

# %% [markdown]
# ### RandomHorizontalFlip (task 08.9)
#
# `RandomHorizontalFlip(p=0.5, generator=None)` mirrors each image left to right with probability `p`,
# each image on its own. Draw one uniform number per image, `generator.random(N)` (from
# `default_generator` when no generator was given), flip the images whose number is below `p`, and
# keep the others. No loop over the batch: `batch[..., ::-1]` mirrors every image (a view, no copy),
# and `np.where(flip[:, None, None, None], mirrored, batch)` picks per image. `p=0` never flips,
# `p=1` always does. Whatever `p`, return a new array, never a view of the input: `batch[..., ::-1]`
# alone is a view (and so is `batch` itself), which would change when the caller's images change;
# `np.where` always makes a new array.

# %%
#| export transforms
class RandomHorizontalFlip:
    """Mirror each image left to right with probability p, drawn per image from generator (or default_generator)."""

    def __init__(self, p: float = 0.5, generator=None):
        self.p, self.generator = p, generator

    def __call__(self, x):
        ### BEGIN SOLUTION 08.9 RandomHorizontalFlip
        batch = _images(x, "RandomHorizontalFlip")
        generator = self.generator if self.generator is not None else default_generator
        flip = generator.random(len(batch)) < self.p
        return _returned(np.where(flip[:, None, None, None], batch[..., ::-1], batch), x)
        ### END SOLUTION

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"

# %% [markdown]
# Test 08.9.

# %%
image = np.arange(6, dtype=np.uint8).reshape(1, 2, 3)
assert RandomHorizontalFlip(p=1.0)(image).tolist() == [[[2, 1, 0], [5, 4, 3]]]
assert RandomHorizontalFlip(p=0.0)(image).tolist() == image.tolist()
batch = np.repeat(image[None], 1000, axis=0)
tt.manual_seed(0)
flipped = RandomHorizontalFlip()(batch)
mirrored = (flipped[:, 0, 0, 0] == 2)
assert flipped.dtype == np.uint8 and flipped.shape == batch.shape and 400 < mirrored.sum() < 600
assert np.all(flipped[mirrored] == image[..., ::-1]) and np.all(flipped[~mirrored] == image)
tt.manual_seed(0)
assert np.array_equal(RandomHorizontalFlip()(batch), flipped), "tt.manual_seed makes it repeatable"

# %% [markdown]
# ### RandomCrop (task 08.10)
#
# `RandomCrop(size, padding=None, generator=None)` cuts a window of `size` (an int for a square, or
# `(height, width)`) out of each image, at a random place drawn per image. With `padding=p` the images
# are first padded with `p` zeros on every side (`np.pad` on the last two axes), so
# `RandomCrop(28, padding=2)` on MNIST shifts each digit by up to two pixels in each direction,
# filling the gap with black: the classic augmentation for small images. (torchvision also takes a
# padding per side and other fill modes; here `padding` is one int.)
#
# For padded images of height `H` and width `W` and a window `(h, w)`, the top row of each image's window
# is uniform in `0..H-h` (inclusive) and its left column in `0..W-w`: draw all the tops first, then all
# the lefts, `generator.integers(0, H - h + 1, size=N)` and the same with `W - w + 1`. A window larger
# than the padded image is a `ValueError` naming both sizes.
#
# Then cut N windows, each at its own place, without a Python loop. Two ways:
#
# - **advanced indexing**: row indices `top[:, None] + np.arange(h)` of shape `(N, h)`, column indices of
#   shape `(N, w)`; index `batch[n, c, rows, cols]` with four index arrays shaped to broadcast to
#   `(N, C, h, w)`: `np.arange(N)[:, None, None, None]`, `np.arange(C)[None, :, None, None]`,
#   `rows[:, None, :, None]`, `cols[:, None, None, :]`;
# - **`np.lib.stride_tricks.sliding_window_view(batch, (h, w), axis=(2, 3))`**: a view of shape
#   `(N, C, H-h+1, W-w+1, h, w)` holding every window (no copy), from which
#   `windows[np.arange(N), :, top, left]` takes one window per image, shape `(N, C, h, w)`.

# %%
#| export transforms
class RandomCrop:
    """A window of size (h, w) (or size x size) at a random place per image, after padding each side with
    `padding` zeros; places drawn from generator (or default_generator)."""

    def __init__(self, size, padding=None, generator=None):
        self.size = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
        self.padding, self.generator = padding, generator

    def __call__(self, x):
        ### BEGIN SOLUTION 08.10 RandomCrop
        batch = _images(x, "RandomCrop")
        if self.padding:
            pad = int(self.padding)
            batch = np.pad(batch, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        n, _, height, width = batch.shape
        h, w = self.size
        if h > height or w > width:
            raise ValueError(f"RandomCrop: the crop size {(h, w)} is larger than the padded image size "
                             f"{(height, width)}")
        generator = self.generator if self.generator is not None else default_generator
        top = generator.integers(0, height - h + 1, size=n)
        left = generator.integers(0, width - w + 1, size=n)
        windows = np.lib.stride_tricks.sliding_window_view(batch, (h, w), axis=(2, 3))
        return _returned(windows[np.arange(n), :, top, left], x)
        ### END SOLUTION

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"

# %% [markdown]
# Test 08.10.

# %%
image = np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4)
assert np.array_equal(RandomCrop(4)(image), image), "a crop of the whole image is the image"
crop = RandomCrop((2, 3))(tt.Tensor(image))
assert isinstance(crop, tt.Tensor) and crop.shape == (1, 2, 3) and crop.dtype == np.float32
windows = {(top, left): image[0, top:top + 2, left:left + 3] for top in range(3) for left in range(2)}
assert any(np.array_equal(crop.numpy()[0], window) for window in windows.values())
tt.manual_seed(0)
shifted = RandomCrop(4, padding=1)(np.repeat(image[None], 500, axis=0))
assert shifted.shape == (500, 1, 4, 4)
corner = shifted[:, 0, 0, 0]                      # 0 when the window starts in the padding
assert 0.0 in corner and 1.0 in corner and 6.0 in corner, "the windows start at every place"
tt.manual_seed(0)
assert np.array_equal(RandomCrop(4, padding=1)(np.repeat(image[None], 500, axis=0)), shifted)
try:
    RandomCrop(5)(image)
    raise AssertionError("a crop larger than the image must raise")
except ValueError as error:
    print("ValueError:", error)

augment = Compose([RandomCrop(4, padding=1), RandomHorizontalFlip(), Normalize((8.5,), (4.6,))])
print(augment)
out = augment(np.repeat(image[None], 8, axis=0))
assert out.shape == (8, 1, 4, 4) and out.dtype == np.float32

# %% [markdown]
# ## The shipped data (given)
#
# The course ships four data sets in the `datasets/` folder of your checkout (see its `README.md`):
# 10,000 training and 2,000 test images of MNIST and of Fashion-MNIST, the 1,797 8x8 digits of the UCI
# set behind scikit-learn's `load_digits`, and the complete works of Shakespeare. The loaders below are
# given; they follow torchvision's: `MNIST(root=None, train=True, transform=None, target_transform=None)`
# is a `Dataset` whose items are `(image, label)`, with the image as torchvision gives it after its
# `ToTensor()`: a float32 Tensor of shape `(1, 28, 28)` with values in `[0, 1]`, and the label a Python
# int. The raw arrays are there too, as in torchvision: `data` (uint8 `(N, 28, 28)`) and `targets`
# (int64 `(N,)`), for the vectorised path.
#
# **Finding the files.** `root` names the folder that holds the file; when it is `None`, the
# environment variable `TINYTORCH_DATA` does; when that is not set, the loader looks for a folder
# named `datasets` holding the course's files in the working directory and in each folder above it, so
# a notebook anywhere in your checkout finds it, and last in the checkout the course's `tito` runs from
# (found with `importlib.util.find_spec`, without importing it: the package never needs tito). <!-- course In
# the nbgrader course the files are the instructor's copy in the course's `datasets/` folder: the notebook's
# first cell sets `TINYTORCH_DATA` to the folder your `~/.jupyter/nbgrader_config.py` names. -->
#
# **Checking them.** A file that is cut short or changed would give wrong results without an error:
# a model that trains worse, a text with gaps. Each file's SHA-256 checksum (a 64-digit fingerprint
# that any change to the file changes) is written below, the same as in `datasets/README.md`, and the
# loader compares it before reading anything. A missing file raises `FileNotFoundError` and a corrupt
# one `RuntimeError` (torchvision's type for "Dataset not found or corrupted"), both naming the file
# and saying how to restore it.

# %%
#| export datasets
_CHECKSUMS = {  # sha256 of the files in datasets/, as in datasets/README.md
    "mnist_10k_2k.npz": "1541ae7e489cd0e5335d3d9a7768245b29297e0b851104bfc571c813725e679b",
    "fashion_mnist_10k_2k.npz": "009dc909d6914f083fba08e5fd702ecb398ce07d2710ca2194130aea5eedb6e1",
    "digits.csv.gz": "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
    "shakespeare_complete.txt.gz": "b171b7e9eabeec9c8ca962b53bed01d1d3ac6b473050631f077bb3caa9f5a00b",
}
_RESTORE = ("restore it with `git checkout -- datasets/` in your checkout of the course (in the nbgrader course: ask "
            "your instructor to run `tito course init` again, which restores the course's datasets/)")


def _datasets_folder(name: str) -> Path:
    """The nearest folder named `datasets` holding any of the course's files, from the working directory up;
    else the one of the checkout the course's `tito` runs from (found without importing it)."""
    here = Path.cwd().resolve()
    tito = importlib.util.find_spec("tito")
    checkout = [Path(tito.origin).resolve().parents[1]] if tito is not None and tito.origin else []
    for folder in (here, *here.parents, *checkout):
        candidate = folder / "datasets"
        if candidate.is_dir() and any((candidate / known).is_file() for known in _CHECKSUMS):
            return candidate
    raise FileNotFoundError(f"found no datasets/ folder holding {name} in {here} or any folder above it. In the "
                            "nbgrader course: copy the course's student_nbgrader_config.py to "
                            "~/.jupyter/nbgrader_config.py again (it names the course's datasets/), then run this "
                            "notebook's first cell (use_my_modules) again. In a checkout of the course: run from "
                            f"inside it. Or pass root= the folder that holds {name}, or set the environment variable "
                            "TINYTORCH_DATA to it")


def _data_file(name: str, root=None) -> Path:
    """The path of the shipped file `name` in root (else $TINYTORCH_DATA, else the nearest datasets/ folder),
    after its sha256 matched."""
    if root is None:
        root = os.environ.get("TINYTORCH_DATA") or _datasets_folder(name)
    path = Path(root) / name
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {_RESTORE}, or pass root= the folder that holds {name}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != _CHECKSUMS[name]:
        raise RuntimeError(f"{path} is corrupt: its sha256 is {digest[:12]}... but {name} has "
                           f"{_CHECKSUMS[name][:12]}... (datasets/README.md); {_RESTORE}")
    return path


class _Images(Dataset):
    """Images (N, H, W) in `data` with int64 labels in `targets`; items (image (1, H, W) float32 in [0, 1], int)."""
    scale = 255.0

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index):
        image = Tensor(self.data[index][None] / np.float32(self.scale))
        target = int(self.targets[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} images of shape {self.data.shape[1:]}, {self.split})"


class MNIST(_Images):
    """MNIST handwritten digits shipped with the course: 10,000 training or 2,000 test images, 28x28."""
    file = "mnist_10k_2k.npz"
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root=None, train: bool = True, transform=None, target_transform=None):
        self.split = "train" if train else "test"
        with np.load(_data_file(self.file, root), allow_pickle=False) as data:
            self.data, self.targets = data[f"x_{self.split}"], data[f"y_{self.split}"].astype(np.int64)
        self.transform, self.target_transform = transform, target_transform


class FashionMNIST(MNIST):
    """Fashion-MNIST clothing images shipped with the course: 10,000 training or 2,000 test images, 28x28."""
    file = "fashion_mnist_10k_2k.npz"
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]


class Digits(_Images):
    """The 1,797 UCI digits of 8x8 pixels in 0..16 (scikit-learn's load_digits); no split: make your own."""
    scale = 16.0
    classes = [str(digit) for digit in range(10)]

    def __init__(self, root=None, transform=None, target_transform=None):
        self.split = "all"
        with gzip.open(_data_file("digits.csv.gz", root), "rt") as stream:
            table = np.loadtxt(stream, delimiter=",", dtype=np.float64)
        self.data = table[:, :64].astype(np.uint8).reshape(-1, 8, 8)
        self.targets = table[:, 64].astype(np.int64)
        self.transform, self.target_transform = transform, target_transform


def shakespeare(root=None) -> str:
    """The complete works of Shakespeare shipped with the course, as one str of 5,057,280 ASCII characters."""
    with gzip.open(_data_file("shakespeare_complete.txt.gz", root), "rt", encoding="ascii") as stream:
        return stream.read()

# %% [markdown]
# The errors, tried on a folder of our own: an empty one (the file is missing) and one holding a file
# of the right name with the wrong contents.

# %%
with tempfile.TemporaryDirectory() as folder:
    try:
        MNIST(root=folder)
        raise AssertionError("a missing file must raise")
    except FileNotFoundError as error:
        print("FileNotFoundError:", error)
        assert "mnist_10k_2k.npz" in str(error)
    with open(os.path.join(folder, "digits.csv.gz"), "wb") as file:
        file.write(b"not the digits")
    try:
        Digits(root=folder)
        raise AssertionError("a corrupt file must raise")
    except RuntimeError as error:
        print("RuntimeError:", error)
        assert "digits.csv.gz" in str(error) and "corrupt" in str(error)

# %% [markdown]
# ## The real data, and what batching buys
#
# The cells from here on read the files in `datasets/`; the measurement of samples per second takes
# about five seconds, the others under one (measured on two shared, busy cores). First a look at
# Fashion-MNIST, eight training images as they are and the same eight through an augmentation
# pipeline (a shift of up to three pixels and a mirror image half of the time; a pullover mirrored is
# still a pullover).

# %% tags=["learner-only"]
import matplotlib.pyplot as plt

fashion = FashionMNIST(train=True)
print(fashion, "first item:", fashion[0][0].shape, fashion[0][0].dtype, fashion[0][1])
images, labels = next(iter(DataLoader(fashion, batch_size=8)))
tt.manual_seed(0)
augmented = Compose([RandomCrop(28, padding=3), RandomHorizontalFlip()])(images)
figure, axes = plt.subplots(2, 8, figsize=(12, 3.4))
for column in range(8):
    for row, batch in enumerate((images, augmented)):
        axes[row, column].imshow(batch.numpy()[column, 0], cmap="gray_r")
        axes[row, column].axis("off")
    axes[0, column].set_title(FashionMNIST.classes[labels.numpy()[column]], fontsize=8)
figure.suptitle("Fashion-MNIST: as stored (top), augmented (bottom)")
plt.show()

# %% [markdown]
# ### Samples per second
#
# Now the measurement the module began with. For each batch size from 1 to 512, time how many MNIST
# samples per second go through (a) the loader alone (fetching and collating) and (b) the loader and a
# training step of a small MLP (forward, loss, backward, Adam). Each measurement runs for about a
# quarter of a second. Matrix products run on one thread, as in 07.
#
# What to expect: the loader's rate grows with the batch size and levels off, since fetching one item
# costs the same whatever the batch (a Python call per item), and only the per-batch work is shared.
# The training step's rate grows by a factor of thirty to eighty (measured on two cores: 1,250 to 1,600
# samples per second at batch size 1; at 512, 104,000 with nothing else running and 38,000 to 55,000 when
# the cores were shared): a step costs hundreds of microseconds of Python and numpy overhead whatever the
# batch size, so at batch size 1 almost all the time is overhead, and
# at 512 most of it is arithmetic. Past a few hundred samples the
# arithmetic dominates and larger batches buy little more speed; they do change the optimisation
# (fewer, less noisy steps per epoch), which is why batch sizes of 32 to 256 are the usual choice.

# %% tags=["learner-only"]
from threadpoolctl import threadpool_limits

mnist = MNIST(train=True)


def samples_per_second(loader, step=None, seconds=0.25):
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for images, labels in loader:
            if step is not None:
                step(images, labels)
            count += len(labels)
            if time.perf_counter() - start >= seconds:
                break
    return count / (time.perf_counter() - start)


def training_step(images, labels):
    optimizer.zero_grad()
    loss_fn(model(images.reshape(len(labels), 784)), labels).backward()
    optimizer.step()


tt.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer, loss_fn = optim.Adam(model.parameters(), lr=1e-3), nn.CrossEntropyLoss()
sizes = [2 ** k for k in range(10)]
rates = {"loader alone": [], "loader + training step": []}
with threadpool_limits(limits=1):
    for size in sizes:
        loader = DataLoader(mnist, batch_size=size, shuffle=True)
        rates["loader alone"].append(samples_per_second(loader))
        rates["loader + training step"].append(samples_per_second(loader, training_step))
        print(f"batch size {size:3d}: " + ", ".join(f"{what} {rate[-1]:9,.0f} samples/s"
                                                     for what, rate in rates.items()))

figure, axis = plt.subplots(figsize=(6.5, 4))
for what, rate in rates.items():
    axis.loglog(sizes, rate, "o-", base=2, label=what)
axis.set(xlabel="batch size", ylabel="samples per second", title="MNIST through the DataLoader")
axis.legend()
plt.show()

# %% [markdown]
# The loader fetches one item at a time, so at large batch sizes it becomes the bottleneck of the
# training step. When all the data is in memory anyway, a batch can be fetched with one indexing
# operation instead: `mnist.data[indices]` takes 512 images at once. The loop below does that with the
# batch sampler you wrote (the order and the batches are the loader's; only the fetching is
# vectorised), then normalises the whole batch with one call of your `Normalize`, and trains for two
# epochs. This is the pattern 09 uses for speed.

# %% tags=["learner-only"]
normalize = Normalize((0.1307,), (0.3081,))
tt.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = optim.Adam(model.parameters(), lr=1e-3)
batch_sampler = BatchSampler(RandomSampler(mnist), batch_size=128, drop_last=False)
start = time.perf_counter()
with threadpool_limits(limits=1):
    for _ in range(2):
        for indices in batch_sampler:
            images = normalize(mnist.data[indices][:, None] / np.float32(255))
            training_step(tt.Tensor(images), tt.Tensor(mnist.targets[indices]))
test = MNIST(train=False)
with tt.no_grad():
    logits = model(tt.Tensor(normalize(test.data[:, None] / np.float32(255)).reshape(len(test), 784)))
accuracy = np.mean(np.argmax(logits.numpy(), axis=1) == test.targets)
print(f"2 epochs in {time.perf_counter() - start:.1f} s, test accuracy {100 * accuracy:.1f}%")

# %% [markdown]
# ## What you built, and what comes next
#
# The data side of training, in PyTorch's shape: datasets that know their length and their items, a
# collate function that stacks any structure of arrays into tensors (and says which item does not
# fit), samplers that decide the order of each epoch from a seedable generator, a loader that puts
# them together, and augmentations that treat a whole batch at once while drawing a different shift or
# mirror for every image. The loaders of the shipped data refuse a file that is not exactly the one the
# course was made with.
#
# Module 09 builds the layers that know images are grids: convolution and pooling. Its milestone, a
# convolutional network on MNIST and Fashion-MNIST, reads its data with `MNIST` and `FashionMNIST`, in
# shuffled batches from a `DataLoader` (or a `BatchSampler` over the arrays, as above), normalised with
# `Normalize((0.1307,), (0.3081,))` and augmented with `RandomCrop(28, padding=2)`: a CNN that has seen
# every digit shifted a little generalises better than one that has seen each digit in one place.
