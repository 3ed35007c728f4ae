"""Copy an index from one storage backend to another without re-embedding.

``groove index --copy-from sqlite`` (with ``[store] backend = "postgres"``), and back:
every document, chunk, vector and link of the source is written to the target through the
same ``IndexStore`` calls the indexer uses, so the target builds its own lexical rows and
statistics; the indexer then runs as usual and re-embeds only what changed on disk since.
See docs/storage-backends.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from groove_core.chunking import Chunk, estimate_tokens
from groove_core.embedding import EMBEDDING_TEXT_KEY
from groove_core.index_report import CHUNKING_KEY, EARLIER_CHUNKING
from groove_core.links import RawLink
from groove_core.storage import DocState, EmbedderMismatchError, NewDocument

if TYPE_CHECKING:
    from groove_core.rows import ChunkRow, DocumentRow
    from groove_core.storage import IndexStore

#: Documents written per transaction.
BATCH = 64


def copy_documents(
    source: IndexStore,
    target: IndexStore,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write every document of ``source`` whose chunks all have vectors into ``target``
    (which must hold no other embedder's vectors); returns how many were copied. A document
    with a chunk lacking a usable vector is left for the indexer, which re-embeds it."""
    recorded = source.embedder_identity()
    if recorded is None:
        return 0  # nothing embedded yet: nothing worth copying
    identity, dim = recorded
    ours = target.embedder_identity()
    if ours is not None and ours[0] != identity:
        raise EmbedderMismatchError(
            f"the target index holds vectors of {ours[0]!r}, the source of {identity!r}: "
            "copy into an empty index"
        )
    target.bind_embedder(identity, dim)
    # the chunks are copied as the source cut them: so is what says how (``chunking_note``)
    target.set_meta(CHUNKING_KEY, source.get_meta(CHUNKING_KEY) or EARLIER_CHUNKING)
    # and the vectors as the source embedded them: so is what says from which texts
    rules = source.get_meta(EMBEDDING_TEXT_KEY)
    if rules is not None:
        target.set_meta(EMBEDDING_TEXT_KEY, rules)
    states = source.doc_states()
    documents = source.documents()
    copied = 0
    for start in range(0, len(documents), BATCH):
        batch = documents[start : start + BATCH]
        written = _copy_batch(source, target, batch, states, dim)
        copied += written
        if progress is not None:
            progress(start + len(batch), len(documents))
    return copied


def _copy_batch(
    source: IndexStore,
    target: IndexStore,
    batch: Sequence[DocumentRow],
    states: dict[str, DocState],
    dim: int,
) -> int:
    docs: list[NewDocument] = []
    vectors: list[np.ndarray] = []
    for doc in batch:
        ids = [c.chunk_id for c in source.document_chunks(doc.doc_id)]
        rows = source.chunk_rows(ids)
        stored = source.embeddings(ids)
        # A vector with NaN in it (stored before vectors were checked) is no vector at all.
        if any(i not in stored or i not in rows or not np.isfinite(stored[i]).all() for i in ids):
            continue
        state = states[doc.path]
        chunks = tuple(_chunk(rows[i]) for i in ids)
        docs.append(
            NewDocument(
                path=doc.path,
                title=doc.title,
                tags=doc.tags,
                content_hash=state.content_hash,
                size=doc.size,
                mtime_ns=doc.mtime_ns,
                chunks=chunks,
                links=tuple(
                    RawLink(kind, target, line)
                    for kind, target, line in source.raw_links(doc.doc_id)
                ),
            )
        )
        vectors.extend(np.asarray(stored[i], dtype=np.float32) for i in ids)
    if docs:
        matrix = np.vstack(vectors) if vectors else np.zeros((0, dim), dtype=np.float32)
        target.write_documents(docs, matrix)
    return len(docs)


#: What a copied chunk takes from its row as it is.
_FROM_ROW = (
    "ordinal",
    "heading",
    "heading_path",
    "level",
    "context",
    "content",
    "byte_start",
    "byte_end",
    "line_start",
    "line_end",
    "sections",
)


def _chunk(row: ChunkRow) -> Chunk:
    # A row without a token count: the indexer's own estimate, as the stages read them,
    # never 0 (which would slip under every token cap).
    tokens = estimate_tokens(row.content) if row.token_count is None else row.token_count
    return Chunk(token_count=tokens, **{name: getattr(row, name) for name in _FROM_ROW})
