"""The passages the e5 benchmarks embed: 100 Japanese paragraphs (jsquad-ja-para) and 100
English ones (xquad-en-para, those under ~200 tokens), ~130 tokens each on average, read
from the committed evaluation collections in a fixed order."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def passages(japanese: int = 100, english: int = 100) -> list[str]:
    ja = sorted((ROOT / "evaldata" / "jsquad-ja-para" / "docs").glob("*.md"))
    en = sorted((ROOT / "evaldata" / "xquad-en-para" / "docs").glob("*.md"))
    step = max(1, len(ja) // japanese)
    chosen = [p.read_text(encoding="utf-8") for p in ja[::step][:japanese]]
    short = [t for t in (p.read_text(encoding="utf-8") for p in en) if len(t) <= 700]
    return chosen + short[:english]
