"""What both backends' title indexes share: how a title and a query phrase are folded."""

from __future__ import annotations

import unicodedata

#: The rules a title is stored under: a change fills the index again (``LegIndexSpec``).
VERSION = f"titles 1; unicode {unicodedata.unidata_version}"


def fold(text: str) -> str:
    """``text`` as titles are matched: NFKC, case folded."""
    return unicodedata.normalize("NFKC", text).casefold()
