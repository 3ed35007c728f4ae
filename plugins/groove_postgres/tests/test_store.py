"""PostgresStore against a real PostgreSQL 18: schema, round trip, bm25 parity with the
SQLite FTS5 leg, KNN against brute force, statistics on delete, KB isolation, the locale
check and the index-run lock."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, LiteralString

import numpy as np
import pytest
from groove_postgres import wordleg
from groove_postgres.settings import PostgresSettings
from groove_postgres.store import (
    SCHEMA_VERSION,
    WORD_RULES_KEY,
    PostgresStore,
    PostgresStoreError,
    word_rules,
)
from groove_postgres.testing import EmbeddedPostgres

from groove_core import words
from groove_core.chunking import Chunk
from groove_core.links import RawLink
from groove_core.query import parse_query
from groove_core.rows import ChunkRow
from groove_core.sqlite.store import Store
from groove_core.storage import EmbedderMismatchError, NewDocument

DIM = 8


def chunk(ordinal: int, heading: str, content: str, context: str = "") -> Chunk:
    return Chunk(
        ordinal=ordinal,
        heading=heading,
        heading_path=(heading,) if heading else (),
        level=1 if heading else 0,
        context=context or heading,
        content=content,
        token_count=len(content) // 4,
        byte_start=ordinal * 100,
        byte_end=ordinal * 100 + len(content.encode()),
        line_start=ordinal * 10 + 1,
        line_end=ordinal * 10 + 5,
    )


def document(
    path: str, sections: list[tuple[str, str]], tags: tuple[str, ...] = (), title: str = ""
) -> NewDocument:
    chunks = tuple(chunk(n, h, c, f"{title or path} > {h}") for n, (h, c) in enumerate(sections))
    digest = hashlib.sha256(repr(sections).encode()).hexdigest()
    return NewDocument(
        path=path,
        title=title or path,
        tags=tags,
        content_hash=digest,
        size=sum(len(c) for _, c in sections),
        mtime_ns=1_700_000_000_000_000_000,
        chunks=chunks,
        links=(RawLink("link", "other.md", 1),),
    )


def vectors_for(docs: list[NewDocument], seed: int = 0) -> np.ndarray:
    rows = sum(len(d.chunks) for d in docs)
    return np.random.default_rng(seed).standard_normal((rows, DIM)).astype(np.float32)


#: A small bilingual corpus: the lexical tests rank it in both stores.
CORPUS = [
    document(
        "ja/nihongo.md",
        [
            ("日本語の文章", "日本語の文章を検索するには、文字の三つ組みで索引を作ります。"),
            (
                "状態管理",
                "状態管理のライブラリは、アプリの状態を一か所にまとめます。状態の変更は追跡できます。",
            ),
            ("", "東京は日本の首都です。日本語を話す人が多い。"),
        ],
        tags=("Japanese", "notes"),
        title="日本語メモ",
    ),
    document(
        "ja/vue.md",
        [
            (
                "算出プロパティ",
                "算出プロパティはリアクティブな状態から値を計算します。キャッシュされます。",
            ),
            ("ウォッチャー", "ウォッチャーは状態の変化に応じて副作用を実行します。"),
        ],
        tags=("vue",),
    ),
    document(
        "en/search.md",
        [
            (
                "Vector search",
                "Vector search finds chunks by embedding distance. Search, search, search.",
            ),
            ("Lexical search", "Trigram matching finds words and phrases; bm25 ranks the matches."),
            ("Banana", "A banana has a peel. Bananas and ananas: ananana anana ananas."),
        ],
        tags=("search", "Notes"),
    ),
    document(
        "en/cooking.md",
        [
            ("Recipes", "Cook the rice, then the vegetables. A search for flavour never ends."),
            ("ＦＵＬＬ　ＷＩＤＴＨ", "Ｆｕｌｌ－ｗｉｄｔｈ text and Café, naïve résumé."),
        ],
    ),
]


def fts(store: Any) -> Any:
    """The trigram leg's index of a PostgreSQL or SQLite store."""
    index = store.leg_index("fts")
    assert index is not None
    return index


def word(store: Any) -> Any:
    """The word leg's index of a PostgreSQL or SQLite store."""
    index = store.leg_index("word")
    assert index is not None
    return index


def open_store(dsn: str, kb: str = "kb", **settings: object) -> PostgresStore:
    return PostgresStore.create(PostgresSettings(dsn=dsn, **settings), kb)


@contextmanager
def bound_stores(dsn: str, *kbs: str) -> Iterator[list[PostgresStore]]:
    """A store for each of ``kbs`` in one database, bound to the test embedder; closed
    on leaving."""
    stores = [open_store(dsn, kb=kb) for kb in kbs]
    try:
        for store in stores:
            store.bind_embedder("test", DIM)
        yield stores
    finally:
        for store in stores:
            store.close()


