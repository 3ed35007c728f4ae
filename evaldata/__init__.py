"""The evaluation collections committed with groove, and the one place that says where they are.

Tests import ``EVALDATA`` from here (pytest puts the repository root on ``sys.path``), and so do
the benchmarks. Each collection's ``SOURCE.md`` gives its origin, licence and conversion;
``evaldata/build.py`` rebuilds them from the public sources.
"""

from __future__ import annotations

from pathlib import Path

EVALDATA = Path(__file__).resolve().parent

COLLECTIONS = (
    "cacm-en",
    "cranfield-en",
    "dendron-vault-en",
    "jsquad-ja-para",
    "md-vue-docs-en",
    "md-vue-docs-ja",
    "xquad-en-para",
)


def collection(name: str) -> Path:
    """The folder of one collection (its ``docs/`` and ``golden*.jsonl``)."""
    if name not in COLLECTIONS:
        raise KeyError(f"no evaluation collection {name!r}; have {', '.join(COLLECTIONS)}")
    return EVALDATA / name
