"""Hidden suite of 12_attention: masks as an additive bias (PyTorch's boolean meaning, float masks, the causal
mask aligned top left, the errors), attention composed from tensor ops, the stable in-place softmax with fully
masked rows as zeros, the fused Function's forward and backward (batched over any leading axes, broadcast
batch axes, a fully masked row), scaled_dot_product_attention (default and given scale, its errors, and
causality: the output at position t does not change when the tokens after t change), MultiheadAttention's
masks (the other boolean convention), its heads as views, its parameters and PyTorch's initialisation, and
its forward against an independent numpy multi-head attention with the module's own weights; every function but
the in-place `_softmax_rows` leaves the arrays it is given as they were (a family of guards). What every kind of
mask must do (the bias, the composed and the fused attention, its gradients, scaled_dot_product_attention) is a
family over the kinds of mask, a check each.

Every `expected` is an independent numpy computation: the scores by `np.einsum` (no BLAS on the judge's
side: OpenBLAS called from several grading threads can spin), the softmax row by row with fully masked rows
as zeros; gradients against float64 central differences. A task whose wrapper is a later task is graded
through its own private name, reached as `tinytorch.core.attention`, so that points follow the work.
"""

import math

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    capture_error,
    central_difference,
    check,
    expect_causal,
    expect_error,
    expect_gradients_asked_for,
    expect_seeded_draws,
    expect_unchanged,
    expect_uniform,
    gradients_asked_for,
    held,
    leaf_gradients,
    module,
    seed_pair,
    seeded_draws,
    shape_texts,
    signed_arrays,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _fused(tt, case, q, k, v):
    """_ScaledDotProductAttention.apply with the case's bias and scale (12.4/12.5, before the function exists)."""
    return module(tt, "attention")._ScaledDotProductAttention.apply(q, k, v, bias=case["bias"], scale=case["scale"])


def _mha_module(tt, case):
    """A MultiheadAttention(E, H, batch_first=True) holding the case's weights."""
    module = tt.nn.MultiheadAttention(case["E"], case["H"], batch_first=True)
    module.load_state_dict({name: case[name] for name in _MHA_PARAMETERS})
    return module


# ---------------------------------------------------------------------------------------------------
# Judge side: independent numpy


def _np_softmax(scores):
    """Row softmax along the last axis; a row of -inf gives zeros."""
    scores = np.asarray(scores, dtype=np.float64)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    exps = np.exp(scores - top)
    total = exps.sum(axis=-1, keepdims=True)
    return exps / np.where(total == 0, 1.0, total)


def _np_weights(q, k, bias, scale):
    scores = np.einsum("...le,...se->...ls", q, k) * scale
    if bias is not None:
        scores = scores + bias
    return _np_softmax(scores)


def _np_attention(q, k, v, bias, scale):
    return np.einsum("...ls,...se->...le", _np_weights(q, k, bias, scale), v)


def _np_bias(mask, causal, L, S):
    """The additive bias of SDPA's masks, float64."""
    if causal:
        mask = np.arange(S)[None, :] <= np.arange(L)[:, None]
    if mask is None:
        return None
    mask = np.asarray(mask)
    return np.where(mask, 0.0, -np.inf) if mask.dtype == np.bool_ else mask.astype(np.float64)


def _np_mha_bias(attn_mask, key_padding_mask, batch, heads, L, S):
    """MultiheadAttention's masks (bool True = masked) as a bias (batch, heads, L, S), or None."""
    def additive(mask):
        mask = np.asarray(mask)
        return np.where(mask, -np.inf, 0.0) if mask.dtype == np.bool_ else mask.astype(np.float64)
    bias = np.zeros((batch, heads, L, S))
    if attn_mask is None and key_padding_mask is None:
        return None
    if attn_mask is not None:
        bias = bias + (additive(attn_mask) if np.ndim(attn_mask) == 2 else additive(attn_mask).reshape(
            batch, heads, L, S))
    if key_padding_mask is not None:
        bias = bias + additive(key_padding_mask)[:, None, None, :]
    return bias


def _np_mha(weights, query, key, value, E, H, bias=None):
    """(output, per-head weights (B, H, L, S)) of multi-head attention with the given parameters, head by head."""
    D = E // H
    w, b = np.asarray(weights["in_proj_weight"], np.float64), np.asarray(weights["in_proj_bias"], np.float64)
    rows = [slice(part * E, (part + 1) * E) for part in range(3)]  # the rows of q, k and v in in_proj
    q, k, v = (np.einsum("bte,fe->btf", x, w[r]) + b[r] for r, x in zip(rows, (query, key, value)))
    outs, probs = [], []
    for h in range(H):
        cut = slice(h * D, (h + 1) * D)
        head_bias = None if bias is None else bias[:, h]
        probs.append(_np_weights(q[..., cut], k[..., cut], head_bias, 1 / math.sqrt(D)))
        outs.append(np.einsum("bls,bse->ble", probs[-1], v[..., cut]))
    merged = np.concatenate(outs, axis=-1)
    out = np.einsum("ble,fe->blf", merged, np.asarray(weights["out_proj.weight"], np.float64))
    return out + np.asarray(weights["out_proj.bias"], np.float64), np.stack(probs, axis=1)


# ---------------------------------------------------------------------------------------------------
# Cases


@st.composite
def _mask_case(draw, kinds=("none", "causal", "bool", "float")):
    """L, S, and a mask of one of the kinds: none, causal, bool (broadcastable shape, every row keeps one key),
    float."""
    L, S = draw(st.integers(1, 6)), draw(st.integers(1, 6))
    kind = draw(st.sampled_from(kinds))
    case = {"L": L, "S": S, "kind": kind, "mask": None}
    if kind in ("bool", "float"):
        shape = tuple(draw(st.sampled_from([(L, S), (1, S), (L, 1), (2, L, S), (2, 1, S), (S,)])))
        if kind == "bool":
            mask = np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                            dtype=bool).reshape(shape)
            if shape[-1] == S:
                mask[..., 0] = True                               # no fully masked row unless asked for
            else:
                mask[...] = True
            case["mask"] = mask
        else:
            case["mask"] = np.asarray(draw(signed_arrays(shape, 0.1, 3.0)), dtype=np.float32)
    return case


def _mask_words(case):
    if case["kind"] == "causal":
        return "is_causal=True"
    if case["kind"] == "none":
        return "no mask"
    return f"a {case['kind']} attn_mask of shape {case['mask'].shape}"


