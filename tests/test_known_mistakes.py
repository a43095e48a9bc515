"""The mistakes students made that once passed a hidden suite at full marks: each, written into the reference,
must cost points of the task it is in, with words that send the student to it.

Each row is a reviewed mistake (a student's walk through 08-13, the code review's), not a sampled mutant: the
text of the reference it replaces, what a student wrote instead, the task that must lose points and the words
its message must hold. They are graded through `tito mutants`' machinery (the stage's own suite on the
reference of the stages before it), one stage's mistakes side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tito import mutants
from tito.project import stage as find_stage
from tito.source import read_source, solution_regions

pytestmark = pytest.mark.slow  # each stage's suite runs on the reference and on every mistake: minutes


@dataclass(frozen=True)
class Mistake:
    stage: str
    task: str  # the task whose region the mistake is in
    what: str  # the mistake, as a student would describe it
    old: str  # text of the reference solution, unique in the stage's exported cells
    new: str  # what the student wrote instead
    words: tuple[str, ...] = ()  # each in the message of some failed check of the task that loses points
    loses: str = ""  # the task that must lose points, when not the mistake's own

    @property
    def costs(self) -> str:
        return self.loses or self.task


MISTAKES = [
    Mistake("04", "04.10", "a Dropout of p = 0 still draws its mask",
            "if not self.training or self.p == 0:", "if not self.training:", ("draw",)),
    Mistake("08", "08.5", "BatchSampler's length through floats (large counts round)",
            "return -(-len(self.sampler) // self.batch_size)",
            "return int(np.ceil(len(self.sampler) / self.batch_size))"),
    Mistake("08", "08.8", "Normalize works in place on the images it is given",
            "return _returned((batch - mean) / std, x)",
            "batch -= mean\n        batch /= std\n        return _returned(batch, x)", ("not batch -= mean",)),
    Mistake("09", "09.1", "_pair lets a bool through as a size",
            "and not isinstance(v, (bool, np.bool_))", "", ("True",)),
    Mistake("09", "09.4", "the convolution's forward is the loop over output pixels",
            "out = np.matmul(weight.reshape(out_channels, -1), cols)        # (N, O, OH*OW), a new array\n"
            "        if bias is not None:\n            out += bias[:, None]\n",
            "out = _conv2d_loops(x, weight, bias, stride, padding, dilation).reshape(x.shape[0], out_channels, -1)\n",
            ("im2col",), loses="09.7"),  # the speed is judged where the whole conv2d runs, forward and backward
    Mistake("11", "11.3", "Embedding's lookup is weight[indices] (a view of the weight for one index)",
            "return np.take(weight, indices, axis=0)", "return weight[indices]", ("view",)),
    Mistake("11", "11.8", "sinusoidal positions computed in float32",
            "position = np.arange(length, dtype=np.float64)[:, None]                       # (length, 1)\n"
            "    frequency = 10000.0 ** (-np.arange(0, embedding_dim, 2, dtype=np.float64) / embedding_dim)",
            "position = np.arange(length, dtype=np.float32)[:, None]\n"
            "    frequency = np.float32(1e4) ** (-np.arange(0, embedding_dim, 2, dtype=np.float32) / embedding_dim)"),
    Mistake("13", "13.6", "the block does not hand the cache to its attention",
            "x = x + self.attn(self.ln_1(x), cache)", "x = x + self.attn(self.ln_1(x))"),
    Mistake("13", "13.8", "greedy sampling (temperature 0) still draws from the generator",
            "if temperature == 0:\n        return logits.argmax(axis=-1)",
            "if temperature == 0:\n        generator.random((len(logits), 1))\n        return logits.argmax(axis=-1)",
            ("draw",)),
    # from a new student's trial of 08-13 (issue #23)
    Mistake("10", "10.12", "load lets json's JSONDecodeError through, not naming the file",
            "        except ValueError as error:  # JSONDecodeError, UnicodeDecodeError\n"
            '            raise ValueError(f"{path} is not a tokenizer file: it is not'
            ' valid JSON ({error})") from None',
            "        except UnicodeDecodeError as error:\n"
            '            raise ValueError(f"{path} is not a tokenizer file: it is not'
            ' valid JSON ({error})") from None',
            ("JSONDecodeError's message",)),
    Mistake("10", "10.10", "encode merges the pair of highest rank first",
            "pair = min(zip(tokens, tokens[1:]), key=lambda pair: ranks.get(pair, _NEVER))",
            "pair = max(zip(tokens, tokens[1:]), key=lambda pair: ranks.get(pair, -1))",
            ("highest rank",)),
    Mistake("10", "10.7", "the fast trainer recounts every pair for every merge (the slow trainer again)",
            "    heap = [(-count, pair) for pair, count in counts.items()]",
            "    return _train_bpe_slow(words, frequencies, num_merges)", ("times as long",)),
    Mistake("10", "10.10", "encode applies every merge to every chunk, in the order learned (with its cache)",
            "                while len(tokens) > 1:\n"
            "                    pair = min(zip(tokens, tokens[1:]), key=lambda pair: ranks.get(pair, _NEVER))\n"
            "                    if pair not in ranks:\n"
            "                        break\n"
            "                    tokens = _merge(tokens, pair, ranks[pair])",
            "                for pair, new_id in ranks.items():\n"
            "                    tokens = _merge(tokens, pair, new_id)", ("times as long",)),
    Mistake("11", "11.1", "_check_indices returns an int64 copy of the indices, not the array given",
            '                             f"(0 to {num_embeddings - 1})")\n'
            "    return index",
            '                             f"(0 to {num_embeddings - 1})")\n'
            "    return index.astype(np.int64)",
            ("no copy",)),
    Mistake("11", "11.7", "from_pretrained inverts freeze",
            "layer.weight = Parameter(table, requires_grad=not freeze)",
            "layer.weight = Parameter(table, requires_grad=freeze)",
            ("requires_grad",)),
    Mistake("11", "11.9", "SinusoidalPositionalEncoding keeps its table pe as a Parameter",
            "        self.pe = sinusoidal_positions(max_len, embedding_dim)",
            "        self.pe = Parameter(sinusoidal_positions(max_len, embedding_dim).data)",
            ("not a Parameter",)),
    Mistake("12", "12.1", "_attention_bias copies a float mask that already has the dtype",
            "np.asarray(-np.inf, dtype))\n"
            "    return mask.astype(dtype, copy=False)",
            "np.asarray(-np.inf, dtype))\n"
            "    return mask.astype(dtype)",
            ("no copy",)),
    Mistake("12", "12.6", "scaled_dot_product_attention calls the composed attention (NaN on a fully masked row)",
            "return _ScaledDotProductAttention.apply(q, k, v, bias=bias, scale=scale)",
            "return _attention_composed(q, k, v, bias, scale)",
            ("fully masked",)),
    Mistake("12", "12.6", "scale=0.0 read as no scale given (scale or the default)",
            "scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)",
            "scale = float(scale or 1.0 / math.sqrt(q.shape[-1]))", ("scale=0",)),
    Mistake("12", "12.9", "out_proj redrawn after in_proj_weight",
            "        if self.in_proj_bias is not None:\n"
            "            self.in_proj_bias.data[...] = 0.0",
            "        self.out_proj.reset_parameters()\n"
            "        if self.in_proj_bias is not None:\n"
            "            self.in_proj_bias.data[...] = 0.0",
            ("Linear(8, 8)",)),
    Mistake("12", "12.10", "the attention weights returned carry a graph",
            "        return out, Tensor(weights.mean(axis=1) if average_attn_weights else weights)",
            "        weights = Tensor(weights, requires_grad=True)\n"
            "        return out, weights.mean(axis=1) if average_attn_weights else weights",
            ("requires_grad",)),
    Mistake("12", "12.4", "the bias always added in place (scores += bias)",
            "        if np.broadcast_shapes(scores.shape, bias.shape) == scores.shape:\n"
            "            scores += bias\n"
            "        else:\n"
            "            scores = scores + bias                              # the bias adds batch axes",
            "        scores += bias",
            ("more batch axes",)),
    Mistake("08", "08.1", "TensorDataset accepts a lone 0-d tensor (only first sizes compared)",
            "if None in sizes or any(size != sizes[0] for size in sizes):",
            "if any(size != sizes[0] for size in sizes):",
            ("0-d",)),
    Mistake("08", "08.1", "TensorDataset copies an ndarray it is given",
            "tensors = tuple(as_tensor(t) for t in tensors)",
            "tensors = tuple(t if isinstance(t, Tensor) else Tensor(np.array(t)) for t in tensors)",
            ("copy",)),
    Mistake("08", "08.5", "BatchSampler lists the whole sampler before its first batch",
            "for index in self.sampler:\n"
            "            batch.append(index)",
            "for index in list(self.sampler):\n"
            "            batch.append(index)",
            ("generator",)),
    Mistake("08", "08.7", "DataLoader builds every batch of the epoch before yielding the first",
            "for indices in self.batch_sampler:\n"
            "            yield self.collate_fn([self.dataset[index] for index in indices])",
            "batches = [self.collate_fn([self.dataset[index] for index in indices]) for"
            " indices in self.batch_sampler]\n"
            "        yield from batches",
            ("generator",)),
    Mistake("08", "08.9", "RandomHorizontalFlip(p=1) returns the view batch[..., ::-1]",
            "return _returned(np.where(flip[:, None, None, None], batch[..., ::-1], batch), x)",
            "return _returned(batch[..., ::-1] if self.p >= 1 else np.where(flip[:, None,"
            " None, None], batch[..., ::-1], batch), x)",
            ("view",)),
    Mistake("08", "08.10", "RandomCrop draws the lefts before the tops",
            "top = generator.integers(0, height - h + 1, size=n)\n"
            "        left = generator.integers(0, width - w + 1, size=n)",
            "left = generator.integers(0, width - w + 1, size=n)\n"
            "        top = generator.integers(0, height - h + 1, size=n)",
            ("tops first",)),
    Mistake("08", "08.10", "RandomCrop draws each image's top and left together",
            "top = generator.integers(0, height - h + 1, size=n)\n"
            "        left = generator.integers(0, width - w + 1, size=n)",
            "places = generator.integers(0, [height - h + 1, width - w + 1], size=(n, 2))\n"
            "        top, left = places[:, 0], places[:, 1]",
            ("tops first",)),
    Mistake("08", "08.6", "len(DataLoader) is the dataset's size",
            "return len(self.batch_sampler)",
            "return len(self.dataset)",
            ("number of batches",)),
    Mistake("08", "08.7", "DataLoader ignores collate_fn",
            "yield self.collate_fn([self.dataset[index] for index in indices])",
            "yield default_collate([self.dataset[index] for index in indices])",
            ("collate_fn given",)),
    Mistake("08", "08.10", "RandomCrop pads with the edge values, not zeros",
            "batch = np.pad(batch, ((0, 0), (0, 0), (pad, pad), (pad, pad)))",
            'batch = np.pad(batch, ((0, 0), (0, 0), (pad, pad), (pad, pad)), mode="edge")',
            ("zeros",)),
    Mistake("09", "09.10", "average pooling divides float32 by an integer divisor (float64 out)",
            "        total /= divisor\n"
            "        return total",
            "        return total / (np.int64(kh * kw) if count_include_pad else divisor)",
            ("float32",)),
    Mistake("09", "09.5", "col2im accumulates in float64 whatever cols' dtype",
            "grad = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)",
            "grad = np.zeros((n, c, h + 2 * ph, w + 2 * pw))",
            ("float32",)),
    Mistake("09", "09.7", "conv2d lets a bias of the wrong length broadcast",
            "if bias is not None and tuple(bias.shape) != (weight.shape[0],):",
            "if False:",
            ("out_channels",)),
    Mistake("09", "09.8", "Conv2d draws the bias before the weight",
            "self.weight.data[...] = default_generator.uniform(-bound, bound, size=self.weight.shape)\n"
            "        if self.bias is not None:\n"
            "            self.bias.data[...] = default_generator.uniform(-bound, bound,"
            " size=self.bias.shape)",
            "if self.bias is not None:\n"
            "            self.bias.data[...] = default_generator.uniform(-bound, bound,"
            " size=self.bias.shape)\n"
            "        self.weight.data[...] = default_generator.uniform(-bound, bound,"
            " size=self.weight.shape)",
            ("weight drawn first",)),
    Mistake("09", "09.6", "_Conv2d.backward computes grad_x though x does not require grad",
            "        if needs[0]:\n"
            "            grad_cols",
            "        if True:\n"
            "            grad_cols",
            ("needs_input_grad",)),
    Mistake("12", "12.5", "the fused backward computes grad_q though q does not require grad",
            "            if needs[0]:\n                grad_q",
            "            if True:\n                grad_q", ("needs_input_grad",)),
    Mistake("13", "13.2", "_LayerNorm.backward computes the weight's gradient though it is not asked for",
            "        if needs[1]:\n            grad_weight", "        if True:\n            grad_weight",
            ("needs_input_grad",)),
    Mistake("09", "09.7", "conv2d wraps _conv2d_loops's array in a Tensor (no graph)",
            "    if bias is None:\n"
            "        out = _Conv2d.apply(batched, weight, **settings)\n"
            "    else:\n"
            "        out = _Conv2d.apply(batched, weight, bias, **settings)",
            "    out = Tensor(_conv2d_loops(batched.data, weight.data, None if bias is"
            " None else bias.data, **settings))",
            ("_Conv2d.apply",)),
    Mistake("09", "09.9", "_MaxPool2d.backward returns a bare array",
            "out=view)     # each pixel in one window at most\n"
            "        return (_unpad(grad, (ph, pw)),)",
            "out=view)     # each pixel in one window at most\n"
            "        return _unpad(grad, (ph, pw))",
            ("tuple",)),
    Mistake("13", "13.7", "the cache's mask for several new tokens lacks the offset of the cached ones",
            "np.tril(np.ones((new, end), dtype=bool), k=start)",
            "np.tril(np.ones((new, end), dtype=bool))",
            ("two positions at a time",)),
    Mistake("13", "13.7", "the cache attends with is_causal=True for several new tokens",
            "mask = None if new == 1 else np.tril(np.ones((new, end), dtype=bool), k=start)\n"
            "        return scaled_dot_product_attention(q, Tensor(self.keys[:, :, :end]),"
            " Tensor(self.values[:, :, :end]),\n"
            "                                            attn_mask=mask)",
            "return scaled_dot_product_attention(q, Tensor(self.keys[:, :, :end]),"
            " Tensor(self.values[:, :, :end]),\n"
            "                                            is_causal=new > 1)",
            ("two positions at a time",)),
    Mistake("13", "13.4", "the MLP's forward never calls its dropout",
            "return self.dropout(x)",
            "return x",
            ("Dropout(0.5) is not applied",)),
    Mistake("13", "13.5", "the attention's resid_dropout ignores the dropout given",
            "self.resid_dropout = Dropout(dropout)",
            "self.resid_dropout = Dropout(0.0)",
            ("resid_dropout",)),
    Mistake("13", "13.10", "the GPT's forward never calls drop",
            "        x = self.drop(x)\n",
            "",
            ("self.drop",)),
    Mistake("13", "13.9", "the GPT-2 draws in reversed order of named_parameters()",
            "for name, p in self.named_parameters():\n"
            "            if p.ndim == 2:",
            "for name, p in reversed(list(self.named_parameters())):\n"
            "            if p.ndim == 2:",
            ("order of named_parameters",)),
    Mistake("13", "13.9", "c_proj's weights scaled in place instead of drawn anew",
            "p.data[...] = default_generator.normal(0.0, 0.02 / math.sqrt(2 * n_layer), size=p.shape)",
            "p.data[...] = p.data / math.sqrt(2 * n_layer)",
            ("anew",)),
    Mistake("13", "13.11", "generate restores the mode only when it returns, not on an error",
            "        finally:\n"
            "            self.train(mode)",
            "        except Exception:\n"
            "            raise\n"
            "        self.train(mode)",
            ("also on an error",)),
    Mistake("13", "13.11", "generate runs without no_grad",
            "            with no_grad():",
            "            if True:",
            ("no_grad",)),
    Mistake("13", "13.8", "a negative temperature is accepted",
            "if temperature < 0:",
            "if False:",
            ("temperature",)),
    # a second new student's trial of 08-13 (2026-12-03): the mistakes that passed, or lost points elsewhere
    Mistake("09", "09.12", "a pooling module turns an int kernel_size into a pair",
            "self.stride = kernel_size if stride is None else stride\n"
            "        self.padding, self.dilation, self.ceil_mode = padding, dilation, ceil_mode",
            "self.stride = kernel_size if stride is None else stride\n"
            "        self.padding, self.dilation, self.ceil_mode = padding, dilation, ceil_mode\n"
            "        self.kernel_size = _pair(kernel_size, 'kernel_size', 1)", ("given as ints",)),
    Mistake("11", "11.8", "sines and cosines in each other's columns",
            "table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, :embedding_dim // 2])",
            "table[:, 0::2] = np.cos(angles)\n    table[:, 1::2] = np.sin(angles[:, :embedding_dim // 2])",
            ("even columns",)),
    Mistake("13", "13.10", "positions restart at 0 after the cached tokens",
            "self.wpe(np.arange(start, start + length))", "self.wpe(np.arange(length))", ("two parts",)),
    Mistake("13", "13.10", "the length check forgets the cached positions",
            "if idx.ndim != 2 or start + length > self.block_size:", "if idx.ndim != 2 or length > self.block_size:",
            ("past the cached block_size",)),
]


def as_mutation(notebook, mistake: Mistake) -> mutants.Mutation:
    """The mistake as a one-place edit of the cell that holds its text, inside a region of its task."""
    found = [(index, cell.source) for index, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and mistake.old in cell.source]
    assert len(found) == 1 and found[0][1].count(mistake.old) == 1, f"{mistake.what}: its text is not unique"
    index, source = found[0]
    start = source.index(mistake.old)
    line = source.count("\n", 0, start) + 1
    last = line + mistake.old.count("\n")
    tasks = {task for low, high, task in solution_regions(source) if low <= line and last <= high}
    assert tasks == {mistake.task}, f"{mistake.what}: the text is in {tasks or 'no region'}, not {mistake.task}"
    edit = mutants.Edit(start, start + len(mistake.old), mistake.new, mistake.what)
    return mutants.Mutation(mistake.task, index, line, edit, mistake.old, mistake.new)


@pytest.mark.parametrize("number", sorted({m.stage for m in MISTAKES}))
def test_each_known_mistake_costs_its_task_with_words_that_point_to_it(shared_course, number):
    stage = find_stage(shared_course, number)
    notebook = read_source(stage)
    mistakes = [m for m in MISTAKES if m.stage == number]
    results = mutants.run_mutants(shared_course, stage, [as_mutation(notebook, m) for m in mistakes], workers=2)
    missed = []
    for mistake, result in zip(mistakes, results):
        lost = [check for check in result.failures if check.task == mistake.costs and check.points < check.max_points]
        words = " ".join(check.message for check in lost)
        if not lost:
            missed.append(f"{mistake.what}: no check of {mistake.costs} lost points (failed: {result.caught_by})")
        elif not all(word in words for word in mistake.words):
            missed.append(f"{mistake.what}: the words of {mistake.costs} lack {mistake.words}: {words[:400]}")
    assert missed == []
