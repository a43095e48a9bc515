"""Hidden suite of 09_spatial: the window geometry, the direct and the im2col convolution, col2im, the
convolution's gradients, conv2d and Conv2d, max and average pooling with their gradients (the tie rule of
max pooling: the first maximum of a window in row-major order gets the gradient, as in PyTorch), the
pooling functions and modules, and the errors for inputs of the wrong rank or channel count.

Every `expected` is an independent numpy computation: the convolution as a sum over kernel taps of
`np.einsum` (no BLAS on the judge's side: OpenBLAS called from several grading threads at once can spin
forever), the pools as loops over windows, col2im as `np.add.at`; gradients against float64 central
differences. A task whose wrapper is a later task is graded through its own private name (the Function,
the helper), reached as `tinytorch.core.spatial`, so that points follow the work. The pieces of the
convolution are families over the settings they handle (stride 1 without padding, stride and padding,
dilation), a check each. One check times conv2d's forward and backward on a 3x128x128 image against numpy
matrix products of the same sizes, as a ratio: a loop over pixels loses that check's points and only those.
"""

import math

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    Timed,
    capture_error,
    central_difference,
    check,
    expect_error,
    expect_gradients_asked_for,
    expect_seeded_draws,
    expect_unchanged,
    expect_uniform,
    gradients_asked_for,
    held,
    module,
    seed_pair,
    seeded_draws,
    shape_texts,
    signed_arrays,
    unchanged_then_expected,
    with_article,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _geometry(case):
    return {"stride": tuple(case["stride"]), "padding": tuple(case["padding"]), "dilation": tuple(case["dilation"])}


def _conv_apply(tt, case, x, w, b=None):
    """_Conv2d.apply on tensors, with or without the bias (09.4/09.6, before conv2d exists)."""
    function = module(tt, "spatial")._Conv2d
    return function.apply(x, w, **_geometry(case)) if b is None else function.apply(x, w, b, **_geometry(case))


def _pool_apply(tt, case, x):
    """_MaxPool2d.apply or _AvgPool2d.apply with the case's pairs (09.9/09.10, before the functions exist)."""
    spatial, settings = module(tt, "spatial"), {"kernel_size": tuple(case["kernel"]), "stride": tuple(case["stride"]),
                                       "padding": tuple(case["padding"])}
    if case["pool"] == "max":
        return spatial._MaxPool2d.apply(x, dilation=tuple(case["dilation"]), **settings)
    return spatial._AvgPool2d.apply(x, count_include_pad=case["count_include_pad"], **settings)


def _after(tt, **arguments):
    """What each argument holds after the call (checklib.held), for the verdict to compare with what it was given."""
    return {name: held(tt, value) for name, value in arguments.items()}


def _gradients_kept(tt, fn, inputs, grad_output, names):
    """leaf_gradients, and what the leaves (named `names`) and grad_output hold after the backward."""
    leaves = [tt.Tensor(x, requires_grad=True) for x in inputs]
    upstream = tt.Tensor(grad_output)
    fn(*leaves).backward(upstream)
    return {"result": [None if leaf.grad is None else leaf.grad.numpy() for leaf in leaves],
            "afterwards": _after(tt, grad_output=upstream, **dict(zip(names, leaves)))}


# ---------------------------------------------------------------------------------------------------
# Judge side: independent numpy


def _out_size(size, kernel, stride, padding, dilation):
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def _taps(xp, kernel, stride, dilation, out):
    """(i, j, the (N, C, OH, OW) array of what tap (i, j) reads for every output), from index arrays."""
    for i in range(kernel[0]):
        rows = i * dilation[0] + stride[0] * np.arange(out[0])
        for j in range(kernel[1]):
            cols = j * dilation[1] + stride[1] * np.arange(out[1])
            yield i, j, xp[:, :, rows[:, None], cols[None, :]]


def _np_pad(x, padding, value=0.0):
    return np.pad(x, ((0, 0), (0, 0), (padding[0],) * 2, (padding[1],) * 2), constant_values=value)


def _np_conv(x, w, b, stride, padding, dilation):
    """out[n, o, y, z] = b[o] + sum_{c, i, j} w[o, c, i, j] xp[n, c, y s + i d, z s + j d], by einsum per tap."""
    n, _, h, width = x.shape
    kernel = w.shape[2:]
    out = (_out_size(h, kernel[0], stride[0], padding[0], dilation[0]),
           _out_size(width, kernel[1], stride[1], padding[1], dilation[1]))
    total = np.zeros((n, w.shape[0], *out), dtype=np.result_type(x, w))
    for i, j, patch in _taps(_np_pad(x, padding), kernel, stride, dilation, out):
        total += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return total if b is None else total + b[:, None, None]


def _np_max_pool(x, kernel, stride, padding, dilation):
    """(values, the gradient routing): each window's maximum and the flat index of its first maximum."""
    xp = _np_pad(x, padding, -np.inf)
    out = tuple(_out_size(x.shape[2 + a], kernel[a], stride[a], padding[a], dilation[a]) for a in (0, 1))
    windows = np.stack([patch for _, _, patch in _taps(xp, kernel, stride, dilation, out)], axis=-1)
    return windows.max(axis=-1), windows.argmax(axis=-1)      # argmax: the first maximum, taps in row-major order


def _np_max_pool_grad(x, g, kernel, stride, padding, dilation):
    """Each output's gradient added to the first maximum of its window (row-major), the padding cut off."""
    _, first = _np_max_pool(x, kernel, stride, padding, dilation)
    grad = np.zeros(_np_pad(x, padding).shape)
    n, c, oh, ow = g.shape
    for index in np.ndindex(n, c, oh, ow):
        i, j = divmod(int(first[index]), kernel[1])
        grad[index[0], index[1], index[2] * stride[0] + i * dilation[0], index[3] * stride[1] + j * dilation[1]] \
            += g[index]
    return grad[:, :, padding[0]:padding[0] + x.shape[2], padding[1]:padding[1] + x.shape[3]]


def _np_avg_pool(x, kernel, stride, padding, count_include_pad):
    out = tuple(_out_size(x.shape[2 + a], kernel[a], stride[a], padding[a], 1) for a in (0, 1))
    total = sum(patch for _, _, patch in _taps(_np_pad(x, padding), kernel, stride, (1, 1), out))
    if count_include_pad:
        return (total / (kernel[0] * kernel[1])).astype(x.dtype)
    real = sum(patch for _, _, patch in _taps(_np_pad(np.ones((1, 1) + x.shape[2:]), padding), kernel, stride,
                                              (1, 1), out))
    return (total / real).astype(x.dtype)


def _np_pool(case, x):
    if case["pool"] == "max":
        return _np_max_pool(x, case["kernel"], case["stride"], case["padding"], case["dilation"])[0]
    return _np_avg_pool(x, case["kernel"], case["stride"], case["padding"], case["count_include_pad"])


_ADVICE = ("leave every argument as it was given: write into new arrays (np.zeros, np.pad, a + b), never into x, "
           "weight, bias or grad_output with +=, /= or a slice assignment (Function.apply hands forward the Tensors' "
           "own arrays)")


