"""Hidden suite of 13_transformer: layer normalisation (the fused Function's forward for one or more normalised axes,
with and without weight and bias; its backward against float64 central differences and only the gradients asked for;
`layer_norm` and `LayerNorm` with PyTorch's arguments and initialisation), the GELU feed-forward block, lean causal
self-attention (against an independent numpy multi-head attention), the pre-norm block (forward, gradients against
central differences, the cache passed on), the key-value cache (pieces, one token or several after cached ones, equal
the whole), sampling (greedy, the documented single draw per sequence, temperature, top-k, the errors), the GPT
(parameters, GPT-2's initialisation replayed draw by draw, weight tying, logits and loss against a numpy GPT with the
same weights) and `GPT.generate` (greedy and seeded sampling against a numpy loop, past block_size, with the cache,
feeding only the newest token, and without; under no_grad; the mode restored, also on an error). Families: causality
in the attention, the block and the GPT; the LayerNorm over its operand forms; Dropout(0.5) applied in training mode.
Guards: the upstream gradient and the logits are read only, a Dropout of p = 0 is not called (it would draw a mask),
greedy sampling draws nothing.

Every `expected` is an independent numpy computation in float64 with the case's weights; products by
`np.einsum` (no BLAS on the judge's side: OpenBLAS called from several grading threads can spin). Private
names are reached as `tinytorch.core.transformer`, so that points follow the work.
"""

import math

import numpy as np
from hypothesis import strategies as st

from checklib import (
    CheckFailed,
    assert_close,
    capture_error,
    central_difference,
    check,
    draws_around,
    expect_causal,
    expect_error,
    expect_gradients_asked_for,
    expect_no_draws,
    expect_unchanged,
    gradients_asked_for,
    held,
    leaf_gradients,
    module,
    signed_arrays,
)

GRAD_TOL = {"rtol": 1e-4, "atol": 1e-5}

# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _ln_apply(tt, case, x, w, b):
    """_LayerNorm.apply with the operands the case has."""
    operands = [o for o in (w, b) if o is not None]
    return module(tt, "transformer")._LayerNorm.apply(x, *operands, axes=case["axes"], eps=case["eps"])


def _load(module, params):
    module.load_state_dict({name: np.asarray(value, dtype=np.float32) for name, value in params.items()})
    return module


def _gpt(tt, case):
    """The case's GPT holding the case's weights."""
    return _load(tt.models.GPT(*(case["config"][key] for key in ("V", "block", "L", "H", "C"))), case["params"])


def _block_module(tt, case):
    return _load(tt.models.TransformerBlock(case["C"], case["H"]), case["params"])


def _attention_module(tt, case):
    return _load(tt.models.CausalSelfAttention(case["C"], case["H"]), case["params"])


def _causal(run, x, later, t):
    """run's outputs up to position t (axis 1) for x, and for x with its positions after t replaced by later."""
    changed = x.copy()
    changed[:, t + 1:] = later
    return {"before": run(x).numpy()[:, :t + 1], "after": run(changed).numpy()[:, :t + 1]}


def _lengths_fed(model):
    """Make the model record the length of the idx each forward call gets; the list it records them in."""
    lengths, forward = [], model.forward

    def recorded(idx, *args, **kwargs):
        lengths.append(int(np.shape(idx)[-1]))
        return forward(idx, *args, **kwargs)
    model.forward = recorded
    return lengths


class _RecordingCache:
    """Stands in for a KVCache (task 13.7, later than the block): records the shapes of the q, k, v the attention
    hands it and attends causally over them alone, so a block that passes it on computes what it computes
    without a cache."""

    def __init__(self, tt):
        self.tt, self.calls = tt, []

    def attend(self, q, k, v):
        self.calls.append([list(q.shape), list(k.shape), list(v.shape)])
        return self.tt.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


# ---------------------------------------------------------------------------------------------------
# Judge side: independent numpy, float64


def _np_ln(x, w=None, b=None, axes=1, eps=1e-5):
    x = np.asarray(x, np.float64)
    dims = tuple(range(x.ndim - axes, x.ndim))
    mu = x.mean(axis=dims, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=dims, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * np.asarray(w, np.float64)
    if b is not None:
        y = y + np.asarray(b, np.float64)
    return y


_ERF = np.vectorize(math.erf)


def _np_gelu(x):
    return x * 0.5 * (1.0 + _ERF(x / math.sqrt(2.0)))


def _np_linear(x, params, name, bias=True):
    y = np.einsum("...i,oi->...o", x, np.asarray(params[name + ".weight"], np.float64))
    return y + np.asarray(params[name + ".bias"], np.float64) if bias else y


def _np_softmax(scores):
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - top)
    return e / e.sum(axis=-1, keepdims=True)


def _np_attention(params, prefix, x, C, H):
    """Causal multi-head self-attention with c_attn / c_proj weights under `prefix`, head by head."""
    D, T = C // H, x.shape[-2]
    qkv = _np_linear(x, params, prefix + "c_attn")
    hidden = np.triu(np.ones((T, T), bool), 1)
    heads = []
    for h in range(H):
        q, k, v = (qkv[..., i * C + h * D:i * C + (h + 1) * D] for i in range(3))
        scores = np.where(hidden, -np.inf, np.einsum("...ld,...sd->...ls", q, k) / math.sqrt(D))
        heads.append(np.einsum("...ls,...sd->...ld", _np_softmax(scores), v))
    return _np_linear(np.concatenate(heads, axis=-1), params, prefix + "c_proj")


def _np_mlp(params, prefix, x):
    return _np_linear(_np_gelu(_np_linear(x, params, prefix + "c_fc")), params, prefix + "c_proj")


def _np_block(params, prefix, x, C, H):
    norm = lambda name, y: _np_ln(y, params[prefix + name + ".weight"], params[prefix + name + ".bias"])
    x = x + _np_attention(params, prefix + "attn.", norm("ln_1", x), C, H)
    return x + _np_mlp(params, prefix + "mlp.", norm("ln_2", x))


def _np_gpt(params, config, idx):
    """Logits (B, T, V) of the GPT with these weights."""
    idx = np.asarray(idx)
    x = np.asarray(params["wte.weight"], np.float64)[idx] + np.asarray(params["wpe.weight"], np.float64)[
        np.arange(idx.shape[-1])]
    for i in range(config["L"]):
        x = _np_block(params, f"h.{i}.", x, config["C"], config["H"])
    x = _np_ln(x, params["ln_f.weight"], params["ln_f.bias"])
    return np.einsum("btc,vc->btv", x, np.asarray(params["lm_head.weight"], np.float64))


def _np_sample(logits, temperature, top_k, generator):
    """The documented draw: greedy at 0; else one uniform per row, first index whose cumulative probability
    exceeds u times the total, over the logits kept by top_k."""
    logits = np.asarray(logits, np.float64)
    if temperature == 0:
        return logits.argmax(axis=-1)
    logits = logits / temperature
    if top_k is not None:
        kth = -np.sort(-logits, axis=-1)[:, min(top_k, logits.shape[-1]) - 1:][:, :1]
        logits = np.where(logits < kth, -np.inf, logits)
    cumulative = np.cumsum(np.exp(logits - logits.max(axis=-1, keepdims=True)), axis=-1)
    u = generator.random((len(logits), 1)) * cumulative[:, -1:]
    return np.array([min(int(np.searchsorted(row, value, side="right")), logits.shape[-1] - 1)
                     for row, value in zip(cumulative, u[:, 0])])


