"""A plugin's leg is treated like a built-in one of its kind: fusion weights and rules,
``--explain``, ``eval --ablate``, ``low_confidence`` and tune read kinds, never names.

The installed example plugin groove-title-leg (a ``lexical`` leg named ``titles``) stands
for a third party's leg wherever groove builds its own plugin set (the CLI, eval's
variants); a leg registered in the test checks the ``vector`` kind.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from groove_core.cli import build_cli
from groove_core.context import LegSpec, QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import LegHit, LegResult
from groove_core.testing import FAST_CONFIG, make_kb, open_kb

NOTES = {
    "ja/docker.md": (
        "---\ntitle: Docker の使い方\n---\n# Docker の使い方\n\n"
        "コンテナを起動する手順を説明します。イメージを作成してから実行します。\n"
    ),
    "en/garden.md": "---\ntitle: Gardening\n---\n# Gardening\n\nTomatoes need sun and water.\n",
    "en/kitchen.md": "---\ntitle: Kitchen\n---\n# Kitchen\n\nBread needs flour and an oven.\n",
}
GOLDEN = [
    {"query": "gardening tomatoes", "expected": ["en/garden.md"], "id": "garden"},
    {"query": "kitchen bread", "expected": ["en/kitchen.md"], "id": "kitchen"},
]
TITLES_ON = "[plugin.titles]\nenabled_by_default = true\n"
WEIGHTED = FAST_CONFIG + TITLES_ON + "[search.fusion.weights]\ntitles = 0.5\n"


def _kb(root: Path, config: str) -> Path:
    kb = make_kb(root, NOTES, config=config)
    (kb / "golden.jsonl").write_text("\n".join(json.dumps(g) for g in GOLDEN) + "\n")
    open_kb(kb).close()
    return kb


def _cli(*args: str) -> Result:
    result = CliRunner().invoke(build_cli(None), list(args))
    assert "Traceback" not in result.output
    assert result.exit_code == 0, result.output
    return result


def test_a_plugin_leg_gets_its_configured_weight_and_the_lexical_rules(tmp_path: Path) -> None:
    app = open_kb(_kb(tmp_path / "kb", WEIGHTED))
    _, legs, _ = app.search_explained("gardening tomatoes")
    by_name = {leg.name: leg for leg in legs}
    assert by_name["titles"].kind == "lexical"
    assert by_name["titles"].meta["weight"] == 0.5
    # An English query whose lexical matches are Japanese: an exact match there (the one
    # word, in one note) keeps every lexical leg, the plugin's as the built-in ones...
    _, legs, _ = app.search_explained("docker")
    by_name = {leg.name: leg for leg in legs}
    assert by_name["titles"].hits and by_name["fts"].hits
    assert [by_name[n].meta["weight"] for n in ("titles", "fts", "word")] == [0.5, 1.0, 2.0]
    app.close()
    # ... and with exact matches left out too, the cross-script rule leaves out every lexical
    # leg, the plugin's as the built-in ones, for the same stated reason.
    strict = _kb(tmp_path / "strict", WEIGHTED + "[search.fusion]\ncross_script_exact = 0.0\n")
    app = open_kb(strict)
    _, legs, _ = app.search_explained("docker")
    by_name = {leg.name: leg for leg in legs}
    for name in ("titles", "fts", "word"):
        assert by_name[name].meta["weight"] == 0.0
        assert by_name[name].meta["weight_reasons"] == (
            "query other vs matches ja, exact match: x0",
        )
    assert by_name["vector"].meta["weight"] == 1.0
    app.close()


def test_explain_shows_a_plugin_leg_with_its_kind(tmp_path: Path) -> None:
    kb = _kb(tmp_path / "kb", WEIGHTED)
    payload = json.loads(_cli("search", "--kb", str(kb), "gardening", "--explain", "--json").stdout)
    legs = {leg["name"]: leg for leg in payload["explain"]["legs"]}
    assert legs["titles"]["kind"] == "lexical" and legs["titles"]["weight"] == 0.5
    assert {legs[n]["kind"] for n in ("fts", "word")} == {"lexical"}
    assert legs["vector"]["kind"] == "vector"
    assert "titles" in payload["explain"]["ranks"][0]["legs"]
    text = _cli("search", "--kb", str(kb), "gardening", "--explain").output
    assert re.search(r"leg titles \(lexical\): \d+ candidates  weight 0\.5", text)


def test_eval_ablate_puts_a_plugin_leg_in_the_row_of_its_kind(tmp_path: Path) -> None:
    kb = _kb(tmp_path / "kb", FAST_CONFIG + TITLES_ON)
    result = _cli("eval", "--kb", str(kb), "--ablate", "--json", "--no-history")
    runs = {r["variant"]: r for r in json.loads(result.stdout)["runs"]}
    enabled = {name: str(run["fingerprint"]["plugins.enabled"]) for name, run in runs.items()}
    assert "titles" in enabled["lexical only"] and "vector" not in enabled["lexical only"]
    vector_only = enabled["vector only"]
    assert "vector" in vector_only
    assert not {"titles", "fts", "word"} & set(re.findall(r"\w+", vector_only))
    assert "titles" in enabled["hybrid (stage 1)"]
    # The history names every leg's weight as fused, a spec's declared one included.
    weights = runs["hybrid (stage 1)"]["fingerprint"]["fusion.leg_weights"]
    assert weights["word"] == 2.0 and weights["fts"] == 1.0 and weights["titles"] == 1.0


def test_tune_reruns_a_plugin_lexical_leg_with_the_built_in_ones(tmp_path: Path) -> None:
    from groove_core.evaluation.runner import GoldenSearcher
    from groove_core.evaluation.tune import _lexical_legs

    app = open_kb(_kb(tmp_path / "kb", FAST_CONFIG + TITLES_ON))
    searcher = GoldenSearcher(app.searcher())
    ctx = searcher.searcher.context("gardening tomatoes")
    changed = app.config.model_copy(deep=True)
    # What tune re-runs for each bm25 column setting: every lexical leg that runs, none
    # other (an installed cross-language leg runs here too: a third of the notes are
    # Japanese).
    rerun = set(_lexical_legs(searcher, ctx, changed))
    lexical = {s.name for s in app.plugins.leg_specs() if s.kind == "lexical"}
    assert {"fts", "word", "titles"} <= rerun <= lexical
    assert app.plugins.terms_leg() == "word"
    app.close()


def test_a_plugin_lexical_leg_alone_is_not_low_confidence(tmp_path: Path) -> None:
    # Only the plugin's leg runs: its matches count as the built-in lexical legs' would.
    config = FAST_CONFIG + TITLES_ON + '[plugins]\ndisabled = ["fts", "word", "vector"]\n'
    app = open_kb(_kb(tmp_path / "kb", config))
    response, legs, _ = app.search_explained("gardening")
    assert [leg.name for leg in legs] == ["titles"]
    assert response.results and response.low_confidence is False
    app.close()


class NearLeg:
    """A third party's vector leg: every chunk at one L2 distance."""

    def __init__(self, distance: float) -> None:
        self.distance = distance

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("near", "vector", self.search)]

    def search(self, ctx: QueryContext) -> LegResult:
        rows = ctx.store.documents()
        ids = sorted(c for d in rows for c in ctx.store.chunk_ids_for_docs([d.doc_id]))
        return LegResult("near", tuple(LegHit(i, self.distance) for i in ids[: ctx.leg_size]))


