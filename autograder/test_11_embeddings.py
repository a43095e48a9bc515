"""Hidden suite of 11_embeddings: the index check, the lookup (forward), the scatter-add and the weight's
gradient with repeated indices and padding_idx, nn.functional.embedding and nn.Embedding (PyTorch's
initialisation, weight tying, from_pretrained), the sinusoidal positional encoding (also at thousands of
positions, where float32 angles lose digits) and the two layers that add positions, with their errors naming what
was wrong; the lookup's output is never a view of the weight, and the functions that take arrays leave them as
they were (a family of guards).

Every `expected` is an independent numpy computation: the lookup as `np.take`, the scatter-add as a loop
over the rows, gradients against float64 central differences; the judge never calls a BLAS product (a tied
weight's gradient is computed with `np.einsum`). A task whose wrapper is a later task is graded through its
own private name (`_check_indices`, `_Embedding`, `_scatter_add`), reached as `tinytorch.core.embeddings`,
so that points follow the work. The code the notebook gives (the refused PyTorch options, the reprs)
earns no points. Behaviours shared by the two positional layers (their input checks, their draws) are
families over a table, each variant worth the points of its own task.
"""

import math

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    assert_close,
    capture_error,
    check,
    expect_error,
    expect_seeded_draws,
    expect_unchanged,
    floats_arrays,
    held,
    leaf_gradients,
    module,
    seed_pair,
    seeded_draws,
    shape_texts,
    shapes,
    signed_arrays,
    upstream,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}
INDEX_DTYPES = ["int64", "int32", "int16", "uint8"]

# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _as_form(tt, index, form):
    """The index array as the caller passes it: a numpy array, a Tensor, or nested lists (a Python int if 0-d;
    an empty index stays an array: an empty list is a float array to numpy, as to PyTorch)."""
    if form == "tensor":
        return tt.Tensor(index)
    if form == "list" and index.size:
        return index.tolist()
    return index


# ---------------------------------------------------------------------------------------------------
# Judge side: independent numpy


def _np_scatter(index, rows, num_rows):
    """out[index[n]] += rows[n], one row at a time, in float64."""
    out = np.zeros((num_rows, rows.shape[1]))
    for n, row in zip(np.asarray(index, dtype=np.int64).reshape(-1), np.asarray(rows, dtype=np.float64)):
        out[n] += row
    return out


def _np_weight_grad(index, g, num_rows, padding_idx=None):
    """The weight's gradient of a lookup: the upstream rows added into the rows they came from, padding row 0."""
    dim = g.shape[-1]
    grad = _np_scatter(np.asarray(index).reshape(-1), np.asarray(g).reshape(-1, dim), num_rows)
    if padding_idx is not None:
        grad[padding_idx % num_rows] = 0.0
    return grad


def _np_positions(length, dim):
    """PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(p / 10000^(2i/d)), element by element in float64."""
    table = np.zeros((length, dim))
    for p in range(length):
        for column in range(dim):
            angle = p / 10000.0 ** ((column - column % 2) / dim)
            table[p, column] = math.sin(angle) if column % 2 == 0 else math.cos(angle)
    return table


# ---------------------------------------------------------------------------------------------------
# Cases


@st.composite
def _index(draw, num_rows, min_dims=0, max_dims=3, dtype=None):
    """An index array of values in [0, num_rows) of a drawn shape (empty ones included) and integer dtype."""
    shape = draw(st.one_of(shapes(min_dims=min_dims, max_dims=max_dims, max_side=4), st.just((0,)), st.just((2, 0))))
    dtype = dtype or draw(st.sampled_from(INDEX_DTYPES))
    size = int(np.prod(shape))
    values = draw(st.lists(st.integers(0, num_rows - 1), min_size=size, max_size=size))
    return np.array(values, dtype=dtype).reshape(shape)


@st.composite
def _lookup_case(draw, dtype=np.float64, gradient=False, padding=False):
    """weight (V, D) of signed values, an index into it (at least one index repeated when there are two), and
    with gradient an upstream g of the output's shape; with padding, padding_idx one of the rows looked up."""
    rows, dim = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    case = {"w": np.asarray(draw(signed_arrays((rows, dim), 0.1, 3.0)), dtype=dtype),
            "idx": draw(_index(rows, min_dims=1 if padding else 0)), "padding_idx": None}
    if case["idx"].size >= 2:                      # a repeated index, always: the point of the scatter-add
        case["idx"].reshape(-1)[-1] = case["idx"].reshape(-1)[0]
    if gradient:
        case["g"] = draw(upstream(case["idx"].shape + (dim,)))
    if padding:
        case["padding_idx"] = int(draw(st.sampled_from(sorted(set(case["idx"].reshape(-1).tolist()) or {0}))))
    return case


def _lookup_words(case):
    return (f"weight of shape {case['w'].shape} ({case['w'].dtype}), indices of shape {case['idx'].shape} "
            f"({case['idx'].dtype}) {case['idx'].tolist()}")


# ---------------------------------------------------------------------------------------------------
# 11.1 _check_indices


@check(task="11.1", points=1, guard=True, examples=20,
       inputs=st.integers(1, 9).flatmap(lambda rows: st.fixed_dictionaries({
           "rows": st.just(rows), "idx": _index(rows), "form": st.sampled_from(["array", "tensor", "list"])})),
       describe=lambda case: f"_check_indices(indices, {case['rows']}) for valid indices of shape {case['idx'].shape} "
                             f"({case['idx'].dtype}) given as a {case['form']}: {case['idx'].tolist()}")
