"""Hidden suite of 10_tokenization: the character tokenizer (its vocabulary, encode with and without an
unknown token, decode, the round trip on generated strings, the errors naming the character and its
position or the id), the pieces of BPE training (pair counts, merging a pair, the slow and the fast
trainer), and the byte-level BPE tokenizer (each token's bytes, training on a text, encoding, decoding
any ids, the round trip on generated strings including non-ASCII and empty ones, saving to JSON and
refusing damaged files with a ValueError naming them).

Every `expected` is derived independently on the judge's side: the merges by recounting every pair with a
Counter for every merge (ties to the smallest pair), the chunks with the documented pattern, encoding by
applying every merge in order, decoding by joining bytes. The private pieces (`_count_pairs`, `_merge`,
the trainers) are reached through `tinytorch.core.tokenization`, so that points follow the work. Two checks
are timed by the grader itself, each call on inputs made afresh from a seed it sends, as a ratio to a
pure-Python pair count of the same inputs in a box without the package, taking turns (never an absolute
time): training 500 merges must cost at most SPEED_LIMIT times YARD_COUNTS pair counts of the same words,
and encoding a text at most ENCODE_LIMIT times YARD_COUNTS pair counts of its bytes. Recounting per merge, or applying every
merge to every chunk, loses those checks' points and only those.
"""

import importlib
import itertools
import json
import os
import random
import re
import tempfile
from collections import Counter

import numpy as np
from hypothesis import strategies as st

from checklib import CheckFailed, Timed, capture_error, check

# ---------------------------------------------------------------------------------------------------
# Running the package (compute side)


def _tokenization(tt):
    """The exported module itself, for the private names the tokenizers call."""
    return importlib.import_module(tt.__name__ + ".core.tokenization")


# ---------------------------------------------------------------------------------------------------
# Judge side: independent derivations

