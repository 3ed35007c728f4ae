"""The prf leg inside real searches over a tiny KB: the terms it adds, what it finds with
them, --explain, the caps, exclusions and filters, the switch, bad settings, and both
storage backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from groove_expansion import plugin
from groove_postgres.testing import postgres_dsn, postgres_server, store_toml  # noqa: F401

from groove_core import words
from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import parse_config
from groove_core.models import LegResult
from groove_core.plugins import make_plugin_manager
from groove_core.testing import FAST_CONFIG, check_candidate_leg, installed_plugin, make_kb, open_kb

#: Two notes about gliders that also speak of soaring and thermals, a third about soaring
#: birds that never says "glider", and unrelated notes (so that IDF is above 0).
NOTES = {
    "glide/one.md": "# Gliders\n\nA glider climbs in a thermal while soaring over the ridge.\n",
    "glide/two.md": "# Glider pilots\n\nGlider pilots find a thermal and keep soaring for hours.\n",
    "birds.md": "# Hawks\n\nHawks ride a thermal, soaring for a long time without a flap.\n",
    "bread.md": "# Bread\n\nKnead the dough and let it rise overnight.\n",
    "garden.md": "# Garden\n\nTomatoes need sun, water and a stake.\n",
    "tax.md": "# Taxes\n\nFile the return before the deadline in April.\n",
    "music.md": "# Piano\n\nPractise scales slowly with a metronome.\n",
    "trains.md": "# Trains\n\nThe night train leaves the station at ten.\n",
}


#: Two words, so that up to two terms are added (no more than the query has).
QUERY = "glider pilots"


def _kb(
    tmp_path: Path, prf: str = "", config: str = FAST_CONFIG, min_terms: int | None = 1
) -> Path:
    """A KB of NOTES; ``min_terms = 1`` unless said, so that the short queries of these tests
    are expanded (the default, 5, has a test of its own; None leaves the section out)."""
    lines = [] if min_terms is None else [f"min_terms = {min_terms}"]
    lines += [prf] if prf else []
    section = "[search.prf]\n" + "\n".join(lines) + "\n" if lines else ""
    return make_kb(tmp_path / "kb", NOTES, config=config + section)


def _legs(app: Groove, query: str, **args: Any) -> dict[str, LegResult]:
    _, legs, _ = app.search_explained(query, **args)
    return {leg.name: leg for leg in legs}


def _paths(app: Groove, leg: LegResult) -> set[str]:
    rows = app.store.chunk_rows([hit.chunk_id for hit in leg.hits])
    return {row.path for row in rows.values()}


def _cli(kb: Path, *args: str) -> Result:
    plugins = make_plugin_manager(parse_config({}), validate=False)
    return CliRunner().invoke(build_cli(plugins), [*args, "--kb", str(kb)])


def test_the_plugin_is_discovered_through_its_entry_point() -> None:
    info = installed_plugin("prf")
    assert (info.distribution, info.status) == ("groove-expansion", "enabled")
    assert info.hooks == ("groove_config_sections", "groove_legs", "groove_stage_switches")
    assert (info.stages, info.off_by_default) == (("prf",), True)


def test_it_adds_the_feedback_terms_and_finds_what_the_query_words_cannot(
    tmp_path: Path,
) -> None:
    app = open_kb(_kb(tmp_path))
    legs = _legs(app, QUERY, options={"prf": True})
    prf, word = legs["prf"], legs["word"]
    # In both glider notes: soaring and thermal (stemmed as the word leg stems them);
    # "ridge" and "hours" are in one note only.
    assert prf.meta["added_terms"] == ["soar", "thermal"]
    assert prf.meta["feedback"] == 2
    assert prf.meta["expr"] == '"glider" OR "pilot" OR "soar" OR "thermal"'
    assert "birds.md" not in _paths(app, word)
    assert _paths(app, prf) == {"glide/one.md", "glide/two.md", "birds.md"}
    assert prf.kind == "lexical" and "terms" not in prf.meta  # the word leg stays the terms leg


def test_no_more_terms_are_added_than_the_query_has(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    assert _legs(app, "glider", options={"prf": True})["prf"].meta["added_terms"] == ["soar"]


def test_it_is_off_by_default_and_then_changes_nothing(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path, min_terms=None))
    assert "prf" not in _legs(app, "glider")
    assert "prf" not in _legs(app, "glider", options={"prf": False})
    plain = app.search("glider", limit=8).results
    other = open_kb(_kb(tmp_path / "other", min_terms=None), entry_points=False)
    without = other.search("glider", limit=8)
    assert [(h.path, h.score, h.rank) for h in plain] == [
        (h.path, h.score, h.rank) for h in without.results
    ]


def test_the_setting_turns_it_on_and_a_switch_off_per_query(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path, "enabled = true"))
    assert "prf" in _legs(app, "glider")
    assert "prf" not in _legs(app, "glider", options={"prf": False})


def test_explain_shows_the_added_terms(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    open_kb(kb)
    assert "--prf / --no-prf" in _cli(kb, "search", "--help").output
    text = _cli(kb, "search", QUERY, "--prf", "--explain")
    assert text.exit_code == 0, text.output
    assert "leg prf (lexical)" in text.output
    assert "  added terms: soar, thermal" in text.output
    data = json.loads(_cli(kb, "search", QUERY, "--prf", "--explain", "--json").output)
    leg = next(leg for leg in data["explain"]["legs"] if leg["name"] == "prf")
    assert leg["added_terms"] == ["soar", "thermal"]
    assert "added terms" not in _cli(kb, "search", QUERY, "--explain").output


#: Five word terms: as many as the default ``min_terms`` asks for.
LONG_QUERY = "how do glider pilots stay up for hours over the ridge"


def test_a_query_of_fewer_terms_than_min_terms_is_not_expanded(tmp_path: Path) -> None:
    kb = _kb(tmp_path, min_terms=plugin.MIN_QUERY_TERMS)
    app = open_kb(kb)
    short = _legs(app, QUERY, options={"prf": True})["prf"]
    assert short.hits == () and short.meta["skipped"]
    assert short.meta["reason"] == "2 word terms, fewer than min_terms = 5"
    assert "added_terms" not in short.meta
    plain = app.search(QUERY, limit=8)
    forced = app.search(QUERY, limit=8, options={"prf": True})
    assert [(h.path, h.score) for h in forced.results] == [(h.path, h.score) for h in plain.results]
    # Asked for on this query, it says why it did not run; on by configuration, it does not.
    said = "query expansion (prf) not applied: 2 word terms, fewer than min_terms = 5"
    assert said in forced.warnings and said not in plain.warnings
    configured = open_kb(_kb(tmp_path / "on", "enabled = true", min_terms=plugin.MIN_QUERY_TERMS))
    assert not configured.search(QUERY, limit=8).warnings
    text = _cli(kb, "search", QUERY, "--prf", "--explain").output
    assert "  (skipped: 2 word terms, fewer than min_terms = 5)" in text
    data = json.loads(_cli(kb, "search", "glider", "--prf", "--explain", "--json").output)
    leg = next(leg for leg in data["explain"]["legs"] if leg["name"] == "prf")
    assert (leg["skipped"], leg["reason"]) == (True, "1 word term, fewer than min_terms = 5")
    terms, _ = words.query_terms([(LONG_QUERY, False)])
    assert len(terms) == plugin.MIN_QUERY_TERMS
    long = _legs(app, LONG_QUERY, options={"prf": True})["prf"]
    assert not long.meta.get("skipped") and long.meta["added_terms"]
    assert "birds.md" in _paths(app, long)


def test_the_settings_cap_passages_and_terms(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path, "passages = 1\nterms = 1"))
    prf = _legs(app, "glider", options={"prf": True})["prf"]
    # One passage read: its terms need no second passage; one term kept.
    assert prf.meta["feedback"] == 1
    assert len(prf.meta["added_terms"]) == 1


def test_the_expanded_query_stays_within_the_word_legs_term_cap(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    filler = [f"zq{i}" for i in range(words.MAX_TERMS)]
    full = _legs(app, " ".join(["glider", *filler[: words.MAX_TERMS - 1]]), options={"prf": True})
    assert full["prf"].meta["skipped"] and full["prf"].meta["added_terms"] == []
    room = _legs(app, " ".join(["glider", *filler[: words.MAX_TERMS - 2]]), options={"prf": True})
    assert room["prf"].meta["added_terms"] == ["soar"]
    assert room["prf"].meta["expr"].count(" OR ") == words.MAX_TERMS - 1


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ("passages = 51", "search.prf.passages"),
        ("terms = 0", "search.prf.terms"),
        ("min_terms = 49", "search.prf.min_terms"),
        ("max_terms = 5", "max_terms"),
    ],
)
def test_a_bad_setting_is_one_clear_line(tmp_path: Path, setting: str, shown: str) -> None:
    kb = _kb(tmp_path, setting, min_terms=None)
    result = _cli(kb, "search", "glider")
    assert result.exit_code == 1
    assert shown in result.output and "[search.prf]" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_exclusions_are_neither_found_nor_added(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    prf = _legs(app, "glider -ridge", options={"prf": True})["prf"]
    # one.md (with "ridge") is excluded: two.md alone is the feedback.
    assert prf.meta["feedback"] == 1
    assert "glide/one.md" not in _paths(app, prf)
    assert prf.meta["added_terms"] and "ridg" not in prf.meta["added_terms"]
    hawks = _legs(app, "glider -hawks", options={"prf": True})["prf"]
    assert "birds.md" not in _paths(app, hawks)


def test_filters_apply_to_the_feedback_and_the_leg(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path))
    prf = _legs(app, "glider", path="glide/**", options={"prf": True})["prf"]
    assert _paths(app, prf) == {"glide/one.md", "glide/two.md"}


def test_it_keeps_the_candidate_leg_contract(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path, "enabled = true"))
    check_candidate_leg(plugin, app, ("glider", "soaring thermal", "再ランキングの評価", "zzz"))


def test_it_runs_alike_on_both_storage_backends(tmp_path: Path, postgres_dsn: str) -> None:  # noqa: F811
    found = {}
    for backend, dsn in (("sqlite", ""), ("postgres", postgres_dsn)):
        app = open_kb(_kb(tmp_path / backend, "enabled = true", config=store_toml(backend, dsn)))
        try:
            prf = _legs(app, QUERY)["prf"]
            found[backend] = (prf.meta["added_terms"], _paths(app, prf))
        finally:
            app.close()
    assert found["sqlite"] == found["postgres"]
    assert found["sqlite"] == (["soar", "thermal"], {"glide/one.md", "glide/two.md", "birds.md"})
