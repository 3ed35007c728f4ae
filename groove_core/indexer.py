"""Walk a KB, chunk what changed, write it searchable, then embed it in batches.

Two passes (ADR-0015): every changed file is written first with its chunks and lexical
rows and no vectors, a batch of whole files per transaction; then the chunks without a
vector are embedded and stored, a batch per transaction. A kill at any point leaves every
document either as it was or fully replaced, and every chunk with its vector or marked as
waiting for one; the next run simply continues. Unchanged files are found by size + mtime
first, then by content hash, and are never re-embedded.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from groove_core import embed_worker
from groove_core.chunking import Chunk, TooManyChunks, parse_markdown
from groove_core.config import (
    DEFAULT_INDEX_DIR,
    ConfigError,
    GrooveConfig,
    IndexConfig,
    index_path,
)
from groove_core.dialects import COMMONMARK, in_vault, markup_for
from groove_core.embedding import Embedder, EmbedderError, checked_vectors, zero_rows
from groove_core.errors import GrooveError
from groove_core.files import file_kind, read_regular
from groove_core.filters import GlobError, compile_glob, path_matches
from groove_core.loaders import (
    MARKDOWN,
    LoadError,
    Loaders,
    LoaderSpec,
    content_key,
    recorded_identity,
)
from groove_core.storage import DocState, IndexStore, NewDocument

#: Folders never indexed, wherever they are.
#: The warning for a chunk whose vector is all zeros: it is stored (it is a vector), but no
#: query comes nearer to it than to any other, so only its words can find it.
ZERO_VECTOR = "the embedder returned a zero vector (findable by its words only)"
ALWAYS_IGNORED_DIRS = frozenset({".git", "node_modules", ".hg", ".svn", "__pycache__", ".venv"})


@dataclass(frozen=True)
class IndexProgress:
    """Where an index run stands, reported after each file and after each stored batch.

    ``work_done`` / ``work_total`` measure what is left to do: bytes of the files whose
    size or modification time changed (indexing), or chunks (embedding, re-embedding).
    Unchanged files cost nothing and count in neither, so the fraction (and an ETA drawn
    from it) follows the work rather than the number of files.
    """

    #: "indexing" (files, lexical rows), "embedding", "re-embedding", or "filling the
    #: <name> leg's index" (a leg enabled on an existing KB, before the files).
    stage: str
    path: str  # the file just visited ("" for a batch event)
    files_done: int
    files_total: int
    chunks_embedded: int
    work_done: int
    work_total: int
    #: Chunks written with their lexical rows (the "indexing" stage; ADR-0015).
    chunks_indexed: int = 0


ProgressFn = Callable[[IndexProgress], None]


@dataclass
class IndexReport:
    """What one ``groove index`` run did."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    chunks_embedded: int = 0
    chunks_total: int = 0
    documents_total: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    copied: int = 0  # documents copied from another backend (``index --copy-from``)
    #: Seconds from the start until every document was searchable by its words.
    searchable_seconds: float = 0.0
    #: Chunks left without a vector (a vector pass stopped early): the next run embeds them.
    vectors_pending: int = 0

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.seconds if self.seconds > 0 else 0.0

    @property
    def embed_chunks_per_second(self) -> float:
        return self.chunks_embedded / self.embed_seconds if self.embed_seconds > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "warnings": [{"path": p, "warning": w} for p, w in self.warnings],
            "chunks_embedded": self.chunks_embedded,
            "chunks_total": self.chunks_total,
            "documents_total": self.documents_total,
            "seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 1),
            "embed_chunks_per_second": round(self.embed_chunks_per_second, 1),
            "searchable_seconds": round(self.searchable_seconds, 3),
            "vectors_pending": self.vectors_pending,
            **({"copied": self.copied} if self.copied else {}),
        }


@dataclass(frozen=True)
class SourceFile:
    rel: str  # KB-relative POSIX path
    path: Path
    size: int
    mtime_ns: int


def _ignored(rel: str, patterns: tuple[str, ...]) -> bool:
    return any(path_matches(p, rel) for p in patterns)


def read_ignore_file(kb: Path) -> tuple[str, ...]:
    """Patterns from ``<kb>/.grooveignore`` (one glob a line, ``#`` comments).

    A malformed line is a :class:`ConfigError` naming it: skipping it would index (and
    serve) the very files it was written to keep out.
    """
    try:
        text = (kb / ".grooveignore").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    patterns = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            compile_glob(line)
        except GlobError as err:
            raise ConfigError(f".grooveignore line {number}: {err}") from None
        patterns.append(line)
    return tuple(patterns)