_JUDGE_CHUNK = re.compile(r"""'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def _judge_words(text):
    """The distinct chunks of text as lists of UTF-8 bytes, and how often each occurs."""
    frequencies = Counter(_JUDGE_CHUNK.findall(text))
    return [list(chunk.encode("utf-8")) for chunk in frequencies], list(frequencies.values())


def _judge_merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if tuple(ids[i:i + 2]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _judge_count(words, frequencies):
    counts = Counter()
    for word, frequency in zip(words, frequencies):
        for i in range(len(word) - 1):
            counts[(word[i], word[i + 1])] += frequency
    return counts


def _judge_train(words, frequencies, num_merges):
    """Recount every pair for every merge; the most frequent pair, ties to the smallest (a, b)."""
    words, merges = [list(word) for word in words], []
    for k in range(num_merges):
        counts = _judge_count(words, frequencies)
        if not counts:
            break
        best = max(counts.values())
        pair = min(p for p, count in counts.items() if count == best)
        merges.append([int(pair[0]), int(pair[1])])
        words = [_judge_merge(word, pair, 256 + k) for word in words]
    return merges


def _judge_vocab(merges):
    vocab = [bytes([i]) for i in range(256)]
    for a, b in merges:
        vocab.append(vocab[a] + vocab[b])
    return vocab


def _judge_encode_chunk(chunk, merges):
    ids = list(chunk.encode("utf-8"))
    for k, pair in enumerate(merges):
        ids = _judge_merge(ids, pair, 256 + k)
    return ids


def _judge_encode(text, merges):
    """Every merge applied in order to every chunk."""
    return [i for chunk in _JUDGE_CHUNK.findall(text) for i in _judge_encode_chunk(chunk, merges)]


def _judge_decode(ids, merges):
    vocab = _judge_vocab(merges)
    return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")


def _names(what, message, *texts):
    """CheckFailed unless the message holds every text as a whole word (numbers not part of longer ones)."""
    for text in texts:
        if not re.search(r"(?<![\w-])" + re.escape(text) + r"(?!\w)", message):
            raise CheckFailed(f"{what}: the message {message!r:.200} should name {text}",
                              f"{what}: the message does not name {text}")


def _raised(what, output, error):
    """CheckFailed unless the capture_error output says `error` was raised."""
    if output["raised"] != error:
        said = "raised nothing" if output["raised"] is None else f"raised {output['raised']}"
        detail = f" ({output['message']!r:.80})" if output["raised"] else ""
        raise CheckFailed(f"{what}: expected {error} but it {said}{detail}", f"{what}: expected {error} but it {said}")


# ---------------------------------------------------------------------------------------------------
# Cases

# pieces of text that make merges and ties likely, with whitespace, digits, symbols and non-ASCII letters
_PIECES = ["a", "b", "ab", "ba", "aab", "the", " the", " a", " b", "  ", " ", "\n", "\n\n", ",", ".", "'s", "'t",
           "1", "23", "_", "é", "ß", "café", "語", "日本", "🙂", "👍🏽", "-", "  x", "e", "é!"]


def _piece_text(min_size=0, max_size=40):
    return st.lists(st.sampled_from(_PIECES), min_size=min_size, max_size=max_size).map("".join)


def _any_text(max_size=30):
    """Any str (hypothesis's text: every plane of Unicode, no lone surrogates), or one made of the pieces."""
    return st.one_of(st.text(max_size=max_size), _piece_text(max_size=max_size))


@st.composite
def _word_case(draw, max_merges=25):
    """words (lists of ids from a few bytes), their frequencies, and a number of merges."""
    alphabet = draw(st.lists(st.integers(0, 255), min_size=1, max_size=4, unique=True))
    words = draw(st.lists(st.lists(st.sampled_from(alphabet), min_size=1, max_size=9), min_size=1, max_size=12))
    return {"words": words, "frequencies": draw(st.lists(st.integers(1, 5), min_size=len(words), max_size=len(words))),
            "num_merges": draw(st.integers(0, max_merges))}


@st.composite
def _merges(draw, max_merges=30):
    """A valid list of merges: merge k joins two ids below 256 + k, no pair twice. Ids are drawn from letters,
    UTF-8 lead and continuation bytes and the tokens made so far."""
    wanted, merges, seen = draw(st.integers(0, max_merges)), [], set()
    bytes_ = [97, 98, 32, 0xC3, 0xA9, 0xE6, 0x97, 0xA5, 0xF0, 0x9F, 0x99, 0x82, 255, 0]
    for _ in range(3 * wanted):
        if len(merges) == wanted:
            break
        made = list(range(256, 256 + len(merges)))
        pool = bytes_ + made if made else bytes_
        pair = (draw(st.sampled_from(pool)), draw(st.sampled_from(pool)))
        if pair not in seen:
            seen.add(pair)
            merges.append(list(pair))
    return merges


@st.composite
def _trained_case(draw, texts=3):
    """merges learned (by the judge) on a drawn corpus, and texts to encode."""
    corpus = draw(_piece_text(min_size=1, max_size=60))
    merges = _judge_train(*_judge_words(corpus), draw(st.integers(0, 40)))
    return {"corpus": corpus, "merges": merges,
            "texts": [draw(_any_text()) for _ in range(texts)] + [corpus[draw(st.integers(0, len(corpus))):]]}


# ---------------------------------------------------------------------------------------------------
# 10.1 CharTokenizer: the vocabulary


@check(task="10.1", points=2, inputs=st.fixed_dictionaries({"corpus": _any_text(60)}),
       describe=lambda case: f"CharTokenizer({case['corpus']!r}): itos, stoi, vocab_size and unknown_id")
def char_vocabulary_is_the_sorted_characters_of_the_corpus(tt, case):
    tokenizer = tt.text.CharTokenizer(case["corpus"])
    return {"itos": list(tokenizer.itos), "stoi": sorted([char, int(i)] for char, i in tokenizer.stoi.items()),
            "vocab_size": tokenizer.vocab_size, "unknown_id": tokenizer.unknown_id}


@char_vocabulary_is_the_sorted_characters_of_the_corpus.expected
def _(case):
    chars = sorted(set(case["corpus"]))
    return {"itos": chars, "stoi": [[c, i] for i, c in enumerate(chars)], "vocab_size": len(chars), "unknown_id": None}


@check(task="10.1", points=1,
       inputs=st.fixed_dictionaries({"corpus": _any_text(40),
                                     "unknown": st.sampled_from(["?", "\ufffd", "a", " ", "~"])}),
       describe=lambda case: f"CharTokenizer({case['corpus']!r}, unknown={case['unknown']!r}): itos and unknown_id")
def char_vocabulary_holds_the_unknown_character_once(tt, case):
    tokenizer = tt.text.CharTokenizer(case["corpus"], unknown=case["unknown"])
    return {"itos": list(tokenizer.itos), "unknown_id": tokenizer.unknown_id}


@char_vocabulary_holds_the_unknown_character_once.expected
def _(case):
    chars = sorted(set(case["corpus"]) | {case["unknown"]})
    return {"itos": chars, "unknown_id": chars.index(case["unknown"])}


# ---------------------------------------------------------------------------------------------------
# 10.2 CharTokenizer.encode


@st.composite
def _char_case(draw, unknown=False, foreign=False):
    """A corpus, a text of its characters (with foreign: and of characters outside it), maybe an unknown token."""
    corpus = draw(_any_text(40).filter(len))
    known = sorted(set(corpus))
    others = [c for c in "xyzé語🙂\n #" if c not in known and (not unknown or c != "?")]
    text = draw(st.lists(st.sampled_from(known + others if foreign and others else known), max_size=40).map("".join))
    case = {"corpus": corpus, "text": text}
    if unknown:
        case["unknown"] = "?"
    return case


@check(task="10.2", points=2, inputs=_char_case(),
       describe=lambda case: f"CharTokenizer({case['corpus']!r}).encode({case['text']!r})")
def char_encode_gives_each_character_its_id(tt, case):
    return tt.text.CharTokenizer(case["corpus"]).encode(case["text"])


@char_encode_gives_each_character_its_id.expected
def _(case):
    chars = sorted(set(case["corpus"]))
    return [chars.index(c) for c in case["text"]]


@check(task="10.2", points=1, inputs=_char_case(unknown=True, foreign=True),
       describe=lambda case: f"CharTokenizer({case['corpus']!r}, unknown='?').encode({case['text']!r})")
def char_encode_maps_unknown_characters_to_the_unknown_id(tt, case):
    return tt.text.CharTokenizer(case["corpus"], unknown="?").encode(case["text"])


@char_encode_maps_unknown_characters_to_the_unknown_id.expected
def _(case):
    chars = sorted(set(case["corpus"]) | {"?"})
    return [chars.index(c) if c in chars else chars.index("?") for c in case["text"]]


@st.composite
def _refused_case(draw):
    case = draw(_char_case())
    foreign = draw(st.sampled_from([c for c in "xyzé語🙂\n#" if c not in case["corpus"]]
                                   or [next(chr(c) for c in range(0x4E00, 0x9FFF) if chr(c) not in case["corpus"])]))
    position = draw(st.integers(0, len(case["text"])))
    case["text"] = case["text"][:position] + foreign + case["text"][position:] + foreign
    case.update(foreign=foreign, position=position)
    return case


@check(task="10.2", points=1, inputs=_refused_case(),
       describe=lambda case: f"CharTokenizer({case['corpus']!r}).encode({case['text']!r}), whose character "
                             f"{case['foreign']!r} is not in the vocabulary")
def char_encode_refuses_an_unknown_character_naming_it_and_its_position(tt, case):
    tokenizer = tt.text.CharTokenizer(case["corpus"])
    return capture_error(lambda: tokenizer.encode(case["text"]))


@char_encode_refuses_an_unknown_character_naming_it_and_its_position.verdict
def _(case, output):
    what = f"CharTokenizer({case['corpus']!r}).encode({case['text']!r})"
    _raised(what, output, "ValueError")
    if repr(case["foreign"]) not in output["message"]:
        raise CheckFailed(f"{what}: the message {output['message']!r:.200} should name the character "
                          f"{case['foreign']!r} (its repr)", f"{what}: the message does not name the character")
    _names(what, output["message"], str(case["position"]))


# ---------------------------------------------------------------------------------------------------
# 10.3 CharTokenizer.decode


@st.composite
def _char_decode_case(draw):
    case = draw(_char_case(foreign=True))
    size = len(set(case["corpus"]))
    case["ids"] = draw(st.lists(st.integers(0, size - 1), max_size=30))
    return case


@check(task="10.3", points=2, inputs=_char_decode_case(),
       describe=lambda case: f"for CharTokenizer({case['corpus']!r}): decode(encode(s)) for s of its characters, "
                             f"decode({case['ids']}) of a list and of a numpy array, and decode(encode(t)) with "
                             f"unknown='?' for t = {case['text']!r}")
def char_decode_joins_the_characters_and_round_trips(tt, case):
    tokenizer = tt.text.CharTokenizer(case["corpus"])
    marked = tt.text.CharTokenizer(case["corpus"], unknown="?")
    known = "".join(c for c in case["text"] if c in set(case["corpus"]))
    return {"round trip": tokenizer.decode(tokenizer.encode(known)), "list": tokenizer.decode(list(case["ids"])),
            "array": tokenizer.decode(np.array(case["ids"], dtype=np.int64)),
            "with unknown": marked.decode(marked.encode(case["text"]))}


@char_decode_joins_the_characters_and_round_trips.expected
def _(case):
    chars = sorted(set(case["corpus"]))
    joined = "".join(chars[i] for i in case["ids"])
    return {"round trip": "".join(c for c in case["text"] if c in chars), "list": joined, "array": joined,
            "with unknown": "".join(c if c in chars else "?" for c in case["text"])}


@check(task="10.3", points=1, inputs=st.fixed_dictionaries({"corpus": _any_text(30).filter(len)}),
       describe=lambda case: f"CharTokenizer({case['corpus']!r}).decode(ids) for ids holding -1, -3, vocab_size or "
                             f"vocab_size + 7 (in a list and an array)")
def char_decode_refuses_ids_outside_the_vocabulary(tt, case):
    tokenizer = tt.text.CharTokenizer(case["corpus"])
    size = tokenizer.vocab_size
    bad = [[size], [-1], [0, size + 7, 0], np.array([0, -3], dtype=np.int64), [size - 1, 0, size]]
    return [capture_error(lambda ids=ids: tokenizer.decode(ids)) for ids in bad]


@char_decode_refuses_ids_outside_the_vocabulary.verdict
def _(case, output):
    size = len(set(case["corpus"]))
    for ids, found, bad in zip([[size], [-1], [0, size + 7, 0], [0, -3], [size - 1, 0, size]], output,
                               [size, -1, size + 7, -3, size]):
        what = f"CharTokenizer({case['corpus']!r}).decode({ids}) ({size} characters)"
        _raised(what, found, "ValueError")
        _names(what, found["message"], str(bad))


# ---------------------------------------------------------------------------------------------------
# 10.4 _count_pairs, 10.5 _merge


@check(task="10.4", points=2, inputs=_word_case(),
       describe=lambda case: f"_count_pairs({case['words']}, {case['frequencies']}), and the words and frequencies "
                             f"afterwards")
def count_pairs_counts_every_position_weighted(tt, case):
    words, frequencies = [list(w) for w in case["words"]], list(case["frequencies"])
    counts = _tokenization(tt)._count_pairs(words, frequencies)
    return {"counts": sorted([int(a), int(b), int(count)] for (a, b), count in counts.items()),
            "words afterwards": words, "frequencies afterwards": frequencies}


@count_pairs_counts_every_position_weighted.expected
def _(case):
    counts = _judge_count(case["words"], case["frequencies"])
    return {"counts": sorted([a, b, count] for (a, b), count in counts.items()),
            "words afterwards": case["words"], "frequencies afterwards": case["frequencies"]}


@st.composite
def _merge_case(draw):
    alphabet = draw(st.lists(st.integers(0, 300), min_size=1, max_size=3, unique=True))
    ids = draw(st.lists(st.sampled_from(alphabet), max_size=14))
    return {"ids": ids, "pair": [draw(st.sampled_from(alphabet)), draw(st.sampled_from(alphabet))],
            "new_id": draw(st.integers(301, 400))}


@check(task="10.5", points=2, inputs=_merge_case(),
       describe=lambda case: f"_merge({case['ids']}, {tuple(case['pair'])}, {case['new_id']}), and the list passed in "
                             f"afterwards")
def merge_replaces_each_occurrence_from_the_left(tt, case):
    ids = list(case["ids"])
    merged = _tokenization(tt)._merge(ids, tuple(case["pair"]), case["new_id"])
    return {"merged": [int(i) for i in merged], "ids afterwards": ids}


@merge_replaces_each_occurrence_from_the_left.expected
def _(case):
    return {"merged": _judge_merge(case["ids"], case["pair"], case["new_id"]), "ids afterwards": case["ids"]}


# ---------------------------------------------------------------------------------------------------
# 10.6 _train_bpe_slow, 10.7 _train_bpe


def _train_with(tt, case, name):
    words = [list(w) for w in case["words"]]
    merges = getattr(_tokenization(tt), name)(words, list(case["frequencies"]), case["num_merges"])
    return {"merges": [[int(a), int(b)] for a, b in merges], "words afterwards": words}


def _train_expected(case):
    return {"merges": _judge_train(case["words"], case["frequencies"], case["num_merges"]),
            "words afterwards": case["words"]}


@check(task="10.6", points=3, inputs=_word_case(),
       describe=lambda case: f"_train_bpe_slow({case['words']}, {case['frequencies']}, {case['num_merges']}), and "
                             f"the words afterwards")
def slow_training_learns_the_merges(tt, case):
    return _train_with(tt, case, "_train_bpe_slow")


slow_training_learns_the_merges.expected(_train_expected)


@check(task="10.7", points=3, inputs=_word_case(max_merges=40), examples=40,
       describe=lambda case: f"_train_bpe({case['words']}, {case['frequencies']}, {case['num_merges']}), and the "
                             f"words afterwards")
def fast_training_learns_the_same_merges(tt, case):
    return _train_with(tt, case, "_train_bpe")


fast_training_learns_the_same_merges.expected(_train_expected)


# --- speed: training keeps its counts up to date ----------------------------------------------------
# _train_bpe learns SPEED_MERGES merges on 6,000 distinct words built of English-like syllables (with
# Zipf-like frequencies), made afresh from each call's seed, timed by the grader from request to reply
# against YARD_COUNTS pure-Python pair counts of the same words (made the same way), taking turns. In
# pair counts, the reference takes about 25; a trainer that keeps its counts but finds the best pair by
# scanning them all (no heap) 70 to 85; one that visits every word for every merge about 200; recounting
# every pair for every merge about 470.

SPEED_MERGES = 500
YARD_COUNTS = 5  # the yardstick makes the inputs, then counts their pairs this many times
SPEED_LIMIT = 30  # times the yardstick: about 150 pair counts


def _speed_words(seed):
    """6,000 distinct words of one to three syllables (a quarter without a leading space), as UTF-8 bytes,
    with frequencies falling as 1/rank: the same on both sides for the same seed."""
    rnd = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "w", "th", "st", "ch", "sh", "br"]
    vowels = ["a", "e", "i", "o", "u", "ea", "ou", "ee", "ai"]
    codas = ["", "", "n", "r", "s", "t", "ll", "nd", "ng", "ck", "st"]
    syllables = [onset + vowel + coda for onset in onsets for vowel in vowels for coda in codas]
    rnd.shuffle(syllables)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(syllables))))
    words, seen = [], set()
    while len(words) < 6000:
        word = ("" if rnd.random() < 0.25 else " ") + "".join(
            rnd.choices(syllables, cum_weights=weights, k=rnd.randint(1, 3)))
        if word not in seen:
            seen.add(word)
            words.append(list(word.encode("utf-8")))
    return words, [max(1, 5000 // (rank + 1)) for rank in range(len(words))]


def _pair_count(words, frequencies):
    """The yardstick: one full count of the adjacent pairs of the words, in plain Python."""
    counts = {}
    for word, frequency in zip(words, frequencies):
        for pair in zip(word, word[1:]):
            counts[pair] = counts.get(pair, 0) + frequency
    return counts


def training_yardstick(case):
    """The words of the case, and YARD_COUNTS counts of their pairs."""
    words, frequencies = _speed_words(case["seed"])
    return [len(_pair_count(words, frequencies)) for _ in range(YARD_COUNTS)]


@check(task="10.7", points=3, examples=3, timeout=60,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1)}),
       timed=Timed(training_yardstick, limit=SPEED_LIMIT,
                   against=f"making the same words and counting all their pairs {YARD_COUNTS} times",
                   advice="A merge changes only the pairs around the places it merges: keep the counts, visit only "
                          "the words that hold the pair (a dict from each pair to the set of words that contain it) "
                          "and update them there, instead of counting everything again"),
       describe=lambda case: f"_train_bpe(words, frequencies, {SPEED_MERGES}) on 6,000 distinct words: its merges, "
                             f"and its time against counting the pairs of the same words")
