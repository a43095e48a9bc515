"""Speed against PyTorch on the CPU, one thread each, measured as ratios in one run.

    PYTHONPATH=build/reference .venv/bin/python benchmarks/bench.py [--only tiny,mlp,cnn,gpt,bpe]   # or: make bench

Four workloads run with identical inputs in both frameworks:

- `tiny`: a chain of about 300 small ops on 16-element tensors (elementwise with tensors and Python numbers,
  broadcasting, reductions with and without an axis, reshape, transpose, indexing, a small matmul) and
  its backward: what the framework's own Python costs per op, since numpy's and PyTorch's kernels take
  well under a microsecond on data this small.
- `mlp`: one training step of the milestone MLP (784-256-128-10, ReLU, cross-entropy, Adam, batch 128,
  MNIST): the kernels dominate, so this is about copies, dtypes and update rules.
- `cnn`: one training step of a small CNN (Conv(3->32, 3x3, pad 1)-ReLU-MaxPool(2)-Conv(32->64)-ReLU-MaxPool(2)-
  Linear(4096->10), cross-entropy, SGD, a batch of 32 random 3x32x32 images): convolutions against PyTorch's
  own kernels, so this is about im2col, one large matrix product per layer and no needless copies.
- `gpt`: one training step of the milestone GPT (vocabulary 65, 4 layers, width 128, 4 heads, context 64,
  batch 32 of random tokens, AdamW lr 1e-3): tinytorch's `tt.models.GPT` against the same architecture
  written with PyTorch's modules (`F.scaled_dot_product_attention(is_causal=True)`, `nn.LayerNorm`,
  `nn.GELU`), holding the same weights (copied from tinytorch's state_dict) and seeing the same batches.
  Below the ratio it prints the same step written by hand in plain numpy (`numpy_gpt_runner`: float32, the
  exact GELU, fused softmax and LayerNorm backward, matrix products batched over the heads on strided views,
  AdamW over flat arrays, every buffer allocated once), as a ratio to PyTorch's time measured the same way:
  the floor for a numpy framework. Then the matrix products of the step's Linear layers alone
  (`gpt_products_runner`), numpy's BLAS against PyTorch's at the same shapes, and their share of PyTorch's
  step: what no numpy framework can do faster than numpy's BLAS.
  Besides the time it reports the peak memory of a step in each framework: each runs in a child process
  that builds the model, resets the kernel's peak resident set (Linux: `/proc/self/clear_refs`), runs three
  steps and reports how far the peak (`VmHWM`) rose above the resident set before them (the same method for
  both: PyTorch's CPU allocations are invisible to tracemalloc).

and one has no PyTorch equivalent (PyTorch has no tokenizer):

- `bpe`: training the byte-level BPE tokenizer of 10 on the first megabyte of the shipped Shakespeare to 512
  tokens, in seconds (the median of a few runs), and as a ratio to one full count of the pairs of the same
  distinct chunks in plain Python: what keeping the pair counts up to date buys (recounting for every merge
  would cost about 256 such counts). Encoding the second megabyte is reported beside it.

The frameworks take turns in rounds (a block of ours, a block of PyTorch's, ...) so that a change of load
on a shared machine hits both; a round's ratio is the ratio of the two medians in it, and the report gives
the median ratio over the rounds with its range. BLAS and PyTorch run on one thread (threadpoolctl,
torch.set_num_threads): on two shared cores a multi-threaded BLAS call stalls. The targets (issues #11
and #23) are printed beside the ratios; this script reports, it never fails on a slow machine.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "milestones"))
from judging import keep_freed_memory  # noqa: E402  (the milestones' allocator setting, measured alike)

# at most this many times PyTorch's time; the GPT's 1.1x of issue #11 was below the hand-written numpy floor and
# is withdrawn (issue #23): the step may be at most 10% slower than the 1.5x it was, so 1.65x
TARGETS = {"tiny": 1.3, "mlp": 0.75, "cnn": 2.0, "gpt": 1.65}
WORKLOADS = [*TARGETS, "bpe"]  # bpe: seconds, and the ratio to one pair count (no PyTorch equivalent)
GPT_MEMORY_TARGET = 1.5  # peak memory of a GPT step, at most this many times PyTorch's
GPT_CONFIG = {"vocab_size": 65, "block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128}


def tiny_chain(x, w, m, amax):
    """About 300 small ops on x, w (16,) and m (4, 4), ending in a scalar (the same code for both frameworks)."""
    y = x
    for _ in range(10):
        y = y * w + x                                    # tensor-tensor elementwise
        y = (y - 0.5) / 2.0                              # with Python numbers
        y = (y * y + 1.0).sqrt().log().exp() * 0.5       # unary ops
        y = y - y.mean() + y.sum() * 0.01                # full reductions, broadcast back
        z = y.reshape(4, 4)
        z = (z @ m).transpose(0, 1) + z.sum(axis=0, keepdims=True)  # matmul, permute, axis reduction
        z = z - amax(z)                                  # max over an axis, kept
        y = z.reshape(16) * 0.1 + y * 0.5 + y[2:6].sum()  # reshape back, a slice
        y = y * y[3] + (-y)                              # an int index, negation
    return (y * y).sum()


def mlp_data():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "milestones"))
    from mlp import mnist

    (x, y), _ = mnist()
    return x, y


def tiny_runner(framework: str) -> Callable[[], None]:
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    w0 = rng.uniform(0.5, 1.5, 16).astype(np.float32)
    m0 = rng.uniform(-0.5, 0.5, (4, 4)).astype(np.float32)
    if framework == "torch":
        import torch

        x, w, m = (torch.tensor(a, requires_grad=True) for a in (x0, w0, m0))
        amax = lambda z: z.amax(dim=1, keepdim=True)  # torch's max(dim) also returns the indices
    else:
        import tinytorch as tt

        x, w, m = (tt.Tensor(a, requires_grad=True) for a in (x0, w0, m0))
        amax = lambda z: z.max(axis=1, keepdims=True)

    def step() -> None:
        x.grad = w.grad = m.grad = None
        tiny_chain(x, w, m, amax).backward()
    return step


def mlp_runner(framework: str, data) -> Callable[[], None]:
    x_all, y_all = data
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(len(x_all), 128, replace=False)) for _ in range(20)]
    turn = iter(range(10**9))
    if framework == "torch":
        import torch as lib
        as_input = lib.from_numpy
    else:
        import tinytorch as lib
        as_input = lib.Tensor
    lib.manual_seed(0)  # the same code builds both: the two APIs agree here
    nn = lib.nn
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = lib.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    xs = [as_input(x_all[b]) for b in batches]
    ys = [as_input(y_all[b]) for b in batches]

    def step() -> None:
        i = next(turn) % len(batches)
        optimizer.zero_grad()
        loss_fn(model(xs[i]), ys[i]).backward()
        optimizer.step()
    return step


def cnn_runner(framework: str) -> Callable[[], None]:
    rng = np.random.default_rng(0)
    images = [rng.standard_normal((32, 3, 32, 32)).astype(np.float32) for _ in range(4)]
    labels = [rng.integers(0, 10, 32) for _ in range(4)]
    turn = iter(range(10**9))
    if framework == "torch":
        import torch as lib
        as_input = lib.from_numpy
    else:
        import tinytorch as lib
        as_input = lib.Tensor
    lib.manual_seed(0)  # the same code builds both: the two APIs agree here
    nn = lib.nn
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(64 * 8 * 8, 10))
    optimizer = lib.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    xs, ys = [as_input(x) for x in images], [as_input(y) for y in labels]

    def step() -> None:
        i = next(turn) % len(xs)
        optimizer.zero_grad()
        loss_fn(model(xs[i]), ys[i]).backward()
        optimizer.step()
    return step


def torch_gpt(vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int):
    """tt.models.GPT's architecture in PyTorch, under the same parameter names (so state_dicts match)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(n_embd, 3 * n_embd), nn.Linear(n_embd, n_embd)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.c_attn(x).view(B, T, 3, n_head, C // n_head).permute(2, 0, 3, 1, 4)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(out.transpose(1, 2).reshape(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = nn.Linear(n_embd, 4 * n_embd), nn.Linear(4 * n_embd, n_embd)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(n_embd), CausalSelfAttention()
            self.ln_2, self.mlp = nn.LayerNorm(n_embd), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab_size, n_embd), nn.Embedding(block_size, n_embd)
            self.h = nn.ModuleList(Block() for _ in range(n_layer))
            self.ln_f, self.lm_head = nn.LayerNorm(n_embd), nn.Linear(n_embd, vocab_size, bias=False)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return logits, F.cross_entropy(logits.reshape(-1, vocab_size), targets.reshape(-1))

    return GPT()


