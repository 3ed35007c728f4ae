"""Golden query files: JSON Lines, one judged query a line.

Accepted shapes (every field other than these is informational and ignored)::

    {"query": "...", "expected": ["docs/a.md", "docs/b.md"]}
    {"query": "...", "expected": [{"path": "docs/a.md", "rel": 2}, "docs/b.md"], "id": "q7"}
    {"query": "...", "expected": ["docs/a.md"], "grades": {"docs/a.md": 3}, "tags": ["howto"]}

A bare path has grade 1. ``rel`` (or ``grade``) inside an item, or a ``grades`` /
``relevance`` mapping beside ``expected``, give graded judgements; grade 0 means judged
not relevant. Paths are resolved against the golden file's folder first and the KB root
second, so a golden file can sit at the KB root, beside it, or in any folder of its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groove_core.errors import GrooveError


class GoldenError(GrooveError, ValueError):
    """A golden file that cannot be used; the message names the file and the line."""


@dataclass(frozen=True)
class GoldenQuery:
    """One judged query. ``grades`` maps expected paths (as written) to grades."""

    key: str  # unique within the file: the ``id`` when given, else "line-N"
    query: str
    grades: Mapping[str, float]
    tags: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class GoldenSet:
    path: Path
    sha256: str
    queries: tuple[GoldenQuery, ...]

    @property
    def graded(self) -> bool:
        """True when any judgement is graded beyond relevant/not relevant."""
        return any(g not in (0.0, 1.0) for q in self.queries for g in q.grades.values())


def _grade(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise GoldenError(f"{where}: a grade must be a number >= 0, got {value!r}")
    return float(value)


def _expected_item(item: Any, where: str) -> tuple[str, float]:
    if isinstance(item, str) and item.strip():
        return item.strip(), 1.0
    if isinstance(item, Mapping) and isinstance(item.get("path"), str):
        grade = item.get("rel", item.get("grade", 1))
        return item["path"].strip(), _grade(grade, where)
    raise GoldenError(
        f'{where}: each "expected" item must be a path or {{"path": ..., "rel": N}}, got {item!r}'
    )


def _parse_grades(record: Mapping[str, Any], where: str) -> dict[str, float]:
    expected = record.get("expected")
    if not isinstance(expected, list) or not expected:
        raise GoldenError(f'{where}: "expected" must be a non-empty list of paths')
    grades = dict(_expected_item(item, where) for item in expected)
    extra = record.get("grades", record.get("relevance"))
    if extra is not None:
        if not isinstance(extra, Mapping):
            raise GoldenError(f'{where}: "grades" must map paths to numbers')
        for path, value in extra.items():
            grades[str(path).strip()] = _grade(value, where)
    if not any(g > 0 for g in grades.values()):
        raise GoldenError(f"{where}: no expected document has a grade above 0")
    return grades


def _parse_line(text: str, line: int, source: Path) -> GoldenQuery:
    where = f"{source}:{line}"
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        raise GoldenError(f"{where}: not valid JSON ({err.msg})") from None
    if not isinstance(record, Mapping):
        raise GoldenError(f"{where}: each line must be a JSON object")
    query = record.get("query")
    if not isinstance(query, str) or not query.strip():
        raise GoldenError(f'{where}: "query" must be a non-empty string')
    tags = record.get("tags", ())
    if isinstance(tags, str):
        tags = (tags,)
    if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
        raise GoldenError(f'{where}: "tags" must be a list of strings')
    ident = record.get("id")
    key = str(ident) if isinstance(ident, str | int) and str(ident).strip() else f"line-{line}"
    return GoldenQuery(key, query, _parse_grades(record, where), tuple(tags), line)


def load_golden(path: Path) -> GoldenSet:
    """Read and validate a golden file; blank lines and ``#`` comment lines are skipped."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise GoldenError(f"cannot read golden file {path}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise GoldenError(f"golden file {path} is not valid UTF-8") from None
    queries: list[GoldenQuery] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        query = _parse_line(line, number, path)
        if query.key in seen:
            raise GoldenError(f"{path}:{number}: duplicate id {query.key!r}")
        seen.add(query.key)
        queries.append(query)
    if not queries:
        raise GoldenError(f"golden file {path} has no queries")
    return GoldenSet(path, hashlib.sha256(raw).hexdigest(), tuple(queries))


@dataclass(frozen=True)
class ResolvedQuery:
    """A golden query with its expected paths mapped onto KB-relative index paths."""

    golden: GoldenQuery
    grades: Mapping[str, float]  # KB-relative path -> grade (> 0 only)
    missing: tuple[str, ...]  # expected paths found under neither base


def _candidates(expected: str, golden_dir: Path, kb: Path) -> Iterable[str]:
    """KB-relative spellings of ``expected``: via the golden file's folder, then as is."""
    via_golden = (golden_dir / expected).resolve()
    if via_golden.is_relative_to(kb):  # False when the golden file lives outside the KB
        yield via_golden.relative_to(kb).as_posix()
    yield Path(expected).as_posix().lstrip("/").removeprefix("./")


def resolve(golden: GoldenSet, kb: Path, indexed: frozenset[str]) -> list[ResolvedQuery]:
    """Map every expected path onto a document of the index (``indexed``: its paths)."""
    kb = kb.resolve()
    golden_dir = golden.path.resolve().parent
    out = []
    for query in golden.queries:
        grades: dict[str, float] = {}
        missing: list[str] = []
        for expected, grade in query.grades.items():
            match = next((c for c in _candidates(expected, golden_dir, kb) if c in indexed), None)
            if match is None:
                missing.append(expected)
            elif grade > 0:
                grades[match] = max(grade, grades.get(match, 0.0))
        out.append(ResolvedQuery(query, grades, tuple(missing)))
    return out