def _np_generate(params, config, prompt, steps, temperature, top_k, seed):
    idx = np.asarray(prompt)
    generator = np.random.default_rng(seed)
    for _ in range(steps):
        logits = _np_gpt(params, config, idx[:, -config["block"]:])[:, -1]
        idx = np.concatenate([idx, _np_sample(logits, temperature, top_k, generator)[:, None]], axis=1)
    return idx


# ---------------------------------------------------------------------------------------------------
# Cases


def _param_shapes(config):
    V, B, C = config["V"], config["block"], config["C"]
    shapes = {"wte.weight": (V, C), "wpe.weight": (B, C)}
    for i in range(config["L"]):
        shapes.update(_block_shapes(C, f"h.{i}."))
    shapes.update({"ln_f.weight": (C,), "ln_f.bias": (C,), "lm_head.weight": (V, C)})
    return shapes


def _block_shapes(C, prefix=""):
    return {prefix + "ln_1.weight": (C,), prefix + "ln_1.bias": (C,), **_attention_shapes(C, prefix + "attn."),
            prefix + "ln_2.weight": (C,), prefix + "ln_2.bias": (C,), prefix + "mlp.c_fc.weight": (4 * C, C),
            prefix + "mlp.c_fc.bias": (4 * C,), prefix + "mlp.c_proj.weight": (C, 4 * C),
            prefix + "mlp.c_proj.bias": (C,)}


def _attention_shapes(C, prefix=""):
    return {prefix + "c_attn.weight": (3 * C, C), prefix + "c_attn.bias": (3 * C,), prefix + "c_proj.weight": (C, C),
            prefix + "c_proj.bias": (C,)}


def _draw_params(shapes, seed, scale=0.5):
    """float32 weights from a seeded generator; LayerNorm weights around 1."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in shapes.items():
        value = rng.standard_normal(shape) * scale
        if ".ln_" in name or name.startswith("ln_"):
            value = value * 0.3 + (1.0 if name.endswith("weight") else 0.0)
        params[name] = value.astype(np.float32)
    return params


@st.composite
def _ln_case(draw, dtype=np.float32, gradient=False, affines=("none", "weight", "both")):
    """x normalised over its last one or two axes, and the operands of one of the affine forms."""
    axes = draw(st.integers(1, 2))
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    normalized = tuple(draw(st.lists(st.integers(2, 5), min_size=axes, max_size=axes)))
    affine = draw(st.sampled_from(affines))
    case = {"axes": axes, "affine": affine, "eps": draw(st.sampled_from([1e-5, 1e-3]))}
    offset = draw(st.floats(-3, 3))
    case["x"] = (np.asarray(draw(signed_arrays(lead + normalized, 0.1, 3.0)), np.float64) + offset).astype(dtype)
    case["w"] = None if affine == "none" else np.asarray(draw(signed_arrays(normalized, 0.2, 2.0)), dtype)
    case["b"] = None if affine != "both" else np.asarray(draw(signed_arrays(normalized, 0.1, 2.0)), dtype)
    if gradient:
        case["g"] = draw(signed_arrays(lead + normalized, 0.25, 2.0))
    return case


def _per_form(task, forms, dtype=np.float32, gradient=False):
    """A family's table over the operand forms: form -> (task, one point, cases of those affine forms)."""
    return {name: (task, 1, _ln_case(dtype, gradient, affines)) for name, affines in forms.items()}


def _ln_operands(tt, case):
    """The case's operands as Tensors (None where it has none)."""
    return [None if case[name] is None else tt.Tensor(case[name]) for name in ("x", "w", "b")]


def _ln_words(case):
    with_ = {"none": "no weight or bias", "weight": "a weight", "both": "a weight and a bias"}[case["affine"]]
    return (f"x of shape {case['x'].shape} ({case['x'].dtype}) normalised over its last {case['axes']} axes, "
            f"{with_}, eps={case['eps']}")


# ---------------------------------------------------------------------------------------------------
# 13.1 _LayerNorm.forward


@check(variants=_per_form("13.1", {"no weight or bias": ("none",), "a weight, or a weight and a bias": (
           "weight", "both")}), examples=12, dtype=True, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"_LayerNorm.apply(x, ...) for {_ln_words(case)}")
def layer_norm_forward_matches_numpy(tt, case):
    return _ln_apply(tt, case, *_ln_operands(tt, case)).numpy()


@layer_norm_forward_matches_numpy.expected
def _(case):
    return _np_ln(case["x"], case["w"], case["b"], case["axes"], case["eps"]).astype(np.float32)


@check(task="13.1", points=1, inputs=_ln_case(np.float64), examples=10, dtype=True, rtol=1e-9, atol=1e-9,
       describe=lambda case: f"_LayerNorm.apply(x, ...) for {_ln_words(case)}: float64 in, float64 out, and the "
                             f"input left unchanged")
def layer_norm_forward_keeps_float64_and_its_input(tt, case):
    x, w, b = _ln_operands(tt, {**case, "x": case["x"].copy()})
    return {"out": _ln_apply(tt, case, x, w, b).numpy(), "input": x.numpy()}


@layer_norm_forward_keeps_float64_and_its_input.expected
def _(case):
    return {"out": _np_ln(case["x"], case["w"], case["b"], case["axes"], case["eps"]), "input": case["x"]}


# ---------------------------------------------------------------------------------------------------
# 13.2 _LayerNorm.backward


def _ln_inputs(case):
    return [case[name] for name in ("x", "w", "b") if case[name] is not None]


def _np_ln_of(case):
    """The numpy layer norm of the case's axes and eps, of the operands it has (x, w, b)."""
    return lambda *arrays: _np_ln(*(list(arrays) + [None, None])[:3], case["axes"], case["eps"])


@check(variants=_per_form("13.2", {"no weight or bias": ("none",), "a weight": ("weight",),
                                   "a weight and a bias": ("both",)}, np.float64, gradient=True),
       examples=7, **GRAD_TOL, describe=lambda case: f"the gradients of every operand after _LayerNorm.apply(x, ...)"
                                                     f".backward(g) for {_ln_words(case)}")
def layer_norm_gradients_match_central_differences(tt, case):
    return leaf_gradients(tt, lambda *leaves: _ln_apply(tt, case, *(list(leaves) + [None, None])[:3]),
                          _ln_inputs(case), case["g"])


layer_norm_gradients_match_central_differences.expected(
    lambda case: central_difference(_np_ln_of(case), _ln_inputs(case), case["g"]))


@check(task="13.2", points=1, inputs=_ln_case(np.float64, gradient=True, affines=("both",)), examples=5, **GRAD_TOL,
       describe=lambda case: f"_LayerNorm.apply(x, w, b).backward(g) for {_ln_words(case)}, with only x requiring "
                             f"grad, then only w, then only b: the gradients")
def layer_norm_backward_computes_the_gradients_asked_for(tt, case):
    return gradients_asked_for(tt, lambda *tensors: _ln_apply(tt, case, *tensors), _ln_inputs(case), case["g"],
                               ["x", "w", "b"], function=module(tt, "transformer")._LayerNorm)


layer_norm_backward_computes_the_gradients_asked_for.verdict(lambda case, output: expect_gradients_asked_for(
    layer_norm_backward_computes_the_gradients_asked_for.what(case), output, ["x", "w", "b"], central_difference(
        _np_ln_of(case), _ln_inputs(case), case["g"]), "a frozen layer's weight gradient is wasted work", **GRAD_TOL))


# ---------------------------------------------------------------------------------------------------
# 13.3 layer_norm and LayerNorm


@check(task="13.3", points=1, inputs=_ln_case(), examples=15, dtype=True, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"nn.functional.layer_norm(x, normalized_shape, weight, bias, eps) for {_ln_words(case)} "
                             f"(an int normalized_shape for one axis), and with the bias only")
