"""Loaders: what turns a file of the KB into the Markdown text groove indexes and serves.

A loader claims file types by name ending (``.pdf``), optionally confirmed by the file's
first bytes (``sniff``), and turns a file's bytes into Markdown text plus ``anchors``, a
map from lines of that text back to places in the source (``page=12`` for a PDF). The
indexer, ``watch``, ``get`` and ``get_document`` read every file through its loader, so a
loaded file is walked, ignored, confined, size-capped and served like a note.

Markdown is the built-in loader (``groove_core.builtins.markdown``) and goes through the
same table; its identity is never written into the index, so an index of notes stays
byte-for-byte what it was. Any other loader's identity (``name/version``) is recorded with
each file it loaded: a new version of the loader re-reads its files on the next run.

Light imports only: every command builds the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from groove_core.errors import GrooveError

if TYPE_CHECKING:
    from groove_core.config import GrooveConfig, Settings

#: The built-in loader's name: its files keep the plain content hash (no identity prefix).
MARKDOWN = "markdown"
#: Bytes of a file's start a ``sniff`` function sees.
SNIFF_BYTES = 4096


class LoadError(ValueError):
    """A file its loader cannot turn into text; the message is the one-line reason it is
    skipped (``encrypted PDF``, ``not a PDF (no %PDF header)``)."""


@dataclass(frozen=True)
class Anchor:
    """From line ``line`` (1-based, of the loaded text) on, the text comes from
    ``fragment`` of the source (``page=12``); ``get`` serves ``report.pdf#page=12``."""

    line: int
    fragment: str


@dataclass(frozen=True)
class Loaded:
    """A file as its loader turned it into Markdown."""

    text: str
    anchors: tuple[Anchor, ...] = ()
    #: What the loader left out or capped, one line each (reported with the run).
    warnings: tuple[str, ...] = ()


#: What a loader is given: the file's bytes (already within ``index.max_file_bytes``), its
#: KB-relative path and the validated settings (its own section included).
LoadFn = Callable[[bytes, str, "Settings"], Loaded]


@dataclass(frozen=True)
class LoaderSpec:
    """One loader (``groove_loaders``): ``extensions`` are the lower-case name endings it
    claims (``(".pdf",)``), or a function of the settings returning them; ``sniff``, when
    given, must accept a file's first :data:`SNIFF_BYTES` bytes for the loader to take it.
    ``version`` is part of the loader's identity: change it when the text it produces
    changes, and the files it loaded are read again."""

    name: str
    version: str
    extensions: tuple[str, ...] | Callable[[Settings], tuple[str, ...]]
    load: LoadFn
    sniff: Callable[[bytes], bool] | None = None
    description: str = ""
    #: The plugin that declared it (set by the plugin manager).
    plugin: str = ""

    @property
    def identity(self) -> str:
        return f"{self.name}/{self.version}"


@dataclass(frozen=True)
class ClaimedLoader:
    """A loader with its extensions resolved for one configuration."""

    spec: LoaderSpec
    extensions: tuple[str, ...]