def check_indices_returns_valid_indices_unchanged(tt, case):
    given = _as_form(tt, case["idx"], case["form"])
    index = np.asarray(module(tt, "embeddings")._check_indices(given, case["rows"]))
    return {"indices": index, "returns the array it was given (no copy)": index is given}


check_indices_returns_valid_indices_unchanged.expected(lambda case: {  # an empty list is passed as its array
    "indices": case["idx"],
    "returns the array it was given (no copy)": case["form"] == "array" or case["form"] == "list" and not case["idx"].size})


@st.composite
def _out_of_range_case(draw):
    """Valid indices into `rows` rows with 1 to 3 of them replaced by values below 0 or at least rows; the
    first case of every draw holds the boundaries exactly: rows itself, and -1."""
    rows = draw(st.integers(2, 120))
    cases = []
    for bad_values in ([rows], [-1], None, None):
        shape = draw(st.sampled_from([(3,), (7,), (2, 4), (3, 2, 2)]))
        idx = np.array(draw(st.lists(st.integers(0, rows - 1), min_size=int(np.prod(shape)),
                                     max_size=int(np.prod(shape)))), dtype=np.int64).reshape(shape)
        if bad_values is None:
            bad_values = draw(st.lists(st.one_of(st.integers(-rows - 5, -1), st.integers(rows, rows + 300)),
                                       min_size=1, max_size=3))
        flat = idx.reshape(-1)
        places = draw(st.lists(st.integers(0, flat.size - 1), min_size=len(bad_values), max_size=len(bad_values),
                               unique=True))
        flat[places] = bad_values
        cases.append(idx)
    return {"rows": rows, "cases": cases}


@check(task="11.1", points=2, inputs=_out_of_range_case(), examples=15,
       describe=lambda case: f"_check_indices(indices, {case['rows']}) for indices holding values outside "
                             f"[0, {case['rows']}): " + "; ".join(str(idx.tolist()) for idx in case["cases"]))
def check_indices_names_an_out_of_range_index_and_the_size(tt, case):
    check_indices = module(tt, "embeddings")._check_indices
    return [capture_error(lambda idx=idx: check_indices(idx, case["rows"])) for idx in case["cases"]]


@check_indices_names_an_out_of_range_index_and_the_size.verdict
def _(case, output):
    rows = case["rows"]
    for idx, found in zip(case["cases"], output):
        what = f"_check_indices({idx.tolist()}, {rows})"
        expect_error(what, found, "IndexError", names=[{int(v) for v in idx.reshape(-1) if not 0 <= v < rows}, rows])


_NOT_INTEGERS = [np.array([1.0, 2.0]), np.array([[0.0]], dtype=np.float32), np.array([True, False, True]),
                 np.array(2.0), np.array([0.5])]
_INTEGERS = [np.array([0, 2], dtype=dtype) for dtype in ("int64", "int32", "int16", "int8", "uint8", "uint16")]


@check(task="11.1", points=1,
       describe=lambda case: "_check_indices(indices, 3) for float arrays (integral values included), a bool array "
                             "and 0-d float, then integer arrays of every width: the errors raised")
def check_indices_rejects_arrays_that_are_not_integers(tt, case):
    check_indices = module(tt, "embeddings")._check_indices
    return [capture_error(lambda idx=idx: check_indices(idx, 3)) for idx in _NOT_INTEGERS + _INTEGERS]


@check_indices_rejects_arrays_that_are_not_integers.verdict
def _(case, output):
    for idx, found in zip(_NOT_INTEGERS + _INTEGERS, output):
        what = f"_check_indices(np.array({idx.tolist()}, dtype={idx.dtype}), 3)"
        integers = idx.dtype.kind in "iu"
        expect_error(what + (" (integers in range)" if integers else ""), found, None if integers else "IndexError",
                     names=[] if integers else [str(idx.dtype)])


# ---------------------------------------------------------------------------------------------------
# 11.2 the scatter-add


@st.composite
def _scatter_case(draw):
    rows, dim, n = draw(st.integers(1, 6)), draw(st.integers(1, 5)), draw(st.integers(0, 20))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return {"rows": rows, "index": np.array(draw(st.lists(st.integers(0, rows - 1), min_size=n, max_size=n)),
                                            dtype=draw(st.sampled_from(INDEX_DTYPES))),
            "source": np.asarray(draw(signed_arrays((n, dim), 0.1, 3.0)), dtype=dtype)}


@check(task="11.2", points=3, inputs=_scatter_case(), examples=25, dtype=True, rtol=1e-6, atol=1e-5,
       describe=lambda case: f"_scatter_add(index, rows, {case['rows']}) for index {case['index'].tolist()} "
                             f"({case['index'].dtype}) and rows of shape {case['source'].shape} "
                             f"({case['source'].dtype})")
def scatter_add_sums_the_rows_of_repeated_indices(tt, case):
    return np.asarray(module(tt, "embeddings")._scatter_add(case["index"], case["source"], case["rows"]))


@scatter_add_sums_the_rows_of_repeated_indices.expected
def _(case):
    return _np_scatter(case["index"], case["source"], case["rows"]).astype(case["source"].dtype)


_NARROW = {"uint8": (150, 256), "int16": (300, 420), "int32": (1000, 1500)}