@st.composite
def _qkv_case(draw, dtype=np.float32, kinds=("none", "causal", "bool", "float"), gradient=False, broadcast=False,
              scale=True, blocked=False):
    """q (..., L, E), k (..., S, E), v (..., S, Ev) with a mask, its bias (float64 on the judge's side, cast to
    the dtype for the box), a scale; with broadcast, key and value shared across the second batch axis; with
    blocked, one query row fully masked."""
    case = draw(_mask_case(kinds))
    L, S = case["L"], case["S"]
    wide = case["mask"] is not None and case["mask"].ndim == 3               # the mask has a batch axis of 2
    batch = tuple(draw(st.sampled_from([(), (2,), (1, 2), (2, 2)] if wide else [(), (2,), (1, 3), (2, 2)])))
    E, Ev = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    kv_batch = batch[:-1] + (1,) if broadcast and batch else batch
    values = lambda shape: np.asarray(draw(signed_arrays(shape, 0.1, 2.0)), dtype=dtype)
    case.update(q=values(batch + (L, E)), k=values(kv_batch + (S, E)), v=values(kv_batch + (S, Ev)))
    case["scale"] = draw(st.floats(0.2, 1.5)) if scale else 1 / math.sqrt(E)
    bias = _np_bias(case["mask"], case["kind"] == "causal", L, S)
    if blocked:
        bias = np.broadcast_to(np.zeros((L, S)) if bias is None else bias, np.broadcast_shapes(
            np.shape(bias) if bias is not None else (L, S), (L, S))).copy()
        bias[..., draw(st.integers(0, L - 1)), :] = -np.inf
    case["bias64"] = bias
    case["bias"] = None if bias is None else bias.astype(dtype)
    if gradient:
        out = _np_attention(case["q"], case["k"], case["v"], bias, case["scale"]).shape
        case["g"] = draw(signed_arrays(out, 0.25, 2.0))
    return case


def _qkv_words(case, dtype="float32"):
    return (f"q of shape {case['q'].shape}, k of shape {case['k'].shape}, v of shape {case['v'].shape}, "
            f"{_mask_words(case)}, scale={case['scale']:.4g} ({dtype})")


def _case_attention(case):
    return _np_attention(case["q"], case["k"], case["v"], case["bias64"], case["scale"])


# the kinds of mask a family's variants grade, one check each: variant -> the kinds its cases draw
TWO_KINDS = {"no mask or is_causal": ("none", "causal"), "a bool or float mask": ("bool", "float")}
THREE_KINDS = {"no mask": ("none",), "is_causal": ("causal",), "a bool or float mask": ("bool", "float")}


def _per_kind(task, kinds, shares, cases):
    """A family's table: for each variant of `kinds`, (task, its share of the points, cases(kinds))."""
    return {name: (task, share, cases(drawn)) for (name, drawn), share in zip(kinds.items(), shares)}


# ---------------------------------------------------------------------------------------------------
# 12.1 _attention_bias


@check(variants=_per_kind("12.1", TWO_KINDS, (1, 1), _mask_case), examples=15, dtype=True, rtol=0, atol=0,
       describe=lambda case: f"_attention_bias(attn_mask, is_causal, L={case['L']}, S={case['S']}, np.float32) for "
                             f"{_mask_words(case)}")
def attention_bias_turns_masks_into_an_additive_bias(tt, case):
    bias = module(tt, "attention")._attention_bias(case["mask"], case["kind"] == "causal", case["L"], case["S"],
                                                   np.float32)
    return {"bias": None if bias is None else np.asarray(bias),
            "the float32 mask itself (no copy)": bias is case["mask"] if case["kind"] == "float" else None}


@attention_bias_turns_masks_into_an_additive_bias.expected
def _(case):
    bias = _np_bias(case["mask"], case["kind"] == "causal", case["L"], case["S"])
    return {"bias": None if bias is None else bias.astype(np.float32),
            "the float32 mask itself (no copy)": True if case["kind"] == "float" else None}


_BAD_MASKS = [  # mask, is_causal, L, S, the error, what the message names
    (np.ones((3, 4), bool), True, 3, 4, "RuntimeError", None),
    (np.zeros((3, 4), np.float32), True, 3, 4, "RuntimeError", None),
    (np.ones((3, 4), np.int64), False, 3, 4, "TypeError", "int64"),
    (np.ones((4, 3), bool), False, 3, 4, "ValueError", (4, 3)),
    (np.ones((2, 5), np.float32), False, 3, 4, "ValueError", (2, 5)),
    (np.ones((3, 1), bool), False, 3, 4, None, None)]


@check(task="12.1", points=1, describe=lambda case: "_attention_bias(mask, is_causal, L, S, np.float32) for an "
                                                    "explicit mask with is_causal=True, an int mask, masks of shape "
                                                    "(4, 3) and (2, 5) for (L, S) = (3, 4), and one of shape (3, 1)")
def attention_bias_rejects_ambiguous_or_malformed_masks(tt, case):
    bias = module(tt, "attention")._attention_bias
    return [capture_error(lambda m=m, c=c, L=L, S=S: bias(m, c, L, S, np.float32)) for m, c, L, S, _, _ in _BAD_MASKS]


@attention_bias_rejects_ambiguous_or_malformed_masks.verdict
def _(case, output):
    for (mask, causal, L, S, error, named), found in zip(_BAD_MASKS, output):
        what = f"_attention_bias(a {mask.dtype} mask of shape {mask.shape}, is_causal={causal}, L={L}, S={S})"
        expect_error(what + ("" if error else " (it broadcasts)"), found, error,
                     names=[] if named is None else [named if isinstance(named, str) else shape_texts(named)])


# ---------------------------------------------------------------------------------------------------
# 12.2 attention composed from tensor ops


COMPOSED = {**_per_kind("12.2", TWO_KINDS, (1, 1), lambda kinds: _qkv_case(np.float64, kinds=kinds)),
            "no scale given: 1/sqrt(E)": ("12.2", 1, _qkv_case(np.float64, scale=False).map(
                lambda case: {**case, "default scale": True}))}


@check(variants=COMPOSED, examples=8, rtol=1e-9, atol=1e-9,
       describe=lambda case: f"_attention_composed(q, k, v, bias{'' if case.get('default scale') else ', scale'}) for "
                             f"{_qkv_words(case, 'float64')}")
