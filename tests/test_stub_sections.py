"""One-line reference sections against the pages they point to (issue #44): with ``[index]
min_section_tokens = 32`` (the default) the chunker merges a section with less text than
that into the chunk before it, so a heading and a line no longer outrank the page it points
to; the merged chunk keeps each section's heading, so a hit in it and ``get`` of its lines
still name their own section."""

from __future__ import annotations

from pathlib import Path

import pytest

from groove_core.chunking import parse_markdown
from groove_core.testing.kb import FAST_CONFIG, SECTION_CHUNKS, make_kb, open_kb

#: A CLI reference page: dozens of one-line sections in a real vault, a few here.
REFERENCE = "# CLI reference\n\nEvery command of the command line.\n\n" + "".join(
    f"## {name}\n\nCommands for {name}.\n\n"
    for name in ("Tags", "Sync", "Publish", "Vaults", "Notes", "Pods", "Hooks", "Seeds")
)
#: The page a user typing ``tags`` means.
FEATURE = (
    "# Tags\n\n"
    "A tag groups notes across folders. Write a hash sign before a word in any note to "
    "tag it; the sidebar lists every tag with a count of its notes, and clicking one "
    "shows them. Tags can also be set in front matter as a list.\n\n"
    "## Renaming\n\nRenaming a tag rewrites it in every note that carries it, so tags "
    "stay consistent across the whole vault without editing each note by hand.\n"
)


def test_small_sections_merge_into_the_chunk_before_them() -> None:
    plain = parse_markdown(REFERENCE, fallback_title="cli")
    assert [c.heading for c in plain.chunks][:3] == ["CLI reference", "Tags", "Sync"]
    merged = parse_markdown(REFERENCE, fallback_title="cli", min_section_tokens=16)
    assert len(merged.chunks) == 1
    (chunk,) = merged.chunks
    assert chunk.heading == "CLI reference" and chunk.level == 1
    assert "## Tags" in chunk.content and "Commands for Seeds." in chunk.content
    assert REFERENCE.encode()[chunk.byte_start : chunk.byte_end].decode() == chunk.content
    lines = REFERENCE.splitlines()
    assert [(s.line, s.level, s.heading) for s in chunk.sections][:2] == [
        (5, 2, "Tags"),
        (9, 2, "Sync"),
    ]
    assert all(lines[s.line - 1] == f"## {s.heading}" for s in chunk.sections)
    assert chunk.sections[-1].heading_path == ("CLI reference", "Seeds")
    assert not any(c.sections for c in plain.chunks)


def test_a_small_preamble_joins_the_first_section_under_its_heading() -> None:
    text = "[![build](badge.svg)](ci)\n\n# Guide\n\nHow to start.\n\n## Next\n\nMore.\n"
    (chunk,) = parse_markdown(text, fallback_title="x", min_section_tokens=16).chunks
    assert (chunk.heading, chunk.heading_path, chunk.line_start) == ("Guide", ("Guide",), 1)
    assert [s.heading for s in chunk.sections] == ["Next"]
    assert "Guide" in chunk.context


def test_a_deeper_merged_section_keeps_its_whole_heading_path() -> None:
    text = "# Top\n\n## A\n\nOne line.\n\n### A1\n\nTwo.\n\n## B\n\nThree.\n"
    (chunk,) = parse_markdown(text, fallback_title="x", min_section_tokens=16).chunks
    assert chunk.heading_path == ("Top", "A")  # an empty "# Top" is no chunk of its own
    assert [(s.heading, s.heading_path) for s in chunk.sections] == [
        ("A1", ("Top", "A", "A1")),
        ("B", ("Top", "B")),
    ]


def test_a_hit_and_a_line_range_in_a_merged_chunk_name_their_own_section(
    tmp_path: Path,
) -> None:
    from click.testing import CliRunner

    from groove_core.cli.main import build_cli

    kb = make_kb(tmp_path / "kb", {"cli.md": REFERENCE})
    app = open_kb(kb)
    try:
        (hit,) = app.search("publish", limit=1).results
        assert (hit.heading, hit.heading_path, hit.level) == (
            "Publish",
            ("CLI reference", "Publish"),
            2,
        )
        assert (hit.line_start, hit.line_end) == (1, 35)  # the whole merged chunk
        (intro,) = app.search("every command", limit=1).results
        assert intro.heading_path == ("CLI reference",)
        # a match in two sections, one each: the first of them names the hit
        (both,) = app.search("vaults notes", limit=1).results
        assert both.heading == "Vaults"
    finally:
        app.close()
    out = CliRunner().invoke(build_cli(None), ["get", "cli.md:9-11", "--kb", str(kb)]).output
    assert out.splitlines()[0] == "cli.md:9-11  CLI reference > Sync"