def fast_training_keeps_its_counts_up_to_date(tt, case):
    """The merges, timed by the grader."""
    words, frequencies = _speed_words(case["seed"])
    merges = _tokenization(tt)._train_bpe(words, frequencies, SPEED_MERGES)  # an untouched stub raises here
    return [[int(a), int(b)] for a, b in merges]


@fast_training_keeps_its_counts_up_to_date.verdict
def _(case, output):
    words = f"_train_bpe(words, frequencies, {SPEED_MERGES}) on 6,000 distinct words"
    first = _judge_train(*_speed_words(case["seed"]), 5)
    if len(output) != SPEED_MERGES or output[:5] != first or len({tuple(m) for m in output}) != len(output):
        raise CheckFailed(f"{words}: the merges are wrong (speed is judged only on right merges)")


# ---------------------------------------------------------------------------------------------------
# 10.8 BPETokenizer(merges)


@check(task="10.8", points=2, inputs=_merges(),
       describe=lambda case: f"BPETokenizer({case}): vocab (the bytes of each token), merges and vocab_size")
def bpe_vocabulary_holds_the_bytes_of_each_token(tt, case):
    tokenizer = tt.text.BPETokenizer([tuple(m) for m in case])
    return {"vocab": [list(token) for token in tokenizer.vocab], "vocab_size": tokenizer.vocab_size,
            "merges": [[int(a), int(b), int(i)] for (a, b), i in tokenizer.merges.items()]}