@st.composite
def _narrow_case(draw):
    """Token ids stored in a narrow dtype, with so many rows and so wide a table that index * width overflows it."""
    dtype = draw(st.sampled_from(sorted(_NARROW)))
    rows, dim = draw(st.integers(*_NARROW[dtype])), draw(st.integers(120, 140))
    generator = np.random.default_rng(draw(st.integers(0, 2**31)))     # 40 x ~130 values: too many to draw one by one
    index = generator.integers(rows - 60, rows, 40).astype(dtype)
    return {"rows": rows, "index": index, "source": generator.uniform(-3.0, 3.0, (40, dim)).astype(np.float32)}


@check(task="11.2", points=1, inputs=_narrow_case(), examples=6, rtol=1e-6, atol=1e-5,
       describe=lambda case: f"_scatter_add(index, rows, {case['rows']}) for 40 indices of dtype {case['index'].dtype} "
                             f"up to {int(case['index'].max())} and rows of shape {case['source'].shape}")
def scatter_add_takes_token_ids_of_a_narrow_dtype(tt, case):
    return np.asarray(module(tt, "embeddings")._scatter_add(case["index"], case["source"], case["rows"]))


@scatter_add_takes_token_ids_of_a_narrow_dtype.expected
def _(case):
    return _np_scatter(case["index"], case["source"], case["rows"]).astype(np.float32)


# ---------------------------------------------------------------------------------------------------
# 11.3 the forward


@st.composite
def _forward_case(draw):
    case = draw(_lookup_case(dtype=draw(st.sampled_from([np.float32, np.float64]))))
    case["padding_idx"] = draw(st.sampled_from([None, 0, case["w"].shape[0] - 1]))
    return case


@check(task="11.3", points=3, inputs=_forward_case(), examples=25, dtype=True, rtol=0, atol=0,
       describe=lambda case: f"_Embedding.apply(indices, weight, padding_idx={case['padding_idx']}) for "
                             f"{_lookup_words(case)}")
def embedding_forward_gathers_the_rows(tt, case):
    lookup = module(tt, "embeddings")._Embedding.apply
    return lookup(tt.Tensor(case["idx"]), tt.Tensor(case["w"]), padding_idx=case["padding_idx"]).numpy()


embedding_forward_gathers_the_rows.expected(lambda case: np.take(case["w"], case["idx"], axis=0))


_INDEX_FORMS = ("a Python int", "a 0-d array", "a 1-d array")


def _index_in_form(row, form):
    return {"a Python int": row, "a 0-d array": np.array(row), "a 1-d array": np.array([row])}[form]


@check(task="11.3", points=1, guard=True, examples=5,
       inputs=st.integers(1, 5).flatmap(lambda rows: st.fixed_dictionaries({
           "w": floats_arrays((rows, 3)), "row": st.integers(0, rows - 1)})),
       describe=lambda case: f"out = _Embedding.apply(index, weight) for a weight of shape {case['w'].shape} and the "
                             f"index {case['row']} as a Python int, np.array({case['row']}) (0-d) and "
                             f"np.array([{case['row']}]), then out.data[...] = 7: the weight afterwards")
def embedding_forward_returns_a_new_array(tt, case):
    found = {}
    for form in _INDEX_FORMS:
        weight = tt.Tensor(case["w"].copy())
        out = module(tt, "embeddings")._Embedding.apply(_index_in_form(case["row"], form), weight)
        out.data[...] = 7.0
        found[form] = weight.numpy()
    return found


@embedding_forward_returns_a_new_array.verdict
def _(case, output):
    for form in _INDEX_FORMS:
        if np.shape(output[form]) != case["w"].shape or not np.array_equal(output[form], case["w"]):
            sentence = (f"out = _Embedding.apply(index, weight) for a weight of shape {case['w'].shape} and the index "
                        f"{case['row']} as {form}: writing into out changed the weight, so out is a view of it "
                        f"(weight[indices] is one for a single index given as a Python int); return "
                        f"np.take(weight, indices, axis=0), which always makes a new array")
            raise CheckFailed(sentence, sentence)


# ---------------------------------------------------------------------------------------------------
# 11.4 the backward


GRADIENTS = {"repeated indices add up": ("11.4", 3, _lookup_case(gradient=True)),
             "padding_idx's row gets none": ("11.4", 1, _lookup_case(gradient=True, padding=True))}


@check(variants=GRADIENTS, examples=20, **GRAD_TOL,
       describe=lambda case: f"weight.grad after _Embedding.apply(indices, weight, padding_idx={case['padding_idx']})"
                             f".backward(g) for {_lookup_words(case)}")
def embedding_gradient_adds_up_over_repeated_indices(tt, case):
    lookup = module(tt, "embeddings")._Embedding.apply
    return leaf_gradients(tt, lambda w: lookup(case["idx"], w, padding_idx=case["padding_idx"]), [case["w"]],
                          case["g"])[0]


embedding_gradient_adds_up_over_repeated_indices.expected(
    lambda case: _np_weight_grad(case["idx"], case["g"], case["w"].shape[0], case["padding_idx"]))


# ---------------------------------------------------------------------------------------------------
# 11.5 embedding


@st.composite
def _function_case(draw):
    case = draw(_lookup_case(gradient=True))
    rows = case["w"].shape[0]
    case["form"] = draw(st.sampled_from(["array", "tensor", "list"]))
    case["padding_idx"] = draw(st.sampled_from([None, 0, rows - 1, -1, -rows]))
    return case