def gpt_runner(framework: str) -> Callable[[], None]:
    import tinytorch as tt

    rng = np.random.default_rng(0)
    V, T = GPT_CONFIG["vocab_size"], GPT_CONFIG["block_size"]
    windows = [rng.integers(0, V, (32, T + 1)) for _ in range(4)]
    turn = iter(range(10**9))
    tt.manual_seed(0)
    model = tt.models.GPT(**GPT_CONFIG)
    if framework == "torch":
        import torch

        theirs = torch_gpt(**GPT_CONFIG)
        theirs.load_state_dict({name: torch.from_numpy(value.copy()) for name, value in model.state_dict().items()})
        model, lib = theirs, torch
        batches = [(torch.from_numpy(w[:, :-1].copy()), torch.from_numpy(w[:, 1:].copy())) for w in windows]
    else:
        lib = tt
        batches = [(w[:, :-1].copy(), w[:, 1:].copy()) for w in windows]
    optimizer = lib.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        idx, targets = batches[next(turn) % len(batches)]
        optimizer.zero_grad()
        _, loss = model(idx, targets)
        loss.backward()
        optimizer.step()
    return step


def gpt_products_runner(framework: str) -> Callable[[], None]:
    """The matrix products of the Linear layers in one GPT step (forward x W^T, backward g W and g^T x, for the
    4 per block and the head, at the step's shapes), in numpy or in PyTorch: the part of the step that a numpy
    framework hands to BLAS as it is, so that its ratio bounds what any numpy framework can reach."""
    C, V, rows = GPT_CONFIG["n_embd"], GPT_CONFIG["vocab_size"], 32 * GPT_CONFIG["block_size"]
    shapes = [(C, 3 * C), (C, C), (C, 4 * C), (4 * C, C)] * GPT_CONFIG["n_layer"] + [(C, V)]
    rng = np.random.default_rng(0)
    operands = [tuple(rng.standard_normal(shape, dtype=np.float32) for shape in ((rows, n), (m, n), (rows, m)))
                for n, m in shapes]
    if framework == "torch":
        import torch

        operands = [tuple(torch.from_numpy(a) for a in triple) for triple in operands]

    def step() -> None:
        for x, weight, grad in operands:
            x @ weight.T, grad @ weight, grad.T @ x
    return step