def ignore_patterns(kb: Path, config: GrooveConfig) -> tuple[str, ...]:
    """Every ignore pattern in force: ``[index] ignore`` and ``.grooveignore``."""
    return config.index.ignore + read_ignore_file(kb)


def exclusion(rel: str, patterns: tuple[str, ...]) -> str | None:
    """Why the KB-relative ``rel`` is never indexed nor served, or None.

    One rule for the indexer (a symbolic link's target) and get_document, so a link can
    never make search return what get_document refuses.
    """
    parts = PurePosixPath(rel).parts
    for part in parts[:-1]:
        if part in ALWAYS_IGNORED_DIRS or part == DEFAULT_INDEX_DIR:
            return f"inside {part}/, which groove never indexes and never serves"
    folders = ["/".join(parts[: i + 1]) + "/" for i in range(len(parts) - 1)]
    for candidate in [rel, *folders]:
        hit = next((p for p in patterns if path_matches(p, candidate)), None)
        if hit is not None:
            return f"excluded by the ignore pattern {hit!r}"
    return None


@dataclass(frozen=True)
class _Walk:
    """What every file of one walk is checked against."""

    root: Path
    index_dir: Path
    patterns: tuple[str, ...]
    extensions: tuple[str, ...]


def walk_kb(
    kb: Path,
    config: GrooveConfig,
    index_file: Path,
    skipped: list[tuple[str, str]],
    folders: list[str] | None = None,
    loaders: Loaders | None = None,
) -> Iterator[SourceFile]:
    """Regular files under ``kb`` that a loader claims (``loaders``; default the
    Markdown loader alone), never leaving it; the rest is added to ``skipped`` with the
    reason (links out of the KB or into ignored folders, loops, FIFOs and devices).
    ``folders`` receives every folder walked (index_status watches their mtimes to know
    when a walk is needed again)."""
    table = Loaders.markdown_only(config) if loaders is None else loaders
    walk = _Walk(
        kb.resolve(),
        Path(os.path.realpath(index_file)).parent,
        ignore_patterns(kb, config),
        table.extensions,
    )
    for dirpath, dirnames, filenames in os.walk(walk.root, followlinks=False):
        here = Path(dirpath)
        if folders is not None:
            folders.append(dirpath)
        for name in [d for d in dirnames if not _utf8(d)]:
            skipped.append((_shown(here / name, walk.root) + "/", NOT_UTF8))
        dirnames[:] = sorted(d for d in dirnames if _utf8(d) and _walk_into(walk, here / d))
        for name in sorted(filenames):
            if not name.lower().endswith(walk.extensions):
                continue
            path = here / name
            if not _utf8(name):
                skipped.append((_shown(path, walk.root), NOT_UTF8))
                continue
            rel = path.relative_to(walk.root).as_posix()
            if _ignored(rel, walk.patterns):
                continue
            found = _source(walk, path, rel)
            if isinstance(found, str):
                skipped.append((rel, found))
            else:
                yield found


#: Why a file or folder whose name is not valid UTF-8 is skipped: the index stores paths as
#: text, and a client could not name it back.
NOT_UTF8 = "its name is not valid UTF-8 (rename it to index it)"


