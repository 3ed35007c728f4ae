"""How often ``low_confidence`` is set, on queries that found their page and on off-topic ones.

Usage (from the repository root)::

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python bench/low_confidence.py \
        [--work DIR] [--json out.jsonl]

Indexes scratch copies of md-vue-docs-ja, md-vue-docs-en, jsquad-ja-para and xquad-en-para with the
default configuration (groove-bilingual answers English queries over the Japanese docs when
installed), then runs, in one process, limit 10:

- over the Japanese Vue docs: the English->Japanese golden files (page titles and written
  questions), 35 Japanese questions written for this bench (``low_confidence/
  vue-ja-questions.jsonl``, translations of English ones), every page's Japanese H1 title,
  and the off-topic questions (``low_confidence/offtopic-{en,ja}.txt``: cooking, tax,
  sport, gardening, ... which the docs do not cover);
- over the English Vue docs: the Japanese->English golden files (page titles and questions)
  and the same off-topic questions;
- over jsquad and xquad: their golden questions and the same off-topic ones (those
  Wikipedia paragraphs cover some of those topics: "off-topic" there is only mostly so).

It prints the share flagged per set, split into queries that found an expected page in the
top 10 and those that did not (issue #45 item 5; docs/retrieval-pipeline.md, "low_confidence").
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from eval_collections import prepare

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from groove_core.app import Groove  # noqa: E402

HERE = Path(__file__).resolve().parent / "low_confidence"
_H1 = re.compile(r"^# (.+?)(?:\s*\{#[^}]*\})?\s*$", re.MULTILINE)


def _jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    return [{"query": line.strip(), "expected": []} for line in text.splitlines() if line.strip()]


def _titles(kb: Path) -> list[dict[str, object]]:
    """Each page's first H1, anchor removed, expected to find its page."""
    out: list[dict[str, object]] = []
    for page in sorted((kb / "docs").rglob("*.md")):
        found = _H1.search(page.read_text(encoding="utf-8"))
        if found:
            out.append({"query": found.group(1), "expected": [page.relative_to(kb).as_posix()]})
    return out


def query_sets(kbs: dict[str, Path]) -> list[tuple[str, str, list[dict[str, object]]]]:
    """(KB, set name, queries)."""
    vue, en = kbs["md-vue-docs-ja"], kbs["md-vue-docs-en"]
    off_en, off_ja = _lines(HERE / "offtopic-en.txt"), _lines(HERE / "offtopic-ja.txt")
    return [
        ("md-vue-docs-ja", "en->ja titles", _jsonl(vue / "golden-xlang-en2ja.jsonl")),
        ("md-vue-docs-ja", "en->ja questions", _jsonl(vue / "golden-questions-en2ja.jsonl")),
        ("md-vue-docs-ja", "ja questions", _jsonl(HERE / "vue-ja-questions.jsonl")),
        ("md-vue-docs-ja", "ja titles", _titles(vue)),
        ("md-vue-docs-ja", "off-topic en", off_en),
        ("md-vue-docs-ja", "off-topic ja", off_ja),
        ("md-vue-docs-en", "ja->en titles", _jsonl(en / "golden-xlang-ja2en.jsonl")),
        ("md-vue-docs-en", "ja->en questions", _jsonl(en / "golden-questions-ja2en.jsonl")),
        ("md-vue-docs-en", "off-topic en", off_en),
        ("md-vue-docs-en", "off-topic ja", off_ja),
        ("jsquad-ja-para", "jsquad questions", _jsonl(kbs["jsquad-ja-para"] / "golden.jsonl")),
        ("jsquad-ja-para", "off-topic en", off_en),
        ("jsquad-ja-para", "off-topic ja", off_ja),
        ("xquad-en-para", "xquad questions", _jsonl(kbs["xquad-en-para"] / "golden.jsonl")),
        ("xquad-en-para", "off-topic en", off_en),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, help="scratch folder (kept; default: a temp dir)")
    parser.add_argument("--json", type=Path, help="write one line per query here")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="groove-lowconf-"))
    names = ("md-vue-docs-ja", "md-vue-docs-en", "jsquad-ja-para", "xquad-en-para")
    kbs = {name: prepare(ROOT / "evaldata", work, name) for name in names}
    counts: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    out = args.json.open("w", encoding="utf-8") if args.json else None
    for name, label, queries in query_sets(kbs):
        app = Groove.open(kbs[name])
        try:
            for q in queries:
                response = app.search(str(q["query"]), limit=10)
                expected = set(q["expected"])  # type: ignore[call-overload]
                paths = [h.path for h in response.results]
                found = (
                    "off-topic"
                    if not expected
                    else ("found" if expected & set(paths) else "missed")
                )
                tally = counts[(name, label, found)]
                tally[0] += response.low_confidence
                tally[1] += 1
                if out:
                    row = {"kb": name, "set": label, "query": q["query"], "found": found}
                    row["low_confidence"] = response.low_confidence
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
        finally:
            app.close()
    if out:
        out.close()
    print("| KB | queries | which | flagged |\n|---|---|---|---|")
    for (name, label, found), (flagged, total) in counts.items():
        print(f"| {name} | {label} | {found} | {flagged}/{total} ({100 * flagged / total:.1f}%) |")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
