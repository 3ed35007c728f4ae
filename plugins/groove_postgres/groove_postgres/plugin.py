"""The ``postgres`` plugin, registered through the ``groove`` entry point ``postgres``.

It adds its keys to the core's ``[store]`` table (``dsn``, ``password_env``, ``kb``,
``schema``, the pool and HNSW knobs; groove_postgres/settings.py) and provides the storage
backend ``postgres`` (groove_postgres/backend.py), which ``[store] backend = "postgres"``
selects. It gives the built-in trigram and word legs their indexes on that backend
(``groove_leg_indexes``: groove_postgres/legs.py). Nothing here imports psycopg: SQLite
users pay nothing for the plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groove_core.backend import BackendSpec
from groove_core.config import ConfigSection
from groove_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from groove_core.leg_index import LegIndexImpl


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


def _trigram_index(site: Any) -> Any:
    from groove_postgres.legs import trigram_index

    return trigram_index(site)


def _word_index(site: Any) -> Any:
    from groove_postgres.legs import word_index

    return word_index(site)


@hookimpl
def groove_leg_indexes() -> list[LegIndexImpl]:
    """The built-in lexical legs' indexes on PostgreSQL: columns of the chunk rows,
    written by the store with each chunk (groove_postgres/legs.py)."""
    from groove_core.leg_index import LegIndexImpl
    from groove_postgres.backend import NAME

    return [
        LegIndexImpl("fts", NAME, _trigram_index),
        LegIndexImpl("word", NAME, _word_index),
    ]