def composed_attention_matches_numpy(tt, case):
    scale = () if case.get("default scale") else (case["scale"],)
    return module(tt, "attention")._attention_composed(tt.Tensor(case["q"]), tt.Tensor(case["k"]), tt.Tensor(case["v"]),
                                                       case["bias"], *scale).numpy()


composed_attention_matches_numpy.expected(_case_attention)


# ---------------------------------------------------------------------------------------------------
# 12.3 _softmax_rows


@st.composite
def _scores_case(draw):
    """Scores (..., L, S), some entries -inf, some rows entirely -inf, some of magnitude up to 10^4."""
    shape = tuple(draw(st.sampled_from([(3, 4), (2, 3, 5), (1, 6), (4, 1), (2, 2, 2, 3)])))
    size = int(np.prod(shape))
    scale = draw(st.sampled_from([1.0, 100.0, 10_000.0]))
    scores = np.asarray(draw(signed_arrays(shape, 0.01, 3.0)), dtype=np.float32) * np.float32(scale)
    hidden = np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)), dtype=bool).reshape(shape)
    hidden &= np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)), dtype=bool).reshape(shape)
    scores[hidden] = -np.inf
    rows = scores.reshape(-1, shape[-1])
    rows[draw(st.integers(0, rows.shape[0] - 1))] = -np.inf               # one fully masked row at least
    return {"scores": scores}


@check(task="12.3", points=2, inputs=_scores_case(), examples=25, dtype=True, rtol=1e-5, atol=1e-6,
       describe=lambda case: f"_softmax_rows(scores) for float32 scores of shape {case['scores'].shape} up to "
                             f"{np.abs(case['scores'][np.isfinite(case['scores'])]).max(initial=0):.0f} in size, "
                             f"some -inf, one row or more entirely -inf")
def softmax_rows_is_stable_and_zero_on_fully_masked_rows(tt, case):
    return np.asarray(module(tt, "attention")._softmax_rows(case["scores"].copy()))


@softmax_rows_is_stable_and_zero_on_fully_masked_rows.expected
def _(case):
    return _np_softmax(case["scores"]).astype(np.float32)


@check(task="12.3", points=1, describe=lambda case: "_softmax_rows(scores) for a float32 (2, 3, 4) array: the result "
                                                    "is the array it was given, overwritten (in place)")
def softmax_rows_works_in_place(tt, case):
    scores = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 5
    result = module(tt, "attention")._softmax_rows(scores)
    return {"the same memory": bool(np.shares_memory(result, scores)), "scores afterwards": scores.copy()}


@softmax_rows_works_in_place.expected
def _(case):
    return {"the same memory": True,
            "scores afterwards": _np_softmax(np.arange(24).reshape(2, 3, 4) / 5).astype(np.float32)}


# ---------------------------------------------------------------------------------------------------
# 12.4 the fused forward


@st.composite
def _wide_bias_case(draw):
    """q, k, v and a float bias with one batch axis more than they have (2, ..., L or 1, S): the scores grow."""
    case = draw(_qkv_case(np.float32, kinds=("none",)))
    shape = (2,) + (1,) * (case["q"].ndim - 2) + (draw(st.sampled_from([case["L"], 1])), case["S"])
    mask = np.asarray(draw(signed_arrays(shape, 0.1, 3.0)), dtype=np.float32)
    return {**case, "kind": "float", "mask": mask, "bias": mask, "bias64": mask.astype(np.float64), "wide": True}


@check(variants={**_per_kind("12.4", THREE_KINDS, (1, 1, 1), lambda kinds: _qkv_case(np.float32, kinds=kinds)),
                 "a bias with more batch axes than q": ("12.4", 1, _wide_bias_case())},
       examples=10, dtype=True, rtol=1e-4, atol=1e-5,
       describe=lambda case: f"_ScaledDotProductAttention.apply(q, k, v, bias=bias, scale=scale) for "
                             f"{_qkv_words(case)}" + (" (the bias has more batch axes than the scores: scores + bias "
                                                      "is larger, += cannot grow an array)" if case.get("wide") else ""))
def fused_forward_matches_numpy(tt, case):
    return _fused(tt, case, tt.Tensor(case["q"]), tt.Tensor(case["k"]), tt.Tensor(case["v"])).numpy()


@fused_forward_matches_numpy.expected
def _(case):
    return _case_attention(case).astype(np.float32)


@check(task="12.4", points=1, inputs=_qkv_case(np.float32, blocked=True), examples=15, rtol=1e-4, atol=1e-5,
       describe=lambda case: f"_ScaledDotProductAttention.apply(q * 1000, k, v, bias=bias, scale=scale) and "
                             f"_attention_weights(q * 1000, k, bias, scale) for {_qkv_words(case)}, one query row "
                             f"fully masked (its output and weights: zeros), scores of about 10^3")
def fused_forward_is_stable_and_zero_on_fully_masked_rows(tt, case):
    q = case["q"] * np.float32(1000)
    out = _fused(tt, case, tt.Tensor(q), tt.Tensor(case["k"]), tt.Tensor(case["v"])).numpy()
    weights = module(tt, "attention")._attention_weights(q, case["k"], case["bias"], case["scale"])
    return {"output": out, "weights": np.asarray(weights)}


@fused_forward_is_stable_and_zero_on_fully_masked_rows.expected
def _(case):
    q = case["q"].astype(np.float64) * 1000
    return {"output": _np_attention(q, case["k"], case["v"], case["bias64"], case["scale"]),
            "weights": _np_weights(q, case["k"], case["bias64"], case["scale"])}


# ---------------------------------------------------------------------------------------------------
# 12.5 the fused backward


@check(variants=_per_kind("12.5", THREE_KINDS, (1, 1, 1), lambda kinds: _qkv_case(np.float64, kinds=kinds,
                                                                                 gradient=True)),
       examples=6, **GRAD_TOL,
       describe=lambda case: f"q.grad, k.grad and v.grad after _ScaledDotProductAttention.apply(q, k, v, bias, "
                             f"scale).backward(g) for {_qkv_words(case, 'float64')}")
def fused_gradients_match_central_differences(tt, case):
    return leaf_gradients(tt, lambda q, k, v: _fused(tt, case, q, k, v), [case["q"], case["k"], case["v"]], case["g"])