def functional_layer_norm_matches_numpy(tt, case):
    shape = case["x"].shape[-case["axes"]:]
    normalized = shape[0] if case["axes"] == 1 else shape
    F = tt.nn.functional
    out = F.layer_norm(tt.Tensor(case["x"]), normalized, None if case["w"] is None else tt.Tensor(case["w"]),
                       None if case["b"] is None else tt.Tensor(case["b"]), eps=case["eps"]).numpy()
    bias = np.full(shape, 0.5, np.float32)
    return {"out": out, "bias only": F.layer_norm(tt.Tensor(case["x"]), shape, None, tt.Tensor(bias),
                                                  eps=case["eps"]).numpy()}


@functional_layer_norm_matches_numpy.expected
def _(case):
    out = _np_ln(case["x"], case["w"], case["b"], case["axes"], case["eps"]).astype(np.float32)
    bias_only = _np_ln(case["x"], None, None, case["axes"], case["eps"]) + 0.5
    return {"out": out, "bias only": bias_only.astype(np.float32)}


_LN_OPTIONS = [((6,), {}), (7, {}), ((2, 3), {}), (5, {"elementwise_affine": False}), (4, {"bias": False}),
               (3, {"eps": 1e-3})]


@check(task="13.3", points=1, describe=lambda case: "nn.LayerNorm(normalized_shape, ...) for " + "; ".join(
    f"{shape}, {kw}" for shape, kw in _LN_OPTIONS) + ": normalized_shape, eps, the parameters and their values")
def layer_norm_module_has_pytorchs_parameters(tt, case):
    found = []
    for shape, kw in _LN_OPTIONS:
        module = tt.nn.LayerNorm(shape, **kw)
        found.append({"normalized_shape": list(module.normalized_shape), "eps": float(module.eps),
                      "parameters": {name: p.numpy() for name, p in module.named_parameters()},
                      "weight is None": module.weight is None, "bias is None": module.bias is None})
    return found


@layer_norm_module_has_pytorchs_parameters.expected
def _(case):
    found = []
    for shape, kw in _LN_OPTIONS:
        shape, affine = (shape,) if isinstance(shape, int) else shape, kw.get("elementwise_affine", True)
        bias = affine and kw.get("bias", True)
        params = {"weight": np.ones(shape, np.float32), **({"bias": np.zeros(shape, np.float32)} if bias else {})}
        params = params if affine else {}
        found.append({"normalized_shape": list(shape), "eps": kw.get("eps", 1e-5), "parameters": params,
                      "weight is None": not affine, "bias is None": not bias})
    return found


@check(task="13.3", points=1, inputs=_ln_case().filter(lambda c: c["affine"] == "both"), examples=10, rtol=1e-4,
       atol=1e-4, describe=lambda case: f"nn.LayerNorm(normalized_shape) holding weight and bias, on "
                                        f"{_ln_words(case)}; then on an input whose last axis is one longer "
                                        f"(the error)")
def layer_norm_module_forward_and_its_error(tt, case):
    shape = case["x"].shape[-case["axes"]:]
    module = tt.nn.LayerNorm(shape, eps=case["eps"])
    module.load_state_dict({"weight": case["w"], "bias": case["b"]})
    wrong = np.ones(case["x"].shape[:-1] + (case["x"].shape[-1] + 1,), np.float32)
    plain = tt.nn.functional.layer_norm
    error = capture_error(lambda: module(tt.Tensor(wrong)))["raised"]
    return {"out": module(tt.Tensor(case["x"])).numpy(), "error": error, "layer_norm without a weight: error":
            capture_error(lambda: plain(tt.Tensor(wrong), wrong.shape[-1] - 1))["raised"]}


layer_norm_module_forward_and_its_error.expected(lambda case: {
    "out": _np_ln(case["x"], case["w"], case["b"], case["axes"], case["eps"]), "error": "ValueError",
    "layer_norm without a weight: error": "ValueError"})


# ---------------------------------------------------------------------------------------------------
# 13.4 MLP


@st.composite
def _mlp_case(draw):
    C, seed = draw(st.integers(1, 6)), draw(st.integers(0, 2**31))
    lead = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    rng = np.random.default_rng(seed + 1)
    return {"C": C, "params": _draw_params({"c_fc.weight": (4 * C, C), "c_fc.bias": (4 * C,),
                                            "c_proj.weight": (C, 4 * C), "c_proj.bias": (C,)}, seed),
            "x": rng.standard_normal(lead + (C,)).astype(np.float32)}


@check(task="13.4", points=1, describe=lambda case: "models.MLP(5) and MLP(3, bias=False): the parameters' names "
                                                    "and shapes")
def mlp_has_the_layers(tt, case):
    return [[(name, list(p.shape)) for name, p in tt.models.MLP(*args, **kw).named_parameters()]
            for args, kw in (((5,), {}), ((3,), {"bias": False}))]


@mlp_has_the_layers.expected
def _(case):
    return [[("c_fc.weight", [20, 5]), ("c_fc.bias", [20]), ("c_proj.weight", [5, 20]), ("c_proj.bias", [5])],
            [("c_fc.weight", [12, 3]), ("c_proj.weight", [3, 12])]]


@check(task="13.4", points=1, inputs=_mlp_case(), examples=15, rtol=1e-4, atol=1e-4,
       describe=lambda case: f"models.MLP({case['C']}) holding the case's weights, on x of shape {case['x'].shape}")
def mlp_forward_matches_numpy(tt, case):
    return _load(tt.models.MLP(case["C"]), case["params"])(tt.Tensor(case["x"])).numpy()


@mlp_forward_matches_numpy.expected
def _(case):
    return _np_mlp(case["params"], "", np.asarray(case["x"], np.float64))


# ---------------------------------------------------------------------------------------------------
# 13.5 CausalSelfAttention


@st.composite
def _attention_case(draw, shapes=_attention_shapes, dtype=np.float32, gradient=False):
    H, D = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    B, T, seed = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(0, 2**31))
    C = H * D
    rng = np.random.default_rng(seed + 1)
    case = {"C": C, "H": H, "params": _draw_params(shapes(C), seed), "x": rng.standard_normal((B, T, C)).astype(dtype),
            "t": draw(st.integers(0, T - 1))}
    case["later"] = rng.standard_normal((B, T - case["t"] - 1, C)).astype(dtype)
    if gradient:
        case["g"] = draw(signed_arrays((B, T, C), 0.25, 2.0))
    return case


def _attention_words(case, what="models.CausalSelfAttention"):
    return f"{what}({case['C']}, {case['H']}) holding the case's weights, on x of shape {case['x'].shape}"


@check(task="13.5", points=2, inputs=_attention_case(), examples=20, rtol=1e-4, atol=1e-4,
       describe=lambda case: _attention_words(case) + ": the output, and q, k, v from _qkv(x); and "
                                                      "CausalSelfAttention(6, 4) and (8, 0) (the errors)")
def causal_attention_matches_numpy(tt, case):
    module = _attention_module(tt, case)
    q, k, v = module._qkv(tt.Tensor(case["x"]))
    return {"out": module(tt.Tensor(case["x"])).numpy(), "q": q.numpy(), "k": k.numpy(), "v": v.numpy(),
            "CausalSelfAttention(6, 4)": capture_error(lambda: tt.models.CausalSelfAttention(6, 4))["raised"],
            "CausalSelfAttention(8, 0)": capture_error(lambda: tt.models.CausalSelfAttention(8, 0))["raised"]}


