"""Property tests: whatever a user types, the compiled expression is valid, inert FTS5."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

import pysqlite3.dbapi2 as sqlite3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groove_core.query import (
    MAX_PHRASES,
    MAX_QUERY_CHARS,
    MIN_PHRASE_CHARS,
    ParsedQuery,
    QueryError,
    normalize,
    parse_query,
)

RANKED = (
    "SELECT rowid, bm25(fts_chunks, 2.0, 1.0, 1.0) AS s FROM fts_chunks "
    "WHERE fts_chunks MATCH ? ORDER BY s LIMIT 10"
)
ID_SCAN = "SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?"

# Fragments chosen to collide with FTS5 syntax, the compiler's own syntax and Unicode edges.
NASTY = [
    '"',
    '""',
    '"""',
    "-",
    "--",
    " -",
    '-"',
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "NEAR(",
    "NEAR/2",
    "*",
    "^",
    "+",
    ":",
    "heading:",
    "content:",
    "{heading context}:",
    "(",
    ")",
    "[",
    "]",
    "\x00",
    "\x07",
    "\n",
    "\t",
    " ",
    "　",
    "🎉",
    "👩\u200d💻",
    "❤\ufe0f",
    "\u200f",
    "\u202e",
    "\u200b",
    "\ufeff",
    "\u0301",
    "e\u0301",
    "\u0331",
    "ـ",
    "שלום",
    "مرحبا",
    "再ランキング",
    "の",
    "ー",
    "AI",
    "rust",
    "ＡＰＩ",
    "？",
    "。",
    "「",
    "」",
    "'",
    "\\",
    "%",
    "_",
    "\ud7a3",
]

fragments = st.one_of(st.sampled_from(NASTY), st.text(max_size=8))
queries = st.one_of(
    st.text(),
    st.lists(fragments, max_size=30).map("".join),
    st.lists(fragments, max_size=30).map(" ".join),
)


def _at_the_cap(query: str) -> str:
    """``query`` cut to a prefix within the length cap, as typed and once normalised."""
    query = query[:MAX_QUERY_CHARS]
    while len(normalize(query)) > MAX_QUERY_CHARS:
        query = query[: len(query) * MAX_QUERY_CHARS // len(normalize(query))]
    return query


# Queries as long as the cap allows, built by repetition: generating thousands of independent
# characters is slow and trips Hypothesis's data-size health check without finding more.
long_queries = st.builds(
    lambda seed: _at_the_cap(seed * MAX_QUERY_CHARS),
    st.lists(fragments, min_size=1, max_size=10).map(" ".join).filter(bool),
)


@pytest.fixture(scope="module")
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE fts_chunks USING fts5(heading, context, content, tokenize='trigram')"
    )
    db.executemany(
        "INSERT INTO fts_chunks VALUES (?, ?, ?)",
        [
            ("Rust async", "guide > runtime", "tokio runs async tasks"),
            ("再ランキング", "評価 > 方法", "再ランキングの評価について"),
            ("NEAR AND OR", 'quotes "" here', "heading:foo * ^ (parens)"),
            ("🎉 emoji", "שלום", "e\u0301 combining"),
        ],
    )
    yield db
    db.close()


def _compile(query: str) -> ParsedQuery | None:
    """parse_query's contract: a ParsedQuery or a QueryError, nothing else."""
    try:
        return parse_query(query)
    except QueryError:
        assert "-" in normalize(query)  # only exclusions are ever rejected
        return None


def _check_runs(db: sqlite3.Connection, parsed: ParsedQuery) -> None:
    if parsed.match_expr is not None:
        db.execute(RANKED, (parsed.match_expr,)).fetchall()
        db.execute(ID_SCAN, (parsed.match_expr,)).fetchall()
    if parsed.negative_expr is not None:
        db.execute(ID_SCAN, (parsed.negative_expr,)).fetchall()


def _check_shape(parsed: ParsedQuery) -> None:
    assert (parsed.match_expr is None) == parsed.fts_skipped
    assert (parsed.negative_expr is None) == (not parsed.negatives)
    assert parsed.fts_skipped == (len(parsed.embed_text) < MIN_PHRASE_CHARS)
    assert parsed.fts_skipped or parsed.positives
    assert len(parsed.positives) <= MAX_PHRASES
    assert len(parsed.negatives) <= MAX_PHRASES
    for phrases in (parsed.positives, parsed.negatives):
        assert len(set(phrases)) == len(phrases)
        for phrase in phrases:
            assert len(phrase.strip()) >= MIN_PHRASE_CHARS
            assert not any(unicodedata.category(ch) in ("Cc", "Cs") for ch in phrase)
    assert parsed.embed_text == " ".join(parsed.embed_text.split())
    for warning in parsed.warnings:
        assert warning.dropped


def _check_finds_itself(db: sqlite3.Connection, parsed: ParsedQuery) -> None:
    """Each positive phrase, stored as content, is found: quoting loses nothing."""
    if parsed.match_expr is None or parsed.negatives:
        return
    db.execute("SAVEPOINT probe")
    try:
        for phrase in parsed.positives:
            rowid = db.execute("INSERT INTO fts_chunks VALUES ('', '', ?)", (phrase,)).lastrowid
            assert rowid in {r[0] for r in db.execute(ID_SCAN, (parsed.match_expr,))}
    finally:
        db.execute("ROLLBACK TO probe")
        db.execute("RELEASE probe")


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=queries)
def test_any_query_compiles_to_a_valid_fts5_expression(
    conn: sqlite3.Connection, query: str
) -> None:
    parsed = _compile(query)
    if parsed is None:
        return
    _check_shape(parsed)
    _check_runs(conn, parsed)
    _check_finds_itself(conn, parsed)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(query=long_queries)
def test_queries_as_long_as_the_cap_compile_and_run(conn: sqlite3.Connection, query: str) -> None:
    parsed = _compile(query)
    if parsed is None:
        return
    _check_shape(parsed)
    _check_runs(conn, parsed)


# Characters that stay what they are under NFKC and are neither spaces nor controls, so a
# generated "-word" is still "-word" when the compiler sees it.
stable_chars = st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")).filter(
    lambda ch: normalize(ch) == ch
)


# A word that starts with "-" would make "--word": a doubled hyphen starts an option in a
# pasted command line and excludes nothing (docs/query-syntax.md), so "--" alone is no
# exclusion-only query (hypothesis once drew the word "-").
excluded_words = st.text(stable_chars, min_size=1).filter(lambda w: not w.startswith("-"))


@settings(max_examples=100, deadline=None)
@given(words=st.lists(excluded_words, min_size=1, max_size=8))
def test_exclusion_only_queries_never_run(words: list[str]) -> None:
    with pytest.raises(QueryError, match="only excludes"):
        parse_query(" ".join("-" + w for w in words))
