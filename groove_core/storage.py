"""What a search may read from an index: the read side of a storage backend, as a protocol.

Candidate legs, filters, fusion and the stages after it receive the index as
``QueryContext.store``, typed with :class:`SearchStore`, so a plugin depends on this
contract and not on the SQLite file behind it (``groove_core.sqlite.store.Store``, the
built-in implementation, which satisfies it: mypy checks that in ``groove_core.sqlite``).
:class:`IndexStore` adds what the indexer, ``groove status`` and the application use to
write and bind an index: what a storage backend's connection provides
(``groove_core.backend``, docs/storage-backends.md).

The contract for every method:

* Chunk ids are the index's own integers; they stay valid until the chunk's document is
  written again. Ids a method does not know are left out of its answer, never an error.
* Ranked answers are best first, and equal scores are ordered by chunk id, so a search
  is deterministic (the baseline snapshot depends on it).
* ``allowed``: when given, only those chunk ids may be returned (the filters,
  ``QueryContext.allowed_ids()``); ``None`` means every chunk. The backend applies it inside
  its query, so ``limit`` results still come back under a narrow filter.
* Cost is stated per method as how it grows: with the arguments ("per id"), with the
  matches of an expression, or with the whole index ("scan"). A stage runs on every query:
  it should call the per-id methods with the ids it has, not scan.

The types every backend shares live here too: the errors a backend raises
(:class:`StoreError` and its kinds), the documents the indexer writes
(:class:`NewDocument`) and reads back (:class:`DocState`), the meta keys of the
incomplete-run marker, and the messages every backend words alike.

This module imports nothing heavy (numpy only for type checking), so a plugin may import
it at no cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from groove_core.errors import GrooveError

if TYPE_CHECKING:
    import numpy as np

    from groove_core.chunking import Chunk
    from groove_core.links import RawLink
    from groove_core.rows import Allowed, ChunkRow, DocumentChunkRow, DocumentRow, Links, Ranked

#: Meta key present while an index run that fills the index from empty is unfinished.
INCOMPLETE_KEY = "incomplete_since"
#: Meta key: when the last index run that completed ended (seconds since the epoch).
LAST_RUN_KEY = "last_run_ended"


class StoreError(GrooveError):
    """The index cannot be used as it is; the message says how to recover."""


class IndexDamagedError(StoreError):
    """The index file itself is damaged (corrupt pages, not a database): rebuild it."""


class EmbedderMismatchError(StoreError):
    """The index holds another embedder's vectors: re-embed it (``index --reembed``)."""


class IndexEnvironmentError(StoreError):
    """The index cannot be read or written because of its surroundings (no space left,
    a read-only file or folder, permissions, I/O errors); the file itself may be fine, and
    rebuilding it would not help."""


@dataclass(frozen=True)
class DocState:
    id: int
    content_hash: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class NewDocument:
    path: str
    title: str
    tags: tuple[str, ...]
    content_hash: str
    size: int
    mtime_ns: int
    chunks: tuple[Chunk, ...]
    links: tuple[RawLink, ...] = ()