@causal_attention_matches_numpy.expected
def _(case):
    C, H = case["C"], case["H"]
    x = np.asarray(case["x"], np.float64)
    qkv = _np_linear(x, case["params"], "c_attn")
    B, T = x.shape[:2]
    split = qkv.reshape(B, T, 3, H, C // H).transpose(2, 0, 3, 1, 4)
    return {"out": _np_attention(case["params"], "", x, C, H), "q": split[0], "k": split[1], "v": split[2],
            "CausalSelfAttention(6, 4)": "ValueError", "CausalSelfAttention(8, 0)": "ValueError"}


# ---------------------------------------------------------------------------------------------------
# 13.6 TransformerBlock


@check(task="13.6", points=1, inputs=_attention_case(_block_shapes), examples=15, rtol=1e-4, atol=1e-4,
       describe=lambda case: _attention_words(case, "models.TransformerBlock") + ": the output")
def block_matches_numpy(tt, case):
    return _block_module(tt, case)(tt.Tensor(case["x"])).numpy()


@block_matches_numpy.expected
def _(case):
    return _np_block(case["params"], "", np.asarray(case["x"], np.float64), case["C"], case["H"])


@check(task="13.6", points=1, inputs=_attention_case(_block_shapes, np.float64, gradient=True), examples=6,
       **GRAD_TOL, describe=lambda case: "x.grad after TransformerBlock(x).backward(g) for " + _attention_words(
           case, "TransformerBlock") + " (float64)")
def block_gradient_matches_central_differences(tt, case):
    module = _block_module(tt, case)
    return leaf_gradients(tt, lambda x: module(x), [case["x"]], case["g"])


@check(task="13.6", points=1, inputs=_attention_case(_block_shapes), examples=10, rtol=1e-4, atol=1e-4,
       describe=lambda case: _attention_words(case, "models.TransformerBlock") + ", called as block(x, cache) with a "
                             "stand-in cache that attends causally: the output and the shapes of q, k, v its "
                             "attend(q, k, v) received")
def block_passes_its_cache_to_the_attention(tt, case):
    cache = _RecordingCache(tt)
    out = _block_module(tt, case)(tt.Tensor(case["x"]), cache).numpy()
    return {"out": out, "attend calls": cache.calls}


@block_passes_its_cache_to_the_attention.verdict
def _(case, output):
    B, T, C = case["x"].shape
    H = case["H"]
    what = _attention_words(case, "TransformerBlock") + ", called as block(x, cache)"
    heads = [B, H, T, C // H]
    if output["attend calls"] != [[heads, heads, heads]]:
        raise CheckFailed(f"{what}: expected the cache's attend to be called once with q, k, v of shape {heads}, got "
                          f"the calls {output['attend calls']}: pass cache on to the attention, "
                          f"self.attn(self.ln_1(x), cache)", f"{what}: the cache did not reach the attention: pass it "
                                                             f"on, self.attn(self.ln_1(x), cache)")
    right = _np_block(case["params"], "", np.asarray(case["x"], np.float64), C, H)
    if np.shape(output["out"]) != right.shape or not np.allclose(output["out"], right, rtol=1e-4, atol=1e-4):
        raise CheckFailed(f"{what}: the output is not the block's")


@block_gradient_matches_central_differences.expected
def _(case):
    return central_difference(lambda x: _np_block(case["params"], "", x, case["C"], case["H"]), [case["x"]], case["g"])


# ---------------------------------------------------------------------------------------------------
# 13.7 KVCache


@check(task="13.7", points=2, inputs=_attention_case(), examples=15, rtol=1e-4, atol=1e-4,
       describe=lambda case: _attention_words(case) + f" with a KVCache: x fed as positions 0..{case['t']}, then one "
                             f"at a time; the outputs, the cache's length, and one position too many (the error); "
                             f"and x fed to a new KVCache as position 0, then two positions at a time (several new "
                             f"tokens after cached ones: the mask's k=length_before)")
def kv_cache_pieces_equal_the_whole(tt, case):
    module, t = _attention_module(tt, case), case["t"]
    B, T, C = case["x"].shape
    cache, pairs = (tt.models.KVCache(B, case["H"], T, C // case["H"]) for _ in range(2))
    pieces = [module(tt.Tensor(case["x"][:, :t + 1]), cache).numpy()]
    pieces += [module(tt.Tensor(case["x"][:, i:i + 1]), cache).numpy() for i in range(t + 1, T)]
    error = capture_error(lambda: module(tt.Tensor(case["x"][:, :1]), cache))["raised"]
    two = [module(tt.Tensor(case["x"][:, a:a + 2 - (a == 0)]), pairs).numpy() for a in [0, *range(1, T, 2)]]
    return {"out": np.concatenate(pieces, axis=1), "length": cache.length, "error": error,
            "out, position 0 then two at a time": np.concatenate(two, axis=1)}


@kv_cache_pieces_equal_the_whole.expected
def _(case):
    out = _np_attention(case["params"], "", np.asarray(case["x"], np.float64), case["C"], case["H"])
    return {"out": out, "length": case["x"].shape[1], "error": "ValueError", "out, position 0 then two at a time": out}


# ---------------------------------------------------------------------------------------------------
# 13.8 _sample


@st.composite
def _sample_case(draw):
    B, V = draw(st.integers(1, 4)), draw(st.integers(2, 8))
    return {"logits": np.asarray(draw(signed_arrays((B, V), 0.01, 3.0)), np.float32),
            "temperature": draw(st.sampled_from([1.0, 0.5, 2.0])), "top_k": draw(st.sampled_from([None, 1, 2, 3, 9])),
            "seed": draw(st.integers(0, 2**31))}


def _sample_words(case):
    return (f"_sample(logits, temperature={case['temperature']}, top_k={case['top_k']}, generator) for logits of "
            f"shape {case['logits'].shape} and np.random.default_rng({case['seed']})")


@check(task="13.8", points=2, inputs=_sample_case(), examples=25,
       describe=lambda case: _sample_words(case) + ", three calls in a row; and temperature=0 (greedy)")
def sample_draws_as_documented(tt, case):
    sample = module(tt, "transformer")._sample
    generator = np.random.default_rng(case["seed"])
    draws = [np.asarray(sample(case["logits"], case["temperature"], case["top_k"], generator)) for _ in range(3)]
    return {"draws": np.stack(draws), "greedy": np.asarray(sample(case["logits"], 0, case["top_k"], generator))}


@sample_draws_as_documented.expected
def _(case):
    generator = np.random.default_rng(case["seed"])
    draws = [_np_sample(case["logits"], case["temperature"], case["top_k"], generator) for _ in range(3)]
    return {"draws": np.stack(draws), "greedy": np.asarray(case["logits"], np.float64).argmax(axis=-1)}


@check(task="13.8", points=1, describe=lambda case: "_sample(logits, 1.0, top_k=2, generator) 2000 times for one row "
                                                    "of probabilities [0.1, 0.2, 0.3, 0.4], 2000 times for its logits "
                                                    "+ 800 without top_k")
def sample_keeps_only_the_top_k(tt, case):
    sample = module(tt, "transformer")._sample
    generator = np.random.default_rng(0)
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4]]))
    draws = np.concatenate([sample(logits, 1.0, 2, generator) for _ in range(2000)])
    large = np.concatenate([sample(logits + 800.0, 1.0, None, generator) for _ in range(2000)])
    return {"counts": np.bincount(np.asarray(draws, np.int64), minlength=4),
            "large": np.bincount(np.asarray(large, np.int64), minlength=4)}


