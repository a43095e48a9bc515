"""The given speed helpers of the reference compute what the formulas they stand in for compute: a helper may
change how the numbers are produced (blocks, in-place steps, a memory layout, einsum), never the numbers.

Each test draws random inputs here, runs the helper and the plain formula in the exported reference package
(a subprocess, so that this process never imports a tinytorch) and compares the two here. The ids start
with the stage that gives the helper, so `pytest --stage 03` runs 03's."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import REPO

DTYPES = [np.float32, np.float64]
TOLERANCE = {np.float32: {"rtol": 1e-6, "atol": 1e-7}, np.float64: {"rtol": 1e-12, "atol": 1e-15}}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The reference package of every stage, exported from solutions/ into a folder of its own."""
    from tito.package import export
    from tito.project import stages

    folder = tmp_path_factory.mktemp("reference")
    export(REPO, stages(REPO)[-1], reference=True, folder=folder)
    return folder


def run(reference, tmp_path, code: str, **inputs) -> dict:
    """Run `code` in the reference package with `inputs` (arrays) bound by name; it fills the dict `outputs`."""
    np.savez(tmp_path / "inputs.npz", **inputs)
    program = ("import numpy as np\n"
               f"inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))\n"
               "globals().update(inputs)\n"
               "outputs = {}\n"
               f"{textwrap.dedent(code)}\n"
               f"np.savez({str(tmp_path / 'outputs.npz')!r}, **outputs)\n")
    done = subprocess.run([sys.executable, "-c", program], env={"PYTHONPATH": str(reference)}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(np.load(tmp_path / "outputs.npz"))


def normal_draws(rng, size, dtype):
    """Standard normal draws at three scales (the GELU's range, its tails, far out) and a few exact zeros."""
    x = rng.standard_normal(size) * rng.choice([1.0, 4.0, 100.0], size)
    x[rng.integers(0, size, 5)] = 0.0
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["03_float32", "03_float64"])
def test_normal_cdf_pdf_blocked_gives_the_numbers_of_the_formula(reference, tmp_path, dtype):
    """03: _normal_cdf_pdf_blocked (blocks, in place) against _normal_cdf_pdf's formula, on sizes around and
    across the block size; the formula runs on pieces no larger than a block, where it does not hand over."""
    rng = np.random.default_rng(3)
    sizes = [1, 1000, (1 << 15) - 1, 1 << 15, (1 << 15) + 1, 3 * (1 << 15) + 17]
    inputs = {f"x{i}": normal_draws(rng, size, dtype) for i, size in enumerate(sizes)}
    outputs = run(reference, tmp_path, """
        from tinytorch.core.activations import _BLOCK, _normal_cdf_pdf, _normal_cdf_pdf_blocked
        for name, x in inputs.items():
            pieces = [_normal_cdf_pdf(x[start:start + _BLOCK]) for start in range(0, x.size, _BLOCK)]
            outputs[name + " formula cdf"] = np.concatenate([cdf for cdf, _ in pieces])
            outputs[name + " formula pdf"] = np.concatenate([pdf for _, pdf in pieces])
            outputs[name + " blocked cdf"], outputs[name + " blocked pdf"] = _normal_cdf_pdf_blocked(x)
    """, **inputs)
    for name, x in inputs.items():
        for what in ("cdf", "pdf"):
            blocked, formula = outputs[f"{name} blocked {what}"], outputs[f"{name} formula {what}"]
            assert blocked.dtype == formula.dtype == dtype and blocked.shape == x.shape
            np.testing.assert_allclose(blocked, formula, **TOLERANCE[dtype],
                                       err_msg=f"{what} of {x.size} numbers: the blocked pass differs")


@pytest.mark.parametrize("dtype", DTYPES, ids=["03_float32", "03_float64"])
def test_gelu_gives_the_same_values_and_gradients_on_either_path(reference, tmp_path, dtype):
    """03: gelu and x.grad on a GPT-sized (2048, 40) input, where Φ and φ come from the blocked pass, against
    the same rows in pieces of at most a block, where they come from the formula."""
    rng = np.random.default_rng(4)
    x, g = normal_draws(rng, 2048 * 40, dtype).reshape(2048, 40), rng.standard_normal((2048, 40)).astype(dtype)
    outputs = run(reference, tmp_path, """
        import tinytorch as tt
        from tinytorch.core.activations import _BLOCK

        def gelu_and_grad(x, g):
            leaf = tt.Tensor(x, requires_grad=True)
            out = tt.nn.functional.gelu(leaf)
            out.backward(tt.Tensor(g))
            return out.numpy(), leaf.grad.numpy()

        assert x.size > _BLOCK
        outputs["whole"], outputs["whole grad"] = gelu_and_grad(x, g)
        rows = _BLOCK // x.shape[1]
        pieces = [gelu_and_grad(x[i:i + rows], g[i:i + rows]) for i in range(0, len(x), rows)]
        outputs["pieces"] = np.concatenate([out for out, _ in pieces])
        outputs["pieces grad"] = np.concatenate([grad for _, grad in pieces])
    """, x=x, g=g)
    np.testing.assert_allclose(outputs["whole"], outputs["pieces"], **TOLERANCE[dtype], err_msg="gelu(x)")
    np.testing.assert_allclose(outputs["whole grad"], outputs["pieces grad"], **TOLERANCE[dtype], err_msg="x.grad")


@pytest.mark.parametrize("shapes", [((3, 4, 7, 8), (3, 4, 5, 8)), ((2, 3, 4, 6), (2, 1, 9, 6)), ((6, 5), (4, 5))],
                         ids=["12_heads", "12_broadcast_key", "12_no_batch"])
def test_scores_are_q_times_k_transposed_times_scale(reference, tmp_path, shapes):
    """12: _scores(q, k, scale) (stored key by key) against np.matmul(q, k^T) * scale, with broadcast batch axes."""
    rng = np.random.default_rng(12)
    q, k = (rng.standard_normal(shape).astype(np.float32) for shape in shapes)
    outputs = run(reference, tmp_path, """
        from tinytorch.core.attention import _scores
        outputs["scaled"], outputs["unscaled"] = _scores(q, k, 0.35), _scores(q, k)
    """, q=q, k=k)
    expected = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2).astype(np.float64))
    assert outputs["scaled"].dtype == np.float32 and outputs["scaled"].shape == expected.shape
    np.testing.assert_allclose(outputs["scaled"], expected * 0.35, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs["unscaled"], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES, ids=["13_float32", "13_float64"])
def test_row_sum_and_row_dot_are_sums_along_each_row(reference, tmp_path, dtype):
    """13: _row_sum(a) and _row_dot(a, b) (einsum) against a.sum(axis=1, keepdims=True) and (a * b).sum(...)."""
    rng = np.random.default_rng(13)
    a, b = (rng.standard_normal((300, 24)).astype(dtype) for _ in range(2))
    outputs = run(reference, tmp_path, """
        from tinytorch.core.transformer import _row_dot, _row_sum
        outputs["sum"], outputs["dot"] = _row_sum(a), _row_dot(a, b)
    """, a=a, b=b)
    for name, expected in (("sum", a.sum(axis=1, keepdims=True)), ("dot", (a * b).sum(axis=1, keepdims=True))):
        assert outputs[name].dtype == dtype and outputs[name].shape == (300, 1), name
        np.testing.assert_allclose(outputs[name], expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)