def gpt_peak_memory(framework: str) -> float:
    """MiB by which a child process's peak resident set rises over three GPT steps (after building the model)."""
    import subprocess

    code = ("import sys; sys.path.insert(0, sys.argv[2]); import bench, torch; torch.set_num_threads(1)\n"
            "from threadpoolctl import threadpool_limits\n"
            "def kib(field):\n"
            "    return next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith(field))\n"
            "bench.keep_freed_memory()\n"
            "with threadpool_limits(1):\n"
            "    step = bench.gpt_runner(sys.argv[1])\n"
            "    open('/proc/self/clear_refs', 'w').write('5')  # resets the peak (VmHWM) to the current RSS\n"
            "    before = kib('VmRSS')\n"
            "    for _ in range(3):\n"
            "        step()\n"
            "print((kib('VmHWM') - before) / 1024)\n")
    run = subprocess.run([sys.executable, "-c", code, framework, str(Path(__file__).resolve().parent)],
                         capture_output=True, text=True, check=True)
    return float(run.stdout.split()[-1])


def numpy_mlp_runner(data) -> Callable[[], None]:
    """The same MLP step written by hand in numpy (forward, backward, Adam in place): the floor of what a
    numpy framework can reach, printed beside the ratios."""
    x_all, y_all = data
    rng = np.random.default_rng(0)
    batches = [np.sort(rng.choice(len(x_all), 128, replace=False)) for _ in range(20)]
    params = []
    for fan_in, fan_out in ((784, 256), (256, 128), (128, 10)):
        bound = 1 / np.sqrt(fan_in)
        params += [rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                   rng.uniform(-bound, bound, fan_out).astype(np.float32)]
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    count = iter(range(1, 10**9))

    def step() -> None:
        t = next(count)
        index = batches[t % len(batches)]
        x, y = x_all[index], y_all[index]
        w1, b1, w2, b2, w3, b3 = params
        h1 = x @ w1.T + b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2.T + b2
        a2 = np.maximum(h2, 0)
        z = a2 @ w3.T + b3
        e = np.exp(z - z.max(axis=1, keepdims=True))
        g = e / e.sum(axis=1, keepdims=True)
        g[np.arange(len(y)), y] -= 1
        g /= len(y)
        grads = [None] * 6
        grads[4], grads[5] = g.T @ a2, g.sum(0)
        g = (g @ w3) * (h2 > 0)
        grads[2], grads[3] = g.T @ a1, g.sum(0)
        g = (g @ w2) * (h1 > 0)
        grads[0], grads[1] = g.T @ x, g.sum(0)
        for p, grad, (m, v) in zip(params, grads, moments):
            m *= 0.9
            m += 0.1 * grad
            v *= 0.999
            v += 0.001 * grad * grad
            p -= (1e-3 / (1 - 0.9 ** t)) * m / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return step


