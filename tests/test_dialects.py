"""Dialect cleaning (MDX, doc sites, Obsidian): markup never reaches headings or chunks,
while every range still points into the original file."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaldata import collection
from groove_core.chunking import ParsedDocument, _strip_anchor, parse_markdown
from groove_core.dialects import COMMONMARK, DOCS, OBSIDIAN, Markup, clean, markup_for
from groove_core.testing import cost_ratio, make_kb, open_kb

MDX = """---
Title: Use State
TAGS: [react, hooks]
---
import {Sandpack} from '../components';
export const meta = {
  a: 1,
}

# useState {/*usestate*/}

<Intro>

`useState` is a React Hook. Write `<div>` and `{/* x */}` in code.

</Intro>

## Usage {/*usage*/}

<DeepDive>

#### Why state? {/*why*/}

Because state <CodeStep step={1}>persists</CodeStep> between renders.

```js
import { useState } from 'react';
{/* kept in code */}
```

</DeepDive>

<Solution>
</Solution>
"""


def _parse(text: str, markup: Markup = DOCS) -> ParsedDocument:
    return parse_markdown(text, fallback_title="fallback", markup=markup)


def _raw(text: str, line_start: int, line_end: int) -> str:
    return "\n".join(text.split("\n")[line_start - 1 : line_end])


def test_mdx_markup_never_reaches_headings_or_chunks() -> None:
    parsed = _parse(MDX)
    headings = [c.heading for c in parsed.chunks]
    assert headings == ["useState", "Why state?"]
    assert parsed.chunks[1].heading_path == ("useState", "Usage", "Why state?")
    joined = "\n".join(c.content for c in parsed.chunks)
    for markup in ("import {Sandpack}", "export const", "{/*usestate*/}", "<Intro>", "<DeepDive>"):
        assert markup not in joined
    assert "Because state persists between renders." in joined
    # Code is content: nothing inside a fence or a code span is touched.
    assert "import { useState } from 'react';\n{/* kept in code */}" in joined
    assert "`<div>` and `{/* x */}`" in joined


def test_ranges_point_into_the_original_file() -> None:
    parsed = _parse(MDX)
    lines = MDX.split("\n")
    data = MDX.encode()
    for chunk in parsed.chunks:
        raw = _raw(MDX, chunk.line_start, chunk.line_end)
        assert data[chunk.byte_start : chunk.byte_end].decode() == raw.strip("\n")
        # Every kept line of the content starts with words of one of the chunk's own lines.
        own = lines[chunk.line_start - 1 : chunk.line_end]
        for line in filter(str.strip, chunk.content.split("\n")):
            assert any(line.split()[0] in source for source in own), line
    # The markup-only lines before and after the prose are outside every chunk.
    why = parsed.chunks[1]
    assert lines[why.line_start - 1].startswith("#### Why state?")
    assert lines[why.line_end - 1] == "```"


def test_no_chunk_is_markup_only() -> None:
    text = "# Title\n\nSome prose.\n\n## Empty\n\n<Sandpack>\n</Sandpack>\n\n## Next\n\nMore.\n"
    parsed = _parse(text)
    assert [c.heading for c in parsed.chunks] == ["Title", "Empty", "Next"]
    assert parsed.chunks[1].content == "## Empty"
    only_markup = "<Intro>\n\n</Intro>\n\n{/* nothing */}\n"
    assert _parse(only_markup).chunks == ()


def test_front_matter_keys_match_case_insensitively() -> None:
    parsed = _parse(MDX, COMMONMARK)
    assert parsed.title == "Use State"
    assert parsed.tags == ("react", "hooks")
    exact = parse_markdown("---\ntitle: a\nTitle: b\n---\nx\n", fallback_title="f")
    assert exact.title == "a"


def test_doc_site_containers_shortcodes_and_anchors() -> None:
    text = (
        "# Guide {#guide}\n\n::: tip Custom Title\nKeep this text.\n:::\n\n"
        ":::note[Docusaurus]\nAdmonition body.\n:::\n\n"
        "{{< note >}}Hugo body{{< /note >}}\n{{% alert %}}\n\n## Escaped \\{#not-an-anchor}\n\nx\n"
    )
    parsed = _parse(text)
    assert [c.heading for c in parsed.chunks] == ["Guide", "Escaped"]
    assert "\\{#not-an-anchor}" in parsed.chunks[1].content  # escaped: text, kept
    content = parsed.chunks[0].content
    assert content == (
        "# Guide\n\nCustom Title\nKeep this text.\n\n[Docusaurus]\nAdmonition body.\n\nHugo body"
    )
    # commonmark cleans nothing but still keeps the anchor out of the heading (as before).
    plain = _parse(text, COMMONMARK)
    assert plain.chunks[0].heading == "Guide"
    assert "::: tip" in plain.chunks[0].content


def test_obsidian_links_embeds_tags_and_callouts() -> None:
    text = (
        "---\ntags: [front]\n---\n# Note\n\n"
        "See [[Other Note]], [[Other Note|the alias]], [[Other#Section]] and ![[image.png]].\n"
        "#project/alpha and #idea, not #123 nor `#code` nor x#y.\n\n"
        "> [!note] Callout title\n> callout body\n\n```\n#not-a-tag [[not a link]]\n```\n"
    )
    parsed = _parse(text, OBSIDIAN)
    content = parsed.chunks[0].content
    assert "See Other Note, the alias, Other Section and." in content
    assert "image.png" not in content
    assert "> Callout title\n> callout body" in content
    assert "#not-a-tag [[not a link]]" in content
    assert parsed.tags == ("front", "project/alpha", "idea")
    kinds = [(link.kind, link.target) for link in parsed.links]
    assert kinds == [
        ("wikilink", "Other Note"),
        ("wikilink", "Other Note"),
        ("wikilink", "Other"),
        ("embed", "image.png"),
    ]
    # Outside Obsidian, #words are prose, not tags.
    assert _parse(text, DOCS).tags == ("front",)


def test_auto_dialect_from_extension_vault_and_content() -> None:
    assert markup_for("auto", "a.md", "plain", vault=False) == DOCS
    assert markup_for("auto", "a.mdx", "[[x]]", vault=False) == DOCS
    assert markup_for("auto", "a.md", "see [[x]]", vault=False) == OBSIDIAN
    assert markup_for("auto", "a.md", "plain", vault=True) == OBSIDIAN
    assert markup_for("commonmark", "a.mdx", "[[x]]", vault=True) == COMMONMARK
    assert markup_for("obsidian", "a.md", "", vault=False) == OBSIDIAN


def test_mask_keeps_length_and_line_breaks() -> None:
    text = "a <b>c</b>\r\n{/* x\ny */} [[n|m]]\r:::tip\n"
    masked = clean(text, 0, OBSIDIAN).text
    assert len(masked) == len(text)
    assert [i for i, c in enumerate(masked) if c in "\r\n"] == [
        i for i, c in enumerate(text) if c in "\r\n"
    ]


def test_hostile_markup_stays_linear() -> None:
    # Unclosed comments, tags and shortcodes by the thousand: each rule's scan is bounded.
    text = "# h\n\n" + "{/* <a b='x {{< " * 20_000 + "\n"
    parsed = _parse(text)
    assert parsed.chunks


_HOSTILE_SIZE = 200_000
_HOSTILE_LINES = {
    "fence": "`" * (_HOSTILE_SIZE - 2) + "x`",
    "backtick-run": "x" + "`" * (_HOSTILE_SIZE // 2) + "a" * (_HOSTILE_SIZE // 2),
    "backtick-runs": "".join("x" + "`" * n for n in range(1, 640)),  # no two of one length
    "indent": " " * (_HOSTILE_SIZE - 1) + "x",
    "script": "<script>" * (_HOSTILE_SIZE // 8),
    "html-comment": "<!--" * (_HOSTILE_SIZE // 4),
    "mdx-comment": "{/*" * (_HOSTILE_SIZE // 3),
    "shortcode": "{{<" * (_HOSTILE_SIZE // 3),
    "esm-import": "import {" + " " * (_HOSTILE_SIZE - 9) + "x",
}


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Fail instead of hanging: a regex that backtracks quadratically over 200 KB runs for
    minutes, and the regex engine checks for signals while it matches."""

    def expire(signum: int, frame: object) -> None:
        raise AssertionError(f"took over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("kind", sorted(_HOSTILE_LINES))
def test_one_hostile_line_costs_about_as_much_as_prose(kind: str) -> None:
    # A file is cleaned before it is chunked, up to the 10 MB byte cap: one line built to make
    # a rule backtrack (a backtick run, openers by the thousand) must not cost more than
    # prose. These read 1-5x; before, a 40 KB line cost seconds and 200 KB minutes.
    hostile = _HOSTILE_LINES[kind][:_HOSTILE_SIZE]
    prose = ("Some prose with `code` and <b>tags</b>, as docs have. " * 4000)[:_HOSTILE_SIZE]
    with _deadline(20):
        ratio = cost_ratio(
            lambda: clean(hostile, 0, OBSIDIAN),
            lambda: clean(prose, 0, OBSIDIAN),
            rounds=5,
            repeat=2,
        )
    assert ratio < 20, ratio


_HOSTILE_HEADINGS = {
    "spaces": "# h" + " " * _HOSTILE_SIZE + "x\n",
    "tabs": "# h" + "\t" * _HOSTILE_SIZE + "x\n",
    "wide-spaces": "# h" + " \t\u3000" * (_HOSTILE_SIZE // 3) + "x\n",
    "anchor-openers": "# h" + " {#a" * (_HOSTILE_SIZE // 4) + "\n",
    "spaces-then-anchor": "# h" + " " * _HOSTILE_SIZE + "{#id}\n",
    "setext": "h" + " " * _HOSTILE_SIZE + "x\n===\n",
    "closing-hashes": "# h" + " #" * (_HOSTILE_SIZE // 2) + "\n",
}


@pytest.mark.parametrize(
    "markup", [COMMONMARK, DOCS, OBSIDIAN], ids=["commonmark", "docs", "obsidian"]
)
@pytest.mark.parametrize("kind", sorted(_HOSTILE_HEADINGS))
def test_one_long_heading_costs_about_as_much_as_prose(kind: str, markup: Markup) -> None:
    # The heading's anchor was searched for from every position of a run of spaces: 100 KB
    # of spaces in one heading took 53 s, 1 MB about an hour and a half, in every dialect.
    # The heading is parsed in time linear in its length now (these read 1-2x).
    heading = _HOSTILE_HEADINGS[kind]
    prose = ("Some prose with `code` and words, as notes have. " * 5000)[: len(heading)]
    with _deadline(30):
        ratio = cost_ratio(
            lambda: parse_markdown(heading, fallback_title="t", max_chunks=5000, markup=markup),
            lambda: parse_markdown(prose, fallback_title="t", max_chunks=5000, markup=markup),
            rounds=3,
            repeat=2,
        )
    assert ratio < 4, ratio


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=" \t\u3000{}#\\ax", max_size=24))
def test_the_anchor_is_stripped_as_the_backtracking_pattern_did(heading: str) -> None:
    # What was stripped is kept: the quadratic pattern, searched from every position.
    assert _strip_anchor(heading) == re.sub(r"\s*(?<!\\)\{#[^{}]*\}\s*$", "", heading)


def test_mdx_files_are_indexed_and_clean_in_search(tmp_path: Path) -> None:
    kb = make_kb(
        tmp_path / "kb",
        {"docs/state.mdx": MDX, "notes/plain.md": "# Plain\n\nNothing special here.\n"},
    )
    app = open_kb(kb)
    paths = sorted(d.path for d in app.store.documents())
    assert paths == ["docs/state.mdx", "notes/plain.md"]
    hits = app.search("state persists between renders", limit=3).results
    top = next(h for h in hits if h.path == "docs/state.mdx")
    assert "<CodeStep" not in top.content and "{/*" not in top.heading
    assert app.search("useState", tags=("HOOKS",)).results


def test_commonmark_dialect_indexes_md_only(tmp_path: Path) -> None:
    kb = make_kb(
        tmp_path / "kb",
        {"a.mdx": MDX, "b.md": "# B\n\n<Intro>x</Intro>\n"},
    )
    (kb / "groove.toml").write_text(
        (kb / "groove.toml").read_text() + '\n[index]\ndialect = "commonmark"\n'
    )
    app = open_kb(kb)
    assert [d.path for d in app.store.documents()] == ["b.md"]
    assert "<Intro>" in app.search("Intro").results[0].content


_TAG_IN_HEADING = re.compile(r"</?[A-Za-z][\w.:-]*[\s/>]")


@pytest.mark.parametrize("name", ["md-vue-docs-en", "md-vue-docs-ja"])
def test_real_vue_tree_has_no_markup_only_chunk_nor_markup_heading(name: str) -> None:
    """The whole VitePress tree: no chunk is markup, no heading holds an anchor, a comment or
    a tag (a tag shown as code, as in ``## `<KeepAlive>` ``, is the heading's text)."""
    files = sorted((collection(name) / "docs").rglob("*.md"))
    assert len(files) > 100
    chunks = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        parsed = _parse(text)
        for chunk in parsed.chunks:
            chunks += 1
            visible = clean(chunk.content, 0, DOCS).text
            assert re.search(r"[^\W_]", visible.replace("#", "")), (path, chunk.line_start)
            for heading in chunk.heading_path:
                assert "{" not in heading and "/*" not in heading, (path, heading)
                for tag in _TAG_IN_HEADING.findall(heading):
                    assert re.search(r"[`\\]" + re.escape(tag), text), (path, heading)
    assert chunks > 1000
