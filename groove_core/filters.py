"""Search filters: a path glob and front-matter tags, resolved to the chunk ids allowed."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groove_core.models import SearchFilters
    from groove_core.store import Store


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a path glob: ``*`` and ``?`` stay inside one path segment, ``**`` crosses
    segments (``docs/**`` matches everything below ``docs/``), ``[abc]`` is a class.

    A pattern without ``/`` matches the file name in any folder (like .gitignore), so
    ``--path '*.md'`` and ``--path 'guide*'`` do what people expect; a pattern without
    wildcards names a file or a folder (``--path docs/api`` is everything below it).
    """
    pattern = pattern.strip().lstrip("/")
    if pattern.startswith("./"):
        pattern = pattern[2:]
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            close = pattern.find("]", i + 1)
            if close == -1:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pattern[i + 1 : close].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = close + 1
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out)
    if "/" not in pattern.rstrip("/"):
        body = f"(?:.*/)?{body}"
    if not any(c in pattern for c in "*?["):
        # A plain path names a file or a folder: match it and everything below it.
        body = f"{body.rstrip('/')}(?:/.*)?"
    return re.compile(body, re.DOTALL)


def path_matches(pattern: str, path: str) -> bool:
    return glob_regex(pattern).fullmatch(path) is not None


def allowed_chunk_ids(store: Store, filters: SearchFilters) -> frozenset[int] | None:
    """Chunk ids passing every filter, or None when no filter is active."""
    if not filters.active:
        return None
    doc_ids: frozenset[int] | None = None
    if filters.path is not None:
        doc_ids = frozenset(
            d["doc_id"] for d in store.documents() if path_matches(filters.path, d["path"])
        )
    if filters.tags:
        tagged = store.doc_ids_with_tags(filters.tags)
        doc_ids = tagged if doc_ids is None else doc_ids & tagged
    return store.chunk_ids_for_docs(doc_ids or ())