def numpy_gpt_runner() -> Callable[[], float]:
    """The same GPT step written by hand in numpy, float32 (forward, backward, AdamW in place), from the weights
    of gpt_runner's model and on its batches; the step returns the loss. The floor of what a numpy framework
    can reach, printed beside the ratio. What a careful engineer does here:
    - every activation has a buffer, allocated here once, and every operation writes into one (out=);
    - the parameters, their gradients and AdamW's moments are flat arrays, so AdamW is a dozen operations on
      cache-sized chunks; a Linear's weight and bias are one block [W | b] and its input carries a column of
      ones, so one matrix product adds the bias, and backwards one gives the weight's and the bias's gradients;
    - a LayerNorm's weight and bias are folded into the Linear after it ([W diag(w) | W b + bias], a few
      thousand numbers), which reads the normalised rows; backwards, the folded weights with their rows
      centred give the normalised rows' gradient minus its mean in the same product (fused LayerNorm backward);
      c_attn's q rows are scaled by 1/sqrt(D) there too, instead of the (B, H, T, T) scores;
    - q, k, v and the merged heads are strided views that np.matmul hands to BLAS, batched over (B, H): no
      copies; the scores are kept transposed, (B, H, key, query), so that softmax reduces along numpy's fast
      axis (and sums by matrix products); its backward is fused: p (dp - sum_j p dp);
    - the exact GELU (Abramowitz-Stegun 7.1.26 for Phi) runs in blocks of rows that stay in the cache;
    - constants are Python floats: a numpy float64 scalar would compute a float32 array in float64."""
    import tinytorch as tt

    V, T, L = GPT_CONFIG["vocab_size"], GPT_CONFIG["block_size"], GPT_CONFIG["n_layer"]
    H, C = GPT_CONFIG["n_head"], GPT_CONFIG["n_embd"]
    B, D = 32, C // H
    N, F = B * T, 4 * C                                      # rows of every activation; the MLP's width
    rng = np.random.default_rng(0)
    windows = [rng.integers(0, V, (B, T + 1)) for _ in range(4)]          # gpt_runner's batches
    batches = [(w[:, :-1].reshape(-1), w[:, 1:].reshape(-1)) for w in windows]
    turn = iter(range(10**9))
    tt.manual_seed(0)
    state = tt.models.GPT(**GPT_CONFIG).state_dict()

    def f32(*shape):
        return np.empty(shape, np.float32)

    size = sum(value.size for value in state.values())
    chunk = 1 << 15                                          # AdamW's chunks: 128 KiB per array
    flat, grad_flat, exp_avg, exp_avg_sq, scratch = f32(size), f32(size), f32(size), f32(size), f32(chunk)
    exp_avg[:], exp_avg_sq[:] = 0, 0
    params, grads, blocks, offset = {}, {}, {}, 0            # views into flat and grad_flat
    for name, value in state.items():
        prefix = name.rsplit(".", 1)[0]
        if prefix in blocks:
            continue                                         # a bias, in its weight's block
        with_bias = value.ndim == 2 and prefix + ".bias" in state
        shape = (value.shape[0], value.shape[1] + 1) if with_bias else value.shape
        block = flat[offset:offset + int(np.prod(shape))].reshape(shape)
        grad = grad_flat[offset:offset + block.size].reshape(shape)
        offset += block.size
        if with_bias:
            blocks[prefix] = block, grad
            params[name], params[prefix + ".bias"] = block[:, :-1], block[:, -1]
            grads[name], grads[prefix + ".bias"] = grad[:, :-1], grad[:, -1]
        else:
            params[name], grads[name] = block, grad
    for name, value in state.items():
        params[name][...] = value

    def saved(*shape, ones=False):
        """one buffer per layer; with ones, its last column holds ones (an input of a Linear's block [W | b])"""
        arrays = [f32(*shape) for _ in range(L)]
        if ones:
            for array in arrays:
                array[:, -1] = 1
        return arrays
    # saved for backward, per layer: normalised rows [xhat | 1] and 1/std of both LayerNorms; the folded
    # weights of c_attn and c_fc; q (scaled), k, v; attention probabilities; merged heads [y | 1]; [GELU | 1]
    # and the GELU's slope
    xhat1, rstd1, xhat2, rstd2 = saved(N, C + 1, ones=True), saved(N), saved(N, C + 1, ones=True), saved(N)
    fold_attn, fold_fc = saved(3 * C, C + 1), saved(F, C + 1)
    qkv, probs, merged = saved(N, 3 * C), saved(B, H, T, T), saved(N, C + 1, ones=True)
    act, slope = saved(N, F + 1, ones=True), saved(N, F)
    xhatf, rstdf, fold_lm, grad_fold_lm = f32(N, C + 1), f32(N), f32(V, C + 1), f32(V, C + 1)
    xhatf[:, -1] = 1
    x, tmp, dh, d = f32(N, C), f32(N, C), f32(N, C), f32(N, C)  # residual stream, scratch, gradients
    wide, dqkv, dscores, centred, small = f32(N, F), f32(N, 3 * C), f32(B, H, T, T), f32(F, C), f32(F, C)
    logits, onehot = f32(V, N), np.zeros((V, N), np.float32)   # transposed: reductions over V are fast
    mean_c, ones_f = np.full(C, 1 / C, np.float32), np.ones(F, np.float32)   # sums as matrix-vector products
    mu, mgx = f32(N), f32(N)
    qscale = np.ones(3 * C, np.float32)
    qscale[:C] = 1 / math.sqrt(D)
    ones_t, sums = np.ones((1, T), np.float32), f32(B, H, 1, T)
    causal = np.where(np.arange(T)[:, None] > np.arange(T), -np.inf, 0).astype(np.float32)  # [key, query]
    positions = np.arange(N)
    rows = 64                                                # the GELU's blocks: 64 x 512 numbers, 128 KiB
    a_buf, e_buf, t_buf, p_buf = f32(rows, F), f32(rows, F), f32(rows, F), f32(rows, F)
    as_k = math.sqrt(2) / 0.3275911                         # A-S 7.1.26: t = 1 / (1 + 0.3275911 |x| / sqrt 2)
    as_poly = [0.5 * c for c in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)]
    inv_sqrt_2pi, sign_bit = 1 / math.sqrt(2 * math.pi), np.int32(-2**31)   # Python floats: float32 stays

    def heads(a):
        """(N, k C) -> k views (B, H, T, D)"""
        return a.reshape(B, T, -1, H, D).transpose(2, 0, 3, 1, 4)

    def layer_norm(x, xhat, rstd):
        """xhat[:, :C] = (x - mean) / sqrt(var + 1e-5) by rows; the affine part is folded into the next Linear"""
        xc = xhat[:, :C]
        np.matmul(x, mean_c, out=mu)
        np.subtract(x, mu[:, None], out=xc)
        np.vecdot(xc, xc, out=rstd)
        np.multiply(rstd, 1 / C, out=rstd)
        np.add(rstd, 1e-5, out=rstd)
        np.sqrt(rstd, out=rstd)
        np.reciprocal(rstd, out=rstd)
        np.multiply(xc, rstd[:, None], out=xc)

    def fold(weight, bias, ln_weight, ln_bias, out, rowscale=None):
        """out = [W diag(ln_weight) | W ln_bias + bias] (rows times rowscale): the Linear of the normalised rows"""
        np.multiply(weight, ln_weight, out=out[:, :C])
        np.matmul(weight, ln_bias, out=out[:, C])
        if bias is not None:
            np.add(out[:, C], bias, out=out[:, C])
        if rowscale is not None:
            np.multiply(out, rowscale[:, None], out=out)

    def unfold(grad, weight, ln_weight, ln_bias, grad_weight, grad_ln_weight, grad_ln_bias, rowscale=None):
        """From grad = [G | g], the gradient of fold's out (then scaled by rowscale, in place: g is the bias's
        gradient), the gradients of weight (may be G itself), ln_weight and ln_bias."""
        if rowscale is not None:
            np.multiply(grad, rowscale[:, None], out=grad)
        g_x, g_1, product = grad[:, :C], grad[:, C], small[:len(grad)]
        np.multiply(g_x, weight, out=product)
        np.matmul(ones_f[:len(grad)], product, out=grad_ln_weight)   # sum over the outputs of G * W
        np.matmul(g_1, weight, out=grad_ln_bias)
        np.multiply(g_x, ln_weight, out=grad_weight)
        np.multiply.outer(g_1, ln_bias, out=product)
        np.add(grad_weight, product, out=grad_weight)

    def layer_norm_backward(dout, folded, xhat, rstd, dx, accumulate=True):
        """dx (+)= the gradient of layer_norm's x, for dout that of xhat @ folded.T: with folded's rows centred,
        the product gives the gradient g of the normalised rows minus its mean; dx = rstd (g - mean(g)
        - xhat mean(g xhat))"""
        fw, xc, c = folded[:, :C], xhat[:, :C], centred[:len(folded)]
        np.subtract(fw, np.matmul(fw, mean_c)[:, None], out=c)
        np.matmul(dout, c, out=dh)
        np.vecdot(dh, xc, out=mgx)
        np.multiply(mgx, 1 / C, out=mgx)
        np.multiply(xc, mgx[:, None], out=tmp)
        np.subtract(dh, tmp, out=dh)
        if accumulate:
            np.multiply(dh, rstd[:, None], out=dh)
            np.add(dx, dh, out=dx)
        else:
            np.multiply(dh, rstd[:, None], out=dx)

    def gelu(u, out, slope):
        """out[:, :F] = x Phi(x) and slope = Phi(x) + x phi(x) (its derivative) for x = u, in blocks of rows;
        Phi by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7, and float32's rounding)"""
        for start in range(0, N, rows):
            x, a, e, t, p = u[start:start + rows], a_buf, e_buf, t_buf, p_buf
            np.abs(x, out=a)
            np.square(x, out=e)
            e *= -0.5
            np.exp(e, out=e)                                 # exp(-x^2 / 2)
            np.add(a, as_k, out=t)
            np.divide(as_k, t, out=t)                        # t = 1 / (1 + 0.3275911 |x| / sqrt 2)
            np.multiply(t, as_poly[4], out=p)
            for c in as_poly[3::-1]:                         # Phi(-|x|) = poly(t) exp(-x^2 / 2), by Horner
                p += c
                p *= t
            p *= e
            np.subtract(0.5, p, out=p)                       # Phi(x) = 1/2 + sign(x) (1/2 - Phi(-|x|)):
            np.bitwise_and(x.view(np.int32), sign_bit, out=a.view(np.int32))   # x's sign bit, copied onto
            np.bitwise_or(p.view(np.int32), a.view(np.int32), out=p.view(np.int32))   # 1/2 - Phi(-|x|) >= 0
            p += 0.5
            np.multiply(x, p, out=out[start:start + rows, :F])
            e *= x
            e *= inv_sqrt_2pi
            np.add(p, e, out=slope[start:start + rows])

    def step() -> float:
        count = next(turn)
        idx, targets = batches[count % len(batches)]
        # forward: x is the residual stream (N, C)
        np.take(params["wte.weight"], idx, axis=0, out=x)
        np.add(x.reshape(B, T, C), params["wpe.weight"], out=x.reshape(B, T, C))
        for layer in range(L):
            h = f"h.{layer}."
            layer_norm(x, xhat1[layer], rstd1[layer])
            fold(params[h + "attn.c_attn.weight"], params[h + "attn.c_attn.bias"], params[h + "ln_1.weight"],
                 params[h + "ln_1.bias"], fold_attn[layer], qscale)
            np.matmul(xhat1[layer], fold_attn[layer].T, out=qkv[layer])
            q, k, v = heads(qkv[layer])
            p = probs[layer]
            np.matmul(k, q.transpose(0, 1, 3, 2), out=p)      # p[b, h, j, i] = q_i . k_j / sqrt(D)
            np.add(p, causal, out=p)
            np.subtract(p, p.max(axis=2, keepdims=True), out=p)
            np.exp(p, out=p)
            np.matmul(ones_t, p, out=sums)                    # sums over the keys, by BLAS
            np.reciprocal(sums, out=sums)
            np.multiply(p, sums, out=p)
            np.matmul(p.transpose(0, 1, 3, 2), v, out=heads(merged[layer][:, :C])[0])
            np.matmul(merged[layer], blocks[h + "attn.c_proj"][0].T, out=tmp)
            np.add(x, tmp, out=x)
            layer_norm(x, xhat2[layer], rstd2[layer])
            fold(params[h + "mlp.c_fc.weight"], params[h + "mlp.c_fc.bias"], params[h + "ln_2.weight"],
                 params[h + "ln_2.bias"], fold_fc[layer])
            np.matmul(xhat2[layer], fold_fc[layer].T, out=wide)
            gelu(wide, act[layer], slope[layer])
            np.matmul(act[layer], blocks[h + "mlp.c_proj"][0].T, out=tmp)
            np.add(x, tmp, out=x)
        layer_norm(x, xhatf, rstdf)
        fold(params["lm_head.weight"], None, params["ln_f.weight"], params["ln_f.bias"], fold_lm)
        np.matmul(fold_lm, xhatf.T, out=logits)
        # mean cross-entropy, and its gradient (softmax - onehot) / N in logits
        np.subtract(logits, logits.max(axis=0), out=logits)
        picked = logits[targets, positions]
        np.exp(logits, out=logits)
        total = logits.sum(axis=0)
        loss = float(np.mean(np.log(total) - picked))
        np.multiply(logits, np.reciprocal(total * N), out=logits)
        logits[targets, positions] -= 1 / N
        # backward: d is the residual stream's gradient
        np.matmul(logits, xhatf, out=grad_fold_lm)
        layer_norm_backward(logits.T, fold_lm, xhatf, rstdf, d, accumulate=False)
        unfold(grad_fold_lm, params["lm_head.weight"], params["ln_f.weight"], params["ln_f.bias"],
               grads["lm_head.weight"], grads["ln_f.weight"], grads["ln_f.bias"])
        for layer in reversed(range(L)):
            h = f"h.{layer}."
            # MLP: x += [gelu(c_fc(ln_2(x))) | 1] @ [W | b].T
            weight, grad = blocks[h + "mlp.c_proj"]
            np.matmul(d.T, act[layer], out=grad)              # the weight's and the bias's gradients
            np.matmul(d, weight[:, :F], out=wide)
            np.multiply(wide, slope[layer], out=wide)
            grad = blocks[h + "mlp.c_fc"][1]
            np.matmul(wide.T, xhat2[layer], out=grad)         # the folded c_fc's gradient
            layer_norm_backward(wide, fold_fc[layer], xhat2[layer], rstd2[layer], d)
            unfold(grad, params[h + "mlp.c_fc.weight"], params[h + "ln_2.weight"], params[h + "ln_2.bias"],
                   grads[h + "mlp.c_fc.weight"], grads[h + "ln_2.weight"], grads[h + "ln_2.bias"])
            # attention: x += [attention(c_attn(ln_1(x))) | 1] @ [W | b].T
            weight, grad = blocks[h + "attn.c_proj"]
            np.matmul(d.T, merged[layer], out=grad)
            np.matmul(d, weight[:, :C], out=dh)
            dy = heads(dh)[0]
            q, k, v = heads(qkv[layer])
            dq, dk, dv = heads(dqkv)
            p = probs[layer]
            np.matmul(p, dy, out=dv)                          # dv_j = sum_i p_ij dy_i
            np.matmul(v, dy.transpose(0, 1, 3, 2), out=dscores)   # dp_ij = dy_i . v_j
            np.multiply(dscores, p, out=dscores)              # softmax backward: p (dp - sum_j p dp)
            np.matmul(ones_t, dscores, out=sums)
            np.multiply(p, sums, out=p)                       # (p is not needed any more)
            np.subtract(dscores, p, out=dscores)
            np.matmul(dscores.transpose(0, 1, 3, 2), k, out=dq)   # of the scaled q
            np.matmul(dscores, q, out=dk)
            grad = blocks[h + "attn.c_attn"][1]
            np.matmul(dqkv.T, xhat1[layer], out=grad)
            layer_norm_backward(dqkv, fold_attn[layer], xhat1[layer], rstd1[layer], d)
            unfold(grad, params[h + "attn.c_attn.weight"], params[h + "ln_1.weight"], params[h + "ln_1.bias"],
                   grads[h + "attn.c_attn.weight"], grads[h + "ln_1.weight"], grads[h + "ln_1.bias"], qscale)
        np.sum(d.reshape(B, T, C), axis=0, out=grads["wpe.weight"])
        onehot[idx, positions] = 1                            # wte's gradient: onehot @ d (np.add.at: 4x slower)
        np.matmul(onehot, d, out=grads["wte.weight"])
        onehot[idx, positions] = 0
        # AdamW with PyTorch's defaults (betas 0.9, 0.999, eps 1e-8, weight decay 0.01), lr 1e-3:
        # p = p (1 - lr wd) - lr / bc1 m / (sqrt(v / bc2) + eps), for bc = 1 - beta ** t
        t = count + 1
        lr, beta1, beta2, eps, decay = 1e-3, 0.9, 0.999, 1e-8, 0.01
        root_bc2 = math.sqrt(1 - beta2**t)
        for start in range(0, size, chunk):                   # in chunks that stay in the cache
            param, g, m, v = (a[start:start + chunk] for a in (flat, grad_flat, exp_avg, exp_avg_sq))
            u = scratch[:len(param)]
            np.subtract(m, g, out=m)                          # m = beta1 (m - g) + g
            np.multiply(m, beta1, out=m)
            np.add(m, g, out=m)
            np.square(g, out=u)                               # v = beta2 (v - g^2) + g^2
            np.subtract(v, u, out=v)
            np.multiply(v, beta2, out=v)
            np.add(v, u, out=v)
            np.sqrt(v, out=u)                                 # u = -lr / bc1 m / (sqrt(v / bc2) + eps)
            np.add(u, eps * root_bc2, out=u)
            np.divide(m, u, out=u)
            np.multiply(u, -lr * root_bc2 / (1 - beta1**t), out=u)
            np.multiply(param, 1 - lr * decay, out=param)
            np.add(param, u, out=param)
        return loss
    return step


