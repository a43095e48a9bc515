"""The GPT milestone's set-up in PyTorch, one thread, for the numbers the milestone compares against.

    .venv/bin/python benchmarks/gpt_torch.py [--steps N] [--seed S]

A character-level GPT on datasets/shakespeare_complete.txt.gz (the first 90% for training, the last 10% for
validation; the vocabulary is every character of the text): 4 pre-norm blocks of width 128 with 4 heads,
context 64, batches of 32 random windows, AdamW (lr 1e-3, PyTorch's other defaults), GELU, learned
positions, no dropout, no weight tying. Prints the validation loss (the mean over 20 random validation
batches) every 250 steps and the median seconds per step. Needs the optional torch extra.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tito.datasets import load  # noqa: E402

CONTEXT, BATCH, WIDTH, HEADS, LAYERS = 64, 32, 128, 4, 4


def main() -> int:
    import torch
    from torch import nn
    from torch.nn import functional as F

    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--steps", type=int, default=1500)
    options.add_argument("--seed", type=int, default=0)
    args = options.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    text = load("shakespeare")
    chars = sorted(set(text))
    ids = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    table = np.zeros(256, dtype=np.int64)
    table[[ord(c) for c in chars]] = np.arange(len(chars))
    data = table[ids]
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]

    def batch(source):
        starts = rng.integers(0, len(source) - CONTEXT - 1, BATCH)
        x = np.stack([source[s:s + CONTEXT] for s in starts])
        y = np.stack([source[s + 1:s + CONTEXT + 1] for s in starts])
        return torch.from_numpy(x), torch.from_numpy(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
            self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
            self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(WIDTH, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
            x = x + self.proj(y)
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(vocab, WIDTH), nn.Embedding(CONTEXT, WIDTH)
            self.blocks = nn.Sequential(*[Block() for _ in range(LAYERS)])
            self.norm, self.head = nn.LayerNorm(WIDTH), nn.Linear(WIDTH, vocab)

        def forward(self, idx):
            x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1]))
            return self.head(self.norm(self.blocks(x)))

    model = GPT(len(chars))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def validation_loss():
        model.eval()
        with torch.no_grad():
            losses = []
            for _ in range(20):
                x, y = batch(val)
                losses.append(F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1)).item())
        model.train()
        return float(np.mean(losses))

    seconds = []
    for step in range(1, args.steps + 1):
        x, y = batch(train)
        start = time.perf_counter()
        loss = F.cross_entropy(model(x).reshape(-1, len(chars)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
        if step % 250 == 0 or step == args.steps:
            print(f"step {step}: train loss {loss.item():.4f}, validation loss {validation_loss():.4f}", flush=True)
    print(f"PyTorch {torch.__version__}: validation loss {validation_loss():.4f} after {args.steps} steps, "
          f"vocabulary {len(chars)}, median {statistics.median(seconds):.3f} s per step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