@check(task="11.5", points=2, inputs=_function_case(), examples=25, rtol=1e-9, atol=1e-9,
       describe=lambda case: f"out = embedding(indices, weight, padding_idx={case['padding_idx']}), "
                             f"out.backward(g) for {_lookup_words(case)}, the indices given as a {case['form']}")
def embedding_function_looks_up_and_differentiates(tt, case):
    weight = tt.Tensor(case["w"], requires_grad=True)
    out = tt.nn.functional.embedding(_as_form(tt, case["idx"], case["form"]), weight, padding_idx=case["padding_idx"])
    out.backward(tt.Tensor(case["g"]))
    return {"out": out.numpy(), "weight.grad": weight.grad.numpy()}


@embedding_function_looks_up_and_differentiates.expected
def _(case):
    return {"out": np.take(case["w"], case["idx"], axis=0),
            "weight.grad": _np_weight_grad(case["idx"], case["g"], case["w"].shape[0], case["padding_idx"])}


@check(task="11.5", points=1, examples=10,
       inputs=st.tuples(st.integers(2, 40), st.integers(1, 6)).filter(lambda vd: vd[0] != vd[1]).flatmap(
           lambda vd: st.fixed_dictionaries({"rows": st.just(vd[0]), "dim": st.just(vd[1]),
                                             "bad": st.sampled_from([vd[0], vd[0] + 1, -1, vd[1], -vd[0]])})),
       describe=lambda case: f"embedding([0, {case['bad']}], weight) for a weight of shape ({case['rows']}, "
                             f"{case['dim']}), and embedding([{case['rows'] - 1}], weight)")
def embedding_function_checks_its_indices_against_the_rows(tt, case):
    weight = tt.Tensor(np.ones((case["rows"], case["dim"]), dtype=np.float32))
    f = tt.nn.functional.embedding
    return {"bad": capture_error(lambda: f(np.array([0, case["bad"]]), weight)),
            "last row": f(np.array([case["rows"] - 1]), weight).numpy()}


@embedding_function_checks_its_indices_against_the_rows.verdict
def _(case, output):
    rows, bad = case["rows"], case["bad"]
    what = f"embedding([0, {bad}], weight) for a weight of shape ({rows}, {case['dim']})"
    expect_error(what, output["bad"], None if 0 <= bad < rows else "IndexError", names=[bad, rows])
    if not np.array_equal(np.asarray(output["last row"]), np.ones((1, case["dim"]), dtype=np.float32)):
        raise CheckFailed(f"embedding([{rows - 1}], weight) for a weight of shape ({rows}, {case['dim']}): the last "
                          f"row must be looked up")


_BAD_CALLS = [((4, 3), 4), ((4, 3), -5), ((4, 3), 7), ((4, 3), -4), ((4, 3), 3), ((4,), None), ((2, 2, 2), None),
              ((1, 5), 0)]  # weight shape, padding_idx
_BAD_CALL_ERRORS = ["ValueError", "ValueError", "ValueError", None, None, "ValueError", "ValueError", None]


@check(task="11.5", points=1,
       describe=lambda case: "embedding([0], weight, padding_idx) for (weight shape, padding_idx) in "
                             f"{_BAD_CALLS}: the errors raised")
def embedding_function_rejects_a_bad_weight_or_padding_idx(tt, case):
    f = tt.nn.functional.embedding
    return [capture_error(lambda w=w, p=p: f(np.array([0]), tt.Tensor(np.ones(w, dtype=np.float32)), padding_idx=p))
            for w, p in _BAD_CALLS]


@embedding_function_rejects_a_bad_weight_or_padding_idx.verdict
def _(case, output):
    for (shape, padding_idx), error, found in zip(_BAD_CALLS, _BAD_CALL_ERRORS, output):
        expect_error(f"embedding([0], weight of shape {shape}, padding_idx={padding_idx})", found, error,
                     names=[shape_texts(shape)] if len(shape) != 2 else [])


# ---------------------------------------------------------------------------------------------------
# 11.6 Embedding


@st.composite
def _layer_case(draw):
    rows, dim = draw(st.integers(1, 8)), draw(st.integers(1, 5))
    case = {"rows": rows, "dim": dim, "seed": draw(st.integers(0, 2**31)),
            "padding_idx": draw(st.sampled_from([None, 0, rows - 1, -1, -rows])), "idx": draw(_index(rows))}
    case["g"] = draw(upstream(case["idx"].shape + (dim,)))
    return case


def _layer_words(case):
    return (f"layer = Embedding({case['rows']}, {case['dim']}, padding_idx={case['padding_idx']}), out = "
            f"layer(indices), out.backward(g) for indices {case['idx'].tolist()}")


@check(task="11.6", points=2, inputs=_layer_case(), examples=20,
       describe=lambda case: f"{_layer_words(case)}: the layer's parameters, settings (num_embeddings, "
                             f"embedding_dim, padding_idx counted from 0), output and gradient")
def embedding_layer_holds_its_table_and_settings(tt, case):
    tt.manual_seed(case["seed"])
    layer = tt.nn.Embedding(case["rows"], case["dim"], padding_idx=case["padding_idx"])
    found = {"named_parameters": [[name, list(p.shape), str(p.dtype)] for name, p in layer.named_parameters()],
             "settings": [layer.num_embeddings, layer.embedding_dim, layer.padding_idx],
             "weight": layer.weight.numpy().copy()}
    out = layer(tt.Tensor(case["idx"]))
    out.backward(tt.Tensor(case["g"].astype(np.float32)))
    return {**found, "out": out.numpy(), "weight.grad": layer.weight.grad.numpy()}


