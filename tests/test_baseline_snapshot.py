"""Golden snapshot of the baseline search output (optional stages off ⇒
bit-identical; docs/retrieval-pipeline.md).

``groove search --json`` over a small fixed KB (``hashing`` embedder) for a fixed query set
must be byte-equal to ``tests/snapshots/baseline_search.json`` whether the optional stage
plugins (groove-mmr, groove-parent) are

(a) not installed (``entry_points=False``: only the core's built-ins),
(b) installed and off: by the config defaults, and blocked by name in ``[plugins] disabled``,
(c) installed and enabled in groove.toml, but switched off per query (``--no-mmr --no-parent``).

The snapshot stores each output parsed, for readable diffs; the CLI's text is compared with
its canonical re-serialization (sorted keys, indent 2, the CLI's own settings), so a change
of any byte of the output fails.

To regenerate after an intended change of the baseline::

    GROOVE_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_baseline_snapshot.py

It rewrites the file from case (a) and still fails, so that a run with the variable set can
never pass silently; review the diff, then run again without it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from groove_core.app import Groove
from groove_core.cli import build_cli
from groove_core.config import load_config
from groove_core.plugins import ENTRY_POINT_GROUP, make_plugin_manager
from groove_core.testing import FAST_CONFIG, make_kb

SNAPSHOT = Path(__file__).parent / "snapshots" / "baseline_search.json"
#: The seed's two-leg pipeline (trigram + vector, plain RRF): the baseline before the word
#: leg became the default (ADR-0012). Never regenerated: the documented one-line seed
#: configuration must keep reproducing it byte for byte.
SEED_SNAPSHOT = Path(__file__).parent / "snapshots" / "seed_search.json"
#: The default pipeline with RRF (``[search.fusion] method = "rrf"``): the baseline before
#: the score fusion became the default (ADR-0019). Never regenerated, as the seed's.
RRF_SNAPSHOT = Path(__file__).parent / "snapshots" / "baseline_rrf_search.json"
SEED_LINES = (
    '[plugins]\ndisabled = ["word"]\n[index]\ncjk_char_tokens = 0.25\nmin_section_tokens = 0\n'
    '[search.fusion]\nmethod = "rrf"\n'
)
#: The chunking before small sections were merged (issue #44), which the snapshots pin.
OLD_CHUNKS = "[index]\nmin_section_tokens = 0\n"
UPDATE_ENV = "GROOVE_UPDATE_SNAPSHOTS"

FILES = {
    "guide/install.md": (
        "---\ntitle: Installing groove\ntags: [setup, guide]\n---\n"
        "# Installing groove\n\nRun the setup script to create a virtual environment.\n\n"
        "## Requirements\n\nPython 3.11 and a C compiler are needed for sqlite extensions.\n\n"
        "## Foundry Local\n\nFoundry Local の設定は groove.toml に書く。\n"
    ),
    "guide/search.md": (
        "# Searching\n\nUse quoted phrases for exact matches and a leading minus to exclude.\n\n"
        "## Ranking\n\nResults are fused with reciprocal rank fusion across the lexical "
        "and vector legs.\n\n## Diversity\n\nMMR trades a little relevance for results "
        "from more documents.\n"
    ),
    "notes/rust.md": (
        "---\ntags: [lang]\n---\n# Rust notes\n\nRust async runtimes such as tokio schedule "
        "futures.\n\n## Ownership\n\nRust ownership rules prevent data races at compile time."
        "\n\n## Traits\n\nTraits describe shared behaviour; async traits are newer.\n"
    ),
    "notes/ja.md": (
        "---\ntags: [ja, search]\n---\n# 再ランキングの評価\n\n"
        "クロスエンコーダによる再ランキングの評価について説明する。\n\n"
        "## 検索システム\n\n全文検索とベクトル検索を組み合わせたシステムである。\n\n"
        "### 多様性\n\n同じ文書のチャンクばかりが上位に並ぶと、多様性が失われる。\n"
    ),
    "notes/ja-short.md": "# メモ\n\n検索の評価は recall と nDCG で行う。\n",
    "archive/old.md": (
        "# Old search notes\n\nBefore fusion, lexical search alone ranked the results.\n"
    ),
}

#: (query words, extra CLI options): English, Japanese, an exclusion, filters, a phrase.
QUERIES: list[tuple[str, tuple[str, ...]]] = [
    ("reciprocal rank fusion", ()),
    ("再ランキングの評価について", ()),
    ("rust -async", ()),
    ("python compiler", ("--tag", "setup")),
    ("search results", ("--path", "guide/**", "--limit", "3")),
    ("検索システムの多様性", ("--limit", "5")),
    ('"Foundry Local" の設定', ()),
    ("search ranking", ("--limit", "20")),
]

STAGES = ("mmr", "parent")


def _configs() -> dict[str, str]:
    """The three groove.toml variants. Any *other* installed groove plugin (an example leg,
    a third-party stage) is blocked in all of them: it may change results by design, and
    this test is about the optional stages only."""
    others = sorted(
        {ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)} - set(STAGES)
    )
    off = FAST_CONFIG + f"[plugins]\ndisabled = {json.dumps(others)}\n"
    seed = FAST_CONFIG + SEED_LINES.replace('["word"]', json.dumps([*others, "word"]))
    return {
        "seed.toml": seed,
        "off.toml": off,
        "blocked.toml": FAST_CONFIG + f"[plugins]\ndisabled = {json.dumps([*others, *STAGES])}\n",
        "on.toml": off
        + "[search.mmr]\nenabled = true\n[search.parent_retriever]\nenabled = true\n",
        "rrf.toml": off + OLD_CHUNKS + '[search.fusion]\nmethod = "rrf"\n',
    }


def canonical(payload: Any) -> str:
    """What ``groove search --json`` prints for ``payload`` (click.echo adds the newline)."""
    return json.dumps(payload, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The chunks the snapshots were taken with: every section its own chunk, as before
    # small sections were merged (issue #44), so that the stages' guards below still see
    # small hits to expand.
    root = make_kb(
        tmp_path_factory.mktemp("snapshot") / "kb", FILES, config=FAST_CONFIG + OLD_CHUNKS
    )
    for name, text in _configs().items():
        (root.parent / name).write_text(text, encoding="utf-8")
    Groove.open(root, entry_points=False).index()
    return root


def _api_outputs(kb: Path) -> list[str]:
    """Case (a): the core alone, through the same calls and serialization as the CLI."""
    app = Groove.open(kb, kb.parent / "off.toml", entry_points=False)
    assert not {"mmr", "parent"} & {i.name for i in app.plugins.infos}
    outputs = []
    for query, extra in QUERIES:
        options = dict(zip(extra[::2], extra[1::2], strict=True))
        limit = options.get("--limit")
        response = app.search(
            query,
            limit=None if limit is None else int(limit),
            path=options.get("--path"),
            tags=[options["--tag"]] if "--tag" in options else [],
        )
        outputs.append(canonical(response.to_json()))
    return outputs


def _cli_outputs(kb: Path, config: str, *switches: str) -> list[str]:
    """``groove search --json`` as a user runs it, with installed plugins discovered."""
    config_path = kb.parent / config
    plugins = make_plugin_manager(load_config(kb, config_path), validate=False)
    cli = build_cli(plugins)
    outputs = []
    for query, extra in QUERIES:
        argv = ["search", query, *extra, "--kb", str(kb), "--config", str(config_path)]
        result = CliRunner().invoke(cli, [*argv, "--json", *switches])
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    return outputs


def _snapshot() -> list[str]:
    stored = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    assert [(c["query"], tuple(c["options"])) for c in stored["cases"]] == QUERIES, (
        f"the query set changed: regenerate {SNAPSHOT.name} with {UPDATE_ENV}=1"
    )
    return [canonical(c["output"]) for c in stored["cases"]]


def test_core_alone_matches_the_snapshot(kb: Path) -> None:
    outputs = _api_outputs(kb)
    if os.environ.get(UPDATE_ENV):
        cases = [
            {"query": q, "options": list(extra), "output": json.loads(out)}
            for (q, extra), out in zip(QUERIES, outputs, strict=True)
        ]
        SNAPSHOT.write_text(canonical({"cases": cases}), encoding="utf-8")
        pytest.fail(f"{SNAPSHOT} rewritten: review the diff, then rerun without {UPDATE_ENV}")
    assert outputs == _snapshot()


def test_seed_configuration_reproduces_the_seed_snapshot(kb: Path) -> None:
    stored = json.loads(SEED_SNAPSHOT.read_text(encoding="utf-8"))
    expected = [canonical(c["output"]) for c in stored["cases"]]
    assert _cli_outputs(kb, "seed.toml") == expected
    # The default differs from the seed (the word leg finds more), or this pins nothing.
    assert _snapshot() != expected


def test_rrf_reproduces_the_baseline_before_the_score_fusion(kb: Path) -> None:
    stored = json.loads(RRF_SNAPSHOT.read_text(encoding="utf-8"))
    expected = [canonical(c["output"]) for c in stored["cases"]]
    assert _cli_outputs(kb, "rrf.toml") == expected
    assert _snapshot() != expected  # the scores differ, or this pins nothing


@pytest.mark.parametrize(
    ("config", "status"),
    [("off.toml", "enabled"), ("blocked.toml", "disabled")],
    ids=["off-by-default-config", "disabled-by-name"],
)
def test_installed_plugins_switched_off_match_the_snapshot(
    kb: Path, config: str, status: str
) -> None:
    """Off in their sections (loaded, enabled, doing nothing) or disabled by name (not
    loaded): either way the output is the baseline's."""
    infos = make_plugin_manager(load_config(kb, kb.parent / config)).infos
    states = {i.name: i.status for i in infos if i.name in ("mmr", "parent")}
    assert states == {"mmr": status, "parent": status}
    assert _cli_outputs(kb, config) == _snapshot()


def test_plugins_enabled_in_config_but_off_per_query_match_the_snapshot(kb: Path) -> None:
    assert _cli_outputs(kb, "on.toml", "--no-mmr", "--no-parent") == _snapshot()


def test_the_query_set_does_exercise_both_stages_when_they_are_on(kb: Path) -> None:
    # Guards the guard: if no query were changed by MMR or expansion, the byte-equality
    # above would prove nothing about the stages being no-ops when off.
    baseline = _snapshot()
    for config, switch in (("off.toml", "--mmr"), ("off.toml", "--parent"), ("on.toml", "")):
        switches = (switch,) if switch else ()
        changed = [
            a != b for a, b in zip(_cli_outputs(kb, config, *switches), baseline, strict=True)
        ]
        assert sum(changed) >= 2, (config, switch)