def test_the_merge_keeps_the_token_budget_and_the_heading_levels() -> None:
    text = "## A\n\nOne line.\n\n### A1\n\nTwo.\n\n# B\n\nThree.\n\n## " + "C\n\n" + "w " * 200
    chunks = parse_markdown(text, fallback_title="x", min_section_tokens=16).chunks
    # A1 joins A; B (an h1) never joins an h2's group; C's 100 tokens fit B's budget
    assert [c.heading for c in chunks] == ["A", "B"]
    small = parse_markdown(text, fallback_title="x", max_tokens=50, min_section_tokens=16)
    assert [c.heading for c in small.chunks][:3] == ["A", "B", "C"]
    assert all(c.token_count <= 50 for c in small.chunks)


def _first(tmp_path: Path, extra: str, query: str) -> str:
    kb = make_kb(
        tmp_path / "kb",
        {"cli.md": REFERENCE, "tags.md": FEATURE},
        config=FAST_CONFIG + extra,
    )
    app = open_kb(kb)
    try:
        return app.searcher().search(query, limit=5).results[0].path
    finally:
        app.close()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("[index]\nmin_section_tokens = 0\n", "cli.md"),  # each section a chunk: the stub wins
        ("", "tags.md"),  # the default: merged into its page
    ],
)
def test_the_feature_page_comes_before_a_reference_stub(
    tmp_path: Path, extra: str, expected: str
) -> None:
    assert _first(tmp_path, extra, "tags") == expected


@pytest.mark.parametrize(
    "text",
    [
        # lines the markup takes out of the content (doc-site containers)
        "# Main\n\nIntro.\n\n## Alpha\n\n::: tip\nOne tip.\n:::\n\n::: warning\nCareful.\n:::"
        "\n\n## Beta\n\nzebracorn lives here.\n",
        # a lone carriage return ends each line
        "# Main\r\rIntro.\r\r## Alpha\r\rA line.\r\r## Beta\r\rzebracorn lives here.\r",
        # a multi-byte heading and text before the match
        "# 主\n\n導入。\n\n## Alpha\n\n短い。\n\n## Beta\n\n日本語の後の zebracorn。\n",
    ],
    ids=["containers", "lone-cr", "multibyte"],
)
def test_a_match_is_named_after_its_own_section_whatever_the_content_lost(
    tmp_path: Path, text: str
) -> None:
    kb = make_kb(tmp_path / "kb", {"doc.md": text})
    app = open_kb(kb)
    try:
        (hit,) = app.search("zebracorn", limit=1).results
        assert hit.heading == "Beta", hit.content
        (chunk,) = app.store.document_chunks(hit.doc_id)
        raw = chunk.content.encode()
        for section in chunk.sections:  # each offset is where its heading line starts
            assert raw[section.offset :].startswith(f"## {section.heading}".encode())
    finally:
        app.close()


def test_chunks_cut_under_other_settings_are_pointed_out_until_a_rebuild(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from groove_core.cli.main import build_cli
    from groove_core.sqlite.store import Store
    from tests.helpers import to_schema_3

    kb = make_kb(tmp_path / "kb", {"cli.md": REFERENCE}, config=SECTION_CHUNKS)
    cli = build_cli(None)

    def run(*args: str) -> str:
        result = CliRunner().invoke(
            cli, [*args, "--kb", str(kb)] if args[0] != "index" else [*args, str(kb)]
        )
        assert result.exit_code == 0, result.output
        return result.output

    assert "note:" not in run("index")
    assert "chunking:" not in run("status")
    (kb / "groove.toml").write_text(FAST_CONFIG, encoding="utf-8")  # the default: merged
    said = "the chunks were cut with min_section_tokens = 0"
    assert said in run("index") and "'groove index --rebuild'" in run("index")
    assert said in run("status")
    assert "note:" not in run("index", "--rebuild")
    assert "chunking:" not in run("status")
    # an index whose files are all gone says nothing, and cuts the next ones as configured
    (kb / "groove.toml").write_text(SECTION_CHUNKS, encoding="utf-8")
    (kb / "cli.md").unlink()
    assert "note:" not in run("index") and "chunking:" not in run("status")
    (kb / "cli.md").write_text(REFERENCE, encoding="utf-8")
    assert "note:" not in run("index")
    (kb / "groove.toml").write_text(FAST_CONFIG, encoding="utf-8")
    assert said in run("index")
    run("index", "--rebuild")
    # An index from before merged chunks kept their headings says so after its upgrade.
    to_schema_3(kb / ".groove" / "index.sqlite")
    Store.open(kb / ".groove" / "index.sqlite").close()
    assert "by an earlier groove" in run("status")
