"""Hidden suite of 08_dataloader: TensorDataset, default_collate, the samplers, the DataLoader and the
transforms Normalize, RandomHorizontalFlip and RandomCrop.

Deterministic results (items, collated batches, batches in order, normalised images) are compared with
numpy. Random ones (shuffled epochs, flips, crops) come back raw, every order and every image, and the
verdict decides: each epoch a permutation, the same under the same seed and another under another seed,
each output image the input or its mirror, or a window of the padded input, the places spread over every
position; what takes a generator draws from it alone, and from tt's default generator without one (one family,
each variant worth its task's points). A collated result travels as plain data (`_plain`): each Tensor as its
dtype and values, each container as its type and parts. The datasets are plain classes of the suite with `__len__` and
`__getitem__` (duck typing, as PyTorch allows), so that a loader check needs no TensorDataset; the shipped
data files are never read here (the given loaders are tested by the project's own tests).
"""

import collections
import math
import re

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    arrays,
    assert_close,
    capture_error,
    check,
    expect_error,
    expect_generator_draws,
    expect_unchanged,
    generator_draws,
    held,
    unchanged_then_expected,
)

# ---------------------------------------------------------------------------------------------------
# compute helpers (they travel to the sandbox and reveal no answer)

Pair = collections.namedtuple("Pair", ["image", "label"])


def _plain(tt, value):
    """A collated result as plain data: a Tensor as its dtype and values, a container as its type and parts."""
    if isinstance(value, tt.Tensor):
        return {"Tensor of dtype": str(value.dtype), "values": np.asarray(value.numpy())}
    if isinstance(value, dict):
        return {"dict": {str(key): _plain(tt, part) for key, part in value.items()}}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [_plain(tt, part) for part in value]}
    if isinstance(value, str):
        return value
    return {"a " + type(value).__name__: repr(value)[:60]}


def _items(case):
    """The items of a collation case, made in the box: Python numbers, numpy arrays or scalars, Tensors."""
    kind, items = case["kind"], case["items"]
    if kind == "numpy scalars":
        return [np.dtype(case["dtype"]).type(item) for item in items]
    return list(items)


class _Rows:
    """A dataset of (x[i], int(y[i])) that logs every index it is asked for."""

    def __init__(self, x, y):
        self.x, self.y, self.asked = x, y, []

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        self.asked.append(int(index))
        return self.x[index], int(self.y[index])


class _Labels:
    """n items, item i being the int i: a loader over it yields the order of the epoch; logs the indices asked for."""

    def __init__(self, n):
        self.n, self.asked = n, []

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        self.asked.append(int(index))
        return int(index)


class _Counting:
    """A sampler of the indices 0..n-1 in order that counts how many it has yielded so far."""

    def __init__(self, n):
        self.n, self.given = n, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        for index in range(self.n):
            self.given += 1
            yield index


class _Orders:
    """A sampler yielding a given order per epoch, in turn; counts how often it was iterated."""

    def __init__(self, orders):
        self.orders, self.passes = orders, 0

    def __iter__(self):
        self.passes += 1
        return iter(self.orders[(self.passes - 1) % len(self.orders)])

    def __len__(self):
        return len(self.orders[0])


def _order(loader):
    return [int(index) for batch in loader for index in np.asarray(batch).reshape(-1)]


def _given(tt, array, form):
    return tt.Tensor(array) if form == "Tensor" else array


def _back(tt, output):
    """A transform's output: its type and a copy of its array."""
    return {"type": type(output).__name__, "array": np.array(output.numpy() if isinstance(output, tt.Tensor)
                                                                else output)}


