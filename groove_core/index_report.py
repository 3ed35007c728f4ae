"""What an index run reports: its progress as it goes, and what it did."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from groove_core.config import IndexConfig

#: Meta key: the settings the index's chunks were cut with (JSON), recorded by an index run
#: that starts from an empty index; ``chunking_note`` compares a configuration with it.
CHUNKING_KEY = "chunking"
#: What an index upgraded to schema 7 records: cut by an earlier groove, whose chunks keep
#: only their first heading and whose default merged no small section.
EARLIER_CHUNKING = '{"earlier": true}'


@dataclass(frozen=True)
class IndexProgress:
    """Where an index run stands, reported after each file and after each stored batch.

    ``work_done`` / ``work_total`` measure what is left to do: bytes of the files whose
    size or modification time changed (indexing), or chunks (embedding, re-embedding).
    Unchanged files cost nothing and count in neither, so the fraction (and an ETA drawn
    from it) follows the work rather than the number of files.
    """

    #: "indexing" (files, lexical rows), "embedding", "re-embedding", or "filling the
    #: <name> leg's index" (a leg enabled on an existing KB, before the files).
    stage: str
    path: str  # the file just visited ("" for a batch event)
    files_done: int
    files_total: int
    chunks_embedded: int
    work_done: int
    work_total: int
    #: Chunks written with their lexical rows (the "indexing" stage; ADR-0015).
    chunks_indexed: int = 0


ProgressFn = Callable[[IndexProgress], None]


@dataclass
class IndexReport:
    """What one ``groove index`` run did."""

    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    chunks_embedded: int = 0
    chunks_total: int = 0
    documents_total: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    copied: int = 0  # documents copied from another backend (``index --copy-from``)
    #: Seconds from the start until every document was searchable by its words.
    searchable_seconds: float = 0.0
    #: Chunks left without a vector (a vector pass stopped early): the next run embeds them.
    vectors_pending: int = 0
    #: Whole-index remarks (chunks cut under other settings), not about one file.
    notes: list[str] = field(default_factory=list)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_embedded / self.seconds if self.seconds > 0 else 0.0

    @property
    def embed_chunks_per_second(self) -> float:
        return self.chunks_embedded / self.embed_seconds if self.embed_seconds > 0 else 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "added": self.added,
            "changed": self.changed,
            "removed": self.removed,
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "warnings": [{"path": p, "warning": w} for p, w in self.warnings],
            "chunks_embedded": self.chunks_embedded,
            "chunks_total": self.chunks_total,
            "documents_total": self.documents_total,
            "seconds": round(self.seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "chunks_per_second": round(self.chunks_per_second, 1),
            "embed_chunks_per_second": round(self.embed_chunks_per_second, 1),
            "searchable_seconds": round(self.searchable_seconds, 3),
            "vectors_pending": self.vectors_pending,
            **({"copied": self.copied} if self.copied else {}),
            **({"notes": list(self.notes)} if self.notes else {}),
        }


def chunking_settings(index: IndexConfig) -> str:
    """The settings that decide how files are cut into chunks, as the index records them."""
    return json.dumps(
        {
            "max_chunk_tokens": index.max_chunk_tokens,
            "min_section_tokens": index.min_section_tokens,
            "cjk_char_tokens": index.cjk_char_tokens,
        },
        sort_keys=True,
    )


def chunking_note(recorded: str | None, index: IndexConfig) -> str | None:
    """None when the index's chunks were cut as ``index`` cuts them (or nothing says how
    they were), else what differs and the command that cuts every file again."""
    try:
        old = json.loads(recorded) if recorded else None
    except ValueError:
        return None
    if not isinstance(old, dict):
        return None
    now = json.loads(chunking_settings(index))
    if old.get("earlier"):
        if not index.min_section_tokens:
            return None
        what = "by an earlier groove, before small sections were merged (min_section_tokens)"
    else:
        changed = [
            f"{key} = {old[key]}" for key in sorted(now) if old.get(key, now[key]) != now[key]
        ]
        if not changed:
            return None
        what = "with " + ", ".join(changed) + " (the configuration says otherwise now)"
    return (
        f"the chunks were cut {what}: 'groove index --rebuild' cuts every file again; "
        "until then only the files indexed again are cut the new way"
    )