@fused_gradients_match_central_differences.expected
def _(case):
    return central_difference(lambda q, k, v: _np_attention(q, k, v, case["bias64"], case["scale"]),
                              [case["q"], case["k"], case["v"]], case["g"])


@check(task="12.5", points=1, inputs=_qkv_case(np.float64, gradient=True, broadcast=True, blocked=True), examples=10,
       **GRAD_TOL, describe=lambda case: f"q.grad, k.grad and v.grad after _ScaledDotProductAttention.apply(q, k, v, "
                                         f"bias, scale).backward(g) for {_qkv_words(case, 'float64')}: k and v shared "
                                         f"along a batch axis (broadcast), one query row fully masked")
def fused_gradients_of_broadcast_keys_and_masked_rows(tt, case):
    return leaf_gradients(tt, lambda q, k, v: _fused(tt, case, q, k, v), [case["q"], case["k"], case["v"]], case["g"])


@fused_gradients_of_broadcast_keys_and_masked_rows.expected
def _(case):
    return central_difference(lambda q, k, v: _np_attention(q, k, v, case["bias64"], case["scale"]),
                              [case["q"], case["k"], case["v"]], case["g"])


@check(task="12.5", points=1, inputs=_qkv_case(np.float64, gradient=True), examples=5, **GRAD_TOL,
       describe=lambda case: f"_ScaledDotProductAttention.apply(q, k, v, ...).backward(g) for "
                             f"{_qkv_words(case, 'float64')}, with only q requiring grad, then only k, then only v")
def fused_backward_computes_the_gradients_asked_for(tt, case):
    return gradients_asked_for(tt, lambda q, k, v: _fused(tt, case, q, k, v), [case["q"], case["k"], case["v"]],
                               case["g"], ["q", "k", "v"], function=module(tt, "attention")._ScaledDotProductAttention)


@fused_backward_computes_the_gradients_asked_for.verdict
def _(case, output):
    expect_gradients_asked_for(fused_backward_computes_the_gradients_asked_for.what(case), output, ["q", "k", "v"],
                               central_difference(lambda q, k, v: _np_attention(q, k, v, case["bias64"], case["scale"]),
                                                  [case["q"], case["k"], case["v"]], case["g"]),
                               "a frozen key or value projection's gradient is a wasted (L, S) product", **GRAD_TOL)


# ---------------------------------------------------------------------------------------------------
# 12.6 scaled_dot_product_attention


@st.composite
def _sdpa_case(draw, kinds=("none", "causal", "bool", "float")):
    case = draw(_qkv_case(np.float32, kinds=kinds, scale=draw(st.booleans())))
    if draw(st.integers(0, 4)) == 0:  # scale=0.0 is a scale (uniform weights), not "no scale given"
        case["scale"] = 0.0
    case["given scale"] = case["scale"] if draw(st.booleans()) or case["scale"] != 1 / math.sqrt(
        case["q"].shape[-1]) else None
    return case


def _sdpa_arguments(case, mask=None):
    """The keyword arguments of the case's scaled_dot_product_attention call (the mask: the case's, or a copy)."""
    arguments = {} if case["given scale"] is None else {"scale": case["given scale"]}
    if case["kind"] == "causal":
        arguments["is_causal"] = True
    elif case["mask"] is not None:
        arguments["attn_mask"] = case["mask"] if mask is None else mask
    return arguments


def _sdpa_words(case):
    scale = "" if case["given scale"] is None else f", scale={case['given scale']:.4g}"
    mask = {"none": "", "causal": ", is_causal=True"}.get(case["kind"], ", attn_mask=mask")
    return f"scaled_dot_product_attention(q, k, v{mask}{scale}) for {_qkv_words(case)}"


@st.composite
def _sdpa_blocked_case(draw):
    """A bool attn_mask with one query row fully masked (False everywhere): its output is zeros."""
    case = draw(_sdpa_case(kinds=("bool",)))
    mask = np.broadcast_to(case["mask"], np.broadcast_shapes(case["mask"].shape, (case["L"], case["S"]))).copy()
    mask[..., draw(st.integers(0, case["L"] - 1)), :] = False
    bias = _np_bias(mask, False, case["L"], case["S"])
    return {**case, "mask": mask, "bias64": bias, "bias": bias.astype(np.float32), "blocked": True}


@check(variants={**_per_kind("12.6", TWO_KINDS, (1, 1), _sdpa_case),
                 "a fully masked row": ("12.6", 1, _sdpa_blocked_case())},
       examples=10, dtype=True, rtol=1e-4, atol=1e-5,
       describe=lambda case: _sdpa_words(case) + (", one query row fully masked: its output must be zeros (the "
                                                  "fused attention's), not NaN" if case.get("blocked") else ""))
def sdpa_matches_numpy_with_every_kind_of_mask(tt, case):
    return tt.nn.functional.scaled_dot_product_attention(tt.Tensor(case["q"]), tt.Tensor(case["k"]),
                                                         tt.Tensor(case["v"]), **_sdpa_arguments(case)).numpy()


@sdpa_matches_numpy_with_every_kind_of_mask.expected
def _(case):
    return _case_attention(case).astype(np.float32)


@st.composite
def _causal_case(draw):
    """q, k, v (B, H, T, E) self-attention, and new values for the tokens from position t + 1 on."""
    B, H, T, E = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(2, 8)), draw(st.integers(1, 4))
    values = lambda shape: np.asarray(draw(signed_arrays(shape, 0.1, 2.0)), dtype=np.float32)
    t = draw(st.integers(0, T - 2))
    case = {"x": values((3, B, H, T, E)), "t": t}
    case["later"] = values((3, B, H, T - t - 1, E))
    return case


@check(task="12.6", points=1, inputs=_causal_case(), examples=15, rtol=1e-5, atol=1e-6,
       describe=lambda case: f"scaled_dot_product_attention(q, k, v, is_causal=True) for q, k, v of shape "
                             f"{case['x'].shape[1:]}, then again with q, k, v changed after position {case['t']}: "
                             f"the outputs up to position {case['t']}")
def sdpa_is_causal_the_past_does_not_see_the_future(tt, case):
    sdpa, t = tt.nn.functional.scaled_dot_product_attention, case["t"]
    changed = case["x"].copy()
    changed[..., t + 1:, :] = case["later"]
    before = sdpa(*(tt.Tensor(a) for a in case["x"]), is_causal=True).numpy()
    after = sdpa(*(tt.Tensor(a) for a in changed), is_causal=True).numpy()
    return {"before": before[..., :t + 1, :], "after": after[..., :t + 1, :]}