# where max pooling's output may be -inf (a window of padding alone), which no verdict sees, the arguments after
# the call are compared as the first part of the expected result: what they were given
def _kept(**arguments):
    return {name: held(None, value) for name, value in arguments.items()}


# ---------------------------------------------------------------------------------------------------
# Cases


@st.composite
def _geometry_case(draw, max_kernel=3, max_stride=3, max_padding=2, max_dilation=2, max_extra=5, min_dilation=1):
    """kernel, stride, padding, dilation (pairs, the dilation at least min_dilation along one axis) and an input
    size (H, W) the kernel fits."""
    case = {"kernel": [draw(st.integers(1, max_kernel)) for _ in range(2)],
            "stride": [draw(st.integers(1, max_stride)) for _ in range(2)],
            "padding": [draw(st.integers(0, max_padding)) for _ in range(2)],
            "dilation": [draw(st.integers(1, max(max_dilation, min_dilation))) for _ in range(2)]}
    if max(case["dilation"]) < min_dilation:
        case["dilation"][draw(st.integers(0, 1))] = min_dilation
    extents = [case["dilation"][a] * (case["kernel"][a] - 1) + 1 for a in (0, 1)]
    case["size"] = [draw(st.integers(max(1, extents[a] - 2 * case["padding"][a]),
                                     max(1, extents[a] - 2 * case["padding"][a]) + max_extra)) for a in (0, 1)]
    return case


@st.composite
def _conv_case(draw, dtype=np.float32, small=False, gradient=False, cols=False, **geometry):
    """x (N, C, H, W), w (O, C, kH, kW), b (O,) or None, the geometry (bounded by `geometry`); with gradient, g of
    the output's shape; with cols, cols of the shape of the im2col matrix (for col2im)."""
    case = draw(_geometry_case(**{"max_extra": 2 if small else 5, "max_stride": 2 if small else 3, **geometry}))
    n, c, o = draw(st.integers(1, 2)), draw(st.integers(1, 2 if small else 3)), draw(st.integers(1, 3 if small else 4))
    elements = lambda shape: np.asarray(draw(signed_arrays(shape, 0.1, 3.0)), dtype=dtype)
    case["x"] = elements((n, c, *case["size"]))
    case["w"] = elements((o, c, *case["kernel"]))
    case["b"] = elements((o,)) if draw(st.booleans()) else None
    out = _np_conv(case["x"], case["w"], case["b"], case["stride"], case["padding"], case["dilation"]).shape
    if gradient:
        case["g"] = draw(signed_arrays(out, 0.25, 2.0))
    if cols:
        case["cols"] = draw(signed_arrays((n, c * case["w"].shape[2] * case["w"].shape[3], out[2] * out[3]), 0.1, 3.0))
    return case


def _conv_words(case, dtype="float32"):
    bias = f"b of shape {case['b'].shape}" if case["b"] is not None else "no bias"
    return (f"x of shape {case['x'].shape}, w of shape {case['w'].shape}, {bias}, stride={tuple(case['stride'])}, "
            f"padding={tuple(case['padding'])}, dilation={tuple(case['dilation'])} ({dtype})")


def _case_conv(case):
    return _np_conv(case["x"], case["w"], case["b"], case["stride"], case["padding"], case["dilation"])


def _xwb(case):
    """The arrays a convolution of the case is given: x, w, and b unless it has none."""
    return {name: case[name] for name in ("x", "w", "b") if case[name] is not None}


# ---------------------------------------------------------------------------------------------------
# 09.1 geometry


@check(task="09.1", points=2, inputs=st.lists(_geometry_case(max_kernel=5, max_stride=4, max_padding=3,
                                                             max_dilation=3, max_extra=12), min_size=8, max_size=8),
       examples=10, describe=lambda case: f"_output_size(size, kernel_size, stride, padding, dilation) for "
                                          f"{len(case)} sizes and settings along one axis")
def output_size_matches_the_formula(tt, case):
    size = module(tt, "spatial")._output_size
    return [size(c["size"][0], c["kernel"][0], c["stride"][0], c["padding"][0], c["dilation"][0]) for c in case]


@output_size_matches_the_formula.expected
def _(case):
    return [_out_size(c["size"][0], c["kernel"][0], c["stride"][0], c["padding"][0], c["dilation"][0]) for c in case]


_TOO_SMALL = [(2, 5, 1, 1, 1), (3, 3, 1, 0, 2), (1, 2, 1, 0, 1), (4, 4, 2, 0, 2)]  # size, kernel, stride, pad, dil


@check(task="09.1", points=1, describe=lambda case: f"_output_size(size, kernel_size, stride, padding, dilation) for "
                                                    f"{_TOO_SMALL}, where the kernel's extent exceeds the padded "
                                                    f"input, and for (3, 3, 1, 0, 1), where it just fits")
def output_size_rejects_a_kernel_that_does_not_fit(tt, case):
    size = module(tt, "spatial")._output_size
    return {"too small": [capture_error(lambda args=args: size(*args))["raised"] for args in _TOO_SMALL],
            "just fits": size(3, 3, 1, 0, 1)}


@output_size_rejects_a_kernel_that_does_not_fit.expected
def _(case):
    return {"too small": ["ValueError"] * len(_TOO_SMALL), "just fits": 1}


_PAIRS = [[3, 1], [[2, 5], 1], [(0, 1), 0], [np.int64(2), 1], [[np.int32(1), 4], 1],
          [2.0, 1], [True, 0], [[1, 2, 3], 1], ["same", 0], [None, 0], [(1, 2.5), 1],
          [0, 1], [(1, -1), 0], [-1, 0], [(3, 0), 1]]


@check(task="09.1", points=1, describe=lambda case: "_pair(value, 'stride', minimum) for ints, pairs (tuple, list, "
                                                    "numpy ints), floats, bools, strings, None, triples and values "
                                                    "below the minimum")
def pair_turns_ints_and_pairs_into_a_tuple(tt, case):
    pair, found = module(tt, "spatial")._pair, []  # one entry per value of _PAIRS
    for value, minimum in _PAIRS:
        error = capture_error(lambda value=value, minimum=minimum: pair(value, "stride", minimum))
        if error["raised"] is None:
            result = pair(value, "stride", minimum)
            found.append([type(result).__name__, [type(v).__name__ for v in result], [int(v) for v in result]])
        else:
            found.append([error["raised"], "stride" in error["message"]])
    return found


def _not_a_pair(value):
    """Why _pair must refuse a value of _PAIRS that is neither an int nor a pair of ints, in words."""
    if isinstance(value, bool):
        return "a bool is not a size, though isinstance(True, int) is true: test for bool first"
    if isinstance(value, (list, tuple)):
        return (f"a {type(value).__name__} of {len(value)} values is not a pair" if len(value) != 2 else
                "each value of a pair must be an int")
    return f"a {type(value).__name__} is not an int" + (", even a whole one" if isinstance(value, float) else "")


