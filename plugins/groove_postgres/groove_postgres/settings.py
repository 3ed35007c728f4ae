"""Connection settings: the DSN, where the password comes from, the pool and the HNSW knobs.

The password never appears in groove.toml: it comes from the environment variable named by
``password_env``, or from libpq's own files (``~/.pgpass``, a ``service`` in
``pg_service.conf``, ``PGPASSWORD``). A DSN that carries one is refused, and every message
that names the DSN shows it with any password replaced by ``***`` (:func:`redact`).

The DSN field is a plain string with no validation of its own: a pydantic validation
error quotes the rejected input, and that input could hold a password. It is parsed (and
refused, redacted) when the store connects.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PostgresSettings", "SettingsError", "connect_kwargs", "redact", "scrub"]

#: What replaces a password in anything shown.
MASK = "***"


class SettingsError(ValueError):
    """The settings cannot give a connection; the message names the setting, never a secret."""


class PostgresSettings(BaseModel):
    """The keys the plugin adds to ``[store]`` (used when ``[store] backend = "postgres"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dsn: str = Field(
        "",
        description=(
            "libpq connection string or URI (host, port, dbname, user, service, sslmode...), "
            "without a password; empty: libpq's PG* environment variables and defaults"
        ),
    )
    password_env: str | None = Field(
        None,
        description=(
            "name of the environment variable holding the password (else libpq reads "
            "PGPASSWORD, ~/.pgpass or the service file)"
        ),
    )
    kb: str | None = Field(
        None,
        description="the knowledge base's key in the database (default: the KB folder's name)",
    )
    db_schema: str = Field(
        "groove",
        alias="schema",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        description=(
            "PostgreSQL schema holding groove's tables (several KBs share them); not "
            "information_schema nor a pg_* name, which are PostgreSQL's own"
        ),
    )
    pool_min: int = Field(1, ge=0, le=64, description="connections the pool keeps open")
    pool_max: int = Field(8, ge=1, le=256, description="most connections the pool opens")
    ef_search: int = Field(
        100,
        ge=1,
        le=1000,
        description="pgvector hnsw.ef_search for the vector leg (recall against speed)",
    )
    hnsw_m: int = Field(16, ge=2, le=100, description="pgvector HNSW m (graph degree)")
    hnsw_ef_construction: int = Field(
        64, ge=4, le=1000, description="pgvector HNSW ef_construction (build quality)"
    )
    connect_timeout: int = Field(10, ge=1, le=600, description="seconds to wait for the server")

    @field_validator("db_schema")
    @classmethod
    def _not_a_system_schema(cls, value: str) -> str:
        # groove creates, alters and empties its tables in this schema: PostgreSQL's own
        # schemas hold the catalogs (and pg_* names are reserved for them).
        if value == "information_schema" or value.startswith("pg_"):
            raise ValueError(
                f"{value!r} is one of PostgreSQL's own schemas (information_schema and every "
                "pg_* name, such as pg_catalog and pg_toast, are reserved): name a schema "
                "for groove's tables, such as the default 'groove'"
            )
        return value


def _password_of(dsn: str) -> str | None:
    """The password a DSN carries (keyword form or URI), or None."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return _uri_password(dsn)
    value = params.get("password")
    return None if value in (None, "") else str(value)


_URI_USERINFO = re.compile(r"^(postgres(?:ql)?://)([^@/?#]*)@", re.IGNORECASE)
_KEYWORD_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)", re.IGNORECASE)


def _uri_password(dsn: str) -> str | None:
    found = _URI_USERINFO.match(dsn)
    if found is None or ":" not in found.group(2):
        return None
    return found.group(2).split(":", 1)[1] or None


def redact(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***`` (URI userinfo and ``password=``)."""

    def userinfo(m: re.Match[str]) -> str:
        user, sep, _ = m.group(2).partition(":")
        return f"{m.group(1)}{user}{':' + MASK if sep else ''}@"

    text = _URI_USERINFO.sub(userinfo, dsn)
    text = _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
    # A URI may also carry ?password=... in its query string.
    return re.sub(r"([?&]password=)[^&#]*", r"\1" + MASK, text, flags=re.IGNORECASE)


def scrub(message: str, settings: PostgresSettings) -> str:
    """``message`` (e.g. a driver error) on one line, with the DSN redacted and every
    password removed."""
    text = message.replace(settings.dsn, redact(settings.dsn)) if settings.dsn else message
    secrets = [_password_of(settings.dsn)]
    if settings.password_env:
        secrets.append(os.environ.get(settings.password_env))
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return " ".join(text.split())


def connect_kwargs(settings: PostgresSettings) -> dict[str, Any]:
    """The conninfo and keyword arguments for psycopg, the password added from the
    environment; refuses a DSN that carries a password itself."""
    from psycopg.conninfo import conninfo_to_dict

    shown = redact(settings.dsn)
    try:
        conninfo_to_dict(settings.dsn)
    except Exception:
        raise SettingsError(
            f"[store] dsn is not a valid libpq connection string or URI: {shown!r}"
        ) from None
    if _password_of(settings.dsn) is not None:
        raise SettingsError(
            f"[store] dsn carries a password ({shown!r}); remove it and name an "
            "environment variable in password_env, or use ~/.pgpass or a pg_service.conf service"
        )
    extra: dict[str, Any] = {"connect_timeout": settings.connect_timeout}
    if settings.password_env:
        value = os.environ.get(settings.password_env)
        if value is None:
            raise SettingsError(
                f"[store] password_env names {settings.password_env!r}, which is "
                "not set in the environment"
            )
        extra["password"] = value
    return {"conninfo": settings.dsn, "kwargs": extra}
