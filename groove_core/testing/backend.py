"""The storage-backend contract as tests (docs/storage-backends.md): subclass
:class:`BackendContract` for your backend."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groove_core.app import Groove
from groove_core.rows import Subsection
from groove_core.storage import StoreError
from groove_core.testing.kb import make_kb, open_kb

if TYPE_CHECKING:
    from groove_core.storage import IndexStore


# -- the storage-backend contract ------------------------------------------------------------

#: A small Japanese and English KB: headings, tags, links, short Japanese words.
BILINGUAL: dict[str, str] = {
    "guide/install.md": (
        "---\ntitle: Installing groove\ntags: [setup, guide]\n---\n# Installing groove\n\n"
        "Run the setup script to create a virtual environment. See [searching](search.md).\n\n"
        "## Requirements\n\nPython 3.11 and a C compiler are needed for the extensions.\n"
    ),
    "guide/search.md": (
        "---\ntags: [guide]\n---\n# Searching\n\nUse quoted phrases for exact matches and a "
        "leading minus to exclude words.\n\n## Ranking\n\nResults are fused with reciprocal "
        "rank fusion across the lexical and vector legs. [[install]]\n"
    ),
    "notes/rust.md": (
        "---\ntags: [lang]\n---\n# Rust notes\n\nRust async runtimes such as tokio schedule "
        "futures.\n\n## Ownership\n\nRust ownership rules prevent data races at compile time.\n"
    ),
    "notes/python.md": (
        "# Python notes\n\nPython generators yield values lazily, one at a time.\n\n"
        "## Pipelines\n\nData pipelines chain generators; each stage pulls from the last.\n"
    ),
    "notes/ja.md": (
        "---\ntags: [日本語]\n---\n# 再ランキングの評価\n\nクロスエンコーダによる再ランキングの"
        "評価について説明する。\n\n## 検索システム\n\n全文検索とベクトル検索を組み合わせた"
        "システムである。状態管理の型も扱う。\n"
    ),
    "notes/vue.md": (
        "# 算出プロパティ\n\n算出プロパティはリアクティブな状態から値を計算する。"
        "キャッシュされる。\n\n## ウォッチャー\n\nウォッチャーは状態の変化に応じて副作用を"
        "実行する。部屋の型。\n"
    ),
    "journal/2024.md": (
        "# Journal\n\nToday I read about bm25 and trigram matching. 東京で日本語の文章を"
        "検索した。\n\nCafé naïve résumé — Ｆｕｌｌ－ｗｉｄｔｈ text.\n"
    ),
}


def _top(app: Groove, query: str, **filters: Any) -> list[tuple[str, int, str]]:
    response = app.search(query, limit=10, **filters)
    return [(h.path, h.line_start, h.content) for h in response.results]


def _content(app: Groove) -> set[tuple[str, int, str]]:
    """Everything a search can return, independent of ids and timestamps."""
    store = app.backend.open()
    try:
        docs = store.documents()
        rows = store.chunk_rows(sorted(store.chunk_ids_for_docs(d.doc_id for d in docs)))
        return {(r.path, r.ordinal, r.content) for r in rows.values()}
    finally:
        store.close()


def _files(kb: Path) -> dict[str, str]:
    return {
        p.relative_to(kb).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(kb.rglob("*.md"))
    }


def _document(app: Groove, path: str) -> dict[str, Any]:
    """What ``groove get`` and MCP ``get_document`` say of the file: whether it is indexed,
    and its title (both read it through ``groove_core.kb_files``, as this does)."""
    from groove_core.kb_files import indexed_document, resolve_markdown

    file = resolve_markdown(app, path)
    indexed = indexed_document(app, file.rel) if app.backend.exists() else None
    return {"indexed": indexed is not None, "title": indexed.title if indexed else None}


def _chunks_holding(store: IndexStore, text: str) -> frozenset[int]:
    """The chunks whose heading, context or content holds ``text`` (case-folded)."""
    docs = store.documents()
    rows = store.chunk_rows(sorted(store.chunk_ids_for_docs(d.doc_id for d in docs)))
    needle = text.casefold()
    return frozenset(
        cid
        for cid, row in rows.items()
        if any(needle in part.casefold() for part in (row.heading, row.context, row.content))
    )


class BackendContract:
    """The storage-backend contract (docs/storage-backends.md) as tests a backend's own
    suite runs. Subclass it in a test module and say how a KB is put on the backend::

        class TestMyBackend(BackendContract):
            def store_config(self, request):
                return FAST_CONFIG + '[store]\nbackend = "mine"\n'

    pytest collects the ``test_*`` methods of the subclass. The SQLite backend runs it
    (tests/test_backend_contract.py), and so does the PostgreSQL plugin.
    """

    #: The column weights the lexical checks search with.
    WEIGHTS = (2.0, 1.0, 1.0)

    def store_config(self, request: Any) -> str:
        """The groove.toml of a KB on this backend, with an empty index of its own (KBs are
        told apart by their folder's name) and a fast embedder (:data:`FAST_CONFIG`).
        ``request`` is pytest's fixture request, for a fixture the backend needs (a
        database, a server)."""
        raise NotImplementedError("a BackendContract subclass says how to configure a KB")

    def kb(self, request: Any, root: Path, files: Mapping[str, str] | None = None) -> Path:
        """A KB of ``files`` (default :data:`BILINGUAL`) on this backend, not indexed."""
        return make_kb(
            root, BILINGUAL if files is None else files, config=self.store_config(request)
        )

    def test_index_incrementally_change_and_delete(self, request: Any, tmp_path: Path) -> None:
        from groove_core.status import kb_status

        kb = self.kb(request, tmp_path / "kb")
        app = Groove.open(kb)
        first = app.index()
        assert (first.added, first.documents_total) == (len(BILINGUAL), len(BILINGUAL))
        assert app.index().unchanged == len(BILINGUAL)  # nothing to do the second time
        (kb / "notes" / "rust.md").write_text("# Rust notes\n\nBorrow checker lifetimes.\n")
        (kb / "notes" / "python.md").unlink()
        (kb / "notes" / "new.md").write_text("# 新しいノート\n\n部屋の掃除について。\n")
        report = app.index()
        assert (report.added, report.changed, report.removed) == (1, 1, 1)
        assert _top(app, "borrow checker lifetimes")[0][0] == "notes/rust.md"
        assert "notes/python.md" not in {p for p, _, _ in _top(app, "python generators")}
        assert _top(app, "部屋")[0][0] == "notes/new.md"
        clean = open_kb(self.kb(request, tmp_path / "clean", _files(kb)))
        assert _content(app) == _content(clean)
        status = kb_status(app)
        assert status["indexed"] and status["documents"] == len(BILINGUAL)
        assert status["backend"] == app.backend.name and not status["incomplete"]
        assert status["stale"] == 0
        got = _document(app, "notes/new.md")
        assert got["indexed"] is True and got["title"] == "新しいノート"

    def test_exclusions_and_filters(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        assert not any("tokio" in c for _, _, c in _top(app, "rust -tokio"))
        assert {p for p, _, _ in _top(app, "検索", path="notes/*")} <= {
            f"notes/{n}.md" for n in ("ja", "vue", "rust", "python")
        }
        assert {p for p, _, _ in _top(app, "検索", path="guide")} <= {
            "guide/install.md",
            "guide/search.md",
        }
        assert {p for p, _, _ in _top(app, "notes", tags=("lang",))} == {"notes/rust.md"}
        assert _top(app, "検索", tags=("missing",)) == []

    def test_lexical_methods_take_phrases_and_terms(self, request: Any, tmp_path: Path) -> None:
        # The built-in lexical legs' indexes, as the backend keeps them (leg_index).
        app = open_kb(self.kb(request, tmp_path / "kb"))
        store = app.store
        fts, word = store.leg_index("fts"), store.leg_index("word")
        assert fts is not None and word is not None, "the built-in legs' indexes are kept"
        assert store.leg_index("no_such_leg") is None
        ranked = fts.search(["rust"], self.WEIGHTS, 50)
        assert {cid for cid, _ in ranked} == _chunks_holding(store, "rust")
        assert ranked == sorted(ranked, key=lambda r: (r[1], r[0]))  # best first, ties by id
        # A phrase is matched whole, case and diacritics folded, NFKC-normalised.
        assert {cid for cid, _ in fts.search(["CAFE"], self.WEIGHTS, 50)} == (
            _chunks_holding(store, "café")
        )
        assert {cid for cid, _ in fts.search(["full-width"], self.WEIGHTS, 50)} == (
            _chunks_holding(store, "ｆｕｌｌ－ｗｉｄｔｈ")
        )
        assert fts.search(["rust ownership rules"], self.WEIGHTS, 50)
        assert fts.search(["ownership rust"], self.WEIGHTS, 50) == []
        tokio = fts.ids(["tokio"])
        assert tokio and tokio == _chunks_holding(store, "tokio")
        assert fts.ids(["tokio", "generators"]) == tokio | _chunks_holding(store, "generators")
        kept = fts.search(["rust"], self.WEIGHTS, 50, excluded=["tokio"])
        assert {cid for cid, _ in kept} == _chunks_holding(store, "rust") - tokio
        only = frozenset(sorted(_chunks_holding(store, "rust"))[:1])
        assert [cid for cid, _ in fts.search(["rust"], self.WEIGHTS, 50, only)] == [*only]
        assert fts.search(["rust"], self.WEIGHTS, 1) == ranked[:1]
        # The word leg's terms: a token, or tokens that stand side by side.
        found = word.search(["状態"], self.WEIGHTS, 50)
        assert {cid for cid, _ in found} == _chunks_holding(store, "状態")
        assert word.search(["状態 態管"], self.WEIGHTS, 50)  # 状態管理, as bigrams
        assert word.search(["態管 状態"], self.WEIGHTS, 50) == []
        counts, total = word.rows(["状態", "状態 態管"])
        assert counts == {"状態": len(_chunks_holding(store, "状態"))}
        assert total == store.counts()["chunks"]
        assert fts.search([], self.WEIGHTS, 50) == [] and word.search([], self.WEIGHTS, 50) == []
        assert fts.ids([]) == frozenset()
        every = store.chunk_ids_for_docs(d.doc_id for d in store.documents())
        assert fts.chunk_ids() == word.chunk_ids() == every

    def test_unknown_ids_and_paths_are_left_out(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        store = app.store
        assert store.chunk_rows([10**9]) == {}
        assert store.embeddings([10**9]) == {}
        assert store.document_chunks(10**9) == []
        assert store.links_of("nowhere.md", 10) is None
        assert store.file_states(["nowhere.md"]) == {}
        assert store.incomplete() is None
        assert store.counts()["documents"] == len(BILINGUAL)

    def test_merged_sections_keep_their_headings(self, request: Any, tmp_path: Path) -> None:
        text = "# Guide\n\nIntro text.\n\n## Sync\n\nSync notes.\n\n### Cost\n\nFree.\n"
        app = open_kb(self.kb(request, tmp_path / "kb", {"guide.md": text}))
        store = app.store
        (doc,) = store.documents()
        (chunk,) = store.document_chunks(doc.doc_id)
        expected = (
            Subsection(5, 2, "Sync", ("Guide", "Sync"), offset=22),
            Subsection(9, 3, "Cost", ("Guide", "Sync", "Cost"), offset=44),
        )
        assert chunk.sections == expected
        assert store.chunk_rows([chunk.chunk_id])[chunk.chunk_id].sections == expected
        (hit,) = app.search("free", limit=1).results
        assert hit.heading_path == ("Guide", "Sync", "Cost")

    def test_documents_are_listed_a_page_at_a_time(self, request: Any, tmp_path: Path) -> None:
        files = {"b.md": "# B\n\nb\n", "a.md": "# A\n\na\n", "Z.md": "# Z\n\nz\n",
                 "é.md": "# E\n\ne\n", "d/c.md": "# C\n\nc\n"}  # fmt: skip
        store = open_kb(self.kb(request, tmp_path / "kb", files)).store
        every = store.documents()
        paths = [d.path for d in every]
        assert paths == sorted(files)  # code point order: "Z" before "a", "é" last
        assert store.documents(limit=2) == every[:2]
        assert store.documents(after="a.md", limit=2) == every[2:4]
        assert store.documents(after="b", limit=10) == every[2:]  # a path not indexed
        assert store.documents(after="é.md") == []
        assert store.documents(after="", limit=0) == []
        try:
            store.documents(limit=-1)
        except ValueError as err:
            assert "limit must be 0 or more" in str(err)
        else:
            raise AssertionError("a negative limit was taken")

    def test_rebuild_and_reembed_swap_in_a_whole_index(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        before = _content(app)
        reader = app.store  # a connection opened before the rebuild
        rebuilt = Groove.open(app.kb).index(rebuild=True)
        assert rebuilt.added == len(BILINGUAL)
        assert not app.backend.current(reader)  # it reads the replaced index: reopened
        assert app.store is not reader
        assert _content(app) == before
        assert _top(app, "再ランキングの評価")[0][0] == "notes/ja.md"
        reembedded = Groove.open(app.kb).index(reembed=True)
        assert reembedded.chunks_embedded >= len(before)
        from groove_core.embedding import EMBEDDING_TEXT_KEY, EMBEDDING_TEXT_RULES

        assert app.store.get_meta(EMBEDDING_TEXT_KEY) == EMBEDDING_TEXT_RULES
        assert _content(app) == before
        assert _top(app, "rust ownership")[0][0] == "notes/rust.md"
        assert app.doctor().healthy

    def test_text_in_capitals_is_embedded_lower_cased(self, request: Any, tmp_path: Path) -> None:
        from groove_core.embedding import EMBEDDING_TEXT_KEY, EMBEDDING_TEXT_RULES
        from groove_core.status import kb_status
        from groove_core.vector_pass import embed_pending

        caps = "# MEETING MINUTES\n\nTHE COMMITTEE APPROVED THE LIBRARY BUDGET FOR NEXT YEAR.\n"
        app = open_kb(self.kb(request, tmp_path / "kb", {**BILINGUAL, "caps.md": caps}))
        assert app.store.get_meta(EMBEDDING_TEXT_KEY) == EMBEDDING_TEXT_RULES
        (chunk,) = _chunks_holding(app.store, "COMMITTEE APPROVED")
        row = app.store.chunk_rows([chunk])[chunk]
        lowered = f"{row.context}\n{row.content}".lower()
        # What the vector pass hands the embedder for it (a case-blind test embedder
        # cannot tell from the vector): the text, lower-cased
        embedder, seen = app.embedder, []

        class Recording:
            identity, dim = embedder.identity, embedder.dim

            def embed_documents(self, texts: Any) -> Any:
                seen.extend(texts)
                return embedder.embed_documents(texts)

            def embed_query(self, text: str) -> Any:
                return embedder.embed_query(text)

        assert app.store.requeue_vectors([]) == 0
        assert app.store.requeue_vectors([chunk]) == 1
        assert app.store.pending_vectors() == 1 and chunk not in app.store.embeddings([chunk])
        assert app.store.requeue_vectors([chunk]) == 0  # it has no vector to drop now
        embed_pending(app.store, Recording(), 8)
        assert seen == [lowered] and app.store.pending_vectors() == 0
        # An index embedded under the earlier rules: its next run embeds that chunk again
        app.store.set_meta(EMBEDDING_TEXT_KEY, "1")
        assert "capitals" in (kb_status(app)["embedding_note"] or "")
        report = Groove.open(app.kb).index()
        assert report.chunks_embedded == 1 and report.unchanged == len(BILINGUAL) + 1
        assert any("1 chunk is written in capitals" in note for note in report.notes)
        assert chunk in app.store.embeddings([chunk])
        assert app.store.get_meta(EMBEDDING_TEXT_KEY) == EMBEDDING_TEXT_RULES
        assert Groove.open(app.kb).index().chunks_embedded == 0  # once
        assert kb_status(app)["embedding_note"] is None
        assert app.doctor().healthy

    def test_doctor_healthy_and_repair(self, request: Any, tmp_path: Path) -> None:
        app = open_kb(self.kb(request, tmp_path / "kb"))
        result = app.doctor()
        assert result.healthy, result.problems
        repaired = app.doctor(repair=True)
        assert repaired.healthy and not repaired.reindexed

    def test_a_missing_index_is_said(self, request: Any, tmp_path: Path) -> None:
        from groove_core.status import kb_status

        app = Groove.open(self.kb(request, tmp_path / "kb"))
        assert not app.backend.exists()
        assert kb_status(app)["indexed"] is False
        try:
            app.search("rust")
        except StoreError as err:
            assert "run 'groove index'" in str(err), err
        else:
            raise AssertionError("a search without an index did not fail")
        assert _document(app, "notes/rust.md")["indexed"] is False
