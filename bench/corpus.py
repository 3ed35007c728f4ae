"""Synthesize realistic Markdown knowledge bases of a given chunk count from real text.

The paragraphs come from the committed evaluation collections in evaldata/ (Japanese
JSQuAD paragraphs, English XQuAD paragraphs and Cranfield abstracts); each generated file is
a note with front matter, a title and several headed sections, so chunking, FTS and vectors
all see real language. Replicas carry a distinct line so that no two chunks are
byte-identical.

    .venv/bin/python bench/corpus.py 10000 /tmp/groove-bench/10k
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: evaldata
from evaldata import EVALDATA

SECTIONS_PER_FILE = 8
_FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.DOTALL)


def paragraphs() -> list[tuple[str, str]]:
    """(language, paragraph) from those collections, front matter and headings removed."""
    out: list[tuple[str, str]] = []
    for collection, lang in (
        ("jsquad-ja-para", "ja"),
        ("xquad-en-para", "en"),
        ("cranfield-en", "en"),
    ):
        for path in sorted((EVALDATA / collection / "docs").glob("*.md")):
            text = _FRONT_MATTER.sub("", path.read_text(encoding="utf-8"))
            body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
            body = body.strip()
            if len(body) > 80:
                out.append((lang, body))
    if not out:
        raise SystemExit(f"no paragraphs found under {EVALDATA}")
    return out


def _heading(lang: str, body: str) -> str:
    words = body.split()
    if lang == "ja":
        return body[:12].replace("\n", " ")
    return " ".join(words[:5]).strip(".,;:")


def notes(chunks: int, seed: int = 7) -> Iterator[tuple[str, str]]:
    """(relative path, Markdown) of enough notes for about ``chunks`` chunks."""
    rng = random.Random(seed)
    pool = paragraphs()
    files = max(1, chunks // SECTIONS_PER_FILE)
    for n in range(files):
        sections = [pool[rng.randrange(len(pool))] for _ in range(SECTIONS_PER_FILE)]
        lang = sections[0][0]
        title = f"Note {n}: {_heading(lang, sections[0][1])}"
        tags = rng.sample(["research", "meeting", "howto", "draft", "ref", "idea"], 2)
        # The title holds ": ": quoted (a JSON string is a YAML scalar), or it is no YAML.
        quoted = json.dumps(title, ensure_ascii=False)
        lines = ["---", f"title: {quoted}", f"tags: [{', '.join(tags)}]", "---", f"# {title}", ""]
        for i, (section_lang, body) in enumerate(sections):
            lines += [
                f"## {_heading(section_lang, body)}",
                "",
                f"(note {n}, part {i})",
                "",
                body,
                "",
            ]
        folder = f"area{n % 20:02d}/topic{(n // 20) % 50:02d}"
        yield f"{folder}/note{n:06d}.md", "\n".join(lines)


def write(chunks: int, root: Path) -> int:
    """Write the KB (once; an existing one is reused) and return the number of files."""
    marker = root / ".complete"
    if marker.exists():
        return int(marker.read_text())
    count = 0
    for rel, text in notes(chunks):
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        count += 1
    (root / "groove.toml").write_text("[index]\nmax_chunk_tokens = 400\n", encoding="utf-8")
    marker.write_text(str(count))
    return count


if __name__ == "__main__":
    size, where = int(sys.argv[1]), Path(sys.argv[2])
    print(f"{write(size, where)} files under {where}")