@bpe_vocabulary_holds_the_bytes_of_each_token.expected
def _(case):
    return {"vocab": [list(token) for token in _judge_vocab(case)], "vocab_size": 256 + len(case),
            "merges": [[a, b, 256 + k] for k, (a, b) in enumerate(case)]}


# ---------------------------------------------------------------------------------------------------
# 10.9 BPETokenizer.train


@check(task="10.9", points=3,
       inputs=st.fixed_dictionaries({"text": _piece_text(max_size=60), "vocab_size": st.integers(256, 310)}),
       describe=lambda case: f"BPETokenizer.train({case['text']!r}, {case['vocab_size']}): its merges")
def bpe_train_learns_the_merges_of_the_chunks(tt, case):
    tokenizer = tt.text.BPETokenizer.train(case["text"], case["vocab_size"])
    return {"merges": [[int(a), int(b)] for a, b in tokenizer.merges], "vocab_size": tokenizer.vocab_size}


@bpe_train_learns_the_merges_of_the_chunks.expected
def _(case):
    merges = _judge_train(*_judge_words(case["text"]), case["vocab_size"] - 256)
    return {"merges": merges, "vocab_size": 256 + len(merges)}


# ---------------------------------------------------------------------------------------------------
# 10.10 BPETokenizer.encode


