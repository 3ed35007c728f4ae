"""``groove search --full / --files / --min-score``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from groove_core.cli import build_cli
from groove_core.testing import SECTION_CHUNKS, make_kb, open_kb

LONG = " ".join(f"Deploy step {i} copies the release bundle to host group {i}." for i in range(10))
FILES = {
    "ops/deploy.md": f"# Deploy\n\n{LONG}\n\nSecond line of the deploy chunk.\n\n## More\n\n"
    "deploy again\n",
    "ops/rollback.md": "# Rollback\n\nA rollback reverts a deploy.\n\n## Deploy notes\n\ndeploy\n",
    "notes/misc.md": "# Misc\n\nNothing about releases here, only a deploy word.\n",
    "notes/other.md": "# Other\n\nUnrelated gardening notes.\n",
}


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", FILES, config=SECTION_CHUNKS)  # several hits a file
    open_kb(root).close()
    return root


def _run(*args: str) -> Result:
    return CliRunner().invoke(build_cli(None), list(args), catch_exceptions=False)


def _json(kb: Path, *args: str) -> dict[str, Any]:
    result = _run("search", "deploy", "--kb", str(kb), "--json", *args)
    assert result.exit_code == 0, result.output
    payload: dict[str, Any] = json.loads(result.output)
    return payload


def test_full_prints_the_whole_chunk_with_its_lines(kb: Path) -> None:
    snippet = _run("search", "deploy bundle", "--kb", str(kb), "--limit", "1").output
    assert "Deploy step 9 " not in snippet and "…" in snippet
    full = _run("search", "deploy bundle", "--kb", str(kb), "--limit", "1", "--full").output
    lines = full.splitlines()
    assert lines[0].startswith(" 1. ops/deploy.md:")
    assert f"    {LONG}" in lines
    assert "    Second line of the deploy chunk." in lines


def test_files_lists_each_file_once_best_first(kb: Path) -> None:
    hits = _json(kb, "--limit", "20")["results"]
    order = list(dict.fromkeys(h["path"] for h in hits))
    assert len(order) < len(hits)  # some file holds several hits
    result = _run("search", "deploy", "--kb", str(kb), "--files")
    assert result.output.splitlines() == order
    assert (
        _run("search", "deploy", "--kb", str(kb), "--files", "--limit", "2").output.split()
        == (order[:2])
    )
    files = _json(kb, "--files", "--limit", "20")
    assert "results" not in files
    assert [f["path"] for f in files["files"]] == order
    best = {p: next(h for h in hits if h["path"] == p) for p in order}
    for entry in files["files"]:
        assert (entry["rank"], entry["score"]) == (
            best[entry["path"]]["rank"],
            best[entry["path"]]["score"],
        )
        assert entry["hits"] == sum(h["path"] == entry["path"] for h in hits)


def test_limit_counts_files_not_hits(kb: Path) -> None:
    order = list(dict.fromkeys(h["path"] for h in _json(kb, "--limit", "20")["results"]))
    assert len(order) >= 3
    for limit in (1, 2, 3):
        files = _json(kb, "--limit", str(limit), "--files")["files"]
        assert [f["path"] for f in files] == order[:limit]


def test_min_score_drops_weaker_hits_and_keeps_ranks(kb: Path) -> None:
    hits = _json(kb, "--limit", "20")["results"]
    assert len(hits) >= 3
    threshold = (hits[1]["score"] + hits[2]["score"]) / 2
    kept = _json(kb, "--limit", "20", "--min-score", str(threshold))["results"]
    assert kept == [h for h in hits if h["score"] >= threshold]
    assert [h["rank"] for h in kept] == [1, 2]
    none = _run("search", "deploy", "--kb", str(kb), "--min-score", "99")
    assert none.output.strip() == "no results"
    files = _json(kb, "--limit", "20", "--files", "--min-score", str(threshold))["files"]
    assert [f["path"] for f in files] == list(dict.fromkeys(h["path"] for h in kept))


def test_full_escapes_control_characters(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", {"evil.md": "# Evil\n\ndeploy \x1b[2J now\tand\n"})
    open_kb(root).close()
    out = _run("search", "deploy", "--kb", str(root), "--full").output
    assert "\x1b" not in out
    assert "    deploy \\x1b[2J now\tand" in out.splitlines()
