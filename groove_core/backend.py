"""The storage-backend contract: where a KB's index lives, and how it is built, opened,
checked and repaired.

``[store] backend`` in groove.toml names one; a plugin provides backends through the
``groove_storage_backends`` hook, as the built-in SQLite backend does
(``groove_core.sqlite.backend``). The application (``groove_core.app``) only talks to an
index through this contract: a backend hands out connections (:meth:`IndexBackend.open`)
that the indexer writes through and the legs read through, and it owns what differs
between engines: staging a rebuild, telling a damaged index from a hostile environment,
and checking consistency. See docs/storage-backends.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig, Settings
    from groove_core.index_report import IndexReport
    from groove_core.leg_index import BoundIndex
    from groove_core.storage import IndexStore, StoreError

S = TypeVar("S")

#: How a build runs: ``update`` the live index in place (incremental, each batch its own
#: transaction); ``rebuild`` from empty beside it, swapped in when complete; ``reembed`` a
#: copy of it with new vectors, swapped in when complete.
BuildMode = Literal["update", "rebuild", "reembed"]


@dataclass(frozen=True)
class BackendContext:
    """What a backend factory is given: the KB, its validated configuration, its name."""

    kb: Path
    config: GrooveConfig
    settings: Settings
    #: The KB's name (``[kb] name``, else the folder's name): the key of its rows where
    #: several KBs share one database.
    kb_name: str
    #: How messages name the index (the SQLite file, KB-relative where it lies inside).
    index_file: Path
    #: The enabled legs' indexes a backend keeps, by backend name (``groove_core.leg_index``:
    #: each resolved for that backend); a backend missing here keeps the built-in
    #: lexical legs' alone, as a store opened directly does.
    leg_indexes: Mapping[str, tuple[BoundIndex, ...]] = field(default_factory=dict)
    #: How messages name the KB: its registered name, else ``kb_name``.
    display_name: str = ""


@dataclass(frozen=True)
class BackendSpec:
    """A storage backend a plugin provides (returned by ``groove_storage_backends``)."""

    name: str  # the value of ``[store] backend``
    factory: Callable[[BackendContext], IndexBackend]
    description: str = ""
    plugin: str = ""  # set by the core: the plugin that declared it


@dataclass
class Diagnosis:
    """What a backend's check of its index found (``groove doctor``)."""

    problems: list[str] = field(default_factory=list)  # what is wrong with the index
    #: What is wrong around it (no space, read-only, permissions, a server that is down):
    #: not damage, never repaired by rebuilding.
    environment: list[str] = field(default_factory=list)
    #: Checks left out because they write and the index is read-only: not a problem.
    skipped: list[str] = field(default_factory=list)
    rebuild: bool = False  # the index itself is damaged: only a rebuild repairs it
    reindexed: list[str] = field(default_factory=list)  # paths the check already repaired
    #: What users should know that is not a problem (chunks still waiting for a vector).
    notes: list[str] = field(default_factory=list)

    def open_index(
        self, open_store: Callable[[], S], *, missing: Callable[[StoreError], bool]
    ) -> S | None:
        """The store ``open_store`` opens, to be checked; None when it cannot be opened,
        and why is noted: a failure around the index in :attr:`environment`, an index too
        damaged to open in :attr:`problems`, with :attr:`rebuild` set. An index that is
        not there (``missing(err)``) has nothing to check: its error is raised."""
        from groove_core.storage import IndexEnvironmentError, StoreError

        try:
            return open_store()
        except IndexEnvironmentError as err:
            self.environment.append(str(err))
            return None
        except StoreError as err:
            if missing(err):
                raise
            self.problems.append(str(err))
            self.rebuild = True
            return None


class IndexBackend(Protocol):
    """One KB's index in one engine. Every method may raise ``StoreError`` (with a message
    that names the index and says what state a failure left it in)."""

    #: The ``[store] backend`` name.
    name: str
    #: How messages name the index: "index.sqlite", "postgres db groove, KB notes".
    label: str
    #: How the index is named to remote (MCP) clients: never a machine path or a secret.
    public_label: str
    #: How many searches at once ``groove serve`` runs by default (its reader threads,
    #: each with a connection of its own): what the engine serves well side by side.
    readers: int

    @property
    def schema_version(self) -> int:
        """The version of the engine's index layout, recorded with each evaluation run (a
        new layout can change results)."""
        ...

    def exists(self) -> bool:
        """Whether an index has been built (searching needs one)."""
        ...

    def size_bytes(self) -> int | None:
        """What the index takes on disk, or None where the engine cannot tell one KB's
        share (``groove status``)."""
        ...

    def open(self) -> IndexStore:
        """A connection to the existing index, for one thread: the legs read through it,
        the indexer writes through it (``groove_core.storage``)."""
        ...

    def current(self, store: IndexStore) -> bool:
        """False when ``store`` no longer reads the live index (it was swapped for a
        rebuilt one since it opened): the application then opens a new connection."""
        ...

    def build(self, work: Callable[[IndexStore], IndexReport], mode: BuildMode) -> IndexReport:
        """Run ``work`` (the indexer) with a writable connection in ``mode``; a rebuild or a
        re-embed becomes the live index only when ``work`` completes, so a failed or killed
        run leaves the old index serving. Runs of one KB serialise."""
        ...

    def tidy(self, *, strict: bool) -> None:
        """Remove what a killed rebuild left behind; ``strict``: a failure to is an error."""
        ...

    def diagnose(self, *, repair: bool) -> Diagnosis:
        """Check the index; with ``repair``, fix in place what needs no rebuild."""
        ...

    def errors(self) -> tuple[type[BaseException], ...]:
        """The engine's exception classes, which :meth:`classify` turns into messages."""
        ...

    def classify(
        self, err: BaseException, doing: str, outcome: str = "", *, suspect: bool = False
    ) -> StoreError:
        """A ``StoreError`` subclass for an engine error met while ``doing`` something:
        ``IndexDamagedError`` (rebuild), ``IndexEnvironmentError`` (fix the surroundings)
        or plain. ``suspect``: the statements were groove's own, so an unexplained error
        means damage."""
        ...
