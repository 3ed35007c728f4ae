"""Every golden query's ranking on every committed collection, to compare two checkouts.

Usage (from a checkout's root; the checkout whose groove_core is imported is the one on
PYTHONPATH, so the same virtualenv can measure another checkout)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/ranking_snapshot.py \
        OUT.json [--work DIR] [--embedder hashing]
    PYTHONPATH=OTHER HF_HUB_OFFLINE=1 ... .venv/bin/python bench/ranking_snapshot.py OTHER.json
    .venv/bin/python bench/ranking_snapshot.py --compare OUT.json OTHER.json

Each collection's docs are copied to a scratch folder and indexed with the built-in
legs only (no plugin from entry points: the other checkout's plugins may not match) and
``embedder`` (``hashing`` by default: deterministic and fast, so that a difference is the
code's, not the model's). Then every query of every golden file is searched, limit 10,
and its hits recorded as (path, first line, score to 9 digits). ``--compare`` prints the
queries whose rankings differ and exits 1 when any does: a refactoring that must leave
rankings unchanged shows none.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def snapshot(evaldata: Path, work: Path, embedder: str) -> dict[str, list[list[object]]]:
    from groove_core.app import Groove

    out: dict[str, list[list[object]]] = {}
    for source in sorted(p for p in evaldata.iterdir() if (p / "docs").is_dir()):
        goldens = sorted(source.glob("golden*.jsonl"))
        if not goldens:
            continue
        kb = work / source.name
        if kb.exists():
            shutil.rmtree(kb)
        shutil.copytree(source / "docs", kb / "docs")
        (kb / "groove.toml").write_text(f'[embedder]\nname = "{embedder}"\n', encoding="utf-8")
        app = Groove.open(kb, entry_points=False)
        try:
            app.index()
            for golden in goldens:
                for n, line in enumerate(golden.read_text(encoding="utf-8").splitlines()):
                    query = json.loads(line)["query"]
                    found = app.search(query, limit=10)
                    key = f"{source.name}/{golden.name}#{n}"
                    out[key] = [[h.path, h.line_start, round(h.score, 9)] for h in found.results]
        finally:
            app.close()
        print(f"{source.name}: {sum(k.startswith(source.name + '/') for k in out)} queries")
    return out


def compare(a: Path, b: Path) -> int:
    left, right = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    differ = [k for k in sorted(set(left) | set(right)) if left.get(k) != right.get(k)]
    for key in differ[:20]:
        print(f"{key}:\n  {left.get(key)}\n  {right.get(key)}")
    print(f"{len(differ)} of {len(left)} queries differ")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--compare", nargs=2, type=Path)
    parser.add_argument("--work", type=Path)
    parser.add_argument("--evaldata", type=Path, default=ROOT / "evaldata")
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("give OUT.json, or --compare A B")
    with tempfile.TemporaryDirectory() as tmp:
        found = snapshot(args.evaldata, args.work or Path(tmp), args.embedder)
    args.out.write_text(json.dumps(found, ensure_ascii=False, indent=0), encoding="utf-8")
    print(f"{len(found)} queries -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