@pair_turns_ints_and_pairs_into_a_tuple.verdict
def _(case, output):
    good = {0: (3, 3), 1: (2, 5), 2: (0, 1), 3: (2, 2), 4: (1, 4)}
    if len(output) != len(_PAIRS):
        raise CheckFailed(f"_pair(value, 'stride', minimum) for {len(_PAIRS)} values: got {len(output)} results")
    for k, ((value, minimum), found) in enumerate(zip(_PAIRS, output)):
        what = f"_pair({value!r}, 'stride', {minimum})"
        if k in good:
            right = ["tuple", ["int", "int"], list(good[k])]
            if found != right:
                said = (f"a {found[0]} of {found[1]} {found[2]}" if len(found) == 3 else f"raised {found[0]}")
                raise CheckFailed(f"{what}: expected the tuple of Python ints {good[k]} but got {said}")
            continue
        error = "ValueError" if k >= 11 else "TypeError"
        reason = f"a value below the minimum {minimum}" if error == "ValueError" else _not_a_pair(value)
        if len(found) == 3:
            raise CheckFailed(f"{what}: expected a {error} ({reason}) but got the {found[0]} {found[2]}")
        if found[0] != error:
            raise CheckFailed(f"{what}: expected a {error} ({reason}) but got {with_article(found[0])}")
        if not found[1]:
            raise CheckFailed(f"{what}: the {error}'s message must name the argument ('stride')")


@check(task="09.1", points=1, inputs=st.lists(_geometry_case(max_kernel=4, max_stride=3, max_dilation=3, max_extra=8),
                                              min_size=5, max_size=5), examples=10,
       describe=lambda case: "np.arange(n)[_window_slice(offset, out_size, stride, dilation)] for every kernel tap "
                             "of 5 settings (n the padded size)")
def window_slice_gives_the_positions_a_tap_reads(tt, case):
    window = module(tt, "spatial")._window_slice
    found = []
    for c in case:
        out = _out_size(c["size"][0], c["kernel"][0], c["stride"][0], c["padding"][0], c["dilation"][0])
        padded = np.arange(c["size"][0] + 2 * c["padding"][0])
        found.append([padded[window(i, out, c["stride"][0], c["dilation"][0])].tolist() for i in range(c["kernel"][0])])
    return found


@window_slice_gives_the_positions_a_tap_reads.expected
def _(case):
    found = []
    for c in case:
        out = _out_size(c["size"][0], c["kernel"][0], c["stride"][0], c["padding"][0], c["dilation"][0])
        found.append([[i * c["dilation"][0] + o * c["stride"][0] for o in range(out)] for i in range(c["kernel"][0])])
    return found


# ---------------------------------------------------------------------------------------------------
# 09.2-09.6: the convolution's pieces, each a family over the settings it must handle (a check per setting)

SETTINGS = {"stride 1, no padding": {"max_stride": 1, "max_padding": 0, "max_dilation": 1},
            "stride and padding": {"max_dilation": 1}, "dilation": {"min_dilation": 2}}


def _per_setting(task, shares, **options):
    """A family's table: for each setting, (task, its share of the task's points, cases of _conv_case)."""
    return {name: (task, share, _conv_case(**options, **geometry)) for (name, geometry), share in
            zip(SETTINGS.items(), shares)}


@check(variants=_per_setting("09.2", (1, 1, 1), dtype=np.float64), examples=6, rtol=1e-9, atol=1e-9,
       describe=lambda case: f"_conv2d_loops(x, w, b, stride, padding, dilation) for {_conv_words(case, 'float64')}")
def direct_convolution_matches_numpy(tt, case):
    x, w, b = case["x"], case["w"], case["b"]
    loops = module(tt, "spatial")._conv2d_loops
    return {"result": loops(x, w, b, **_geometry(case)), "afterwards": _after(tt, x=x, w=w, b=b)}


unchanged_then_expected(direct_convolution_matches_numpy, _case_conv, _xwb, _ADVICE)


@check(variants=_per_setting("09.3", (1, 1, 1)), examples=6, dtype=True, rtol=0, atol=0,
       describe=lambda case: f"cols, (OH, OW) = _im2col(x, kernel_size, stride, padding, dilation) for "
                             f"{_conv_words(case)} (kernel_size = w's last two sides)")
def im2col_columns_are_the_windows(tt, case):
    x = case["x"]
    cols, out = module(tt, "spatial")._im2col(x, tuple(case["w"].shape[2:]), **_geometry(case))
    return {"result": {"cols": np.asarray(cols), "(OH, OW)": [int(v) for v in out]}, "afterwards": _after(tt, x=x)}


def _im2col_columns(case):
    x, kernel = case["x"], case["w"].shape[2:]
    out = tuple(_out_size(x.shape[2 + a], kernel[a], case["stride"][a], case["padding"][a], case["dilation"][a])
                for a in (0, 1))
    taps = {(i, j): patch for i, j, patch in _taps(_np_pad(x, case["padding"]), kernel, case["stride"],
                                                   case["dilation"], out)}
    cols = np.stack([np.stack([taps[i, j] for j in range(kernel[1])], axis=2) for i in range(kernel[0])], axis=2)
    return {"cols": cols.reshape(x.shape[0], -1, out[0] * out[1]), "(OH, OW)": list(out)}


unchanged_then_expected(im2col_columns_are_the_windows, _im2col_columns, lambda case: {"x": case["x"]}, _ADVICE)


@check(variants=_per_setting("09.4", (1, 1, 1)), examples=8, dtype=True, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"_Conv2d.apply(x, w[, b], stride, padding, dilation) for {_conv_words(case)}")
def conv_forward_matches_numpy(tt, case):
    x, w, b = tt.Tensor(case["x"]), tt.Tensor(case["w"]), None if case["b"] is None else tt.Tensor(case["b"])
    return {"result": _conv_apply(tt, case, x, w, b).numpy(), "afterwards": _after(tt, x=x, w=w, b=b)}


unchanged_then_expected(conv_forward_matches_numpy, lambda case: _case_conv(case).astype(np.float32), _xwb, _ADVICE)


@check(variants=_per_setting("09.5", (1, 1, 1), dtype=np.float64, cols=True), examples=6, rtol=1e-9, atol=1e-9,
       describe=lambda case: f"_col2im(cols, input_shape, kernel_size, stride, padding, dilation) for cols of shape "
                             f"{case['cols'].shape}, input_shape {case['x'].shape}, kernel_size "
                             f"{case['w'].shape[2:]}, stride={tuple(case['stride'])}, "
                             f"padding={tuple(case['padding'])}, dilation={tuple(case['dilation'])}")
def col2im_adds_every_entry_back_into_its_pixel(tt, case):
    cols, col2im = case["cols"], module(tt, "spatial")._col2im
    return {"result": col2im(cols, case["x"].shape, tuple(case["w"].shape[2:]), **_geometry(case)),
            "afterwards": _after(tt, cols=cols)}


