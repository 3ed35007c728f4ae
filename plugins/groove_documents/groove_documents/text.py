"""Plain text as Markdown that the chunker reads back as the same text: no line of a
document's text may turn into a heading, a code block, a rule or front matter."""

from __future__ import annotations

import re

#: A line Markdown would read as a heading, a rule, a setext underline, a fence or a quote.
_SPECIAL = re.compile(r"^(#{1,6}(\s|$)|[-=_*]{3,}\s*$|```|~~~|>|\+\+\+)")


def text_line(line: str) -> str:
    """One line of extracted text, safe as a Markdown paragraph line."""
    line = " ".join(line.split())
    return "\\" + line if _SPECIAL.match(line) else line


def inline(text: str) -> str:
    """Text for a heading or a table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


class Budget:
    """Characters of text a file may still yield (``[plugin.documents] max_chars``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit
        self.cut = False

    def take(self, text: str) -> str:
        if len(text) <= self.left:
            self.left -= len(text)
            return text
        self.cut = True
        kept, self.left = text[: self.left], 0
        return kept

    @property
    def spent(self) -> bool:
        return self.left <= 0