@sample_keeps_only_the_top_k.verdict
def _(case, output):
    counts = np.asarray(output["counts"])
    if counts.shape != (4,) or counts[:2].sum() != 0:
        raise CheckFailed(f"_sample with top_k=2: tokens outside the two largest logits were drawn (counts {counts})")
    if abs(counts[2] / 2000 - 3 / 7) > 0.05:
        raise CheckFailed(f"_sample with top_k=2: token 2 drawn {counts[2]} times of 2000, expected about "
                          f"{2000 * 3 / 7:.0f}")
    large = np.asarray(output["large"]) / 2000
    if large.shape != (4,) or np.abs(large - [0.1, 0.2, 0.3, 0.4]).max() > 0.05:
        raise CheckFailed(f"_sample for logits log([0.1, 0.2, 0.3, 0.4]) + 800: drawn with frequencies {large}, "
                          f"expected about [0.1, 0.2, 0.3, 0.4] (a stable softmax: subtract the row's maximum)")


@check(task="13.8", points=1, guard=True, describe=lambda case: "_sample(logits, temperature=-1, None, generator) and "
                                                                "_sample(logits, 1.0, top_k=0, generator): the errors")
def sample_rejects_a_negative_temperature_and_top_k_below_1(tt, case):
    sample, generator, logits = module(tt, "transformer")._sample, np.random.default_rng(0), np.zeros((1, 4))
    return [capture_error(lambda: sample(logits, -1.0, None, generator)),
            capture_error(lambda: sample(logits, 1.0, 0, generator))]


@sample_rejects_a_negative_temperature_and_top_k_below_1.verdict
def _(case, output):
    for error, name, call in zip(output, ("temperature", "top_k"), ("temperature=-1", "top_k=0")):
        expect_error(f"_sample(logits, ...) with {call}", error, "ValueError", names=[name])


@check(task="13.8", points=1, guard=True, inputs=_sample_case(), examples=10,
       describe=lambda case: _sample_words(case).replace("temperature=" + str(case["temperature"]), "temperature=0")
       + ", then generator.random(8): against np.random.default_rng(seed).random(8)")
def greedy_sample_draws_nothing(tt, case):
    generator = np.random.default_rng(case["seed"])
    module(tt, "transformer")._sample(case["logits"], 0, case["top_k"], generator)
    return {"drawn after it": generator.random(8), "drawn without it": np.random.default_rng(case["seed"]).random(8)}


@greedy_sample_draws_nothing.verdict
def _(case, output):
    expect_no_draws(f"_sample(logits, temperature=0, top_k={case['top_k']}, generator) for logits of shape "
                     f"{case['logits'].shape}", output, "temperature=0 is greedy, the argmax of each row: return it "
                                                        "before drawing u, so the generator is left as it was")


# ---------------------------------------------------------------------------------------------------
# 13.9 GPT: parameters, initialisation, tying


_CONFIG = {"V": 7, "block": 5, "L": 2, "H": 2, "C": 4}


@check(task="13.9", points=1, describe=lambda case: "models.GPT(7, 5, 2, 2, 4): the parameters' names and shapes, "
                                                    "and the attributes vocab_size, block_size, n_layer")
def gpt_has_the_parameters(tt, case):
    model = tt.models.GPT(7, 5, 2, 2, 4)
    return {"parameters": [(name, list(p.shape)) for name, p in model.named_parameters()],
            "attributes": [model.vocab_size, model.block_size, model.n_layer]}


@gpt_has_the_parameters.expected
def _(case):
    return {"parameters": [(name, list(shape)) for name, shape in _param_shapes(_CONFIG).items()],
            "attributes": [7, 5, 2]}


@check(task="13.9", points=1, describe=lambda case: "models.GPT(50, 64, 3, 2, 32) after manual_seed(0): the "
                                                    "standard deviations and means of its weights (GPT-2's "
                                                    "initialisation)")
def gpt_initialises_like_gpt2(tt, case):
    tt.manual_seed(0)
    found = {name: p.numpy() for name, p in tt.models.GPT(50, 64, 3, 2, 32).named_parameters()}
    tt.manual_seed(0)  # the modules GPT creates, alone: the generator's state when the GPT-2 draws begin
    [tt.nn.Embedding(50, 32), tt.nn.Embedding(64, 32), [tt.models.TransformerBlock(32, 2) for _ in range(3)],
     tt.nn.LayerNorm(32), tt.nn.Linear(32, 50, bias=False)]
    return {"parameters": found, "state": module(tt, "tensor").default_generator.bit_generator.state}


@gpt_initialises_like_gpt2.verdict
def _(case, output):
    state, output = output["state"], output["parameters"]
    shapes = _param_shapes({"V": 50, "block": 64, "L": 3, "H": 2, "C": 32})
    wanted = set(shapes)
    if set(output) != wanted:  # no parameters at all would pass every test below
        missing, extra = sorted(wanted - set(output)), sorted(set(output) - wanted)
        raise CheckFailed(f"GPT(50, 64, 3, 2, 32): expected the {len(wanted)} parameters of GPT-2's layout, but "
                          f"{len(missing)} are missing ({', '.join(missing[:3]) or 'none'}) and {len(extra)} are "
                          f"not expected ({', '.join(extra[:3]) or 'none'})")
    for name, value in output.items():
        value = np.asarray(value, np.float64)
        what = f"GPT(50, 64, 3, 2, 32): {name}"
        want = 0.02 / math.sqrt(6) if name.endswith("c_proj.weight") else 0.02 if value.ndim == 2 else None
        if want is not None:
            if not (abs(value.std() / want - 1) < 0.15 and abs(value.mean()) < 0.3 * want):
                raise CheckFailed(f"{what}: expected N(0, {want:.4f}²), got mean {value.mean():.4g}, std "
                                  f"{value.std():.4g}")
        elif ".ln_" in name or name.startswith("ln_"):
            fill = 1.0 if name.endswith("weight") else 0.0
            if not np.all(value == fill):
                raise CheckFailed(f"{what}: LayerNorm keeps PyTorch's initialisation ({fill:g} everywhere)")
        elif np.any(value != 0):
            raise CheckFailed(f"{what}: a Linear's bias starts at zero")
    replay = np.random.default_rng(0)
    replay.bit_generator.state = state
    drawn = {name: replay.normal(0.0, 0.02, size=shape) for name, shape in shapes.items() if len(shape) == 2}
    drawn.update({name: replay.normal(0.0, 0.02 / math.sqrt(6), size=shapes[name]) for name in shapes if
                  name.endswith("c_proj.weight")})
    for name, value in drawn.items():
        if not np.allclose(output[name], value.astype(np.float32), rtol=1e-6, atol=1e-9):
            sentence = (f"GPT(50, 64, 3, 2, 32) after manual_seed(0): {name} is not the documented draw: after "
                        f"creating the modules, draw each 2-D weight with default_generator.normal(0.0, 0.02, "
                        f"size=p.shape), one after the other in the order of named_parameters(), then every "
                        f"c_proj.weight anew (not scaled) with normal(0.0, 0.02 / sqrt(2 * n_layer), size=p.shape)")
            raise CheckFailed(sentence, sentence)


@check(task="13.9", points=1, describe=lambda case: "models.GPT(7, 5, 2, 2, 4, tie_weights=True): lm_head.weight is "
                                                    "wte.weight, counted once; and without tying, two Parameters")
def gpt_ties_the_head_to_the_embedding(tt, case):
    tied, free = tt.models.GPT(7, 5, 2, 2, 4, tie_weights=True), tt.models.GPT(7, 5, 2, 2, 4)
    return {"tied same object": tied.lm_head.weight is tied.wte.weight,
            "tied count": len(list(tied.parameters())),
            "untied same object": free.lm_head.weight is free.wte.weight, "untied count": len(list(free.parameters()))}