def _col2im_sums(case):
    (n, c, h, w), (kh, kw) = case["x"].shape, case["w"].shape[2:]
    (sh, sw), (ph, pw), (dh, dw) = case["stride"], case["padding"], case["dilation"]
    oh, ow = _out_size(h, kh, sh, ph, dh), _out_size(w, kw, sw, pw, dw)
    cols = case["cols"].reshape(n, c, kh, kw, oh, ow)
    grad = np.zeros((n, c, h + 2 * ph, w + 2 * pw))
    for i in range(kh):
        for j in range(kw):
            rows = (i * dh + sh * np.arange(oh))[:, None]
            columns = (j * dw + sw * np.arange(ow))[None, :]
            np.add.at(grad, (slice(None), slice(None), rows, columns), cols[:, :, i, j])
    return grad[:, :, ph:ph + h, pw:pw + w]


unchanged_then_expected(col2im_adds_every_entry_back_into_its_pixel, _col2im_sums, lambda case: {"cols": case["cols"]},
                        _ADVICE)


@check(task="09.5", points=1, inputs=_conv_case(cols=True), examples=5, dtype=True, rtol=1e-5, atol=1e-5,
       describe=lambda case: f"_col2im(cols, {case['x'].shape}, {case['w'].shape[2:]}, stride, padding, dilation) for "
                             f"float32 cols of shape {case['cols'].shape}, stride={tuple(case['stride'])}, "
                             f"padding={tuple(case['padding'])}, dilation={tuple(case['dilation'])}: cols' dtype kept")
def col2im_keeps_the_dtype_of_cols(tt, case):
    cols = case["cols"].astype(np.float32)
    return module(tt, "spatial")._col2im(cols, case["x"].shape, tuple(case["w"].shape[2:]), **_geometry(case))


col2im_keeps_the_dtype_of_cols.expected(lambda case: _col2im_sums({**case, "cols": case["cols"].astype(np.float32)})
                                        .astype(np.float32))


@check(variants=_per_setting("09.6", (1, 2, 1), dtype=np.float64, small=True, gradient=True), examples=5, **GRAD_TOL,
       describe=lambda case: f"x.grad, w.grad and b.grad after _Conv2d.apply(x, w[, b], ...).backward(g) for "
                             f"{_conv_words(case, 'float64')}")
def conv_gradients_match_central_differences(tt, case):
    inputs = _xwb(case)
    return _gradients_kept(tt, lambda *leaves: _conv_apply(tt, case, *leaves), list(inputs.values()), case["g"],
                           list(inputs))


def _conv_gradients(case):
    return central_difference(lambda x, w, b=None: _np_conv(x, w, b, case["stride"], case["padding"], case["dilation"]),
                              list(_xwb(case).values()), case["g"])


unchanged_then_expected(conv_gradients_match_central_differences, _conv_gradients,
                        lambda case: {**_xwb(case), "grad_output": case["g"]}, _ADVICE)


@check(task="09.6", points=1, inputs=_conv_case(np.float64, small=True, gradient=True), examples=5, **GRAD_TOL,
       describe=lambda case: f"_Conv2d.apply(x, w[, b], ...).backward(g) for {_conv_words(case, 'float64')}, with only "
                             f"x requiring grad, then only w, then only b: the gradients")
def conv_backward_computes_the_gradients_asked_for(tt, case):
    return gradients_asked_for(tt, lambda *tensors: _conv_apply(tt, case, *tensors), list(_xwb(case).values()),
                               case["g"], list(_xwb(case)), function=module(tt, "spatial")._Conv2d)


@conv_backward_computes_the_gradients_asked_for.verdict
def _(case, output):
    expect_gradients_asked_for(conv_backward_computes_the_gradients_asked_for.what(case), output, list(_xwb(case)),
                               _conv_gradients(case), "the input of a first layer is data: its gradient is a wasted "
                               "matrix product and col2im", **GRAD_TOL)


# ---------------------------------------------------------------------------------------------------
# 09.7 conv2d


def _as_argument(pair, as_int):
    return pair[0] if as_int and pair[0] == pair[1] else tuple(pair)


@st.composite
def _conv2d_case(draw):
    case = draw(_conv_case(np.float32))
    case["as_int"] = draw(st.booleans())
    case["unbatched"] = draw(st.booleans())
    return case


def _conv2d_arguments(case):
    return {name: _as_argument(case[name], case["as_int"]) for name in ("stride", "padding", "dilation")}


@check(task="09.7", points=2, inputs=_conv2d_case(), examples=20, dtype=True, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"conv2d(x, w, b, **{_conv2d_arguments(case)}) for {_conv_words(case)}" + (
           f", x unbatched: x[0] of shape {case['x'].shape[1:]}" if case["unbatched"] else ""))
def conv2d_takes_ints_or_pairs_and_unbatched_input(tt, case):
    x = tt.Tensor(case["x"][0] if case["unbatched"] else case["x"])
    w, b = tt.Tensor(case["w"]), None if case["b"] is None else tt.Tensor(case["b"])
    return {"result": tt.nn.functional.conv2d(x, w, b, **_conv2d_arguments(case)).numpy(),
            "afterwards": _after(tt, input=x, weight=w, bias=b)}


def _conv2d_output(case):
    out = _case_conv(case).astype(np.float32)
    return out[0] if case["unbatched"] else out


unchanged_then_expected(conv2d_takes_ints_or_pairs_and_unbatched_input, _conv2d_output, lambda case: dict(
    input=case["x"][0] if case["unbatched"] else case["x"], weight=case["w"], bias=case["b"]), _ADVICE)


_BAD_CONV = [  # input shape, weight shape, bias shape (None: no bias), what must be named
    ((2, 1, 8, 8), (4, 3, 3, 3), None, "channels"), ((1, 5, 6, 6), (2, 4, 3, 3), None, "channels"),
    ((2, 6, 6), (4, 3, 3, 3), None, "channels"), ((8, 8), (4, 3, 3, 3), None, "rank"),
    ((2, 3, 1, 8, 8), (4, 3, 3, 3), None, "rank"), ((3,), (4, 3, 1, 1), None, "rank"),
    ((1, 2, 5, 5), (3, 2, 3, 3), (1,), "bias"), ((1, 2, 5, 5), (3, 2, 3, 3), (3, 1), "bias")]


def _bad_conv_words(x, w, b):
    return f"conv2d(x, w{', b' if b else ''}) for x of shape {x}, w of shape {w}" + (f", b of shape {b}" if b else "")


@check(task="09.7", points=2, describe=lambda case: "conv2d(x, w[, b]) for x of the wrong channel count or rank, or b "
                                                    "of the wrong shape: " + ", ".join(_bad_conv_words(x, w, b) for
                                                                                       x, w, b, _ in _BAD_CONV))
def conv2d_rejects_a_wrong_rank_or_channel_count_naming_both(tt, case):
    f = tt.nn.functional.conv2d
    return [capture_error(lambda x=x, w=w, b=b: f(tt.Tensor(np.ones(x, dtype=np.float32)), tt.Tensor(np.ones(
        w, dtype=np.float32)), None if b is None else tt.Tensor(np.zeros(b, np.float32)))) for x, w, b, _ in _BAD_CONV]