@sdpa_is_causal_the_past_does_not_see_the_future.verdict
def _(case, output):
    (q, k, v), t = case["x"], case["t"]
    right = _np_attention(q, k, v, _np_bias(None, True, q.shape[-2], q.shape[-2]), 1 / math.sqrt(q.shape[-1]))
    expect_causal(f"scaled_dot_product_attention(q, k, v, is_causal=True) for q of shape {q.shape}", output,
                  right[..., :t + 1, :], t, rtol=1e-4, atol=1e-5)


_BAD_CALLS = [  # q, k, v shapes, keyword arguments, the error, the shapes the message names
    ((2, 3, 4), (2, 5, 3), (2, 5, 6), {}, "ValueError", True),
    ((2, 3, 4), (2, 5, 4), (2, 6, 6), {}, "ValueError", True),
    ((4,), (5, 4), (5, 6), {}, "ValueError", True),
    ((2, 3, 4), (3, 5, 4), (3, 5, 6), {}, "ValueError", True),
    ((2, 3, 4), (2, 5, 4), (2, 5, 6), {"attn_mask": np.ones((3, 5), bool), "is_causal": True}, "RuntimeError", False),
    ((2, 3, 4), (2, 5, 4), (2, 5, 6), {"attn_mask": np.ones((5, 3), bool)}, "ValueError", False),
    ((2, 3, 4), (1, 5, 4), (1, 5, 6), {}, None, False)]


@check(task="12.6", points=1, describe=lambda case: "scaled_dot_product_attention(q, k, v, ...) for " + "; ".join(
    f"q {q}, k {k}, v {v}{', ' + ', '.join(kw) if kw else ''}" for q, k, v, kw, _, _ in _BAD_CALLS) + ": the errors")
def sdpa_rejects_mismatched_shapes_and_two_masks(tt, case):
    sdpa = tt.nn.functional.scaled_dot_product_attention
    return [capture_error(lambda q=q, k=k, v=v, kw=kw: sdpa(*(tt.Tensor(np.ones(s, np.float32)) for s in (q, k, v)),
                                                            **kw)) for q, k, v, kw, _, _ in _BAD_CALLS]


@sdpa_rejects_mismatched_shapes_and_two_masks.verdict
def _(case, output):
    for (q, k, v, arguments, error, named), found in zip(_BAD_CALLS, output):
        what = f"scaled_dot_product_attention(q of shape {q}, k of shape {k}, v of shape {v}, {sorted(arguments)})"
        expect_error(what + ("" if error else " (the batch axes broadcast)"), found, error,
                     names=[shape_texts(s) for s in (q, k, v)] if named else [])


# ---------------------------------------------------------------------------------------------------
# 12.7 _mha_bias


@st.composite
def _mha_mask_case(draw):
    B, H, L, S = (draw(st.integers(1, 3)) for _ in range(4))
    case = {"B": B, "H": H, "L": L, "S": S, "attn_mask": None, "key_padding_mask": None}

    def mask(shape):
        if draw(st.booleans()):
            size = int(np.prod(shape))
            return np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)), dtype=bool).reshape(shape)
        return np.asarray(draw(signed_arrays(shape, 0.1, 3.0)), dtype=np.float64)
    if draw(st.booleans()):
        case["attn_mask"] = mask(draw(st.sampled_from([(L, S), (B * H, L, S)])))
    if draw(st.booleans()):
        case["key_padding_mask"] = mask((B, S))
    return case


def _mha_mask_words(case):
    words = [f"{name} {'None' if case[name] is None else f'{case[name].dtype} of shape {case[name].shape}'}"
             for name in ("attn_mask", "key_padding_mask")]
    return f"_mha_bias({', '.join(words)}, batch={case['B']}, heads={case['H']}, L={case['L']}, S={case['S']}, float32)"


@check(task="12.7", points=2, inputs=_mha_mask_case(), examples=30, rtol=1e-6, atol=1e-6, describe=_mha_mask_words)
def mha_bias_merges_masks_with_true_meaning_masked(tt, case):
    bias = module(tt, "attention")._mha_bias(case["attn_mask"], case["key_padding_mask"], case["B"], case["H"],
                                             case["L"], case["S"], np.float32)
    if bias is None:
        return None
    bias = np.asarray(bias)
    return {"dtype": str(bias.dtype), "broadcast to (B, H, L, S)": np.broadcast_to(
        bias, (case["B"], case["H"], case["L"], case["S"])).copy()}


@mha_bias_merges_masks_with_true_meaning_masked.expected
def _(case):
    bias = _np_mha_bias(case["attn_mask"], case["key_padding_mask"], case["B"], case["H"], case["L"], case["S"])
    return None if bias is None else {"dtype": "float32", "broadcast to (B, H, L, S)": bias}


_BAD_MHA_MASKS = [((3, 4), None, True), ((6, 3, 3), None, True), ((4, 3, 3), None, True), (None, (2, 4), True),
                  (None, (3, 3), True), ((1, 3, 3), None, True), ((8, 3, 3), (2, 3), False)]  # the last: both right


@check(task="12.7", points=1, describe=lambda case: "_mha_bias(attn_mask, key_padding_mask, batch=2, heads=4, L=3, "
                                                    "S=3, float32) for masks of shapes " + ", ".join(
                                                        str(m[:2]) for m in _BAD_MHA_MASKS) + ": the errors")
def mha_bias_rejects_masks_of_the_wrong_shape(tt, case):
    bias = module(tt, "attention")._mha_bias
    return [capture_error(lambda a=a, p=p: bias(None if a is None else np.ones(a, bool),
                                                None if p is None else np.ones(p, bool), 2, 4, 3, 3, np.float32))
            for a, p, _ in _BAD_MHA_MASKS]


@mha_bias_rejects_masks_of_the_wrong_shape.verdict
def _(case, output):
    for (attn, padding, bad), found in zip(_BAD_MHA_MASKS, output):
        what = (f"_mha_bias for attn_mask of shape {attn} and key_padding_mask of shape {padding} (batch 2, 4 heads, "
                f"L=S=3)" + ("" if bad else ", both right"))
        expect_error(what, found, "RuntimeError" if bad else None,
                     names=[shape_texts(attn if attn is not None else padding)] if bad else [])