@gpt_ties_the_head_to_the_embedding.expected
def _(case):
    count = len(_param_shapes(_CONFIG))
    return {"tied same object": True, "tied count": count - 1, "untied same object": False, "untied count": count}


# ---------------------------------------------------------------------------------------------------
# 13.10 GPT.forward


@st.composite
def _gpt_case(draw, steps=False):
    H, D = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    config = {"V": draw(st.integers(3, 9)), "block": draw(st.integers(2, 6)), "L": draw(st.integers(1, 2)), "H": H,
              "C": H * D}
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed + 1)
    B = draw(st.integers(1, 3))
    T = draw(st.integers(1, config["block"]))
    case = {"config": config, "params": _draw_params(_param_shapes(config), seed),
            "idx": rng.integers(0, config["V"], (B, T)), "targets": rng.integers(0, config["V"], (B, T)),
            "t": draw(st.integers(0, T - 1))}
    case["later"] = rng.integers(0, config["V"], (B, T - case["t"] - 1))
    if steps:
        case["steps"] = draw(st.integers(1, 8))
        case["seed"] = draw(st.integers(0, 2**31))
        case["temperature"] = draw(st.sampled_from([1.0, 0.5, 2.0]))
        case["top_k"] = draw(st.sampled_from([None, 1, 2, 3]))
    return case


def _gpt_words(case):
    c = case["config"]
    return (f"models.GPT(vocab_size={c['V']}, block_size={c['block']}, n_layer={c['L']}, n_head={c['H']}, "
            f"n_embd={c['C']}) holding the case's weights, on idx of shape {case['idx'].shape}")


@check(task="13.10", points=1, inputs=_gpt_case(), examples=15, dtype=True, rtol=1e-4, atol=1e-4,
       describe=lambda case: _gpt_words(case) + ": the logits; and on idx longer than block_size (the error)")
def gpt_logits_match_numpy(tt, case):
    model, long = _gpt(tt, case), np.zeros((1, case["config"]["block"] + 1), np.int64)
    return {"logits": model(case["idx"]).numpy(), "idx longer than block_size": capture_error(lambda: model(long))[
        "raised"]}


@gpt_logits_match_numpy.expected
def _(case):
    return {"logits": _np_gpt(case["params"], case["config"], case["idx"]).astype(np.float32),
            "idx longer than block_size": "ValueError"}


@check(task="13.10", points=1, inputs=_gpt_case(), examples=10, rtol=1e-4, atol=1e-4,
       describe=lambda case: _gpt_words(case) + " with targets: the logits and the loss")
def gpt_loss_is_the_mean_cross_entropy(tt, case):
    logits, loss = _gpt(tt, case)(case["idx"], case["targets"])
    return {"logits": logits.numpy(), "loss": loss.numpy()}


@gpt_loss_is_the_mean_cross_entropy.expected
def _(case):
    logits = _np_gpt(case["params"], case["config"], case["idx"])
    flat, targets = logits.reshape(-1, logits.shape[-1]), case["targets"].reshape(-1)
    top = flat.max(axis=-1, keepdims=True)
    log_probs = flat - top - np.log(np.exp(flat - top).sum(axis=-1, keepdims=True))
    return {"logits": logits, "loss": np.asarray(-log_probs[np.arange(len(targets)), targets].mean())}


@check(task="13.10", points=1, inputs=_gpt_case(), examples=8, rtol=1e-4, atol=1e-4,
       describe=lambda case: _gpt_words(case) + ": the logits with the prompt fed in two parts through the same "
                             "caches (make_caches); and, once block_size positions are cached, one token more (the "
                             "error)")
def gpt_forward_with_caches_continues_the_positions(tt, case):
    model, idx = _gpt(tt, case), case["idx"]
    caches, split = model.make_caches(idx.shape[0]), max(1, case["t"])
    parts = [model(part, caches=caches).numpy() for part in (idx[:, :split], idx[:, split:]) if part.shape[1]]
    full = model.make_caches(idx.shape[0])
    model(np.zeros((idx.shape[0], case["config"]["block"]), np.int64), caches=full)
    past = capture_error(lambda: model(np.zeros((idx.shape[0], 1), np.int64), caches=full))["raised"]
    return {"logits of the two parts": np.concatenate(parts, axis=1), "one token past the cached block_size": past}


@gpt_forward_with_caches_continues_the_positions.expected
def _(case):
    return {"logits of the two parts": _np_gpt(case["params"], case["config"], case["idx"]).astype(np.float32),
            "one token past the cached block_size": "ValueError"}


# ---------------------------------------------------------------------------------------------------
# 13.11 generate


def _generate_words(case, options):
    return (_gpt_words(case).replace(f"on idx of shape {case['idx'].shape}", "") +
            f"generate(prompt of shape {case['idx'].shape}, {case['steps']}, {options})")


@check(task="13.11", points=1, inputs=_gpt_case(steps=True), examples=10,
       describe=lambda case: _generate_words(case, "temperature=0") + ", with and without the cache: the tokens, and "
                                                                      "the length of the idx each forward call got")
def generate_greedy_matches_numpy(tt, case):
    model, found = _gpt(tt, case), {}
    calls = _lengths_fed(model)
    for name, use_cache in (("cached", True), ("uncached", False)):
        calls.clear()
        found[name] = model.generate(case["idx"], case["steps"], temperature=0, use_cache=use_cache).numpy()
        found[f"{name}: lengths fed"] = list(calls)
    return found


@generate_greedy_matches_numpy.verdict
def _(case, output):
    what, tokens = _generate_words(case, "temperature=0"), _np_generate(case["params"], case["config"], case["idx"],
                                                                       case["steps"], 0, None, 0)
    assert_close({"cached": output["cached"], "uncached": output["uncached"]}, {"cached": tokens, "uncached": tokens},
                 what=what)
    fed, steps, T = output["cached: lengths fed"], case["steps"], case["idx"].shape[1]
    if len(fed) != steps or len(output["uncached: lengths fed"]) != steps:
        raise CheckFailed(f"{what}: expected one forward call per new token, {steps}, got {len(fed)} with the cache "
                          f"and {len(output['uncached: lengths fed'])} without")
    if steps >= 2 and T < case["config"]["block"] and fed[1] != 1:
        sentence = (f"{what}, use_cache=True: the second step fed {fed[1]} tokens to the model; the cache holds the "
                    f"earlier ones, so feed only the newest token, idx[:, -1:], with caches=")
        raise CheckFailed(sentence, sentence)


@check(task="13.11", points=1, guard=True, inputs=_gpt_case(steps=True), examples=5,
       describe=lambda case: _generate_words(case, f"temperature=0, generator=np.random.default_rng({case['seed']})")
       + ", with and without the cache, then generator.random(8); and the same with the default generator after "
         "tt.manual_seed(1), then tt.randn(8): the numbers drawn after it")
def greedy_generate_draws_nothing(tt, case):
    model = _gpt(tt, case)
    found = {}
    for use_cache in (True, False):
        generator = np.random.default_rng(case["seed"])
        model.generate(case["idx"], case["steps"], temperature=0, use_cache=use_cache, generator=generator)
        found[f"use_cache={use_cache}"] = {"drawn after it": generator.random(8),
                                           "drawn without it": np.random.default_rng(case["seed"]).random(8)}
        found[f"use_cache={use_cache}, default generator"] = draws_around(
            tt, lambda use_cache=use_cache: model.generate(case["idx"], case["steps"], temperature=0,
                                                           use_cache=use_cache), 1)
    return found


