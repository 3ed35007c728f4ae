"""The connection settings: passwords never in groove.toml, never in a message."""

from __future__ import annotations

from pathlib import Path

import pytest
from groove_postgres.settings import PostgresSettings, SettingsError, connect_kwargs, redact, scrub
from groove_postgres.store import PostgresStore, PostgresStoreError

from groove_core.app import Groove
from groove_core.config import ConfigError
from groove_core.storage import IndexEnvironmentError
from groove_core.testing import FAST_CONFIG, make_kb

SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        (
            f"postgresql://alice:{SECRET}@db.example:5432/groove",
            "postgresql://alice:***@db.example:5432/groove",
        ),
        (
            f"postgres://alice:{SECRET}@db.example/groove?sslmode=require",
            "postgres://alice:***@db.example/groove?sslmode=require",
        ),
        (
            f"postgresql://db.example/groove?user=alice&password={SECRET}",
            "postgresql://db.example/groove?user=alice&password=***",
        ),
        (
            f"host=db.example user=alice password={SECRET} dbname=groove",
            "host=db.example user=alice password=*** dbname=groove",
        ),
        (
            f"host=db.example password='{SECRET} x' dbname=groove",
            "host=db.example password=*** dbname=groove",
        ),
        ("host=db.example dbname=groove", "host=db.example dbname=groove"),
    ],
)
def test_redact_hides_the_password(dsn: str, shown: str) -> None:
    assert redact(dsn) == shown
    assert SECRET not in redact(dsn)


def test_a_dsn_with_a_password_is_refused_with_the_dsn_redacted() -> None:
    dsn = f"postgresql://alice:{SECRET}@127.0.0.1:1/groove"
    with pytest.raises(SettingsError) as caught:
        connect_kwargs(PostgresSettings(dsn=dsn))
    message = str(caught.value)
    assert "postgresql://alice:***@127.0.0.1:1/groove" in message
    assert SECRET not in message
    # The same through the store: one line, no secret.
    with pytest.raises(PostgresStoreError) as through_store:
        PostgresStore.open(PostgresSettings(dsn=dsn), "kb")
    assert SECRET not in str(through_store.value)
    assert "password_env" in str(through_store.value)


def test_password_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = PostgresSettings(dsn="host=127.0.0.1 dbname=groove", password_env="GROOVE_PG_PW")
    with pytest.raises(SettingsError, match=r"GROOVE_PG_PW.*not set"):
        connect_kwargs(settings)
    monkeypatch.setenv("GROOVE_PG_PW", SECRET)
    params = connect_kwargs(settings)
    assert params["kwargs"]["password"] == SECRET
    assert SECRET not in params["conninfo"]
    assert repr(settings).count(SECRET) == 0


def test_a_failed_connection_names_the_dsn_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GROOVE_PG_PW", SECRET)
    # Port 1 on loopback: nothing listens there; the driver's error comes back scrubbed.
    settings = PostgresSettings(
        dsn="host=127.0.0.1 port=1 user=alice dbname=groove",
        password_env="GROOVE_PG_PW",
        connect_timeout=2,
    )
    with pytest.raises(IndexEnvironmentError) as caught:
        PostgresStore.open(settings, "kb")
    message = str(caught.value)
    assert message.startswith("connecting to the index 'kb' (PostgreSQL) failed:")
    assert "the PostgreSQL server cannot be reached" in message
    assert "dsn 'host=127.0.0.1 port=1 user=alice dbname=groove'" in message
    assert SECRET not in message and "\n" not in message


def test_scrub_removes_secrets_from_driver_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROOVE_PG_PW", SECRET)
    settings = PostgresSettings(dsn="host=h dbname=d", password_env="GROOVE_PG_PW")
    assert scrub(f"failed with {SECRET} in it", settings) == "failed with *** in it"
    inline = PostgresSettings(dsn=f"postgresql://u:{SECRET}@h/d")
    assert scrub(f"cannot reach postgresql://u:{SECRET}@h/d", inline) == (
        "cannot reach postgresql://u:***@h/d"
    )


def test_the_keys_sit_in_the_store_table_of_groove_toml(tmp_path: Path) -> None:
    toml = '[store]\nbackend = "postgres"\ndsn = "service=groove"\nschema = "kbs"\n'
    app = Groove.open(make_kb(tmp_path / "notes", {}, config=FAST_CONFIG + toml))
    settings = app.plugins.settings.get(PostgresSettings)
    assert settings.dsn == "service=groove"
    assert settings.db_schema == "kbs"
    assert settings.ef_search == 100
    assert app.backend.name == "postgres"
    assert app.index_label == "postgres db groove, KB notes"  # the KB key: the KB's name
    with pytest.raises(ValueError, match="schema"):
        PostgresSettings.model_validate({"schema": "bad; DROP"})
    with pytest.raises(ValueError, match="extra"):
        PostgresSettings.model_validate({"dsnn": "x"})
    typo = '[store]\nbackend = "postgres"\ndsnn = "x"\n'
    with pytest.raises(ConfigError, match="dsnn"):
        Groove.open(make_kb(tmp_path / "typo", {}, config=FAST_CONFIG + typo))
    # The plugin's keys are not the core's: groove.toml without them stays valid.
    plain = Groove.open(make_kb(tmp_path / "plain", {}, config=FAST_CONFIG))
    assert plain.backend.name == "sqlite"


@pytest.mark.parametrize("schema", ["information_schema", "pg_catalog", "pg_toast", "pg_groove"])
def test_postgresql_own_schemas_are_refused(tmp_path: Path, schema: str) -> None:
    toml = f'[store]\nbackend = "postgres"\ndsn = "service=groove"\nschema = "{schema}"\n'
    with pytest.raises(ConfigError) as caught:
        Groove.open(make_kb(tmp_path / "notes", {}, config=FAST_CONFIG + toml))
    message = str(caught.value)
    assert "schema" in message and "one of PostgreSQL's own schemas" in message, message
    assert "\n" not in message.strip(), message
    # A name that merely contains them is groove's to use.
    assert PostgresSettings.model_validate({"schema": "my_pg_notes"}).db_schema == "my_pg_notes"