@embedding_layer_holds_its_table_and_settings.verdict
def _(case, output):
    rows, dim, what = case["rows"], case["dim"], _layer_words(case)
    padding, weight = None if case["padding_idx"] is None else case["padding_idx"] % rows, np.asarray(output["weight"])
    if padding is not None and np.any(weight[padding] != 0):
        raise CheckFailed(f"{what}: the row of padding_idx ({padding}) must start at zero, got {weight[padding]}")
    expected = {"named_parameters": [["weight", [rows, dim], "float32"]], "settings": [rows, dim, padding],
                "out": np.take(weight, case["idx"], axis=0),
                "weight.grad": _np_weight_grad(case["idx"], case["g"].astype(np.float32), rows, padding)}
    assert_close({key: output[key] for key in expected}, expected, what=what, rtol=1e-5, atol=1e-5)


@check(task="11.6", points=1, examples=8,
       inputs=st.fixed_dictionaries({"rows": st.integers(2, 9), "dim": st.integers(1, 5), "seed": st.integers(0, 2**31),
                                     "idx": st.lists(st.integers(0, 30), min_size=1, max_size=6)}),
       describe=lambda case: f"tokens = Embedding({case['rows']}, {case['dim']}), head = Linear({case['dim']}, "
                             f"{case['rows']}, bias=False), head.weight = tokens.weight (tied), head(tokens(indices))"
                             f".backward(ones) for indices {[i % case['rows'] for i in case['idx']]}")
def tied_weights_add_the_gradients_of_both_uses(tt, case):
    tt.manual_seed(case["seed"])
    tokens, head = tt.nn.Embedding(case["rows"], case["dim"]), tt.nn.Linear(case["dim"], case["rows"], bias=False)
    head.weight = tokens.weight
    idx = np.array(case["idx"]) % case["rows"]
    logits = head(tokens(idx))
    logits.backward(tt.Tensor(np.ones(logits.shape, dtype=np.float32)))
    return {"weight": tokens.weight.numpy(), "weight.grad": tokens.weight.grad.numpy()}


@tied_weights_add_the_gradients_of_both_uses.verdict
def _(case, output):
    rows = case["rows"]
    idx = np.array(case["idx"]) % rows
    weight = np.asarray(output["weight"], dtype=np.float64)
    g = np.ones((len(idx), rows))
    from_head = np.einsum("no,ni->oi", g, weight[idx])                 # the output layer's share
    from_lookup = _np_scatter(idx, np.einsum("no,oi->ni", g, weight), rows)   # the embedding's share
    grad = np.asarray(output["weight.grad"])
    if grad.shape != weight.shape or not np.allclose(grad, from_head + from_lookup, rtol=1e-4, atol=1e-4):
        raise CheckFailed(f"tokens = Embedding({rows}, {case['dim']}) tied to a Linear head: the shared weight's "
                          f"gradient must be the sum of the head's share and the lookup's share",
                          "a tied weight's gradient is not the sum of both uses")


# ---------------------------------------------------------------------------------------------------
# 11.7 from_pretrained


@st.composite
def _pretrained_case(draw):
    rows, dim = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    case = {"table": np.asarray(draw(signed_arrays((rows, dim), 0.1, 3.0)), dtype=np.float32),
            "freeze": draw(st.booleans()), "padding_idx": draw(st.sampled_from([None, 0, -1])),
            "idx": draw(_index(rows, min_dims=1))}
    case["g"] = draw(upstream(case["idx"].shape + (dim,)))
    return case


@check(task="11.7", points=2, inputs=_pretrained_case(), examples=20, rtol=1e-5, atol=1e-5,
       describe=lambda case: f"layer = Embedding.from_pretrained(table, freeze={case['freeze']}, padding_idx="
                             f"{case['padding_idx']}) for a table of shape {case['table'].shape}, layer(indices)"
                             f"{'' if case['freeze'] else '.backward(g)'} for indices {case['idx'].tolist()}; and "
                             f"from_pretrained of a 1-d and a 3-d table")
def from_pretrained_wraps_the_given_table(tt, case):
    layer = tt.nn.Embedding.from_pretrained(case["table"].copy(), freeze=case["freeze"],
                                            padding_idx=case["padding_idx"])
    out = layer(case["idx"])
    found = {"weight": layer.weight.numpy().copy(), "weight.requires_grad": bool(layer.weight.requires_grad),
             "settings": [layer.num_embeddings, layer.embedding_dim, layer.padding_idx], "out": out.numpy()}
    if not case["freeze"]:  # no backward without requires_grad: then the requires_grad above is the message
        out.backward(tt.Tensor(case["g"].astype(np.float32))) if layer.weight.requires_grad else None
        found["weight.grad"] = None if layer.weight.grad is None else layer.weight.grad.numpy()
    table = case["table"]
    found["errors"] = [capture_error(lambda t=t: tt.nn.Embedding.from_pretrained(t))["raised"]
                       for t in (table[0], table[None])]
    return found


