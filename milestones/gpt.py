"""Milestone 3: a GPT, built from an empty Tensor class up, learns to write like Shakespeare.

Runs on whichever `tinytorch` is first on PYTHONPATH: `tito milestone gpt` puts your exported package
there, `tito milestone gpt --reference` the reference build. Everything it calls is what you built in
01-13: the GPT of 13 (embeddings of 11, attention of 12, LayerNorm and blocks of 13), cross-entropy (05),
AdamW (06), the progress bar of 07, and the shipped text of 08.

The set-up is fixed so that results compare: a character-level GPT (the vocabulary is every character of
datasets/shakespeare_complete.txt.gz, 84 of them) with 4 blocks of width 128 and 4 heads, context 64,
batches of 32 random windows of the first 90% of the text, AdamW (lr 1e-3), 1,500 steps; the validation
loss is the mean cross-entropy over 20 random batches of the last 10%, in nats per character, measured
every 250 steps. PyTorch in exactly this set-up on one thread (benchmarks/gpt_torch.py) reaches a
validation loss of 1.72 after 1,500 steps; the reference must reach 1.78 or lower.

The run's lines go to .tito/milestones/gpt.log, the curves (the loss of every step, its running mean, and
the validation loss) to gpt.png beside it, and a sample of generated text ends the run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from judging import judge, keep_freed_memory, stopped
from plotting import plot_batch_losses, pyplot
from threadpoolctl import threadpool_limits

import tinytorch as tt

STEPS, TARGET, PYTORCH = 1500, 1.78, 1.72
CONTEXT, BATCH, WIDTH, HEADS, LAYERS = 64, 32, 128, 4, 4
EVAL_EVERY, EVAL_BATCHES = 250, 20


def corpus():
    """(train ids, validation ids, characters): the text as int64 ids into the sorted characters."""
    text = tt.datasets.shakespeare()
    chars = sorted(set(text))
    table = np.zeros(256, dtype=np.int64)
    table[[ord(c) for c in chars]] = np.arange(len(chars))
    ids = table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    split = int(0.9 * len(ids))
    return ids[:split], ids[split:], chars


def windows(source, rng):
    """One batch: inputs (BATCH, CONTEXT) and the same windows shifted by one character, the targets."""
    starts = rng.integers(0, len(source) - CONTEXT - 1, BATCH)
    offsets = starts[:, None] + np.arange(CONTEXT)
    return source[offsets], source[offsets + 1]


def loss_of(model, x, y):
    """The mean cross-entropy of the model's next-character predictions for inputs x and targets y."""
    return model(x, y)[1]


def validation_loss(model, val, rng) -> float:
    model.eval()
    with tt.no_grad():
        losses = [loss_of(model, *windows(val, rng)).item() for _ in range(EVAL_BATCHES)]
    model.train()
    return float(np.mean(losses))


def plot(path: Path, history: dict) -> None:
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.5))
    plot_batch_losses(axis, history["losses"], batch="step")
    axis.plot(history["step"], history["validation"], color="C1", marker="o", label="validation loss")
    axis.set(xlabel="step", ylabel="cross-entropy (nats per character)", title="GPT on Shakespeare")
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--steps", type=int, default=STEPS)
    options.add_argument("--seed", type=int, default=0)
    args = options.parse_args(argv)
    keep_freed_memory()

    folder = Path(".tito") / "milestones"
    folder.mkdir(parents=True, exist_ok=True)
    log_path, plot_path = folder / "gpt.log", folder / "gpt.png"
    with open(log_path, "w", encoding="utf-8") as log_file:
        def log(line: str) -> None:
            print(line, flush=True)
            log_file.write(line + "\n")
            log_file.flush()

        try:
            train, val, chars = corpus()
            vocab = len(chars)
            rng = np.random.default_rng(args.seed)
            tt.manual_seed(args.seed)
            model = tt.models.GPT(vocab, CONTEXT, LAYERS, HEADS, WIDTH)
            optimizer = tt.optim.AdamW(model.parameters(), lr=1e-3)
            count = sum(p.numpy().size for p in model.parameters())
            log(f"GPT: {LAYERS} blocks of width {WIDTH}, {HEADS} heads, context {CONTEXT}, vocabulary {vocab}, "
                f"{count:,} parameters; AdamW lr 1e-3, batch {BATCH}, {args.steps} steps, seed {args.seed}; "
                f"{len(train):,} training and {len(val):,} validation characters; BLAS on one thread")
            history: dict = {"step": [], "train": [], "validation": [], "losses": []}
            seconds: list[float] = []
            with threadpool_limits(limits=1):
                for first in range(1, args.steps + 1, EVAL_EVERY):  # one progress bar per stretch of steps
                    last = min(first + EVAL_EVERY - 1, args.steps)
                    bar, losses = tt.training.ProgressBar(f"steps {first}-{last}"), []
                    for index in range(last - first + 1):
                        x, y = windows(train, rng)
                        start = time.perf_counter()
                        loss = loss_of(model, x, y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        seconds.append(time.perf_counter() - start)
                        losses.append(loss.item())
                        bar(index, last - first + 1, losses[-1])
                    history["step"].append(last)
                    history["train"].append(float(np.mean(losses)))
                    history["losses"] += losses
                    history["validation"].append(validation_loss(model, val, rng))
                    log(f"step {last}: training loss {history['train'][-1]:.4f}, validation loss "
                        f"{history['validation'][-1]:.4f}, {statistics.median(seconds):.3f} s per step")
                prompt = np.array([[chars.index(c) for c in "ROMEO:\n"]])
                with tt.no_grad():
                    tt.manual_seed(args.seed)
                    sample = model.generate(prompt, 400, temperature=0.8).numpy()[0]
            log("sample:\n" + "".join(chars[i] for i in sample))
        except Exception as error:
            return stopped(error)

        plot(plot_path, history)
        log(f"curves saved to {plot_path}, this log to {log_path}")
        return judge(log, result=history["validation"][-1], ran=args.steps, judged=STEPS, unit="steps",
                     target=TARGET, pytorch=PYTORCH, pace=f"median {statistics.median(seconds):.3f} s per step",
                     hint="your embeddings, attention and blocks (`tito test 11`..`13`)", lower_is_better=True,
                     fmt=".3f")


if __name__ == "__main__":
    sys.exit(main())