def _utf8(name: str) -> bool:
    """Whether a name from the file system is valid UTF-8 (Python keeps invalid bytes as
    lone surrogates, which no text column or terminal takes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(path: Path, root: Path) -> str:
    """A KB-relative name that can be printed: invalid bytes as ``\\xNN``."""
    rel = os.fsencode(path.relative_to(root).as_posix())
    return rel.decode("utf-8", "backslashreplace")


def _walk_into(walk: _Walk, folder: Path) -> bool:
    rel = folder.relative_to(walk.root).as_posix() + "/"
    return (
        folder.name not in ALWAYS_IGNORED_DIRS
        and Path(os.path.realpath(folder)) != walk.index_dir
        and not _ignored(rel, walk.patterns)
    )


def _source(walk: _Walk, path: Path, rel: str) -> SourceFile | str:
    """The file to index at ``path``, or why it is skipped."""
    try:
        st = path.lstat()
    except OSError as err:
        return f"cannot read: {err.strerror}"
    if stat.S_ISLNK(st.st_mode):
        refusal = _link_refusal(walk, path)
        if refusal is not None:
            return refusal
        try:
            st = path.stat()
        except OSError as err:
            return _link_error(err)
    if not stat.S_ISREG(st.st_mode):
        return f"not a regular file ({file_kind(st.st_mode)})"
    return SourceFile(rel, path, st.st_size, st.st_mtime_ns)


def _link_refusal(walk: _Walk, link: Path) -> str | None:
    """Why a symbolic link is not followed: its target must pass every rule a file does."""
    # realpath, not Path.resolve: on Python 3.11 resolve raises RuntimeError on a loop,
    # which aborted the whole run; a loop is reported by the stat that follows instead.
    target = Path(os.path.realpath(link))
    if not target.is_relative_to(walk.root):
        return "symlink pointing outside the knowledge base"
    target_rel = target.relative_to(walk.root).as_posix()
    if target.is_relative_to(walk.index_dir):
        return f"symlink to {target_rel}, inside the index folder"
    reason = exclusion(target_rel, walk.patterns)
    if reason is not None:
        return f"symlink to {target_rel}, which is {reason}"
    if not target_rel.lower().endswith(walk.extensions):
        return f"symlink to {target_rel}, which is not a Markdown file"
    return None


def _link_error(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "symlink loop (the link leads back to itself)"
    if err.errno == errno.ENOENT:
        return "broken symlink (its target does not exist)"
    return f"cannot read: {err.strerror}"


def read_source(path: Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file at ``path``: a FIFO swapped in after
    the walk must not block the run (or the watcher), and the extra byte tells a file that
    grew past ``limit`` since its ``stat``."""
    return read_regular(path, limit)


def _new_document(
    src: SourceFile,
    text: str,
    digest: str,
    index: IndexConfig,
    vault: bool = False,
    *,
    converted: bool = False,
) -> tuple[NewDocument, tuple[str, ...]]:
    """The document to write, and the chunker's warnings about it (e.g. bad front matter).
    ``converted``: the text is a loader's Markdown, not a note (no dialect markup to clean:
    a ``%%`` or ``#word`` in a PDF is text).

    Raises ValueError (naming the setting) for a file over ``index.max_chunks_per_file``.
    """
    markup = (
        COMMONMARK
        if converted
        else markup_for(index.dialect, src.rel, text, vault, index.obsidian_comments == "keep")
    )
    try:
        parsed = parse_markdown(
            text,
            fallback_title=Path(src.rel).stem,
            max_tokens=index.max_chunk_tokens,
            cjk_char_tokens=index.cjk_char_tokens,
            max_chunks=index.max_chunks_per_file,
            markup=markup,
        )
    except TooManyChunks as err:
        raise ValueError(f"{err}: over index.max_chunks_per_file") from None
    doc = NewDocument(
        src.rel,
        parsed.title,
        parsed.tags,
        digest,
        src.size,
        src.mtime_ns,
        parsed.chunks,
        parsed.links,
    )
    return doc, parsed.warnings


def embedding_text(chunk: Chunk) -> str:
    """What the embedder sees: the contextual prefix, then the chunk's own text."""
    return _text(chunk.context, chunk.content)


def _text(context: str, content: str) -> str:
    return f"{context}\n{content}" if context else content


#: Chunks of changed files written per transaction in the lexical pass. Without an
#: embedding to wait for, a batch commits within a fraction of a second: searches see the
#: files arrive steadily, and a kill loses little (docs/benchmarks.md, "First use with a
#: slow embedder").
LEXICAL_BATCH_CHUNKS = 256


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


