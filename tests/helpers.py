"""Helpers several of groove's own test modules share (a third party's tests use
``groove_core.testing``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import click
import pytest

from groove_core.app import Groove
from groove_core.context import QueryContext
from groove_core.hookspecs import hookimpl
from groove_core.models import SearchHit
from groove_core.query import normalize
from groove_core.sqlite import word_table
from groove_core.sqlite.store import VECTORS_VERSION_KEY, Store, connect
from groove_core.testing import make_kb

E = TypeVar("E", bound=BaseException)


def index_content(index: Path) -> set[tuple[str, str, int, str]]:
    """Everything a search can return from a SQLite index, independent of row ids and
    timestamps: two indexes of the same notes compare equal."""
    store = Store.open(index)
    rows = store.conn.execute(
        "SELECT d.path, d.content_hash, c.ordinal, c.content FROM chunks c "
        "JOIN documents d ON d.id = c.doc_id"
    )
    out = {(str(a), str(b), int(c), str(d)) for a, b, c, d in rows}
    store.close()
    return out


def bound_sockets(*paths: Path) -> None:
    """Leave a Unix socket at each of ``paths``, bound and closed, never listening: what a
    server killed before it listened leaves, refusing every connection as a full listen
    queue does."""
    import socket

    for path in paths:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()


def raised_in_one_line(expected: type[E], call: Callable[[], object]) -> E:
    """The ``expected`` error that ``call`` raises, checked to be one line: what a user
    sees of a plugin's or an embedder's failure, never a traceback."""
    with pytest.raises(expected) as caught:
        call()
    assert "\n" not in str(caught.value)
    return caught.value


def batched_kb(tmp_path: Path, notes: int, body: str = "Body {i}.") -> Groove:
    """A KB of ``notes`` small notes, embedded by the hashing embedder four chunks per
    batch, so that an index run goes through several batches; ``body`` may name ``{i}``."""
    texts = {f"n{i:02d}.md": f"# Note {i}\n\n{body.format(i=i)}\n" for i in range(notes)}
    config = '[embedder]\nname = "hashing"\nbatch_size = 4\n'
    return Groove.open(make_kb(tmp_path / "kb", texts, config=config))


#: A hashing embedder slowed by ``{delay}`` seconds a text, written out as a plugin module.
_SLOW_PLUGIN = """
import time

from groove_core.embedding import EmbedderSpec, HashingEmbedder
from groove_core.hookspecs import hookimpl


class Slow(HashingEmbedder):
    @property
    def identity(self):
        return "slow-hashing:64"

    def embed_documents(self, texts):
        time.sleep({delay} * len(texts))
        return super().embed_documents(texts)


@hookimpl
def groove_embedders():
    return [EmbedderSpec("slow-hashing", lambda config, settings: Slow(), "slowed, for tests")]
"""


def slow_embedder_site(tmp_path: Path, module: str, delay: float) -> Path:
    """A folder for PYTHONPATH holding the plugin distribution ``module`` (its embedder
    ``slow-hashing`` sleeps ``delay`` seconds a text), installed as a third party's is, so
    that a ``groove`` subprocess indexes slowly enough to be watched."""
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{module}.py").write_text(_SLOW_PLUGIN.format(delay=delay), encoding="utf-8")
    info = site / f"{module}-1.0.dist-info"
    info.mkdir()
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[groove]\n{module} = {module}\n")
    return site


#: Schema 3's lexical tables: each with its own copy of the text.
SCHEMA_3_LEXICAL = """
CREATE VIRTUAL TABLE fts_chunks USING fts5(
    heading, context, content, tokenize = 'trigram remove_diacritics 1'
);
CREATE VIRTUAL TABLE word_chunks USING fts5(
    heading, context, content, tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE word_vocab USING fts5vocab(word_chunks, 'row');
"""


def to_schema_3(index: Path) -> None:
    """Turn a SQLite index into what groove wrote at schema 3: lexical tables
    filled from the chunks, each with its own copy of the text."""
    conn = connect(index)
    conn.execute("BEGIN")
    for table in ("word_vocab", "word_chunks", "fts_chunks"):
        conn.execute(f"DROP TABLE {table}")
    for statement in SCHEMA_3_LEXICAL.split(";"):
        if statement.strip():
            conn.execute(statement)
    rows = conn.execute("SELECT id, heading, context, content FROM chunks").fetchall()
    for chunk_id, *fields in rows:
        heading, context, content = (normalize(f) for f in fields)
        conn.execute(
            "INSERT INTO fts_chunks(rowid, heading, context, content) VALUES (?, ?, ?, ?)",
            (chunk_id, heading, context, content),
        )
        word_table.insert_row(conn, chunk_id, heading, context, content)
    conn.execute("ALTER TABLE chunks DROP COLUMN sections")  # schema 7's
    conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.execute("DELETE FROM meta WHERE key = ? OR key LIKE 'leg_index:%'", (VECTORS_VERSION_KEY,))
    conn.execute("COMMIT")
    conn.close()


class HelloCommand:
    """A plugin adding the command ``groove hello``, which prints a greeting."""

    @hookimpl
    def groove_cli_commands(self, cli: click.Group) -> None:
        @cli.command("hello")
        def hello() -> None:
            """Say hello."""
            click.echo("hello from a plugin")


class ReverseReranker:
    """A rerank stage that reverses the order of the hits it is given."""

    @hookimpl
    def groove_rerank(self, ctx: QueryContext, hits: list[SearchHit]) -> list[SearchHit]:
        return [replace(h, rank=i) for i, h in enumerate(reversed(hits), start=1)]


def stdio_exchange(
    kb: Path, messages: list[dict[str, Any]], answers: int, *extra: str
) -> tuple[list[dict[str, Any]], bytes]:
    """Write ``messages`` (JSON-RPC, one a line) to a ``groove serve --kb kb`` over stdio,
    read ``answers`` lines back, then close its input (it stops): the answers parsed, and
    its stderr."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "groove_core", "serve", "--kb", str(kb), *extra],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages).encode())
    proc.stdin.flush()
    lines = [proc.stdout.readline() for _ in range(answers)]
    rest, err = proc.communicate(timeout=30)  # closes stdin: the server ends
    assert rest == b"", rest
    return [json.loads(line) for line in lines], err