def incomplete_note(since: str, documents: int) -> str:
    """What every backend tells users while an index run that fills the index from empty
    (marked at ``since``, seconds since the epoch) has not finished."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(since)))
    return (
        f"the index is incomplete: an index run started {started} has not finished (it is "
        f"still running or was interrupted), so only {documents} documents are searchable; "
        "run 'groove index' to complete it"
    )


def semantic_note(pending: int, chunks: int) -> str:
    """What every backend tells users while ``pending`` of ``chunks`` chunks have no vector
    yet: the vector leg searched only the others (ADR-0015)."""
    embedded = max(chunks - pending, 0)
    # Floored, and never 100% while a chunk is missing: "100%" would read as complete.
    percent = min(embedded * 100 // chunks, 99) if chunks else 0
    return (
        f"semantic part {percent}% embedded ({embedded:,} of {chunks:,} chunks): the "
        "vector leg searched only those, the lexical legs the whole knowledge base; an "
        "index run embeds the rest (run 'groove index' if none is under way)"
    )


def check_same_embedder(label: str, recorded: tuple[str, int] | None, identity: str) -> None:
    """Raise :class:`EmbedderMismatchError` when the index ``label`` holds vectors of an
    embedder (``recorded``) other than ``identity``: every backend says it so."""
    if recorded is not None and recorded[0] != identity:
        raise EmbedderMismatchError(
            f"the index {label} was built with embedder {recorded[0]!r} "
            f"({recorded[1]} dimensions) but the configuration uses {identity!r}: run "
            "'groove index --reembed' to re-embed it (the current index keeps serving "
            "until the new one is complete), or set [embedder] back to the one it was "
            "built with"
        )


@runtime_checkable
class SearchStore(Protocol):
    """The index as a search reads it. See the module docstring for the shared contract."""

    def snapshot(self) -> AbstractContextManager[None]:
        """A read transaction: every call inside sees one committed state of the index, so
        a search never mixes two versions of a file an index run is replacing. Re-entrant:
        inside a snapshot it adds nothing. Cost: constant."""
        ...

    def leg_index(self, name: str) -> Any | None:
        """The index the leg ``name`` declared (``groove_core.leg_index``), bound to this
        connection, for the leg's own queries; None when this store keeps none of that
        name (the leg is not enabled, or the backend has no implementation of it) or it is
        not filled yet (a read-only index until a writable open or an index run fills
        it). Cost: constant (one version check)."""
        ...

    def has_vectors(self) -> bool:
        """Whether the index holds vectors (an embedder has been bound). Cost: constant."""
        ...

    def vector_search(self, vector: np.ndarray, k: int, allowed: Allowed = None) -> Ranked:
        """The ``k`` nearest chunks to ``vector``: (chunk id, L2 distance), nearest first,
        ties by id; empty without vectors. Cost: one KNN search (the SQLite store's is
        exact, a scan of the vectors)."""
        ...

    def embeddings(self, chunk_ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored vectors of these chunks, by id (nothing is re-embedded); empty
        without vectors. Cost: per id."""
        ...

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        """Chunk and document fields of these chunks, by id (the dict's order is not part
        of the contract). Cost: per id."""
        ...

    def chunk_texts(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(id, context, content) of up to ``limit`` chunks with ids above ``after``, by id:
        every chunk's text a page at a time (a re-embed, a leg's table of the KB's words).
        Cost: one indexed range read per page."""
        ...

    def document_chunks(self, doc_id: int) -> list[DocumentChunkRow]:
        """Every chunk of one document, in document order (``ordinal``); empty for an
        unknown document. Cost: the document's chunks."""
        ...

    def documents(self, *, after: str | None = None, limit: int | None = None) -> list[DocumentRow]:
        """Every indexed document, ordered by path (code point order); with ``after``, only
        those whose path comes after it, and at most ``limit`` of them: a page that the
        last path of the one before continues (paths added or removed meanwhile neither
        shift nor repeat it); ``limit`` below 0 is a ValueError. Cost: scan of the
        documents (not of the chunks), a page's worth with ``limit``; call it once per
        query at most."""
        ...

    def chunk_ids_for_docs(self, doc_ids: Iterable[int]) -> frozenset[int]:
        """Every chunk id of these documents. Cost: the documents' chunks."""
        ...

    def doc_ids_with_tags(self, tags: Sequence[str]) -> frozenset[int]:
        """Documents carrying every one of ``tags`` (case-insensitive; empty ``tags``: no
        documents). Cost: the documents carrying each tag."""
        ...

    def file_states(self, paths: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(size, mtime_ns) of these documents when they were indexed, by path (stale
        marking). Cost: per path."""
        ...

    def links_of(self, path: str, limit: int) -> Links | None:
        """The first ``limit`` outgoing links (in file order) and backlinks (by linking
        path, then file order) of the indexed document ``path``, with their totals; None
        when ``path`` is not indexed. Cost: the document's links and the links into it,
        plus resolving link targets against the indexed paths."""
        ...

    def last_indexed(self) -> float | None:
        """When the last complete index run ended (seconds since the epoch), or None: a
        stamp of the index's state for what a leg or stage derives from it once. Cost: one
        meta read."""
        ...

    def counts(self) -> dict[str, int]:
        """``{"documents": n, "chunks": n}``. Cost: a count of each."""
        ...

    def incomplete(self) -> str | None:
        """A sentence for users when an index run that fills this index from empty has not
        finished (only part of the knowledge base is searchable), else None. Cost:
        constant when complete."""
        ...

    def pending_vectors(self) -> int:
        """How many chunks have no vector yet: written by an index run that embeds them
        after every file's lexical rows (ADR-0015); the vector leg cannot find them until
        then. Cost: constant when none."""
        ...


@runtime_checkable
class IndexStore(SearchStore, Protocol):
    """A connection to an index that may also write it (one thread at a time).

    Writes are transactional: a method that writes returns with its rows committed, or
    raises with none of them written. Every run of the indexer is between ``begin_run``
    and ``end_run``.
    """

    @property
    def in_transaction(self) -> bool:
        """True inside ``snapshot()`` or a write (the application then keeps the
        connection, so that one search reads one index)."""
        ...

    def close(self) -> None: ...

    def get_meta(self, key: str) -> str | None:
        """A value the index keeps about itself (``incomplete_since``, ``last_indexed``)."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` (committed on return)."""
        ...

    def embedder_identity(self) -> tuple[str, int] | None:
        """The embedder the vectors came from and their dimension, or None before any."""
        ...

    def check_embedder(self, identity: str) -> None:
        """Raise ``EmbedderMismatchError`` when the index holds another embedder's vectors."""
        ...

    def bind_embedder(self, identity: str, dim: int) -> None:
        """Record the embedder (first run) and make room for vectors of ``dim``."""
        ...

    def forget_vectors(self) -> None:
        """Drop every vector and the embedder binding (a re-embed starts so)."""
        ...

    def requeue_vectors(self, chunk_ids: Sequence[int]) -> int:
        """Drop these chunks' vectors (ids without a chunk are ignored), in one transaction:
        they wait for a new vector (:meth:`pending_chunks`), as after an edit; the embedder
        binding stays. Returns how many vectors were dropped. For a change of what the
        embedder is given (groove index)."""
        ...

    def write_vectors(self, chunk_ids: Sequence[int], vectors: np.ndarray) -> None:
        """Store the vectors of existing chunks, in one transaction."""
        ...

    def pending_chunks(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """(id, context, content) of up to ``limit`` chunks without a vector, with ids
        above ``after``, by id."""
        ...

    def fill_vectors(self, chunks: Sequence[tuple[int, str, str]], vectors: np.ndarray) -> int:
        """Store the vectors of chunks :meth:`pending_chunks` returned, in one transaction,
        for those still without a vector and with the same text (another run may have
        embedded or rewritten one meanwhile); returns how many were stored. The first
        call binds nothing: :meth:`bind_embedder` comes before it."""
        ...

    def doc_states(self) -> dict[str, DocState]:
        """Every indexed document's path, id, content hash, size and mtime."""
        ...

    def write_documents(self, docs: Sequence[NewDocument], vectors: np.ndarray | None) -> None:
        """Replace these documents and all their rows (chunks, the enabled legs' index
        rows, vectors, links) in one transaction; ``vectors`` has one row per chunk, in
        order, or is None: then the chunks wait for their vectors (:meth:`pending_chunks`)."""
        ...

    def touch_documents(self, updates: Iterable[tuple[str, int, int]]) -> None:
        """Record a new size and mtime for documents whose content did not change."""
        ...

    def delete_documents(self, paths: Iterable[str]) -> None:
        """Remove these documents and all their rows, in one transaction."""
        ...

    def begin_run(self) -> None:
        """Mark the index incomplete while a run fills it from empty."""
        ...

    def sync_leg_indexes(self, progress: Callable[[str, int, int], None] | None = None) -> None:
        """Fill every enabled leg index not filled under its current version (a leg
        enabled on an existing KB, new rules) from the chunks, once, reporting (index,
        chunks done, chunks in all) as it goes."""
        ...

    def end_run(self) -> None:
        """Clear that mark and note when the index was last brought up to date."""
        ...

    def raw_links(self, doc_id: int) -> list[tuple[str, str, int]]:
        """A document's links as the chunker found them, ``(kind, target, line)`` in file
        order, unresolved (copying an index). Cost: the document's links."""
        ...
