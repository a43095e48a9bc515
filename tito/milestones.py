"""The milestones: real models trained on real data with the learner's package, one script each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Milestone:
    script: str  # path inside the checkout
    stage: str  # the last stage it needs
    what: str
    options: tuple[str, ...] = ()  # options of `tito milestone` beyond --epochs and --seed that it takes
    demo: tuple[str, ...] = ()  # `make demo` runs it with these options: a short run, reported but not judged


MILESTONES = {
    "mlp": Milestone("milestones/mlp.py", "07", "a 784-256-128-10 MLP trained with Adam on MNIST"),
    "cnn": Milestone("milestones/cnn.py", "09", "a two-layer CNN trained with Adam on MNIST or Fashion-MNIST",
                     ("dataset",)),
    "gpt": Milestone("milestones/gpt.py", "13", "a character-level GPT trained with AdamW on Shakespeare", ("steps",),
                     demo=("--steps", "200")),
}
