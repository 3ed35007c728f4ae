"""Walk a KB, chunk what changed, write it searchable, then embed it in batches.

Two passes (ADR-0015): every changed file is written first with its chunks and lexical
rows and no vectors, a batch of whole files per transaction; then the chunks without a
vector are embedded and stored, a batch per transaction. A kill at any point leaves every
document either as it was or fully replaced, and every chunk with its vector or marked as
waiting for one; the next run simply continues. Unchanged files are found by size + mtime
first, then by content hash, and are never re-embedded.

The walk of the KB is :mod:`groove_core.walk`, the vector pass
:mod:`groove_core.vector_pass`, what a run reports :mod:`groove_core.index_report`; this
module is the run that ties them together.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path

from groove_core import embed_worker
from groove_core.chunking import TooManyChunks, parse_markdown
from groove_core.config import (
    GrooveConfig,
    IndexConfig,
    index_path,
)
from groove_core.dialects import COMMONMARK, VaultKind, markup_for, vault_kind
from groove_core.embedding import (
    EMBEDDING_TEXT_KEY,
    EMBEDDING_TEXT_RULES,
    Embedder,
    embedding_input,
)
from groove_core.index_report import (
    CHUNKING_KEY,
    IndexProgress,
    IndexReport,
    ProgressFn,
    chunking_note,
    chunking_settings,
)
from groove_core.loaders import (
    MARKDOWN,
    LoadError,
    Loaders,
    LoaderSpec,
    content_key,
    recorded_identity,
)
from groove_core.storage import DocState, IndexStore, NewDocument
from groove_core.vector_pass import (
    VectorPass,
    VectorPipeline,
    _embedder_call,
    chunk_text,
)
from groove_core.walk import SourceFile, read_source, walk_kb

__all__ = ["IndexProgress", "IndexReport", "Indexer", "ProgressFn"]


def _new_document(
    src: SourceFile,
    text: str,
    digest: str,
    index: IndexConfig,
    vault: VaultKind | None = None,
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
            # A loader's parts (a PDF's pages) stay chunks of their own: a hit names its page.
            min_section_tokens=0 if converted else index.min_section_tokens,
            private_keys=() if converted else index.private_keys,
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


#: Chunks of changed files written per transaction in the lexical pass. Without an
#: embedding to wait for, a batch commits within a fraction of a second: searches see the
#: files arrive steadily, and a kill loses little (docs/benchmarks.md, "First use with a
#: slow embedder").
LEXICAL_BATCH_CHUNKS = 256


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
        self._vault = vault_kind(kb)

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
        if not states:  # an empty index: cut as configured from here on
            self.store.set_meta(CHUNKING_KEY, chunking_settings(self.config.index))
        self._embedding_text_rules()
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
        if not counts["chunks"]:  # every file gone: what is cut next is cut as configured
            self.store.set_meta(CHUNKING_KEY, chunking_settings(self.config.index))
        note = chunking_note(self.store.get_meta(CHUNKING_KEY), self.config.index)
        self.report.notes.extend([note] if note else [])
        self.report.seconds = time.perf_counter() - started
        return self.report

    def _embedding_text_rules(self) -> None:
        """Once per change of what the embedder is given for a chunk
        (:func:`~groove_core.embedding.embedding_input`): the chunks whose text the new
        rules change lose their vectors and wait for new ones, which this run's vector pass
        embeds."""
        if self.store.get_meta(EMBEDDING_TEXT_KEY) == EMBEDDING_TEXT_RULES:
            return
        changed: list[int] = []
        if self.store.has_vectors():
            after = 0
            while page := self.store.chunk_texts(after, 2000):
                for chunk_id, context, content in page:
                    text = chunk_text(context, content)
                    if embedding_input(text) != text:
                        changed.append(chunk_id)
                after = page[-1][0]
        dropped = self.store.requeue_vectors(changed) if changed else 0
        if dropped:
            self.report.notes.append(
                f"{dropped} chunk{' is' if dropped == 1 else 's are'} written in capitals: "
                f"{'it is' if dropped == 1 else 'they are'} embedded again, lower-cased "
                "(what the embedder is given changed)"
            )
        self.store.set_meta(EMBEDDING_TEXT_KEY, EMBEDDING_TEXT_RULES)

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
