"""A candidate leg's own index: postings a leg keeps beside the chunks, per storage backend.

A leg that needs more than the storage contract's documents, chunks and vectors declares
a :class:`LegIndexSpec` on its :class:`~groove_core.context.LegSpec` (``index=``). The
spec names the index, gives the version of the rules its rows are written under, and maps
backend names (``[store] backend``: ``sqlite``, ``postgres``) to a factory. A backend
plugin may also implement another plugin's index for itself (the ``groove_leg_indexes``
hook, :class:`LegIndexImpl`), as groove-postgres does for the built-in lexical legs.

What the core and the backends do with it (docs/plugins.md, "A leg with its own index";
docs/adr/0020-legs-own-their-index.md):

* The backend opens each enabled leg's index with its own connection, the *site*: a
  pysqlite3 connection for SQLite, a :class:`~groove_postgres.legs.PostgresSite` for
  PostgreSQL. The factory returns an object with the :class:`LegIndex` methods below
  and whatever query methods the leg needs; the leg reaches it at query time as
  ``ctx.store.leg_index(name)`` (None where this store has none: then the leg searches
  without it, or skips).
* Every document the indexer writes or deletes reaches :meth:`LegIndex.write` /
  :meth:`LegIndex.delete` in the document's own transaction, so a kill leaves each
  document's rows in every index either fully old or fully new (``connection``: the
  transaction's connection, the site's own for SQLite).
* The store records the version each index was filled under. An index not filled under
  the spec's version (a leg enabled on an existing KB, new rules, an index written while
  the leg was disabled) is emptied and filled again from every chunk once, by the next
  ``groove index`` (with progress) or the first writable open; a read-only index serves
  the leg nothing until then. Rebuilds, re-embeds, ``--copy-from``, ``doctor`` (each
  index's chunk ids against the chunks, :meth:`LegIndex.check`) and ``--repair`` (a
  fill again) treat a leg index like the chunk table.

A leg whose backend has no implementation gets None from ``leg_index`` and falls back on
the storage contract (the example title leg scans the documents' titles then).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

#: A leg index's name: a lower-case identifier, so that a backend may name tables after it.
NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,30}")
#: Meta key prefix: ``leg_index:<name>`` holds the version an index was filled under.
META_PREFIX = "leg_index:"


@dataclass(frozen=True)
class IndexedChunk:
    """One chunk as a leg index receives it: its id, its document's, and its text as the
    chunker wrote it (not normalised: the leg normalises as it matches)."""

    chunk_id: int
    doc_id: int
    path: str
    title: str
    heading: str
    context: str
    content: str


@runtime_checkable
class LegIndex(Protocol):
    """What the store calls on a leg's index (bound to one connection, one thread)."""

    def create(self, connection: Any) -> None:
        """Create the index's tables if they are not there (idempotent)."""
        ...

    def drop(self, connection: Any) -> None:
        """Remove the index's tables and rows (before a fill, or when a KB is deleted)."""
        ...

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        """Index these chunks (new ids), inside the caller's transaction."""
        ...

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        """Remove these chunks' rows, inside the caller's transaction; each is given with
        the text it was written with (a contentless index needs it)."""
        ...

    def chunk_ids(self) -> frozenset[int]:
        """Every chunk id the index holds (``groove doctor`` compares them with the
        chunks)."""
        ...

    def check(self) -> list[str]:
        """What is wrong with the index's own structures (empty when nothing)."""
        ...


#: A factory: the backend's site (its connection, see the module docstring) -> the index.
LegIndexFactory = Callable[[Any], LegIndex]


@dataclass(frozen=True)
class LegIndexSpec:
    """The index a leg declares (``LegSpec.index``)."""

    #: The index's name (:data:`NAME_PATTERN`), what ``ctx.store.leg_index`` is asked for.
    name: str
    #: The rules its rows are written under: a new value fills the index again.
    version: str
    #: Backend name -> factory. A backend missing here may be given by another plugin
    #: (:class:`LegIndexImpl`); with neither, the leg searches without an index.
    backends: Mapping[str, LegIndexFactory] = field(default_factory=dict)
    plugin: str = ""  # set by the core: the plugin that declared it

    def __post_init__(self) -> None:
        if not NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"LegIndexSpec {self.name!r}: the name must be a lower-case identifier "
                "(letters, digits, '_'; at most 31 characters)"
            )


@dataclass(frozen=True)
class LegIndexImpl:
    """An implementation of a leg index for one backend, from a plugin other than the
    leg's (``groove_leg_indexes``); the leg's own ``backends`` entry wins."""

    index: str
    backend: str
    factory: LegIndexFactory
    plugin: str = ""  # set by the core


@dataclass(frozen=True)
class BoundIndex:
    """A leg index resolved for one backend: what a store opens (``BackendContext``)."""

    name: str
    version: str
    factory: LegIndexFactory
    plugin: str = ""


def resolve(
    specs: Sequence[LegIndexSpec], impls: Sequence[LegIndexImpl], backend: str
) -> tuple[BoundIndex, ...]:
    """The indexes of ``specs`` that ``backend`` can keep, each once (the first spec of a
    name wins, as the first leg of a name does)."""
    extra: dict[str, LegIndexImpl] = {}
    for impl in impls:
        if impl.backend == backend:
            extra.setdefault(impl.index, impl)
    found: dict[str, BoundIndex] = {}
    for spec in specs:
        if spec.name in found:
            continue
        own = spec.backends.get(backend)
        if own is not None:
            found[spec.name] = BoundIndex(spec.name, spec.version, own, spec.plugin)
        elif spec.name in extra:
            impl = extra[spec.name]
            found[spec.name] = BoundIndex(spec.name, spec.version, impl.factory, impl.plugin)
    return tuple(found.values())


def meta_key(name: str) -> str:
    return f"{META_PREFIX}{name}"