@greedy_generate_draws_nothing.verdict
def _(case, output):
    for name, draws in output.items():
        expect_no_draws(_generate_words(case, "temperature=0") + f" ({name})", draws,
                         "temperature=0 is greedy and draws nothing (the argmax of the last logits); in evaluation "
                         "mode no Dropout draws either")


@check(task="13.11", points=2, inputs=_gpt_case(steps=True), examples=10,
       describe=lambda case: _generate_words(case, f"temperature={case['temperature']}, top_k={case['top_k']}, "
                                                   f"generator=np.random.default_rng({case['seed']})") +
       ", with and without the cache: the tokens")
def generate_samples_with_the_cache_and_without(tt, case):
    model = _gpt(tt, case)
    out = {}
    for use_cache in (True, False):
        out["cached" if use_cache else "uncached"] = model.generate(
            case["idx"], case["steps"], temperature=case["temperature"], top_k=case["top_k"], use_cache=use_cache,
            generator=np.random.default_rng(case["seed"])).numpy()
    return out


@generate_samples_with_the_cache_and_without.expected
def _(case):
    tokens = _np_generate(case["params"], case["config"], case["idx"], case["steps"], case["temperature"],
                          case["top_k"], case["seed"])
    return {"cached": tokens, "uncached": tokens}


@check(task="13.11", points=1, inputs=_gpt_case(steps=True), examples=5,
       describe=lambda case: _generate_words(case, "temperature=1.0") + " after manual_seed twice, in training mode: "
                             "the tokens both times (repeatable), the dtype, and the mode afterwards; greedy with "
                             "dropout=0.5 (evaluation mode); and the mode after generate(prompt, 2, temperature=-1) "
                             "raised, in training mode")
def generate_uses_the_default_generator_and_restores_the_mode(tt, case):
    model = _gpt(tt, case)
    model.train()
    runs = []
    for _ in range(2):
        tt.manual_seed(case["seed"])
        runs.append(model.generate(case["idx"], case["steps"]).numpy())
    c = case["config"]
    dropping = _load(tt.models.GPT(c["V"], c["block"], c["L"], c["H"], c["C"], dropout=0.5), case["params"])
    greedy = dropping.generate(case["idx"], case["steps"], temperature=0).numpy()
    found = {"first": runs[0], "second": runs[1], "dtype": str(runs[0].dtype), "training": model.training,
             "greedy with dropout": greedy,
             "greedy without dropout": _gpt(tt, case).generate(case["idx"], case["steps"], temperature=0).numpy()}
    error = capture_error(lambda: model.generate(case["idx"], 2, temperature=-1))["raised"]
    return {**found, "temperature=-1": error, "training after the error": model.training}


@generate_uses_the_default_generator_and_restores_the_mode.verdict
def _(case, output):
    what, (B, T), first = _generate_words(case, ""), case["idx"].shape, np.asarray(output["first"])
    if first.shape != (B, T + case["steps"]) or not np.array_equal(first[:, :T], case["idx"]) or output["dtype"] != \
            "int64" or first.min() < 0 or first.max() >= case["config"]["V"]:
        raise CheckFailed(f"{what}: expected the prompt followed by {case['steps']} int64 token ids below vocab_size, "
                          f"shape {(B, T + case['steps'])}, got shape {first.shape} and dtype {output['dtype']}")
    if not np.array_equal(first, output["second"]):
        raise CheckFailed(f"{what}: the same manual_seed must give the same tokens (draw from default_generator)")
    greedy = _np_generate(case["params"], case["config"], case["idx"], case["steps"], 0, None, 0)
    if not np.array_equal(output["greedy without dropout"], greedy):
        raise CheckFailed(f"{what}: temperature=0 gives other tokens than the argmax even without dropout, so the "
                          f"mode cannot be judged: fix the greedy check of 13.11 (or 13.10's forward) first")
    if not np.array_equal(output["greedy with dropout"], greedy):
        raise CheckFailed(f"{what}: a GPT with dropout=0.5 in training mode generated other tokens than its greedy "
                          f"choice without dropout: generate must run in evaluation mode")
    if output["training"] is not True:
        raise CheckFailed(f"{what}: generate must restore the training mode it found")
    if output["training after the error"] is not True:
        raise CheckFailed(f"{what}: after generate(prompt, 2, temperature=-1) raised ({output['temperature=-1']}), the "
                          f"model was left in evaluation mode: restore the mode also on an error, self.train(mode) "
                          f"in the finally of a try around the loop")



@check(task="13.11", points=1, inputs=_gpt_case(steps=True), examples=3,
       describe=lambda case: _generate_words(case, "temperature=0") + ", with and without the cache, then the model "
                             "called on the prompt: whether the first block's outputs require grad")
def generate_builds_no_graph(tt, case):
    model, seen = _gpt(tt, case), []
    forward = model.h[0].forward  # recorded below, then the model's own call outside generate

    def recorded(*args, **kwargs):
        out = forward(*args, **kwargs)
        seen.append(bool(out.requires_grad))
        return out
    model.h[0].forward = recorded
    for use_cache in (True, False):
        model.generate(case["idx"], case["steps"], temperature=0, use_cache=use_cache)
    model(case["idx"])
    return seen


@generate_builds_no_graph.verdict
def _(case, output):
    what, steps = _generate_words(case, "temperature=0"), case["steps"]
    if len(output) != 2 * steps + 1 or output[-1] is not True:
        raise CheckFailed(f"{what}: expected one call of the first block per new token and the model's own call, "
                          f"{2 * steps + 1}, requiring grad only the last time; got {len(output)} calls")
    if any(output[:-1]):
        raise CheckFailed(*[f"{what}: the first block's outputs required grad during generate: it built the "
                            f"autograd graph of every step; run the loop under `with no_grad():`"] * 2)

# ---------------------------------------------------------------------------------------------------
# Family: what a function only reads, it leaves as it found it (guards: a function that does nothing passes)

READ_ONLY = {"_LayerNorm.backward": ("13.2", 1, _ln_case(np.float64, gradient=True)),
             "_sample": ("13.8", 1, _sample_case())}


def _read_only_words(case):
    if "g" in case:
        return "g = Tensor(upstream), _LayerNorm.apply(x, ...).backward(g), the operands leaves, for " + _ln_words(case)
    return _sample_words(case) + " for float64 logits"


@check(guard=True, examples=10, variants={v: (task, points, cases.map(lambda case, v=v: {**case, "function": v}))
                                          for v, (task, points, cases) in READ_ONLY.items()},
       describe=lambda case: _read_only_words(case) + ": what it was given, afterwards")
def functions_leave_what_they_read_unchanged(tt, case):
    if case["function"] == "_sample":
        logits = case["logits"].astype(np.float64)
        generator = np.random.default_rng(case["seed"])
        module(tt, "transformer")._sample(logits, case["temperature"], case["top_k"], generator)
        return {"the logits": held(tt, logits)}
    g = tt.Tensor(case["g"].copy())
    leaves = [tt.Tensor(a, requires_grad=True) for a in _ln_inputs(case)]
    _ln_apply(tt, case, *(leaves + [None, None])[:3]).backward(g)
    return {"g": held(tt, g)}


_READ_ONLY_ADVICE = {
    "_sample": "np.asarray(logits, dtype=np.float64) is the caller's own array when it is float64 already, so scale "
               "and mask into new arrays (logits / temperature, np.where(...)), never in place",
    "_LayerNorm.backward": "the upstream gradient belongs to the caller (another branch of the graph may read it "
                           "too); read it only, and work in place on a new array (ĝ − mean(ĝ))"}