# ---------------------------------------------------------------------------------------------------
# 12.8 heads


@st.composite
def _heads_case(draw):
    B, T, H, D = (draw(st.integers(1, 4)) for _ in range(4))
    return {"x": np.asarray(draw(signed_arrays((B, T, H * D), 0.1, 3.0)), dtype=np.float32), "H": H,
            "g": draw(signed_arrays((B, H, T, D), 0.25, 2.0)).astype(np.float32)}


@check(task="12.8", points=2, inputs=_heads_case(), examples=20, rtol=0, atol=0,
       describe=lambda case: f"heads = _split_heads(x, {case['H']}) for x of shape {case['x'].shape} (float32): its "
                             f"values, whether it shares x's memory, _merge_heads(heads), and x.grad after "
                             f"(heads * g).sum().backward()")
def heads_are_views_split_and_merged(tt, case):
    attention = module(tt, "attention")
    x = tt.Tensor(case["x"], requires_grad=True)
    heads = attention._split_heads(x, case["H"])
    merged = attention._merge_heads(heads)
    (heads * tt.Tensor(case["g"])).sum().backward()
    return {"heads": heads.numpy().copy(), "a view of x": bool(np.shares_memory(heads.numpy(), x.numpy())),
            "merged": merged.numpy(), "x.grad": x.grad.numpy()}


