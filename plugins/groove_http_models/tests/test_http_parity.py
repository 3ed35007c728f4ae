"""Eval parity: the bundled multilingual encoder served over HTTP ranks as it does in process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from groove_http_models.testing import ModelServer, http_config

from evaldata import EVALDATA
from groove_core.cli import build_cli
from groove_core.embedding import USEMultilingual

COLLECTION = EVALDATA / "xquad-en-para"


def _ndcg(kb: Path) -> float:
    result = CliRunner().invoke(build_cli(None), ["index", str(kb)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        build_cli(None), ["eval", "--kb", str(kb), "--json", "--no-history"]
    )
    assert result.exit_code == 0, result.output
    run = json.loads(result.output)["runs"][0]
    assert run["n"] > 100 and not run["rejected"]
    return float(run["metrics"]["ndcg@10"]["mean"])


def _subset(kb: Path) -> None:
    """The first 120 of the 240 paragraphs and the questions about them: half the
    embedding time of the whole collection, still well over 100 queries."""
    docs = sorted((COLLECTION / "docs").glob("*.md"))[:120]
    (kb / "docs").mkdir(parents=True)
    for doc in docs:
        shutil.copy(doc, kb / "docs" / doc.name)
    kept = {f"docs/{d.name}" for d in docs}
    lines = (COLLECTION / "golden.jsonl").read_text(encoding="utf-8").splitlines()
    wanted = [line for line in lines if set(json.loads(line)["expected"]) <= kept]
    (kb / "golden.jsonl").write_text("\n".join(wanted) + "\n", encoding="utf-8")


@pytest.mark.slow
def test_ndcg_over_http_matches_the_in_process_encoder(tmp_path: Path) -> None:
    kbs = {}
    for name in ("local", "http"):
        kb = tmp_path / name
        _subset(kb)
        kbs[name] = kb
    (kbs["local"] / "groove.toml").write_text('[embedder]\nname = "use-multilingual"\n')
    encoder = USEMultilingual()
    with ModelServer({"use-m3": encoder.embed_documents}) as server:
        (kbs["http"] / "groove.toml").write_text(
            http_config(server.url + "/v1", model="use-m3", dimensions=512)
        )
        over_http = _ndcg(kbs["http"])
    in_process = _ndcg(kbs["local"])
    print(f"xquad-en-para nDCG@10: in process {in_process:.4f}, over HTTP {over_http:.4f}")
    assert abs(over_http - in_process) <= 0.005
    assert in_process > 0.5  # a real ranking, not two equally broken ones