@functions_leave_what_they_read_unchanged.verdict
def _(case, output):
    given = {"the logits": case["logits"].astype(np.float64)} if case["function"] == "_sample" else {"g": case["g"]}
    expect_unchanged(_read_only_words(case), given, output, _READ_ONLY_ADVICE[case["function"]])


# ---------------------------------------------------------------------------------------------------
# Family: causality, in the attention (13.5), the block (13.6) and the GPT (13.10): outputs up to position t
# are right and stay the same when only the inputs after t change

CAUSAL = {"CausalSelfAttention": ("13.5", 1, _attention_case()), "TransformerBlock": ("13.6", 1, _attention_case(
    _block_shapes)), "GPT": ("13.10", 1, _gpt_case())}


def _causal_words(case):
    return _gpt_words(case) if case["kind"] == "GPT" else _attention_words(case, f"models.{case['kind']}")


@check(variants={v: (task, points, cases.map(lambda case, v=v: {**case, "kind": v}))
                 for v, (task, points, cases) in CAUSAL.items()}, examples=10,
       describe=lambda case: f"{_causal_words(case)}, then again with the inputs after position {case['t']} "
                             f"changed: the outputs up to position {case['t']}")
def later_inputs_leave_earlier_outputs_alone(tt, case):
    if case["kind"] == "GPT":
        return _causal(_gpt(tt, case), case["idx"], case["later"], case["t"])
    model = (_attention_module if case["kind"] == "CausalSelfAttention" else _block_module)(tt, case)
    return _causal(lambda x: model(tt.Tensor(x)), case["x"], case["later"], case["t"])


@later_inputs_leave_earlier_outputs_alone.verdict
def _(case, output):
    if case["kind"] == "GPT":
        right = _np_gpt(case["params"], case["config"], case["idx"])
    else:
        right = (_np_attention if case["kind"] == "CausalSelfAttention" else _np_block)(
            case["params"], "", np.asarray(case["x"], np.float64), case["C"], case["H"])
    expect_causal(_causal_words(case), output, right[:, :case["t"] + 1], case["t"])


# ---------------------------------------------------------------------------------------------------
# Family: a Dropout of p = 0 is called and draws nothing, in the MLP (13.4) and the GPT's forward (13.10)
# (guards: code that does nothing draws nothing)

QUIET = {"MLP": ("13.4", 1, _mlp_case()), "GPT": ("13.10", 1, _gpt_case())}


def _quiet_words(case):
    if case["kind"] == "MLP":
        return f"models.MLP({case['C']}) (dropout=0.0, training mode) on x of shape {case['x'].shape}"
    return _gpt_words(case) + " (dropout=0.0, training mode) with targets"


@check(guard=True, examples=5, variants={v: (task, points, cases.map(lambda case, v=v: {**case, "kind": v}))
                                         for v, (task, points, cases) in QUIET.items()},
       describe=lambda case: f"tt.manual_seed(1), {_quiet_words(case)}, tt.randn(8): against tt.randn(8) right after "
                             f"tt.manual_seed(1)")
def without_dropout_draws_no_random_numbers(tt, case):
    if case["kind"] == "MLP":
        mlp = _load(tt.models.MLP(case["C"]), case["params"]).train()
        return draws_around(tt, lambda: mlp(tt.Tensor(case["x"])))
    model = _gpt(tt, case).train()
    return draws_around(tt, lambda: model(case["idx"], case["targets"]))


without_dropout_draws_no_random_numbers.verdict(lambda case, output: expect_no_draws(
    _quiet_words(case), output, "a Dropout of p = 0 must return its input and draw nothing (task 04.10: return x "
    "when p is 0)" + ("; when the MLP's check fails too, the draws are Dropout's or MLP's" if case["kind"] == "GPT"
                      else "")))


# ---------------------------------------------------------------------------------------------------
# Family: a Dropout of p = 0.5 is applied in training mode, in the MLP (13.4), the attention (13.5) and the GPT's
# forward (13.10, its drop alone: the blocks' dropout is 0): two calls differ, evaluation mode computes the model;
# where the Dropout is last (MLP, attention), each element of the output is zeroed or doubled

DROPPING = {"MLP": ("13.4", 1, _mlp_case()), "CausalSelfAttention": ("13.5", 1, _attention_case()),
            "GPT": ("13.10", 1, _gpt_case().filter(lambda case: case["config"]["C"] > 1))}  # C = 1: ln_1 forgets x
_DROPPING_FIX = {"MLP": "the forward ends with self.dropout(...), a Dropout(dropout) made in __init__",
                 "CausalSelfAttention": "__init__ makes resid_dropout = Dropout(dropout) with the dropout given (the "
                                        "given forward calls it)",
                 "GPT": "the forward applies self.drop to wte(idx) + wpe(positions), before the blocks"}


def _dropping_words(case):
    if case["kind"] == "GPT":
        return _gpt_words(case).replace(" on idx", " with its drop replaced by Dropout(0.5), on idx repeated 16 times "
                                                   "along the batch from idx")
    model = f"models.MLP({case['C']}, dropout=0.5)" if case["kind"] == "MLP" else \
        f"models.CausalSelfAttention({case['C']}, {case['H']}, dropout=0.5)"
    return f"{model} holding the case's weights, on x of shape {case['x'].shape} repeated 16 times along axis 0"


@check(examples=5, variants={v: (task, points, cases.map(lambda case, v=v: {**case, "kind": v}))
                             for v, (task, points, cases) in DROPPING.items()},
       describe=lambda case: _dropping_words(case) + ": the outputs of two calls in training mode, and in evaluation "
                                                     "mode")
def dropout_is_applied_in_training_mode(tt, case):
    if case["kind"] == "GPT":
        model, given = _gpt(tt, case), np.concatenate([case["idx"]] * 16)
        model.drop = tt.nn.Dropout(0.5)
    else:
        given = tt.Tensor(np.concatenate([case["x"]] * 16))
        model = _load(tt.models.MLP(case["C"], dropout=0.5) if case["kind"] == "MLP" else
                      tt.models.CausalSelfAttention(case["C"], case["H"], dropout=0.5), case["params"])
    found = {"training": model.train()(given).numpy(), "training again": model(given).numpy()}
    return {**found, "evaluation": model.eval()(given).numpy()}


@dropout_is_applied_in_training_mode.verdict
def _(case, output):
    what, kind, params = _dropping_words(case), case["kind"], case["params"]
    x = np.concatenate([case["idx"] if kind == "GPT" else np.asarray(case["x"], np.float64)] * 16)
    right = _np_gpt(params, case["config"], x) if kind == "GPT" else _np_mlp(params, "", x) if kind == "MLP" else \
        _np_attention(params, "", x, case["C"], case["H"])
    assert_close(output["evaluation"], right, what=what + " (evaluation mode)", rtol=1e-4, atol=1e-4)
    train, again, full = (np.asarray(output[name]) for name in ("training", "training again", "evaluation"))
    if train.shape != full.shape or np.array_equal(train, again):
        raise CheckFailed(*[f"{what}: two calls in training mode gave the same output: Dropout(0.5) is not "
                            f"applied; {_DROPPING_FIX[kind]}"] * 2)
    if kind != "GPT" and not np.all(np.isclose(train, 0, atol=1e-7) | np.isclose(train, 2 * full, rtol=1e-5,
                                                                                 atol=1e-6)):
        raise CheckFailed(*[f"{what}: in training mode each element of the output must be the evaluation mode's, "
                            f"zeroed or doubled (Dropout(0.5) last, 04's scaling by 1 / (1 - p)); "
                            f"{_DROPPING_FIX[kind]}"] * 2)