@dataclass(frozen=True)
class Loaders:
    """The loaders in force for one configuration, in plugin order."""

    claimed: tuple[ClaimedLoader, ...]
    settings: Settings
    extensions: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        found: dict[str, None] = {}
        for claim in self.claimed:
            found.update(dict.fromkeys(claim.extensions))
        object.__setattr__(self, "extensions", tuple(found))

    @classmethod
    def markdown_only(cls, config: GrooveConfig) -> Loaders:
        """The built-in Markdown loader alone (what a caller without plugins reads)."""
        from groove_core.config import Settings

        claim = ClaimedLoader(MARKDOWN_SPEC, config.index.indexed_extensions())
        return cls((claim,), Settings(config))

    def claims(self, rel: str) -> bool:
        """Whether some loader claims the file ``rel`` by its name."""
        return rel.lower().endswith(self.extensions)

    def candidates(self, rel: str) -> list[LoaderSpec]:
        """The loaders claiming ``rel`` by its name, in order."""
        name = rel.lower()
        return [c.spec for c in self.claimed if name.endswith(c.extensions)]

    def choose(self, rel: str, data: bytes) -> LoaderSpec:
        """The loader that reads ``rel`` (whose bytes are ``data``): the first claiming it
        whose ``sniff`` accepts its start. LoadError when none does."""
        candidates = self.candidates(rel)
        head = data[:SNIFF_BYTES]
        for spec in candidates:
            if spec.sniff is None or _sniffs(spec, head):
                return spec
        if not candidates:
            raise LoadError("no loader claims this file type")
        names = ", ".join(s.name for s in candidates)
        kind = PurePosixPath(rel).suffix.lower().lstrip(".").upper() or "file"
        raise LoadError(f"not a {kind} file by its content (checked by: {names})")

    def load(self, rel: str, data: bytes) -> tuple[LoaderSpec, Loaded]:
        """``rel``'s text through its loader. LoadError (a one-line reason) when it cannot
        be loaded; a loader's own failure is one too, never an exception of its library."""
        spec = self.choose(rel, data)
        try:
            loaded = spec.load(data, rel, self.settings)
        except LoadError:
            raise
        except (MemoryError, RecursionError) as err:
            raise LoadError(f"{spec.name} loader gave up: {type(err).__name__}") from None
        except Exception as err:
            detail = str(err).splitlines()[0][:200] if str(err) else ""
            message = f"{spec.name} loader failed: {type(err).__name__}"
            raise LoadError(f"{message}: {detail}" if detail else message) from None
        return spec, loaded

    def describe(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """(plugin, loader identity, extensions) for each loader: ``groove plugins list``."""
        return [(c.spec.plugin, c.spec.identity, c.extensions) for c in self.claimed]


def _sniffs(spec: LoaderSpec, head: bytes) -> bool:
    assert spec.sniff is not None
    try:
        return bool(spec.sniff(head))
    except Exception:
        return False


def build_loaders(
    specs: Sequence[LoaderSpec],
    settings: Settings,
    calling: Callable[[str, str], AbstractContextManager[None]] | None = None,
) -> Loaders:
    """The table for ``settings``: each spec with its extensions resolved, lower-cased.
    ``calling(plugin, hook)`` guards the call into a plugin's code
    (:meth:`groove_core.plugins.Plugins.calling`): extensions that cannot be resolved stop
    the command, since an index run without that loader's types would remove its files."""
    claimed = []
    for spec in specs:
        hook = f"groove_loaders: the extensions of loader {spec.identity!r}"
        with nullcontext() if calling is None else calling(spec.plugin, hook):
            ext = spec.extensions(settings) if callable(spec.extensions) else spec.extensions
            found = tuple(e.lower() for e in ext)
        claimed.append(ClaimedLoader(spec, found))
    return Loaders(tuple(claimed), settings)


def content_key(spec: LoaderSpec, digest: str) -> str:
    """What the index records as a file's content hash: the bytes' digest, prefixed with
    the loader's identity for any loader but Markdown's (a new version re-reads)."""
    return digest if spec.name == MARKDOWN else f"{spec.identity}:{digest}"


def recorded_identity(content_hash: str) -> str | None:
    """The loader identity a recorded content hash carries (None: Markdown's)."""
    identity, sep, _ = content_hash.rpartition(":")
    return identity if sep else None


def decode_markdown(data: bytes) -> str:
    """Strict UTF-8 (a BOM is dropped); raises ValueError naming the problem."""
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"not valid UTF-8 (byte {err.start})") from None


def _markdown_extensions(settings: Settings) -> tuple[str, ...]:
    return settings.config.index.indexed_extensions()


def _load_markdown(data: bytes, rel: str, settings: Settings) -> Loaded:
    try:
        return Loaded(decode_markdown(data))
    except ValueError as err:
        raise LoadError(str(err)) from None


#: The built-in loader (registered by ``groove_core.builtins.markdown``): ``[index]
#: extensions``, plus ``.mdx`` where the dialect cleans it, read as strict UTF-8.
MARKDOWN_SPEC = LoaderSpec(
    MARKDOWN, "1", _markdown_extensions, _load_markdown, description="Markdown (UTF-8)"
)


def fragment_lines(loaded: Loaded, fragment: str) -> tuple[int, int]:
    """The lines (1-based, inclusive) of ``loaded`` that ``fragment`` (``page=12``) covers:
    from its anchor to the line before the next one. FragmentError when none matches."""
    lines = loaded.text.count("\n") + (0 if loaded.text.endswith("\n") else 1)
    for i, anchor in enumerate(loaded.anchors):
        if anchor.fragment == fragment:
            after = loaded.anchors[i + 1].line - 1 if i + 1 < len(loaded.anchors) else lines
            return anchor.line, max(anchor.line, after)
    known = [a.fragment for a in loaded.anchors]
    shown = f"{known[0]} to {known[-1]}" if len(known) > 1 else (known[0] if known else "none")
    raise FragmentError(f"no part {fragment!r} in this file (it has: {shown})")


def fragment_at(anchors: Sequence[Anchor], line: int) -> str | None:
    """The fragment of the source that line ``line`` of the loaded text comes from."""
    found = None
    for anchor in anchors:
        if anchor.line > line:
            break
        found = anchor.fragment
    return found


class FragmentError(GrooveError):
    """A ``#fragment`` the file does not have."""


def with_plugin(spec: LoaderSpec, plugin: str) -> LoaderSpec:
    return spec if spec.plugin else replace(spec, plugin=plugin)