@check(task="10.10", points=3, inputs=_trained_case(),
       describe=lambda case: f"BPETokenizer(merges learned on {case['corpus']!r}, {len(case['merges'])} merges)"
                             f".encode(text), twice, for the texts {case['texts']}")
def bpe_encode_applies_the_merges_in_order(tt, case):
    tokenizer = tt.text.BPETokenizer([tuple(m) for m in case["merges"]])
    return [[int(i) for i in tokenizer.encode(text)] for text in case["texts"] + case["texts"]]


@bpe_encode_applies_the_merges_in_order.expected
def _(case):
    return [_judge_encode(text, case["merges"]) for text in case["texts"] + case["texts"]]


# --- speed: encoding applies the merges by rank -----------------------------------------------------
# encode on a text of 15,000 words of syllables (most of them distinct, so that a cache cannot hide the
# cost of a chunk), with the merges that build its ENCODE_SYLLABLES commonest syllables, made afresh from
# each call's seed, timed by the grader against making the same text and YARD_COUNTS pure-Python pair
# counts of its bytes, taking turns. In pair counts, the reference takes 10 to 16; applying every merge to
# every chunk about 270, with a cache of the chunks about 220.

ENCODE_SYLLABLES = 250
ENCODE_LIMIT = 10  # times the yardstick: about 50 pair counts
ENCODE_CHECKED = 60  # the chunks the judge encodes itself, merge by merge