def sqlite_store(tmp_path: Path, docs: list[NewDocument]) -> Store:
    store = Store.create(tmp_path / "index.sqlite")
    store.bind_embedder("test", DIM)
    store.write_documents(docs, vectors_for(docs))
    return store


def key_of(rows: dict[int, ChunkRow], cid: int) -> tuple[str, int]:
    return rows[cid].path, rows[cid].ordinal


# -- schema and round trip -------------------------------------------------------------------


def test_schema_and_extensions_are_created(postgres_dsn: str) -> None:
    with closing(open_store(postgres_dsn)) as store:
        with store._conn() as conn:
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'groove'"
                ).fetchall()
            }
            extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
            version = conn.execute("SELECT value FROM groove.info").fetchone()
        assert {"kbs", "meta", "documents", "doc_tags", "chunks", "vectors", "trigram_df"} <= tables
        assert {"vector", "pg_trgm"} <= extensions
        assert version == (str(SCHEMA_VERSION),)
    # Opening again (search side) finds the KB; an unknown KB is refused clearly.
    PostgresStore.open(PostgresSettings(dsn=postgres_dsn), "kb").close()
    with pytest.raises(PostgresStoreError, match="run 'groove index'"):
        PostgresStore.open(PostgresSettings(dsn=postgres_dsn), "other")


def test_write_read_round_trip_matches_sqlite(postgres_dsn: str, tmp_path: Path) -> None:
    docs = CORPUS
    lite = sqlite_store(tmp_path, docs)
    pg = open_store(postgres_dsn)
    try:
        pg.bind_embedder("test", DIM)
        pg.write_documents(docs, vectors_for(docs))
        assert pg.counts() == lite.counts() == {"documents": 4, "chunks": 10}
        assert pg.embedder_identity() == ("test", DIM)
        pg_states, lite_states = pg.doc_states(), lite.doc_states()
        assert pg_states.keys() == lite_states.keys()
        for path, state in pg_states.items():
            assert (state.content_hash, state.size, state.mtime_ns) == (
                lite_states[path].content_hash,
                lite_states[path].size,
                lite_states[path].mtime_ns,
            )

        def by_key(store: Any) -> dict[tuple[str, int], dict[str, Any]]:
            ids = store.chunk_ids_for_docs([s.id for s in store.doc_states().values()])
            rows = store.chunk_rows(sorted(ids))
            out = {}
            for row in rows.values():
                item = {k: v for k, v in asdict(row).items() if k not in ("chunk_id", "doc_id")}
                out[(row.path, row.ordinal)] = item
            return out

        assert by_key(pg) == by_key(lite)
        pg_docs = [
            {k: v for k, v in asdict(d).items() if k not in ("doc_id", "indexed_at")}
            for d in pg.documents()
        ]
        lite_docs = [
            {k: v for k, v in asdict(d).items() if k not in ("doc_id", "indexed_at")}
            for d in lite.documents()
        ]
        assert pg_docs == lite_docs

        doc_id = pg_states["en/search.md"].id
        chunks = pg.document_chunks(doc_id)
        assert [c.ordinal for c in chunks] == [0, 1, 2]
        assert chunks[0].heading == "Vector search"
        assert chunks == lite.document_chunks(doc_id) or [
            (c.ordinal, c.heading, c.heading_path, c.content) for c in chunks
        ] == [
            (c.ordinal, c.heading, c.heading_path, c.content)
            for c in lite.document_chunks(lite_states["en/search.md"].id)
        ]
        assert pg.file_states(["en/search.md", "missing.md"]) == {
            "en/search.md": (pg_states["en/search.md"].size, pg_states["en/search.md"].mtime_ns)
        }
        # Tags: every given tag, case-insensitively (SQLite's NOCASE).
        assert pg.doc_ids_with_tags(["notes"]) == {
            pg_states["ja/nihongo.md"].id,
            pg_states["en/search.md"].id,
        }
        assert pg.doc_ids_with_tags(["NOTES", "search"]) == {pg_states["en/search.md"].id}
        assert pg.doc_ids_with_tags(["vue", "search"]) == frozenset()
        # Stored vectors come back as written.
        ids = sorted(pg.chunk_ids_for_docs([doc_id]))
        got = pg.embeddings(ids)
        expected = vectors_for(docs)[5:8]  # en/search.md: after 3 + 2 chunks
        for n, cid in enumerate(ids):
            np.testing.assert_array_equal(got[cid], expected[n])

        pg.touch_documents([("en/search.md", 1, 2)])
        assert pg.file_states(["en/search.md"]) == {"en/search.md": (1, 2)}
        # Run markers.
        assert pg.incomplete() is None
        pg.begin_run()  # not empty: no mark
        assert pg.incomplete() is None
        pg.end_run()
        assert pg.last_indexed() is not None
        with pytest.raises(EmbedderMismatchError, match="re-embed"):
            pg.check_embedder("another")
    finally:
        pg.close()
        lite.close()


