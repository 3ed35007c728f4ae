"""The ``postgres`` plugin, registered through the ``groove`` entry point ``postgres``.

For now it declares its settings section (``[plugin.postgres]``); the hook through which it
will provide the index backend is part of the core's backend contract (issue #17), which
is not in the core yet. Until then loading the plugin changes nothing for SQLite users.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groove_core.hookspecs import hookimpl

if TYPE_CHECKING:
    from pydantic import BaseModel


@hookimpl
def groove_config_schema() -> type[BaseModel]:
    from groove_postgres.settings import PostgresSettings

    return PostgresSettings
