"""Walk a KB, chunk what changed, embed in batches, write each batch in one transaction.

Crash safety comes from the unit of work: a batch of whole files is written in a single
transaction after its vectors exist, so a kill at any point leaves every document either
as it was or fully replaced, and the next run simply continues. Unchanged files are found
by size + mtime first, then by content hash, and are never re-embedded.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from groove_core.chunking import Chunk, parse_markdown
from groove_core.config import GrooveConfig, IndexConfig
from groove_core.embedding import Embedder
from groove_core.store import DocState, NewDocument, Store

#: Folders never indexed, wherever they are.
ALWAYS_IGNORED_DIRS = frozenset({".git", "node_modules", ".hg", ".svn", "__pycache__", ".venv"})

ProgressFn = Callable[[str, int, int], None]


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
        }


@dataclass(frozen=True)
class SourceFile:
    rel: str  # KB-relative POSIX path
    path: Path
    size: int
    mtime_ns: int


def _ignored(rel: str, patterns: tuple[str, ...]) -> bool:
    from groove_core.filters import path_matches

    return any(path_matches(p, rel) for p in patterns)


def read_ignore_file(kb: Path) -> tuple[str, ...]:
    """Patterns from ``<kb>/.grooveignore`` (one glob a line, ``#`` comments)."""
    try:
        text = (kb / ".grooveignore").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ()
    lines = (line.strip() for line in text.splitlines())
    return tuple(line for line in lines if line and not line.startswith("#"))


def walk_kb(
    kb: Path, config: GrooveConfig, index_file: Path, skipped: list[tuple[str, str]]
) -> Iterator[SourceFile]:
    """Markdown files under ``kb``, never leaving it (symlinks out of it are skipped)."""
    root = kb.resolve()
    index_dir = index_file.resolve().parent
    patterns = config.index.ignore + read_ignore_file(kb)
    extensions = tuple(e.lower() for e in config.index.extensions)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in ALWAYS_IGNORED_DIRS
            and (here / d).resolve() != index_dir
            and not _ignored((here / d).relative_to(root).as_posix() + "/", patterns)
        )
        for name in sorted(filenames):
            if not name.lower().endswith(extensions):
                continue
            path = here / name
            rel = path.relative_to(root).as_posix()
            if _ignored(rel, patterns):
                continue
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    skipped.append((rel, "symlink pointing outside the knowledge base"))
                    continue
            try:
                st = path.stat()
            except OSError as err:
                skipped.append((rel, f"cannot read: {err.strerror}"))
                continue
            yield SourceFile(rel, path, st.st_size, st.st_mtime_ns)


def decode_markdown(data: bytes) -> str:
    """Strict UTF-8 (a BOM is dropped); raises ValueError naming the problem."""
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"not valid UTF-8 (byte {err.start})") from None


def _new_document(
    src: SourceFile, text: str, digest: str, index: IndexConfig
) -> tuple[NewDocument, tuple[str, ...]]:
    """The document to write, and the chunker's warnings about it (e.g. bad front matter)."""
    parsed = parse_markdown(
        text,
        fallback_title=Path(src.rel).stem,
        max_tokens=index.max_chunk_tokens,
        cjk_char_tokens=index.cjk_char_tokens,
    )
    doc = NewDocument(
        src.rel, parsed.title, parsed.tags, digest, src.size, src.mtime_ns, parsed.chunks
    )
    return doc, parsed.warnings


def embedding_text(chunk: Chunk) -> str:
    """What the embedder sees: the contextual prefix, then the chunk's own text."""
    return f"{chunk.context}\n{chunk.content}" if chunk.context else chunk.content


class Indexer:
    """One index run over ``kb`` into ``store`` with ``embedder``."""

    def __init__(
        self,
        kb: Path,
        config: GrooveConfig,
        store: Store,
        embedder: Embedder,
        progress: ProgressFn | None = None,
    ) -> None:
        self.kb = kb
        self.config = config
        self.store = store
        self.embedder = embedder
        self.progress = progress or (lambda _path, _done, _total: None)
        self.report = IndexReport()
        self._pending: list[tuple[NewDocument, bool]] = []
        self._pending_chunks = 0

    def run(self) -> IndexReport:
        started = time.perf_counter()
        self.store.check_embedder(self.embedder.identity)
        states = self.store.doc_states()
        files = list(walk_kb(self.kb, self.config, self.store.path, self.report.skipped))
        seen: set[str] = set()
        touched: list[tuple[str, int, int]] = []
        for done, src in enumerate(files, start=1):
            seen.add(src.rel)
            self._visit(src, states.get(src.rel), touched)
            self.progress(src.rel, done, len(files))
        self._flush()
        if touched:
            self.store.touch_documents(touched)
        removed = [p for p in states if p not in seen]
        if removed:
            self.store.delete_documents(removed)
        self.report.removed = len(removed)
        counts = self.store.counts()
        self.report.documents_total = counts["documents"]
        self.report.chunks_total = counts["chunks"]
        self.report.seconds = time.perf_counter() - started
        return self.report

    def _visit(
        self, src: SourceFile, state: DocState | None, touched: list[tuple[str, int, int]]
    ) -> None:
        if state is not None and state.size == src.size and state.mtime_ns == src.mtime_ns:
            self.report.unchanged += 1
            return
        if src.size > self.config.index.max_file_bytes:
            limit = self.config.index.max_file_bytes
            self.report.skipped.append(
                (src.rel, f"larger than index.max_file_bytes ({src.size} > {limit} bytes)")
            )
            return
        try:
            data = src.path.read_bytes()
            text = decode_markdown(data)
        except OSError as err:
            self.report.skipped.append((src.rel, f"cannot read: {err.strerror}"))
            return
        except ValueError as err:
            self.report.skipped.append((src.rel, str(err)))
            return
        digest = hashlib.sha256(data).hexdigest()
        if state is not None and state.content_hash == digest:
            touched.append((src.rel, src.size, src.mtime_ns))
            self.report.unchanged += 1
            return
        doc, warnings = _new_document(src, text, digest, self.config.index)
        self.report.warnings.extend((src.rel, w) for w in warnings)
        self._pending.append((doc, state is None))
        self._pending_chunks += len(doc.chunks)
        if self._pending_chunks >= self.config.embedder.batch_size:
            self._flush()

    def _flush(self) -> None:
        """Embed the pending files' chunks and write those files in one transaction."""
        if not self._pending:
            return
        import numpy as np

        texts = [embedding_text(c) for doc, _ in self._pending for c in doc.chunks]
        batch = self.config.embedder.batch_size
        started = time.perf_counter()
        parts = [
            self.embedder.embed_documents(texts[i : i + batch]) for i in range(0, len(texts), batch)
        ]
        self.report.embed_seconds += time.perf_counter() - started
        vectors = np.concatenate(parts) if parts else np.zeros((0, self.embedder.dim), np.float32)
        self.store.bind_embedder(self.embedder.identity, self.embedder.dim)
        self.store.write_documents([doc for doc, _ in self._pending], vectors)
        for _doc, is_new in self._pending:
            if is_new:
                self.report.added += 1
            else:
                self.report.changed += 1
        self.report.chunks_embedded += len(texts)
        self._pending = []
        self._pending_chunks = 0
