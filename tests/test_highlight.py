"""match_spans: byte offsets into the content, case- and width-insensitive."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from groove_core.builtins.highlight import find_spans


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def test_width_and_case_insensitive_byte_spans() -> None:
    content = "ＡＰＩの設定とapiの設定。API!"
    spans = find_spans(content, ["API", "の設定"])
    data = content.encode()
    assert [data[s.start : s.end].decode() for s in spans] == [
        "ＡＰＩの設定",
        "apiの設定",
        "API",
    ]


def test_no_match_no_spans() -> None:
    assert find_spans("nothing here", ["absent"]) == ()
    assert find_spans("", ["x"]) == ()
    assert find_spans("text", []) == ()


WORDS = st.sampled_from(
    ["検索", "ランキング", "ＡＰＩ", "api", "Rust", "ß", "ﬁle", "e\u0301", "🙂", " "]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=40).map("".join), st.lists(WORDS, min_size=1, max_size=3))
def test_spans_are_sorted_disjoint_and_cover_a_needle(content: str, phrases: list[str]) -> None:
    data = content.encode("utf-8")
    spans = find_spans(content, phrases)
    needles = [_fold(p) for p in phrases if _fold(p).strip()]
    previous_end = -1
    for span in spans:
        assert 0 <= span.start < span.end <= len(data)
        assert span.start > previous_end
        previous_end = span.end
        piece = _fold(data[span.start : span.end].decode("utf-8"))
        assert any(n in piece for n in needles)
