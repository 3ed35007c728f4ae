"""`groove eval` end to end on a small KB with the hashing embedder."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from groove_core.cli import build_cli
from groove_core.evaluation.history import HISTORY_FILENAME
from groove_core.testing import make_kb, open_kb

DOCS = {
    "guide/install.md": "# Installing\n\nRun the setup script to create a virtual environment.\n",
    "guide/search.md": "# Searching\n\nQuoted phrases match exactly; a leading minus excludes.\n",
    "notes/rust.md": "# Rust\n\nRust async runtimes such as tokio schedule futures.\n",
    "notes/python.md": "# Python\n\nPython generators yield values lazily, one at a time.\n",
    "notes/ja.md": "# 再ランキング\n\nクロスエンコーダによる再ランキングの評価について説明する。\n",
}
GOLDEN = [
    {"query": "virtual environment setup", "expected": ["guide/install.md"], "id": "install"},
    {"query": "tokio async runtime", "expected": ["notes/rust.md"], "id": "rust"},
    {"query": "generators yield lazily", "expected": ["notes/python.md"], "id": "py"},
    {"query": "再ランキングの評価", "expected": ["notes/ja.md"], "id": "ja"},
    {"query": "exclude with a leading minus", "expected": ["guide/search.md"], "id": "search"},
    {"query": "-tokio", "expected": ["notes/rust.md"], "id": "only-exclusion"},
]


def _golden(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n")
    return path


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", DOCS)
    _golden(root / "golden.jsonl", GOLDEN)
    open_kb(root).close()
    return root


def _eval(kb: Path, *args: str) -> Result:
    result = CliRunner().invoke(build_cli(None), ["eval", "--kb", str(kb), *args])
    assert "Traceback" not in result.output
    return result


def _json(kb: Path, *args: str) -> dict[str, object]:
    result = _eval(kb, "--json", *args)
    assert result.exit_code == 0, result.output
    payload: dict[str, object] = json.loads(result.stdout)
    return payload


def test_json_metrics_with_intervals_and_rejected_queries(kb: Path) -> None:
    payload = _json(kb)
    assert payload["queries"] == 6
    run = payload["runs"][0]  # type: ignore[index]
    assert run["stage"] == "candidates" and run["n"] == 6
    metrics = run["metrics"]
    assert set(metrics) == {"recall@1", "recall@5", "recall@10", "mrr@10", "ndcg@10", "hit@10"}
    for value in metrics.values():
        assert 0 <= value["ci_low"] <= value["mean"] <= value["ci_high"] <= 1
    # The exclusion-only query is a miss (at most 5 of 6 found), reported by id, not a crash.
    assert metrics["hit@10"]["mean"] <= 5 / 6
    assert [r["id"] for r in run["rejected"]] == ["only-exclusion"]
    assert run["fingerprint"]["embedder"].startswith("hashing")
    assert run["corpus"]["documents"] == 5


def test_human_output_history_and_delta(kb: Path) -> None:
    first = _eval(kb)
    assert first.exit_code == 0, first.output
    assert "recall@1" in first.output and "first run on this golden file" in first.output
    assert "1 query rejected by the query language" in first.output
    history = json.loads((kb / ".groove" / HISTORY_FILENAME).read_text())
    assert len(history["runs"]) == 1
    assert history["runs"][0]["queries"][0] == "install"

    (kb / "groove.toml").write_text('[embedder]\nname = "hashing"\n[search.fusion]\nrrf_k = 5\n')
    second = _eval(kb)
    assert "fusion.rrf_k: 60.0 -> 5.0" in second.output
    assert "(CI" in second.output and "p=" in second.output
    payload = _json(kb)
    delta = payload["runs"][0]["delta"]  # type: ignore[index]
    assert delta["fingerprint_differences"] == []  # same settings as the run before it
    assert set(delta["metrics"]["ndcg@10"]) >= {"mean", "p_value", "significant"}
    assert len(json.loads((kb / ".groove" / HISTORY_FILENAME).read_text())["runs"]) == 3


def test_a_plugin_legs_switch_is_named_among_the_candidates_settings(kb: Path) -> None:
    """The title leg runs in stage 1: turning it on must show in the candidates run's
    comparison, not look like the same settings (found measuring issue #29)."""
    assert _eval(kb).exit_code == 0
    (kb / "groove.toml").write_text(
        '[embedder]\nname = "hashing"\n[plugin.titles]\nenabled_by_default = true\n'
    )
    second = _eval(kb)
    assert second.exit_code == 0, second.output
    assert 'plugin.titles: {"enabled_by_default": false' in second.output
    assert '-> {"enabled_by_default": true' in second.output


def test_corrupt_history_is_set_aside_with_a_warning(kb: Path) -> None:
    (kb / ".groove" / HISTORY_FILENAME).write_text("{ not json")
    result = _eval(kb)
    assert result.exit_code == 0
    assert "corrupt" in result.output
    assert (kb / ".groove" / (HISTORY_FILENAME + ".corrupt")).read_text() == "{ not json"
    assert len(json.loads((kb / ".groove" / HISTORY_FILENAME).read_text())["runs"]) == 1


def test_history_lives_beside_the_index_not_among_the_notes(kb: Path) -> None:
    legacy = kb / ".groove-eval-history.json"
    first = _eval(kb)
    assert first.exit_code == 0, first.output
    assert not legacy.exists()
    # a history an earlier groove left among the notes moves beside the index
    moved = kb / ".groove" / HISTORY_FILENAME
    legacy.write_bytes(moved.read_bytes())
    moved.unlink()
    second = _eval(kb)
    assert second.exit_code == 0, second.output
    assert "moved eval history" in second.output
    assert not legacy.exists()
    assert len(json.loads(moved.read_text())["runs"]) == 2


def test_no_history_leaves_no_file(kb: Path) -> None:
    assert _eval(kb, "--no-history").exit_code == 0
    assert not (kb / ".groove" / HISTORY_FILENAME).exists()


def test_per_query_jsonl_and_csv(kb: Path, tmp_path: Path) -> None:
    out = tmp_path / "per-query.jsonl"
    assert _eval(kb, "--per-query", str(out), "--no-history").exit_code == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [g["id"] for g in GOLDEN]
    rust = rows[1]
    assert rust["first_relevant_rank"] == rust["top"].index("notes/rust.md") + 1
    assert rows[-1]["error"] and rows[-1]["ndcg@10"] == 0
    table = tmp_path / "per-query.csv"
    assert _eval(kb, "--per-query", str(table), "--no-history").exit_code == 0
    with table.open() as handle:
        assert len(list(csv.DictReader(handle))) == len(GOLDEN)


def test_full_stage_without_optional_stages_matches_stage_one(kb: Path) -> None:
    one = _json(kb, "--no-history")["runs"][0]["metrics"]  # type: ignore[index]
    full = _json(kb, "--no-history", "--stage", "full")["runs"][0]  # type: ignore[index]
    assert full["stage"] == "full"
    assert full["metrics"] == one


def test_ablation_rows_and_report(kb: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    result = _eval(kb, "--ablate", "--report", str(report), "--no-history")
    assert result.exit_code == 0, result.output
    for row in ("lexical only", "vector only", "hybrid (stage 1)"):
        assert row in result.output
    payload = _json(kb, "--ablate", "--no-history")
    variants = [r["variant"] for r in payload["runs"]]  # type: ignore[union-attr]
    assert variants[:3] == ["lexical only", "vector only", "hybrid (stage 1)"]
    lexical = payload["runs"][0]["fingerprint"]["plugins.enabled"]  # type: ignore[index]
    assert "vector" not in lexical and "fts" in lexical
    vector = payload["runs"][1]["fingerprint"]["plugins.enabled"]  # type: ignore[index]
    assert "vector" in vector and "fts" not in vector and "word" not in vector
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")


def test_missing_expected_documents_are_reported_and_a_wrong_kb_is_an_error(
    kb: Path, tmp_path: Path
) -> None:
    extra = [*GOLDEN[:2], {"query": "gone", "expected": ["notes/deleted.md"], "id": "gone"}]
    golden = _golden(tmp_path / "g.jsonl", extra)
    result = _eval(kb, "--golden", str(golden), "--no-history")
    assert result.exit_code == 0
    assert "1 expected document not in the index" in result.output
    unrelated = _golden(tmp_path / "u.jsonl", [{"query": "q", "expected": ["x/y.md"]}])
    result = _eval(kb, "--golden", str(unrelated), "--no-history")
    assert result.exit_code == 1
    assert "none of the expected documents" in result.output


def test_bad_golden_and_missing_default_are_one_line_errors(kb: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": 1}\n')
    result = _eval(kb, "--golden", str(bad))
    assert result.exit_code == 1 and f"{bad}:1" in result.output
    (kb / "golden.jsonl").unlink()
    result = _eval(kb)
    assert result.exit_code == 1 and "--golden" in result.output


def test_a_run_is_recorded_without_the_command_line(kb: Path) -> None:
    """History recording lives in evaluation.history: a script can record a run too."""
    from groove_core.evaluation.history import VariantRun, load_history, record_run
    from groove_core.evaluation.session import EvalSession, Variant

    session = EvalSession.open(kb, None, None)
    variant = Variant("default", session.config, "candidates")
    outcomes = session.run(variant.config, stage=variant.stage, limit=10)
    warnings: list[str] = []

    def record(keep: bool) -> VariantRun:
        return record_run(
            session, variant, outcomes, kb=kb, limit=10, seed=1, keep=keep, warn=warnings.append
        )

    first, second, unkept = record(True), record(True), record(False)
    assert first.delta is None and unkept.delta is None
    assert second.delta is not None and not second.delta.differences
    assert second.summary["recall@10"].mean == first.summary["recall@10"].mean
    assert len(load_history(kb / ".groove" / HISTORY_FILENAME, warnings.append)) == 2
    assert warnings == []
