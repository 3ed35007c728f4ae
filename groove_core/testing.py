"""Helpers for testing groove and groove plugins: a temporary KB and a fast embedder.

Import in a plugin's own tests::

    from groove_core.testing import make_kb, open_kb

``make_kb`` writes Markdown files and a groove.toml that selects the deterministic
``hashing`` embedder, so tests never load a real model unless they ask for one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from groove_core.app import Groove

FAST_CONFIG = '[embedder]\nname = "hashing"\n'


def make_kb(
    root: Path, files: Mapping[str, str | bytes], *, config: str | None = FAST_CONFIG
) -> Path:
    """Write ``files`` (KB-relative path -> text or bytes) under ``root`` and a groove.toml."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, body in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            target.write_bytes(body)
        else:
            target.write_text(body, encoding="utf-8")
    if config is not None:
        (root / "groove.toml").write_text(config, encoding="utf-8")
    return root


def open_kb(
    kb: Path,
    *,
    extra_plugins: Sequence[tuple[str, object]] = (),
    entry_points: bool = True,
    index: bool = True,
) -> Groove:
    """A :class:`Groove` for ``kb`` (indexed unless ``index=False``)."""
    app = Groove.open(kb, extra_plugins=extra_plugins, entry_points=entry_points)
    if index:
        app.index()
    return app
