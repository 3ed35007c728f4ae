"""Build ``evaldata/dendron-vault-en/golden-stubs.jsonl`` (issue #44): short queries whose page
competes with a reference stub.

A *stub* is a section of a note whose whole body is one pointer to another note of the
vault (a ``![[note]]`` reference or a ``[[text|note]]`` link, maybe as a list item or after
"See"): the one-line sections of reference and index pages (``dendron.ref.cli``,
``dendron.cheatsheet``, ``dendron.ref.config.publishing``, ...). The query is the stub's
heading as a user would type it (1-3 words, as written); the expected page is the note the
stub itself points to: the vault's own authors say that is where the topic lives. Headings
that name no topic outside their page (``Summary``, ``Related``, ``Prerequisites``, ...) are
left out by the list ``GENERIC`` (read by hand), as is a heading whose stubs point to
different notes. Usage, from the repository root::

    .venv/bin/python bench/stub_golden.py [--write]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from groove_core.chunking import parse_markdown

ROOT = Path(__file__).resolve().parents[1]
VAULT = ROOT / "evaldata" / "dendron-vault-en"
#: Headings that name a part of any page, not a topic.
GENERIC = {
    "summary", "related", "example", "examples", "notes", "lookup", "details", "common options",
    "next steps", "configuration", "commands", "concepts", "description", "output", "other",
    "faq", "dev", "features", "getting started", "organizing", "limitations", "tips",
    # read by hand: a section's heading that names no topic outside its page, or a word
    # whose page a user means is not the one the stub points to
    "other keys", "general", "general guidelines", "prerequisites", "pre-requisite",
    "idempotency", "extensions", "children", "globally", "per note", "per hierarchy",
    "side effects", "upgrading", "when describing features", "loading", "image", "build",
    "task", "tracking", "edit", "extend", "sync", "structure", "retrieve", "navigate", "etc",
    "sharing", "editing", "extending", "retrieving", "transferring", "publishing",
    "development", "financially", "what we offer", "how we work", "onboarding",
    "why hierarchies?", "spread the word!", "contributing a seed", "fast and performant",
    "local-first", "extensible and open-source", "hierarchically structured",
    "move editor command", "reordering tasks", "hierarchy", "github", "ga", "rename symbol",
    "vault properties", "copy note url", "first time developers", "join other dendrologists",
}  # fmt: skip
_NUMBERED = re.compile(r"\d+\.\s")
#: A stub's whole body: one note reference or link, maybe as a list item or after "See".
_ONLY_LINK = re.compile(r"(?:[-*] )?(?:[Ss]ee )?!?\[\[[^\]\n]+\]\]\.?")
_TARGET = re.compile(r"!?\[\[(?:[^|\]]*\|)?(?:dendron://[^/\]]+/)?([^\]#|]+)(?:#[^\]]*)?\]\]")


def stubs(vault: Path) -> list[tuple[str, str, str]]:
    """(note, heading, target note) of every stub section, in path order."""
    docs = vault / "docs"
    names = {p.stem for p in docs.glob("*.md")}
    found = []
    for path in sorted(docs.glob("*.md")):
        parsed = parse_markdown(path.read_text(encoding="utf-8"), fallback_title=path.stem)
        for chunk in parsed.chunks:
            if chunk.level == 0 or "\n" not in chunk.content:
                continue
            body = chunk.content.split("\n", 1)[1].strip()
            body = body.removesuffix("---").strip()
            if not _ONLY_LINK.fullmatch(body) or "[[" in chunk.heading:
                continue
            targets = {t.strip() for t in _TARGET.findall(body)} & names
            targets.discard(path.stem)
            words = chunk.heading.split()
            if len(targets) == 1 and 1 <= len(words) <= 3:
                found.append((path.name, chunk.heading, targets.pop()))
    return found


def golden(vault: Path) -> list[dict[str, object]]:
    by_query: dict[str, set[str]] = {}
    spelled: dict[str, str] = {}
    sources: dict[str, list[str]] = {}
    for note, heading, target in stubs(vault):
        query = " ".join(heading.replace(":", " ").split())
        if query.lower() in GENERIC or _NUMBERED.match(query):
            continue
        key = query.lower()
        spelled.setdefault(key, query)
        by_query.setdefault(key, set()).add(target)
        sources.setdefault(key, []).append(note)
    lines = []
    for key, targets in sorted(by_query.items()):
        if len(targets) != 1:
            continue  # the same words point to different notes: no single page is meant
        query = spelled[key]
        (target,) = targets
        lines.append(
            {
                "query": query,
                "expected": [f"docs/{target}.md"],
                "id": f"ds{len(lines) + 1:03d}",
                "source": "stub section in " + ", ".join(f"docs/{s}" for s in sources[key]),
            }
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="write golden-stubs.jsonl")
    args = parser.parse_args()
    lines = golden(VAULT)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    if args.write:
        (VAULT / "golden-stubs.jsonl").write_text(text, encoding="utf-8")
    print(text, end="")
    print(f"{len(lines)} queries")


if __name__ == "__main__":
    main()
