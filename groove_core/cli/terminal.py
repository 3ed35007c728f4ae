"""Text from the knowledge base, made safe to print on a terminal.

A note is untrusted input: its path, title, headings and content reach the terminal when
groove prints results. An ESC in a heading can set the window title, clear the screen or
rewrite earlier lines; a bidi override can make ``evil.md`` read as something else. Every
command prints such strings through :func:`printable` (human output) or :func:`dumps`
(JSON), so the rule lives in one place. Colour goes through :func:`style`, which
honours ``NO_COLOR``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

# C0 controls, DEL, C1 controls (U+009B is an 8-bit CSI that some terminals honour even in
# UTF-8), and the bidi embeddings, overrides and isolates that reorder what is displayed.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# JSON already escapes C0 (it must); the rest pass through raw with ensure_ascii=False.
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    # The Python spelling: unambiguous, ASCII, and familiar from repr().
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every control and bidi-control character shown as a visible escape.

    Newlines and tabs are escaped too: every field groove prints from the index is one
    line of its layout, and a caller that wants whitespace folds it before calling.
    """
    return _UNSAFE.sub(_escape, text)


# As _UNSAFE, less the tab: the layout of a document's own lines, kept when it is printed.
_UNSAFE_IN_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable_text(text: str) -> str:
    """Several lines of a document as they read, every other control or bidi-control
    character shown as an escape; line endings (LF, CRLF) become newlines."""
    return "\n".join(_UNSAFE_IN_LINE.sub(_escape, line) for line in text.splitlines())


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def dumps(payload: Any, *, indent: int | None = 2, sort_keys: bool = False) -> str:
    """JSON that decodes to ``payload`` and holds no raw terminal control character.

    Non-ASCII text stays readable (Japanese notes), but DEL, C1 and bidi controls are
    written as ``\\uXXXX``: those characters only occur inside JSON strings, so the
    escape decodes to the same value.
    """
    text = json.dumps(payload, ensure_ascii=False, indent=indent, sort_keys=sort_keys)
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


def no_color() -> bool:
    """True when ``NO_COLOR`` is set to a non-empty value: groove then prints no colour
    nor bold (the common convention; docs/getting-started.md)."""
    return bool(os.environ.get("NO_COLOR"))


def style(text: str, **styles: Any) -> str:
    """``click.style(text, **styles)``, or ``text`` unchanged under ``NO_COLOR``."""
    if no_color():
        return text
    import click

    return click.style(text, **styles)


def aligned(rows: list[list[str]], gap: int = 2) -> list[str]:
    """Rows of cells as lines whose columns line up: each column as wide as its widest
    cell (the last one unpadded). Cells are printed as given: make them printable first."""
    widths = [
        max(len(row[i]) for row in rows if i < len(row))
        for i in range(max(map(len, rows), default=0))
    ]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + row[-1:]
        lines.append((" " * gap).join(cells).rstrip())
    return lines