@pytest.mark.parametrize(("distance", "expected"), [(0.5, False), (1.5, True)])
def test_a_plugin_vector_leg_distance_decides_low_confidence(
    tmp_path: Path, distance: float, expected: bool
) -> None:
    config = FAST_CONFIG + '[plugins]\ndisabled = ["fts", "word", "vector"]\n'
    kb = _kb(tmp_path / "kb", config)
    app = open_kb(kb, extra_plugins=[("near", NearLeg(distance))], index=False)
    response = app.search("gardening")
    assert response.results and response.low_confidence is expected
    app.close()


class WeightedNearLeg(NearLeg):
    """A third party's vector leg that declares its own default weight."""

    @hookimpl
    def groove_legs(self) -> list[LegSpec]:
        return [LegSpec("near", "vector", self.search, weight=3.0)]


def test_a_plugin_leg_declares_its_default_weight_and_the_configuration_wins(
    tmp_path: Path,
) -> None:
    no_rules = FAST_CONFIG + "[search.fusion]\ncoverage_vector = 1.0\n"
    kb = _kb(tmp_path / "kb", no_rules)
    app = open_kb(kb, extra_plugins=[("near", WeightedNearLeg(0.5))], index=False)
    _, legs, _ = app.search_explained("gardening")
    weights = {leg.name: leg.meta["weight"] for leg in legs}
    assert weights["near"] == 3.0 and weights["word"] == 2.0 and weights["fts"] == 1.0
    assert app.plugins.leg_weight("near") == 3.0 and app.plugins.leg_weight("nothing") == 1.0
    app.close()
    (kb / "groove.toml").write_text(no_rules + "[search.fusion.weights]\nnear = 0.5\nword = 1\n")
    app = open_kb(kb, extra_plugins=[("near", WeightedNearLeg(0.5))], index=False)
    _, legs, _ = app.search_explained("gardening")
    weights = {leg.name: leg.meta["weight"] for leg in legs}
    assert weights["near"] == 0.5 and weights["word"] == 1.0
    app.close()


def test_the_core_rules_name_no_leg() -> None:
    import groove_core

    root = Path(groove_core.__file__).parent
    # "vector" is also a kind, and tune's "word" knob a key of its output, so only their
    # uses as a leg's name are looked for.
    by_name = r'"fts"|\["vector"\]|"vector" in|name == "vector"|builtins\.legs'
    rules = {
        "weighting.py": by_name + '|"word"',
        "pipeline.py": by_name + '|"word"',
        "evaluation/session.py": by_name + '|"word"',
        "evaluation/tune.py": by_name + r'|weights\.get\("word"|\{"word":|"word": point',
    }
    for rel, pattern in rules.items():
        source = (root / rel).read_text(encoding="utf-8")
        assert not re.findall(pattern, source), f"{rel} names a built-in leg"


def test_ablation_keeps_the_settings_of_the_plugins_it_switches_off_out_of_its_rows(
    tmp_path: Path,
) -> None:
    """A plugin's section in groove.toml (here groove-expansion's ``[search.prf]``) does not
    stop ``--ablate``, whose "vector only" row switches the plugin off: the row leaves its
    keys out instead of failing on a section no enabled plugin provides."""
    kb = _kb(tmp_path / "kb", FAST_CONFIG + "[search.prf]\nenabled = false\n")
    result = _cli("eval", "--kb", str(kb), "--ablate", "--json", "--no-history")
    variants = [r["variant"] for r in json.loads(result.stdout)["runs"]]
    assert {"lexical only", "vector only", "hybrid (stage 1)"} <= set(variants)
