"""Query compilation (docs/query-syntax.md): every example of the design, pinned exactly."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
import pytest

from evaldata import EVALDATA
from groove_core.query import (
    MAX_PHRASES,
    ParsedQuery,
    QueryError,
    QueryWarning,
    most_distinctive,
    normalize,
    parse_query,
)


def _fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE fts_chunks USING fts5(heading, context, content, tokenize='trigram')"
    )
    return conn


def _matching(conn: sqlite3.Connection, expr: str) -> set[int]:
    return {
        row[0]
        for row in conn.execute("SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH ?", (expr,))
    }


# --------------------------------------------------------------------------- spec examples


@pytest.mark.parametrize(
    ("query", "match_expr"),
    [
        (
            "再ランキングの評価について",
            '"再ランキング" OR "ランキング" OR "の評価" OR "について"',
        ),
        ('"Foundry Local" の設定', '"Foundry Local" OR "の設定"'),
        ("AI について", '"について"'),
        ("ML pipelines", '"pipelines"'),
        ("AI と ML", '"AI と ML"'),
        ("rust -async", '("rust") NOT ("async")'),
    ],
)
def test_spec_examples_compile_exactly(query: str, match_expr: str) -> None:
    assert parse_query(query).match_expr == match_expr


def test_script_runs_and_the_three_character_join() -> None:
    parsed = parse_query("再ランキングの評価について")
    assert parsed.positives == ("再ランキング", "ランキング", "の評価", "について")
    assert parse_query("再ランキング").positives == ("再ランキング", "ランキング")
    assert parse_query("システム化").positives == ("システム", "システム化")


def test_iteration_marks_stay_with_their_script() -> None:
    assert parse_query("人々の暮らし").positives == ("人々の", "暮らし")
    assert parse_query("一ヶ月").positives == ("一ヶ月",)


def test_short_run_between_long_runs_joins_rightwards() -> None:
    assert parse_query("ランキングをテスト").positives == ("ランキング", "をテスト", "テスト")


def test_prolonged_sound_mark_stays_in_the_katakana_run() -> None:
    assert parse_query("サーバーの設定").positives == ("サーバー", "の設定")


def test_fragments_that_cannot_reach_three_characters_are_dropped() -> None:
    assert parse_query("AI について").positives == ("について",)
    assert parse_query("ML pipelines").positives == ("pipelines",)


def test_whole_query_fallback_when_no_phrase_survives() -> None:
    parsed = parse_query("AI と ML")
    assert parsed.positives == ("AI と ML",)
    assert not parsed.fts_skipped


def test_fallback_uses_the_trimmed_collapsed_query() -> None:
    assert parse_query("  a   b  ").match_expr == '"a b"'


@pytest.mark.parametrize("query", ["", "   ", "ab", " ab ", "é", '"ab"', "-", "?"])
def test_trimmed_query_under_three_characters_is_vector_only(query: str) -> None:
    parsed = parse_query(query)
    assert parsed.fts_skipped
    assert parsed.match_expr is None
    assert parsed.positives == ()


# --------------------------------------------------------------------------- quoted phrases


def test_quoted_phrase_is_verbatim() -> None:
    parsed = parse_query('"Foundry Local" の設定')
    assert parsed.positives == ("Foundry Local", "の設定")


def test_quoting_a_short_word_does_not_rescue_it_but_a_wider_span_does() -> None:
    assert parse_query('"AI" について').positives == ("について",)
    assert parse_query('"AI について"').match_expr == '"AI について"'


def test_doubled_quote_is_one_literal_quote() -> None:
    parsed = parse_query('"say ""hi"" now"')
    assert parsed.positives == ('say "hi" now',)
    assert parsed.match_expr == '"say ""hi"" now"'
    assert parsed.embed_text == 'say "hi" now'


def test_quoted_phrase_floor_ignores_outer_spaces() -> None:
    assert parse_query('" a " word').positives == ("word",)
    assert parse_query('" abc "').positives == (" abc ",)


def test_unclosed_quote_is_punctuation() -> None:
    assert parse_query('"Foundry Local の設定').positives == ("Foundry", "Local", "の設定")


def test_quoted_phrase_inside_a_token() -> None:
    assert parse_query('abc"def ghi"jkl').positives == ("abc", "def ghi", "jkl")


def test_leading_hyphen_inside_quotes_is_literal() -> None:
    parsed = parse_query('"-foo"')
    assert parsed.positives == ("-foo",)
    assert parsed.negatives == ()
    assert parsed.match_expr == '"-foo"'


# --------------------------------------------------------------------------- punctuation


@pytest.mark.parametrize(
    ("query", "positives"),
    [
        ("What is an aircraft?", ("What", "aircraft")),
        ("時期か？", ("時期か",)),
        ("入梅は何の目安の時期か。", ("入梅は", "何の目安", "の時期", "時期か")),
        ("foo, bar. baz! qux: quux; corge", ("foo", "bar", "baz", "qux", "quux", "corge")),
        ("(foo)[bar]{baz}", ("foo", "bar", "baz")),
        ("「設定値」『項目名』【注意点】の一覧", ("設定値", "項目名", "注意点", "の一覧")),
        ("「設定」、項目。", ()),
        ("foo/bar*baz^qux", ("foo", "bar", "baz", "qux")),
        ("“smart” 'single' «guillemets»", ("smart", "single", "guillemets")),
        ("state-of-the-art", ("state", "the", "art")),
        ("don't", ("don",)),
        ("parse_query", ("parse", "query")),
    ],
)
def test_punctuation_is_a_boundary(query: str, positives: tuple[str, ...]) -> None:
    parsed = parse_query(query)
    if positives:
        assert parsed.positives == positives
    else:  # nothing survives: the whole trimmed query is the fallback phrase
        assert parsed.positives == (parsed.embed_text,)


def test_punctuation_inside_quotes_is_kept() -> None:
    assert parse_query('"aircraft?"').positives == ("aircraft?",)


# --------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize(
    ("text", "normalized"),
    [("ＡＰＩ", "API"), ("？", "?"), ("ｼｽﾃﾑ", "システム"), ("Rust", "Rust")],
)
def test_normalize_is_nfkc_and_keeps_case(text: str, normalized: str) -> None:
    assert normalize(text) == normalized


def test_query_is_width_normalised() -> None:
    assert parse_query("ＡＰＩ").positives == parse_query("API").positives == ("API",)
    assert parse_query("時期か？").embed_text == "時期か?"
    assert parse_query("ｼｽﾃﾑ化").positives == ("システム", "システム化")
    full_width = parse_query("rust －async")
    assert full_width == replace(parse_query("rust -async"), text="rust －async")


def test_text_is_the_original_query() -> None:
    assert parse_query("ＡＰＩ  -ｘｙｚ").text == "ＡＰＩ  -ｘｙｚ"


def test_duplicates_keep_first_occurrence() -> None:
    assert parse_query('rust "rust" web rust').positives == ("rust", "web")
    assert parse_query("rust -foo -foo").negatives == ("foo",)


def test_other_scripts_are_classes_of_their_own() -> None:
    assert parse_query("Привет мир").positives == ("Привет", "мир")
    assert parse_query("αβγabc").positives == ("αβγ", "abc")
    assert parse_query("한국어 검색").positives == ("한국어",)


def test_combining_mark_stays_with_its_letter() -> None:
    # U+0331 has no precomposed form with "e", so NFKC leaves the mark in place.
    assert parse_query("ce\u0331ll").positives == ("ce\u0331ll",)


def test_digits_join_latin_letters() -> None:
    assert parse_query("GPT4o 2024年").positives == ("GPT4o", "2024", "2024年")


# --------------------------------------------------------------------------- exclusions


def test_rust_minus_async() -> None:
    parsed = parse_query("rust -async")
    assert parsed.positives == ("rust",)
    assert parsed.negatives == ("async",)
    assert parsed.match_expr == '("rust") NOT ("async")'
    assert parsed.negative_expr == '"async"'
    assert parsed.embed_text == "rust"


def test_unquoted_exclusion_uses_the_same_run_rules() -> None:
    assert parse_query("評価 -再ランキング").negatives == ("再ランキング", "ランキング")


def test_quoted_exclusion_excludes_only_the_compound() -> None:
    parsed = parse_query('評価方法 -"再ランキング"')
    assert parsed.negatives == ("再ランキング",)
    assert parsed.match_expr == '("評価方法") NOT ("再ランキング")'


def test_short_exclusion_excludes_nothing() -> None:
    parsed = parse_query("rust -ab")
    assert parsed.negatives == ()
    assert parsed.negative_expr is None
    assert parsed.match_expr == '"rust"'
    assert parsed.embed_text == "rust"


def test_several_exclusions_are_or_joined() -> None:
    parsed = parse_query('rust -async -"tokio runtime"')
    assert parsed.match_expr == '("rust") NOT ("async" OR "tokio runtime")'
    assert parsed.negative_expr == '"async" OR "tokio runtime"'


@pytest.mark.parametrize("query", ["-foo", "-a -b", "-ab", '-"foo bar"', "  -foo  -bar  ", "-？"])
def test_exclusion_only_query_is_rejected(query: str) -> None:
    with pytest.raises(QueryError, match="only excludes"):
        parse_query(query)


def test_query_error_is_a_value_error() -> None:
    assert issubclass(QueryError, ValueError)


def test_hyphen_inside_a_word_or_alone_is_not_an_exclusion() -> None:
    assert parse_query("state-of-the-art").negatives == ()
    parsed = parse_query("foo - bar")
    assert parsed.negatives == ()
    assert parsed.embed_text == "foo - bar"


TRACE = (
    "Uncaught (in promise) TypeError: Cannot read properties of undefined (reading 'id')\n"
    "    at setup (/app/src/components/UserCard.vue:18:22)\n"
    "    at callWithErrorHandling (/app/node_modules/runtime-core.cjs.js:200:19)\n"
    "    at setupStatefulComponent (/app/node_modules/runtime-core.cjs.js:7827:25)\n"
    "  at <UserCard user-id=42 >\n"
    "Hint: the prop -userId arrives after mount, see inject() usage\n"
)


def test_a_pasted_stack_trace_says_its_message_first() -> None:
    # issue #42: the frames' file and function names are rare in any notes for no reason
    parsed = parse_query(TRACE)
    assert parsed.embed_text.startswith("Uncaught (in promise) TypeError: Cannot read")
    assert parsed.negatives == ()  # "-userId" inside a pasted log is text, searched
    assert "userId" in parsed.positives
    words = " ".join(parsed.positives)
    assert words.index("TypeError") < words.index("Hint") < words.index("callWithErrorHandling")

    # the cap keeps the message's phrases before any frame's, each group by rarity
    def rarity(phrases: Sequence[str]) -> list[int | None]:
        return [
            1 if "node_modules" in p or "runtime" in p or "Stateful" in p else 50 for p in phrases
        ]

    capped = parse_query(TRACE, max_phrases=6, rarity=rarity)
    assert capped.positives[:2] == ("Uncaught", "promise")
    assert not {"node_modules", "runtime", "setupStatefulComponent"} & set(capped.positives)


def test_the_word_leg_reads_a_pasted_logs_groups() -> None:
    # Each positive part carries its group, which the word leg's term cap reads as the
    # trigram leg's phrase cap does (groove_core.builtins.legs.word_terms).
    parsed = parse_query(TRACE)
    assert len(parsed.positive_groups) == len(parsed.positive_parts)
    assert list(parsed.positive_groups) == sorted(parsed.positive_groups)
    group = dict(zip((t for t, _ in parsed.positive_parts), parsed.positive_groups, strict=True))
    assert group["TypeError:"] == 0 and group["callWithErrorHandling"] == 2
    # one group: no groups recorded
    assert parse_query("How do I test a component?").positive_groups == ()
    # a lower group's before a higher one's, then the rarest, one the index lacks last
    assert most_distinctive([9, 5, 1, 1], 2, [0, 0, 2, 2]) == [0, 1]
    assert most_distinctive([9, 0, 5, None, 2], 3) == [0, 2, 4]


def test_a_hostile_log_costs_what_plain_text_of_its_length_does() -> None:
    from groove_core.testing import cost_ratio

    frames = "\n".join("at " + "(a:1" * 99 for _ in range(40))  # frame-like, backtracking
    long_line = "x\n" + "at " + "(a:1" * 3999
    plain = "word " * 3200
    for hostile in (frames, long_line):
        assert cost_ratio(lambda h=hostile: parse_query(h), lambda: parse_query(plain)) < 5


def test_a_query_of_several_lines_that_is_no_log_keeps_its_order() -> None:
    text = "How do I test a component?\nIt uses a store.\nThe test fails at mount."
    assert parse_query(text).embed_text == " ".join(text.split())
    # a pasted Markdown table's numbered rows are no code frames: its exclusion stays one
    assert parse_query("1 | a | b\n2 | c | d\nfoo -bar").negatives == ("bar",)


def test_a_doubled_hyphen_is_an_option_not_an_exclusion() -> None:
    # a pasted command line: "vue-tsc --noEmit" searched its flag away (issue #42)
    parsed = parse_query("vue-tsc --noEmit fails on $translate")
    assert parsed.negatives == ()
    assert "noEmit" in parsed.positives
    assert parse_query("rust -async").negatives == ("async",)


def test_short_positives_with_exclusions_fall_back_to_positive_text_only() -> None:
    parsed = parse_query("AI と ML -foo")
    assert parsed.match_expr == '("AI と ML") NOT ("foo")'
    assert parsed.embed_text == "AI と ML"


def test_vector_only_query_still_carries_its_exclusions() -> None:
    parsed = parse_query("AI -foo")
    assert parsed.fts_skipped
    assert parsed.match_expr is None
    assert parsed.negative_expr == '"foo"'


def test_embed_text_drops_exclusions_and_phrase_quotes() -> None:
    parsed = parse_query('  "Foundry Local"   の設定  -"old docs"  -legacy ')
    assert parsed.embed_text == "Foundry Local の設定"


def test_exclusion_is_judged_on_all_three_columns() -> None:
    conn = _fts()
    rows = [
        ("async runtime", "", "rust guide"),  # excluded by its heading
        ("guide", "async notes", "rust guide"),  # excluded by its context
        ("guide", "", "rust with async"),  # excluded by its content
        ("guide", "", "plain rust"),
    ]
    conn.executemany("INSERT INTO fts_chunks VALUES (?, ?, ?)", rows)
    parsed = parse_query("rust -async")
    assert parsed.match_expr is not None
    assert parsed.negative_expr is not None
    assert _matching(conn, parsed.match_expr) == {4}
    assert _matching(conn, parsed.negative_expr) == {1, 2, 3}


def test_compiled_query_finds_rows_that_share_only_some_words() -> None:
    conn = _fts()
    conn.executemany(
        "INSERT INTO fts_chunks VALUES (?, ?, ?)",
        [
            ("評価", "", "ランキングの精度"),
            ("設定", "", "Foundry Local を使う"),
            ("x", "", "無関係"),
        ],
    )
    for query, expected in [("再ランキングの評価について", {1}), ('"Foundry Local" の設定', {2})]:
        expr = parse_query(query).match_expr
        assert expr is not None
        assert _matching(conn, expr) == expected


# --------------------------------------------------------------------------- FTS5 syntax is inert


def test_fts5_operators_are_plain_text() -> None:
    parsed = parse_query("foo AND bar OR NEAR(baz qux) NOT heading:quux * ^corge")
    assert parsed.positives == (
        "foo",
        "AND",
        "bar",
        "NEAR",
        "baz",
        "qux",
        "NOT",
        "heading",
        "quux",
        "corge",
    )
    conn = _fts()
    conn.execute("INSERT INTO fts_chunks VALUES ('', '', 'only NEAR here')")
    assert parsed.match_expr is not None
    assert _matching(conn, parsed.match_expr) == {1}


def test_quoted_column_filter_is_a_literal_phrase() -> None:
    conn = _fts()
    conn.executemany(
        "INSERT INTO fts_chunks VALUES (?, ?, ?)", [("foo", "", ""), ("", "", "see heading:foo")]
    )
    expr = parse_query('"heading:foo"').match_expr
    assert expr == '"heading:foo"'
    assert _matching(conn, expr) == {2}


def test_nul_and_control_characters_are_boundaries() -> None:
    assert parse_query("foo\x00bar\x07baz").positives == ("foo", "bar", "baz")
    assert parse_query('"foo\x00bar"').positives == ("foo bar",)
    assert parse_query("foo\tbar\nbaz").embed_text == "foo bar baz"


def test_lone_surrogate_is_removed() -> None:
    parsed = parse_query("foo\ud800bar")
    assert parsed.positives == ("foo", "bar")
    parsed.embed_text.encode("utf-8")


# --------------------------------------------------------------------------- caps


def _words(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


def test_positives_beyond_the_cap_are_truncated_with_a_warning() -> None:
    words = _words(40)
    parsed = parse_query(" ".join(words))
    assert parsed.positives == tuple(words[:MAX_PHRASES])
    assert parsed.warnings == (
        QueryWarning(
            code="positives_truncated",
            message=(
                "the query compiled to 40 positive phrases; only the first 32 "
                "are used and 8 were dropped"
            ),
            dropped=tuple(words[MAX_PHRASES:]),
        ),
    )


def test_negatives_beyond_the_cap_are_truncated_with_a_warning() -> None:
    negatives = _words(35, "n")
    parsed = parse_query("rust " + " ".join(f"-{w}" for w in negatives))
    assert parsed.negatives == tuple(negatives[:MAX_PHRASES])
    assert [(w.code, w.dropped) for w in parsed.warnings] == [
        ("negatives_truncated", tuple(negatives[MAX_PHRASES:]))
    ]


def test_cap_counts_after_deduplication() -> None:
    parsed = parse_query(" ".join(_words(MAX_PHRASES) * 2))
    assert len(parsed.positives) == MAX_PHRASES
    assert parsed.warnings == ()


def test_max_phrases_is_configurable_and_validated() -> None:
    parsed = parse_query("alpha beta gamma", max_phrases=2)
    assert parsed.positives == ("alpha", "beta")
    assert parsed.warnings[0].dropped == ("gamma",)
    with pytest.raises(ValueError, match="max_phrases"):
        parse_query("alpha", max_phrases=0)


def test_parsed_query_is_frozen() -> None:
    parsed = parse_query("rust")
    with pytest.raises(AttributeError):
        parsed.text = "other"  # type: ignore[misc]
    assert isinstance(parsed, ParsedQuery)


# --------------------------------------------------------------------------- golden headroom


def _golden_files() -> list[Path]:
    return sorted(EVALDATA.glob("*/golden*.jsonl"))


def _golden_queries(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield str(json.loads(line)["query"])


def _phrase_count(query: str) -> int:
    return len(parse_query(query, max_phrases=10**6).positives)


# The seed's "2x headroom" claim was measured over 37 short queries (max 9 phrases). The
# shared collections also hold long full-sentence questions (JSQuAD, SQuAD, Cranfield): the
# longest compile to 30-33 phrases. What holds, and is pinned here: the typical query (the
# median, and the 75th percentile) of every collection keeps 2x headroom, and at most one
# query in a collection reaches the cap (and then it warns, see the next test).
#: Golden files of long requests, kept for what the cap does to them (issue #42: cacm-en's
#: 75th percentile compiles to 24 phrases and 4 of its 52 requests pass 32; pasted console
#: dumps and stack traces run far past it).
LONG_REQUESTS = {
    "cacm-en/golden.jsonl",
    "lisa-en/golden.jsonl",
    "md-vue-docs-en/golden-pasted.jsonl",
}


@pytest.mark.parametrize("path", _golden_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_typical_golden_queries_keep_twice_the_headroom_under_the_cap(path: Path) -> None:
    counts = sorted(_phrase_count(q) for q in _golden_queries(path))
    assert counts, f"no queries in {path}"
    if f"{path.parent.name}/{path.name}" in LONG_REQUESTS:
        return
    assert counts[len(counts) // 2] <= MAX_PHRASES // 2
    assert counts[(len(counts) * 3) // 4] <= MAX_PHRASES // 2
    assert sum(c > MAX_PHRASES for c in counts) <= 1


def test_golden_queries_are_never_truncated_silently() -> None:
    for path in _golden_files():
        for query in _golden_queries(path):
            parsed = parse_query(query)
            truncated = _phrase_count(query) > MAX_PHRASES
            assert truncated == any(w.code == "positives_truncated" for w in parsed.warnings)