class _Counted:
    """A sampler of n indices that only tells how many (n beyond 2**53): len() needs no index made."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(())


# ---------------------------------------------------------------------------------------------------
# the judge's side: strategies, numpy references and words


def _tensor(array):
    array = np.asarray(array)
    return {"Tensor of dtype": str(array.dtype), "values": array}


def _is_permutation(order, n):
    return sorted(order) == list(range(n))


def _fail(sentence):
    raise CheckFailed(sentence, sentence)


# ---------------------------------------------------------------------------------------------------
# 08.1 TensorDataset

_DTYPES = [np.float32, np.float64, np.int64, np.uint8]


@st.composite
def _tensors(draw):
    n, count = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    parts = []
    for _ in range(count):
        dtype = draw(st.sampled_from(_DTYPES))
        tail = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
        parts.append(draw(arrays((n,) + tail, dtype, 0, 100)))
    return {"tensors": parts, "forms": [draw(st.sampled_from(["array", "Tensor"])) for _ in parts]}


def _shapes(case):
    return ", ".join(f"{form} {t.shape}" for t, form in zip(case["tensors"], case["forms"]))


@check(task="08.1", points=2, inputs=_tensors(), dtype=True,
       describe=lambda case: f"TensorDataset({_shapes(case)}): len(), every item and item -1")
def tensor_dataset_items_are_tuples_of_rows(tt, case):
    given = [_given(tt, t, form) for t, form in zip(case["tensors"], case["forms"])]
    dataset = tt.utils.data.TensorDataset(*given)
    items = {f"item {i}": dataset[i] for i in [*range(len(case["tensors"][0])), -1]}
    return {"result": {"len": len(dataset), **{key: {type(item).__name__: [_plain(tt, part) for part in item]}
                                                   for key, item in items.items()}},
            "afterwards": {f"tensor {k}": held(tt, t) for k, t in enumerate(given)}}


def _tensor_dataset_items(case):
    n = len(case["tensors"][0])
    return {"len": n, **{f"item {i}": {"tuple": [_tensor(t[i]) for t in case["tensors"]]} for i in [*range(n), -1]}}


unchanged_then_expected(tensor_dataset_items_are_tuples_of_rows, _tensor_dataset_items,
                        lambda case: {f"tensor {k}": t for k, t in enumerate(case["tensors"])},
                        "keep the tensors as they were given (as_tensor keeps an array's memory: never write into it)")


_MISMATCHED = st.one_of(  # first sizes that differ, or tensors with no axis (no first size to compare)
    st.tuples(st.integers(1, 5), st.integers(1, 5)).filter(lambda pair: pair[0] != pair[1]).map(
        lambda pair: [(pair[0], 2), (pair[1],)]), st.sampled_from([[()], [(), ()]]))


def _mismatched_words(case):
    return "TensorDataset(" + ", ".join(f"an array of shape {shape}" for shape in case["shapes"]) + ")"


@check(task="08.1", points=1, guard=True, inputs=_MISMATCHED.map(lambda shapes: {"shapes": shapes}),
       describe=_mismatched_words)
def tensor_dataset_with_mismatched_sizes_raises(tt, case):
    arrays_given = [np.zeros(shape, np.float32) for shape in case["shapes"]]
    return capture_error(lambda: tt.utils.data.TensorDataset(*arrays_given))


tensor_dataset_with_mismatched_sizes_raises.verdict(lambda case, output: expect_error(
    _mismatched_words(case) + (" (a 0-d tensor has no first axis: no items)" if case["shapes"][0] == () else ""),
    output, "ValueError"))


@check(task="08.1", points=1, inputs=st.fixed_dictionaries({"x": arrays((4, 2), np.float32, -5, 5)}),
       describe=lambda case: "item = TensorDataset(a)[1][0] for an ndarray a of shape (4, 2), then a[1] += 1: item")
def tensor_dataset_keeps_the_memory_of_an_array(tt, case):
    given = case["x"].copy()
    item = tt.utils.data.TensorDataset(given)[1][0]
    given[1] += 1
    return np.asarray(item.numpy())


@tensor_dataset_keeps_the_memory_of_an_array.verdict
def _(case, output):
    what = "TensorDataset(a)[1][0] for an ndarray a of shape (4, 2), then a[1] += 1"
    if np.shape(output) == (2,) and np.array_equal(output, case["x"][1]):
        _fail(f"{what}: the item did not see a[1] += 1, it is a copy; keep each array with as_tensor (it keeps an "
              f"array's memory, as the notebook asks), never Tensor(np.array(a))")
    assert_close(output, case["x"][1] + 1, what=what)

# ---------------------------------------------------------------------------------------------------
# 08.2 default_collate: numbers, arrays and Tensors


def _leaves(kind, values, dtype=None):
    return st.integers(1, 6).flatmap(lambda n: st.lists(values, min_size=n, max_size=n)).map(
        lambda items: {"kind": kind, "items": items, "dtype": dtype})


@st.composite
def _array_items(draw, kind):
    n, dtype = draw(st.integers(1, 5)), draw(st.sampled_from(_DTYPES))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 3))))
    return {"kind": kind, "items": [draw(arrays(shape, dtype, 0, 50)) for _ in range(n)], "dtype": str(np.dtype(dtype))}


_floats = st.floats(-100, 100, allow_nan=False, width=32)
COLLATE_LEAVES = {
    "Python ints": ("08.2", 1, _leaves("Python ints", st.integers(-1000, 1000))),
    "Python floats, or ints and floats mixed": ("08.2", 1, _leaves("Python floats", st.one_of(_floats, st.integers(
        -5, 5))).filter(lambda case: any(isinstance(v, float) for v in case["items"]))),
    "Python bools": ("08.2", 1, _leaves("Python bools", st.booleans())),
    "numpy scalars": ("08.2", 1, st.sampled_from(["uint8", "int32", "float64", "float32"]).flatmap(
        lambda dtype: _leaves("numpy scalars", st.integers(0, 200), dtype))),
    "numpy arrays": ("08.2", 1, _array_items("numpy arrays")),
    "Tensors": ("08.2", 1, _array_items("Tensors")),
}


def _collated_leaves(case):
    kind, items = case["kind"], case["items"]
    if kind == "Python ints":
        return np.array(items, dtype=np.int64)
    if kind == "Python floats":
        return np.array(items, dtype=np.float64).astype(np.float32)
    if kind == "Python bools":
        return np.array(items, dtype=np.bool_)
    if kind == "numpy scalars":
        return np.array(items).astype(case["dtype"])
    return np.stack(items)


@check(dtype=True, variants=COLLATE_LEAVES,
       describe=lambda case: f"default_collate(a list of {len(case['items'])} {case['kind']}"
                             + (f" of dtype {case['dtype']}" if case["dtype"] else "")
                             + (f" of shape {np.shape(case['items'][0])}" if case["kind"] in ("numpy arrays", "Tensors")
                                else f": {case['items']!r:.60}") + ")")
def default_collate_stacks_numbers_arrays_and_tensors(tt, case):
    items = _items(case)
    if case["kind"] == "Tensors":
        items = [tt.Tensor(item) for item in items]
    return {"result": _plain(tt, tt.utils.data.default_collate(items)), "afterwards": {"the batch": held(tt, items)}}


_COLLATE_ADVICE = ("build the batch in new containers and leave the list of items, and every item, as it was given "
                   "(the items are the dataset's own)")
unchanged_then_expected(default_collate_stacks_numbers_arrays_and_tensors, lambda case: _tensor(_collated_leaves(case)),
                        lambda case: {"the batch": _items(case)}, _COLLATE_ADVICE)


@st.composite
def _ragged(draw):
    """Items of shape `first` up to `index`, then one of another shape, then any of the two."""
    first = tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, 2))))
    other = draw(st.tuples(*[st.integers(1, 4) for _ in range(draw(st.integers(1, 3)))]).filter(
        lambda shape: shape != first))
    index, after = draw(st.integers(1, 4)), draw(st.lists(st.booleans(), max_size=3))
    return {"shapes": [first] * index + [other] + [other if flag else first for flag in after], "index": index,
            "as": draw(st.sampled_from(["array", "Tensor"]))}


@check(task="08.2", points=2, inputs=_ragged(),
       describe=lambda case: f"default_collate(a list of {case['as']}s of shapes {case['shapes']})")
def default_collate_with_items_of_different_shapes_raises(tt, case):
    items = [_given(tt, np.zeros(shape, np.float32), case["as"]) for shape in case["shapes"]]
    return capture_error(lambda: tt.utils.data.default_collate(items))


@default_collate_with_items_of_different_shapes_raises.verdict
def _(case, output):
    what = f"default_collate(a list of {case['as']}s of shapes {case['shapes']})"
    expect_error(what, output, "RuntimeError")
    first, other, index = case["shapes"][0], case["shapes"][case["index"]], case["index"]
    message = output["message"]
    for shape in (first, other):
        if str(shape) not in message:
            _fail(f"{what}: the RuntimeError's message {message!r:.160} should name the shape {shape}")
    rest = message.replace(str(first), " ").replace(str(other), " ")
    if not re.search(rf"(?<![\d.]){index}(?![\d.])", rest):
        _fail(f"{what}: the RuntimeError's message {message!r:.160} should name item {index}, the first whose "
              f"shape differs from item 0's")

# ---------------------------------------------------------------------------------------------------
# 08.3 default_collate: tuples, lists and dicts


@st.composite
def _structured(draw, form):
    n, dim = draw(st.integers(1, 4)), draw(st.integers(1, 3))
    images = [draw(arrays((1, dim), np.float32, -5, 5)) for _ in range(n)]
    labels = [draw(st.integers(0, 9)) for _ in range(n)]
    return {"form": form, "images": images, "labels": labels, "weights": [draw(_floats) for _ in range(n)]}


def _structured_items(case):
    """The items of a structured case (the same in the box and on the judge's side: no answer in it)."""
    rows = zip(case["images"], case["labels"], case["weights"])
    form = case["form"]
    if form == "tuples":
        return [(image, label) for image, label, _ in rows]
    if form == "lists":
        return [[image, label, weight] for image, label, weight in rows]
    if form == "dicts":
        return [{"image": image, "label": label} for image, label, _ in rows]
    if form == "named tuples":
        return [Pair(image, label) for image, label, _ in rows]
    if form == "tuples holding strings":
        return [(image, f"item {label}", {"name": f"n{label}"}) for image, label, _ in rows]
    return [{"pair": (image, label), "weight": weight} for image, label, weight in rows]


def _images_labels(case):
    return [_tensor(np.stack(case["images"])), _tensor(np.array(case["labels"], dtype=np.int64))]


def _collated_structure(case):
    form, (images, labels) = case["form"], _images_labels(case)
    weights = _tensor(np.array(case["weights"], dtype=np.float64).astype(np.float32))
    if form == "tuples":
        return {"list": [images, labels]}
    if form == "lists":
        return {"list": [images, labels, weights]}
    if form == "dicts":
        return {"dict": {"image": images, "label": labels}}
    if form == "named tuples":
        return {"Pair": [images, labels]}
    if form == "tuples holding strings":  # as PyTorch: a tuple (zip's) for a position of tuples, a list for a key
        return {"list": [images, {"tuple": [f"item {label}" for label in case["labels"]]},
                         {"dict": {"name": {"list": [f"n{label}" for label in case["labels"]]}}}]}
    return {"dict": {"pair": {"list": [images, labels]}, "weight": weights}}


COLLATE_STRUCTURES = {
    "(image, label) tuples": ("08.3", 1, _structured("tuples")),
    "[image, label, weight] lists": ("08.3", 1, _structured("lists")),
    "{'image', 'label'} dicts": ("08.3", 1, _structured("dicts")),
    "named tuples Pair(image, label)": ("08.3", 1, _structured("named tuples")),
    "dicts holding a tuple": ("08.3", 1, _structured("nested")),
    "(image, name, {'name'}) tuples holding strings": ("08.3", 1, _structured("tuples holding strings")),
}


@check(dtype=True, variants=COLLATE_STRUCTURES,
       describe=lambda case: f"default_collate(a list of {len(case['labels'])} items as {case['form']}, images of "
                             f"shape {case['images'][0].shape} float32, int labels)")
def default_collate_collates_position_by_position(tt, case):
    items = _structured_items(case)
    return {"result": _plain(tt, tt.utils.data.default_collate(items)), "afterwards": {"the batch": held(tt, items)}}


@default_collate_collates_position_by_position.verdict
def _(case, output):
    first = default_collate_collates_position_by_position.checks[0]
    what = first.what(case)
    expect_unchanged(what, {"the batch": _structured_items(case)}, output["afterwards"], _COLLATE_ADVICE)
    parts = output["result"].get("list") if isinstance(output["result"], dict) else None
    names = [f"item {label}" for label in case["labels"]]
    if case["form"] == "tuples holding strings" and isinstance(parts, list) and len(parts) == 3 \
            and parts[1] != {"tuple": names}:
        _fail(f"{what}: position 1 (the strings) came back as {parts[1]!r:.100}; PyTorch gives the tuple "
              f"{tuple(names)!r:.100}: a batch of strings is returned as it is, and a column of zip(*batch) is a "
              f"tuple, so pass each column to default_collate as zip gives it")
    assert_close(output["result"], _collated_structure(case), what=what, rtol=first.rtol, atol=first.atol,
                 exact_dtype=first.dtype)


@check(task="08.3", points=1, guard=True, inputs=st.tuples(st.integers(1, 3), st.integers(2, 4)).filter(
           lambda pair: pair[0] != pair[1]).map(lambda pair: {"lengths": pair}),
       describe=lambda case: f"default_collate([a tuple of {case['lengths'][0]} ints, a tuple of "
                             f"{case['lengths'][1]} ints])")
def default_collate_with_items_of_different_lengths_raises(tt, case):
    first, second = case["lengths"]
    return capture_error(lambda: tt.utils.data.default_collate([tuple(range(first)), tuple(range(second))]))


default_collate_with_items_of_different_lengths_raises.verdict(lambda case, output: expect_error(
    f"default_collate([a tuple of {case['lengths'][0]} ints, a tuple of {case['lengths'][1]} ints])", output,
    "RuntimeError"))

# ---------------------------------------------------------------------------------------------------
# 08.4 RandomSampler

_seeded = st.fixed_dictionaries({"n": st.integers(8, 30), "seed": st.integers(0, 2 ** 16)})


@check(task="08.4", points=1, inputs=_seeded,
       describe=lambda case: f"three epochs of RandomSampler(range({case['n']})) after tt.manual_seed({case['seed']})")
def random_sampler_yields_a_new_permutation_each_epoch(tt, case):
    sampler = tt.utils.data.RandomSampler(range(case["n"]))
    tt.manual_seed(case["seed"])
    epochs = [list(sampler) for _ in range(3)]
    return {"epochs": [[int(i) for i in epoch] for epoch in epochs],
            "types of the indices": sorted({type(i).__name__ for epoch in epochs for i in epoch})}


@random_sampler_yields_a_new_permutation_each_epoch.verdict
def _(case, output):
    what = f"RandomSampler(range({case['n']})) after tt.manual_seed({case['seed']})"
    epochs = output["epochs"]
    for number, epoch in enumerate(epochs, start=1):
        if not _is_permutation(epoch, case["n"]):
            _fail(f"{what}: epoch {number} yielded {epoch!r:.120}, not every index 0..{case['n'] - 1} exactly once")
    if output["types of the indices"] != ["int"]:
        _fail(f"{what}: the indices must be Python ints, got {output['types of the indices']}")
    if epochs[0] == epochs[1] or epochs[1] == epochs[2]:
        _fail(f"{what}: two successive epochs came in the same order {epochs[1]!r:.120}; each iteration must draw "
              f"a new permutation")


# ---------------------------------------------------------------------------------------------------
# 08.5 BatchSampler


@st.composite
def _batching(draw):
    n = draw(st.integers(0, 25))
    return {"order": draw(st.permutations(list(range(n)))), "batch_size": draw(st.integers(1, 8)),
            "drop_last": draw(st.booleans()), "as": draw(st.sampled_from(["int", "np.int64"]))}


def _chunks(order, size, drop_last):
    chunks = [list(order[start:start + size]) for start in range(0, len(order), size)]
    return chunks[:-1] if chunks and drop_last and len(chunks[-1]) < size else chunks


def _batching_words(case):
    size = case["batch_size"] if case["as"] == "int" else f"np.int64({case['batch_size']})"
    return f"BatchSampler(a sampler yielding {len(case['order'])} indices, {size}, drop_last={case['drop_last']})"


@check(task="08.5", points=2, inputs=_batching(), describe=lambda case: f"list({_batching_words(case)})")
def batch_sampler_groups_the_indices_in_order(tt, case):
    size = case["batch_size"] if case["as"] == "int" else np.int64(case["batch_size"])
    batches = tt.utils.data.BatchSampler(_Orders([case["order"]]), size, case["drop_last"])
    return {"batches": [[int(i) for i in batch] for batch in batches],
            "types of the batches": sorted({type(batch).__name__ for batch in batches})}


batch_sampler_groups_the_indices_in_order.expected(lambda case: {
    "batches": _chunks(case["order"], case["batch_size"], case["drop_last"]),
    "types of the batches": ["list"] if _chunks(case["order"], case["batch_size"], case["drop_last"]) else []})


@check(task="08.5", points=1, inputs=_batching(), describe=lambda case: f"len({_batching_words(case)})")
def batch_sampler_len_counts_the_batches(tt, case):
    size = case["batch_size"] if case["as"] == "int" else np.int64(case["batch_size"])
    return len(tt.utils.data.BatchSampler(_Orders([case["order"]]), size, case["drop_last"]))


batch_sampler_len_counts_the_batches.expected(
    lambda case: len(_chunks(case["order"], case["batch_size"], case["drop_last"])))


def _float_count(n, batch_size, drop_last):
    """The number of batches computed through a float, as math.ceil(n / b) and math.floor(n / b) do."""
    return math.floor(n / batch_size) if drop_last else math.ceil(n / batch_size)


def _exact_count(n, batch_size, drop_last):
    return n // batch_size if drop_last else -(-n // batch_size)


_huge = st.fixed_dictionaries({"n": st.integers(2 ** 53, 2 ** 62), "batch_size": st.integers(1, 64),
                               "drop_last": st.booleans()}).filter(
    lambda case: _float_count(case["n"], case["batch_size"], case["drop_last"]) != _exact_count(**case))


def _expect_exact_count(what, case, output):
    right = _exact_count(**case)
    if output != right and output == _float_count(**case):
        _fail(f"{what}: expected {right} but got {output!r:.40}; count the batches with integers (n // batch_size, "
              f"and -(-n // batch_size) for the ceiling), not math.ceil(n / batch_size): a float holds 53 bits and "
              f"rounds a count this large")
    if output != right:
        _fail(f"{what}: expected {right} but got {output!r:.40}" + (", the number of items" if output == case["n"]
              else "") + "; len() is the number of batches, ceil(n / batch_size) (floor with drop_last)")


@check(task="08.5", points=1, inputs=_huge,
       describe=lambda case: f"len(BatchSampler(a sampler whose len() is {case['n']}, {case['batch_size']}, "
                             f"drop_last={case['drop_last']}))")
def batch_sampler_len_is_exact_beyond_float_precision(tt, case):
    return len(tt.utils.data.BatchSampler(_Counted(case["n"]), case["batch_size"], case["drop_last"]))


batch_sampler_len_is_exact_beyond_float_precision.verdict(lambda case, output: _expect_exact_count(
    f"len(BatchSampler(a sampler whose len() is {case['n']}, {case['batch_size']}, drop_last={case['drop_last']}))",
    case, output))


@check(task="08.5", points=1, inputs=st.tuples(st.permutations(list(range(7))), st.permutations(list(range(7))),
                                               st.integers(2, 4)).map(
           lambda t: {"orders": [list(t[0]), list(t[1])], "batch_size": t[2]}),
       describe=lambda case: f"two epochs of BatchSampler(a sampler yielding {case['orders'][0]} and then "
                             f"{case['orders'][1]}, {case['batch_size']}, drop_last=False), and how often it "
                             f"iterated the sampler")
def batch_sampler_walks_the_sampler_once_per_epoch(tt, case):
    sampler = _Orders(case["orders"])
    batches = tt.utils.data.BatchSampler(sampler, case["batch_size"], False)
    epochs = [[[int(i) for i in batch] for batch in batches] for _ in range(2)]
    return {"epoch 1": epochs[0], "epoch 2": epochs[1], "passes over the sampler": sampler.passes}


batch_sampler_walks_the_sampler_once_per_epoch.expected(lambda case: {
    "epoch 1": _chunks(case["orders"][0], case["batch_size"], False),
    "epoch 2": _chunks(case["orders"][1], case["batch_size"], False), "passes over the sampler": 2})


@check(task="08.5", points=1, inputs=st.sampled_from(["0", "-3", "2.0", "True", "'4'"]).map(lambda v: {"size": v}),
       describe=lambda case: f"BatchSampler(range(10), batch_size={case['size']}, drop_last=False)")
def batch_sampler_with_a_bad_batch_size_raises(tt, case):
    size = {"0": 0, "-3": -3, "2.0": 2.0, "True": True, "'4'": "4"}[case["size"]]
    return capture_error(lambda: tt.utils.data.BatchSampler(range(10), size, False))


batch_sampler_with_a_bad_batch_size_raises.verdict(lambda case, output: expect_error(
    f"BatchSampler(range(10), batch_size={case['size']}, drop_last=False)", output, "ValueError",
    ("batch_size", "batch size")))

# ---------------------------------------------------------------------------------------------------
# 08.6 DataLoader: samplers and length

_sizes = st.fixed_dictionaries({"n": st.integers(0, 40), "batch_size": st.integers(1, 12),
                                "drop_last": st.booleans(), "shuffle": st.booleans()})


@check(task="08.6", points=1, inputs=_sizes,
       describe=lambda case: f"len(DataLoader(a dataset of {case['n']} items, batch_size={case['batch_size']}, "
                             f"shuffle={case['shuffle']}, drop_last={case['drop_last']}))")
def dataloader_len_counts_the_batches(tt, case):
    return len(tt.utils.data.DataLoader(_Labels(case["n"]), batch_size=case["batch_size"], shuffle=case["shuffle"],
                                        drop_last=case["drop_last"]))


dataloader_len_counts_the_batches.expected(lambda case: case["n"] // case["batch_size"] if case["drop_last"]
                                           else -(-case["n"] // case["batch_size"]))


@check(task="08.6", points=1, inputs=_huge,
       describe=lambda case: f"len(DataLoader(a dataset whose len() is {case['n']}, batch_size={case['batch_size']}, "
                             f"drop_last={case['drop_last']}))")
def dataloader_len_is_exact_beyond_float_precision(tt, case):
    return len(tt.utils.data.DataLoader(_Labels(case["n"]), batch_size=case["batch_size"], drop_last=case["drop_last"]))


dataloader_len_is_exact_beyond_float_precision.verdict(lambda case, output: _expect_exact_count(
    f"len(DataLoader(a dataset whose len() is {case['n']}, batch_size={case['batch_size']}, "
    f"drop_last={case['drop_last']}))", case, output))


@check(task="08.6", points=1, inputs=st.integers(1, 20).map(lambda n: {"n": n}),
       describe=lambda case: f"DataLoader(a dataset of {case['n']} items): its attributes by default, with shuffle="
                             f"True and generator=g, and with sampler=s and collate_fn=f")
def dataloader_keeps_its_pipeline(tt, case):
    data = tt.utils.data
    dataset, generator, sampler = _Labels(case["n"]), np.random.default_rng(0), _Orders([list(range(case["n"]))])

    def collate(items):
        return items
    plain = data.DataLoader(dataset)
    shuffled = data.DataLoader(dataset, batch_size=3, shuffle=True, drop_last=True, generator=generator)
    given = data.DataLoader(dataset, batch_size=2, sampler=sampler, collate_fn=collate)
    return {
        "default": {"type of sampler": type(plain.sampler).__name__, "dataset is the dataset": plain.dataset is dataset,
                    "batch_size": plain.batch_size, "drop_last": plain.drop_last, "generator is None":
                    plain.generator is None, "collate_fn is default_collate": plain.collate_fn is data.default_collate,
                    "type of batch_sampler": type(plain.batch_sampler).__name__},
        "shuffle=True, generator=g": {"type of sampler": type(shuffled.sampler).__name__,
                                      "sampler's generator is g": shuffled.sampler.generator is generator,
                                      "generator is g": shuffled.generator is generator,
                                      "batch_sampler.batch_size": shuffled.batch_sampler.batch_size,
                                      "batch_sampler.drop_last": shuffled.batch_sampler.drop_last,
                                      "batch_sampler.sampler is sampler":
                                          shuffled.batch_sampler.sampler is shuffled.sampler},
        "sampler=s, collate_fn=f": {"sampler is s": given.sampler is sampler, "collate_fn is f":
                                    given.collate_fn is collate, "batch_sampler.sampler is s":
                                    given.batch_sampler.sampler is sampler}}


dataloader_keeps_its_pipeline.expected(lambda case: {
    "default": {"type of sampler": "SequentialSampler", "dataset is the dataset": True, "batch_size": 1,
                "drop_last": False, "generator is None": True, "collate_fn is default_collate": True,
                "type of batch_sampler": "BatchSampler"},
    "shuffle=True, generator=g": {"type of sampler": "RandomSampler", "sampler's generator is g": True,
                                  "generator is g": True, "batch_sampler.batch_size": 3,
                                  "batch_sampler.drop_last": True, "batch_sampler.sampler is sampler": True},
    "sampler=s, collate_fn=f": {"sampler is s": True, "collate_fn is f": True, "batch_sampler.sampler is s": True}})


@check(task="08.6", points=1, guard=True, inputs=st.sampled_from(["shuffle=True, sampler=s", "batch_size=0"]).map(
           lambda how: {"how": how}),
       describe=lambda case: f"DataLoader(a dataset of 5 items, {case['how']})")
def dataloader_with_contradicting_options_raises(tt, case):
    dataset = _Labels(5)
    options = ({"shuffle": True, "sampler": tt.utils.data.SequentialSampler(dataset)}
               if case["how"].startswith("shuffle") else {"batch_size": 0})
    return capture_error(lambda: tt.utils.data.DataLoader(dataset, **options))


dataloader_with_contradicting_options_raises.verdict(lambda case, output: expect_error(
    f"DataLoader(a dataset of 5 items, {case['how']})", output, "ValueError"))

# ---------------------------------------------------------------------------------------------------
# 08.7 DataLoader: iteration


@st.composite
def _rows(draw):
    n, dim = draw(st.integers(1, 20)), draw(st.integers(1, 3))
    return {"x": draw(arrays((n, dim), np.float32, -5, 5)), "y": draw(arrays((n,), np.int64, 0, 9)),
            "batch_size": draw(st.integers(1, 8)), "drop_last": draw(st.booleans())}


def _rows_words(case):
    return (f"DataLoader(a dataset of {len(case['x'])} (row of {case['x'].shape[1]} float32, int label) items, "
            f"batch_size={case['batch_size']}, drop_last={case['drop_last']})")


@check(task="08.7", points=2, inputs=_rows(), dtype=True,
       describe=lambda case: f"the batches of {_rows_words(case)}, and the indices it asked the dataset for")
def dataloader_yields_collated_batches_in_order(tt, case):
    dataset = _Rows(case["x"], case["y"])
    loader = tt.utils.data.DataLoader(dataset, batch_size=case["batch_size"], drop_last=case["drop_last"])
    batches = [_plain(tt, batch) for batch in loader]
    return {"batches": batches, "indices asked for": list(dataset.asked)}


@dataloader_yields_collated_batches_in_order.expected
def _(case):
    chunks = _chunks(list(range(len(case["x"]))), case["batch_size"], case["drop_last"])
    return {"batches": [{"list": [_tensor(case["x"][chunk]), _tensor(case["y"][chunk])]} for chunk in chunks],
            "indices asked for": [i for chunk in chunks for i in chunk]}


_shuffled = st.fixed_dictionaries({"n": st.integers(8, 30), "batch_size": st.integers(1, 8),
                                   "drop_last": st.booleans(), "seed": st.integers(0, 2 ** 16)})


def _shuffled_words(case):
    return (f"DataLoader(a dataset of {case['n']} items, batch_size={case['batch_size']}, shuffle=True, "
            f"drop_last={case['drop_last']})")


@check(task="08.7", points=2, inputs=_shuffled,
       describe=lambda case: f"two epochs of {_shuffled_words(case)} after tt.manual_seed({case['seed']}), then one "
                             f"more after tt.manual_seed({case['seed']}) and one after "
                             f"tt.manual_seed({case['seed'] + 1})")
def dataloader_shuffled_visits_every_item_once_per_epoch(tt, case):
    loader = tt.utils.data.DataLoader(_Labels(case["n"]), batch_size=case["batch_size"], shuffle=True,
                                      drop_last=case["drop_last"])

    def epoch():
        return [[int(i) for i in np.asarray(batch.numpy()).reshape(-1)] for batch in loader]
    tt.manual_seed(case["seed"])
    first, second = epoch(), epoch()
    tt.manual_seed(case["seed"])
    again = epoch()
    tt.manual_seed(case["seed"] + 1)
    return {"epoch 1": first, "epoch 2": second, "epoch 1 again": again, "another seed": epoch()}


@dataloader_shuffled_visits_every_item_once_per_epoch.verdict
def _(case, output):
    n, size, what = case["n"], case["batch_size"], f"{_shuffled_words(case)} after tt.manual_seed({case['seed']})"
    sizes = [size] * (n // size) + ([n % size] if n % size and not case["drop_last"] else [])
    for name in ("epoch 1", "epoch 2", "another seed"):
        batches = output[name]
        if [len(b) for b in batches] != sizes:
            _fail(f"{what}: {name} gave batches of sizes {[len(b) for b in batches]}, expected {sizes}")
        seen = [i for b in batches for i in b]
        if len(set(seen)) != len(seen) or not set(seen) <= set(range(n)):
            _fail(f"{what}: {name} gave the items {seen!r:.120}; each item at most once per epoch")
        if not case["drop_last"] and sorted(seen) != list(range(n)):
            _fail(f"{what}: {name} gave the items {seen!r:.120}, not every item 0..{n - 1} exactly once")
    if output["epoch 1"] == output["epoch 2"]:
        _fail(f"{what}: two epochs came in the same order; each epoch must draw a new permutation")
    if output["epoch 1 again"] != output["epoch 1"]:
        _fail(f"{what}: the same seed gave two different first epochs; the order must come from tt's default "
              f"generator")
    if output["another seed"] == output["epoch 1"]:
        _fail(f"{what}: seeds {case['seed']} and {case['seed'] + 1} gave the same order")


@check(task="08.7", points=1, inputs=_rows(),
       describe=lambda case: f"{_rows_words(case)[:-1]}, collate_fn=f): what f received and what the loader yielded")
def dataloader_calls_collate_fn_on_each_list_of_items(tt, case):
    received = []

    def collate(items):
        received.append([[np.asarray(x), int(y)] for x, y in items])
        return len(received)
    loader = tt.utils.data.DataLoader(_Rows(case["x"], case["y"]), batch_size=case["batch_size"],
                                      drop_last=case["drop_last"], collate_fn=collate)
    return {"yielded": [value if type(value) is int else _plain(tt, value) for value in loader], "received": received}


@dataloader_calls_collate_fn_on_each_list_of_items.verdict
def _(case, output):
    what = dataloader_calls_collate_fn_on_each_list_of_items.what(case)
    chunks = _chunks(list(range(len(case["x"]))), case["batch_size"], case["drop_last"])
    if not output["received"] and any(type(value) is not int for value in output["yielded"]):
        _fail(f"{what}: f was never called and the loader yielded {output['yielded'][0]!r:.80}: yield "
              f"self.collate_fn(items), the collate_fn given (default_collate only when none is)")
    assert_close(output, {"yielded": list(range(1, len(chunks) + 1)), "received": [
        [[case["x"][i], int(case["y"][i])] for i in chunk] for chunk in chunks]}, what=what)


LAZY = {kind: (task, 1, st.fixed_dictionaries({"kind": st.just(kind), "batch_size": st.integers(1, 4)}))
        for kind, task in (("BatchSampler", "08.5"), ("DataLoader", "08.7"))}


def _lazy_words(case):
    call = (f"BatchSampler(s, {case['batch_size']}, False)" if case["kind"] == "BatchSampler" else
            f"DataLoader(a dataset of 1000 items, batch_size={case['batch_size']}, sampler=s)")
    return f"next(iter({call})) for a sampler s of 1000 indices in order"


@check(variants=LAZY, describe=lambda case: f"{_lazy_words(case)}: the first batch, how many indices s had yielded "
                                            f"by then, and the items the dataset was asked for")
def batches_are_made_one_at_a_time(tt, case):
    data, sampler, dataset, size = tt.utils.data, _Counting(1000), _Labels(1000), case["batch_size"]
    if case["kind"] == "BatchSampler":
        first = [int(index) for index in next(iter(data.BatchSampler(sampler, size, False)))]
    else:
        first = _order([next(iter(data.DataLoader(dataset, batch_size=size, sampler=sampler)))])
    return {"first batch": first, "indices s had yielded": sampler.given, "items asked for": dataset.asked}


@batches_are_made_one_at_a_time.verdict
def _(case, output):
    what, size = _lazy_words(case), case["batch_size"]
    if output["indices s had yielded"] > size or len(output["items asked for"]) > size:
        _fail(f"{what}: by the first batch, s had yielded {output['indices s had yielded']} indices and the "
              f"dataset had been asked for {len(output['items asked for'])} of its items, where a batch of {size} "
              f"needs {size} of each: make each batch when it is asked "
              f"for (a generator that yields inside the loop over self.sampler, and over self.batch_sampler), never "
              f"list(...) or every batch first: an endless sampler would never give a batch")
    assert_close(output, {"first batch": list(range(size)), "indices s had yielded": size, "items asked for": list(
        range(size)) if case["kind"] == "DataLoader" else []}, what=what)

# ---------------------------------------------------------------------------------------------------
# 08.8 Normalize


@st.composite
def _normalize(draw, batch=True, one_value=False, dtype=np.float32, form="array"):
    channels = 1 if one_value and draw(st.booleans()) else draw(st.integers(1, 3))
    shape = ((draw(st.integers(1, 4)),) if batch else ()) + (channels, draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    values = 1 if one_value else channels
    means = [draw(st.floats(-2, 2, width=32)) for _ in range(values)]
    stds = [draw(st.floats(0.25, 3, width=32)) for _ in range(values)]
    return {"x": draw(arrays(shape, dtype, -5, 5)), "mean": tuple(means), "std": tuple(stds), "form": form}


NORMALIZE = {
    "a batch (N, C, H, W) of float32, one mean and std per channel": ("08.8", 1, _normalize()),
    "one image (C, H, W) as a Tensor": ("08.8", 1, _normalize(batch=False, form="Tensor")),
    "one mean and std for every channel": ("08.8", 1, _normalize(one_value=True)),
    "a batch of float64 images": ("08.8", 1, _normalize(dtype=np.float64, form="Tensor")),
}


@check(dtype=True, variants=NORMALIZE,
       describe=lambda case: f"Normalize(mean={case['mean']}, std={case['std']}) of {case['form']} images of shape "
                             f"{case['x'].shape} and dtype {case['x'].dtype}")
def normalize_subtracts_the_mean_and_divides_by_the_std(tt, case):
    images = _given(tt, case["x"], case["form"])
    return {"result": _back(tt, tt.transforms.Normalize(case["mean"], case["std"])(images)),
            "afterwards": {"the images": held(tt, images)}}


def _normalized(case):
    x = case["x"]
    mean = np.asarray(case["mean"], dtype=np.float64).reshape(-1, 1, 1)
    std = np.asarray(case["std"], dtype=np.float64).reshape(-1, 1, 1)
    return {"type": "Tensor" if case["form"] == "Tensor" else "ndarray",
            "array": ((x.astype(np.float64) - mean) / std).astype(x.dtype)}


unchanged_then_expected(normalize_subtracts_the_mean_and_divides_by_the_std, _normalized,
                        lambda case: {"the images": case["x"]}, "compute a new array, (batch - mean) / std, not batch "
                        "-= mean: np.asarray(x), a Tensor's array and batch[None] all share the caller's memory")
_FLIP_ADVICE = ("pick each image from the batch or its mirror into a new array (np.where), never assign into the "
                "batch: np.asarray(x) shares the caller's memory")
_CROP_ADVICE = ("take the windows into a new array and never write into the batch: np.asarray(x) shares the caller's "
                "memory")


@check(task="08.8", points=1, inputs=st.integers(1, 3).map(lambda c: {"channels": c}),
       describe=lambda case: f"Normalize of images (2, {case['channels']}, 3, 3): uint8 images; a mean, or a std, of "
                             f"{case['channels'] + 1} values; a std holding a zero")
def normalize_rejects_what_it_cannot_normalize(tt, case):
    c = case["channels"]
    images = np.ones((2, c, 3, 3), np.float32)
    return {"uint8 images": capture_error(lambda: tt.transforms.Normalize([0.5] * c, [0.5] * c)(
                images.astype(np.uint8))),
            "a mean of c + 1 values": capture_error(lambda: tt.transforms.Normalize([0.5] * (c + 1), [0.5] * c)(
                images)),
            "a std of c + 1 values": capture_error(lambda: tt.transforms.Normalize([0.5] * c, [0.5] * (c + 1))(
                images)),
            "a zero std": capture_error(lambda: tt.transforms.Normalize([0.5] * c, [1.0] * (c - 1) + [0.0])(images))}


@normalize_rejects_what_it_cannot_normalize.verdict
def _(case, output):
    c = case["channels"]
    expect_error(f"Normalize([0.5] * {c}, [0.5] * {c}) of uint8 images", output["uint8 images"], "TypeError")
    expect_error(f"Normalize([0.5] * {c + 1}, [0.5] * {c}) of images with {c} channels",
                 output["a mean of c + 1 values"], "ValueError")
    expect_error(f"Normalize([0.5] * {c}, [0.5] * {c + 1}) of images with {c} channels",
                 output["a std of c + 1 values"], "ValueError")
    expect_error("Normalize with a std holding a zero", output["a zero std"], "ValueError")

# ---------------------------------------------------------------------------------------------------
# 08.9 RandomHorizontalFlip


@st.composite
def _flips(draw):
    n = draw(st.integers(1, 6))
    shape = (n, draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(2, 4)))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.uint8]))
    batch = draw(st.booleans())
    return {"x": draw(arrays(shape, dtype, 0, 200)) if batch else draw(arrays(shape[1:], dtype, 0, 200)),
            "p": draw(st.sampled_from([0.0, 0.3, 0.5, 1.0])), "form": draw(st.sampled_from(["array", "Tensor"])),
            "seed": draw(st.integers(0, 2 ** 16))}


@check(task="08.9", points=1, inputs=_flips(), guard=True,  # the identity passes every case but p = 1
       describe=lambda case: f"RandomHorizontalFlip(p={case['p']}) of {case['form']} images of shape {case['x'].shape} "
                             f"and dtype {case['x'].dtype}")
def flip_gives_each_image_or_its_mirror(tt, case):
    tt.manual_seed(case["seed"])
    images = _given(tt, case["x"], case["form"])
    output = tt.transforms.RandomHorizontalFlip(p=case["p"])(images)
    found = {**_back(tt, output), "afterwards": {"the images": held(tt, images)}}
    np.asarray(images)[...] += 1                  # an output that shares the images' memory moves with them
    return {**found, "the output once the images were changed": held(tt, output)}


@flip_gives_each_image_or_its_mirror.verdict
def _(case, output):
    x, what = case["x"], (f"RandomHorizontalFlip(p={case['p']}) of {case['form']} images of shape {case['x'].shape} "
                          f"and dtype {case['x'].dtype}")
    expect_unchanged(what, {"the images": x}, output["afterwards"], _FLIP_ADVICE)
    got = output["array"]
    wanted = "Tensor" if case["form"] == "Tensor" else "ndarray"
    if output["type"] != wanted or got.shape != x.shape or got.dtype != x.dtype:
        _fail(f"{what}: expected a {wanted} of shape {x.shape} and dtype {x.dtype}, got a {output['type']} of shape "
              f"{got.shape} and dtype {got.dtype}")
    images, outs = (x, got) if x.ndim == 4 else (x[None], got[None])
    for k, (image, out) in enumerate(zip(images, outs)):
        same, mirrored = np.array_equal(out, image), np.array_equal(out, image[..., ::-1])
        if not (same or mirrored):
            _fail(f"{what}: image {k} of the output is neither the input image nor its mirror image")
        if case["p"] == 0.0 and not same or case["p"] == 1.0 and not mirrored:
            _fail(f"{what}: image {k} was {'not ' if case['p'] == 1.0 else ''}mirrored")
    if not np.array_equal(np.asarray(output["the output once the images were changed"]), got):
        _fail(f"{what}: the output changed when the images were changed afterwards: it shares their memory "
              f"(batch[..., ::-1] is a view, and so is the batch itself); return a new array, as np.where makes")


def _one_image():
    """An image (1, 2, 3) that differs from its mirror image."""
    return arrays((1, 2, 3), np.float32, 0, 1).filter(lambda image: not np.array_equal(image, image[..., ::-1]))


@check(task="08.9", points=1, examples=10, inputs=st.fixed_dictionaries({
           "image": _one_image(), "p": st.sampled_from([0.2, 0.5, 0.8]), "seed": st.integers(0, 2 ** 16)}),
       describe=lambda case: f"RandomHorizontalFlip(p={case['p']}) of 400 copies of one image after "
                             f"tt.manual_seed({case['seed']})")
def flip_mirrors_each_image_with_probability_p(tt, case):
    tt.manual_seed(case["seed"])
    batch = np.repeat(case["image"][None], 400, axis=0)
    return {"output": np.asarray(tt.transforms.RandomHorizontalFlip(p=case["p"])(batch)),
            "afterwards": {"the batch": held(tt, batch)}}


@flip_mirrors_each_image_with_probability_p.verdict
def _(case, output):
    what = f"RandomHorizontalFlip(p={case['p']}) of 400 copies of one image"
    expect_unchanged(what, {"the batch": np.repeat(case["image"][None], 400, axis=0)}, output["afterwards"],
                     _FLIP_ADVICE)
    output = output["output"]
    if output.shape != (400, 1, 2, 3):
        _fail(f"{what}: expected shape (400, 1, 2, 3) but got {output.shape}")
    mirrored = int(np.sum(np.all(output == case["image"][..., ::-1], axis=(1, 2, 3))))
    low, high = 400 * case["p"] - 5 * (400 * case["p"] * (1 - case["p"])) ** 0.5, \
        400 * case["p"] + 5 * (400 * case["p"] * (1 - case["p"])) ** 0.5
    if not low <= mirrored <= high:
        _fail(f"{what}: {mirrored} of the 400 were mirrored, expected about {400 * case['p']:.0f} (each image on its "
              f"own with probability p)")


# ---------------------------------------------------------------------------------------------------
# 08.10 RandomCrop


@st.composite
def _crops(draw):
    n, c = draw(st.integers(1, 5)), draw(st.integers(1, 2))
    height, width, padding = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.sampled_from([None, 0, 1, 2]))
    pad = padding or 0
    size = (draw(st.integers(1, height + 2 * pad)), draw(st.integers(1, width + 2 * pad)))
    dtype = draw(st.sampled_from([np.float32, np.uint8]))
    x = draw(arrays((n, c, height, width), dtype, 1, 255))            # no zero: the padding is told apart
    batch = draw(st.booleans())
    return {"x": x if batch else x[0], "size": size if size[0] != size[1] or draw(st.booleans()) else size[0],
            "padding": padding, "form": draw(st.sampled_from(["array", "Tensor"])), "seed": draw(st.integers(0, 999))}


