"""How the lexical indexes compare characters: case folded, and without the diacritics of
the Latin-range scripts.

Shared by the trigram leg's common-phrase estimate (``groove_core.builtins.legs``) and by
any backend that redoes FTS5's ``trigram remove_diacritics 1`` matching itself (the
PostgreSQL plugin), so that both fold a character the same way.
"""

from __future__ import annotations

import unicodedata

__all__ = ["JAPANESE_CHAR", "fold_char"]

#: One kana or kanji character (with 々, 〆, 〇 and the prolonged sound mark): what counts
#: as Japanese text for the script rules (groove_core.weighting), the trigram leg and the
#: word leg's segmentation (groove_core.words).
JAPANESE_CHAR = r"[\u3041-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3005-\u3007\u3400-\u4dbf\u4e00-\u9fff]"


def fold_char(ch: str) -> str:
    """``ch`` as the trigram tokenizer indexes it: case folded and, for the Latin-range
    scripts its ``remove_diacritics 1`` covers, without combining marks (kana keep their
    voicing marks). A mismatch only makes a trigram look rare, so a phrase is kept."""
    low = ch.lower()
    if len(low) != 1:
        return ch
    if ord(low) < 0x2000:
        base = "".join(c for c in unicodedata.normalize("NFD", low) if not unicodedata.combining(c))
        if len(base) == 1:
            return base
    return low
