"""The vector pass (ADR-0015): the chunks without a vector embedded in batches, one
batch embedding in a thread while the one before it is stored, each batch stored in one
transaction; and what an embedder failing unexpectedly is called."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from groove_core.chunking import Chunk
from groove_core.embedding import (
    EMBEDDING_TEXT_KEY,
    EMBEDDING_TEXT_RULES,
    Embedder,
    EmbedderError,
    checked_vectors,
    embedding_input,
    zero_rows,
)
from groove_core.errors import GrooveError
from groove_core.index_report import IndexProgress, ProgressFn
from groove_core.storage import IndexStore

#: The warning for a chunk whose vector is all zeros: it is stored (it is a vector), but no
#: query comes nearer to it than to any other, so only its words can find it.
ZERO_VECTOR = "the embedder returned a zero vector (findable by its words only)"


def embedding_text(chunk: Chunk) -> str:
    """What the embedder sees: the contextual prefix, then the chunk's own text (lower-cased
    when written in capitals: :func:`~groove_core.embedding.embedding_input`)."""
    return _text(chunk.context, chunk.content)


def _text(context: str, content: str) -> str:
    return embedding_input(chunk_text(context, content))


def chunk_text(context: str, content: str) -> str:
    """A chunk's text as the embedder's rules read it (before :func:`embedding_input`)."""
    return f"{context}\n{content}" if context else content


def reembed(
    store: IndexStore,
    embedder: Embedder,
    batch_size: int,
    progress: ProgressFn | None = None,
    *,
    name: str | None = None,
) -> int:
    """Replace every vector of ``store`` with ``embedder``'s, from the stored chunks (the
    files are not read again). Meant for a copy of the index: until it ends, the copy
    holds only some vectors. Returns the number of chunks embedded. ``name``: the
    embedder's registered name, for messages (:func:`embedder_failure`)."""
    store.forget_vectors()
    passed = embed_pending(
        store, embedder, batch_size, stage="re-embedding", progress=progress, name=name
    )
    # An empty index still records its new embedder, so searching it is allowed.
    store.bind_embedder(embedder.identity, embedder.dim)
    store.set_meta(EMBEDDING_TEXT_KEY, EMBEDDING_TEXT_RULES)
    return passed.embedded


@dataclass
class VectorPass:
    """What one pass over the chunks without a vector did."""

    embedded: int = 0
    seconds: float = 0.0  # spent embedding (in the embedding thread)
    warnings: list[tuple[str, str]] = field(default_factory=list)


def embed_pending(
    store: IndexStore,
    embedder: Embedder,
    batch_size: int,
    *,
    stage: str = "embedding",
    progress: ProgressFn | None = None,
    stop: Callable[[], bool] | None = None,
    name: str | None = None,
) -> VectorPass:
    """Embed the chunks that have no vector yet, ``batch_size`` at a time, each batch
    stored in one transaction (ADR-0015): a kill loses at most the batches not yet
    stored, and the next run goes on from there. ``stop`` is asked between batches (the
    watcher's way to index an edit first); the chunks left wait for the next pass.

    A batch is embedded in a thread while the one before it is stored here, in the
    store's thread: one embedding at a time, and the run costs little more than its
    embedding (docs/benchmarks.md, issue #17, "Second round"). An embedder that fails
    unexpectedly is one line naming it (``name``, its registered name, and its identity;
    :func:`embedder_failure`)."""
    vectors = VectorPipeline(store, embedder, batch_size, stage=stage, progress=progress, name=name)
    try:
        return vectors.drain(stop)
    finally:
        vectors.close()


