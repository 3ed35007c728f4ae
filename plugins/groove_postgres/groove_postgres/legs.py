"""Leg indexes on PostgreSQL (``groove_core.leg_index``): the *site* a leg index's factory
receives, and the built-in lexical legs' indexes.

:class:`PostgresSite` is what a factory registered under ``"postgres"`` receives: the
schema groove's tables live in, this store's KB id and a connection for reads. A leg
index keeps its rows in tables of its own in that schema, shared by every KB of the
database, so every row is keyed by the KB and every statement scoped to it.

The built-in trigram and word legs (:class:`PgTrigramIndex`, :class:`PgWordIndex`, given
to the core through the plugin's ``groove_leg_indexes`` hook) are a special case: their
rows are columns of the chunk row itself (the folded text and its trigram GIN index, the
word tokens and theirs), with the word postings (``word_tf``), the surface words
(``surface_terms``) and the bm25 statistics (``kbs``, ``trigram_df``, ``word_df``) kept
beside it. The store writes all of that with the chunk, in the same COPY and the same
transaction (one row and one GIN entry per chunk: docs/benchmarks.md, issue #17), so
these two indexes are always exactly as complete as the chunks are: their ``write``,
``delete``, ``create`` and ``drop`` do nothing, and the store never fills them from the
chunks (:attr:`~PgTrigramIndex.rows_in_chunks`). Their query methods are the ones the
built-in legs call (``search``, ``rows``, ``expression`` and the trigram index's ``ids``),
answering as the SQLite wing's FTS5 tables answer (``groove_core.sqlite.lexical_legs``):
the same rankings and scores (bm25 computed as FTS5 computes it, ``groove_postgres.lexical``
and ``groove_postgres.wordleg``) and the same ``--explain`` expressions.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from groove_core import words
from groove_core.leg_index import BoundIndex, IndexedChunk
from groove_core.query import match_expression
from groove_core.rows import Allowed, Ranked, Weights
from groove_postgres import lexical, wordleg
from groove_postgres.lexical import SURFACE_MARK_SQL, TEXT_SQL

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "PgTrigramIndex",
    "PgWordIndex",
    "PostgresSite",
    "builtin_versions",
    "default_indexes",
    "rows_in_chunks",
    "trigram_index",
    "word_index",
]


class _Owner(Protocol):
    """What a site reads of its store (``groove_postgres.store.PostgresStore``)."""

    @property
    def db(self) -> Any: ...  # its database handle: .s is the schema

    @property
    def kb_id(self) -> int: ...

    def _conn(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


class PostgresSite:
    """What a leg index's factory receives on PostgreSQL (``LegIndexSpec.backends``'s
    ``"postgres"`` entry), bound to one store: one KB, one thread at a time.

    * :attr:`schema`: the schema groove's tables live in (an identifier the settings
      validated, safe to write into SQL; quote it with ``psycopg.sql.Identifier`` all the
      same). Create the index's tables there, named after the leg.
    * :attr:`kb`: this store's KB id, the ``kb`` column every groove table carries (a row of
      ``{schema}.kbs``). The tables are shared by every KB of the database: key every row
      by it, scope every statement to it, and let the rows reference
      ``{schema}.kbs(id) ON DELETE CASCADE``, so that a KB deleted while the leg is
      disabled (when the store cannot call the index) takes them along.
    * :meth:`connection`: a psycopg connection for the index's reads, inside the store's
      snapshot when one is open (a search reads the index and the chunks as of one
      moment); outside one, a connection of the pool whose implicit transaction ends
      with the block. psycopg errors raised in the block reach the caller as the store's
      own classified ``StoreError``.

    Writes never use :meth:`connection`: ``create``, ``drop``, ``write`` and ``delete``
    receive the write transaction's connection (never commit it). On PostgreSQL the store
    calls ``create`` before ``drop`` when it fills an index (the tables outlive a KB, so
    ``drop`` deletes this KB's rows, never the tables), and it holds a lock while it does,
    so that two KBs filling their index at once do not race to create its tables.
    ``chunk_ids`` and ``check`` are called by ``groove doctor`` inside a read-only
    snapshot: they read, never write.
    """

    def __init__(self, store: _Owner) -> None:
        self._store = store

    @property
    def schema(self) -> str:
        return self._store.db.s

    @property
    def kb(self) -> int:
        return self._store.kb_id

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A connection for reads (see the class docstring)."""
        return self._store._conn()


# -- the built-in lexical legs' indexes --------------------------------------------------------


def _count_literal(column: str, phrase: str, witnesses: Sequence[str]) -> str:
    """SQL for the occurrences of one phrase in ``column``, overlaps included: the
    arithmetic of ``replace``, exact unless the column holds two overlapping occurrences
    (one of ``witnesses``, lexical.overlap_witnesses), where a lookahead regex counts.
    The regex costs several times the rest, and overlaps are rare even where the phrase
    could overlap (``nation`` in ``nationation``). Its parameters: :func:`_count_params`."""
    # Bytes, not characters: each occurrence removed takes the phrase's bytes with it, and
    # octet_length does not walk the UTF-8 text as length does.
    size = len(phrase.encode("utf-8"))
    plain = f"((octet_length({column}) - octet_length(replace({column}, %s, ''))) / {size})"
    if not witnesses:
        return plain
    none = " AND ".join(f"strpos({column}, %s) = 0" for _ in witnesses)
    return f"(CASE WHEN {none} THEN {plain} ELSE regexp_count({column}, %s) END)"


def _count_params(phrase: str, witnesses: Sequence[str]) -> list[str]:
    if not witnesses:
        return [phrase]
    return [*witnesses, phrase, lexical.overlap_regex(phrase)]


def _bm25(
    site: PostgresSite,
    branches: Sequence[str],
    params: Sequence[Any],
    tokens: str,
    limit: int,
    allowed: frozenset[int] | None,
) -> Ranked:
    """FTS5's bm25 over the rows the branches return, one branch per query phrase,
    each row ``(i, id, len, ok, f, n)``: phrase number, chunk, its length in tokens,
    whether it may be returned (exclusions), its weighted phrase frequency, and
    whether the phrase occurs in it (``n > 0``: the phrase's document frequency counts
    it). ``tokens``: the KB's total of lengths in ``kbs`` (``ntok`` or ``wtok``).
    (chunk id, bm25) best first, bm25 negative, ties by id."""
    only = "AND h.id = ANY(%s)" if allowed is not None else ""
    sql = f"""
            WITH stats AS (
                SELECT nrow::float8 AS n, {tokens}::float8 / greatest(nrow, 1) AS avgdl
                FROM {site.schema}.kbs WHERE id = %s),
            hits AS MATERIALIZED (
                SELECT * FROM ({" UNION ALL ".join(branches)}) b WHERE b.n > 0),
            idf AS MATERIALIZED (
                SELECT h.i, greatest(ln((s.n - h.n + 0.5) / (h.n + 0.5)), 1e-6) AS idf
                FROM (SELECT i, count(*)::float8 AS n FROM hits GROUP BY i) h
                CROSS JOIN stats s)
            SELECT h.id, -sum(
                CASE WHEN h.f > 0
                THEN idf.idf * (h.f * {lexical.K1 + 1}) /
                     (h.f + {lexical.K1} * (1 - {lexical.B} + {lexical.B} * h.len / s.avgdl))
                ELSE 0 END ORDER BY h.i) AS score
            FROM hits h JOIN idf USING (i) CROSS JOIN stats s
            WHERE h.ok {only}
            GROUP BY h.id
            ORDER BY score, h.id
            LIMIT %s"""
    values = [site.kb, *params]
    if allowed is not None:
        values.append(sorted(allowed))
    values.append(limit)
    with site.connection() as conn:
        rows = conn.execute(sql, values).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows]


