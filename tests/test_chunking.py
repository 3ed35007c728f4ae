"""Unit and real-data tests for the Markdown chunker (groove_core.chunking)."""

from __future__ import annotations

from itertools import accumulate
from pathlib import Path

import pytest

from evaldata import EVALDATA
from groove_core.chunking import (
    Chunk,
    ParsedDocument,
    _parsers,
    estimate_tokens,
    parse_markdown,
)
from groove_core.testing import cost_ratio

VUE_TREES = [EVALDATA / "md-vue-docs-en" / "docs", EVALDATA / "md-vue-docs-ja" / "docs"]


def parse(text: str, max_tokens: int = 400) -> ParsedDocument:
    return parse_markdown(text, fallback_title="fallback", max_tokens=max_tokens)


def assert_ranges(text: str, doc: ParsedDocument) -> None:
    """Every chunk is the exact slice its byte and line ranges name, in order, non-empty."""
    data = text.encode("utf-8", "surrogatepass")
    # bytes split at \n, \r\n and \r only, which is the chunker's definition of a line
    line_starts = list(accumulate((len(line) for line in data.splitlines(True)), initial=0))
    previous_end = 0
    for ordinal, chunk in enumerate(doc.chunks):
        assert chunk.ordinal == ordinal
        assert chunk.content.strip(), chunk
        assert previous_end <= chunk.byte_start < chunk.byte_end <= len(data)
        assert data[chunk.byte_start : chunk.byte_end].decode("utf-8", "surrogatepass") == (
            chunk.content
        )
        assert chunk.token_count == estimate_tokens(chunk.content)
        assert 1 <= chunk.line_start <= chunk.line_end
        assert line_starts[chunk.line_start - 1] <= chunk.byte_start
        assert chunk.byte_end <= line_starts[chunk.line_end]
        assert chunk.byte_end > line_starts[chunk.line_end - 1]  # line_end is not too far
        previous_end = chunk.byte_end


# --- estimate_tokens ----------------------------------------------------------------------


