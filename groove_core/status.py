"""What ``groove status`` and the MCP tool ``index_status`` report about one knowledge base.

A function of one KB, so that a command over several KBs is a loop. ``groove status`` reads
the index without the embedder check that searching makes: an index built with another embedder is
a fact to report, not an error, and no model is loaded to report it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groove_core.embedding import EMBEDDING_TEXT_KEY, EMBEDDING_TEXT_RULES, EmbedderError
from groove_core.index_report import CHUNKING_KEY, chunking_note
from groove_core.kb_files import changes_on_disk, iso_time

if TYPE_CHECKING:
    from groove_core.app import Groove
    from groove_core.kb_files import DiskTracker
    from groove_core.storage import IndexStore

#: ``embedding_note`` of an index embedded before text in capitals was lower-cased.
EARLIER_EMBEDDING_TEXT = (
    "embedded before groove gave the embedder text in capitals lower-cased; the next "
    "'groove index' embeds any such chunks again"
)


def kb_status(app: Groove) -> dict[str, Any]:
    """Documents, chunks, embedder, index size, last run, changes on disk since, whether
    an index run is unfinished, and how many chunks still wait for a vector. Raises
    StoreError only for an index that cannot be read at all (damaged, newer schema); a
    missing index is ``indexed: False``."""
    out: dict[str, Any] = {
        "kb": str(app.kb.resolve()),
        "name": app.public_name,
        "index_file": app.index_label,
        "backend": app.backend.name,
        "indexed": app.backend.exists(),
        "index_bytes": app.backend.size_bytes(),
    }
    if not out["indexed"]:
        changes = changes_on_disk(app, store=None)
        return {**out, **_empty(app), "changes_on_disk": changes, "stale": _stale(changes)}
    store = app.backend.open()
    try:
        with store.snapshot():
            return {**out, **index_facts(app, store)}
    finally:
        store.close()


def index_facts(
    app: Groove, store: IndexStore, tracker: DiskTracker | None = None
) -> dict[str, Any]:
    """What an open index holds (counts, embedder, last run, an unfinished run) and the
    files changed on disk since, read in the caller's snapshot; ``tracker`` caches the walk
    of the files for a long-lived server."""
    changes = changes_on_disk(app, tracker, store=store)
    return {**_from_index(app, store), "changes_on_disk": changes, "stale": _stale(changes)}


def _empty(app: Groove) -> dict[str, Any]:
    return {
        "documents": 0,
        "chunks": 0,
        "embedder": _embedder(app, None),
        "last_indexed": None,
        "incomplete": False,
        "incomplete_since": None,
        "incomplete_note": None,
        "vectors_pending": 0,
        "semantic_note": None,
        "chunking_note": None,
        "embedding_note": None,
    }


def _from_index(app: Groove, store: IndexStore) -> dict[str, Any]:
    from groove_core.storage import INCOMPLETE_KEY, semantic_note

    since = store.get_meta(INCOMPLETE_KEY)
    counts = store.counts()
    pending = store.pending_vectors()
    return {
        **counts,
        "embedder": _embedder(app, store.embedder_identity()),
        "last_indexed": iso_time(store.last_indexed()),
        "incomplete": since is not None,
        "incomplete_since": iso_time(float(since)) if since is not None else None,
        "incomplete_note": store.incomplete(),
        # Chunks searchable by their words only until an index run embeds them (ADR-0015).
        "vectors_pending": pending,
        "semantic_note": semantic_note(pending, counts["chunks"]) if pending else None,
        # Chunks cut under other settings than the configuration's (an upgrade, an edit).
        "chunking_note": (
            chunking_note(store.get_meta(CHUNKING_KEY), app.config.index)
            if counts["chunks"]
            else None
        ),
        # Vectors embedded before a change of what the embedder is given (an upgrade).
        "embedding_note": (
            EARLIER_EMBEDDING_TEXT
            if store.has_vectors() and store.get_meta(EMBEDDING_TEXT_KEY) != EMBEDDING_TEXT_RULES
            else None
        ),
    }


def _embedder(app: Groove, recorded: tuple[str, int] | None) -> dict[str, Any]:
    """The configured embedder and the one the index was built with; ``matches`` is None
    when either is unknown (nothing embedded yet, or the embedder cannot be made)."""
    try:
        configured: str | None = app.embedder.identity
    except EmbedderError:
        configured = None
    identity = recorded[0] if recorded else None
    return {
        "name": app.config.embedder.name,
        "configured_identity": configured,
        "identity": identity,
        "dim": recorded[1] if recorded else None,
        "matches": None if configured is None or identity is None else configured == identity,
    }


def _stale(changes: dict[str, Any]) -> int:
    return int(changes["added_count"] + changes["modified_count"] + changes["deleted_count"])