@conv2d_rejects_a_wrong_rank_or_channel_count_naming_both.verdict
def _(case, output):
    for (x, w, b, kind), found in zip(_BAD_CONV, output):
        names = {"channels": [shape_texts(x), shape_texts(w)], "rank": [shape_texts(x)], "bias": [shape_texts(b or ())]}
        expect_error(_bad_conv_words(x, w, b) + (f" (a bias must have the shape (out_channels,) = ({w[0]},))" if b
                                                 else ""), found, "ValueError", names=names[kind])


@check(task="09.7", points=1, guard=True, inputs=_conv_case(np.float32), examples=3,  # a constant could pass
       describe=lambda case: f"conv2d(x, w[, b]) for {_conv_words(case)}, w requiring grad: is its result a node of "
                             f"the graph (a grad_fn)?")
def conv2d_result_is_a_node_of_the_graph(tt, case):
    w, b = tt.Tensor(case["w"], requires_grad=True), None if case["b"] is None else tt.Tensor(case["b"])
    out = tt.nn.functional.conv2d(tt.Tensor(case["x"]), w, b, **_geometry(case))
    return {"requires_grad": bool(out.requires_grad), "has a grad_fn": out.grad_fn is not None}


@conv2d_result_is_a_node_of_the_graph.verdict
def _(case, output):
    if output != {"requires_grad": True, "has a grad_fn": True}:
        raise CheckFailed(f"conv2d(x, w) with w requiring grad gave {output}: its result must be built by "
                          f"_Conv2d.apply (a node of the graph, so that backward() reaches the weight), not by "
                          f"wrapping an array in a Tensor (_conv2d_loops is for checking only)")


_BAD_SETTINGS = [{"stride": 0}, {"stride": (1, 0)}, {"padding": -1}, {"dilation": 0}, {"dilation": (2, 0)},
                 {"stride": 1.5}, {"padding": (1, 1.0)}, {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1)}]


@check(task="09.7", points=1, describe=lambda case: "conv2d(x, w, **settings) for x of shape (1, 2, 6, 6), w of shape "
                                                    f"(3, 2, 3, 3) and settings {_BAD_SETTINGS}: the errors raised")
def conv2d_rejects_bad_settings(tt, case):
    x, w = tt.Tensor(np.ones((1, 2, 6, 6), np.float32)), tt.Tensor(np.ones((3, 2, 3, 3), np.float32))
    return [capture_error(lambda k=k: tt.nn.functional.conv2d(x, w, **k))["raised"] for k in _BAD_SETTINGS]


@conv2d_rejects_bad_settings.expected
def _(case):
    return ["ValueError"] * 5 + ["TypeError"] * 2 + [None]


# --- speed: the exported convolution is vectorised ----------------------------------------------------
# conv2d's forward and backward on one image 3x128x128 with 16 filters 3x3 (padding 1), on arrays made afresh
# for every call from a seed the grader sends: many output pixels in one image, the size at which a loop over
# output pixels loses most (it pays its overhead 16,384 times a call). The grader times each call itself,
# from its request to the reply, against the matrix products of the sizes an im2col convolution multiplies
# (on arrays of the same seed, in a box without your package: the yardstick computes nothing of the answer),
# taking turns. The reference takes about SPEED_REFERENCE times the yardstick's time; the limit is 5 times
# that. A forward by a loop over output pixels (09.2's _conv2d_loops) takes 12 to 14 times the yardstick's.

SPEED_REFERENCE = 1  # the reference's ratio: 1.0 to 1.5 in six runs on 2 shared, busy cores
SPEED_LIMIT = 5 * SPEED_REFERENCE


def speed_arrays(case):
    """x (1, 3, 128, 128), w (16, 3, 3, 3), b (16,), g (1, 16, 128, 128): float32, from the call's seed."""
    rng = np.random.default_rng(case["seed"])
    g = rng.random((1, 16, 128, 1), dtype=np.float32) - rng.random((1, 16, 1, 128), dtype=np.float32)  # cheap to make
    return (rng.random((1, 3, 128, 128), dtype=np.float32) - 0.5, (rng.random((16, 3, 3, 3), dtype=np.float32) - 0.5),
            rng.random(16, dtype=np.float32) - 0.5, g)


def conv_yardstick(case):
    """The three matrix products of an im2col convolution of the speed arrays' sizes, on arrays of the seed."""
    rng = np.random.default_rng(case["seed"])
    weight = rng.random((16, 27), dtype=np.float32)
    cols = rng.random((1, 27, 1), dtype=np.float32) - rng.random((1, 1, 16384), dtype=np.float32)
    grad = rng.random((1, 16, 1), dtype=np.float32) - rng.random((1, 16, 16384), dtype=np.float32)
    out = np.matmul(weight, cols)
    return {"out": out.max(axis=1), "w": np.matmul(grad, cols.transpose(0, 2, 1)).sum(0),
            "x": np.matmul(weight.T, grad)[:, :3]}  # about the sizes the check returns


@check(task="09.7", points=3, examples=5, timeout=60, rtol=1e-3, atol=1e-2,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1)}),
       timed=Timed(conv_yardstick, limit=SPEED_LIMIT, against="numpy's matrix products of the same sizes",
                   advice=f"About {SPEED_REFERENCE} is reached with im2col. A Python loop over output pixels pays "
                          f"its overhead thousands of times per image: build the im2col matrix with a loop over "
                          f"the kernel's taps, and multiply once"),
       describe=lambda case: "conv2d(x, w, b, padding=1) and its backward(g) for x of shape (1, 3, 128, 128) and "
                             "w of shape (16, 3, 3, 3): its values, and its time against numpy's matrix products "
                             "of the same sizes")
def conv2d_is_vectorised(tt, case):
    """conv2d's values (the output's maximum over channels, and the gradients), timed by the grader."""
    x0, w0, b0, g0 = speed_arrays(case)
    x, w, b = (tt.Tensor(a, requires_grad=True) for a in (x0, w0, b0))
    out = tt.nn.functional.conv2d(x, w, b, padding=1)  # an untouched stub raises here
    out.backward(tt.Tensor(g0))
    return {"out": out.numpy().max(axis=1), "x.grad": x.grad.numpy(), "w.grad": w.grad.numpy(),
            "b.grad": b.grad.numpy()}


@conv2d_is_vectorised.expected
def _(case):
    x, w, b, g = (a.astype(np.float64) for a in speed_arrays(case))
    right = {"out": _np_conv(x, w, b, (1, 1), (1, 1), (1, 1)).max(axis=1), "w.grad": np.zeros(w.shape),
             "b.grad": g.sum((0, 2, 3))}
    grad_xp = np.zeros((1, 3, 130, 130))
    xp = _np_pad(x, (1, 1))
    for i in range(3):
        for j in range(3):
            right["w.grad"][:, :, i, j] = np.einsum("nohw,nchw->oc", g, xp[:, :, i:i + 128, j:j + 128])
            grad_xp[:, :, i:i + 128, j:j + 128] += np.einsum("nohw,oc->nchw", g, w[:, :, i, j])
    right["x.grad"] = grad_xp[:, :, 1:129, 1:129]
    return right