@from_pretrained_wraps_the_given_table.expected
def _(case):
    table, rows = case["table"], case["table"].shape[0]
    padding = None if case["padding_idx"] is None else case["padding_idx"] % rows
    expected = {"weight": table, "weight.requires_grad": not case["freeze"],
                "settings": [rows, table.shape[1], padding], "out": np.take(table, case["idx"], axis=0),
                "errors": ["ValueError", "ValueError"]}
    if not case["freeze"]:
        expected["weight.grad"] = _np_weight_grad(case["idx"], case["g"].astype(np.float32), rows, padding)
    return expected


# ---------------------------------------------------------------------------------------------------
# 11.8 sinusoidal_positions


@check(task="11.8", points=2, dtype=True, rtol=0, atol=5e-5, examples=12,
       inputs=st.lists(st.tuples(st.integers(0, 120), st.integers(1, 40)), min_size=2, max_size=4).map(
           lambda pairs: {"sizes": [(200, 128), (64, 7)] + pairs}),
       describe=lambda case: f"sinusoidal_positions(length, embedding_dim) for (length, embedding_dim) in "
                             f"{case['sizes']}")
def sinusoidal_positions_match_the_formula(tt, case):
    tables = [tt.nn.functional.sinusoidal_positions(length, dim) for length, dim in case["sizes"]]
    return {"tables": [table.numpy() for table in tables],
            "requires_grad": [bool(table.requires_grad) for table in tables]}


@sinusoidal_positions_match_the_formula.expected
def _(case):
    return {"tables": [_np_positions(length, dim).astype(np.float32) for length, dim in case["sizes"]],
            "requires_grad": [False] * len(case["sizes"])}


@st.composite
def _far_positions_case(draw):
    """A table of 2,000 to 12,000 positions and 12 of its rows, from 1,000 on (where a float32 angle has lost
    its third decimal)."""
    length, dim = draw(st.integers(2_000, 12_000)), draw(st.integers(2, 64))
    rows = sorted(draw(st.lists(st.integers(1_000, length - 1), min_size=11, max_size=11, unique=True)))
    return {"length": length, "dim": dim, "rows": rows + [length - 1]}


@check(task="11.8", points=1, inputs=_far_positions_case(), examples=6,
       describe=lambda case: f"sinusoidal_positions({case['length']}, {case['dim']}): the rows {case['rows']}")
def sinusoidal_positions_keep_their_digits_at_thousands_of_positions(tt, case):
    return tt.nn.functional.sinusoidal_positions(case["length"], case["dim"]).numpy()[case["rows"]]