def _encode_fixture(seed):
    """(text, merges): 15,000 words of one to three syllables, each with a space in front, and the merges that
    build the ENCODE_SYLLABLES commonest syllables with and without their space (each one's bytes merged from
    left to right): the same on both sides for the same seed."""
    rnd = random.Random(seed)
    onsets = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "w", "th", "st", "ch", "sh", "br"]
    vowels = ["a", "e", "i", "o", "u", "ea", "ou", "ee", "ai"]
    codas = ["", "", "n", "r", "s", "t", "ll", "nd", "ng", "ck", "st"]
    syllables = sorted({onset + vowel + coda for onset in onsets for vowel in vowels for coda in codas})
    rnd.shuffle(syllables)
    weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(syllables))))
    text = "".join(" " + "".join(rnd.choices(syllables, cum_weights=weights, k=rnd.randint(1, 3)))
                   for _ in range(15000))
    merges, made = [], {}
    for syllable in [" " + s for s in syllables[:ENCODE_SYLLABLES]] + syllables[:ENCODE_SYLLABLES]:
        token = syllable.encode("utf-8")[0]
        for byte in syllable.encode("utf-8")[1:]:
            pair = (token, byte)
            if pair not in made:
                made[pair] = 256 + len(merges)
                merges.append(pair)
            token = made[pair]
    return text, merges