@heads_are_views_split_and_merged.expected
def _(case):
    x, H = case["x"], case["H"]
    B, T, E = x.shape
    heads = np.stack([x[:, :, h * (E // H):(h + 1) * (E // H)] for h in range(H)], axis=1)
    return {"heads": heads, "a view of x": True, "merged": x,
            "x.grad": np.concatenate([case["g"][:, h] for h in range(H)], axis=-1)}


# ---------------------------------------------------------------------------------------------------
# 12.9 MultiheadAttention's parameters


@check(task="12.9", points=1, describe=lambda case: "MultiheadAttention(8, 2), MultiheadAttention(12, 3, bias=False, "
                                                    "batch_first=True): named parameters (shape, dtype), embed_dim, "
                                                    "num_heads, head_dim, batch_first; MultiheadAttention(10, 3)")
def mha_holds_pytorchs_parameters(tt, case):
    found = []
    for args, kwargs in [((8, 2), {}), ((12, 3), {"bias": False, "batch_first": True})]:
        module = tt.nn.MultiheadAttention(*args, **kwargs)
        found.append({"parameters": [[name, list(p.shape), str(p.dtype)] for name, p in module.named_parameters()],
                      "in_proj_bias is None": module.in_proj_bias is None,
                      "settings": [module.embed_dim, module.num_heads, module.head_dim, module.batch_first]})
    return {"modules": found, "MultiheadAttention(10, 3)": capture_error(lambda: tt.nn.MultiheadAttention(10, 3))[
        "raised"]}


@mha_holds_pytorchs_parameters.expected
def _(case):
    return {"modules": [
        {"parameters": [["in_proj_weight", [24, 8], "float32"], ["in_proj_bias", [24], "float32"],
                        ["out_proj.weight", [8, 8], "float32"], ["out_proj.bias", [8], "float32"]],
         "in_proj_bias is None": False, "settings": [8, 2, 4, False]},
        {"parameters": [["in_proj_weight", [36, 12], "float32"], ["out_proj.weight", [12, 12], "float32"]],
         "in_proj_bias is None": True, "settings": [12, 3, 4, True]}],
        "MultiheadAttention(10, 3)": "ValueError"}


@check(task="12.9", points=2, examples=4, inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31),
                                                                          "E": st.sampled_from([64, 96, 128, 256])}),
       describe=lambda case: f"MultiheadAttention({case['E']}, 4) after manual_seed({case['seed']}): the distribution "
                             f"of in_proj_weight (xavier_uniform_), out_proj.weight (Linear's), the biases (zeros)")
def mha_initialisation_is_pytorchs(tt, case):
    tt.manual_seed(case["seed"])
    module = tt.nn.MultiheadAttention(case["E"], 4)
    return {name: value for name, value in module.state_dict().items()}


@mha_initialisation_is_pytorchs.verdict
def _(case, output):
    E, what = case["E"], f"MultiheadAttention({case['E']}, 4)"
    for name in ("in_proj_bias", "out_proj.bias"):
        if np.any(np.asarray(output[name]) != 0):
            raise CheckFailed(f"{what}: {name} must start at zero (PyTorch's constant_(bias, 0))")
    expect_uniform(f"{what}'s in_proj_weight", output["in_proj_weight"], math.sqrt(6 / (E + 3 * E)),
                   "xavier_uniform_: sqrt(6 / (fan_in + fan_out)) with fan_in E, fan_out 3E")
    expect_uniform(f"{what}'s out_proj.weight", output["out_proj.weight"], 1 / math.sqrt(E),
                   "Linear's: 1/sqrt(in_features)")


@check(task="12.9", points=1, examples=4, inputs=seed_pair(),
       describe=lambda case: f"the parameters of MultiheadAttention(8, 2) after manual_seed({case['seeds'][0]}), "
                             f"again after manual_seed({case['seeds'][0]}), once more, and after "
                             f"manual_seed({case['seeds'][1]})")
def mha_draws_come_from_the_default_generator(tt, case):
    def draw():
        module = tt.nn.MultiheadAttention(8, 2)
        return np.concatenate([module.in_proj_weight.numpy().ravel(), module.out_proj.weight.numpy().ravel()])
    return seeded_draws(tt, draw, case["seeds"])


@mha_draws_come_from_the_default_generator.verdict
def _(case, output):
    expect_seeded_draws(f"MultiheadAttention(8, 2)'s weights after manual_seed({case['seeds'][0]}) twice, once more, "
                        f"and after manual_seed({case['seeds'][1]})", output)


@check(task="12.9", points=1, examples=3, inputs=st.integers(0, 2**31),
       describe=lambda seed: f"MultiheadAttention(8, 2) after manual_seed({seed}), and Linear(8, 8) after "
                             f"manual_seed({seed}): out_proj.weight and the Linear's weight")
def mha_draws_out_proj_first_as_a_linear(tt, case):
    tt.manual_seed(case)
    found = {"out_proj.weight": tt.nn.MultiheadAttention(8, 2).out_proj.weight.numpy().copy()}
    tt.manual_seed(case)
    return {**found, "Linear(8, 8).weight": tt.nn.Linear(8, 8).weight.numpy()}


@mha_draws_out_proj_first_as_a_linear.verdict
def _(case, output):
    if not np.array_equal(output["out_proj.weight"], output["Linear(8, 8).weight"]):
        raise CheckFailed(f"MultiheadAttention(8, 2) after manual_seed({case}): out_proj.weight is not the weight "
                          f"Linear(8, 8) draws after manual_seed({case}); PyTorch's order: create out_proj (it draws "
                          f"its weight and bias) and only then _reset_parameters(), which draws in_proj_weight alone")


# ---------------------------------------------------------------------------------------------------
# 12.10 MultiheadAttention's forward

_MHA_PARAMETERS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")


@st.composite
def _mha_case(draw, dtype=np.float32, small=False):
    """Weights, query (B, L, E), key and value (B, S, E) (self-attention or not), masks, the flags."""
    H, D = draw(st.integers(1, 3)), draw(st.integers(1, 3 if small else 4))
    E, B, L = H * D, draw(st.integers(1, 2)), draw(st.integers(1, 4 if small else 6))
    self_attention = draw(st.booleans())
    S = L if self_attention else draw(st.integers(1, 4 if small else 6))
    values = lambda shape, low=0.1, high=2.0: np.asarray(draw(signed_arrays(shape, low, high)), dtype=dtype)
    case = {"E": E, "H": H, "self": self_attention, "in_proj_weight": values((3 * E, E), 0.05, 1.0).astype(np.float32),
            "in_proj_bias": values((3 * E,), 0.05, 0.5).astype(np.float32),
            "out_proj.weight": values((E, E), 0.05, 1.0).astype(np.float32),
            "out_proj.bias": values((E,), 0.05, 0.5).astype(np.float32),
            "query": values((B, L, E))}
    case["key"] = case["query"] if self_attention else values((B, S, E))
    case["value"] = case["query"] if self_attention else values((B, S, E))
    case["attn_mask"] = None
    if draw(st.booleans()):
        hidden = np.triu(np.ones((L, S), dtype=bool), 1) if draw(st.booleans()) else np.array(
            draw(st.lists(st.booleans(), min_size=L * S, max_size=L * S)), dtype=bool).reshape(L, S)
        hidden[:, 0] = False
        case["attn_mask"] = hidden
    case["key_padding_mask"] = None
    if draw(st.booleans()):
        padding = np.array(draw(st.lists(st.booleans(), min_size=B * S, max_size=B * S)), dtype=bool).reshape(B, S)
        padding[:, -1] = False
        if case["attn_mask"] is not None:
            padding[:, 0] = False
        case["key_padding_mask"] = padding
    case["average"] = draw(st.booleans())
    return case


def _mha_words(case):
    masks = ", ".join(f"{name} of shape {case[name].shape}" for name in ("attn_mask", "key_padding_mask")
                      if case[name] is not None) or "no masks"
    inputs = (f"x of shape {case['query'].shape} (self-attention)" if case["self"] else
              f"query of shape {case['query'].shape}, key and value of shape {case['key'].shape}")
    return f"MultiheadAttention({case['E']}, {case['H']}, batch_first=True) with given weights, {inputs}, {masks}"


def _case_mha(case, query=None, key=None, value=None):
    bias = _np_mha_bias(case["attn_mask"], case["key_padding_mask"], case["query"].shape[0], case["H"],
                        case["query"].shape[1], case["key"].shape[1])
    return _np_mha(case, case["query"] if query is None else query, case["key"] if key is None else key,
                   case["value"] if value is None else value, case["E"], case["H"], bias)


@check(task="12.10", points=3, inputs=_mha_case(), examples=20, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"{_mha_words(case)}: the output and the weights (average_attn_weights="
                             f"{case['average']}), and the output with need_weights=False")
def mha_forward_matches_numpy_multihead_attention(tt, case):
    module = _mha_module(tt, case)
    masks = {"attn_mask": case["attn_mask"], "key_padding_mask": case["key_padding_mask"]}
    q, k, v = (tt.Tensor(case[name]) for name in ("query", "key", "value"))
    out, weights = module(q, k, v, average_attn_weights=case["average"], **masks)
    quiet, none = module(q, k, v, need_weights=False, **masks)
    return {"output": out.numpy(), "weights": weights.numpy(), "need_weights=False: output": quiet.numpy(),
            "need_weights=False: weights is None": none is None,
            "weights.requires_grad (for inspection: no graph)": bool(weights.requires_grad)}


@mha_forward_matches_numpy_multihead_attention.expected
def _(case):
    out, weights = _case_mha(case)
    return {"output": out, "weights": weights.mean(axis=1) if case["average"] else weights,
            "need_weights=False: output": out, "need_weights=False: weights is None": True,
            "weights.requires_grad (for inspection: no graph)": False}


@check(task="12.10", points=2, inputs=_mha_case(np.float64, small=True), examples=10, **GRAD_TOL,
       describe=lambda case: f"query.grad, key.grad and value.grad after the output of {_mha_words(case)} (float64 "
                             f"inputs, need_weights=False) .backward(g), g of ones")
def mha_input_gradients_match_central_differences(tt, case):
    module = _mha_module(tt, case)
    masks = {"attn_mask": case["attn_mask"], "key_padding_mask": case["key_padding_mask"]}
    names = ("query",) if case["self"] else ("query", "key", "value")
    leaves = [tt.Tensor(case[name], requires_grad=True) for name in names]
    inputs = leaves * 3 if case["self"] else leaves
    out, _ = module(*inputs, need_weights=False, **masks)
    out.backward(tt.Tensor(np.ones(out.shape)))
    return [leaf.grad.numpy() for leaf in leaves]


@mha_input_gradients_match_central_differences.expected
def _(case):
    g = np.ones(case["query"].shape)
    if case["self"]:
        return central_difference(lambda x: _case_mha(case, x, x, x)[0], [case["query"]], g)
    return central_difference(lambda q, k, v: _case_mha(case, q, k, v)[0], [case["query"], case["key"], case["value"]],
                              g)


@check(task="12.10", points=1, inputs=_mha_case(np.float64, small=True), examples=6, **GRAD_TOL,
       describe=lambda case: f"in_proj_weight.grad and in_proj_bias.grad after the output of {_mha_words(case)} "
                             f"(need_weights=False) .backward(g), g of ones")
def mha_projection_gradients_land_in_the_right_rows(tt, case):
    module = _mha_module(tt, case)
    out, _ = module(*(tt.Tensor(case[name]) for name in ("query", "key", "value")), need_weights=False,
                    attn_mask=case["attn_mask"], key_padding_mask=case["key_padding_mask"])
    out.backward(tt.Tensor(np.ones(out.shape)))
    return [module.in_proj_weight.grad.numpy(), module.in_proj_bias.grad.numpy()]


@mha_projection_gradients_land_in_the_right_rows.expected
def _(case):
    def output(w, b):
        weights = {**case, "in_proj_weight": w, "in_proj_bias": b}
        bias = _np_mha_bias(case["attn_mask"], case["key_padding_mask"], case["query"].shape[0], case["H"],
                            case["query"].shape[1], case["key"].shape[1])
        return _np_mha(weights, case["query"], case["key"], case["value"], case["E"], case["H"], bias)[0]
    return central_difference(output, [case["in_proj_weight"], case["in_proj_bias"]], np.ones(case["query"].shape))


# ---------------------------------------------------------------------------------------------------
# Family: what a function is given, it leaves as it found it (guards: a function that does nothing passes)


UNCHANGED = {"_attention_weights": ("12.4", 1), "_ScaledDotProductAttention.backward": ("12.5", 1),
             "scaled_dot_product_attention": ("12.6", 1), "_mha_bias": ("12.7", 1),
             "MultiheadAttention": ("12.10", 1)}
_SCORES_HINT = "scale the scores (a new array from np.matmul), never q or k: q *= scale writes into the caller's query"
_MASK_HINT = ("a float mask of the right dtype is the bias itself (astype(dtype, copy=False) does not copy it): add "
              "it to the scores or into a new array (bias + padding), never the other way round")
_UNCHANGED_HINTS = {"q": _SCORES_HINT, "k": _SCORES_HINT, "query": _SCORES_HINT, "key": _SCORES_HINT,
                    "v": "v is only read: the output is np.matmul(p, v), a new array", "value": "value is only read",
                    "bias": _MASK_HINT, "mask": _MASK_HINT, "attn_mask": _MASK_HINT, "key_padding_mask": _MASK_HINT,
                    "g": "the upstream gradient belongs to the caller: compute ḡ_P into a new array and work in place "
                         "on that one"}


@st.composite
def _float_mha_mask_case(draw):
    """_mha_bias's masks, float64 ones given with dtype float64 (so that a float mask is used without a copy)."""
    case = draw(_mha_mask_case())
    B, H, L, S = case["B"], case["H"], case["L"], case["S"]
    case["attn_mask"] = np.asarray(draw(signed_arrays(draw(st.sampled_from([(L, S), (B * H, L, S)])), 0.1, 3.0)))
    case["key_padding_mask"] = np.asarray(draw(signed_arrays((B, S), 0.1, 3.0)))
    return case


def _unchanged_case(function):
    if function == "_attention_weights":
        case = _qkv_case(np.float32, kinds=("float",))
    elif function == "_ScaledDotProductAttention.backward":
        case = _qkv_case(np.float64, gradient=True)
    elif function == "scaled_dot_product_attention":
        case = _sdpa_case()
    elif function == "_mha_bias":
        case = _float_mha_mask_case()
    else:
        case = _mha_case()
    return case.map(lambda c: {**c, "function": function})


_GIVEN = {"_attention_weights": ("q", "k", "v", "bias"), "_ScaledDotProductAttention.backward": ("g",),
          "scaled_dot_product_attention": ("q", "k", "v", "mask"), "_mha_bias": ("attn_mask", "key_padding_mask"),
          "MultiheadAttention": ("query", "key", "value", "attn_mask", "key_padding_mask")}


def _unchanged_words(case):
    function = case["function"]
    if function == "_attention_weights":
        return (f"_attention_weights(q, k, bias, scale) and _ScaledDotProductAttention.apply(q, k, v, bias=bias, "
                f"scale=scale) for {_qkv_words(case)}")
    if function == "_ScaledDotProductAttention.backward":
        return f"_ScaledDotProductAttention.apply(q, k, v, bias, scale).backward(g) for {_qkv_words(case, 'float64')}"
    if function == "scaled_dot_product_attention":
        return _sdpa_words(case) + ", q, k, v given as arrays"
    if function == "_mha_bias":
        return _mha_mask_words(case).replace("float32)", "float64)")
    return _mha_words(case) + ", the inputs given as arrays"


@check(guard=True, examples=10, variants={function: (*UNCHANGED[function], _unchanged_case(function))
                                          for function in UNCHANGED},
       describe=lambda case: _unchanged_words(case) + ": the inputs afterwards")
def functions_leave_their_inputs_unchanged(tt, case):
    attention, function = module(tt, "attention"), case["function"]
    given = {name: None if case.get(name) is None else np.array(case[name]) for name in _GIVEN[function]}
    if function == "_attention_weights":
        attention._attention_weights(given["q"], given["k"], given["bias"], case["scale"])
        attention._ScaledDotProductAttention.apply(tt.Tensor(given["q"]), tt.Tensor(given["k"]),
                                                   tt.Tensor(given["v"]), bias=given["bias"], scale=case["scale"])
    elif function == "_ScaledDotProductAttention.backward":
        given["g"] = tt.Tensor(given["g"])
        _fused(tt, case, *(tt.Tensor(case[name], requires_grad=True) for name in ("q", "k", "v"))).backward(given["g"])
    elif function == "scaled_dot_product_attention":
        tt.nn.functional.scaled_dot_product_attention(given["q"], given["k"], given["v"],
                                                      **_sdpa_arguments(case, given["mask"]))
    elif function == "_mha_bias":
        attention._mha_bias(given["attn_mask"], given["key_padding_mask"], case["B"], case["H"], case["L"], case["S"],
                            np.float64)
    else:
        _mha_module(tt, case)(given["query"], given["key"], given["value"], attn_mask=given["attn_mask"],
                              key_padding_mask=given["key_padding_mask"])
    return {name: held(tt, value) for name, value in given.items()}


@functions_leave_their_inputs_unchanged.verdict
def _(case, output):
    for name in _GIVEN[case["function"]]:
        expect_unchanged(_unchanged_words(case), {name: case.get(name)}, output, "what a function is given stays "
                         f"as it was, the caller may use it again: {_UNCHANGED_HINTS[name]}")