def _padded(case):
    x = case["x"] if case["x"].ndim == 4 else case["x"][None]
    pad = case["padding"] or 0
    return np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))


def _places(padded, out):
    """For each image, the (top, left) places of the padded image whose window equals the output image."""
    h, w = out.shape[-2:]
    return [[(top, left) for top in range(image.shape[-2] - h + 1) for left in range(image.shape[-1] - w + 1)
             if np.array_equal(image[:, top:top + h, left:left + w], crop)] for image, crop in zip(padded, out)]


def _crop_words(case):
    return (f"RandomCrop({case['size']!r}, padding={case['padding']}) of {case['form']} images of shape "
            f"{case['x'].shape} and dtype {case['x'].dtype}")


@check(task="08.10", points=2, inputs=_crops(), describe=_crop_words)
def crop_gives_a_window_of_each_padded_image(tt, case):
    tt.manual_seed(case["seed"])
    crop, images = tt.transforms.RandomCrop(case["size"], padding=case["padding"]), _given(tt, case["x"], case["form"])
    return {**_back(tt, crop(images)), "afterwards": {"the images": held(tt, images)}}


@crop_gives_a_window_of_each_padded_image.verdict
def _(case, output):
    x, what, got = case["x"], _crop_words(case), output["array"]
    expect_unchanged(what, {"the images": x}, output["afterwards"], _CROP_ADVICE)
    h, w = (case["size"], case["size"]) if isinstance(case["size"], int) else case["size"]
    shape = x.shape[:-2] + (h, w)
    wanted = "Tensor" if case["form"] == "Tensor" else "ndarray"
    if output["type"] != wanted or got.shape != shape or got.dtype != x.dtype:
        _fail(f"{what}: expected a {wanted} of shape {shape} and dtype {x.dtype}, got a {output['type']} of shape "
              f"{got.shape} and dtype {got.dtype}")
    padded, got = _padded(case), got if got.ndim == 4 else got[None]
    for k, places in enumerate(_places(padded, got)):
        if not places:
            _fail(f"{what}: image {k} of the output is not a window of the padded image {k} (padded with "
                  f"{case['padding'] or 0} zeros on every side, np.pad's default constant mode)")
    rng, (n, _, height, width) = np.random.default_rng(case["seed"]), padded.shape
    top, left = rng.integers(0, height - h + 1, size=n), rng.integers(0, width - w + 1, size=n)
    if not np.array_equal(got, np.stack([image[:, t:t + h, s:s + w] for image, t, s in zip(padded, top, left)])):
        _fail(f"{what}: the windows are not at the places the notebook draws: all the tops first, "
              f"generator.integers(0, H - h + 1, size=N), then all the lefts, generator.integers(0, W - w + 1, "
              f"size=N), H and W the padded sizes")


