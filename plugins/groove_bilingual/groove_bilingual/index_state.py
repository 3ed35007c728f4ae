"""Values the leg derives from a KB's index once per state of it, kept per index object."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PerIndexState(Generic[T]):
    """A value made from the index (the notes' script share, the table of their katakana
    words), made again when the index changed: its chunk count (the word index's cached
    total) or the end of its last index run differ, so an edit that keeps the count is seen
    too. Kept per index object (a long-lived server keeps one per open store)."""

    def __init__(self) -> None:
        self._kept: weakref.WeakKeyDictionary[Any, tuple[tuple[int, float | None], T]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, store: Any, index: Any, total: int, make: Callable[[], T]) -> T:
        stamp = (total, store.last_indexed())
        try:
            cached = self._kept.get(index)
        except TypeError:  # an index that cannot be weakly referenced: made per query
            cached = None
        if cached is not None and cached[0] == stamp:
            return cached[1]
        value = make()
        with contextlib.suppress(TypeError):
            self._kept[index] = (stamp, value)
        return value

    def clear(self) -> None:
        self._kept.clear()