class _ChunkColumns:
    """What both built-in indexes share: their rows are the chunk rows' own columns (the
    module docstring), so the store writes them with the chunk and these methods have
    nothing to do."""

    #: The store writes this index's rows with the chunk row: it neither fills the index
    #: from the chunks nor calls ``write`` / ``delete``, and serves it whatever version is
    #: recorded (it is complete whenever the chunks are). groove-postgres' own indexes only.
    rows_in_chunks = True

    def __init__(self, site: PostgresSite) -> None:
        self.site = site

    def create(self, connection: Any) -> None:
        """Nothing: the columns are part of groove's schema."""

    def drop(self, connection: Any) -> None:
        """Nothing: the rows go with the chunks (and a KB's statistics with the KB)."""

    def write(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        """Nothing: ``PostgresStore.write_documents`` writes the columns with the chunk."""

    def delete(self, connection: Any, chunks: Sequence[IndexedChunk]) -> None:
        """Nothing: ``PostgresStore`` deletes the postings and statistics with the chunk."""

    def chunk_ids(self) -> frozenset[int]:
        """This KB's chunk ids: every chunk row holds the index's columns (``groove doctor``
        checks the columns, postings and statistics themselves in SQL)."""
        s = self.site.schema
        with self.site.connection() as conn:
            rows = conn.execute(
                f"SELECT id FROM {s}.chunks WHERE kb = %s", (self.site.kb,)
            ).fetchall()
        return frozenset(int(r[0]) for r in rows)

    def check(self) -> list[str]:
        """Nothing of its own: doctor's SQL checks of the columns and statistics cover it."""
        return []


class PgTrigramIndex(_ChunkColumns):
    """The trigram leg's index on PostgreSQL: the folded columns (``heading_n``,
    ``context_n``, ``content_n``) with their pg_trgm GIN index, the surface words' postings
    and the bm25 statistics (``groove_postgres.lexical``)."""

    def search(
        self,
        phrases: Sequence[str],
        weights: Weights,
        limit: int,
        allowed: Allowed = None,
        *,
        excluded: Sequence[str] = (),
    ) -> Ranked:
        """Ranked lexical candidates: (chunk id, bm25) best first, bm25 negative (smaller
        is better) and computed as FTS5's ``bm25(fts_chunks, *weights)`` computes it."""
        if not phrases or limit <= 0 or (allowed is not None and not allowed):
            return []
        s, kb = self.site.schema, self.site.kb
        pos = [lexical.fold(p) for p in phrases]
        neg = [lexical.fold(p) for p in excluded]
        # Each phrase's matching rows come from its own scan of the trigram GIN index
        # (one branch per phrase): the rows it matches give its document frequency and
        # its (row, phrase) frequencies, so text is counted only where a phrase occurs.
        # An OR of every phrase's LIKE over the whole table, with each phrase re-tested
        # on every candidate row, cost ~100x SQLite's search (docs/benchmarks.md, issue #17).
        branch = (
            "SELECT {i} AS i, id, ntok AS len, {t}, "
            "%s * {h} + %s * {x} + %s * {c} AS f, 1 AS n "
            f"FROM {s}.chunks WHERE kb = %s AND {TEXT_SQL} LIKE %s"
        )
        keep = " AND ".join(f"{TEXT_SQL} NOT LIKE %s" for _ in neg) or "true"
        # A phrase of Latin letters and digits is counted from its surface words' postings
        # (groove_postgres.lexical): the words containing it come from the vocabulary's
        # trigram index, their postings from word_tf's primary key (one range each: OFFSET 0
        # keeps the LATERAL a nested loop, never a hash join over the KB's postings), so no
        # chunk row or text is read, but for an exclusion: each matching chunk's own text.
        surface = (
            "SELECT {i} AS i, p.chunk_id AS id, min(p.len) AS len, {ok} AS ok, "
            "%s * sum(p.h * v.occ) + %s * sum(p.x * v.occ) + %s * sum(p.c * v.occ) AS f, "
            "1 AS n FROM (SELECT term, {occ} AS occ "
            f"FROM {s}.surface_terms WHERE kb = %s AND term LIKE %s) v "
            "CROSS JOIN LATERAL (SELECT chunk_id, h, x, c, len "
            f"FROM {s}.word_tf t WHERE t.kb = %s AND t.term = {SURFACE_MARK_SQL} || v.term"
            " OFFSET 0) p GROUP BY p.chunk_id"
        )
        excluding = f"(SELECT {keep} FROM {s}.chunks WHERE id = p.chunk_id)"
        branches: list[str] = []
        params: list[Any] = []
        for i, phrase in enumerate(pos, start=1):
            witnesses = lexical.overlap_witnesses(phrase)
            if lexical.surface_phrase(phrase):
                branches.append(
                    surface.format(
                        i=i,
                        ok=excluding if neg else "true",
                        occ=_count_literal("term", phrase, witnesses),
                    )
                )
                params += [lexical.like_pattern(p) for p in neg]
                params += [float(w) for w in weights]
                params += _count_params(phrase, witnesses)
                params += [kb, lexical.like_pattern(phrase), kb]
                continue
            branches.append(
                branch.format(
                    i=i,
                    t=f"({keep}) AS ok",
                    h=_count_literal("heading_n", phrase, witnesses),
                    x=_count_literal("context_n", phrase, witnesses),
                    c=_count_literal("content_n", phrase, witnesses),
                )
            )
            params += [lexical.like_pattern(p) for p in neg]
            for column in range(3):
                params.append(float(weights[column]))
                params += _count_params(phrase, witnesses)
            params += [kb, lexical.like_pattern(phrase)]
        return _bm25(self.site, branches, params, "ntok", limit, allowed)

    def ids(self, phrases: Sequence[str]) -> frozenset[int]:
        """Every chunk id holding any of ``phrases`` (the exclusion scan, ADR-0011)."""
        if not phrases:
            return frozenset()
        s, kb = self.site.schema, self.site.kb
        # One GIN scan per phrase (as search), not an OR that the planner scans whole.
        branch = f"SELECT id FROM {s}.chunks WHERE kb = %s AND {TEXT_SQL} LIKE %s"
        params: list[Any] = []
        for phrase in phrases:
            params += [kb, lexical.like_pattern(lexical.fold(phrase))]
        with self.site.connection() as conn:
            rows = conn.execute(" UNION ".join([branch] * len(phrases)), params).fetchall()
        return frozenset(int(r[0]) for r in rows)

    def rows(self, trigrams: Iterable[str]) -> tuple[dict[str, int], int]:
        """(rows containing each trigram, rows in all), for the common-phrase rule, from
        the KB's trigram document frequencies (``trigram_df``)."""
        s, kb = self.site.schema, self.site.kb
        wanted = list(dict.fromkeys(trigrams))
        with self.site.connection() as conn:
            found = dict(
                conn.execute(
                    f"SELECT tri, df FROM {s}.trigram_df WHERE kb = %s AND tri = ANY(%s)",
                    (kb, wanted),
                ).fetchall()
            )
            total = conn.execute(f"SELECT nrow FROM {s}.kbs WHERE id = %s", (kb,)).fetchone()
        return {t: int(found.get(t, 0)) for t in wanted}, int(total[0]) if total else 0

    def expression(self, phrases: Sequence[str], excluded: Sequence[str] = ()) -> str:
        """The query as ``--explain`` shows it: the FTS5 expression the SQLite wing runs
        for the same phrases (this index matches them as that expression does)."""
        return match_expression(phrases, excluded)


class PgWordIndex(_ChunkColumns):
    """The word leg's index on PostgreSQL: the padded word columns (``heading_w``, ...)
    and ``wterms`` with its GIN index, the word postings (``word_tf``) and the word bm25
    statistics (``groove_postgres.wordleg``)."""

    def search(
        self, terms: Sequence[str], weights: Weights, limit: int, allowed: Allowed = None
    ) -> Ranked:
        """Ranked word-leg candidates: (chunk id, bm25) best first, computed as FTS5's
        ``bm25(word_chunks, *weights)`` computes it (groove_postgres.wordleg)."""
        tokens = [t for t in (wordleg.query_term(term) for term in terms) if t]
        if not tokens or limit <= 0 or (allowed is not None and not allowed):
            return []
        s, kb = self.site.schema, self.site.kb
        # A one-token term (every term of a query without quotes) is read from its
        # postings: per chunk its count in each column and the chunk's length, kept at
        # write time, so no text is read. A phrase of tokens (a quoted part) is checked
        # and counted in the text of the chunks holding all its tokens (their GIN lookup;
        # a chunk may hold them all and not side by side: n = 0, no match): positions per
        # posting would cost every write for the few queries that quote.
        posting = (
            "SELECT {i} AS i, chunk_id AS id, len, true AS ok, "
            "%s * h + %s * x + %s * c AS f, 1 AS n "
            f"FROM {s}.word_tf WHERE kb = %s AND term = %s"
        )
        branch = (
            "SELECT i, id, len, true AS ok, %s * h + %s * x + %s * t AS f, h + x + t AS n "
            "FROM (SELECT {i} AS i, id, wtok AS len, {h} AS h, {x} AS x, {c} AS t "
            f"FROM {s}.chunks WHERE kb = %s AND wterms @> %s::text[]) b"
        )
        branches: list[str] = []
        params: list[Any] = []
        for i, term in enumerate(tokens, start=1):
            if len(term) == 1:
                branches.append(posting.format(i=i))
                params += [float(w) for w in weights]
                params += [kb, term[0]]
                continue
            pattern = wordleg.padded(term)
            witnesses = wordleg.overlap_witnesses(term)
            branches.append(
                branch.format(
                    i=i,
                    h=_count_literal("heading_w", pattern, witnesses),
                    x=_count_literal("context_w", pattern, witnesses),
                    c=_count_literal("content_w", pattern, witnesses),
                )
            )
            params += [float(w) for w in weights]
            params += _count_params(pattern, witnesses) * 3
            params += [kb, sorted(set(term))]
        return _bm25(self.site, branches, params, "wtok", limit, allowed)

    def rows(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """(chunks containing each single-token term, chunks in all) from ``word_df``;
        terms with a space (phrases) are left out of the dict."""
        s, kb = self.site.schema, self.site.kb
        single = [t for t in dict.fromkeys(terms) if " " not in t]
        folded = {t: lexical.fold(t) for t in single}
        with self.site.connection() as conn:
            found = dict(
                conn.execute(
                    f"SELECT term, df FROM {s}.word_df WHERE kb = %s AND term = ANY(%s)",
                    (kb, sorted(set(folded.values()))),
                ).fetchall()
            )
            total = conn.execute(f"SELECT nrow FROM {s}.kbs WHERE id = %s", (kb,)).fetchone()
        return {t: int(found.get(folded[t], 0)) for t in single}, int(total[0]) if total else 0

    def expression(self, terms: Sequence[str]) -> str:
        """The query as ``--explain`` shows it: the FTS5 expression the SQLite wing runs
        for the same terms."""
        return match_expression(terms, ())


def rows_in_chunks(index: Any) -> bool:
    """Whether the store writes ``index``'s rows with the chunk rows: the built-in lexical
    legs' indexes on PostgreSQL (``groove_postgres.legs``), never filled from the chunks nor
    written through the ``LegIndex`` methods."""
    return getattr(index, "rows_in_chunks", False) is True


def trigram_index(site: PostgresSite) -> PgTrigramIndex:
    """The factory of the trigram leg's index (``LegIndexImpl("fts", "postgres", ...)``)."""
    return PgTrigramIndex(site)


def word_index(site: PostgresSite) -> PgWordIndex:
    """The factory of the word leg's index (``LegIndexImpl("word", "postgres", ...)``)."""
    return PgWordIndex(site)


def builtin_versions() -> dict[str, str]:
    """The built-in lexical legs' index versions (``"fts"``, ``"word"``): what their rows
    depend on besides the chunks, the Unicode database (NFKC) and, for the word leg, the
    word segmentation. The same values as the built-in legs' specs declare (the built-in
    legs' ``fts_version()`` / ``word_version()``; ``tests/test_legs.py`` compares them):
    this plugin builds on the storage contract alone, never on the built-in legs or the
    SQLite wing."""
    unicode = f"unicode {unicodedata.unidata_version}"
    return {"fts": unicode, "word": f"{unicode}; words {words.SEGMENTATION}"}


def default_indexes() -> tuple[BoundIndex, ...]:
    """The built-in legs' indexes, as a store opened without a plugin set keeps them
    (tests, benchmarks, tools that open a KB directly): ``PostgresStore(indexes=None)``."""
    versions = builtin_versions()
    return (
        BoundIndex("fts", versions["fts"], trigram_index, "postgres"),
        BoundIndex("word", versions["word"], word_index, "postgres"),
    )