def measure(ours: Callable[[], None], theirs: Callable[[], None], *, rounds: int, block: int):
    """Per round: median seconds of `block` calls of each; returns (our medians, their medians)."""
    for run in (ours, theirs):  # warm up: first calls allocate, import and fill caches
        for _ in range(3):
            run()
    mine, other = [], []
    for _ in range(rounds):
        for run, into in ((ours, mine), (theirs, other)):
            seconds = []
            for _ in range(block):
                start = time.perf_counter()
                run()
                seconds.append(time.perf_counter() - start)
            into.append(statistics.median(seconds))
    return mine, other


def report(name: str, what: str, mine: list[float], other: list[float]) -> float:
    ratios = [a / b for a, b in zip(mine, other)]
    ratio = statistics.median(ratios)
    target = TARGETS[name]
    verdict = "within" if ratio <= target else "OVER"
    print(f"{name:5} {what}: tinytorch {statistics.median(mine) * 1e3:.2f} ms, PyTorch "
          f"{statistics.median(other) * 1e3:.2f} ms; ratio {ratio:.2f}x (rounds {min(ratios):.2f}-"
          f"{max(ratios):.2f}), target <= {target:.2f}x: {verdict}")
    return ratio


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def bpe_workload(rounds: int) -> None:
    """Train the BPE tokenizer on the first megabyte of Shakespeare to 512 tokens, `rounds` times; report the
    median time and its ratio to one full pair count of the same distinct chunks, and the encoding speed."""
    from collections import Counter

    import tinytorch as tt
    from tinytorch.core.tokenization import _chunks

    text = tt.datasets.shakespeare(root=Path(__file__).resolve().parents[1] / "datasets")
    train, held_out = text[:1_000_000], text[1_000_000:2_000_000]
    frequencies = Counter(_chunks(train))
    words, counts = [list(chunk.encode("utf-8")) for chunk in frequencies], list(frequencies.values())

    def pair_count() -> None:
        found: dict = {}
        for word, count in zip(words, counts):
            for pair in zip(word, word[1:]):
                found[pair] = found.get(pair, 0) + count

    seconds, yardstick = [], []
    for _ in range(rounds):
        yardstick += [timed(pair_count) for _ in range(3)]
        start = time.perf_counter()
        tokenizer = tt.text.BPETokenizer.train(train, 512)
        seconds.append(time.perf_counter() - start)
    start = time.perf_counter()
    ids = tokenizer.encode(held_out)
    encoding = time.perf_counter() - start
    median, count = statistics.median(seconds), statistics.median(yardstick)
    print(f"bpe   BPE training on 1 MB of Shakespeare to 512 tokens: {median:.2f} s (runs {min(seconds):.2f}-"
          f"{max(seconds):.2f}), {median / count:.0f}x one pair count of its {len(words):,} distinct chunks "
          f"({count * 1e3:.0f} ms); encoding the next 1 MB: {encoding:.2f} s, {len(held_out) / len(ids):.2f} "
          f"characters per token")


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description="tinytorch against PyTorch on the CPU, one thread each")
    options.add_argument("--only", default=",".join(WORKLOADS),
                         help=f"comma-separated workloads: {', '.join(WORKLOADS)}")
    options.add_argument("--rounds", type=int, default=7)
    args = options.parse_args(argv)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in WORKLOADS]
    if unknown:
        print(f"unknown workload {unknown[0]!r}: choose from {', '.join(WORKLOADS)}", file=sys.stderr)
        return 2
    import tinytorch as tt

    keep_freed_memory()
    if chosen == ["bpe"]:  # the one workload without PyTorch
        print(f"tinytorch from {Path(tt.__file__).parent}, numpy {np.__version__}; {min(args.rounds, 5)} rounds")
        bpe_workload(min(args.rounds, 5))
        return 0
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: `.venv/bin/pip install -e '.[bench]'` (or `make bench`)", file=sys.stderr)
        return 2

    torch.set_num_threads(1)
    with threadpool_limits(1):
        print(f"tinytorch from {Path(tt.__file__).parent}, PyTorch {torch.__version__}, numpy {np.__version__}; "
              f"one thread each, {args.rounds} rounds")
        if "tiny" in chosen:
            mine, other = measure(tiny_runner("tinytorch"), tiny_runner("torch"), rounds=args.rounds, block=30)
            report("tiny", "300-op chain on 16 elements, forward and backward", mine, other)
        if "mlp" in chosen:
            data = mlp_data()
            mine, other = measure(mlp_runner("tinytorch", data), mlp_runner("torch", data), rounds=args.rounds,
                                  block=20)
            report("mlp", "MLP 784-256-128-10 training step, batch 128, Adam", mine, other)
            by_hand, other = measure(numpy_mlp_runner(data), mlp_runner("torch", data), rounds=args.rounds, block=20)
            ratios = [a / b for a, b in zip(by_hand, other)]
            print(f"      the same step in numpy by hand: {statistics.median(ratios):.2f}x PyTorch's time (the floor "
                  f"for a numpy framework)")
        if "cnn" in chosen:
            mine, other = measure(cnn_runner("tinytorch"), cnn_runner("torch"), rounds=args.rounds, block=10)
            report("cnn", "CNN 3x32x32 conv-pool-conv-pool-linear training step, batch 32, SGD", mine, other)
        if "gpt" in chosen:
            mine, other = measure(gpt_runner("tinytorch"), gpt_runner("torch"), rounds=args.rounds, block=5)
            report("gpt", "GPT (65 tokens, 4 layers, width 128, 4 heads, context 64) step, batch 32, AdamW", mine,
                   other)
            by_hand, other = measure(numpy_gpt_runner(), gpt_runner("torch"), rounds=args.rounds, block=5)
            ratios = [a / b for a, b in zip(by_hand, other)]
            print(f"      the same step in numpy by hand: {statistics.median(ratios):.2f}x PyTorch's time (the floor "
                  f"for a numpy framework)")
            products, theirs = measure(gpt_products_runner("numpy"), gpt_products_runner("torch"),
                                       rounds=args.rounds, block=5)
            ratios = [a / b for a, b in zip(products, theirs)]
            print(f"      its Linear layers' matrix products alone: numpy {statistics.median(products) * 1e3:.1f} ms, "
                  f"PyTorch {statistics.median(theirs) * 1e3:.1f} ms, {statistics.median(ratios):.2f}x; they are "
                  f"{statistics.median(theirs) / statistics.median(other):.0%} of PyTorch's step")
            ours, theirs = gpt_peak_memory("tinytorch"), gpt_peak_memory("torch")
            ratio = ours / max(theirs, 1e-9)
            verdict = "within" if ratio <= GPT_MEMORY_TARGET else "OVER"
            print(f"      peak memory of a step: tinytorch {ours:.1f} MiB, PyTorch {theirs:.1f} MiB; ratio "
                  f"{ratio:.2f}x, target <= {GPT_MEMORY_TARGET:.2f}x: {verdict}")
        if "bpe" in chosen:
            bpe_workload(min(args.rounds, 5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
