"""PostgreSQL errors told apart as groove's three kinds (docs/storage-backends.md):
damage (rebuild), the environment (fix the surroundings: a server that is down, a full
disk, a read-only standby, missing privileges) or neither.

Every message is one line and passes through :func:`groove_postgres.settings.scrub`, so a
driver message can never carry the password; where a message names the connection it
names the DSN redacted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from groove_core.storage import IndexDamagedError, IndexEnvironmentError, StoreError
from groove_postgres.settings import PostgresSettings, redact, scrub

if TYPE_CHECKING:
    pass

__all__ = ["classify", "error_kind", "pg_errors"]

#: SQLSTATEs (PostgreSQL's errcodes, Appendix A) that mean the data itself is damaged.
DAMAGE_CODES = {"XX001": "data corrupted", "XX002": "an index is corrupted"}
#: SQLSTATEs, exact or by class (two characters), that mean the environment stands in the way.
ENVIRONMENT_CODES = {
    "53100": "no space left on the PostgreSQL server's disk",
    "53200": "the PostgreSQL server is out of memory",
    "53300": "the PostgreSQL server has too many connections",
    "53": "the PostgreSQL server is out of resources",
    "08": "the PostgreSQL server cannot be reached",
    "57P01": "the PostgreSQL server was shut down",
    "57P02": "the PostgreSQL server crashed",
    "57P03": "the PostgreSQL server is not accepting connections yet",
    "57P04": "the database was dropped",
    "57": "the PostgreSQL server stopped the statement",
    "28": "the PostgreSQL server refused the credentials",
    "3D000": "the database does not exist",
    "42501": "permission denied",
    "25006": "the database is read-only (a standby, or default_transaction_read_only)",
    "58": "an I/O error on the PostgreSQL server",
}
#: With ``suspect`` (groove's own statements), these mean groove's tables were changed
#: behind its back: only a rebuild puts them right.
_SCHEMA_DAMAGE = {"42P01": "a table is missing", "42703": "a column is missing"}


def pg_errors() -> tuple[type[BaseException], ...]:
    """psycopg's exception classes (imported lazily; the pool's timeout is one of them)."""
    import psycopg

    return (psycopg.Error,)


def _code(err: BaseException) -> str | None:
    code = getattr(err, "sqlstate", None)
    return code if isinstance(code, str) and code else None


def _environment_cause(err: BaseException) -> str | None:
    import psycopg

    code = _code(err)
    if code is not None:
        return ENVIRONMENT_CODES.get(code) or ENVIRONMENT_CODES.get(code[:2])
    if isinstance(err, psycopg.OperationalError | psycopg.InterfaceError):
        # No SQLSTATE: libpq lost the connection (the server crashed or was killed), failed
        # to connect (refused, timed out, unknown host), or the pool could not hand one out
        # in time.
        if "closed the connection" in str(err):
            return "the PostgreSQL server closed the connection"
        return "the PostgreSQL server cannot be reached"
    return None


def error_kind(err: BaseException, *, suspect: bool = False) -> str | None:
    """'damaged', 'environment' or None (neither: a bug or a bad statement)."""
    code = _code(err)
    if code in DAMAGE_CODES or (suspect and code in _SCHEMA_DAMAGE):
        return "damaged"
    if _environment_cause(err) is not None:
        return "environment"
    return None


def classify(
    err: BaseException,
    settings: PostgresSettings,
    label: str,
    doing: str,
    outcome: str = "",
    *,
    suspect: bool = False,
) -> StoreError:
    """The StoreError for a psycopg error met while ``doing`` something with the index
    ``label``; ``outcome`` says what state the failure left the index in."""
    text = scrub(str(err).strip() or type(err).__name__, settings)
    tail = f" {outcome}" if outcome else ""
    kind = error_kind(err, suspect=suspect)
    if kind == "damaged":
        code = _code(err) or ""
        what = DAMAGE_CODES.get(code) or _SCHEMA_DAMAGE.get(code, "")
        return IndexDamagedError(
            f"the index {label} is damaged ({what}: {text}).{tail} Run 'groove doctor "
            "--repair' to rebuild it from the knowledge base"
        )
    if kind == "environment":
        cause = _environment_cause(err)
        shown = redact(settings.dsn) if settings.dsn else "libpq's PG* defaults"
        return IndexEnvironmentError(
            f"{doing} the index {label} failed: {cause} ({text}; dsn {shown!r}). The cause "
            f"is the environment, not the index.{tail} Fix the cause and try again"
        )
    return StoreError(f"{doing} the index {label} failed: {text}.{tail}")
