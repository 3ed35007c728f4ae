"""Merging several KBs' results by their legs' scores against by their ranks (RRF), paired.

Usage (from the repository root; each folder a scratch copy of a collection's ``docs/``,
indexed beforehand with the default embedder: ``groove index FOLDER``)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/merge_fusion.py \
        EN_KB JA_KB BOTH_KB VUE_JA_KB DENDRON_KB

EN_KB and JA_KB hold xquad-en-para and jsquad-ja-para, BOTH_KB both (``en/docs``,
``ja/docs``), VUE_JA_KB md-vue-docs-ja and DENDRON_KB dendron-vault-en. Every golden query
is searched in each pair of KBs once, and the same runs are merged both ways
(``groove_core.multi_kb.merge`` with and without score scales); nDCG@10 per golden file,
one KB's figure where there is one, and groove's paired test of scores against RRF.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from groove_core.app import Groove
from groove_core.evaluation.metrics import documents_in_order, paired_test, query_metrics
from groove_core.multi_kb import _scales, merge, open_kbs

E = Path(__file__).resolve().parents[1] / "evaldata"


def ndcg(paths: list[str], expected: list[str]) -> float:
    docs = documents_in_order([(p, -i) for i, p in enumerate(paths)])
    return query_metrics(docs, dict.fromkeys(expected, 1.0))["ndcg@10"]


def run(
    kbdirs: list[Path], prefixes: list[str], golden: Path, target: str, one: Groove | None
) -> None:
    kbs = open_kbs(kbdirs)
    pre = {kb.name: p for kb, p in zip(kbs, prefixes, strict=True)}
    rows: dict[str, list[float]] = {"one": [], "rrf": [], "scores": []}
    queries = [json.loads(line) for line in golden.read_text().splitlines() if line.strip()]
    for q in queries:
        expected = [target + p for p in q["expected"]]
        runs = [kb.app.search_explained(q["query"]) for kb in kbs]
        names = [kb.name for kb in kbs]
        ks = [kb.app.config.search.fusion.rrf_k for kb in kbs]
        for label, scales in (("rrf", None), ("scores", _scales(kbs))):
            merged = merge(names, [r[0] for r in runs], [r[1] for r in runs], ks, scales)[:10]
            rows[label].append(ndcg([pre[n] + h.path for n, h in merged], expected))
        if one is not None:
            found = one.search(q["query"], limit=10).results
            rows["one"].append(ndcg([h.path for h in found], expected))
    means = {k: round(sum(v) / len(queries), 3) for k, v in rows.items() if v}
    test = paired_test(rows["scores"], rows["rrf"])
    d = test.delta
    print(
        f"| {golden.parent.name}/{golden.name} | {len(queries)} | {means.get('one', '-')} | "
        f"{means['rrf']} | {means['scores']} | {d.mean:+.3f} ({d.low:+.3f}..{d.high:+.3f}), "
        f"p={test.p_value:.3f} |"
    )


def main(en: Path, ja: Path, both: Path, vue: Path, dendron: Path) -> None:
    print("| golden | n | one KB | merged by ranks | merged by scores | scores - ranks |")
    print("|---|---|---|---|---|---|")
    one = Groove.open(both)
    pair = [en, ja]
    run(pair, ["en/", "ja/"], E / "xquad-en-para/golden.jsonl", "en/", one)
    run(pair, ["en/", "ja/"], E / "jsquad-ja-para/golden.jsonl", "ja/", one)
    run(pair, ["en/", "ja/"], E / "jsquad-ja-para/golden-hard.jsonl", "ja/", one)
    other = [vue, dendron]
    run(other, ["v/", "d/"], E / "md-vue-docs-ja/golden-xlang-en2ja.jsonl", "v/", None)
    run(other, ["v/", "d/"], E / "md-vue-docs-ja/golden-questions-en2ja.jsonl", "v/", None)
    run(other, ["v/", "d/"], E / "dendron-vault-en/golden.jsonl", "d/", None)


if __name__ == "__main__":
    main(*(Path(arg) for arg in sys.argv[1:6]))