@check(task="08.10", points=1, examples=10, inputs=st.fixed_dictionaries({
           "image": arrays((1, 3, 4), np.float32, 1, 2), "padding": st.integers(1, 2),
           "seed": st.integers(0, 2 ** 16)}),
       describe=lambda case: f"RandomCrop((3, 4), padding={case['padding']}) of 300 copies of one image (1, 3, 4) "
                             f"after tt.manual_seed({case['seed']})")
def crop_places_cover_every_position(tt, case):
    tt.manual_seed(case["seed"])
    crop, batch = tt.transforms.RandomCrop((3, 4), padding=case["padding"]), np.repeat(case["image"][None], 300, axis=0)
    return {"output": np.asarray(crop(batch)), "afterwards": {"the batch": held(tt, batch)}}


@crop_places_cover_every_position.verdict
def _(case, output):
    what = (f"RandomCrop((3, 4), padding={case['padding']}) of 300 copies of one image (1, 3, 4) after "
            f"tt.manual_seed({case['seed']})")
    expect_unchanged(what, {"the batch": np.repeat(case["image"][None], 300, axis=0)}, output["afterwards"],
                     _CROP_ADVICE)
    output = output["output"]
    if output.shape != (300, 1, 3, 4):
        _fail(f"{what}: expected shape (300, 1, 3, 4) but got {output.shape}")
    pad = case["padding"]
    padded = np.pad(np.repeat(case["image"][None], 300, axis=0), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    places = _places(padded, output)
    if not all(places):
        _fail(f"{what}: image {[bool(p) for p in places].index(False)} of the output is not a window of the padded "
              f"image")
    tops, lefts = {p[0][0] for p in places}, {p[0][1] for p in places}
    if tops != set(range(2 * pad + 1)) or lefts != set(range(2 * pad + 1)):
        _fail(f"{what}: the windows started at rows {sorted(tops)} and columns {sorted(lefts)}; each must be drawn "
              f"per image, uniform over 0..{2 * pad} (the padded size minus the window's, inclusive)" + (
                  "; and no window held a zero of the padding: pad with zeros (np.pad's default constant mode)"
                  if not np.any(output == 0) else ""))


@check(task="08.10", points=1, inputs=st.sampled_from([(5, None), ((3, 7), 1), (8, 1)]).map(
           lambda t: {"size": t[0], "padding": t[1]}),
       describe=lambda case: f"RandomCrop({case['size']!r}, padding={case['padding']}) of an image (1, 4, 4)")
def crop_larger_than_the_image_raises(tt, case):
    return capture_error(lambda: tt.transforms.RandomCrop(case["size"], padding=case["padding"])(
        np.ones((1, 4, 4), np.float32)))


@crop_larger_than_the_image_raises.verdict
def _(case, output):
    what = f"RandomCrop({case['size']!r}, padding={case['padding']}) of an image (1, 4, 4)"
    expect_error(what, output, "ValueError")
    size = case["size"] if isinstance(case["size"], int) else case["size"][1]
    padded = 4 + 2 * (case["padding"] or 0)
    if not re.search(rf"(?<!\d){size}(?!\d)", output["message"]) or not re.search(rf"(?<!\d){padded}(?!\d)",
                                                                                    output["message"]):
        _fail(f"{what}: the ValueError's message {output['message']!r:.120} should name the crop size and the padded "
              f"image's size ({padded})")


# ---------------------------------------------------------------------------------------------------
# Family: what takes a generator draws from it alone, and from tt's default generator without one

GENERATORS = {  # variant -> (task, points, the call in words)
    "RandomSampler": ("08.4", 2, "RandomSampler(range({n}), generator=g)"),
    "DataLoader": ("08.7", 1, "DataLoader(a dataset of {n} items, batch_size=4, shuffle=True, generator=g)"),
    "RandomHorizontalFlip": ("08.9", 1, "RandomHorizontalFlip(generator=g) of 64 copies of one image (1, 4, 4)"),
    "RandomCrop": ("08.10", 1, "RandomCrop(4, padding=2, generator=g) of 64 copies of one image (1, 4, 4)")}


def _draw(tt, case, generator):
    """What the variant draws with the generator (None: tt's default one): an order, flips or crops."""
    data, kind = tt.utils.data, case["kind"]
    if kind == "RandomSampler":
        return [int(i) for i in data.RandomSampler(range(case["n"]), generator=generator)]
    if kind == "DataLoader":
        return _order(data.DataLoader(_Labels(case["n"]), batch_size=4, shuffle=True, generator=generator))
    batch = np.repeat(np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4), 64, axis=0)
    if kind == "RandomHorizontalFlip":
        return np.asarray(tt.transforms.RandomHorizontalFlip(generator=generator)(batch))[:, 0, 0, 0]
    return np.asarray(tt.transforms.RandomCrop(4, padding=2, generator=generator)(batch))


@check(variants={v: (task, points, st.fixed_dictionaries({"kind": st.just(v), "n": st.integers(12, 30),
                                                          "seed": st.integers(0, 2 ** 16)}))
                 for v, (task, points, _) in GENERATORS.items()},
       describe=lambda case: f"{GENERATORS[case['kind']][2].format(n=case['n'])} with g None after tt.manual_seed("
                             f"{case['seed']}) twice, once more and after tt.manual_seed({case['seed'] + 1}); with g = "
                             f"np.random.default_rng({case['seed']}) after tt.manual_seed(0) and (1), and with the "
                             f"generator of {case['seed'] + 1}")
def draws_from_the_generator_given_or_the_default_one(tt, case):
    return generator_draws(tt, lambda generator: _draw(tt, case, generator), case["seed"])


draws_from_the_generator_given_or_the_default_one.verdict(lambda case, output: expect_generator_draws(
    GENERATORS[case["kind"]][2].format(n=case["n"]), output))