# ---------------------------------------------------------------------------------------------------
# 09.8 Conv2d


@st.composite
def _layer_case(draw):
    case = draw(_conv_case(np.float32))
    case.update(seed=draw(st.integers(0, 2**31)), bias=case["b"] is not None, as_int=draw(st.booleans()))
    return case


def _layer_arguments(case):
    kernel = tuple(case["w"].shape[2:])
    return {"kernel_size": kernel[0] if case["as_int"] and kernel[0] == kernel[1] else kernel,
            **{name: _as_argument(case[name], case["as_int"]) for name in ("stride", "padding", "dilation")},
            "bias": case["bias"]}


def _layer_words(case):
    o, c = case["w"].shape[:2]
    arguments = ", ".join(f"{key}={value}" for key, value in _layer_arguments(case).items())
    return f"layer = Conv2d({c}, {o}, {arguments})"


@check(task="09.8", points=2, inputs=_layer_case(), examples=15, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"{_layer_words(case)}: its parameters, settings, and layer(x) for x of shape "
                             f"{case['x'].shape}")
def conv2d_layer_holds_pytorchs_parameters_and_settings(tt, case):
    o, c = case["w"].shape[:2]
    tt.manual_seed(case["seed"])
    layer = tt.nn.Conv2d(c, o, **_layer_arguments(case))
    found = {"named_parameters": [[name, list(p.shape), str(p.dtype)] for name, p in layer.named_parameters()],
             "bias is None": layer.bias is None,
             "settings": [[int(v) for v in getattr(layer, name)] + [type(getattr(layer, name)).__name__]
                          for name in ("kernel_size", "stride", "padding", "dilation")],
             "channels": [layer.in_channels, layer.out_channels]}
    weight, bias = layer.weight.numpy(), None if layer.bias is None else layer.bias.numpy()
    x = tt.Tensor(case["x"])
    return {**found, "weight": weight, "bias": bias, "layer(x)": layer(x).numpy(), "afterwards": _after(tt, x=x)}


@conv2d_layer_holds_pytorchs_parameters_and_settings.verdict
def _(case, output):
    o, c = case["w"].shape[:2]
    what = f"{_layer_words(case)}"
    expect_unchanged(f"{what}: layer(x)", {"x": case["x"]}, output["afterwards"], _ADVICE)
    parameters = [["weight", list(case["w"].shape), "float32"]] + ([["bias", [o], "float32"]] if case["bias"] else [])
    if output["named_parameters"] != parameters or output["bias is None"] == case["bias"]:
        raise CheckFailed(f"{what}: expected the parameters {parameters} (name, shape, dtype) and bias "
                          f"{'a Parameter' if case['bias'] else 'None'}, got {output['named_parameters']}")
    settings = [list(case["w"].shape[2:]) + ["tuple"]] + [list(case[name]) + ["tuple"]
                                                          for name in ("stride", "padding", "dilation")]
    if output["settings"] != settings or output["channels"] != [c, o]:
        raise CheckFailed(f"{what}: expected kernel_size, stride, padding, dilation as tuples {settings} and "
                          f"in_channels, out_channels {[c, o]}, got {output['settings']} and {output['channels']}")
    right = _np_conv(case["x"], np.asarray(output["weight"], np.float64),
                     None if output["bias"] is None else np.asarray(output["bias"], np.float64),
                     case["stride"], case["padding"], case["dilation"])
    found = np.asarray(output["layer(x)"])
    if found.shape != right.shape or not np.allclose(found, right, rtol=1e-4, atol=1e-4):
        raise CheckFailed(f"{what}: layer(x) for x of shape {case['x'].shape} is not the convolution with the layer's "
                          f"own weight and bias")


@check(task="09.8", points=2, examples=4, timeout=30,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31), "in": st.integers(1, 8),
                                     "kernel": st.lists(st.integers(1, 5), min_size=2, max_size=2)}),
       describe=lambda case: f"Conv2d({case['in']}, out, kernel_size={tuple(case['kernel'])}) initialisation, out "
                             f"chosen for about 200,000 weights")
def conv2d_initialisation_is_uniform_within_one_over_sqrt_fan_in(tt, case):
    tt.manual_seed(case["seed"])
    fan_in = case["in"] * case["kernel"][0] * case["kernel"][1]
    layer = tt.nn.Conv2d(case["in"], max(200_000 // fan_in, 500), tuple(case["kernel"]))
    return {"weight": layer.weight.numpy(), "bias": layer.bias.numpy()}


@conv2d_initialisation_is_uniform_within_one_over_sqrt_fan_in.verdict
def _(case, output):
    fan_in = case["in"] * case["kernel"][0] * case["kernel"][1]
    for name in ("weight", "bias"):
        expect_uniform(f"Conv2d({case['in']}, {max(200_000 // fan_in, 500)}, kernel_size={tuple(case['kernel'])})'s "
                       f"{name}", output[name], 1 / math.sqrt(fan_in), f"1/sqrt(fan_in), fan_in = {fan_in}")


@check(task="09.8", points=1, examples=5, inputs=seed_pair(),
       describe=lambda case: f"the weight and bias of Conv2d(3, 4, 2) after manual_seed({case['seeds'][0]}) (the "
                             f"weight drawn first), again after manual_seed({case['seeds'][0]}), once more, and after "
                             f"manual_seed({case['seeds'][1]})")
def conv2d_draws_come_from_the_default_generator(tt, case):
    def draw():
        layer = tt.nn.Conv2d(3, 4, 2)
        return np.concatenate([layer.weight.numpy().ravel(), layer.bias.numpy()])
    return seeded_draws(tt, draw, case["seeds"])


@conv2d_draws_come_from_the_default_generator.verdict
def _(case, output):
    expect_seeded_draws(f"Conv2d(3, 4, 2)'s weight and bias after manual_seed({case['seeds'][0]}) twice, once more, "
                        f"and after manual_seed({case['seeds'][1]})", output)
    rng, bound = np.random.default_rng(case["seeds"][0]), 1 / math.sqrt(12)
    weight, bias = rng.uniform(-bound, bound, size=(4, 3, 2, 2)), rng.uniform(-bound, bound, size=4)
    if not np.allclose(output["first"], np.concatenate([weight.ravel(), bias]), rtol=1e-6, atol=1e-7):
        raise CheckFailed(f"Conv2d(3, 4, 2) after manual_seed({case['seeds'][0]}): the weight and bias are not "
                          f"default_generator.uniform(-bound, bound, size=shape), the weight drawn first and then the "
                          f"bias (as Linear does, and PyTorch)")


_BAD_LAYERS = [[[1, 2, 0], {}], [[1, 2, 3], {"stride": 0}], [[1, 2, 3], {"padding": -1}], [[1, 2, 3], {"dilation": 0}],
               [[1, 2, (3, 0)], {}], [[1, 2, 2.5], {}], [[1, 2, 3], {"stride": (1, 2, 3)}]]


@check(task="09.8", points=1, describe=lambda case: "Conv2d(*args, **kwargs) for " + ", ".join(
    f"{tuple(a)} {k}" for a, k in _BAD_LAYERS) + ": the errors; and the bias of Conv2d(0, 4, 3) (no inputs: the "
    "bound 1/sqrt(fan_in) is taken as 0)")
def conv2d_layer_checks_its_settings(tt, case):
    errors = [capture_error(lambda a=a, k=k: tt.nn.Conv2d(*a, **k))["raised"] for a, k in _BAD_LAYERS]
    return {"errors": errors, "Conv2d(0, 4, 3).bias": tt.nn.Conv2d(0, 4, 3).bias.numpy()}


@conv2d_layer_checks_its_settings.expected
def _(case):
    return {"errors": ["ValueError"] * 5 + ["TypeError"] * 2, "Conv2d(0, 4, 3).bias": np.zeros(4, np.float32)}


# ---------------------------------------------------------------------------------------------------
# 09.9 max pooling, 09.10 average pooling


@st.composite
def _pool_case(draw, pool, ties=False, gradient=False, max_extra=4):
    """x (N, C, H, W) with pool settings PyTorch accepts (padding at most half the kernel); with ties, x holds
    small integers (many windows with several maxima)."""
    case = draw(_geometry_case(max_kernel=3, max_stride=3, max_padding=1, max_dilation=2 if pool == "max" else 1,
                               max_extra=max_extra))
    for a in (0, 1):
        extent = case["dilation"][a] * (case["kernel"][a] - 1) + 1
        case["padding"][a] = min(case["padding"][a], case["kernel"][a] // 2)        # PyTorch's rule, both pools
        case["size"][a] = max(case["size"][a], extent - 2 * case["padding"][a])
    case["pool"] = pool
    if pool == "avg":
        case["count_include_pad"] = draw(st.booleans())
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 3)), *case["size"])
    if ties:
        case["x"] = draw(st.lists(st.integers(-2, 2), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))).map(
            lambda values: np.array(values, dtype=np.float64).reshape(shape)))
    else:
        case["x"] = np.asarray(draw(signed_arrays(shape, 0.1, 3.0)), dtype=np.float64)
    if gradient:
        case["g"] = draw(signed_arrays(_np_pool(case, case["x"]).shape, 0.25, 2.0))
    return case


