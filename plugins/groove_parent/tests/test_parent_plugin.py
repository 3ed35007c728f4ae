"""The parent plugin inside a real search: whole documents, siblings, the cap, NULL token
counts, unchanged ranking, match_spans over the expanded text, CLI switches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from groove_core.app import Groove
from groove_core.chunking import estimate_tokens
from groove_core.cli import build_cli
from groove_core.config import parse_config
from groove_core.models import SearchHit
from groove_core.plugins import make_plugin_manager
from groove_core.query import QueryError
from groove_core.sqlite.store import connect
from groove_core.testing import SECTION_CHUNKS, installed_plugin, make_kb, open_kb


def _section(name: str, topic: str) -> str:
    """A level-2 section of about 150 tokens (600+ characters) about ``topic``."""
    sentence = f"The {topic} procedure for the {name} stage is checked twice by the crew. "
    return f"## {name}\n\n" + sentence * 9 + "\n"


FILES = {
    "small.md": "# Tea\n\nNotes on tea.\n\n## Boil\n\nBoil water in the kettle.\n\n"
    "## Pour\n\nPour slowly over the leaves.\n",
    "long.md": "# Manual\n\nThis manual covers the launch.\n\n"
    + _section("Fuelling", "fuel")
    + "\n"
    + _section("Ignition", "ignition")
    + "\n"
    + _section("Ascent", "ascent")
    + "\n### Ascent telemetry\n\nTelemetry is logged.\n\n"
    + _section("Orbit", "orbit"),
}


def _kb(tmp_path: Path, parent: str = "") -> Path:
    config = SECTION_CHUNKS + (f"[search.parent_retriever]\n{parent}\n" if parent else "")
    return make_kb(tmp_path / "kb", FILES, config=config)


def _top(app: Groove, query: str, **options: Any) -> SearchHit:
    return app.search(query, limit=1, options=options).results[0]


def _chunks(app: Groove, path: str) -> list[dict[str, Any]]:
    doc = next(d for d in app.store.documents() if d.path == path)
    return app.store.document_chunks(doc.doc_id)


def _ranking(hits: tuple[SearchHit, ...]) -> list[tuple[int, float, int, str, int, int]]:
    return [(h.chunk_id, h.score, h.rank, h.path, h.line_start, h.line_end) for h in hits]


def test_the_plugin_is_discovered_through_its_entry_point() -> None:
    info = installed_plugin("parent")
    assert (info.distribution, info.status) == ("groove-parent", "enabled")
    assert info.hooks == ("groove_config_sections", "groove_expand", "groove_stage_switches")
    assert (info.stages, info.off_by_default) == (("parent",), True)


def test_a_small_hit_returns_its_whole_document(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    plain, expanded = _top(app, "kettle"), _top(app, "kettle", parent=True)
    assert plain.heading == "Boil" and plain.expanded_from is None
    chunks = _chunks(app, "small.md")
    assert expanded.content == "\n\n".join(c.content for c in chunks)
    assert [(r.line_start, r.byte_start, r.byte_end) for r in expanded.expanded_from or ()] == [
        (c.line_start, c.byte_start, c.byte_end) for c in chunks
    ]
    assert _ranking((expanded,)) == _ranking((plain,))
    assert expanded.to_json()["expanded_from"][0] == {
        "line_start": 1,
        "line_end": 3,
        "byte_start": 0,
        "byte_end": chunks[0].byte_end,
    }


def test_a_large_hit_merges_only_its_adjacent_siblings(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    hit = _top(app, "ignition procedure", parent=True)
    assert hit.heading == "Ignition"
    # Fuelling and Ignition are siblings; the level-1 intro is the parent, and the level-3
    # telemetry child ends the run before Orbit.
    assert hit.content.startswith("## Fuelling") and hit.content.endswith(
        "checked twice by the crew."
    )
    assert "## Ascent" in hit.content
    assert "Telemetry" not in hit.content and "Orbit" not in hit.content
    assert "This manual" not in hit.content
    assert len(hit.expanded_from or ()) == 3


def test_the_cap_limits_what_is_merged(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path, "enabled = true\nmax_expanded_tokens = 350"))
    hit = _top(app, "ignition procedure")
    ranges = hit.expanded_from or ()
    assert len(ranges) == 2  # a third ~150-token section would pass 350
    kept = [
        c
        for c in _chunks(app, "long.md")
        if (c.byte_start, c.byte_end) in {(r.byte_start, r.byte_end) for r in ranges}
    ]
    assert sum(c.token_count for c in kept) <= 350


def test_null_token_counts_of_an_old_index_still_obey_the_cap(tmp_path: Path) -> None:
    kb = _kb(tmp_path, "enabled = true\nmax_expanded_tokens = 350")
    app = open_kb(kb)
    conn = connect(app.index_file)
    conn.execute("UPDATE chunks SET token_count = NULL")  # what an old index holds
    conn.close()
    app.close()
    old = Groove.open(kb)
    chunks = _chunks(old, "long.md")
    assert all(c.token_count is None for c in chunks)
    estimated = {(c.byte_start, c.byte_end): estimate_tokens(c.content) for c in chunks}
    assert sum(estimated.values()) > 350  # counting NULL as 0 would merge all of this
    hit = _top(old, "ignition procedure")
    ranges = hit.expanded_from or ()
    assert len(ranges) == 2
    assert sum(estimated[(r.byte_start, r.byte_end)] for r in ranges) <= 350


def test_ranking_and_pool_are_untouched(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    for query in ("kettle", "ascent telemetry", "procedure -orbit", "launch"):
        plain, _, plain_ctx = app.search_explained(query, limit=10)
        expanded, _, ctx = app.search_explained(query, limit=10, options={"parent": True})
        assert ctx.pool_size == plain_ctx.pool_size == 10
        assert _ranking(expanded.results) == _ranking(plain.results)
        assert expanded.low_confidence == plain.low_confidence
        assert any(h.expanded_from for h in expanded.results)


def test_match_spans_point_into_the_expanded_content(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    hits = app.search("procedure", limit=3, options={"parent": True}).results
    beyond_the_chunk = 0
    for hit in hits:
        data = hit.content.encode()
        assert hit.match_spans
        for span in hit.match_spans:
            assert data[span.start : span.end].decode().casefold() == "procedure"
        original = next(c for c in _chunks(app, hit.path) if c.chunk_id == hit.chunk_id)
        beyond_the_chunk += sum(s.start >= len(original.content.encode()) for s in hit.match_spans)
    assert beyond_the_chunk > 0


def test_an_excluded_word_can_reappear_in_expanded_content(tmp_path: Path) -> None:
    # Documented in the README: expansion is not re-checked against exclusions.
    app = open_kb(_kb(tmp_path))
    plain = _top(app, "pour -kettle")
    expanded = _top(app, "pour -kettle", parent=True)
    assert plain.heading == "Pour" and "kettle" not in plain.content
    assert "kettle" in expanded.content


def test_a_non_boolean_option_is_a_clear_query_error(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    with pytest.raises(QueryError, match="option 'parent' must be true or false, got 1"):
        _top(app, "kettle", parent=1)


def _cli(kb: Path, *args: str) -> Result:
    plugins = make_plugin_manager(parse_config({}), validate=False)
    return CliRunner().invoke(build_cli(plugins), [*args, "--kb", str(kb)])


def test_cli_flags_switch_expansion_per_query(tmp_path: Path) -> None:
    kb = _kb(tmp_path, "enabled = true")
    open_kb(kb)
    assert "--parent / --no-parent" in _cli(kb, "search", "--help").output
    # No switch: the config (enabled) decides; a switch overrides it for the one query.
    for switches, expanded in (((), True), (("--parent",), True), (("--no-parent",), False)):
        result = _cli(kb, "search", "kettle", "--json", *switches)
        assert result.exit_code == 0, result.output
        top = json.loads(result.output)["results"][0]
        assert ("expanded_from" in top) is expanded


def test_enabling_parent_while_the_plugin_is_disabled_names_the_package(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    (kb / "groove.toml").write_text(
        SECTION_CHUNKS
        + '[plugins]\ndisabled = ["parent"]\n[search.parent_retriever]\nenabled = true\n'
    )
    result = _cli(kb, "search", "kettle")
    assert result.exit_code == 1
    assert "[search.parent_retriever]: no enabled plugin provides this section" in result.output
    assert "[plugins] disabled keeps parent (groove-parent) from loading" in result.output
    assert "Traceback" not in result.output