@sinusoidal_positions_keep_their_digits_at_thousands_of_positions.verdict
def _(case, output):
    what = f"sinusoidal_positions({case['length']}, {case['dim']})"
    output = np.asarray(output)
    if output.shape != (len(case["rows"]), case["dim"]) or output.dtype != np.float32:
        raise CheckFailed(f"{what}: expected a float32 table of width {case['dim']}, got rows of shape "
                          f"{output.shape[1:]} ({output.dtype})")
    angles = np.asarray(case["rows"], np.float64)[:, None] / 10000.0 ** (np.arange(case["dim"]) // 2 * 2 / case["dim"])
    right = np.where(np.arange(case["dim"]) % 2 == 0, np.sin(angles), np.cos(angles))  # in float64
    error = np.abs(output - right)
    if error.max() > 1e-5:
        row, column = np.unravel_index(error.argmax(), error.shape)
        sentence = (f"{what}: row {case['rows'][row]}, column {column} is {output[row, column]:.6f} where the formula "
                    f"gives {right[row, column]:.6f}") + (f" (off by {error.max():.1e}; float32 rounding alone is 6e-8): "
            f"compute the angles p / 10000^(2i/d) in float64 (a float32 angle near {case['rows'][row]} keeps only 3 "
            f"decimals) and cast to float32 only the sines and cosines" if error.max() <= 0.01 else  # float32: ~1e-3
            ": sin(p / 10000^(2i/d)) in the even columns 2i, cos in the odd ones 2i+1")
        raise CheckFailed(sentence, sentence)


# ---------------------------------------------------------------------------------------------------
# 11.9 SinusoidalPositionalEncoding


@st.composite
def _sequence_case(draw):
    """x (B, T, D) or (T, D) with T <= max_len (T = max_len in some draws), float64, and g."""
    max_len, dim = draw(st.integers(1, 12)), draw(st.integers(1, 6))
    length = draw(st.sampled_from([max_len, draw(st.integers(1, max_len))]))
    shape = (length, dim) if draw(st.booleans()) else (draw(st.integers(1, 3)), length, dim)
    return {"max_len": max_len, "dim": dim, "x": draw(floats_arrays(shape)), "g": draw(upstream(shape)),
            "seed": draw(st.integers(0, 2**31))}


ADDING = {"SinusoidalPositionalEncoding": ("11.9", 2), "PositionalEmbedding": ("11.10", 2)}


@check(variants={v: (*ADDING[v], _sequence_case().map(lambda case, v=v: {**case, "layer": v})) for v in ADDING},
       examples=20, rtol=1e-5, atol=2e-5,
       describe=lambda case: f"layer = {case['layer']}({case['max_len']}, {case['dim']}), y = layer(x), y.backward(g) "
                             f"for x of shape {case['x'].shape} (float64): its parameters, y, x.grad and their .grad")
def positional_layers_add_a_row_per_position(tt, case):
    tt.manual_seed(case["seed"])
    layer = getattr(tt.nn, case["layer"])(case["max_len"], case["dim"])
    x = tt.Tensor(case["x"], requires_grad=True)
    y = layer(x)
    y.backward(tt.Tensor(case["g"]))
    parameters = list(layer.named_parameters())
    return {"named_parameters": [[name, list(p.shape), str(p.dtype)] for name, p in parameters], "y": y.numpy(),
            "x.grad": x.grad.numpy(),
            "their .grad": [None if p.grad is None else p.grad.numpy() for _, p in parameters],
            "table": layer.weight.numpy() if case["layer"] == "PositionalEmbedding" else None}


@positional_layers_add_a_row_per_position.verdict
def _(case, output):
    (length, dim), learned = case["x"].shape[-2:], case["layer"] == "PositionalEmbedding"
    table = np.asarray(output["table"], np.float64) if learned else _np_positions(length, dim).astype(np.float32)
    grad = np.zeros((case["max_len"], dim))
    grad[:length] = case["g"].reshape(-1, length, dim).sum(axis=0)
    expected = {"named_parameters": [["weight", [case["max_len"], dim], "float32"]] if learned else [],
                "y": case["x"] + table[:length], "x.grad": case["g"], "their .grad": [grad] if learned else []}
    what = positional_layers_add_a_row_per_position.checks[0].what(case)
    if not learned and output["named_parameters"]:
        raise CheckFailed(f"{what}: expected no parameters but got {output['named_parameters']!r:.99}: the table pe "
                          f"is fixed, not learned: keep it a plain Tensor attribute, not a Parameter")
    assert_close({key: output[key] for key in expected}, expected, rtol=1e-5, atol=2e-5, what=what)


POSITIONAL = {"SinusoidalPositionalEncoding": ("11.9", 1), "PositionalEmbedding": ("11.10", 1)}


def _bad_shapes(max_len, dim):
    """Inputs a positional layer (max_len, dim) must refuse (too long, then of the wrong width or rank), and the
    last one, which it must accept."""
    return [(1, max_len + 1, dim), (max_len + 3, dim), (2, 3 * max_len, dim), (2, max_len, dim + 1), (dim,),
            (2, max_len, dim)]


_BAD_SHAPE_KINDS = ["long", "long", "long", "width", "width", None]


@check(examples=6, variants={v: (*POSITIONAL[v], st.tuples(st.integers(1, 10), st.integers(1, 6)).map(
           lambda sizes, v=v: {"layer": v, "max_len": sizes[0], "dim": sizes[1]})) for v in POSITIONAL},
       describe=lambda case: f"{case['layer']}({case['max_len']}, {case['dim']}) on inputs of shapes "
                             f"{_bad_shapes(case['max_len'], case['dim'])}: the errors")
def positional_layers_refuse_too_long_or_wrong_width_inputs(tt, case):
    layer = getattr(tt.nn, case["layer"])(case["max_len"], case["dim"])
    return [capture_error(lambda shape=shape: layer(tt.Tensor(np.zeros(shape, dtype=np.float32))))
            for shape in _bad_shapes(case["max_len"], case["dim"])]


@positional_layers_refuse_too_long_or_wrong_width_inputs.verdict
def _(case, output):
    for shape, kind, found in zip(_bad_shapes(case["max_len"], case["dim"]), _BAD_SHAPE_KINDS, output):
        what = f"{case['layer']}({case['max_len']}, {case['dim']}) on an input of shape {shape}"
        names = [shape[-2], case["max_len"]] if kind == "long" else [shape_texts(shape)] if kind == "width" else []
        expect_error(what + (" (T = max_len is allowed)" if kind is None else ""), found, kind and "ValueError",
                     names=names)


# ---------------------------------------------------------------------------------------------------
# 11.10 PositionalEmbedding


# ---------------------------------------------------------------------------------------------------
# Families: the tables' initialisation and draws, each worth the points of its task in the table


INITS = {"Embedding": ("11.6", 2), "PositionalEmbedding": ("11.10", 1)}


def _table_layer(tt, layer, rows, dim, padding_idx=None):
    if layer == "Embedding":
        return tt.nn.Embedding(rows, dim, padding_idx=padding_idx)
    return tt.nn.PositionalEmbedding(rows, dim)


@check(examples=4, timeout=30,
       variants={v: (*INITS[v], st.fixed_dictionaries({"layer": st.just(v), "seed": st.integers(0, 2**31),
                                                       "dim": st.integers(1, 300)})) for v in INITS},
       describe=lambda case: f"{case['layer']}({200_000 // case['dim']}, {case['dim']}"
                             f"{', padding_idx=3' if case['layer'] == 'Embedding' else ''}) initialisation")
def embedding_tables_start_standard_normal(tt, case):
    tt.manual_seed(case["seed"])
    padding = 3 if case["layer"] == "Embedding" else None
    return _table_layer(tt, case["layer"], 200_000 // case["dim"], case["dim"], padding).weight.numpy()


@embedding_tables_start_standard_normal.verdict
def _(case, output):
    rows, dim = 200_000 // case["dim"], case["dim"]
    what = f"{case['layer']}({rows}, {dim}) initialisation"
    weight = np.asarray(output, dtype=np.float64)
    if weight.shape != (rows, dim):
        raise CheckFailed(f"{what}: expected a weight of shape {(rows, dim)}, got {weight.shape}")
    if case["layer"] == "Embedding":
        if np.any(weight[3] != 0):
            raise CheckFailed(f"{what}: with padding_idx=3, row 3 must start at zero")
        weight = np.delete(weight, 3, axis=0)
    values = weight.reshape(-1)
    if np.unique(values).size < values.size // 2:
        raise CheckFailed(f"{what}: the values are not random (only {np.unique(values).size} distinct values among "
                          f"{values.size})")
    if abs(values.mean()) > 0.015 or abs(values.std() - 1) > 0.015:
        raise CheckFailed(f"{what}: the mean {values.mean():.4f} and std {values.std():.4f} should be those of "
                          f"N(0, 1): 0 and 1")
    within_one, beyond_two = float(np.mean(np.abs(values) < 1)), float(np.mean(np.abs(values) > 2))
    if abs(within_one - 0.6827) > 0.01 or abs(beyond_two - 0.0455) > 0.005:
        raise CheckFailed(f"{what}: {within_one:.3f} of the values lie within ±1 and {beyond_two:.4f} beyond ±2; a "
                          f"standard normal distribution has 0.683 and 0.0455")


DRAWS = {"Embedding": ("11.6", 1), "PositionalEmbedding": ("11.10", 1)}


@check(examples=5, variants={v: (*DRAWS[v], seed_pair().map(lambda case, v=v: {**case, "layer": v})) for v in DRAWS},
       describe=lambda case: f"the weight of {case['layer']}(6, 4) after manual_seed({case['seeds'][0]}), again "
                             f"after manual_seed({case['seeds'][0]}), once more, and after "
                             f"manual_seed({case['seeds'][1]})")
def embedding_tables_draw_from_the_default_generator(tt, case):
    return seeded_draws(tt, lambda: _table_layer(tt, case["layer"], 6, 4).weight.numpy().copy(), case["seeds"])


@embedding_tables_draw_from_the_default_generator.verdict
def _(case, output):
    expect_seeded_draws(f"{case['layer']}(6, 4)'s weight after manual_seed({case['seeds'][0]}) twice, once more, and "
                        f"after manual_seed({case['seeds'][1]})", output)


# ---------------------------------------------------------------------------------------------------
# Family: what a function is given, it leaves as it found it (guards: a function that does nothing passes)


UNCHANGED = {"_scatter_add": ("11.2", 1), "_Embedding.backward": ("11.4", 1),
             "SinusoidalPositionalEncoding": ("11.9", 1), "PositionalEmbedding": ("11.10", 1)}
_UNCHANGED_HINTS = {
    "_scatter_add": "make the flat indices a new array (index.astype(np.intp)[:, None] * D + ...), never index *= D",
    "_Embedding.backward": "the upstream gradient belongs to the caller: zero the padding row of the weight's "
                           "gradient after the scatter-add, not the rows of grad_output",
    "SinusoidalPositionalEncoding": "return x + pe[:T], a new tensor; never add into x.data",
    "PositionalEmbedding": "return x + embedding(positions, weight), a new tensor; never add into x.data"}


def _unchanged_case(function):
    if function == "_scatter_add":
        case = _scatter_case()
    elif function == "_Embedding.backward":
        case = _lookup_case(gradient=True, padding=True)
    else:
        case = _sequence_case()
    return case.map(lambda c: {**c, "function": function})


def _unchanged_words(case):
    function = case["function"]
    if function == "_scatter_add":
        return (f"_scatter_add(index, rows, {case['rows']}) for index {case['index'].tolist()} ({case['index'].dtype}) "
                f"and rows of shape {case['source'].shape}")
    if function == "_Embedding.backward":
        return (f"_Embedding.apply(indices, weight, padding_idx={case['padding_idx']}).backward(g) for "
                f"{_lookup_words(case)}")
    return (f"{function}({case['max_len']}, {case['dim']})(x) for x of shape {case['x'].shape}, given as an array "
            f"and as a Tensor")


@check(guard=True, examples=10, variants={f: (*UNCHANGED[f], _unchanged_case(f)) for f in UNCHANGED},
       describe=lambda case: _unchanged_words(case) + ": the inputs afterwards")
def functions_leave_their_inputs_unchanged(tt, case):
    function, embeddings = case["function"], module(tt, "embeddings")
    if function == "_scatter_add":
        index, rows = case["index"].copy(), case["source"].copy()
        embeddings._scatter_add(index, rows, case["rows"])
        return {"index": held(tt, index), "rows": held(tt, rows)}
    if function == "_Embedding.backward":
        g = tt.Tensor(case["g"].copy())
        embeddings._Embedding.apply(case["idx"], tt.Tensor(case["w"], requires_grad=True),
                                    padding_idx=case["padding_idx"]).backward(g)
        return {"g": held(tt, g)}
    layer = getattr(tt.nn, function)(case["max_len"], case["dim"])
    array, tensor = case["x"].copy(), tt.Tensor(case["x"].copy())
    layer(array)
    layer(tensor)
    return {"x given as an array": held(tt, array), "x given as a Tensor": held(tt, tensor)}


@functions_leave_their_inputs_unchanged.verdict
def _(case, output):
    given = {"_scatter_add": {"index": "index", "rows": "source"}, "_Embedding.backward": {"g": "g"}}.get(
        case["function"], {"x given as an array": "x", "x given as a Tensor": "x"})  # name -> the case's key
    expect_unchanged(_unchanged_words(case), {name: case[key] for name, key in given.items()}, output,
                     f"what a function is given stays as it was, the caller may use it again: "
                     f"{_UNCHANGED_HINTS[case['function']]}")