@pytest.mark.parametrize(("text", "tokens"), [("", 0), ("a", 1), ("abcd", 1), ("abcde", 2)])
def test_estimate_tokens_is_ceil_of_len_over_4(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def test_max_tokens_below_one_is_an_error() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        parse("text", max_tokens=0)


# --- front matter -------------------------------------------------------------------------


def test_front_matter_title_and_tags_and_exclusion() -> None:
    text = "---\ntitle: My Note\ntags: [python, search, python]\n---\n# Heading\n\nBody.\n"
    doc = parse(text)
    assert doc.title == "My Note"
    assert doc.tags == ("python", "search")
    assert doc.front_matter["title"] == "My Note"
    assert doc.warnings == ()
    assert all("title:" not in chunk.content for chunk in doc.chunks)
    assert doc.chunks[0].line_start == 5
    assert doc.chunks[0].context == "My Note > Heading"
    assert_ranges(text, doc)


def test_tags_from_string_and_other_keys() -> None:
    doc = parse("---\ntags: a, b  c\ntag: d\nkeywords: [e, ' a ', 3]\n---\nbody\n")
    assert doc.tags == ("a", "b", "c", "d", "e", "3")


def test_invalid_yaml_warns_and_is_still_excluded() -> None:
    text = "---\ntitle: [unclosed\n---\nBody text.\n"
    doc = parse(text)
    assert doc.front_matter == {}
    assert len(doc.warnings) == 1
    assert doc.warnings[0].startswith("front matter is not valid YAML")
    assert [chunk.content for chunk in doc.chunks] == ["Body text."]
    assert doc.title == "fallback"


def test_non_mapping_yaml_warns() -> None:
    doc = parse("---\n- a\n- b\n---\nBody\n")
    assert doc.front_matter == {}
    assert "not a mapping" in doc.warnings[0]
    assert [chunk.content for chunk in doc.chunks] == ["Body"]


def test_empty_front_matter_is_silent() -> None:
    doc = parse("---\n---\nBody\n")
    assert (doc.front_matter, doc.warnings) == ({}, ())
    assert [chunk.content for chunk in doc.chunks] == ["Body"]


def test_unclosed_front_matter_is_markdown() -> None:
    doc = parse("---\ntitle: x\n")
    assert doc.front_matter == {}
    assert doc.chunks[0].content == "---\ntitle: x"


def test_front_matter_closed_by_dots() -> None:
    doc = parse("---\ntitle: T\n...\nBody\n")
    assert doc.title == "T"
    assert [chunk.content for chunk in doc.chunks] == ["Body"]


# --- titles, headings, context ------------------------------------------------------------


def test_title_falls_back_to_first_h1_then_argument() -> None:
    assert parse("intro\n\n## Sub\n\ntext\n\n# The H1 {#h1}\n\nx\n").title == "The H1"
    assert parse("no headings here").title == "fallback"


def test_vitepress_anchor_is_stripped_from_heading_path_and_context() -> None:
    text = "# 算出プロパティ {#computed-properties}\n\n## 基本的な例 {#basic-example}\n\n本文。\n"
    doc = parse(text)
    (chunk,) = doc.chunks
    assert doc.title == "算出プロパティ"
    assert chunk.heading == "基本的な例"
    assert chunk.heading_path == ("算出プロパティ", "基本的な例")
    assert chunk.context == "算出プロパティ > 基本的な例"
    assert chunk.content.startswith("## 基本的な例 {#basic-example}")  # raw slice keeps it


def test_inline_markup_is_flattened() -> None:
    text = "# The **bold** `code` [link *text*](http://x) ![alt](i.png) <b>x</b>\n\nBody\n"
    (chunk,) = parse(text).chunks
    assert chunk.heading == "The bold code link text alt x"


def test_context_adds_title_from_front_matter() -> None:
    doc = parse("---\ntitle: Guide\n---\n# Intro\n\ntext\n")
    assert doc.chunks[0].context == "Guide > Intro"
    assert parse("# Guide\n\ntext\n").chunks[0].context == "Guide"  # H1 == title: once


def test_heading_path_follows_levels() -> None:
    text = "# A\n\na\n\n## B\n\nb\n\n### C\n\nc\n\n## D\n\nd\n\n# E\n\ne\n"
    doc = parse(text)
    assert [(c.heading, c.level, c.heading_path) for c in doc.chunks] == [
        ("A", 1, ("A",)),
        ("B", 2, ("A", "B")),
        ("C", 3, ("A", "B", "C")),
        ("D", 2, ("A", "D")),
        ("E", 1, ("E",)),
    ]
    assert doc.chunks[2].context == "A > B > C"
    assert_ranges(text, doc)


def test_setext_headings_count() -> None:
    text = "Title\n=====\n\nintro\n\nSub **part**\n--------\n\nbody\n"
    doc = parse(text)
    assert doc.title == "Title"
    assert [(c.heading, c.level) for c in doc.chunks] == [("Title", 1), ("Sub part", 2)]
    assert doc.chunks[1].content == "Sub **part**\n--------\n\nbody"
    assert doc.chunks[1].line_start == 6


def test_hash_inside_fenced_code_is_not_a_heading() -> None:
    text = "# Real\n\n```bash\n# a comment\n## another\n```\n\n    # indented code\n"
    (chunk,) = parse(text).chunks
    assert chunk.heading == "Real"
    assert chunk.content == text.rstrip()


def test_heading_inside_blockquote_does_not_start_a_section() -> None:
    (chunk,) = parse("# Top\n\n> # Quoted\n> text\n").chunks
    assert chunk.heading == "Top"


def test_preamble_is_level_zero() -> None:
    doc = parse("Before any heading.\n\n# First\n\nBody\n")
    preamble = doc.chunks[0]
    assert (preamble.heading, preamble.level, preamble.heading_path) == ("", 0, ())
    assert preamble.context == "First"  # the title (from the H1)
    assert preamble.content == "Before any heading."


def test_whitespace_preamble_is_skipped() -> None:
    doc = parse("\n  \n\n# First\n\nBody\n")
    assert [c.heading for c in doc.chunks] == ["First"]
    assert doc.chunks[0].line_start == 4


# --- heading-only sections ----------------------------------------------------------------


def test_heading_only_parent_is_skipped_but_kept_in_path() -> None:
    doc = parse("# Doc\n## Section\n\ntext\n")
    (chunk,) = doc.chunks
    assert chunk.heading_path == ("Doc", "Section")
    assert chunk.content == "## Section\n\ntext"


def test_heading_only_leaf_is_kept() -> None:
    doc = parse("# Doc\n\nintro\n\n## Deprecated\n\n## Next\n\ntext\n")
    assert [c.heading for c in doc.chunks] == ["Doc", "Deprecated", "Next"]
    assert doc.chunks[1].content == "## Deprecated"


def test_a_bare_heading_mark_is_no_chunk_unless_it_is_all_there_is() -> None:
    # A "##" with no words ranked first for queries matching nothing (issue #44's walk).
    doc = parse("# Doc\n\nintro\n\n###\n\n## Next\n\ntext\n")
    assert [c.heading for c in doc.chunks] == ["Doc", "Next"]
    assert [c.content for c in parse("##\n").chunks] == ["##"]


def test_headings_only_document_still_yields_a_chunk() -> None:
    doc = parse("# A\n## B\n")
    assert [c.content for c in doc.chunks] == ["## B"]
    assert doc.chunks[0].heading_path == ("A", "B")


def test_empty_and_blank_documents_have_no_chunks() -> None:
    assert parse("").chunks == ()
    assert parse(" \n\n\t\n").chunks == ()


# --- splitting ----------------------------------------------------------------------------


def test_small_section_is_one_chunk() -> None:
    text = "# H\n\n" + "word " * 50 + "\n"
    (chunk,) = parse(text).chunks
    assert chunk.token_count == estimate_tokens(chunk.content) == 64


def test_oversized_section_splits_at_block_boundaries_keeping_code_intact() -> None:
    paragraphs = [f"Paragraph {i} " + "lorem ipsum " * 10 for i in range(6)]
    code = "```python\n" + "".join(f"x_{i} = {i}\n" for i in range(20)) + "```"
    text = "# H\n\n" + "\n\n".join([*paragraphs[:3], code, *paragraphs[3:]]) + "\n"
    doc = parse(text, max_tokens=100)
    assert len(doc.chunks) > 2
    assert all(c.token_count <= 100 for c in doc.chunks)
    assert sum(code in c.content for c in doc.chunks) == 1
    assert all(c.heading == "H" and c.heading_path == ("H",) for c in doc.chunks)
    for chunk in doc.chunks:  # every piece starts at a block, never mid-paragraph
        assert chunk.content.startswith(("# H", "Paragraph", "```"))
    assert_ranges(text, doc)


def test_list_items_are_split_points() -> None:
    text = "# H\n\n" + "".join(f"- item {i} " + "x" * 60 + "\n" for i in range(30))
    doc = parse(text, max_tokens=100)
    assert len(doc.chunks) > 1
    assert all(c.content.lstrip().startswith(("# H", "- item")) for c in doc.chunks)
    assert all(c.token_count <= 100 for c in doc.chunks)
    assert_ranges(text, doc)


def test_huge_code_block_splits_at_lines() -> None:
    code_lines = [f"line_{i} = {'v' * 30}\n" for i in range(200)]
    text = "# H\n\n```\n" + "".join(code_lines) + "```\n"
    doc = parse(text, max_tokens=100)
    assert len(doc.chunks) > 5
    assert all(c.token_count <= 100 for c in doc.chunks)
    for chunk in doc.chunks:  # whole lines only
        assert all(
            line in ("```", "# H", "") or line.startswith("line_")
            for line in chunk.content.split("\n")
        )
        assert not chunk.content.endswith("=")
    assert_ranges(text, doc)


def test_huge_single_line_splits_at_characters() -> None:
    text = "# H\n\n" + "x" * 5000 + "\n"
    doc = parse(text, max_tokens=100)
    assert all(c.token_count <= 100 for c in doc.chunks)
    assert sum(c.content.count("x") for c in doc.chunks) == 5000
    assert_ranges(text, doc)


def test_huge_line_prefers_to_break_after_a_space() -> None:
    text = "word " * 400
    doc = parse(text, max_tokens=50)
    assert all(c.content.endswith("word") for c in doc.chunks)
    assert all(c.token_count <= 50 for c in doc.chunks)


def test_huge_table_splits_at_rows() -> None:
    text = "# T\n\n| a | b |\n|---|---|\n" + "".join(f"| {i} | {'v' * 20} |\n" for i in range(200))
    doc = parse(text, max_tokens=100)
    assert all(c.token_count <= 100 for c in doc.chunks)
    assert all(c.content.startswith(("# T", "|")) for c in doc.chunks)
    assert all(c.content.endswith("|") for c in doc.chunks)


# --- offsets and odd input ----------------------------------------------------------------


def test_crlf_and_lone_cr_offsets() -> None:
    text = "# A\r\n\r\ntext a\r\n\r\n# B\rtext b\r"
    doc = parse(text)
    assert [c.content for c in doc.chunks] == ["# A\r\n\r\ntext a", "# B\rtext b"]
    assert [(c.line_start, c.line_end) for c in doc.chunks] == [(1, 3), (5, 6)]
    assert_ranges(text, doc)


def test_byte_offsets_with_multibyte_text() -> None:
    text = "# 見出し 🎉\n\n本文です。\n\n## 二\n\nもう一つ\n"
    doc = parse(text)
    assert_ranges(text, doc)
    assert doc.chunks[1].byte_start == len("# 見出し 🎉\n\n本文です。\n\n".encode())


def test_lines_contain_content() -> None:
    text = "intro\n\n# A\n\none\ntwo\n\n\n## B\nthree\n"
    doc = parse(text)
    assert [(c.line_start, c.line_end) for c in doc.chunks] == [(1, 1), (3, 6), (9, 10)]
    assert_ranges(text, doc)


@pytest.mark.parametrize(
    "text",
    [
        "\0# x\0\n\0",
        "```\nunclosed fence\n# not a heading",
        ">" * 3000 + " deep",
        "".join("  " * i + "- x\n" for i in range(500)),
        "\ud800 lone surrogate\n# h\n",
        "---\ntitle: !!python/object:os.system x\n---\nx",
        "---\nd: 2020-13-45\n---\nx",
        "---\n" + "[" * 500 + "\n---\n",
        "#" * 7 + " not a heading\n",
        "# " + "[" * 20000 + "\n",
        "| a |\n|---|\n" + "| x |\n" * 2000,
    ],
)
def test_odd_input_never_raises(text: str) -> None:
    doc = parse(text, max_tokens=50)
    assert_ranges(text, doc)


def test_yaml_that_fails_in_a_constructor_is_a_warning() -> None:
    assert parse("---\nd: 2020-13-45\n---\nx").warnings  # ValueError, not YAMLError


def test_one_megabyte_is_fast() -> None:
    prose = "Some prose that goes on for a while, as prose in documentation does. " * 4
    block = (
        "## Section `api()` {#section}\n\n"
        + f"{prose}\n\n" * 3
        + "```js\nconst answer = compute(42)\nconsole.log(answer)\n```\n\n"
        + "- a list item with some words\n- another list item\n\n"
    )
    text = block * (1_000_000 // len(block))
    doc = parse(text)
    assert len(doc.chunks) == 1_000_000 // len(block)
    # markdown-it's block pass is most of the work: the chunker adds about half again on top
    # (1.4x, CPU time). 3x means the chunker's own work grew fivefold.
    block_pass = _parsers()[0]
    ratio = cost_ratio(lambda: parse(text), lambda: block_pass.parse(text), rounds=3, repeat=3)
    assert ratio < 3.0, ratio


# --- real data: the Vue documentation, English and Japanese --------------------------------


def vue_files() -> list[Path]:
    files = sorted(path for tree in VUE_TREES if tree.is_dir() for path in tree.rglob("*.md"))
    assert len(files) > 200, "the shared evaldata Vue doc trees are missing"
    return files


def is_one_line(chunk: Chunk) -> bool:
    return chunk.line_start == chunk.line_end


def test_vue_docs_invariants() -> None:
    files = vue_files()
    assert len(files) > 200
    chunk_count = 0
    for path in files:
        text = path.read_text(encoding="utf-8-sig")
        doc = parse_markdown(text, fallback_title=path.stem, max_tokens=400)
        assert doc.title.strip(), path
        assert doc.warnings == (), path
        assert doc.chunks, path
        assert_ranges(text, doc)
        for chunk in doc.chunks:
            assert "{#" not in chunk.heading, (path, chunk.heading)
            assert all("{#" not in part for part in chunk.heading_path), path
            assert "{#" not in chunk.context, path
            assert chunk.token_count <= 400 or is_one_line(chunk), (path, chunk.line_start)
        chunk_count += len(doc.chunks)
    assert chunk_count > len(files) * 5


def test_vue_computed_page_structure() -> None:
    for lang, title, basic in [
        ("en", "Computed Properties", "Basic Example"),
        ("ja", "算出プロパティ", "基本的な例"),
    ]:
        path = EVALDATA / f"md-vue-docs-{lang}" / "docs" / "guide" / "essentials" / "computed.md"
        doc = parse_markdown(path.read_text(encoding="utf-8"), fallback_title="computed")
        assert doc.title == title
        basic_chunks = [c for c in doc.chunks if c.heading == basic]
        assert len(basic_chunks) >= 2  # the section is long: split, every piece labelled
        assert all(c.heading_path == (title, basic) for c in basic_chunks)
        assert basic_chunks[0].context == f"{title} > {basic}"
        assert basic_chunks[0].line_start == 11
        assert basic_chunks[0].content.startswith(f"## {basic} {{#basic-example}}")


def test_vue_heading_only_parent_lives_in_child_paths() -> None:
    path = EVALDATA / "md-vue-docs-en" / "docs" / "guide" / "essentials" / "computed.md"
    doc = parse_markdown(path.read_text(encoding="utf-8"), fallback_title="computed")
    assert "Best Practices" not in [c.heading for c in doc.chunks]
    assert (
        "Computed Properties",
        "Best Practices",
        "Getters should be side-effect free",
    ) in [c.heading_path for c in doc.chunks]


def test_vue_front_matter_title() -> None:
    doc = parse_markdown(
        (EVALDATA / "md-vue-docs-en" / "docs" / "index.md").read_text(encoding="utf-8"),
        fallback_title="index",
    )
    assert doc.title == "Vue.js - The Progressive JavaScript Framework"
    assert doc.front_matter["page"] is True
    assert all("page: true" not in c.content for c in doc.chunks)
