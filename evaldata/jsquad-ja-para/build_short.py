"""Build golden-short.jsonl: one-word queries of a two-character Japanese word (stdlib only).

From every question of golden-all.jsonl, in a fixed order (sha1 of "short-v1:" + question
id), take the first word that is

* a run of exactly two kanji, or exactly two katakana, in the question (NFKC), bounded by
  characters of other scripts (so it is a word the question wrote on its own, like 状態 in
  「状態はどうなるか」, not a piece of a longer compound);
* present in the gold paragraph's text, and
* present in at most MAX_DOCS of the collection's paragraphs (so the word identifies a
  handful of paragraphs and an exact match can rank the gold one in the top 10).

Each word is used once (the first question that yields it keeps it); the first COUNT
queries are written. The query is the word alone: the case the trigram leg cannot serve.

Run from this folder:  python build_short.py   (rewrites golden-short.jsonl)
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path

HERE = Path(__file__).resolve().parent
COUNT = 150
MAX_DOCS = 5

_KANJI = "\u3005-\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KATAKANA = "\u30a1-\u30fa\u30fc-\u30ff"
_RUNS = re.compile(rf"[{_KANJI}]+|[{_KATAKANA}]+")


def _body(text: str) -> str:
    """The paragraph without its `# title` line (the title is shared by the whole article)."""
    lines = text.splitlines()
    return "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines)


def main() -> None:
    docs = {
        f"docs/{p.name}": unicodedata.normalize("NFKC", _body(p.read_text(encoding="utf-8")))
        for p in sorted((HERE / "docs").glob("*.md"))
    }
    questions = [
        json.loads(line)
        for line in (HERE / "golden-all.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    questions.sort(key=lambda q: hashlib.sha1(f"short-v1:{q['id']}".encode()).hexdigest())
    used: set[str] = set()
    out: list[dict[str, object]] = []
    for q in questions:
        gold = q["expected"][0]
        text = unicodedata.normalize("NFKC", q["query"])
        for word in (m.group() for m in _RUNS.finditer(text)):
            if len(word) != 2 or word in used or word not in docs[gold]:
                continue
            where = sum(1 for body in docs.values() if word in body)
            if where > MAX_DOCS:
                continue
            used.add(word)
            out.append(
                {
                    "query": word,
                    "expected": [gold],
                    "id": f"short-{q['id']}",
                    "source_question": q["query"],
                    "paragraphs_with_word": where,
                }
            )
            break
        if len(out) == COUNT:
            break
    lines = [json.dumps(item, ensure_ascii=False) for item in out]
    (HERE / "golden-short.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(out)} queries to golden-short.jsonl")


if __name__ == "__main__":
    main()