def _pool_words(case):
    settings = f"kernel_size={tuple(case['kernel'])}, stride={tuple(case['stride'])}, padding={tuple(case['padding'])}"
    if case["pool"] == "max":
        return f"_MaxPool2d.apply(x, {settings}, dilation={tuple(case['dilation'])}) for x of shape {case['x'].shape}"
    return (f"_AvgPool2d.apply(x, {settings}, count_include_pad={case['count_include_pad']}) for x of shape "
            f"{case['x'].shape}")


POOL_FORWARD = {"max": ("09.9", 3, _pool_case("max")), "avg": ("09.10", 2, _pool_case("avg"))}


@check(examples=20, rtol=1e-5, atol=1e-6, dtype=True, variants=POOL_FORWARD,
       describe=lambda case: f"{_pool_words(case)} (float32: the result float32 too)")
def pool_forward_matches_numpy(tt, case):
    x = tt.Tensor(case["x"].astype(np.float32))
    return {"afterwards": _after(tt, x=x), "result": _pool_apply(tt, case, x).numpy()}


@pool_forward_matches_numpy.expected          # not a verdict: a max over a window of padding alone is -inf
def _(case):
    return {"afterwards": _kept(x=case["x"].astype(np.float32)), "result": _np_pool(case, case["x"].astype(np.float32))}


# max pooling's on small integers (ties: the first maximum of a window in row-major order gets its gradient)
POOL_GRADIENTS = {"max": ("09.9", 3, _pool_case("max", ties=True, gradient=True)),
                  "avg": ("09.10", 2, _pool_case("avg", gradient=True))}


@check(examples=20, **GRAD_TOL, variants=POOL_GRADIENTS,
       describe=lambda case: f"x.grad after {_pool_words(case)}.backward(g)" + (
           ", x holding small integers (ties: the first maximum of a window in row-major order gets its gradient)"
           if case["pool"] == "max" else " (float64)"))
def pool_gradients(tt, case):
    return _gradients_kept(tt, lambda x: _pool_apply(tt, case, x), [case["x"]], case["g"], ["x"])


def _pool_gradient(case):
    if case["pool"] == "max":
        return [_np_max_pool_grad(case["x"], case["g"], case["kernel"], case["stride"], case["padding"],
                                  case["dilation"])]
    return central_difference(lambda x: _np_pool(case, x), [case["x"]], case["g"])


unchanged_then_expected(pool_gradients, _pool_gradient, lambda case: {"x": case["x"], "grad_output": case["g"]},
                        _ADVICE)


_SHARED_MAXIMA = [  # kernel, stride: windows that overlap along one axis only, a maximum in the shared row or column
    [[3, 2], [2, 2]], [[2, 3], [2, 2]], [[3, 1], [1, 1]], [[1, 3], [1, 2]]]


def _shared_maximum_input(kernel):
    """A (1, 2, 5, 6) input of small distinct values, with a large value at row 2 (kernel[0] == 3) or column 2
    (kernel[1] == 3), which every window covering it shares."""
    x = np.arange(60.0).reshape(1, 2, 5, 6) % 7 / 10
    x[:, :, 2, 1] = x[:, :, 1, 2] = 9.0
    return x


@check(task="09.9", points=1,
       describe=lambda case: "x.grad after _MaxPool2d.apply(x, kernel_size, stride, (0, 0), (1, 1)).backward(ones) for "
                             f"(kernel_size, stride) in {[tuple(map(tuple, k)) for k in _SHARED_MAXIMA]}, x of shape "
                             "(1, 2, 5, 6) with a maximum that several overlapping windows share")
def max_pool_gradients_of_overlapping_windows_add_up(tt, case):
    found = []
    for kernel, stride in _SHARED_MAXIMA:
        x = tt.Tensor(_shared_maximum_input(kernel), requires_grad=True)
        pool = module(tt, "spatial")._MaxPool2d.apply
        out = pool(x, kernel_size=tuple(kernel), stride=tuple(stride), padding=(0, 0), dilation=(1, 1))
        out.backward(tt.Tensor(np.ones(out.shape)))
        found.append(x.grad.numpy())
    return found


@max_pool_gradients_of_overlapping_windows_add_up.expected
def _(case):
    found = []
    for kernel, stride in _SHARED_MAXIMA:
        x = _shared_maximum_input(kernel)
        out = _np_max_pool(x, kernel, stride, (0, 0), (1, 1))[0]
        found.append(_np_max_pool_grad(x, np.ones(out.shape), kernel, stride, (0, 0), (1, 1)))
    return found


# ---------------------------------------------------------------------------------------------------
# 09.11 max_pool2d, avg_pool2d


