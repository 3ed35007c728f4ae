"""Regression gate: groove's default configuration on its own docs/ and docs/golden.jsonl.

Uses the real default embedder (the hashing fake would measure nothing about semantic
retrieval). Fails when any metric drops below the lower bound of the 95% interval recorded
in tests/eval_baseline.json (or one query's worth below its mean, whichever is lower),
i.e. beyond what query sampling alone explains.

Refresh the baseline after an intended change (docs rewritten, retrieval improved)::

    HF_HUB_OFFLINE=1 .venv/bin/python tests/test_eval_dogfood.py --update
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BASELINE = Path(__file__).with_name("eval_baseline.json")


def _measure(work: Path) -> dict[str, object]:
    from groove_core.evaluation.session import EvalSession, summarize
    from groove_core.testing import open_kb

    kb = work / "docs"
    shutil.copytree(ROOT / "docs", kb, ignore=shutil.ignore_patterns(".groove*"))
    open_kb(kb).close()  # no groove.toml: the default configuration and embedder
    session = EvalSession.open(kb, None, kb / "golden.jsonl")
    outcomes = session.run(stage="candidates", limit=10)
    return {
        "golden_sha256": session.golden.sha256,
        "queries": len(outcomes.items),
        "rejected": len(outcomes.errors),
        "missing_expected": session.missing(),
        "metrics": {m: e.to_json() for m, e in summarize(outcomes).items()},
    }


@pytest.mark.slow
def test_docs_golden_set_does_not_regress(tmp_path: Path) -> None:
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    now = _measure(tmp_path)
    assert now["missing_expected"] == [], "docs/golden.jsonl names files docs/ no longer has"
    assert now["rejected"] == 0
    assert now["queries"] == baseline["queries"] >= 40
    if now["golden_sha256"] != baseline["golden_sha256"]:
        pytest.fail("docs/golden.jsonl changed: refresh tests/eval_baseline.json (see docstring)")
    drops = {}
    for metric, value in now["metrics"].items():  # type: ignore[attr-defined]
        recorded = baseline["metrics"][metric]
        # A metric at 1.0 has a degenerate interval [1, 1]; one query's worth of slack
        # keeps a single changed answer from reading as a regression.
        bound = min(recorded["ci_low"], recorded["mean"] - 1.0 / baseline["queries"])
        if value["mean"] < bound:
            drops[metric] = (value["mean"], round(bound, 4))
    assert not drops, f"below the baseline's 95% lower bound (now, bound): {drops}"


if __name__ == "__main__":
    import os
    import tempfile

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_eval_dogfood.py --update")
    with tempfile.TemporaryDirectory() as tmp:
        measured = _measure(Path(tmp))
    BASELINE.write_text(json.dumps(measured, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(measured["metrics"], indent=2))