def test_begin_run_on_an_empty_index_marks_it_incomplete(postgres_dsn: str) -> None:
    with closing(open_store(postgres_dsn)) as store:
        store.begin_run()
        assert "incomplete" in (store.incomplete() or "")
        store.end_run()
        assert store.incomplete() is None


# -- the lexical leg -----------------------------------------------------------------------------

QUERIES = [
    "日本語の文章",
    "状態管理",
    "状態",  # under 3 characters: glued, or verbatim
    "プロパティ 状態",
    "vector search",
    "search -vector",
    '"bm25 ranks"',
    "anana",  # self-overlapping: occurrences overlap
    "ananas banana",
    "cafe resume",  # diacritics folded
    "ANA nas",  # inside several words (folded); under 3 characters
    "bm25 search -flavour",  # digits; an exclusion of a row a Latin phrase matches
    '"search, search"',  # punctuation: counted in the text
    "full width",  # NFKC: full-width text in the note
    "search 日本語",
    "状態 -ウォッチャー",
]


@pytest.mark.parametrize("weights", [(2.0, 1.0, 1.0), (1.0, 1.0, 1.0), (5.0, 0.5, 2.0)])
def test_bm25_ranks_as_the_sqlite_fts5_leg(
    postgres_dsn: str, tmp_path: Path, weights: tuple[float, float, float]
) -> None:
    lite = sqlite_store(tmp_path, CORPUS)
    pg = open_store(postgres_dsn)
    try:
        pg.bind_embedder("test", DIM)
        pg.write_documents(CORPUS, vectors_for(CORPUS))
        lite_rows = lite.chunk_rows(sorted(lite.chunk_ids_for_docs(range(1, 10))))
        pg_all = pg.chunk_ids_for_docs([s.id for s in pg.doc_states().values()])
        pg_rows = pg.chunk_rows(sorted(pg_all))
        matched = 0
        for text in QUERIES:
            query = parse_query(text)
            if query.match_expr is None:
                continue
            expected = [
                (key_of(lite_rows, cid), score)
                for cid, score in fts(lite).search(
                    query.positives, weights, 50, excluded=query.negatives
                )
            ]
            got = [
                (key_of(pg_rows, cid), score)
                for cid, score in fts(pg).search(
                    query.positives, weights, 50, excluded=query.negatives
                )
            ]
            assert [k for k, _ in got] == [k for k, _ in expected], text
            for (_, a), (_, b) in zip(got, expected, strict=True):
                assert a == pytest.approx(b, rel=1e-9, abs=1e-12), text
            matched += bool(expected)
            # The exclusion scan agrees too.
            if query.negatives:
                lite_ids = {key_of(lite_rows, i) for i in fts(lite).ids(query.negatives)}
                pg_ids = {key_of(pg_rows, i) for i in fts(pg).ids(query.negatives)}
                assert pg_ids == lite_ids, text
        assert matched >= 10
        # A filter (allowed ids) keeps the whole-KB IDF, as FTS5 does.
        query = parse_query("search")
        keep = {cid for cid, row in pg_rows.items() if row.path == "en/cooking.md"}
        lite_keep = {cid for cid, row in lite_rows.items() if row.path == "en/cooking.md"}
        got_f = fts(pg).search(query.positives, weights, 10, frozenset(keep))
        exp_f = fts(lite).search(query.positives, weights, 10, frozenset(lite_keep))
        assert [key_of(pg_rows, c) for c, _ in got_f] == [key_of(lite_rows, c) for c, _ in exp_f]
        assert [s for _, s in got_f] == pytest.approx([s for _, s in exp_f], rel=1e-9)
        # The common-phrase rule's counts: the same as FTS5's vocabulary.
        grams = ["sea", "日本語", "状態の", "zzz"]
        assert fts(pg).rows(grams) == fts(lite).rows(grams)
    finally:
        pg.close()
        lite.close()


def test_lexical_search_uses_the_trigram_index(postgres_dsn: str) -> None:
    with closing(open_store(postgres_dsn)) as store:
        with store._conn() as conn:
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN SELECT id FROM groove.chunks WHERE "
                    "(heading_n || E'\\x1f' || context_n || E'\\x1f' || content_n) LIKE '%日本語%'"
                )
            )
        assert "chunks_trgm" in plan


# -- the vector leg ------------------------------------------------------------------------------


