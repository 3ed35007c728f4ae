"""Index the committed evaluation collections into a scratch folder and run `groove eval --ablate`.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/eval_collections.py \
        [--work DIR] [--evaldata evaldata] [--json results.json]

Each collection's ``docs/`` and golden files are copied to ``<work>/<collection>/`` (the
committed folder is never written to), indexed once with the configured default embedder
(later runs reuse the index: `groove index` only embeds changed files), then every golden
file is evaluated with ``--ablate``. The output is the Markdown table of docs/eval.md, with
the reference hybrid's nDCG@10 beside groove's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from timing import run_groove

ROOT = Path(__file__).resolve().parents[1]

#: (collection, golden file) -> nDCG@10 of a straightforward reference hybrid on the same
#: stack (trigram FTS5 + USE multilingual, RRF k=60, document-level credit):
#: (lexical only, vector only, hybrid).
REFERENCE = {
    ("jsquad-ja-para", "golden.jsonl"): (0.838, 0.780, 0.858),
    ("jsquad-ja-para", "golden-hard.jsonl"): (0.521, 0.561, 0.640),
    ("xquad-en-para", "golden.jsonl"): (0.920, 0.889, 0.945),
    ("xquad-en-para", "golden-hard.jsonl"): (0.844, 0.865, 0.903),
    ("cranfield-en", "golden.jsonl"): (0.315, 0.210, 0.322),
}

#: Every (collection, golden file) evaluated, in this order: those with a reference figure,
#: then the ones without (their reference cell is "-"). cacm-en and lisa-en: long English
#: requests (issue #42); their plain FTS5 porter BM25 baseline is ``bench/bm25_baseline.py``.
GOLDEN_FILES = [*REFERENCE, ("cacm-en", "golden.jsonl"), ("lisa-en", "golden.jsonl")]


def scratch_copy(evaldata: Path, work: Path, collection: str) -> Path:
    """The collection's docs (copied once) and golden files under ``work``."""
    target = work / collection
    source = evaldata / collection
    if not (target / "docs").exists():
        target.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source / "docs", target / "docs")
    for golden in source.glob("golden*.jsonl"):
        shutil.copy2(golden, target / golden.name)
    return target


def prepare(evaldata: Path, work: Path, collection: str) -> Path:
    """A scratch copy of the collection (docs + golden files), indexed."""
    target = scratch_copy(evaldata, work, collection)
    started = time.perf_counter()
    out = run_groove("index", str(target))
    print(f"indexed {collection} in {time.perf_counter() - started:.0f} s: {out.stdout.strip()}")
    return target


def ablate(kb: Path, golden: str) -> list[dict[str, object]]:
    out = run_groove("eval", "--kb", str(kb), "--golden", str(kb / golden), "--ablate", "--json")
    runs: list[dict[str, object]] = json.loads(out.stdout)["runs"]
    return runs


def _ndcg(runs: list[dict[str, object]], variant: str) -> str:
    for run in runs:
        if run["variant"] == variant:
            m = run["metrics"]["ndcg@10"]  # type: ignore[index]
            return f"{m['mean']:.3f} ({m['ci_low']:.3f}–{m['ci_high']:.3f})"
    return "-"


def table(results: dict[tuple[str, str], list[dict[str, object]]]) -> str:
    head = (
        "| collection / golden file | n | lexical only | vector only | hybrid (stage 1) "
        "| + mmr | + parent | reference lex / vec / hybrid |\n"
        "|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for (collection, golden), runs in results.items():
        ref = REFERENCE.get((collection, golden))
        ref_text = " / ".join(f"{v:.3f}" for v in ref) if ref else "-"
        cells = [
            _ndcg(runs, v)
            for v in (
                "lexical only",
                "vector only",
                "hybrid (stage 1)",
                "hybrid + mmr",
                "hybrid + parent",
            )
        ]
        n = runs[0]["n"]
        rows.append(f"| {collection} / {golden} | {n} | " + " | ".join(cells) + f" | {ref_text} |")
    return head + "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-eval")
    parser.add_argument("--evaldata", type=Path, default=ROOT / "evaldata")
    parser.add_argument("--json", type=Path, default=None, help="also write every run here")
    args = parser.parse_args()
    results: dict[tuple[str, str], list[dict[str, object]]] = {}
    prepared: dict[str, Path] = {}
    for collection, golden in GOLDEN_FILES:
        if collection not in prepared:
            prepared[collection] = prepare(args.evaldata, args.work, collection)
        started = time.perf_counter()
        results[(collection, golden)] = ablate(prepared[collection], golden)
        print(f"evaluated {collection}/{golden} in {time.perf_counter() - started:.0f} s")
    print()
    print(table(results))
    if args.json is not None:
        payload = {f"{c}/{g}": runs for (c, g), runs in results.items()}
        args.json.write_text(json.dumps(payload, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
