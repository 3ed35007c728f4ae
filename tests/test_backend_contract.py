"""The storage-backend contract (``groove_core.testing.BackendContract``) on the built-in
SQLite backend; the PostgreSQL plugin runs the same checks on its own backend."""

from __future__ import annotations

from typing import Any

from groove_core.testing import FAST_CONFIG, BackendContract


class TestSqliteBackend(BackendContract):
    def store_config(self, request: Any) -> str:
        return FAST_CONFIG  # no [store] table: the default backend, one file per KB