def test_vector_search_equals_brute_force(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(7)
    docs = [
        document(f"d{n:03}.md", [(f"h{n}-{i}", f"text {n} {i}") for i in range(4)])
        for n in range(60)
    ]
    vectors = rng.standard_normal((240, DIM)).astype(np.float32)
    with closing(open_store(postgres_dsn, ef_search=64)) as store:
        store.bind_embedder("test", DIM)
        store.write_documents(docs, vectors)
        ids = sorted(store.chunk_ids_for_docs([s.id for s in store.doc_states().values()]))
        # Chunk ids are assigned in write order: row n of ``vectors`` is ids[n].
        stored = np.stack([store.embeddings(ids)[i] for i in ids])
        np.testing.assert_array_equal(stored, vectors)

        def brute(q: np.ndarray, k: int, allowed: set[int] | None = None) -> list[int]:
            dist = np.linalg.norm(vectors - q, axis=1)
            order = sorted(range(len(ids)), key=lambda n: (dist[n], ids[n]))
            return [ids[n] for n in order if allowed is None or ids[n] in allowed][:k]

        for _ in range(5):
            q = rng.standard_normal(DIM).astype(np.float32)
            got = store.vector_search(q, 10)
            assert [c for c, _ in got] == brute(q, 10)
            dist = {ids[n]: float(np.linalg.norm(vectors[n] - q)) for n in range(len(ids))}
            for cid, d in got:
                assert d == pytest.approx(dist[cid], rel=1e-5)
            allowed = set(ids[::3])
            got_f = store.vector_search(q, 10, frozenset(allowed))
            assert [c for c, _ in got_f] == brute(q, 10, allowed)
            # The HNSW path with an iterative scan gives the same on this small set.
            monkeypatch.setattr("groove_postgres.store.EXACT_KNN_MAX_ROWS", 0)
            got_h = store.vector_search(q, 10, frozenset(allowed))
            monkeypatch.undo()
            assert [c for c, _ in got_h] == brute(q, 10, allowed)
        with store._conn() as conn:
            indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes")}
        assert f"vectors_hnsw_{store.kb_id}" in indexes


# -- statistics under writes and deletes -----------------------------------------------------


def test_delete_and_rewrite_keep_the_bm25_statistics_right(postgres_dsn: str) -> None:
    with bound_stores(postgres_dsn, "full", "only") as (full, only):
        full.write_documents(CORPUS, vectors_for(CORPUS))
        changed = document(
            "en/search.md", [("Vector search", "Rewritten: nothing about trigrams.")]
        )
        full.write_documents([changed], vectors_for([changed]))
        full.delete_documents(["ja/vue.md", "never-indexed.md"])
        # A KB that was given only the surviving documents holds the same statistics.
        kept = [CORPUS[0], changed, CORPUS[3]]
        only.write_documents(kept, vectors_for(kept))
        assert full.lexical_stats() == only.lexical_stats()
        # The word postings follow the rows: those of deleted and rewritten chunks are gone.
        with full._conn() as conn:
            counted = conn.execute(
                f"SELECT * FROM ({full.counted_postings()}) p ORDER BY term, chunk_id",
                (full.kb_id,),
            ).fetchall()
        assert counted and _postings(full) == counted
        stats = full.lexical_stats()
        assert stats["nrow"] == full.counts()["chunks"] == 6
        assert "ウォッ" not in stats["df"]
        # Deleting everything leaves nothing behind.
        full.delete_documents([d.path for d in kept])
        assert full.lexical_stats() == {"nrow": 0, "ntok": 0, "wtok": 0, "df": {}, "wdf": {}}
        assert full.counts() == {"documents": 0, "chunks": 0}
        assert _postings(full) == []
        with full._conn() as conn:
            left = conn.execute(
                "SELECT (SELECT count(*) FROM groove.vectors WHERE kb = %s), "
                "(SELECT count(*) FROM groove.links WHERE kb = %s), "
                "(SELECT count(*) FROM groove.doc_tags WHERE kb = %s)",
                (full.kb_id, full.kb_id, full.kb_id),
            ).fetchone()
        assert left == (0, 0, 0)


def test_a_filling_build_writes_its_document_frequencies_once_at_the_end(
    postgres_dsn: str,
) -> None:
    """With ``defer_statistics`` (a build filling a KB), the frequencies wait in memory
    under a meta mark and end up as every transaction's own upserts would have left them;
    a run that lost them (killed) leaves the mark, and ``recover_statistics`` recounts."""
    changed = document("en/search.md", [("Vector search", "Rewritten: nothing about trigrams.")])
    with bound_stores(postgres_dsn, "eager", "filling", "lost") as (eager, filling, lost):
        filling.defer_statistics = lost.defer_statistics = True
        for store in (eager, filling, lost):
            store.begin_run()
            store.write_documents(CORPUS[:2], vectors_for(CORPUS[:2]))
            store.write_documents(CORPUS[2:], vectors_for(CORPUS[2:]))
            store.write_documents([changed], vectors_for([changed]))
            store.delete_documents(["ja/vue.md"])
        # Until the end, only the totals are written, and the mark says so.
        assert filling.get_meta("df_pending") is not None
        assert filling.lexical_stats()["df"] == {}
        assert filling.lexical_stats()["nrow"] == eager.lexical_stats()["nrow"]
        filling.end_run()
        eager.end_run()
        assert filling.get_meta("df_pending") is None
        assert filling.lexical_stats() == eager.lexical_stats()
        filling.finish_statistics()  # nothing left: written once only
        assert filling.lexical_stats() == eager.lexical_stats()
        # A run killed before its end: the sum in memory is gone, the mark stays.
        lost._run_df = None
        assert lost.get_meta("df_pending") is not None
        assert lost.recover_statistics()
        assert lost.get_meta("df_pending") is None
        assert lost.lexical_stats() == eager.lexical_stats()
        assert not lost.recover_statistics()


def test_two_kbs_in_one_database_do_not_see_each_other(postgres_dsn: str) -> None:
    with bound_stores(postgres_dsn, "a", "b") as (a, b):
        a.write_documents(CORPUS[:2], vectors_for(CORPUS[:2]))
        same_path = document("ja/nihongo.md", [("English", "Only English words in this KB.")])
        b.write_documents([same_path], vectors_for([same_path], seed=1))
        assert a.counts() == {"documents": 2, "chunks": 5}
        assert b.counts() == {"documents": 1, "chunks": 1}
        phrases = parse_query("日本語の文章").positives
        assert fts(a).search(phrases, (2.0, 1.0, 1.0), 10)
        assert fts(b).search(phrases, (2.0, 1.0, 1.0), 10) == []
        assert fts(b).ids(phrases) == frozenset()
        b_ids = b.chunk_ids_for_docs([s.id for s in b.doc_states().values()])
        hits = b.vector_search(np.ones(DIM, dtype=np.float32), 10)
        assert {c for c, _ in hits} == b_ids
        a_doc = a.doc_states()["ja/nihongo.md"].id
        assert b.chunk_rows(sorted(a.chunk_ids_for_docs([a_doc]))) == {}
        assert b.doc_ids_with_tags(["japanese"]) == frozenset()
        assert fts(b).rows(["日本語"]) == ({"日本語": 0}, 1)
        b.delete_documents(["ja/nihongo.md"])
        assert a.counts() == {"documents": 2, "chunks": 5}
        # Each KB has its own embedder (and HNSW index of its own dimension).
        c = open_store(postgres_dsn, kb="c")
        try:
            c.bind_embedder("wide", DIM * 2)
            wide = document("w.md", [("w", "wide vectors")])
            c.write_documents([wide], np.ones((1, DIM * 2), dtype=np.float32))
            assert len(c.vector_search(np.ones(DIM * 2, dtype=np.float32), 5)) == 1
            assert a.embedder_identity() == ("test", DIM)
        finally:
            c.close()


# -- connect-time checks ---------------------------------------------------------------------


def test_a_c_locale_database_is_refused(postgres_server: EmbeddedPostgres) -> None:
    name = "c_locale"
    dsn = postgres_server.create_database(
        name, "TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER libc LC_COLLATE 'C' LC_CTYPE 'C'"
    )
    try:
        with pytest.raises(PostgresStoreError) as caught:
            open_store(dsn)
        message = str(caught.value)
        assert "pg_trgm extracts no trigrams" in message
        assert "'C'" in message and "C.UTF-8" in message
        assert "\n" not in message
    finally:
        postgres_server.drop_database(name)


def test_an_old_schema_version_is_refused(postgres_dsn: str) -> None:
    open_store(postgres_dsn).close()
    import psycopg

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("UPDATE groove.info SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(PostgresStoreError, match="version 99, newer"):
        open_store(postgres_dsn)


# -- the index-run lock --------------------------------------------------------------------------


def test_the_run_lock_serialises_two_writers(postgres_dsn: str) -> None:
    first = open_store(postgres_dsn)
    second = open_store(postgres_dsn)
    other_kb = open_store(postgres_dsn, kb="elsewhere")
    events: list[str] = []
    holding = threading.Event()
    try:
        with first.run_lock():
            with second.run_lock(wait=False) as got:
                assert got is False
            with other_kb.run_lock(wait=False) as got:
                assert got is True  # another KB's runs do not queue behind this one

            def run() -> None:
                holding.set()
                with second.run_lock():
                    events.append("second acquired")

            thread = threading.Thread(target=run)
            thread.start()
            holding.wait(5)
            time.sleep(0.3)
            events.append("first releases")
        thread.join(10)
        assert events == ["first releases", "second acquired"]
    finally:
        first.close()
        second.close()
        other_kb.close()


def test_concurrent_write_transactions_of_one_kb_keep_the_statistics(postgres_dsn: str) -> None:
    stores = [open_store(postgres_dsn) for _ in range(2)]
    try:
        stores[0].bind_embedder("test", DIM)
        errors: list[BaseException] = []

        def write(store: PostgresStore, start: int) -> None:
            try:
                for n in range(start, start + 10):
                    doc = document(f"c{n}.md", [("h", f"common words and 固有{n}")])
                    store.write_documents([doc], vectors_for([doc]))
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=write, args=(s, i * 10)) for i, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        stats = stores[0].lexical_stats()
        assert stats["nrow"] == 20
        assert stats["df"]["com"] == 20
    finally:
        for s in stores:
            s.close()


def _empty_chunk_columns(store: PostgresStore, columns: LiteralString) -> None:
    """Set ``columns`` (an SQL SET list) in every chunk of the store's KB: a search that
    reads what it needs from elsewhere gives the same answer without them."""
    with store.transaction() as conn:
        conn.execute("UPDATE groove.chunks SET " + columns + " WHERE kb = %s", (store.kb_id,))


WORD_TERMS = (["search"], ["状態", "管理"], ["match", "find"], ["banana"], ["状態 態管"])


def test_one_token_word_terms_are_scored_from_postings_not_the_text(postgres_dsn: str) -> None:
    """The word leg reads a one-token term's counts from the postings kept at write time:
    with the chunks' word columns and token arrays emptied, the scores are unchanged. A
    phrase of tokens (a quoted part) is still checked in the text: it no longer matches."""
    weights = (2.0, 1.0, 1.0)
    with bound_stores(postgres_dsn, "kb") as (store,):
        store.write_documents(CORPUS, vectors_for(CORPUS))
        before = {t: word(store).search(list(t), weights, 50) for t in map(tuple, WORD_TERMS)}
        assert all(before.values())
        _empty_chunk_columns(store, "heading_w = '', context_w = '', content_w = '', wterms = '{}'")
        for terms, ranked in before.items():
            if any(" " in t for t in terms):
                assert word(store).search(list(terms), weights, 50) == [], terms
            else:
                assert word(store).search(list(terms), weights, 50) == ranked, terms


SURFACE_PHRASES = (["search"], ["anana"], ["ana", "vector"], ["bm25", "words"], ["cafe"])


def test_latin_phrases_are_scored_from_surface_postings_not_the_text(
    postgres_dsn: str,
) -> None:
    """The trigram leg counts a phrase of Latin letters and digits from the surface words'
    postings kept at write time: with the chunks' folded columns emptied, the scores are
    unchanged (exclusions included). A phrase with other characters is still counted in
    the text: it no longer matches."""
    weights = (2.0, 1.0, 1.0)
    with bound_stores(postgres_dsn, "kb") as (store,):
        store.write_documents(CORPUS, vectors_for(CORPUS))
        before = {t: fts(store).search(list(t), weights, 50) for t in map(tuple, SURFACE_PHRASES)}
        assert all(before.values())
        excluded = fts(store).search(["search"], weights, 50, excluded=["vector"])
        assert 0 < len(excluded) < len(before[("search",)])
        assert fts(store).search(["状態"], weights, 50)
        _empty_chunk_columns(store, "heading_n = '', context_n = '', content_n = ''")
        for phrases, ranked in before.items():
            assert fts(store).search(list(phrases), weights, 50) == ranked, phrases
        assert fts(store).search(["状態"], weights, 50) == []
        # An exclusion is checked in each matching chunk's text: emptied, it excludes none.
        assert (
            fts(store).search(["search"], weights, 50, excluded=["vector"]) == before[("search",)]
        )


def test_the_surface_vocabulary_holds_the_words_of_the_chunks(postgres_dsn: str) -> None:
    """The trigram leg's vocabulary gains a document's surface words with it and loses
    those no other chunk holds when it goes (rewritten or deleted)."""

    def vocabulary(store: PostgresStore) -> set[str]:
        with store._conn() as conn:
            return {
                r[0]
                for r in conn.execute(
                    "SELECT term FROM groove.surface_terms WHERE kb = %s", (store.kb_id,)
                ).fetchall()
            }

    def posted(store: PostgresStore) -> set[str]:
        return {t[1:] for t, *_ in _postings(store) if t.startswith("\x1f")}

    with bound_stores(postgres_dsn, "kb") as (store,):
        store.write_documents(CORPUS, vectors_for(CORPUS))
        assert {"bm25", "search", "banana", "cafe", "width"} <= vocabulary(store)
        assert vocabulary(store) == posted(store)
        store.delete_documents(["en/search.md"])
        rewritten = document("en/cooking.md", [("Recipes", "Rice and a banana.")])
        store.write_documents([rewritten], vectors_for([rewritten]))
        found = vocabulary(store)
        assert found == posted(store)
        assert "banana" in found and "rice" in found
        assert not found & {"bm25", "search", "vector", "cafe", "width"}
        assert fts(store).search(["search"], (2.0, 1.0, 1.0), 10) == []


def _postings(store: PostgresStore) -> list[tuple[Any, ...]]:
    with store._conn() as conn:
        return conn.execute(
            "SELECT term, chunk_id, h, x, c, len FROM groove.word_tf WHERE kb = %s "
            "ORDER BY term, chunk_id",
            (store.kb_id,),
        ).fetchall()


def test_a_kb_written_without_word_postings_gets_them_on_open(postgres_dsn: str) -> None:
    """A database of a groove-postgres before the postings (no ``word_tf`` nor
    ``surface_terms``, the bare word rules recorded), a KB such a version wrote again after
    this one filled them, or one written with the word leg's postings alone (version 1):
    open fills them from the stored columns, the vectors kept (no re-embedding), and both
    lexical legs rank as in a KB written with them."""
    weights = (2.0, 1.0, 1.0)
    with bound_stores(postgres_dsn, "fresh", "old") as (fresh, old):
        for store in (fresh, old):
            store.write_documents(CORPUS, vectors_for(CORPUS))
        written = _postings(old)
        assert written and all(h + x + c > 0 for _, _, h, x, c, _ in written)
        ids = sorted(old.chunk_ids_for_docs(s.id for s in old.doc_states().values()))
        vectors = old.embeddings(ids)
        want = {t: word(fresh).search(list(t), weights, 50) for t in map(tuple, WORD_TERMS)}
        fresh_rows = fresh.chunk_rows(
            sorted(fresh.chunk_ids_for_docs(s.id for s in fresh.doc_states().values()))
        )
        want_keys = {t: [key_of(fresh_rows, i) for i, _ in r] for t, r in want.items()}
        phrases = {t: fts(fresh).search(list(t), weights, 50) for t in map(tuple, SURFACE_PHRASES)}
        phrase_keys = {t: [key_of(fresh_rows, i) for i, _ in r] for t, r in phrases.items()}
        rows = old.chunk_rows(ids)
        with old.transaction() as conn:
            conn.execute("DROP TABLE groove.word_tf")
            conn.execute("DROP TABLE groove.surface_terms")
            conn.execute(
                "UPDATE groove.meta SET value = %s WHERE key = %s",
                (words.SEGMENTATION, WORD_RULES_KEY),
            )
    for damage, then in (
        ("no tables", "stale rows"),
        ("stale rows", "version 1"),
        ("version 1", ""),
    ):
        old = PostgresStore.open(PostgresSettings(dsn=postgres_dsn), "old")
        try:
            assert old.get_meta(WORD_RULES_KEY) == word_rules()
            assert _postings(old) == written, damage
            assert old.embeddings(ids).keys() == vectors.keys()
            for cid, vector in old.embeddings(ids).items():
                assert np.array_equal(vector, vectors[cid])
            for terms, ranked in want.items():
                got = word(old).search(list(terms), weights, 50)
                assert [key_of(rows, i) for i, _ in got] == want_keys[terms], terms
                assert [s for _, s in got] == [s for _, s in ranked], terms
            for phrase, ranked in phrases.items():
                got = fts(old).search(list(phrase), weights, 50)
                assert [key_of(rows, i) for i, _ in got] == phrase_keys[phrase], phrase
                assert [s for _, s in got] == [s for _, s in ranked], phrase
            with old.transaction() as conn:
                if then == "stale rows":  # an older version rewrote the KB since
                    conn.execute("DELETE FROM groove.word_tf WHERE kb = %s", (old.kb_id,))
                    conn.execute(
                        "UPDATE groove.meta SET value = %s WHERE kb = %s AND key = %s",
                        (words.SEGMENTATION, old.kb_id, WORD_RULES_KEY),
                    )
                elif then == "version 1":  # the word leg's postings only, and a stale one
                    conn.execute(
                        "DELETE FROM groove.word_tf WHERE kb = %s AND term LIKE E'\\x1f%%'",
                        (old.kb_id,),
                    )
                    conn.execute(
                        "INSERT INTO groove.word_tf VALUES (%s, E'\\x1fzzzq', 999999, 1, 0, 0, 5)",
                        (old.kb_id,),
                    )
                    conn.execute("DELETE FROM groove.surface_terms WHERE kb = %s", (old.kb_id,))
                    conn.execute(
                        "UPDATE groove.meta SET value = %s WHERE kb = %s AND key = %s",
                        (f"{words.SEGMENTATION}+tf1", old.kb_id, WORD_RULES_KEY),
                    )
                    assert fts(old).search(["search"], weights, 50) == []
        finally:
            old.close()


def test_a_kb_written_under_other_word_rules_is_rewritten_on_open(postgres_dsn: str) -> None:
    """A KB written by a groove before the English stemmer: its word columns, token counts
    and word frequencies are rewritten on open, the vectors kept (no re-embedding)."""
    fresh = open_store(postgres_dsn, kb="fresh")
    old = open_store(postgres_dsn, kb="old")
    try:
        for store in (fresh, old):
            store.bind_embedder("test", DIM)
            store.write_documents(CORPUS, vectors_for(CORPUS))
        ids = sorted(old.chunk_ids_for_docs(s.id for s in old.doc_states().values()))
        vectors = old.embeddings(ids)
        with old.transaction() as conn:  # what the plural-only rules wrote: unstemmed words
            for cid, heading, context, content in conn.execute(
                "SELECT id, heading, context, content FROM groove.chunks WHERE kb = %s",
                (old.kb_id,),
            ).fetchall():
                cols = [
                    [w.lower() for w in re.findall(r"\w+", t)] for t in (heading, context, content)
                ]
                conn.execute(
                    "UPDATE groove.chunks SET heading_w = %s, context_w = %s, content_w = %s, "
                    "wterms = %s, wtok = %s WHERE id = %s",
                    (
                        *(wordleg.padded(c) for c in cols),
                        sorted({w for c in cols for w in c}),
                        sum(map(len, cols)),
                        cid,
                    ),
                )
            old.fill_word_postings(conn)  # the postings of those columns
            conn.execute(
                "UPDATE groove.meta SET value = '1' WHERE kb = %s AND key = %s",
                (old.kb_id, WORD_RULES_KEY),
            )
        assert word(old).search(["match"], (2.0, 1.0, 1.0), 10) == []
        old.close()
        old = PostgresStore.open(PostgresSettings(dsn=postgres_dsn), "old")
        assert old.get_meta(WORD_RULES_KEY) == word_rules()
        assert old.lexical_stats() == fresh.lexical_stats()
        assert old.embeddings(ids).keys() == vectors.keys()
        for cid, vector in old.embeddings(ids).items():
            assert np.array_equal(vector, vectors[cid])
        fresh_rows = fresh.chunk_rows(
            sorted(fresh.chunk_ids_for_docs(s.id for s in fresh.doc_states().values()))
        )
        old_rows = old.chunk_rows(ids)
        for terms in (["match"], ["search", "find"], ["banana"], ["状態", "管理"]):
            got = word(old).search(terms, (2.0, 1.0, 1.0), 10)
            want = word(fresh).search(terms, (2.0, 1.0, 1.0), 10)
            assert got, terms
            assert [key_of(old_rows, c) for c, _ in got] == [key_of(fresh_rows, c) for c, _ in want]
            assert [s for _, s in got] == pytest.approx([s for _, s in want], rel=1e-9)
    finally:
        fresh.close()
        old.close()


def test_a_schema_without_the_documents_path_index_gets_it_on_open(postgres_dsn: str) -> None:
    """``documents()`` pages in code point order; the index that serves it is added to a
    schema an earlier groove-postgres made, and a late page reads through it."""
    with bound_stores(postgres_dsn, "paged") as (store,):
        store.write_documents(CORPUS, vectors_for(CORPUS))
        every = store.documents()
        with store.transaction() as conn:
            conn.execute("DROP INDEX groove.documents_by_path")
    reopened = PostgresStore.open(PostgresSettings(dsn=postgres_dsn), "paged")
    try:
        with reopened.transaction() as conn:
            found = conn.execute("SELECT to_regclass('groove.documents_by_path')").fetchone()
            assert found is not None and found[0] is not None
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(
                r[0]
                for r in conn.execute(
                    "EXPLAIN SELECT id FROM groove.documents d WHERE d.kb = %s "
                    'AND d.path COLLATE "C" > %s ORDER BY d.path COLLATE "C" LIMIT 2',
                    (reopened.kb_id, every[0].path),
                ).fetchall()
            )
        assert "documents_by_path" in plan, plan
        assert reopened.documents(after=every[0].path, limit=2) == every[1:3]
    finally:
        reopened.close()


def test_a_database_without_the_sections_column_gains_it_on_open(postgres_dsn: str) -> None:
    """A groove-postgres before merged chunks kept their headings made no ``sections``
    column: opening a KB adds it (empty for the chunks already there), and writes use it."""
    store = open_store(postgres_dsn, kb="old")
    try:
        store.write_documents(CORPUS, vectors_for(CORPUS))
        with store.transaction() as conn:
            conn.execute("ALTER TABLE groove.chunks DROP COLUMN sections")
    finally:
        store.close()
    reopened = open_store(postgres_dsn, kb="old")
    try:
        ids = sorted(reopened.chunk_ids_for_docs(s.id for s in reopened.doc_states().values()))
        rows = reopened.chunk_rows(ids)
        assert rows and all(r.sections == () for r in rows.values())
    finally:
        reopened.close()