@st.composite
def _pool_function_case(draw):
    case = draw(_pool_case(draw(st.sampled_from(["max", "avg"]))))
    case.update(as_int=draw(st.booleans()), default_stride=draw(st.booleans()), unbatched=draw(st.booleans()))
    if case["default_stride"]:
        case["stride"] = list(case["kernel"])
    return case


def _pool_arguments(case):
    arguments = {"kernel_size": _as_argument(case["kernel"], case["as_int"])}
    if not case["default_stride"]:
        arguments["stride"] = _as_argument(case["stride"], case["as_int"])
    arguments["padding"] = _as_argument(case["padding"], case["as_int"])
    if case["pool"] == "max":
        arguments["dilation"] = _as_argument(case["dilation"], case["as_int"])
    else:
        arguments["count_include_pad"] = case["count_include_pad"]
    return arguments


def _pool_function_words(case):
    x = f"x[0] of shape {case['x'].shape[1:]}" if case["unbatched"] else f"x of shape {case['x'].shape}"
    arguments = ", ".join(f"{key}={value}" for key, value in _pool_arguments(case).items())
    return f"{case['pool']}_pool2d(x, {arguments}) for {x}"


@check(task="09.11", points=2, inputs=_pool_function_case(), examples=25, rtol=1e-5, atol=1e-5,
       describe=lambda case: f"{_pool_function_words(case)} (float32)")
def pool_functions_take_ints_or_pairs_a_default_stride_and_unbatched_input(tt, case):
    x = tt.Tensor((case["x"][0] if case["unbatched"] else case["x"]).astype(np.float32))
    function = getattr(tt.nn.functional, f"{case['pool']}_pool2d")
    return {"afterwards": _after(tt, input=x), "result": function(x, **_pool_arguments(case)).numpy()}


@pool_functions_take_ints_or_pairs_a_default_stride_and_unbatched_input.expected   # -inf: not a verdict
def _(case):
    out = _np_pool(case, case["x"].astype(np.float32))
    return {"afterwards": _kept(input=(case["x"][0] if case["unbatched"] else case["x"]).astype(np.float32)),
            "result": out[0] if case["unbatched"] else out}


_BAD_POOLS = [  # function, input shape, keyword arguments, the error, what the message names
    ("max_pool2d", (4, 4), {"kernel_size": 2}, "ValueError", "shape"),
    ("avg_pool2d", (1, 2, 3, 4, 4), {"kernel_size": 2}, "ValueError", "shape"),
    ("max_pool2d", (1, 1, 6, 6), {"kernel_size": 2, "padding": 2}, "ValueError", "padding"),
    ("max_pool2d", (1, 1, 6, 6), {"kernel_size": 3, "padding": (0, 2)}, "ValueError", "padding"),
    ("avg_pool2d", (1, 1, 6, 6), {"kernel_size": 3, "padding": 2}, "ValueError", "padding"),
    ("max_pool2d", (1, 1, 6, 6), {"kernel_size": 2, "stride": 0}, "ValueError", "stride"),
    ("avg_pool2d", (1, 1, 6, 6), {"kernel_size": 2.5}, "TypeError", "kernel_size"),
    ("max_pool2d", (1, 1, 9, 9), {"kernel_size": 3, "padding": 2, "dilation": 2}, "ValueError", "padding"),
    ("max_pool2d", (1, 1, 9, 9), {"kernel_size": 3, "padding": 1, "dilation": 2}, None, None),
    ("avg_pool2d", (1, 1, 9, 9), {"kernel_size": (2, 5), "padding": (2, 0)}, "ValueError", "padding"),
    ("max_pool2d", (1, 1, 9, 9), {"kernel_size": (5, 2), "padding": (2, 0)}, None, None),
    ("max_pool2d", (1, 1, 9, 9), {"kernel_size": (1, 3), "padding": (0, 1)}, None, None),
    ("avg_pool2d", (1, 1, 9, 9), {"kernel_size": (3, 1), "padding": (1, 0)}, None, None),
    ("avg_pool2d", (1, 1, 6, 6), {"kernel_size": 3, "padding": 1}, None, None)]


@check(task="09.11", points=2, describe=lambda case: "; ".join(f"{f}(x of shape {x}, {kw})" for f, x, kw, _, _ in
                                                               _BAD_POOLS) + ": the errors raised")
def pool_functions_reject_bad_arguments(tt, case):
    found = []
    for name, shape, arguments, _, _ in _BAD_POOLS:
        function = getattr(tt.nn.functional, name)
        found.append(capture_error(lambda f=function, s=shape, a=arguments: f(tt.Tensor(np.ones(s, np.float32)), **a)))
    return found


@pool_functions_reject_bad_arguments.verdict
def _(case, output):
    for (name, shape, arguments, error, named), found in zip(_BAD_POOLS, output):
        expect_error(f"{name}(x of shape {shape}, {arguments})" + ("" if error else " (PyTorch accepts it)"), found,
                     error, names=[] if error is None else [shape_texts(shape) if named == "shape" else named])


# ---------------------------------------------------------------------------------------------------
# 09.12 the pooling modules


@st.composite
def _pool_module_case(draw):
    case = draw(_pool_function_case())
    case["unbatched"] = False
    return case


@check(task="09.12", points=2, inputs=_pool_module_case(), examples=15, rtol=1e-5, atol=1e-5,
       describe=lambda case: f"{'MaxPool2d' if case['pool'] == 'max' else 'AvgPool2d'}("
                             f"{', '.join(f'{k}={v}' for k, v in _pool_arguments(case).items())}): its settings, and "
                             f"its output for x of shape {case['x'].shape}; and the kernel_size and stride of "
                             f"MaxPool2d(2) and AvgPool2d(3, 1), kept as given (ints, as PyTorch keeps them)")
def pooling_modules_keep_their_settings_and_pool(tt, case):
    module = (tt.nn.MaxPool2d if case["pool"] == "max" else tt.nn.AvgPool2d)(**_pool_arguments(case))
    names = ["kernel_size", "stride", "padding"] + (["dilation"] if case["pool"] == "max" else ["count_include_pad"])
    settings, x = {name: getattr(module, name) for name in names}, tt.Tensor(case["x"].astype(np.float32))
    return {"afterwards": _after(tt, input=x), "settings": {name: list(value) if isinstance(value, tuple) else value
                                                            for name, value in settings.items()},
            "parameters": len(list(module.parameters())), "output": module(x).numpy(),
            "given as ints": [[pool.kernel_size, pool.stride] for pool in (tt.nn.MaxPool2d(2), tt.nn.AvgPool2d(3, 1))]}


@pooling_modules_keep_their_settings_and_pool.expected          # not a verdict: a max over padding alone is -inf
def _(case):
    settings = {name: list(v) if isinstance(v, tuple) else v for name, v in _pool_arguments(case).items()}
    settings.setdefault("stride", settings["kernel_size"])
    return {"afterwards": _kept(input=case["x"].astype(np.float32)), "settings": settings, "parameters": 0,
            "output": _np_pool(case, case["x"].astype(np.float32)), "given as ints": [[2, 2], [3, 1]]}
