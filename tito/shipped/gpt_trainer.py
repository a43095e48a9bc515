"""The program that trains a student's GPT in the box for the leaderboard (tito/leaderboard.py), in the
judged set-up of milestones/gpt.py, and that scores those weights with the course's own GPT in a second box:

    python -I -S gpt_trainer.py JOB PACKAGE REPORT_FD REQUEST_FD [PATH ...]

tito.leaderboard copies it as JOB/lib/runner.py, the program a tito.sandbox.Box starts, beside wire.py and
train.txt, the training split (the first 90% of the text) and nothing of the rest; JOB/work.json holds the
characters and the set-up. It imports nothing from tito. It imports `tinytorch` from PACKAGE and says how
that went on the pipe REPORT_FD, then answers requests from the pipe REQUEST_FD. With a student's package
(PACKAGE), "train" (steps and seed), then "weights": the trained model's parameters, {name: float32 array}
from model.named_parameters(). The student's box is sent nothing else: its code never predicts, and never
holds a character of the validation split. With the course's reference package (another box), "predict"
(those weights as the student's box sent them, and windows of the validation split, as ids): it builds
models.GPT of the judged set-up, loads the weights (strictly: the names and shapes of the course's GPT) and
answers with the log-probabilities of the character after each window. It decides nothing: the parent
counts the CPU and the clock, holds the characters that follow the windows, and computes the loss itself.
"""

import json
import os
import sys
from typing import Any, TextIO

PREDICT_BATCH = 64  # windows per forward pass when predicting


def _first_line(error: BaseException) -> str:
    """"ValueError: the first line of its message", with MemoryError named as such (numpy raises a subclass)."""
    name = "MemoryError" if isinstance(error, MemoryError) else type(error).__name__
    text = str(error).strip()
    return f"{name}: {text.splitlines()[0] if text else '(no message)'}"[:500]


def _keep_freed_memory() -> None:
    """glibc keeps freed blocks for the next arrays, as milestones/judging.py's keep_freed_memory asks of the
    milestone's run: the same training costs the same here (without it a step spends a tenth of its time in
    page faults)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError, ImportError):
            return
        mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD


def train(tt: Any, ids: Any, work: dict[str, Any], steps: int, seed: int) -> Any:
    """The milestone's training: GPT(vocab, context, layers, heads, width), AdamW, batches of random
    windows of the training split drawn by default_rng(seed), the package's generator seeded with it."""
    import numpy as np

    context, batch = work["context"], work["batch"]
    rng = np.random.default_rng(seed)
    tt.manual_seed(seed)
    model = tt.models.GPT(len(work["chars"]), context, work["layers"], work["heads"], work["width"])
    optimizer = tt.optim.AdamW(model.parameters(), lr=work["lr"])
    for _ in range(steps):
        starts = rng.integers(0, len(ids) - context - 1, batch)
        offsets = starts[:, None] + np.arange(context)  # (B, T)
        loss = model(ids[offsets], ids[offsets + 1])[1]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


def trained_parameters(model: Any) -> Any:
    """{name: float32 array} of every parameter of the trained model, in model.named_parameters()'s order."""
    import numpy as np

    named = model.named_parameters()
    return {name: np.array(param.data, dtype=np.float32) for name, param in named}


def scored_model(tt: Any, work: dict[str, Any], sent: Any) -> Any:
    """The course's GPT of the judged set-up holding the weights `sent` (wire-encoded), or the reply that
    refuses them: {"refused": "unreadable"} (not a dict of names to float arrays) or {"refused": "layout"}
    (not the names and shapes of this GPT's parameters). Runs with the reference package alone."""
    import numpy as np
    import wire

    try:
        weights = wire.decode(sent)
    except Exception:  # whatever the student's box sent
        return {"refused": "unreadable"}
    if not isinstance(weights, dict) or not all(isinstance(value, np.ndarray) and value.dtype.kind == "f"
                                                for value in weights.values()):
        return {"refused": "unreadable"}
    model = tt.models.GPT(len(work["chars"]), work["context"], work["layers"], work["heads"], work["width"])
    own = dict(model.named_parameters(remove_duplicate=False))
    if set(own) != set(weights) or any(tuple(weights[name].shape) != tuple(param.shape)
                                       for name, param in own.items()):
        return {"refused": "layout"}
    model.load_state_dict({name: value.astype(np.float32) for name, value in weights.items()}, strict=True)
    return model


def predict(tt: Any, model: Any, contexts: Any) -> Any:
    """contexts (N, T) ids -> (N, vocab) float32: log-softmax of the model's logits at each window's last
    position, the prediction of the character after it."""
    import numpy as np

    contexts = np.asarray(contexts, dtype=np.int64)  # sent as uint8
    model.eval()
    rows = []
    with tt.no_grad():
        for first in range(0, len(contexts), PREDICT_BATCH):
            logits = model(contexts[first:first + PREDICT_BATCH])  # (b, T, vocab)
            last = np.asarray(logits.numpy(), dtype=np.float64)[:, -1]  # (b, vocab)
            shifted = last - last.max(axis=1, keepdims=True)
            rows.append(shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True)))
    return np.concatenate(rows).astype(np.float32)


def main(job: str, package: str, report_fd: int, request_fd: int, paths: list[str]) -> None:
    _keep_freed_memory()
    sys.path[:0] = [os.path.join(job, "lib")]
    sys.path += paths
    import numpy as np
    import wire

    with open(os.path.join(job, "work.json"), encoding="utf-8") as stream:
        work = wire.loads(stream.read())
    with open(os.path.join(job, "lib", "train.txt"), encoding="ascii") as stream:
        text = stream.read()
    table = np.zeros(256, dtype=np.int64)
    table[[ord(c) for c in work["chars"]]] = np.arange(len(work["chars"]))
    ids = table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]
    out: TextIO = os.fdopen(report_fd, "w", encoding="utf-8")
    requests = os.fdopen(request_fd, "r", encoding="utf-8")

    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    emit({"importing": True})  # before any code of the package runs
    sys.path.insert(0, package)
    try:
        import tinytorch as tt
    except BaseException as error:  # the package may raise anything on import
        emit({"import_error": _first_line(error)})
        return
    emit({"imported": True})
    model = None
    for line in requests:
        request = json.loads(line)
        try:
            if "train" in request:
                model = train(tt, ids, work, request["train"]["steps"], request["train"]["seed"])
                reply: dict[str, Any] = {"trained": True}
            elif "weights" in request:
                reply = {"weights": wire.encode(trained_parameters(model))}
            else:
                scored = scored_model(tt, work, request["predict"]["weights"])
                reply = scored if isinstance(scored, dict) else \
                    {"log_probs": wire.encode(predict(tt, scored, wire.decode(request["predict"]["contexts"])))}
        except BaseException as error:  # SystemExit included
            reply = {"error": _first_line(error)}
        emit({"n": request["n"], **reply})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:])
    os._exit(0)  # no interpreter shutdown: nothing the package registered with atexit runs
