"""Searching two KBs together vs the same files indexed as one KB: nDCG@10 per golden file.

    python bench/several_kbs.py EN_KB JA_KB BOTH_KB

EN_KB and JA_KB hold evaldata's xquad-en-para and jsquad-ja-para (their ``docs/`` folders),
BOTH_KB holds both as ``en/docs`` and ``ja/docs``; each is indexed with the default embedder
beforehand (``groove index``). Each golden query is searched three ways: in BOTH_KB; in the
two KBs merged by groove (one fusion over the KBs' legs); and, for comparison, merged by
rank alone (RRF over the two final lists). Expected paths get the KB's prefix.
"""

from __future__ import annotations

import sys
from pathlib import Path

from groove_core.app import Groove
from groove_core.evaluation.metrics import documents_in_order, query_metrics
from groove_core.multi_kb import open_kbs, search_kbs

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = {
    "en": ROOT / "evaldata/xquad-en-para/golden.jsonl",
    "ja": ROOT / "evaldata/jsquad-ja-para/golden.jsonl",
}
LIMIT = 10


def _ndcg(paths: list[str], expected: list[str]) -> float:
    docs = documents_in_order([(p, -i) for i, p in enumerate(paths)])
    return query_metrics(docs, dict.fromkeys(expected, 1.0))["ndcg@10"]


def main(en: Path, ja: Path, both: Path) -> None:
    import json

    kbs = open_kbs([en, ja])
    prefix = {kbs[0].name: "en/", kbs[1].name: "ja/"}
    one = Groove.open(both)
    print(f"{'golden':<8}{'one KB':>10}{'two KBs':>10}{'diff':>9}{'rank-only':>11}")
    for lang, golden in GOLDEN.items():
        totals = [0.0, 0.0, 0.0]
        queries = [json.loads(line) for line in golden.read_text().splitlines() if line]
        for q in queries:
            expected = [f"{lang}/{p}" for p in q["expected"]]
            single = [h.path for h in one.search(q["query"], limit=LIMIT).results]
            merged = search_kbs(kbs, q["query"], limit=LIMIT).results
            together = [prefix[h.kb] + h.hit.path for h in merged]
            lists = [
                [prefix[kb.name] + h.path for h in kb.app.search(q["query"], limit=LIMIT).results]
                for kb in kbs
            ]
            # RRF over the two final lists: equal ranks interleave, the first KB first.
            interleaved = [p for pair in zip(*lists, strict=False) for p in pair][:LIMIT]
            for i, paths in enumerate((single, together, interleaved)):
                totals[i] += _ndcg(paths, expected)
        a, b, c = (t / len(queries) for t in totals)
        print(f"{lang:<8}{a:>10.4f}{b:>10.4f}{b - a:>+9.4f}{c:>11.4f}")


if __name__ == "__main__":
    main(*(Path(arg) for arg in sys.argv[1:4]))
