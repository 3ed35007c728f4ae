"""The index as one query's stages see it: the store, with chunk rows read once per query.

Several steps of one search want the same chunks' rows: the fusion rules look at what the
lexical legs matched (their scripts, the best hit's text), the pool becomes hits, and a
plugin's stage may ask again. This wrapper reads each row once per search, from
the snapshot the whole query reads (``Groove.search_explained``), so the rows cannot change
between two readings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groove_core.rows import ChunkRow
    from groove_core.storage import SearchStore


class QueryStore:
    """A :class:`~groove_core.storage.SearchStore` for one query: ``chunk_rows`` remembers
    the rows (and the ids that have none) it read; every other member is the store's own.
    One query runs on one thread, so no lock."""

    def __init__(self, store: SearchStore) -> None:
        self._store = store
        self._rows: dict[int, ChunkRow] = {}
        self._absent: set[int] = set()
        self.reads = 0  # chunk_rows calls that reached the store (for tests)

    def chunk_rows(self, chunk_ids: Sequence[int]) -> dict[int, ChunkRow]:
        wanted = [i for i in dict.fromkeys(chunk_ids) if i not in self._rows]
        wanted = [i for i in wanted if i not in self._absent]
        if wanted:
            self.reads += 1
            found = self._store.chunk_rows(wanted)
            self._rows.update(found)
            self._absent.update(i for i in wanted if i not in found)
        return {i: self._rows[i] for i in dict.fromkeys(chunk_ids) if i in self._rows}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
