"""Helpers several of groove's own test modules share (a third party's tests use
``groove_core.testing``)."""

from __future__ import annotations

from pathlib import Path

from groove_core.app import Groove
from groove_core.sqlite.store import Store
from groove_core.testing import make_kb


def index_content(index: Path) -> set[tuple[str, str, int, str]]:
    """Everything a search can return from a SQLite index, independent of row ids and
    timestamps: two indexes of the same notes compare equal."""
    store = Store.open(index)
    rows = store.conn.execute(
        "SELECT d.path, d.content_hash, c.ordinal, c.content FROM chunks c "
        "JOIN documents d ON d.id = c.doc_id"
    )
    out = {(str(a), str(b), int(c), str(d)) for a, b, c, d in rows}
    store.close()
    return out


def batched_kb(tmp_path: Path, notes: int, body: str = "Body {i}.") -> Groove:
    """A KB of ``notes`` small notes, embedded by the hashing embedder four chunks per
    batch, so that an index run goes through several batches; ``body`` may name ``{i}``."""
    texts = {f"n{i:02d}.md": f"# Note {i}\n\n{body.format(i=i)}\n" for i in range(notes)}
    config = '[embedder]\nname = "hashing"\nbatch_size = 4\n'
    return Groove.open(make_kb(tmp_path / "kb", texts, config=config))
