"""One-line reference sections against the pages they point to (issue #44): with ``[index]
min_section_tokens = 32`` the chunker merges a section with less text than that into the
chunk before it, so a heading and a line no longer outrank the page it points to."""

from __future__ import annotations

from pathlib import Path

import pytest

from groove_core.chunking import parse_markdown
from groove_core.testing.kb import FAST_CONFIG, make_kb, open_kb

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
        ("", "cli.md"),  # the default: each section its own chunk, and the stub wins
        ("[index]\nmin_section_tokens = 32\n", "tags.md"),  # merged into its page
    ],
)
def test_the_feature_page_comes_before_a_reference_stub(
    tmp_path: Path, extra: str, expected: str
) -> None:
    assert _first(tmp_path, extra, "tags") == expected