class Indexer:
    """One index run over ``kb`` into ``store`` with ``embedder``: every changed file's
    chunks and lexical rows first, committed a batch at a time, then their vectors
    (:func:`embed_pending`), so a first index is searchable by its words long before a
    slow embedder is done (ADR-0015). ``stop`` ends the vector pass early (between
    batches); what it leaves is embedded by the next run."""

    def __init__(
        self,
        kb: Path,
        config: GrooveConfig,
        store: IndexStore,
        embedder: Embedder,
        progress: ProgressFn | None = None,
        stop: Callable[[], bool] | None = None,
        loaders: Loaders | None = None,
        *,
        own_process: bool = False,
    ) -> None:
        self.kb = kb
        self.config = config
        self.loaders = Loaders.markdown_only(config) if loaders is None else loaders
        self.store = store
        self.embedder = embedder
        self.progress = progress or (lambda _event: None)
        self.stop = stop
        # Whether the embedder may be rebuilt in a child process from the configuration
        # alone (its plugins are installed ones, not registered in this process).
        self.own_process = own_process
        self.report = IndexReport()
        self._pending: list[tuple[NewDocument, bool]] = []
        self._pending_chunks = 0
        self._pending_bytes = 0
        # Bytes of the files that need reading (size or mtime changed), and of those done.
        self._work_total = 0
        self._work_done = 0
        self._chunks_indexed = 0
        self._files = (0, 0)  # files visited, files found
        # An Obsidian vault keeps its settings in .obsidian/ at its root, which may be a
        # folder above the KB's (dialect "auto").
        self._vault = in_vault(kb)

    def run(self) -> IndexReport:
        started = time.perf_counter()
        name = self.config.embedder.name
        with _embedder_call(self.embedder, name, "telling its identity"):
            identity = self.embedder.identity
        self.store.check_embedder(identity)
        # A leg enabled since the last run (or whose rules changed) has its index filled
        # from the stored chunks first, once, before any file is written.
        self.store.sync_leg_indexes(self._fill_progress)
        self.store.begin_run()
        states = self.store.doc_states()
        index_file = index_path(self.kb, self.config)
        files = list(
            walk_kb(self.kb, self.config, index_file, self.report.skipped, loaders=self.loaders)
        )
        self._work_total = sum(s.size for s in files if self._needs_reading(s, states.get(s.rel)))
        self._report_progress("", 0, len(files))
        kept: set[str] = set()
        touched: list[tuple[str, int, int]] = []
        with embed_worker.run_embedder(
            self.config,
            self.embedder,
            allowed=self.own_process,
            work_bytes=self._work_total,
            waiting=self.store.pending_vectors,
            warnings=self.report.warnings,
        ) as embedder:
            passed = self._passes(files, states, kept, touched, started, embedder)
        self.report.chunks_embedded += passed.embedded
        self.report.embed_seconds += passed.seconds
        self.report.warnings.extend(passed.warnings)
        self.report.vectors_pending = self.store.pending_vectors()
        counts = self.store.counts()
        self.report.documents_total = counts["documents"]
        self.report.chunks_total = counts["chunks"]
        self.report.seconds = time.perf_counter() - started
        return self.report

    def _passes(
        self,
        files: list[SourceFile],
        states: dict[str, DocState],
        kept: set[str],
        touched: list[tuple[str, int, int]],
        started: float,
        embedder: Embedder,
    ) -> VectorPass:
        """The lexical pass over ``files`` with the vector pass beside it, then the rest
        of the vector pass."""
        vectors = VectorPipeline(
            self.store,
            embedder,
            self.config.embedder.batch_size,
            progress=self.progress,
            name=self.config.embedder.name,
        )
        written = self._chunks_indexed
        try:
            for done, src in enumerate(files, start=1):
                reason = self._visit(src, states.get(src.rel), touched)
                if reason is None:
                    kept.add(src.rel)
                else:
                    self.report.skipped.append((src.rel, reason))
                self._report_progress(src.rel, done, len(files))
                if self._chunks_indexed > written:
                    written = self._chunks_indexed
                    vectors.wrote()
                vectors.poll()
            self._flush()
            self._finish_lexical(states, kept, touched, started)
            return vectors.drain(self.stop)
        finally:
            vectors.close()

    def _finish_lexical(
        self,
        states: dict[str, DocState],
        kept: set[str],
        touched: list[tuple[str, int, int]],
        started: float,
    ) -> None:
        """End the lexical pass: mtimes refreshed, files gone removed, the run marked done."""
        if touched:
            self.store.touch_documents(touched)
        # A file that can no longer be indexed leaves the index like a deleted one: its old
        # text must not stay searchable as if it were the file's content.
        removed = [p for p in states if p not in kept]
        if removed:
            self.store.delete_documents(removed)
        self.report.removed = len(removed)
        # After the last file is written: a kill before this leaves the mark, never a false
        # "complete". Every document is searchable from here; vectors may still be missing,
        # which the index says for itself (pending_vectors).
        self.store.end_run()
        self._note_dropped(states)
        self.report.searchable_seconds = time.perf_counter() - started

    def _fill_progress(self, name: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(
                IndexProgress(
                    stage=f"filling the {name} leg's index",
                    path="",
                    files_done=0,
                    files_total=0,
                    chunks_embedded=0,
                    work_done=done,
                    work_total=total,
                    chunks_indexed=done,
                )
            )

    def _needs_reading(self, src: SourceFile, state: DocState | None) -> bool:
        return _needs_reading(src, state, self.loaders.candidates(src.rel))

    def _report_progress(self, path: str, done: int, total: int) -> None:
        self._files = (done, total)
        event = IndexProgress(
            "indexing",
            path,
            done,
            total,
            self.report.chunks_embedded,
            self._work_done,
            self._work_total,
            self._chunks_indexed,
        )
        self.progress(event)

    def _note_dropped(self, states: dict[str, DocState]) -> None:
        """Say so in the reason of each skipped file whose earlier version was dropped."""
        self.report.skipped = [
            (rel, f"{reason}; its earlier version was removed from the index")
            if rel in states
            else (rel, reason)
            for rel, reason in self.report.skipped
        ]

    def _visit(
        self, src: SourceFile, state: DocState | None, touched: list[tuple[str, int, int]]
    ) -> str | None:
        """Queue ``src`` for writing if it changed; the reason it is skipped, or None."""
        if not self._needs_reading(src, state):
            self.report.unchanged += 1
            return None
        queued = len(self._pending)
        reason = self._read_and_queue(src, state, touched)
        if len(self._pending) > queued:
            self._pending_bytes += src.size
        else:
            self._work_done += src.size
        if self._pending_chunks >= LEXICAL_BATCH_CHUNKS:
            self._flush()
        return reason

    def _read_and_queue(
        self, src: SourceFile, state: DocState | None, touched: list[tuple[str, int, int]]
    ) -> str | None:
        limit = self.config.index.max_file_bytes
        if src.size > limit:
            return f"larger than index.max_file_bytes ({src.size} > {limit} bytes)"
        try:
            data = read_source(src.path, limit)
            if len(data) > limit:
                return f"larger than index.max_file_bytes (over {limit} bytes)"
            spec = self.loaders.choose(src.rel, data)
        except OSError as err:
            return f"cannot read: {err.strerror}"
        except ValueError as err:
            return str(err)
        digest = content_key(spec, hashlib.sha256(data).hexdigest())
        if state is not None and state.content_hash == digest:
            touched.append((src.rel, src.size, src.mtime_ns))
            self.report.unchanged += 1
            return None
        try:
            _, loaded = self.loaders.load(src.rel, data)
        except LoadError as err:
            return str(err)
        converted = spec.name != MARKDOWN
        try:
            doc, warnings = _new_document(
                src, loaded.text, digest, self.config.index, self._vault, converted=converted
            )
        except ValueError as err:
            return str(err)
        self.report.warnings.extend((src.rel, w) for w in loaded.warnings)
        self.report.warnings.extend((src.rel, w) for w in warnings)
        self._pending.append((doc, state is None))
        self._pending_chunks += len(doc.chunks)
        return None

    def _flush(self) -> None:
        """Write the queued files, chunks and lexical rows, without vectors, in one
        transaction: searchable by their words from here on."""
        if not self._pending:
            return
        self.store.write_documents([doc for doc, _ in self._pending], None)
        for _doc, is_new in self._pending:
            if is_new:
                self.report.added += 1
            else:
                self.report.changed += 1
        self._chunks_indexed += self._pending_chunks
        self._work_done += self._pending_bytes
        self._pending = []
        self._pending_chunks = 0
        self._pending_bytes = 0
        self._report_progress("", *self._files)


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


def _needs_reading(
    src: SourceFile, state: DocState | None, candidates: list[LoaderSpec] | None = None
) -> bool:
    """Whether ``src`` may have changed since it was indexed (size or mtime differ), or
    was loaded by a loader (or a version of it) none of ``candidates`` is."""
    if state is None or (state.size, state.mtime_ns) != (src.size, src.mtime_ns):
        return True
    if candidates is None:
        return False
    recorded = recorded_identity(state.content_hash)
    if recorded is None:
        return not any(c.name == MARKDOWN for c in candidates)
    return not any(c.identity == recorded for c in candidates)