class VectorPipeline:
    """The vector pass over the chunks without a vector, in id order, one batch embedding
    in a thread at a time (see :func:`embed_pending`).

    :meth:`poll` moves it on without waiting, between the files of the lexical pass: the
    embedding of the chunks already written runs beside the reading and writing of the
    next files, which leave the second core idle otherwise (embedding uses one thread by
    default), so a run costs little more than its embedding. :meth:`drain` then embeds
    what is left, waiting. An embedding that fails during the lexical pass is raised by
    :meth:`drain`, after every file is written: the files stay searchable by their words
    whatever the embedder does (ADR-0015). An embedder's unexpected exception (not a
    GrooveError it raises on purpose) is raised as an :class:`EmbedderError` naming it
    (:func:`embedder_failure`), the exception as its cause."""

    def __init__(
        self,
        store: IndexStore,
        embedder: Embedder,
        batch_size: int,
        *,
        stage: str = "embedding",
        progress: ProgressFn | None = None,
        name: str | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.batch_size = batch_size
        self.stage = stage
        self.progress = progress
        self.name = name  # the embedder's registered name, for messages
        self.passed = VectorPass()
        # The last chunk id read. SQLite may give a rewritten document's chunks ids that
        # its old chunks freed, below the cursor: drain() starts again from the first.
        self._after = 0
        self._written = True  # chunks may have been written since a look found none
        self._in_flight: _Batch | None = None
        self._total = 0  # for progress, set by drain

    def _next_batch(self) -> _Batch | None:
        rows = self.store.pending_chunks(self._after, self.batch_size)
        if not rows:
            return None
        self._after = rows[-1][0]
        # Where each chunk is, for messages (read here: the store is this thread's).
        found = self.store.chunk_rows([r[0] for r in rows])
        return _Batch(rows, {i: (c.path, c.ordinal + 1) for i, c in found.items()})

    def _store(self, batch: _Batch, vectors: Any) -> None:
        passed = self.passed
        passed.seconds += batch.seconds
        # Read in the embedding thread: an embedder may embed a probe to learn its
        # dimension, and the next batch is embedding now.
        self.store.bind_embedder(batch.identity, batch.dim)
        passed.embedded += self.store.fill_vectors(batch.rows, vectors)
        for row in batch.zeros:
            path, number = batch.chunk(row)
            passed.warnings.append((path, f"{ZERO_VECTOR} for chunk {number}"))
        if self.progress is not None and self._total:
            done = passed.embedded
            self.progress(IndexProgress(self.stage, "", 0, 0, done, done, max(self._total, done)))

    def wrote(self) -> None:
        """The lexical pass committed chunks: the next :meth:`poll` looks for them."""
        self._written = True

    def poll(self) -> None:
        """Store the batch in flight if its embedding has ended, and start the next one;
        never waits. A failed batch stays in flight for :meth:`drain` to raise. Without a
        batch in flight it reads the store only after :meth:`wrote` (a run over unchanged
        files asks nothing per file)."""
        batch = self._in_flight
        if batch is not None:
            if not batch.done() or batch.failed():
                return
            self._finish_in_flight()
        elif not self._written:
            return
        following = self._next_batch()
        if following is None:
            self._written = False
            return
        following.embed(self.embedder, self.batch_size, self.name)
        self._in_flight = following

    def drain(self, stop: Callable[[], bool] | None = None) -> VectorPass:
        """Embed and store every chunk still without a vector (until ``stop``)."""
        self._total = self.passed.embedded + self.store.pending_vectors()
        if self.progress is not None and self._total > self.passed.embedded:
            # The stage starts now, not when its first batch is stored: a slow embedder's
            # start-up and first batch count in its elapsed time (and its display keeps
            # time meanwhile, groove_core.progress).
            done = self.passed.embedded
            self.progress(IndexProgress(self.stage, "", 0, 0, done, done, self._total))
        self._finish_in_flight()  # started during the lexical pass
        # From the first chunk again: what the cursor passed during the lexical pass (an id
        # reused on SQLite) is still waiting; what was stored is not read again.
        self._after = 0
        while stop is None or not stop():
            batch = self._next_batch()
            if batch is None:
                break
            # The batch stays in flight until its embedding has ended: interrupted while
            # waiting, close() still waits for it (never two embeddings at once).
            previous = self._in_flight
            vectors = previous.wait() if previous is not None else None
            batch.embed(self.embedder, self.batch_size, self.name)
            self._in_flight = batch
            if previous is not None:
                self._store(previous, vectors)
        self._finish_in_flight()
        return self.passed

    def _finish_in_flight(self) -> None:
        """Wait for the batch in flight and store it (its embedder's error raised here)."""
        if self._in_flight is not None:
            vectors = self._in_flight.wait()
            done, self._in_flight = self._in_flight, None
            self._store(done, vectors)

    def close(self) -> None:
        """Wait for the batch in flight, dropping it. A pass that fails leaves no embedding
        behind it (the embedder is not shared between threads); what was embedded and not
        stored is embedded next time."""
        if self._in_flight is not None:
            self._in_flight.join()
            self._in_flight = None


class _Batch:
    """Chunks ``(id, context, content)`` and their embedding in a thread of its own."""

    def __init__(
        self, rows: list[tuple[int, str, str]], places: dict[int, tuple[str, int]]
    ) -> None:
        self.rows = rows
        self.places = places  # chunk id -> (file, chunk number from 1)
        self.texts = [_text(context, content) for _, context, content in rows]
        self.seconds = 0.0
        self.identity = ""
        self.dim = 0
        self.zeros: list[int] = []  # rows whose vector is all zeros
        self._vectors: Any = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def embed(self, embedder: Embedder, batch_size: int, name: str | None = None) -> None:
        """Start embedding in a thread; ``name``: the embedder's registered name, which
        its unexpected failure names (:func:`embedder_failure`)."""

        def work() -> None:
            import numpy as np

            started = time.perf_counter()
            texts = self.texts
            first = f" (the first: {self.label(0)})" if texts else ""
            doing = f"embedding {_count(len(texts))}{first}"
            try:
                with _embedder_call(embedder, name, doing):
                    parts = [
                        embedder.embed_documents(texts[i : i + batch_size])
                        for i in range(0, len(texts), batch_size)
                    ]
                    self.identity, self.dim = embedder.identity, embedder.dim
                    vectors = (
                        np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
                    )
                self._vectors = checked_vectors(
                    vectors, len(texts), self.dim, self.identity, self.label
                )
                self.zeros = zero_rows(self._vectors)
            except BaseException as err:  # handed to the thread that waits
                self._error = err
            self.seconds = time.perf_counter() - started

        self._thread = threading.Thread(target=work, name="groove-index-embed", daemon=True)
        self._thread.start()

    def chunk(self, row: int) -> tuple[str, int]:
        """The file and the chunk (numbered from 1) of the ``row``-th text."""
        chunk_id = self.rows[row][0]
        return self.places.get(chunk_id, (f"chunk #{chunk_id}", 0))

    def label(self, row: int) -> str:
        path, number = self.chunk(row)
        return f"{path}, chunk {number}"

    def done(self) -> bool:
        """Whether the embedding has ended (or never started)."""
        return self._thread is None or not self._thread.is_alive()

    def failed(self) -> bool:
        """Whether the embedding has ended with an error (raised by :meth:`wait`)."""
        return self.done() and self._error is not None

    def join(self) -> None:
        """Wait for the embedding to end (its result or error is dropped)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def wait(self) -> Any:
        """The vectors, one row per text (the embedder's error, raised here)."""
        self.join()
        if self._error is not None:
            raise self._error
        return self._vectors


def embedder_failure(
    err: Exception, embedder: Embedder, name: str | None, doing: str
) -> EmbedderError:
    """The one line of ``embedder`` failing unexpectedly with ``err`` while ``doing``
    something: it names the embedder (``name``, its registered name, when known, and its
    identity when it can tell it) and the exception, never a traceback. An error an
    embedder raises on purpose is a GrooveError, whose message is shown as it is; any
    other exception is a bug of the embedder, or of the plugin that provides it
    (``groove plugins list`` says which). Raised from ``err``."""
    try:
        identity = str(embedder.identity)
    except Exception:  # the embedder cannot tell: the name alone
        identity = ""
    who = [repr(name)] if name else []
    if identity:
        who.append(f"({identity})" if name else identity)
    lines = str(err).strip().splitlines()
    detail = f"{type(err).__name__}: {lines[0][:300]}" if lines else type(err).__name__
    return EmbedderError(
        f"the embedder {' '.join(who) or 'in use'} failed {doing}: {detail} (an unexpected "
        "error of the embedder: update the plugin that provides it, which 'groove plugins "
        "list' names, or choose another [embedder] name)"
    )


@contextmanager
def _embedder_call(embedder: Embedder, name: str | None, doing: str) -> Iterator[None]:
    """Around a call into ``embedder``: its unexpected exception becomes its
    :func:`embedder_failure`; a GrooveError (an error it raises on purpose, or groove's
    own about it) passes as it is."""
    try:
        yield
    except GrooveError:
        raise
    except Exception as err:
        raise embedder_failure(err, embedder, name, doing) from err


def _count(texts: int) -> str:
    return "1 text" if texts == 1 else f"{texts} texts"