def _text_pairs(text):
    """The yardstick: one count of the adjacent byte pairs of the text, in plain Python."""
    data, counts = text.encode("utf-8"), {}
    for pair in zip(data, data[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts


def encoding_yardstick(case):
    """The text of the case, and YARD_COUNTS counts of its byte pairs."""
    text, _ = _encode_fixture(case["seed"])
    return [len(_text_pairs(text)) for _ in range(YARD_COUNTS)]


@check(task="10.10", points=2, examples=3, timeout=60,
       inputs=st.fixed_dictionaries({"seed": st.integers(0, 2**31 - 1)}),
       timed=Timed(encoding_yardstick, limit=ENCODE_LIMIT,
                   against=f"making the same text and counting its byte pairs {YARD_COUNTS} times",
                   advice="Apply the merges by rank: in each chunk, merge the adjacent pair of smallest rank until "
                          "no pair is a merge, instead of trying every merge on every chunk"),
       describe=lambda case: "BPETokenizer(merges).encode(a text of 15,000 words, most of them distinct): its ids, "
                             "and its time against counting the text's byte pairs")
def bpe_encode_applies_the_merges_by_rank(tt, case):
    """The ids (a new tokenizer each call: an empty cache), timed by the grader."""
    text, merges = _encode_fixture(case["seed"])
    return np.array(tt.text.BPETokenizer(merges).encode(text), dtype=np.int64)  # a stub raises here


@bpe_encode_applies_the_merges_by_rank.verdict
def _(case, output):
    words = "BPETokenizer(merges).encode(a text of 15,000 words)"
    text, merges = _encode_fixture(case["seed"])
    right = [i for chunk in _JUDGE_CHUNK.findall(text)[:ENCODE_CHECKED] for i in _judge_encode_chunk(chunk, merges)]
    ids, vocab = np.asarray(output), _judge_vocab(merges)
    if ids.ndim != 1 or ids[:len(right)].tolist() != right or not np.all((ids >= 0) & (ids < len(vocab))) \
            or b"".join(vocab[i] for i in ids.tolist()) != text.encode("utf-8"):
        raise CheckFailed(f"{words}: the ids are wrong (speed is judged only on right ids)")


# ---------------------------------------------------------------------------------------------------
# 10.11 BPETokenizer.decode


@st.composite
def _decode_case(draw):
    merges = draw(_merges())
    ids = draw(st.lists(st.one_of(st.integers(0, 255 + len(merges)), st.sampled_from([0xC3, 0xA9, 0xE6, 97, 32])),
                        max_size=20))
    return {"merges": merges, "ids": ids}


@check(task="10.11", points=2, inputs=_decode_case(),
       describe=lambda case: f"BPETokenizer({case['merges']}).decode({case['ids']}), of a list and of a numpy array")
def bpe_decode_joins_the_bytes_of_the_tokens(tt, case):
    tokenizer = tt.text.BPETokenizer([tuple(m) for m in case["merges"]])
    return {"list": tokenizer.decode(list(case["ids"])), "array": tokenizer.decode(np.array(case["ids"], np.int64))}


@bpe_decode_joins_the_bytes_of_the_tokens.expected
def _(case):
    text = _judge_decode(case["ids"], case["merges"])
    return {"list": text, "array": text}


_TRICKY = ["", " ", "  \n\t ", "a", "é", "naïve café", "日本語のテキスト", "🙂👍🏽🇫🇷", "'tis 2024_", "x\x00y",
           "\r\n", "\ufffd", "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich"]


@st.composite
def _round_trip_case(draw):
    return {"corpus": draw(_piece_text(min_size=1, max_size=60)), "vocab_size": draw(st.integers(256, 330)),
            "texts": draw(st.lists(_any_text(40), min_size=1, max_size=6))}


@check(task="10.11", points=3, inputs=_round_trip_case(),
       describe=lambda case: f"for BPETokenizer.train({case['corpus']!r}, {case['vocab_size']}): decode(encode(s)) "
                             f"for s in {case['texts'] + _TRICKY}")
def bpe_round_trip_on_generated_strings(tt, case):
    tokenizer = tt.text.BPETokenizer.train(case["corpus"], case["vocab_size"])
    return [tokenizer.decode(tokenizer.encode(text)) for text in case["texts"] + _TRICKY]


@bpe_round_trip_on_generated_strings.expected
def _(case):
    return case["texts"] + _TRICKY


@check(task="10.11", points=1, inputs=_merges(),
       describe=lambda case: f"BPETokenizer({case}).decode(ids) for ids holding -1, -2, vocab_size, vocab_size + 3 "
                             f"or vocab_size + 5 (in a list and an array)")
def bpe_decode_refuses_ids_outside_the_vocabulary(tt, case):
    tokenizer = tt.text.BPETokenizer([tuple(m) for m in case])
    size = tokenizer.vocab_size
    bad = [[size], [-1], [97, size + 5, 98], np.array([97, -2], dtype=np.int64), [size - 1, size], [0, 98, size + 3]]
    return [capture_error(lambda ids=ids: tokenizer.decode(ids)) for ids in bad]


@bpe_decode_refuses_ids_outside_the_vocabulary.verdict
def _(case, output):
    size = 256 + len(case)
    for ids, found, bad in zip([[size], [-1], [97, size + 5, 98], [97, -2], [size - 1, size], [0, 98, size + 3]],
                               output, [size, -1, size + 5, -2, size, size + 3]):
        what = f"BPETokenizer with {size} tokens: decode({ids})"
        _raised(what, found, "ValueError")
        _names(what, found["message"], str(bad))


# ---------------------------------------------------------------------------------------------------
# 10.12 save and load


@check(task="10.12", points=2, inputs=_merges(),
       describe=lambda case: f"BPETokenizer({case}).save(path): the JSON in the file; BPETokenizer.load(path): its "
                             f"type, merges and vocab")
def bpe_save_writes_json_and_load_reads_it(tt, case):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "tokenizer.json")
        tt.text.BPETokenizer([tuple(m) for m in case]).save(path)
        with open(path, encoding="utf-8") as file:
            saved = json.load(file)
        loaded = tt.text.BPETokenizer.load(path)
    return {"file": saved, "loaded": type(loaded).__name__, "merges": [[int(a), int(b)] for a, b in loaded.merges],
            "vocab": [list(token) for token in loaded.vocab]}


@bpe_save_writes_json_and_load_reads_it.expected
def _(case):
    return {"file": {"type": "BPETokenizer", "version": 1, "merges": case}, "loaded": "BPETokenizer",
            "merges": case, "vocab": [list(token) for token in _judge_vocab(case)]}


_GOOD = '{"type": "BPETokenizer", "version": 1, "merges": [[97, 98], [256, 99]]}'
_FILES = [  # name, contents (bytes), what load must do
    ("good.json", _GOOD.encode(), None),
    ("spaced.json", b'{\n  "merges": [],\n  "version": 1,\n  "type": "BPETokenizer"\n}\n', None),
    ("prose.json", b"merges: 97 98, 256 99", "ValueError"),
    ("cut.json", _GOOD[:50].encode(), "ValueError"),
    ("empty.json", b"", "ValueError"),
    ("image.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "ValueError"),
    ("list.json", b"[[97, 98], [256, 99]]", "ValueError"),
    ("other.json", b'{"model": "gpt2", "version": 1, "merges": [[97, 98]]}', "ValueError"),
    ("chars.json", b'{"type": "CharTokenizer", "version": 1, "merges": []}', "ValueError"),
    ("later.json", b'{"type": "BPETokenizer", "version": 2, "merges": [[97, 98]]}', "ValueError"),
    ("text_version.json", b'{"type": "BPETokenizer", "version": "1", "merges": [[97, 98]]}', "ValueError"),
    ("true_version.json", b'{"type": "BPETokenizer", "version": true, "merges": [[97, 98]]}', "ValueError"),
    ("float_version.json", b'{"type": "BPETokenizer", "version": 1.0, "merges": [[97, 98]]}', "ValueError"),
    ("no_version.json", b'{"type": "BPETokenizer", "merges": [[97, 98]]}', "ValueError"),
    ("no_merges.json", b'{"type": "BPETokenizer", "version": 1}', "ValueError"),
    ("dict_merges.json", b'{"type": "BPETokenizer", "version": 1, "merges": {"97 98": 256}}', "ValueError"),
    ("triple.json", b'{"type": "BPETokenizer", "version": 1, "merges": [[97, 98, 99]]}', "ValueError"),
    ("letters.json", b'{"type": "BPETokenizer", "version": 1, "merges": [["a", "b"]]}', "ValueError"),
    ("ahead.json", b'{"type": "BPETokenizer", "version": 1, "merges": [[97, 98], [257, 97]]}', "ValueError"),
    ("negative.json", b'{"type": "BPETokenizer", "version": 1, "merges": [[97, -1]]}', "ValueError"),
    ("twice.json", b'{"type": "BPETokenizer", "version": 1, "merges": [[97, 98], [97, 98]]}', "ValueError"),
    ("bools.json", b'{"type": "BPETokenizer", "version": 1, "merges": [[true, 98]]}', "ValueError"),
    ("floats.json", b'{"type": "BPETokenizer", "version": 1, "merges": [[97.0, 98]]}', "ValueError"),
]


@check(task="10.12", points=3,
       describe=lambda case: "BPETokenizer.load(path) for files that are not JSON, cut short, empty, binary, another "
                             "program's JSON, of another version, or with damaged merges; for two good files; and for "
                             "a path that does not exist")
def bpe_load_refuses_a_damaged_file_naming_it(tt, case):
    found = []
    with tempfile.TemporaryDirectory() as folder:
        for name, contents, _ in _FILES:
            path = os.path.join(folder, name)
            with open(path, "wb") as file:
                file.write(contents)
            found.append(capture_error(lambda path=path: tt.text.BPETokenizer.load(path)))
        found.append(capture_error(lambda: tt.text.BPETokenizer.load(os.path.join(folder, "missing.json"))))
        merges = [[int(a), int(b)] for a, b in tt.text.BPETokenizer.load(os.path.join(folder, "good.json")).merges]
    return {"errors": found, "good merges": merges}


@bpe_load_refuses_a_damaged_file_naming_it.verdict
def _(case, output):
    for (name, contents, error), found in zip(_FILES + [("missing.json", None, "FileNotFoundError")], output["errors"]):
        what = f"BPETokenizer.load(path) for {name} ({contents!r:.70})" if contents is not None else \
            "BPETokenizer.load(path) for a file that does not exist"
        if error is None:
            if found["raised"] is not None:
                raise CheckFailed(f"{what}: a good file, expected no error but it raised {found['raised']} "
                                  f"({found['message']!r:.120})",
                                  f"{what}: a good file, but it raised {found['raised']}")
            continue
        _raised(what, found, error)
        if name not in found["message"]:
            raise CheckFailed(f"{what}: the {error}'s message {found['message']!r:.200} should name the file ({name})",
                              f"{what}: the {error}'s message does not name the file")
    if output["good merges"] != [[97, 98], [256, 99]]:
        raise CheckFailed(f"BPETokenizer.load(path) for good.json ({_GOOD}): expected the merges [[97, 98], [256, 99]] "
                          f"but got {output['good merges']!r:.120}")
