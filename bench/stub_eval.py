"""Measure the remedies of issue #44 (one-line reference sections winning short queries)
against today's default, with `groove eval`'s paired test, on every dev golden file.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/stub_eval.py \\
        [--work DIR] [--variants len32,merge32,...] [--json results.json]

Each collection is copied and indexed once per chunking (``bench/eval_collections.py``'s
scratch layout; ``merge<N>`` indexes a second copy with ``[index] min_section_tokens = N``).
The baseline is evaluated first and its history saved; every variant then runs with that
history put back, so `groove eval` compares it with the baseline query by query (paired
bootstrap interval and sign-flip test; docs/eval.md). Fusion variants (``len<N>``:
``[search.fusion] short_chunk_tokens = N``; ``doc<F>``: ``document_evidence = F``) reuse the
baseline's index.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from eval_collections import scratch_copy
from timing import run_groove

ROOT = Path(__file__).resolve().parents[1]

GOLDEN = [
    ("dendron-vault-en", "golden-stubs.jsonl"),
    ("dendron-vault-en", "golden.jsonl"),
    ("dendron-vault-en", "golden-keywords.jsonl"),
    ("jsquad-ja-para", "golden.jsonl"),
    ("jsquad-ja-para", "golden-hard.jsonl"),
    ("jsquad-ja-para", "golden-short.jsonl"),
    ("xquad-en-para", "golden.jsonl"),
    ("xquad-en-para", "golden-hard.jsonl"),
    ("cranfield-en", "golden.jsonl"),
    ("md-vue-docs-ja", "golden-xlang-en2ja.jsonl"),
]

#: Indexes with the chunker's ``min_section_tokens`` set, in-process (the setting is read
#: by ``groove_core.indexer``, which passes it to ``parse_markdown``).
_INDEX_MERGED = """
import functools, sys
import groove_core.chunking as chunking, groove_core.indexer as indexer
merged = functools.partial(chunking.parse_markdown, min_section_tokens=int(sys.argv[1]))
indexer.parse_markdown = merged
from groove_core.cli import main
sys.argv = ["groove", "index", sys.argv[2]]
main()
"""


def variant_toml(name: str) -> str:
    if name.startswith("len"):
        return f"[search.fusion]\nshort_chunk_tokens = {int(name[3:])}\n"
    if name.startswith("doc"):
        return f"[search.fusion]\ndocument_evidence = {float(name[3:])}\n"
    if "+" in name:
        return "".join(variant_toml(part) for part in name.split("+"))
    return ""


def index(kb: Path, merge: int) -> None:
    started = time.process_time()
    import subprocess

    from timing import OFFLINE_ENV

    if merge:
        cmd = [sys.executable, "-c", _INDEX_MERGED, str(merge), str(kb)]
        subprocess.run(cmd, env=OFFLINE_ENV, check=True, capture_output=True, text=True)
    else:
        run_groove("index", str(kb))
    print(f"indexed {kb} (merge {merge}) in {time.process_time() - started:.1f} s", flush=True)


def evaluate(kb: Path, golden: str, config: Path | None) -> dict[str, object]:
    args = ["eval", "--kb", str(kb), "--golden", str(kb / golden), "--json"]
    if config is not None:
        args += ["--config", str(config)]
    run: dict[str, object] = json.loads(run_groove(*args).stdout)["runs"][0]
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "groove-stubs")
    parser.add_argument("--evaldata", type=Path, default=ROOT / "evaldata")
    parser.add_argument("--variants", default="len16,len32,len64,doc0.25,doc0.5,merge16,merge32")
    parser.add_argument("--golden", default="", help="only these collection/golden pairs")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    wanted = [g for g in GOLDEN if not args.golden or f"{g[0]}/{g[1]}" in args.golden.split(",")]
    variants = [v for v in args.variants.split(",") if v]
    results: dict[str, dict[str, object]] = {}
    for collection in dict.fromkeys(c for c, _ in wanted):
        base = scratch_copy(args.evaldata, args.work / "base", collection)
        index(base, 0)
        history = base / ".groove" / "eval-history.json"
        history.unlink(missing_ok=True)
        for c, golden in wanted:
            if c == collection:
                results.setdefault(f"{c}/{golden}", {})["base"] = evaluate(base, golden, None)
        saved = args.work / f"{collection}.history.json"
        shutil.copy2(history, saved)
        for variant in variants:
            kb = base
            if variant.startswith("merge"):
                kb = scratch_copy(args.evaldata, args.work / variant, collection)
                index(kb, int(variant[5:]))
            config = args.work / f"{variant}.toml"
            config.write_text(variant_toml(variant))
            for c, golden in wanted:
                if c != collection:
                    continue
                (kb / ".groove").mkdir(exist_ok=True)
                shutil.copy2(saved, kb / ".groove" / "eval-history.json")
                run = evaluate(kb, golden, config)
                results[f"{c}/{golden}"][variant] = run
                print(line(f"{c}/{golden}", variant, run), flush=True)
    print()
    print(table(results, variants))
    if args.json is not None:
        args.json.write_text(json.dumps(results, ensure_ascii=False, indent=1))


def _cell(run: dict[str, object], metric: str) -> str:
    delta = run.get("delta") or {}
    d = delta.get("metrics", {}).get(metric) if isinstance(delta, dict) else None
    if not d:
        return "?"
    verdict = "**sig**" if d["significant"] else "noise"
    interval = f"{d['ci_low']:+.3f}..{d['ci_high']:+.3f}"
    return f"{d['mean']:+.3f} ({interval}, p={d['p_value']:.3f}) {verdict}"


def line(name: str, variant: str, run: dict[str, object]) -> str:
    m = run["metrics"]  # type: ignore[index]
    return (
        f"{name} {variant}: ndcg@10 {m['ndcg@10']['mean']:.3f} {_cell(run, 'ndcg@10')}; "  # type: ignore[index]
        f"hit@1 {m['recall@1']['mean']:.3f} {_cell(run, 'recall@1')}"  # type: ignore[index]
    )


def table(results: dict[str, dict[str, object]], variants: list[str]) -> str:
    out = []
    for metric, label in (("ndcg@10", "nDCG@10"), ("recall@1", "hit@1")):
        out.append(f"{label}: baseline, then each variant's paired difference (95% CI, p)\n")
        out.append("| golden file | n | baseline | " + " | ".join(variants) + " |")
        out.append("|---|---|---|" + "---|" * len(variants))
        for name, runs in results.items():
            base = runs["base"]
            mean = base["metrics"][metric]["mean"]  # type: ignore[index]
            cells = [_cell(runs[v], metric) if v in runs else "-" for v in variants]  # type: ignore[arg-type]
            out.append(f"| {name} | {base['n']} | {mean:.3f} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
