"""The ``postgres`` plugin, registered through the ``groove`` entry point ``postgres``.

It adds its keys to the core's ``[store]`` table (``dsn``, ``password_env``, ``kb``,
``schema``, the pool and HNSW knobs; groove_postgres/settings.py) and provides the storage
backend ``postgres`` (groove_postgres/backend.py), which ``[store] backend = "postgres"``
selects. Nothing here imports psycopg: SQLite users pay nothing for the plugin.
"""

from __future__ import annotations

from groove_core.backend import BackendSpec
from groove_core.config import ConfigSection
from groove_core.hookspecs import hookimpl


@hookimpl
def groove_config_sections() -> list[ConfigSection]:
    from groove_postgres.settings import PostgresSettings

    return [ConfigSection("store", PostgresSettings)]


@hookimpl
def groove_storage_backends() -> list[BackendSpec]:
    from groove_postgres.backend import NAME, factory

    return [
        BackendSpec(
            NAME,
            factory,
            "PostgreSQL with pgvector and pg_trgm: several KBs, people and agents share one server",
        )
    ]
